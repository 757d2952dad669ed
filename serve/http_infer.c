/* POST .../infer: a KServe v2 request (JSON tensors, or Triton's binary tensor data extension: a JSON
 * header of Inference-Header-Content-Length bytes followed by the raw tensors in input order) in, the
 * response in the same two forms out, for any number of inputs and outputs of every Triton data type.
 * Every field is checked before anything runs (infer_check.h, Triton's words); what is wrong is said
 * in Triton's {"error": ...} with status 400. The JSON is read as http_data.h says (no jansson node
 * per number) after a count of its values against what the model's inputs can take. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_data.h"
#include "http_internal.h"
#include "http_reply.h"
#include "infer_check.h"
#include "sequence.h"

#define MSG 1024
#define OTHER_VALUES 4096 /* values a request holds beside its tensors' data (names, shapes, parameters) */

/* One request as it is read: each step fills its part or says what is wrong in msg (and returns false). */
typedef struct infer_req {
    const rs_serve_config *c;
    const char *body;
    size_t n, jlen;          /* the body's bytes; the JSON header's (all of them without binary data) */
    long long header_len;
    rs_serve_jscan scan;
    json_t *req;             /* owned: the parsed JSON */
    int64_t B;
    size_t count[RS_SERVE_MAX_IO];      /* elements of each input */
    rs_serve_tensor x[RS_SERVE_MAX_IO]; /* owned: each input's data */
    rs_serve_pin pin;                   /* a sequence's instance (inst -1: any) */
    rs_serve_tensor y[RS_SERVE_MAX_IO]; /* owned: each output's, from the scheduler */
    bool want[RS_SERVE_MAX_IO], binary[RS_SERVE_MAX_IO];
    int classes[RS_SERVE_MAX_IO];       /* > 0: the classification extension's top-k of that output */
    char msg[MSG];
} infer_req;

static bool param_bool(const json_t *obj, const char *key, bool def)
{
    const json_t *p = json_object_get(obj, "parameters");
    const json_t *v = p ? json_object_get(p, key) : NULL;
    return v && json_is_boolean(v) ? json_is_true(v) : def;
}

/* The values the request may hold: every input at the largest batch, and a little for the rest. */
static bool within_limits(infer_req *q)
{
    const rs_serve_config *c = q->c;
    size_t lit = 0, other = OTHER_VALUES;
    int64_t Bmax = rs_serve_max_request_batch(c);
    for (int i = 0; i < c->ninputs; i++) {
        size_t k = (size_t)Bmax * rs_serve_io_numel(c, &c->inputs[i]);
        if (c->inputs[i].dtype == RS_SERVE_STRING) other += 2 * k; /* a string and its comma */
        else lit += k;
    }
    (void)lit; /* the literal arrays cost nothing until their shape is checked; they are converted then */
    if (q->scan.other_values <= other) return true;
    snprintf(q->msg, MSG, "the request's JSON holds %zu values beside its numeric tensors' data; model '%s' takes at "
             "most %zu (its BYTES inputs' elements at the largest batch and %d for names, shapes and parameters)",
             q->scan.other_values, c->name, other, OTHER_VALUES);
    return false;
}

static bool parse_json(infer_req *q)
{
    if (q->header_len >= 0 && (size_t)q->header_len > q->n) {
        snprintf(q->msg, MSG, "Inference-Header-Content-Length %lld is larger than the body (%zu bytes)", q->header_len,
                 q->n);
        return false;
    }
    q->jlen = q->header_len >= 0 ? (size_t)q->header_len : q->n;
    if (!rs_serve_jscan_run(&q->scan, q->body, q->jlen, q->msg, MSG) || !within_limits(q)) return false;
    json_error_t je;
    q->req = rs_serve_jscan_load(&q->scan, JSON_REJECT_DUPLICATES, &je);
    if (!q->req || !json_is_object(q->req)) {
        snprintf(q->msg, MSG, "failed to parse the request JSON buffer: %s at line %d, column %d",
                 q->req ? "not a JSON object" : je.text, q->req ? 1 : je.line, q->req ? 1 : je.column);
        return false;
    }
    return true;
}

static size_t shape_of(const json_t *shape, int64_t *d, bool *ok)
{
    size_t r = json_is_array(shape) ? json_array_size(shape) : 0;
    *ok = json_is_array(shape) && r <= RS_SERVE_MAX_DIMS + 1;
    for (size_t k = 0; *ok && k < r; k++) {
        const json_t *e = json_array_get(shape, k);
        *ok = json_is_integer(e);
        d[k] = *ok ? json_integer_value(e) : 0;
    }
    return *ok ? r : 0;
}

