/* Fuzz target for the config.pbtxt parser: any bytes must either fail with a message that starts with
 * the file name and a line:column inside the text, or give a config whose fields are within their
 * limits and whose written form (rs_serve_config_write) parses back to the same settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "serve/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192) return 0;
    rs_serve_config c;
    rs_err e = {0};
    if (rs_serve_config_parse((const char *)data, size, "f", &c, &e) != RS_OK) {
        if (strncmp(e.msg, "f:", 2)) __builtin_trap();
        int line = 0, col = 0;
        if (sscanf(e.msg, "f:%d:%d:", &line, &col) == 2) {
            int lines = 1;
            for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
            if (line < 1 || line > lines || col < 1 || (size_t)col > size + 1) __builtin_trap();
        }
        return 0;
    }
    if (c.ninputs > RS_SERVE_MAX_IO || c.noutputs > RS_SERVE_MAX_IO || c.npreferred > RS_SERVE_MAX_PREFERRED ||
        c.nversions > RS_SERVE_MAX_VERSIONS || c.max_batch_size < 0)
        __builtin_trap();
    for (int i = 0; i < c.ninputs; i++)
        if (c.inputs[i].rank > RS_SERVE_MAX_DIMS || !c.inputs[i].name[0]) __builtin_trap();
    /* Names with quotes or newlines are not written back verbatim; the round trip covers the rest. */
    if (strpbrk(c.name, "\"\\\n") || strpbrk(c.platform, "\"\\\n") || strpbrk(c.backend, "\"\\\n")) return 0;
    for (int i = 0; i < c.ninputs + c.noutputs; i++)
        if (strpbrk(i < c.ninputs ? c.inputs[i].name : c.outputs[i - c.ninputs].name, "\"\\\n")) return 0;
    char *w = rs_serve_config_write(&c);
    if (!w) return 0;
    rs_serve_config d;
    if (rs_serve_config_parse(w, strlen(w), "w", &d, &e) != RS_OK) __builtin_trap();
    if (strcmp(d.name, c.name) || d.max_batch_size != c.max_batch_size || d.ninputs != c.ninputs ||
        d.noutputs != c.noutputs || d.npreferred != c.npreferred || d.max_queue_delay_us != c.max_queue_delay_us ||
        d.decoupled != c.decoupled || d.vpolicy != c.vpolicy)
        __builtin_trap();
    free(w);
    return 0;
}

#define SEED(s) {(const uint8_t *)(s), sizeof(s) - 1}
static const rs_fuzz_seed seed_list[] = {
    SEED("name: \"digits\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: 32\n"
         "input [ { name: \"input\" data_type: TYPE_FP32 dims: [ 1, 28, 28 ] } ]\n"
         "output [ { name: \"logits\" data_type: TYPE_FP32 dims: [ 10 ] } ]\n"
         "instance_group [ { count: 2 kind: KIND_CPU } ]\n"
         "dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 500 }\n"),
    SEED("model_transaction_policy { decoupled: true }\nversion_policy: { specific { versions: [1, 3] } }\n"),
    SEED("version_policy < latest < num_versions: 2 > >\noutput { name: 'p' data_type: TYPE_FP16 dims: -1 }"),
    SEED("dynamic_batching { default_queue_policy { max_queue_size: 10 } preferred_batch_size: 2 }\n# comment\n"),
    SEED("optimization { execution_accelerators { gpu_execution_accelerator: [ { name: \"tensorrt\" } ] } }"),
    SEED("parameters { key: \"a\" value: { string_value: \"b\\n\" } }\nmax_batch_size: 0x10"),
};

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    *seeds = seed_list;
    return sizeof seed_list / sizeof *seed_list;
}
