/* Private to the ONNX importer: what import.c (reading the ModelProto, the name table, building and
 * folding the graph), import_tensor.c (tensors as import values) and the handlers in import_ops.c,
 * import_shape.c and import_tokens.c share; the registry (ops.c) names each operator's handler. Not
 * for other users. */
#ifndef RS_ONNX_IMPORT_INTERNAL_H
#define RS_ONNX_IMPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "import.h"
#include "onnx/onnx.pb-c.h"
#include "onnx/ops.h"

/* TensorProto.DataType and AttributeProto.AttributeType numbers from the ONNX specification, spelled
 * out so the importer does not depend on which enum members the project's .proto subset declares. */
enum { DT_FLOAT = 1, DT_UINT8 = 2, DT_INT8 = 3, DT_INT16 = 5, DT_INT32 = 6, DT_INT64 = 7, DT_BOOL = 9,
       DT_DOUBLE = 11 };
enum { AT_FLOAT = 1, AT_INT = 2, AT_STRING = 3, AT_TENSOR = 4, AT_FLOATS = 6, AT_INTS = 7 };

/* Outputs of one node the importer fills (Split); more are refused with the node named. */
#define RS_ONNX_MAX_OUTS 16

typedef enum { IV_NONE = 0, IV_DYN, IV_F, IV_I } iv_kind;

typedef struct ival {
    iv_kind kind;
    rs_dims shape; /* the graph value's shape (for a grouped value, not the file's: see glo, gn) */
    float *f;    /* IV_F: owned */
    int64_t *i;  /* IV_I: owned; may hold RS_DIM_BATCH (folded shapes) */
    int vid;     /* graph value (IV_DYN, or a constant once a node uses it), -1 before */
    /* IV_DYN whose file shape merges the batch with other sizes ((T, N*heads, hd)): dims [glo, glo+gn)
     * of shape (the batch among them) are one dimension of the file's; gn = 0 otherwise (import_batch.c) */
    int glo, gn;
    /* IV_I counting the samples (import_strided.c): one dim of shape is RS_DIM_BATCH, held as 1 in i
     * (sample 0's values); sample b's values are those plus b * bstep. 0 for every other value. */
    int64_t bstep;
} ival;

/* In shape lists, a dimension that is the batch times k: RS_DIM_BATCH for k = 1, below
 * RS_ONNX_BATCH_BASE for k > 1 (torch multiplies the batch by the heads). Integers read from a file
 * are moved out of these values (import_tensor.c). */
#define RS_ONNX_BATCH_BASE (-((int64_t)1 << 40))
#define RS_ONNX_BATCH_KMAX ((int64_t)1 << 31)
static inline int64_t rs_onnx_batch_times(int64_t k) { return k == 1 ? RS_DIM_BATCH : RS_ONNX_BATCH_BASE - k; }
/* k when d is the batch times k, 0 when d is a plain size */
static inline int64_t rs_onnx_batch_factor(int64_t d)
{
    if (d == RS_DIM_BATCH) return 1;
    return d <= RS_ONNX_BATCH_BASE - 2 && d >= RS_ONNX_BATCH_BASE - RS_ONNX_BATCH_KMAX ? RS_ONNX_BATCH_BASE - d : 0;
}

typedef struct imp {
    const char *file;
    rs_err *err;
    int64_t opset;
    rs_onnx_graph *g;
    int cap_values, cap_nodes;
    /* name -> ival, open addressing */
    char **keys;
    ival *vals;
    size_t ht_cap;
    int64_t budget;
    const char *dir;             /* the model file's folder, for external data; NULL for a buffer */
    const Onnx__NodeProto *node; /* the node being imported, for messages */
    const rs_onnx_op_def *op;    /* its registry entry: the attributes' defaults */
    int node_index;              /* its position in the file */
} imp;

/* A node's inputs as the importer reads them: a densenet's Concat joins up to 65 (densenet201's last
 * block has 48 layers); the engine's ops take RS_OP_MAX_IN, and Concat chains wider ones (import_shape.c). */
#define RS_ONNX_MAX_NODE_IN 128

/* The node being imported, as its handler sees it. */
typedef struct nctx {
    imp *p;
    const Onnx__NodeProto *np;
    const rs_onnx_op_def *def; /* the operator's registry entry (ops.c) */
    int index;
    ival *in[RS_ONNX_MAX_NODE_IN]; /* resolved inputs; NULL for absent optional ones */
    int nin;
    const char *in_names[RS_ONNX_MAX_NODE_IN];
    ival res;     /* the result for output 0 (or for out_index, while a multi-output handler works) */
    int out_index; /* the output rs_onnx_emit names its value after (0 but for Split) */
    int nmore;    /* outputs 1..nmore of a multi-output node, in more[0..nmore-1] */
    ival more[RS_ONNX_MAX_OUTS - 1];
} nctx;

