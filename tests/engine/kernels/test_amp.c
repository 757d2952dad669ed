/* Mixed precision on the CPU (docs/engine.md "Mixed precision"): the products of a bf16 / fp16 context
 * against a float64 reference over operands rounded by an independent routine (frexp/rint, not the
 * kernel's bit arithmetic or _Float16), the convolution through the same rounding, overflow where fp16
 * overflows and bf16 does not, a small MLP's bf16 gradient against central differences of its fp32
 * forward, the loss scaler's rule, and oneDNN's bf16 matmul against the emulated product it replaces
 * (all transpositions, padded strides, M, N, K in {1, 3, 17, 33, 129}; taken on every product where the
 * CPU has AVX512-BF16). Tolerances:
 *   bf16 gemm: |C - ref| <= 1e-5 * sum_k |a_ik b_kj| (fp32 accumulation order against float64);
 *   fp16 gemm: the same plus one half ulp of the result (the output is rounded to half, and the
 *              accumulation difference may move it across a rounding boundary);
 *   oneDNN vs emulated bf16: 1e-5 (|alpha| sum_k |a_ik b_kj| + |beta c_ij|) (the same bf16 values, the
 *              fp32 additions in another order);
 *   bf16 MLP gradient: ||g_bf16 - g_fd|| <= 2e-2 ||g_fd|| (bf16 keeps 8 bits: 2^-9 relative per operand,
 *              a few of them per product; fp32's own gradient is checked at 1e-3 for scale). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/kernels.h"
#include "engine/cpu/amp.h"
#include "engine/cpu/prof.h"
#include "engine/nn/spec.h"
#include "engine/train/scaler.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

/* Round to a binary format with `bits` significant bits (incl. the leading one), smallest normal
 * exponent emin, largest finite value maxv: nearest, ties to even (rint in the default mode). */
static double round_fmt(double x, int bits, int emin, double maxv)
{
    if (x == 0 || !isfinite(x)) return x;
    int e;
    frexp(x, &e); /* x = f 2^e, 0.5 <= |f| < 1: the leading bit is 2^(e-1) */
    e -= 1;
    if (e < emin) e = emin; /* subnormals: a fixed quantum */
    double q = ldexp(1.0, e - (bits - 1));
    double r = rint(x / q) * q;
    if (fabs(r) > maxv) return copysign(INFINITY, x);
    return r;
}
static double bf16_ref(double x) { return round_fmt(x, 8, -126, 3.3895313892515355e38); }
static double half_ref(double x) { return round_fmt(x, 11, -14, 65504.0); }
static double half_ulp(double x)
{
    int e;
    frexp(fabs(x) > 6.1e-5 ? x : 6.1e-5, &e);
    return ldexp(1.0, e - 1 - 10);
}

static unsigned long long rng = 88172645463325252ull;
static float urand(void) /* [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* One product op(A) op(B), A and B stored with padded leading dimensions, in precision p. */
static void gemm_case(rs_kctx *ctx, rs_prec p, bool ta, bool tb, int M, int N, int K, float beta)
{
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + 3, ldb = bc + 1, ldc = N + 2;
    float *A = malloc(sizeof(float) * (size_t)ar * lda), *B = malloc(sizeof(float) * (size_t)br * ldb);
    float *C = malloc(sizeof(float) * (size_t)M * ldc), *C0 = malloc(sizeof(float) * (size_t)M * ldc);
    for (int i = 0; i < ar * lda; i++) A[i] = urand() * 3.0f;
    for (int i = 0; i < br * ldb; i++) B[i] = urand() * 3.0f;
    for (int i = 0; i < M * ldc; i++) C0[i] = C[i] = urand();
    ctx->prec = p;
    RS_CHECK(ctx->k->gemm(ctx, ta, tb, M, N, K, 0.5f, A, lda, B, ldb, beta, C, ldc) == RS_OK, "gemm %s",
             rs_prec_name(p));
    ctx->prec = RS_PREC_FP32;
    double worst = 0;
    int bad = 0;
    bool differs = false; /* from the product of the unrounded operands */
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, sa = 0, exact = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                double ra = p == RS_PREC_BF16 ? bf16_ref(a) : half_ref(a), rb = p == RS_PREC_BF16 ? bf16_ref(b) : half_ref(b);
                s += ra * rb;
                sa += fabs(ra * rb);
                exact += a * b;
            }
            double prod = 0.5 * s, tol = 1e-5 * 0.5 * sa + 1e-30;
            if (p == RS_PREC_FP16) {
                prod = half_ref(prod);
                tol += half_ulp(prod);
            }
            double want = prod + beta * C0[(size_t)i * ldc + j], got = C[(size_t)i * ldc + j];
            double d = fabs(got - want);
            if (d > worst) worst = d;
            if (d > tol + 1e-6 * fabs(want)) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s ta=%d tb=%d (%d,%d): got %.9g want %.9g (tol %.3g)\n", rs_prec_name(p), ta, tb,
                            i, j, got, want, tol);
            }
            if (fabs(got - (0.5 * exact + beta * C0[(size_t)i * ldc + j])) > 1e-4) differs = true;
        }
    RS_CHECK(bad == 0, "%s gemm ta=%d tb=%d %dx%dx%d beta=%g: %d values off the rounded-operand reference (worst %.3g)",
             rs_prec_name(p), ta, tb, M, N, K, (double)beta, bad, worst);
    if (K >= 8)
        RS_CHECK(differs, "%s gemm %dx%dx%d equals the fp32 product: the operands were not rounded", rs_prec_name(p),
                 M, N, K);
    free(A), free(B), free(C), free(C0);
}

