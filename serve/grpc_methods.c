/* The methods of inference.GRPCInferenceService: a request message (protobuf) in, response messages
 * out through a sink, over the same server calls the HTTP front end makes (acquire, version, the
 * scheduler, the index). Nothing here knows about sockets or HTTP/2, so a test or the fuzzer can call
 * rs_grpc_call with bytes alone. Errors carry Triton's gRPC codes and wording: an unknown model is
 * UNAVAILABLE, what the client can fix INVALID_ARGUMENT, a decoupled model asked for one answer
 * UNIMPLEMENTED. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_internal.h"
#include "repo.h"
#include "serve/grpc_service.pb-c.h"

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

static rs_grpc_code fail(char *msg, size_t n, rs_grpc_code code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static rs_grpc_code fail(char *msg, size_t n, rs_grpc_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return code;
}

/* Packs m and hands it to the sink. */
static rs_grpc_code emit(const rs_grpc_sink *o, const ProtobufCMessage *m, char *msg, size_t n)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t stackbuf[512];
    uint8_t *b = len <= sizeof stackbuf ? stackbuf : malloc(len); /* owned here when malloc'd */
    if (!b) return fail(msg, n, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory for a %zu-byte response", len);
    protobuf_c_message_pack(m, b);
    o->emit(o->ud, b, len);
    if (b != stackbuf) free(b);
    return RS_GRPC_OK;
}

static char *str(const char *s) { return (char *)(s ? s : ""); }

/* The model NAME held (release it), or a failure in msg. */
static rs_serve_model *model_of(rs_serve_server *s, const char *name, const char *version, rs_serve_version **v,
                                rs_grpc_code *code, char *msg, size_t n)
{
    *v = NULL;
    if (!rs_serve_name_ok(name)) {
        *code = fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "'%.60s' is not a model name (letters, digits, '_', '-', "
                     "'.'; not starting with '.')", name);
        return NULL;
    }
    rs_serve_model *m = rs_serve_acquire(s, name);
    if (m) *v = rs_serve_model_version(m, version);
    if (!*v) {
        if (m && version && *version)
            *code = fail(msg, n, RS_GRPC_UNAVAILABLE, "Request for unknown model: '%s' version %.30s is not found", name,
                         version);
        else *code = fail(msg, n, RS_GRPC_UNAVAILABLE, "Request for unknown model: '%s' is not found", name);
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
    return emit(o, &r.base, msg, n);
}

static void tensor_meta(Inference__ModelMetadataResponse__TensorMetadata *t, int64_t *shape, const rs_serve_io *io,
                        bool batch)
{
    inference__model_metadata_response__tensor_metadata__init(t);
    t->name = (char *)io->name;
    t->datatype = (char *)rs_serve_dtype_v2_name(io->dtype);
    int k = 0;
    if (batch) shape[k++] = -1;
    for (int d = 0; d < io->rank; d++) shape[k++] = io->dims[d];
    t->n_shape = (size_t)k;
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
    for (int i = 0; i < c->ninputs; i++) tensor_meta(pi[i] = &ti[i], si[i], &c->inputs[i], c->max_batch_size > 0);
    for (int i = 0; i < c->noutputs; i++) tensor_meta(po[i] = &to[i], so[i], &c->outputs[i], c->max_batch_size > 0);
    r.name = (char *)c->name;
    r.n_versions = (size_t)m->nversions;
    r.versions = vp;
    r.platform = (char *)(c->platform[0] ? c->platform : c->backend);
    r.n_inputs = (size_t)c->ninputs;
    r.inputs = pi;
    r.n_outputs = (size_t)c->noutputs;
    r.outputs = po;
    return emit(o, &r.base, msg, n);
}

