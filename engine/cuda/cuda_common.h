/* What every CUDA entry shares (the C and CUDA files of engine/cuda/): the argument checks the CPU table makes,
 * with the same messages, the context's stream, and how a CUDA error becomes the context's failure.
 * Internal to engine/cuda/. Included from C and from CUDA C++ (the engine headers are C). */
#ifndef RS_CUDA_COMMON_H
#define RS_CUDA_COMMON_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "engine/core/device.h"
#include "engine/cuda/cuda_kernels.h"

/* A context must have been set up with rs_kctx_init (threads >= 1), as on the CPU. */
#define CU_CTX(ctx, who)                                                                               \
    do {                                                                                               \
        if (!(ctx)) return RS_ERR_ARG;                                                                 \
        if ((ctx)->threads < 1)                                                                        \
            return rs_kctx_fail((ctx), RS_ERR_ARG, "%s: the kernel context is not initialised (threads=%d); " \
                                "set it up with rs_kctx_init", (who), (ctx)->threads);                 \
    } while (0)

#define CU_NONNEG(ctx, who, v)                                                                         \
    do {                                                                                               \
        if ((v) < 0) return rs_kctx_fail((ctx), RS_ERR_ARG, "%s: %s=%d; sizes must be >= 0", (who), #v, (int)(v)); \
    } while (0)

#define CU_PTR(ctx, who, p, needed)                                                                    \
    do {                                                                                               \
        if ((needed) && !(p)) return rs_kctx_fail((ctx), RS_ERR_ARG, "%s: %s is NULL", (who), #p);    \
    } while (0)

#define CU_DIMS(ctx, who, s)                                                                           \
    do {                                                                                               \
        if (!(s)) return rs_kctx_fail((ctx), RS_ERR_ARG, "%s: %s is NULL", (who), #s);                \
        if ((s)->rank < 0 || (s)->rank > RS_DIMS_MAX)                                                  \
            return rs_kctx_fail((ctx), RS_ERR_ARG, "%s: %s has rank %d; 0 to %d work", (who), #s,      \
                                (s)->rank, RS_DIMS_MAX);                                               \
    } while (0)

static inline cudaStream_t cu_stream(const rs_kctx *ctx) { return (cudaStream_t)ctx->stream; }

/* A CUDA call's error as the context's failure: out of memory is RS_ERR_NOMEM, no device or no
 * driver RS_ERR_UNSUPPORTED, the rest RS_ERR_INTERNAL (a kernel fault is sticky in CUDA as here). */
static inline rs_status cu_fail(rs_kctx *ctx, const char *who, cudaError_t e)
{
    if (e == cudaSuccess) return RS_OK;
    rs_status code = e == cudaErrorMemoryAllocation ? RS_ERR_NOMEM
                     : e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? RS_ERR_UNSUPPORTED
                                                                                   : RS_ERR_INTERNAL;
    return rs_kctx_fail(ctx, code, "%s: CUDA error %s (%s)", who, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* After a launch: a bad configuration shows at once; a fault in the kernel shows at a later call. */
static inline rs_status cu_launched(rs_kctx *ctx, const char *who) { return cu_fail(ctx, who, cudaGetLastError()); }

#define CU_TRY(ctx, who, call)                                                                         \
    do {                                                                                               \
        cudaError_t cu_e_ = (call);                                                                    \
        if (cu_e_ != cudaSuccess) return cu_fail((ctx), (who), cu_e_);                                \
    } while (0)

/* Blocks of 256 threads over n items, the grid capped (kernels loop with a grid stride). */
static inline unsigned cu_blocks(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

/* cuBLAS sgemm on row-major operands, as rs_kernels.gemm says (engine/cuda/cuda_blas.c). */
rs_status rs_cuda_sgemm(rs_kctx *ctx, const char *who, bool ta, bool tb, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* The same product over `count` matrices at fixed strides (elements) apart. */
rs_status rs_cuda_sgemm_batched(rs_kctx *ctx, const char *who, bool ta, bool tb, int M, int N, int K, float alpha,
                                const float *A, int lda, long long sa, const float *B, int ldb, long long sb,
                                float beta, float *C, int ldc, long long sc, int count);

#ifdef __cplusplus
}
#endif
#endif
