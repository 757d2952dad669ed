/* The C half of tests/plan/test_patterns.py (and export_torchvision.py): compiles one ONNX file at a
 * precision, runs the plan on the given images and writes its outputs, for the Python side to compare
 * with ONNX Runtime. The plan is also saved, loaded back and run again: the loaded plan must give the
 * same bits (the file carries everything a node needs: groups, slices, reductions).
 *
 *   run-plan-onnx FILE.onnx PREC X.f32 N CALIB.f32 NCAL OUT.f32 [BATCH [SAVE.plan]]
 *
 * PREC fp32, bf16, int8 (timed against fp32 per node, kept where faster) or int8all (int8 wherever
 * oneDNN has a kernel: rs_plan_opts.int8_all); X.f32 N images (raw float32, the model's per-sample shape); CALIB.f32 NCAL
 * images int8 calibrates on (min-max); the plan is compiled for BATCH (default N) and runs the N
 * images in batches of it; SAVE.plan keeps the plan (bench/plan_vision.sh times it). Prints the plan as `plan show` does, the compile report's lines and the
 * loaded plan's `plan show` (each line after `loaded| `). Exit 0
 * when it ran, 1 with the reason otherwise. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/dataset.h"
#include "plan/plan.h"

static float *read_f32(const char *path, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *x = malloc(sizeof(float) * (n ? n : 1)); /* the caller's */
    size_t got = x ? fread(x, sizeof(float), n, f) : 0;
    fclose(f);
    if (got != n) {
        free(x);
        return NULL;
    }
    return x;
}

/* Runs n samples of x through p in batches of its batch into y (n * per_out floats). */
static rs_status run_all(rs_plan *p, const float *x, int n, size_t per_in, size_t per_out, float *y, rs_err *e)
{
    int B = rs_plan_batch(p);
    for (int i = 0; i < n; i += B) {
        int b = n - i < B ? n - i : B;
        const float *out = NULL;
        rs_status st = rs_plan_run(p, x + (size_t)i * per_in, b, &out, e);
        if (st) return st;
        memcpy(y + (size_t)i * per_out, out, sizeof(float) * per_out * (size_t)b);
    }
    return RS_OK;
}

static int fail(const char *what, const rs_err *e)
{
    fprintf(stderr, "run-plan-onnx: %s: %s\n", what, e->msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: run-plan-onnx FILE.onnx fp32|bf16|int8|int8all X.f32 N CALIB.f32 NCAL OUT.f32 [BATCH [SAVE]]\n");
        return 2;
    }
    int n = atoi(argv[4]), ncal = atoi(argv[6]), batch = argc > 8 ? atoi(argv[8]) : n;
    bool all8 = !strcmp(argv[2], "int8all");
    rs_plan_prec prec = !strcmp(argv[2], "bf16") ? RS_PLAN_BF16 : !strcmp(argv[2], "int8") || all8 ? RS_PLAN_INT8 : RS_PLAN_FP32;
    rs_err e = {0};
    rs_model *m = NULL;
    if (rs_plan_model_from_onnx(argv[1], "m", &m, &e)) return fail("import", &e);
    const rs_shape *in = rs_model_input_shape(m);
    size_t per_in = rs_shape_numel(in), per_out = (size_t)rs_model_classes(m) * (size_t)rs_model_rows(m);
    float *x = read_f32(argv[3], (size_t)n * per_in), *cx = read_f32(argv[5], (size_t)ncal * per_in);
    rs_dataset *cal = in->ndim == 3 ? rs_dataset_new((uint32_t)ncal, (int)in->d[0], (int)in->d[1], (int)in->d[2], 10)
                                    : NULL;
    if (!x || !cx || !cal) {
        fprintf(stderr, "run-plan-onnx: cannot read %s / %s for a (%d-d) input of %zu floats\n", argv[3], argv[5],
                in->ndim, per_in);
        return 1;
    }
    memcpy(cal->x, cx, sizeof(float) * per_in * (size_t)ncal);
    rs_plan_opts o = rs_plan_opts_default();
    o.prec = prec;
    o.int8_all = all8;
    o.batch = batch;
    o.threads = 1;
    o.calib = cal;
    o.source = argv[1];
    rs_plan *p = NULL;
    if (rs_plan_compile(m, &o, &p, &e)) return fail("compile", &e);
    if (rs_plan_check_memory(p, &e)) return fail("memory plan", &e);
    char *text = rs_plan_describe(p);
    if (text) printf("%s", text);
    free(text);
    rs_plan_stats s;
    rs_plan_get_stats(p, &s);
    for (int i = 0; i < s.fusions; i++) printf("report: %s\n", rs_plan_fusion(p, i));
    float *y = malloc(sizeof(float) * per_out * (size_t)n), *y2 = malloc(sizeof(float) * per_out * (size_t)n);
    if (!y || !y2) return 1;
    if (run_all(p, x, n, per_in, per_out, y, &e)) return fail("run", &e);
    /* the file: saved, loaded, the same bits */
    char path[64];
    snprintf(path, sizeof path, "/tmp/run-plan-onnx-%d.plan", (int)getpid());
    const char *keep = argc > 9 ? argv[9] : path;
    rs_plan *q = NULL;
    rs_status st = rs_plan_save(p, keep, &e);
    if (!st) st = rs_plan_load(keep, &q, &e);
    if (keep == path) unlink(path);
    if (st) return fail("plan file", &e);
    if (run_all(q, x, n, per_in, per_out, y2, &e)) return fail("run of the loaded plan", &e);
    /* what the loaded plan runs, each line as `loaded| ...` (impl_report.py: the kernels compile chose) */
    text = rs_plan_describe(q);
    for (char *line = text; line && *line;) {
        size_t len = strcspn(line, "\n");
        printf("loaded| %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
    free(text);
    if (memcmp(y, y2, sizeof(float) * per_out * (size_t)n)) {
        fprintf(stderr, "run-plan-onnx: the loaded plan computes other values than the compiled one\n");
        return 1;
    }
    FILE *f = fopen(argv[7], "wb");
    if (!f || fwrite(y, sizeof(float), per_out * (size_t)n, f) != per_out * (size_t)n) return 1;
    fclose(f);
    rs_plan_free(q);
    rs_plan_free(p);
    rs_model_free(m);
    rs_dataset_free(cal);
    free(x);
    free(cx);
    free(y);
    free(y2);
    return 0;
}
