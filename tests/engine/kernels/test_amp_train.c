/* Training in mixed precision on Fashion-MNIST (Debian's dataset-fashion-mnist; skipped, exit 77,
 * where it is not installed): an MLP 784-128-10 and a small CNN, the same steps, seed and data order in
 * fp32, bf16 and fp16, and fp16 with overflows:
 *   - bf16 and fp16 end within 1 point of fp32's test accuracy;
 *   - fp16 with an injected overflow (step 50's backward runs with an infinite loss scale) skips exactly
 *     that step, backs the scale off to 32768 and ends within 1 point of fp32 too;
 *   - fp16 starting from a scale of 2^40 overflows for real in the rounded fp16 products until the
 *     scale has come down: every skip halves it (scale == 2^40 / 2^skipped), and it recovers to within
 *     1 point;
 *   - fp32 and bf16 never skip; the context's precision is put back after the run. */
#include <math.h>
#include <string.h>

#include "engine/cpu/blas.h"
#include "engine/data/data.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

typedef struct run_out {
    double acc;
    int64_t skipped, steps;
    float scale;
    int64_t first_skip; /* the step whose event first showed a skipped step (0: none) */
} run_out;

static void on_event(void *ud, const rs_train_event *ev)
{
    run_out *o = ud;
    if (ev->kind == RS_TRAIN_EV_STEP && ev->skipped > 0 && !o->first_skip) o->first_skip = ev->step;
}

static run_out run(const rs_data_pair *d, const char *spec, int steps, rs_prec p, float scale0, int64_t inject)
{
    run_out o = {.acc = -1};
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 1, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return o;
    rs_train_cfg c = rs_train_defaults();
    c.batch = 32;
    c.max_steps = steps;
    c.eval = true;
    c.threads = 1;
    c.precision = p;
    c.loss_scale = scale0;
    c.inject_inf = inject;
    c.eval_every = steps; /* one evaluation, after the last step, on 2000 test samples */
    c.eval_samples = 2000;
    rs_train_result r;
    rs_train_hooks h = {.on_event = on_event, .ud = &o};
    rs_status st = rs_train(m, d, &c, &h, &r, &e);
    RS_CHECK(st == RS_OK, "train %s %s: %s", spec, rs_prec_name(p), e.msg);
    RS_CHECK(rs_model_ctx(m)->prec == RS_PREC_FP32, "the model's context is back to fp32 after a %s run",
             rs_prec_name(p));
    if (!st) o = (run_out){r.test_acc, r.skipped, r.steps, r.loss_scale, o.first_skip};
    printf("  %-4s scale0 %-8g inject %-3lld: test accuracy %.4f, %lld steps, %lld skipped (first at step %lld), "
           "scale %g, %.0f samples/s\n", rs_prec_name(p), (double)scale0, (long long)inject, o.acc, (long long)o.steps,
           (long long)o.skipped, (long long)o.first_skip, (double)o.scale, r.samples_per_s);
    fflush(stdout);
    rs_model_free(m);
    return o;
}

static void model_case(const rs_data_pair *d, const char *spec, int steps)
{
    printf("%s, %d steps of 32, Adam 1e-3:\n", spec, steps);
    run_out f32 = run(d, spec, steps, RS_PREC_FP32, 0, 0);
    run_out b16 = run(d, spec, steps, RS_PREC_BF16, 0, 0);
    run_out h16 = run(d, spec, steps, RS_PREC_FP16, 0, 0);
    RS_CHECK(f32.acc > 0.7, "fp32 reaches %.4f: the recipe itself is broken", f32.acc);
    RS_CHECK(fabs(b16.acc - f32.acc) <= 0.01, "bf16 %.4f vs fp32 %.4f: more than 1 point apart", b16.acc, f32.acc);
    RS_CHECK(fabs(h16.acc - f32.acc) <= 0.01, "fp16 %.4f vs fp32 %.4f: more than 1 point apart", h16.acc, f32.acc);
    RS_CHECK(f32.skipped == 0 && b16.skipped == 0 && f32.scale == 1.0f && b16.scale == 1.0f,
             "fp32/bf16 run without a scaler: skipped %lld/%lld", (long long)f32.skipped, (long long)b16.skipped);
    /* torch's first scale overflows now and then early in a run: a few skips, each halving it */
    RS_CHECK(h16.skipped <= 4 && h16.scale == ldexpf(1.0f, 16 - (int)h16.skipped),
             "fp16 from 65536: %lld skipped, scale %g (want 2^(16 - skipped))", (long long)h16.skipped, (double)h16.scale);
    RS_CHECK(b16.acc != f32.acc || h16.acc != f32.acc, "bf16 and fp16 give fp32's accuracy exactly: not in effect?");

    run_out inj = run(d, spec, steps, RS_PREC_FP16, 0, 50);
    /* identical to the plain fp16 run up to step 50 (its own skips included), step 50 is skipped */
    bool before = h16.first_skip && h16.first_skip < 50;
    RS_CHECK(inj.skipped >= 1 && inj.scale == ldexpf(1.0f, 16 - (int)inj.skipped) && inj.steps == steps,
             "injected overflow: %lld skipped, scale %g (want 2^(16 - skipped)), %lld steps", (long long)inj.skipped,
             (double)inj.scale, (long long)inj.steps);
    RS_CHECK(before ? inj.first_skip == h16.first_skip : inj.first_skip == 50,
             "injected at step 50: the first skip came at step %lld (the plain run's first: %lld)",
             (long long)inj.first_skip, (long long)h16.first_skip);
    RS_CHECK(fabs(inj.acc - f32.acc) <= 0.01, "after the injected overflow %.4f vs fp32 %.4f", inj.acc, f32.acc);

    const float big = 1099511627776.0f; /* 2^40 */
    run_out hot = run(d, spec, steps, RS_PREC_FP16, big, 0);
    RS_CHECK(hot.skipped >= 5 && hot.skipped < steps / 4, "scale 2^40: %lld steps skipped (fp16 overflows from there)",
             (long long)hot.skipped);
    RS_CHECK(hot.scale == ldexpf(1.0f, 40 - (int)hot.skipped), "scale 2^40 with %lld skips ends at %g, want 2^%d",
             (long long)hot.skipped, (double)hot.scale, 40 - (int)hot.skipped);
    RS_CHECK(fabs(hot.acc - f32.acc) <= 0.01, "after backing off from 2^40 %.4f vs fp32 %.4f", hot.acc, f32.acc);
}

int main(int argc, char **argv)
{
    (void)argc;
    rs_blas_prefer_fast_kernel(argv);
    rs_data_pair d = {0};
    rs_err e = {0};
    rs_status st = rs_data_fashion(NULL, &d, &e);
    if (st == RS_ERR_IO && strstr(e.msg, "apt-get")) RS_SKIP("%s", e.msg);
    RS_CHECK(st == RS_OK, "fashion: %s", e.msg);
    if (st != RS_OK) return rs_test_finish("engine-amp-train");
    model_case(&d, "mlp 784-128-10", 400);
    model_case(&d, "seq in=1x28x28 conv(8,3,pad=1) relu maxpool(2) flatten linear(10)", 200);
    rs_data_pair_clear(&d);
    return rs_test_finish("engine-amp-train");
}
