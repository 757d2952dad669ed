/* Making a node's oneDNN primitive for a batch (split from dnnl.c): its operation's descriptor in the
 * layouts dnnl_layout.c chose, its post-ops and int8 scales, the reorders around it (a bf16 or s8
 * copy of the input, a plain copy of an output oneDNN runs fast only in its own layout), the memory
 * objects a run binds, and the threads it is made for. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_internal.h"

/* The operation's descriptor for batch B: the input in its value's layout (bf16 nodes: "any", a
 * reorder converts), weights "any", the output as out_md says. */
static rs_status op_desc(rs_plan *p, const rs_pnode *n, int B, int calg, bool own_layout, bool dst_any,
                         dnnl_memory_desc_t *user_src,
                         dnnl_convolution_desc_t *cd, dnnl_inner_product_desc_t *id, dnnl_pooling_desc_t *pd,
                         dnnl_layer_normalization_desc_t *ld, rs_err *err)
{
    dnnl_data_type_t lt = n->prec == RS_PLAN_BF16 ? dnnl_bf16 : n->prec == RS_PLAN_INT8 ? dnnl_s8 : dnnl_f32;
    dnnl_memory_desc_t src, wei, bias, dst;
    rs_status st;
    if (n->kind == RS_PK_LAYERNORM) {
        /* rows of C, plain (what the engine's ops around it read); statistics computed, not kept */
        dnnl_dims_t s = {(dnnl_dim_t)B * (p->values[n->out].numel / n->C), n->C};
        DTRY(dnnl_memory_desc_init_by_tag(user_src, 2, s, dnnl_f32, dnnl_nc), "src desc");
        DTRY(dnnl_layer_normalization_forward_desc_init(ld, dnnl_forward_inference, user_src, NULL, n->eps,
                                                        dnnl_use_scale | dnnl_use_shift),
             "layer normalization");
        return RS_OK;
    }
    if (n->kind == RS_PK_LINEAR) {
        dnnl_dims_t s = {(dnnl_dim_t)B * n->rows, n->I}, w = {n->O, n->I}, b = {n->O},
                    d = {(dnnl_dim_t)B * n->rows, n->O};
        int v = n->in[0] > 0 ? rs_plan_root(p, n->in[0]) : n->in[0];
        bool blocked = v > 0 && p->values[v].layout == 1;
        if (blocked) {
            /* the 4-d value of a conv or pool, whole, seen as the (B, P) matrix its bytes are: each
             * sample's P floats (padding included) lie together in the value's layout. As a 4-d
             * product oneDNN 2.6 has only gemm:jit here (bf16: 0.05 ms for Fashion's 1568 > 10 at
             * batch 64, fp32 0.017), as a matrix its brgemm kernels; the weights are laid out the
             * value's way once (finalize: blocked_weights) */
            st = rs_pdnnl_value_md(p, n, v, 4, s, B, user_src, err);
            if (st) return st;
            dnnl_dims_t s2 = {(dnnl_dim_t)B, rs_pdnnl_per_sample(user_src)}, w2 = {n->O, s2[1]};
            DTRY(dnnl_memory_desc_init_by_tag(user_src, 2, s2, dnnl_f32, dnnl_nc), "src desc");
            DTRY(dnnl_memory_desc_init_by_tag(&src, 2, s2, lt, dnnl_nc), "src desc");
            DTRY(dnnl_memory_desc_init_by_tag(&wei, 2, w2, lt, dnnl_format_tag_any), "weights desc");
        } else {
            st = rs_pdnnl_value_md(p, n, v, 2, s, B, user_src, err);
            if (st) return st;
            DTRY(dnnl_memory_desc_init_by_tag(&src, 2, s, lt, dnnl_nc), "src desc");
            DTRY(dnnl_memory_desc_init_by_tag(&wei, 2, w, lt, dnnl_format_tag_any), "weights desc");
        }
        DTRY(dnnl_memory_desc_init_by_tag(&bias, 1, b, dnnl_f32, dnnl_x), "bias desc");
        DTRY(dnnl_memory_desc_init_by_tag(&dst, 2, d, dnnl_f32, dnnl_nc), "dst desc");
        DTRY(dnnl_inner_product_forward_desc_init(id, dnnl_forward_inference, &src, &wei, n->b >= 0 ? &bias : NULL,
                                                  &dst),
             "inner product");
        return RS_OK;
    }
    const rs_conv_geom *g = &n->g;
    dnnl_dims_t s = {B, g->c, g->h, g->w};
    dnnl_dims_t d = {B, n->kind == RS_PK_CONV ? g->oc : g->c, g->oh, g->ow};
    dnnl_dims_t strides = {g->sh, g->sw}, pl = {g->ph, g->pw};
    /* the end padding: symmetric as the engine's windows (oneDNN floors (h + 2p - k)/s + 1 the same
     * way), or an imported window's own (pads begin != end: oneDNN takes padding_l and padding_r) */
    dnnl_dims_t pr = {rs_plan_pad_end(g->h, g->kh, g->sh, g->ph, g->oh), rs_plan_pad_end(g->w, g->kw, g->sw, g->pw, g->ow)};
    if ((st = rs_pdnnl_value_md(p, n, n->in[0], 4, s, B, user_src, err)) || (st = rs_pdnnl_out_md(p, n, B, d, &dst, err))) return st;
    src = *user_src;
    if (n->kind == RS_PK_CONV) {
        /* own_layout (fp32): the input as its value holds it, no reorder; rs_pdnnl_make_prim keeps that only when
         * oneDNN has a jit kernel for it. A plain (caller's) input goes to the direct "first
         * convolution" kernel (nchw in, nChw16c out), told its output layout so that the choice does
         * not hang on which primitives this process made before. Otherwise "any": a producer with 8
         * output channels chose nChw8c, and a 16-channel convolution reading that has only oneDNN's
         * reference kernel (ref:any, 600 ms a batch of 64 on the tutorial's CNN); a reorder into the
         * layout it prefers costs far less. */
        bool plain_in = !(n->in[0] > 0 && p->values[rs_plan_root(p, n->in[0])].layout == 1);
        /* a bf16 conv over an image's few channels: its bf16 copy stays nchw for oneDNN's bf16 "first
         * convolution" kernel (in "any" layout it is brgconv on nhwc: 0.43 ms against 0.35 for the
         * SimpleCNN's at batch 64) */
        bool image16 = n->prec == RS_PLAN_BF16 && plain_in && g->c < 4 && n->group == 1;
        if ((own_layout || image16) && p->values[n->out].layout == 1 && B == p->batch && !p->dn->vset[n->out] &&
            plain_in && g->oc % 8 == 0)
            DTRY(dnnl_memory_desc_init_by_tag(&dst, 4, d, dnnl_f32, g->oc % 16 == 0 ? dnnl_nChw16c : dnnl_nChw8c),
                 "dst desc");
        if (!own_layout)
            DTRY(dnnl_memory_desc_init_by_tag(&src, 4, s, lt, image16 ? dnnl_nchw : dnnl_format_tag_any), "src desc");
        if (dst_any) DTRY(dnnl_memory_desc_init_by_tag(&dst, 4, d, dnnl_f32, dnnl_format_tag_any), "dst desc");
        dnnl_dims_t b = {g->oc};
        DTRY(rs_pdnnl_conv_wmd(n, lt, true, &wei), "weights desc");
        DTRY(dnnl_memory_desc_init_by_tag(&bias, 1, b, dnnl_f32, dnnl_x), "bias desc");
        dnnl_alg_kind_t alg = calg == RS_PCONV_WINOGRAD ? dnnl_convolution_winograd : dnnl_convolution_direct;
        DTRY(dnnl_convolution_forward_desc_init(cd, dnnl_forward_inference, alg, &src, &wei,
                                                n->b >= 0 ? &bias : NULL, &dst, strides, pl, pr),
             "convolution");
        return RS_OK;
    }
    dnnl_dims_t k = {g->kh, g->kw};
    /* pools read f32 whatever the plan's precision: nothing to gain from a copy */
    DTRY(dnnl_pooling_forward_desc_init(pd, dnnl_forward_inference,
                                        n->kind == RS_PK_MAXPOOL ? dnnl_pooling_max
                                        : n->avg_exclude            ? dnnl_pooling_avg_exclude_padding
                                                                    : dnnl_pooling_avg_include_padding,
                                        user_src, &dst, strides, k, pl, pr),
         "pooling");
    return RS_OK;
}

