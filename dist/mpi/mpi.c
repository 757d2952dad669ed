/* The mpi process-group backend: Open MPI's own collectives (its tuned/libnbc components choose the
 * algorithm by size) over a duplicate of MPI_COMM_WORLD. Ranks come from mpirun, so there is no
 * rendezvous; what this file adds to MPI is the group's timeout, which MPI itself does not have. */
#include "dist/pg/pg.h"

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Why every operation is nonblocking: a blocking MPI call whose peer never comes waits forever. Each
 * operation is started with its MPI_I* form and then polled with MPI_Test against the group's timeout.
 * Polling first spins (a peer on another core answers within microseconds, and sleeping there would
 * double small-message latency), then yields (8 ranks on 2 cores: let the rank we wait for run), then
 * sleeps briefly so a rank waiting minutes for a slow peer does not burn a core. Open MPI progresses
 * transfers only inside MPI calls, so the sleep is kept short enough not to stall large messages. */
#define MPI_SPIN_S 50e-6
#define MPI_YIELD_S 2e-3
#define MPI_SLEEP_NS 20000

/* A collective that timed out cannot be cancelled (MPI forbids MPI_Cancel and MPI_Request_free on
 * collective requests), and any later collective on the same communicator would be matched against it.
 * So the group is marked broken, the request and any scratch buffer it may still write into are kept
 * (never freed: they may be used until MPI_Finalize), and every later operation fails at once. */
typedef struct mpi_orphan {
    MPI_Request req;
    void *scratch;
    struct mpi_orphan *next;
} mpi_orphan;

typedef struct mpi_impl {
    MPI_Comm comm;          /* owned (MPI_Comm_free), a dup of MPI_COMM_WORLD or a sub-group's */
    const char *broken;     /* the operation that timed out, or NULL while the group works */
    mpi_orphan *orphans;    /* deliberately never freed, see above */
} mpi_impl;

static mpi_impl *impl(rs_pg *g) { return g->impl; }

/* ---------------------------------------------------------------- errors and types */

static rs_status mpi_fail(rs_pg *g, rs_err *err, int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error code %d", rc);
    return rs_err_set(err, RS_ERR_INTERNAL, "%s: MPI failed on rank %d: %s", what, rs_pg_global_rank(g, g->rank), msg);
}

static MPI_Datatype mpi_type(rs_dtype t)
{
    switch (t) {
    case RS_F32: return MPI_FLOAT;
    case RS_F64: return MPI_DOUBLE;
    case RS_I32: return MPI_INT32_T;
    case RS_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL; /* pg.c rejects other dtypes before we are called */
    }
}

/* AVG reduces as SUM; the caller's rank that holds the result divides once (rs_pg_scale_avg). */
static MPI_Op mpi_op(rs_redop op)
{
    switch (op) {
    case RS_PRODUCT: return MPI_PROD;
    case RS_MIN: return MPI_MIN;
    case RS_MAX: return MPI_MAX;
    default: return MPI_SUM;
    }
}

/* Checks what every operation needs: a working group (point-to-point still works after a collective
 * timed out: its matching is separate) and a count MPI's int can carry (large buffers would need
 * derived datatypes, which MPI's built-in reductions do not accept). */
static rs_status usable(rs_pg *g, rs_pg_opkind op, size_t n, rs_err *err)
{
    if (impl(g)->broken && op != RS_OP_SEND && op != RS_OP_RECV)
        return rs_err_set(err, RS_ERR_ARG,
                          "%s: mpi group '%s' is unusable since its %s timed out (that collective may still be in "
                          "flight and MPI cannot cancel it); destroy the group",
                          rs_pg_op_name(op), g->name, impl(g)->broken);
    if (n > INT_MAX)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: %zu elements is more than MPI's int count (%d); split it",
                          rs_pg_op_name(op), n, INT_MAX);
    return RS_OK;
}

