/* Learning-rate schedules: constant, step decay and cosine, each after an optional linear warmup.
 * A schedule is plain data and a pure function of the step, so every rank computes the same lr
 * without talking, and a resumed run picks up the curve from its saved step count. */
#ifndef RS_SCHED_H
#define RS_SCHED_H

#include <stdint.h>

#include "engine/core/status.h"

typedef enum rs_sched_kind {
    RS_SCHED_CONSTANT,
    RS_SCHED_STEP,
    RS_SCHED_COSINE,
    RS_SCHED_KIND_COUNT
} rs_sched_kind;

/* With w = warmup and steps counted from 0, rs_sched_lr(s, step) is
 *   step < w:  base_lr * (step+1) / w                            (linear warmup, reaches base_lr)
 *   constant:  base_lr
 *   step:      base_lr * gamma^floor((step - w) / step_size)     (decay counted from the end of the
 *              warmup, as torch's SequentialLR(LinearLR, StepLR) does, so a warmup only delays it)
 *   cosine:    min_lr + (base_lr - min_lr)/2 * (1 + cos(pi * (step - w) / (total - w))), and min_lr
 *              from step `total` on.
 * Fields a kind does not use are ignored. */
typedef struct rs_sched {
    rs_sched_kind kind;
    float base_lr;
    int64_t warmup;    /* linear warmup steps; 0 for none */
    int64_t step_size; /* step decay: steps between decays */
    float gamma;       /* step decay: factor per decay, 0 < gamma <= 1 */
    int64_t total;     /* cosine: step at which min_lr is reached, > warmup */
    float min_lr;      /* cosine: floor, 0 <= min_lr <= base_lr */
} rs_sched;

/* The rate for step (0-based; a negative step is taken as 0). Never negative for a checked schedule. */
float rs_sched_lr(const rs_sched *s, int64_t step);
/* "constant", "step", "cosine" (case-insensitive). */
rs_status rs_sched_kind_parse(const char *s, rs_sched_kind *out, rs_err *err);
const char *rs_sched_kind_name(rs_sched_kind kind);
/* The kinds' names, indexed by rs_sched_kind and NULL-terminated: the one list the parser above and
 * the prompt's sched= read, so a new schedule needs no edit in repl/. */
extern const char *const rs_sched_kind_names[RS_SCHED_KIND_COUNT + 1];
/* Rejects values that would give a negative, non-finite or undefined rate, naming the value and the
 * valid range. */
rs_status rs_sched_check(const rs_sched *s, rs_err *err);

#endif
