/* The per-operator half of the ONNX importer (see import.c): one handler per ONNX operator type checks
 * the node's inputs and attributes, converts them to rs_op_attrs, and either computes the result on
 * constants here (shape arithmetic, casts) or hands the node to rs_onnx_emit, which folds or adds it to
 * the graph. The shape and data-movement operators are in import_shape.c; the table of all is here. */
#include "import_internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- attributes ---- */

const Onnx__AttributeProto *rs_onnx_attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t i = 0; i < np->n_attribute; i++)
        if (np->attribute[i]->name && !strcmp(np->attribute[i]->name, name)) return np->attribute[i];
    return NULL;
}

/* The registry's entry for name at the model's opset, when it gives a default. */
static const rs_onnx_attr_def *attr_default(const imp *p, const char *name)
{
    const rs_onnx_attr_def *d = rs_onnx_op_attr(p->op, name, p->opset);
    return d && d->has_def ? d : NULL;
}

rs_status rs_onnx_attr_int(imp *p, const char *name, int64_t *out)
{
    const Onnx__AttributeProto *a = rs_onnx_attr(p->node, name);
    if (!a) {
        const rs_onnx_attr_def *d = attr_default(p, name);
        if (d) *out = d->i;
        return RS_OK;
    }
    if ((int)a->type != AT_INT) return rs_onnx_fail(p, RS_ERR_FORMAT, "attribute '%s' should be an int", name);
    *out = a->i;
    return RS_OK;
}

rs_status rs_onnx_attr_float(imp *p, const char *name, float *out)
{
    const Onnx__AttributeProto *a = rs_onnx_attr(p->node, name);
    if (!a) {
        const rs_onnx_attr_def *d = attr_default(p, name);
        if (d) *out = d->f;
        return RS_OK;
    }
    if ((int)a->type != AT_FLOAT) return rs_onnx_fail(p, RS_ERR_FORMAT, "attribute '%s' should be a float", name);
    *out = a->f;
    return RS_OK;
}

/* ints attribute: *n = -1 when absent. */
rs_status rs_onnx_attr_ints(imp *p, const char *name, int64_t *out, int max, int *n)
{
    const Onnx__AttributeProto *a = rs_onnx_attr(p->node, name);
    *n = -1;
    if (!a) return RS_OK;
    if ((int)a->type != AT_INTS) return rs_onnx_fail(p, RS_ERR_FORMAT, "attribute '%s' should be a list of ints", name);
    if (a->n_ints > (size_t)max) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "attribute '%s' has %zu values; at most %d", name,
                                             a->n_ints, max);
    if (a->n_ints) memcpy(out, a->ints, sizeof(int64_t) * a->n_ints);
    *n = (int)a->n_ints;
    return RS_OK;
}

const char *rs_onnx_attr_str(imp *p, const char *name)
{
    const Onnx__AttributeProto *a = rs_onnx_attr(p->node, name);
    const rs_onnx_attr_def *d = attr_default(p, name);
    if (!a || (int)a->type != AT_STRING || !a->s.data) return d && d->s ? d->s : "";
    static _Thread_local char buf[64];
    size_t n = a->s.len < sizeof buf - 1 ? a->s.len : sizeof buf - 1;
    memcpy(buf, a->s.data, n);
    buf[n] = '\0';
    return buf;
}

rs_status rs_onnx_norm_axis(imp *p, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank)
        return rs_onnx_fail(p, RS_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return RS_OK;
}

/* A view with a new shape: constants are copied, computed values get a RESHAPE node. A file shape
 * that merges the batch with other sizes goes through rs_onnx_reshape_file; a grouped value given its
 * own graph shape (Identity) stays grouped. */
