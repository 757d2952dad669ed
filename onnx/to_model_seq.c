/* The transformer's subgraphs in an imported graph, each made the one engine layer that computes it:
 * the token embedding, the exporter's spelled-out causal attention (sixteen nodes), and GPT-2's tanh
 * GELU (nine). A GPT exported by ringside then imports as the same layers the session model has
 * (embed, layernorm, linear, attn, gelu, add), so the engine's executor runs the fused attention
 * kernel and `compile` gets the plan nodes `compile g` gets. Each matcher follows the dataflow from
 * its first node: every value inside a subgraph must be read by the next node of it alone (the node
 * order of the graph is the importer's topological order, which need not keep a subgraph together).
 * A graph that differs anywhere keeps its nodes as they are (generic ops or other layers). */
#include <math.h>
#include <string.h>

#include "to_model_internal.h"

typedef rs_onnx_conv conv;

static const rs_dims *vshape(const conv *c, int v) { return rs_onnx_vshape(c, v); }

/* The one node that reads value v (which nothing else reads, the graph's output included), or -1. */
static int only_reader(const conv *c, int v)
{
    if (v < 0 || c->uses[v] != 1) return -1;
    const rs_onnx_graph *g = c->g;
    for (int k = g->values[v].producer + 1; k < g->nnodes; k++)
        for (int i = 0; i < g->nodes[k].nin; i++)
            if (g->nodes[k].in[i] == v) return k;
    return -1;
}

static bool is_binary(const rs_onnx_node *n, int sub) { return n->op == RS_OP_BINARY && n->a.sub == sub; }

/* Of binary node n, which reads v, the other input; -1 when v is not one of them. */
static int other_input(const rs_onnx_node *n, int v)
{
    return n->in[0] == v ? n->in[1] : n->in[1] == v ? n->in[0] : -1;
}

/* The reader of v when it is binary op sub with a constant scalar other input near want (relative tol). */
static int scalar_step(const conv *c, int v, int sub, float want, float tol)
{
    int k = only_reader(c, v);
    if (k < 0 || !is_binary(&c->g->nodes[k], sub)) return -1;
    float s;
    if (!rs_onnx_const_scalar(c, other_input(&c->g->nodes[k], v), &s) || !(fabsf(s - want) <= tol * fabsf(want)))
        return -1;
    return k;
}

/* The reader of v when it is binary op sub with x as the other input. */
static int binary_with(const conv *c, int v, int sub, int x)
{
    int k = only_reader(c, v);
    return k >= 0 && is_binary(&c->g->nodes[k], sub) && other_input(&c->g->nodes[k], v) == x ? k : -1;
}

