/* CPU convolution and pooling. Convolution lowers each sample to a matrix with im2col and runs one
 * BLAS product per sample; samples are spread over OpenMP threads, each with its own column buffer,
 * and OpenBLAS runs single-threaded inside the parallel region (it checks omp_in_parallel), which at
 * these sizes beats one threaded product over the whole batch. */
#include <float.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_scope.h"

/* Output columns ox in [*lo, *hi) read input column ox*s + off inside [0, n): the window's valid
 * span, so the copy loops below run without a bounds test per element (and vectorize). */
static void valid_span(int off, int s, int n, int on, int *lo, int *hi)
{
    int l = off < 0 ? (-off + s - 1) / s : 0;
    int h = off < n ? (n - 1 - off) / s + 1 : 0;
    if (h > on) h = on;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* img (C,H,W) -> col (C*KH*KW, OH*OW), zeros where the window hangs over the padding. */
static void im2col(const rs_conv_geom *g, const float *img, float *col)
{
    const int ohw = g->oh * g->ow, ow = g->ow, sw = g->sw;
    for (int c = 0; c < g->c; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                float *dst = col + ((size_t)(c * g->kh + ki) * g->kw + kj) * ohw;
                const float *src = img + (size_t)c * g->h * g->w;
                const int ix0 = kj - g->pw;
                int lo, hi;
                valid_span(ix0, sw, g->w, ow, &lo, &hi);
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->sh - g->ph + ki;
                    float *d = dst + (size_t)oy * ow;
                    if (iy < 0 || iy >= g->h) {
                        memset(d, 0, sizeof(float) * ow);
                        continue;
                    }
                    const float *s = src + (size_t)iy * g->w + ix0;
                    for (int ox = 0; ox < lo; ox++) d[ox] = 0.0f;
                    if (sw == 1)
                        for (int ox = lo; ox < hi; ox++) d[ox] = s[ox];
                    else
                        for (int ox = lo; ox < hi; ox++) d[ox] = s[ox * sw];
                    for (int ox = hi; ox < ow; ox++) d[ox] = 0.0f;
                }
            }
}

/* col (C*KH*KW, OH*OW) summed back into img (C,H,W); img must be zeroed by the caller. */
static void col2im(const rs_conv_geom *g, const float *col, float *img)
{
    const int ohw = g->oh * g->ow, ow = g->ow, sw = g->sw;
    for (int c = 0; c < g->c; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                const float *src = col + ((size_t)(c * g->kh + ki) * g->kw + kj) * ohw;
                float *dst = img + (size_t)c * g->h * g->w;
                const int ix0 = kj - g->pw;
                int lo, hi;
                valid_span(ix0, sw, g->w, ow, &lo, &hi);
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->sh - g->ph + ki;
                    if (iy < 0 || iy >= g->h) continue;
                    const float *s = src + (size_t)oy * ow;
                    float *d = dst + (size_t)iy * g->w + ix0;
                    if (sw == 1)
                        for (int ox = lo; ox < hi; ox++) d[ox] += s[ox];
                    else
                        for (int ox = lo; ox < hi; ox++) d[ox * sw] += s[ox];
                }
            }
}

/* Sum of x[0..n) with 16 partial sums: a single running sum is one dependent add per element
 * (latency-bound); this is what lets the bias gradient keep up with the products around it. */
static float row_sum(const float *x, int n)
{
    float acc[16] = {0};
    int j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) acc[l] += x[j + l];
    for (int l = 0; j < n; j++, l++) acc[l] += x[j];
    for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

static bool is_pointwise(const rs_conv_geom *g)
{
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->oh == g->h &&
           g->ow == g->w;
}

static size_t col_floats(const rs_conv_geom *g) { return (size_t)g->c * g->kh * g->kw * g->oh * g->ow; }

