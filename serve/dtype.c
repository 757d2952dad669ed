/* The one table of Triton's data types (dtype.h) and what reads it: names both ways, sizes, the BYTES
 * element walk, JSON text of one element, and the 16-bit float formats. */
#include "dtype.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const rs_serve_dtype_info table[RS_SERVE_DTYPE_COUNT] = {
    [RS_SERVE_INVALID] = {"TYPE_INVALID", "", 0, RS_SERVE_GF_NONE, false},
    [RS_SERVE_BOOL] = {"TYPE_BOOL", "BOOL", 1, RS_SERVE_GF_BOOL, true},
    [RS_SERVE_UINT8] = {"TYPE_UINT8", "UINT8", 1, RS_SERVE_GF_UINT, true},
    [RS_SERVE_UINT16] = {"TYPE_UINT16", "UINT16", 2, RS_SERVE_GF_UINT, true},
    [RS_SERVE_UINT32] = {"TYPE_UINT32", "UINT32", 4, RS_SERVE_GF_UINT, true},
    [RS_SERVE_UINT64] = {"TYPE_UINT64", "UINT64", 8, RS_SERVE_GF_UINT64, true},
    [RS_SERVE_INT8] = {"TYPE_INT8", "INT8", 1, RS_SERVE_GF_INT, true},
    [RS_SERVE_INT16] = {"TYPE_INT16", "INT16", 2, RS_SERVE_GF_INT, true},
    [RS_SERVE_INT32] = {"TYPE_INT32", "INT32", 4, RS_SERVE_GF_INT, true},
    [RS_SERVE_INT64] = {"TYPE_INT64", "INT64", 8, RS_SERVE_GF_INT64, true},
    [RS_SERVE_FP16] = {"TYPE_FP16", "FP16", 2, RS_SERVE_GF_NONE, false},
    [RS_SERVE_FP32] = {"TYPE_FP32", "FP32", 4, RS_SERVE_GF_FP32, true},
    [RS_SERVE_FP64] = {"TYPE_FP64", "FP64", 8, RS_SERVE_GF_FP64, true},
    [RS_SERVE_STRING] = {"TYPE_STRING", "BYTES", 0, RS_SERVE_GF_BYTES, true},
    [RS_SERVE_BF16] = {"TYPE_BF16", "BF16", 2, RS_SERVE_GF_NONE, false},
};

const rs_serve_dtype_info *rs_serve_dtype_info_of(rs_serve_dtype t)
{
    return &table[(unsigned)t < RS_SERVE_DTYPE_COUNT ? t : RS_SERVE_INVALID];
}

rs_serve_dtype rs_serve_dtype_from_config(const char *s)
{
    for (int i = 1; i < RS_SERVE_DTYPE_COUNT; i++)
        if (!strcmp(s, table[i].config)) return (rs_serve_dtype)i;
    return RS_SERVE_INVALID;
}

rs_serve_dtype rs_serve_dtype_from_v2(const char *s)
{
    for (int i = 1; i < RS_SERVE_DTYPE_COUNT; i++)
        if (!strcmp(s, table[i].v2)) return (rs_serve_dtype)i;
    return RS_SERVE_INVALID;
}

const char *rs_serve_dtype_config_name(rs_serve_dtype t) { return rs_serve_dtype_info_of(t)->config; }
const char *rs_serve_dtype_v2_name(rs_serve_dtype t) { return rs_serve_dtype_info_of(t)->v2; }
size_t rs_serve_dtype_size(rs_serve_dtype t) { return rs_serve_dtype_info_of(t)->size; }
size_t rs_serve_dtype_bytes(rs_serve_dtype t, size_t count) { return count * rs_serve_dtype_size(t); }

