// CUDA kernels of the layers: convolution (im2col + cuBLAS), pooling, layer norm, softmax
// cross-entropy and the GPT's embedding (its attention is attn.cu's). Simple and correct first:
// reductions are one block per row in shared memory (double sums where the CPU sums in double),
// products go to cuBLAS (engine/cuda/cuda_blas.c), and gradients that several threads would add to one
// place are gathered by the owner of the place instead, except the token embedding's (atomicAdd, see
// embed_bwd).
#include <float.h>
#include <stdlib.h>

#include "kernel_util.cuh"

// ================================ convolution ================================

static rs_status check_geom(rs_kctx *ctx, const char *who, const rs_conv_geom *g, int B, bool conv)
{
    CU_PTR(ctx, who, g, 1);
    CU_NONNEG(ctx, who, B);
    if (g->c < 1 || g->h < 1 || g->w < 1 || (conv && g->oc < 1) || g->kh < 1 || g->kw < 1 || g->sh < 1 ||
        g->sw < 1 || g->ph < 0 || g->pw < 0 || g->oh < 1 || g->ow < 1)
        return rs_kctx_fail(ctx, RS_ERR_ARG,
                            "%s: geometry c=%d h=%d w=%d oc=%d k=%dx%d stride=%dx%d pad=%dx%d out=%dx%d; channels, "
                            "sizes, kernel, stride and output must be >= 1 and padding >= 0",
                            who, g->c, g->h, g->w, g->oc, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->oh, g->ow);
    return RS_OK;
}

// One sample's columns: (C*KH*KW, OH*OW), zero where the window reads padding.
static size_t col_floats(const rs_conv_geom *g) { return (size_t)g->c * g->kh * g->kw * g->oh * g->ow; }

__global__ static void k_im2col(rs_conv_geom g, const float *x, float *col, size_t n)
{
    const int N = g.oh * g.ow;
    GRID_STRIDE(i, n)
    {
        int j = (int)(i % N), r = (int)(i / N);
        int kj = r % g.kw, ki = (r / g.kw) % g.kh, c = r / (g.kw * g.kh);
        int oy = j / g.ow, ox = j % g.ow;
        int iy = oy * g.sh - g.ph + ki, ix = ox * g.sw - g.pw + kj;
        col[i] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? x[((size_t)c * g.h + iy) * g.w + ix] : 0.0f;
    }
}

// Each input pixel gathers the column entries that read it (no two threads write one place).
__global__ static void k_col2im(rs_conv_geom g, const float *col, float *x, size_t n)
{
    const int N = g.oh * g.ow;
    GRID_STRIDE(i, n)
    {
        int ix = (int)(i % g.w), iy = (int)(i / g.w % g.h), c = (int)(i / ((size_t)g.w * g.h));
        float s = 0.0f;
        for (int ki = 0; ki < g.kh; ki++) {
            int ty = iy + g.ph - ki;
            if (ty < 0 || ty % g.sh) continue;
            int oy = ty / g.sh;
            if (oy >= g.oh) continue;
            for (int kj = 0; kj < g.kw; kj++) {
                int tx = ix + g.pw - kj;
                if (tx < 0 || tx % g.sw) continue;
                int ox = tx / g.sw;
                if (ox >= g.ow) continue;
                s += col[((size_t)(c * g.kh + ki) * g.kw + kj) * N + oy * g.ow + ox];
            }
        }
        x[i] = s;
    }
}

__global__ static void k_bias_chan(float *y, const float *bias, int OC, int N, size_t n)
{
    GRID_STRIDE(i, n) y[i] += bias[i / N % OC];
}

__global__ static void k_bias_chan_grad(float *db, const float *dout, int B, int OC, int N)
{
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    float s = 0.0f;
    for (int b = 0; b < B; b++) {
        const float *d = dout + ((size_t)b * OC + o) * N;
        for (int j = 0; j < N; j++) s += d[j];
    }
    db[o] += s;
}

extern "C" rs_status rs_cuda_conv2d_workspace(rs_kctx *ctx, const rs_conv_geom *g, int B, size_t *bytes)
{
    CU_CTX(ctx, "conv2d_workspace");
    CU_PTR(ctx, "conv2d_workspace", bytes, 1);
    RS_KTRY(check_geom(ctx, "conv2d_workspace", g, B, true));
    *bytes = col_floats(g) * sizeof(float); // one sample's columns, reused sample after sample
    return RS_OK;
}

