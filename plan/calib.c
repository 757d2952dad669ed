/* int8 calibration: the clipping threshold of each conv / inner product input, by one of TensorRT's
 * three methods. An fp32 plan of the same graph (the passes are deterministic, so its nodes are the
 * int8 plan's, in the same order) runs the calibration samples: min-max keeps the largest |x|;
 * percentile and entropy run the samples a second time to histogram |x| over [0, that max] in
 * RS_PLAN_CALIB_BINS bins, then pick a threshold from the histogram. Values above the threshold
 * saturate at +-127: an outlier costs a few clipped values instead of the resolution of all others. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

const char *const rs_plan_calib_names[] = {[RS_PLAN_CALIB_MINMAX] = "minmax", [RS_PLAN_CALIB_PERCENTILE] = "percentile",
                                           [RS_PLAN_CALIB_ENTROPY] = "entropy", NULL};

const char *rs_plan_calib_name(rs_plan_calib_method m)
{
    return (unsigned)m < sizeof rs_plan_calib_names / sizeof *rs_plan_calib_names - 1 ? rs_plan_calib_names[m]
                                                                                        : "minmax";
}

void rs_plan_calib_hist(const float *x, size_t n, float amax, uint64_t *hist, int bins)
{
    if (!(amax > 0)) return;
    double per = bins / (double)amax;
    for (size_t i = 0; i < n; i++) {
        double a = fabs((double)x[i]) * per;
        int b = a < bins ? (int)a : bins - 1; /* NaN compares false: it lands in the last bin */
        hist[b]++;
    }
}

/* The smallest edge below which `pct` percent of the counts lie. */
static float percentile_threshold(const uint64_t *hist, int bins, float amax, double pct)
{
    uint64_t total = 0;
    for (int i = 0; i < bins; i++) total += hist[i];
    if (!total) return amax;
    double want = pct / 100.0 * (double)total, seen = 0;
    for (int i = 0; i < bins; i++) {
        seen += (double)hist[i];
        if (seen >= want) return amax * (float)(i + 1) / (float)bins;
    }
    return amax;
}

/* TensorRT's entropy calibration (Migacz, "8-bit Inference with TensorRT", GTC 2017): for each
 * candidate threshold of i bins (i from 128 up), P is the histogram's first i bins with everything
 * beyond folded into the last; Q is those i bins merged into 128 levels and spread back over the
 * bins that were non-empty; the threshold is the i with the least KL(P || Q). A bin P has but Q
 * lacks (the folded tail landing on an empty bin) costs as if Q held 1e-4 of a count there. As
 * NVIDIA's pytorch-quantization does, the first bin counts as the second: a relu's exact zeros
 * would otherwise outweigh everything else and favour the coarsest candidates. */
static float entropy_threshold(const uint64_t *hist, int bins, float amax)
{
    enum { LEVELS = 128 };
    if (bins <= LEVELS) return amax;
    double *p = malloc((size_t)bins * sizeof *p), *q = malloc((size_t)bins * sizeof *q); /* owned here */
    if (!p || !q) {
        free(p);
        free(q);
        return amax;
    }
    uint64_t *h = malloc((size_t)bins * sizeof *h); /* owned here */
    if (!h) {
        free(p);
        free(q);
        return amax;
    }
    memcpy(h, hist, (size_t)bins * sizeof *h);
    h[0] = h[1];
    hist = h;
    uint64_t tail = 0;
    for (int i = 0; i < bins; i++) tail += hist[i];
    for (int i = 0; i < LEVELS; i++) tail -= hist[i];
    double best = INFINITY;
    int best_i = bins;
    for (int i = LEVELS; i <= bins; i++) {
        double ps = 0, qs = 0;
        for (int j = 0; j < i; j++) p[j] = (double)hist[j];
        p[i - 1] += (double)tail; /* the clipped counts land on the threshold */
        if (i < bins) tail -= hist[i];
        for (int l = 0; l < LEVELS; l++) {
            int a = (int)((int64_t)l * i / LEVELS), b = (int)((int64_t)(l + 1) * i / LEVELS);
            double sum = 0;
            int nz = 0;
            for (int j = a; j < b; j++) {
                sum += (double)hist[j];
                nz += hist[j] != 0;
            }
            for (int j = a; j < b; j++) q[j] = hist[j] && nz ? sum / nz : 0;
        }
        for (int j = 0; j < i; j++) {
            ps += p[j];
            qs += q[j];
        }
        if (ps <= 0 || qs <= 0) continue;
        double kl = 0;
        for (int j = 0; j < i; j++) {
            if (p[j] <= 0) continue;
            double pj = p[j] / ps, qj = (q[j] > 0 ? q[j] : 1e-4) / qs;
            kl += pj * log(pj / qj);
        }
        if (kl < best) {
            best = kl;
            best_i = i;
        }
    }
    free(p);
    free(q);
    free(h);
    return amax * (float)best_i / (float)bins;
}

