/* The sum of two inputs of one shape: the residual connection that closes a res[ ... ] block
 * (out = block input + block output). Its gradient goes to both inputs unchanged; the model adds it
 * to whatever else reached each input (a value used twice gets the sum of both gradients). */
#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    (void)err;
    l->out = *in;
    return RS_OK;
}

static size_t numel(const rs_layer *l, int B) { return (size_t)B * (size_t)rs_shape_numel(&l->out); }

static void forward2(rs_layer *l, const rs_exec *x, const float *a, const float *b, float *out, int B)
{
    x->k->add(x->ctx, a, b, out, numel(l, B));
}

static void backward2(rs_layer *l, const rs_exec *x, const float *dout, float *da, float *db, int B)
{
    if (da) x->k->copy_d2d(x->ctx, da, dout, numel(l, B) * sizeof(float));
    if (db) x->k->copy_d2d(x->ctx, db, dout, numel(l, B) * sizeof(float));
}

const rs_layer_ops rs_add_ops = {
    .kind = "add",
    .unspelled = true, /* made by res[ ... ] */
    .tp = RS_LAYER_TP_REPLICATE,
    .gen = RS_LAYER_GEN_ROW,
    .example = "seq in=6 linear(6) res[ relu linear(6) ] linear(3)",
    .setup = setup,
    .nin = 2,
    .forward2 = forward2,
    .backward2 = backward2,
};
