/* BLAS product counters (see prof.h). Nanosecond and FLOP totals are 64-bit atomics so threads inside
 * a conv's parallel region can add to them without a lock. */
#include "prof.h"

#include <omp.h>
#include <time.h>

atomic_bool rs_cpu_prof_on_;
static atomic_uint_fast64_t calls, flops, wall_ns, thread_ns;

void rs_cpu_prof_enable(bool on) { atomic_store(&rs_cpu_prof_on_, on); }
bool rs_cpu_prof_enabled(void) { return atomic_load(&rs_cpu_prof_on_); }

void rs_cpu_prof_reset(void)
{
    atomic_store(&calls, 0);
    atomic_store(&flops, 0);
    atomic_store(&wall_ns, 0);
    atomic_store(&thread_ns, 0);
}

void rs_cpu_prof_read(rs_cpu_prof *out)
{
    out->gemm_calls = atomic_load(&calls);
    out->gemm_flops = (double)atomic_load(&flops);
    out->gemm_wall_s = (double)atomic_load(&wall_ns) * 1e-9;
    out->gemm_thread_s = (double)atomic_load(&thread_ns) * 1e-9;
}

uint64_t rs_cpu_prof_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void rs_cpu_prof_gemm_done(uint64_t t0_ns, int M, int N, int K)
{
    uint64_t dt = rs_cpu_prof_now_ns() - t0_ns;
    int team = omp_in_parallel() ? omp_get_num_threads() : 1;
    atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&flops, 2 * (uint64_t)M * (uint64_t)N * (uint64_t)K, memory_order_relaxed);
    atomic_fetch_add_explicit(&thread_ns, dt, memory_order_relaxed);
    atomic_fetch_add_explicit(&wall_ns, dt / (uint64_t)(team > 0 ? team : 1), memory_order_relaxed);
}
