/* rs_onnx_to_model (see import.h): recognises an imported graph that is a plain sequence of layers the
 * engine has (including the exporters' expansions of GELU and LayerNorm), writes it as a model spec,
 * and copies the graph's weights into the parsed rs_model. */
#include "import.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/spec.h"

typedef struct seq_layer {
    rs_layer_cfg cfg;
    const float *w, *b;  /* graph constants (w NULL: no parameters) */
    bool w_transposed;   /* MatMul's (K, N) weight: the engine's linear wants (N, K) */
    int wk, wn;          /* (K, N) of a transposed weight */
} seq_layer;

static bool const_scalar(const rs_onnx_graph *g, int v, float *out)
{
    if (v < 0 || !g->values[v].data || rs_onnx_shape_numel(&g->values[v].shape, 1) != 1) return false;
    *out = g->values[v].data[0];
    return true;
}

/* Does node k, with input cur, compute a bias add over the last dim (constant (N) or (1, N))? */
static const float *bias_add(const rs_onnx_graph *g, int k, int cur, int64_t N)
{
    if (k >= g->nnodes) return NULL;
    const rs_onnx_node *n = &g->nodes[k];
    if (n->op != RS_ONNX_OP_BINARY || n->a.sub != RS_ONNX_ADD) return NULL;
    int other = n->in[0] == cur ? n->in[1] : n->in[1] == cur ? n->in[0] : -1;
    if (other < 0 || !g->values[other].data) return NULL;
    const rs_onnx_shape *s = &g->values[other].shape;
    if (rs_onnx_shape_numel(s, 1) != N || s->d[s->rank - 1] != N) return NULL;
    return g->values[other].data;
}

/* The exporters' exact GELU: x * 0.5 * (1 + erf(x / sqrt 2)) in five nodes from k (either order of the
 * two products, division or multiplication by 1/sqrt 2). Returns the nodes used, 0 when no match. */
static int gelu_expansion(const rs_onnx_graph *g, int k, int x)
{
    if (k + 4 >= g->nnodes) return 0;
    const rs_onnx_node *d = &g->nodes[k], *e = &g->nodes[k + 1], *a = &g->nodes[k + 2], *m1 = &g->nodes[k + 3],
                       *m2 = &g->nodes[k + 4];
    float c;
    bool scale_ok = d->op == RS_ONNX_OP_BINARY && d->in[0] == x && const_scalar(g, d->in[1], &c) &&
                    ((d->a.sub == RS_ONNX_DIV && fabsf(c - 1.41421356f) < 1e-5f) ||
                     (d->a.sub == RS_ONNX_MUL && fabsf(c - 0.70710678f) < 1e-5f));
    if (!scale_ok || e->op != RS_ONNX_OP_UNARY || e->a.sub != RS_ONNX_ERF || e->in[0] != d->out) return 0;
    if (a->op != RS_ONNX_OP_BINARY || a->a.sub != RS_ONNX_ADD || a->in[0] != e->out || !const_scalar(g, a->in[1], &c) ||
        c != 1.0f)
        return 0;
    if (m1->op != RS_ONNX_OP_BINARY || m1->a.sub != RS_ONNX_MUL || m2->op != RS_ONNX_OP_BINARY || m2->a.sub != RS_ONNX_MUL)
        return 0;
    /* (x * (1 + erf)) * 0.5 or (x * 0.5) * (1 + erf) is rarer; accept the first, as both exporters write it */
    bool m1_ok = (m1->in[0] == x && m1->in[1] == a->out) || (m1->in[1] == x && m1->in[0] == a->out);
    bool m2_ok = m2->in[0] == m1->out && const_scalar(g, m2->in[1], &c) && c == 0.5f;
    return m1_ok && m2_ok ? 5 : 0;
}

/* LayerNorm as opset < 17 exporters expand it: ReduceMean, Sub, Pow 2 (or Mul by itself), ReduceMean, Add eps, Sqrt, Div,
 * Mul gamma, Add beta, over the last dim. Returns the nodes used (9), 0 when no match; eps and the
 * parameters come back through the pointers. */
