/* A run's ranks laid out as dp x pp x tp (data, pipeline and tensor parallel), Megatron-LM's order:
 * the tensor-parallel index runs fastest, then the data-parallel one, the pipeline stage slowest, so
 *     global rank = p * (dp * tp) + d * tp + t
 * and a tensor-parallel group is tp consecutive ranks (one host, where its per-layer all-reduces are
 * cheapest), a stage's replicas the next block. Each rank belongs to one group per dimension: the ranks
 * that differ from it only in t (its tp group), only in d (its dp group: the replicas of the same stage
 * and shard, which average their gradients), only in p (its pp group: the stages one micro-batch goes
 * through, which send each other activations and gradients). */
#ifndef RS_GRID_H
#define RS_GRID_H

#include "dist/pg/pg.h"

typedef struct rs_grid {
    int dp, pp, tp; /* sizes: dp * pp * tp = world */
    int d, p, t;    /* this rank's place */
} rs_grid;

/* The layout of `world` ranks for dp, pp and tp (pp 0: world / (dp * tp)), and rank's place in it.
 * RS_ERR_ARG with the arithmetic when the three do not multiply to world (naming a layout that would). */
rs_status rs_grid_new(int world, int dp, int pp, int tp, int rank, rs_grid *out, rs_err *err);
/* The global rank at (d, p, t). */
int rs_grid_rank(const rs_grid *g, int d, int p, int t);

/* This rank's three groups, made from the world group `w` (every rank of w calls it: each sub-group is
 * made by all). A dimension of size 1 has no group (NULL); one as large as the world is w itself. */
typedef struct rs_grid_groups {
    rs_pg *dp, *pp, *tp;
} rs_grid_groups;
rs_status rs_grid_groups_new(rs_pg *w, const rs_grid *g, rs_grid_groups *out, rs_err *err);
/* Destroys the groups that are not w itself (before w). */
void rs_grid_groups_clear(rs_grid_groups *gg, rs_pg *w);

#endif
