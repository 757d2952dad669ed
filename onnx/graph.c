/* The CPU executor of imported ONNX graphs (see graph.h): shape inference per node, one kernel per
 * op, and a run that lays every computed value out in one arena. Products and convolutions go to
 * the engine's CPU kernels (OpenBLAS sgemm, im2col conv, pools); the rest are plain loops that follow
 * the ONNX operator definitions, written for clarity first since imported graphs are small. */
#include "graph.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"

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

static rs_status node_err(rs_err *err, rs_status code, const rs_onnx_node *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static rs_status node_err(rs_err *err, rs_status code, const rs_onnx_node *n, const char *fmt, ...)
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
            return node_err(err, RS_ERR_SHAPE, n, "shapes %s and %s do not broadcast (dim %d)",
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
            return node_err(err, RS_ERR_SHAPE, n, "cannot reshape %s to %s", rs_onnx_shape_str(x, sa, sizeof sa),
                            rs_onnx_shape_str(out, sb, sizeof sb));
        return RS_OK;
    case RS_ONNX_OP_GEMM: {
        const rs_onnx_shape *w = in[1];
        if (x->rank != 2 || w->rank != 2)
            return node_err(err, RS_ERR_SHAPE, n, "Gemm needs 2-d A and B, got %s and %s",
                            rs_onnx_shape_str(x, sa, sizeof sa), rs_onnx_shape_str(w, sb, sizeof sb));
        int64_t M = a->ta ? x->d[1] : x->d[0], K = a->ta ? x->d[0] : x->d[1];
        int64_t K2 = a->tb ? w->d[1] : w->d[0], N = a->tb ? w->d[0] : w->d[1];
        if (!concrete(K) || !concrete(N))
            return node_err(err, RS_ERR_UNSUPPORTED, n, "the batch dimension cannot be contracted");
        if (K != K2)
            return node_err(err, RS_ERR_SHAPE, n, "inner dimensions differ: A %s%s has K=%lld, B %s%s has K=%lld",
                            rs_onnx_shape_str(x, sa, sizeof sa), a->ta ? "^T" : "", (long long)K,
                            rs_onnx_shape_str(w, sb, sizeof sb), a->tb ? "^T" : "", (long long)K2);
        *out = (rs_onnx_shape){2, {M, N}};
        if (n->nin > 2 && in[2]) {
            rs_onnx_shape o2;
            rs_status st = broadcast(n, out, in[2], &o2, err);
            if (st) return st;
            if (o2.rank != 2 || o2.d[0] != M || o2.d[1] != N)
                return node_err(err, RS_ERR_SHAPE, n, "C %s does not broadcast to (M, N) = %s",
                                rs_onnx_shape_str(in[2], sa, sizeof sa), rs_onnx_shape_str(out, sb, sizeof sb));
        }
        return RS_OK;
    }
    case RS_ONNX_OP_MATMUL: {
        rs_onnx_shape A = *x, B = *in[1];
        if (A.rank < 1 || B.rank < 1) return node_err(err, RS_ERR_SHAPE, n, "MatMul of a scalar");
        bool va = A.rank == 1, vb = B.rank == 1;
        if (va) A = (rs_onnx_shape){2, {1, A.d[0]}};
        if (vb) B = (rs_onnx_shape){2, {B.d[0], 1}};
        int64_t K = A.d[A.rank - 1];
        if (!concrete(K) || !concrete(B.d[B.rank - 1]))
            return node_err(err, RS_ERR_UNSUPPORTED, n, "the batch dimension cannot be contracted");
        if (K != B.d[B.rank - 2])
            return node_err(err, RS_ERR_SHAPE, n, "inner dimensions differ: %s x %s",
                            rs_onnx_shape_str(x, sa, sizeof sa), rs_onnx_shape_str(in[1], sb, sizeof sb));
        rs_onnx_shape ba = {A.rank - 2, {0}}, bb = {B.rank - 2, {0}}, bo;
        memcpy(ba.d, A.d, sizeof(int64_t) * (size_t)ba.rank);
        memcpy(bb.d, B.d, sizeof(int64_t) * (size_t)bb.rank);
        rs_status st = broadcast(n, &ba, &bb, &bo, err);
        if (st) return st;
        if (bo.rank + 2 > RS_ONNX_MAX_RANK) return node_err(err, RS_ERR_UNSUPPORTED, n, "rank too high");
        *out = bo;
        if (!va) out->d[out->rank++] = A.d[A.rank - 2];
        if (!vb) out->d[out->rank++] = B.d[B.rank - 1];
        return RS_OK;
    }
    case RS_ONNX_OP_CONV:
    case RS_ONNX_OP_MAXPOOL:
    case RS_ONNX_OP_AVGPOOL: {
        if (x->rank != 4 && x->rank != 3)
            return node_err(err, RS_ERR_UNSUPPORTED, n, "only 1-d and 2-d windows (input rank 3 or 4), got %s",
                            rs_onnx_shape_str(x, sa, sizeof sa));
        for (int i = 1; i < x->rank; i++)
            if (!concrete(x->d[i]))
                return node_err(err, RS_ERR_UNSUPPORTED, n, "the batch must be the first dimension, got %s",
                                rs_onnx_shape_str(x, sa, sizeof sa));
        int64_t C = x->d[1], H = x->rank == 4 ? x->d[2] : 1, W = x->d[x->rank - 1], OC = C;
        if (C < 1 || H < 1 || W < 1)
            return node_err(err, RS_ERR_SHAPE, n, "empty input %s", rs_onnx_shape_str(x, sa, sizeof sa));
        if (n->op == RS_ONNX_OP_CONV) {
            const rs_onnx_shape *w = in[1];
            if (w->rank != x->rank || a->group < 1 || C % a->group ||
                w->d[1] != C / a->group || w->d[0] % a->group || w->d[w->rank - 1] != a->kw ||
                (x->rank == 4 && w->d[2] != a->kh))
                return node_err(err, RS_ERR_SHAPE, n, "weight %s does not fit input %s (group %d)",
                                rs_onnx_shape_str(w, sa, sizeof sa), rs_onnx_shape_str(x, sb, sizeof sb), a->group);
            OC = w->d[0];
            if (n->nin > 2 && in[2] && (in[2]->rank != 1 || in[2]->d[0] != OC))
                return node_err(err, RS_ERR_SHAPE, n, "bias %s should be (%lld)", rs_onnx_shape_str(in[2], sa, sizeof sa),
                                (long long)OC);
        }
        int64_t oh = pool_out(H, a->kh, a->sh, a->pt, a->pb, a->ceil_mode);
        int64_t ow = pool_out(W, a->kw, a->sw, a->pl, a->pr, a->ceil_mode);
        if (oh < 1 || ow < 1)
            return node_err(err, RS_ERR_SHAPE, n, "window %dx%d is larger than the padded input %s",
                            a->kh, a->kw, rs_onnx_shape_str(x, sa, sizeof sa));
        if (C > INT32_MAX || OC > INT32_MAX || H > INT32_MAX || W > INT32_MAX)
            return node_err(err, RS_ERR_UNSUPPORTED, n, "dimensions too large");
        *out = *x;
        out->d[1] = OC;
        if (x->rank == 4) out->d[2] = oh;
        out->d[x->rank - 1] = ow;
        return RS_OK;
    }
    case RS_ONNX_OP_GLOBALAVGPOOL:
        if (x->rank < 3) return node_err(err, RS_ERR_SHAPE, n, "input %s needs rank >= 3", rs_onnx_shape_str(x, sa, sizeof sa));
        *out = *x;
        for (int i = 2; i < x->rank; i++) {
            if (!concrete(x->d[i])) return node_err(err, RS_ERR_UNSUPPORTED, n, "batch in a spatial dimension");
            out->d[i] = 1;
        }
        return RS_OK;
    case RS_ONNX_OP_UNARY:
    case RS_ONNX_OP_SOFTMAX:
    case RS_ONNX_OP_LOGSOFTMAX:
        *out = *x;
        if ((n->op != RS_ONNX_OP_UNARY) && a->axis >= x->rank)
            return node_err(err, RS_ERR_SHAPE, n, "axis %d out of range for %s", a->axis, rs_onnx_shape_str(x, sa, sizeof sa));
        return RS_OK;
    case RS_ONNX_OP_BINARY:
        return broadcast(n, x, in[1], out, err);
    case RS_ONNX_OP_LAYERNORM: {
        if (a->axis >= x->rank) return node_err(err, RS_ERR_SHAPE, n, "axis %d out of range", a->axis);
        rs_onnx_shape t = {x->rank - a->axis, {0}};
        memcpy(t.d, x->d + a->axis, sizeof(int64_t) * (size_t)t.rank);
        int64_t tn = rs_onnx_shape_numel(&t, -1);
        if (tn < 1) return node_err(err, RS_ERR_UNSUPPORTED, n, "cannot normalise over the batch dimension");
        for (int i = 1; i < n->nin; i++)
            if (in[i] && rs_onnx_shape_numel(in[i], -1) != tn)
                return node_err(err, RS_ERR_SHAPE, n, "%s %s does not match the normalised shape %s",
                                i == 1 ? "scale" : "bias", rs_onnx_shape_str(in[i], sa, sizeof sa),
                                rs_onnx_shape_str(&t, sb, sizeof sb));
        *out = *x;
        return RS_OK;
    }
    case RS_ONNX_OP_BATCHNORM:
        if (x->rank < 2 || !concrete(x->d[1]))
            return node_err(err, RS_ERR_SHAPE, n, "input %s needs channels in dim 1", rs_onnx_shape_str(x, sa, sizeof sa));
        for (int i = 1; i < 5; i++)
            if (in[i]->rank != 1 || in[i]->d[0] != x->d[1])
                return node_err(err, RS_ERR_SHAPE, n, "parameter %d has shape %s, expected (%lld)", i,
                                rs_onnx_shape_str(in[i], sa, sizeof sa), (long long)x->d[1]);
        *out = *x;
        return RS_OK;
    case RS_ONNX_OP_TRANSPOSE:
        out->rank = x->rank;
        for (int i = 0; i < x->rank; i++) out->d[i] = x->d[a->perm[i]];
        return RS_OK;
    case RS_ONNX_OP_CONCAT: {
        *out = *x;
        if (a->axis >= x->rank) return node_err(err, RS_ERR_SHAPE, n, "axis %d out of range", a->axis);
        if (!concrete(x->d[a->axis])) return node_err(err, RS_ERR_UNSUPPORTED, n, "concatenation along the batch");
        for (int i = 1; i < n->nin; i++) {
            const rs_onnx_shape *s = in[i];
            bool ok = s->rank == x->rank && concrete(s->d[a->axis]);
            for (int j = 0; ok && j < x->rank; j++) ok = j == a->axis || s->d[j] == x->d[j];
            if (!ok)
                return node_err(err, RS_ERR_SHAPE, n, "input %d %s does not fit %s along axis %d", i,
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
            if (r && !concrete(x->d[i])) return node_err(err, RS_ERR_UNSUPPORTED, n, "reduction over the batch");
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
            return node_err(err, RS_ERR_SHAPE, n, "slice of rank %d applied to %s", a->shape.rank,
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
                return node_err(err, RS_ERR_SHAPE, n, "slice of dim %d leaves %s", i, rs_onnx_shape_str(x, sa, sizeof sa));
        }
        return RS_OK;
    case RS_ONNX_OP_TRILU:
        if (x->rank < 2 || !concrete(x->d[x->rank - 1]) || !concrete(x->d[x->rank - 2]))
            return node_err(err, RS_ERR_SHAPE, n, "Trilu needs a matrix in the last two dims (not the batch), got %s",
                            rs_onnx_shape_str(x, sa, sizeof sa));
        *out = *x;
        return RS_OK;
    case RS_ONNX_OP_COUNT: break;
    }
    return node_err(err, RS_ERR_INTERNAL, n, "no shape rule");
}

/* ---- kernels ---- */

static size_t numel(const rs_onnx_shape *s) { return (size_t)rs_onnx_shape_numel(s, 0); }

static void unary(const rs_onnx_attrs *a, const float *x, float *y, size_t n)
{
    switch ((rs_onnx_unary)a->sub) {
    case RS_ONNX_RELU: rs_cpu_relu_fwd(x, y, n); return;
    case RS_ONNX_TANH: for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]); return;
    case RS_ONNX_SIGMOID: for (size_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i])); return;
    case RS_ONNX_ERF: for (size_t i = 0; i < n; i++) y[i] = erff(x[i]); return;
    case RS_ONNX_GELU:
        for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
        return;
    case RS_ONNX_GELU_TANH:
        for (size_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
        }
        return;
    case RS_ONNX_SQRT: for (size_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); return;
    case RS_ONNX_EXP: for (size_t i = 0; i < n; i++) y[i] = expf(x[i]); return;
    case RS_ONNX_LOG: for (size_t i = 0; i < n; i++) y[i] = logf(x[i]); return;
    case RS_ONNX_NEG: for (size_t i = 0; i < n; i++) y[i] = -x[i]; return;
    case RS_ONNX_ABS: for (size_t i = 0; i < n; i++) y[i] = fabsf(x[i]); return;
    case RS_ONNX_RECIPROCAL: for (size_t i = 0; i < n; i++) y[i] = 1.0f / x[i]; return;
    case RS_ONNX_LEAKYRELU: for (size_t i = 0; i < n; i++) y[i] = x[i] >= 0 ? x[i] : a->alpha * x[i]; return;
    case RS_ONNX_CLIP:
        for (size_t i = 0; i < n; i++) y[i] = x[i] < a->alpha ? a->alpha : x[i] > a->beta ? a->beta : x[i];
        return;
    case RS_ONNX_HARDSIGMOID:
        for (size_t i = 0; i < n; i++) {
            float v = a->alpha * x[i] + a->beta;
            y[i] = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
        }
        return;
    case RS_ONNX_HARDSWISH:
        for (size_t i = 0; i < n; i++) {
            float v = x[i] * (1.0f / 6.0f) + 0.5f;
            y[i] = x[i] * (v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v);
        }
        return;
    case RS_ONNX_CAST_INT: for (size_t i = 0; i < n; i++) y[i] = isfinite(x[i]) ? truncf(x[i]) : 0.0f; return;
    case RS_ONNX_CAST_BOOL: for (size_t i = 0; i < n; i++) y[i] = x[i] != 0.0f ? 1.0f : 0.0f; return;
    case RS_ONNX_NOT: for (size_t i = 0; i < n; i++) y[i] = x[i] == 0.0f ? 1.0f : 0.0f; return;
    }
}

