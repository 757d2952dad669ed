/* The gRPC front end with no Python: hand-built frames through the frame decoder (whole, split byte
 * by byte, two in one buffer, compressed, over the cap), grpc-message's percent-encoding, the method
 * table, then the methods on an in-process server with requests packed here: ModelInfer against the
 * model run in-process, malformed protobuf, unknown model, wrong shape, statistics, and garbage bytes
 * sent to the gRPC port (the connection is dropped, the server goes on). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/nn/spec.h"
#include "onnx/export.h"
#include "rs_test.h"
#include "serve/grpc_internal.h"
#include "serve/grpc_service.pb-c.h"

#define NIN 4
#define NOUT 3

static void frames(void)
{
    const uint8_t *msg;
    size_t len, used;
    rs_grpc_code code;
    char err[256];
    uint8_t two[5 + 3 + 5 + 0];
    rs_grpc_frame_prefix(two, 3);
    memcpy(two + 5, "abc", 3);
    rs_grpc_frame_prefix(two + 8, 0);
    RS_CHECK(two[0] == 0 && two[1] == 0 && two[4] == 3, "prefix bytes");
    /* every strict prefix of the first message is "more" */
    for (size_t n = 0; n < 8; n++)
        RS_CHECK(rs_grpc_frame_next(two, n, 100, &msg, &len, &used, &code, err, sizeof err) == RS_GRPC_FRAME_MORE,
                 "%zu bytes are not a message yet", n);
    RS_CHECK(rs_grpc_frame_next(two, sizeof two, 100, &msg, &len, &used, &code, err, sizeof err) == RS_GRPC_FRAME_MSG &&
                 len == 3 && used == 8 && !memcmp(msg, "abc", 3),
             "first message");
    RS_CHECK(rs_grpc_frame_next(two + used, sizeof two - used, 100, &msg, &len, &used, &code, err, sizeof err) ==
                     RS_GRPC_FRAME_MSG &&
                 len == 0 && used == 5,
             "an empty message (ServerLiveRequest) is a message");
    uint8_t big[5] = {0, 0x01, 0, 0, 0}; /* 16 MB announced */
    RS_CHECK(rs_grpc_frame_next(big, 5, 1 << 20, &msg, &len, &used, &code, err, sizeof err) == RS_GRPC_FRAME_ERR &&
                 code == RS_GRPC_RESOURCE_EXHAUSTED && strstr(err, "larger than max"),
             "over the cap from the prefix alone: %s", err);
    uint8_t comp[6] = {1, 0, 0, 0, 1, 'x'};
    RS_CHECK(rs_grpc_frame_next(comp, 6, 100, &msg, &len, &used, &code, err, sizeof err) == RS_GRPC_FRAME_ERR &&
                 code == RS_GRPC_UNIMPLEMENTED,
             "compressed flag");
    comp[0] = 7;
    RS_CHECK(rs_grpc_frame_next(comp, 6, 100, &msg, &len, &used, &code, err, sizeof err) == RS_GRPC_FRAME_ERR &&
                 code == RS_GRPC_INTERNAL,
             "a flag that is neither 0 nor 1");

    char enc[64];
    rs_grpc_percent_encode("50% of caf\xc3\xa9\n", enc, sizeof enc);
    RS_CHECK(!strcmp(enc, "50%25 of caf%C3%A9%0A"), "percent-encoding: %s", enc);
    rs_grpc_percent_encode("%%%%", enc, 7); /* cut at a whole escape */
    RS_CHECK(!strcmp(enc, "%25%25"), "cut short: %s", enc);

    RS_CHECK(rs_grpc_method_of("/inference.GRPCInferenceService/ModelInfer") == RS_GRPC_MODEL_INFER, "ModelInfer");
    RS_CHECK(rs_grpc_method_of("/inference.GRPCInferenceService/ModelStreamInfer") == RS_GRPC_MODEL_STREAM_INFER,
             "ModelStreamInfer");
    RS_CHECK(rs_grpc_method_of("/inference.GRPCInferenceService/ModelInferX") == RS_GRPC_NONE, "no prefix match");
    RS_CHECK(rs_grpc_method_of("/other.Service/ModelInfer") == RS_GRPC_NONE, "another service");
}

typedef struct got {
    uint8_t *b; /* owned: the last message */
    size_t n;
    int count;
} got;

static void on_emit(void *ud, const uint8_t *m, size_t n)
{
    got *g = ud;
    free(g->b);
    g->b = malloc(n + 1);
    memcpy(g->b, m, n);
    g->n = n;
    g->count++;
}

static rs_grpc_code call(rs_serve_server *s, rs_grpc_method m, const ProtobufCMessage *req, got *g, char *err)
{
    size_t n = protobuf_c_message_get_packed_size(req);
    uint8_t *b = malloc(n + 1);
    protobuf_c_message_pack(req, b);
    rs_grpc_sink sink = {on_emit, NULL, g};
    free(g->b);
    memset(g, 0, sizeof *g);
    rs_grpc_code c = rs_grpc_call(s, m, b, n, &sink, err, 512);
    free(b);
    return c;
}

