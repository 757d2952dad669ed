/* The per-operator half of the ONNX importer (see import.c): one handler per ONNX operator type checks
 * the node's inputs and attributes, converts them to rs_onnx_attrs, and either computes the result on
 * constants here (shape arithmetic, Gather, Slice, Concat of shape lists, ...) or hands the node to
 * rs_onnx_emit, which folds or adds it to the graph. */
#include "import_internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- attributes ---- */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t i = 0; i < np->n_attribute; i++)
        if (np->attribute[i]->name && !strcmp(np->attribute[i]->name, name)) return np->attribute[i];
    return NULL;
}

static rs_status attr_int(imp *p, const char *name, int64_t def, int64_t *out)
{
    const Onnx__AttributeProto *a = attr(p->node, name);
    *out = def;
    if (!a) return RS_OK;
    if ((int)a->type != AT_INT) return rs_onnx_fail(p, RS_ERR_FORMAT, "attribute '%s' should be an int", name);
    *out = a->i;
    return RS_OK;
}

static rs_status attr_float(imp *p, const char *name, float def, float *out)
{
    const Onnx__AttributeProto *a = attr(p->node, name);
    *out = def;
    if (!a) return RS_OK;
    if ((int)a->type != AT_FLOAT) return rs_onnx_fail(p, RS_ERR_FORMAT, "attribute '%s' should be a float", name);
    *out = a->f;
    return RS_OK;
}

/* ints attribute: *n = -1 when absent. */
static rs_status attr_ints(imp *p, const char *name, int64_t *out, int max, int *n)
{
    const Onnx__AttributeProto *a = attr(p->node, name);
    *n = -1;
    if (!a) return RS_OK;
    if ((int)a->type != AT_INTS) return rs_onnx_fail(p, RS_ERR_FORMAT, "attribute '%s' should be a list of ints", name);
    if (a->n_ints > (size_t)max) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "attribute '%s' has %zu values; at most %d", name,
                                             a->n_ints, max);
    if (a->n_ints) memcpy(out, a->ints, sizeof(int64_t) * a->n_ints);
    *n = (int)a->n_ints;
    return RS_OK;
}

static const char *attr_str(imp *p, const char *name, const char *def)
{
    const Onnx__AttributeProto *a = attr(p->node, name);
    if (!a || (int)a->type != AT_STRING || !a->s.data) return def;
    static _Thread_local char buf[64];
    size_t n = a->s.len < sizeof buf - 1 ? a->s.len : sizeof buf - 1;
    memcpy(buf, a->s.data, n);
    buf[n] = '\0';
    return buf;
}

static rs_status norm_axis(imp *p, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank)
        return rs_onnx_fail(p, RS_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return RS_OK;
}

/* A view with a new shape: constants are copied, computed values get a RESHAPE node. */
static rs_status reshape_to(nctx *c, ival *x, const rs_onnx_shape *s)
{
    if (x->kind == IV_DYN) {
        rs_onnx_attrs a = {.shape = *s};
        return rs_onnx_emit(c, RS_ONNX_OP_RESHAPE, &a, &x, 1);
    }
    size_t n = (size_t)rs_onnx_shape_numel(&x->shape, 1);
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

static rs_status need_inputs(nctx *c, int lo, int hi)
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
static rs_status const_ints(nctx *c, const ival *v, const char *what, int64_t *out, int max, int *n, bool allow_batch)
{
    if (!v || !rs_onnx_is_const(v)) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "%s must be a constant (known at import)", what);
    int64_t m = rs_onnx_shape_numel(&v->shape, 1);
    if (v->shape.rank > 1 || m > max)
        return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "%s must be a list of at most %d values", what, max);
    for (int64_t k = 0; k < m; k++) {
        if (v->kind == IV_F && !(fabsf(v->f[k]) < 1e15f))
            return rs_onnx_fail(c->p, RS_ERR_FORMAT, "%s holds %g, not an integer", what, (double)v->f[k]);
        out[k] = v->kind == IV_I ? v->i[k] : (int64_t)v->f[k];
        if (out[k] == RS_ONNX_BATCH && !allow_batch)
            return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "%s depends on the batch size", what);
    }
    *n = (int)m;
    return RS_OK;
}

/* ---- handlers ---- */

static rs_status h_identity(nctx *c)
{
    rs_status st = need_inputs(c, 1, 3);
    if (st) return st;
    if (!strcmp(c->np->op_type, "Dropout") && c->nin > 2 && c->in[2]) {
        const ival *t = c->in[2];
        if (!rs_onnx_is_const(t) || rs_onnx_shape_numel(&t->shape, 1) < 1 || (t->kind == IV_I ? t->i[0] != 0 : t->f[0] != 0.0f))
            return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "dropout in training mode");
    }
    return reshape_to(c, c->in[0], &c->in[0]->shape);
}

static rs_status h_constant(nctx *c)
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
        if (i && c->res.i[k] == RS_ONNX_BATCH) c->res.i[k]--;
    }
    return RS_OK;
}

static rs_status h_shape(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    int64_t start, end;
    int r = c->in[0]->shape.rank;
    if ((st = attr_int(c->p, "start", 0, &start)) || (st = attr_int(c->p, "end", r, &end))) return st;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    int64_t n = end - start;
    c->res = (ival){.kind = IV_I, .shape = {1, {n}}, .i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), .vid = -1};
    if (!c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; k < n; k++) c->res.i[k] = c->in[0]->shape.d[start + k];
    return RS_OK;
}

