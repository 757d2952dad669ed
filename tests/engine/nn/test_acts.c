/* Activation sets and ranges (engine/nn/model.h):
 *  (a) two threads run forward on their own sets of one GPT and one CNN at once, 200 times each, and
 *      every output equals a serial forward of the same input bit for bit; inference writes nothing
 *      of the model (parameters, step);
 *  (b) a model split at every legal cut into two stages, and at every pair of them into three,
 *      passing the boundary activations and their gradients by hand, gives the whole pass's logits,
 *      loss and gradients bit for bit (dropout on: the stages draw the same masks); three stages on
 *      three copies of the GPT, as three processes would hold it, give them too once the tied
 *      embedding's two contributions are summed; and micro-batches kept in flight on separate sets
 *      (loss scale 1/M) give one pass over the whole batch to 1e-5;
 *  (c) no cut lands inside res[ ... ], and a set or a range across one is refused. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/nn/model.h"
#include "engine/nn/spec.h"
#include "rs_test.h"

#define GPT "gpt layers=2 heads=2 dim=16 ctx=8 vocab=11"
#define CNN "seq in=1x8x8 conv(4,3,pad=1) relu res[ conv(4,3,pad=1) relu ] maxpool(2) [ conv(8,3,pad=1) relu ] " \
            "flatten dropout(0.3) linear(5)"

static rs_model *build(const char *spec, const char *name, uint64_t seed)
{
    rs_model *m = NULL;
    rs_err err = {0};
    size_t pos = 0;
    RS_CHECK(rs_model_parse(spec, name, rs_device_cpu(), NULL, seed, &m, &pos, &err) == RS_OK, "%s: %s at %zu", name,
             err.msg, pos);
    return m;
}

static size_t in_numel(const rs_model *m, int B) { return (size_t)B * (size_t)rs_shape_numel(rs_model_input_shape(m)); }
static size_t out_numel(const rs_model *m, int B) { return (size_t)B * (size_t)rs_model_rows(m) * (size_t)rs_model_classes(m); }
static size_t layer_out_numel(rs_model *m, int i, int B)
{
    return (size_t)B * (size_t)rs_shape_numel(&rs_model_layer(m, i)->out);
}

/* Inputs (token ids or floats in the same 4-byte elements) and labels for batch B. */
static void make_batch(const rs_model *m, int B, uint64_t seed, void *x, int32_t *y)
{
    rs_rng r;
    rs_rng_seed(&r, seed);
    size_t n = in_numel(m, B);
    int V = rs_model_vocab(m);
    for (size_t i = 0; i < n; i++) {
        if (V) ((int32_t *)x)[i] = (int32_t)rs_rng_below(&r, (uint64_t)V);
        else ((float *)x)[i] = rs_rng_range(&r, -1.0f, 1.0f);
    }
    if (y)
        for (int i = 0; i < B * rs_model_rows(m); i++) y[i] = (int32_t)rs_rng_below(&r, (uint64_t)rs_model_classes(m));
}

