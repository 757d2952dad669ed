/* What the plan tests share: inputs for a model, and a plan's output against the engine's relative
 * to the output's scale. Include after rs_test.h. */
#ifndef RS_TESTS_PLAN_CHECK_H
#define RS_TESTS_PLAN_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/nn/model.h"
#include "plan/plan.h"

static inline double max_abs(const float *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(a[i]) > m) m = fabs(a[i]);
    return m;
}

static inline double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

/* Inputs for B samples of m: floats in [-1, 1), or token ids below the vocabulary. */
static inline void *inputs(rs_model *m, int B, uint64_t seed)
{
    size_t n = (size_t)B * (size_t)rs_shape_numel(rs_model_input_shape(m));
    float *x = malloc(n * sizeof *x);
    rs_rng r;
    rs_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        if (rs_model_tokens(m)) ((int32_t *)(void *)x)[i] = (int32_t)rs_rng_below(&r, (uint64_t)rs_model_vocab(m));
        else x[i] = 2.0f * (float)rs_rng_uniform(&r) - 1.0f;
    }
    return x;
}

static inline size_t out_numel(rs_plan *p, int B) { return (size_t)B * rs_plan_rows(p) * rs_plan_classes(p); }

/* Engine vs plan at B; returns the max difference relative to the output's scale. */
static inline double compare(rs_model *m, rs_plan *p, int B, const char *what)
{
    void *x = inputs(m, B, 11 + (uint64_t)B);
    const float *ref, *got;
    rs_err e = {0};
    rs_model_set_training(m, false);
    RS_CHECK(rs_model_forward(m, x, B, &ref, &e) == RS_OK, "%s: engine: %s", what, e.msg);
    size_t n = out_numel(p, B);
    float *keep = malloc(n * sizeof *keep);
    memcpy(keep, ref, n * sizeof *keep);
    double rel = 1e9;
    if (rs_plan_run(p, x, B, &got, &e) == RS_OK) rel = max_diff(got, keep, n) / fmax(1.0, max_abs(keep, n));
    else RS_CHECK(0, "%s: plan run at B=%d: %s", what, B, e.msg);
    free(keep);
    free(x);
    return rel;
}

/* Plan bytes b are refused, by the loader or (inspect) by what `plan show` reads with, and the
 * message holds needle. */
static inline void expect_bytes_refused(const uint8_t *b, size_t n, bool inspect, const char *needle, const char *what)
{
    rs_err e = {0};
    rs_plan *p = NULL;
    rs_status st = inspect ? rs_plan_inspect_buffer(b, n, "t.plan", &p, &e) : rs_plan_load_buffer(b, n, "t.plan", &p, &e);
    RS_CHECK(st != RS_OK && !p, "%s: read", what);
    RS_CHECK(strstr(e.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, needle);
    rs_plan_free(p);
}

/* p written with its string field (cap bytes) set to value is refused as above; the field is put back. */
static inline void expect_field_refused(rs_plan *p, char *field, size_t cap, const char *value, bool inspect,
                                        const char *needle, const char *what)
{
    char keep[256]; /* fields of rs_plan hold at most 160 */
    size_t nk = cap < sizeof keep ? cap : sizeof keep;
    memcpy(keep, field, nk);
    snprintf(field, cap, "%s", value);
    uint8_t *buf = NULL;
    size_t n = 0;
    rs_err e = {0};
    RS_CHECK(rs_plan_serialize(p, &buf, &n, &e) == RS_OK, "%s: %s", what, e.msg);
    if (buf) expect_bytes_refused(buf, n, inspect, needle, what);
    free(buf);
    memcpy(field, keep, nk);
}

#endif
