/* Worker mode (see worker.h): one rank joins its group and runs `collective`, `bench` or `p2p`. */
#define _GNU_SOURCE
#include "worker.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/launch/bind.h"
#include "dist/launch/launch.h"
#include "dist/launch/rank_status.h"
#include "dist/store/store.h"
#include "pi.h"

/* ---------------------------------------------------------------- arguments */

typedef struct wk {
    FILE *out, *errf;
    int rank, world;
    rs_pg *g;
    rs_store *store;
    rs_store_server *server; /* when this rank hosts the store (started by hand, rank 0) */
    struct rs_rank_status *status; /* this rank's slot on the launcher's board, or NULL */
    /* job options (key=value), with defaults */
    const char *backend, *group;
    rs_pg_opkind op;
    rs_dtype dtype;
    rs_redop redop;
    rs_pg_algo algo;
    uint64_t count, minbytes, maxbytes, size;
    int root, show, trace, iters, warmup;
    int stepwise; /* 1: before each traced algorithm step, wait for the launcher's key "step/<coll>/<k>" */
    double held;  /* stepwise: seconds spent waiting for those keys (not the operation's time) */
    int data;     /* 1: with each traced step, the values the algorithm's buffer holds (@data lines) */
    const struct opbufs *cur; /* the collective being run (data=1: its output is the END's @data) */
    int last_steps, last_blocks; /* of this rank's last traced step in the current collective */
    const void *last_work;
    double timeout;
    bool store_from_launcher;
    int die_rank, die_step; /* tests: RINGSIDE_TEST_DIE=RANK:STEP kills that rank mid-operation */
    rs_pi_method pi_method; /* job pi: which sum (count= is its number of terms) */
} wk;

static int usage_error(wk *w, const char *fmt, const char *a)
{
    fprintf(w->errf, "ringside --worker: ");
    fprintf(w->errf, fmt, a);
    fprintf(w->errf, "\n");
    return 2;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!*s || *s == '-') return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) return false;
    *out = v;
    return true;
}

static int parse_args(wk *w, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) return usage_error(w, "'%s' is not key=value", argv[i]);
        *eq = 0;
        const char *k = argv[i], *v = eq + 1;
        uint64_t u = 0;
        bool good = true;
        if (!strcmp(k, "backend")) w->backend = v;
        else if (!strcmp(k, "group")) w->group = v;
        else if (!strcmp(k, "op")) good = rs_pg_op_from_name(v, &w->op);
        else if (!strcmp(k, "redop")) good = rs_redop_from_name(v, &w->redop);
        else if (!strcmp(k, "algo")) good = rs_pg_algo_from_name(v, &w->algo);
        else if (!strcmp(k, "dtype")) good = rs_dtype_from_name(v, &w->dtype) && rs_pg_dtype_ok(w->dtype); else if (!strcmp(k, "count")) good = parse_u64(v, &w->count);
        else if (!strcmp(k, "size")) good = parse_u64(v, &w->size);
        else if (!strcmp(k, "minbytes")) good = parse_u64(v, &w->minbytes);
        else if (!strcmp(k, "maxbytes")) good = parse_u64(v, &w->maxbytes);
        else if (!strcmp(k, "method")) good = rs_pi_method_parse(v, &w->pi_method);
        else if (!strcmp(k, "stepwise") || !strcmp(k, "data")) {
            good = parse_u64(v, &u) && u <= 1;
            *(!strcmp(k, "stepwise") ? &w->stepwise : &w->data) = (int)u;
        }
        else if (!strcmp(k, "root") || !strcmp(k, "show") || !strcmp(k, "trace") || !strcmp(k, "iters") ||
                 !strcmp(k, "warmup")) {
            good = parse_u64(v, &u) && u < RS_WORKER_COUNT_MAX;
            int *dst = !strcmp(k, "root") ? &w->root : !strcmp(k, "show") ? &w->show : !strcmp(k, "trace") ? &w->trace
                       : !strcmp(k, "iters")                                                 ? &w->iters
                                                                                             : &w->warmup;
            *dst = (int)u;
        } else if (!strcmp(k, "timeout")) {
            char *end;
            w->timeout = strtod(v, &end);
            good = !*end && w->timeout > 0;
        } else if (!strcmp(k, "store")) {
            good = !strcmp(v, "launcher") || !strcmp(v, "rank0");
            w->store_from_launcher = !strcmp(v, "launcher");
        } else {
            *eq = '=';
            return usage_error(w, "unknown option '%s'", argv[i]);
        }
        if (!good) {
            *eq = '=';
            return usage_error(w, "bad value in '%s'", argv[i]);
        }
        *eq = '=';
    }
    return 0;
}

