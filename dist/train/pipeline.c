/* Pipeline parallelism as a training strategy (mode=pipeline): the model's layers cut into P*V
 * contiguous stages (pipe_split.h), rank r running stages r, r+P, ...; each global batch split into
 * M micro-batches that flow through the stages in the order of the schedule (pipe_sched.h), executed
 * by pipe_run.h with activations going forward and gradients back over the process group. Every rank
 * reads the whole global batch (the first stage needs the inputs, the last the labels); the loss lives
 * on the last stage, each micro-batch's scaled by its share of the batch, so the gradients summed over
 * the micro-batches are the batch's; the optimizer steps once per batch on each stage's own range of
 * the flat buffers. A parameter read by a stage on another rank than the one that owns it (GPT-2's
 * head reads the token embedding) has its two gradient contributions summed on both ranks before the
 * step, as Megatron-LM does, so both copies stay equal. Evaluation and checkpoints see the whole model:
 * gather() brings every stage's range to rank 0. Activation sets are the strategy's own, one per
 * micro-batch in flight per stage, so the ACTS pool shows what the schedule holds: GPipe all M,
 * 1F1B at most P - rank.
 *
 * Combined with data and tensor parallelism (dp x pp x tp = ranks, laid out by grid.h): with tp > 1
 * the stages run this rank's tensor-parallel shard of the model (engine/nn/tp.h: a stage's pairs are
 * split over its tp group, whose tp_copy/tp_reduce layers all-reduce inside the passes) instead of the
 * whole model, cut at the same places (a cut never falls inside a pair); with dp > 1 each of dp whole
 * pipelines reads its batch/dp rows of every global batch and the replicas of a stage (its dp group)
 * average their gradients before the step, or with zero=1 each steps only its 1/dp of the stage's
 * range, keeping only that much optimizer state, and the replicas all-gather the parameters after.
 * What the options decide (the grid, the cuts, the tied parameters, the check) is pipe_layout.c; what
 * a rank keeps (its stages' parameters alone, ZeRO-1's parts, checkpoints' whole optimizer) pipe_keep.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "engine/nn/tp.h"
#include "engine/optim/optim.h"
#include "grid.h"
#include "pipe_keep.h"
#include "pipe_layout.h"
#include "pipe_run.h"
#include "pipe_split.h"
#include "registry.h"
#include "tp_gather.h"


/* ---------------------------------------------------------------- the executor's callbacks */

/* tp_copy's and tp_reduce's all-reduce over this stage's tensor-parallel group (engine/nn/tp_layers.c).
 * A layer has no status: the first failure is kept for the pass to report; later calls do nothing. */
static void tp_all_reduce(void *ud, float *buf, size_t n)
{
    rs_pipe_state *p = ud;
    if (p->comm_st) return;
    double t0 = rs_train_now();
    p->comm_st = rs_pg_all_reduce(p->gg.tp, buf, n, RS_F32, RS_SUM, &p->comm_err);
    rs_pipe_comm(p, rs_pg_op_name(RS_OP_ALL_REDUCE), p->ar_index++, n * sizeof(float), t0);
}

static rs_status tp_failed(rs_pipe_state *p, rs_err *err)
{
    if (!err) return p->comm_st;
    *err = p->comm_err;
    return rs_err_prefix(err, "pipeline stage %d's tensor-parallel group (shard %d)", p->rank, p->grid.t);
}

static size_t io_numel(void *ud, int micro, int stage)
{
    rs_pipe_state *p = ud;
    const rs_layer *l = rs_model_layer(p->m, p->cuts[stage] - 1);
    return (size_t)p->rows[micro] * (size_t)rs_shape_numel(&l->out);
}

/* An activation set of chunk c for a micro-batch: a free one, or a new one (counted in ACTS). */
static rs_acts *take_set(rs_pipe_state *p, rs_pipe_chunk *c, rs_err *err)
{
    for (int i = 0; i < c->nsets; i++)
        if (!c->busy[i]) {
            c->busy[i] = true;
            p->acts_now += c->bytes[i];
            return c->sets[i];
        }
    rs_acts **s = realloc(c->sets, sizeof *s * (size_t)(c->nsets + 1));
    if (s) c->sets = s;
    bool *b = realloc(c->busy, sizeof *b * (size_t)(c->nsets + 1));
    if (b) c->busy = b;
    size_t *by = realloc(c->bytes, sizeof *by * (size_t)(c->nsets + 1));
    if (by) c->bytes = by;
    if (!s || !b || !by) {
        rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
        return NULL;
    }
    int64_t before = rs_model_mem(p->m)->live[RS_POOL_ACTS];
    rs_acts *a = rs_acts_new_range(p->m, c->first, c->last, p->batch_cap, err);
    if (!a) return NULL;
    c->sets[c->nsets] = a;
    c->bytes[c->nsets] = (size_t)(rs_model_mem(p->m)->live[RS_POOL_ACTS] - before);
    if (c->bytes[c->nsets] > p->set_bytes) p->set_bytes = c->bytes[c->nsets];
    p->acts_now += c->bytes[c->nsets];
    c->busy[c->nsets++] = true;
    return a;
}

