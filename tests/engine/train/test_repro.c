/* Same seed, same data, same threads: the same bits.
 * 1. Conv backward, the kernel that sums per-sample gradients over the batch, gives the same dW and db
 *    bits at 1, 2 and 3 threads (it folded one partial sum per thread, so the thread tuner's switches
 *    made two identical runs of the Fashion CNN end at 0.8391 and 0.8410).
 * 2. A CNN trains 20 steps on the built-in digits at 2 threads pinned (RINGSIDE_TUNE_THREADS=off),
 *    twice: equal bits. Where OpenBLAS gives this model's Linear products the same bits at 1 and 2
 *    threads (its SkylakeX kernel does, Haswell's does not; checked here with cblas directly), a run at
 *    1 thread must equal them too; a run as a user starts it (the tuner switching between 1 and 2
 *    threads as it times the steps) must on any kernel.
 * 3. The gemm entry at 2 threads and at 1 thread with the tuner's 2 blocks gives the same bits for the
 *    products OpenBLAS's own threading changes (x.W^T of a (64, 784) batch and a 256x784 weight, and
 *    the backward's two), checked against cblas at one thread to rounding.
 * 4. An MLP with 256-wide layers and a GPT, each trained with the tuner switching between 1 and 2
 *    threads at steps injected by the test (two different schedules) and pinned at 2 threads: the same
 *    bits all three ways, on any OpenBLAS kernel (also run with OPENBLAS_CORETYPE=Haswell). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <omp.h>

#include "engine/core/kernels.h"
#include "engine/data/data.h"
#include "engine/data/source.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

#define SPEC "seq in=1x28x28 conv(8,3,pad=1) relu maxpool(2) conv(16,3,pad=1) relu maxpool(2) flatten linear(10)"

/* The weights of `spec` after `steps` steps of `batch` at `threads`, RINGSIDE_TUNE_THREADS=tune (NULL:
 * unset, as a user runs it), the tuner switching after the steps of flips (NULL: as it times them);
 * caller frees. n: their count. */
static float *train_spec(const char *spec, const rs_data_pair *d, int threads, const char *tune,
                         const int64_t *flips, int batch, int steps, size_t *n)
{
    if (!tune) unsetenv("RINGSIDE_TUNE_THREADS");
    else setenv("RINGSIDE_TUNE_THREADS", tune, 1);
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 7, &m, NULL, &e) == RS_OK, "%s", e.msg);
    if (!m) return NULL;
    rs_train_cfg c = rs_train_defaults();
    c.batch = batch;
    c.max_steps = steps;
    c.tune_flips = flips;
    c.threads = threads;
    c.eval = false;
    c.seed = 3;
    rs_train_result r;
    RS_CHECK(rs_train(m, d, &c, NULL, &r, &e) == RS_OK, "train at %d threads: %s", threads, e.msg);
    *n = rs_model_numel(m);
    float *w = malloc(*n * sizeof *w);
    if (w) memcpy(w, rs_model_params(m), *n * sizeof *w);
    rs_model_free(m);
    return w;
}

/* The CNN after 20 steps of 50 (not a multiple of 16 chunks or 2 threads: uneven parts either way; the
 * tuner times 8 steps at 1 thread, then probes 2). */
static float *train_once(const rs_data_pair *d, int threads, const char *tune, size_t *n)
{
    return train_spec(SPEC, d, threads, tune, NULL, 50, 20, n);
}

/* Whether OpenBLAS computes the model's Linear products (batch 50, 784 features, 10 classes: forward
 * x.W^T, backward dy.W and dy^T.x) to the same bits at 1 and 2 threads. */
static bool linear_same_bits(void)
{
    static const int sh[3][5] = {{0, 1, 50, 10, 784}, {0, 0, 50, 784, 10}, {1, 0, 10, 784, 50}};
    enum { MOST = 50 * 784 };
    static float A[MOST], B[MOST], C1[MOST], C2[MOST];
    uint32_t r = 1;
    for (int k = 0; k < MOST; k++) {
        r = r * 1664525u + 1013904223u;
        A[k] = (float)(r >> 8) / 8388608.0f - 1.0f;
        r = r * 1664525u + 1013904223u;
        B[k] = (float)(r >> 8) / 8388608.0f - 1.0f;
    }
    int prev = omp_get_max_threads();
    bool same = true;
    for (int i = 0; i < 3 && same; i++) {
        int ta = sh[i][0], tb = sh[i][1], M = sh[i][2], N = sh[i][3], K = sh[i][4];
        for (int t = 1; t <= 2; t++) {
            omp_set_num_threads(t);
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                        ta ? M : K, B, tb ? K : N, 0.0f, t == 1 ? C1 : C2, N);
        }
        same = !memcmp(C1, C2, (size_t)M * N * sizeof *C1);
    }
    omp_set_num_threads(prev);
    return same;
}

