/* Harness cases for the context and memory entries: default threads, allocation counted in the
 * tracker, the three copies on odd sizes, mem_set, sync, and the refusals (overlap, NULL, bad pool). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const size_t SIZES[] = {1, 3, 17, 33, 129, 4099};
#define NSIZES (sizeof SIZES / sizeof *SIZES)

static unsigned char *bytes_rand(hz *h, size_t n)
{
    unsigned char *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)hz_unif(h, 0, 256);
    return b;
}

static void case_default_threads(hz *h)
{
    int n = 0;
    hz_ok(h, "default_threads", h->k->default_threads(h->ctx, &n));
    hz_check(h, n >= 1, "default_threads gave %d", n);
    /* The CPU's is OMP_NUM_THREADS when it is set (the engine suite sets 2). */
    const char *env = getenv("OMP_NUM_THREADS");
    if (h->k->kind == RS_DEV_CPU && env && atoi(env) >= 1)
        hz_check(h, n == atoi(env), "default_threads gave %d with OMP_NUM_THREADS=%s", n, env);
    rs_kctx c;
    hz_check(h, rs_kctx_init(&c, h->k, 0, NULL) == RS_OK && c.threads == n, "rs_kctx_init(threads 0) gave %d, want %d",
             c.threads, n);
    hz_refused(h, "default_threads(NULL)", h->k->default_threads(h->ctx, NULL));
}

static void case_mem_alloc(hz *h)
{
    rs_mem mem = {0};
    for (size_t s = 0; s < NSIZES; s++) {
        void *p = NULL;
        size_t n = SIZES[s];
        hz_ok(h, "mem_alloc", h->k->mem_alloc(h->ctx, &mem, RS_POOL_ACTS, n, &p));
        hz_check(h, p && ((uintptr_t)p & 63) == 0, "%zu bytes: block %p is not 64-byte aligned", n, p);
        hz_check(h, mem.live[RS_POOL_ACTS] == (int64_t)n && mem.live_total == (int64_t)n,
                 "%zu bytes counted as %lld in activations (%lld in all)", n, (long long)mem.live[RS_POOL_ACTS],
                 (long long)mem.live_total);
        unsigned char *back = malloc(n);
        hz_down(h, back, p, n);
        size_t nz = 0;
        for (size_t i = 0; i < n; i++) nz += back[i] != 0;
        hz_check(h, nz == 0, "%zu bytes: %zu are not zero", n, nz);
        free(back);
        hz_ok(h, "mem_free", h->k->mem_free(h->ctx, &mem, RS_POOL_ACTS, p, n));
        hz_check(h, mem.live[RS_POOL_ACTS] == 0 && mem.peak[RS_POOL_ACTS] >= (int64_t)n,
                 "after free: live %lld, peak %lld", (long long)mem.live[RS_POOL_ACTS],
                 (long long)mem.peak[RS_POOL_ACTS]);
    }
    void *p = NULL;
    hz_refused(h, "mem_alloc(pool 99)", h->k->mem_alloc(h->ctx, &mem, (rs_pool)99, 8, &p));
    hz_refused(h, "mem_alloc(out NULL)", h->k->mem_alloc(h->ctx, &mem, RS_POOL_ACTS, 8, NULL));
}

static void case_mem_free(hz *h)
{
    rs_mem mem = {0};
    void *a = NULL, *b = NULL;
    h->k->mem_alloc(h->ctx, &mem, RS_POOL_PARAMS, 100, &a);
    h->k->mem_alloc(h->ctx, &mem, RS_POOL_GRADS, 33, &b);
    hz_check(h, mem.live_total == 133, "two blocks counted as %lld bytes", (long long)mem.live_total);
    hz_ok(h, "mem_free", h->k->mem_free(h->ctx, &mem, RS_POOL_PARAMS, a, 100));
    hz_check(h, mem.live[RS_POOL_PARAMS] == 0 && mem.live[RS_POOL_GRADS] == 33, "freeing one block left %lld / %lld",
             (long long)mem.live[RS_POOL_PARAMS], (long long)mem.live[RS_POOL_GRADS]);
    hz_ok(h, "mem_free", h->k->mem_free(h->ctx, &mem, RS_POOL_GRADS, b, 33));
    hz_ok(h, "mem_free(NULL)", h->k->mem_free(h->ctx, &mem, RS_POOL_GRADS, NULL, 0));
    hz_check(h, mem.live_total == 0 && mem.peak_total == 133, "after both: live %lld, peak %lld",
             (long long)mem.live_total, (long long)mem.peak_total);
    hz_refused(h, "mem_free(pool -1)", h->k->mem_free(h->ctx, &mem, (rs_pool)-1, NULL, 0));
}

