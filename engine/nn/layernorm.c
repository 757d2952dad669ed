/* LayerNorm over the last dimension of each sample (torch.nn.LayerNorm(last_dim)), with learnable
 * weight (gamma, init 1) and bias (beta, init 0); mean and 1/std per row are saved for backward. */
#include <stdio.h>

#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    if (!(l->cfg.eps > 0.0f))
        return rs_err_set(err, RS_ERR_ARG, "layer %s (layernorm): eps must be > 0, got %g", l->name,
                          (double)l->cfg.eps);
    int64_t N = in->d[in->ndim - 1];
    l->out = *in;
    l->np = 2;
    l->p[0] = (rs_param_slot){.suffix = "weight", .shape = {1, {N}}, .numel = (size_t)N};
    l->p[1] = (rs_param_slot){.suffix = "bias", .shape = {1, {N}}, .numel = (size_t)N};
    return RS_OK;
}

static int row_len(const rs_layer *l) { return (int)l->out.d[l->out.ndim - 1]; }
static int rows(const rs_layer *l, int B) { return (int)(B * rs_shape_numel(&l->out) / row_len(l)); }

static void init(rs_layer *l, float *params, rs_rng *rng)
{
    (void)rng;
    for (size_t i = 0; i < l->p[0].numel; i++) params[l->p[0].offset + i] = 1.0f;
    for (size_t i = 0; i < l->p[1].numel; i++) params[l->p[1].offset + i] = 0.0f;
}

static size_t saved(const rs_layer *l, int B) { return 2 * (size_t)rows(l, B) * sizeof(float); }

static void forward(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    int R = rows(l, B);
    float *mean = x->saved, *rstd = mean + R;
    x->k->layernorm_fwd(x->ctx, in, x->params + l->p[0].offset, x->params + l->p[1].offset, out, mean, rstd, R,
                        row_len(l), l->cfg.eps);
}

static void backward(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)out;
    int R = rows(l, B);
    const float *mean = x->saved, *rstd = mean + R;
    x->k->layernorm_bwd(x->ctx, in, x->params + l->p[0].offset, mean, rstd, dout, din, x->grads + l->p[0].offset,
                        x->grads + l->p[1].offset, R, row_len(l));
}

static void spell(const rs_layer_cfg *c, char *buf, size_t n)
{
    char f[32];
    if (c->eps != 1e-5f) snprintf(buf, n, "layernorm(eps=%s)", rs_layer_flt(c->eps, f, sizeof f));
    else snprintf(buf, n, "layernorm");
}

const rs_layer_ops rs_layernorm_ops = {
    .kind = "layernorm",
    .synopsis = "layernorm",
    .opts = (const char *const[]){"eps", NULL},
    .npos = 1,
    .word = "layernorm",
    .spell = spell,
    .tp = RS_LAYER_TP_REPLICATE,
    .gen = RS_LAYER_GEN_ROW,
    .example = "seq in=6 linear(8) layernorm linear(8) layernorm(eps=0.001) linear(3)",
    .setup = setup,
    .init = init,
    .saved_bytes = saved,
    .forward = forward,
    .backward = backward,
};
