/* The nccl process-group backend: buffers are device pointers on this rank's GPU and every operation is
 * one NCCL call (or one NCCL group of sends and receives) on the group's own CUDA stream. NCCL picks its
 * algorithms itself, so this file only maps types, orders calls and turns "waiting forever" into the
 * group's timeout: communicators are non-blocking, and every wait polls the stream and NCCL's error. */
#include "dist/pg/pg.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Non-blocking communicators (2.14) are what let init, enqueue and finalize be bounded by a timeout;
 * ncclAvg (2.10) saves a host round trip for float averages. Older NCCLs still build, without them. */
#define NC_NONBLOCKING (NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0))
#define NC_HAVE_AVG (NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0))
#if !NC_NONBLOCKING
#define ncclInProgress ((ncclResult_t)7) /* never returned by a blocking communicator; keeps one code path */
#endif

typedef struct nc_work nc_work;

typedef struct nc_impl {
    ncclComm_t comm;
    cudaStream_t stream;
    int device;
    int *one;            /* (1) device int that barrier all-reduces */
    bool aborted;        /* the communicator was aborted after a timeout or error: every later call fails */
    nc_work *pending;    /* isend/irecv not yet handed to NCCL, oldest first (see nc_flush) */
} nc_impl;

/* An immediate send or receive. It is posted lazily, together with every other pending one and the next
 * blocking call, inside one ncclGroupStart/End: NCCL runs one communicator's calls in issue order, so two
 * ranks that both isend before they irecv would otherwise wait on each other forever. */
struct nc_work {
    rs_work base;        /* first: pg.c sees an rs_work */
    nc_impl *nc;         /* NULL once the group is destroyed */
    bool is_send, posted;
    void *buf;
    size_t n;
    rs_dtype t;
    int peer;
    cudaEvent_t ev;      /* recorded on the stream after the group that posted it */
    nc_work *next;
};

static nc_impl *impl(rs_pg *g) { return g->impl; }

static ncclDataType_t nc_type(rs_dtype t)
{
    switch (t) {
    case RS_F64: return ncclFloat64;
    case RS_I32: return ncclInt32;
    case RS_I64: return ncclInt64;
    default: return ncclFloat32;
    }
}

static bool is_int(rs_dtype t) { return t == RS_I32 || t == RS_I64; }

/* AVG goes to ncclAvg only for floats: NCCL's integer average divides unsigned sums, which is wrong for
 * negative values, so integers (and floats before 2.10) sum and are divided once on the host. */
static bool avg_on_host(rs_dtype t, rs_redop op)
{
    return op == RS_AVG && (is_int(t) || !NC_HAVE_AVG);
}

static ncclRedOp_t nc_op(rs_dtype t, rs_redop op)
{
    switch (op) {
    case RS_PRODUCT: return ncclProd;
    case RS_MIN: return ncclMin;
    case RS_MAX: return ncclMax;
    case RS_AVG:
#if NC_HAVE_AVG
        return avg_on_host(t, op) ? ncclSum : ncclAvg;
#else
        (void)t;
        return ncclSum;
#endif
    default: return ncclSum;
    }
}

/* ---------------------------------------------------------------- errors and waiting */

static const char *nc_detail(nc_impl *s, ncclResult_t r)
{
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
    const char *last = s && s->comm ? ncclGetLastError(s->comm) : NULL;
    if (last && *last) return last;
#else
    (void)s;
#endif
    return ncclGetErrorString(r);
}

/* After a timeout or an error the communicator is unusable; aborting it frees NCCL's kernels and proxy
 * threads so this rank can report and exit instead of hanging in the destructor. */
static void nc_abort(nc_impl *s)
{
    if (s->comm && !s->aborted) ncclCommAbort(s->comm);
    s->aborted = true;
}

static rs_status nc_fail(rs_pg *g, const char *what, ncclResult_t r, rs_err *err)
{
    nc_impl *s = impl(g);
    rs_status st = rs_err_set(err, RS_ERR_INTERNAL, "%s: rank %d: NCCL error %d: %s", what, g->rank, (int)r,
                              nc_detail(s, r));
    nc_abort(s);
    return st;
}

