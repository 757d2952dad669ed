/* Train/test split for sources that ship a single file (CSV, a lone IDX pair): a seeded shuffle picks
 * the test samples, so the same seed gives the same split on every machine and every rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/data/data.h"

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* A new data set of the samples idx[0..n) of src, in that order. Caller owns it. */
static rs_dataset *gather(const rs_dataset *src, const uint32_t *idx, uint32_t n, const char *suffix)
{
    rs_dataset *d = rs_dataset_new_labels(n, src->c, src->h, src->w, src->n_classes, src->y_len);
    if (!d) return NULL;
    size_t per = rs_dataset_sample_numel(src), ny = (size_t)src->y_len;
    for (uint32_t i = 0; i < n; i++) rs_dataset_get(src, idx[i], d->x + (size_t)i * per, d->y + (size_t)i * ny);
    d->tokens = src->tokens;
    d->class_names = src->class_names;
    snprintf(d->name, sizeof d->name, "%.*s-%s", (int)(sizeof d->name - 7), src->name, suffix);
    memcpy(d->source, src->source, sizeof d->source);
    return d;
}

rs_status rs_data_split(rs_dataset *all, double test_frac, uint64_t seed, rs_data_pair *out,
                        rs_err *err)
{
    out->train = out->test = NULL;
    if (!all) return rs_err_set(err, RS_ERR_ARG, "split: no data set");
    rs_status s = RS_OK;
    double want = round((double)all->n * test_frac);
    uint32_t *perm = NULL; /* ours */
    if (!(test_frac > 0 && test_frac < 1))
        s = rs_err_set(err, RS_ERR_ARG, "split: test fraction %g is not between 0 and 1 (e.g. 0.2)",
                       test_frac);
    else if (all->n < 2 || want < 1 || want > (double)all->n - 1)
        s = rs_err_set(err, RS_ERR_ARG,
                       "split: %u samples with test fraction %g leaves %s empty; use a fraction that "
                       "puts at least one sample on each side",
                       all->n, test_frac, want < 1 ? "the test set" : "the training set");
    else if (!(perm = malloc((size_t)all->n * sizeof *perm)))
        s = rs_err_set(err, RS_ERR_NOMEM, "split: out of memory");
    if (s == RS_OK) {
        uint32_t nt = (uint32_t)want;
        for (uint32_t i = 0; i < all->n; i++) perm[i] = i;
        rs_rng r;
        rs_rng_seed(&r, seed);
        rs_rng_shuffle_u32(&r, perm, all->n);
        /* Sorting each side keeps the source's order: the split is a choice of samples, not a shuffle. */
        qsort(perm, nt, sizeof *perm, cmp_u32);
        qsort(perm + nt, all->n - nt, sizeof *perm, cmp_u32);
        out->test = gather(all, perm, nt, "test");
        out->train = gather(all, perm + nt, all->n - nt, "train");
        if (!out->test || !out->train) {
            rs_data_pair_clear(out);
            s = rs_err_set(err, RS_ERR_NOMEM, "split: out of memory copying %u samples", all->n);
        }
    }
    free(perm);
    rs_dataset_free(all);
    return s;
}