static bool dims_are(const rs_dims *s, int rank, const int64_t *d)
{
    if (s->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (s->d[i] != d[i]) return false;
    return true;
}

static void take(conv *c, const int *nodes, int n)
{
    for (int i = 0; i < n; i++) c->taken[nodes[i]] = true;
}

bool rs_onnx_tm_embed(conv *c, int k, rs_onnx_pnode *L, const char **why)
{
    const rs_onnx_node *n = &c->g->nodes[k];
    const float *table = rs_onnx_cval(c, n->in[0]);
    const rs_dims *ts = vshape(c, n->in[0]), *ids = vshape(c, n->in[1]);
    if (!table || ts->rank != 2 || n->in[1] != c->g->input || ids->rank != 2 || ids->d[0] != RS_DIM_BATCH) {
        *why = "is not an embedding (a constant (V, C) table indexed by the (batch, T) token input)";
        return false;
    }
    int64_t T = ids->d[1], C = ts->d[1];
    *L = (rs_onnx_pnode){.nsrc = 1, .src = {-1}, .value = n->out, .w = {table, NULL}};
    L->cfg = rs_layer_cfg_default(RS_LAYER_EMBED);
    L->cfg.vocab = (int)ts->d[0];
    L->cfg.out = (int)C;
    /* the positions: Add of a (T, C) constant (a leading 1 allowed), as the exporter writes wpe */
    int a = only_reader(c, n->out);
    if (a >= 0 && is_binary(&c->g->nodes[a], RS_BINARY_ADD)) {
        int pv = other_input(&c->g->nodes[a], n->out);
        const rs_dims *ps = pv >= 0 ? vshape(c, pv) : NULL;
        const float *pos = rs_onnx_cval(c, pv);
        bool fits = pos && ps->rank >= 2 && ps->d[ps->rank - 1] == C && ps->d[ps->rank - 2] == T &&
                    rs_dims_numel(ps, 1) == T * C;
        if (fits) {
            L->w[1] = pos;
            L->value = c->g->nodes[a].out;
            c->taken[a] = true;
        }
    }
    return true; /* no positions: the embed layer's wpe is zeros */
}

/* v past the Reshapes that keep its shape (the importer's view where the file merged the batch with the
 * heads, (N*H, T, hs), which the engine holds as (N, H, T, hs)): the last such value; the nodes go to
 * nodes[*n++]. */
static int past_views(const conv *c, int v, int *nodes, int *n)
{
    for (int r = only_reader(c, v); r >= 0 && *n < 32; r = only_reader(c, v)) {
        const rs_onnx_node *nd = &c->g->nodes[r];
        const rs_dims *a = vshape(c, v), *b = vshape(c, nd->out);
        if (nd->op != RS_OP_RESHAPE || a->rank != b->rank || memcmp(a->d, b->d, sizeof(int64_t) * (size_t)a->rank))
            break;
        nodes[(*n)++] = r;
        v = nd->out;
    }
    return v;
}

/* One of q (part 0), k (1), v (2): the Slice of x's last axis at part * C, its Reshape to
 * (batch, T, H, hs) and Transpose by perm; the keys (perm (0, 2, 3, 1)) also as torch's dynamo exporter
 * writes them, Transpose (0, 2, 1, 3) then (0, 1, 3, 2), views between. Appends the nodes to
 * nodes[*n...]; returns the last value or -1. */
static int head_split(const conv *c, int x, int part, int64_t T, int64_t C, const int *perm, int64_t *H, int *nodes,
                      int *n)
{
    const rs_onnx_graph *g = c->g;
    int s = -1;
    for (int k = g->values[x].producer + 1; k < g->nnodes && s < 0; k++) {
        const rs_onnx_node *n = &g->nodes[k];
        if (n->op != RS_OP_SLICE || n->in[0] != x || n->a.starts[2] != part * C || n->a.starts[0] || n->a.starts[1])
            continue;
        if (n->a.steps[0] != 1 || n->a.steps[1] != 1 || n->a.steps[2] != 1) continue;
        if (dims_are(vshape(c, n->out), 3, (const int64_t[]){RS_DIM_BATCH, T, C})) s = k;
    }
    int r = s < 0 ? -1 : only_reader(c, g->nodes[s].out);
    if (r < 0 || g->nodes[r].op != RS_OP_RESHAPE) return -1;
    const rs_dims *rs = vshape(c, g->nodes[r].out);
    if (rs->rank != 4 || rs->d[0] != RS_DIM_BATCH || rs->d[1] != T || rs->d[2] < 1 || rs->d[2] * rs->d[3] != C ||
        (part && rs->d[2] != *H))
        return -1;
    *H = rs->d[2];
    int t = only_reader(c, g->nodes[r].out);
    if (t < 0 || g->nodes[t].op != RS_OP_TRANSPOSE) return -1;
    nodes[(*n)++] = s, nodes[(*n)++] = r, nodes[(*n)++] = t;
    int out = past_views(c, g->nodes[t].out, nodes, n);
    if (!memcmp(g->nodes[t].a.perm, perm, 4 * sizeof(int))) return out;
    static const int bhts[4] = {0, 2, 1, 3}, bhst[4] = {0, 2, 3, 1}, last2[4] = {0, 1, 3, 2};
    if (memcmp(perm, bhst, sizeof bhst) || memcmp(g->nodes[t].a.perm, bhts, sizeof bhts)) return -1;
    int t2 = only_reader(c, out);
    if (t2 < 0 || g->nodes[t2].op != RS_OP_TRANSPOSE || memcmp(g->nodes[t2].a.perm, last2, sizeof last2)) return -1;
    nodes[(*n)++] = t2;
    return past_views(c, g->nodes[t2].out, nodes, n);
}

/* v, or the reader of v that multiplies it by a constant scalar (torch scales q and k by hs^-1/4 each);
 * the factor goes into *scale, the node into nodes[*n]. */
static int scaled(const conv *c, int v, float *scale, int *nodes, int *n)
{
    int k = only_reader(c, v);
    float s;
    if (k < 0 || !is_binary(&c->g->nodes[k], RS_BINARY_MUL) || !rs_onnx_const_scalar(c, other_input(&c->g->nodes[k], v), &s))
        return v;
    *scale *= s;
    nodes[(*n)++] = k;
    return c->g->nodes[k].out;
}

/* Whether constant v is the (T, T) causal mask: 0 at and below the diagonal, -inf (or below -1e30,
 * which Softmax turns into the same exact 0) above. */
static bool causal_mask(const conv *c, int v, int64_t T)
{
    const float *m = rs_onnx_cval(c, v);
    const rs_dims *s = v >= 0 ? vshape(c, v) : NULL;
    if (!m || s->rank < 2 || s->d[s->rank - 1] != T || s->d[s->rank - 2] != T || rs_dims_numel(s, 1) != T * T)
        return false;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++)
            if (j <= i ? m[i * T + j] != 0.0f : !(m[i * T + j] < -1e30f)) return false;
    return true;
}