static rs_status nc_timeout(rs_pg *g, const char *what, rs_err *err)
{
    nc_abort(impl(g));
    return rs_err_set(err, RS_ERR_TIMEOUT,
                      "%s: rank %d timed out after %.1f s waiting for NCCL; another rank may have exited or be "
                      "stuck (NCCL cannot tell which)",
                      what, g->rank, g->timeout_s);
}

/* Spins briefly (a GPU operation of a few microseconds), then sleeps growing to 1 ms, so a rank waiting
 * for a slow peer costs no CPU. */
static void nc_backoff(unsigned *idle)
{
    if (++*idle < 64) return;
    long ns = *idle < 256 ? 20000 : *idle < 1024 ? 200000 : 1000000;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (*idle > (1u << 30)) *idle = 1024;
}

/* NCCL's own state: in progress while a non-blocking call is still being enqueued (or init/finalize
 * still runs), an error once a peer's connection broke. */
static ncclResult_t nc_async(nc_impl *s)
{
    ncclResult_t a = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(s->comm, &a);
    return r != ncclSuccess ? r : a;
}

/* Completes a call that returned r: a non-blocking communicator may answer ncclInProgress, and the next
 * NCCL call must wait until its state is ncclSuccess. */
static rs_status nc_settle(rs_pg *g, const char *what, ncclResult_t r, rs_err *err)
{
    nc_impl *s = impl(g);
    if (r != ncclSuccess && r != ncclInProgress) return nc_fail(g, what, r, err);
    double t0 = rs_pg_now();
    unsigned idle = 0;
    for (;;) {
        ncclResult_t a = nc_async(s);
        if (a == ncclSuccess) return RS_OK;
        if (a != ncclInProgress) return nc_fail(g, what, a, err);
        if (rs_pg_now() - t0 > g->timeout_s) return nc_timeout(g, what, err);
        nc_backoff(&idle);
    }
}

/* Waits for ev (or, when NULL, everything on the group's stream), checking NCCL's error between polls. */
static rs_status nc_wait(rs_pg *g, const char *what, cudaEvent_t ev, rs_err *err)
{
    nc_impl *s = impl(g);
    double t0 = rs_pg_now();
    unsigned idle = 0;
    for (;;) {
        cudaError_t q = ev ? cudaEventQuery(ev) : cudaStreamQuery(s->stream);
        if (q == cudaSuccess) return RS_OK;
        if (q != cudaErrorNotReady) {
            nc_abort(s);
            return rs_err_set(err, RS_ERR_INTERNAL, "%s: rank %d: CUDA error while waiting: %s", what, g->rank,
                              cudaGetErrorString(q));
        }
        ncclResult_t a = nc_async(s);
        if (a != ncclSuccess && a != ncclInProgress) return nc_fail(g, what, a, err);
        if (rs_pg_now() - t0 > g->timeout_s) return nc_timeout(g, what, err);
        nc_backoff(&idle);
    }
}

static rs_status nc_cuda(rs_pg *g, const char *what, cudaError_t e, rs_err *err)
{
    if (e == cudaSuccess) return RS_OK;
    return rs_err_set(err, RS_ERR_INTERNAL, "%s: rank %d (device %d): CUDA error: %s", what, g->rank,
                      impl(g)->device, cudaGetErrorString(e));
}

/* Every entry starts here: refuses an aborted communicator and selects this group's device (the caller
 * may have switched devices since). */
static rs_status nc_enter(rs_pg *g, const char *what, rs_err *err)
{
    nc_impl *s = impl(g);
    if (s->aborted)
        return rs_err_set(err, RS_ERR_INTERNAL,
                          "%s: this nccl group was aborted after an earlier error or timeout; make a new one", what);
    return nc_cuda(g, what, cudaSetDevice(s->device), err);
}

/* Inside a group, keeps the first failure of the calls; ncclGroupEnd is still called (it must pair with
 * ncclGroupStart) and its own result is used when every call went in. */
static void nc_keep(ncclResult_t *first, ncclResult_t r)
{
    if (*first == ncclSuccess && r != ncclSuccess && r != ncclInProgress) *first = r;
}

static ncclResult_t nc_group_end(ncclResult_t first)
{
    ncclResult_t r = ncclGroupEnd();
    return first != ncclSuccess ? first : r;
}

/* ---------------------------------------------------------------- immediate point to point */

