/* The dp x pp x tp layout of a run's ranks and its sub-groups (see grid.h). */
#include "grid.h"

#include <stdio.h>
#include <stdlib.h>

rs_status rs_grid_new(int world, int dp, int pp, int tp, int rank, rs_grid *out, rs_err *err)
{
    if (dp < 1 || tp < 1 || pp < 0)
        return rs_err_set(err, RS_ERR_ARG, "dp=%d, pp=%d, tp=%d: each must be 1 or more", dp, pp, tp);
    int per_stage = dp * tp;
    if (!pp) {
        if (world % per_stage) {
            /* the multiples of dp x tp either side of world; below one stage there is none to offer */
            int lo = world / per_stage * per_stage, hi = lo + per_stage;
            char use[48];
            if (lo) snprintf(use, sizeof use, "ranks=%d or %d", lo, hi);
            else snprintf(use, sizeof use, "ranks=%d", hi);
            return rs_err_set(err, RS_ERR_ARG,
                              "ranks=%d does not split into stages of dp=%d x tp=%d = %d ranks (pp would be %d/%d); "
                              "use %s, or give dp= and tp= whose product divides %d",
                              world, dp, tp, per_stage, world, per_stage, use, world);
        }
        pp = world / per_stage;
    }
    if ((long long)dp * pp * tp != world)
        return rs_err_set(err, RS_ERR_ARG,
                          "dp=%d x pp=%d x tp=%d = %lld ranks, but this run has ranks=%d; choose dp, pp and tp whose "
                          "product is %d (or ranks=%lld)",
                          dp, pp, tp, (long long)dp * pp * tp, world, world, (long long)dp * pp * tp);
    *out = (rs_grid){.dp = dp, .pp = pp, .tp = tp, .t = rank % tp, .d = (rank / tp) % dp, .p = rank / per_stage};
    return RS_OK;
}

int rs_grid_rank(const rs_grid *g, int d, int p, int t) { return p * g->dp * g->tp + d * g->tp + t; }

/* Every rank makes every group of one dimension (torch's rule for new_group); it keeps its own. */
static rs_status make_dim(rs_pg *w, const rs_grid *g, char dim, int *ranks, rs_pg **mine, rs_err *err)
{
    int n = dim == 'd' ? g->dp : dim == 'p' ? g->pp : g->tp;
    *mine = NULL;
    if (n == 1) return RS_OK;
    if (n == w->world) {
        *mine = w;
        return RS_OK;
    }
    /* the groups of this dimension: one per value of the other two indices */
    for (int a = 0; a < w->world / n; a++) {
        for (int k = 0; k < n; k++) {
            rs_grid at = *g;
            if (dim == 'd') at.p = a / g->tp, at.t = a % g->tp, at.d = k;
            else if (dim == 'p') at.d = a / g->tp, at.t = a % g->tp, at.p = k;
            else at.p = a / g->dp, at.d = a % g->dp, at.t = k;
            ranks[k] = rs_grid_rank(g, at.d, at.p, at.t);
        }
        rs_pg *sub = NULL;
        rs_status st = rs_pg_new_group(w, ranks, n, &sub, err);
        if (st) return st;
        if (sub) *mine = sub;
    }
    return RS_OK;
}

rs_status rs_grid_groups_new(rs_pg *w, const rs_grid *g, rs_grid_groups *out, rs_err *err)
{
    *out = (rs_grid_groups){0};
    int *ranks = malloc((size_t)w->world * sizeof *ranks); /* freed here */
    if (!ranks) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    rs_status st = make_dim(w, g, 't', ranks, &out->tp, err);
    if (!st) st = make_dim(w, g, 'd', ranks, &out->dp, err);
    if (!st) st = make_dim(w, g, 'p', ranks, &out->pp, err);
    free(ranks);
    if (st) rs_grid_groups_clear(out, w);
    return st;
}

void rs_grid_groups_clear(rs_grid_groups *gg, rs_pg *w)
{
    rs_pg *all[3] = {gg->dp, gg->pp, gg->tp};
    for (int i = 0; i < 3; i++)
        if (all[i] && all[i] != w) rs_pg_destroy(all[i]);
    *gg = (rs_grid_groups){0};
}
