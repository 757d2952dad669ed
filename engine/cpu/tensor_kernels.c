/* The CPU's generic tensor ops (see kernels.def): the operators of imported graphs that no layer
 * covers, forward only. Products go to OpenBLAS through rs_cpu_gemm; the rest are plain loops that
 * follow the ONNX operator definitions (these ops are the glue between a graph's big products, so
 * clarity comes first). Nothing here allocates. Each entry checks its context and arrays, then runs its
 * loop (the *_run function) inside the context's thread scope. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_scope.h"

static size_t numel(const rs_dims *s) { return (size_t)rs_dims_numel(s, 0); }

static void unary_run(rs_unary_op op, const float *x, float *y, size_t n, float alpha, float beta)
{
    switch (op) {
    case RS_UNARY_RELU: for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f; return;
    case RS_UNARY_TANH: for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]); return;
    case RS_UNARY_SIGMOID: for (size_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i])); return;
    case RS_UNARY_ERF: for (size_t i = 0; i < n; i++) y[i] = erff(x[i]); return;
    case RS_UNARY_GELU:
        for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
        return;
    case RS_UNARY_GELU_TANH:
        for (size_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
        }
        return;
    case RS_UNARY_SQRT: for (size_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); return;
    case RS_UNARY_EXP: for (size_t i = 0; i < n; i++) y[i] = expf(x[i]); return;
    case RS_UNARY_LOG: for (size_t i = 0; i < n; i++) y[i] = logf(x[i]); return;
    case RS_UNARY_NEG: for (size_t i = 0; i < n; i++) y[i] = -x[i]; return;
    case RS_UNARY_ABS: for (size_t i = 0; i < n; i++) y[i] = fabsf(x[i]); return;
    case RS_UNARY_RECIPROCAL: for (size_t i = 0; i < n; i++) y[i] = 1.0f / x[i]; return;
    case RS_UNARY_LEAKYRELU: for (size_t i = 0; i < n; i++) y[i] = x[i] >= 0 ? x[i] : alpha * x[i]; return;
    case RS_UNARY_CLIP:
        for (size_t i = 0; i < n; i++) y[i] = x[i] < alpha ? alpha : x[i] > beta ? beta : x[i];
        return;
    case RS_UNARY_HARDSIGMOID:
        for (size_t i = 0; i < n; i++) {
            float v = alpha * x[i] + beta;
            y[i] = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
        }
        return;
    case RS_UNARY_HARDSWISH:
        for (size_t i = 0; i < n; i++) {
            float v = x[i] * (1.0f / 6.0f) + 0.5f;
            y[i] = x[i] * (v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v);
        }
        return;
    case RS_UNARY_CAST_INT: for (size_t i = 0; i < n; i++) y[i] = isfinite(x[i]) ? truncf(x[i]) : 0.0f; return;
    case RS_UNARY_CAST_BOOL: for (size_t i = 0; i < n; i++) y[i] = x[i] != 0.0f ? 1.0f : 0.0f; return;
    case RS_UNARY_NOT: for (size_t i = 0; i < n; i++) y[i] = x[i] == 0.0f ? 1.0f : 0.0f; return;
    case RS_UNARY_SILU: for (size_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i])); return;
    }
}

static inline float binop(rs_binary_op op, float u, float v)
{
    switch (op) {
    case RS_BINARY_ADD: return u + v;
    case RS_BINARY_SUB: return u - v;
    case RS_BINARY_MUL: return u * v;
    case RS_BINARY_DIV: return u / v;
    case RS_BINARY_POW: return v == 2.0f ? u * u : powf(u, v);
    case RS_BINARY_EQUAL: return u == v ? 1.0f : 0.0f;
    case RS_BINARY_LESS: return u < v ? 1.0f : 0.0f;
    case RS_BINARY_GREATER: return u > v ? 1.0f : 0.0f;
    case RS_BINARY_LESS_EQ: return u <= v ? 1.0f : 0.0f;
    case RS_BINARY_GREATER_EQ: return u >= v ? 1.0f : 0.0f;
    case RS_BINARY_FMOD: return fmodf(u, v);
    case RS_BINARY_AND: return u != 0.0f && v != 0.0f ? 1.0f : 0.0f;
    case RS_BINARY_OR: return u != 0.0f || v != 0.0f ? 1.0f : 0.0f;
    case RS_BINARY_XOR: return (u != 0.0f) != (v != 0.0f) ? 1.0f : 0.0f;
    case RS_BINARY_MOD: break;
    }
    /* integer mod as Python and ONNX's fmod=0: the result takes the divisor's sign */
    float r = fmodf(u, v);
    return r != 0.0f && (r < 0.0f) != (v < 0.0f) ? r + v : r;
}

