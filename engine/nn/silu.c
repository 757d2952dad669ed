/* SiLU (swish), torch.nn.SiLU: out = x * sigmoid(x), elementwise. Differentiated from its input, which
 * the model keeps, so nothing extra is saved. ONNX has no operator for it: torch.onnx writes Sigmoid then
 * Mul, and so does export (onnx_chain), and import reads that pair back as a silu. The worked example of docs/add-a-layer.md: this file, its
 * line in layers.def and its kernels (silu_fwd/silu_bwd in the device tables) are all a new activation
 * needs; the parser, completion, help, export, import, compile, tensor parallelism and generation read
 * the descriptor below. */
#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    (void)err;
    l->out = *in;
    return RS_OK;
}

static size_t numel(const rs_layer *l, int B) { return (size_t)B * (size_t)rs_shape_numel(&l->out); }

static void forward(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    x->k->silu_fwd(x->ctx, in, out, numel(l, B));
}

static void backward(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)out;
    if (din) x->k->silu_bwd(x->ctx, in, dout, din, numel(l, B));
}

RS_LAYER_UNARY_FNS(silu, RS_UNARY_SILU)

const rs_layer_ops rs_silu_ops = {
    .kind = "silu",
    .word = "silu",
    .unary_of = silu_unary,
    .from_unary = silu_from,
    .onnx_chain = (const rs_layer_onnx_node[]){{.op = "Sigmoid"}, {.op = "Mul", .times_input = true}, {.op = NULL}},
    .tp = RS_LAYER_TP_ELEMENTWISE,
    .gen = RS_LAYER_GEN_ROW,
    .example = "seq in=6 linear(8) silu linear(3)",
    .setup = setup,
    .forward = forward,
    .backward = backward,
};
