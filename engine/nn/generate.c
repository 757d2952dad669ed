/* Token-by-token decoding with a KV cache, and sampling (see generate.h). The decoder runs the
 * model's graph one position at a time through each layer's one-position form (its descriptor's
 * `gen`): a row-wise layer runs its own forward on a one-row view of itself; a layer with a step
 * (the embedding, attention) runs that, with the cache it asked for. Whatever the cache cannot give
 * (a model without one-position forms, the window past the context) is a batched forward of the
 * window through the decoder's own activation set. */
#include "generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/core/kernels.h"
#include "model_internal.h"

const char *const rs_gen_window_words[] = {"crop", "shift", NULL};

struct rs_gen {
    rs_model *m;                 /* borrowed */
    const rs_kernels *k;
    rs_kctx ctx;                 /* the decoder's own: threads copied from the model's when made */
    int T;                       /* the model's context */
    bool stepping;               /* the cache is used: asked for, and every layer has a one-position form */
    rs_gen_window window;
    bool slid;                   /* crop: the window has slid past the context; the cache no longer holds */
    /* Stepping only (else NULL): */
    rs_layer *row;               /* (nlayers) each layer as a one-position view (shapes of one row), owned */
    float **act;                 /* (nlayers) one row of each node's output, owned (device memory) */
    float **cache;               /* (nlayers) a stepping layer's cache, owned (device memory); else NULL */
    void **saved;                /* (nlayers) what a row-wise forward saves for one row (a layer norm's
                                    mean and rstd), owned (device memory); else NULL */
    size_t *bytes, *cache_bytes, *saved_bytes; /* (nlayers) sizes of the three */
    int32_t *tok;                /* (1) the token id in device memory, owned */
    /* Always: */
    int32_t *hist;               /* (T) the window: the last len tokens, owned */
    int32_t *win;                /* (T) a batched forward's input, the window padded with zeros, owned */
    rs_acts *full;               /* the batched forward's activations (B 1), owned; made when first needed */
    int len;
    int recomputed;              /* pushes whose logits came from a batched forward */
};

/* Below this many tokens a prompt is stepped through one at a time: a batched forward costs ctx rows
 * whatever the prompt's length, a step one row (at a GEMV's rate, several times a GEMM row's). */
enum { PREFILL_STEPS_MAX_DIV = 8 };

static int row_width(const rs_layer *l) { return (int)l->out.d[l->out.ndim - 1]; }

/* Device memory for the decoder, counted with the model's activations. */
static void *dev_alloc(rs_gen *g, size_t bytes)
{
    void *p = NULL;
    if (g->k->mem_alloc(&g->ctx, rs_model_mem(g->m), RS_POOL_ACTS, bytes, &p)) rs_kctx_check(&g->ctx, NULL);
    return p;
}

static void dev_free(rs_gen *g, void *p, size_t bytes)
{
    if (p) g->k->mem_free(&g->ctx, rs_model_mem(g->m), RS_POOL_ACTS, p, bytes);
}

void rs_gen_free(rs_gen *g)
{
    if (!g) return;
    for (int i = 0; g->bytes && i < g->m->nlayers; i++) {
        if (g->act) dev_free(g, g->act[i], g->bytes[i]);
        if (g->cache) dev_free(g, g->cache[i], g->cache_bytes[i]);
        if (g->saved) dev_free(g, g->saved[i], g->saved_bytes[i]);
    }
    dev_free(g, g->tok, sizeof *g->tok);
    rs_acts_free(g->full);
    free(g->row);
    free(g->act);
    free(g->cache);
    free(g->saved);
    free(g->bytes);
    free(g->cache_bytes);
    free(g->saved_bytes);
    free(g->hist);
    free(g->win);
    free(g);
}

/* The first layer without a one-position form (NULL when every layer has one). */
static const rs_layer *stepless(const rs_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        rs_layer_gen gen = m->layers[i].ops->gen;
        if (gen != RS_LAYER_GEN_ROW && gen != RS_LAYER_GEN_STEP) return &m->layers[i];
    }
    return NULL;
}

bool rs_gen_no_cache_reason(const rs_model *m, char *buf, size_t n)
{
    const rs_layer *no = stepless(m);
    if (no && n) snprintf(buf, n, "layer %s (%s) has no one-position form", no->name, no->ops->kind);
    return no != NULL;
}

