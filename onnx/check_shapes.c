/* The shape rules `onnx check` runs, one per registry entry that names one (ops.c). Gemm, MatMul and
 * Conv go through the importer's own rules (rs_onnx_infer, graph.c), so the checker finds what import
 * would refuse as a shape error and nothing else: a dim the file leaves unknown (a name, or a value the
 * checker could not follow) is the importer's symbolic batch there, and a check that needs it says
 * nothing. The others only carry shapes forward so a later product can be checked. */
#include "onnx/ops.h"

#include <stdio.h>
#include <string.h>

#include "onnx/graph.h"

#define AT(t) ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##t

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

/* An int attribute, or the registry's default for the opset (def when it has none). */
static int64_t attr_int(const rs_onnx_shape_io *io, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = attr(io->node, name);
    if (a) return a->i;
    const rs_onnx_attr_def *d = rs_onnx_op_attr(rs_onnx_op_find(io->node->op_type), name, io->opset);
    return d && d->has_def ? d->i : def;
}

static bool all_known(const rs_dims *s, int from, int to)
{
    for (int i = from; i < to; i++)
        if (s->d[i] < 0) return false;
    return true;
}

/* The checker's unknown dims as the importer's batch, and back. */
static rs_dims to_batch(const rs_dims *s)
{
    rs_dims o = *s;
    for (int i = 0; i < o.rank; i++)
        if (o.d[i] < 0) o.d[i] = RS_DIM_BATCH;
    return o;
}

static void set_out(rs_onnx_shape_io *io, const rs_dims *s)
{
    io->out = *s;
    for (int i = 0; i < s->rank; i++)
        if (s->d[i] == RS_DIM_BATCH) io->out.d[i] = -1;
    io->out_known = true;
}

/* rs_onnx_infer on the node as op with attrs a: a shape error is the finding (without the importer's
 * "node 'name' (Op): " prefix, which the checker words its own way); anything else says nothing. */
static bool infer(rs_onnx_shape_io *io, rs_op op, const rs_op_attrs *a, rs_dims *ins, int nin, bool keep_out)
{
    const Onnx__NodeProto *np = io->node;
    rs_onnx_node n = {.op = op, .name = (char *)(np->name ? np->name : ""), .op_type = (char *)np->op_type,
                      .nin = nin, .a = *a};
    const rs_dims *in[RS_OP_MAX_IN] = {0};
    for (int k = 0; k < nin; k++) in[k] = &ins[k];
    rs_dims out;
    rs_err e = {0};
    rs_status st = rs_onnx_infer(&n, in, RS_DIM_BATCH, &out, &e);
    if (st == RS_ERR_SHAPE) {
        const char *m = strstr(e.msg, "): ");
        snprintf(io->msg, sizeof io->msg, "%s (shape inference)", m ? m + 3 : e.msg);
        return false;
    }
    if (!st && keep_out) set_out(io, &out);
    return true;
}

bool rs_onnx_shape_same(rs_onnx_shape_io *io)
{
    if (io->nin > 0 && io->in[0]) {
        io->out = *io->in[0];
        io->out_known = true;
    }
    return true;
}

bool rs_onnx_shape_broadcast(rs_onnx_shape_io *io)
{
    if (io->nin < 2 || !io->in[0] || !io->in[1]) return true;
    const rs_dims *a = io->in[0], *b = io->in[1];
    rs_dims o = {.rank = a->rank > b->rank ? a->rank : b->rank};
    for (int i = 0; i < o.rank; i++) {
        int ia = i - (o.rank - a->rank), ib = i - (o.rank - b->rank);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da == db || db == 1) o.d[i] = da;
        else if (da == 1) o.d[i] = db;
        else if (da < 0 || db < 0) o.d[i] = da < 0 ? db : da; /* a name stands for the other size (or 1) */
        else return true; /* sizes that do not broadcast: left to the importer, which names them */
    }
    io->out = o;
    io->out_known = true;
    return true;
}

