/* The training loop (see train.h), as its steps: check, set up, resume, one optimizer step, evaluate,
 * checkpoint, report. A train_run carries what they share from one to the next. All buffers are
 * allocated before the first step; a step itself allocates nothing. */
#include "train.h"
#include "engine/core/kernels.h"
#include "train_priv.h"
#include "tune.h"

#include <math.h>
#include <stdlib.h>

#include "engine/ckpt/checkpoint.h"
#include "engine/data/loader.h"

static void phase(const rs_train_hooks *h, int64_t step, rs_phase p, double t0, double t1)
{
    if (h && h->on_phase) h->on_phase(h->ud, step, p, t0, t1);
}

/* The sum of squares of every gradient the step applies: the strategy's (over its shards, the same on
 * every rank) or the model's own buffer's, in double. */
static rs_status grad_sumsq(rs_model *m, const rs_train_strategy *sg, double *sq, rs_err *err)
{
    *sq = 0.0;
    if (sg && sg->grad_sumsq) return sg->grad_sumsq(sg->ud, sq, err);
    return rs_model_grads_sumsq(m, sq, err);
}

/* torch.nn.utils.clip_grad_norm_: the norm over every gradient, scaled down to max when above it. */
static rs_status clip_grads(rs_model *m, const rs_train_strategy *sg, float max, double *norm, rs_err *err)
{
    double sq;
    rs_status st = grad_sumsq(m, sg, &sq, err);
    if (st) return st;
    *norm = sqrt(sq);
    double coef = max / (*norm + 1e-6);
    if (coef < 1.0) {
        if (sg && sg->grad_scale) sg->grad_scale(sg->ud, (float)coef);
        else if (rs_model_kernels(m)->scale(rs_model_ctx(m), rs_model_grads(m), rs_model_numel(m), (float)coef))
            return rs_kctx_check(rs_model_ctx(m), err);
    }
    return RS_OK;
}

/* The whole model's update, with the kernel's message when it failed there. */
static rs_status optim_step(rs_optim *o, rs_model *m, float lr, rs_err *err)
{
    rs_status st = rs_optim_step(o, rs_model_params(m), rs_model_grads(m), lr);
    if (st && !rs_kctx_check(rs_optim_ctx(o), err))
        rs_err_set(err, st, "optimizer step with lr=%g failed", (double)lr);
    return st;
}

/* Whether every gradient the step would apply is finite (the scaler's check, before unscaling), and the
 * unscaling itself. A sum of squares in double is finite exactly when every fp32 value is, and across
 * ranks the strategy's sum already agrees on every rank, so all ranks skip the same steps. */
static rs_status grads_finite(rs_model *m, const rs_train_strategy *sg, bool *finite, rs_err *err)
{
    double sq;
    rs_status st = grad_sumsq(m, sg, &sq, err);
    if (st) return st;
    *finite = isfinite(sq);
    return RS_OK;
}

static rs_status grads_scale(rs_model *m, const rs_train_strategy *sg, float s, rs_err *err)
{
    if (sg && sg->grad_scale) sg->grad_scale(sg->ud, s);
    else if (rs_model_kernels(m)->scale(rs_model_ctx(m), rs_model_grads(m), rs_model_numel(m), s))
        return rs_kctx_check(rs_model_ctx(m), err);
    return RS_OK;
}

static void emit(const rs_train_hooks *h, rs_train_event *ev)
{
    if (h && h->on_event) h->on_event(h->ud, ev);
}

static rs_status checkpoint(const rs_train_cfg *cfg, rs_model *m, rs_optim *o, int epoch, int64_t batch_in_epoch,
                            int64_t step, const rs_train_hooks *h, rs_train_event *ev, rs_err *err)
{
    rs_ckpt_pos pos = {.step = step, .epoch = epoch, .batch_in_epoch = batch_in_epoch, .data_seed = cfg->seed,
                       .model_seed = rs_model_seed(m), .model_step = rs_model_step(m), .batch = cfg->batch};
    rs_status st = rs_ckpt_save_train(cfg->ckpt_path, m, o, &pos, err);
    if (st) return st;
    rs_train_event c = *ev;
    c.kind = RS_TRAIN_EV_CKPT;
    c.path = cfg->ckpt_path;
    emit(h, &c);
    return RS_OK;
}

