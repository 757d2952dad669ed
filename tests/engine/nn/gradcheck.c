/* Finite-difference gradient checking of a single layer (see gradcheck.h). */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/kernels.h"
#include "engine/core/rng.h"

typedef struct gc_layer {
    rs_layer l;
    rs_exec x;
    float *params, *grads, *in, *out, *din, *r;
    size_t np, nin, nout;
    int B;
} gc_layer;

static double loss_of(gc_layer *g)
{
    g->l.ops->forward(&g->l, &g->x, g->in, g->out, g->B);
    double s = 0.0;
    for (size_t i = 0; i < g->nout; i++) s += (double)g->out[i] * g->r[i];
    return s;
}

static void check_one(const char *what, const char *tag, size_t idx, double analytic, double numeric,
                      double atol, double rtol, gc_result *res)
{
    double d = fabs(analytic - numeric);
    double rel = d / (fabs(numeric) > 1e-6 ? fabs(numeric) : 1e-6);
    res->checked++;
    if (d > res->max_abs_err) res->max_abs_err = d;
    if (d > atol && rel > res->max_rel_err) res->max_rel_err = rel;
    if (d > atol + rtol * fabs(numeric)) {
        if (res->failed < 5)
            fprintf(stderr, "  %s %s[%zu]: analytic %.6g numeric %.6g (diff %.3g)\n", what, tag, idx, analytic,
                    numeric, d);
        res->failed++;
    }
}

/* Central differences of the loss in each of up to 80 of vals[0..n), against analytic[]. */
static void check_values(gc_layer *g, const char *what, const char *tag, float *vals, const float *analytic,
                         size_t n, double eps, double atol, double rtol, gc_result *res)
{
    size_t step = n / 80 + 1;
    for (size_t i = 0; i < n; i += step) {
        float keep = vals[i];
        vals[i] = keep + (float)eps;
        double lp = loss_of(g);
        vals[i] = keep - (float)eps;
        double lm = loss_of(g);
        vals[i] = keep;
        check_one(what, tag, i, analytic[i], (lp - lm) / (2 * eps), atol, rtol, res);
    }
}

gc_result gc_check_layer(const char *what, const rs_layer_cfg *cfg, const rs_shape *in, int B, bool training,
                         double eps, double atol, double rtol, uint64_t seed)
{
    gc_result res = {0};
    gc_layer g = {0};
    rs_err err = {0};
    g.l.ops = rs_layer_ops_for(cfg->kind);
    g.l.cfg = *cfg;
    snprintf(g.l.name, sizeof g.l.name, "0");
    if (g.l.ops->setup(&g.l, in, &err)) {
        fprintf(stderr, "%s: setup failed: %s\n", what, err.msg);
        res.failed = 1;
        return res;
    }
    for (int j = 0; j < g.l.np; j++) {
        g.l.p[j].offset = g.np;
        g.np += g.l.p[j].numel;
    }
    g.B = B;
    g.nin = (size_t)B * (size_t)rs_shape_numel(in);
    g.nout = (size_t)B * (size_t)rs_shape_numel(&g.l.out);
    const rs_kernels *k = rs_kernels_for(rs_device_cpu());
    rs_kctx ctx;
    rs_kctx_init(&ctx, k, 0, NULL);
    size_t ws = g.l.ops->workspace_bytes ? g.l.ops->workspace_bytes(&g.l, &ctx, B) : 0;
    size_t sv = g.l.ops->saved_bytes ? g.l.ops->saved_bytes(&g.l, B) : 0;
    g.params = calloc(g.np + 1, sizeof(float));
    g.grads = calloc(g.np + 1, sizeof(float));
    g.in = calloc(g.nin, sizeof(float));
    g.din = calloc(g.nin, sizeof(float));
    g.out = calloc(g.nout, sizeof(float));
    g.r = calloc(g.nout, sizeof(float));
    void *saved = calloc(sv + 64, 1);
    float *wsbuf = calloc(ws / sizeof(float) + 16, sizeof(float));
    rs_rng rng;
    rs_rng_seed(&rng, seed);
    if (g.l.ops->init) g.l.ops->init(&g.l, g.params, &rng);
    /* LayerNorm starts at gamma=1, beta=0; perturb so their gradients are exercised generally. */
    for (size_t i = 0; i < g.np; i++) g.params[i] += rs_rng_range(&rng, -0.3f, 0.3f);
    if (cfg->kind == RS_LAYER_MAXPOOL2D) {
        /* A shuffled grid spaced 5*eps apart: a perturbation never changes which input wins a window. */
        uint32_t *perm = malloc(g.nin * sizeof *perm);
        for (size_t i = 0; i < g.nin; i++) perm[i] = (uint32_t)i;
        rs_rng_shuffle_u32(&rng, perm, g.nin);
        for (size_t i = 0; i < g.nin; i++) g.in[i] = ((float)perm[i] - (float)g.nin / 2) * (float)(5 * eps);
        free(perm);
    } else {
        for (size_t i = 0; i < g.nin; i++) {
            float v = rs_rng_range(&rng, -1.0f, 1.0f);
            /* Away from ReLU's kink at 0 by more than eps. */
            if (fabsf(v) < 0.1f) v = v < 0 ? v - 0.1f : v + 0.1f;
            g.in[i] = v;
        }
    }
    for (size_t i = 0; i < g.nout; i++) g.r[i] = rs_rng_range(&rng, -1.0f, 1.0f);
    g.x = (rs_exec){.k = k, .ctx = &ctx, .params = g.params, .grads = g.grads, .ws = wsbuf, .ws_bytes = ws,
                    .saved = saved, .training = training, .dropout_seed = seed * 7 + 1};

    loss_of(&g);
    g.l.ops->backward(&g.l, &g.x, g.in, g.out, g.r, g.din, B);

    /* Input and parameter gradients, each at up to 80 positions spread over the tensor. */
    check_values(&g, what, "input", g.in, g.din, g.nin, eps, atol, rtol, &res);
    check_values(&g, what, "param", g.params, g.grads, g.np, eps, atol, rtol, &res);
    rs_err kerr;
    if (rs_kctx_check(&ctx, &kerr)) { /* a kernel refused its arguments: the layer called it wrongly */
        fprintf(stderr, "%s: kernel failed: %s\n", what, kerr.msg);
        res.failed++;
    }
    printf("%-34s %4d values, max abs err %.2e%s\n", what, res.checked, res.max_abs_err,
           res.failed ? "  FAILED" : "");
    free(g.params);
    free(g.grads);
    free(g.in);
    free(g.din);
    free(g.out);
    free(g.r);
    free(saved);
    free(wsbuf);
    return res;
}
