/* The JSON documents of KServe v2 and Triton's extensions: model metadata, model config (Triton's
 * ModelConfig as JSON) and statistics (the shape tritonclient's get_inference_statistics parses). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"
#include "infer_check.h"

/* Takes j (NULL: out of memory); leaves r->body NULL when it cannot be written. */
static void put_json(rs_serve_reply *r, int status, json_t *j)
{
    r->status = status;
    r->body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    r->len = r->body ? strlen(r->body) : 0;
    r->type = "application/json";
    r->header_len = -1;
    json_decref(j);
}

void rs_serve_reply_json(rs_serve_reply *r, int status, json_t *j)
{
    put_json(r, status, j);
    if (!r->body) rs_serve_reply_error(r, 500, "out of memory");
}

void rs_serve_reply_error(rs_serve_reply *r, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    free(r->body);
    json_t *j = json_pack("{s:s}", "error", msg);
    if (!j) { /* a quoted piece of the request that is not UTF-8 (or was cut inside a character) */
        for (char *p = msg; *p; p++)
            if ((unsigned char)*p >= 0x80) *p = '?';
        j = json_pack("{s:s}", "error", msg);
    }
    put_json(r, status, j);
}

static json_t *shape_json(const int64_t *dims, size_t rank)
{
    json_t *a = json_array();
    for (size_t d = 0; d < rank; d++) json_array_append_new(a, json_integer(dims[d]));
    return a;
}

/* A tensor's entry in model metadata: its shape is the one a request gives (infer_check.h), as gRPC's */
static json_t *tensor_meta_json(const rs_serve_config *c, const rs_serve_io *io)
{
    int64_t shape[RS_SERVE_MAX_DIMS + 1];
    size_t rank = rs_serve_request_shape(c, io, shape);
    return json_pack("{s:s,s:s,s:o}", "name", io->name, "datatype", rs_serve_dtype_v2_name(io->dtype), "shape",
                     shape_json(shape, rank));
}

json_t *rs_serve_json_model_metadata(const rs_serve_model *m)
{
    const rs_serve_config *c = &m->cfg;
    json_t *vers = json_array(), *ins = json_array(), *outs = json_array();
    char b[32];
    for (int i = 0; i < m->nversions; i++) {
        snprintf(b, sizeof b, "%lld", (long long)m->v[i].version);
        json_array_append_new(vers, json_string(b));
    }
    for (int i = 0; i < c->ninputs; i++)
        if (!c->inputs[i].control) /* the server fills those; Triton does not list them */
            json_array_append_new(ins, tensor_meta_json(c, &c->inputs[i]));
    for (int i = 0; i < c->noutputs; i++) json_array_append_new(outs, tensor_meta_json(c, &c->outputs[i]));
    return json_pack("{s:s,s:o,s:s,s:o,s:o}", "name", c->name, "versions", vers, "platform",
                     c->platform[0] ? c->platform : c->backend, "inputs", ins, "outputs", outs);
}

static json_t *io_cfg_json(const rs_serve_io *io)
{
    json_t *j = json_pack("{s:s,s:s,s:o}", "name", io->name, "data_type", rs_serve_dtype_config_name(io->dtype),
                          "dims", shape_json(io->dims, (size_t)io->rank));
    if (io->has_reshape) {
        json_t *r = json_array();
        for (int d = 0; d < io->reshape_rank; d++) json_array_append_new(r, json_integer(io->reshape[d]));
        json_object_set_new(j, "reshape", json_pack("{s:o}", "shape", r));
    }
    if (io->optional) json_object_set_new(j, "optional", json_true());
    if (io->labels[0]) {
        const char *base = strrchr(io->labels, '/');
        json_object_set_new(j, "label_filename", json_string(base ? base + 1 : io->labels));
    }
    return j;
}

/* ensemble_scheduling as Triton's JSON ModelConfig writes it (input_map and output_map as objects) */
static json_t *ensemble_json(const rs_serve_config *c)
{
    json_t *steps = json_array();
    for (int k = 0; k < c->nsteps; k++) {
        const rs_serve_step *st = &c->steps[k];
        json_t *in = json_object(), *out = json_object();
        for (int i = 0; i < st->nin; i++) json_object_set_new(in, st->in[i].key, json_string(st->in[i].value));
        for (int i = 0; i < st->nout; i++) json_object_set_new(out, st->out[i].key, json_string(st->out[i].value));
        json_array_append_new(steps, json_pack("{s:s,s:I,s:o,s:o}", "model_name", st->model, "model_version",
                                               (json_int_t)st->version, "input_map", in, "output_map", out));
    }
    return json_pack("{s:o}", "step", steps);
}

static json_t *sequence_json(const rs_serve_config *c)
{
    static const char *const kinds[] = {"", "CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY",
                                        "CONTROL_SEQUENCE_CORRID"};
    json_t *ctl = json_array();
    for (int i = 0; i < c->ninputs; i++) {
        const rs_serve_io *io = &c->inputs[i];
        if (!io->control) continue;
        json_t *k = json_pack("{s:s}", "kind", kinds[io->control]);
        if (io->control == RS_SERVE_CTL_CORRID)
            json_object_set_new(k, "data_type", json_string(rs_serve_dtype_config_name(io->dtype)));
        else if (io->dtype == RS_SERVE_FP32)
            json_object_set_new(k, "fp32_false_true", json_pack("[f,f]", io->false_true[0], io->false_true[1]));
        else if (io->dtype == RS_SERVE_BOOL)
            json_object_set_new(k, "bool_false_true", json_pack("[b,b]", io->false_true[0] != 0, io->false_true[1] != 0));
        else
            json_object_set_new(k, "int32_false_true", json_pack("[I,I]", (json_int_t)io->false_true[0],
                                                                 (json_int_t)io->false_true[1]));
        json_array_append_new(ctl, json_pack("{s:s,s:[o]}", "name", io->name, "control", k));
    }
    return json_pack("{s:{},s:I,s:o}", "direct", "max_sequence_idle_microseconds",
                     (json_int_t)(c->max_sequence_idle_us ? c->max_sequence_idle_us : 1000000), "control_input", ctl);
}

