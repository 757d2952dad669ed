/* The layout of a mode=pipeline run, decided before any rank trains: its options, the dp x pp x tp
 * grid of its ranks (grid.h), where the stages are cut (by hand or balanced; never inside a tensor-
 * parallel pair), the parameters two stages on different ranks share, and the check the registry
 * runs at the prompt and on every rank. pipeline.c, the strategy, runs what this decides. */
#ifndef RS_PIPE_LAYOUT_H
#define RS_PIPE_LAYOUT_H

#include <stdbool.h>

#include "engine/nn/tp.h"
#include "grid.h"
#include "pipe_sched.h"
#include "registry.h"

extern const rs_strategy_opt rs_pipe_opts[];

/* partition=: how the stages are cut when split= is not given (the order of the option's choices). */
typedef enum rs_pipe_partition { RS_PIPE_PART_UNIFORM, RS_PIPE_PART_PARAMETERS, RS_PIPE_PART_TIME } rs_pipe_partition;

/* Stages per rank: virtual=, or 2 for schedule=interleaved, else 1. */
int rs_pipe_virtual_of(const rs_strategy_args *a, rs_pipe_kind k);
/* The run's dp x pp x tp grid for `world` ranks and rank's place; RS_ERR_ARG with the arithmetic when
 * the options cannot make it, or when it leaves fewer than 2 stages' ranks. */
rs_status rs_pipe_grid_of(const rs_strategy_args *a, int world, int rank, rs_grid *out, rs_err *err);
/* Whether a stage may begin at whole-model layer `at` (plan NULL: always). */
bool rs_pipe_cut_keeps_pairs(const rs_tp_plan *plan, int at);
/* Where whole-model layer `at` begins in a shard of the plan. */
int rs_pipe_shard_cut(const rs_tp_plan *plan, int at);
/* S stages' cuts (S+1 values) of m from split= or partition= (time: by parameters here), only between pairs of plan (may be
 * NULL). RS_ERR_ARG naming a split= cut inside a pair. */
rs_status rs_pipe_cuts_for(const rs_strategy_args *a, const rs_model *m, int S, const rs_tp_plan *plan, int *cuts,
                           rs_err *err);
/* Calls fn for every tied slot the cuts put on another of P ranks than its owner (stage s runs on rank
 * s % P). want: tie= (NULL or "auto": all); a shared parameter it leaves out, or a name in it that is
 * none, is RS_ERR_ARG. */
typedef void (*rs_pipe_tie_fn)(void *ud, size_t off, size_t numel, int owner_rank, int reader_rank);
rs_status rs_pipe_find_ties(const char *want, const rs_model *m, const int *cuts, int P, int S, rs_pipe_tie_fn fn,
                            void *ud, rs_err *err);
/* The registry's check (registry.h): m and cfg may be NULL. */
rs_status rs_pipe_layout_check(const rs_strategy_args *a, const rs_model *m, int world, const rs_train_cfg *cfg,
                               rs_err *err);

#endif