float rs_plan_calib_threshold(const uint64_t *hist, int bins, float amax, rs_plan_calib_method m, double pct)
{
    if (!(amax > 0)) return amax;
    switch (m) {
    case RS_PLAN_CALIB_PERCENTILE: return percentile_threshold(hist, bins, amax, pct > 0 && pct <= 100 ? pct : 99.99);
    case RS_PLAN_CALIB_ENTROPY: return entropy_threshold(hist, bins, amax);
    default: return amax;
    }
}

void rs_plan_calib_observe(rs_pcalib *c, int node, const float *x, size_t n)
{
    if (c->pass == 0) {
        float mx = c->amax[node];
        for (size_t j = 0; j < n; j++) mx = fabsf(x[j]) > mx ? fabsf(x[j]) : mx;
        c->amax[node] = mx;
    } else {
        rs_plan_calib_hist(x, n, c->amax[node], c->hist + (size_t)node * RS_PLAN_CALIB_BINS, RS_PLAN_CALIB_BINS);
    }
}

/* Runs the first n samples of d through ref, one batch at a time. */
static rs_status run_samples(rs_plan *ref, const rs_dataset *d, uint32_t n, float *x, size_t per, rs_err *err)
{
    for (uint32_t at = 0; at < n; at += (uint32_t)ref->batch) {
        int B = (int)(n - at < (uint32_t)ref->batch ? n - at : (uint32_t)ref->batch);
        for (int i = 0; i < B; i++) rs_dataset_get(d, at + (uint32_t)i, x + (size_t)i * per, NULL);
        const float *z;
        rs_status st = rs_plan_run(ref, x, B, &z, err);
        if (st) return st;
    }
    return RS_OK;
}

rs_status rs_plan_calibrate(rs_model *m, const rs_plan_opts *o, float **thr, rs_err *err)
{
    *thr = NULL;
    rs_plan_opts f = *o;
    f.prec = RS_PLAN_FP32;
    f.conv_alg = RS_PLAN_CONV_DIRECT; /* the inputs are what calibration wants, not the speed */
    f.calib = NULL;
    rs_plan *ref = NULL;
    rs_status st = rs_plan_compile(m, &f, &ref, err);
    if (st) return st;
    const rs_dataset *d = o->calib;
    size_t per = rs_dataset_sample_numel(d);
    uint32_t n = o->calib_samples ? o->calib_samples : 512;
    if (n > d->n) n = d->n;
    rs_pcalib c = {.pass = 0};
    size_t nn = (size_t)ref->nnodes + 1;
    c.amax = calloc(nn, sizeof *c.amax); /* owned here, then the caller's as the thresholds */
    if (o->calib_method != RS_PLAN_CALIB_MINMAX) c.hist = calloc(nn * RS_PLAN_CALIB_BINS, sizeof *c.hist);
    float *x = malloc((size_t)ref->batch * per * sizeof *x);
    if ((int64_t)per != rs_shape_numel(&ref->in) || d->tokens != ref->tokens || n == 0)
        st = rs_err_set(err, RS_ERR_SHAPE, "compile: calibration data %s (%zu values a sample, %u samples) does not fit "
                                           "the model's input of %lld", d->name, per, d->n, (long long)rs_shape_numel(&ref->in));
    else if (!c.amax || !x || (o->calib_method != RS_PLAN_CALIB_MINMAX && !c.hist))
        st = rs_err_set(err, RS_ERR_NOMEM, "compile: out of memory");
    ref->calib = &c;
    if (!st) st = run_samples(ref, d, n, x, per, err);
    if (!st && c.hist) {
        c.pass = 1;
        st = run_samples(ref, d, n, x, per, err);
        for (int i = 0; !st && i < ref->nnodes; i++)
            c.amax[i] = rs_plan_calib_threshold(c.hist + (size_t)i * RS_PLAN_CALIB_BINS, RS_PLAN_CALIB_BINS, c.amax[i],
                                                o->calib_method, o->calib_percentile);
    }
    free(x);
    free(c.hist);
    rs_plan_free(ref);
    if (st) free(c.amax);
    else *thr = c.amax;
    return st;
}
