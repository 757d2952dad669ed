/* Building an ONNX graph by hand, one call per step: the REPL's `onnx` lesson drives it one command at
 * a time, and rs_onnx_export drives it layer by layer, so both write files the same way.
 * Names (of values, dims, ops) are copied; nothing the caller passes is kept. */
#ifndef RS_ONNX_BUILD_H
#define RS_ONNX_BUILD_H

#include <stdint.h>
#include <stdio.h>

#include "engine/core/status.h"

/* ONNX TensorProto.DataType values used by ringside (the numbering is the specification's). */
enum {
    RS_ONNX_UNDEFINED = 0,
    RS_ONNX_FLOAT = 1,
    RS_ONNX_UINT8 = 2,
    RS_ONNX_INT8 = 3,
    RS_ONNX_INT32 = 6,
    RS_ONNX_INT64 = 7,
    RS_ONNX_BOOL = 9,
    RS_ONNX_FLOAT16 = 10,
    RS_ONNX_DOUBLE = 11,
    RS_ONNX_BFLOAT16 = 16,
};

/* Opsets export and the builder write; ONNX Runtime 1.31 and onnx 1.23 read all of them. */
#define RS_ONNX_OPSET_MIN 13
#define RS_ONNX_OPSET_MAX 21
#define RS_ONNX_OPSET_DEFAULT 17
/* Most dimensions a value's shape may have here. */
#define RS_ONNX_MAX_DIMS 8

/* "float", "float32", "f32" -> RS_ONNX_FLOAT, ...; 0 (UNDEFINED) when the name is unknown. */
int rs_onnx_dtype_parse(const char *name);
/* "float32", "int64", ...; "?" for a value outside the specification's DataType enum. */
const char *rs_onnx_dtype_name(int dtype);
/* Bytes per element, or 0 for types without a fixed width here (string, 4-bit types, unknown). */
size_t rs_onnx_dtype_size(int dtype);
/* The IR version that first shipped with `opset` (onnx's VERSION_TABLE), or 0 outside 13..21. */
int rs_onnx_ir_version_for_opset(int opset);

/* A shape as a user writes it: "N,4", "batch x 3 x 28 x 28", "[N, 3]", "" (a scalar). A dimension
 * that is not a number is symbolic (dim_param = its name, d = -1); "?" is unknown and unnamed. */
typedef struct rs_onnx_ushape {
    int ndim;
    int64_t d[RS_ONNX_MAX_DIMS];          /* -1: not a fixed size */
    char param[RS_ONNX_MAX_DIMS][32];     /* name of a symbolic dim, "" otherwise */
} rs_onnx_ushape;
rs_status rs_onnx_ushape_parse(const char *text, rs_onnx_ushape *out, rs_err *err);

typedef struct rs_onnx_builder rs_onnx_builder;

/* An empty graph. NULL only when out of memory. Caller owns it (rs_onnx_builder_free). */
rs_onnx_builder *rs_onnx_builder_new(const char *graph_name);
void rs_onnx_builder_free(rs_onnx_builder *b); /* NULL is a no-op */

/* producer_name / producer_version written into the model (default "ringside" and the project's). */
rs_status rs_onnx_builder_set_producer(rs_onnx_builder *b, const char *name, const char *version, rs_err *err);

/* A graph input or output. dims[i] = -1 marks a dimension that is not fixed; dim_names[i] (may be
 * NULL, or hold NULL entries) names it ("N", "batch"), an unnamed one is written with neither field. */
rs_status rs_onnx_builder_input(rs_onnx_builder *b, const char *name, int dtype, int ndim, const int64_t *dims,
                                const char *const *dim_names, rs_err *err);
rs_status rs_onnx_builder_output(rs_onnx_builder *b, const char *name, int dtype, int ndim, const int64_t *dims,
                                 const char *const *dim_names, rs_err *err);
/* Same, from a parsed shape. */
rs_status rs_onnx_builder_input_shape(rs_onnx_builder *b, const char *name, int dtype, const rs_onnx_ushape *s,
                                      rs_err *err);
rs_status rs_onnx_builder_output_shape(rs_onnx_builder *b, const char *name, int dtype, const rs_onnx_ushape *s,
                                       rs_err *err);

/* A float32 initializer (a constant the graph starts from). data (numel floats) is copied. When data
 * is NULL the values are drawn from seed: seed 0 gives zeros, any other seed PyTorch's default
 * uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in the product of all dims but the first. All
 * dims must be fixed (>= 0); ndim 0 is a scalar. */
rs_status rs_onnx_builder_initializer(rs_onnx_builder *b, const char *name, int ndim, const int64_t *dims,
                                      const float *data, uint64_t seed, rs_err *err);
/* An int64 initializer (shapes for Reshape, axes, indices). */
rs_status rs_onnx_builder_initializer_i64(rs_onnx_builder *b, const char *name, int ndim, const int64_t *dims,
                                          const int64_t *data, rs_err *err);

/* Appends a node op_type(inputs) -> outputs in the standard domain. An input may be "" (an optional
 * input left out). attrs is text, may be NULL or "": "alpha=1.0 transB=1 pads=1,1,1,1 auto_pad=VALID".
 * An attribute the operator is known to have takes the type the operator defines (so `alpha=1` is
 * the float 1.0 for Gemm); otherwise a value with commas is a list, an integer literal is INT, a
 * number FLOAT, anything else STRING. The node is named "<op_type>_<index>" unless named later. */
rs_status rs_onnx_builder_node(rs_onnx_builder *b, const char *op_type, int n_in, const char *const *inputs,
                               int n_out, const char *const *outputs, const char *attrs, rs_err *err);
/* Names the last node added. */
rs_status rs_onnx_builder_name_last(rs_onnx_builder *b, const char *name, rs_err *err);
/* Typed attributes on the last node added (what export uses; no text round trip). */
rs_status rs_onnx_builder_attr_int(rs_onnx_builder *b, const char *name, int64_t v, rs_err *err);
rs_status rs_onnx_builder_attr_ints(rs_onnx_builder *b, const char *name, int n, const int64_t *v, rs_err *err);
rs_status rs_onnx_builder_attr_float(rs_onnx_builder *b, const char *name, float v, rs_err *err);
rs_status rs_onnx_builder_attr_string(rs_onnx_builder *b, const char *name, const char *v, rs_err *err);

int rs_onnx_builder_node_count(const rs_onnx_builder *b);
/* Renames output `k` of node `node` (export uses it to call its last value "logits"). */
rs_status rs_onnx_builder_rename_output(rs_onnx_builder *b, int node, int k, const char *name, rs_err *err);

/* Writes the model: ir_version for the opset, opset_import {"" : opset}, the producer, the graph.
 * opset must be in RS_ONNX_OPSET_MIN..RS_ONNX_OPSET_MAX. Nothing is checked beyond that: run
 * rs_onnx_check on the file to see what the ONNX checker would say. The file is written to
 * "<path>.tmp" and renamed, so a failed save leaves no half file. */
rs_status rs_onnx_builder_save(rs_onnx_builder *b, const char *path, int opset, rs_err *err);

#endif