static bool overlap(const void *a, size_t an, const void *b, size_t bn)
{
    const char *x = a, *y = b;
    return x && y && an && bn && x < y + bn && y < x + an;
}

/* MPI forbids a send buffer that overlaps the receive buffer except through MPI_IN_PLACE, whose
 * meaning differs per collective; torch allows such aliasing, so an overlapping send is copied first. */
static rs_status unalias(rs_pg_opkind op, const void **send, size_t sbytes, const void *recv, size_t rbytes,
                         void **scratch, rs_err *err)
{
    *scratch = NULL;
    if (!overlap(*send, sbytes, recv, rbytes)) return RS_OK;
    *scratch = malloc(sbytes);
    if (!*scratch) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory (%zu bytes)", rs_pg_op_name(op), sbytes);
    memcpy(*scratch, *send, sbytes);
    *send = *scratch;
    return RS_OK;
}

/* ---------------------------------------------------------------- waiting */

static void idle(double waited)
{
    if (waited < MPI_SPIN_S) return;
    if (waited < MPI_YIELD_S) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, MPI_SLEEP_NS};
    nanosleep(&ts, NULL);
}

/* Polls req until it completes (RS_OK, req is MPI_REQUEST_NULL) or the group's timeout passes
 * (RS_ERR_TIMEOUT, req still active: the caller decides what to do with it). */
static rs_status wait_req(rs_pg *g, MPI_Request *req, const char *what, rs_err *err, bool *timed_out)
{
    *timed_out = false;
    double t0 = rs_pg_now();
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(g, err, rc, what);
        if (done) return RS_OK;
        double waited = rs_pg_now() - t0;
        if (waited >= g->timeout_s) {
            *timed_out = true;
            return RS_ERR_TIMEOUT;
        }
        idle(waited);
    }
}

/* Ends a collective started with return code rc on req. scratch (may be NULL) is freed once the
 * request is done, or kept with it forever if it timed out (see mpi_orphan). */
static rs_status finish(rs_pg *g, rs_pg_opkind op, int rc, MPI_Request *req, void *scratch, rs_err *err)
{
    if (rc != MPI_SUCCESS) {
        free(scratch);
        return mpi_fail(g, err, rc, rs_pg_op_name(op));
    }
    bool timed_out = false;
    rs_status st = wait_req(g, req, rs_pg_op_name(op), err, &timed_out);
    if (!timed_out) {
        free(scratch);
        return st;
    }
    mpi_orphan *o = malloc(sizeof *o);
    if (o) { /* without memory the request is simply lost; it is never waited on either way */
        *o = (mpi_orphan){.req = *req, .scratch = scratch, .next = impl(g)->orphans};
        impl(g)->orphans = o;
    }
    impl(g)->broken = rs_pg_op_name(op);
    /* If the missing rank died, Open MPI usually aborts the whole job before we get here (mpirun kills
     * every rank when one exits without MPI_Finalize); this message is for a rank that is alive but
     * stuck or skipped the call. */
    return rs_err_set(err, RS_ERR_TIMEOUT,
                      "%s: rank %d timed out after %.1f s: a rank of the group did not take part (MPI cannot tell "
                      "which); it may have exited or be stuck",
                      rs_pg_op_name(op), rs_pg_global_rank(g, g->rank), g->timeout_s);
}

/* ---------------------------------------------------------------- point to point */

typedef struct mpi_work {
    rs_work base;
    MPI_Request req;
    int peer;               /* group rank */
} mpi_work;

static rs_status p2p_timeout(rs_pg *g, rs_pg_opkind op, int peer, rs_err *err)
{
    return rs_err_set(err, RS_ERR_TIMEOUT, "%s: rank %d timed out after %.1f s %s rank %d; it may have exited or be stuck",
                      rs_pg_op_name(op), rs_pg_global_rank(g, g->rank), g->timeout_s,
                      op == RS_OP_SEND ? "sending to" : "waiting for a message from", rs_pg_global_rank(g, peer));
}

