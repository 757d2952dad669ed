/* Activations, keyed by the elementwise operator the layer computes (its descriptor's unary_of):
 * how ONNX spells each operator, as one node where ONNX has it and as its formula where it has not.
 * A new activation layer needs an entry here only when its operator is new to the program. */
#include <math.h>
#include <stdio.h>

#include "onnx/export_internal.h"

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

/* SiLU (swish), x * sigmoid(x): ONNX has no operator for it, so torch.onnx writes Sigmoid then Mul,
 * and so does this; the importer reads the pair back as one silu. */
static rs_status silu(exporter *x, const rs_layer *l)
{
    char xin[RS_ONNX_NAME_LEN], s[RS_ONNX_NAME_LEN];
    snprintf(xin, sizeof xin, "%s", rs_onnx_ex_src(x, l, 0));
    rs_status st = node(x, l, "Sigmoid", "silu_sigmoid", 1, (const char *[]){xin});
    if (st) return st;
    snprintf(s, sizeof s, "%s", x->cur);
    return node(x, l, "Mul", "silu", 2, (const char *[]){xin, s});
}

rs_status rs_onnx_ex_unary(exporter *x, const rs_layer *l, int op)
{
    const char *in1[1] = {rs_onnx_ex_src(x, l, 0)};
    const char *tag = rs_layer_kind_name(l->cfg.kind);
    switch (op) {
    case RS_UNARY_RELU: return node(x, l, "Relu", tag, 1, in1);
    case RS_UNARY_TANH: return node(x, l, "Tanh", tag, 1, in1);
    case RS_UNARY_SIGMOID: return node(x, l, "Sigmoid", tag, 1, in1);
    case RS_UNARY_GELU: return gelu(x, l);
    case RS_UNARY_GELU_TANH: return rs_onnx_ex_gelu_tanh(x, l);
    case RS_UNARY_SILU: return silu(x, l);
    default:
        return rs_err_set(x->err, RS_ERR_UNSUPPORTED, "layer %s (%s) computes an operator ONNX export has no "
                          "spelling for", l->name, tag);
    }
}
