/* Export of the transformer's layers, whose activations are (batch, T, C): the token and position
 * embedding (Gather + Add), linear over the last dimension (MatMul + Add), causal multi-head
 * attention spelled out in standard operators, and GPT-2's gelu(tanh). export.c's walk calls these
 * with the same state as every other layer (export_internal.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/export_internal.h"

typedef rs_onnx_exporter exporter;

static rs_status node(exporter *x, const rs_layer *l, const char *op, const char *tag, int n_in,
                      const char *const *in)
{
    return rs_onnx_ex_node(x, l, op, tag, n_in, in);
}

/* A node of one input whose output x->cur becomes the input of the next. */
static rs_status chain1(exporter *x, const rs_layer *l, const char *op, const char *tag, char *v)
{
    rs_status st = node(x, l, op, tag, 1, (const char *[]){v});
    if (!st) snprintf(v, RS_ONNX_NAME_LEN, "%s", x->cur);
    return st;
}

static rs_status chain2(exporter *x, const rs_layer *l, const char *op, const char *tag, char *v, const char *b)
{
    rs_status st = node(x, l, op, tag, 2, (const char *[]){v, b});
    if (!st) snprintf(v, RS_ONNX_NAME_LEN, "%s", x->cur);
    return st;
}

static rs_status transpose(exporter *x, const rs_layer *l, const char *tag, char *v, const int64_t *perm, int n)
{
    rs_status st = chain1(x, l, "Transpose", tag, v);
    return st ? st : rs_onnx_builder_attr_ints(x->b, "perm", n, perm, x->err);
}

/* out (B, T, C) = wte[tokens] + wpe: Gather picks the token rows, Add broadcasts the (T, C) positions
 * over the batch. */
rs_status rs_onnx_ex_embed(exporter *x, const rs_layer *l)
{
    const rs_param_info *wte = rs_onnx_ex_param(x, l, "wte"), *wpe = rs_onnx_ex_param(x, l, "wpe");
    if (!wte || !wpe) return rs_err_set(x->err, RS_ERR_INTERNAL, "layer %s (embed): no wte/wpe tensor", l->name);
    if (l->nsrc != 1 || l->src[0] != -1)
        return rs_err_set(x->err, RS_ERR_UNSUPPORTED, "layer %s (embed) must read the model's tokens", l->name);
    rs_status st = rs_onnx_ex_add_param(x, wte);
    if (!st) st = rs_onnx_ex_add_param(x, wpe);
    if (!st) st = node(x, l, "Gather", "gather", 2, (const char *[]){wte->name, x->input});
    if (!st) st = rs_onnx_builder_attr_int(x->b, "axis", 0, x->err);
    char v[RS_ONNX_NAME_LEN];
    snprintf(v, sizeof v, "%s", x->cur);
    return st ? st : node(x, l, "Add", "embed", 2, (const char *[]){v, wpe->name});
}

/* Whether a later layer ties its weight to p (then p must stay an initializer under its own name). */
static bool read_by_tie(exporter *x, const rs_layer *l, const rs_param_info *p)
{
    for (int i = l->index + 1; i < rs_model_layer_count(x->m); i++)
        if (!strcmp(rs_model_layer(x->m, i)->cfg.tie, p->name)) return true;
    return false;
}

/* out (B, T, O) = in (B, T, I) W^T + b. Gemm is 2-D only, so MatMul reads W^T (I, O): an initializer
 * "<layer>.weight_T" holding the transposed weight, as torch.onnx.export writes it; a weight shared
 * with another layer (the tied head reads the token embedding) stays one initializer under its own
 * name, transposed by a Transpose node that ONNX Runtime folds when it loads the model. */
