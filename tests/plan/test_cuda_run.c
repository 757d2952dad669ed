/* Plans for a GPU against the CPU engine (suite cuda; exit 77 with the reason where there is no GPU
 * or the build has no cuDNN / cuBLASLt). fp32 cuda plans of an MLP, the Fashion-shaped CNN (conv +
 * relu + maxpool twice, then linear), residual MLPs (a sum fused before and after an activation)
 * and a small GPT equal rs_model_forward on the CPU within FP32_TOL of the output's scale, and bf16
 * plans within BF16_TOL, at batch 1, 5 and the plan's 8 (batch 1 after 8 and 8 again: the
 * descriptors and algorithms are set per batch); a plan saved and loaded gives the same bits as the
 * one compiled; runs timed per node (plan bench's path) give the same output. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/rng.h"
#include "engine/cuda/cuda.h"
#include "engine/nn/spec.h"
#include "plan/ir.h"
#include "plan/plan.h"
#include "rs_test.h"
#include "plan_check.h"

/* fp32: no TF32 anywhere (cuDNN FMA math, CUBLAS_COMPUTE_32F); cuDNN and cuBLAS sum in other orders
 * than OpenBLAS and the CPU's direct loops */
#define FP32_TOL 1e-4
/* bf16: cuBLASLt's products round both operands to bf16 (8-bit mantissa) and accumulate in fp32;
 * cuDNN's bf16 convolutions run in TF32 (10 bits); the CPU plan's bound for the same models */
#define BF16_TOL 3e-2

static void parity(const char *spec, rs_plan_prec prec, const char *dir)
{
    char what[200];
    snprintf(what, sizeof what, "%s (%s)", spec, rs_plan_prec_name(prec));
    double tol = prec == RS_PLAN_FP32 ? FP32_TOL : BF16_TOL;
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 7, &m, NULL, &e) == RS_OK, "%s", e.msg);
    if (!m) return;
    rs_model_set_training(m, false);
    rs_plan_opts o = rs_plan_opts_default();
    o.prec = prec;
    o.batch = 8;
    o.device = RS_PLAN_DEV_CUDA;
    rs_plan *p = NULL;
    RS_CHECK(rs_plan_compile(m, &o, &p, &e) == RS_OK, "%s: compile: %s", what, e.msg);
    if (!p) {
        rs_model_free(m);
        return;
    }
    int Bs[] = {8, 1, 5, 8};
    for (int i = 0; i < 4; i++) {
        double rel = compare(m, p, Bs[i], what);
        printf("%-100.100s B=%d: max |gpu - cpu| / scale = %.2e\n", what, Bs[i], rel);
        RS_CHECK(rel <= tol, "%s: B=%d differs by %.3g (tolerance %.0e)", what, Bs[i], rel, tol);
    }
    /* saved and loaded: the same bits as the compiled plan, on every node's kernel as chosen again */
    char path[512];
    snprintf(path, sizeof path, "%s/g.plan", dir);
    RS_CHECK(rs_plan_save(p, path, &e) == RS_OK, "%s", e.msg);
    rs_plan *q = NULL;
    RS_CHECK(rs_plan_load(path, &q, &e) == RS_OK, "%s: load: %s", what, e.msg);
    if (q) {
        void *x = inputs(m, 8, 3);
        size_t n = out_numel(p, 8);
        float *a = malloc(n * sizeof *a);
        const float *y;
        RS_CHECK(rs_plan_run(p, x, 8, &y, &e) == RS_OK, "%s", e.msg);
        memcpy(a, y, n * sizeof *a);
        RS_CHECK(rs_plan_run(q, x, 8, &y, &e) == RS_OK, "%s", e.msg);
        double d = max_diff(a, y, n) / fmax(1.0, max_abs(a, n));
        RS_CHECK(d <= tol / 10, "%s: the loaded plan differs from the compiled one by %.3g", what, d);
        /* per-node timing, as plan bench nodes=on runs it: same output, every node timed */
        double *s = calloc((size_t)rs_plan_node_count(q), sizeof *s);
        rs_plan_time_nodes(q, s);
        RS_CHECK(rs_plan_run(q, x, 8, &y, &e) == RS_OK, "%s", e.msg);
        rs_plan_time_nodes(q, NULL);
        d = max_diff(a, y, n) / fmax(1.0, max_abs(a, n));
        RS_CHECK(d <= tol / 10, "%s: a timed run differs by %.3g", what, d);
        for (int i = 0; i < rs_plan_node_count(q); i++) RS_CHECK(s[i] > 0, "%s: node %d not timed", what, i);
        free(s);
        char *desc = rs_plan_describe(q);
        RS_CHECK(desc && strstr(desc, "on cuda sm_") && !strstr(desc, "not opened"), "%s: show: %s", what, desc ? desc : "");
        free(desc);
        free(a);
        free(x);
    }
    rs_plan_free(q);
    rs_plan_free(p);
    rs_model_free(m);
}

int main(void)
{
    rs_cuda_info ci;
    rs_cuda_query(&ci);
    if (ci.count < 1) RS_SKIP("%s", ci.why);
    char cudnn[24], lt[24], tgt[16];
    rs_plan_cuda_target(tgt, sizeof tgt, cudnn, sizeof cudnn, lt, sizeof lt);
    if (!strcmp(cudnn, "none") || !strcmp(lt, "none"))
        RS_SKIP("this build has no cuDNN or cuBLASLt: plans for cuda compile but do not run (meson's log says why)");
    char dir[] = "/tmp/rs-plan-gpu-XXXXXX";
    if (!mkdtemp(dir)) RS_SKIP("no temporary folder");
    const char *specs[] = {
        "mlp 20-16-12-5",
        /* Fashion-shaped: conv + relu + maxpool twice, then the classifier */
        "seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)",
        /* a residual sum then gelu (erf: the engine's table), and a relu before a residual sum (scratch) */
        "seq in=10 linear(16) res[ linear(32) relu linear(16) ] gelu linear(4)",
        "seq in=10 linear(16) res[ linear(16) relu ] linear(4)",
        /* strided conv without bias, tanh, average pool */
        "seq in=3x11x11 conv(5,3,stride=2,bias=0) tanh conv(8,2) avgpool(2) flatten linear(3)",
        "gpt layers=2 heads=2 dim=16 ctx=8 vocab=11",
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        parity(specs[i], RS_PLAN_FP32, dir);
        parity(specs[i], RS_PLAN_BF16, dir);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return rs_test_finish("plan-cuda");
}
