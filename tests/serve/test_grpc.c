/* The gRPC front end with no Python: hand-built frames through the frame decoder (whole, split byte
 * by byte, two in one buffer, compressed, over the cap), grpc-message's percent-encoding, the method
 * table, then the methods on an in-process server with requests packed here: ModelInfer against the
 * model run in-process, malformed protobuf, unknown model, wrong shape, statistics, and garbage bytes
 * sent to the gRPC port (the connection is dropped, the server goes on); then over a real socket with
 * nghttp2's client: ModelInfer, and a GPT's ModelStreamInfer whose client vanishes after three tokens
 * (under ASan this shows the server frees what the stream held). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/ckpt/checkpoint.h"
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

/* ---- a minimal gRPC client over nghttp2 ---- */

typedef struct client {
    int fd;
    nghttp2_session *h2;
    const uint8_t *req;
    size_t req_n, req_off;
    bool closed;
    int status;
    uint8_t body[1 << 16];
    size_t body_n;
    int messages;   /* whole response messages seen */
    size_t skip;    /* bytes left of the current message */
    int pend;       /* prefix bytes seen of the next one */
} client;

static ssize_t cl_send(nghttp2_session *s, const uint8_t *d, size_t n, int flags, void *ud)
{
    (void)s, (void)flags;
    ssize_t r = send(((client *)ud)->fd, d, n, MSG_NOSIGNAL);
    return r < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : r;
}

static ssize_t cl_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                       nghttp2_data_source *src, void *ud)
{
    (void)s, (void)id, (void)src;
    client *c = ud;
    size_t n = c->req_n - c->req_off < len ? c->req_n - c->req_off : len;
    memcpy(buf, c->req + c->req_off, n);
    c->req_off += n;
    if (c->req_off == c->req_n) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int cl_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t n, void *ud)
{
    (void)s, (void)flags, (void)id;
    client *c = ud;
    if (c->body_n + n <= sizeof c->body) memcpy(c->body + c->body_n, d, n);
    c->body_n += n;
    for (size_t i = 0; i < n; i++) {
        if (c->skip) {
            c->skip--;
            continue;
        }
        if (++c->pend == 5) {
            const uint8_t *h = c->body + c->body_n - n + i - 4;
            size_t len = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
            c->skip = c->body_n <= sizeof c->body ? len : 0;
            c->pend = 0;
            c->messages++;
        }
    }
    return 0;
}

static int cl_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl, const uint8_t *v,
                     size_t vl, uint8_t flags, void *ud)
{
    (void)s, (void)f, (void)flags, (void)vl;
    if (nl == 11 && !memcmp(name, "grpc-status", 11)) ((client *)ud)->status = atoi((const char *)v);
    if (nl == 12 && !memcmp(name, "grpc-message", 12) && getenv("RS_TEST_SHOW")) fprintf(stderr, "%.*s\n", (int)vl, v);
    return 0;
}

static int cl_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    (void)s, (void)id, (void)code;
    ((client *)ud)->closed = true;
    return 0;
}

static bool cl_open(client *c, int port)
{
    memset(c, 0, sizeof *c);
    c->status = -1;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a)) return false;
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, cl_send);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, cl_data);
    nghttp2_session_callbacks_set_on_header_callback(cb, cl_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, cl_close);
    nghttp2_session_client_new(&c->h2, cb, c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, NULL, 0);
    return true;
}

static void cl_free(client *c)
{
    nghttp2_session_del(c->h2);
    close(c->fd);
}

/* Sends msg (packed here, framed) to method; runs until the call closed or `until` messages came. */
static bool cl_call(client *c, const char *method, const ProtobufCMessage *msg, int until)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *b = malloc(n + 5);
    rs_grpc_frame_prefix(b, n);
    protobuf_c_message_pack(msg, b + 5);
    c->req = b;
    c->req_n = n + 5;
    c->req_off = 0;
    c->closed = false;
    c->status = -1;
    c->body_n = 0;
    c->messages = 0;
    c->skip = 0;
    c->pend = 0;
    char path[128];
    snprintf(path, sizeof path, "/inference.GRPCInferenceService/%s", method);
    const nghttp2_nv hd[] = {
        {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
        {(uint8_t *)":authority", (uint8_t *)"127.0.0.1", 10, 9, 0},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
        {(uint8_t *)"te", (uint8_t *)"trailers", 2, 8, 0},
    };
    nghttp2_data_provider dp = {.read_callback = cl_read};
    bool ok = nghttp2_submit_request(c->h2, NULL, hd, 6, &dp, NULL) > 0;
    uint8_t buf[16384];
    while (ok && !c->closed && (!until || c->messages < until)) {
        ok = nghttp2_session_send(c->h2) == 0;
        struct pollfd p = {c->fd, POLLIN, 0};
        if (ok && poll(&p, 1, 30000) <= 0) ok = false;
        ssize_t r = ok ? recv(c->fd, buf, sizeof buf, 0) : -1;
        ok = r > 0 && nghttp2_session_mem_recv(c->h2, buf, (size_t)r) >= 0;
    }
    free(b);
    return ok;
}

