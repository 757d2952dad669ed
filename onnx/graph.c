/* The imported graph (see graph.h): the shape rule of every op, which the importer applies node by
 * node with the batch symbolic, and the graph's summary. */
#include "graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rs_status rs_onnx_node_err(rs_err *err, rs_status code, const rs_onnx_node *n, const char *fmt, ...)
{
    char msg[RS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rs_err_set(err, code, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

/* numpy broadcasting of one dim pair; the batch only meets itself or 1. */
static bool bdim(int64_t a, int64_t b, int64_t *out)
{
    if (a == b) *out = a;
    else if (a == 1) *out = b;
    else if (b == 1) *out = a;
    else return false;
    return true;
}

static rs_status broadcast(const rs_onnx_node *n, const rs_dims *a, const rs_dims *b, rs_dims *o,
                           rs_err *err)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    o->rank = r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (!bdim(da, db, &o->d[i])) {
            char sa[96], sb[96];
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "shapes %s and %s do not broadcast (dim %d)",
                            rs_dims_str(a, sa, sizeof sa), rs_dims_str(b, sb, sizeof sb), i);
        }
    }
    return RS_OK;
}

static bool concrete(int64_t d) { return d >= 0; }

static int64_t pool_out(int64_t in, int k, int s, int pa, int pb, bool ceil_mode)
{
    int64_t span = in + pa + pb - k;
    if (span < 0) return 0;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    /* ceil mode: the last window must start inside the input or the left padding (ONNX, PyTorch) */
    if (ceil_mode && (o - 1) * s >= in + pa) o--;
    return o;
}

/* A (M, K) x B (K, N) (either transposed) + C broadcast to (M, N) */
static rs_status infer_gemm(const rs_onnx_node *n, const rs_dims *const *in, rs_dims *out, rs_err *err)
{
    const rs_op_attrs *a = &n->a;
    const rs_dims *x = in[0];
    char sa[96], sb[96];
    const rs_dims *w = in[1];
    if (x->rank != 2 || w->rank != 2)
        return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "Gemm needs 2-d A and B, got %s and %s",
                        rs_dims_str(x, sa, sizeof sa), rs_dims_str(w, sb, sizeof sb));
    int64_t M = a->ta ? x->d[1] : x->d[0], K = a->ta ? x->d[0] : x->d[1];
    int64_t K2 = a->tb ? w->d[1] : w->d[0], N = a->tb ? w->d[0] : w->d[1];
    if (!concrete(K) || !concrete(N))
        return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "the batch dimension cannot be contracted");
    if (K != K2)
        return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "inner dimensions differ: A %s%s has K=%lld, B %s%s has K=%lld",
                        rs_dims_str(x, sa, sizeof sa), a->ta ? "^T" : "", (long long)K,
                        rs_dims_str(w, sb, sizeof sb), a->tb ? "^T" : "", (long long)K2);
    *out = (rs_dims){2, {M, N}};
    if (n->nin > 2 && in[2]) {
        rs_dims o2;
        rs_status st = broadcast(n, out, in[2], &o2, err);
        if (st) return st;
        if (o2.rank != 2 || o2.d[0] != M || o2.d[1] != N)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "C %s does not broadcast to (M, N) = %s",
                            rs_dims_str(in[2], sa, sizeof sa), rs_dims_str(out, sb, sizeof sb));
    }
    return RS_OK;
}

/* numpy matmul: vectors promoted, the stacks broadcast */
static rs_status infer_matmul(const rs_onnx_node *n, const rs_dims *const *in, rs_dims *out, rs_err *err)
{
    const rs_dims *x = in[0];
    char sa[96], sb[96];
    rs_dims A = *x, B = *in[1];
    if (A.rank < 1 || B.rank < 1) return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "MatMul of a scalar");
    bool va = A.rank == 1, vb = B.rank == 1;
    if (va) A = (rs_dims){2, {1, A.d[0]}};
    if (vb) B = (rs_dims){2, {B.d[0], 1}};
    int64_t K = A.d[A.rank - 1];
    if (!concrete(K) || !concrete(B.d[B.rank - 1]))
        return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "the batch dimension cannot be contracted");
    if (K != B.d[B.rank - 2])
        return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "inner dimensions differ: %s x %s",
                        rs_dims_str(x, sa, sizeof sa), rs_dims_str(in[1], sb, sizeof sb));
    rs_dims ba = {A.rank - 2, {0}}, bb = {B.rank - 2, {0}}, bo;
    memcpy(ba.d, A.d, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.d, B.d, sizeof(int64_t) * (size_t)bb.rank);
    rs_status st = broadcast(n, &ba, &bb, &bo, err);
    if (st) return st;
    if (bo.rank + 2 > RS_DIMS_MAX) return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "rank too high");
    *out = bo;
    if (!va) out->d[out->rank++] = A.d[A.rank - 2];
    if (!vb) out->d[out->rank++] = B.d[B.rank - 1];
    return RS_OK;
}