static rs_grpc_code model_config(rs_serve_model *m, const rs_grpc_sink *o, char *msg, size_t n)
{
    const rs_serve_config *c = &m->cfg;
    Inference__ModelConfig mc = INFERENCE__MODEL_CONFIG__INIT;
    Inference__ModelInput in[RS_SERVE_MAX_IO], *pin[RS_SERVE_MAX_IO];
    Inference__ModelOutput out[RS_SERVE_MAX_IO], *pout[RS_SERVE_MAX_IO];
    int64_t din[RS_SERVE_MAX_IO][RS_SERVE_MAX_DIMS], dout[RS_SERVE_MAX_IO][RS_SERVE_MAX_DIMS];
    for (int i = 0; i < c->ninputs; i++) {
        inference__model_input__init(pin[i] = &in[i]);
        in[i].name = (char *)c->inputs[i].name;
        in[i].data_type = (Inference__DataType)c->inputs[i].dtype; /* rs_serve_dtype follows Triton's DataType */
        for (int d = 0; d < c->inputs[i].rank; d++) din[i][d] = c->inputs[i].dims[d];
        in[i].n_dims = (size_t)c->inputs[i].rank;
        in[i].dims = din[i];
    }
    for (int i = 0; i < c->noutputs; i++) {
        inference__model_output__init(pout[i] = &out[i]);
        out[i].name = (char *)c->outputs[i].name;
        out[i].data_type = (Inference__DataType)c->outputs[i].dtype;
        for (int d = 0; d < c->outputs[i].rank; d++) dout[i][d] = c->outputs[i].dims[d];
        out[i].n_dims = (size_t)c->outputs[i].rank;
        out[i].dims = dout[i];
    }
    mc.name = (char *)c->name;
    mc.platform = (char *)c->platform;
    mc.backend = (char *)(c->backend[0] ? c->backend : c->platform[0] ? "onnxruntime" : "");
    mc.max_batch_size = c->max_batch_size;
    mc.n_input = (size_t)c->ninputs;
    mc.input = pin;
    mc.n_output = (size_t)c->noutputs;
    mc.output = pout;
    char gname[RS_SERVE_NAME_MAX + 8];
    snprintf(gname, sizeof gname, "%s_0", c->name);
    Inference__ModelInstanceGroup g = INFERENCE__MODEL_INSTANCE_GROUP__INIT, *pg = &g;
    g.name = gname;
    g.count = c->instance_count;
    g.kind = !strcmp(c->instance_kind, "KIND_GPU")     ? INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU
             : !strcmp(c->instance_kind, "KIND_MODEL") ? INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_MODEL
             : !strcmp(c->instance_kind, "KIND_AUTO")  ? INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO
                                                       : INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU;
    mc.n_instance_group = 1;
    mc.instance_group = &pg;
    Inference__ModelDynamicBatching db = INFERENCE__MODEL_DYNAMIC_BATCHING__INIT;
    Inference__ModelQueuePolicy qp = INFERENCE__MODEL_QUEUE_POLICY__INIT;
    int32_t pref[RS_SERVE_MAX_PREFERRED];
    if (c->dynamic_batching) {
        for (int i = 0; i < c->npreferred; i++) pref[i] = c->preferred[i];
        db.n_preferred_batch_size = (size_t)c->npreferred;
        db.preferred_batch_size = pref;
        db.max_queue_delay_microseconds = (uint64_t)c->max_queue_delay_us;
        if (c->max_queue_size) {
            qp.max_queue_size = (uint32_t)c->max_queue_size;
            db.default_queue_policy = &qp;
        }
        mc.dynamic_batching = &db;
    }
    Inference__ModelTransactionPolicy tp = INFERENCE__MODEL_TRANSACTION_POLICY__INIT;
    tp.decoupled = c->decoupled;
    mc.model_transaction_policy = &tp;
    Inference__ModelVersionPolicy vp = INFERENCE__MODEL_VERSION_POLICY__INIT;
    Inference__ModelVersionPolicy__Latest lat = INFERENCE__MODEL_VERSION_POLICY__LATEST__INIT;
    Inference__ModelVersionPolicy__All all = INFERENCE__MODEL_VERSION_POLICY__ALL__INIT;
    Inference__ModelVersionPolicy__Specific spec = INFERENCE__MODEL_VERSION_POLICY__SPECIFIC__INIT;
    int64_t sv[RS_SERVE_MAX_VERSIONS];
    if (c->vpolicy == RS_SERVE_VP_ALL) {
        vp.policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_ALL;
        vp.all = &all;
    } else if (c->vpolicy == RS_SERVE_VP_SPECIFIC) {
        for (int i = 0; i < c->nversions; i++) sv[i] = c->versions[i];
        spec.n_versions = (size_t)c->nversions;
        spec.versions = sv;
        vp.policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC;
        vp.specific = &spec;
    } else {
        lat.num_versions = (uint32_t)c->latest_n;
        vp.policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST;
        vp.latest = &lat;
    }
    mc.version_policy = &vp;
    Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
    r.config = &mc;
    return emit(o, &r.base, msg, n);
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
        rs_serve_model *m = model_of(s, name, q->version, &v, &code, msg, n);
        if (!m) return code == RS_GRPC_UNAVAILABLE ? fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "requested model '%s' "
                                                          "is not available", name) : code;
        rs_serve_release(s, m);
    }
    stat_ctx x = {.name = name, .ver = q->version};
    rs_serve_each(s, stat_one, &x);
    Inference__ModelStatisticsResponse r = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
    Inference__ModelStatistics **p = calloc((size_t)x.n + 1, sizeof *p); /* owned here */
    rs_grpc_code code;
    if (!p || x.oom) code = fail(msg, n, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    else {
        for (int i = 0; i < x.n; i++) {
            x.rows[i].ms.name = x.rows[i].name;
            x.rows[i].ms.version = x.rows[i].ver;
            p[i] = &x.rows[i].ms;
        }
        r.n_model_stats = (size_t)x.n;
        r.model_stats = p;
        code = emit(o, &r.base, msg, n);
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
    if (rs_serve_index(s, &e, &ne, &err)) return fail(msg, n, RS_GRPC_INTERNAL, "%s", err.msg);
    Inference__RepositoryIndexResponse__ModelIndex *mi = calloc((size_t)ne + 1, sizeof *mi); /* owned here */
    Inference__RepositoryIndexResponse__ModelIndex **pm = calloc((size_t)ne + 1, sizeof *pm);
    char(*ver)[24] = calloc((size_t)ne + 1, sizeof *ver);
    rs_grpc_code code;
    if (!mi || !pm || !ver) code = fail(msg, n, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory");
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
        code = emit(o, &r.base, msg, n);
    }
    free(mi);
    free(pm);
    free(ver);
    free(e);
    return code;
}

/* ---- infer ---- */

static const Inference__InferParameter *param(Inference__InferParameterEntry *const *p, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] && p[i]->key && !strcmp(p[i]->key, key)) return p[i]->value;
    return NULL;
}