static uint64_t checksum(const float *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n * sizeof *p; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* ---- (a) two threads, one model ---- */

#define NIN 6   /* distinct inputs per model */
#define BA 3
#define ITERS 200

typedef struct model_case {
    rs_model *m;
    void *x[NIN];       /* (BA, in) each */
    float *want[NIN];   /* serial logits of x[i] */
} model_case;

typedef struct worker {
    model_case *mc[2];
    int id, wrong, failed;
    char msg[600];
} worker;

static void *worker_main(void *ud)
{
    worker *w = ud;
    rs_err err = {0};
    rs_acts *a[2];
    /* Thread 1 starts small, so its sets grow inside the threaded part. */
    for (int k = 0; k < 2; k++) a[k] = rs_acts_new(w->mc[k]->m, w->id ? 1 : BA, &err);
    if (!a[0] || !a[1]) {
        w->failed = 1;
        snprintf(w->msg, sizeof w->msg, "rs_acts_new: %s", err.msg);
    }
    for (int it = 0; it < ITERS && !w->failed; it++)
        for (int k = 0; k < 2; k++) {
            model_case *mc = w->mc[k];
            int i = (it * 5 + w->id * 3 + k) % NIN;
            const float *z = NULL;
            if (rs_model_forward_acts(mc->m, a[k], mc->x[i], BA, &z, &err)) {
                w->failed = 1;
                snprintf(w->msg, sizeof w->msg, "forward: %s", err.msg);
                break;
            }
            w->wrong += memcmp(z, mc->want[i], out_numel(mc->m, BA) * sizeof *z) != 0;
        }
    for (int k = 0; k < 2; k++) rs_acts_free(a[k]);
    return NULL;
}

static void test_threads(void)
{
    model_case mc[2] = {{.m = build(GPT, "g", 3)}, {.m = build(CNN, "c", 4)}};
    if (!mc[0].m || !mc[1].m) return;
    rs_err err = {0};
    uint64_t sum[2], step[2];
    for (int k = 0; k < 2; k++) {
        rs_model *m = mc[k].m;
        rs_model_set_training(m, false);
        for (int i = 0; i < NIN; i++) {
            mc[k].x[i] = malloc(in_numel(m, BA) * 4);
            mc[k].want[i] = malloc(out_numel(m, BA) * sizeof(float));
            make_batch(m, BA, 100 + (uint64_t)(k * NIN + i), mc[k].x[i], NULL);
            const float *z = NULL;
            RS_CHECK(rs_model_forward(m, mc[k].x[i], BA, &z, &err) == RS_OK, "serial forward: %s", err.msg);
            if (z) memcpy(mc[k].want[i], z, out_numel(m, BA) * sizeof *z);
        }
        sum[k] = checksum(rs_model_params(m), rs_model_numel(m));
        step[k] = rs_model_step(m);
    }
    /* A set's memory is the model tracker's: counted while it lives, given back when freed. */
    rs_mem *mem = rs_model_mem(mc[0].m);
    int64_t acts0 = mem->live[RS_POOL_ACTS];
    rs_acts *probe = rs_acts_new(mc[0].m, BA, &err);
    RS_CHECK(probe && mem->live[RS_POOL_ACTS] > acts0, "a set's activations are not counted in the model's tracker");
    rs_acts_free(probe);
    RS_CHECK(mem->live[RS_POOL_ACTS] == acts0, "a freed set left %lld bytes counted",
             (long long)(mem->live[RS_POOL_ACTS] - acts0));

    worker w[2] = {{.mc = {&mc[0], &mc[1]}, .id = 0}, {.mc = {&mc[1], &mc[0]}, .id = 1}};
    pthread_t th[2];
    for (int t = 0; t < 2; t++) RS_CHECK(pthread_create(&th[t], NULL, worker_main, &w[t]) == 0, "pthread_create");
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++) {
        RS_CHECK(!w[t].failed, "thread %d: %s", t, w[t].msg);
        RS_CHECK(w[t].wrong == 0, "thread %d: %d of %d outputs differ from the serial forward", t, w[t].wrong, 2 * ITERS);
    }
    printf("(a) 2 threads x %d iterations x (GPT, CNN) on their own sets: %d outputs differ from serial\n", ITERS,
           w[0].wrong + w[1].wrong);
    for (int k = 0; k < 2; k++) {
        RS_CHECK(checksum(rs_model_params(mc[k].m), rs_model_numel(mc[k].m)) == sum[k], "inference changed the parameters");
        RS_CHECK(rs_model_step(mc[k].m) == step[k], "inference moved the step counter");
        for (int i = 0; i < NIN; i++) {
            free(mc[k].x[i]);
            free(mc[k].want[i]);
        }
        rs_model_free(mc[k].m);
    }
}

/* ---- (b) ranges ---- */

/* What the grad hook reported, as a sum of offsets and lengths (the same multiset gives the same). */
typedef struct hook_log {
    int calls;
    size_t sum;
} hook_log;

static void on_grad(void *ud, size_t off, size_t n)
{
    hook_log *h = ud;
    h->calls++;
    h->sum += off * 31 + n;
}

typedef struct pass {
    float *logits, *grads;
    float loss;
    hook_log hook;
} pass;

static void pass_free(pass *p)
{
    free(p->logits);
    free(p->grads);
}

