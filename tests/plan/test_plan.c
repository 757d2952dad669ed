/* Compiled plans against the engine that runs the same model (the reference): fp32 plans of an MLP, a
 * CNN, a residual MLP, a GPT and imported ONNX graphs equal rs_model_forward within 1e-5 of the
 * output's scale at batches 1, 5 and the plan's 8; each fusion compared on and off; the memory plan's
 * overlap check on every plan (and on a broken one); plan files round trip bit for bit and truncated,
 * corrupted, wrong-version, wrong-ISA, wrong-oneDNN and inconsistent files are refused with their
 * reason; bf16 plans within the tolerance stated below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/rng.h"
#include "engine/data/dataset.h"
#include "engine/nn/spec.h"
#include "onnx/build.h"
#include "onnx/export.h"
#include "plan/ir.h"
#include "plan/plan.h"
#include "rs_test.h"
#include "plan_check.h"
#include "plan_bf16.h"

/* fp32: |plan - engine| <= FP32_TOL * max(1, max |engine|). oneDNN sums in another order than
 * OpenBLAS; seen: at most 1.2e-6. */
#define FP32_TOL 1e-5
/* bf16 weights and inputs (8-bit mantissa, fp32 accumulation): <= BF16_TOL * max(1, max |engine|). */
#define BF16_TOL 3e-2
/* int8 (inputs per tensor, weights per channel, 127 levels each, min-max calibrated on inputs of the
 * same distribution): <= INT8_TOL * max(1, max |engine|). */
#define INT8_TOL 6e-2

static rs_plan *compile(rs_model *m, rs_plan_prec prec, unsigned passes, const char *what)
{
    rs_plan_opts o = rs_plan_opts_default();
    o.prec = prec;
    o.batch = 8;
    o.threads = 2;
    o.passes = passes;
    rs_plan *p = NULL;
    rs_err e = {0};
    RS_CHECK(rs_plan_compile(m, &o, &p, &e) == RS_OK, "%s: compile: %s", what, e.msg);
    if (p) RS_CHECK(rs_plan_check_memory(p, &e) == RS_OK, "%s: memory plan: %s", what, e.msg);
    return p;
}

static int count_fusions(const rs_plan *p, const char *needle)
{
    rs_plan_stats st;
    rs_plan_get_stats(p, &st);
    int n = 0;
    for (int i = 0; i < st.fusions; i++) n += strstr(rs_plan_fusion(p, i), needle) != NULL;
    return n;
}

/* The fp32 plan equals the engine; with fusions off it does too; returns the fused plan. */
static void parity(const char *spec, const char *needle, int want_fusions)
{
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 5, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    rs_plan *p = compile(m, RS_PLAN_FP32, RS_PLAN_PASS_ALL, spec);
    rs_plan *u = compile(m, RS_PLAN_FP32, RS_PLAN_PASS_REUSE, spec); /* no fusion */
    if (p && u) {
        int Bs[] = {1, 5, 8};
        for (int i = 0; i < 3; i++) {
            double d = compare(m, p, Bs[i], spec), du = compare(m, u, Bs[i], spec);
            printf("  %-70.70s B=%d fused %.2e unfused %.2e\n", spec, Bs[i], d, du);
            RS_CHECK(d <= FP32_TOL, "%s: fused plan differs from the engine by %.3g at B=%d", spec, d, Bs[i]);
            RS_CHECK(du <= FP32_TOL, "%s: unfused plan differs from the engine by %.3g at B=%d", spec, du, Bs[i]);
        }
        /* another thread count makes its primitives again (oneDNN fixes threads at creation) */
        rs_plan_set_threads(p, 1);
        double d1 = compare(m, p, 8, spec);
        RS_CHECK(d1 <= FP32_TOL, "%s: at 1 thread the plan differs by %.3g", spec, d1);
        rs_plan_set_threads(p, 2);
        rs_plan_stats sp, su;
        rs_plan_get_stats(p, &sp);
        rs_plan_get_stats(u, &su);
        RS_CHECK(count_fusions(p, needle) == want_fusions, "%s: %d fusions matching '%s', want %d", spec,
                 count_fusions(p, needle), needle, want_fusions);
        RS_CHECK(count_fusions(u, "post-op") == 0, "%s: the unfused plan fused", spec);
        RS_CHECK(sp.nodes_after == su.nodes_after - want_fusions, "%s: %d nodes fused, %d unfused, %d fusions", spec,
                 sp.nodes_after, su.nodes_after, want_fusions);
        RS_CHECK(sp.arena_bytes < sp.naive_bytes, "%s: reuse saved nothing (%zu vs %zu)", spec, sp.arena_bytes,
                 sp.naive_bytes);
        /* every layout choice lands on a jit kernel where the CPU has AVX2 or more: oneDNN's
         * reference kernels (ref:any) are hundreds of times slower */
        bool jit_isa = strncmp(p->isa, "avx", 3) == 0;
        for (int i = 0; jit_isa && i < p->nnodes; i++) {
            const char *impl = rs_plan_node_is_dnnl(&p->nodes[i]) ? rs_plan_dnnl_impl(p, i) : "";
            RS_CHECK(strncmp(impl, "ref", 3) != 0, "%s: node %s runs oneDNN's reference kernel %s", spec,
                     p->nodes[i].name, impl);
        }
    }
    rs_plan_free(p);
    rs_plan_free(u);
    rs_model_free(m);
}

