/* serve/'s model adapter. An ONNX file becomes an inference-only rs_model (the engine's one
 * executor), and each instance owns an activation set (rs_acts), so instances run one model side by
 * side; a compiled plan (backend_plan.c) gives each instance a plan of its own. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engine/ckpt/checkpoint.h"
#include "engine/nn/generate.h"
#include "engine/nn/model.h"
#include "engine/nn/spec.h"
#include "onnx/import.h"
#include "backend_plan.h"
#include "ranks.h"

struct rs_serve_backend {
    char *path;          /* owned */
    rs_onnx_graph *g;    /* owned: describes the tensors */
    rs_model *m;         /* owned: the graph on the engine's executor, inference only */
    size_t out_numel;    /* output elements per sample */
    rs_serve_io in, out;
    bool gpt;            /* a token model from safetensors: g is NULL, vocab says what a token is */
    int vocab_n;
    uint8_t chars[256];  /* chars[id]: the byte of token id */
    int16_t id[256];     /* id[byte]: its token, -1 when the vocabulary lacks it */
    rs_serve_ranks *ranks; /* owned: the rank processes that run it, NULL in-process */
    rs_serve_plan *plan;   /* owned: a compiled plan (model.plan); g and m are NULL */
};

struct rs_serve_inst {
    rs_serve_backend *b; /* borrowed */
    rs_acts *acts;       /* owned: this instance's activations, so instances run side by side */
    rs_plan *plan;       /* owned: a plan backend's instance runs a plan of its own (one run at a time each) */
};

static void io_of(const rs_onnx_graph *g, int v, rs_serve_io *io)
{
    memset(io, 0, sizeof *io);
    snprintf(io->name, sizeof io->name, "%s", g->values[v].name);
    io->dtype = RS_SERVE_FP32;
    const rs_dims *s = &g->values[v].shape;
    for (int d = 1; d < s->rank && io->rank < RS_SERVE_MAX_DIMS; d++) io->dims[io->rank++] = s->d[d];
}

/* vocab.json beside the weights: {"chars": [byte, ...]} in token order. */
static rs_status load_vocab(rs_serve_backend *b, const char *weights, rs_err *err)
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

/* A token model rebuilt from the spec its checkpoint carries. */
static rs_status load_gpt(rs_serve_backend *b, const char *path, rs_err *err)
{
    b->gpt = true;
    char *spec = rs_ckpt_read_spec(path, err);
    if (!spec) return err ? err->code : RS_ERR_FORMAT;
    rs_status st = rs_model_parse(spec, "served", rs_device_cpu(), NULL, 1, &b->m, NULL, err);
    free(spec);
    if (!st) st = rs_ckpt_load_model(path, b->m, err);
    if (!st && !rs_model_tokens(b->m))
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: not a token model (a GPT); serve other models as model.onnx",
                        path);
    if (!st) st = load_vocab(b, path, err);
    if (!st && b->vocab_n != rs_model_vocab(b->m))
        st = rs_err_set(err, RS_ERR_FORMAT, "%s: vocab.json has %d characters, the model %d", path, b->vocab_n,
                        rs_model_vocab(b->m));
    if (st) return st;
    rs_model_set_training(b->m, false);
    snprintf(b->in.name, sizeof b->in.name, "text_input");
    snprintf(b->out.name, sizeof b->out.name, "text_output");
    b->in.dtype = b->out.dtype = RS_SERVE_STRING;
    b->in.rank = b->out.rank = 1;
    b->in.dims[0] = b->out.dims[0] = 1;
    b->out_numel = 1;
    return RS_OK;
}

