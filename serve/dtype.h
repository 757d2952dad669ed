/* Triton's tensor data types, written once (dtype.c's table): the config name (TYPE_FP32), the KServe v2
 * name (FP32), the element size, which typed field of gRPC's InferTensorContents carries it and whether
 * JSON "data" may carry it. A tensor's bytes are always in the wire's layout: fixed-size elements
 * little-endian, or for BYTES each element as Triton serializes it (a 4-byte little-endian length, then
 * the bytes), so the bytes of B samples are the bytes of each sample one after the other. */
#ifndef RS_SERVE_DTYPE_H
#define RS_SERVE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum rs_serve_dtype {
    RS_SERVE_INVALID = 0, RS_SERVE_BOOL, RS_SERVE_UINT8, RS_SERVE_UINT16, RS_SERVE_UINT32, RS_SERVE_UINT64,
    RS_SERVE_INT8, RS_SERVE_INT16, RS_SERVE_INT32, RS_SERVE_INT64, RS_SERVE_FP16, RS_SERVE_FP32,
    RS_SERVE_FP64, RS_SERVE_STRING, RS_SERVE_BF16, RS_SERVE_DTYPE_COUNT
} rs_serve_dtype;

/* The InferTensorContents field a type travels in when a gRPC request types its values (contents)
 * instead of sending raw bytes; NONE: raw_input_contents only (FP16, BF16), as in Triton. */
typedef enum rs_serve_grpc_field {
    RS_SERVE_GF_NONE = 0, RS_SERVE_GF_BOOL, RS_SERVE_GF_INT, RS_SERVE_GF_INT64, RS_SERVE_GF_UINT, RS_SERVE_GF_UINT64,
    RS_SERVE_GF_FP32, RS_SERVE_GF_FP64, RS_SERVE_GF_BYTES
} rs_serve_grpc_field;

typedef struct rs_serve_dtype_info {
    const char *config;        /* "TYPE_FP32" */
    const char *v2;            /* "FP32" */
    size_t size;               /* bytes per element; 0 for BYTES (variable) and INVALID */
    rs_serve_grpc_field grpc;  /* its typed contents field */
    bool json;                 /* JSON "data" carries it (Triton refuses FP16 and BF16 there) */
} rs_serve_dtype_info;

const rs_serve_dtype_info *rs_serve_dtype_info_of(rs_serve_dtype t); /* INVALID's row for out-of-range */

/* "TYPE_FP32" <-> RS_SERVE_FP32 (config), "FP32" <-> RS_SERVE_FP32 (KServe v2 datatype). */
rs_serve_dtype rs_serve_dtype_from_config(const char *s);
rs_serve_dtype rs_serve_dtype_from_v2(const char *s);
const char *rs_serve_dtype_config_name(rs_serve_dtype t);
const char *rs_serve_dtype_v2_name(rs_serve_dtype t);
size_t rs_serve_dtype_size(rs_serve_dtype t); /* 0 for STRING/INVALID */

/* One tensor's bytes for B samples, in the wire's layout (see above). */
typedef struct rs_serve_tensor {
    void *data;
    size_t bytes;
} rs_serve_tensor;

/* BYTES: the byte length of the first `count` serialized elements of p (n bytes), or (size_t)-1 when
 * p holds fewer; *elems (may be NULL) gets how many whole elements p holds, up to count + 1. */
size_t rs_serve_bytes_span(const void *p, size_t n, size_t count, size_t *elems);
/* The bytes `count` elements of t take, when that does not depend on the values (0 for BYTES). */
size_t rs_serve_dtype_bytes(rs_serve_dtype t, size_t count);

/* One element at p written as a JSON value into buf (cap bytes, NUL-terminated), as Triton writes it:
 * booleans, integers, floats with the digits that round-trip, and NaN, Infinity and -Infinity for the
 * non-finite (Triton's writer sets rapidjson's kWriteNanAndInfFlag). Not for BYTES, FP16, BF16.
 * Returns the length. */
int rs_serve_dtype_json_elem(rs_serve_dtype t, const void *p, char *buf, size_t cap);
/* count elements of type from at src into type to at dst, as NumPy's astype and ONNX's Cast convert:
 * floats to integers truncate toward zero (NaN gives 0, values past the range saturate rather than
 * being undefined), anything to BOOL is "not zero". Neither may be BYTES. */
void rs_serve_dtype_convert(rs_serve_dtype from, const void *src, rs_serve_dtype to, void *dst, size_t count);
/* FP16 and BF16 <-> float (round to nearest even), for the backends that compute in float. */
float rs_serve_half_to_float(uint16_t h);
uint16_t rs_serve_float_to_half(float f);
float rs_serve_bf16_to_float(uint16_t h);
uint16_t rs_serve_float_to_bf16(float f);

#endif
