/* Harness cases for the generic tensor entries (the operators of imported graphs): unary, binary,
 * select, matmul, transpose, slice, concat, reduce, softmax, trilu, pool2d. Each runs on odd shapes
 * against the CPU reference (1 thread) and against a float64 scalar reference written here from the
 * operator's definition, indexing through multi-indices rather than the kernels' strides.
 * Tolerances (|got - want| <= atol + rtol |want|): 1e-5 + 1e-5 against the CPU reference (1e-4 + 1e-4
 * for products); against float64: 2e-6 + 2e-5 elementwise (libm's float functions), 1e-5 + 1e-5 for
 * sums and softmax (float accumulation of up to 60 terms), 1e-4 + 1e-4 for products of up to 7 terms
 * in [-1, 1]; data movement (transpose, slice, concat, select, trilu, max pool) is exact. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"
#include "harness.h"

static size_t dn(const rs_dims *s)
{
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= (size_t)s->d[i];
    return n;
}

/* The multi-index of flat position k in s. */
static void unflat(const rs_dims *s, size_t k, int64_t *idx)
{
    for (int i = s->rank - 1; i >= 0; i--) {
        idx[i] = (int64_t)(k % (size_t)s->d[i]);
        k /= (size_t)s->d[i];
    }
}

/* Flat position in s of output index idx (of rank r), numpy broadcasting (dims aligned right). */
static size_t bflat(const rs_dims *s, const int64_t *idx, int r)
{
    size_t off = 0;
    for (int i = 0; i < s->rank; i++) {
        int64_t j = s->d[i] == 1 ? 0 : idx[r - s->rank + i];
        off = off * (size_t)s->d[i] + (size_t)j;
    }
    return off;
}

/* Uploads host floats, runs nothing: a device copy of n floats. */
static float *up(hz *h, const float *x, size_t n) { return hz_up(h, x, (n ? n : 1) * sizeof *x); }

/* Compares a device result with the CPU reference's and the float64 reference. */
static void compare(hz *h, const char *what, const float *dev, const float *cpu, const double *want, size_t n,
                    double tol_cpu, double atol, double rtol)
{
    float *got = hz_down_new(h, dev, n);
    hz_close(h, what, got, cpu, n, tol_cpu, tol_cpu);
    hz_close_d(h, what, got, want, n, atol, rtol);
    free(got);
}

/* ---- unary ---- */

static double unary_ref(rs_unary_op op, double x, double a, double b)
{
    switch (op) {
    case RS_UNARY_RELU: return x > 0 ? x : 0;
    case RS_UNARY_TANH: return tanh(x);
    case RS_UNARY_SIGMOID: return 1 / (1 + exp(-x));
    case RS_UNARY_ERF: return erf(x);
    case RS_UNARY_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case RS_UNARY_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case RS_UNARY_SQRT: return sqrt(x);
    case RS_UNARY_EXP: return exp(x);
    case RS_UNARY_LOG: return log(x);
    case RS_UNARY_NEG: return -x;
    case RS_UNARY_ABS: return fabs(x);
    case RS_UNARY_RECIPROCAL: return 1 / x;
    case RS_UNARY_LEAKYRELU: return x >= 0 ? x : a * x;
    case RS_UNARY_CLIP: return fmin(fmax(x, a), b);
    case RS_UNARY_HARDSIGMOID: return fmax(0, fmin(1, a * x + b));
    case RS_UNARY_HARDSWISH: return x * fmax(0, fmin(1, x / 6 + 0.5));
    case RS_UNARY_CAST_INT: return trunc(x);
    case RS_UNARY_CAST_BOOL: return x != 0;
    case RS_UNARY_NOT: return x == 0;
    case RS_UNARY_SILU: return x / (1 + exp(-x));
    }
    return NAN;
}