static inline float binop(int op, float u, float v)
{
    switch (op) {
    case RS_ONNX_ADD: return u + v;
    case RS_ONNX_SUB: return u - v;
    case RS_ONNX_MUL: return u * v;
    case RS_ONNX_DIV: return u / v;
    case RS_ONNX_POW: return v == 2.0f ? u * u : powf(u, v);
    case RS_ONNX_EQUAL: return u == v ? 1.0f : 0.0f;
    case RS_ONNX_LESS: return u < v ? 1.0f : 0.0f;
    case RS_ONNX_GREATER: return u > v ? 1.0f : 0.0f;
    case RS_ONNX_LESS_EQ: return u <= v ? 1.0f : 0.0f;
    case RS_ONNX_GREATER_EQ: return u >= v ? 1.0f : 0.0f;
    case RS_ONNX_FMOD: return fmodf(u, v);
    case RS_ONNX_AND: return u != 0.0f && v != 0.0f ? 1.0f : 0.0f;
    case RS_ONNX_OR: return u != 0.0f || v != 0.0f ? 1.0f : 0.0f;
    case RS_ONNX_XOR: return (u != 0.0f) != (v != 0.0f) ? 1.0f : 0.0f;
    default: {
        /* integer mod as Python and ONNX's fmod=0: the result takes the divisor's sign */
        float r = fmodf(u, v);
        return r != 0.0f && (r < 0.0f) != (v < 0.0f) ? r + v : r;
    }
    }
}

