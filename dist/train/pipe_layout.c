/* The layout of a mode=pipeline run (see pipe_layout.h). */
#include "pipe_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipe_split.h"

static const char *const schedules[] = {"naive", "gpipe", "1f1b", "interleaved", NULL}; /* rs_pipe_kind */
static const char *const partitions[] = {"uniform", "parameters", "time", NULL}; /* rs_pipe_partition */

const rs_strategy_opt rs_pipe_opts[] = {
    {"schedule", RS_SOPT_ENUM, "1f1b",
     "pipeline: naive (no micro-batches), gpipe (all forwards, then backwards), 1f1b, interleaved", schedules, 0, -1},
    {"micro", RS_SOPT_INT, "4", "pipeline: micro-batches per global batch (schedule=naive: 1)", NULL, 1, 4096},
    {"virtual", RS_SOPT_INT, NULL, "pipeline schedule=interleaved: stages per rank (default 2)", NULL, 1, 64},
    {"split", RS_SOPT_STRING, NULL, "pipeline: layers where stages begin, e.g. split=4,8 (default: partition=)", NULL, 0,
     -1},
    {"partition", RS_SOPT_ENUM, "parameters",
     "pipeline: how stages are cut between top-level items: uniform (as many items each), parameters, or time "
     "(each item's forward+backward measured first)", partitions, 0, -1},
    {"tie", RS_SOPT_STRING, "auto",
     "pipeline: parameters shared across stages whose gradients are summed (auto: every one, e.g. 0.wte)", NULL, 0,
     -1},
    {"dp", RS_SOPT_INT, "1", "pipeline: data-parallel copies of the whole pipeline (dp x pp x tp = ranks)", NULL, 1,
     4096},
    {"pp", RS_SOPT_INT, NULL, "pipeline: stages' ranks in one pipeline (default: ranks / (dp x tp))", NULL, 2, 4096},
    {"tp", RS_SOPT_INT, NULL,
     "tensor: ranks per tensor-parallel group (default: all); pipeline: per stage (default 1)", NULL, 1, 4096},
    {"zero", RS_SOPT_INT, "0", "pipeline: 1 shards each stage's optimizer state over its dp group (ZeRO-1)", NULL, 0,
     1},
    {NULL, 0, NULL, NULL, NULL, 0, 0},
};

int rs_pipe_virtual_of(const rs_strategy_args *a, rs_pipe_kind k)
{
    if (rs_strategy_given(a, "virtual")) return (int)rs_strategy_int(a, "virtual");
    return k == RS_PIPE_INTERLEAVED ? 2 : 1;
}

/* The dp x pp x tp layout of this run's world; RS_ERR_ARG with the arithmetic when it cannot be. */
rs_status rs_pipe_grid_of(const rs_strategy_args *a, int world, int rank, rs_grid *out, rs_err *err)
{
    int dp = (int)rs_strategy_int(a, "dp"), tp = rs_strategy_given(a, "tp") ? (int)rs_strategy_int(a, "tp") : 1;
    int pp = rs_strategy_given(a, "pp") ? (int)rs_strategy_int(a, "pp") : 0;
    rs_status st = rs_grid_new(world, dp, pp, tp, rank, out, err);
    if (st) return rs_err_prefix(err, "mode=pipeline");
    if (out->pp < 2)
        return rs_err_set(err, RS_ERR_ARG,
                          "mode=pipeline: dp=%d x tp=%d leaves pp=%d: a pipeline needs 2 stages' ranks or more "
                          "(ranks=%d for pp=2; %s alone is mode=%s)",
                          out->dp, out->tp, out->pp, 2 * out->dp * out->tp, out->tp > 1 ? "dp x tp" : "dp",
                          out->tp > 1 ? "tensor" : "ddp");
    return RS_OK;
}

/* Whether a stage may begin at whole-model layer `at`: never inside a tensor-parallel pair, whose
 * halves must run on the same ranks (a column-parallel linear's part feeds the row-parallel one). */
bool rs_pipe_cut_keeps_pairs(const rs_tp_plan *plan, int at)
{
    rs_tp_role r = plan ? rs_tp_plan_role(plan, at) : RS_TP_REPLICATED;
    return r != RS_TP_INNER && r != RS_TP_ROW;
}

/* Where whole-model layer `at` begins in a shard: every layer before it is one, and a pair adds its
 * tp_copy before the column-parallel linear and its tp_reduce after the row-parallel one. */
