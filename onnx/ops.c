/* The ONNX operator registry (see ops.h): one entry per operator, alphabetical, with what the
 * specification says of it for the opsets ringside reads (11 and later; a few older attribute forms the
 * importer also takes are listed with their `until`), the handler the importer runs and the shape rule
 * `onnx check` runs. Arity and attributes were taken from onnx.defs (onnx 1.23) over opsets 11..22. */
#include "onnx/ops.h"

#include <float.h>
#include <stdio.h>
#include <string.h>

#include "onnx/import_internal.h"

#define AT(t) ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##t
/* Attribute shorthands: an int / float / string with the specification's default, and one without. */
#define A_I(n, d) {.name = n, .type = AT(INT), .has_def = true, .i = (d)}
#define A_F(n, d) {.name = n, .type = AT(FLOAT), .has_def = true, .f = (d)}
#define A_S(n, d) {.name = n, .type = AT(STRING), .has_def = true, .s = (d)}
#define A_(n, t) {.name = n, .type = AT(t)}
#define END {.name = NULL}

/* The window attributes of Conv and the pools (kernel_shape is required by the pools only). */
#define WINDOW(kreq) A_S("auto_pad", "NOTSET"), A_("dilations", INTS), \
    {.name = "kernel_shape", .type = AT(INTS), .required = (kreq)}, A_("pads", INTS), A_("strides", INTS)

/* An elementwise operator: the unary or binary handler with its engine function. */
#define UNARY(nm, u, ...) {.name = nm, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .op = RS_OP_UNARY, \
    .sub = (u), .import = rs_onnx_h_unary, .shape = rs_onnx_shape_same, __VA_ARGS__}
#define BINARY(nm, b, ...) {.name = nm, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1, .op = RS_OP_BINARY, \
    .sub = (b), .import = rs_onnx_h_binary, .shape = rs_onnx_shape_broadcast, __VA_ARGS__}

static const rs_onnx_attr_def no_attrs[] = {END};

/* The recurrent operators: valid ONNX that `onnx check` knows, refused at import naming the node
 * (rs_onnx_h_recurrent: the engine has no recurrent layer). */
#define RECURRENT_ATTRS A_("activation_alpha", FLOATS), A_("activation_beta", FLOATS), A_("activations", STRINGS), \
    A_("clip", FLOAT), A_S("direction", "forward"), A_("hidden_size", INT), \
    {.name = "layout", .type = AT(INT), .since = 14, .has_def = true}

