/* What the training loop (train_loop.c) stands on: its defaults, the check that a data set fits a
 * model, and evaluation on a test split (see train.h). */
#include "train.h"
#include "engine/core/kernels.h"
#include "tune.h"
#include "train_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double rs_train_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

const char *rs_phase_name(rs_phase p)
{
    static const char *const n[RS_PHASE_COUNT] = {"data", "forward", "backward", "comm", "optimizer", "idle"};
    return (unsigned)p < RS_PHASE_COUNT ? n[p] : "?";
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

rs_status rs_evaluate(rs_model *m, const rs_dataset *d, int batch, double *acc, double *loss, rs_err *err)
{
    return rs_evaluate_n(m, d, batch, 0, acc, loss, err);
}

/* Between batches: progress after `done` of n samples, and whether to stop (err says so then). */
static bool eval_stop(const rs_eval_hooks *h, uint32_t done, uint32_t n, double t0, rs_err *err)
{
    if (!h) return false;
    if (h->progress && done) h->progress(h->ud, done, n, rs_train_now() - t0);
    if (h->should_stop && h->should_stop(h->ud)) {
        rs_err_set(err, RS_ERR_CANCELLED, "stopped after %u of %u samples", done, n);
        return true;
    }
    return false;
}

/* rs_evaluate_n for a model that takes k data samples at a time (rs_model_fixed_batch): groups of k
 * samples are one model sample, batch / k groups a pass; the last group is padded with copies of its
 * last sample, and the padded rows are left out of accuracy and loss. The loss is the device's softmax
 * cross-entropy entry (what rs_model_loss runs) over the real rows only. */
static rs_status evaluate_groups(rs_model *m, const rs_dataset *d, int batch, uint32_t n, uint32_t stride, int k,
                                 const rs_eval_hooks *h, double *acc, double *loss, rs_err *err)
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
    double t0 = rs_train_now();
    for (uint32_t i = 0; i < n && !st; i += (uint32_t)cap) {
        if (eval_stop(h, i, n, t0, err)) {
            st = RS_ERR_CANCELLED;
            break;
        }
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
            correct += rs_train_argmax(logits + r * (size_t)C, C) == y[r];
        }
    }
    rs_model_set_training(m, was_training);
    free(x), free(y), free(probs), free(rl);
    if (!st && h && h->progress) h->progress(h->ud, n, n, rs_train_now() - t0);
    if (st) return st;
    if (acc) *acc = correct / ((double)n * (double)ny);
    if (loss) *loss = lsum / n;
    return RS_OK;
}

rs_status rs_evaluate_n(rs_model *m, const rs_dataset *d, int batch, uint32_t max_samples, double *acc, double *loss,
                        rs_err *err)
{
    return rs_evaluate_hooked(m, d, batch, max_samples, NULL, acc, loss, err);
}

rs_status rs_evaluate_hooked(rs_model *m, const rs_dataset *d, int batch, uint32_t max_samples, const rs_eval_hooks *h,
                             double *acc, double *loss, rs_err *err)
{
    rs_status st = rs_train_check_data(m, d, err);
    if (st) return st;
    if (batch < 1) batch = 256;
    if (d->n == 0) return rs_err_set(err, RS_ERR_ARG, "data set %s is empty", d->name);
    /* A subset is spread evenly over the set (the same samples every time, so figures compare). */
    uint32_t n = max_samples && max_samples < d->n ? max_samples : d->n;
    uint32_t stride = d->n / n;
    int k = rs_model_fixed_batch(m);
    if (k > 1) return evaluate_groups(m, d, batch, n, stride, k, h, acc, loss, err);
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
    double t0 = rs_train_now();
    for (uint32_t i = 0; i < n; i += (uint32_t)batch) {
        if (eval_stop(h, i, n, t0, err)) {
            st = RS_ERR_CANCELLED;
            break;
        }
        int B = (int)((n - i) < (uint32_t)batch ? n - i : (uint32_t)batch);
        for (int b = 0; b < B; b++)
            rs_dataset_get(d, (i + (uint32_t)b) * stride, x + (size_t)b * per, y + (size_t)b * ny);
        const float *logits;
        float l;
        st = rs_model_forward(m, x, B, &logits, err);
        if (!st) st = rs_model_loss(m, y, B, &l, err); /* the mean over B * y_len labels */
        if (st) break;
        lsum += (double)l * B;
        for (size_t r = 0; r < (size_t)B * ny; r++) correct += rs_train_argmax(logits + r * (size_t)C, C) == y[r];
    }
    rs_model_set_training(m, was_training);
    free(x);
    free(y);
    if (!st && h && h->progress) h->progress(h->ud, n, n, rs_train_now() - t0);
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
