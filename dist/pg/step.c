/* The algorithms of the step-based backends (see step.h), written once over the transport: ring,
 * binomial tree and recursive doubling all_reduce, trees for broadcast and reduce, rings for
 * all_gather and reduce_scatter, pairwise exchange for all_to_all, dissemination barrier, and the
 * immediate point-to-point transfers with their pending list. */
#include "step.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- running transfers */

typedef struct step_work {
    rs_work base;
    rs_pg_xfer x;
    bool listed;            /* still on g->pending */
} step_work;

static rs_pg_xfer *xfer_of(rs_work *w) { return &((step_work *)w)->x; }

static bool send_open(const rs_pg_xfer *x) { return x->to >= 0 && x->soff < x->sbytes; }
static bool recv_open(const rs_pg_xfer *x) { return x->from >= 0 && x->roff < x->rbytes; }

/* A side may move only when no older transfer still has that side open with the same peer. */
static void set_holds(rs_pg *g, rs_pg_xfer *y)
{
    y->hold_send = y->hold_recv = false;
    for (rs_work *w = g->pending; w; w = w->next) {
        rs_pg_xfer *z = xfer_of(w);
        if (z == y) break;
        if (send_open(z) && z->to == y->to) y->hold_send = true;
        if (recv_open(z) && z->from == y->from) y->hold_recv = true;
    }
}

/* Drops finished transfers from the pending list (their works stay valid until freed). */
static void prune(rs_pg *g)
{
    for (rs_work **p = &g->pending; *p;) {
        step_work *w = (step_work *)*p;
        if (rs_xfer_done(&w->x)) {
            w->listed = false;
            *p = w->base.next;
            w->base.next = NULL;
        } else {
            p = &w->base.next;
        }
    }
}

/* One round over the pending transfers, oldest first, then `cur` (a blocking one, newest of all). */
static bool pump(rs_pg *g, rs_pg_xfer *cur, rs_status *st, rs_err *err)
{
    const rs_pg_transport *tp = g->ops->transport;
    bool moved = false;
    for (rs_work *w = g->pending; w && !*st; w = w->next) {
        rs_pg_xfer *y = xfer_of(w);
        if (rs_xfer_done(y)) continue;
        set_holds(g, y);
        if (tp->progress(g, y, st, err)) moved = true;
    }
    if (cur && !*st && !rs_xfer_done(cur)) {
        set_holds(g, cur);
        if (tp->progress(g, cur, st, err)) moved = true;
    }
    if (g->pending) prune(g);
    return moved;
}

/* Runs until `target` is done. The timeout counts from the last progress of anything, so a long but
 * moving transfer never times out; when it passes, the message names the peers target still waits on. */
static rs_status run_until(rs_pg *g, rs_pg_xfer *cur, rs_pg_xfer *target, rs_pg_opkind op, rs_pg_algo algo,
                           rs_err *err)
{
    const rs_pg_transport *tp = g->ops->transport;
    double last = rs_pg_now();
    unsigned idle = 0;
    for (;;) {
        rs_status st = RS_OK;
        bool moved = pump(g, cur, &st, err);
        if (st) {
            rs_err_prefix(err, "%s (%s, step %d of %d) on rank %d", rs_pg_op_name(op), rs_pg_algo_name(algo),
                          target->step + 1, target->steps, rs_pg_global_rank(g, g->rank));
            return st;
        }
        if (rs_xfer_done(target)) return RS_OK;
        if (moved) {
            idle = 0;
            last = rs_pg_now();
            continue;
        }
        idle++;
        tp->idle(g, idle);
        if ((idle & 15) == 0 && rs_pg_now() - last > g->timeout_s) {
            char who[128] = "";
            bool rdone = !recv_open(target), sdone = !send_open(target);
            if (!rdone)
                snprintf(who, sizeof who, "rank %d (its data never came)", rs_pg_global_rank(g, target->from));
            if (!sdone)
                snprintf(who + strlen(who), sizeof who - strlen(who), "%srank %d (it never took ours)",
                         rdone ? "" : " and ", rs_pg_global_rank(g, target->to));
            return rs_err_set(err, RS_ERR_TIMEOUT,
                              "%s (%s, step %d of %d): rank %d timed out after %.1f s waiting for %s; "
                              "it may have exited or be stuck",
                              rs_pg_op_name(op), rs_pg_algo_name(algo), target->step + 1, target->steps,
                              rs_pg_global_rank(g, g->rank), g->timeout_s, who);
        }
        if (idle > (1u << 30)) idle = 1u << 20; /* stay in the sleeping phase */
    }
}

