/* Tensor-parallel shards (engine/nn/tp.h) against the whole model, in one process: each shard runs
 * in a thread of its own and tp_copy/tp_reduce call a fake all-reduce over those threads (a barrier,
 * then every thread sums every thread's buffer in rank order), so no process group is involved.
 *  - equivalence: the shards' logits and loss equal the whole model's, and their gradients, placed
 *    back into the whole layout, equal the whole model's backward (MLP and GPT, tp 2 and 4, and the
 *    GPT with dropout: its masks sit on replicated activations and must be one process's);
 *  - finite differences of the sharded computation: every weight of a tiny MLP and GPT is perturbed
 *    in the whole buffer, cut into the shards and the loss recomputed across the threads; the placed
 *    analytic gradient must match. A tp_copy without its backward all-reduce, or a tp_reduce that
 *    all-reduced in backward too, gets the replicated and split gradients wrong by O(1);
 *  - cut then place rebuilds the whole buffer bit for bit, the shares of the sum of squares add up,
 *    shapes and parameter counts follow the plan, and models tp cannot split are refused by name. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/nn/spec.h"
#include "engine/nn/tp.h"
#include "rs_test.h"

#define MAXTP 4

/* ---- the fake group: threads of this process ---- */

typedef struct fake_group {
    int n;
    pthread_barrier_t bar;
    float *bufs[MAXTP];
} fake_group;

typedef struct member {
    fake_group *g;
    int rank;
    float *tmp;
    size_t cap;
    bool broken_copy; /* the ablation: sums in forward for tp_reduce only (see main) */
} member;

static void fake_all_reduce(void *ud, float *buf, size_t n)
{
    member *m = ud;
    fake_group *g = m->g;
    if (n > m->cap) {
        free(m->tmp);
        m->tmp = malloc(n * sizeof *m->tmp);
        m->cap = n;
    }
    g->bufs[m->rank] = buf;
    pthread_barrier_wait(&g->bar);
    for (size_t i = 0; i < n; i++) {
        float s = g->bufs[0][i];
        for (int r = 1; r < g->n; r++) s += g->bufs[r][i];
        m->tmp[i] = s;
    }
    pthread_barrier_wait(&g->bar); /* nobody overwrites a buffer another is still reading */
    memcpy(buf, m->tmp, n * sizeof *buf);
}

/* ---- one sharded step across threads ---- */

typedef struct shard_job {
    rs_model *s;
    member mb;
    const void *x;
    const int32_t *y;
    int B;
    bool backward;
    float loss;
    const float *logits; /* in the shard, until its next forward */
    rs_status st;
} shard_job;

static void *shard_main(void *arg)
{
    shard_job *j = arg;
    rs_err e = {0};
    j->st = rs_model_forward(j->s, j->x, j->B, &j->logits, &e);
    if (!j->st) j->st = rs_model_loss(j->s, j->y, j->B, &j->loss, &e);
    if (!j->st && j->backward) {
        rs_model_zero_grad(j->s);
        rs_model_backward(j->s, j->x, j->y, j->B, 1.0f);
    }
    if (j->st) fprintf(stderr, "shard %d: %s\n", j->mb.rank, e.msg);
    return NULL;
}

typedef struct tp_set {
    rs_tp_plan *plan;
    rs_model *shard[MAXTP];
    shard_job job[MAXTP];
    fake_group g;
    int tp;
} tp_set;

static bool set_new(tp_set *t, rs_model *whole, int tp)
{
    memset(t, 0, sizeof *t);
    t->tp = tp;
    rs_err e = {0};
    if (rs_tp_plan_new(whole, tp, &t->plan, &e)) {
        fprintf(stderr, "plan: %s\n", e.msg);
        return false;
    }
    t->g.n = tp;
    pthread_barrier_init(&t->g.bar, NULL, (unsigned)tp);
    for (int r = 0; r < tp; r++) {
        if (rs_tp_shard_new(t->plan, r, NULL, &t->shard[r], &e)) {
            fprintf(stderr, "shard %d: %s\n", r, e.msg);
            return false;
        }
        t->job[r] = (shard_job){.s = t->shard[r], .mb = {.g = &t->g, .rank = r}};
        rs_model_set_tp_comm(t->shard[r], fake_all_reduce, &t->job[r].mb);
    }
    return true;
}