/* ---------------------------------------------------------------- data */

static double get(const void *b, size_t i, rs_dtype t)
{
    switch (t) {
    case RS_F32: return ((const float *)b)[i];
    case RS_F64: return ((const double *)b)[i];
    case RS_I32: return ((const int32_t *)b)[i];
    default: return (double)((const int64_t *)b)[i];
    }
}

static void put(void *b, size_t i, rs_dtype t, double v)
{
    switch (t) {
    case RS_F32: ((float *)b)[i] = (float)v; break;
    case RS_F64: ((double *)b)[i] = v; break;
    case RS_I32: ((int32_t *)b)[i] = (int32_t)v; break;
    default: ((int64_t *)b)[i] = (int64_t)v; break;
    }
}

/* The inputs the lecture's examples use: rank r holds 1 + r + 9i ([1,10] and [2,11] on two ranks), a
 * scatter's root holds 0, 1, 2, ... and all_to_all's rank r holds r*len + i, as in torch's docs.
 * Indices wrap at 1000 so large messages keep small, exactly representable values. */
static double pattern(rs_pg_opkind op, int r, size_t i, size_t len)
{
    if (op == RS_OP_SCATTER || op == RS_OP_ALL_TO_ALL) return (double)((size_t)r * len + i);
    return 1 + r + 9 * (double)(i % 1000);
}

static void fill(void *b, size_t n, rs_dtype t, rs_pg_opkind op, int r, size_t len)
{
    for (size_t i = 0; i < n; i++) put(b, i, t, pattern(op, r, i, len));
}

/* The reduction of every rank's pattern in rank order, the serial reference. */
static void reduced(void *out, size_t off, size_t n, wk *w, size_t len)
{
    size_t es = rs_dtype_size(w->dtype);
    void *tmp = malloc(n * es + 1);
    for (size_t i = 0; i < n; i++) put(out, i, w->dtype, pattern(w->op, 0, off + i, len));
    for (int r = 1; r < w->world && tmp; r++) {
        for (size_t i = 0; i < n; i++) put(tmp, i, w->dtype, pattern(w->op, r, off + i, len));
        rs_pg_reduce_into(out, tmp, n, w->dtype, w->redop);
    }
    free(tmp);
    if (w->redop == RS_AVG) rs_pg_scale_avg(out, n, w->dtype, w->world);
}

static uint64_t count_wrong(const void *got, const void *want, size_t n, rs_dtype t, bool exact)
{
    double tol = t == RS_F32 ? 1e-5 : 1e-12;
    uint64_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double a = get(got, i, t), b = get(want, i, t);
        if (a == b) continue;
        if (exact || !(fabs(a - b) <= tol * (1 + fabs(b)))) bad++;
    }
    return bad;
}

static void print_vals(FILE *f, const void *b, size_t n, rs_dtype t, int show)
{
    if (!b) {
        fputs("-", f);
        return;
    }
    fputc('[', f);
    size_t head = n <= (size_t)show ? n : (size_t)(show > 1 ? show - 1 : 1);
    for (size_t i = 0; i < head; i++) {
        if (i) fputs(", ", f);
        if (t == RS_F32 || t == RS_F64) fprintf(f, "%g", get(b, i, t));
        else fprintf(f, "%lld", (long long)get(b, i, t));
    }
    if (head < n) {
        fputs(", ..., ", f);
        if (t == RS_F32 || t == RS_F64) fprintf(f, "%g", get(b, n - 1, t));
        else fprintf(f, "%lld", (long long)get(b, n - 1, t));
        fprintf(f, "] (%zu elements)", n);
    } else {
        fputc(']', f);
    }
}

/* "@vals": a buffer of at most RS_WIRE_VALS_MAX numbers, for the REPL's `expect`. */
static void send_vals(wk *w, const char *which, const void *b, size_t n, rs_dtype t)
{
    if (!b || n > RS_WIRE_VALS_MAX) return;
    static rs_wire_vals v; /* 2 KiB: one rank, one thread */
    static char line[RS_WIRE_VALS_MAX * 26 + 64];
    v.rank = w->rank;
    snprintf(v.which, sizeof v.which, "%s", which);
    v.n = (int)n;
    for (size_t i = 0; i < n; i++) v.v[i] = get(b, i, t);
    rs_wire_format_vals(line, sizeof line, &v);
    fprintf(w->out, "%s\n", line);
}

/* ---------------------------------------------------------------- running one operation */

/* Buffers of one operation on this rank: `in` and `out` (the same for in-place operations), their
 * element counts, and which of them mean something on this rank (a scatter's non-roots have no input). */
