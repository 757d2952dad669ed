/* gRPC's message framing and status conventions, apart from any socket so that tests and the fuzzer
 * drive them with bytes alone. A gRPC message on an HTTP/2 stream is a 5-byte prefix (a compressed
 * flag, then the length as a big-endian uint32) followed by that many bytes of protobuf; a call ends
 * with trailers carrying grpc-status (a code below) and grpc-message (percent-encoded UTF-8). */
#ifndef RS_SERVE_GRPC_FRAME_H
#define RS_SERVE_GRPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"

/* grpc-status values (grpc's status.h) */
typedef enum rs_grpc_code {
    RS_GRPC_OK = 0,
    RS_GRPC_CANCELLED = 1,
    RS_GRPC_UNKNOWN = 2,
    RS_GRPC_INVALID_ARGUMENT = 3,
    RS_GRPC_NOT_FOUND = 5,
    RS_GRPC_RESOURCE_EXHAUSTED = 8,
    RS_GRPC_UNIMPLEMENTED = 12,
    RS_GRPC_INTERNAL = 13,
    RS_GRPC_UNAVAILABLE = 14,
} rs_grpc_code;

typedef enum rs_grpc_next {
    RS_GRPC_FRAME_MORE = 0,  /* not a whole message yet */
    RS_GRPC_FRAME_MSG,       /* *msg, *len: the next message; *used bytes of buf consumed */
    RS_GRPC_FRAME_ERR,       /* the stream cannot go on: *code and msg (a message for grpc-message) */
} rs_grpc_next;

/* Looks for the next message at the start of buf[0..n). A message longer than cap, or a compressed
 * one (ringside announces no grpc-accept-encoding, so a client must not send one), is an error whose
 * code and text go into *code and errmsg (errmsg_n bytes). */
rs_grpc_next rs_grpc_frame_next(const uint8_t *buf, size_t n, size_t cap, const uint8_t **msg, size_t *len,
                                size_t *used, rs_grpc_code *code, char *errmsg, size_t errmsg_n);

/* The 5-byte prefix for an uncompressed message of len bytes. */
void rs_grpc_frame_prefix(uint8_t out[5], size_t len);

/* grpc-message's encoding: bytes outside 0x20..0x7e, and '%', as %XX. out holds out_n bytes
 * (NUL-terminated, cut short when it does not fit). */
void rs_grpc_percent_encode(const char *s, char *out, size_t out_n);

/* The gRPC code for a failure of the scheduler or the model table, as Triton maps its own. */
rs_grpc_code rs_grpc_code_of(rs_status st);

#endif
