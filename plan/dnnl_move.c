/* The data-movement ops oneDNN runs as reorders (issue 26): a Slice (Split's parts, a channel range)
 * is a reorder from a sub-memory view of its input, which may be blocked (a block-aligned channel
 * range is read in place; otherwise the input is first reordered to nchw in the scratch region); a
 * Transpose (a channel shuffle's (0, 2, 1, 3, 4)) is a reorder into the output's memory described
 * with the input's dims and permuted strides. Both write their output plain. A Slice with a step
 * other than 1 stays the engine's. */
#include <string.h>

#include "dnnl_internal.h"

/* ds with the batch B. */
static void full_dims(const rs_dims *ds, int B, dnnl_dims_t out)
{
    for (int i = 0; i < ds->rank; i++) out[i] = ds->d[i] == RS_DIM_BATCH ? B : ds->d[i];
}

bool rs_pdnnl_is_move(const rs_pnode *n)
{
    if (n->kind != RS_PK_OP || (n->op != RS_OP_SLICE && n->op != RS_OP_TRANSPOSE)) return false;
    const rs_dims *x = &n->ds[0];
    if (n->nin != 1 || n->cin[0] >= 0 || n->in[0] < 0 || rs_dims_batch_pos(&n->dout) < 0 || x->rank != n->dout.rank ||
        x->rank > 6)
        return false;
    for (int i = 0; i < x->rank && n->op == RS_OP_SLICE; i++) {
        bool whole = n->a.shape.d[i] == RS_DIM_BATCH; /* the batch is only ever taken whole */
        if (!whole && (n->a.steps[i] != 1 || n->a.starts[i] < 0 || n->a.starts[i] + n->dout.d[i] > x->d[i])) return false;
    }
    return true;
}

bool rs_pdnnl_move_reads_blocked(const rs_pnode *n, int j, const int64_t *chw)
{
    const rs_dims *d = &n->ds[j];
    return n->op == RS_OP_SLICE && d->rank == 4 && d->d[0] == RS_DIM_BATCH && d->d[1] == chw[0] && d->d[2] == chw[1] &&
           d->d[3] == chw[2];
}

/* The reorder from `from` to `to` into *r (attributes: the scratchpad is the user's). */
static rs_status reorder(rs_plan *p, const rs_pnode *n, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                         dnnl_primitive_desc_t *rpd, dnnl_primitive_t *r, rs_err *err)
{
    dnnl_primitive_attr_t attr;
    DTRY(dnnl_primitive_attr_create(&attr), "attributes");
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(rpd, from, p->dn->eng, to, p->dn->eng, attr);
    dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_success) s = dnnl_primitive_create(r, *rpd);
    if (s != dnnl_success) return rs_pdnnl_fail(err, s, "reorder", n);
    return RS_OK;
}