/* Element strides of s aligned right to rank r, 0 where s broadcasts. */
static void bstrides(const rs_onnx_shape *s, const rs_onnx_shape *o, int64_t *st)
{
    int64_t acc = 1;
    for (int i = o->rank - 1; i >= 0; i--) {
        int j = i - (o->rank - s->rank);
        int64_t d = j >= 0 ? s->d[j] : 1;
        st[i] = d == 1 ? 0 : acc;
        acc *= d;
    }
}

static void binary(int op, const float *x, const rs_onnx_shape *xs, const float *w, const rs_onnx_shape *ws,
                   float *y, const rs_onnx_shape *ys)
{
    size_t n = numel(ys), nx = numel(xs), nw = numel(ws);
    if (nx == n && nw == n) {
        for (size_t i = 0; i < n; i++) y[i] = binop(op, x[i], w[i]);
        return;
    }
    if (nx == n && nw == 1) {
        for (size_t i = 0; i < n; i++) y[i] = binop(op, x[i], w[0]);
        return;
    }
    if (n == 0) return;
    int64_t sx[RS_ONNX_MAX_RANK], sw[RS_ONNX_MAX_RANK], idx[RS_ONNX_MAX_RANK] = {0};
    bstrides(xs, ys, sx);
    bstrides(ws, ys, sw);
    int r = ys->rank;
    int64_t inner = r ? ys->d[r - 1] : 1, ix = r ? sx[r - 1] : 0, iw = r ? sw[r - 1] : 0;
    size_t rows = inner ? n / (size_t)inner : 0;
    for (size_t row = 0; row < rows; row++) {
        int64_t ox = 0, ow = 0;
        for (int i = 0; i < r - 1; i++) {
            ox += idx[i] * sx[i];
            ow += idx[i] * sw[i];
        }
        float *yr = y + row * (size_t)inner;
        for (int64_t j = 0; j < inner; j++) yr[j] = binop(op, x[ox + j * ix], w[ow + j * iw]);
        for (int i = r - 2; i >= 0; i--) {
            if (++idx[i] < ys->d[i]) break;
            idx[i] = 0;
        }
    }
}

