/* The CPU transformer kernels against independent references written here in double precision:
 * every forward against a naive loop, every backward against central finite differences of the
 * scalar loss sum(out * R) with R random, at odd sizes (T = 1, T = 7, heads of 4 and 5 columns, C not a
 * multiple of 8, row blocks that do not divide T). Also: backward OVERWRITES input gradients (they
 * start as NaN) and ACCUMULATES into parameter gradients (they start random); repeated tokens in the
 * embedding; the decoding step equals the last row of the forward for every prefix length, with NaN
 * in the cache past it; 1 and 2 threads give the same bytes. The test can fail: a reference with the
 * mask left out, the mask off by one, or the scale 1/hs instead of 1/sqrt(hs), must disagree with
 * the kernels by far more than the tolerances. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"
#include "tests/rs_test.h"

/* ---- data ---- */

static rs_kctx kx; /* the kernels' context: 2 threads (set in main) */
static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static double urand(void) /* uniform in [-1, 1) */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static float *frand(size_t n, double amp)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(amp * urand());
    return x;
}

static double *to_double(const float *x, size_t n)
{
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static float *fnan(size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}

/* ---- comparison: max errors always printed, the first mismatches when any ---- */

/* Elements with |got - want| > atol + rtol |want| (NaN counts); prints a summary unless quiet. */
static size_t compare(const char *what, const float *got, const double *want, size_t n, double atol, double rtol,
                      bool quiet)
{
    double max_abs = 0, max_rel = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]), rel = d / (fabs(want[i]) > 1e-3 ? fabs(want[i]) : 1e-3);
        if (!(d <= atol + rtol * fabs(want[i]))) {
            if (!quiet && bad < 5) fprintf(stderr, "    %s[%zu]: got %.9g want %.9g\n", what, i, got[i], want[i]);
            bad++;
        }
        if (d > max_abs || d != d) max_abs = d;
        if (rel > max_rel || rel != rel) max_rel = rel;
    }
    if (!quiet)
        printf("  %-44s n=%-6zu max abs %.2e  max rel %.2e  %s\n", what, n, max_abs, max_rel, bad ? "FAIL" : "ok");
    return bad;
}

static void check_close(const char *what, const float *got, const double *want, size_t n, double atol, double rtol)
{
    size_t bad = compare(what, got, want, n, atol, rtol, false);
    RS_CHECK(bad == 0, "%s: %zu of %zu elements out of tolerance", what, bad, n);
}

/* A deliberately wrong reference must be rejected: proof that the tolerance can see the bug. */
static void check_rejects(const char *what, const float *got, const double *wrong, size_t n, double atol, double rtol)
{
    size_t bad = compare(what, got, wrong, n, atol, rtol, true);
    printf("  %-44s rejected %zu of %zu elements\n", what, bad, n);
    RS_CHECK(bad > 0, "%s: the kernel agrees with a wrong reference: the test cannot see that bug", what);
}

/* ---- central finite differences in double of loss(x) = sum(f(x) * R) ---- */

typedef double (*loss_fn)(const double *x, const void *ctx);

/* g[i] for i in idx[0..ni), x perturbed in place and restored. */
static void fd_grad(loss_fn f, const void *ctx, double *x, const size_t *idx, size_t ni, double *g)
{
    const double h = 1e-5;
    for (size_t j = 0; j < ni; j++) {
        size_t i = idx[j];
        double x0 = x[i];
        x[i] = x0 + h;
        double lp = f(x, ctx);
        x[i] = x0 - h;
        double lm = f(x, ctx);
        x[i] = x0;
        g[j] = (lp - lm) / (2 * h);
    }
}