static void case_unary(hz *h)
{
    static const size_t sizes[] = {1, 17, 129};
    for (int op = 0; op < RS_UNARY_COUNT; op++)
        for (size_t s = 0; s < 3; s++) {
            size_t n = sizes[s], mark = hz_mark(h);
            /* sqrt and log on positives, reciprocal away from 0; integers (some 0) for the bool ops */
            bool pos = op == RS_UNARY_SQRT || op == RS_UNARY_LOG;
            float *x = pos ? hz_rand(h, n, 0.1f, 3) : hz_rand_gap(h, n, 3, 0.05f);
            if (op == RS_UNARY_CAST_BOOL || op == RS_UNARY_NOT)
                for (size_t i = 0; i < n; i += 2) x[i] = (float)(i % 3);
            float a = op == RS_UNARY_CLIP ? -0.5f : op == RS_UNARY_HARDSIGMOID ? 0.2f : 0.1f;
            float b = op == RS_UNARY_CLIP ? 0.7f : 0.5f;
            float *ref = malloc(n * sizeof *ref);
            double *want = malloc(n * sizeof *want);
            rs_cpu_unary(&h->ref, (rs_unary_op)op, x, ref, n, a, b);
            for (size_t i = 0; i < n; i++) want[i] = unary_ref((rs_unary_op)op, x[i], a, b);
            float *dx = up(h, x, n), *dy = hz_up_nan(h, n);
            hz_ok(h, "unary", h->k->unary(h->ctx, (rs_unary_op)op, dx, dy, n, a, b));
            char what[32];
            snprintf(what, sizeof what, "unary op %d n=%zu", op, n);
            compare(h, what, dy, ref, want, n, 1e-5, 2e-6, 2e-5);
            free(x), free(ref), free(want);
            hz_release(h, mark);
        }
    hz_refused(h, "unary(x NULL)", h->k->unary(h->ctx, RS_UNARY_EXP, NULL, hz_alloc(h, 16), 4, 0, 0));
}

/* ---- binary, select ---- */

static double binary_ref(rs_binary_op op, double u, double v)
{
    switch (op) {
    case RS_BINARY_ADD: return u + v;
    case RS_BINARY_SUB: return u - v;
    case RS_BINARY_MUL: return u * v;
    case RS_BINARY_DIV: return u / v;
    case RS_BINARY_POW: return pow(u, v);
    case RS_BINARY_EQUAL: return u == v;
    case RS_BINARY_LESS: return u < v;
    case RS_BINARY_GREATER: return u > v;
    case RS_BINARY_LESS_EQ: return u <= v;
    case RS_BINARY_GREATER_EQ: return u >= v;
    case RS_BINARY_MOD: return u - v * floor(u / v); /* Python's %: the divisor's sign */
    case RS_BINARY_FMOD: return fmod(u, v);
    case RS_BINARY_AND: return u != 0 && v != 0;
    case RS_BINARY_OR: return u != 0 || v != 0;
    case RS_BINARY_XOR: return (u != 0) != (v != 0);
    }
    return NAN;
}

/* Halves in [-2.5, 2.5] so comparisons meet equal values; divisors and exponent bases kept nonzero. */
static float *halves(hz *h, size_t n, bool nonzero, bool positive)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        float v = (float)floor(hz_unif(h, -5, 6)) * 0.5f;
        if (positive) v = fabsf(v) + 0.5f;
        if (nonzero && v == 0.0f) v = 1.5f;
        x[i] = v;
    }
    return x;
}

static void case_binary(hz *h)
{
    /* broadcast both ways; same shapes; a scalar right side; a rank-0 left side */
    static const rs_dims shapes[][3] = {
        {{3, {3, 1, 5}}, {2, {4, 1}}, {3, {3, 4, 5}}},
        {{3, {2, 3, 7}}, {3, {2, 3, 7}}, {3, {2, 3, 7}}},
        {{2, {5, 3}}, {1, {1}}, {2, {5, 3}}},
        {{0, {0}}, {2, {3, 1}}, {2, {3, 1}}},
    };
    for (int op = RS_BINARY_ADD; op <= RS_BINARY_XOR; op++)
        for (int s = 0; s < 4; s++) {
            const rs_dims *as = &shapes[s][0], *bs = &shapes[s][1], *ys = &shapes[s][2];
            size_t na = dn(as), nb = dn(bs), ny = dn(ys), mark = hz_mark(h);
            bool div = op == RS_BINARY_DIV || op == RS_BINARY_MOD || op == RS_BINARY_FMOD;
            float *a = halves(h, na, false, op == RS_BINARY_POW), *b = halves(h, nb, div, false);
            float *ref = malloc(ny * sizeof *ref);
            double *want = malloc(ny * sizeof *want);
            rs_cpu_binary(&h->ref, (rs_binary_op)op, a, as, b, bs, ref, ys);
            int64_t idx[RS_DIMS_MAX] = {0};
            for (size_t k = 0; k < ny; k++) {
                unflat(ys, k, idx);
                want[k] = binary_ref((rs_binary_op)op, a[bflat(as, idx, ys->rank)], b[bflat(bs, idx, ys->rank)]);
            }
            float *da = up(h, a, na), *db = up(h, b, nb), *dy = hz_up_nan(h, ny);
            hz_ok(h, "binary", h->k->binary(h->ctx, (rs_binary_op)op, da, as, db, bs, dy, ys));
            char what[40];
            snprintf(what, sizeof what, "binary op %d shapes %d", op, s);
            compare(h, what, dy, ref, want, ny, 1e-5, 2e-6, 2e-5);
            free(a), free(b), free(ref), free(want);
            hz_release(h, mark);
        }
    rs_dims s = {1, {4}};
    hz_refused(h, "binary(b NULL)", h->k->binary(h->ctx, RS_BINARY_ADD, hz_alloc(h, 16), &s, NULL, &s, hz_alloc(h, 16), &s));
}

