/* An engine model as a plan graph: one node per layer, one value per layer output (value 0 is the
 * model's input), the weights copied out of the model's flat buffer into tensors of their own, since
 * the plan will reorder and convert them. Nothing is optimized here; passes.c does that. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/tensor_op.h"
#include "ir.h"

static rs_status oom(rs_err *err) { return rs_err_set(err, RS_ERR_NOMEM, "compile: out of memory"); }

/* A parameter slot of layer l as a tensor named "LAYER.SUFFIX". */
static int slot_tensor(rs_plan *p, rs_model *m, const rs_layer *l, int j)
{
    const rs_param_slot *s = &l->p[j];
    char name[64];
    snprintf(name, sizeof name, "%s.%s", l->name, s->suffix);
    int64_t dims[4] = {1, 1, 1, 1};
    int nd = s->shape.ndim > 4 ? 1 : s->shape.ndim;
    if (s->shape.ndim > 4) dims[0] = (int64_t)s->numel;
    else
        for (int i = 0; i < nd; i++) dims[i] = s->shape.d[i];
    if (nd == 0) {
        nd = 1;
        dims[0] = (int64_t)s->numel;
    }
    return rs_plan_add_tensor(p, name, nd, dims, rs_model_params(m) + s->offset);
}

static rs_status unsupported(const rs_layer *l, const char *what, rs_err *err)
{
    return rs_err_set(err, RS_ERR_UNSUPPORTED,
                      "compile: layer %s (%s) has no plan kernel yet; the engine runs it (eval, predict on the model "
                      "itself)",
                      l->name, what);
}

/* (N, C, H, W) with the batch first: the shape oneDNN's windows take. */
static bool nchw(const rs_dims *d) { return d->rank == 4 && d->d[0] == RS_DIM_BATCH && rs_dims_batch_pos(d) == 0; }

/* A window's pads: begin and end may differ (oneDNN takes both; the geometry keeps the begin pad and
 * the output size, rs_plan_pad_end the end pad), each less than the kernel; a cuda plan's cuDNN
 * windows are symmetric. */
static bool pads_ok(const rs_plan *p, const rs_op_attrs *a)
{
    if (a->pt >= a->kh || a->pb >= a->kh || a->pl >= a->kw || a->pr >= a->kw) return false;
    return p->dev != RS_PLAN_DEV_CUDA || (a->pt == a->pb && a->pl == a->pr);
}

/* MaxPool or AveragePool the importer kept as an op (pads begin != end, ceil mode, an average that
 * does not count the padding; the engine's pool layers are symmetric, floor mode, counting it):
 * oneDNN's pooling with padding_l and padding_r (ceil mode's last windows: a padding_r past the
 * given pads). Counting the padding (count_include_pad = 1), oneDNN divides by the whole window, as
 * ONNX does where a window lies within the given pads: one past them (ceil mode) is refused; not
 * counting it, oneDNN's avg_exclude_padding. A cuda plan's cuDNN windows: symmetric, floor, counting. */
static bool pool_op(const rs_plan *p, const rs_layer *l, const int *vid, rs_pnode *n)
{
    const rs_op_node *o = l->op;
    const rs_op_attrs *a = &o->a;
    bool max = o->op == RS_OP_MAXPOOL, padded = a->pt || a->pb || a->pl || a->pr;
    if (o->from[0] != RS_OP_IN_SRC || !nchw(&o->in[0]) || !nchw(&o->out) || !pads_ok(p, a) ||
        (p->dev == RS_PLAN_DEV_CUDA && (a->ceil_mode || (!max && padded && !a->count_include_pad))))
        return false;
    n->kind = max ? RS_PK_MAXPOOL : RS_PK_AVGPOOL;
    n->g = (rs_conv_geom){.c = (int)o->in[0].d[1], .h = (int)o->in[0].d[2], .w = (int)o->in[0].d[3], .kh = a->kh,
                          .kw = a->kw, .sh = a->sh, .sw = a->sw, .ph = a->pt, .pw = a->pl, .oh = (int)o->out.d[2],
                          .ow = (int)o->out.d[3]};
    n->avg_exclude = !max && (!a->count_include_pad || !padded); /* unpadded: the same average */
    n->nin = 1;
    n->in[0] = vid[l->src[o->slot[0]]];
    const rs_conv_geom *g = &n->g;
    bool inside = (g->oh - 1) * g->sh - g->ph + g->kh <= g->h + a->pb &&
                  (g->ow - 1) * g->sw - g->pw + g->kw <= g->w + a->pr;
    return rs_plan_pad_end(g->h, g->kh, g->sh, g->ph, g->oh) >= 0 &&
           rs_plan_pad_end(g->w, g->kw, g->sw, g->pw, g->ow) >= 0 && (max || n->avg_exclude || inside);
}

