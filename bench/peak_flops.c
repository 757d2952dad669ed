/* The core's arithmetic peak, one thread: what a plan node's GFLOP/s is a fraction of
 * (bench/plan_bound.py). Each line is one instruction family run back to back on independent
 * registers, so only the execution ports bound it:
 *   fp32_avx2     vfmadd231ps ymm (8 lanes x 2 flops)
 *   fp32_avx512   vfmadd231ps zmm (16 lanes x 2 flops)
 *   int8_avx2     vpmaddubsw + vpmaddwd + vpaddd ymm: oneDNN's u8s8 step without VNNI (32 MACs)
 *   int8_avxvnni  {vex} vpdpbusd ymm (32 MACs)
 *   int8_avx512vnni vpdpbusd zmm (64 MACs)
 *   bf16_avx512   vdpbf16ps zmm (32 MACs)
 *   bf16_amx      tdpbf16ps on 16x64-byte tiles (8192 MACs)
 *   int8_amx      tdpbusd on 16x64-byte tiles (16384 MACs)
 *   read_1MiB, read_32MiB, read_1GiB   vmovups ymm loads streaming over a buffer of that size
 *                 (GB/s: what a node bound by its bytes, a batch-1 layer reading its weights, is a
 *                 fraction of; the buffer sizes stand for L2, a model's weights, memory)
 * in GFLOP/s (int8: GOP/s, a MAC two ops; reads in GB/s), each the best of 5 runs of ~0.1 s of thread CPU time (the
 * machine may be shared: a wait for the core is not the core's speed). A family the CPU lacks (or, for
 * AMX, whose tiles the kernel does not grant: arch_prctl) prints "absent". Inline assembly: the
 * figures do not depend on the build's optimisation level.
 *   build/bench/peak_flops            (lines "peak NAME GFLOPS", or "peak NAME absent")
 *   build/bench/peak_flops BYTES      (one line "peak read GBS": a read over BYTES, as a plan's weights
 *                                      are read each run: bench/plan_bound.py passes their size) */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* AMX: six accumulator tiles (the instruction's latency is several of its issue intervals), two zero
 * source tiles, all 16 rows of 64 bytes (palette 1). */
typedef struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) tilecfg;

#define TDP6(op)                                                                                                         \
    op " %%tmm7, %%tmm6, %%tmm0\n\t" op " %%tmm7, %%tmm6, %%tmm1\n\t" op " %%tmm7, %%tmm6, %%tmm2\n\t" op             \
       " %%tmm7, %%tmm6, %%tmm3\n\t" op " %%tmm7, %%tmm6, %%tmm4\n\t" op " %%tmm7, %%tmm6, %%tmm5\n\t"

#define AMX_LOOP(body)                                                                                                   \
    do {                                                                                                                 \
        tilecfg cfg = {.palette = 1};                                                                                    \
        for (int i = 0; i < 8; i++) cfg.rows[i] = 16, cfg.colsb[i] = 64;                                               \
        __asm__ volatile("ldtilecfg %0\n\t" ::"m"(cfg));                                                                \
        __asm__ volatile("tilezero %%tmm6\n\ttilezero %%tmm7\n\t"                                                      \
                         "1:\n\t" body "dec %0\n\t"                                                                     \
                         "jnz 1b\n\t"                                                                                   \
                         "tilerelease\n\t"                                                                              \
                         : "+r"(n)                                                                                      \
                         :                                                                                              \
                         : "cc", "memory");                                                                             \
    } while (0)

static void bf16_amx(long n) { AMX_LOOP(TDP6("tdpbf16ps")); }
static void int8_amx(long n) { AMX_LOOP(TDP6("tdpbusd")); }

/* Bytes of each read pass over buf (n bytes, a multiple of 256): eight 32-byte loads an iteration,
 * into registers nothing reads (the loads still happen: asm volatile). */
static void read_pass(const char *buf, size_t n)
{
    const char *end = buf + n;
    __asm__ volatile("1:\n\t"
                     "vmovups (%0), %%ymm0\n\tvmovups 32(%0), %%ymm1\n\tvmovups 64(%0), %%ymm2\n\t"
                     "vmovups 96(%0), %%ymm3\n\tvmovups 128(%0), %%ymm4\n\tvmovups 160(%0), %%ymm5\n\t"
                     "vmovups 192(%0), %%ymm6\n\tvmovups 224(%0), %%ymm7\n\t"
                     "add $256, %0\n\t"
                     "cmp %1, %0\n\t"
                     "jb 1b\n\t"
                     : "+r"(buf)
                     : "r"(end)
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "cc", "memory");
}

