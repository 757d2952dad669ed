/* The C half of the GPT reference test (gpt_ref.py drives it): builds the gpt preset, writes its
 * weights and the logits and loss it gives on fixed tokens, then trains it 20 steps by hand with the
 * engine's API (AdamW in nanoGPT's groups, gradients clipped to norm 1) and writes the losses, so
 * the script can recompute all of it in NumPy float64 and, when installed, in a PyTorch nanoGPT.
 *
 * Usage: test-gpt-ref DIR
 *   DIR/gpt.safetensors        the weights at initialisation (seed SEED), before any step
 *   DIR/gpt.final.safetensors  the weights after the 20 steps
 *   DIR/gpt.wide.safetensors   every parameter redrawn wide (N(0, 0.5); norms' gains 1 + N(0, 0.5)), so
 *                              attention is far from uniform and head layout, mask and scale all show
 *   DIR/gpt.grad.safetensors   the gradient of the first training step (before clipping), per tensor
 *   DIR/gpt.wide.grad.safetensors  the gradient of the eval batch's loss at the wide weights
 *   DIR/gpt.io.safetensors     "tokens", "targets" (B, T) I32; "logits" (B, T, V), "loss" (1) of the
 *                              initial weights in eval mode; "wide_logits", "wide_loss" likewise for
 *                              the wide weights; "train_tokens", "train_targets" (STEPS, TB, T) I32;
 *                              "train_losses", "train_grad_norms" (STEPS) F32 (the norm before clipping).
 *                              Metadata: model spec, seeds, the optimizer's settings and "decay", the
 *                              tensors rs_model_decay_ranges puts in the weight-decay group. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ckpt/checkpoint.h"
#include "engine/ckpt/safetensors.h"
#include "engine/core/rng.h"
#include "engine/nn/spec.h"
#include "engine/optim/optim.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

#define SPEC "gpt layers=2 heads=4 dim=32 ctx=16 vocab=23"
#define SEED 20240611u
#define DATA_SEED 77u
#define V 23
#define T 16
#define B 3       /* eval batch */
#define TB 4      /* training batch */
#define STEPS 20
#define LR 1e-3f
#define WD 0.1f
#define CLIP 1.0

/* A learnable rule, so the losses fall: the next token is 5 * token + 2 (mod V), except where the
 * draw makes it random (one in four), which keeps the task from being trivial. */
static void batch(rs_rng *r, int32_t *x, int32_t *y, int n)
{
    for (int i = 0; i < n * T; i++) {
        x[i] = (int32_t)rs_rng_below(r, V);
        y[i] = rs_rng_below(r, 4) ? (x[i] * 5 + 2) % V : (int32_t)rs_rng_below(r, V);
    }
}

/* One eval-mode forward and loss; logits copied to out (n * T * V). */
static float eval_forward(rs_model *m, const int32_t *x, const int32_t *y, int n, float *out)
{
    rs_err e = {0};
    const float *z = NULL;
    float loss = NAN;
    rs_model_set_training(m, false);
    RS_CHECK(rs_model_forward(m, x, n, &z, &e) == RS_OK, "forward: %s", e.msg);
    RS_CHECK(rs_model_loss(m, y, n, &loss, &e) == RS_OK, "loss: %s", e.msg);
    if (z) memcpy(out, z, (size_t)n * T * V * sizeof *out);
    return loss;
}

/* torch.nn.utils.clip_grad_norm_(params, max): the global L2 norm, grads *= max / (norm + 1e-6) when
 * that is below 1. Returns the norm before clipping. */
static double clip(rs_model *m, double max)
{
    float *g = rs_model_grads(m);
    size_t n = rs_model_numel(m);
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) sq += (double)g[i] * g[i];
    double norm = sqrt(sq), coef = max / (norm + 1e-6);
    if (coef < 1.0)
        for (size_t i = 0; i < n; i++) g[i] *= (float)coef;
    return norm;
}

/* The gradient buffer as one tensor per parameter, named as the weights ("1.1.weight"). */
static void save_grads(rs_model *m, const char *path)
{
    rs_err e = {0};
    int n = rs_model_tensor_count(m);
    rs_st_tensor *t = calloc((size_t)n, sizeof *t);
    RS_CHECK(t != NULL, "out of memory");
    if (!t) return;
    for (int i = 0; i < n; i++) {
        const rs_param_info *pi = rs_model_tensor(m, i);
        t[i] = (rs_st_tensor){.name = pi->name, .dtype = RS_F32, .shape = pi->shape,
                              .data = rs_model_grads(m) + pi->offset};
    }
    RS_CHECK(rs_st_write(path, t, n, NULL, 0, &e) == RS_OK, "%s: %s", path, e.msg);
    free(t);
}

