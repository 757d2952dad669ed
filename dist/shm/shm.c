/* The shm process-group backend: ranks on one host move bytes through one POSIX shared-memory segment.
 * Every collective is a sequence of steps over one primitive, xfer (send a range to one peer while
 * receiving a range from another, copying or reducing as it lands), so each step can be traced. */
#define _GNU_SOURCE
#include "dist/pg/pg.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Layout of the segment, all offsets fixed by (world):
 *   header (one cache line): magic, world, chunk size, slots per mailbox
 *   world*world mailbox heads, box(src,dst) = heads[src*world+dst]: `posted` (written only by src) and
 *     `consumed` (written only by dst), each on its own cache line so the two sides never share one
 *   world*world data areas of SHM_SLOTS slots of SHM_CHUNK bytes each.
 * A message of B bytes moves as ceil(B/SHM_CHUNK) chunks; chunk k of a pair's stream goes to slot
 * k % SHM_SLOTS. Two slots let the sender fill one while the receiver drains the other (pipelining);
 * 64 KiB chunks keep a world of 8 at 8 MiB of segment while staying large enough for memcpy speed. */
#define SHM_MAGIC 0x72736d68u /* "rshm" */
#define SHM_CHUNK (64u << 10)
#define SHM_SLOTS 2u
#define SHM_MAX_WORLD 64 /* 4096 mailboxes, 512 MiB of (sparse) segment */
#define SHM_LINE 64

typedef struct shm_head {
    uint32_t magic, world, chunk, slots;
    char pad[SHM_LINE - 16];
} shm_head;

typedef struct shm_box {
    _Alignas(SHM_LINE) _Atomic uint64_t posted; /* chunks the sender has published */
    _Alignas(SHM_LINE) _Atomic uint64_t consumed; /* chunks the receiver has finished with */
} shm_box;

typedef struct shm_impl {
    char *base;
    size_t size;
    shm_box *boxes;        /* (world*world) */
    char *data;            /* (world*world, SHM_SLOTS, SHM_CHUNK) */
    char *tmp;             /* (SHM_CHUNK) scratch for "peer's data first" reductions */
    rs_pg_opkind op;       /* what the current operation reports in errors and trace */
    rs_pg_algo algo;
} shm_impl;

static shm_impl *impl(rs_pg *g) { return g->impl; }
static shm_box *box(rs_pg *g, int src, int dst) { return &impl(g)->boxes[(size_t)src * (size_t)g->world + (size_t)dst]; }
static char *slot(rs_pg *g, int src, int dst, uint64_t k)
{
    size_t pair = (size_t)src * (size_t)g->world + (size_t)dst;
    return impl(g)->data + (pair * SHM_SLOTS + (size_t)(k % SHM_SLOTS)) * SHM_CHUNK;
}

/* ---------------------------------------------------------------- transport */

typedef enum xf_mode { XF_COPY, XF_REDUCE } xf_mode;

/* One step: send sbytes from sp to `to` and receive rbytes from `from` into rp, both optional (peer < 0).
 * REDUCE combines rp = rp op incoming, or incoming op rp when peer_first (a canonical order that lets
 * two partners compute the same bits). after_send: rp aliases sp, so chunk k may only land once our own
 * chunk k has been published. */
typedef struct xfer {
    int to, from;
    const char *sp;
    char *rp;
    size_t sbytes, rbytes, soff, roff;
    xf_mode mode;
    rs_dtype t;
    rs_redop op;
    bool peer_first, after_send;
    int step, steps;
} xfer;

static bool send_some(rs_pg *g, xfer *x)
{
    if (x->to < 0 || x->soff >= x->sbytes) return false;
    shm_box *b = box(g, g->rank, x->to);
    uint64_t posted = atomic_load_explicit(&b->posted, memory_order_relaxed);
    uint64_t consumed = atomic_load_explicit(&b->consumed, memory_order_acquire);
    if (posted - consumed >= SHM_SLOTS) return false;
    size_t len = x->sbytes - x->soff < SHM_CHUNK ? x->sbytes - x->soff : SHM_CHUNK;
    memcpy(slot(g, g->rank, x->to, posted), x->sp + x->soff, len);
    atomic_store_explicit(&b->posted, posted + 1, memory_order_release);
    x->soff += len;
    return true;
}

