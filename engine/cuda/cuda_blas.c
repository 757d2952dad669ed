/* Matrix products on cuBLAS. cuBLAS is column-major and the engine row-major; a row-major matrix is
 * the column-major matrix of its transpose with the same leading dimension, so the row-major
 *     C(M,N) = op(A) op(B)
 * is computed as the column-major
 *     C^T(N,M) = op(B)^T op(A)^T,
 * that is cublasSgemm(opB, opA, N, M, K, B, ldb, A, lda, C, ldc): the operands swap places, the
 * transpose flags stay with their operand, and no data moves. Math mode stays CUBLAS_DEFAULT_MATH (full
 * fp32, no TF32), so results match the CPU's within fp32 rounding.
 *
 * A context with prec BF16 or FP16 (mixed precision, device.h) runs the same product through
 * cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_16BF / _FAST_16F: fp32 arrays, operands rounded to bf16 /
 * fp16 inside cuBLAS, tensor cores, fp32 accumulation and output. The CPU table rounds fp16 products'
 * outputs to half as well; this one keeps them fp32 (not run on a GPU yet: none was lent).
 *
 * One cuBLAS handle per host thread and device, made on first use: a handle must not be used by two
 * threads at once, and each call sets the handle's stream to its context's, so the product is ordered
 * with the rest of the context's calls. */
#include <cublas_v2.h>
#include <pthread.h>
#include <stdlib.h>

#include "cuda_common.h"

#define MAX_GPUS 64

typedef struct handles {
    cublasHandle_t h[MAX_GPUS];
} handles;

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void handles_free(void *p)
{
    handles *hs = p;
    for (int i = 0; i < MAX_GPUS; i++)
        if (hs->h[i]) cublasDestroy(hs->h[i]);
    free(hs);
}

static void key_make(void) { pthread_key_create(&key, handles_free); }

static const char *blas_err(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED (no GPU or driver?)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "a cuBLAS error";
    }
}

/* The calling thread's handle for its current device, on ctx's stream. */
static rs_status handle_for(rs_kctx *ctx, const char *who, cublasHandle_t *out)
{
    pthread_once(&key_once, key_make);
    handles *hs = pthread_getspecific(key);
    if (!hs) {
        hs = calloc(1, sizeof *hs);
        if (!hs) return rs_kctx_fail(ctx, RS_ERR_NOMEM, "%s: no memory for a cuBLAS handle table", who);
        pthread_setspecific(key, hs);
    }
    int dev = 0;
    CU_TRY(ctx, who, cudaGetDevice(&dev));
    if (dev < 0 || dev >= MAX_GPUS) return rs_kctx_fail(ctx, RS_ERR_UNSUPPORTED, "%s: GPU %d (at most %d)", who, dev, MAX_GPUS);
    if (!hs->h[dev]) {
        cublasStatus_t s = cublasCreate(&hs->h[dev]);
        if (s != CUBLAS_STATUS_SUCCESS) {
            hs->h[dev] = NULL;
            return rs_kctx_fail(ctx, RS_ERR_INTERNAL, "%s: cublasCreate: %s", who, blas_err(s));
        }
    }
    cublasStatus_t s = cublasSetStream(hs->h[dev], cu_stream(ctx));
    if (s != CUBLAS_STATUS_SUCCESS) return rs_kctx_fail(ctx, RS_ERR_INTERNAL, "%s: cublasSetStream: %s", who, blas_err(s));
    *out = hs->h[dev];
    return RS_OK;
}

static cublasComputeType_t compute_of(const rs_kctx *ctx)
{
    return ctx->prec == RS_PREC_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_16F;
}

rs_status rs_cuda_sgemm(rs_kctx *ctx, const char *who, bool ta, bool tb, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (!M || !N) return RS_OK;
    cublasHandle_t h;
    RS_KTRY(handle_for(ctx, who, &h));
    if (!K) { /* cuBLAS would only scale C by beta too; keep it one code path */
        K = 1;
        alpha = 0.0f;
    }
    cublasStatus_t s;
    if (ctx->prec != RS_PREC_FP32)
        s = cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B ? B : C,
                         CUDA_R_32F, ldb, A ? A : C, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc, compute_of(ctx),
                         CUBLAS_GEMM_DEFAULT);
    else
        s = cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B ? B : C,
                        ldb, A ? A : C, lda, &beta, C, ldc);
    if (s != CUBLAS_STATUS_SUCCESS) return rs_kctx_fail(ctx, RS_ERR_INTERNAL, "%s: cublasSgemm: %s", who, blas_err(s));
    return RS_OK;
}

rs_status rs_cuda_sgemm_batched(rs_kctx *ctx, const char *who, bool ta, bool tb, int M, int N, int K, float alpha,
                                const float *A, int lda, long long sa, const float *B, int ldb, long long sb,
                                float beta, float *C, int ldc, long long sc, int count)
{
    if (!M || !N || count < 1) return RS_OK;
    cublasHandle_t h;
    RS_KTRY(handle_for(ctx, who, &h));
    cublasStatus_t s;
    if (ctx->prec != RS_PREC_FP32)
        s = cublasGemmStridedBatchedEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
                                       B, CUDA_R_32F, ldb, sb, A, CUDA_R_32F, lda, sa, &beta, C, CUDA_R_32F, ldc, sc,
                                       count, compute_of(ctx), CUBLAS_GEMM_DEFAULT);
    else
        s = cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
                                      B, ldb, sb, A, lda, sa, &beta, C, ldc, sc, count);
    if (s != CUBLAS_STATUS_SUCCESS)
        return rs_kctx_fail(ctx, RS_ERR_INTERNAL, "%s: cublasSgemmStridedBatched: %s", who, blas_err(s));
    return RS_OK;
}

rs_status rs_cuda_gemm(rs_kctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc)
{
    CU_CTX(ctx, "gemm");
    CU_NONNEG(ctx, "gemm", M);
    CU_NONNEG(ctx, "gemm", N);
    CU_NONNEG(ctx, "gemm", K);
    int acols = ta ? M : K, bcols = tb ? K : N;
    if (lda < (acols > 1 ? acols : 1) || ldb < (bcols > 1 ? bcols : 1) || ldc < (N > 1 ? N : 1))
        return rs_kctx_fail(ctx, RS_ERR_ARG,
                            "gemm: leading dimensions lda=%d ldb=%d ldc=%d are too small for M=%d N=%d K=%d "
                            "(need lda >= %d, ldb >= %d, ldc >= %d)",
                            lda, ldb, ldc, M, N, K, acols > 1 ? acols : 1, bcols > 1 ? bcols : 1, N > 1 ? N : 1);
    CU_PTR(ctx, "gemm", A, M && N && K);
    CU_PTR(ctx, "gemm", B, M && N && K);
    CU_PTR(ctx, "gemm", C, M && N);
    return rs_cuda_sgemm(ctx, "gemm", ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
