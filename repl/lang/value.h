/* Typed values of the command language: what the word after `name=` means for each option type, and
 * the reverse (a value written the way users type it, for `help` defaults). Parsers take one word and
 * either fill the value or return RS_ERR_ARG with a message naming what was expected and quoting the
 * word, e.g. "expected a size such as 16M, got '16Q'"; the message carries no position (the caller
 * knows the token and puts the caret) and no command name (the caller adds it with rs_err_prefix).
 * Numbers are read the same whatever the locale ('.' is the decimal point). */
#ifndef RS_VALUE_H
#define RS_VALUE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"

#define RS_VAL_SHAPE_MAX 8

/* A plain integer: [+-]digits, no unit, no point. */
rs_status rs_val_int(const char *word, int64_t *out, rs_err *err);

/* A float: 0.05, .5, 5., 1e-3, -2.5E+2; no inf, nan or hex. */
rs_status rs_val_float(const char *word, double *out, rs_err *err);

/* A ratio from 0 to 1: 0.1 or 10%. */
rs_status rs_val_ratio(const char *word, double *out, rs_err *err);

/* A size in bytes: a whole number with an optional unit K, M, G, T, P, E, each 1024 times the one
 * before (as nccl-tests' -b/-e read them); KB and KiB mean K too, B alone means bytes, case does not
 * matter. A fraction is fine when it makes whole bytes: 1.5K = 1536, 1.3K is an error. At most
 * INT64_MAX bytes, so the value fits an int64_t, off_t or size_t. */
rs_status rs_val_size(const char *word, uint64_t *out, rs_err *err);

/* A size range LO..HI (8..64M) with LO <= HI; one size alone gives LO = HI. */
rs_status rs_val_size_range(const char *word, uint64_t *lo, uint64_t *hi, rs_err *err);

/* A duration, in seconds: a float with a unit ns, us (or µs), ms, s, m (minutes), h. The unit is
 * required (is `delay=500` microseconds or seconds?) except for 0. No negatives. */
rs_status rs_val_duration(const char *word, double *seconds, rs_err *err);

/* on/off, true/false, yes/no, 1/0 (any case). */
rs_status rs_val_bool(const char *word, int *out, rs_err *err);

/* One of names[0..n-1] (any case): *out is its index. The error lists the names and suggests a near
 * miss. */
rs_status rs_val_enum(const char *word, const char *const *names, int n, int *out, rs_err *err);

/* A shape such as 1x28x28 (or 784): 1 to max dimensions (max <= RS_VAL_SHAPE_MAX), each >= 1, the
 * product within int64_t. */
rs_status rs_val_shape(const char *word, int64_t *dims, int max, int *ndim, rs_err *err);

/* The candidate closest to word, ignoring case, or NULL: edit distance at most 2, or 1 for words of up
 * to 3 bytes (so "rd" does not suggest "relu"). For "did you mean" hints. */
const char *rs_val_near_miss(const char *word, const char *const *cands, int n);

/* Writes bytes as users type it: the largest unit that keeps it exact with at most three decimals
 * ("16M", "1.5K", "1000", "0"); rs_val_size reads it back to the same value (up to INT64_MAX). Returns
 * the length it needs, as snprintf does. */
int rs_val_fmt_size(uint64_t bytes, char *buf, size_t n);

/* Writes a duration (seconds >= 0) in a unit that reads well ("500us", "2ms", "1.5s", "2m", "1h") with
 * the fewest digits that rs_val_duration reads back to the same double. Returns as snprintf does. */
int rs_val_fmt_duration(double seconds, char *buf, size_t n);

#endif
