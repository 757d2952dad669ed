/* CPU kernels for dense algebra: fill/axpy/scale, the BLAS product and the bias helpers of Linear.
 * Matrix products go to OpenBLAS; the loops here are memory-bound and split across OpenMP threads
 * only when the array is large enough to pay for the fork. */
#include <cblas.h>
#include <pthread.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_scope.h"
#include "prof.h"
#include "vmath.h"

#define PAR_MIN 32768

rs_status rs_cpu_fill(rs_kctx *ctx, float *x, size_t n, float v)
{
    CPU_CTX(ctx, "fill");
    CPU_PTR(ctx, "fill", x, n);
    if (v == 0.0f) {
        if (n) memset(x, 0, n * sizeof *x);
        return RS_OK;
    }
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] = v;
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_axpy(rs_kctx *ctx, float *y, const float *x, size_t n, float a)
{
    CPU_CTX(ctx, "axpy");
    CPU_PTR(ctx, "axpy", y, n);
    CPU_PTR(ctx, "axpy", x, n);
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_scale(rs_kctx *ctx, float *x, size_t n, float a)
{
    CPU_CTX(ctx, "scale");
    CPU_PTR(ctx, "scale", x, n);
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] *= a;
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_add(rs_kctx *ctx, const float *a, const float *b, float *out, size_t n)
{
    CPU_CTX(ctx, "add");
    CPU_PTR(ctx, "add", a, n);
    CPU_PTR(ctx, "add", b, n);
    CPU_PTR(ctx, "add", out, n);
    int prev = cpu_enter(ctx);
    /* out may alias a or b: each element is read before it is written, at the same index. */
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
    cpu_leave(ctx, prev);
    return RS_OK;
}

/* See cpu_scope.h: OpenBLAS's process-wide count is rewritten by a threaded product. */
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;

static bool may_thread(void) { return omp_get_max_threads() > 1 && !omp_in_parallel(); }

void rs_cpu_blas_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc)
{
    const CBLAS_TRANSPOSE tA = ta ? CblasTrans : CblasNoTrans, tB = tb ? CblasTrans : CblasNoTrans;
    const bool lock = may_thread();
    if (lock) pthread_mutex_lock(&blas_lock);
    if (rs_cpu_prof_active()) { /* off by default: this branch is all it costs (engine/cpu/prof.h) */
        uint64_t t0 = rs_cpu_prof_now_ns();
        cblas_sgemm(CblasRowMajor, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        rs_cpu_prof_gemm_done(t0, M, N, K);
    } else {
        cblas_sgemm(CblasRowMajor, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
    if (lock) pthread_mutex_unlock(&blas_lock);
}

void rs_cpu_blas_gemv(bool ta, int M0, int N0, float alpha, const float *A, int lda, const float *x, float beta,
                      float *y)
{
    const bool lock = may_thread();
    if (lock) pthread_mutex_lock(&blas_lock);
    cblas_sgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, M0, N0, alpha, A, lda, x, 1, beta, y, 1);
    if (lock) pthread_mutex_unlock(&blas_lock);
}

rs_status rs_cpu_gemm(rs_kctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc)
{
    CPU_CTX(ctx, "gemm");
    CPU_NONNEG(ctx, "gemm", M);
    CPU_NONNEG(ctx, "gemm", N);
    CPU_NONNEG(ctx, "gemm", K);
    /* BLAS's own checks (xerbla) would print and return; these say what would work. */
    int acols = ta ? M : K, bcols = tb ? K : N;
    if (lda < (acols > 1 ? acols : 1) || ldb < (bcols > 1 ? bcols : 1) || ldc < (N > 1 ? N : 1))
        return rs_kctx_fail(ctx, RS_ERR_ARG,
                            "gemm: leading dimensions lda=%d ldb=%d ldc=%d are too small for M=%d N=%d K=%d "
                            "(need lda >= %d, ldb >= %d, ldc >= %d)",
                            lda, ldb, ldc, M, N, K, acols > 1 ? acols : 1, bcols > 1 ? bcols : 1, N > 1 ? N : 1);
    CPU_PTR(ctx, "gemm", A, M && N && K);
    CPU_PTR(ctx, "gemm", B, M && N && K);
    CPU_PTR(ctx, "gemm", C, M && N);
    if (!M || !N) return RS_OK;
    int prev = cpu_enter(ctx);
    bool ok = rs_cpu_gemm_blocks(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    cpu_leave(ctx, prev);
    if (!ok) return rs_kctx_fail(ctx, RS_ERR_NOMEM, "gemm: out of memory for the %s operands of %dx%dx%d",
                                 rs_prec_name(ctx->prec), M, N, K);
    return RS_OK;
}

rs_status rs_cpu_bias_rows(rs_kctx *ctx, float *out, const float *bias, int B, int N)
{
    CPU_CTX(ctx, "bias_rows");
    CPU_NONNEG(ctx, "bias_rows", B);
    CPU_NONNEG(ctx, "bias_rows", N);
    CPU_PTR(ctx, "bias_rows", out, B && N);
    CPU_PTR(ctx, "bias_rows", bias, B && N);
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if ((size_t)B * N >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        float *row = out + (size_t)b * N;
        for (int j = 0; j < N; j++) row[j] += bias[j];
    }
    cpu_leave(ctx, prev);
    return RS_OK;
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

rs_status rs_cpu_bias_rows_grad(rs_kctx *ctx, float *db, const float *dout, int B, int N)
{
    CPU_CTX(ctx, "bias_rows_grad");
    CPU_NONNEG(ctx, "bias_rows_grad", B);
    CPU_NONNEG(ctx, "bias_rows_grad", N);
    CPU_PTR(ctx, "bias_rows_grad", db, N);
    CPU_PTR(ctx, "bias_rows_grad", dout, B && N);
    /* Parallel over columns so each thread owns its outputs (no reduction race). */
    int nt = (size_t)B * N >= PAR_MIN ? ctx->threads : 1;
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (nt > 1)
    for (int t = 0; t < nt; t++) colsum_cols(db, dout, B, N, (int)((int64_t)N * t / nt), (int)((int64_t)N * (t + 1) / nt));
    cpu_leave(ctx, prev);
    return RS_OK;
}
