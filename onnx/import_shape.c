/* The shape and data-movement half of the ONNX importer's operators (see import_ops.c for the rest):
 * Shape, Gather, Reshape and its kin, Concat, Slice, Split, Where, Expand, Range, Trilu. On constants
 * (shape lists that may carry the batch, masks) they compute here, keeping integers integers; on
 * computed values they hand a node to rs_onnx_emit. */
#include "import_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rs_status rs_onnx_h_shape(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 1);
    if (st) return st;
    rs_dims xs = rs_onnx_file_shape(c->in[0]); /* a merged batch dim reads as the batch times k */
    int r = xs.rank;
    int64_t start = 0, end = r;
    if ((st = rs_onnx_attr_int(c->p, "start", &start)) || (st = rs_onnx_attr_int(c->p, "end", &end))) return st;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    int64_t n = end - start;
    c->res = (ival){.kind = IV_I, .shape = {1, {n}}, .i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), .vid = -1};
    if (!c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; k < n; k++) c->res.i[k] = xs.d[start + k];
    return RS_OK;
}

static rs_status slice_value(nctx *c, ival *x, const int64_t *starts, const int64_t *steps, const rs_dims *os);

/* Gather(x, indices) on a computed x with constant, evenly spaced indices along a dimension that is not
 * the batch, as torch writes x[:, -1, :] (the last position) and the q/k/v picks of
 * nn.MultiheadAttention: a Slice of x, and a Reshape that puts the indices' shape in place of the axis. */
static rs_status gather_computed(nctx *c, int axis)
{
    imp *p = c->p;
    ival *x = c->in[0], *ix = c->in[1];
    if (ix->kind != IV_I)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Gather on computed data with %s indices; constant integer indices "
                            "import (x[:, -1] or x[:, 2:5]), computed ones do not", ix->kind == IV_F ? "float" : "computed");
    int64_t d = x->shape.d[axis], ni = rs_dims_numel(&ix->shape, 1), q0 = 0, step = 1;
    if (d == RS_DIM_BATCH) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Gather along the batch dimension (axis %d)", axis);
    if (ni < 1 || x->shape.rank - 1 + ix->shape.rank > RS_DIMS_MAX)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Gather on computed data with %lld indices of rank %d", (long long)ni,
                            ix->shape.rank);
    for (int64_t j = 0; j < ni; j++) {
        int64_t q = ix->i[j] < 0 ? ix->i[j] + d : ix->i[j];
        if (q < 0 || q >= d)
            return rs_onnx_fail(p, RS_ERR_SHAPE, "index %lld out of range for dimension %d of size %lld", (long long)ix->i[j],
                                axis, (long long)d);
        if (j == 0) q0 = q;
        if (j == 1) step = q - q0;
        if (q != q0 + j * step || step == 0)
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Gather on computed data with indices that are not evenly spaced "
                                "(index %lld is %lld); a Slice (x[:, a:b:s]) or evenly spaced indices import",
                                (long long)j, (long long)ix->i[j]);
    }
    int64_t starts[RS_DIMS_MAX] = {0}, steps[RS_DIMS_MAX];
    for (int i = 0; i < RS_DIMS_MAX; i++) steps[i] = 1;
    starts[axis] = q0;
    steps[axis] = step;
    rs_dims os = x->shape, fs = {0, {0}};
    os.d[axis] = ni;
    for (int k = 0; k < axis; k++) fs.d[fs.rank++] = x->shape.d[k];
    for (int k = 0; k < ix->shape.rank; k++) fs.d[fs.rank++] = ix->shape.d[k];
    for (int k = axis + 1; k < x->shape.rank; k++) fs.d[fs.rank++] = x->shape.d[k];
    rs_status st = slice_value(c, x, starts, steps, &os);
    if (st || ix->shape.rank == 1) return st;
    ival mid = c->res;
    c->res = (ival){.vid = -1};
    st = rs_onnx_reshape_to(c, &mid, &fs);
    rs_onnx_ival_clear(&mid);
    return st;
}

/* numpy take along axis: on constants here (shape lists among them); on computed data with constant
 * indices a slice; over token ids the embedding */