rs_status rs_serve_backend_load(const char *path, rs_serve_backend **out, rs_err *err)
{
    *out = NULL;
    rs_serve_backend *b = calloc(1, sizeof *b); /* the caller's */
    if (!b || !(b->path = strdup(path))) {
        free(b);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    size_t pn = strlen(path);
    if (pn > 5 && !strcmp(path + pn - 5, ".plan")) {
        rs_status st = rs_serve_plan_open(path, &b->plan, err);
        if (st) {
            rs_serve_backend_free(b);
            return st;
        }
        rs_serve_plan_io(b->plan, &b->in, &b->out, &b->out_numel);
        *out = b;
        return RS_OK;
    }
    if (pn > 12 && !strcmp(path + pn - 12, ".safetensors")) {
        rs_status st = load_gpt(b, path, err);
        if (st) {
            rs_serve_backend_free(b);
            return st;
        }
        *out = b;
        return RS_OK;
    }
    rs_status st = rs_onnx_load(path, &b->g, err);
    if (st) {
        rs_serve_backend_free(b);
        return st;
    }
    if (b->g->values[b->g->input].shape.rank < 1) {
        rs_serve_backend_free(b);
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: the input has no batch dimension", path);
    }
    io_of(b->g, b->g->input, &b->in);
    io_of(b->g, b->g->output, &b->out);
    b->out_numel = rs_onnx_graph_output_numel(b->g);
    st = rs_onnx_to_inference_model(b->g, "served", &b->m, err);
    if (st) {
        rs_serve_backend_free(b);
        return st;
    }
    rs_model_set_training(b->m, false);
    *out = b;
    return RS_OK;
}

void rs_serve_backend_free(rs_serve_backend *b)
{
    if (!b) return;
    rs_serve_ranks_stop(b->ranks);
    rs_model_free(b->m);
    rs_onnx_graph_free(b->g);
    rs_serve_plan_close(b->plan);
    free(b->path);
    free(b);
}

void rs_serve_backend_io(const rs_serve_backend *b, rs_serve_io *in, rs_serve_io *out)
{
    *in = b->in;
    *out = b->out;
}

rs_status rs_serve_backend_use_ranks(rs_serve_backend *b, int ranks, const char *mode, int max_batch, int worker_index,
                                     rs_err *err)
{
    if (b->plan)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: a compiled plan runs in one process (ranks=1); to serve across "
                          "%d ranks, serve the model or the .onnx file it was compiled from", b->path, ranks);
    const rs_shape *in = rs_model_input_shape(b->m);
    int T = rs_model_tokens(b->m) ? (int)in->d[0] : 0;
    rs_serve_ranks_cfg c = {.model = b->path, .ranks = ranks, .mode = mode, .max_batch = b->gpt ? 1 : max_batch,
                            .in_bytes = (size_t)rs_shape_numel(in) * 4,
                            .out_numel = b->gpt ? (size_t)T * (size_t)b->vocab_n : b->out_numel,
                            .worker_index = worker_index};
    if (c.max_batch < 1) c.max_batch = 1;
    return rs_serve_ranks_start(&c, &b->ranks, err);
}

void rs_serve_backend_ranks_text(rs_serve_backend *b, char *buf, size_t cap)
{
    if (b->ranks) rs_serve_ranks_describe(b->ranks, buf, cap);
    else if (cap) buf[0] = 0;
}

struct rs_model *rs_serve_backend_model(rs_serve_backend *b) { return b->m; }

const char *rs_serve_backend_kind(const rs_serve_backend *b) { return b->plan ? "plan" : b->gpt ? "gpt" : "engine"; }
int rs_serve_backend_max_batch(const rs_serve_backend *b) { return b->plan ? rs_serve_plan_batch(b->plan) : 0; }
bool rs_serve_backend_generates(const rs_serve_backend *b) { return b->gpt; }

rs_status rs_serve_inst_new(rs_serve_backend *b, int max_batch, rs_serve_inst **out, rs_err *err)
{
    *out = NULL;
    rs_serve_inst *in = calloc(1, sizeof *in); /* the caller's */
    if (!in) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    in->b = b;
    rs_status st = RS_OK;
    if (b->plan) {
        st = rs_serve_plan_instance(b->plan, &in->plan, err);
        if (st) {
            rs_serve_inst_free(in);
            return st;
        }
        *out = in;
        return RS_OK;
    }
    if (b->gpt || b->ranks) { /* the ranks hold the activations */ /* rs_generate makes a decoder per request */
        *out = in;
        return RS_OK;
    }
    in->acts = rs_acts_new(b->m, max_batch > 0 ? max_batch : 1, err);
    if (!in->acts) st = err && err->code ? err->code : RS_ERR_NOMEM;
    if (st) {
        rs_serve_inst_free(in);
        return st;
    }
    *out = in;
    return RS_OK;
}

