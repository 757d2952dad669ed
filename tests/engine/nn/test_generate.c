/* Generation: the KV cache gives the logits a full recomputation gives, position by position, and so
 * the same tokens (greedy and sampled with the same seed), within the context and past it (n = 3 ctx:
 * nanoGPT's crop); a long prompt's batched prefill fills the cache as stepping through it does;
 * window=shift is another text past the context and the same before it; two threads decode from one
 * model at once and get what one thread gets; the sampler's temperature 0 is argmax and top_k never
 * picks outside the k best. (generate_ref.py checks the crop text against NumPy float64.) */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/generate.h"
#include "engine/nn/spec.h"
#include "rs_test.h"

#define T 12
#define V 11

typedef struct seqbuf {
    int32_t tok[256];
    int n;
} seqbuf;

static void on_tok(void *ud, int32_t t)
{
    seqbuf *s = ud;
    if (s->n < 256) s->tok[s->n++] = t;
}

static void gen_window(rs_model *m, bool cache, rs_gen_window w, float temp, int n, seqbuf *out)
{
    int32_t prompt[3] = {1, 4, 1};
    rs_gen_cfg c = rs_gen_defaults();
    c.cache = cache;
    c.window = w;
    c.temp = temp;
    c.top_k = 5;
    c.n = n;
    c.seed = 77;
    rs_err err = {0};
    out->n = 0;
    rs_gen_stats st;
    RS_CHECK(rs_generate(m, prompt, 3, &c, on_tok, NULL, out, &st, &err) == RS_OK, "generate: %s", err.msg);
    RS_CHECK(st.tokens == n && out->n == n, "%d tokens of %d", out->n, n);
    RS_CHECK(st.cached == cache, "the cache is %s", cache ? "used" : "off");
    int past = 3 + n - 1 - T; /* pushes whose window had slid */
    RS_CHECK(!cache || w != RS_GEN_WINDOW_CROP || st.recomputed == (past > 0 ? past : 0),
             "%d tokens recomputed past the context; expected %d", st.recomputed, past);
}

static void gen(rs_model *m, bool cache, float temp, int n, seqbuf *out)
{
    gen_window(m, cache, RS_GEN_WINDOW_CROP, temp, n, out);
}

static bool same(const seqbuf *a, const seqbuf *b) { return a->n == b->n && !memcmp(a->tok, b->tok, (size_t)a->n * sizeof *a->tok); }

/* A long prompt in one batched forward: the logits after it and after each later token are those of
 * stepping through the prompt one token at a time. */
static void check_prefill(rs_model *m)
{
    rs_err err = {0};
    rs_gen *a = rs_gen_new(m, &err), *b = rs_gen_new(m, &err);
    RS_CHECK(a && b, "decoders: %s", err.msg);
    int32_t toks[T];
    for (int i = 0; i < T; i++) toks[i] = (int32_t)((i * 7 + 2) % V);
    float za[V], zb[V];
    double worst = 0.0;
    for (int n = T / 2; a && b && n <= T / 2 + 1; n++) {
        RS_CHECK(rs_gen_prefill(a, toks, n, za, &err) == RS_OK, "prefill: %s", err.msg);
        rs_gen_reset(b);
        for (int i = 0; i < n; i++) RS_CHECK(rs_gen_push(b, toks[i], zb, &err) == RS_OK, "push: %s", err.msg);
        for (int t = n; t <= T; t++) { /* on to the first token past the context */
            for (int v = 0; v < V; v++) worst = fmax(worst, fabs((double)za[v] - zb[v]));
            int32_t nx = (int32_t)((t * 3 + 1) % V);
            RS_CHECK(rs_gen_push(a, nx, za, &err) == RS_OK && rs_gen_push(b, nx, zb, &err) == RS_OK, "%s", err.msg);
        }
        RS_CHECK(rs_gen_len(a) == T && rs_gen_len(b) == T, "the window is the context: %d %d", rs_gen_len(a),
                 rs_gen_len(b));
    }
    printf("batched prefill vs stepping the prompt: max |logit diff| %.2e\n", worst);
    RS_CHECK(worst < 1e-4, "prefill logits differ by %.3g", worst);
    rs_gen_free(a);
    rs_gen_free(b);
}

typedef struct job {
    rs_model *m;
    seqbuf out;
} job;

static void *thread_main(void *ud)
{
    job *j = ud;
    gen(j->m, true, 0.8f, 2 * T, &j->out); /* past the context: each decoder's own batched forwards */
    return NULL;
}

