/* An imported graph as an engine model (see import.h). One walk over the graph's nodes plans a model
 * node for each: an engine layer where one computes the same thing (Gemm/MatMul -> linear, Conv,
 * pools, Relu/Tanh/Gelu, LayerNormalization, the exporters' expansions of GELU and LayerNorm, an Add
 * of two equal values -> add), a generic op (engine/nn/tensor_op.h) for the rest. rs_onnx_to_model
 * takes the plan only when it is a chain of layers and builds it through a spec, so the model trains,
 * saves and exports like any other; rs_onnx_to_inference_model builds any plan as an inference-only
 * model. Either way the graph's constants are copied into the model's one parameter buffer, each once:
 * a constant that several nodes read in the same layout is one range that they all read (a tied
 * weight, a mask every attention layer uses), not a copy per node. The transformer's subgraphs (the
 * token embedding, the exporter's attention, the tanh GELU) are matched in to_model_seq.c. */
#include "to_model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/kernels.h"
#include "engine/nn/spec.h"
#include "onnx/ops.h"

typedef rs_onnx_pnode plan_node;
typedef rs_onnx_conv conv;

static const float *cval(const conv *c, int v) { return rs_onnx_cval(c, v); }
static const rs_dims *vshape(const conv *c, int v) { return rs_onnx_vshape(c, v); }
static bool const_scalar(const conv *c, int v, float *out) { return rs_onnx_const_scalar(c, v, out); }

/* Does node k, with input cur, add a bias over the last dim (a constant of N values, last dim N) to a
 * value nothing else reads? */
static const float *bias_add(const conv *c, int k, int cur, int64_t N)
{
    const rs_onnx_graph *g = c->g;
    if (k >= g->nnodes || c->uses[cur] != 1) return NULL;
    const rs_onnx_node *n = &g->nodes[k];
    if (n->op != RS_OP_BINARY || n->a.sub != RS_BINARY_ADD) return NULL;
    int other = n->in[0] == cur ? n->in[1] : n->in[1] == cur ? n->in[0] : -1;
    if (other < 0 || !cval(c, other)) return NULL;
    const rs_dims *s = vshape(c, other);
    if (rs_dims_numel(s, 1) != N || s->d[s->rank - 1] != N) return NULL;
    return cval(c, other);
}

/* The exporters' exact GELU: x * 0.5 * (1 + erf(x / sqrt 2)) in five nodes from k (division or
 * multiplication by 1/sqrt 2), its intermediate values read only inside it. Returns the nodes used, 0
 * when no match. */
static int gelu_expansion(const conv *c, int k, int x)
{
    const rs_onnx_graph *g = c->g;
    if (k + 4 >= g->nnodes) return 0;
    const rs_onnx_node *d = &g->nodes[k], *e = &g->nodes[k + 1], *a = &g->nodes[k + 2], *m1 = &g->nodes[k + 3],
                       *m2 = &g->nodes[k + 4];
    float v;
    bool scale_ok = d->op == RS_OP_BINARY && d->in[0] == x && const_scalar(c, d->in[1], &v) &&
                    ((d->a.sub == RS_BINARY_DIV && fabsf(v - 1.41421356f) < 1e-5f) ||
                     (d->a.sub == RS_BINARY_MUL && fabsf(v - 0.70710678f) < 1e-5f));
    if (!scale_ok || e->op != RS_OP_UNARY || e->a.sub != RS_UNARY_ERF || e->in[0] != d->out) return 0;
    if (a->op != RS_OP_BINARY || a->a.sub != RS_BINARY_ADD || a->in[0] != e->out || !const_scalar(c, a->in[1], &v) ||
        v != 1.0f)
        return 0;
    if (m1->op != RS_OP_BINARY || m1->a.sub != RS_BINARY_MUL || m2->op != RS_OP_BINARY || m2->a.sub != RS_BINARY_MUL)
        return 0;
    /* (x * (1 + erf)) * 0.5 or (x * 0.5) * (1 + erf) is rarer; accept the first, as both exporters write it */
    bool m1_ok = (m1->in[0] == x && m1->in[1] == a->out) || (m1->in[1] == x && m1->in[0] == a->out);
    bool m2_ok = m2->in[0] == m1->out && const_scalar(c, m2->in[1], &v) && v == 0.5f;
    bool private = c->uses[d->out] == 1 && c->uses[e->out] == 1 && c->uses[a->out] == 1 && c->uses[m1->out] == 1;
    return m1_ok && m2_ok && private ? 5 : 0;
}

