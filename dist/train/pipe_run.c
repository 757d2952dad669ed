/* The pipeline executor (see pipe_run.h). */
#include "pipe_run.h"

#include <stdlib.h>
#include <string.h>

typedef struct pbuf {
    float *p;      /* cap floats, counted in pool */
    size_t cap;
    rs_pool pool;
    bool used;
} pbuf;

/* A receive expected from one peer, in the peer's send order. */
typedef struct rx {
    rs_pipe_msg msg;
    int buf;       /* index into bufs once posted, else -1 */
    rs_work *w;    /* while in flight */
    size_t n;      /* floats */
} rx;

typedef struct peerq {
    int rank;      /* -1: unused */
    rx *q;
    int n, cap, posted;
} peerq;

typedef struct tx {
    int buf;
    rs_work *w;
} tx;

struct rs_pipe_exec {
    rs_pg *g;
    rs_mem *mem;
    pbuf *bufs;
    int nbufs, capbufs;
    rs_pipe_op *ops;
    int capops;
    peerq peers[2]; /* the ranks before and after this one (the same one with two ranks) */
    tx *tx;
    int ntx, captx;
    size_t in_bytes, peak_in;
};

rs_pipe_exec *rs_pipe_exec_new(rs_pg *g, rs_mem *mem, rs_err *err)
{
    rs_pipe_exec *x = calloc(1, sizeof *x);
    if (!x) {
        rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
        return NULL;
    }
    x->g = g;
    x->mem = mem;
    return x;
}

void rs_pipe_exec_free(rs_pipe_exec *x)
{
    if (!x) return;
    for (int i = 0; i < x->nbufs; i++) rs_mem_free(x->mem, x->bufs[i].pool, x->bufs[i].p, x->bufs[i].cap * sizeof(float));
    free(x->bufs);
    free(x->ops);
    for (int i = 0; i < 2; i++) free(x->peers[i].q);
    free(x->tx);
    free(x);
}

size_t rs_pipe_exec_peak_inputs(const rs_pipe_exec *x) { return x ? x->peak_in : 0; }
size_t rs_pipe_exec_inputs(const rs_pipe_exec *x) { return x ? x->in_bytes : 0; }

/* A free buffer of at least n floats in pool p (the smallest that fits), or a new one; -1: no memory. */
static int acquire(rs_pipe_exec *x, rs_pool p, size_t n)
{
    int best = -1;
    for (int i = 0; i < x->nbufs; i++)
        if (!x->bufs[i].used && x->bufs[i].pool == p && x->bufs[i].cap >= n && (best < 0 || x->bufs[i].cap < x->bufs[best].cap))
            best = i;
    if (best < 0) {
        if (x->nbufs == x->capbufs) {
            int cap = x->capbufs ? 2 * x->capbufs : 16;
            pbuf *b = realloc(x->bufs, sizeof *b * (size_t)cap);
            if (!b) return -1;
            x->bufs = b;
            x->capbufs = cap;
        }
        float *mem = rs_mem_alloc(x->mem, p, (n ? n : 1) * sizeof(float));
        if (!mem) return -1;
        x->bufs[x->nbufs] = (pbuf){mem, n ? n : 1, p, false};
        best = x->nbufs++;
    }
    x->bufs[best].used = true;
    return best;
}

static void release(rs_pipe_exec *x, int b)
{
    if (b >= 0) x->bufs[b].used = false;
}

static peerq *peer_of(rs_pipe_exec *x, int rank)
{
    for (int i = 0; i < 2; i++)
        if (x->peers[i].rank == rank) return &x->peers[i];
    return NULL;
}

/* Posts the next expected receive from peer q. */
static rs_status post_next(rs_pipe_exec *x, peerq *q, rs_err *err)
{
    rx *r = &q->q[q->posted];
    int b = acquire(x, r->msg.kind == 'A' ? RS_POOL_ACTS : RS_POOL_COMM, r->n);
    if (b < 0) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory for a message of %zu floats", r->n);
    rs_status st = rs_pg_irecv(x->g, x->bufs[b].p, r->n, RS_F32, q->rank, &r->w, err);
    if (st) {
        release(x, b);
        return st;
    }
    r->buf = b;
    q->posted++;
    if (r->msg.kind == 'A') {
        x->in_bytes += r->n * sizeof(float);
        if (x->in_bytes > x->peak_in) x->peak_in = x->in_bytes;
    }
    return RS_OK;
}

/* The received message (kind, micro, stage): posted (with those before it from the same peer) and
 * waited for; one more is posted ahead so the next transfer runs during the next computation. Its
 * buffer index into *buf. */