static rs_status conv_args(rs_kctx *ctx, const char *who, const rs_conv_geom *g, int B, const float *in, const float *w,
                           const float *ws, size_t ws_bytes)
{
    CU_CTX(ctx, who);
    RS_KTRY(check_geom(ctx, who, g, B, true));
    CU_PTR(ctx, who, in, B);
    CU_PTR(ctx, who, w, 1);
    size_t need = col_floats(g) * sizeof(float);
    if (B && (!ws || ws_bytes < need))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: workspace of %zu bytes, %zu needed for one sample's columns "
                            "(ask conv2d_workspace)", who, ws ? ws_bytes : 0, need);
    return RS_OK;
}

extern "C" rs_status rs_cuda_conv2d_fwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, const float *w,
                                        const float *bias, float *out, float *ws, size_t ws_bytes)
{
    RS_KTRY(conv_args(ctx, "conv2d_fwd", g, B, in, w, ws, ws_bytes));
    CU_PTR(ctx, "conv2d_fwd", out, B);
    if (!B) return RS_OK;
    const int K = g->c * g->kh * g->kw, N = g->oh * g->ow;
    const size_t in_n = (size_t)g->c * g->h * g->w, out_n = (size_t)g->oc * N, cn = col_floats(g);
    for (int b = 0; b < B; b++) {
        k_im2col LAUNCH(cn)(*g, in + b * in_n, ws, cn);
        RS_KTRY(cu_launched(ctx, "conv2d_fwd"));
        // y_b (OC, N) = W (OC, K) col (K, N)
        RS_KTRY(rs_cuda_sgemm(ctx, "conv2d_fwd", false, false, g->oc, N, K, 1.0f, w, K, ws, N, 0.0f, out + b * out_n, N));
    }
    if (bias) {
        size_t n = (size_t)B * out_n;
        k_bias_chan LAUNCH(n)(out, bias, g->oc, N, n);
        RS_KTRY(cu_launched(ctx, "conv2d_fwd"));
    }
    return RS_OK;
}

extern "C" rs_status rs_cuda_conv2d_bwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, const float *w,
                                        const float *dout, float *din, float *dw, float *db, float *ws, size_t ws_bytes)
{
    RS_KTRY(conv_args(ctx, "conv2d_bwd", g, B, in, w, ws, ws_bytes));
    CU_PTR(ctx, "conv2d_bwd", dout, B);
    CU_PTR(ctx, "conv2d_bwd", dw, 1);
    if (!B) return RS_OK;
    const int K = g->c * g->kh * g->kw, N = g->oh * g->ow;
    const size_t in_n = (size_t)g->c * g->h * g->w, out_n = (size_t)g->oc * N, cn = col_floats(g);
    for (int b = 0; b < B; b++) {
        const float *dy = dout + b * out_n;
        k_im2col LAUNCH(cn)(*g, in + b * in_n, ws, cn);
        RS_KTRY(cu_launched(ctx, "conv2d_bwd"));
        // dW (OC, K) += dy (OC, N) col^T (N, K)
        RS_KTRY(rs_cuda_sgemm(ctx, "conv2d_bwd", false, true, g->oc, K, N, 1.0f, dy, N, ws, N, 1.0f, dw, K));
        if (din) {
            // dcol (K, N) = W^T (K, OC) dy (OC, N), then folded back onto the input (same stream: after dW read col)
            RS_KTRY(rs_cuda_sgemm(ctx, "conv2d_bwd", true, false, K, N, g->oc, 1.0f, w, K, dy, N, 0.0f, ws, N));
            k_col2im LAUNCH(in_n)(*g, ws, din + b * in_n, in_n);
            RS_KTRY(cu_launched(ctx, "conv2d_bwd"));
        }
    }
    if (db) {
        k_bias_chan_grad<<<(g->oc + 255) / 256, 256, 0, cu_stream(ctx)>>>(db, dout, B, g->oc, N);
        RS_KTRY(cu_launched(ctx, "conv2d_bwd"));
    }
    return RS_OK;
}

// ================================ pooling ================================