static void case_select(hz *h)
{
    const rs_dims cs = {3, {3, 1, 5}}, as = {2, {4, 1}}, bs = {3, {3, 4, 5}}, ys = {3, {3, 4, 5}};
    for (int expand = 0; expand < 2; expand++) {
        size_t mark = hz_mark(h), nc = dn(&cs), na = dn(&as), nb = dn(&bs), ny = dn(&ys);
        float *c = hz_rand(h, nc, -1, 1), *a = hz_rand(h, na, -1, 1), *b = hz_rand(h, nb, -1, 1);
        for (size_t i = 0; i < nc; i++) c[i] = c[i] > 0 ? 1.0f : 0.0f;
        float *ref = malloc(ny * sizeof *ref);
        double *want = malloc(ny * sizeof *want);
        int64_t idx[RS_DIMS_MAX] = {0};
        for (size_t k = 0; k < ny; k++) {
            unflat(&ys, k, idx);
            bool take_a = expand || c[bflat(&cs, idx, 3)] != 0;
            want[k] = take_a ? a[bflat(&as, idx, 3)] : b[bflat(&bs, idx, 3)];
        }
        float *dc = up(h, c, nc), *da = up(h, a, na), *db = up(h, b, nb), *dy = hz_up_nan(h, ny);
        if (expand) {
            rs_cpu_select(&h->ref, NULL, NULL, a, &as, NULL, NULL, ref, &ys);
            hz_ok(h, "select (expand)", h->k->select(h->ctx, NULL, NULL, da, &as, NULL, NULL, dy, &ys));
        } else {
            rs_cpu_select(&h->ref, c, &cs, a, &as, b, &bs, ref, &ys);
            hz_ok(h, "select", h->k->select(h->ctx, dc, &cs, da, &as, db, &bs, dy, &ys));
        }
        compare(h, expand ? "select (expand)" : "select", dy, ref, want, ny, 0, 0, 0);
        free(c), free(a), free(b), free(ref), free(want);
        hz_release(h, mark);
    }
    hz_refused(h, "select(y NULL)", h->k->select(h->ctx, NULL, NULL, hz_alloc(h, 16), &as, NULL, NULL, NULL, &as));
}

/* ---- matmul ---- */