static pass whole_pass(rs_model *m, const void *x, const int32_t *y, int B, uint64_t step)
{
    pass p = {0};
    rs_err err = {0};
    rs_model_set_step(m, step);
    rs_model_set_grad_hook(m, on_grad, &p.hook);
    rs_model_zero_grad(m);
    const float *z = NULL;
    RS_CHECK(rs_model_forward(m, x, B, &z, &err) == RS_OK, "forward: %s", err.msg);
    RS_CHECK(rs_model_loss(m, y, B, &p.loss, &err) == RS_OK, "loss: %s", err.msg);
    rs_model_backward(m, x, y, B, 1.0f);
    p.logits = malloc(out_numel(m, B) * sizeof(float));
    p.grads = malloc(rs_model_numel(m) * sizeof(float));
    if (z) memcpy(p.logits, z, out_numel(m, B) * sizeof(float));
    memcpy(p.grads, rs_model_grads(m), rs_model_numel(m) * sizeof(float));
    rs_model_set_grad_hook(m, NULL, NULL);
    return p;
}

/* Stages split at cuts c[0] < c[1] < ... of one model, each on its own set; the boundaries go through
 * copies, as they would between processes. */
#define MAXST 4
static pass split_pass(rs_model *m, const int *c, int ncut, const void *x, const int32_t *y, int B, uint64_t step)
{
    pass p = {0};
    rs_err err = {0};
    int ns = ncut + 1, lo[MAXST], hi[MAXST];
    rs_acts *a[MAXST];
    float *h[MAXST] = {0}, *dh[MAXST] = {0};
    const void *in[MAXST] = {x};
    bool ok = true;
    for (int k = 0; k < ns; k++) {
        lo[k] = k ? c[k - 1] : 0;
        hi[k] = k < ncut ? c[k] : rs_model_layer_count(m);
        a[k] = rs_acts_new_range(m, lo[k], hi[k], B, &err);
        RS_CHECK(a[k] != NULL, "stage set [%d, %d): %s", lo[k], hi[k], err.msg);
        ok &= a[k] != NULL;
    }
    p.logits = calloc(out_numel(m, B), sizeof(float));
    p.grads = malloc(rs_model_numel(m) * sizeof(float));
    rs_model_set_step(m, step);
    rs_model_set_grad_hook(m, on_grad, &p.hook);
    rs_model_zero_grad(m);
    for (int k = 0; k < ns && ok; k++) {
        const float *z = NULL;
        if (k) rs_acts_set_step(a[k], rs_acts_step(a[0])); /* what stage 0 would send along */
        ok = rs_model_forward_range(m, a[k], lo[k], hi[k], in[k], B, &z, &err) == RS_OK;
        RS_CHECK(ok, "stage %d forward: %s", k, err.msg);
        if (!ok) break;
        if (k == ns - 1) {
            memcpy(p.logits, z, out_numel(m, B) * sizeof(float));
        } else {
            size_t hn = layer_out_numel(m, hi[k] - 1, B);
            h[k] = malloc(hn * sizeof(float));
            dh[k] = malloc(hn * sizeof(float));
            memcpy(h[k], z, hn * sizeof(float));
            in[k + 1] = h[k];
        }
    }
    if (ok) {
        RS_CHECK(rs_model_loss_acts(m, a[ns - 1], y, B, &p.loss, &err) == RS_OK, "loss: %s", err.msg);
        for (int k = ns - 1; k >= 0; k--)
            rs_model_backward_range(m, a[k], lo[k], hi[k], in[k], k < ns - 1 ? dh[k] : NULL, k ? dh[k - 1] : NULL, B);
    }
    memcpy(p.grads, rs_model_grads(m), rs_model_numel(m) * sizeof(float));
    rs_model_set_grad_hook(m, NULL, NULL);
    for (int k = 0; k < ns; k++) {
        rs_acts_free(a[k]);
        free(h[k]);
        free(dh[k]);
    }
    return p;
}