static int layernorm_expansion(const rs_onnx_graph *g, int k, int x, float *eps, const float **gamma, const float **beta)
{
    if (k + 8 >= g->nnodes) return 0;
    const rs_onnx_node *n = &g->nodes[k];
    int r = g->values[x].shape.rank;
    int64_t N = g->values[x].shape.d[r - 1];
    float c;
#define IS(j, o, s) (n[j].op == (o) && (o != RS_ONNX_OP_BINARY || n[j].a.sub == (s)))
    if (!IS(0, RS_ONNX_OP_REDUCEMEAN, 0) || n[0].in[0] != x || n[0].a.axes_mask != 1u << (r - 1) || !n[0].a.keepdims)
        return 0;
    if (!IS(1, RS_ONNX_OP_BINARY, RS_ONNX_SUB) || n[1].in[0] != x || n[1].in[1] != n[0].out) return 0;
    bool pow2 = IS(2, RS_ONNX_OP_BINARY, RS_ONNX_POW) && const_scalar(g, n[2].in[1], &c) && c == 2.0f;
    bool square = IS(2, RS_ONNX_OP_BINARY, RS_ONNX_MUL) && n[2].in[1] == n[1].out; /* ringside writes x*x */
    if (!(pow2 || square) || n[2].in[0] != n[1].out) return 0;
    if (!IS(3, RS_ONNX_OP_REDUCEMEAN, 0) || n[3].in[0] != n[2].out || n[3].a.axes_mask != n[0].a.axes_mask) return 0;
    if (!IS(4, RS_ONNX_OP_BINARY, RS_ONNX_ADD) || n[4].in[0] != n[3].out || !const_scalar(g, n[4].in[1], eps) || !(*eps > 0))
        return 0;
    if (n[5].op != RS_ONNX_OP_UNARY || n[5].a.sub != RS_ONNX_SQRT || n[5].in[0] != n[4].out) return 0;
    if (!IS(6, RS_ONNX_OP_BINARY, RS_ONNX_DIV) || n[6].in[0] != n[1].out || n[6].in[1] != n[5].out) return 0;
    if (!IS(7, RS_ONNX_OP_BINARY, RS_ONNX_MUL) || n[7].in[0] != n[6].out) return 0;
    if (!IS(8, RS_ONNX_OP_BINARY, RS_ONNX_ADD) || n[8].in[0] != n[7].out) return 0;
#undef IS
    const rs_onnx_value *gv = &g->values[n[7].in[1]], *bv = &g->values[n[8].in[1]];
    if (!gv->data || !bv->data || rs_onnx_shape_numel(&gv->shape, 1) != N || rs_onnx_shape_numel(&bv->shape, 1) != N)
        return 0;
    *gamma = gv->data;
    *beta = bv->data;
    return 9;
}

static rs_status seq_fail(rs_err *err, const rs_onnx_node *n, const char *why)
{
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: node '%s' (%s) %s; the graph still runs with "
                      "predict/eval, it just cannot be trained as an engine model", n->name, n->op_type, why);
}