/* All of [0, n) when n <= cap, else cap indices spread over [0, n) plus both ends. */
static size_t pick_indices(size_t n, size_t cap, size_t *idx)
{
    if (n <= cap) {
        for (size_t i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    idx[0] = 0;
    idx[1] = n - 1;
    for (size_t j = 2; j < cap; j++) idx[j] = (size_t)((urand() + 1.0) * 0.5 * (double)n) % n;
    return cap;
}

/* ---- attention: reference ---- */

enum { REF_OK = 0, REF_NO_MASK = 1, REF_MASK_OFF_BY_ONE = 2, REF_SCALE_1_OVER_HS = 3 };

typedef struct attn_case {
    int B, T, C, NH;
} attn_case;

/* out (B,T,C) from qkv (B,T,3C), naive loops in double; bug != REF_OK builds a wrong reference. */
static void ref_attn(const double *qkv, double *out, int B, int T, int C, int NH, int bug)
{
    const int hs = C / NH;
    const double scale = bug == REF_SCALE_1_OVER_HS ? 1.0 / hs : 1.0 / sqrt((double)hs);
    double *w = malloc((size_t)T * sizeof *w);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                int n = bug == REF_NO_MASK ? T : bug == REF_MASK_OFF_BY_ONE ? (t > 0 ? t : 1) : t + 1;
                double mx = -INFINITY, sum = 0;
                for (int s = 0; s < n; s++) {
                    const double *k = qkv + ((size_t)b * T + s) * 3 * C + C + h * hs;
                    double d = 0;
                    for (int i = 0; i < hs; i++) d += q[i] * k[i];
                    w[s] = d * scale;
                    mx = w[s] > mx ? w[s] : mx;
                }
                for (int s = 0; s < n; s++) sum += (w[s] = exp(w[s] - mx));
                double *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) {
                    double a = 0;
                    for (int s = 0; s < n; s++) a += w[s] * qkv[((size_t)b * T + s) * 3 * C + 2 * C + h * hs + i];
                    o[i] = a / sum;
                }
            }
    free(w);
}

typedef struct attn_loss_ctx {
    attn_case c;
    const double *R;
    double *out;
    int bug;
} attn_loss_ctx;

static double attn_loss(const double *qkv, const void *vctx)
{
    const attn_loss_ctx *x = vctx;
    size_t n = (size_t)x->c.B * x->c.T * x->c.C;
    ref_attn(qkv, x->out, x->c.B, x->c.T, x->c.C, x->c.NH, x->bug);
    double l = 0;
    for (size_t i = 0; i < n; i++) l += x->out[i] * x->R[i];
    return l;
}

/* ---- attention: forward, att, backward ---- */

