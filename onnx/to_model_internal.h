/* Private to onnx/'s graph -> engine model conversion: the state to_model.c's walk keeps, which the
 * transformer matchers in to_model_seq.c read and extend. Not for other users. */
#ifndef RS_ONNX_TO_MODEL_INTERNAL_H
#define RS_ONNX_TO_MODEL_INTERNAL_H

#include "import.h"

/* One planned model node. */
typedef struct rs_onnx_pnode {
    bool is_op;
    rs_layer_cfg cfg;       /* a layer */
    rs_op_node op;          /* a generic op */
    int src[RS_LAYER_MAX_SRC], nsrc; /* model nodes read (-1: the model's input) */
    const float *w[RS_LAYER_MAX_PARAMS]; /* constants for the parameter slots, in slot order (NULL: zeros) */
    bool w_transposed;      /* slot 0 is MatMul's (K, N) weight: the engine's linear wants (N, K) */
    int wk, wn;             /* (K, N) of a transposed weight */
    int value;              /* the graph value it computes */
    int node;               /* the (first) graph node it stands for */
    /* slot j reads the same constant, in the same layout, as slot sh_slot[j] of the earlier model node
     * sh_node[j]: it becomes a view of that slot rather than a copy (set by share_slots) */
    bool shared[RS_LAYER_MAX_PARAMS];
    int sh_node[RS_LAYER_MAX_PARAMS], sh_slot[RS_LAYER_MAX_PARAMS];
} rs_onnx_pnode;

typedef struct rs_onnx_conv {
    const rs_onnx_graph *g;
    bool train;             /* rs_onnx_to_model: a chain of trainable layers, or an error saying why not */
    rs_err *err;
    rs_onnx_pnode *P;       /* (np), owned */
    int np;
    int *vnode;             /* (nvalues) graph value -> model node; -1 the model's input, -2 none */
    int *uses;              /* (nvalues) how many node inputs read each value (the output counts one) */
    float **cdata;          /* (nvalues) constants computed here (owned): nodes over the import's folding budget */
    bool *taken;            /* (nnodes) part of a model node planned at an earlier graph node: the walk skips it */
} rs_onnx_conv;

static inline const float *rs_onnx_cval(const rs_onnx_conv *c, int v)
{
    if (v < 0) return NULL;
    return c->g->values[v].data ? c->g->values[v].data : c->cdata[v];
}

static inline const rs_dims *rs_onnx_vshape(const rs_onnx_conv *c, int v) { return &c->g->values[v].shape; }

static inline bool rs_onnx_const_scalar(const rs_onnx_conv *c, int v, float *out)
{
    const float *d = rs_onnx_cval(c, v);
    if (!d || rs_dims_numel(rs_onnx_vshape(c, v), 1) != 1) return false;
    *out = d[0];
    return true;
}

/* to_model_seq.c: the transformer's subgraphs as ringside's exporter writes them, each one engine layer.
 * Each returns whether graph node k starts one, and then fills *L (value: the subgraph's last value)
 * and marks the other nodes it takes in c->taken. */

/* Gather(table (V, C), token ids) [+ Add of (T, C) positions]: embed(V, C). Sets *why when k is the
 * token Gather but does not fit. */
bool rs_onnx_tm_embed(rs_onnx_conv *c, int k, rs_onnx_pnode *L, const char **why);
/* Split of (batch, T, 3C) into q, k, v, Reshape (batch, T, H, hs) + Transpose each, MatMul, Mul by
 * 1/sqrt(hs), Add of the causal mask, Softmax, MatMul, Transpose, Reshape (batch, T, C): attn(H),
 * the engine's fused causal attention. k is one of the three Slices. */
bool rs_onnx_tm_attn(rs_onnx_conv *c, int k, rs_onnx_pnode *L);
/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in nine Mul, Add and Tanh nodes from k = Mul(x, x):
 * gelu with approx_tanh. */
bool rs_onnx_tm_gelu_tanh(rs_onnx_conv *c, int k, rs_onnx_pnode *L);

#endif