int rs_pipe_shard_cut(const rs_tp_plan *plan, int at)
{
    int k = 0;
    for (int j = 0; j < at; j++) {
        rs_tp_role r = rs_tp_plan_role(plan, j);
        k += 1 + (r == RS_TP_COLUMN || r == RS_TP_QKV) + (r == RS_TP_ROW);
    }
    return k;
}

/* The stage cuts of this run: split= by hand, or partition=uniform|parameters (partition=time is
 * measured on rank 0 in pipeline.c; the check at the prompt cuts by parameters to see that a cut
 * exists). With a tensor-parallel plan, only between pairs. */
rs_status rs_pipe_cuts_for(const rs_strategy_args *a, const rs_model *m, int S, const rs_tp_plan *plan, int *cuts,
                          rs_err *err)
{
    const char *split = rs_strategy_str(a, "split");
    if (split) {
        rs_status st = rs_pipe_split_parse(m, split, S, cuts, err);
        for (int s = 1; !st && s < S; s++) {
            if (rs_pipe_cut_keeps_pairs(plan, cuts[s])) continue;
            int lo = cuts[s], hi = cuts[s];
            while (lo > 0 && !rs_pipe_cut_keeps_pairs(plan, lo)) lo--;
            while (hi + 1 < rs_model_layer_count(m) && !rs_pipe_cut_keeps_pairs(plan, hi + 1)) hi++;
            char alt[48];
            snprintf(alt, sizeof alt, lo > 0 ? "%d (after it) or %d (before it)" : "%d (after it)", hi + 1, lo);
            return rs_err_set(err, RS_ERR_ARG,
                              "pipeline: split=%s cuts before layer %d, inside the tensor-parallel pair of layers "
                              "%d..%d (a column-parallel linear's part feeds the row-parallel one on the same ranks); "
                              "cut at %s",
                              split, cuts[s], lo, hi, alt);
        }
        return st;
    }
    double cost[512];
    int n = rs_pipe_item_params(m, cost, 512), L = rs_model_layer_count(m);
    /* uniform: every item counts one, as DeepSpeed's partition_method=uniform counts layers */
    if (rs_strategy_choice(a, "partition") == RS_PIPE_PART_UNIFORM)
        for (int i = 0; i < n && i < 512; i++) cost[i] = 1;
    if (n > 512) return rs_err_set(err, RS_ERR_ARG, "pipeline: the model has %d top-level items; at most 512", n);
    bool *ok = plan ? malloc(sizeof *ok * (size_t)(L + 1)) : NULL; /* freed here */
    if (plan && !ok) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
    for (int i = 0; ok && i <= L; i++) ok[i] = rs_pipe_cut_keeps_pairs(plan, i);
    rs_status st = rs_pipe_split_balance_where(m, cost, S, ok, cuts, err);
    free(ok);
    return st;
}

/* Every tied slot the cuts put on another rank than its owner; names from tie= (want; NULL or auto:
 * every one) must be among them, and every one of them must be named. */
rs_status rs_pipe_find_ties(const char *want, const rs_model *m, const int *cuts, int P, int S, rs_pipe_tie_fn fn,
                           void *ud, rs_err *err)
{
    bool all = !want || !strcmp(want, "auto");
    int n = rs_model_layer_count(m), found = 0;
    char names[512] = "";
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        const rs_layer *l = rs_model_layer((rs_model *)m, i);
        for (int j = 0; j < l->np; j++) {
            if (!l->p[j].tied) continue;
            const rs_param_info *owner = NULL;
            for (int t = 0; t < rs_model_tensor_count(m); t++)
                if (rs_model_tensor(m, t)->offset == l->p[j].offset) owner = rs_model_tensor(m, t);
            if (!owner) continue;
            int rs = 0, os = 0;
            for (int s = 0; s < S; s++) {
                if (i >= cuts[s] && i < cuts[s + 1]) rs = s;
                if (owner->layer >= cuts[s] && owner->layer < cuts[s + 1]) os = s;
            }
            if (rs % P == os % P) continue; /* one rank holds both: the gradients add in its buffer */
            bool named = all;
            if (!all) {
                size_t len = strlen(owner->name);
                for (const char *p = want; (p = strstr(p, owner->name)) != NULL; p += len)
                    if ((p == want || p[-1] == ',') && (p[len] == ',' || !p[len])) named = true;
            }
            if (!named)
                return rs_err_set(err, RS_ERR_ARG,
                                  "pipeline: %s is owned by stage %d (layer %d) and read by stage %d (layer %d, %s) on "
                                  "another rank; its gradients must be summed there: add it to tie= or use tie=auto",
                                  owner->name, os, owner->layer, rs, i, l->name);
            found++;
            if (k + 40 < sizeof names) k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", k ? "," : "", owner->name);
            if (fn) fn(ud, owner->offset, owner->numel, os % P, rs % P);
        }
    }
    /* a name in tie= that is no shared parameter across ranks is a mistake worth saying */
    if (!all) {
        char copy[RS_STRATEGY_VAL_MAX];
        snprintf(copy, sizeof copy, "%s", want);
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            bool ok = false;
            size_t len = strlen(t);
            for (const char *p = names; (p = strstr(p, t)) != NULL; p += len)
                if ((p == names || p[-1] == ',') && (p[len] == ',' || !p[len])) ok = true;
            if (!ok)
                return rs_err_set(err, RS_ERR_ARG,
                                  "pipeline: tie=%s: %s is not a parameter two stages on different ranks share%s%s "
                                  "(tie=auto finds them)",
                                  want, t, found ? "; those are: " : "; with these stages there are none", names);
        }
    }
    return RS_OK;
}

