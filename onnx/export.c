/* Model -> ONNX, one layer at a time through the hand builder (onnx/build.c), so export and the
 * REPL lesson write files the same way. The walk follows the model's graph: each layer's nodes read
 * the values of its sources (a residual's add reads two). Values are named after the layer that makes
 * them ("3.conv"), nodes PyTorch-style ("/3/conv"), and the last value is renamed "logits". The
 * transformer's layers are in export_seq.c. */
#include "onnx/export.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/build.h"
#include "onnx/export_internal.h"

#define NAME_MAX_LEN RS_ONNX_NAME_LEN

typedef rs_onnx_exporter exporter;

const char *rs_onnx_ex_src(const exporter *x, const rs_layer *l, int k)
{
    int s = k < l->nsrc ? l->src[k] : -1;
    return s < 0 ? x->input : x->val[s];
}

const rs_param_info *rs_onnx_ex_param(const exporter *x, const rs_layer *l, const char *suffix)
{
    for (int j = 0; j < l->np; j++) {
        if (strcmp(l->p[j].suffix, suffix)) continue;
        if (l->p[j].tied) return rs_model_find_tensor(x->m, l->cfg.tie);
        char name[64];
        snprintf(name, sizeof name, "%s.%s", l->name, suffix);
        return rs_model_find_tensor(x->m, name);
    }
    return NULL;
}

/* Each model tensor is written once, however many layers read it (a tied weight has one owner). */
rs_status rs_onnx_ex_add_param(exporter *x, const rs_param_info *p)
{
    for (int i = 0; i < rs_model_tensor_count(x->m); i++) {
        if (rs_model_tensor(x->m, i) != p) continue;
        if (x->added[i]) return RS_OK;
        x->added[i] = true;
    }
    return rs_onnx_builder_initializer(x->b, p->name, p->shape.ndim, p->shape.d, x->params + p->offset, 0, x->err);
}

rs_status rs_onnx_ex_const(exporter *x, const char *name, float v)
{
    for (int i = 0; i < x->nconsts; i++)
        if (!strcmp(x->consts[i], name)) return RS_OK;
    if (x->nconsts == RS_ONNX_MAX_CONSTS)
        return rs_err_set(x->err, RS_ERR_INTERNAL, "export: more than %d shared constants", RS_ONNX_MAX_CONSTS);
    snprintf(x->consts[x->nconsts++], RS_ONNX_NAME_LEN, "%s", name);
    return rs_onnx_builder_initializer(x->b, name, 0, NULL, &v, 0, x->err);
}

rs_status rs_onnx_ex_node(exporter *x, const rs_layer *l, const char *op, const char *tag, int n_in,
                          const char *const *in)
{
    char out[NAME_MAX_LEN], nm[NAME_MAX_LEN];
    snprintf(out, sizeof out, "%s.%s", l->name, tag);
    snprintf(nm, sizeof nm, "/%s/%s", l->name, tag);
    const char *outs[1] = {out};
    rs_status st = rs_onnx_builder_node(x->b, op, n_in, in, 1, outs, NULL, x->err);
    if (!st) st = rs_onnx_builder_name_last(x->b, nm, x->err);
    if (!st) snprintf(x->cur, sizeof x->cur, "%s", out);
    return st;
}

static rs_status node(exporter *x, const rs_layer *l, const char *op, const char *tag, int n_in,
                      const char *const *in)
{
    return rs_onnx_ex_node(x, l, op, tag, n_in, in);
}

/* Gemm or Conv: the layer's input, weight and (when it has one) bias. */
static rs_status weighted(exporter *x, const rs_layer *l, const char *op, const char *tag)
{
    const rs_param_info *w = rs_onnx_ex_param(x, l, "weight"), *bias = rs_onnx_ex_param(x, l, "bias");
    if (!w) return rs_err_set(x->err, RS_ERR_INTERNAL, "layer %s: no weight tensor", l->name);
    rs_status st = rs_onnx_ex_add_param(x, w);
    if (!st && bias) st = rs_onnx_ex_add_param(x, bias);
    if (st) return st;
    const char *in[3] = {rs_onnx_ex_src(x, l, 0), w->name, bias ? bias->name : ""};
    return node(x, l, op, tag, bias ? 3 : 2, in);
}

