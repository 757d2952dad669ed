/* int8 calibration methods (plan/calib.c): on a tensor with one outlier, min-max keeps it (the
 * threshold is the largest |x|), percentile cuts at the percentile a sort of the same values gives,
 * and entropy clips it while keeping the bulk; on a tensor without outliers all three keep (nearly)
 * the whole range. Then whole plans: calibrated on data where one sample holds an outlier, the
 * percentile and entropy plans clip it (a larger input scale than min-max's) and come closer to the
 * fp32 engine on ordinary inputs than the min-max plan, whose 127 levels the outlier spread thin. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/data/dataset.h"
#include "engine/nn/spec.h"
#include "plan/ir.h"
#include "plan/plan.h"
#include "rs_test.h"

#define N 20000

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Mean squared error of x quantized symmetric s8 with threshold t (values beyond saturate), over
 * all values but x[skip] (the outlier: what its range costs every other value). */
static double qmse(const float *x, size_t n, float t, size_t skip)
{
    double s = 0, scale = 127.0 / t;
    for (size_t i = 0; i < n; i++) {
        if (i == skip) continue;
        double q = nearbyint((double)x[i] * scale);
        q = q > 127 ? 127 : q < -127 ? -127 : q;
        s += (q / scale - x[i]) * (q / scale - x[i]);
    }
    return s / (double)(n - 1);
}

static void thresholds(void)
{
    float *x = malloc(N * sizeof *x), *ab = malloc(N * sizeof *ab);
    uint64_t *h = calloc(RS_PLAN_CALIB_BINS, sizeof *h);
    rs_rng r;
    rs_rng_seed(&r, 7);
    for (int i = 0; i < N; i += 2) { /* Box-Muller: a unit normal bulk */
        double u = 1.0 - rs_rng_uniform(&r), v = rs_rng_uniform(&r);
        x[i] = (float)(sqrt(-2 * log(u)) * cos(2 * M_PI * v));
        x[i + 1] = (float)(sqrt(-2 * log(u)) * sin(2 * M_PI * v));
    }
    x[123] = -40.0f; /* the outlier */
    float amax = 0;
    for (int i = 0; i < N; i++) amax = fmaxf(amax, fabsf(x[i]));
    rs_plan_calib_hist(x, N, amax, h, RS_PLAN_CALIB_BINS);
    uint64_t total = 0;
    for (int i = 0; i < RS_PLAN_CALIB_BINS; i++) total += h[i];
    RS_CHECK(total == N && h[RS_PLAN_CALIB_BINS - 1] == 1, "histogram: %llu counts, last bin %llu",
             (unsigned long long)total, (unsigned long long)h[RS_PLAN_CALIB_BINS - 1]);
    float mm = rs_plan_calib_threshold(h, RS_PLAN_CALIB_BINS, amax, RS_PLAN_CALIB_MINMAX, 0);
    float pc = rs_plan_calib_threshold(h, RS_PLAN_CALIB_BINS, amax, RS_PLAN_CALIB_PERCENTILE, 99.9);
    float en = rs_plan_calib_threshold(h, RS_PLAN_CALIB_BINS, amax, RS_PLAN_CALIB_ENTROPY, 0);
    /* the reference percentile: sort |x|, the smallest value with 99.9% of them at or below */
    for (int i = 0; i < N; i++) ab[i] = fabsf(x[i]);
    qsort(ab, N, sizeof *ab, cmp_f);
    float ref = ab[(int)ceil(0.999 * N) - 1], bin = amax / RS_PLAN_CALIB_BINS;
    printf("  outlier 40 in N(0,1) x %d: minmax %.3f, percentile(99.9) %.3f (sorted: %.3f), entropy %.3f\n", N, mm, pc,
           ref, en);
    printf("  quantization MSE: minmax %.3g, percentile %.3g, entropy %.3g\n", qmse(x, N, mm, 123), qmse(x, N, pc, 123),
           qmse(x, N, en, 123));
    RS_CHECK(mm == amax, "minmax threshold %g, not the largest |x| %g", mm, amax);
    RS_CHECK(fabsf(pc - ref) <= bin * 1.01f, "percentile threshold %g, the sorted values give %g (bin %g)", pc, ref, bin);
    RS_CHECK(en < amax / 4 && en > ab[(int)(0.99 * N)], "entropy threshold %g: not between the bulk's 99th percentile "
             "%g and a quarter of the outlier", en, ab[(int)(0.99 * N)]);
    RS_CHECK(qmse(x, N, en, 123) < qmse(x, N, mm, 123) && qmse(x, N, pc, 123) < qmse(x, N, mm, 123),
             "clipping the outlier should cost the other values less than min-max's coarse steps");
    /* no outlier: uniform on [-1, 1]; clipping would only lose */
    memset(h, 0, RS_PLAN_CALIB_BINS * sizeof *h);
    for (int i = 0; i < N; i++) x[i] = (float)(2 * rs_rng_uniform(&r) - 1);
    amax = 0;
    for (int i = 0; i < N; i++) amax = fmaxf(amax, fabsf(x[i]));
    rs_plan_calib_hist(x, N, amax, h, RS_PLAN_CALIB_BINS);
    pc = rs_plan_calib_threshold(h, RS_PLAN_CALIB_BINS, amax, RS_PLAN_CALIB_PERCENTILE, 99.99);
    en = rs_plan_calib_threshold(h, RS_PLAN_CALIB_BINS, amax, RS_PLAN_CALIB_ENTROPY, 0);
    printf("  uniform [-1, 1]: max %.4f, percentile(99.99) %.4f, entropy %.4f\n", amax, pc, en);
    RS_CHECK(pc >= 0.99f * amax && pc <= amax, "percentile on uniform data: %g of %g", pc, amax);
    RS_CHECK(en >= 0.9f * amax && en <= amax, "entropy on uniform data: %g of %g", en, amax);
    free(x);
    free(ab);
    free(h);
}

