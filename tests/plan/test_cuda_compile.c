/* Plans for a GPU, on any machine (suite plan; test_cuda_run.c runs them where a GPU is lent): an MLP,
 * a CNN and a GPT compile with device=cuda at fp32 and bf16 without opening a GPU; their weights are
 * plain row-major (bf16 ones the model's rounded to nearest even), their values in no oneDNN layout;
 * the file says cuda, its target and libraries, and reads back to the same bytes; plan show's text
 * names them and each node's cuDNN / cuBLASLt kernel; running or loading one for running is refused
 * where there is no GPU, naming cuda and what would work (device=cpu); int8 for cuda, a device field
 * no plan has, a cuda plan without a target or with a oneDNN layout are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cpu/amp.h"
#include "engine/cuda/cuda.h"
#include "engine/nn/spec.h"
#include "plan/ir.h"
#include "plan/plan.h"
#include "rs_test.h"
#include "plan_check.h"

static rs_plan *compile_cuda(rs_model *m, rs_plan_prec prec, rs_err *e)
{
    rs_plan_opts o = rs_plan_opts_default();
    o.prec = prec;
    o.batch = 8;
    o.device = RS_PLAN_DEV_CUDA;
    rs_plan *p = NULL;
    if (rs_plan_compile(m, &o, &p, e) != RS_OK) return NULL;
    return p;
}

static void expect_refused(const uint8_t *b, size_t n, const char *needle, const char *what)
{
    expect_bytes_refused(b, n, true, needle, what);
}

/* The weights of p's products are plain, bf16 exactly where the node is, and equal the model's
 * (rounded to bf16 there). */
static void check_weights(rs_model *m, const rs_plan *p, const char *what)
{
    const float *w = rs_model_params(m);
    size_t np = rs_model_numel(m);
    for (int i = 0; i < p->nnodes; i++) {
        const rs_pnode *n = &p->nodes[i];
        if (n->kind != RS_PK_CONV && n->kind != RS_PK_LINEAR) continue;
        const rs_ptensor *t = &p->tensors[n->w];
        bool bf = n->prec == RS_PLAN_BF16;
        RS_CHECK(t->layout == 0 && t->dtype == (bf ? RS_BF16 : RS_F32), "%s: node %s: weights dtype %d layout %d", what,
                 n->name, (int)t->dtype, t->layout);
        size_t count = t->bytes / rs_dtype_size(t->dtype);
        /* the model's parameters hold this tensor somewhere as fp32 (unfolded: no BatchNorm here) */
        float first;
        if (bf) {
            uint32_t u = (uint32_t)((const uint16_t *)t->data)[0] << 16;
            memcpy(&first, &u, sizeof u);
        } else {
            first = ((const float *)t->data)[0];
        }
        bool found = false;
        for (size_t a = 0; a + count <= np && !found; a++) {
            uint32_t u;
            memcpy(&u, &w[a], sizeof u);
            float r;
            uint32_t rb = amp_bf16_bits(u);
            memcpy(&r, &rb, sizeof r);
            if ((bf ? r : w[a]) != first) continue;
            bool all = true;
            for (size_t j = 0; j < count && all; j++) {
                memcpy(&u, &w[a + j], sizeof u);
                if (bf) all = ((const uint16_t *)t->data)[j] == (uint16_t)(amp_bf16_bits(u) >> 16);
                else all = ((const float *)t->data)[j] == w[a + j];
            }
            found = all;
        }
        RS_CHECK(found, "%s: node %s: its %zu weights are not the model's (row-major%s)", what, n->name, count,
                 bf ? ", rounded to bf16" : "");
    }
    for (int v = 0; v < p->nvalues; v++)
        RS_CHECK(p->values[v].layout == 0, "%s: value %d in layout %d", what, v, p->values[v].layout);
}

