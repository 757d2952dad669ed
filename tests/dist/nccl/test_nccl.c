/* The nccl backend against a serial computation on the host: the parent hosts the store and forks `world`
 * ranks; each rank copies its inputs to its GPU, runs every operation, copies the result back and checks it
 * against the reduction it computes itself. Without a CUDA device (CI, most laptops) it exits 77. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/pg/pg.h"
#include "dist/store/store.h"
#include "tests/rs_test.h"

#ifndef RS_HAVE_NCCL
int main(void)
{
    RS_SKIP("ringside was built without the nccl backend");
}
#else
#include <cuda_runtime.h>

typedef struct ctx {
    rs_pg *g;
    int r, w;
    int fails;
} ctx;

/* Rank r's element i: small values, with fractions for floats so sums round differently by order. */
static double value(bool isf, int r, size_t i)
{
    double v = (double)(((size_t)r * 31 + i * 17) % 23) - 11;
    return isf ? v * 0.37 + r * 0.001 : v;
}

static void fill(void *buf, size_t n, rs_dtype t, int r, size_t base)
{
    for (size_t i = 0; i < n; i++) {
        double v = value(t == RS_F32 || t == RS_F64, r, base + i);
        if (t == RS_F32) ((float *)buf)[i] = (float)v;
        else if (t == RS_F64) ((double *)buf)[i] = v;
        else if (t == RS_I32) ((int32_t *)buf)[i] = (int32_t)v;
        else ((int64_t *)buf)[i] = (int64_t)v;
    }
}

static double get(const void *buf, size_t i, rs_dtype t)
{
    switch (t) {
    case RS_F32: return ((const float *)buf)[i];
    case RS_F64: return ((const double *)buf)[i];
    case RS_I32: return ((const int32_t *)buf)[i];
    default: return (double)((const int64_t *)buf)[i];
    }
}

/* The serial reference: rank 0's data, then ranks 1..w-1 folded in, AVG divided once. */
static void expected(void *out, size_t n, rs_dtype t, rs_redop op, int w, size_t base)
{
    fill(out, n, t, 0, base);
    void *tmp = malloc(n * rs_dtype_size(t) + 1);
    for (int r = 1; r < w; r++) {
        fill(tmp, n, t, r, base);
        rs_pg_reduce_into(out, tmp, n, t, op);
    }
    free(tmp);
    if (op == RS_AVG) rs_pg_scale_avg(out, n, t, w);
}

/* Integers and MAX exactly; float sums within a tolerance (NCCL's order, and ncclAvg pre-scales). */
static void compare(ctx *c, const void *got, const void *want, size_t n, rs_dtype t, rs_redop op, const char *what)
{
    bool exact = t == RS_I32 || t == RS_I64 || op == RS_MAX || op == RS_MIN;
    double tol = t == RS_F32 ? 2e-5 : 1e-12;
    for (size_t i = 0; i < n; i++) {
        double a = get(got, i, t), b = get(want, i, t);
        if (exact ? a != b : fabs(a - b) > tol * (1 + fabs(b))) {
            fprintf(stderr, "rank %d: %s %s %s n=%zu: element %zu: got %.9g want %.9g\n", c->r, what, rs_dtype_name(t),
                    rs_redop_name(op), n, i, a, b);
            c->fails++;
            return;
        }
    }
}

static bool ok(ctx *c, rs_status st, const rs_err *e, const char *what)
{
    if (st == RS_OK) return true;
    fprintf(stderr, "rank %d: %s: %s\n", c->r, what, e->msg);
    c->fails++;
    return false;
}

/* Device buffers through the backend's own table, as the worker's generic code uses them. */
static void *dev(ctx *c, size_t bytes)
{
    void *p = c->g->ops->dev_alloc(c->g, bytes);
    if (!p) {
        fprintf(stderr, "rank %d: dev_alloc of %zu bytes failed\n", c->r, bytes);
        exit(2);
    }
    return p;
}

static void put(ctx *c, void *d, const void *h, size_t bytes)
{
    rs_err e = {0};
    if (c->g->ops->dev_copy(c->g, d, h, bytes, 1, &e)) {
        fprintf(stderr, "rank %d: %s\n", c->r, e.msg);
        exit(2);
    }
}