/* numpy take along axis, on constants */
static rs_status h_gather(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 2, 2);
    if (st) return st;
    ival *x = c->in[0], *ix = c->in[1];
    if (!rs_onnx_is_const(x)) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Gather on computed data (only constants and shapes)");
    if (ix->kind != IV_I) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Gather indices must be integer constants");
    int64_t ax;
    int axis = 0;
    if ((st = attr_int(p, "axis", 0, &ax)) || (st = norm_axis(p, ax, x->shape.rank, &axis))) return st;
    rs_onnx_shape os = {0, {0}};
    if (x->shape.rank - 1 + ix->shape.rank > RS_ONNX_MAX_RANK) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "rank too high");
    for (int k = 0; k < axis; k++) os.d[os.rank++] = x->shape.d[k];
    for (int k = 0; k < ix->shape.rank; k++) os.d[os.rank++] = ix->shape.d[k];
    for (int k = axis + 1; k < x->shape.rank; k++) os.d[os.rank++] = x->shape.d[k];
    int64_t on = rs_onnx_shape_numel(&os, 1);
    if (on < 0 || on > p->budget) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "gather result too large");
    size_t outer = 1, inner = 1, ni = (size_t)rs_onnx_shape_numel(&ix->shape, 1), dim = (size_t)x->shape.d[axis];
    for (int k = 0; k < axis; k++) outer *= (size_t)x->shape.d[k];
    for (int k = axis + 1; k < x->shape.rank; k++) inner *= (size_t)x->shape.d[k];
    c->res = (ival){.kind = x->kind, .shape = os, .vid = -1};
    if (x->kind == IV_F) c->res.f = malloc(sizeof(float) * (size_t)(on ? on : 1));
    else c->res.i = malloc(sizeof(int64_t) * (size_t)(on ? on : 1));
    if (!c->res.f && !c->res.i) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    for (size_t o = 0; o < outer; o++)
        for (size_t j = 0; j < ni; j++) {
            int64_t q = ix->i[j];
            if (q < 0) q += (int64_t)dim;
            if (q < 0 || q >= (int64_t)dim)
                return rs_onnx_fail(p, RS_ERR_SHAPE, "index %lld out of range for dimension %zu", (long long)ix->i[j], dim);
            size_t src = (o * dim + (size_t)q) * inner, dst = (o * ni + j) * inner;
            if (x->kind == IV_F) memcpy(c->res.f + dst, x->f + src, sizeof(float) * inner);
            else memcpy(c->res.i + dst, x->i + src, sizeof(int64_t) * inner);
        }
    p->budget -= on;
    return RS_OK;
}

/* axes from the attribute (old opsets) or the second input (opset 13) */
static rs_status get_axes(nctx *c, int64_t *axes, int *n)
{
    rs_status st = attr_ints(c->p, "axes", axes, RS_ONNX_MAX_RANK, n);
    if (st || *n >= 0) return st;
    if (c->nin > 1 && c->in[1]) return const_ints(c, c->in[1], "axes", axes, RS_ONNX_MAX_RANK, n, false);
    *n = -1;
    return RS_OK;
}

static rs_status h_unsqueeze(nctx *c)
{
    rs_status st = need_inputs(c, 1, 2);
    if (st) return st;
    int64_t axes[RS_ONNX_MAX_RANK];
    int na;
    if ((st = get_axes(c, axes, &na))) return st;
    if (na < 0) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "needs axes");
    const rs_onnx_shape *x = &c->in[0]->shape;
    int r = x->rank + na;
    if (r > RS_ONNX_MAX_RANK) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "rank too high");
    bool ins[RS_ONNX_MAX_RANK] = {0};
    for (int k = 0; k < na; k++) {
        int a = 0;
        if ((st = norm_axis(c->p, axes[k], r, &a))) return st;
        if (ins[a]) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "repeated axis %d", a);
        ins[a] = true;
    }
    rs_onnx_shape s = {r, {0}};
    for (int k = 0, j = 0; k < r; k++) s.d[k] = ins[k] ? 1 : x->d[j++];
    return reshape_to(c, c->in[0], &s);
}

static rs_status h_squeeze(nctx *c)
{
    rs_status st = need_inputs(c, 1, 2);
    if (st) return st;
    int64_t axes[RS_ONNX_MAX_RANK];
    int na;
    if ((st = get_axes(c, axes, &na))) return st;
    const rs_onnx_shape *x = &c->in[0]->shape;
    bool drop[RS_ONNX_MAX_RANK] = {0};
    for (int k = 0; k < x->rank; k++) drop[k] = na < 0 && x->d[k] == 1;
    for (int k = 0; k < na; k++) {
        int a = 0;
        if ((st = norm_axis(c->p, axes[k], x->rank, &a))) return st;
        if (x->d[a] != 1)
            return rs_onnx_fail(c->p, RS_ERR_SHAPE, "cannot squeeze dimension %d of size %lld", a, (long long)x->d[a]);
        drop[a] = true;
    }
    rs_onnx_shape s = {0, {0}};
    for (int k = 0; k < x->rank; k++)
        if (!drop[k]) s.d[s.rank++] = x->d[k];
    return reshape_to(c, c->in[0], &s);
}

static rs_status h_flatten(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    int64_t ax;
    int axis = 0;
    const rs_onnx_shape *x = &c->in[0]->shape;
    if ((st = attr_int(c->p, "axis", 1, &ax))) return st;
    if (ax == x->rank) axis = x->rank;
    else if ((st = norm_axis(c->p, ax, x->rank, &axis))) return st;
    rs_onnx_shape s = {2, {1, 1}};
    for (int k = 0; k < x->rank; k++) {
        int64_t *d = &s.d[k < axis ? 0 : 1];
        if (x->d[k] == RS_ONNX_BATCH) {
            if (*d != 1) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "flattening the batch into other dimensions");
            *d = RS_ONNX_BATCH;
        } else if (*d == RS_ONNX_BATCH) {
            if (x->d[k] != 1) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "flattening the batch into other dimensions");
        } else {
            *d *= x->d[k];
        }
    }
    return reshape_to(c, c->in[0], &s);
}

static rs_status h_reshape(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 2, 2);
    if (st) return st;
    int64_t t[RS_ONNX_MAX_RANK], allowzero;
    int nt;
    if ((st = const_ints(c, c->in[1], "the target shape", t, RS_ONNX_MAX_RANK, &nt, true))) return st;
    if ((st = attr_int(p, "allowzero", 0, &allowzero))) return st;
    const rs_onnx_shape *x = &c->in[0]->shape;
    rs_onnx_shape s = {nt, {0}};
    int infer = -1;
    bool xb = false, sb = false;
    int64_t known = 1, total = 1;
    for (int k = 0; k < x->rank; k++) {
        if (x->d[k] == RS_ONNX_BATCH) xb = true;
        else total *= x->d[k];
    }
    for (int k = 0; k < nt; k++) {
        int64_t d = t[k];
        if (d == 0 && !allowzero) {
            if (k >= x->rank) return rs_onnx_fail(p, RS_ERR_SHAPE, "target dim %d copies a dimension the input lacks", k);
            d = x->d[k];
        }
        if (d == -1) {
            if (infer >= 0) return rs_onnx_fail(p, RS_ERR_SHAPE, "more than one -1 in the target shape");
            infer = k;
            continue;
        }
        if (d < 0 && d != RS_ONNX_BATCH) return rs_onnx_fail(p, RS_ERR_SHAPE, "negative target dimension %lld", (long long)d);
        s.d[k] = d;
        if (d == RS_ONNX_BATCH) {
            if (sb) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "the batch appears twice in the target shape");
            sb = true;
        } else {
            if (d && known > RS_ONNX_MAX_ELEMS / d) return rs_onnx_fail(p, RS_ERR_SHAPE, "target shape too large");
            known *= d;
        }
    }
    char b1[96];
    if (infer >= 0) {
        /* the -1 takes what is left: the batch itself when the rest of the sizes match */
        if (known == 0) return rs_onnx_fail(p, RS_ERR_SHAPE, "cannot infer -1 next to a zero dimension");
        if (xb && !sb && total == known) s.d[infer] = RS_ONNX_BATCH;
        else if (xb != sb) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "cannot tell where the batch goes reshaping %s",
                                       rs_onnx_shape_str(x, b1, sizeof b1));
        else if (total % known) return rs_onnx_fail(p, RS_ERR_SHAPE, "cannot reshape %s: %lld elements are not a multiple of %lld",
                                            rs_onnx_shape_str(x, b1, sizeof b1), (long long)total, (long long)known);
        else s.d[infer] = total / known;
    } else if (xb != sb || known != total) {
        char b2[96];
        return rs_onnx_fail(p, RS_ERR_SHAPE, "cannot reshape %s to %s", rs_onnx_shape_str(x, b1, sizeof b1),
                    rs_onnx_shape_str(&s, b2, sizeof b2));
    }
    return reshape_to(c, c->in[0], &s);
}