/* Conv and the pools: (N, C, [H,] W) through a window, the weight fitting the input */
static rs_status infer_window(const rs_onnx_node *n, const rs_dims *const *in, rs_dims *out, rs_err *err)
{
    const rs_op_attrs *a = &n->a;
    const rs_dims *x = in[0];
    char sa[96], sb[96];
    if (x->rank != 4 && x->rank != 3)
        return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "only 1-d and 2-d windows (input rank 3 or 4), got %s",
                        rs_dims_str(x, sa, sizeof sa));
    for (int i = 1; i < x->rank; i++)
        if (!concrete(x->d[i]))
            return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "the batch must be the first dimension, got %s",
                            rs_dims_str(x, sa, sizeof sa));
    int64_t C = x->d[1], H = x->rank == 4 ? x->d[2] : 1, W = x->d[x->rank - 1], OC = C;
    if (C < 1 || H < 1 || W < 1)
        return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "empty input %s", rs_dims_str(x, sa, sizeof sa));
    if (n->op == RS_OP_CONV) {
        const rs_dims *w = in[1];
        if (w->rank != x->rank || a->group < 1 || C % a->group ||
            w->d[1] != C / a->group || w->d[0] % a->group || w->d[w->rank - 1] != a->kw ||
            (x->rank == 4 && w->d[2] != a->kh))
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "weight %s does not fit input %s (group %d)",
                            rs_dims_str(w, sa, sizeof sa), rs_dims_str(x, sb, sizeof sb), a->group);
        OC = w->d[0];
        if (n->nin > 2 && in[2] && (in[2]->rank != 1 || in[2]->d[0] != OC))
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "bias %s should be (%lld)", rs_dims_str(in[2], sa, sizeof sa),
                            (long long)OC);
    }
    int64_t oh = pool_out(H, a->kh, a->sh, a->pt, a->pb, a->ceil_mode);
    int64_t ow = pool_out(W, a->kw, a->sw, a->pl, a->pr, a->ceil_mode);
    if (oh < 1 || ow < 1)
        return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "window %dx%d is larger than the padded input %s",
                        a->kh, a->kw, rs_dims_str(x, sa, sizeof sa));
    if (C > INT32_MAX || OC > INT32_MAX || H > INT32_MAX || W > INT32_MAX)
        return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "dimensions too large");
    *out = *x;
    out->d[1] = OC;
    if (x->rank == 4) out->d[2] = oh;
    out->d[x->rank - 1] = ow;
    return RS_OK;
}

/* normalised over the dims from axis on; scale and bias hold that many */
static rs_status infer_layernorm(const rs_onnx_node *n, const rs_dims *const *in, rs_dims *out, rs_err *err)
{
    const rs_op_attrs *a = &n->a;
    const rs_dims *x = in[0];
    char sa[96], sb[96];
    if (a->axis >= x->rank) return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "axis %d out of range", a->axis);
    rs_dims t = {x->rank - a->axis, {0}};
    memcpy(t.d, x->d + a->axis, sizeof(int64_t) * (size_t)t.rank);
    int64_t tn = rs_dims_numel(&t, -1);
    if (tn < 1) return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "cannot normalise over the batch dimension");
    for (int i = 1; i < n->nin; i++)
        if (in[i] && rs_dims_numel(in[i], -1) != tn)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "%s %s does not match the normalised shape %s",
                            i == 1 ? "scale" : "bias", rs_dims_str(in[i], sa, sizeof sa),
                            rs_dims_str(&t, sb, sizeof sb));
    *out = *x;
    return RS_OK;
}

/* inputs equal but along axis, which is not the batch */
static rs_status infer_concat(const rs_onnx_node *n, const rs_dims *const *in, rs_dims *out, rs_err *err)
{
    const rs_op_attrs *a = &n->a;
    const rs_dims *x = in[0];
    char sa[96], sb[96];
    *out = *x;
    if (a->axis >= x->rank) return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "axis %d out of range", a->axis);
    if (!concrete(x->d[a->axis])) return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "concatenation along the batch");
    for (int i = 1; i < n->nin; i++) {
        const rs_dims *s = in[i];
        bool ok = s->rank == x->rank && concrete(s->d[a->axis]);
        for (int j = 0; ok && j < x->rank; j++) ok = j == a->axis || s->d[j] == x->d[j];
        if (!ok)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "input %d %s does not fit %s along axis %d", i,
                            rs_dims_str(s, sa, sizeof sa), rs_dims_str(x, sb, sizeof sb), a->axis);
        out->d[a->axis] += s->d[a->axis];
    }
    return RS_OK;
}

