/* Builds every layer kind (alone, in the MLP and CNN of the tutorials, in a residual MLP and in a small
 * GPT) from a fixed seed, exports each to ONNX, and writes the model's own forward output on a fixed
 * input, for batch 1 and batch 7, so check_export.py can run the same inputs through ONNX Runtime and
 * compare.
 * Usage: export-models DIR. Writes DIR/<case>.onnx, DIR/<case>.b<B>.in (raw little-endian float32,
 * or int32 token ids for a token model) and .out (float32), and DIR/manifest.txt, one line per file
 * pair: "<case> <opset> <B> <f32|tok> <in dims> | <out dims>". A case marked `repl` is left as built
 * (no nudge): check_export.py builds it again at the prompt (`model NAME = SPEC seed=SEED`), exports
 * it with `export`, and compares that file with the same outputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/nn/spec.h"
#include "onnx/export.h"
#include "onnx/inspect.h"

typedef struct tcase {
    const char *name, *spec;
    int opset;
    bool softmax;
    bool repl; /* also exported through the REPL by check_export.py: parameters as built, seed REPL_SEED */
} tcase;

#define GPT "gpt layers=2 heads=2 dim=16 ctx=8 vocab=11"
#define RESMLP "seq in=6 linear(8) res[ layernorm linear(8) tanh ] linear(4)"
#define REPL_SEED 7

static const tcase cases[] = {
    {"mlp", "mlp 784-64-10", 17, false, false},
    {"mlp_softmax", "mlp 784-64-10", 17, true, false},
    {"cnn", "seq in=1x28x28 conv(8,3,pad=1) relu maxpool(2) conv(16,3,pad=1) relu avgpool(2) flatten linear(10)",
     17, false, false},
    {"cnn_op13", "seq in=1x28x28 conv(8,3,pad=1) relu maxpool(2) conv(16,3,pad=1) relu avgpool(2) flatten linear(10)",
     13, false, false},
    {"conv_stride2", "seq in=1x8x8 conv(3,3,stride=2,pad=1) flatten", 17, false, false},
    {"conv_rect_nobias", "seq in=2x7x9 conv(4,3x2,stride=2x1,pad=1x0,bias=0) flatten", 15, false, false},
    {"linear_nobias", "seq in=16 linear(8,bias=0)", 14, false, false},
    {"gelu_op17", "mlp 16-12-8 act=gelu", 17, false, false},
    {"gelu_op20", "mlp 16-12-8 act=gelu", 20, false, false},
    {"gelu_op13", "mlp 16-12-8 act=gelu", 13, false, false},
    {"silu", "mlp 16-12-8 act=silu", 17, false, false}, /* Sigmoid then Mul, as torch.onnx writes SiLU */
    {"tanh", "mlp 16-12-8 act=tanh", 17, false, false},
    {"relu", "mlp 16-12-8", 21, false, false},
    {"layernorm_op17", "seq in=16 linear(8) layernorm", 17, false, false},
    {"layernorm_op13", "seq in=16 linear(8) layernorm", 13, false, false},
    {"layernorm_op16_eps", "seq in=16 linear(8) layernorm(eps=0.001)", 16, false, false},
    {"layernorm_image", "seq in=2x3x5 layernorm flatten", 18, false, false},
    {"maxpool", "seq in=2x8x8 maxpool(2) flatten", 17, false, false},
    {"maxpool_pad", "seq in=2x9x9 maxpool(3,stride=2,pad=1) flatten", 19, false, false},
    {"avgpool", "seq in=2x8x8 avgpool(2) flatten", 17, false, false},
    {"avgpool_pad", "seq in=2x9x9 avgpool(3,stride=2,pad=1) flatten", 19, false, false},
    {"flatten", "seq in=2x3x4 flatten", 17, false, false},
    {"dropout_only", "seq in=16 dropout(0.5)", 17, false, false},
    {"dropout_mlp", "mlp 16-12-8 dropout=0.3", 17, false, false},
    {"blocks", "seq in=1x8x8 [ conv(4,3,pad=1) relu ] [ conv(4,3,pad=1) gelu ] flatten linear(5)", 17, false, false},
    /* The graph: residual blocks (add reads the block's last layer and its input). */
    {"resmlp", RESMLP, 17, false, false},
    {"resmlp_op13", RESMLP, 13, false, false},
    {"res_dropout", "seq in=6 linear(8) res[ linear(8) dropout(0.2) ] dropout(0.1)", 17, false, false},
    {"res_nested", "seq in=5 res[ linear(5) res[ relu linear(5) ] ] gelu linear(3)", 15, false, false},
    /* Transformers: tokens -> Gather, attention, gelu(tanh), the tied head. */
    {"gpt_op17", GPT, 17, false, false},
    {"gpt_op18", GPT, 18, false, false},
    {"gpt_op20", GPT, 20, false, false},
    {"gpt_op14", GPT, 14, false, false},
    {"gpt_softmax", GPT, 18, true, false},
    {"gpt_3heads", "gpt layers=1 heads=3 dim=12 ctx=5 vocab=7", 17, false, false},
    {"gpt_repl", GPT, 18, false, true},
    {"tied_linear_seq", "seq ctx=6 embed(9,8) linear(8) relu linear(8,bias=0,tie=1.weight) linear(9,tie=0.wte)", 17,
     false, false},
    {"seq_layers", "seq ctx=4 embed(5,6) layernorm linear(12) gelu flatten linear(3)", 16, false, false},
};

