// CUDA kernels of the GPT's causal attention, training (attn_fwd, attn_bwd) and one decoding step
// over a key/value cache (attn_step); its own file beside nn.cu's other layers because it is the
// one layer made of cuBLAS batched products around a softmax.
#include "kernel_util.cuh"

// ================================ causal attention ================================
// Per sample, the heads' products are strided batched cuBLAS calls on the (T, 3C) rows directly (head
// h of q is columns [h*hs, (h+1)*hs) with row stride 3C): scores S = q k^T / sqrt(hs) into att, a
// causal softmax in place, out = att v. The full (T, T) product is computed and its upper triangle
// masked: simple, and cuBLAS's speed covers the wasted half at these sizes.

static rs_status check_heads(rs_kctx *ctx, const char *who, int B, int T, int C, int NH)
{
    CU_NONNEG(ctx, who, B);
    CU_NONNEG(ctx, who, T);
    if (NH < 1 || C < 1 || C % NH)
        return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: C=%d does not split into NH=%d heads (need C, NH >= 1, C %% NH == 0)",
                            who, C, NH);
    return RS_OK;
}

// One warp per row t of one (b, h): softmax over s <= t, zeros after.
__global__ static void k_causal_softmax(float *att, int T, size_t rows)
{
    size_t row = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    int t = (int)(row % T);
    float *a = att + row * T;
    float mx = -INFINITY;
    for (int s = lane; s <= t; s += 32) mx = fmaxf(mx, a[s]);
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.0f;
    for (int s = lane; s <= t; s += 32) {
        float e = expf(a[s] - mx);
        a[s] = e;
        sum += e;
    }
    for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float inv = 1.0f / sum;
    for (int s = lane; s < T; s += 32) a[s] = s <= t ? a[s] * inv : 0.0f;
}

// dS = P * (dP - sum_s P dP) * scale, row by row, in place over dP.
__global__ static void k_softmax_bwd(const float *att, float *dp, int T, float scale, size_t rows)
{
    size_t row = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float *p = att + row * T;
    float *d = dp + row * T;
    float dot = 0.0f;
    for (int s = lane; s < T; s += 32) dot += p[s] * d[s];
    for (int o = 16; o; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    for (int s = lane; s < T; s += 32) d[s] = p[s] * (d[s] - dot) * scale;
}

static unsigned warp_blocks(size_t rows) { return (unsigned)((rows * 32 + 255) / 256); }

extern "C" rs_status rs_cuda_attn_fwd(rs_kctx *ctx, const float *qkv, float *out, float *att, int B, int T, int C,
                                      int NH)
{
    CU_CTX(ctx, "attn_fwd");
    RS_KTRY(check_heads(ctx, "attn_fwd", B, T, C, NH));
    CU_PTR(ctx, "attn_fwd", qkv, B && T);
    CU_PTR(ctx, "attn_fwd", out, B && T);
    CU_PTR(ctx, "attn_fwd", att, B && T);
    if (!B || !T) return RS_OK;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C, *v = q + 2 * C;
        float *a = att + (size_t)b * NH * TT;
        // S (T, T) = scale q (T, hs) k^T, per head
        RS_KTRY(rs_cuda_sgemm_batched(ctx, "attn_fwd", false, true, T, T, hs, scale, q, C3, hs, k, C3, hs, 0.0f, a, T,
                                      TT, NH));
        k_causal_softmax<<<warp_blocks((size_t)NH * T), 256, 0, cu_stream(ctx)>>>(a, T, (size_t)NH * T);
        RS_KTRY(cu_launched(ctx, "attn_fwd"));
        // out (T, hs) = P (T, T) v (T, hs), heads side by side in the (T, C) rows
        RS_KTRY(rs_cuda_sgemm_batched(ctx, "attn_fwd", false, false, T, hs, T, 1.0f, a, T, TT, v, C3, hs, 0.0f,
                                      out + (size_t)b * T * C, C, hs, NH));
    }
    return RS_OK;
}

static size_t bwd_workspace(int T, int NH) { return (size_t)NH * T * T * sizeof(float); }

extern "C" rs_status rs_cuda_attn_workspace(rs_kctx *ctx, int B, int T, int C, int NH, size_t *bytes)
{
    CU_CTX(ctx, "attn_workspace");
    CU_PTR(ctx, "attn_workspace", bytes, 1);
    RS_KTRY(check_heads(ctx, "attn_workspace", B, T, C, NH));
    *bytes = bwd_workspace(T, NH); // one sample's (NH, T, T) score gradients
    return RS_OK;
}