static const rs_onnx_op_def ops[] = {
    UNARY("Abs", RS_UNARY_ABS, .attrs = no_attrs),
    BINARY("Add", RS_BINARY_ADD, .attrs = no_attrs),
    BINARY("And", RS_BINARY_AND, .attrs = no_attrs),
    {.name = "AveragePool", .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .op = RS_OP_AVGPOOL,
     .import = rs_onnx_h_pool,
     .attrs = (const rs_onnx_attr_def[]){WINDOW(true), A_I("ceil_mode", 0), A_I("count_include_pad", 0), END}},
    {.name = "BatchNormalization", .min_in = 5, .max_in = 5, .min_out = 1, .max_out = 5,
     .import = rs_onnx_h_batchnorm,
     .attrs = (const rs_onnx_attr_def[]){A_F("epsilon", 1e-5f), A_F("momentum", 0.9f),
                                         {.name = "training_mode", .type = AT(INT), .since = 14, .has_def = true},
                                         END}},
    {.name = "Cast", .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .import = rs_onnx_h_cast,
     .shape = rs_onnx_shape_same,
     .attrs = (const rs_onnx_attr_def[]){{.name = "to", .type = AT(INT), .required = true},
                                         {.name = "saturate", .type = AT(INT), .since = 19, .has_def = true, .i = 1},
                                         END}},
    /* Clip: the unary handler, its bounds as inputs from opset 11 (attributes before) */
    {.name = "Clip", .min_in = 1, .max_in = 3, .min_out = 1, .max_out = 1, .op = RS_OP_UNARY, .sub = RS_UNARY_CLIP,
     .import = rs_onnx_h_unary, .shape = rs_onnx_shape_same,
     .attrs = (const rs_onnx_attr_def[]){{.name = "min", .type = AT(FLOAT), .until = 11, .to_input = true,
                                          .has_def = true, .f = -FLT_MAX},
                                         {.name = "max", .type = AT(FLOAT), .until = 11, .to_input = true,
                                          .has_def = true, .f = FLT_MAX},
                                         END}},
    {.name = "Concat", .min_in = 1, .max_in = -1, .min_out = 1, .max_out = 1, .import = rs_onnx_h_concat,
     .attrs = (const rs_onnx_attr_def[]){{.name = "axis", .type = AT(INT), .required = true}, END}},
    {.name = "Constant", .min_in = 0, .max_in = 0, .min_out = 1, .max_out = 1, .import = rs_onnx_h_constant,
     .shape = rs_onnx_shape_constant,
     .attrs = (const rs_onnx_attr_def[]){A_("sparse_value", SPARSE_TENSOR), A_("value", TENSOR),
                                         A_("value_float", FLOAT), A_("value_floats", FLOATS), A_("value_int", INT),
                                         A_("value_ints", INTS), A_("value_string", STRING),
                                         A_("value_strings", STRINGS), END}},
    {.name = "ConstantOfShape", .since = 9, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
     .import = rs_onnx_h_constant_of_shape, .attrs = (const rs_onnx_attr_def[]){A_("value", TENSOR), END}},
    {.name = "Conv", .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1, .op = RS_OP_CONV,
     .import = rs_onnx_h_conv, .shape = rs_onnx_shape_conv,
     .attrs = (const rs_onnx_attr_def[]){WINDOW(false), A_I("group", 1), END}},
    BINARY("Div", RS_BINARY_DIV, .attrs = no_attrs),
    {.name = "Dropout", .min_in = 1, .max_in = 3, .min_out = 1, .max_out = 2, .import = rs_onnx_h_identity,
     .shape = rs_onnx_shape_same,
     .attrs = (const rs_onnx_attr_def[]){{.name = "ratio", .type = AT(FLOAT), .until = 12, .to_input = true,
                                          .has_def = true, .f = 0.5f},
                                         {.name = "seed", .type = AT(INT), .since = 12}, END}},
    BINARY("Equal", RS_BINARY_EQUAL, .attrs = no_attrs),
    UNARY("Erf", RS_UNARY_ERF, .since = 9, .attrs = no_attrs),
    UNARY("Exp", RS_UNARY_EXP, .attrs = no_attrs),
    {.name = "Expand", .since = 8, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1,
     .import = rs_onnx_h_expand, .attrs = no_attrs},
    {.name = "Flatten", .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .import = rs_onnx_h_flatten,
     .shape = rs_onnx_shape_flatten, .attrs = (const rs_onnx_attr_def[]){A_I("axis", 1), END}},
    {.name = "GRU", .min_in = 3, .max_in = 6, .min_out = 1, .max_out = 2, .import = rs_onnx_h_recurrent,
     .attrs = (const rs_onnx_attr_def[]){RECURRENT_ATTRS, A_I("linear_before_reset", 0), END}},
    {.name = "Gather", .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1, .import = rs_onnx_h_gather,
     .attrs = (const rs_onnx_attr_def[]){A_I("axis", 0), END}},
    UNARY("Gelu", RS_UNARY_GELU, .since = 20, .attrs = (const rs_onnx_attr_def[]){A_S("approximate", "none"), END}),
    {.name = "Gemm", .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1, .op = RS_OP_GEMM,
     .import = rs_onnx_h_gemm, .shape = rs_onnx_shape_gemm,
     .attrs = (const rs_onnx_attr_def[]){A_F("alpha", 1.0f), A_F("beta", 1.0f), A_I("transA", 0),
                                         A_I("transB", 0), END}},
    {.name = "GlobalAveragePool", .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .import = rs_onnx_h_gap,
     .attrs = no_attrs},
    BINARY("Greater", RS_BINARY_GREATER, .attrs = no_attrs),
    BINARY("GreaterOrEqual", RS_BINARY_GREATER_EQ, .since = 12, .attrs = no_attrs),
    UNARY("HardSigmoid", RS_UNARY_HARDSIGMOID,
          .attrs = (const rs_onnx_attr_def[]){A_F("alpha", 0.2f), A_F("beta", 0.5f), END}),
    UNARY("HardSwish", RS_UNARY_HARDSWISH, .since = 14, .attrs = no_attrs),
    {.name = "Identity", .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .import = rs_onnx_h_identity,
     .shape = rs_onnx_shape_same, .attrs = no_attrs},
    {.name = "LSTM", .min_in = 3, .max_in = 8, .min_out = 1, .max_out = 3, .import = rs_onnx_h_recurrent,
     .attrs = (const rs_onnx_attr_def[]){RECURRENT_ATTRS, A_I("input_forget", 0), END}},
    {.name = "LayerNormalization", .since = 17, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 3,
     .import = rs_onnx_h_layernorm, .shape = rs_onnx_shape_same,
     .attrs = (const rs_onnx_attr_def[]){A_I("axis", -1), A_F("epsilon", 1e-5f), A_I("stash_type", 1), END}},
    UNARY("LeakyRelu", RS_UNARY_LEAKYRELU, .attrs = (const rs_onnx_attr_def[]){A_F("alpha", 0.01f), END}),
    BINARY("Less", RS_BINARY_LESS, .attrs = no_attrs),
    BINARY("LessOrEqual", RS_BINARY_LESS_EQ, .since = 12, .attrs = no_attrs),
    UNARY("Log", RS_UNARY_LOG, .attrs = no_attrs),
    /* Softmax and LogSoftmax flattened from axis 1 before opset 13 and take the last axis since */
    {.name = "LogSoftmax", .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .op = RS_OP_LOGSOFTMAX,
     .import = rs_onnx_h_softmax, .shape = rs_onnx_shape_same,
     .attrs = (const rs_onnx_attr_def[]){{.name = "axis", .type = AT(INT), .until = 13, .has_def = true, .i = 1},
                                         {.name = "axis", .type = AT(INT), .since = 13, .has_def = true, .i = -1},
                                         END}},
    {.name = "MatMul", .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1, .op = RS_OP_MATMUL,
     .import = rs_onnx_h_matmul, .shape = rs_onnx_shape_matmul, .attrs = no_attrs},
    {.name = "MaxPool", .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 2, .op = RS_OP_MAXPOOL,
     .import = rs_onnx_h_pool,
     .attrs = (const rs_onnx_attr_def[]){WINDOW(true), A_I("ceil_mode", 0), A_I("storage_order", 0), END}},
    BINARY("Mod", RS_BINARY_MOD, .since = 10, .attrs = (const rs_onnx_attr_def[]){A_I("fmod", 0), END}),
    BINARY("Mul", RS_BINARY_MUL, .attrs = no_attrs),
    UNARY("Neg", RS_UNARY_NEG, .attrs = no_attrs),
    UNARY("Not", RS_UNARY_NOT, .attrs = no_attrs),
    BINARY("Or", RS_BINARY_OR, .attrs = no_attrs),
    BINARY("Pow", RS_BINARY_POW, .attrs = no_attrs),
    {.name = "RNN", .min_in = 3, .max_in = 6, .min_out = 1, .max_out = 2, .import = rs_onnx_h_recurrent,
     .attrs = (const rs_onnx_attr_def[]){RECURRENT_ATTRS, END}},
    {.name = "Range", .since = 11, .min_in = 3, .max_in = 3, .min_out = 1, .max_out = 1, .import = rs_onnx_h_range,
     .attrs = no_attrs},
    UNARY("Reciprocal", RS_UNARY_RECIPROCAL, .attrs = no_attrs),
    {.name = "ReduceMean", .min_in = 1, .max_in = 2, .min_out = 1, .max_out = 1, .op = RS_OP_REDUCEMEAN,
     .import = rs_onnx_h_reduce,
     .attrs = (const rs_onnx_attr_def[]){{.name = "axes", .type = AT(INTS), .until = 18, .to_input = true},
                                         A_I("keepdims", 1),
                                         {.name = "noop_with_empty_axes", .type = AT(INT), .since = 18,
                                          .has_def = true},
                                         END}},
    {.name = "ReduceSum", .min_in = 1, .max_in = 2, .min_out = 1, .max_out = 1, .op = RS_OP_REDUCESUM,
     .import = rs_onnx_h_reduce,
     .attrs = (const rs_onnx_attr_def[]){{.name = "axes", .type = AT(INTS), .until = 13, .to_input = true},
                                         A_I("keepdims", 1),
                                         {.name = "noop_with_empty_axes", .type = AT(INT), .since = 13,
                                          .has_def = true},
                                         END}},
    UNARY("Relu", RS_UNARY_RELU, .attrs = no_attrs),
    {.name = "Reshape", .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1, .import = rs_onnx_h_reshape,
     .attrs = (const rs_onnx_attr_def[]){{.name = "allowzero", .type = AT(INT), .since = 14, .has_def = true},
                                         END}},
    {.name = "Shape", .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .import = rs_onnx_h_shape,
     .attrs = (const rs_onnx_attr_def[]){{.name = "end", .type = AT(INT), .since = 15},
                                         {.name = "start", .type = AT(INT), .since = 15, .has_def = true}, END}},
    UNARY("Sigmoid", RS_UNARY_SIGMOID, .attrs = no_attrs),
    /* Slice took starts/ends/axes as attributes before opset 10 */
    {.name = "Slice", .min_in = 1, .max_in = 5, .min_out = 1, .max_out = 1, .import = rs_onnx_h_slice,
     .attrs = (const rs_onnx_attr_def[]){{.name = "axes", .type = AT(INTS), .until = 10, .to_input = true},
                                         {.name = "ends", .type = AT(INTS), .until = 10, .to_input = true},
                                         {.name = "starts", .type = AT(INTS), .until = 10, .to_input = true},
                                         END}},
    {.name = "Softmax", .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .op = RS_OP_SOFTMAX,
     .import = rs_onnx_h_softmax, .shape = rs_onnx_shape_same,
     .attrs = (const rs_onnx_attr_def[]){{.name = "axis", .type = AT(INT), .until = 13, .has_def = true, .i = 1},
                                         {.name = "axis", .type = AT(INT), .since = 13, .has_def = true, .i = -1},
                                         END}},
    {.name = "Split", .min_in = 1, .max_in = 2, .min_out = 1, .max_out = -1, .import = rs_onnx_h_split,
     .shape = rs_onnx_shape_split,
     .attrs = (const rs_onnx_attr_def[]){A_I("axis", 0), {.name = "num_outputs", .type = AT(INT), .since = 18},
                                         {.name = "split", .type = AT(INTS), .until = 13, .to_input = true},
                                         END}},
    UNARY("Sqrt", RS_UNARY_SQRT, .attrs = no_attrs),
    {.name = "Squeeze", .min_in = 1, .max_in = 2, .min_out = 1, .max_out = 1, .import = rs_onnx_h_squeeze,
     .attrs = (const rs_onnx_attr_def[]){{.name = "axes", .type = AT(INTS), .until = 13, .to_input = true},
                                         END}},
    BINARY("Sub", RS_BINARY_SUB, .attrs = no_attrs),
    UNARY("Tanh", RS_UNARY_TANH, .attrs = no_attrs),
    {.name = "Transpose", .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .import = rs_onnx_h_transpose,
     .attrs = (const rs_onnx_attr_def[]){A_("perm", INTS), END}},
    {.name = "Trilu", .since = 14, .min_in = 1, .max_in = 2, .min_out = 1, .max_out = 1, .import = rs_onnx_h_trilu,
     .shape = rs_onnx_shape_same, .attrs = (const rs_onnx_attr_def[]){A_I("upper", 1), END}},
    {.name = "Unsqueeze", .min_in = 1, .max_in = 2, .min_out = 1, .max_out = 1, .import = rs_onnx_h_unsqueeze,
     .attrs = (const rs_onnx_attr_def[]){{.name = "axes", .type = AT(INTS), .required = true, .until = 13,
                                          .to_input = true},
                                         END}},
    {.name = "Where", .since = 9, .min_in = 3, .max_in = 3, .min_out = 1, .max_out = 1, .import = rs_onnx_h_where,
     .attrs = no_attrs},
    BINARY("Xor", RS_BINARY_XOR, .attrs = no_attrs),
};
#define NOPS (sizeof ops / sizeof *ops)

