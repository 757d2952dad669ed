/* What export.c (the walk over the model's graph, the per-layer switch, the image and MLP layers) and
 * export_seq.c (the transformer's layers: token embedding, linear over a sequence, attention,
 * gelu(tanh)) share: the exporter's state and the few helpers every mapping uses. Not public. */
#ifndef RS_ONNX_EXPORT_INTERNAL_H
#define RS_ONNX_EXPORT_INTERNAL_H

#include <stdbool.h>

#include "engine/nn/model.h"
#include "onnx/build.h"

#define RS_ONNX_NAME_LEN 96
#define RS_ONNX_MAX_CONSTS 16

typedef struct rs_onnx_exporter {
    rs_onnx_builder *b;
    rs_model *m;
    const float *params; /* (numel) host parameters */
    int opset;
    char input[RS_ONNX_NAME_LEN];    /* the graph input: "input", or "tokens" for a token model */
    char (*val)[RS_ONNX_NAME_LEN];   /* (layers) the ONNX value each layer's output is */
    bool *added;                     /* (tensors) written as an initializer under its own name */
    char cur[RS_ONNX_NAME_LEN];      /* the output of the last node added */
    char consts[RS_ONNX_MAX_CONSTS][RS_ONNX_NAME_LEN]; /* shared scalar initializers made so far */
    int nconsts;
    int mask_T;                      /* T of the shared causal mask, 0 = not made yet */
    rs_err *err;
} rs_onnx_exporter;

/* The value input k of l reads: the graph input for -1, else the producing layer's value. */
const char *rs_onnx_ex_src(const rs_onnx_exporter *x, const rs_layer *l, int k);
/* Appends op(in) -> "<layer>.<tag>", names the node "/<layer>/<tag>"; x->cur names its output. */
rs_status rs_onnx_ex_node(rs_onnx_exporter *x, const rs_layer *l, const char *op, const char *tag, int n_in,
                          const char *const *in);
/* A float scalar initializer shared by every layer that asks for the same name (made once). */
rs_status rs_onnx_ex_const(rs_onnx_exporter *x, const char *name, float v);
/* The layer's parameter `suffix` ("weight"), or NULL; a tied slot gives its owner's tensor. */
const rs_param_info *rs_onnx_ex_param(const rs_onnx_exporter *x, const rs_layer *l, const char *suffix);
/* An initializer holding a model tensor under the model's name for it. */
rs_status rs_onnx_ex_add_param(rs_onnx_exporter *x, const rs_param_info *p);

/* export_act.c: an activation layer computing elementwise operator op (an rs_unary_op). */
rs_status rs_onnx_ex_unary(rs_onnx_exporter *x, const rs_layer *l, int op);
/* An activation written as its descriptor's onnx_chain. */
rs_status rs_onnx_ex_chain(rs_onnx_exporter *x, const rs_layer *l);

/* export_seq.c */
rs_status rs_onnx_ex_embed(rs_onnx_exporter *x, const rs_layer *l);
rs_status rs_onnx_ex_linear_seq(rs_onnx_exporter *x, const rs_layer *l);
rs_status rs_onnx_ex_attn(rs_onnx_exporter *x, const rs_layer *l);
rs_status rs_onnx_ex_gelu_tanh(rs_onnx_exporter *x, const rs_layer *l);

#endif