// The CPU's rule: the first largest value of the window in reading order wins, NaN beats a number;
// a window wholly in the padding gives -FLT_MAX and argmax -1.
__global__ static void k_maxpool_fwd(rs_conv_geom g, const float *in, float *out, int32_t *argmax, size_t n)
{
    GRID_STRIDE(i, n)
    {
        int ox = (int)(i % g.ow), oy = (int)(i / g.ow % g.oh);
        size_t p = i / ((size_t)g.ow * g.oh);
        const float *x = in + p * g.h * g.w;
        int y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
        float best = -FLT_MAX;
        int32_t bi = -1;
        for (int ki = 0; ki < g.kh; ki++) {
            int iy = y0 + ki;
            if (iy < 0 || iy >= g.h) continue;
            for (int kj = 0; kj < g.kw; kj++) {
                int ix = x0 + kj;
                if (ix < 0 || ix >= g.w) continue;
                float v = x[iy * g.w + ix];
                if (bi < 0 || v > best || (v != v && best == best)) {
                    best = v;
                    bi = iy * g.w + ix;
                }
            }
        }
        out[i] = best;
        if (argmax) argmax[i] = bi;
    }
}

// Output windows (oy0..oy1) x (ox0..ox1) that contain input pixel (iy, ix).
__device__ static void windows_of(const rs_conv_geom &g, int iy, int ix, int *oy0, int *oy1, int *ox0, int *ox1)
{
    int ty = iy + g.ph, tx = ix + g.pw;
    *oy0 = ty - g.kh + 1 <= 0 ? 0 : (ty - g.kh + 1 + g.sh - 1) / g.sh;
    *oy1 = min(ty / g.sh, g.oh - 1);
    *ox0 = tx - g.kw + 1 <= 0 ? 0 : (tx - g.kw + 1 + g.sw - 1) / g.sw;
    *ox1 = min(tx / g.sw, g.ow - 1);
}

__global__ static void k_maxpool_bwd(rs_conv_geom g, const float *dout, const int32_t *argmax, float *din, size_t n)
{
    GRID_STRIDE(i, n)
    {
        int ix = (int)(i % g.w), iy = (int)(i / g.w % g.h);
        size_t p = i / ((size_t)g.w * g.h);
        int oy0, oy1, ox0, ox1;
        windows_of(g, iy, ix, &oy0, &oy1, &ox0, &ox1);
        const size_t base = p * g.oh * g.ow;
        const int32_t me = iy * g.w + ix;
        float s = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                size_t o = base + (size_t)oy * g.ow + ox;
                if (argmax[o] == me) s += dout[o];
            }
        din[i] = s;
    }
}

__global__ static void k_avgpool_fwd(rs_conv_geom g, const float *in, float *out, size_t n)
{
    const float inv = 1.0f / (float)(g.kh * g.kw);
    GRID_STRIDE(i, n)
    {
        int ox = (int)(i % g.ow), oy = (int)(i / g.ow % g.oh);
        size_t p = i / ((size_t)g.ow * g.oh);
        const float *x = in + p * g.h * g.w;
        float s = 0.0f;
        for (int ki = 0; ki < g.kh; ki++) {
            int iy = oy * g.sh - g.ph + ki;
            if (iy < 0 || iy >= g.h) continue;
            for (int kj = 0; kj < g.kw; kj++) {
                int ix = ox * g.sw - g.pw + kj;
                if (ix >= 0 && ix < g.w) s += x[iy * g.w + ix];
            }
        }
        out[i] = s * inv;
    }
}

__global__ static void k_avgpool_bwd(rs_conv_geom g, const float *dout, float *din, size_t n)
{
    const float inv = 1.0f / (float)(g.kh * g.kw);
    GRID_STRIDE(i, n)
    {
        int ix = (int)(i % g.w), iy = (int)(i / g.w % g.h);
        size_t p = i / ((size_t)g.w * g.h);
        int oy0, oy1, ox0, ox1;
        windows_of(g, iy, ix, &oy0, &oy1, &ox0, &ox1);
        const float *dy = dout + p * g.oh * g.ow;
        float s = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) s += dy[oy * g.ow + ox] * inv;
        din[i] = s;
    }
}

