/* The guard device (engine/guard/guard.h): its memory really is sealed outside table calls, data goes
 * through its copies and kernels exactly as on the CPU, its allocations are counted and zero-filled,
 * it refuses host memory where device memory is due, and threads calling it at once stay correct.
 *
 *   test-guard        sealed (the default): a forked child that reads or writes a block directly dies
 *                     of SIGSEGV at that block's address
 *   test-guard off    run with RINGSIDE_GUARD=off: the same child reads the block's bytes and lives */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/guard/guard.h"
#include "rs_test.h"

static const rs_kernels *G;

static void *dalloc(rs_kctx *c, rs_mem *mem, rs_pool p, size_t bytes)
{
    void *d = NULL;
    RS_CHECK(G->mem_alloc(c, mem, p, bytes, &d) == RS_OK && d, "mem_alloc %zu: %s", bytes, c->err.msg);
    if (!d) exit(1); /* nothing more to check without memory */
    return d;
}

static void dfree(rs_kctx *c, rs_mem *mem, rs_pool p, void *d, size_t bytes)
{
    RS_CHECK(G->mem_free(c, mem, p, d, bytes) == RS_OK, "mem_free %zu: %s", bytes, c->err.msg);
}

/* ---- (a) the seal: a child touches a block from host code ---- */

static volatile uintptr_t want_lo, want_hi;

/* The fault must be an access to the block (SEGV_ACCERR: the page is mapped but forbidden), not some
 * other crash; then the default action is put back and the access, run again on return, kills the
 * child with SIGSEGV as it would with no handler. */
static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (si->si_code != SEGV_ACCERR || a < want_lo || a >= want_hi) _exit(3);
    signal(sig, SIG_DFL);
}

/* 0: the child read (store: wrote) the byte and exited; SIGSEGV: killed at the block; else what happened. */
static int touch_in_child(volatile unsigned char *p, size_t bytes, bool store, unsigned char *seen)
{
    int pipefd[2];
    if (pipe(pipefd)) return -1;
    want_lo = (uintptr_t)p;
    want_hi = (uintptr_t)p + bytes;
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, NULL);
        unsigned char v = 0;
        if (store) p[bytes / 2] = 7;
        else v = p[bytes / 2];
        if (write(pipefd[1], &v, 1) != 1) _exit(5);
        _exit(0);
    }
    close(pipefd[1]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (read(pipefd[0], seen, 1) != 1) *seen = 0xff;
    close(pipefd[0]);
    if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGSEGV ? SIGSEGV : 1000 + WTERMSIG(status);
    return WIFEXITED(status) ? (WEXITSTATUS(status) ? 2000 + WEXITSTATUS(status) : 0) : -1;
}

static void test_seal(rs_kctx *c, bool sealed)
{
    size_t n = 3000;
    float *d = dalloc(c, NULL, RS_POOL_PARAMS, n * sizeof *d);
    RS_CHECK(G->fill(c, d, n, 2.5f) == RS_OK, "fill: %s", c->err.msg); /* a call opened it and sealed it again */
    unsigned char seen = 0;
    int rd = touch_in_child((volatile unsigned char *)d, n * sizeof *d, false, &seen);
    int wr = touch_in_child((volatile unsigned char *)d, n * sizeof *d, true, &seen);
    if (sealed) {
        RS_CHECK(rd == SIGSEGV, "a host read of a guard block after the call returned: child status %d, not killed by "
                 "SIGSEGV at the block (3: a fault elsewhere or of another kind)", rd);
        RS_CHECK(wr == SIGSEGV, "a host write to a guard block: child status %d, not killed by SIGSEGV at the block",
                 wr);
    } else {
        float want = 2.5f;
        RS_CHECK(rd == 0 && wr == 0, "RINGSIDE_GUARD=off: the child's read gave status %d, its write %d (want 0, 0)",
                 rd, wr);
        RS_CHECK(seen == ((unsigned char *)&want)[(n * sizeof *d / 2) % 4], "RINGSIDE_GUARD=off: the child read %u",
                 seen);
    }
    /* the parent's own copy of the block: still intact and readable through the table */
    float back[4];
    RS_CHECK(G->copy_d2h(c, back, d + n - 4, sizeof back) == RS_OK && back[0] == 2.5f && back[3] == 2.5f,
             "after the children: %g %g (%s)", back[0], back[3], c->err.msg);
    dfree(c, NULL, RS_POOL_PARAMS, d, n * sizeof *d);
    printf("seal: %s\n", sealed ? "a host read and a host write of a block after a kernel call each killed the child "
                                  "with SIGSEGV at the block"
                                : "off (RINGSIDE_GUARD=off): the child read and wrote the block");
}

