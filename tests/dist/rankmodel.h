/* What the tests of training across ranks share: each rank's group, model and data, and the
 * comparison of the trained weights with one process's. Header-only like forkranks.h. */
#ifndef RS_TEST_RANKMODEL_H
#define RS_TEST_RANKMODEL_H

#include <math.h>
#include <stdio.h>

#include "dist/pg/pg.h"
#include "engine/data/source.h"
#include "engine/nn/spec.h"

/* Rank `rank`'s group (named `name`), model (spec, seed 11) and data (uri, seed 3). The ranks other
 * than 0 shift their weights by 0.5, so the strategy under test must start them from rank 0's. On
 * failure prints the rank and the message and returns non-zero; the caller owns what was made. */
static inline int rs_test_rank_model(const char *backend, rs_store *st, const char *name, int rank, int world,
                                     const char *spec, const char *uri, rs_pg **g, rs_model **m,
                                     rs_data_pair *data)
{
    rs_err e = {0};
    if (rs_pg_new(backend, st, name, rank, world, 30, g, &e) ||
        rs_model_parse(spec, "m", rs_device_cpu(), NULL, 11, m, NULL, &e) || rs_data_open(uri, 3, data, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        return 1;
    }
    if (rank) {
        float *p = rs_model_params(*m);
        for (size_t i = 0; i < rs_model_numel(*m); i++) p[i] += 0.5f;
    }
    return 0;
}

/* Relative difference of the whole weight vector, ||a - b|| / ||b||. Element-wise relative error is
 * the wrong yardstick for Adam: a weight whose gradient is ~1e-8 (a pixel that is almost always 0)
 * moves by lr * g / (|g| + eps), so the rounding of g in the 7th digit decides most of its update.
 * Those weights are few and tiny; the norm weighs them as what they are. worst_elem (may be NULL)
 * gets the largest element-wise |a - b| / (|b| + 0.01). */
static inline double rs_test_rel_diff(const float *a, const float *b, size_t n, double *worst_elem)
{
    double num = 0, den = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
        double e = fabs(d) / (fabs((double)b[i]) + 1e-2);
        if (e > worst) worst = e;
    }
    if (worst_elem) *worst_elem = worst;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif
