/* Tests of the built-in digits generator: reproducible by seed and thread count, balanced, in range,
 * varied, and learnable by a plain nearest-class-mean classifier without being trivially separable.
 * Reads as an example of use: generate, look at it with rs_data_digits_ascii, free. */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "engine/data/gen/digits.h"
#include "tests/rs_test.h"

#define NPIX 784

static rs_dataset *make(uint32_t n, uint64_t seed)
{
    rs_dataset *d = NULL;
    rs_err err = {0};
    rs_status st = rs_data_digits(n, seed, &d, &err);
    RS_CHECK(st == RS_OK && d, "rs_data_digits(%u, %llu): %s", n, (unsigned long long)seed, err.msg);
    return d;
}

static int same_data(const rs_dataset *a, const rs_dataset *b, uint32_t n)
{
    return !memcmp(a->x, b->x, sizeof(float) * NPIX * n) && !memcmp(a->y, b->y, sizeof(int32_t) * n);
}

static void test_bad_n(void)
{
    rs_dataset *d = (rs_dataset *)1;
    rs_err err = {0};
    RS_CHECK(rs_data_digits(0, 1, &d, &err) == RS_ERR_ARG, "n=0 must be refused");
    RS_CHECK(d == NULL, "*out must be NULL after a failure");
    RS_CHECK(strstr(err.msg, "1..10000000") != NULL, "message should say what works: '%s'", err.msg);
    rs_err_clear(&err);
    RS_CHECK(rs_data_digits(RS_DATA_DIGITS_MAX_N + 1, 1, &d, &err) == RS_ERR_ARG, "n too large");
    RS_CHECK(strstr(err.msg, "n=10000001") != NULL, "message should quote n: '%s'", err.msg);
    RS_CHECK(rs_data_digits(10, 1, NULL, &err) == RS_ERR_ARG, "NULL out");

    rs_data_pair p = {(rs_dataset *)1, (rs_dataset *)1};
    RS_CHECK(rs_data_digits_pair(100, 0, 1, &p, &err) == RS_ERR_ARG, "n_test=0 must be refused");
    RS_CHECK(p.train == NULL && p.test == NULL, "pair must be empty after a failure");
    RS_CHECK(strstr(err.msg, "n_test") != NULL, "message should name n_test: '%s'", err.msg);
    RS_CHECK(rs_data_digits_pair(0, 10, 1, &p, NULL) == RS_ERR_ARG, "n_train=0, err may be NULL");
}

static void test_metadata(void)
{
    rs_dataset *d = make(25, 42);
    if (!d) return;
    RS_CHECK(d->n == 25 && d->c == 1 && d->h == 28 && d->w == 28, "shape %u x (%d,%d,%d)", d->n, d->c,
             d->h, d->w);
    RS_CHECK(d->n_classes == 10, "n_classes %d", d->n_classes);
    RS_CHECK(!strcmp(d->name, "digits"), "name '%s'", d->name);
    RS_CHECK(!strcmp(d->source, "digits(n=25,seed=42)"), "source '%s'", d->source);
    RS_CHECK(d->class_names && !strcmp(d->class_names[0], "0") && !strcmp(d->class_names[9], "9"),
             "class names 0..9");
    rs_dataset_free(d);
    rs_dataset_free(NULL);
}

static void test_determinism(void)
{
    rs_dataset *a = make(1000, 7), *b = make(1000, 7), *c = make(1000, 8), *p = make(100, 7);
    if (a && b && c && p) {
        RS_CHECK(same_data(a, b, 1000), "same seed must give bit-identical data and labels");
        RS_CHECK(memcmp(a->x, c->x, sizeof(float) * NPIX * 1000) != 0, "seeds 7 and 8 gave the same images");
        RS_CHECK(memcmp(a->y, c->y, sizeof(int32_t) * 1000) != 0, "seeds 7 and 8 gave the same labels");
        RS_CHECK(same_data(a, p, 100), "the first 100 of n=1000 must equal n=100");
    }
    rs_dataset_free(b);
    rs_dataset_free(c);
    rs_dataset_free(p);

    /* Each sample forks its own stream, so the thread count cannot change a single bit. */
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    rs_dataset *one = make(1000, 7);
    omp_set_num_threads(2);
    rs_dataset *two = make(1000, 7);
    omp_set_num_threads(saved);
    if (a && one && two) {
        RS_CHECK(same_data(one, two, 1000), "1 and 2 OpenMP threads differ");
        RS_CHECK(same_data(a, one, 1000), "default thread count differs from 1 thread");
    }
    rs_dataset_free(a);
    rs_dataset_free(one);
    rs_dataset_free(two);
}

