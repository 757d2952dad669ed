/* Harness cases for the dense entries: fill, axpy, scale, gemm, the bias pair, the elementwise
 * activations, dropout, add and the two optimizer updates.
 * Tolerances (|got - want| <= atol + rtol |want|):
 *   against the CPU reference: 1e-5 + 1e-5 (elementwise), 1e-4 + 1e-4 (products, sums over K);
 *   against float64 scalar references: 2e-6 + 2e-5 (elementwise; rs_vexpf is within 2 ulp),
 *   1e-4 + 1e-4 (products of up to 129 terms in [-1, 1]);
 *   backward against central differences of the forward: eps 1e-3, 1e-3 + 1e-2 |fd| (elementwise:
 *   the other elements cancel exactly between L+ and L-, so only the curvature term O(eps^2) is left). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"
#include "harness.h"

/* Odd sizes, and one past the kernels' parallel threshold (32768) so 2 threads split the work. */
static const size_t SIZES[] = {1, 3, 17, 33, 129, 33001};
#define NSIZES (sizeof SIZES / sizeof *SIZES)

/* ---- fill, axpy, scale, add ---- */

static void case_fill(hz *h)
{
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s], mark = hz_mark(h);
        float *d = hz_up_nan(h, n);
        for (int z = 0; z < 2; z++) {
            float v = z ? 0.0f : -2.5f; /* 0 takes the memset path */
            hz_ok(h, "fill", h->k->fill(h->ctx, d, n, v));
            float *got = hz_down_new(h, d, n);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += got[i] != v;
            hz_check(h, !bad, "fill(%g) of %zu: %zu wrong", (double)v, n, bad);
            free(got);
        }
        hz_release(h, mark);
    }
    hz_refused(h, "fill(NULL, 3)", h->k->fill(h->ctx, NULL, 3, 1.0f));
}

/* y = a x + y (axpy), x = a x (scale), out = a + b (add): float64 references. */
static void case_axpy(hz *h)
{
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s], mark = hz_mark(h);
        float *x = hz_rand(h, n, -1, 1), *y = hz_rand(h, n, -1, 1), *ry = malloc(n * sizeof *ry);
        double *want = malloc(n * sizeof *want);
        memcpy(ry, y, n * sizeof *y);
        rs_cpu_axpy(&h->ref, ry, x, n, 0.75f);
        for (size_t i = 0; i < n; i++) want[i] = (double)y[i] + 0.75 * x[i];
        float *dy = hz_up(h, y, n * sizeof *y), *dx = hz_up(h, x, n * sizeof *x);
        hz_ok(h, "axpy", h->k->axpy(h->ctx, dy, dx, n, 0.75f));
        float *got = hz_down_new(h, dy, n);
        hz_close(h, "axpy vs cpu", got, ry, n, 1e-5, 1e-5);
        hz_close_d(h, "axpy", got, want, n, 2e-6, 2e-5);
        free(x), free(y), free(ry), free(want), free(got);
        hz_release(h, mark);
    }
    hz_refused(h, "axpy(x NULL)", h->k->axpy(h->ctx, hz_alloc(h, 16), NULL, 4, 1.0f));
}

static void case_scale(hz *h)
{
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s], mark = hz_mark(h);
        float *x = hz_rand(h, n, -1, 1), *rx = malloc(n * sizeof *rx);
        double *want = malloc(n * sizeof *want);
        memcpy(rx, x, n * sizeof *x);
        rs_cpu_scale(&h->ref, rx, n, -1.25f);
        for (size_t i = 0; i < n; i++) want[i] = -1.25 * x[i];
        float *dx = hz_up(h, x, n * sizeof *x);
        hz_ok(h, "scale", h->k->scale(h->ctx, dx, n, -1.25f));
        float *got = hz_down_new(h, dx, n);
        hz_close(h, "scale vs cpu", got, rx, n, 1e-5, 1e-5);
        hz_close_d(h, "scale", got, want, n, 2e-6, 2e-5);
        free(x), free(rx), free(want), free(got);
        hz_release(h, mark);
    }
    hz_refused(h, "scale(NULL, 2)", h->k->scale(h->ctx, NULL, 2, 1.0f));
}

