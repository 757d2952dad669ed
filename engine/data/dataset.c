/* Allocation of data sets (see dataset.h). Sizes are checked for overflow here once, so readers can
 * pass header-derived shapes straight in after validating them against the file length. */
#include "engine/data/dataset.h"

#include <stdint.h>
#include <stdlib.h>

rs_dataset *rs_dataset_new(uint32_t n, int c, int h, int w, int n_classes)
{
    if (c <= 0 || h <= 0 || w <= 0 || n_classes < 0) return NULL;
    size_t per = (size_t)c * (size_t)h;
    if (per > SIZE_MAX / (size_t)w) return NULL;
    per *= (size_t)w;
    if (n && per > SIZE_MAX / sizeof(float) / n) return NULL;
    rs_dataset *d = calloc(1, sizeof *d); /* caller owns, with x and y */
    if (!d) return NULL;
    size_t numel = (size_t)n * per;
    d->x = calloc(numel ? numel : 1, sizeof(float));
    d->y = calloc(n ? n : 1, sizeof(int32_t));
    if (!d->x || !d->y) {
        rs_dataset_free(d);
        return NULL;
    }
    d->n = n;
    d->c = c;
    d->h = h;
    d->w = w;
    d->n_classes = n_classes;
    return d;
}

void rs_dataset_free(rs_dataset *d)
{
    if (!d) return;
    free(d->x);
    free(d->y);
    free(d);
}

void rs_data_pair_free(rs_data_pair *p)
{
    if (!p) return;
    rs_dataset_free(p->train);
    rs_dataset_free(p->test);
    p->train = p->test = NULL;
}