/* One call of rs_train: what its steps share. */
typedef struct train_run {
    rs_model *m;                  /* borrowed */
    const rs_data_pair *data;     /* borrowed */
    const rs_train_hooks *h;      /* borrowed; may be NULL */
    const rs_train_strategy *sg;  /* borrowed from cfg; NULL: one process, one optimizer */
    rs_train_cfg cfg;             /* a copy: set-up fills in the schedule's base_lr and total */
    rs_kctx *kc;                  /* the model's */
    rs_prec prec_before;          /* the run's precision is the run's: put back at the end */
    int world, accum, local;      /* local: this rank's part of every (micro-)batch */
    int R, C;                     /* labels per sample (one per position for a token model); scores */
    bool report;                  /* this process evaluates and writes checkpoints */
    rs_loader *loader;            /* owned */
    float *x;                     /* (local, sample numel), owned: 4-byte elements, floats or ids */
    int32_t *y;                   /* (local, R), owned */
    rs_optim *opt;                /* owned; NULL under a strategy (it keeps its own) */
    rs_optim *ckpt_opt;           /* borrowed: the whole optimizer for checkpoints, or NULL */
    int64_t batches, steps_total; /* optimizer steps per epoch, planned in all */
    int start_epoch;
    int64_t skip;                 /* steps of start_epoch that a resume already made */
    int64_t step, start_step;
    rs_thread_tuner tune;         /* off until the loop begins */
    rs_grad_scaler scaler;
    rs_train_event ev;            /* the last event, updated step by step */
    rs_train_result r;
    double t_run;
    int64_t samples_run;
    bool done;                    /* stop after this epoch's tail (stopped or max_steps) */
} train_run;

/* One epoch's running sums. */
typedef struct train_epoch {
    int epoch;
    double t0, lsum, correct;
    int64_t nb, ns;             /* steps and samples done in the epoch, a resume's skipped ones included */
    int64_t nb_start, ns_start; /* those skipped */
    int64_t lost;               /* samples of skipped fp16 steps whose loss overflowed */
    double td, tf, tb, to;      /* seconds in data, forward, backward, optimizer */
} train_epoch;

/* Refuses a configuration before anything of the model or the machine changes. */
static rs_status train_check(const train_run *s, rs_err *err)
{
    const rs_train_cfg *cfg = &s->cfg;
    const rs_train_strategy *sg = s->sg;
    if (!s->data || !s->data->train) return rs_err_set(err, RS_ERR_ARG, "no training data");
    const rs_dataset *train = s->data->train;
    if (cfg->epochs < 1) return rs_err_set(err, RS_ERR_ARG, "epochs must be >= 1, got %d", cfg->epochs);
    if (cfg->batch < 1 || cfg->batch > (1 << 20))
        return rs_err_set(err, RS_ERR_ARG, "batch must be in 1..1048576, got %d", cfg->batch);
    if (cfg->max_steps < 0) return rs_err_set(err, RS_ERR_ARG, "max steps must be >= 0");
    if (cfg->ckpt_every < 0) return rs_err_set(err, RS_ERR_ARG, "ckpt_every must be >= 0");
    if (cfg->ckpt_every > 0 && !cfg->ckpt_path)
        return rs_err_set(err, RS_ERR_ARG, "ckpt_every needs a checkpoint path (ckpt=FILE.safetensors)");
    if (s->accum > 4096) return rs_err_set(err, RS_ERR_ARG, "accum must be 1..4096, got %d", cfg->accum);
    if ((unsigned)cfg->precision >= RS_PREC_COUNT)
        return rs_err_set(err, RS_ERR_ARG, "precision %d is not one of fp32, bf16, fp16", (int)cfg->precision);
    if (cfg->precision != RS_PREC_FP16 && (cfg->inject_inf || cfg->loss_scale > 0))
        return rs_err_set(err, RS_ERR_ARG, "%s is for precision=fp16 (the loss scaler), this run is %s",
                          cfg->inject_inf ? "inject_inf" : "loss_scale", rs_prec_name(cfg->precision));
    if (!(cfg->loss_scale >= 0) || !isfinite(cfg->loss_scale) || cfg->inject_inf < 0 || cfg->scale_window < 0)
        return rs_err_set(err, RS_ERR_ARG, "loss_scale must be a finite scale > 0 (0: 65536), inject_inf a step >= 1, "
                          "scale_window >= 1");
    if (sg && (s->world < 1 || sg->rank < 0 || sg->rank >= s->world || !sg->step))
        return rs_err_set(err, RS_ERR_ARG, "training strategy %s: rank %d of world %d", sg->name, sg->rank, s->world);
    if (cfg->batch % s->world)
        return rs_err_set(err, RS_ERR_ARG,
                          "batch=%d does not split over %d ranks; the global batch must be a multiple of the ranks "
                          "(try batch=%d)",
                          cfg->batch, s->world, (cfg->batch / s->world + 1) * s->world);
    rs_status st = rs_opt_cfg_check(&cfg->opt, err);
    if (!st) st = rs_model_check_trainable(s->m, err);
    if (st) return st;
    st = rs_train_check_data(s->m, train, err);
    if (st) return st;
    if (train->n == 0) return rs_err_set(err, RS_ERR_ARG, "data set %s is empty", train->name);
    return RS_OK;
}

