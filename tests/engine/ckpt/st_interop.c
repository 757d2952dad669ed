/* Helper for the Python interop test (read_safetensors.py): `write PATH` saves a known set of
 * tensors, `check PATH N [key=value...]` reads a file someone else wrote and checks that it holds N
 * tensors whose elements follow the shared formula, and the metadata given. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ckpt/safetensors.h"
#include "tests/rs_test.h"

/* Element i of any tensor, in both directions: floats i*0.5 - 1, signed i*3 - 7, U8 i*3 + 1. */
static double expect(rs_dtype t, int64_t i)
{
    switch (t) {
    case RS_F32: case RS_F64: case RS_F16: case RS_BF16: return (double)i * 0.5 - 1;
    case RS_U8: return (double)((i * 3 + 1) & 0xff);
    default: return (double)(i * 3 - 7);
    }
}

/* Half precision by hand: the values here are small multiples of 0.5, all exact in f16. */
static uint16_t to_f16(float x)
{
    if (x == 0) return signbit(x) ? 0x8000 : 0;
    int e;
    float m = frexpf(fabsf(x), &e); /* x = m * 2^e, m in [0.5, 1) */
    uint16_t bits = (uint16_t)((e - 1 + 15) << 10 | ((uint32_t)(m * 2048) & 0x3ff));
    return x < 0 ? bits | 0x8000 : bits;
}

static double from_f16(uint16_t h)
{
    int e = h >> 10 & 0x1f, m = h & 0x3ff;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

static double element(const void *p, rs_dtype t, int64_t i)
{
    /* memcpy: a tensor after an odd-sized one sits at an unaligned address */
    union { float f; double d; int64_t q; int32_t l; int8_t b; uint8_t u; uint16_t h; uint32_t w; } v;
    memcpy(&v, (const char *)p + i * (int64_t)rs_dtype_size(t), rs_dtype_size(t));
    switch (t) {
    case RS_F32: return v.f;
    case RS_F64: return v.d;
    case RS_F16: return from_f16(v.h);
    case RS_BF16: { uint32_t w = (uint32_t)v.h << 16; float f; memcpy(&f, &w, 4); return f; }
    case RS_I64: return (double)v.q;
    case RS_I32: return v.l;
    case RS_I8: return v.b;
    case RS_U8: return v.u;
    default: return NAN;
    }
}

static int do_write(const char *path)
{
    static const struct { const char *name; rs_dtype t; rs_shape s; } set[] = {
        {"0.weight", RS_F32, {2, {3, 4}}}, {"0.bias", RS_F32, {1, {4}}},
        {"step", RS_I64, {0, {0}}},        {"empty", RS_F32, {2, {0, 3}}},
        {"1.weight", RS_F64, {3, {2, 2, 2}}}, {"half", RS_F16, {1, {5}}},
        {"labels", RS_I32, {1, {5}}},      {"signs", RS_I8, {1, {6}}},
        {"mask", RS_U8, {1, {7}}},
    };
    enum { N = sizeof set / sizeof *set };
    rs_st_tensor t[N];
    void *bufs[N];
    for (int k = 0; k < N; k++) {
        int64_t n = rs_shape_numel(&set[k].s);
        uint8_t *b = bufs[k] = malloc((size_t)n * 8 + 1);
        for (int64_t i = 0; i < n; i++) {
            double x = expect(set[k].t, i);
            switch (set[k].t) {
            case RS_F32: ((float *)b)[i] = (float)x; break;
            case RS_F64: ((double *)b)[i] = x; break;
            case RS_F16: ((uint16_t *)b)[i] = to_f16((float)x); break;
            case RS_I64: ((int64_t *)b)[i] = (int64_t)x; break;
            case RS_I32: ((int32_t *)b)[i] = (int32_t)x; break;
            case RS_I8: ((int8_t *)b)[i] = (int8_t)x; break;
            default: b[i] = (uint8_t)x; break;
            }
        }
        t[k] = (rs_st_tensor){set[k].name, set[k].t, set[k].s, b};
    }
    const char *meta[] = {"format", "pt", "writer", "ringside"};
    rs_err err = {0};
    rs_status s = rs_st_write(path, t, N, meta, 2, &err);
    for (int k = 0; k < N; k++) free(bufs[k]);
    if (s) fprintf(stderr, "%s\n", err.msg);
    return s ? 1 : 0;
}

static int do_check(const char *path, int n, char **kv, int nkv)
{
    rs_st_file *f;
    rs_err err = {0};
    if (rs_st_open(path, &f, &err)) {
        fprintf(stderr, "FAIL %s\n", err.msg);
        return 1;
    }
    RS_CHECK(rs_st_count(f) == n, "%d tensors, want %d", rs_st_count(f), n);
    for (int k = 0; k < rs_st_count(f); k++) {
        const rs_st_info *t = rs_st_at(f, k);
        char sb[128];
        int64_t m = rs_shape_numel(&t->shape);
        printf("%s %s %s\n", t->name, rs_dtype_st_name(t->dtype), rs_shape_str(&t->shape, sb, sizeof sb));
        for (int64_t i = 0; i < m; i++) {
            char what[160];
            snprintf(what, sizeof what, "%s[%lld]", t->name, (long long)i);
            RS_CHECK_CLOSE(element(rs_st_data(f, t), t->dtype, i), expect(t->dtype, i), 0, 0, what);
        }
    }
    for (int i = 0; i < nkv; i++) {
        char *eq = strchr(kv[i], '=');
        if (!eq) continue;
        *eq = '\0';
        const char *v = rs_st_meta(f, kv[i]);
        RS_CHECK(v && !strcmp(v, eq + 1), "metadata %s is '%s', want '%s'", kv[i], v ? v : "(absent)",
                 eq + 1);
    }
    rs_st_close(f);
    return rs_test_finish("st_interop check");
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "write")) return do_write(argv[2]);
    if (argc >= 4 && !strcmp(argv[1], "check")) return do_check(argv[2], atoi(argv[3]), argv + 4, argc - 4);
    fprintf(stderr, "usage: %s write PATH | check PATH N [key=value...]\n", argv[0]);
    return 2;
}