static void give_set(rs_pipe_state *p, rs_pipe_chunk *c, rs_acts *a)
{
    for (int i = 0; i < c->nsets; i++)
        if (c->sets[i] == a && c->busy[i]) {
            c->busy[i] = false;
            p->acts_now -= c->bytes[i];
        }
}

static const void *micro_input(rs_pipe_state *p, int micro)
{
    size_t per = (size_t)rs_shape_numel(rs_model_input_shape(p->m));
    return (const char *)p->x + (size_t)p->row0[micro] * per * 4; /* 4-byte elements: floats or token ids */
}

static rs_status io_forward(void *ud, int micro, int ci, const float *in, const float **out, rs_err *err)
{
    rs_pipe_state *p = ud;
    rs_pipe_chunk *c = &p->ch[ci];
    rs_acts *a = take_set(p, c, err);
    if (!a) return err ? err->code : RS_ERR_NOMEM;
    p->held[micro * p->V + ci] = a;
    if (++p->sets_held > p->sets_peak) p->sets_peak = p->sets_held;
    /* the dropout masks of the first stage's draw, so every stage masks as one process would */
    if (c->stage > 0) rs_acts_set_step(a, p->step_base + (uint64_t)micro + 1);
    const void *x = c->stage == 0 ? micro_input(p, micro) : in;
    rs_status st = rs_model_forward_range(p->m, a, c->first, c->last, x, p->rows[micro], out, err);
    if (!st && p->comm_st) st = tp_failed(p, err);
    if (!st && c->stage == p->S - 1) {
        int R = rs_model_rows(p->m), C = rs_model_classes(p->m);
        float l = 0;
        st = rs_model_loss_acts(p->m, a, p->y + (size_t)p->row0[micro] * (size_t)R, p->rows[micro], &l, err);
        p->loss += (double)l * p->rows[micro] / p->B;
        if (!st)
            memcpy(p->logits + (size_t)p->row0[micro] * (size_t)R * (size_t)C, *out,
                   (size_t)p->rows[micro] * (size_t)R * (size_t)C * sizeof(float));
    }
    size_t now = p->acts_now + rs_pipe_exec_inputs(p->ex);
    if (now > p->acts_peak) p->acts_peak = now;
    return st;
}

static rs_status io_backward(void *ud, int micro, int ci, const float *in, const float *dout, float *din, rs_err *err)
{
    rs_pipe_state *p = ud;
    rs_pipe_chunk *c = &p->ch[ci];
    rs_acts *a = p->held[micro * p->V + ci];
    /* the loss of each micro-batch is its mean: scaled by its share of the batch, the sum is the batch's */
    if (c->stage == p->S - 1) rs_acts_set_loss_scale(a, p->loss_scale * (float)p->rows[micro] / (float)p->B);
    rs_model_backward_range(p->m, a, c->first, c->last, c->stage == 0 ? micro_input(p, micro) : in, dout, din,
                            p->rows[micro]);
    give_set(p, c, a);
    p->held[micro * p->V + ci] = NULL;
    p->sets_held--;
    return p->comm_st ? tp_failed(p, err) : RS_OK;
}

/* ---------------------------------------------------------------- the strategy */

static void on_tie(void *ud, size_t off, size_t numel, int owner, int reader)
{
    rs_pipe_state *p = ud;
    if (p->rank != owner && p->rank != reader) return;
    rs_pipe_tie *t = realloc(p->ties, sizeof *t * (size_t)(p->nties + 1));
    if (!t) return;
    p->ties = t;
    p->ties[p->nties++] = (rs_pipe_tie){.off = off, .numel = numel, .peer = p->rank == owner ? reader : owner,
                                .reader = p->rank == reader};
    if (numel > p->tie_max) p->tie_max = numel;
}

/* The cuts in the whole model's layers: by hand, by parameters, or by time measured on rank 0 (every
 * rank takes rank 0's). */