rs_status rs_onnx_h_gather(nctx *c)
{
    imp *p = c->p;
    rs_status st = rs_onnx_need_inputs(c, 2, 2);
    if (st) return st;
    ival *x = c->in[0], *ix = c->in[1];
    int64_t ax = 0;
    int axis = 0;
    if ((st = rs_onnx_attr_int(p, "axis", &ax)) || (st = rs_onnx_norm_axis(p, ax, x->shape.rank, &axis))) return st;
    if (!rs_onnx_is_const(x)) return gather_computed(c, axis);
    if (ix->kind == IV_DYN && p->g->tokens) return rs_onnx_token_gather(c, axis); /* an embedding */
    if (ix->kind != IV_I) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Gather indices must be integer constants");
    rs_dims os = {0, {0}};
    if (x->shape.rank - 1 + ix->shape.rank > RS_DIMS_MAX) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "rank too high");
    for (int k = 0; k < axis; k++) os.d[os.rank++] = x->shape.d[k];
    for (int k = 0; k < ix->shape.rank; k++) os.d[os.rank++] = ix->shape.d[k];
    for (int k = axis + 1; k < x->shape.rank; k++) os.d[os.rank++] = x->shape.d[k];
    int64_t on = rs_dims_numel(&os, 1);
    if (on < 0 || on > p->budget) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "gather result too large");
    size_t outer = 1, inner = 1, ni = (size_t)rs_dims_numel(&ix->shape, 1), dim = (size_t)x->shape.d[axis];
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

rs_status rs_onnx_h_unsqueeze(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 2);
    if (st) return st;
    int64_t axes[RS_DIMS_MAX];
    int na;
    if ((st = rs_onnx_get_axes(c, axes, &na))) return st;
    if (na < 0) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "needs axes");
    rs_dims xf = rs_onnx_file_shape(c->in[0]);
    const rs_dims *x = &xf;
    int r = x->rank + na;
    if (r > RS_DIMS_MAX) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "rank too high");
    bool ins[RS_DIMS_MAX] = {0};
    for (int k = 0; k < na; k++) {
        int a = 0;
        if ((st = rs_onnx_norm_axis(c->p, axes[k], r, &a))) return st;
        if (ins[a]) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "repeated axis %d", a);
        ins[a] = true;
    }
    rs_dims s = {r, {0}};
    for (int k = 0, j = 0; k < r; k++) s.d[k] = ins[k] ? 1 : x->d[j++];
    return rs_onnx_reshape_to(c, c->in[0], &s);
}

rs_status rs_onnx_h_squeeze(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 2);
    if (st) return st;
    int64_t axes[RS_DIMS_MAX];
    int na;
    if ((st = rs_onnx_get_axes(c, axes, &na))) return st;
    rs_dims xf = rs_onnx_file_shape(c->in[0]);
    const rs_dims *x = &xf;
    bool drop[RS_DIMS_MAX] = {0};
    for (int k = 0; k < x->rank; k++) drop[k] = na < 0 && x->d[k] == 1;
    for (int k = 0; k < na; k++) {
        int a = 0;
        if ((st = rs_onnx_norm_axis(c->p, axes[k], x->rank, &a))) return st;
        if (x->d[a] != 1)
            return rs_onnx_fail(c->p, RS_ERR_SHAPE, "cannot squeeze dimension %d of size %lld", a, (long long)x->d[a]);
        drop[a] = true;
    }
    rs_dims s = {0, {0}};
    for (int k = 0; k < x->rank; k++)
        if (!drop[k]) s.d[s.rank++] = x->d[k];
    return rs_onnx_reshape_to(c, c->in[0], &s);
}

rs_status rs_onnx_h_flatten(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 1);
    if (st) return st;
    int64_t ax = 0; /* the registry gives Flatten's default */
    int axis = 0;
    const rs_dims *x = &c->in[0]->shape;
    if ((st = rs_onnx_attr_int(c->p, "axis", &ax))) return st;
    if (ax == x->rank) axis = x->rank;
    else if ((st = rs_onnx_norm_axis(c->p, ax, x->rank, &axis))) return st;
    rs_dims s = {2, {1, 1}};
    for (int k = 0; k < x->rank; k++) {
        int64_t *d = &s.d[k < axis ? 0 : 1];
        if (x->d[k] == RS_DIM_BATCH) {
            if (*d != 1) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "flattening the batch into other dimensions");
            *d = RS_DIM_BATCH;
        } else if (*d == RS_DIM_BATCH) {
            if (x->d[k] != 1) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "flattening the batch into other dimensions");
        } else {
            *d *= x->d[k];
        }
    }
    return rs_onnx_reshape_to(c, c->in[0], &s);
}