static void take(ctx *c, void *h, const void *d, size_t bytes)
{
    rs_err e = {0};
    if (c->g->ops->dev_copy(c->g, h, d, bytes, 0, &e)) {
        fprintf(stderr, "rank %d: %s\n", c->r, e.msg);
        exit(2);
    }
}

static void check_reductions(ctx *c, size_t n, rs_dtype t, rs_redop op, int root)
{
    size_t es = rs_dtype_size(t), w = (size_t)c->w, big = w * n * es + 1;
    char *h = malloc(big), *want = malloc(big);
    void *d = dev(c, w * n * es), *d2 = dev(c, n * es);
    rs_err e = {0};

    fill(h, n, t, c->r, 0);
    put(c, d, h, n * es);
    expected(want, n, t, op, c->w, 0);
    if (ok(c, rs_pg_all_reduce(c->g, d, n, t, op, &e), &e, "all_reduce")) {
        take(c, h, d, n * es);
        compare(c, h, want, n, t, op, "all_reduce");
    }

    fill(h, n, t, c->r, 0);
    put(c, d, h, n * es);
    if (c->r != root) fill(want, n, t, c->r, 0); /* non-root inputs are left alone */
    if (ok(c, rs_pg_reduce(c->g, d, n, t, op, root, &e), &e, "reduce")) {
        take(c, h, d, n * es);
        compare(c, h, want, n, t, op, "reduce");
    }

    fill(h, w * n, t, c->r, 0);
    put(c, d, h, w * n * es);
    expected(want, n, t, op, c->w, (size_t)c->r * n);
    if (ok(c, rs_pg_reduce_scatter(c->g, d, d2, n, t, op, &e), &e, "reduce_scatter")) {
        take(c, h, d2, n * es);
        compare(c, h, want, n, t, op, "reduce_scatter");
    }
    c->g->ops->dev_free(c->g, d);
    c->g->ops->dev_free(c->g, d2);
    free(h);
    free(want);
}

/* The copying operations: broadcast, scatter, gather, all_gather, all_to_all, send/recv, isend/irecv. */
static void check_moves(ctx *c, size_t n, rs_dtype t, int root)
{
    size_t es = rs_dtype_size(t), w = (size_t)c->w, b = n * es, big = w * b + 1;
    char *h = malloc(big), *want = malloc(big);
    void *da = dev(c, w * b), *db = dev(c, w * b);
    rs_err e = {0};

    if (c->r == root) fill(h, n, t, root, 0);
    else memset(h, 0x5a, b);
    put(c, da, h, b);
    fill(want, n, t, root, 0);
    if (ok(c, rs_pg_broadcast(c->g, da, n, t, root, &e), &e, "broadcast")) {
        take(c, h, da, b);
        compare(c, h, want, n, t, RS_MAX, "broadcast");
    }

    fill(h, w * n, t, root, 0); /* only the root's is read */
    put(c, da, h, w * b);
    fill(want, n, t, root, (size_t)c->r * n);
    if (ok(c, rs_pg_scatter(c->g, da, db, n, t, root, &e), &e, "scatter")) {
        take(c, h, db, b);
        compare(c, h, want, n, t, RS_MAX, "scatter");
    }

    fill(h, n, t, c->r, 0);
    put(c, da, h, b);
    for (size_t r = 0; r < w; r++) fill(want + r * b, n, t, (int)r, 0);
    if (ok(c, rs_pg_gather(c->g, da, db, n, t, root, &e), &e, "gather") && c->r == root) {
        take(c, h, db, w * b);
        compare(c, h, want, w * n, t, RS_MAX, "gather");
    }
    if (ok(c, rs_pg_all_gather(c->g, da, db, n, t, &e), &e, "all_gather")) {
        take(c, h, db, w * b);
        compare(c, h, want, w * n, t, RS_MAX, "all_gather");
    }

    fill(h, w * n, t, c->r, 0);
    put(c, da, h, w * b);
    for (size_t r = 0; r < w; r++) fill(want + r * b, n, t, (int)r, (size_t)c->r * n);
    if (ok(c, rs_pg_all_to_all(c->g, da, db, n, t, &e), &e, "all_to_all")) {
        take(c, h, db, w * b);
        compare(c, h, want, w * n, t, RS_MAX, "all_to_all");
    }

    /* ranks 0 and 1 swap at once (isend before irecv on both sides: the case a single in-order stream
     * would deadlock on), then rank 0 sends and gets it back with blocking calls */
    if (c->w >= 2 && c->r < 2) {
        int peer = 1 - c->r;
        fill(h, n, t, c->r, 0);
        put(c, da, h, b);
        fill(want, n, t, peer, 0);
        rs_work *ws = NULL, *wr = NULL;
        if (ok(c, rs_pg_isend(c->g, da, n, t, peer, &ws, &e), &e, "isend") &&
            ok(c, rs_pg_irecv(c->g, db, n, t, peer, &wr, &e), &e, "irecv") &&
            ok(c, rs_work_wait(wr, &e), &e, "irecv wait") && ok(c, rs_work_wait(ws, &e), &e, "isend wait")) {
            take(c, h, db, b);
            compare(c, h, want, n, t, RS_MAX, "isend/irecv");
        }
        rs_work_free(ws);
        rs_work_free(wr);

        fill(want, n, t, 0, 0);
        if (c->r == 0) {
            if (ok(c, rs_pg_send(c->g, da, n, t, 1, &e), &e, "send") && ok(c, rs_pg_recv(c->g, db, n, t, 1, &e), &e, "recv")) {
                take(c, h, db, b);
                compare(c, h, want, n, t, RS_MAX, "send/recv");
            }
        } else if (ok(c, rs_pg_recv(c->g, db, n, t, 0, &e), &e, "recv")) {
            take(c, h, db, b);
            compare(c, h, want, n, t, RS_MAX, "send/recv");
            ok(c, rs_pg_send(c->g, db, n, t, 0, &e), &e, "send");
        }
    }
    c->g->ops->dev_free(c->g, da);
    c->g->ops->dev_free(c->g, db);
    free(h);
    free(want);
}