static bool recv_some(rs_pg *g, xfer *x)
{
    if (x->from < 0 || x->roff >= x->rbytes) return false;
    size_t len = x->rbytes - x->roff < SHM_CHUNK ? x->rbytes - x->roff : SHM_CHUNK;
    if (x->after_send && x->soff < x->sbytes && x->roff + len > x->soff) return false;
    shm_box *b = box(g, x->from, g->rank);
    uint64_t consumed = atomic_load_explicit(&b->consumed, memory_order_relaxed);
    uint64_t posted = atomic_load_explicit(&b->posted, memory_order_acquire);
    if (posted == consumed) return false;
    const char *src = slot(g, x->from, g->rank, consumed);
    char *dst = x->rp + x->roff;
    size_t n = len / rs_dtype_size(x->t);
    if (x->mode == XF_COPY) {
        memcpy(dst, src, len);
    } else if (x->peer_first) {
        memcpy(impl(g)->tmp, src, len);
        rs_pg_reduce_into(impl(g)->tmp, dst, n, x->t, x->op);
        memcpy(dst, impl(g)->tmp, len);
    } else {
        rs_pg_reduce_into(dst, src, n, x->t, x->op);
    }
    atomic_store_explicit(&b->consumed, consumed + 1, memory_order_release);
    x->roff += len;
    return true;
}

/* Waiting: a few spins (a peer on another core answers within ~100 ns), then sched_yield (so an
 * oversubscribed host — 8 ranks on 2 cores — runs the peer we wait for), then short sleeps. The
 * timeout counts from the last progress, so a long but moving transfer never times out. */
static rs_status run_xfer(rs_pg *g, xfer *x, rs_err *err)
{
    double last = rs_pg_now();
    unsigned idle = 0;
    for (;;) {
        bool moved = false;
        while (send_some(g, x)) moved = true;
        while (recv_some(g, x)) moved = true;
        bool sdone = x->to < 0 || x->soff >= x->sbytes, rdone = x->from < 0 || x->roff >= x->rbytes;
        if (sdone && rdone) return RS_OK;
        if (moved) {
            idle = 0;
            last = rs_pg_now();
            continue;
        }
        idle++;
        if (idle < 64) continue;
        if (idle < 256) {
            sched_yield();
        } else {
            struct timespec ts = {0, idle < 1024 ? 20000 : 200000};
            nanosleep(&ts, NULL);
        }
        if ((idle & 15) == 0) {
            double now = rs_pg_now();
            if (now - last > g->timeout_s) {
                char who[96] = "";
                if (!rdone) snprintf(who, sizeof who, "rank %d (its data never came)", x->from);
                if (!sdone)
                    snprintf(who + strlen(who), sizeof who - strlen(who), "%srank %d (it never took ours)",
                             rdone ? "" : " and ", x->to);
                return rs_err_set(err, RS_ERR_TIMEOUT,
                                  "%s (%s, step %d of %d): rank %d timed out after %.1f s waiting for %s; "
                                  "it may have exited or be stuck",
                                  rs_pg_op_name(impl(g)->op), rs_pg_algo_name(impl(g)->algo), x->step + 1,
                                  x->steps, g->rank, g->timeout_s, who);
            }
        }
        if (idle > (1u << 30)) idle = 1024;
    }
}

static void trace_step(rs_pg *g, int step, int steps, int peer, int chunk, size_t bytes)
{
    if (!g->trace) return;
    rs_pg_event ev = {.kind = RS_PG_EV_STEP, .op = impl(g)->op, .algo = impl(g)->algo, .coll = g->coll,
                      .step = step, .steps = steps, .rank = g->rank, .peer = peer, .chunk = chunk,
                      .bytes = bytes, .t = rs_pg_now()};
    rs_pg_emit(g, &ev);
}

