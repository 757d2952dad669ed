/* The CPU executor of imported ONNX graphs (see graph.h): shape inference per node and a run that lays
 * every computed value out in one arena; the kernels, one per op, are in graph_exec.c. */
#include "graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[RS_ONNX_OP_COUNT] = {
    "reshape", "gemm", "matmul", "conv", "maxpool", "avgpool", "globalavgpool", "unary", "binary",
    "softmax", "logsoftmax", "layernorm", "batchnorm", "transpose", "concat", "reducemean", "reducesum",
    "where", "expand", "slice", "trilu",
};

const char *rs_onnx_op_name(rs_onnx_op op) { return op < RS_ONNX_OP_COUNT ? op_names[op] : "?"; }

int64_t rs_onnx_shape_numel(const rs_onnx_shape *s, int64_t batch)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        int64_t d = s->d[i] == RS_ONNX_BATCH ? batch : s->d[i];
        if (d < 0) return -1;
        if (d != 0 && n > RS_ONNX_MAX_ELEMS / d) return -1;
        n *= d;
    }
    /* below 2^31, so every dim and count also fits the int the BLAS and conv kernels take */
    return n >= RS_ONNX_MAX_ELEMS ? -1 : n;
}

char *rs_onnx_shape_str(const rs_onnx_shape *s, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < s->rank && k < n; i++) {
        if (s->d[i] == RS_ONNX_BATCH) k += (size_t)snprintf(buf + k, n - k, "%sN", i ? ", " : "");
        else k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)s->d[i]);
    }
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}

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

static rs_status broadcast(const rs_onnx_node *n, const rs_onnx_shape *a, const rs_onnx_shape *b, rs_onnx_shape *o,
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
                            rs_onnx_shape_str(a, sa, sizeof sa), rs_onnx_shape_str(b, sb, sizeof sb), i);
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

