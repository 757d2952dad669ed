/* The infer response (http_reply.h), written as text rather than through jansson, because jansson
 * cannot write NaN or Infinity: Triton writes them (its TritonJson sets rapidjson's
 * kWriteNanAndInfFlag), so a non-finite FP32 or FP64 output reads the same in JSON as in binary
 * instead of being changed. Names and strings still go through jansson's escaping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "http_reply.h"
#include "infer_check.h"

typedef struct sbuf {
    char *p;     /* owned */
    size_t n, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const void *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = 2 * b->cap + n + 256;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* s (n bytes) as a JSON string; bytes that are not UTF-8 go as they are, as Triton's writer sends them */
static void put_str(sbuf *b, const char *s, size_t n)
{
    json_t *j = json_stringn_nocheck(s, n);
    char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    if (t) puts_(b, t);
    else b->oom = true;
    free(t);
    json_decref(j);
}

static void put_data(sbuf *b, rs_serve_dtype t, const rs_serve_tensor *y, size_t count)
{
    puts_(b, "\"data\":[");
    const char *p = y->data;
    size_t off = 0, sz = rs_serve_dtype_size(t);
    for (size_t i = 0; i < count; i++) {
        if (i) put(b, ",", 1);
        if (t == RS_SERVE_STRING) {
            const uint8_t *u = (const uint8_t *)p + off;
            size_t len = (size_t)u[0] | (size_t)u[1] << 8 | (size_t)u[2] << 16 | (size_t)u[3] << 24;
            put_str(b, p + off + 4, len);
            off += 4 + len;
        } else {
            char e[64];
            int k = rs_serve_dtype_json_elem(t, p + i * sz, e, sizeof e);
            put(b, e, (size_t)k);
        }
    }
    put(b, "]", 1);
}

/* One output's JSON object; its bytes go after the header when binary. */
static void put_output(sbuf *b, const rs_serve_io *io, rs_serve_dtype t, const int64_t *shape, int rank,
                       const rs_serve_tensor *y, size_t count, bool binary)
{
    puts_(b, "{\"name\":");
    put_str(b, io->name, strlen(io->name));
    char s[64];
    snprintf(s, sizeof s, ",\"datatype\":\"%s\",\"shape\":[", rs_serve_dtype_v2_name(t));
    puts_(b, s);
    for (int d = 0; d < rank; d++) {
        snprintf(s, sizeof s, "%s%lld", d ? "," : "", (long long)shape[d]);
        puts_(b, s);
    }
    puts_(b, "],");
    if (binary) {
        snprintf(s, sizeof s, "\"parameters\":{\"binary_data_size\":%zu}", y->bytes);
        puts_(b, s);
    } else {
        put_data(b, t, y, count);
    }
    put(b, "}", 1);
}

void rs_serve_infer_reply(const rs_serve_model *m, const rs_serve_version *v, const json_t *req, int64_t B,
                          const rs_serve_tensor *y, const bool *want, const bool *binary, const int *classes,
                          rs_serve_reply *r)
{
    const rs_serve_config *c = &m->cfg;
    rs_serve_tensor out[RS_SERVE_MAX_IO] = {{0}}, cls[RS_SERVE_MAX_IO] = {{0}};
    size_t per[RS_SERVE_MAX_IO] = {0};
    for (int k = 0; k < c->noutputs; k++) {
        out[k] = y[k];
        if (!want[k]) continue;
        if (!binary[k] && !classes[k] && !rs_serve_dtype_info_of(c->outputs[k].dtype)->json) {
            rs_serve_reply_error(r, 400, "sending %s data via JSON is not supported. Please use the binary data format "
                                 "for output", rs_serve_dtype_v2_name(c->outputs[k].dtype));
            goto done;
        }
        if (classes[k]) {
            rs_err err = {0};
            if (rs_serve_classify(c, k, &y[k], B, classes[k], &cls[k], &per[k], &err)) {
                rs_serve_reply_error(r, 400, "%s", err.msg);
                goto done;
            }
            out[k] = cls[k];
        }
    }
    sbuf b = {0};
    char s[64];
    puts_(&b, "{\"model_name\":");
    put_str(&b, c->name, strlen(c->name));
    snprintf(s, sizeof s, ",\"model_version\":\"%lld\"", (long long)v->version);
    puts_(&b, s);
    const json_t *id = json_object_get(req, "id");
    if (json_is_string(id)) {
        puts_(&b, ",\"id\":");
        put_str(&b, json_string_value(id), json_string_length(id));
    }
    puts_(&b, ",\"outputs\":[");
    bool first = true, any_binary = false;
    for (int k = 0; k < c->noutputs; k++) {
        if (!want[k]) continue;
        int64_t shape[RS_SERVE_MAX_DIMS + 1];
        int rank = rs_serve_output_shape(c, k, B, shape);
        size_t count = 1;
        for (int d = 0; d < rank; d++) count *= (size_t)shape[d];
        if (classes[k]) {
            rank = c->full_dims ? 1 : 2;
            shape[rank - 1] = (int64_t)per[k];
            count = (c->full_dims ? 1 : (size_t)B) * per[k];
        }
        if (!first) put(&b, ",", 1);
        first = false;
        put_output(&b, &c->outputs[k], classes[k] ? RS_SERVE_STRING : c->outputs[k].dtype, shape, rank, &out[k], count,
                   binary[k]);
        any_binary |= binary[k];
    }
    puts_(&b, "]}");
    size_t hl = b.n;
    for (int k = 0; k < c->noutputs; k++)
        if (want[k] && binary[k]) put(&b, out[k].data, out[k].bytes);
    if (b.oom) {
        free(b.p);
        rs_serve_reply_error(r, 500, "out of memory for the response");
        goto done;
    }
    free(r->body);
    r->status = 200;
    r->body = b.p;
    r->len = b.n;
    r->type = any_binary ? "application/octet-stream" : "application/json";
    r->header_len = any_binary ? (long long)hl : -1;
done:
    for (int k = 0; k < RS_SERVE_MAX_IO; k++) free(cls[k].data);
}