static void case_matmul(hz *h)
{
    /* batched by a 2-d right side (one product); broadcast batches; 1-d left; 1-d right */
    static const rs_dims shapes[][3] = {
        {{4, {2, 3, 5, 7}}, {2, {7, 4}}, {4, {2, 3, 5, 4}}},
        {{4, {3, 1, 5, 7}}, {3, {4, 7, 6}}, {4, {3, 4, 5, 6}}},
        {{1, {7}}, {3, {2, 7, 3}}, {2, {2, 3}}},
        {{2, {5, 7}}, {1, {7}}, {1, {5}}},
    };
    for (int s = 0; s < 4; s++) {
        const rs_dims *as = &shapes[s][0], *bs = &shapes[s][1], *ys = &shapes[s][2];
        size_t na = dn(as), nb = dn(bs), ny = dn(ys), mark = hz_mark(h);
        float *a = hz_rand(h, na, -1, 1), *b = hz_rand(h, nb, -1, 1), *ref = malloc(ny * sizeof *ref);
        double *want = malloc(ny * sizeof *want);
        rs_cpu_matmul(&h->ref, a, as, b, bs, ref, ys);
        /* numpy: a 1-d a is (1, K), a 1-d b (K, 1), the unit dim dropped from y */
        rs_dims A = *as, B = *bs;
        if (A.rank == 1) A = (rs_dims){2, {1, as->d[0]}};
        if (B.rank == 1) B = (rs_dims){2, {bs->d[0], 1}};
        int64_t M = A.d[A.rank - 2], K = A.d[A.rank - 1], N = B.d[B.rank - 1];
        rs_dims Y = *ys; /* y with the dropped unit dims put back */
        if (as->rank == 1) {
            Y.d[Y.rank] = Y.d[Y.rank - 1];
            Y.d[Y.rank - 1] = 1;
            Y.rank++;
        }
        if (bs->rank == 1) Y.d[Y.rank++] = 1;
        rs_dims Ab = {A.rank - 2, {0}}, Bb = {B.rank - 2, {0}};
        memcpy(Ab.d, A.d, sizeof(int64_t) * (size_t)Ab.rank);
        memcpy(Bb.d, B.d, sizeof(int64_t) * (size_t)Bb.rank);
        int64_t idx[RS_DIMS_MAX] = {0};
        for (size_t k = 0; k < ny; k++) {
            unflat(&Y, k, idx);
            int64_t i = idx[Y.rank - 2], j = idx[Y.rank - 1];
            size_t oa = bflat(&Ab, idx, Y.rank - 2) * (size_t)(M * K), ob = bflat(&Bb, idx, Y.rank - 2) * (size_t)(K * N);
            double acc = 0;
            for (int64_t t = 0; t < K; t++) acc += (double)a[oa + (size_t)(i * K + t)] * b[ob + (size_t)(t * N + j)];
            want[k] = acc;
        }
        float *da = up(h, a, na), *db = up(h, b, nb), *dy = hz_up_nan(h, ny);
        hz_ok(h, "matmul", h->k->matmul(h->ctx, da, as, db, bs, dy, ys));
        char what[32];
        snprintf(what, sizeof what, "matmul shapes %d", s);
        compare(h, what, dy, ref, want, ny, 1e-4, 1e-4, 1e-4);
        free(a), free(b), free(ref), free(want);
        hz_release(h, mark);
    }
    rs_dims v = {0, {0}};
    hz_refused(h, "matmul(rank 0)", h->k->matmul(h->ctx, hz_alloc(h, 16), &v, hz_alloc(h, 16), &v, hz_alloc(h, 16), &v));
}

/* ---- data movement ---- */

static void case_transpose(hz *h)
{
    static const rs_dims xs[] = {{4, {2, 3, 5, 4}}, {2, {7, 3}}, {1, {33}}};
    static const int perms[][4] = {{2, 0, 3, 1}, {1, 0}, {0}};
    for (int s = 0; s < 3; s++) {
        size_t n = dn(&xs[s]), mark = hz_mark(h);
        rs_dims ys = {xs[s].rank, {0}};
        for (int i = 0; i < ys.rank; i++) ys.d[i] = xs[s].d[perms[s][i]];
        float *x = hz_rand(h, n, -1, 1), *ref = malloc(n * sizeof *ref);
        double *want = malloc(n * sizeof *want);
        rs_cpu_transpose(&h->ref, x, &xs[s], perms[s], ref);
        int64_t yi[RS_DIMS_MAX] = {0}, xi[RS_DIMS_MAX] = {0};
        for (size_t k = 0; k < n; k++) {
            unflat(&ys, k, yi);
            for (int i = 0; i < ys.rank; i++) xi[perms[s][i]] = yi[i];
            want[k] = x[bflat(&xs[s], xi, xs[s].rank)];
        }
        float *dx = up(h, x, n), *dy = hz_up_nan(h, n);
        hz_ok(h, "transpose", h->k->transpose(h->ctx, dx, &xs[s], perms[s], dy));
        compare(h, "transpose", dy, ref, want, n, 0, 0, 0);
        free(x), free(ref), free(want);
        hz_release(h, mark);
    }
    hz_refused(h, "transpose(perm NULL)", h->k->transpose(h->ctx, hz_alloc(h, 16), &xs[1], NULL, hz_alloc(h, 128)));
}

