/* Which OpenBLAS kernel runs, and choosing the fast one.
 * Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernel in a library constructor, before main().
 * On CPUs newer than it knows (e.g. AMD Zen 4/5) it falls back to Haswell, half the speed of its
 * SkylakeX kernel on the same AVX-512 hardware. Only the environment variable OPENBLAS_CORETYPE,
 * read in that constructor, changes the choice, so the fix has to happen before the library loads:
 * rs_blas_prefer_fast_kernel() re-executes the program once with the variable set. */
#ifndef RS_BLAS_H
#define RS_BLAS_H

#include <stdbool.h>

typedef struct rs_blas_info {
    char core[32];         /* kernel OpenBLAS is using now, e.g. "SkylakeX" */
    char config[160];      /* openblas_get_config() */
    char why[160];         /* how that kernel was chosen, in words */
    bool cpu_avx2, cpu_avx512; /* usable: CPU flag AND enabled by the OS (XCR0) */
    int threads;
} rs_blas_info;

void rs_blas_get_info(rs_blas_info *out);

/* Call first in main(). When the CPU can run AVX-512 but the kernel loaded cannot (OpenBLAS's own
 * pick, or OPENBLAS_CORETYPE from the environment naming an older core), re-executes /proc/self/exe
 * with the same argv and OPENBLAS_CORETYPE=SkylakeX (same pid, so launchers and waiters are
 * unaffected). RINGSIDE_BLAS=keep leaves the kernel alone. Returns normally when nothing needs
 * doing or the exec failed (then the slower kernel is used, and `version` says which). */
void rs_blas_prefer_fast_kernel(char **argv);

#endif
