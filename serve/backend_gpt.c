/* The GPT backend: a token model from a model.safetensors (rebuilt from the spec its checkpoint
 * carries) with a vocab.json beside it ({"chars": [byte of token 0, ...]}): text in, text out,
 * served decoupled, a response per generated token. In process it generates with the engine's
 * rs_generate (KV cache); across ranks (generate_with) with a full forward per token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "backend_ops.h"
#include "engine/ckpt/checkpoint.h"
#include "engine/nn/generate.h"
#include "engine/nn/model.h"
#include "engine/nn/spec.h"

typedef struct gpt {
    rs_model *m;         /* owned: the token model, inference only */
    int vocab_n;
    uint8_t chars[256];  /* chars[id]: the byte of token id */
    int16_t id[256];     /* id[byte]: its token, -1 when the vocabulary lacks it */
} gpt;

/* vocab.json beside the weights: {"chars": [byte, ...]} in token order. */
static rs_status load_vocab(gpt *b, const char *weights, rs_err *err)
{
    char p[4200];
    const char *slash = strrchr(weights, '/');
    snprintf(p, sizeof p, "%.*svocab.json", slash ? (int)(slash - weights + 1) : 0, weights);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    const json_t *a = json_object_get(j, "chars");
    if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > 256) {
        json_decref(j);
        return rs_err_set(err, RS_ERR_FORMAT, "%s: %s (a GPT's vocabulary: {\"chars\": [byte of token 0, ...]})", p,
                          j ? "no \"chars\" array of 1..256 bytes" : je.text);
    }
    memset(b->id, 0xff, sizeof b->id);
    b->vocab_n = (int)json_array_size(a);
    for (int i = 0; i < b->vocab_n; i++) {
        const json_t *c = json_array_get(a, (size_t)i);
        json_int_t v = json_integer_value(c);
        if (!json_is_integer(c) || v < 0 || v > 255 || b->id[v] >= 0) {
            json_decref(j);
            return rs_err_set(err, RS_ERR_FORMAT, "%s: chars[%d] is not a byte 0..255 seen once", p, i);
        }
        b->chars[i] = (uint8_t)v;
        b->id[v] = (int16_t)i;
    }
    json_decref(j);
    return RS_OK;
}

static void gpt_free(void *impl)
{
    gpt *b = impl;
    if (!b) return;
    rs_model_free(b->m);
    free(b);
}

static rs_status gpt_load(const char *path, void **impl, rs_err *err)
{
    gpt *b = calloc(1, sizeof *b); /* the caller's: gpt_free */
    if (!b) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    rs_status st = RS_OK;
    char *spec = rs_ckpt_read_spec(path, err);
    if (!spec) st = err ? err->code : RS_ERR_FORMAT;
    if (!st) st = rs_model_parse(spec, "served", rs_device_cpu(), NULL, 1, &b->m, NULL, err);
    free(spec);
    if (!st) st = rs_ckpt_load_model(path, b->m, err);
    if (!st && !rs_model_tokens(b->m))
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: not a token model (a GPT); serve other models as model.onnx",
                        path);
    if (!st) st = load_vocab(b, path, err);
    if (!st && b->vocab_n != rs_model_vocab(b->m))
        st = rs_err_set(err, RS_ERR_FORMAT, "%s: vocab.json has %d characters, the model %d", path, b->vocab_n,
                        rs_model_vocab(b->m));
    if (st) {
        gpt_free(b);
        return st;
    }
    rs_model_set_training(b->m, false);
    *impl = b;
    return RS_OK;
}

static void text_io(rs_serve_io *io, const char *name)
{
    memset(io, 0, sizeof *io);
    snprintf(io->name, sizeof io->name, "%s", name);
    io->dtype = RS_SERVE_STRING;
    io->rank = 1;
    io->dims[0] = 1;
}

static void gpt_io(const void *impl, rs_serve_ios *io)
{
    (void)impl;
    io->nin = io->nout = 1;
    text_io(&io->in[0], "text_input");
    text_io(&io->out[0], "text_output");
}

