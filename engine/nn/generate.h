/* Sampling text from a token model (a GPT), one token at a time.
 * With the KV cache, each new token runs every layer on one position only: attention reads the keys
 * and values of the earlier positions from the cache instead of recomputing them. Without it, the
 * whole context is recomputed per token (what nanoGPT's generate does). Both give the same tokens
 * while the text fits the model's context; past it, the recomputation crops to the last ctx tokens
 * and the cache starts again from the last ctx/2 (a context shift), so they may part ways there.
 * A decoder holds its own activations and caches, and the recomputing path its own activation set;
 * both only read the model's parameters, so several threads can generate from one model at once
 * (nothing may train it meanwhile). */
#ifndef RS_GENERATE_H
#define RS_GENERATE_H

#include "model.h"

typedef struct rs_gen rs_gen;

/* A decoder for m (borrowed; must outlive it). Fails with a message for a model that is not a token
 * model of the layers a GPT is made of. Caller owns the result. */
rs_gen *rs_gen_new(rs_model *m, rs_err *err);
void rs_gen_free(rs_gen *g);
/* Forgets the sequence (the cache is reused). */
void rs_gen_reset(rs_gen *g);
/* Appends token tok at the next position and writes the logits (vocab) for the position after it.
 * Uses the cache; when the context is full it shifts first (see above). */
rs_status rs_gen_push(rs_gen *g, int32_t tok, float *logits, rs_err *err);
/* Positions in the cache. */
int rs_gen_len(const rs_gen *g);

/* Logits (vocab) for the next token after tokens[0..len) by a full forward of the last ctx tokens,
 * in eval mode whatever the model's mode, through activation set a (NULL: the model's default set,
 * one caller at a time). */
rs_status rs_gen_full_logits(rs_model *m, rs_acts *a, const int32_t *tokens, int len, float *logits, rs_err *err);

typedef struct rs_gen_cfg {
    int n;           /* tokens to sample */
    float temp;      /* softmax temperature; 0 = always the most likely token */
    int top_k;       /* sample among the k most likely (0 = all) */
    uint64_t seed;
    bool cache;      /* use the KV cache (default on) */
} rs_gen_cfg;

rs_gen_cfg rs_gen_defaults(void); /* n 200, temp 0.8, top_k 40, seed 1, cache on */

typedef struct rs_gen_stats {
    int tokens;      /* sampled */
    double seconds;  /* sampling time, prompt included */
    bool stopped;    /* stop() asked */
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