rs_status rs_pdnnl_keep_out_layout(rs_plan *p, const rs_pnode *n, int B, const dnnl_memory_desc_t *dst, rs_err *err)
{
    if (p->values[n->out].layout == 1 && B == p->batch && !p->dn->vset[n->out]) {
        /* the layout the primitive chose for its output at the plan's batch: the value's from now on */
        size_t bytes = dnnl_memory_desc_get_size(dst), per = (bytes + 4 * (size_t)B - 1) / (4 * (size_t)B);
        rs_pvalue *v = &p->values[n->out];
        dnnl_memory_desc_t probe;
        if (!rs_pdnnl_md_with_batch(dst, 1, &probe))
            return rs_err_set(err, RS_ERR_UNSUPPORTED, "plan: oneDNN chose a layout for node %s's output that does not "
                              "scale with the batch", n->name);
        if (v->padded == 0) v->padded = (int64_t)per;
        else if ((int64_t)per > v->padded)
            return rs_err_set(err, RS_ERR_FORMAT,
                              "plan: node %s's output takes %zu bytes in oneDNN's layout here, the file planned %lld; "
                              "compile the model again here",
                              n->name, bytes, (long long)v->padded * 4 * B);
        p->dn->vmd[n->out] = *dst;
        p->dn->vset[n->out] = 1;
    }
    return RS_OK;
}

