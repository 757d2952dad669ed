/* The model as a graph: whole-model finite-difference checks of the loss gradient for a residual MLP
 * (a value used twice: the block input feeds the block and its add), a hand-written GPT with the head
 * tied to the token embedding (one parameter, two gradient contributions), and the gpt preset; the
 * spec of each re-parses to the same model; bad graphs are refused with the layer named.
 * Tolerance as in test_gradcheck.c: central differences with eps 1e-2 on float kernels, a gradient
 * passes when |analytic - numeric| <= 2e-3 + 2e-2 * |numeric| (eps 2e-3 for GPT-2's small weights); a missing contribution is O(1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/nn/model.h"
#include "engine/nn/spec.h"
#include "rs_test.h"

#define EPS 1e-2
#define ATOL 2e-3
#define RTOL 2e-2

/* Mean loss of one forward in double. */
static double loss_of(rs_model *m, const void *x, const int32_t *y, int B)
{
    float l = 0.0f;
    rs_err err = {0};
    RS_CHECK(rs_model_forward(m, x, B, NULL, &err) == RS_OK, "forward: %s", err.msg);
    RS_CHECK(rs_model_loss(m, y, B, &l, &err) == RS_OK, "loss: %s", err.msg);
    return l;
}

/* Checks d(loss)/d(params) at up to `probes` parameters spread over the buffer, always including
 * the first and last element of every tensor. Returns the number of mismatches. */
static int check_model(const char *what, const char *spec, int B, int probes, uint64_t seed, double eps)
{
    rs_model *m = NULL;
    rs_err err = {0};
    size_t pos = 0;
    if (rs_model_parse(spec, what, rs_device_cpu(), NULL, seed, &m, &pos, &err)) {
        RS_CHECK(0, "%s: spec refused at %zu: %s", what, pos, err.msg);
        return 1;
    }
    rs_model_set_training(m, true);
    int T = rs_model_tokens(m) ? (int)rs_model_input_shape(m)->d[0] : 0;
    size_t in_n = (size_t)B * (size_t)rs_shape_numel(rs_model_input_shape(m));
    int rows = B * rs_model_rows(m), C = rs_model_classes(m);
    float *xf = malloc(in_n * sizeof *xf);
    int32_t *xt = malloc(in_n * sizeof *xt), *y = malloc((size_t)rows * sizeof *y);
    rs_rng r;
    rs_rng_seed(&r, seed + 1);
    for (size_t i = 0; i < in_n; i++) {
        xf[i] = rs_rng_range(&r, -1.0f, 1.0f);
        xt[i] = (int32_t)rs_rng_below(&r, (uint64_t)(rs_model_vocab(m) ? rs_model_vocab(m) : 1));
    }
    if (T) xt[0] = xt[1]; /* a repeated token: two rows of the embedding gradient add up */
    for (int i = 0; i < rows; i++) y[i] = (int32_t)rs_rng_below(&r, (uint64_t)C);
    const void *x = T ? (const void *)xt : (const void *)xf;

    rs_model_zero_grad(m);
    loss_of(m, x, y, B);
    rs_model_backward(m, x, y, B, 1.0f);
    float *p = rs_model_params(m), *g = rs_model_grads(m);
    int bad = 0, checked = 0;
    double worst = 0.0;
    for (int t = 0; t < rs_model_tensor_count(m); t++) {
        const rs_param_info *pi = rs_model_tensor(m, t);
        size_t stride = pi->numel / (size_t)(probes / rs_model_tensor_count(m) + 1) + 1;
        for (size_t e = 0; e < pi->numel; e += (e + stride < pi->numel || e == pi->numel - 1) ? stride : pi->numel - 1 - e) {
            size_t i = pi->offset + e;
            float keep = p[i];
            p[i] = keep + (float)eps;
            double lp = loss_of(m, x, y, B);
            p[i] = keep - (float)eps;
            double lm = loss_of(m, x, y, B);
            p[i] = keep;
            double num = (lp - lm) / (2.0 * eps), diff = fabs(num - g[i]);
            checked++;
            if (diff > worst) worst = diff;
            if (diff > ATOL + RTOL * fabs(num)) {
                if (bad < 5) fprintf(stderr, "  %s %s[%zu]: analytic %.6g numeric %.6g\n", what, pi->name, e, g[i], num);
                bad++;
            }
            if (e == pi->numel - 1) break;
        }
    }
    printf("%-28s %5d parameters checked, max |diff| %.2e, %d off\n", what, checked, worst, bad);
    RS_CHECK(bad == 0 && checked > 10, "%s: %d of %d gradients differ from finite differences", what, bad, checked);

    /* The spec writes the graph back: it re-parses to the same layers and parameter count. */
    char *again = rs_model_spec(m);
    rs_model *m2 = NULL;
    RS_CHECK(rs_model_parse(again, what, rs_device_cpu(), NULL, seed, &m2, &pos, &err) == RS_OK, "%s: re-parse of '%s': %s",
             what, again, err.msg);
    if (m2) {
        char *twice = rs_model_spec(m2);
        RS_CHECK(!strcmp(again, twice), "%s: spec round trip '%s' vs '%s'", what, again, twice);
        RS_CHECK(rs_model_param_count(m2) == rs_model_param_count(m), "%s: %zu vs %zu parameters", what,
                 rs_model_param_count(m2), rs_model_param_count(m));
        RS_CHECK(!memcmp(rs_model_params(m2), rs_model_params(m), rs_model_numel(m) * sizeof(float)),
                 "%s: same seed, same initial weights", what);
        free(twice);
        rs_model_free(m2);
    }
    free(again);
    free(xf);
    free(xt);
    free(y);
    rs_model_free(m);
    return bad;
}