static void gemm_op(const rs_onnx_attrs *a, const float *A, const rs_onnx_shape *as, const float *B,
                    const rs_onnx_shape *bs, const float *C, const rs_onnx_shape *cs, float *Y, const rs_onnx_shape *ys)
{
    int M = (int)ys->d[0], N = (int)ys->d[1], K = (int)(a->ta ? as->d[0] : as->d[1]);
    float beta = 0.0f;
    if (C) {
        rs_onnx_shape c2 = *cs;
        int64_t sc[RS_ONNX_MAX_RANK];
        bstrides(&c2, ys, sc);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) Y[(size_t)i * N + j] = a->beta * C[i * sc[0] + j * sc[1]];
        beta = 1.0f;
    }
    if (M == 0 || N == 0) return;
    if (K == 0) {
        if (!C) memset(Y, 0, sizeof(float) * (size_t)M * N);
        return;
    }
    rs_cpu_gemm(a->ta, a->tb, M, N, K, a->alpha, A, a->ta ? M : K, B, (int)(a->tb ? K : N), beta, Y, N);
    (void)bs;
}

static void matmul_op(const float *A, const rs_onnx_shape *as0, const float *B, const rs_onnx_shape *bs0, float *Y)
{
    rs_onnx_shape as = *as0, bs = *bs0;
    if (as.rank == 1) as = (rs_onnx_shape){2, {1, as.d[0]}};
    if (bs.rank == 1) bs = (rs_onnx_shape){2, {bs.d[0], 1}};
    int M = (int)as.d[as.rank - 2], K = (int)as.d[as.rank - 1], N = (int)bs.d[bs.rank - 1];
    rs_onnx_shape ba = {as.rank - 2, {0}}, bb = {bs.rank - 2, {0}}, bo = {0, {0}};
    memcpy(ba.d, as.d, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.d, bs.d, sizeof(int64_t) * (size_t)bb.rank);
    bo.rank = ba.rank > bb.rank ? ba.rank : bb.rank;
    for (int i = 0; i < bo.rank; i++) {
        int ia = i - (bo.rank - ba.rank), ib = i - (bo.rank - bb.rank);
        int64_t da = ia >= 0 ? ba.d[ia] : 1, db = ib >= 0 ? bb.d[ib] : 1;
        bo.d[i] = da > db ? da : db;
    }
    size_t nb = numel(&bo), mk = (size_t)M * K, kn = (size_t)K * N, mn = (size_t)M * N;
    if (nb == 0 || mn == 0) return;
    if (K == 0) {
        memset(Y, 0, sizeof(float) * nb * mn);
        return;
    }
    /* (..., M, K) x (K, N): one product over all leading rows */
    if (numel(&bb) == 1 && numel(&ba) == nb) {
        rs_cpu_gemm(false, false, (int)(nb * (size_t)M), N, K, 1.0f, A, K, B, N, 0.0f, Y, N);
        return;
    }
    int64_t sa[RS_ONNX_MAX_RANK], sb[RS_ONNX_MAX_RANK], idx[RS_ONNX_MAX_RANK] = {0};
    bstrides(&ba, &bo, sa);
    bstrides(&bb, &bo, sb);
    for (size_t t = 0; t < nb; t++) {
        int64_t oa = 0, ob = 0;
        for (int i = 0; i < bo.rank; i++) {
            oa += idx[i] * sa[i];
            ob += idx[i] * sb[i];
        }
        rs_cpu_gemm(false, false, M, N, K, 1.0f, A + (size_t)oa * mk, K, B + (size_t)ob * kn, N, 0.0f, Y + t * mn, N);
        for (int i = bo.rank - 1; i >= 0; i--) {
            if (++idx[i] < bo.d[i]) break;
            idx[i] = 0;
        }
    }
}