rs_status rs_step_run(rs_pg *g, rs_pg_xfer *x, rs_err *err)
{
    return run_until(g, x, x, g->cur_op, g->cur_algo, err);
}

/* ---------------------------------------------------------------- immediate transfers */

static rs_status work_wait(rs_work *w, rs_err *err)
{
    step_work *s = (step_work *)w;
    if (rs_xfer_done(&s->x)) return RS_OK;
    return run_until(w->g, NULL, &s->x, w->op, RS_ALGO_AUTO, err);
}

static rs_status work_test(rs_work *w, bool *done, rs_err *err)
{
    step_work *s = (step_work *)w;
    rs_status st = RS_OK;
    if (!rs_xfer_done(&s->x)) pump(w->g, NULL, &st, err);
    *done = !st && rs_xfer_done(&s->x);
    return st;
}

static void work_free(rs_work *w)
{
    step_work *s = (step_work *)w;
    if (s->listed)
        for (rs_work **p = &w->g->pending; *p; p = &(*p)->next)
            if (*p == w) {
                *p = w->next;
                break;
            }
    free(s);
}

static void trace_step(rs_pg *g, int step, int steps, int peer, int chunk, size_t bytes);

/* Posts the transfer and moves it as far as it goes without waiting (a small message is often done
 * before isend returns, as with MPI's eager protocol). */
static rs_status post(rs_pg *g, rs_pg_opkind op, int to, const void *sp, int from, void *rp, size_t bytes,
                      rs_work **out, rs_err *err)
{
    step_work *w = calloc(1, sizeof *w);
    if (!w) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", rs_pg_op_name(op));
    w->base = (rs_work){.g = g, .op = op, .bytes = bytes, .wait = work_wait, .test = work_test, .free = work_free};
    w->x = (rs_pg_xfer){.to = to, .from = from, .sp = sp, .rp = rp, .sbytes = to >= 0 ? bytes : 0,
                        .rbytes = from >= 0 ? bytes : 0, .mode = RS_XF_COPY, .t = RS_I32, .steps = 1};
    g->cur_op = op;
    g->cur_algo = RS_ALGO_AUTO;
    g->work = NULL;
    trace_step(g, 0, 1, to, 0, bytes);
    rs_work **tail = &g->pending;
    while (*tail) tail = &(*tail)->next;
    *tail = &w->base;
    w->listed = true;
    rs_status st = RS_OK;
    pump(g, NULL, &st, err);
    if (st) {
        work_free(&w->base);
        return st;
    }
    *out = &w->base;
    return RS_OK;
}

rs_status rs_step_isend(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_work **out, rs_err *err)
{
    return post(g, RS_OP_SEND, dst, buf, -1, NULL, n * rs_dtype_size(t), out, err);
}

rs_status rs_step_irecv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_work **out, rs_err *err)
{
    return post(g, RS_OP_RECV, -1, NULL, src, buf, n * rs_dtype_size(t), out, err);
}

rs_status rs_step_pg_alloc(const rs_pg_ops *ops, rs_store *store, const char *name, int rank, int world,
                           int max_world, double timeout_s, rs_pg **out, rs_err *err)
{
    *out = NULL;
    if (!store || !name || !*name || strlen(name) >= sizeof(((rs_pg *)0)->name))
        return rs_err_set(err, RS_ERR_ARG, "%s: need a store and a group name of 1..63 characters", ops->name);
    if (world < 1 || world > max_world || rank < 0 || rank >= world)
        return rs_err_set(err, RS_ERR_ARG, "%s: rank %d of world %d is out of range (world 1..%d, rank 0..world-1)",
                          ops->name, rank, world, max_world);
    if (!(timeout_s > 0)) return rs_err_set(err, RS_ERR_ARG, "%s: timeout must be positive, got %g", ops->name, timeout_s);
    rs_pg *g = calloc(1, sizeof *g);
    if (!g) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", ops->name);
    *g = (rs_pg){.ops = ops, .rank = rank, .world = world, .timeout_s = timeout_s, .store = store};
    snprintf(g->name, sizeof g->name, "%s", name);
    *out = g;
    return RS_OK;
}

