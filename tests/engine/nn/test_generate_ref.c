/* The C half of the generation reference test (generate_ref.py drives it): a small GPT with wide
 * weights (so greedy choices are far from ties) generates greedily n = 4 ctx tokens after a prompt,
 * with the KV cache (the default), without it, and with window=shift; the script recomputes the
 * greedy text in NumPy float64 from the saved weights, cropping to the last ctx tokens as nanoGPT's
 * generate does, and must get the first two exactly (and the shift text by its own rule).
 *
 * Usage: test-generate-ref DIR
 *   DIR/gen.safetensors     the weights (rs_ckpt_save_model), metadata "model" = the preset
 *   DIR/gen.io.safetensors  "prompt" (P) I32; "cache", "nocache", "shift" (N) I32: the three texts */
#include <stdlib.h>
#include <string.h>

#include "engine/ckpt/checkpoint.h"
#include "engine/ckpt/safetensors.h"
#include "engine/core/rng.h"
#include "engine/nn/generate.h"
#include "engine/nn/spec.h"
#include "tests/rs_test.h"

#define SPEC "gpt layers=2 heads=2 dim=16 ctx=8 vocab=13"
#define T 8
#define V 13
#define P 3
#define N (4 * T)

typedef struct seqbuf {
    int32_t tok[N];
    int n;
} seqbuf;

static void on_tok(void *ud, int32_t t)
{
    seqbuf *s = ud;
    if (s->n < N) s->tok[s->n++] = t;
}

/* Every parameter N(0, 0.8), the layer norms' gains around 1: attention far from uniform. */
static void widen(rs_model *m)
{
    rs_rng r;
    rs_rng_seed(&r, 4242);
    float *p = rs_model_params(m);
    for (int t = 0; t < rs_model_tensor_count(m); t++) {
        const rs_param_info *pi = rs_model_tensor(m, t);
        bool gain = pi->shape.ndim == 1 && strstr(pi->name, ".weight");
        for (size_t i = 0; i < pi->numel; i++) p[pi->offset + i] = (gain ? 1.0f : 0.0f) + 0.8f * rs_rng_normal(&r);
    }
}

static void greedy(rs_model *m, const int32_t *prompt, bool cache, rs_gen_window w, seqbuf *out)
{
    rs_gen_cfg c = rs_gen_defaults();
    c.n = N;
    c.temp = 0.0f;
    c.cache = cache;
    c.window = w;
    rs_err e = {0};
    out->n = 0;
    RS_CHECK(rs_generate(m, prompt, P, &c, on_tok, NULL, out, NULL, &e) == RS_OK, "generate: %s", e.msg);
    RS_CHECK(out->n == N, "%d tokens of %d", out->n, N);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (run by generate_ref.py)\n", argv[0]);
        return 2;
    }
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(SPEC, "g", rs_device_cpu(), NULL, 9, &m, NULL, &e) == RS_OK, "%s: %s", SPEC, e.msg);
    if (!m) return rs_test_finish("generate-ref (C half)");
    widen(m);
    char path[512];
    snprintf(path, sizeof path, "%s/gen.safetensors", argv[1]);
    RS_CHECK(rs_ckpt_save_model(path, m, &e) == RS_OK, "%s: %s", path, e.msg);
    int32_t prompt[P] = {3, 7, 3};
    seqbuf a, b, c;
    greedy(m, prompt, true, RS_GEN_WINDOW_CROP, &a);
    greedy(m, prompt, false, RS_GEN_WINDOW_CROP, &b);
    greedy(m, prompt, true, RS_GEN_WINDOW_SHIFT, &c);
    const rs_shape p = {1, {P}}, n = {1, {N}};
    rs_st_tensor io[] = {
        {.name = "prompt", .dtype = RS_I32, .shape = p, .data = prompt},
        {.name = "cache", .dtype = RS_I32, .shape = n, .data = a.tok},
        {.name = "nocache", .dtype = RS_I32, .shape = n, .data = b.tok},
        {.name = "shift", .dtype = RS_I32, .shape = n, .data = c.tok},
    };
    const char *meta[] = {"model", SPEC};
    snprintf(path, sizeof path, "%s/gen.io.safetensors", argv[1]);
    RS_CHECK(rs_st_write(path, io, 4, meta, 1, &e) == RS_OK, "%s: %s", path, e.msg);
    rs_model_free(m);
    return rs_test_finish("generate-ref (C half)");
}