/* A request parameter as a number: int64, uint64, double, bool or a numeric string all count. */
static bool param_num(const Inference__ModelInferRequest *q, const char *key, double *out)
{
    const Inference__InferParameter *p = param(q->parameters, q->n_parameters, key);
    if (!p) return false;
    switch (p->parameter_choice_case) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM: *out = (double)p->int64_param; return true;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM: *out = (double)p->uint64_param; return true;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM: *out = p->double_param; return true;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM: *out = p->bool_param; return true;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM: {
        char *end;
        *out = strtod(p->string_param ? p->string_param : "", &end);
        return p->string_param && *p->string_param && !*end;
    }
    default: return false;
    }
}

/* Checks the request against the model's one FP32 input and runs it; on success *y (owned by the
 * caller) holds B samples of the output. */
static rs_grpc_code run_tensor(rs_serve_model *m, rs_serve_version *v, const Inference__ModelInferRequest *q, float **y,
                               int64_t *Bout, char *msg, size_t n)
{
    const rs_serve_config *c = &m->cfg;
    const rs_serve_io *in = &c->inputs[0], *out = &c->outputs[0];
    *y = NULL;
    if (q->n_inputs != 1 || !q->inputs[0])
        return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "expected 1 inputs but got %zu inputs for model '%s'",
                    q->n_inputs, c->name);
    const Inference__ModelInferRequest__InferInputTensor *t = q->inputs[0];
    if (!t->name || strcmp(t->name, in->name))
        return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "unexpected inference input '%.60s' for model '%s' (its input "
                    "is '%s')", str(t->name), c->name, in->name);
    if (!t->datatype || rs_serve_dtype_from_v2(t->datatype) != in->dtype)
        return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "inference input '%s' data-type is '%.20s', but model '%s' "
                    "expects '%s'", in->name, str(t->datatype), c->name, rs_serve_dtype_v2_name(in->dtype));
    bool shape_ok = t->n_shape == (size_t)in->rank + 1;
    int64_t B = shape_ok ? t->shape[0] : 0;
    for (int d = 0; shape_ok && d < in->rank; d++) shape_ok = t->shape[d + 1] == in->dims[d];
    if (!shape_ok || B < 1 || (c->max_batch_size > 0 && B > c->max_batch_size) || B > (1 << 20)) {
        char want[128];
        int k = snprintf(want, sizeof want, "[%s%d", c->max_batch_size > 0 ? "1.." : "", c->max_batch_size);
        if (c->max_batch_size <= 0) k = snprintf(want, sizeof want, "[N");
        for (int d = 0; d < in->rank && k < (int)sizeof want - 24; d++)
            k += snprintf(want + k, sizeof want - (size_t)k, ",%lld", (long long)in->dims[d]);
        snprintf(want + k, sizeof want - (size_t)k, "]");
        char got[128];
        int g = snprintf(got, sizeof got, "[");
        for (size_t d = 0; d < t->n_shape && g < (int)sizeof got - 24; d++)
            g += snprintf(got + g, sizeof got - (size_t)g, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        snprintf(got + g, sizeof got - (size_t)g, "]");
        return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "unexpected shape for input '%s' for model '%s'. Expected %s, "
                    "got %s", in->name, c->name, want, got);
    }
    size_t per_in = 1, per_out = 1;
    for (int d = 0; d < in->rank; d++) per_in *= (size_t)in->dims[d];
    for (int d = 0; d < out->rank; d++) per_out *= (size_t)out->dims[d];
    size_t nx = (size_t)B * per_in, ny = (size_t)B * per_out;
    const float *x = NULL;
    float *xcopy = NULL; /* owned here: raw bytes may be unaligned */
    if (q->n_raw_input_contents) {
        if (q->n_raw_input_contents != 1 || q->raw_input_contents[0].len != nx * sizeof(float))
            return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input '%s': raw_input_contents holds %zu bytes in %zu "
                        "entries; shape [%lld, ...] needs one of %zu", in->name,
                        q->n_raw_input_contents ? q->raw_input_contents[0].len : 0, q->n_raw_input_contents,
                        (long long)B, nx * sizeof(float));
        xcopy = malloc(nx * sizeof *xcopy);
        if (xcopy) memcpy(xcopy, q->raw_input_contents[0].data, nx * sizeof *xcopy);
        x = xcopy;
    } else if (t->contents && t->contents->n_fp32_contents) {
        if (t->contents->n_fp32_contents != nx)
            return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input '%s': expected %zu fp32_contents for shape [%lld, "
                        "...], got %zu", in->name, nx, (long long)B, t->contents->n_fp32_contents);
        x = t->contents->fp32_contents;
    } else {
        return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input '%s' has neither raw_input_contents nor "
                    "contents.fp32_contents", in->name);
    }
    for (size_t i = 0; i < q->n_outputs; i++) {
        const char *on = q->outputs[i] ? q->outputs[i]->name : NULL;
        if (!on || strcmp(on, out->name)) {
            free(xcopy);
            return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "unexpected inference output '%.60s' for model '%s' (its "
                        "output is '%s')", str(on), c->name, out->name);
        }
    }
    *y = malloc(ny * sizeof **y);
    if (!x || !*y) {
        free(xcopy);
        free(*y);
        *y = NULL;
        return fail(msg, n, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory for %zu input values", nx);
    }
    rs_err err = {0};
    rs_status st = rs_serve_sched_infer(v->sched, x, (int)B, *y, &err);
    free(xcopy);
    if (st) {
        free(*y);
        *y = NULL;
        return fail(msg, n, rs_grpc_code_of(st), "%s", err.msg);
    }
    *Bout = B;
    return RS_GRPC_OK;
}