static int write_raw(const char *path, const float *x, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(x, sizeof *x, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

static void put_shape(FILE *f, const rs_shape *s)
{
    for (int i = 0; i < s->ndim; i++) fprintf(f, " %lld", (long long)s->d[i]);
}

/* DIR/NAME opened for writing (NULL: said on stderr). */
static FILE *open_in(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) perror(path);
    return f;
}

/* "IN-DIMS | OUT-DIMS" and the line's end, after a manifest line's name, opset, batch and kind. */
static void put_shapes(FILE *f, const rs_shape *in, const rs_shape *out)
{
    put_shape(f, in);
    fputs(" |", f);
    put_shape(f, out);
    fputc('\n', f);
}

/* Every parameter moved by amp * N(0, 1), so that layernorm's ones and zeros are not what the test sees
 * (and, for a GPT's N(0, 0.02) weights, so that attention is far from uniform). */
static void nudge(rs_model *m, rs_rng *r, float amp)
{
    float *p = rs_model_params(m);
    for (int i = 0; i < rs_model_tensor_count(m); i++) {
        const rs_param_info *pi = rs_model_tensor(m, i);
        for (size_t k = 0; k < pi->numel; k++) p[pi->offset + k] += amp * rs_rng_normal(r);
    }
}

/* What an exported Softmax over the last axis adds, in float64, so the comparison stays one-to-one. */
static void softmax_rows(float *y, size_t rows, size_t nc)
{
    for (size_t b = 0; b < rows; b++) {
        float *row = y + b * nc, mx = row[0];
        double s = 0;
        for (size_t k = 1; k < nc; k++) mx = row[k] > mx ? row[k] : mx;
        for (size_t k = 0; k < nc; k++) s += exp((double)row[k] - mx);
        for (size_t k = 0; k < nc; k++) row[k] = (float)(exp((double)row[k] - mx) / s);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    char path[4096];
    FILE *man = open_in(dir, "manifest.txt");
    FILE *repl = open_in(dir, "repl.txt"); /* "<case> <opset> <seed> <spec>": what to build again at the prompt */
    if (!man || !repl) {
        if (man) fclose(man);
        if (repl) fclose(repl);
        return 1;
    }
    int failures = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const tcase *t = &cases[c];
        rs_err err = {0};
        rs_model *m = NULL;
        uint64_t seed = t->repl ? REPL_SEED : 1234 + c;
        if (rs_model_parse(t->spec, t->name, rs_device_cpu(), NULL, seed, &m, NULL, &err)) {
            fprintf(stderr, "FAIL %s: %s: %s\n", t->name, t->spec, err.msg);
            failures++;
            continue;
        }
        rs_model_set_training(m, false);
        bool tokens = rs_model_tokens(m);
        rs_rng r;
        rs_rng_seed(&r, 99 + c);
        if (!t->repl) nudge(m, &r, tokens ? 0.3f : 0.1f);
        if (t->repl) fprintf(repl, "%s %d %d %s\n", t->name, t->opset, REPL_SEED, t->spec);
        rs_onnx_export_opts o = {.opset = t->opset, .softmax = t->softmax};
        snprintf(path, sizeof path, "%s/%s.onnx", dir, t->name);
        if (rs_onnx_export_ex(m, path, &o, &err)) {
            fprintf(stderr, "FAIL %s: export: %s\n", t->name, err.msg);
            failures++;
            rs_model_free(m);
            continue;
        }
        /* ringside's own checker must agree with onnx.checker: nothing to report. */
        int findings = -1;
        if (rs_onnx_check(path, stderr, &findings, &err) || findings) {
            fprintf(stderr, "FAIL %s: rs_onnx_check: %d findings %s\n", t->name, findings, err.msg);
            failures++;
        }
        const rs_shape *in = rs_model_input_shape(m);
        const rs_shape *out = &rs_model_layer(m, rs_model_layer_count(m) - 1)->out;
        size_t nin = (size_t)rs_shape_numel(in), nout = (size_t)rs_shape_numel(out);
        const int batches[2] = {1, 7};
        float *x = malloc(7 * nin * sizeof *x), *y = malloc(7 * nout * sizeof *y);
        int32_t *tok = (int32_t *)(void *)x; /* a token model reads int32 ids from the same elements */
        for (size_t i = 0; i < 7 * nin; i++) {
            if (tokens) tok[i] = (int32_t)rs_rng_below(&r, (uint64_t)rs_model_vocab(m));
            else x[i] = rs_rng_normal(&r);
        }
        for (int bi = 0; bi < 2; bi++) {
            int B = batches[bi];
            const float *logits;
            if (rs_model_forward(m, x, B, &logits, &err)) {
                fprintf(stderr, "FAIL %s: forward: %s\n", t->name, err.msg);
                failures++;
                break;
            }
            memcpy(y, logits, (size_t)B * nout * sizeof *y);
            size_t nc = (size_t)out->d[out->ndim - 1];
            if (t->softmax) softmax_rows(y, (size_t)B * nout / nc, nc);
            snprintf(path, sizeof path, "%s/%s.b%d.in", dir, t->name, B);
            int e = write_raw(path, x, (size_t)B * nin);
            snprintf(path, sizeof path, "%s/%s.b%d.out", dir, t->name, B);
            e |= write_raw(path, y, (size_t)B * nout);
            if (e) {
                fprintf(stderr, "FAIL %s: cannot write %s\n", t->name, path);
                failures++;
            }
            fprintf(man, "%s %d %d %s", t->name, t->opset, B, tokens ? "tok" : "f32");
            put_shapes(man, in, out);
        }
        free(x);
        free(y);
        rs_model_free(m);
    }
    /* Refusals: an opset outside 13..21 names the ones accepted. */
    rs_model *m = NULL;
    rs_err err = {0};
    if (!rs_model_parse("mlp 4-2", "tiny", rs_device_cpu(), NULL, 1, &m, NULL, &err)) {
        snprintf(path, sizeof path, "%s/never.onnx", dir);
        rs_status st = rs_onnx_export(m, path, 12, &err);
        if (st != RS_ERR_ARG || !strstr(err.msg, "13 14 15 16 17 18 19 20 21")) {
            fprintf(stderr, "FAIL opset 12 should be refused with the list, got %d '%s'\n", st, err.msg);
            failures++;
        }
        st = rs_onnx_export(m, path, 22, &err);
        if (st != RS_ERR_ARG) {
            fprintf(stderr, "FAIL opset 22 should be refused\n");
            failures++;
        }
        rs_model_free(m);
    }
    /* softmax=on needs one score per class (or per position of a token model): a 3-D output is refused. */
    if (!rs_model_parse("seq in=2x3x5 layernorm", "cube", rs_device_cpu(), NULL, 1, &m, NULL, &err)) {
        snprintf(path, sizeof path, "%s/never.onnx", dir);
        rs_onnx_export_opts o = {.opset = 17, .softmax = true};
        rs_status st = rs_onnx_export_ex(m, path, &o, &err);
        if (st != RS_ERR_ARG || !strstr(err.msg, "softmax=on")) {
            fprintf(stderr, "FAIL softmax=on on a (2,3,5) output should be refused, got %d '%s'\n", st, err.msg);
            failures++;
        }
        rs_model_free(m);
    }
    fclose(man);
    fclose(repl);
    printf("export-models: %zu cases, %d failures\n", sizeof cases / sizeof cases[0], failures);
    return failures ? 1 : 0;
}