rs_status rs_onnx_h_reshape(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 2, 2);
    if (st) return st;
    int64_t t[RS_DIMS_MAX], allowzero = 0;
    int nt;
    if ((st = rs_onnx_const_ints(c, c->in[1], "the target shape", t, RS_DIMS_MAX, &nt, true))) return st;
    if ((st = rs_onnx_attr_int(c->p, "allowzero", &allowzero))) return st;
    return rs_onnx_reshape_file(c, c->in[0], t, nt, allowzero != 0);
}

/* A Concat of more inputs than an engine op takes (a densenet block's) as a chain of Concats, each
 * joining the one before and the next RS_OP_MAX_IN - 1 inputs: the same values in the same order along
 * the axis. Every link is named after the node, as BatchNormalization's two (import_ops.c). */
static rs_status concat_chain(nctx *c, const rs_op_attrs *a)
{
    const char *saved[RS_OP_MAX_IN];
    memcpy(saved, c->in_names, sizeof saved);
    ival *ins[RS_OP_MAX_IN], acc = {.vid = -1};
    rs_status st = RS_OK;
    for (int k = 0; k < c->nin && !st;) {
        int n = 0;
        if (k) {
            ins[n] = &acc;
            c->in_names[n++] = "the chained Concat";
        }
        for (; n < RS_OP_MAX_IN && k < c->nin; n++, k++) {
            ins[n] = c->in[k];
            c->in_names[n] = c->np->input[k];
        }
        st = rs_onnx_emit(c, RS_OP_CONCAT, a, ins, n);
        rs_onnx_ival_clear(&acc);
        acc = c->res;
        c->res = (ival){.vid = -1}; /* acc is ours now until the next link or the end */
    }
    memcpy(c->in_names, saved, sizeof saved);
    if (st) rs_onnx_ival_clear(&acc);
    else c->res = acc;
    return st;
}

rs_status rs_onnx_h_concat(nctx *c)
{
    imp *p = c->p;
    if (c->nin < 1) return rs_onnx_fail(p, RS_ERR_FORMAT, "needs inputs");
    for (int k = 0; k < c->nin; k++)
        if (!c->in[k]) return rs_onnx_fail(p, RS_ERR_FORMAT, "input %d is missing", k);
    int64_t ax = 0;
    int axis = 0;
    rs_status st;
    if ((st = rs_onnx_attr_int(p, "axis", &ax)) || (st = rs_onnx_norm_axis(p, ax, c->in[0]->shape.rank, &axis))) return st;
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
    rs_op_attrs a = {.axis = axis};
    if (c->nin <= RS_OP_MAX_IN) return rs_onnx_emit(c, RS_OP_CONCAT, &a, c->in, c->nin);
    return concat_chain(c, &a);
}

/* x[starts + steps * i] along each dim into shape os (RS_DIM_BATCH in os: that dim whole). Constants
 * are sliced here keeping their kind (int lists keep the batch they carry); computed values get a
 * SLICE node. Slice and Split both end here. */