/* The context's threads and precision, the loader and the schedule. On failure the loader is freed
 * here and no result is written (as for a refused configuration). */
static rs_status train_open(train_run *s, rs_err *err)
{
    rs_train_cfg *cfg = &s->cfg;
    /* The threads are the model's: its context runs forward, backward, the update and the tuner. So is
     * the precision: activation sets and replicas made from here on copy it. */
    if (cfg->threads > 0) rs_kctx_set_threads(s->kc, cfg->threads);
    s->kc->prec = cfg->precision;

    rs_sampler_cfg sc = rs_sampler_cfg_default();
    sc.seed = cfg->seed;
    sc.rank = s->sg ? s->sg->rank : 0;
    sc.world = s->world;
    /* a text's windows are drawn as nanoGPT's get_batch draws them: no index list as long as the text */
    sc.draw = s->data->train->tokens;
    /* drop_last: DistributedSampler's and DataLoader's, so every step is a full global batch and ranks
     * train exactly what one process does (docs/parallel.md, "Uneven splits") */
    sc.drop_last = sc.drop_last_batch = cfg->drop_last;
    s->local = cfg->batch / s->world;
    s->loader = rs_loader_new(s->data->train, s->local, &sc, err);
    if (!s->loader) return err ? err->code : RS_ERR_NOMEM;
    /* Optimizer steps per epoch: micro-batches in groups of accum (a last incomplete group is dropped,
     * as a batch of accum*batch with drop_last would be). */
    int64_t micro = rs_loader_batches(s->loader);
    s->batches = micro / s->accum;
    rs_status st = RS_OK;
    if (s->batches == 0)
        st = rs_err_set(err, RS_ERR_ARG, "an epoch of %u samples per rank has no full step of %d x %d",
                        rs_loader_samples(s->loader), s->accum, s->local);
    s->steps_total = s->batches * cfg->epochs;
    if (cfg->max_steps && cfg->max_steps < s->steps_total) s->steps_total = cfg->max_steps;
    cfg->sched.base_lr = cfg->opt.lr;
    if (cfg->sched.kind == RS_SCHED_COSINE && cfg->sched.total == 0) cfg->sched.total = s->steps_total;
    if (!st) st = rs_sched_check(&cfg->sched, err);
    if (st) {
        rs_loader_free(s->loader);
        s->loader = NULL;
    }
    return st;
}

/* The batch buffers, the optimizer (one process) or the strategy's set-up, activations, and the
 * optimizer that checkpoints save. */
