/* Models as PyTorch would build them: default initialisation (U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
 * Linear and Conv2d weights and biases, LayerNorm 1 and 0), parameter names and shapes as in
 * torch.nn.Sequential, one buffer holding every tensor, the summary, spec round trips, and the text and
 * position of spec errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/spec.h"
#include "tests/rs_test.h"

static rs_model *build(const char *spec, uint64_t seed)
{
    rs_model *m = NULL;
    rs_err e = {0};
    size_t pos = 0;
    rs_status st = rs_model_parse(spec, "m", rs_device_cpu(), NULL, seed, &m, &pos, &e);
    RS_CHECK(st == RS_OK && m, "parse '%s': %s (at %zu)", spec, e.msg, pos);
    return st == RS_OK ? m : NULL;
}

static const char *shape_s(const rs_shape *s, char *buf) { return rs_shape_str(s, buf, 64); }

/* ---- names, shapes, layout ---- */

typedef struct want_tensor {
    const char *name;
    int ndim;
    int64_t d[4];
} want_tensor;

static void check_tensors(const rs_model *m, const char *what, const want_tensor *w, int n)
{
    char a[64], b[64];
    RS_CHECK(rs_model_tensor_count(m) == n, "%s: %d tensors, want %d", what, rs_model_tensor_count(m), n);
    size_t total = 0;
    for (int i = 0; i < n && i < rs_model_tensor_count(m); i++) {
        const rs_param_info *pi = rs_model_tensor(m, i);
        rs_shape ws = {w[i].ndim, {0}};
        for (int k = 0; k < w[i].ndim; k++) ws.d[k] = w[i].d[k];
        RS_CHECK(!strcmp(pi->name, w[i].name), "%s: tensor %d is '%s', want '%s'", what, i, pi->name, w[i].name);
        RS_CHECK(rs_shape_eq(&pi->shape, &ws), "%s: '%s' has shape %s, want %s", what, pi->name, shape_s(&pi->shape, a),
                 shape_s(&ws, b));
        RS_CHECK(rs_model_find_tensor(m, w[i].name) == pi, "%s: find_tensor('%s')", what, w[i].name);
        total += (size_t)rs_shape_numel(&ws);
    }
    RS_CHECK(rs_model_find_tensor(m, "no.such") == NULL, "%s: find_tensor of a missing name", what);
    size_t real = 0;
    for (int i = 0; i < rs_model_tensor_count(m); i++) real += rs_model_tensor(m, i)->numel;
    RS_CHECK(real == total, "%s: %zu parameters, want %zu", what, real, total);
    /* The summary states the count PyTorch's sum(p.numel() for p in m.parameters()) gives. */
    char *sum = rs_model_summary(m), count[64];
    snprintf(count, sizeof count, " %zu parameters", total);
    RS_CHECK(sum && strstr(sum, count), "%s: summary lacks '%s':\n%s", what, count, sum ? sum : "(null)");
    free(sum);
}

/* Every tensor is a view into the one buffer: in order, aligned, inside it, never overlapping. */
static void check_layout(const rs_model *m, const char *what)
{
    size_t prev_end = 0, numel = rs_model_numel(m);
    for (int i = 0; i < rs_model_tensor_count(m); i++) {
        const rs_param_info *pi = rs_model_tensor(m, i);
        RS_CHECK(pi->numel == (size_t)rs_shape_numel(&pi->shape), "%s: '%s' numel %zu vs its shape", what, pi->name,
                 pi->numel);
        RS_CHECK(pi->offset >= prev_end, "%s: '%s' at %zu overlaps the previous tensor (ends at %zu)", what, pi->name,
                 pi->offset, prev_end);
        RS_CHECK(pi->offset - prev_end < 16 || pi->offset < prev_end, "%s: gap of %zu floats before '%s'", what,
                 pi->offset - prev_end, pi->name);
        RS_CHECK(pi->offset % 16 == 0, "%s: '%s' at %zu is not 64-byte aligned", what, pi->name, pi->offset);
        RS_CHECK(pi->offset + pi->numel <= numel, "%s: '%s' [%zu, %zu) runs past the buffer (%zu)", what, pi->name,
                 pi->offset, pi->offset + pi->numel, numel);
        RS_CHECK(pi->layer >= 0 && pi->layer < rs_model_layer_count(m), "%s: '%s' layer %d", what, pi->name, pi->layer);
        if (pi->layer >= 0 && pi->layer < rs_model_layer_count(m)) {
            const rs_layer *l = rs_model_layer((rs_model *)m, pi->layer);
            RS_CHECK(!strncmp(pi->name, l->name, strlen(l->name)) && pi->name[strlen(l->name)] == '.',
                     "%s: '%s' belongs to layer '%s'", what, pi->name, l->name);
        }
        prev_end = pi->offset + pi->numel;
    }
    /* Padding between tensors is at most the alignment: the buffer is the parameters, not more. */
    RS_CHECK(numel >= prev_end && numel - prev_end < 16, "%s: buffer of %zu floats, tensors end at %zu", what, numel,
             prev_end);
    RS_CHECK(rs_model_params((rs_model *)m) != NULL && rs_model_grads((rs_model *)m) != NULL, "%s: buffers", what);
}