/* ---------------------------------------------------------------- steps */

static void trace_step(rs_pg *g, int step, int steps, int peer, int chunk, size_t bytes)
{
    if (!g->trace) return;
    rs_pg_event ev = {.kind = RS_PG_EV_STEP, .op = g->cur_op, .algo = g->cur_algo, .coll = g->coll,
                      .step = step, .steps = steps, .rank = g->rank, .peer = peer, .chunk = chunk,
                      .bytes = bytes, .t = rs_pg_now(), .data = g->work, .count = g->work_count,
                      .dtype = g->work_dtype, .blocks = g->work_blocks};
    rs_pg_emit(g, &ev);
}

/* One traced step; `chunk` is the block index the step moves (for the dashboard). Only the in-place
 * exchange of recursive doubling needs the canonical order: there both partners compute the result. */
static rs_status step(rs_pg *g, int k, int K, int chunk, int to, const void *sp, size_t sbytes, int from, void *rp,
                      size_t rbytes, rs_xf_mode mode, rs_dtype t, rs_redop op, bool after_send, rs_err *err)
{
    trace_step(g, k, K, to, chunk, to >= 0 ? sbytes : rbytes);
    rs_pg_xfer x = {.to = to, .from = from, .sp = sp, .rp = rp, .sbytes = to >= 0 ? sbytes : 0,
              .rbytes = from >= 0 ? rbytes : 0, .mode = mode, .t = t, .op = op,
              .peer_first = after_send && from >= 0 && from < g->rank, .after_send = after_send, .step = k, .steps = K};
    return rs_step_run(g, &x, err);
}

static void begin_op(rs_pg *g, rs_pg_opkind op, rs_pg_algo algo)
{
    g->cur_op = op;
    g->cur_algo = algo;
    g->work = NULL;
}

/* The buffer the operation works in, which its step events carry (a class watches the partial sums). */
static void watch(rs_pg *g, const void *buf, size_t n, rs_dtype t, int blocks)
{
    g->work = buf;
    g->work_count = n;
    g->work_dtype = t;
    g->work_blocks = blocks;
}

static int ceil_log2(int w)
{
    int k = 0;
    while ((1 << k) < w) k++;
    return k;
}

/* Block b of n elements split over w: uneven when w does not divide n (sizes differ by at most one). */
static size_t blk_off(size_t n, int w, int b) { return n * (size_t)b / (size_t)w; }
static size_t blk_len(size_t n, int w, int b) { return blk_off(n, w, b + 1) - blk_off(n, w, b); }

/* ---------------------------------------------------------------- point to point */

rs_status rs_step_send(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_err *err)
{
    begin_op(g, RS_OP_SEND, RS_ALGO_AUTO);
    return step(g, 0, 1, 0, dst, buf, n * rs_dtype_size(t), -1, NULL, 0, RS_XF_COPY, t, RS_SUM, false, err);
}

rs_status rs_step_recv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_err *err)
{
    begin_op(g, RS_OP_RECV, RS_ALGO_AUTO);
    return step(g, 0, 1, 0, -1, NULL, 0, src, buf, n * rs_dtype_size(t), RS_XF_COPY, t, RS_SUM, false, err);
}

/* Dissemination barrier: in step k each rank signals rank+2^k and hears from rank-2^k; after
 * ceil(log2 n) steps every rank has (transitively) heard from all. */
rs_status rs_step_barrier(rs_pg *g, rs_err *err)
{
    begin_op(g, RS_OP_BARRIER, RS_ALGO_AUTO);
    int w = g->world, r = g->rank, K = ceil_log2(w);
    char token = 1, got = 0;
    for (int k = 0; k < K; k++) {
        int d = 1 << k;
        rs_status st = step(g, k, K, 0, (r + d) % w, &token, 1, (r - d + w) % w, &got, 1, RS_XF_COPY, RS_I32,
                            RS_SUM, false, err);
        if (st) return st;
    }
    return RS_OK;
}

/* ---------------------------------------------------------------- trees */

/* Binomial tree from root: rank vr (relative to root) receives from vr minus its lowest set bit, then
 * sends to vr + 2^j for the bits below it. ceil(log2 n) levels, the widest distance first: level j is
 * step K-1-j, counted from `first` of `steps` (an all_reduce's broadcast follows its reduction). */