static void test_attn(attn_case c, size_t fd_cap, bool mutants)
{
    const int B = c.B, T = c.T, C = c.C, NH = c.NH;
    const size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    char what[96];
    printf("attention B=%d T=%d C=%d NH=%d (hs=%d)\n", B, T, C, NH, C / NH);

    float *qkv = frand(nqkv, 1.5), *out = fnan(nout), *att = fnan(natt), *dout = frand(nout, 1.0);
    double *qkvd = to_double(qkv, nqkv), *outd = malloc(nout * sizeof *outd), *R = to_double(dout, nout);
    rs_cpu_attn_fwd(&kx, qkv, out, att, B, T, C, NH);
    ref_attn(qkvd, outd, B, T, C, NH, REF_OK);
    snprintf(what, sizeof what, "attn_fwd out");
    check_close(what, out, outd, nout, 2e-6, 1e-5);

    /* att: rows sum to 1 over s <= t, exact zeros above the diagonal, and equal to the reference */
    size_t above = 0;
    double worst_sum = 0, *attd = malloc(natt * sizeof *attd);
    const int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *row = att + (((size_t)b * NH + h) * T + t) * T;
                double *rd = attd + (((size_t)b * NH + h) * T + t) * T, sum = 0, mx = -INFINITY;
                for (int s = 0; s < T; s++) {
                    if (s > t && row[s] != 0.0f) above++;
                    if (s <= t) sum += row[s];
                }
                worst_sum = fmax(worst_sum, fabs(sum - 1.0));
                const double *q = qkvd + ((size_t)b * T + t) * 3 * C + h * hs;
                for (int s = 0; s < T; s++) {
                    double d = 0;
                    const double *k = qkvd + ((size_t)b * T + s) * 3 * C + C + h * hs;
                    for (int i = 0; i < hs; i++) d += q[i] * k[i];
                    rd[s] = s <= t ? d / sqrt((double)hs) : 0.0;
                    if (s <= t) mx = fmax(mx, rd[s]);
                }
                double z = 0;
                for (int s = 0; s <= t; s++) z += (rd[s] = exp(rd[s] - mx));
                for (int s = 0; s <= t; s++) rd[s] /= z;
            }
    RS_CHECK(above == 0, "att: %zu non-zero entries above the diagonal", above);
    RS_CHECK(worst_sum < 1e-5, "att: a row sums to 1 %+.3g", worst_sum);
    check_close("attn_fwd att", att, attd, natt, 1e-6, 1e-5);

    if (mutants) {
        double *wrong = malloc(nout * sizeof *wrong);
        static const char *names[] = {"", "reference without the mask", "reference with the mask off by one",
                                      "reference scaled by 1/hs"};
        for (int bug = REF_NO_MASK; bug <= REF_SCALE_1_OVER_HS; bug++) {
            if (bug == REF_MASK_OFF_BY_ONE && T < 2) continue;
            if (bug == REF_SCALE_1_OVER_HS && hs == 1) continue;
            ref_attn(qkvd, wrong, B, T, C, NH, bug);
            check_rejects(names[bug], out, wrong, nout, 2e-6, 1e-5);
        }
        free(wrong);
    }

    /* backward: dqkv starts as NaN and must be overwritten */
    float *dqkv = fnan(nqkv);
    size_t wsb = 0;
    rs_cpu_attn_workspace(&kx, B, T, C, NH, &wsb);
    float *ws = fnan(wsb / sizeof(float)); /* exact size: ASan sees an overrun */
    RS_CHECK(rs_cpu_attn_bwd(&kx, qkv, att, dout, dqkv, ws, wsb, B, T, C, NH) == RS_OK, "attn_bwd: %s",
             kx.err.msg);

    size_t *idx = calloc(nqkv, sizeof *idx);
    size_t ni = pick_indices(nqkv, fd_cap, idx);
    double *g = malloc(ni * sizeof *g);
    float *got = malloc(ni * sizeof *got);
    attn_loss_ctx ctx = {c, R, malloc(nout * sizeof(double)), REF_OK};
    fd_grad(attn_loss, &ctx, qkvd, idx, ni, g);
    for (size_t j = 0; j < ni; j++) got[j] = dqkv[idx[j]];
    snprintf(what, sizeof what, "attn_bwd dqkv vs finite differences%s", ni < nqkv ? " (sampled)" : "");
    check_close(what, got, g, ni, 2e-5, 1e-4);
    size_t nonfinite = 0;
    for (size_t i = 0; i < nqkv; i++) nonfinite += !isfinite(dqkv[i]);
    RS_CHECK(nonfinite == 0, "attn_bwd: %zu elements of dqkv not written (still NaN)", nonfinite);

    if (mutants) { /* the gradient of a wrong forward must be told apart too */
        for (int bug = REF_NO_MASK; bug <= REF_SCALE_1_OVER_HS; bug += 2) {
            ctx.bug = bug;
            fd_grad(attn_loss, &ctx, qkvd, idx, ni, g);
            check_rejects(bug == REF_NO_MASK ? "gradient of the reference without the mask"
                                             : "gradient of the reference scaled by 1/hs",
                          got, g, ni, 2e-5, 1e-4);
        }
    }

    free(ctx.out);
    free(idx);
    free(g);
    free(got);
    free(dqkv);
    free(ws);
    free(attd);
    free(qkv);
    free(out);
    free(att);
    free(dout);
    free(qkvd);
    free(outd);
    free(R);
}

/* ---- decoding step: row len-1 of the forward, for every len, with NaN in the cache past len ---- */