rs_status rs_onnx_reshape_to(nctx *c, ival *x, const rs_dims *s)
{
    if (x->kind == IV_DYN) {
        for (int k = 0; k < s->rank; k++)
            if (rs_onnx_batch_factor(s->d[k]) > 1) return rs_onnx_reshape_file(c, x, s->d, s->rank, true);
        rs_op_attrs a = {.shape = *s};
        rs_status st = rs_onnx_emit(c, RS_OP_RESHAPE, &a, &x, 1);
        if (!st && x->gn && s->rank == x->shape.rank && !memcmp(s->d, x->shape.d, sizeof(int64_t) * (size_t)s->rank)) {
            c->res.glo = x->glo;
            c->res.gn = x->gn;
        }
        return st;
    }
    size_t n = (size_t)rs_dims_numel(&x->shape, 1);
    c->res = (ival){.kind = x->kind, .shape = *s, .vid = -1};
    if (x->kind == IV_F) {
        c->res.f = malloc(sizeof(float) * (n ? n : 1));
        if (c->res.f) memcpy(c->res.f, x->f, sizeof(float) * n);
    } else {
        c->res.i = malloc(sizeof(int64_t) * (n ? n : 1));
        if (c->res.i) memcpy(c->res.i, x->i, sizeof(int64_t) * n);
    }
    if (!c->res.f && !c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
    return RS_OK;
}

rs_status rs_onnx_need_inputs(nctx *c, int lo, int hi)
{
    int present = 0;
    for (int k = 0; k < c->nin; k++) present += c->in[k] != NULL;
    if (c->nin < lo || c->nin > hi || (lo > 0 && !c->in[0]))
        return rs_onnx_fail(c->p, RS_ERR_FORMAT, "expects %d to %d inputs, has %d", lo, hi, c->nin);
    for (int k = 0; k < lo; k++)
        if (!c->in[k]) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "input %d is required", k);
    (void)present;
    return RS_OK;
}

/* int64 list from a constant input (axes, shape, pads); BATCH allowed only where allow_batch. */
rs_status rs_onnx_const_ints(nctx *c, const ival *v, const char *what, int64_t *out, int max, int *n, bool allow_batch)
{
    if (!v || !rs_onnx_is_const(v)) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "%s must be a constant (known at import)", what);
    int64_t m = rs_dims_numel(&v->shape, 1);
    if (v->shape.rank > 1 || m > max)
        return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "%s must be a list of at most %d values", what, max);
    for (int64_t k = 0; k < m; k++) {
        if (v->kind == IV_F && !(fabsf(v->f[k]) < 1e15f))
            return rs_onnx_fail(c->p, RS_ERR_FORMAT, "%s holds %g, not an integer", what, (double)v->f[k]);
        out[k] = v->kind == IV_I ? v->i[k] : (int64_t)v->f[k];
        if (rs_onnx_batch_factor(out[k]) && !allow_batch)
            return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "%s depends on the batch size", what);
    }
    *n = (int)m;
    return RS_OK;
}

/* ---- handlers ---- */

rs_status rs_onnx_h_identity(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 3);
    if (st) return st;
    if (c->nin > 2 && c->in[2]) { /* Dropout's training_mode */
        const ival *t = c->in[2];
        if (!rs_onnx_is_const(t) || rs_dims_numel(&t->shape, 1) < 1 || (t->kind == IV_I ? t->i[0] != 0 : t->f[0] != 0.0f))
            return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "dropout in training mode");
    }
    return rs_onnx_reshape_to(c, c->in[0], &c->in[0]->shape);
}

rs_status rs_onnx_h_constant(nctx *c)
{
    imp *p = c->p;
    const Onnx__NodeProto *np = c->np;
    if (np->n_attribute != 1) return rs_onnx_fail(p, RS_ERR_FORMAT, "needs exactly one value attribute");
    const Onnx__AttributeProto *a = np->attribute[0];
    const char *nm = rs_onnx_str_or(a->name, "");
    if (!strcmp(nm, "value")) {
        if ((int)a->type != AT_TENSOR || !a->t) return rs_onnx_fail(p, RS_ERR_FORMAT, "attribute 'value' should be a tensor");
        return rs_onnx_tensor_to_ival(p, a->t, "its value", &c->res);
    }
    bool f = !strcmp(nm, "value_float") || !strcmp(nm, "value_floats");
    bool i = !strcmp(nm, "value_int") || !strcmp(nm, "value_ints");
    bool list = !strcmp(nm, "value_floats") || !strcmp(nm, "value_ints");
    if (!f && !i) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "value attribute '%s'", nm);
    int want = f ? (list ? AT_FLOATS : AT_FLOAT) : (list ? AT_INTS : AT_INT);
    if ((int)a->type != want) return rs_onnx_fail(p, RS_ERR_FORMAT, "attribute '%s' has the wrong type", nm);
    size_t n = list ? (f ? a->n_floats : a->n_ints) : 1;
    c->res = (ival){.kind = f ? IV_F : IV_I, .shape = {list ? 1 : 0, {(int64_t)n}}, .vid = -1};
    if (f) c->res.f = malloc(sizeof(float) * (n ? n : 1));
    else c->res.i = malloc(sizeof(int64_t) * (n ? n : 1));
    if (!c->res.f && !c->res.i) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        if (f) c->res.f[k] = list ? a->floats[k] : a->f;
        else c->res.i[k] = list ? a->ints[k] : a->i;
        if (i && c->res.i[k] == RS_DIM_BATCH) c->res.i[k]--;
        else if (i && rs_onnx_batch_factor(c->res.i[k])) c->res.i[k] = RS_ONNX_BATCH_BASE - RS_ONNX_BATCH_KMAX - 1;
    }
    return RS_OK;
}

