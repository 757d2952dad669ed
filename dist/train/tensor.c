/* Tensor parallelism (Megatron-LM) as a training strategy, alone or under data parallelism (see
 * dtrain.h). The world's ranks form dp groups of tp consecutive ranks (global rank = d*tp + t, as
 * Megatron lays them out, so a tensor-parallel group shares a host): each tp group splits the model
 * (engine/nn/tp.h) and reads the same rows of every global batch; the dp groups read different
 * rows, and each shard's gradient is averaged over the ranks that hold the same shard.
 *
 * The loop trains the whole model `m` through this strategy's forward_backward: m's buffers become
 * reservations (nothing committed, nothing counted) and every rank computes on its shard. gather()
 * brings the whole weights back into m on rank 0 alone — rank 0 evaluates, writes checkpoints and
 * hands the weights back, as in every other mode — and they are given back at its next step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "engine/core/kernels.h"
#include "engine/nn/tp.h"
#include "engine/optim/optim.h"
#include "registry.h"
#include "tp_gather.h"

typedef struct tensor {
    rs_pg *g;                /* the world, borrowed */
    rs_pg *tpg, *dpg;        /* this rank's tensor-parallel and data-parallel groups (owned unless they
                                are g itself; dpg NULL when dp is 1) */
    int tp, dp, t, d;        /* sizes, and this rank's place: global rank = d*tp + t */
    rs_model *m;             /* the whole model, borrowed */
    rs_model *s;             /* this rank's shard, owned, counted in m's tracker */
    rs_tp_plan *plan;
    rs_mem *mem;
    rs_opt_cfg optcfg;
    rs_optim *opt;           /* over the shard's buffer */
    rs_optim *full;          /* the whole optimizer, for checkpoints only (full_mem; SCRATCH) */
    rs_mem full_mem;
    float *stage;            /* rank 0: another rank's shard in flight to the whole buffer (COMM) */
    size_t stage_n;
    bool zero_next;          /* the next micro-batch starts a step: zero the shard's gradients */
    bool whole_resident;     /* rank 0: m holds the gathered weights */
    bool gathered;           /* since the last step (every rank alike: a second gather has nothing new) */
    int64_t step;
    int ar_index;            /* the all-reduces of this step so far (a block's, in order) */
    rs_status comm_st;       /* the first failure of an all-reduce inside a pass */
    rs_err comm_err;
    rs_dtrain_comm_fn comm;
    void *comm_ud;
} tensor;

static void span(tensor *t, const char *op, int index, size_t bytes, double t0)
{
    if (t->comm) t->comm(t->comm_ud, t->step, op, index, bytes, t0, rs_train_now());
}

/* tp_copy's and tp_reduce's all-reduce (engine/nn/tp_layers.c). A layer has no status: the first
 * failure is kept for forward_backward to report, and later calls do nothing (the peer is gone). */
static void tp_all_reduce(void *ud, float *buf, size_t n)
{
    tensor *t = ud;
    if (t->comm_st) return;
    double t0 = rs_train_now();
    t->comm_st = rs_pg_all_reduce(t->tpg, buf, n, RS_F32, RS_SUM, &t->comm_err);
    span(t, rs_pg_op_name(RS_OP_ALL_REDUCE), t->ar_index++, n * sizeof(float), t0);
}

/* The sub-groups: every rank takes part in making each of them, as torch requires. */
static rs_status make_groups(tensor *t, int *ranks, rs_err *err)
{
    if (t->tp == t->g->world) {
        t->tpg = t->g;
    } else {
        for (int d = 0; d < t->dp; d++) {
            for (int k = 0; k < t->tp; k++) ranks[k] = d * t->tp + k;
            rs_pg *sub = NULL;
            rs_status st = rs_pg_new_group(t->g, ranks, t->tp, &sub, err);
            if (st) return st;
            if (sub) t->tpg = sub;
        }
    }
    if (t->dp == 1) return RS_OK;
    for (int k = 0; k < t->tp; k++) {
        for (int d = 0; d < t->dp; d++) ranks[d] = d * t->tp + k;
        rs_pg *sub = NULL;
        rs_status st = rs_pg_new_group(t->g, ranks, t->dp, &sub, err);
        if (st) return st;
        if (sub) t->dpg = sub;
    }
    return RS_OK;
}

