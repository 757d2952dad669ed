/* Fuzz target for the binary data readers: the input is parsed as one IDX file, as an images+labels
 * pair (split where the labels magic 00 00 08 01 first appears after the first header) and as a
 * CIFAR-10 batch. Any bytes must give a valid data set or an error naming the file; never a crash,
 * a leak, an out-of-bounds read or a data set that breaks its own invariants. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/data/data.h"
#include "fuzz.h"

/* Failure: no data set and a message that names the file; success: labels in range, x in [0,1]. */
static void check(rs_status s, rs_dataset *d, const rs_err *e, const char *name)
{
    if (s != RS_OK) {
        if (d || strncmp(e->msg, name, strlen(name))) __builtin_trap();
        return;
    }
    if (!d || d->n == 0 || d->n_classes < 1) __builtin_trap();
    size_t numel = (size_t)d->n * rs_dataset_sample_numel(d);
    for (size_t i = 0; i < numel; i++)
        if (!(d->x[i] >= 0.0f && d->x[i] <= 1.0f)) __builtin_trap();
    for (uint32_t i = 0; i < d->n; i++)
        if (d->y[i] < 0 || d->y[i] >= d->n_classes) __builtin_trap();
    rs_dataset_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rs_err e = {0};
    rs_idx v;
    if (rs_data_idx_parse(data, size, "fuzz.idx", &v, &e) == RS_OK) {
        if (v.ndims < 1 || v.ndims > 4 || v.data < data || v.count > size ||
            (size_t)(v.data - data) + v.count != size)
            __builtin_trap();
        uint8_t acc = 0;
        for (size_t i = 0; i < v.count; i++) acc ^= v.data[i]; /* every element is inside the input */
        (void)acc;
    } else if (strncmp(e.msg, "fuzz.idx: ", 10)) {
        __builtin_trap();
    }

    static const uint8_t lmagic[4] = {0, 0, 8, 1};
    size_t split = size;
    for (size_t i = 4; i + 4 <= size; i++)
        if (!memcmp(data + i, lmagic, 4)) {
            split = i;
            break;
        }
    rs_dataset *d = (rs_dataset *)&d; /* the reader must reset it on failure */
    rs_status s = rs_data_idx_from_memory(data, split, "img.idx", data + split, size - split, "lab.idx", &d, &e);
    if (s != RS_OK && d) __builtin_trap();
    if (s != RS_OK && strncmp(e.msg, "img.idx", 7) && strncmp(e.msg, "lab.idx", 7)) __builtin_trap();
    if (s == RS_OK) check(s, d, &e, "");

    d = (rs_dataset *)&d;
    s = rs_data_cifar_parse(data, size, "fuzz.bin", &d, &e);
    check(s, d, &e, "fuzz.bin");
    return 0;
}

/* Seeds: a valid pair (images whose pixels avoid the labels magic), each half alone, a 4-d file,
 * labels past 9, and one CIFAR record. */
static const uint8_t pair[] = {
    0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 2,  /* 2 images of 3x2 */
    0, 255, 128, 7, 9, 200, 1, 2, 3, 4, 5, 6,
    0, 0, 8, 1, 0, 0, 0, 2, 3, 9,                    /* labels 3, 9 */
};
static const uint8_t pair12[] = {
    0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 77,
    0, 0, 8, 1, 0, 0, 0, 1, 12,
};
static const uint8_t four_d[] = {0, 0, 8, 4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4};
static const uint8_t cifar[RS_CIFAR_RECORD] = {7, 1, 2, 3, 250, 251, 252};

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    static rs_fuzz_seed s[6];
    s[0] = (rs_fuzz_seed){pair, sizeof pair};
    s[1] = (rs_fuzz_seed){pair, 28};
    s[2] = (rs_fuzz_seed){pair + 28, sizeof pair - 28};
    s[3] = (rs_fuzz_seed){pair12, sizeof pair12};
    s[4] = (rs_fuzz_seed){four_d, sizeof four_d};
    s[5] = (rs_fuzz_seed){cifar, sizeof cifar};
    *seeds = s;
    return 6;
}
