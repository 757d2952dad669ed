/* Flatten: (C,H,W) -> (C*H*W). Row-major storage is already flat, so forward and backward are copies
 * of the same bytes; the shape is what changes. */
#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    (void)err;
    l->out = (rs_shape){1, {rs_shape_numel(in)}};
    return RS_OK;
}

static void forward(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    x->k->copy_d2d(x->ctx, out, in, (size_t)B * (size_t)rs_shape_numel(&l->out) * sizeof(float));
}

static void backward(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)in;
    (void)out;
    if (din) x->k->copy_d2d(x->ctx, din, dout, (size_t)B * (size_t)rs_shape_numel(&l->out) * sizeof(float));
}

const rs_layer_ops rs_flatten_ops = {
    .kind = "flatten",
    .word = "flatten",
    .tp = RS_LAYER_TP_REPLICATE,
    .gen = RS_LAYER_GEN_NONE,
    .example = "seq in=2x3x3 flatten linear(3)",
    .setup = setup,
    .forward = forward,
    .backward = backward,
};
