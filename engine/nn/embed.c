/* Token and position embedding, GPT-2's first step: out (T, C) = wte[token] + wpe[position] for a
 * sequence of T int32 tokens. The model's input holds the tokens' bit patterns in its 4-byte elements
 * (a token model reads no floats); ids were checked against the vocabulary before the forward. */
#include <stdio.h>
#include <string.h>

#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    char s[64];
    if (in->ndim != 1 || l->nsrc != 1 || l->src[0] != -1)
        return rs_err_set(err, RS_ERR_SHAPE,
                          "layer %s (embed) reads the model's tokens and must come first; got input %s",
                          l->name, rs_shape_str(in, s, sizeof s));
    if (l->cfg.vocab < 1 || l->cfg.out < 1)
        return rs_err_set(err, RS_ERR_ARG, "layer %s (embed): vocabulary and width must be >= 1, e.g. embed(65,128)",
                          l->name);
    int64_t T = in->d[0], V = l->cfg.vocab, C = l->cfg.out;
    l->out = (rs_shape){2, {T, C}};
    l->np = 2;
    l->p[0] = (rs_param_slot){.suffix = "wte", .shape = {2, {V, C}}, .numel = (size_t)(V * C)};
    l->p[1] = (rs_param_slot){.suffix = "wpe", .shape = {2, {T, C}}, .numel = (size_t)(T * C)};
    return RS_OK;
}

static void init(rs_layer *l, float *params, rs_rng *rng)
{
    /* nn.Embedding's default is N(0, 1); GPT-2 uses N(0, 0.02). */
    float std = l->cfg.init_std > 0.0f ? l->cfg.init_std : 1.0f;
    for (int i = 0; i < l->np; i++) rs_layer_init_normal(params + l->p[i].offset, l->p[i].numel, std, rng);
}

static void forward(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    int T = (int)l->out.d[0], C = (int)l->out.d[1];
    x->k->embed_fwd(x->ctx, (const int32_t *)(const void *)in, x->params + l->p[0].offset,
                    x->params + l->p[1].offset, out, B, T, C);
}

static void backward(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)out;
    (void)din; /* tokens have no gradient */
    int T = (int)l->out.d[0], C = (int)l->out.d[1];
    x->k->embed_bwd(x->ctx, (const int32_t *)(const void *)in, dout, x->grads + l->p[0].offset,
                    x->grads + l->p[1].offset, B, T, C);
}

/* One position: the row of the token read from device memory, plus the position's row of wpe. */
static void step(const rs_layer *l, const rs_exec *x, const rs_layer_pos *s, const float *in, float *out)
{
    (void)in;
    int C = (int)l->out.d[1];
    x->k->embed_fwd(x->ctx, s->tok, x->params + l->p[0].offset, x->params + l->p[1].offset + (size_t)s->pos * (size_t)C,
                    out, 1, 1, C);
}

static const char *missing(const rs_layer_cfg *c)
{
    return c->out && c->vocab ? NULL : "embed needs the vocabulary and the width, e.g. embed(65,128)";
}

static void spell(const rs_layer_cfg *c, char *buf, size_t n)
{
    char f[32];
    if (c->init_std > 0.0f) snprintf(buf, n, "embed(%d,%d,std=%s)", c->vocab, c->out, rs_layer_flt(c->init_std, f, sizeof f));
    else snprintf(buf, n, "embed(%d,%d)", c->vocab, c->out);
}

const rs_layer_ops rs_embed_ops = {
    .kind = "embed",
    .synopsis = "embed(V,C)",
    .opts = (const char *const[]){"vocab", "out", "std", NULL},
    .npos = 2,
    .word = "embed(",
    .missing = missing,
    .spell = spell,
    .tp = RS_LAYER_TP_REPLICATE,
    .gen = RS_LAYER_GEN_STEP,
    .step = step,
    .example = "seq ctx=6 embed(11,8) linear(11)",
    .setup = setup,
    .init = init,
    .forward = forward,
    .backward = backward,
};
