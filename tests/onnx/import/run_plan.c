/* Compiles imported ONNX files into fp32 plans and runs them against ONNX Runtime's outputs: for each
 * NAME after the folder, DIR/NAME.onnx goes through rs_plan_model_from_onnx and rs_plan_compile (fp32,
 * batch 7), and the plan's outputs at batches 1 and 7 on DIR/NAME.bB.in.f32 (floats, or int32 token ids)
 * must equal DIR/NAME.bB.out.f32 within 1e-4 of max(1, max |ORT|). ort_manifest.py writes those files;
 * export_torch_transformers.py calls this for the torch GPTs, whose attention the importer makes the
 * engine's attn layer. Returns the number of failures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

static void check_plan(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    rs_model *m = NULL;
    rs_plan *p = NULL;
    rs_err e = {0};
    rs_plan_opts o = rs_plan_opts_default();
    o.batch = 7;
    rs_status st = rs_plan_model_from_onnx(path, name, &m, &e);
    if (!st) st = rs_plan_compile(m, &o, &p, &e);
    RS_CHECK(st == RS_OK, "%s: compile: %s", name, e.msg);
    for (int b = 1; !st && b <= 7; b += 6) {
        size_t nx = 0, ny = 0;
        float *x = read_f32(dir, name, b, "in", &nx), *want = read_f32(dir, name, b, "out", &ny);
        const float *got = NULL;
        RS_CHECK(x && want, "%s: missing inputs/outputs for batch %d", name, b);
        if (x && want && !(st = rs_plan_run(p, x, b, &got, &e))) {
            double worst = 0.0, scale = 1.0;
            for (size_t i = 0; i < ny; i++) scale = fmax(scale, fabs((double)want[i]));
            for (size_t i = 0; i < ny; i++) worst = fmax(worst, fabs((double)got[i] - (double)want[i]));
            RS_CHECK(worst <= 1e-4 * scale, "%s batch %d: plan max |diff| %.3g > %.3g vs ONNX Runtime", name, b, worst,
                     1e-4 * scale);
            printf("  %-24s plan fp32 batch %d: max |diff| vs ORT %.2e (scale %.2f)\n", name, b, worst, scale);
        }
        RS_CHECK(st == RS_OK, "%s: run: %s", name, e.msg);
        free(x), free(want);
    }
    rs_plan_free(p);
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
