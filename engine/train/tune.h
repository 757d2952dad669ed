/* Thread count under contention. A team of N OpenMP threads pays at every parallel region for its
 * slowest member, and a training step of a small model has about twenty regions (BLAS products,
 * element-wise kernels, the optimizer). When another process runs on one of the cores, the thread
 * that shares it gets the core a scheduler slice at a time, and the step waits for it at every
 * region: on a 2-core machine with one busy core, 2 threads ran a step 30-50x slower than 1 thread.
 *
 * The tuner times the steps. It times a window of steps at 1 thread, then one at the threads asked
 * for, and goes on with whichever was faster; it probes the other count again after an interval
 * that doubles while the answer stays the same (1 s up to 16 s), and abandons a probe as soon as it
 * has cost a step more than as many steps at the current count. So asking for N threads is never
 * much slower than 1, and on an idle machine the probes cost well under 1% of the run.
 *
 * Switching counts must not change a run's bits, or two identical runs differ where the tuner happened
 * to switch. ringside's own kernels sum in an order fixed by the data, not the thread count (conv
 * backward folds fixed chunks of the batch, engine/cpu/conv_kernels.c). OpenBLAS's threaded products
 * do not (with 0.3.21's SkylakeX kernel x.W^T of a (64, 784) batch and a 256x784 weight differs at 1
 * and 2 threads, with its Haswell kernel every Linear product), so the tuner sets the context's
 * `blocks` to the asked-for N while it runs: the gemm entry then cuts every large product into the
 * same N blocks of single-threaded OpenBLAS calls at 1 thread as at N (engine/cpu/gemm_blocks.c).
 * Same seed and same threads give the same bits wherever the tuner switches, and a tuned run equals
 * one pinned at N (RINGSIDE_TUNE_THREADS=off), which cuts its products the same way
 * (tests/engine/train/test_repro.c; docs/engine.md "Reproducibility"). */
#ifndef RS_TRAIN_TUNE_H
#define RS_TRAIN_TUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/core/device.h"

#define RS_TUNE_WINDOW 8

typedef struct rs_thread_tuner {
    rs_kctx *ctx;                  /* borrowed: the context whose threads it sets (the model's) */
    int want;                      /* threads asked for (> 1, or the tuner is off) */
    int cur;                       /* threads in use */
    bool on;
    int state;                     /* see tune.c */
    int n;                         /* steps timed in the current window */
    bool skip;                     /* the next step follows a switch: not timed (caches, team start) */
    double t[RS_TUNE_WINDOW];      /* step seconds of the current window */
    double med_cur;                /* median step of the count in use, last measured */
    double next_probe;             /* monotonic seconds */
    double interval;               /* seconds between probes */
    int switches;                  /* how often the count changed (for reports) */
    int blocks_before;             /* the context's blocks before the run, put back at its end */
    int64_t steps;                 /* steps seen */
    const int64_t *script;         /* borrowed; non-NULL: switch after these steps (tests) */
} rs_thread_tuner;

/* Tunes ctx's thread count (NULL: no tuning); the run asked for the count it has now. Off when that is
 * below 2 or RINGSIDE_TUNE_THREADS is "off"/"0". Only that context changes: another model, decoder or
 * rank in the process keeps its count. */
void rs_thread_tuner_init(rs_thread_tuner *t, rs_kctx *ctx, double now);
/* Tests: instead of timing, switch between 1 and the asked-for count after each step number of flips
 * (ascending, 1-based, ended by 0; borrowed for the run). The run still starts at 1 thread. */
void rs_thread_tuner_script(rs_thread_tuner *t, const int64_t *flips);
/* After each step: its wall time and the clock now. May change the thread count. */
void rs_thread_tuner_step(rs_thread_tuner *t, double step_s, double now);
/* Puts the asked-for count back (end of the run). */
void rs_thread_tuner_end(rs_thread_tuner *t);

#endif
