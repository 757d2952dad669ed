/* CPU kernels for elementwise activations, dropout, layer norm and softmax cross-entropy.
 * Reductions that feed the loss run in double so the reported loss does not depend on batch order
 * more than float rounding of the inputs allows. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_scope.h"
#include "vmath.h"

#define PAR_MIN 32768

rs_status rs_cpu_relu_fwd(rs_kctx *ctx, const float *in, float *out, size_t n)
{
    CPU_CTX(ctx, "relu_fwd");
    CPU_PTR(ctx, "relu_fwd", in, n);
    CPU_PTR(ctx, "relu_fwd", out, n);
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_relu_bwd(rs_kctx *ctx, const float *out, const float *dout, float *din, size_t n)
{
    CPU_CTX(ctx, "relu_bwd");
    CPU_PTR(ctx, "relu_bwd", out, n);
    CPU_PTR(ctx, "relu_bwd", dout, n);
    CPU_PTR(ctx, "relu_bwd", din, n);
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float d = dout[i]; /* loaded unconditionally so the select vectorizes (no branch per element) */
        din[i] = out[i] > 0.0f ? d : 0.0f;
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_gelu_fwd(rs_kctx *ctx, const float *in, float *out, size_t n)
{
    CPU_CTX(ctx, "gelu_fwd");
    CPU_PTR(ctx, "gelu_fwd", in, n);
    CPU_PTR(ctx, "gelu_fwd", out, n);
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN / 4)
    for (size_t i = 0; i < n; i++) {
        float x = in[i];
        out[i] = 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_gelu_bwd(rs_kctx *ctx, const float *in, const float *dout, float *din, size_t n)
{
    CPU_CTX(ctx, "gelu_bwd");
    CPU_PTR(ctx, "gelu_bwd", in, n);
    CPU_PTR(ctx, "gelu_bwd", dout, n);
    CPU_PTR(ctx, "gelu_bwd", din, n);
    int prev = cpu_enter(ctx);
    const float inv_sqrt_2pi = 0.3989422804014327f;
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN / 4)
    for (size_t i = 0; i < n; i++) {
        float x = in[i];
        float cdf = 0.5f * (1.0f + erff(x * (float)M_SQRT1_2));
        float pdf = inv_sqrt_2pi * expf(-0.5f * x * x);
        din[i] = dout[i] * (cdf + x * pdf);
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

/* GPT-2's GELU: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as the equal
 * x * sigmoid(2u) = x / (1 + e^{-2u}): no cancellation in 1 + tanh(u) for negative x (so small outputs
 * keep their relative precision), and rs_vexpf lets the loop vectorize (this runs on the (B, T, 4C)
 * hidden layer of every block). */
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

RS_SIMD static void gelu_tanh_fwd_span(const float *in, float *out, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++) {
        float x = in[i];
        float en = rs_vexpf(-2.0f * GELU_K * (x + GELU_A * x * x * x));
        out[i] = x / (1.0f + en);
    }
}

RS_SIMD static void gelu_tanh_bwd_span(const float *in, const float *dout, float *din, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++) {
        float x = in[i], x2 = x * x;
        float en = rs_vexpf(-2.0f * GELU_K * (x + GELU_A * x2 * x));
        float g = 1.0f / (1.0f + en), g1 = en * g;
        float du = GELU_K * (1.0f + 3.0f * GELU_A * x2);
        din[i] = dout[i] * (g + 2.0f * x * g * g1 * du);
    }
}

/* Threads take contiguous spans; each span runs the CPU's widest clone. */
#define SPANS(n, body)                                                                                 \
    do {                                                                                               \
        int nt_ = (n) >= PAR_MIN ? ctx->threads : 1;                                                   \
        _Pragma("omp parallel for schedule(static) if (nt_ > 1)") for (int t_ = 0; t_ < nt_; t_++) {   \
            size_t a = (n) * (size_t)t_ / (size_t)nt_, b = (n) * (size_t)(t_ + 1) / (size_t)nt_;       \
            body;                                                                                      \
        }                                                                                              \
    } while (0)

rs_status rs_cpu_gelu_tanh_fwd(rs_kctx *ctx, const float *in, float *out, size_t n)
{
    CPU_CTX(ctx, "gelu_tanh_fwd");
    CPU_PTR(ctx, "gelu_tanh_fwd", in, n);
    CPU_PTR(ctx, "gelu_tanh_fwd", out, n);
    int prev = cpu_enter(ctx);
    SPANS(n, gelu_tanh_fwd_span(in, out, a, b));
    cpu_leave(ctx, prev);
    return RS_OK;
}

/* d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) u', t = tanh(u), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2);
 * with g = sigmoid(2u) = (1 + t)/2 and 1 - g = g e^{-2u}: d/dx = g + 2 x g (1 - g) u'. */
