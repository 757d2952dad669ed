/* Conv2d with weight (OC, C, KH, KW) and bias (OC), PyTorch's layout; the arithmetic is the device's
 * conv2d entries (im2col + BLAS product on the CPU). */
#include <math.h>
#include <stdio.h>

#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    if (l->cfg.out < 1)
        return rs_err_set(err, RS_ERR_ARG, "layer %s (conv): out channels must be >= 1, got %d", l->name,
                          l->cfg.out);
    rs_status st = rs_layer_window_geom(l, in, l->cfg.out, err);
    if (st) return st;
    const rs_conv_geom *g = &l->geom;
    l->np = l->cfg.bias ? 2 : 1;
    l->p[0] = (rs_param_slot){.suffix = "weight",
                              .shape = {4, {g->oc, g->c, g->kh, g->kw}},
                              .numel = (size_t)g->oc * g->c * g->kh * g->kw};
    if (l->cfg.bias)
        l->p[1] = (rs_param_slot){.suffix = "bias", .shape = {1, {g->oc}}, .numel = (size_t)g->oc};
    return RS_OK;
}

static void init(rs_layer *l, float *params, rs_rng *rng)
{
    const rs_conv_geom *g = &l->geom;
    float bound = 1.0f / sqrtf((float)(g->c * g->kh * g->kw));
    for (int i = 0; i < l->np; i++) rs_layer_init_uniform(params + l->p[i].offset, l->p[i].numel, bound, rng);
}

static size_t workspace_bytes(const rs_layer *l, rs_kctx *ctx, int B)
{
    size_t n = 0; /* a failure stays in ctx for the caller's next check */
    ctx->k->conv2d_workspace(ctx, &l->geom, B, &n);
    return n;
}

static void forward(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    const float *bias = l->np > 1 ? x->params + l->p[1].offset : NULL;
    x->k->conv2d_fwd(x->ctx, &l->geom, B, in, x->params + l->p[0].offset, bias, out, x->ws, x->ws_bytes);
}

static void backward(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)out;
    float *db = l->np > 1 ? x->grads + l->p[1].offset : NULL;
    x->k->conv2d_bwd(x->ctx, &l->geom, B, in, x->params + l->p[0].offset, dout, din, x->grads + l->p[0].offset,
                     db, x->ws, x->ws_bytes);
}

static const char *missing(const rs_layer_cfg *c)
{
    return c->out ? NULL : "conv needs its output size, e.g. conv(16,3,pad=1)";
}

static void defaults(rs_layer_cfg *c)
{
    c->kh = c->kw = 3;
    c->sh = c->sw = 1;
}

static void spell(const rs_layer_cfg *c, char *buf, size_t n)
{
    char win[64];
    rs_layer_spell_window(c, 1, win, sizeof win);
    snprintf(buf, n, "conv(%d,%s%s)", c->out, win, c->bias ? "" : ",bias=0");
}

const rs_layer_ops rs_conv2d_ops = {
    .kind = "conv",
    .synopsis = "conv(OUT,K,stride=S,pad=P)",
    .opts = (const char *const[]){"out", "k", "stride", "pad", "bias", NULL},
    .npos = 2,
    .word = "conv(",
    .missing = missing,
    .defaults = defaults,
    .spell = spell,
    .tp = RS_LAYER_TP_REPLICATE,
    .gen = RS_LAYER_GEN_NONE,
    .example = "seq in=2x6x6 conv(3,3,pad=1) conv(2,3x2,stride=2,bias=0) flatten linear(3)",
    .setup = setup,
    .init = init,
    .workspace_bytes = workspace_bytes,
    .forward = forward,
    .backward = backward,
};