static rs_status slice_value(nctx *c, ival *x, const int64_t *starts, const int64_t *steps, const rs_dims *os)
{
    rs_op_attrs a = {.shape = *os};
    memcpy(a.starts, starts, sizeof a.starts);
    memcpy(a.steps, steps, sizeof a.steps);
    if (x->kind == IV_DYN) return rs_onnx_emit(c, RS_OP_SLICE, &a, &x, 1);
    int r = x->shape.rank;
    int64_t n = rs_dims_numel(os, 1);
    if (n < 0 || n > c->p->budget) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "slice result too large");
    c->res = (ival){.kind = x->kind, .shape = *os, .vid = -1};
    if (x->kind == IV_F) c->res.f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    else c->res.i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!c->res.f && !c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
    int64_t sx[RS_DIMS_MAX], idx[RS_DIMS_MAX] = {0}, acc = 1;
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
rs_status rs_onnx_h_slice(nctx *c)
{
    imp *p = c->p;
    rs_status st = rs_onnx_need_inputs(c, 1, 5);
    if (st) return st;
    ival *x = c->in[0];
    int r = x->shape.rank;
    int64_t s[RS_DIMS_MAX], e[RS_DIMS_MAX], ax[RS_DIMS_MAX], sp[RS_DIMS_MAX];
    int ns, ne, na = -1, nsp = -1;
    if (p->opset < 10) {
        if ((st = rs_onnx_attr_ints(p, "starts", s, RS_DIMS_MAX, &ns)) || (st = rs_onnx_attr_ints(p, "ends", e, RS_DIMS_MAX, &ne)) ||
            (st = rs_onnx_attr_ints(p, "axes", ax, RS_DIMS_MAX, &na)))
            return st;
    } else {
        if (c->nin < 3 || !c->in[1] || !c->in[2]) return rs_onnx_fail(p, RS_ERR_FORMAT, "needs starts and ends");
        if ((st = rs_onnx_const_ints(c, c->in[1], "starts", s, RS_DIMS_MAX, &ns, false)) ||
            (st = rs_onnx_const_ints(c, c->in[2], "ends", e, RS_DIMS_MAX, &ne, true)))
            return st;
        if (c->nin > 3 && c->in[3] && (st = rs_onnx_const_ints(c, c->in[3], "axes", ax, RS_DIMS_MAX, &na, false))) return st;
        if (c->nin > 4 && c->in[4] && (st = rs_onnx_const_ints(c, c->in[4], "steps", sp, RS_DIMS_MAX, &nsp, false))) return st;
    }
    if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
        return rs_onnx_fail(p, RS_ERR_FORMAT, "starts, ends, axes and steps differ in length");
    int64_t starts[RS_DIMS_MAX] = {0}, steps[RS_DIMS_MAX];
    rs_dims os = x->shape;
    bool seen[RS_DIMS_MAX] = {0};
    for (int i = 0; i < RS_DIMS_MAX; i++) steps[i] = 1;
    for (int k = 0; k < ns; k++) {
        int a = 0;
        if ((st = rs_onnx_norm_axis(p, na >= 0 ? ax[k] : k, r, &a))) return st;
        if (seen[a]) return rs_onnx_fail(p, RS_ERR_FORMAT, "axis %d sliced twice", a);
        seen[a] = true;
        int64_t step = nsp >= 0 ? sp[k] : 1, d = x->shape.d[a], b = s[k], en = e[k];
        if (step == 0) return rs_onnx_fail(p, RS_ERR_FORMAT, "step 0 on axis %d", a);
        if (d == RS_DIM_BATCH) {
            /* only x[0:] (ends INT64_MAX, or the batch itself) keeps rows as samples */
            if (b != 0 || step != 1 || (en != RS_DIM_BATCH && en < (int64_t)1 << 31))
                return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "slicing the batch dimension (axis %d)", a);
            continue;
        }
        if (rs_onnx_batch_factor(en)) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "a slice end that is the batch size");
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
        if (x->shape.d[i] == RS_DIM_BATCH) os.d[i] = RS_DIM_BATCH;
    return slice_value(c, x, starts, steps, &os);
}

/* Split into n_output parts along axis: sizes from the 'split' attribute (before opset 13), the second
 * input (13 on), or equal parts (num_outputs at 18, or the number of outputs), the last one smaller. */
rs_status rs_onnx_h_split(nctx *c)
{
    imp *p = c->p;
    rs_status st = rs_onnx_need_inputs(c, 1, 2);
    if (st) return st;
    ival *x = c->in[0];
    int64_t ax = 0, sizes[RS_ONNX_MAX_OUTS], nout = (int64_t)c->np->n_output, num = 0;
    int axis = 0, ns = -1;
    if ((st = rs_onnx_attr_int(p, "axis", &ax)) || (st = rs_onnx_norm_axis(p, ax, x->shape.rank, &axis)) ||
        (st = rs_onnx_attr_int(p, "num_outputs", &num)))
        return st;
    if (nout < 1 || nout > RS_ONNX_MAX_OUTS)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "%lld outputs (at most %d)", (long long)nout, RS_ONNX_MAX_OUTS);
    if (num && num != nout) return rs_onnx_fail(p, RS_ERR_FORMAT, "num_outputs %lld but %lld outputs", (long long)num, (long long)nout);
    int64_t d = x->shape.d[axis];
    if (d == RS_DIM_BATCH) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "splitting the batch dimension (axis %d)", axis);
    if (p->opset < 13) {
        if ((st = rs_onnx_attr_ints(p, "split", sizes, RS_ONNX_MAX_OUTS, &ns))) return st;
    } else if (c->nin > 1 && c->in[1]) {
        if ((st = rs_onnx_const_ints(c, c->in[1], "split", sizes, RS_ONNX_MAX_OUTS, &ns, false))) return st;
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
        int64_t starts[RS_DIMS_MAX] = {0}, steps[RS_DIMS_MAX];
        for (int i = 0; i < RS_DIMS_MAX; i++) steps[i] = 1;
        starts[axis] = at;
        rs_dims os = x->shape;
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

/* Where(cond, x, y): on shape lists elementwise here (the batch passes through), else a node or a
 * fold. torch writes it for masked_fill (causal masks) and for the -1 of expand shapes. */
rs_status rs_onnx_h_where(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 3, 3);
    if (st) return st;
    ival *cd = c->in[0], *x = c->in[1], *y = c->in[2];
    int64_t n[3];
    bool lists = true;
    for (int k = 0; k < 3; k++) {
        n[k] = rs_dims_numel(&c->in[k]->shape, 1);
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
            if (rs_onnx_batch_factor(q)) return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "a condition that is the batch size");
            c->res.i[k] = q ? x->i[n[1] == 1 ? 0 : k] : y->i[n[2] == 1 ? 0 : k];
        }
        return RS_OK;
    }
    rs_op_attrs a = {0};
    return rs_onnx_emit(c, RS_OP_WHERE, &a, c->in, 3);
}