rs_status rs_cpu_gelu_tanh_bwd(rs_kctx *ctx, const float *in, const float *dout, float *din, size_t n)
{
    CPU_CTX(ctx, "gelu_tanh_bwd");
    CPU_PTR(ctx, "gelu_tanh_bwd", in, n);
    CPU_PTR(ctx, "gelu_tanh_bwd", dout, n);
    CPU_PTR(ctx, "gelu_tanh_bwd", din, n);
    int prev = cpu_enter(ctx);
    SPANS(n, gelu_tanh_bwd_span(in, dout, din, a, b));
    cpu_leave(ctx, prev);
    return RS_OK;
}

/* SiLU as x / (1 + e^{-x}) with rs_vexpf, like the tanh GELU above: the loop vectorizes, and for
 * x < -87 e^{-x} stays finite (e^88), so y and the gradient go to 0 without inf/inf = NaN. */
RS_SIMD static void silu_fwd_span(const float *in, float *out, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++) {
        float x = in[i];
        out[i] = x / (1.0f + rs_vexpf(-x));
    }
}

/* d/dx x s(x) = s + x s (1 - s) = s (1 + x (1 - s)), with 1 - s = s e^{-x} (no cancellation). */
RS_SIMD static void silu_bwd_span(const float *in, const float *dout, float *din, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++) {
        float x = in[i];
        float en = rs_vexpf(-x);
        float s = 1.0f / (1.0f + en);
        din[i] = dout[i] * (s * (1.0f + x * (en * s)));
    }
}