static rs_status bcast_tree(rs_pg *g, void *buf, size_t n, rs_dtype t, int root, int first, int steps, rs_err *err)
{
    int w = g->world, vr = (g->rank - root + w) % w, K = ceil_log2(w);
    size_t bytes = n * rs_dtype_size(t);
    int mask = 1, lvl = 0;
    while (mask < w) {
        if (vr & mask) {
            rs_status st = step(g, first + K - 1 - lvl, steps, 0, -1, NULL, 0, (vr - mask + root) % w, buf, bytes,
                                RS_XF_COPY, t, RS_SUM, false, err);
            if (st) return st;
            break;
        }
        mask <<= 1;
        lvl++;
    }
    for (mask >>= 1, lvl--; mask > 0; mask >>= 1, lvl--) {
        if (vr + mask < w) {
            rs_status st = step(g, first + K - 1 - lvl, steps, 0, (vr + mask + root) % w, buf, bytes, -1, NULL, 0,
                                RS_XF_COPY, t, RS_SUM, false, err);
            if (st) return st;
        }
    }
    return RS_OK;
}

/* Binomial reduction to root: at level j (step j of `steps`), ranks with bit j set send their partial
 * result down and stop; the others fold in vr + 2^j's. buf is the accumulator (the caller keeps the
 * input safe). */
static rs_status reduce_tree(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, int root, int steps,
                             rs_err *err)
{
    int w = g->world, vr = (g->rank - root + w) % w, K = steps;
    size_t bytes = n * rs_dtype_size(t);
    for (int mask = 1, lvl = 0; mask < w; mask <<= 1, lvl++) {
        rs_status st = RS_OK;
        if (vr & mask) {
            st = step(g, lvl, K, 0, (vr - mask + root) % w, buf, bytes, -1, NULL, 0, RS_XF_COPY, t, op, false, err);
            return st;
        }
        if (vr + mask < w) {
            rs_pg_xfer x = {.to = -1, .from = (vr + mask + root) % w, .rp = buf, .rbytes = bytes, .mode = RS_XF_REDUCE,
                      .t = t, .op = op, .peer_first = false, .step = lvl, .steps = K};
            trace_step(g, lvl, K, -1, 0, bytes);
            st = rs_step_run(g, &x, err);
        }
        if (st) return st;
    }
    return RS_OK;
}

rs_status rs_step_broadcast(rs_pg *g, void *buf, size_t n, rs_dtype t, int root, rs_err *err)
{
    begin_op(g, RS_OP_BROADCAST, RS_ALGO_TREE);
    watch(g, buf, n, t, 1);
    return bcast_tree(g, buf, n, t, root, 0, ceil_log2(g->world), err);
}

/* Non-root inputs stay as they were (torch leaves them alone): a rank with children accumulates in a
 * copy. The root divides once for AVG. */
rs_status rs_step_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, int root, rs_err *err)
{
    begin_op(g, RS_OP_REDUCE, RS_ALGO_TREE);
    size_t bytes = n * rs_dtype_size(t);
    void *acc = buf;
    if (g->rank != root && bytes) {
        acc = malloc(bytes);
        if (!acc) return rs_err_set(err, RS_ERR_NOMEM, "reduce: out of memory for %zu bytes", bytes);
        memcpy(acc, buf, bytes);
    }
    watch(g, acc, n, t, 1);
    rs_status st = reduce_tree(g, acc, n, t, op, root, ceil_log2(g->world), err);
    if (acc != buf) free(acc);
    if (!st && g->rank == root && op == RS_AVG) rs_pg_scale_avg(buf, n, t, g->world);
    return st;
}

/* ---------------------------------------------------------------- all_reduce */

/* Ring: reduce-scatter (rank r ends owning block r+1 fully reduced), then all-gather that copies each
 * owner's block, so every rank holds the same bits. 2(n-1) steps, each moving ~1/n of the buffer. */
