/* torch.utils.data.DistributedSampler in C: each rank derives the same epoch permutation from
 * (seed, epoch), pads or cuts it to a multiple of the world size and takes every W-th position from
 * its rank on. No communication is needed, and the split is what PyTorch users expect. */
#include <stdlib.h>

#include "engine/core/rng.h"
#include "engine/data/loader.h"

struct rs_sampler {
    uint32_t n;
    rs_sampler_cfg cfg;
    int epoch;
    uint32_t count; /* this rank's samples per epoch */
    uint32_t total; /* count * world */
    uint32_t *perm; /* (n) the epoch permutation; NULL with draw */
    uint32_t *idx;  /* (count) this rank's share of it; NULL with draw */
    uint64_t key;   /* draw: the epoch's key, from (seed, epoch) */
};

/* splitmix64's finaliser: a counter-based draw, so any position's index costs the same and needs no
 * state. */
static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

rs_sampler_cfg rs_sampler_cfg_default(void)
{
    return (rs_sampler_cfg){.rank = 0, .world = 1, .shuffle = true, .seed = 0};
}

void rs_sampler_epoch_perm(uint32_t n, bool shuffle, uint64_t seed, int epoch, uint32_t *perm)
{
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    if (!shuffle) return;
    /* A child stream per epoch: epoch e's order does not depend on how many epochs came before. */
    rs_rng base;
    rs_rng_seed(&base, seed);
    rs_rng r = rs_rng_fork(&base, (uint64_t)(int64_t)epoch);
    rs_rng_shuffle_u32(&r, perm, n);
}

rs_sampler *rs_sampler_new(uint32_t n, const rs_sampler_cfg *cfg, rs_err *err)
{
    rs_sampler_cfg c = cfg ? *cfg : rs_sampler_cfg_default();
    if (c.world < 1 || c.rank < 0 || c.rank >= c.world) {
        rs_err_set(err, RS_ERR_ARG, "sampler: rank %d of world size %d; need 0 <= rank < world, world >= 1",
                   c.rank, c.world);
        return NULL;
    }
    if (n == 0) {
        rs_err_set(err, RS_ERR_ARG, "sampler: the data set is empty");
        return NULL;
    }
    uint64_t w = (uint64_t)c.world;
    uint64_t count = c.drop_last ? n / w : (n + w - 1) / w;
    if (count * w > UINT32_MAX) {
        rs_err_set(err, RS_ERR_ARG, "sampler: %u samples padded to a multiple of %d do not fit 32 bits", n,
                   c.world);
        return NULL;
    }
    rs_sampler *s = calloc(1, sizeof *s); /* caller owns, with perm and idx (none in draw mode) */
    if (s && !c.draw) {
        s->perm = malloc((size_t)n * sizeof *s->perm);
        s->idx = malloc((count ? (size_t)count : 1) * sizeof *s->idx);
    }
    if (!s || (!c.draw && (!s->perm || !s->idx))) {
        rs_sampler_free(s);
        rs_err_set(err, RS_ERR_NOMEM, "sampler: out of memory for %u indices", n);
        return NULL;
    }
    s->n = n;
    s->cfg = c;
    s->count = (uint32_t)count;
    s->total = (uint32_t)(count * w);
    rs_sampler_set_epoch(s, 0);
    return s;
}

void rs_sampler_free(rs_sampler *s)
{
    if (!s) return;
    free(s->perm);
    free(s->idx);
    free(s);
}

void rs_sampler_set_epoch(rs_sampler *s, int epoch)
{
    s->epoch = epoch;
    if (s->cfg.draw) {
        s->key = mix64(mix64(s->cfg.seed) ^ (uint64_t)(int64_t)epoch);
        return;
    }
    rs_sampler_epoch_perm(s->n, s->cfg.shuffle, s->cfg.seed, epoch, s->perm);
    /* Position p of the padded sequence is perm[p % n]: padding repeats the permutation from its start
     * (cycling when n < W), as DistributedSampler does; with drop_last, total <= n and p < n. */
    uint64_t w = (uint64_t)s->cfg.world;
    for (uint32_t i = 0; i < s->count; i++) s->idx[i] = s->perm[((uint64_t)s->cfg.rank + i * w) % s->n];
}

int rs_sampler_epoch(const rs_sampler *s) { return s->epoch; }
uint32_t rs_sampler_count(const rs_sampler *s) { return s->count; }
uint32_t rs_sampler_total(const rs_sampler *s) { return s->total; }
const uint32_t *rs_sampler_indices(const rs_sampler *s) { return s->idx; }

uint32_t rs_sampler_index(const rs_sampler *s, uint32_t i)
{
    if (!s->cfg.draw) return s->idx[i];
    /* position p of the epoch's sequence, as the stored form numbers them: uniform in [0, n) by a
     * multiply-shift of 64 random bits (bias below 2^-32) */
    uint64_t p = (uint64_t)s->cfg.rank + (uint64_t)i * (uint64_t)s->cfg.world;
    return (uint32_t)(((unsigned __int128)mix64(s->key + p) * s->n) >> 64);
}
