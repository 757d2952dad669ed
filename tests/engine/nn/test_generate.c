/* Generation: the KV cache gives the logits a full recomputation gives, position by position, and so
 * the same tokens (greedy and sampled with the same seed) while the text fits the context; past the
 * context both go on; two threads decode from one model at once and get what one thread gets; the
 * sampler's temperature 0 is argmax and top_k never picks outside the k best. */
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

static void gen(rs_model *m, bool cache, float temp, int n, seqbuf *out)
{
    int32_t prompt[3] = {1, 4, 1};
    rs_gen_cfg c = rs_gen_defaults();
    c.cache = cache;
    c.temp = temp;
    c.top_k = 5;
    c.n = n;
    c.seed = 77;
    rs_err err = {0};
    out->n = 0;
    rs_gen_stats st;
    RS_CHECK(rs_generate(m, prompt, 3, &c, on_tok, NULL, out, &st, &err) == RS_OK, "generate: %s", err.msg);
    RS_CHECK(st.tokens == n && out->n == n, "%d tokens of %d", out->n, n);
}

typedef struct job {
    rs_model *m;
    seqbuf out;
} job;

static void *thread_main(void *ud)
{
    job *j = ud;
    gen(j->m, true, 0.8f, T - 3, &j->out);
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
    /* Past the context: both paths keep going and stay in the vocabulary. */
    gen(m, true, 0.8f, 3 * T, &a);
    gen(m, false, 0.8f, 3 * T, &b);
    for (int i = 0; i < a.n; i++) RS_CHECK(a.tok[i] >= 0 && a.tok[i] < V && b.tok[i] >= 0 && b.tok[i] < V, "in range");

    /* Re-entrant: two threads at once equal one. */
    job j[2] = {{.m = m}, {.m = m}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thread_main, &j[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    gen(m, true, 0.8f, T - 3, &a);
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
