/* The elementwise and data-movement nodes oneDNN runs (issue 26): a standalone activation (eltwise),
 * an add of two values and an imported Binary (binary, src1 broadcast: a squeeze-excite's (N, C, 1, 1)
 * scale times its (N, C, H, W) value), and a Concat of any number of values (concat). They take
 * their inputs in whatever layout those hold, so a value between convolutions stays in the blocked
 * layout its producer chose instead of being reordered to nchw for the engine's kernels and back
 * (on mobilenet_v3_small each squeeze-excite Mul cost two such reorders). An activation, add or
 * binary writes its first input's layout, a concat of blocked values along channels the one oneDNN
 * picks; where the output must be plain (an engine op or the caller reads it) and the input is not,
 * the result goes to the scratch region in the input's layout and a reorder makes the plain value.
 * Slice and Transpose are reorders (dnnl_move.c). The shapes oneDNN cannot take (a Binary whose first input is the broadcast one and that does not
 * commute, a broadcast oneDNN does not do, an op without the batch) stay the engine's. */
#include <stdlib.h>
#include <string.h>

#include "dnnl_internal.h"

/* The ops oneDNN's binary primitive does, as rs_binary_op. */
static dnnl_alg_kind_t bin_alg(int op)
{
    switch (op) {
    case RS_BINARY_ADD: return dnnl_binary_add;
    case RS_BINARY_SUB: return dnnl_binary_sub;
    case RS_BINARY_MUL: return dnnl_binary_mul;
    case RS_BINARY_DIV: return dnnl_binary_div;
    default: return dnnl_alg_kind_undef;
    }
}

/* ds with the batch B and left-padded with ones to rank r (numpy's alignment). */
static void dims_at(const rs_dims *ds, int r, int B, dnnl_dims_t out)
{
    for (int i = 0; i < r; i++) out[i] = 1;
    for (int i = 0; i < ds->rank; i++) out[r - ds->rank + i] = ds->d[i] == RS_DIM_BATCH ? B : ds->d[i];
}

/* A Binary's input order for oneDNN: src0 must have the output's shape, src1 each dim equal or 1.
 * *swap: the inputs exchanged (add and mul commute). False when neither order fits. */
static bool binary_order(const rs_pnode *n, bool *swap)
{
    int r = n->dout.rank;
    if (r > 6 || n->ds[0].rank > r || n->ds[1].rank > r) return false;
    for (int k = 0; k < 2; k++) {
        dnnl_dims_t a, b, o;
        dims_at(&n->ds[k], r, 1, a);
        dims_at(&n->ds[1 - k], r, 1, b);
        dims_at(&n->dout, r, 1, o);
        bool ok = n->cin[k] < 0; /* src0 is a value */
        for (int i = 0; i < r && ok; i++) ok = a[i] == o[i] && (b[i] == o[i] || b[i] == 1);
        if (ok && (k == 0 || n->a.sub == RS_BINARY_ADD || n->a.sub == RS_BINARY_MUL)) {
            *swap = k == 1;
            return true;
        }
    }
    return false;
}

bool rs_pdnnl_is_op(const rs_pnode *n)
{
    if (rs_pdnnl_is_move(n)) return true;
    if (n->kind == RS_PK_ACT) return rs_pdnnl_elt_alg(n->act) != dnnl_alg_kind_undef;
    if (n->kind == RS_PK_ADD) return true;
    if (n->kind != RS_PK_OP || rs_dims_batch_pos(&n->dout) < 0) return false;
    bool swap;
    if (n->op == RS_OP_BINARY) return n->nin == 2 && bin_alg(n->a.sub) != dnnl_alg_kind_undef && binary_order(n, &swap);
    if (n->op != RS_OP_CONCAT || n->nin < 1 || n->dout.rank > 6) return false;
    for (int j = 0; j < n->nin; j++)
        if (n->cin[j] >= 0 || n->in[j] < 0 || n->ds[j].rank != n->dout.rank) return false;
    return true;
}

