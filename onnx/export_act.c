/* Activations: a layer whose descriptor has an onnx_chain is written as that chain of nodes; the others
 * by the elementwise operator they compute (unary_of), as one node where ONNX has it and as its formula
 * where it has not (GELU before opset 20). A new activation needs an entry here only when it has
 * neither. */
#include <math.h>
#include <stdio.h>

#include "onnx/export_internal.h"
#include "onnx/ops.h"

typedef rs_onnx_exporter exporter;

static rs_status node(exporter *x, const rs_layer *l, const char *op, const char *tag, int n_in,
                      const char *const *in)
{
    return rs_onnx_ex_node(x, l, op, tag, n_in, in);
}

/* GELU, exact (erf) form as the engine computes it: 0.5 * x * (1 + erf(x / sqrt(2))). Gelu is an
 * operator from opset 20; before it, the same formula from Div, Erf, Add and Mul. */
static rs_status gelu(exporter *x, const rs_layer *l)
{
    char xin[RS_ONNX_NAME_LEN], t1[RS_ONNX_NAME_LEN], t2[RS_ONNX_NAME_LEN], t3[RS_ONNX_NAME_LEN], t4[RS_ONNX_NAME_LEN];
    snprintf(xin, sizeof xin, "%s", rs_onnx_ex_src(x, l, 0));
    if (x->opset >= 20) return node(x, l, "Gelu", "gelu", 1, (const char *[]){xin});
    rs_status st = rs_onnx_ex_const(x, "/gelu/sqrt2", (float)M_SQRT2);
    if (!st) st = rs_onnx_ex_const(x, "/gelu/one", 1.0f);
    if (!st) st = rs_onnx_ex_const(x, "/gelu/half", 0.5f);
    if (st) return st;
    if ((st = node(x, l, "Div", "gelu_div", 2, (const char *[]){xin, "/gelu/sqrt2"}))) return st;
    snprintf(t1, sizeof t1, "%s", x->cur);
    if ((st = node(x, l, "Erf", "gelu_erf", 1, (const char *[]){t1}))) return st;
    snprintf(t2, sizeof t2, "%s", x->cur);
    if ((st = node(x, l, "Add", "gelu_add", 2, (const char *[]){t2, "/gelu/one"}))) return st;
    snprintf(t3, sizeof t3, "%s", x->cur);
    if ((st = node(x, l, "Mul", "gelu_mul", 2, (const char *[]){xin, t3}))) return st;
    snprintf(t4, sizeof t4, "%s", x->cur);
    return node(x, l, "Mul", "gelu", 2, (const char *[]){t4, "/gelu/half"});
}

rs_status rs_onnx_ex_chain(exporter *x, const rs_layer *l)
{
    char xin[RS_ONNX_NAME_LEN], prev[RS_ONNX_NAME_LEN], tag[RS_ONNX_NAME_LEN];
    snprintf(xin, sizeof xin, "%s", rs_onnx_ex_src(x, l, 0));
    snprintf(prev, sizeof prev, "%s", xin);
    const char *kind = rs_layer_kind_name(l->cfg.kind);
    for (const rs_layer_onnx_node *c = l->ops->onnx_chain; c->op; c++) {
        /* the last node makes the layer's value and carries its name; the others are named by op */
        if (c[1].op) snprintf(tag, sizeof tag, "%s_%s", kind, c->op);
        else snprintf(tag, sizeof tag, "%s", kind);
        const char *in[2] = {c->times_input ? xin : prev, prev};
        rs_status st = rs_onnx_ex_node(x, l, c->op, tag, c->times_input ? 2 : 1, in);
        if (st) return st;
        snprintf(prev, sizeof prev, "%s", x->cur);
    }
    return RS_OK;
}

/* The ONNX operator the importer reads as op by itself: one node, no attributes (Relu, Tanh, Sigmoid,
 * HardSwish...), from the one operator registry; NULL when there is none. */
static const char *single_op(int op)
{
    for (size_t i = 0; i < rs_onnx_op_count(); i++) {
        const rs_onnx_op_def *d = rs_onnx_op_at(i);
        if (d->op == RS_OP_UNARY && d->sub == op && d->min_in == 1 && (!d->attrs || !d->attrs[0].name))
            return d->name;
    }
    return NULL;
}

rs_status rs_onnx_ex_unary(exporter *x, const rs_layer *l, int op)
{
    const char *in1[1] = {rs_onnx_ex_src(x, l, 0)};
    const char *tag = rs_layer_kind_name(l->cfg.kind);
    /* GELU has an operator from opset 20 only; before it, its formula */
    if (op == RS_UNARY_GELU) return gelu(x, l);
    if (op == RS_UNARY_GELU_TANH) return rs_onnx_ex_gelu_tanh(x, l);
    const char *name = single_op(op);
    if (name) return node(x, l, name, tag, 1, in1);
    return rs_err_set(x->err, RS_ERR_UNSUPPORTED, "layer %s (%s) computes an operator ONNX export has no spelling "
                      "for", l->name, tag);
}