/* Values fp16 cannot hold: a product of 300 x 300 is inf in fp16 (beyond 65504), 90000 in bf16. */
static void overflow_case(rs_kctx *ctx)
{
    float a[2] = {300.0f, 1e-4f}, b[2] = {300.0f, 1e-4f}, c[4];
    ctx->prec = RS_PREC_FP16;
    RS_CHECK(ctx->k->gemm(ctx, false, false, 2, 2, 1, 1.0f, a, 1, b, 2, 0.0f, c, 2) == RS_OK, "fp16 gemm");
    RS_CHECK(isinf(c[0]) && c[0] > 0, "fp16: 300*300 gives %g, want inf (65504 is fp16's largest)", (double)c[0]);
    RS_CHECK(c[3] == 0.0f, "fp16: 1e-4*1e-4 gives %g, want 0 (below fp16's smallest subnormal, 2^-24)", (double)c[3]);
    ctx->prec = RS_PREC_BF16;
    RS_CHECK(ctx->k->gemm(ctx, false, false, 2, 2, 1, 1.0f, a, 1, b, 2, 0.0f, c, 2) == RS_OK, "bf16 gemm");
    RS_CHECK(c[0] == 90000.0f, "bf16: 300*300 gives %g, want 90000 (300 is a bf16 value; bf16 has fp32's range and "
             "the output stays fp32)", (double)c[0]);
    ctx->prec = RS_PREC_FP32;
}

/* The convolution's products round as the gemm's: conv(prec, x, w) == conv(fp32, round(x), round(w)),
 * up to fp32 accumulation order (im2col only copies values). */
static void conv_case(rs_kctx *ctx, rs_prec p)
{
    rs_conv_geom g = {.c = 3, .h = 9, .w = 7, .oc = 5, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1};
    g.oh = (g.h + 2 * g.ph - g.kh) / g.sh + 1, g.ow = (g.w + 2 * g.pw - g.kw) / g.sw + 1;
    int B = 3;
    size_t nin = (size_t)B * g.c * g.h * g.w, nw = (size_t)g.oc * g.c * g.kh * g.kw, nout = (size_t)B * g.oc * g.oh * g.ow;
    float *x = malloc(nin * 4), *w = malloc(nw * 4), *xr = malloc(nin * 4), *wr = malloc(nw * 4);
    float *y = malloc(nout * 4), *yr = malloc(nout * 4), *y32 = malloc(nout * 4);
    for (size_t i = 0; i < nin; i++) x[i] = urand(), xr[i] = (float)(p == RS_PREC_BF16 ? bf16_ref(x[i]) : half_ref(x[i]));
    for (size_t i = 0; i < nw; i++) w[i] = urand(), wr[i] = (float)(p == RS_PREC_BF16 ? bf16_ref(w[i]) : half_ref(w[i]));
    size_t wsb = 0;
    ctx->k->conv2d_workspace(ctx, &g, B, &wsb);
    float *ws = malloc(wsb ? wsb : 4);
    ctx->prec = p;
    RS_CHECK(ctx->k->conv2d_fwd(ctx, &g, B, x, w, NULL, y, ws, wsb) == RS_OK, "conv %s", rs_prec_name(p));
    ctx->prec = RS_PREC_FP32;
    ctx->k->conv2d_fwd(ctx, &g, B, xr, wr, NULL, yr, ws, wsb);
    ctx->k->conv2d_fwd(ctx, &g, B, x, w, NULL, y32, ws, wsb);
    double worst = 0, off32 = 0;
    for (size_t i = 0; i < nout; i++) {
        double want = p == RS_PREC_FP16 ? half_ref(yr[i]) : yr[i];
        double tol = 1e-5 * 27 + (p == RS_PREC_FP16 ? half_ulp(want) : 0);
        double d = fabs(y[i] - want) - tol;
        if (d > worst) worst = d;
        if (fabs(y[i] - y32[i]) > off32) off32 = fabs(y[i] - y32[i]);
    }
    RS_CHECK(worst <= 0, "conv2d %s: off the rounded-operand convolution by %.3g beyond the tolerance", rs_prec_name(p),
             worst);
    RS_CHECK(off32 > 1e-4, "conv2d %s equals fp32's (largest difference %.3g): not rounded", rs_prec_name(p), off32);
    free(x), free(w), free(xr), free(wr), free(y), free(yr), free(y32), free(ws);
}