/* A jansson "data" array (strings for BYTES, or what the scan left) into x: leaves in order. */
static bool flatten(const json_t *a, rs_serve_dtype t, rs_serve_tensor *x, size_t cap, size_t *k, int depth)
{
    if (depth > RS_SERVE_MAX_DIMS + 1) return false;
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) {
        if (json_is_array(v)) {
            if (!flatten(v, t, x, cap, k, depth + 1)) return false;
            continue;
        }
        if (t != RS_SERVE_STRING || !json_is_string(v)) return false;
        size_t len = json_string_length(v);
        if (x->bytes + 4 + len > cap || len > UINT32_MAX) return false;
        uint8_t *p = (uint8_t *)x->data + x->bytes;
        p[0] = (uint8_t)len, p[1] = (uint8_t)(len >> 8), p[2] = (uint8_t)(len >> 16), p[3] = (uint8_t)(len >> 24);
        memcpy(p + 4, json_string_value(v), len);
        x->bytes += 4 + len;
        (*k)++;
    }
    return true;
}

static size_t strings_bytes(const json_t *a, int depth)
{
    size_t i, n = 0;
    const json_t *v;
    if (depth > RS_SERVE_MAX_DIMS + 1) return 0;
    json_array_foreach(a, i, v) n += json_is_array(v) ? strings_bytes(v, depth + 1) : 4 + json_string_length(v);
    return n;
}

/* Input i's values (request entry e) into q->x[i]: binary data at *off after the header, or "data". */
static bool read_data(infer_req *q, int i, const json_t *e, size_t *off)
{
    const rs_serve_io *io = &q->c->inputs[i];
    const json_t *bsize = json_object_get(json_object_get(e, "parameters"), "binary_data_size");
    const json_t *data = json_object_get(e, "data");
    rs_serve_tensor *x = &q->x[i];
    if (bsize) {
        if (!json_is_integer(bsize) || json_integer_value(bsize) < 0 || q->header_len < 0) {
            snprintf(q->msg, MSG, "input '%s': binary_data_size needs the Inference-Header-Content-Length header and a "
                     "non-negative integer", io->name);
            return false;
        }
        size_t bs = (size_t)json_integer_value(bsize);
        if (bs > q->n - q->jlen - *off) {
            snprintf(q->msg, MSG, "input '%s': binary_data_size %zu, but the body holds %zu bytes after the header and "
                     "the inputs before it", io->name, bs, q->n - q->jlen - *off);
            return false;
        }
        x->data = malloc(bs + 1);
        if (!x->data) return snprintf(q->msg, MSG, "out of memory for %zu bytes", bs), false;
        memcpy(x->data, q->body + q->jlen + *off, bs);
        x->bytes = bs;
        *off += bs;
        return rs_serve_check_data(q->c->name, io, x->data, x->bytes, q->count[i], q->msg, MSG);
    }
    if (!rs_serve_dtype_info_of(io->dtype)->json) {
        snprintf(q->msg, MSG, "receiving %s data via JSON is not supported. Please use the binary data format for "
                 "input %s", rs_serve_dtype_v2_name(io->dtype), io->name);
        return false;
    }
    int k = rs_serve_jscan_region(&q->scan, data);
    if (k >= 0 && io->dtype != RS_SERVE_STRING) {
        /* the count first: a shape claiming more than the data holds allocates nothing */
        if (q->scan.region[k].values != q->count[i])
            return rs_serve_jscan_decode(&q->scan, k, io->dtype, NULL, q->count[i], io->name, q->msg, MSG);
        x->bytes = rs_serve_dtype_bytes(io->dtype, q->count[i]);
        x->data = malloc(x->bytes + 1);
        if (!x->data) return snprintf(q->msg, MSG, "out of memory for %zu bytes", x->bytes), false;
        return rs_serve_jscan_decode(&q->scan, k, io->dtype, x->data, q->count[i], io->name, q->msg, MSG);
    }
    size_t got = 0, cap = json_is_array(data) ? strings_bytes(data, 0) : 0;
    x->data = malloc(cap + 1);
    if (!x->data) return snprintf(q->msg, MSG, "out of memory for %zu bytes", cap), false;
    if (!json_is_array(data) || !flatten(data, io->dtype, x, cap, &got, 0) || got != q->count[i]) {
        snprintf(q->msg, MSG, "Unable to parse 'data' of input '%s': expected %zu %s values%s", io->name, q->count[i],
                 rs_serve_dtype_v2_name(io->dtype), json_is_array(data) ? "" : " (no \"data\" array nor "
                 "parameters.binary_data_size)");
        return false;
    }
    return true;
}