static ncclResult_t nc_post_one(nc_impl *s, nc_work *w)
{
    if (w->is_send) return ncclSend(w->buf, w->n, nc_type(w->t), w->peer, s->comm, s->stream);
    return ncclRecv(w->buf, w->n, nc_type(w->t), w->peer, s->comm, s->stream);
}

/* Hands every pending isend/irecv to NCCL, together with the blocking send or receive `extra` when given,
 * in one group, so that NCCL runs them concurrently; then records each work's completion event. */
static rs_status nc_flush(rs_pg *g, const char *what, nc_work *extra, rs_err *err)
{
    nc_impl *s = impl(g);
    if (!s->pending && !extra) return RS_OK;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return nc_fail(g, what, r, err);
    ncclResult_t first = ncclSuccess;
    for (nc_work *w = s->pending; w; w = w->next) nc_keep(&first, nc_post_one(s, w));
    if (extra) nc_keep(&first, nc_post_one(s, extra));
    rs_status st = nc_settle(g, what, nc_group_end(first), err);
    for (nc_work *w = s->pending, *nx; w; w = nx) {
        nx = w->next;
        w->posted = true;
        w->next = NULL;
        if (!st) st = nc_cuda(g, what, cudaEventRecord(w->ev, s->stream), err);
    }
    s->pending = NULL;
    return st;
}

static rs_status work_poll(rs_work *base, bool block, bool *done, rs_err *err)
{
    nc_work *w = (nc_work *)base;
    const char *what = w->is_send ? "isend" : "irecv";
    if (!w->nc) return rs_err_set(err, RS_ERR_ARG, "%s: its nccl group was destroyed first", what);
    rs_pg *g = base->g;
    rs_status st = nc_enter(g, what, err);
    if (!st && !w->posted) st = nc_flush(g, what, NULL, err);
    if (st) return st;
    if (block) return nc_wait(g, what, w->ev, err);
    cudaError_t q = cudaEventQuery(w->ev);
    if (q == cudaSuccess) *done = true;
    else if (q != cudaErrorNotReady) return nc_cuda(g, what, q, err);
    ncclResult_t a = nc_async(w->nc);
    if (a != ncclSuccess && a != ncclInProgress) return nc_fail(g, what, a, err);
    return RS_OK;
}

static rs_status work_wait(rs_work *w, rs_err *err)
{
    bool done = false;
    return work_poll(w, true, &done, err);
}

static rs_status work_test(rs_work *w, bool *done, rs_err *err) { return work_poll(w, false, done, err); }

/* Freeing a work NCCL already has only drops the event (CUDA releases it once it has fired); an unposted
 * one leaves the queue, so its transfer never starts and its peer times out, as pg.h says. */
static void work_free(rs_work *base)
{
    nc_work *w = (nc_work *)base;
    if (w->nc && !w->posted) {
        nc_work **p = &w->nc->pending;
        while (*p && *p != w) p = &(*p)->next;
        if (*p) *p = w->next;
    }
    if (w->ev) cudaEventDestroy(w->ev);
    free(w);
}

static rs_status nc_ipost(rs_pg *g, bool is_send, const void *buf, size_t n, rs_dtype t, int peer, rs_work **out,
                          rs_err *err)
{
    const char *what = is_send ? "isend" : "irecv";
    rs_status st = nc_enter(g, what, err);
    if (st) return st;
    nc_work *w = calloc(1, sizeof *w);
    if (!w) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", what);
    st = nc_cuda(g, what, cudaEventCreateWithFlags(&w->ev, cudaEventDisableTiming), err);
    if (st) {
        free(w);
        return st;
    }
    w->base = (rs_work){.g = g, .op = is_send ? RS_OP_SEND : RS_OP_RECV, .bytes = n * rs_dtype_size(t),
                        .wait = work_wait, .test = work_test, .free = work_free};
    w->nc = impl(g);
    w->is_send = is_send;
    w->buf = (void *)buf; /* sends only read it; one field serves both directions */
    w->n = n;
    w->t = t;
    w->peer = peer;
    nc_work **p = &impl(g)->pending;
    while (*p) p = &(*p)->next;
    *p = w;
    *out = &w->base;
    return RS_OK;
}