bool rs_onnx_tm_attn(conv *c, int k, rs_onnx_pnode *L)
{
    const rs_onnx_graph *g = c->g;
    int x = g->nodes[k].in[0];
    const rs_dims *xs = vshape(c, x);
    if (xs->rank != 3 || xs->d[0] != RS_DIM_BATCH || xs->d[2] % 3 || c->vnode[x] == -2) return false;
    int64_t T = xs->d[1], C = xs->d[2] / 3, H = 0;
    int nodes[48], n = 0;
    const int bhts[4] = {0, 2, 1, 3}, bhst[4] = {0, 2, 3, 1};
    int q = head_split(c, x, 0, T, C, bhts, &H, nodes, &n);
    int kt = q < 0 ? -1 : head_split(c, x, 1, T, C, bhst, &H, nodes, &n);
    int v = kt < 0 ? -1 : head_split(c, x, 2, T, C, bhts, &H, nodes, &n);
    if (v < 0) return false;
    int64_t hs = C / H;
    /* the scale 1/sqrt(hs): after the product (ringside's exporter, to the bit the engine uses), or split
     * over q and k before it (torch's scaled_dot_product_attention, hs^-1/4 each) */
    float scale = 1.0f;
    q = scaled(c, q, &scale, nodes, &n);
    kt = scaled(c, kt, &scale, nodes, &n);
    int mm = only_reader(c, q);
    if (mm < 0 || g->nodes[mm].op != RS_OP_MATMUL || g->nodes[mm].in[0] != q || g->nodes[mm].in[1] != kt) return false;
    nodes[n++] = mm;
    int sv = scaled(c, g->nodes[mm].out, &scale, nodes, &n);
    float want = 1.0f / sqrtf((float)hs);
    if (!(fabsf(scale - want) <= 1e-6f * want)) return false;
    int mk = only_reader(c, sv);
    if (mk < 0 || !is_binary(&g->nodes[mk], RS_BINARY_ADD) || !causal_mask(c, other_input(&g->nodes[mk], sv), T))
        return false;
    int sm = only_reader(c, g->nodes[mk].out);
    if (sm < 0 || g->nodes[sm].op != RS_OP_SOFTMAX || g->nodes[sm].a.legacy_softmax || g->nodes[sm].a.axis != 3)
        return false;
    int pv = only_reader(c, g->nodes[sm].out);
    if (pv < 0 || g->nodes[pv].op != RS_OP_MATMUL || g->nodes[pv].in[0] != g->nodes[sm].out || g->nodes[pv].in[1] != v)
        return false;
    int tr = only_reader(c, g->nodes[pv].out);
    if (tr < 0 || g->nodes[tr].op != RS_OP_TRANSPOSE || memcmp(g->nodes[tr].a.perm, bhts, sizeof bhts)) return false;
    int rs = only_reader(c, g->nodes[tr].out);
    if (rs < 0 || g->nodes[rs].op != RS_OP_RESHAPE ||
        !dims_are(vshape(c, g->nodes[rs].out), 3, (const int64_t[]){RS_DIM_BATCH, T, C}))
        return false;
    nodes[n++] = mk, nodes[n++] = sm, nodes[n++] = pv, nodes[n++] = tr, nodes[n++] = rs;
    for (int i = 0; i < n; i++)
        if (nodes[i] < k) return false; /* a part the walk has passed: it is planned already */
    *L = (rs_onnx_pnode){.nsrc = 1, .src = {c->vnode[x]}, .value = g->nodes[rs].out};
    L->cfg = rs_layer_cfg_default(RS_LAYER_ATTN);
    L->cfg.heads = (int)H;
    take(c, nodes, n);
    return true;
}