static double model_loss(rs_model *m, const float *x, const int32_t *y, int B)
{
    const float *lg;
    float l = 0;
    rs_err e = {0};
    if (rs_model_forward(m, x, B, &lg, &e) || rs_model_loss(m, y, B, &l, &e)) fprintf(stderr, "  %s\n", e.msg);
    return l;
}

/* The gradient of a small MLP computed under bf16 against central differences of its fp32 loss. */
static void mlp_gradcheck(void)
{
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse("seq in=12 linear(16) tanh linear(10) tanh linear(5)", "g", rs_device_cpu(), NULL, 7, &m, NULL, &e) == RS_OK, "%s", e.msg);
    if (!m) return;
    const int B = 6;
    float x[6 * 12];
    int32_t y[6];
    for (int i = 0; i < B * 12; i++) x[i] = urand();
    for (int i = 0; i < B; i++) y[i] = i % 5;
    size_t n = rs_model_numel(m);
    float *p = rs_model_params(m);
    double *fd = calloc(n, sizeof *fd), *g[2] = {calloc(n, sizeof(double)), calloc(n, sizeof(double))};
    rs_kctx *kc = rs_model_ctx(m);
    for (int t = 0; t < 2; t++) { /* fp32, then bf16 */
        kc->prec = t ? RS_PREC_BF16 : RS_PREC_FP32;
        rs_model_zero_grad(m);
        model_loss(m, x, y, B);
        rs_model_backward(m, x, y, B, 1.0f);
        RS_CHECK(rs_kctx_check(kc, &e) == RS_OK, "backward: %s", e.msg);
        const float *gr = rs_model_grads(m);
        for (size_t i = 0; i < n; i++) g[t][i] = gr[i];
    }
    kc->prec = RS_PREC_FP32;
    for (size_t i = 0; i < n; i++) {
        float keep = p[i];
        const float h = 1e-2f;
        p[i] = keep + h;
        double lp = model_loss(m, x, y, B);
        p[i] = keep - h;
        double lm = model_loss(m, x, y, B);
        p[i] = keep;
        fd[i] = (lp - lm) / (2.0 * h);
    }
    double d32 = 0, d16 = 0, nf = 0, dd = 0;
    for (size_t i = 0; i < n; i++) {
        d32 += (g[0][i] - fd[i]) * (g[0][i] - fd[i]);
        d16 += (g[1][i] - fd[i]) * (g[1][i] - fd[i]);
        dd += (g[1][i] - g[0][i]) * (g[1][i] - g[0][i]);
        nf += fd[i] * fd[i];
    }
    printf("  MLP 12-16-10-5 (tanh) gradient vs central differences: fp32 rel %.2e, bf16 rel %.2e (bf16 vs fp32 %.2e)\n",
           sqrt(d32 / nf), sqrt(d16 / nf), sqrt(dd / nf));
    RS_CHECK(sqrt(d32 / nf) <= 1e-3, "fp32 gradient off central differences by %.3g (relative)", sqrt(d32 / nf));
    RS_CHECK(sqrt(d16 / nf) <= 2e-2, "bf16 gradient off central differences by %.3g (relative), want <= 2e-2",
             sqrt(d16 / nf));
    RS_CHECK(dd > 0, "bf16 gradient equals fp32's bit for bit: the products were not rounded");
    free(fd), free(g[0]), free(g[1]);
    rs_model_free(m);
}