extern "C" rs_status rs_cuda_maxpool_fwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, float *out,
                                         int32_t *argmax)
{
    CU_CTX(ctx, "maxpool_fwd");
    RS_KTRY(check_geom(ctx, "maxpool_fwd", g, B, false));
    CU_PTR(ctx, "maxpool_fwd", in, B);
    CU_PTR(ctx, "maxpool_fwd", out, B);
    size_t n = (size_t)B * g->c * g->oh * g->ow;
    if (!n) return RS_OK;
    k_maxpool_fwd LAUNCH(n)(*g, in, out, argmax, n);
    return cu_launched(ctx, "maxpool_fwd");
}

extern "C" rs_status rs_cuda_maxpool_bwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *dout,
                                         const int32_t *argmax, float *din)
{
    CU_CTX(ctx, "maxpool_bwd");
    RS_KTRY(check_geom(ctx, "maxpool_bwd", g, B, false));
    CU_PTR(ctx, "maxpool_bwd", dout, B);
    CU_PTR(ctx, "maxpool_bwd", argmax, B);
    CU_PTR(ctx, "maxpool_bwd", din, B);
    size_t n = (size_t)B * g->c * g->h * g->w;
    if (!n) return RS_OK;
    k_maxpool_bwd LAUNCH(n)(*g, dout, argmax, din, n);
    return cu_launched(ctx, "maxpool_bwd");
}

extern "C" rs_status rs_cuda_avgpool_fwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, float *out)
{
    CU_CTX(ctx, "avgpool_fwd");
    RS_KTRY(check_geom(ctx, "avgpool_fwd", g, B, false));
    CU_PTR(ctx, "avgpool_fwd", in, B);
    CU_PTR(ctx, "avgpool_fwd", out, B);
    size_t n = (size_t)B * g->c * g->oh * g->ow;
    if (!n) return RS_OK;
    k_avgpool_fwd LAUNCH(n)(*g, in, out, n);
    return cu_launched(ctx, "avgpool_fwd");
}

extern "C" rs_status rs_cuda_avgpool_bwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *dout, float *din)
{
    CU_CTX(ctx, "avgpool_bwd");
    RS_KTRY(check_geom(ctx, "avgpool_bwd", g, B, false));
    CU_PTR(ctx, "avgpool_bwd", dout, B);
    CU_PTR(ctx, "avgpool_bwd", din, B);
    size_t n = (size_t)B * g->c * g->h * g->w;
    if (!n) return RS_OK;
    k_avgpool_bwd LAUNCH(n)(*g, dout, din, n);
    return cu_launched(ctx, "avgpool_bwd");
}

// The generic pooling of imported graphs: any padding, ceil-mode windows, either average.
__global__ static void k_pool2d(rs_conv_geom g, int pb, int pr, bool is_max, bool cip, const float *in, float *out,
                                size_t n)
{
    GRID_STRIDE(i, n)
    {
        int ox = (int)(i % g.ow), oy = (int)(i / g.ow % g.oh);
        size_t p = i / ((size_t)g.ow * g.oh);
        const float *xp = in + p * g.h * g.w;
        int y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
        float m = -FLT_MAX, s = 0.0f;
        int cnt = 0, cnt_pad = 0;
        for (int ki = 0; ki < g.kh; ki++)
            for (int kj = 0; kj < g.kw; kj++) {
                int iy = y0 + ki, ix = x0 + kj;
                if (iy < g.h + pb && ix < g.w + pr) cnt_pad++;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                float v = xp[iy * g.w + ix];
                m = v > m ? v : m;
                s += v;
                cnt++;
            }
        int c = cip ? cnt_pad : cnt;
        out[i] = is_max ? m : (c ? s / (float)c : 0.0f);
    }
}

extern "C" rs_status rs_cuda_pool2d(rs_kctx *ctx, const rs_conv_geom *g, int pb, int pr, bool max,
                                    bool count_include_pad, int B, const float *in, float *out)
{
    CU_CTX(ctx, "pool2d");
    RS_KTRY(check_geom(ctx, "pool2d", g, B, false));
    CU_NONNEG(ctx, "pool2d", pb);
    CU_NONNEG(ctx, "pool2d", pr);
    CU_PTR(ctx, "pool2d", in, B);
    CU_PTR(ctx, "pool2d", out, B);
    size_t n = (size_t)B * g->c * g->oh * g->ow;
    if (!n) return RS_OK;
    k_pool2d LAUNCH(n)(*g, pb, pr, max, count_include_pad, in, out, n);
    return cu_launched(ctx, "pool2d");
}

// ================================ layer norm ================================