static rs_status h_concat(nctx *c)
{
    imp *p = c->p;
    if (c->nin < 1) return rs_onnx_fail(p, RS_ERR_FORMAT, "needs inputs");
    for (int k = 0; k < c->nin; k++)
        if (!c->in[k]) return rs_onnx_fail(p, RS_ERR_FORMAT, "input %d is missing", k);
    int64_t ax;
    int axis = 0;
    rs_status st;
    if ((st = attr_int(p, "axis", 0, &ax)) || (st = norm_axis(p, ax, c->in[0]->shape.rank, &axis))) return st;
    bool ints = true;
    for (int k = 0; k < c->nin; k++) ints &= c->in[k]->kind == IV_I;
    if (ints) {
        /* shape tensors: 1-d int constants, possibly carrying the batch */
        int64_t n = 0;
        for (int k = 0; k < c->nin; k++) {
            if (c->in[k]->shape.rank != 1)
                return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "integer Concat of rank %d", c->in[k]->shape.rank);
            n += c->in[k]->shape.d[0];
            if (n > p->budget) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "result too large");
        }
        c->res = (ival){.kind = IV_I, .shape = {1, {n}}, .i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), .vid = -1};
        if (!c->res.i) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
        for (int k = 0, at = 0; k < c->nin; k++) {
            memcpy(c->res.i + at, c->in[k]->i, sizeof(int64_t) * (size_t)c->in[k]->shape.d[0]);
            at += (int)c->in[k]->shape.d[0];
        }
        p->budget -= n;
        return RS_OK;
    }
    rs_onnx_attrs a = {.axis = axis};
    return rs_onnx_emit(c, RS_ONNX_OP_CONCAT, &a, c->in, c->nin);
}

static rs_status h_cast(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    int64_t to;
    if ((st = attr_int(c->p, "to", DT_FLOAT, &to))) return st;
    ival *x = c->in[0];
    bool to_f = to == DT_FLOAT || to == DT_DOUBLE;
    bool to_i = to == DT_INT64 || to == DT_INT32 || to == DT_INT16 || to == DT_INT8 || to == DT_UINT8 || to == DT_BOOL;
    if (!to_f && !to_i) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "cast to %s", rs_onnx_import_dtype_name((int)to));
    if (x->kind == IV_DYN) {
        /* computed values are floats: integer casts truncate, bool ones compare with 0; the result stays
         * a float tensor holding those values */
        if (to_f) return reshape_to(c, x, &x->shape);
        rs_onnx_attrs a = {.sub = to == DT_BOOL ? RS_ONNX_CAST_BOOL : RS_ONNX_CAST_INT};
        return rs_onnx_emit(c, RS_ONNX_OP_UNARY, &a, c->in, 1);
    }
    size_t n = (size_t)rs_onnx_shape_numel(&x->shape, 1);
    if (x->kind == IV_I && to == DT_BOOL) {
        c->res = (ival){.kind = IV_I, .shape = x->shape, .i = malloc(sizeof(int64_t) * (n ? n : 1)), .vid = -1};
        if (!c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < n; k++) {
            if (x->i[k] == RS_ONNX_BATCH) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "the batch size as data");
            c->res.i[k] = x->i[k] != 0;
        }
        return RS_OK;
    }
    if ((x->kind == IV_F) == to_f) return reshape_to(c, x, &x->shape);
    c->res = (ival){.kind = to_f ? IV_F : IV_I, .shape = x->shape, .vid = -1};
    if (to_f) c->res.f = malloc(sizeof(float) * (n ? n : 1));
    else c->res.i = malloc(sizeof(int64_t) * (n ? n : 1));
    if (!c->res.f && !c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        if (to_f) {
            if (x->i[k] == RS_ONNX_BATCH) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "the batch size as data");
            c->res.f[k] = (float)x->i[k];
        } else {
            float v = x->f[k];
            c->res.i[k] = isfinite(v) && fabsf(v) < 9e18f ? (to == DT_BOOL ? v != 0.0f : (int64_t)v) : 0;
        }
    }
    return RS_OK;
}

/* x[starts + steps * i] along each dim into shape os (RS_ONNX_BATCH in os: that dim whole). Constants
 * are sliced here keeping their kind (int lists keep the batch they carry); computed values get a
 * SLICE node. Slice and Split both end here. */
static rs_status slice_value(nctx *c, ival *x, const int64_t *starts, const int64_t *steps, const rs_onnx_shape *os)
{
    rs_onnx_attrs a = {.shape = *os};
    memcpy(a.starts, starts, sizeof a.starts);
    memcpy(a.steps, steps, sizeof a.steps);
    if (x->kind == IV_DYN) return rs_onnx_emit(c, RS_ONNX_OP_SLICE, &a, &x, 1);
    int r = x->shape.rank;
    int64_t n = rs_onnx_shape_numel(os, 1);
    if (n < 0 || n > c->p->budget) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "slice result too large");
    c->res = (ival){.kind = x->kind, .shape = *os, .vid = -1};
    if (x->kind == IV_F) c->res.f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    else c->res.i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!c->res.f && !c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
    int64_t sx[RS_ONNX_MAX_RANK], idx[RS_ONNX_MAX_RANK] = {0}, acc = 1;
    for (int i = r - 1; i >= 0; i--) {
        sx[i] = acc;
        acc *= x->shape.d[i];
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int i = 0; i < r; i++) off += (starts[i] + idx[i] * steps[i]) * sx[i];
        if (x->kind == IV_F) c->res.f[k] = x->f[off];
        else c->res.i[k] = x->i[off];
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < os->d[i]) break;
            idx[i] = 0;
        }
    }
    c->p->budget -= n;
    return RS_OK;
}