static rs_status allreduce_ring(rs_pg *g, char *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err)
{
    int w = g->world, r = g->rank, K = 2 * (w - 1), nxt = (r + 1) % w, prv = (r - 1 + w) % w;
    size_t es = rs_dtype_size(t);
    for (int s = 0; s < w - 1; s++) {
        int sb = ((r - s) % w + w) % w, rb = ((r - s - 1) % w + w) % w;
        rs_status st = step(g, s, K, sb, nxt, buf + blk_off(n, w, sb) * es, blk_len(n, w, sb) * es, prv,
                            buf + blk_off(n, w, rb) * es, blk_len(n, w, rb) * es, RS_XF_REDUCE, t, op, false, err);
        if (st) return st;
    }
    for (int s = 0; s < w - 1; s++) {
        int sb = ((r + 1 - s) % w + w) % w, rb = ((r - s) % w + w) % w;
        rs_status st = step(g, w - 1 + s, K, sb, nxt, buf + blk_off(n, w, sb) * es, blk_len(n, w, sb) * es, prv,
                            buf + blk_off(n, w, rb) * es, blk_len(n, w, rb) * es, RS_XF_COPY, t, op, false, err);
        if (st) return st;
    }
    return RS_OK;
}

/* Recursive doubling over p = 2^floor(log2 n) ranks; the first 2*(n-p) ranks fold pairwise first (the
 * even one hands its data to the odd one and gets the result back at the end). Partners combine lower
 * rank's data first, so both compute the same bits. */
static rs_status allreduce_recdbl(rs_pg *g, char *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err)
{
    int w = g->world, r = g->rank, p = 1;
    while (p * 2 <= w) p *= 2;
    int rem = w - p, L = ceil_log2(p), K = L + (rem ? 2 : 0), k = 0;
    size_t bytes = n * rs_dtype_size(t);
    rs_status st = RS_OK;
    int vr;
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            st = step(g, 0, K, 0, r + 1, buf, bytes, -1, NULL, 0, RS_XF_COPY, t, op, false, err);
            if (st) return st;
            return step(g, K - 1, K, 0, -1, NULL, 0, r + 1, buf, bytes, RS_XF_COPY, t, op, false, err);
        }
        st = step(g, 0, K, 0, -1, NULL, 0, r - 1, buf, bytes, RS_XF_REDUCE, t, op, false, err);
        if (st) return st;
        vr = r / 2;
    } else {
        vr = r - rem;
    }
    if (rem) k = 1;
    for (int mask = 1; mask < p; mask <<= 1, k++) {
        int vp = vr ^ mask, peer = vp < rem ? vp * 2 + 1 : vp + rem;
        st = step(g, k, K, 0, peer, buf, bytes, peer, buf, bytes, RS_XF_REDUCE, t, op, true, err);
        if (st) return st;
    }
    if (r < 2 * rem) st = step(g, K - 1, K, 0, r - 1, buf, bytes, -1, NULL, 0, RS_XF_COPY, t, op, false, err);
    return st;
}

/* AUTO: recursive doubling below 64 KiB (log2 n latency-bound steps), ring from there (bandwidth). */
#define STEP_AUTO_RING_BYTES (64u << 10)

rs_status rs_step_all_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err)
{
    rs_pg_algo a = g->algo;
    if (a == RS_ALGO_AUTO || a >= RS_ALGO_COUNT)
        a = n * rs_dtype_size(t) < STEP_AUTO_RING_BYTES ? RS_ALGO_RECDOUBLING : RS_ALGO_RING;
    begin_op(g, RS_OP_ALL_REDUCE, a);
    watch(g, buf, n, t, a == RS_ALGO_RING ? g->world : 1);
    rs_status st = RS_OK;
    if (g->world > 1) {
        if (a == RS_ALGO_RING) st = allreduce_ring(g, buf, n, t, op, err);
        else if (a == RS_ALGO_TREE) {
            /* reduce to rank 0, then broadcast: 2 ceil(log2 n) steps */
            int K = ceil_log2(g->world);
            st = reduce_tree(g, buf, n, t, op, 0, 2 * K, err);
            if (!st) st = bcast_tree(g, buf, n, t, 0, K, 2 * K, err);
        } else st = allreduce_recdbl(g, buf, n, t, op, err);
    }
    if (!st && op == RS_AVG) rs_pg_scale_avg(buf, n, t, g->world);
    return st;
}

/* ---------------------------------------------------------------- rings and pairs */

rs_status rs_step_all_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err)
{
    begin_op(g, RS_OP_ALL_GATHER, RS_ALGO_RING);
    int w = g->world, r = g->rank, K = w - 1;
    size_t b = n * rs_dtype_size(t);
    char *out = recv;
    if (out + (size_t)r * b != (const char *)send) memmove(out + (size_t)r * b, send, b);
    watch(g, out, n * (size_t)w, t, w);
    for (int s = 0; s < w - 1; s++) {
        int sb = (r - s + w) % w, rb = (r - s - 1 + w) % w;
        rs_status st = step(g, s, K, sb, (r + 1) % w, out + (size_t)sb * b, b, (r - 1 + w) % w, out + (size_t)rb * b,
                            b, RS_XF_COPY, t, RS_SUM, false, err);
        if (st) return st;
    }
    return RS_OK;
}

