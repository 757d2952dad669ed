/* The inference graph an ONNX file is imported into, and its CPU executor.
 * A graph is a list of values (tensors: the one input, constants, intermediates) and nodes in
 * topological order, every one of them f32. Shapes are known at import except the batch: a dim equal
 * to RS_ONNX_BATCH stands for it, so the importer checks and folds everything once and a run only
 * substitutes the batch. The struct is public inside onnx/ (import.c builds it, a plan compiler may
 * walk it); front ends use the functions at the end. */
#ifndef RS_ONNX_GRAPH_H
#define RS_ONNX_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/device.h"
#include "engine/core/status.h"

#define RS_ONNX_MAX_RANK 8
/* The symbolic batch dimension in a shape, and in folded shape tensors (Shape -> Gather -> Reshape).
 * Any other negative number is rejected where a file could supply it, so it cannot be forged. */
#define RS_ONNX_BATCH ((int64_t)-7)
/* Tensors must stay below this many elements (declared sizes at or beyond it are an error). */
#define RS_ONNX_MAX_ELEMS ((int64_t)1 << 31)

typedef enum rs_onnx_op {
    RS_ONNX_OP_RESHAPE = 0, /* Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: a view */
    RS_ONNX_OP_GEMM,        /* Gemm; MatMul with a 2-d constant right side */
    RS_ONNX_OP_MATMUL,      /* batched MatMul with numpy broadcasting */
    RS_ONNX_OP_CONV,
    RS_ONNX_OP_MAXPOOL,
    RS_ONNX_OP_AVGPOOL,
    RS_ONNX_OP_GLOBALAVGPOOL,
    RS_ONNX_OP_UNARY,       /* elementwise, see rs_onnx_unary */
    RS_ONNX_OP_BINARY,      /* elementwise with broadcasting, see rs_onnx_binary */
    RS_ONNX_OP_SOFTMAX,
    RS_ONNX_OP_LOGSOFTMAX,
    RS_ONNX_OP_LAYERNORM,
    RS_ONNX_OP_BATCHNORM,
    RS_ONNX_OP_TRANSPOSE,
    RS_ONNX_OP_CONCAT,
    RS_ONNX_OP_REDUCEMEAN,
    RS_ONNX_OP_REDUCESUM,
    RS_ONNX_OP_WHERE,       /* Where(cond, x, y) with broadcasting; cond is 0/1 as float */
    RS_ONNX_OP_EXPAND,      /* Expand: broadcast x to attrs.shape (numpy rules both ways) */
    RS_ONNX_OP_SLICE,       /* Slice / Split: attrs.starts/steps per dim, output shape in attrs.shape */
    RS_ONNX_OP_TRILU,       /* Trilu over the last two dims: attrs.upper, attrs.k */
    RS_ONNX_OP_COUNT
} rs_onnx_op;

typedef enum rs_onnx_unary {
    RS_ONNX_RELU, RS_ONNX_TANH, RS_ONNX_SIGMOID, RS_ONNX_ERF, RS_ONNX_GELU, RS_ONNX_GELU_TANH,
    RS_ONNX_SQRT, RS_ONNX_EXP, RS_ONNX_LOG, RS_ONNX_NEG, RS_ONNX_ABS, RS_ONNX_RECIPROCAL,
    RS_ONNX_LEAKYRELU, RS_ONNX_CLIP,
    RS_ONNX_HARDSIGMOID,  /* max(0, min(1, alpha x + beta)) */
    RS_ONNX_HARDSWISH,    /* x * hardsigmoid(x, 1/6, 1/2) */
    RS_ONNX_CAST_INT,     /* Cast of computed floats to an integer type: truncation toward zero */
    RS_ONNX_CAST_BOOL,    /* Cast to bool: x != 0 as 0/1 */
    RS_ONNX_NOT,          /* Not on bools: x == 0 as 0/1 */
} rs_onnx_unary;

/* Comparisons give 0/1 (ONNX bool); MOD is Python's (sign of the divisor, fmod=0), FMOD C's. */
typedef enum rs_onnx_binary {
    RS_ONNX_ADD, RS_ONNX_SUB, RS_ONNX_MUL, RS_ONNX_DIV, RS_ONNX_POW,
    RS_ONNX_EQUAL, RS_ONNX_LESS, RS_ONNX_GREATER, RS_ONNX_LESS_EQ, RS_ONNX_GREATER_EQ, RS_ONNX_MOD, RS_ONNX_FMOD,
    RS_ONNX_AND, RS_ONNX_OR, RS_ONNX_XOR, /* on bools (0/1), as masks are combined */
} rs_onnx_binary;

typedef struct rs_onnx_shape {
    int rank;
    int64_t d[RS_ONNX_MAX_RANK]; /* RS_ONNX_BATCH where the batch goes */
} rs_onnx_shape;

typedef struct rs_onnx_value {
    char *name;          /* owned */
    rs_onnx_shape shape;
    float *data;         /* constant (initializer or folded at import), owned; NULL when computed */
    int producer;        /* index of the node that computes it, -1 for the input and constants */
} rs_onnx_value;

#define RS_ONNX_MAX_IN 3

