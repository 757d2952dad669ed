/* The real Fashion-MNIST from Debian's dataset-fashion-mnist: 60000 training and 10000 test images of
 * 28x28, labels 0..9, 6000 training images per class. Skipped (exit 77) where the package is missing. */
#include <string.h>
#include <sys/stat.h>

#include "engine/data/data.h"
#include "tests/rs_test.h"

static void check(const rs_dataset *d, uint32_t n, const char *name)
{
    RS_CHECK(d->n == n && d->c == 1 && d->h == 28 && d->w == 28, "%s: n=%u (%d,%d,%d)", name, d->n, d->c,
             d->h, d->w);
    RS_CHECK(d->n_classes == 10 && d->class_names && !strcmp(d->class_names[0], "T-shirt/top"), "%s classes",
             name);
    uint32_t per[10] = {0};
    int out_of_range = 0;
    for (uint32_t i = 0; i < d->n; i++) {
        if (d->y[i] < 0 || d->y[i] > 9) out_of_range++;
        else per[d->y[i]]++;
    }
    RS_CHECK(out_of_range == 0, "%s: %d labels outside 0..9", name, out_of_range);
    for (int c = 0; c < 10; c++)
        RS_CHECK(per[c] == n / 10, "%s: class %d (%s) has %u samples, want %u", name, c, d->class_names[c], per[c],
                 n / 10);
    float lo = 1, hi = 0;
    double sum = 0;
    size_t numel = (size_t)d->n * 784;
    for (size_t i = 0; i < numel; i++) {
        lo = d->x[i] < lo ? d->x[i] : lo;
        hi = d->x[i] > hi ? d->x[i] : hi;
        sum += d->x[i];
    }
    RS_CHECK(lo == 0.0f && hi == 1.0f, "%s: pixel range [%g, %g]", name, lo, hi);
    /* torchvision's figure for the training set's mean pixel is 0.2860 */
    printf("  %s: mean pixel %.4f\n", name, sum / (double)numel);
    RS_CHECK(sum / (double)numel > 0.27 && sum / (double)numel < 0.30, "%s: mean pixel %g", name,
             sum / (double)numel);
}

int main(void)
{
    struct stat st;
    if (stat(RS_DATA_FASHION_DIR, &st) != 0)
        RS_SKIP("%s is missing: apt-get install dataset-fashion-mnist", RS_DATA_FASHION_DIR);
    rs_data_pair p = {0};
    rs_err e = {0};
    rs_status s = rs_data_fashion(NULL, &p, &e);
    RS_CHECK(s == RS_OK, "rs_data_fashion: %s", e.msg);
    if (s == RS_OK) {
        check(p.train, 60000, "train");
        check(p.test, 10000, "test");
        RS_CHECK(!strcmp(p.train->name, "fashion-train") && strstr(p.train->source, "train-images"), "name/source");
    }
    rs_data_pair_clear(&p);
    return rs_test_finish("data-fashion");
}
