/* Token-by-token decoding with a KV cache, and sampling (see generate.h). The decoder runs the
 * model's graph one position at a time through each layer's one-position form (its descriptor's
 * `gen`): a row-wise layer runs its own forward on a one-row view of itself; a layer with a step
 * (the embedding, attention) runs that, with the cache it asked for. */
#include "generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/core/kernels.h"
#include "model_internal.h"

struct rs_gen {
    rs_model *m;                 /* borrowed */
    const rs_kernels *k;
    rs_kctx ctx;                 /* the decoder's own: threads copied from the model's when made */
    int T;                       /* the model's context */
    rs_layer *row;               /* (nlayers) each layer as a one-position view (shapes of one row), owned */
    float **act;                 /* (nlayers) one row of each node's output, owned (device memory) */
    float **cache;               /* (nlayers) a stepping layer's cache, owned (device memory); else NULL */
    void **saved;                /* (nlayers) what a row-wise forward saves for one row (a layer norm's
                                    mean and rstd), owned (device memory); else NULL */
    size_t *bytes, *cache_bytes, *saved_bytes; /* (nlayers) sizes of the three */
    int32_t *tok;                /* (1) the token id in device memory, owned */
    int32_t *hist;               /* (T) tokens in the cache, for a context shift */
    int len;
};

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
    free(g->row);
    free(g->act);
    free(g->cache);
    free(g->saved);
    free(g->bytes);
    free(g->cache_bytes);
    free(g->saved_bytes);
    free(g->hist);
    free(g);
}

/* The refusal when a layer has no one-position form (NULL when every layer has one). */
static const rs_layer *stepless(const rs_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        rs_layer_gen gen = m->layers[i].ops->gen;
        if (gen != RS_LAYER_GEN_ROW && gen != RS_LAYER_GEN_STEP) return &m->layers[i];
    }
    return NULL;
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

rs_gen *rs_gen_new(rs_model *m, rs_err *err)
{
    if (!m->built || !m->tokens) {
        rs_err_set(err, RS_ERR_ARG, "model %s is not a token model; generate needs a language model such as "
                   "`model g = gpt ...`", m->name);
        return NULL;
    }
    const rs_layer *no = stepless(m);
    if (no) {
        rs_err_set(err, RS_ERR_UNSUPPORTED, "generate: layer %s (%s) has no one-position form", no->name,
                   no->ops->kind);
        return NULL;
    }
    rs_gen *g = calloc(1, sizeof *g);
    if (!g) goto nomem;
    g->m = m;
    g->k = m->k;
    g->ctx = m->ctx;
    rs_kctx_check(&g->ctx, NULL); /* the model's pending failure is the model's */
    g->T = (int)m->in.d[0];
    size_t n = (size_t)m->nlayers;
    g->row = calloc(n, sizeof *g->row);
    g->act = calloc(n, sizeof *g->act);
    g->cache = calloc(n, sizeof *g->cache);
    g->saved = calloc(n, sizeof *g->saved);
    g->bytes = calloc(n, sizeof *g->bytes);
    g->cache_bytes = calloc(n, sizeof *g->cache_bytes);
    g->saved_bytes = calloc(n, sizeof *g->saved_bytes);
    g->hist = calloc((size_t)g->T, sizeof *g->hist);
    if (!g->row || !g->act || !g->cache || !g->saved || !g->bytes || !g->cache_bytes || !g->saved_bytes ||
        !g->hist || !(g->tok = dev_alloc(g, sizeof *g->tok)))
        goto nomem;
    for (int i = 0; i < m->nlayers; i++)
        if (!layer_alloc(g, i)) goto nomem;
    return g;
nomem:
    rs_gen_free(g);
    rs_err_set(err, RS_ERR_NOMEM, "generate: out of memory for the cache of model %s", m->name);
    return NULL;
}

void rs_gen_reset(rs_gen *g) { g->len = 0; }
int rs_gen_len(const rs_gen *g) { return g->len; }

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