/* rank 0: the whole weights into m (acquired, so the tracker counts them), from every shard of the
 * first tp group; the others of that group send theirs. src: the shard's buffer in the parameters'
 * layout (parameters, or an optimizer moment); dst: rank 0's whole buffer of that layout. */
static rs_status gather_whole(tensor *t, const float *src, float *dst, rs_err *err)
{
    if (t->d != 0) return RS_OK;
    return rs_tp_gather_whole(t->tpg, t->plan, src, dst, t->stage, t->comm, t->comm_ud, t->step, err);
}

/* ---- the strategy entries ---- */

static rs_status t_setup(void *ud, rs_model *m, const rs_opt_cfg *opt, rs_err *err)
{
    tensor *t = ud;
    if (m != t->m)
        return rs_err_set(err, RS_ERR_ARG, "tensor: set up for model %s, trained with %s", rs_model_name(t->m),
                          rs_model_name(m));
    t->optcfg = *opt;
    /* Every rank cuts its shard from rank 0's weights (the REPL's, or a seed's). */
    double t0 = rs_train_now();
    rs_status st = rs_pg_broadcast(t->g, rs_model_params(m), rs_model_numel(m), RS_F32, 0, err);
    span(t, rs_pg_op_name(RS_OP_BROADCAST), -1, rs_model_numel(m) * sizeof(float), t0);
    if (!st) st = rs_tp_plan_new(m, t->tp, &t->plan, err);
    if (!st) st = rs_tp_shard_new(t->plan, t->t, t->mem, &t->s, err);
    if (st) return st;
    rs_model_set_name(t->s, rs_model_name(m));
    if (t->tp > 1) rs_model_set_tp_comm(t->s, tp_all_reduce, t);
    t->opt = rs_optim_new(opt, rs_model_device(m), rs_model_numel(t->s), t->mem, err);
    if (!t->opt) return err ? err->code : RS_ERR_NOMEM;
    rs_optim_set_ctx(t->opt, rs_model_ctx(t->s)); /* the shard's threads, not a default of every core */
    st = rs_train_apply_groups(t->opt, t->s, 0, err);
    if (st) return st;
    size_t smax = 0;
    for (int r = 1; r < t->tp; r++)
        if (rs_tp_shard_numel(t->plan, r) > smax) smax = rs_tp_shard_numel(t->plan, r);
    if (t->g->rank == 0 && smax) {
        t->stage = rs_mem_alloc(t->mem, RS_POOL_COMM, smax * sizeof(float));
        if (!t->stage) return rs_err_set(err, RS_ERR_NOMEM, "tensor: out of memory for a %zu-float shard", smax);
        t->stage_n = smax;
    }
    /* The whole buffers are only a place to gather into from now on. */
    st = rs_model_shard_buffers(m, err);
    t->zero_next = true;
    return st;
}

static rs_status t_forward_backward(void *ud, const float *x, const int32_t *y, int B, float loss_scale, float *loss,
                                    const float **logits, rs_err *err)
{
    tensor *t = ud;
    if (t->zero_next) {
        rs_model_zero_grad(t->s);
        t->zero_next = false;
        t->ar_index = 0;
    }
    rs_model_set_training(t->s, rs_model_training(t->m));
    rs_status st = rs_model_forward(t->s, x, B, logits, err);
    if (!st && t->comm_st) st = t->comm_st;
    if (!st) st = rs_model_loss(t->s, y, B, loss, err);
    if (st) goto fail;
    rs_model_backward(t->s, x, y, B, loss_scale);
    if (t->comm_st) {
        st = t->comm_st;
        goto fail;
    }
    rs_model_set_step(t->m, rs_model_step(t->s)); /* checkpoints carry the dropout stream's position */
    return RS_OK;
fail:
    if (st == t->comm_st && err) *err = t->comm_err;
    return st;
}

