// Elementwise CUDA kernels: fill/axpy/scale/add, the bias helpers, activations, dropout, the generic
// unary op and the optimizer updates. One thread per element over a grid-stride loop; the arithmetic
// follows the CPU table's operation for operation (engine/cpu/*), so results differ only by the
// device's libm (expf, erff, tanhf within their documented ulps).
#include "kernel_util.cuh"

__global__ static void k_fill(float *x, size_t n, float v) { GRID_STRIDE(i, n) x[i] = v; }
__global__ static void k_axpy(float *y, const float *x, size_t n, float a) { GRID_STRIDE(i, n) y[i] += a * x[i]; }
__global__ static void k_scale(float *x, size_t n, float a) { GRID_STRIDE(i, n) x[i] *= a; }
__global__ static void k_add(const float *a, const float *b, float *o, size_t n) { GRID_STRIDE(i, n) o[i] = a[i] + b[i]; }

extern "C" rs_status rs_cuda_fill(rs_kctx *ctx, float *x, size_t n, float v)
{
    CU_CTX(ctx, "fill");
    CU_PTR(ctx, "fill", x, n);
    if (!n) return RS_OK;
    k_fill LAUNCH(n)(x, n, v);
    return cu_launched(ctx, "fill");
}

extern "C" rs_status rs_cuda_axpy(rs_kctx *ctx, float *y, const float *x, size_t n, float a)
{
    CU_CTX(ctx, "axpy");
    CU_PTR(ctx, "axpy", y, n);
    CU_PTR(ctx, "axpy", x, n);
    if (!n) return RS_OK;
    k_axpy LAUNCH(n)(y, x, n, a);
    return cu_launched(ctx, "axpy");
}

extern "C" rs_status rs_cuda_scale(rs_kctx *ctx, float *x, size_t n, float a)
{
    CU_CTX(ctx, "scale");
    CU_PTR(ctx, "scale", x, n);
    if (!n) return RS_OK;
    k_scale LAUNCH(n)(x, n, a);
    return cu_launched(ctx, "scale");
}

extern "C" rs_status rs_cuda_add(rs_kctx *ctx, const float *a, const float *b, float *out, size_t n)
{
    CU_CTX(ctx, "add");
    CU_PTR(ctx, "add", a, n);
    CU_PTR(ctx, "add", b, n);
    CU_PTR(ctx, "add", out, n);
    if (!n) return RS_OK;
    k_add LAUNCH(n)(a, b, out, n);
    return cu_launched(ctx, "add");
}

// ---- bias ----

__global__ static void k_bias_rows(float *out, const float *bias, size_t n, int N) { GRID_STRIDE(i, n) out[i] += bias[i % N]; }

// One thread per column, rows in order: the CPU's additions in the CPU's order.
__global__ static void k_bias_rows_grad(float *db, const float *dout, int B, int N)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += dout[(size_t)b * N + j];
    db[j] += s;
}

extern "C" rs_status rs_cuda_bias_rows(rs_kctx *ctx, float *out, const float *bias, int B, int N)
{
    CU_CTX(ctx, "bias_rows");
    CU_NONNEG(ctx, "bias_rows", B);
    CU_NONNEG(ctx, "bias_rows", N);
    CU_PTR(ctx, "bias_rows", out, B && N);
    CU_PTR(ctx, "bias_rows", bias, B && N);
    size_t n = (size_t)B * N;
    if (!n) return RS_OK;
    k_bias_rows LAUNCH(n)(out, bias, n, N);
    return cu_launched(ctx, "bias_rows");
}

extern "C" rs_status rs_cuda_bias_rows_grad(rs_kctx *ctx, float *db, const float *dout, int B, int N)
{
    CU_CTX(ctx, "bias_rows_grad");
    CU_NONNEG(ctx, "bias_rows_grad", B);
    CU_NONNEG(ctx, "bias_rows_grad", N);
    CU_PTR(ctx, "bias_rows_grad", db, N);
    CU_PTR(ctx, "bias_rows_grad", dout, B && N);
    if (!N || !B) return RS_OK;
    k_bias_rows_grad<<<(N + 255) / 256, 256, 0, cu_stream(ctx)>>>(db, dout, B, N);
    return cu_launched(ctx, "bias_rows_grad");
}

