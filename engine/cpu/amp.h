/* The bf16 product's two paths (private to engine/cpu; the tests call both): oneDNN's matmul
 * primitive on bf16 copies of the operands (engine/cpu/amp_dnnl.c) and the emulation on OpenBLAS's
 * sgemm over bf16-rounded fp32 copies (engine/cpu/amp_gemm.c), the reference the other is tested
 * against. Both round with amp_bf16_bits, so both multiply the same bf16 values. */
#ifndef RS_CPU_AMP_H
#define RS_CPU_AMP_H

#include <stdbool.h>
#include <stdint.h>

/* The bits of fp32 u rounded to bf16 (the upper 16 are the bf16 value, the lower are 0): to nearest
 * even on the 16 bits dropped; NaN stays NaN (quieted), inf stays inf, a value that rounds past
 * FLT_MAX is inf as in every bf16 conversion. Subnormals are rounded like any other value (AVX512-BF16's
 * vcvtneps2bf16 would flush them to zero: not used for that reason). */
static inline uint32_t amp_bf16_bits(uint32_t u)
{
    uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    uint32_t rnd = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    return nan ? (u | 0x00400000u) & 0xffff0000u : rnd;
}

/* Products of at least this many multiply-adds (M N K) go to oneDNN when it has a native bf16 matmul;
 * smaller ones are emulated: below it the primitive's per-call cost (descriptor, memory objects) is
 * more than what the bf16 kernel saves (bench/amp_gemm.c, docs/engine.md "Mixed precision"). */
#define RS_AMP_DNNL_MIN_MACS (1L << 20)

/* C = alpha op(A) op(B) + beta C as rs_cpu_gemm_prec's bf16 case (beta 0: C not read), emulated. false: no
 * memory for the rounded copies (C untouched). */
bool rs_cpu_bf16_emul(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc);
/* The same on oneDNN's matmul primitive, at the calling thread's OpenMP count (1 inside an active
 * parallel region). 1: done; 0: not taken, C untouched (no native bf16 on this CPU, or oneDNN refused
 * this product: the caller emulates); -1: no memory, or oneDNN failed while running it (C unspecified).
 * M, N, K > 0. */
int rs_cpu_bf16_dnnl(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc);
/* What runs bf16 products in this process, in words (for `train`'s summary): "oneDNN 2.6.x matmul
 * (avx512_core_bf16) ..." or "emulated (...): why". The string is static. */
const char *rs_cpu_bf16_backend(void);

#endif
