/* Token inputs, with no Python: a GPT exported by ringside (opsets 14, 17, 18 and 20: LayerNorm and GELU
 * spelled out, LayerNormalization, Split's num_outputs, Gelu) imports as a token model whose layers are
 * the session GPT's one for one (embed, layernorm, linear, attn, gelu(tanh), add: the exporter's
 * attention and GELU subgraphs become the engine's layers) and whose logits equal the session GPT's
 * within 1e-5 at batches 1 and 5, refusing to become a trainable model with the reason; small graphs
 * built here show what is refused and that each message names the problem: an integer input of
 * another shape or a fixed batch, the ids read as numbers, a Gather over computed values that are
 * not the ids, a second embedding, a 3-d table, a double input (the old message, widened). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/rng.h"
#include "engine/nn/spec.h"
#include "onnx/build.h"
#include "onnx/export.h"
#include "onnx/import.h"
#include "rs_test.h"

#define SPEC "gpt layers=2 heads=2 dim=16 ctx=8 vocab=11"

/* max |a - b| / max(1, max |b|) */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double m = 0.0, s = 1.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d;
        if (fabs(b[i]) > s) s = fabs(b[i]);
    }
    return m / s;
}

static void exported_gpt(rs_model *m, int opset, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/g%d.onnx", dir, opset);
    rs_err e = {0};
    RS_CHECK(rs_onnx_export(m, path, opset, &e) == RS_OK, "opset %d: export: %s", opset, e.msg);
    rs_onnx_graph *g = NULL;
    RS_CHECK(rs_onnx_load(path, &g, &e) == RS_OK, "opset %d: import: %s", opset, e.msg);
    if (!g) return;
    rs_model *tm = NULL, *im = NULL;
    RS_CHECK(rs_onnx_to_model(g, "t", &tm, &e) != RS_OK && strstr(e.msg, "takes token ids"),
             "opset %d: a trainable model of a token graph: %s", opset, e.msg);
    RS_CHECK(rs_onnx_to_inference_model(g, "i", &im, &e) == RS_OK, "opset %d: inference model: %s", opset, e.msg);
    rs_onnx_graph_free(g);
    if (!im) return;
    RS_CHECK(rs_model_tokens(im) && rs_model_vocab(im) == rs_model_vocab(m) && rs_model_rows(im) == rs_model_rows(m),
             "opset %d: tokens %d vocab %d rows %d", opset, rs_model_tokens(im), rs_model_vocab(im), rs_model_rows(im));
    int L = rs_model_layer_count(m), Li = rs_model_layer_count(im);
    RS_CHECK(Li == L, "opset %d: %d layers imported, the session GPT has %d", opset, Li, L);
    for (int i = 0; i < L && i < Li; i++) {
        const rs_layer *a = rs_model_layer(m, i), *b = rs_model_layer(im, i);
        RS_CHECK(a->cfg.kind == b->cfg.kind && a->cfg.heads == b->cfg.heads && a->cfg.approx_tanh == b->cfg.approx_tanh,
                 "opset %d: layer %d is %s, the session GPT's %s", opset, i, rs_layer_kind_name(b->cfg.kind),
                 rs_layer_kind_name(a->cfg.kind));
    }
    for (int B = 1; B <= 5; B += 4) {
        size_t nx = (size_t)B * (size_t)rs_shape_numel(rs_model_input_shape(m));
        size_t ny = (size_t)B * (size_t)rs_model_rows(m) * (size_t)rs_model_classes(m);
        int32_t *x = malloc(nx * sizeof *x);
        float *want = malloc(ny * sizeof *want);
        rs_rng r;
        rs_rng_seed(&r, 3 + (uint64_t)B);
        for (size_t i = 0; i < nx; i++) x[i] = (int32_t)rs_rng_below(&r, (uint64_t)rs_model_vocab(m));
        const float *y = NULL;
        RS_CHECK(rs_model_forward(m, x, B, &y, &e) == RS_OK, "session forward: %s", e.msg);
        if (y) memcpy(want, y, ny * sizeof *want);
        y = NULL;
        RS_CHECK(rs_model_forward(im, x, B, &y, &e) == RS_OK, "opset %d: imported forward: %s", opset, e.msg);
        if (y) {
            double d = rel_diff(y, want, ny);
            printf("  gpt opset %d B=%d: imported vs session logits %.2e\n", opset, B, d);
            RS_CHECK(d <= 1e-5, "opset %d B=%d: imported logits differ by %.3g", opset, B, d);
        }
        x[0] = 11; /* outside the vocabulary: refused, not read past the table */
        RS_CHECK(rs_model_forward(im, x, B, &y, &e) != RS_OK, "opset %d: token id 11 of 11 ran", opset);
        free(x);
        free(want);
    }
    rs_model_free(im);
}

/* A small token graph: tokens (batch, 4) -> Gather(E (11, 6)) -> body -> output y; kind picks what it
 * gets wrong. */
