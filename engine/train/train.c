/* The training loop (see train.h). All buffers are allocated before the first step; a step itself
 * allocates nothing. */
#include "train.h"
#include "engine/core/kernels.h"
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/ckpt/checkpoint.h"
#include "engine/data/loader.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double rs_train_now(void) { return now_s(); }

const char *rs_phase_name(rs_phase p)
{
    static const char *const n[RS_PHASE_COUNT] = {"data", "forward", "backward", "comm", "optimizer", "idle"};
    return (unsigned)p < RS_PHASE_COUNT ? n[p] : "?";
}

static void phase(const rs_train_hooks *h, int64_t step, rs_phase p, double t0, double t1)
{
    if (h && h->on_phase) h->on_phase(h->ud, step, p, t0, t1);
}

rs_train_cfg rs_train_defaults(void)
{
    rs_train_cfg c = {0};
    c.epochs = 1;
    c.batch = 64;
    c.opt = rs_opt_defaults(RS_OPT_ADAM);
    c.sched = (rs_sched){.kind = RS_SCHED_CONSTANT, .gamma = 0.1f, .step_size = 1000};
    c.seed = 0;
    c.eval = true;
    return c;
}

rs_status rs_train_check_data(const rs_model *m, const rs_dataset *d, rs_err *err)
{
    char ms[64], ds[64];
    const rs_shape *in = rs_model_input_shape(m);
    rs_shape dshape = {3, {d->c, d->h, d->w}};
    bool tok = rs_model_tokens(m);
    if (d->tokens != tok)
        return d->tokens
                   ? rs_err_set(err, RS_ERR_SHAPE,
                                "data set %s holds token ids (text windows of %zu characters, %d in its vocabulary) "
                                "but model %s takes floats; a text model starts with an embedding of %d tokens "
                                "and its context must be %zu",
                                d->name, rs_dataset_sample_numel(d), d->n_classes, rs_model_name(m), d->n_classes,
                                rs_dataset_sample_numel(d))
                   : rs_err_set(err, RS_ERR_SHAPE,
                                "model %s takes token ids (its first layer is an embedding) but data set %s holds "
                                "floats; train it on text (e.g. data t = text)",
                                rs_model_name(m), d->name);
    if (d->tokens) {
        /* a window of T ids in, T rows of next-token scores out, one per vocabulary entry */
        if (rs_shape_numel(in) != (int64_t)rs_dataset_sample_numel(d))
            return rs_err_set(err, RS_ERR_SHAPE,
                              "model %s has a context of %lld tokens but data set %s has windows of %zu; build the "
                              "model with a context of %zu or open the data with ctx=%lld",
                              rs_model_name(m), (long long)rs_shape_numel(in), d->name, rs_dataset_sample_numel(d),
                              rs_dataset_sample_numel(d), (long long)rs_shape_numel(in));
        if (rs_model_classes(m) != d->n_classes)
            return rs_err_set(err, RS_ERR_SHAPE,
                              "data set %s has a vocabulary of %d characters but model %s gives %d scores per token; "
                              "its vocabulary size must be %d",
                              d->name, d->n_classes, rs_model_name(m), rs_model_classes(m), d->n_classes);
        return RS_OK;
    }
    int k = rs_model_fixed_batch(m);
    if (k > 1 && (rs_shape_numel(in) != k * (int64_t)rs_dataset_sample_numel(d) || rs_model_rows(m) != k * d->y_len))
        return rs_err_set(err, RS_ERR_SHAPE,
                          "model %s takes %d samples at a time (its file fixed the batch at %d): inputs of shape %s "
                          "(%lld values each), %d row%s of scores each; data set %s has samples of shape %s (%zu "
                          "values), %d label%s each",
                          rs_model_name(m), k, k, rs_shape_str(in, ms, sizeof ms), (long long)(rs_shape_numel(in) / k),
                          rs_model_rows(m) / k, rs_model_rows(m) / k == 1 ? "" : "s", d->name,
                          rs_shape_str(&dshape, ds, sizeof ds), rs_dataset_sample_numel(d), d->y_len,
                          d->y_len == 1 ? "" : "s");
    if (k == 1 && rs_shape_numel(in) != (int64_t)rs_dataset_sample_numel(d))
        return rs_err_set(err, RS_ERR_SHAPE,
                          "model %s takes inputs of shape %s (%lld values) but data set %s has samples of "
                          "shape %s (%zu values); build the model for this data (e.g. mlp %zu-256-%d or "
                          "seq in=%dx%dx%d ...)",
                          rs_model_name(m), rs_shape_str(in, ms, sizeof ms), (long long)rs_shape_numel(in),
                          d->name, rs_shape_str(&dshape, ds, sizeof ds), rs_dataset_sample_numel(d),
                          rs_dataset_sample_numel(d), d->n_classes, d->c, d->h, d->w);
    if (d->n_classes > rs_model_classes(m))
        return rs_err_set(err, RS_ERR_SHAPE,
                          "data set %s has %d classes but model %s gives %d scores; its last layer needs %d "
                          "outputs",
                          d->name, d->n_classes, rs_model_name(m), rs_model_classes(m), d->n_classes);
    return RS_OK;
}