/* Element strides of s aligned right to o's rank, 0 where s broadcasts. */
static void bstrides(const rs_dims *s, const rs_dims *o, int64_t *st)
{
    int64_t acc = 1;
    for (int i = o->rank - 1; i >= 0; i--) {
        int j = i - (o->rank - s->rank);
        int64_t d = j >= 0 ? s->d[j] : 1;
        st[i] = d == 1 ? 0 : acc;
        acc *= d;
    }
}

/* Steps idx, an index into dims d[0..r), to the next position; false after the last. */
static inline bool odometer(int64_t *idx, const int64_t *d, int r)
{
    for (int i = r - 1; i >= 0; i--) {
        if (++idx[i] < d[i]) return true;
        idx[i] = 0;
    }
    return false;
}

static void binary_run(rs_binary_op op, const float *x, const rs_dims *xs, const float *w, const rs_dims *ws, float *y,
                       const rs_dims *ys)
{
    size_t n = numel(ys), nx = numel(xs), nw = numel(ws);
    if (n == 0) return;
    if (nx == n && nw == n) {
        for (size_t i = 0; i < n; i++) y[i] = binop(op, x[i], w[i]);
        return;
    }
    if (nx == n && nw == 1) {
        for (size_t i = 0; i < n; i++) y[i] = binop(op, x[i], w[0]);
        return;
    }
    int64_t sx[RS_DIMS_MAX], sw[RS_DIMS_MAX], idx[RS_DIMS_MAX] = {0};
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
        odometer(idx, ys->d, r - 1);
    }
}

static void select_run(const float *c, const rs_dims *cs, const float *x, const rs_dims *xs, const float *w,
                       const rs_dims *ws, float *y, const rs_dims *ys)
{
    int64_t sc[RS_DIMS_MAX] = {0}, sx[RS_DIMS_MAX], sw[RS_DIMS_MAX] = {0}, idx[RS_DIMS_MAX] = {0};
    if (c) bstrides(cs, ys, sc);
    bstrides(xs, ys, sx);
    if (c) bstrides(ws, ys, sw);
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
        odometer(idx, ys->d, r);
    }
}

static void matmul_run(const float *A, const rs_dims *as0, const float *B, const rs_dims *bs0, float *Y, const rs_dims *ys)
{
    (void)ys;
    rs_dims as = *as0, bs = *bs0;
    if (as.rank == 1) as = (rs_dims){2, {1, as.d[0]}};
    if (bs.rank == 1) bs = (rs_dims){2, {bs.d[0], 1}};
    int M = (int)as.d[as.rank - 2], K = (int)as.d[as.rank - 1], N = (int)bs.d[bs.rank - 1];
    rs_dims ba = {as.rank - 2, {0}}, bb = {bs.rank - 2, {0}}, bo = {0, {0}};
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
        rs_cpu_blas_gemm(false, false, (int)(nb * (size_t)M), N, K, 1.0f, A, K, B, N, 0.0f, Y, N);
        return;
    }
    int64_t sa[RS_DIMS_MAX], sb[RS_DIMS_MAX], idx[RS_DIMS_MAX] = {0};
    bstrides(&ba, &bo, sa);
    bstrides(&bb, &bo, sb);
    for (size_t t = 0; t < nb; t++) {
        int64_t oa = 0, ob = 0;
        for (int i = 0; i < bo.rank; i++) {
            oa += idx[i] * sa[i];
            ob += idx[i] * sb[i];
        }
        rs_cpu_blas_gemm(false, false, M, N, K, 1.0f, A + (size_t)oa * mk, K, B + (size_t)ob * kn, N, 0.0f, Y + t * mn, N);
        odometer(idx, bo.d, bo.rank);
    }
}

static void transpose_run(const float *x, const rs_dims *xs, const int *perm, float *y)
{
    int r = xs->rank;
    int64_t sx[RS_DIMS_MAX], st[RS_DIMS_MAX], yd[RS_DIMS_MAX], idx[RS_DIMS_MAX] = {0};
    int64_t acc = 1;
    for (int i = r - 1; i >= 0; i--) {
        sx[i] = acc;
        acc *= xs->d[i];
    }
    for (int i = 0; i < r; i++) {
        st[i] = sx[perm[i]];
        yd[i] = xs->d[perm[i]];
    }
    size_t n = numel(xs);
    if (n == 0) return;
    /* the innermost output dim as a strided row copy */
    int64_t inner = r ? yd[r - 1] : 1, is = r ? st[r - 1] : 0;
    for (size_t k = 0; k < n; k += (size_t)inner) {
        int64_t off = 0;
        for (int i = 0; i < r - 1; i++) off += idx[i] * st[i];
        for (int64_t j = 0; j < inner; j++) y[k + (size_t)j] = x[off + j * is];
        odometer(idx, yd, r - 1);
    }
}