bool rs_onnx_shape_gemm(rs_onnx_shape_io *io)
{
    if (io->nin < 2 || !io->in[0] || !io->in[1] || io->in[0]->rank != 2 || io->in[1]->rank != 2) return true;
    rs_dims ins[3] = {to_batch(io->in[0]), to_batch(io->in[1])};
    rs_op_attrs a = {.ta = attr_int(io, "transA", 0) != 0, .tb = attr_int(io, "transB", 0) != 0};
    if (io->in[1]->d[a.tb ? 1 : 0] < 0) return true; /* B's K unknown: any A fits */
    int nin = 2;
    /* C only when A and B fix every dim: a fixed C against a named M would look like a mismatch */
    if (io->nin > 2 && io->in[2] && all_known(io->in[0], 0, 2) && all_known(io->in[1], 0, 2)) {
        ins[2] = *io->in[2];
        nin = 3;
    }
    return infer(io, RS_OP_GEMM, &a, ins, nin, true);
}

bool rs_onnx_shape_matmul(rs_onnx_shape_io *io)
{
    if (io->nin < 2 || !io->in[0] || !io->in[1]) return true;
    const rs_dims *b = io->in[1];
    if (b->rank >= 2 && b->d[b->rank - 2] < 0) return true; /* B's K unknown: any A fits */
    rs_dims ins[2] = {to_batch(io->in[0]), to_batch(b)};
    /* an unknown stacking dim broadcasts against anything: 1 there checks only the matrices */
    bool stacked_unknown = false;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < ins[k].rank - 2; i++)
            if (ins[k].d[i] == RS_DIM_BATCH) {
                ins[k].d[i] = 1;
                stacked_unknown = true;
            }
    return infer(io, RS_OP_MATMUL, &(rs_op_attrs){0}, ins, 2, !stacked_unknown);
}

/* Conv's window from its attributes or its weight; false when the checker cannot follow it (auto_pad
 * SAME, dilations, more than 2 spatial dims). */
static bool conv_window(const rs_onnx_shape_io *io, const rs_dims *w, int sp, rs_op_attrs *a)
{
    const Onnx__NodeProto *n = io->node;
    const Onnx__AttributeProto *ap = attr(n, "auto_pad"), *ks = attr(n, "kernel_shape"), *st = attr(n, "strides");
    const Onnx__AttributeProto *pads = attr(n, "pads"), *dil = attr(n, "dilations");
    if (ap && ap->s.len && !(ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6))) return false;
    for (size_t i = 0; dil && i < dil->n_ints; i++)
        if (dil->ints[i] != 1) return false;
    if ((ks && ks->n_ints != (size_t)sp) || (st && st->n_ints != (size_t)sp) || (pads && pads->n_ints != 2 * (size_t)sp))
        return false;
    int64_t k[2], s[2] = {1, 1}, p[4] = {0, 0, 0, 0};
    for (int i = 0; i < sp; i++) {
        k[i] = ks ? ks->ints[i] : w->d[2 + i];
        if (st) s[i] = st->ints[i];
        if (pads) p[i] = pads->ints[i], p[i + sp] = pads->ints[i + sp];
        if (k[i] < 1 || k[i] > 4096 || s[i] < 1 || s[i] > 4096 || p[i] < 0 || p[i] > 4096 || p[i + sp] < 0 ||
            p[i + sp] > 4096)
            return false;
    }
    int64_t g = attr_int(io, "group", 1);
    if (g < 1 || g > 1 << 20) return false;
    a->group = (int)g;
    if (sp == 2) {
        a->kh = (int)k[0], a->kw = (int)k[1], a->sh = (int)s[0], a->sw = (int)s[1];
        a->pt = (int)p[0], a->pl = (int)p[1], a->pb = (int)p[2], a->pr = (int)p[3];
    } else {
        a->kh = 1, a->sh = 1, a->kw = (int)k[0], a->sw = (int)s[0], a->pl = (int)p[0], a->pr = (int)p[1];
    }
    return true;
}

bool rs_onnx_shape_conv(rs_onnx_shape_io *io)
{
    if (io->nin < 2 || !io->in[0] || !io->in[1]) return true;
    const rs_dims *x = io->in[0], *w = io->in[1];
    if ((x->rank != 3 && x->rank != 4) || w->rank != x->rank || !all_known(x, 1, x->rank) || !all_known(w, 0, w->rank))
        return true;
    rs_op_attrs a = {0};
    if (!conv_window(io, w, x->rank - 2, &a)) return true;
    rs_dims ins[3] = {to_batch(x), *w};
    int nin = 2;
    if (io->nin > 2 && io->in[2] && all_known(io->in[2], 0, io->in[2]->rank)) ins[nin++] = *io->in[2];
    return infer(io, RS_OP_CONV, &a, ins, nin, true);
}