static void case_slice(hz *h)
{
    static const rs_dims xs[] = {{3, {5, 7, 3}}, {1, {17}}};
    static const rs_dims ys[] = {{3, {2, 4, 3}}, {1, {5}}};
    static const int64_t starts[][3] = {{1, 6, 0}, {3}}, steps[][3] = {{2, -2, 1}, {3}};
    for (int s = 0; s < 2; s++) {
        size_t nx = dn(&xs[s]), ny = dn(&ys[s]), mark = hz_mark(h);
        float *x = hz_rand(h, nx, -1, 1), *ref = malloc(ny * sizeof *ref);
        double *want = malloc(ny * sizeof *want);
        rs_cpu_slice(&h->ref, x, &xs[s], starts[s], steps[s], ref, &ys[s]);
        int64_t yi[RS_DIMS_MAX] = {0}, xi[RS_DIMS_MAX] = {0};
        for (size_t k = 0; k < ny; k++) {
            unflat(&ys[s], k, yi);
            for (int i = 0; i < ys[s].rank; i++) xi[i] = starts[s][i] + yi[i] * steps[s][i];
            want[k] = x[bflat(&xs[s], xi, xs[s].rank)];
        }
        float *dx = up(h, x, nx), *dy = hz_up_nan(h, ny);
        hz_ok(h, "slice", h->k->slice(h->ctx, dx, &xs[s], starts[s], steps[s], dy, &ys[s]));
        compare(h, "slice", dy, ref, want, ny, 0, 0, 0);
        free(x), free(ref), free(want);
        hz_release(h, mark);
    }
    hz_refused(h, "slice(steps NULL)", h->k->slice(h->ctx, hz_alloc(h, 80), &xs[1], starts[1], NULL, hz_alloc(h, 20), &ys[1]));
}

static void case_concat(hz *h)
{
    /* along a middle axis (3 inputs), the first, the last */
    static const rs_dims in[][3] = {
        {{3, {2, 3, 5}}, {3, {2, 1, 5}}, {3, {2, 4, 5}}},
        {{2, {3, 7}}, {2, {1, 7}}, {0, {0}}},
        {{2, {3, 2}}, {2, {3, 5}}, {0, {0}}},
    };
    static const rs_dims outs[] = {{3, {2, 8, 5}}, {2, {4, 7}}, {2, {3, 7}}};
    static const int axes[] = {1, 0, 1}, counts[] = {3, 2, 2};
    for (int s = 0; s < 3; s++) {
        size_t ny = dn(&outs[s]), mark = hz_mark(h);
        float *x[3] = {0};
        const float *dxs[3] = {0}, *hx[3] = {0};
        const rs_dims *xs[3] = {&in[s][0], &in[s][1], &in[s][2]};
        for (int j = 0; j < counts[s]; j++) {
            x[j] = hz_rand(h, dn(xs[j]), -1, 1);
            hx[j] = x[j];
            dxs[j] = up(h, x[j], dn(xs[j]));
        }
        float *ref = malloc(ny * sizeof *ref);
        double *want = malloc(ny * sizeof *want);
        rs_cpu_concat(&h->ref, counts[s], hx, xs, axes[s], ref, &outs[s]);
        int64_t yi[RS_DIMS_MAX] = {0};
        for (size_t k = 0; k < ny; k++) {
            unflat(&outs[s], k, yi);
            int j = 0;
            while (yi[axes[s]] >= xs[j]->d[axes[s]]) yi[axes[s]] -= xs[j++]->d[axes[s]];
            want[k] = x[j][bflat(xs[j], yi, outs[s].rank)];
        }
        float *dy = hz_up_nan(h, ny);
        hz_ok(h, "concat", h->k->concat(h->ctx, counts[s], dxs, xs, axes[s], dy, &outs[s]));
        compare(h, "concat", dy, ref, want, ny, 0, 0, 0);
        for (int j = 0; j < 3; j++) free(x[j]);
        free(ref), free(want);
        hz_release(h, mark);
    }
    const rs_dims *xs[1] = {&outs[1]};
    hz_refused(h, "concat(axis 2 of rank 2)", h->k->concat(h->ctx, 1, NULL, xs, 2, hz_alloc(h, 128), &outs[1]));
}

