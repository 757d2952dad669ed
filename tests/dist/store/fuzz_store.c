/* Fuzz target for the store server's request decoder: the input is a byte stream as a peer would send
 * it, decoded request by request the way the server does. Any bytes must give whole requests whose
 * fields lie inside the input and within the limits, a "need more" answer, or a rejection; never a
 * crash or an out-of-bounds read. */
#include <string.h>

#include "dist/store/wire.h"
#include "fuzz.h"

static volatile uint8_t sink;

static void touch(const uint8_t *p, size_t n, const uint8_t *lo, const uint8_t *hi)
{
    if (n && (p < lo || p + n > hi)) __builtin_trap();
    for (size_t i = 0; i < n; i++) sink ^= p[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    for (;;) {
        rs_store_req r;
        size_t used;
        int s = rs_store_wire_parse(p, (size_t)(end - p), &r, &used);
        if (s < 0) return 0; /* the server drops the peer */
        if (s == 0) {
            if (used && used <= (size_t)(end - p)) __builtin_trap(); /* asked for bytes it already had */
            return 0;
        }
        if (used < RS_STORE_REQ_HEAD || used > (size_t)(end - p)) __builtin_trap();
        if (r.klen > RS_STORE_KEY_MAX || r.vlen > RS_STORE_VAL_MAX) __builtin_trap();
        touch(r.key, r.klen, p, p + used);
        touch(r.val, r.vlen, p, p + used);
        if (r.op == RS_STORE_OP_WAIT) {
            const uint8_t *k = r.keys, *key;
            size_t kl;
            for (uint32_t i = 0; i < r.nkeys; i++) {
                k = rs_store_wire_next_key(k, &key, &kl);
                if (kl < 1 || kl > RS_STORE_KEY_MAX) __builtin_trap();
                touch(key, kl, r.val, r.val + r.vlen);
            }
            if (k != r.val + r.vlen) __builtin_trap();
        }
        p += used;
    }
}

/* Seeds: one of each op, then a stream of them back to back. */
static const uint8_t s_set[] = {1, 0, 0, 0, 3, 'k', 'e', 'y', 0, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'};
static const uint8_t s_get[] = {2, 0, 0, 0, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 3, 0xe8};
static const uint8_t s_add[] = {3, 0, 0, 0, 1, 'c', 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t s_check[] = {4, 0, 0, 0, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 0};
static const uint8_t s_wait[] = {5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 22, 0, 0, 0, 100, 0, 0, 0, 2,
                                 0, 0, 0, 2, 'a', 'b', 0, 0, 0, 4, 'r', 'a', 'n', 'k'};
static const uint8_t s_stream[] = {1, 0, 0, 0, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 1, 'x',
                                   4, 0, 0, 0, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0,
                                   5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0, 1,
                                   0, 0, 0, 1, 'a'};

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    static const rs_fuzz_seed s[] = {
        {s_set, sizeof s_set},     {s_get, sizeof s_get},     {s_add, sizeof s_add},
        {s_check, sizeof s_check}, {s_wait, sizeof s_wait}, {s_stream, sizeof s_stream},
    };
    *seeds = s;
    return sizeof s / sizeof *s;
}