/* A GPT's folder: weights (spec in the metadata), its vocabulary, a decoupled config. */
static void write_gpt(const char *repo)
{
    char p[512];
    rs_model *g;
    rs_err e = {0};
    snprintf(p, sizeof p, "%s/g", repo);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/g/1", repo);
    mkdir(p, 0755);
    RS_CHECK(rs_model_parse("gpt layers=1 heads=2 dim=16 ctx=16 vocab=4", "g", rs_device_cpu(), NULL, 3, &g, NULL,
                            &e) == RS_OK,
             "%s", e.msg);
    snprintf(p, sizeof p, "%s/g/1/model.safetensors", repo);
    RS_CHECK(rs_ckpt_save_model(p, g, &e) == RS_OK, "%s", e.msg);
    rs_model_free(g);
    snprintf(p, sizeof p, "%s/g/1/vocab.json", repo);
    write_file(p, "{\"chars\": [32, 97, 98, 99]}");
    snprintf(p, sizeof p, "%s/g/config.pbtxt", repo);
    write_file(p, "model_transaction_policy { decoupled: true }\n");
}

static void over_the_socket(rs_serve_server *s, const Inference__ModelInferRequest *q)
{
    int port = rs_serve_grpc_port(s);
    client c;
    RS_CHECK(cl_open(&c, port) && cl_call(&c, "ModelInfer", &q->base, 0), "ModelInfer over HTTP/2");
    RS_CHECK(c.status == 0 && c.messages == 1 && c.body_n > 5, "grpc-status %d, %d messages", c.status, c.messages);
    Inference__ModelInferResponse *r =
        c.body_n > 5 && c.body_n <= sizeof c.body ? inference__model_infer_response__unpack(NULL, c.body_n - 5, c.body + 5)
                                                  : NULL;
    RS_CHECK(r && r->n_raw_output_contents == 1 && r->raw_output_contents[0].len == 2 * NOUT * sizeof(float),
             "the response over the socket");
    inference__model_infer_response__free_unpacked(r, NULL);
    /* an unknown method: UNIMPLEMENTED in the trailers, the connection goes on */
    RS_CHECK(cl_call(&c, "NoSuchMethod", &q->base, 0) && c.status == RS_GRPC_UNIMPLEMENTED, "unknown method: %d",
             c.status);
    /* a message over the cap (64 KB here): RESOURCE_EXHAUSTED from its prefix, the rest dropped */
    Inference__ModelInferRequest big = *q;
    ProtobufCBinaryData huge = {200000, calloc(1, 200000)};
    big.raw_input_contents = &huge;
    RS_CHECK(cl_call(&c, "ModelInfer", &big.base, 0) && c.status == RS_GRPC_RESOURCE_EXHAUSTED,
             "over the cap: status %d", c.status);
    free(huge.data);
    RS_CHECK(cl_call(&c, "ModelInfer", &q->base, 0) && c.status == 0 && c.messages == 1,
             "the same connection answers the next call (status %d)", c.status);
    cl_free(&c);

    /* A generation the client walks away from after three tokens. */
    Inference__ModelInferRequest g = INFERENCE__MODEL_INFER_REQUEST__INIT;
    Inference__ModelInferRequest__InferInputTensor t = INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT, *pt = &t;
    Inference__InferParameter pv = INFERENCE__INFER_PARAMETER__INIT;
    Inference__InferParameterEntry pe = INFERENCE__INFER_PARAMETER_ENTRY__INIT, *ppe = &pe;
    int64_t one = 1;
    uint8_t text[] = {2, 0, 0, 0, 'a', 'b'};
    ProtobufCBinaryData raw = {sizeof text, text};
    g.model_name = "g";
    g.n_inputs = 1;
    g.inputs = &pt;
    t.name = "text_input";
    t.datatype = "BYTES";
    t.n_shape = 1;
    t.shape = &one;
    g.n_raw_input_contents = 1;
    g.raw_input_contents = &raw;
    pe.key = "max_tokens";
    pv.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    pv.int64_param = 100000;
    pe.value = &pv;
    g.n_parameters = 1;
    g.parameters = &ppe;
    RS_CHECK(cl_open(&c, port) && cl_call(&c, "ModelStreamInfer", &g.base, 3) && c.messages >= 3,
             "three tokens streamed (%d)", c.messages);
    cl_free(&c); /* gone, mid-stream */
    /* the server streams on: a short generation on a new connection, one message per token */
    pv.int64_param = 7;
    RS_CHECK(cl_open(&c, port) && cl_call(&c, "ModelStreamInfer", &g.base, 0) && c.status == 0 && c.messages == 7,
             "after the vanished client: %d messages, status %d", c.messages, c.status);
    cl_free(&c);
}

