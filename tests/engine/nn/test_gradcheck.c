/* Finite-difference gradient check of every layer and of the loss, on odd shapes: batch 3, 5x7
 * images, padding 2, stride 2, non-square kernels.
 * Tolerance: central differences with eps = 1e-2 on float kernels; a gradient passes when
 * |analytic - numeric| <= 2e-3 + 1e-2 * |numeric|. Smooth layers are exact to O(eps^2) ~ 1e-4, so a
 * wrong formula (missing term, wrong index, wrong transpose) shows up as an error of O(1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/kernels.h"
#include "engine/core/rng.h"
#include "engine/nn/model.h"
#include "engine/nn/spec.h"
#include "gradcheck.h"
#include "rs_test.h"

#define EPS 1e-2
#define ATOL 2e-3
#define RTOL 1e-2

static void layer_case(const char *what, const char *spec, rs_shape in, int B, bool training)
{
    rs_layer_cfg cfg;
    rs_err err = {0};
    RS_CHECK(rs_layer_parse(spec, &cfg, NULL, &err) == RS_OK, "%s: %s", spec, err.msg);
    gc_result r = gc_check_layer(what, &cfg, &in, B, training, EPS, ATOL, RTOL, 1234);
    RS_CHECK(r.failed == 0 && r.checked > 0, "%s: %d of %d gradients differ from finite differences", what,
             r.failed, r.checked);
}

/* The loss: d(mean CE)/d(logits) against central differences of the kernel's own forward. */
static void loss_case(int B, int C)
{
    const rs_kernels *k = rs_kernels_for(rs_device_cpu());
    rs_kctx ctx;
    rs_kctx_init(&ctx, k, 0, NULL);
    float *z = calloc((size_t)B * C, 4), *p = calloc((size_t)B * C, 4), *l = calloc((size_t)B, 4),
          *d = calloc((size_t)B * C, 4);
    int32_t *y = calloc((size_t)B, 4);
    rs_rng r;
    rs_rng_seed(&r, 9);
    for (int i = 0; i < B * C; i++) z[i] = rs_rng_range(&r, -3, 3);
    for (int b = 0; b < B; b++) y[b] = (int32_t)rs_rng_below(&r, (uint64_t)C);
    k->softmax_xent_fwd(&ctx, z, y, p, l, B, C);
    k->softmax_xent_bwd(&ctx, p, y, d, B, C, 1.0f / B);
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < B * C; i++) {
        double lp = 0, lm = 0;
        float keep = z[i];
        z[i] = keep + (float)EPS;
        k->softmax_xent_fwd(&ctx, z, y, p, l, B, C);
        for (int b = 0; b < B; b++) lp += l[b];
        z[i] = keep - (float)EPS;
        k->softmax_xent_fwd(&ctx, z, y, p, l, B, C);
        for (int b = 0; b < B; b++) lm += l[b];
        z[i] = keep;
        double num = (lp - lm) / (2 * EPS) / B;
        double diff = fabs(num - d[i]);
        worst = diff > worst ? diff : worst;
        if (diff > ATOL + RTOL * fabs(num)) bad++;
    }
    /* And the value itself against a double-precision log-sum-exp. */
    k->softmax_xent_fwd(&ctx, z, y, p, l, B, C);
    for (int b = 0; b < B; b++) {
        double mx = -1e30, s = 0;
        for (int j = 0; j < C; j++) mx = fmax(mx, z[b * C + j]);
        for (int j = 0; j < C; j++) s += exp(z[b * C + j] - mx);
        RS_CHECK_CLOSE(l[b], log(s) + mx - z[b * C + y[b]], 1e-5, 1e-5, "cross-entropy value");
    }
    printf("%-34s %4d values, max abs err %.2e\n", "softmax cross-entropy", B * C, worst);
    RS_CHECK(bad == 0, "cross-entropy: %d gradients differ", bad);
    free(z);
    free(p);
    free(l);
    free(d);
    free(y);
}

/* Whole model: forward, loss and backward through the model's buffers against finite differences
 * of the model's own loss, on a spec that chains every kind of layer. */
