/* Linear: out (R,O) = in (R,I) . W^T + b over the last dimension, with W (O,I) as PyTorch stores
 * it, so a checkpoint's "N.weight" loads into torch.nn.Linear unchanged. R is the batch for a flat
 * input and batch x positions for a sequence (T, I). With tie= the weight is another layer's
 * parameter (GPT-2's head shares the token embedding): same offsets, gradients added together. */
#include <math.h>
#include <stdio.h>

#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    char s[64];
    if (in->ndim != 1 && in->ndim != 2)
        return rs_err_set(err, RS_ERR_SHAPE,
                          "layer %s (linear) needs a flat input, got %s; put `flatten` before it",
                          l->name, rs_shape_str(in, s, sizeof s));
    if (l->cfg.out < 1)
        return rs_err_set(err, RS_ERR_ARG, "layer %s (linear): out features must be >= 1, got %d",
                          l->name, l->cfg.out);
    int64_t I = in->d[in->ndim - 1], O = l->cfg.out;
    l->out = *in;
    l->out.d[in->ndim - 1] = O;
    l->np = l->cfg.bias ? 2 : 1;
    l->p[0] = (rs_param_slot){.suffix = "weight", .shape = {2, {O, I}}, .numel = (size_t)(O * I),
                              .tied = l->cfg.tie[0] != 0};
    if (l->cfg.bias) l->p[1] = (rs_param_slot){.suffix = "bias", .shape = {1, {O}}, .numel = (size_t)O};
    return RS_OK;
}

static void init(rs_layer *l, float *params, rs_rng *rng)
{
    int first = l->p[0].tied ? 1 : 0; /* a tied weight is its owner's to initialise */
    if (l->cfg.init_std > 0.0f) {
        if (!first) rs_layer_init_normal(params + l->p[0].offset, l->p[0].numel, l->cfg.init_std, rng);
        for (int i = 1; i < l->np; i++)
            for (size_t j = 0; j < l->p[i].numel; j++) params[l->p[i].offset + j] = 0.0f;
        return;
    }
    float bound = 1.0f / sqrtf((float)l->p[0].shape.d[1]);
    for (int i = first; i < l->np; i++) rs_layer_init_uniform(params + l->p[i].offset, l->p[i].numel, bound, rng);
}

static void forward(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    B = (int)rs_layer_rows(&l->out, B);
    int O = (int)l->p[0].shape.d[0], I = (int)l->p[0].shape.d[1];
    const float *W = x->params + l->p[0].offset;
    x->k->gemm(x->ctx, false, true, B, O, I, 1.0f, in, I, W, I, 0.0f, out, O);
    if (l->np > 1) x->k->bias_rows(x->ctx, out, x->params + l->p[1].offset, B, O);
}

static void backward(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)out;
    B = (int)rs_layer_rows(&l->out, B);
    int O = (int)l->p[0].shape.d[0], I = (int)l->p[0].shape.d[1];
    const float *W = x->params + l->p[0].offset;
    x->k->gemm(x->ctx, true, false, O, I, B, 1.0f, dout, O, in, I, 1.0f, x->grads + l->p[0].offset, I);
    if (l->np > 1) x->k->bias_rows_grad(x->ctx, x->grads + l->p[1].offset, dout, B, O);
    if (din) x->k->gemm(x->ctx, false, false, B, I, O, 1.0f, dout, O, W, I, 0.0f, din, I);
}

static const char *missing(const rs_layer_cfg *c)
{
    return c->out ? NULL : "linear needs its output size, e.g. linear(10)";
}

static void spell(const rs_layer_cfg *c, char *buf, size_t n)
{
    char f[32];
    int k = snprintf(buf, n, "linear(%d%s", c->out, c->bias ? "" : ",bias=0");
    if (c->init_std > 0.0f && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ",std=%s", rs_layer_flt(c->init_std, f, sizeof f));
    if (c->tie[0] && k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, ",tie=%s", c->tie);
    if (k >= 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, ")");
}

const rs_layer_ops rs_linear_ops = {
    .kind = "linear",
    .synopsis = "linear(OUT)",
    .opts = (const char *const[]){"out", "bias", "std", "tie", NULL},
    .npos = 1,
    .word = "linear(",
    .missing = missing,
    .spell = spell,
    .tp = RS_LAYER_TP_SPLIT,
    .gen = RS_LAYER_GEN_ROW,
    .example = "seq in=6 linear(5) linear(3,bias=0)",
    .setup = setup,
    .init = init,
    .forward = forward,
    .backward = backward,
};