static rs_conv_geom window_geom(const rs_onnx_attrs *a, const rs_onnx_shape *xs, const rs_onnx_shape *ys)
{
    bool two = xs->rank == 4;
    return (rs_conv_geom){.c = (int)xs->d[1], .h = two ? (int)xs->d[2] : 1, .w = (int)xs->d[xs->rank - 1],
                          .oc = (int)ys->d[1], .kh = a->kh, .kw = a->kw, .sh = a->sh, .sw = a->sw,
                          .ph = a->pt, .pw = a->pl, .oh = two ? (int)ys->d[2] : 1, .ow = (int)ys->d[ys->rank - 1]};
}

/* Depthwise convolution (one input channel per group, MobileNet's 3x3 layers): a direct loop per output
 * plane, which beats an im2col product of one channel. Output channel o reads input channel o / M. */
static rs_status depthwise(const rs_onnx_attrs *a, const rs_conv_geom *g, int B, const float *x, const float *w,
                           const float *bias, float *y)
{
    int M = g->oc / g->c;
    size_t planes = (size_t)B * g->oc;
    #pragma omp parallel for schedule(static) if (planes * g->oh * g->ow >= 65536)
    for (size_t p = 0; p < planes; p++) {
        int o = (int)(p % (size_t)g->oc);
        const float *xp = x + (p / (size_t)g->oc * g->c + (size_t)(o / M)) * g->h * g->w;
        const float *wp = w + (size_t)o * g->kh * g->kw;
        float *yp = y + p * g->oh * g->ow, b0 = bias ? bias[o] : 0.0f;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                int y0 = oy * g->sh - a->pt, x0 = ox * g->sw - a->pl;
                float s = 0.0f;
                for (int ki = 0; ki < g->kh; ki++) {
                    int iy = y0 + ki;
                    if (iy < 0 || iy >= g->h) continue;
                    for (int kj = 0; kj < g->kw; kj++) {
                        int ix = x0 + kj;
                        if (ix >= 0 && ix < g->w) s += xp[iy * g->w + ix] * wp[ki * g->kw + kj];
                    }
                }
                yp[oy * g->ow + ox] = s + b0;
            }
    }
    return RS_OK;
}

static rs_status conv_op(const rs_onnx_node *n, const float *x, const rs_onnx_shape *xs, const float *w,
                         const float *bias, float *y, const rs_onnx_shape *ys, rs_err *err)
{
    const rs_onnx_attrs *a = &n->a;
    rs_conv_geom g = window_geom(a, xs, ys);
    int B = (int)xs->d[0], G = a->group;
    if (B == 0) return RS_OK;
    if (G == 1) {
        /* The engine's training kernel: one product per sample over OpenMP threads, each with its
         * own column buffer that stays in cache. (Tried: one product over the whole batch; slower
         * here, the columns of a batch of 64 spill out of L2.) */
        float *ws = malloc(rs_cpu_conv2d_workspace(&g, B) + 64);
        if (!ws) return node_err(err, RS_ERR_NOMEM, n, "out of memory for the conv workspace");
        rs_cpu_conv2d_fwd(&g, B, x, w, bias, y, ws);
        free(ws);
        return RS_OK;
    }
    if (g.c == G) return depthwise(a, &g, B, x, w, bias, y);
    /* grouped: per sample and group, the input channels, weights and outputs are contiguous slices,
     * which the engine's kernel takes as a batch of one */
    rs_conv_geom gg = g;
    gg.c = g.c / G;
    gg.oc = g.oc / G;
    float *ws = malloc(rs_cpu_conv2d_workspace(&gg, 1) + 64);
    if (!ws) return node_err(err, RS_ERR_NOMEM, n, "out of memory for the conv workspace");
    size_t in_g = (size_t)gg.c * g.h * g.w, out_g = (size_t)gg.oc * g.oh * g.ow;
    size_t w_g = (size_t)gg.oc * gg.c * g.kh * g.kw;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < G; k++)
            rs_cpu_conv2d_fwd(&gg, 1, x + ((size_t)b * G + k) * in_g, w + (size_t)k * w_g,
                              bias ? bias + (size_t)k * gg.oc : NULL, y + ((size_t)b * G + k) * out_g, ws);
    free(ws);
    return RS_OK;
}

/* Any window, any pads, ceil mode; average pools follow count_include_pad (pads count, the part a
 * ceil-mode window hangs past the padding does not, as in ONNX Runtime and PyTorch). */
static void pool_generic(const rs_onnx_attrs *a, bool is_max, const rs_conv_geom *g, int B, const float *x, float *y)
{
    size_t planes = (size_t)B * g->c;
    for (size_t p = 0; p < planes; p++) {
        const float *xp = x + p * g->h * g->w;
        float *yp = y + p * g->oh * g->ow;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                int y0 = oy * g->sh - a->pt, x0 = ox * g->sw - a->pl;
                float m = -FLT_MAX, s = 0.0f;
                int cnt = 0, cnt_pad = 0;
                for (int ki = 0; ki < g->kh; ki++)
                    for (int kj = 0; kj < g->kw; kj++) {
                        int iy = y0 + ki, ix = x0 + kj;
                        if (iy < g->h + a->pb && ix < g->w + a->pr) cnt_pad++;
                        if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
                        float v = xp[iy * g->w + ix];
                        m = v > m ? v : m;
                        s += v;
                        cnt++;
                    }
                int c = a->count_include_pad ? cnt_pad : cnt;
                yp[oy * g->ow + ox] = is_max ? m : (c ? s / (float)c : 0.0f);
            }
    }
}