static void test_names(void)
{
    rs_model *m = build("mlp 784-256-10", 1);
    if (m) {
        static const want_tensor w[] = {
            {"0.weight", 2, {256, 784}}, {"0.bias", 1, {256}}, {"2.weight", 2, {10, 256}}, {"2.bias", 1, {10}}};
        check_tensors(m, "mlp 784-256-10", w, 4);
        check_layout(m, "mlp 784-256-10");
        RS_CHECK(rs_model_layer_count(m) == 3 && rs_model_classes(m) == 10, "mlp: %d layers, %d classes",
                 rs_model_layer_count(m), rs_model_classes(m));
    }
    rs_model_free(m);

    /* mlp over images puts a flatten first, as nn.Sequential(nn.Flatten(), nn.Linear(784, 128), ...) */
    m = build("mlp 784-128-64-10 act=gelu dropout=0.2 in=1x28x28", 1);
    if (m) {
        static const want_tensor w[] = {{"1.weight", 2, {128, 784}}, {"1.bias", 1, {128}},
                                        {"4.weight", 2, {64, 128}},  {"4.bias", 1, {64}},
                                        {"7.weight", 2, {10, 64}},   {"7.bias", 1, {10}}};
        check_tensors(m, "mlp with dropout", w, 6);
        check_layout(m, "mlp with dropout");
        static const char *const kinds[] = {"flatten", "linear", "gelu", "dropout", "linear", "gelu", "dropout",
                                            "linear"};
        RS_CHECK(rs_model_layer_count(m) == 8, "mlp with dropout: %d layers", rs_model_layer_count(m));
        for (int i = 0; i < 8 && i < rs_model_layer_count(m); i++)
            RS_CHECK(!strcmp(rs_model_layer(m, i)->ops->kind, kinds[i]), "layer %d is %s, want %s", i,
                     rs_model_layer(m, i)->ops->kind, kinds[i]);
    }
    rs_model_free(m);

    /* Nested blocks: nn.Sequential(Conv2d, nn.Sequential(Conv2d, ReLU, nn.Sequential(Conv2d, ReLU)),
     * Flatten, Linear) names its weights 0., 1.0., 1.2.0., 3. */
    m = build("seq in=3x8x8 conv(4,3,pad=1) [ conv(6,3x1,pad=1x0) relu [ conv(2,1,bias=0) relu ] ] flatten "
              "linear(10,bias=0)",
              1);
    if (m) {
        static const want_tensor w[] = {{"0.weight", 4, {4, 3, 3, 3}},   {"0.bias", 1, {4}},
                                        {"1.0.weight", 4, {6, 4, 3, 1}}, {"1.0.bias", 1, {6}},
                                        {"1.2.0.weight", 4, {2, 6, 1, 1}}, {"3.weight", 2, {10, 128}}};
        check_tensors(m, "nested", w, 6);
        check_layout(m, "nested");
        static const char *const names[] = {"0", "1.0", "1.1", "1.2.0", "1.2.1", "2", "3"};
        RS_CHECK(rs_model_layer_count(m) == 7, "nested: %d layers", rs_model_layer_count(m));
        for (int i = 0; i < 7 && i < rs_model_layer_count(m); i++)
            RS_CHECK(!strcmp(rs_model_layer(m, i)->name, names[i]), "nested: layer %d named '%s', want '%s'", i,
                     rs_model_layer(m, i)->name, names[i]);
        RS_CHECK(rs_model_block_count(m) == 2, "nested: %d blocks", rs_model_block_count(m));
        if (rs_model_block_count(m) == 2) {
            const rs_block *b0 = rs_model_block(m, 0), *b1 = rs_model_block(m, 1);
            RS_CHECK(!strcmp(b0->name, "1") && b0->first == 1 && b0->count == 4 && b0->depth == 0,
                     "block 0: '%s' first %d count %d depth %d", b0->name, b0->first, b0->count, b0->depth);
            RS_CHECK(!strcmp(b1->name, "1.2") && b1->first == 3 && b1->count == 2 && b1->depth == 1,
                     "block 1: '%s' first %d count %d depth %d", b1->name, b1->first, b1->count, b1->depth);
        }
    }
    rs_model_free(m);
}