static rs_status train_alloc(train_run *s, rs_err *err)
{
    const rs_train_strategy *sg = s->sg;
    rs_model *m = s->m;
    size_t per = rs_dataset_sample_numel(s->data->train);
    s->x = malloc((size_t)s->local * per * sizeof *s->x);
    s->y = malloc((size_t)s->local * (size_t)s->R * sizeof *s->y);
    /* One process keeps the whole optimizer; a strategy keeps its own (whole or a shard). */
    s->opt = sg ? NULL : rs_optim_new(&s->cfg.opt, rs_model_device(m), rs_model_numel(m), rs_model_mem(m), err);
    rs_status st = RS_OK;
    if (!sg && s->opt) {
        rs_optim_set_ctx(s->opt, s->kc);
        st = rs_train_apply_groups(s->opt, m, 0, err);
        if (st) return st;
    }
    if (!s->x || !s->y || (!sg && !s->opt)) {
        if (!sg && !s->opt) return err ? err->code : RS_ERR_NOMEM;
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory for a batch of %d", s->local);
    }
    if (!sg || !sg->own_acts) st = rs_model_reserve(m, s->local, err);
    if (st) return st;
    if (sg && sg->setup) {
        st = sg->setup(sg->ud, m, &s->cfg.opt, err);
        if (st) return st;
    }
    /* The whole optimizer for checkpoints; a sharding strategy makes one only when a run checkpoints or
     * resumes (it costs a full copy of the state). */
    bool ckpts = s->cfg.ckpt_path || s->cfg.resume;
    s->ckpt_opt = sg ? (sg->optimizer && ckpts ? sg->optimizer(sg->ud) : NULL) : s->opt;
    return RS_OK;
}

/* Continues from cfg.resume: the checkpoint's position, weights and optimizer. */
static rs_status train_resume(train_run *s, rs_err *err)
{
    const rs_train_cfg *cfg = &s->cfg;
    /* Check that the resume makes sense before anything of the model is overwritten. */
    rs_ckpt_pos pos;
    rs_status st = rs_ckpt_read_pos(cfg->resume, &pos, err);
    if (st) return st;
    if (pos.data_seed != cfg->seed)
        return rs_err_set(err, RS_ERR_ARG,
                          "checkpoint %s was written by a run with seed=%llu, this one has seed=%llu; resume "
                          "with seed=%llu to see the same data order",
                          cfg->resume, (unsigned long long)pos.data_seed, (unsigned long long)cfg->seed,
                          (unsigned long long)pos.data_seed);
    if (pos.batch != cfg->batch)
        return rs_err_set(err, RS_ERR_ARG,
                          "checkpoint %s was written with batch=%lld, this run has batch=%d; resume with "
                          "batch=%lld (the position in the epoch is counted in batches)",
                          cfg->resume, (long long)pos.batch, cfg->batch, (long long)pos.batch);
    st = rs_ckpt_load_train(cfg->resume, s->m, s->ckpt_opt, &pos, err);
    if (!st && s->sg && s->sg->sync_optimizer) st = s->sg->sync_optimizer(s->sg->ud, false, err);
    if (st) return st;
    s->start_epoch = pos.epoch;
    s->skip = pos.batch_in_epoch;
    s->step = pos.step;
    s->start_step = s->step;
    return RS_OK;
}

/* What one optimizer step's micro-batches add up to. */
typedef struct train_sums {
    float loss; /* the step's mean loss */
    int B;      /* samples */
    double t_fwd, t_bwd;
} train_sums;

/* Forward, loss and backward of accum micro-batches, their gradients summed (each loss scaled by
 * ls/accum). B stays 0 when the loader has no batch left. */
