/* Harness cases for the layer entries: convolution, pools, layer norm, softmax cross-entropy,
 * embedding and attention. Each forward is checked against a float64 scalar reference written here,
 * each backward against central differences of its forward on the table under test, and both against
 * the CPU reference. Tolerances (|got - want| <= atol + rtol |want|): 1e-4 + 1e-4 against the CPU and
 * against float64 (sums of up to a few hundred terms); differences with eps 1e-2 and 2e-3 + 1e-2 |fd|,
 * as tests/engine/nn/test_gradcheck.c (smooth kernels are exact to O(eps^2); a wrong index or a missing
 * term is off by O(1)). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"
#include "harness.h"

#define EPS 1e-2
#define ATOL 2e-3
#define RTOL 1e-2
#define FD_CAP 40

static float *copy_of(const float *x, size_t n)
{
    float *y = malloc((n ? n : 1) * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

/* sum r * y over n values of a device array */
static double dot_down(hz *h, const float *dev, const float *r, size_t n)
{
    float *y = hz_down_new(h, dev, n);
    double L = 0;
    for (size_t i = 0; i < n; i++) L += (double)r[i] * y[i];
    free(y);
    return L;
}

/* ---- convolution ---- */

typedef struct conv_case {
    rs_conv_geom g;
    int B;
} conv_case;

static rs_conv_geom geom(int c, int hh, int w, int oc, int kh, int kw, int sh, int sw, int ph, int pw)
{
    return (rs_conv_geom){c, hh, w, oc, kh, kw, sh, sw, ph, pw, (hh + 2 * ph - kh) / sh + 1,
                          (w + 2 * pw - kw) / sw + 1};
}

static conv_case conv_cases(int i)
{
    switch (i) {
    case 0: return (conv_case){geom(1, 1, 1, 1, 1, 1, 1, 1, 0, 0), 1};
    case 1: return (conv_case){geom(3, 5, 7, 4, 3, 2, 2, 1, 2, 1), 3};
    case 2: return (conv_case){geom(2, 9, 9, 3, 1, 1, 1, 1, 0, 0), 5}; /* pointwise: no im2col */
    default: return (conv_case){geom(3, 17, 17, 5, 3, 3, 1, 1, 1, 1), 4};
    }
}
#define NCONV 4

static size_t in_n(const rs_conv_geom *g, int B) { return (size_t)B * g->c * g->h * g->w; }
static size_t out_n(const rs_conv_geom *g, int B, int ch) { return (size_t)B * ch * g->oh * g->ow; }
static size_t w_n(const rs_conv_geom *g) { return (size_t)g->oc * g->c * g->kh * g->kw; }

static size_t conv_ws(hz *h, const rs_conv_geom *g, int B)
{
    size_t b = 0;
    hz_ok(h, "conv2d_workspace", h->k->conv2d_workspace(h->ctx, g, B, &b));
    return b;
}

/* Direct convolution in float64. */
static void conv_ref(const rs_conv_geom *g, int B, const float *x, const float *w, const float *bias, double *y)
{
    for (int b = 0; b < B; b++)
        for (int o = 0; o < g->oc; o++)
            for (int oy = 0; oy < g->oh; oy++)
                for (int ox = 0; ox < g->ow; ox++) {
                    double s = bias ? bias[o] : 0.0;
                    for (int c = 0; c < g->c; c++)
                        for (int i = 0; i < g->kh; i++)
                            for (int j = 0; j < g->kw; j++) {
                                int iy = oy * g->sh - g->ph + i, ix = ox * g->sw - g->pw + j;
                                if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
                                s += (double)x[(((size_t)b * g->c + c) * g->h + iy) * g->w + ix] *
                                     w[(((size_t)o * g->c + c) * g->kh + i) * g->kw + j];
                            }
                    y[(((size_t)b * g->oc + o) * g->oh + oy) * g->ow + ox] = s;
                }
}

static void case_conv2d_workspace(hz *h)
{
    for (int i = 0; i < NCONV; i++) {
        conv_case c = conv_cases(i);
        size_t b = conv_ws(h, &c.g, c.B);
        hz_check(h, b > 0, "geometry %d, B=%d: workspace of 0 bytes", i, c.B);
        /* exactly that many bytes are enough; one float fewer is refused */
        size_t mark = hz_mark(h);
        float *x = hz_alloc(h, in_n(&c.g, c.B) * 4), *w = hz_alloc(h, w_n(&c.g) * 4);
        float *y = hz_alloc(h, out_n(&c.g, c.B, c.g.oc) * 4), *ws = hz_alloc(h, b);
        hz_ok(h, "conv2d_fwd with the workspace asked for",
              h->k->conv2d_fwd(h->ctx, &c.g, c.B, x, w, NULL, y, ws, b));
        hz_refused(h, "conv2d_fwd with 4 bytes less", h->k->conv2d_fwd(h->ctx, &c.g, c.B, x, w, NULL, y, ws, b - 4));
        hz_release(h, mark);
    }
    rs_conv_geom bad = geom(1, 4, 4, 1, 3, 3, 1, 1, 0, 0);
    bad.sh = 0;
    size_t b = 0;
    hz_refused(h, "conv2d_workspace(stride 0)", h->k->conv2d_workspace(h->ctx, &bad, 1, &b));
}

