/* The products of mixed precision (torch.autocast) on the CPU: what a context with prec BF16 or FP16
 * computes in its gemm, convolution and attention entries (device.h, rs_prec).
 * BF16: both operands are rounded to bfloat16 (to nearest even; 8 significant bits, fp32's range) and
 * multiplied with fp32 accumulation; the output stays fp32. Products of RS_AMP_DNNL_MIN_MACS
 * multiply-adds and more run on oneDNN's bf16 matmul primitive where the CPU has AVX512-BF16
 * (engine/cpu/amp_dnnl.c); smaller ones, and every one on a CPU without it, are emulated here: the
 * operands rounded into fp32 copies and multiplied by OpenBLAS's sgemm. The product of two bf16 values
 * is exact in fp32 (8 x 8 bits < 24), so the emulation computes what a bf16 GEMM with fp32
 * accumulation (oneDNN's, cuBLAS's, AMX's) does, up to the order of the additions, and it stays the
 * reference the oneDNN path is tested against (tests/engine/kernels/test_amp.c). OpenBLAS cannot do it
 * natively here: Debian's 0.3.21 is built without BUILD_BFLOAT16 (its cblas.h declares cblas_sbgemm,
 * the library has no such symbol); oneDNN 2.6's BLAS-like API has sgemm and int8 only, hence the
 * matmul primitive (docs/engine.md "Mixed precision").
 * FP16: no CPU product either, so the operands and the product's output are rounded to IEEE half
 * (F16C's conversion, to nearest even: inf beyond 65504, subnormals below 2^-14, zero below 2^-25), the
 * product between them in fp32. That keeps what a GPU's fp16 tensors do to a gradient, overflow and
 * underflow, which is what the loss scaler (engine/train/scaler.h) exists for.
 * The rounded copies are made per call (malloc/free, owned here): a few hundred KB for the layers of
 * this project's models, reused by the allocator from call to call. */
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp.h"
#include "cpu_scope.h"
#include "vmath.h"

/* x rounded to IEEE half and back, in plain C (no _Float16: clang 14, which the fuzz build uses, has
 * none on x86): to nearest even on the 13 bits fp32 keeps beyond half's 10, a fixed quantum of 2^-24
 * below half's smallest normal 2^-14, inf from 65520 up (the first value that rounds past 65504). */
static float half_round(float x)
{
    uint32_t u, a;
    memcpy(&u, &x, 4);
    a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return x;                               /* inf, NaN */
    if (a >= 0x477ff000u) return x < 0 ? -INFINITY : INFINITY;   /* >= 65520 */
    if (a < 0x38800000u) return rintf(x * 16777216.0f) / 16777216.0f; /* < 2^-14: multiples of 2^-24 */
    a = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
    u = (u & 0x80000000u) | a;
    memcpy(&x, &u, 4);
    return x;
}

/* Rounding through F16C's vcvtps2ph (round to nearest even, from the immediate), 8 values at a time,
 * where the CPU has it: the baseline build has no F16C. Both give the same bits (IEEE conversion). */
__attribute__((target("avx,f16c"))) static void half_f16c(const float *s, float *d, int n)
{
    int c = 0;
    for (; c + 8 <= n; c += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(s + c), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_ps(d + c, _mm256_cvtph_ps(h));
    }
    for (; c < n; c++) d[c] = half_round(s[c]);
}

/* CPUID leaf 1, ECX bit 29 (F16C) and bit 28 (AVX, whose registers it uses), and the OS saving them
 * (OSXSAVE, bit 27, and XCR0's SSE and AVX bits). */
static bool have_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    if (!(c & (1u << 29)) || !(c & (1u << 28)) || !(c & (1u << 27))) return false;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6u) == 6u;
}

static void half_row(const float *s, float *d, int n)
{
    static int f16c = -1; /* the CPU's answer, the same for every thread: a benign race to store it */
    int have = __atomic_load_n(&f16c, __ATOMIC_RELAXED);
    if (have < 0) {
        have = have_f16c();
        __atomic_store_n(&f16c, have, __ATOMIC_RELAXED);
    }
    if (have) {
        half_f16c(s, d, n);
        return;
    }
    for (int c = 0; c < n; c++) d[c] = half_round(s[c]);
}

/* dst (rows, cols) tight = src (rows, cols) with row stride ld, each value through fp16. */
static void to_half_rows(const float *src, int rows, int cols, int ld, float *dst)
{
    for (int r = 0; r < rows; r++) half_row(src + (size_t)r * ld, dst + (size_t)r * cols, cols);
}

/* C (M, N), row stride ldc = beta C + half(T) (beta 0: C is not read, as BLAS says); T is rounded in
 * place. */
static void half_out(float *T, int M, int N, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        float *t = T + (size_t)i * N, *c = C + (size_t)i * ldc;
        half_row(t, beta == 0.0f ? c : t, N);
        if (beta != 0.0f)
            for (int j = 0; j < N; j++) c[j] = beta * c[j] + t[j];
    }
}

static bool gemm_fp16(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc)
{
    const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    size_t na = (size_t)ar * ac, nb = (size_t)br * bc, nc = (size_t)M * N;
    float *w = malloc((na + nb + nc) * sizeof *w); /* owned here: A, B rounded, then the product */
    if (!w) return false;
    float *Ah = w, *Bh = w + na, *T = w + na + nb;
    to_half_rows(A, ar, ac, lda, Ah);
    to_half_rows(B, br, bc, ldb, Bh);
    rs_cpu_blas_gemm(ta, tb, M, N, K, alpha, Ah, ac, Bh, bc, 0.0f, T, N);
    half_out(T, M, N, beta, C, ldc);
    free(w);
    return true;
}

/* dst (rows, cols) tight = src (rows, cols) with row stride ld, each value rounded to bf16 (amp.h). */
RS_SIMD static void to_bf16_rows(const float *src, int rows, int cols, int ld, float *dst)
{
    for (int r = 0; r < rows; r++) {
        const float *s = src + (size_t)r * ld;
        float *d = dst + (size_t)r * cols;
        for (int c = 0; c < cols; c++) {
            uint32_t u;
            memcpy(&u, &s[c], 4);
            u = amp_bf16_bits(u);
            memcpy(&d[c], &u, 4);
        }
    }
}

bool rs_cpu_bf16_emul(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc)
{
    const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    size_t na = (size_t)ar * ac, nb = (size_t)br * bc;
    float *w = malloc((na + nb) * sizeof *w); /* owned here: A and B rounded to bf16 (held as fp32) */
    if (!w) return false;
    to_bf16_rows(A, ar, ac, lda, w);
    to_bf16_rows(B, br, bc, ldb, w + na);
    rs_cpu_blas_gemm(ta, tb, M, N, K, alpha, w, ac, w + na, bc, beta, C, ldc);
    free(w);
    return true;
}

static bool gemm_bf16(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc)
{
    if ((long)M * N * K >= RS_AMP_DNNL_MIN_MACS) {
        int r = rs_cpu_bf16_dnnl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        if (r) return r > 0;
    }
    return rs_cpu_bf16_emul(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

bool rs_cpu_gemm_prec(rs_prec p, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc)
{
    /* K == 0 has no operands to round: the product is beta C, in any precision. */
    if (p == RS_PREC_BF16 && K > 0 && M > 0 && N > 0)
        return gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (p == RS_PREC_FP16 && K > 0 && M > 0 && N > 0)
        return gemm_fp16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    rs_cpu_blas_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return true;
}
