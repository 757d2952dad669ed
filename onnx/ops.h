/* The one table of the ONNX operators ringside knows. The importer takes each node's handler from it,
 * `onnx check` its arity, attributes, opset range and shape check, `onnx show` and the hand builder the
 * attributes' types, and help the list of names: an operator is known to all of them or to none.
 * Adding one is an entry in ops.c plus its handler (docs/add-an-operator.md). */
#ifndef RS_ONNX_OPS_H
#define RS_ONNX_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/dims.h"
#include "engine/core/status.h"
#include "engine/nn/tensor_op.h"
#include "onnx/onnx.pb-c.h"

/* One attribute of an operator, as the ONNX specification defines it for opsets [since, until). */
typedef struct rs_onnx_attr_def {
    const char *name;
    int type;          /* AttributeProto.AttributeType (ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__*) */
    bool required;
    int since, until;  /* opsets where it is an attribute; 0: no bound */
    bool to_input;     /* at `until` it became an input of the same name (axes, split) */
    bool has_def;      /* the specification's default, in i, f or s by type */
    int64_t i;
    float f;
    const char *s;
} rs_onnx_attr_def;

struct nctx; /* the node being imported (import_internal.h) */
typedef rs_status (*rs_onnx_import_fn)(struct nctx *c);

/* What `onnx check` knows of one node when it runs its operator's shape check: the input shapes it
 * could follow (NULL: unknown or absent; a dim < 0 is unknown, a name in the file) and the node. */
typedef struct rs_onnx_shape_io {
    const Onnx__NodeProto *node;
    int64_t opset;
    int nin;
    const rs_dims *in[8];
    const Onnx__TensorProto *cin[8]; /* the initializer behind an input, NULL when it is none */
    rs_dims out;      /* output 0, when the check can tell */
    bool out_known;
    char msg[RS_ERR_MSG_MAX + 32]; /* the finding when the check returns false */
} rs_onnx_shape_io;
/* false: the shapes do not fit (io->msg says how); true otherwise, with io->out when known. */
typedef bool (*rs_onnx_shape_fn)(rs_onnx_shape_io *io);

typedef struct rs_onnx_op_def {
    const char *name;             /* op_type in the default domain */
    int since;                    /* first opset that has it (0: older than any ringside reads) */
    int min_in, max_in;           /* over the opsets ringside reads; max -1: unbounded */
    int min_out, max_out;
    const rs_onnx_attr_def *attrs; /* ends with an entry whose name is NULL */
    rs_op op;                     /* the engine op the handler makes, where it picks by operator */
    int sub;                      /* rs_unary_op / rs_binary_op, for the elementwise families */
    rs_onnx_import_fn import;     /* import_*.c: the handler that makes graph nodes or folds */
    rs_onnx_shape_fn shape;       /* check_shapes.c: `onnx check`'s shape rule; NULL: none */
} rs_onnx_op_def;

/* The entry of op_type (default domain), NULL when ringside does not know it. */
const rs_onnx_op_def *rs_onnx_op_find(const char *op_type);
/* Entries in the table, and the i-th (in alphabetical order). */
size_t rs_onnx_op_count(void);
const rs_onnx_op_def *rs_onnx_op_at(size_t i);
/* Attribute name of op at opset (0: any opset); NULL when the operator has no such attribute then. */
const rs_onnx_attr_def *rs_onnx_op_attr(const rs_onnx_op_def *op, const char *name, int64_t opset);
/* AttributeType that `attr` of op_type has in some opset; 0 (UNDEFINED) when either is unknown. */
int rs_onnx_op_attr_type(const char *op_type, const char *attr);
/* "FLOAT", "INTS", ... for an AttributeType value. */
const char *rs_onnx_attr_type_name(int type);
/* Every operator's name, comma-separated, in the table's order (for help and error messages). */
const char *rs_onnx_supported_ops(void);

/* check_shapes.c: the shape rules entries name. same: output 0 has input 0's shape; broadcast: numpy
 * broadcasting, followed where it can be and never a finding (a name may stand for any size); gemm,
 * matmul, conv: the importer's own rules (graph.c) on the dims the file fixes; flatten: the 2-d
 * result; constant: the value's shape, and exactly one value. */
bool rs_onnx_shape_same(rs_onnx_shape_io *io);
bool rs_onnx_shape_broadcast(rs_onnx_shape_io *io);
bool rs_onnx_shape_gemm(rs_onnx_shape_io *io);
bool rs_onnx_shape_matmul(rs_onnx_shape_io *io);
bool rs_onnx_shape_conv(rs_onnx_shape_io *io);
bool rs_onnx_shape_flatten(rs_onnx_shape_io *io);
bool rs_onnx_shape_constant(rs_onnx_shape_io *io);
/* split: the sizes (attribute before opset 13, an initializer since) add up to the split dim */
bool rs_onnx_shape_split(rs_onnx_shape_io *io);

#endif
