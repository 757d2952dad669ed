/* ONNX import: a ModelProto (from ringside, the onnx Python helpers, torch.onnx.export with either
 * exporter, opsets 11 and on (dynamo writes 20), weights inline or in an external data file beside the
 * model) becomes an rs_onnx_graph (graph.h), which becomes an engine model: trainable when the graph is a
 * plain sequence of layers the engine has, inference-only otherwise; the engine's executor runs both.
 * Everything in the file is checked before use (sizes, data lengths, types, cycles, undefined
 * values, shapes); shape computations (Shape -> Gather -> Unsqueeze -> Concat -> Reshape), Constant
 * nodes and operations on constants are folded at import, with the batch kept symbolic. */
#ifndef RS_ONNX_IMPORT_H
#define RS_ONNX_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"
#include "engine/nn/model.h"
#include "graph.h"

/* Reads and imports path; external data files are looked up in path's folder (never above it).
 * Caller owns *out (rs_onnx_graph_free). */
rs_status rs_onnx_load(const char *path, rs_onnx_graph **out, rs_err *err);
/* The same from bytes in memory; name_for_messages prefixes errors (a path, or "<buffer>"). Tensors with
 * external data are refused: a buffer has no folder to find their files in. */
rs_status rs_onnx_load_buffer(const uint8_t *buf, size_t n, const char *name_for_messages, rs_onnx_graph **out,
                              rs_err *err);

/* A trainable model (CPU, weights copied from the graph) when the graph is a plain layer sequence:
 * Gemm or MatMul(+Add), Conv, MaxPool/AveragePool, Relu, Tanh, Gelu (or its Erf expansion),
 * Flatten/Reshape to (N, -1), LayerNormalization over the last dim. RS_ERR_UNSUPPORTED with the
 * reason (the node that does not fit) otherwise. Caller owns *out. */
rs_status rs_onnx_to_model(const rs_onnx_graph *g, const char *name, rs_model **out, rs_err *err);

/* Any graph as an inference-only engine model (CPU): a node per graph node, an engine layer where
 * one computes the same thing, a generic op (engine/nn/tensor_op.h) elsewhere, the constants copied
 * into its parameter buffer. Its input is the graph input's shape without the batch, its output the
 * graph output's values in the file's layout. A file that fixed the batch at k makes a model whose
 * one sample is k rows of that batch. It runs through rs_model_forward; training is refused.
 * Caller owns *out. */
rs_status rs_onnx_to_inference_model(const rs_onnx_graph *g, const char *name, rs_model **out, rs_err *err);

/* The operators the importer handles are the registry's (onnx/ops.h: rs_onnx_op_find, and
 * rs_onnx_supported_ops for the list). */

#endif