/* ---- initial values ---- */

typedef struct stats {
    double mean, var, lo, hi;
    size_t n;
} stats;

static stats stats_of(const float *x, size_t n)
{
    stats s = {.lo = INFINITY, .hi = -INFINITY, .n = n};
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
        sq += (double)x[i] * x[i];
        s.lo = x[i] < s.lo ? x[i] : s.lo;
        s.hi = x[i] > s.hi ? x[i] : s.hi;
    }
    s.mean = sum / (double)n;
    s.var = sq / (double)n - s.mean * s.mean;
    return s;
}

/* U(-b, b): every value inside; with many values, both ends nearly reached, mean 0 and variance b^2/3
 * within 5 standard errors, and 20 equal bins each within 5 standard errors of n/20. */
static void check_uniform(rs_model *m, const char *name, double fan_in, bool statistics)
{
    const rs_param_info *pi = rs_model_find_tensor(m, name);
    RS_CHECK(pi != NULL, "no tensor %s", name);
    if (!pi) return;
    const float *x = rs_model_params(m) + pi->offset;
    double b = 1.0 / sqrt(fan_in);
    stats s = stats_of(x, pi->numel);
    float bf = (float)b;
    RS_CHECK(s.lo >= -bf && s.hi <= bf, "%s: values in [%.7g, %.7g], bound 1/sqrt(%g) = %.7g", name, s.lo, s.hi,
             fan_in, b);
    /* P(max < 0.9 b) = 0.95^n: negligible from a few hundred values on. */
    if (pi->numel >= 400)
        RS_CHECK(s.hi > 0.9 * b && s.lo < -0.9 * b, "%s: range [%.7g, %.7g] does not reach the bound %.7g (n=%zu)",
                 name, s.lo, s.hi, b, pi->numel);
    printf("  %-14s n=%-8zu bound %.6f  min %.6f max %.6f  mean %+.2e  var/(b^2/3) %.5f\n", name, pi->numel, b, s.lo,
           s.hi, s.mean, s.var / (b * b / 3));
    if (!statistics) return;
    double n = (double)pi->numel;
    double se_mean = b / sqrt(3 * n);
    double se_var = sqrt(4.0 / 45.0) * b * b / sqrt(n); /* Var(x^2) = b^4/5 - b^4/9 */
    RS_CHECK(fabs(s.mean) < 5 * se_mean, "%s: mean %.3g, want 0 +- %.3g", name, s.mean, 5 * se_mean);
    RS_CHECK(fabs(s.var - b * b / 3) < 5 * se_var, "%s: variance %.6g, want b^2/3 = %.6g +- %.3g", name, s.var,
             b * b / 3, 5 * se_var);
    size_t bins[20] = {0};
    for (size_t i = 0; i < pi->numel; i++) {
        int k = (int)((x[i] + b) / (2 * b) * 20);
        bins[k < 0 ? 0 : k > 19 ? 19 : k]++;
    }
    double p = 1.0 / 20, se_bin = sqrt(n * p * (1 - p));
    for (int k = 0; k < 20; k++)
        RS_CHECK(fabs((double)bins[k] - n * p) < 5 * se_bin, "%s: bin %d of 20 has %zu values, want %.0f +- %.0f", name,
                 k, bins[k], n * p, 5 * se_bin);
}

static void check_const(rs_model *m, const char *name, float v)
{
    const rs_param_info *pi = rs_model_find_tensor(m, name);
    RS_CHECK(pi != NULL, "no tensor %s", name);
    if (!pi) return;
    const float *x = rs_model_params(m) + pi->offset;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < pi->numel; i++)
        if (x[i] != v && !bad++) first = i;
    RS_CHECK(bad == 0, "%s: %zu of %zu values are not %g (first: [%zu] = %g)", name, bad, pi->numel, (double)v, first,
             bad ? (double)x[first] : 0.0);
}

