/* Counting a request's protobuf entries on the wire (see grpc_prescan.h). Each message kind that
 * ModelInferRequest holds has a table of its fields: how many times each may occur, which are
 * strings (no NUL), which hold a message of another kind (scanned in turn). Field numbers are
 * Triton's grpc_service.proto. */
#include "grpc_prescan.h"

#include <stdio.h>
#include <string.h>

typedef enum { K_REQ, K_IN, K_OUT, K_CONTENTS, K_PENTRY, K_PARAM, K_NAMED, K_N } kind;

enum { LIM_ENTRIES = -1, LIM_DIMS = -2, LIM_BYTES = -3, MAX_DIMS = 64, OTHER_MAX = 16 };

typedef struct field_def {
    uint32_t num;
    const char *name;
    int max;       /* occurrences: > 0 as is, or one of LIM_* */
    int sub;       /* the kind of message it holds, or -1 */
    bool string;   /* no embedded NUL */
    bool packable; /* repeated numbers: a packed run counts its numbers (shape) or nothing */
} field_def;

typedef struct kind_def {
    const char *name;
    field_def f[9];
    int nf;
} kind_def;

static const kind_def kinds[K_N] = {
    [K_REQ] = {"ModelInferRequest",
               {{1, "model_name", OTHER_MAX, -1, true, false},
                {2, "model_version", OTHER_MAX, -1, true, false},
                {3, "id", OTHER_MAX, -1, false, false},
                {4, "parameters", LIM_ENTRIES, K_PENTRY, false, false},
                {5, "inputs", LIM_ENTRIES, K_IN, false, false},
                {6, "outputs", LIM_ENTRIES, K_OUT, false, false},
                {7, "raw_input_contents", LIM_ENTRIES, -1, false, false}},
               7},
    [K_IN] = {"InferInputTensor",
              {{1, "name", OTHER_MAX, -1, true, false},
               {2, "datatype", OTHER_MAX, -1, true, false},
               {3, "shape", LIM_DIMS, -1, false, true},
               {4, "parameters", LIM_ENTRIES, K_PENTRY, false, false},
               {5, "contents", OTHER_MAX, K_CONTENTS, false, false}},
              5},
    [K_OUT] = {"InferRequestedOutputTensor",
               {{1, "name", OTHER_MAX, -1, true, false}, {2, "parameters", LIM_ENTRIES, K_PENTRY, false, false}},
               2},
    /* numbers sent unpacked cost a record each (packed runs, as every gRPC client sends, cost one) */
    [K_CONTENTS] = {"InferTensorContents",
                    {{1, "bool_contents", LIM_ENTRIES, -1, false, true},
                     {2, "int_contents", LIM_ENTRIES, -1, false, true},
                     {3, "int64_contents", LIM_ENTRIES, -1, false, true},
                     {4, "uint_contents", LIM_ENTRIES, -1, false, true},
                     {5, "uint64_contents", LIM_ENTRIES, -1, false, true},
                     {6, "fp32_contents", LIM_ENTRIES, -1, false, true},
                     {7, "fp64_contents", LIM_ENTRIES, -1, false, true},
                     {8, "bytes_contents", LIM_BYTES, -1, false, false}},
                    8},
    [K_PENTRY] = {"InferParameterEntry",
                  {{1, "key", OTHER_MAX, -1, true, false}, {2, "value", OTHER_MAX, K_PARAM, false, false}},
                  2},
    [K_PARAM] = {"InferParameter",
                 {{1, "bool_param", OTHER_MAX, -1, false, false},
                  {2, "int64_param", OTHER_MAX, -1, false, false},
                  {3, "string_param", OTHER_MAX, -1, false, false},
                  {4, "double_param", OTHER_MAX, -1, false, false},
                  {5, "uint64_param", OTHER_MAX, -1, false, false}},
                 5},
    /* ModelReady, ModelMetadata, ModelConfig, ModelStatistics requests: name = 1, version = 2;
     * RepositoryModelLoad/Unload: repository_name = 1, model_name = 2 */
    [K_NAMED] = {"request",
                 {{1, "name", OTHER_MAX, -1, true, false}, {2, "name or version", OTHER_MAX, -1, true, false}},
                 2},
};

typedef struct scan {
    const rs_serve_limits *l;
    rs_serve_refusal why;
    char *msg;
    size_t cap;
} scan;

/* A varint at *p (advanced); false when the bytes end or run past 10. */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int s = 0; s < 70 && *p < end; s += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return true;
    }
    return false;
}