static void case_conv2d_fwd(hz *h)
{
    for (int i = 0; i < NCONV; i++) {
        conv_case c = conv_cases(i);
        const rs_conv_geom *g = &c.g;
        size_t ni = in_n(g, c.B), no = out_n(g, c.B, g->oc), nw = w_n(g), mark = hz_mark(h);
        float *x = hz_rand(h, ni, -1, 1), *w = hz_rand(h, nw, -1, 1), *bias = hz_rand(h, (size_t)g->oc, -1, 1);
        float *r = malloc(no * 4);
        double *want = malloc(no * sizeof *want);
        size_t rb = 0;
        rs_cpu_conv2d_workspace(&h->ref, g, c.B, &rb);
        float *rws = malloc(rb);
        rs_cpu_conv2d_fwd(&h->ref, g, c.B, x, w, bias, r, rws, rb);
        conv_ref(g, c.B, x, w, bias, want);
        size_t wb = conv_ws(h, g, c.B);
        float *dx = hz_up(h, x, ni * 4), *dw = hz_up(h, w, nw * 4), *db = hz_up(h, bias, (size_t)g->oc * 4);
        float *dy = hz_up_nan(h, no), *ws = hz_alloc(h, wb);
        hz_ok(h, "conv2d_fwd", h->k->conv2d_fwd(h->ctx, g, c.B, dx, dw, db, dy, ws, wb));
        float *got = hz_down_new(h, dy, no);
        hz_close(h, "conv2d_fwd vs cpu", got, r, no, 1e-4, 1e-4);
        hz_close_d(h, "conv2d_fwd", got, want, no, 1e-4, 1e-4);
        hz_ok(h, "conv2d_fwd without bias", h->k->conv2d_fwd(h->ctx, g, c.B, dx, dw, NULL, dy, ws, wb));
        conv_ref(g, c.B, x, w, NULL, want);
        hz_down(h, got, dy, no * 4);
        hz_close_d(h, "conv2d_fwd without bias", got, want, no, 1e-4, 1e-4);
        free(x), free(w), free(bias), free(r), free(want), free(rws), free(got);
        hz_release(h, mark);
    }
}

typedef struct conv_fd {
    hz *h;
    const rs_conv_geom *g;
    int B;
    float *x, *w, *bias;
    const float *r;
} conv_fd;

static double conv_loss(void *ud)
{
    conv_fd *f = ud;
    hz *h = f->h;
    const rs_conv_geom *g = f->g;
    size_t no = out_n(g, f->B, g->oc), wb = conv_ws(h, g, f->B), mark = hz_mark(h);
    float *dy = hz_alloc(h, no * 4);
    h->k->conv2d_fwd(h->ctx, g, f->B, hz_up(h, f->x, in_n(g, f->B) * 4), hz_up(h, f->w, w_n(g) * 4),
                     hz_up(h, f->bias, (size_t)g->oc * 4), dy, hz_alloc(h, wb), wb);
    double L = dot_down(h, dy, f->r, no);
    hz_release(h, mark);
    return L;
}

static void case_conv2d_bwd(hz *h)
{
    for (int i = 0; i < NCONV; i++) {
        conv_case c = conv_cases(i);
        const rs_conv_geom *g = &c.g;
        const int oc = g->oc;
        size_t ni = in_n(g, c.B), no = out_n(g, c.B, oc), nw = w_n(g), mark = hz_mark(h);
        float *x = hz_rand(h, ni, -1, 1), *w = hz_rand(h, nw, -1, 1), *bias = hz_rand(h, (size_t)oc, -1, 1);
        float *r = hz_rand(h, no, -1, 1), *dw0 = hz_rand(h, nw, -1, 1), *db0 = hz_rand(h, (size_t)oc, -1, 1);
        /* the CPU reference */
        float *rdx = malloc(ni * 4), *rdw = copy_of(dw0, nw), *rdb = copy_of(db0, (size_t)oc);
        size_t rb = 0;
        rs_cpu_conv2d_workspace(&h->ref, g, c.B, &rb);
        float *rws = malloc(rb);
        rs_cpu_conv2d_bwd(&h->ref, g, c.B, x, w, r, rdx, rdw, rdb, rws, rb);
        /* the table under test: din overwritten, dw and db accumulated */
        size_t wb = conv_ws(h, g, c.B);
        float *ddx = hz_up_nan(h, ni), *ddw = hz_up(h, dw0, nw * 4), *ddb = hz_up(h, db0, (size_t)oc * 4);
        hz_ok(h, "conv2d_bwd", h->k->conv2d_bwd(h->ctx, g, c.B, hz_up(h, x, ni * 4), hz_up(h, w, nw * 4),
                                                hz_up(h, r, no * 4), ddx, ddw, ddb, hz_alloc(h, wb), wb));
        float *gx = hz_down_new(h, ddx, ni), *gw = hz_down_new(h, ddw, nw), *gb = hz_down_new(h, ddb, (size_t)oc);
        hz_close(h, "conv2d_bwd din vs cpu", gx, rdx, ni, 1e-4, 1e-4);
        hz_close(h, "conv2d_bwd dw vs cpu", gw, rdw, nw, 1e-4, 1e-4);
        hz_close(h, "conv2d_bwd db vs cpu", gb, rdb, (size_t)oc, 1e-4, 1e-4);
        for (size_t j = 0; j < nw; j++) gw[j] -= dw0[j];
        for (int j = 0; j < oc; j++) gb[j] -= db0[j];
        conv_fd f = {h, g, c.B, x, w, bias, r};
        hz_fd(h, "conv2d_bwd din", x, ni, gx, conv_loss, &f, EPS, ATOL, RTOL, FD_CAP);
        hz_fd(h, "conv2d_bwd dw", w, nw, gw, conv_loss, &f, EPS, ATOL, RTOL, FD_CAP);
        hz_fd(h, "conv2d_bwd db", bias, (size_t)oc, gb, conv_loss, &f, EPS, ATOL, RTOL, FD_CAP);
        /* din and db are optional */
        float *ddw2 = hz_alloc(h, nw * 4);
        hz_ok(h, "conv2d_bwd without din and db", h->k->conv2d_bwd(h->ctx, g, c.B, hz_up(h, x, ni * 4),
                                                                   hz_up(h, w, nw * 4), hz_up(h, r, no * 4), NULL,
                                                                   ddw2, NULL, hz_alloc(h, wb), wb));
        float *gw2 = hz_down_new(h, ddw2, nw);
        hz_close(h, "conv2d_bwd dw without din", gw2, gw, nw, 1e-4, 1e-4);
        free(x), free(w), free(bias), free(r), free(dw0), free(db0), free(rdx), free(rdw), free(rdb), free(rws);
        free(gx), free(gw), free(gb), free(gw2);
        hz_release(h, mark);
    }
}

/* ---- pools ---- */