static rs_status window_attrs(exporter *x, const rs_layer *l, bool conv)
{
    const rs_layer_cfg *c = &l->cfg;
    int64_t k[2] = {c->kh, c->kw}, s[2] = {c->sh, c->sw}, p[4] = {c->ph, c->pw, c->ph, c->pw};
    rs_status st = rs_onnx_builder_attr_ints(x->b, "kernel_shape", 2, k, x->err);
    if (!st) st = rs_onnx_builder_attr_ints(x->b, "strides", 2, s, x->err);
    if (!st) st = rs_onnx_builder_attr_ints(x->b, "pads", 4, p, x->err);
    if (!st && conv) st = rs_onnx_builder_attr_ints(x->b, "dilations", 2, (int64_t[]){1, 1}, x->err);
    return st;
}

/* LayerNorm over the last dimension. LayerNormalization is an operator from opset 17; before it,
 * (x - mean) / sqrt(var + eps) * weight + bias with the biased variance, as the engine computes it. */
static rs_status layernorm(exporter *x, const rs_layer *l)
{
    const rs_param_info *w = rs_onnx_ex_param(x, l, "weight"), *bias = rs_onnx_ex_param(x, l, "bias");
    if (!w || !bias) return rs_err_set(x->err, RS_ERR_INTERNAL, "layer %s: layernorm without weight/bias", l->name);
    rs_status st = rs_onnx_ex_add_param(x, w);
    if (!st) st = rs_onnx_ex_add_param(x, bias);
    if (st) return st;
    char xin[NAME_MAX_LEN], mean[NAME_MAX_LEN], d[NAME_MAX_LEN], sq[NAME_MAX_LEN], var[NAME_MAX_LEN];
    char ve[NAME_MAX_LEN], sd[NAME_MAX_LEN], nrm[NAME_MAX_LEN], sc[NAME_MAX_LEN], eps[NAME_MAX_LEN];
    snprintf(xin, sizeof xin, "%s", rs_onnx_ex_src(x, l, 0));
    if (x->opset >= 17) {
        if ((st = node(x, l, "LayerNormalization", "layernorm", 3, (const char *[]){xin, w->name, bias->name})))
            return st;
        if ((st = rs_onnx_builder_attr_int(x->b, "axis", -1, x->err))) return st;
        return rs_onnx_builder_attr_float(x->b, "epsilon", l->cfg.eps, x->err);
    }
    const int64_t last[1] = {-1};
    snprintf(eps, sizeof eps, "/%s/eps", l->name);
    if ((st = rs_onnx_builder_initializer(x->b, eps, 0, NULL, &l->cfg.eps, 0, x->err))) return st;
    if ((st = node(x, l, "ReduceMean", "ln_mean", 1, (const char *[]){xin}))) return st;
    if ((st = rs_onnx_builder_attr_ints(x->b, "axes", 1, last, x->err))) return st;
    snprintf(mean, sizeof mean, "%s", x->cur);
    if ((st = node(x, l, "Sub", "ln_center", 2, (const char *[]){xin, mean}))) return st;
    snprintf(d, sizeof d, "%s", x->cur);
    if ((st = node(x, l, "Mul", "ln_square", 2, (const char *[]){d, d}))) return st;
    snprintf(sq, sizeof sq, "%s", x->cur);
    if ((st = node(x, l, "ReduceMean", "ln_var", 1, (const char *[]){sq}))) return st;
    if ((st = rs_onnx_builder_attr_ints(x->b, "axes", 1, last, x->err))) return st;
    snprintf(var, sizeof var, "%s", x->cur);
    if ((st = node(x, l, "Add", "ln_var_eps", 2, (const char *[]){var, eps}))) return st;
    snprintf(ve, sizeof ve, "%s", x->cur);
    if ((st = node(x, l, "Sqrt", "ln_std", 1, (const char *[]){ve}))) return st;
    snprintf(sd, sizeof sd, "%s", x->cur);
    if ((st = node(x, l, "Div", "ln_norm", 2, (const char *[]){d, sd}))) return st;
    snprintf(nrm, sizeof nrm, "%s", x->cur);
    if ((st = node(x, l, "Mul", "ln_scale", 2, (const char *[]){nrm, w->name}))) return st;
    snprintf(sc, sizeof sc, "%s", x->cur);
    return node(x, l, "Add", "layernorm", 2, (const char *[]){sc, bias->name});
}