static rs_status t_after_backward(void *ud, rs_err *err)
{
    tensor *t = ud;
    if (!t->dpg) return RS_OK;
    /* The ranks holding this shard saw different rows: average their gradients, as DDP does. */
    double t0 = rs_train_now();
    size_t n = rs_model_numel(t->s);
    rs_status st = rs_pg_all_reduce(t->dpg, rs_model_grads(t->s), n, RS_F32, RS_AVG, err);
    span(t, rs_pg_op_name(RS_OP_ALL_REDUCE), -1, n * sizeof(float), t0);
    return st;
}

static rs_status t_grad_sumsq(void *ud, double *sumsq, rs_err *err)
{
    tensor *t = ud;
    double s = rs_tp_sumsq(t->plan, t->t, rs_model_grads(t->s));
    if (t->tp > 1) {
        double t0 = rs_train_now();
        rs_status st = rs_pg_all_reduce(t->tpg, &s, 1, RS_F64, RS_SUM, err);
        span(t, rs_pg_op_name(RS_OP_ALL_REDUCE), -1, sizeof s, t0);
        if (st) return st;
    }
    *sumsq = s;
    return RS_OK;
}

static void t_grad_scale(void *ud, float s)
{
    tensor *t = ud;
    /* void: a failure stays in the shard's context and its next forward reports it */
    rs_model_kernels(t->s)->scale(rs_model_ctx(t->s), rs_model_grads(t->s), rs_model_numel(t->s), s);
}

/* rank 0 gives the gathered weights back: they are stale once the shards move. */
static void release_whole(tensor *t)
{
    if (!t->whole_resident) return;
    for (int i = 0; i < rs_model_unit_count(t->m); i++) rs_model_unit_release(t->m, RS_POOL_PARAMS, i);
    t->whole_resident = false;
}

static rs_status t_step(void *ud, float lr, rs_err *err)
{
    tensor *t = ud;
    rs_status st = rs_optim_step(t->opt, rs_model_params(t->s), rs_model_grads(t->s), lr);
    if (st) return rs_err_set(err, st, "tensor: optimizer step failed (lr=%g)", (double)lr);
    release_whole(t);
    t->gathered = false;
    t->zero_next = true;
    t->step++;
    return RS_OK;
}

static rs_status t_gather(void *ud, rs_err *err)
{
    tensor *t = ud;
    if (t->gathered) return RS_OK;
    t->gathered = true;
    if (t->g->rank == 0 && !t->whole_resident) {
        for (int i = 0; i < rs_model_unit_count(t->m); i++) rs_model_unit_acquire(t->m, RS_POOL_PARAMS, i);
        t->whole_resident = true;
    }
    rs_model_set_step(t->m, rs_model_step(t->s));
    return gather_whole(t, rs_model_params(t->s), t->g->rank == 0 ? rs_model_params(t->m) : NULL, err);
}

/* ---- checkpoints: the whole optimizer, gathered from and cut into the shards ---- */

static rs_optim *t_optimizer(void *ud)
{
    tensor *t = ud;
    if (!t->full) {
        rs_err e = {0};
        t->full = rs_optim_new(&t->optcfg, rs_model_device(t->m), rs_model_numel(t->m), &t->full_mem, &e);
        if (t->full) rs_mem_count(t->mem, RS_POOL_SCRATCH, (int64_t)rs_optim_state_bytes(t->full));
    }
    return t->full;
}

static rs_status t_sync_optimizer(void *ud, bool to_full, rs_err *err)
{
    tensor *t = ud;
    if (!t->full) return rs_err_set(err, RS_ERR_NOMEM, "tensor: no memory for the checkpoint's optimizer state");
    if (to_full) {
        for (int k = 0; k < rs_optim_state_count(t->full); k++) {
            rs_status st = gather_whole(t, rs_optim_state(t->opt, k), rs_optim_state(t->full, k), err);
            if (st) return st;
        }
        rs_optim_set_step_count(t->full, rs_optim_step_count(t->opt));
        return RS_OK;
    }
    /* A resume loaded the whole weights and optimizer into m and full on every rank: each takes its
     * shard, and the whole buffer's pages go back (acquire counts them, release returns them). */
    rs_tp_cut(t->plan, t->t, rs_model_params(t->m), rs_model_params(t->s));
    for (int k = 0; k < rs_optim_state_count(t->full); k++)
        rs_tp_cut(t->plan, t->t, rs_optim_state(t->full, k), rs_optim_state(t->opt, k));
    rs_optim_set_step_count(t->opt, rs_optim_step_count(t->full));
    rs_model_set_seed(t->s, rs_model_seed(t->m));
    rs_model_set_step(t->s, rs_model_step(t->m));
    for (int i = 0; i < rs_model_unit_count(t->m); i++) {
        rs_model_unit_acquire(t->m, RS_POOL_PARAMS, i);
        rs_model_unit_release(t->m, RS_POOL_PARAMS, i);
    }
    t->whole_resident = false;
    t->gathered = false;
    return RS_OK;
}