static conv_case pool_cases(int i)
{
    switch (i) {
    case 0: return (conv_case){geom(1, 1, 1, 0, 1, 1, 1, 1, 0, 0), 1};
    case 1: return (conv_case){geom(2, 5, 7, 0, 3, 2, 2, 1, 1, 0), 3};
    case 2: return (conv_case){geom(3, 9, 8, 0, 2, 2, 2, 2, 0, 0), 2};  /* the vectorised interior */
    default: return (conv_case){geom(16, 32, 32, 0, 2, 2, 2, 2, 0, 0), 8}; /* 32768 outputs: threads split */
    }
}
#define NPOOL 4

/* Window (b, c, oy, ox) in float64: max (with its flat index in the plane) or mean over kh*kw. */
static double pool_ref(const rs_conv_geom *g, const float *plane, int oy, int ox, bool mx, int32_t *arg)
{
    double m = -FLT_MAX, s = 0;
    *arg = -1;
    for (int i = 0; i < g->kh; i++)
        for (int j = 0; j < g->kw; j++) {
            int iy = oy * g->sh - g->ph + i, ix = ox * g->sw - g->pw + j;
            if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
            float v = plane[iy * g->w + ix];
            s += v;
            if (v > m || *arg < 0) m = v, *arg = iy * g->w + ix;
        }
    return mx ? m : s / (g->kh * g->kw);
}

/* Distinct values 0.05 apart in shuffled order: a perturbation of eps never changes a window's max.
 * (Max pooling only: their range is too wide for a float sum to keep an average's low bits.) */
static float *spaced(hz *h, size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = ((float)i - (float)n / 2) * 0.05f;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)hz_unif(h, 0, (double)i);
        float t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
    return x;
}

static void pool_forward(hz *h, bool mx)
{
    for (int i = 0; i < NPOOL; i++) {
        conv_case c = pool_cases(i);
        const rs_conv_geom *g = &c.g;
        size_t ni = in_n(g, c.B), no = out_n(g, c.B, g->c), mark = hz_mark(h);
        float *x = mx ? spaced(h, ni) : hz_rand(h, ni, -1, 1), *r = malloc(no * 4);
        int32_t *ram = malloc(no * 4), *am = malloc(no * 4), *wam = malloc(no * 4);
        double *want = malloc(no * sizeof *want);
        if (mx) rs_cpu_maxpool_fwd(&h->ref, g, c.B, x, r, ram);
        else rs_cpu_avgpool_fwd(&h->ref, g, c.B, x, r);
        for (int p = 0; p < c.B * g->c; p++)
            for (int oy = 0; oy < g->oh; oy++)
                for (int ox = 0; ox < g->ow; ox++) {
                    size_t o = ((size_t)p * g->oh + oy) * g->ow + ox;
                    want[o] = pool_ref(g, x + (size_t)p * g->h * g->w, oy, ox, mx, &wam[o]);
                }
        float *dx = hz_up(h, x, ni * 4), *dy = hz_up_nan(h, no);
        int32_t *dam = hz_alloc(h, no * 4);
        if (mx) hz_ok(h, "maxpool_fwd", h->k->maxpool_fwd(h->ctx, g, c.B, dx, dy, dam));
        else hz_ok(h, "avgpool_fwd", h->k->avgpool_fwd(h->ctx, g, c.B, dx, dy));
        float *got = hz_down_new(h, dy, no);
        hz_close(h, "pool forward vs cpu", got, r, no, 1e-5, 1e-5);
        hz_close_d(h, "pool forward", got, want, no, 1e-6, 1e-5);
        if (mx) {
            hz_down(h, am, dam, no * 4);
            hz_check(h, !memcmp(am, wam, no * 4) && !memcmp(am, ram, no * 4),
                     "geometry %d: argmax differs from the scan's first maximum", i);
        }
        free(x), free(r), free(ram), free(am), free(wam), free(want), free(got);
        hz_release(h, mark);
    }
    rs_conv_geom bad = geom(1, 4, 4, 0, 0, 2, 2, 2, 0, 0);
    float *d = hz_alloc(h, 64);
    if (mx) hz_refused(h, "maxpool_fwd(kernel 0)", h->k->maxpool_fwd(h->ctx, &bad, 1, d, d + 4, hz_alloc(h, 64)));
    else hz_refused(h, "avgpool_fwd(B=-1)", h->k->avgpool_fwd(h->ctx, &bad, -1, d, d + 4));
}

typedef struct pool_fd {
    hz *h;
    const rs_conv_geom *g;
    int B;
    bool mx;
    float *x;
    const float *r;
} pool_fd;

static double pool_loss(void *ud)
{
    pool_fd *f = ud;
    hz *h = f->h;
    size_t no = out_n(f->g, f->B, f->g->c), mark = hz_mark(h);
    float *dx = hz_up(h, f->x, in_n(f->g, f->B) * 4), *dy = hz_alloc(h, no * 4);
    if (f->mx) h->k->maxpool_fwd(h->ctx, f->g, f->B, dx, dy, hz_alloc(h, no * 4));
    else h->k->avgpool_fwd(h->ctx, f->g, f->B, dx, dy);
    double L = dot_down(h, dy, f->r, no);
    hz_release(h, mark);
    return L;
}

