/* Layer kind registry, configuration defaults and helpers shared by several kinds. */
#include "layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const rs_layer_ops *const ops_by_kind[RS_LAYER_KIND_COUNT] = {
    [RS_LAYER_LINEAR] = &rs_linear_ops,       [RS_LAYER_CONV2D] = &rs_conv2d_ops,
    [RS_LAYER_MAXPOOL2D] = &rs_maxpool2d_ops, [RS_LAYER_AVGPOOL2D] = &rs_avgpool2d_ops,
    [RS_LAYER_RELU] = &rs_relu_ops,           [RS_LAYER_GELU] = &rs_gelu_ops,
    [RS_LAYER_TANH] = &rs_tanh_ops,           [RS_LAYER_FLATTEN] = &rs_flatten_ops,
    [RS_LAYER_DROPOUT] = &rs_dropout_ops,     [RS_LAYER_LAYERNORM] = &rs_layernorm_ops,
    [RS_LAYER_EMBED] = &rs_embed_ops,         [RS_LAYER_ATTN] = &rs_attn_ops,
    [RS_LAYER_ADD] = &rs_add_ops,             [RS_LAYER_TP_COPY] = &rs_tp_copy_ops,
    [RS_LAYER_TP_REDUCE] = &rs_tp_reduce_ops,
    [RS_LAYER_OP] = &rs_op_ops,
};

const rs_layer_ops *rs_layer_ops_for(rs_layer_kind k)
{
    return (unsigned)k < RS_LAYER_KIND_COUNT ? ops_by_kind[k] : NULL;
}

const char *rs_layer_kind_name(rs_layer_kind k)
{
    const rs_layer_ops *o = rs_layer_ops_for(k);
    return o ? o->kind : "?";
}

rs_layer_cfg rs_layer_cfg_default(rs_layer_kind k)
{
    rs_layer_cfg c = {.kind = k, .bias = true, .eps = 1e-5f, .p = 0.5f, .heads = 1};
    c.kh = c.kw = (k == RS_LAYER_CONV2D) ? 3 : 2;
    c.sh = c.sw = (k == RS_LAYER_CONV2D) ? 1 : c.kh;
    return c;
}

/* The shortest of %g, %.7g, %.9g that reads back as the same float: "0.1", not "0.100000001", and
 * never a value the parser would refuse (0.99999994 is not "1"). */
static const char *flt(float v, char *buf, size_t n)
{
    snprintf(buf, n, "%g", (double)v);
    if (strtof(buf, NULL) != v) snprintf(buf, n, "%.7g", (double)v);
    if (strtof(buf, NULL) != v) snprintf(buf, n, "%.9g", (double)v);
    return buf;
}

char *rs_layer_cfg_str(const rs_layer_cfg *c, char *buf, size_t n)
{
    char f[32];
    const char *name = rs_layer_kind_name(c->kind);
    int k = 0;
    char win[64] = "";
    switch (c->kind) {
    case RS_LAYER_LINEAR:
        k = snprintf(buf, n, "%s(%d%s", name, c->out, c->bias ? "" : ",bias=0");
        if (c->init_std > 0.0f && k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, ",std=%s", flt(c->init_std, f, sizeof f));
        if (c->tie[0] && k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, ",tie=%s", c->tie);
        if (k >= 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, ")");
        return buf;
    case RS_LAYER_EMBED:
        if (c->init_std > 0.0f) snprintf(buf, n, "%s(%d,%d,std=%s)", name, c->vocab, c->out, flt(c->init_std, f, sizeof f));
        else snprintf(buf, n, "%s(%d,%d)", name, c->vocab, c->out);
        return buf;
    case RS_LAYER_ATTN: snprintf(buf, n, "%s(%d)", name, c->heads); return buf;
    case RS_LAYER_GELU: snprintf(buf, n, c->approx_tanh ? "%s(tanh)" : "%s", name); return buf;
    case RS_LAYER_CONV2D:
    case RS_LAYER_MAXPOOL2D:
    case RS_LAYER_AVGPOOL2D: {
        bool conv = c->kind == RS_LAYER_CONV2D;
        int def_stride = conv ? 1 : c->kh;
        if (conv) k += snprintf(win + k, sizeof win - (size_t)k, "%d,", c->out);
        if (c->kh == c->kw) k += snprintf(win + k, sizeof win - (size_t)k, "%d", c->kh);
        else k += snprintf(win + k, sizeof win - (size_t)k, "%dx%d", c->kh, c->kw);
        if (c->sh != def_stride || c->sw != def_stride) {
            if (c->sh == c->sw) k += snprintf(win + k, sizeof win - (size_t)k, ",stride=%d", c->sh);
            else k += snprintf(win + k, sizeof win - (size_t)k, ",stride=%dx%d", c->sh, c->sw);
        }
        if (c->ph || c->pw) {
            if (c->ph == c->pw) k += snprintf(win + k, sizeof win - (size_t)k, ",pad=%d", c->ph);
            else k += snprintf(win + k, sizeof win - (size_t)k, ",pad=%dx%d", c->ph, c->pw);
        }
        if (conv && !c->bias) snprintf(win + k, sizeof win - (size_t)k, ",bias=0");
        snprintf(buf, n, "%s(%s)", name, win);
        return buf;
    }
    case RS_LAYER_DROPOUT: snprintf(buf, n, "%s(%s)", name, flt(c->p, f, sizeof f)); return buf;
    case RS_LAYER_LAYERNORM:
        if (c->eps != 1e-5f) snprintf(buf, n, "%s(eps=%s)", name, flt(c->eps, f, sizeof f));
        else snprintf(buf, n, "%s", name);
        return buf;
    default: snprintf(buf, n, "%s", name); return buf;
    }
}

