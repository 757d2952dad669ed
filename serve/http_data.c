/* The scan and the placeholders of http_data.h, and the conversion of one literal to a tensor element
 * (the JSON number grammar checked, then strtoll/strtoull/strtod do the converting). */
#include "http_data.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool is_sep(char c) { return is_ws(c) || c == ',' || c == '[' || c == ']'; }

/* From text[i] == '[': its matching ']' when nothing inside is a string, object or colon; counts the
 * literals. 0 when it is not such an array (or is not closed). */
static size_t literal_array(const char *t, size_t n, size_t i, size_t *values)
{
    size_t depth = 0, v = 0;
    bool in_tok = false;
    for (size_t j = i; j < n; j++) {
        char c = t[j];
        if (c == '"' || c == '{' || c == '}' || c == ':') return 0;
        if (c == '[') depth++;
        else if (c == ']' && --depth == 0) {
            *values = v;
            return j;
        }
        bool sep = is_sep(c);
        if (!sep && !in_tok) v++;
        in_tok = !sep;
    }
    return 0;
}

bool rs_serve_jscan_run(rs_serve_jscan *s, const char *text, size_t n, char *msg, size_t cap)
{
    memset(s, 0, sizeof *s);
    s->text = text;
    s->n = n;
    size_t ks = 0, ke = 0;          /* the last string's contents */
    bool after_string = false, data_key = false;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (c == '"') {
            ks = i + 1;
            for (i++; i < n && text[i] != '"'; i++)
                if (text[i] == '\\') i++;
            ke = i < n ? i : n;
            after_string = true;
            s->other_values++;
            continue;
        }
        if (is_ws(c)) continue;
        if (c == ':') {
            data_key = after_string && ke - ks == 4 && !memcmp(text + ks, "data", 4);
            after_string = false;
            continue;
        }
        after_string = false;
        size_t values, end;
        if (c == '[' && data_key && (end = literal_array(text, n, i, &values))) {
            if (s->nregions == RS_SERVE_JSCAN_REGIONS) {
                snprintf(msg, cap, "the request holds more than %d \"data\" arrays", RS_SERVE_JSCAN_REGIONS);
                return false;
            }
            s->region[s->nregions].start = i;
            s->region[s->nregions].end = end;
            s->region[s->nregions++].values = values;
            s->region_values += values;
            i = end;
        } else if (c == '[' || c == '{' || c == ',') {
            s->other_values++;
        }
        data_key = false;
    }
    return true;
}

static size_t feed(void *buf, size_t cap, void *ud)
{
    rs_serve_jscan *s = ud;
    char *out = buf;
    size_t k = 0;
    while (k < cap && s->pos < s->n) {
        if (s->next < s->nregions && s->pos == s->region[s->next].start) {
            char ph[32];
            int m = snprintf(ph, sizeof ph, "\"\\u0001#%d\"", s->next);
            if ((size_t)m > cap - k) break; /* next call */
            memcpy(out + k, ph, (size_t)m);
            k += (size_t)m;
            s->pos = s->region[s->next++].end + 1;
            continue;
        }
        size_t stop = s->next < s->nregions ? s->region[s->next].start : s->n;
        size_t m = stop - s->pos < cap - k ? stop - s->pos : cap - k;
        memcpy(out + k, s->text + s->pos, m);
        k += m;
        s->pos += m;
    }
    return k;
}

json_t *rs_serve_jscan_load(rs_serve_jscan *s, size_t flags, json_error_t *je)
{
    s->pos = 0;
    s->next = 0;
    return json_load_callback(feed, s, flags, je);
}

int rs_serve_jscan_region(const rs_serve_jscan *s, const json_t *v)
{
    const char *p = json_string_value(v);
    if (!p || p[0] != '\x01' || p[1] != '#') return -1;
    char *end;
    long k = strtol(p + 2, &end, 10);
    return *end || k < 0 || k >= s->nregions ? -1 : (int)k;
}

/* JSON's number grammar (and Triton's NaN, Infinity, -Infinity when floats are allowed). */
static bool json_number(const char *t, size_t n, bool integer, bool nonfinite)
{
    if (nonfinite && ((n == 3 && !memcmp(t, "NaN", 3)) || (n == 8 && !memcmp(t, "Infinity", 8)) ||
                      (n == 9 && !memcmp(t, "-Infinity", 9))))
        return true;
    size_t i = 0;
    if (i < n && t[i] == '-') i++;
    if (i >= n || t[i] < '0' || t[i] > '9') return false;
    if (t[i] == '0' && i + 1 < n && t[i + 1] >= '0' && t[i + 1] <= '9') return false;
    while (i < n && t[i] >= '0' && t[i] <= '9') i++;
    if (integer) return i == n;
    if (i < n && t[i] == '.') {
        if (++i >= n || t[i] < '0' || t[i] > '9') return false;
        while (i < n && t[i] >= '0' && t[i] <= '9') i++;
    }
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-')) i++;
        if (i >= n || t[i] < '0' || t[i] > '9') return false;
        while (i < n && t[i] >= '0' && t[i] <= '9') i++;
    }
    return i == n;
}

