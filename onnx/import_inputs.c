/* The graph's inputs (graph.h: rs_onnx_input). One input becomes the graph's input value as it is. Several
 * (a two-tower model's user and item features, say) become one packed input, per sample each input's
 * values in the file's order, and a Slice (plus a Reshape when the input has more than one dim per
 * sample) of it under each input's name: the engine's model has one input, and every node the file has
 * runs as it would on separate tensors, on views of it. Packing is exact only for inputs of one element
 * type, so only float inputs with a symbolic batch pack; anything else is refused naming the inputs. */
#include "import_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A file may declare many inputs; serve lists at most 16 per model, and more is not a model we meet. */
#define MAX_INPUTS 64

static rs_status graph_input(imp *p, const Onnx__ValueInfoProto *vi, rs_dims *s, int64_t *fixed)
{
    const char *nm = rs_onnx_str_or(vi->name, "?");
    const Onnx__TypeProto *t = vi->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input '%s' is not a tensor", nm);
    const Onnx__TypeProto__Tensor *tt = t->tensor_type;
    bool ids = tt->elem_type == DT_INT64 || tt->elem_type == DT_INT32;
    if (tt->elem_type != DT_FLOAT && !ids)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input '%s' has element type %s; only float inputs (and int64 or "
                    "int32 token ids) are supported", nm, rs_onnx_import_dtype_name(tt->elem_type));
    if (!tt->shape || tt->shape->n_dim < 1)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input '%s' has no shape; a (batch, ...) shape is needed", nm);
    const Onnx__TensorShapeProto *sh = tt->shape;
    if (sh->n_dim > RS_DIMS_MAX) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input '%s' has rank %zu", nm, sh->n_dim);
    s->rank = (int)sh->n_dim;
    *fixed = 0;
    for (size_t k = 0; k < sh->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
        bool val = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (k == 0) {
            if (val && d->dim_value >= 1 && d->dim_value <= 1 << 20) *fixed = d->dim_value;
            else if (val) return rs_onnx_fail(p, RS_ERR_FORMAT, "input '%s' has batch size %lld", nm, (long long)d->dim_value);
            s->d[0] = val ? d->dim_value : RS_DIM_BATCH;
            continue;
        }
        if (!val || d->dim_value < 1)
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input '%s': dimension %zu must be a fixed size >= 1 (only the batch, "
                        "dimension 0, may be symbolic)", nm, k);
        s->d[k] = d->dim_value;
    }
    if (rs_dims_numel(s, 1) < 0) return rs_onnx_fail(p, RS_ERR_FORMAT, "input '%s' is larger than 2^31 elements", nm);
    return ids ? rs_onnx_token_input(p, nm, tt->elem_type, s, *fixed) : RS_OK;
}

/* Several inputs pack only when each is float: "'a' (float), 'ids' (int64)" in the refusal. */
static rs_status check_packable(imp *p, const Onnx__ValueInfoProto **vis, int n)
{
    bool ok = true;
    for (int k = 0; k < n; k++) {
        const Onnx__TypeProto *t = vis[k]->type;
        ok &= t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type &&
              t->tensor_type->elem_type == DT_FLOAT;
    }
    if (ok) return RS_OK;
    char list[400];
    size_t len = 0;
    for (int k = 0; k < n && len < sizeof list; k++) {
        const Onnx__TypeProto *t = vis[k]->type;
        int et = t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type ? t->tensor_type->elem_type : -1;
        len += (size_t)snprintf(list + len, sizeof list - len, "%s'%.40s' (%s)", k ? ", " : "",
                                rs_onnx_str_or(vis[k]->name, "?"), et < 0 ? "not a tensor" : rs_onnx_import_dtype_name(et));
    }
    return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "the graph has %d inputs: %s; several inputs are supported when every one "
                        "is float (they are packed into the model's one float input), not token ids or other types",
                        n, list);
}

/* Emits node op over x as if the file had it, named `node`, its output value `out`. */
static rs_status emit_view(imp *p, rs_op op, const rs_op_attrs *a, ival *x, const char *node, const char *op_type,
                           char *out, ival *res)
{
    Onnx__NodeProto np = ONNX__NODE_PROTO__INIT;
    char *outs[1] = {out};
    np.name = (char *)node;
    np.op_type = (char *)op_type;
    np.n_output = 1;
    np.output = outs;
    nctx c = {.p = p, .np = &np, .index = -1};
    rs_status st = rs_onnx_emit(&c, op, a, &x, 1);
    *res = c.res; /* IV_DYN: nothing to free */
    return st;
}