/* One layer: its nodes read the values of its sources, and x->val[l->index] becomes its output. */
static rs_status layer(exporter *x, const rs_layer *l)
{
    const char *in1[1] = {rs_onnx_ex_src(x, l, 0)};
    bool seq = l->in.ndim == 2; /* (T, C) per sample: a token model's activations */
    rs_status st;
    switch (l->cfg.kind) {
    case RS_LAYER_LINEAR:
        if (seq) return rs_onnx_ex_linear_seq(x, l);
        /* Linear keeps W as (out, in), PyTorch's layout: Gemm with transB=1 reads it as it is. */
        if ((st = weighted(x, l, "Gemm", "gemm"))) return st;
        return rs_onnx_builder_attr_int(x->b, "transB", 1, x->err);
    case RS_LAYER_CONV2D:
        if ((st = weighted(x, l, "Conv", "conv"))) return st;
        return window_attrs(x, l, true);
    case RS_LAYER_MAXPOOL2D:
        /* The engine's max ignores padded cells, as ONNX MaxPool does. */
        if ((st = node(x, l, "MaxPool", "maxpool", 1, in1))) return st;
        return window_attrs(x, l, false);
    case RS_LAYER_AVGPOOL2D:
        /* The engine divides by the full window, padding included: count_include_pad=1. */
        if ((st = node(x, l, "AveragePool", "avgpool", 1, in1))) return st;
        if ((st = window_attrs(x, l, false))) return st;
        return (l->cfg.ph || l->cfg.pw) ? rs_onnx_builder_attr_int(x->b, "count_include_pad", 1, x->err) : RS_OK;
    case RS_LAYER_FLATTEN:
        if ((st = node(x, l, "Flatten", "flatten", 1, in1))) return st;
        return rs_onnx_builder_attr_int(x->b, "axis", 1, x->err);
    case RS_LAYER_DROPOUT: return RS_OK; /* inference: identity, nothing to write */
    case RS_LAYER_LAYERNORM: return layernorm(x, l);
    case RS_LAYER_EMBED: return rs_onnx_ex_embed(x, l);
    case RS_LAYER_ATTN: return rs_onnx_ex_attn(x, l);
    case RS_LAYER_ADD:
        /* The residual: src[0] the block's last layer, src[1] the block's input. */
        if (l->nsrc != 2)
            return rs_err_set(x->err, RS_ERR_INTERNAL, "layer %s (add) has %d inputs, not 2", l->name, l->nsrc);
        return node(x, l, "Add", "add", 2, (const char *[]){rs_onnx_ex_src(x, l, 0), rs_onnx_ex_src(x, l, 1)});
    default:
        if (l->ops->onnx_chain) return rs_onnx_ex_chain(x, l); /* an activation ONNX has no operator for */
        if (rs_layer_unary(l) >= 0) return rs_onnx_ex_unary(x, l, rs_layer_unary(l)); /* an activation */
        return rs_err_set(x->err, RS_ERR_UNSUPPORTED, "layer %s (%s) has no ONNX mapping", l->name,
                          rs_layer_kind_name(l->cfg.kind));
    }
}

/* "batch" followed by a per-sample shape: float, or int64 token ids for a token model's input. */
static rs_status io(exporter *x, bool output, const char *name, int dtype, const rs_shape *s)
{
    int64_t dims[RS_ONNX_MAX_DIMS];
    const char *names[RS_ONNX_MAX_DIMS] = {"batch"};
    if (s->ndim + 1 > RS_ONNX_MAX_DIMS)
        return rs_err_set(x->err, RS_ERR_UNSUPPORTED, "export: %d dimensions is more than ONNX export handles",
                          s->ndim);
    dims[0] = -1;
    for (int i = 0; i < s->ndim; i++) dims[i + 1] = s->d[i];
    return output ? rs_onnx_builder_output(x->b, name, dtype, s->ndim + 1, dims, names, x->err)
                  : rs_onnx_builder_input(x->b, name, dtype, s->ndim + 1, dims, names, x->err);
}