/* ---- (b) copies and kernels: the same bits as the CPU on host memory ---- */

static void test_round_trip(rs_kctx *c)
{
    enum { M = 37, N = 29, K = 41 };
    rs_kctx cpu;
    rs_kctx_init(&cpu, &rs_cpu_kernels, c->threads, NULL);
    cpu.prec = c->prec;
    float a[M * K], b[K * N], y[M * N], ref[M * N], got[M * N];
    uint32_t s = 12345;
    for (int i = 0; i < M * K; i++) a[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < K * N; i++) b[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    /* the CPU on host memory: C = 0.75; C += 1.5 A B (beta 1); y = 3; C += -2 y */
    float *hc = malloc(sizeof ref);
    rs_cpu_fill(&cpu, hc, M * N, 0.75f);
    rs_cpu_gemm(&cpu, false, false, M, N, K, 1.5f, a, K, b, N, 1.0f, hc, N);
    rs_cpu_fill(&cpu, y, M * N, 3.0f);
    rs_cpu_axpy(&cpu, hc, y, M * N, -2.0f);
    memcpy(ref, hc, sizeof ref);
    free(hc);
    /* the guard: the same through its copies */
    float *da = dalloc(c, NULL, RS_POOL_ACTS, sizeof a), *db = dalloc(c, NULL, RS_POOL_ACTS, sizeof b);
    float *dc = dalloc(c, NULL, RS_POOL_ACTS, sizeof ref), *dy = dalloc(c, NULL, RS_POOL_ACTS, sizeof y);
    rs_status st = G->copy_h2d(c, da, a, sizeof a);
    st = st ? st : G->copy_h2d(c, db, b, sizeof b);
    st = st ? st : G->fill(c, dc, M * N, 0.75f);
    st = st ? st : G->gemm(c, false, false, M, N, K, 1.5f, da, K, db, N, 1.0f, dc, N);
    st = st ? st : G->fill(c, dy, M * N, 3.0f);
    st = st ? st : G->axpy(c, dc, dy, M * N, -2.0f);
    st = st ? st : G->sync(c);
    st = st ? st : G->copy_d2h(c, got, dc, sizeof got);
    RS_CHECK(st == RS_OK, "the guard's chain failed: %s", c->err.msg);
    int diff = 0;
    for (int i = 0; i < M * N; i++) diff += memcmp(&got[i], &ref[i], sizeof *got) != 0;
    RS_CHECK(diff == 0, "%d of %d values of fill/gemm/axpy differ from the CPU's (first: %.9g vs %.9g)", diff, M * N,
             got[0], ref[0]);
    dfree(c, NULL, RS_POOL_ACTS, da, sizeof a);
    dfree(c, NULL, RS_POOL_ACTS, db, sizeof b);
    dfree(c, NULL, RS_POOL_ACTS, dc, sizeof ref);
    dfree(c, NULL, RS_POOL_ACTS, dy, sizeof y);
    printf("round trip: copy_h2d, fill, gemm %dx%dx%d (beta 1), axpy, copy_d2h: %d values equal to the CPU's bit for "
           "bit\n", M, N, K, M * N);
}

/* ---- (c) the tracker, zero-filled blocks, reuse ---- */

static size_t zeros_at(rs_kctx *c, const void *d, size_t bytes)
{
    unsigned char *h = malloc(bytes);
    RS_CHECK(G->copy_d2h(c, h, d, bytes) == RS_OK, "copy_d2h: %s", c->err.msg);
    size_t z = 0;
    for (size_t i = 0; i < bytes; i++) z += h[i] == 0;
    free(h);
    return z;
}

static void test_memory(rs_kctx *c)
{
    rs_mem mem = {0};
    size_t sz[] = {1, 100, 4096, 4097, 70000, 0};
    rs_pool pools[] = {RS_POOL_PARAMS, RS_POOL_GRADS, RS_POOL_OPTIM, RS_POOL_ACTS, RS_POOL_SCRATCH, RS_POOL_COMM};
    void *d[6];
    int64_t total = 0;
    for (int i = 0; i < 6; i++) {
        d[i] = dalloc(c, &mem, pools[i], sz[i]);
        total += (int64_t)sz[i];
        RS_CHECK(((uintptr_t)d[i] & 4095) == 0, "block %d at %p is not page-aligned", i, d[i]);
        RS_CHECK(mem.live[pools[i]] == (int64_t)sz[i], "%zu bytes counted as %lld in %s", sz[i],
                 (long long)mem.live[pools[i]], rs_pool_name(pools[i]));
    }
    RS_CHECK(d[5] != d[4] && d[5] != d[0], "an empty block shares an address with another");
    RS_CHECK(mem.live_total == total && mem.peak_total == total, "live %lld, peak %lld, want %lld",
             (long long)mem.live_total, (long long)mem.peak_total, (long long)total);
    /* a freed block comes back zero-filled: write one in the middle, free it, allocate the same size */
    RS_CHECK(G->mem_set(c, d[3], 0x5a, sz[3]) == RS_OK, "mem_set: %s", c->err.msg);
    void *old = d[3];
    dfree(c, &mem, pools[3], d[3], sz[3]);
    d[3] = dalloc(c, &mem, pools[3], sz[3]);
    RS_CHECK(d[3] == old, "first fit did not reuse the freed block (%p, was %p)", d[3], old);
    RS_CHECK(zeros_at(c, d[3], sz[3]) == sz[3], "a reused block is not zero-filled");
    /* the top block too (its pages go back above the handed-out range) */
    RS_CHECK(G->mem_set(c, d[5], 0x11, 1) == RS_OK, "mem_set: %s", c->err.msg); /* a zero-byte block: 1 page */
    void *top = d[4];
    RS_CHECK(G->mem_set(c, d[4], 0x33, sz[4]) == RS_OK, "mem_set: %s", c->err.msg);
    dfree(c, &mem, pools[5], d[5], sz[5]);
    dfree(c, &mem, pools[4], d[4], sz[4]);
    d[4] = dalloc(c, &mem, pools[4], sz[4]);
    RS_CHECK(zeros_at(c, d[4], sz[4]) == sz[4], "the top block reused is not zero-filled (%p, was %p)", d[4], top);
    /* refusals: a block freed twice, a wrong size, a host pointer */
    rs_err e = {0};
    RS_CHECK(G->mem_free(c, &mem, pools[1], d[1], sz[1] + 1) == RS_ERR_ARG && rs_kctx_check(c, &e) &&
                 strstr(e.msg, "not 101"), "mem_free with the wrong size: '%s'", e.msg);
    int x = 0;
    RS_CHECK(G->mem_free(c, &mem, pools[1], &x, 4) == RS_ERR_ARG && rs_kctx_check(c, &e) &&
                 strstr(e.msg, "not a live block"), "mem_free of a host pointer: '%s'", e.msg);
    dfree(c, &mem, pools[4], d[4], sz[4]);
    RS_CHECK(G->mem_free(c, &mem, pools[4], d[4], sz[4]) == RS_ERR_ARG && rs_kctx_check(c, &e) &&
                 strstr(e.msg, "freed twice"), "mem_free twice: '%s'", e.msg);
    for (int i = 0; i < 4; i++) dfree(c, &mem, pools[i], d[i], sz[i]);
    int64_t live = 0;
    for (int p = 0; p < RS_POOL_COUNT; p++) live += mem.live[p] != 0;
    RS_CHECK(mem.live_total == 0 && live == 0, "after every free: %lld bytes live (%lld pools not 0)",
             (long long)mem.live_total, (long long)live);
    RS_CHECK(mem.peak_total == total, "the peak %lld, want %lld", (long long)mem.peak_total, (long long)total);
    printf("memory: 6 blocks (0 to 70000 bytes) counted per pool, page-aligned, reused blocks zero-filled, counts back "
           "to 0 (peak %lld bytes); double free, wrong size and host pointers refused\n", (long long)total);
}

/* ---- host memory where the device's is due ---- */

static void test_host_args(rs_kctx *c)
{
    float host[64] = {0}, back[64];
    float *d = dalloc(c, NULL, RS_POOL_ACTS, sizeof host);
    rs_err e = {0};
    RS_CHECK(G->fill(c, host, 64, 1.0f) == RS_ERR_ARG && rs_kctx_check(c, &e) && strstr(e.msg, "fill: x=") &&
                 strstr(e.msg, "host memory"), "fill on host memory: '%s'", e.msg);
    RS_CHECK(G->axpy(c, d, host, 64, 1.0f) == RS_ERR_ARG && rs_kctx_check(c, &e) && strstr(e.msg, "axpy: x="),
             "axpy reading host memory: '%s'", e.msg);
    RS_CHECK(G->gemm(c, false, false, 8, 8, 8, 1, d, 8, d, 8, 0, host, 8) == RS_ERR_ARG && rs_kctx_check(c, &e) &&
                 strstr(e.msg, "gemm: C="), "gemm writing host memory: '%s'", e.msg);
    RS_CHECK(G->copy_h2d(c, host, back, sizeof host) == RS_ERR_ARG && rs_kctx_check(c, &e) &&
                 strstr(e.msg, "copy_h2d") && strstr(e.msg, "not memory of the guard"),
             "copy_h2d to host memory: '%s'", e.msg);
    /* d is the only block: its page is all the device has handed out */
    unsigned char *big = malloc(8192);
    RS_CHECK(G->copy_d2h(c, big, d, 4097) == RS_ERR_ARG && rs_kctx_check(c, &e),
             "copy_d2h past the device's pages was accepted: '%s'", e.msg);
    free(big);
    RS_CHECK(G->copy_d2h(c, d, d, 16) == RS_ERR_ARG && rs_kctx_check(c, &e) && strstr(e.msg, "host side"),
             "copy_d2h into device memory: '%s'", e.msg);
    const float *parts[2] = {d, host};
    const rs_dims *shapes[2] = {NULL, NULL};
    RS_CHECK(G->concat(c, 2, parts, shapes, 0, d, NULL) == RS_ERR_ARG && rs_kctx_check(c, &e) &&
                 strstr(e.msg, "concat: x[i]"), "concat of a host input: '%s'", e.msg);
    RS_CHECK(G->fill(c, d, 64, 1.0f) == RS_OK && G->copy_d2h(c, back, d, sizeof back) == RS_OK && back[63] == 1.0f,
             "device memory refused: %s", c->err.msg);
    dfree(c, NULL, RS_POOL_ACTS, d, sizeof host);
    printf("host arguments: fill, axpy, gemm, concat and the copies refuse host memory on the device side\n");
}

/* ---- threads: two callers at once, each context of 2 OpenMP threads ---- */

enum { TN = 20000, ROUNDS = 2000 };

typedef struct worker {
    float *d; /* device, TN floats */
    int bad;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    rs_kctx c;
    rs_kctx_init(&c, G, 2, NULL);
    float one = 1.0f;
    for (int r = 0; r < ROUNDS; r++) {
        /* d = 1; d += 2 d; one element checked: a call sealed out from under another would crash */
        rs_status st = G->fill(&c, w->d, TN, 1.0f);
        st = st ? st : G->axpy(&c, w->d, w->d + TN / 2, TN / 2, 2.0f);
        st = st ? st : G->copy_d2h(&c, &one, w->d + TN / 4, sizeof one);
        if (st || one != 3.0f) w->bad++;
    }
    return NULL;
}

static void test_threads(rs_kctx *c)
{
    worker w[2];
    for (int i = 0; i < 2; i++) w[i] = (worker){dalloc(c, NULL, RS_POOL_ACTS, TN * sizeof(float)), 0};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, &w[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    RS_CHECK(w[0].bad == 0 && w[1].bad == 0, "two threads: %d and %d of %d rounds wrong", w[0].bad, w[1].bad, ROUNDS);
    unsigned char seen;
    if (rs_guard_sealing())
        RS_CHECK(touch_in_child((volatile unsigned char *)w[0].d, TN * sizeof(float), false, &seen) == SIGSEGV,
                 "sealed again once both threads were done");
    for (int i = 0; i < 2; i++) dfree(c, NULL, RS_POOL_ACTS, w[i].d, TN * sizeof(float));
    printf("threads: two threads x %d rounds of fill/axpy/copy_d2h on 2-thread contexts, all right, sealed after\n",
           ROUNDS);
}

static double us_per_fill(rs_kctx *c, const rs_kernels *k, float *x)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 2000; i++) k->fill(c, x, 64, 1.0f);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 2000 / 1e3;
}

