/* The layouts of a plan's values and the memory descriptors oneDNN's primitives take them in (split
 * from dnnl.c): which values may stay in their producer's blocked layout, the descriptor of a value
 * at a batch, a conv's weights, and the eltwise algorithms of the activations a primitive fuses. */
#include <string.h>

#include "dnnl_internal.h"

dnnl_alg_kind_t rs_pdnnl_elt_alg(int op)
{
    switch (op) {
    case RS_UNARY_RELU:
    case RS_UNARY_LEAKYRELU: return dnnl_eltwise_relu;
    case RS_UNARY_TANH: return dnnl_eltwise_tanh;
    case RS_UNARY_GELU: return dnnl_eltwise_gelu_erf;
    case RS_UNARY_GELU_TANH: return dnnl_eltwise_gelu_tanh;
    case RS_UNARY_SIGMOID: return dnnl_eltwise_logistic;
    case RS_UNARY_CLIP: return dnnl_eltwise_clip;
    case RS_UNARY_HARDSWISH: return dnnl_eltwise_hardswish;
    case RS_UNARY_SILU: return dnnl_eltwise_swish; /* x * sigmoid(alpha x), alpha 1 */
    /* oneDNN 2.6 has no hardsigmoid: alpha x + beta (linear), then clip to [0, 1] (append_elt) */
    case RS_UNARY_HARDSIGMOID: return dnnl_eltwise_linear;
    default: return dnnl_alg_kind_undef;
    }
}

/* A conv or inner product takes an activation as a post-op where oneDNN has an eltwise algorithm for
 * it: the fusion pass asks here, so the two cannot disagree. */
bool rs_plan_fusable_act(int op) { return rs_pdnnl_elt_alg(op) != dnnl_alg_kind_undef; }

/* The alpha oneDNN's eltwise wants: relu's negative slope 0 (LeakyRelu keeps its own), swish's 1 for
 * SiLU, the node's own for the rest (clip's bounds). */
float rs_pdnnl_elt_alpha(const rs_ppost *q)
{
    return q->op == RS_UNARY_RELU ? 0.0f : q->op == RS_UNARY_SILU ? 1.0f : q->alpha;
}

dnnl_status_t rs_pdnnl_conv_wmd(const rs_pnode *n, dnnl_data_type_t dt, bool any, dnnl_memory_desc_t *md)
{
    const rs_conv_geom *g = &n->g;
    if (n->group <= 1) {
        dnnl_dims_t w = {g->oc, g->c, g->kh, g->kw};
        return dnnl_memory_desc_init_by_tag(md, 4, w, dt, any ? dnnl_format_tag_any : dnnl_oihw);
    }
    dnnl_dims_t w = {n->group, g->oc / n->group, g->c / n->group, g->kh, g->kw};
    return dnnl_memory_desc_init_by_tag(md, 5, w, dt, any ? dnnl_format_tag_any : dnnl_goihw);
}

/* Layout choice. A value written by a conv or pool (or by an activation, add, binary or concat oneDNN
 * runs on blocked inputs: dnnl_ops.c) and read only by those, convs, pools and inner products
 * (a flatten between them is a view: the inner product takes the 4-d value whole) may stay in the
 * blocked layout its producer's primitive prefers (nChw16c on AVX-512): oneDNN's direct convolutions
 * and pools run on those, and a plain nchw output would push the convolution onto its im2col+gemm
 * path. Everything else (what the engine's ops read, the plan's output, memory shared by an in-place
 * sum) stays plain. The choice is made at the plan's batch, recorded per value (layout, padded size)
 * and made again the same way when a file is loaded. */
/* The (C, H, W) a window node writes. */
static bool out_chw(const rs_pnode *n, int64_t *chw)
{
    if (n->kind != RS_PK_CONV && n->kind != RS_PK_MAXPOOL && n->kind != RS_PK_AVGPOOL) return false;
    chw[0] = n->kind == RS_PK_CONV ? n->g.oc : n->g.c;
    chw[1] = n->g.oh;
    chw[2] = n->g.ow;
    return true;
}

/* The (C, H, W) value v holds, from its writer: a window node's output, an op's (N, C, H, W) output,
 * an activation's or add's input. False when v is not such an image. */
static bool value_chw(const rs_plan *p, int v, int64_t *chw, int depth)
{
    for (int i = 0; i < p->nnodes; i++) {
        const rs_pnode *n = &p->nodes[i];
        if (n->out != v) continue;
        if (out_chw(n, chw)) return true;
        if (n->kind == RS_PK_OP && n->dout.rank == 4 && n->dout.d[0] == RS_DIM_BATCH) {
            memcpy(chw, &n->dout.d[1], 3 * sizeof *chw);
            return true;
        }
        if ((n->kind == RS_PK_ACT || n->kind == RS_PK_ADD) && depth < 64 && n->in[0] > 0)
            return value_chw(p, n->in[0], chw, depth + 1);
        return false;
    }
    return false;
}

/* Whether node n (a live one) may write a blocked value: a window, or an op node oneDNN runs whose
 * lead input is blocked (dnnl_ops.c). */
static bool writes_blockable(const rs_plan *p, const rs_pnode *n)
{
    if (n->kind == RS_PK_CONV || n->kind == RS_PK_MAXPOOL || n->kind == RS_PK_AVGPOOL) return true;
    return rs_pdnnl_is_op(n) && rs_pdnnl_op_writes_blocked(p, n);
}

