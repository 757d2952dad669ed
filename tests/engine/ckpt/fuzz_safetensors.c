/* Fuzz target for the safetensors reader: any bytes must give either RS_OK with a file whose every
 * tensor lies inside the buffer and matches its shape, or an error with a message; never a crash,
 * a leak or an out-of-bounds read. Built as a unit test (standalone.c) and for libFuzzer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ckpt/safetensors.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rs_st_file *f = NULL;
    rs_err err = {0};
    if (rs_st_parse(data, size, "fuzz", &f, &err) != RS_OK) {
        if (f || !err.msg[0] || strncmp(err.msg, "fuzz: ", 6)) __builtin_trap();
        return 0;
    }
    size_t total = 0, end = 0;
    uint8_t sum = 0;
    for (int i = 0; i < rs_st_count(f); i++) {
        const rs_st_info *t = rs_st_at(f, i);
        if (t->offset != end) __builtin_trap(); /* the reader promised: packed, in data order */
        end = t->offset + t->nbytes;
        total += t->nbytes;
        if ((size_t)rs_shape_numel(&t->shape) * rs_dtype_size(t->dtype) != t->nbytes) __builtin_trap();
        if (rs_st_find(f, t->name) != t) __builtin_trap();
        const uint8_t *p = rs_st_data(f, t);
        for (size_t k = 0; k < t->nbytes; k++) sum ^= p[k]; /* ASan checks every byte is ours */
        void *dst = malloc(t->nbytes + 1);
        if (dst && rs_st_copy(f, t->name, t->dtype, &t->shape, dst, &err) != RS_OK) __builtin_trap();
        free(dst);
    }
    if (total + 8 > size) __builtin_trap();
    for (int i = 0; i < rs_st_meta_count(f); i++) {
        const char *v = NULL, *k = rs_st_meta_at(f, i, &v);
        if (!k || !v || rs_st_meta(f, k) != v) __builtin_trap();
    }
    rs_st_close(f);
    return sum == 0x5a; /* keep the reads; libFuzzer ignores the value */
}

/* Valid files to start from: several dtypes with metadata and padding, a scalar, empty tensors
 * sharing an offset, an unpadded header, and the empty file "{}". */
static const char *const headers[] = {
    "{\"__metadata__\":{\"format\":\"pt\",\"epoch\":\"3\"},"
    "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"0.bias\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[24,30]},"
    "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[30,38]},"
    "\"m\":{\"dtype\":\"U8\",\"shape\":[2,1],\"data_offsets\":[38,40]}}",
    "{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}",
    "{\"b\":{\"dtype\":\"I8\",\"shape\":[0,4],\"data_offsets\":[4,4]},"
    "\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
    "\"c\":{\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
    "{}",
};
static const size_t data_len[] = {40, 8, 4, 0};
static const int padded[] = {1, 1, 0, 1};
enum { NSEED = sizeof headers / sizeof *headers };

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    static uint8_t store[NSEED][512];
    static rs_fuzz_seed s[NSEED];
    for (int i = 0; i < NSEED; i++) {
        size_t h = strlen(headers[i]), hp = padded[i] ? (h + 7) / 8 * 8 : h;
        uint8_t *b = store[i];
        for (int k = 0; k < 8; k++) b[k] = (uint8_t)((uint64_t)hp >> 8 * k);
        memcpy(b + 8, headers[i], h);
        memset(b + 8 + h, ' ', hp - h);
        for (size_t k = 0; k < data_len[i]; k++) b[8 + hp + k] = (uint8_t)(k * 37 + 1);
        s[i] = (rs_fuzz_seed){b, 8 + hp + data_len[i]};
    }
    *seeds = s;
    return NSEED;
}