/* A unary answer leaves in one send(): HEADERS, DATA and trailers together (one frame per send
 * cost the client a wake-up per frame), sent by the worker that ran the call. Counted on a front end
 * of its own, so nothing else writes on it. */
static void one_send_per_answer(rs_serve_server *s, const Inference__ModelInferRequest *q)
{
    rs_serve_grpc *gf = NULL;
    rs_err e = {0};
    RS_CHECK(rs_serve_grpc_start(s, "127.0.0.1", 0, 1 << 16, &gf, &e) == RS_OK, "%s", e.msg);
    if (!gf) return;
    client c;
    RS_CHECK(cl_open(&c, rs_serve_grpc_bound_port(gf)) && cl_call(&c, "ModelInfer", &q->base, 0) && c.status == 0,
             "the first call (settings exchanged)");
    uint64_t before = rs_serve_grpc_sends(gf);
    enum { CALLS = 5 };
    int ok = 0;
    for (int i = 0; i < CALLS; i++)
        ok += cl_call(&c, "ModelInfer", &q->base, 0) && c.status == 0 && c.messages == 1;
    RS_CHECK(ok == CALLS, "%d of %d calls answered", ok, CALLS);
    uint64_t sends = rs_serve_grpc_sends(gf) - before;
    RS_CHECK(sends == CALLS, "%d unary answers took %llu sends (one each: HEADERS, DATA and trailers together)", CALLS,
             (unsigned long long)sends);
    /* an error's trailers-only answer too */
    before = rs_serve_grpc_sends(gf);
    RS_CHECK(cl_call(&c, "NoSuchMethod", &q->base, 0) && c.status == RS_GRPC_UNIMPLEMENTED, "unknown method");
    RS_CHECK(rs_serve_grpc_sends(gf) - before == 1, "an error's answer in %llu sends",
             (unsigned long long)(rs_serve_grpc_sends(gf) - before));
    cl_free(&c);
    rs_serve_grpc_stop(gf);
}

/* The ModelInfer request the cases share: 2 samples of model m, raw_input_contents, id "req-7". The
 * message points into the struct, so it stays where main put it. */
typedef struct infer_req {
    Inference__ModelInferRequest q;
    Inference__ModelInferRequest__InferInputTensor t, *pt;
    int64_t shape[2];
    ProtobufCBinaryData raw;
    float x[2 * NIN];
} infer_req;

static void infer_req_init(infer_req *r)
{
    for (int i = 0; i < 2 * NIN; i++) r->x[i] = 0.25f * (float)i - 0.9f;
    r->q = (Inference__ModelInferRequest)INFERENCE__MODEL_INFER_REQUEST__INIT;
    r->t = (Inference__ModelInferRequest__InferInputTensor)INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
    r->pt = &r->t;
    r->shape[0] = 2;
    r->shape[1] = NIN;
    r->raw = (ProtobufCBinaryData){sizeof r->x, (uint8_t *)r->x};
    r->q.model_name = "m";
    r->q.id = "req-7";
    r->q.n_inputs = 1;
    r->q.inputs = &r->pt;
    r->t.name = "input";
    r->t.datatype = "FP32";
    r->t.n_shape = 2;
    r->t.shape = r->shape;
    r->q.n_raw_input_contents = 1;
    r->q.raw_input_contents = &r->raw;
}