static void case_add(hz *h)
{
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s], mark = hz_mark(h);
        float *a = hz_rand(h, n, -1, 1), *b = hz_rand(h, n, -1, 1), *r = malloc(n * sizeof *r);
        double *want = malloc(n * sizeof *want);
        rs_cpu_add(&h->ref, a, b, r, n);
        for (size_t i = 0; i < n; i++) want[i] = (double)a[i] + b[i];
        float *da = hz_up(h, a, n * sizeof *a), *db = hz_up(h, b, n * sizeof *b), *dout = hz_up_nan(h, n);
        hz_ok(h, "add", h->k->add(h->ctx, da, db, dout, n));
        float *got = hz_down_new(h, dout, n);
        hz_close(h, "add vs cpu", got, r, n, 1e-5, 1e-5);
        hz_close_d(h, "add", got, want, n, 2e-6, 2e-5);
        hz_ok(h, "add (out aliases a)", h->k->add(h->ctx, da, db, da, n));
        hz_down(h, got, da, n * sizeof *got);
        hz_close_d(h, "add with out == a", got, want, n, 2e-6, 2e-5);
        free(a), free(b), free(r), free(want), free(got);
        hz_release(h, mark);
    }
    hz_refused(h, "add(b NULL)", h->k->add(h->ctx, hz_alloc(h, 8), NULL, hz_alloc(h, 8), 2));
}

/* ---- gemm ---- */