/* Multiply-adds of node n at batch B, for choosing its threads: a layer norm's four operations a
 * value, a pool's compares at four each (they wait on loads: Fashion's first pool, 0.8 M compares,
 * takes 0.038 ms on one thread, a conv that long 5 M multiply-adds; counted as one, its pools ran on
 * one thread at two, 0.043 ms against 0.026 ms on both, the other core's half of the conv's output
 * read across). */
static double node_work(const rs_plan *p, const rs_pnode *n, int B)
{
    if (n->kind == RS_PK_LINEAR) return (double)B * n->rows * n->O * n->I;
    if (rs_pdnnl_is_op(n)) return (double)B * (double)p->values[n->out].numel; /* a load and a store each */
    if (n->kind == RS_PK_LAYERNORM) return 4.0 * B * (double)p->values[n->out].numel;
    const rs_conv_geom *g = &n->g;
    double out = (double)B * g->oh * g->ow * g->kh * g->kw;
    return n->kind == RS_PK_CONV ? out * g->oc * (g->c / n->group) : 4.0 * out * g->c;
}

/* Below this many multiply-adds (about 10 us on one core) a primitive runs on one thread whatever
 * the plan's count: a second thread saves less than the fork and join of its team cost, and on a
 * loaded machine the join waits for that thread's next scheduler slice (a batch-1 Fashion CNN at two
 * threads: 0.011 ms idle, 64-80 ms medians at load 4-8). ONNX Runtime's cost model does the same. */
#define RS_PLAN_PAR_MIN_WORK (1 << 20)

static rs_status make_prim_at(rs_plan *p, int i, int B, int alg, rs_pdnnl_prim *d, rs_err *err);

/* rs_pdnnl_fail, with oneDNN's status kept in d->why for rs_pdnnl_make_prim_why. */
static rs_status prim_fail(rs_pdnnl_prim *d, rs_err *err, dnnl_status_t s, const char *what, const rs_pnode *n)
{
    d->why = s;
    return rs_pdnnl_fail(err, s, what, n);
}
static rs_status bind_mem(rs_plan *p, const rs_pnode *n, const rs_pdnnl_prim *d, rs_pdnnl_mem *m, rs_err *err);