static void t_teardown(void *ud)
{
    tensor *t = ud;
    if (!t) return;
    /* m keeps what its buffer holds: rank 0's last gather, the whole weights */
    if (rs_model_buffers_sharded(t->m)) {
        rs_err e = {0};
        (void)rs_model_unshard_buffers(t->m, &e); /* teardown has no status; rs_model_free handles reservations */
    }
    rs_model_acquire_grads(t->m, NULL);
    rs_optim_free(t->opt);
    if (t->full) {
        rs_mem_count(t->mem, RS_POOL_SCRATCH, -(int64_t)rs_optim_state_bytes(t->full));
        rs_optim_free(t->full);
    }
    rs_mem_free(t->mem, RS_POOL_COMM, t->stage, t->stage_n * sizeof(float));
    rs_model_free(t->s);
    rs_tp_plan_free(t->plan);
    if (t->dpg) rs_pg_destroy(t->dpg);
    if (t->tpg && t->tpg != t->g) rs_pg_destroy(t->tpg);
    free(t);
}

rs_status rs_tensor_strategy(rs_pg *g, rs_model *m, const rs_dtrain_cfg *cfg, rs_dtrain_comm_fn comm, void *comm_ud,
                             rs_train_strategy *out, rs_err *err)
{
    if (!g || !m || !cfg || !out) return rs_err_set(err, RS_ERR_ARG, "tensor: missing group, model or configuration");
    int tp = cfg->tp ? cfg->tp : g->world;
    if (tp < 1 || g->world % tp)
        return rs_err_set(err, RS_ERR_ARG, "tensor: tp=%d does not divide the %d ranks; tp x dp must be the ranks "
                          "(e.g. tp=%d)", tp, g->world, g->world);
    if (rs_model_device(m).kind != RS_DEV_CPU || !(g->ops->devices & RS_PG_DEV_CPU))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "tensor: needs a CPU model and a host-memory backend (shm, tcp, mpi)");
    tensor *t = calloc(1, sizeof *t); /* owned by the strategy; t_teardown frees it */
    if (!t) return rs_err_set(err, RS_ERR_NOMEM, "tensor: out of memory");
    *t = (tensor){.g = g, .m = m, .mem = rs_model_mem(m), .tp = tp, .dp = g->world / tp, .t = g->rank % tp,
                  .d = g->rank / tp, .comm = comm, .comm_ud = comm_ud};
    int *ranks = malloc((size_t)g->world * sizeof *ranks); /* freed here */
    rs_status st = ranks ? make_groups(t, ranks, err) : rs_err_set(err, RS_ERR_NOMEM, "tensor: out of memory");
    free(ranks);
    if (st) {
        t_teardown(t);
        return st;
    }
    *out = (rs_train_strategy){.name = "tensor", .ud = t, .rank = t->d, .world = t->dp, .report = g->rank == 0,
                               .own_acts = true,
                               .setup = t_setup, .forward_backward = t_forward_backward,
                               .after_backward = t_after_backward, .step = t_step, .gather = t_gather,
                               .optimizer = t_optimizer, .sync_optimizer = t_sync_optimizer, .teardown = t_teardown,
                               .grad_sumsq = t_grad_sumsq, .grad_scale = t_grad_scale};
    return RS_OK;
}

/* ---- the registry's entry (registry.h) ---- */

static const rs_strategy_opt tensor_opts[] = {
    {"tp", RS_SOPT_INT, NULL, "tensor: ranks per tensor-parallel group (default: all); ranks/tp groups are data "
     "parallel over each other", NULL, 1, 4096},
    {NULL, 0, NULL, NULL, NULL, 0, 0},
};