static void test_attn_step(attn_case c, const int *lens, int nlens)
{
    const int B = c.B, T = c.T, C = c.C, NH = c.NH, maxT = T + 3;
    const size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C;
    printf("attn_step B=%d T=%d C=%d NH=%d maxT=%d\n", B, T, C, NH, maxT);
    float *qkv = frand(nqkv, 1.5), *out = malloc(nout * sizeof *out), *att = malloc((size_t)B * NH * T * T * 4);
    rs_cpu_attn_fwd(&kx, qkv, out, att, B, T, C, NH);
    float *q = malloc((size_t)B * C * sizeof *q), *so = fnan((size_t)B * C);
    float *kc = fnan((size_t)B * maxT * C), *vc = fnan((size_t)B * maxT * C);
    double *want = malloc((size_t)B * C * sizeof *want), worst = 0;
    size_t bad = 0;
    int all = nlens == 0 ? T : nlens;
    for (int li = 0; li < all; li++) {
        int len = nlens == 0 ? li + 1 : lens[li];
        for (int b = 0; b < B; b++) { /* the caller writes row len-1 of the cache, then steps */
            const float *row = qkv + ((size_t)b * T + len - 1) * 3 * C;
            memcpy(q + (size_t)b * C, row, C * sizeof *q);
            memcpy(kc + ((size_t)b * maxT + len - 1) * C, row + C, C * sizeof *kc);
            memcpy(vc + ((size_t)b * maxT + len - 1) * C, row + 2 * C, C * sizeof *vc);
            for (int i = 0; i < C; i++) want[(size_t)b * C + i] = out[((size_t)b * T + len - 1) * C + i];
        }
        if (nlens) /* jumps: fill every row below len */
            for (int b = 0; b < B; b++)
                for (int s = 0; s < len; s++) {
                    const float *row = qkv + ((size_t)b * T + s) * 3 * C;
                    memcpy(kc + ((size_t)b * maxT + s) * C, row + C, C * sizeof *kc);
                    memcpy(vc + ((size_t)b * maxT + s) * C, row + 2 * C, C * sizeof *vc);
                }
        rs_cpu_attn_step(&kx, q, kc, vc, so, B, len, maxT, C, NH);
        for (size_t i = 0; i < (size_t)B * C; i++) {
            double d = fabs(so[i] - want[i]);
            if (!(d <= 2e-6 + 1e-5 * fabs(want[i]))) {
                if (bad < 5) fprintf(stderr, "    len %d: out[%zu] got %.9g want %.9g\n", len, i, so[i], want[i]);
                bad++;
            }
            if (d > worst || d != d) worst = d;
        }
    }
    printf("  %-44s %d lengths, max abs %.2e  %s\n", "attn_step vs attn_fwd's row len-1", all, worst,
           bad ? "FAIL" : "ok");
    RS_CHECK(bad == 0, "attn_step: %zu elements differ from attn_fwd's last row", bad);
    free(qkv);
    free(out);
    free(att);
    free(q);
    free(so);
    free(kc);
    free(vc);
    free(want);
}

/* ---- embedding ---- */

typedef struct embed_ctx {
    const int32_t *tok;
    const double *R;
    int B, T, C, V;
} embed_ctx;

/* x = [wte (V,C) | wpe (T,C)] */
static double embed_loss(const double *x, const void *vctx)
{
    const embed_ctx *e = vctx;
    const double *wte = x, *wpe = x + (size_t)e->V * e->C;
    double l = 0;
    for (int b = 0; b < e->B; b++)
        for (int t = 0; t < e->T; t++)
            for (int c = 0; c < e->C; c++) {
                size_t r = (size_t)b * e->T + t;
                l += (wte[(size_t)e->tok[r] * e->C + c] + wpe[(size_t)t * e->C + c]) * e->R[r * e->C + c];
            }
    return l;
}

