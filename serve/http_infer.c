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

void rs_serve_infer(rs_serve_model *m, rs_serve_version *v, const char *body, size_t n, long long header_len,
                    rs_serve_reply *r)
{
    const rs_serve_config *c = &m->cfg;
    const rs_serve_io *in = &c->inputs[0], *out = &c->outputs[0];
    uint64_t t0 = rs_serve_now_ns();
    float *x = NULL, *y = NULL;
    json_t *req = NULL, *resp = NULL;
    if (header_len >= 0 && (size_t)header_len > n) {
        rs_serve_reply_error(r, 400, "Inference-Header-Content-Length %lld is larger than the body (%zu bytes)",
                             header_len, n);
        goto fail;
    }
    size_t jlen = header_len >= 0 ? (size_t)header_len : n;
    json_error_t je;
    req = json_loadb(body, jlen, JSON_REJECT_DUPLICATES, &je);
    if (!req || !json_is_object(req)) {
        rs_serve_reply_error(r, 400, "failed to parse the request JSON buffer: %s at line %d, column %d",
                             req ? "not a JSON object" : je.text, req ? 1 : je.line, req ? 1 : je.column);
        goto fail;
    }
    const json_t *inputs = json_object_get(req, "inputs");
    if (!json_is_array(inputs) || json_array_size(inputs) != 1) {
        rs_serve_reply_error(r, 400, "expected 1 input ('%s') in \"inputs\", got %zu", in->name,
                             json_is_array(inputs) ? json_array_size(inputs) : 0);
        goto fail;
    }
    const json_t *ji = json_array_get(inputs, 0);
    const char *name = json_string_value(json_object_get(ji, "name"));
    const char *dt = json_string_value(json_object_get(ji, "datatype"));
    const json_t *shape = json_object_get(ji, "shape");
    if (!name || strcmp(name, in->name)) {
        rs_serve_reply_error(r, 400, "unexpected inference input '%s' for model '%s' (its input is '%s')",
                             name ? name : "(none)", c->name, in->name);
        goto fail;
    }
    if (!dt || rs_serve_dtype_from_v2(dt) != in->dtype) {
        rs_serve_reply_error(r, 400, "inference input '%s' data-type is '%s', but model '%s' expects '%s'", name,
                             dt ? dt : "(none)", c->name, rs_serve_dtype_v2_name(in->dtype));
        goto fail;
    }
    /* shape: [B, dims...] */
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
        int k = snprintf(want, sizeof want, "[%s", c->max_batch_size > 0 ? "1.." : "");
        if (c->max_batch_size > 0) k += snprintf(want + k, sizeof want - (size_t)k, "%d", c->max_batch_size);
        else k += snprintf(want + k, sizeof want - (size_t)k, "N");
        for (int d = 0; d < in->rank && k < (int)sizeof want - 24; d++)
            k += snprintf(want + k, sizeof want - (size_t)k, ",%lld", (long long)in->dims[d]);
        snprintf(want + k, sizeof want - (size_t)k, "]");
        char *got = shape ? json_dumps(shape, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        rs_serve_reply_error(r, 400, "unexpected shape for input '%s' for model '%s'. Expected %s, got %s", name,
                             c->name, want, got ? got : "(none)");
        free(got);
        goto fail;
    }
    size_t per_in = 1, per_out = 1;
    for (int d = 0; d < in->rank; d++) per_in *= (size_t)in->dims[d];
    for (int d = 0; d < out->rank; d++) per_out *= (size_t)out->dims[d];
    size_t nx = (size_t)B * per_in, ny = (size_t)B * per_out;
    x = malloc(nx * sizeof *x); /* owned here */
    y = malloc(ny * sizeof *y);
    if (!x || !y) {
        rs_serve_reply_error(r, 500, "out of memory for %zu input values", nx);
        goto fail;
    }
    const json_t *params = json_object_get(ji, "parameters");
    const json_t *bsize = params ? json_object_get(params, "binary_data_size") : NULL;
    const json_t *data = json_object_get(ji, "data");
    if (bsize) {
        if (!json_is_integer(bsize) || json_integer_value(bsize) < 0 || header_len < 0) {
            rs_serve_reply_error(r, 400, "input '%s': binary_data_size needs the Inference-Header-Content-Length "
                                 "header and a non-negative integer", name);
            goto fail;
        }
        size_t bs = (size_t)json_integer_value(bsize);
        if (bs != nx * sizeof(float) || jlen + bs > n) {
            rs_serve_reply_error(r, 400, "input '%s': binary_data_size %zu, but shape needs %zu bytes and the body "
                                 "holds %zu after the header", name, bs, nx * sizeof(float), n - jlen);
            goto fail;
        }
        memcpy(x, body + jlen, bs);
    } else if (json_is_array(data)) {
        size_t leaves = count_leaves(data, 0), k = 0;
        if (leaves != nx || !flatten(data, x, nx, &k, 0) || k != nx) {
            rs_serve_reply_error(r, 400, "input '%s': expected %zu numbers in \"data\" for shape [%lld, ...], got %s",
                                 name, nx, (long long)B, leaves == (size_t)-1 ? "arrays nested too deep" : "another count or non-numbers");
            goto fail;
        }
    } else {
        rs_serve_reply_error(r, 400, "input '%s' has neither \"data\" nor parameters.binary_data_size", name);
        goto fail;
    }

    /* Which outputs, and in which form. */
    bool binary = param_bool(req, "binary_data_output", false);
    const json_t *outs = json_object_get(req, "outputs");
    if (outs && !json_is_array(outs)) {
        rs_serve_reply_error(r, 400, "\"outputs\" must be an array");
        goto fail;
    }
    if (outs && json_array_size(outs) > 0) {
        size_t i;
        const json_t *o;
        json_array_foreach(outs, i, o) {
            const char *on = json_string_value(json_object_get(o, "name"));
            if (!on || strcmp(on, out->name)) {
                rs_serve_reply_error(r, 400, "unexpected inference output '%s' for model '%s' (its output is '%s')",
                                     on ? on : "(none)", c->name, out->name);
                goto fail;
            }
            if (json_object_get(json_object_get(o, "parameters"), "classification")) {
                rs_serve_reply_error(r, 400, "output '%s': the classification extension is not supported", on);
                goto fail;
            }
            binary = param_bool(o, "binary_data", binary);
        }
    }

    rs_err err = {0};
    rs_status st = rs_serve_sched_infer(v->sched, x, (int)B, y, &err);
    if (st) {
        rs_serve_reply_error(r, st == RS_ERR_UNSUPPORTED || st == RS_ERR_CANCELLED ? 503 : 500, "%s", err.msg);
        goto done; /* the scheduler counted it */
    }
    char ver[32];
    snprintf(ver, sizeof ver, "%lld", (long long)v->version);
    json_t *oshape = json_array();
    json_array_append_new(oshape, json_integer(B));
    for (int d = 0; d < out->rank; d++) json_array_append_new(oshape, json_integer(out->dims[d]));
    json_t *jo = json_pack("{s:s,s:s,s:o}", "name", out->name, "datatype", rs_serve_dtype_v2_name(out->dtype),
                           "shape", oshape);
    if (binary) {
        json_object_set_new(jo, "parameters", json_pack("{s:I}", "binary_data_size", (json_int_t)(ny * sizeof *y)));
    } else {
        json_t *a = json_array();
        for (size_t i = 0; i < ny; i++) json_array_append_new(a, json_real(isfinite(y[i]) ? (double)y[i] : 0.0));
        json_object_set_new(jo, "data", a);
    }
    resp = json_pack("{s:s,s:s,s:[o]}", "model_name", c->name, "model_version", ver, "outputs", jo);
    const json_t *id = json_object_get(req, "id");
    if (json_is_string(id)) json_object_set(resp, "id", (json_t *)id);
    if (!binary) {
        rs_serve_reply_json(r, 200, resp);
        resp = NULL;
        goto done;
    }
    char *hdr = json_dumps(resp, JSON_COMPACT);
    size_t hl = hdr ? strlen(hdr) : 0, bl = ny * sizeof *y;
    char *b = hdr ? malloc(hl + bl) : NULL; /* the reply's */
    if (!b) {
        free(hdr);
        rs_serve_reply_error(r, 500, "out of memory");
        goto done;
    }
    memcpy(b, hdr, hl);
    memcpy(b + hl, y, bl);
    free(hdr);
    r->status = 200;
    r->body = b;
    r->len = hl + bl;
    r->type = "application/octet-stream";
    r->header_len = (long long)hl;
    goto done;
fail:
    rs_serve_sched_count_fail(v->sched, rs_serve_now_ns() - t0);
done:
    json_decref(req);
    json_decref(resp);
    free(x);
    free(y);
}