static int argmax(const float *z, int C)
{
    int best = 0;
    for (int j = 1; j < C; j++)
        if (z[j] > z[best]) best = j;
    return best;
}

rs_status rs_evaluate(rs_model *m, const rs_dataset *d, int batch, double *acc, double *loss, rs_err *err)
{
    return rs_evaluate_n(m, d, batch, 0, acc, loss, err);
}

/* rs_evaluate_n for a model that takes k data samples at a time (rs_model_fixed_batch): groups of k
 * samples are one model sample, batch / k groups a pass; the last group is padded with copies of its
 * last sample, and the padded rows are left out of accuracy and loss. The loss is the device's softmax
 * cross-entropy entry (what rs_model_loss runs) over the real rows only. */
static rs_status evaluate_groups(rs_model *m, const rs_dataset *d, int batch, uint32_t n, uint32_t stride, int k,
                                 double *acc, double *loss, rs_err *err)
{
    int G = batch / k > 0 ? batch / k : 1;
    size_t per = rs_dataset_sample_numel(d), ny = (size_t)d->y_len, cap = (size_t)G * (size_t)k;
    int C = rs_model_classes(m);
    /* owned here: inputs (4-byte elements), labels, and the loss entry's probabilities and row losses */
    float *x = malloc(cap * per * sizeof *x), *probs = malloc(cap * ny * (size_t)C * sizeof *probs);
    float *rl = malloc(cap * ny * sizeof *rl);
    int32_t *y = malloc(cap * ny * sizeof *y);
    rs_status st = RS_OK;
    if (!x || !y || !probs || !rl) st = rs_err_set(err, RS_ERR_NOMEM, "out of memory for an evaluation batch of %zu", cap);
    const rs_kernels *kern = rs_model_kernels(m);
    rs_kctx *ctx = rs_model_ctx(m);
    bool was_training = rs_model_training(m);
    rs_model_set_training(m, false);
    double correct = 0, lsum = 0;
    for (uint32_t i = 0; i < n && !st; i += (uint32_t)cap) {
        size_t take = n - i < cap ? n - i : cap, groups = (take + (size_t)k - 1) / (size_t)k;
        for (size_t b = 0; b < take; b++)
            rs_dataset_get(d, (i + (uint32_t)b) * stride, x + b * per, y + b * ny);
        for (size_t b = take; b < groups * (size_t)k; b++) { /* padding: the last real sample again */
            memcpy(x + b * per, x + (take - 1) * per, per * sizeof *x);
            memcpy(y + b * ny, y + (take - 1) * ny, ny * sizeof *y);
        }
        const float *logits;
        st = rs_model_forward(m, x, (int)groups, &logits, err);
        if (st) break;
        size_t R = take * ny;
        if (kern->softmax_xent_fwd(ctx, logits, y, probs, rl, (int)R, C)) {
            st = rs_kctx_check(ctx, err);
            break;
        }
        for (size_t r = 0; r < R; r++) {
            lsum += (double)rl[r] / (double)ny;
            correct += argmax(logits + r * (size_t)C, C) == y[r];
        }
    }
    rs_model_set_training(m, was_training);
    free(x), free(y), free(probs), free(rl);
    if (st) return st;
    if (acc) *acc = correct / ((double)n * (double)ny);
    if (loss) *loss = lsum / n;
    return RS_OK;
}