/* A sub-group of every rank but the last (or the single rank of world 1): its all_reduce sums only its own. */
static void check_new_group(ctx *c)
{
    int m = c->w > 1 ? c->w - 1 : 1, ranks[64];
    for (int i = 0; i < m; i++) ranks[i] = i;
    rs_err e = {0};
    rs_pg *sub = NULL;
    if (!ok(c, rs_pg_new_group(c->g, ranks, m, &sub, &e), &e, "new_group")) return;
    if ((sub != NULL) != (c->r < m)) {
        fprintf(stderr, "rank %d: new_group gave %s group\n", c->r, sub ? "a" : "no");
        c->fails++;
    }
    if (sub) {
        int64_t h = c->r + 1, want = (int64_t)m * (m + 1) / 2;
        void *d = dev(c, sizeof h);
        put(c, d, &h, sizeof h);
        if (ok(c, rs_pg_all_reduce(sub, d, 1, RS_I64, RS_SUM, &e), &e, "sub-group all_reduce")) {
            take(c, &h, d, sizeof h);
            compare(c, &h, &want, 1, RS_I64, RS_SUM, "sub-group all_reduce");
        }
        c->g->ops->dev_free(c->g, d);
        rs_pg_destroy(sub);
    }
}

static void matrix(ctx *c)
{
    static const rs_dtype dtypes[] = {RS_F32, RS_I64};
    static const rs_redop ops[] = {RS_SUM, RS_AVG, RS_MAX};
    static const size_t counts[] = {0, 1, 7, 1000003};
    int w = c->w;
    rs_err e = {0};
    for (size_t ti = 0; ti < 2; ti++)
        for (size_t ci = 0; ci < 4; ci++) {
            for (size_t oi = 0; oi < 3; oi++) {
                check_reductions(c, counts[ci], dtypes[ti], ops[oi], w - 1);
                if (w > 1) check_reductions(c, counts[ci], dtypes[ti], ops[oi], 0);
            }
            check_moves(c, counts[ci], dtypes[ti], w - 1);
            if (w > 1) check_moves(c, counts[ci], dtypes[ti], 0);
        }
    ok(c, rs_pg_barrier(c->g, &e), &e, "barrier");
    check_new_group(c);
    ok(c, rs_pg_barrier(c->g, &e), &e, "barrier");
}