static void case_gemm(hz *h)
{
    static const int MNK[][3] = {{1, 1, 1}, {3, 17, 5}, {33, 3, 129}, {17, 33, 1}, {65, 129, 33}};
    for (size_t c = 0; c < sizeof MNK / sizeof *MNK; c++)
        for (int t = 0; t < 8; t++) {
            const int M = MNK[c][0], N = MNK[c][1], K = MNK[c][2];
            const bool ta = t & 1, tb = t & 2;
            const float beta = t & 4 ? 1.3f : 0.0f, alpha = 0.7f;
            /* stored shapes, with 3 columns of padding in every row */
            const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
            const int lda = ac + 3, ldb = bc + 3, ldc = N + 3;
            size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)M * ldc, mark = hz_mark(h);
            float *A = hz_rand(h, na, -1, 1), *B = hz_rand(h, nb, -1, 1), *C = hz_rand(h, nc, -1, 1);
            float *R = malloc(nc * sizeof *R);
            double *want = malloc(nc * sizeof *want);
            memcpy(R, C, nc * sizeof *C);
            rs_cpu_gemm(&h->ref, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < ldc; j++) {
                    size_t o = (size_t)i * ldc + j;
                    if (j >= N) { /* padding: untouched */
                        want[o] = C[o];
                        continue;
                    }
                    double acc = 0;
                    for (int k = 0; k < K; k++)
                        acc += (double)(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                               (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                    want[o] = alpha * acc + beta * (double)C[o];
                }
            float *dA = hz_up(h, A, na * 4), *dB = hz_up(h, B, nb * 4), *dC = hz_up(h, C, nc * 4);
            hz_ok(h, "gemm", h->k->gemm(h->ctx, ta, tb, M, N, K, alpha, dA, lda, dB, ldb, beta, dC, ldc));
            float *got = hz_down_new(h, dC, nc);
            hz_close(h, "gemm vs cpu", got, R, nc, 1e-4, 1e-4);
            if (!hz_close_d(h, "gemm", got, want, nc, 1e-4, 1e-4))
                hz_check(h, false, "  (M=%d N=%d K=%d ta=%d tb=%d beta=%g)", M, N, K, ta, tb, (double)beta);
            free(A), free(B), free(C), free(R), free(want), free(got);
            hz_release(h, mark);
        }
    float *d = hz_alloc(h, 64 * 4);
    hz_refused(h, "gemm(M=-1)", h->k->gemm(h->ctx, false, false, -1, 2, 2, 1, d, 2, d, 2, 0, d, 2));
    hz_refused(h, "gemm(lda < K)", h->k->gemm(h->ctx, false, false, 2, 2, 4, 1, d, 3, d, 2, 0, d, 2));
    hz_ok(h, "gemm(M=0)", h->k->gemm(h->ctx, false, false, 0, 3, 3, 1, NULL, 3, NULL, 3, 0, NULL, 3));
}

/* ---- bias_rows, bias_rows_grad ---- */

static const int ROWS[][2] = {{1, 1}, {3, 17}, {33, 5}, {2, 129}, {300, 129}}; /* last: 38700 > 32768 */

static void case_bias_rows(hz *h)
{
    for (size_t c = 0; c < sizeof ROWS / sizeof *ROWS; c++) {
        int B = ROWS[c][0], N = ROWS[c][1];
        size_t n = (size_t)B * N, mark = hz_mark(h);
        float *out = hz_rand(h, n, -1, 1), *bias = hz_rand(h, (size_t)N, -1, 1), *r = malloc(n * 4);
        double *want = malloc(n * sizeof *want);
        memcpy(r, out, n * 4);
        rs_cpu_bias_rows(&h->ref, r, bias, B, N);
        for (size_t i = 0; i < n; i++) want[i] = (double)out[i] + bias[i % (size_t)N];
        float *dout = hz_up(h, out, n * 4), *db = hz_up(h, bias, (size_t)N * 4);
        hz_ok(h, "bias_rows", h->k->bias_rows(h->ctx, dout, db, B, N));
        float *got = hz_down_new(h, dout, n);
        hz_close(h, "bias_rows vs cpu", got, r, n, 1e-5, 1e-5);
        hz_close_d(h, "bias_rows", got, want, n, 2e-6, 2e-5);
        free(out), free(bias), free(r), free(want), free(got);
        hz_release(h, mark);
    }
    hz_refused(h, "bias_rows(B=-2)", h->k->bias_rows(h->ctx, hz_alloc(h, 8), hz_alloc(h, 8), -2, 1));
}

typedef struct bias_fd {
    hz *h;
    const float *x, *r;
    float *bias;
    int B, N;
} bias_fd;

/* sum r * (x + bias on every row), through the table under test */
static double bias_loss(void *ud)
{
    bias_fd *f = ud;
    hz *h = f->h;
    size_t n = (size_t)f->B * f->N, mark = hz_mark(h);
    float *d = hz_up(h, f->x, n * 4), *db = hz_up(h, f->bias, (size_t)f->N * 4);
    h->k->bias_rows(h->ctx, d, db, f->B, f->N);
    float *y = hz_down_new(h, d, n);
    double L = 0;
    for (size_t i = 0; i < n; i++) L += (double)f->r[i] * y[i];
    free(y);
    hz_release(h, mark);
    return L;
}

static void case_bias_rows_grad(hz *h)
{
    for (size_t c = 0; c < sizeof ROWS / sizeof *ROWS; c++) {
        int B = ROWS[c][0], N = ROWS[c][1];
        size_t n = (size_t)B * N, mark = hz_mark(h);
        float *x = hz_rand(h, n, -1, 1), *r = hz_rand(h, n, -1, 1), *bias = hz_rand(h, (size_t)N, -1, 1);
        float *d0 = hz_rand(h, (size_t)N, -1, 1), *ref = malloc((size_t)N * 4), *g = malloc((size_t)N * 4);
        memcpy(ref, d0, (size_t)N * 4);
        rs_cpu_bias_rows_grad(&h->ref, ref, r, B, N);
        float *dd = hz_up(h, d0, (size_t)N * 4), *dr = hz_up(h, r, n * 4);
        hz_ok(h, "bias_rows_grad", h->k->bias_rows_grad(h->ctx, dd, dr, B, N));
        float *got = hz_down_new(h, dd, (size_t)N);
        hz_close(h, "bias_rows_grad vs cpu", got, ref, (size_t)N, 1e-4, 1e-4);
        for (int j = 0; j < N; j++) g[j] = got[j] - d0[j]; /* it accumulates: what it added */
        bias_fd f = {h, x, r, bias, B, N};
        hz_fd(h, "bias_rows_grad", bias, (size_t)N, g, bias_loss, &f, 1e-3, 1e-3, 1e-2, 24);
        free(x), free(r), free(bias), free(d0), free(ref), free(g), free(got);
        hz_release(h, mark);
    }
    hz_refused(h, "bias_rows_grad(db NULL)", h->k->bias_rows_grad(h->ctx, NULL, hz_alloc(h, 8), 1, 2));
}

/* ---- elementwise activations: forward against float64, backward against differences ---- */

typedef rs_status (*ew_fwd_fn)(rs_kctx *, const float *, float *, size_t);
typedef rs_status (*ew_bwd_fn)(rs_kctx *, const float *, const float *, float *, size_t);

typedef struct ew {
    const char *name;
    size_t fwd, bwd;       /* offsets in rs_kernels */
    double (*f)(double);
    bool bwd_reads_out;    /* relu and tanh take the output, gelus the input */
} ew;

static double relu_d(double x) { return x > 0 ? x : 0; }
static double gelu_d(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double gelu_tanh_d(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
static double silu_d(double x) { return x / (1 + exp(-x)); }

static const ew EW[] = {
    {"relu", offsetof(rs_kernels, relu_fwd), offsetof(rs_kernels, relu_bwd), relu_d, true},
    {"gelu", offsetof(rs_kernels, gelu_fwd), offsetof(rs_kernels, gelu_bwd), gelu_d, false},
    {"tanh", offsetof(rs_kernels, tanh_fwd), offsetof(rs_kernels, tanh_bwd), tanh, true},
    {"gelu_tanh", offsetof(rs_kernels, gelu_tanh_fwd), offsetof(rs_kernels, gelu_tanh_bwd), gelu_tanh_d, false},
    {"silu", offsetof(rs_kernels, silu_fwd), offsetof(rs_kernels, silu_bwd), silu_d, false},
};

static ew_fwd_fn fwd_of(const rs_kernels *k, const ew *e)
{
    ew_fwd_fn f;
    memcpy(&f, (const char *)k + e->fwd, sizeof f);
    return f;
}

static ew_bwd_fn bwd_of(const rs_kernels *k, const ew *e)
{
    ew_bwd_fn f;
    memcpy(&f, (const char *)k + e->bwd, sizeof f);
    return f;
}

static void ew_forward(hz *h, const ew *e)
{
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s], mark = hz_mark(h);
        float *x = hz_rand_gap(h, n, 4.0f, 0.0f), *r = malloc(n * 4);
        double *want = malloc(n * sizeof *want);
        fwd_of(&rs_cpu_kernels, e)(&h->ref, x, r, n);
        for (size_t i = 0; i < n; i++) want[i] = e->f(x[i]);
        float *dx = hz_up(h, x, n * 4), *dy = hz_up_nan(h, n);
        hz_ok(h, e->name, fwd_of(h->k, e)(h->ctx, dx, dy, n));
        float *got = hz_down_new(h, dy, n);
        hz_close(h, "forward vs cpu", got, r, n, 1e-5, 1e-5);
        hz_close_d(h, "forward", got, want, n, 2e-6, 2e-5);
        free(x), free(r), free(want), free(got);
        hz_release(h, mark);
    }
    hz_refused(h, "forward(in NULL)", fwd_of(h->k, e)(h->ctx, NULL, hz_alloc(h, 8), 2));
}

typedef struct ew_fd {
    hz *h;
    const ew *e;
    float *x;
    const float *r;
    size_t n;
} ew_fd;

static double ew_loss(void *ud)
{
    ew_fd *f = ud;
    hz *h = f->h;
    size_t mark = hz_mark(h);
    float *dx = hz_up(h, f->x, f->n * 4), *dy = hz_alloc(h, f->n * 4);
    fwd_of(h->k, f->e)(h->ctx, dx, dy, f->n);
    float *y = hz_down_new(h, dy, f->n);
    double L = 0;
    for (size_t i = 0; i < f->n; i++) L += (double)f->r[i] * y[i];
    free(y);
    hz_release(h, mark);
    return L;
}

static void ew_backward(hz *h, const ew *e)
{
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s], mark = hz_mark(h);
        /* |x| >= 0.05 keeps relu's kink farther than eps from every point */
        float *x = hz_rand_gap(h, n, 3.0f, 0.05f), *r = hz_rand(h, n, -1, 1), *y = malloc(n * 4), *ref = malloc(n * 4);
        fwd_of(&rs_cpu_kernels, e)(&h->ref, x, y, n);
        const float *a = e->bwd_reads_out ? y : x;
        bwd_of(&rs_cpu_kernels, e)(&h->ref, a, r, ref, n);
        float *da = hz_up(h, a, n * 4), *dr = hz_up(h, r, n * 4), *dd = hz_up_nan(h, n);
        hz_ok(h, e->name, bwd_of(h->k, e)(h->ctx, da, dr, dd, n));
        float *got = hz_down_new(h, dd, n);
        hz_close(h, "backward vs cpu", got, ref, n, 1e-5, 1e-5);
        ew_fd f = {h, e, x, r, n};
        hz_fd(h, "backward", x, n, got, ew_loss, &f, 1e-3, 1e-3, 1e-2, 40);
        free(x), free(r), free(y), free(ref), free(got);
        hz_release(h, mark);
    }
    hz_refused(h, "backward(dout NULL)", bwd_of(h->k, e)(h->ctx, hz_alloc(h, 8), NULL, hz_alloc(h, 8), 2));
}