/* The GPT's attention is one plan node per layer running the engine's fused causal attention kernel
 * straight on the QKV projection's (B*T, 3C) output: no split, transpose, matmul or softmax of its own
 * (parity() checks its numbers against the engine). */
static void gpt_attention(const char *spec, int layers)
{
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 5, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    rs_plan *p = compile(m, RS_PLAN_FP32, RS_PLAN_PASS_ALL, spec);
    int attn = 0, fed = 0, ops = 0;
    for (int i = 0; p && i < p->nnodes; i++) {
        const rs_pnode *n = &p->nodes[i];
        ops += n->kind == RS_PK_OP;
        if (n->kind != RS_PK_ATTN) continue;
        attn++;
        for (int j = 0; j < i; j++)
            fed += p->nodes[j].kind == RS_PK_LINEAR && p->nodes[j].out == n->in[0] && p->nodes[j].O == 3 * n->C;
    }
    RS_CHECK(attn == layers && fed == layers && ops == 0,
             "%s: %d attention nodes (%d fed by a QKV linear), %d generic ops; want %d, %d, 0", spec, attn, fed, ops,
             layers, layers);
    rs_plan_free(p);
    rs_model_free(m);
}

/* bf16 within BF16_TOL of the fp32 engine. Where oneDNN has bf16 inner products on this CPU the plan
 * has bf16 nodes and their rounding shows; where it has none (AVX2) those nodes stay fp32 and the
 * report says so, node by node. */
static void bf16(const char *spec)
{
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 5, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    rs_plan *p = compile(m, RS_PLAN_BF16, RS_PLAN_PASS_ALL, spec);
    if (p) {
        double d = compare(m, p, 8, spec);
        printf("  bf16 %-60.60s B=8 %.2e\n", spec, d);
        RS_CHECK(d <= BF16_TOL, "%s: bf16 plan off by %.3g", spec, d);
        int nb = plan_bf16_nodes(p), kept = plan_report_lines(p, "stays fp32");
        if (plan_dnnl_has_bf16(false)) RS_CHECK(nb > 0, "%s: oneDNN has bf16 here, the plan has no bf16 node", spec);
        else RS_CHECK(kept > 0, "%s: oneDNN has no bf16 inner product here and the report does not say so", spec);
        if (nb > 0) RS_CHECK(d > 1e-7, "%s: bf16 plan equals fp32 (%.3g): did it run in bf16?", spec, d);
        printf("  bf16 %-60.60s %d bf16 nodes, %d kept fp32 by oneDNN's answer\n", spec, nb, kept);
    }
    rs_plan_free(p);
    rs_model_free(m);
}

/* A bf16 plan whose first conv reads a 3-channel image: that conv in bf16 (oneDNN's bf16 first-conv
 * kernel on the image's nchw bf16 copy) and in fp32, each forced, within BF16_TOL of the engine at
 * batch 1 and 8, and the image conv's precision is the one asked for; a plan file keeps it. */