/* Slice: starts/ends/axes/steps as inputs (opset 10 on) or attributes (before); any rank, constants or
 * computed values; the batch dimension only whole. */
static rs_status h_slice(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 1, 5);
    if (st) return st;
    ival *x = c->in[0];
    int r = x->shape.rank;
    int64_t s[RS_ONNX_MAX_RANK], e[RS_ONNX_MAX_RANK], ax[RS_ONNX_MAX_RANK], sp[RS_ONNX_MAX_RANK];
    int ns, ne, na = -1, nsp = -1;
    if (p->opset < 10) {
        if ((st = attr_ints(p, "starts", s, RS_ONNX_MAX_RANK, &ns)) || (st = attr_ints(p, "ends", e, RS_ONNX_MAX_RANK, &ne)) ||
            (st = attr_ints(p, "axes", ax, RS_ONNX_MAX_RANK, &na)))
            return st;
    } else {
        if (c->nin < 3 || !c->in[1] || !c->in[2]) return rs_onnx_fail(p, RS_ERR_FORMAT, "needs starts and ends");
        if ((st = const_ints(c, c->in[1], "starts", s, RS_ONNX_MAX_RANK, &ns, false)) ||
            (st = const_ints(c, c->in[2], "ends", e, RS_ONNX_MAX_RANK, &ne, true)))
            return st;
        if (c->nin > 3 && c->in[3] && (st = const_ints(c, c->in[3], "axes", ax, RS_ONNX_MAX_RANK, &na, false))) return st;
        if (c->nin > 4 && c->in[4] && (st = const_ints(c, c->in[4], "steps", sp, RS_ONNX_MAX_RANK, &nsp, false))) return st;
    }
    if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
        return rs_onnx_fail(p, RS_ERR_FORMAT, "starts, ends, axes and steps differ in length");
    int64_t starts[RS_ONNX_MAX_RANK] = {0}, steps[RS_ONNX_MAX_RANK];
    rs_onnx_shape os = x->shape;
    bool seen[RS_ONNX_MAX_RANK] = {0};
    for (int i = 0; i < RS_ONNX_MAX_RANK; i++) steps[i] = 1;
    for (int k = 0; k < ns; k++) {
        int a = 0;
        if ((st = norm_axis(p, na >= 0 ? ax[k] : k, r, &a))) return st;
        if (seen[a]) return rs_onnx_fail(p, RS_ERR_FORMAT, "axis %d sliced twice", a);
        seen[a] = true;
        int64_t step = nsp >= 0 ? sp[k] : 1, d = x->shape.d[a], b = s[k], en = e[k];
        if (step == 0) return rs_onnx_fail(p, RS_ERR_FORMAT, "step 0 on axis %d", a);
        if (d == RS_ONNX_BATCH) {
            /* only x[0:] (ends INT64_MAX, or the batch itself) keeps rows as samples */
            if (b != 0 || step != 1 || (en != RS_ONNX_BATCH && en < (int64_t)1 << 31))
                return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "slicing the batch dimension (axis %d)", a);
            continue;
        }
        if (en == RS_ONNX_BATCH) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "a slice end that is the batch size");
        /* clamp as the ONNX definition does: to [0, d] going forward, [-1, d-1] going back */
        if (b < 0) b += d;
        if (en < 0) en += d;
        int64_t len;
        if (step > 0) {
            b = b < 0 ? 0 : b > d ? d : b;
            en = en < 0 ? 0 : en > d ? d : en;
            len = en > b ? (en - b + step - 1) / step : 0;
        } else {
            b = b < 0 ? -1 : b > d - 1 ? d - 1 : b;
            en = en < -1 ? -1 : en > d - 1 ? d - 1 : en;
            len = b > en ? (b - en + (-step) - 1) / (-step) : 0;
        }
        starts[a] = len ? b : 0;
        steps[a] = step;
        os.d[a] = len;
    }
    for (int i = 0; i < r; i++)
        if (x->shape.d[i] == RS_ONNX_BATCH) os.d[i] = RS_ONNX_BATCH;
    return slice_value(c, x, starts, steps, &os);
}

/* Split into n_output parts along axis: sizes from the 'split' attribute (before opset 13), the second
 * input (13 on), or equal parts (num_outputs at 18, or the number of outputs), the last one smaller. */
static rs_status h_split(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 1, 2);
    if (st) return st;
    ival *x = c->in[0];
    int64_t ax, sizes[RS_ONNX_MAX_OUTS], nout = (int64_t)c->np->n_output, num;
    int axis = 0, ns = -1;
    if ((st = attr_int(p, "axis", 0, &ax)) || (st = norm_axis(p, ax, x->shape.rank, &axis)) ||
        (st = attr_int(p, "num_outputs", 0, &num)))
        return st;
    if (nout < 1 || nout > RS_ONNX_MAX_OUTS)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "%lld outputs (at most %d)", (long long)nout, RS_ONNX_MAX_OUTS);
    if (num && num != nout) return rs_onnx_fail(p, RS_ERR_FORMAT, "num_outputs %lld but %lld outputs", (long long)num, (long long)nout);
    int64_t d = x->shape.d[axis];
    if (d == RS_ONNX_BATCH) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "splitting the batch dimension (axis %d)", axis);
    if (p->opset < 13) {
        if ((st = attr_ints(p, "split", sizes, RS_ONNX_MAX_OUTS, &ns))) return st;
    } else if (c->nin > 1 && c->in[1]) {
        if ((st = const_ints(c, c->in[1], "split", sizes, RS_ONNX_MAX_OUTS, &ns, false))) return st;
    }
    if (ns < 0) {
        int64_t part = (d + nout - 1) / nout;
        for (int k = 0; k < nout; k++) sizes[k] = d - k * part < part ? (d - k * part > 0 ? d - k * part : 0) : part;
        ns = (int)nout;
        if (p->opset < 18 && d % nout)
            return rs_onnx_fail(p, RS_ERR_SHAPE, "dimension %lld does not split into %lld equal parts", (long long)d, (long long)nout);
    }
    int64_t total = 0;
    for (int k = 0; k < ns; k++) {
        if (sizes[k] < 0) return rs_onnx_fail(p, RS_ERR_FORMAT, "negative split size %lld", (long long)sizes[k]);
        total += sizes[k];
    }
    if (ns != nout || total != d)
        return rs_onnx_fail(p, RS_ERR_SHAPE, "split sizes (%d of them, total %lld) do not cover dimension %d of size %lld "
                            "in %lld outputs", ns, (long long)total, axis, (long long)d, (long long)nout);
    ival parts[RS_ONNX_MAX_OUTS];
    int done = 0;
    int64_t at = 0;
    for (int k = 0; k < nout && !st; k++) {
        int64_t starts[RS_ONNX_MAX_RANK] = {0}, steps[RS_ONNX_MAX_RANK];
        for (int i = 0; i < RS_ONNX_MAX_RANK; i++) steps[i] = 1;
        starts[axis] = at;
        rs_onnx_shape os = x->shape;
        os.d[axis] = sizes[k];
        at += sizes[k];
        c->out_index = k;
        c->res = (ival){.vid = -1};
        st = slice_value(c, x, starts, steps, &os);
        parts[k] = c->res;
        done++;
    }
    c->out_index = 0;
    if (st) {
        for (int k = 0; k < done; k++) rs_onnx_ival_clear(&parts[k]);
        c->res = (ival){.vid = -1};
        return st;
    }
    c->res = parts[0];
    for (int k = 1; k < nout; k++) c->more[k - 1] = parts[k];
    c->nmore = (int)nout - 1;
    return RS_OK;
}