/* Drops a transfer still in flight. A receive is cancelled so its buffer is not written later (if it
 * has already been matched the cancel fails and the request is left to complete on its own); a send
 * cannot be cancelled in Open MPI, so it is released and may still read its buffer. */
static void p2p_abandon(rs_pg_opkind op, MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL) return;
    if (op == RS_OP_RECV) {
        MPI_Cancel(req);
        for (int i = 0; i < 100 && *req != MPI_REQUEST_NULL; i++) {
            int done = 0;
            if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        }
    }
    if (*req != MPI_REQUEST_NULL) MPI_Request_free(req);
}

static rs_status p2p_start(rs_pg *g, rs_pg_opkind op, void *buf, size_t n, rs_dtype t, int peer, MPI_Request *req,
                           rs_err *err)
{
    rs_status st = usable(g, op, n, err);
    if (st) return st;
    int rc = op == RS_OP_SEND ? MPI_Isend(buf, (int)n, mpi_type(t), peer, 0, impl(g)->comm, req)
                              : MPI_Irecv(buf, (int)n, mpi_type(t), peer, 0, impl(g)->comm, req);
    return rc == MPI_SUCCESS ? RS_OK : mpi_fail(g, err, rc, rs_pg_op_name(op));
}

static rs_status p2p_wait(rs_pg *g, rs_pg_opkind op, MPI_Request *req, int peer, rs_err *err)
{
    bool timed_out = false;
    rs_status st = wait_req(g, req, rs_pg_op_name(op), err, &timed_out);
    return timed_out ? p2p_timeout(g, op, peer, err) : st;
}

static rs_status mpi_p2p(rs_pg *g, rs_pg_opkind op, void *buf, size_t n, rs_dtype t, int peer, rs_err *err)
{
    MPI_Request req = MPI_REQUEST_NULL;
    rs_status st = p2p_start(g, op, buf, n, t, peer, &req, err);
    if (!st) st = p2p_wait(g, op, &req, peer, err);
    if (st) p2p_abandon(op, &req);
    return st;
}

static rs_status mpi_send(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_err *err)
{
    return mpi_p2p(g, RS_OP_SEND, (void *)buf, n, t, dst, err);
}

static rs_status mpi_recv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_err *err)
{
    return mpi_p2p(g, RS_OP_RECV, buf, n, t, src, err);
}

static rs_status work_wait(rs_work *w, rs_err *err)
{
    mpi_work *m = (mpi_work *)w;
    return p2p_wait(w->g, w->op, &m->req, m->peer, err);
}

static rs_status work_test(rs_work *w, bool *done, rs_err *err)
{
    mpi_work *m = (mpi_work *)w;
    int flag = 0;
    int rc = MPI_Test(&m->req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(w->g, err, rc, rs_pg_op_name(w->op));
    *done = flag != 0;
    return RS_OK;
}

static void work_free(rs_work *w)
{
    mpi_work *m = (mpi_work *)w;
    p2p_abandon(w->op, &m->req);
    free(m);
}

static rs_status mpi_iwork(rs_pg *g, rs_pg_opkind op, void *buf, size_t n, rs_dtype t, int peer, rs_work **out,
                           rs_err *err)
{
    mpi_work *m = calloc(1, sizeof *m);
    if (!m) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", rs_pg_op_name(op));
    m->req = MPI_REQUEST_NULL;
    rs_status st = p2p_start(g, op, buf, n, t, peer, &m->req, err);
    if (st) {
        free(m);
        return st;
    }
    m->base = (rs_work){.g = g, .op = op, .bytes = n * rs_dtype_size(t), .wait = work_wait, .test = work_test,
                        .free = work_free};
    m->peer = peer;
    *out = &m->base;
    return RS_OK;
}

static rs_status mpi_isend(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_work **out, rs_err *err)
{
    return mpi_iwork(g, RS_OP_SEND, (void *)buf, n, t, dst, out, err);
}

static rs_status mpi_irecv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_work **out, rs_err *err)
{
    return mpi_iwork(g, RS_OP_RECV, buf, n, t, src, out, err);
}