static void bf16_image(const char *spec, const char *dir)
{
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 5, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    for (int f = -1; f <= 1; f += 2) {
        rs_plan_opts o = rs_plan_opts_default();
        o.prec = RS_PLAN_BF16;
        o.batch = 8;
        o.image_bf16 = f;
        rs_plan *p = NULL;
        RS_CHECK(rs_plan_compile(m, &o, &p, &e) == RS_OK, "%s: bf16 compile: %s", spec, e.msg);
        if (!p) continue;
        /* asked for bf16: bf16 where oneDNN has a bf16 convolution here, else fp32 and a report line */
        bool can = plan_dnnl_has_bf16(true);
        rs_plan_prec want = f > 0 && can ? RS_PLAN_BF16 : RS_PLAN_FP32;
        if (f > 0 && !can)
            RS_CHECK(plan_report_lines(p, "stays fp32") > 0, "%s: image conv kept fp32 without a report line", spec);
        RS_CHECK(p->nodes[0].kind == RS_PK_CONV && p->nodes[0].prec == want, "%s: image conv in %s, asked for %s", spec,
                 rs_plan_prec_name(p->nodes[0].prec), rs_plan_prec_name(want));
        if (want == RS_PLAN_BF16)
            RS_CHECK(strstr(rs_plan_dnnl_impl(p, 0), "bf16") != NULL, "%s: image conv runs %s, not a bf16 kernel", spec,
                     rs_plan_dnnl_impl(p, 0));
        for (int B = 1; B <= 8; B += 7) {
            double d = compare(m, p, B, spec);
            printf("  bf16 image conv %s %-44.44s B=%d %.2e\n", rs_plan_prec_name(want), spec, B, d);
            RS_CHECK(d <= BF16_TOL, "%s: bf16 plan (image conv %s) off by %.3g at B=%d", spec, rs_plan_prec_name(want), d, B);
        }
        char path[512];
        snprintf(path, sizeof path, "%s/image16.plan", dir);
        rs_plan *q = NULL;
        RS_CHECK(rs_plan_save(p, path, &e) == RS_OK && rs_plan_load(path, &q, &e) == RS_OK, "%s: %s", spec, e.msg);
        if (q) RS_CHECK(q->nodes[0].prec == want, "%s: the file lost the image conv's precision", spec);
        rs_plan_free(q);
        rs_plan_free(p);
    }
    rs_model_free(m);
}

/* int8 calibrated on 64 samples like the test's inputs, within INT8_TOL of the fp32 engine; the file
 * keeps its scales (a loaded plan gives the same bits); int8 without calibration data is refused. */
static void int8(const char *spec, const char *dir)
{
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 5, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    const rs_shape *in = rs_model_input_shape(m);
    rs_dataset *cal = rs_dataset_new(64, (int)in->d[0], in->ndim > 1 ? (int)in->d[1] : 1, in->ndim > 2 ? (int)in->d[2] : 1,
                                     rs_model_classes(m));
    float *xs = inputs(m, 64, 99);
    memcpy(cal->x, xs, 64 * rs_dataset_sample_numel(cal) * sizeof(float));
    free(xs);
    rs_plan_opts o = rs_plan_opts_default();
    o.prec = RS_PLAN_INT8;
    o.int8_all = 1; /* every node int8, not only where it is faster: the arithmetic is what is checked */
    o.batch = 8;
    rs_plan *p = NULL;
    RS_CHECK(rs_plan_compile(m, &o, &p, &e) != RS_OK && strstr(e.msg, "calib"), "int8 without data: %s", e.msg);
    o.calib = cal;
    RS_CHECK(rs_plan_compile(m, &o, &p, &e) == RS_OK, "%s: int8 compile: %s", spec, e.msg);
    if (p) {
        RS_CHECK(rs_plan_check_memory(p, &e) == RS_OK, "%s", e.msg);
        double d = compare(m, p, 8, spec), d1 = compare(m, p, 1, spec);
        printf("  int8 %-60.60s B=8 %.2e B=1 %.2e\n", spec, d, d1);
        RS_CHECK(d <= INT8_TOL && d1 <= INT8_TOL, "%s: int8 plan off by %.3g / %.3g", spec, d, d1);
        RS_CHECK(d > 1e-6, "%s: int8 plan equals fp32 (%.3g): did it quantize?", spec, d);
        char path[512];
        snprintf(path, sizeof path, "%s/i8.plan", dir);
        rs_plan *q = NULL;
        RS_CHECK(rs_plan_save(p, path, &e) == RS_OK && rs_plan_load(path, &q, &e) == RS_OK, "int8 file: %s", e.msg);
        if (q) {
            void *x = inputs(m, 8, 5);
            const float *a, *b;
            float keep[64];
            size_t n = out_numel(p, 8);
            RS_CHECK(n <= 64 && rs_plan_run(p, x, 8, &a, &e) == RS_OK, "%s", e.msg);
            memcpy(keep, a, n * sizeof *keep);
            RS_CHECK(rs_plan_run(q, x, 8, &b, &e) == RS_OK && memcmp(keep, b, n * sizeof *keep) == 0,
                     "the loaded int8 plan differs");
            free(x);
        }
        rs_plan_free(q);
    }
    rs_plan_free(p);
    rs_dataset_free(cal);
    rs_model_free(m);
}