static void slice_run(const float *x, const rs_dims *xs, const int64_t *starts, const int64_t *steps, float *y,
                      const rs_dims *ys)
{
    int r = xs->rank;
    int64_t sx[RS_DIMS_MAX], idx[RS_DIMS_MAX] = {0}, base = 0, acc = 1;
    for (int i = r - 1; i >= 0; i--) {
        sx[i] = acc * steps[i];
        base += acc * starts[i];
        acc *= xs->d[i];
    }
    size_t n = numel(ys);
    if (n == 0) return;
    int64_t inner = r ? ys->d[r - 1] : 1, is = r ? sx[r - 1] : 0;
    for (size_t k = 0; k < n; k += (size_t)inner) {
        int64_t off = base;
        for (int i = 0; i < r - 1; i++) off += idx[i] * sx[i];
        if (is == 1) memcpy(y + k, x + off, sizeof(float) * (size_t)inner);
        else
            for (int64_t j = 0; j < inner; j++) y[k + (size_t)j] = x[off + j * is];
        odometer(idx, ys->d, r - 1);
    }
}

static void concat_run(int n, const float *const *x, const rs_dims *const *xs, int axis, float *y, const rs_dims *ys)
{
    size_t outer = 1, inner = 1;
    for (int i = 0; i < ys->rank; i++) {
        if (i < axis) outer *= (size_t)ys->d[i];
        else if (i > axis) inner *= (size_t)ys->d[i];
    }
    size_t orow = (size_t)ys->d[axis] * inner, at = 0;
    for (int k = 0; k < n; k++) {
        size_t row = (size_t)xs[k]->d[axis] * inner;
        for (size_t o = 0; o < outer; o++) memcpy(y + o * orow + at, x[k] + o * row, sizeof(float) * row);
        at += row;
    }
}

static void reduce_run(bool mean, const float *x, const rs_dims *xs, uint32_t mask, float *y)
{
    /* Per output element, a double sum over the reduced dims (no buffer of partial sums). */
    int r = xs->rank, nk = 0, nr = 0;
    int64_t kd[RS_DIMS_MAX], ks[RS_DIMS_MAX], rd[RS_DIMS_MAX], rsd[RS_DIMS_MAX], acc = 1;
    int64_t sx[RS_DIMS_MAX];
    for (int i = r - 1; i >= 0; i--) {
        sx[i] = acc;
        acc *= xs->d[i];
    }
    for (int i = 0; i < r; i++) {
        if (mask >> i & 1) {
            rd[nr] = xs->d[i];
            rsd[nr++] = sx[i];
        } else {
            kd[nk] = xs->d[i];
            ks[nk++] = sx[i];
        }
    }
    size_t no = 1, nred = 1;
    for (int i = 0; i < nk; i++) no *= (size_t)kd[i];
    for (int i = 0; i < nr; i++) nred *= (size_t)rd[i];
    int64_t ko[RS_DIMS_MAX] = {0};
    for (size_t o = 0; o < no; o++) {
        int64_t base = 0;
        for (int i = 0; i < nk; i++) base += ko[i] * ks[i];
        double s = 0.0;
        int64_t ro[RS_DIMS_MAX] = {0};
        for (size_t j = 0; j < nred; j++) {
            int64_t off = base;
            for (int i = 0; i < nr; i++) off += ro[i] * rsd[i];
            s += x[off];
            odometer(ro, rd, nr);
        }
        y[o] = (float)(mean ? (nred ? s / (double)nred : NAN) : s);
        odometer(ko, kd, nk);
    }
}

