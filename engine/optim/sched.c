/* Learning-rate schedules (see sched.h).
 * Computed in double and rounded once, so the curve does not drift with the step count and its ends
 * (base_lr after warmup, min_lr at total) come out exactly. */
#include "engine/optim/sched.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* NULL-terminated (the entry at RS_SCHED_KIND_COUNT): train's sched= offers and parses these. */
const char *const rs_sched_kind_names[RS_SCHED_KIND_COUNT + 1] = {
    [RS_SCHED_CONSTANT] = "constant", [RS_SCHED_STEP] = "step", [RS_SCHED_COSINE] = "cosine"};

const char *rs_sched_kind_name(rs_sched_kind kind)
{
    return (unsigned)kind < RS_SCHED_KIND_COUNT ? rs_sched_kind_names[kind] : "?";
}

rs_status rs_sched_kind_parse(const char *s, rs_sched_kind *out, rs_err *err)
{
    for (int i = 0; s && i < RS_SCHED_KIND_COUNT; i++) {
        if (strcasecmp(s, rs_sched_kind_names[i]) == 0) {
            *out = (rs_sched_kind)i;
            return RS_OK;
        }
    }
    char valid[128] = "";
    for (int i = 0; i < RS_SCHED_KIND_COUNT; i++)
        snprintf(valid + strlen(valid), sizeof valid - strlen(valid), "%s%s", i ? ", " : "", rs_sched_kind_names[i]);
    return rs_err_set(err, RS_ERR_ARG, "unknown schedule '%s' (valid: %s)", s ? s : "", valid);
}

rs_status rs_sched_check(const rs_sched *s, rs_err *err)
{
    if ((unsigned)s->kind >= RS_SCHED_KIND_COUNT)
        return rs_err_set(err, RS_ERR_ARG, "schedule kind %d is not one of constant, step, cosine",
                          (int)s->kind);
    const char *who = rs_sched_kind_names[s->kind];
    if (!(isfinite(s->base_lr) && s->base_lr >= 0.0f))
        return rs_err_set(err, RS_ERR_ARG, "%s schedule: lr=%g is invalid (need a finite lr >= 0)",
                          who, (double)s->base_lr);
    if (s->warmup < 0)
        return rs_err_set(err, RS_ERR_ARG, "%s schedule: warmup=%lld is invalid (need warmup >= 0)",
                          who, (long long)s->warmup);
    if (s->kind == RS_SCHED_STEP) {
        if (s->step_size < 1)
            return rs_err_set(err, RS_ERR_ARG,
                              "step schedule: step_size=%lld is invalid (need step_size >= 1)",
                              (long long)s->step_size);
        if (!(s->gamma > 0.0f && s->gamma <= 1.0f))
            return rs_err_set(err, RS_ERR_ARG,
                              "step schedule: gamma=%g is invalid (need 0 < gamma <= 1)",
                              (double)s->gamma);
    } else if (s->kind == RS_SCHED_COSINE) {
        if (s->total <= s->warmup)
            return rs_err_set(err, RS_ERR_ARG,
                              "cosine schedule: total=%lld is invalid (need total > warmup=%lld)",
                              (long long)s->total, (long long)s->warmup);
        if (!(s->min_lr >= 0.0f && s->min_lr <= s->base_lr))
            return rs_err_set(err, RS_ERR_ARG,
                              "cosine schedule: min_lr=%g is invalid (need 0 <= min_lr <= lr=%g)",
                              (double)s->min_lr, (double)s->base_lr);
    }
    return RS_OK;
}

float rs_sched_lr(const rs_sched *s, int64_t step)
{
    const double base = s->base_lr;
    if (step < 0) step = 0;
    if (step < s->warmup) return (float)(base * (double)(step + 1) / (double)s->warmup);
    const int64_t t = step - (s->warmup > 0 ? s->warmup : 0);
    double lr = base;
    switch (s->kind) {
    case RS_SCHED_CONSTANT:
        break;
    case RS_SCHED_STEP:
        if (s->step_size > 0) lr = base * pow((double)s->gamma, (double)(t / s->step_size));
        break;
    case RS_SCHED_COSINE: {
        const double lo = s->min_lr, span = (double)(s->total - s->warmup);
        if (step >= s->total || span <= 0) {
            lr = lo;
        } else {
            lr = lo + 0.5 * (base - lo) * (1.0 + cos(M_PI * (double)t / span));
            if (lr < lo) lr = lo; /* cos rounding must not dip under the floor */
        }
        break;
    }
    default:
        break;
    }
    return lr > 0.0 ? (float)lr : 0.0f;
}