static void pool_backward(hz *h, bool mx)
{
    for (int i = 0; i < NPOOL; i++) {
        conv_case c = pool_cases(i);
        const rs_conv_geom *g = &c.g;
        size_t ni = in_n(g, c.B), no = out_n(g, c.B, g->c), mark = hz_mark(h);
        float *x = mx ? spaced(h, ni) : hz_rand(h, ni, -1, 1), *r = hz_rand(h, no, -1, 1), *y = malloc(no * 4);
        float *ref = malloc(ni * 4);
        int32_t *am = malloc(no * 4);
        if (mx) {
            rs_cpu_maxpool_fwd(&h->ref, g, c.B, x, y, am);
            rs_cpu_maxpool_bwd(&h->ref, g, c.B, r, am, ref);
        } else {
            rs_cpu_avgpool_bwd(&h->ref, g, c.B, r, ref);
        }
        float *dd = hz_up_nan(h, ni), *dr = hz_up(h, r, no * 4);
        if (mx) hz_ok(h, "maxpool_bwd", h->k->maxpool_bwd(h->ctx, g, c.B, dr, hz_up(h, am, no * 4), dd));
        else hz_ok(h, "avgpool_bwd", h->k->avgpool_bwd(h->ctx, g, c.B, dr, dd));
        float *got = hz_down_new(h, dd, ni);
        hz_close(h, "pool backward vs cpu", got, ref, ni, 1e-5, 1e-5);
        pool_fd f = {h, g, c.B, mx, x, r};
        hz_fd(h, "pool backward", x, ni, got, pool_loss, &f, 1e-3, 1e-3, 1e-2, FD_CAP);
        free(x), free(r), free(y), free(ref), free(am), free(got);
        hz_release(h, mark);
    }
    float *d = hz_alloc(h, 64);
    rs_conv_geom g = geom(1, 2, 2, 0, 2, 2, 2, 2, 0, 0);
    if (mx) hz_refused(h, "maxpool_bwd(argmax NULL)", h->k->maxpool_bwd(h->ctx, &g, 1, d, NULL, d + 4));
    else hz_refused(h, "avgpool_bwd(din NULL)", h->k->avgpool_bwd(h->ctx, &g, 1, d, NULL));
}

static void case_maxpool_fwd(hz *h) { pool_forward(h, true); }
static void case_maxpool_bwd(hz *h) { pool_backward(h, true); }
static void case_avgpool_fwd(hz *h) { pool_forward(h, false); }
static void case_avgpool_bwd(hz *h) { pool_backward(h, false); }

/* ---- layer norm ---- */

static const int LN[][2] = {{1, 3}, {3, 17}, {33, 5}, {2, 129}, {300, 129}}; /* last: 38700 values */
#define NLN (sizeof LN / sizeof *LN)

static void case_layernorm_fwd(hz *h)
{
    for (size_t c = 0; c < NLN; c++) {
        int B = LN[c][0], N = LN[c][1];
        size_t n = (size_t)B * N, mark = hz_mark(h);
        float *x = hz_rand(h, n, -2, 2), *ga = hz_rand(h, (size_t)N, 0.5f, 1.5f), *be = hz_rand(h, (size_t)N, -1, 1);
        float *r = malloc(n * 4), *rm = malloc((size_t)B * 4), *rr = malloc((size_t)B * 4);
        double *want = malloc(n * sizeof *want), *wm = malloc((size_t)B * 8), *wr = malloc((size_t)B * 8);
        rs_cpu_layernorm_fwd(&h->ref, x, ga, be, r, rm, rr, B, N, 1e-5f);
        for (int b = 0; b < B; b++) {
            double mu = 0, v = 0;
            for (int j = 0; j < N; j++) mu += x[(size_t)b * N + j];
            mu /= N;
            for (int j = 0; j < N; j++) v += (x[(size_t)b * N + j] - mu) * (x[(size_t)b * N + j] - mu);
            double rs = 1 / sqrt(v / N + 1e-5);
            wm[b] = mu, wr[b] = rs;
            for (int j = 0; j < N; j++) want[(size_t)b * N + j] = (x[(size_t)b * N + j] - mu) * rs * ga[j] + be[j];
        }
        float *dy = hz_up_nan(h, n), *dm = hz_up_nan(h, (size_t)B), *dr = hz_up_nan(h, (size_t)B);
        hz_ok(h, "layernorm_fwd", h->k->layernorm_fwd(h->ctx, hz_up(h, x, n * 4), hz_up(h, ga, (size_t)N * 4),
                                                      hz_up(h, be, (size_t)N * 4), dy, dm, dr, B, N, 1e-5f));
        float *got = hz_down_new(h, dy, n), *gm = hz_down_new(h, dm, (size_t)B), *gr = hz_down_new(h, dr, (size_t)B);
        hz_close(h, "layernorm_fwd vs cpu", got, r, n, 1e-4, 1e-4);
        hz_close(h, "layernorm_fwd rstd vs cpu", gr, rr, (size_t)B, 1e-4, 1e-4);
        hz_close_d(h, "layernorm_fwd", got, want, n, 1e-4, 1e-4);
        hz_close_d(h, "layernorm_fwd mean", gm, wm, (size_t)B, 1e-5, 1e-5);
        hz_close_d(h, "layernorm_fwd rstd", gr, wr, (size_t)B, 1e-4, 1e-4);
        free(x), free(ga), free(be), free(r), free(rm), free(rr), free(want), free(wm), free(wr);
        free(got), free(gm), free(gr);
        hz_release(h, mark);
    }
    float *d = hz_alloc(h, 64);
    hz_refused(h, "layernorm_fwd(N=-3)", h->k->layernorm_fwd(h->ctx, d, d, d, d, d, d, 2, -3, 1e-5f));
}

typedef struct ln_fd {
    hz *h;
    float *x, *ga, *be;
    const float *r;
    int B, N;
} ln_fd;

static double ln_loss(void *ud)
{
    ln_fd *f = ud;
    hz *h = f->h;
    size_t n = (size_t)f->B * f->N, mark = hz_mark(h);
    float *dy = hz_alloc(h, n * 4);
    h->k->layernorm_fwd(h->ctx, hz_up(h, f->x, n * 4), hz_up(h, f->ga, (size_t)f->N * 4),
                        hz_up(h, f->be, (size_t)f->N * 4), dy, hz_alloc(h, (size_t)f->B * 4),
                        hz_alloc(h, (size_t)f->B * 4), f->B, f->N, 1e-5f);
    double L = dot_down(h, dy, f->r, n);
    hz_release(h, mark);
    return L;
}

