/* bf16 products on oneDNN's matmul primitive (Debian's libdnnl 2.6, the C API plan/ uses): bf16 src
 * and weights, fp32 dst, fp32 accumulation; on a CPU with AVX512-BF16 oneDNN runs its brgemm kernels
 * on vdpbf16ps. The operands are copied to bf16 here (amp_bf16_bits, the emulation's rounding: the
 * same bf16 values, so the two paths differ only in the order of the fp32 additions), tight and in
 * their own orientation: a transposition is the memory descriptor's strides. C keeps its ldc (dst
 * strides), alpha is the output scale and beta C the sum post-op (left out when beta is 0, so C is
 * not read, as BLAS says).
 * State. The engine is made once per process (pthread_once) and never changes: oneDNN's engines may
 * be used from any thread. Primitives come from oneDNN's own primitive cache (thread-safe, keyed by
 * the descriptor, the attributes and the OpenMP thread count), and everything per call (stream,
 * memory objects, the bf16 copies, the scratchpad: user mode) belongs to the call, so contexts and
 * threads share nothing they could fight over.
 * Threads. oneDNN (GCC's OpenMP here) fixes a primitive's thread count at creation from
 * omp_get_max_threads; the entries have set it to the context's count (cpu_scope.h), and inside an
 * active parallel region (the per-head, per-sample products of attention and convolution) it is set
 * to 1 for the call, so a product never asks for a team it cannot have. */
#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp.h"
#include "prof.h"
#include "vmath.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static dnnl_engine_t eng;  /* NULL: oneDNN is not used (why says) */
static char why[160];      /* what runs bf16 products, written once under `once` */

static void open_engine(void)
{
    const dnnl_version_t *v = dnnl_version();
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if ((isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16) {
        /* oneDNN would convert bf16 to fp32 inside its kernels: no faster than the emulation */
        snprintf(why, sizeof why, "emulated (bf16-rounded operands, fp32 sgemm): oneDNN %d.%d reports no avx512_core_bf16 (the CPU, or ONEDNN_MAX_CPU_ISA)",
                 v->major, v->minor);
        return;
    }
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) {
        eng = NULL;
        snprintf(why, sizeof why, "emulated (bf16-rounded operands, fp32 sgemm): oneDNN %d.%d's CPU engine failed",
                 v->major, v->minor);
        return;
    }
    snprintf(why, sizeof why, "oneDNN %d.%d.%d bf16 matmul (avx512_core_bf16) from %ld multiply-adds, emulated below",
             v->major, v->minor, v->patch, (long)RS_AMP_DNNL_MIN_MACS);
}

const char *rs_cpu_bf16_backend(void)
{
    pthread_once(&once, open_engine);
    return why;
}

/* dst (rows, cols) tight, bf16 = src (rows, cols) with row stride ld. */
RS_SIMD static void bf16_rows(const float *src, int rows, int cols, int ld, uint16_t *dst)
{
    for (int r = 0; r < rows; r++) {
        const float *s = src + (size_t)r * ld;
        uint16_t *d = dst + (size_t)r * cols;
        for (int c = 0; c < cols; c++) {
            uint32_t u;
            memcpy(&u, &s[c], 4);
            d[c] = (uint16_t)(amp_bf16_bits(u) >> 16);
        }
    }
}

/* The operands as oneDNN sees them: A (M, K) and B (K, N) tight bf16 in their stored orientation (a
 * transposed one is column-major), C (M, N) fp32 with row stride ldc. */
static bool descs(bool ta, bool tb, int M, int N, int K, int ldc, dnnl_memory_desc_t *amd, dnnl_memory_desc_t *bmd,
                  dnnl_memory_desc_t *cmd)
{
    dnnl_dims_t ad = {M, K}, bd = {K, N}, cd = {M, N};
    dnnl_dims_t as = {ta ? 1 : K, ta ? M : 1}, bs = {tb ? 1 : N, tb ? K : 1}, cs = {ldc, 1};
    return dnnl_memory_desc_init_by_strides(amd, 2, ad, dnnl_bf16, as) == dnnl_success &&
           dnnl_memory_desc_init_by_strides(bmd, 2, bd, dnnl_bf16, bs) == dnnl_success &&
           dnnl_memory_desc_init_by_strides(cmd, 2, cd, dnnl_f32, cs) == dnnl_success;
}