/* (N, C, H, W) with the batch first: a shape a blocked layout may hold. */
static bool nchw4(const rs_dims *d) { return d->rank == 4 && d->d[0] == RS_DIM_BATCH; }

bool rs_pdnnl_op_reads_blocked(const rs_plan *p, const rs_pnode *n, int j, const int64_t *chw)
{
    (void)p;
    if (n->kind == RS_PK_ACT || n->kind == RS_PK_ADD) return true;
    if (rs_pdnnl_is_move(n)) return rs_pdnnl_move_reads_blocked(n, j, chw);
    return nchw4(&n->ds[j]) && n->ds[j].d[1] == chw[0] && n->ds[j].d[2] == chw[1] && n->ds[j].d[3] == chw[2];
}

static bool blocked(const rs_plan *p, int v) { return v > 0 && p->values[rs_plan_root(p, v)].layout == 1; }

/* The input whose layout the output takes (activation, add, binary), -1 for a concat. */
static int lead_input(const rs_plan *p, const rs_pnode *n)
{
    if (n->kind == RS_PK_ACT) return 0;
    if (n->kind == RS_PK_ADD) return !blocked(p, n->in[0]) && blocked(p, n->in[1]) ? 1 : 0;
    bool swap = false;
    if (n->op == RS_OP_BINARY) return binary_order(n, &swap) && swap ? 1 : 0;
    return -1;
}

bool rs_pdnnl_op_writes_blocked(const rs_plan *p, const rs_pnode *n)
{
    if (rs_pdnnl_is_move(n)) return false;
    int k = lead_input(p, n);
    if (k >= 0) return blocked(p, n->in[k]) && (n->kind != RS_PK_OP || nchw4(&n->dout));
    int axis = n->a.axis < 0 ? n->a.axis + n->dout.rank : n->a.axis;
    if (!nchw4(&n->dout) || axis != 1) return false;
    for (int j = 0; j < n->nin; j++)
        if (!blocked(p, n->in[j])) return false;
    return true;
}

/* Input j's descriptor at batch B: its value's blocked layout, else plain over `dims` (rank r). */
static rs_status in_md(rs_plan *p, const rs_pnode *n, int j, int r, const dnnl_dims_t dims, int B, dnnl_memory_desc_t *md,
                       rs_err *err)
{
    if (n->in[j] >= 0 && blocked(p, n->in[j])) return rs_pdnnl_value_md(p, n, n->in[j], r, dims, B, md, err);
    DTRY(dnnl_memory_desc_init_by_strides(md, r, dims, dnnl_f32, NULL), "src desc");
    return RS_OK;
}

/* The memory objects of inputs 1.. (a binary's src1, a concat's others) and their descriptors. */
static rs_status extra_inputs(rs_plan *p, const rs_pnode *n, rs_pdnnl_prim *d, const dnnl_memory_desc_t *mds, int cnt,
                              rs_err *err)
{
    d->xs = calloc((size_t)cnt, sizeof *d->xs);
    if (!d->xs) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
    d->nx = cnt;
    for (int j = 0; j < cnt; j++) DTRY(dnnl_memory_create(&d->xs[j], &mds[j], p->dn->eng, DNNL_MEMORY_NONE), "memory");
    return RS_OK;
}

/* A binary primitive over d->user_src (also its dst) and src1 (x1). oneDNN's jit kernel wants src1
 * in src0's layout: where the two differ (the squeeze-excite's scale written nhwc by an int8 1x1 conv,
 * its value nChw8c by a depthwise one) it has only its reference kernel (9-23 ms a Mul at batch 64
 * on mobilenet_v3_small, AVX2), so src1 is then asked in src0's layout, and a reorder of src1 (the (N, C, 1, 1) scale: small) into the scratch region feeds it. */