/* axes from the attribute (old opsets) or the second input (opset 13) */
rs_status rs_onnx_get_axes(nctx *c, int64_t *axes, int *n)
{
    rs_status st = rs_onnx_attr_ints(c->p, "axes", axes, RS_DIMS_MAX, n);
    if (st || *n >= 0) return st;
    if (c->nin > 1 && c->in[1]) return rs_onnx_const_ints(c, c->in[1], "axes", axes, RS_DIMS_MAX, n, false);
    *n = -1;
    return RS_OK;
}

rs_status rs_onnx_h_cast(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 1);
    if (st) return st;
    int64_t to = DT_FLOAT;
    if ((st = rs_onnx_attr_int(c->p, "to", &to))) return st;
    ival *x = c->in[0];
    bool to_f = to == DT_FLOAT || to == DT_DOUBLE;
    bool to_i = to == DT_INT64 || to == DT_INT32 || to == DT_INT16 || to == DT_INT8 || to == DT_UINT8 || to == DT_BOOL;
    if (!to_f && !to_i) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "cast to %s", rs_onnx_import_dtype_name((int)to));
    if (x->kind == IV_DYN) {
        /* computed values are floats: integer casts truncate, bool ones compare with 0; the result stays
         * a float tensor holding those values */
        if (to_f) return rs_onnx_reshape_to(c, x, &x->shape);
        rs_op_attrs a = {.sub = to == DT_BOOL ? RS_UNARY_CAST_BOOL : RS_UNARY_CAST_INT};
        return rs_onnx_emit(c, RS_OP_UNARY, &a, c->in, 1);
    }
    size_t n = (size_t)rs_dims_numel(&x->shape, 1);
    if (x->kind == IV_I && to == DT_BOOL) {
        c->res = (ival){.kind = IV_I, .shape = x->shape, .i = malloc(sizeof(int64_t) * (n ? n : 1)), .vid = -1};
        if (!c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < n; k++) {
            if (rs_onnx_batch_factor(x->i[k])) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "the batch size as data");
            c->res.i[k] = x->i[k] != 0;
        }
        return RS_OK;
    }
    if ((x->kind == IV_F) == to_f) return rs_onnx_reshape_to(c, x, &x->shape);
    c->res = (ival){.kind = to_f ? IV_F : IV_I, .shape = x->shape, .vid = -1};
    if (to_f) c->res.f = malloc(sizeof(float) * (n ? n : 1));
    else c->res.i = malloc(sizeof(int64_t) * (n ? n : 1));
    if (!c->res.f && !c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        if (to_f) {
            if (rs_onnx_batch_factor(x->i[k])) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "the batch size as data");
            c->res.f[k] = (float)x->i[k];
        } else {
            float v = x->f[k];
            c->res.i[k] = isfinite(v) && fabsf(v) < 9e18f ? (to == DT_BOOL ? v != 0.0f : (int64_t)v) : 0;
        }
    }
    return RS_OK;
}