static void softmax_run(const float *x, float *y, size_t outer, size_t len, size_t inner, bool log_out)
{
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

static void trilu_run(const float *x, const rs_dims *xs, bool upper, int64_t k, float *y)
{
    int64_t R = xs->d[xs->rank - 2], C = xs->d[xs->rank - 1];
    size_t mats = R > 0 && C > 0 ? numel(xs) / (size_t)(R * C) : 0;
    for (size_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++) {
                size_t o = (m * (size_t)R + (size_t)i) * (size_t)C + (size_t)j;
                bool keep = upper ? j - i >= k : j - i <= k;
                y[o] = keep ? x[o] : 0.0f;
            }
}

static void pool2d_run(const rs_conv_geom *g, int pb, int pr, bool is_max, bool count_include_pad, int B, const float *x,
                       float *y)
{
    size_t planes = (size_t)B * g->c;
    for (size_t p = 0; p < planes; p++) {
        const float *xp = x + p * g->h * g->w;
        float *yp = y + p * g->oh * g->ow;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                int y0 = oy * g->sh - g->ph, x0 = ox * g->sw - g->pw;
                float m = -FLT_MAX, s = 0.0f;
                int cnt = 0, cnt_pad = 0;
                for (int ki = 0; ki < g->kh; ki++)
                    for (int kj = 0; kj < g->kw; kj++) {
                        int iy = y0 + ki, ix = x0 + kj;
                        if (iy < g->h + pb && ix < g->w + pr) cnt_pad++;
                        if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
                        float v = xp[iy * g->w + ix];
                        m = v > m ? v : m;
                        s += v;
                        cnt++;
                    }
                int c = count_include_pad ? cnt_pad : cnt;
                yp[oy * g->ow + ox] = is_max ? m : (c ? s / (float)c : 0.0f);
            }
    }
}

/* ---- entries ---- */

#define TENSOR_RUN(ctx, call)                                                                          \
    do {                                                                                               \
        int prev_ = cpu_enter(ctx);                                                                    \
        call;                                                                                          \
        cpu_leave(ctx, prev_);                                                                         \
        return RS_OK;                                                                                  \
    } while (0)