/* Max pooling with every window inside the input (no padding, floor mode), the shape CNNs use: no
 * argmax to keep (inference), so the engine's training kernel's bookkeeping is skipped; the common
 * 2x2 stride 2 window gets a loop the compiler vectorises. */
static void maxpool_inside(const rs_conv_geom *g, int B, const float *x, float *y)
{
    size_t planes = (size_t)B * g->c;
    #pragma omp parallel for schedule(static) if (planes * g->oh * g->ow >= 65536)
    for (size_t p = 0; p < planes; p++) {
        const float *xp = x + p * g->h * g->w;
        float *yp = y + p * g->oh * g->ow;
        for (int oy = 0; oy < g->oh; oy++) {
            float *yr = yp + (size_t)oy * g->ow;
            const float *r0 = xp + (size_t)oy * g->sh * g->w;
            if (g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2) {
                const float *r1 = r0 + g->w;
                for (int ox = 0; ox < g->ow; ox++) {
                    float a = r0[2 * ox] > r0[2 * ox + 1] ? r0[2 * ox] : r0[2 * ox + 1];
                    float b = r1[2 * ox] > r1[2 * ox + 1] ? r1[2 * ox] : r1[2 * ox + 1];
                    yr[ox] = a > b ? a : b;
                }
                continue;
            }
            for (int ox = 0; ox < g->ow; ox++) yr[ox] = r0[ox * g->sw];
            for (int ki = 0; ki < g->kh; ki++) {
                const float *r = r0 + (size_t)ki * g->w;
                for (int kj = 0; kj < g->kw; kj++)
                    for (int ox = 0; ox < g->ow; ox++) {
                        float v = r[ox * g->sw + kj];
                        yr[ox] = v > yr[ox] ? v : yr[ox];
                    }
            }
        }
    }
}

static rs_status pool_op(const rs_onnx_node *n, const float *x, const rs_onnx_shape *xs, float *y,
                         const rs_onnx_shape *ys, rs_err *err)
{
    const rs_onnx_attrs *a = &n->a;
    rs_conv_geom g = window_geom(a, xs, ys);
    int B = (int)xs->d[0];
    bool is_max = n->op == RS_ONNX_OP_MAXPOOL;
    /* The engine's kernels assume PyTorch's symmetric padding and floor mode. */
    bool sym = a->pt == a->pb && a->pl == a->pr && !a->ceil_mode;
    if (is_max && !a->ceil_mode && !a->pt && !a->pl && !a->pb && !a->pr) {
        maxpool_inside(&g, B, x, y);
    } else if (sym && is_max && a->pt < a->kh && a->pl < a->kw) {
        int32_t *am = malloc(sizeof(int32_t) * ((size_t)B * g.c * g.oh * g.ow + 1));
        if (!am) return node_err(err, RS_ERR_NOMEM, n, "out of memory");
        rs_cpu_maxpool_fwd(&g, B, x, y, am);
        free(am);
    } else if (sym && !is_max && (a->count_include_pad || (a->pt == 0 && a->pl == 0))) {
        rs_cpu_avgpool_fwd(&g, B, x, y);
    } else {
        pool_generic(a, is_max, &g, B, x, y);
    }
    return RS_OK;
}

static void softmax_op(const rs_onnx_attrs *a, bool log_out, const float *x, const rs_onnx_shape *xs, float *y)
{
    size_t outer = 1, len = 1, inner = 1;
    for (int i = 0; i < xs->rank; i++) {
        size_t d = (size_t)xs->d[i];
        if (i < a->axis) outer *= d;
        else if (i == a->axis || a->legacy_softmax) len *= d;
        else inner *= d;
    }
    for (size_t o = 0; o < outer; o++)
        for (size_t in = 0; in < inner; in++) {
            const float *xp = x + o * len * inner + in;
            float *yp = y + o * len * inner + in;
            float m = -INFINITY;
            for (size_t j = 0; j < len; j++) m = xp[j * inner] > m ? xp[j * inner] : m;
            double s = 0.0;
            for (size_t j = 0; j < len; j++) {
                float e = expf(xp[j * inner] - m);
                s += e;
                if (!log_out) yp[j * inner] = e;
            }
            if (log_out) {
                float ls = (float)log(s);
                for (size_t j = 0; j < len; j++) yp[j * inner] = xp[j * inner] - m - ls;
            } else {
                float inv = (float)(1.0 / s);
                for (size_t j = 0; j < len; j++) yp[j * inner] *= inv;
            }
        }
}

static void layernorm_op(const rs_onnx_attrs *a, const float *x, const rs_onnx_shape *xs, const float *scale,
                         const float *bias, float *y)
{
    size_t rows = 1, len = 1;
    for (int i = 0; i < xs->rank; i++) {
        if (i < a->axis) rows *= (size_t)xs->d[i];
        else len *= (size_t)xs->d[i];
    }
    for (size_t r = 0; r < rows; r++) {
        const float *xp = x + r * len;
        float *yp = y + r * len;
        double s = 0.0, s2 = 0.0;
        for (size_t j = 0; j < len; j++) s += xp[j];
        double mean = len ? s / (double)len : 0.0;
        for (size_t j = 0; j < len; j++) s2 += (xp[j] - mean) * (xp[j] - mean);
        float rstd = (float)(1.0 / sqrt((len ? s2 / (double)len : 0.0) + a->eps));
        float mf = (float)mean;
        for (size_t j = 0; j < len; j++)
            yp[j] = (xp[j] - mf) * rstd * (scale ? scale[j] : 1.0f) + (bias ? bias[j] : 0.0f);
    }
}

