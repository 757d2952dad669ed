/* Allocation of data sets (see dataset.h). */
#include "dataset.h"

#include <stdlib.h>

rs_dataset *rs_dataset_new(uint32_t n, int c, int h, int w, int n_classes)
{
    rs_dataset *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    size_t per = (size_t)c * h * w;
    d->x = calloc((size_t)n * per ? (size_t)n * per : 1, sizeof(float));
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