/* text_input -> text_output (TYPE_STRING, [1]), decoupled, one request per execution. */
static rs_status gpt_complete(const void *impl, rs_serve_config *c, const char *where, rs_err *err)
{
    (void)impl;
    if (!c->decoupled)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: a GPT answers with a response per token: its config needs "
                          "model_transaction_policy { decoupled: true }", where);
    static const char *const names[2] = {"text_input", "text_output"};
    rs_serve_io *ios[2] = {c->inputs, c->outputs};
    int *ns[2] = {&c->ninputs, &c->noutputs};
    for (int k = 0; k < 2; k++) {
        if (*ns[k] == 0) {
            *ns[k] = 1;
            text_io(ios[k], names[k]);
        }
        if (*ns[k] != 1 || strcmp(ios[k]->name, names[k]) || ios[k]->dtype != RS_SERVE_STRING)
            return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: a GPT has one input text_input and one output text_output, "
                              "both TYPE_STRING with dims [ 1 ]", where);
        ios[k]->rank = 1;
        ios[k]->dims[0] = 1;
    }
    c->max_batch_size = 0; /* a generation runs alone on its instance */
    c->dynamic_batching = false;
    if (!c->platform[0] && !c->backend[0]) snprintf(c->backend, sizeof c->backend, "ringside_gpt");
    return RS_OK;
}

/* rs_generate makes a decoder per request: an instance holds nothing. */
static rs_status gpt_new_instance(void *impl, int max_batch, void **inst, rs_err *err)
{
    (void)impl, (void)max_batch, (void)inst, (void)err;
    return RS_OK;
}

typedef struct gen_cb {
    const gpt *b;
    rs_serve_gen *g;
} gen_cb;

static void on_token(void *ud, int32_t tok)
{
    gen_cb *c = ud;
    char ch = tok >= 0 && tok < c->b->vocab_n ? (char)c->b->chars[tok] : '?';
    c->g->tokens++;
    if (c->g->on_text) c->g->on_text(c->g->ud, &ch, 1);
}

static bool should_stop(void *ud)
{
    gen_cb *c = ud;
    return c->g->stop && c->g->stop(c->g->ud);
}

/* The prompt's token ids (*ids: the caller's) and the engine's sampling settings of g. A prompt
 * character outside the vocabulary is RS_ERR_ARG. */
static rs_status prepare(const gpt *b, const rs_serve_gen *g, int32_t **ids, int *plen, rs_gen_cfg *cfg, rs_err *err)
{
    size_t n = g->plen;
    char nl = b->id['\n'] >= 0 ? '\n' : (char)b->chars[0]; /* an empty prompt starts as `generate` does */
    const char *p = n ? g->prompt : &nl;
    if (!n) n = 1;
    if (n > 1 << 20) return rs_err_set(err, RS_ERR_ARG, "text_input of %zu bytes (1 MB at most)", n);
    *ids = malloc(n * sizeof **ids); /* the caller's */
    if (!*ids) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int id = b->id[(uint8_t)p[i]];
        if (id < 0) {
            free(*ids);
            *ids = NULL;
            return rs_err_set(err, RS_ERR_ARG, "text_input: byte 0x%02x at offset %zu is not in the model's "
                              "vocabulary of %d bytes", (uint8_t)p[i], i, b->vocab_n);
        }
        (*ids)[i] = id;
    }
    *plen = (int)n;
    *cfg = rs_gen_defaults();
    cfg->n = g->max_tokens;
    cfg->temp = g->temperature;
    cfg->top_k = g->top_k;
    cfg->seed = g->seed;
    return RS_OK;
}