/* Node k onward as the onnx_chain of a layer kind (an activation ONNX has no operator for: SiLU is
 * Sigmoid(x), then Mul of x by it): each node the chain's operator, reading the previous one's value
 * (and x where the chain says, in either order), each value but the last read by the next alone.
 * Returns the nodes it takes (0: no kind's chain) with the kind's configuration in *cfg. */
static int chain_at(const conv *c, int k, int x, rs_layer_cfg *cfg)
{
    const rs_onnx_graph *g = c->g;
    for (int kind = 0; kind < RS_LAYER_KIND_COUNT; kind++) {
        const rs_layer_onnx_node *ch = rs_layer_ops_for((rs_layer_kind)kind)->onnx_chain;
        int j = 0, prev = x;
        for (; ch && ch[j].op && k + j < g->nnodes; j++) {
            const rs_onnx_node *n = &g->nodes[k + j];
            const rs_onnx_op_def *d = rs_onnx_op_find(ch[j].op);
            bool reads = ch[j].times_input ? n->nin == 2 && ((n->in[0] == x && n->in[1] == prev) ||
                                                             (n->in[1] == x && n->in[0] == prev))
                                           : n->nin == 1 && n->in[0] == prev;
            if (!d || n->op != d->op || n->a.sub != d->sub || !reads || (j > 0 && c->uses[prev] != 1)) break;
            prev = n->out;
        }
        if (ch && j > 0 && !ch[j].op) {
            *cfg = rs_layer_cfg_default((rs_layer_kind)kind);
            return j;
        }
    }
    return 0;
}


/* LayerNorm as opset < 17 exporters expand it: ReduceMean, Sub, Pow 2 (or Mul by itself), ReduceMean,
 * Add eps, Sqrt, Div, Mul gamma, Add beta, over the last dim. Returns the nodes used (9), 0 when no
 * match; eps and the parameters come back through the pointers. */
static int layernorm_expansion(const conv *c, int k, int x, float *eps, const float **gamma, const float **beta)
{
    const rs_onnx_graph *g = c->g;
    if (k + 8 >= g->nnodes) return 0;
    const rs_onnx_node *n = &g->nodes[k];
    int r = vshape(c, x)->rank;
    int64_t N = vshape(c, x)->d[r - 1];
    float v;
#define IS(j, o, s) (n[j].op == (o) && (o != RS_OP_BINARY || n[j].a.sub == (s)))
    if (!IS(0, RS_OP_REDUCEMEAN, 0) || n[0].in[0] != x || n[0].a.axes_mask != 1u << (r - 1) || !n[0].a.keepdims)
        return 0;
    if (!IS(1, RS_OP_BINARY, RS_BINARY_SUB) || n[1].in[0] != x || n[1].in[1] != n[0].out) return 0;
    bool pow2 = IS(2, RS_OP_BINARY, RS_BINARY_POW) && const_scalar(c, n[2].in[1], &v) && v == 2.0f;
    bool square = IS(2, RS_OP_BINARY, RS_BINARY_MUL) && n[2].in[1] == n[1].out; /* ringside writes x*x */
    if (!(pow2 || square) || n[2].in[0] != n[1].out) return 0;
    if (!IS(3, RS_OP_REDUCEMEAN, 0) || n[3].in[0] != n[2].out || n[3].a.axes_mask != n[0].a.axes_mask) return 0;
    if (!IS(4, RS_OP_BINARY, RS_BINARY_ADD) || n[4].in[0] != n[3].out || !const_scalar(c, n[4].in[1], eps) || !(*eps > 0))
        return 0;
    if (n[5].op != RS_OP_UNARY || n[5].a.sub != RS_UNARY_SQRT || n[5].in[0] != n[4].out) return 0;
    if (!IS(6, RS_OP_BINARY, RS_BINARY_DIV) || n[6].in[0] != n[1].out || n[6].in[1] != n[5].out) return 0;
    if (!IS(7, RS_OP_BINARY, RS_BINARY_MUL) || n[7].in[0] != n[6].out) return 0;
    if (!IS(8, RS_OP_BINARY, RS_BINARY_ADD) || n[8].in[0] != n[7].out) return 0;
#undef IS
    /* the Sub's value is read by the square (once or twice) and the Div; the others once */
    int sub_uses = 1 + (square ? 2 : 1);
    if (c->uses[n[0].out] != 1 || c->uses[n[1].out] != sub_uses || c->uses[n[2].out] != 1 || c->uses[n[3].out] != 1 ||
        c->uses[n[4].out] != 1 || c->uses[n[5].out] != 1 || c->uses[n[6].out] != 1 || c->uses[n[7].out] != 1)
        return 0;
    const float *gd = cval(c, n[7].in[1]), *bd = cval(c, n[8].in[1]);
    if (!gd || !bd || rs_dims_numel(vshape(c, n[7].in[1]), 1) != N || rs_dims_numel(vshape(c, n[8].in[1]), 1) != N)
        return 0;
    *gamma = gd;
    *beta = bd;
    return 9;
}

