/* Fuzz target for the plan loader (plan/file.c, plan/validate.c): any bytes must be refused with a
 * message or give a plan whose memory plan holds (rs_plan_check_memory) and that runs one sample.
 * The first byte chooses the form: 0, the rest is a plan message and the target writes a correct
 * header around it (so mutations reach the parser and the graph checks instead of stopping at the
 * checksum); anything else, the rest is a whole file, header included. Seeds are plans compiled here
 * from a small MLP, a CNN and a GPT, for the CPU and (refused here without a GPU) for cuda. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "engine/nn/spec.h"
#include "fuzz.h"
#include "plan/plan.h"

#define HEADER 24

/* How far inputs got (FUZZ_PLAN_STATS=1 prints it at exit): a target whose inputs all stop at the
 * first check tests nothing. */
static long tried, loaded;
static void stats(void) { fprintf(stderr, "fuzz-plan: %ld inputs, %ld loaded and ran\n", tried, loaded); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20)) return 0;
    if (!tried++ && getenv("FUZZ_PLAN_STATS")) atexit(stats);
    uint8_t *file;
    size_t n;
    if (data[0] == 0) {
        n = HEADER + size - 1;
        file = malloc(n);
        memcpy(file, "RINGPLAN", 8);
        uint32_t v = RS_PLAN_FORMAT_VERSION, crc = (uint32_t)crc32(0L, data + 1, (uInt)(size - 1));
        uint64_t len = size - 1;
        for (int i = 0; i < 4; i++) file[8 + i] = (uint8_t)(v >> (8 * i));
        for (int i = 0; i < 4; i++) file[12 + i] = (uint8_t)(crc >> (8 * i));
        for (int i = 0; i < 8; i++) file[16 + i] = (uint8_t)(len >> (8 * i));
        memcpy(file + HEADER, data + 1, size - 1);
    } else {
        n = size - 1;
        file = malloc(n ? n : 1);
        memcpy(file, data + 1, n);
    }
    rs_plan *p = NULL;
    rs_err e = {0};
    rs_status st = rs_plan_load_buffer(file, n, "fuzz", &p, &e);
    free(file);
    if (st != RS_OK) {
        if (p || !e.msg[0]) __builtin_trap();
        return 0;
    }
    if (rs_plan_check_memory(p, &e) != RS_OK) __builtin_trap();
    loaded++;
    size_t in = (size_t)rs_shape_numel(rs_plan_input_shape(p));
    float *x = calloc(in ? in : 1, sizeof *x); /* zeros: token 0 is in every vocabulary */
    const float *out;
    if (x && rs_plan_run(p, x, 1, &out, &e) != RS_OK && !e.msg[0]) __builtin_trap();
    free(x);
    rs_plan_free(p);
    return 0;
}

static rs_fuzz_seed seeds[12];

static void add_seed(const char *spec, rs_plan_conv_alg alg, rs_plan_dev dev, rs_plan_prec prec, size_t *ns)
{
    rs_model *m = NULL;
    rs_err e;
    if (rs_model_parse(spec, "s", rs_device_cpu(), NULL, 1, &m, NULL, &e)) return;
    rs_plan_opts o = rs_plan_opts_default();
    o.batch = 2;
    o.conv_alg = alg;
    o.device = dev;
    o.prec = prec;
    rs_plan *p = NULL;
    uint8_t *buf;
    size_t n;
    if (!rs_plan_compile(m, &o, &p, &e) && !rs_plan_serialize(p, &buf, &n, &e)) {
        uint8_t *a = malloc(n - HEADER + 1), *b = malloc(n + 1); /* kept until exit, as fuzz.h says */
        a[0] = 0;
        memcpy(a + 1, buf + HEADER, n - HEADER);
        b[0] = 1;
        memcpy(b + 1, buf, n);
        seeds[(*ns)++] = (rs_fuzz_seed){a, n - HEADER + 1};
        seeds[(*ns)++] = (rs_fuzz_seed){b, n + 1};
        free(buf);
    }
    rs_plan_free(p);
    rs_model_free(m);
}

size_t rs_fuzz_seeds(const rs_fuzz_seed **out)
{
    size_t ns = 0;
    add_seed("mlp 6-5-3", RS_PLAN_CONV_AUTO, RS_PLAN_DEV_CPU, RS_PLAN_FP32, &ns);
    add_seed("seq in=1x6x6 conv(2,3,pad=1) relu maxpool(2) flatten linear(3)", RS_PLAN_CONV_AUTO, RS_PLAN_DEV_CPU, RS_PLAN_FP32, &ns);
    add_seed("gpt layers=1 heads=2 dim=8 ctx=4 vocab=5", RS_PLAN_CONV_AUTO, RS_PLAN_DEV_CPU, RS_PLAN_FP32, &ns);
    /* Winograd where oneDNN has it (AVX-512): plain weights, the algorithm fields */
    add_seed("seq in=8x6x6 conv(16,3,pad=1) relu flatten linear(3)", RS_PLAN_CONV_WINOGRAD, RS_PLAN_DEV_CPU, RS_PLAN_FP32, &ns);
    /* plans for a GPU (the cuda fields, bf16 weights in plain layout): loaded where one is, refused with
     * the reason elsewhere, after the same graph checks */
    add_seed("seq in=4x6x6 conv(8,3,pad=1) relu maxpool(2) flatten linear(3)", RS_PLAN_CONV_AUTO, RS_PLAN_DEV_CUDA,
             RS_PLAN_BF16, &ns);
    add_seed("gpt layers=1 heads=2 dim=8 ctx=4 vocab=5", RS_PLAN_CONV_AUTO, RS_PLAN_DEV_CUDA, RS_PLAN_FP32, &ns);
    *out = seeds;
    return ns;
}
