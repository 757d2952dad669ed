/* A look at a gRPC request's protobuf bytes before protobuf-c unpacks them. protobuf-c gives every
 * field occurrence a scanned-member record and every repeated message entry a struct of its own, so a
 * 40 MiB ModelInferRequest of 21M empty `inputs` entries costs gigabytes before any check of the
 * model's inputs can run. Here the entries of each message are counted against the limits on the
 * wire, and strings that protobuf-c would cut at an embedded NUL ("mlp\0x" read as "mlp") are
 * refused, naming the field and the numbers. */
#ifndef RS_SERVE_GRPC_PRESCAN_H
#define RS_SERVE_GRPC_PRESCAN_H

#include "grpc_internal.h"
#include "serve_limits.h"

/* RS_GRPC_OK when the request message (n bytes) of method m is within the limits; else the code, msg
 * (cap bytes) saying why, and *why the refusal's reason for the counters. Malformed bytes pass: the
 * unpacking that follows refuses them. */
rs_grpc_code rs_grpc_prescan(rs_grpc_method m, const uint8_t *req, size_t n, const rs_serve_limits *l,
                             rs_serve_refusal *why, char *msg, size_t cap);

#endif
