/* The kernel-table harness's toolkit (see harness.h). */
#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool hz_check(hz *h, bool ok, const char *fmt, ...)
{
    h->checks++;
    if (ok) return true;
    h->failures++;
    fprintf(stderr, "FAIL [%s, %d thread%s] %s: ", h->k->name, h->ctx->threads, h->ctx->threads == 1 ? "" : "s",
            h->entry);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return false;
}

static uint64_t next(hz *h)
{
    h->rng = h->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return h->rng >> 11;
}

double hz_unif(hz *h, double lo, double hi) { return lo + (hi - lo) * (double)next(h) / 9007199254740992.0; }

float *hz_rand(hz *h, size_t n, float lo, float hi)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)hz_unif(h, lo, hi);
    return x;
}

float *hz_rand_gap(hz *h, size_t n, float amp, float gap)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        float v = (float)hz_unif(h, gap, amp);
        x[i] = next(h) & 1 ? v : -v;
    }
    return x;
}

int32_t *hz_ints(hz *h, size_t n, int32_t below)
{
    int32_t *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (int32_t)(next(h) % (uint64_t)below);
    return x;
}

size_t hz_mark(const hz *h) { return (size_t)h->nblocks; }

void hz_release(hz *h, size_t mark)
{
    while ((size_t)h->nblocks > mark) {
        h->nblocks--;
        rs_status st = h->k->mem_free(h->ctx, NULL, RS_POOL_SCRATCH, h->blocks[h->nblocks], h->sizes[h->nblocks]);
        hz_check(h, st == RS_OK, "mem_free of a %zu-byte block: %s", h->sizes[h->nblocks], h->ctx->err.msg);
    }
}

void *hz_alloc(hz *h, size_t bytes)
{
    if (h->nblocks == h->capblocks) {
        h->capblocks = h->capblocks ? 2 * h->capblocks : 32;
        h->blocks = realloc(h->blocks, (size_t)h->capblocks * sizeof *h->blocks);
        h->sizes = realloc(h->sizes, (size_t)h->capblocks * sizeof *h->sizes);
        if (!h->blocks || !h->sizes) abort(); /* a test out of memory has nothing to report */
    }
    void *p = NULL;
    rs_status st = h->k->mem_alloc(h->ctx, NULL, RS_POOL_SCRATCH, bytes, &p);
    if (!hz_check(h, st == RS_OK && p, "mem_alloc of %zu bytes: %s", bytes, h->ctx->err.msg)) abort();
    h->blocks[h->nblocks] = p;
    h->sizes[h->nblocks++] = bytes;
    return p;
}

void *hz_up(hz *h, const void *host, size_t bytes)
{
    void *d = hz_alloc(h, bytes);
    rs_status st = h->k->copy_h2d(h->ctx, d, host, bytes);
    hz_check(h, st == RS_OK, "copy_h2d of %zu bytes: %s", bytes, h->ctx->err.msg);
    return d;
}

void *hz_up_nan(hz *h, size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    void *d = hz_up(h, x, n * sizeof *x);
    free(x);
    return d;
}

void hz_down(hz *h, void *host, const void *dev, size_t bytes)
{
    rs_status st = h->k->sync(h->ctx);
    if (!st) st = h->k->copy_d2h(h->ctx, host, dev, bytes);
    hz_check(h, st == RS_OK, "sync + copy_d2h of %zu bytes: %s", bytes, h->ctx->err.msg);
}

float *hz_down_new(hz *h, const void *dev, size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    hz_down(h, x, dev, n * sizeof *x);
    return x;
}

static bool close_one(double got, double want, double atol, double rtol)
{
    return fabs(got - want) <= atol + rtol * fabs(want); /* false for NaN */
}

bool hz_close(hz *h, const char *what, const float *got, const float *want, size_t n, double atol, double rtol)
{
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!close_one(got[i], want[i], atol, rtol)) {
            if (!bad++) first = i;
            worst = d > worst || d != d ? d : worst;
        }
    }
    return hz_check(h, !bad,
                    "%s: %zu of %zu values off (first [%zu]: %.9g vs %.9g; worst diff %.3g; tolerance %.1g + %.1g|want|)",
                    what, bad, n, first, bad ? (double)got[first] : 0.0, bad ? (double)want[first] : 0.0, worst, atol,
                    rtol);
}

bool hz_close_d(hz *h, const char *what, const float *got, const double *want, size_t n, double atol, double rtol)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!close_one(got[i], want[i], atol, rtol) && !bad++) first = i;
    return hz_check(h, !bad, "%s: %zu of %zu values off the float64 reference (first [%zu]: %.9g vs %.9g; tolerance "
                    "%.1g + %.1g|want|)", what, bad, n, first, bad ? (double)got[first] : 0.0,
                    bad ? want[first] : 0.0, atol, rtol);
}

void hz_fd(hz *h, const char *what, float *x, size_t n, const float *analytic, double (*loss)(void *ud), void *ud,
           double eps, double atol, double rtol, size_t cap)
{
    size_t step = n / cap + 1, bad = 0, tried = 0, first = 0;
    double fa = 0, fn = 0;
    for (size_t i = 0; i < n; i += step, tried++) {
        float keep = x[i];
        x[i] = keep + (float)eps;
        double lp = loss(ud);
        x[i] = keep - (float)eps;
        double lm = loss(ud);
        x[i] = keep;
        /* the perturbation actually applied, after rounding to float */
        double num = (lp - lm) / ((double)(keep + (float)eps) - (double)(keep - (float)eps));
        if (!close_one(analytic[i], num, atol, rtol) && !bad++) {
            first = i;
            fa = analytic[i];
            fn = num;
        }
    }
    hz_check(h, !bad, "%s: %zu of %zu gradients differ from central differences (first [%zu]: %.6g vs %.6g; eps %g, "
             "tolerance %.1g + %.1g|fd|)", what, bad, tried, first, fa, fn, eps, atol, rtol);
}

bool hz_refused(hz *h, const char *what, rs_status st)
{
    bool recorded = rs_kctx_status(h->ctx) == RS_ERR_ARG && h->ctx->err.msg[0];
    rs_err e;
    rs_status taken = rs_kctx_check(h->ctx, &e);
    return hz_check(h, st == RS_ERR_ARG && recorded && taken == RS_ERR_ARG && rs_kctx_status(h->ctx) == RS_OK,
                    "%s: expected RS_ERR_ARG with a message in the context, got status %d, context %d '%s'", what,
                    (int)st, (int)taken, e.msg);
}

bool hz_ok(hz *h, const char *what, rs_status st)
{
    rs_err e = {0};
    rs_status pending = rs_kctx_check(h->ctx, &e);
    return hz_check(h, st == RS_OK && pending == RS_OK, "%s: status %d, context '%s'", what, (int)st, e.msg);
}