extern "C" rs_status rs_cuda_attn_bwd(rs_kctx *ctx, const float *qkv, const float *att, const float *dout, float *dqkv,
                                      float *ws, size_t ws_bytes, int B, int T, int C, int NH)
{
    CU_CTX(ctx, "attn_bwd");
    RS_KTRY(check_heads(ctx, "attn_bwd", B, T, C, NH));
    CU_PTR(ctx, "attn_bwd", qkv, B && T);
    CU_PTR(ctx, "attn_bwd", att, B && T);
    CU_PTR(ctx, "attn_bwd", dout, B && T);
    CU_PTR(ctx, "attn_bwd", dqkv, B && T);
    size_t need = bwd_workspace(T, NH);
    if (B && T && (!ws || ws_bytes < need))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "attn_bwd: workspace of %zu bytes, %zu needed for T=%d NH=%d (ask "
                            "attn_workspace)", ws ? ws_bytes : 0, need, T, NH);
    if (!B || !T) return RS_OK;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C, *v = q + 2 * C;
        const float *a = att + (size_t)b * NH * TT, *dy = dout + (size_t)b * T * C;
        float *dq = dqkv + (size_t)b * T * C3, *dk = dq + C, *dv = dq + 2 * C;
        // dv (T, hs) = P^T dy
        RS_KTRY(rs_cuda_sgemm_batched(ctx, "attn_bwd", true, false, T, hs, T, 1.0f, a, T, TT, dy, C, hs, 0.0f, dv, C3,
                                      hs, NH));
        // dP (T, T) = dy v^T
        RS_KTRY(rs_cuda_sgemm_batched(ctx, "attn_bwd", false, true, T, T, hs, 1.0f, dy, C, hs, v, C3, hs, 0.0f, ws, T,
                                      TT, NH));
        k_softmax_bwd<<<warp_blocks((size_t)NH * T), 256, 0, cu_stream(ctx)>>>(a, ws, T, scale, (size_t)NH * T);
        RS_KTRY(cu_launched(ctx, "attn_bwd"));
        // dq = dS k; dk = dS^T q
        RS_KTRY(rs_cuda_sgemm_batched(ctx, "attn_bwd", false, false, T, hs, T, 1.0f, ws, T, TT, k, C3, hs, 0.0f, dq, C3,
                                      hs, NH));
        RS_KTRY(rs_cuda_sgemm_batched(ctx, "attn_bwd", true, false, T, hs, T, 1.0f, ws, T, TT, q, C3, hs, 0.0f, dk, C3,
                                      hs, NH));
    }
    return RS_OK;
}

// One block per (b, h): the len scores in shared memory, a block softmax, then one thread per output
// column sums over the cache.
__global__ static void k_attn_step(const float *q, const float *kc, const float *vc, float *out, int len, int maxT,
                                   int C, int NH, float scale)
{
    extern __shared__ float sc[];
    __shared__ float shf[ROW_THREADS];
    __shared__ double shd[ROW_THREADS];
    const int b = blockIdx.x / NH, h = blockIdx.x % NH, hs = C / NH;
    const float *qp = q + (size_t)b * C + h * hs;
    const float *kp = kc + (size_t)b * maxT * C + h * hs, *vp = vc + (size_t)b * maxT * C + h * hs;
    float mx = -INFINITY;
    for (int s = threadIdx.x; s < len; s += ROW_THREADS) {
        float d = 0.0f;
        for (int i = 0; i < hs; i++) d += qp[i] * kp[(size_t)s * C + i];
        sc[s] = d * scale;
        mx = fmaxf(mx, sc[s]);
    }
    mx = block_max(mx, shf);
    double sum = 0.0;
    for (int s = threadIdx.x; s < len; s += ROW_THREADS) {
        sc[s] = expf(sc[s] - mx);
        sum += sc[s];
    }
    float inv = (float)(1.0 / block_sum(sum, shd));
    for (int i = threadIdx.x; i < hs; i += ROW_THREADS) {
        float o = 0.0f;
        for (int s = 0; s < len; s++) o += sc[s] * vp[(size_t)s * C + i];
        out[(size_t)b * C + h * hs + i] = o * inv;
    }
}

#define STEP_MAX_LEN 11264 // the scores of one (b, h) beside the reduction buffers, in 48 KiB of shared memory

extern "C" rs_status rs_cuda_attn_step(rs_kctx *ctx, const float *q, const float *kc, const float *vc, float *out, int B,
                                       int len, int maxT, int C, int NH)
{
    CU_CTX(ctx, "attn_step");
    RS_KTRY(check_heads(ctx, "attn_step", B, maxT, C, NH));
    if (B && (len < 1 || len > maxT))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "attn_step: len=%d is outside the cache's [1, %d]", len, maxT);
    CU_PTR(ctx, "attn_step", q, B);
    CU_PTR(ctx, "attn_step", kc, B);
    CU_PTR(ctx, "attn_step", vc, B);
    CU_PTR(ctx, "attn_step", out, B);
    if (!B) return RS_OK;
    if (len > STEP_MAX_LEN)
        return rs_kctx_fail(ctx, RS_ERR_UNSUPPORTED, "attn_step: len=%d; the CUDA decoding step holds at most %d "
                            "positions", len, STEP_MAX_LEN);
    k_attn_step<<<B * NH, ROW_THREADS, (size_t)len * sizeof(float), cu_stream(ctx)>>>(q, kc, vc, out, len, maxT, C, NH,
                                                                                       1.0f / sqrtf((float)(C / NH)));
    return cu_launched(ctx, "attn_step");
}