rs_status rs_onnx_h_constant_of_shape(nctx *c)
{
    imp *p = c->p;
    rs_status st = rs_onnx_need_inputs(c, 1, 1);
    if (st) return st;
    int64_t d[RS_DIMS_MAX];
    int nd;
    if ((st = rs_onnx_const_ints(c, c->in[0], "the shape", d, RS_DIMS_MAX, &nd, false))) return st;
    rs_dims s;
    if ((st = rs_onnx_check_dims(p, "the shape", (size_t)nd, d, &s))) return st;
    int64_t n = rs_dims_numel(&s, 1);
    if (n > p->budget) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "result too large");
    ival v = {.kind = IV_F, .shape = {0, {0}}};
    float fill = 0.0f;
    const Onnx__AttributeProto *a = rs_onnx_attr(c->np, "value");
    if (a) {
        if ((int)a->type != AT_TENSOR || !a->t) return rs_onnx_fail(p, RS_ERR_FORMAT, "attribute 'value' should be a tensor");
        if ((st = rs_onnx_tensor_to_ival(p, a->t, "its value", &v))) return st;
        if (rs_dims_numel(&v.shape, 1) != 1) {
            rs_onnx_ival_clear(&v);
            return rs_onnx_fail(p, RS_ERR_FORMAT, "value must hold one element");
        }
    }
    c->res = (ival){.kind = a ? v.kind : IV_F, .shape = s, .vid = -1};
    if (c->res.kind == IV_F) {
        fill = a ? v.f[0] : 0.0f;
        c->res.f = malloc(sizeof(float) * (size_t)(n ? n : 1));
        for (int64_t k = 0; c->res.f && k < n; k++) c->res.f[k] = fill;
    } else {
        c->res.i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        for (int64_t k = 0; c->res.i && k < n; k++) c->res.i[k] = v.i[0];
    }
    rs_onnx_ival_clear(&v);
    if (!c->res.f && !c->res.i) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    p->budget -= n;
    return RS_OK;
}

rs_status rs_onnx_h_unary(nctx *c)
{
    imp *p = c->p;
    rs_status st = rs_onnx_need_inputs(c, 1, 3);
    if (st) return st;
    rs_op_attrs a = {.sub = c->def->sub};
    if (a.sub == RS_UNARY_GELU && !strcmp(rs_onnx_attr_str(p, "approximate"), "tanh")) a.sub = RS_UNARY_GELU_TANH;
    if (a.sub == RS_UNARY_LEAKYRELU && (st = rs_onnx_attr_float(p, "alpha", &a.alpha))) return st;
    if (a.sub == RS_UNARY_HARDSIGMOID &&
        ((st = rs_onnx_attr_float(p, "alpha", &a.alpha)) || (st = rs_onnx_attr_float(p, "beta", &a.beta))))
        return st;
    if (a.sub == RS_UNARY_CLIP) {
        a.alpha = -FLT_MAX;
        a.beta = FLT_MAX;
        if (p->opset < 11) {
            if ((st = rs_onnx_attr_float(p, "min", &a.alpha)) || (st = rs_onnx_attr_float(p, "max", &a.beta))) return st;
        } else {
            for (int k = 1; k < c->nin; k++) {
                ival *v = c->in[k];
                if (!v) continue;
                if (v->kind != IV_F || rs_dims_numel(&v->shape, 1) != 1)
                    return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Clip bounds must be float scalar constants");
                if (k == 1) a.alpha = v->f[0];
                else a.beta = v->f[0];
            }
        }
    }
    return rs_onnx_emit(c, RS_OP_UNARY, &a, c->in, 1);
}

/* One integer operation of a shape list. The batch (times k) takes part in comparisons whose answer
 * does not depend on its size (N == N; N == k for k < 1, as the -1 of an Expand shape is compared), and
 * in products and exact divisions by sizes, which keep it a multiple of the batch (torch's N * heads for
 * nn.MultiheadAttention, and T * N for its output projection). */
static rs_status int_binop(nctx *c, int op, int64_t u, int64_t v, int64_t *out)
{
    int64_t fu = rs_onnx_batch_factor(u), fv = rs_onnx_batch_factor(v);
    if (fu || fv) {
        int64_t other = fu ? v : u, f = fu ? fu : fv;
        if (op == RS_BINARY_EQUAL && fu && fv) *out = fu == fv;
        else if (op == RS_BINARY_EQUAL && other < 1) *out = 0;
        else if (op == RS_BINARY_MUL && !(fu && fv) && other >= 1 && f * other <= RS_ONNX_BATCH_KMAX)
            *out = rs_onnx_batch_times(f * other);
        else if (op == RS_BINARY_DIV && fu && !fv && other >= 1 && f % other == 0) *out = rs_onnx_batch_times(f / other);
        else return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "arithmetic on the batch size (only products with sizes and "
                                 "exact divisions by them keep it the batch times a size)");
        return RS_OK;
    }
    if (llabs(u) > (1LL << 31) || llabs(v) > (1LL << 31))
        return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "integer too large");
    if ((op == RS_BINARY_DIV || op == RS_BINARY_MOD || op == RS_BINARY_FMOD) && v == 0)
        return rs_onnx_fail(c->p, RS_ERR_FORMAT, "integer division by zero");
    switch (op) {
    case RS_BINARY_ADD: *out = u + v; break;
    case RS_BINARY_SUB: *out = u - v; break;
    case RS_BINARY_MUL: *out = u * v; break;
    case RS_BINARY_DIV: *out = u / v; break;
    case RS_BINARY_EQUAL: *out = u == v; break;
    case RS_BINARY_LESS: *out = u < v; break;
    case RS_BINARY_GREATER: *out = u > v; break;
    case RS_BINARY_LESS_EQ: *out = u <= v; break;
    case RS_BINARY_GREATER_EQ: *out = u >= v; break;
    case RS_BINARY_FMOD: *out = u % v; break;
    case RS_BINARY_AND: *out = u && v; break;
    case RS_BINARY_OR: *out = u || v; break;
    case RS_BINARY_XOR: *out = !u != !v; break;
    default: *out = u % v != 0 && ((u % v < 0) != (v < 0)) ? u % v + v : u % v; break;
    }
    return RS_OK;
}

