/* A branch-free float exp that GCC vectorizes inside a plain loop (glibc's expf is a call, one
 * element at a time, unless -ffast-math). Used where a kernel spends its time in it: the attention
 * softmax and the tanh GELU. Accuracy: within 2 ulp on [-87, 88] (Cephes' minimax polynomial after a
 * two-constant ln 2 reduction); 0 below -87 (the true value is under 1.7e-38); e^88 above 88 (finite,
 * so x / (1 + e^x) style formulas stay NaN-free); NaN for NaN, with no undefined conversion on the way. */
#ifndef RS_CPU_VMATH_H
#define RS_CPU_VMATH_H

#include <stdint.h>
#include <string.h>

/* Elementwise loops compiled three times (AVX-512, AVX2, baseline) and picked at load time by the
 * CPU: Debian builds for baseline x86-64, where GCC vectorizes 4 floats at a time. OpenMP's outlined
 * loop bodies are called from inside the clone and so are compiled for the parent's target only when
 * the loop is serial: the hot loops call an RS_SIMD helper per thread chunk instead. The clones give
 * the same bits as the baseline: ISO C mode (-std=c17) keeps -ffp-contract=off, so no clone fuses a
 * multiply-add, and the loops are elementwise or keep their partial sums in explicit lanes. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define RS_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RS_SIMD
#endif

static inline float rs_vexpf(float x)
{
    const float hi = 88.0f, lo = -87.0f;
    float xc = x > hi ? hi : x;
    xc = xc < lo ? lo : xc;
    xc = xc == xc ? xc : 0.0f; /* NaN: (int32_t)NaN below is undefined; the NaN is put back at the end */
    /* n = round(x / ln 2) by the 1.5*2^23 trick (exact for |n| < 2^22); r = x - n ln 2 in two steps */
    float t = xc * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t e = ((int32_t)n + 127) << 23; /* 2^n, n in [-126, 127] after the clamp */
    float s;
    memcpy(&s, &e, sizeof s);
    float y = p * s;
    y = x < lo ? 0.0f : y;
    return x == x ? y : x;
}

#endif
