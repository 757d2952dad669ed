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
/* The words of this module, each list NULL-terminated and (where an enum names them) indexed by it:
 * the prompt offers, parses and completes from these (repl/cmdtab_opts.c) and a worker reads its command
 * line with them (dist/worker/lines.c), so a new entry here reaches both with no other edit. */
extern const char *const rs_redop_names[RS_REDOP_COUNT + 1];
/* The element types collectives accept (rs_dtype_name's spelling). */
extern const char *const rs_pg_dtype_names[];
/* True for the dtypes collectives accept now: those of rs_pg_dtype_names. */
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
extern const char *const rs_pg_algo_names[RS_ALGO_COUNT + 1];

typedef enum rs_pg_opkind {
    RS_OP_SEND, RS_OP_RECV, RS_OP_BROADCAST, RS_OP_REDUCE, RS_OP_ALL_REDUCE, RS_OP_SCATTER, RS_OP_GATHER,
    RS_OP_ALL_GATHER, RS_OP_REDUCE_SCATTER, RS_OP_ALL_TO_ALL, RS_OP_BARRIER, RS_OP_KIND_COUNT
} rs_pg_opkind;
const char *rs_pg_op_name(rs_pg_opkind k);
extern const char *const rs_pg_op_names[RS_OP_KIND_COUNT + 1];
/* The collectives among them: every kind from broadcast on (send and recv, first, are point-to-point). */
#define RS_PG_COLLECTIVE_NAMES (&rs_pg_op_names[RS_OP_BROADCAST])

/* What a backend reports as it works (nothing is reported while `trace` is NULL). */
typedef enum rs_pg_ev_kind { RS_PG_EV_BEGIN, RS_PG_EV_STEP, RS_PG_EV_END } rs_pg_ev_kind;
typedef struct rs_pg_event {
    rs_pg_ev_kind kind;
    int group;          /* 0: the world group; sub-groups count up from 1 in creation order */
    rs_pg_opkind op;
    rs_pg_algo algo;
    uint64_t coll;      /* collective number in this group, the same on every rank */
    int step, steps;    /* algorithm step k of K (STEP) */
    int rank, peer;     /* global ranks. STEP: this rank sends chunk `chunk` to peer (peer < 0: local reduce) */
    int chunk;
    size_t bytes;       /* BEGIN/END: the message; STEP: bytes moved in this step */
    bool failed;        /* END: the operation returned an error (a timeout: the rank gave up in it) */
    double t;           /* monotonic seconds */
    /* STEP of the step-based backends: the buffer the algorithm works in on this rank as the step
     * begins (the steps before it done), `count` elements of `dtype` cut into `blocks` chunks as the
     * algorithm cuts it (element i of chunk b: count*b/blocks + i; 1 chunk for whole-buffer algorithms).
     * What a dashboard shows as "the data"; NULL elsewhere. Valid only during the trace call. */
    const void *data;
    size_t count;
    rs_dtype dtype;
    int blocks;
} rs_pg_event;
typedef void (*rs_pg_trace_fn)(void *ud, const rs_pg_event *ev);

typedef struct rs_pg rs_pg;
typedef struct rs_work rs_work;
struct rs_pg_transport; /* dist/pg/step.h: backends whose collectives are steps over point-to-point */

/* Where a backend's buffers live: CPU memory, or GPU memory (nccl). */
enum { RS_PG_DEV_CPU = 1u, RS_PG_DEV_GPU = 2u };

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
    /* Immediate point-to-point: start the transfer and return a work handle (rs_work_wait/test).
     * Messages between one pair of ranks arrive in the order they were posted. */
    rs_status (*isend)(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_work **out, rs_err *err);
    rs_status (*irecv)(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_work **out, rs_err *err);
    /* A group of the `n` ranks of g listed (sorted, distinct, including this rank), named `name`; called
     * by the members only (rs_pg_new_group checks the list and fills members/group_id afterwards). */
    rs_status (*new_group)(rs_pg *g, const int *ranks, int n, const char *name, rs_pg **out, rs_err *err);
    void (*destroy)(rs_pg *g);
    unsigned devices;       /* RS_PG_DEV_* where its buffers may live */
    /* Backends whose buffers are not host memory (nccl): allocate, free and copy device buffers so
     * generic code (the worker's `collective` and `bench`) can fill inputs and read results. NULL for
     * host-memory backends. to_device: 1 host -> device, 0 device -> host. */
    void *(*dev_alloc)(rs_pg *g, size_t bytes);
    void (*dev_free)(rs_pg *g, void *p);
    rs_status (*dev_copy)(rs_pg *g, void *dst, const void *src, size_t bytes, int to_device, rs_err *err);
    /* The GPU ordinal this rank's buffers live on (nccl: LOCAL_RANK mod the GPUs); NULL for host backends. */
    int (*gpu)(const rs_pg *g);
    const char *algos;      /* what `backends` says about its algorithms */
    const struct rs_pg_transport *transport; /* non-NULL for step-based backends (shm, tcp) */
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
    bool polite;            /* waiting yields at once: a communication thread shares cores with compute */
    /* Sub-groups: the global rank of each group rank (owned; NULL in a world group, where they are equal),
     * this group's number in trace events, and how many sub-groups were made from it (names them). */
    int *members;
    int group_id;
    unsigned nsub;
    int *next_group_id;     /* shared counter of the world group (borrowed by sub-groups) */
    int group_counter;      /* the storage behind next_group_id in a world group */
    /* Step-based backends: the current operation (errors, trace) and the immediate transfers still
     * in flight, oldest first, which every blocking wait also moves along so two ranks cannot
     * deadlock on each other's isends. */
    rs_pg_opkind cur_op;
    rs_pg_algo cur_algo;
    rs_work *pending;
    /* ... and the buffer the current collective works in (rs_pg_event.data), NULL for none */
    const void *work;
    size_t work_count;
    rs_dtype work_dtype;
    int work_blocks;
};