size_t rs_serve_bytes_span(const void *p, size_t n, size_t count, size_t *elems)
{
    const uint8_t *b = p;
    size_t off = 0, k = 0;
    while (k <= count && n - off >= 4) {
        size_t len = (size_t)b[off] | (size_t)b[off + 1] << 8 | (size_t)b[off + 2] << 16 | (size_t)b[off + 3] << 24;
        if (len > n - off - 4) break;
        if (k == count) break;
        off += 4 + len;
        k++;
    }
    if (elems) {
        /* count what lies beyond too (up to count + 1), so a caller can say "more than expected" */
        size_t extra = k == count && n - off >= 4 ? 1 : 0;
        *elems = k + extra;
    }
    return k == count ? off : (size_t)-1;
}

static int put_double(double v, int digits, char *buf, size_t cap)
{
    if (isnan(v)) return snprintf(buf, cap, "NaN");
    if (isinf(v)) return snprintf(buf, cap, v < 0 ? "-Infinity" : "Infinity");
    int k = snprintf(buf, cap, "%.*g", digits, v);
    /* keep a float a float in JSON (1.0, not 1), as rapidjson writes doubles */
    if (k > 0 && (size_t)k + 2 < cap && !strpbrk(buf, ".eEn")) k += snprintf(buf + k, cap - (size_t)k, ".0");
    return k;
}

int rs_serve_dtype_json_elem(rs_serve_dtype t, const void *p, char *buf, size_t cap)
{
    switch (t) {
    case RS_SERVE_BOOL: return snprintf(buf, cap, "%s", *(const uint8_t *)p ? "true" : "false");
    case RS_SERVE_UINT8: return snprintf(buf, cap, "%u", (unsigned)*(const uint8_t *)p);
    case RS_SERVE_UINT16: { uint16_t v; memcpy(&v, p, 2); return snprintf(buf, cap, "%u", (unsigned)v); }
    case RS_SERVE_UINT32: { uint32_t v; memcpy(&v, p, 4); return snprintf(buf, cap, "%lu", (unsigned long)v); }
    case RS_SERVE_UINT64: { uint64_t v; memcpy(&v, p, 8); return snprintf(buf, cap, "%llu", (unsigned long long)v); }
    case RS_SERVE_INT8: return snprintf(buf, cap, "%d", (int)*(const int8_t *)p);
    case RS_SERVE_INT16: { int16_t v; memcpy(&v, p, 2); return snprintf(buf, cap, "%d", (int)v); }
    case RS_SERVE_INT32: { int32_t v; memcpy(&v, p, 4); return snprintf(buf, cap, "%ld", (long)v); }
    case RS_SERVE_INT64: { int64_t v; memcpy(&v, p, 8); return snprintf(buf, cap, "%lld", (long long)v); }
    case RS_SERVE_FP32: { float v; memcpy(&v, p, 4); return put_double((double)v, 9, buf, cap); }
    case RS_SERVE_FP64: { double v; memcpy(&v, p, 8); return put_double(v, 17, buf, cap); }
    default: return snprintf(buf, cap, "null");
    }
}

/* ---- converting ---- */

/* long double holds every int64, uint64 and double exactly (x86-64's 64-bit significand), so one
 * conversion through it rounds once, as a direct one would. */
static long double load(rs_serve_dtype t, const uint8_t *p)
{
    switch (t) {
    case RS_SERVE_BOOL: return p[0] != 0;
    case RS_SERVE_UINT8: return p[0];
    case RS_SERVE_INT8: return (int8_t)p[0];
    case RS_SERVE_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case RS_SERVE_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case RS_SERVE_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case RS_SERVE_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case RS_SERVE_UINT64: { uint64_t v; memcpy(&v, p, 8); return (long double)v; }
    case RS_SERVE_INT64: { int64_t v; memcpy(&v, p, 8); return (long double)v; }
    case RS_SERVE_FP16: { uint16_t v; memcpy(&v, p, 2); return rs_serve_half_to_float(v); }
    case RS_SERVE_BF16: { uint16_t v; memcpy(&v, p, 2); return rs_serve_bf16_to_float(v); }
    case RS_SERVE_FP32: { float v; memcpy(&v, p, 4); return v; }
    case RS_SERVE_FP64: { double v; memcpy(&v, p, 8); return v; }
    default: return 0;
    }
}

