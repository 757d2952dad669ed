/* Process-group front end: argument checks, trace events, dispatch to the backend, and the serial
 * reduction every backend uses and is tested against (see pg.h). */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const rs_redop_names[RS_REDOP_COUNT + 1] = {
    [RS_SUM] = "sum", [RS_PRODUCT] = "product", [RS_MIN] = "min", [RS_MAX] = "max", [RS_AVG] = "avg",
};

const char *rs_redop_name(rs_redop op) { return (unsigned)op < RS_REDOP_COUNT ? rs_redop_names[op] : "?"; }

const char *const rs_pg_algo_names[RS_ALGO_COUNT + 1] = {
    [RS_ALGO_AUTO] = "auto", [RS_ALGO_RING] = "ring", [RS_ALGO_TREE] = "tree",
    [RS_ALGO_RECDOUBLING] = "recursive-doubling",
};

const char *rs_pg_algo_name(rs_pg_algo a) { return (unsigned)a < RS_ALGO_COUNT ? rs_pg_algo_names[a] : "?"; }

const char *const rs_pg_op_names[RS_OP_KIND_COUNT + 1] = {
    [RS_OP_SEND] = "send", [RS_OP_RECV] = "recv", [RS_OP_BROADCAST] = "broadcast", [RS_OP_REDUCE] = "reduce",
    [RS_OP_ALL_REDUCE] = "all_reduce", [RS_OP_SCATTER] = "scatter", [RS_OP_GATHER] = "gather",
    [RS_OP_ALL_GATHER] = "all_gather", [RS_OP_REDUCE_SCATTER] = "reduce_scatter",
    [RS_OP_ALL_TO_ALL] = "all_to_all", [RS_OP_BARRIER] = "barrier",
};

const char *rs_pg_op_name(rs_pg_opkind k) { return (unsigned)k < RS_OP_KIND_COUNT ? rs_pg_op_names[k] : "?"; }

const char *const rs_pg_dtype_names[] = {"f32", "f64", "i32", "i64", NULL};

bool rs_pg_dtype_ok(rs_dtype t)
{
    for (int i = 0; rs_pg_dtype_names[i]; i++)
        if (!strcmp(rs_dtype_name(t), rs_pg_dtype_names[i])) return true;
    return false;
}

/* One loop per (type, op). Sums and products go through U: the type itself for floats, and the
 * unsigned type of the same width for integers, so integer overflow wraps as two's complement like
 * torch's instead of being undefined behaviour in C. */
#define REDUCE_LOOP(T, U)                                                                          \
    do {                                                                                           \
        T *d = dst;                                                                                \
        const T *s = src;                                                                          \
        switch (op) {                                                                              \
        case RS_SUM:                                                                               \
        case RS_AVG:                                                                               \
            for (size_t i = 0; i < n; i++) d[i] = (T)((U)d[i] + (U)s[i]);                          \
            break;                                                                                 \
        case RS_PRODUCT:                                                                           \
            for (size_t i = 0; i < n; i++) d[i] = (T)((U)d[i] * (U)s[i]);                          \
            break;                                                                                 \
        case RS_MIN:                                                                               \
            for (size_t i = 0; i < n; i++) d[i] = s[i] < d[i] ? s[i] : d[i];                       \
            break;                                                                                 \
        case RS_MAX:                                                                               \
            for (size_t i = 0; i < n; i++) d[i] = s[i] > d[i] ? s[i] : d[i];                       \
            break;                                                                                 \
        default: break;                                                                            \
        }                                                                                          \
    } while (0)

void rs_pg_reduce_into(void *dst, const void *src, size_t n, rs_dtype t, rs_redop op)
{
    switch (t) {
    case RS_F32: REDUCE_LOOP(float, float); break;
    case RS_F64: REDUCE_LOOP(double, double); break;
    case RS_I32: REDUCE_LOOP(int32_t, uint32_t); break;
    case RS_I64: REDUCE_LOOP(int64_t, uint64_t); break;
    default: break;
    }
}

