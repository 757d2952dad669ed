/* OpenBLAS kernel detection and selection (see blas.h). */
#include "blas.h"

#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *openblas_get_corename(void);
char *openblas_get_config(void);
int openblas_get_num_threads(void);

static unsigned long long xgetbv0(void)
{
    unsigned int eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void cpu_features(bool *avx2, bool *avx512)
{
    unsigned a, b, c, d;
    *avx2 = *avx512 = false;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = c & (1u << 27), avx = c & (1u << 28);
    if (!osxsave || !avx) return;
    unsigned long long xcr0 = xgetbv0();
    bool ymm_os = (xcr0 & 0x6) == 0x6, zmm_os = (xcr0 & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    *avx2 = ymm_os && (b & (1u << 5));
    /* SkylakeX's kernels use F, CD, BW, DQ and VL. */
    unsigned need = (1u << 16) | (1u << 28) | (1u << 30) | (1u << 17) | (1u << 31);
    *avx512 = zmm_os && (b & need) == need;
}

static bool core_has_avx512(const char *core)
{
    return !strcasecmp(core, "SkylakeX") || !strcasecmp(core, "Cooperlake") ||
           !strcasecmp(core, "SapphireRapids");
}

void rs_blas_get_info(rs_blas_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->core, sizeof out->core, "%s", openblas_get_corename());
    snprintf(out->config, sizeof out->config, "%s", openblas_get_config());
    out->threads = openblas_get_num_threads();
    cpu_features(&out->cpu_avx2, &out->cpu_avx512);
    const char *forced = getenv("OPENBLAS_CORETYPE");
    const char *was = getenv("RINGSIDE_BLAS_SELECTED"); /* set by our re-exec: what it replaced */
    const char *pref = getenv("RINGSIDE_BLAS");
    if (was && forced)
        snprintf(out->why, sizeof out->why, "chosen by ringside: the CPU has AVX-512 and %s was slower%s", was,
                 "; RINGSIDE_BLAS=keep keeps the other");
    else if (forced)
        snprintf(out->why, sizeof out->why, "OPENBLAS_CORETYPE=%s from the environment%s", forced,
                 pref && (!strcmp(pref, "keep") || !strcmp(pref, "native")) ? " (kept: RINGSIDE_BLAS)" : "");
    else if (out->cpu_avx512 && !core_has_avx512(out->core))
        snprintf(out->why, sizeof out->why, "OpenBLAS's own detection (slower than this CPU allows)");
    else
        snprintf(out->why, sizeof out->why, "OpenBLAS's own detection");
}

void rs_blas_prefer_fast_kernel(char **argv)
{
    if (getenv("RINGSIDE_BLAS_SELECTED")) return; /* we already re-executed once */
    const char *pref = getenv("RINGSIDE_BLAS");
    if (pref && (!strcmp(pref, "keep") || !strcmp(pref, "native"))) return;
    bool avx2, avx512;
    cpu_features(&avx2, &avx512);
    /* Whether OpenBLAS detected it or OPENBLAS_CORETYPE forced it, a kernel without AVX-512 on a CPU
     * with AVX-512 leaves half the speed unused (the variable is often set machine-wide for older
     * hardware or other software). */
    const char *core = openblas_get_corename();
    if (!avx512 || core_has_avx512(core)) return;
    char was[64];
    const char *forced = getenv("OPENBLAS_CORETYPE");
    snprintf(was, sizeof was, forced ? "OPENBLAS_CORETYPE=%s" : "OpenBLAS's pick %s", forced ? forced : core);
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    setenv("RINGSIDE_BLAS_SELECTED", was, 1);
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc?): carry on with the kernel already loaded. */
    if (forced) setenv("OPENBLAS_CORETYPE", forced, 1);
    else unsetenv("OPENBLAS_CORETYPE");
    unsetenv("RINGSIDE_BLAS_SELECTED");
}
