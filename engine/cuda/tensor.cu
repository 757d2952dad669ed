// The generic tensor ops on CUDA (the operators of imported graphs; forward only), following
// engine/cpu/tensor_kernels.c. Every index computation is one pattern: an output element's position
// in the output dims, dotted with each operand's element strides (0 where it broadcasts), which the
// host works out once and passes by value (struct strided). Products go to cuBLAS.
#include <string.h>

#include "kernel_util.cuh"

static size_t numel(const rs_dims *s) { return (size_t)rs_dims_numel(s, 0); }

// Up to three operands read at strided positions of an output of rank r.
struct strided {
    int r;
    long long d[RS_DIMS_MAX];
    long long s[3][RS_DIMS_MAX];
    long long base[3];
};

__device__ static inline void offsets(const strided &t, size_t k, long long *o0, long long *o1, long long *o2)
{
    long long a = t.base[0], b = t.base[1], c = t.base[2];
    for (int i = t.r - 1; i >= 0; i--) {
        long long x = (long long)(k % (size_t)t.d[i]);
        k /= (size_t)t.d[i];
        a += x * t.s[0][i];
        b += x * t.s[1][i];
        c += x * t.s[2][i];
    }
    *o0 = a;
    *o1 = b;
    *o2 = c;
}

// Element strides of s aligned right to o's rank, 0 where s broadcasts (the CPU's bstrides).
static void bstrides(const rs_dims *s, const rs_dims *o, long long *st)
{
    long long acc = 1;
    for (int i = o->rank - 1; i >= 0; i--) {
        int j = i - (o->rank - s->rank);
        long long d = j >= 0 ? s->d[j] : 1;
        st[i] = d == 1 ? 0 : acc;
        acc *= d;
    }
}

static strided out_dims(const rs_dims *ys)
{
    strided t;
    memset(&t, 0, sizeof t);
    t.r = ys->rank;
    for (int i = 0; i < ys->rank; i++) t.d[i] = ys->d[i];
    return t;
}

// ---- binary, select ----

__device__ static inline float binop(rs_binary_op op, float u, float v)
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
    float r = fmodf(u, v); // Python's mod: the divisor's sign
    return r != 0.0f && (r < 0.0f) != (v < 0.0f) ? r + v : r;
}

__global__ static void k_binary(rs_binary_op op, const float *a, const float *b, float *y, strided t, size_t n)
{
    GRID_STRIDE(k, n)
    {
        long long oa, ob, unused;
        offsets(t, k, &oa, &ob, &unused);
        y[k] = binop(op, a[oa], b[ob]);
    }
}

extern "C" rs_status rs_cuda_binary(rs_kctx *ctx, rs_binary_op op, const float *a, const rs_dims *as, const float *b,
                                    const rs_dims *bs, float *y, const rs_dims *ys)
{
    CU_CTX(ctx, "binary");
    CU_DIMS(ctx, "binary", as);
    CU_DIMS(ctx, "binary", bs);
    CU_DIMS(ctx, "binary", ys);
    size_t n = numel(ys);
    CU_PTR(ctx, "binary", a, n);
    CU_PTR(ctx, "binary", b, n);
    CU_PTR(ctx, "binary", y, n);
    if (!n) return RS_OK;
    strided t = out_dims(ys);
    bstrides(as, ys, t.s[0]);
    bstrides(bs, ys, t.s[1]);
    k_binary LAUNCH(n)(op, a, b, y, t, n);
    return cu_launched(ctx, "binary");
}

__global__ static void k_select(const float *c, const float *a, const float *b, float *y, strided t, size_t n)
{
    GRID_STRIDE(k, n)
    {
        long long oc, oa, ob;
        offsets(t, k, &oc, &oa, &ob);
        y[k] = !c || c[oc] != 0.0f ? a[oa] : b[ob];
    }
}

