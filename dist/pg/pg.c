/* Process-group front end: argument checks, trace events, dispatch to the backend, and the serial
 * reduction every backend uses and is tested against (see pg.h). */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *rs_redop_name(rs_redop op)
{
    static const char *const n[RS_REDOP_COUNT] = {"sum", "product", "min", "max", "avg"};
    return (unsigned)op < RS_REDOP_COUNT ? n[op] : "?";
}

const char *rs_pg_algo_name(rs_pg_algo a)
{
    static const char *const n[RS_ALGO_COUNT] = {"auto", "ring", "tree", "recursive-doubling"};
    return (unsigned)a < RS_ALGO_COUNT ? n[a] : "?";
}

const char *rs_pg_op_name(rs_pg_opkind k)
{
    static const char *const n[RS_OP_KIND_COUNT] = {"send", "recv", "broadcast", "reduce", "all_reduce",
                                                    "scatter", "gather", "all_gather", "reduce_scatter",
                                                    "all_to_all", "barrier"};
    return (unsigned)k < RS_OP_KIND_COUNT ? n[k] : "?";
}

bool rs_pg_dtype_ok(rs_dtype t) { return t == RS_F32 || t == RS_F64 || t == RS_I32 || t == RS_I64; }

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

void rs_pg_emit(rs_pg *g, const rs_pg_event *ev)
{
    if (g->trace) g->trace(g->trace_ud, ev);
}

void rs_pg_destroy(rs_pg *g)
{
    if (g && g->ops && g->ops->destroy) g->ops->destroy(g);
    else free(g);
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
    rs_pg_event ev = {.kind = RS_PG_EV_BEGIN, .op = op, .algo = g->algo, .coll = g->coll, .rank = g->rank,
                      .peer = -1, .bytes = bytes, .t = rs_pg_now()};
    rs_pg_emit(g, &ev);
}

static rs_status end(rs_pg *g, rs_pg_opkind op, size_t bytes, rs_status st)
{
    rs_pg_event ev = {.kind = RS_PG_EV_END, .op = op, .algo = g->algo, .coll = g->coll, .rank = g->rank,
                      .peer = -1, .bytes = bytes, .t = rs_pg_now()};
    rs_pg_emit(g, &ev);
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
