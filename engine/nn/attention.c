/* The core of causal multi-head self-attention: qkv (T, 3C) -> (T, C), with no parameters of its
 * own. The projections around it are ordinary linear layers (linear(3C) before, linear(C) after),
 * which is what lets tensor parallelism split them by columns and rows. The attention probabilities
 * (B, heads, T, T) are the one T x T buffer kept, from forward until backward. */
#include <stdio.h>

#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    char s[64];
    if (in->ndim != 2 || in->d[1] % 3)
        return rs_err_set(err, RS_ERR_SHAPE,
                          "layer %s (attn) needs queries, keys and values side by side, (T, 3C); got %s: "
                          "put linear(3C) before it",
                          l->name, rs_shape_str(in, s, sizeof s));
    int64_t T = in->d[0], C = in->d[1] / 3;
    if (l->cfg.heads < 1 || C % l->cfg.heads)
        return rs_err_set(err, RS_ERR_ARG, "layer %s (attn): %d heads do not divide the width %lld", l->name,
                          l->cfg.heads, (long long)C);
    l->out = (rs_shape){2, {T, C}};
    l->np = 0;
    return RS_OK;
}

static int seq(const rs_layer *l) { return (int)l->out.d[0]; }
static int width(const rs_layer *l) { return (int)l->out.d[1]; }

static size_t saved(const rs_layer *l, int B)
{
    return (size_t)B * (size_t)l->cfg.heads * (size_t)seq(l) * (size_t)seq(l) * sizeof(float);
}

static size_t workspace(const rs_layer *l, rs_kctx *ctx, int B)
{
    size_t n = 0; /* a failure stays in ctx for the caller's next check */
    ctx->k->attn_workspace(ctx, B, seq(l), width(l), l->cfg.heads, &n);
    return n;
}

static void forward(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    x->k->attn_fwd(x->ctx, in, out, x->saved, B, seq(l), width(l), l->cfg.heads);
}

static void backward(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                     float *din, int B)
{
    (void)out;
    if (din)
        x->k->attn_bwd(x->ctx, in, x->saved, dout, din, x->ws, x->ws_bytes, B, seq(l), width(l), l->cfg.heads);
}

/* The keys and values of every position so far: (maxT, C) each, side by side in the cache. */
static size_t cache_floats(const rs_layer *l, int maxT) { return 2 * (size_t)maxT * (size_t)width(l); }

/* One position: in = [q | k | v] of it; its key and value join the cache, and its query attends over
 * the cached positions (the kernel table's attn_step). */
static void step(const rs_layer *l, const rs_exec *x, const rs_layer_pos *s, const float *in, float *out)
{
    int W = width(l);
    size_t row = (size_t)W * sizeof(float);
    float *kc = s->cache, *vc = s->cache + (size_t)s->maxT * (size_t)W;
    x->k->copy_d2d(x->ctx, kc + (size_t)s->pos * (size_t)W, in + W, row);
    x->k->copy_d2d(x->ctx, vc + (size_t)s->pos * (size_t)W, in + 2 * W, row);
    x->k->attn_step(x->ctx, in, kc, vc, out, 1, s->pos + 1, s->maxT, W, l->cfg.heads);
}

static void spell(const rs_layer_cfg *c, char *buf, size_t n) { snprintf(buf, n, "attn(%d)", c->heads); }

const rs_layer_ops rs_attn_ops = {
    .kind = "attn",
    .synopsis = "attn(H)",
    .opts = (const char *const[]){"heads", NULL},
    .npos = 1,
    .word = "attn(",
    .spell = spell,
    .tp = RS_LAYER_TP_HEADS,
    .gen = RS_LAYER_GEN_STEP,
    .step = step,
    .cache_floats = cache_floats,
    .example = "seq ctx=6 embed(11,8) linear(24) attn(2) linear(8) linear(11)",
    .setup = setup,
    .saved_bytes = saved,
    .workspace_bytes = workspace,
    .forward = forward,
    .backward = backward,
};