/* ---------------------------------------------------------------- collectives */

static rs_status mpi_broadcast(rs_pg *g, void *buf, size_t n, rs_dtype t, int root, rs_err *err)
{
    rs_status st = usable(g, RS_OP_BROADCAST, n, err);
    if (st) return st;
    MPI_Request req;
    int rc = MPI_Ibcast(buf, (int)n, mpi_type(t), root, impl(g)->comm, &req);
    return finish(g, RS_OP_BROADCAST, rc, &req, NULL, err);
}

/* Only the root's buffer changes: it reduces in place (MPI_IN_PLACE), the others only send theirs. */
static rs_status mpi_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, int root, rs_err *err)
{
    rs_status st = usable(g, RS_OP_REDUCE, n, err);
    if (st) return st;
    MPI_Request req;
    bool me = g->rank == root;
    int rc = MPI_Ireduce(me ? MPI_IN_PLACE : buf, me ? buf : NULL, (int)n, mpi_type(t), mpi_op(op), root,
                         impl(g)->comm, &req);
    st = finish(g, RS_OP_REDUCE, rc, &req, NULL, err);
    if (!st && me && op == RS_AVG) rs_pg_scale_avg(buf, n, t, g->world);
    return st;
}

static rs_status mpi_all_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err)
{
    rs_status st = usable(g, RS_OP_ALL_REDUCE, n, err);
    if (st) return st;
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(t), mpi_op(op), impl(g)->comm, &req);
    st = finish(g, RS_OP_ALL_REDUCE, rc, &req, NULL, err);
    if (!st && op == RS_AVG) rs_pg_scale_avg(buf, n, t, g->world);
    return st;
}

static rs_status mpi_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err)
{
    rs_status st = usable(g, RS_OP_SCATTER, n, err);
    if (st) return st;
    size_t b = n * rs_dtype_size(t);
    void *scratch = NULL;
    if (g->rank == root && (st = unalias(RS_OP_SCATTER, &send, b * (size_t)g->world, recv, b, &scratch, err)))
        return st;
    MPI_Request req;
    int rc = MPI_Iscatter(send, (int)n, mpi_type(t), recv, (int)n, mpi_type(t), root, impl(g)->comm, &req);
    return finish(g, RS_OP_SCATTER, rc, &req, scratch, err);
}

static rs_status mpi_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err)
{
    rs_status st = usable(g, RS_OP_GATHER, n, err);
    if (st) return st;
    size_t b = n * rs_dtype_size(t);
    void *scratch = NULL;
    if (g->rank == root && (st = unalias(RS_OP_GATHER, &send, b, recv, b * (size_t)g->world, &scratch, err)))
        return st;
    MPI_Request req;
    int rc = MPI_Igather(send, (int)n, mpi_type(t), recv, (int)n, mpi_type(t), root, impl(g)->comm, &req);
    return finish(g, RS_OP_GATHER, rc, &req, scratch, err);
}

static rs_status mpi_all_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err)
{
    rs_status st = usable(g, RS_OP_ALL_GATHER, n, err);
    if (st) return st;
    size_t b = n * rs_dtype_size(t);
    void *scratch = NULL;
    if ((st = unalias(RS_OP_ALL_GATHER, &send, b, recv, b * (size_t)g->world, &scratch, err))) return st;
    MPI_Request req;
    int rc = MPI_Iallgather(send, (int)n, mpi_type(t), recv, (int)n, mpi_type(t), impl(g)->comm, &req);
    return finish(g, RS_OP_ALL_GATHER, rc, &req, scratch, err);
}