/* Backward's weight and bias gradients are summed over the batch in RS_CONV_CHUNKS fixed chunks of
 * samples (fewer when the batch is smaller), each chunk in sample order into its own accumulator, and
 * the chunks folded in chunk order: the sum's order is the batch's, never the thread count's, so the
 * thread tuner (engine/train/tune.h) switching between 1 and N threads changes no bit of a run. At
 * most 16 threads share a backward (one chunk each); the fold is a few kilobytes per layer. */
#define RS_CONV_CHUNKS 16

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; } /* 64-byte aligned blocks */

/* Per thread: a column buffer. */
static size_t thread_floats(const rs_conv_geom *g) { return align16(col_floats(g)); }

/* Per chunk: private dW and db accumulators. */
static size_t chunk_floats(const rs_conv_geom *g) { return align16((size_t)g->oc * g->c * g->kh * g->kw + (size_t)g->oc); }

static int chunks_for(int B) { return B < RS_CONV_CHUNKS ? (B > 0 ? B : 1) : RS_CONV_CHUNKS; }

static size_t workspace_bytes(const rs_kctx *ctx, const rs_conv_geom *g, int B)
{
    int t = ctx->threads;
    if (t > B) t = B;
    if (t < 1) t = 1;
    return ((size_t)t * thread_floats(g) + (size_t)chunks_for(B) * chunk_floats(g)) * sizeof(float);
}

rs_status rs_cpu_check_geom(rs_kctx *ctx, const char *who, const rs_conv_geom *g, int B, bool conv)
{
    CPU_PTR(ctx, who, g, 1);
    CPU_NONNEG(ctx, who, B);
    /* The output size is the caller's (ONNX's asymmetric padding gives one the formula with ph does
     * not): every read is bounds-checked against the input, so any output size is safe. */
    if (g->c < 1 || g->h < 1 || g->w < 1 || (conv && g->oc < 1) || g->kh < 1 || g->kw < 1 || g->sh < 1 ||
        g->sw < 1 || g->ph < 0 || g->pw < 0 || g->oh < 1 || g->ow < 1)
        return rs_kctx_fail(ctx, RS_ERR_ARG,
                            "%s: geometry c=%d h=%d w=%d oc=%d k=%dx%d stride=%dx%d pad=%dx%d out=%dx%d; channels, "
                            "sizes, kernel, stride and output must be >= 1 and padding >= 0",
                            who, g->c, g->h, g->w, g->oc, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->oh, g->ow);
    return RS_OK;
}

rs_status rs_cpu_conv2d_workspace(rs_kctx *ctx, const rs_conv_geom *g, int B, size_t *bytes)
{
    CPU_CTX(ctx, "conv2d_workspace");
    CPU_PTR(ctx, "conv2d_workspace", bytes, 1);
    RS_KTRY(rs_cpu_check_geom(ctx, "conv2d_workspace", g, B, true));
    *bytes = workspace_bytes(ctx, g, B);
    return RS_OK;
}

/* The checks conv2d_fwd and _bwd share. */
static rs_status conv_args(rs_kctx *ctx, const char *who, const rs_conv_geom *g, int B, const float *in,
                           const float *w, const float *ws, size_t ws_bytes)
{
    CPU_CTX(ctx, who);
    RS_KTRY(rs_cpu_check_geom(ctx, who, g, B, true));
    CPU_PTR(ctx, who, in, B);
    CPU_PTR(ctx, who, w, 1);
    size_t need = workspace_bytes(ctx, g, B);
    if (B && (!ws || ws_bytes < need))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: workspace of %zu bytes, %zu needed for a batch of %d on %d threads "
                            "(ask conv2d_workspace)", who, ws ? ws_bytes : 0, need, B, ctx->threads);
    return RS_OK;
}