static void same_bits(const float *a, const float *b, size_t n, const char *what)
{
    size_t diff = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a)) {
            if (first == n) first = i;
            diff++;
        }
    RS_CHECK(diff == 0, "%s: %zu of %zu weights differ (first at %zu: %.9g vs %.9g)", what, diff, n, first,
             first < n ? (double)a[first] : 0.0, first < n ? (double)b[first] : 0.0);
    printf("  %s: %zu weights, %zu differ\n", what, n, diff);
}

/* Conv backward's weight and bias gradients at `threads` on fixed data (a batch of 37: uneven over
 * both the 16 chunks and the threads); dw, db: (8*3*3*3), (8). */
static void conv_bwd_at(int threads, float *dw, float *db)
{
    rs_conv_geom g = {.c = 3, .h = 12, .w = 12, .oc = 8, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1,
                      .oh = 12, .ow = 12};
    enum { B = 37 };
    size_t ni = (size_t)B * 3 * 12 * 12, no = (size_t)B * 8 * 12 * 12, nw = 8 * 27;
    float *x = malloc(ni * sizeof *x), *dy = malloc(no * sizeof *dy), *w = malloc(nw * sizeof *w);
    uint32_t r = 9;
    for (size_t i = 0; i < ni; i++) x[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (size_t i = 0; i < no; i++) dy[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (size_t i = 0; i < nw; i++) w[i] = 0.1f;
    memset(dw, 0, nw * sizeof *dw);
    memset(db, 0, 8 * sizeof *db);
    rs_kctx ctx;
    rs_err e = {0};
    size_t wsb = 0;
    RS_CHECK(rs_kctx_init(&ctx, &rs_cpu_kernels, threads, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(ctx.k->conv2d_workspace(&ctx, &g, B, &wsb) == RS_OK, "conv2d_workspace");
    float *ws = malloc(wsb);
    RS_CHECK(ws && ctx.k->conv2d_bwd(&ctx, &g, B, x, w, dy, NULL, dw, db, ws, wsb) == RS_OK, "conv2d_bwd at %d threads",
             threads);
    free(x), free(dy), free(w), free(ws);
}

static void conv_bits(void)
{
    float dw[3][216], db[3][8];
    for (int t = 0; t < 3; t++) conv_bwd_at(t + 1, dw[t], db[t]);
    for (int t = 1; t < 3; t++) {
        char what[64];
        snprintf(what, sizeof what, "conv2d_bwd dW at 1 vs %d threads", t + 1);
        same_bits(dw[0], dw[t], 216, what);
        snprintf(what, sizeof what, "conv2d_bwd db at 1 vs %d threads", t + 1);
        same_bits(db[0], db[t], 8, what);
    }
}

static void fill_lcg(float *v, size_t n, uint32_t r)
{
    for (size_t i = 0; i < n; i++) v[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) / 8388608.0f - 1.0f;
}

/* C = op(A) op(B) through the gemm entry on a context of `threads` with `blocks` (the tuner's). */
static void gemm_at(int threads, int blocks, bool ta, bool tb, int M, int N, int K, const float *A, const float *B,
                    float *C)
{
    rs_kctx ctx;
    rs_err e = {0};
    RS_CHECK(rs_kctx_init(&ctx, &rs_cpu_kernels, threads, &e) == RS_OK, "%s", e.msg);
    ctx.blocks = blocks;
    RS_CHECK(ctx.k->gemm(&ctx, ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C, N) == RS_OK,
             "gemm %dx%dx%d at %d threads", M, N, K, threads);
}

/* The Linear products of a (64, 784) batch through a 256x784 weight: forward x.W^T, backward dy.W and
 * dy^T.x. At 2 threads and at 1 thread with 2 blocks: the same bits; against one cblas call at one
 * thread: within rounding (the blocks compute the product, not something else). */
static void gemm_bits(void)
{
    static const int sh[3][5] = {{0, 1, 64, 256, 784}, {0, 0, 64, 784, 256}, {1, 0, 256, 784, 64}};
    enum { MOST = 256 * 784 };
    float *A = malloc(MOST * sizeof *A), *B = malloc(MOST * sizeof *B);
    float *c2 = malloc(MOST * sizeof *A), *c1 = malloc(MOST * sizeof *A), *ref = malloc(MOST * sizeof *A);
    if (!A || !B || !c1 || !c2 || !ref) abort();
    fill_lcg(A, MOST, 11);
    fill_lcg(B, MOST, 12);
    for (int i = 0; i < 3; i++) {
        int ta = sh[i][0], tb = sh[i][1], M = sh[i][2], N = sh[i][3], K = sh[i][4];
        gemm_at(2, 0, ta, tb, M, N, K, A, B, c2);
        gemm_at(1, 2, ta, tb, M, N, K, A, B, c1);
        char what[96];
        snprintf(what, sizeof what, "gemm %s%s %dx%dx%d, 2 threads vs 1 thread in 2 blocks", ta ? "T" : "N",
                 tb ? "T" : "N", M, N, K);
        same_bits(c2, c1, (size_t)M * N, what);
        int prev = omp_get_max_threads();
        omp_set_num_threads(1);
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                    ta ? M : K, B, tb ? K : N, 0.0f, ref, N);
        omp_set_num_threads(prev);
        double worst = 0;
        for (size_t j = 0; j < (size_t)M * N; j++) {
            double d = fabs((double)c2[j] - ref[j]);
            if (d > worst) worst = d;
        }
        RS_CHECK(worst <= 1e-5 * K, "%s: differs from cblas by %g", what, worst);
    }
    free(A), free(B), free(c1), free(c2), free(ref);
}

/* `spec` trained on d with the tuner switching at two different injected schedules and pinned at 2
 * threads: the same bits. */
static void tuned_runs(const char *spec, const rs_data_pair *d, int batch, int steps, const char *what)
{
    static const int64_t flips_a[] = {2, 5, 6, 9, 0}, flips_b[] = {3, 4, 7, 0};
    size_t n[3] = {0};
    float *a = train_spec(spec, d, 2, NULL, flips_a, batch, steps, &n[0]);
    float *b = train_spec(spec, d, 2, NULL, flips_b, batch, steps, &n[1]);
    float *p = train_spec(spec, d, 2, "off", NULL, batch, steps, &n[2]);
    RS_CHECK(a && b && p && n[0] == n[1] && n[0] == n[2], "%s: a run failed", what);
    char w[160];
    if (a && b && n[0] == n[1]) {
        snprintf(w, sizeof w, "%s: switching after steps 2,5,6,9 vs 3,4,7", what);
        same_bits(a, b, n[0], w);
    }
    if (a && p && n[0] == n[2]) {
        snprintf(w, sizeof w, "%s: switching vs pinned at 2 threads", what);
        same_bits(a, p, n[0], w);
    }
    free(a), free(b), free(p);
}

int main(void)
{
    gemm_bits();
    conv_bits();
    rs_data_pair d = {0};
    rs_err e = {0};
    RS_CHECK(rs_data_open("digits:2000", 1, &d, &e) == RS_OK, "digits: %s", e.msg);
    if (!d.train) return rs_test_finish("engine-train-repro");
    size_t n[4] = {0};
    float *pinned = train_once(&d, 2, "off", &n[0]);
    float *again = train_once(&d, 2, "off", &n[1]);
    RS_CHECK(pinned && again && n[0] == n[1], "a 2-thread run failed");
    if (pinned && again && n[0] == n[1]) same_bits(pinned, again, n[0], "2 threads pinned, two identical runs");
    bool inv = linear_same_bits();
    printf("  OpenBLAS: this model's Linear products at 1 and 2 threads give %s\n",
           inv ? "the same bits" : "different bits (1 thread and the tuner are not compared)");
    float *one = inv ? train_once(&d, 1, "off", &n[2]) : NULL;
    float *tuned = train_once(&d, 2, NULL, &n[3]); /* as a user starts it: the tuner on */
    if (inv && one && pinned && n[2] == n[0]) same_bits(one, pinned, n[0], "1 thread vs 2 threads");
    else RS_CHECK(!inv, "a 1-thread run failed");
    /* the gemm entry's fixed blocks: equal on any kernel */
    RS_CHECK(tuned && pinned && n[3] == n[0], "a tuned run failed");
    if (tuned && pinned && n[3] == n[0]) same_bits(tuned, pinned, n[0], "2 threads tuned (switching 1 <-> 2) vs pinned");
    free(pinned), free(again), free(one), free(tuned);
    tuned_runs("mlp 784-256-256-10", &d, 64, 12, "mlp 784-256-256-10, batch 64");
    rs_data_pair_clear(&d);
    rs_data_pair t = {0};
    RS_CHECK(rs_data_text_builtin(32, &t, &e) == RS_OK, "text: %s", e.msg);
    if (t.train) {
        char gpt[96];
        snprintf(gpt, sizeof gpt, "gpt layers=2 heads=4 dim=64 ctx=32 vocab=%d", t.train->n_classes);
        tuned_runs(gpt, &t, 16, 12, "gpt layers=2 dim=64 ctx=32, batch 16");
    }
    rs_data_pair_clear(&t);
    return rs_test_finish("engine-train-repro");
}