/* RS_PCONV_SAMPLES at batch B: node i's batch-1 Winograd primitive, made for one thread, run whole by
 * each of the run's `threads` on its share of the samples (oneDNN 2.6's F(2x2, 3x3) kernel exists at
 * batch 1 only; Fashion's second conv: 64 x 0.005 ms against 0.44 ms direct at batch 64). Each thread
 * gets its own memory objects and stream: neither may be shared by concurrent executions. */
static rs_status make_samples(rs_plan *p, int i, int B, int threads, rs_pdnnl_prim *d, rs_err *err)
{
    omp_set_num_threads(1);
    rs_status st = make_prim_at(p, i, 1, RS_PCONV_WINOGRAD, d, err);
    omp_set_num_threads(threads);
    if (st) return st;
    d->B = B;
    d->each = true;
    d->nthr = threads;
    if (threads > 1) {
        d->tm = calloc((size_t)threads - 1, sizeof *d->tm);
        if (!d->tm) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
        d->ntm = threads - 1;
        for (int j = 0; j < d->ntm; j++)
            if ((st = bind_mem(p, &p->nodes[i], d, &d->tm[j], err))) return st;
    }
    if (p->dn->ntstrm < threads - 1) {
        dnnl_stream_t *ts = realloc(p->dn->tstrm, (size_t)(threads - 1) * sizeof *ts);
        if (!ts) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
        p->dn->tstrm = ts;
        for (; p->dn->ntstrm < threads - 1; p->dn->ntstrm++) {
            ts[p->dn->ntstrm] = NULL;
            const rs_pnode *n = &p->nodes[i];
            DTRY(dnnl_stream_create(&ts[p->dn->ntstrm], p->dn->eng, dnnl_stream_default_flags), "stream");
        }
    }
    return RS_OK;
}

rs_status rs_pdnnl_make_prim(rs_plan *p, int i, int B, int alg, rs_pdnnl_prim *d, rs_err *err)
{
    int asked = omp_get_max_threads();
    int v = p->nodes[i].out;
    if (alg != RS_PCONV_DIRECT && p->values[v].layout == 1 && !p->dn->vset[v]) {
        /* compile let the direct primitive at the plan's batch choose the output's layout before it
         * timed the others: a loader does the same */
        rs_pdnnl_prim tmp = {0};
        rs_status st = rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, &tmp, err);
        rs_pdnnl_free_prim(&tmp);
        if (st) return st;
    }
    if (alg == RS_PCONV_SAMPLES) return make_samples(p, i, B, asked, d, err);
    bool one = asked > 1 && node_work(p, &p->nodes[i], B) < RS_PLAN_PAR_MIN_WORK;
    if (one) omp_set_num_threads(1);
    rs_status st = rs_pdnnl_is_op(&p->nodes[i]) ? rs_pdnnl_make_op(p, i, B, d, err) : make_prim_at(p, i, B, alg, d, err);
    if (one) omp_set_num_threads(asked);
    d->nthr = asked; /* what prepare compares the run's count with */
    return st;
}

rs_status rs_pdnnl_make_prim_why(rs_plan *p, int i, int B, int alg, rs_pdnnl_prim *d, dnnl_status_t *why, rs_err *err)
{
    d->why = dnnl_success;
    rs_status st = rs_pdnnl_make_prim(p, i, B, alg, d, err);
    *why = st ? d->why : dnnl_success;
    return st;
}

/* Conv n's primitive d writes its own layout (d->dst) into the scratch region and reorders make the
 * value's: after the primitive (dst_cvt) and, for a residual sum, before it too (dst_in: the sum
 * post-op reads what the region holds). For a plain value oneDNN runs only as gemm or ref, and for
 * an int8 conv summing into a residual in another layout than nhwc: oneDNN 2.6's int8 convolutions
 * write fp32 in nhwc only (into resnet18's nChw16c residuals it has ref_int8:any alone, with a sum
 * post-op of any data type or a binary one, on AVX2 and AVX-512 alike). */