static long double to_int(long double v, long double lo, long double hi)
{
    if (isnan(v)) return 0;
    v = truncl(v);
    return v < lo ? lo : v > hi ? hi : v;
}

static void store(rs_serve_dtype t, long double v, uint8_t *p)
{
    switch (t) {
    case RS_SERVE_BOOL: p[0] = v != 0; break;
    case RS_SERVE_UINT8: p[0] = (uint8_t)to_int(v, 0, UINT8_MAX); break;
    case RS_SERVE_INT8: { int8_t x = (int8_t)to_int(v, INT8_MIN, INT8_MAX); memcpy(p, &x, 1); break; }
    case RS_SERVE_UINT16: { uint16_t x = (uint16_t)to_int(v, 0, UINT16_MAX); memcpy(p, &x, 2); break; }
    case RS_SERVE_INT16: { int16_t x = (int16_t)to_int(v, INT16_MIN, INT16_MAX); memcpy(p, &x, 2); break; }
    case RS_SERVE_UINT32: { uint32_t x = (uint32_t)to_int(v, 0, UINT32_MAX); memcpy(p, &x, 4); break; }
    case RS_SERVE_INT32: { int32_t x = (int32_t)to_int(v, INT32_MIN, INT32_MAX); memcpy(p, &x, 4); break; }
    case RS_SERVE_UINT64: {
        /* UINT64_MAX is not a long double exactly below 2^64; anything from 2^64 up saturates */
        long double w = to_int(v, 0, 18446744073709551615.0L);
        uint64_t x = w >= 18446744073709551616.0L ? UINT64_MAX : (uint64_t)w;
        memcpy(p, &x, 8);
        break;
    }
    case RS_SERVE_INT64: {
        long double w = to_int(v, -9223372036854775808.0L, 9223372036854775808.0L);
        int64_t x = w >= 9223372036854775808.0L ? INT64_MAX : (int64_t)w;
        memcpy(p, &x, 8);
        break;
    }
    case RS_SERVE_FP16: { uint16_t x = rs_serve_float_to_half((float)v); memcpy(p, &x, 2); break; }
    case RS_SERVE_BF16: { uint16_t x = rs_serve_float_to_bf16((float)v); memcpy(p, &x, 2); break; }
    case RS_SERVE_FP32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case RS_SERVE_FP64: { double x = (double)v; memcpy(p, &x, 8); break; }
    default: break;
    }
}

void rs_serve_dtype_convert(rs_serve_dtype from, const void *src, rs_serve_dtype to, void *dst, size_t count)
{
    size_t a = rs_serve_dtype_size(from), b = rs_serve_dtype_size(to);
    if (from == to) {
        memcpy(dst, src, count * a);
        return;
    }
    for (size_t i = 0; i < count; i++) store(to, load(from, (const uint8_t *)src + i * a), (uint8_t *)dst + i * b);
}

/* ---- 16-bit floats ---- */

float rs_serve_half_to_float(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(m | 0x400), e - 25);
    return h & 0x8000 ? -v : v;
}

uint16_t rs_serve_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    float a = fabsf(f);
    if (isnan(f)) return sign | 0x7e00;
    if (a >= 65520.0f) return sign | 0x7c00; /* rounds to infinity */
    if (a < ldexpf(1.0f, -14)) {               /* subnormal: units of 2^-24, to nearest even */
        return sign | (uint16_t)lrintf(ldexpf(a, 24));
    }
    int e;
    float fr = frexpf(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
    long m = lrintf(ldexpf(fr, 11)); /* 11 significant bits, to nearest even */
    if (m == 2048) m = 1024, e++;
    return sign | (uint16_t)(((e + 14) << 10) | (m & 0x3ff));
}

float rs_serve_bf16_to_float(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t rs_serve_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if (isnan(f)) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
