/* How many cores a kernel call uses with its context's thread count: CPU seconds over wall seconds of
 * N sgemm calls through the CPU table's gemm entry (OpenBLAS), for contexts of 1 and 2 threads,
 * alone and side by side on two threads of this process; also while this thread's own OpenMP setting
 * says otherwise, which the call must ignore. It is the measurement behind engine/cpu/cpu_scope.h:
 * Debian's OpenMP OpenBLAS takes its thread count per call from the calling thread's OpenMP ICV.
 *   bench_kctx_threads [--n 768] [--calls 8]
 * Figures, never assertions: on a machine where other jobs run, cores used read low. */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cpu/cpu_kernels.h"

static int N = 768, CALLS = 8;

static double clock_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct run {
    int threads;
    int icv;          /* > 0: the calling thread's own OpenMP setting, which the calls must not follow */
    float *A, *B, *C;
    double wall;      /* this thread's calls */
} run;

static void *calls(void *arg)
{
    run *r = arg;
    rs_kctx c;
    rs_kctx_init(&c, &rs_cpu_kernels, r->threads, NULL);
    if (r->icv > 0) omp_set_num_threads(r->icv);
    double w0 = clock_s(CLOCK_MONOTONIC);
    for (int i = 0; i < CALLS; i++)
        if (rs_cpu_gemm(&c, false, false, N, N, N, 1.0f, r->A, N, r->B, N, 0.0f, r->C, N)) {
            fprintf(stderr, "bench_kctx_threads: %s\n", c.err.msg);
            exit(1);
        }
    r->wall = clock_s(CLOCK_MONOTONIC) - w0;
    return NULL;
}

static run make(int threads)
{
    run r = {.threads = threads};
    size_t n = (size_t)N * N;
    r.A = malloc(n * 4), r.B = malloc(n * 4), r.C = malloc(n * 4);
    for (size_t i = 0; i < n; i++) r.A[i] = (float)(i % 7) - 3, r.B[i] = (float)(i % 5) - 2;
    return r;
}

/* One or two runs at once; the process's CPU seconds over the longest wall time. */
static void measure(const char *what, run *a, run *b)
{
    double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, calls, a);
    if (b) pthread_create(&tb, NULL, calls, b);
    pthread_join(ta, NULL);
    if (b) pthread_join(tb, NULL);
    double wall = clock_s(CLOCK_MONOTONIC) - w0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    double gf = 2.0 * N * N * N * CALLS / 1e9;
    printf("%-48s %8.3f s wall %8.3f s cpu  %5.2f cores  %6.1f GFLOP/s", what, wall, cpu, cpu / wall,
           gf * (b ? 2 : 1) / wall);
    if (b) printf("  (1-thread context %.3f s, 2-thread context %.3f s)", a->wall, b->wall);
    printf("\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n")) N = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--calls")) CALLS = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "bench_kctx_threads: unknown option '%s' (try --n, --calls)\n", argv[i]);
            return 2;
        }
    }
    if (N < 1 || CALLS < 1) return 2;
    printf("bench_kctx_threads: %d sgemm calls of %d^3 per run through the CPU table's gemm entry, %d processors\n",
           CALLS, N, omp_get_num_procs());
    run one = make(1), two = make(2);
    measure("context of 1 thread", &one, NULL);
    measure("context of 2 threads", &two, NULL);
    one.icv = 2, two.icv = 1;
    measure("context of 1 thread, caller's OpenMP setting 2", &one, NULL);
    measure("context of 2 threads, caller's OpenMP setting 1", &two, NULL);
    one.icv = two.icv = 0;
    measure("contexts of 1 and 2 threads side by side", &one, &two);
    return 0;
}