/* Attributes, already checked and normalised by the importer; each op reads the ones it names. */
typedef struct rs_onnx_attrs {
    int sub;                  /* rs_onnx_unary / rs_onnx_binary */
    int axis;                 /* softmax, concat, layernorm (non-negative) */
    bool ta, tb;              /* gemm */
    float alpha, beta;        /* gemm; leakyrelu alpha; clip min (alpha) / max (beta) */
    float eps;                /* layernorm, batchnorm */
    int group;                /* conv */
    int kh, kw, sh, sw;       /* conv and pools (1-d ops use kh = sh = 1) */
    int pt, pl, pb, pr;       /* pads: top, left, bottom, right */
    bool ceil_mode, count_include_pad;
    int perm[RS_ONNX_MAX_RANK]; /* transpose */
    uint32_t axes_mask;       /* reductions: bit i = reduce dim i */
    bool keepdims;
    bool legacy_softmax;      /* opset < 13: softmax over everything from axis on */
    rs_onnx_shape shape;      /* reshape-like ops, expand, slice: the output (expand: target) shape,
                                 RS_ONNX_BATCH for the batch */
    int64_t starts[RS_ONNX_MAX_RANK], steps[RS_ONNX_MAX_RANK]; /* slice: first index and step per dim */
    bool upper;               /* trilu */
    int64_t k;                /* trilu: diagonal offset */
} rs_onnx_attrs;

typedef struct rs_onnx_node {
    rs_onnx_op op;
    char *name;               /* owned; the file's node name, or "OpType_k" when it had none */
    char *op_type;            /* owned; as written in the file, for messages and summaries */
    int nin;
    int in[RS_ONNX_MAX_IN];   /* value indices; -1 for an absent optional input */
    int out;                  /* value index */
    rs_onnx_attrs a;
} rs_onnx_node;

typedef struct rs_onnx_graph {
    char *name;               /* owned: the graph's name in the file */
    char *producer;           /* owned: producer_name + version, e.g. "pytorch 2.15.0" */
    int64_t opset;
    int nvalues, nnodes;
    rs_onnx_value *values;    /* (nvalues), owned */
    rs_onnx_node *nodes;      /* (nnodes), owned, topological order */
    int input, output;        /* value indices */
    /* 0 when the input's first dim is symbolic; else the file fixed the batch at this size and a run
     * goes through the batch in chunks of it. */
    int64_t fixed_batch;
    /* Run-time buffers, kept between runs and grown with the batch. */
    float *arena;             /* owned */
    size_t arena_floats;
    rs_kctx ctx;              /* runs go through the CPU kernel table on it (rs_onnx_graph_ctx) */
} rs_onnx_graph;

/* ---- used by the importer ---- */

/* Output shape of n from its input shapes (symbolic or concrete), checking they fit; an error names
 * the node. batch replaces RS_ONNX_BATCH in attrs.shape (pass RS_ONNX_BATCH to stay symbolic). */
rs_status rs_onnx_infer(const rs_onnx_node *n, const rs_onnx_shape *const *in, int64_t batch, rs_onnx_shape *out,
                        rs_err *err);
/* Runs n on concrete inputs into out (sized from rs_onnx_infer). ins[i] may be NULL for an absent
 * optional input. Used by run and, on constants, by the importer's folding. */
rs_status rs_onnx_exec(rs_kctx *ctx, const rs_onnx_node *n, const float *const *ins,
                       const rs_onnx_shape *const *in_shapes, float *out, const rs_onnx_shape *out_shape, rs_err *err);
/* Sets err to "node 'name' (Op): message" and returns code. */
rs_status rs_onnx_node_err(rs_err *err, rs_status code, const rs_onnx_node *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Elements of s with the batch set to `batch`; -1 when it reaches RS_ONNX_MAX_ELEMS. */
int64_t rs_onnx_shape_numel(const rs_onnx_shape *s, int64_t batch);
/* "(N, 3, 28, 28)" */
char *rs_onnx_shape_str(const rs_onnx_shape *s, char *buf, size_t n);
const char *rs_onnx_op_name(rs_onnx_op op);

/* ---- front ends ---- */

/* Per-sample element counts of the input and of the (first) output. */
size_t rs_onnx_graph_input_numel(const rs_onnx_graph *g);
size_t rs_onnx_graph_output_numel(const rs_onnx_graph *g);
/* The kernel context runs use: set its threads with rs_kctx_set_threads (the CPU's default until
 * then). */
rs_kctx *rs_onnx_graph_ctx(rs_onnx_graph *g);
/* Runs the graph on x (batch rows of the input's per-sample shape) and writes the first output,
 * (batch, output_numel), to y; the caller allocates both. Threads are the graph's context's.
 * Not reentrant: one run at a time per graph (it keeps its buffers). */
rs_status rs_onnx_run(rs_onnx_graph *g, const float *x, int batch, float *y, rs_err *err);
/* A printable table of the nodes with their output shapes and the constants' sizes (malloc'd). */
char *rs_onnx_graph_summary(const rs_onnx_graph *g);
void rs_onnx_graph_free(rs_onnx_graph *g);

#endif