rs_status rs_onnx_ex_linear_seq(exporter *x, const rs_layer *l)
{
    const rs_param_info *w = rs_onnx_ex_param(x, l, "weight"), *bias = rs_onnx_ex_param(x, l, "bias");
    if (!w) return rs_err_set(x->err, RS_ERR_INTERNAL, "layer %s (linear): no weight tensor", l->name);
    const int64_t O = l->p[0].shape.d[0], I = l->p[0].shape.d[1];
    char wt[RS_ONNX_NAME_LEN], v[RS_ONNX_NAME_LEN];
    rs_status st;
    if (l->p[0].tied || read_by_tie(x, l, w)) {
        snprintf(wt, sizeof wt, "%s", w->name);
        if ((st = rs_onnx_ex_add_param(x, w))) return st;
        if ((st = transpose(x, l, "weight_T", wt, (const int64_t[]){1, 0}, 2))) return st;
    } else {
        float *t = malloc((size_t)(O * I) * sizeof *t); /* (I, O) */
        if (!t) return rs_err_set(x->err, RS_ERR_NOMEM, "export: out of memory for layer %s", l->name);
        const float *W = x->params + w->offset; /* (O, I) */
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < I; i++) t[i * O + o] = W[o * I + i];
        snprintf(wt, sizeof wt, "%s_T", w->name);
        st = rs_onnx_builder_initializer(x->b, wt, 2, (const int64_t[]){I, O}, t, 0, x->err);
        free(t);
        if (st) return st;
    }
    snprintf(v, sizeof v, "%s", rs_onnx_ex_src(x, l, 0));
    if ((st = chain2(x, l, "MatMul", bias ? "matmul" : "linear", v, wt))) return st;
    if (!bias) return RS_OK;
    if ((st = rs_onnx_ex_add_param(x, bias))) return st;
    return node(x, l, "Add", "linear", 2, (const char *[]){v, bias->name});
}

/* The (T, T) additive causal mask, shared by every attention layer: 0 where a query may look (keys
 * at or before it), -inf after, so Softmax gives those keys exactly 0 as the engine's masked row. */
static rs_status causal_mask(exporter *x, int64_t T, const char **name)
{
    *name = "/attn/causal_mask";
    if (x->mask_T == T) return RS_OK;
    if (x->mask_T) /* every attention layer of a model sees the same T; another one would need its own */
        return rs_err_set(x->err, RS_ERR_UNSUPPORTED, "export: attention over %lld and %d positions in one model",
                          (long long)T, x->mask_T);
    float *mk = malloc((size_t)(T * T) * sizeof *mk);
    if (!mk) return rs_err_set(x->err, RS_ERR_NOMEM, "export: out of memory for the causal mask");
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++) mk[i * T + j] = j <= i ? 0.0f : -INFINITY;
    rs_status st = rs_onnx_builder_initializer(x->b, *name, 2, (const int64_t[]){T, T}, mk, 0, x->err);
    free(mk);
    if (!st) x->mask_T = (int)T;
    return st;
}

/* qkv (B, T, 3C) -> (B, T, C), as the engine's attn_fwd: q, k, v are the three column blocks; head h
 * reads columns h*hs..(h+1)*hs of each; P = softmax(q k^T / sqrt(hs) + mask); out = P v, heads side
 * by side. In operators: Split, Reshape (B, T, H, hs), Transpose to (B, H, T, hs) (keys straight to
 * (B, H, hs, T)), MatMul, Mul by the scale, Add the mask, Softmax, MatMul, Transpose, Reshape. */
