/* ringside -> ONNX -> ringside, with no Python: models built from specs are exported (onnx/export.h)
 * at several opsets, imported back, and run; the inference model (rs_onnx_to_inference_model) and the
 * trainable model rebuilt from it (rs_onnx_to_model) must both give the original model's logits. A
 * graph that is not a plain layer sequence (export with a final Softmax) is refused by
 * rs_onnx_to_model with a reason, and its inference model runs but refuses to train, naming the node;
 * the summary names every node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/rng.h"
#include "engine/nn/spec.h"
#include "engine/train/dp.h"
#include "engine/train/train.h"
#include "onnx/export.h"
#include "onnx/import.h"
#include "rs_test.h"

static double maxdiff(const float *a, const float *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

static void roundtrip(const char *spec, int opset, const char *dir)
{
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 3, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    rs_model_set_training(m, false);
    char path[512];
    snprintf(path, sizeof path, "%s/rt.onnx", dir);
    rs_status st = rs_onnx_export(m, path, opset, &e);
    RS_CHECK(st == RS_OK, "%s opset %d: export: %s", spec, opset, e.msg);
    rs_onnx_graph *g = NULL;
    if (!st) {
        st = rs_onnx_load(path, &g, &e);
        RS_CHECK(st == RS_OK, "%s opset %d: import: %s", spec, opset, e.msg);
    }
    if (!g) {
        rs_model_free(m);
        return;
    }
    const int B = 5;
    size_t in = rs_onnx_graph_input_numel(g), out = rs_onnx_graph_output_numel(g);
    RS_CHECK(in == (size_t)rs_shape_numel(rs_model_input_shape(m)), "%s: input numel %zu", spec, in);
    RS_CHECK(out == (size_t)rs_model_classes(m), "%s: output numel %zu, classes %d", spec, out, rs_model_classes(m));
    float *x = malloc(sizeof(float) * in * B), *y = malloc(sizeof(float) * out * B);
    rs_rng rng;
    rs_rng_seed(&rng, 11);
    for (size_t i = 0; i < in * B; i++) x[i] = (float)((double)rs_rng_u64(&rng) / 18446744073709551616.0 * 2.0 - 1.0);
    const float *want = NULL;
    RS_CHECK(rs_model_forward(m, x, B, &want, &e) == RS_OK, "forward: %s", e.msg);
    float *ref = malloc(sizeof(float) * out * B);
    memcpy(ref, want, sizeof(float) * out * B);
    rs_model *im = NULL;
    const float *got = NULL;
    RS_CHECK(rs_onnx_to_inference_model(g, "inf", &im, &e) == RS_OK, "%s: inference model: %s", spec, e.msg);
    if (im) RS_CHECK(rs_model_forward(im, x, B, &got, &e) == RS_OK, "run: %s", e.msg);
    if (got) memcpy(y, got, sizeof(float) * out * B);
    else memset(y, 0, sizeof(float) * out * B);
    rs_model_free(im);
    double d = maxdiff(y, ref, out * B);
    RS_CHECK(d <= 1e-5, "%s opset %d: graph vs model max |diff| %.3g", spec, opset, d);
    rs_model *m2 = NULL;
    st = rs_onnx_to_model(g, "back", &m2, &e);
    RS_CHECK(st == RS_OK, "%s opset %d: to_model: %s", spec, opset, e.msg);
    double d2 = -1;
    if (m2) {
        const float *l2 = NULL;
        RS_CHECK(rs_model_forward(m2, x, B, &l2, &e) == RS_OK, "forward back: %s", e.msg);
        d2 = l2 ? maxdiff(l2, ref, out * B) : 1e9;
        RS_CHECK(d2 <= 1e-5, "%s opset %d: rebuilt model vs original max |diff| %.3g", spec, opset, d2);
        RS_CHECK(rs_model_param_count(m2) == rs_model_param_count(m), "%s: parameter count %zu vs %zu", spec,
                 rs_model_param_count(m2), rs_model_param_count(m));
    }
    printf("  opset %d %-70s graph %.1e model %.1e (%d nodes)\n", opset, spec, d, d2, g->nnodes);
    char *sum = rs_onnx_graph_summary(g);
    RS_CHECK(sum && strstr(sum, g->nodes[g->nnodes - 1].name), "summary names the last node");
    free(sum);
    rs_model_free(m2);
    free(x), free(y), free(ref);
    rs_onnx_graph_free(g);
    rs_model_free(m);
}

/* An inference-only model: no gradient memory, backward does nothing, and every way to train it is
 * refused with a message naming the node without a backward. */