bool rs_pdnnl_can_block(const rs_plan *p, int v)
{
    /* views of v were bypassed (passes.c): their readers read v; one that is the output makes v's root
     * the output's. A residual sum (passes.c) makes its conv write in place into v's memory, through a
     * value that aliases v: the conv then writes v's layout (out_md takes the root's), and what reads
     * its value reads that layout too. So v's memory, all the values that are it, must be read by
     * windows and inner products only and summed into by convolutions of v's own shape (resnet's
     * residual convs: on plain memory they fell to `gemm:jit` in fp32 and `ref_int8:any` in int8). */
    if (v <= 0 || p->values[v].alias >= 0 || rs_plan_root(p, p->output) == v) return false;
    int readers = 0;
    int64_t chw[3], xc[3];
    bool writer = false;
    for (int i = 0; i < p->nnodes && !writer; i++) writer = p->nodes[i].out == v && writes_blockable(p, &p->nodes[i]);
    bool shaped = writer && value_chw(p, v, chw, 0);
    if (!writer) return false;
    for (int i = 0; i < p->nnodes; i++) {
        const rs_pnode *n = &p->nodes[i];
        for (int j = 0; j < n->npost; j++)
            if (n->post[j].kind == RS_PPOST_SUM && rs_plan_root(p, n->post[j].value) == v &&
                (!shaped || n->kind != RS_PK_CONV || !out_chw(n, xc) || memcmp(xc, chw, sizeof xc)))
                return false;
        for (int j = 0; j < n->nin; j++) {
            if (n->in[j] < 0 || rs_plan_root(p, n->in[j]) != v) continue;
            readers++;
            /* the elementwise and concat nodes oneDNN runs take any layout (dnnl_ops.c) */
            bool ok = (j == 0 && (n->kind == RS_PK_CONV || n->kind == RS_PK_MAXPOOL || n->kind == RS_PK_AVGPOOL ||
                                  (n->kind == RS_PK_LINEAR && n->rows == 1))) ||
                      (shaped && rs_pdnnl_is_op(n) && rs_pdnnl_op_reads_blocked(p, n, j, chw));
            if (!ok) return false;
        }
    }
    return readers > 0;
}

/* md for batch B from the same layout at the plan's batch: only where the batch is the outermost
 * dimension and not blocked, so that nothing but its count changes. */
bool rs_pdnnl_md_with_batch(const dnnl_memory_desc_t *md, int B, dnnl_memory_desc_t *out)
{
    *out = *md;
    if (md->format_kind != dnnl_blocked || md->ndims < 1) return false;
    const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
    for (int i = 0; i < bd->inner_nblks; i++)
        if (bd->inner_idxs[i] == 0) return false;
    for (int i = 1; i < md->ndims; i++)
        if (bd->strides[i] > bd->strides[0]) return false;
    out->dims[0] = B;
    out->padded_dims[0] = B;
    return true;
}

/* The layout a node reads its input in: the value's blocked layout, or plain. */
rs_status rs_pdnnl_value_md(rs_plan *p, const rs_pnode *n, int v, int ndims, const dnnl_dims_t dims, int B,
                          dnnl_memory_desc_t *md, rs_err *err)
{
    v = v > 0 ? rs_plan_root(p, v) : v; /* a value written in place by a residual sum is its root's memory */
    if (v > 0 && p->values[v].layout == 1 && p->dn->vset[v]) {
        if (!rs_pdnnl_md_with_batch(&p->dn->vmd[v], B, md))
            return rs_err_set(err, RS_ERR_UNSUPPORTED, "plan: value %d's layout does not scale with the batch", v);
        return RS_OK;
    }
    if (v > 0 && p->values[v].layout == 1)
        return rs_err_set(err, RS_ERR_FORMAT, "plan: node %s reads value %d before its layout is known", n->name, v);
    DTRY(dnnl_memory_desc_init_by_tag(md, ndims, dims, dnnl_f32, ndims == 4 ? dnnl_nchw : dnnl_nc), "src desc");
    return RS_OK;
}

/* Floats one sample takes in md (batch outermost, padding included). */
dnnl_dim_t rs_pdnnl_per_sample(const dnnl_memory_desc_t *md)
{
    dnnl_memory_desc_t one;
    if (!rs_pdnnl_md_with_batch(md, 1, &one)) return 0;
    return (dnnl_dim_t)(dnnl_memory_desc_get_size(&one) / sizeof(float));
}

/* The dst layout: "any" while the plan's batch decides a blocked value, the recorded one after, plain
 * otherwise. */
rs_status rs_pdnnl_out_md(rs_plan *p, const rs_pnode *n, int B, const dnnl_dims_t dims, dnnl_memory_desc_t *md,
                        rs_err *err)
{
    int v = rs_plan_root(p, n->out); /* a residual sum writes its root's memory, in its layout */
    if (p->values[v].layout == 1 && B == p->batch && !p->dn->vset[v]) {
        DTRY(dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, dnnl_format_tag_any), "dst desc");
        return RS_OK;
    }
    if (p->values[v].layout == 1) {
        if (!p->dn->vset[v] || !rs_pdnnl_md_with_batch(&p->dn->vmd[v], B, md))
            return rs_err_set(err, RS_ERR_UNSUPPORTED, "plan: value %d's layout does not scale with the batch", v);
        return RS_OK;
    }
    DTRY(dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, dnnl_nchw), "dst desc");
    return RS_OK;
}