/* ---- imported ONNX: conv + BatchNormalization + relu (the fold), gemm + relu ---- */

static void onnx_conv_bn(const char *path)
{
    rs_err e = {0};
    rs_onnx_builder *b = rs_onnx_builder_new("convbn");
    int64_t in[] = {-1, 3, 9, 9}, w[] = {4, 3, 3, 3}, c4[] = {4}, out[] = {-1, 4, 9, 9};
    const char *names[] = {"N", NULL, NULL, NULL};
    float sc[4] = {1.5f, 0.5f, -0.7f, 2.0f}, bi[4] = {0.1f, -0.2f, 0.3f, 0.0f}, mu[4] = {0.05f, -0.1f, 0.2f, 0.0f},
          var[4] = {1.0f, 0.25f, 4.0f, 0.5f};
    RS_CHECK(rs_onnx_builder_input(b, "x", 1, 4, in, names, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_initializer(b, "W", 4, w, NULL, 3, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_initializer(b, "B", 1, c4, NULL, 4, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_initializer(b, "s", 1, c4, sc, 0, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_initializer(b, "t", 1, c4, bi, 0, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_initializer(b, "mu", 1, c4, mu, 0, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_initializer(b, "var", 1, c4, var, 0, &e) == RS_OK, "%s", e.msg);
    const char *ci[] = {"x", "W", "B"}, *co[] = {"c"}, *bni[] = {"c", "s", "t", "mu", "var"}, *bno[] = {"n"},
               *ri[] = {"n"}, *ro[] = {"y"};
    RS_CHECK(rs_onnx_builder_node(b, "Conv", 3, ci, 1, co, "pads=1,1,1,1", &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_node(b, "BatchNormalization", 5, bni, 1, bno, "epsilon=1e-5", &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_node(b, "Relu", 1, ri, 1, ro, NULL, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_output(b, "y", 1, 4, out, names, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_save(b, path, 17, &e) == RS_OK, "%s", e.msg);
    rs_onnx_builder_free(b);
}

static void onnx_parity(const char *path, const char *needle, int want)
{
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_plan_model_from_onnx(path, "o", &m, &e) == RS_OK, "%s: %s", path, e.msg);
    if (!m) return;
    rs_plan *p = compile(m, RS_PLAN_FP32, RS_PLAN_PASS_ALL, path);
    rs_plan *u = compile(m, RS_PLAN_FP32, RS_PLAN_PASS_ALL & ~(unsigned)RS_PLAN_PASS_FOLD, path);
    if (p && u) {
        for (int B = 1; B <= 8; B += 7) {
            double d = compare(m, p, B, path), du = compare(m, u, B, path);
            printf("  %-40s B=%d folded %.2e unfolded %.2e\n", path, B, d, du);
            RS_CHECK(d <= FP32_TOL && du <= FP32_TOL, "%s: folded %.3g, unfolded %.3g", path, d, du);
        }
        RS_CHECK(count_fusions(p, needle) == want, "%s: %d rewrites matching '%s', want %d", path, count_fusions(p, needle),
                 needle, want);
        RS_CHECK(count_fusions(u, "folded") == 0, "%s: folded with the pass off", path);
        RS_CHECK(rs_plan_node_count(p) == 1, "%s: conv+bn+relu should be one node, got %d", path, rs_plan_node_count(p));
    }
    rs_plan_free(p);
    rs_plan_free(u);
    rs_model_free(m);
}

/* A model exported by ringside (opset 17) and imported back: the plan of the import equals the
 * engine running the same import (an inference model when softmax=on adds a generic Softmax op). */
static void onnx_export_parity(const char *spec, bool softmax, const char *dir, const char *needle, int want)
{
    rs_err e = {0};
    rs_model *m = NULL, *im = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 7, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    char path[512];
    snprintf(path, sizeof path, "%s/x.onnx", dir);
    rs_onnx_export_opts eo = {.opset = 17, .softmax = softmax, .producer_version = "test"};
    RS_CHECK(rs_onnx_export_ex(m, path, &eo, &e) == RS_OK, "%s: export: %s", spec, e.msg);
    RS_CHECK(rs_plan_model_from_onnx(path, "i", &im, &e) == RS_OK, "%s: import: %s", spec, e.msg);
    if (im) {
        rs_plan *p = compile(im, RS_PLAN_FP32, RS_PLAN_PASS_ALL, spec);
        if (p) {
            for (int B = 1; B <= 8; B += 7) {
                double d = compare(im, p, B, spec);
                printf("  onnx %s%-55.55s B=%d %.2e\n", softmax ? "softmax " : "", spec, B, d);
                RS_CHECK(d <= FP32_TOL, "%s (imported): plan differs by %.3g at B=%d", spec, d, B);
            }
            RS_CHECK(count_fusions(p, needle) == want, "%s (imported): %d rewrites matching '%s', want %d", spec,
                     count_fusions(p, needle), needle, want);
        }
        rs_plan_free(p);
    }
    rs_model_free(im);
    rs_model_free(m);
}

/* ---- the plan file ---- */

static void expect_refused(const uint8_t *b, size_t n, const char *needle, const char *what)
{
    expect_bytes_refused(b, n, false, needle, what);
}

static void file_tests(const char *dir)
{
    rs_err e = {0};
    rs_model *m = NULL;
    const char *spec = "seq in=1x12x12 conv(4,3,pad=1) relu maxpool(2) flatten linear(16) relu linear(5)";
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 9, &m, NULL, &e) == RS_OK, "%s", e.msg);
    rs_plan *p = compile(m, RS_PLAN_FP32, RS_PLAN_PASS_ALL, "file");
    if (!p) return;
    char path[512];
    snprintf(path, sizeof path, "%s/t.plan", dir);
    RS_CHECK(rs_plan_save(p, path, &e) == RS_OK, "save: %s", e.msg);
    rs_plan *q = NULL;
    RS_CHECK(rs_plan_load(path, &q, &e) == RS_OK, "load: %s", e.msg);
    if (q) {
        void *x = inputs(m, 8, 3);
        const float *a, *b;
        RS_CHECK(rs_plan_run(p, x, 8, &a, &e) == RS_OK, "%s", e.msg);
        float keep[8 * 5];
        memcpy(keep, a, sizeof keep);
        RS_CHECK(rs_plan_run(q, x, 8, &b, &e) == RS_OK, "%s", e.msg);
        RS_CHECK(memcmp(keep, b, sizeof keep) == 0, "the loaded plan differs from the compiled one");
        RS_CHECK(rs_plan_node_count(q) == rs_plan_node_count(p), "node counts differ");
        char *d = rs_plan_describe(q);
        RS_CHECK(d && strstr(d, "conv") && strstr(d, "relu"), "describe: %s", d ? d : "(null)");
        free(d);
        free(x);
    }
    rs_plan_free(q);

    uint8_t *buf;
    size_t n;
    RS_CHECK(rs_plan_serialize(p, &buf, &n, &e) == RS_OK, "%s", e.msg);
    /* truncated at every length class */
    size_t cuts[] = {0, 7, 23, 24, 25, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
        expect_refused(buf, cuts[i], cuts[i] < 24 ? "not a plan file" : "truncated", "truncated");
    /* a byte flipped in the weights */
    buf[n - 9] ^= 0x40;
    expect_refused(buf, n, "corrupted", "corrupted");
    buf[n - 9] ^= 0x40;
    /* another format version in the header */
    buf[8] = 9;
    expect_refused(buf, n, "format version 9", "version");
    buf[8] = RS_PLAN_FORMAT_VERSION;
    free(buf);

    /* another ISA, another oneDNN, a graph that does not hold together: written with a good header */
    /* an ISA other than the one oneDNN runs here (on an AVX2 CPU, a file made where it runs AVX-512) */
    const char *other = strcmp(p->isa, "avx2") ? "avx2" : "avx512_core";
    char other_msg[64];
    snprintf(other_msg, sizeof other_msg, "built for ISA %s", other);
    expect_field_refused(p, p->isa, sizeof p->isa, other, false, other_msg, "wrong ISA");
    expect_field_refused(p, p->isa, sizeof p->isa, other, false, "compile the model again here", "wrong ISA: what to do");
    expect_field_refused(p, p->dnnl_version, sizeof p->dnnl_version, "1.0.0", false, "oneDNN 1.0.0", "wrong oneDNN");
    int64_t keep_numel = p->values[p->nodes[0].out].numel, keep_padded = p->values[p->nodes[0].out].padded;
    p->values[p->nodes[0].out].numel = keep_numel + 1;
    if (keep_padded && keep_padded < keep_numel + 1) /* a blocked value: its padding must still hold it */
        p->values[p->nodes[0].out].padded = keep_numel + 1;
    RS_CHECK(rs_plan_serialize(p, &buf, &n, &e) == RS_OK, "%s", e.msg);
    expect_refused(buf, n, "do not fit", "inconsistent sizes");
    free(buf);
    p->values[p->nodes[0].out].numel = keep_numel;
    p->values[p->nodes[0].out].padded = keep_padded;
    /* a memory plan that puts two live values in the same bytes */
    int a0 = rs_plan_root(p, p->nodes[0].out), a1 = rs_plan_root(p, p->nodes[1].out);
    int64_t off = p->values[a1].offset;
    p->values[a1].offset = p->values[a0].offset;
    RS_CHECK(rs_plan_check_memory(p, &e) != RS_OK && strstr(e.msg, "same bytes"), "overlap not caught: %s", e.msg);
    RS_CHECK(rs_plan_serialize(p, &buf, &n, &e) == RS_OK, "%s", e.msg);
    expect_refused(buf, n, "same bytes", "overlapping memory plan");
    free(buf);
    p->values[a1].offset = off;
    RS_CHECK(rs_plan_check_memory(p, &e) == RS_OK, "%s", e.msg);
    /* a batch above the plan's */
    void *x = inputs(m, 9, 1);
    const float *o;
    RS_CHECK(rs_plan_run(p, x, 9, &o, &e) != RS_OK && strstr(e.msg, "compiled for 1..8"), "batch 9: %s", e.msg);
    free(x);
    rs_plan_free(p);
    rs_model_free(m);
}

/* Each convolution algorithm (plan/dnnl.c): a plan compiled with Winograd wherever oneDNN has it (on
 * AVX-512: the 3x3 stride-1 fp32 convs over 8 or more channels, at the plan's batch and at batch 1),
 * one with the batch-1 Winograd kernel run once per sample at every batch but 1 (its threads split
 * the samples: 2 into 1 and 1, 5 into 2 and 3, 8 into 4 and 4) and one with direct only equal the engine at B = 1, 2
 * (batch 1's choice), 5, 8 (the plan's) and at 1 and 2 threads; the Winograd plans' files keep the
 * choice and their weights plain and load to the same bits; a choice a node cannot take is refused. */
static void conv_algs(const char *spec, const char *dir)
{
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 5, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    rs_plan_conv_alg algs[] = {RS_PLAN_CONV_DIRECT, RS_PLAN_CONV_WINOGRAD, RS_PLAN_CONV_SAMPLES};
    const char *names[] = {"direct", "winograd", "per-sample"};
    for (int a = 0; a < 3; a++) {
        rs_plan_opts o = rs_plan_opts_default();
        o.batch = 8;
        o.threads = 2;
        o.conv_alg = algs[a];
        rs_plan *p = NULL;
        RS_CHECK(rs_plan_compile(m, &o, &p, &e) == RS_OK, "%s %s: compile: %s", spec, names[a], e.msg);
        if (!p) continue;
        int wino = 0, wino1 = 0, impl_wino = 0, each = 0;
        for (int i = 0; i < p->nnodes; i++) {
            wino += p->nodes[i].alg == (a == 2 ? RS_PCONV_SAMPLES : RS_PCONV_WINOGRAD);
            wino1 += p->nodes[i].alg1 == RS_PCONV_WINOGRAD;
            impl_wino += rs_plan_node_is_dnnl(&p->nodes[i]) && strstr(rs_plan_dnnl_impl(p, i), "wino") != NULL;
            each += rs_plan_node_is_dnnl(&p->nodes[i]) && strstr(rs_plan_dnnl_impl(p, i), "per sample") != NULL;
        }
        if (a == 0) RS_CHECK(wino + wino1 + impl_wino == 0, "%s: the direct plan has Winograd nodes", spec);
        else if (strncmp(p->isa, "avx512", 6) == 0)
            RS_CHECK(wino == 2 && wino1 == 2 && impl_wino == 2 && each == (a == 2 ? 2 : 0),
                     "%s: %d/%d %s nodes (batch 8/1), %d run Winograd, %d per sample; want 2", spec, wino, wino1,
                     names[a], impl_wino, each);
        int Bs[] = {1, 2, 5, 8};
        for (int t = 2; t >= 1; t--) {
            rs_plan_set_threads(p, t);
            for (int i = 0; i < 4; i++) {
                double d = compare(m, p, Bs[i], spec);
                printf("  %s %-50.50s B=%d threads=%d %.2e\n", names[a], spec, Bs[i], t, d);
                RS_CHECK(d <= FP32_TOL, "%s (%s): differs from the engine by %.3g at B=%d, %d threads", spec, names[a], d,
                         Bs[i], t);
            }
        }
        rs_plan_set_threads(p, 2);
        char path[512];
        snprintf(path, sizeof path, "%s/%s.plan", dir, names[a]);
        RS_CHECK(rs_plan_save(p, path, &e) == RS_OK, "save: %s", e.msg);
        rs_plan *q = NULL;
        RS_CHECK(rs_plan_load(path, &q, &e) == RS_OK, "%s %s: load: %s", spec, names[a], e.msg);
        if (q) {
            void *x = inputs(m, 8, 4);
            size_t n = out_numel(p, 8);
            float *keep = malloc(n * sizeof *keep);
            const float *y;
            for (int B = 1; B <= 8; B += 7) { /* batch 1's primitives and the plan's */
                n = out_numel(p, B);
                RS_CHECK(rs_plan_run(p, x, B, &y, &e) == RS_OK, "%s", e.msg);
                memcpy(keep, y, n * sizeof *keep);
                RS_CHECK(rs_plan_run(q, x, B, &y, &e) == RS_OK, "%s", e.msg);
                RS_CHECK(memcmp(keep, y, n * sizeof *keep) == 0, "%s %s: the loaded plan differs at B=%d", spec, names[a], B);
            }
            for (int i = 0; i < q->nnodes; i++)
                RS_CHECK(q->nodes[i].alg == p->nodes[i].alg && q->nodes[i].alg1 == p->nodes[i].alg1,
                         "%s: node %s's algorithm was not kept", spec, q->nodes[i].name);
            free(keep);
            free(x);
        }
        rs_plan_free(q);
        /* refused: Winograd on an inner product, an algorithm that does not exist, and (direct plan)
         * Winograd over weights laid out for the direct kernel */
        for (int i = 0; i < p->nnodes; i++) {
            rs_pnode *n = &p->nodes[i];
            if (n->kind != RS_PK_CONV && n->kind != RS_PK_LINEAR) continue;
            int keep_alg = n->alg;
            const char *why = n->kind == RS_PK_LINEAR ? "has a convolution algorithm" : "algorithm 7";
            n->alg = n->kind == RS_PK_LINEAR ? RS_PCONV_WINOGRAD : 7;
            uint8_t *buf;
            size_t nb;
            RS_CHECK(rs_plan_serialize(p, &buf, &nb, &e) == RS_OK, "%s", e.msg);
            expect_refused(buf, nb, why, "bad algorithm");
            free(buf);
            if (a == 0 && n->kind == RS_PK_CONV && n->g.c >= 8) {
                for (int k = RS_PCONV_WINOGRAD; k <= RS_PCONV_SAMPLES; k++) {
                    n->alg = k;
                    RS_CHECK(rs_plan_serialize(p, &buf, &nb, &e) == RS_OK, "%s", e.msg);
                    expect_refused(buf, nb, "plain floats", "Winograd over blocked weights");
                    free(buf);
                }
            }
            n->alg = keep_alg;
            if (a == 2 && n->kind == RS_PK_CONV && n->g.c >= 8) { /* per sample is for the plan's batch only */
                int keep1 = n->alg1;
                n->alg1 = RS_PCONV_SAMPLES;
                RS_CHECK(rs_plan_serialize(p, &buf, &nb, &e) == RS_OK, "%s", e.msg);
                expect_refused(buf, nb, "per sample: at the plan's batch", "per sample at batch 1");
                free(buf);
                n->alg1 = keep1;
            }
        }
        rs_plan_free(p);
    }
    rs_model_free(m);
}

int main(void)
{
    char dir[] = "/tmp/rs-plan-XXXXXX";
    if (!mkdtemp(dir)) RS_SKIP("no temporary folder");
    /* MLP: two linear+relu fusions */
    parity("mlp 20-16-12-5", "post-op", 2);
    /* CNN: conv+relu twice, linear+relu once */
    parity("seq in=1x14x14 conv(6,3,pad=1) relu maxpool(2) conv(8,3,pad=1) relu avgpool(2) flatten linear(12) relu "
           "linear(4)",
           "post-op", 3);
    /* 3-channel image through the nchw "first convolution" kernel into nChw16c, a conv reading that
     * without a reorder; at B=8 the second conv is large enough to run on two threads, at B=1 not */
    parity("seq in=3x16x16 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu flatten linear(10)", "post-op", 2);
    /* strided conv, tanh, no bias */
    parity("seq in=3x11x11 conv(5,3,stride=2,bias=0) tanh conv(4,2) flatten linear(3)", "post-op", 1);
    /* residual MLP: linear + add in place, then gelu */
    parity("seq in=10 linear(16) res[ linear(32) relu linear(16) ] gelu linear(4)", "post-op", 3);
    /* GPT: per block linear+gelu(tanh), two residual sums */
    parity("gpt layers=2 heads=2 dim=16 ctx=8 vocab=11", "post-op", 6);
    gpt_attention("gpt layers=2 heads=2 dim=16 ctx=8 vocab=11", 2);
    char path[512];
    snprintf(path, sizeof path, "%s/convbn.onnx", dir);
    onnx_conv_bn(path);
    onnx_parity(path, "folded", 2);
    onnx_export_parity("seq in=1x12x12 conv(4,3,pad=1) relu maxpool(2) flatten linear(6)", true, dir, "post-op", 1);
    onnx_export_parity("seq in=10 linear(16) res[ linear(32) relu linear(16) ] gelu linear(4)", false, dir, "post-op", 3);
    onnx_export_parity("seq in=10 linear(16) tanh linear(4)", true, dir, "post-op", 1);
    file_tests(dir);
    /* two 3x3 convs over 16 channels (Winograd's), one over 3 (an image: direct), a relu post-op */
    conv_algs("seq in=3x12x12 conv(16,3,pad=1) relu conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) flatten linear(5)",
              dir);
    bf16("seq in=1x14x14 conv(6,3,pad=1) relu maxpool(2) flatten linear(12) relu linear(4)");
    bf16("gpt layers=2 heads=2 dim=16 ctx=8 vocab=11");
    bf16_image("seq in=3x16x16 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu flatten linear(10)", dir);
    int8("seq in=1x14x14 conv(6,3,pad=1) relu maxpool(2) conv(8,3,pad=1) relu flatten linear(12) relu linear(4)", dir);
    int8("mlp 20-16-12-5", dir);
    snprintf(path, sizeof path, "rm -rf %s", dir);
    if (system(path)) fprintf(stderr, "could not remove %s\n", dir);
    return rs_test_finish("plan");
}