static rs_status seq_fail(conv *c, const rs_onnx_node *n, const char *why)
{
    return rs_err_set(c->err, RS_ERR_UNSUPPORTED, "onnx to model: node '%s' (%s) %s; the graph still runs with "
                      "predict/eval, it just cannot be trained as an engine model", n->name, n->op_type, why);
}

/* The model node of a computed value, -2 when it has none. */
static int src_of(const conv *c, int v) { return v < 0 ? -2 : c->vnode[v]; }

/* What every matcher reads of node k: the node, its attributes, its first input and the shapes. */
typedef struct site {
    const rs_onnx_graph *g;
    const rs_onnx_node *n;
    const rs_op_attrs *a;
    int x, bpos;            /* the first input; where its batch is */
    const rs_dims *xs, *os; /* its shape; the output's */
    rs_shape per;           /* x per sample */
} site;

static site site_of(const conv *c, int k)
{
    const rs_onnx_node *n = &c->g->nodes[k];
    const rs_dims *xs = vshape(c, n->in[0]);
    return (site){.g = c->g, .n = n, .a = &n->a, .x = n->in[0], .bpos = rs_dims_batch_pos(xs), .xs = xs,
                  .os = vshape(c, n->out), .per = rs_op_sample_shape(xs)};
}

/* Gemm, or MatMul with its bias Add: linear. */
static int match_linear(conv *c, int k, plan_node *L, const char **why)
{
    site s = site_of(c, k);
    switch (s.n->op) {
    case RS_OP_GEMM: {
        const float *w = cval(c, s.n->in[1]), *b = s.n->nin > 2 ? cval(c, s.n->in[2]) : NULL;
        if (s.a->ta || s.a->alpha != 1.0f || (s.n->nin > 2 && s.a->beta != 1.0f) || !w || s.bpos > 0 ||
            (s.n->nin > 2 && (!b || vshape(c, s.n->in[2])->rank != 1))) {
            *why = "is not a linear layer (needs constant weights, a 1-d bias, alpha = beta = 1)";
            return 0;
        }
        L->cfg = rs_layer_cfg_default(RS_LAYER_LINEAR);
        L->cfg.out = (int)s.os->d[1];
        L->cfg.bias = s.n->nin > 2;
        L->w[0] = w;
        L->w[1] = b;
        L->w_transposed = !s.a->tb;
        L->wk = (int)s.xs->d[1];
        L->wn = (int)s.os->d[1];
        return 1;
    }
    case RS_OP_MATMUL: {
        const float *w = cval(c, s.n->in[1]);
        const rs_dims *ws = vshape(c, s.n->in[1]);
        if (!w || ws->rank != 2 || s.xs->rank < 2 || s.per.ndim > 2 || s.bpos == s.xs->rank - 1 ||
            src_of(c, s.x) == -2) {
            *why = "is not a linear layer (needs (batch, K) x constant (K, N))";
            return 0;
        }
        int64_t N = ws->d[1];
        L->cfg = rs_layer_cfg_default(RS_LAYER_LINEAR);
        L->cfg.out = (int)N;
        L->w[0] = w;
        L->w_transposed = true;
        L->wk = (int)ws->d[0];
        L->wn = (int)N;
        L->w[1] = bias_add(c, k + 1, s.n->out, N);
        L->cfg.bias = L->w[1] != NULL;
        if (!L->w[1]) return 1;
        L->value = s.g->nodes[k + 1].out;
        return 2;
    }
    default: *why = "has no engine layer"; return 0;
    }
}