/* Best GB/s of 5 timed passes-sets of ~0.1 s over a buffer of n bytes (touched first). */
static double read_gbs(size_t n)
{
    char *buf = aligned_alloc(64, n); /* this function's */
    if (!buf) return 0;
    memset(buf, 1, n);
    long reps = 1;
    double best = 0;
    for (int round = 0; round < 6; round++) {
        double t0 = cpu_now();
        for (long r = 0; r < reps; r++) read_pass(buf, n);
        double t = cpu_now() - t0;
        if (t <= 0) t = 1e-9;
        if (round == 0) {
            reps = (long)((double)reps * 0.1 / t) + 1;
            continue;
        }
        double g = (double)n * (double)reps / t * 1e-9;
        if (g > best) best = g;
    }
    free(buf);
    return best;
}

/* What the CPU and the OS give, from CPUID and XGETBV (not __builtin_cpu_supports: compilers differ
 * in the names they know). */
enum { F_AVX2 = 1, F_FMA = 2, F_AVX512 = 4, F_AVXVNNI = 8, F_VNNI512 = 16, F_BF16_512 = 32, F_AMX = 64 };

typedef struct family {
    const char *name;
    unsigned need; /* F_* bits, all of them */
    void (*fn)(long);
    double ops_per_iter;
} family;

static const family families[] = {
    {"fp32_avx2", F_AVX2 | F_FMA, fp32_avx2, 12 * 8 * 2},
    {"fp32_avx512", F_AVX512, fp32_avx512, 12 * 16 * 2},
    {"int8_avx2", F_AVX2, int8_avx2, 4 * 32 * 2},
    {"int8_avxvnni", F_AVXVNNI, int8_avxvnni, 12 * 32 * 2},
    {"int8_avx512vnni", F_VNNI512, int8_avx512vnni, 12 * 64 * 2},
    {"bf16_avx512", F_BF16_512, bf16_avx512, 12 * 32 * 2},
    {"bf16_amx", F_AMX, bf16_amx, 6 * 16 * 16 * 32 * 2},
    {"int8_amx", F_AMX, int8_amx, 6 * 16 * 16 * 64 * 2},
};

/* Leaf 1 ECX: FMA 12, OSXSAVE 27, AVX 28; XCR0: the OS saves ymm (bits 1-2) and zmm/k state (5-7);
 * leaf 7.0 EBX: AVX2 5, AVX512F 16; ECX: AVX512_VNNI 11; EDX: AMX-BF16 22, AMX-TILE 24, AMX-INT8 25;
 * leaf 7.1 EAX: AVX-VNNI 4, AVX512_BF16 5. AMX also needs Linux's grant of the tile data state to
 * this process (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA): without it the first tile instruction
 * faults. */
static unsigned cpu_features(void)
{
    unsigned a, b, c, d, f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & 1u << 27) || !(c & 1u << 28)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6u) != 6u) return 0;
    int zmm = (lo & 0xe0u) == 0xe0u;
    unsigned fma = c & 1u << 12;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (b & 1u << 5) f |= F_AVX2 | (fma ? F_FMA : 0);
    if (zmm && (b & 1u << 16)) f |= F_AVX512 | (c & 1u << 11 ? F_VNNI512 : 0);
    unsigned amx = 1u << 22 | 1u << 24 | 1u << 25;
    if ((d & amx) == amx && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0)
        f |= F_AMX;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
        if (a & 1u << 4) f |= F_AVXVNNI;
        if (zmm && (a & 1u << 5)) f |= F_BF16_512;
    }
    return f;
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

int main(int argc, char **argv)
{
    unsigned have = cpu_features();
    if (argc > 1 && !(have & F_AVX2)) return puts("peak read absent"), 0;
    if (argc > 1) {
        size_t bytes = ((size_t)strtoull(argv[1], NULL, 10) + 255) / 256 * 256;
        printf("peak read %.1f\n", read_gbs(bytes < 256 ? 256 : bytes));
        return 0;
    }
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        if ((have & families[i].need) != families[i].need) printf("peak %s absent\n", families[i].name);
        else printf("peak %s %.1f\n", families[i].name, measure(&families[i]));
        fflush(stdout);
    }
    static const struct {
        const char *name;
        size_t bytes;
    } reads[] = {{"read_1MiB", (size_t)1 << 20}, {"read_32MiB", (size_t)32 << 20}, {"read_1GiB", (size_t)1 << 30}};
    for (size_t i = 0; i < sizeof reads / sizeof reads[0] && (have & F_AVX2); i++) {
        printf("peak %s %.1f\n", reads[i].name, read_gbs(reads[i].bytes));
        fflush(stdout);
    }
    return 0;
}