/* A shape argument: there, and of a rank the fixed-size index arrays hold. */
#define CPU_DIMS(ctx, who, s)                                                                          \
    do {                                                                                               \
        if (!(s)) return rs_kctx_fail((ctx), RS_ERR_ARG, "%s: %s is NULL", (who), #s);               \
        if ((s)->rank < 0 || (s)->rank > RS_DIMS_MAX)                                                  \
            return rs_kctx_fail((ctx), RS_ERR_ARG, "%s: %s has rank %d; 0 to %d work", (who), #s,     \
                                (s)->rank, RS_DIMS_MAX);                                               \
    } while (0)

rs_status rs_cpu_unary(rs_kctx *ctx, rs_unary_op op, const float *x, float *y, size_t n, float alpha, float beta)
{
    CPU_CTX(ctx, "unary");
    CPU_PTR(ctx, "unary", x, n);
    CPU_PTR(ctx, "unary", y, n);
    TENSOR_RUN(ctx, unary_run(op, x, y, n, alpha, beta));
}

rs_status rs_cpu_binary(rs_kctx *ctx, rs_binary_op op, const float *a, const rs_dims *as, const float *b,
                        const rs_dims *bs, float *y, const rs_dims *ys)
{
    CPU_CTX(ctx, "binary");
    CPU_DIMS(ctx, "binary", as);
    CPU_DIMS(ctx, "binary", bs);
    CPU_DIMS(ctx, "binary", ys);
    size_t n = numel(ys);
    CPU_PTR(ctx, "binary", a, n);
    CPU_PTR(ctx, "binary", b, n);
    CPU_PTR(ctx, "binary", y, n);
    TENSOR_RUN(ctx, binary_run(op, a, as, b, bs, y, ys));
}

rs_status rs_cpu_select(rs_kctx *ctx, const float *c, const rs_dims *cs, const float *a, const rs_dims *as,
                        const float *b, const rs_dims *bs, float *y, const rs_dims *ys)
{
    CPU_CTX(ctx, "select");
    CPU_DIMS(ctx, "select", as);
    CPU_DIMS(ctx, "select", ys);
    size_t n = numel(ys);
    if (c) {
        CPU_DIMS(ctx, "select", cs);
        CPU_DIMS(ctx, "select", bs);
        CPU_PTR(ctx, "select", b, n);
    }
    CPU_PTR(ctx, "select", a, n);
    CPU_PTR(ctx, "select", y, n);
    TENSOR_RUN(ctx, select_run(c, cs, a, as, b, bs, y, ys));
}

rs_status rs_cpu_matmul(rs_kctx *ctx, const float *a, const rs_dims *as, const float *b, const rs_dims *bs, float *y,
                        const rs_dims *ys)
{
    CPU_CTX(ctx, "matmul");
    CPU_DIMS(ctx, "matmul", as);
    CPU_DIMS(ctx, "matmul", bs);
    CPU_DIMS(ctx, "matmul", ys);
    if (as->rank < 1 || bs->rank < 1)
        return rs_kctx_fail(ctx, RS_ERR_ARG, "matmul: operands of rank %d and %d; both need rank >= 1", as->rank,
                            bs->rank);
    size_t n = numel(ys);
    CPU_PTR(ctx, "matmul", a, numel(as));
    CPU_PTR(ctx, "matmul", b, numel(bs));
    CPU_PTR(ctx, "matmul", y, n);
    TENSOR_RUN(ctx, matmul_run(a, as, b, bs, y, ys));
}

rs_status rs_cpu_transpose(rs_kctx *ctx, const float *x, const rs_dims *xs, const int *perm, float *y)
{
    CPU_CTX(ctx, "transpose");
    CPU_DIMS(ctx, "transpose", xs);
    size_t n = numel(xs);
    CPU_PTR(ctx, "transpose", perm, xs->rank);
    CPU_PTR(ctx, "transpose", x, n);
    CPU_PTR(ctx, "transpose", y, n);
    TENSOR_RUN(ctx, transpose_run(x, xs, perm, y));
}

rs_status rs_cpu_slice(rs_kctx *ctx, const float *x, const rs_dims *xs, const int64_t *starts, const int64_t *steps,
                       float *y, const rs_dims *ys)
{
    CPU_CTX(ctx, "slice");
    CPU_DIMS(ctx, "slice", xs);
    CPU_DIMS(ctx, "slice", ys);
    size_t n = numel(ys);
    CPU_PTR(ctx, "slice", starts, xs->rank);
    CPU_PTR(ctx, "slice", steps, xs->rank);
    CPU_PTR(ctx, "slice", x, n);
    CPU_PTR(ctx, "slice", y, n);
    TENSOR_RUN(ctx, slice_run(x, xs, starts, steps, y, ys));
}

rs_status rs_cpu_concat(rs_kctx *ctx, int n, const float *const *x, const rs_dims *const *xs, int axis, float *y,
                        const rs_dims *ys)
{
    CPU_CTX(ctx, "concat");
    CPU_NONNEG(ctx, "concat", n);
    CPU_DIMS(ctx, "concat", ys);
    if (axis < 0 || axis >= ys->rank)
        return rs_kctx_fail(ctx, RS_ERR_ARG, "concat: axis %d of a rank-%d output; 0 to %d work", axis, ys->rank,
                            ys->rank - 1);
    CPU_PTR(ctx, "concat", x, n);
    CPU_PTR(ctx, "concat", xs, n);
    CPU_PTR(ctx, "concat", y, numel(ys));
    TENSOR_RUN(ctx, concat_run(n, x, xs, axis, y, ys));
}

rs_status rs_cpu_reduce(rs_kctx *ctx, bool mean, const float *x, const rs_dims *xs, uint32_t mask, float *y)
{
    CPU_CTX(ctx, "reduce");
    CPU_DIMS(ctx, "reduce", xs);
    CPU_PTR(ctx, "reduce", x, numel(xs));
    CPU_PTR(ctx, "reduce", y, 1);
    TENSOR_RUN(ctx, reduce_run(mean, x, xs, mask, y));
}

rs_status rs_cpu_softmax(rs_kctx *ctx, const float *x, float *y, size_t outer, size_t len, size_t inner, bool log)
{
    CPU_CTX(ctx, "softmax");
    size_t n = outer * len * inner;
    CPU_PTR(ctx, "softmax", x, n);
    CPU_PTR(ctx, "softmax", y, n);
    TENSOR_RUN(ctx, softmax_run(x, y, outer, len, inner, log));
}

rs_status rs_cpu_trilu(rs_kctx *ctx, const float *x, const rs_dims *xs, bool upper, int64_t k, float *y)
{
    CPU_CTX(ctx, "trilu");
    CPU_DIMS(ctx, "trilu", xs);
    if (xs->rank < 2) return rs_kctx_fail(ctx, RS_ERR_ARG, "trilu: x has rank %d; it needs rank >= 2", xs->rank);
    CPU_PTR(ctx, "trilu", x, numel(xs));
    CPU_PTR(ctx, "trilu", y, numel(xs));
    TENSOR_RUN(ctx, trilu_run(x, xs, upper, k, y));
}

rs_status rs_cpu_pool2d(rs_kctx *ctx, const rs_conv_geom *g, int pb, int pr, bool max, bool count_include_pad, int B,
                        const float *in, float *out)
{
    CPU_CTX(ctx, "pool2d");
    RS_KTRY(rs_cpu_check_geom(ctx, "pool2d", g, B, false));
    CPU_NONNEG(ctx, "pool2d", pb);
    CPU_NONNEG(ctx, "pool2d", pr);
    CPU_PTR(ctx, "pool2d", in, B);
    CPU_PTR(ctx, "pool2d", out, B);
    TENSOR_RUN(ctx, pool2d_run(g, pb, pr, max, count_include_pad, B, in, out));
}
