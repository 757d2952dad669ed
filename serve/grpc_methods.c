/* The methods of inference.GRPCInferenceService: a request message (protobuf) in, response messages
 * out through a sink, over the same server calls the HTTP front end makes (acquire, version, the
 * scheduler, the index). Nothing here knows about sockets or HTTP/2, so a test or the fuzzer can call
 * rs_grpc_call with bytes alone. Errors carry Triton's gRPC codes and wording: an unknown model is
 * UNAVAILABLE, what the client can fix INVALID_ARGUMENT, a decoupled model asked for one answer
 * UNIMPLEMENTED. This file has the dispatch, the helpers and the model-control methods; ModelInfer
 * and ModelStreamInfer are in grpc_infer.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_internal.h"
#include "grpc_json.h"
#include "http_internal.h"
#include "infer_check.h"
#include "grpc_prescan.h"
#include "repo.h"

static const char *const method_names[RS_GRPC_NMETHODS] = {
    "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer", "ModelStreamInfer",
    "ModelConfig", "ModelStatistics", "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload"};

rs_grpc_method rs_grpc_method_of(const char *path)
{
    static const char prefix[] = "/inference.GRPCInferenceService/";
    if (strncmp(path, prefix, sizeof prefix - 1)) return RS_GRPC_NONE;
    for (int i = 0; i < RS_GRPC_NMETHODS; i++)
        if (!strcmp(path + sizeof prefix - 1, method_names[i])) return (rs_grpc_method)i;
    return RS_GRPC_NONE;
}

rs_grpc_code rs_grpc_fail(char *msg, size_t n, rs_grpc_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return code;
}

/* Packs m and hands it to the sink. */
rs_grpc_code rs_grpc_emit(const rs_grpc_sink *o, const ProtobufCMessage *m, char *msg, size_t n)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t stackbuf[512];
    uint8_t *b = len <= sizeof stackbuf ? stackbuf : malloc(len); /* owned here when malloc'd */
    if (!b) return rs_grpc_fail(msg, n, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory for a %zu-byte response", len);
    protobuf_c_message_pack(m, b);
    o->emit(o->ud, b, len);
    if (b != stackbuf) free(b);
    return RS_GRPC_OK;
}

char *rs_grpc_str(const char *s) { return (char *)(s ? s : ""); }

/* The model NAME held (release it), or a failure in msg. */
rs_serve_model *rs_grpc_model_of(rs_serve_server *s, const char *name, const char *version, rs_serve_version **v,
                                rs_grpc_code *code, char *msg, size_t n)
{
    *v = NULL;
    if (!rs_serve_name_ok(name)) {
        *code = rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "'%.60s' is not a model name (letters, digits, '_', '-', "
                     "'.'; not starting with '.')", name);
        return NULL;
    }
    rs_serve_model *m = rs_serve_acquire(s, name);
    if (m) *v = rs_serve_model_version(m, version);
    if (!*v) {
        if (m && version && *version)
            *code = rs_grpc_fail(msg, n, RS_GRPC_UNAVAILABLE, "Request for unknown model: '%s' version %.30s is not found", name,
                         version);
        else *code = rs_grpc_fail(msg, n, RS_GRPC_UNAVAILABLE, "Request for unknown model: '%s' is not found", name);
        rs_serve_release(s, m);
        return NULL;
    }
    return m;
}

/* ---- metadata, config, statistics, repository ---- */

static rs_grpc_code server_metadata(const rs_grpc_sink *o, char *msg, size_t n)
{
    static char *ext[] = {"binary_tensor_data", "model_repository", "model_configuration", "statistics", "generate"};
    Inference__ServerMetadataResponse r = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
    r.name = "ringside";
    r.version = RS_SERVE_VERSION;
    r.n_extensions = sizeof ext / sizeof *ext;
    r.extensions = ext;
    return rs_grpc_emit(o, &r.base, msg, n);
}