static rs_status cvt_dst(rs_plan *p, const rs_pnode *n, int B, bool sum, rs_pdnnl_prim *d, rs_err *err)
{
    dnnl_dims_t od = {B, n->g.oc, n->g.oh, n->g.ow};
    rs_status st = rs_pdnnl_out_md(p, n, B, od, &d->user_dst, err); /* nchw, or the residual's layout */
    if (st) return st;
    dnnl_primitive_desc_t rpd;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&rpd, &d->dst, p->dn->eng, &d->user_dst, p->dn->eng, NULL);
    if (s != dnnl_success) return prim_fail(d, err, s, "output reorder", n);
    s = dnnl_primitive_create(&d->dst_cvt, rpd);
    dnnl_primitive_desc_destroy(rpd);
    if (s == dnnl_success && sum) {
        s = dnnl_reorder_primitive_desc_create(&rpd, &d->user_dst, p->dn->eng, &d->dst, p->dn->eng, NULL);
        if (s != dnnl_success) return prim_fail(d, err, s, "residual reorder", n);
        s = dnnl_primitive_create(&d->dst_in, rpd);
        dnnl_primitive_desc_destroy(rpd);
    }
    if (s != dnnl_success) return prim_fail(d, err, s, "output reorder", n);
    d->dcvt_bytes = (dnnl_memory_desc_get_size(&d->dst) + 63) / 64 * 64;
    return RS_OK;
}

/* Node n's attributes: a user scratchpad, int8's output scales, its post-ops (caller destroys). */
static dnnl_status_t node_attr(const rs_plan *p, const rs_pnode *n, dnnl_primitive_attr_t *attr)
{
    *attr = NULL;
    dnnl_status_t s = dnnl_primitive_attr_create(attr);
    if (s != dnnl_success) {
        *attr = NULL;
        return s;
    }
    dnnl_post_ops_t po = NULL;
    s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    /* int8: s32 accumulators to fp32 by 1 / (input scale x the output channel's weight scale) */
    if (s == dnnl_success && n->prec == RS_PLAN_INT8)
        s = dnnl_primitive_attr_set_output_scales(*attr, (dnnl_dim_t)(p->tensors[n->oscales].bytes / sizeof(float)), 1 << 1,
                                                  p->tensors[n->oscales].data);
    if (s == dnnl_success && n->npost) {
        s = dnnl_post_ops_create(&po);
        for (int j = 0; j < n->npost && s == dnnl_success; j++) {
            const rs_ppost *q = &n->post[j];
            if (q->kind == RS_PPOST_SUM) s = dnnl_post_ops_append_sum(po, 1.0f);
            else if (rs_pdnnl_elt_alg(q->op) == dnnl_alg_kind_undef) s = dnnl_invalid_arguments;
            else s = dnnl_post_ops_append_eltwise(po, 1.0f, rs_pdnnl_elt_alg(q->op), rs_pdnnl_elt_alpha(q), q->beta);
            if (s == dnnl_success && q->kind == RS_PPOST_ELT && q->op == RS_UNARY_HARDSIGMOID)
                s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0.0f, 1.0f);
        }
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(*attr, po);
    }
    if (po) dnnl_post_ops_destroy(po);
    return s;
}

/* Calls f(ctx, name) for each implementation oneDNN offers for descriptor op (its iterator, in
 * oneDNN's order; f gets a primitive descriptor it then owns, or keeps nothing and returns false to
 * go on). Returns whether f took one. */