static void case_layernorm_bwd(hz *h)
{
    for (size_t c = 0; c < NLN; c++) {
        int B = LN[c][0], N = LN[c][1];
        size_t n = (size_t)B * N, nn = (size_t)N, mark = hz_mark(h);
        float *x = hz_rand(h, n, -2, 2), *ga = hz_rand(h, nn, 0.5f, 1.5f), *be = hz_rand(h, nn, -1, 1);
        float *r = hz_rand(h, n, -1, 1), *y = malloc(n * 4), *mu = malloc((size_t)B * 4), *rs = malloc((size_t)B * 4);
        float *g0 = hz_rand(h, nn, -1, 1), *b0 = hz_rand(h, nn, -1, 1);
        float *rdx = malloc(n * 4), *rdg = copy_of(g0, nn), *rdb = copy_of(b0, nn);
        rs_cpu_layernorm_fwd(&h->ref, x, ga, be, y, mu, rs, B, N, 1e-5f);
        rs_cpu_layernorm_bwd(&h->ref, x, ga, mu, rs, r, rdx, rdg, rdb, B, N);
        float *ddx = hz_up_nan(h, n), *ddg = hz_up(h, g0, nn * 4), *ddb = hz_up(h, b0, nn * 4);
        float *dx = hz_up(h, x, n * 4), *dga = hz_up(h, ga, nn * 4), *dmu = hz_up(h, mu, (size_t)B * 4);
        float *drs = hz_up(h, rs, (size_t)B * 4), *dr = hz_up(h, r, n * 4);
        hz_ok(h, "layernorm_bwd", h->k->layernorm_bwd(h->ctx, dx, dga, dmu, drs, dr, ddx, ddg, ddb, B, N));
        float *gx = hz_down_new(h, ddx, n), *gg = hz_down_new(h, ddg, nn), *gb = hz_down_new(h, ddb, nn);
        hz_close(h, "layernorm_bwd din vs cpu", gx, rdx, n, 1e-4, 1e-4);
        hz_close(h, "layernorm_bwd dgamma vs cpu", gg, rdg, nn, 1e-4, 1e-4);
        hz_close(h, "layernorm_bwd dbeta vs cpu", gb, rdb, nn, 1e-4, 1e-4);
        for (size_t j = 0; j < nn; j++) gg[j] -= g0[j], gb[j] -= b0[j];
        ln_fd f = {h, x, ga, be, r, B, N};
        hz_fd(h, "layernorm_bwd din", x, n, gx, ln_loss, &f, EPS, ATOL, RTOL, FD_CAP);
        hz_fd(h, "layernorm_bwd dgamma", ga, nn, gg, ln_loss, &f, EPS, ATOL, RTOL, FD_CAP);
        hz_fd(h, "layernorm_bwd dbeta", be, nn, gb, ln_loss, &f, EPS, ATOL, RTOL, FD_CAP);
        /* din is optional: the parameter gradients alone */
        float *ddg2 = hz_alloc(h, nn * 4), *ddb2 = hz_alloc(h, nn * 4);
        hz_ok(h, "layernorm_bwd without din",
              h->k->layernorm_bwd(h->ctx, dx, dga, dmu, drs, dr, NULL, ddg2, ddb2, B, N));
        float *gg2 = hz_down_new(h, ddg2, nn);
        hz_close(h, "layernorm_bwd dgamma without din", gg2, gg, nn, 1e-4, 1e-4);
        free(x), free(ga), free(be), free(r), free(y), free(mu), free(rs), free(g0), free(b0), free(rdx), free(rdg);
        free(rdb), free(gx), free(gg), free(gb), free(gg2);
        hz_release(h, mark);
    }
    float *d = hz_alloc(h, 64);
    hz_refused(h, "layernorm_bwd(dgamma NULL)", h->k->layernorm_bwd(h->ctx, d, d, d, d, d, d, NULL, d, 1, 2));
}

/* ---- softmax cross-entropy ---- */

static const int SX[][2] = {{1, 1}, {3, 17}, {33, 5}, {300, 129}};
#define NSX (sizeof SX / sizeof *SX)

static void case_softmax_xent_fwd(hz *h)
{
    for (size_t c = 0; c < NSX; c++) {
        int B = SX[c][0], C = SX[c][1];
        size_t n = (size_t)B * C, mark = hz_mark(h);
        float *z = hz_rand(h, n, -4, 4), *rp = malloc(n * 4), *rl = malloc((size_t)B * 4);
        int32_t *y = hz_ints(h, (size_t)B, C);
        double *wp = malloc(n * sizeof *wp), *wl = malloc((size_t)B * sizeof *wl);
        rs_cpu_softmax_xent_fwd(&h->ref, z, y, rp, rl, B, C);
        for (int b = 0; b < B; b++) {
            const float *zr = z + (size_t)b * C;
            double mx = zr[0], s = 0;
            for (int j = 1; j < C; j++) mx = zr[j] > mx ? zr[j] : mx;
            for (int j = 0; j < C; j++) s += exp(zr[j] - mx);
            for (int j = 0; j < C; j++) wp[(size_t)b * C + j] = exp(zr[j] - mx) / s;
            wl[b] = log(s) + mx - zr[y[b]];
        }
        float *dp = hz_up_nan(h, n), *dl = hz_up_nan(h, (size_t)B);
        hz_ok(h, "softmax_xent_fwd", h->k->softmax_xent_fwd(h->ctx, hz_up(h, z, n * 4), hz_up(h, y, (size_t)B * 4), dp,
                                                            dl, B, C));
        float *gp = hz_down_new(h, dp, n), *gl = hz_down_new(h, dl, (size_t)B);
        hz_close(h, "probs vs cpu", gp, rp, n, 1e-5, 1e-5);
        hz_close(h, "losses vs cpu", gl, rl, (size_t)B, 1e-5, 1e-5);
        hz_close_d(h, "probs", gp, wp, n, 1e-6, 1e-5);
        hz_close_d(h, "losses", gl, wl, (size_t)B, 1e-5, 1e-5);
        free(z), free(rp), free(rl), free(y), free(wp), free(wl), free(gp), free(gl);
        hz_release(h, mark);
    }
    float *d = hz_alloc(h, 64);
    int32_t bad[2] = {0, 7}, *dy = hz_up(h, bad, sizeof bad);
    hz_refused(h, "softmax_xent_fwd(label 7 of 3 classes)", h->k->softmax_xent_fwd(h->ctx, d, dy, d + 8, d + 4, 2, 3));
}

typedef struct sx_fd {
    hz *h;
    float *z;
    const int32_t *y;
    int B, C;
    float scale;
} sx_fd;

