/* CPU convolution and pooling. Convolution lowers each sample to a matrix with im2col and runs one
 * BLAS product per sample; samples are spread over OpenMP threads, each with its own column buffer,
 * and OpenBLAS runs single-threaded inside the parallel region (it checks omp_in_parallel), which at
 * these sizes beats one threaded product over the whole batch. */
#include <float.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"

/* img (C,H,W) -> col (C*KH*KW, OH*OW), zeros where the window hangs over the padding. */
static void im2col(const rs_conv_geom *g, const float *img, float *col)
{
    const int ohw = g->oh * g->ow;
    for (int c = 0; c < g->c; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                float *dst = col + ((size_t)(c * g->kh + ki) * g->kw + kj) * ohw;
                const float *src = img + (size_t)c * g->h * g->w;
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->sh - g->ph + ki;
                    float *d = dst + oy * g->ow;
                    if (iy < 0 || iy >= g->h) {
                        memset(d, 0, sizeof(float) * g->ow);
                        continue;
                    }
                    const float *s = src + (size_t)iy * g->w;
                    if (g->sw == 1) {
                        /* Contiguous run: only the ends touch padding. */
                        int ix0 = -g->pw + kj;
                        for (int ox = 0; ox < g->ow; ox++) {
                            int ix = ix0 + ox;
                            d[ox] = (ix >= 0 && ix < g->w) ? s[ix] : 0.0f;
                        }
                    } else {
                        for (int ox = 0; ox < g->ow; ox++) {
                            int ix = ox * g->sw - g->pw + kj;
                            d[ox] = (ix >= 0 && ix < g->w) ? s[ix] : 0.0f;
                        }
                    }
                }
            }
}

/* col (C*KH*KW, OH*OW) summed back into img (C,H,W); img must be zeroed by the caller. */
static void col2im(const rs_conv_geom *g, const float *col, float *img)
{
    const int ohw = g->oh * g->ow;
    for (int c = 0; c < g->c; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                const float *src = col + ((size_t)(c * g->kh + ki) * g->kw + kj) * ohw;
                float *dst = img + (size_t)c * g->h * g->w;
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->sh - g->ph + ki;
                    if (iy < 0 || iy >= g->h) continue;
                    const float *s = src + oy * g->ow;
                    float *d = dst + (size_t)iy * g->w;
                    for (int ox = 0; ox < g->ow; ox++) {
                        int ix = ox * g->sw - g->pw + kj;
                        if (ix >= 0 && ix < g->w) d[ix] += s[ox];
                    }
                }
            }
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
                for (int o = 0; o < g->oc; o++) {
                    const float *row = dy + (size_t)o * N;
                    float s = 0.0f;
                    for (int j = 0; j < N; j++) s += row[j];
                    tdb[o] += s;
                }
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

void rs_cpu_maxpool_fwd(const rs_conv_geom *g, int B, const float *in, float *out, int32_t *argmax)
{
    const int planes = B * g->c;
    #pragma omp parallel for schedule(static) if (planes * g->oh * g->ow >= 32768)
    for (int p = 0; p < planes; p++) {
        const float *x = in + (size_t)p * g->h * g->w;
        float *y = out + (size_t)p * g->oh * g->ow;
        int32_t *am = argmax + (size_t)p * g->oh * g->ow;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                float best = -FLT_MAX;
                int32_t bi = -1;
                for (int ki = 0; ki < g->kh; ki++) {
                    int iy = oy * g->sh - g->ph + ki;
                    if (iy < 0 || iy >= g->h) continue;
                    for (int kj = 0; kj < g->kw; kj++) {
                        int ix = ox * g->sw - g->pw + kj;
                        if (ix < 0 || ix >= g->w) continue;
                        float v = x[iy * g->w + ix];
                        /* '>' keeps the first maximum, as PyTorch does; NaN propagates like it too. */
                        if (v > best || bi < 0 || v != v) {
                            best = v;
                            bi = iy * g->w + ix;
                            if (v != v) goto done;
                        }
                    }
                }
            done:
                y[oy * g->ow + ox] = best;
                am[oy * g->ow + ox] = bi;
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