/* What a call costs: printed, not checked (tests never assert timings). Opening and sealing change
 * the page table entries of every page in use, so the cost grows with the device memory written. */
static void show_cost(rs_kctx *c)
{
    enum { BIG = 16 << 20 };
    float *d = dalloc(c, NULL, RS_POOL_ACTS, 64 * sizeof(float)), h[64];
    rs_kctx cpu;
    rs_kctx_init(&cpu, &rs_cpu_kernels, c->threads, NULL);
    double g = us_per_fill(c, G, d), u = us_per_fill(&cpu, &rs_cpu_kernels, h);
    void *big = dalloc(c, NULL, RS_POOL_ACTS, BIG);
    RS_CHECK(G->mem_set(c, big, 1, BIG) == RS_OK, "mem_set: %s", c->err.msg);
    double gb = us_per_fill(c, G, d);
    printf("cost: fill of 64 floats %.2f us a call on guard (sealed: %s) with 4 KiB in use, %.2f us with 16 MiB, "
           "%.2f us on cpu\n", g, rs_guard_sealing() ? "yes" : "no", gb, u);
    dfree(c, NULL, RS_POOL_ACTS, big, BIG);
    dfree(c, NULL, RS_POOL_ACTS, d, 64 * sizeof(float));
}

int main(int argc, char **argv)
{
    bool off = argc > 1 && !strcmp(argv[1], "off");
    if (argc > 1 && !off) {
        fprintf(stderr, "usage: %s [off]\n", argv[0]);
        return 2;
    }
    G = rs_kernels_for((rs_device){RS_DEV_GUARD, 0});
    RS_CHECK(G == &rs_guard_kernels && !strcmp(G->name, "guard") && G->kind == RS_DEV_GUARD &&
                 !strcmp(rs_device_name((rs_device){RS_DEV_GUARD, 0}), "guard"), "the registry's guard table");
    RS_CHECK(rs_guard_sealing() == !off, "sealing %d with RINGSIDE_GUARD=%s", rs_guard_sealing(),
             getenv("RINGSIDE_GUARD") ? getenv("RINGSIDE_GUARD") : "(unset)");
    rs_kctx c;
    RS_CHECK(rs_kctx_init(&c, G, 1, NULL) == RS_OK, "context");
    test_seal(&c, !off);
    test_round_trip(&c);
    rs_kctx_set_threads(&c, 2);
    test_round_trip(&c);
    test_memory(&c);
    test_host_args(&c);
    test_threads(&c);
    show_cost(&c);
    return rs_test_finish(off ? "guard off" : "guard");
}