static void test_embed(int B, int T, int C, int V)
{
    printf("embedding B=%d T=%d C=%d V=%d\n", B, T, C, V);
    const size_t n = (size_t)B * T, nte = (size_t)V * C, npe = (size_t)T * C;
    int32_t *tok = malloc(n * sizeof *tok);
    for (size_t r = 0; r < n; r++) tok[r] = (int32_t)((urand() + 1.0) * 0.5 * (V - 1) + 0.5);
    if (n >= 3) tok[n - 1] = tok[n - 2] = tok[0]; /* the same token three times at least */
    float *wte = frand(nte, 1.0), *wpe = frand(npe, 1.0), *out = fnan(n * C), *dout = frand(n * C, 1.0);
    double *want = malloc(n * C * sizeof *want);
    for (size_t r = 0; r < n; r++)
        for (int c = 0; c < C; c++)
            want[r * C + c] = (double)wte[(size_t)tok[r] * C + c] + wpe[(r % T) * C + c];
    rs_cpu_embed_fwd(&kx, tok, wte, wpe, out, B, T, C);
    check_close("embed_fwd", out, want, n * C, 1e-6, 1e-6);

    /* gradients accumulate onto what is there */
    float *dwte = frand(nte, 1.0), *dwpe = frand(npe, 1.0);
    double *x = malloc((nte + npe) * sizeof *x), *g = malloc((nte + npe) * sizeof *g), *R = to_double(dout, n * C);
    for (size_t i = 0; i < nte; i++) x[i] = wte[i];
    for (size_t i = 0; i < npe; i++) x[nte + i] = wpe[i];
    size_t *idx = malloc((nte + npe) * sizeof *idx);
    for (size_t i = 0; i < nte + npe; i++) idx[i] = i;
    embed_ctx ctx = {tok, R, B, T, C, V};
    fd_grad(embed_loss, &ctx, x, idx, nte + npe, g);
    for (size_t i = 0; i < nte; i++) g[i] += dwte[i];
    for (size_t i = 0; i < npe; i++) g[nte + i] += dwpe[i];
    rs_cpu_embed_bwd(&kx, tok, dout, dwte, dwpe, B, T, C);
    check_close("embed_bwd dwte (+=, repeated tokens)", dwte, g, nte, 2e-5, 1e-5);
    check_close("embed_bwd dwpe (+=)", dwpe, g + nte, npe, 2e-5, 1e-5);
    free(tok);
    free(wte);
    free(wpe);
    free(out);
    free(dout);
    free(want);
    free(dwte);
    free(dwpe);
    free(x);
    free(g);
    free(R);
    free(idx);
}

/* ---- tanh GELU and add ---- */

static double ref_gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double ref_gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

typedef struct gelu_ctx {
    const double *R;
    size_t n;
    bool erf_form;
} gelu_ctx;

static double gelu_loss(const double *x, const void *vctx)
{
    const gelu_ctx *e = vctx;
    double l = 0;
    for (size_t i = 0; i < e->n; i++) l += (e->erf_form ? ref_gelu_erf(x[i]) : ref_gelu_tanh(x[i])) * e->R[i];
    return l;
}

static void test_gelu_tanh(void)
{
    const size_t n = 1003; /* odd: the vector loops' tails run */
    printf("gelu_tanh n=%zu over [-12, 12]\n", n);
    float *in = malloc(n * sizeof *in), *out = fnan(n), *dout = frand(n, 1.0), *din = fnan(n);
    for (size_t i = 0; i < n; i++) in[i] = (float)(i < 600 ? -12.0 + 24.0 * (double)i / 599 : 4.0 * urand());
    in[0] = 0.0f;
    in[1] = -0.0f;
    in[2] = 1e-20f;
    double *x = to_double(in, n), *want = malloc(n * sizeof *want), *R = to_double(dout, n);
    for (size_t i = 0; i < n; i++) want[i] = ref_gelu_tanh(x[i]);
    rs_cpu_gelu_tanh_fwd(&kx, in, out, n);
    check_close("gelu_tanh_fwd", out, want, n, 1e-7, 2e-6);
    for (size_t i = 0; i < n; i++) want[i] = ref_gelu_erf(x[i]);
    check_rejects("exact (erf) GELU as the reference", out, want, n, 1e-7, 2e-6);

    size_t *idx = malloc(n * sizeof *idx);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    gelu_ctx ctx = {R, n, false};
    /* the loss is a sum of independent terms, so its finite difference in x[i] needs term i alone */
    for (size_t i = 0; i < n; i++) {
        double h = 1e-5;
        want[i] = (ref_gelu_tanh(x[i] + h) - ref_gelu_tanh(x[i] - h)) / (2 * h) * R[i];
    }
    fd_grad(gelu_loss, &ctx, x, idx, 16, want); /* and the generic route agrees on a few */
    rs_cpu_gelu_tanh_bwd(&kx, in, dout, din, n);
    check_close("gelu_tanh_bwd vs finite differences", din, want, n, 5e-7, 1e-5);
    for (size_t i = 0; i < n; i++) {
        double h = 1e-5;
        want[i] = (ref_gelu_erf(x[i] + h) - ref_gelu_erf(x[i] - h)) / (2 * h) * R[i];
    }
    check_rejects("derivative of the exact (erf) GELU", din, want, n, 5e-7, 1e-5);
    free(in);
    free(out);
    free(dout);
    free(din);
    free(x);
    free(want);
    free(R);
    free(idx);
}

