/* Fuzz target for the gRPC front end's decoders: the frame decoder (serve/grpc_frame.c) and every
 * method's protobuf request decoding and handling (serve/grpc_methods.c) on a small model behind the
 * real scheduler. The first byte picks the method; the rest is a byte stream cut into gRPC messages
 * by rs_grpc_frame_next (cap 4096), each passed to rs_grpc_call. Every call must end in a known gRPC
 * code; a unary success emits exactly one message that parses as that method's response (ModelInfer's
 * with outputs of the model's shape), a failure carries a message; a stream reports failures in-band. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/nn/spec.h"
#include "fuzz.h"
#include "onnx/export.h"
#include "serve/grpc_internal.h"
#include "serve/grpc_service.pb-c.h"

static rs_serve_server *server;

static void setup(void)
{
    static char repo[] = "/tmp/rs-fuzz-grpc-XXXXXX";
    if (!mkdtemp(repo)) __builtin_trap();
    char p[256];
    snprintf(p, sizeof p, "%s/f", repo);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/f/1", repo);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/f/1/model.onnx", repo);
    rs_model *m;
    rs_err e = {0};
    if (rs_model_parse("mlp 3-5-2", "f", rs_device_cpu(), NULL, 1, &m, NULL, &e) || rs_onnx_export(m, p, 0, &e))
        __builtin_trap();
    rs_model_free(m);
    snprintf(p, sizeof p, "%s/f/config.pbtxt", repo);
    FILE *f = fopen(p, "w");
    if (!f) __builtin_trap();
    fputs("max_batch_size: 4\ninstance_group [ { count: 2 } ]\ndynamic_batching { }\n", f);
    fclose(f);
    rs_serve_opts o;
    rs_serve_opts_init(&o);
    o.repo = repo;
    o.http_port = o.metrics_port = o.grpc_port = -1;
    if (rs_serve_start(&o, &server, &e)) __builtin_trap();
    /* loaded: the files may go (the index then answers with an error, which the fuzzer accepts) */
    unlink(p);
    snprintf(p, sizeof p, "%s/f/1/model.onnx", repo);
    unlink(p);
    snprintf(p, sizeof p, "%s/f/1", repo);
    rmdir(p);
    snprintf(p, sizeof p, "%s/f", repo);
    rmdir(p);
    rmdir(repo);
}

typedef struct out {
    int count;
    rs_grpc_method m;
} out;

static void check_response(rs_grpc_method m, const uint8_t *b, size_t n)
{
    ProtobufCMessage *r = NULL;
    switch (m) {
    case RS_GRPC_SERVER_LIVE:
    case RS_GRPC_SERVER_READY: r = (ProtobufCMessage *)inference__server_live_response__unpack(NULL, n, b); break;
    case RS_GRPC_MODEL_READY: r = (ProtobufCMessage *)inference__model_ready_response__unpack(NULL, n, b); break;
    case RS_GRPC_SERVER_METADATA: r = (ProtobufCMessage *)inference__server_metadata_response__unpack(NULL, n, b); break;
    case RS_GRPC_MODEL_METADATA: r = (ProtobufCMessage *)inference__model_metadata_response__unpack(NULL, n, b); break;
    case RS_GRPC_MODEL_CONFIG: r = (ProtobufCMessage *)inference__model_config_response__unpack(NULL, n, b); break;
    case RS_GRPC_MODEL_STATISTICS: r = (ProtobufCMessage *)inference__model_statistics_response__unpack(NULL, n, b); break;
    case RS_GRPC_REPOSITORY_INDEX: r = (ProtobufCMessage *)inference__repository_index_response__unpack(NULL, n, b); break;
    case RS_GRPC_MODEL_INFER: {
        Inference__ModelInferResponse *x = inference__model_infer_response__unpack(NULL, n, b);
        if (!x || x->n_outputs != 1 || x->n_raw_output_contents != 1 || x->outputs[0]->n_shape != 2) __builtin_trap();
        int64_t B = x->outputs[0]->shape[0];
        if (B < 1 || B > 4 || x->outputs[0]->shape[1] != 2 || x->raw_output_contents[0].len != (size_t)B * 2 * 4)
            __builtin_trap();
        r = &x->base;
        break;
    }
    case RS_GRPC_MODEL_STREAM_INFER: {
        Inference__ModelStreamInferResponse *x = inference__model_stream_infer_response__unpack(NULL, n, b);
        if (!x || (!x->error_message[0] && (!x->infer_response || x->infer_response->n_raw_output_contents != 1)))
            __builtin_trap();
        r = &x->base;
        break;
    }
    default: __builtin_trap();
    }
    if (!r) __builtin_trap();
    protobuf_c_message_free_unpacked(r, NULL);
}

