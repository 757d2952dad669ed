/* A process-wide profiler of the BLAS products (rs_cpu_blas_gemm: the gemm entry, conv and attention;
 * the bf16 ones oneDNN runs, engine/cpu/amp_dnnl.c, too):
 * call count, FLOPs (2*M*N*K) and an estimate of the wall time spent in them. Like perf, it measures
 * the process, not one model: every thread's products add to the same atomic counters. Off by
 * default; when off, a product pays one predictable branch on a relaxed load.
 *
 * Wall-time estimate: a product called outside an OpenMP parallel region adds its own wall time; a
 * product called inside one (conv runs one product per sample on each thread) adds its time divided by
 * omp_get_num_threads(), since the team's threads run their products side by side. */
#ifndef RS_CPU_PROF_H
#define RS_CPU_PROF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct rs_cpu_prof {
    uint64_t gemm_calls;
    double gemm_flops;      /* sum of 2*M*N*K */
    double gemm_wall_s;     /* estimated wall seconds (formula above) */
    double gemm_thread_s;   /* plain sum of every call's duration over all threads */
} rs_cpu_prof;

void rs_cpu_prof_enable(bool on);
bool rs_cpu_prof_enabled(void);
void rs_cpu_prof_reset(void);
void rs_cpu_prof_read(rs_cpu_prof *out);

/* For rs_cpu_blas_gemm: the flag, a start stamp and the record of one finished product. */
extern atomic_bool rs_cpu_prof_on_;
static inline bool rs_cpu_prof_active(void)
{
    return __builtin_expect(atomic_load_explicit(&rs_cpu_prof_on_, memory_order_relaxed), 0);
}
uint64_t rs_cpu_prof_now_ns(void);
void rs_cpu_prof_gemm_done(uint64_t t0_ns, int M, int N, int K);

#endif