static void refused(const char *spec, const char *want)
{
    rs_model *m = NULL;
    rs_err err = {0};
    size_t pos = 0;
    rs_status st = rs_model_parse(spec, "bad", rs_device_cpu(), NULL, 1, &m, &pos, &err);
    RS_CHECK(st != RS_OK && strstr(err.msg, want), "'%s': message '%s' lacks '%s'", spec, err.msg, want);
    rs_model_free(m);
}

int main(void)
{
    check_model("residual mlp", "seq in=6 linear(8) res[ layernorm linear(8) tanh ] res[ linear(8) gelu(tanh) ] linear(5)",
                3, 400, 11, EPS);
    check_model("nested residuals", "seq in=5 linear(6) res[ linear(6) res[ tanh linear(6) ] ] linear(4)", 2, 300, 12, EPS);
    check_model("hand-written gpt, tied head",
                "seq ctx=5 embed(7,8) res[ layernorm linear(24) attn(2) linear(8) ] "
                "res[ layernorm linear(32) gelu(tanh) linear(8) ] layernorm linear(7,bias=0,tie=0.wte)",
                3, 600, 13, EPS);
    /* GPT-2's init puts weights at 0.02: a step of 1e-2 would be half a weight and the layer norms'
     * curvature would show; 2e-3 keeps the central difference in its O(eps^2) regime. */
    check_model("gpt preset", "gpt layers=2 heads=2 dim=8 ctx=6 vocab=9", 2, 600, 14, 2e-3);

    /* The preset is nanoGPT's block, the head tied: parameters = wte + wpe + L*(12C^2 + 13C) + 2C. */
    rs_model *g = NULL;
    rs_err err = {0};
    RS_CHECK(rs_model_parse("gpt layers=4 heads=4 dim=128 ctx=64 vocab=65", "g", rs_device_cpu(), NULL, 1, &g, NULL, &err) ==
                 RS_OK, "gpt: %s", err.msg);
    if (g) {
        size_t C = 128, want = 65 * C + 64 * C + 4 * (12 * C * C + 13 * C) + 2 * C;
        RS_CHECK(rs_model_param_count(g) == want, "gpt params %zu, nanoGPT's formula %zu", rs_model_param_count(g), want);
        RS_CHECK(rs_model_vocab(g) == 65 && rs_model_rows(g) == 64 && rs_model_classes(g) == 65, "vocab/rows/classes");
        RS_CHECK(rs_model_find_tensor(g, "0.wte") && !rs_model_find_tensor(g, "10.weight"),
                 "the tied head is no tensor of its own");
        /* At initialisation the loss is close to ln(V): the logits are near zero. */
        int32_t tok[2 * 64], y[2 * 64];
        for (int i = 0; i < 128; i++) { /* targets other than the input: the tied head favours the input token */
            tok[i] = (int32_t)((i * 7) % 65);
            y[i] = (int32_t)((i * 7 + 30) % 65);
        }
        double l = loss_of(g, tok, y, 2);
        RS_CHECK(fabs(l - log(65.0)) < 0.1, "initial loss %.4f, ln(65) = %.4f", l, log(65.0));
        tok[5] = 65;
        RS_CHECK(rs_model_forward(g, tok, 2, NULL, &err) != RS_OK && strstr(err.msg, "vocabulary"),
                 "a token outside the vocabulary is refused: %s", err.msg);
        rs_model_free(g);
    }

    refused("seq ctx=5 linear(4)", "reads the model's tokens");
    refused("seq in=5 embed(4,8) linear(3)", "needs token input");
    refused("seq in=6 res[ linear(4) ] linear(2)", "must give back the shape");
    refused("seq ctx=5 embed(7,8) linear(7,bias=0,tie=0.wpe)", "tie=0.wpe is (5, 8)");
    refused("seq ctx=5 embed(7,8) linear(7,tie=3.weight)", "names no parameter of an earlier layer");
    refused("seq ctx=5 embed(7,9) linear(27) attn(2) linear(7)", "2 heads do not divide the width 9");
    refused("seq ctx=5 embed(7,8) attn(2)", "(T, 3C)");
    refused("gpt layers=2 heads=3 dim=8 ctx=4 vocab=5", "3 heads do not divide dim=8");
    refused("gpt layers=2 dim=8 ctx=4", "needs vocab=");
    refused("gpt layers=2 dims=8 vocab=4", "did you mean 'dim='");
    return rs_test_finish("engine-graph");
}