static rs_status nccl_isend(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_work **out, rs_err *err)
{
    return nc_ipost(g, true, buf, n, t, dst, out, err);
}

static rs_status nccl_irecv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_work **out, rs_err *err)
{
    return nc_ipost(g, false, buf, n, t, src, out, err);
}

/* ---------------------------------------------------------------- blocking operations */

static rs_status nccl_send(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_err *err)
{
    rs_status st = nc_enter(g, "send", err);
    nc_work w = {.is_send = true, .buf = (void *)buf, .n = n, .t = t, .peer = dst};
    if (!st) st = nc_flush(g, "send", &w, err);
    return st ? st : nc_wait(g, "send", NULL, err);
}

static rs_status nccl_recv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_err *err)
{
    rs_status st = nc_enter(g, "recv", err);
    nc_work w = {.is_send = false, .buf = buf, .n = n, .t = t, .peer = src};
    if (!st) st = nc_flush(g, "recv", &w, err);
    return st ? st : nc_wait(g, "recv", NULL, err);
}

/* The start of every collective: earlier isends/irecvs go first, as they were issued first. */
static rs_status nc_begin(rs_pg *g, const char *what, rs_err *err)
{
    rs_status st = nc_enter(g, what, err);
    return st ? st : nc_flush(g, what, NULL, err);
}

/* Enqueued NCCL call r, then wait for the stream. */
static rs_status nc_finish(rs_pg *g, const char *what, ncclResult_t r, rs_err *err)
{
    rs_status st = nc_settle(g, what, r, err);
    return st ? st : nc_wait(g, what, NULL, err);
}

/* Integer (or pre-2.10) AVG: the sum NCCL left in buf is divided on the host, with C's truncation as
 * rs_pg_scale_avg does, so the result matches the serial reference bit for bit. */
static rs_status nc_scale_avg(rs_pg *g, const char *what, void *buf, size_t n, rs_dtype t, rs_err *err)
{
    size_t bytes = n * rs_dtype_size(t);
    if (!bytes) return RS_OK;
    void *h = malloc(bytes);
    if (!h) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory for %zu bytes", what, bytes);
    rs_status st = nc_cuda(g, what, cudaMemcpy(h, buf, bytes, cudaMemcpyDeviceToHost), err);
    if (!st) {
        rs_pg_scale_avg(h, n, t, g->world);
        st = nc_cuda(g, what, cudaMemcpy(buf, h, bytes, cudaMemcpyHostToDevice), err);
    }
    free(h);
    return st;
}

static rs_status nccl_broadcast(rs_pg *g, void *buf, size_t n, rs_dtype t, int root, rs_err *err)
{
    rs_status st = nc_begin(g, "broadcast", err);
    if (st) return st;
    nc_impl *s = impl(g);
    return nc_finish(g, "broadcast", ncclBroadcast(buf, buf, n, nc_type(t), root, s->comm, s->stream), err);
}

/* In place, as torch calls it: NCCL writes recvbuff only on the root, so non-root inputs stay as they
 * were (pg.h's contract). */
static rs_status nccl_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, int root, rs_err *err)
{
    rs_status st = nc_begin(g, "reduce", err);
    if (st) return st;
    nc_impl *s = impl(g);
    st = nc_finish(g, "reduce", ncclReduce(buf, buf, n, nc_type(t), nc_op(t, op), root, s->comm, s->stream), err);
    if (!st && g->rank == root && avg_on_host(t, op)) st = nc_scale_avg(g, "reduce", buf, n, t, err);
    return st;
}

static rs_status nccl_all_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err)
{
    rs_status st = nc_begin(g, "all_reduce", err);
    if (st) return st;
    nc_impl *s = impl(g);
    st = nc_finish(g, "all_reduce", ncclAllReduce(buf, buf, n, nc_type(t), nc_op(t, op), s->comm, s->stream), err);
    if (!st && avg_on_host(t, op)) st = nc_scale_avg(g, "all_reduce", buf, n, t, err);
    return st;
}

static rs_status nccl_all_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err)
{
    rs_status st = nc_begin(g, "all_gather", err);
    if (st) return st;
    nc_impl *s = impl(g);
    return nc_finish(g, "all_gather", ncclAllGather(send, recv, n, nc_type(t), s->comm, s->stream), err);
}