static rs_status train_accumulate(train_run *s, train_epoch *e, float ls, train_sums *sum, rs_err *err)
{
    const rs_train_strategy *sg = s->sg;
    const rs_train_hooks *h = s->h;
    rs_model *m = s->m;
    int accum = s->accum;
    for (int k = 0; k < accum; k++) {
        double a1 = rs_train_now();
        int rows = rs_loader_next(s->loader, s->x, s->y);
        if (rows <= 0) break;
        double b1 = rs_train_now();
        phase(h, s->step, RS_PHASE_DATA, a1, b1);
        float l = 0;
        const float *logits = NULL;
        rs_status st;
        if (k == 0) rs_model_zero_grad(m);
        double c1, d1;
        if (sg && sg->forward_backward) {
            st = sg->forward_backward(sg->ud, s->x, s->y, rows, ls / (float)accum, &l, &logits, err);
            c1 = d1 = rs_train_now();
            if (!st && !sg->own_phases) phase(h, s->step, RS_PHASE_BACKWARD, b1, d1);
        } else {
            st = rs_model_forward(m, s->x, rows, &logits, err);
            if (!st) st = rs_model_loss(m, s->y, rows, &l, err);
            c1 = rs_train_now();
            if (!st) phase(h, s->step, RS_PHASE_FORWARD, b1, c1);
            if (!st && sg && sg->before_backward) st = sg->before_backward(sg->ud, k == accum - 1, err);
            if (!st) rs_model_backward(m, s->x, s->y, rows, ls / (float)accum);
            if (!st) st = rs_kctx_check(s->kc, err); /* backward returns nothing: its kernels' failure */
            d1 = rs_train_now();
            if (!st) phase(h, s->step, RS_PHASE_BACKWARD, c1, d1);
        }
        if (st) return st;
        sum->t_fwd += c1 - b1;
        sum->t_bwd += d1 - c1;
        sum->loss += l / (float)accum;
        sum->B += rows;
        for (int i = 0; i < rows * s->R; i++) e->correct += rs_train_argmax(logits + (size_t)i * s->C, s->C) == s->y[i];
    }
    return RS_OK;
}

/* From summed gradients to updated parameters: the strategy combines them (from c; *d: when that
 * ended), the fp16 scaler checks and unscales them, clip= clips them, the optimizer applies them.
 * *apply: false when the scaler skipped the step. */
static rs_status train_update(train_run *s, float lr, double c, double *d, bool *apply, rs_err *err)
{
    const rs_train_strategy *sg = s->sg;
    rs_status st = RS_OK;
    *apply = true;
    *d = c;
    if (sg) {
        /* combining gradients counts as backward time here; the strategy reports its own
         * communication spans through on_phase */
        if (sg->after_backward) st = sg->after_backward(sg->ud, err);
        *d = rs_train_now();
        /* the compute thread waits here for communication still in flight (ddp's buckets) or
         * runs the strategy's blocking collectives: idle, as far as computing goes */
        if (!st && *d > c) phase(s->h, s->step, RS_PHASE_IDLE, c, *d);
    }
    if (!st && s->scaler.enabled) {
        /* GradScaler.step: check, skip or unscale, and only then clip (a norm of scaled gradients
         * would clip at the wrong size) */
        bool finite = false;
        float sc = s->scaler.scale;
        st = grads_finite(s->m, sg, &finite, err);
        if (!st) *apply = rs_grad_scaler_update(&s->scaler, finite);
        if (!st && *apply) st = grads_scale(s->m, sg, 1.0f / sc, err);
    }
    if (!st && *apply && s->cfg.clip > 0) st = clip_grads(s->m, sg, s->cfg.clip, &s->ev.grad_norm, err);
    if (!st && *apply) st = sg ? sg->step(sg->ud, lr, err) : optim_step(s->opt, s->m, lr, err);
    return st;
}

/* The STEP event: the step's figures and the epoch's so far. */
static void train_report(train_run *s, const train_epoch *e, float loss, float lr, double now)
{
    rs_train_event *ev = &s->ev;
    double el = now - e->t0;
    int64_t ns = e->ns - e->ns_start;
    ev->kind = RS_TRAIN_EV_STEP;
    ev->epoch = e->epoch;
    ev->step = s->step;
    ev->batch = e->nb;
    ev->samples = e->ns;
    ev->loss = loss;
    ev->lr = lr;
    ev->epoch_loss = ns > e->lost ? e->lsum / (double)(ns - e->lost) : 0;
    ev->epoch_acc = e->correct / ((double)ns * s->R);
    ev->elapsed_s = el;
    ev->samples_per_s = (double)ns / (el > 0 ? el : 1e-9);
    ev->eta_s = (e->nb > e->nb_start) ? el / (double)(e->nb - e->nb_start) * (double)(s->batches - e->nb) : 0;
    ev->t_data = e->td;
    ev->t_fwd = e->tf;
    ev->t_bwd = e->tb;
    ev->t_opt = e->to;
    ev->rows = s->R;
    ev->skipped = s->scaler.skipped;
    ev->loss_scale = s->scaler.scale;
    emit(s->h, ev);
}

