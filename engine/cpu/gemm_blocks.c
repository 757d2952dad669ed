/* The gemm entry's product in fixed blocks, so that its bits do not depend on how many threads run it.
 *
 * OpenBLAS's threaded products give other bits at 1 and 2 threads for some shapes (0.3.21's SkylakeX
 * kernel: x.W^T of a (64, 784) batch and a 256x784 weight; its Haswell kernel: every Linear product),
 * and the thread tuner (engine/train/tune.h) switches a run between 1 and N threads at steps that
 * depend on timing. So a context of N > 1 threads (or the tuner's N, ctx->blocks) cuts a large product
 * into N blocks of output rows or columns, fixed by the shape and N alone, and every block is one
 * single-threaded OpenBLAS call: at N threads the team runs the blocks side by side (OpenBLAS runs
 * single-threaded inside an active parallel region), at 1 thread one after another. K is never cut, so
 * every output element is one dot product in the order OpenBLAS's single-threaded kernel takes, whatever
 * the count. Small products are one single-threaded call (OpenBLAS does not thread them either).
 *
 * The cut runs along the larger of M and N: each block packs the whole of the other operand, and that
 * duplicated packing is then the smaller one. Block edges fall on multiples of 8: whole register tiles
 * of the kernels' narrow side, while halves stay even (784 columns: 392 + 392, where multiples of 16
 * gave 384 + 400 and the longer block held the team up). */
#include <omp.h>

#include "cpu_kernels.h"
#include "cpu_scope.h"

/* Below this many multiply-adds OpenBLAS 0.3.21 runs a product on one thread anyway
 * (65536 * GEMM_MULTITHREAD_THRESHOLD, interface/gemm.c). */
#define BLOCKS_MIN_MACS 262144.0
#define BLOCK_ALIGN 8

static int edge(int n, int i, int nb)
{
    if (i >= nb) return n;
    return (int)((int64_t)n * i / nb) / BLOCK_ALIGN * BLOCK_ALIGN;
}

/* One block: output rows [m0, m1) when rows, else columns [m0, m1). */
static bool block(rs_prec p, bool rows, int m0, int m1, bool ta, bool tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (m1 <= m0) return true;
    if (rows)
        return rs_cpu_gemm_prec(p, ta, tb, m1 - m0, N, K, alpha, ta ? A + m0 : A + (size_t)m0 * lda, lda, B, ldb,
                                beta, C + (size_t)m0 * ldc, ldc);
    return rs_cpu_gemm_prec(p, ta, tb, M, m1 - m0, K, alpha, A, lda, tb ? B + (size_t)m0 * ldb : B + m0, ldb, beta,
                            C + m0, ldc);
}

bool rs_cpu_gemm_blocks(const rs_kctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    const int nb = ctx->blocks > 1 ? ctx->blocks : ctx->threads;
    if (nb <= 1 || omp_in_parallel()) /* one thread: OpenBLAS runs single-threaded already */
        return rs_cpu_gemm_prec(ctx->prec, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    const int icv = omp_get_max_threads();
    if ((double)M * N * K < BLOCKS_MIN_MACS) {
        omp_set_num_threads(1); /* one single-threaded call at any count */
        bool ok = rs_cpu_gemm_prec(ctx->prec, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        omp_set_num_threads(icv);
        return ok;
    }
    const bool rows = M >= N;
    const int n = rows ? M : N, team = ctx->threads < nb ? ctx->threads : nb;
    int fail = 0;
    /* The team's threads inherit this count: each block single-threaded even where the runtime gives
     * the region fewer threads than asked (then it is not active, and OpenBLAS would read the count). */
    omp_set_num_threads(1);
    #pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
    for (int i = 0; i < nb; i++)
        if (!block(ctx->prec, rows, edge(n, i, nb), edge(n, i + 1, nb), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta,
                   C, ldc)) {
            #pragma omp atomic write
            fail = 1;
        }
    omp_set_num_threads(icv);
    return !fail;
}