static rs_status h_constant_of_shape(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    int64_t d[RS_ONNX_MAX_RANK];
    int nd;
    if ((st = const_ints(c, c->in[0], "the shape", d, RS_ONNX_MAX_RANK, &nd, false))) return st;
    rs_onnx_shape s;
    if ((st = rs_onnx_check_dims(p, "the shape", (size_t)nd, d, &s))) return st;
    int64_t n = rs_onnx_shape_numel(&s, 1);
    if (n > p->budget) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "result too large");
    ival v = {.kind = IV_F, .shape = {0, {0}}};
    float fill = 0.0f;
    const Onnx__AttributeProto *a = attr(c->np, "value");
    if (a) {
        if ((int)a->type != AT_TENSOR || !a->t) return rs_onnx_fail(p, RS_ERR_FORMAT, "attribute 'value' should be a tensor");
        if ((st = rs_onnx_tensor_to_ival(p, a->t, "its value", &v))) return st;
        if (rs_onnx_shape_numel(&v.shape, 1) != 1) {
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

static rs_status h_unary(nctx *c)
{
    static const struct { const char *name; rs_onnx_unary u; } map[] = {
        {"Relu", RS_ONNX_RELU}, {"Tanh", RS_ONNX_TANH}, {"Sigmoid", RS_ONNX_SIGMOID}, {"Erf", RS_ONNX_ERF},
        {"Gelu", RS_ONNX_GELU}, {"Sqrt", RS_ONNX_SQRT}, {"Exp", RS_ONNX_EXP}, {"Log", RS_ONNX_LOG},
        {"Neg", RS_ONNX_NEG}, {"Abs", RS_ONNX_ABS}, {"Reciprocal", RS_ONNX_RECIPROCAL},
        {"LeakyRelu", RS_ONNX_LEAKYRELU}, {"Clip", RS_ONNX_CLIP}, {"HardSigmoid", RS_ONNX_HARDSIGMOID},
        {"HardSwish", RS_ONNX_HARDSWISH}, {"Not", RS_ONNX_NOT},
    };
    imp *p = c->p;
    rs_status st = need_inputs(c, 1, 3);
    if (st) return st;
    rs_onnx_attrs a = {0};
    for (size_t k = 0; k < sizeof map / sizeof *map; k++)
        if (!strcmp(map[k].name, c->np->op_type)) a.sub = map[k].u;
    if (a.sub == RS_ONNX_GELU && !strcmp(attr_str(p, "approximate", "none"), "tanh")) a.sub = RS_ONNX_GELU_TANH;
    if (a.sub == RS_ONNX_LEAKYRELU && (st = attr_float(p, "alpha", 0.01f, &a.alpha))) return st;
    if (a.sub == RS_ONNX_HARDSIGMOID &&
        ((st = attr_float(p, "alpha", 0.2f, &a.alpha)) || (st = attr_float(p, "beta", 0.5f, &a.beta))))
        return st;
    if (a.sub == RS_ONNX_CLIP) {
        a.alpha = -FLT_MAX;
        a.beta = FLT_MAX;
        if (p->opset < 11) {
            if ((st = attr_float(p, "min", -FLT_MAX, &a.alpha)) || (st = attr_float(p, "max", FLT_MAX, &a.beta))) return st;
        } else {
            for (int k = 1; k < c->nin; k++) {
                ival *v = c->in[k];
                if (!v) continue;
                if (v->kind != IV_F || rs_onnx_shape_numel(&v->shape, 1) != 1)
                    return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Clip bounds must be float scalar constants");
                if (k == 1) a.alpha = v->f[0];
                else a.beta = v->f[0];
            }
        }
    }
    return rs_onnx_emit(c, RS_ONNX_OP_UNARY, &a, c->in, 1);
}

/* One integer operation of a shape list; the batch only takes part in comparisons whose answer does
 * not depend on its size (N == N; N == k for k < 1, as the -1 of an Expand shape is compared). */
static rs_status int_binop(nctx *c, int op, int64_t u, int64_t v, int64_t *out)
{
    bool ub = u == RS_ONNX_BATCH, vb = v == RS_ONNX_BATCH;
    if (ub || vb) {
        int64_t other = ub ? v : u;
        if (op == RS_ONNX_EQUAL && ub && vb) *out = 1;
        else if (op == RS_ONNX_EQUAL && other < 1) *out = 0;
        else return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "arithmetic on the batch size");
        return RS_OK;
    }
    if (llabs(u) > (1LL << 31) || llabs(v) > (1LL << 31))
        return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "integer too large");
    if ((op == RS_ONNX_DIV || op == RS_ONNX_MOD || op == RS_ONNX_FMOD) && v == 0)
        return rs_onnx_fail(c->p, RS_ERR_FORMAT, "integer division by zero");
    switch (op) {
    case RS_ONNX_ADD: *out = u + v; break;
    case RS_ONNX_SUB: *out = u - v; break;
    case RS_ONNX_MUL: *out = u * v; break;
    case RS_ONNX_DIV: *out = u / v; break;
    case RS_ONNX_EQUAL: *out = u == v; break;
    case RS_ONNX_LESS: *out = u < v; break;
    case RS_ONNX_GREATER: *out = u > v; break;
    case RS_ONNX_LESS_EQ: *out = u <= v; break;
    case RS_ONNX_GREATER_EQ: *out = u >= v; break;
    case RS_ONNX_FMOD: *out = u % v; break;
    case RS_ONNX_AND: *out = u && v; break;
    case RS_ONNX_OR: *out = u || v; break;
    case RS_ONNX_XOR: *out = !u != !v; break;
    default: *out = u % v != 0 && ((u % v < 0) != (v < 0)) ? u % v + v : u % v; break;
    }
    return RS_OK;
}

