/* Fuzz target for the model spec parser: any text must either fail with a message and an error
 * position inside the text, or give a model whose layout is sound (offsets increasing, aligned,
 * inside the parameter count) and whose spec, written back by rs_model_spec, parses to the same
 * layout. Only the layout is computed (rs_model_parse_layout), so huge sizes cost no memory. */
#include <stdlib.h>
#include <string.h>

#include "engine/nn/spec.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    rs_model *m = NULL;
    rs_err e = {0};
    size_t pos = (size_t)-1;
    rs_status st = rs_model_parse_layout(text, "f", rs_device_cpu(), NULL, &m, &pos, &e);
    if (st != RS_OK) {
        if (m || !e.msg[0]) __builtin_trap();
        if (pos != (size_t)-1 && pos > strlen(text)) __builtin_trap();
        free(text);
        return 0;
    }
    size_t prev_end = 0, n = rs_model_numel(m);
    for (int i = 0; i < rs_model_layer_count(m); i++) {
        const rs_layer *l = rs_model_layer(m, i);
        for (int j = 0; j < l->np; j++) {
            if (l->p[j].tied) continue; /* a view of an earlier parameter */
            if (l->p[j].offset < prev_end || l->p[j].offset % 16) __builtin_trap();
            prev_end = l->p[j].offset + l->p[j].numel;
            if (prev_end > n) __builtin_trap();
        }
    }
    char *again = rs_model_spec(m);
    rs_model *m2 = NULL;
    if (rs_model_parse_layout(again, "g", rs_device_cpu(), NULL, &m2, NULL, &e) != RS_OK) __builtin_trap();
    if (rs_model_numel(m2) != n || rs_model_layer_count(m2) != rs_model_layer_count(m) ||
        rs_model_classes(m2) != rs_model_classes(m))
        __builtin_trap();
    rs_model_free(m2);
    free(again);
    rs_model_free(m);
    free(text);
    return 0;
}

#define SEED(s) {(const uint8_t *)(s), sizeof(s) - 1}
static const rs_fuzz_seed seed_list[] = {
    SEED("mlp 784-256-10 act=relu"),
    SEED("mlp 784-256-256-10 act=gelu dropout=0.1 in=1x28x28"),
    SEED("seq conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)"),
    SEED("seq in=3x32x32 [ conv(8,3x5,stride=2x1,pad=1x2,bias=0) gelu avgpool(3,stride=2,pad=1) ] [ [ conv(4,1) "
         "tanh ] ] flatten layernorm(eps=1e-6) dropout(0.5) linear(10,bias=0)"),
    SEED("seq in=11 linear(7) tanh layernorm linear(3)"),
    SEED("gpt layers=2 heads=2 dim=16 ctx=8 vocab=11 dropout=0.1"),
    SEED("seq ctx=8 embed(11,16,std=0.02) res[ layernorm linear(48) attn(2) linear(16,std=0.01) ] "
         "res[ layernorm linear(64) gelu(tanh) linear(16) ] layernorm linear(11,bias=0,tie=0.wte)"),
    SEED("seq in=6 linear(8) res[ linear(8) res[ tanh linear(8) ] ] linear(4)"),
};

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    *seeds = seed_list;
    return sizeof seed_list / sizeof *seed_list;
}
