/* Fuzz target for the KServe v2 infer request decoder (serve/http_infer.c): the first two bytes give the
 * Inference-Header-Content-Length (0xffff: no header), the rest is the body. Every input must get a
 * reply: 200 with outputs of the model's shape, or 4xx/5xx with Triton's {"error": "..."}. The model is
 * a small MLP served through the real backend and scheduler (two instances, dynamic batching). */
#define _GNU_SOURCE /* memmem */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/nn/spec.h"
#include "fuzz.h"
#include "onnx/export.h"
#include "serve/http_internal.h"

static rs_serve_model *model;

static void setup(void)
{
    rs_model *m;
    rs_err e = {0};
    char path[] = "/tmp/rs-fuzz-infer-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) __builtin_trap();
    close(fd);
    if (rs_model_parse("mlp 3-5-2", "f", rs_device_cpu(), NULL, 1, &m, NULL, &e) || rs_onnx_export(m, path, 0, &e))
        __builtin_trap();
    rs_model_free(m);
    model = calloc(1, sizeof *model);
    rs_serve_config *c = &model->cfg;
    rs_serve_config_init(c);
    snprintf(c->name, sizeof c->name, "f");
    c->max_batch_size = 4;
    c->instance_count = 2;
    c->dynamic_batching = true;
    c->ninputs = c->noutputs = 1;
    model->nversions = 1;
    model->v[0].version = 1;
    if (rs_serve_backend_load(path, &model->v[0].backend, &e)) __builtin_trap();
    unlink(path);
    rs_serve_backend_io(model->v[0].backend, &c->inputs[0], &c->outputs[0]);
    if (rs_serve_sched_new(model->v[0].backend, c, &model->v[0].sched, &e)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model) setup();
    if (size < 2 || size > 65536) return 0;
    long long hl = data[0] == 0xff && data[1] == 0xff ? -1 : (long long)(data[0] | data[1] << 8);
    rs_serve_reply r = {0};
    rs_serve_infer(model, &model->v[0], (const char *)data + 2, size - 2, hl, &r);
    if (!r.body) __builtin_trap();
    /* RS_FUZZ_SHOW=1 prints each reply: what the seeds and mutations reach. */
    if (getenv("RS_FUZZ_SHOW")) fprintf(stderr, "%d %.*s\n", r.status, (int)(r.len < 120 ? r.len : 120), r.body);
    size_t jl = r.header_len >= 0 ? (size_t)r.header_len : r.len;
    json_t *j = json_loadb(r.body, jl, 0, NULL);
    /* a non-finite output is written NaN / Infinity, as Triton writes it, which jansson does not read */
    if (!j && r.status == 200 && (memmem(r.body, jl, "Infinity", 8) || memmem(r.body, jl, "NaN", 3))) {
        free(r.body);
        return 0;
    }
    if (!j) __builtin_trap();
    if (r.status == 200) {
        json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
        json_t *shape = json_object_get(o, "shape");
        json_int_t B = json_integer_value(json_array_get(shape, 0));
        if (B < 1 || B > 4 || json_integer_value(json_array_get(shape, 1)) != 2) __builtin_trap();
        if (r.header_len >= 0 ? r.len != jl + (size_t)B * 2 * sizeof(float)
                              : json_array_size(json_object_get(o, "data")) != (size_t)B * 2)
            __builtin_trap();
    } else if (r.status < 400 || !json_is_string(json_object_get(j, "error"))) {
        __builtin_trap();
    }
    json_decref(j);
    free(r.body);
    return 0;
}

#define SEED(s) {(const uint8_t *)(s), sizeof(s) - 1}
static const rs_fuzz_seed seed_list[] = {
    SEED("\xff\xff{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[2,3],\"data\":[1,2,3,4,5,6]}]}"),
    SEED("\xff\xff{\"id\":\"x\",\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[[1,2,3]]}],"
         "\"outputs\":[{\"name\":\"logits\",\"parameters\":{\"binary_data\":true}}]}"),
    SEED("\x62\x00{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,3],\"parameters\":{\"binary_data_size\":12}}]}"
         "\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40"),
    SEED("\xff\xff{\"inputs\":[{\"name\":\"input\",\"datatype\":\"INT64\",\"shape\":[9,3],\"data\":[]}],\"outputs\":3}"),
};

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    *seeds = seed_list;
    return sizeof seed_list / sizeof *seed_list;
}