static rs_status whole_cuts(rs_pipe_state *p, rs_model *m, rs_err *err)
{
    const rs_strategy_args *a = p->ctx.args;
    if (rs_strategy_str(a, "split") || rs_strategy_choice(a, "partition") != RS_PIPE_PART_TIME)
        return rs_pipe_cuts_for(a, m, p->S, p->plan, p->wcuts, err);
    double cost[512];
    int n = 0, L = rs_model_layer_count(m);
    rs_status st = RS_OK;
    bool ok[1025];
    for (int i = 0; i <= L && i < 1025; i++) ok[i] = rs_pipe_cut_keeps_pairs(p->plan, i);
    if (L >= 1025) st = rs_err_set(err, RS_ERR_ARG, "pipeline: partition=time takes models of at most 1024 layers");
    if (!st && p->g->rank == 0) st = rs_pipe_item_times(m, p->batch_cap, cost, 512, &n, err);
    if (!st && p->g->rank == 0) st = rs_pipe_split_balance_where(m, cost, p->S, ok, p->wcuts, err);
    int32_t cuts[1024];
    for (int s = 0; s <= p->S && s < 1024; s++) cuts[s] = p->g->rank == 0 && !st ? p->wcuts[s] : 0;
    /* a failure on rank 0 shows on the others as cuts that cannot be */
    rs_err e2 = {0};
    rs_status bst = rs_pg_broadcast(p->g, cuts, (size_t)p->S + 1, RS_I32, 0, st ? &e2 : err);
    if (st) return st;
    if (bst) return bst;
    for (int s = 0; s <= p->S; s++) p->wcuts[s] = cuts[s];
    if (p->wcuts[p->S] != L) return rs_err_set(err, RS_ERR_ARG, "pipeline: rank 0 could not balance the stages by time");
    return RS_OK;
}

/* With tp > 1 the stages run this rank's shard, cut where the whole model is. */
static rs_status make_shard(rs_pipe_state *p, rs_model *m, rs_err *err)
{
    rs_status st = rs_tp_shard_new(p->plan, p->grid.t, p->mem, &p->m, err);
    if (st) return st;
    rs_model_set_name(p->m, rs_model_name(m));
    rs_model_set_tp_comm(p->m, tp_all_reduce, p);
    for (int s = 0; s <= p->S; s++) {
        p->cuts[s] = rs_pipe_shard_cut(p->plan, p->wcuts[s]);
        if (!rs_model_cut_ok(p->m, p->cuts[s]) || (s == p->S && p->cuts[s] != rs_model_layer_count(p->m)))
            return rs_err_set(err, RS_ERR_INTERNAL, "pipeline: the cut before whole layer %d is no cut of the shard "
                              "(layer %d of %d)", p->wcuts[s], p->cuts[s], rs_model_layer_count(p->m));
    }
    if (p->g->rank == 0 && p->grid.tp > 1) {
        p->tp_stage_n = rs_tp_max_shard(p->plan);
        p->tp_stage = rs_mem_alloc(p->mem, RS_POOL_COMM, p->tp_stage_n * sizeof(float));
        if (!p->tp_stage) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory for a shard in flight");
    }
    return RS_OK;
}