/* ---- reduce, softmax, trilu ---- */

static void case_reduce(hz *h)
{
    const rs_dims xs = {4, {3, 4, 5, 2}};
    static const uint32_t masks[] = {0x5, 0x0, 0xf, 0x8};
    size_t nx = dn(&xs);
    for (int s = 0; s < 4; s++)
        for (int mean = 0; mean < 2; mean++) {
            size_t mark = hz_mark(h), ny = 1;
            rs_dims ys = {0, {0}}; /* the dims that stay, in order */
            for (int i = 0; i < xs.rank; i++)
                if (!(masks[s] >> i & 1)) ys.d[ys.rank++] = xs.d[i];
            ny = dn(&ys);
            float *x = hz_rand(h, nx, -1, 1), *ref = malloc(ny * sizeof *ref);
            double *want = calloc(ny, sizeof *want);
            rs_cpu_reduce(&h->ref, mean, x, &xs, masks[s], ref);
            int64_t xi[RS_DIMS_MAX] = {0}, yi[RS_DIMS_MAX] = {0};
            for (size_t k = 0; k < nx; k++) {
                unflat(&xs, k, xi);
                int r = 0;
                for (int i = 0; i < xs.rank; i++)
                    if (!(masks[s] >> i & 1)) yi[r++] = xi[i];
                want[bflat(&ys, yi, ys.rank)] += x[k];
            }
            if (mean)
                for (size_t k = 0; k < ny; k++) want[k] /= (double)(nx / ny);
            float *dx = up(h, x, nx), *dy = hz_up_nan(h, ny);
            hz_ok(h, "reduce", h->k->reduce(h->ctx, mean, dx, &xs, masks[s], dy));
            compare(h, mean ? "reduce mean" : "reduce sum", dy, ref, want, ny, 1e-5, 1e-5, 1e-5);
            free(x), free(ref), free(want);
            hz_release(h, mark);
        }
    hz_refused(h, "reduce(y NULL)", h->k->reduce(h->ctx, false, hz_alloc(h, 480), &xs, 1, NULL));
}

static void case_softmax(hz *h)
{
    static const size_t shapes[][3] = {{3, 7, 5}, {1, 33, 1}, {2, 1, 3}};
    for (int s = 0; s < 3; s++)
        for (int lg = 0; lg < 2; lg++) {
            size_t O = shapes[s][0], L = shapes[s][1], I = shapes[s][2], n = O * L * I, mark = hz_mark(h);
            float *x = hz_rand(h, n, -4, 4), *ref = malloc(n * sizeof *ref);
            double *want = malloc(n * sizeof *want);
            rs_cpu_softmax(&h->ref, x, ref, O, L, I, lg);
            for (size_t o = 0; o < O; o++)
                for (size_t i = 0; i < I; i++) {
                    double z = 0;
                    for (size_t j = 0; j < L; j++) z += exp((double)x[(o * L + j) * I + i]);
                    for (size_t j = 0; j < L; j++) {
                        double v = x[(o * L + j) * I + i];
                        want[(o * L + j) * I + i] = lg ? v - log(z) : exp(v) / z;
                    }
                }
            float *dx = up(h, x, n), *dy = hz_up_nan(h, n);
            hz_ok(h, "softmax", h->k->softmax(h->ctx, dx, dy, O, L, I, lg));
            compare(h, lg ? "log-softmax" : "softmax", dy, ref, want, n, 1e-5, 1e-5, 1e-5);
            free(x), free(ref), free(want);
            hz_release(h, mark);
        }
    hz_refused(h, "softmax(x NULL)", h->k->softmax(h->ctx, NULL, hz_alloc(h, 16), 1, 4, 1, false));
}