typedef struct opbufs {
    void *in, *out;
    size_t nin, nout;
    bool has_in, has_out, in_place;
} opbufs;

static rs_status opbufs_make(wk *w, size_t count, opbufs *b, rs_err *err)
{
    int W = w->world, r = w->rank;
    bool root = r == w->root;
    size_t wc = (size_t)W * count;
    *b = (opbufs){.nin = count, .nout = count, .has_in = true, .has_out = true};
    switch (w->op) {
    case RS_OP_BROADCAST:
    case RS_OP_ALL_REDUCE:
    case RS_OP_REDUCE: b->in_place = true; break;
    case RS_OP_SCATTER: b->nin = wc, b->has_in = root; break;
    case RS_OP_GATHER: b->nout = wc, b->has_out = root; break;
    case RS_OP_ALL_GATHER: b->nout = wc; break;
    case RS_OP_REDUCE_SCATTER: b->nin = wc; break;
    case RS_OP_ALL_TO_ALL: b->nin = b->nout = wc; break;
    case RS_OP_BARRIER: b->nin = b->nout = 0, b->has_in = b->has_out = false; break;
    default: return rs_err_set(err, RS_ERR_ARG, "%s is not a collective; try `p2p`", rs_pg_op_name(w->op));
    }
    size_t es = rs_dtype_size(w->dtype);
    b->in = malloc(b->nin * es + 1);
    b->out = b->in_place ? b->in : malloc(b->nout * es + 1);
    if (!b->in || !b->out) return rs_err_set(err, RS_ERR_NOMEM, "out of memory for %zu elements", b->nin + b->nout);
    return RS_OK;
}

static void opbufs_clear(opbufs *b)
{
    if (b->out != b->in) free(b->out);
    free(b->in);
}

/* Fills this rank's input (a broadcast's non-roots start from zeros, so the copy shows) and zeroes a
 * separate output, so what a class watches fill up starts blank rather than as whatever malloc left. */
static void opbufs_fill(wk *w, opbufs *b)
{
    if (w->op == RS_OP_BROADCAST && w->rank != w->root) memset(b->in, 0, b->nin * rs_dtype_size(w->dtype));
    else fill(b->in, b->nin, w->dtype, w->op, w->rank, b->nin);
    if (!b->in_place) memset(b->out, 0, b->nout * rs_dtype_size(w->dtype));
}

static rs_status run_op(wk *w, opbufs *b, size_t count, rs_err *err)
{
    rs_pg *g = w->g;
    rs_dtype t = w->dtype;
    switch (w->op) {
    case RS_OP_BROADCAST: return rs_pg_broadcast(g, b->in, count, t, w->root, err);
    case RS_OP_REDUCE: return rs_pg_reduce(g, b->in, count, t, w->redop, w->root, err);
    case RS_OP_ALL_REDUCE: return rs_pg_all_reduce(g, b->in, count, t, w->redop, err);
    case RS_OP_SCATTER: return rs_pg_scatter(g, b->in, b->out, count, t, w->root, err);
    case RS_OP_GATHER: return rs_pg_gather(g, b->in, b->out, count, t, w->root, err);
    case RS_OP_ALL_GATHER: return rs_pg_all_gather(g, b->in, b->out, count, t, err);
    case RS_OP_REDUCE_SCATTER: return rs_pg_reduce_scatter(g, b->in, b->out, count, t, w->redop, err);
    case RS_OP_ALL_TO_ALL: return rs_pg_all_to_all(g, b->in, b->out, count, t, err);
    case RS_OP_BARRIER: return rs_pg_barrier(g, err);
    default: return rs_err_set(err, RS_ERR_ARG, "%s is not a collective", rs_pg_op_name(w->op));
    }
}

/* What this rank's output must be, from the serial reference; returns the number of wrong elements. */
static uint64_t verify(wk *w, const opbufs *b, size_t count)
{
    int W = w->world, r = w->rank;
    rs_dtype t = w->dtype;
    size_t es = rs_dtype_size(t);
    if (!b->has_out || b->nout == 0) return 0;
    void *want = malloc(b->nout * es + 1);
    if (!want) return b->nout;
    bool exact = t == RS_I32 || t == RS_I64 || w->redop == RS_MIN || w->redop == RS_MAX;
    switch (w->op) {
    case RS_OP_BROADCAST: fill(want, count, t, w->op, w->root, count); exact = true; break;
    case RS_OP_REDUCE:
        if (r == w->root) reduced(want, 0, count, w, count);
        else fill(want, count, t, w->op, r, count), exact = true;
        break;
    case RS_OP_ALL_REDUCE: reduced(want, 0, count, w, count); break;
    case RS_OP_SCATTER:
        for (size_t i = 0; i < count; i++) put(want, i, t, pattern(w->op, w->root, (size_t)r * count + i, (size_t)W * count));
        exact = true;
        break;
    case RS_OP_GATHER:
    case RS_OP_ALL_GATHER:
        for (int q = 0; q < W; q++) fill((char *)want + (size_t)q * count * es, count, t, w->op, q, count);
        exact = true;
        break;
    case RS_OP_REDUCE_SCATTER: reduced(want, (size_t)r * count, count, w, (size_t)W * count); break;
    case RS_OP_ALL_TO_ALL:
        for (int q = 0; q < W; q++)
            for (size_t i = 0; i < count; i++)
                put((char *)want + (size_t)q * count * es, i, t,
                    pattern(w->op, q, (size_t)r * count + i, (size_t)W * count));
        exact = true;
        break;
    default: break;
    }
    uint64_t bad = count_wrong(b->out, want, b->nout, t, exact);
    free(want);
    return bad;
}