/* One traced step; `chunk` is the block index the step moves (for the dashboard). Only the in-place
 * exchange of recursive doubling needs the canonical order: there both partners compute the result. */
static rs_status step(rs_pg *g, int k, int K, int chunk, int to, const void *sp, size_t sbytes, int from, void *rp,
                      size_t rbytes, xf_mode mode, rs_dtype t, rs_redop op, bool after_send, rs_err *err)
{
    trace_step(g, k, K, to, chunk, to >= 0 ? sbytes : rbytes);
    xfer x = {.to = to, .from = from, .sp = sp, .rp = rp, .sbytes = to >= 0 ? sbytes : 0,
              .rbytes = from >= 0 ? rbytes : 0, .mode = mode, .t = t, .op = op,
              .peer_first = after_send && from >= 0 && from < g->rank, .after_send = after_send, .step = k, .steps = K};
    return run_xfer(g, &x, err);
}

static void begin_op(rs_pg *g, rs_pg_opkind op, rs_pg_algo algo)
{
    impl(g)->op = op;
    impl(g)->algo = algo;
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

static rs_status shm_send(rs_pg *g, const void *buf, size_t n, rs_dtype t, int dst, rs_err *err)
{
    begin_op(g, RS_OP_SEND, RS_ALGO_AUTO);
    return step(g, 0, 1, 0, dst, buf, n * rs_dtype_size(t), -1, NULL, 0, XF_COPY, t, RS_SUM, false, err);
}

static rs_status shm_recv(rs_pg *g, void *buf, size_t n, rs_dtype t, int src, rs_err *err)
{
    begin_op(g, RS_OP_RECV, RS_ALGO_AUTO);
    return step(g, 0, 1, 0, -1, NULL, 0, src, buf, n * rs_dtype_size(t), XF_COPY, t, RS_SUM, false, err);
}

/* Dissemination barrier: in step k each rank signals rank+2^k and hears from rank-2^k; after
 * ceil(log2 n) steps every rank has (transitively) heard from all. */
static rs_status shm_barrier(rs_pg *g, rs_err *err)
{
    begin_op(g, RS_OP_BARRIER, RS_ALGO_AUTO);
    int w = g->world, r = g->rank, K = ceil_log2(w);
    char token = 1, got = 0;
    for (int k = 0; k < K; k++) {
        int d = 1 << k;
        rs_status st = step(g, k, K, 0, (r + d) % w, &token, 1, (r - d + w) % w, &got, 1, XF_COPY, RS_I32,
                            RS_SUM, false, err);
        if (st) return st;
    }
    return RS_OK;
}

/* ---------------------------------------------------------------- trees */

/* Binomial tree from root: rank vr (relative to root) receives from vr minus its lowest set bit, then
 * sends to vr + 2^j for the bits below it. ceil(log2 n) levels. */
static rs_status bcast_tree(rs_pg *g, void *buf, size_t n, rs_dtype t, int root, rs_err *err)
{
    int w = g->world, vr = (g->rank - root + w) % w, K = ceil_log2(w);
    size_t bytes = n * rs_dtype_size(t);
    int mask = 1, lvl = 0;
    while (mask < w) {
        if (vr & mask) {
            rs_status st = step(g, lvl, K, 0, -1, NULL, 0, (vr - mask + root) % w, buf, bytes, XF_COPY, t, RS_SUM,
                                false, err);
            if (st) return st;
            break;
        }
        mask <<= 1;
        lvl++;
    }
    for (mask >>= 1, lvl--; mask > 0; mask >>= 1, lvl--) {
        if (vr + mask < w) {
            rs_status st = step(g, lvl, K, 0, (vr + mask + root) % w, buf, bytes, -1, NULL, 0, XF_COPY, t, RS_SUM,
                                false, err);
            if (st) return st;
        }
    }
    return RS_OK;
}

/* Binomial reduction to root: at level j, ranks with bit j set send their partial result down and
 * stop; the others fold in vr + 2^j's. buf is the accumulator (the caller keeps the input safe). */
static rs_status reduce_tree(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, int root, rs_err *err)
{
    int w = g->world, vr = (g->rank - root + w) % w, K = ceil_log2(w);
    size_t bytes = n * rs_dtype_size(t);
    for (int mask = 1, lvl = 0; mask < w; mask <<= 1, lvl++) {
        rs_status st = RS_OK;
        if (vr & mask) {
            st = step(g, lvl, K, 0, (vr - mask + root) % w, buf, bytes, -1, NULL, 0, XF_COPY, t, op, false, err);
            return st;
        }
        if (vr + mask < w) {
            xfer x = {.to = -1, .from = (vr + mask + root) % w, .rp = buf, .rbytes = bytes, .mode = XF_REDUCE,
                      .t = t, .op = op, .peer_first = false, .step = lvl, .steps = K};
            trace_step(g, lvl, K, -1, 0, bytes);
            st = run_xfer(g, &x, err);
        }
        if (st) return st;
    }
    return RS_OK;
}

static rs_status shm_broadcast(rs_pg *g, void *buf, size_t n, rs_dtype t, int root, rs_err *err)
{
    begin_op(g, RS_OP_BROADCAST, RS_ALGO_TREE);
    return bcast_tree(g, buf, n, t, root, err);
}

/* Non-root inputs stay as they were (torch leaves them alone): a rank with children accumulates in a
 * copy. The root divides once for AVG. */
static rs_status shm_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, int root, rs_err *err)
{
    begin_op(g, RS_OP_REDUCE, RS_ALGO_TREE);
    size_t bytes = n * rs_dtype_size(t);
    void *acc = buf;
    if (g->rank != root && bytes) {
        acc = malloc(bytes);
        if (!acc) return rs_err_set(err, RS_ERR_NOMEM, "reduce: out of memory for %zu bytes", bytes);
        memcpy(acc, buf, bytes);
    }
    rs_status st = reduce_tree(g, acc, n, t, op, root, err);
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
                            buf + blk_off(n, w, rb) * es, blk_len(n, w, rb) * es, XF_REDUCE, t, op, false, err);
        if (st) return st;
    }
    for (int s = 0; s < w - 1; s++) {
        int sb = ((r + 1 - s) % w + w) % w, rb = ((r - s) % w + w) % w;
        rs_status st = step(g, w - 1 + s, K, sb, nxt, buf + blk_off(n, w, sb) * es, blk_len(n, w, sb) * es, prv,
                            buf + blk_off(n, w, rb) * es, blk_len(n, w, rb) * es, XF_COPY, t, op, false, err);
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
            st = step(g, 0, K, 0, r + 1, buf, bytes, -1, NULL, 0, XF_COPY, t, op, false, err);
            if (st) return st;
            return step(g, K - 1, K, 0, -1, NULL, 0, r + 1, buf, bytes, XF_COPY, t, op, false, err);
        }
        st = step(g, 0, K, 0, -1, NULL, 0, r - 1, buf, bytes, XF_REDUCE, t, op, false, err);
        if (st) return st;
        vr = r / 2;
    } else {
        vr = r - rem;
    }
    if (rem) k = 1;
    for (int mask = 1; mask < p; mask <<= 1, k++) {
        int vp = vr ^ mask, peer = vp < rem ? vp * 2 + 1 : vp + rem;
        st = step(g, k, K, 0, peer, buf, bytes, peer, buf, bytes, XF_REDUCE, t, op, true, err);
        if (st) return st;
    }
    if (r < 2 * rem) st = step(g, K - 1, K, 0, r - 1, buf, bytes, -1, NULL, 0, XF_COPY, t, op, false, err);
    return st;
}