static void small(const char *dir, const char *kind, const char *want)
{
    rs_err e = {0};
    rs_onnx_builder *b = rs_onnx_builder_new(kind);
    const char *bn[] = {"batch", NULL, NULL};
    int64_t in2[] = {-1, 4}, in3[] = {-1, 4, 2}, fixed[] = {3, 4}, out[] = {-1, 4, 6}, ed[] = {11, 6}, e3[] = {11, 6, 1};
    bool is3 = !strcmp(kind, "rank3"), isfixed = !strcmp(kind, "fixed"), dbl = !strcmp(kind, "double");
    int dt = dbl ? 11 : 7;
    RS_CHECK(rs_onnx_builder_input(b, "tokens", dt, is3 ? 3 : 2, is3 ? in3 : isfixed ? fixed : in2, bn, &e) == RS_OK,
             "%s", e.msg);
    RS_CHECK(rs_onnx_builder_initializer(b, "E", !strcmp(kind, "table3") ? 3 : 2, !strcmp(kind, "table3") ? e3 : ed,
                                         NULL, 1, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(rs_onnx_builder_initializer(b, "one", 0, NULL, (const float[]){1.0f}, 0, &e) == RS_OK, "%s", e.msg);
    const char *g[] = {"E", "tokens"}, *h[] = {"h"};
    if (!strcmp(kind, "numbers")) {
        const char *ai[] = {"tokens", "one"}, *ao[] = {"t1"}, *gi[] = {"E", "t1"};
        RS_CHECK(rs_onnx_builder_node(b, "Add", 2, ai, 1, ao, NULL, &e) == RS_OK, "%s", e.msg);
        RS_CHECK(rs_onnx_builder_node(b, "Gather", 2, gi, 1, h, NULL, &e) == RS_OK, "%s", e.msg);
    } else {
        RS_CHECK(rs_onnx_builder_node(b, "Gather", 2, g, 1, h, NULL, &e) == RS_OK, "%s", e.msg);
    }
    const char *y[] = {"y"};
    if (!strcmp(kind, "computed")) { /* a Gather indexed by floats the graph computed */
        const char *gi[] = {"E", "h"}, *go[] = {"y"};
        RS_CHECK(rs_onnx_builder_node(b, "Gather", 2, gi, 1, go, NULL, &e) == RS_OK, "%s", e.msg);
    } else if (!strcmp(kind, "second")) {
        const char *gi[] = {"E", "tokens"}, *go[] = {"h2"}, *ai[] = {"h", "h2"};
        RS_CHECK(rs_onnx_builder_node(b, "Gather", 2, gi, 1, go, NULL, &e) == RS_OK, "%s", e.msg);
        RS_CHECK(rs_onnx_builder_node(b, "Add", 2, ai, 1, y, NULL, &e) == RS_OK, "%s", e.msg);
    } else {
        const char *ri[] = {"h"};
        RS_CHECK(rs_onnx_builder_node(b, "Relu", 1, ri, 1, y, NULL, &e) == RS_OK, "%s", e.msg);
    }
    RS_CHECK(rs_onnx_builder_output(b, "y", 1, 3, out, bn, &e) == RS_OK, "%s", e.msg);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, kind);
    RS_CHECK(rs_onnx_builder_save(b, path, 17, &e) == RS_OK, "%s", e.msg);
    rs_onnx_builder_free(b);
    rs_onnx_graph *gr = NULL;
    rs_status st = rs_onnx_load(path, &gr, &e);
    if (!want) { /* the good one: embed + relu, the table's rows for the ids */
        RS_CHECK(st == RS_OK, "%s: %s", kind, e.msg);
        rs_model *m = NULL;
        if (gr) RS_CHECK(rs_onnx_to_inference_model(gr, "s", &m, &e) == RS_OK, "%s: %s", kind, e.msg);
        if (m) {
            int32_t ids[8] = {0, 3, 10, 3, 7, 7, 1, 2};
            const float *out_v = NULL;
            RS_CHECK(rs_model_forward(m, ids, 2, &out_v, &e) == RS_OK, "%s: %s", kind, e.msg);
            const float *E = rs_model_params(m) + rs_model_layer(m, 0)->p[0].offset;
            bool ok = out_v != NULL;
            for (int i = 0; ok && i < 8; i++)
                for (int c = 0; c < 6; c++) ok = ok && out_v[i * 6 + c] == fmaxf(E[ids[i] * 6 + c], 0.0f);
            RS_CHECK(ok, "%s: the output is not relu(E[ids])", kind);
        }
        rs_model_free(m);
    } else {
        RS_CHECK(st != RS_OK && strstr(e.msg, want), "%s: want '%s', got '%s'", kind, want, st ? e.msg : "imported");
        if (st) printf("  %-9s refused: %s\n", kind, e.msg);
    }
    rs_onnx_graph_free(gr);
}

int main(void)
{
    char dir[] = "/tmp/rs-onnx-tokens-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(SPEC, "g", rs_device_cpu(), NULL, 5, &m, NULL, &e) == RS_OK, "%s: %s", SPEC, e.msg);
    if (m) {
        rs_model_set_training(m, false);
        int opsets[] = {14, 17, 18, 20};
        for (int i = 0; i < 4; i++) exported_gpt(m, opsets[i], dir);
    }
    rs_model_free(m);
    small(dir, "good", NULL);
    small(dir, "rank3", "token ids of shape (batch, T) with a symbolic batch, got rank 3");
    small(dir, "fixed", "and a fixed batch");
    small(dir, "numbers", "node 'Add_0'");
    small(dir, "numbers", "reads the token ids 'tokens' as numbers");
    small(dir, "computed", "only the model's token input indexes a table");
    small(dir, "second", "a second Gather over the token ids (node 'Gather_0' is the first)");
    small(dir, "table3", "takes a float (V, C) table along axis 0");
    small(dir, "double", "has element type double; only float inputs");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return rs_test_finish("onnx-tokens");
}