rs_status rs_layer_window_geom(rs_layer *l, const rs_shape *in, int out_channels, rs_err *err)
{
    const rs_layer_cfg *c = &l->cfg;
    char s[64];
    if (in->ndim != 3)
        return rs_err_set(err, RS_ERR_SHAPE,
                          "layer %s (%s) needs a (channels, height, width) input, got %s; "
                          "images keep that shape until a flatten",
                          l->name, l->ops->kind, rs_shape_str(in, s, sizeof s));
    if (c->kh < 1 || c->kw < 1 || c->sh < 1 || c->sw < 1 || c->ph < 0 || c->pw < 0)
        return rs_err_set(err, RS_ERR_ARG, "layer %s (%s): kernel and stride must be >= 1, padding >= 0",
                          l->name, l->ops->kind);
    if (l->ops != &rs_conv2d_ops && (c->ph * 2 > c->kh || c->pw * 2 > c->kw))
        return rs_err_set(err, RS_ERR_ARG, "layer %s (%s): padding %dx%d is more than half the %dx%d window",
                          l->name, l->ops->kind, c->ph, c->pw, c->kh, c->kw);
    rs_conv_geom *g = &l->geom;
    g->c = (int)in->d[0];
    g->h = (int)in->d[1];
    g->w = (int)in->d[2];
    g->oc = out_channels ? out_channels : g->c;
    g->kh = c->kh;
    g->kw = c->kw;
    g->sh = c->sh;
    g->sw = c->sw;
    g->ph = c->ph;
    g->pw = c->pw;
    int eh = g->h + 2 * g->ph - g->kh, ew = g->w + 2 * g->pw - g->kw;
    if (eh < 0 || ew < 0)
        return rs_err_set(err, RS_ERR_SHAPE,
                          "layer %s (%s): a %dx%d window does not fit the %dx%d input (padding %dx%d)",
                          l->name, l->ops->kind, g->kh, g->kw, g->h, g->w, g->ph, g->pw);
    g->oh = eh / g->sh + 1;
    g->ow = ew / g->sw + 1;
    l->out = (rs_shape){3, {g->oc, g->oh, g->ow}};
    return RS_OK;
}

void rs_layer_init_uniform(float *x, size_t n, float bound, rs_rng *rng)
{
    for (size_t i = 0; i < n; i++) x[i] = rs_rng_range(rng, -bound, bound);
}

void rs_layer_init_normal(float *x, size_t n, float std, rs_rng *rng)
{
    for (size_t i = 0; i < n; i++) x[i] = std * rs_rng_normal(rng);
}

int64_t rs_layer_rows(const rs_shape *s, int B)
{
    int64_t last = s->ndim ? s->d[s->ndim - 1] : 1;
    return last > 0 ? (int64_t)B * rs_shape_numel(s) / last : 0;
}
