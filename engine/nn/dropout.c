/* Dropout: in training, zero each element with probability p and scale the rest by 1/(1-p) (inverted
 * dropout, as PyTorch); in eval, the identity. The mask is saved for backward. */
#include <stdio.h>

#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    if (!(l->cfg.p >= 0.0f && l->cfg.p < 1.0f))
        return rs_err_set(err, RS_ERR_ARG, "layer %s (dropout): p must be in [0, 1), got %g", l->name,
                          (double)l->cfg.p);
    l->out = *in;
    return RS_OK;
}

static size_t numel(const rs_layer *l, int B) { return (size_t)B * (size_t)rs_shape_numel(&l->out); }

static size_t saved(const rs_layer *l, int B) { return numel(l, B); /* one byte per element */ }

static void forward(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    if (!x->training || l->cfg.p == 0.0f) {
        x->k->copy_d2d(x->ctx, out, in, numel(l, B) * sizeof(float));
        return;
    }
    uint64_t seed = x->dropout_seed ^ ((uint64_t)(l->rng_id + 1) * 0xd6e8feb86659fd93ULL);
    x->k->dropout_fwd(x->ctx, in, out, x->saved, numel(l, B), l->cfg.p, seed);
}

static void backward(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)in;
    (void)out;
    if (!din) return;
    if (!x->training || l->cfg.p == 0.0f) x->k->copy_d2d(x->ctx, din, dout, numel(l, B) * sizeof(float));
    else x->k->dropout_bwd(x->ctx, dout, x->saved, din, numel(l, B), l->cfg.p);
}

static void spell(const rs_layer_cfg *c, char *buf, size_t n)
{
    char f[32];
    snprintf(buf, n, "dropout(%s)", rs_layer_flt(c->p, f, sizeof f));
}

const rs_layer_ops rs_dropout_ops = {
    .kind = "dropout",
    .synopsis = "dropout(P)",
    .opts = (const char *const[]){"p", NULL},
    .npos = 1,
    .word = "dropout(",
    .spell = spell,
    .tp = RS_LAYER_TP_ELEMENTWISE,
    .gen = RS_LAYER_GEN_ROW, /* generation runs in eval mode: the identity */
    .example = "seq in=6 linear(8) dropout(0.25) linear(3)",
    .setup = setup,
    .saved_bytes = saved,
    .forward = forward,
    .backward = backward,
};