/* A convolution the importer kept as an op (groups: depthwise, grouped; the engine's conv layer has
 * one group): oneDNN's convolution with groups, weights (OC, C / group, KH, KW) as ONNX has them.
 * Returns false when it is not one oneDNN takes here (1-d, computed weights). */
static bool conv_op(rs_plan *p, rs_model *m, const rs_layer *l, const int *vid, rs_pnode *n, rs_status *st, rs_err *err)
{
    const rs_op_node *o = l->op;
    const rs_op_attrs *a = &o->a;
    bool bias = o->nin > 2 && o->from[2] == RS_OP_IN_CONST; /* an empty name: absent */
    if (o->from[0] != RS_OP_IN_SRC || o->from[1] != RS_OP_IN_CONST || (o->nin > 2 && o->from[2] == RS_OP_IN_SRC) ||
        !nchw(&o->in[0]) || !nchw(&o->out) || a->group < 1 || !pads_ok(p, a))
        return false;
    rs_conv_geom g = {.c = (int)o->in[0].d[1], .h = (int)o->in[0].d[2], .w = (int)o->in[0].d[3],
                      .oc = (int)o->out.d[1], .kh = a->kh, .kw = a->kw, .sh = a->sh, .sw = a->sw, .ph = a->pt,
                      .pw = a->pl, .oh = (int)o->out.d[2], .ow = (int)o->out.d[3]};
    if (g.c % a->group || g.oc % a->group || rs_plan_pad_end(g.h, g.kh, g.sh, g.ph, g.oh) < 0 ||
        rs_plan_pad_end(g.w, g.kw, g.sw, g.pw, g.ow) < 0)
        return false;
    n->kind = RS_PK_CONV;
    n->g = g;
    n->group = a->group;
    n->nin = 1;
    n->in[0] = vid[l->src[o->slot[0]]];
    if ((n->w = slot_tensor(p, m, l, o->slot[1])) < 0 || (bias && (n->b = slot_tensor(p, m, l, o->slot[2])) < 0))
        *st = oom(err);
    return true;
}

/* GlobalAveragePool, or ReduceMean over (H, W) of an (N, C, H, W) value (keepdims either way: the
 * same floats): oneDNN's average pooling over the whole image. */
static bool global_pool(const rs_layer *l, const int *vid, rs_pnode *n)
{
    const rs_op_node *o = l->op;
    if (o->from[0] != RS_OP_IN_SRC || !nchw(&o->in[0])) return false;
    if (o->op == RS_OP_REDUCEMEAN && o->a.axes_mask != (1u << 2 | 1u << 3)) return false;
    int h = (int)o->in[0].d[2], w = (int)o->in[0].d[3];
    n->kind = RS_PK_AVGPOOL;
    n->g = (rs_conv_geom){.c = (int)o->in[0].d[1], .h = h, .w = w, .kh = h, .kw = w, .sh = 1, .sw = 1, .oh = 1, .ow = 1};
    n->nin = 1;
    n->in[0] = vid[l->src[o->slot[0]]];
    return true;
}

/* MatMul of a computed (N, ..., K) value by a constant (K, O) matrix, which the importer keeps as an op
 * when a sample has more than two dims (convnext's pointwise layers on (N, H, W, C)): oneDNN's inner
 * product over N x ... rows, its weights the matrix transposed to (O, K). A bias Add after it is
 * folded in by the passes. */
static bool matmul_op(rs_plan *p, rs_model *m, const rs_layer *l, const int *vid, rs_pnode *n, rs_status *st, rs_err *err)
{
    const rs_op_node *o = l->op;
    const rs_dims *x = &o->in[0], *w = &o->in[1];
    if (o->nin != 2 || o->from[0] != RS_OP_IN_SRC || o->from[1] != RS_OP_IN_CONST || w->rank != 2 || x->rank < 2 ||
        rs_dims_batch_pos(x) != 0 || x->d[x->rank - 1] != w->d[0])
        return false;
    int64_t K = w->d[0], O = w->d[1], dims[2] = {O, K};
    char name[64];
    snprintf(name, sizeof name, "%.55s.weight", l->name);
    int t = rs_plan_add_tensor(p, name, 2, dims, NULL);
    if (t < 0) {
        *st = oom(err);
        return true;
    }
    const float *src = rs_model_params(m) + l->p[o->slot[1]].offset;
    float *dst = p->tensors[t].data;
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < O; j++) dst[j * K + k] = src[k * O + j];
    n->kind = RS_PK_LINEAR;
    n->I = (int)K;
    n->O = (int)O;
    n->rows = rs_dims_numel(x, 1) / K;
    n->w = t;
    n->nin = 1;
    n->in[0] = vid[l->src[o->slot[0]]];
    return true;
}