static rs_status binary_pd(rs_plan *p, const rs_pnode *n, rs_pdnnl_prim *d, dnnl_alg_kind_t alg,
                           dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *x1, rs_err *err)
{
    dnnl_binary_desc_t bd;
    DTRY(dnnl_binary_desc_init(&bd, alg, &d->user_src, x1, &d->user_src), "binary");
    DTRY(dnnl_primitive_desc_create(&d->pd, &bd, attr, p->dn->eng, NULL), "primitive descriptor");
    const char *impl = NULL;
    dnnl_primitive_desc_query(d->pd, dnnl_query_impl_info_str, 0, &impl);
    if (!impl || strncmp(impl, "ref", 3) != 0) return RS_OK;
    /* src0's layout by name (oneDNN 2.6's binary leaves a src1 of "any" layout as it is) */
    static const dnnl_format_tag_t tags[] = {dnnl_nChw16c, dnnl_nChw8c, dnnl_nhwc, dnnl_nchw};
    dnnl_memory_desc_t like, w1;
    int t = 0;
    for (; x1->ndims == 4 && t < (int)(sizeof tags / sizeof tags[0]); t++)
        if (dnnl_memory_desc_init_by_tag(&like, 4, d->user_src.dims, dnnl_f32, tags[t]) == dnnl_success &&
            dnnl_memory_desc_equal(&like, &d->user_src))
            break;
    if (x1->ndims != 4 || t == (int)(sizeof tags / sizeof tags[0])) return RS_OK;
    DTRY(dnnl_memory_desc_init_by_tag(&w1, 4, x1->dims, dnnl_f32, tags[t]), "src desc");
    dnnl_primitive_desc_t pd2;
    DTRY(dnnl_binary_desc_init(&bd, alg, &d->user_src, &w1, &d->user_src), "binary");
    if (dnnl_primitive_desc_create(&pd2, &bd, attr, p->dn->eng, NULL) != dnnl_success) return RS_OK;
    const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd2, dnnl_query_src_md, 1);
    dnnl_primitive_desc_t rpd;
    if (dnnl_memory_desc_equal(want, x1) ||
        dnnl_reorder_primitive_desc_create(&rpd, x1, p->dn->eng, want, p->dn->eng, NULL) != dnnl_success) {
        dnnl_primitive_desc_destroy(pd2);
        return RS_OK;
    }
    dnnl_status_t s = dnnl_primitive_create(&d->src_cvt, rpd);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_primitive_desc_destroy(d->pd);
    d->pd = pd2;
    d->src = *want;
    d->cvt_bytes = (dnnl_memory_desc_get_size(want) + 63) / 64 * 64;
    if (s == dnnl_success) s = dnnl_memory_create(&d->m.cvt, want, p->dn->eng, DNNL_MEMORY_NONE);
    if (s != dnnl_success) return rs_pdnnl_fail(err, s, "src1 reorder", n);
    return RS_OK;
}

/* The operation's descriptor (eltwise, binary) or primitive descriptor (concat) for batch B: d->user_src
 * the first input's layout, the other inputs' in xmd, dst the lead input's layout. */