/* AUTO: recursive doubling below 64 KiB (log2 n latency-bound steps), ring from there (bandwidth). */
#define SHM_AUTO_RING_BYTES (64u << 10)

static rs_status shm_all_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err)
{
    rs_pg_algo a = g->algo;
    if (a == RS_ALGO_AUTO || a >= RS_ALGO_COUNT)
        a = n * rs_dtype_size(t) < SHM_AUTO_RING_BYTES ? RS_ALGO_RECDOUBLING : RS_ALGO_RING;
    begin_op(g, RS_OP_ALL_REDUCE, a);
    rs_status st = RS_OK;
    if (g->world > 1) {
        if (a == RS_ALGO_RING) st = allreduce_ring(g, buf, n, t, op, err);
        else if (a == RS_ALGO_TREE) {
            st = reduce_tree(g, buf, n, t, op, 0, err);
            if (!st) st = bcast_tree(g, buf, n, t, 0, err);
        } else st = allreduce_recdbl(g, buf, n, t, op, err);
    }
    if (!st && op == RS_AVG) rs_pg_scale_avg(buf, n, t, g->world);
    return st;
}

/* ---------------------------------------------------------------- rings and pairs */

static rs_status shm_all_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err)
{
    begin_op(g, RS_OP_ALL_GATHER, RS_ALGO_RING);
    int w = g->world, r = g->rank, K = w - 1;
    size_t b = n * rs_dtype_size(t);
    char *out = recv;
    if (out + (size_t)r * b != (const char *)send) memmove(out + (size_t)r * b, send, b);
    for (int s = 0; s < w - 1; s++) {
        int sb = (r - s + w) % w, rb = (r - s - 1 + w) % w;
        rs_status st = step(g, s, K, sb, (r + 1) % w, out + (size_t)sb * b, b, (r - 1 + w) % w, out + (size_t)rb * b,
                            b, XF_COPY, t, RS_SUM, false, err);
        if (st) return st;
    }
    return RS_OK;
}