static void on_emit(void *ud, const uint8_t *b, size_t n)
{
    out *o = ud;
    o->count++;
    check_response(o->m, b, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server) setup();
    if (size < 1 || size > 65536) return 0;
    /* load and unload would re-read the repository on every input: the fuzzer skips them (their
     * requests decode like ModelReady's, which it covers) */
    static const rs_grpc_method pick[] = {
        RS_GRPC_SERVER_LIVE, RS_GRPC_SERVER_READY, RS_GRPC_MODEL_READY, RS_GRPC_SERVER_METADATA,
        RS_GRPC_MODEL_METADATA, RS_GRPC_MODEL_INFER, RS_GRPC_MODEL_STREAM_INFER, RS_GRPC_MODEL_CONFIG,
        RS_GRPC_MODEL_STATISTICS, RS_GRPC_REPOSITORY_INDEX};
    rs_grpc_method m = pick[data[0] % (sizeof pick / sizeof *pick)];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    for (int calls = 0; calls < 8; calls++) {
        const uint8_t *msg;
        size_t len, used;
        rs_grpc_code code;
        char err[512];
        rs_grpc_next r = rs_grpc_frame_next(p, n, 4096, &msg, &len, &used, &code, err, sizeof err);
        if (r == RS_GRPC_FRAME_MORE) break;
        if (r == RS_GRPC_FRAME_ERR) {
            if (!err[0] || code == RS_GRPC_OK) __builtin_trap();
            break;
        }
        if (used > n || len > 4096) __builtin_trap();
        out o = {0, m};
        rs_grpc_sink sink = {on_emit, NULL, &o};
        code = rs_grpc_call(server, m, msg, len, &sink, err, sizeof err);
        if (m == RS_GRPC_MODEL_STREAM_INFER) {
            if (code != RS_GRPC_OK || o.count != 1) __builtin_trap();
        } else if (code == RS_GRPC_OK) {
            if (o.count != 1) __builtin_trap();
        } else if (o.count != 0 || !err[0] ||
                   (code != RS_GRPC_INVALID_ARGUMENT && code != RS_GRPC_UNAVAILABLE && code != RS_GRPC_UNIMPLEMENTED &&
                    code != RS_GRPC_RESOURCE_EXHAUSTED && code != RS_GRPC_INTERNAL)) {
            __builtin_trap();
        }
        if (getenv("RS_FUZZ_SHOW")) fprintf(stderr, "method %d: code %d %s\n", (int)m, (int)code, err);
        p += used;
        n -= used;
    }
    return 0;
}

/* Seeds: each method's request packed here, framed, after the method byte. */
static uint8_t seed_buf[16][512];
static rs_fuzz_seed seed_list[16];

static size_t add_seed(size_t k, uint8_t method_byte, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    if (len + 6 > sizeof seed_buf[k]) __builtin_trap();
    seed_buf[k][0] = method_byte;
    rs_grpc_frame_prefix(seed_buf[k] + 1, len);
    protobuf_c_message_pack(m, seed_buf[k] + 6);
    seed_list[k].data = seed_buf[k];
    seed_list[k].size = len + 6;
    return k + 1;
}

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    size_t k = 0;
    float x[6] = {1, 2, 3, -1, 0.5f, 4};
    int64_t shape[2] = {2, 3};
    ProtobufCBinaryData raw = {sizeof x, (uint8_t *)x};
    Inference__ModelInferRequest q = INFERENCE__MODEL_INFER_REQUEST__INIT;
    Inference__ModelInferRequest__InferInputTensor t = INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT, *pt = &t;
    Inference__InferTensorContents tc = INFERENCE__INFER_TENSOR_CONTENTS__INIT;
    Inference__InferParameter pv = INFERENCE__INFER_PARAMETER__INIT;
    Inference__InferParameterEntry pe = INFERENCE__INFER_PARAMETER_ENTRY__INIT, *ppe = &pe;
    q.model_name = "f";
    q.id = "1";
    q.n_inputs = 1;
    q.inputs = &pt;
    t.name = "input";
    t.datatype = "FP32";
    t.n_shape = 2;
    t.shape = shape;
    q.n_raw_input_contents = 1;
    q.raw_input_contents = &raw;
    k = add_seed(k, 5, &q.base);  /* ModelInfer, raw */
    k = add_seed(k, 6, &q.base);  /* ModelStreamInfer */
    q.n_raw_input_contents = 0;
    tc.n_fp32_contents = 6;
    tc.fp32_contents = x;
    t.contents = &tc;
    pv.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    pv.int64_param = 3;
    pe.key = "max_tokens";
    pe.value = &pv;
    q.n_parameters = 1;
    q.parameters = &ppe;
    k = add_seed(k, 5, &q.base);  /* ModelInfer, typed contents and a parameter */
    Inference__ModelMetadataRequest mq = INFERENCE__MODEL_METADATA_REQUEST__INIT;
    mq.name = "f";
    mq.version = "1";
    k = add_seed(k, 4, &mq.base);  /* ModelMetadata */
    k = add_seed(k, 7, &mq.base);  /* ModelConfig (same fields) */
    k = add_seed(k, 8, &mq.base);  /* ModelStatistics (same fields) */
    k = add_seed(k, 2, &mq.base);  /* ModelReady (same fields) */
    Inference__RepositoryIndexRequest ri = INFERENCE__REPOSITORY_INDEX_REQUEST__INIT;
    ri.ready = 1;
    k = add_seed(k, 9, &ri.base);
    Inference__ServerLiveRequest sl = INFERENCE__SERVER_LIVE_REQUEST__INIT;
    k = add_seed(k, 0, &sl.base);
    k = add_seed(k, 3, &sl.base);
    *seeds = seed_list;
    return k;
}