static rs_status op_pd(rs_plan *p, const rs_pnode *n, int B, rs_pdnnl_prim *d, dnnl_primitive_attr_t attr,
                       dnnl_memory_desc_t *xmd, int *nx, rs_err *err)
{
    dnnl_dims_t dims;
    if (n->kind == RS_PK_ACT || n->kind == RS_PK_ADD) {
        int k = lead_input(p, n);
        dims[0] = (dnnl_dim_t)B * p->values[n->out].numel;
        rs_status st = in_md(p, n, k, 1, dims, B, &d->user_src, err);
        if (st) return st;
        if (n->kind == RS_PK_ACT) {
            rs_ppost q = {.kind = RS_PPOST_ELT, .op = n->act, .alpha = n->alpha, .beta = n->beta};
            dnnl_eltwise_desc_t ed;
            DTRY(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, rs_pdnnl_elt_alg(n->act), &d->user_src,
                                                rs_pdnnl_elt_alpha(&q), n->beta),
                 "eltwise");
            DTRY(dnnl_primitive_desc_create(&d->pd, &ed, attr, p->dn->eng, NULL), "primitive descriptor");
            return RS_OK;
        }
        /* the other input: the same logical shape as the lead's, in its own layout */
        const dnnl_memory_desc_t *l = &d->user_src;
        if (blocked(p, n->in[1 - k])) {
            st = rs_pdnnl_value_md(p, n, n->in[1 - k], l->ndims, l->dims, B, &xmd[0], err);
            if (st) return st;
        } else {
            DTRY(dnnl_memory_desc_init_by_strides(&xmd[0], l->ndims, l->dims, dnnl_f32, NULL), "src desc");
        }
        *nx = 1;
        return binary_pd(p, n, d, dnnl_binary_add, attr, &xmd[0], err);
    }
    int r = n->dout.rank;
    dnnl_dims_t od;
    dims_at(&n->dout, r, B, od);
    if (n->op == RS_OP_BINARY) {
        int k = lead_input(p, n);
        dnnl_dims_t a, b;
        dims_at(&n->ds[k], r, B, a);
        dims_at(&n->ds[1 - k], r, B, b);
        rs_status st = in_md(p, n, k, r, a, B, &d->user_src, err);
        if (!st && n->cin[1 - k] < 0) st = in_md(p, n, 1 - k, r, b, B, &xmd[0], err);
        else if (!st) DTRY(dnnl_memory_desc_init_by_strides(&xmd[0], r, b, dnnl_f32, NULL), "src desc");
        if (st) return st;
        *nx = 1;
        return binary_pd(p, n, d, bin_alg(n->a.sub), attr, &xmd[0], err);
    }
    /* concat: every input in its own layout; the output blocked (oneDNN's choice at the plan's
     * batch, the recorded one after) or plain */
    for (int j = 0; j < n->nin; j++) {
        dnnl_dims_t x;
        dims_at(&n->ds[j], r, B, x);
        rs_status st = in_md(p, n, j, r, x, B, j ? &xmd[j - 1] : &d->user_src, err);
        if (st) return st;
    }
    *nx = n->nin - 1;
    dnnl_memory_desc_t dst, *srcs = malloc((size_t)n->nin * sizeof *srcs); /* owned here */
    if (!srcs) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
    srcs[0] = d->user_src;
    for (int j = 1; j < n->nin; j++) srcs[j] = xmd[j - 1];
    rs_status st = RS_OK;
    if (p->values[n->out].layout == 1) st = rs_pdnnl_out_md(p, n, B, od, &dst, err);
    else if (dnnl_memory_desc_init_by_strides(&dst, r, od, dnnl_f32, NULL) != dnnl_success)
        st = rs_err_set(err, RS_ERR_INTERNAL, "plan: node %s: no plain descriptor for its output", n->name);
    int axis = n->a.axis < 0 ? n->a.axis + r : n->a.axis;
    dnnl_status_t s = st ? dnnl_success : dnnl_concat_primitive_desc_create(&d->pd, &dst, n->nin, axis, srcs, attr, p->dn->eng);
    dnnl_memory_desc_t probe;
    if (!st && s == dnnl_success && p->values[n->out].layout == 1 &&
        !rs_pdnnl_md_with_batch(dnnl_primitive_desc_query_md(d->pd, dnnl_query_dst_md, 0), 1, &probe)) {
        /* oneDNN's own choice for a concat of mixed layouts need not keep the batch outermost (capped to
         * AVX2, a densenet block's third Concat link of a plain value and 4-channel values padded to 8):
         * such a value could not be sized per sample, so this concat writes plain memory instead */
        dnnl_primitive_desc_destroy(d->pd);
        d->pd = NULL;
        s = dnnl_memory_desc_init_by_strides(&dst, r, od, dnnl_f32, NULL);
        if (s == dnnl_success) s = dnnl_concat_primitive_desc_create(&d->pd, &dst, n->nin, axis, srcs, attr, p->dn->eng);
    }
    free(srcs);
    if (st) return st;
    if (s != dnnl_success) return rs_pdnnl_fail(err, s, "concat", n);
    return RS_OK;
}