static rs_status need(rs_pipe_exec *x, char kind, int micro, int stage, int P, int *buf, rs_err *err)
{
    int from = kind == 'A' ? (stage - 1) % P : (stage + 1) % P;
    peerq *q = peer_of(x, from);
    int i = 0;
    while (q && i < q->n && !(q->q[i].msg.kind == kind && q->q[i].msg.micro == micro && q->q[i].msg.stage == stage))
        i++;
    if (!q || i == q->n)
        return rs_err_set(err, RS_ERR_INTERNAL, "pipeline: no message %c for micro-batch %d of stage %d from rank %d",
                          kind, micro, stage, from);
    rs_status st = RS_OK;
    while (!st && q->posted <= i) st = post_next(x, q, err);
    if (!st && q->posted < q->n) st = post_next(x, q, err);
    rx *r = &q->q[i];
    if (!st && r->w) {
        st = rs_work_wait(r->w, err);
        rs_work_free(r->w);
        r->w = NULL;
    }
    if (st)
        return rs_err_prefix(err, "pipeline stage %d (rank %d): waiting for micro-batch %d's %s from rank %d", stage,
                             rs_pg_global_rank(x->g, x->g->rank), micro, kind == 'A' ? "activation" : "gradient",
                             rs_pg_global_rank(x->g, from));
    *buf = r->buf;
    return RS_OK;
}

/* The buffer a received message sits in (after need() returned it). */
static rx *find_rx(rs_pipe_exec *x, char kind, int micro, int stage, int P)
{
    peerq *q = peer_of(x, kind == 'A' ? (stage - 1) % P : (stage + 1) % P);
    for (int i = 0; q && i < q->posted; i++)
        if (q->q[i].msg.kind == kind && q->q[i].msg.micro == micro && q->q[i].msg.stage == stage) return &q->q[i];
    return NULL;
}

static rs_status send_buf(rs_pipe_exec *x, int b, size_t n, int dst, rs_err *err)
{
    if (x->ntx == x->captx) {
        int cap = x->captx ? 2 * x->captx : 16;
        tx *t = realloc(x->tx, sizeof *t * (size_t)cap);
        if (!t) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
        x->tx = t;
        x->captx = cap;
    }
    rs_work *w = NULL;
    rs_status st = rs_pg_isend(x->g, x->bufs[b].p, n, RS_F32, dst, &w, err);
    if (st) return st;
    x->tx[x->ntx++] = (tx){b, w};
    return RS_OK;
}

/* Moves the transfers in flight along and drops the finished sends (their buffers go back). */
static rs_status pump(rs_pipe_exec *x, rs_err *err)
{
    for (int i = 0; i < x->ntx;) {
        bool done = false;
        rs_status st = rs_work_test(x->tx[i].w, &done, err);
        if (st) return st;
        if (!done) {
            i++;
            continue;
        }
        rs_work_free(x->tx[i].w);
        release(x, x->tx[i].buf);
        x->tx[i] = x->tx[--x->ntx];
    }
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < x->peers[p].posted; i++) {
            rx *r = &x->peers[p].q[i];
            bool done = false;
            if (!r->w) continue;
            rs_status st = rs_work_test(r->w, &done, err);
            if (st) return st;
        }
    return RS_OK;
}

/* The expected receives from `from`, in its send order. */
static rs_status plan_peer(rs_pipe_exec *x, peerq *q, int from, rs_pipe_kind k, int M, int V, const rs_pipe_io *io,
                           rs_err *err)
{
    int P = x->g->world, n = rs_pipe_messages(k, P, M, V, from, x->g->rank, NULL, 0);
    if (n < 0) return rs_err_set(err, RS_ERR_ARG, "pipeline: no schedule %s for %d ranks, micro=%d, virtual=%d",
                                 rs_pipe_kind_name(k), P, M, V);
    if (n > q->cap) {
        rx *r = realloc(q->q, sizeof *r * (size_t)n);
        if (!r) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
        q->q = r;
        q->cap = n;
    }
    rs_pipe_msg *m = malloc(sizeof *m * (size_t)(n ? n : 1));
    if (!m) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
    rs_pipe_messages(k, P, M, V, from, x->g->rank, m, n);
    for (int i = 0; i < n; i++)
        q->q[i] = (rx){m[i], -1, NULL, io->numel(io->ud, m[i].micro, m[i].kind == 'A' ? m[i].stage : m[i].stage + 1)};
    free(m);
    q->rank = from;
    q->n = n;
    q->posted = 0;
    return RS_OK;
}