extern "C" rs_status rs_cuda_select(rs_kctx *ctx, const float *c, const rs_dims *cs, const float *a, const rs_dims *as,
                                    const float *b, const rs_dims *bs, float *y, const rs_dims *ys)
{
    CU_CTX(ctx, "select");
    CU_DIMS(ctx, "select", as);
    CU_DIMS(ctx, "select", ys);
    size_t n = numel(ys);
    if (c) {
        CU_DIMS(ctx, "select", cs);
        CU_DIMS(ctx, "select", bs);
        CU_PTR(ctx, "select", b, n);
    }
    CU_PTR(ctx, "select", a, n);
    CU_PTR(ctx, "select", y, n);
    if (!n) return RS_OK;
    strided t = out_dims(ys);
    bstrides(as, ys, t.s[1]);
    if (c) {
        bstrides(cs, ys, t.s[0]);
        bstrides(bs, ys, t.s[2]);
    }
    k_select LAUNCH(n)(c, a, c ? b : NULL, y, t, n);
    return cu_launched(ctx, "select");
}

// ---- matmul ----

extern "C" rs_status rs_cuda_matmul(rs_kctx *ctx, const float *a, const rs_dims *as0, const float *b, const rs_dims *bs0,
                                    float *y, const rs_dims *ys)
{
    CU_CTX(ctx, "matmul");
    CU_DIMS(ctx, "matmul", as0);
    CU_DIMS(ctx, "matmul", bs0);
    CU_DIMS(ctx, "matmul", ys);
    if (as0->rank < 1 || bs0->rank < 1)
        return rs_kctx_fail(ctx, RS_ERR_ARG, "matmul: operands of rank %d and %d; both need rank >= 1", as0->rank,
                            bs0->rank);
    CU_PTR(ctx, "matmul", a, numel(as0));
    CU_PTR(ctx, "matmul", b, numel(bs0));
    CU_PTR(ctx, "matmul", y, numel(ys));
    rs_dims as = *as0, bs = *bs0;
    if (as.rank == 1) as = rs_dims{2, {1, as0->d[0]}};
    if (bs.rank == 1) bs = rs_dims{2, {bs0->d[0], 1}};
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
    if (nb == 0 || mn == 0) return RS_OK;
    if (K == 0) {
        CU_TRY(ctx, "matmul", cudaMemsetAsync(y, 0, sizeof(float) * nb * mn, cu_stream(ctx)));
        return RS_OK;
    }
    // (..., M, K) x (K, N): one product over all leading rows
    if (numel(&bb) == 1 && numel(&ba) == nb)
        return rs_cuda_sgemm(ctx, "matmul", false, false, (int)(nb * (size_t)M), N, K, 1.0f, a, K, b, N, 0.0f, y, N);
    long long sa[RS_DIMS_MAX], sb[RS_DIMS_MAX];
    int64_t idx[RS_DIMS_MAX] = {0};
    bstrides(&ba, &bo, sa);
    bstrides(&bb, &bo, sb);
    for (size_t t = 0; t < nb; t++) {
        long long oa = 0, ob = 0;
        for (int i = 0; i < bo.rank; i++) {
            oa += idx[i] * sa[i];
            ob += idx[i] * sb[i];
        }
        RS_KTRY(rs_cuda_sgemm(ctx, "matmul", false, false, M, N, K, 1.0f, a + (size_t)oa * mk, K, b + (size_t)ob * kn,
                              N, 0.0f, y + t * mn, N));
        for (int i = bo.rank - 1; i >= 0; i--) { // the next batch position
            if (++idx[i] < bo.d[i]) break;
            idx[i] = 0;
        }
    }
    return RS_OK;
}

// ---- transpose, slice, concat, trilu: gathers ----

__global__ static void k_gather(const float *x, float *y, strided t, size_t n)
{
    GRID_STRIDE(k, n)
    {
        long long o, u1, u2;
        offsets(t, k, &o, &u1, &u2);
        y[k] = x[o];
    }
}