rs_status rs_onnx_h_binary(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 2, 2);
    if (st) return st;
    rs_op_attrs a = {.sub = c->def->sub};
    if (a.sub == RS_BINARY_MOD) {
        int64_t fm = 0;
        if ((st = rs_onnx_attr_int(c->p, "fmod", &fm))) return st;
        if (fm != 0 && fm != 1) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "fmod must be 0 or 1, not %lld", (long long)fm);
        if (fm) a.sub = RS_BINARY_FMOD;
        else if (c->in[0]->kind != IV_I || c->in[1]->kind != IV_I)
            return rs_onnx_fail(c->p, RS_ERR_FORMAT, "fmod=0 is for integer inputs; floats need fmod=1");
    }
    ival *x = c->in[0], *y = c->in[1];
    int64_t nx = rs_dims_numel(&x->shape, 1), ny = rs_dims_numel(&y->shape, 1);
    if (x->kind == IV_I && y->kind == IV_I && a.sub != RS_BINARY_POW && x->shape.rank <= 1 && y->shape.rank <= 1 &&
        (nx == ny || nx == 1 || ny == 1)) {
        /* integer shape arithmetic on lists, which may carry the batch */
        int64_t n = nx > ny ? nx : ny;
        c->res = (ival){.kind = IV_I, .shape = {nx == 1 && ny == 1 ? (x->shape.rank > y->shape.rank ? x->shape.rank : y->shape.rank) : 1, {n}},
                        .i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), .vid = -1};
        if (!c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < n; k++)
            if ((st = int_binop(c, a.sub, x->i[nx == 1 ? 0 : k], y->i[ny == 1 ? 0 : k], &c->res.i[k]))) return st;
        return RS_OK;
    }
    if (x->kind == IV_I && y->kind == IV_I && a.sub == RS_BINARY_DIV)
        return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "integer division beyond 1-d lists");
    return rs_onnx_emit(c, RS_OP_BINARY, &a, c->in, 2);
}

rs_status rs_onnx_h_matmul(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 2, 2);
    if (st) return st;
    rs_op_attrs a = {0};
    return rs_onnx_emit(c, RS_OP_MATMUL, &a, c->in, 2);
}

rs_status rs_onnx_h_gemm(nctx *c)
{
    imp *p = c->p;
    rs_status st = rs_onnx_need_inputs(c, 2, 3);
    if (st) return st;
    int64_t ta = 0, tb = 0;
    rs_op_attrs a = {0};
    if ((st = rs_onnx_attr_int(p, "transA", &ta)) || (st = rs_onnx_attr_int(p, "transB", &tb)) ||
        (st = rs_onnx_attr_float(p, "alpha", &a.alpha)) || (st = rs_onnx_attr_float(p, "beta", &a.beta)))
        return st;
    a.ta = ta != 0;
    a.tb = tb != 0;
    if (c->in[0]->gn) return rs_onnx_gemm_grouped(c, &a);
    return rs_onnx_emit(c, RS_OP_GEMM, &a, c->in, c->nin > 2 && c->in[2] ? 3 : 2);
}