/* An op the plan runs by the engine's rs_op_run on the CPU table (table.c), its constant inputs
 * tensors of the plan's. The one that needs a workspace, a LayerNormalization the engine's layer
 * does not take (over more than the last dimension), gets it as its scratch value `tmp`: mean and
 * 1/std per row and a row of zeros for an absent bias, rs_op_workspace's (2 rows + len) floats. */
static rs_status generic_op(rs_plan *p, rs_model *m, const rs_layer *l, const int *vid, rs_pnode *n, rs_err *err)
{
    const rs_op_node *o = l->op;
    n->kind = RS_PK_OP;
    n->op = o->op;
    n->a = o->a;
    n->nin = o->nin;
    n->dout = o->out;
    for (int i = 0; i < o->nin; i++) {
        n->ds[i] = o->in[i];
        if (o->from[i] == RS_OP_IN_SRC) {
            n->in[i] = vid[l->src[o->slot[i]]];
        } else if (o->from[i] == RS_OP_IN_CONST) {
            n->in[i] = -1; /* not the layer's first source, which the caller put there (Add(bias, x)) */
            n->cin[i] = slot_tensor(p, m, l, o->slot[i]);
            if (n->cin[i] < 0) return oom(err);
        } else {
            return unsupported(l, rs_op_name(o->op), err);
        }
    }
    if (o->op == RS_OP_LAYERNORM) {
        const rs_dims *x = &o->in[0];
        int bp = rs_dims_batch_pos(x);
        if (bp >= o->a.axis || o->from[1] != RS_OP_IN_CONST || (o->nin > 2 && o->from[2] != RS_OP_IN_CONST))
            return unsupported(l, "LayerNormalization over the batch or with computed weights", err);
        int64_t rows = 1, len = 1;
        for (int i = 0; i < x->rank; i++) {
            if (i == bp) continue;
            if (i < o->a.axis) rows *= x->d[i];
            else len *= x->d[i];
        }
        n->eps = o->a.eps;
        if ((n->tmp = rs_plan_add_value(p, 2 * rows + len)) < 0) return oom(err); /* per sample: a bound at any batch */
    }
    return RS_OK;
}

/* A generic op of an imported graph: the ones the plan runs, by the engine's rs_op_run. */
static rs_status op_node(rs_plan *p, rs_model *m, const rs_layer *l, const int *vid, rs_pnode *n, rs_err *err)
{
    const rs_op_node *o = l->op;
    rs_status st = RS_OK;
    switch (o->op) {
    case RS_OP_CONV:
        if (conv_op(p, m, l, vid, n, &st, err)) return st;
        break;
    case RS_OP_GLOBALAVGPOOL:
        if (global_pool(l, vid, n)) return RS_OK;
        break;
    case RS_OP_MAXPOOL:
    case RS_OP_AVGPOOL:
        if (pool_op(p, l, vid, n)) return RS_OK;
        break;
    case RS_OP_MATMUL:
        if (matmul_op(p, m, l, vid, n, &st, err)) return st;
        /* a product of two computed values (attention's scores and mix): the engine's batched matmul */
        return generic_op(p, m, l, vid, n, err);
    case RS_OP_RESHAPE:
        if (o->from[0] != RS_OP_IN_SRC) break;
        n->kind = RS_PK_VIEW;
        n->nin = 1;
        n->in[0] = vid[l->src[o->slot[0]]];
        return RS_OK;
    case RS_OP_UNARY:
        if (o->from[0] != RS_OP_IN_SRC) break;
        n->kind = RS_PK_ACT;
        n->nin = 1;
        n->in[0] = vid[l->src[o->slot[0]]];
        n->act = o->a.sub;
        n->alpha = o->a.alpha;
        n->beta = o->a.beta;
        return RS_OK;
    case RS_OP_REDUCEMEAN:
        if (global_pool(l, vid, n)) return RS_OK;
        /* another reduction runs as the engine's op */
        __attribute__((fallthrough));
    case RS_OP_BINARY:
    case RS_OP_SOFTMAX:
    case RS_OP_LOGSOFTMAX:
    case RS_OP_TRANSPOSE:
    case RS_OP_CONCAT:
    case RS_OP_SLICE:
    case RS_OP_REDUCESUM:
    case RS_OP_EXPAND:
    case RS_OP_WHERE:
    case RS_OP_LAYERNORM: return generic_op(p, m, l, vid, n, err);
    default: break;
    }
    char what[96];
    snprintf(what, sizeof what, "%.23s '%.63s'", o->type, o->name);
    return unsupported(l, what, err);
}