__global__ static void k_ln_fwd(const float *in, const float *gamma, const float *beta, float *out, float *mean,
                                float *rstd, int N, float eps)
{
    __shared__ double sh[ROW_THREADS];
    const size_t b = blockIdx.x;
    const float *x = in + b * N;
    float *y = out + b * N;
    double s = 0.0;
    for (int j = threadIdx.x; j < N; j += ROW_THREADS) s += x[j];
    float mu = (float)(block_sum(s, sh) / N);
    double v = 0.0;
    for (int j = threadIdx.x; j < N; j += ROW_THREADS) {
        double d = x[j] - mu;
        v += d * d;
    }
    float rs = 1.0f / sqrtf((float)(block_sum(v, sh) / N) + eps); // biased variance, as PyTorch
    for (int j = threadIdx.x; j < N; j += ROW_THREADS) y[j] = (x[j] - mu) * rs * gamma[j] + beta[j];
    if (threadIdx.x == 0) {
        mean[b] = mu;
        rstd[b] = rs;
    }
}

__global__ static void k_ln_bwd_rows(const float *in, const float *gamma, const float *mean, const float *rstd,
                                     const float *dout, float *din, int N)
{
    __shared__ double sh[ROW_THREADS];
    const size_t b = blockIdx.x;
    const float *x = in + b * N, *dy = dout + b * N;
    float mu = mean[b], rs = rstd[b];
    double sg = 0.0, sgx = 0.0;
    for (int j = threadIdx.x; j < N; j += ROW_THREADS) {
        float g = dy[j] * gamma[j];
        sg += g;
        sgx += g * (x[j] - mu) * rs;
    }
    float mg = (float)(block_sum(sg, sh) / N), mgx = (float)(block_sum(sgx, sh) / N);
    float *dx = din + b * N;
    for (int j = threadIdx.x; j < N; j += ROW_THREADS) {
        float xhat = (x[j] - mu) * rs;
        dx[j] = rs * (dy[j] * gamma[j] - mg - xhat * mgx);
    }
}

// One thread per column, rows in order.
__global__ static void k_ln_bwd_cols(const float *in, const float *mean, const float *rstd, const float *dout,
                                     float *dgamma, float *dbeta, int B, int N)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    float sg = 0.0f, sb = 0.0f;
    for (int b = 0; b < B; b++) {
        float dy = dout[(size_t)b * N + j];
        sg += dy * (in[(size_t)b * N + j] - mean[b]) * rstd[b];
        sb += dy;
    }
    dgamma[j] += sg;
    dbeta[j] += sb;
}

extern "C" rs_status rs_cuda_layernorm_fwd(rs_kctx *ctx, const float *in, const float *gamma, const float *beta,
                                           float *out, float *mean, float *rstd, int B, int N, float eps)
{
    CU_CTX(ctx, "layernorm_fwd");
    CU_NONNEG(ctx, "layernorm_fwd", B);
    CU_NONNEG(ctx, "layernorm_fwd", N);
    CU_PTR(ctx, "layernorm_fwd", in, B && N);
    CU_PTR(ctx, "layernorm_fwd", gamma, B && N);
    CU_PTR(ctx, "layernorm_fwd", beta, B && N);
    CU_PTR(ctx, "layernorm_fwd", out, B && N);
    CU_PTR(ctx, "layernorm_fwd", mean, B && N);
    CU_PTR(ctx, "layernorm_fwd", rstd, B && N);
    if (!B || !N) return RS_OK;
    k_ln_fwd<<<B, ROW_THREADS, 0, cu_stream(ctx)>>>(in, gamma, beta, out, mean, rstd, N, eps);
    return cu_launched(ctx, "layernorm_fwd");
}