rs_status rs_cpu_silu_fwd(rs_kctx *ctx, const float *in, float *out, size_t n)
{
    CPU_CTX(ctx, "silu_fwd");
    CPU_PTR(ctx, "silu_fwd", in, n);
    CPU_PTR(ctx, "silu_fwd", out, n);
    int prev = cpu_enter(ctx);
    SPANS(n, silu_fwd_span(in, out, a, b));
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_silu_bwd(rs_kctx *ctx, const float *in, const float *dout, float *din, size_t n)
{
    CPU_CTX(ctx, "silu_bwd");
    CPU_PTR(ctx, "silu_bwd", in, n);
    CPU_PTR(ctx, "silu_bwd", dout, n);
    CPU_PTR(ctx, "silu_bwd", din, n);
    int prev = cpu_enter(ctx);
    SPANS(n, silu_bwd_span(in, dout, din, a, b));
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_tanh_fwd(rs_kctx *ctx, const float *in, float *out, size_t n)
{
    CPU_CTX(ctx, "tanh_fwd");
    CPU_PTR(ctx, "tanh_fwd", in, n);
    CPU_PTR(ctx, "tanh_fwd", out, n);
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN / 4)
    for (size_t i = 0; i < n; i++) out[i] = tanhf(in[i]);
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_tanh_bwd(rs_kctx *ctx, const float *out, const float *dout, float *din, size_t n)
{
    CPU_CTX(ctx, "tanh_bwd");
    CPU_PTR(ctx, "tanh_bwd", out, n);
    CPU_PTR(ctx, "tanh_bwd", dout, n);
    CPU_PTR(ctx, "tanh_bwd", din, n);
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) din[i] = dout[i] * (1.0f - out[i] * out[i]);
    cpu_leave(ctx, prev);
    return RS_OK;
}

/* Counter-based: the keep decision for element i depends on (seed, i) alone. */
static inline float hash_uniform(uint64_t seed, uint64_t i)
{
    uint64_t z = seed ^ (i * 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

rs_status rs_cpu_dropout_fwd(rs_kctx *ctx, const float *in, float *out, uint8_t *mask, size_t n, float p, uint64_t seed)
{
    CPU_CTX(ctx, "dropout_fwd");
    if (!(p >= 0.0f && p <= 1.0f))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "dropout_fwd: p=%g; a probability in [0, 1] is needed", (double)p);
    CPU_PTR(ctx, "dropout_fwd", in, n);
    CPU_PTR(ctx, "dropout_fwd", out, n);
    CPU_PTR(ctx, "dropout_fwd", mask, n);
    int prev = cpu_enter(ctx);
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        uint8_t keep = hash_uniform(seed, i) >= p;
        mask[i] = keep;
        out[i] = keep ? in[i] * scale : 0.0f;
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_dropout_bwd(rs_kctx *ctx, const float *dout, const uint8_t *mask, float *din, size_t n, float p)
{
    CPU_CTX(ctx, "dropout_bwd");
    if (!(p >= 0.0f && p <= 1.0f))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "dropout_bwd: p=%g; a probability in [0, 1] is needed", (double)p);
    CPU_PTR(ctx, "dropout_bwd", dout, n);
    CPU_PTR(ctx, "dropout_bwd", mask, n);
    CPU_PTR(ctx, "dropout_bwd", din, n);
    int prev = cpu_enter(ctx);
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) din[i] = mask[i] ? dout[i] * scale : 0.0f;
    cpu_leave(ctx, prev);
    return RS_OK;
}

RS_SIMD static void ln_fwd_rows(const float *in, const float *gamma, const float *beta, float *out, float *mean,
                                float *rstd, int b0, int b1, int N, float eps)
{
    for (int b = b0; b < b1; b++) {
        const float *x = in + (size_t)b * N;
        float *y = out + (size_t)b * N;
        double s = 0.0;
        for (int j = 0; j < N; j++) s += x[j];
        float mu = (float)(s / N);
        double v = 0.0;
        for (int j = 0; j < N; j++) {
            double d = x[j] - mu;
            v += d * d;
        }
        float rs = 1.0f / sqrtf((float)(v / N) + eps); /* biased variance, as PyTorch */
        for (int j = 0; j < N; j++) y[j] = (x[j] - mu) * rs * gamma[j] + beta[j];
        mean[b] = mu;
        rstd[b] = rs;
    }
}

rs_status rs_cpu_layernorm_fwd(rs_kctx *ctx, const float *in, const float *gamma, const float *beta, float *out,
                               float *mean, float *rstd, int B, int N, float eps)
{
    CPU_CTX(ctx, "layernorm_fwd");
    CPU_NONNEG(ctx, "layernorm_fwd", B);
    CPU_NONNEG(ctx, "layernorm_fwd", N);
    CPU_PTR(ctx, "layernorm_fwd", in, B && N);
    CPU_PTR(ctx, "layernorm_fwd", gamma, B && N);
    CPU_PTR(ctx, "layernorm_fwd", beta, B && N);
    CPU_PTR(ctx, "layernorm_fwd", out, B && N);
    CPU_PTR(ctx, "layernorm_fwd", mean, B && N);
    CPU_PTR(ctx, "layernorm_fwd", rstd, B && N);
    int prev = cpu_enter(ctx);
    int nt = (size_t)B * N >= PAR_MIN ? ctx->threads : 1;
    #pragma omp parallel for schedule(static) if (nt > 1)
    for (int t = 0; t < nt; t++)
        ln_fwd_rows(in, gamma, beta, out, mean, rstd, (int)((int64_t)B * t / nt), (int)((int64_t)B * (t + 1) / nt), N, eps);
    cpu_leave(ctx, prev);
    return RS_OK;
}

RS_SIMD static void ln_bwd_rows(const float *in, const float *gamma, const float *mean, const float *rstd,
                                const float *dout, float *din, int b0, int b1, int N)
{
    for (int b = b0; b < b1; b++) {
        const float *x = in + (size_t)b * N, *dy = dout + (size_t)b * N;
        float mu = mean[b], rs = rstd[b];
        double sum_g = 0.0, sum_gx = 0.0;
        for (int j = 0; j < N; j++) {
            float g = dy[j] * gamma[j];
            sum_g += g;
            sum_gx += g * (x[j] - mu) * rs;
        }
        float mg = (float)(sum_g / N), mgx = (float)(sum_gx / N);
        float *dx = din + (size_t)b * N;
        for (int j = 0; j < N; j++) {
            float xhat = (x[j] - mu) * rs;
            dx[j] = rs * (dy[j] * gamma[j] - mg - xhat * mgx);
        }
    }
}

/* Column sums for the parameter gradients, a block of at most 256 columns at a time, rows in order
 * (the same additions, in the same order, as one running sum per column, but over contiguous rows). */
RS_SIMD static void ln_bwd_cols(const float *in, const float *mean, const float *rstd, const float *dout,
                                float *dgamma, float *dbeta, int B, int N, int j0, int j1)
{
    float sg[256], sb[256];
    for (int c0 = j0; c0 < j1; c0 += 256) {
        int c1 = c0 + 256 < j1 ? c0 + 256 : j1, w = c1 - c0;
        for (int j = 0; j < w; j++) sg[j] = sb[j] = 0.0f;
        for (int b = 0; b < B; b++) {
            const float *dy = dout + (size_t)b * N + c0, *x = in + (size_t)b * N + c0;
            float mu = mean[b], rs = rstd[b];
            for (int j = 0; j < w; j++) {
                sg[j] += dy[j] * (x[j] - mu) * rs;
                sb[j] += dy[j];
            }
        }
        for (int j = 0; j < w; j++) {
            dgamma[c0 + j] += sg[j];
            dbeta[c0 + j] += sb[j];
        }
    }
}

rs_status rs_cpu_layernorm_bwd(rs_kctx *ctx, const float *in, const float *gamma, const float *mean, const float *rstd,
                               const float *dout, float *din, float *dgamma, float *dbeta, int B, int N)
{
    CPU_CTX(ctx, "layernorm_bwd");
    CPU_NONNEG(ctx, "layernorm_bwd", B);
    CPU_NONNEG(ctx, "layernorm_bwd", N);
    CPU_PTR(ctx, "layernorm_bwd", in, B && N);
    CPU_PTR(ctx, "layernorm_bwd", gamma, B && N);
    CPU_PTR(ctx, "layernorm_bwd", mean, B && N);
    CPU_PTR(ctx, "layernorm_bwd", rstd, B && N);
    CPU_PTR(ctx, "layernorm_bwd", dout, B && N);
    CPU_PTR(ctx, "layernorm_bwd", dgamma, B && N);
    CPU_PTR(ctx, "layernorm_bwd", dbeta, B && N);
    int prev = cpu_enter(ctx);
    /* Input gradient by rows, parameter gradients by columns: no two threads write one element. */
    int nt = (size_t)B * N >= PAR_MIN ? ctx->threads : 1;
    #pragma omp parallel for schedule(static) if (nt > 1)
    for (int t = 0; t < nt; t++) {
        if (din)
            ln_bwd_rows(in, gamma, mean, rstd, dout, din, (int)((int64_t)B * t / nt), (int)((int64_t)B * (t + 1) / nt), N);
    }
    #pragma omp parallel for schedule(static) if (nt > 1)
    for (int t = 0; t < nt; t++)
        ln_bwd_cols(in, mean, rstd, dout, dgamma, dbeta, B, N, (int)((int64_t)N * t / nt), (int)((int64_t)N * (t + 1) / nt));
    cpu_leave(ctx, prev);
    return RS_OK;
}

/* A label outside [0, C) would index past its row. */
static rs_status check_labels(rs_kctx *ctx, const char *who, const int32_t *labels, int B, int C)
{
    for (int b = 0; b < B; b++)
        if (labels[b] < 0 || labels[b] >= C)
            return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: label %d of row %d is outside [0, %d)", who, (int)labels[b], b,
                                C);
    return RS_OK;
}

