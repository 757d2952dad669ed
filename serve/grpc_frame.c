/* gRPC framing and status helpers (see grpc_frame.h). */
#include "grpc_frame.h"

#include <stdio.h>

rs_grpc_next rs_grpc_frame_next(const uint8_t *buf, size_t n, size_t cap, const uint8_t **msg, size_t *len,
                                size_t *used, rs_grpc_code *code, char *errmsg, size_t errmsg_n)
{
    *msg = NULL;
    *len = *used = 0;
    if (n < 5) return RS_GRPC_FRAME_MORE;
    if (buf[0] > 1) {
        *code = RS_GRPC_INTERNAL; /* grpc's own answer to a bad prefix */
        snprintf(errmsg, errmsg_n, "gRPC message prefix has compressed flag %u (expected 0 or 1)", buf[0]);
        return RS_GRPC_FRAME_ERR;
    }
    if (buf[0] == 1) {
        *code = RS_GRPC_UNIMPLEMENTED;
        snprintf(errmsg, errmsg_n, "compressed gRPC messages are not supported (send them uncompressed: the "
                 "server announces no grpc-accept-encoding)");
        return RS_GRPC_FRAME_ERR;
    }
    size_t l = (size_t)buf[1] << 24 | (size_t)buf[2] << 16 | (size_t)buf[3] << 8 | (size_t)buf[4];
    if (l > cap) {
        *code = RS_GRPC_RESOURCE_EXHAUSTED;
        snprintf(errmsg, errmsg_n, "Received message larger than max (%zu vs. %zu)", l, cap);
        return RS_GRPC_FRAME_ERR;
    }
    if (n - 5 < l) return RS_GRPC_FRAME_MORE;
    *msg = buf + 5;
    *len = l;
    *used = 5 + l;
    return RS_GRPC_FRAME_MSG;
}

void rs_grpc_frame_prefix(uint8_t out[5], size_t len)
{
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

void rs_grpc_percent_encode(const char *s, char *out, size_t out_n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    if (!out_n) return;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = *p >= 0x20 && *p <= 0x7e && *p != '%';
        size_t need = plain ? 1 : 3;
        if (k + need >= out_n) break;
        if (plain) out[k++] = (char)*p;
        else {
            out[k++] = '%';
            out[k++] = hex[*p >> 4];
            out[k++] = hex[*p & 15];
        }
    }
    out[k] = '\0';
}

rs_grpc_code rs_grpc_code_of(rs_status st)
{
    switch (st) {
    case RS_OK: return RS_GRPC_OK;
    case RS_ERR_ARG:
    case RS_ERR_SHAPE:
    case RS_ERR_FORMAT: return RS_GRPC_INVALID_ARGUMENT;
    case RS_ERR_UNSUPPORTED: /* the scheduler's full queue: Triton answers UNAVAILABLE */
    case RS_ERR_CANCELLED: return RS_GRPC_UNAVAILABLE;
    case RS_ERR_NOMEM: return RS_GRPC_RESOURCE_EXHAUSTED;
    default: return RS_GRPC_INTERNAL;
    }
}
