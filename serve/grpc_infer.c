/* ModelInfer and ModelStreamInfer (see grpc_internal.h): a tensor model's request checked against its
 * inputs (infer_check.h: Triton's words) and run through the scheduler, its outputs sent as
 * raw_output_contents; a GPT's
 * request (text_input, sampling parameters) generated on an instance, one ModelStreamInferResponse
 * per token as it is drawn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "grpc_internal.h"
#include "grpc_tensor.h"
#include "infer_check.h"
#include "sequence.h"

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

/* What a tensor request gives back: each output's bytes (owned), which ones were asked for, and the
 * classification extension's top-k where asked. */
typedef struct tensor_run {
    int64_t B;
    rs_serve_tensor y[RS_SERVE_MAX_IO];
    bool want[RS_SERVE_MAX_IO];
    int classes[RS_SERVE_MAX_IO];
    size_t per[RS_SERVE_MAX_IO]; /* strings per row of a classified output */
} tensor_run;

static void tensor_run_free(tensor_run *t)
{
    for (int k = 0; k < RS_SERVE_MAX_IO; k++) free(t->y[k].data);
}

/* The outputs asked for (all when none is named) and their classification parameter. */
static rs_grpc_code check_outputs(const rs_serve_config *c, const Inference__ModelInferRequest *q, tensor_run *t,
                                  char *msg, size_t n)
{
    for (int k = 0; k < c->noutputs; k++) t->want[k] = q->n_outputs == 0;
    for (size_t i = 0; i < q->n_outputs; i++) {
        const Inference__ModelInferRequest__InferRequestedOutputTensor *o = q->outputs[i];
        int k = rs_serve_output_index(c, o ? o->name : NULL, msg, n);
        if (k < 0) return RS_GRPC_INVALID_ARGUMENT;
        t->want[k] = true;
        const Inference__InferParameter *p = o ? param(o->parameters, o->n_parameters, "classification") : NULL;
        if (p) {
            if (p->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM)
                return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "invalid value type for 'classification' "
                                    "parameter, expected int64_param");
            if (p->int64_param < 0 || p->int64_param > (1 << 20))
                return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "invalid value for 'classification' parameter, "
                                    "expected >= 0");
            t->classes[k] = (int)p->int64_param;
        }
    }
    return RS_GRPC_OK;
}

/* A sequence model's request: the sequence_id (int64, uint64 or string), sequence_start and sequence_end
 * parameters, as tritonclient sends them; the control inputs filled from them. */
static rs_grpc_code sequence(const rs_serve_config *c, rs_serve_sched *s, const Inference__ModelInferRequest *q,
                             int64_t B, rs_serve_tensor *x, rs_serve_pin *pin, char *msg, size_t n)
{
    if (!c->sequence_batching) return RS_GRPC_OK;
    rs_serve_seq sq = {0};
    const Inference__InferParameter *id = param(q->parameters, q->n_parameters, "sequence_id");
    if (id && id->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM && id->int64_param)
        sq.given = true, sq.id = (uint64_t)id->int64_param;
    else if (id && id->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM &&
             id->uint64_param)
        sq.given = true, sq.id = id->uint64_param;
    else if (id && id->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM &&
             id->string_param && id->string_param[0]) {
        sq.given = sq.is_str = true;
        snprintf(sq.sid, sizeof sq.sid, "%s", id->string_param);
    }
    const Inference__InferParameter *f = param(q->parameters, q->n_parameters, "sequence_start");
    sq.start = f && f->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM && f->bool_param;
    f = param(q->parameters, q->n_parameters, "sequence_end");
    sq.end = f && f->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM && f->bool_param;
    if (!rs_serve_seq_apply(c, s, &sq, B, x, pin, msg, n)) return RS_GRPC_INVALID_ARGUMENT;
    return RS_GRPC_OK;
}