/* Layer i's one-row view and its device memory. */
static bool layer_alloc(rs_gen *g, int i)
{
    const rs_layer *l = &g->m->layers[i];
    rs_layer *r = &g->row[i];
    *r = *l;
    if (l->ops->gen == RS_LAYER_GEN_ROW) {
        r->in = (rs_shape){1, {l->in.d[l->in.ndim - 1]}};
        r->out = (rs_shape){1, {row_width(l)}};
        g->saved_bytes[i] = l->ops->saved_bytes ? l->ops->saved_bytes(r, 1) : 0;
        if (g->saved_bytes[i] && !(g->saved[i] = dev_alloc(g, g->saved_bytes[i]))) return false;
    } else if (l->ops->cache_floats) {
        g->cache_bytes[i] = l->ops->cache_floats(l, g->T) * sizeof(float);
        if (g->cache_bytes[i] && !(g->cache[i] = dev_alloc(g, g->cache_bytes[i]))) return false;
    }
    g->bytes[i] = (size_t)row_width(l) * sizeof(float);
    return (g->act[i] = dev_alloc(g, g->bytes[i])) != NULL;
}

/* The per-layer rows and caches of a stepping decoder. */
static bool stepping_alloc(rs_gen *g)
{
    size_t n = (size_t)g->m->nlayers;
    g->row = calloc(n, sizeof *g->row);
    g->act = calloc(n, sizeof *g->act);
    g->cache = calloc(n, sizeof *g->cache);
    g->saved = calloc(n, sizeof *g->saved);
    g->bytes = calloc(n, sizeof *g->bytes);
    g->cache_bytes = calloc(n, sizeof *g->cache_bytes);
    g->saved_bytes = calloc(n, sizeof *g->saved_bytes);
    if (!g->row || !g->act || !g->cache || !g->saved || !g->bytes || !g->cache_bytes || !g->saved_bytes ||
        !(g->tok = dev_alloc(g, sizeof *g->tok)))
        return false;
    for (int i = 0; i < g->m->nlayers; i++)
        if (!layer_alloc(g, i)) return false;
    return true;
}

rs_gen *rs_gen_new_cfg(rs_model *m, bool cache, rs_gen_window window, rs_err *err)
{
    if (!m->built || !m->tokens) {
        rs_err_set(err, RS_ERR_ARG, "model %s is not a token model; generate needs a language model such as "
                   "`model g = gpt ...`", m->name);
        return NULL;
    }
    rs_gen *g = calloc(1, sizeof *g);
    if (!g) goto nomem;
    g->m = m;
    g->k = m->k;
    g->ctx = m->ctx;
    rs_kctx_check(&g->ctx, NULL); /* the model's pending failure is the model's */
    g->T = (int)m->in.d[0];
    g->stepping = cache && !stepless(m);
    g->window = window;
    g->hist = calloc((size_t)g->T, sizeof *g->hist);
    g->win = calloc((size_t)g->T, sizeof *g->win);
    if (!g->hist || !g->win || (g->stepping && !stepping_alloc(g))) goto nomem;
    return g;
nomem:
    rs_gen_free(g);
    rs_err_set(err, RS_ERR_NOMEM, "out of memory for the decoder of model %s", m->name);
    return NULL;
}

rs_gen *rs_gen_new(rs_model *m, rs_err *err) { return rs_gen_new_cfg(m, true, RS_GEN_WINDOW_CROP, err); }
bool rs_gen_cached(const rs_gen *g) { return g->stepping; }

void rs_gen_reset(rs_gen *g)
{
    g->len = 0;
    g->slid = false;
}

int rs_gen_len(const rs_gen *g) { return g->len; }
int rs_gen_recomputed(const rs_gen *g) { return g->recomputed; }

/* Runs every node on position pos for token tok; the last node's row is the logits. Failures stay in
 * the decoder's context, as in a forward pass. */
static rs_status step(rs_gen *g, int32_t tok, int pos)
{
    const rs_model *m = g->m;
    RS_KTRY(g->k->copy_h2d(&g->ctx, g->tok, &tok, sizeof tok)); /* the embedding reads it from the device */
    rs_exec x = {.k = g->k, .ctx = &g->ctx, .params = m->params, .training = false, .inference = true};
    for (int i = 0; i < m->nlayers; i++) {
        rs_layer *r = &g->row[i];
        const float *in = r->src[0] >= 0 ? g->act[r->src[0]] : NULL;
        x.saved = g->saved[i];
        if (r->ops->gen == RS_LAYER_GEN_STEP) {
            rs_layer_pos s = {.pos = pos, .maxT = g->T, .tok = g->tok, .cache = g->cache[i]};
            r->ops->step(r, &x, &s, in, g->act[i]);
        } else if (r->ops->nin == 2) {
            r->ops->forward2(r, &x, in, g->act[r->src[1]], g->act[i], 1);
        } else {
            r->ops->forward(r, &x, in, g->act[i], 1);
        }
        RS_KTRY(rs_kctx_status(&g->ctx));
    }
    return RS_OK;
}

/* The caches of positions 0..n-1 from the batched forward just run: each cached layer steps through
 * the rows its input had there (its own step keeps its own cache layout; the row it writes is
 * scratch). */