static rs_status nccl_reduce_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_redop op,
                                     rs_err *err)
{
    rs_status st = nc_begin(g, "reduce_scatter", err);
    if (st) return st;
    nc_impl *s = impl(g);
    st = nc_finish(g, "reduce_scatter",
                   ncclReduceScatter(send, recv, n, nc_type(t), nc_op(t, op), s->comm, s->stream), err);
    if (!st && avg_on_host(t, op)) st = nc_scale_avg(g, "reduce_scatter", recv, n, t, err);
    return st;
}

/* This rank's own block: a device copy on the stream (skipped when the caller made it in place). */
static rs_status nc_self_copy(rs_pg *g, const char *what, void *dst, const void *src, size_t bytes, rs_err *err)
{
    if (!bytes || dst == src) return RS_OK;
    return nc_cuda(g, what, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, impl(g)->stream), err);
}

/* scatter, gather and all_to_all are groups of sends and receives; NCCL has no collective for them. */
static rs_status nccl_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err)
{
    rs_status st = nc_begin(g, "scatter", err);
    if (st) return st;
    nc_impl *s = impl(g);
    size_t b = n * rs_dtype_size(t);
    ncclDataType_t dt = nc_type(t);
    if (g->rank == root) st = nc_self_copy(g, "scatter", recv, (const char *)send + (size_t)root * b, b, err);
    if (st) return st;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return nc_fail(g, "scatter", r, err);
    ncclResult_t first = ncclSuccess;
    if (g->rank == root) {
        for (int p = 0; p < g->world; p++)
            if (p != root) nc_keep(&first, ncclSend((const char *)send + (size_t)p * b, n, dt, p, s->comm, s->stream));
    } else {
        nc_keep(&first, ncclRecv(recv, n, dt, root, s->comm, s->stream));
    }
    return nc_finish(g, "scatter", nc_group_end(first), err);
}

static rs_status nccl_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err)
{
    rs_status st = nc_begin(g, "gather", err);
    if (st) return st;
    nc_impl *s = impl(g);
    size_t b = n * rs_dtype_size(t);
    ncclDataType_t dt = nc_type(t);
    if (g->rank == root) st = nc_self_copy(g, "gather", (char *)recv + (size_t)root * b, send, b, err);
    if (st) return st;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return nc_fail(g, "gather", r, err);
    ncclResult_t first = ncclSuccess;
    if (g->rank == root) {
        for (int p = 0; p < g->world; p++)
            if (p != root) nc_keep(&first, ncclRecv((char *)recv + (size_t)p * b, n, dt, p, s->comm, s->stream));
    } else {
        nc_keep(&first, ncclSend(send, n, dt, root, s->comm, s->stream));
    }
    return nc_finish(g, "gather", nc_group_end(first), err);
}

/* Block j of this rank's send goes to rank j; block i of recv comes from rank i. */
static rs_status nccl_all_to_all(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err)
{
    rs_status st = nc_begin(g, "all_to_all", err);
    if (st) return st;
    nc_impl *s = impl(g);
    size_t b = n * rs_dtype_size(t);
    ncclDataType_t dt = nc_type(t);
    int me = g->rank;
    st = nc_self_copy(g, "all_to_all", (char *)recv + (size_t)me * b, (const char *)send + (size_t)me * b, b, err);
    if (st) return st;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return nc_fail(g, "all_to_all", r, err);
    ncclResult_t first = ncclSuccess;
    for (int p = 0; p < g->world; p++) {
        if (p == me) continue;
        nc_keep(&first, ncclSend((const char *)send + (size_t)p * b, n, dt, p, s->comm, s->stream));
        nc_keep(&first, ncclRecv((char *)recv + (size_t)p * b, n, dt, p, s->comm, s->stream));
    }
    return nc_finish(g, "all_to_all", nc_group_end(first), err);
}

static rs_status nccl_barrier(rs_pg *g, rs_err *err)
{
    rs_status st = nc_begin(g, "barrier", err);
    if (st) return st;
    nc_impl *s = impl(g);
    return nc_finish(g, "barrier", ncclAllReduce(s->one, s->one, 1, ncclInt32, ncclMax, s->comm, s->stream), err);
}

/* ---------------------------------------------------------------- device memory */

