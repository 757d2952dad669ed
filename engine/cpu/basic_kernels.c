/* CPU kernels for dense algebra: fill/copy/axpy, the BLAS product and the bias helpers of Linear.
 * Matrix products go to OpenBLAS; the loops here are memory-bound and split across OpenMP threads
 * only when the array is large enough to pay for the fork. */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"
#include "vmath.h"
#include "prof.h"

#define PAR_MIN 32768

void rs_cpu_fill(float *x, size_t n, float v)
{
    if (v == 0.0f) {
        memset(x, 0, n * sizeof *x);
        return;
    }
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] = v;
}

void rs_cpu_copy(float *dst, const float *src, size_t n) { memcpy(dst, src, n * sizeof *dst); }

void rs_cpu_axpy(float *y, const float *x, size_t n, float a)
{
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

void rs_cpu_scale(float *x, size_t n, float a)
{
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] *= a;
}

void rs_cpu_add(const float *a, const float *b, float *out, size_t n)
{
    /* out may alias a or b: each element is read before it is written, at the same index. */
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void rs_cpu_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc)
{
    const CBLAS_TRANSPOSE tA = ta ? CblasTrans : CblasNoTrans, tB = tb ? CblasTrans : CblasNoTrans;
    if (rs_cpu_prof_active()) { /* off by default: this branch is all it costs (engine/cpu/prof.h) */
        uint64_t t0 = rs_cpu_prof_now_ns();
        cblas_sgemm(CblasRowMajor, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        rs_cpu_prof_gemm_done(t0, M, N, K);
        return;
    }
    cblas_sgemm(CblasRowMajor, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void rs_cpu_bias_rows(float *out, const float *bias, int B, int N)
{
    #pragma omp parallel for schedule(static) if ((size_t)B * N >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        float *row = out + (size_t)b * N;
        for (int j = 0; j < N; j++) row[j] += bias[j];
    }
}

/* Column sums over contiguous rows, a block of at most 256 columns at a time: the same additions in
 * the same order as one running sum per column, but the inner loop runs along a row. */
RS_SIMD static void colsum_cols(float *db, const float *dout, int B, int N, int j0, int j1)
{
    float s[256];
    for (int c0 = j0; c0 < j1; c0 += 256) {
        int c1 = c0 + 256 < j1 ? c0 + 256 : j1, w = c1 - c0;
        for (int j = 0; j < w; j++) s[j] = 0.0f;
        for (int b = 0; b < B; b++) {
            const float *r = dout + (size_t)b * N + c0;
            for (int j = 0; j < w; j++) s[j] += r[j];
        }
        for (int j = 0; j < w; j++) db[c0 + j] += s[j];
    }
}

void rs_cpu_bias_rows_grad(float *db, const float *dout, int B, int N)
{
    /* Parallel over columns so each thread owns its outputs (no reduction race). */
    int nt = (size_t)B * N >= PAR_MIN ? omp_get_max_threads() : 1;
    #pragma omp parallel for schedule(static) if (nt > 1)
    for (int t = 0; t < nt; t++) colsum_cols(db, dout, B, N, (int)((int64_t)N * t / nt), (int)((int64_t)N * (t + 1) / nt));
}

void rs_cpu_set_threads(int n)
{
    if (n < 1) n = 1;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int rs_cpu_get_threads(void) { return omp_get_max_threads(); }