/* The backends this build has, for `backends` and for rs_pg_new. */
typedef struct rs_pg_backend {
    const char *name;
    const rs_pg_ops *ops;
    const char *about;      /* one line */
    bool needs_launcher;    /* true for mpi: ranks must come from mpirun */
    rs_status (*create)(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                        rs_err *err);
} rs_pg_backend;
/* NULL-terminated by a {NULL} entry. */
const rs_pg_backend *rs_pg_backends(void);
/* Every backend ringside has, built here or not (backend= takes them all; one this build lacks is
 * refused saying it was not built), NULL-terminated. */
extern const char *const rs_pg_backend_names[];
const rs_pg_backend *rs_pg_backend_find(const char *name);

/* Creates this rank's member of a group of `world` ranks of backend `backend` ("shm", "tcp", "mpi",
 * "nccl"), meeting through store under `name`. All ranks call it with the same arguments but rank.
 * An unknown or unbuilt backend is RS_ERR_UNSUPPORTED listing those that exist. Caller owns *out. */
rs_status rs_pg_new(const char *backend, rs_store *store, const char *name, int rank, int world, double timeout_s,
                    rs_pg **out, rs_err *err);

/* torch.distributed.new_group: every rank of g calls it with the same rank list (any order, no
 * duplicates, group ranks of g); members get their own group (ranks renumbered in sorted order), the
 * others *out = NULL. Caller owns *out (rs_pg_destroy, before g). */
rs_status rs_pg_new_group(rs_pg *g, const int *ranks, int n, rs_pg **out, rs_err *err);
/* The global rank of group rank r (r itself in a world group). */
int rs_pg_global_rank(const rs_pg *g, int r);
/* The GPU this rank's buffers of g live on, -1 for a host backend (ops->gpu). */
int rs_pg_gpu(const rs_pg *g);

/* The backends' own constructors (rs_pg_new dispatches to them). */
rs_status rs_pg_shm_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                        rs_err *err);
rs_status rs_pg_tcp_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                        rs_err *err);
/* mpi: rank and world must be MPI_COMM_WORLD's (the store is only borrowed for names); MPI is
 * initialised on first use and finalised at exit. */
rs_status rs_pg_mpi_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                        rs_err *err);
/* nccl: buffers are device pointers on this rank's GPU (LOCAL_RANK modulo the device count). */
rs_status rs_pg_nccl_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
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

/* Immediate send/recv (torch's isend/irecv): the buffer must stay untouched until the work is done. */
rs_status rs_pg_isend(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_work **out, rs_err *err);
rs_status rs_pg_irecv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_work **out, rs_err *err);
/* Blocks until done (or the group's timeout without progress: RS_ERR_TIMEOUT naming the peer). */
rs_status rs_work_wait(rs_work *w, rs_err *err);
/* Moves the transfer along without blocking; *done = true once complete. */
rs_status rs_work_test(rs_work *w, bool *done, rs_err *err);
/* Frees a finished work. Freeing one still in flight abandons it: its peer will time out. */
void rs_work_free(rs_work *w);

/* The common part of every work handle; a backend allocates its own struct with this first. */
struct rs_work {
    rs_pg *g;
    rs_pg_opkind op;
    size_t bytes;
    bool done;
    rs_status (*wait)(rs_work *w, rs_err *err);
    rs_status (*test)(rs_work *w, bool *done, rs_err *err);
    void (*free)(rs_work *w);
    rs_work *next;          /* step-based backends: the group's pending list */
};

/* Helpers for backends: report a trace event (no-op without a trace hook), monotonic time. */
void rs_pg_emit(rs_pg *g, const rs_pg_event *ev);
double rs_pg_now(void);

#endif