static void case_relu_fwd(hz *h) { ew_forward(h, &EW[0]); }
static void case_relu_bwd(hz *h) { ew_backward(h, &EW[0]); }
static void case_gelu_fwd(hz *h) { ew_forward(h, &EW[1]); }
static void case_gelu_bwd(hz *h) { ew_backward(h, &EW[1]); }
static void case_tanh_fwd(hz *h) { ew_forward(h, &EW[2]); }
static void case_tanh_bwd(hz *h) { ew_backward(h, &EW[2]); }
static void case_gelu_tanh_fwd(hz *h) { ew_forward(h, &EW[3]); }
static void case_gelu_tanh_bwd(hz *h) { ew_backward(h, &EW[3]); }
static void case_silu_fwd(hz *h) { ew_forward(h, &EW[4]); }
static void case_silu_bwd(hz *h) { ew_backward(h, &EW[4]); }

/* ---- dropout ---- */

static void case_dropout_fwd(hz *h)
{
    static const float P[] = {0.0f, 0.1f, 0.5f, 1.0f};
    for (size_t s = 0; s < NSIZES; s++)
        for (int pi = 0; pi < 4; pi++) {
            size_t n = SIZES[s], mark = hz_mark(h);
            float p = P[pi], *x = hz_rand(h, n, -1, 1), *r = malloc(n * 4);
            uint8_t *rm = malloc(n), *m = malloc(n);
            rs_cpu_dropout_fwd(&h->ref, x, r, rm, n, p, 1234 + s);
            float *dx = hz_up(h, x, n * 4), *dy = hz_up_nan(h, n);
            uint8_t *dm = hz_alloc(h, n);
            hz_ok(h, "dropout_fwd", h->k->dropout_fwd(h->ctx, dx, dy, dm, n, p, 1234 + s));
            float *got = hz_down_new(h, dy, n);
            hz_down(h, m, dm, n);
            /* The mask is a function of (seed, index): the same on every device and thread count. */
            hz_check(h, !memcmp(m, rm, n), "p=%g n=%zu: the mask differs from the cpu's", (double)p, n);
            size_t kept = 0, bad = 0;
            const double sc = p < 1 ? 1.0 / (1.0 - p) : 0.0;
            for (size_t i = 0; i < n; i++) {
                kept += m[i] == 1;
                bad += m[i] > 1 || fabs(got[i] - (m[i] ? x[i] * sc : 0.0)) > 1e-6 * (1 + fabs(x[i] * sc));
            }
            hz_check(h, !bad, "p=%g n=%zu: %zu outputs are not x/(1-p) where kept and 0 elsewhere", (double)p, n, bad);
            /* Bernoulli(1-p): within 5 standard deviations (and all or nothing at p 0 and 1). */
            double mean = (double)n * (1 - p), sd = sqrt((double)n * p * (1 - p));
            hz_check(h, fabs((double)kept - mean) <= 5 * sd + 1e-9, "p=%g n=%zu: kept %zu, expected %.1f +- %.1f",
                     (double)p, n, kept, mean, 5 * sd);
            free(x), free(r), free(rm), free(m), free(got);
            hz_release(h, mark);
        }
    hz_refused(h, "dropout_fwd(p=1.5)",
               h->k->dropout_fwd(h->ctx, hz_alloc(h, 8), hz_alloc(h, 8), hz_alloc(h, 8), 2, 1.5f, 1));
}