json_t *rs_serve_json_model_config(const rs_serve_model *m)
{
    const rs_serve_config *c = &m->cfg;
    json_t *ins = json_array(), *outs = json_array();
    for (int i = 0; i < c->ninputs; i++)
        if (!c->inputs[i].control) json_array_append_new(ins, io_cfg_json(&c->inputs[i]));
    for (int i = 0; i < c->noutputs; i++) json_array_append_new(outs, io_cfg_json(&c->outputs[i]));
    const char *backend = c->backend[0] ? c->backend : c->ensemble ? "" : "onnxruntime";
    char gname[RS_SERVE_NAME_MAX + 8];
    snprintf(gname, sizeof gname, "%s_0", c->name);
    json_t *j = json_pack("{s:s,s:s,s:s,s:i,s:o,s:o,s:[{s:s,s:s,s:i}],s:{s:b}}", "name", c->name, "platform",
                          c->platform, "backend", backend, "max_batch_size",
                          c->max_batch_size, "input", ins, "output", outs, "instance_group", "name", gname, "kind",
                          c->instance_kind[0] ? c->instance_kind : "KIND_CPU", "count", c->instance_count,
                          "model_transaction_policy", "decoupled", c->decoupled);
    if (c->dynamic_batching) {
        json_t *pref = json_array();
        for (int i = 0; i < c->npreferred; i++) json_array_append_new(pref, json_integer(c->preferred[i]));
        json_t *db = json_pack("{s:o,s:I}", "preferred_batch_size", pref, "max_queue_delay_microseconds",
                               (json_int_t)c->max_queue_delay_us);
        if (c->max_queue_size)
            json_object_set_new(db, "default_queue_policy",
                                json_pack("{s:I}", "max_queue_size", (json_int_t)c->max_queue_size));
        json_object_set_new(j, "dynamic_batching", db);
    }
    json_t *vp;
    if (c->vpolicy == RS_SERVE_VP_ALL) vp = json_pack("{s:{}}", "all");
    else if (c->vpolicy == RS_SERVE_VP_SPECIFIC) {
        json_t *v = json_array();
        for (int i = 0; i < c->nversions; i++) json_array_append_new(v, json_integer(c->versions[i]));
        vp = json_pack("{s:{s:o}}", "specific", "versions", v);
    } else vp = json_pack("{s:{s:i}}", "latest", "num_versions", c->latest_n);
    json_object_set_new(j, "version_policy", vp);
    if (c->default_model_filename[0])
        json_object_set_new(j, "default_model_filename", json_string(c->default_model_filename));
    if (c->ensemble) json_object_set_new(j, "ensemble_scheduling", ensemble_json(c));
    if (c->sequence_batching) json_object_set_new(j, "sequence_batching", sequence_json(c));
    /* what the config stated that did not run: said here, never echoed as if it had */
    if (rs_serve_config_ignored(c)[0])
        json_object_set_new(j, "parameters", json_pack("{s:{s:s}}", "ringside_ignored", "string_value",
                                                       rs_serve_config_ignored(c)));
    return j;
}

static json_t *dur(const rs_serve_stat *s)
{
    return json_pack("{s:I,s:I}", "count", (json_int_t)s->count, "ns", (json_int_t)s->ns);
}

json_t *rs_serve_json_stats(const rs_serve_model *m, const rs_serve_version *v, const rs_serve_stats *st)
{
    rs_serve_stat zero = {0, 0};
    json_t *batches = json_array();
    for (int b = 1; b <= st->max_batch && st->batch_infer; b++) {
        if (!st->batch_infer[b].count) continue;
        json_array_append_new(batches, json_pack("{s:i,s:o,s:o,s:o}", "batch_size", b, "compute_input",
                                                 dur(&st->batch_input[b]), "compute_infer", dur(&st->batch_infer[b]),
                                                 "compute_output", dur(&st->batch_output[b])));
    }
    char ver[32];
    snprintf(ver, sizeof ver, "%lld", (long long)v->version);
    json_t *inf = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "success", dur(&st->success), "fail",
                            dur(&st->fail), "queue", dur(&st->queue), "compute_input", dur(&st->compute_input),
                            "compute_infer", dur(&st->compute_infer), "compute_output", dur(&st->compute_output),
                            "cache_hit", dur(&zero), "cache_miss", dur(&zero));
    return json_pack("{s:s,s:s,s:I,s:I,s:I,s:o,s:o}", "name", m->cfg.name, "version", ver, "last_inference",
                     (json_int_t)st->last_inference_ms, "inference_count", (json_int_t)st->inference_count,
                     "execution_count", (json_int_t)st->execution_count, "inference_stats", inf, "batch_stats",
                     batches);
}