static bool has_test(const train_run *s) { return s->data->test && s->data->test->n; }

/* Test figures into the result and an EVAL event; on max_samples samples (0: all). The strategy has
 * gathered the whole parameters into the model before. */
static rs_status train_evaluate(train_run *s, uint32_t max_samples, rs_err *err)
{
    const rs_train_cfg *cfg = &s->cfg;
    rs_status st = rs_evaluate_n(s->m, s->data->test, cfg->eval_batch ? cfg->eval_batch : cfg->batch, max_samples,
                                 &s->r.test_acc, &s->r.test_loss, err);
    /* nanoGPT's estimate_loss: the training loss of the model as it is now, on as many samples as the
     * validation figure (not a mean since step 0, which trails the model) */
    s->ev.train_eval_loss = -1;
    if (!st && cfg->eval_every)
        st = rs_evaluate_n(s->m, s->data->train, cfg->eval_batch ? cfg->eval_batch : cfg->batch,
                           max_samples && max_samples < s->data->test->n ? max_samples : s->data->test->n, NULL,
                           &s->ev.train_eval_loss, err);
    s->r.train_eval_loss = s->ev.train_eval_loss;
    rs_model_set_training(s->m, true);
    if (st) return st;
    s->ev.kind = RS_TRAIN_EV_EVAL;
    s->ev.test_acc = s->r.test_acc;
    s->ev.test_loss = s->r.test_loss;
    emit(s->h, &s->ev);
    return RS_OK;
}

/* eval_every: a language model's epoch is long, so its validation loss comes every eval_every steps
 * (and after the last), on eval_samples windows (nanoGPT's estimate_loss). */
static rs_status train_eval_every(train_run *s, const train_epoch *e, rs_err *err)
{
    const rs_train_cfg *cfg = &s->cfg;
    bool last = (cfg->max_steps && s->step >= cfg->max_steps) || (e->epoch + 1 == cfg->epochs && e->nb == s->batches);
    if (!cfg->eval || !cfg->eval_every || !(s->step % cfg->eval_every == 0 || last) || !has_test(s)) return RS_OK;
    rs_status st = RS_OK;
    if (s->sg && s->sg->gather) st = s->sg->gather(s->sg->ud, err);
    if (!st && s->report) return train_evaluate(s, (uint32_t)cfg->eval_samples, err);
    rs_model_set_training(s->m, true);
    return st;
}

/* A checkpoint of the position after the current step: every rank gathers, rank 0 writes. */
static rs_status train_ckpt(train_run *s, const train_epoch *e, rs_err *err)
{
    const rs_train_strategy *sg = s->sg;
    rs_status st = RS_OK;
    if (sg && sg->gather) st = sg->gather(sg->ud, err);
    if (!st && sg && sg->sync_optimizer) st = sg->sync_optimizer(sg->ud, true, err);
    bool full = e->nb == s->batches; /* a finished epoch resumes at the next one's start */
    if (!st && s->report)
        st = checkpoint(&s->cfg, s->m, s->ckpt_opt, full ? e->epoch + 1 : e->epoch, full ? 0 : e->nb, s->step, s->h,
                        &s->ev, err);
    return st;
}

/* One optimizer step, then what follows it: the STEP event, eval_every, ckpt_every. *more: false when
 * the epoch ends here (no batch left, max_steps, or a stop asked). */