/* kernel_shape, strides, pads, dilations, auto_pad, ceil_mode for Conv and the pools */
static rs_status window_attrs(nctx *c, rs_op_attrs *a, bool conv)
{
    imp *p = c->p;
    const rs_dims *x = &c->in[0]->shape;
    if (x->rank != 3 && x->rank != 4)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "only 1-d and 2-d windows (input rank 3 or 4)");
    int sp = x->rank - 2;
    int64_t ks[2] = {1, 1}, st2[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, dil[2] = {1, 1}, v = 0;
    int nk, ns, np, nd;
    rs_status st;
    if ((st = rs_onnx_attr_ints(p, "kernel_shape", ks, 2, &nk)) || (st = rs_onnx_attr_ints(p, "strides", st2, 2, &ns)) ||
        (st = rs_onnx_attr_ints(p, "pads", pads, 4, &np)) || (st = rs_onnx_attr_ints(p, "dilations", dil, 2, &nd)))
        return st;
    if (nk < 0) {
        if (!conv) return rs_onnx_fail(p, RS_ERR_FORMAT, "needs kernel_shape");
        const rs_dims *w = &c->in[1]->shape;
        if (w->rank != x->rank)
            return rs_onnx_fail(p, RS_ERR_SHAPE, "weight rank %d does not match input rank %d", w->rank, x->rank);
        for (int k = 0; k < sp; k++) ks[k] = w->d[2 + k];
        nk = sp;
    }
    if (nk != sp || (ns >= 0 && ns != sp) || (np >= 0 && np != 2 * sp) || (nd >= 0 && nd != sp))
        return rs_onnx_fail(p, RS_ERR_FORMAT, "window attributes do not match %d spatial dims", sp);
    if (ns < 0) st2[0] = st2[1] = 1;
    for (int k = 0; k < sp; k++) {
        if (ks[k] < 1 || ks[k] > 4096 || st2[k] < 1 || st2[k] > 4096)
            return rs_onnx_fail(p, RS_ERR_FORMAT, "kernel %lld / stride %lld out of range", (long long)ks[k], (long long)st2[k]);
        if (dil[k] != 1) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "dilations other than 1");
    }
    for (int k = 0; k < 2 * sp; k++)
        if (pads[k] < 0 || pads[k] > 4096) return rs_onnx_fail(p, RS_ERR_FORMAT, "pad %lld out of range", (long long)pads[k]);
    const char *ap = rs_onnx_attr_str(p, "auto_pad");
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int k = 0; k < sp; k++) {
            int64_t in = x->d[2 + k];
            if (in < 0) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "auto_pad over the batch");
            int64_t out = (in + st2[k] - 1) / st2[k], tot = (out - 1) * st2[k] + ks[k] - in;
            if (tot < 0) tot = 0;
            int64_t small = tot / 2, big = tot - small;
            pads[k] = !strcmp(ap, "SAME_UPPER") ? small : big;
            pads[k + sp] = tot - pads[k];
        }
    } else if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) {
        return rs_onnx_fail(p, RS_ERR_FORMAT, "auto_pad '%s'", ap);
    } else if (!strcmp(ap, "VALID")) {
        memset(pads, 0, sizeof pads);
    }
    if (sp == 2) {
        a->kh = (int)ks[0]; a->kw = (int)ks[1]; a->sh = (int)st2[0]; a->sw = (int)st2[1];
        a->pt = (int)pads[0]; a->pl = (int)pads[1]; a->pb = (int)pads[2]; a->pr = (int)pads[3];
    } else {
        a->kh = 1; a->sh = 1; a->kw = (int)ks[0]; a->sw = (int)st2[0];
        a->pl = (int)pads[0]; a->pr = (int)pads[1];
    }
    if ((st = rs_onnx_attr_int(p, "ceil_mode", &v))) return st;
    a->ceil_mode = v != 0;
    v = 0; /* Conv has no count_include_pad */
    if ((st = rs_onnx_attr_int(p, "count_include_pad", &v))) return st;
    a->count_include_pad = v != 0;
    v = 1; /* the pools have no group */
    if ((st = rs_onnx_attr_int(p, "group", &v))) return st;
    if (v < 1 || v > 1 << 20) return rs_onnx_fail(p, RS_ERR_FORMAT, "group %lld", (long long)v);
    a->group = (int)v;
    return RS_OK;
}

rs_status rs_onnx_h_conv(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 2, 3);
    if (st) return st;
    rs_op_attrs a = {0};
    if ((st = window_attrs(c, &a, true))) return st;
    return rs_onnx_emit(c, RS_OP_CONV, &a, c->in, c->nin > 2 && c->in[2] ? 3 : 2);
}