static rs_status p_setup(void *ud, rs_model *m, const rs_opt_cfg *opt, rs_err *err)
{
    rs_pipe_state *p = ud;
    if (m != p->whole) return rs_err_set(err, RS_ERR_ARG, "pipeline: set up for model %s, trained with %s",
                                         rs_model_name(p->whole), rs_model_name(m));
    p->optcfg = *opt;
    /* Every stage starts from rank 0's parameters and step (the REPL's weights). */
    double t0 = rs_train_now();
    rs_status st = rs_pg_broadcast(p->g, rs_model_params(m), rs_model_numel(m), RS_F32, 0, err);
    rs_pipe_comm(p, rs_pg_op_name(RS_OP_BROADCAST), -1, rs_model_numel(m) * sizeof(float), t0);
    int64_t mstep = (int64_t)rs_model_step(m);
    if (!st) st = rs_pg_broadcast(p->g, &mstep, 1, RS_I64, 0, err);
    if (st) return st;
    rs_model_set_step(m, (uint64_t)mstep);
    if (p->grid.tp > 1 && (st = rs_tp_plan_new(m, p->grid.tp, &p->plan, err)) != RS_OK) return st;
    st = whole_cuts(p, m, err);
    if (st) return st;
    if (p->plan) st = make_shard(p, m, err);
    else memcpy(p->cuts, p->wcuts, sizeof *p->cuts * (size_t)(p->S + 1));
    if (st) return st;
    /* a shard's tied slots are the whole model's (the replicated embedding and head), under its names */
    st = rs_pipe_find_ties(p->plan ? NULL : rs_strategy_str(p->ctx.args, "tie"), p->m, p->cuts, p->P, p->S, on_tie, p, err);
    if (st) return st;

    size_t most = 0;
    for (int c = 0; c < p->V; c++) {
        rs_pipe_chunk *ch = &p->ch[c];
        ch->stage = c * p->P + p->rank;
        ch->first = p->cuts[ch->stage];
        ch->last = p->cuts[ch->stage + 1];
        rs_pipe_stage_range(p->m, ch->first, ch->last, &ch->off, &ch->len);
        rs_pipe_zero_part(p, ch->len, &ch->blk, &ch->zlo, &ch->zlen);
        if (ch->blk > most) most = ch->blk;
        if (p->ctx.stage) p->ctx.stage(p->ctx.ud, ch->stage, p->S, p->wcuts[ch->stage], p->wcuts[ch->stage + 1] - 1);
        if (!ch->zlen) continue;
        ch->opt = rs_optim_new(opt, rs_model_device(m), ch->zlen, p->mem, err);
        if (!ch->opt) return err ? err->code : RS_ERR_NOMEM;
        rs_optim_set_ctx(ch->opt, rs_model_ctx(p->m)); /* the stage's threads, not a default of every core */
        st = rs_train_apply_groups(ch->opt, p->m, ch->off + ch->zlo, err);
        if (st) return st;
    }
    for (int i = 0; i < p->nties; i++) {
        rs_pipe_tie *t = &p->ties[i];
        if (!t->reader) continue;
        rs_pipe_zero_part(p, t->numel, &t->blk, &t->zlo, &t->zlen);
        if (t->blk > most) most = t->blk;
        if (!t->zlen) continue;
        t->opt = rs_optim_new(opt, rs_model_device(m), t->zlen, p->mem, err);
        if (!t->opt) return err ? err->code : RS_ERR_NOMEM;
        rs_optim_set_ctx(t->opt, rs_model_ctx(p->m));
        st = rs_train_apply_groups(t->opt, p->m, t->off + t->zlo, err);
        if (st) return st;
    }
    if (p->tie_max) {
        p->tie_buf = rs_mem_alloc(p->mem, RS_POOL_COMM, p->tie_max * sizeof(float));
        if (!p->tie_buf) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory for a tied gradient");
    }
    if (p->zero && most) {
        p->zblk = most;
        p->zsend = rs_mem_alloc(p->mem, RS_POOL_COMM, most * sizeof(float));
        p->zrecv = rs_mem_alloc(p->mem, RS_POOL_COMM, most * (size_t)p->grid.dp * sizeof(float));
        if (!p->zsend || !p->zrecv) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory for zero=1's gather");
    }
    /* In a pipeline some stage is always waiting for its neighbour; a waiter that spins takes the core
     * a working stage needs whenever ranks share cores (more ranks than cores, a busy machine), which
     * would show as bubble that is not the schedule's. The same holds for the other groups' waits. */
    p->ppg->polite = true;
    if (p->gg.dp) p->gg.dp->polite = true;
    if (p->gg.tp) p->gg.tp->polite = true;
    p->ex = rs_pipe_exec_new(p->ppg, p->mem, err);
    if (!p->ex) return err ? err->code : RS_ERR_NOMEM;
    p->gathered = false;
    st = rs_pipe_keep_own(p, err);
    if (st) return st;
    if (p->ctx.metric) p->ctx.metric(p->ctx.ud, 0, "stage_params", (double)p->own_floats);
    /* with a shard, the whole buffers are only a place for rank 0 to gather into from now on */
    return p->plan ? rs_model_shard_buffers(m, err) : RS_OK;
}