static inline const char *rs_onnx_str_or(const char *s, const char *d) { return s && *s ? s : d; }
static inline bool rs_onnx_is_const(const ival *v) { return v && (v->kind == IV_F || v->kind == IV_I); }

/* import.c */

/* Sets p->err to "file: node 'name' (Op, opset N): message" (the node part when a node is being imported). */
rs_status rs_onnx_fail(imp *p, rs_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A name for an ONNX element type number, for the importer's messages. */
const char *rs_onnx_import_dtype_name(int t);
/* Checks nd dims (rank, signs, element count) from the file into *s; what names them in messages. */
rs_status rs_onnx_check_dims(imp *p, const char *what, size_t nd, const int64_t *dims, rs_dims *s);
/* A TensorProto as a constant import value (owned by *out). */
rs_status rs_onnx_tensor_to_ival(imp *p, const Onnx__TensorProto *t, const char *what, ival *out);
/* Frees an import value's constant data. */
void rs_onnx_ival_clear(ival *v);
/* Adds node op over inputs ins (ival pointers, NULL = absent), or evaluates it now when every input is
 * known. The result goes to c->res. */
rs_status rs_onnx_emit(nctx *c, rs_op op, const rs_op_attrs *a, ival **ins, int nin);

/* import_ops.c: the attribute and input helpers every handler uses, and the handlers of the operators
 * that are not about shapes (the registry, ops.c, names which operator each one serves) */

/* The node's attribute called name, or NULL. */
const Onnx__AttributeProto *rs_onnx_attr(const Onnx__NodeProto *np, const char *name);
/* Typed attributes of the node being imported; a wrong type is an error. When the node does not have
 * it, *out is the registry's default for the model's opset, or stays as the caller set it when the
 * specification gives none (a default that depends on the input, as Shape's end). */
rs_status rs_onnx_attr_int(imp *p, const char *name, int64_t *out);
rs_status rs_onnx_attr_float(imp *p, const char *name, float *out);
/* An ints attribute of at most max values into out; *n = -1 when absent. */
rs_status rs_onnx_attr_ints(imp *p, const char *name, int64_t *out, int max, int *n);
/* A string attribute (in a per-thread buffer, cut at 63 bytes), the registry's default when absent. */
const char *rs_onnx_attr_str(imp *p, const char *name);
/* axis in [-rank, rank) made non-negative. */
rs_status rs_onnx_norm_axis(imp *p, int64_t axis, int rank, int *out);
/* A view of x with shape s: constants are copied, computed values get a RESHAPE node. */
rs_status rs_onnx_reshape_to(nctx *c, ival *x, const rs_dims *s);
/* Checks the node has lo..hi inputs with the first lo present. */
rs_status rs_onnx_need_inputs(nctx *c, int lo, int hi);
/* A 1-d constant of at most max integers (axes, shapes, pads); RS_DIM_BATCH only where allow_batch. */
rs_status rs_onnx_const_ints(nctx *c, const ival *v, const char *what, int64_t *out, int max, int *n, bool allow_batch);
/* axes from the attribute (before opset 13/18) or the second input; *n = -1 when there are none. */
rs_status rs_onnx_get_axes(nctx *c, int64_t *axes, int *n);

rs_status rs_onnx_h_identity(nctx *c);
rs_status rs_onnx_h_constant(nctx *c);
rs_status rs_onnx_h_cast(nctx *c);
rs_status rs_onnx_h_constant_of_shape(nctx *c);
rs_status rs_onnx_h_unary(nctx *c);
rs_status rs_onnx_h_binary(nctx *c);
rs_status rs_onnx_h_matmul(nctx *c);
rs_status rs_onnx_h_gemm(nctx *c);
rs_status rs_onnx_h_conv(nctx *c);
rs_status rs_onnx_h_pool(nctx *c);
rs_status rs_onnx_h_gap(nctx *c);
rs_status rs_onnx_h_softmax(nctx *c);
rs_status rs_onnx_h_layernorm(nctx *c);
rs_status rs_onnx_h_batchnorm(nctx *c);
rs_status rs_onnx_h_transpose(nctx *c);
rs_status rs_onnx_h_reduce(nctx *c);
/* GRU, LSTM, RNN: refused naming the node (the engine has no recurrent layer) */
rs_status rs_onnx_h_recurrent(nctx *c);

/* import_shape.c: shape and data-movement operators */

rs_status rs_onnx_h_shape(nctx *c);
rs_status rs_onnx_h_gather(nctx *c);
rs_status rs_onnx_h_unsqueeze(nctx *c);
rs_status rs_onnx_h_squeeze(nctx *c);
rs_status rs_onnx_h_flatten(nctx *c);
rs_status rs_onnx_h_reshape(nctx *c);
rs_status rs_onnx_h_concat(nctx *c);
rs_status rs_onnx_h_slice(nctx *c);
rs_status rs_onnx_h_split(nctx *c);
rs_status rs_onnx_h_where(nctx *c);
rs_status rs_onnx_h_expand(nctx *c);
rs_status rs_onnx_h_range(nctx *c);
rs_status rs_onnx_h_trilu(nctx *c);

/* import_batch.c: values whose file shape merges the batch with other sizes */

/* The shape the file sees for v: dims [glo, glo+gn) of its graph shape as one, rs_onnx_batch_times(k). */
rs_dims rs_onnx_file_shape(const ival *v);
/* "(8, N*2, 4)" into buf, for messages about file shapes. */
const char *rs_onnx_file_shape_str(const rs_dims *s, char *buf, size_t n);
/* Reshape of x to the file's target shape t (0 copies x's dimension unless allowzero, one -1 is inferred,
 * the batch may be written as rs_onnx_batch_times(k) or be what the -1 takes); the result is grouped
 * where the target merges the batch with other sizes. Refused, naming both shapes, where the batch
 * would mix with its neighbours in memory. */
rs_status rs_onnx_reshape_file(nctx *c, ival *x, const int64_t *t, int nt, bool allowzero);
/* perm (over x's file dims, fr of them) as a permutation of x's graph dims into iperm; the grouped
 * dims move as a block, whose first position comes back in *glo. */
void rs_onnx_group_perm(const ival *x, const int *perm, int fr, int *iperm, int *glo);
/* Gemm(x, B, C) on a grouped x ((T*N, K) held as (T, N, K)): MatMul by B (transposed here when transB)
 * and the Add of C. */
rs_status rs_onnx_gemm_grouped(nctx *c, const rs_op_attrs *a);
/* Before a handler runs on a node with a grouped input: refuses the operators that cannot follow one
 * (naming the node and the value) and, for those that act on the last axes, checks the axes and the other
 * inputs; *g is the grouped input's index, -1 when there is none. */
rs_status rs_onnx_batch_gate(nctx *c, int *g);
/* After it: the result keeps input g's grouping. */
rs_status rs_onnx_batch_after(nctx *c, int g);

/* import_strided.c: indices over the samples (Range(0, N, 1) and torch's as_strided lowering) */

/* Range(start, N, delta) over the batch size N: the index of each sample (start 0, delta 1; anything else
 * refused). */
rs_status rs_onnx_batch_range(nctx *c, int64_t start, int64_t delta);
/* A node one of whose inputs counts the samples (bstep): the arithmetic that follows it (Mul by a
 * constant, Add, Sub, Unsqueeze) and the Gather on the flattened batch it ends in; anything else refused
 * naming the node. Takes the place of the batch gate and the node's handler. */
rs_status rs_onnx_batch_index_node(nctx *c);

/* A computed value named name of shape s added to the graph (its index; -1 when out of memory). */
int rs_onnx_add_value(imp *p, const char *name, const rs_dims *s);
/* The import value of name; create adds an empty (IV_NONE) one. NULL when absent or out of memory. */
ival *rs_onnx_lookup(imp *p, const char *name, bool create);

/* import_inputs.c: the graph's declared inputs (graph.h's `inputs`), one or several packed into the
 * model's one input, each a view under its name. */
rs_status rs_onnx_read_inputs(imp *p, const Onnx__GraphProto *gp);

/* import_tokens.c: token id inputs and the embedding Gather that reads them */

/* An int64/int32 graph input of shape s (name and element type for messages): token ids (batch, T),
 * anything else refused; marks the graph as taking tokens. */
rs_status rs_onnx_token_input(imp *p, const char *name, int elem_type, const rs_dims *s, int64_t fixed);
/* Whether v is the token input (of a graph that takes tokens). */
bool rs_onnx_reads_tokens(const imp *p, const ival *v);
/* Gather(c->in[0], c->in[1]) along axis when its indices are computed: the embedding lookup of a constant
 * (V, C) table by the token ids, emitted as RS_OP_GATHER; anything else refused naming the node. */
rs_status rs_onnx_token_gather(nctx *c, int axis);

#endif