void rs_pg_scale_avg(void *x, size_t n, rs_dtype t, int world)
{
    switch (t) {
    case RS_F32: {
        float *p = x;
        for (size_t i = 0; i < n; i++) p[i] /= (float)world;
        break;
    }
    case RS_F64: {
        double *p = x;
        for (size_t i = 0; i < n; i++) p[i] /= (double)world;
        break;
    }
    case RS_I32: {
        int32_t *p = x;
        for (size_t i = 0; i < n; i++) p[i] /= world;
        break;
    }
    case RS_I64: {
        int64_t *p = x;
        for (size_t i = 0; i < n; i++) p[i] /= world;
        break;
    }
    default: break;
    }
}

double rs_pg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int rs_pg_global_rank(const rs_pg *g, int r)
{
    return g->members && r >= 0 && r < g->world ? g->members[r] : r;
}

int rs_pg_gpu(const rs_pg *g) { return g && g->ops->gpu ? g->ops->gpu(g) : -1; }

/* Backends report group ranks; the trace speaks global ranks so a dashboard can place them. */
void rs_pg_emit(rs_pg *g, const rs_pg_event *ev)
{
    if (!g->trace) return;
    rs_pg_event e = *ev;
    e.group = g->group_id;
    e.rank = rs_pg_global_rank(g, e.rank);
    if (e.peer >= 0) e.peer = rs_pg_global_rank(g, e.peer);
    g->trace(g->trace_ud, &e);
}

/* The common part is freed here, after the backend's destroy has used it; backends free only g->impl
 * (and the struct itself when they allocated it: every backend does, with calloc). */