static void refuses_training(rs_model *im)
{
    rs_err e = {0};
    RS_CHECK(rs_model_inference_only(im), "the softmax head's model is inference-only");
    RS_CHECK(rs_model_grads(im) == NULL, "no gradient buffer for an inference-only model");
    RS_CHECK(rs_model_check_trainable(im, &e) == RS_ERR_UNSUPPORTED && strstr(e.msg, "inference only") &&
                 strstr(e.msg, "Softmax"),
             "check_trainable: %s", e.msg);
    printf("  inference model refuses training: %s\n", e.msg);
    float x[6] = {0}, before = rs_model_params(im)[0];
    int32_t y[1] = {0};
    const float *out = NULL;
    RS_CHECK(rs_model_forward(im, x, 1, &out, &e) == RS_OK, "%s", e.msg);
    rs_model_zero_grad(im);
    rs_model_backward(im, x, y, 1, 1.0f); /* must do nothing (and not crash) */
    RS_CHECK(rs_model_params(im)[0] == before, "backward left the weights alone");
    rs_data_pair d = {.train = rs_dataset_new(8, 1, 1, 6, 3)};
    rs_train_cfg cfg = rs_train_defaults();
    cfg.batch = 4;
    rs_train_result r;
    e = (rs_err){0};
    RS_CHECK(d.train && rs_train(im, &d, &cfg, NULL, &r, &e) == RS_ERR_UNSUPPORTED && strstr(e.msg, "inference only"),
             "rs_train: %s", e.msg);
    rs_dp *dp = NULL;
    e = (rs_err){0};
    RS_CHECK(rs_dp_new(im, 2, NULL, NULL, &dp, &e) == RS_ERR_UNSUPPORTED && !dp && strstr(e.msg, "inference only"),
             "rs_dp_new: %s", e.msg);
    rs_data_pair_clear(&d);
}

static void softmax_head(const char *dir)
{
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse("mlp 6-5-3", "m", rs_device_cpu(), NULL, 1, &m, NULL, &e) == RS_OK, "%s", e.msg);
    if (!m) return;
    char path[512];
    snprintf(path, sizeof path, "%s/sm.onnx", dir);
    rs_onnx_export_opts o = {.opset = 17, .softmax = true};
    rs_onnx_graph *g = NULL;
    rs_status st = rs_onnx_export_ex(m, path, &o, &e);
    if (!st) st = rs_onnx_load(path, &g, &e);
    RS_CHECK(st == RS_OK, "softmax head: %s", e.msg);
    if (!st) {
        rs_model *m2 = NULL;
        st = rs_onnx_to_model(g, "x", &m2, &e);
        RS_CHECK(st == RS_ERR_UNSUPPORTED && m2 == NULL && strstr(e.msg, "Softmax"), "softmax head: %s", e.msg);
        printf("  softmax head refused: %s\n", e.msg);
        float x[12] = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 1, 2, 3, 4, 5, 6};
        const float *y = NULL;
        rs_model *im = NULL;
        RS_CHECK(rs_onnx_to_inference_model(g, "sm", &im, &e) == RS_OK, "%s", e.msg);
        if (im) RS_CHECK(rs_model_forward(im, x, 2, &y, &e) == RS_OK, "%s", e.msg);
        if (y) {
            const float *want = NULL;
            RS_CHECK(rs_model_forward(m, x, 2, &want, &e) == RS_OK, "%s", e.msg);
            for (int r = 0; r < 2 && want; r++) {
                double mx = want[3 * r], se = 0;
                for (int j = 1; j < 3; j++) mx = want[3 * r + j] > mx ? want[3 * r + j] : mx;
                for (int j = 0; j < 3; j++) se += exp(want[3 * r + j] - mx);
                for (int j = 0; j < 3; j++)
                    RS_CHECK_CLOSE(y[3 * r + j], exp(want[3 * r + j] - mx) / se, 1e-6, 0, "softmax of the logits");
            }
        }
        if (im) refuses_training(im);
        rs_model_free(im);
    }
    rs_onnx_graph_free(g);
    rs_model_free(m);
}

int main(void)
{
    char dir[] = "/tmp/rs-onnx-rt-XXXXXX";
    if (!mkdtemp(dir)) RS_SKIP("no temporary folder");
    static const char *const specs[] = {
        "mlp 20-16-4 act=relu",
        "mlp 12-10-10-3 act=gelu dropout=0.2",
        "seq in=16 linear(12) layernorm tanh linear(4)",
        "seq in=1x12x12 conv(4,3,pad=1) relu maxpool(2) conv(6,3) tanh avgpool(2) flatten linear(5)",
        "seq in=3x9x9 conv(5,3,stride=2,pad=1) gelu maxpool(3,stride=1,pad=1) flatten linear(7)",
    };
    static const int opsets[] = {13, 17, 18};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
        for (size_t j = 0; j < sizeof opsets / sizeof *opsets; j++) roundtrip(specs[i], opsets[j], dir);
    softmax_head(dir);
    char path[600];
    snprintf(path, sizeof path, "%s/rt.onnx", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/sm.onnx", dir);
    unlink(path);
    rmdir(dir);
    return rs_test_finish("onnx-roundtrip");
}