/* scale * sum of the per-row losses: what softmax_xent_bwd differentiates */
static double sx_loss(void *ud)
{
    sx_fd *f = ud;
    hz *h = f->h;
    size_t n = (size_t)f->B * f->C, mark = hz_mark(h);
    float *dl = hz_alloc(h, (size_t)f->B * 4);
    h->k->softmax_xent_fwd(h->ctx, hz_up(h, f->z, n * 4), hz_up(h, f->y, (size_t)f->B * 4), hz_alloc(h, n * 4), dl,
                           f->B, f->C);
    float *l = hz_down_new(h, dl, (size_t)f->B);
    double L = 0;
    for (int b = 0; b < f->B; b++) L += l[b];
    free(l);
    hz_release(h, mark);
    return L * f->scale;
}

static void case_softmax_xent_bwd(hz *h)
{
    for (size_t c = 0; c < NSX; c++) {
        int B = SX[c][0], C = SX[c][1];
        size_t n = (size_t)B * C, mark = hz_mark(h);
        float *z = hz_rand(h, n, -4, 4), *p = malloc(n * 4), *l = malloc((size_t)B * 4), *ref = malloc(n * 4);
        int32_t *y = hz_ints(h, (size_t)B, C);
        const float scale = 1.0f / (float)B;
        rs_cpu_softmax_xent_fwd(&h->ref, z, y, p, l, B, C);
        rs_cpu_softmax_xent_bwd(&h->ref, p, y, ref, B, C, scale);
        float *dd = hz_up_nan(h, n);
        hz_ok(h, "softmax_xent_bwd",
              h->k->softmax_xent_bwd(h->ctx, hz_up(h, p, n * 4), hz_up(h, y, (size_t)B * 4), dd, B, C, scale));
        float *got = hz_down_new(h, dd, n);
        hz_close(h, "softmax_xent_bwd vs cpu", got, ref, n, 1e-6, 1e-5);
        sx_fd f = {h, z, y, B, C, scale};
        hz_fd(h, "softmax_xent_bwd", z, n, got, sx_loss, &f, 1e-2, 1e-3, 1e-2, FD_CAP);
        free(z), free(p), free(l), free(ref), free(y), free(got);
        hz_release(h, mark);
    }
    float *d = hz_alloc(h, 64);
    hz_refused(h, "softmax_xent_bwd(C=0)", h->k->softmax_xent_bwd(h->ctx, d, hz_alloc(h, 8), d, 2, 0, 1.0f));
}

/* ---- embedding ---- */

static const int EM[][4] = {{1, 1, 1, 1}, {3, 7, 5, 11}, {2, 17, 33, 9}, {8, 64, 128, 50}}; /* B T C V */
#define NEM (sizeof EM / sizeof *EM)

static void case_embed_fwd(hz *h)
{
    for (size_t c = 0; c < NEM; c++) {
        int B = EM[c][0], T = EM[c][1], C = EM[c][2], V = EM[c][3];
        size_t no = (size_t)B * T * C, nt = (size_t)B * T, mark = hz_mark(h);
        int32_t *tok = hz_ints(h, nt, V);
        float *wte = hz_rand(h, (size_t)V * C, -1, 1), *wpe = hz_rand(h, (size_t)T * C, -1, 1), *r = malloc(no * 4);
        double *want = malloc(no * sizeof *want);
        rs_cpu_embed_fwd(&h->ref, tok, wte, wpe, r, B, T, C);
        for (size_t i = 0; i < nt; i++)
            for (int j = 0; j < C; j++)
                want[i * C + j] = (double)wte[(size_t)tok[i] * C + j] + wpe[(i % (size_t)T) * C + j];
        float *dy = hz_up_nan(h, no);
        hz_ok(h, "embed_fwd", h->k->embed_fwd(h->ctx, hz_up(h, tok, nt * 4), hz_up(h, wte, (size_t)V * C * 4),
                                              hz_up(h, wpe, (size_t)T * C * 4), dy, B, T, C));
        float *got = hz_down_new(h, dy, no);
        hz_close(h, "embed_fwd vs cpu", got, r, no, 1e-6, 1e-6);
        hz_close_d(h, "embed_fwd", got, want, no, 1e-6, 1e-6);
        free(tok), free(wte), free(wpe), free(r), free(want), free(got);
        hz_release(h, mark);
    }
    float *d = hz_alloc(h, 64);
    hz_refused(h, "embed_fwd(T=-1)", h->k->embed_fwd(h->ctx, hz_alloc(h, 8), d, d, d, 1, -1, 2));
}

typedef struct em_fd {
    hz *h;
    const int32_t *tok;
    float *wte, *wpe;
    const float *r;
    int B, T, C, V;
} em_fd;

static double em_loss(void *ud)
{
    em_fd *f = ud;
    hz *h = f->h;
    size_t no = (size_t)f->B * f->T * f->C, mark = hz_mark(h);
    float *dy = hz_alloc(h, no * 4);
    h->k->embed_fwd(h->ctx, hz_up(h, f->tok, (size_t)f->B * f->T * 4), hz_up(h, f->wte, (size_t)f->V * f->C * 4),
                    hz_up(h, f->wpe, (size_t)f->T * f->C * 4), dy, f->B, f->T, f->C);
    double L = dot_down(h, dy, f->r, no);
    hz_release(h, mark);
    return L;
}