/* The product's primitive and its scratchpad size; false: oneDNN has no native kernel for it (its
 * reference implementation is slower than the emulation) or refused it. */
static bool make(bool ta, bool tb, int M, int N, int K, float alpha, float beta, int ldc, dnnl_primitive_t *prim,
                 size_t *pad)
{
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_matmul_desc_t op;
    if (!descs(ta, tb, M, N, K, ldc, &amd, &bmd, &cmd) || dnnl_matmul_desc_init(&op, &amd, &bmd, NULL, &cmd))
        return false;
    dnnl_primitive_attr_t attr;
    if (dnnl_primitive_attr_create(&attr)) return false;
    dnnl_post_ops_t po = NULL;
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success && alpha != 1.0f) s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha);
    if (s == dnnl_success && beta != 0.0f) {
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success) s = dnnl_post_ops_append_sum(po, beta);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &op, attr, eng, NULL);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return false;
    const char *impl = NULL;
    bool ok = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
              strncmp(impl, "ref", 3) != 0;
    if (ok) {
        *pad = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
        ok = dnnl_primitive_create(prim, pd) == dnnl_success; /* a hit in oneDNN's cache after the first */
    }
    dnnl_primitive_desc_destroy(pd);
    return ok;
}

static int run(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc)
{
    dnnl_primitive_t prim;
    size_t pad = 0;
    if (!make(ta, tb, M, N, K, alpha, beta, ldc, &prim, &pad)) return 0;
    const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    size_t na = ((size_t)ar * ac + 31) / 32 * 32, nb = ((size_t)br * bc + 31) / 32 * 32;
    /* owned here: A and B in bf16 (64-byte aligned each), then the primitive's scratchpad */
    uint16_t *w = aligned_alloc(64, ((na + nb) * sizeof *w + pad + 63) / 64 * 64);
    if (!w) {
        dnnl_primitive_destroy(prim);
        return -1;
    }
    bf16_rows(A, ar, ac, lda, w);
    bf16_rows(B, br, bc, ldb, w + na);
    dnnl_memory_desc_t amd, bmd, cmd;
    descs(ta, tb, M, N, K, ldc, &amd, &bmd, &cmd); /* as make's, which succeeded */
    const_dnnl_primitive_desc_t pd;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, mp = NULL;
    dnnl_stream_t strm = NULL;
    bool ran = false;
    dnnl_status_t s = dnnl_primitive_get_primitive_desc(prim, &pd);
    if (s == dnnl_success) s = dnnl_memory_create(&ma, &amd, eng, w);
    if (s == dnnl_success) s = dnnl_memory_create(&mb, &bmd, eng, w + na);
    if (s == dnnl_success) s = dnnl_memory_create(&mc, &cmd, eng, C);
    if (s == dnnl_success)
        s = dnnl_memory_create(&mp, dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0), eng, w + na + nb);
    if (s == dnnl_success) s = dnnl_stream_create(&strm, eng, dnnl_stream_default_flags);
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc},
                                  {DNNL_ARG_SCRATCHPAD, mp}};
        ran = true;
        s = dnnl_primitive_execute(prim, strm, 4, args);
        if (s == dnnl_success) s = dnnl_stream_wait(strm);
    }
    if (strm) dnnl_stream_destroy(strm);
    dnnl_memory_t ms[] = {ma, mb, mc, mp};
    for (int i = 0; i < 4; i++)
        if (ms[i]) dnnl_memory_destroy(ms[i]);
    dnnl_primitive_destroy(prim);
    free(w);
    /* a failure before execute leaves C as it was (the caller emulates); one inside it may have
     * written part of C, which beta C then no longer is: the call fails */
    return s == dnnl_success ? 1 : ran ? -1 : 0;
}

int rs_cpu_bf16_dnnl(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc)
{
    pthread_once(&once, open_engine);
    if (!eng) return 0;
    int prev = omp_get_max_threads();
    bool nested = omp_in_parallel() && prev != 1;
    if (nested) omp_set_num_threads(1);
    /* counted by the profiler like the emulation's sgemm (with the bf16 copies here, which the
     * emulation's count leaves out: a few percent of a product above the threshold) */
    uint64_t t0 = rs_cpu_prof_active() ? rs_cpu_prof_now_ns() : 0;
    int r = run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (t0 && r == 1) rs_cpu_prof_gemm_done(t0, M, N, K);
    if (nested) omp_set_num_threads(prev);
    return r;
}