rs_status rs_onnx_infer(const rs_onnx_node *n, const rs_onnx_shape *const *in, int64_t batch, rs_onnx_shape *out,
                        rs_err *err)
{
    const rs_onnx_attrs *a = &n->a;
    const rs_onnx_shape *x = in[0];
    char sa[96], sb[96];
    switch (n->op) {
    case RS_ONNX_OP_RESHAPE:
        *out = a->shape;
        for (int i = 0; i < out->rank; i++)
            if (out->d[i] == RS_ONNX_BATCH) out->d[i] = batch;
        if (rs_onnx_shape_numel(out, 1) != rs_onnx_shape_numel(x, 1))
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "cannot reshape %s to %s", rs_onnx_shape_str(x, sa, sizeof sa),
                            rs_onnx_shape_str(out, sb, sizeof sb));
        return RS_OK;
    case RS_ONNX_OP_GEMM: {
        const rs_onnx_shape *w = in[1];
        if (x->rank != 2 || w->rank != 2)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "Gemm needs 2-d A and B, got %s and %s",
                            rs_onnx_shape_str(x, sa, sizeof sa), rs_onnx_shape_str(w, sb, sizeof sb));
        int64_t M = a->ta ? x->d[1] : x->d[0], K = a->ta ? x->d[0] : x->d[1];
        int64_t K2 = a->tb ? w->d[1] : w->d[0], N = a->tb ? w->d[0] : w->d[1];
        if (!concrete(K) || !concrete(N))
            return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "the batch dimension cannot be contracted");
        if (K != K2)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "inner dimensions differ: A %s%s has K=%lld, B %s%s has K=%lld",
                            rs_onnx_shape_str(x, sa, sizeof sa), a->ta ? "^T" : "", (long long)K,
                            rs_onnx_shape_str(w, sb, sizeof sb), a->tb ? "^T" : "", (long long)K2);
        *out = (rs_onnx_shape){2, {M, N}};
        if (n->nin > 2 && in[2]) {
            rs_onnx_shape o2;
            rs_status st = broadcast(n, out, in[2], &o2, err);
            if (st) return st;
            if (o2.rank != 2 || o2.d[0] != M || o2.d[1] != N)
                return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "C %s does not broadcast to (M, N) = %s",
                                rs_onnx_shape_str(in[2], sa, sizeof sa), rs_onnx_shape_str(out, sb, sizeof sb));
        }
        return RS_OK;
    }
    case RS_ONNX_OP_MATMUL: {
        rs_onnx_shape A = *x, B = *in[1];
        if (A.rank < 1 || B.rank < 1) return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "MatMul of a scalar");
        bool va = A.rank == 1, vb = B.rank == 1;
        if (va) A = (rs_onnx_shape){2, {1, A.d[0]}};
        if (vb) B = (rs_onnx_shape){2, {B.d[0], 1}};
        int64_t K = A.d[A.rank - 1];
        if (!concrete(K) || !concrete(B.d[B.rank - 1]))
            return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "the batch dimension cannot be contracted");
        if (K != B.d[B.rank - 2])
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "inner dimensions differ: %s x %s",
                            rs_onnx_shape_str(x, sa, sizeof sa), rs_onnx_shape_str(in[1], sb, sizeof sb));
        rs_onnx_shape ba = {A.rank - 2, {0}}, bb = {B.rank - 2, {0}}, bo;
        memcpy(ba.d, A.d, sizeof(int64_t) * (size_t)ba.rank);
        memcpy(bb.d, B.d, sizeof(int64_t) * (size_t)bb.rank);
        rs_status st = broadcast(n, &ba, &bb, &bo, err);
        if (st) return st;
        if (bo.rank + 2 > RS_ONNX_MAX_RANK) return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "rank too high");
        *out = bo;
        if (!va) out->d[out->rank++] = A.d[A.rank - 2];
        if (!vb) out->d[out->rank++] = B.d[B.rank - 1];
        return RS_OK;
    }
    case RS_ONNX_OP_CONV:
    case RS_ONNX_OP_MAXPOOL:
    case RS_ONNX_OP_AVGPOOL: {
        if (x->rank != 4 && x->rank != 3)
            return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "only 1-d and 2-d windows (input rank 3 or 4), got %s",
                            rs_onnx_shape_str(x, sa, sizeof sa));
        for (int i = 1; i < x->rank; i++)
            if (!concrete(x->d[i]))
                return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "the batch must be the first dimension, got %s",
                                rs_onnx_shape_str(x, sa, sizeof sa));
        int64_t C = x->d[1], H = x->rank == 4 ? x->d[2] : 1, W = x->d[x->rank - 1], OC = C;
        if (C < 1 || H < 1 || W < 1)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "empty input %s", rs_onnx_shape_str(x, sa, sizeof sa));
        if (n->op == RS_ONNX_OP_CONV) {
            const rs_onnx_shape *w = in[1];
            if (w->rank != x->rank || a->group < 1 || C % a->group ||
                w->d[1] != C / a->group || w->d[0] % a->group || w->d[w->rank - 1] != a->kw ||
                (x->rank == 4 && w->d[2] != a->kh))
                return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "weight %s does not fit input %s (group %d)",
                                rs_onnx_shape_str(w, sa, sizeof sa), rs_onnx_shape_str(x, sb, sizeof sb), a->group);
            OC = w->d[0];
            if (n->nin > 2 && in[2] && (in[2]->rank != 1 || in[2]->d[0] != OC))
                return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "bias %s should be (%lld)", rs_onnx_shape_str(in[2], sa, sizeof sa),
                                (long long)OC);
        }
        int64_t oh = pool_out(H, a->kh, a->sh, a->pt, a->pb, a->ceil_mode);
        int64_t ow = pool_out(W, a->kw, a->sw, a->pl, a->pr, a->ceil_mode);
        if (oh < 1 || ow < 1)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "window %dx%d is larger than the padded input %s",
                            a->kh, a->kw, rs_onnx_shape_str(x, sa, sizeof sa));
        if (C > INT32_MAX || OC > INT32_MAX || H > INT32_MAX || W > INT32_MAX)
            return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "dimensions too large");
        *out = *x;
        out->d[1] = OC;
        if (x->rank == 4) out->d[2] = oh;
        out->d[x->rank - 1] = ow;
        return RS_OK;
    }
    case RS_ONNX_OP_GLOBALAVGPOOL:
        if (x->rank < 3) return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "input %s needs rank >= 3", rs_onnx_shape_str(x, sa, sizeof sa));
        *out = *x;
        for (int i = 2; i < x->rank; i++) {
            if (!concrete(x->d[i])) return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "batch in a spatial dimension");
            out->d[i] = 1;
        }
        return RS_OK;
    case RS_ONNX_OP_UNARY:
    case RS_ONNX_OP_SOFTMAX:
    case RS_ONNX_OP_LOGSOFTMAX:
        *out = *x;
        if ((n->op != RS_ONNX_OP_UNARY) && a->axis >= x->rank)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "axis %d out of range for %s", a->axis, rs_onnx_shape_str(x, sa, sizeof sa));
        return RS_OK;
    case RS_ONNX_OP_BINARY:
        return broadcast(n, x, in[1], out, err);
    case RS_ONNX_OP_LAYERNORM: {
        if (a->axis >= x->rank) return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "axis %d out of range", a->axis);
        rs_onnx_shape t = {x->rank - a->axis, {0}};
        memcpy(t.d, x->d + a->axis, sizeof(int64_t) * (size_t)t.rank);
        int64_t tn = rs_onnx_shape_numel(&t, -1);
        if (tn < 1) return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "cannot normalise over the batch dimension");
        for (int i = 1; i < n->nin; i++)
            if (in[i] && rs_onnx_shape_numel(in[i], -1) != tn)
                return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "%s %s does not match the normalised shape %s",
                                i == 1 ? "scale" : "bias", rs_onnx_shape_str(in[i], sa, sizeof sa),
                                rs_onnx_shape_str(&t, sb, sizeof sb));
        *out = *x;
        return RS_OK;
    }
    case RS_ONNX_OP_BATCHNORM:
        if (x->rank < 2 || !concrete(x->d[1]))
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "input %s needs channels in dim 1", rs_onnx_shape_str(x, sa, sizeof sa));
        for (int i = 1; i < 5; i++)
            if (in[i]->rank != 1 || in[i]->d[0] != x->d[1])
                return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "parameter %d has shape %s, expected (%lld)", i,
                                rs_onnx_shape_str(in[i], sa, sizeof sa), (long long)x->d[1]);
        *out = *x;
        return RS_OK;
    case RS_ONNX_OP_TRANSPOSE:
        out->rank = x->rank;
        for (int i = 0; i < x->rank; i++) out->d[i] = x->d[a->perm[i]];
        return RS_OK;
    case RS_ONNX_OP_CONCAT: {
        *out = *x;
        if (a->axis >= x->rank) return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "axis %d out of range", a->axis);
        if (!concrete(x->d[a->axis])) return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "concatenation along the batch");
        for (int i = 1; i < n->nin; i++) {
            const rs_onnx_shape *s = in[i];
            bool ok = s->rank == x->rank && concrete(s->d[a->axis]);
            for (int j = 0; ok && j < x->rank; j++) ok = j == a->axis || s->d[j] == x->d[j];
            if (!ok)
                return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "input %d %s does not fit %s along axis %d", i,
                                rs_onnx_shape_str(s, sa, sizeof sa), rs_onnx_shape_str(x, sb, sizeof sb), a->axis);
            out->d[a->axis] += s->d[a->axis];
        }
        return RS_OK;
    }
    case RS_ONNX_OP_REDUCEMEAN:
    case RS_ONNX_OP_REDUCESUM: {
        out->rank = 0;
        for (int i = 0; i < x->rank; i++) {
            bool r = a->axes_mask >> i & 1;
            if (r && !concrete(x->d[i])) return rs_onnx_node_err(err, RS_ERR_UNSUPPORTED, n, "reduction over the batch");
            if (!r) out->d[out->rank++] = x->d[i];
            else if (a->keepdims) out->d[out->rank++] = 1;
        }
        return RS_OK;
    }
    case RS_ONNX_OP_WHERE: {
        rs_onnx_shape t;
        rs_status st = broadcast(n, x, in[1], &t, err);
        return st ? st : broadcast(n, &t, in[2], out, err);
    }
    case RS_ONNX_OP_EXPAND: {
        rs_onnx_shape t = a->shape;
        for (int i = 0; i < t.rank; i++)
            if (t.d[i] == RS_ONNX_BATCH) t.d[i] = batch;
        return broadcast(n, x, &t, out, err);
    }
    case RS_ONNX_OP_SLICE:
        if (a->shape.rank != x->rank)
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "slice of rank %d applied to %s", a->shape.rank,
                            rs_onnx_shape_str(x, sa, sizeof sa));
        *out = a->shape;
        for (int i = 0; i < x->rank; i++) {
            if (out->d[i] == RS_ONNX_BATCH) {
                /* the batch is only ever taken whole */
                out->d[i] = x->d[i];
                continue;
            }
            int64_t last = a->starts[i] + (out->d[i] - 1) * a->steps[i];
            if (out->d[i] && (a->starts[i] < 0 || a->starts[i] >= x->d[i] || last < 0 || last >= x->d[i]))
                return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "slice of dim %d leaves %s", i, rs_onnx_shape_str(x, sa, sizeof sa));
        }
        return RS_OK;
    case RS_ONNX_OP_TRILU:
        if (x->rank < 2 || !concrete(x->d[x->rank - 1]) || !concrete(x->d[x->rank - 2]))
            return rs_onnx_node_err(err, RS_ERR_SHAPE, n, "Trilu needs a matrix in the last two dims (not the batch), got %s",
                            rs_onnx_shape_str(x, sa, sizeof sa));
        *out = *x;
        return RS_OK;
    case RS_ONNX_OP_COUNT: break;
    }
    return rs_onnx_node_err(err, RS_ERR_INTERNAL, n, "no shape rule");
}