/* The declared input `in` as a view of the packed input: its columns, in its declared shape. */
static rs_status unpack(imp *p, ival *packed, const rs_onnx_input *in, ival *out)
{
    char node[200], flat[200];
    bool reshape = in->shape.rank != 2;
    snprintf(node, sizeof node, "unpack_%.150s", in->name);
    snprintf(flat, sizeof flat, "%.150s_packed_cols", in->name);
    rs_op_attrs a = {.shape = {2, {RS_DIM_BATCH, (int64_t)in->numel}}, .starts = {0, (int64_t)in->offset},
                     .steps = {1, 1}};
    ival cols;
    rs_status st = emit_view(p, RS_OP_SLICE, &a, packed, node, "Slice", reshape ? flat : in->name, &cols);
    if (st || !reshape) {
        *out = cols;
        return st;
    }
    snprintf(node, sizeof node, "view_%.150s", in->name);
    rs_op_attrs r = {.shape = in->shape};
    return emit_view(p, RS_OP_RESHAPE, &r, &cols, node, "Reshape", in->name, out);
}

/* The packed input and a view of it per declared input (vis, n > 1). */
static rs_status pack(imp *p, const Onnx__ValueInfoProto **vis, int n)
{
    rs_onnx_graph *g = p->g;
    rs_status st = check_packable(p, vis, n);
    size_t total = 0;
    for (int k = 0; k < n && !st; k++) {
        rs_onnx_input *in = &g->inputs[k];
        int64_t fixed = 0;
        if ((st = graph_input(p, vis[k], &in->shape, &fixed))) break;
        if (fixed)
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input '%s' fixes the batch at %lld; several inputs are supported "
                                "with a symbolic batch (dimension 0) only", in->name, (long long)fixed);
        in->offset = total;
        in->numel = (size_t)rs_dims_numel(&in->shape, 1);
        total += in->numel;
        if (total > (size_t)1 << 31) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "the inputs hold over 2^31 values per sample");
    }
    if (st) return st;
    rs_dims ps = {2, {RS_DIM_BATCH, (int64_t)total}};
    g->input = rs_onnx_add_value(p, "packed_inputs", &ps);
    if (g->input < 0) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    ival packed = {.kind = IV_DYN, .shape = ps, .vid = g->input};
    for (int k = 0; k < n && !st; k++) {
        ival *iv = rs_onnx_lookup(p, g->inputs[k].name, true);
        if (!iv) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
        if (iv->kind != IV_NONE) return rs_onnx_fail(p, RS_ERR_FORMAT, "input '%s' is declared twice", g->inputs[k].name);
        st = unpack(p, &packed, &g->inputs[k], iv);
    }
    return st;
}

rs_status rs_onnx_read_inputs(imp *p, const Onnx__GraphProto *gp)
{
    rs_onnx_graph *g = p->g;
    const Onnx__ValueInfoProto *vis[MAX_INPUTS];
    int n = 0;
    for (size_t k = 0; k < gp->n_input; k++) {
        const Onnx__ValueInfoProto *vi = gp->input[k];
        ival *v = rs_onnx_lookup(p, rs_onnx_str_or(vi->name, ""), false);
        if (v && v->kind != IV_NONE) continue; /* IR < 4 lists initializers as inputs too */
        if (n == MAX_INPUTS) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "the graph has over %d inputs", MAX_INPUTS);
        vis[n++] = vi;
    }
    if (n < 1) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "the graph has no inputs; a model takes at least one");
    g->inputs = calloc((size_t)n, sizeof *g->inputs); /* the graph's: rs_onnx_graph_free */
    if (!g->inputs) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    g->ninputs = n;
    for (int k = 0; k < n; k++)
        if (!(g->inputs[k].name = strdup(rs_onnx_str_or(vis[k]->name, "")))) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    if (n > 1) return pack(p, vis, n);
    rs_onnx_input *in = &g->inputs[0];
    rs_status st = graph_input(p, vis[0], &in->shape, &g->fixed_batch);
    if (st) return st;
    in->numel = (size_t)rs_dims_numel(&in->shape, 1);
    if (g->fixed_batch > 1) in->numel /= (size_t)g->fixed_batch;
    ival *iv = rs_onnx_lookup(p, in->name, true);
    if (!iv) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    g->input = rs_onnx_add_value(p, in->name, &in->shape);
    if (g->input < 0) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    *iv = (ival){.kind = IV_DYN, .shape = in->shape, .vid = g->input};
    return RS_OK;
}