/* Conv and the pools. */
static int match_window(conv *c, int k, plan_node *L, const char **why)
{
    site s = site_of(c, k);
    switch (s.n->op) {
    case RS_OP_CONV:
        if (s.a->group != 1 || s.a->pt != s.a->pb || s.a->pl != s.a->pr || s.xs->rank != 4 || s.bpos != 0 ||
            !cval(c, s.n->in[1]) || (s.n->nin > 2 && !cval(c, s.n->in[2]))) {
            *why = "is not an engine conv (needs group 1, symmetric pads, 2-d, constant weights)";
            return 0;
        }
        L->cfg = rs_layer_cfg_default(RS_LAYER_CONV2D);
        L->cfg.out = (int)s.os->d[1];
        L->cfg.kh = s.a->kh, L->cfg.kw = s.a->kw, L->cfg.sh = s.a->sh, L->cfg.sw = s.a->sw;
        L->cfg.ph = s.a->pt, L->cfg.pw = s.a->pl;
        L->cfg.bias = s.n->nin > 2;
        L->w[0] = cval(c, s.n->in[1]);
        L->w[1] = s.n->nin > 2 ? cval(c, s.n->in[2]) : NULL;
        return 1;
    case RS_OP_MAXPOOL:
    case RS_OP_AVGPOOL: {
        bool max = s.n->op == RS_OP_MAXPOOL;
        if (s.a->pt != s.a->pb || s.a->pl != s.a->pr || s.a->ceil_mode || s.xs->rank != 4 || s.bpos != 0 ||
            2 * s.a->pt > s.a->kh || 2 * s.a->pl > s.a->kw ||
            (!max && !s.a->count_include_pad && (s.a->pt || s.a->pl))) {
            *why = "is not an engine pool (needs symmetric pads of at most half the window, floor mode, and for "
                   "averages count_include_pad=1 when padded)";
            return 0;
        }
        L->cfg = rs_layer_cfg_default(max ? RS_LAYER_MAXPOOL2D : RS_LAYER_AVGPOOL2D);
        L->cfg.kh = s.a->kh, L->cfg.kw = s.a->kw, L->cfg.sh = s.a->sh, L->cfg.sw = s.a->sw;
        L->cfg.ph = s.a->pt, L->cfg.pw = s.a->pl;
        return 1;
    }
    default: *why = "has no engine layer"; return 0;
    }
}

/* Activations (through the layers' descriptors), GELU's expansion, the residual add. */
static int match_elementwise(conv *c, int k, plan_node *L, const char **why)
{
    site s = site_of(c, k);
    switch (s.n->op) {
    case RS_OP_UNARY:
        if (!rs_layer_for_unary(s.a->sub, &L->cfg)) {
            *why = "is an activation the engine has no layer for";
            return 0;
        }
        return 1;
    case RS_OP_SLICE:
        if (!c->train && rs_onnx_tm_attn(c, k, L)) return 1;
        *why = "has no engine layer";
        return 0;
    case RS_OP_BINARY: {
        if (!c->train && rs_onnx_tm_gelu_tanh(c, k, L)) return 1;
        int used = gelu_expansion(c, k, s.x);
        if (used) {
            L->cfg = rs_layer_cfg_default(RS_LAYER_GELU);
            L->value = s.g->nodes[k + used - 1].out;
            return used;
        }
        int y = s.n->in[1];
        const rs_dims *ys = vshape(c, y);
        bool same = ys->rank == s.xs->rank && !memcmp(ys->d, s.xs->d, sizeof(int64_t) * (size_t)s.xs->rank);
        if (!c->train && s.a->sub == RS_BINARY_ADD && same && src_of(c, s.x) != -2 && src_of(c, y) != -2) {
            L->cfg = rs_layer_cfg_default(RS_LAYER_ADD);
            L->nsrc = 2;
            L->src[1] = src_of(c, y);
            return 1;
        }
        *why = "is arithmetic that is not part of a linear layer or a GELU";
        return 0;
    }
    default: *why = "has no engine layer"; return 0;
    }
}

/* Flatten, LayerNorm and its expansion. */
static int match_norm_shape(conv *c, int k, plan_node *L, const char **why)
{
    site s = site_of(c, k);
    switch (s.n->op) {
    case RS_OP_RESHAPE:
        /* (N, ...) -> (N, rest): the engine's flatten (training needs a layer that copies) */
        if (c->train && s.os->rank == 2 && s.bpos == 0 && rs_dims_batch_pos(s.os) == 0 && s.xs->rank > 2) {
            L->cfg = rs_layer_cfg_default(RS_LAYER_FLATTEN);
            return 1;
        }
        *why = "reshapes other than flattening to (batch, features)";
        return 0;
    case RS_OP_REDUCEMEAN: {
        float eps = 0;
        int used = s.bpos == s.xs->rank - 1 ? 0 : layernorm_expansion(c, k, s.x, &eps, &L->w[0], &L->w[1]);
        if (!used) {
            *why = "is a reduction that is not part of a LayerNorm";
            return 0;
        }
        L->cfg = rs_layer_cfg_default(RS_LAYER_LAYERNORM);
        L->cfg.eps = eps;
        L->value = s.g->nodes[k + used - 1].out;
        return used;
    }
    case RS_OP_LAYERNORM:
        if (s.a->axis != s.xs->rank - 1 || s.bpos == s.xs->rank - 1 || !cval(c, s.n->in[1]) ||
            (s.n->nin > 2 && s.n->in[2] >= 0 && !cval(c, s.n->in[2]))) {
            *why = "normalises over more than the last dimension";
            return 0;
        }
        L->cfg = rs_layer_cfg_default(RS_LAYER_LAYERNORM);
        L->cfg.eps = s.a->eps > 0 ? s.a->eps : 1e-5f;
        L->w[0] = cval(c, s.n->in[1]);
        L->w[1] = s.n->nin > 2 ? cval(c, s.n->in[2]) : NULL;
        return 1;
    default: *why = "has no engine layer"; return 0;
    }
}

