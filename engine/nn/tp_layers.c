/* Megatron-LM's two conjugate operators, the only places a tensor-parallel model talks to the other
 * ranks of its group (Shoeybi et al. 2019, section 3):
 *   tp_copy   (f): forward the identity; backward all-reduces the input gradient, since each rank's
 *                  column-parallel linear saw the whole input and produced only its part of dX.
 *   tp_reduce (g): forward all-reduces the partial sums of the row-parallel linear; backward the
 *                  identity, since every rank's partial sum fed the total with weight one.
 * The all-reduce is the caller's (rs_exec.tp_all_reduce): engine/ knows no process group. Without
 * one both are the identity, which is what a group of one rank computes. */
#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    (void)err;
    l->out = *in;
    return RS_OK;
}

static size_t numel(const rs_layer *l, int B) { return (size_t)B * (size_t)rs_shape_numel(&l->out); }

static void all_reduce(const rs_exec *x, float *buf, size_t n)
{
    if (x->tp_all_reduce) x->tp_all_reduce(x->tp_ud, buf, n);
}

/* A failed copy stays in x->ctx for the executor; the all-reduce still runs, as every rank of the
 * group must join it whatever this one's kernels did. */
static void copy_values(const rs_exec *x, float *dst, const float *src, size_t n)
{
    x->k->copy_d2d(x->ctx, dst, src, n * sizeof(float));
}

static void copy_forward(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    copy_values(x, out, in, numel(l, B));
}

static void copy_backward(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                          float *din, int B)
{
    (void)in;
    (void)out;
    /* din is NULL only when the copy reads the model's input: the same on every rank of the group, so
     * either all of them all-reduce or none does. */
    if (!din) return;
    copy_values(x, din, dout, numel(l, B));
    all_reduce(x, din, numel(l, B));
}

static void reduce_forward(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    copy_values(x, out, in, numel(l, B));
    all_reduce(x, out, numel(l, B));
}

static void reduce_backward(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                            float *din, int B)
{
    (void)in;
    (void)out;
    if (din) copy_values(x, din, dout, numel(l, B));
}

/* Spellable so a shard's spec re-parses, but never offered: tensor parallelism places them. */
const rs_layer_ops rs_tp_copy_ops = {
    .kind = "tp_copy",
    .tp = RS_LAYER_TP_REPLICATE,
    .gen = RS_LAYER_GEN_NONE,
    .example = "seq in=6 linear(8) tp_copy linear(3)",
    .setup = setup,
    .forward = copy_forward,
    .backward = copy_backward,
};
const rs_layer_ops rs_tp_reduce_ops = {
    .kind = "tp_reduce",
    .tp = RS_LAYER_TP_REPLICATE,
    .gen = RS_LAYER_GEN_NONE,
    .example = "seq in=6 linear(8) tp_reduce linear(3)",
    .setup = setup,
    .forward = reduce_forward,
    .backward = reduce_backward,
};
