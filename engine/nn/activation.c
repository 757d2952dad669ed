/* Elementwise activations: ReLU, GELU (exact erf form, or GPT-2's tanh form with gelu(tanh)) and Tanh. ReLU and Tanh differentiate from
 * their output, GELU from its input; the model keeps both, so nothing extra is saved. */
#include <stdio.h>

#include "engine/core/kernels.h"
#include "layer.h"

static rs_status same_shape(rs_layer *l, const rs_shape *in, rs_err *err)
{
    (void)err;
    l->out = *in;
    return RS_OK;
}

static size_t numel(const rs_layer *l, int B) { return (size_t)B * (size_t)rs_shape_numel(&l->out); }

static void relu_fwd(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    x->k->relu_fwd(x->ctx, in, out, numel(l, B));
}

static void relu_bwd(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)in;
    if (din) x->k->relu_bwd(x->ctx, out, dout, din, numel(l, B));
}

static void gelu_fwd(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    if (l->cfg.approx_tanh) x->k->gelu_tanh_fwd(x->ctx, in, out, numel(l, B));
    else x->k->gelu_fwd(x->ctx, in, out, numel(l, B));
}

static void gelu_bwd(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)out;
    if (din && l->cfg.approx_tanh) x->k->gelu_tanh_bwd(x->ctx, in, dout, din, numel(l, B));
    else if (din) x->k->gelu_bwd(x->ctx, in, dout, din, numel(l, B));
}

static void tanh_fwd(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    x->k->tanh_fwd(x->ctx, in, out, numel(l, B));
}

static void tanh_bwd(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)in;
    if (din) x->k->tanh_bwd(x->ctx, out, dout, din, numel(l, B));
}

RS_LAYER_UNARY_FNS(relu, RS_UNARY_RELU)
RS_LAYER_UNARY_FNS(tanh, RS_UNARY_TANH)

static int gelu_unary(const rs_layer_cfg *c) { return c->approx_tanh ? RS_UNARY_GELU_TANH : RS_UNARY_GELU; }

static bool gelu_from(int op, rs_layer_cfg *c)
{
    c->approx_tanh = op == RS_UNARY_GELU_TANH;
    return op == RS_UNARY_GELU || op == RS_UNARY_GELU_TANH;
}

static void gelu_spell(const rs_layer_cfg *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s", c->approx_tanh ? "gelu(tanh)" : "gelu");
}

const rs_layer_ops rs_relu_ops = {
    .kind = "relu",
    .word = "relu",
    .unary_of = relu_unary,
    .from_unary = relu_from,
    .tp = RS_LAYER_TP_ELEMENTWISE,
    .gen = RS_LAYER_GEN_ROW,
    .example = "seq in=6 linear(8) relu linear(3)",
    .setup = same_shape,
    .forward = relu_fwd,
    .backward = relu_bwd,
};

const rs_layer_ops rs_gelu_ops = {
    .kind = "gelu",
    .synopsis = "gelu",
    .opts = (const char *const[]){"approx", NULL},
    .npos = 1,
    .word = "gelu",
    .spell = gelu_spell,
    .unary_of = gelu_unary,
    .from_unary = gelu_from,
    .tp = RS_LAYER_TP_ELEMENTWISE,
    .gen = RS_LAYER_GEN_ROW,
    .example = "seq in=6 linear(8) gelu linear(8) gelu(tanh) linear(3)",
    .setup = same_shape,
    .forward = gelu_fwd,
    .backward = gelu_bwd,
};

const rs_layer_ops rs_tanh_ops = {
    .kind = "tanh",
    .word = "tanh",
    .unary_of = tanh_unary,
    .from_unary = tanh_from,
    .tp = RS_LAYER_TP_ELEMENTWISE,
    .gen = RS_LAYER_GEN_ROW,
    .example = "seq in=6 linear(8) tanh linear(3)",
    .setup = same_shape,
    .forward = tanh_fwd,
    .backward = tanh_bwd,
};