static rs_status train_step(train_run *s, train_epoch *e, bool *more, rs_err *err)
{
    const rs_train_cfg *cfg = &s->cfg;
    *more = false;
    if (s->h && s->h->should_stop && s->h->should_stop(s->h->ud)) {
        s->r.stopped = true;
        s->done = true;
        return RS_OK;
    }
    double a = rs_train_now(), d;
    train_sums sum = {0};
    /* GradScaler: the loss gradient carries the scale (infinite on the injected step) */
    float ls = s->scaler.scale;
    if (cfg->inject_inf && s->step + 1 == cfg->inject_inf) ls = INFINITY;
    rs_status st = train_accumulate(s, e, ls, &sum, err);
    if (st || sum.B <= 0) return st;
    double c = rs_train_now();
    float lr = rs_sched_lr(&cfg->sched, s->step);
    bool apply;
    st = train_update(s, lr, c, &d, &apply, err);
    if (st) return st;
    double now = rs_train_now();
    phase(s->h, s->step, RS_PHASE_OPTIM, d, now);
    rs_thread_tuner_step(&s->tune, now - a, now);
    e->td += (c - a) - sum.t_fwd - sum.t_bwd;
    e->tf += sum.t_fwd;
    e->tb += sum.t_bwd + (d - c);
    e->to += now - d;
    s->step++;
    e->nb++;
    e->ns += sum.B;
    s->samples_run += sum.B;
    if (apply || isfinite(sum.loss)) e->lsum += (double)sum.loss * sum.B;
    else e->lost += sum.B; /* a skipped step's loss overflowed: left out of the epoch's mean */
    if (apply && !isfinite(sum.loss))
        return rs_err_set(err, RS_ERR_ARG,
                          "loss became %g at step %lld (epoch %d); lower the learning rate (lr=%g now)",
                          (double)sum.loss, (long long)s->step, e->epoch + 1, (double)lr);
    train_report(s, e, sum.loss, lr, now);
    st = train_eval_every(s, e, err);
    if (!st && cfg->ckpt_every && s->step % cfg->ckpt_every == 0) st = train_ckpt(s, e, err);
    if (st) return st;
    if (cfg->max_steps && s->step >= cfg->max_steps) {
        s->done = true;
        return RS_OK;
    }
    *more = true;
    return RS_OK;
}

/* After an epoch's last step: its EPOCH event and evaluation, its mean loss, and the last checkpoint
 * when the run ends here and ckpt_every did not just write one. */
static rs_status train_epoch_end(train_run *s, const train_epoch *e, rs_err *err)
{
    const rs_train_cfg *cfg = &s->cfg;
    rs_status st = RS_OK;
    s->r.t_data += e->td;
    s->r.t_fwd += e->tf;
    s->r.t_bwd += e->tb;
    s->r.t_opt += e->to;
    /* a run that steps= ends inside an epoch reports that epoch as far as it got, and is evaluated */
    bool partial = e->nb < s->batches && e->nb > e->nb_start && s->done && !s->r.stopped;
    if (e->nb == s->batches || partial) {
        if (!partial) s->r.epochs_done++;
        s->ev.kind = RS_TRAIN_EV_EPOCH;
        emit(s->h, &s->ev);
        bool eval = cfg->eval && !cfg->eval_every && has_test(s) && !s->r.stopped;
        if (eval && s->sg && s->sg->gather) st = s->sg->gather(s->sg->ud, err);
        if (!st && eval && s->report) st = train_evaluate(s, 0, err);
        if (st) return st;
    }
    int64_t ns = e->ns - e->ns_start;
    s->r.train_loss = ns > e->lost ? e->lsum / (double)(ns - e->lost) : 0;
    bool just_written = cfg->ckpt_every && s->step % cfg->ckpt_every == 0;
    if (cfg->ckpt_path && (s->done || e->epoch + 1 == cfg->epochs) && !just_written) st = train_ckpt(s, e, err);
    return st;
}

/* One epoch: its data order, the steps a resume already made skipped, then step after step. */
static rs_status train_epoch_run(train_run *s, int epoch, rs_err *err)
{
    rs_loader_set_epoch(s->loader, epoch);
    train_epoch e = {.epoch = epoch, .t0 = rs_train_now()};
    /* Resuming mid-epoch: the epoch's order is a function of (seed, epoch); skip what was done. */
    for (; s->skip > 0; s->skip--, e.nb++)
        for (int k = 0; k < s->accum; k++) { /* a step is accum micro-batches */
            int rows = rs_loader_next(s->loader, s->x, s->y);
            if (rows <= 0) break;
            e.ns += rows;
        }
    e.nb_start = e.nb;
    e.ns_start = e.ns;
    bool more = true;
    while (more) {
        rs_status st = train_step(s, &e, &more, err);
        if (st) return st;
    }
    return train_epoch_end(s, &e, err);
}