static void test_balance(void)
{
    const uint32_t ns[] = {7, 10, 1003, 2000};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        rs_dataset *d = make(ns[k], 3);
        if (!d) continue;
        int count[10] = {0}, bad_label = 0;
        for (uint32_t i = 0; i < d->n; i++) {
            if (d->y[i] < 0 || d->y[i] > 9) bad_label++;
            else count[d->y[i]]++;
        }
        RS_CHECK(bad_label == 0, "n=%u: %d labels outside 0..9", ns[k], bad_label);
        for (int c = 0; c < 10; c++)
            RS_CHECK(count[c] >= (int)(ns[k] / 10) && count[c] <= (int)((ns[k] + 9) / 10),
                     "n=%u: class %d has %d samples, want within 1 of %.1f", ns[k], c, count[c], ns[k] / 10.0);
        rs_dataset_free(d);
    }
}

static void test_values(void)
{
    rs_dataset *d = make(2000, 11);
    if (!d) return;
    int out_of_range = 0;
    float lo_ink = 1e9f, hi_ink = 0.0f, lo_peak = 1e9f;
    double corner = 0.0;
    for (uint32_t i = 0; i < d->n; i++) {
        const float *x = d->x + (size_t)i * NPIX;
        float ink = 0.0f, peak = 0.0f;
        for (int p = 0; p < NPIX; p++) {
            if (!(x[p] >= 0.0f && x[p] <= 1.0f)) out_of_range++;
            ink += x[p];
            if (x[p] > peak) peak = x[p];
        }
        corner += (x[0] + x[27] + x[27 * 28] + x[NPIX - 1]) / 4.0;
        if (ink < lo_ink) lo_ink = ink;
        if (ink > hi_ink) hi_ink = ink;
        if (peak < lo_peak) lo_peak = peak;
    }
    RS_CHECK(out_of_range == 0, "%d pixel values outside [0,1] (or NaN)", out_of_range);
    /* Measured over 60,000 samples: ink 29..227 (mean 111, the 1s lowest at ~70), peak >= 0.84,
     * corner pixels 0.008 on average (noise clamped at 0). */
    RS_CHECK(lo_ink > 15.0f && hi_ink < 320.0f, "ink mass per image %.1f..%.1f, want within 15..320", lo_ink,
             hi_ink);
    RS_CHECK(lo_peak > 0.7f, "an image peaks at only %.3f; strokes should reach ~1 like MNIST", lo_peak);
    RS_CHECK(corner / d->n < 0.03, "background should be ~0, corners average %.4f", corner / d->n);

    /* Sorting would be faster; 2M early-exiting memcmp calls are fast enough and need no helper. */
    int dup = 0;
    for (uint32_t i = 0; i < d->n && !dup; i++)
        for (uint32_t j = i + 1; j < d->n; j++)
            if (!memcmp(d->x + (size_t)i * NPIX, d->x + (size_t)j * NPIX, sizeof(float) * NPIX)) {
                RS_CHECK(0, "samples %u and %u are identical", i, j);
                dup = 1;
                break;
            }
    rs_dataset_free(d);
}

static void test_pair(void)
{
    rs_data_pair p = {0};
    rs_err err = {0};
    RS_CHECK(rs_data_digits_pair(300, 200, 5, &p, &err) == RS_OK, "pair: %s", err.msg);
    rs_dataset *plain = make(300, 5);
    if (p.train && p.test && plain) {
        RS_CHECK(p.train->n == 300 && p.test->n == 200, "sizes %u/%u", p.train->n, p.test->n);
        RS_CHECK(same_data(p.train, plain, 300), "train must equal rs_data_digits(n_train, seed)");
        RS_CHECK(!strcmp(p.train->name, "digits-train") && !strcmp(p.test->name, "digits-test"),
                 "names '%s' '%s'", p.train->name, p.test->name);
        RS_CHECK(!strcmp(p.test->source, "digits(n=200,seed=5,split=test)"), "test source '%s'",
                 p.test->source);
        int repeats = 0;
        for (uint32_t i = 0; i < p.test->n; i++)
            for (uint32_t j = 0; j < p.train->n; j++)
                repeats += !memcmp(p.test->x + (size_t)i * NPIX, p.train->x + (size_t)j * NPIX,
                                   sizeof(float) * NPIX);
        RS_CHECK(repeats == 0, "%d test samples repeat a train sample", repeats);
    }
    rs_dataset_free(plain);
    rs_data_pair_clear(&p);
    rs_data_pair_clear(&p); /* freeing twice is harmless: the pair was emptied */
}