static rs_status p_forward_backward(void *ud, const float *x, const int32_t *y, int B, float loss_scale, float *loss,
                                    const float **logits, rs_err *err)
{
    rs_pipe_state *p = ud;
    int M = p->M < B ? p->M : B;
    if (p->kind == RS_PIPE_INTERLEAVED) M -= M % p->P;
    if (M < 1)
        return rs_err_set(err, RS_ERR_ARG, "pipeline: a batch of %d samples cannot go round %d ranks in micro-batches", B,
                          p->P);
    int R = rs_model_rows(p->m), C = rs_model_classes(p->m);
    size_t need = (size_t)B * (size_t)R * (size_t)C;
    if (need > p->logits_n) {
        rs_mem_free(p->mem, RS_POOL_SCRATCH, p->logits, p->logits_n * sizeof(float));
        p->logits = rs_mem_alloc(p->mem, RS_POOL_SCRATCH, need * sizeof(float));
        p->logits_n = p->logits ? need : 0;
        if (!p->logits) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory for %zu scores", need);
    }
    /* this rank's gradients start the step at zero (a shard is not the loop's model) */
    float *g = rs_model_grads(p->m);
    for (int c = 0; c < p->V; c++) memset(g + p->ch[c].off, 0, p->ch[c].len * sizeof(float));
    for (int i = 0; i < p->nties; i++)
        if (p->ties[i].reader) memset(g + p->ties[i].off, 0, p->ties[i].numel * sizeof(float));
    p->ar_index = 0;
    if (p->m != p->whole) rs_model_set_training(p->m, rs_model_training(p->whole));
    p->x = x, p->y = y, p->B = B, p->Meff = M, p->loss_scale = loss_scale, p->loss = 0;
    for (int m = 0, at = 0; m < M; m++) {
        p->rows[m] = B / M + (m < B % M);
        p->row0[m] = at;
        at += p->rows[m];
    }
    p->step_base = rs_model_step(p->m);
    p->acts_peak = 0;
    p->sets_peak = p->sets_held = 0;
    rs_pipe_io io = {.forward = io_forward, .backward = io_backward, .numel = io_numel, .ud = p};
    rs_status st = rs_pipe_exec_step(p->ex, p->kind, M, p->V, &io, p->step, p->ctx.work, p->ctx.work_ud, err);
    if (st) return st;
    /* every stage drew the same dropout steps; the first stage's model counted them */
    rs_model_set_step(p->m, p->step_base + (uint64_t)M);
    if (p->m != p->whole) rs_model_set_step(p->whole, p->step_base + (uint64_t)M);
    /* the loss is the last stage's: every rank reports it (with dp, the mean of the pipelines') */
    float l = (float)p->loss;
    double t0 = rs_train_now();
    st = rs_pg_broadcast(p->ppg, &l, 1, RS_F32, (p->S - 1) % p->P, err);
    if (!st && p->gg.dp) st = rs_pg_all_reduce(p->gg.dp, &l, 1, RS_F32, RS_AVG, err);
    rs_pipe_comm(p, rs_pg_op_name(RS_OP_BROADCAST), -1, sizeof l, t0);
    if (st) return st;
    *loss = l;
    *logits = p->logits; /* the last stage's scores; zeros elsewhere (accuracy is the last stage's) */
    if (p->ctx.metric) {
        p->ctx.metric(p->ctx.ud, p->step, "acts_peak_bytes", (double)p->acts_peak);
        p->ctx.metric(p->ctx.ud, p->step, "acts_inflight", p->sets_peak);
        p->ctx.metric(p->ctx.ud, p->step, "act_set_bytes", (double)p->set_bytes);
    }
    return RS_OK;
}

/* The two contributions of each parameter shared across ranks, summed on both (a + b == b + a, so
 * both hold the same bits); then, with dp, the replicas of this stage average what they hold, as DDP
 * does. */
static rs_status p_after_backward(void *ud, rs_err *err)
{
    rs_pipe_state *p = ud;
    float *g = rs_model_grads(p->m);
    for (int i = 0; i < p->nties; i++) {
        rs_pipe_tie *t = &p->ties[i];
        double t0 = rs_train_now();
        rs_work *rw = NULL, *sw = NULL;
        rs_status st = rs_pg_irecv(p->ppg, p->tie_buf, t->numel, RS_F32, t->peer, &rw, err);
        if (!st) st = rs_pg_isend(p->ppg, g + t->off, t->numel, RS_F32, t->peer, &sw, err);
        if (!st) st = rs_work_wait(rw, err);
        if (!st) st = rs_work_wait(sw, err);
        rs_work_free(rw);
        rs_work_free(sw);
        if (st) return rs_err_prefix(err, "pipeline: summing a tied gradient with stage rank %d", t->peer);
        for (size_t k = 0; k < t->numel; k++) g[t->off + k] += p->tie_buf[k];
        rs_pipe_comm(p, "tie_sum", i, 2 * t->numel * sizeof(float), t0);
    }
    if (!p->gg.dp) return RS_OK;
    for (int c = 0; c < p->V; c++) {
        if (!p->ch[c].len) continue;
        double t0 = rs_train_now();
        rs_status st = rs_pg_all_reduce(p->gg.dp, g + p->ch[c].off, p->ch[c].len, RS_F32, RS_AVG, err);
        rs_pipe_comm(p, rs_pg_op_name(RS_OP_ALL_REDUCE), -1, p->ch[c].len * sizeof(float), t0);
        if (st) return rs_err_prefix(err, "pipeline: averaging stage %d's gradients over its dp group", p->ch[c].stage);
    }
    for (int i = 0; i < p->nties; i++) {
        if (!p->ties[i].reader) continue;
        double t0 = rs_train_now();
        rs_status st = rs_pg_all_reduce(p->gg.dp, g + p->ties[i].off, p->ties[i].numel, RS_F32, RS_AVG, err);
        rs_pipe_comm(p, rs_pg_op_name(RS_OP_ALL_REDUCE), -1, p->ties[i].numel * sizeof(float), t0);
        if (st) return rs_err_prefix(err, "pipeline: averaging a tied gradient over the dp group");
    }
    return RS_OK;
}