/* ---------------------------------------------------------------- jobs */

static int job_collective(wk *w)
{
    rs_err e = {0};
    opbufs b;
    size_t count = w->count;
    if (opbufs_make(w, count, &b, &e)) {
        fprintf(w->errf, "rank %d: %s\n", w->rank, e.msg);
        opbufs_clear(&b);
        return 1;
    }
    opbufs_fill(w, &b);
    /* The input is printed before the operation overwrites it (in-place operations). */
    char *line = NULL;
    size_t cap = 0;
    FILE *mem = open_memstream(&line, &cap);
    if (mem) {
        fprintf(mem, "rank %d: in ", w->rank);
        print_vals(mem, b.has_in ? b.in : NULL, b.nin, w->dtype, w->show);
    }
    send_vals(w, "in", b.has_in ? b.in : NULL, b.nin, w->dtype);
    /* the start line is not part of the lesson: only the operation itself is traced */
    rs_pg_trace_fn tr = w->g->trace;
    w->g->trace = NULL;
    rs_status st = rs_pg_barrier(w->g, &e);
    w->g->trace = tr;
    double t0 = rs_pg_now(), held0 = w->held;
    w->cur = &b;
    if (!st) st = run_op(w, &b, count, &e);
    w->cur = NULL;
    double dt = rs_pg_now() - t0 - (w->held - held0); /* step=1: the time the class spent talking is not the op's */
    if (st) {
        if (mem) fclose(mem);
        free(line);
        fprintf(w->errf, "rank %d: %s\n", w->rank, e.msg);
        opbufs_clear(&b);
        return 1;
    }
    uint64_t bad = verify(w, &b, count);
    if (mem) {
        fputs(" -> out ", mem);
        print_vals(mem, b.has_out ? b.out : NULL, b.nout, w->dtype, w->show);
        fclose(mem);
        fprintf(w->out, "%s\n", line);
    }
    free(line);
    send_vals(w, "out", b.has_out ? b.out : NULL, b.nout, w->dtype);
    fprintf(w->out, "@check %d %llu %.9f\n", w->rank, (unsigned long long)bad, dt);
    fflush(w->out);
    opbufs_clear(&b);
    return bad ? 1 : 0;
}

/* One bench size: `bytes` is what nccl-tests calls size (the whole buffer; for the gathering and
 * scattering operations, all ranks' blocks together). */
