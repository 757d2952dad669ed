/* Fuzz target for the text reader: the first byte picks the window (ctx 1..16), the rest is the text.
 * It must give two parts whose windows are the text shifted by one, ids inside the vocabulary, or an
 * error that starts with "text: " and leaves nothing behind; never a crash or a leak. */
#include <stdint.h>
#include <string.h>

#include "engine/data/data.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    int ctx = 1 + data[0] % 16;
    const uint8_t *t = data + 1;
    size_t n = size - 1;
    rs_data_pair p;
    rs_err e = {0};
    if (rs_data_text_parse(t, n, "fuzz.txt", ctx, &p, &e) != RS_OK) {
        if (p.train || p.test || strncmp(e.msg, "text: ", 6)) __builtin_trap();
        return 0;
    }
    const rs_text_vocab *v = rs_text_vocab_of(p.train);
    size_t ntrain = n * 9 / 10;
    if (!v || v->n < 1 || v->n > 256 || rs_text_len(p.train) != ntrain || rs_text_len(p.test) != n - ntrain ||
        p.train->n != ntrain - (size_t)ctx || p.test->n != n - ntrain - (size_t)ctx || p.train->n_classes != v->n)
        __builtin_trap();
    int32_t x[16], y[16];
    for (int part = 0; part < 2; part++) {
        const rs_dataset *d = part ? p.test : p.train;
        const uint8_t *base = part ? t + ntrain : t;
        for (uint32_t i = 0; i < d->n; i++) {
            rs_dataset_get(d, i, x, y);
            for (int k = 0; k < ctx; k++)
                if (x[k] < 0 || x[k] >= v->n || v->chars[x[k]] != base[i + (size_t)k] || y[k] < 0 || y[k] >= v->n ||
                    v->chars[y[k]] != base[i + (size_t)k + 1])
                    __builtin_trap();
        }
    }
    rs_data_pair_clear(&p);
    return 0;
}

#define SEED(s) {(const uint8_t *)(s), sizeof(s) - 1}
static const rs_fuzz_seed seed_list[] = {
    SEED("\x03the cat sat on the mat and the dog sat on the log; the end.\n"),
    SEED("\x00ab"),
    SEED("\x01" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    SEED("\x02line one\r\nline two\r\n\tand three \xc3\xa9t\xc3\xa9\n"),
    SEED("\x04text with a \x00 NUL byte in the middle of it, long enough"),
    SEED("\x05\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c"),
};

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    *seeds = seed_list;
    return sizeof seed_list / sizeof seed_list[0];
}