int main(void)
{
    rs_model *m = NULL;
    rs_err err = {0};
    RS_CHECK(rs_model_parse("gpt layers=2 heads=2 dim=16 ctx=12 vocab=11", "g", rs_device_cpu(), NULL, 3, &m, NULL, &err) ==
                 RS_OK, "%s", err.msg);
    if (!m) return rs_test_finish("engine-generate");
    /* Untrained GPT-2 init gives nearly flat logits; sharpen them so sampling is not a coin toss. */
    float *p = rs_model_params(m);
    for (size_t i = 0; i < rs_model_numel(m); i++) p[i] *= 8.0f;

    /* Logits: cache against a full forward at every position of a sequence of T tokens. */
    int32_t toks[T];
    for (int i = 0; i < T; i++) toks[i] = (int32_t)((i * 5 + 3) % V);
    toks[4] = toks[2];
    rs_gen *g = rs_gen_new(m, &err);
    RS_CHECK(g != NULL, "rs_gen_new: %s", err.msg);
    double worst = 0.0;
    for (int i = 0; g && i < T; i++) {
        float a[V], b[V];
        RS_CHECK(rs_gen_push(g, toks[i], a, &err) == RS_OK, "push: %s", err.msg);
        RS_CHECK(rs_gen_full_logits(m, NULL, toks, i + 1, b, &err) == RS_OK, "full: %s", err.msg);
        for (int v = 0; v < V; v++) worst = fmax(worst, fabs((double)a[v] - b[v]));
    }
    printf("cache vs full forward over %d positions: max |logit diff| %.2e\n", T, worst);
    RS_CHECK(worst < 1e-4, "cached logits differ from the full forward by %.3g", worst);
    RS_CHECK(rs_gen_push(g, 99, NULL, &err) != RS_OK && strstr(err.msg, "vocabulary"), "token 99 refused: %s", err.msg);
    rs_gen_free(g);

    /* Tokens: greedy and sampled, up to the end of the context. */
    seqbuf a, b;
    for (int s = 0; s < 2; s++) {
        float temp = s ? 0.8f : 0.0f;
        gen(m, true, temp, T - 3, &a);
        gen(m, false, temp, T - 3, &b);
        RS_CHECK(a.n == b.n && !memcmp(a.tok, b.tok, (size_t)a.n * sizeof *a.tok),
                 "temp %.1f: the cache and recomputation sampled different tokens", (double)temp);
        int distinct = 0;
        for (int i = 1; i < a.n; i++) distinct += a.tok[i] != a.tok[0];
        printf("temp %.1f: %d tokens, same with and without the cache\n", (double)temp, a.n);
        if (s) RS_CHECK(distinct > 0, "sampling gave one token over and over");
    }
    /* Past the context (n = 3 ctx): the cache's text is the recomputed one, nanoGPT's crop. */
    for (int s = 0; s < 2; s++) {
        float temp = s ? 0.8f : 0.0f;
        gen(m, true, temp, 3 * T, &a);
        gen(m, false, temp, 3 * T, &b);
        RS_CHECK(same(&a, &b), "temp %.1f, n = 3 ctx: the cache and recomputation sampled different tokens",
                 (double)temp);
        printf("temp %.1f, n = %d (3 ctx): same with and without the cache\n", (double)temp, a.n);
    }
    /* window=shift: the same until the context fills, another text after (so the two are told apart). */
    seqbuf c;
    gen(m, true, 0.0f, 3 * T, &a);
    gen_window(m, true, RS_GEN_WINDOW_SHIFT, 0.0f, 3 * T, &c);
    int differ = -1;
    for (int i = 0; i < a.n && differ < 0; i++)
        if (a.tok[i] != c.tok[i]) differ = i;
    printf("window=shift departs from crop at token %d (context %d, prompt 3)\n", differ, T);
    RS_CHECK(differ >= T - 3, "shift departs at token %d, before the context fills", differ);
    RS_CHECK(differ >= 0, "shift gave crop's text past the context");
    for (int i = 0; i < c.n; i++) RS_CHECK(c.tok[i] >= 0 && c.tok[i] < V, "in range");
    check_prefill(m);

    /* Re-entrant: two threads at once equal one. */
    job j[2] = {{.m = m}, {.m = m}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thread_main, &j[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    gen(m, true, 0.8f, 2 * T, &a);
    for (int i = 0; i < 2; i++)
        RS_CHECK(j[i].out.n == a.n && !memcmp(j[i].out.tok, a.tok, (size_t)a.n * sizeof *a.tok),
                 "thread %d decoded differently", i);

    /* The sampler. */
    rs_rng r;
    rs_rng_seed(&r, 5);
    int counts[V] = {0};
    float scratch[V];
    for (int t = 0; t < 2000; t++) {
        float z[V];
        for (int v = 0; v < V; v++) z[v] = (float)v * 0.3f;
        counts[rs_gen_sample(z, V, 1.0f, 3, &r, scratch)]++;
    }
    for (int v = 0; v < V - 3; v++) RS_CHECK(counts[v] == 0, "top_k=3 drew token %d", v);
    RS_CHECK(counts[V - 1] > counts[V - 2] && counts[V - 2] > counts[V - 3], "more likely tokens drawn more often");
    float z[V] = {0};
    z[7] = 0.5f;
    RS_CHECK(rs_gen_sample(z, V, 0.0f, 0, &r, scratch) == 7, "temp 0 is argmax");
    rs_model_free(m);
    return rs_test_finish("engine-generate");
}