extern "C" rs_status rs_cuda_transpose(rs_kctx *ctx, const float *x, const rs_dims *xs, const int *perm, float *y)
{
    CU_CTX(ctx, "transpose");
    CU_DIMS(ctx, "transpose", xs);
    size_t n = numel(xs);
    CU_PTR(ctx, "transpose", perm, xs->rank);
    CU_PTR(ctx, "transpose", x, n);
    CU_PTR(ctx, "transpose", y, n);
    if (!n) return RS_OK;
    int r = xs->rank;
    long long sx[RS_DIMS_MAX], acc = 1;
    for (int i = r - 1; i >= 0; i--) {
        sx[i] = acc;
        acc *= xs->d[i];
    }
    strided t;
    memset(&t, 0, sizeof t);
    t.r = r;
    for (int i = 0; i < r; i++) {
        t.d[i] = xs->d[perm[i]];
        t.s[0][i] = sx[perm[i]];
    }
    k_gather LAUNCH(n)(x, y, t, n);
    return cu_launched(ctx, "transpose");
}

extern "C" rs_status rs_cuda_slice(rs_kctx *ctx, const float *x, const rs_dims *xs, const int64_t *starts,
                                   const int64_t *steps, float *y, const rs_dims *ys)
{
    CU_CTX(ctx, "slice");
    CU_DIMS(ctx, "slice", xs);
    CU_DIMS(ctx, "slice", ys);
    size_t n = numel(ys);
    CU_PTR(ctx, "slice", starts, xs->rank);
    CU_PTR(ctx, "slice", steps, xs->rank);
    CU_PTR(ctx, "slice", x, n);
    CU_PTR(ctx, "slice", y, n);
    if (!n) return RS_OK;
    strided t = out_dims(ys);
    long long acc = 1;
    for (int i = xs->rank - 1; i >= 0; i--) {
        t.s[0][i] = acc * steps[i];
        t.base[0] += acc * starts[i];
        acc *= xs->d[i];
    }
    k_gather LAUNCH(n)(x, y, t, n);
    return cu_launched(ctx, "slice");
}

__global__ static void k_concat_one(const float *x, float *y, size_t row, size_t orow, size_t at, size_t n)
{
    GRID_STRIDE(i, n) y[i / row * orow + at + i % row] = x[i];
}

extern "C" rs_status rs_cuda_concat(rs_kctx *ctx, int n, const float *const *x, const rs_dims *const *xs, int axis,
                                    float *y, const rs_dims *ys)
{
    CU_CTX(ctx, "concat");
    CU_NONNEG(ctx, "concat", n);
    CU_DIMS(ctx, "concat", ys);
    if (axis < 0 || axis >= ys->rank)
        return rs_kctx_fail(ctx, RS_ERR_ARG, "concat: axis %d of a rank-%d output; 0 to %d work", axis, ys->rank,
                            ys->rank - 1);
    CU_PTR(ctx, "concat", x, n);
    CU_PTR(ctx, "concat", xs, n);
    CU_PTR(ctx, "concat", y, numel(ys));
    size_t outer = 1, inner = 1;
    for (int i = 0; i < ys->rank; i++) {
        if (i < axis) outer *= (size_t)ys->d[i];
        else if (i > axis) inner *= (size_t)ys->d[i];
    }
    size_t orow = (size_t)ys->d[axis] * inner, at = 0;
    for (int k = 0; k < n; k++) {
        size_t row = (size_t)xs[k]->d[axis] * inner, cnt = outer * row;
        if (cnt) {
            k_concat_one LAUNCH(cnt)(x[k], y, row, orow, at, cnt);
            RS_KTRY(cu_launched(ctx, "concat"));
        }
        at += row;
    }
    return RS_OK;
}

__global__ static void k_trilu(const float *x, float *y, long long R, long long C, bool upper, long long k, size_t n)
{
    GRID_STRIDE(o, n)
    {
        long long j = (long long)(o % (size_t)C), i = (long long)(o / (size_t)C % (size_t)R);
        bool keep = upper ? j - i >= k : j - i <= k;
        y[o] = keep ? x[o] : 0.0f;
    }
}