/* ---- runs ---- */

size_t rs_onnx_graph_input_numel(const rs_onnx_graph *g)
{
    const rs_onnx_shape *s = &g->values[g->input].shape;
    int64_t n = 1;
    for (int i = 1; i < s->rank; i++) n *= s->d[i];
    return (size_t)n;
}

size_t rs_onnx_graph_output_numel(const rs_onnx_graph *g)
{
    /* per sample: the batch dim counts 1; a fixed batch divides out */
    const rs_onnx_shape *s = &g->values[g->output].shape;
    int64_t n = rs_onnx_shape_numel(s, 1);
    if (g->fixed_batch > 1) n /= g->fixed_batch;
    return n < 0 ? 0 : (size_t)n;
}

static rs_status run_chunk(rs_onnx_graph *g, const float *x, int64_t B, float *y, rs_err *err)
{
    rs_status st = RS_OK;
    rs_onnx_shape *shp = malloc(sizeof(rs_onnx_shape) * (size_t)g->nvalues);
    float **ptr = calloc((size_t)g->nvalues, sizeof(float *));
    size_t *off = malloc(sizeof(size_t) * (size_t)g->nvalues);
    if (!shp || !ptr || !off) {
        st = rs_err_set(err, RS_ERR_NOMEM, "onnx run: out of memory");
        goto done;
    }
    for (int i = 0; i < g->nvalues; i++) {
        shp[i] = g->values[i].shape;
        off[i] = SIZE_MAX;
    }
    for (int i = 0; i < shp[g->input].rank && i < RS_ONNX_MAX_RANK; i++)
        if (shp[g->input].d[i] == RS_ONNX_BATCH) shp[g->input].d[i] = B;
    /* shapes and arena layout (reshape-like ops alias their input: no buffer) */
    size_t total = 0;
    for (int k = 0; k < g->nnodes; k++) {
        const rs_onnx_node *n = &g->nodes[k];
        const rs_onnx_shape *is[RS_ONNX_MAX_IN] = {0};
        for (int j = 0; j < n->nin; j++) is[j] = n->in[j] >= 0 ? &shp[n->in[j]] : NULL;
        if ((st = rs_onnx_infer(n, is, B, &shp[n->out], err))) goto done;
        int64_t ne = rs_onnx_shape_numel(&shp[n->out], 1);
        if (ne < 0) {
            st = rs_err_set(err, RS_ERR_ARG, "onnx run: batch %lld makes node '%s' too large", (long long)B, n->name);
            goto done;
        }
        if (n->op == RS_ONNX_OP_RESHAPE) continue;
        off[n->out] = total;
        total += ((size_t)ne + 15) & ~(size_t)15;
    }
    if (total > g->arena_floats) {
        free(g->arena);
        g->arena_floats = 0;
        g->arena = malloc(sizeof(float) * total);
        if (!g->arena) {
            st = rs_err_set(err, RS_ERR_NOMEM, "onnx run: out of memory for %zu activation floats", total);
            goto done;
        }
        g->arena_floats = total;
    }
    for (int i = 0; i < g->nvalues; i++) {
        if (g->values[i].data) ptr[i] = g->values[i].data;
        else if (off[i] != SIZE_MAX) ptr[i] = g->arena + off[i];
    }
    ptr[g->input] = (float *)x; /* read only: no kernel writes its inputs */
    for (int k = 0; k < g->nnodes; k++) {
        const rs_onnx_node *n = &g->nodes[k];
        const float *ins[RS_ONNX_MAX_IN] = {0};
        const rs_onnx_shape *is[RS_ONNX_MAX_IN] = {0};
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] >= 0) {
                ins[j] = ptr[n->in[j]];
                is[j] = &shp[n->in[j]];
            }
        if (n->op == RS_ONNX_OP_RESHAPE) {
            ptr[n->out] = ptr[n->in[0]];
            continue;
        }
        if ((st = rs_onnx_exec(rs_onnx_graph_ctx(g), n, ins, is, ptr[n->out], &shp[n->out], err))) goto done;
    }
    size_t want = rs_onnx_graph_output_numel(g) * (size_t)B, got = (size_t)rs_onnx_shape_numel(&shp[g->output], 1);
    if (g->fixed_batch > 1) want = rs_onnx_graph_output_numel(g) * (size_t)g->fixed_batch;
    if (got != want) {
        st = rs_err_set(err, RS_ERR_INTERNAL, "onnx run: output has %zu values, expected %zu", got, want);
        goto done;
    }
    memcpy(y, ptr[g->output], sizeof(float) * got);