rs_status rs_cpu_conv2d_fwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, const float *w,
                            const float *bias, float *out, float *ws, size_t ws_bytes)
{
    RS_KTRY(conv_args(ctx, "conv2d_fwd", g, B, in, w, ws, ws_bytes));
    CPU_PTR(ctx, "conv2d_fwd", out, B);
    if (!B) return RS_OK;
    const int K = g->c * g->kh * g->kw, N = g->oh * g->ow;
    const size_t in_n = (size_t)g->c * g->h * g->w, out_n = (size_t)g->oc * N;
    int nt = ctx->threads;
    if (nt > B) nt = B;
    const rs_prec prec = ctx->prec;
    int fail = 0;
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int b = 0; b < B; b++) {
        float *col = ws + (size_t)omp_get_thread_num() * thread_floats(g);
        const float *x = in + (size_t)b * in_n;
        float *y = out + (size_t)b * out_n;
        if (is_pointwise(g)) col = (float *)x;
        else im2col(g, x, col);
        CPU_GEMM_PREC(&fail, prec, false, false, g->oc, N, K, 1.0f, w, K, col, N, 0.0f, y, N);
        if (bias)
            for (int o = 0; o < g->oc; o++) {
                float bv = bias[o], *row = y + (size_t)o * N;
                for (int j = 0; j < N; j++) row[j] += bv;
            }
    }
    cpu_leave(ctx, prev);
    if (fail) return rs_kctx_fail(ctx, RS_ERR_NOMEM, "conv2d_fwd: out of memory for the %s operands", rs_prec_name(prec));
    return RS_OK;
}

rs_status rs_cpu_conv2d_bwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, const float *w,
                            const float *dout, float *din, float *dw, float *db, float *ws, size_t ws_bytes)
{
    RS_KTRY(conv_args(ctx, "conv2d_bwd", g, B, in, w, ws, ws_bytes));
    CPU_PTR(ctx, "conv2d_bwd", dout, B);
    CPU_PTR(ctx, "conv2d_bwd", dw, 1);
    if (!B) return RS_OK;
    const int K = g->c * g->kh * g->kw, N = g->oh * g->ow;
    const size_t in_n = (size_t)g->c * g->h * g->w, out_n = (size_t)g->oc * N;
    const size_t wn = (size_t)g->oc * K, tf = thread_floats(g);
    int nt = ctx->threads;
    if (nt > B) nt = B;
    const rs_prec prec = ctx->prec;
    int fail = 0;
    int prev = cpu_enter(ctx);
    const int nc = chunks_for(B);
    float *acc = ws + (size_t)nt * tf; /* (nc, chunk_floats): each chunk's dW (OC,K) then db (OC) */
    const size_t cf = chunk_floats(g);
    #pragma omp parallel num_threads(nt)
    {
        float *col = ws + (size_t)omp_get_thread_num() * tf;
        #pragma omp for schedule(dynamic, 1)
        for (int ch = 0; ch < nc; ch++) {
            float *tdw = acc + (size_t)ch * cf, *tdb = tdw + wn;
            memset(tdw, 0, (wn + (size_t)g->oc) * sizeof(float));
            for (int b = (int)((int64_t)B * ch / nc); b < (int)((int64_t)B * (ch + 1) / nc); b++) {
                const float *x = in + (size_t)b * in_n;
                const float *dy = dout + (size_t)b * out_n;
                float *c = is_pointwise(g) ? (float *)x : col;
                if (!is_pointwise(g)) im2col(g, x, c);
                /* dW (OC,K) += dy (OC,N) . col^T (N,K) */
                CPU_GEMM_PREC(&fail, prec, false, true, g->oc, K, N, 1.0f, dy, N, c, N, 1.0f, tdw, K);
                if (db)
                    for (int o = 0; o < g->oc; o++) tdb[o] += row_sum(dy + (size_t)o * N, N);
                if (din) {
                    float *dx = din + (size_t)b * in_n;
                    if (is_pointwise(g)) {
                        CPU_GEMM_PREC(&fail, prec, true, false, K, N, g->oc, 1.0f, w, K, dy, N, 0.0f, dx, N);
                    } else {
                        /* dcol (K,N) = W^T (K,OC) . dy (OC,N), then scatter-add into the image. */
                        CPU_GEMM_PREC(&fail, prec, true, false, K, N, g->oc, 1.0f, w, K, dy, N, 0.0f, col, N);
                        memset(dx, 0, in_n * sizeof(float));
                        col2im(g, col, dx);
                    }
                }
            }
        }
        /* Fold the chunks in chunk order, element by element (the implicit barrier above has them all). */
        #pragma omp for schedule(static)
        for (size_t i = 0; i < wn + (size_t)g->oc; i++) {
            if (i >= wn && !db) continue;
            float *dst = i < wn ? dw + i : db + (i - wn);
            float v = *dst;
            for (int ch = 0; ch < nc; ch++) v += acc[(size_t)ch * cf + i];
            *dst = v;
        }
    }
    cpu_leave(ctx, prev);
    if (fail) return rs_kctx_fail(ctx, RS_ERR_NOMEM, "conv2d_bwd: out of memory for the %s operands", rs_prec_name(prec));
    return RS_OK;
}

