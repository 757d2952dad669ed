/* The training loop's thread tuner (tune.h): time a window at the count in use, a window at the other
 * count (1 or the asked-for N), keep the faster; again after an interval. */
#include "tune.h"

#include <stdlib.h>
#include <string.h>

enum { S_MEASURE, S_PROBE, S_RUN };

#define TUNE_FIRST_S 1.0  /* the first re-probe after a decision that changed something */
#define TUNE_MAX_S 16.0   /* the longest interval between probes */
#define TUNE_GAIN 0.95    /* the other count must be 5% faster to be taken (hysteresis) */

static double median(const double *v, int n)
{
    double s[RS_TUNE_WINDOW];
    memcpy(s, v, sizeof *s * (size_t)n);
    for (int i = 1; i < n; i++) /* insertion sort: n <= 8 */
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            double x = s[j];
            s[j] = s[j - 1];
            s[j - 1] = x;
        }
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static int other(const rs_thread_tuner *t) { return t->cur == 1 ? t->want : 1; }

/* skip: leave the next step out of the timing (warm-up); a probe times its first step, which is the
 * one that costs most on a loaded machine */
static void use(rs_thread_tuner *t, int n, bool skip)
{
    if (n == t->cur) return;
    rs_kctx_set_threads(t->ctx, n);
    t->cur = n;
    t->skip = skip;
}

void rs_thread_tuner_init(rs_thread_tuner *t, rs_kctx *ctx, double now)
{
    memset(t, 0, sizeof *t);
    const char *env = getenv("RINGSIDE_TUNE_THREADS");
    bool off = env && (!strcmp(env, "off") || !strcmp(env, "0") || !strcmp(env, "no"));
    int want = ctx ? rs_kctx_threads(ctx) : 1;
    t->ctx = ctx;
    t->want = t->cur = want;
    t->on = ctx && want > 1 && !off;
    t->state = S_MEASURE;
    t->skip = true; /* the first step warms caches and starts the team */
    /* one thread first: a window of it costs what a step costs, and the probe of N threads stops as
     * soon as it has cost more (on a loaded machine a window at N could cost 50 windows at 1) */
    if (t->on) {
        t->blocks_before = ctx->blocks;
        ctx->blocks = want; /* the products' blocks stay those of `want` at either count (tune.h) */
        use(t, 1, true);
    }
    t->interval = TUNE_FIRST_S;
    t->next_probe = now;
}

void rs_thread_tuner_script(rs_thread_tuner *t, const int64_t *flips) { t->script = flips; }

void rs_thread_tuner_step(rs_thread_tuner *t, double step_s, double now)
{
    if (!t->on) return;
    t->steps++;
    if (t->script) { /* a test's switch points instead of the clock */
        if (*t->script && t->steps == *t->script) {
            use(t, other(t), false);
            t->script++;
        }
        return;
    }
    if (t->skip) {
        t->skip = false;
        return;
    }
    switch (t->state) {
    case S_RUN:
        if (now < t->next_probe) return;
        t->state = S_MEASURE; /* a fresh window at the count in use, then the probe */
        t->n = 0;
        __attribute__((fallthrough)); /* this step is the window's first */
    case S_MEASURE:
        t->t[t->n++] = step_s;
        if (t->n < RS_TUNE_WINDOW) return;
        t->med_cur = median(t->t, t->n);
        t->n = 0;
        t->state = S_PROBE;
        use(t, other(t), false);
        return;
    case S_PROBE: {
        t->t[t->n++] = step_s;
        double sum = 0;
        for (int i = 0; i < t->n; i++) sum += t->t[i];
        /* a probe that already cost a step more than as many steps at the count in use has lost: stop
         * paying for it (under load one step at N threads can cost fifty at one) */
        bool lost = sum > (t->n + 1) * t->med_cur;
        if (t->n < RS_TUNE_WINDOW && !lost) return;
        double med = median(t->t, t->n);
        if (!lost && med < TUNE_GAIN * t->med_cur) { /* the probed count wins: keep it */
            t->med_cur = med;
            t->switches++;
            t->interval = TUNE_FIRST_S;
        } else { /* back to the count in use, and ask again less often */
            use(t, other(t), true);
            t->interval = t->interval * 2 < TUNE_MAX_S ? t->interval * 2 : TUNE_MAX_S;
        }
        t->n = 0;
        t->state = S_RUN;
        t->next_probe = now + t->interval;
        return;
    }
    }
}

void rs_thread_tuner_end(rs_thread_tuner *t)
{
    if (t->on && t->cur != t->want) rs_kctx_set_threads(t->ctx, t->want);
    if (t->on) t->ctx->blocks = t->blocks_before;
    t->cur = t->want;
}
