/* POST .../infer: a KServe v2 request (JSON tensors, or Triton's binary tensor data extension: a JSON
 * header of Inference-Header-Content-Length bytes followed by the raw tensors in input order) in, the
 * response in the same two forms out. Every field is checked before anything runs; what is wrong is
 * said in Triton's {"error": ...} with status 400. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

/* Flattens a (possibly nested) JSON array of numbers into out[*k], up to n values. */
static bool flatten(const json_t *a, float *out, size_t n, size_t *k, int depth)
{
    if (depth > RS_SERVE_MAX_DIMS + 1) return false;
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) {
        if (json_is_array(v)) {
            if (!flatten(v, out, n, k, depth + 1)) return false;
        } else if (json_is_number(v)) {
            if (*k >= n) return false;
            out[(*k)++] = (float)json_number_value(v);
        } else {
            return false;
        }
    }
    return true;
}

static size_t count_leaves(const json_t *a, int depth)
{
    if (depth > RS_SERVE_MAX_DIMS + 1) return (size_t)-1;
    size_t i, n = 0;
    const json_t *v;
    json_array_foreach(a, i, v) {
        if (json_is_array(v)) {
            size_t k = count_leaves(v, depth + 1);
            if (k == (size_t)-1) return k;
            n += k;
        } else n++;
    }
    return n;
}

static bool param_bool(const json_t *obj, const char *key, bool def)
{
    const json_t *p = json_object_get(obj, "parameters");
    const json_t *v = p ? json_object_get(p, key) : NULL;
    return v && json_is_boolean(v) ? json_is_true(v) : def;
}

/* One request as it is read: each step fills its part or says what is wrong in r (and returns false). */
typedef struct infer_req {
    const rs_serve_config *c;
    const rs_serve_io *in, *out;
    const char *body;
    size_t n, jlen;          /* the body's bytes; the JSON header's (all of them without binary data) */
    long long header_len;
    json_t *req;             /* owned: the parsed JSON */
    const json_t *input;     /* borrowed from req: inputs[0] */
    const char *name;        /* its name */
    int64_t B;               /* batch */
    size_t nx, ny;           /* B * per-sample numels */
    bool binary;             /* the output as binary data */
} infer_req;

static bool parse_json(infer_req *q, rs_serve_reply *r)
{
    if (q->header_len >= 0 && (size_t)q->header_len > q->n) {
        rs_serve_reply_error(r, 400, "Inference-Header-Content-Length %lld is larger than the body (%zu bytes)",
                             q->header_len, q->n);
        return false;
    }
    q->jlen = q->header_len >= 0 ? (size_t)q->header_len : q->n;
    json_error_t je;
    q->req = json_loadb(q->body, q->jlen, JSON_REJECT_DUPLICATES, &je);
    if (!q->req || !json_is_object(q->req)) {
        rs_serve_reply_error(r, 400, "failed to parse the request JSON buffer: %s at line %d, column %d",
                             q->req ? "not a JSON object" : je.text, q->req ? 1 : je.line, q->req ? 1 : je.column);
        return false;
    }
    return true;
}

/* The expected shape for messages: [1..max_batch_size or N, dims...]. */
static void expected_shape(const rs_serve_config *c, const rs_serve_io *in, char *want, size_t cap)
{
    int k = snprintf(want, cap, "[%s", c->max_batch_size > 0 ? "1.." : "");
    if (c->max_batch_size > 0) k += snprintf(want + k, cap - (size_t)k, "%d", c->max_batch_size);
    else k += snprintf(want + k, cap - (size_t)k, "N");
    for (int d = 0; d < in->rank && k < (int)cap - 24; d++)
        k += snprintf(want + k, cap - (size_t)k, ",%lld", (long long)in->dims[d]);
    snprintf(want + k, cap - (size_t)k, "]");
}