extern "C" rs_status rs_cuda_trilu(rs_kctx *ctx, const float *x, const rs_dims *xs, bool upper, int64_t k, float *y)
{
    CU_CTX(ctx, "trilu");
    CU_DIMS(ctx, "trilu", xs);
    if (xs->rank < 2) return rs_kctx_fail(ctx, RS_ERR_ARG, "trilu: x has rank %d; it needs rank >= 2", xs->rank);
    CU_PTR(ctx, "trilu", x, numel(xs));
    CU_PTR(ctx, "trilu", y, numel(xs));
    long long R = xs->d[xs->rank - 2], C = xs->d[xs->rank - 1];
    size_t n = numel(xs);
    if (!n || R <= 0 || C <= 0) return RS_OK;
    k_trilu LAUNCH(n)(x, y, R, C, upper, k, n);
    return cu_launched(ctx, "trilu");
}

// ---- reduce, softmax ----

// Kept dims (d, s[0]) index the outputs, reduced dims (d2, s2) the terms of one output's sum.
struct reduction {
    int nk, nr;
    long long kd[RS_DIMS_MAX], ks[RS_DIMS_MAX], rd[RS_DIMS_MAX], rs[RS_DIMS_MAX];
    size_t nred;
};

__global__ static void k_reduce(const float *x, float *y, reduction t, bool mean, size_t n)
{
    GRID_STRIDE(o, n)
    {
        long long base = 0;
        size_t k = o;
        for (int i = t.nk - 1; i >= 0; i--) {
            base += (long long)(k % (size_t)t.kd[i]) * t.ks[i];
            k /= (size_t)t.kd[i];
        }
        double s = 0.0;
        for (size_t j = 0; j < t.nred; j++) {
            long long off = base;
            size_t r = j;
            for (int i = t.nr - 1; i >= 0; i--) {
                off += (long long)(r % (size_t)t.rd[i]) * t.rs[i];
                r /= (size_t)t.rd[i];
            }
            s += x[off];
        }
        y[o] = (float)(mean ? (t.nred ? s / (double)t.nred : NAN) : s);
    }
}

extern "C" rs_status rs_cuda_reduce(rs_kctx *ctx, bool mean, const float *x, const rs_dims *xs, uint32_t mask, float *y)
{
    CU_CTX(ctx, "reduce");
    CU_DIMS(ctx, "reduce", xs);
    CU_PTR(ctx, "reduce", x, numel(xs));
    CU_PTR(ctx, "reduce", y, 1);
    reduction t;
    memset(&t, 0, sizeof t);
    long long sx[RS_DIMS_MAX], acc = 1;
    for (int i = xs->rank - 1; i >= 0; i--) {
        sx[i] = acc;
        acc *= xs->d[i];
    }
    size_t no = 1;
    t.nred = 1;
    for (int i = 0; i < xs->rank; i++) {
        if (mask >> i & 1) {
            t.rd[t.nr] = xs->d[i];
            t.rs[t.nr++] = sx[i];
            t.nred *= (size_t)xs->d[i];
        } else {
            t.kd[t.nk] = xs->d[i];
            t.ks[t.nk++] = sx[i];
            no *= (size_t)xs->d[i];
        }
    }
    if (!no) return RS_OK;
    k_reduce LAUNCH(no)(x, y, t, mean, no);
    return cu_launched(ctx, "reduce");
}

__global__ static void k_softmax(const float *x, float *y, size_t len, size_t inner, bool log_out, size_t n)
{
    GRID_STRIDE(r, n)
    {
        size_t o = r / inner, in = r % inner;
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

extern "C" rs_status rs_cuda_softmax(rs_kctx *ctx, const float *x, float *y, size_t outer, size_t len, size_t inner,
                                     bool log)
{
    CU_CTX(ctx, "softmax");
    size_t n = outer * len * inner;
    CU_PTR(ctx, "softmax", x, n);
    CU_PTR(ctx, "softmax", y, n);
    size_t rows = outer * inner;
    if (!n) return RS_OK;
    k_softmax LAUNCH(rows)(x, y, len, inner, log, rows);
    return cu_launched(ctx, "softmax");
}