extern "C" rs_status rs_cuda_layernorm_bwd(rs_kctx *ctx, const float *in, const float *gamma, const float *mean,
                                           const float *rstd, const float *dout, float *din, float *dgamma,
                                           float *dbeta, int B, int N)
{
    CU_CTX(ctx, "layernorm_bwd");
    CU_NONNEG(ctx, "layernorm_bwd", B);
    CU_NONNEG(ctx, "layernorm_bwd", N);
    CU_PTR(ctx, "layernorm_bwd", in, B && N);
    CU_PTR(ctx, "layernorm_bwd", gamma, B && N);
    CU_PTR(ctx, "layernorm_bwd", mean, B && N);
    CU_PTR(ctx, "layernorm_bwd", rstd, B && N);
    CU_PTR(ctx, "layernorm_bwd", dout, B && N);
    CU_PTR(ctx, "layernorm_bwd", dgamma, B && N);
    CU_PTR(ctx, "layernorm_bwd", dbeta, B && N);
    if (!B || !N) return RS_OK;
    if (din) {
        k_ln_bwd_rows<<<B, ROW_THREADS, 0, cu_stream(ctx)>>>(in, gamma, mean, rstd, dout, din, N);
        RS_KTRY(cu_launched(ctx, "layernorm_bwd"));
    }
    k_ln_bwd_cols<<<(N + 255) / 256, 256, 0, cu_stream(ctx)>>>(in, mean, rstd, dout, dgamma, dbeta, B, N);
    return cu_launched(ctx, "layernorm_bwd");
}

// ================================ softmax cross-entropy ================================

// Labels live on the device; a label outside [0, C) would index past its row, so they are read back
// and checked before any kernel uses them (B ints: one small synchronous copy per call).
static rs_status check_labels(rs_kctx *ctx, const char *who, const int32_t *labels, int B, int C)
{
    if (!B) return RS_OK;
    int32_t *h = (int32_t *)malloc((size_t)B * sizeof *h);
    if (!h) return rs_kctx_fail(ctx, RS_ERR_NOMEM, "%s: no host memory to check %d labels", who, B);
    cudaError_t e = cudaMemcpyAsync(h, labels, (size_t)B * sizeof *h, cudaMemcpyDeviceToHost, cu_stream(ctx));
    if (e == cudaSuccess) e = cudaStreamSynchronize(cu_stream(ctx));
    if (e != cudaSuccess) {
        free(h);
        return cu_fail(ctx, who, e);
    }
    for (int b = 0; b < B; b++)
        if (h[b] < 0 || h[b] >= C) {
            int bad = h[b];
            free(h);
            return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: label %d of row %d is outside [0, %d)", who, bad, b, C);
        }
    free(h);
    return RS_OK;
}

__global__ static void k_xent_fwd(const float *logits, const int32_t *labels, float *probs, float *losses, int C)
{
    __shared__ double shd[ROW_THREADS];
    __shared__ float shf[ROW_THREADS];
    const size_t b = blockIdx.x;
    const float *z = logits + b * C;
    float *p = probs + b * C;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < C; j += ROW_THREADS) mx = fmaxf(mx, z[j]);
    mx = block_max(mx, shf);
    double s = 0.0;
    for (int j = threadIdx.x; j < C; j += ROW_THREADS) {
        p[j] = expf(z[j] - mx);
        s += p[j];
    }
    s = block_sum(s, shd);
    float inv = (float)(1.0 / s);
    for (int j = threadIdx.x; j < C; j += ROW_THREADS) p[j] *= inv;
    if (threadIdx.x == 0) losses[b] = (float)(log(s) + mx - z[labels[b]]);
}

__global__ static void k_xent_bwd(const float *probs, const int32_t *labels, float *dlogits, int C, float scale, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float d = probs[i] * scale;
        if ((int)(i % C) == labels[i / C]) d -= scale;
        dlogits[i] = d;
    }
}

extern "C" rs_status rs_cuda_softmax_xent_fwd(rs_kctx *ctx, const float *logits, const int32_t *labels, float *probs,
                                              float *losses, int B, int C)
{
    CU_CTX(ctx, "softmax_xent_fwd");
    CU_NONNEG(ctx, "softmax_xent_fwd", B);
    if (B && C < 1) return rs_kctx_fail(ctx, RS_ERR_ARG, "softmax_xent_fwd: C=%d; at least one class is needed", C);
    CU_PTR(ctx, "softmax_xent_fwd", logits, B);
    CU_PTR(ctx, "softmax_xent_fwd", labels, B);
    CU_PTR(ctx, "softmax_xent_fwd", probs, B);
    CU_PTR(ctx, "softmax_xent_fwd", losses, B);
    RS_KTRY(check_labels(ctx, "softmax_xent_fwd", labels, B, C));
    if (!B) return RS_OK;
    k_xent_fwd<<<B, ROW_THREADS, 0, cu_stream(ctx)>>>(logits, labels, probs, losses, C);
    return cu_launched(ctx, "softmax_xent_fwd");
}