/* A split pass against the whole one: everything bit for bit, the grad hook the same ranges. */
static bool same_pass(rs_model *m, const pass *p, const pass *ref, int B, const char *what)
{
    bool same = !memcmp(p->logits, ref->logits, out_numel(m, B) * sizeof(float)) && p->loss == ref->loss &&
                !memcmp(p->grads, ref->grads, rs_model_numel(m) * sizeof(float));
    RS_CHECK(same, "%s: logits, loss or gradients differ from the whole pass", what);
    RS_CHECK(p->hook.calls == ref->hook.calls && p->hook.sum == ref->hook.sum,
             "%s: the grad hook reported %d ranges, the whole pass %d", what, p->hook.calls, ref->hook.calls);
    return same;
}

static void test_split_every_cut(const char *spec, const char *name, int B)
{
    rs_model *m = build(spec, name, 7);
    if (!m) return;
    rs_model_set_training(m, true);
    void *x = malloc(in_numel(m, B) * 4);
    int32_t *y = malloc((size_t)(B * rs_model_rows(m)) * sizeof *y);
    make_batch(m, B, 11, x, y);
    pass ref = whole_pass(m, x, y, B, 40);
    int cuts[256], nc = rs_model_cut_points(m, cuts, 256), bad2 = 0, bad3 = 0, n3 = 0;
    RS_CHECK(nc > 2 && nc < 256, "%s: %d cut points", name, nc);
    char what[96];
    for (int i = 0; i < nc && i < 256; i++) {
        snprintf(what, sizeof what, "%s cut before layer %s", name, rs_model_layer(m, cuts[i])->name);
        pass p = split_pass(m, &cuts[i], 1, x, y, B, 40);
        bad2 += !same_pass(m, &p, &ref, B, what);
        pass_free(&p);
        for (int j = i + 1; j < nc && j < 256; j++) {
            int c2[2] = {cuts[i], cuts[j]};
            snprintf(what, sizeof what, "%s cuts at %d and %d", name, cuts[i], cuts[j]);
            p = split_pass(m, c2, 2, x, y, B, 40);
            bad3 += !same_pass(m, &p, &ref, B, what);
            n3++;
            pass_free(&p);
        }
    }
    printf("(b) %s, dropout on: %d splits in 2 stages and %d in 3, at every legal cut; %d and %d differ from the "
           "whole pass (loss %.6f)\n", name, nc, n3, bad2, bad3, (double)ref.loss);
    /* The step a pass draws its masks from matters: another step gives other gradients. */
    pass other = whole_pass(m, x, y, B, 41);
    RS_CHECK(memcmp(other.grads, ref.grads, rs_model_numel(m) * sizeof(float)) != 0,
             "%s: dropout masks do not depend on the step, so the check above proves nothing", name);
    pass_free(&other);
    pass_free(&ref);
    free(x);
    free(y);
    rs_model_free(m);
}

/* Largest difference over a tensor's range, relative to the largest value of the reference there. */
static double rel_diff(const float *a, const float *b, size_t off, size_t n)
{
    double worst = 0.0, top = 0.0;
    for (size_t i = off; i < off + n; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        top = fmax(top, fabs((double)b[i]));
    }
    return worst / (top > 0.0 ? top : 1.0);
}

/* Worst rel_diff over every tensor of m. */
static double grads_diff(const rs_model *m, const float *a, const float *b)
{
    double worst = 0.0;
    for (int t = 0; t < rs_model_tensor_count(m); t++)
        worst = fmax(worst, rel_diff(a, b, rs_model_tensor(m, t)->offset, rs_model_tensor(m, t)->numel));
    return worst;
}

static bool all_zero(const float *g, size_t off, size_t n)
{
    for (size_t i = off; i < off + n; i++)
        if (g[i] != 0.0f) return false;
    return true;
}

/* Three stages on three copies of the GPT, as three processes hold it: each copy's gradients cover
 * its own layers, and the tied embedding weight gets its two parts from the first and last stage. */