static rs_status h_binary(nctx *c)
{
    static const struct { const char *name; rs_onnx_binary b; } map[] = {
        {"Add", RS_ONNX_ADD}, {"Sub", RS_ONNX_SUB}, {"Mul", RS_ONNX_MUL}, {"Div", RS_ONNX_DIV}, {"Pow", RS_ONNX_POW},
        {"Equal", RS_ONNX_EQUAL}, {"Less", RS_ONNX_LESS}, {"Greater", RS_ONNX_GREATER},
        {"LessOrEqual", RS_ONNX_LESS_EQ}, {"GreaterOrEqual", RS_ONNX_GREATER_EQ}, {"Mod", RS_ONNX_MOD},
        {"And", RS_ONNX_AND}, {"Or", RS_ONNX_OR}, {"Xor", RS_ONNX_XOR},
    };
    rs_status st = need_inputs(c, 2, 2);
    if (st) return st;
    rs_onnx_attrs a = {0};
    for (size_t k = 0; k < sizeof map / sizeof *map; k++)
        if (!strcmp(map[k].name, c->np->op_type)) a.sub = map[k].b;
    if (a.sub == RS_ONNX_MOD) {
        int64_t fm;
        if ((st = attr_int(c->p, "fmod", 0, &fm))) return st;
        if (fm != 0 && fm != 1) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "fmod must be 0 or 1, not %lld", (long long)fm);
        if (fm) a.sub = RS_ONNX_FMOD;
        else if (c->in[0]->kind != IV_I || c->in[1]->kind != IV_I)
            return rs_onnx_fail(c->p, RS_ERR_FORMAT, "fmod=0 is for integer inputs; floats need fmod=1");
    }
    ival *x = c->in[0], *y = c->in[1];
    int64_t nx = rs_onnx_shape_numel(&x->shape, 1), ny = rs_onnx_shape_numel(&y->shape, 1);
    if (x->kind == IV_I && y->kind == IV_I && a.sub != RS_ONNX_POW && x->shape.rank <= 1 && y->shape.rank <= 1 &&
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
    if (x->kind == IV_I && y->kind == IV_I && a.sub == RS_ONNX_DIV)
        return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "integer division beyond 1-d lists");
    return rs_onnx_emit(c, RS_ONNX_OP_BINARY, &a, c->in, 2);
}

/* Where(cond, x, y): on shape lists elementwise here (the batch passes through), else a node or a
 * fold. torch writes it for masked_fill (causal masks) and for the -1 of expand shapes. */
static rs_status h_where(nctx *c)
{
    rs_status st = need_inputs(c, 3, 3);
    if (st) return st;
    ival *cd = c->in[0], *x = c->in[1], *y = c->in[2];
    int64_t n[3];
    bool lists = true;
    for (int k = 0; k < 3; k++) {
        n[k] = rs_onnx_shape_numel(&c->in[k]->shape, 1);
        lists &= c->in[k]->kind == IV_I && c->in[k]->shape.rank <= 1;
    }
    int64_t m = n[0] > n[1] ? n[0] : n[1];
    m = m > n[2] ? m : n[2];
    if (lists && (n[0] == m || n[0] == 1) && (n[1] == m || n[1] == 1) && (n[2] == m || n[2] == 1)) {
        int r = cd->shape.rank > x->shape.rank ? cd->shape.rank : x->shape.rank;
        r = r > y->shape.rank ? r : y->shape.rank;
        c->res = (ival){.kind = IV_I, .shape = {r, {m}}, .i = malloc(sizeof(int64_t) * (size_t)(m ? m : 1)), .vid = -1};
        if (!c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < m; k++) {
            int64_t q = cd->i[n[0] == 1 ? 0 : k];
            if (q == RS_ONNX_BATCH) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "a condition that is the batch size");
            c->res.i[k] = q ? x->i[n[1] == 1 ? 0 : k] : y->i[n[2] == 1 ? 0 : k];
        }
        return RS_OK;
    }
    rs_onnx_attrs a = {0};
    return rs_onnx_emit(c, RS_ONNX_OP_WHERE, &a, c->in, 3);
}

/* Expand(x, shape): numpy broadcasting of x against shape, which may hold the batch (x.expand(B, ...)). */
static rs_status h_expand(nctx *c)
{
    rs_status st = need_inputs(c, 2, 2);
    if (st) return st;
    int64_t d[RS_ONNX_MAX_RANK];
    int nd;
    if ((st = const_ints(c, c->in[1], "the shape", d, RS_ONNX_MAX_RANK, &nd, true))) return st;
    rs_onnx_attrs a = {.shape = {nd, {0}}};
    for (int k = 0; k < nd; k++) {
        if (d[k] < 0 && d[k] != RS_ONNX_BATCH)
            return rs_onnx_fail(c->p, RS_ERR_FORMAT, "negative dimension %lld in the shape", (long long)d[k]);
        a.shape.d[k] = d[k];
    }
    return rs_onnx_emit(c, RS_ONNX_OP_EXPAND, &a, c->in, 1);
}

/* Range(start, limit, delta) on constants: torch's arange, e.g. positions for a causal mask. */
static rs_status h_range(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 3, 3);
    if (st) return st;
    bool ints = true;
    double v[3];
    for (int k = 0; k < 3; k++) {
        const ival *x = c->in[k];
        if (!rs_onnx_is_const(x) || rs_onnx_shape_numel(&x->shape, 1) != 1)
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input %d must be a scalar constant (known at import)", k);
        if (x->kind == IV_I && x->i[0] == RS_ONNX_BATCH)
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "a range over the batch size");
        ints &= x->kind == IV_I;
        v[k] = x->kind == IV_I ? (double)x->i[0] : (double)x->f[0];
    }
    if (v[2] == 0.0 || !isfinite(v[0]) || !isfinite(v[1]) || !isfinite(v[2]))
        return rs_onnx_fail(p, RS_ERR_FORMAT, "delta must be non-zero and the bounds finite");
    double cnt = ceil((v[1] - v[0]) / v[2]);
    int64_t n = cnt > 0 ? (cnt > (double)p->budget ? p->budget + 1 : (int64_t)cnt) : 0;
    if (n > p->budget) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "range of %.0f elements is too large", cnt);
    c->res = (ival){.kind = ints ? IV_I : IV_F, .shape = {1, {n}}, .vid = -1};
    if (ints) c->res.i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    else c->res.f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!c->res.f && !c->res.i) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; k < n; k++) {
        if (ints) c->res.i[k] = c->in[0]->i[0] + k * c->in[2]->i[0];
        else c->res.f[k] = (float)(v[0] + (double)k * v[2]);
    }
    p->budget -= n;
    return RS_OK;
}