static rs_status export_graph(exporter *x, const rs_onnx_export_opts *o)
{
    rs_model *m = x->m;
    int nl = rs_model_layer_count(m);
    bool tokens = rs_model_tokens(m);
    /* torch.onnx.export's convention for token ids: int64 (batch, T). */
    snprintf(x->input, sizeof x->input, "%s", tokens ? "tokens" : "input");
    rs_status st = io(x, false, x->input, tokens ? RS_ONNX_INT64 : RS_ONNX_FLOAT, rs_model_input_shape(m));
    if (st) return st;
    for (int i = 0; i < nl; i++) {
        const rs_layer *l = rs_model_layer(m, i);
        int before = rs_onnx_builder_node_count(x->b);
        if ((st = layer(x, l))) return st;
        /* A layer that wrote nothing (dropout) passes its input's value on. */
        const char *v = rs_onnx_builder_node_count(x->b) > before ? x->cur : rs_onnx_ex_src(x, l, 0);
        snprintf(x->val[i], sizeof x->val[i], "%s", v);
    }
    const rs_shape *out = &rs_model_layer(m, nl - 1)->out;
    const char *oname = o->softmax ? "probs" : "logits", *last = x->val[nl - 1];
    const char *outs[1] = {oname};
    if (o->softmax) {
        if (out->ndim != 1 && !(tokens && out->ndim == 2))
            return rs_err_set(x->err, RS_ERR_ARG,
                              "export softmax=on: the model ends in a %d-dimensional output, not one score per "
                              "class; flatten and add a linear layer first", out->ndim);
        if ((st = rs_onnx_builder_node(x->b, "Softmax", 1, (const char *[]){last}, 1, outs, "axis=-1", x->err)))
            return st;
        if ((st = rs_onnx_builder_name_last(x->b, "/Softmax", x->err))) return st;
    } else if (rs_onnx_builder_node_count(x->b) > 0 && !strcmp(last, x->cur)) {
        /* The last node made the last value and nothing reads it: it can be the output itself. */
        st = rs_onnx_builder_rename_output(x->b, rs_onnx_builder_node_count(x->b) - 1, 0, oname, x->err);
        if (st) return st;
    } else {
        /* Only dropout, or a trailing dropout of a value other nodes read: copy it out. */
        if ((st = rs_onnx_builder_node(x->b, "Identity", 1, (const char *[]){last}, 1, outs, NULL, x->err)))
            return st;
    }
    return io(x, true, oname, RS_ONNX_FLOAT, out);
}

rs_status rs_onnx_export_ex(rs_model *m, const char *path, const rs_onnx_export_opts *o, rs_err *err)
{
    int opset = o->opset ? o->opset : RS_ONNX_OPSET_DEFAULT;
    if (opset < RS_ONNX_OPSET_MIN || opset > RS_ONNX_OPSET_MAX)
        return rs_err_set(err, RS_ERR_ARG,
                          "export: opset %d is not supported; use one of 13 14 15 16 17 18 19 20 21 (default %d)",
                          opset, RS_ONNX_OPSET_DEFAULT);
    if (rs_model_layer_count(m) < 1) return rs_err_set(err, RS_ERR_ARG, "export: the model has no layers");
    if (!rs_model_params(m))
        return rs_err_set(err, RS_ERR_ARG, "export: model '%s' has no parameters allocated (build it first)",
                          rs_model_name(m));
    /* host floats: a copy when the model lives on a device (torch.onnx.export also reads them on the host) */
    float *params = rs_model_params_map(m, err);
    if (!params) return err ? err->code : RS_ERR_NOMEM;
    exporter x = {.m = m, .params = params, .opset = opset, .err = err};
    x.b = rs_onnx_builder_new(rs_model_name(m));
    x.val = calloc((size_t)rs_model_layer_count(m), sizeof *x.val);
    x.added = calloc((size_t)rs_model_tensor_count(m) + 1, sizeof *x.added);
    rs_status st = RS_OK;
    if (!x.b || !x.val || !x.added) st = rs_err_set(err, RS_ERR_NOMEM, "export: out of memory");
    if (!st && o->producer_version) st = rs_onnx_builder_set_producer(x.b, "ringside", o->producer_version, err);
    if (!st) st = export_graph(&x, o);
    if (!st) st = rs_onnx_builder_save(x.b, path, opset, err);
    rs_onnx_builder_free(x.b);
    rs_model_params_unmap(m, params, false, NULL);
    free(x.val);
    free(x.added);
    return st;
}

rs_status rs_onnx_export(rs_model *m, const char *path, int opset, rs_err *err)
{
    rs_onnx_export_opts o = {.opset = opset};
    return rs_onnx_export_ex(m, path, &o, err);
}