static bool each_impl(const rs_plan *p, const void *op, const_dnnl_primitive_attr_t attr,
                      bool (*f)(void *ctx, dnnl_primitive_desc_t pd, const char *name), void *ctx)
{
    dnnl_primitive_desc_iterator_t it;
    if (dnnl_primitive_desc_iterator_create(&it, op, attr, p->dn->eng, NULL) != dnnl_success) return false;
    bool took = false;
    do {
        dnnl_primitive_desc_t c = dnnl_primitive_desc_iterator_fetch(it); /* ours */
        const char *name = NULL;
        if (c) dnnl_primitive_desc_query(c, dnnl_query_impl_info_str, 0, &name);
        took = c && name && f(ctx, c, name);
        if (c && !took) dnnl_primitive_desc_destroy(c);
    } while (!took && dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    return took;
}

typedef struct impl_want {
    const char *name;
    dnnl_primitive_desc_t pd;
} impl_want;

static bool take_named(void *ctx, dnnl_primitive_desc_t pd, const char *name)
{
    impl_want *w = ctx;
    if (strcmp(name, w->name)) return false;
    w->pd = pd;
    return true;
}

/* The primitive descriptor of op: the implementation named `want` where oneDNN offers it for op
 * (*hit), else oneDNN's first (what dnnl_primitive_desc_create gives). */
static dnnl_status_t create_pd(const rs_plan *p, const void *op, const_dnnl_primitive_attr_t attr, const char *want,
                               dnnl_primitive_desc_t *pd, bool *hit)
{
    impl_want w = {want, NULL};
    *hit = want && want[0] && each_impl(p, op, attr, take_named, &w);
    if (*hit) {
        *pd = w.pd;
        return dnnl_success;
    }
    return dnnl_primitive_desc_create(pd, op, attr, p->dn->eng, NULL);
}

/* Whether conv n may write its own layout and reorder it into its value's (cvt_dst): a plain output
 * oneDNN runs only as gemm or ref (a depthwise conv on nchw: 11-45 ms against 0.2-0.4 for brdgmm_dw
 * on mobilenet_v3_small's at batch 64), and an int8 residual sum into a layout its kernels do not
 * write. */
static bool may_cvt_dst(const rs_plan *p, const rs_pnode *n, int alg, bool *sum)
{
    *sum = false;
    for (int j = 0; j < n->npost; j++) *sum |= n->post[j].kind == RS_PPOST_SUM;
    return n->kind == RS_PK_CONV && alg == RS_PCONV_DIRECT &&
           (*sum ? n->prec == RS_PLAN_INT8 : p->values[rs_plan_root(p, n->out)].layout == 0);
}

typedef struct impl_list {
    char (*names)[48];
    int max, n;
} impl_list;

static bool list_name(void *ctx, dnnl_primitive_desc_t pd, const char *name)
{
    (void)pd;
    impl_list *l = ctx;
    if (strncmp(name, "ref", 3) == 0) return false;
    for (int k = 0; k < l->n; k++)
        if (!strcmp(l->names[k], name)) return false;
    if (l->n < l->max && strlen(name) < sizeof l->names[0]) snprintf(l->names[l->n++], sizeof l->names[0], "%s", name);
    return false;
}

rs_status rs_pdnnl_impl_names(rs_plan *p, int i, int B, char (*names)[48], int max, int *count, rs_err *err)
{
    const rs_pnode *n = &p->nodes[i];
    impl_list l = {names, max, 0};
    bool sum, may_cvt = may_cvt_dst(p, n, RS_PCONV_DIRECT, &sum);
    bool own0 = n->kind == RS_PK_CONV && n->prec == RS_PLAN_FP32;
    /* the descriptors make_prim_at may try: the input's own layout or "any", the value's output
     * layout or the conv's own */
    for (int k = 0; k < 4; k++) {
        bool own = (k & 1) == 0, dany = (k & 2) != 0;
        if ((own && !own0) || (dany && !may_cvt)) continue;
        dnnl_convolution_desc_t cd;
        dnnl_memory_desc_t user_src;
        rs_status st = op_desc(p, n, B, RS_PCONV_DIRECT, own, dany, &user_src, &cd, NULL, NULL, NULL, err);
        if (st) return st;
        dnnl_primitive_attr_t attr = NULL;
        dnnl_status_t s = node_attr(p, n, &attr);
        if (s == dnnl_success) each_impl(p, &cd, attr, list_name, &l);
        if (attr) dnnl_primitive_attr_destroy(attr);
        if (s != dnnl_success) return rs_pdnnl_fail(err, s, "attributes", n);
    }
    *count = l.n;
    return RS_OK;
}

static rs_status make_prim_at(rs_plan *p, int i, int B, int alg, rs_pdnnl_prim *d, rs_err *err)
{
    const rs_pnode *n = &p->nodes[i];
    dnnl_convolution_desc_t cd;
    dnnl_inner_product_desc_t id;
    dnnl_pooling_desc_t pd;
    dnnl_layer_normalization_desc_t ld;
    /* an fp32 convolution first tries its input's own layout (no reorder between nodes) */
    bool own = n->kind == RS_PK_CONV && n->prec == RS_PLAN_FP32, own0 = own;
    /* its own output layout, then reorders (cvt_dst), where may_cvt_dst says */
    bool dany = false, sum;
    bool may_cvt = may_cvt_dst(p, n, alg, &sum);
    /* the implementation compile chose (n->impl): on the input's own layout, else on the one it
     * prefers; where oneDNN offers it on neither, what oneDNN chooses at another batch, a refusal at
     * the plan's (its weights in the file are laid out for that kernel) */
    const char *want = n->impl[0] ? n->impl : NULL;
again:;
    rs_status st = op_desc(p, n, B, alg, own, dany, &d->user_src, &cd, &id, &pd, &ld, err);
    if (st) return st;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_status_t s = node_attr(p, n, &attr);
    const void *op = n->kind == RS_PK_CONV             ? (const void *)&cd
                     : n->kind == RS_PK_LINEAR         ? (const void *)&id
                     : n->kind == RS_PK_LAYERNORM      ? (const void *)&ld
                                                       : (const void *)&pd;
    bool hit = false;
    if (s == dnnl_success) s = create_pd(p, op, attr, want, &d->pd, &hit);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (want && !hit) {
        if (s == dnnl_success) dnnl_primitive_desc_destroy(d->pd);
        d->pd = NULL;
        if (own) own = false;
        else if (may_cvt && !dany) dany = true;
        else if (B == p->batch) /* the file's weights are laid out for that kernel: never another's */
            return rs_err_set(err, RS_ERR_FORMAT, "plan: node %s's kernel %s, compile's choice, is not one oneDNN %s "
                              "offers on this machine at batch %d; compile the model again here", n->name, n->impl,
                              p->dnnl_version, B);
        else { /* not offered at this batch: oneDNN's choice, from the start (weights reordered from slot 0's) */
            want = NULL;
            own = own0;
            dany = false;
        }
        goto again;
    }
    if (own) {
        /* kept only on a jit kernel: oneDNN falls back to ref:any (600x slower) or im2col + gemm on
         * layouts its direct kernels do not take */
        const char *impl = NULL;
        if (s == dnnl_success) dnnl_primitive_desc_query(d->pd, dnnl_query_impl_info_str, 0, &impl);
        if (s != dnnl_success || !impl || strncmp(impl, "ref", 3) == 0 || strstr(impl, "gemm")) {
            if (d->pd) dnnl_primitive_desc_destroy(d->pd);
            d->pd = NULL;
            own = false;
            goto again;
        }
    }
    if (may_cvt && !dany && s == dnnl_success) {
        const char *impl = NULL;
        dnnl_primitive_desc_query(d->pd, dnnl_query_impl_info_str, 0, &impl);
        if (!impl || strncmp(impl, "ref", 3) == 0 || strstr(impl, "gemm")) {
            dnnl_primitive_desc_destroy(d->pd);
            d->pd = NULL;
            dany = true;
            goto again;
        }
    }
    if (s != dnnl_success) return prim_fail(d, err, s, "primitive descriptor", n);
    d->src = *dnnl_primitive_desc_query_md(d->pd, dnnl_query_src_md, 0);
    d->dst = *dnnl_primitive_desc_query_md(d->pd, dnnl_query_dst_md, 0);
    if (n->kind == RS_PK_CONV || n->kind == RS_PK_LINEAR) d->wei = *dnnl_primitive_desc_query_md(d->pd, dnnl_query_weights_md, 0);
    if ((st = rs_pdnnl_keep_out_layout(p, n, B, &d->dst, err))) return st;
    d->pad_bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(d->pd, dnnl_query_scratchpad_md, 0));
    DTRY(dnnl_primitive_create(&d->prim, d->pd), "primitive");
    if (dany && (st = cvt_dst(p, n, B, sum, d, err))) return st;
    if (!dnnl_memory_desc_equal(&d->src, &d->user_src)) {
        dnnl_primitive_desc_t rpd;
        dnnl_primitive_attr_t rattr = NULL;
        if (n->prec == RS_PLAN_INT8) { /* x_q = round(x * 127 / max|x| seen in calibration), saturated */
            DTRY(dnnl_primitive_attr_create(&rattr), "attributes");
            dnnl_primitive_attr_set_output_scales(rattr, 1, 0, &n->qscale);
        }
        s = dnnl_reorder_primitive_desc_create(&rpd, &d->user_src, p->dn->eng, &d->src, p->dn->eng, rattr);
        if (rattr) dnnl_primitive_attr_destroy(rattr);
        if (s != dnnl_success) return prim_fail(d, err, s, "input reorder", n);
        s = dnnl_primitive_create(&d->src_cvt, rpd);
        dnnl_primitive_desc_destroy(rpd);
        if (s != dnnl_success) return prim_fail(d, err, s, "input reorder", n);
        d->cvt_bytes = (dnnl_memory_desc_get_size(&d->src) + 63) / 64 * 64;
    }
    st = bind_mem(p, n, d, &d->m, err);
    if (st) return st;
    d->B = B;
    d->nthr = omp_get_max_threads();
    return RS_OK;
}