static void test_three_replicas(void)
{
    const int B = 3;
    rs_model *ref = build(GPT " dropout=0.1", "g", 9), *st[3];
    if (!ref) return;
    rs_model_set_training(ref, true);
    for (int k = 0; k < 3; k++) {
        st[k] = build(GPT " dropout=0.1", "g", 9);
        rs_model_set_training(st[k], true);
    }
    int n = rs_model_layer_count(ref);
    rs_top_item items[64];
    int ni = rs_model_top_items(ref, items, 64);
    /* Cuts after the first block pair and before the final norm. */
    int c1 = items[3].first, c2 = items[ni - 2].first, lo[3] = {0, c1, c2}, hi[3] = {c1, c2, n};
    void *x = malloc(in_numel(ref, B) * 4);
    int32_t *y = malloc((size_t)(B * rs_model_rows(ref)) * sizeof *y);
    make_batch(ref, B, 21, x, y);
    const uint64_t step = 4; /* the counter before the pass: the pass draws step 5 */
    pass want = whole_pass(ref, x, y, B, step);

    rs_err err = {0};
    rs_acts *a[3];
    float *h[3] = {0}, *dh[3] = {0};
    const void *in[3] = {x};
    float loss = 0.0f;
    const float *z = NULL;
    for (int k = 0; k < 3; k++) {
        rs_model_zero_grad(st[k]);
        a[k] = rs_acts_new_range(st[k], lo[k], hi[k], B, &err);
        RS_CHECK(a[k] != NULL, "stage %d set: %s", k, err.msg);
        if (!a[k]) return;
    }
    rs_model_set_step(st[0], step); /* stage 0's forward draws the whole pass's step */
    for (int k = 0; k < 3; k++) {
        if (k) rs_acts_set_step(a[k], rs_acts_step(a[0]));
        RS_CHECK(rs_model_forward_range(st[k], a[k], lo[k], hi[k], in[k], B, &z, &err) == RS_OK, "stage %d: %s", k,
                 err.msg);
        if (k < 2) {
            size_t hn = layer_out_numel(ref, hi[k] - 1, B);
            h[k] = malloc(hn * sizeof(float));
            dh[k] = malloc(hn * sizeof(float));
            memcpy(h[k], z, hn * sizeof(float));
            in[k + 1] = h[k];
        }
    }
    RS_CHECK(!memcmp(z, want.logits, out_numel(ref, B) * sizeof *z), "3 stages: logits differ from the whole pass");
    RS_CHECK(rs_model_loss_acts(st[2], a[2], y, B, &loss, &err) == RS_OK, "loss: %s", err.msg);
    RS_CHECK(loss == want.loss, "3 stages: loss %.9g, whole pass %.9g", (double)loss, (double)want.loss);
    for (int k = 2; k >= 0; k--)
        rs_model_backward_range(st[k], a[k], lo[k], hi[k], in[k], k < 2 ? dh[k] : NULL, k ? dh[k - 1] : NULL, B);

    /* The tied slot: the head reads the owner's range, found through the slot's offset. */
    const rs_layer *head = rs_model_layer(st[2], n - 1);
    const rs_param_info *wte = rs_model_find_tensor(ref, "0.wte");
    RS_CHECK(head->p[0].tied && wte && head->p[0].offset == wte->offset, "the head's weight is not a view of 0.wte");
    if (!wte) return;
    float *g0 = rs_model_grads(st[0]), *g2 = rs_model_grads(st[2]);
    for (size_t i = 0; i < wte->numel; i++) g0[wte->offset + i] += g2[wte->offset + i];
    double worst = 0.0;
    for (int t = 0; t < rs_model_tensor_count(ref); t++) {
        const rs_param_info *pi = rs_model_tensor(ref, t);
        int k = pi->layer < c1 ? 0 : pi->layer < c2 ? 1 : 2;
        double d = rel_diff(rs_model_grads(st[k]), want.grads, pi->offset, pi->numel);
        RS_CHECK(d <= 1e-6, "3 stages: %s (stage %d) gradient differs by %.3g relative", pi->name, k, d);
        worst = fmax(worst, d);
        /* A stage leaves the other stages' parameters alone (the tied weight aside). */
        for (int j = 0; j < 3; j++)
            if (j != k && !(j == 2 && pi == wte))
                RS_CHECK(all_zero(rs_model_grads(st[j]), pi->offset, pi->numel),
                         "stage %d wrote the gradient of %s, which stage %d owns", j, pi->name, k);
    }
    printf("(b) GPT in 3 stages on 3 copies, cuts %d and %d: logits and loss equal, gradients within %.2e "
           "(tied 0.wte summed from stages 0 and 2)\n", c1, c2, worst);
    for (int k = 0; k < 3; k++) {
        rs_acts_free(a[k]);
        rs_model_free(st[k]);
        free(h[k]);
        free(dh[k]);
    }
    pass_free(&want);
    free(x);
    free(y);
    rs_model_free(ref);
}