rs_status rs_plan_from_model(rs_plan *p, rs_model *m, rs_err *err)
{
    if (rs_model_device(m).kind != RS_DEV_CPU)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "compile: model %s is not on the CPU", rs_model_name(m));
    int L = rs_model_layer_count(m);
    p->tokens = rs_model_tokens(m);
    p->in = *rs_model_input_shape(m);
    p->classes = rs_model_classes(m);
    p->rows = rs_model_rows(m);
    p->vocab = rs_model_vocab(m);
    if (rs_plan_add_value(p, rs_shape_numel(&p->in)) != 0) return oom(err);
    int *vid = calloc((size_t)L + 1, sizeof *vid); /* owned here */
    if (!vid) return oom(err);
    int *at = vid + 1; /* at[-1] is the model's input */
    at[-1] = 0;
    rs_status st = RS_OK;
    for (int i = 0; i < L && !st; i++) {
        rs_layer *l = rs_model_layer(m, i);
        rs_pnode n = rs_pnode_empty(RS_PK_VIEW, l->name);
        n.nin = 1;
        n.in[0] = at[l->src[0]];
        int64_t out_numel = rs_shape_numel(&l->out);
        switch (l->cfg.kind) {
        case RS_LAYER_LINEAR:
            n.kind = RS_PK_LINEAR;
            n.O = (int)l->p[0].shape.d[0];
            n.I = (int)l->p[0].shape.d[1];
            n.rows = out_numel / n.O;
            if ((n.w = slot_tensor(p, m, l, 0)) < 0 || (l->np > 1 && (n.b = slot_tensor(p, m, l, 1)) < 0)) st = oom(err);
            break;
        case RS_LAYER_CONV2D:
            n.kind = RS_PK_CONV;
            n.g = l->geom;
            if ((n.w = slot_tensor(p, m, l, 0)) < 0 || (l->np > 1 && (n.b = slot_tensor(p, m, l, 1)) < 0)) st = oom(err);
            break;
        case RS_LAYER_MAXPOOL2D:
        case RS_LAYER_AVGPOOL2D:
            n.kind = l->cfg.kind == RS_LAYER_MAXPOOL2D ? RS_PK_MAXPOOL : RS_PK_AVGPOOL;
            n.g = l->geom;
            break;
        case RS_LAYER_FLATTEN:
        case RS_LAYER_DROPOUT: break; /* a view: same bytes (dropout is the identity at inference) */
        case RS_LAYER_LAYERNORM:
            n.kind = RS_PK_LAYERNORM;
            n.C = (int)l->out.d[l->out.ndim - 1];
            n.eps = l->cfg.eps;
            if ((n.w = slot_tensor(p, m, l, 0)) < 0 || (n.b = slot_tensor(p, m, l, 1)) < 0) st = oom(err);
            else if ((n.tmp = rs_plan_add_value(p, 2 * (out_numel / n.C))) < 0) st = oom(err);
            break;
        case RS_LAYER_EMBED:
            n.kind = RS_PK_EMBED;
            n.T = (int)l->out.d[0];
            n.C = (int)l->out.d[1];
            n.V = l->cfg.vocab;
            if ((n.w = slot_tensor(p, m, l, 0)) < 0 || (n.b = slot_tensor(p, m, l, 1)) < 0) st = oom(err);
            break;
        case RS_LAYER_ATTN:
            n.kind = RS_PK_ATTN;
            n.T = (int)l->out.d[0];
            n.C = (int)l->out.d[1];
            n.heads = l->cfg.heads;
            if ((n.tmp = rs_plan_add_value(p, (int64_t)n.heads * n.T * n.T)) < 0) st = oom(err);
            break;
        case RS_LAYER_ADD:
            n.kind = RS_PK_ADD;
            n.nin = 2;
            n.in[1] = at[l->src[1]];
            break;
        case RS_LAYER_OP: st = op_node(p, m, l, at, &n, err); break;
        default:
            /* an activation: one elementwise node, which the passes may fuse into its producer */
            if (rs_layer_unary(l) < 0) {
                st = unsupported(l, rs_layer_kind_name(l->cfg.kind), err);
                break;
            }
            n.kind = RS_PK_ACT;
            n.act = rs_layer_unary(l);
            break;
        }
        if (st) break;
        if ((n.out = rs_plan_add_value(p, out_numel)) < 0 || rs_plan_add_node(p, &n) < 0) {
            st = oom(err);
            break;
        }
        at[i] = n.out;
    }
    if (!st) p->output = at[L - 1];
    free(vid);
    p->nodes_before = p->nnodes;
    return st;
}
