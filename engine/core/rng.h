/* Seeded random numbers (xoshiro256** seeded through splitmix64).
 * State lives in the caller's struct, never in a global, so two ranks or two models in one process
 * draw independent, reproducible streams. */
#ifndef RS_RNG_H
#define RS_RNG_H

#include <stdint.h>

typedef struct rs_rng {
    uint64_t s[4];
} rs_rng;

void rs_rng_seed(rs_rng *r, uint64_t seed);
/* A child stream derived from (r's seed material, stream id) without disturbing r: used to give each
 * layer, loader or rank its own stream so that adding one consumer does not shift the others. */
rs_rng rs_rng_fork(const rs_rng *r, uint64_t stream);
uint64_t rs_rng_u64(rs_rng *r);
uint32_t rs_rng_u32(rs_rng *r);
/* Uniform in [0, n) without modulo bias. */
uint64_t rs_rng_below(rs_rng *r, uint64_t n);
/* Uniform float in [0, 1). */
float rs_rng_uniform(rs_rng *r);
/* Uniform float in [lo, hi). */
float rs_rng_range(rs_rng *r, float lo, float hi);
/* Standard normal (Box-Muller; one value per call, the pair's second is discarded for simplicity). */
float rs_rng_normal(rs_rng *r);
/* Fisher-Yates shuffle of idx[0..n). */
void rs_rng_shuffle_u32(rs_rng *r, uint32_t *idx, uint64_t n);

#endif