/* Tries to make node k (input x) an engine layer in *L. Returns the graph nodes it takes (0: none
 * fits; *why then says what would, when the op has a layer) and sets *last to the last one. */
static int match_layer(conv *c, int k, plan_node *L, const char **why)
{
    const rs_onnx_graph *g = c->g;
    const rs_onnx_node *n = &g->nodes[k];
    int x = n->in[0];
    *L = (plan_node){.nsrc = 1, .src = {src_of(c, x)}, .value = n->out};
    *why = NULL;
    if (n->op == RS_OP_GATHER) return rs_onnx_tm_embed(c, k, L, why); /* x is the table, the ids come second */
    if (src_of(c, x) == -2) {
        *why = "reads a constant where a layer takes its input";
        return 0;
    }
    int used = chain_at(c, k, x, &L->cfg); /* an activation written as a chain of nodes */
    if (used) {
        L->value = g->nodes[k + used - 1].out;
        return used;
    }
    switch (n->op) {
    case RS_OP_GEMM:
    case RS_OP_MATMUL: return match_linear(c, k, L, why);
    case RS_OP_CONV:
    case RS_OP_MAXPOOL:
    case RS_OP_AVGPOOL: return match_window(c, k, L, why);
    case RS_OP_UNARY:
    case RS_OP_SLICE:
    case RS_OP_BINARY: return match_elementwise(c, k, L, why);
    case RS_OP_RESHAPE:
    case RS_OP_REDUCEMEAN:
    case RS_OP_LAYERNORM: return match_norm_shape(c, k, L, why);
    default: *why = "has no engine layer"; return 0;
    }
}

/* Node k as a generic op: computed inputs become sources, constants frozen parameters. */
static rs_status plan_op(conv *c, int k, plan_node *P)
{
    const rs_onnx_node *n = &c->g->nodes[k];
    *P = (plan_node){.is_op = true, .value = n->out};
    rs_op_node *o = &P->op;
    *o = (rs_op_node){.op = n->op, .a = n->a, .nin = n->nin, .out = *vshape(c, n->out)};
    snprintf(o->type, sizeof o->type, "%s", n->op_type);
    snprintf(o->name, sizeof o->name, "%s", n->name);
    int nconst = 0;
    for (int i = 0; i < n->nin; i++) {
        int v = n->in[i];
        if (v < 0) continue; /* from = ABSENT */
        o->in[i] = *vshape(c, v);
        const float *d = cval(c, v);
        if (d) {
            if (nconst == RS_LAYER_MAX_PARAMS) return seq_fail(c, n, "has more constant inputs than a node holds");
            o->from[i] = RS_OP_IN_CONST;
            o->slot[i] = nconst;
            P->w[nconst++] = d;
            continue;
        }
        int s = src_of(c, v), j = 0;
        if (s == -2) return rs_err_set(c->err, RS_ERR_INTERNAL, "onnx: node '%s' reads a value nothing computes", n->name);
        while (j < P->nsrc && P->src[j] != s) j++; /* x * x reads one source */
        if (j == P->nsrc) P->src[P->nsrc++] = s;
        o->from[i] = RS_OP_IN_SRC;
        o->slot[i] = j;
    }
    if (P->nsrc == 0) P->src[P->nsrc++] = -1; /* reads only constants: the model's input is a source it never reads */
    return RS_OK;
}

/* A node whose inputs are all constants (the import folds them unless they are past its budget):
 * computed once, here, with the engine's kernels. */