bool rs_onnx_tm_gelu_tanh(conv *c, int k, rs_onnx_pnode *L)
{
    const rs_onnx_graph *g = c->g;
    const rs_onnx_node *n = &g->nodes[k];
    int x = n->in[0];
    if (!is_binary(n, RS_BINARY_MUL) || n->in[1] != x || c->vnode[x] == -2) return false;
    int nodes[9] = {k};
    nodes[1] = binary_with(c, g->nodes[nodes[0]].out, RS_BINARY_MUL, x);                                /* x^3 */
    if (nodes[1] < 0) return false;
    nodes[2] = scalar_step(c, g->nodes[nodes[1]].out, RS_BINARY_MUL, 0.044715f, 1e-6f);
    if (nodes[2] < 0) return false;
    nodes[3] = binary_with(c, g->nodes[nodes[2]].out, RS_BINARY_ADD, x);
    if (nodes[3] < 0) return false;
    nodes[4] = scalar_step(c, g->nodes[nodes[3]].out, RS_BINARY_MUL, 0.7978845608f, 1e-6f); /* sqrt(2/pi) */
    if (nodes[4] < 0) return false;
    nodes[5] = only_reader(c, g->nodes[nodes[4]].out);
    if (nodes[5] < 0 || g->nodes[nodes[5]].op != RS_OP_UNARY || g->nodes[nodes[5]].a.sub != RS_UNARY_TANH) return false;
    nodes[6] = scalar_step(c, g->nodes[nodes[5]].out, RS_BINARY_ADD, 1.0f, 0.0f);
    if (nodes[6] < 0) return false;
    nodes[7] = binary_with(c, g->nodes[nodes[6]].out, RS_BINARY_MUL, x);
    if (nodes[7] < 0) return false;
    nodes[8] = scalar_step(c, g->nodes[nodes[7]].out, RS_BINARY_MUL, 0.5f, 0.0f);
    if (nodes[8] < 0) return false;
    *L = (rs_onnx_pnode){.nsrc = 1, .src = {c->vnode[x]}, .value = g->nodes[nodes[8]].out};
    L->cfg = rs_layer_cfg_default(RS_LAYER_GELU);
    L->cfg.approx_tanh = true;
    take(c, nodes + 1, 8);
    return true;
}
