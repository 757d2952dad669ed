/* Shared inside serve/'s gRPC front end: the methods (grpc_methods.c, protobuf in and out, no
 * sockets) and the HTTP/2 transport (grpc.c, nghttp2) that calls them. */
#ifndef RS_SERVE_GRPC_INTERNAL_H
#define RS_SERVE_GRPC_INTERNAL_H

#include "grpc_frame.h"
#include "serve/grpc_service.pb-c.h"
#include "server.h"

typedef enum rs_grpc_method {
    RS_GRPC_NONE = -1,
    RS_GRPC_SERVER_LIVE = 0, RS_GRPC_SERVER_READY, RS_GRPC_MODEL_READY, RS_GRPC_SERVER_METADATA,
    RS_GRPC_MODEL_METADATA, RS_GRPC_MODEL_INFER, RS_GRPC_MODEL_STREAM_INFER, RS_GRPC_MODEL_CONFIG,
    RS_GRPC_MODEL_STATISTICS, RS_GRPC_REPOSITORY_INDEX, RS_GRPC_REPOSITORY_LOAD, RS_GRPC_REPOSITORY_UNLOAD,
    RS_GRPC_NMETHODS
} rs_grpc_method;

/* "/inference.GRPCInferenceService/ModelInfer" -> RS_GRPC_MODEL_INFER; RS_GRPC_NONE when unknown. */
rs_grpc_method rs_grpc_method_of(const char *path);

/* Where a call's responses go. emit gets each response message (protobuf, no prefix; borrowed for
 * the call); cancelled says the client has gone (a stream stops generating). */
typedef struct rs_grpc_sink {
    void (*emit)(void *ud, const uint8_t *msg, size_t n);
    bool (*cancelled)(void *ud);
    void *ud;
} rs_grpc_sink;

/* Runs one request message of method m. A unary method emits its one response and returns
 * RS_GRPC_OK, or returns the failure's code with its text in errmsg (errmsg_n bytes).
 * RS_GRPC_MODEL_STREAM_INFER emits ModelStreamInferResponse messages (one per response of the
 * model; a decoupled model's one per token) and reports a failure in-band, in error_message, as
 * Triton does: the stream goes on; it returns RS_GRPC_OK unless the sink is cancelled. */
rs_grpc_code rs_grpc_call(rs_serve_server *s, rs_grpc_method m, const uint8_t *req, size_t n, const rs_grpc_sink *out,
                          char *errmsg, size_t errmsg_n);

/* How many buffers the front end has given to send() on all its connections: one per unary
 * response (its HEADERS, DATA and trailers together) when the socket takes it whole. */
uint64_t rs_serve_grpc_sends(rs_serve_grpc *g);

/* ---- shared by grpc_methods.c and grpc_infer.c ---- */

/* msg = the formatted text; returns code. */
rs_grpc_code rs_grpc_fail(char *msg, size_t n, rs_grpc_code code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Packs m and hands it to the sink. */
rs_grpc_code rs_grpc_emit(const rs_grpc_sink *o, const ProtobufCMessage *m, char *msg, size_t n);
/* s, or "" for NULL (protobuf-c leaves absent strings as its empty string; this is for our own NULLs). */
char *rs_grpc_str(const char *s);
/* The model NAME held (release it) with *v its version, or NULL with *code and msg saying why. */
rs_serve_model *rs_grpc_model_of(rs_serve_server *s, const char *name, const char *version, rs_serve_version **v,
                                 rs_grpc_code *code, char *msg, size_t n);
/* ModelInfer on a tensor model; stream: answer as a ModelStreamInferResponse. */
rs_grpc_code rs_grpc_model_infer(rs_serve_server *s, const Inference__ModelInferRequest *q, bool stream,
                                 const rs_grpc_sink *o, char *msg, size_t n);
/* One ModelStreamInfer request message (failures in-band). */
rs_grpc_code rs_grpc_stream_infer(rs_serve_server *s, const uint8_t *req, size_t len, const rs_grpc_sink *o, char *msg,
                                  size_t n);

#endif
