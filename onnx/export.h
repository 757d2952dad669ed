/* Export: a ringside model as an ONNX file that onnx.checker accepts and ONNX Runtime runs with the
 * model's own answers. The export follows the model's graph (a residual's add is an Add of its two
 * sources); each layer becomes standard operators (linear -> Gemm transB=1, or MatMul over a
 * sequence; conv -> Conv; gelu -> Gelu or its expansion; attn -> MatMul, a causal mask and Softmax;
 * ...); the weights become initializers under the model's tensor names ("0.weight"); the graph maps
 * "input" [batch, ...], or a token model's int64 "tokens" [batch, T], to the logits (the loss is not
 * part of it). docs/onnx.md has the whole table. */
#ifndef RS_ONNX_EXPORT_H
#define RS_ONNX_EXPORT_H

#include <stdbool.h>

#include "engine/core/status.h"
#include "engine/nn/model.h"

typedef struct rs_onnx_export_opts {
    int opset;                    /* 13..21; 0 = RS_ONNX_OPSET_DEFAULT (17) */
    bool softmax;                 /* end in Softmax: the graph's output is then "probs", not "logits" */
    const char *producer_version; /* NULL: the project's version */
} rs_onnx_export_opts;

/* Writes m to path with the given opset (0 = default). An opset outside 13..21 is RS_ERR_ARG naming
 * the ones accepted. The model is read, not changed (its parameters must be on the CPU). */
rs_status rs_onnx_export(rs_model *m, const char *path, int opset, rs_err *err);
rs_status rs_onnx_export_ex(rs_model *m, const char *path, const rs_onnx_export_opts *o, rs_err *err);

#endif