static void *nccl_dev_alloc(rs_pg *g, size_t bytes)
{
    void *p = NULL;
    if (cudaSetDevice(impl(g)->device) != cudaSuccess) return NULL;
    /* Never NULL for a valid request: callers take NULL as "out of memory", even for 0 bytes. */
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
    return p;
}

static void nccl_dev_free(rs_pg *g, void *p)
{
    if (!p) return;
    cudaSetDevice(impl(g)->device);
    cudaFree(p);
}

static int nccl_gpu(const rs_pg *g) { return ((const nc_impl *)g->impl)->device; }

static rs_status nccl_dev_copy(rs_pg *g, void *dst, const void *src, size_t bytes, int to_device, rs_err *err)
{
    if (!bytes) return RS_OK;
    rs_status st = nc_cuda(g, "dev_copy", cudaSetDevice(impl(g)->device), err);
    if (st) return st;
    return nc_cuda(g, to_device ? "copy to device" : "copy from device",
                   cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost), err);
}

/* ---------------------------------------------------------------- setup */

static void nccl_destroy(rs_pg *g)
{
    if (!g) return;
    nc_impl *s = g->impl;
    if (s) {
        cudaSetDevice(s->device);
        for (nc_work *w = s->pending; w; w = w->next) w->nc = NULL;
        if (s->comm && !s->aborted) {
#if NC_NONBLOCKING
            /* Finalize flushes what is still in flight; bounded by the timeout, then abort. */
            rs_err e = {0};
            if (nc_settle(g, "destroy", ncclCommFinalize(s->comm), &e) == RS_OK) ncclCommDestroy(s->comm);
#else
            if (s->stream) cudaStreamSynchronize(s->stream);
            ncclCommDestroy(s->comm);
#endif
        }
        if (s->one) cudaFree(s->one);
        if (s->stream) cudaStreamDestroy(s->stream);
        free(s);
    }
    free(g);
}

static rs_status nccl_new_group(rs_pg *g, const int *ranks, int n, const char *name, rs_pg **out, rs_err *err);

const rs_pg_ops rs_pg_nccl_ops = {
    .name = "nccl",
    .send = nccl_send,
    .recv = nccl_recv,
    .broadcast = nccl_broadcast,
    .reduce = nccl_reduce,
    .all_reduce = nccl_all_reduce,
    .scatter = nccl_scatter,
    .gather = nccl_gather,
    .all_gather = nccl_all_gather,
    .reduce_scatter = nccl_reduce_scatter,
    .all_to_all = nccl_all_to_all,
    .barrier = nccl_barrier,
    .isend = nccl_isend,
    .irecv = nccl_irecv,
    .new_group = nccl_new_group,
    .destroy = nccl_destroy,
    .devices = RS_PG_DEV_GPU,
    .dev_alloc = nccl_dev_alloc,
    .dev_free = nccl_dev_free,
    .dev_copy = nccl_dev_copy,
    .gpu = nccl_gpu,
    .algos = "NCCL's own (ring/tree, chosen by NCCL)",
    .transport = NULL,
};

/* Builds the group around an already chosen device: rank 0 of the group makes the unique id and
 * publishes it under "nccl/<name>/id"; the others read it (waiting up to the timeout). */