static int tp_of(const rs_strategy_args *a, int world)
{
    return rs_strategy_given(a, "tp") ? (int)rs_strategy_int(a, "tp") : world;
}

static rs_status tensor_check(const rs_strategy_args *a, const rs_model *m, int world, const rs_train_cfg *cfg,
                              rs_err *err)
{
    int tp = tp_of(a, world);
    if (world % tp)
        return rs_err_set(err, RS_ERR_ARG, "tensor: tp=%d does not divide ranks=%d; the ranks are tp x dp (e.g. tp=%d, "
                          "or ranks=%d)", tp, world, world, ((world + tp - 1) / tp) * tp);
    int dp = world / tp;
    if (cfg && cfg->batch % dp)
        return rs_err_set(err, RS_ERR_ARG, "tensor: batch=%d does not split over %d data-parallel groups (ranks=%d / "
                          "tp=%d); try batch=%d", cfg->batch, dp, world, tp, (cfg->batch / dp + 1) * dp);
    if (!m) return RS_OK;
    rs_tp_plan *p = NULL;
    rs_status st = rs_tp_plan_new(m, tp, &p, err); /* a model tp cannot split, named before any rank starts */
    rs_tp_plan_free(p);
    return st;
}

static int tensor_batch_parts(const rs_strategy_args *a, int world) { return world / tp_of(a, world); }

/* Megatron's split: every rank holds the replicated tensors whole (R parameters) and 1/tp of the split
 * ones (S); rank 0 also the row-parallel biases (b). Gradients and optimizer state follow the shard. */
static void tensor_mem_formula(const rs_strategy_args *a, const rs_model *m, int world, int k, double bytes[3],
                           char *formula, size_t cap)
{
    int tp = tp_of(a, world);
    rs_tp_plan *p = NULL;
    size_t R = 0, S = 0, b = 0;
    rs_err e = {0};
    if (!rs_tp_plan_new(m, tp, &p, &e)) rs_tp_plan_counts(p, &R, &S, &b);
    rs_tp_plan_free(p);
    double per = 4.0 * ((double)R + (double)S / tp + (double)b);
    bytes[0] = bytes[1] = per;
    bytes[2] = per * k;
    snprintf(formula, cap, "Megatron's split (rank 0), R=%zu replicated + S=%zu split + b=%zu row biases, tp=%d: "
             "4(R + S/tp + b) each, optimizer x k=%d", R, S, b, tp, k);
}

static rs_status tensor_make(const rs_strategy_ctx *x, rs_train_strategy *out, rs_err *err)
{
    rs_dtrain_cfg c = rs_dtrain_defaults();
    c.tp = tp_of(x->args, x->g->world);
    rs_status st = rs_tensor_strategy(x->g, x->m, &c, x->comm, x->comm_ud, out, err);
    if (st || !x->metric) return st;
    /* the session log keeps each rank's place and share of the parameters */
    const tensor *t = out->ud;
    rs_tp_plan *p = NULL;
    if (rs_tp_plan_new(x->m, t->tp, &p, err)) return RS_OK; /* setup reports it */
    size_t R, S, b;
    rs_tp_plan_counts(p, &R, &S, &b);
    x->metric(x->ud, 0, "tp_shard", t->t);
    x->metric(x->ud, 0, "tp_dp_replica", t->d);
    x->metric(x->ud, 0, "tp_shard_params", (double)(R + S / (size_t)t->tp + (t->t ? 0 : b)));
    rs_tp_plan_free(p);
    return RS_OK;
}

const rs_strategy_def rs_strategy_tensor = {
    .name = "tensor", .kind = "rank processes",
    .about = "Megatron tensor parallel: linear pairs split by columns then rows, attention by heads",
    .uses = RS_SUSE_RANKS | RS_SUSE_PROCS | RS_SUSE_INLINE_COMM, .opts = tensor_opts, .check = tensor_check,
    .make = tensor_make,
    .batch_parts = tensor_batch_parts, .mem_formula = tensor_mem_formula,
};