static rs_status fold(conv *c, int k)
{
    const rs_onnx_node *n = &c->g->nodes[k];
    const rs_kernels *cpu = rs_kernels_for(rs_device_cpu());
    const float *ins[RS_OP_MAX_IN] = {0};
    const rs_dims *is[RS_OP_MAX_IN] = {0};
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] >= 0) {
            ins[i] = cval(c, n->in[i]);
            is[i] = vshape(c, n->in[i]);
        }
    const rs_dims *os = vshape(c, n->out);
    int64_t on = rs_dims_numel(os, 1);
    if (on < 0 || rs_dims_batch_pos(os) >= 0)
        return rs_err_set(c->err, RS_ERR_INTERNAL, "onnx: constant node '%s' has the batch", n->name);
    rs_kctx kc; /* constants are small: one thread */
    size_t ws_bytes = 0;
    rs_status st = rs_kctx_init(&kc, cpu, 1, c->err);
    if (!st) st = rs_op_workspace(&kc, n->op, &n->a, is, os, &ws_bytes, c->err);
    if (st) return st;
    float *out = malloc(sizeof(float) * (size_t)(on ? on : 1)); /* owned by c->cdata */
    void *ws = malloc(ws_bytes + 64);                             /* owned here */
    st = out && ws ? rs_op_run(&kc, n->op, &n->a, ins, is, out, os, ws, ws_bytes, c->err)
                   : rs_err_set(c->err, RS_ERR_NOMEM, "onnx: out of memory folding node '%s'", n->name);
    free(ws);
    if (st) {
        free(out);
        return st;
    }
    c->cdata[n->out] = out;
    return RS_OK;
}

static rs_status plan(conv *c)
{
    const rs_onnx_graph *g = c->g;
    int cur = g->input; /* train: the value the chain has reached */
    for (int k = 0; k < g->nnodes; k++) {
        const rs_onnx_node *n = &g->nodes[k];
        if (c->taken[k]) continue; /* inside a subgraph an earlier model node computes whole */
        bool all_const = true; /* then its value is computed here, unless it holds the batch */
        for (int i = 0; i < n->nin; i++)
            if (n->in[i] >= 0 && !cval(c, n->in[i])) all_const = false;
        /* a constant expanded to the batch (a class token) is computed per run: it stays a node */
        if (all_const && rs_dims_batch_pos(vshape(c, n->out)) < 0) {
            rs_status st = fold(c, k);
            if (st) return st;
            continue;
        }
        if (c->train && n->in[0] != cur)
            return seq_fail(c, n, "does not take the previous layer's output: the graph is not a plain sequence");
        const rs_dims *xs = vshape(c, n->in[0]), *os = vshape(c, n->out);
        if (n->op == RS_OP_RESHAPE && os->rank == xs->rank && !memcmp(os->d, xs->d, sizeof(int64_t) * (size_t)os->rank)) {
            c->vnode[n->out] = c->vnode[n->in[0]]; /* a reshape that keeps the shape is nothing */
            cur = n->out;
            continue;
        }
        plan_node *P = &c->P[c->np];
        const char *why = NULL;
        int used = match_layer(c, k, P, &why);
        if (!used && c->train) return seq_fail(c, n, why ? why : "has no engine layer");
        if (!used && n->op == RS_OP_GATHER) /* the ids are int32 bits: only the embed layer reads them */
            return rs_onnx_node_err(c->err, RS_ERR_UNSUPPORTED, n, "%s", why ? why : "is not an embedding");
        if (!used) {
            rs_status st = plan_op(c, k, P);
            if (st) return st;
            used = 1;
        }
        P->node = k;
        k += used - 1;
        c->vnode[P->value] = c->np++;
        cur = P->value;
    }
    return RS_OK;
}

/* The graph value holding constant data d (for messages). */
static const char *const_name(const conv *c, const float *d)
{
    for (int v = 0; v < c->g->nvalues; v++)
        if (c->g->values[v].data == d || c->cdata[v] == d) return c->g->values[v].name;
    return "?";
}

/* Finds the slots that read a constant an earlier slot already holds in the same layout (the same graph
 * value; a transposed MatMul weight is another layout) and marks them shared with the first. A trainable
 * model can express only what the spec language can: a linear's weight tied to an earlier linear's
 * (tie=); any other constant read twice, or read in two layouts, would be trained as separate copies,
 * so the graph is refused as a trainable sequence, naming both nodes (it still imports for inference). */