typedef struct drop_fd {
    hz *h;
    float *x;
    const float *r;
    size_t n;
    float p;
} drop_fd;

static double drop_loss(void *ud)
{
    drop_fd *f = ud;
    hz *h = f->h;
    size_t mark = hz_mark(h);
    float *dx = hz_up(h, f->x, f->n * 4), *dy = hz_alloc(h, f->n * 4);
    h->k->dropout_fwd(h->ctx, dx, dy, hz_alloc(h, f->n), f->n, f->p, 99);
    float *y = hz_down_new(h, dy, f->n);
    double L = 0;
    for (size_t i = 0; i < f->n; i++) L += (double)f->r[i] * y[i];
    free(y);
    hz_release(h, mark);
    return L;
}

static void case_dropout_bwd(hz *h)
{
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s], mark = hz_mark(h);
        const float p = 0.3f;
        float *x = hz_rand(h, n, -1, 1), *r = hz_rand(h, n, -1, 1), *y = malloc(n * 4), *ref = malloc(n * 4);
        uint8_t *mask = malloc(n);
        rs_cpu_dropout_fwd(&h->ref, x, y, mask, n, p, 99);
        rs_cpu_dropout_bwd(&h->ref, r, mask, ref, n, p);
        float *dr = hz_up(h, r, n * 4), *dd = hz_up_nan(h, n);
        uint8_t *dm = hz_up(h, mask, n);
        hz_ok(h, "dropout_bwd", h->k->dropout_bwd(h->ctx, dr, dm, dd, n, p));
        float *got = hz_down_new(h, dd, n);
        hz_close(h, "dropout_bwd vs cpu", got, ref, n, 1e-5, 1e-5);
        drop_fd f = {h, x, r, n, p};
        hz_fd(h, "dropout_bwd", x, n, got, drop_loss, &f, 1e-3, 1e-3, 1e-2, 40);
        free(x), free(r), free(y), free(ref), free(mask), free(got);
        hz_release(h, mark);
    }
    hz_refused(h, "dropout_bwd(mask NULL)", h->k->dropout_bwd(h->ctx, hz_alloc(h, 8), NULL, hz_alloc(h, 8), 2, 0.5f));
}