static int bench_one(wk *w, uint64_t bytes)
{
    rs_err e = {0};
    size_t es = rs_dtype_size(w->dtype), W = (size_t)w->world;
    bool split = w->op == RS_OP_ALL_GATHER || w->op == RS_OP_REDUCE_SCATTER || w->op == RS_OP_ALL_TO_ALL ||
                 w->op == RS_OP_SCATTER || w->op == RS_OP_GATHER;
    size_t total = bytes / es, count = split ? total / W : total;
    if (split) total = count * W;
    opbufs b;
    if (opbufs_make(w, count, &b, &e)) {
        fprintf(w->errf, "rank %d: %s\n", w->rank, e.msg);
        opbufs_clear(&b);
        return 1;
    }
    /* correctness first, on the known pattern */
    opbufs_fill(w, &b);
    rs_status st = run_op(w, &b, count, &e);
    int64_t wrong = st ? 0 : (int64_t)verify(w, &b, count);
    if (!st) st = rs_pg_all_reduce(w->g, &wrong, 1, RS_I64, RS_SUM, &e);
    /* then time: enough iterations to move ~256 MiB (5..1000), after a warm-up */
    size_t moved = total * es > 0 ? total * es : 1;
    int iters = w->iters ? w->iters : (int)fmin(1000, fmax(5, (double)(256u << 20) / (double)moved));
    int warm = w->warmup ? w->warmup : iters / 10 + 2;
    for (int i = 0; i < warm && !st; i++) st = run_op(w, &b, count, &e);
    if (!st) st = rs_pg_barrier(w->g, &e);
    double t0 = rs_pg_now();
    for (int i = 0; i < iters && !st; i++) st = run_op(w, &b, count, &e);
    double dt = (rs_pg_now() - t0) / iters;
    if (!st) st = rs_pg_all_reduce(w->g, &dt, 1, RS_F64, RS_MAX, &e);
    opbufs_clear(&b);
    if (st) {
        fprintf(w->errf, "rank %d: bench %s at %llu bytes: %s\n", w->rank, rs_pg_op_name(w->op),
                (unsigned long long)bytes, e.msg);
        return 1;
    }
    if (w->rank == 0) {
        rs_bench_row row = {.op = w->op, .bytes = total * es, .count = total, .dtype = w->dtype, .redop = w->redop,
                            .time_us = dt * 1e6, .wrong = (uint64_t)wrong, .iters = iters};
        row.algbw = dt > 0 ? (double)(total * es) / dt / 1e9 : 0;
        row.busbw = row.algbw * rs_pg_bus_factor(w->op, w->world);
        char line[256];
        rs_wire_format_bench(line, sizeof line, &row);
        fprintf(w->out, "%s\n", line);
        fflush(w->out);
    }
    return wrong ? 1 : 0;
}

static int job_bench(wk *w)
{
    uint64_t lo = w->minbytes ? w->minbytes : 8, hi = w->maxbytes ? w->maxbytes : lo;
    int rc = 0;
    for (uint64_t s = lo; s <= hi; s *= 2) {
        int r = bench_one(w, s);
        if (r) rc = r;
        if (s > UINT64_MAX / 2) break;
    }
    return rc;
}

static void busy(double seconds)
{
    double t0 = rs_pg_now();
    volatile double x = 1;
    while (rs_pg_now() - t0 < seconds) x = x * 1.0000001 + 1e-9;
}

/* Point to point between ranks 0 and 1 (any others wait at the barriers): blocking ping-pong, then
 * an exchange in both directions, blocking and immediate, then computation while a message is in
 * flight — with and without test() calls, since a library without a progress thread moves data only
 * inside its calls (as MPI does). Rank 0 prints the timings. */
typedef struct p2p_ctx {
    wk *w;
    int32_t *a, *b;
    size_t n;
    int peer;
    double compute;
} p2p_ctx;

static rs_status p2p_round(p2p_ctx *c, int kind, rs_err *err)
{
    rs_pg *g = c->w->g;
    bool first = c->w->rank == 0;
    rs_status st = RS_OK;
    rs_work *s = NULL, *r = NULL;
    switch (kind) {
    case 0: /* ping-pong */
        if (first) {
            st = rs_pg_send(g, c->a, c->n, RS_I32, c->peer, err);
            if (!st) st = rs_pg_recv(g, c->b, c->n, RS_I32, c->peer, err);
        } else {
            st = rs_pg_recv(g, c->b, c->n, RS_I32, c->peer, err);
            if (!st) st = rs_pg_send(g, c->a, c->n, RS_I32, c->peer, err);
        }
        return st;
    case 1: /* immediate exchange, both directions at once */
    case 3: /* the same with computation before the waits */
    case 4: /* ... computation in slices, calling test() between them */
        st = rs_pg_irecv(g, c->b, c->n, RS_I32, c->peer, &r, err);
        if (!st) st = rs_pg_isend(g, c->a, c->n, RS_I32, c->peer, &s, err);
        if (!st && kind == 3) busy(c->compute);
        if (!st && kind == 4)
            for (int k = 0; k < 50 && !st; k++) {
                bool d1, d2;
                busy(c->compute / 50);
                st = rs_work_test(s, &d1, err);
                if (!st) st = rs_work_test(r, &d2, err);
            }
        if (!st) st = rs_work_wait(s, err);
        if (!st) st = rs_work_wait(r, err);
        rs_work_free(s);
        rs_work_free(r);
        return st;
    case 2: /* blocking: send, then compute (the receiver receives, then computes) */
        st = first ? rs_pg_send(g, c->a, c->n, RS_I32, c->peer, err) : rs_pg_recv(g, c->b, c->n, RS_I32, c->peer, err);
        if (!st) busy(c->compute);
        return st;
    default: return RS_OK;
    }
}