/* GradScaler.update's rule: backoff on overflow (counted), growth after `window` good steps. */
static void scaler_rule(void)
{
    rs_grad_scaler s;
    rs_grad_scaler_init(&s, true, 0, 3);
    RS_CHECK(s.scale == 65536.0f && s.window == 3, "defaults: scale %g window %d", (double)s.scale, s.window);
    RS_CHECK(rs_grad_scaler_update(&s, true) && rs_grad_scaler_update(&s, true), "finite steps are applied");
    RS_CHECK(!rs_grad_scaler_update(&s, false), "an overflow is skipped");
    RS_CHECK(s.scale == 32768.0f && s.skipped == 1 && s.good == 0, "after a skip: scale %g skipped %lld",
             (double)s.scale, (long long)s.skipped);
    for (int i = 0; i < 3; i++) rs_grad_scaler_update(&s, true);
    RS_CHECK(s.scale == 65536.0f, "3 good steps after the skip double it: %g", (double)s.scale);
    rs_grad_scaler_init(&s, false, 1024, 3);
    RS_CHECK(s.scale == 1.0f && rs_grad_scaler_update(&s, false) && s.skipped == 0, "disabled: nothing skipped");
}

/* The CPU has AVX512-BF16 (the kernel's flags say) and oneDNN is not told to ignore it
 * (ONEDNN_MAX_CPU_ISA, how the fallback is tried here): oneDNN's path must then be taken. */
static bool cpu_has_bf16(void)
{
    if (getenv("ONEDNN_MAX_CPU_ISA") || getenv("DNNL_MAX_CPU_ISA")) return false;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    bool has = false;
    while (f && !has && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) has = strstr(line, " avx512_bf16") != NULL;
    if (f) fclose(f);
    return has;
}

/* oneDNN's bf16 matmul (amp_dnnl.c) against the emulation (amp_gemm.c, the reference) on one product,
 * operands with padded leading dimensions: equal within fp32's accumulation order,
 * |C_dnnl - C_emul| <= 1e-5 (|alpha| sum_k |a_ik b_kj| + |beta c_ij|), and the padding of C untouched.
 * false when oneDNN did not take it. */
static bool dnnl_case(bool ta, bool tb, int M, int N, int K, float alpha, float beta, double *worst)
{
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + 2, ldb = bc + 5, ldc = N + 3;
    size_t nc = (size_t)M * ldc;
    float *A = malloc(sizeof(float) * (size_t)ar * lda), *B = malloc(sizeof(float) * (size_t)br * ldb);
    float *C = malloc(sizeof(float) * nc), *Ce = malloc(sizeof(float) * nc), *C0 = malloc(sizeof(float) * nc);
    for (int i = 0; i < ar * lda; i++) A[i] = urand() * 2.0f;
    for (int i = 0; i < br * ldb; i++) B[i] = urand() * 2.0f;
    for (size_t i = 0; i < nc; i++) C0[i] = C[i] = Ce[i] = urand();
    int r = rs_cpu_bf16_dnnl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    RS_CHECK(r >= 0, "oneDNN bf16 %dx%dx%d failed", M, N, K);
    RS_CHECK(rs_cpu_bf16_emul(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Ce, ldc), "emulated bf16");
    int bad = 0, pad = 0;
    for (int i = 0; i < M && r == 1; i++) {
        for (int j = N; j < ldc; j++) pad += C[(size_t)i * ldc + j] != C0[(size_t)i * ldc + j];
        for (int j = 0; j < N; j++) {
            double sa = 0;
            for (int k = 0; k < K; k++)
                sa += fabs((double)(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                           (double)(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]));
            size_t at = (size_t)i * ldc + j;
            double d = fabs((double)C[at] - (double)Ce[at]), tol = 1e-5 * (fabs(alpha) * sa + fabs(beta * C0[at])) + 1e-30;
            if (d / tol > *worst) *worst = d / tol;
            bad += d > tol;
        }
    }
    RS_CHECK(bad == 0, "oneDNN bf16 ta=%d tb=%d %dx%dx%d alpha=%g beta=%g: %d values off the emulated product", ta, tb, M,
             N, K, (double)alpha, (double)beta, bad);
    RS_CHECK(pad == 0, "oneDNN bf16 %dx%dx%d wrote %d values of C's padding (ldc=%d)", M, N, K, pad, ldc);
    free(A), free(B), free(C), free(Ce), free(C0);
    return r == 1;
}