done:
    free(shp);
    free(ptr);
    free(off);
    return st;
}

rs_kctx *rs_onnx_graph_ctx(rs_onnx_graph *g)
{
    /* Made on first use, so every way a graph comes to be (import, tests) gets one. */
    if (!g->ctx.k) rs_kctx_init(&g->ctx, &rs_cpu_kernels, 0, NULL);
    return &g->ctx;
}

rs_status rs_onnx_run(rs_onnx_graph *g, const float *x, int batch, float *y, rs_err *err)
{
    if (!g || !x || !y || batch < 1) return rs_err_set(err, RS_ERR_ARG, "onnx run: need a graph, x, y and batch >= 1");
    if (!g->fixed_batch) return run_chunk(g, x, batch, y, err);
    /* The file fixed the batch (often at 1): run it that many rows at a time. */
    if (batch % g->fixed_batch)
        return rs_err_set(err, RS_ERR_SHAPE, "onnx run: the model's batch is fixed at %lld; %d is not a multiple",
                          (long long)g->fixed_batch, batch);
    size_t in = rs_onnx_graph_input_numel(g) * (size_t)g->fixed_batch;
    size_t out = rs_onnx_graph_output_numel(g) * (size_t)g->fixed_batch;
    for (int64_t b = 0; b < batch; b += g->fixed_batch) {
        size_t chunk = (size_t)(b / g->fixed_batch);
        rs_status st = run_chunk(g, x + chunk * in, g->fixed_batch, y + chunk * out, err);
        if (st) return st;
    }
    return RS_OK;
}