/* host -> device -> device -> host, every size; each copy is checked by the next one's bytes. */
static void round_trip(hz *h, const char *who)
{
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s], mark = hz_mark(h);
        unsigned char *src = bytes_rand(h, n), *back = calloc(n, 1);
        void *d1 = hz_alloc(h, n), *d2 = hz_alloc(h, n + 64);
        hz_ok(h, "copy_h2d", h->k->copy_h2d(h->ctx, d1, src, n));
        hz_ok(h, "copy_d2d", h->k->copy_d2d(h->ctx, (char *)d2 + 7, d1, n)); /* an unaligned destination */
        hz_ok(h, "sync", h->k->sync(h->ctx));
        hz_ok(h, "copy_d2h", h->k->copy_d2h(h->ctx, back, (char *)d2 + 7, n));
        hz_check(h, !memcmp(src, back, n), "%s: %zu bytes came back different", who, n);
        unsigned char edge[7];
        hz_down(h, edge, d2, 7);
        size_t nz = 0;
        for (int i = 0; i < 7; i++) nz += edge[i] != 0;
        hz_check(h, nz == 0, "%s: copy_d2d wrote %zu bytes before its destination", who, nz);
        hz_ok(h, "copies of 0 bytes", h->k->copy_d2d(h->ctx, d1, d2, 0));
        free(src);
        free(back);
        hz_release(h, mark);
    }
}

static void case_copy_h2d(hz *h)
{
    round_trip(h, "copy_h2d");
    unsigned char x[8] = {0};
    hz_refused(h, "copy_h2d(dst NULL)", h->k->copy_h2d(h->ctx, NULL, x, 8));
}

static void case_copy_d2h(hz *h)
{
    round_trip(h, "copy_d2h");
    void *d = hz_alloc(h, 8);
    hz_refused(h, "copy_d2h(dst NULL)", h->k->copy_d2h(h->ctx, NULL, d, 8));
}

static void case_copy_d2d(hz *h)
{
    round_trip(h, "copy_d2d");
    char *d = hz_alloc(h, 64);
    hz_refused(h, "copy_d2d(overlapping)", h->k->copy_d2d(h->ctx, d + 4, d, 16));
    hz_refused(h, "copy_d2d(src NULL)", h->k->copy_d2d(h->ctx, d, NULL, 16));
}

static void case_mem_set(hz *h)
{
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s], mark = hz_mark(h);
        unsigned char *d = hz_alloc(h, n + 2), *back = malloc(n + 2);
        hz_ok(h, "mem_set", h->k->mem_set(h->ctx, d + 1, 0x1a5, n)); /* only the low byte counts */
        hz_down(h, back, d, n + 2);
        size_t bad = (back[0] != 0) + (back[n + 1] != 0);
        for (size_t i = 1; i <= n; i++) bad += back[i] != 0xa5;
        hz_check(h, bad == 0, "mem_set of %zu bytes: %zu bytes wrong (inside or around)", n, bad);
        free(back);
        hz_release(h, mark);
    }
    hz_refused(h, "mem_set(NULL, 4 bytes)", h->k->mem_set(h->ctx, NULL, 0, 4));
}

static void case_sync(hz *h)
{
    hz_ok(h, "sync", h->k->sync(h->ctx));
    if (h->k->kind != RS_DEV_CPU) return;
    rs_kctx blank = {.k = h->k}; /* never initialised: threads 0 */
    rs_status st = h->k->sync(&blank);
    hz_check(h, st == RS_ERR_ARG && rs_kctx_check(&blank, NULL) == RS_ERR_ARG,
             "sync on an uninitialised context gave %d", (int)st);
}

HZ_CASE(default_threads, case_default_threads);
HZ_CASE(mem_alloc, case_mem_alloc);
HZ_CASE(mem_free, case_mem_free);
HZ_CASE(copy_h2d, case_copy_h2d);
HZ_CASE(copy_d2h, case_copy_d2h);
HZ_CASE(copy_d2d, case_copy_d2d);
HZ_CASE(mem_set, case_mem_set);
HZ_CASE(sync, case_sync);