rs_status rs_pdnnl_make_move(rs_plan *p, int i, int B, rs_pdnnl_prim *d, rs_err *err)
{
    const rs_pnode *n = &p->nodes[i];
    int r = n->dout.rank;
    dnnl_dims_t xd, od;
    full_dims(&n->ds[0], B, xd);
    full_dims(&n->dout, B, od);
    rs_status st = RS_OK;
    int v = rs_plan_root(p, n->in[0]);
    if (v > 0 && p->values[v].layout == 1) st = rs_pdnnl_value_md(p, n, v, r, xd, B, &d->user_src, err);
    else DTRY(dnnl_memory_desc_init_by_strides(&d->user_src, r, xd, dnnl_f32, NULL), "src desc");
    if (st) return st;
    DTRY(dnnl_memory_desc_init_by_strides(&d->user_dst, r, od, dnnl_f32, NULL), "dst desc");
    dnnl_memory_desc_t from = d->user_src, to = d->user_dst;
    if (n->op == RS_OP_TRANSPOSE) {
        /* output dim k is input dim perm[k]: the output's plain strides, given to the input's dims */
        dnnl_dims_t os, ts;
        for (int k = r - 1; k >= 0; k--) os[k] = k == r - 1 ? 1 : os[k + 1] * od[k + 1];
        for (int k = 0; k < r; k++) ts[n->a.perm[k]] = os[k];
        DTRY(dnnl_memory_desc_init_by_strides(&to, r, xd, dnnl_f32, ts), "dst desc");
    } else {
        dnnl_dims_t off;
        for (int k = 0; k < r; k++) off[k] = n->a.shape.d[k] == RS_DIM_BATCH ? 0 : n->a.starts[k];
        if (dnnl_memory_desc_init_submemory(&from, &d->user_src, od, off) != dnnl_success) {
            /* a channel range that does not start at a block of the input's layout: nchw first */
            d->src = d->user_src;
            DTRY(dnnl_memory_desc_init_by_strides(&d->src, r, xd, dnnl_f32, NULL), "src desc");
            dnnl_primitive_desc_t cpd;
            DTRY(dnnl_reorder_primitive_desc_create(&cpd, &d->user_src, p->dn->eng, &d->src, p->dn->eng, NULL), "reorder");
            dnnl_status_t s = dnnl_primitive_create(&d->src_cvt, cpd);
            dnnl_primitive_desc_destroy(cpd);
            if (s != dnnl_success) return rs_pdnnl_fail(err, s, "reorder", n);
            d->cvt_bytes = (dnnl_memory_desc_get_size(&d->src) + 63) / 64 * 64;
            DTRY(dnnl_memory_desc_init_submemory(&from, &d->src, od, off), "sub-memory");
            DTRY(dnnl_memory_create(&d->m.cvt, &d->src, p->dn->eng, DNNL_MEMORY_NONE), "memory");
        }
    }
    if ((st = reorder(p, n, &from, &to, &d->pd, &d->prim, err))) return st;
    d->dst = to;
    d->pad_bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(d->pd, dnnl_query_scratchpad_md, 0));
    /* src: the input's memory, wei: the view the reorder reads (of src or of its nchw copy) */
    DTRY(dnnl_memory_create(&d->m.src, &d->user_src, p->dn->eng, DNNL_MEMORY_NONE), "memory");
    DTRY(dnnl_memory_create(&d->m.wei, &from, p->dn->eng, DNNL_MEMORY_NONE), "memory");
    DTRY(dnnl_memory_create(&d->m.dst, &to, p->dn->eng, DNNL_MEMORY_NONE), "memory");
    DTRY(dnnl_memory_create(&d->m.pad, dnnl_primitive_desc_query_md(d->pd, dnnl_query_scratchpad_md, 0), p->dn->eng,
                            DNNL_MEMORY_NONE),
         "memory");
    d->B = B;
    return RS_OK;
}

dnnl_status_t rs_pdnnl_exec_move(rs_plan *p, const rs_pnode *n, rs_pdnnl_prim *d, const void *x, char *scratch)
{
    /* [nchw copy of the input][scratchpad] */
    void *in = rs_plan_value_ptr(p, n->in[0], x);
    dnnl_status_t s = dnnl_success;
    dnnl_memory_set_data_handle(d->m.pad, scratch + d->cvt_bytes);
    if (d->src_cvt) {
        dnnl_memory_set_data_handle(d->m.src, in);
        dnnl_memory_set_data_handle(d->m.cvt, scratch);
        dnnl_exec_arg_t ca[] = {{DNNL_ARG_FROM, d->m.src}, {DNNL_ARG_TO, d->m.cvt}};
        s = dnnl_primitive_execute(d->src_cvt, p->dn->strm, 2, ca);
        in = scratch;
    }
    dnnl_memory_set_data_handle(d->m.wei, in);
    dnnl_memory_set_data_handle(d->m.dst, rs_plan_value_ptr(p, n->out, x));
    dnnl_exec_arg_t ra[] = {{DNNL_ARG_FROM, d->m.wei}, {DNNL_ARG_TO, d->m.dst}, {DNNL_ARG_SCRATCHPAD, d->m.pad}};
    if (s == dnnl_success) s = dnnl_primitive_execute(d->prim, p->dn->strm, 3, ra);
    return s;
}
