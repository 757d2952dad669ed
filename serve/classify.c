/* The classification extension (classify.h). */
#include "classify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer_check.h"

#define MAX_ELEMENTS 1000000 /* Triton's bound on a classified output */

/* Element i of a numeric tensor as a double, and as Triton's std::to_string writes it. */
static double value_at(rs_serve_dtype t, const char *p, size_t i)
{
    const char *e = p + i * rs_serve_dtype_size(t);
    switch (t) {
    case RS_SERVE_UINT8: return *(const uint8_t *)e;
    case RS_SERVE_INT8: return *(const int8_t *)e;
    case RS_SERVE_UINT16: { uint16_t v; memcpy(&v, e, 2); return v; }
    case RS_SERVE_INT16: { int16_t v; memcpy(&v, e, 2); return v; }
    case RS_SERVE_UINT32: { uint32_t v; memcpy(&v, e, 4); return v; }
    case RS_SERVE_INT32: { int32_t v; memcpy(&v, e, 4); return v; }
    case RS_SERVE_UINT64: { uint64_t v; memcpy(&v, e, 8); return (double)v; }
    case RS_SERVE_INT64: { int64_t v; memcpy(&v, e, 8); return (double)v; }
    case RS_SERVE_FP32: { float v; memcpy(&v, e, 4); return v; }
    case RS_SERVE_FP64: { double v; memcpy(&v, e, 8); return v; }
    default: return 0.0;
    }
}

static int value_text(rs_serve_dtype t, const char *p, size_t i, char *buf, size_t cap)
{
    if (t == RS_SERVE_FP32 || t == RS_SERVE_FP64) return snprintf(buf, cap, "%f", value_at(t, p, i));
    return rs_serve_dtype_json_elem(t, p + i * rs_serve_dtype_size(t), buf, cap);
}

typedef struct scored {
    double v;
    size_t i;
} scored;

/* the largest first; among equals the smaller index (a stable order, where Triton's std::sort leaves it open) */
static int by_value(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static void put_u32(uint8_t *p, size_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

#define MAX_LABEL_FILE (4 << 20)

static rs_status classify_rows(const rs_serve_config *c, int k, const rs_serve_tensor *y, int64_t B, int topk,
                               const char *const *labels, size_t nlabels, rs_serve_tensor *cls, size_t *per, rs_err *err);

/* The lines of path into *text (owned by the caller) and *lines (pointers into it). */
static rs_status read_labels(const char *path, char **text, char ***lines, size_t *n, rs_err *err)
{
    *text = NULL, *lines = NULL, *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return rs_err_set(err, RS_ERR_IO, "label_filename %s: cannot open", path);
    char *t = malloc(MAX_LABEL_FILE + 1); /* the caller's */
    size_t len = t ? fread(t, 1, MAX_LABEL_FILE + 1, f) : 0;
    fclose(f);
    if (!t || len > MAX_LABEL_FILE) {
        free(t);
        return rs_err_set(err, t ? RS_ERR_FORMAT : RS_ERR_NOMEM, "label_filename %s: larger than 4 MiB", path);
    }
    t[len] = 0;
    size_t cap = 1;
    for (size_t i = 0; i < len; i++) cap += t[i] == '\n';
    char **l = malloc(cap * sizeof *l); /* the caller's */
    if (!l) {
        free(t);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    for (char *p = t; *p && *n < cap;) {
        char *e = strchr(p, '\n');
        if (e) *e = 0;
        if (e && e > p && e[-1] == '\r') e[-1] = 0;
        l[(*n)++] = p;
        if (!e) break;
        p = e + 1;
    }
    *text = t, *lines = l;
    return RS_OK;
}

rs_status rs_serve_classify(const rs_serve_config *c, int k, const rs_serve_tensor *y, int64_t B, int topk,
                            rs_serve_tensor *cls, size_t *per, rs_err *err)
{
    char *ltext = NULL, **lines = NULL; /* owned here */
    size_t nlabels = 0;
    if (c->outputs[k].labels[0]) {
        rs_status st = read_labels(c->outputs[k].labels, &ltext, &lines, &nlabels, err);
        if (st) return st;
    }
    rs_status st = classify_rows(c, k, y, B, topk, (const char *const *)lines, nlabels, cls, per, err);
    free(lines);
    free(ltext);
    return st;
}
static rs_status classify_rows(const rs_serve_config *c, int k, const rs_serve_tensor *y, int64_t B, int topk,
                               const char *const *labels, size_t nlabels, rs_serve_tensor *cls, size_t *per, rs_err *err)
{
    rs_serve_dtype t = c->outputs[k].dtype;
    size_t sz = rs_serve_dtype_size(t), numel = rs_serve_io_numel(c, &c->outputs[k]), rows = (size_t)B;
    if (c->full_dims) numel *= rows, rows = 1;
    *cls = (rs_serve_tensor){0};
    if (!sz || t == RS_SERVE_FP16 || t == RS_SERVE_BF16 || t == RS_SERVE_BOOL)
        return rs_err_set(err, RS_ERR_ARG, "class result not available for output due to unsupported type '%s'",
                          rs_serve_dtype_v2_name(t));
    if (numel * rows > MAX_ELEMENTS) return rs_err_set(err, RS_ERR_ARG, "classification output tensor too large");
    size_t kk = (size_t)topk < numel ? (size_t)topk : numel, lmax = 0;
    for (size_t i = 0; labels && i < nlabels; i++)
        if (strlen(labels[i]) > lmax) lmax = strlen(labels[i]);
    *per = kk;
    scored *sc = malloc(numel * sizeof *sc + 1); /* owned here */
    size_t cap = rows * kk * (4 + 16 + lmax) + 64, used = 0;
    cls->data = malloc(cap); /* the caller's; grown below */
    if (!sc || !cls->data) {
        free(sc);
        free(cls->data);
        cls->data = NULL;
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    for (size_t r = 0; r < rows; r++) {
        const char *row = (const char *)y->data + r * numel * sz;
        for (size_t i = 0; i < numel; i++) sc[i] = (scored){value_at(t, row, i), i};
        qsort(sc, numel, sizeof *sc, by_value);
        for (size_t j = 0; j < kk; j++) {
            char s[400];
            int m = value_text(t, row, sc[j].i, s, 340); /* %f of the largest double: 316 characters */
            m += snprintf(s + m, sizeof s - (size_t)m, ":%zu", sc[j].i);
            const char *lb = labels && sc[j].i < nlabels ? labels[sc[j].i] : NULL;
            size_t ll = lb ? strlen(lb) : 0, need = 4 + (size_t)m + (lb ? 1 + ll : 0);
            if (used + need > cap) {
                void *nb = realloc(cls->data, cap = 2 * cap + need);
                if (!nb) {
                    free(sc);
                    free(cls->data);
                    cls->data = NULL;
                    return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
                }
                cls->data = nb;
            }
            uint8_t *o = (uint8_t *)cls->data + used;
            put_u32(o, need - 4);
            memcpy(o + 4, s, (size_t)m);
            if (lb) {
                o[4 + m] = ':';
                memcpy(o + 5 + m, lb, ll);
            }
            used += need;
        }
    }
    cls->bytes = used;
    free(sc);
    return RS_OK;
}