/* The ModelInferResponse of a tensor model: the output as raw_output_contents, as Triton sends it. */
static void tensor_response(Inference__ModelInferResponse *r, Inference__ModelInferResponse__InferOutputTensor *t,
                            Inference__ModelInferResponse__InferOutputTensor **pt, int64_t *shape,
                            ProtobufCBinaryData *raw, const rs_serve_model *m, const char *ver,
                            const Inference__ModelInferRequest *q, const float *y, int64_t B)
{
    const rs_serve_io *out = &m->cfg.outputs[0];
    size_t per = 1;
    inference__model_infer_response__init(r);
    inference__model_infer_response__infer_output_tensor__init(t);
    shape[0] = B;
    for (int d = 0; d < out->rank; d++) per *= (size_t)(shape[d + 1] = out->dims[d]);
    t->name = (char *)out->name;
    t->datatype = (char *)rs_serve_dtype_v2_name(out->dtype);
    t->n_shape = (size_t)out->rank + 1;
    t->shape = shape;
    *pt = t;
    raw->data = (uint8_t *)y;
    raw->len = (size_t)B * per * sizeof *y;
    r->model_name = (char *)m->cfg.name;
    r->model_version = (char *)ver;
    r->id = str(q->id);
    r->n_outputs = 1;
    r->outputs = pt;
    r->n_raw_output_contents = 1;
    r->raw_output_contents = raw;
}