const rs_onnx_op_def *rs_onnx_op_find(const char *op_type)
{
    if (!op_type) return NULL;
    for (size_t i = 0; i < NOPS; i++)
        if (!strcmp(ops[i].name, op_type)) return &ops[i];
    return NULL;
}

size_t rs_onnx_op_count(void) { return NOPS; }

const rs_onnx_op_def *rs_onnx_op_at(size_t i) { return i < NOPS ? &ops[i] : NULL; }

const rs_onnx_attr_def *rs_onnx_op_attr(const rs_onnx_op_def *op, const char *name, int64_t opset)
{
    if (!op || !name) return NULL;
    for (const rs_onnx_attr_def *a = op->attrs; a && a->name; a++) {
        if (strcmp(a->name, name)) continue;
        if (opset > 0 && ((a->since && opset < a->since) || (a->until && opset >= a->until))) continue;
        return a;
    }
    return NULL;
}

int rs_onnx_op_attr_type(const char *op_type, const char *attr)
{
    const rs_onnx_attr_def *a = rs_onnx_op_attr(rs_onnx_op_find(op_type), attr, 0);
    return a ? a->type : 0;
}

const char *rs_onnx_attr_type_name(int type)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT",   "INT",    "STRING",         "TENSOR",
                                        "GRAPH",     "FLOATS",  "INTS",   "STRINGS",        "TENSORS",
                                        "GRAPHS",    "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO",
                                        "TYPE_PROTOS"};
    if (type < 0 || type >= (int)(sizeof names / sizeof names[0])) return "?";
    return names[type];
}

const char *rs_onnx_supported_ops(void)
{
    static char list[2048];
    if (!list[0]) {
        size_t k = 0;
        for (size_t i = 0; i < NOPS && k < sizeof list; i++)
            if (ops[i].import != rs_onnx_h_recurrent) /* known, but refused at import */
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", ops[i].name);
    }
    return list;
}