/* The BEGIN event, the epochs, the final gather and the END event. */
static rs_status train_epochs(train_run *s, rs_err *err)
{
    const rs_train_cfg *cfg = &s->cfg;
    rs_model_set_training(s->m, true);
    s->ev = (rs_train_event){.prec = cfg->precision, .loss_scale = s->scaler.scale, .epochs = cfg->epochs,
                             .batches = s->batches, .steps_total = s->steps_total,
                             .epoch_samples = rs_loader_samples(s->loader), .test_acc = -1, .test_loss = -1,
                             .train_eval_loss = -1};
    s->ev.kind = RS_TRAIN_EV_BEGIN;
    s->ev.step = s->step;
    s->ev.epoch = s->start_epoch;
    emit(s->h, &s->ev);
    s->t_run = rs_train_now();
    /* One process with N threads: never slower than one thread when another process takes a core
     * (tune.h). A strategy's ranks and dp's replicas keep their counts. */
    if (!s->sg && rs_model_kernels(s->m)->kind == RS_DEV_CPU) {
        rs_thread_tuner_init(&s->tune, s->kc, s->t_run);
        if (cfg->tune_flips) rs_thread_tuner_script(&s->tune, cfg->tune_flips);
    }
    s->done = cfg->max_steps && s->step >= cfg->max_steps;
    for (int epoch = s->start_epoch; epoch < cfg->epochs && !s->done; epoch++) {
        rs_status st = train_epoch_run(s, epoch, err);
        if (st) return st;
    }
    if (s->sg && s->sg->gather) {
        rs_status st = s->sg->gather(s->sg->ud, err);
        if (st) return st;
    }
    s->r.seconds = rs_train_now() - s->t_run;
    s->r.samples_per_s = s->samples_run / (s->r.seconds > 0 ? s->r.seconds : 1e-9);
    s->r.global_step = s->step;
    s->ev.kind = RS_TRAIN_EV_END;
    emit(s->h, &s->ev);
    return RS_OK;
}

static rs_status train_loop(rs_model *m, const rs_data_pair *data, const rs_train_cfg *cfg_in,
                            const rs_train_hooks *h, rs_train_result *res, rs_err *err)
{
    train_run s = {.m = m, .data = data, .h = h, .cfg = cfg_in ? *cfg_in : rs_train_defaults(),
                   .kc = rs_model_ctx(m), .r = {.test_acc = -1, .test_loss = -1, .train_eval_loss = -1}};
    rs_grad_scaler_init(&s.scaler, s.cfg.precision == RS_PREC_FP16, s.cfg.loss_scale, s.cfg.scale_window);
    s.prec_before = s.kc->prec;
    s.sg = s.cfg.strategy;
    s.world = s.sg ? s.sg->world : 1;
    s.accum = s.cfg.accum > 1 ? s.cfg.accum : 1;
    s.report = !s.sg || s.sg->report;
    s.R = rs_model_rows(m);
    s.C = rs_model_classes(m);
    rs_status st = train_check(&s, err);
    if (!st) st = train_open(&s, err);
    if (st) return st;
    st = train_alloc(&s, err);
    if (!st && s.cfg.resume) st = train_resume(&s, err);
    if (!st) st = train_epochs(&s, err);
    rs_thread_tuner_end(&s.tune);
    s.kc->prec = s.prec_before;
    if (res) {
        s.r.global_step = s.step;
        s.r.steps = s.step - s.start_step;
        s.r.skipped = s.scaler.skipped;
        s.r.loss_scale = s.scaler.scale;
        *res = s.r;
    }
    rs_optim_free(s.opt);
    rs_loader_free(s.loader);
    free(s.x);
    free(s.y);
    return st;
}

/* The strategy's teardown runs exactly once, whichever way the loop ended. */
rs_status rs_train(rs_model *m, const rs_data_pair *data, const rs_train_cfg *cfg, const rs_train_hooks *h,
                   rs_train_result *res, rs_err *err)
{
    rs_status st = train_loop(m, data, cfg, h, res, err);
    if (cfg && cfg->strategy && cfg->strategy->teardown) cfg->strategy->teardown(cfg->strategy->ud);
    return st;
}