static rs_grpc_code model_infer(rs_serve_server *s, const Inference__ModelInferRequest *q, bool stream,
                                const rs_grpc_sink *o, char *msg, size_t n)
{
    rs_serve_version *v;
    rs_grpc_code code;
    uint64_t t0 = rs_serve_now_ns();
    rs_serve_model *m = model_of(s, str(q->model_name), q->model_version, &v, &code, msg, n);
    if (!m) return code;
    if (rs_serve_backend_generates(v->backend)) {
        rs_serve_release(s, m);
        return fail(msg, n, RS_GRPC_UNIMPLEMENTED, "ModelInfer RPC doesn't support models with decoupled "
                    "transaction policy ('%s' generates text: use ModelStreamInfer)", q->model_name);
    }
    float *y = NULL;
    int64_t B = 0;
    code = run_tensor(m, v, q, &y, &B, msg, n);
    /* refused before the queue: counted here (the scheduler counts what it ran or turned away) */
    if (code == RS_GRPC_INVALID_ARGUMENT) rs_serve_sched_count_fail(v->sched, rs_serve_now_ns() - t0);
    if (code == RS_GRPC_OK) {
        char ver[24];
        snprintf(ver, sizeof ver, "%lld", (long long)v->version);
        Inference__ModelInferResponse r;
        Inference__ModelInferResponse__InferOutputTensor t, *pt;
        int64_t shape[RS_SERVE_MAX_DIMS + 1];
        ProtobufCBinaryData raw;
        tensor_response(&r, &t, &pt, shape, &raw, m, ver, q, y, B);
        if (stream) {
            Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
            sr.infer_response = &r;
            code = emit(o, &sr.base, msg, n);
        } else {
            code = emit(o, &r.base, msg, n);
        }
    }
    free(y);
    rs_serve_release(s, m);
    return code;
}

/* ---- a decoupled model: one ModelStreamInferResponse per generated token ---- */

typedef struct gen_stream {
    const rs_grpc_sink *o;
    const rs_serve_model *m;
    const Inference__ModelInferRequest *q;
    char ver[24];
    bool final_flag;  /* the client asked for triton_final_response */
    rs_grpc_code code;
    char *msg;
    size_t msg_n;
} gen_stream;