static rs_status share_slots(conv *c)
{
    for (int i = 0; i < c->np; i++) {
        plan_node *P = &c->P[i];
        for (int j = 0; j < RS_LAYER_MAX_PARAMS; j++) {
            if (!P->w[j]) continue;
            bool tj = j == 0 && P->w_transposed;
            for (int a = 0; a < i && !P->shared[j]; a++)
                for (int b = 0; b < RS_LAYER_MAX_PARAMS && !P->shared[j]; b++) {
                    const plan_node *O = &c->P[a];
                    if (O->w[b] != P->w[j] || O->shared[b]) continue;
                    bool same_layout = (b == 0 && O->w_transposed) == tj;
                    bool linear_weights = !P->is_op && !O->is_op && P->cfg.kind == RS_LAYER_LINEAR &&
                                          O->cfg.kind == RS_LAYER_LINEAR && j == 0 && b == 0;
                    if (c->train && !(same_layout && linear_weights)) {
                        char why[192];
                        snprintf(why, sizeof why, "reads constant '%s' that node '%s' also reads%s; a trainable model "
                                 "can tie only a linear layer's weight to another's", const_name(c, P->w[j]),
                                 c->g->nodes[O->node].name, same_layout ? "" : " in another layout");
                        return seq_fail(c, &c->g->nodes[P->node], why);
                    }
                    if (!same_layout) continue; /* the transposed one keeps its own copy */
                    P->shared[j] = true;
                    P->sh_node[j] = a;
                    P->sh_slot[j] = b;
                    if (c->train) snprintf(P->cfg.tie, sizeof P->cfg.tie, "%d.weight", a);
                }
        }
    }
    return RS_OK;
}

/* Copies the planned constants into the built model's parameter slots (a shared slot's range is its
 * owner's, written once). */
static rs_status copy_weights(conv *c, rs_model *m)
{
    float *W = rs_model_params(m);
    if (rs_model_layer_count(m) != c->np)
        return rs_err_set(c->err, RS_ERR_INTERNAL, "onnx to model: %d layers for %d planned", rs_model_layer_count(m),
                          c->np);
    for (int i = 0; i < c->np; i++) {
        const plan_node *P = &c->P[i];
        rs_layer *l = rs_model_layer(m, i);
        for (int j = 0; j < l->np; j++) {
            const rs_param_slot *ps = &l->p[j];
            if (ps->tied) continue;
            if (!P->w[j]) {
                memset(W + ps->offset, 0, sizeof(float) * ps->numel); /* layernorm without bias */
                continue;
            }
            if (j == 0 && P->w_transposed) {
                if ((size_t)P->wk * (size_t)P->wn != ps->numel)
                    return rs_err_set(c->err, RS_ERR_SHAPE, "onnx to model: layer %s weight size differs", l->name);
                for (int r = 0; r < P->wn; r++)
                    for (int q = 0; q < P->wk; q++) W[ps->offset + (size_t)r * P->wk + q] = P->w[0][(size_t)q * P->wn + r];
            } else {
                memcpy(W + ps->offset, P->w[j], sizeof(float) * ps->numel);
            }
        }
        /* the engine's shapes must agree with the graph's (same pooling and padding rules) */
        int64_t want = rs_dims_numel(vshape(c, P->value), 1), got = rs_shape_numel(&l->out);
        if (want != got)
            return rs_err_set(c->err, RS_ERR_SHAPE, "onnx to model: layer %s gives %lld values a sample, the graph's "
                              "value '%s' has %lld", l->name, (long long)got, c->g->values[P->value].name,
                              (long long)want);
    }
    return RS_OK;
}

static void conv_free(conv *c)
{
    if (c->cdata)
        for (int i = 0; i < c->g->nvalues; i++) free(c->cdata[i]);
    free(c->cdata);
    free(c->vnode);
    free(c->uses);
    free(c->taken);
    free(c->P);
}

static rs_status conv_init(conv *c, const rs_onnx_graph *g, bool train, rs_err *err)
{
    *c = (conv){.g = g, .train = train, .err = err};
    size_t nv = (size_t)g->nvalues + 1;
    c->P = calloc((size_t)g->nnodes + 1, sizeof *c->P);
    c->vnode = malloc(nv * sizeof *c->vnode);
    c->uses = calloc(nv, sizeof *c->uses);
    c->cdata = calloc(nv, sizeof *c->cdata);
    c->taken = calloc((size_t)g->nnodes + 1, sizeof *c->taken);
    if (!c->P || !c->vnode || !c->uses || !c->cdata || !c->taken) return rs_err_set(err, RS_ERR_NOMEM, "onnx to model: out of memory");
    for (int i = 0; i < g->nvalues; i++) c->vnode[i] = -2;
    c->vnode[g->input] = -1;
    for (int k = 0; k < g->nnodes; k++)
        for (int i = 0; i < g->nodes[k].nin; i++)
            if (g->nodes[k].in[i] >= 0) c->uses[g->nodes[k].in[i]]++;
    c->uses[g->output]++;
    return RS_OK;
}