static int job_p2p(wk *w)
{
    rs_err e = {0};
    if (w->world < 2) {
        fprintf(w->errf, "p2p needs at least 2 ranks\n");
        return 2;
    }
    size_t bytes = w->size ? w->size : (1u << 20), n = bytes / 4 ? bytes / 4 : 1;
    p2p_ctx c = {.w = w, .a = malloc(n * 4), .b = malloc(n * 4), .n = n, .peer = 1 - w->rank};
    if (!c.a || !c.b) {
        free(c.a), free(c.b);
        fprintf(w->errf, "rank %d: out of memory for %zu bytes\n", w->rank, 2 * n * 4);
        return 1;
    }
    for (size_t i = 0; i < n; i++) c.a[i] = (int32_t)(i * 7 + (size_t)w->rank);
    /* The lecture's example first: rank 0 sends a 2x2 tensor of ones; rank 1's own code never touches
     * its zeros, yet it ends holding ones. Blocking, then immediate (the work's wait). */
    rs_status st = RS_OK;
    for (int immediate = 0; immediate < 2 && !st; immediate++) {
        float t4[4] = {0, 0, 0, 0};
        if (w->rank == 0) for (int i = 0; i < 4; i++) t4[i] += 1;
        rs_work *req = NULL;
        if (w->rank == 0) st = immediate ? rs_pg_isend(w->g, t4, 4, RS_F32, 1, &req, &e) : rs_pg_send(w->g, t4, 4, RS_F32, 1, &e);
        else if (w->rank == 1) st = immediate ? rs_pg_irecv(w->g, t4, 4, RS_F32, 0, &req, &e) : rs_pg_recv(w->g, t4, 4, RS_F32, 0, &e);
        if (!st && req) st = rs_work_wait(req, &e);
        rs_work_free(req);
        if (!st && w->rank <= 1) {
            fprintf(w->out, "rank %d: %s: has data [%g, %g, %g, %g]\n", w->rank,
                    immediate ? (w->rank ? "irecv + wait" : "isend + wait") : (w->rank ? "recv" : "send"), t4[0], t4[1],
                    t4[2], t4[3]);
            send_vals(w, immediate ? "idata" : "data", t4, 4, RS_F32);
        }
    }
    int iters = w->iters ? w->iters : (int)fmax(3, fmin(200, 64e6 / (double)(n * 4)));
    double t[5] = {0};
    for (int kind = 0; kind < 5 && !st; kind++) {
        st = rs_pg_barrier(w->g, &e);
        if (st || w->rank > 1) continue;
        if (kind == 2) c.compute = fmax(t[0] * 2, 20e-6); /* compute as long as a round trip takes */
        st = p2p_round(&c, kind, &e); /* warm-up */
        double t0 = rs_pg_now();
        for (int i = 0; i < iters && !st; i++) st = p2p_round(&c, kind, &e);
        t[kind] = (rs_pg_now() - t0) / iters;
    }
    if (!st) st = rs_pg_barrier(w->g, &e);
    /* the data must be the peer's */
    uint64_t bad = 0;
    for (size_t i = 0; w->rank <= 1 && i < n; i++) bad += c.b[i] != (int32_t)(i * 7 + (size_t)c.peer);
    if (st) fprintf(w->errf, "rank %d: p2p: %s\n", w->rank, e.msg);
    else if (w->rank == 0) {
        double one = t[0] / 2, gb = (double)(n * 4) / 1e9;
        fprintf(w->out, "p2p between rank 0 and rank 1: %zu-byte messages, %s backend, %d iterations each\n", n * 4,
                w->backend, iters);
        fprintf(w->out, "  blocking send/recv ping-pong, one way   %10.1f us  %6.2f GB/s\n", one * 1e6, gb / one);
        fprintf(w->out, "  isend+irecv both ways at once           %10.1f us  %6.2f GB/s each way\n", t[1] * 1e6,
                gb / t[1]);
        fprintf(w->out, "  with %.0f us of computation per message:\n", c.compute * 1e6);
        fprintf(w->out, "    blocking send, then compute           %10.1f us\n", t[2] * 1e6);
        fprintf(w->out, "    isend, compute, wait                  %10.1f us\n", t[3] * 1e6);
        fprintf(w->out, "    isend, compute calling test(), wait   %10.1f us\n", t[4] * 1e6);
        fprintf(w->out, "  (data moves only inside library calls: test() during the computation lets it overlap)\n");
        rs_p2p_times pt = {.bytes = n * 4, .iters = iters, .oneway = one, .exchange = t[1], .compute = c.compute,
                           .blocking = t[2], .isend = t[3], .isend_test = t[4]};
        char line[256];
        rs_wire_format_p2p(line, sizeof line, &pt);
        fprintf(w->out, "%s\n", line);
    }
    if (w->rank <= 1) fprintf(w->out, "@check %d %llu %.9f\n", w->rank, (unsigned long long)bad, t[0]);
    fflush(w->out);
    free(c.a);
    free(c.b);
    return st || bad ? 1 : 0;
}