/* M micro-batches through two stages, a 1F1B order (stage 0 runs ahead, backwards interleave), each
 * micro-batch on its own pair of sets, loss scale 1/M: the gradients of one pass over all M*b. */
static void test_in_flight(void)
{
    enum { M = 3, b = 2 };
    rs_model *m = build(GPT, "g", 13);
    if (!m) return;
    rs_model_set_training(m, true);
    int n = rs_model_layer_count(m), cuts[64];
    int nc = rs_model_cut_points(m, cuts, 64), c = cuts[nc / 2];
    size_t xin = in_numel(m, b), yr = (size_t)(b * rs_model_rows(m)), hn = layer_out_numel(m, c - 1, b);
    char *x = malloc(M * xin * 4);
    int32_t *y = malloc(M * yr * sizeof *y);
    make_batch(m, M * b, 31, x, y); /* micro-batch j is samples [j*b, (j+1)*b) */
    pass want = whole_pass(m, x, y, M * b, 1);

    rs_err err = {0};
    rs_acts *s0[M], *s1[M];
    float *h[M], *dh[M], loss[M];
    for (int j = 0; j < M; j++) {
        s0[j] = rs_acts_new_range(m, 0, c, b, &err);
        s1[j] = rs_acts_new_range(m, c, n, b, &err);
        RS_CHECK(s0[j] && s1[j], "sets: %s", err.msg);
        if (!s0[j] || !s1[j]) return;
        rs_acts_set_loss_scale(s1[j], 1.0f / M);
        h[j] = malloc(hn * sizeof(float));
        dh[j] = malloc(hn * sizeof(float));
    }
    rs_model_zero_grad(m);
    /* F0(j): stage 0 forward; F1(j): stage 1 forward + loss; B1(j), B0(j): backwards. */
    const char *order = "F0 F0 F1 B1 B0 F0 F1 B1 B0 F1 B1 B0";
    int nf0 = 0, nf1 = 0, nb1 = 0, nb0 = 0;
    for (const char *o = order; *o; o += o[2] ? 3 : 2) {
        const float *z = NULL;
        if (o[0] == 'F' && o[1] == '0') {
            int j = nf0++;
            RS_CHECK(rs_model_forward_range(m, s0[j], 0, c, x + (size_t)j * xin * 4, b, &z, &err) == RS_OK, "F0: %s", err.msg);
            if (z) memcpy(h[j], z, hn * sizeof(float));
        } else if (o[0] == 'F') {
            int j = nf1++;
            RS_CHECK(rs_model_forward_range(m, s1[j], c, n, h[j], b, &z, &err) == RS_OK, "F1: %s", err.msg);
            RS_CHECK(rs_model_loss_acts(m, s1[j], y + (size_t)j * yr, b, &loss[j], &err) == RS_OK, "loss: %s", err.msg);
        } else if (o[1] == '1') {
            int j = nb1++;
            rs_model_backward_range(m, s1[j], c, n, h[j], NULL, dh[j], b);
        } else {
            int j = nb0++;
            rs_model_backward_range(m, s0[j], 0, c, x + (size_t)j * xin * 4, dh[j], NULL, b);
        }
    }
    double mean = 0.0;
    for (int j = 0; j < M; j++) mean += loss[j] / (double)M;
    double d = grads_diff(m, rs_model_grads(m), want.grads);
    RS_CHECK(fabs(mean - want.loss) <= 1e-5 * fabs(want.loss), "mean micro-batch loss %.9g, whole batch %.9g", mean,
             (double)want.loss);
    RS_CHECK(d <= 1e-5, "accumulated micro-batch gradients differ from one pass by %.3g relative", d);
    printf("(b) %d micro-batches in flight on 2 stages (cut %d, %s): loss %.6f vs %.6f, gradients within %.2e\n", M, c,
           order, mean, (double)want.loss, d);
    for (int j = 0; j < M; j++) {
        rs_acts_free(s0[j]);
        rs_acts_free(s1[j]);
        free(h[j]);
        free(dh[j]);
    }
    pass_free(&want);
    free(x);
    free(y);
    rs_model_free(m);
}

