/* The kernel-table harness's toolkit (tests/engine/kernels/test_kernel_harness.c runs it).
 * A case exercises one entry of a table under test: its inputs go to the device through the table's
 * own mem_alloc and copy_h2d, its outputs come back with copy_d2h, and they are compared with
 *   - the CPU table on host memory with one thread (the reference every table must match), and
 *   - an independent check written in the case: a scalar float64 reference for forward entries,
 *     central differences of the forward entry (run on the table under test) for backward entries.
 * Failures are counted here, not in rs_test.h's per-file counters, since cases live in several files. */
#ifndef RS_TEST_HARNESS_H
#define RS_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/kernels.h"

typedef struct hz {
    const rs_kernels *k;  /* the table under test */
    rs_kctx *ctx;         /* its context (1 or 2 threads) */
    rs_kctx ref;          /* the CPU table, one thread: the reference */
    const char *entry;    /* the entry being checked, for messages */
    uint64_t rng;
    int checks, failures;
    void **blocks;        /* device blocks of the current case, freed by hz_release */
    size_t *sizes;
    int nblocks, capblocks;
} hz;

/* Counts a check; prints the message (prefixed with the table, threads and entry) when !ok. */
bool hz_check(hz *h, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Random values: uniform in [lo, hi); floats away from 0 by at least gap (kinks of relu). */
double hz_unif(hz *h, double lo, double hi);
float *hz_rand(hz *h, size_t n, float lo, float hi);           /* host, malloc'd: free() */
float *hz_rand_gap(hz *h, size_t n, float amp, float gap);     /* |x| in [gap, amp) */
int32_t *hz_ints(hz *h, size_t n, int32_t below);              /* [0, below) */

/* Device memory of the table under test, released by hz_release(h, mark) for blocks made after mark. */
size_t hz_mark(const hz *h);
void hz_release(hz *h, size_t mark);
void *hz_alloc(hz *h, size_t bytes);                           /* zero-filled */
void *hz_up(hz *h, const void *host, size_t bytes);            /* alloc + copy_h2d */
void *hz_up_nan(hz *h, size_t nfloats);                        /* floats set to NaN: must be overwritten */
void hz_down(hz *h, void *host, const void *dev, size_t bytes); /* sync + copy_d2h */
float *hz_down_new(hz *h, const void *dev, size_t nfloats);    /* into a new malloc'd host array */

/* got vs want elementwise: |got - want| <= atol + rtol |want| (NaN never passes). */
bool hz_close(hz *h, const char *what, const float *got, const float *want, size_t n, double atol, double rtol);
bool hz_close_d(hz *h, const char *what, const float *got, const double *want, size_t n, double atol, double rtol);

/* Central differences: for up to `cap` indices i of x (host floats the loss reads), perturbs x[i] by
 * +-eps, calls loss(ud) and checks (L+ - L-)/(2 eps) against analytic[i]. */
void hz_fd(hz *h, const char *what, float *x, size_t n, const float *analytic, double (*loss)(void *ud), void *ud,
           double eps, double atol, double rtol, size_t cap);

/* The entry refused its arguments: status RS_ERR_ARG, recorded in the context with a message, and
 * rs_kctx_check took it (the context is clean afterwards). */
bool hz_refused(hz *h, const char *what, rs_status st);
/* The entry succeeded and left nothing in the context. */
bool hz_ok(hz *h, const char *what, rs_status st);

/* One entry's case. */
typedef struct hz_case {
    const char *entry;
    size_t offset;        /* offsetof(rs_kernels, entry) */
    void (*run)(hz *h);
} hz_case;

/* Every entry of engine/core/kernels.def has its case hz_case_<entry>, defined with HZ_CASE in one of
 * harness_mem.c, harness_dense.c, harness_nn.c, harness_tensor.c: an entry without one is an undefined
 * reference when the harness links (the error names it), one with two a multiple definition. */
#define RS_KERNEL(name, params, args) extern const hz_case hz_case_##name;
#include "engine/core/kernels.def"

#define HZ_CASE(name, fn) const hz_case hz_case_##name = {#name, offsetof(rs_kernels, name), fn}

#endif