static void test_add(void)
{
    const size_t n = 1001;
    printf("add n=%zu\n", n);
    float *a = frand(n, 3.0), *b = frand(n, 3.0), *out = fnan(n), *a2 = malloc(n * sizeof *a2),
          *b2 = malloc(n * sizeof *b2);
    memcpy(a2, a, n * sizeof *a);
    memcpy(b2, b, n * sizeof *b);
    rs_cpu_add(&kx, a, b, out, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += out[i] != a[i] + b[i];
    rs_cpu_add(&kx, a2, b, a2, n); /* out aliases a */
    for (size_t i = 0; i < n; i++) bad += a2[i] != out[i];
    rs_cpu_add(&kx, a, b2, b2, n); /* out aliases b */
    for (size_t i = 0; i < n; i++) bad += b2[i] != out[i];
    printf("  %-44s %s\n", "add (plain, out == a, out == b)", bad ? "FAIL" : "ok");
    RS_CHECK(bad == 0, "add: %zu elements differ from a + b", bad);
    free(a);
    free(b);
    free(out);
    free(a2);
    free(b2);
}

/* ---- thread count: 1 and 2 threads give the same bytes (sizes large enough to go parallel) ---- */

static void same_bytes(const char *what, const float *x1, const float *x2, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)x1[i] - x2[i]));
    bool same = !memcmp(x1, x2, n * sizeof *x1);
    printf("  %-44s 1 vs 2 threads: %s (max diff %.2e)\n", what, same ? "identical" : "DIFFER", worst);
    RS_CHECK(worst <= 1e-6, "%s: 1 and 2 threads differ by %.3g", what, worst);
}