static int child(int w, int r, int rfd)
{
    alarm(110); /* a hang becomes a visible failure, not a stuck suite */
    int port = 0;
    if (read(rfd, &port, sizeof port) != (ssize_t)sizeof port) return 2;
    close(rfd);
    rs_err e = {0};
    rs_store *st = NULL;
    if (rs_store_connect("127.0.0.1", port, 10, &st, &e)) {
        fprintf(stderr, "rank %d: %s\n", r, e.msg);
        return 2;
    }
    ctx c = {.r = r, .w = w};
    char name[64];
    snprintf(name, sizeof name, "test-nccl-%d", w);
    if (rs_pg_new("nccl", st, name, r, w, 30, &c.g, &e)) {
        fprintf(stderr, "rank %d: %s\n", r, e.msg);
        rs_store_close(st);
        return 2;
    }
    double t0 = rs_pg_now();
    matrix(&c);
    if (r == 0) printf("nccl matrix world %d: %.2f s, %d failures on rank 0\n", w, rs_pg_now() - t0, c.fails);
    rs_pg_destroy(c.g);
    rs_store_close(st);
    return c.fails ? 1 : 0;
}

/* Forks w ranks; returns the number that failed. Fork comes first: a process that has touched CUDA
 * cannot hand a working CUDA to its children. */
static int run_world(int w)
{
    int fds[2];
    if (pipe(fds) != 0) return 1;
    fflush(stdout);
    pid_t pids[64];
    for (int r = 0; r < w; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            close(fds[1]);
            int rc = child(w, r, fds[0]);
            fflush(stdout);
            fflush(stderr);
            _exit(rc);
        }
    }
    close(fds[0]);
    rs_err e = {0};
    rs_store_server *srv = NULL;
    int fails = 0;
    if (rs_store_server_start("127.0.0.1", 0, &srv, &e)) {
        fprintf(stderr, "store: %s\n", e.msg);
        fails++;
    } else {
        int port = rs_store_server_port(srv);
        for (int r = 0; r < w; r++)
            if (write(fds[1], &port, sizeof port) != (ssize_t)sizeof port) fails++;
    }
    close(fds[1]);
    for (int r = 0; r < w; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "world %d: rank %d %s %d\n", w, r, WIFEXITED(status) ? "exited with" : "killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            fails++;
        }
    }
    rs_store_server_stop(srv);
    return fails;
}

/* The device count, asked in a child for the same reason: the parent must stay free of CUDA. */
static int device_count(char *why, size_t cap)
{
    int fds[2];
    snprintf(why, cap, "could not ask");
    if (pipe(fds) != 0) return 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        int n = 0;
        cudaError_t ce = cudaGetDeviceCount(&n);
        char msg[200];
        snprintf(msg, sizeof msg, "%s", ce == cudaSuccess ? "no error, 0 devices" : cudaGetErrorString(ce));
        if (ce != cudaSuccess) n = 0;
        if (write(fds[1], &n, sizeof n) != (ssize_t)sizeof n || write(fds[1], msg, sizeof msg) != (ssize_t)sizeof msg)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    int n = 0;
    char msg[200] = "";
    if (pid < 0 || read(fds[0], &n, sizeof n) != (ssize_t)sizeof n || read(fds[0], msg, sizeof msg) != (ssize_t)sizeof msg)
        n = 0;
    else snprintf(why, cap, "%s", msg);
    close(fds[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return n;
}

int main(void)
{
    char why[256];
    int ndev = device_count(why, sizeof why);
    if (ndev < 1) RS_SKIP("no CUDA device (cudaGetDeviceCount: %s)", why);
    printf("%d CUDA device(s)\n", ndev);
    int fails = run_world(1);
    if (ndev >= 2) fails += run_world(2);
    else printf("world 2 skipped: needs 2 CUDA devices, this machine has %d\n", ndev);
    printf("test-nccl: %d failures\n", fails);
    return fails ? 1 : 0;
}
#endif