rs_status rs_onnx_h_pool(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 1);
    if (st) return st;
    rs_op_attrs a = {0};
    if ((st = window_attrs(c, &a, false))) return st;
    if (c->np->n_output > 1 && c->np->output[1] && *c->np->output[1] && c->def->op == RS_OP_MAXPOOL)
        return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "MaxPool's Indices output");
    return rs_onnx_emit(c, c->def->op, &a, c->in, 1);
}

rs_status rs_onnx_h_gap(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 1);
    if (st) return st;
    rs_op_attrs a = {0};
    return rs_onnx_emit(c, RS_OP_GLOBALAVGPOOL, &a, c->in, 1);
}

rs_status rs_onnx_h_softmax(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 1);
    if (st) return st;
    rs_op_attrs a = {.legacy_softmax = c->p->opset < 13};
    int64_t ax = 0; /* the registry's default for the opset */
    if ((st = rs_onnx_attr_int(c->p, "axis", &ax)) ||
        (st = rs_onnx_norm_axis(c->p, ax, c->in[0]->shape.rank, &a.axis)))
        return st;
    if (a.legacy_softmax)
        for (int k = a.axis; k < c->in[0]->shape.rank; k++)
            if (c->in[0]->shape.d[k] == RS_DIM_BATCH) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "softmax over the batch");
    if (!a.legacy_softmax && c->in[0]->shape.d[a.axis] == RS_DIM_BATCH)
        return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "softmax over the batch");
    return rs_onnx_emit(c, c->def->op, &a, c->in, 1);
}

rs_status rs_onnx_h_layernorm(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 2, 3);
    if (st) return st;
    for (size_t k = 1; k < c->np->n_output; k++)
        if (c->np->output[k] && *c->np->output[k]) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "the Mean/InvStdDev outputs");
    rs_op_attrs a = {0};
    int64_t ax = 0; /* the registry's default for the opset */
    if ((st = rs_onnx_attr_int(c->p, "axis", &ax)) || (st = rs_onnx_attr_float(c->p, "epsilon", &a.eps)) ||
        (st = rs_onnx_norm_axis(c->p, ax, c->in[0]->shape.rank, &a.axis)))
        return st;
    if (!(a.eps >= 0.0f)) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "epsilon must be >= 0");
    return rs_onnx_emit(c, RS_OP_LAYERNORM, &a, c->in, c->nin > 2 && c->in[2] ? 3 : 2);
}

rs_status rs_onnx_h_batchnorm(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 5, 5);
    if (st) return st;
    int64_t tm = 0;
    rs_op_attrs a = {0};
    if ((st = rs_onnx_attr_int(c->p, "training_mode", &tm)) || (st = rs_onnx_attr_float(c->p, "epsilon", &a.eps))) return st;
    if (tm) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "training_mode=1 (inference only)");
    for (size_t k = 1; k < c->np->n_output; k++)
        if (c->np->output[k] && *c->np->output[k]) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "running statistics outputs");
    if (!(a.eps >= 0.0f)) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "epsilon must be >= 0");
    /* five inputs do not fit a node: fold scale/sqrt(var+eps) and bias - mean*k into two constants */
    for (int k = 1; k < 5; k++)
        if (c->in[k]->kind != IV_F) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "parameters must be float constants");
    const rs_dims *x = &c->in[0]->shape;
    if (x->rank < 2 || x->d[1] < 0) return rs_onnx_fail(c->p, RS_ERR_SHAPE, "input needs channels in dim 1");
    int64_t C = x->d[1];
    for (int k = 1; k < 5; k++)
        if (c->in[k]->shape.rank != 1 || c->in[k]->shape.d[0] != C) {
            char b[96];
            return rs_onnx_fail(c->p, RS_ERR_SHAPE, "parameter %d has shape %s, expected (%lld)", k,
                        rs_dims_str(&c->in[k]->shape, b, sizeof b), (long long)C);
        }
    rs_dims ps = {x->rank - 1, {C}};
    for (int k = 1; k < ps.rank; k++) ps.d[k] = 1;
    ival mul = {.kind = IV_F, .shape = ps, .f = malloc(sizeof(float) * (size_t)(C ? C : 1)), .vid = -1};
    ival add = {.kind = IV_F, .shape = ps, .f = malloc(sizeof(float) * (size_t)(C ? C : 1)), .vid = -1};
    if (!mul.f || !add.f) {
        rs_onnx_ival_clear(&mul);
        rs_onnx_ival_clear(&add);
        return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
    }
    for (int64_t k = 0; k < C; k++) {
        float s = c->in[1]->f[k] / sqrtf(c->in[4]->f[k] + a.eps);
        mul.f[k] = s;
        add.f[k] = c->in[2]->f[k] - c->in[3]->f[k] * s;
    }
    /* x * mul + add as two broadcast nodes (the second named after the BatchNormalization's output) */
    rs_op_attrs am = {.sub = RS_BINARY_MUL}, aa = {.sub = RS_BINARY_ADD};
    ival *ins[2] = {c->in[0], &mul};
    const char *saved = c->in_names[1];
    c->in_names[1] = "bn_scale";
    st = rs_onnx_emit(c, RS_OP_BINARY, &am, ins, 2);
    if (!st) {
        ival mid = c->res;
        c->res = (ival){.vid = -1}; /* mid is ours now: the caller must not free it twice */
        ins[0] = &mid;
        ins[1] = &add;
        c->in_names[1] = "bn_shift";
        st = rs_onnx_emit(c, RS_OP_BINARY, &aa, ins, 2);
        rs_onnx_ival_clear(&mid);
    }
    c->in_names[1] = saved;
    rs_onnx_ival_clear(&mul);
    rs_onnx_ival_clear(&add);
    return st;
}