static void test_threads(void)
{
    const int B = 8, T = 64, C = 128, NH = 4, V = 9, maxT = 80;
    const size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    const size_t ng = (size_t)B * T * 4 * C;
    printf("threads B=%d T=%d C=%d NH=%d\n", B, T, C, NH);
    float *qkv = frand(nqkv, 1.5), *dout = frand(nout, 1.0), *wte = frand((size_t)V * C, 1.0),
          *wpe = frand((size_t)T * C, 1.0), *gin = frand(ng, 4.0), *gd = frand(ng, 1.0);
    float *kc = frand((size_t)B * maxT * C, 1.0), *vc = frand((size_t)B * maxT * C, 1.0);
    int32_t *tok = malloc((size_t)B * T * sizeof *tok);
    for (int r = 0; r < B * T; r++) tok[r] = (int32_t)(r * 7 % V);
    float *out[2], *att[2], *dqkv[2], *step[2], *emb[2], *dwte[2], *dwpe[2], *gf[2], *gb[2];
    for (int k = 0; k < 2; k++) {
        rs_kctx tk; /* contexts of 1 and 2 threads */
        rs_kctx_init(&tk, &rs_cpu_kernels, k + 1, NULL);
        out[k] = fnan(nout);
        att[k] = fnan(natt);
        dqkv[k] = fnan(nqkv);
        step[k] = fnan((size_t)B * C);
        emb[k] = fnan(nout);
        dwte[k] = calloc((size_t)V * C, sizeof(float));
        dwpe[k] = calloc((size_t)T * C, sizeof(float));
        gf[k] = fnan(ng);
        gb[k] = fnan(ng);
        size_t wsb = 0;
        rs_cpu_attn_workspace(&tk, B, T, C, NH, &wsb);
        float *ws = malloc(wsb);
        rs_cpu_attn_fwd(&tk, qkv, out[k], att[k], B, T, C, NH);
        rs_cpu_attn_bwd(&tk, qkv, att[k], dout, dqkv[k], ws, wsb, B, T, C, NH);
        rs_cpu_attn_step(&tk, qkv, kc, vc, step[k], B, maxT - 5, maxT, C, NH);
        rs_cpu_embed_fwd(&tk, tok, wte, wpe, emb[k], B, T, C);
        rs_cpu_embed_bwd(&tk, tok, dout, dwte[k], dwpe[k], B, T, C);
        rs_cpu_gelu_tanh_fwd(&tk, gin, gf[k], ng);
        rs_cpu_gelu_tanh_bwd(&tk, gin, gd, gb[k], ng);
        free(ws);
    }
    same_bytes("attn_fwd out", out[0], out[1], nout);
    same_bytes("attn_fwd att", att[0], att[1], natt);
    same_bytes("attn_bwd dqkv", dqkv[0], dqkv[1], nqkv);
    same_bytes("attn_step", step[0], step[1], (size_t)B * C);
    same_bytes("embed_fwd", emb[0], emb[1], nout);
    same_bytes("embed_bwd dwte", dwte[0], dwte[1], (size_t)V * C);
    same_bytes("embed_bwd dwpe", dwpe[0], dwpe[1], (size_t)T * C);
    { /* and right on 2 threads, with 9 distinct tokens over 512 positions */
        double *rte = calloc((size_t)V * C, sizeof *rte), *rpe = calloc((size_t)T * C, sizeof *rpe);
        for (int r = 0; r < B * T; r++)
            for (int c = 0; c < C; c++) {
                rte[(size_t)tok[r] * C + c] += dout[(size_t)r * C + c];
                rpe[(size_t)(r % T) * C + c] += dout[(size_t)r * C + c];
            }
        check_close("embed_bwd dwte on 2 threads", dwte[1], rte, (size_t)V * C, 2e-5, 1e-5);
        check_close("embed_bwd dwpe on 2 threads", dwpe[1], rpe, (size_t)T * C, 2e-5, 1e-5);
        free(rte);
        free(rpe);
    }
    same_bytes("gelu_tanh_fwd", gf[0], gf[1], ng);
    same_bytes("gelu_tanh_bwd", gb[0], gb[1], ng);
    for (int k = 0; k < 2; k++) {
        free(out[k]);
        free(att[k]);
        free(dqkv[k]);
        free(step[k]);
        free(emb[k]);
        free(dwte[k]);
        free(dwpe[k]);
        free(gf[k]);
        free(gb[k]);
    }
    free(qkv);
    free(dout);
    free(wte);
    free(wpe);
    free(gin);
    free(gd);
    free(kc);
    free(vc);
    free(tok);
}

int main(void)
{
    rs_kctx_init(&kx, &rs_cpu_kernels, 2, NULL);
    /* T = 1; odd T with heads of 4 and 5 columns and C not a multiple of 8; T past one row block (32),
     * not a multiple of it (rows past the last multiple of 16 take the kernels' tail paths); T a
     * multiple of 16; hs = 1. Finite differences on every input up to fd_cap, sampled beyond. */
    test_attn((attn_case){1, 1, 4, 1}, 4096, false); /* one key: every mutant agrees here */
    test_attn((attn_case){3, 7, 12, 3}, 4096, true);
    test_attn((attn_case){2, 7, 10, 2}, 4096, false);
    test_attn((attn_case){3, 7, 20, 4}, 4096, false);
    test_attn((attn_case){2, 45, 24, 3}, 400, true);
    test_attn((attn_case){2, 48, 16, 2}, 400, true); /* T % 16 == 0: every softmax row padded to whole vectors */
    test_attn((attn_case){1, 70, 6, 6}, 400, false);
    test_attn_step((attn_case){3, 7, 12, 3}, NULL, 0);
    test_attn_step((attn_case){2, 40, 20, 4}, NULL, 0);
    /* a cache longer than the step's chunk of keys (128): the running maximum is rescaled */
    static const int long_lens[] = {1, 2, 127, 128, 129, 255, 256, 257, 300};
    test_attn_step((attn_case){1, 300, 8, 2}, long_lens, (int)(sizeof long_lens / sizeof *long_lens));
    test_embed(3, 7, 12, 5);
    test_embed(1, 1, 3, 1);
    test_gelu_tanh();
    test_add();
    test_threads();
    return rs_test_finish("attn_kernels");
}
