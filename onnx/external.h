/* Tensors kept outside an ONNX file (data_location EXTERNAL): the fields of external_data and the rule
 * for where the file may be, shared by the importer (import_tensor.c, which reads the bytes) and
 * `onnx check` (check.c, which checks the file as onnx.checker does). */
#ifndef RS_ONNX_EXTERNAL_H
#define RS_ONNX_EXTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "onnx/onnx.pb-c.h"

typedef struct rs_onnx_ext {
    const char *loc;               /* borrowed from the tensor; NULL when it names none */
    uint64_t off, len;             /* len is `want` when the tensor gives no length */
    const char *bad_key, *bad_val; /* the first of offset/length that is not a number; NULL when none */
} rs_onnx_ext;

/* Whether t keeps its data in another file. */
bool rs_onnx_ext_is(const Onnx__TensorProto *t);
/* Reads t's location, offset and length (decimal, below 2^62); want is the default length. */
void rs_onnx_ext_fields(const Onnx__TensorProto *t, uint64_t want, rs_onnx_ext *e);
/* Whether loc leaves the model's folder as written: absolute, a drive, or a '..' component. */
bool rs_onnx_ext_escapes(const char *loc);

#endif