static void test_init(void)
{
    printf("initial values:\n");
    rs_model *m = build("mlp 784-1024-10", 7);
    if (m) {
        check_uniform(m, "0.weight", 784, true); /* 802816 values */
        check_uniform(m, "0.bias", 784, false);  /* the bias bound is the weight's fan_in, as in torch */
        check_uniform(m, "2.weight", 1024, true);
        check_uniform(m, "2.bias", 1024, false);
    }
    rs_model_free(m);

    /* Conv fan_in is in_channels * kh * kw, with a non-square kernel so kh*kw vs kh^2 shows. */
    m = build("seq in=64x8x8 conv(256,3x2) relu conv(8,3,stride=2,pad=1) layernorm flatten linear(10)", 7);
    if (m) {
        check_uniform(m, "0.weight", 64 * 3 * 2, true); /* 98304 values */
        check_uniform(m, "0.bias", 64 * 3 * 2, false);
        check_uniform(m, "2.weight", 256 * 3 * 3, true);
        check_uniform(m, "2.bias", 256 * 3 * 3, false);
        /* LayerNorm over the last dimension (W = 4 here): weight 1, bias 0. */
        const rs_param_info *ln = rs_model_find_tensor(m, "3.weight");
        RS_CHECK(ln && ln->shape.ndim == 1 && ln->shape.d[0] == 4, "layernorm weight shape");
        check_const(m, "3.weight", 1.0f);
        check_const(m, "3.bias", 0.0f);
        check_uniform(m, "5.weight", 8 * 3 * 4, false); /* conv 2 gives (8, 3, 4) */
    }
    rs_model_free(m);

    /* Padding between tensors stays zero (it is stepped by optimizers, so garbage there would show). */
    m = build("mlp 10-7-3", 3);
    if (m) {
        const float *p = rs_model_params(m);
        size_t prev_end = 0, bad = 0;
        for (int i = 0; i <= rs_model_tensor_count(m); i++) {
            size_t start = i < rs_model_tensor_count(m) ? rs_model_tensor(m, i)->offset : rs_model_numel(m);
            for (size_t j = prev_end; j < start; j++) bad += p[j] != 0.0f;
            if (i < rs_model_tensor_count(m)) prev_end = start + rs_model_tensor(m, i)->numel;
        }
        RS_CHECK(bad == 0, "mlp 10-7-3: %zu padding values are not 0", bad);
    }
    rs_model_free(m);

    /* Seeds: the same seed, the same bytes; another seed, other values. Layers draw from their own
     * streams, so adding a layer at the end leaves the earlier layers' values as they were. */
    rs_model *a = build("mlp 50-40-10", 11), *b = build("mlp 50-40-10", 11), *c = build("mlp 50-40-10", 12);
    rs_model *d = build("mlp 50-40-20-10", 11);
    if (a && b && c && d) {
        size_t n = rs_model_numel(a);
        RS_CHECK(!memcmp(rs_model_params(a), rs_model_params(b), n * sizeof(float)), "same seed, different weights");
        size_t same = 0;
        for (size_t i = 0; i < n; i++) same += rs_model_params(a)[i] == rs_model_params(c)[i] && rs_model_params(a)[i];
        RS_CHECK(same < n / 100, "seeds 11 and 12 agree on %zu of %zu weights", same, n);
        const rs_param_info *wa = rs_model_find_tensor(a, "0.weight"), *wd = rs_model_find_tensor(d, "0.weight");
        RS_CHECK(wa && wd && !memcmp(rs_model_params(a) + wa->offset, rs_model_params(d) + wd->offset,
                                     wa->numel * sizeof(float)),
                 "layer 0's weights depend on the layers after it");
    }
    rs_model_free(a);
    rs_model_free(b);
    rs_model_free(c);
    rs_model_free(d);
}

/* ---- summary and round trip ---- */