rs_status rs_pdnnl_make_op(rs_plan *p, int i, int B, rs_pdnnl_prim *d, rs_err *err)
{
    if (rs_pdnnl_is_move(&p->nodes[i])) return rs_pdnnl_make_move(p, i, B, d, err);
    const rs_pnode *n = &p->nodes[i];
    dnnl_memory_desc_t xmd[RS_OP_MAX_IN];
    int nx = 0;
    dnnl_primitive_attr_t attr;
    DTRY(dnnl_primitive_attr_create(&attr), "attributes");
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    rs_status st = s == dnnl_success ? op_pd(p, n, B, d, attr, xmd, &nx, err) : rs_pdnnl_fail(err, s, "attributes", n);
    dnnl_primitive_attr_destroy(attr);
    if (st) return st;
    d->dst = *dnnl_primitive_desc_query_md(d->pd, dnnl_query_dst_md, 0);
    if (n->kind == RS_PK_ACT && n->act == RS_UNARY_HARDSIGMOID) {
        /* oneDNN 2.6 has no hardsigmoid: alpha x + beta (d->prim), then a clip to [0, 1] in place (as
         * a post-op of the first, oneDNN runs its reference kernel) */
        dnnl_eltwise_desc_t ed;
        dnnl_primitive_desc_t cpd;
        DTRY(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, dnnl_eltwise_clip, &d->dst, 0.0f, 1.0f), "eltwise");
        DTRY(dnnl_primitive_desc_create(&cpd, &ed, NULL, p->dn->eng, NULL), "primitive descriptor");
        s = dnnl_primitive_create(&d->then, cpd);
        dnnl_primitive_desc_destroy(cpd);
        if (s != dnnl_success) return rs_pdnnl_fail(err, s, "primitive", n);
    }
    if (!d->src_cvt) d->src = d->user_src; /* else src1's layout for the binary (binary_pd) */
    if ((st = rs_pdnnl_keep_out_layout(p, n, B, &d->dst, err))) return st;
    d->pad_bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(d->pd, dnnl_query_scratchpad_md, 0));
    DTRY(dnnl_primitive_create(&d->prim, d->pd), "primitive");
    bool plain_dst = d->dst.format_kind == dnnl_blocked && d->dst.format_desc.blocking.inner_nblks == 0;
    if (p->values[rs_plan_root(p, n->out)].layout == 0 && !plain_dst) {
        /* written in the input's blocked layout into the scratch region, reordered to the plain value */
        dnnl_primitive_desc_t rpd;
        DTRY(dnnl_memory_desc_init_by_strides(&d->user_dst, d->dst.ndims, d->dst.dims, dnnl_f32, NULL), "dst desc");
        DTRY(dnnl_reorder_primitive_desc_create(&rpd, &d->dst, p->dn->eng, &d->user_dst, p->dn->eng, NULL), "output reorder");
        s = dnnl_primitive_create(&d->dst_cvt, rpd);
        dnnl_primitive_desc_destroy(rpd);
        if (s != dnnl_success) return rs_pdnnl_fail(err, s, "output reorder", n);
        d->dcvt_bytes = (dnnl_memory_desc_get_size(&d->dst) + 63) / 64 * 64;
        DTRY(dnnl_memory_create(&d->m.udst, &d->user_dst, p->dn->eng, DNNL_MEMORY_NONE), "memory");
    }
    DTRY(dnnl_memory_create(&d->m.src, &d->user_src, p->dn->eng, DNNL_MEMORY_NONE), "memory");
    DTRY(dnnl_memory_create(&d->m.dst, &d->dst, p->dn->eng, DNNL_MEMORY_NONE), "memory");
    DTRY(dnnl_memory_create(&d->m.pad, dnnl_primitive_desc_query_md(d->pd, dnnl_query_scratchpad_md, 0), p->dn->eng,
                            DNNL_MEMORY_NONE),
         "memory");
    d->B = B;
    return nx ? extra_inputs(p, n, d, xmd, nx, err) : RS_OK;
}