bool rs_onnx_shape_flatten(rs_onnx_shape_io *io)
{
    if (io->nin < 1 || !io->in[0]) return true;
    const rs_dims *x = io->in[0];
    int64_t axis = attr_int(io, "axis", 1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis > x->rank) return true;
    rs_dims o = {.rank = 2, .d = {1, 1}};
    for (int i = 0; i < x->rank; i++) {
        int64_t *d = &o.d[i < axis ? 0 : 1];
        *d = x->d[i] < 0 || *d < 0 ? -1 : *d * x->d[i];
    }
    io->out = o;
    io->out_known = true;
    return true;
}

bool rs_onnx_shape_constant(rs_onnx_shape_io *io)
{
    const Onnx__NodeProto *n = io->node;
    int values = 0;
    const Onnx__AttributeProto *v = NULL;
    for (size_t k = 0; k < n->n_attribute; k++) {
        const char *an = n->attribute[k]->name;
        if (an && (!strncmp(an, "value", 5) || !strcmp(an, "sparse_value"))) values++, v = n->attribute[k];
    }
    if (values != 1) {
        snprintf(io->msg, sizeof io->msg, "needs exactly one value attribute (value, value_float, ...), has %d", values);
        return false;
    }
    rs_dims o = {0};
    if (v->t && v->type == AT(TENSOR)) {
        if (v->t->n_dims > RS_DIMS_MAX) return true;
        o.rank = (int)v->t->n_dims;
        for (int i = 0; i < o.rank; i++) o.d[i] = v->t->dims[i] < 0 ? -1 : v->t->dims[i];
    } else if (v->type == AT(FLOATS) || v->type == AT(INTS) || v->type == AT(STRINGS)) {
        o = (rs_dims){.rank = 1, .d = {(int64_t)(v->n_floats + v->n_ints + v->n_strings)}};
    } else if (v->type != AT(FLOAT) && v->type != AT(INT) && v->type != AT(STRING)) {
        return true;
    }
    io->out = o;
    io->out_known = true;
    return true;
}

/* The int64 values of a 1-d initializer (raw_data or int64_data), at most max; -1 when it is not one. */
static int tensor_ints(const Onnx__TensorProto *t, int64_t *out, int max)
{
    if (!t || t->data_type != 7 || t->n_dims != 1 || t->dims[0] < 0 || t->dims[0] > max) return -1;
    int n = (int)t->dims[0];
    if (t->raw_data.len) {
        if (t->raw_data.len != (size_t)n * 8) return -1;
        for (int k = 0; k < n; k++) memcpy(&out[k], t->raw_data.data + 8 * k, 8); /* little-endian, maybe unaligned */
    } else {
        if (t->n_int64_data != (size_t)n) return -1;
        memcpy(out, t->int64_data, sizeof(int64_t) * (size_t)n);
    }
    return n;
}

bool rs_onnx_shape_split(rs_onnx_shape_io *io)
{
    if (io->nin < 1 || !io->in[0]) return true;
    const rs_dims *x = io->in[0];
    int64_t axis = attr_int(io, "axis", 0), sizes[64];
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return true;
    int n = -1;
    const Onnx__AttributeProto *a = attr(io->node, "split");
    if (a && a->n_ints <= 64) {
        n = (int)a->n_ints;
        memcpy(sizes, a->ints, sizeof(int64_t) * (size_t)n);
    } else if (io->nin > 1) {
        n = tensor_ints(io->cin[1], sizes, 64);
    }
    if (n < 0) return true;
    int64_t sum = 0;
    for (int k = 0; k < n; k++) sum += sizes[k] > 0 ? sizes[k] : 0;
    if (n != (int)io->node->n_output) {
        snprintf(io->msg, sizeof io->msg, "%d split sizes for %zu outputs (shape inference)", n, io->node->n_output);
        return false;
    }
    if (x->d[axis] >= 0 && sum != x->d[axis]) {
        snprintf(io->msg, sizeof io->msg, "the split sizes add up to %lld, but dimension %lld of the input is %lld "
                 "(shape inference)", (long long)sum, (long long)axis, (long long)x->d[axis]);
        return false;
    }
    return true;
}
