/* Token-by-token decoding with a KV cache, and sampling (see generate.h). The decoder runs the
 * model's graph one position at a time: every layer of a GPT but attention works row by row, so it
 * runs on the new row alone; attention appends the row's key and value to its cache and attends over
 * the cached positions (the kernel table's attn_step). */
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
    float **act;                 /* (nlayers) one row of each node's output, owned (device memory) */
    float **kc, **vc;            /* (nlayers) attention layers' caches (T, C), owned (device memory); NULL
                                    elsewhere */
    size_t *bytes;               /* (nlayers) size of act[i]; of kc[i] and vc[i]: T times it */
    float *scr;                  /* (4) device memory for the token id (int32) and a layer norm's mean and
                                    rstd of the one row */
    int32_t *hist;               /* (T) tokens in the cache, for a context shift */
    int len;
};

static int row_width(const rs_layer *l) { return (int)l->out.d[l->out.ndim - 1]; }

/* Device memory for the decoder, counted with the model's activations. */
static float *dev_alloc(rs_gen *g, size_t bytes)
{
    void *p = NULL;
    if (g->k->mem_alloc(&g->ctx, rs_model_mem(g->m), RS_POOL_ACTS, bytes, &p)) rs_kctx_check(&g->ctx, NULL);
    return p;
}

static void dev_free(rs_gen *g, float *p, size_t bytes)
{
    if (p) g->k->mem_free(&g->ctx, rs_model_mem(g->m), RS_POOL_ACTS, p, bytes);
}

void rs_gen_free(rs_gen *g)
{
    if (!g) return;
    for (int i = 0; g->bytes && i < g->m->nlayers; i++) {
        if (g->act) dev_free(g, g->act[i], g->bytes[i]);
        if (g->kc) dev_free(g, g->kc[i], (size_t)g->T * g->bytes[i]);
        if (g->vc) dev_free(g, g->vc[i], (size_t)g->T * g->bytes[i]);
    }
    dev_free(g, g->scr, 4 * sizeof(float));
    free(g->act);
    free(g->kc);
    free(g->vc);
    free(g->bytes);
    free(g->hist);
    free(g);
}

rs_gen *rs_gen_new(rs_model *m, rs_err *err)
{
    if (!m->built || !m->tokens) {
        rs_err_set(err, RS_ERR_ARG, "model %s is not a token model; generate needs a language model such as "
                   "`model g = gpt ...`", m->name);
        return NULL;
    }
    for (int i = 0; i < m->nlayers; i++) {
        rs_layer_kind k = m->layers[i].cfg.kind;
        if (k != RS_LAYER_EMBED && k != RS_LAYER_LINEAR && k != RS_LAYER_LAYERNORM && k != RS_LAYER_GELU &&
            k != RS_LAYER_RELU && k != RS_LAYER_TANH && k != RS_LAYER_DROPOUT && k != RS_LAYER_ADD &&
            k != RS_LAYER_ATTN) {
            rs_err_set(err, RS_ERR_UNSUPPORTED, "generate: layer %s (%s) has no one-position form", m->layers[i].name,
                       m->layers[i].ops->kind);
            return NULL;
        }
    }
    rs_gen *g = calloc(1, sizeof *g);
    if (!g) goto nomem;
    g->m = m;
    g->k = m->k;
    g->ctx = m->ctx;
    rs_kctx_check(&g->ctx, NULL); /* the model's pending failure is the model's */
    g->T = (int)m->in.d[0];
    g->act = calloc((size_t)m->nlayers, sizeof *g->act);
    g->kc = calloc((size_t)m->nlayers, sizeof *g->kc);
    g->vc = calloc((size_t)m->nlayers, sizeof *g->vc);
    g->bytes = calloc((size_t)m->nlayers, sizeof *g->bytes);
    g->hist = calloc((size_t)g->T, sizeof *g->hist);
    if (!g->act || !g->kc || !g->vc || !g->bytes || !g->hist || !(g->scr = dev_alloc(g, 4 * sizeof(float))))
        goto nomem;
    for (int i = 0; i < m->nlayers; i++) {
        const rs_layer *l = &m->layers[i];
        g->bytes[i] = (size_t)row_width(l) * sizeof(float);
        g->act[i] = dev_alloc(g, g->bytes[i]);
        if (!g->act[i]) goto nomem;
        if (l->cfg.kind == RS_LAYER_ATTN) {
            g->kc[i] = dev_alloc(g, (size_t)g->T * g->bytes[i]);
            g->vc[i] = dev_alloc(g, (size_t)g->T * g->bytes[i]);
            if (!g->kc[i] || !g->vc[i]) goto nomem;
        }
    }
    return g;
nomem:
    rs_gen_free(g);
    rs_err_set(err, RS_ERR_NOMEM, "generate: out of memory for the cache of model %s", m->name);
    return NULL;
}