/* Every input: which one it is, its type and shape, then its data. */
static bool read_inputs(infer_req *q)
{
    const json_t *inputs = json_object_get(q->req, "inputs");
    int given[RS_SERVE_MAX_IO] = {0};
    size_t n = json_array_size(inputs), off = 0;
    if (!json_is_array(inputs)) return snprintf(q->msg, MSG, "the request has no \"inputs\" array"), false;
    int order[RS_SERVE_MAX_IO];
    for (size_t k = 0; k < n; k++) {
        const json_t *e = json_array_get(inputs, k);
        int i = rs_serve_input_index(q->c, json_string_value(json_object_get(e, "name")), q->msg, MSG);
        if (i < 0) return false;
        if (given[i]++ || k >= RS_SERVE_MAX_IO) break; /* rs_serve_check_given says it */
        order[k] = i;
        int64_t shape[RS_SERVE_MAX_DIMS + 1];
        bool ok;
        size_t r = shape_of(json_object_get(e, "shape"), shape, &ok);
        if (!ok) {
            snprintf(q->msg, MSG, "input '%s': \"shape\" must be an array of integers", q->c->inputs[i].name);
            return false;
        }
        if (!rs_serve_check_input(q->c, i, json_string_value(json_object_get(e, "datatype")), shape, r, &q->B,
                                  &q->count[i], q->msg, MSG))
            return false;
    }
    if (!rs_serve_check_given(q->c, given, n, q->msg, MSG)) return false;
    for (size_t k = 0; k < n; k++)
        if (!read_data(q, order[k], json_array_get(inputs, k), &off)) return false;
    return true;
}

/* Which outputs, in which form, and any classification asked for. */
static bool check_outputs(infer_req *q)
{
    bool all_binary = param_bool(q->req, "binary_data_output", false);
    const json_t *outs = json_object_get(q->req, "outputs");
    if (outs && !json_is_array(outs)) return snprintf(q->msg, MSG, "\"outputs\" must be an array"), false;
    for (int k = 0; k < q->c->noutputs; k++) {
        q->want[k] = !outs || !json_array_size(outs);
        q->binary[k] = all_binary;
    }
    size_t i;
    const json_t *o;
    json_array_foreach(outs, i, o) {
        int k = rs_serve_output_index(q->c, json_string_value(json_object_get(o, "name")), q->msg, MSG);
        if (k < 0) return false;
        q->want[k] = true;
        q->binary[k] = param_bool(o, "binary_data", all_binary);
        const json_t *cls = json_object_get(json_object_get(o, "parameters"), "classification");
        if (cls) {
            if (!json_is_integer(cls) || json_integer_value(cls) < 1 || json_integer_value(cls) > 1 << 20)
                return snprintf(q->msg, MSG, "output '%s': classification takes a count >= 1", q->c->outputs[k].name), false;
            q->classes[k] = (int)json_integer_value(cls);
        }
    }
    return true;
}

/* A sequence model's request: Triton's sequence_id, sequence_start and sequence_end parameters, the
 * control inputs filled from them (sequence.h). */
static bool sequence(infer_req *q, rs_serve_sched *s)
{
    if (!q->c->sequence_batching) return true;
    const json_t *id = json_object_get(json_object_get(q->req, "parameters"), "sequence_id");
    rs_serve_seq sq = {.start = param_bool(q->req, "sequence_start", false),
                       .end = param_bool(q->req, "sequence_end", false)};
    if (json_is_integer(id) && json_integer_value(id) != 0) {
        sq.given = true;
        sq.id = (uint64_t)json_integer_value(id);
    } else if (json_is_string(id) && json_string_length(id) > 0) {
        sq.given = sq.is_str = true;
        snprintf(sq.sid, sizeof sq.sid, "%s", json_string_value(id));
    }
    return rs_serve_seq_apply(q->c, s, &sq, q->B, q->x, &q->pin, q->msg, MSG);
}

void rs_serve_infer(rs_serve_model *m, rs_serve_version *v, const char *body, size_t n, long long header_len,
                    rs_serve_reply *r)
{
    uint64_t t0 = rs_serve_now_ns();
    infer_req *q = calloc(1, sizeof *q); /* owned here */
    if (!q) {
        rs_serve_reply_error(r, 500, "out of memory");
        return;
    }
    *q = (infer_req){.c = &m->cfg, .body = body, .n = n, .header_len = header_len, .pin = {.inst = -1}};
    if (parse_json(q) && read_inputs(q) && check_outputs(q) && sequence(q, v->sched)) {
        rs_err err = {0};
        rs_status st = rs_serve_sched_infer_pinned(v->sched, q->x, (int)q->B, q->y, &q->pin, &err); /* counts its own failures */
        /* a value the model refuses (a token outside its vocabulary) is the client's to fix: 400 */
        int code = st == RS_ERR_ARG ? 400 : st == RS_ERR_UNSUPPORTED || st == RS_ERR_CANCELLED ? 503 : 500;
        if (st) rs_serve_reply_error(r, code, "%s", err.msg);
        else rs_serve_infer_reply(m, v, q->req, q->B, q->y, q->want, q->binary, q->classes, r);
    } else {
        rs_serve_reply_error(r, 400, "%s", q->msg);
        rs_serve_sched_count_fail(v->sched, rs_serve_now_ns() - t0);
    }
    json_decref(q->req);
    for (int i = 0; i < RS_SERVE_MAX_IO; i++) {
        free(q->x[i].data);
        free(q->y[i].data);
    }
    free(q);
}