dnnl_status_t rs_pdnnl_exec_op(rs_plan *p, const rs_pnode *n, rs_pdnnl_prim *d, const void *x, char *scratch)
{
    if (rs_pdnnl_is_move(n)) return rs_pdnnl_exec_move(p, n, d, x, scratch);
    int k = lead_input(p, n); /* -1: a concat, whose first input is src 0 */
    dnnl_memory_set_data_handle(d->m.src, rs_plan_value_ptr(p, n->in[k > 0 ? k : 0], x));
    /* [output in the input's layout][scratchpad][a binary's src1 in src0's layout] */
    dnnl_memory_set_data_handle(d->m.dst, d->dst_cvt ? (void *)scratch : (void *)rs_plan_value_ptr(p, n->out, x));
    dnnl_memory_set_data_handle(d->m.pad, scratch + d->dcvt_bytes);
    dnnl_exec_arg_t args[RS_OP_MAX_IN + 3];
    int na = 0;
    if (n->kind == RS_PK_ACT) {
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, d->m.src};
    } else if (k >= 0) { /* binary: src0 the lead input, src1 the other (a value or a constant) */
        int o = 1 - k;
        void *h = n->kind == RS_PK_OP && n->cin[o] >= 0 ? p->tensors[n->cin[o]].data : rs_plan_value_ptr(p, n->in[o], x);
        dnnl_memory_set_data_handle(d->xs[0], h);
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_0, d->m.src};
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_1, d->src_cvt ? d->m.cvt : d->xs[0]};
        if (d->src_cvt) { /* src1 in src0's layout, after the scratchpad */
            dnnl_memory_set_data_handle(d->m.cvt, scratch + d->dcvt_bytes + (d->pad_bytes + 63) / 64 * 64);
            dnnl_exec_arg_t ra[] = {{DNNL_ARG_FROM, d->xs[0]}, {DNNL_ARG_TO, d->m.cvt}};
            dnnl_status_t s = dnnl_primitive_execute(d->src_cvt, p->dn->strm, 2, ra);
            if (s != dnnl_success) return s;
        }
    } else {
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC, d->m.src};
        for (int j = 1; j < n->nin; j++) {
            dnnl_memory_set_data_handle(d->xs[j - 1], rs_plan_value_ptr(p, n->in[j], x));
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + j, d->xs[j - 1]};
        }
    }
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, d->m.dst};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, d->m.pad};
    dnnl_status_t s = dnnl_primitive_execute(d->prim, p->dn->strm, na, args);
    if (s == dnnl_success && d->then) {
        dnnl_exec_arg_t ta[] = {{DNNL_ARG_SRC, d->m.dst}, {DNNL_ARG_DST, d->m.dst}};
        s = dnnl_primitive_execute(d->then, p->dn->strm, 2, ta);
    }
    if (s == dnnl_success && d->dst_cvt) {
        dnnl_memory_set_data_handle(d->m.udst, rs_plan_value_ptr(p, n->out, x));
        dnnl_exec_arg_t ra[] = {{DNNL_ARG_FROM, d->m.dst}, {DNNL_ARG_TO, d->m.udst}};
        s = dnnl_primitive_execute(d->dst_cvt, p->dn->strm, 2, ra);
    }
    return s;
}