/* ---- optimizer updates against float64 transcriptions of torch.optim's formulas ---- */

static void case_sgd_update(hz *h)
{
    /* momentum, dampening, wd, nesterov, first */
    static const float CFG[][5] = {
        {0, 0, 0, 0, 1}, {0.9f, 0, 0.01f, 1, 1}, {0.9f, 0, 0.01f, 1, 0}, {0.8f, 0.1f, 0, 0, 0}};
    for (size_t s = 0; s < NSIZES; s++)
        for (int c = 0; c < 4; c++) {
            size_t n = SIZES[s], mark = hz_mark(h);
            const float mo = CFG[c][0], da = CFG[c][1], wd = CFG[c][2], lr = 0.05f;
            const bool nest = CFG[c][3] != 0, first = CFG[c][4] != 0;
            float *p = hz_rand(h, n, -1, 1), *g = hz_rand(h, n, -1, 1), *m = hz_rand(h, n, -1, 1);
            float *rp = malloc(n * 4), *rm = malloc(n * 4);
            double *wp = malloc(n * sizeof *wp);
            memcpy(rp, p, n * 4);
            memcpy(rm, m, n * 4);
            rs_cpu_sgd_update(&h->ref, rp, g, mo ? rm : NULL, n, lr, mo, da, wd, nest, first);
            for (size_t i = 0; i < n; i++) {
                double d = (double)g[i] + wd * (double)p[i];
                if (mo) {
                    double b = first ? d : mo * (double)m[i] + (1 - da) * d;
                    d = nest ? d + mo * b : b;
                }
                wp[i] = p[i] - lr * d;
            }
            float *dp = hz_up(h, p, n * 4), *dg = hz_up(h, g, n * 4), *dm = hz_up(h, m, n * 4);
            hz_ok(h, "sgd_update", h->k->sgd_update(h->ctx, dp, dg, mo ? dm : NULL, n, lr, mo, da, wd, nest, first));
            float *got = hz_down_new(h, dp, n);
            hz_close(h, "sgd_update vs cpu", got, rp, n, 1e-5, 1e-5);
            hz_close_d(h, "sgd_update", got, wp, n, 2e-6, 2e-5);
            free(p), free(g), free(m), free(rp), free(rm), free(wp), free(got);
            hz_release(h, mark);
        }
    hz_refused(h, "sgd_update(momentum without a buffer)",
               h->k->sgd_update(h->ctx, hz_alloc(h, 8), hz_alloc(h, 8), NULL, 2, 0.1f, 0.9f, 0, 0, false, false));
}