/* Ring reduce-scatter shifted by one so rank r ends owning block r; works on a copy of send. */
rs_status rs_step_reduce_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_redop op,
                                    rs_err *err)
{
    begin_op(g, RS_OP_REDUCE_SCATTER, RS_ALGO_RING);
    int w = g->world, r = g->rank, K = w - 1;
    size_t b = n * rs_dtype_size(t);
    char *acc = malloc(b * (size_t)w + 1);
    if (!acc) return rs_err_set(err, RS_ERR_NOMEM, "reduce_scatter: out of memory for %zu bytes", b * (size_t)w);
    if (b) memcpy(acc, send, b * (size_t)w);
    watch(g, acc, n * (size_t)w, t, w);
    rs_status st = RS_OK;
    for (int s = 0; s < w - 1 && !st; s++) {
        int sb = ((r - s - 1) % w + w) % w, rb = ((r - s - 2) % w + w) % w;
        st = step(g, s, K, sb, (r + 1) % w, acc + (size_t)sb * b, b, (r - 1 + w) % w, acc + (size_t)rb * b, b,
                  RS_XF_REDUCE, t, op, false, err);
    }
    if (!st) {
        memmove(recv, acc + (size_t)r * b, b);
        if (op == RS_AVG) rs_pg_scale_avg(recv, n, t, w);
    }
    free(acc);
    return st;
}

rs_status rs_step_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err)
{
    begin_op(g, RS_OP_SCATTER, RS_ALGO_AUTO);
    int w = g->world, K = w - 1;
    size_t b = n * rs_dtype_size(t);
    watch(g, recv, n, t, 1);
    if (g->rank != root) return step(g, 0, 1, g->rank, -1, NULL, 0, root, recv, b, RS_XF_COPY, t, RS_SUM, false, err);
    for (int s = 1; s < w; s++) {
        int dst = (root + s) % w;
        rs_status st = step(g, s - 1, K, dst, dst, (const char *)send + (size_t)dst * b, b, -1, NULL, 0, RS_XF_COPY, t,
                            RS_SUM, false, err);
        if (st) return st;
    }
    memmove(recv, (const char *)send + (size_t)root * b, b);
    return RS_OK;
}

rs_status rs_step_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err)
{
    begin_op(g, RS_OP_GATHER, RS_ALGO_AUTO);
    int w = g->world, K = w - 1;
    size_t b = n * rs_dtype_size(t);
    if (g->rank == root) watch(g, recv, n * (size_t)w, t, w);
    if (g->rank != root) return step(g, 0, 1, g->rank, root, send, b, -1, NULL, 0, RS_XF_COPY, t, RS_SUM, false, err);
    memmove((char *)recv + (size_t)root * b, send, b);
    for (int s = 1; s < w; s++) {
        int src = (root + s) % w;
        rs_status st = step(g, s - 1, K, src, -1, NULL, 0, src, (char *)recv + (size_t)src * b, b, RS_XF_COPY, t,
                            RS_SUM, false, err);
        if (st) return st;
    }
    return RS_OK;
}

/* Pairwise exchange: in step s rank r sends its block for r+s and receives r-s's block for it. */
rs_status rs_step_all_to_all(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err)
{
    begin_op(g, RS_OP_ALL_TO_ALL, RS_ALGO_AUTO);
    int w = g->world, r = g->rank, K = w - 1;
    size_t b = n * rs_dtype_size(t);
    memmove((char *)recv + (size_t)r * b, (const char *)send + (size_t)r * b, b);
    watch(g, recv, n * (size_t)w, t, w);
    for (int s = 1; s < w; s++) {
        int to = (r + s) % w, from = (r - s + w) % w;
        rs_status st = step(g, s - 1, K, to, to, (const char *)send + (size_t)to * b, b, from,
                            (char *)recv + (size_t)from * b, b, RS_XF_COPY, t, RS_SUM, false, err);
        if (st) return st;
    }
    return RS_OK;
}

