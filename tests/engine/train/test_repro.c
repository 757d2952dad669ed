/* Same seed, same data: the same bits, whatever the threads. A CNN (conv backward is the kernel that
 * sums per-sample gradients over the batch) trains 20 steps on the built-in digits three ways: at 1
 * thread, at 2 threads with the loop's thread tuner (which switches between 1 and 2 as it times the
 * steps, so where it switches depends on the machine's load), and at 2 threads with the tuner off.
 * All three must end on bitwise equal weights: the sums' order is the batch's, never the threads'.
 * (Before the fix the 2-thread run folded per-thread partial sums, and two identical runs of the
 * Fashion CNN ended at 0.8391 and 0.8410.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/source.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

#define SPEC "seq in=1x28x28 conv(8,3,pad=1) relu maxpool(2) conv(16,3,pad=1) relu maxpool(2) flatten linear(10)"

/* The weights after 20 steps at `threads` (tuner on or off); caller frees. n: their count. */
static float *train_once(const rs_data_pair *d, int threads, bool tune, size_t *n)
{
    setenv("RINGSIDE_TUNE_THREADS", tune ? "on" : "off", 1);
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
    size_t n1 = 0, n2 = 0, n3 = 0;
    float *one = train_once(&d, 1, false, &n1);
    float *tuned = train_once(&d, 2, true, &n2);
    float *fixed2 = train_once(&d, 2, false, &n3);
    if (one && tuned && fixed2 && n1 == n2 && n2 == n3) {
        same_bits(one, fixed2, n1, "1 thread vs 2 threads");
        same_bits(fixed2, tuned, n1, "2 threads vs 2 threads tuned");
    } else RS_CHECK(0, "a run failed");
    free(one), free(tuned), free(fixed2);
    rs_data_pair_clear(&d);
    return rs_test_finish("engine-train-repro");
}
