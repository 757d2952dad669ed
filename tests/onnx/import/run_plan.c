/* Compiles imported ONNX files into plans and runs them against ONNX Runtime's outputs: for each NAME
 * after the folder, DIR/NAME.onnx goes through rs_plan_model_from_onnx and rs_plan_compile (batch 7),
 * and the plan's outputs at batches 1 and 7 on DIR/NAME.bB.in.f32 (floats, or int32 token ids) are
 * compared with DIR/NAME.bB.out.f32, relative to max(1, max |ORT|):
 *   - fp32 within 1e-4; the fp32 plan saved, loaded back (validate.c reads every node: the batched
 *     matmuls, slices, expands of attention) and run again gives the same bits;
 *   - bf16 within 3e-2 and int8 within 6e-2 (test_plan.c's bounds), int8 calibrated (min-max) on the
 *     inputs it runs; their nodes that have no bf16 / int8 kernel (the generic ops) stay fp32.
 * ort_manifest.py writes those files; test_transformer_patterns.py and export_torch_transformers.py
 * call this. Returns the number of failures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/dataset.h"
#include "plan/plan.h"
#include "rs_test.h"

static float *read_f32(const char *dir, const char *name, int b, const char *kind, size_t *n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.b%d.%s.f32", dir, name, b, kind);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    *n = len > 0 ? (size_t)len / sizeof(float) : 0;
    float *x = malloc(sizeof(float) * (*n ? *n : 1));
    if (x && fread(x, sizeof(float), *n, f) != *n) {
        free(x);
        x = NULL;
    }
    fclose(f);
    return x;
}

static const char *prec_name(rs_plan_prec p) { return p == RS_PLAN_BF16 ? "bf16" : p == RS_PLAN_INT8 ? "int8" : "fp32"; }

/* The plan's outputs at batch b against ORT's within tol of max(1, max |ORT|); *got (the caller's, may
 * be NULL) receives a copy of them. */
static void compare(rs_plan *p, const char *dir, const char *name, int b, double tol, float **got_copy)
{
    size_t nx = 0, ny = 0;
    float *x = read_f32(dir, name, b, "in", &nx), *want = read_f32(dir, name, b, "out", &ny);
    const float *got = NULL;
    rs_err e = {0};
    const char *prec = prec_name(rs_plan_precision(p));
    RS_CHECK(x && want, "%s: missing inputs/outputs for batch %d", name, b);
    rs_status st = x && want ? rs_plan_run(p, x, b, &got, &e) : RS_ERR_ARG;
    RS_CHECK(st == RS_OK, "%s %s batch %d: run: %s", name, prec, b, e.msg);
    if (!st) {
        double worst = 0.0, scale = 1.0;
        for (size_t i = 0; i < ny; i++) scale = fmax(scale, fabs((double)want[i]));
        for (size_t i = 0; i < ny; i++) worst = fmax(worst, fabs((double)got[i] - (double)want[i]));
        RS_CHECK(worst <= tol * scale, "%s %s batch %d: plan max |diff| %.3g > %.3g vs ONNX Runtime", name, prec, b,
                 worst, tol * scale);
        printf("  %-24s plan %s batch %d: max |diff| vs ORT %.2e (scale %.2f)\n", name, prec, b, worst, scale);
        if (got_copy && (*got_copy = malloc(sizeof(float) * ny))) memcpy(*got_copy, got, sizeof(float) * ny);
    }
    free(x), free(want);
}

/* int8's calibration set: the inputs it is then run on (batch 1's and batch 7's, floats or token ids), as
 * (1, 1, per-sample) samples: a sample past the calibrated range would saturate, which is what min-max
 * calibration promises not to happen on the data it saw. */
static rs_dataset *calib_set(rs_model *m, const char *dir, const char *name)
{
    size_t n1 = 0, n7 = 0, per = rs_shape_numel(rs_model_input_shape(m));
    float *x1 = read_f32(dir, name, 1, "in", &n1), *x7 = read_f32(dir, name, 7, "in", &n7);
    rs_dataset *d = x1 && x7 && n1 == per && n7 == 7 * per
                        ? rs_dataset_new_labels(8, 1, 1, (int)per, rs_model_tokens(m) ? rs_model_vocab(m) : 10, 1)
                        : NULL;
    if (d) {
        d->tokens = rs_model_tokens(m);
        memcpy(d->x, x1, sizeof(float) * n1);
        memcpy((float *)d->x + n1, x7, sizeof(float) * n7);
    }
    free(x1), free(x7);
    return d;
}

static rs_plan *compile(rs_model *m, rs_plan_prec prec, const rs_dataset *cal, const char *name)
{
    rs_plan *p = NULL;
    rs_err e = {0};
    rs_plan_opts o = rs_plan_opts_default();
    o.batch = 7;
    o.prec = prec;
    o.calib = cal;
    RS_CHECK(rs_plan_compile(m, &o, &p, &e) == RS_OK, "%s: compile %s: %s", name, prec_name(prec), e.msg);
    return p;
}

/* The fp32 plan through a file: loaded back, the same bits as `want` at batch 7. */
static void file_roundtrip(const rs_plan *p, const char *dir, const char *name, const float *want)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/rs-run-plan-%d.plan", (int)getpid());
    rs_plan *q = NULL;
    rs_err e = {0};
    rs_status st = rs_plan_save(p, path, &e);
    if (!st) st = rs_plan_load(path, &q, &e);
    unlink(path);
    RS_CHECK(st == RS_OK, "%s: plan file: %s", name, e.msg);
    size_t nx = 0, ny = 0;
    float *x = read_f32(dir, name, 7, "in", &nx), *ort = read_f32(dir, name, 7, "out", &ny);
    const float *got = NULL;
    if (!st && x && ort && want && !(st = rs_plan_run(q, x, 7, &got, &e)))
        RS_CHECK(!memcmp(got, want, sizeof(float) * ny), "%s: the loaded plan computes other values", name);
    RS_CHECK(st == RS_OK, "%s: run of the loaded plan: %s", name, e.msg);
    free(x), free(ort);
    rs_plan_free(q);
}

static void check_plan(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_plan_model_from_onnx(path, name, &m, &e) == RS_OK, "%s: import: %s", name, e.msg);
    if (!m) return;
    static const rs_plan_prec precs[] = {RS_PLAN_FP32, RS_PLAN_BF16, RS_PLAN_INT8};
    static const double tol[] = {1e-4, 3e-2, 6e-2};
    rs_dataset *cal = calib_set(m, dir, name);
    RS_CHECK(cal != NULL, "%s: no calibration inputs", name);
    for (int k = 0; k < 3; k++) {
        rs_plan *p = compile(m, precs[k], cal, name);
        float *b7 = NULL;
        if (p) {
            compare(p, dir, name, 1, tol[k], NULL);
            compare(p, dir, name, 7, tol[k], &b7);
        }
        if (p && k == 0) file_roundtrip(p, dir, name, b7);
        free(b7);
        rs_plan_free(p);
    }
    rs_dataset_free(cal);
    rs_model_free(m);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: run-plan DIR NAME...\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) check_plan(argv[1], argv[i]);
    return rs_test_finish("run-plan");
}