char *rs_onnx_graph_summary(const rs_onnx_graph *g)
{
    size_t cap = 256 + (size_t)g->nnodes * 200, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    char b1[96], b2[96];
    size_t consts = 0;
    for (int i = 0; i < g->nvalues; i++)
        if (g->values[i].data) consts += (size_t)rs_onnx_shape_numel(&g->values[i].shape, 1);
    len += (size_t)snprintf(s + len, cap - len, "onnx graph '%s' (%s, opset %lld): input %s %s -> output %s %s\n",
                            g->name, g->producer, (long long)g->opset, g->values[g->input].name,
                            rs_onnx_shape_str(&g->values[g->input].shape, b1, sizeof b1), g->values[g->output].name,
                            rs_onnx_shape_str(&g->values[g->output].shape, b2, sizeof b2));
    len += (size_t)snprintf(s + len, cap - len, "%-4s %-24s %-20s %s\n", "#", "node", "op", "output");
    for (int k = 0; k < g->nnodes && len < cap; k++) {
        const rs_onnx_node *n = &g->nodes[k];
        len += (size_t)snprintf(s + len, cap - len, "%-4d %-24.24s %-20.20s %s\n", k, n->name, n->op_type,
                                rs_onnx_shape_str(&g->values[n->out].shape, b1, sizeof b1));
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
    free(g->values);
    free(g->nodes);
    free(g->name);
    free(g->producer);
    free(g->arena);
    free(g);
}