/* A tensor's entry in model metadata: its shape is the one a request gives (infer_check.h), as HTTP's */
static void tensor_meta(Inference__ModelMetadataResponse__TensorMetadata *t, int64_t *shape, const rs_serve_config *c,
                        const rs_serve_io *io)
{
    inference__model_metadata_response__tensor_metadata__init(t);
    t->name = (char *)io->name;
    t->datatype = (char *)rs_serve_dtype_v2_name(io->dtype);
    t->n_shape = rs_serve_request_shape(c, io, shape);
    t->shape = shape;
}

static rs_grpc_code model_metadata(rs_serve_model *m, const rs_grpc_sink *o, char *msg, size_t n)
{
    const rs_serve_config *c = &m->cfg;
    Inference__ModelMetadataResponse r = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
    char vers[RS_SERVE_MAX_VERSIONS][24];
    char *vp[RS_SERVE_MAX_VERSIONS];
    for (int i = 0; i < m->nversions; i++) {
        snprintf(vers[i], sizeof vers[i], "%lld", (long long)m->v[i].version);
        vp[i] = vers[i];
    }
    Inference__ModelMetadataResponse__TensorMetadata ti[RS_SERVE_MAX_IO], to[RS_SERVE_MAX_IO];
    Inference__ModelMetadataResponse__TensorMetadata *pi[RS_SERVE_MAX_IO], *po[RS_SERVE_MAX_IO];
    int64_t si[RS_SERVE_MAX_IO][RS_SERVE_MAX_DIMS + 1], so[RS_SERVE_MAX_IO][RS_SERVE_MAX_DIMS + 1];
    int ni = 0; /* a sequence batcher's control inputs are the server's to fill: not listed, as in Triton */
    for (int i = 0; i < c->ninputs; i++)
        if (!c->inputs[i].control) tensor_meta(pi[ni] = &ti[ni], si[ni], c, &c->inputs[i]), ni++;
    for (int i = 0; i < c->noutputs; i++) tensor_meta(po[i] = &to[i], so[i], c, &c->outputs[i]);
    r.name = (char *)c->name;
    r.n_versions = (size_t)m->nversions;
    r.versions = vp;
    r.platform = (char *)(c->platform[0] ? c->platform : c->backend);
    r.n_inputs = (size_t)ni;
    r.inputs = pi;
    r.n_outputs = (size_t)c->noutputs;
    r.outputs = po;
    return rs_grpc_emit(o, &r.base, msg, n);
}

/* The config as the HTTP front end states it (rs_serve_json_model_config), converted: one source. */
static rs_grpc_code model_config(rs_serve_model *m, const rs_grpc_sink *o, char *msg, size_t n)
{
    json_t *j = rs_serve_json_model_config(m); /* owned here */
    if (!j) return rs_grpc_fail(msg, n, RS_GRPC_INTERNAL, "out of memory");
    char why[256];
    ProtobufCMessage *mc = rs_grpc_from_json(j, &inference__model_config__descriptor, why, sizeof why); /* owned here */
    json_decref(j);
    if (!mc) return rs_grpc_fail(msg, n, RS_GRPC_INTERNAL, "the config of model '%s' as a ModelConfig: %s", m->cfg.name, why);
    Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
    r.config = (Inference__ModelConfig *)mc;
    rs_grpc_code code = rs_grpc_emit(o, &r.base, msg, n);
    protobuf_c_message_free_unpacked(mc, NULL);
    return code;
}

/* ModelStatistics: the rows are built while rs_serve_each holds each model, then packed at once. */
typedef struct stat_row {
    Inference__ModelStatistics ms;
    Inference__InferStatistics is;
    Inference__StatisticDuration d[8];
    char name[RS_SERVE_NAME_MAX], ver[24];
    Inference__InferBatchStatistics *bs;      /* owned */
    Inference__InferBatchStatistics **pbs;    /* owned */
    Inference__StatisticDuration *bd;         /* owned: 3 per batch row */
} stat_row;

typedef struct stat_ctx {
    const char *name, *ver;
    stat_row *rows;   /* owned */
    int n, cap;
    bool oom;
} stat_ctx;

static void dur(Inference__StatisticDuration *d, const rs_serve_stat *s)
{
    inference__statistic_duration__init(d);
    d->count = s ? s->count : 0;
    d->ns = s ? s->ns : 0;
}