static rs_status fill_caches(rs_gen *g, int n, rs_err *err)
{
    const rs_model *m = g->m;
    rs_exec x = {.k = g->k, .ctx = &g->ctx, .params = m->params, .training = false, .inference = true};
    for (int i = 0; i < m->nlayers; i++) {
        if (!g->cache[i]) continue;
        int j = m->layers[i].src[0];
        while (j >= 0 && m->layers[j].view) j = m->layers[j].src[0]; /* a view's rows are its source's */
        if (j < 0) return rs_err_set(err, RS_ERR_UNSUPPORTED, "layer %s keeps a cache of the tokens themselves",
                                     m->layers[i].name);
        const float *in = g->full->acts + g->full->act_off[j];
        size_t w = (size_t)m->layers[i].in.d[m->layers[i].in.ndim - 1];
        for (int p = 0; p < n; p++) {
            rs_layer_pos s = {.pos = p, .maxT = g->T, .tok = g->tok, .cache = g->cache[i]};
            g->row[i].ops->step(&g->row[i], &x, &s, in + (size_t)p * w, g->act[i]);
        }
        if (rs_kctx_status(&g->ctx)) return rs_kctx_check(&g->ctx, err);
    }
    return RS_OK;
}

/* One batched forward of the window hist[0..len): the logits after it (when wanted) and, with fill,
 * the caches of its positions. */
static rs_status run_window(rs_gen *g, float *logits, bool fill, rs_err *err)
{
    int V = rs_model_vocab(g->m);
    if (!g->full && !(g->full = rs_acts_new(g->m, 1, err))) return err ? err->code : RS_ERR_NOMEM;
    memset(g->win, 0, (size_t)g->T * sizeof *g->win); /* causal: what follows position len-1 cannot change it */
    memcpy(g->win, g->hist, (size_t)g->len * sizeof *g->win);
    const float *z = NULL;
    rs_status st = rs_model_run_range(g->m, g->full, 0, g->m->nlayers, g->win, 1, false, &z, err);
    if (st) return st;
    if (logits) memcpy(logits, z + (size_t)(g->len - 1) * (size_t)V, (size_t)V * sizeof *logits);
    return fill ? fill_caches(g, g->len, err) : RS_OK;
}

rs_status rs_gen_push(rs_gen *g, int32_t tok, float *logits, rs_err *err)
{
    int V = rs_model_vocab(g->m);
    if (tok < 0 || tok >= V)
        return rs_err_set(err, RS_ERR_ARG, "token %d is outside the vocabulary of %d", (int)tok, V);
    if (g->len == g->T && g->stepping && g->window == RS_GEN_WINDOW_SHIFT) {
        /* Context shift: the newest half goes back to positions 0.. in one batched forward. */
        int keep = g->T / 2;
        memmove(g->hist, g->hist + g->T - keep, (size_t)keep * sizeof *g->hist);
        g->len = keep;
        rs_status st = run_window(g, NULL, true, err);
        if (st) return st;
    } else if (g->len == g->T) {
        /* nanoGPT's crop: the window slides by one and every position moves, so the cache is done with. */
        memmove(g->hist, g->hist + 1, (size_t)(g->T - 1) * sizeof *g->hist);
        g->len--;
        g->slid = true;
    }
    g->hist[g->len++] = tok;
    if (!g->stepping || g->slid) {
        g->recomputed += logits != NULL;
        return logits ? run_window(g, logits, false, err) : RS_OK;
    }
    if (step(g, tok, g->len - 1) ||
        (logits && g->k->copy_d2h(&g->ctx, logits, g->act[g->m->nlayers - 1], (size_t)V * sizeof *logits))) {
        g->len--;
        return rs_kctx_check(&g->ctx, err);
    }
    return RS_OK;
}

rs_status rs_gen_prefill(rs_gen *g, const int32_t *toks, int n, float *logits, rs_err *err)
{
    if (n < 1) return rs_err_set(err, RS_ERR_ARG, "an empty prompt");
    rs_gen_reset(g);
    if (n > g->T) { /* nanoGPT crops the prompt too */
        toks += n - g->T;
        n = g->T;
    }
    if (g->stepping && n * PREFILL_STEPS_MAX_DIV <= g->T) {
        rs_status st = RS_OK;
        for (int i = 0; i < n && !st; i++) st = rs_gen_push(g, toks[i], i == n - 1 ? logits : NULL, err);
        return st;
    }
    int V = rs_model_vocab(g->m);
    for (int i = 0; i < n; i++)
        if (toks[i] < 0 || toks[i] >= V)
            return rs_err_set(err, RS_ERR_ARG, "token %d is outside the vocabulary of %d", (int)toks[i], V);
    memcpy(g->hist, toks, (size_t)n * sizeof *g->hist);
    g->len = n;
    /* a full window under crop slides at the next token: its cache would never be read */
    return run_window(g, logits, g->stepping && !(n == g->T && g->window == RS_GEN_WINDOW_CROP), err);
}