/* Ring reduce-scatter shifted by one so rank r ends owning block r; works on a copy of send. */
static rs_status shm_reduce_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_redop op,
                                    rs_err *err)
{
    begin_op(g, RS_OP_REDUCE_SCATTER, RS_ALGO_RING);
    int w = g->world, r = g->rank, K = w - 1;
    size_t b = n * rs_dtype_size(t);
    char *acc = malloc(b * (size_t)w + 1);
    if (!acc) return rs_err_set(err, RS_ERR_NOMEM, "reduce_scatter: out of memory for %zu bytes", b * (size_t)w);
    if (b) memcpy(acc, send, b * (size_t)w);
    rs_status st = RS_OK;
    for (int s = 0; s < w - 1 && !st; s++) {
        int sb = ((r - s - 1) % w + w) % w, rb = ((r - s - 2) % w + w) % w;
        st = step(g, s, K, sb, (r + 1) % w, acc + (size_t)sb * b, b, (r - 1 + w) % w, acc + (size_t)rb * b, b,
                  XF_REDUCE, t, op, false, err);
    }
    if (!st) {
        memmove(recv, acc + (size_t)r * b, b);
        if (op == RS_AVG) rs_pg_scale_avg(recv, n, t, w);
    }
    free(acc);
    return st;
}

static rs_status shm_scatter(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err)
{
    begin_op(g, RS_OP_SCATTER, RS_ALGO_AUTO);
    int w = g->world, K = w - 1;
    size_t b = n * rs_dtype_size(t);
    if (g->rank != root) return step(g, 0, 1, g->rank, -1, NULL, 0, root, recv, b, XF_COPY, t, RS_SUM, false, err);
    for (int s = 1; s < w; s++) {
        int dst = (root + s) % w;
        rs_status st = step(g, s - 1, K, dst, dst, (const char *)send + (size_t)dst * b, b, -1, NULL, 0, XF_COPY, t,
                            RS_SUM, false, err);
        if (st) return st;
    }
    memmove(recv, (const char *)send + (size_t)root * b, b);
    return RS_OK;
}