static void write_file(const char *p, const char *s)
{
    FILE *f = fopen(p, "w");
    fputs(s, f);
    fclose(f);
}

/* Garbage on the gRPC port: the server closes that connection (after a GOAWAY at most) within 5 s. */
static bool garbage_dropped(int port, const char *bytes, size_t n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return false;
    }
    if (send(fd, bytes, n, MSG_NOSIGNAL) != (ssize_t)n) {
        close(fd);
        return false;
    }
    char buf[4096];
    bool closed = false;
    for (int i = 0; i < 50 && !closed; i++) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        closed = r <= 0;
    }
    close(fd);
    return closed;
}

int main(void)
{
    frames();

    char repo[] = "/tmp/rs-test-grpc-XXXXXX";
    if (!mkdtemp(repo)) RS_SKIP("no temporary folder");
    rs_model *ref;
    rs_err e = {0};
    RS_CHECK(rs_model_parse("mlp 4-8-3", "m", rs_device_cpu(), NULL, 5, &ref, NULL, &e) == RS_OK, "%s", e.msg);
    rs_model_set_training(ref, false);
    char p[512];
    snprintf(p, sizeof p, "%s/m", repo);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/m/1", repo);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/m/1/model.onnx", repo);
    RS_CHECK(rs_onnx_export(ref, p, 0, &e) == RS_OK, "%s", e.msg);
    snprintf(p, sizeof p, "%s/m/config.pbtxt", repo);
    write_file(p, "max_batch_size: 8\ndynamic_batching { }\n");

    rs_serve_opts o;
    rs_serve_opts_init(&o);
    o.repo = repo;
    o.http_port = -1;
    o.metrics_port = -1;
    o.grpc_port = 0;
    o.body_limit = 1 << 16;
    rs_serve_server *s = NULL;
    RS_CHECK(rs_serve_start(&o, &s, &e) == RS_OK, "%s", e.msg);
    if (!s) return rs_test_finish("serve-grpc");
    got g = {0};
    char err[512];

    Inference__ServerLiveRequest live = INFERENCE__SERVER_LIVE_REQUEST__INIT;
    RS_CHECK(call(s, RS_GRPC_SERVER_LIVE, &live.base, &g, err) == RS_GRPC_OK && g.count == 1, "live: %s", err);
    Inference__ServerLiveResponse *lr = inference__server_live_response__unpack(NULL, g.n, g.b);
    RS_CHECK(lr && lr->live, "live is true");
    inference__server_live_response__free_unpacked(lr, NULL);

    /* ModelInfer: raw_input_contents, then fp32_contents, each against the model run here */
    float x[2 * NIN], want[2 * NOUT];
    for (int i = 0; i < 2 * NIN; i++) x[i] = 0.25f * (float)i - 0.9f;
    const float *o_ref;
    RS_CHECK(rs_model_forward(ref, x, 2, &o_ref, &e) == RS_OK, "%s", e.msg);
    memcpy(want, o_ref, sizeof want);
    Inference__ModelInferRequest q = INFERENCE__MODEL_INFER_REQUEST__INIT;
    Inference__ModelInferRequest__InferInputTensor t = INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT, *pt = &t;
    int64_t shape[2] = {2, NIN};
    ProtobufCBinaryData raw = {sizeof x, (uint8_t *)x};
    q.model_name = "m";
    q.id = "req-7";
    q.n_inputs = 1;
    q.inputs = &pt;
    t.name = "input";
    t.datatype = "FP32";
    t.n_shape = 2;
    t.shape = shape;
    q.n_raw_input_contents = 1;
    q.raw_input_contents = &raw;
    for (int form = 0; form < 2; form++) {
        Inference__InferTensorContents tc = INFERENCE__INFER_TENSOR_CONTENTS__INIT;
        if (form == 1) {
            q.n_raw_input_contents = 0;
            tc.n_fp32_contents = 2 * NIN;
            tc.fp32_contents = x;
            t.contents = &tc;
        }
        RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &q.base, &g, err) == RS_GRPC_OK && g.count == 1, "infer: %s", err);
        Inference__ModelInferResponse *r = inference__model_infer_response__unpack(NULL, g.n, g.b);
        RS_CHECK(r && r->n_outputs == 1 && r->n_raw_output_contents == 1 && !strcmp(r->id, "req-7") &&
                     !strcmp(r->model_version, "1"),
                 "infer response");
        if (r && r->n_raw_output_contents == 1 && r->n_outputs == 1) {
            RS_CHECK(r->outputs[0]->n_shape == 2 && r->outputs[0]->shape[0] == 2 && r->outputs[0]->shape[1] == NOUT &&
                         !strcmp(r->outputs[0]->datatype, "FP32"),
                     "output shape");
            RS_CHECK(r->raw_output_contents[0].len == sizeof want, "output bytes %zu", r->raw_output_contents[0].len);
            float y[2 * NOUT];
            memcpy(y, r->raw_output_contents[0].data, sizeof y);
            for (int i = 0; i < 2 * NOUT; i++) RS_CHECK_CLOSE(y[i], want[i], 1e-5, 1e-5, "output value");
        }
        inference__model_infer_response__free_unpacked(r, NULL);
        t.contents = NULL;
    }
    q.n_raw_input_contents = 1;

    /* what the client gets wrong */
    shape[1] = NIN + 1;
    RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &q.base, &g, err) == RS_GRPC_INVALID_ARGUMENT && g.count == 0 &&
                 strstr(err, "unexpected shape for input 'input'"),
             "wrong shape: %s", err);
    shape[1] = NIN;
    raw.len = sizeof x - 4;
    RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &q.base, &g, err) == RS_GRPC_INVALID_ARGUMENT && strstr(err, "raw_input"),
             "short raw data: %s", err);
    raw.len = sizeof x;
    q.model_name = "nope";
    RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &q.base, &g, err) == RS_GRPC_UNAVAILABLE &&
                 strstr(err, "Request for unknown model: 'nope' is not found"),
             "unknown model: %s", err);
    q.model_name = "../m";
    RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &q.base, &g, err) == RS_GRPC_INVALID_ARGUMENT, "traversal: %s", err);
    q.model_name = "m";
    static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 'x'};
    rs_grpc_sink sink = {on_emit, NULL, &g};
    RS_CHECK(rs_grpc_call(s, RS_GRPC_MODEL_INFER, junk, sizeof junk, &sink, err, sizeof err) ==
                     RS_GRPC_INVALID_ARGUMENT &&
                 strstr(err, "not a valid"),
             "malformed protobuf: %s", err);
    /* the same in a stream: an in-band error_message, and the stream goes on */
    memset(&g, 0, sizeof g);
    RS_CHECK(rs_grpc_call(s, RS_GRPC_MODEL_STREAM_INFER, junk, sizeof junk, &sink, err, sizeof err) == RS_GRPC_OK &&
                 g.count == 1,
             "stream: malformed protobuf answered in-band");
    Inference__ModelStreamInferResponse *sr = inference__model_stream_infer_response__unpack(NULL, g.n, g.b);
    RS_CHECK(sr && strstr(sr->error_message, "not valid protobuf"), "stream error_message");
    inference__model_stream_infer_response__free_unpacked(sr, NULL);

    /* statistics: the two successful requests of 2 samples each; the wrong shape and the short data failed
     * (a request for a model that does not exist is counted nowhere, as in Triton) */
    Inference__ModelStatisticsRequest sq = INFERENCE__MODEL_STATISTICS_REQUEST__INIT;
    sq.name = "m";
    RS_CHECK(call(s, RS_GRPC_MODEL_STATISTICS, &sq.base, &g, err) == RS_GRPC_OK, "stats: %s", err);
    Inference__ModelStatisticsResponse *st = inference__model_statistics_response__unpack(NULL, g.n, g.b);
    RS_CHECK(st && st->n_model_stats == 1 && st->model_stats[0]->inference_count == 4 &&
                 st->model_stats[0]->inference_stats->success->count == 2 &&
                 st->model_stats[0]->inference_stats->fail->count == 2,
             "statistics count what ran and what failed: %llu %llu %llu", st ? (unsigned long long)st->model_stats[0]->inference_count : 0ULL, st ? (unsigned long long)st->model_stats[0]->inference_stats->success->count : 0ULL, st ? (unsigned long long)st->model_stats[0]->inference_stats->fail->count : 0ULL);
    inference__model_statistics_response__free_unpacked(st, NULL);

    /* config and metadata say what the repository does */
    Inference__ModelConfigRequest cq = INFERENCE__MODEL_CONFIG_REQUEST__INIT;
    cq.name = "m";
    RS_CHECK(call(s, RS_GRPC_MODEL_CONFIG, &cq.base, &g, err) == RS_GRPC_OK, "config: %s", err);
    Inference__ModelConfigResponse *cr = inference__model_config_response__unpack(NULL, g.n, g.b);
    RS_CHECK(cr && cr->config->max_batch_size == 8 && cr->config->n_input == 1 &&
                 cr->config->input[0]->data_type == INFERENCE__DATA_TYPE__TYPE_FP32 &&
                 cr->config->input[0]->n_dims == 1 && cr->config->input[0]->dims[0] == NIN &&
                 cr->config->dynamic_batching,
             "config");
    inference__model_config_response__free_unpacked(cr, NULL);

    /* garbage on the socket: dropped; the server still answers */
    int port = rs_serve_grpc_port(s);
    RS_CHECK(port > 0, "grpc port");
    static const char http1[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    RS_CHECK(garbage_dropped(port, http1, sizeof http1 - 1), "HTTP/1.1 on the gRPC port is dropped");
    static const char half[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04\x08\x00\x00\x00\x00\x00zzzzzzzzzz";
    RS_CHECK(garbage_dropped(port, half, sizeof half - 1), "a bad frame after the preface is dropped");
    RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &q.base, &g, err) == RS_GRPC_OK, "still serving: %s", err);

    free(g.b);
    rs_serve_stop(s);
    rs_model_free(ref);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", repo);
    if (system(cmd)) {}
    return rs_test_finish("serve-grpc");
}
