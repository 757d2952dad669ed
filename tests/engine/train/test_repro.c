/* Same seed, same data, same threads: the same bits. A CNN (conv backward is the kernel that sums
 * per-sample gradients over the batch) trains 20 steps on the built-in digits at 2 threads as a user
 * runs it, twice, and with the count pinned (RINGSIDE_TUNE_THREADS=off): all three end on bitwise equal
 * weights. Before the fix the loop's thread tuner started every run at 1 thread and conv backward
 * folded one partial gradient per thread, so a default run differed from a pinned one, and two
 * identical runs of the Fashion CNN ended at 0.8391 and 0.8410.
 * Where OpenBLAS gives this model's Linear products the same bits at 1 and 2 threads (its SkylakeX
 * kernel does, Haswell's does not; checked here with cblas directly), a run at 1 thread and a run with
 * the tuner switching (RINGSIDE_TUNE_THREADS=on) must equal them too: conv backward's sums are in
 * fixed chunks of the batch, whatever the threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <omp.h>

#include "engine/data/source.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

#define SPEC "seq in=1x28x28 conv(8,3,pad=1) relu maxpool(2) conv(16,3,pad=1) relu maxpool(2) flatten linear(10)"

/* The weights after 20 steps at `threads`, RINGSIDE_TUNE_THREADS=tune (NULL: unset, as a user runs it);
 * caller frees. n: their count. */
static float *train_once(const rs_data_pair *d, int threads, const char *tune, size_t *n)
{
    if (!tune) unsetenv("RINGSIDE_TUNE_THREADS");
    else setenv("RINGSIDE_TUNE_THREADS", tune, 1);
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse(SPEC, "m", rs_device_cpu(), NULL, 7, &m, NULL, &e) == RS_OK, "%s", e.msg);
    if (!m) return NULL;
    rs_train_cfg c = rs_train_defaults();
    c.batch = 50; /* not a multiple of 16 chunks or 2 threads: uneven parts either way */
    c.max_steps = 20; /* the tuner times 8 steps at 1 thread, then probes 2 */
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

int main(void)
{
    rs_data_pair d = {0};
    rs_err e = {0};
    RS_CHECK(rs_data_open("digits:2000", 1, &d, &e) == RS_OK, "digits: %s", e.msg);
    if (!d.train) return rs_test_finish("engine-train-repro");
    size_t n[5] = {0};
    float *dflt = train_once(&d, 2, NULL, &n[0]);
    float *again = train_once(&d, 2, NULL, &n[1]);
    float *pinned = train_once(&d, 2, "off", &n[2]);
    RS_CHECK(dflt && again && pinned && n[0] == n[1] && n[1] == n[2], "a run failed");
    if (dflt && again && pinned && n[0] == n[1] && n[1] == n[2]) {
        same_bits(dflt, again, n[0], "2 threads, two identical runs");
        same_bits(dflt, pinned, n[0], "2 threads by default vs pinned");
    }
    bool inv = linear_same_bits();
    printf("  OpenBLAS: this model's Linear products at 1 and 2 threads give %s\n",
           inv ? "the same bits" : "different bits (1 thread and the tuner are not compared)");
    float *one = inv ? train_once(&d, 1, "off", &n[3]) : NULL;
    float *tuned = inv ? train_once(&d, 2, "on", &n[4]) : NULL;
    if (inv && one && tuned && pinned && n[3] == n[2] && n[4] == n[2]) {
        same_bits(one, pinned, n[2], "1 thread vs 2 threads");
        same_bits(tuned, pinned, n[2], "2 threads tuned (switching 1 <-> 2) vs pinned");
    } else RS_CHECK(!inv, "a 1-thread or tuned run failed");
    free(dflt), free(again), free(pinned), free(one), free(tuned);
    rs_data_pair_clear(&d);
    return rs_test_finish("engine-train-repro");
}
