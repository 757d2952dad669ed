/* The C half of the PyTorch-layout test (ckpt_torch_layout.py drives it): trains an MLP and a small
 * CNN a few steps, saves each with rs_ckpt_save_model, and writes the logits the model gives in eval
 * mode on a few fixed inputs beside it, so the script can recompute them from the checkpoint alone.
 *
 * Usage: test-ckpt-python DIR
 *   DIR/mlp.safetensors     mlp 784-64-32-10 after 20 Adam steps on digits
 *   DIR/mlp.io.safetensors  "x" (5, 784) and "logits" (5, 10)
 *   DIR/cnn.safetensors     seq in=1x12x12 conv(4,3,pad=1) relu maxpool(2) conv(6,3) layernorm flatten
 *                           linear(10) after 20 Adam steps on seeded noise
 *   DIR/cnn.io.safetensors  "x" (5, 1, 12, 12) and "logits" (5, 10) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ckpt/checkpoint.h"
#include "engine/ckpt/safetensors.h"
#include "engine/data/gen/digits.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

#define N 5

static void save(const char *dir, const char *name, rs_model *m, const rs_dataset *d)
{
    char path[512];
    rs_err e = {0};
    rs_train_cfg c = rs_train_defaults();
    c.batch = 16;
    c.max_steps = 20;
    c.eval = false;
    c.threads = 1;
    rs_data_pair p = {.train = (rs_dataset *)d};
    RS_CHECK(rs_train(m, &p, &c, NULL, NULL, &e) == RS_OK, "%s: train: %s", name, e.msg);
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    RS_CHECK(rs_ckpt_save_model(path, m, &e) == RS_OK, "%s: %s", name, e.msg);

    /* Inputs: the first N-1 samples, then a ramp over the whole input. */
    size_t per = rs_dataset_sample_numel(d);
    float *x = malloc(N * per * sizeof *x);
    if (!x) return;
    memcpy(x, d->x, (N - 1) * per * sizeof *x);
    for (size_t i = 0; i < per; i++) x[(N - 1) * per + i] = (float)i / (float)per;
    const float *z = NULL;
    rs_model_set_training(m, false);
    RS_CHECK(rs_model_forward(m, x, N, &z, &e) == RS_OK, "%s: forward: %s", name, e.msg);
    if (z) {
        rs_st_tensor t[2] = {
            {.name = "x", .dtype = RS_F32, .shape = {2, {N, (int64_t)per}}, .data = x},
            {.name = "logits", .dtype = RS_F32, .shape = {2, {N, rs_model_classes(m)}}, .data = z},
        };
        const rs_shape *in = rs_model_input_shape(m); /* (784) or (1, 12, 12): x is (N, ...that) */
        t[0].shape.ndim = in->ndim + 1;
        for (int i = 0; i < in->ndim; i++) t[0].shape.d[i + 1] = in->d[i];
        char *spec = rs_model_spec(m);
        const char *meta[] = {"model", spec ? spec : ""};
        snprintf(path, sizeof path, "%s/%s.io.safetensors", dir, name);
        RS_CHECK(rs_st_write(path, t, 2, meta, 1, &e) == RS_OK, "%s: %s", name, e.msg);
        printf("%s: %s, logits[0][0..2] = %.6f %.6f %.6f\n", name, spec ? spec : "?", (double)z[0], (double)z[1],
               (double)z[2]);
        free(spec);
    }
    free(x);
}

static rs_model *build(const char *spec)
{
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 9, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    return m;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (run by ckpt_torch_layout.py)\n", argv[0]);
        return 2;
    }
    rs_err e = {0};
    rs_data_pair digits = {0};
    RS_CHECK(rs_data_digits_pair(256, 16, 4, &digits, &e) == RS_OK, "digits: %s", e.msg);
    rs_model *mlp = build("mlp 784-64-32-10");
    if (mlp && digits.train) save(argv[1], "mlp", mlp, digits.train);
    rs_model_free(mlp);
    rs_data_pair_clear(&digits);

    /* Seeded noise with labels i % 10: enough for a few steps to move every weight, LayerNorm's too. */
    rs_dataset *noise = rs_dataset_new(64, 1, 12, 12, 10);
    RS_CHECK(noise != NULL, "dataset");
    if (noise) {
        uint64_t s = 12345;
        for (size_t i = 0; i < (size_t)64 * 144; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            noise->x[i] = (float)(s >> 40) / (float)(1 << 24);
        }
        for (int i = 0; i < 64; i++) noise->y[i] = i % 10;
        rs_model *cnn = build("seq in=1x12x12 conv(4,3,pad=1) relu maxpool(2) conv(6,3) layernorm flatten linear(10)");
        if (cnn) save(argv[1], "cnn", cnn, noise);
        rs_model_free(cnn);
    }
    rs_dataset_free(noise);
    return rs_test_finish("ckpt-python (C half)");
}