static void set_free(tp_set *t)
{
    for (int r = 0; r < t->tp; r++) {
        rs_model_free(t->shard[r]);
        free(t->job[r].mb.tmp);
    }
    if (t->plan) pthread_barrier_destroy(&t->g.bar);
    rs_tp_plan_free(t->plan);
}

/* Every shard's forward, loss (and backward) at once; rank 0's loss (every rank's must be the same
 * bits: the logits after the last tp_reduce are). */
static float set_run(tp_set *t, const void *x, const int32_t *y, int B, bool backward)
{
    pthread_t th[MAXTP];
    for (int r = 0; r < t->tp; r++) {
        shard_job *j = &t->job[r];
        j->x = x, j->y = y, j->B = B, j->backward = backward;
        pthread_create(&th[r], NULL, shard_main, j);
    }
    for (int r = 0; r < t->tp; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < t->tp; r++) {
        RS_CHECK(t->job[r].st == RS_OK, "shard %d failed", r);
        RS_CHECK(t->job[r].loss == t->job[0].loss, "rank %d's loss %.9g differs from rank 0's %.9g", r,
                 (double)t->job[r].loss, (double)t->job[0].loss);
    }
    return t->job[0].loss;
}

/* The shards' gradients placed into one whole-model buffer (caller frees). */
static float *placed_grads(tp_set *t, size_t n)
{
    float *g = calloc(n, sizeof *g);
    for (int r = 0; r < t->tp; r++) rs_tp_place(t->plan, r, rs_model_grads(t->shard[r]), g);
    return g;
}

static double rel_norm(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d) / (sqrt(s) + 1e-30);
}

/* ---- inputs ---- */

static rs_model *model(const char *spec, uint64_t seed)
{
    rs_model *m = NULL;
    rs_err e = {0};
    size_t pos;
    if (rs_model_parse(spec, "m", rs_device_cpu(), NULL, seed, &m, &pos, &e)) fprintf(stderr, "%s: %s\n", spec, e.msg);
    return m;
}

static void batch(rs_model *m, int B, void **x, int32_t **y, uint64_t seed)
{
    rs_rng r;
    rs_rng_seed(&r, seed);
    size_t in = (size_t)rs_shape_numel(rs_model_input_shape(m)), rows = (size_t)rs_model_rows(m);
    *x = malloc((size_t)B * in * 4);
    *y = malloc((size_t)B * rows * 4);
    for (size_t i = 0; i < (size_t)B * in; i++) {
        if (rs_model_tokens(m)) ((int32_t *)*x)[i] = (int32_t)rs_rng_below(&r, (uint64_t)rs_model_vocab(m));
        else ((float *)*x)[i] = rs_rng_range(&r, -1, 1);
    }
    for (size_t i = 0; i < (size_t)B * rows; i++) (*y)[i] = (int32_t)rs_rng_below(&r, (uint64_t)rs_model_classes(m));
}

/* ---- the checks ---- */

/* Logits, loss and gradients of the shards against the whole model, on one batch. training: with
 * dropout on (the GPT's sits on replicated activations: the same masks as one process). */
static void equivalence(const char *spec, int tp, bool training)
{
    rs_model *w = model(spec, 5);
    RS_CHECK(w != NULL, "%s", spec);
    if (!w) return;
    rs_model_set_training(w, training);
    int B = 3;
    void *x;
    int32_t *y;
    batch(w, B, &x, &y, 11);
    tp_set t;
    bool ok = set_new(&t, w, tp);
    RS_CHECK(ok, "%s: tp=%d shards", spec, tp);
    if (ok) {
        rs_err e = {0};
        const float *lw;
        float loss_w = 0;
        RS_CHECK(!rs_model_forward(w, x, B, &lw, &e) && !rs_model_loss(w, y, B, &loss_w, &e), "%s", e.msg);
        rs_model_zero_grad(w);
        rs_model_backward(w, x, y, B, 1.0f);
        float loss_t = set_run(&t, x, y, B, true);
        size_t nl = (size_t)B * (size_t)rs_model_rows(w) * (size_t)rs_model_classes(w);
        double dl = 0;
        for (int r = 0; r < tp; r++) {
            double d = rel_norm(t.job[r].logits, lw, nl);
            dl = d > dl ? d : dl;
            RS_CHECK(!memcmp(t.job[r].logits, t.job[0].logits, nl * sizeof(float)),
                     "rank %d's logits are not rank 0's bits", r);
        }
        size_t n = rs_model_numel(w);
        float *g = placed_grads(&t, n);
        double dg = rel_norm(g, rs_model_grads(w), n);
        printf("%-52s tp=%d%s logits rel %.1e, loss %.7f vs %.7f, gradients rel %.1e\n", spec, tp,
               training ? " (train)" : "", dl, (double)loss_t, (double)loss_w, dg);
        RS_CHECK(dl <= 1e-5, "%s tp=%d: logits differ from the whole model's by %.3g (relative norm)", spec, tp, dl);
        RS_CHECK_CLOSE(loss_t, loss_w, 1e-6, 1e-5, "loss");
        RS_CHECK(dg <= 1e-5, "%s tp=%d: gradients differ from the whole model's by %.3g (relative norm)", spec, tp, dg);
        free(g);
    }
    set_free(&t);
    free(x);
    free(y);
    rs_model_free(w);
}