/* Who am I: what the launcher (or mpirun, or a person) told this rank, and what its group says, checked
 * by an all_reduce of ones that every rank must see come back as the world size. */
static int job_world(wk *w)
{
    rs_launch_env env;
    rs_err e = {0};
    if (rs_launch_env_from_environ(&env, &e)) { /* join read it already: cannot fail here */
        fprintf(w->errf, "rank %d: %s\n", w->rank, e.msg);
        return 1;
    }
    double count = 1;
    if (rs_pg_all_reduce(w->g, &count, 1, RS_F64, RS_SUM, &e)) {
        fprintf(w->errf, "rank %d: %s\n", w->rank, e.msg);
        return 1;
    }
    int pid = (int)getpid();
    /* what a person needs to see: who this rank was told it is (the address and port are everyone's
     * and the REPL prints them once) */
    if (!strcmp(env.source, "mpirun"))
        fprintf(w->out, "rank %d: OMPI_COMM_WORLD_RANK=%d _SIZE=%d _LOCAL_RANK=%d _LOCAL_SIZE=%d, pid %d\n", w->rank,
                env.rank, env.world_size, env.local_rank, env.local_world_size, pid);
    else
        fprintf(w->out, "rank %d: RANK=%d WORLD_SIZE=%d LOCAL_RANK=%d LOCAL_WORLD_SIZE=%d GROUP_RANK=%d\n", w->rank,
                env.rank, env.world_size, env.local_rank, env.local_world_size, env.group_rank);
    const char *names[] = {"env.rank", "env.world_size", "env.local_rank", "env.local_world_size", "env.group_rank",
                           "env.master_port", "group.rank", "group.size", "count", "pid"};
    double vals[] = {env.rank, env.world_size, env.local_rank, env.local_world_size, env.group_rank,
                     env.master_port, w->g->rank, w->g->world, count, pid};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        char line[96];
        rs_wire_format_num(line, sizeof line, w->rank, names[i], vals[i]);
        fprintf(w->out, "%s\n", line);
    }
    fflush(w->out);
    return count == w->world ? 0 : 1;
}

/* The lecture's annex: this rank's share of the sum for pi, then MPI_Reduce(SUM) of the shares to rank 0,
 * which prints the total. Each rank's share and timings go to the REPL as @num lines. */
static int job_pi(wk *w)
{
    uint64_t terms = 0;
    double t0 = rs_pg_now();
    double part = rs_pi_partial(w->pi_method, w->count, w->rank, w->world, &terms);
    double t1 = rs_pg_now(), total = part;
    rs_err e = {0};
    if (rs_pg_reduce(w->g, &total, 1, RS_F64, RS_SUM, 0, &e)) {
        fprintf(w->errf, "rank %d: %s\n", w->rank, e.msg);
        return 1;
    }
    double t2 = rs_pg_now();
    fprintf(w->out, "rank %d: %llu term%s, partial sum %.15f\n", w->rank, (unsigned long long)terms,
            terms == 1 ? "" : "s", part);
    const char *names[] = {"partial", "terms", "compute_us", "reduce_us", "pi"};
    double vals[] = {part, (double)terms, (t1 - t0) * 1e6, (t2 - t1) * 1e6, total};
    for (size_t i = 0; i < sizeof vals / sizeof *vals - (w->rank != 0); i++) { /* the total is rank 0's only */
        char line[96];
        rs_wire_format_num(line, sizeof line, w->rank, names[i], vals[i]);
        fprintf(w->out, "%s\n", line);
    }
    fflush(w->out);
    return 0;
}

/* ---------------------------------------------------------------- setup */

/* data=1: the values this rank's collective works in, with a step (as it begins) and at the end (its
 * output: the same buffer for in-place operations, the gathered one for the others). */
static void data_line(wk *w, const rs_pg_event *ev)
{
    rs_data_line d = {.rank = ev->rank, .coll = ev->coll, .t = ev->t};
    if (ev->kind == RS_PG_EV_BEGIN) {
        w->last_steps = 0;
        w->last_work = NULL;
        return;
    }
    if (ev->kind == RS_PG_EV_STEP) {
        if (!ev->data) return;
        w->last_steps = ev->steps;
        w->last_work = ev->data;
        w->last_blocks = ev->blocks;
        d.done = ev->step;
        d.steps = ev->steps;
        rs_wire_data_from(&d, ev->data, ev->count, ev->dtype, ev->blocks);
    } else {
        const opbufs *b = w->cur;
        if (!b || !b->has_out) return;
        int blocks = b->out == w->last_work ? w->last_blocks : b->nout == (size_t)w->world * w->count ? w->world : 1;
        d.done = d.steps = w->last_steps;
        rs_wire_data_from(&d, b->out, b->nout, w->dtype, blocks);
    }
    char line[RS_WIRE_DATA_MAX * 28 + 160];
    rs_wire_format_data(line, sizeof line, &d);
    fprintf(w->out, "%s\n", line);
}