static void stat_one(void *ud, const rs_serve_model *m, const rs_serve_version *v, const rs_serve_stats *st)
{
    stat_ctx *x = ud;
    char ver[24];
    snprintf(ver, sizeof ver, "%lld", (long long)v->version);
    if ((x->name && strcmp(x->name, m->cfg.name)) || (x->ver && *x->ver && strcmp(x->ver, ver))) return;
    if (x->n == x->cap) {
        int cap = x->cap ? 2 * x->cap : 8; /* x->cap grows only with the array */
        stat_row *nr = realloc(x->rows, (size_t)cap * sizeof *nr);
        if (!nr) {
            x->oom = true;
            return;
        }
        x->rows = nr;
        x->cap = cap;
    }
    stat_row *r = &x->rows[x->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", m->cfg.name);
    snprintf(r->ver, sizeof r->ver, "%s", ver);
    inference__model_statistics__init(&r->ms);
    inference__infer_statistics__init(&r->is);
    const rs_serve_stat *src[8] = {&st->success, &st->fail, &st->queue, &st->compute_input, &st->compute_infer,
                                   &st->compute_output, NULL, NULL};
    for (int i = 0; i < 8; i++) dur(&r->d[i], src[i]);
    r->is.success = &r->d[0];
    r->is.fail = &r->d[1];
    r->is.queue = &r->d[2];
    r->is.compute_input = &r->d[3];
    r->is.compute_infer = &r->d[4];
    r->is.compute_output = &r->d[5];
    r->is.cache_hit = &r->d[6];
    r->is.cache_miss = &r->d[7];
    r->ms.last_inference = st->last_inference_ms;
    r->ms.inference_count = st->inference_count;
    r->ms.execution_count = st->execution_count;
    r->ms.inference_stats = &r->is;
    int nb = 0;
    for (int b = 1; b <= st->max_batch && st->batch_infer; b++) nb += st->batch_infer[b].count > 0;
    if (nb) {
        r->bs = calloc((size_t)nb, sizeof *r->bs);
        r->pbs = calloc((size_t)nb, sizeof *r->pbs);
        r->bd = calloc((size_t)nb * 3, sizeof *r->bd);
        if (!r->bs || !r->pbs || !r->bd) {
            x->oom = true;
            nb = 0;
        }
    }
    for (int b = 1, k = 0; k < nb && b <= st->max_batch; b++) {
        if (!st->batch_infer[b].count) continue;
        Inference__InferBatchStatistics *e = &r->bs[k];
        inference__infer_batch_statistics__init(e);
        e->batch_size = (uint64_t)b;
        dur(&r->bd[3 * k], &st->batch_input[b]);
        dur(&r->bd[3 * k + 1], &st->batch_infer[b]);
        dur(&r->bd[3 * k + 2], &st->batch_output[b]);
        e->compute_input = &r->bd[3 * k];
        e->compute_infer = &r->bd[3 * k + 1];
        e->compute_output = &r->bd[3 * k + 2];
        r->pbs[k++] = e;
    }
    r->ms.n_batch_stats = (size_t)nb;
    r->ms.batch_stats = r->pbs;
}

static rs_grpc_code statistics(rs_serve_server *s, const Inference__ModelStatisticsRequest *q, const rs_grpc_sink *o,
                               char *msg, size_t n)
{
    const char *name = q->name && *q->name ? q->name : NULL;
    if (name) {
        rs_serve_version *v;
        rs_grpc_code code;
        rs_serve_model *m = rs_grpc_model_of(s, name, q->version, &v, &code, msg, n);
        if (!m) return code == RS_GRPC_UNAVAILABLE ? rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "requested model '%s' "
                                                          "is not available", name) : code;
        rs_serve_release(s, m);
    }
    stat_ctx x = {.name = name, .ver = q->version};
    rs_serve_each(s, stat_one, &x);
    Inference__ModelStatisticsResponse r = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
    Inference__ModelStatistics **p = calloc((size_t)x.n + 1, sizeof *p); /* owned here */
    rs_grpc_code code;
    if (!p || x.oom) code = rs_grpc_fail(msg, n, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    else {
        for (int i = 0; i < x.n; i++) {
            x.rows[i].ms.name = x.rows[i].name;
            x.rows[i].ms.version = x.rows[i].ver;
            p[i] = &x.rows[i].ms;
        }
        r.n_model_stats = (size_t)x.n;
        r.model_stats = p;
        code = rs_grpc_emit(o, &r.base, msg, n);
    }
    for (int i = 0; i < x.n; i++) {
        free(x.rows[i].bs);
        free(x.rows[i].pbs);
        free(x.rows[i].bd);
    }
    free(x.rows);
    free(p);
    return code;
}

static rs_grpc_code repo_index(rs_serve_server *s, const Inference__RepositoryIndexRequest *q, const rs_grpc_sink *o,
                               char *msg, size_t n)
{
    rs_serve_index_entry *e;
    int ne;
    rs_err err = {0};
    if (rs_serve_index(s, &e, &ne, &err)) return rs_grpc_fail(msg, n, RS_GRPC_INTERNAL, "%s", err.msg);
    Inference__RepositoryIndexResponse__ModelIndex *mi = calloc((size_t)ne + 1, sizeof *mi); /* owned here */
    Inference__RepositoryIndexResponse__ModelIndex **pm = calloc((size_t)ne + 1, sizeof *pm);
    char(*ver)[24] = calloc((size_t)ne + 1, sizeof *ver);
    rs_grpc_code code;
    if (!mi || !pm || !ver) code = rs_grpc_fail(msg, n, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    else {
        int k = 0;
        for (int i = 0; i < ne; i++) {
            if (q->ready && strcmp(e[i].state, "READY")) continue;
            inference__repository_index_response__model_index__init(&mi[k]);
            mi[k].name = e[i].name;
            if (e[i].version) snprintf(ver[k], sizeof ver[k], "%lld", (long long)e[i].version);
            mi[k].version = ver[k];
            mi[k].state = (char *)e[i].state;
            mi[k].reason = e[i].reason;
            pm[k] = &mi[k];
            k++;
        }
        Inference__RepositoryIndexResponse r = INFERENCE__REPOSITORY_INDEX_RESPONSE__INIT;
        r.n_models = (size_t)k;
        r.models = pm;
        code = rs_grpc_emit(o, &r.base, msg, n);
    }
    free(mi);
    free(pm);
    free(ver);
    free(e);
    return code;
}

/* ---- dispatch ---- */

#define UNPACK(type, fn, var)                                                                                          \
    type *var = fn##__unpack(NULL, len, req);                                                                          \
    if (!var) return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "the request is not a valid %s message (%zu bytes)",     \
                          #type + sizeof "Inference__" - 1, len);

rs_grpc_code rs_grpc_call(rs_serve_server *s, rs_grpc_method method, const uint8_t *req, size_t len,
                          const rs_grpc_sink *o, char *msg, size_t n)
{
    msg[0] = '\0';
    rs_serve_refusal why;
    rs_grpc_code code = rs_grpc_prescan(method, req, len, rs_serve_limits_of(s), &why, msg, n);
    if (code) { /* refused before protobuf-c unpacks it */
        rs_serve_refused_add(rs_serve_refused_of(s), RS_SERVE_FE_GRPC, why);
        if (method != RS_GRPC_MODEL_STREAM_INFER) return code;
        Inference__ModelStreamInferResponse r = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
        char copy[1024]; /* in-band, as a stream reports every failure; the stream goes on */
        snprintf(copy, sizeof copy, "%s", msg);
        r.error_message = copy;
        return rs_grpc_emit(o, &r.base, msg, n);
    }
    switch (method) {
    case RS_GRPC_SERVER_LIVE:
    case RS_GRPC_SERVER_READY: {
        /* ServerLiveResponse and ServerReadyResponse are both `bool = 1` */
        UNPACK(Inference__ServerLiveRequest, inference__server_live_request, q);
        inference__server_live_request__free_unpacked(q, NULL);
        Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
        r.live = method == RS_GRPC_SERVER_LIVE || rs_serve_ready(s);
        return rs_grpc_emit(o, &r.base, msg, n);
    }
    case RS_GRPC_SERVER_METADATA: {
        UNPACK(Inference__ServerMetadataRequest, inference__server_metadata_request, q);
        inference__server_metadata_request__free_unpacked(q, NULL);
        return server_metadata(o, msg, n);
    }
    case RS_GRPC_MODEL_READY: {
        UNPACK(Inference__ModelReadyRequest, inference__model_ready_request, q);
        Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
        if (rs_serve_name_ok(rs_grpc_str(q->name))) {
            rs_serve_model *m = rs_serve_acquire(s, q->name);
            r.ready = m && rs_serve_model_version(m, q->version);
            rs_serve_release(s, m);
        }
        inference__model_ready_request__free_unpacked(q, NULL);
        return rs_grpc_emit(o, &r.base, msg, n);
    }
    case RS_GRPC_MODEL_METADATA:
    case RS_GRPC_MODEL_CONFIG: {
        /* ModelMetadataRequest and ModelConfigRequest are both name = 1, version = 2 */
        UNPACK(Inference__ModelMetadataRequest, inference__model_metadata_request, q);
        rs_serve_version *v;
        rs_serve_model *m = rs_grpc_model_of(s, rs_grpc_str(q->name), q->version, &v, &code, msg, n);
        if (m) {
            code = method == RS_GRPC_MODEL_CONFIG ? model_config(m, o, msg, n) : model_metadata(m, o, msg, n);
            rs_serve_release(s, m);
        }
        inference__model_metadata_request__free_unpacked(q, NULL);
        return code;
    }
    case RS_GRPC_MODEL_INFER: {
        UNPACK(Inference__ModelInferRequest, inference__model_infer_request, q);
        code = rs_grpc_model_infer(s, q, false, o, msg, n);
        inference__model_infer_request__free_unpacked(q, NULL);
        return code;
    }
    case RS_GRPC_MODEL_STREAM_INFER: return rs_grpc_stream_infer(s, req, len, o, msg, n);
    case RS_GRPC_MODEL_STATISTICS: {
        UNPACK(Inference__ModelStatisticsRequest, inference__model_statistics_request, q);
        code = statistics(s, q, o, msg, n);
        inference__model_statistics_request__free_unpacked(q, NULL);
        return code;
    }
    case RS_GRPC_REPOSITORY_INDEX: {
        UNPACK(Inference__RepositoryIndexRequest, inference__repository_index_request, q);
        code = repo_index(s, q, o, msg, n);
        inference__repository_index_request__free_unpacked(q, NULL);
        return code;
    }
    case RS_GRPC_REPOSITORY_LOAD:
    case RS_GRPC_REPOSITORY_UNLOAD: {
        /* the two requests are both repository_name = 1, model_name = 2 */
        UNPACK(Inference__RepositoryModelLoadRequest, inference__repository_model_load_request, q);
        bool load = method == RS_GRPC_REPOSITORY_LOAD;
        const char *name = rs_grpc_str(q->model_name);
        rs_err err = {0};
        if (!rs_serve_control_explicit(s)) {
            code = rs_grpc_fail(msg, n, RS_GRPC_UNAVAILABLE, RS_SERVE_CONTROL_REFUSAL);
        } else if (!rs_serve_name_ok(name)) {
            code = rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "'%.60s' is not a model name (letters, digits, '_', '-', "
                        "'.'; not starting with '.')", name);
        } else if (load ? rs_serve_load(s, name, &err) : rs_serve_unload(s, name, &err)) {
            code = rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "failed to %s '%s': %s", load ? "load" : "unload", name,
                        err.msg);
        } else {
            Inference__RepositoryModelLoadResponse r = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
            code = rs_grpc_emit(o, &r.base, msg, n);
        }
        inference__repository_model_load_request__free_unpacked(q, NULL);
        return code;
    }
    default: return rs_grpc_fail(msg, n, RS_GRPC_UNIMPLEMENTED, "unknown method");
    }
}
