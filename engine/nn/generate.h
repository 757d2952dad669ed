/* Sampling text from a token model (a GPT), one token at a time, as nanoGPT's generate does: the
 * logits for the next token are those of the last ctx tokens (the window), cropped when the text is
 * longer than the model's context.
 * With the KV cache, each new token runs every layer on one position only: attention reads the keys
 * and values of the earlier positions from the cache instead of recomputing them. That holds while
 * the text fits the context. Past it the window slides by one token per token, every position's
 * embedding changes, and nothing cached still holds: the decoder then recomputes the window in one
 * batched forward per token, so the text stays nanoGPT's (and cache=off's) at any length. The
 * explicit RS_GEN_WINDOW_SHIFT trades that for speed: when the context is full it keeps the newest
 * half in the cache (one batched forward) and steps on from there; its text differs past the context.
 * A model with a layer that has no one-position form (an imported ONNX graph's operator) is
 * recomputed per token, with the same text.
 * A decoder holds its own activations, caches and kernel context (threads copied from the model's
 * when it is made); it only reads the model's parameters, so several threads can generate from one
 * model at once (nothing may train it meanwhile). */
#ifndef RS_GENERATE_H
#define RS_GENERATE_H

#include "model.h"

typedef struct rs_gen rs_gen;

/* What the window does once the text is longer than the context. */
typedef enum rs_gen_window {
    RS_GEN_WINDOW_CROP = 0, /* the last ctx tokens, recomputed per token: nanoGPT's text (default) */
    RS_GEN_WINDOW_SHIFT,    /* keep the newest ctx/2 in the cache and step on: faster, other text */
} rs_gen_window;
extern const char *const rs_gen_window_words[]; /* "crop", "shift", NULL: in the enum's order */

/* A decoder for m (borrowed; must outlive it) that uses the KV cache when cache is set and every
 * layer of m has a one-position form, and recomputes the window otherwise. Fails with a message for a
 * model that is not a token model. Caller owns the result. */
rs_gen *rs_gen_new_cfg(rs_model *m, bool cache, rs_gen_window window, rs_err *err);
/* rs_gen_new_cfg(m, true, RS_GEN_WINDOW_CROP, err). */
rs_gen *rs_gen_new(rs_model *m, rs_err *err);
void rs_gen_free(rs_gen *g);
/* Whether g steps through its KV cache (false: it recomputes the window per token). */
bool rs_gen_cached(const rs_gen *g);
/* Why model m cannot use the cache ("layer 3 (Op) has no one-position form"), written to buf; false
 * when it can. */
bool rs_gen_no_cache_reason(const rs_model *m, char *buf, size_t n);
/* Forgets the sequence (the cache is reused). */
void rs_gen_reset(rs_gen *g);
/* Starts the sequence again with toks[0..n) (n >= 1; of a longer prompt the last ctx tokens count, as
 * in nanoGPT) and writes the logits (vocab; NULL: not needed) for the token after it. A long prompt is
 * one batched forward that also fills the cache. */
rs_status rs_gen_prefill(rs_gen *g, const int32_t *toks, int n, float *logits, rs_err *err);
/* Appends token tok and writes the logits (vocab; NULL: not needed) for the token after it. */
rs_status rs_gen_push(rs_gen *g, int32_t tok, float *logits, rs_err *err);
/* Tokens in the window (at most the context). */
int rs_gen_len(const rs_gen *g);
/* Pushes whose logits came from a batched forward of the window (past the context, or without the
 * cache), since the decoder was made. */
int rs_gen_recomputed(const rs_gen *g);

/* Logits (vocab) for the next token after tokens[0..len) by a full forward of the last ctx tokens,
 * in eval mode whatever the model's mode, through activation set a (NULL: the model's default set,
 * one caller at a time). */
rs_status rs_gen_full_logits(rs_model *m, rs_acts *a, const int32_t *tokens, int len, float *logits, rs_err *err);

typedef struct rs_gen_cfg {
    int n;           /* tokens to sample */
    float temp;      /* softmax temperature; 0 = always the most likely token */
    int top_k;       /* sample among the k most likely (0 = all) */
    uint64_t seed;
    bool cache;      /* use the KV cache where the model allows it (default on); the same text */
    rs_gen_window window; /* past the context (default crop: nanoGPT's text) */
} rs_gen_cfg;

rs_gen_cfg rs_gen_defaults(void); /* n 200, temp 0.8, top_k 40, seed 1, cache on, window crop */

typedef struct rs_gen_stats {
    int tokens;      /* sampled */
    double seconds;  /* sampling time, prompt included */
    bool stopped;    /* stop() asked */
    bool cached;     /* the KV cache was used (asked for, and the model has it) */
    int recomputed;  /* tokens after the first whose logits were a batched forward of the window */
} rs_gen_stats;

/* Samples cfg->n tokens after prompt[0..plen) (plen >= 1), calling on_token for each as soon as it
 * is drawn; stop (may be NULL) is polled before each token. */
rs_status rs_generate(rs_model *m, const int32_t *prompt, int plen, const rs_gen_cfg *cfg,
                      void (*on_token)(void *ud, int32_t tok), bool (*stop)(void *ud), void *ud,
                      rs_gen_stats *stats, rs_err *err);

/* One draw from logits (vocab) with temperature and top-k (logits is overwritten); scratch holds
 * vocab floats (the sampler allocates nothing, it runs once per token). */
int32_t rs_gen_sample(float *logits, int vocab, float temp, int top_k, rs_rng *rng, float *scratch);

#endif
