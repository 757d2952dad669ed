/* Model specs: the text a user writes after `model m =`.
 *   mlp 784-256-10 [act=relu|gelu|tanh] [dropout=P] [in=1x28x28]
 *   seq [in=1x28x28] conv(16,3,pad=1) relu maxpool(2) [ conv(32,3) relu ] flatten linear(10)
 * Square brackets group layers into a block (nested names "1.0", "1.1"). Errors carry the byte
 * offset of the word that could not be used, so a front end can put a caret under it. */
#ifndef RS_SPEC_H
#define RS_SPEC_H

#include "model.h"

/* Parses and builds a model (initialised from seed). On error *err_pos (may be NULL) is the offset
 * into spec of the offending word. Caller owns *out. */
rs_status rs_model_parse(const char *spec, const char *name, rs_device dev, rs_mem *mem, uint64_t seed,
                         rs_model **out, size_t *err_pos, rs_err *err);

/* Parses and lays out (shapes, offsets) without allocating or initialising: rs_model_build(m, seed)
 * makes it usable. For checking a spec, and for fuzzing. */
rs_status rs_model_parse_layout(const char *spec, const char *name, rs_device dev, rs_mem *mem, rs_model **out,
                                size_t *err_pos, rs_err *err);

/* Parses one layer word such as "conv(16,3,pad=1)" into cfg. */
rs_status rs_layer_parse(const char *word, rs_layer_cfg *cfg, size_t *err_pos, rs_err *err);

/* The closest of `cands` to `word` within edit distance 2, or NULL: the "did you mean" helper. */
const char *rs_spec_near_miss(const char *word, const char *const *cands, int n);
/* The words a `seq` spec is made of, for completion: every offered layer ("linear(", "relu", from the
 * layers' descriptors) and the spec's own ("res[", "ctx=", "[", "]"). NULL-terminated, read-only. */
const char *const *rs_spec_words(void);
/* "relu, gelu, tanh or silu": the kinds that are activations (mlp's act=), into buf. */
const char *rs_spec_activations(char *buf, size_t n);

#endif
