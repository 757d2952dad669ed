/* The graph an ONNX file is imported into, before it becomes an engine model (to_model.c).
 * A graph is a list of values (tensors: the one input, constants, intermediates) and nodes in
 * topological order, every one of them f32. Its nodes are the engine's generic ops (rs_op,
 * engine/nn/tensor_op.h) with their attributes; shapes are known at import except the batch: a dim
 * equal to RS_DIM_BATCH stands for it, so the importer checks and folds everything once and a run
 * only substitutes the batch. Nothing here runs a graph: the engine's executor does, once
 * rs_onnx_to_model or rs_onnx_to_inference_model has made a model of it. */
#ifndef RS_ONNX_GRAPH_H
#define RS_ONNX_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/device.h"
#include "engine/core/status.h"
#include "engine/nn/tensor_op.h"

typedef struct rs_onnx_value {
    char *name;          /* owned */
    rs_dims shape;
    float *data;         /* constant (initializer or folded at import), owned; NULL when computed */
    int producer;        /* index of the node that computes it, -1 for the input and constants */
} rs_onnx_value;

/* One input as the file declares it. A graph with several inputs is run on one packed input: per
 * sample, each declared input's values in the file's order, this one's at [offset, offset + numel). */
typedef struct rs_onnx_input {
    char *name;          /* owned */
    rs_dims shape;       /* as declared, RS_DIM_BATCH in dim 0 */
    size_t offset, numel; /* per sample, in elements of the packed input */
} rs_onnx_input;

typedef struct rs_onnx_node {
    rs_op op;
    char *name;               /* owned; the file's node name, or "OpType_k" when it had none */
    char *op_type;            /* owned; as written in the file, for messages and summaries */
    int nin;
    int in[RS_OP_MAX_IN];   /* value indices; -1 for an absent optional input */
    int out;                  /* value index */
    rs_op_attrs a;
} rs_onnx_node;

typedef struct rs_onnx_graph {
    char *name;               /* owned: the graph's name in the file */
    char *producer;           /* owned: producer_name + version, e.g. "pytorch 2.15.0" */
    int64_t opset;
    int nvalues, nnodes;
    rs_onnx_value *values;    /* (nvalues), owned */
    rs_onnx_node *nodes;      /* (nnodes), owned, topological order */
    int input, output;        /* value indices */
    /* the file's inputs (ninputs >= 1), owned. With one, `input` is it; with several, `input` is their
     * packed concatenation (batch, sum of numel) and the graph's first nodes are Slice (+ Reshape) views
     * of it, one per declared input, so every layer after them is the file's. Only float inputs with a
     * symbolic batch pack. */
    int ninputs;
    rs_onnx_input *inputs;
    /* the input holds token ids (int64 or int32 (batch, T) in the file): a model of the graph reads
     * them as the engine's token models do, int32 in its 4-byte elements, and only a Gather of a
     * constant table (the embedding) reads them */
    bool tokens;
    /* 0 when the input's first dim is symbolic; else the file fixed the batch at this size, and one
     * sample of the model made of it is that many rows of the file's batch. */
    int64_t fixed_batch;
} rs_onnx_graph;

/* ---- used by the importer ---- */

/* Output shape of n from its input shapes (symbolic or concrete), checking they fit; an error names
 * the node. batch replaces RS_DIM_BATCH in attrs.shape (pass RS_DIM_BATCH to stay symbolic). */
rs_status rs_onnx_infer(const rs_onnx_node *n, const rs_dims *const *in, int64_t batch, rs_dims *out,
                        rs_err *err);
/* Sets err to "node 'name' (Op): message" and returns code. */
rs_status rs_onnx_node_err(rs_err *err, rs_status code, const rs_onnx_node *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- front ends ---- */

/* Per-sample element counts of the input and of the (first) output (a fixed batch divides out). */
size_t rs_onnx_graph_input_numel(const rs_onnx_graph *g);
size_t rs_onnx_graph_output_numel(const rs_onnx_graph *g);
/* "a (batch, 8) at 0, b (batch, 5) at 8" for the declared inputs (malloc'd; NULL when out of memory). */
char *rs_onnx_graph_inputs_str(const rs_onnx_graph *g);
/* A printable table of the nodes with their output shapes and the constants' sizes (malloc'd). */
char *rs_onnx_graph_summary(const rs_onnx_graph *g);
void rs_onnx_graph_free(rs_onnx_graph *g);

#endif