rs_status rs_gen_push(rs_gen *g, int32_t tok, float *logits, rs_err *err)
{
    int V = rs_model_vocab(g->m);
    if (tok < 0 || tok >= V)
        return rs_err_set(err, RS_ERR_ARG, "generate: token %d is outside the vocabulary of %d", (int)tok, V);
    if (g->len == g->T) {
        /* Context shift: keep the newest half and run it again at positions 0.. */
        int keep = g->T / 2;
        memmove(g->hist, g->hist + g->T - keep, (size_t)keep * sizeof *g->hist);
        for (int p = 0; p < keep; p++)
            if (step(g, g->hist[p], p)) return rs_kctx_check(&g->ctx, err);
        g->len = keep;
    }
    g->hist[g->len] = tok;
    if (step(g, tok, g->len) ||
        (logits && g->k->copy_d2h(&g->ctx, logits, g->act[g->m->nlayers - 1], (size_t)V * sizeof *logits)))
        return rs_kctx_check(&g->ctx, err);
    g->len++;
    return RS_OK;
}

rs_status rs_gen_full_logits(rs_model *m, rs_acts *a, const int32_t *tokens, int len, float *logits, rs_err *err)
{
    int T = (int)m->in.d[0], V = rs_model_vocab(m);
    if (len < 1) return rs_err_set(err, RS_ERR_ARG, "generate: an empty context");
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

rs_gen_cfg rs_gen_defaults(void) { return (rs_gen_cfg){.n = 200, .temp = 0.8f, .top_k = 40, .seed = 1, .cache = true}; }

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
    if (plen < 1) return rs_err_set(err, RS_ERR_ARG, "generate: the prompt is empty");
    if (cfg->n < 0) return rs_err_set(err, RS_ERR_ARG, "generate: n=%d; expected a count >= 0", cfg->n);
    int V = rs_model_vocab(m);
    if (!V) return rs_err_set(err, RS_ERR_ARG, "model %s is not a token model; generate needs a language model", m->name);
    rs_status ust = rs_model_use_device(m, err); /* the decoder's calls run on the model's GPU */
    if (ust) return ust;
    double t0 = now_s();
    rs_rng rng;
    rs_rng_seed(&rng, cfg->seed);
    float *z = malloc(2 * (size_t)V * sizeof *z); /* logits, then the sampler's scratch */
    int32_t *seq = malloc(((size_t)plen + (size_t)cfg->n) * sizeof *seq); /* the whole text, for the no-cache path */
    /* One of the two is this call's own: a decoder, or an activation set for recomputing. */
    rs_gen *g = cfg->cache ? rs_gen_new(m, err) : NULL;
    rs_acts *a = cfg->cache ? NULL : rs_acts_new(m, 1, err);
    rs_status st = RS_OK;
    if (!z || !seq || (cfg->cache ? !g : !a)) {
        st = (cfg->cache ? !g : !a) ? (err ? err->code : RS_ERR_NOMEM) : rs_err_set(err, RS_ERR_NOMEM, "out of memory");
        goto out;
    }
    memcpy(seq, prompt, (size_t)plen * sizeof *seq);
    int len = plen;
    if (g)
        for (int i = 0; i < plen && !st; i++) st = rs_gen_push(g, prompt[i], z, err);
    for (int t = 0; t < cfg->n && !st; t++) {
        if (stop && stop(ud)) {
            s.stopped = true;
            break;
        }
        if (!g) st = rs_gen_full_logits(m, a, seq, len, z, err);
        if (st) break;
        int32_t tok = rs_gen_sample(z, V, cfg->temp, cfg->top_k, &rng, z + V);
        seq[len++] = tok;
        s.tokens++;
        if (on_token) on_token(ud, tok);
        if (g && t + 1 < cfg->n) st = rs_gen_push(g, tok, z, err);
    }
out:
    s.seconds = now_s() - t0;
    if (stats) *stats = s;
    rs_gen_free(g);
    rs_acts_free(a);
    free(seq);
    free(z);
    return st;
}