static rs_status gpt_generate(void *impl, void *inst, rs_serve_gen *g, rs_err *err)
{
    (void)inst;
    gpt *b = impl;
    int32_t *ids = NULL;
    int plen = 0;
    rs_gen_cfg cfg = rs_gen_defaults();
    rs_status st = prepare(b, g, &ids, &plen, &cfg, err);
    if (st) return st;
    gen_cb c = {b, g};
    st = rs_generate(b->m, ids, plen, &cfg, on_token, should_stop, &c, NULL, err);
    free(ids);
    return st;
}

/* rs_generate without the KV cache (what its cache=false path does: a full forward of the last ctx
 * tokens per token, then the engine's sampler with the same seed), each forward done by fwd. */
static rs_status generate_windowed(const gpt *b, const int32_t *prompt, int plen, const rs_gen_cfg *cfg,
                                   rs_srv_forward_fn fwd, void *ud, gen_cb *c, rs_err *err)
{
    int T = (int)rs_model_input_shape(b->m)->d[0], V = b->vocab_n;
    rs_rng rng;
    rs_rng_seed(&rng, cfg->seed);
    int32_t *seq = malloc(((size_t)plen + (size_t)cfg->n) * sizeof *seq); /* owned here: the whole text */
    int32_t *x = malloc((size_t)T * sizeof *x);                         /* owned: the window */
    float *y = malloc(((size_t)T * (size_t)V + 2 * (size_t)V) * sizeof *y); /* owned: logits, z, scratch */
    rs_status st = RS_OK;
    if (!seq || !x || !y) st = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    if (!st) memcpy(seq, prompt, (size_t)plen * sizeof *seq);
    int len = plen;
    for (int t = 0; !st && t < cfg->n; t++) {
        if (should_stop(c)) break;
        int n = len > T ? T : len;
        memset(x, 0, (size_t)T * sizeof *x); /* causal: what follows position n-1 cannot change it */
        memcpy(x, seq + len - n, (size_t)n * sizeof *x);
        st = fwd(ud, x, y, err);
        if (st) break;
        float *z = y + (size_t)T * (size_t)V;
        memcpy(z, y + (size_t)(n - 1) * (size_t)V, (size_t)V * sizeof *z);
        int32_t tok = rs_gen_sample(z, V, cfg->temp, cfg->top_k, &rng, z + V);
        seq[len++] = tok;
        on_token(c, tok);
    }
    free(seq);
    free(x);
    free(y);
    return st;
}

static rs_status gpt_generate_with(void *impl, rs_serve_gen *g, rs_srv_forward_fn fwd, void *ud, rs_err *err)
{
    gpt *b = impl;
    int32_t *ids = NULL;
    int plen = 0;
    rs_gen_cfg cfg = rs_gen_defaults();
    rs_status st = prepare(b, g, &ids, &plen, &cfg, err);
    if (st) return st;
    gen_cb c = {b, g};
    st = generate_windowed(b, ids, plen, &cfg, fwd, ud, &c, err);
    free(ids);
    return st;
}

/* One request at a time; each rank's forward takes the T-token window and gives (T, vocab) logits. */
static rs_status gpt_ranks_cfg(const void *impl, const char *path, int max_batch, rs_serve_ranks_cfg *c, rs_err *err)
{
    (void)path, (void)max_batch, (void)err;
    const gpt *b = impl;
    const rs_shape *in = rs_model_input_shape(b->m);
    c->max_batch = 1;
    c->in_bytes = (size_t)rs_shape_numel(in) * 4;
    c->out_numel = (size_t)in->d[0] * (size_t)b->vocab_n;
    return RS_OK;
}

static struct rs_model *gpt_model(void *impl) { return ((gpt *)impl)->m; }

const rs_srv_backend_ops rs_srv_backend_gpt = {
    .name = "gpt",
    .file = "model.safetensors",
    .what = "a GPT",
    .load = gpt_load,
    .free = gpt_free,
    .io = gpt_io,
    .complete = gpt_complete,
    .new_instance = gpt_new_instance,
    .generate = gpt_generate,
    .generate_with = gpt_generate_with,
    .ranks_cfg = gpt_ranks_cfg,
    .model = gpt_model,
};