rs_status rs_onnx_ex_attn(exporter *x, const rs_layer *l)
{
    if (l->in.ndim != 2 || l->in.d[1] % 3 || l->cfg.heads < 1 || (l->in.d[1] / 3) % l->cfg.heads)
        return rs_err_set(x->err, RS_ERR_UNSUPPORTED, "layer %s (attn): input is not (T, 3C) with C divisible "
                          "by %d heads", l->name, l->cfg.heads);
    const int64_t T = l->in.d[0], C = l->in.d[1] / 3, H = l->cfg.heads, hs = C / H;
    char q[RS_ONNX_NAME_LEN], k[RS_ONNX_NAME_LEN], v[RS_ONNX_NAME_LEN], nm[RS_ONNX_NAME_LEN];
    char heads_shape[RS_ONNX_NAME_LEN], merge_shape[RS_ONNX_NAME_LEN], scale[RS_ONNX_NAME_LEN];
    snprintf(q, sizeof q, "%s.q", l->name);
    snprintf(k, sizeof k, "%s.k", l->name);
    snprintf(v, sizeof v, "%s.v", l->name);
    snprintf(nm, sizeof nm, "/%s/split", l->name);
    snprintf(heads_shape, sizeof heads_shape, "/%s/heads_shape", l->name);
    snprintf(merge_shape, sizeof merge_shape, "/%s/merge_shape", l->name);
    snprintf(scale, sizeof scale, "/%s/scale", l->name);
    const char *mask;
    const float sc = 1.0f / sqrtf((float)hs); /* the engine's scale, to the bit */
    /* 0 in a Reshape shape copies the input's dimension: the batch stays symbolic. */
    rs_status st = rs_onnx_builder_initializer_i64(x->b, heads_shape, 1, (const int64_t[]){4},
                                                   (const int64_t[]){0, T, H, hs}, x->err);
    if (!st) st = rs_onnx_builder_initializer_i64(x->b, merge_shape, 1, (const int64_t[]){3},
                                                  (const int64_t[]){0, T, C}, x->err);
    if (!st) st = rs_onnx_builder_initializer(x->b, scale, 0, NULL, &sc, 0, x->err);
    if (!st) st = causal_mask(x, T, &mask);
    if (st) return st;
    /* Three equal parts of the last axis: implied by three outputs before opset 18, num_outputs after. */
    const char *in[1] = {rs_onnx_ex_src(x, l, 0)}, *outs[3] = {q, k, v};
    if ((st = rs_onnx_builder_node(x->b, "Split", 1, in, 3, outs, NULL, x->err))) return st;
    if ((st = rs_onnx_builder_name_last(x->b, nm, x->err))) return st;
    if ((st = rs_onnx_builder_attr_int(x->b, "axis", -1, x->err))) return st;
    if (x->opset >= 18 && (st = rs_onnx_builder_attr_int(x->b, "num_outputs", 3, x->err))) return st;
    const int64_t bhts[4] = {0, 2, 1, 3}, bhst[4] = {0, 2, 3, 1};
    if ((st = chain2(x, l, "Reshape", "q_heads", q, heads_shape))) return st;
    if ((st = transpose(x, l, "q_t", q, bhts, 4))) return st;
    if ((st = chain2(x, l, "Reshape", "k_heads", k, heads_shape))) return st;
    if ((st = transpose(x, l, "k_t", k, bhst, 4))) return st;
    if ((st = chain2(x, l, "Reshape", "v_heads", v, heads_shape))) return st;
    if ((st = transpose(x, l, "v_t", v, bhts, 4))) return st;
    /* q becomes the scores (B, H, T, T), then the probabilities, then the heads' outputs. */
    if ((st = chain2(x, l, "MatMul", "scores", q, k))) return st;
    if ((st = chain2(x, l, "Mul", "scaled", q, scale))) return st;
    if ((st = chain2(x, l, "Add", "masked", q, mask))) return st;
    if ((st = chain1(x, l, "Softmax", "probs", q))) return st;
    if ((st = rs_onnx_builder_attr_int(x->b, "axis", -1, x->err))) return st;
    if ((st = chain2(x, l, "MatMul", "heads", q, v))) return st;
    if ((st = transpose(x, l, "merge_t", q, bhts, 4))) return st;
    return node(x, l, "Reshape", "attn", 2, (const char *[]){q, merge_shape});
}

/* GPT-2's GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): Gelu(approximate="tanh") from
 * opset 20, before it the formula itself (what torch.onnx.export writes for approximate='tanh'). */
rs_status rs_onnx_ex_gelu_tanh(exporter *x, const rs_layer *l)
{
    char xin[RS_ONNX_NAME_LEN], v[RS_ONNX_NAME_LEN];
    snprintf(xin, sizeof xin, "%s", rs_onnx_ex_src(x, l, 0));
    rs_status st;
    if (x->opset >= 20) {
        if ((st = node(x, l, "Gelu", "gelu", 1, (const char *[]){xin}))) return st;
        return rs_onnx_builder_attr_string(x->b, "approximate", "tanh", x->err);
    }
    st = rs_onnx_ex_const(x, "/gelu_tanh/k", 0.7978845608028654f); /* sqrt(2/pi) */
    if (!st) st = rs_onnx_ex_const(x, "/gelu_tanh/a", 0.044715f);
    if (!st) st = rs_onnx_ex_const(x, "/gelu/one", 1.0f);
    if (!st) st = rs_onnx_ex_const(x, "/gelu/half", 0.5f);
    if (st) return st;
    snprintf(v, sizeof v, "%s", xin);
    if ((st = chain2(x, l, "Mul", "gelu_x2", v, xin))) return st;
    if ((st = chain2(x, l, "Mul", "gelu_x3", v, xin))) return st;
    if ((st = chain2(x, l, "Mul", "gelu_ax3", v, "/gelu_tanh/a"))) return st;
    if ((st = chain2(x, l, "Add", "gelu_inner", v, xin))) return st;
    if ((st = chain2(x, l, "Mul", "gelu_u", v, "/gelu_tanh/k"))) return st;
    if ((st = chain1(x, l, "Tanh", "gelu_tanh", v))) return st;
    if ((st = chain2(x, l, "Add", "gelu_add", v, "/gelu/one"))) return st;
    if ((st = chain2(x, l, "Mul", "gelu_mul", v, xin))) return st;
    return node(x, l, "Mul", "gelu", 2, (const char *[]){v, "/gelu/half"});
}
