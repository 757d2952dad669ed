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
    const char *ours = getenv("RINGSIDE_BLAS_SELECTED");
    if (ours && forced)
        snprintf(out->why, sizeof out->why,
                 "chosen by ringside: CPU has AVX-512, OpenBLAS detected %s", ours);
    else if (forced)
        snprintf(out->why, sizeof out->why, "OPENBLAS_CORETYPE=%s set by the user", forced);
    else if (out->cpu_avx512 && !core_has_avx512(out->core))
        snprintf(out->why, sizeof out->why,
                 "OpenBLAS's own detection (slower than this CPU allows; RINGSIDE_BLAS=native?)");
    else
        snprintf(out->why, sizeof out->why, "OpenBLAS's own detection");
}

void rs_blas_prefer_fast_kernel(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE") || getenv("RINGSIDE_BLAS_SELECTED")) return;
    const char *pref = getenv("RINGSIDE_BLAS");
    if (pref && !strcmp(pref, "native")) return;
    bool avx2, avx512;
    cpu_features(&avx2, &avx512);
    const char *core = openblas_get_corename();
    if (!avx512 || core_has_avx512(core)) return;
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    setenv("RINGSIDE_BLAS_SELECTED", core, 1); /* also stops a second re-exec */
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc?): carry on with the kernel we have and say nothing is wrong. */
    unsetenv("OPENBLAS_CORETYPE");
}
