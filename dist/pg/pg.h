/* Process groups: the operations of torch.distributed over a backend table.
 * A group is this rank's view of `world` ranks that found each other through the rendezvous store.
 * Every operation works on (pointer, count, dtype) ranges — offset ranges of a model's flat buffers
 * — and every blocking call honours the group's timeout, failing with RS_ERR_TIMEOUT and a message
 * that names the operation and the ranks not heard from. Backends fill rs_pg_ops, as devices fill
 * rs_kernels; optional entries are NULL and the capability table (`backends`) is read from them. */
#ifndef RS_PG_H
#define RS_PG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dist/store/store.h"
#include "engine/core/status.h"
#include "engine/core/tensor.h"

typedef enum rs_redop { RS_SUM = 0, RS_PRODUCT, RS_MIN, RS_MAX, RS_AVG, RS_REDOP_COUNT } rs_redop;

const char *rs_redop_name(rs_redop op);
/* True for the dtypes collectives accept now: f32, f64, i32, i64. */
bool rs_pg_dtype_ok(rs_dtype t);

/* dst[i] = dst[i] op src[i] for n elements. AVG reduces as SUM; the caller divides once at the end
 * (rs_pg_scale_avg), so the result does not depend on the order partial sums meet. This is the serial
 * reference every backend's result is checked against. */
void rs_pg_reduce_into(void *dst, const void *src, size_t n, rs_dtype t, rs_redop op);
/* x[i] /= world for AVG (integer dtypes divide with truncation, as torch does). */
void rs_pg_scale_avg(void *x, size_t n, rs_dtype t, int world);

typedef enum rs_pg_algo {
    RS_ALGO_AUTO = 0,     /* the backend picks by message size */
    RS_ALGO_RING,
    RS_ALGO_TREE,         /* binomial tree */
    RS_ALGO_RECDOUBLING,  /* recursive doubling */
    RS_ALGO_COUNT
} rs_pg_algo;
const char *rs_pg_algo_name(rs_pg_algo a);

typedef enum rs_pg_opkind {
    RS_OP_SEND, RS_OP_RECV, RS_OP_BROADCAST, RS_OP_REDUCE, RS_OP_ALL_REDUCE, RS_OP_SCATTER, RS_OP_GATHER,
    RS_OP_ALL_GATHER, RS_OP_REDUCE_SCATTER, RS_OP_ALL_TO_ALL, RS_OP_BARRIER, RS_OP_KIND_COUNT
} rs_pg_opkind;
const char *rs_pg_op_name(rs_pg_opkind k);

/* What a backend reports as it works (nothing is reported while `trace` is NULL). */
typedef enum rs_pg_ev_kind { RS_PG_EV_BEGIN, RS_PG_EV_STEP, RS_PG_EV_END } rs_pg_ev_kind;
typedef struct rs_pg_event {
    rs_pg_ev_kind kind;
    rs_pg_opkind op;
    rs_pg_algo algo;
    uint64_t coll;      /* collective number in this group, the same on every rank */
    int step, steps;    /* algorithm step k of K (STEP) */
    int rank, peer;     /* STEP: this rank sends chunk `chunk` to peer (peer < 0: local reduce) */
    int chunk;
    size_t bytes;       /* BEGIN/END: the message; STEP: bytes moved in this step */
    double t;           /* monotonic seconds */
} rs_pg_event;
typedef void (*rs_pg_trace_fn)(void *ud, const rs_pg_event *ev);

typedef struct rs_pg rs_pg;

/* The backend table. Every entry returns RS_OK or an error in err. Buffers: send/recv may alias for
 * in-place operations where torch allows it (all_reduce is always in place: buf). */
typedef struct rs_pg_ops {
    const char *name; /* "shm", "tcp", "mpi", "nccl" */
    rs_status (*send)(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_err *err);
    rs_status (*recv)(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_err *err);
    rs_status (*broadcast)(rs_pg *g, void *buf, size_t n, rs_dtype t, int root, rs_err *err);
    rs_status (*reduce)(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, int root, rs_err *err);
    rs_status (*all_reduce)(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err);
    /* scatter: root's send holds world*n elements; every rank receives n into recv. */
    rs_status (*scatter)(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err);
    /* gather: every rank sends n; root's recv gets world*n in rank order. */
    rs_status (*gather)(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err);
    rs_status (*all_gather)(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err);
    /* reduce_scatter: send holds world*n; rank r receives the reduction of every rank's block r. */
    rs_status (*reduce_scatter)(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_redop op,
                                rs_err *err);
    /* all_to_all: block j of rank i's send (n elements) lands as block i of rank j's recv. */
    rs_status (*all_to_all)(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err);
    rs_status (*barrier)(rs_pg *g, rs_err *err);
    void (*destroy)(rs_pg *g);
} rs_pg_ops;

/* The state every backend shares; a backend keeps its own after it (g->impl). */
struct rs_pg {
    const rs_pg_ops *ops;
    int rank, world;
    double timeout_s;       /* every blocking call */
    rs_pg_algo algo;        /* RS_ALGO_AUTO unless the user chose (algo=) */
    uint64_t coll;          /* collectives begun so far */
    rs_store *store;        /* borrowed: the rendezvous store the group was made with */
    char name[64];          /* unique per group and run: names shared segments and store keys */
    rs_pg_trace_fn trace;   /* optional */
    void *trace_ud;
    void *impl;             /* backend state */
};

/* Creates this rank's member of a shm group named `name` of `world` ranks, meeting through store.
 * All ranks call it with the same name and world. Caller owns the result (rs_pg_destroy). */
rs_status rs_pg_shm_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                        rs_err *err);
void rs_pg_destroy(rs_pg *g);

/* Thin wrappers that check arguments (dtype, root in range, counts) with messages, report BEGIN/END
 * trace events and dispatch; an operation the backend lacks is RS_ERR_UNSUPPORTED naming it. */
rs_status rs_pg_send(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_err *err);
rs_status rs_pg_recv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_err *err);
rs_status rs_pg_broadcast(rs_pg *g, void *buf, size_t n, rs_dtype t, int root, rs_err *err);
rs_status rs_pg_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, int root, rs_err *err);
rs_status rs_pg_all_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err);
rs_status rs_pg_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err);
rs_status rs_pg_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err);
rs_status rs_pg_all_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err);
rs_status rs_pg_reduce_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_redop op,
                               rs_err *err);
rs_status rs_pg_all_to_all(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err);
rs_status rs_pg_barrier(rs_pg *g, rs_err *err);

/* Helpers for backends: report a trace event (no-op without a trace hook), monotonic time. */
void rs_pg_emit(rs_pg *g, const rs_pg_event *ev);
double rs_pg_now(void);

#endif
