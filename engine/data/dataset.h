/* Data sets: n samples of one shape (c, h, w) plus y_len int32 labels each. Most sets store their
 * samples (x as normalised f32, y one label); a text corpus produces its windows on demand (fetch),
 * since 2.5 MB of text are 2.5 M overlapping windows. Read samples only through rs_dataset_get.
 * Sources: Fashion-MNIST from Debian's package, the built-in `digits` generator, IDX file pairs
 * (plain or .gz), CIFAR-10 binary batches, CSV and character-level text (readers in data.h; each names
 * the file, the byte offset and what was wrong when it rejects input). Batching across ranks is in
 * loader.h. */
#ifndef RS_DATASET_H
#define RS_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"

typedef struct rs_dataset rs_dataset;

/* Produces sample i: its c*h*w 4-byte elements into x and its y_len labels into y. Either pointer may
 * be NULL (that part is not wanted). i < d->n. Must be safe to call from several threads at once. */
typedef void (*rs_dataset_fetch_fn)(const rs_dataset *d, uint32_t i, void *x, int32_t *y);

struct rs_dataset {
    char name[64];       /* short name, e.g. "fashion-train" */
    char source[512];    /* where it came from: path(s) or "digits(n=...,seed=...)" */
    uint32_t n;          /* number of samples */
    int c, h, w;         /* per-sample shape; tabular data is (1, 1, features), a text window (1, 1, T) */
    int y_len;           /* labels per sample: 1 for classes, T for a window of next tokens */
    bool tokens;         /* x's 4-byte elements are int32 token ids in [0, n_classes), not floats:
                            copy them with memcpy or read them as int32, never as float */
    float *x;            /* (n, c*h*w), values scaled to [0,1] for images; owned. NULL when fetch is set */
    int32_t *y;          /* (n, y_len), labels in [0, n_classes); owned. NULL when fetch is set */
    int n_classes;       /* classes, or the vocabulary size of a token set */
    const char *const *class_names; /* optional, static strings, n_classes entries; may be NULL */
    /* The lazy form: when fetch is set, samples are produced on demand from impl (owned, released
     * with impl_free when the data set is freed; impl_free may be NULL). */
    rs_dataset_fetch_fn fetch;
    void *impl;
    void (*impl_free)(void *impl);
};

/* A data set with its held-out split. train/test are owned by the pair. */
typedef struct rs_data_pair {
    rs_dataset *train;
    rs_dataset *test;
} rs_data_pair;

static inline size_t rs_dataset_sample_numel(const rs_dataset *d) { return (size_t)d->c * d->h * d->w; }

/* Sample i of d (i < d->n): its c*h*w 4-byte elements into x (floats, or int32 ids when d->tokens) and
 * its y_len labels into y, whichever form d has. x or y may be NULL to skip that part. The only way the
 * engine reads a data set's samples. */
void rs_dataset_get(const rs_dataset *d, uint32_t i, void *x, int32_t *y);

/* Allocates an empty data set of n samples of shape (c,h,w) with one label each (x and y zeroed).
 * Caller owns it. NULL when out of memory, when c, h or w is not positive, or when the sizes
 * overflow. */
rs_dataset *rs_dataset_new(uint32_t n, int c, int h, int w, int n_classes);
/* The same with y_len labels per sample (y is (n, y_len)). */
rs_dataset *rs_dataset_new_labels(uint32_t n, int c, int h, int w, int n_classes, int y_len);
/* A lazy data set: n samples of shape (c,h,w) and y_len labels produced by fetch from impl, which the
 * data set owns from here on (impl_free(impl) runs when it is freed, and also when this fails). Caller
 * owns the result; NULL when out of memory or a size is not positive. */
rs_dataset *rs_dataset_new_lazy(uint32_t n, int c, int h, int w, int n_classes, int y_len, rs_dataset_fetch_fn fetch,
                                void *impl, void (*impl_free)(void *impl));
void rs_dataset_free(rs_dataset *d);
/* Frees both data sets and sets them to NULL; the pair itself stays the caller's (NULL is fine). */
void rs_data_pair_clear(rs_data_pair *p);

#endif