void rs_pg_destroy(rs_pg *g)
{
    if (!g) return;
    int *members = g->members;
    if (g->ops && g->ops->destroy) g->ops->destroy(g);
    else free(g);
    free(members);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

rs_status rs_pg_new_group(rs_pg *g, const int *ranks, int n, rs_pg **out, rs_err *err)
{
    *out = NULL;
    if (!g) return rs_err_set(err, RS_ERR_ARG, "new_group: no process group");
    if (!g->ops->new_group)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "new_group is not supported by the %s backend", g->ops->name);
    if (n < 1 || n > g->world || !ranks)
        return rs_err_set(err, RS_ERR_ARG, "new_group: give 1..%d ranks of this group, got %d", g->world, n);
    int *sorted = malloc(sizeof *sorted * (size_t)n), *members = malloc(sizeof *members * (size_t)n);
    if (!sorted || !members) {
        free(sorted);
        free(members);
        return rs_err_set(err, RS_ERR_NOMEM, "new_group: out of memory");
    }
    memcpy(sorted, ranks, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_int);
    rs_status st = RS_OK;
    for (int i = 0; i < n && !st; i++) {
        if (sorted[i] < 0 || sorted[i] >= g->world)
            st = rs_err_set(err, RS_ERR_ARG, "new_group: rank %d is not in this group (0..%d)", sorted[i], g->world - 1);
        else if (i && sorted[i] == sorted[i - 1])
            st = rs_err_set(err, RS_ERR_ARG, "new_group: rank %d is listed twice", sorted[i]);
    }
    /* Every rank of g counts the call, members or not, so the next group's name agrees everywhere. */
    unsigned k = ++g->nsub;
    int *ctr = g->next_group_id ? g->next_group_id : &g->group_counter;
    int id = ++*ctr;
    int me = -1;
    for (int i = 0; i < n && !st; i++)
        if (sorted[i] == g->rank) me = i;
    if (st || me < 0) {
        free(sorted);
        free(members);
        return st;
    }
    char name[64];
    int len = snprintf(name, sizeof name, "%s.%u", g->name, k);
    if (len < 0 || (size_t)len >= sizeof name) {
        /* Deep nesting: keep the name unique with a hash of the full path instead of truncating it. */
        uint64_t h = 1469598103934665603ull;
        for (const char *c = g->name; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        snprintf(name, sizeof name, "g%016llx.%u", (unsigned long long)h, k);
    }
    rs_pg *sub = NULL;
    st = g->ops->new_group(g, sorted, n, name, &sub, err);
    if (st) {
        rs_err_prefix(err, "new_group of %d ranks", n);
        free(sorted);
        free(members);
        return st;
    }
    for (int i = 0; i < n; i++) members[i] = rs_pg_global_rank(g, sorted[i]);
    free(sorted);
    sub->members = members;
    sub->group_id = id;
    sub->next_group_id = ctr;
    sub->algo = g->algo;
    sub->trace = g->trace;
    sub->trace_ud = g->trace_ud;
    *out = sub;
    return RS_OK;
}

/* ---------------------------------------------------------------- immediate point to point */

static void work_end(rs_work *w)
{
    rs_pg_event ev = {.kind = RS_PG_EV_END, .op = w->op, .algo = w->g->algo, .coll = w->g->coll,
                      .rank = w->g->rank, .peer = -1, .bytes = w->bytes, .t = rs_pg_now()};
    rs_pg_emit(w->g, &ev);
}

rs_status rs_work_wait(rs_work *w, rs_err *err)
{
    if (!w) return rs_err_set(err, RS_ERR_ARG, "wait: no work handle");
    if (w->done) return RS_OK;
    rs_status st = w->wait(w, err);
    if (!st) {
        w->done = true;
        work_end(w);
    }
    return st;
}

rs_status rs_work_test(rs_work *w, bool *done, rs_err *err)
{
    *done = false;
    if (!w) return rs_err_set(err, RS_ERR_ARG, "test: no work handle");
    if (w->done) {
        *done = true;
        return RS_OK;
    }
    rs_status st = w->test(w, done, err);
    if (!st && *done) {
        w->done = true;
        work_end(w);
    }
    return st;
}

void rs_work_free(rs_work *w)
{
    if (w) w->free(w);
}

static rs_status check(rs_pg *g, rs_pg_opkind op, const void *fn, rs_dtype t, int root, bool has_root, rs_err *err)
{
    if (!g) return rs_err_set(err, RS_ERR_ARG, "%s: no process group", rs_pg_op_name(op));
    if (!fn)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s is not supported by the %s backend", rs_pg_op_name(op),
                          g->ops->name);
    if (op != RS_OP_BARRIER && !rs_pg_dtype_ok(t))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: dtype %s is not supported; use f32, f64, i32 or i64",
                          rs_pg_op_name(op), rs_dtype_name(t));
    if (has_root && (root < 0 || root >= g->world))
        return rs_err_set(err, RS_ERR_ARG, "%s: %s %d is not a rank of this group (0..%d)", rs_pg_op_name(op),
                          op == RS_OP_SEND ? "destination" : op == RS_OP_RECV ? "source" : "root", root,
                          g->world - 1);
    if ((op == RS_OP_SEND || op == RS_OP_RECV) && root == g->rank)
        return rs_err_set(err, RS_ERR_ARG, "%s: rank %d cannot %s itself", rs_pg_op_name(op), root,
                          op == RS_OP_SEND ? "send to" : "receive from");
    return RS_OK;
}

static void begin(rs_pg *g, rs_pg_opkind op, size_t bytes)
{
    if (!g->trace) return; /* no clock reads on the untraced path: small messages take ~1 us */
    rs_pg_event ev = {.kind = RS_PG_EV_BEGIN, .op = op, .algo = g->algo, .coll = g->coll, .rank = g->rank,
                      .peer = -1, .bytes = bytes, .t = rs_pg_now()};
    rs_pg_emit(g, &ev);
}

static rs_status end(rs_pg *g, rs_pg_opkind op, size_t bytes, rs_status st)
{
    if (g->trace) {
        /* the algorithm the backend actually used, where it says (step-based backends do) */
        rs_pg_algo a = g->cur_op == op && g->cur_algo != RS_ALGO_AUTO ? g->cur_algo : g->algo;
        rs_pg_event ev = {.kind = RS_PG_EV_END, .op = op, .algo = a, .coll = g->coll, .rank = g->rank,
                          .peer = -1, .bytes = bytes, .t = rs_pg_now(), .failed = st != RS_OK};
        rs_pg_emit(g, &ev);
    }
    if (op != RS_OP_SEND && op != RS_OP_RECV) g->coll++;
    return st;
}