/* the output shape was worked out at import; every index it reads is inside x */
static rs_status infer_slice(const rs_onnx_node *n, const rs_dims *const *in, rs_dims *out, rs_err *err)
{
    const rs_op_attrs *a = &n->a;
    const rs_dims *x = in[0];
    char sa[96];
    if (a->shape.rank != x->rank)
        return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "slice of rank %d applied to %s", a->shape.rank,
                        rs_dims_str(x, sa, sizeof sa));
    *out = a->shape;
    for (int i = 0; i < x->rank; i++) {
        if (out->d[i] == RS_DIM_BATCH) {
            /* the batch is only ever taken whole */
            out->d[i] = x->d[i];
            continue;
        }
        int64_t last = a->starts[i] + (out->d[i] - 1) * a->steps[i];
        if (out->d[i] && (a->starts[i] < 0 || a->starts[i] >= x->d[i] || last < 0 || last >= x->d[i]))
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "slice of dim %d leaves %s", i, rs_dims_str(x, sa, sizeof sa));
    }
    return RS_OK;
}

rs_status rs_onnx_infer(const rs_onnx_node *n, const rs_dims *const *in, int64_t batch, rs_dims *out,
                        rs_err *err)
{
    const rs_op_attrs *a = &n->a;
    const rs_dims *x = in[0];
    char sa[96], sb[96];
    switch (n->op) {
    case RS_OP_RESHAPE:
        *out = a->shape;
        for (int i = 0; i < out->rank; i++)
            if (out->d[i] == RS_DIM_BATCH) out->d[i] = batch;
        if (rs_dims_numel(out, 1) != rs_dims_numel(x, 1))
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "cannot reshape %s to %s", rs_dims_str(x, sa, sizeof sa),
                            rs_dims_str(out, sb, sizeof sb));
        return RS_OK;
    case RS_OP_GEMM: return infer_gemm(n, in, out, err);
    case RS_OP_MATMUL: return infer_matmul(n, in, out, err);
    case RS_OP_CONV:
    case RS_OP_MAXPOOL:
    case RS_OP_AVGPOOL: return infer_window(n, in, out, err);
    case RS_OP_GLOBALAVGPOOL:
        if (x->rank < 3) return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "input %s needs rank >= 3", rs_dims_str(x, sa, sizeof sa));
        *out = *x;
        for (int i = 2; i < x->rank; i++) {
            if (!concrete(x->d[i])) return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "batch in a spatial dimension");
            out->d[i] = 1;
        }
        return RS_OK;
    case RS_OP_UNARY:
    case RS_OP_SOFTMAX:
    case RS_OP_LOGSOFTMAX:
        *out = *x;
        if ((n->op != RS_OP_UNARY) && a->axis >= x->rank)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "axis %d out of range for %s", a->axis, rs_dims_str(x, sa, sizeof sa));
        return RS_OK;
    case RS_OP_BINARY:
        return broadcast(n, x, in[1], out, err);
    case RS_OP_LAYERNORM: return infer_layernorm(n, in, out, err);
    case RS_OP_TRANSPOSE:
        out->rank = x->rank;
        for (int i = 0; i < x->rank; i++) out->d[i] = x->d[a->perm[i]];
        return RS_OK;
    case RS_OP_CONCAT: return infer_concat(n, in, out, err);
    case RS_OP_REDUCEMEAN:
    case RS_OP_REDUCESUM: {
        out->rank = 0;
        for (int i = 0; i < x->rank; i++) {
            bool r = a->axes_mask >> i & 1;
            if (r && !concrete(x->d[i])) return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "reduction over the batch");
            if (!r) out->d[out->rank++] = x->d[i];
            else if (a->keepdims) out->d[out->rank++] = 1;
        }
        return RS_OK;
    }
    case RS_OP_WHERE: {
        rs_dims t;
        rs_status st = broadcast(n, x, in[1], &t, err);
        return st ? st : broadcast(n, &t, in[2], out, err);
    }
    case RS_OP_EXPAND: {
        rs_dims t = a->shape;
        for (int i = 0; i < t.rank; i++)
            if (t.d[i] == RS_DIM_BATCH) t.d[i] = batch;
        return broadcast(n, x, &t, out, err);
    }
    case RS_OP_SLICE: return infer_slice(n, in, out, err);
    case RS_OP_TRILU:
        if (x->rank < 2 || !concrete(x->d[x->rank - 1]) || !concrete(x->d[x->rank - 2]))
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "Trilu needs a matrix in the last two dims (not the batch), got %s",
                            rs_dims_str(x, sa, sizeof sa));
        *out = *x;
        return RS_OK;
    case RS_OP_GATHER: {
        /* table (V, C) [ids (batch, T)] -> (batch, T, C): rows along axis 0 */
        const rs_dims *ix = in[1];
        if (x->rank != 2 || ix->rank + 1 > RS_DIMS_MAX)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "Gather needs a (V, C) table, got %s", rs_dims_str(x, sa, sizeof sa));
        *out = *ix;
        out->d[out->rank++] = x->d[1];
        return RS_OK;
    }
    case RS_OP_COUNT: break;
    }
    return rs_onnx_node_err(err, RS_ERR_INTERNAL, n, "no shape rule");
}