static void case_embed_bwd(hz *h)
{
    for (size_t c = 0; c < NEM; c++) {
        int B = EM[c][0], T = EM[c][1], C = EM[c][2], V = EM[c][3];
        size_t no = (size_t)B * T * C, nt = (size_t)B * T, ne = (size_t)V * C, np = (size_t)T * C, mark = hz_mark(h);
        int32_t *tok = hz_ints(h, nt, V);
        float *wte = hz_rand(h, ne, -1, 1), *wpe = hz_rand(h, np, -1, 1), *r = hz_rand(h, no, -1, 1);
        float *e0 = hz_rand(h, ne, -1, 1), *p0 = hz_rand(h, np, -1, 1), *re = copy_of(e0, ne), *rp = copy_of(p0, np);
        rs_cpu_embed_bwd(&h->ref, tok, r, re, rp, B, T, C);
        float *de = hz_up(h, e0, ne * 4), *dp = hz_up(h, p0, np * 4);
        hz_ok(h, "embed_bwd", h->k->embed_bwd(h->ctx, hz_up(h, tok, nt * 4), hz_up(h, r, no * 4), de, dp, B, T, C));
        float *ge = hz_down_new(h, de, ne), *gp = hz_down_new(h, dp, np);
        hz_close(h, "embed_bwd dwte vs cpu", ge, re, ne, 1e-5, 1e-5);
        hz_close(h, "embed_bwd dwpe vs cpu", gp, rp, np, 1e-5, 1e-5);
        for (size_t j = 0; j < ne; j++) ge[j] -= e0[j];
        for (size_t j = 0; j < np; j++) gp[j] -= p0[j];
        em_fd f = {h, tok, wte, wpe, r, B, T, C, V};
        hz_fd(h, "embed_bwd dwte", wte, ne, ge, em_loss, &f, EPS, ATOL, RTOL, FD_CAP);
        hz_fd(h, "embed_bwd dwpe", wpe, np, gp, em_loss, &f, EPS, ATOL, RTOL, FD_CAP);
        free(tok), free(wte), free(wpe), free(r), free(e0), free(p0), free(re), free(rp), free(ge), free(gp);
        hz_release(h, mark);
    }
    float *d = hz_alloc(h, 64);
    hz_refused(h, "embed_bwd(dwpe NULL)", h->k->embed_bwd(h->ctx, hz_alloc(h, 8), d, d, NULL, 1, 1, 2));
}

/* ---- attention ---- */

static const int AT[][4] = {{1, 1, 4, 1}, {3, 7, 12, 3}, {2, 33, 10, 2}, {2, 40, 32, 4}}; /* B T C NH */
#define NAT (sizeof AT / sizeof *AT)

/* Causal attention in float64: out (B,T,C) from qkv (B,T,3C). */
static void attn_ref(const float *qkv, double *out, int B, int T, int C, int NH)
{
    int hs = C / NH;
    double *w = malloc((size_t)T * sizeof *w);
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < NH; hh++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + (size_t)hh * hs;
                double mx = -INFINITY, s = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * 3 * C + C + (size_t)hh * hs;
                    double d = 0;
                    for (int i = 0; i < hs; i++) d += (double)q[i] * k[i];
                    w[u] = d / sqrt((double)hs);
                    mx = w[u] > mx ? w[u] : mx;
                }
                for (int u = 0; u <= t; u++) s += (w[u] = exp(w[u] - mx));
                for (int i = 0; i < hs; i++) {
                    double acc = 0;
                    for (int u = 0; u <= t; u++)
                        acc += w[u] / s * qkv[((size_t)b * T + u) * 3 * C + 2 * C + (size_t)hh * hs + i];
                    out[((size_t)b * T + t) * C + (size_t)hh * hs + i] = acc;
                }
            }
    free(w);
}

static size_t attn_ws(hz *h, int B, int T, int C, int NH)
{
    size_t b = 0;
    hz_ok(h, "attn_workspace", h->k->attn_workspace(h->ctx, B, T, C, NH, &b));
    return b;
}

static void case_attn_fwd(hz *h)
{
    for (size_t c = 0; c < NAT; c++) {
        int B = AT[c][0], T = AT[c][1], C = AT[c][2], NH = AT[c][3];
        size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T, mark = hz_mark(h);
        float *qkv = hz_rand(h, nq, -1.5f, 1.5f), *r = malloc(no * 4), *ra = malloc(na * 4);
        double *want = malloc(no * sizeof *want);
        rs_cpu_attn_fwd(&h->ref, qkv, r, ra, B, T, C, NH);
        attn_ref(qkv, want, B, T, C, NH);
        float *dy = hz_up_nan(h, no), *da = hz_up_nan(h, na);
        hz_ok(h, "attn_fwd", h->k->attn_fwd(h->ctx, hz_up(h, qkv, nq * 4), dy, da, B, T, C, NH));
        float *got = hz_down_new(h, dy, no), *ga = hz_down_new(h, da, na);
        hz_close(h, "attn_fwd vs cpu", got, r, no, 1e-4, 1e-4);
        hz_close(h, "attn_fwd probabilities vs cpu", ga, ra, na, 1e-5, 1e-4);
        hz_close_d(h, "attn_fwd", got, want, no, 1e-4, 1e-4);
        free(qkv), free(r), free(ra), free(want), free(got), free(ga);
        hz_release(h, mark);
    }
    float *d = hz_alloc(h, 64);
    hz_refused(h, "attn_fwd(C=10, NH=3)", h->k->attn_fwd(h->ctx, d, d, d, 1, 1, 10, 3));
}

static void case_attn_workspace(hz *h)
{
    for (size_t c = 0; c < NAT; c++) {
        int B = AT[c][0], T = AT[c][1], C = AT[c][2], NH = AT[c][3];
        size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T, mark = hz_mark(h);
        size_t b = attn_ws(h, B, T, C, NH);
        hz_check(h, b >= (size_t)T * T * 4, "B=%d T=%d: %zu bytes cannot hold one (T, T) block", B, T, b);
        float *q = hz_alloc(h, nq * 4), *a = hz_alloc(h, na * 4), *o = hz_alloc(h, no * 4), *dq = hz_alloc(h, nq * 4);
        float *ws = hz_alloc(h, b);
        hz_ok(h, "attn_bwd with the workspace asked for", h->k->attn_bwd(h->ctx, q, a, o, dq, ws, b, B, T, C, NH));
        hz_refused(h, "attn_bwd with 4 bytes less", h->k->attn_bwd(h->ctx, q, a, o, dq, ws, b - 4, B, T, C, NH));
        hz_release(h, mark);
    }
    size_t b;
    hz_refused(h, "attn_workspace(NH=0)", h->k->attn_workspace(h->ctx, 1, 4, 8, 0, &b));
}

typedef struct at_fd {
    hz *h;
    float *qkv;
    const float *r;
    int B, T, C, NH;
} at_fd;