#define RUN(opk, fnp, t, root, has_root, bytes, call)                                              \
    do {                                                                                           \
        rs_status st_ = check(g, opk, (const void *)(g && g->ops ? (fnp) : NULL), t, root, has_root, err); \
        if (st_) return st_;                                                                       \
        begin(g, opk, bytes);                                                                      \
        return end(g, opk, bytes, call);                                                           \
    } while (0)

rs_status rs_pg_send(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_err *err)
{
    RUN(RS_OP_SEND, g->ops->send, t, dst, true, n * rs_dtype_size(t), g->ops->send(g, buf, n, t, dst, err));
}

rs_status rs_pg_recv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_err *err)
{
    RUN(RS_OP_RECV, g->ops->recv, t, src, true, n * rs_dtype_size(t), g->ops->recv(g, buf, n, t, src, err));
}

rs_status rs_pg_broadcast(rs_pg *g, void *buf, size_t n, rs_dtype t, int root, rs_err *err)
{
    RUN(RS_OP_BROADCAST, g->ops->broadcast, t, root, true, n * rs_dtype_size(t),
        g->ops->broadcast(g, buf, n, t, root, err));
}

rs_status rs_pg_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, int root, rs_err *err)
{
    RUN(RS_OP_REDUCE, g->ops->reduce, t, root, true, n * rs_dtype_size(t), g->ops->reduce(g, buf, n, t, op, root, err));
}

rs_status rs_pg_all_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err)
{
    RUN(RS_OP_ALL_REDUCE, g->ops->all_reduce, t, 0, false, n * rs_dtype_size(t), g->ops->all_reduce(g, buf, n, t, op, err));
}

rs_status rs_pg_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err)
{
    RUN(RS_OP_SCATTER, g->ops->scatter, t, root, true, n * rs_dtype_size(t),
        g->ops->scatter(g, send, recv, n, t, root, err));
}

rs_status rs_pg_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err)
{
    RUN(RS_OP_GATHER, g->ops->gather, t, root, true, n * rs_dtype_size(t), g->ops->gather(g, send, recv, n, t, root, err));
}

rs_status rs_pg_all_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err)
{
    RUN(RS_OP_ALL_GATHER, g->ops->all_gather, t, 0, false, n * rs_dtype_size(t), g->ops->all_gather(g, send, recv, n, t, err));
}

rs_status rs_pg_reduce_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_redop op,
                               rs_err *err)
{
    RUN(RS_OP_REDUCE_SCATTER, g->ops->reduce_scatter, t, 0, false, n * rs_dtype_size(t),
        g->ops->reduce_scatter(g, send, recv, n, t, op, err));
}

rs_status rs_pg_all_to_all(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err)
{
    RUN(RS_OP_ALL_TO_ALL, g->ops->all_to_all, t, 0, false, n * rs_dtype_size(t), g->ops->all_to_all(g, send, recv, n, t, err));
}

rs_status rs_pg_barrier(rs_pg *g, rs_err *err)
{
    RUN(RS_OP_BARRIER, g->ops->barrier, RS_F32, 0, false, 0, g->ops->barrier(g, err));
}

/* Immediate operations report BEGIN when posted; their end is the wait, which the caller sees. */
rs_status rs_pg_isend(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_work **out, rs_err *err)
{
    *out = NULL;
    rs_status st = check(g, RS_OP_SEND, (const void *)(g && g->ops ? g->ops->isend : NULL), t, dst, true, err);
    if (st) return st;
    begin(g, RS_OP_SEND, n * rs_dtype_size(t));
    return g->ops->isend(g, buf, n, t, dst, out, err);
}

rs_status rs_pg_irecv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_work **out, rs_err *err)
{
    *out = NULL;
    rs_status st = check(g, RS_OP_RECV, (const void *)(g && g->ops ? g->ops->irecv : NULL), t, src, true, err);
    if (st) return st;
    begin(g, RS_OP_RECV, n * rs_dtype_size(t));
    return g->ops->irecv(g, buf, n, t, src, out, err);
}