static void one(const char *spec, rs_plan_prec prec, bool have_gpu, const char *dir)
{
    char what[160];
    snprintf(what, sizeof what, "%s (%s)", spec, rs_plan_prec_name(prec));
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 5, &m, NULL, &e) == RS_OK, "%s", e.msg);
    if (!m) return;
    rs_plan *p = compile_cuda(m, prec, &e);
    RS_CHECK(p != NULL, "%s: compile device=cuda: %s", what, e.msg);
    if (!p) {
        rs_model_free(m);
        return;
    }
    RS_CHECK(!strcmp(rs_plan_device(p), "cuda") && !strncmp(p->cuda_target, "sm_", 3) && p->cudnn_version[0] &&
                 !p->isa[0] && !p->cu,
             "%s: device %s target '%s' cuDNN '%s' isa '%s' opened %d", what, rs_plan_device(p), p->cuda_target,
             p->cudnn_version, p->isa, p->cu != NULL);
    RS_CHECK(rs_plan_check_memory(p, &e) == RS_OK, "%s: %s", what, e.msg);
    check_weights(m, p, what);

    /* the file: says cuda, reads back to the same bytes */
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t n = 0, n2 = 0;
    RS_CHECK(rs_plan_serialize(p, &buf, &n, &e) == RS_OK, "%s: %s", what, e.msg);
    rs_plan *q = NULL;
    RS_CHECK(rs_plan_inspect_buffer(buf, n, "c.plan", &q, &e) == RS_OK, "%s: inspect: %s", what, e.msg);
    if (q) {
        RS_CHECK(rs_plan_serialize(q, &buf2, &n2, &e) == RS_OK, "%s", e.msg);
        RS_CHECK(n == n2 && !memcmp(buf, buf2, n), "%s: the file read back serializes to other bytes", what);
        free(buf2);
        char *d = rs_plan_describe(q);
        bool conv = strstr(spec, "conv") != NULL;
        RS_CHECK(d && strstr(d, "on cuda sm_") && strstr(d, "cuDNN ") && strstr(d, "cuBLASLt ") &&
                     strstr(d, "cublasLt +bias") && (!conv || strstr(d, "cudnn conv")) && (!conv || strstr(d, "cudnn maxpool")),
                 "%s: plan show says:\n%s", what, d ? d : "(null)");
        if (!have_gpu) RS_CHECK(d && strstr(d, "not opened on a GPU here"), "%s: show: %s", what, d ? d : "");
        free(d);
        char tgt[128];
        rs_plan_target(q, tgt, sizeof tgt);
        RS_CHECK(!strncmp(tgt, "cuda sm_", 8), "%s: target '%s'", what, tgt);
    }
    rs_plan_free(q);

    /* running: refused without a GPU, naming cuda and what works */
    if (!have_gpu) {
        q = NULL;
        rs_status st = rs_plan_load_buffer(buf, n, "c.plan", &q, &e);
        RS_CHECK(st != RS_OK && !q && strstr(e.msg, "c.plan") && strstr(e.msg, "built for cuda") &&
                     strstr(e.msg, "no GPU") && strstr(e.msg, "device=cpu"),
                 "%s: load for running: %d '%s'", what, (int)st, e.msg);
        rs_plan_free(q);
        size_t in = (size_t)8 * (size_t)rs_shape_numel(rs_plan_input_shape(p));
        float *x = calloc(in, sizeof *x); /* zeros: token 0 is in every vocabulary */
        const float *y = NULL;
        e.msg[0] = 0;
        RS_CHECK(rs_plan_run(p, x, 8, &y, &e) != RS_OK && strstr(e.msg, "built for cuda") && strstr(e.msg, "device=cpu"),
                 "%s: run without a GPU: '%s'", what, e.msg);
        free(x);
        /* the same through a file: plan show reads it (inspect), `model p = plan` does not (load) */
        char path[512];
        snprintf(path, sizeof path, "%s/c.plan", dir);
        RS_CHECK(rs_plan_save(p, path, &e) == RS_OK, "%s", e.msg);
        q = NULL;
        RS_CHECK(rs_plan_inspect(path, &q, &e) == RS_OK, "%s: inspect file: %s", what, e.msg);
        rs_plan_free(q);
        q = NULL;
        RS_CHECK(rs_plan_load(path, &q, &e) != RS_OK && !q && strstr(e.msg, "built for cuda"), "%s: load file: %s", what,
                 e.msg);
        rs_plan_free(q);
    }
    free(buf);
    rs_plan_free(p);
    rs_model_free(m);
}