/* REPO/m: ref exported, batching up to 8. */
static void write_mlp(const char *repo, rs_model *ref)
{
    char p[512];
    rs_err e = {0};
    snprintf(p, sizeof p, "%s/m", repo);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/m/1", repo);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/m/1/model.onnx", repo);
    RS_CHECK(rs_onnx_export(ref, p, 0, &e) == RS_OK, "%s", e.msg);
    snprintf(p, sizeof p, "%s/m/config.pbtxt", repo);
    write_file(p, "max_batch_size: 8\ndynamic_batching { }\n");
}

static void check_live(rs_serve_server *s, got *g)
{
    char err[512];
    Inference__ServerLiveRequest live = INFERENCE__SERVER_LIVE_REQUEST__INIT;
    RS_CHECK(call(s, RS_GRPC_SERVER_LIVE, &live.base, g, err) == RS_GRPC_OK && g->count == 1, "live: %s", err);
    Inference__ServerLiveResponse *lr = inference__server_live_response__unpack(NULL, g->n, g->b);
    RS_CHECK(lr && lr->live, "live is true");
    inference__server_live_response__free_unpacked(lr, NULL);
}

/* ModelInfer: raw_input_contents, then fp32_contents, each against ref run here. */
static void check_infer(rs_serve_server *s, rs_model *ref, infer_req *rq, got *g)
{
    char err[512];
    rs_err e = {0};
    float want[2 * NOUT];
    const float *o_ref;
    RS_CHECK(rs_model_forward(ref, rq->x, 2, &o_ref, &e) == RS_OK, "%s", e.msg);
    if (e.msg[0]) return;
    memcpy(want, o_ref, sizeof want);
    for (int form = 0; form < 2; form++) {
        Inference__InferTensorContents tc = INFERENCE__INFER_TENSOR_CONTENTS__INIT;
        if (form == 1) {
            rq->q.n_raw_input_contents = 0;
            tc.n_fp32_contents = 2 * NIN;
            tc.fp32_contents = rq->x;
            rq->t.contents = &tc;
        }
        RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &rq->q.base, g, err) == RS_GRPC_OK && g->count == 1, "infer: %s", err);
        Inference__ModelInferResponse *r = inference__model_infer_response__unpack(NULL, g->n, g->b);
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
        rq->t.contents = NULL;
    }
    rq->q.n_raw_input_contents = 1;
}

/* What the client gets wrong: shape, data length, model name, protobuf (unary and in a stream). */
static void check_client_errors(rs_serve_server *s, infer_req *rq, got *g)
{
    char err[512];
    rq->shape[1] = NIN + 1;
    RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &rq->q.base, g, err) == RS_GRPC_INVALID_ARGUMENT && g->count == 0 &&
                 strstr(err, "unexpected shape for input 'input'"),
             "wrong shape: %s", err);
    rq->shape[1] = NIN;
    rq->raw.len = sizeof rq->x - 4;
    RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &rq->q.base, g, err) == RS_GRPC_INVALID_ARGUMENT &&
                 strstr(err, "byte size mismatch"),
             "short raw data: %s", err);
    rq->raw.len = sizeof rq->x;
    rq->q.model_name = "nope";
    RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &rq->q.base, g, err) == RS_GRPC_UNAVAILABLE &&
                 strstr(err, "Request for unknown model: 'nope' is not found"),
             "unknown model: %s", err);
    rq->q.model_name = "../m";
    RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &rq->q.base, g, err) == RS_GRPC_INVALID_ARGUMENT, "traversal: %s", err);
    rq->q.model_name = "m";
    static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 'x'};
    rs_grpc_sink sink = {on_emit, NULL, g};
    RS_CHECK(rs_grpc_call(s, RS_GRPC_MODEL_INFER, junk, sizeof junk, &sink, err, sizeof err) ==
                     RS_GRPC_INVALID_ARGUMENT &&
                 strstr(err, "not a valid"),
             "malformed protobuf: %s", err);
    /* the same in a stream: an in-band error_message, and the stream goes on */
    free(g->b);
    memset(g, 0, sizeof *g);
    RS_CHECK(rs_grpc_call(s, RS_GRPC_MODEL_STREAM_INFER, junk, sizeof junk, &sink, err, sizeof err) == RS_GRPC_OK &&
                 g->count == 1,
             "stream: malformed protobuf answered in-band");
    Inference__ModelStreamInferResponse *sr = inference__model_stream_infer_response__unpack(NULL, g->n, g->b);
    RS_CHECK(sr && strstr(sr->error_message, "not valid protobuf"), "stream error_message");
    inference__model_stream_infer_response__free_unpacked(sr, NULL);
}