/* Expand(x, shape): numpy broadcasting of x against shape, which may hold the batch (x.expand(B, ...)). */
rs_status rs_onnx_h_expand(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 2, 2);
    if (st) return st;
    int64_t d[RS_DIMS_MAX];
    int nd;
    if ((st = rs_onnx_const_ints(c, c->in[1], "the shape", d, RS_DIMS_MAX, &nd, true))) return st;
    rs_op_attrs a = {.shape = {nd, {0}}};
    for (int k = 0; k < nd; k++) {
        if (rs_onnx_batch_factor(d[k]) > 1)
            return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED, "expanding to the batch times %lld", (long long)rs_onnx_batch_factor(d[k]));
        if (d[k] < 0 && d[k] != RS_DIM_BATCH)
            return rs_onnx_fail(c->p, RS_ERR_FORMAT, "negative dimension %lld in the shape", (long long)d[k]);
        a.shape.d[k] = d[k];
    }
    return rs_onnx_emit(c, RS_OP_EXPAND, &a, c->in, 1);
}

/* Range(start, limit, delta) on constants: torch's arange, e.g. positions for a causal mask. */
rs_status rs_onnx_h_range(nctx *c)
{
    imp *p = c->p;
    rs_status st = rs_onnx_need_inputs(c, 3, 3);
    if (st) return st;
    bool ints = true, over_batch = false;
    double v[3];
    for (int k = 0; k < 3; k++) {
        const ival *x = c->in[k];
        if (!rs_onnx_is_const(x) || rs_dims_numel(&x->shape, 1) != 1)
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input %d must be a scalar constant (known at import)", k);
        if (x->kind == IV_I && k == 1 && x->i[0] == RS_DIM_BATCH) {
            over_batch = true; /* torch's as_strided: import_strided.c */
            continue;
        }
        if (x->kind == IV_I && rs_onnx_batch_factor(x->i[0]))
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "a range over the batch size");
        ints &= x->kind == IV_I;
        v[k] = x->kind == IV_I ? (double)x->i[0] : (double)x->f[0];
    }
    if (over_batch) {
        if (!ints) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "a range over the batch size in floats");
        return rs_onnx_batch_range(c, c->in[0]->i[0], c->in[2]->i[0]);
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
rs_status rs_onnx_h_trilu(nctx *c)
{
    rs_status st = rs_onnx_need_inputs(c, 1, 2);
    if (st) return st;
    int64_t up = 0, kk[1] = {0}; /* upper: the registry's default */
    int nk = 0;
    if ((st = rs_onnx_attr_int(c->p, "upper", &up))) return st;
    if (up != 0 && up != 1) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "upper must be 0 or 1, not %lld", (long long)up);
    if (c->nin > 1 && c->in[1] && (st = rs_onnx_const_ints(c, c->in[1], "k", kk, 1, &nk, false))) return st;
    if (c->nin > 1 && c->in[1] && nk != 1) return rs_onnx_fail(c->p, RS_ERR_FORMAT, "k must be one value");
    rs_op_attrs a = {.upper = up != 0, .k = kk[0]};
    if (llabs(a.k) > (1LL << 40)) a.k = a.k < 0 ? -(1LL << 40) : 1LL << 40;
    return rs_onnx_emit(c, RS_OP_TRILU, &a, c->in, 1);
}