/* text_output [1] as Triton serializes a BYTES element: a 4-byte little-endian length, then the bytes. */
static void gen_emit(gen_stream *g, const char *text, size_t len, bool final)
{
    Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    Inference__ModelInferResponse__InferOutputTensor t = INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
    Inference__ModelInferResponse__InferOutputTensor *pt = &t;
    int64_t shape[1] = {1};
    uint8_t b[4 + 64];
    ProtobufCBinaryData raw = {0, b};
    Inference__InferParameter fp = INFERENCE__INFER_PARAMETER__INIT;
    Inference__InferParameterEntry fe = INFERENCE__INFER_PARAMETER_ENTRY__INIT, *pfe = &fe;
    r.model_name = (char *)g->m->cfg.name;
    r.model_version = g->ver;
    r.id = str(g->q->id);
    if (text) {
        if (len > 64) len = 64;
        b[0] = (uint8_t)len, b[1] = b[2] = b[3] = 0;
        memcpy(b + 4, text, len);
        raw.len = 4 + len;
        t.name = (char *)g->m->cfg.outputs[0].name;
        t.datatype = "BYTES";
        t.n_shape = 1;
        t.shape = shape;
        r.n_outputs = 1;
        r.outputs = &pt;
        r.n_raw_output_contents = 1;
        r.raw_output_contents = &raw;
    }
    if (g->final_flag) {
        fe.key = "triton_final_response";
        fp.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
        fp.bool_param = final;
        fe.value = &fp;
        r.n_parameters = 1;
        r.parameters = &pfe;
    }
    Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    sr.infer_response = &r;
    if (g->code == RS_GRPC_OK) g->code = emit(g->o, &sr.base, g->msg, g->msg_n);
}

static void gen_on_text(void *ud, const char *text, size_t n) { gen_emit(ud, text, n, false); }

static bool gen_stop(void *ud)
{
    gen_stream *g = ud;
    return g->code != RS_GRPC_OK || (g->o->cancelled && g->o->cancelled(g->o->ud));
}

/* text_input's one element: BYTES serialized (length-prefixed) in raw_input_contents, or bytes_contents. */
static rs_grpc_code text_input(const rs_serve_model *m, const Inference__ModelInferRequest *q, const char **p,
                               size_t *len, char *msg, size_t n)
{
    const Inference__ModelInferRequest__InferInputTensor *t = NULL;
    size_t k = 0;
    for (size_t i = 0; i < q->n_inputs; i++)
        if (q->inputs[i] && q->inputs[i]->name && !strcmp(q->inputs[i]->name, "text_input")) t = q->inputs[k = i];
    if (!t)
        return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "model '%s' expects input 'text_input' (BYTES, shape [1])",
                    m->cfg.name);
    if (!t->datatype || strcmp(t->datatype, "BYTES"))
        return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "inference input 'text_input' data-type is '%.20s', but model "
                    "'%s' expects 'BYTES'", str(t->datatype), m->cfg.name);
    if (t->n_shape < 1 || t->n_shape > 2 || t->shape[0] != 1 || (t->n_shape == 2 && t->shape[1] != 1))
        return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input 'text_input' for model '%s' takes one string (shape [1])",
                    m->cfg.name);
    if (k < q->n_raw_input_contents) {
        const ProtobufCBinaryData *r = &q->raw_input_contents[k];
        size_t l = r->len >= 4 ? (size_t)r->data[0] | (size_t)r->data[1] << 8 | (size_t)r->data[2] << 16 |
                                     (size_t)r->data[3] << 24
                               : 0;
        if (r->len < 4 || l != r->len - 4)
            return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input 'text_input': raw_input_contents of %zu bytes is not "
                        "one BYTES element (a 4-byte little-endian length, then the bytes)", r->len);
        *p = (const char *)r->data + 4;
        *len = l;
    } else if (t->contents && t->contents->n_bytes_contents == 1) {
        *p = (const char *)t->contents->bytes_contents[0].data;
        *len = t->contents->bytes_contents[0].len;
    } else {
        return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input 'text_input' has no data (raw_input_contents or one "
                    "contents.bytes_contents)");
    }
    return RS_GRPC_OK;
}