/* One output of max pooling by a scan in row-major window order: the first maximum wins, as in
 * PyTorch, and the first NaN wins and sticks. Rows ki in [ki0, ki1) are inside the image. */
static void maxpool_one(const rs_conv_geom *g, const float *x, int iy0, int ki0, int ki1, int ox, float *y,
                        int32_t *am)
{
    int ix0 = ox * g->sw - g->pw, kj0, kj1;
    valid_span(ix0, 1, g->w, g->kw, &kj0, &kj1);
    if (ki0 >= ki1 || kj0 >= kj1) { /* the window lies wholly in the padding */
        *y = -FLT_MAX;
        if (am) *am = -1;
        return;
    }
    int32_t bi = (iy0 + ki0) * g->w + ix0 + kj0;
    float best = x[bi];
    for (int ki = ki0; ki < ki1; ki++)
        for (int kj = kj0; kj < kj1; kj++) {
            int32_t i = (iy0 + ki) * g->w + ix0 + kj;
            float v = x[i];
            if (v > best || (v != v && best == best)) {
                best = v;
                bi = i;
            }
        }
    *y = best;
    if (am) *am = bi;
}

/* Outputs [xa, xb) of one row whose windows lie inside the image horizontally: the same scan as
 * maxpool_one, window position by window position across the row, with selects instead of branches
 * (a branch per element mispredicts about half the time on activations; this form vectorizes, and
 * with sw a constant 2, the usual pooling stride, the strided loads do too). am is NULL at inference:
 * the function is always inlined, so each call site compiles to its own loop, with or without it. */
static inline __attribute__((always_inline)) void maxpool_interior(const rs_conv_geom *g,
                                                                   const float *restrict x, int iy0, int ki0,
                                                                   int ki1, int xa, int xb, int sw,
                                                                   float *restrict y, int32_t *restrict am)
{
    const int w = g->w, pw = g->pw;
    for (int ox = xa; ox < xb; ox++) {
        int32_t i = (iy0 + ki0) * w + ox * sw - pw;
        y[ox] = x[i];
        if (am) am[ox] = i;
    }
    for (int ki = ki0; ki < ki1; ki++)
        for (int kj = ki == ki0 ? 1 : 0; kj < g->kw; kj++) {
            const int32_t base = (iy0 + ki) * w - pw + kj;
            if (!am) {
                for (int ox = xa; ox < xb; ox++) {
                    float v = x[base + ox * sw], b = y[ox];
                    y[ox] = (v > b) | ((v != v) & (b == b)) ? v : b;
                }
                continue;
            }
            for (int ox = xa; ox < xb; ox++) {
                int32_t i = base + ox * sw;
                float v = x[i], b = y[ox];
                int take = (v > b) | ((v != v) & (b == b));
                y[ox] = take ? v : b;
                am[ox] = take ? i : am[ox];
            }
        }
}