/* Nearest class mean in pixel space: the weakest classifier that still learns something. On MNIST
 * it scores about 0.82. */
static void test_learnable(void)
{
    rs_data_pair p = {0};
    rs_err err = {0};
    RS_CHECK(rs_data_digits_pair(5000, 1000, 1, &p, &err) == RS_OK, "pair: %s", err.msg);
    if (!p.train) return;
    static double mean[10][NPIX];
    int count[10] = {0};
    memset(mean, 0, sizeof mean);
    for (uint32_t i = 0; i < p.train->n; i++) {
        int y = p.train->y[i];
        count[y]++;
        for (int k = 0; k < NPIX; k++) mean[y][k] += p.train->x[(size_t)i * NPIX + k];
    }
    for (int c = 0; c < 10; c++)
        for (int k = 0; k < NPIX; k++) mean[c][k] /= count[c] ? count[c] : 1;
    int correct = 0;
    for (uint32_t i = 0; i < p.test->n; i++) {
        const float *x = p.test->x + (size_t)i * NPIX;
        int best = 0;
        double best_d = 1e300;
        for (int c = 0; c < 10; c++) {
            double dist = 0.0;
            for (int k = 0; k < NPIX; k++) dist += (x[k] - mean[c][k]) * (x[k] - mean[c][k]);
            if (dist < best_d) best_d = dist, best = c;
        }
        correct += best == p.test->y[i];
    }
    double acc = (double)correct / p.test->n;
    printf("nearest-class-mean accuracy, 5000 train / 1000 test: %.3f\n", acc);
    /* Measured 0.754 (seed 1), 0.779 (seed 2), 0.764 (seed 3); 1-NN on the same data gets 0.976-0.980.
     * Below 0.65 the digits stopped being readable; above 0.95 the jitter has stopped working. */
    RS_CHECK(acc >= 0.65, "nearest-mean accuracy %.3f < 0.65: digits are not learnable", acc);
    RS_CHECK(acc < 0.95, "nearest-mean accuracy %.3f >= 0.95: the data has lost its variation", acc);
    rs_data_pair_clear(&p);
}

static void test_ascii(void)
{
    float img[NPIX];
    char buf[RS_DATA_DIGITS_ASCII_BYTES];
    for (int k = 0; k < NPIX; k++) img[k] = 0.0f;
    img[5 * 28 + 3] = 1.0f;
    rs_data_digits_ascii(img, buf, sizeof buf);
    RS_CHECK(strlen(buf) == 14 * 29, "length %zu, want 14 rows of 28 + newline", strlen(buf));
    RS_CHECK(buf[28] == '\n' && buf[14 * 29 - 1] == '\n', "rows end in newline");
    RS_CHECK(buf[2 * 29 + 3] != ' ' && buf[2 * 29 + 2] == ' ', "pixel (3,5) is shown in row 2: '%c'",
             buf[2 * 29 + 3]);
    for (int k = 0; k < NPIX; k++) img[k] = 1.0f;
    rs_data_digits_ascii(img, buf, sizeof buf);
    RS_CHECK(buf[0] == '@' && buf[13 * 29 + 27] == '@', "full ink is '@'");
    char small[10];
    memset(small, 'x', sizeof small);
    rs_data_digits_ascii(img, small, sizeof small);
    RS_CHECK(strlen(small) == 9, "a short buffer is filled and terminated, got %zu", strlen(small));
    rs_data_digits_ascii(img, small, 0); /* writes nothing */

    /* One of each digit side by side, for whoever reads the test log. */
    rs_dataset *d = make(10, 2024);
    if (!d) return;
    char pics[10][RS_DATA_DIGITS_ASCII_BYTES];
    for (uint32_t i = 0; i < 10; i++) rs_data_digits_ascii(d->x + (size_t)i * NPIX, pics[d->y[i]], sizeof pics[0]);
    for (int row = 0; row < 14; row++) {
        for (int c = 0; c < 10; c++) printf("%.28s|", pics[c] + row * 29);
        printf("\n");
    }
    rs_dataset_free(d);
}

int main(void)
{
    test_bad_n();
    test_metadata();
    test_determinism();
    test_balance();
    test_values();
    test_pair();
    test_learnable();
    test_ascii();
    return rs_test_finish("digits");
}