/* The memory objects an execution of d binds (handles set then), bias and layer-norm parameters
 * bound to the plan's tensors now. */
static rs_status bind_mem(rs_plan *p, const rs_pnode *n, const rs_pdnnl_prim *d, rs_pdnnl_mem *m, rs_err *err)
{
    if (d->src_cvt) DTRY(dnnl_memory_create(&m->cvt, &d->src, p->dn->eng, DNNL_MEMORY_NONE), "memory");
    if (d->dst_cvt) DTRY(dnnl_memory_create(&m->udst, &d->user_dst, p->dn->eng, DNNL_MEMORY_NONE), "memory");
    DTRY(dnnl_memory_create(&m->src, &d->user_src, p->dn->eng, DNNL_MEMORY_NONE), "memory");
    DTRY(dnnl_memory_create(&m->dst, &d->dst, p->dn->eng, DNNL_MEMORY_NONE), "memory");
    DTRY(dnnl_memory_create(&m->pad, dnnl_primitive_desc_query_md(d->pd, dnnl_query_scratchpad_md, 0), p->dn->eng,
                            DNNL_MEMORY_NONE),
         "memory");
    if (n->kind == RS_PK_CONV || n->kind == RS_PK_LINEAR) {
        DTRY(dnnl_memory_create(&m->wei, &d->wei, p->dn->eng, DNNL_MEMORY_NONE), "memory");
        if (n->b >= 0) {
            DTRY(dnnl_memory_create(&m->bias, dnnl_primitive_desc_query_md(d->pd, dnnl_query_weights_md, 1), p->dn->eng,
                                    p->tensors[n->b].data),
                 "memory");
        }
    } else if (n->kind == RS_PK_LAYERNORM) { /* gamma and beta as they are: (C) each */
        dnnl_memory_desc_t c;
        dnnl_dims_t cd1 = {n->C};
        DTRY(dnnl_memory_desc_init_by_tag(&c, 1, cd1, dnnl_f32, dnnl_x), "scale desc");
        DTRY(dnnl_memory_create(&m->wei, &c, p->dn->eng, p->tensors[n->w].data), "memory");
        DTRY(dnnl_memory_create(&m->bias, &c, p->dn->eng, p->tensors[n->b].data), "memory");
    }
    return RS_OK;
}