/* The global norm's square: each stage's ranges once (with tp, a split tensor on every shard and a
 * replicated one on shard 0 alone); a tied copy counts with its owner. */
static rs_status p_grad_sumsq(void *ud, double *sumsq, rs_err *err)
{
    rs_pipe_state *p = ud;
    const float *g = rs_model_grads(p->m);
    double s = 0;
    if (p->plan) {
        /* the ranges of other stages hold zeros, a tied copy its owner's sum (replicated: shard 0 counts it) */
        s = rs_tp_sumsq(p->plan, p->grid.t, g);
        for (int i = 0; i < p->nties && p->grid.t == 0; i++)
            if (p->ties[i].reader)
                for (size_t k = 0; k < p->ties[i].numel; k++) s -= (double)g[p->ties[i].off + k] * g[p->ties[i].off + k];
    } else {
        for (int c = 0; c < p->V; c++)
            for (size_t i = 0; i < p->ch[c].len; i++) s += (double)g[p->ch[c].off + i] * g[p->ch[c].off + i];
    }
    double t0 = rs_train_now();
    rs_status st = rs_pg_all_reduce(p->ppg, &s, 1, RS_F64, RS_SUM, err);
    if (!st && p->gg.tp) st = rs_pg_all_reduce(p->gg.tp, &s, 1, RS_F64, RS_SUM, err);
    rs_pipe_comm(p, rs_pg_op_name(RS_OP_ALL_REDUCE), -1, sizeof s, t0);
    *sumsq = s;
    return st;
}

static void p_grad_scale(void *ud, float s)
{
    rs_pipe_state *p = ud;
    float *g = rs_model_grads(p->m);
    for (int c = 0; c < p->V; c++)
        for (size_t i = 0; i < p->ch[c].len; i++) g[p->ch[c].off + i] *= s;
    for (int i = 0; i < p->nties; i++)
        if (p->ties[i].reader)
            for (size_t k = 0; k < p->ties[i].numel; k++) g[p->ties[i].off + k] *= s;
}

/* rank 0 gives the gathered whole weights back: they are stale once the shards move. */
static void release_whole(rs_pipe_state *p)
{
    if (!p->whole_resident) return;
    for (int i = 0; i < rs_model_unit_count(p->whole); i++) rs_model_unit_release(p->whole, RS_POOL_PARAMS, i);
    p->whole_resident = false;
}

static rs_status p_step(void *ud, float lr, rs_err *err)
{
    rs_pipe_state *p = ud;
    float *w = rs_model_params(p->m), *g = rs_model_grads(p->m);
    rs_status st = RS_OK;
    for (int c = 0; c < p->V && !st; c++) {
        rs_pipe_chunk *ch = &p->ch[c];
        size_t at = ch->off + ch->zlo;
        if (ch->opt) st = rs_optim_step(ch->opt, w + at, g + at, lr);
        if (st) st = rs_err_set(err, st, "pipeline: optimizer step failed (lr=%g)", (double)lr);
        if (!st && p->zero && ch->len) st = rs_pipe_zero_gather(p, ch->off, ch->len, ch->blk, ch->zlo, ch->zlen, err);
    }
    for (int i = 0; i < p->nties && !st; i++) {
        rs_pipe_tie *t = &p->ties[i];
        size_t at = t->off + t->zlo;
        if (t->opt && (st = rs_optim_step(t->opt, w + at, g + at, lr)) != RS_OK)
            st = rs_err_set(err, st, "pipeline: optimizer step failed (lr=%g)", (double)lr);
        if (!st && p->zero && t->reader) st = rs_pipe_zero_gather(p, t->off, t->numel, t->blk, t->zlo, t->zlen, err);
    }
    if (st) return st;
    release_whole(p);
    rs_pipe_release_others(p);
    p->gathered = false;
    p->step++;
    return RS_OK;
}