// ---- activations ----

#define GELU_K 0.7978845608028654f
#define GELU_A 0.044715f

__global__ static void k_relu_fwd(const float *in, float *out, size_t n) { GRID_STRIDE(i, n) out[i] = in[i] > 0.0f ? in[i] : 0.0f; }
__global__ static void k_relu_bwd(const float *out, const float *dout, float *din, size_t n)
{
    GRID_STRIDE(i, n) din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}
__global__ static void k_gelu_fwd(const float *in, float *out, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float x = in[i];
        out[i] = 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    }
}
__global__ static void k_gelu_bwd(const float *in, const float *dout, float *din, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float x = in[i];
        float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
        float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
        din[i] = dout[i] * (cdf + x * pdf);
    }
}
__global__ static void k_tanh_fwd(const float *in, float *out, size_t n) { GRID_STRIDE(i, n) out[i] = tanhf(in[i]); }
__global__ static void k_tanh_bwd(const float *out, const float *dout, float *din, size_t n)
{
    GRID_STRIDE(i, n) din[i] = dout[i] * (1.0f - out[i] * out[i]);
}
// x * sigmoid(2u), the CPU's form (no cancellation for negative x)
__global__ static void k_gelu_tanh_fwd(const float *in, float *out, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float x = in[i];
        float en = expf(-2.0f * GELU_K * (x + GELU_A * x * x * x));
        out[i] = x / (1.0f + en);
    }
}
__global__ static void k_gelu_tanh_bwd(const float *in, const float *dout, float *din, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float x = in[i], x2 = x * x;
        float en = expf(-2.0f * GELU_K * (x + GELU_A * x2 * x));
        float g = 1.0f / (1.0f + en), g1 = en * g;
        float du = GELU_K * (1.0f + 3.0f * GELU_A * x2);
        din[i] = dout[i] * (g + 2.0f * x * g * g1 * du);
    }
}

// x / (1 + e^{-x}), the CPU's form; 1 - s = s e^{-x} in backward, as there. e^{-x} is capped at e^88
// as rs_vexpf caps it, so below x = -88 backward gets 0, not inf * 0 = NaN.
__global__ static void k_silu_fwd(const float *in, float *out, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float x = in[i];
        out[i] = x / (1.0f + expf(fminf(-x, 88.0f)));
    }
}
__global__ static void k_silu_bwd(const float *in, const float *dout, float *din, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float x = in[i];
        float en = expf(fminf(-x, 88.0f));
        float s = 1.0f / (1.0f + en);
        din[i] = dout[i] * (s * (1.0f + x * (en * s)));
    }
}