static void case_adam_update(hz *h)
{
    for (size_t s = 0; s < NSIZES; s++)
        for (int c = 0; c < 4; c++) {
            size_t n = SIZES[s], mark = hz_mark(h);
            const bool dec = c & 1;
            const int64_t t = c & 2 ? 5 : 1;
            const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
            float *p = hz_rand(h, n, -1, 1), *g = hz_rand(h, n, -1, 1), *m = hz_rand(h, n, -0.1f, 0.1f);
            float *v = hz_rand(h, n, 0, 0.01f), *rp = malloc(n * 4), *rm = malloc(n * 4), *rv = malloc(n * 4);
            double *wp = malloc(n * sizeof *wp);
            memcpy(rp, p, n * 4), memcpy(rm, m, n * 4), memcpy(rv, v, n * 4);
            rs_cpu_adam_update(&h->ref, rp, g, rm, rv, n, lr, b1, b2, eps, wd, dec, t);
            for (size_t i = 0; i < n; i++) {
                double pi = p[i], gi = g[i];
                if (dec) pi *= 1 - (double)lr * wd;
                else gi += wd * pi;
                double mi = b1 * (double)m[i] + (1 - (double)b1) * gi;
                double vi = b2 * (double)v[i] + (1 - (double)b2) * gi * gi;
                double bc1 = 1 - pow(b1, (double)t), bc2 = 1 - pow(b2, (double)t);
                wp[i] = pi - lr / bc1 * mi / (sqrt(vi / bc2) + eps);
            }
            float *dp = hz_up(h, p, n * 4), *dg = hz_up(h, g, n * 4), *dm = hz_up(h, m, n * 4);
            float *dv = hz_up(h, v, n * 4);
            hz_ok(h, "adam_update", h->k->adam_update(h->ctx, dp, dg, dm, dv, n, lr, b1, b2, eps, wd, dec, t));
            float *got = hz_down_new(h, dp, n);
            hz_close(h, "adam_update vs cpu", got, rp, n, 1e-5, 1e-5);
            hz_close_d(h, "adam_update", got, wp, n, 1e-5, 1e-4);
            free(p), free(g), free(m), free(v), free(rp), free(rm), free(rv), free(wp), free(got);
            hz_release(h, mark);
        }
    float *d = hz_alloc(h, 64);
    hz_refused(h, "adam_update(t=0)", h->k->adam_update(h->ctx, d, d + 2, d + 4, d + 6, 2, 0.1f, 0.9f, 0.999f, 1e-8f,
                                                         0, false, 0));
}

HZ_CASE(fill, case_fill);
HZ_CASE(axpy, case_axpy);
HZ_CASE(scale, case_scale);
HZ_CASE(gemm, case_gemm);
HZ_CASE(bias_rows, case_bias_rows);
HZ_CASE(bias_rows_grad, case_bias_rows_grad);
HZ_CASE(relu_fwd, case_relu_fwd);
HZ_CASE(relu_bwd, case_relu_bwd);
HZ_CASE(gelu_fwd, case_gelu_fwd);
HZ_CASE(gelu_bwd, case_gelu_bwd);
HZ_CASE(tanh_fwd, case_tanh_fwd);
HZ_CASE(tanh_bwd, case_tanh_bwd);
HZ_CASE(dropout_fwd, case_dropout_fwd);
HZ_CASE(dropout_bwd, case_dropout_bwd);
HZ_CASE(gelu_tanh_fwd, case_gelu_tanh_fwd);
HZ_CASE(gelu_tanh_bwd, case_gelu_tanh_bwd);
HZ_CASE(silu_fwd, case_silu_fwd);
HZ_CASE(silu_bwd, case_silu_bwd);
HZ_CASE(add, case_add);
HZ_CASE(sgd_update, case_sgd_update);
HZ_CASE(adam_update, case_adam_update);
