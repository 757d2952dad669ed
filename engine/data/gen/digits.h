/* digits: the built-in data set, 28x28 grayscale handwritten-style digits 0-9 drawn from stroke glyphs
 * the project defines itself, so ringside trains and demos with nothing installed or downloaded.
 * Sample i is a pure function of (seed, split, i): any n, the same prefix, the same bytes on any
 * number of threads. */
#ifndef RS_DIGITS_H
#define RS_DIGITS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"
#include "engine/data/dataset.h"

/* Largest n accepted: 10M samples are 31 GB of f32, past what a workbench should allocate by typo. */
#define RS_DATA_DIGITS_MAX_N 10000000u

/* Bytes rs_data_digits_ascii needs for the whole picture: 14 rows of 28 chars and '\n', then '\0'. */
#define RS_DATA_DIGITS_ASCII_BYTES (14 * 29 + 1)

/* n samples of shape (1,28,28), ink ~1 on background ~0 like MNIST, labels 0..9 with every class
 * count within 1 of n/10, name "digits", source "digits(n=N,seed=S)". n must be in
 * 1..RS_DATA_DIGITS_MAX_N (else RS_ERR_ARG). On success the caller owns *out. */
rs_status rs_data_digits(uint32_t n, uint64_t seed, rs_dataset **out, rs_err *err);

/* A train set equal to rs_data_digits(n_train, seed) (named "digits-train") and a test set from a
 * disjoint stream of the same seed ("digits-test"), so no test sample repeats a train sample.
 * On success the caller owns *out (free with rs_data_pair_clear); on failure *out is left empty. */
rs_status rs_data_digits_pair(uint32_t n_train, uint32_t n_test, uint64_t seed, rs_data_pair *out,
                              rs_err *err);

/* Renders one 28x28 image (values in [0,1]) as 14 text rows of 28 chars from the ramp " .:-=+*#%@",
 * each row ending in '\n' (two image rows per text row, since a terminal cell is about twice as tall
 * as wide). Writes at most n bytes, always NUL-terminated when n > 0; RS_DATA_DIGITS_ASCII_BYTES
 * holds it all. */
void rs_data_digits_ascii(const float *img, char *buf, size_t n);

#endif