/* One literal (tok, n chars) as an element of t at out. */
static bool put_elem(rs_serve_dtype t, const char *tok, size_t n, void *out)
{
    char b[64];
    if (n >= sizeof b) return false;
    memcpy(b, tok, n);
    b[n] = 0;
    char *end;
    errno = 0;
    switch (t) {
    case RS_SERVE_BOOL:
        if (!strcmp(b, "true") || !strcmp(b, "false")) {
            *(uint8_t *)out = b[0] == 't';
            return true;
        }
        return false;
    case RS_SERVE_INT8: case RS_SERVE_INT16: case RS_SERVE_INT32: case RS_SERVE_INT64: {
        if (!json_number(b, n, true, false)) return false;
        long long v = strtoll(b, &end, 10);
        size_t sz = rs_serve_dtype_size(t);
        long long lo = sz == 8 ? LLONG_MIN : -(1LL << (sz * 8 - 1)), hi = sz == 8 ? LLONG_MAX : (1LL << (sz * 8 - 1)) - 1;
        if (errno || v < lo || v > hi) return false;
        if (sz == 1) *(int8_t *)out = (int8_t)v;
        else if (sz == 2) { int16_t x = (int16_t)v; memcpy(out, &x, 2); }
        else if (sz == 4) { int32_t x = (int32_t)v; memcpy(out, &x, 4); }
        else { int64_t x = v; memcpy(out, &x, 8); }
        return true;
    }
    case RS_SERVE_UINT8: case RS_SERVE_UINT16: case RS_SERVE_UINT32: case RS_SERVE_UINT64: {
        if (!json_number(b, n, true, false) || b[0] == '-') return false;
        unsigned long long v = strtoull(b, &end, 10);
        size_t sz = rs_serve_dtype_size(t);
        if (errno || (sz < 8 && v >> (sz * 8))) return false;
        if (sz == 1) *(uint8_t *)out = (uint8_t)v;
        else if (sz == 2) { uint16_t x = (uint16_t)v; memcpy(out, &x, 2); }
        else if (sz == 4) { uint32_t x = (uint32_t)v; memcpy(out, &x, 4); }
        else { uint64_t x = v; memcpy(out, &x, 8); }
        return true;
    }
    case RS_SERVE_FP32: case RS_SERVE_FP64: {
        if (!json_number(b, n, false, true)) return false;
        double v = b[0] == 'N' ? NAN : b[0] == 'I' ? INFINITY : !strcmp(b, "-Infinity") ? -INFINITY : strtod(b, &end);
        if (t == RS_SERVE_FP64) memcpy(out, &v, 8);
        else { float x = (float)v; memcpy(out, &x, 4); }
        return true;
    }
    default: return false;
    }
}

bool rs_serve_jscan_decode(const rs_serve_jscan *s, int k, rs_serve_dtype t, void *out, size_t count, const char *name,
                           char *msg, size_t cap)
{
    const char *p = s->text;
    size_t i = s->region[k].start, end = s->region[k].end, got = 0, sz = rs_serve_dtype_size(t);
    if (s->region[k].values != count) {
        snprintf(msg, cap, "Unable to parse 'data' of input '%s': expected %zu %s for its shape, got %zu", name, count,
                 t == RS_SERVE_BOOL ? "booleans" : "numbers", s->region[k].values);
        return false;
    }
    while (i < end) {
        if (is_sep(p[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < end && !is_sep(p[j])) j++;
        if (!put_elem(t, p + i, j - i, (char *)out + got * sz)) {
            snprintf(msg, cap, "Unable to parse 'data' of input '%s': value %zu ('%.*s') is not a %s%s", name, got,
                     (int)(j - i < 40 ? j - i : 40), p + i, rs_serve_dtype_v2_name(t),
                     t == RS_SERVE_BOOL ? " (true or false)" : t == RS_SERVE_FP32 || t == RS_SERVE_FP64 ? "" :
                     " in its range (an integer)");
            return false;
        }
        got++;
        i = j;
    }
    return true;
}
