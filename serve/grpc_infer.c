/* ModelInfer and ModelStreamInfer (see grpc_internal.h): a tensor model's request checked against its
 * one FP32 input and run through the scheduler, its output sent as raw_output_contents; a GPT's
 * request (text_input, sampling parameters) generated on an instance, one ModelStreamInferResponse
 * per token as it is drawn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_internal.h"

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
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "expected 1 inputs but got %zu inputs for model '%s'",
                    q->n_inputs, c->name);
    const Inference__ModelInferRequest__InferInputTensor *t = q->inputs[0];
    if (!t->name || strcmp(t->name, in->name))
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "unexpected inference input '%.60s' for model '%s' (its input "
                    "is '%s')", rs_grpc_str(t->name), c->name, in->name);
    if (!t->datatype || rs_serve_dtype_from_v2(t->datatype) != in->dtype)
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "inference input '%s' data-type is '%.20s', but model '%s' "
                    "expects '%s'", in->name, rs_grpc_str(t->datatype), c->name, rs_serve_dtype_v2_name(in->dtype));
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
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "unexpected shape for input '%s' for model '%s'. Expected %s, "
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
            return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input '%s': raw_input_contents holds %zu bytes in %zu "
                        "entries; shape [%lld, ...] needs one of %zu", in->name,
                        q->n_raw_input_contents ? q->raw_input_contents[0].len : 0, q->n_raw_input_contents,
                        (long long)B, nx * sizeof(float));
        xcopy = malloc(nx * sizeof *xcopy);
        if (xcopy) memcpy(xcopy, q->raw_input_contents[0].data, nx * sizeof *xcopy);
        x = xcopy;
    } else if (t->contents && t->contents->n_fp32_contents) {
        if (t->contents->n_fp32_contents != nx)
            return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input '%s': expected %zu fp32_contents for shape [%lld, "
                        "...], got %zu", in->name, nx, (long long)B, t->contents->n_fp32_contents);
        x = t->contents->fp32_contents;
    } else {
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input '%s' has neither raw_input_contents nor "
                    "contents.fp32_contents", in->name);
    }
    for (size_t i = 0; i < q->n_outputs; i++) {
        const char *on = q->outputs[i] ? q->outputs[i]->name : NULL;
        if (!on || strcmp(on, out->name)) {
            free(xcopy);
            return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "unexpected inference output '%.60s' for model '%s' (its "
                        "output is '%s')", rs_grpc_str(on), c->name, out->name);
        }
    }
    *y = malloc(ny * sizeof **y);
    if (!x || !*y) {
        free(xcopy);
        free(*y);
        *y = NULL;
        return rs_grpc_fail(msg, n, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory for %zu input values", nx);
    }
    rs_err err = {0};
    rs_status st = rs_serve_sched_infer(v->sched, x, (int)B, *y, &err);
    free(xcopy);
    if (st) {
        free(*y);
        *y = NULL;
        return rs_grpc_fail(msg, n, rs_grpc_code_of(st), "%s", err.msg);
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
    r->id = rs_grpc_str(q->id);
    r->n_outputs = 1;
    r->outputs = pt;
    r->n_raw_output_contents = 1;
    r->raw_output_contents = raw;
}

rs_grpc_code rs_grpc_model_infer(rs_serve_server *s, const Inference__ModelInferRequest *q, bool stream,
                                const rs_grpc_sink *o, char *msg, size_t n)
{
    rs_serve_version *v;
    rs_grpc_code code;
    uint64_t t0 = rs_serve_now_ns();
    rs_serve_model *m = rs_grpc_model_of(s, rs_grpc_str(q->model_name), q->model_version, &v, &code, msg, n);
    if (!m) return code;
    if (rs_serve_backend_generates(v->backend)) {
        rs_serve_release(s, m);
        return rs_grpc_fail(msg, n, RS_GRPC_UNIMPLEMENTED, "ModelInfer RPC doesn't support models with decoupled "
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
            code = rs_grpc_emit(o, &sr.base, msg, n);
        } else {
            code = rs_grpc_emit(o, &r.base, msg, n);
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
    r.id = rs_grpc_str(g->q->id);
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
    if (g->code == RS_GRPC_OK) g->code = rs_grpc_emit(g->o, &sr.base, g->msg, g->msg_n);
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
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "model '%s' expects input 'text_input' (BYTES, shape [1])",
                    m->cfg.name);
    if (!t->datatype || strcmp(t->datatype, "BYTES"))
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "inference input 'text_input' data-type is '%.20s', but model "
                    "'%s' expects 'BYTES'", rs_grpc_str(t->datatype), m->cfg.name);
    if (t->n_shape < 1 || t->n_shape > 2 || t->shape[0] != 1 || (t->n_shape == 2 && t->shape[1] != 1))
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input 'text_input' for model '%s' takes one string (shape [1])",
                    m->cfg.name);
    if (k < q->n_raw_input_contents) {
        const ProtobufCBinaryData *r = &q->raw_input_contents[k];
        size_t l = r->len >= 4 ? (size_t)r->data[0] | (size_t)r->data[1] << 8 | (size_t)r->data[2] << 16 |
                                     (size_t)r->data[3] << 24
                               : 0;
        if (r->len < 4 || l != r->len - 4)
            return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input 'text_input': raw_input_contents of %zu bytes is not "
                        "one BYTES element (a 4-byte little-endian length, then the bytes)", r->len);
        *p = (const char *)r->data + 4;
        *len = l;
    } else if (t->contents && t->contents->n_bytes_contents == 1) {
        *p = (const char *)t->contents->bytes_contents[0].data;
        *len = t->contents->bytes_contents[0].len;
    } else {
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input 'text_input' has no data (raw_input_contents or one "
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
        if (!(d >= 0 && d <= 100000)) return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "max_tokens takes 0..100000");
        g->max_tokens = (int)d;
    }
    if (param_num(q, "temperature", &d)) {
        if (!(d >= 0 && d <= 1e6)) return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "temperature takes a number >= 0");
        g->temperature = (float)d;
    }
    if (param_num(q, "top_k", &d)) {
        if (!(d >= 0 && d <= 1e9)) return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "top_k takes a count >= 0");
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
    if (st) return rs_grpc_fail(msg, n, rs_grpc_code_of(st), "%s", err.msg);
    if (g.code != RS_GRPC_OK) return g.code;
    if (g.final_flag) gen_emit(&g, NULL, 0, true);
    return g.code;
}

/* One message of ModelStreamInfer: failures go back in-band, in error_message. */
rs_grpc_code rs_grpc_stream_infer(rs_serve_server *s, const uint8_t *req, size_t len, const rs_grpc_sink *o, char *msg,
                                 size_t n)
{
    Inference__ModelInferRequest *q = inference__model_infer_request__unpack(NULL, len, req);
    rs_grpc_code code;
    if (!q) {
        code = rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "the ModelInferRequest message (%zu bytes) is not valid protobuf",
                    len);
    } else {
        rs_serve_version *v;
        rs_serve_model *m = rs_grpc_model_of(s, rs_grpc_str(q->model_name), q->model_version, &v, &code, msg, n);
        if (m) {
            code = rs_serve_backend_generates(v->backend) ? stream_generate(s, m, v, q, o, msg, n)
                                                          : rs_grpc_model_infer(s, q, true, o, msg, n);
            rs_serve_release(s, m);
        }
    }
    if (code != RS_GRPC_OK && !(o->cancelled && o->cancelled(o->ud))) {
        Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
        Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
        r.id = rs_grpc_str(q ? q->id : NULL);
        r.model_name = rs_grpc_str(q ? q->model_name : NULL);
        r.model_version = rs_grpc_str(q ? q->model_version : NULL);
        sr.infer_response = &r;
        sr.error_message = msg;
        code = rs_grpc_emit(o, &sr.base, msg, n);
    }
    inference__model_infer_request__free_unpacked(q, NULL);
    if (o->cancelled && o->cancelled(o->ud)) return RS_GRPC_CANCELLED;
    return code;
}