rs_status rs_onnx_to_model(const rs_onnx_graph *g, const char *name, rs_model **out, rs_err *err)
{
    *out = NULL;
    int cap = g->nnodes + 1, nl = 0, cur = g->input;
    seq_layer *L = calloc((size_t)cap, sizeof *L);
    if (!L) return rs_err_set(err, RS_ERR_NOMEM, "onnx to model: out of memory");
    rs_status st = RS_OK;
    for (int k = 0; k < g->nnodes && !st; k++) {
        const rs_onnx_node *n = &g->nodes[k];
        const rs_onnx_attrs *a = &n->a;
        if (n->in[0] != cur) {
            st = seq_fail(err, n, "does not take the previous layer's output: the graph is not a plain sequence");
            break;
        }
        const rs_onnx_shape *xs = &g->values[cur].shape, *os = &g->values[n->out].shape;
        seq_layer *l = &L[nl];
        switch (n->op) {
        case RS_ONNX_OP_GEMM: {
            const rs_onnx_value *w = &g->values[n->in[1]];
            if (a->ta || a->alpha != 1.0f || (n->nin > 2 && a->beta != 1.0f) || !w->data ||
                (n->nin > 2 && (!g->values[n->in[2]].data || g->values[n->in[2]].shape.rank != 1))) {
                st = seq_fail(err, n, "is not a linear layer (needs constant weights, a 1-d bias, alpha = beta = 1)");
                break;
            }
            l->cfg = rs_layer_cfg_default(RS_LAYER_LINEAR);
            l->cfg.out = (int)os->d[1];
            l->cfg.bias = n->nin > 2;
            l->w = w->data;
            l->b = n->nin > 2 ? g->values[n->in[2]].data : NULL;
            l->w_transposed = !a->tb;
            l->wk = (int)xs->d[1];
            l->wn = (int)os->d[1];
            nl++;
            break;
        }
        case RS_ONNX_OP_MATMUL: {
            const rs_onnx_value *w = &g->values[n->in[1]];
            if (!w->data || w->shape.rank != 2 || xs->rank != 2) {
                st = seq_fail(err, n, "is not a linear layer (needs (batch, K) x constant (K, N))");
                break;
            }
            int64_t N = w->shape.d[1];
            l->cfg = rs_layer_cfg_default(RS_LAYER_LINEAR);
            l->cfg.out = (int)N;
            l->w = w->data;
            l->w_transposed = true;
            l->wk = (int)w->shape.d[0];
            l->wn = (int)N;
            l->b = bias_add(g, k + 1, n->out, N);
            l->cfg.bias = l->b != NULL;
            if (l->b) n = &g->nodes[++k];
            nl++;
            break;
        }
        case RS_ONNX_OP_CONV:
            if (a->group != 1 || a->pt != a->pb || a->pl != a->pr || xs->rank != 4 || !g->values[n->in[1]].data ||
                (n->nin > 2 && !g->values[n->in[2]].data)) {
                st = seq_fail(err, n, "is not an engine conv (needs group 1, symmetric pads, 2-d, constant weights)");
                break;
            }
            l->cfg = rs_layer_cfg_default(RS_LAYER_CONV2D);
            l->cfg.out = (int)os->d[1];
            l->cfg.kh = a->kh, l->cfg.kw = a->kw, l->cfg.sh = a->sh, l->cfg.sw = a->sw;
            l->cfg.ph = a->pt, l->cfg.pw = a->pl;
            l->cfg.bias = n->nin > 2;
            l->w = g->values[n->in[1]].data;
            l->b = n->nin > 2 ? g->values[n->in[2]].data : NULL;
            nl++;
            break;
        case RS_ONNX_OP_MAXPOOL:
        case RS_ONNX_OP_AVGPOOL: {
            bool max = n->op == RS_ONNX_OP_MAXPOOL;
            if (a->pt != a->pb || a->pl != a->pr || a->ceil_mode || xs->rank != 4 ||
                (!max && !a->count_include_pad && (a->pt || a->pl))) {
                st = seq_fail(err, n, "is not an engine pool (needs symmetric pads, floor mode, and for averages "
                              "count_include_pad=1 when padded)");
                break;
            }
            l->cfg = rs_layer_cfg_default(max ? RS_LAYER_MAXPOOL2D : RS_LAYER_AVGPOOL2D);
            l->cfg.kh = a->kh, l->cfg.kw = a->kw, l->cfg.sh = a->sh, l->cfg.sw = a->sw;
            l->cfg.ph = a->pt, l->cfg.pw = a->pl;
            nl++;
            break;
        }
        case RS_ONNX_OP_UNARY: {
            int used = a->sub == RS_ONNX_RELU || a->sub == RS_ONNX_TANH || a->sub == RS_ONNX_GELU;
            if (!used) {
                st = seq_fail(err, n, "is an activation the engine has no layer for");
                break;
            }
            l->cfg = rs_layer_cfg_default(a->sub == RS_ONNX_RELU ? RS_LAYER_RELU
                                          : a->sub == RS_ONNX_TANH ? RS_LAYER_TANH : RS_LAYER_GELU);
            nl++;
            break;
        }
        case RS_ONNX_OP_BINARY: {
            int used = gelu_expansion(g, k, cur);
            if (!used) {
                st = seq_fail(err, n, "is arithmetic that is not part of a linear layer or a GELU");
                break;
            }
            l->cfg = rs_layer_cfg_default(RS_LAYER_GELU);
            nl++;
            k += used - 1;
            n = &g->nodes[k];
            break;
        }
        case RS_ONNX_OP_RESHAPE:
            /* (N, ...) -> (N, rest): the engine's flatten; a reshape that keeps the shape is nothing */
            if (os->rank == 2 && xs->d[0] == os->d[0] && xs->rank > 2) {
                l->cfg = rs_layer_cfg_default(RS_LAYER_FLATTEN);
                nl++;
            } else if (!(os->rank == xs->rank && !memcmp(os->d, xs->d, sizeof(int64_t) * (size_t)os->rank))) {
                st = seq_fail(err, n, "reshapes other than flattening to (batch, features)");
            }
            break;
        case RS_ONNX_OP_REDUCEMEAN: {
            float eps = 0;
            int used = layernorm_expansion(g, k, cur, &eps, &l->w, &l->b);
            if (!used) {
                st = seq_fail(err, n, "is a reduction that is not part of a LayerNorm");
                break;
            }
            l->cfg = rs_layer_cfg_default(RS_LAYER_LAYERNORM);
            l->cfg.eps = eps;
            nl++;
            k += used - 1;
            n = &g->nodes[k];
            break;
        }
        case RS_ONNX_OP_LAYERNORM:
            if (a->axis != xs->rank - 1 || !g->values[n->in[1]].data || (n->nin > 2 && !g->values[n->in[2]].data)) {
                st = seq_fail(err, n, "normalises over more than the last dimension");
                break;
            }
            l->cfg = rs_layer_cfg_default(RS_LAYER_LAYERNORM);
            l->cfg.eps = a->eps > 0 ? a->eps : 1e-5f;
            l->w = g->values[n->in[1]].data;
            l->b = n->nin > 2 ? g->values[n->in[2]].data : NULL;
            nl++;
            break;
        default: st = seq_fail(err, n, "has no engine layer"); break;
        }
        cur = n->out;
    }
    if (!st && cur != g->output)
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: the graph's output is not the end of the layer chain");
    if (!st && nl == 0) st = rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: no layers");
    if (!st && g->values[g->output].shape.rank != 2)
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: the output must be (batch, classes)");
    if (st) {
        free(L);
        return st;
    }
    /* the spec: "seq in=CxHxW layer layer ..." */
    size_t cap_s = 64 + (size_t)nl * 64, len = 0;
    char *spec = malloc(cap_s);
    if (!spec) {
        free(L);
        return rs_err_set(err, RS_ERR_NOMEM, "onnx to model: out of memory");
    }
    const rs_onnx_shape *is = &g->values[g->input].shape;
    len += (size_t)snprintf(spec + len, cap_s - len, "seq in=");
    for (int i = 1; i < is->rank; i++) len += (size_t)snprintf(spec + len, cap_s - len, "%s%lld", i > 1 ? "x" : "", (long long)is->d[i]);
    for (int i = 0; i < nl; i++) {
        char w[64];
        len += (size_t)snprintf(spec + len, cap_s - len, " %s", rs_layer_cfg_str(&L[i].cfg, w, sizeof w));
    }
    rs_model *m = NULL;
    st = rs_model_parse(spec, name ? name : "onnx", rs_device_cpu(), NULL, 0, &m, NULL, err);
    if (st) {
        rs_err_prefix(err, "onnx to model: spec '%s'", spec);
        free(spec);
        free(L);
        return st;
    }
    /* copy the weights in, layer by layer, checking every size against the engine's layout */
    float *P = rs_model_params(m);
    if (rs_model_layer_count(m) != nl) st = rs_err_set(err, RS_ERR_INTERNAL, "onnx to model: layer count differs");
    for (int i = 0; i < nl && !st; i++) {
        rs_layer *ly = rs_model_layer(m, i);
        const float *src[2] = {L[i].w, L[i].b};
        for (int j = 0; j < ly->np && !st; j++) {
            const rs_param_slot *ps = &ly->p[j];
            if (!src[j]) {
                memset(P + ps->offset, 0, sizeof(float) * ps->numel); /* layernorm without bias */
                continue;
            }
            if (j == 0 && L[i].w_transposed) {
                if ((size_t)L[i].wk * (size_t)L[i].wn != ps->numel) {
                    st = rs_err_set(err, RS_ERR_SHAPE, "onnx to model: layer %s weight size differs", ly->name);
                    break;
                }
                for (int r = 0; r < L[i].wn; r++)
                    for (int q = 0; q < L[i].wk; q++) P[ps->offset + (size_t)r * L[i].wk + q] = src[0][(size_t)q * L[i].wn + r];
            } else {
                memcpy(P + ps->offset, src[j], sizeof(float) * ps->numel);
            }
        }
    }
    /* the engine's shapes must agree with the graph's (same pooling and padding rules) */
    if (!st) {
        const rs_shape *ms = &rs_model_layer(m, nl - 1)->out;
        if (rs_shape_numel(ms) != (int64_t)rs_onnx_graph_output_numel(g))
            st = rs_err_set(err, RS_ERR_SHAPE, "onnx to model: the engine's output size %lld differs from the graph's %zu",
                            (long long)rs_shape_numel(ms), rs_onnx_graph_output_numel(g));
    }
    free(spec);
    free(L);
    if (st) {
        rs_model_free(m);
        return st;
    }
    rs_model_set_training(m, false);
    *out = m;
    return RS_OK;
}
