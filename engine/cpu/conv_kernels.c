/* CPU convolution and pooling. Convolution lowers each sample to a matrix with im2col and runs one
 * BLAS product per sample; samples are spread over OpenMP threads, each with its own column buffer,
 * and OpenBLAS runs single-threaded inside the parallel region (it checks omp_in_parallel), which at
 * these sizes beats one threaded product over the whole batch. */
#include <float.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"

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
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

static size_t col_floats(const rs_conv_geom *g) { return (size_t)g->c * g->kh * g->kw * g->oh * g->ow; }

/* Per thread: a column buffer plus private dW and db accumulators for backward. */
static size_t thread_floats(const rs_conv_geom *g)
{
    size_t wn = (size_t)g->oc * g->c * g->kh * g->kw;
    size_t n = col_floats(g) + wn + (size_t)g->oc;
    return (n + 15) & ~(size_t)15; /* keep each thread's block 64-byte aligned */
}

size_t rs_cpu_conv2d_workspace(const rs_conv_geom *g, int B)
{
    int t = omp_get_max_threads();
    if (t > B) t = B;
    if (t < 1) t = 1;
    return (size_t)t * thread_floats(g) * sizeof(float);
}

void rs_cpu_conv2d_fwd(const rs_conv_geom *g, int B, const float *in, const float *w, const float *bias,
                       float *out, float *ws)
{
    const int K = g->c * g->kh * g->kw, N = g->oh * g->ow;
    const size_t in_n = (size_t)g->c * g->h * g->w, out_n = (size_t)g->oc * N;
    int nt = omp_get_max_threads();
    if (nt > B) nt = B;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int b = 0; b < B; b++) {
        float *col = ws + (size_t)omp_get_thread_num() * thread_floats(g);
        const float *x = in + (size_t)b * in_n;
        float *y = out + (size_t)b * out_n;
        if (is_pointwise(g)) col = (float *)x;
        else im2col(g, x, col);
        rs_cpu_gemm(false, false, g->oc, N, K, 1.0f, w, K, col, N, 0.0f, y, N);
        if (bias)
            for (int o = 0; o < g->oc; o++) {
                float bv = bias[o], *row = y + (size_t)o * N;
                for (int j = 0; j < N; j++) row[j] += bv;
            }
    }
}

void rs_cpu_conv2d_bwd(const rs_conv_geom *g, int B, const float *in, const float *w, const float *dout,
                       float *din, float *dw, float *db, float *ws)
{
    const int K = g->c * g->kh * g->kw, N = g->oh * g->ow;
    const size_t in_n = (size_t)g->c * g->h * g->w, out_n = (size_t)g->oc * N;
    const size_t wn = (size_t)g->oc * K, tf = thread_floats(g);
    int nt = omp_get_max_threads();
    if (nt > B) nt = B;
    #pragma omp parallel num_threads(nt)
    {
        int tid = omp_get_thread_num();
        float *col = ws + (size_t)tid * tf;
        float *tdw = col + col_floats(g), *tdb = tdw + wn;
        memset(tdw, 0, (wn + g->oc) * sizeof(float));
        #pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            const float *x = in + (size_t)b * in_n;
            const float *dy = dout + (size_t)b * out_n;
            float *c = is_pointwise(g) ? (float *)x : col;
            if (!is_pointwise(g)) im2col(g, x, c);
            /* dW (OC,K) += dy (OC,N) . col^T (N,K) */
            rs_cpu_gemm(false, true, g->oc, K, N, 1.0f, dy, N, c, N, 1.0f, tdw, K);
            if (db)
                for (int o = 0; o < g->oc; o++) tdb[o] += row_sum(dy + (size_t)o * N, N);
            if (din) {
                float *dx = din + (size_t)b * in_n;
                if (is_pointwise(g)) {
                    rs_cpu_gemm(true, false, K, N, g->oc, 1.0f, w, K, dy, N, 0.0f, dx, N);
                } else {
                    /* dcol (K,N) = W^T (K,OC) . dy (OC,N), then scatter-add into the image. */
                    rs_cpu_gemm(true, false, K, N, g->oc, 1.0f, w, K, dy, N, 0.0f, col, N);
                    memset(dx, 0, in_n * sizeof(float));
                    col2im(g, col, dx);
                }
            }
        }
        /* Fold the per-thread partial sums in thread order: deterministic for a fixed thread count. */
        #pragma omp for ordered schedule(static, 1)
        for (int t = 0; t < nt; t++) {
            #pragma omp ordered
            {
                const float *pdw = ws + (size_t)t * tf + col_floats(g), *pdb = pdw + wn;
                for (size_t i = 0; i < wn; i++) dw[i] += pdw[i];
                if (db)
                    for (int o = 0; o < g->oc; o++) db[o] += pdb[o];
            }
        }
    }
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

void rs_cpu_maxpool_fwd(const rs_conv_geom *g, int B, const float *in, float *out, int32_t *argmax)
{
    if (!argmax && g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && !g->ph && !g->pw && 2 * g->oh <= g->h &&
        2 * g->ow <= g->w) {
        maxpool_2x2(g, B, in, out);
        return;
    }
    const int planes = B * g->c, ow = g->ow, sw = g->sw, w = g->w;
    /* Outputs [xa, xb) of a row have their whole window inside the image horizontally. */
    int lo = 0, hi = 0;
    if (g->w >= g->kw) valid_span(-g->pw, sw, w - g->kw + 1, ow, &lo, &hi);
    const int xa = lo, xb = hi; /* copies the threads get by value: no aliasing with the outputs */
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
}

void rs_cpu_maxpool_bwd(const rs_conv_geom *g, int B, const float *dout, const int32_t *argmax, float *din)
{
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
}

void rs_cpu_avgpool_fwd(const rs_conv_geom *g, int B, const float *in, float *out)
{
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
}

void rs_cpu_avgpool_bwd(const rs_conv_geom *g, int B, const float *dout, float *din)
{
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
}
