/* The bf16 product alone, one thread: GFLOP/s of fp32 sgemm (OpenBLAS), the emulated bf16 product
 * (operands rounded into fp32 copies, sgemm: engine/cpu/amp_gemm.c) and oneDNN's bf16 matmul with fp32
 * dst (engine/cpu/amp_dnnl.c), operand conversion included, at GPT and MLP shapes and small ones where
 * the primitive's per-call cost shows (where RS_AMP_DNNL_MIN_MACS comes from). Each figure is the best
 * of 5 timed runs of enough calls to last ~0.1 s (the machine is shared: the best is the least
 * disturbed); the 1-minute load average is printed first.
 *   build/bench/bench_amp_gemm */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/core/kernels.h"
#include "engine/cpu/amp.h"
#include "engine/cpu/blas.h"
#include "engine/cpu/cpu_scope.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); /* CPU time: the machine is shared, a wait for a core is not the product's */
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* which: 0 sgemm, 1 emulated bf16, 2 oneDNN bf16; seconds per call, best of 5 */
static double per_call(int which, int M, int N, int K, const float *A, const float *B, float *C)
{
    long reps = 1;
    double best = 1e30;
    for (int round = 0; round < 6; round++) {
        double t0 = now();
        for (long r = 0; r < reps; r++) {
            if (which == 0) rs_cpu_blas_gemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
            else if (which == 1) rs_cpu_bf16_emul(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
            else if (rs_cpu_bf16_dnnl(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N) != 1) return -1;
        }
        double t = (now() - t0) / (double)reps;
        if (round == 0) { /* calibration: ~0.1 s a run */
            reps = (long)(0.1 / (t > 1e-9 ? t : 1e-9)) + 1;
            continue;
        }
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    (void)argc;
    rs_blas_prefer_fast_kernel(argv); /* OpenBLAS's SkylakeX kernel on a CPU newer than it knows, as ringside */
    rs_kctx ctx;
    rs_err e;
    if (rs_kctx_init(&ctx, &rs_cpu_kernels, 1, &e) != RS_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    omp_set_num_threads(1); /* the products below are the kernels' own, called as an entry would */
    double load = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1) load = 0;
        fclose(f);
    }
    printf("bf16 products: %s\nload average %.2f, 1 thread, C = A B (row-major, no transposition)\n",
           rs_cpu_bf16_backend(), load);
    printf("%6s %6s %6s %10s | %12s %12s %12s | %8s %8s\n", "M", "N", "K", "MACs", "sgemm GF/s", "emul GF/s",
           "oneDNN GF/s", "dnnl/sg", "dnnl/emu");
    static const int shapes[][3] = {{256, 768, 768}, {768, 3072, 768}, {768, 768, 3072}, {64, 256, 784},
                                    {64, 10, 256},   {8, 8, 8},        {16, 16, 16},     {32, 32, 32},
                                    {64, 64, 64},    {48, 48, 48},     {96, 96, 96},     {128, 128, 128},
                                    {64, 64, 32},    {64, 128, 64},    {256, 256, 256},  {12, 64, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)K * N),
              *C = malloc(sizeof(float) * (size_t)M * N);
        if (!A || !B || !C) return 1;
        for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
        double fl = 2.0 * M * N * K, t[3];
        for (int w = 0; w < 3; w++) t[w] = per_call(w, M, N, K, A, B, C);
        printf("%6d %6d %6d %10ld | %12.1f %12.1f %12.1f | %7.2fx %7.2fx\n", M, N, K, (long)M * N * K, fl / t[0] * 1e-9,
               fl / t[1] * 1e-9, t[2] > 0 ? fl / t[2] * 1e-9 : 0.0, t[2] > 0 ? t[0] / t[2] : 0.0,
               t[2] > 0 ? t[1] / t[2] : 0.0);
        free(A), free(B), free(C);
    }
    return 0;
}