/* Checks the request against the model's inputs (names, types, shapes, data) and runs it. */
static rs_grpc_code run_tensor(rs_serve_model *m, rs_serve_version *v, const Inference__ModelInferRequest *q,
                               tensor_run *t, char *msg, size_t n)
{
    const rs_serve_config *c = &m->cfg;
    int given[RS_SERVE_MAX_IO] = {0}, order[RS_SERVE_MAX_IO];
    size_t count[RS_SERVE_MAX_IO] = {0};
    if (q->n_raw_input_contents && q->n_raw_input_contents != q->n_inputs)
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "expected %zu raw_input_contents (one per input) for model "
                            "'%s', got %zu", q->n_inputs, c->name, q->n_raw_input_contents);
    for (size_t k = 0; k < q->n_inputs; k++) {
        const Inference__ModelInferRequest__InferInputTensor *e = q->inputs[k];
        int i = rs_serve_input_index(c, e ? e->name : NULL, msg, n);
        if (i < 0) return RS_GRPC_INVALID_ARGUMENT;
        if (given[i]++ || k >= RS_SERVE_MAX_IO) break; /* rs_serve_check_given says it */
        order[k] = i;
        if (!rs_serve_check_input(c, i, e->datatype, e->shape, e->n_shape, &t->B, &count[i], msg, n))
            return RS_GRPC_INVALID_ARGUMENT;
    }
    if (!rs_serve_check_given(c, given, q->n_inputs, msg, n)) return RS_GRPC_INVALID_ARGUMENT;
    rs_grpc_code code = check_outputs(c, q, t, msg, n);
    rs_serve_tensor x[RS_SERVE_MAX_IO] = {{0}}; /* owned here */
    for (size_t k = 0; code == RS_GRPC_OK && k < q->n_inputs; k++)
        code = rs_grpc_read_input(c, order[k], q->inputs[k], q->n_raw_input_contents ? &q->raw_input_contents[k] : NULL,
                                  count[order[k]], &x[order[k]], msg, n);
    rs_serve_pin pin = {.inst = -1};
    if (code == RS_GRPC_OK) code = sequence(c, v->sched, q, t->B, x, &pin, msg, n);
    if (code == RS_GRPC_OK) {
        rs_err err = {0};
        rs_status st = rs_serve_sched_infer_pinned(v->sched, x, (int)t->B, t->y, &pin, &err);
        if (st) code = rs_grpc_fail(msg, n, rs_grpc_code_of(st), "%s", err.msg);
    }
    for (int k = 0; code == RS_GRPC_OK && k < c->noutputs; k++) {
        if (!t->want[k] || !t->classes[k]) continue;
        rs_serve_tensor cls;
        rs_err err = {0};
        if (rs_serve_classify(c, k, &t->y[k], t->B, t->classes[k], &cls, &t->per[k], &err)) {
            code = rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "%s", err.msg);
        } else {
            free(t->y[k].data);
            t->y[k] = cls;
        }
    }
    for (int i = 0; i < RS_SERVE_MAX_IO; i++) free(x[i].data);
    return code;
}

/* The ModelInferResponse of a tensor model: each output asked for as raw_output_contents, as Triton
 * sends them. The arrays (RS_SERVE_MAX_IO each) are the caller's. */
static void tensor_response(Inference__ModelInferResponse *r, Inference__ModelInferResponse__InferOutputTensor *t,
                            Inference__ModelInferResponse__InferOutputTensor **pt,
                            int64_t (*shape)[RS_SERVE_MAX_DIMS + 1], ProtobufCBinaryData *raw, const rs_serve_model *m,
                            const char *ver, const Inference__ModelInferRequest *q, const tensor_run *run)
{
    const rs_serve_config *c = &m->cfg;
    inference__model_infer_response__init(r);
    size_t j = 0;
    for (int k = 0; k < c->noutputs; k++) {
        if (!run->want[k]) continue;
        inference__model_infer_response__infer_output_tensor__init(&t[j]);
        int rank = rs_serve_output_shape(c, k, run->B, shape[j]);
        if (run->classes[k]) {
            rank = c->full_dims ? 1 : 2;
            shape[j][rank - 1] = (int64_t)run->per[k];
        }
        t[j].name = (char *)c->outputs[k].name;
        t[j].datatype = (char *)rs_serve_dtype_v2_name(run->classes[k] ? RS_SERVE_STRING : c->outputs[k].dtype);
        t[j].n_shape = (size_t)rank;
        t[j].shape = shape[j];
        pt[j] = &t[j];
        raw[j].data = run->y[k].data;
        raw[j].len = run->y[k].bytes;
        j++;
    }
    r->model_name = (char *)c->name;
    r->model_version = (char *)ver;
    r->id = rs_grpc_str(q->id);
    r->n_outputs = j;
    r->outputs = pt;
    r->n_raw_output_contents = j;
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
    tensor_run run = {0};
    code = run_tensor(m, v, q, &run, msg, n);
    /* refused before the queue: counted here (the scheduler counts what it ran or turned away) */
    if (code == RS_GRPC_INVALID_ARGUMENT) rs_serve_sched_count_fail(v->sched, rs_serve_now_ns() - t0);
    if (code == RS_GRPC_OK) {
        char ver[24];
        snprintf(ver, sizeof ver, "%lld", (long long)v->version);
        Inference__ModelInferResponse r;
        Inference__ModelInferResponse__InferOutputTensor t[RS_SERVE_MAX_IO], *pt[RS_SERVE_MAX_IO];
        int64_t shape[RS_SERVE_MAX_IO][RS_SERVE_MAX_DIMS + 1];
        ProtobufCBinaryData raw[RS_SERVE_MAX_IO];
        tensor_response(&r, t, pt, shape, raw, m, ver, q, &run);
        if (stream) {
            Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
            sr.infer_response = &r;
            code = rs_grpc_emit(o, &sr.base, msg, n);
        } else {
            code = rs_grpc_emit(o, &r.base, msg, n);
        }
    }
    tensor_run_free(&run);
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