static rs_status shm_gather(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, int root, rs_err *err)
{
    begin_op(g, RS_OP_GATHER, RS_ALGO_AUTO);
    int w = g->world, K = w - 1;
    size_t b = n * rs_dtype_size(t);
    if (g->rank != root) return step(g, 0, 1, g->rank, root, send, b, -1, NULL, 0, XF_COPY, t, RS_SUM, false, err);
    memmove((char *)recv + (size_t)root * b, send, b);
    for (int s = 1; s < w; s++) {
        int src = (root + s) % w;
        rs_status st = step(g, s - 1, K, src, -1, NULL, 0, src, (char *)recv + (size_t)src * b, b, XF_COPY, t,
                            RS_SUM, false, err);
        if (st) return st;
    }
    return RS_OK;
}

/* Pairwise exchange: in step s rank r sends its block for r+s and receives r-s's block for it. */
static rs_status shm_all_to_all(rs_pg *g, const void *send, void *recv, size_t n, rs_dtype t, rs_err *err)
{
    begin_op(g, RS_OP_ALL_TO_ALL, RS_ALGO_AUTO);
    int w = g->world, r = g->rank, K = w - 1;
    size_t b = n * rs_dtype_size(t);
    memmove((char *)recv + (size_t)r * b, (const char *)send + (size_t)r * b, b);
    for (int s = 1; s < w; s++) {
        int to = (r + s) % w, from = (r - s + w) % w;
        rs_status st = step(g, s - 1, K, to, to, (const char *)send + (size_t)to * b, b, from,
                            (char *)recv + (size_t)from * b, b, XF_COPY, t, RS_SUM, false, err);
        if (st) return st;
    }
    return RS_OK;
}

/* ---------------------------------------------------------------- setup */

static void shm_destroy(rs_pg *g)
{
    if (!g) return;
    shm_impl *s = g->impl;
    if (s) {
        if (s->base) munmap(s->base, s->size);
        free(s->tmp);
        free(s);
    }
    free(g);
}

static const rs_pg_ops shm_ops = {
    .name = "shm",
    .send = shm_send,
    .recv = shm_recv,
    .broadcast = shm_broadcast,
    .reduce = shm_reduce,
    .all_reduce = shm_all_reduce,
    .scatter = shm_scatter,
    .gather = shm_gather,
    .all_gather = shm_all_gather,
    .reduce_scatter = shm_reduce_scatter,
    .all_to_all = shm_all_to_all,
    .barrier = shm_barrier,
    .destroy = shm_destroy,
};

static size_t seg_size(int world)
{
    size_t pairs = (size_t)world * (size_t)world;
    return sizeof(shm_head) + pairs * sizeof(shm_box) + pairs * SHM_SLOTS * SHM_CHUNK;
}

/* "/rs-<name with odd characters as '_'>-<pid><nanoseconds>": unique per run even when a crashed run
 * with the same group name left nothing behind or the same name is reused. */
static void seg_name(char *out, size_t cap, const char *name)
{
    char clean[40];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof clean; i++) {
        char c = name[i];
        clean[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ? c : '_';
    }
    clean[i] = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, cap, "/rs-%s-%ld-%lx", clean, (long)getpid(), (unsigned long)(ts.tv_nsec ^ (ts.tv_sec << 20)));
}

