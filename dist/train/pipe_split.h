/* Where a pipeline cuts the model: S stages of contiguous layers, given by hand (`split=3,6` cuts before
 * layers 3 and 6) or balanced over the model's top-level items (rs_model_top_items: a block stays
 * whole) by parameters or by measured time, minimising the largest stage (the one the others wait
 * for). A stage is layers [cuts[s], cuts[s+1]); cuts[0] = 0 and cuts[S] = the layer count. */
#ifndef RS_PIPE_SPLIT_H
#define RS_PIPE_SPLIT_H

#include <stdbool.h>

#include "engine/nn/model.h"

/* "3,6": S-1 increasing layer indices, each a legal cut (rs_model_cut_ok). RS_ERR_ARG naming the
 * bad index and listing the legal cuts. */
rs_status rs_pipe_split_parse(const rs_model *m, const char *text, int S, int *cuts, rs_err *err);
/* Cuts between top-level items minimising the largest stage's cost; cost[i] is item i's (n_items of
 * them, rs_model_top_items' order). RS_ERR_ARG when there are fewer items than stages. */
rs_status rs_pipe_split_balance(const rs_model *m, const double *cost, int S, int *cuts, rs_err *err);
/* The same with only the cuts at layers `at` where ok[at] (ok: layer count + 1 flags; a tensor-parallel
 * pair must stay in one stage). RS_ERR_ARG when no S stages can be cut that way. */
rs_status rs_pipe_split_balance_where(const rs_model *m, const double *cost, int S, const bool *ok, int *cuts,
                                      rs_err *err);
/* The top-level items' parameters (as costs); returns how many items (at most max). */
int rs_pipe_item_params(const rs_model *m, double *cost, int max);
/* Each top-level item's forward + backward seconds on a batch of B zeros (the fastest of a few runs),
 * measured through the unit hooks in the process's CPU time (what other programs on the cores take
 * is not the layer's); the model's gradients and step are left as they were. */
rs_status rs_pipe_item_times(rs_model *m, int B, double *cost, int max, int *n, rs_err *err);
/* "0..3 | 4..7" style text of the stages' layers, for messages. */
void rs_pipe_split_text(const int *cuts, int S, char *buf, size_t cap);

#endif
