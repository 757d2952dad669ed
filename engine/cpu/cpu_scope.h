/* How a CPU entry keeps to its context's thread count, and how it fails (private to engine/cpu).
 *
 * Threads. OpenMP takes a parallel region's team size from the calling thread's nthreads ICV, and
 * Debian's OpenBLAS is the OpenMP build (libopenblas0-openmp, 0.3.21), which reads the same ICV on
 * every call (num_cpu_avail: omp_get_max_threads(); one thread inside an active parallel region).
 * The ICV is per OS thread, so an entry sets it to ctx->threads for the call and puts the caller's
 * value back when it returns (cpu_enter / cpu_leave): two threads with contexts of 1 and 2 threads run
 * side by side, each with its own count, and a thread's own OpenMP code never sees a kernel's count.
 * Measured (bench/kctx_threads.c): 768^3 sgemm calls on a context of 1 thread use one core and on
 * a context of 2 threads two, whatever the calling thread's own setting, alone or side by side.
 *
 * What is process-wide in that OpenBLAS is its remembered count (blas_cpu_number): a call whose ICV
 * differs from it rewrites it and reallocates the per-thread buffers of every parallel slot, which a
 * threaded product running at that moment on another thread may be using. A call with ICV 1, or
 * inside an active parallel region, returns before touching it. So products that may thread (called
 * outside an active region with an ICV above 1) take blas_lock: contexts of more than one thread run
 * their threaded products one at a time, which on shared cores is no loss, and one-thread contexts
 * (dp's replicas, ranks) never wait. openblas_set_num_threads is not called anywhere. The gemm entry
 * on a context of more than one thread calls OpenBLAS only single-threaded (gemm_blocks.c). */
#ifndef RS_CPU_SCOPE_H
#define RS_CPU_SCOPE_H

#include <omp.h>

#include "engine/core/device.h"

/* Sets the calling thread's ICV to ctx's count; returns the caller's, for cpu_leave. */
static inline int cpu_enter(const rs_kctx *ctx)
{
    int prev = omp_get_max_threads();
    if (prev != ctx->threads) omp_set_num_threads(ctx->threads);
    return prev;
}

static inline void cpu_leave(const rs_kctx *ctx, int prev)
{
    if (prev != ctx->threads) omp_set_num_threads(prev);
}

/* The context is usable: initialised on the CPU table. An uninitialised one cannot even hold the
 * failure, so only a NULL context goes unrecorded. */
#define CPU_CTX(ctx, who)                                                                              \
    do {                                                                                               \
        if (!(ctx)) return RS_ERR_ARG;                                                                 \
        if ((ctx)->threads < 1)                                                                        \
            return rs_kctx_fail((ctx), RS_ERR_ARG, "%s: the kernel context is not initialised (threads=%d); "   \
                                "set it up with rs_kctx_init", (who), (ctx)->threads);                 \
    } while (0)

/* A size argument that must be >= 0. */
#define CPU_NONNEG(ctx, who, v)                                                                        \
    do {                                                                                               \
        if ((v) < 0) return rs_kctx_fail((ctx), RS_ERR_ARG, "%s: %s=%d; sizes must be >= 0", (who), #v, (int)(v)); \
    } while (0)

/* An array that must be there when `needed` elements are read or written. */
#define CPU_PTR(ctx, who, p, needed)                                                                   \
    do {                                                                                               \
        if ((needed) && !(p)) return rs_kctx_fail((ctx), RS_ERR_ARG, "%s: %s is NULL", (who), #p);   \
    } while (0)

/* Products for the kernels' own use (no context: they run inside an entry's scope). They take
 * blas_lock when the product may thread (above); the profiler (prof.h) counts them. */
void rs_cpu_blas_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc);
/* The product in compute type p (device.h, rs_prec; engine/cpu/amp_gemm.c): the operands rounded to
 * bf16 or fp16, fp16's output too. false: no memory for the rounded copies (C is then untouched). */
bool rs_cpu_gemm_prec(rs_prec p, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc);
/* The gemm entry's product (engine/cpu/gemm_blocks.c): with ctx->blocks or ctx->threads above 1, in
 * that many fixed blocks of single-threaded calls, so its bits do not change with the thread count.
 * Call inside the entry's scope (cpu_enter). false: no memory for rounded operands. */
bool rs_cpu_gemm_blocks(const rs_kctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* rs_cpu_gemm_prec from inside a parallel region: sets *fail (shared, written atomically) when it
 * had no memory, for the entry to report after the region. */
#define CPU_GEMM_PREC(fail, prec, ...)                                                                 \
    do {                                                                                               \
        if (!rs_cpu_gemm_prec((prec), __VA_ARGS__)) {                                                  \
            _Pragma("omp atomic write") *(fail) = 1;                                                   \
        }                                                                                              \
    } while (0)
/* y(M) = alpha op(A) x + beta y, A (M0, N0) row-major with row stride lda, op = transpose when ta. */
void rs_cpu_blas_gemv(bool ta, int M0, int N0, float alpha, const float *A, int lda, const float *x, float beta,
                      float *y);

/* Checks a window geometry as the conv and pool entries use it (oc only when conv). */
rs_status rs_cpu_check_geom(rs_kctx *ctx, const char *who, const rs_conv_geom *g, int B, bool conv);

#endif