/* Central differences of the loss the shards compute together, against their placed gradients:
 * |analytic - numeric| <= 2e-3 + 1e-2 |numeric|, as tests/engine/nn/test_gradcheck.c. eps: 1e-2 for the
 * MLP; the GPT's weights are N(0, 0.02), so its layer norms see inputs of that size and need a step
 * well below it (1e-3: the float loss's rounding then costs ~1e-4 of the derivative). */
#define ATOL 2e-3
#define RTOL 1e-2
static void finite_differences(const char *spec, int tp, double EPS)
{
    rs_model *w = model(spec, 21);
    if (!w) return;
    rs_model_set_training(w, false);
    int B = 2;
    void *x;
    int32_t *y;
    batch(w, B, &x, &y, 4);
    tp_set t;
    if (set_new(&t, w, tp)) {
        for (int r = 0; r < tp; r++) rs_model_set_training(t.shard[r], false);
        set_run(&t, x, y, B, true);
        size_t n = rs_model_numel(w);
        float *g = placed_grads(&t, n), *p = rs_model_params(w);
        int bad = 0, checked = 0;
        double worst = 0;
        for (int k = 0; k < rs_model_tensor_count(w); k++) {
            const rs_param_info *pi = rs_model_tensor(w, k);
            for (size_t i = pi->offset; i < pi->offset + pi->numel; i++) {
                float keep = p[i];
                double l[2];
                for (int s = 0; s < 2; s++) {
                    p[i] = keep + (float)(s ? -EPS : EPS);
                    for (int r = 0; r < tp; r++) rs_tp_cut(t.plan, r, p, rs_model_params(t.shard[r]));
                    l[s] = set_run(&t, x, y, B, false);
                }
                p[i] = keep;
                double num = (l[0] - l[1]) / (2 * EPS), diff = fabs(num - g[i]);
                worst = diff > worst ? diff : worst;
                checked++;
                if (diff > ATOL + RTOL * fabs(num)) {
                    if (bad++ < 5) fprintf(stderr, "  %s[%zu]: analytic %.6g, numeric %.6g\n", pi->name, i - pi->offset,
                                           (double)g[i], num);
                }
            }
        }
        printf("%-52s tp=%d finite differences: %d weights, max abs err %.2e\n", spec, tp, checked, worst);
        RS_CHECK(bad == 0 && checked > 0, "%s tp=%d: %d of %d gradients differ from finite differences", spec, tp,
                 bad, checked);
        free(g);
    }
    set_free(&t);
    free(x);
    free(y);
    rs_model_free(w);
}

/* Cutting every rank's shard and placing them all back gives the whole buffer, bit for bit; the
 * shares of the sum of squares add up; shapes and counts follow the plan. */