/* The one input: its name, data type and shape [B, dims...] against the model's. */
static bool check_input(infer_req *q, rs_serve_reply *r)
{
    const rs_serve_config *c = q->c;
    const rs_serve_io *in = q->in;
    const json_t *inputs = json_object_get(q->req, "inputs");
    if (!json_is_array(inputs) || json_array_size(inputs) != 1) {
        rs_serve_reply_error(r, 400, "expected 1 input ('%s') in \"inputs\", got %zu", in->name,
                             json_is_array(inputs) ? json_array_size(inputs) : 0);
        return false;
    }
    q->input = json_array_get(inputs, 0);
    const char *name = q->name = json_string_value(json_object_get(q->input, "name"));
    const char *dt = json_string_value(json_object_get(q->input, "datatype"));
    const json_t *shape = json_object_get(q->input, "shape");
    if (!name || strcmp(name, in->name)) {
        rs_serve_reply_error(r, 400, "unexpected inference input '%s' for model '%s' (its input is '%s')",
                             name ? name : "(none)", c->name, in->name);
        return false;
    }
    if (!dt || rs_serve_dtype_from_v2(dt) != in->dtype) {
        rs_serve_reply_error(r, 400, "inference input '%s' data-type is '%s', but model '%s' expects '%s'", name,
                             dt ? dt : "(none)", c->name, rs_serve_dtype_v2_name(in->dtype));
        return false;
    }
    int rank = json_is_array(shape) ? (int)json_array_size(shape) : -1;
    bool shape_ok = rank == in->rank + 1;
    int64_t B = 0;
    for (int d = 0; shape_ok && d < rank; d++) {
        const json_t *e = json_array_get(shape, (size_t)d);
        if (!json_is_integer(e)) shape_ok = false;
        else if (d == 0) B = json_integer_value(e);
        else if (in->dims[d - 1] != -1 && json_integer_value(e) != in->dims[d - 1]) shape_ok = false;
    }
    /* Without a max_batch_size a request's batch is still bounded, so sizes cannot overflow. */
    if (!shape_ok || B < 1 || (c->max_batch_size > 0 && B > c->max_batch_size) || B > (1 << 20)) {
        char want[128];
        expected_shape(c, in, want, sizeof want);
        char *got = shape ? json_dumps(shape, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        rs_serve_reply_error(r, 400, "unexpected shape for input '%s' for model '%s'. Expected %s, got %s", name,
                             c->name, want, got ? got : "(none)");
        free(got);
        return false;
    }
    size_t per_in = 1, per_out = 1;
    for (int d = 0; d < in->rank; d++) per_in *= (size_t)in->dims[d];
    for (int d = 0; d < q->out->rank; d++) per_out *= (size_t)q->out->dims[d];
    q->B = B;
    q->nx = (size_t)B * per_in;
    q->ny = (size_t)B * per_out;
    return true;
}

/* The input's values into x (nx floats): binary data after the JSON header, or "data". */
static bool read_input(const infer_req *q, float *x, rs_serve_reply *r)
{
    const char *name = q->name;
    const json_t *params = json_object_get(q->input, "parameters");
    const json_t *bsize = params ? json_object_get(params, "binary_data_size") : NULL;
    const json_t *data = json_object_get(q->input, "data");
    if (bsize) {
        if (!json_is_integer(bsize) || json_integer_value(bsize) < 0 || q->header_len < 0) {
            rs_serve_reply_error(r, 400, "input '%s': binary_data_size needs the Inference-Header-Content-Length "
                                 "header and a non-negative integer", name);
            return false;
        }
        size_t bs = (size_t)json_integer_value(bsize);
        if (bs != q->nx * sizeof(float) || q->jlen + bs > q->n) {
            rs_serve_reply_error(r, 400, "input '%s': binary_data_size %zu, but shape needs %zu bytes and the body "
                                 "holds %zu after the header", name, bs, q->nx * sizeof(float), q->n - q->jlen);
            return false;
        }
        memcpy(x, q->body + q->jlen, bs);
    } else if (json_is_array(data)) {
        size_t leaves = count_leaves(data, 0), k = 0;
        if (leaves != q->nx || !flatten(data, x, q->nx, &k, 0) || k != q->nx) {
            rs_serve_reply_error(r, 400, "input '%s': expected %zu numbers in \"data\" for shape [%lld, ...], got %s",
                                 name, q->nx, (long long)q->B,
                                 leaves == (size_t)-1 ? "arrays nested too deep" : "another count or non-numbers");
            return false;
        }
    } else {
        rs_serve_reply_error(r, 400, "input '%s' has neither \"data\" nor parameters.binary_data_size", name);
        return false;
    }
    return true;
}

/* Which outputs, and in which form (q->binary). */
static bool check_outputs(infer_req *q, rs_serve_reply *r)
{
    q->binary = param_bool(q->req, "binary_data_output", false);
    const json_t *outs = json_object_get(q->req, "outputs");
    if (outs && !json_is_array(outs)) {
        rs_serve_reply_error(r, 400, "\"outputs\" must be an array");
        return false;
    }
    size_t i;
    const json_t *o;
    json_array_foreach(outs, i, o) {
        const char *on = json_string_value(json_object_get(o, "name"));
        if (!on || strcmp(on, q->out->name)) {
            rs_serve_reply_error(r, 400, "unexpected inference output '%s' for model '%s' (its output is '%s')",
                                 on ? on : "(none)", q->c->name, q->out->name);
            return false;
        }
        if (json_object_get(json_object_get(o, "parameters"), "classification")) {
            rs_serve_reply_error(r, 400, "output '%s': the classification extension is not supported", on);
            return false;
        }
        q->binary = param_bool(o, "binary_data", q->binary);
    }
    return true;
}

/* The response: JSON with the output's "data", or a JSON header followed by y's raw bytes. */
static void reply(const infer_req *q, int64_t version, const float *y, rs_serve_reply *r)
{
    const rs_serve_io *out = q->out;
    char ver[32];
    snprintf(ver, sizeof ver, "%lld", (long long)version);
    json_t *oshape = json_array();
    json_array_append_new(oshape, json_integer(q->B));
    for (int d = 0; d < out->rank; d++) json_array_append_new(oshape, json_integer(out->dims[d]));
    json_t *jo = json_pack("{s:s,s:s,s:o}", "name", out->name, "datatype", rs_serve_dtype_v2_name(out->dtype),
                           "shape", oshape);
    if (q->binary) {
        json_object_set_new(jo, "parameters", json_pack("{s:I}", "binary_data_size", (json_int_t)(q->ny * sizeof *y)));
    } else {
        json_t *a = json_array();
        for (size_t i = 0; i < q->ny; i++) json_array_append_new(a, json_real(isfinite(y[i]) ? (double)y[i] : 0.0));
        json_object_set_new(jo, "data", a);
    }
    json_t *resp = json_pack("{s:s,s:s,s:[o]}", "model_name", q->c->name, "model_version", ver, "outputs", jo);
    const json_t *id = json_object_get(q->req, "id");
    if (json_is_string(id)) json_object_set(resp, "id", (json_t *)id);
    if (!q->binary) {
        rs_serve_reply_json(r, 200, resp);
        return;
    }
    char *hdr = json_dumps(resp, JSON_COMPACT);
    json_decref(resp);
    size_t hl = hdr ? strlen(hdr) : 0, bl = q->ny * sizeof *y;
    char *b = hdr ? malloc(hl + bl) : NULL; /* the reply's */
    if (!b) {
        free(hdr);
        rs_serve_reply_error(r, 500, "out of memory");
        return;
    }
    memcpy(b, hdr, hl);
    memcpy(b + hl, y, bl);
    free(hdr);
    r->status = 200;
    r->body = b;
    r->len = hl + bl;
    r->type = "application/octet-stream";
    r->header_len = (long long)hl;
}

void rs_serve_infer(rs_serve_model *m, rs_serve_version *v, const char *body, size_t n, long long header_len,
                    rs_serve_reply *r)
{
    uint64_t t0 = rs_serve_now_ns();
    infer_req q = {.c = &m->cfg, .in = &m->cfg.inputs[0], .out = &m->cfg.outputs[0], .body = body, .n = n,
                   .header_len = header_len};
    float *x = NULL, *y = NULL; /* owned here */
    bool ok = parse_json(&q, r) && check_input(&q, r);
    if (ok) {
        x = malloc(q.nx * sizeof *x);
        y = malloc(q.ny * sizeof *y);
        if (!x || !y) rs_serve_reply_error(r, 500, "out of memory for %zu input values", q.nx);
        ok = x && y && read_input(&q, x, r) && check_outputs(&q, r);
    }
    if (ok) {
        rs_err err = {0};
        rs_status st = rs_serve_sched_infer(v->sched, x, (int)q.B, y, &err); /* counts its own failures */
        if (st) rs_serve_reply_error(r, st == RS_ERR_UNSUPPORTED || st == RS_ERR_CANCELLED ? 503 : 500, "%s", err.msg);
        else reply(&q, v->version, y, r);
    } else {
        rs_serve_sched_count_fail(v->sched, rs_serve_now_ns() - t0);
    }
    json_decref(q.req);
    free(x);
    free(y);
}