/* Sampling settings from the request's parameters (Triton's generate names): max_tokens, temperature,
 * top_k, seed. */
static rs_grpc_code gen_settings(const Inference__ModelInferRequest *q, rs_serve_gen *g, char *msg, size_t n)
{
    double d;
    if (param_num(q, "max_tokens", &d)) {
        if (!(d >= 0 && d <= 100000)) return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "max_tokens takes 0..100000");
        g->max_tokens = (int)d;
    }
    if (param_num(q, "temperature", &d)) {
        if (!(d >= 0 && d <= 1e6)) return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "temperature takes a number >= 0");
        g->temperature = (float)d;
    }
    if (param_num(q, "top_k", &d)) {
        if (!(d >= 0 && d <= 1e9)) return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "top_k takes a count >= 0");
        g->top_k = (int)d;
    }
    const Inference__InferParameter *sp = param(q->parameters, q->n_parameters, "seed");
    if (sp && sp->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
        g->seed = sp->uint64_param;
    else if (sp && sp->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM)
        g->seed = (uint64_t)sp->int64_param;
    else if (param_num(q, "seed", &d)) g->seed = (uint64_t)d;
    return RS_GRPC_OK;
}

static rs_grpc_code stream_generate(rs_serve_server *s, rs_serve_model *m, rs_serve_version *v,
                                    const Inference__ModelInferRequest *q, const rs_grpc_sink *o, char *msg, size_t n)
{
    (void)s;
    gen_stream g = {.o = o, .m = m, .q = q, .code = RS_GRPC_OK, .msg = msg, .msg_n = n};
    snprintf(g.ver, sizeof g.ver, "%lld", (long long)v->version);
    const Inference__InferParameter *fp = param(q->parameters, q->n_parameters, "triton_enable_empty_final_response");
    g.final_flag = fp && fp->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM &&
                   fp->bool_param;
    rs_serve_gen gen;
    rs_serve_gen_init(&gen);
    rs_grpc_code code = text_input(m, q, &gen.prompt, &gen.plen, msg, n);
    if (code == RS_GRPC_OK) code = gen_settings(q, &gen, msg, n);
    if (code != RS_GRPC_OK) {
        rs_serve_sched_count_fail(v->sched, 0);
        return code;
    }
    gen.on_text = gen_on_text;
    gen.stop = gen_stop;
    gen.ud = &g;
    rs_err err = {0};
    rs_status st = rs_serve_sched_generate(v->sched, &gen, &err);
    if (st) return fail(msg, n, rs_grpc_code_of(st), "%s", err.msg);
    if (g.code != RS_GRPC_OK) return g.code;
    if (g.final_flag) gen_emit(&g, NULL, 0, true);
    return g.code;
}

/* One message of ModelStreamInfer: failures go back in-band, in error_message. */
static rs_grpc_code stream_infer(rs_serve_server *s, const uint8_t *req, size_t len, const rs_grpc_sink *o, char *msg,
                                 size_t n)
{
    Inference__ModelInferRequest *q = inference__model_infer_request__unpack(NULL, len, req);
    rs_grpc_code code;
    if (!q) {
        code = fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "the ModelInferRequest message (%zu bytes) is not valid protobuf",
                    len);
    } else {
        rs_serve_version *v;
        rs_serve_model *m = model_of(s, str(q->model_name), q->model_version, &v, &code, msg, n);
        if (m) {
            code = rs_serve_backend_generates(v->backend) ? stream_generate(s, m, v, q, o, msg, n)
                                                          : model_infer(s, q, true, o, msg, n);
            rs_serve_release(s, m);
        }
    }
    if (code != RS_GRPC_OK && !(o->cancelled && o->cancelled(o->ud))) {
        Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
        Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
        r.id = str(q ? q->id : NULL);
        r.model_name = str(q ? q->model_name : NULL);
        r.model_version = str(q ? q->model_version : NULL);
        sr.infer_response = &r;
        sr.error_message = msg;
        code = emit(o, &sr.base, msg, n);
    }
    inference__model_infer_request__free_unpacked(q, NULL);
    if (o->cancelled && o->cancelled(o->ud)) return RS_GRPC_CANCELLED;
    return code;
}

