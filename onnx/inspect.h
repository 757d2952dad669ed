/* Reading ONNX files back: `onnx show` prints one like a model summary (inspect.c), `onnx check` runs
 * the checks of the ONNX checker for the operators ringside knows (check.c; the operators are the
 * registry's, onnx/ops.h) and says each problem in one line. Malformed files are errors, never crashes. */
#ifndef RS_ONNX_INSPECT_H
#define RS_ONNX_INSPECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/core/status.h"
#include "onnx/onnx.pb-c.h"
#include "onnx/ops.h"

/* Largest file read (protobuf's own limit for one message is 2 GiB). */
#define RS_ONNX_MAX_FILE_BYTES ((size_t)2 << 30)

/* Reads and parses path. On success *out is the model, owned by the caller, freed with
 * onnx__model_proto__free_unpacked(*out, NULL). A file protobuf cannot parse is RS_ERR_FORMAT
 * "<path>: not a valid ONNX ModelProto (protobuf parse failed)". */
rs_status rs_onnx_model_load(const char *path, Onnx__ModelProto **out, rs_err *err);

/* Prints producer, IR version, opsets, inputs/outputs (dtype, shape with symbolic dims by name),
 * initializers (name, shape, dtype, bytes) and the nodes in order with their attributes. */
rs_status rs_onnx_show(const char *path, FILE *out, rs_err *err);
rs_status rs_onnx_show_model(const Onnx__ModelProto *m, FILE *out);

/* The counts `onnx show` prints, for `expect`: graph inputs and outputs, initializers and their
 * values and bytes, nodes, the default-domain opset (0: none) and the IR version. */
typedef struct rs_onnx_summary {
    size_t inputs, outputs, initializers, nodes;
    uint64_t values, bytes;
    int64_t opset, ir_version;
} rs_onnx_summary;
void rs_onnx_summarize(const Onnx__ModelProto *m, rs_onnx_summary *out);

/* Checks the model; writes one line per finding to out (may be NULL) and their number to *findings
 * (may be NULL). Returns RS_OK when the file could be read, whatever was found; an unreadable or
 * unparsable file is an error, with nothing counted. */
rs_status rs_onnx_check(const char *path, FILE *out, int *findings, rs_err *err);
/* The same on a model in memory, returning the number of findings; it has no folder, so its external
 * data files are not looked at (their locations are). */
int rs_onnx_check_model(const Onnx__ModelProto *m, FILE *out);

/* Elements of a tensor from its dims; false when a dim is negative or the product overflows. */
bool rs_onnx_tensor_numel(const Onnx__TensorProto *t, uint64_t *n);

#endif