/* ---- (c) cut points ---- */

static void test_cuts(const char *spec, const char *name)
{
    rs_model *m = build(spec, name, 1);
    if (!m) return;
    int n = rs_model_layer_count(m), nres = 0;
    for (int i = 0; i < rs_model_block_count(m); i++) {
        const rs_block *b = rs_model_block(m, i);
        if (!b->residual) continue;
        nres++;
        for (int at = b->first + 1; at < b->first + b->count; at++)
            RS_CHECK(!rs_model_cut_ok(m, at), "%s: a cut before layer %d, inside res block %s, was accepted", name, at,
                     b->name);
    }
    RS_CHECK(nres > 0, "%s has no residual block to test", name);
    /* Every boundary between top-level items is a cut, and the parameters add up. */
    rs_top_item it[256];
    int ni = rs_model_top_items(m, it, 256);
    size_t total = 0;
    for (int i = 0; i < ni; i++) {
        RS_CHECK(rs_model_cut_ok(m, it[i].first), "%s: no cut before top-level item %d", name, i);
        total += it[i].params;
    }
    RS_CHECK(total == rs_model_param_count(m), "%s: top-level items own %zu parameters, the model %zu", name, total,
             rs_model_param_count(m));
    RS_CHECK(rs_model_cut_ok(m, 0) && rs_model_cut_ok(m, n) && !rs_model_cut_ok(m, n + 1) && !rs_model_cut_ok(m, -1),
             "%s: the ends", name);
    int cuts[256], nc = rs_model_cut_points(m, cuts, 256);
    printf("(c) %s: %d layers, %d top-level items, %d legal cuts:", name, n, ni, nc);
    for (int i = 0; i < nc && i < 256; i++) printf(" %d", cuts[i]);
    printf("\n");

    /* A set or a range across a residual block is refused, naming the problem. */
    const rs_block *b = NULL;
    for (int i = 0; i < rs_model_block_count(m) && !b; i++)
        if (rs_model_block(m, i)->residual) b = rs_model_block(m, i);
    rs_err err = {0};
    int mid = b->first + 1;
    RS_CHECK(rs_acts_new_range(m, 0, mid, 2, &err) == NULL && strstr(err.msg, "residual"), "set across a block: %s",
             err.msg);
    rs_acts *a = rs_acts_new(m, 2, &err);
    void *x = calloc(in_numel(m, 2), 4);
    const float *z = NULL;
    RS_CHECK(rs_model_forward_range(m, a, 0, mid, x, 2, &z, &err) != RS_OK && strstr(err.msg, "residual"),
             "range across a block: %s", err.msg);
    RS_CHECK(rs_model_forward_range(m, a, 0, n + 1, x, 2, &z, &err) != RS_OK, "range past the end accepted");
    rs_acts *part = rs_acts_new_range(m, 0, it[1].first, 2, &err);
    RS_CHECK(part && rs_model_forward_range(m, part, 0, n, x, 2, &z, &err) != RS_OK && strstr(err.msg, "holds"),
             "a set used beyond its layers: %s", err.msg);
    RS_CHECK(part && rs_model_loss_acts(m, part, (int32_t[64]){0}, 1, NULL, &err) != RS_OK,
             "a loss on a set without the last layer was accepted");
    rs_acts_free(part);
    rs_acts_free(a);
    free(x);
    rs_model_free(m);
}

int main(void)
{
    test_threads();
    test_split_every_cut(GPT " dropout=0.1", "gpt", 3);
    test_split_every_cut(CNN, "cnn", 4);
    test_three_replicas();
    test_in_flight();
    test_cuts(GPT, "gpt");
    test_cuts(CNN, "cnn");
    return rs_test_finish("engine-acts");
}