static rs_status map_segment(rs_pg *g, const char *seg, bool create, rs_err *err)
{
    shm_impl *s = impl(g);
    size_t size = seg_size(g->world);
    int fd = shm_open(seg, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
    if (fd < 0) return rs_err_set(err, RS_ERR_IO, "shm: shm_open %s: %s", seg, strerror(errno));
    if (create && ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(seg);
        return rs_err_set(err, RS_ERR_IO, "shm: ftruncate %s to %zu bytes: %s", seg, size, strerror(e));
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        if (create) shm_unlink(seg);
        return rs_err_set(err, RS_ERR_IO, "shm: mmap %s (%zu bytes): %s", seg, size, strerror(e));
    }
    s->base = p;
    s->size = size;
    s->boxes = (shm_box *)(s->base + sizeof(shm_head));
    s->data = s->base + sizeof(shm_head) + (size_t)g->world * (size_t)g->world * sizeof(shm_box);
    shm_head *h = (shm_head *)s->base;
    if (create) {
        *h = (shm_head){.magic = SHM_MAGIC, .world = (uint32_t)g->world, .chunk = SHM_CHUNK, .slots = SHM_SLOTS};
    } else if (h->magic != SHM_MAGIC || h->world != (uint32_t)g->world || h->chunk != SHM_CHUNK ||
               h->slots != SHM_SLOTS) {
        return rs_err_set(err, RS_ERR_ARG,
                          "shm: segment %s was made for world %u (chunk %u), this rank was started with world %d; "
                          "start every rank with the same world size and build",
                          seg, h->world, h->chunk, g->world);
    }
    return RS_OK;
}

rs_status rs_pg_shm_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                        rs_err *err)
{
    *out = NULL;
    if (!store || !name || !*name || strlen(name) >= sizeof(((rs_pg *)0)->name))
        return rs_err_set(err, RS_ERR_ARG, "shm: need a store and a group name of 1..63 characters");
    if (world < 1 || world > SHM_MAX_WORLD || rank < 0 || rank >= world)
        return rs_err_set(err, RS_ERR_ARG, "shm: rank %d of world %d is out of range (world 1..%d, rank 0..world-1)",
                          rank, world, SHM_MAX_WORLD);
    if (!(timeout_s > 0)) return rs_err_set(err, RS_ERR_ARG, "shm: timeout must be positive, got %g", timeout_s);
    rs_pg *g = calloc(1, sizeof *g);
    shm_impl *s = calloc(1, sizeof *s);
    char *tmp = malloc(SHM_CHUNK);
    if (!g || !s || !tmp) {
        free(g);
        free(s);
        free(tmp);
        return rs_err_set(err, RS_ERR_NOMEM, "shm: out of memory");
    }
    *g = (rs_pg){.ops = &shm_ops, .rank = rank, .world = world, .timeout_s = timeout_s, .store = store, .impl = s};
    snprintf(g->name, sizeof g->name, "%s", name);
    s->tmp = tmp;

    char key[128], seg[96];
    snprintf(key, sizeof key, "shm/%s/segment", name);
    rs_status st;
    if (rank == 0) {
        seg_name(seg, sizeof seg, name);
        st = map_segment(g, seg, true, err);
        if (!st) st = rs_store_set(store, key, seg, strlen(seg), err);
    } else {
        void *val = NULL;
        size_t vn = 0;
        st = rs_store_get(store, key, &val, &vn, timeout_s, err);
        if (!st) {
            snprintf(seg, sizeof seg, "%s", (const char *)val);
            st = map_segment(g, seg, false, err);
        }
        free(val);
    }
    /* Once every rank has mapped it, the name goes: the memory lives while mapped and nothing is left in
     * /dev/shm if a rank crashes later. Rank 0 unlinks even when the barrier fails. */
    if (!st || rank == 0) {
        char bname[96];
        snprintf(bname, sizeof bname, "shm/%s/mapped", name);
        rs_status bst = st ? st : rs_store_barrier(store, bname, world, timeout_s, err);
        if (rank == 0 && impl(g)->base) shm_unlink(seg);
        st = bst;
    }
    if (st) {
        rs_err_prefix(err, "shm group '%s' rank %d", name, rank);
        shm_destroy(g);
        return st;
    }
    *out = g;
    return RS_OK;
}