rs_status rs_pipe_layout_check(const rs_strategy_args *a, const rs_model *m, int world, const rs_train_cfg *cfg,
                                rs_err *err)
{
    rs_pipe_kind k = (rs_pipe_kind)rs_strategy_choice(a, "schedule");
    int M = (int)rs_strategy_int(a, "micro"), V = rs_pipe_virtual_of(a, k);
    if (k == RS_PIPE_NAIVE && !rs_strategy_given(a, "micro")) M = 1;
    if (world < 2) return rs_err_set(err, RS_ERR_ARG, "mode=pipeline needs ranks=2 or more (one stage each)");
    rs_grid gr;
    rs_status st = rs_pipe_grid_of(a, world, 0, &gr, err);
    if (st) return st;
    int zero = (int)rs_strategy_int(a, "zero");
    if (V > 1 && k != RS_PIPE_INTERLEAVED)
        return rs_err_set(err, RS_ERR_ARG, "virtual=%d: several stages per rank are schedule=interleaved", V);
    st = rs_pipe_check(k, gr.pp, M, V, err);
    if (st) return rs_err_prefix(err, "mode=pipeline");
    if (zero && gr.dp < 2)
        return rs_err_set(err, RS_ERR_ARG, "mode=pipeline: zero=1 shards each stage's optimizer state over its dp "
                          "group, and dp=1 has no other replica to share it with; add dp=2 (ranks=%d)", 2 * world);
    if (cfg) {
        if (cfg->accum > 1)
            return rs_err_set(err, RS_ERR_ARG,
                              "mode=pipeline: accum=%d: micro=%d already splits each batch into micro-batches whose "
                              "gradients add up; raise micro= (and batch=) instead",
                              cfg->accum, M);
        if (cfg->batch % gr.dp)
            return rs_err_set(err, RS_ERR_ARG, "mode=pipeline: batch=%d does not split over dp=%d pipelines; try "
                              "batch=%d", cfg->batch, gr.dp, (cfg->batch / gr.dp + 1) * gr.dp);
        if (cfg->batch / gr.dp < M)
            return rs_err_set(err, RS_ERR_ARG, "mode=pipeline: batch=%d%s cannot make micro=%d micro-batches of a "
                              "sample or more (try batch=%d)", cfg->batch, gr.dp > 1 ? " over dp pipelines" : "", M,
                              M * gr.dp);
    }
    if (!m) return RS_OK;
    rs_tp_plan *plan = NULL;
    if (gr.tp > 1 && (st = rs_tp_plan_new(m, gr.tp, &plan, err)) != RS_OK) return rs_err_prefix(err, "mode=pipeline");
    int S = gr.pp * V, *cuts = malloc(sizeof *cuts * (size_t)(S + 1));
    if (!cuts) st = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    if (!st) st = rs_pipe_cuts_for(a, m, S, plan, cuts, err);
    if (!st) st = rs_pipe_find_ties(rs_strategy_str(a, "tie"), m, cuts, gr.pp, S, NULL, NULL, err);
    free(cuts);
    rs_tp_plan_free(plan);
    return st;
}