static void test_summary(void)
{
    rs_model *m = build("seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) [ conv(32,3,pad=1) relu ] maxpool(2) "
                        "dropout(0.25) flatten linear(10)",
                        1);
    if (!m) return;
    char *s = rs_model_summary(m);
    RS_CHECK(s != NULL, "summary is NULL");
    if (s) {
        printf("%s", s);
        /* Each layer on a line of its own with its name, spelling and output shape. */
        static const char *const rows[][3] = {
            {"0", "conv(16,3,pad=1)", "(16, 28, 28)"}, {"1", "relu", "(16, 28, 28)"},
            {"2", "maxpool(2)", "(16, 14, 14)"},       {"3.0", "conv(32,3,pad=1)", "(32, 14, 14)"},
            {"3.1", "relu", "(32, 14, 14)"},           {"4", "maxpool(2)", "(32, 7, 7)"},
            {"5", "dropout(0.25)", "(32, 7, 7)"},      {"6", "flatten", "(1568)"},
            {"7", "linear(10)", "(10)"},
        };
        for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
            bool found = false;
            for (const char *line = s; line && *line && !found;) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t)(nl - line) : strlen(line);
                char buf[256];
                snprintf(buf, sizeof buf, "%.*s", (int)(len < 255 ? len : 255), line);
                char first[64] = "";
                sscanf(buf, "%63s", first);
                found = !strcmp(first, rows[i][0]) && strstr(buf, rows[i][1]) && strstr(buf, rows[i][2]);
                line = nl ? nl + 1 : NULL;
            }
            RS_CHECK(found, "summary has no line for layer %s: %s -> %s", rows[i][0], rows[i][1], rows[i][2]);
        }
        /* 16*9+16 + 32*16*9+32 + 10*1568+10 = 160 + 4640 + 15690 */
        RS_CHECK(strstr(s, " 20490 parameters") != NULL, "summary does not give 20490 parameters");
        RS_CHECK(strstr(s, "block") != NULL, "summary does not show the block");
    }
    free(s);
    rs_model_free(m);
}

static void check_round_trip(const char *spec)
{
    rs_model *a = build(spec, 5);
    if (!a) return;
    char *text = rs_model_spec(a);
    RS_CHECK(text != NULL, "rs_model_spec of '%s' is NULL", spec);
    rs_model *b = text ? build(text, 5) : NULL;
    if (b) {
        char *again = rs_model_spec(b);
        RS_CHECK(again && !strcmp(again, text), "spec does not re-print the same: '%s' -> '%s'", text,
                 again ? again : "(null)");
        free(again);
        RS_CHECK(rs_shape_eq(rs_model_input_shape(a), rs_model_input_shape(b)), "'%s': input shape differs", text);
        RS_CHECK(rs_model_layer_count(a) == rs_model_layer_count(b) && rs_model_block_count(a) == rs_model_block_count(b),
                 "'%s': %d/%d layers, %d/%d blocks", text, rs_model_layer_count(a), rs_model_layer_count(b),
                 rs_model_block_count(a), rs_model_block_count(b));
        int shown = 0; /* the first few differences are enough */
        for (int i = 0; i < rs_model_layer_count(a) && i < rs_model_layer_count(b) && shown < 3; i++) {
            rs_layer *la = rs_model_layer(a, i), *lb = rs_model_layer(b, i);
            char ca[64], cb[64];
            rs_layer_cfg_str(&la->cfg, ca, sizeof ca);
            rs_layer_cfg_str(&lb->cfg, cb, sizeof cb);
            bool same = !strcmp(la->name, lb->name) && !strcmp(ca, cb) && rs_shape_eq(&la->out, &lb->out);
            RS_CHECK(same, "'%s': layer %d is %s %s, then %s %s", text, i, la->name, ca, lb->name, cb);
            shown += !same;
        }
        RS_CHECK(rs_model_tensor_count(a) == rs_model_tensor_count(b) && rs_model_numel(a) == rs_model_numel(b),
                 "'%s': %d/%d tensors, %zu/%zu values", text, rs_model_tensor_count(a), rs_model_tensor_count(b),
                 rs_model_numel(a), rs_model_numel(b));
        shown = 0;
        for (int i = 0; i < rs_model_tensor_count(a) && i < rs_model_tensor_count(b) && shown < 3; i++) {
            const rs_param_info *pa = rs_model_tensor(a, i), *pb = rs_model_tensor(b, i);
            bool same = !strcmp(pa->name, pb->name) && pa->offset == pb->offset && rs_shape_eq(&pa->shape, &pb->shape);
            RS_CHECK(same, "'%s': tensor %d: %s@%zu vs %s@%zu", text, i, pa->name, pa->offset, pb->name, pb->offset);
            shown += !same;
        }
        /* Same layout and seed: the same initial bytes. */
        if (rs_model_numel(a) == rs_model_numel(b))
            RS_CHECK(!memcmp(rs_model_params(a), rs_model_params(b), rs_model_numel(a) * sizeof(float)),
                     "'%s': same seed and layout, different weights", text);
    }
    free(text);
    rs_model_free(a);
    rs_model_free(b);
}