#define ACT_FWD(name)                                                                                  \
    extern "C" rs_status rs_cuda_##name##_fwd(rs_kctx *ctx, const float *in, float *out, size_t n)     \
    {                                                                                                  \
        CU_CTX(ctx, #name "_fwd");                                                                     \
        CU_PTR(ctx, #name "_fwd", in, n);                                                              \
        CU_PTR(ctx, #name "_fwd", out, n);                                                             \
        if (!n) return RS_OK;                                                                          \
        k_##name##_fwd LAUNCH(n)(in, out, n);                                                          \
        return cu_launched(ctx, #name "_fwd");                                                         \
    }
#define ACT_BWD(name, saved)                                                                           \
    extern "C" rs_status rs_cuda_##name##_bwd(rs_kctx *ctx, const float *saved, const float *dout, float *din, size_t n) \
    {                                                                                                  \
        CU_CTX(ctx, #name "_bwd");                                                                     \
        CU_PTR(ctx, #name "_bwd", saved, n);                                                           \
        CU_PTR(ctx, #name "_bwd", dout, n);                                                            \
        CU_PTR(ctx, #name "_bwd", din, n);                                                             \
        if (!n) return RS_OK;                                                                          \
        k_##name##_bwd LAUNCH(n)(saved, dout, din, n);                                                 \
        return cu_launched(ctx, #name "_bwd");                                                         \
    }

ACT_FWD(relu)
ACT_BWD(relu, out)
ACT_FWD(gelu)
ACT_BWD(gelu, in)
ACT_FWD(tanh)
ACT_BWD(tanh, out)
ACT_FWD(gelu_tanh)
ACT_BWD(gelu_tanh, in)
ACT_FWD(silu)
ACT_BWD(silu, in)

// ---- dropout: the CPU's counter-based hash, so both devices draw the same mask ----

__device__ static inline float hash_uniform(uint64_t seed, uint64_t i)
{
    uint64_t z = seed ^ (i * 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

__global__ static void k_dropout_fwd(const float *in, float *out, uint8_t *mask, size_t n, float p, float scale,
                                     uint64_t seed)
{
    GRID_STRIDE(i, n)
    {
        uint8_t keep = hash_uniform(seed, i) >= p;
        mask[i] = keep;
        out[i] = keep ? in[i] * scale : 0.0f;
    }
}

__global__ static void k_dropout_bwd(const float *dout, const uint8_t *mask, float *din, size_t n, float scale)
{
    GRID_STRIDE(i, n) din[i] = mask[i] ? dout[i] * scale : 0.0f;
}

extern "C" rs_status rs_cuda_dropout_fwd(rs_kctx *ctx, const float *in, float *out, uint8_t *mask, size_t n, float p,
                                         uint64_t seed)
{
    CU_CTX(ctx, "dropout_fwd");
    if (!(p >= 0.0f && p <= 1.0f))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "dropout_fwd: p=%g; a probability in [0, 1] is needed", (double)p);
    CU_PTR(ctx, "dropout_fwd", in, n);
    CU_PTR(ctx, "dropout_fwd", out, n);
    CU_PTR(ctx, "dropout_fwd", mask, n);
    if (!n) return RS_OK;
    k_dropout_fwd LAUNCH(n)(in, out, mask, n, p, p < 1.0f ? 1.0f / (1.0f - p) : 0.0f, seed);
    return cu_launched(ctx, "dropout_fwd");
}

extern "C" rs_status rs_cuda_dropout_bwd(rs_kctx *ctx, const float *dout, const uint8_t *mask, float *din, size_t n,
                                         float p)
{
    CU_CTX(ctx, "dropout_bwd");
    if (!(p >= 0.0f && p <= 1.0f))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "dropout_bwd: p=%g; a probability in [0, 1] is needed", (double)p);
    CU_PTR(ctx, "dropout_bwd", dout, n);
    CU_PTR(ctx, "dropout_bwd", mask, n);
    CU_PTR(ctx, "dropout_bwd", din, n);
    if (!n) return RS_OK;
    k_dropout_bwd LAUNCH(n)(dout, mask, din, n, p < 1.0f ? 1.0f / (1.0f - p) : 0.0f);
    return cu_launched(ctx, "dropout_bwd");
}

// ---- the generic unary op (ONNX operators of imported graphs) ----

__device__ static inline float clamp01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

__global__ static void k_unary(rs_unary_op op, const float *x, float *y, size_t n, float alpha, float beta)
{
    GRID_STRIDE(i, n)
    {
        float v = x[i], r = 0.0f;
        switch (op) {
        case RS_UNARY_RELU: r = v > 0.0f ? v : 0.0f; break;
        case RS_UNARY_TANH: r = tanhf(v); break;
        case RS_UNARY_SIGMOID: r = 1.0f / (1.0f + expf(-v)); break;
        case RS_UNARY_ERF: r = erff(v); break;
        case RS_UNARY_GELU: r = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); break;
        case RS_UNARY_GELU_TANH: r = 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v))); break;
        case RS_UNARY_SQRT: r = sqrtf(v); break;
        case RS_UNARY_EXP: r = expf(v); break;
        case RS_UNARY_LOG: r = logf(v); break;
        case RS_UNARY_NEG: r = -v; break;
        case RS_UNARY_ABS: r = fabsf(v); break;
        case RS_UNARY_RECIPROCAL: r = 1.0f / v; break;
        case RS_UNARY_LEAKYRELU: r = v >= 0 ? v : alpha * v; break;
        case RS_UNARY_CLIP: r = v < alpha ? alpha : v > beta ? beta : v; break;
        case RS_UNARY_HARDSIGMOID: r = clamp01(alpha * v + beta); break;
        case RS_UNARY_HARDSWISH: r = v * clamp01(v * (1.0f / 6.0f) + 0.5f); break;
        case RS_UNARY_CAST_INT: r = isfinite(v) ? truncf(v) : 0.0f; break;
        case RS_UNARY_CAST_BOOL: r = v != 0.0f ? 1.0f : 0.0f; break;
        case RS_UNARY_NOT: r = v == 0.0f ? 1.0f : 0.0f; break;
        case RS_UNARY_SILU: r = v / (1.0f + expf(-v)); break;
        }
        y[i] = r;
    }
}

extern "C" rs_status rs_cuda_unary(rs_kctx *ctx, rs_unary_op op, const float *x, float *y, size_t n, float alpha,
                                   float beta)
{
    CU_CTX(ctx, "unary");
    CU_PTR(ctx, "unary", x, n);
    CU_PTR(ctx, "unary", y, n);
    if (!n) return RS_OK;
    k_unary LAUNCH(n)(op, x, y, n, alpha, beta);
    return cu_launched(ctx, "unary");
}

// ---- optimizers (torch.optim's single-tensor arithmetic, as engine/cpu/optim_kernels.c) ----

__global__ static void k_sgd(float *p, const float *g, float *mom, size_t n, float lr, float momentum, float dampening,
                             float wd, bool nesterov, bool first_step)
{
    GRID_STRIDE(i, n)
    {
        float d = g[i];
        if (wd != 0.0f) d += wd * p[i];
        if (momentum != 0.0f) {
            float b = first_step ? d : momentum * mom[i] + (1.0f - dampening) * d;
            mom[i] = b;
            d = nesterov ? d + momentum * b : b;
        }
        p[i] -= lr * d;
    }
}

__global__ static void k_adam(float *p, const float *g, float *m, float *v, size_t n, float b1, float b2, float eps,
                              float wd, bool decoupled, float step_size, float bc2_sqrt, float decay)
{
    GRID_STRIDE(i, n)
    {
        float gi = g[i];
        if (decoupled) p[i] *= decay;
        else if (wd != 0.0f) gi += wd * p[i];
        m[i] += (1.0f - b1) * (gi - m[i]);
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] -= step_size * m[i] / denom;
    }
}

extern "C" rs_status rs_cuda_sgd_update(rs_kctx *ctx, float *p, const float *g, float *mom, size_t n, float lr,
                                        float momentum, float dampening, float wd, bool nesterov, bool first_step)
{
    CU_CTX(ctx, "sgd_update");
    CU_PTR(ctx, "sgd_update", p, n);
    CU_PTR(ctx, "sgd_update", g, n);
    CU_PTR(ctx, "sgd_update", mom, n && momentum != 0.0f);
    if (!n) return RS_OK;
    k_sgd LAUNCH(n)(p, g, mom, n, lr, momentum, dampening, wd, nesterov, first_step);
    return cu_launched(ctx, "sgd_update");
}

extern "C" rs_status rs_cuda_adam_update(rs_kctx *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr,
                                         float b1, float b2, float eps, float wd, bool decoupled, int64_t t)
{
    CU_CTX(ctx, "adam_update");
    CU_PTR(ctx, "adam_update", p, n);
    CU_PTR(ctx, "adam_update", g, n);
    CU_PTR(ctx, "adam_update", m, n);
    CU_PTR(ctx, "adam_update", v, n);
    if (t < 1) return rs_kctx_fail(ctx, RS_ERR_ARG, "adam_update: step t=%lld; Adam counts steps from 1", (long long)t);
    if (!n) return RS_OK;
    // the step's scalars on the host in double, rounded once, exactly as the CPU forms them
    const double bc1 = 1.0 - pow((double)b1, (double)t);
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)b2, (double)t));
    const float step_size = (float)((double)lr / bc1);
    const float decay = (float)(1.0 - (double)lr * (double)wd);
    k_adam LAUNCH(n)(p, g, m, v, n, b1, b2, eps, wd, decoupled, step_size, bc2_sqrt, decay);
    return cu_launched(ctx, "adam_update");
}
