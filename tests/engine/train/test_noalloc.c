/* "No allocation inside the training step after the first": every malloc/calloc/realloc/
 * aligned_alloc made by code linked into this test (the engine is a static library, so its calls
 * are wrapped with -Wl,--wrap) is counted while a flag is up: from the end of each epoch's first
 * step to the end of that epoch, which covers loading the batch, forward, loss, backward and the
 * optimizer of every later step, in both epochs. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/data/gen/digits.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "rs_test.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t al, size_t n);

static volatile bool armed;
static volatile long allocs;

void *__wrap_malloc(size_t n)
{
    if (armed) allocs++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b)
{
    if (armed) allocs++;
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n)
{
    if (armed) allocs++;
    return __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t al, size_t n)
{
    if (armed) allocs++;
    return __real_aligned_alloc(al, n);
}

typedef struct watch {
    long steps_watched;
} watch;

/* Armed from the end of each epoch's first step to that epoch's end; evaluation between epochs and
 * the loader's reshuffle at an epoch start are outside the steps and may allocate. */
static void on_event(void *ud, const rs_train_event *ev)
{
    watch *w = ud;
    if (ev->kind == RS_TRAIN_EV_STEP) {
        if (armed) w->steps_watched++;
        armed = true;
    } else if (ev->kind == RS_TRAIN_EV_EPOCH || ev->kind == RS_TRAIN_EV_END) {
        armed = false;
    }
}

static void run(const char *spec, int threads)
{
    rs_err err = {0};
    rs_data_pair d = {0};
    RS_CHECK(rs_data_digits_pair(640, 64, 3, &d, &err) == RS_OK, "%s", err.msg);
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 1, &m, NULL, &err) == RS_OK, "%s", err.msg);
    if (!m || !d.train) return;
    rs_train_cfg cfg = rs_train_defaults();
    cfg.batch = 32;
    cfg.epochs = 2;
    cfg.threads = threads;
    cfg.opt = rs_opt_defaults(RS_OPT_SGD);
    cfg.opt.momentum = 0.9f;
    cfg.sched.kind = RS_SCHED_COSINE;
    watch w = {0};
    allocs = 0;
    rs_train_hooks h = {.on_event = on_event, .ud = &w};
    rs_train_result r;
    RS_CHECK(rs_train(m, &d, &cfg, &h, &r, &err) == RS_OK, "%s", err.msg);
    armed = false;
    printf("%-60.60s threads %d: %ld steps watched, %ld allocations\n", spec, threads, w.steps_watched, allocs);
    RS_CHECK(w.steps_watched >= 36, "only %ld steps were watched", w.steps_watched);
    RS_CHECK(allocs == 0, "%s: %ld allocations during %ld training steps", spec, allocs, w.steps_watched);
    rs_model_free(m);
    rs_data_pair_clear(&d);
}

int main(void)
{
    /* The wrapper must see the engine's allocations at all, or a zero proves nothing. */
    armed = true;
    allocs = 0;
    rs_model *probe = NULL;
    rs_err err = {0};
    rs_model_parse("mlp 784-10", "p", rs_device_cpu(), NULL, 1, &probe, NULL, &err);
    armed = false;
    RS_CHECK(allocs > 0, "the allocation counter saw nothing: the --wrap link flags are not in effect");
    rs_model_free(probe);

    run("mlp 784-256-256-10 dropout=0.2", 1);
    run("mlp 784-256-256-10 dropout=0.2", 2);
    run("seq conv(8,3,pad=1) relu maxpool(2) conv(16,3,stride=2,pad=1) gelu flatten layernorm dropout(0.1) "
        "linear(10)",
        2);
    return rs_test_finish("noalloc");
}