static void dnnl_vs_emul(void)
{
    static const int d[] = {1, 3, 17, 33, 129};
    const bool want = cpu_has_bf16();
    printf("  bf16 products here: %s\n", rs_cpu_bf16_backend());
    RS_CHECK(!want || strncmp(rs_cpu_bf16_backend(), "oneDNN", 6) == 0,
             "the CPU has AVX512-BF16, yet bf16 products are %s", rs_cpu_bf16_backend());
    int taken = 0, cases = 0, c = 0;
    double worst = 0;
    for (int m = 0; m < 5; m++)
        for (int n = 0; n < 5; n++)
            for (int k = 0; k < 5; k++, c++)
                for (int tr = 0; tr < 4; tr++, cases++) {
                    float alpha = c % 2 ? 0.5f : 1.0f, beta = c % 3 == 0 ? 0.0f : c % 3 == 1 ? 1.0f : -0.5f;
                    taken += dnnl_case(tr & 1, tr & 2, d[m], d[n], d[k], alpha, beta, &worst);
                }
    /* the per-head products of attention run inside a parallel region: one team thread each */
    int fail = 0;
#pragma omp parallel num_threads(2) reduction(+ : fail)
    {
        double w = 0;
        int id = omp_get_thread_num();
        fail += !dnnl_case(id & 1, true, 33, 17 + id, 129, 0.25f, 1.0f, &w) && want;
    }
    printf("  oneDNN vs emulated bf16: %d of %d products on oneDNN, worst %.2f of the tolerance\n", taken, cases, worst);
    RS_CHECK(!want || taken == cases, "the CPU has AVX512-BF16 but oneDNN took %d of %d products", taken, cases);
    RS_CHECK(fail == 0, "oneDNN bf16 inside a parallel region: %d products not taken", fail);
    /* the profiler counts a oneDNN product as it counts an sgemm */
    rs_cpu_prof_enable(true);
    rs_cpu_prof_reset();
    bool took = dnnl_case(false, false, 3, 17, 33, 1.0f, 0.0f, &worst);
    rs_cpu_prof rec;
    rs_cpu_prof_read(&rec);
    rs_cpu_prof_enable(false);
    RS_CHECK(!took || (rec.gemm_calls == 2 && rec.gemm_flops == 2.0 * 2 * 3 * 17 * 33),
             "profiler after one oneDNN and one emulated product: %llu calls, %g flops (want 2, %d)",
             (unsigned long long)rec.gemm_calls, rec.gemm_flops, 2 * 2 * 3 * 17 * 33);
}

int main(void)
{
    rs_kctx ctx;
    rs_err e = {0};
    RS_CHECK(rs_kctx_init(&ctx, &rs_cpu_kernels, 1, &e) == RS_OK, "%s", e.msg);
    rs_prec p;
    RS_CHECK(rs_prec_parse("bf16", &p) && p == RS_PREC_BF16 && !rs_prec_parse("fp8", &p), "rs_prec_parse");
    static const int sz[][3] = {{1, 1, 1}, {3, 17, 5}, {17, 3, 33}, {33, 129, 17}, {64, 40, 96}, {129, 97, 129}};
    for (int t = 1; t <= 2; t++)
        for (int th = 1; th <= 2; th++) {
            rs_kctx_set_threads(&ctx, th);
            for (size_t s = 0; s < sizeof sz / sizeof *sz; s++)
                for (int tr = 0; tr < 4; tr++)
                    gemm_case(&ctx, (rs_prec)t, tr & 1, tr & 2, sz[s][0], sz[s][1], sz[s][2], s % 2 ? 1.0f : 0.0f);
            conv_case(&ctx, (rs_prec)t);
        }
    rs_kctx_set_threads(&ctx, 1);
    overflow_case(&ctx);
    mlp_gradcheck();
    scaler_rule();
    dnnl_vs_emul();
    return rs_test_finish("engine-amp");
}