/* int8 for cuda, a device no plan has, a cuda plan without its target, with a oneDNN layout or
 * with fp32 weights in a bf16 node. */
static void refusals(void)
{
    rs_err e = {0};
    rs_model *m = NULL;
    const char *spec = "seq in=8x6x6 conv(8,3,pad=1) relu maxpool(2) flatten linear(3)";
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 5, &m, NULL, &e) == RS_OK, "%s", e.msg);
    if (!m) return;
    rs_plan_opts o = rs_plan_opts_default();
    o.device = RS_PLAN_DEV_CUDA;
    o.prec = RS_PLAN_INT8;
    rs_plan *p = NULL;
    RS_CHECK(rs_plan_compile(m, &o, &p, &e) != RS_OK && !p && strstr(e.msg, "int8") && strstr(e.msg, "device=cpu") &&
                 strstr(e.msg, "fp32") && strstr(e.msg, "bf16"),
             "int8 for cuda: %s", e.msg);
    p = compile_cuda(m, RS_PLAN_BF16, &e);
    RS_CHECK(p != NULL, "%s", e.msg);
    if (!p) {
        rs_model_free(m);
        return;
    }
    uint8_t *buf;
    size_t n;
    expect_field_refused(p, p->device, sizeof p->device, "tpu", true,
                         "built for device 'tpu'; plans are for the cpu or cuda", "device tpu");
    expect_field_refused(p, p->cuda_target, sizeof p->cuda_target, "gfx90a", true, "without a valid target",
                         "target gfx90a");
    /* a cpu plan's blocked layout in a cuda plan: the GPU runtime reads every value plain */
    int v = p->nodes[0].out;
    p->values[v].layout = 1;
    p->values[v].padded = p->values[v].numel;
    RS_CHECK(rs_plan_serialize(p, &buf, &n, &e) == RS_OK, "%s", e.msg);
    expect_refused(buf, n, "of a cuda plan has oneDNN's layout", "blocked value");
    free(buf);
    p->values[v].layout = 0;
    p->values[v].padded = 0;
    /* the bf16 conv's weights claimed fp32: sizes no longer fit what it reads */
    rs_ptensor *t = &p->tensors[p->nodes[0].w];
    RS_CHECK(p->nodes[0].prec == RS_PLAN_BF16 && t->dtype == RS_BF16, "conv 0: prec %d dtype %d", (int)p->nodes[0].prec,
             (int)t->dtype);
    t->dtype = RS_F32;
    RS_CHECK(rs_plan_serialize(p, &buf, &n, &e) == RS_OK, "%s", e.msg);
    expect_refused(buf, n, "of a cuda plan reads", "bf16 weights as fp32");
    free(buf);
    t->dtype = RS_BF16;
    RS_CHECK(rs_plan_serialize(p, &buf, &n, &e) == RS_OK, "%s", e.msg);
    rs_plan *q = NULL;
    RS_CHECK(rs_plan_inspect_buffer(buf, n, "t.plan", &q, &e) == RS_OK, "restored: %s", e.msg);
    rs_plan_free(q);
    free(buf);
    rs_plan_free(p);
    rs_model_free(m);
}

int main(void)
{
    char dir[] = "/tmp/rs-plan-cuda-XXXXXX";
    if (!mkdtemp(dir)) RS_SKIP("no temporary folder");
    rs_cuda_info ci;
    rs_cuda_query(&ci);
    bool gpu = ci.count > 0;
    if (gpu) printf("a GPU is here: the refusals for lack of one are not checked (suite cuda runs the plans)\n");
    const char *specs[] = {
        "mlp 20-16-12-5",
        "seq in=1x14x14 conv(6,3,pad=1) relu maxpool(2) conv(8,3,pad=1) relu maxpool(2) flatten linear(12) relu linear(4)",
        "gpt layers=2 heads=2 dim=16 ctx=8 vocab=11",
    };
    for (int i = 0; i < 3; i++) {
        one(specs[i], RS_PLAN_FP32, gpu, dir);
        one(specs[i], RS_PLAN_BF16, gpu, dir);
    }
    refusals();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return rs_test_finish("plan-cuda-compile");
}