static void case_trilu(hz *h)
{
    const rs_dims xs = {3, {2, 5, 7}};
    static const int64_t ks[] = {0, -1, 2, -3};
    size_t n = dn(&xs);
    for (int upper = 0; upper < 2; upper++)
        for (int s = 0; s < 4; s++) {
            size_t mark = hz_mark(h);
            float *x = hz_rand(h, n, -1, 1), *ref = malloc(n * sizeof *ref);
            double *want = malloc(n * sizeof *want);
            rs_cpu_trilu(&h->ref, x, &xs, upper, ks[s], ref);
            int64_t idx[RS_DIMS_MAX] = {0};
            for (size_t k = 0; k < n; k++) {
                unflat(&xs, k, idx);
                int64_t d = idx[2] - idx[1];
                want[k] = (upper ? d >= ks[s] : d <= ks[s]) ? x[k] : 0.0;
            }
            float *dx = up(h, x, n), *dy = hz_up_nan(h, n);
            hz_ok(h, "trilu", h->k->trilu(h->ctx, dx, &xs, upper, ks[s], dy));
            compare(h, upper ? "trilu upper" : "trilu lower", dy, ref, want, n, 0, 0, 0);
            free(x), free(ref), free(want);
            hz_release(h, mark);
        }
    const rs_dims v = {1, {4}};
    hz_refused(h, "trilu(rank 1)", h->k->trilu(h->ctx, hz_alloc(h, 16), &v, true, 0, hz_alloc(h, 16)));
}

/* ---- pool2d ---- */

static void case_pool2d(hz *h)
{
    /* asymmetric pads (top 1, left 0, bottom 1, right 1) and ceil-mode output sizes: windows hang past
     * the padding; and a plain symmetric one */
    static const rs_conv_geom gs[] = {
        {.c = 2, .h = 8, .w = 7, .kh = 3, .kw = 2, .sh = 2, .sw = 2, .ph = 1, .pw = 0, .oh = 5, .ow = 4},
        {.c = 3, .h = 5, .w = 5, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .oh = 5, .ow = 5},
    };
    static const int pbs[] = {1, 1}, prs[] = {1, 1};
    const int B = 3;
    for (int s = 0; s < 2; s++)
        for (int mode = 0; mode < 3; mode++) {
            const rs_conv_geom *g = &gs[s];
            bool is_max = mode == 0, cip = mode == 1;
            size_t nx = (size_t)B * g->c * g->h * g->w, ny = (size_t)B * g->c * g->oh * g->ow, mark = hz_mark(h);
            float *x = hz_rand(h, nx, -1, 1), *ref = malloc(ny * sizeof *ref);
            double *want = malloc(ny * sizeof *want);
            rs_cpu_pool2d(&h->ref, g, pbs[s], prs[s], is_max, cip, B, x, ref);
            for (int p = 0; p < B * g->c; p++)
                for (int oy = 0; oy < g->oh; oy++)
                    for (int ox = 0; ox < g->ow; ox++) {
                        double m = -INFINITY, sum = 0;
                        int in = 0, padded = 0;
                        for (int ki = 0; ki < g->kh; ki++)
                            for (int kj = 0; kj < g->kw; kj++) {
                                int iy = oy * g->sh - g->ph + ki, ix = ox * g->sw - g->pw + kj;
                                padded += iy >= -g->ph && iy < g->h + pbs[s] && ix >= -g->pw && ix < g->w + prs[s];
                                if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
                                double v = x[((size_t)p * g->h + iy) * g->w + ix];
                                m = fmax(m, v);
                                sum += v;
                                in++;
                            }
                        want[((size_t)p * g->oh + oy) * g->ow + ox] = is_max ? m : sum / (cip ? padded : in);
                    }
            float *dx = up(h, x, nx), *dy = hz_up_nan(h, ny);
            hz_ok(h, "pool2d", h->k->pool2d(h->ctx, g, pbs[s], prs[s], is_max, cip, B, dx, dy));
            compare(h, is_max ? "pool2d max" : cip ? "pool2d avg (pads counted)" : "pool2d avg", dy, ref, want, ny,
                    1e-6, 1e-6, 1e-5);
            free(x), free(ref), free(want);
            hz_release(h, mark);
        }
    hz_refused(h, "pool2d(pb -1)", h->k->pool2d(h->ctx, &gs[1], -1, 0, true, false, 1, hz_alloc(h, 400), hz_alloc(h, 400)));
}

HZ_CASE(unary, case_unary);
HZ_CASE(binary, case_binary);
HZ_CASE(select, case_select);
HZ_CASE(matmul, case_matmul);
HZ_CASE(transpose, case_transpose);
HZ_CASE(slice, case_slice);
HZ_CASE(concat, case_concat);
HZ_CASE(reduce, case_reduce);
HZ_CASE(softmax, case_softmax);
HZ_CASE(trilu, case_trilu);
HZ_CASE(pool2d, case_pool2d);
