/* Step-based backends (shm, tcp): every collective is a sequence of traced steps over one primitive,
 * the transfer — send a range to one peer while receiving a range from another, copying or reducing
 * as it lands. A backend supplies only the transport (how bytes move between two ranks); the
 * algorithms (ring, binomial tree, recursive doubling...) live once, in step.c, for all of them. */
#ifndef RS_PG_STEP_H
#define RS_PG_STEP_H

#include "pg.h"

typedef enum rs_xf_mode { RS_XF_COPY, RS_XF_REDUCE } rs_xf_mode;

/* One transfer. to/from < 0: that side is absent. REDUCE combines rp = rp op incoming, or incoming op
 * rp when peer_first (a canonical order that lets two partners compute the same bits). after_send:
 * rp aliases sp, so bytes may only land where ours have already gone out. The transport advances
 * soff/roff; hold_send/hold_recv (set by step.c) forbid a side from moving while an older transfer to
 * the same peer is unfinished, so each pair's stream stays in posting order. */
typedef struct rs_pg_xfer {
    int to, from;
    const char *sp;
    char *rp;
    size_t sbytes, rbytes, soff, roff;
    rs_xf_mode mode;
    rs_dtype t;
    rs_redop op;
    bool peer_first, after_send;
    bool hold_send, hold_recv;
    int step, steps;
    _Alignas(8) unsigned char tp_state[64]; /* the transport's own per-transfer state (zeroed at start) */
} rs_pg_xfer;

typedef struct rs_pg_transport {
    /* Moves what it can now, without blocking; true when anything moved. A broken connection is an
     * error (*st set, message in err) rather than a wait for the timeout. */
    bool (*progress)(rs_pg *g, rs_pg_xfer *x, rs_status *st, rs_err *err);
    /* Nothing moved `idle` times in a row: wait a little for the peers (spin, yield, poll, sleep). */
    void (*idle)(rs_pg *g, unsigned idle);
} rs_pg_transport;

static inline bool rs_xfer_done(const rs_pg_xfer *x)
{
    return (x->to < 0 || x->soff >= x->sbytes) && (x->from < 0 || x->roff >= x->rbytes);
}

/* The operations, for a backend's rs_pg_ops (they use g->ops->transport). */
rs_status rs_step_send(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_err *err);
rs_status rs_step_recv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_err *err);
rs_status rs_step_isend(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_work **out, rs_err *err);
rs_status rs_step_irecv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_work **out, rs_err *err);
rs_status rs_step_broadcast(rs_pg *g, void *buf, size_t n, rs_dtype t, int root, rs_err *err);
rs_status rs_step_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, int root, rs_err *err);
rs_status rs_step_all_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err);
rs_status rs_step_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err);
rs_status rs_step_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err);
rs_status rs_step_all_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err);
rs_status rs_step_reduce_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_redop op,
                                 rs_err *err);
rs_status rs_step_all_to_all(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err);
rs_status rs_step_barrier(rs_pg *g, rs_err *err);

/* The entries of rs_pg_ops every step-based backend shares: a backend's table is
 *   {RS_PG_STEP_OPS("shm", &shm_transport), .new_group = ..., .destroy = ...}. */
#define RS_PG_STEP_OPS(backend_name, transport_ptr)                                                                  \
    .name = (backend_name), .send = rs_step_send, .recv = rs_step_recv, .broadcast = rs_step_broadcast,            \
    .reduce = rs_step_reduce, .all_reduce = rs_step_all_reduce, .scatter = rs_step_scatter,                        \
    .gather = rs_step_gather, .all_gather = rs_step_all_gather, .reduce_scatter = rs_step_reduce_scatter,          \
    .all_to_all = rs_step_all_to_all, .barrier = rs_step_barrier, .isend = rs_step_isend, .irecv = rs_step_irecv, \
    .devices = RS_PG_DEV_CPU,                                                                                      \
    .algos = "all_reduce: ring, tree, recursive-doubling (auto: recursive doubling below 64 KiB, ring above)",     \
    .transport = (transport_ptr)

/* Runs one transfer to completion (also moving the group's pending immediate transfers along), with
 * the group timeout counted from the last progress. */
rs_status rs_step_run(rs_pg *g, rs_pg_xfer *x, rs_err *err);

/* Fills the rs_pg common part for a backend constructor (ops, rank, world, timeout, store, name) and
 * checks the arguments every backend checks. Caller owns *out (calloc'd; impl still NULL). */
rs_status rs_step_pg_alloc(const rs_pg_ops *ops, rs_store *store, const char *name, int rank, int world,
                           int max_world, double timeout_s, rs_pg **out, rs_err *err);

#endif