rs_status rs_onnx_to_model(const rs_onnx_graph *g, const char *name, rs_model **out, rs_err *err)
{
    *out = NULL;
    if (g->tokens) /* its embedding and residual adds are no layer chain; `model g = gpt` is the trainable form */
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: the graph takes token ids; a GPT's graph is not a "
                          "plain sequence of layers (`model g = gpt ...` builds one that trains)");
    if (g->ninputs > 1) /* its towers read views of the packed input: no layer chain either */
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: the graph has %d inputs, packed into one; a layer "
                          "chain has one", g->ninputs);
    conv c;
    rs_status st = conv_init(&c, g, true, err);
    if (!st) st = plan(&c);
    if (!st) st = share_slots(&c);
    if (!st && (c.np == 0 || c.vnode[g->output] != c.np - 1))
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, c.np ? "onnx to model: the graph's output is not the end of the layer "
                        "chain" : "onnx to model: no layers");
    if (!st && g->values[g->output].shape.rank != 2)
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: the output must be (batch, classes)");
    if (st) {
        conv_free(&c);
        return st;
    }
    /* the spec: "seq in=CxHxW layer layer ...", parsed as a user's would be */
    size_t cap_s = 64 + (size_t)c.np * 64, len = 0;
    char *spec = malloc(cap_s);
    if (!spec) {
        conv_free(&c);
        return rs_err_set(err, RS_ERR_NOMEM, "onnx to model: out of memory");
    }
    const rs_dims *is = &g->values[g->input].shape;
    len += (size_t)snprintf(spec + len, cap_s - len, "seq in=");
    for (int i = 1; i < is->rank; i++) len += (size_t)snprintf(spec + len, cap_s - len, "%s%lld", i > 1 ? "x" : "", (long long)is->d[i]);
    for (int i = 0; i < c.np; i++) {
        char w[64];
        len += (size_t)snprintf(spec + len, cap_s - len, " %s", rs_layer_cfg_str(&c.P[i].cfg, w, sizeof w));
    }
    rs_model *m = NULL;
    st = rs_model_parse(spec, name ? name : "onnx", rs_device_cpu(), NULL, 0, &m, NULL, err);
    if (st) rs_err_prefix(err, "onnx to model: spec '%s'", spec);
    if (!st) st = copy_weights(&c, m);
    free(spec);
    conv_free(&c);
    if (st) {
        rs_model_free(m);
        return st;
    }
    rs_model_set_training(m, false);
    *out = m;
    return RS_OK;
}

rs_status rs_onnx_to_inference_model(const rs_onnx_graph *g, const char *name, rs_model **out, rs_err *err)
{
    *out = NULL;
    conv c;
    rs_status st = conv_init(&c, g, false, err);
    if (!st) st = plan(&c);
    if (!st) st = share_slots(&c);
    if (!st && (c.np == 0 || c.vnode[g->output] != c.np - 1)) {
        /* the output is the input, or a view of an earlier node: a last node that is that view */
        int v = g->output;
        plan_node *P = &c.P[c.np];
        *P = (plan_node){.is_op = true, .nsrc = 1, .src = {c.vnode[v]}, .value = v};
        P->op = (rs_op_node){.op = RS_OP_RESHAPE, .nin = 1, .from = {RS_OP_IN_SRC}, .in = {*vshape(&c, v)},
                             .out = *vshape(&c, v), .type = "Identity"};
        snprintf(P->op.name, sizeof P->op.name, "%s", g->values[v].name);
        c.vnode[v] = c.np++;
    }
    rs_shape in = rs_op_sample_shape(&g->values[g->input].shape);
    rs_model *m = st ? NULL : rs_model_new(name ? name : "onnx", &in, rs_device_cpu(), NULL);
    if (!st && !m) st = rs_err_set(err, RS_ERR_NOMEM, "onnx: out of memory for the model");
    if (m) rs_model_set_inference_only(m);
    if (m) rs_model_set_tokens(m, g->tokens);
    if (m && g->fixed_batch > 1) rs_model_set_fixed_batch(m, (int)g->fixed_batch);
    for (int i = 0; i < c.np && !st; i++) {
        const plan_node *P = &c.P[i];
        st = P->is_op ? rs_model_add_op(m, &P->op, P->src, P->nsrc, err)
                      : rs_model_add_from(m, &P->cfg, P->src, P->nsrc, err);
        for (int j = 0; j < RS_LAYER_MAX_PARAMS && !st; j++)
            if (P->shared[j]) st = rs_model_share_param(m, i, j, P->sh_node[j], P->sh_slot[j], err);
    }
    if (!st) st = rs_model_build(m, 0, err);
    if (!st) st = copy_weights(&c, m);
    conv_free(&c);
    if (st) {
        rs_model_free(m);
        return st;
    }
    rs_model_set_training(m, false);
    *out = m;
    return RS_OK;
}