static void trace_line(void *ud, const rs_pg_event *ev)
{
    wk *w = ud;
    rs_rank_status_trace(w->status, ev);
    if (ev->kind == RS_PG_EV_STEP && ev->rank == w->die_rank && ev->step == w->die_step) {
        fflush(w->out);
        _exit(3); /* a rank dying in the middle of an algorithm, for the fault tests */
    }
    if (!w->trace) return;
    char line[256];
    rs_wire_format_event(line, sizeof line, ev);
    fprintf(w->out, "%s\n", line);
    if (w->data && w->cur && ev->group == 0) data_line(w, ev);
    if (w->stepwise && ev->kind == RS_PG_EV_STEP && w->store) {
        /* a class walks through the algorithm: the step is announced, then runs when the REPL's user
         * presses a key (it sets the key); a teacher may talk for a while, hence the long wait */
        fflush(w->out);
        char key[64];
        snprintf(key, sizeof key, "step/%llu/%d", (unsigned long long)ev->coll, ev->step);
        void *val = NULL;
        size_t n = 0;
        rs_err e = {0};
        double t0 = rs_pg_now();
        if (rs_store_get(w->store, key, &val, &n, w->timeout > 3600 ? w->timeout : 3600, &e))
            fprintf(w->errf, "rank %d: step=1: %s\n", w->rank, e.msg);
        w->held += rs_pg_now() - t0;
        free(val);
    }
}

/* bench, p2p: the board's count of collectives would put clock reads on every timed call (8 B take ~0.1 us) */
static int join(wk *w, bool count_on_board)
{
    rs_worker_conn c;
    int rc = rs_worker_join(w->backend, w->group, w->timeout, w->store_from_launcher, w->errf, &c);
    w->rank = c.rank;
    w->world = c.world;
    w->g = c.g;
    w->store = c.store;
    w->server = c.server;
    w->status = c.status;
    if (rc) return rc;
    if (!count_on_board) w->g->trace = NULL;
    w->g->algo = w->algo;
    const char *die = getenv("RINGSIDE_TEST_DIE");
    if (!die || sscanf(die, "%d:%d", &w->die_rank, &w->die_step) != 2) w->die_rank = -1;
    if (w->trace || w->die_rank >= 0) {
        w->g->trace = trace_line;
        w->g->trace_ud = w;
    }
    return 0;
}

int rs_worker_main(int argc, char **argv, FILE *out, FILE *errf)
{
    rs_bind_self_from_env(errf); /* first: onto the CPUs of the launcher's bind= (none started by hand) */
    wk w = {.out = out, .errf = errf, .backend = "shm", .group = "w", .op = RS_OP_ALL_REDUCE, .dtype = RS_F32,
            .redop = RS_SUM, .algo = RS_ALGO_AUTO, .count = 2, .show = 16, .timeout = 30};
    if (argc < 1) return usage_error(&w, "%s", "no job (collective, bench, p2p, world, pi, train or matmul)");
    const char *job = argv[0];
    if (!strcmp(job, "train")) return rs_worker_train(argc, argv, out, errf);
    if (!strcmp(job, "matmul")) return rs_worker_matmul(argc, argv, out, errf);
    if (strcmp(job, "collective") && strcmp(job, "bench") && strcmp(job, "p2p") && strcmp(job, "world") &&
        strcmp(job, "pi"))
        return usage_error(&w, "unknown job '%s' (collective, bench, p2p, world, pi, train or matmul)", job);
    int rc = parse_args(&w, argc, argv);
    if (rc) return rc;
    rc = join(&w, strcmp(job, "bench") && strcmp(job, "p2p"));
    if (!rc) {
        if (!strcmp(job, "collective")) rc = job_collective(&w);
        else if (!strcmp(job, "bench")) rc = job_bench(&w);
        else if (!strcmp(job, "world")) rc = job_world(&w);
        else if (!strcmp(job, "pi")) rc = job_pi(&w);
        else rc = job_p2p(&w);
    }
    fflush(out);
    rs_worker_conn c = {.rank = w.rank, .world = w.world, .g = w.g, .store = w.store, .server = w.server,
                        .status = w.status};
    rs_worker_leave(&c, rc == 0, w.timeout);
    return rc;
}