static rs_status mpi_reduce_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_redop op,
                                    rs_err *err)
{
    rs_status st = usable(g, RS_OP_REDUCE_SCATTER, n, err);
    if (st) return st;
    size_t b = n * rs_dtype_size(t);
    void *scratch = NULL;
    if ((st = unalias(RS_OP_REDUCE_SCATTER, &send, b * (size_t)g->world, recv, b, &scratch, err))) return st;
    MPI_Request req;
    int rc = MPI_Ireduce_scatter_block(send, recv, (int)n, mpi_type(t), mpi_op(op), impl(g)->comm, &req);
    st = finish(g, RS_OP_REDUCE_SCATTER, rc, &req, scratch, err);
    if (!st && op == RS_AVG) rs_pg_scale_avg(recv, n, t, g->world);
    return st;
}

static rs_status mpi_all_to_all(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err)
{
    rs_status st = usable(g, RS_OP_ALL_TO_ALL, n, err);
    if (st) return st;
    size_t b = n * rs_dtype_size(t) * (size_t)g->world;
    void *scratch = NULL;
    if ((st = unalias(RS_OP_ALL_TO_ALL, &send, b, recv, b, &scratch, err))) return st;
    MPI_Request req;
    int rc = MPI_Ialltoall(send, (int)n, mpi_type(t), recv, (int)n, mpi_type(t), impl(g)->comm, &req);
    return finish(g, RS_OP_ALL_TO_ALL, rc, &req, scratch, err);
}

static rs_status mpi_barrier(rs_pg *g, rs_err *err)
{
    rs_status st = usable(g, RS_OP_BARRIER, 0, err);
    if (st) return st;
    MPI_Request req;
    int rc = MPI_Ibarrier(impl(g)->comm, &req);
    return finish(g, RS_OP_BARRIER, rc, &req, NULL, err);
}

/* ---------------------------------------------------------------- groups */

/* Freeing a communicator with a timed-out collective still on it is allowed: MPI releases it once
 * that completes (or at MPI_Finalize). The orphans stay allocated on purpose (see mpi_orphan). */
static void mpi_destroy(rs_pg *g)
{
    if (!g) return;
    mpi_impl *m = g->impl;
    if (m) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin && m->comm != MPI_COMM_NULL && m->comm != MPI_COMM_WORLD) MPI_Comm_free(&m->comm);
        free(m);
    }
    free(g);
}

/* Wraps comm (owned from here on, freed on failure) in a group. */
static rs_status wrap(MPI_Comm comm, rs_store *store, const char *name, double timeout_s, rs_pg **out, rs_err *err);

/* Only the members call this (pg.h); MPI_Comm_create_group is collective over exactly them, which is
 * why it is used rather than MPI_Comm_split (collective over the whole parent). It has no nonblocking
 * form, so a member that never calls it is not caught by the timeout here. The tag is the parent's
 * sub-group count, the same on every rank, so two creations from one parent cannot be confused. */
static rs_status mpi_new_group(rs_pg *g, const int *ranks, int n, const char *name, rs_pg **out, rs_err *err)
{
    rs_status st = usable(g, RS_OP_BARRIER, 0, err);
    if (st) return st;
    MPI_Group parent = MPI_GROUP_NULL, sub = MPI_GROUP_NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = MPI_Comm_group(impl(g)->comm, &parent);
    if (rc == MPI_SUCCESS) rc = MPI_Group_incl(parent, n, ranks, &sub);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(impl(g)->comm, sub, (int)(g->nsub % 32768u), &comm);
    if (sub != MPI_GROUP_NULL) MPI_Group_free(&sub);
    if (parent != MPI_GROUP_NULL) MPI_Group_free(&parent);
    if (rc != MPI_SUCCESS) return mpi_fail(g, err, rc, "new_group (MPI_Comm_create_group)");
    return wrap(comm, g->store, name, g->timeout_s, out, err);
}

