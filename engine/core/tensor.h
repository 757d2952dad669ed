/* Tensors: a small struct that describes memory, ggml-style.
 * A tensor is dtype + shape + element strides + device + a data pointer. It either owns its storage
 * (rs_tensor_new) or is a view into someone else's (rs_tensor_view): a model's weights are views into
 * its one parameter buffer, so a DDP bucket or a ZeRO shard is an {offset, count} of that buffer. */
#ifndef RS_TENSOR_H
#define RS_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "mem.h"
#include "status.h"

/* f32 is computed today; the others are carried (checkpoints, ONNX, quantised plans) and leave room
 * for f16/bf16/int8 kernels. */
typedef enum rs_dtype {
    RS_F32 = 0,
    RS_F16,
    RS_BF16,
    RS_F64,
    RS_I8,
    RS_U8,
    RS_I32,
    RS_I64,
    RS_DTYPE_COUNT
} rs_dtype;

size_t rs_dtype_size(rs_dtype t);
const char *rs_dtype_name(rs_dtype t);       /* "f32" */
const char *rs_dtype_st_name(rs_dtype t);    /* safetensors spelling: "F32" */
/* Parses a safetensors dtype name; returns false for one this build does not know. */
bool rs_dtype_from_st_name(const char *s, rs_dtype *out);
/* The other way round from rs_dtype_name: "f32" -> RS_F32; false for an unknown name. */
bool rs_dtype_from_name(const char *s, rs_dtype *out);

#define RS_MAX_DIMS 6

typedef struct rs_shape {
    int ndim;
    int64_t d[RS_MAX_DIMS];
} rs_shape;

int64_t rs_shape_numel(const rs_shape *s);
bool rs_shape_eq(const rs_shape *a, const rs_shape *b);
/* Writes "(3, 28, 28)" into buf. */
char *rs_shape_str(const rs_shape *s, char *buf, size_t n);

typedef struct rs_tensor {
    rs_dtype dtype;
    rs_device device;
    rs_shape shape;
    int64_t stride[RS_MAX_DIMS]; /* in elements; contiguous row-major unless a view says otherwise */
    void *data;                  /* first element */
    bool owns;                   /* true: freed with the tensor (through mem/pool) */
    rs_mem *mem;                 /* tracker the storage was counted in (owning tensors) */
    rs_pool pool;
    char name[64];
} rs_tensor;

/* A new contiguous zeroed tensor on the CPU counted in (mem, pool); the caller owns it. */
rs_tensor *rs_tensor_new(rs_dtype t, const rs_shape *shape, rs_mem *mem, rs_pool pool);
/* A contiguous view of `shape` starting `offset` elements into base (not owned). */
rs_tensor rs_tensor_view(void *base, rs_dtype t, size_t offset, const rs_shape *shape);
void rs_tensor_free(rs_tensor *t);
size_t rs_tensor_bytes(const rs_tensor *t);
bool rs_tensor_is_contiguous(const rs_tensor *t);

#endif