rs_status rs_onnx_h_transpose(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 1);
    if (st) return st;
    ival *x = c->in[0];
    int r = rs_onnx_file_shape(x).rank, np;
    int64_t perm[RS_DIMS_MAX];
    if ((st = rs_onnx_attr_ints(c->p, "perm", perm, RS_DIMS_MAX, &np))) return st;
    rs_op_attrs a = {0};
    if (np < 0) {
        for (int k = 0; k < r; k++) a.perm[k] = r - 1 - k;
    } else {
        if (np != r) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "perm has %d entries for rank %d", np, r);
        unsigned seen = 0;
        for (int k = 0; k < r; k++) {
            if (perm[k] < 0 || perm[k] >= r || (seen >> perm[k] & 1))
                return rs_onnx_fail(c->p, RS_ERR_FORMAT, "perm is not a permutation");
            seen |= 1u << perm[k];
            a.perm[k] = (int)perm[k];
        }
    }
    if (!x->gn) return rs_onnx_emit(c, RS_OP_TRANSPOSE, &a, c->in, 1);
    /* the dims that make up the file's merged one move together */
    int fperm[RS_DIMS_MAX], glo = 0;
    memcpy(fperm, a.perm, sizeof fperm);
    rs_onnx_group_perm(x, fperm, r, a.perm, &glo);
    if ((st = rs_onnx_emit(c, RS_OP_TRANSPOSE, &a, c->in, 1))) return st;
    c->res.glo = glo;
    c->res.gn = x->gn;
    return RS_OK;
}

rs_status rs_onnx_h_reduce(nctx *c)
{
    imp *p = c->p;
    rs_status st = rs_onnx_need_inputs(c, 1, 2);
    if (st) return st;
    int64_t axes[RS_DIMS_MAX], kd = 0, noop = 0; /* noop_with_empty_axes is 0 before its opset */
    int na;
    if ((st = rs_onnx_get_axes(c, axes, &na)) || (st = rs_onnx_attr_int(p, "keepdims", &kd)) ||
        (st = rs_onnx_attr_int(p, "noop_with_empty_axes", &noop)))
        return st;
    rs_op_attrs a = {.keepdims = kd != 0};
    int r = c->in[0]->shape.rank;
    if (na <= 0) {
        if (noop) return rs_onnx_reshape_to(c, c->in[0], &c->in[0]->shape);
        a.axes_mask = (1u << r) - 1;
    }
    for (int k = 0; k < na; k++) {
        int ax = 0;
        if ((st = rs_onnx_norm_axis(p, axes[k], r, &ax))) return st;
        a.axes_mask |= 1u << ax;
    }
    return rs_onnx_emit(c, c->def->op, &a, c->in, 1);
}

rs_status rs_onnx_h_recurrent(nctx *c)
{
    return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "unsupported operator '%s': ringside has no recurrent layer (LSTM, GRU, "
                        "RNN), so a recurrent model does not import; attention (nn.TransformerEncoder, a GPT) and "
                        "convolutions over the sequence (nn.Conv1d) do", c->def->name);
}