rs_status rs_cpu_softmax_xent_fwd(rs_kctx *ctx, const float *logits, const int32_t *labels, float *probs, float *losses,
                                  int B, int C)
{
    CPU_CTX(ctx, "softmax_xent_fwd");
    CPU_NONNEG(ctx, "softmax_xent_fwd", B);
    if (B && C < 1) return rs_kctx_fail(ctx, RS_ERR_ARG, "softmax_xent_fwd: C=%d; at least one class is needed", C);
    CPU_PTR(ctx, "softmax_xent_fwd", logits, B);
    CPU_PTR(ctx, "softmax_xent_fwd", labels, B);
    CPU_PTR(ctx, "softmax_xent_fwd", probs, B);
    CPU_PTR(ctx, "softmax_xent_fwd", losses, B);
    RS_KTRY(check_labels(ctx, "softmax_xent_fwd", labels, B, C));
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if ((size_t)B * C >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        const float *z = logits + (size_t)b * C;
        float *p = probs + (size_t)b * C;
        float mx = z[0];
        for (int j = 1; j < C; j++) mx = z[j] > mx ? z[j] : mx;
        double s = 0.0;
        for (int j = 0; j < C; j++) {
            p[j] = expf(z[j] - mx);
            s += p[j];
        }
        float inv = (float)(1.0 / s);
        for (int j = 0; j < C; j++) p[j] *= inv;
        /* loss = logsumexp(z) - z[y], computed from the shifted logits for stability */
        losses[b] = (float)(log(s) + mx - z[labels[b]]);
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_softmax_xent_bwd(rs_kctx *ctx, const float *probs, const int32_t *labels, float *dlogits, int B, int C,
                                  float scale)
{
    CPU_CTX(ctx, "softmax_xent_bwd");
    CPU_NONNEG(ctx, "softmax_xent_bwd", B);
    if (B && C < 1) return rs_kctx_fail(ctx, RS_ERR_ARG, "softmax_xent_bwd: C=%d; at least one class is needed", C);
    CPU_PTR(ctx, "softmax_xent_bwd", probs, B);
    CPU_PTR(ctx, "softmax_xent_bwd", labels, B);
    CPU_PTR(ctx, "softmax_xent_bwd", dlogits, B);
    RS_KTRY(check_labels(ctx, "softmax_xent_bwd", labels, B, C));
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if ((size_t)B * C >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        const float *p = probs + (size_t)b * C;
        float *d = dlogits + (size_t)b * C;
        for (int j = 0; j < C; j++) d[j] = p[j] * scale;
        d[labels[b]] -= scale;
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}