void rs_gen_reset(rs_gen *g) { g->len = 0; }
int rs_gen_len(const rs_gen *g) { return g->len; }

/* Runs every node on position pos for token tok; the last node's row is the logits. */
static rs_status step(rs_gen *g, int32_t tok, int pos)
{
    const rs_model *m = g->m;
    const rs_kernels *k = g->k;
    rs_kctx *c = &g->ctx;
    const float *P = m->params;
    int32_t *dtok = (int32_t *)(void *)g->scr; /* the embedding reads the id from device memory */
    RS_KTRY(k->copy_h2d(c, dtok, &tok, sizeof tok));
    for (int i = 0; i < m->nlayers; i++) {
        const rs_layer *l = &m->layers[i];
        float *out = g->act[i];
        const float *in = l->src[0] >= 0 ? g->act[l->src[0]] : NULL;
        int W = row_width(l);
        switch (l->cfg.kind) {
        case RS_LAYER_EMBED:
            RS_KTRY(k->embed_fwd(c, dtok, P + l->p[0].offset, P + l->p[1].offset + (size_t)pos * (size_t)W, out, 1,
                                 1, W));
            break;
        case RS_LAYER_LINEAR: {
            int I = (int)l->p[0].shape.d[1];
            RS_KTRY(k->gemm(c, false, true, 1, W, I, 1.0f, in, I, P + l->p[0].offset, I, 0.0f, out, W));
            if (l->np > 1) RS_KTRY(k->bias_rows(c, out, P + l->p[1].offset, 1, W));
            break;
        }
        case RS_LAYER_LAYERNORM:
            RS_KTRY(k->layernorm_fwd(c, in, P + l->p[0].offset, P + l->p[1].offset, out, g->scr + 1, g->scr + 2, 1,
                                     W, l->cfg.eps));
            break;
        case RS_LAYER_GELU:
            if (l->cfg.approx_tanh) RS_KTRY(k->gelu_tanh_fwd(c, in, out, (size_t)W));
            else RS_KTRY(k->gelu_fwd(c, in, out, (size_t)W));
            break;
        case RS_LAYER_RELU: RS_KTRY(k->relu_fwd(c, in, out, (size_t)W)); break;
        case RS_LAYER_TANH: RS_KTRY(k->tanh_fwd(c, in, out, (size_t)W)); break;
        case RS_LAYER_DROPOUT: RS_KTRY(k->copy_d2d(c, out, in, g->bytes[i])); break; /* eval mode */
        case RS_LAYER_ADD: RS_KTRY(k->add(c, in, g->act[l->src[1]], out, (size_t)W)); break;
        case RS_LAYER_ATTN: /* in = [q | k | v] of this position */
            RS_KTRY(k->copy_d2d(c, g->kc[i] + (size_t)pos * (size_t)W, in + W, g->bytes[i]));
            RS_KTRY(k->copy_d2d(c, g->vc[i] + (size_t)pos * (size_t)W, in + 2 * W, g->bytes[i]));
            RS_KTRY(k->attn_step(c, in, g->kc[i], g->vc[i], out, 1, pos + 1, g->T, W, l->cfg.heads));
            break;
        default: break; /* refused by rs_gen_new */
        }
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