/* Rank 0 of each pipeline of the first replica receives every other stage's range (in stage order on
 * every rank, so sends meet receives); with tp, then, the shards of that first stage's tp group meet
 * in the whole model on rank 0. The other replicas hold the same weights. */
static rs_status p_gather(void *ud, rs_err *err)
{
    rs_pipe_state *p = ud;
    if (p->gathered) return RS_OK;
    p->gathered = true;
    rs_model_set_step(p->whole, rs_model_step(p->m));
    if (p->grid.d != 0) return RS_OK;
    if (p->rank == 0 && !p->others_resident) {
        for (int u = 0; u < rs_model_unit_count(p->m); u++) rs_model_unit_acquire(p->m, RS_POOL_PARAMS, u);
        p->others_resident = true;
    }
    float *w = rs_model_params(p->m);
    double t0 = rs_train_now();
    size_t moved = 0;
    for (int s = 0; s < p->S; s++) {
        int owner = s % p->P;
        size_t off, len;
        rs_pipe_stage_range(p->m, p->cuts[s], p->cuts[s + 1], &off, &len);
        if (owner == 0 || !len) continue;
        rs_status st = RS_OK;
        if (p->rank == 0) st = rs_pg_recv(p->ppg, w + off, len, RS_F32, owner, err);
        else if (p->rank == owner) st = rs_pg_send(p->ppg, w + off, len, RS_F32, 0, err);
        if (st) return rs_err_prefix(err, "pipeline: gathering stage %d's parameters to its first rank", s);
        moved += len * sizeof(float);
    }
    rs_pipe_comm(p, "gather_stages", -1, moved, t0);
    if (!p->plan || p->rank != 0) return RS_OK;
    if (p->g->rank == 0 && !p->whole_resident) {
        for (int i = 0; i < rs_model_unit_count(p->whole); i++) rs_model_unit_acquire(p->whole, RS_POOL_PARAMS, i);
        p->whole_resident = true;
    }
    rs_status st = rs_tp_gather_whole(p->gg.tp, p->plan, w, p->g->rank == 0 ? rs_model_params(p->whole) : NULL,
                                      p->tp_stage, p->ctx.comm, p->ctx.comm_ud, p->step, err);
    return st ? rs_err_prefix(err, "pipeline: gathering the first stage's tensor-parallel shards to rank 0") : RS_OK;
}

static void p_teardown(void *ud)
{
    rs_pipe_state *p = ud;
    if (!p) return;
    for (int c = 0; p->ch && c < p->V; c++) {
        rs_optim_free(p->ch[c].opt);
        for (int i = 0; i < p->ch[c].nsets; i++) rs_acts_free(p->ch[c].sets[i]);
        free(p->ch[c].sets);
        free(p->ch[c].busy);
        free(p->ch[c].bytes);
    }
    for (int i = 0; i < p->nties; i++) rs_optim_free(p->ties[i].opt);
    if (p->full) {
        rs_mem_count(p->mem, RS_POOL_SCRATCH, -(int64_t)rs_optim_state_bytes(p->full));
        rs_optim_free(p->full);
    }
    rs_mem_free(p->mem, RS_POOL_COMM, p->tie_buf, p->tie_max * sizeof(float));
    rs_mem_free(p->mem, RS_POOL_SCRATCH, p->logits, p->logits_n * sizeof(float));
    rs_mem_free(p->mem, RS_POOL_COMM, p->zsend, p->zblk * sizeof(float));
    rs_mem_free(p->mem, RS_POOL_COMM, p->zrecv, p->zblk * (size_t)p->grid.dp * sizeof(float));
    rs_mem_free(p->mem, RS_POOL_COMM, p->tp_stage, p->tp_stage_n * sizeof(float));
    rs_mem_free(p->mem, RS_POOL_SCRATCH, p->ck, p->ck_n * sizeof(float));
    rs_pipe_exec_free(p->ex);
    if (p->ex && p->ppg) p->ppg->polite = false;
    if (p->m == p->whole && rs_model_buffers_sharded(p->whole)) {
        /* the model keeps what its buffer holds (rank 0: the last gather, the whole weights) */
        rs_err e = {0};
        (void)rs_model_unshard_buffers(p->whole, &e); /* teardown has no status; rs_model_free handles it */
    } else if (p->m && p->m != p->whole) {
        /* the whole model keeps what its buffer holds: rank 0's last gather, the whole weights */
        if (rs_model_buffers_sharded(p->whole)) {
            rs_err e = {0};
            (void)rs_model_unshard_buffers(p->whole, &e); /* teardown has no status; rs_model_free handles it */
        }
        rs_model_acquire_grads(p->whole, NULL);
        rs_model_free(p->m);
    }
    rs_tp_plan_free(p->plan);
    rs_grid_groups_clear(&p->gg, p->g);
    free(p->ties);
    free(p->ch);
    free(p->cuts);
    free(p->wcuts);
    free(p->rows);
    free(p->row0);
    free(p->held);
    free(p);
}

