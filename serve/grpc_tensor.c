/* Typed gRPC contents to tensor bytes (grpc_tensor.h). */
#include "grpc_tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer_check.h"

/* The typed field's element count and a reader of element j as int64 / uint64 / double. */
typedef struct typed {
    size_t n;
    const void *v;
    rs_serve_grpc_field f;
} typed;

static typed typed_of(const Inference__InferTensorContents *ct, rs_serve_grpc_field f)
{
    typed t = {0, NULL, f};
    if (!ct) return t;
    switch (f) {
    case RS_SERVE_GF_BOOL: t.n = ct->n_bool_contents, t.v = ct->bool_contents; break;
    case RS_SERVE_GF_INT: t.n = ct->n_int_contents, t.v = ct->int_contents; break;
    case RS_SERVE_GF_INT64: t.n = ct->n_int64_contents, t.v = ct->int64_contents; break;
    case RS_SERVE_GF_UINT: t.n = ct->n_uint_contents, t.v = ct->uint_contents; break;
    case RS_SERVE_GF_UINT64: t.n = ct->n_uint64_contents, t.v = ct->uint64_contents; break;
    case RS_SERVE_GF_FP32: t.n = ct->n_fp32_contents, t.v = ct->fp32_contents; break;
    case RS_SERVE_GF_FP64: t.n = ct->n_fp64_contents, t.v = ct->fp64_contents; break;
    case RS_SERVE_GF_BYTES: t.n = ct->n_bytes_contents, t.v = ct->bytes_contents; break;
    default: break;
    }
    return t;
}

static const char *field_name(rs_serve_grpc_field f)
{
    static const char *const names[] = {"", "bool_contents", "int_contents", "int64_contents", "uint_contents",
                                        "uint64_contents", "fp32_contents", "fp64_contents", "bytes_contents"};
    return names[f];
}

/* Element j of a typed field into the tensor at p as type dt; false when it does not fit dt. */
static bool put(const typed *t, size_t j, rs_serve_dtype dt, uint8_t *p)
{
    size_t sz = rs_serve_dtype_size(dt);
    switch (t->f) {
    case RS_SERVE_GF_BOOL: p[0] = ((const protobuf_c_boolean *)t->v)[j] != 0; return true;
    case RS_SERVE_GF_INT: {
        int32_t v = ((const int32_t *)t->v)[j];
        if (sz == 1 && (v < INT8_MIN || v > INT8_MAX)) return false;
        if (sz == 2 && (v < INT16_MIN || v > INT16_MAX)) return false;
        if (sz == 1) { int8_t x = (int8_t)v; memcpy(p, &x, 1); }
        else if (sz == 2) { int16_t x = (int16_t)v; memcpy(p, &x, 2); }
        else memcpy(p, &v, 4);
        return true;
    }
    case RS_SERVE_GF_UINT: {
        uint32_t v = ((const uint32_t *)t->v)[j];
        if (sz < 4 && v >> (sz * 8)) return false;
        if (sz == 1) p[0] = (uint8_t)v;
        else if (sz == 2) { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); }
        else memcpy(p, &v, 4);
        return true;
    }
    case RS_SERVE_GF_INT64: memcpy(p, (const int64_t *)t->v + j, 8); return true;
    case RS_SERVE_GF_UINT64: memcpy(p, (const uint64_t *)t->v + j, 8); return true;
    case RS_SERVE_GF_FP32: memcpy(p, (const float *)t->v + j, 4); return true;
    case RS_SERVE_GF_FP64: memcpy(p, (const double *)t->v + j, 8); return true;
    default: return false;
    }
}

static rs_grpc_code read_typed(const rs_serve_config *c, int i, const Inference__InferTensorContents *ct, size_t count,
                               rs_serve_tensor *x, char *msg, size_t n)
{
    const rs_serve_io *io = &c->inputs[i];
    rs_serve_grpc_field f = rs_serve_dtype_info_of(io->dtype)->grpc;
    if (f == RS_SERVE_GF_NONE)
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input '%s': %s has no typed field in "
                            "InferTensorContents; send it in raw_input_contents", io->name,
                            rs_serve_dtype_v2_name(io->dtype));
    typed t = typed_of(ct, f);
    if (t.n != count)
        return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input '%s': expected %zu values in contents.%s for its "
                            "shape, got %zu", io->name, count, field_name(f), t.n);
    size_t bytes = 0;
    const ProtobufCBinaryData *s = t.v;
    if (f == RS_SERVE_GF_BYTES)
        for (size_t j = 0; j < t.n; j++) bytes += 4 + s[j].len;
    else bytes = rs_serve_dtype_bytes(io->dtype, count);
    uint8_t *p = x->data = malloc(bytes + 1);
    if (!p) return rs_grpc_fail(msg, n, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory for %zu bytes", bytes);
    x->bytes = bytes;
    for (size_t j = 0; j < t.n; j++) {
        if (f == RS_SERVE_GF_BYTES) {
            if (s[j].len > UINT32_MAX)
                return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input '%s': element %zu is too long", io->name, j);
            p[0] = (uint8_t)s[j].len, p[1] = (uint8_t)(s[j].len >> 8), p[2] = (uint8_t)(s[j].len >> 16);
            p[3] = (uint8_t)(s[j].len >> 24);
            if (s[j].len) memcpy(p + 4, s[j].data, s[j].len);
            p += 4 + s[j].len;
        } else {
            if (!put(&t, j, io->dtype, p))
                return rs_grpc_fail(msg, n, RS_GRPC_INVALID_ARGUMENT, "input '%s': value %zu of contents.%s does not "
                                    "fit %s", io->name, j, field_name(f), rs_serve_dtype_v2_name(io->dtype));
            p += rs_serve_dtype_size(io->dtype);
        }
    }
    return RS_GRPC_OK;
}

rs_grpc_code rs_grpc_read_input(const rs_serve_config *c, int i, const Inference__ModelInferRequest__InferInputTensor *t,
                                const ProtobufCBinaryData *raw, size_t count, rs_serve_tensor *x, char *msg, size_t n)
{
    if (!raw) return read_typed(c, i, t->contents, count, x, msg, n);
    x->data = malloc(raw->len + 1); /* the caller's: raw bytes may be unaligned, and the batch keeps them */
    if (!x->data) return rs_grpc_fail(msg, n, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory for %zu bytes", raw->len);
    if (raw->len) memcpy(x->data, raw->data, raw->len);
    x->bytes = raw->len;
    if (!rs_serve_check_data(c->name, &c->inputs[i], x->data, x->bytes, count, msg, n)) return RS_GRPC_INVALID_ARGUMENT;
    return RS_GRPC_OK;
}