/* Trilu(x, k): upper (attribute, 1 by default) or lower triangle of the last two dims. */
static rs_status h_trilu(nctx *c)
{
    rs_status st = need_inputs(c, 1, 2);
    if (st) return st;
    int64_t up, kk[1] = {0};
    int nk = 0;
    if ((st = attr_int(c->p, "upper", 1, &up))) return st;
    if (up != 0 && up != 1) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "upper must be 0 or 1, not %lld", (long long)up);
    if (c->nin > 1 && c->in[1] && (st = const_ints(c, c->in[1], "k", kk, 1, &nk, false))) return st;
    if (c->nin > 1 && c->in[1] && nk != 1) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "k must be one value");
    rs_onnx_attrs a = {.upper = up != 0, .k = kk[0]};
    if (llabs(a.k) > (1LL << 40)) a.k = a.k < 0 ? -(1LL << 40) : 1LL << 40;
    return rs_onnx_emit(c, RS_ONNX_OP_TRILU, &a, c->in, 1);
}

static rs_status h_matmul(nctx *c)
{
    rs_status st = need_inputs(c, 2, 2);
    if (st) return st;
    rs_onnx_attrs a = {0};
    return rs_onnx_emit(c, RS_ONNX_OP_MATMUL, &a, c->in, 2);
}

static rs_status h_gemm(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 2, 3);
    if (st) return st;
    int64_t ta, tb;
    rs_onnx_attrs a = {0};
    if ((st = attr_int(p, "transA", 0, &ta)) || (st = attr_int(p, "transB", 0, &tb)) ||
        (st = attr_float(p, "alpha", 1.0f, &a.alpha)) || (st = attr_float(p, "beta", 1.0f, &a.beta)))
        return st;
    a.ta = ta != 0;
    a.tb = tb != 0;
    return rs_onnx_emit(c, RS_ONNX_OP_GEMM, &a, c->in, c->nin > 2 && c->in[2] ? 3 : 2);
}

/* kernel_shape, strides, pads, dilations, auto_pad, ceil_mode for Conv and the pools */
static rs_status window_attrs(nctx *c, rs_onnx_attrs *a, bool conv)
{
    imp *p = c->p;
    const rs_onnx_shape *x = &c->in[0]->shape;
    if (x->rank != 3 && x->rank != 4)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "only 1-d and 2-d windows (input rank 3 or 4)");
    int sp = x->rank - 2;
    int64_t ks[2] = {1, 1}, st2[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, dil[2] = {1, 1}, v;
    int nk, ns, np, nd;
    rs_status st;
    if ((st = attr_ints(p, "kernel_shape", ks, 2, &nk)) || (st = attr_ints(p, "strides", st2, 2, &ns)) ||
        (st = attr_ints(p, "pads", pads, 4, &np)) || (st = attr_ints(p, "dilations", dil, 2, &nd)))
        return st;
    if (nk < 0) {
        if (!conv) return rs_onnx_fail(p, RS_ERR_FORMAT, "needs kernel_shape");
        const rs_onnx_shape *w = &c->in[1]->shape;
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
    const char *ap = attr_str(p, "auto_pad", "NOTSET");
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
    if ((st = attr_int(p, "ceil_mode", 0, &v))) return st;
    a->ceil_mode = v != 0;
    if ((st = attr_int(p, "count_include_pad", 0, &v))) return st;
    a->count_include_pad = v != 0;
    if ((st = attr_int(p, "group", 1, &v))) return st;
    if (v < 1 || v > 1 << 20) return rs_onnx_fail(p, RS_ERR_FORMAT, "group %lld", (long long)v);
    a->group = (int)v;
    return RS_OK;
}

static rs_status h_conv(nctx *c)
{
    rs_status st = need_inputs(c, 2, 3);
    if (st) return st;
    rs_onnx_attrs a = {0};
    if ((st = window_attrs(c, &a, true))) return st;
    return rs_onnx_emit(c, RS_ONNX_OP_CONV, &a, c->in, c->nin > 2 && c->in[2] ? 3 : 2);
}

static rs_status h_pool(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    rs_onnx_attrs a = {0};
    if ((st = window_attrs(c, &a, false))) return st;
    if (c->np->n_output > 1 && c->np->output[1] && *c->np->output[1] && !strcmp(c->np->op_type, "MaxPool"))
        return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "MaxPool's Indices output");
    return rs_onnx_emit(c, !strcmp(c->np->op_type, "MaxPool") ? RS_ONNX_OP_MAXPOOL : RS_ONNX_OP_AVGPOOL, &a, c->in, 1);
}

static rs_status h_gap(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    rs_onnx_attrs a = {0};
    return rs_onnx_emit(c, RS_ONNX_OP_GLOBALAVGPOOL, &a, c->in, 1);
}

static rs_status h_softmax(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    rs_onnx_attrs a = {.legacy_softmax = c->p->opset < 13};
    int64_t ax;
    if ((st = attr_int(c->p, "axis", a.legacy_softmax ? 1 : -1, &ax)) ||
        (st = norm_axis(c->p, ax, c->in[0]->shape.rank, &a.axis)))
        return st;
    if (a.legacy_softmax)
        for (int k = a.axis; k < c->in[0]->shape.rank; k++)
            if (c->in[0]->shape.d[k] == RS_ONNX_BATCH) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "softmax over the batch");
    if (!a.legacy_softmax && c->in[0]->shape.d[a.axis] == RS_ONNX_BATCH)
        return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "softmax over the batch");
    return rs_onnx_emit(c, strcmp(c->np->op_type, "Softmax") ? RS_ONNX_OP_LOGSOFTMAX : RS_ONNX_OP_SOFTMAX, &a, c->in, 1);
}

static rs_status h_layernorm(nctx *c)
{
    rs_status st = need_inputs(c, 2, 3);
    if (st) return st;
    for (size_t k = 1; k < c->np->n_output; k++)
        if (c->np->output[k] && *c->np->output[k]) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "the Mean/InvStdDev outputs");
    rs_onnx_attrs a = {0};
    int64_t ax;
    if ((st = attr_int(c->p, "axis", -1, &ax)) || (st = attr_float(c->p, "epsilon", 1e-5f, &a.eps)) ||
        (st = norm_axis(c->p, ax, c->in[0]->shape.rank, &a.axis)))
        return st;
    if (!(a.eps >= 0.0f)) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "epsilon must be >= 0");
    return rs_onnx_emit(c, RS_ONNX_OP_LAYERNORM, &a, c->in, c->nin > 2 && c->in[2] ? 3 : 2);
}