/* After a failure: whatever is in flight is abandoned (the peers time out or are stopped). */
static void abandon(rs_pipe_exec *x)
{
    for (int i = 0; i < x->ntx; i++) rs_work_free(x->tx[i].w);
    x->ntx = 0;
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < x->peers[p].posted; i++) {
            rs_work_free(x->peers[p].q[i].w);
            x->peers[p].q[i].w = NULL;
        }
    for (int i = 0; i < x->nbufs; i++) x->bufs[i].used = false;
}

rs_status rs_pipe_exec_step(rs_pipe_exec *x, rs_pipe_kind k, int M, int V, const rs_pipe_io *io, int64_t step,
                            rs_dtrain_work_fn work, void *work_ud, rs_err *err)
{
    int P = x->g->world, r = x->g->rank, S = P * V, total = 2 * M * V;
    if (P < 2) return rs_err_set(err, RS_ERR_ARG, "pipeline: needs at least 2 ranks, one per stage");
    rs_status st = rs_pipe_check(k, P, M, V, err);
    if (st) return st;
    if (total > x->capops) {
        rs_pipe_op *o = realloc(x->ops, sizeof *o * (size_t)total);
        if (!o) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
        x->ops = o;
        x->capops = total;
    }
    rs_pipe_schedule(k, P, M, V, r, x->ops);
    x->peers[0].rank = x->peers[1].rank = -1;
    x->peers[0].n = x->peers[1].n = 0;
    int prev = (r + P - 1) % P, next = (r + 1) % P;
    st = plan_peer(x, &x->peers[0], prev, k, M, V, io, err);
    if (!st && next != prev) st = plan_peer(x, &x->peers[1], next, k, M, V, io, err);
    if (st) return st;
    x->in_bytes = x->peak_in = 0;
    for (int i = 0; i < total && !st; i++) {
        const rs_pipe_op *o = &x->ops[i];
        int s = o->stage, in_buf = -1, g_buf = -1;
        st = pump(x, err);
        if (st) break;
        if (o->kind == 'F') {
            if (s > 0) st = need(x, 'A', o->micro, s, P, &in_buf, err);
            if (st) break;
            const float *out = NULL;
            double t0 = rs_train_now();
            st = io->forward(io->ud, o->micro, o->chunk, in_buf >= 0 ? x->bufs[in_buf].p : NULL, &out, err);
            double t1 = rs_train_now();
            if (st) break;
            if (work) work(work_ud, step, 'F', o->micro, s, t0, t1);
            if (s + 1 < S) {
                size_t n = io->numel(io->ud, o->micro, s + 1);
                int b = acquire(x, RS_POOL_COMM, n);
                if (b < 0) {
                    st = rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory for a message of %zu floats", n);
                    break;
                }
                memcpy(x->bufs[b].p, out, n * sizeof(float));
                st = send_buf(x, b, n, (s + 1) % P, err);
                if (st) release(x, b);
            }
        } else {
            rx *a = s > 0 ? find_rx(x, 'A', o->micro, s, P) : NULL;
            if (s + 1 < S) st = need(x, 'G', o->micro, s, P, &g_buf, err);
            if (st) break;
            int d = -1;
            size_t n = s > 0 ? io->numel(io->ud, o->micro, s) : 0;
            if (s > 0 && (d = acquire(x, RS_POOL_COMM, n)) < 0) {
                st = rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory for a message of %zu floats", n);
                break;
            }
            double t0 = rs_train_now();
            st = io->backward(io->ud, o->micro, o->chunk, a ? x->bufs[a->buf].p : NULL,
                              g_buf >= 0 ? x->bufs[g_buf].p : NULL, d >= 0 ? x->bufs[d].p : NULL, err);
            double t1 = rs_train_now();
            if (st) break;
            if (work) work(work_ud, step, 'B', o->micro, s, t0, t1);
            /* the stage's input is no longer needed: its memory is free for the next micro-batch */
            if (a) {
                release(x, a->buf);
                x->in_bytes -= a->n * sizeof(float);
                a->buf = -1;
            }
            release(x, g_buf);
            if (g_buf >= 0) find_rx(x, 'G', o->micro, s, P)->buf = -1;
            if (d >= 0) {
                st = send_buf(x, d, n, (s - 1) % P, err);
                if (st) release(x, d);
            }
        }
    }
    /* the last sends must arrive before the step ends (the next one reuses the buffers) */
    while (!st && x->ntx > 0) {
        st = rs_work_wait(x->tx[x->ntx - 1].w, err);
        if (st) break;
        rs_work_free(x->tx[x->ntx - 1].w);
        release(x, x->tx[x->ntx - 1].buf);
        x->ntx--;
    }
    if (st) {
        if (err && !strstr(err->msg, "pipeline stage"))
            rs_err_prefix(err, "pipeline stage %d (rank %d)", r, rs_pg_global_rank(x->g, r));
        abandon(x);
    }
    return st;
}