static void layout(const char *spec, int tp)
{
    rs_model *w = model(spec, 3);
    if (!w) return;
    rs_err e = {0};
    rs_tp_plan *p = NULL;
    RS_CHECK(!rs_tp_plan_new(w, tp, &p, &e), "%s: %s", spec, e.msg);
    if (!p) {
        rs_model_free(w);
        return;
    }
    size_t n = rs_model_numel(w), rep, split, rb;
    rs_tp_plan_counts(p, &rep, &split, &rb);
    RS_CHECK(rep + split + rb == rs_model_param_count(w), "%s: %zu + %zu + %zu parameters, the model has %zu", spec,
             rep, split, rb, rs_model_param_count(w));
    float *back = calloc(n, sizeof *back);
    double sq = 0, want = 0;
    for (size_t i = 0; i < n; i++) want += (double)rs_model_params(w)[i] * rs_model_params(w)[i];
    for (int r = 0; r < tp; r++) {
        rs_model *s = NULL;
        RS_CHECK(!rs_tp_shard_new(p, r, NULL, &s, &e), "%s rank %d: %s", spec, r, e.msg);
        if (!s) continue;
        RS_CHECK(rs_model_numel(s) == rs_tp_shard_numel(p, r), "rank %d: shard numel", r);
        size_t want_params = rep + split / (size_t)tp + (r == 0 ? rb : 0);
        RS_CHECK(rs_model_param_count(s) == want_params, "%s rank %d: %zu parameters, the plan says %zu", spec, r,
                 rs_model_param_count(s), want_params);
        rs_tp_place(p, r, rs_model_params(s), back);
        sq += rs_tp_sumsq(p, r, rs_model_params(s));
        rs_model_free(s);
    }
    RS_CHECK(!memcmp(back, rs_model_params(w), n * sizeof *back), "%s tp=%d: place(cut) is not the whole buffer", spec,
             tp);
    RS_CHECK_CLOSE(sq, want, 0, 1e-12, "shares of the sum of squares");
    printf("%-52s tp=%d: %d pairs, %zu replicated + %zu split + %zu row biases\n", spec, tp, rs_tp_plan_pairs(p), rep,
           split, rb);
    free(back);
    rs_tp_plan_free(p);
    rs_model_free(w);
}

/* What rank 1 of a GPT split in two looks like. */
static void gpt_shape(void)
{
    rs_model *w = model("gpt layers=1 heads=4 dim=16 ctx=8 vocab=11", 1);
    rs_tp_plan *p = NULL;
    rs_model *s = NULL;
    rs_err e = {0};
    if (w) rs_model_set_threads(w, 3); /* a rank's count (1), or any: the shard computes with the whole's */
    RS_CHECK(w && !rs_tp_plan_new(w, 2, &p, &e) && !rs_tp_shard_new(p, 1, NULL, &s, &e), "%s", e.msg);
    if (s) {
        RS_CHECK(rs_model_threads(s) == 3, "shard threads %d, the whole model's 3", rs_model_threads(s));
        char *spec = rs_model_spec(s);
        const char *want = "seq ctx=8 embed(11,16,std=0.02) res[ layernorm tp_copy linear(24,std=0.02) attn(2) "
                           "linear(16,bias=0,std=0.0141421) tp_reduce ] res[ layernorm tp_copy linear(32,std=0.02) "
                           "gelu(tanh) linear(16,bias=0,std=0.0141421) tp_reduce ] layernorm linear(11,bias=0,tie=0.wte)";
        RS_CHECK(spec && !strcmp(spec, want), "rank 1's shard:\n  got  %s\n  want %s", spec, want);
        RS_CHECK(rs_tp_plan_pairs(p) == 2, "pairs: %d", rs_tp_plan_pairs(p));
        free(spec);
    }
    rs_model_free(s);
    rs_tp_plan_free(p);
    rs_model_free(w);
}

static void refused(const char *spec, int tp, const char *needle)
{
    rs_model *w = model(spec, 1);
    rs_tp_plan *p = NULL;
    rs_err e = {0};
    rs_status st = w ? rs_tp_plan_new(w, tp, &p, &e) : RS_ERR_ARG;
    RS_CHECK(st != RS_OK && strstr(e.msg, needle), "%s tp=%d: want an error naming '%s', got '%s'", spec, tp, needle,
             e.msg);
    rs_tp_plan_free(p);
    rs_model_free(w);
}

int main(void)
{
    const char *gpt = "gpt layers=2 heads=4 dim=16 ctx=8 vocab=11";
    equivalence("mlp 12-16-8-6", 2, false);
    equivalence("mlp 12-16-8-6", 4, false);
    equivalence(gpt, 2, false);
    equivalence(gpt, 4, false);
    equivalence("gpt layers=2 heads=4 dim=16 ctx=8 vocab=11 dropout=0.2", 2, true);
    finite_differences("mlp 5-6-3 act=tanh", 2, 1e-2);
    finite_differences("gpt layers=1 heads=2 dim=4 ctx=3 vocab=5", 2, 1e-3);
    layout("mlp 12-16-8-6", 2);
    layout(gpt, 4);
    gpt_shape();
    refused("gpt layers=1 heads=3 dim=12 ctx=4 vocab=5", 2, "3 heads do not divide by 2");
    refused("mlp 12-15-5", 2, "15 outputs do not divide by 2");
    refused("seq in=4 linear(3)", 2, "no pair");
    return rs_test_finish("tp");
}