rs_status rs_evaluate_n(rs_model *m, const rs_dataset *d, int batch, uint32_t max_samples, double *acc, double *loss,
                        rs_err *err)
{
    rs_status st = rs_train_check_data(m, d, err);
    if (st) return st;
    if (batch < 1) batch = 256;
    if (d->n == 0) return rs_err_set(err, RS_ERR_ARG, "data set %s is empty", d->name);
    /* A subset is spread evenly over the set (the same samples every time, so figures compare). */
    uint32_t n = max_samples && max_samples < d->n ? max_samples : d->n;
    uint32_t stride = d->n / n;
    int k = rs_model_fixed_batch(m);
    if (k > 1) return evaluate_groups(m, d, batch, n, stride, k, acc, loss, err);
    if ((uint32_t)batch > n) batch = (int)n;
    /* Samples are copied out batch by batch (a text set makes its windows on demand). A sample has
     * y_len labels and the model gives y_len rows of scores for it: one per token of a window. */
    size_t per = rs_dataset_sample_numel(d), ny = (size_t)d->y_len;
    float *x = malloc((size_t)batch * per * sizeof *x); /* owned here: 4-byte elements, floats or ids */
    int32_t *y = malloc((size_t)batch * ny * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory for an evaluation batch of %d", batch);
    }
    int C = rs_model_classes(m);
    bool was_training = rs_model_training(m);
    rs_model_set_training(m, false);
    double correct = 0, lsum = 0;
    for (uint32_t i = 0; i < n; i += (uint32_t)batch) {
        int B = (int)((n - i) < (uint32_t)batch ? n - i : (uint32_t)batch);
        for (int b = 0; b < B; b++)
            rs_dataset_get(d, (i + (uint32_t)b) * stride, x + (size_t)b * per, y + (size_t)b * ny);
        const float *logits;
        float l;
        st = rs_model_forward(m, x, B, &logits, err);
        if (!st) st = rs_model_loss(m, y, B, &l, err); /* the mean over B * y_len labels */
        if (st) break;
        lsum += (double)l * B;
        for (size_t r = 0; r < (size_t)B * ny; r++) correct += argmax(logits + r * (size_t)C, C) == y[r];
    }
    rs_model_set_training(m, was_training);
    free(x);
    free(y);
    if (st) return st;
    if (acc) *acc = correct / ((double)n * (double)ny); /* per label: per token for text */
    if (loss) *loss = lsum / n;
    return RS_OK;
}