/* ---- dispatch ---- */

#define UNPACK(type, fn, var)                                                                                          \
    type *var = fn##__unpack(NULL, len, req);                                                                          \
    if (!var) return fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "the request is not a valid %s message (%zu bytes)",     \
                          #type + sizeof "Inference__" - 1, len);

rs_grpc_code rs_grpc_call(rs_serve_server *s, rs_grpc_method method, const uint8_t *req, size_t len,
                          const rs_grpc_sink *o, char *msg, size_t n)
{
    msg[0] = '\0';
    rs_grpc_code code = RS_GRPC_OK;
    switch (method) {
    case RS_GRPC_SERVER_LIVE:
    case RS_GRPC_SERVER_READY: {
        /* ServerLiveResponse and ServerReadyResponse are both `bool = 1` */
        UNPACK(Inference__ServerLiveRequest, inference__server_live_request, q);
        inference__server_live_request__free_unpacked(q, NULL);
        Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
        r.live = true;
        return emit(o, &r.base, msg, n);
    }
    case RS_GRPC_SERVER_METADATA: {
        UNPACK(Inference__ServerMetadataRequest, inference__server_metadata_request, q);
        inference__server_metadata_request__free_unpacked(q, NULL);
        return server_metadata(o, msg, n);
    }
    case RS_GRPC_MODEL_READY: {
        UNPACK(Inference__ModelReadyRequest, inference__model_ready_request, q);
        Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
        if (rs_serve_name_ok(str(q->name))) {
            rs_serve_model *m = rs_serve_acquire(s, q->name);
            r.ready = m && rs_serve_model_version(m, q->version);
            rs_serve_release(s, m);
        }
        inference__model_ready_request__free_unpacked(q, NULL);
        return emit(o, &r.base, msg, n);
    }
    case RS_GRPC_MODEL_METADATA:
    case RS_GRPC_MODEL_CONFIG: {
        /* ModelMetadataRequest and ModelConfigRequest are both name = 1, version = 2 */
        UNPACK(Inference__ModelMetadataRequest, inference__model_metadata_request, q);
        rs_serve_version *v;
        rs_serve_model *m = model_of(s, str(q->name), q->version, &v, &code, msg, n);
        if (m) {
            code = method == RS_GRPC_MODEL_CONFIG ? model_config(m, o, msg, n) : model_metadata(m, o, msg, n);
            rs_serve_release(s, m);
        }
        inference__model_metadata_request__free_unpacked(q, NULL);
        return code;
    }
    case RS_GRPC_MODEL_INFER: {
        UNPACK(Inference__ModelInferRequest, inference__model_infer_request, q);
        code = model_infer(s, q, false, o, msg, n);
        inference__model_infer_request__free_unpacked(q, NULL);
        return code;
    }
    case RS_GRPC_MODEL_STREAM_INFER: return stream_infer(s, req, len, o, msg, n);
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
        const char *name = str(q->model_name);
        rs_err err = {0};
        if (!rs_serve_name_ok(name)) {
            code = fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "'%.60s' is not a model name (letters, digits, '_', '-', "
                        "'.'; not starting with '.')", name);
        } else if (load ? rs_serve_load(s, name, &err) : rs_serve_unload(s, name, &err)) {
            code = fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "failed to %s '%s': %s", load ? "load" : "unload", name,
                        err.msg);
        } else {
            Inference__RepositoryModelLoadResponse r = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
            code = emit(o, &r.base, msg, n);
        }
        inference__repository_model_load_request__free_unpacked(q, NULL);
        return code;
    }
    default: return fail(msg, n, RS_GRPC_UNIMPLEMENTED, "unknown method");
    }
}