static rs_status nc_create(rs_store *store, const char *name, int rank, int world, double timeout_s, int device,
                           rs_pg **out, rs_err *err)
{
    rs_pg *g = calloc(1, sizeof *g);
    nc_impl *s = calloc(1, sizeof *s);
    if (!g || !s) {
        free(g);
        free(s);
        return rs_err_set(err, RS_ERR_NOMEM, "nccl: out of memory");
    }
    *g = (rs_pg){.ops = &rs_pg_nccl_ops, .rank = rank, .world = world, .timeout_s = timeout_s, .store = store,
                 .impl = s};
    snprintf(g->name, sizeof g->name, "%s", name);
    s->device = device;

    rs_status st = nc_cuda(g, "nccl", cudaSetDevice(device), err);
    if (!st) st = nc_cuda(g, "nccl: stream", cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), err);
    if (!st) st = nc_cuda(g, "nccl: barrier buffer", cudaMalloc((void **)&s->one, sizeof *s->one), err);
    if (!st) st = nc_cuda(g, "nccl: barrier buffer", cudaMemset(s->one, 0, sizeof *s->one), err);

    ncclUniqueId id;
    char key[128];
    snprintf(key, sizeof key, "nccl/%s/id", name);
    if (!st && rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) st = rs_err_set(err, RS_ERR_INTERNAL, "nccl: ncclGetUniqueId: %s", ncclGetErrorString(r));
        else st = rs_store_set(store, key, &id, sizeof id, err);
    } else if (!st) {
        void *val = NULL;
        size_t vn = 0;
        st = rs_store_get(store, key, &val, &vn, timeout_s, err);
        if (!st && vn != sizeof id)
            st = rs_err_set(err, RS_ERR_FORMAT, "nccl: store key %s holds %zu bytes, not a %zu-byte unique id", key,
                            vn, sizeof id);
        if (!st) memcpy(&id, val, sizeof id);
        free(val);
    }
    if (!st) {
#if NC_NONBLOCKING
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclResult_t r = ncclCommInitRankConfig(&s->comm, world, id, rank, &cfg);
        if (r != ncclSuccess && r != ncclInProgress) {
            st = rs_err_set(err, RS_ERR_INTERNAL, "nccl: ncclCommInitRankConfig: %s", ncclGetErrorString(r));
            nc_abort(s); /* a half-made communicator is released by abort, never by finalize */
        } else if (!s->comm)
            st = rs_err_set(err, RS_ERR_INTERNAL, "nccl: ncclCommInitRankConfig returned no communicator");
        else st = nc_settle(g, "nccl init", r, err);
#else
        ncclResult_t r = ncclCommInitRank(&s->comm, world, id, rank);
        if (r != ncclSuccess) {
            st = rs_err_set(err, RS_ERR_INTERNAL, "nccl: ncclCommInitRank: %s", ncclGetErrorString(r));
            nc_abort(s);
        }
#endif
    }
    if (st) {
        rs_err_prefix(err, "nccl group '%s' rank %d of %d (device %d)", name, rank, world, device);
        nccl_destroy(g);
        return st;
    }
    *out = g;
    return RS_OK;
}

/* Only the members call this (pg.h), so ncclCommSplit — collective over every rank of the parent — cannot
 * be used; the sub-group gets its own unique id through the store under its own name instead. */
static rs_status nccl_new_group(rs_pg *g, const int *ranks, int n, const char *name, rs_pg **out, rs_err *err)
{
    int me = -1;
    for (int i = 0; i < n; i++)
        if (ranks[i] == g->rank) me = i;
    if (me < 0) return rs_err_set(err, RS_ERR_ARG, "nccl new_group: rank %d is not a member", g->rank);
    rs_status st = nc_enter(g, "new_group", err);
    if (st) return st;
    return nc_create(g->store, name, me, n, g->timeout_s, impl(g)->device, out, err);
}

rs_status rs_pg_nccl_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                         rs_err *err)
{
    *out = NULL;
    if (!store || !name || !*name || strlen(name) >= sizeof(((rs_pg *)0)->name))
        return rs_err_set(err, RS_ERR_ARG, "nccl: need a store and a group name of 1..63 characters");
    if (world < 1 || rank < 0 || rank >= world)
        return rs_err_set(err, RS_ERR_ARG, "nccl: rank %d of world %d is out of range", rank, world);
    if (!(timeout_s > 0)) return rs_err_set(err, RS_ERR_ARG, "nccl: timeout must be positive, got %g", timeout_s);
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count < 1)
        return rs_err_set(err, RS_ERR_UNSUPPORTED,
                          "nccl: rank %d has no CUDA device (cudaGetDeviceCount: %s); use the shm or tcp backend", rank,
                          ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
    /* Ranks on one host share its GPUs: the launcher's LOCAL_RANK picks one, as torchrun's does. */
    int local = rank;
    const char *lr = getenv("LOCAL_RANK");
    if (lr && *lr) {
        char *end = NULL;
        long v = strtol(lr, &end, 10);
        if (*end || v < 0 || v > 1 << 20)
            return rs_err_set(err, RS_ERR_ARG, "nccl: LOCAL_RANK='%s' is not a non-negative integer", lr);
        local = (int)v;
    }
    return nc_create(store, name, rank, world, timeout_s, local % count, out, err);
}
