/* xoshiro256** (Blackman & Vigna), seeded with splitmix64 as its authors recommend. */
#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rs_rng_seed(rs_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

rs_rng rs_rng_fork(const rs_rng *r, uint64_t stream)
{
    uint64_t x = r->s[0] ^ rotl(r->s[1], 17) ^ rotl(r->s[2], 31) ^ r->s[3];
    x ^= (stream + 1) * 0xd1b54a32d192ed03ULL;
    rs_rng c;
    for (int i = 0; i < 4; i++) c.s[i] = splitmix64(&x);
    return c;
}

uint64_t rs_rng_u64(rs_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint32_t rs_rng_u32(rs_rng *r) { return (uint32_t)(rs_rng_u64(r) >> 32); }

uint64_t rs_rng_below(rs_rng *r, uint64_t n)
{
    if (n <= 1) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do v = rs_rng_u64(r); while (v >= limit);
    return v % n;
}

float rs_rng_uniform(rs_rng *r) { return (float)(rs_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float rs_rng_range(rs_rng *r, float lo, float hi) { return lo + (hi - lo) * rs_rng_uniform(r); }

float rs_rng_normal(rs_rng *r)
{
    /* u1 in (0,1] so log() is finite. */
    double u1 = ((double)(rs_rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(rs_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void rs_rng_shuffle_u32(rs_rng *r, uint32_t *idx, uint64_t n)
{
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = rs_rng_below(r, i);
        uint32_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}