static long limit_of(const scan *x, int max)
{
    switch (max) {
    case LIM_ENTRIES: return x->l->max_entries;
    case LIM_DIMS: return MAX_DIMS;
    case LIM_BYTES: return (long)x->l->max_entries * 1024;
    default: return max;
    }
}

static const char *limit_hint(int max)
{
    switch (max) {
    case LIM_ENTRIES: return " (--max-entries)";
    case LIM_BYTES: return " (1024 x --max-entries)";
    case LIM_DIMS: return " dimensions";
    default: return "";
    }
}

/* Numbers in a packed run of varints. */
static long packed_count(const uint8_t *p, size_t n)
{
    long k = 0;
    for (size_t i = 0; i < n; i++) k += !(p[i] & 0x80);
    return k;
}

/* 1: within the limits (or malformed: left to protobuf-c); 0: refused, x->msg says why. */
static int scan_msg(scan *x, kind kd, const uint8_t *p, size_t n, int depth)
{
    const kind_def *k = &kinds[kd];
    long count[10] = {0}, other = 0;
    const uint8_t *end = p + n;
    while (p < end) {
        uint64_t tag, v;
        if (!varint(&p, end, &tag)) return 1;
        uint32_t num = (uint32_t)(tag >> 3), wt = (uint32_t)(tag & 7);
        const uint8_t *body = p;
        uint64_t len = 0;
        if (wt == 0 && !varint(&p, end, &v)) return 1;
        if (wt == 1 || wt == 5) {
            if ((size_t)(end - p) < (wt == 1 ? 8u : 4u)) return 1;
            p += wt == 1 ? 8 : 4;
        }
        if (wt == 2) {
            if (!varint(&p, end, &len) || len > (uint64_t)(end - p)) return 1;
            body = p;
            p += len;
        }
        if (wt == 3 || wt == 4 || wt > 5) return 1;
        int fi = -1;
        for (int i = 0; i < k->nf; i++)
            if (k->f[i].num == num) fi = i;
        if (fi < 0) {
            if (++other > OTHER_MAX) {
                x->why = RS_SERVE_REFUSED_ENTRIES;
                snprintf(x->msg, x->cap, "the %s carries more than %d fields it does not define", k->name, OTHER_MAX);
                return 0;
            }
            continue;
        }
        const field_def *f = &k->f[fi];
        count[fi] += f->packable && wt == 2 ? (f->max == LIM_DIMS ? packed_count(body, len) : 0) : 1;
        if (f->string && wt == 2 && memchr(body, 0, len)) {
            x->why = RS_SERVE_REFUSED_NAME;
            snprintf(x->msg, x->cap, "the %s's %s holds a NUL byte (at %zu of its %llu bytes): names are text", k->name,
                     f->name, (size_t)((const uint8_t *)memchr(body, 0, len) - body), (unsigned long long)len);
            return 0;
        }
        if (f->sub >= 0 && wt == 2 && depth < 4 && !scan_msg(x, (kind)f->sub, body, len, depth + 1)) return 0;
    }
    for (int i = 0; i < k->nf; i++) {
        long lim = limit_of(x, k->f[i].max);
        if (count[i] <= lim) continue;
        x->why = RS_SERVE_REFUSED_ENTRIES;
        snprintf(x->msg, x->cap, "the %s carries %ld '%s' entries; at most %ld%s are taken", k->name, count[i],
                 k->f[i].name, lim, limit_hint(k->f[i].max));
        return 0;
    }
    return 1;
}

rs_grpc_code rs_grpc_prescan(rs_grpc_method m, const uint8_t *req, size_t n, const rs_serve_limits *l,
                             rs_serve_refusal *why, char *msg, size_t cap)
{
    kind kd;
    switch (m) {
    case RS_GRPC_MODEL_INFER:
    case RS_GRPC_MODEL_STREAM_INFER: kd = K_REQ; break;
    case RS_GRPC_MODEL_READY:
    case RS_GRPC_MODEL_METADATA:
    case RS_GRPC_MODEL_CONFIG:
    case RS_GRPC_MODEL_STATISTICS:
    case RS_GRPC_REPOSITORY_LOAD:
    case RS_GRPC_REPOSITORY_UNLOAD: kd = K_NAMED; break;
    default: return RS_GRPC_OK;
    }
    scan x = {l, RS_SERVE_REFUSED_N, msg, cap};
    if (scan_msg(&x, kd, req, n, 0)) return RS_GRPC_OK;
    *why = x.why;
    return x.why == RS_SERVE_REFUSED_NAME ? RS_GRPC_INVALID_ARGUMENT : RS_GRPC_RESOURCE_EXHAUSTED;
}