static double at_loss(void *ud)
{
    at_fd *f = ud;
    hz *h = f->h;
    size_t no = (size_t)f->B * f->T * f->C, mark = hz_mark(h);
    float *dy = hz_alloc(h, no * 4);
    h->k->attn_fwd(h->ctx, hz_up(h, f->qkv, no * 3 * 4), dy, hz_alloc(h, (size_t)f->B * f->NH * f->T * f->T * 4),
                   f->B, f->T, f->C, f->NH);
    double L = dot_down(h, dy, f->r, no);
    hz_release(h, mark);
    return L;
}

static void case_attn_bwd(hz *h)
{
    for (size_t c = 0; c < NAT; c++) {
        int B = AT[c][0], T = AT[c][1], C = AT[c][2], NH = AT[c][3];
        size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T, mark = hz_mark(h);
        float *qkv = hz_rand(h, nq, -1.5f, 1.5f), *r = hz_rand(h, no, -1, 1), *y = malloc(no * 4);
        float *att = malloc(na * 4);
        float *ref = malloc(nq * 4);
        size_t rb = 0;
        rs_cpu_attn_workspace(&h->ref, B, T, C, NH, &rb);
        float *rws = malloc(rb);
        rs_cpu_attn_fwd(&h->ref, qkv, y, att, B, T, C, NH);
        rs_cpu_attn_bwd(&h->ref, qkv, att, r, ref, rws, rb, B, T, C, NH);
        size_t wb = attn_ws(h, B, T, C, NH);
        float *dd = hz_up_nan(h, nq);
        hz_ok(h, "attn_bwd", h->k->attn_bwd(h->ctx, hz_up(h, qkv, nq * 4), hz_up(h, att, na * 4), hz_up(h, r, no * 4),
                                            dd, hz_alloc(h, wb), wb, B, T, C, NH));
        float *got = hz_down_new(h, dd, nq);
        hz_close(h, "attn_bwd vs cpu", got, ref, nq, 1e-4, 1e-4);
        at_fd f = {h, qkv, r, B, T, C, NH};
        hz_fd(h, "attn_bwd", qkv, nq, got, at_loss, &f, EPS, ATOL, RTOL, FD_CAP);
        free(qkv), free(r), free(y), free(att), free(ref), free(rws), free(got);
        hz_release(h, mark);
    }
}

/* One query against a cache of len positions; positions past len hold NaN, which must not be read. */
static void case_attn_step(hz *h)
{
    for (size_t c = 0; c < NAT; c++) {
        int B = AT[c][0], T = AT[c][1], C = AT[c][2], NH = AT[c][3], maxT = T + 3;
        size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, mark = hz_mark(h);
        float *qkv = hz_rand(h, nq, -1.5f, 1.5f);
        double *want = malloc(no * sizeof *want);
        attn_ref(qkv, want, B, T, C, NH);
        int lens[3] = {1, (T + 1) / 2, T};
        for (int li = 0; li < 3; li++) {
            int len = lens[li];
            size_t nc = (size_t)B * maxT * C;
            float *kc = malloc(nc * 4), *vc = malloc(nc * 4), *q = malloc((size_t)B * C * 4);
            double *w = malloc((size_t)B * C * sizeof *w);
            for (size_t i = 0; i < nc; i++) kc[i] = vc[i] = NAN;
            for (int b = 0; b < B; b++) {
                for (int s = 0; s < len; s++) {
                    const float *row = qkv + ((size_t)b * T + s) * 3 * C;
                    memcpy(kc + ((size_t)b * maxT + s) * C, row + C, (size_t)C * 4);
                    memcpy(vc + ((size_t)b * maxT + s) * C, row + 2 * C, (size_t)C * 4);
                }
                memcpy(q + (size_t)b * C, qkv + ((size_t)b * T + len - 1) * 3 * C, (size_t)C * 4);
                for (int i = 0; i < C; i++) w[(size_t)b * C + i] = want[((size_t)b * T + len - 1) * C + i];
            }
            float *ref = malloc((size_t)B * C * 4);
            rs_cpu_attn_step(&h->ref, q, kc, vc, ref, B, len, maxT, C, NH);
            float *dy = hz_up_nan(h, (size_t)B * C);
            hz_ok(h, "attn_step", h->k->attn_step(h->ctx, hz_up(h, q, (size_t)B * C * 4), hz_up(h, kc, nc * 4),
                                                  hz_up(h, vc, nc * 4), dy, B, len, maxT, C, NH));
            float *got = hz_down_new(h, dy, (size_t)B * C);
            hz_close(h, "attn_step vs cpu", got, ref, (size_t)B * C, 1e-4, 1e-4);
            hz_close_d(h, "attn_step (row len-1 of attention)", got, w, (size_t)B * C, 1e-4, 1e-4);
            free(kc), free(vc), free(q), free(w), free(ref), free(got);
        }
        free(qkv), free(want);
        hz_release(h, mark);
    }
    float *d = hz_alloc(h, 256);
    hz_refused(h, "attn_step(len past the cache)", h->k->attn_step(h->ctx, d, d, d, d, 1, 5, 4, 4, 1));
}

HZ_CASE(conv2d_workspace, case_conv2d_workspace);
HZ_CASE(conv2d_fwd, case_conv2d_fwd);
HZ_CASE(conv2d_bwd, case_conv2d_bwd);
HZ_CASE(maxpool_fwd, case_maxpool_fwd);
HZ_CASE(maxpool_bwd, case_maxpool_bwd);
HZ_CASE(avgpool_fwd, case_avgpool_fwd);
HZ_CASE(avgpool_bwd, case_avgpool_bwd);
HZ_CASE(layernorm_fwd, case_layernorm_fwd);
HZ_CASE(layernorm_bwd, case_layernorm_bwd);
HZ_CASE(softmax_xent_fwd, case_softmax_xent_fwd);
HZ_CASE(softmax_xent_bwd, case_softmax_xent_bwd);
HZ_CASE(embed_fwd, case_embed_fwd);
HZ_CASE(embed_bwd, case_embed_bwd);
HZ_CASE(attn_fwd, case_attn_fwd);
HZ_CASE(attn_workspace, case_attn_workspace);
HZ_CASE(attn_bwd, case_attn_bwd);
HZ_CASE(attn_step, case_attn_step);