rs_status rs_train_apply_groups(rs_optim *o, const rs_model *m, size_t base, rs_err *err)
{
    if (!o || !rs_optim_cfg(o)->groups) return RS_OK;
    int n = rs_model_decay_ranges(m, NULL, 0);
    size_t (*r)[2] = calloc((size_t)(n ? n : 1), sizeof *r); /* freed here */
    if (!r) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    rs_model_decay_ranges(m, r, n);
    rs_status st = rs_optim_set_decay_ranges(o, base, (const size_t (*)[2])r, n, err);
    free(r);
    return st;
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

static rs_status train_loop(rs_model *m, const rs_data_pair *data, const rs_train_cfg *cfg_in,
                            const rs_train_hooks *h, rs_train_result *res, rs_err *err)
{
    rs_train_cfg cfg = cfg_in ? *cfg_in : rs_train_defaults();
    rs_train_result r = {.test_acc = -1, .test_loss = -1};
    int64_t step = 0, start_step = 0; /* read at `out:`, so set before any jump there */
    rs_thread_tuner tune = {0};       /* likewise (off until set up) */
    rs_grad_scaler scaler;
    rs_grad_scaler_init(&scaler, cfg_in && cfg_in->precision == RS_PREC_FP16, cfg_in ? cfg_in->loss_scale : 0,
                        cfg_in ? cfg_in->scale_window : 0);
    rs_kctx *kc = rs_model_ctx(m);
    rs_prec prec_before = kc->prec; /* the run's precision is the run's: put back at `out:` */
    if (!data || !data->train) return rs_err_set(err, RS_ERR_ARG, "no training data");
    const rs_dataset *train = data->train;
    if (cfg.epochs < 1) return rs_err_set(err, RS_ERR_ARG, "epochs must be >= 1, got %d", cfg.epochs);
    if (cfg.batch < 1 || cfg.batch > (1 << 20))
        return rs_err_set(err, RS_ERR_ARG, "batch must be in 1..1048576, got %d", cfg.batch);
    if (cfg.max_steps < 0) return rs_err_set(err, RS_ERR_ARG, "max steps must be >= 0");
    if (cfg.ckpt_every < 0) return rs_err_set(err, RS_ERR_ARG, "ckpt_every must be >= 0");
    if (cfg.ckpt_every > 0 && !cfg.ckpt_path)
        return rs_err_set(err, RS_ERR_ARG, "ckpt_every needs a checkpoint path (ckpt=FILE.safetensors)");
    const rs_train_strategy *sg = cfg.strategy;
    int world = sg ? sg->world : 1, accum = cfg.accum > 1 ? cfg.accum : 1;
    if (accum > 4096) return rs_err_set(err, RS_ERR_ARG, "accum must be 1..4096, got %d", cfg.accum);
    if ((unsigned)cfg.precision >= RS_PREC_COUNT)
        return rs_err_set(err, RS_ERR_ARG, "precision %d is not one of fp32, bf16, fp16", (int)cfg.precision);
    if (cfg.precision != RS_PREC_FP16 && (cfg.inject_inf || cfg.loss_scale > 0))
        return rs_err_set(err, RS_ERR_ARG, "%s is for precision=fp16 (the loss scaler), this run is %s",
                          cfg.inject_inf ? "inject_inf" : "loss_scale", rs_prec_name(cfg.precision));
    if (!(cfg.loss_scale >= 0) || !isfinite(cfg.loss_scale) || cfg.inject_inf < 0 || cfg.scale_window < 0)
        return rs_err_set(err, RS_ERR_ARG, "loss_scale must be a finite scale > 0 (0: 65536), inject_inf a step >= 1, "
                          "scale_window >= 1");
    if (sg && (world < 1 || sg->rank < 0 || sg->rank >= world || !sg->step))
        return rs_err_set(err, RS_ERR_ARG, "training strategy %s: rank %d of world %d", sg->name, sg->rank, world);
    if (cfg.batch % world)
        return rs_err_set(err, RS_ERR_ARG,
                          "batch=%d does not split over %d ranks; the global batch must be a multiple of the ranks "
                          "(try batch=%d)",
                          cfg.batch, world, (cfg.batch / world + 1) * world);
    bool report = !sg || sg->report;
    rs_status st = rs_opt_cfg_check(&cfg.opt, err);
    if (!st) st = rs_model_check_trainable(m, err);
    if (st) return st;
    st = rs_train_check_data(m, train, err);
    if (st) return st;
    if (train->n == 0) return rs_err_set(err, RS_ERR_ARG, "data set %s is empty", train->name);
    /* The threads are the model's: its context runs forward, backward, the update and the tuner. So is
     * the precision: activation sets and replicas made from here on copy it. */
    if (cfg.threads > 0) rs_kctx_set_threads(kc, cfg.threads);
    kc->prec = cfg.precision;

    rs_sampler_cfg sc = rs_sampler_cfg_default();
    sc.seed = cfg.seed;
    sc.rank = sg ? sg->rank : 0;
    sc.world = world;
    int local = cfg.batch / world; /* this rank's part of every (micro-)batch */
    rs_loader *loader = rs_loader_new(train, local, &sc, err);
    if (!loader) return err ? err->code : RS_ERR_NOMEM;
    /* Optimizer steps per epoch: micro-batches in groups of accum (a last incomplete group is dropped,
     * as a batch of accum*batch with drop_last would be). */
    int64_t micro = rs_loader_batches(loader), batches = micro / accum;
    if (batches == 0) {
        rs_loader_free(loader);
        return rs_err_set(err, RS_ERR_ARG, "an epoch of %u samples per rank has no full step of %d x %d", 
                          rs_loader_samples(loader), accum, local);
    }
    int64_t steps_total = batches * cfg.epochs;
    if (cfg.max_steps && cfg.max_steps < steps_total) steps_total = cfg.max_steps;
    cfg.sched.base_lr = cfg.opt.lr;
    if (cfg.sched.kind == RS_SCHED_COSINE && cfg.sched.total == 0) cfg.sched.total = steps_total;
    st = rs_sched_check(&cfg.sched, err);
    if (st) {
        rs_loader_free(loader);
        return st;
    }

    size_t per = rs_dataset_sample_numel(train);
    int R = rs_model_rows(m); /* labels per sample: one per position for a token model */
    float *x = malloc((size_t)local * per * sizeof *x); /* owned here, freed at the end */
    int32_t *y = malloc((size_t)local * (size_t)R * sizeof *y);
    /* One process keeps the whole optimizer; a strategy keeps its own (whole or a shard). */
    rs_optim *opt = sg ? NULL : rs_optim_new(&cfg.opt, rs_model_device(m), rs_model_numel(m), rs_model_mem(m), err);
    if (!sg && opt) {
        rs_optim_set_ctx(opt, kc);
        st = rs_train_apply_groups(opt, m, 0, err);
        if (st) goto out;
    }
    if (!x || !y || (!sg && !opt)) {
        if (!sg && !opt) st = err ? err->code : RS_ERR_NOMEM;
        else st = rs_err_set(err, RS_ERR_NOMEM, "out of memory for a batch of %d", local);
        goto out;
    }
    if (!sg || !sg->own_acts) st = rs_model_reserve(m, local, err);
    if (st) goto out;
    if (sg && sg->setup) {
        st = sg->setup(sg->ud, m, &cfg.opt, err);
        if (st) goto out;
    }
    /* The whole optimizer for checkpoints; a sharding strategy makes one only when a run checkpoints or
     * resumes (it costs a full copy of the state). */
    bool ckpts = cfg.ckpt_path || cfg.resume;
    rs_optim *ckpt_opt = sg ? (sg->optimizer && ckpts ? sg->optimizer(sg->ud) : NULL) : opt;

    int start_epoch = 0;
    int64_t skip = 0;
    if (cfg.resume) {
        /* Check that the resume makes sense before anything of the model is overwritten. */
        rs_ckpt_pos pos;
        st = rs_ckpt_read_pos(cfg.resume, &pos, err);
        if (st) goto out;
        if (pos.data_seed != cfg.seed) {
            st = rs_err_set(err, RS_ERR_ARG,
                            "checkpoint %s was written by a run with seed=%llu, this one has seed=%llu; resume "
                            "with seed=%llu to see the same data order",
                            cfg.resume, (unsigned long long)pos.data_seed, (unsigned long long)cfg.seed,
                            (unsigned long long)pos.data_seed);
            goto out;
        }
        if (pos.batch != cfg.batch) {
            st = rs_err_set(err, RS_ERR_ARG,
                            "checkpoint %s was written with batch=%lld, this run has batch=%d; resume with "
                            "batch=%lld (the position in the epoch is counted in batches)",
                            cfg.resume, (long long)pos.batch, cfg.batch, (long long)pos.batch);
            goto out;
        }
        st = rs_ckpt_load_train(cfg.resume, m, ckpt_opt, &pos, err);
        if (!st && sg && sg->sync_optimizer) st = sg->sync_optimizer(sg->ud, false, err);
        if (st) goto out;
        start_epoch = pos.epoch;
        skip = pos.batch_in_epoch;
        step = pos.step;
        start_step = step;
    }

    int C = rs_model_classes(m);
    rs_model_set_training(m, true);
    rs_train_event ev = {.prec = cfg.precision, .loss_scale = scaler.scale, .epochs = cfg.epochs, .batches = batches, .steps_total = steps_total,
                         .epoch_samples = rs_loader_samples(loader), .test_acc = -1, .test_loss = -1};
    ev.kind = RS_TRAIN_EV_BEGIN;
    ev.step = step;
    ev.epoch = start_epoch;
    emit(h, &ev);
    double t_run = now_s();
    int64_t samples_run = 0;
    /* One process with N threads: never slower than one thread when another process takes a core
     * (tune.h). A strategy's ranks and dp's replicas keep their counts. */
    if (!sg && rs_model_kernels(m)->kind == RS_DEV_CPU) rs_thread_tuner_init(&tune, kc, t_run);
    bool done = cfg.max_steps && step >= cfg.max_steps;
    for (int epoch = start_epoch; epoch < cfg.epochs && !done; epoch++) {
        rs_loader_set_epoch(loader, epoch);
        double t0 = now_s(), lsum = 0, correct = 0;
        int64_t nb = 0, ns = 0;
        double td = 0, tf = 0, tb = 0, to = 0;
        /* Resuming mid-epoch: the epoch's order is a function of (seed, epoch); skip what was done. */
        for (; skip > 0; skip--, nb++)
            for (int k = 0; k < accum; k++) { /* a step is accum micro-batches */
                int rows = rs_loader_next(loader, x, y);
                if (rows <= 0) break;
                ns += rows;
            }
        int64_t nb_start = nb, ns_start = ns, lost = 0;
        for (;;) {
            if (h && h->should_stop && h->should_stop(h->ud)) {
                r.stopped = true;
                done = true;
                break;
            }
            /* One optimizer step: accum micro-batches, their gradients summed (each loss scaled by
             * 1/accum), then combined across ranks or replicas by the strategy and applied. */
            double a = now_s(), c, d;
            const float *logits = NULL;
            float loss = 0;
            int B = 0;
            double t_fwd = 0, t_bwd = 0;
            /* GradScaler: the loss gradient carries the scale (infinite on the injected step) */
            float ls = scaler.scale;
            if (cfg.inject_inf && step + 1 == cfg.inject_inf) ls = INFINITY;
            for (int k = 0; k < accum; k++) {
                double a1 = now_s();
                int rows = rs_loader_next(loader, x, y);
                if (rows <= 0) break;
                double b1 = now_s();
                phase(h, step, RS_PHASE_DATA, a1, b1);
                float l = 0;
                if (k == 0) rs_model_zero_grad(m);
                double c1, d1;
                if (sg && sg->forward_backward) {
                    st = sg->forward_backward(sg->ud, x, y, rows, ls / (float)accum, &l, &logits, err);
                    c1 = d1 = now_s();
                    if (!st && !sg->own_phases) phase(h, step, RS_PHASE_BACKWARD, b1, d1);
                } else {
                    st = rs_model_forward(m, x, rows, &logits, err);
                    if (!st) st = rs_model_loss(m, y, rows, &l, err);
                    c1 = now_s();
                    if (!st) phase(h, step, RS_PHASE_FORWARD, b1, c1);
                    if (!st && sg && sg->before_backward) st = sg->before_backward(sg->ud, k == accum - 1, err);
                    if (!st) rs_model_backward(m, x, y, rows, ls / (float)accum);
                    if (!st) st = rs_kctx_check(kc, err); /* backward returns nothing: its kernels' failure */
                    d1 = now_s();
                    if (!st) phase(h, step, RS_PHASE_BACKWARD, c1, d1);
                }
                if (st) goto out;
                t_fwd += c1 - b1;
                t_bwd += d1 - c1;
                loss += l / (float)accum;
                B += rows;
                for (int i = 0; i < rows * R; i++) correct += argmax(logits + (size_t)i * C, C) == y[i];
            }
            if (B <= 0) break;
            c = d = now_s();
            float lr = rs_sched_lr(&cfg.sched, step);
            bool apply = true;
            if (sg) {
                /* combining gradients counts as backward time here; the strategy reports its own
                 * communication spans through on_phase */
                if (sg->after_backward) st = sg->after_backward(sg->ud, err);
                d = now_s();
                /* the compute thread waits here for communication still in flight (ddp's buckets) or
                 * runs the strategy's blocking collectives: idle, as far as computing goes */
                if (!st && d > c) phase(h, step, RS_PHASE_IDLE, c, d);
            }
            if (!st && scaler.enabled) {
                /* GradScaler.step: check, skip or unscale, and only then clip (a norm of scaled gradients
                 * would clip at the wrong size) */
                bool finite = false;
                float s = scaler.scale;
                st = grads_finite(m, sg, &finite, err);
                if (!st) apply = rs_grad_scaler_update(&scaler, finite);
                if (!st && apply) st = grads_scale(m, sg, 1.0f / s, err);
            }
            if (!st && apply && cfg.clip > 0) st = clip_grads(m, sg, cfg.clip, &ev.grad_norm, err);
            if (!st && apply) st = sg ? sg->step(sg->ud, lr, err) : optim_step(opt, m, lr, err);
            if (st) goto out;
            double e = now_s();
            phase(h, step, RS_PHASE_OPTIM, d, e);
            rs_thread_tuner_step(&tune, e - a, e);
            td += (c - a) - t_fwd - t_bwd;
            tf += t_fwd;
            tb += t_bwd + (d - c);
            to += e - d;
            step++;
            nb++;
            ns += B;
            samples_run += B;
            if (apply || isfinite(loss)) lsum += (double)loss * B;
            else lost += B; /* a skipped step's loss overflowed: left out of the epoch's mean */
            if (apply && !isfinite(loss)) {
                st = rs_err_set(err, RS_ERR_ARG,
                                "loss became %g at step %lld (epoch %d); lower the learning rate (lr=%g now)",
                                (double)loss, (long long)step, epoch + 1, (double)lr);
                goto out;
            }
            double el = e - t0;
            ev.kind = RS_TRAIN_EV_STEP;
            ev.epoch = epoch;
            ev.step = step;
            ev.batch = nb;
            ev.samples = ns;
            ev.loss = loss;
            ev.lr = lr;
            ev.epoch_loss = ns - ns_start > lost ? lsum / (double)(ns - ns_start - lost) : 0;
            ev.epoch_acc = correct / ((double)(ns - ns_start) * R);
            ev.elapsed_s = el;
            ev.samples_per_s = (double)(ns - ns_start) / (el > 0 ? el : 1e-9);
            ev.eta_s = (nb > nb_start) ? el / (double)(nb - nb_start) * (double)(batches - nb) : 0;
            ev.t_data = td;
            ev.t_fwd = tf;
            ev.t_bwd = tb;
            ev.t_opt = to;
            ev.rows = R;
            ev.skipped = scaler.skipped;
            ev.loss_scale = scaler.scale;
            emit(h, &ev);
            bool last = (cfg.max_steps && step >= cfg.max_steps) || (epoch + 1 == cfg.epochs && nb == batches);
            if (cfg.eval_every && (step % cfg.eval_every == 0 || last) && data->test && data->test->n) {
                /* A language model's epoch is long: its validation loss comes every eval_every steps,
                 * on eval_samples windows (nanoGPT's estimate_loss). */
                if (sg && sg->gather) st = sg->gather(sg->ud, err);
                if (!st && report)
                    st = rs_evaluate_n(m, data->test, cfg.eval_batch ? cfg.eval_batch : cfg.batch,
                                       (uint32_t)cfg.eval_samples, &r.test_acc, &r.test_loss, err);
                rs_model_set_training(m, true);
                if (st) goto out;
                if (report) {
                    ev.kind = RS_TRAIN_EV_EVAL;
                    ev.test_acc = r.test_acc;
                    ev.test_loss = r.test_loss;
                    emit(h, &ev);
                }
            }
            if (cfg.ckpt_every && step % cfg.ckpt_every == 0) {
                if (sg && sg->gather) st = sg->gather(sg->ud, err);
                if (!st && sg && sg->sync_optimizer) st = sg->sync_optimizer(sg->ud, true, err);
                if (!st && report)
                    st = checkpoint(&cfg, m, ckpt_opt, nb == batches ? epoch + 1 : epoch, nb == batches ? 0 : nb, step, h,
                                &ev, err);
                if (st) goto out;
            }
            if (cfg.max_steps && step >= cfg.max_steps) {
                done = true;
                break;
            }
        }
        r.t_data += td;
        r.t_fwd += tf;
        r.t_bwd += tb;
        r.t_opt += to;
        if (nb == batches) {
            r.epochs_done++;
            ev.kind = RS_TRAIN_EV_EPOCH;
            emit(h, &ev);
            if (cfg.eval && !cfg.eval_every && data->test && data->test->n && !r.stopped && sg && sg->gather) {
                st = sg->gather(sg->ud, err);
                if (st) goto out;
            }
            if (cfg.eval && !cfg.eval_every && report && data->test && data->test->n && !r.stopped) {
                st = rs_evaluate(m, data->test, cfg.eval_batch ? cfg.eval_batch : cfg.batch, &r.test_acc, &r.test_loss, err);
                rs_model_set_training(m, true);
                if (st) goto out;
                ev.kind = RS_TRAIN_EV_EVAL;
                ev.test_acc = r.test_acc;
                ev.test_loss = r.test_loss;
                emit(h, &ev);
            }
        }
        r.train_loss = ns - ns_start > lost ? lsum / (double)(ns - ns_start - lost) : 0;
        if (cfg.ckpt_path && (done || epoch + 1 == cfg.epochs) && !(cfg.ckpt_every && step % cfg.ckpt_every == 0)) {
            if (sg && sg->gather) st = sg->gather(sg->ud, err);
            if (!st && sg && sg->sync_optimizer) st = sg->sync_optimizer(sg->ud, true, err);
            if (!st && report)
                st = checkpoint(&cfg, m, ckpt_opt, nb == batches ? epoch + 1 : epoch, nb == batches ? 0 : nb, step, h, &ev, err);
            if (st) goto out;
        }
    }
    if (sg && sg->gather) {
        st = sg->gather(sg->ud, err);
        if (st) goto out;
    }
    r.seconds = now_s() - t_run;
    r.samples_per_s = samples_run / (r.seconds > 0 ? r.seconds : 1e-9);
    r.global_step = step;
    ev.kind = RS_TRAIN_EV_END;
    emit(h, &ev);
out:
    rs_thread_tuner_end(&tune);
    kc->prec = prec_before;
    if (res) {
        r.global_step = step;
        r.steps = step - start_step;
        r.skipped = scaler.skipped;
        r.loss_scale = scaler.scale;
        *res = r;
    }
    rs_optim_free(opt);
    rs_loader_free(loader);
    free(x);
    free(y);
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