/* ---- errors ---- */

/* spec must fail; the message must contain `want` and err_pos be the offset of `at` in spec. */
static void check_error(const char *spec, const char *want, const char *at)
{
    rs_model *m = NULL;
    rs_err e = {0};
    size_t pos = (size_t)-1;
    rs_status st = rs_model_parse(spec, "m", rs_device_cpu(), NULL, 1, &m, &pos, &e);
    RS_CHECK(st != RS_OK && m == NULL, "'%s' was accepted", spec);
    RS_CHECK(st != RS_OK && strstr(e.msg, want), "'%s': message '%s' lacks '%s'", spec, e.msg, want);
    const char *p = strstr(spec, at);
    size_t want_pos = at[0] ? (size_t)(p - spec) : strlen(spec);
    RS_CHECK(pos == want_pos, "'%s': error at %zu ('%s'), want %zu ('%s')", spec, pos, pos <= strlen(spec) ? spec + pos : "?",
             want_pos, spec + want_pos);
    if (st != RS_OK) printf("  %-52s -> [%zu] %s\n", spec, pos, e.msg);
    rs_model_free(m);
}

static void test_errors(void)
{
    printf("spec errors:\n");
    check_error("seq in=1x28x28 convv(16,3) relu flatten linear(10)", "unknown layer 'convv' (did you mean 'conv'?)",
                "convv");
    check_error("seq in=1x28x28 conv(16,3) relu flaten linear(10)", "did you mean 'flatten'?", "flaten");
    check_error("seq in=1x28x28 conv(16,3) frobnicate flatten linear(10)", "unknown layer 'frobnicate'; layers are",
                "frobnicate");
    check_error("sqe conv(16,3) flatten linear(10)", "unknown model kind 'sqe' (did you mean 'seq'?)", "sqe");
    check_error("seq in=1x28x28 conv(16,3) relu flatten linear", "linear needs its output size", "linear");
    check_error("seq in=1x28x28 conv(pad=1) relu flatten linear(10)", "conv needs its output size", "conv");
    check_error("seq in=1x28x28 conv(16,3,pda=1) relu flatten linear(10)",
                "conv: unknown option 'pda' (did you mean 'pad='?)", "pda");
    check_error("seq in=1x28x28 conv(16,3,pad=x) relu flatten linear(10)", "padding 'x' is not valid", "x)");
    check_error("seq in=1x28x28 conv(16,3,1,2) flatten linear(10)", "too many arguments at '1'", "1,2");
    check_error("seq in=1x28x28 flatten dropout(1.5) linear(10)", "dropout: p='1.5' is not valid", "1.5");
    check_error("seq in=1x28x28 relu(3) flatten linear(10)", "relu takes no arguments", "3)");
    check_error("mlp 784-256-10 actt=relu", "unknown option 'actt' (did you mean 'act='?)", "actt");
    check_error("mlp 784-256-10 act=sigmoid", "act='sigmoid' is not an activation", "act=");
    check_error("mlp 784", "mlp needs at least an input and an output size", "784");
    check_error("mlp 784-25x-10", "mlp: '25x' in '784-25x-10' is not a size", "25x");
    /* strtok read 784--10 as 784-10 and built it silently */
    check_error("mlp 784--10", "mlp: an empty size in '784--10' (two '-' in a row)", "-10");
    check_error("mlp 784-10-", "mlp: an empty size in '784-10-'", "");
    check_error("mlp -784-10", "mlp: an empty size in '-784-10'", "-784");
    /* a size too large says so, with the arithmetic (it said "not a list of sizes") */
    check_error("mlp 784-100000000-10",
                "mlp: 100000000 is too large: 784x100000000+100000000 + 100000000x10+10 = 79500000010 parameters, "
                "x 4 B x 2 (parameters and gradients) = 592.3 GiB",
                "100000000");
    check_error("mlp 2-20000000-2", "mlp: 20000000 is too large: a layer holds at most 16777216 units", "20000000");
    check_error("seq in=1x28 conv(4,3) flatten linear(10)", "in='1x28' is not a shape", "in=");
    check_error("seq in=1x28x28 [ conv(4,3) relu flatten linear(10)", "1 block(s) not closed; add ']'", "");
    check_error("seq in=1x28x28 [ [ conv(4,3) ] relu flatten linear(10)", "1 block(s) not closed", "");
    check_error("seq in=1x28x28 conv(4,3) ] flatten linear(10)", "']' closes no block", "]");
    check_error("seq in=1x28x28 conv(4,3) [ ] flatten linear(10)", "is empty", "]");
    check_error("seq in=1x28x28", "seq needs layers", "");
    /* Shape errors found while building: the message names the layer, its input and the fix, and the
     * position is that layer's word. */
    check_error("seq in=1x28x28 conv(8,3) relu linear(10)",
                "layer 2 (linear) needs a flat input, got (8, 26, 26); put `flatten` before it", "linear");
    check_error("seq in=784 conv(8,3) flatten linear(10)", "layer 0 (conv) needs a (channels, height, width) input",
                "conv");
    check_error("seq in=1x4x4 conv(8,5) flatten linear(10)", "a 5x5 window does not fit the 4x4 input", "conv");
    check_error("seq in=1x28x28 conv(8,3) relu", "ends with output (8, 26, 26)", "relu"); /* the last layer */
    check_error("mlp 784-256-10 in=1x28x27", "does not match in=", "784");

    /* The near-miss helper itself: within edit distance 2, case-insensitive, else nothing. */
    static const char *const c[] = {"epochs", "batch", "lr"};
    RS_CHECK(rs_spec_near_miss("epochz", c, 3) && !strcmp(rs_spec_near_miss("epochz", c, 3), "epochs"), "epochz");
    RS_CHECK(rs_spec_near_miss("BATCH", c, 3) && !strcmp(rs_spec_near_miss("BATCH", c, 3), "batch"), "BATCH");
    RS_CHECK(rs_spec_near_miss("momentum", c, 3) == NULL, "momentum has no near miss");

    /* rs_layer_parse, one word. */
    rs_layer_cfg cfg;
    rs_err e = {0};
    size_t pos = 0;
    RS_CHECK(rs_layer_parse("conv(16,3x5,stride=2,pad=1x2,bias=0)", &cfg, &pos, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(cfg.kind == RS_LAYER_CONV2D && cfg.out == 16 && cfg.kh == 3 && cfg.kw == 5 && cfg.sh == 2 && cfg.sw == 2 &&
                 cfg.ph == 1 && cfg.pw == 2 && !cfg.bias,
             "conv cfg parsed wrong");
    RS_CHECK(rs_layer_parse("maxpool(3)", &cfg, &pos, &e) == RS_OK && cfg.sh == 3 && cfg.sw == 3,
             "a pool's stride defaults to its kernel");
    RS_CHECK(rs_layer_parse("linear(10) relu", &cfg, &pos, &e) != RS_OK && strstr(e.msg, "unexpected text") && pos == 11,
             "trailing text: '%s' at %zu", e.msg, pos);
}

int main(void)
{
    test_names();
    test_init();
    test_summary();
    static const char *const specs[] = {
        "mlp 784-256-10",
        "mlp 784-128-64-10 act=tanh dropout=0.1 in=1x28x28",
        "seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)",
        "seq in=3x32x32 conv(8,5x3,stride=2x1,pad=2x1,bias=0) gelu avgpool(3,stride=2,pad=1) "
        "[ conv(8,3,pad=1) layernorm(eps=0.001) [ tanh dropout(0.3) ] ] flatten linear(64,bias=0) relu linear(10)",
        /* Sibling blocks, as in a stack of residual stages: "0.0.weight", "1.0.weight". */
        "seq in=1x28x28 [ conv(4,3) relu ] [ conv(4,3) relu ] flatten layernorm linear(10)",
    };
    printf("round trips:\n");
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        rs_model *m = build(specs[i], 1);
        char *s = m ? rs_model_spec(m) : NULL;
        printf("  %s\n    -> %s\n", specs[i], s ? s : "(null)");
        free(s);
        rs_model_free(m);
        check_round_trip(specs[i]);
    }
    test_errors();
    return rs_test_finish("engine-init");
}