rs_status rs_gen_full_logits(rs_model *m, rs_acts *a, const int32_t *tokens, int len, float *logits, rs_err *err)
{
    int T = (int)m->in.d[0], V = rs_model_vocab(m);
    if (len < 1) return rs_err_set(err, RS_ERR_ARG, "an empty context");
    if (!a) {
        rs_status st = rs_model_reserve(m, 1, err);
        if (st) return st;
        a = m->dflt;
    }
    const int32_t *w = len > T ? tokens + len - T : tokens; /* nanoGPT crops to the last ctx tokens */
    int n = len > T ? T : len;
    int32_t *x = calloc((size_t)T, sizeof *x); /* causal: what follows position n-1 cannot change it */
    if (!x) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    memcpy(x, w, (size_t)n * sizeof *x);
    const float *z = NULL;
    rs_status st = rs_model_run_range(m, a, 0, m->nlayers, x, 1, false, &z, err);
    if (!st) memcpy(logits, z + (size_t)(n - 1) * (size_t)V, (size_t)V * sizeof *logits);
    free(x);
    return st;
}

rs_gen_cfg rs_gen_defaults(void)
{
    return (rs_gen_cfg){.n = 200, .temp = 0.8f, .top_k = 40, .seed = 1, .cache = true, .window = RS_GEN_WINDOW_CROP};
}

int32_t rs_gen_sample(float *z, int V, float temp, int top_k, rs_rng *rng, float *scratch)
{
    int best = 0;
    for (int i = 1; i < V; i++)
        if (z[i] > z[best]) best = i;
    if (!(temp > 0.0f)) return best;
    if (top_k > 0 && top_k < V) {
        /* The k-th largest value, by partial selection on a copy (V is small for characters). */
        float *c = scratch;
        memcpy(c, z, (size_t)V * sizeof *c);
        for (int j = 0; j < top_k; j++) {
            int b = j;
            for (int i = j + 1; i < V; i++)
                if (c[i] > c[b]) b = i;
            float t = c[j];
            c[j] = c[b];
            c[b] = t;
        }
        float kth = c[top_k - 1];
        for (int i = 0; i < V; i++)
            if (z[i] < kth) z[i] = -INFINITY;
    }
    double sum = 0.0, mx = z[best];
    for (int i = 0; i < V; i++) sum += exp(((double)z[i] - mx) / temp);
    double u = (double)rs_rng_uniform(rng) * sum, acc = 0.0;
    for (int i = 0; i < V; i++) {
        acc += exp(((double)z[i] - mx) / temp);
        if (u < acc) return i;
    }
    return best;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

rs_status rs_generate(rs_model *m, const int32_t *prompt, int plen, const rs_gen_cfg *cfg,
                      void (*on_token)(void *ud, int32_t tok), bool (*stop)(void *ud), void *ud,
                      rs_gen_stats *stats, rs_err *err)
{
    rs_gen_stats s = {0};
    if (plen < 1) return rs_err_set(err, RS_ERR_ARG, "the prompt is empty");
    if (cfg->n < 0) return rs_err_set(err, RS_ERR_ARG, "n=%d; expected a count >= 0", cfg->n);
    int V = rs_model_vocab(m);
    if (!V) return rs_err_set(err, RS_ERR_ARG, "model %s is not a token model; generate needs a language model", m->name);
    rs_status st = rs_model_use_device(m, err); /* the decoder's calls run on the model's GPU */
    if (st) return st;
    double t0 = now_s();
    rs_rng rng;
    rs_rng_seed(&rng, cfg->seed);
    float *z = malloc(2 * (size_t)V * sizeof *z); /* logits, then the sampler's scratch; owned here */
    rs_gen *g = rs_gen_new_cfg(m, cfg->cache, cfg->window, err); /* owned here */
    if (!z || !g) {
        st = g ? rs_err_set(err, RS_ERR_NOMEM, "out of memory") : (err ? err->code : RS_ERR_NOMEM);
        goto out;
    }
    s.cached = rs_gen_cached(g);
    st = rs_gen_prefill(g, prompt, plen, z, err);
    for (int t = 0; t < cfg->n && !st; t++) {
        if (stop && stop(ud)) {
            s.stopped = true;
            break;
        }
        int32_t tok = rs_gen_sample(z, V, cfg->temp, cfg->top_k, &rng, z + V);
        s.tokens++;
        if (on_token) on_token(ud, tok);
        if (t + 1 < cfg->n) st = rs_gen_push(g, tok, z, err);
    }
    s.recomputed = rs_gen_recomputed(g);
out:
    s.seconds = now_s() - t0;
    if (stats) *stats = s;
    rs_gen_free(g);
    free(z);
    return st;
}
