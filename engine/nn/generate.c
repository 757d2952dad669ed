/* Token-by-token decoding with a KV cache, and sampling (see generate.h). The decoder runs the
 * model's graph one position at a time: every layer of a GPT but attention works row by row, so it
 * runs on the new row alone; attention appends the row's key and value to its cache and attends over
 * the cached positions (the kernel table's attn_step). */
#include "generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_internal.h"

struct rs_gen {
    rs_model *m;                 /* borrowed */
    const rs_kernels *k;
    int T;                       /* the model's context */
    float **act;                 /* (nlayers) one row of each node's output, owned */
    float **kc, **vc;            /* (nlayers) attention layers' caches (T, C), owned; NULL elsewhere */
    int32_t *hist;               /* (T) tokens in the cache, for a context shift */
    int len;
};

static int row_width(const rs_layer *l) { return (int)l->out.d[l->out.ndim - 1]; }

void rs_gen_free(rs_gen *g)
{
    if (!g) return;
    for (int i = 0; i < g->m->nlayers; i++) {
        if (g->act) free(g->act[i]);
        if (g->kc) free(g->kc[i]);
        if (g->vc) free(g->vc[i]);
    }
    free(g->act);
    free(g->kc);
    free(g->vc);
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
    g->T = (int)m->in.d[0];
    g->act = calloc((size_t)m->nlayers, sizeof *g->act);
    g->kc = calloc((size_t)m->nlayers, sizeof *g->kc);
    g->vc = calloc((size_t)m->nlayers, sizeof *g->vc);
    g->hist = calloc((size_t)g->T, sizeof *g->hist);
    if (!g->act || !g->kc || !g->vc || !g->hist) goto nomem;
    for (int i = 0; i < m->nlayers; i++) {
        const rs_layer *l = &m->layers[i];
        g->act[i] = calloc((size_t)row_width(l), sizeof(float));
        if (!g->act[i]) goto nomem;
        if (l->cfg.kind == RS_LAYER_ATTN) {
            g->kc[i] = calloc((size_t)g->T * (size_t)row_width(l), sizeof(float));
            g->vc[i] = calloc((size_t)g->T * (size_t)row_width(l), sizeof(float));
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
static void step(rs_gen *g, int32_t tok, int pos)
{
    const rs_model *m = g->m;
    const rs_kernels *k = g->k;
    const float *P = m->params;
    for (int i = 0; i < m->nlayers; i++) {
        const rs_layer *l = &m->layers[i];
        float *out = g->act[i];
        const float *in = l->src[0] >= 0 ? g->act[l->src[0]] : NULL;
        int W = row_width(l);
        switch (l->cfg.kind) {
        case RS_LAYER_EMBED:
            k->embed_fwd(&tok, P + l->p[0].offset, P + l->p[1].offset + (size_t)pos * (size_t)W, out, 1, 1, W);
            break;
        case RS_LAYER_LINEAR: {
            int I = (int)l->p[0].shape.d[1];
            k->gemm(false, true, 1, W, I, 1.0f, in, I, P + l->p[0].offset, I, 0.0f, out, W);
            if (l->np > 1) k->bias_rows(out, P + l->p[1].offset, 1, W);
            break;
        }
        case RS_LAYER_LAYERNORM: {
            float mean, rstd;
            k->layernorm_fwd(in, P + l->p[0].offset, P + l->p[1].offset, out, &mean, &rstd, 1, W, l->cfg.eps);
            break;
        }
        case RS_LAYER_GELU:
            if (l->cfg.approx_tanh) k->gelu_tanh_fwd(in, out, (size_t)W);
            else k->gelu_fwd(in, out, (size_t)W);
            break;
        case RS_LAYER_RELU: k->relu_fwd(in, out, (size_t)W); break;
        case RS_LAYER_TANH: k->tanh_fwd(in, out, (size_t)W); break;
        case RS_LAYER_DROPOUT: k->copy(out, in, (size_t)W); break; /* eval mode */
        case RS_LAYER_ADD: k->add(in, g->act[l->src[1]], out, (size_t)W); break;
        case RS_LAYER_ATTN: /* in = [q | k | v] of this position */
            k->copy(g->kc[i] + (size_t)pos * (size_t)W, in + W, (size_t)W);
            k->copy(g->vc[i] + (size_t)pos * (size_t)W, in + 2 * W, (size_t)W);
            k->attn_step(in, g->kc[i], g->vc[i], out, 1, pos + 1, g->T, W, l->cfg.heads);
            break;
        default: break; /* refused by rs_gen_new */
        }
    }
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
        for (int p = 0; p < keep; p++) step(g, g->hist[p], p);
        g->len = keep;
    }
    g->hist[g->len] = tok;
    step(g, tok, g->len);
    g->len++;
    if (logits) memcpy(logits, g->act[g->m->nlayers - 1], (size_t)V * sizeof *logits);
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
