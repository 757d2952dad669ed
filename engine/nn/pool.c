/* MaxPool2d and AvgPool2d (stride defaults to the kernel size, as in PyTorch). Max pooling keeps the
 * index of each window's maximum for backward; average pooling divides by the full window
 * (count_include_pad=True, PyTorch's default). */
#include <stdio.h>

#include "engine/core/kernels.h"
#include "layer.h"

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    return rs_layer_window_geom(l, in, 0, err);
}

static size_t max_saved(const rs_layer *l, int B)
{
    return (size_t)B * l->geom.c * l->geom.oh * l->geom.ow * sizeof(int32_t);
}

static void max_fwd(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    x->k->maxpool_fwd(x->ctx, &l->geom, B, in, out, x->inference ? NULL : x->saved); /* no backward: keep nothing */
}

static void max_bwd(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                    float *din, int B)
{
    (void)in;
    (void)out;
    if (din) x->k->maxpool_bwd(x->ctx, &l->geom, B, dout, x->saved, din);
}

static void avg_fwd(rs_layer *l, const rs_exec *x, const float *in, float *out, int B)
{
    x->k->avgpool_fwd(x->ctx, &l->geom, B, in, out);
}

static void avg_bwd(rs_layer *l, const rs_exec *x, const float *in, const float *out, const float *dout,
                    float *din, int B)
{
    (void)in;
    (void)out;
    if (din) x->k->avgpool_bwd(x->ctx, &l->geom, B, dout, din);
}

static void spell_max(const rs_layer_cfg *c, char *buf, size_t n)
{
    char win[64];
    rs_layer_spell_window(c, c->kh, win, sizeof win);
    snprintf(buf, n, "maxpool(%s)", win);
}

static void spell_avg(const rs_layer_cfg *c, char *buf, size_t n)
{
    char win[64];
    rs_layer_spell_window(c, c->kh, win, sizeof win);
    snprintf(buf, n, "avgpool(%s)", win);
}

static const char *const pool_opts[] = {"k", "stride", "pad", NULL};

const rs_layer_ops rs_maxpool2d_ops = {
    .kind = "maxpool",
    .synopsis = "maxpool(K)",
    .opts = pool_opts,
    .npos = 1,
    .word = "maxpool(",
    .spell = spell_max,
    .tp = RS_LAYER_TP_REPLICATE,
    .gen = RS_LAYER_GEN_NONE,
    .example = "seq in=2x6x6 maxpool(2) maxpool(3,stride=1,pad=1) flatten linear(3)",
    .setup = setup,
    .saved_bytes = max_saved,
    .forward = max_fwd,
    .backward = max_bwd,
};

const rs_layer_ops rs_avgpool2d_ops = {
    .kind = "avgpool",
    .synopsis = "avgpool(K)",
    .opts = pool_opts,
    .npos = 1,
    .word = "avgpool(",
    .spell = spell_avg,
    .tp = RS_LAYER_TP_REPLICATE,
    .gen = RS_LAYER_GEN_NONE,
    .example = "seq in=2x6x6 avgpool(2) avgpool(3,stride=1,pad=1) flatten linear(3)",
    .setup = setup,
    .forward = avg_fwd,
    .backward = avg_bwd,
};
