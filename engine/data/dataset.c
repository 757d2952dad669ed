/* Allocation of data sets and the one accessor of their samples (see dataset.h). Sizes are checked for
 * overflow here once, so readers can pass header-derived shapes straight in after validating them
 * against the file length. */
#include "engine/data/dataset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* c*h*w, or 0 when a dimension is not positive or the product overflows a size_t of floats. */
static size_t sample_numel(int c, int h, int w)
{
    if (c <= 0 || h <= 0 || w <= 0) return 0;
    size_t per = (size_t)c * (size_t)h;
    if (per > SIZE_MAX / sizeof(float) / (size_t)w) return 0;
    return per * (size_t)w;
}

static void set_shape(rs_dataset *d, uint32_t n, int c, int h, int w, int n_classes, int y_len)
{
    d->n = n;
    d->c = c;
    d->h = h;
    d->w = w;
    d->y_len = y_len;
    d->n_classes = n_classes;
}

rs_dataset *rs_dataset_new_labels(uint32_t n, int c, int h, int w, int n_classes, int y_len)
{
    size_t per = sample_numel(c, h, w);
    if (!per || n_classes < 0 || y_len < 1) return NULL;
    if (n && (per > SIZE_MAX / sizeof(float) / n || (size_t)y_len > SIZE_MAX / sizeof(int32_t) / n)) return NULL;
    rs_dataset *d = calloc(1, sizeof *d); /* caller owns, with x and y */
    if (!d) return NULL;
    size_t numel = (size_t)n * per, ny = (size_t)n * (size_t)y_len;
    d->x = calloc(numel ? numel : 1, sizeof(float));
    d->y = calloc(ny ? ny : 1, sizeof(int32_t));
    if (!d->x || !d->y) {
        rs_dataset_free(d);
        return NULL;
    }
    set_shape(d, n, c, h, w, n_classes, y_len);
    return d;
}

rs_dataset *rs_dataset_new(uint32_t n, int c, int h, int w, int n_classes)
{
    return rs_dataset_new_labels(n, c, h, w, n_classes, 1);
}

rs_dataset *rs_dataset_new_lazy(uint32_t n, int c, int h, int w, int n_classes, int y_len, rs_dataset_fetch_fn fetch,
                                void *impl, void (*impl_free)(void *impl))
{
    rs_dataset *d = NULL;
    if (sample_numel(c, h, w) && n_classes >= 0 && y_len >= 1 && fetch) d = calloc(1, sizeof *d); /* caller owns */
    if (!d) {
        if (impl_free) impl_free(impl);
        return NULL;
    }
    set_shape(d, n, c, h, w, n_classes, y_len);
    d->fetch = fetch;
    d->impl = impl;
    d->impl_free = impl_free;
    return d;
}

void rs_dataset_get(const rs_dataset *d, uint32_t i, void *x, int32_t *y)
{
    if (d->fetch) {
        d->fetch(d, i, x, y);
        return;
    }
    size_t per = rs_dataset_sample_numel(d), ny = d->y_len > 0 ? (size_t)d->y_len : 1;
    /* memcpy, not float assignment: a token set's elements are int32 bit patterns */
    if (x) memcpy(x, d->x + (size_t)i * per, per * sizeof(float));
    if (y) memcpy(y, d->y + (size_t)i * ny, ny * sizeof(int32_t));
}

void rs_dataset_free(rs_dataset *d)
{
    if (!d) return;
    if (d->impl_free) d->impl_free(d->impl);
    free(d->x);
    free(d->y);
    free(d);
}

void rs_data_pair_clear(rs_data_pair *p)
{
    if (!p) return;
    rs_dataset_free(p->train);
    rs_dataset_free(p->test);
    p->train = p->test = NULL;
}