static rs_status pipeline_make(const rs_strategy_ctx *x, rs_train_strategy *out, rs_err *err)
{
    rs_pipe_kind k = (rs_pipe_kind)rs_strategy_choice(x->args, "schedule");
    int M = (int)rs_strategy_int(x->args, "micro"), V = rs_pipe_virtual_of(x->args, k);
    if (k == RS_PIPE_NAIVE && !rs_strategy_given(x->args, "micro")) M = 1;
    rs_status st = rs_pipe_layout_check(x->args, NULL, x->g->world, x->cfg, err);
    if (st) return st;
    rs_pipe_state *p = calloc(1, sizeof *p); /* owned by the strategy; p_teardown frees it */
    if (!p) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
    p->g = x->g;
    p->whole = p->m = x->m;
    p->mem = rs_model_mem(x->m);
    p->ctx = *x;
    p->kind = k;
    st = rs_pipe_grid_of(x->args, x->g->world, x->g->rank, &p->grid, err);
    if (!st) st = rs_grid_groups_new(x->g, &p->grid, &p->gg, err);
    if (st) {
        p_teardown(p);
        return st;
    }
    p->ppg = p->gg.pp;
    p->zero = (int)rs_strategy_int(x->args, "zero");
    p->P = p->grid.pp;
    p->rank = p->grid.p;
    p->V = V;
    p->S = p->P * V;
    p->M = M;
    int batch = x->cfg ? x->cfg->batch / p->grid.dp : M;
    p->batch_cap = (batch + M - 1) / M;
    p->cuts = calloc((size_t)p->S + 1, sizeof *p->cuts);
    p->wcuts = calloc((size_t)p->S + 1, sizeof *p->wcuts);
    p->ch = calloc((size_t)V, sizeof *p->ch);
    p->rows = calloc((size_t)M, sizeof *p->rows);
    p->row0 = calloc((size_t)M, sizeof *p->row0);
    p->held = calloc((size_t)M * (size_t)V, sizeof *p->held);
    if (!p->cuts || !p->wcuts || !p->ch || !p->rows || !p->row0 || !p->held) {
        p_teardown(p);
        return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
    }
    if (x->metric) { /* the session log keeps each rank's place in the layout */
        x->metric(x->ud, 0, "pp_stage", p->grid.p);
        x->metric(x->ud, 0, "dp_replica", p->grid.d);
        x->metric(x->ud, 0, "tp_shard", p->grid.t);
    }
    /* the sampler's split is the dp group's: every stage of a pipeline reads its replica's rows */
    *out = (rs_train_strategy){.name = "pipeline", .ud = p, .rank = p->grid.d, .world = p->grid.dp,
                               .report = x->g->rank == 0,
                               .setup = p_setup, .forward_backward = p_forward_backward, .own_acts = true,
                               .own_phases = true,
                               .after_backward = p_after_backward, .step = p_step, .gather = p_gather,
                               .optimizer = rs_pipe_optimizer, .sync_optimizer = rs_pipe_sync_optimizer, .teardown = p_teardown,
                               .grad_sumsq = p_grad_sumsq, .grad_scale = p_grad_scale};
    return RS_OK;
}

/* The batch splits over the dp pipelines; every stage of one reads its part whole. */
static int pipeline_batch_parts(const rs_strategy_args *a, int world)
{
    rs_grid g;
    return rs_grid_new(world, (int)rs_strategy_int(a, "dp"), rs_strategy_given(a, "pp") ? (int)rs_strategy_int(a, "pp") : 0,
                       rs_strategy_given(a, "tp") ? (int)rs_strategy_int(a, "tp") : 1, 0, &g, NULL)
               ? 1
               : g.dp;
}

const rs_strategy_def rs_strategy_pipeline = {
    .name = "pipeline", .kind = "rank processes",
    .about = "pipeline parallelism: stages of layers on the ranks, micro-batches flowing through them",
    .uses = RS_SUSE_RANKS | RS_SUSE_PROCS | RS_SUSE_WHOLE_BATCH, .opts = rs_pipe_opts, .check = rs_pipe_layout_check,
    .make = pipeline_make, .batch_parts = pipeline_batch_parts,
};