extern "C" rs_status rs_cuda_softmax_xent_bwd(rs_kctx *ctx, const float *probs, const int32_t *labels, float *dlogits,
                                              int B, int C, float scale)
{
    CU_CTX(ctx, "softmax_xent_bwd");
    CU_NONNEG(ctx, "softmax_xent_bwd", B);
    if (B && C < 1) return rs_kctx_fail(ctx, RS_ERR_ARG, "softmax_xent_bwd: C=%d; at least one class is needed", C);
    CU_PTR(ctx, "softmax_xent_bwd", probs, B);
    CU_PTR(ctx, "softmax_xent_bwd", labels, B);
    CU_PTR(ctx, "softmax_xent_bwd", dlogits, B);
    RS_KTRY(check_labels(ctx, "softmax_xent_bwd", labels, B, C));
    size_t n = (size_t)B * C;
    if (!n) return RS_OK;
    k_xent_bwd LAUNCH(n)(probs, labels, dlogits, C, scale, n);
    return cu_launched(ctx, "softmax_xent_bwd");
}

// ================================ embedding ================================

__global__ static void k_embed_fwd(const int32_t *tok, const float *wte, const float *wpe, float *out, int T, int C,
                                   size_t n)
{
    GRID_STRIDE(i, n)
    {
        size_t r = i / C;
        int c = (int)(i % C), t = (int)(r % T);
        out[i] = wte[(size_t)tok[r] * C + c] + wpe[(size_t)t * C + c];
    }
}

__global__ static void k_embed_bwd_pos(const float *dout, float *dwpe, int B, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float s = dwpe[i];
        for (int b = 0; b < B; b++) s += dout[(size_t)b * n + i];
        dwpe[i] = s;
    }
}

// A token that occurs at several positions gets several additions: atomics, so their order (and the
// last bits of the sum) may vary from run to run.
__global__ static void k_embed_bwd_tok(const int32_t *tok, const float *dout, float *dwte, int C, size_t n)
{
    GRID_STRIDE(i, n) atomicAdd(&dwte[(size_t)tok[i / C] * C + i % C], dout[i]);
}

extern "C" rs_status rs_cuda_embed_fwd(rs_kctx *ctx, const int32_t *tok, const float *wte, const float *wpe, float *out,
                                       int B, int T, int C)
{
    CU_CTX(ctx, "embed_fwd");
    CU_NONNEG(ctx, "embed_fwd", B);
    CU_NONNEG(ctx, "embed_fwd", T);
    CU_NONNEG(ctx, "embed_fwd", C);
    CU_PTR(ctx, "embed_fwd", tok, B && T && C);
    CU_PTR(ctx, "embed_fwd", wte, B && T && C);
    CU_PTR(ctx, "embed_fwd", wpe, B && T && C);
    CU_PTR(ctx, "embed_fwd", out, B && T && C);
    size_t n = (size_t)B * T * C;
    if (!n) return RS_OK;
    k_embed_fwd LAUNCH(n)(tok, wte, wpe, out, T, C, n);
    return cu_launched(ctx, "embed_fwd");
}

extern "C" rs_status rs_cuda_embed_bwd(rs_kctx *ctx, const int32_t *tok, const float *dout, float *dwte, float *dwpe,
                                       int B, int T, int C)
{
    CU_CTX(ctx, "embed_bwd");
    CU_NONNEG(ctx, "embed_bwd", B);
    CU_NONNEG(ctx, "embed_bwd", T);
    CU_NONNEG(ctx, "embed_bwd", C);
    CU_PTR(ctx, "embed_bwd", tok, B && T && C);
    CU_PTR(ctx, "embed_bwd", dout, B && T && C);
    CU_PTR(ctx, "embed_bwd", dwte, B && T && C);
    CU_PTR(ctx, "embed_bwd", dwpe, B && T && C);
    size_t n = (size_t)B * T * C;
    if (!n) return RS_OK;
    k_embed_bwd_pos LAUNCH((size_t)T * C)(dout, dwpe, B, (size_t)T * C);
    RS_KTRY(cu_launched(ctx, "embed_bwd"));
    k_embed_bwd_tok LAUNCH(n)(tok, dout, dwte, C, n);
    return cu_launched(ctx, "embed_bwd");
}