static void model_case(const char *spec, int B)
{
    rs_err err = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "gc", rs_device_cpu(), NULL, 5, &m, NULL, &err) == RS_OK, "%s", err.msg);
    if (!m) return;
    rs_model_set_training(m, false); /* dropout off: the mask would change between evaluations */
    const rs_shape *in = rs_model_input_shape(m);
    size_t nin = (size_t)B * (size_t)rs_shape_numel(in);
    float *x = malloc(nin * sizeof *x);
    int32_t *y = malloc((size_t)B * sizeof *y);
    rs_rng r;
    rs_rng_seed(&r, 77);
    for (size_t i = 0; i < nin; i++) x[i] = rs_rng_range(&r, -1, 1);
    for (int b = 0; b < B; b++) y[b] = (int32_t)rs_rng_below(&r, (uint64_t)rs_model_classes(m));
    float loss;
    RS_CHECK(rs_model_forward(m, x, B, NULL, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(rs_model_loss(m, y, B, &loss, &err) == RS_OK, "%s", err.msg);
    rs_model_zero_grad(m);
    rs_model_backward(m, x, y, B, 1.0f);
    float *p = rs_model_params(m), *g = rs_model_grads(m);
    size_t n = rs_model_numel(m);
    float *gcopy = malloc(n * sizeof *gcopy);
    memcpy(gcopy, g, n * sizeof *gcopy);
    int bad = 0, checked = 0;
    double worst = 0;
    for (int t = 0; t < rs_model_tensor_count(m); t++) {
        const rs_param_info *pi = rs_model_tensor(m, t);
        size_t stride = pi->numel / 12 + 1;
        for (size_t i = 0; i < pi->numel; i += stride) {
            size_t j = pi->offset + i;
            float keep = p[j], lp, lm;
            p[j] = keep + 2e-3f;
            rs_model_forward(m, x, B, NULL, &err);
            rs_model_loss(m, y, B, &lp, &err);
            p[j] = keep - 2e-3f;
            rs_model_forward(m, x, B, NULL, &err);
            rs_model_loss(m, y, B, &lm, &err);
            p[j] = keep;
            double num = ((double)lp - lm) / 4e-3;
            double diff = fabs(num - gcopy[j]);
            worst = diff > worst ? diff : worst;
            checked++;
            if (diff > ATOL + RTOL * fabs(num)) {
                if (bad < 5) fprintf(stderr, "  %s[%zu]: analytic %.6g numeric %.6g\n", pi->name, i, gcopy[j], num);
                bad++;
            }
        }
    }
    printf("model %-28.28s %4d values, max abs err %.2e\n", spec, checked, worst);
    RS_CHECK(bad == 0, "model %s: %d of %d gradients differ", spec, bad, checked);
    free(gcopy);
    free(x);
    free(y);
    rs_model_free(m);
}

int main(void)
{
    rs_shape img = {3, {2, 5, 7}}, img3 = {3, {3, 6, 5}}, flat = {1, {11}};
    layer_case("linear", "linear(6)", flat, 3, true);
    layer_case("linear no bias", "linear(4,bias=0)", flat, 3, true);
    layer_case("conv 3x3 pad 1", "conv(4,3,pad=1)", img, 3, true);
    layer_case("conv 3x3 stride 2 pad 2", "conv(3,3,stride=2,pad=2)", img, 3, true);
    layer_case("conv 2x3 stride 2x1", "conv(3,2x3,stride=2x1,pad=1x0)", img3, 3, true);
    layer_case("conv 1x1 (no im2col)", "conv(5,1)", img, 3, true);
    layer_case("conv 5x5 no bias", "conv(2,5,pad=2,bias=0)", img, 3, true);
    layer_case("maxpool 2", "maxpool(2)", img, 3, true);
    layer_case("maxpool 3 stride 2 pad 1", "maxpool(3,stride=2,pad=1)", img, 3, true);
    layer_case("avgpool 2", "avgpool(2)", img, 3, true);
    layer_case("avgpool 3 stride 2 pad 1", "avgpool(3,stride=2,pad=1)", img3, 3, true);
    layer_case("relu", "relu", img, 3, true);
    layer_case("gelu", "gelu", img, 3, true);
    layer_case("tanh", "tanh", flat, 3, true);
    layer_case("silu", "silu", img, 3, true);
    layer_case("flatten", "flatten", img, 3, true);
    layer_case("dropout (train)", "dropout(0.3)", img, 3, true);
    layer_case("dropout (eval)", "dropout(0.3)", img, 3, false);
    layer_case("layernorm (features)", "layernorm", flat, 3, true);
    layer_case("layernorm (rows of images)", "layernorm", img, 3, true);
    /* Transformer layers on a sequence (T, C) = (5, 6) and (5, 18) = 3 x C for attention. The embedding
     * reads tokens, so its gradients are checked through whole models in test_graph.c. */
    rs_shape seq = {2, {5, 6}}, qkv = {2, {5, 18}};
    layer_case("linear over a sequence", "linear(4)", seq, 3, true);
    layer_case("gelu(tanh)", "gelu(tanh)", seq, 3, true);
    layer_case("layernorm (tokens)", "layernorm", seq, 3, true);
    layer_case("attn 2 heads", "attn(2)", qkv, 3, true);
    layer_case("attn 3 heads", "attn(3)", qkv, 2, true);
    layer_case("attn 1 head", "attn(1)", qkv, 2, true);
    loss_case(3, 7);
    loss_case(5, 10);
    model_case("seq in=2x5x7 conv(4,3,pad=2,stride=2) gelu maxpool(2) [ conv(3,1) tanh ] flatten "
               "layernorm linear(6) relu dropout(0.2) linear(5)",
               3);
    model_case("seq in=1x7x5 [ conv(3,3,pad=1) relu avgpool(2,stride=1) ] flatten linear(4)", 3);
    model_case("mlp 11-9-4 act=tanh", 5);
    return rs_test_finish("gradcheck");
}