/* ---- runs ---- */

size_t rs_onnx_graph_input_numel(const rs_onnx_graph *g)
{
    const rs_dims *s = &g->values[g->input].shape;
    int64_t n = 1;
    for (int i = 1; i < s->rank; i++) n *= s->d[i];
    return (size_t)n;
}

size_t rs_onnx_graph_output_numel(const rs_onnx_graph *g)
{
    /* per sample: the batch dim counts 1; a fixed batch divides out */
    const rs_dims *s = &g->values[g->output].shape;
    int64_t n = rs_dims_numel(s, 1);
    if (g->fixed_batch > 1) n /= g->fixed_batch;
    return n < 0 ? 0 : (size_t)n;
}

char *rs_onnx_graph_inputs_str(const rs_onnx_graph *g)
{
    size_t cap = 16 + (size_t)g->ninputs * 200, len = 0;
    char *s = malloc(cap), b[96];
    if (!s) return NULL;
    s[0] = '\0';
    for (int k = 0; k < g->ninputs && len < cap; k++)
        len += (size_t)snprintf(s + len, cap - len, "%s%.64s %s at %zu", k ? ", " : "", g->inputs[k].name,
                                rs_dims_str(&g->inputs[k].shape, b, sizeof b), g->inputs[k].offset);
    return s;
}

char *rs_onnx_graph_summary(const rs_onnx_graph *g)
{
    char *ins = g->ninputs > 1 ? rs_onnx_graph_inputs_str(g) : NULL; /* owned here */
    size_t cap = 256 + (size_t)g->nnodes * 200 + (ins ? strlen(ins) : 0), len = 0;
    char *s = malloc(cap);
    if (!s) {
        free(ins);
        return NULL;
    }
    char b1[96], b2[96];
    size_t consts = 0;
    for (int i = 0; i < g->nvalues; i++)
        if (g->values[i].data) consts += (size_t)rs_dims_numel(&g->values[i].shape, 1);
    len += (size_t)snprintf(s + len, cap - len, "onnx graph '%s' (%s, opset %lld): input %s %s -> output %s %s\n",
                            g->name, g->producer, (long long)g->opset, g->values[g->input].name,
                            rs_dims_str(&g->values[g->input].shape, b1, sizeof b1), g->values[g->output].name,
                            rs_dims_str(&g->values[g->output].shape, b2, sizeof b2));
    if (ins) len += (size_t)snprintf(s + len, cap - len, "  packed per sample from the file's inputs %s\n", ins);
    free(ins);
    len += (size_t)snprintf(s + len, cap - len, "%-4s %-24s %-20s %s\n", "#", "node", "op", "output");
    for (int k = 0; k < g->nnodes && len < cap; k++) {
        const rs_onnx_node *n = &g->nodes[k];
        len += (size_t)snprintf(s + len, cap - len, "%-4d %-24.24s %-20.20s %s\n", k, n->name, n->op_type,
                                rs_dims_str(&g->values[n->out].shape, b1, sizeof b1));
    }
    if (len < cap)
        snprintf(s + len, cap - len, "%d nodes, %zu constant floats (%.1f KiB)\n", g->nnodes, consts,
                 (double)consts * 4 / 1024);
    return s;
}

void rs_onnx_graph_free(rs_onnx_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->nvalues; i++) {
        free(g->values[i].name);
        free(g->values[i].data);
    }
    for (int k = 0; k < g->nnodes; k++) {
        free(g->nodes[k].name);
        free(g->nodes[k].op_type);
    }
    for (int k = 0; k < g->ninputs; k++) free(g->inputs[k].name);
    free(g->inputs);
    free(g->values);
    free(g->nodes);
    free(g->name);
    free(g->producer);
    free(g);
}
