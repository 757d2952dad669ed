/* Generic tensor ops: the operators of an imported graph (ONNX) that have no layer of their own
 * (broadcast arithmetic, unary math, batched products, Transpose, Concat, Slice, Where, reductions,
 * softmax over an axis, reshapes). A model node of kind RS_LAYER_OP runs one of them; it is
 * inference-only, so a model holding one refuses to train. The same rs_op_run is what the importer
 * calls to fold constants, so an op computes the same bits at import and at run time.
 *
 * Shapes are full (rs_dims, the batch included wherever it sits: a Transpose may move it); the node
 * keeps them with RS_DIM_BATCH in place of the batch and substitutes the batch size per run. A node
 * whose shapes have no batch (a graph whose file fixed the batch size) runs once per sample. */
#ifndef RS_TENSOR_OP_H
#define RS_TENSOR_OP_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/core/dims.h"
#include "model.h"

typedef enum rs_op {
    RS_OP_RESHAPE = 0, /* Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: a view, nothing runs */
    RS_OP_GEMM,        /* ONNX Gemm: alpha op(A) op(B) + beta C, C broadcast */
    RS_OP_MATMUL,      /* numpy matmul with broadcasting */
    RS_OP_CONV,        /* 1-d and 2-d, any pads, groups */
    RS_OP_MAXPOOL,
    RS_OP_AVGPOOL,
    RS_OP_GLOBALAVGPOOL,
    RS_OP_UNARY,       /* attrs.sub: rs_unary_op */
    RS_OP_BINARY,      /* attrs.sub: rs_binary_op, with broadcasting */
    RS_OP_SOFTMAX,
    RS_OP_LOGSOFTMAX,
    RS_OP_LAYERNORM,   /* over the dims from attrs.axis on */
    RS_OP_TRANSPOSE,
    RS_OP_CONCAT,
    RS_OP_REDUCEMEAN,
    RS_OP_REDUCESUM,
    RS_OP_WHERE,       /* Where(cond, x, y) with broadcasting; cond is 0/1 as float */
    RS_OP_EXPAND,      /* broadcast x to attrs.shape (numpy rules both ways) */
    RS_OP_SLICE,       /* Slice / Split: attrs.starts/steps per dim, the output shape in attrs.shape */
    RS_OP_TRILU,       /* over the last two dims: attrs.upper, attrs.k */
    RS_OP_GATHER,      /* rows of a constant (V, C) table picked by the model's token ids: no kernel here,
                          onnx/'s conversion makes it the embed layer (which reads int32 ids, not floats) */
    RS_OP_COUNT
} rs_op;

/* Attributes, checked and normalised by whoever built the node (the importer); each op reads the
 * ones it names. */
typedef struct rs_op_attrs {
    int sub;                  /* rs_unary_op / rs_binary_op */
    int axis;                 /* softmax, concat, layernorm (non-negative) */
    bool ta, tb;              /* gemm */
    float alpha, beta;        /* gemm; leakyrelu alpha; clip min (alpha) / max (beta); hardsigmoid */
    float eps;                /* layernorm */
    int group;                /* conv */
    int kh, kw, sh, sw;       /* conv and pools (1-d ops use kh = sh = 1) */
    int pt, pl, pb, pr;       /* pads: top, left, bottom, right */
    bool ceil_mode, count_include_pad;
    int perm[RS_DIMS_MAX];    /* transpose */
    uint32_t axes_mask;       /* reductions: bit i = reduce dim i */
    bool keepdims;
    bool legacy_softmax;      /* opset < 13: softmax over everything from axis on */
    rs_dims shape;            /* reshape-like ops, expand, slice: the output (expand: target) shape,
                                 RS_DIM_BATCH for the batch */
    int64_t starts[RS_DIMS_MAX], steps[RS_DIMS_MAX]; /* slice: first index and step per dim */
    bool upper;               /* trilu */
    int64_t k;                /* trilu: diagonal offset */
} rs_op_attrs;

#define RS_OP_MAX_IN 8 /* Concat: more inputs than any other op (an inception block has 4-5) */

/* Where an input of an op node comes from. */
typedef enum rs_op_in { RS_OP_IN_ABSENT = 0, RS_OP_IN_SRC, RS_OP_IN_CONST } rs_op_in;

/* One op of a model: what it runs and on what. */
typedef struct rs_op_node {
    rs_op op;
    rs_op_attrs a;
    char type[24];               /* the operator as its file wrote it ("MatMul"), for messages */
    char name[64];               /* the node's name in its file */
    int nin;
    rs_op_in from[RS_OP_MAX_IN];
    int slot[RS_OP_MAX_IN];      /* SRC: index into the layer's src[]; CONST: its parameter slot */
    rs_dims in[RS_OP_MAX_IN];    /* full shapes, RS_DIM_BATCH at the batch */
    rs_dims out;
} rs_op_node;

const char *rs_op_name(rs_op op);
/* The per-sample shape a layer sees for a value of full shape `full`: the dims without the batch
 * (more than rs_shape holds fold into the first; a scalar is (1)). */
rs_shape rs_op_sample_shape(const rs_dims *full);

/* *bytes = workspace rs_op_run needs for these concrete shapes with ctx's threads. */
rs_status rs_op_workspace(rs_kctx *ctx, rs_op op, const rs_op_attrs *a, const rs_dims *const *is, const rs_dims *os,
                          size_t *bytes, rs_err *err);
/* Runs op on concrete inputs ins (shapes is, NULL for an absent optional input) into out (os),
 * through the entries of ctx's table; ws holds ws_bytes >= rs_op_workspace's. A failing entry's
 * message comes back in err and is taken from ctx (rs_kctx_check); RS_ERR_INTERNAL for an op
 * without a kernel. */
rs_status rs_op_run(rs_kctx *ctx, rs_op op, const rs_op_attrs *a, const float *const *ins, const rs_dims *const *is,
                    float *out, const rs_dims *os, void *ws, size_t ws_bytes, rs_err *err);

/* Appends a node running op (copied) that reads the producers src[0..nsrc) (-1: the model's input)
 * for its RS_OP_IN_SRC inputs, in their slot order. Its RS_OP_IN_CONST inputs become frozen
 * parameter slots, "c0", "c1" in slot order: after rs_model_build the caller copies the constants to
 * rs_model_params(m) + the slot's offset. The model becomes inference-only. */
rs_status rs_model_add_op(rs_model *m, const rs_op_node *op, const int *src, int nsrc, rs_err *err);

#endif