const rs_pg_ops rs_pg_mpi_ops = {
    .name = "mpi",
    .send = mpi_send,
    .recv = mpi_recv,
    .broadcast = mpi_broadcast,
    .reduce = mpi_reduce,
    .all_reduce = mpi_all_reduce,
    .scatter = mpi_scatter,
    .gather = mpi_gather,
    .all_gather = mpi_all_gather,
    .reduce_scatter = mpi_reduce_scatter,
    .all_to_all = mpi_all_to_all,
    .barrier = mpi_barrier,
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .new_group = mpi_new_group,
    .destroy = mpi_destroy,
    .devices = RS_PG_DEV_CPU,
    .algos = "Open MPI's own (its collective components choose by size)",
    .transport = NULL,
};

static rs_status wrap(MPI_Comm comm, rs_store *store, const char *name, double timeout_s, rs_pg **out, rs_err *err)
{
    rs_pg *g = calloc(1, sizeof *g);
    mpi_impl *m = calloc(1, sizeof *m);
    if (!g || !m) {
        free(g);
        free(m);
        MPI_Comm_free(&comm);
        return rs_err_set(err, RS_ERR_NOMEM, "mpi: out of memory");
    }
    /* Errors come back as codes we turn into messages, instead of MPI's default of aborting the job. */
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank = 0, world = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    m->comm = comm;
    *g = (rs_pg){.ops = &rs_pg_mpi_ops, .rank = rank, .world = world, .timeout_s = timeout_s, .store = store,
                 .impl = m};
    snprintf(g->name, sizeof g->name, "%s", name);
    *out = g;
    return RS_OK;
}

/* ---------------------------------------------------------------- setup */

static void finalize_at_exit(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}

/* Initialises MPI once per process, unless the program already did (then it also finalises). */
static rs_status init_once(int world, rs_err *err)
{
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (fin) return rs_err_set(err, RS_ERR_ARG, "mpi: MPI was already finalised in this process; make groups before exit");
    if (inited) return RS_OK;
    /* Without mpirun, MPI_Init would quietly make a world of one (a "singleton"), and the other ranks
     * would each do the same and wait for each other forever. */
    if (world > 1 && !getenv("OMPI_COMM_WORLD_SIZE"))
        return rs_err_set(err, RS_ERR_ARG,
                          "backend=mpi needs ranks started by mpirun (ringside starts them that way with backend=mpi)");
    /* SERIALIZED: a worker may call from a thread other than main, never two at once. */
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return rs_err_set(err, RS_ERR_INTERNAL, "mpi: MPI_Init_thread failed (code %d)", rc);
    atexit(finalize_at_exit);
    return RS_OK;
}

rs_status rs_pg_mpi_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                        rs_err *err)
{
    *out = NULL;
    if (!name || !*name || strlen(name) >= sizeof(((rs_pg *)0)->name))
        return rs_err_set(err, RS_ERR_ARG, "mpi: need a group name of 1..63 characters");
    if (!(timeout_s > 0)) return rs_err_set(err, RS_ERR_ARG, "mpi: timeout must be positive, got %g", timeout_s);
    if (world < 1 || rank < 0 || rank >= world)
        return rs_err_set(err, RS_ERR_ARG, "mpi: rank %d of world %d is out of range", rank, world);
    rs_status st = init_once(world, err);
    if (st) return st;
    int mrank = 0, mworld = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &mrank);
    MPI_Comm_size(MPI_COMM_WORLD, &mworld);
    if (mrank != rank || mworld != world)
        return rs_err_set(err, RS_ERR_ARG,
                          "mpi: asked for rank %d of world %d but MPI_COMM_WORLD says rank %d of %d (started without "
                          "mpirun, or with a different -np?)",
                          rank, world, mrank, mworld);
    /* A private communicator: the user's own MPI traffic on MPI_COMM_WORLD cannot match ours. */
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (rc != MPI_SUCCESS) return rs_err_set(err, RS_ERR_INTERNAL, "mpi: MPI_Comm_dup failed (code %d)", rc);
    return wrap(comm, store, name, timeout_s, out, err);
}
