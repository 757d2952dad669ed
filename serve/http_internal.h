/* Shared inside serve/'s HTTP front end: a reply (status, body, headers) and the JSON builders. */
#ifndef RS_SERVE_HTTP_INTERNAL_H
#define RS_SERVE_HTTP_INTERNAL_H

#include <jansson.h>
#include <sys/types.h>

#include "server.h"

typedef struct rs_serve_reply {
    int status;
    char *body;            /* owned (malloc'd) */
    size_t len;
    const char *type;      /* Content-Type */
    long long header_len;  /* >= 0: Inference-Header-Content-Length */
    struct rs_serve_sse *sse; /* owned: a server-sent event stream instead of body (http_generate.c) */
} rs_serve_reply;

/* {"error": msg} with status. */
void rs_serve_reply_error(rs_serve_reply *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* j (stolen) as the JSON body. */
void rs_serve_reply_json(rs_serve_reply *r, int status, json_t *j);

json_t *rs_serve_json_model_metadata(const rs_serve_model *m);
json_t *rs_serve_json_model_config(const rs_serve_model *m);
json_t *rs_serve_json_stats(const rs_serve_model *m, const rs_serve_version *v, const rs_serve_stats *st);

/* POST /v2/models/NAME[/versions/V]/infer: body is n bytes; header_len is the
 * Inference-Header-Content-Length header's value, or -1. */
void rs_serve_infer(rs_serve_model *m, rs_serve_version *v, const char *body, size_t n, long long header_len,
                    rs_serve_reply *r);

/* POST .../generate and .../generate_stream on a model that generates text (http_generate.c). The
 * stream's reply carries r->sse: the connection reads events with rs_serve_sse_read (blocks until
 * one is ready; -1 at the end) and frees it with rs_serve_sse_free, which stops the generation when
 * the client has gone. */
typedef struct rs_serve_sse rs_serve_sse;
void rs_serve_generate(rs_serve_model *m, rs_serve_version *v, const char *body, size_t n, rs_serve_reply *r);
void rs_serve_generate_stream(rs_serve_server *s, rs_serve_model *m, rs_serve_version *v, const char *body, size_t n,
                              rs_serve_reply *r);
ssize_t rs_serve_sse_read(rs_serve_sse *x, char *buf, size_t max);
void rs_serve_sse_free(rs_serve_sse *x);

#endif
