/* Data sets: n samples of one shape (c, h, w) stored as normalised f32 plus an int32 label each.
 * Sources: Fashion-MNIST from Debian's package, the built-in `digits` generator, IDX file pairs
 * (plain or .gz), CIFAR-10 binary batches and CSV (readers in data.h; each names the file, the byte
 * offset and what was wrong when it rejects input). Batching across ranks is in loader.h. */
#ifndef RS_DATASET_H
#define RS_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"

typedef struct rs_dataset {
    char name[64];       /* short name, e.g. "fashion-train" */
    char source[512];    /* where it came from: path(s) or "digits(n=...,seed=...)" */
    uint32_t n;          /* number of samples */
    int c, h, w;         /* per-sample shape; tabular data is (1, 1, features) */
    float *x;            /* (n, c*h*w), values scaled to [0,1] for images; owned */
    int32_t *y;          /* (n), labels in [0, n_classes); owned */
    int n_classes;
    const char *const *class_names; /* optional, static strings, n_classes entries; may be NULL */
} rs_dataset;

/* A data set with its held-out split. train/test are owned by the pair. */
typedef struct rs_data_pair {
    rs_dataset *train;
    rs_dataset *test;
} rs_data_pair;

static inline size_t rs_dataset_sample_numel(const rs_dataset *d) { return (size_t)d->c * d->h * d->w; }

/* Allocates an empty data set of n samples of shape (c,h,w) (x and y zeroed). Caller owns it. NULL when
 * out of memory, when c, h or w is not positive, or when the sizes overflow. */
rs_dataset *rs_dataset_new(uint32_t n, int c, int h, int w, int n_classes);
void rs_dataset_free(rs_dataset *d);
void rs_data_pair_free(rs_data_pair *p);

#endif