/* Inference's common case, a 2x2 window of stride 2 inside the image: the same scan in window order
 * (the first NaN wins) on four loads per output, with no index to keep. */
static inline float max_nan(float best, float v) { return ((v > best) | (v != v)) ? v : best; }

static void maxpool_2x2(const rs_conv_geom *g, int B, const float *in, float *out)
{
    const int planes = B * g->c, ow = g->ow, w = g->w;
    #pragma omp parallel for schedule(static) if (planes * g->oh * g->ow >= 32768)
    for (int p = 0; p < planes; p++) {
        const float *x = in + (size_t)p * g->h * w;
        for (int oy = 0; oy < g->oh; oy++) {
            const float *restrict r0 = x + (size_t)2 * oy * w, *restrict r1 = r0 + w;
            float *restrict y = out + ((size_t)p * g->oh + oy) * ow;
            for (int ox = 0; ox < ow; ox++) {
                float m = r0[2 * ox];
                m = max_nan(m, r0[2 * ox + 1]);
                m = max_nan(m, r1[2 * ox]);
                y[ox] = max_nan(m, r1[2 * ox + 1]);
            }
        }
    }
}

rs_status rs_cpu_maxpool_fwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, float *out, int32_t *argmax)
{
    CPU_CTX(ctx, "maxpool_fwd");
    RS_KTRY(rs_cpu_check_geom(ctx, "maxpool_fwd", g, B, false));
    CPU_PTR(ctx, "maxpool_fwd", in, B);
    CPU_PTR(ctx, "maxpool_fwd", out, B);
    /* argmax may be NULL: inference keeps nothing for backward. */
    if (!argmax && g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && !g->ph && !g->pw && 2 * g->oh <= g->h &&
        2 * g->ow <= g->w) {
        int prev = cpu_enter(ctx);
        maxpool_2x2(g, B, in, out);
        cpu_leave(ctx, prev);
        return RS_OK;
    }
    const int planes = B * g->c, ow = g->ow, sw = g->sw, w = g->w;
    /* Outputs [xa, xb) of a row have their whole window inside the image horizontally. */
    int lo = 0, hi = 0;
    if (g->w >= g->kw) valid_span(-g->pw, sw, w - g->kw + 1, ow, &lo, &hi);
    const int xa = lo, xb = hi; /* copies the threads get by value: no aliasing with the outputs */
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (planes * g->oh * g->ow >= 32768)
    for (int p = 0; p < planes; p++) {
        const float *x = in + (size_t)p * g->h * w;
        for (int oy = 0; oy < g->oh; oy++) {
            float *y = out + ((size_t)p * g->oh + oy) * ow;
            int32_t *am = argmax ? argmax + ((size_t)p * g->oh + oy) * ow : NULL;
            int iy0 = oy * g->sh - g->ph, ki0, ki1;
            valid_span(iy0, 1, g->h, g->kh, &ki0, &ki1); /* rows iy0+ki inside the image */
            for (int ox = 0; ox < xa; ox++) maxpool_one(g, x, iy0, ki0, ki1, ox, y + ox, am ? am + ox : NULL);
            for (int ox = xb; ox < ow; ox++) maxpool_one(g, x, iy0, ki0, ki1, ox, y + ox, am ? am + ox : NULL);
            if (xa >= xb) continue;
            if (ki0 >= ki1) {
                for (int ox = xa; ox < xb; ox++) maxpool_one(g, x, iy0, ki0, ki1, ox, y + ox, am ? am + ox : NULL);
                continue;
            }
            if (!am && sw == 2) maxpool_interior(g, x, iy0, ki0, ki1, xa, xb, 2, y, NULL);
            else if (!am) maxpool_interior(g, x, iy0, ki0, ki1, xa, xb, sw, y, NULL);
            else if (sw == 2) maxpool_interior(g, x, iy0, ki0, ki1, xa, xb, 2, y, am);
            else maxpool_interior(g, x, iy0, ki0, ki1, xa, xb, sw, y, am);
        }
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_maxpool_bwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *dout, const int32_t *argmax,
                             float *din)
{
    CPU_CTX(ctx, "maxpool_bwd");
    RS_KTRY(rs_cpu_check_geom(ctx, "maxpool_bwd", g, B, false));
    CPU_PTR(ctx, "maxpool_bwd", dout, B);
    CPU_PTR(ctx, "maxpool_bwd", argmax, B);
    CPU_PTR(ctx, "maxpool_bwd", din, B);
    int prev = cpu_enter(ctx);
    const int planes = B * g->c;
    const int ohw = g->oh * g->ow;
    #pragma omp parallel for schedule(static) if (planes * ohw >= 32768)
    for (int p = 0; p < planes; p++) {
        float *dx = din + (size_t)p * g->h * g->w;
        memset(dx, 0, sizeof(float) * g->h * g->w);
        const float *dy = dout + (size_t)p * ohw;
        const int32_t *am = argmax + (size_t)p * ohw;
        for (int i = 0; i < ohw; i++)
            if (am[i] >= 0) dx[am[i]] += dy[i];
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_avgpool_fwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, float *out)
{
    CPU_CTX(ctx, "avgpool_fwd");
    RS_KTRY(rs_cpu_check_geom(ctx, "avgpool_fwd", g, B, false));
    CPU_PTR(ctx, "avgpool_fwd", in, B);
    CPU_PTR(ctx, "avgpool_fwd", out, B);
    int prev = cpu_enter(ctx);
    const int planes = B * g->c;
    const float inv = 1.0f / (float)(g->kh * g->kw); /* count_include_pad */
    #pragma omp parallel for schedule(static) if (planes * g->oh * g->ow >= 32768)
    for (int p = 0; p < planes; p++) {
        const float *x = in + (size_t)p * g->h * g->w;
        float *y = out + (size_t)p * g->oh * g->ow;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                float s = 0.0f;
                for (int ki = 0; ki < g->kh; ki++) {
                    int iy = oy * g->sh - g->ph + ki;
                    if (iy < 0 || iy >= g->h) continue;
                    for (int kj = 0; kj < g->kw; kj++) {
                        int ix = ox * g->sw - g->pw + kj;
                        if (ix >= 0 && ix < g->w) s += x[iy * g->w + ix];
                    }
                }
                y[oy * g->ow + ox] = s * inv;
            }
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_avgpool_bwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *dout, float *din)
{
    CPU_CTX(ctx, "avgpool_bwd");
    RS_KTRY(rs_cpu_check_geom(ctx, "avgpool_bwd", g, B, false));
    CPU_PTR(ctx, "avgpool_bwd", dout, B);
    CPU_PTR(ctx, "avgpool_bwd", din, B);
    int prev = cpu_enter(ctx);
    const int planes = B * g->c;
    const float inv = 1.0f / (float)(g->kh * g->kw);
    #pragma omp parallel for schedule(static) if (planes * g->oh * g->ow >= 32768)
    for (int p = 0; p < planes; p++) {
        float *dx = din + (size_t)p * g->h * g->w;
        memset(dx, 0, sizeof(float) * g->h * g->w);
        const float *dy = dout + (size_t)p * g->oh * g->ow;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                float v = dy[oy * g->ow + ox] * inv;
                for (int ki = 0; ki < g->kh; ki++) {
                    int iy = oy * g->sh - g->ph + ki;
                    if (iy < 0 || iy >= g->h) continue;
                    for (int kj = 0; kj < g->kw; kj++) {
                        int ix = ox * g->sw - g->pw + kj;
                        if (ix >= 0 && ix < g->w) dx[iy * g->w + ix] += v;
                    }
                }
            }
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}