void rs_serve_inst_free(rs_serve_inst *in)
{
    if (!in) return;
    rs_acts_free(in->acts);
    rs_plan_free(in->plan);
    free(in);
}

rs_status rs_serve_inst_run(rs_serve_inst *in, const float *x, int B, float *y, rs_err *err)
{
    if (in->b->ranks) return rs_serve_ranks_run(in->b->ranks, x, B, y, err);
    const float *o;
    if (in->plan) {
        rs_status st = rs_plan_run(in->plan, x, B, &o, err);
        if (st) return st;
        memcpy(y, o, (size_t)B * in->b->out_numel * sizeof *y);
        return RS_OK;
    }
    rs_status st = rs_model_forward_acts(in->b->m, in->acts, x, B, &o, err);
    if (st) return st;
    memcpy(y, o, (size_t)B * in->b->out_numel * sizeof *y);
    return RS_OK;
}

void rs_serve_gen_init(rs_serve_gen *g)
{
    rs_gen_cfg d = rs_gen_defaults();
    memset(g, 0, sizeof *g);
    g->max_tokens = d.n;
    g->temperature = d.temp;
    g->top_k = d.top_k;
    g->seed = d.seed;
}

typedef struct gen_cb {
    const rs_serve_backend *b;
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

/* rs_generate without the KV cache (what its cache=false path does: a full forward of the last ctx
 * tokens per token, then the engine's sampler with the same seed), each forward across the ranks. */
static rs_status generate_ranks(const rs_serve_backend *b, const int32_t *prompt, int plen, const rs_gen_cfg *cfg,
                                gen_cb *c, rs_err *err)
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
        st = rs_serve_ranks_run(b->ranks, x, 1, y, err);
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

rs_status rs_serve_inst_generate(rs_serve_inst *in, rs_serve_gen *g, rs_err *err)
{
    const rs_serve_backend *b = in->b;
    if (!b->gpt) return rs_err_set(err, RS_ERR_UNSUPPORTED, "this model does not generate text");
    if (g->max_tokens < 0 || g->max_tokens > 100000 || !(g->temperature >= 0.0f) || g->top_k < 0)
        return rs_err_set(err, RS_ERR_ARG, "max_tokens must be 0..100000, temperature >= 0 and top_k >= 0");
    size_t plen = g->plen;
    char nl = b->id['\n'] >= 0 ? '\n' : (char)b->chars[0]; /* an empty prompt starts as `generate` does */
    const char *p = plen ? g->prompt : &nl;
    if (!plen) plen = 1;
    if (plen > 1 << 20) return rs_err_set(err, RS_ERR_ARG, "text_input of %zu bytes (1 MB at most)", plen);
    int32_t *ids = malloc(plen * sizeof *ids); /* owned here */
    if (!ids) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < plen; i++) {
        int id = b->id[(uint8_t)p[i]];
        if (id < 0) {
            free(ids);
            return rs_err_set(err, RS_ERR_ARG, "text_input: byte 0x%02x at offset %zu is not in the model's "
                              "vocabulary of %d characters", (uint8_t)p[i], i, b->vocab_n);
        }
        ids[i] = id;
    }
    rs_gen_cfg cfg = rs_gen_defaults();
    cfg.n = g->max_tokens;
    cfg.temp = g->temperature;
    cfg.top_k = g->top_k;
    cfg.seed = g->seed;
    gen_cb c = {b, g};
    if (b->ranks) {
        rs_status st = generate_ranks(b, ids, (int)plen, &cfg, &c, err);
        free(ids);
        return st;
    }
    rs_status st = rs_generate(b->m, ids, (int)plen, &cfg, on_token, should_stop, &c, NULL, err);
    free(ids);
    return st;
}