static rs_status h_batchnorm(nctx *c)
{
    rs_status st = need_inputs(c, 5, 5);
    if (st) return st;
    int64_t tm;
    rs_onnx_attrs a = {0};
    if ((st = attr_int(c->p, "training_mode", 0, &tm)) || (st = attr_float(c->p, "epsilon", 1e-5f, &a.eps))) return st;
    if (tm) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "training_mode=1 (inference only)");
    for (size_t k = 1; k < c->np->n_output; k++)
        if (c->np->output[k] && *c->np->output[k]) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "running statistics outputs");
    if (!(a.eps >= 0.0f)) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "epsilon must be >= 0");
    /* five inputs do not fit a node: fold scale/sqrt(var+eps) and bias - mean*k into two constants */
    for (int k = 1; k < 5; k++)
        if (c->in[k]->kind != IV_F) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "parameters must be float constants");
    const rs_onnx_shape *x = &c->in[0]->shape;
    if (x->rank < 2 || x->d[1] < 0) return rs_onnx_fail(c->p, RS_ERR_SHAPE, "input needs channels in dim 1");
    int64_t C = x->d[1];
    for (int k = 1; k < 5; k++)
        if (c->in[k]->shape.rank != 1 || c->in[k]->shape.d[0] != C) {
            char b[96];
            return rs_onnx_fail(c->p, RS_ERR_SHAPE, "parameter %d has shape %s, expected (%lld)", k,
                        rs_onnx_shape_str(&c->in[k]->shape, b, sizeof b), (long long)C);
        }
    rs_onnx_shape ps = {x->rank - 1, {C}};
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
    rs_onnx_attrs am = {.sub = RS_ONNX_MUL}, aa = {.sub = RS_ONNX_ADD};
    ival *ins[2] = {c->in[0], &mul};
    const char *saved = c->in_names[1];
    c->in_names[1] = "bn_scale";
    st = rs_onnx_emit(c, RS_ONNX_OP_BINARY, &am, ins, 2);
    if (!st) {
        ival mid = c->res;
        c->res = (ival){.vid = -1}; /* mid is ours now: the caller must not free it twice */
        ins[0] = &mid;
        ins[1] = &add;
        c->in_names[1] = "bn_shift";
        st = rs_onnx_emit(c, RS_ONNX_OP_BINARY, &aa, ins, 2);
        rs_onnx_ival_clear(&mid);
    }
    c->in_names[1] = saved;
    rs_onnx_ival_clear(&mul);
    rs_onnx_ival_clear(&add);
    return st;
}

static rs_status h_transpose(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    int r = c->in[0]->shape.rank, np;
    int64_t perm[RS_ONNX_MAX_RANK];
    if ((st = attr_ints(c->p, "perm", perm, RS_ONNX_MAX_RANK, &np))) return st;
    rs_onnx_attrs a = {0};
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
    return rs_onnx_emit(c, RS_ONNX_OP_TRANSPOSE, &a, c->in, 1);
}

static rs_status h_reduce(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 1, 2);
    if (st) return st;
    int64_t axes[RS_ONNX_MAX_RANK], kd, noop;
    int na;
    if ((st = get_axes(c, axes, &na)) || (st = attr_int(p, "keepdims", 1, &kd)) ||
        (st = attr_int(p, "noop_with_empty_axes", 0, &noop)))
        return st;
    rs_onnx_attrs a = {.keepdims = kd != 0};
    int r = c->in[0]->shape.rank;
    if (na <= 0) {
        if (noop) return reshape_to(c, c->in[0], &c->in[0]->shape);
        a.axes_mask = (1u << r) - 1;
    }
    for (int k = 0; k < na; k++) {
        int ax = 0;
        if ((st = norm_axis(p, axes[k], r, &ax))) return st;
        a.axes_mask |= 1u << ax;
    }
    return rs_onnx_emit(c, strcmp(c->np->op_type, "ReduceMean") ? RS_ONNX_OP_REDUCESUM : RS_ONNX_OP_REDUCEMEAN, &a, c->in, 1);
}

static const struct { const char *name; rs_onnx_handler fn; } handlers[] = {
    {"Abs", h_unary}, {"Add", h_binary}, {"And", h_binary}, {"AveragePool", h_pool}, {"BatchNormalization", h_batchnorm},
    {"Cast", h_cast}, {"Clip", h_unary}, {"Concat", h_concat}, {"Constant", h_constant},
    {"ConstantOfShape", h_constant_of_shape}, {"Conv", h_conv}, {"Div", h_binary}, {"Dropout", h_identity},
    {"Equal", h_binary}, {"Erf", h_unary}, {"Exp", h_unary}, {"Expand", h_expand}, {"Flatten", h_flatten},
    {"Gather", h_gather}, {"Gelu", h_unary}, {"Gemm", h_gemm}, {"GlobalAveragePool", h_gap},
    {"Greater", h_binary}, {"GreaterOrEqual", h_binary}, {"HardSigmoid", h_unary}, {"HardSwish", h_unary},
    {"Identity", h_identity}, {"LayerNormalization", h_layernorm}, {"LeakyRelu", h_unary}, {"Less", h_binary},
    {"LessOrEqual", h_binary}, {"Log", h_unary}, {"LogSoftmax", h_softmax}, {"MatMul", h_matmul},
    {"MaxPool", h_pool}, {"Mod", h_binary}, {"Mul", h_binary}, {"Neg", h_unary}, {"Not", h_unary}, {"Or", h_binary},
    {"Pow", h_binary},
    {"Range", h_range}, {"Reciprocal", h_unary}, {"ReduceMean", h_reduce}, {"ReduceSum", h_reduce},
    {"Relu", h_unary}, {"Reshape", h_reshape}, {"Shape", h_shape}, {"Sigmoid", h_unary}, {"Slice", h_slice},
    {"Softmax", h_softmax}, {"Split", h_split}, {"Sqrt", h_unary}, {"Squeeze", h_squeeze}, {"Sub", h_binary},
    {"Tanh", h_unary}, {"Transpose", h_transpose}, {"Trilu", h_trilu}, {"Unsqueeze", h_unsqueeze},
    {"Where", h_where}, {"Xor", h_binary},
};
#define NHANDLERS (sizeof handlers / sizeof *handlers)

const char *rs_onnx_supported_ops(void)
{
    static char list[2048];
    if (!list[0]) {
        size_t k = 0;
        for (size_t i = 0; i < NHANDLERS && k < sizeof list; i++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", handlers[i].name);
    }
    return list;
}

rs_onnx_handler rs_onnx_op_handler(const char *op_type)
{
    rs_onnx_handler fn = NULL;
    for (size_t h = 0; h < NHANDLERS; h++)
        if (op_type && !strcmp(handlers[h].name, op_type)) fn = handlers[h].fn;
    return fn;
}