static void batchnorm_op(const rs_onnx_attrs *a, const float *x, const rs_onnx_shape *xs, const float *const *p,
                         float *y)
{
    size_t B = (size_t)xs->d[0], C = (size_t)xs->d[1], inner = 1;
    for (int i = 2; i < xs->rank; i++) inner *= (size_t)xs->d[i];
    for (size_t c = 0; c < C; c++) {
        /* y = (x - mean) / sqrt(var + eps) * scale + bias, as ONNX Runtime computes it */
        float k = p[0][c] / sqrtf(p[3][c] + a->eps), off = p[1][c] - p[2][c] * k;
        for (size_t b = 0; b < B; b++) {
            const float *xp = x + (b * C + c) * inner;
            float *yp = y + (b * C + c) * inner;
            for (size_t j = 0; j < inner; j++) yp[j] = xp[j] * k + off;
        }
    }
}

static void transpose_op(const rs_onnx_attrs *a, const float *x, const rs_onnx_shape *xs, float *y,
                         const rs_onnx_shape *ys)
{
    int r = xs->rank;
    int64_t sx[RS_ONNX_MAX_RANK], st[RS_ONNX_MAX_RANK], idx[RS_ONNX_MAX_RANK] = {0};
    int64_t acc = 1;
    for (int i = r - 1; i >= 0; i--) {
        sx[i] = acc;
        acc *= xs->d[i];
    }
    for (int i = 0; i < r; i++) st[i] = sx[a->perm[i]];
    size_t n = numel(ys);
    for (size_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int i = 0; i < r; i++) off += idx[i] * st[i];
        y[k] = x[off];
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < ys->d[i]) break;
            idx[i] = 0;
        }
    }
}

static void concat_op(const rs_onnx_node *n, const float *const *ins, const rs_onnx_shape *const *is, float *y,
                      const rs_onnx_shape *ys)
{
    size_t outer = 1, inner = 1;
    for (int i = 0; i < ys->rank; i++) {
        if (i < n->a.axis) outer *= (size_t)ys->d[i];
        else if (i > n->a.axis) inner *= (size_t)ys->d[i];
    }
    size_t orow = (size_t)ys->d[n->a.axis] * inner, at = 0;
    for (int k = 0; k < n->nin; k++) {
        size_t row = (size_t)is[k]->d[n->a.axis] * inner;
        for (size_t o = 0; o < outer; o++) memcpy(y + o * orow + at, ins[k] + o * row, sizeof(float) * row);
        at += row;
    }
}

static void reduce_op(const rs_onnx_node *n, const float *x, const rs_onnx_shape *xs, float *y, const rs_onnx_shape *ys)
{
    int r = xs->rank;
    int64_t so[RS_ONNX_MAX_RANK], idx[RS_ONNX_MAX_RANK] = {0}, acc = 1;
    for (int i = r - 1; i >= 0; i--) {
        bool red = n->a.axes_mask >> i & 1;
        so[i] = red ? 0 : acc;
        if (!red) acc *= xs->d[i];
    }
    size_t no = numel(ys), ni = numel(xs);
    double *s = calloc(no ? no : 1, sizeof(double));
    if (!s) { /* tiny; reductions only run on shapes the importer has bounded */
        memset(y, 0, sizeof(float) * no);
        return;
    }
    for (size_t k = 0; k < ni; k++) {
        int64_t off = 0;
        for (int i = 0; i < r; i++) off += idx[i] * so[i];
        s[off] += x[k];
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < xs->d[i]) break;
            idx[i] = 0;
        }
    }
    double cnt = no ? (double)ni / (double)no : 1.0;
    for (size_t k = 0; k < no; k++) y[k] = (float)(n->op == RS_ONNX_OP_REDUCEMEAN ? s[k] / cnt : s[k]);
    free(s);
}

/* Where(c, x, y) and Expand (x alone) over numpy broadcasting: walks the output with one stride per
 * input, 0 where that input broadcasts. */
static void select_op(const float *c, const rs_onnx_shape *cs, const float *x, const rs_onnx_shape *xs, const float *w,
                      const rs_onnx_shape *ws, float *y, const rs_onnx_shape *ys)
{
    int64_t sc[RS_ONNX_MAX_RANK] = {0}, sx[RS_ONNX_MAX_RANK], sw[RS_ONNX_MAX_RANK] = {0}, idx[RS_ONNX_MAX_RANK] = {0};
    if (c) bstrides(cs, ys, sc);
    bstrides(xs, ys, sx);
    if (w) bstrides(ws, ys, sw);
    int r = ys->rank;
    size_t n = numel(ys);
    for (size_t k = 0; k < n; k++) {
        int64_t oc = 0, ox = 0, ow = 0;
        for (int i = 0; i < r; i++) {
            oc += idx[i] * sc[i];
            ox += idx[i] * sx[i];
            ow += idx[i] * sw[i];
        }
        y[k] = !c || c[oc] != 0.0f ? x[ox] : w[ow];
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < ys->d[i]) break;
            idx[i] = 0;
        }
    }
}

