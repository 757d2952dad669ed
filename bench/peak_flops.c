/* The core's arithmetic peak, one thread: what a plan node's GFLOP/s is a fraction of
 * (bench/plan_bound.py). Each line is one instruction family run back to back on independent
 * registers, so only the execution ports bound it:
 *   fp32_avx2     vfmadd231ps ymm (8 lanes x 2 flops)
 *   fp32_avx512   vfmadd231ps zmm (16 lanes x 2 flops)
 *   int8_avx2     vpmaddubsw + vpmaddwd + vpaddd ymm: oneDNN's u8s8 step without VNNI (32 MACs)
 *   int8_avxvnni  {vex} vpdpbusd ymm (32 MACs)
 *   int8_avx512vnni vpdpbusd zmm (64 MACs)
 *   bf16_avx512   vdpbf16ps zmm (32 MACs)
 * in GFLOP/s (int8: GOP/s, a MAC two ops), each the best of 5 runs of ~0.1 s of thread CPU time (the
 * machine may be shared: a wait for the core is not the core's speed). A family the CPU lacks prints
 * "absent". AMX is not measured (its tiles need the kernel's permission, arch_prctl); an AMX kernel's
 * fraction is given against the AVX-512 figures, and says so. Inline assembly: the figures do not
 * depend on the build's optimisation level.
 *   build/bench/peak_flops            (lines "peak NAME GFLOPS", or "peak NAME absent") */
#include <stdio.h>
#include <string.h>
#include <time.h>

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Each loop iteration issues 12 independent instructions (latency 4-5 cycles, 2 ports: 8-10 in flight
 * saturate them). */
#define FMA12(op, r)                                                                                                     \
    op " %%" r "14, %%" r "15, %%" r "0\n\t" op " %%" r "14, %%" r "15, %%" r "1\n\t" op " %%" r "14, %%" r "15, %%" r \
       "2\n\t" op " %%" r "14, %%" r "15, %%" r "3\n\t" op " %%" r "14, %%" r "15, %%" r "4\n\t" op " %%" r "14, %%" r \
       "15, %%" r "5\n\t" op " %%" r "14, %%" r "15, %%" r "6\n\t" op " %%" r "14, %%" r "15, %%" r "7\n\t" op " %%" r \
       "14, %%" r "15, %%" r "8\n\t" op " %%" r "14, %%" r "15, %%" r "9\n\t" op " %%" r "14, %%" r "15, %%" r       \
       "10\n\t" op " %%" r "14, %%" r "15, %%" r "11\n\t"

#define LOOP(body)                                                                                                       \
    __asm__ volatile("vpxor %%xmm14, %%xmm14, %%xmm14\n\t"                                                              \
                     "vpxor %%xmm15, %%xmm15, %%xmm15\n\t"                                                              \
                     "1:\n\t" body "dec %0\n\t"                                                                         \
                     "jnz 1b\n\t"                                                                                       \
                     : "+r"(n)                                                                                          \
                     :                                                                                                  \
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",        \
                       "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc")

static void fp32_avx2(long n) { LOOP(FMA12("vfmadd231ps", "ymm")); }
static void fp32_avx512(long n) { LOOP(FMA12("vfmadd231ps", "zmm")); }
static void int8_avxvnni(long n) { LOOP(FMA12("%{vex%} vpdpbusd", "ymm")); }
static void int8_avx512vnni(long n) { LOOP(FMA12("vpdpbusd", "zmm")); }
static void bf16_avx512(long n) { LOOP(FMA12("vdpbf16ps", "zmm")); }

/* Four chains of the three-instruction step; the products do not depend on the sums, so only ports
 * bind (ymm12 stands for the 16-bit ones vpmaddwd adds pairs with: its value does not change the speed). */
#define STEP(t, a)                                                                                                       \
    "vpmaddubsw %%ymm14, %%ymm15, %%ymm" t "\n\t"                                                                       \
    "vpmaddwd %%ymm12, %%ymm" t ", %%ymm" t "\n\t"                                                                      \
    "vpaddd %%ymm" t ", %%ymm" a ", %%ymm" a "\n\t"
static void int8_avx2(long n) { LOOP(STEP("4", "0") STEP("5", "1") STEP("6", "2") STEP("7", "3")); }

typedef struct family {
    const char *name, *need; /* __builtin_cpu_supports names, space-separated: all must hold */
    void (*fn)(long);
    double ops_per_iter;
} family;

static const family families[] = {
    {"fp32_avx2", "avx2 fma", fp32_avx2, 12 * 8 * 2},
    {"fp32_avx512", "avx512f", fp32_avx512, 12 * 16 * 2},
    {"int8_avx2", "avx2", int8_avx2, 4 * 32 * 2},
    {"int8_avxvnni", "avxvnni", int8_avxvnni, 12 * 32 * 2},
    {"int8_avx512vnni", "avx512vnni", int8_avx512vnni, 12 * 64 * 2},
    {"bf16_avx512", "avx512bf16", bf16_avx512, 12 * 32 * 2},
};

/* __builtin_cpu_supports takes a string literal only: the names this file asks about. */
static int supports(const char *f)
{
    if (!strcmp(f, "avx2")) return __builtin_cpu_supports("avx2");
    if (!strcmp(f, "fma")) return __builtin_cpu_supports("fma");
    if (!strcmp(f, "avx512f")) return __builtin_cpu_supports("avx512f");
    if (!strcmp(f, "avxvnni")) return __builtin_cpu_supports("avxvnni");
    if (!strcmp(f, "avx512vnni")) return __builtin_cpu_supports("avx512vnni");
    if (!strcmp(f, "avx512bf16")) return __builtin_cpu_supports("avx512bf16");
    return 0;
}

static int has_all(const char *need)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", need);
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
        if (!supports(t)) return 0;
    return 1;
}

/* Best GFLOP/s of 5 runs of ~0.1 s each (the first run sizes them). */
static double measure(const family *f)
{
    long iters = 100000;
    double best = 0;
    for (int round = 0; round < 6; round++) {
        double t0 = cpu_now();
        f->fn(iters);
        double t = cpu_now() - t0;
        if (t <= 0) t = 1e-9;
        if (round == 0) {
            iters = (long)((double)iters * 0.1 / t) + 1;
            continue;
        }
        double g = f->ops_per_iter * (double)iters / t * 1e-9;
        if (g > best) best = g;
    }
    return best;
}

int main(void)
{
    __builtin_cpu_init();
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        if (!has_all(families[i].need)) printf("peak %s absent\n", families[i].name);
        else printf("peak %s %.1f\n", families[i].name, measure(&families[i]));
        fflush(stdout);
    }
    return 0;
}