/* The largest difference from the fp32 engine over 64 ordinary inputs, and the first conv/linear's
 * input scale. */
static double plan_error(rs_model *m, const rs_dataset *cal, rs_plan_calib_method how, float *qscale)
{
    rs_err e = {0};
    rs_plan_opts o = rs_plan_opts_default();
    o.prec = RS_PLAN_INT8;
    o.int8_all = 1; /* the calibrated scales at work on every node, not only where int8 is faster */
    o.batch = 64;
    o.calib = cal;
    o.calib_method = how;
    o.calib_percentile = 99.9;
    rs_plan *p = NULL;
    RS_CHECK(rs_plan_compile(m, &o, &p, &e) == RS_OK, "%s: %s", rs_plan_calib_name(how), e.msg);
    if (!p) return INFINITY;
    *qscale = 0;
    for (int i = 0; i < p->nnodes && !*qscale; i++)
        if (p->nodes[i].kind == RS_PK_LINEAR || p->nodes[i].kind == RS_PK_CONV) *qscale = p->nodes[i].qscale;
    size_t per = (size_t)rs_shape_numel(rs_model_input_shape(m));
    float *x = malloc(64 * per * sizeof *x);
    rs_rng r;
    rs_rng_seed(&r, 3);
    for (size_t i = 0; i < 64 * per; i++) x[i] = (float)(2 * rs_rng_uniform(&r) - 1);
    const float *ref, *z;
    size_t nout = (size_t)64 * (size_t)rs_plan_rows(p) * (size_t)rs_plan_classes(p);
    float *keep = malloc(nout * sizeof *keep);
    double d = INFINITY;
    if (rs_model_forward(m, x, 64, &ref, &e) == RS_OK) {
        memcpy(keep, ref, nout * sizeof *keep);
        if (rs_plan_run(p, x, 64, &z, &e) == RS_OK) {
            d = 0;
            for (size_t i = 0; i < nout; i++) d = fmax(d, fabs((double)z[i] - keep[i]));
        }
    }
    free(keep);
    RS_CHECK(isfinite(d), "%s: %s", rs_plan_calib_name(how), e.msg);
    free(x);
    rs_plan_free(p);
    return d;
}

static void plans(const char *spec)
{
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 5, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    rs_model_set_training(m, false);
    const rs_shape *in = rs_model_input_shape(m);
    int n = 512;
    rs_dataset *cal = rs_dataset_new((uint32_t)n, (int)in->d[0], in->ndim > 1 ? (int)in->d[1] : 1,
                                     in->ndim > 2 ? (int)in->d[2] : 1, rs_model_classes(m));
    size_t per = rs_dataset_sample_numel(cal);
    rs_rng r;
    rs_rng_seed(&r, 11);
    for (size_t i = 0; i < (size_t)n * per; i++) cal->x[i] = (float)(2 * rs_rng_uniform(&r) - 1);
    cal->x[per * 17 + 3] = 100.0f; /* one value of one sample: a sensor glitch */
    float s_mm, s_pc, s_en;
    double d_mm = plan_error(m, cal, RS_PLAN_CALIB_MINMAX, &s_mm);
    double d_pc = plan_error(m, cal, RS_PLAN_CALIB_PERCENTILE, &s_pc);
    double d_en = plan_error(m, cal, RS_PLAN_CALIB_ENTROPY, &s_en);
    printf("  %s: input scale minmax %.2f, percentile %.2f, entropy %.2f; max error %.3g, %.3g, %.3g\n", spec, s_mm,
           s_pc, s_en, d_mm, d_pc, d_en);
    RS_CHECK(fabsf(s_mm - 1.27f) < 1e-4f, "minmax input scale %g, not 127/100", s_mm);
    RS_CHECK(s_pc > 4 * s_mm && s_en > 4 * s_mm, "percentile / entropy did not clip the outlier: %g, %g against %g", s_pc,
             s_en, s_mm);
    RS_CHECK(d_pc < d_mm && d_en < d_mm, "clipping plans not closer to fp32: %g, %g against min-max's %g", d_pc, d_en,
             d_mm);
    rs_dataset_free(cal);
    rs_model_free(m);
}

int main(void)
{
    thresholds();
    plans("mlp 20-16-12-5");
    plans("seq in=1x10x10 conv(6,3,pad=1) relu maxpool(2) flatten linear(12) relu linear(4)");
    return rs_test_finish("plan-calib");
}