/* Statistics: the two successful requests of 2 samples each; the wrong shape and the short data failed
 * (a request for a model that does not exist is counted nowhere, as in Triton). */
static void check_statistics(rs_serve_server *s, got *g)
{
    char err[512];
    Inference__ModelStatisticsRequest sq = INFERENCE__MODEL_STATISTICS_REQUEST__INIT;
    sq.name = "m";
    RS_CHECK(call(s, RS_GRPC_MODEL_STATISTICS, &sq.base, g, err) == RS_GRPC_OK, "stats: %s", err);
    Inference__ModelStatisticsResponse *st = inference__model_statistics_response__unpack(NULL, g->n, g->b);
    const Inference__ModelStatistics *ms = st && st->n_model_stats == 1 ? st->model_stats[0] : NULL;
    RS_CHECK(ms && ms->inference_count == 4 && ms->inference_stats->success->count == 2 &&
                 ms->inference_stats->fail->count == 2,
             "statistics count what ran and what failed: %llu samples, %llu ok, %llu failed",
             ms ? (unsigned long long)ms->inference_count : 0ULL,
             ms ? (unsigned long long)ms->inference_stats->success->count : 0ULL,
             ms ? (unsigned long long)ms->inference_stats->fail->count : 0ULL);
    inference__model_statistics_response__free_unpacked(st, NULL);
}

/* Config says what the repository does. */
static void check_config(rs_serve_server *s, got *g)
{
    char err[512];
    Inference__ModelConfigRequest cq = INFERENCE__MODEL_CONFIG_REQUEST__INIT;
    cq.name = "m";
    RS_CHECK(call(s, RS_GRPC_MODEL_CONFIG, &cq.base, g, err) == RS_GRPC_OK, "config: %s", err);
    Inference__ModelConfigResponse *cr = inference__model_config_response__unpack(NULL, g->n, g->b);
    RS_CHECK(cr && cr->config->max_batch_size == 8 && cr->config->n_input == 1 &&
                 cr->config->input[0]->data_type == INFERENCE__DATA_TYPE__TYPE_FP32 &&
                 cr->config->input[0]->n_dims == 1 && cr->config->input[0]->dims[0] == NIN &&
                 cr->config->dynamic_batching,
             "config");
    inference__model_config_response__free_unpacked(cr, NULL);
}

/* Garbage on the socket: dropped; the server still answers. */
static void check_garbage(rs_serve_server *s, infer_req *rq, got *g)
{
    char err[512];
    int port = rs_serve_grpc_port(s);
    RS_CHECK(port > 0, "grpc port");
    static const char http1[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    RS_CHECK(garbage_dropped(port, http1, sizeof http1 - 1), "HTTP/1.1 on the gRPC port is dropped");
    static const char half[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04\x08\x00\x00\x00\x00\x00zzzzzzzzzz";
    RS_CHECK(garbage_dropped(port, half, sizeof half - 1), "a bad frame after the preface is dropped");
    RS_CHECK(call(s, RS_GRPC_MODEL_INFER, &rq->q.base, g, err) == RS_GRPC_OK, "still serving: %s", err);
}

int main(void)
{
    frames();

    char repo[] = "/tmp/rs-test-grpc-XXXXXX";
    if (!mkdtemp(repo)) RS_SKIP("no temporary folder");
    rs_model *ref = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse("mlp 4-8-3", "m", rs_device_cpu(), NULL, 5, &ref, NULL, &e) == RS_OK, "%s", e.msg);
    if (!ref) return rs_test_finish("serve-grpc");
    rs_model_set_training(ref, false);
    write_mlp(repo, ref);
    write_gpt(repo);
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
    static infer_req rq; /* static: the message points into it */
    infer_req_init(&rq);

    check_live(s, &g);
    check_infer(s, ref, &rq, &g);
    check_client_errors(s, &rq, &g);
    check_statistics(s, &g);
    check_config(s, &g);
    check_garbage(s, &rq, &g);
    over_the_socket(s, &rq.q);
    one_send_per_answer(s, &rq.q);

    free(g.b);
    rs_serve_stop(s);
    rs_model_free(ref);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", repo);
    if (system(cmd)) {}
    return rs_test_finish("serve-grpc");
}