static void slice_op(const rs_onnx_attrs *a, const float *x, const rs_onnx_shape *xs, float *y, const rs_onnx_shape *ys)
{
    int r = xs->rank;
    int64_t sx[RS_ONNX_MAX_RANK], idx[RS_ONNX_MAX_RANK] = {0}, base = 0, acc = 1;
    for (int i = r - 1; i >= 0; i--) {
        bool whole = a->shape.d[i] == RS_ONNX_BATCH;
        sx[i] = acc * (whole ? 1 : a->steps[i]);
        base += acc * (whole ? 0 : a->starts[i]);
        acc *= xs->d[i];
    }
    size_t n = numel(ys);
    int64_t inner = r ? ys->d[r - 1] : 1, is = r ? sx[r - 1] : 0;
    for (size_t k = 0; k < n; k += (size_t)inner) {
        int64_t off = base;
        for (int i = 0; i < r - 1; i++) off += idx[i] * sx[i];
        if (is == 1) memcpy(y + k, x + off, sizeof(float) * (size_t)inner);
        else
            for (int64_t j = 0; j < inner; j++) y[k + (size_t)j] = x[off + j * is];
        for (int i = r - 2; i >= 0; i--) {
            if (++idx[i] < ys->d[i]) break;
            idx[i] = 0;
        }
    }
}

static void trilu_op(const rs_onnx_attrs *a, const float *x, const rs_onnx_shape *xs, float *y)
{
    int64_t R = xs->d[xs->rank - 2], C = xs->d[xs->rank - 1];
    size_t mats = R > 0 && C > 0 ? numel(xs) / (size_t)(R * C) : 0;
    for (size_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++) {
                size_t o = (m * (size_t)R + (size_t)i) * (size_t)C + (size_t)j;
                bool keep = a->upper ? j - i >= a->k : j - i <= a->k;
                y[o] = keep ? x[o] : 0.0f;
            }
}

rs_status rs_onnx_exec(const rs_onnx_node *n, const float *const *ins, const rs_onnx_shape *const *is,
                       float *out, const rs_onnx_shape *os, rs_err *err)
{
    const rs_onnx_attrs *a = &n->a;
    /* nothing to write; and the loops below may not even look at a zero-sized tensor */
    if (numel(os) == 0) return RS_OK;
    switch (n->op) {
    case RS_ONNX_OP_RESHAPE:
        if (out != ins[0]) memcpy(out, ins[0], sizeof(float) * numel(os));
        return RS_OK;
    case RS_ONNX_OP_GEMM:
        gemm_op(a, ins[0], is[0], ins[1], is[1], n->nin > 2 ? ins[2] : NULL, n->nin > 2 ? is[2] : NULL, out, os);
        return RS_OK;
    case RS_ONNX_OP_MATMUL: matmul_op(ins[0], is[0], ins[1], is[1], out); return RS_OK;
    case RS_ONNX_OP_CONV:
        return conv_op(n, ins[0], is[0], ins[1], n->nin > 2 ? ins[2] : NULL, out, os, err);
    case RS_ONNX_OP_MAXPOOL:
    case RS_ONNX_OP_AVGPOOL: return pool_op(n, ins[0], is[0], out, os, err);
    case RS_ONNX_OP_GLOBALAVGPOOL: {
        size_t planes = (size_t)is[0]->d[0] * (size_t)is[0]->d[1], len = planes ? numel(is[0]) / planes : 0;
        for (size_t p = 0; p < planes; p++) {
            double s = 0.0;
            for (size_t j = 0; j < len; j++) s += ins[0][p * len + j];
            out[p] = (float)(s / (double)len);
        }
        return RS_OK;
    }
    case RS_ONNX_OP_UNARY: unary(a, ins[0], out, numel(os)); return RS_OK;
    case RS_ONNX_OP_BINARY: binary(a->sub, ins[0], is[0], ins[1], is[1], out, os); return RS_OK;
    case RS_ONNX_OP_SOFTMAX:
    case RS_ONNX_OP_LOGSOFTMAX: softmax_op(a, n->op == RS_ONNX_OP_LOGSOFTMAX, ins[0], is[0], out); return RS_OK;
    case RS_ONNX_OP_LAYERNORM:
        layernorm_op(a, ins[0], is[0], n->nin > 1 ? ins[1] : NULL, n->nin > 2 ? ins[2] : NULL, out);
        return RS_OK;
    case RS_ONNX_OP_BATCHNORM: batchnorm_op(a, ins[0], is[0], ins + 1, out); return RS_OK;
    case RS_ONNX_OP_TRANSPOSE: transpose_op(a, ins[0], is[0], out, os); return RS_OK;
    case RS_ONNX_OP_CONCAT: concat_op(n, ins, is, out, os); return RS_OK;
    case RS_ONNX_OP_REDUCEMEAN:
    case RS_ONNX_OP_REDUCESUM: reduce_op(n, ins[0], is[0], out, os); return RS_OK;
    case RS_ONNX_OP_WHERE: select_op(ins[0], is[0], ins[1], is[1], ins[2], is[2], out, os); return RS_OK;
    case RS_ONNX_OP_EXPAND: select_op(NULL, NULL, ins[0], is[0], NULL, NULL, out, os); return RS_OK;
    case RS_ONNX_OP_SLICE: slice_op(a, ins[0], is[0], out, os); return RS_OK;
    case RS_ONNX_OP_TRILU: trilu_op(a, ins[0], is[0], out); return RS_OK;
    case RS_ONNX_OP_COUNT: break;
    }
    return node_err(err, RS_ERR_INTERNAL, n, "no kernel");
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
        if ((st = rs_onnx_exec(n, ins, is, ptr[n->out], &shp[n->out], err))) goto done;
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