/* Every parameter redrawn wide; the layer norms' gains around 1. */
static void widen(rs_model *m)
{
    rs_rng r;
    rs_rng_seed(&r, SEED + 1);
    float *p = rs_model_params(m);
    for (int t = 0; t < rs_model_tensor_count(m); t++) {
        const rs_param_info *pi = rs_model_tensor(m, t);
        bool gain = pi->shape.ndim == 1 && strstr(pi->name, ".weight");
        for (size_t i = 0; i < pi->numel; i++) p[pi->offset + i] = (gain ? 1.0f : 0.0f) + 0.5f * rs_rng_normal(&r);
    }
}

/* The tensors in the decay group, by name and comma-separated, so the script can check its groups are
 * the same. */
static void decay_names(rs_model *m, char *decay, size_t cap)
{
    decay[0] = 0;
    size_t (*rg)[2] = calloc(64, sizeof *rg);
    int nr = rg ? rs_model_decay_ranges(m, rg, 64) : 0;
    for (int t = 0; t < rs_model_tensor_count(m); t++) {
        const rs_param_info *pi = rs_model_tensor(m, t);
        for (int i = 0; i < nr && i < 64; i++)
            if (pi->offset >= rg[i][0] && pi->offset + pi->numel <= rg[i][1]) {
                size_t at = strlen(decay);
                snprintf(decay + at, cap - at, "%s%s", at ? "," : "", pi->name);
                break;
            }
    }
    free(rg);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (run by gpt_ref.py)\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    char path[512];
    rs_err e = {0};
    rs_model *m = NULL;
    size_t pos = 0;
    if (rs_model_parse(SPEC, "gpt", rs_device_cpu(), NULL, SEED, &m, &pos, &e) != RS_OK) {
        fprintf(stderr, "FAIL: %s: at %zu: %s\n", SPEC, pos, e.msg);
        return 1;
    }
    RS_CHECK(rs_model_vocab(m) == V && rs_model_rows(m) == T, "the preset's vocab %d and rows %d", rs_model_vocab(m),
             rs_model_rows(m));

    /* Fixed eval tokens with repeats: within a row (positions 0 and 1) and across rows. */
    static int32_t tok[B * T], tgt[B * T], ttok[STEPS * TB * T], ttgt[STEPS * TB * T];
    static float logits[B * T * V], wide_logits[B * T * V], losses[STEPS], norms[STEPS];
    rs_rng r;
    rs_rng_seed(&r, DATA_SEED);
    batch(&r, tok, tgt, B);
    tok[1] = tok[0];
    tok[T + 5] = tok[3];
    for (int s = 0; s < STEPS; s++) batch(&r, ttok + s * TB * T, ttgt + s * TB * T, TB);

    snprintf(path, sizeof path, "%s/gpt.safetensors", dir);
    RS_CHECK(rs_ckpt_save_model(path, m, &e) == RS_OK, "%s: %s", path, e.msg);
    float loss = eval_forward(m, tok, tgt, B, logits);

    /* 20 steps as nanoGPT's train.py takes them: zero_grad, forward, loss, backward, clip, AdamW. */
    rs_opt_cfg oc = rs_opt_defaults(RS_OPT_ADAMW);
    oc.lr = LR;
    oc.beta1 = 0.9f;
    oc.beta2 = 0.95f;
    oc.weight_decay = WD;
    oc.eps = 1e-8f;
    oc.groups = true;
    rs_optim *o = rs_optim_new(&oc, rs_device_cpu(), rs_model_numel(m), NULL, &e);
    RS_CHECK(o != NULL, "optimizer: %s", e.msg);
    RS_CHECK(o && rs_train_apply_groups(o, m, 0, &e) == RS_OK, "groups: %s", e.msg);
    rs_model_set_training(m, true);
    for (int s = 0; o && s < STEPS; s++) {
        const int32_t *x = ttok + s * TB * T, *y = ttgt + s * TB * T;
        rs_model_zero_grad(m);
        RS_CHECK(rs_model_forward(m, x, TB, NULL, &e) == RS_OK, "step %d: forward: %s", s, e.msg);
        RS_CHECK(rs_model_loss(m, y, TB, &losses[s], &e) == RS_OK, "step %d: loss: %s", s, e.msg);
        rs_model_backward(m, x, y, TB, 1.0f);
        if (s == 0) {
            snprintf(path, sizeof path, "%s/gpt.grad.safetensors", dir);
            save_grads(m, path);
        }
        norms[s] = (float)clip(m, CLIP);
        RS_CHECK(rs_optim_step(o, rs_model_params(m), rs_model_grads(m), LR) == RS_OK, "step %d", s);
    }
    rs_optim_free(o);
    printf("C: initial eval loss %.6f; training losses %.6f -> %.6f, grad norm %.4f -> %.4f\n", (double)loss,
           (double)losses[0], (double)losses[STEPS - 1], (double)norms[0], (double)norms[STEPS - 1]);
    snprintf(path, sizeof path, "%s/gpt.final.safetensors", dir);
    RS_CHECK(rs_ckpt_save_model(path, m, &e) == RS_OK, "%s: %s", path, e.msg);

    widen(m);
    float wide_loss = eval_forward(m, tok, tgt, B, wide_logits);
    printf("C: wide weights: eval loss %.6f\n", (double)wide_loss);
    /* The gradient at the wide weights, on the eval batch: attention far from uniform makes every
     * term of its backward count. */
    rs_model_set_training(m, true);
    rs_model_zero_grad(m);
    float wl = NAN;
    RS_CHECK(rs_model_forward(m, tok, B, NULL, &e) == RS_OK && rs_model_loss(m, tgt, B, &wl, &e) == RS_OK,
             "wide: %s", e.msg);
    RS_CHECK(wl == wide_loss, "wide: training-mode loss %.9g, eval %.9g (no dropout)", (double)wl, (double)wide_loss);
    rs_model_backward(m, tok, tgt, B, 1.0f);
    snprintf(path, sizeof path, "%s/gpt.wide.grad.safetensors", dir);
    save_grads(m, path);
    snprintf(path, sizeof path, "%s/gpt.wide.safetensors", dir);
    RS_CHECK(rs_ckpt_save_model(path, m, &e) == RS_OK, "%s: %s", path, e.msg);

    const rs_shape bt = {2, {B, T}}, btv = {3, {B, T, V}}, one = {1, {1}}, sbt = {3, {STEPS, TB, T}},
                   steps = {1, {STEPS}};
    rs_st_tensor io[] = {
        {.name = "logits", .dtype = RS_F32, .shape = btv, .data = logits},
        {.name = "wide_logits", .dtype = RS_F32, .shape = btv, .data = wide_logits},
        {.name = "loss", .dtype = RS_F32, .shape = one, .data = &loss},
        {.name = "wide_loss", .dtype = RS_F32, .shape = one, .data = &wide_loss},
        {.name = "train_losses", .dtype = RS_F32, .shape = steps, .data = losses},
        {.name = "train_grad_norms", .dtype = RS_F32, .shape = steps, .data = norms},
        {.name = "tokens", .dtype = RS_I32, .shape = bt, .data = tok},
        {.name = "targets", .dtype = RS_I32, .shape = bt, .data = tgt},
        {.name = "train_tokens", .dtype = RS_I32, .shape = sbt, .data = ttok},
        {.name = "train_targets", .dtype = RS_I32, .shape = sbt, .data = ttgt},
    };
    char decay[1024];
    decay_names(m, decay, sizeof decay);
    char seed[32], dseed[32], lr[32], wd[32];
    snprintf(seed, sizeof seed, "%u", SEED);
    snprintf(dseed, sizeof dseed, "%u", DATA_SEED);
    snprintf(lr, sizeof lr, "%g", (double)LR);
    snprintf(wd, sizeof wd, "%g", (double)WD);
    const char *meta[] = {"model", SPEC, "seed", seed, "data_seed", dseed, "optimizer", "adamw", "lr", lr,
                          "betas", "0.9,0.95", "eps", "1e-8", "weight_decay", wd, "clip", "1.0", "groups", "nanogpt", "decay", decay};
    snprintf(path, sizeof path, "%s/gpt.io.safetensors", dir);
    RS_CHECK(rs_st_write(path, io, (int)(sizeof io / sizeof io[0]), meta, (int)(sizeof meta / sizeof meta[0] / 2), &e) ==
                 RS_OK, "%s: %s", path, e.msg);
    rs_model_free(m);
    return rs_test_finish("gpt-ref (C half)");
}
