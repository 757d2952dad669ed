/* oneDNN for the plan's convolutions, inner products, pools and layer norms (the C API of Debian's
 * libdnnl 2.6): value layouts, the primitives of each node per batch, and running them. The weights
 * they take are laid out by dnnl_weights.c.
 * Values stay plain row-major (nchw, nc) where the engine's ops, the caller or an in-place residual
 * sum read them. A value that a convolution or pool writes and only convolutions, pools and inner
 * products read keeps the blocked layout its producer's primitive chose at the plan's batch (nChw16c
 * on AVX-512): rs_pdnnl_can_block decides, the plan file records it per value (since format 3), and
 * a load makes the same choice again. Fused activations and residual sums are the primitive's
 * post-ops. bf16 nodes take bf16 weights and a bf16 copy of their input (a reorder into the scratch
 * region) and write fp32: oneDNN accumulates in fp32. Scratchpads are the user's (the arena's
 * scratch region), so the arena is all the memory a run uses besides the weights. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_internal.h"

rs_status rs_pdnnl_fail(rs_err *err, dnnl_status_t s, const char *what, const rs_pnode *n)
{
    static const char *const names[] = {"success", "out of memory", "invalid arguments", "unimplemented",
                                        "iterator ends", "runtime error", "not required"};
    const char *msg = (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "error";
    return rs_err_set(err, s == dnnl_unimplemented ? RS_ERR_UNSUPPORTED : RS_ERR_INTERNAL,
                      "oneDNN %s for node %s (%s): %s", what, n ? n->name : "-", n ? rs_pk_name(n->kind) : "-", msg);
}

bool rs_plan_node_is_dnnl(const rs_pnode *n)
{
    return n->kind == RS_PK_CONV || n->kind == RS_PK_LINEAR || n->kind == RS_PK_MAXPOOL || n->kind == RS_PK_AVGPOOL ||
           n->kind == RS_PK_LAYERNORM;
}

void rs_plan_dnnl_isa(char *isa, size_t n)
{
    const char *s = "unknown";
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: s = "sse41"; break;
    case dnnl_cpu_isa_avx: s = "avx"; break;
    case dnnl_cpu_isa_avx2: s = "avx2"; break;
    case dnnl_cpu_isa_avx2_vnni: s = "avx2_vnni"; break;
    case dnnl_cpu_isa_avx512_core: s = "avx512_core"; break;
    case dnnl_cpu_isa_avx512_core_vnni: s = "avx512_core_vnni"; break;
    case dnnl_cpu_isa_avx512_core_bf16: s = "avx512_core_bf16"; break;
    case dnnl_cpu_isa_avx512_core_amx: s = "avx512_core_amx"; break;
    default: break;
    }
    snprintf(isa, n, "%s", s);
}

void rs_plan_dnnl_version(char *v, size_t n)
{
    const dnnl_version_t *d = dnnl_version();
    snprintf(v, n, "%d.%d.%d", d->major, d->minor, d->patch);
}

rs_status rs_plan_dnnl_open(rs_plan *p, rs_err *err)
{
    const rs_pnode *n = NULL;
    if (p->dn) return RS_OK;
    p->dn = calloc(1, sizeof *p->dn);
    if (!p->dn) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
    p->dn->slot = calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *p->dn->slot);
    if (!p->dn->slot) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
    p->dn->n = p->nnodes;
    p->dn->cur = calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *p->dn->cur);
    if (!p->dn->cur) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
    p->dn->vmd = calloc((size_t)p->nvalues, sizeof *p->dn->vmd);
    p->dn->vset = calloc((size_t)p->nvalues, 1);
    p->dn->label = calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *p->dn->label);
    if (!p->dn->vmd || !p->dn->vset || !p->dn->label) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
    DTRY(dnnl_engine_create(&p->dn->eng, dnnl_cpu, 0), "engine");
    DTRY(dnnl_stream_create(&p->dn->strm, p->dn->eng, dnnl_stream_default_flags), "stream");
    return RS_OK;
}

static void free_mem(rs_pdnnl_mem *m)
{
    dnnl_memory_t ms[] = {m->src, m->cvt, m->wei, m->bias, m->dst, m->pad, m->udst};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        if (ms[i]) dnnl_memory_destroy(ms[i]);
}

void rs_pdnnl_free_prim(rs_pdnnl_prim *d)
{
    if (d->prim) dnnl_primitive_destroy(d->prim);
    if (d->pd) dnnl_primitive_desc_destroy(d->pd);
    if (d->src_cvt) dnnl_primitive_destroy(d->src_cvt);
    if (d->dst_cvt) dnnl_primitive_destroy(d->dst_cvt);
    if (d->dst_in) dnnl_primitive_destroy(d->dst_in);
    free_mem(&d->m);
    for (int j = 0; j < d->ntm; j++) free_mem(&d->tm[j]);
    free(d->tm);
    free(d->wei_alt);
    memset(d, 0, sizeof *d);
}

void rs_plan_dnnl_close(rs_plan *p)
{
    if (!p->dn) return;
    for (int i = 0; i < p->dn->n; i++) {
        for (int j = 0; j < RS_PLAN_SLOTS; j++) rs_pdnnl_free_prim(&p->dn->slot[i][j]);
    }
    free(p->dn->slot);
    free(p->dn->cur);
    free(p->dn->vmd);
    free(p->dn->vset);
    free(p->dn->label);
    for (int j = 0; j < p->dn->ntstrm; j++)
        if (p->dn->tstrm[j]) dnnl_stream_destroy(p->dn->tstrm[j]);
    free(p->dn->tstrm);
    if (p->dn->strm) dnnl_stream_destroy(p->dn->strm);
    if (p->dn->eng) dnnl_engine_destroy(p->dn->eng);
    free(p->dn);
    p->dn = NULL;
}

static dnnl_alg_kind_t elt_alg(int op)
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
bool rs_plan_fusable_act(int op) { return elt_alg(op) != dnnl_alg_kind_undef; }

/* The alpha oneDNN's eltwise wants: relu's negative slope 0 (LeakyRelu keeps its own), swish's 1 for
 * SiLU, the node's own for the rest (clip's bounds). */
static float elt_alpha(const rs_ppost *q)
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

/* Layout choice. A value written by a conv or pool and read only by convs, pools and inner products
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
    bool shaped = false;
    for (int i = 0; i < p->nnodes && !shaped; i++) shaped = p->nodes[i].out == v && out_chw(&p->nodes[i], chw);
    for (int i = 0; i < p->nnodes; i++) {
        const rs_pnode *n = &p->nodes[i];
        for (int j = 0; j < n->npost; j++)
            if (n->post[j].kind == RS_PPOST_SUM && rs_plan_root(p, n->post[j].value) == v &&
                (!shaped || n->kind != RS_PK_CONV || !out_chw(n, xc) || memcmp(xc, chw, sizeof xc)))
                return false;
        for (int j = 0; j < n->nin; j++) {
            if (n->in[j] < 0 || rs_plan_root(p, n->in[j]) != v) continue;
            readers++;
            bool ok = j == 0 && (n->kind == RS_PK_CONV || n->kind == RS_PK_MAXPOOL || n->kind == RS_PK_AVGPOOL ||
                                 (n->kind == RS_PK_LINEAR && n->rows == 1));
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
static rs_status value_md(rs_plan *p, const rs_pnode *n, int v, int ndims, const dnnl_dims_t dims, int B,
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
static rs_status out_md(rs_plan *p, const rs_pnode *n, int B, const dnnl_dims_t dims, dnnl_memory_desc_t *md,
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
            st = value_md(p, n, v, 4, s, B, user_src, err);
            if (st) return st;
            dnnl_dims_t s2 = {(dnnl_dim_t)B, rs_pdnnl_per_sample(user_src)}, w2 = {n->O, s2[1]};
            DTRY(dnnl_memory_desc_init_by_tag(user_src, 2, s2, dnnl_f32, dnnl_nc), "src desc");
            DTRY(dnnl_memory_desc_init_by_tag(&src, 2, s2, lt, dnnl_nc), "src desc");
            DTRY(dnnl_memory_desc_init_by_tag(&wei, 2, w2, lt, dnnl_format_tag_any), "weights desc");
        } else {
            st = value_md(p, n, v, 2, s, B, user_src, err);
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
    /* symmetric padding, as the engine's windows: oneDNN floors (h + 2p - k)/s + 1 the same way */
    dnnl_dims_t pr = {g->ph, g->pw};
    if ((st = value_md(p, n, n->in[0], 4, s, B, user_src, err)) || (st = out_md(p, n, B, d, &dst, err))) return st;
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
                                        n->kind == RS_PK_MAXPOOL ? dnnl_pooling_max : dnnl_pooling_avg_include_padding,
                                        user_src, &dst, strides, k, pl, pr),
         "pooling");
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
    rs_status st = make_prim_at(p, i, B, alg, d, err);
    if (one) omp_set_num_threads(asked);
    d->nthr = asked; /* what prepare compares the run's count with */
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
    rs_status st = out_md(p, n, B, od, &d->user_dst, err); /* nchw, or the residual's layout */
    if (st) return st;
    dnnl_primitive_desc_t rpd;
    DTRY(dnnl_reorder_primitive_desc_create(&rpd, &d->dst, p->dn->eng, &d->user_dst, p->dn->eng, NULL), "output reorder");
    dnnl_status_t s = dnnl_primitive_create(&d->dst_cvt, rpd);
    dnnl_primitive_desc_destroy(rpd);
    if (s == dnnl_success && sum) {
        DTRY(dnnl_reorder_primitive_desc_create(&rpd, &d->user_dst, p->dn->eng, &d->dst, p->dn->eng, NULL), "residual reorder");
        s = dnnl_primitive_create(&d->dst_in, rpd);
        dnnl_primitive_desc_destroy(rpd);
    }
    if (s != dnnl_success) return rs_pdnnl_fail(err, s, "output reorder", n);
    d->dcvt_bytes = (dnnl_memory_desc_get_size(&d->dst) + 63) / 64 * 64;
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
    bool own = n->kind == RS_PK_CONV && n->prec == RS_PLAN_FP32;
    /* a plain output oneDNN runs only as gemm or ref (a depthwise conv on nchw: 11-45 ms against
     * 0.2-0.4 for brdgmm_dw on mobilenet_v3_small's at batch 64), and an int8 residual sum into a
     * layout its kernels do not write: its own layout, then reorders (cvt_dst) */
    bool dany = false, sum = false;
    for (int j = 0; j < n->npost; j++) sum |= n->post[j].kind == RS_PPOST_SUM;
    bool may_cvt = n->kind == RS_PK_CONV && alg == RS_PCONV_DIRECT &&
                   (sum ? n->prec == RS_PLAN_INT8 : p->values[rs_plan_root(p, n->out)].layout == 0);
again:;
    rs_status st = op_desc(p, n, B, alg, own, dany, &d->user_src, &cd, &id, &pd, &ld, err);
    if (st) return st;
    dnnl_primitive_attr_t attr;
    DTRY(dnnl_primitive_attr_create(&attr), "attributes");
    dnnl_post_ops_t po = NULL;
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    /* int8: s32 accumulators to fp32 by 1 / (input scale x the output channel's weight scale) */
    if (s == dnnl_success && n->prec == RS_PLAN_INT8)
        s = dnnl_primitive_attr_set_output_scales(attr, (dnnl_dim_t)(p->tensors[n->oscales].bytes / sizeof(float)), 1 << 1,
                                                  p->tensors[n->oscales].data);
    if (s == dnnl_success && n->npost) {
        s = dnnl_post_ops_create(&po);
        for (int j = 0; j < n->npost && s == dnnl_success; j++) {
            const rs_ppost *q = &n->post[j];
            if (q->kind == RS_PPOST_SUM) s = dnnl_post_ops_append_sum(po, 1.0f);
            else if (elt_alg(q->op) == dnnl_alg_kind_undef) s = dnnl_invalid_arguments;
            else s = dnnl_post_ops_append_eltwise(po, 1.0f, elt_alg(q->op), elt_alpha(q), q->beta);
            if (s == dnnl_success && q->kind == RS_PPOST_ELT && q->op == RS_UNARY_HARDSIGMOID)
                s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0.0f, 1.0f);
        }
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    const void *op = n->kind == RS_PK_CONV             ? (const void *)&cd
                     : n->kind == RS_PK_LINEAR         ? (const void *)&id
                     : n->kind == RS_PK_LAYERNORM      ? (const void *)&ld
                                                       : (const void *)&pd;
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&d->pd, op, attr, p->dn->eng, NULL);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
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
    if (s != dnnl_success) return rs_pdnnl_fail(err, s, "primitive descriptor", n);
    d->src = *dnnl_primitive_desc_query_md(d->pd, dnnl_query_src_md, 0);
    d->dst = *dnnl_primitive_desc_query_md(d->pd, dnnl_query_dst_md, 0);
    if (n->kind == RS_PK_CONV || n->kind == RS_PK_LINEAR) d->wei = *dnnl_primitive_desc_query_md(d->pd, dnnl_query_weights_md, 0);
    if (p->values[n->out].layout == 1 && B == p->batch && !p->dn->vset[n->out]) {
        /* the layout the primitive chose for its output at the plan's batch: the value's from now on */
        size_t bytes = dnnl_memory_desc_get_size(&d->dst), per = (bytes + 4 * (size_t)B - 1) / (4 * (size_t)B);
        rs_pvalue *v = &p->values[n->out];
        dnnl_memory_desc_t probe;
        if (!rs_pdnnl_md_with_batch(&d->dst, 1, &probe))
            return rs_err_set(err, RS_ERR_UNSUPPORTED, "plan: oneDNN chose a layout for node %s's output that does not "
                              "scale with the batch", n->name);
        if (v->padded == 0) v->padded = (int64_t)per;
        else if ((int64_t)per > v->padded)
            return rs_err_set(err, RS_ERR_FORMAT,
                              "plan: node %s's output takes %zu bytes in oneDNN's layout here, the file planned %lld; "
                              "compile the model again here",
                              n->name, bytes, (long long)v->padded * 4 * B);
        p->dn->vmd[n->out] = d->dst;
        p->dn->vset[n->out] = 1;
    }
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
        if (s != dnnl_success) return rs_pdnnl_fail(err, s, "input reorder", n);
        s = dnnl_primitive_create(&d->src_cvt, rpd);
        dnnl_primitive_desc_destroy(rpd);
        if (s != dnnl_success) return rs_pdnnl_fail(err, s, "input reorder", n);
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

/* Bytes of the scratch region a run of d takes: its input copy and scratchpad, once per thread for
 * a per-sample primitive. */
size_t rs_pdnnl_prim_scratch(const rs_pdnnl_prim *d)
{
    size_t one = d->cvt_bytes + d->dcvt_bytes + (d->pad_bytes + 63) / 64 * 64;
    return d->each ? one * (size_t)(d->ntm + 1) : one;
}

/* Slot 0 holds the primitives of the plan's batch and build threads (the ones its weights are laid
 * out for); another (batch, threads) takes the slot that has it, an empty one, or the least recently
 * used. */
static int slot_of(const rs_plan *p, int i, int B)
{
    int nthr = omp_get_max_threads();
    if (B == p->batch && nthr == p->build_threads) return 0;
    const rs_pdnnl_prim *s = p->dn->slot[i];
    int pick = 1;
    for (int j = 1; j < RS_PLAN_SLOTS; j++) {
        if (s[j].B == B && s[j].nthr == nthr) return j;
        if (s[pick].B && (!s[j].B || s[j].used < s[pick].used)) pick = j;
    }
    return pick;
}

rs_status rs_plan_dnnl_prepare(rs_plan *p, int B, size_t *scratch_bytes, rs_err *err)
{
    size_t most = 0;
    for (int i = 0; i < p->nnodes; i++) {
        const rs_pnode *n = &p->nodes[i];
        if (!rs_plan_node_is_dnnl(n)) continue;
        int si = slot_of(p, i, B);
        rs_pdnnl_prim *d = &p->dn->slot[i][si];
        p->dn->cur[i] = si;
        if (d->B != B || d->nthr != omp_get_max_threads()) {
            rs_pdnnl_free_prim(d);
            rs_status st = rs_pdnnl_make_prim(p, i, B, rs_pdnnl_alg_for(p, n, B), d, err);
            if (st) return st;
            if (n->kind == RS_PK_CONV || n->kind == RS_PK_LINEAR) {
                const rs_ptensor *t = &p->tensors[n->w];
                /* slot 0's layout is the file's (plain for Winograd) */
                bool plain = n->alg != RS_PCONV_DIRECT;
                size_t want = plain ? (size_t)n->g.oc * (n->g.c / n->group) * n->g.kh * n->g.kw * sizeof(float)
                                    : dnnl_memory_desc_get_size(&d->wei);
                if (si == 0 && (t->layout != (plain ? 0 : 1) || t->bytes != want))
                    return rs_err_set(err, RS_ERR_FORMAT,
                                      "plan: node %s's weights (%zu bytes, layout %d) are not what oneDNN %s chose on "
                                      "this machine (%zu bytes); compile the model again here",
                                      n->name, t->bytes, t->layout, p->dnnl_version, want);
                st = rs_pdnnl_slot_weights(p, i, d, err);
                if (st) return st;
            }
        }
        d->used = ++p->dn->tick;
        size_t need = rs_pdnnl_prim_scratch(d);
        if (need > most) most = need;
    }
    *scratch_bytes = most;
    return RS_OK;
}

/* Runs d's primitive (after its input copy) from src into dst through memory objects m on stream
 * strm, scratch the region of both. */
static dnnl_status_t exec_one(rs_plan *p, const rs_pnode *n, const rs_pdnnl_prim *d, rs_pdnnl_mem *m,
                              dnnl_stream_t strm, void *src, void *dst, char *scratch)
{
    dnnl_memory_set_data_handle(m->src, src);
    /* [input copy][output in the primitive's layout][scratchpad] */
    dnnl_memory_set_data_handle(m->dst, d->dst_cvt ? scratch + d->cvt_bytes : dst);
    if (d->dst_cvt) dnnl_memory_set_data_handle(m->udst, dst);
    dnnl_memory_set_data_handle(m->pad, scratch + d->cvt_bytes + d->dcvt_bytes);
    dnnl_exec_arg_t args[6];
    int na = 0;
    dnnl_status_t s = dnnl_success;
    if (d->src_cvt) {
        dnnl_memory_set_data_handle(m->cvt, scratch);
        dnnl_exec_arg_t ra[] = {{DNNL_ARG_FROM, m->src}, {DNNL_ARG_TO, m->cvt}};
        s = dnnl_primitive_execute(d->src_cvt, strm, 2, ra);
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m->cvt};
    } else {
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m->src};
    }
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, m->dst};
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m->pad};
    bool ln = n->kind == RS_PK_LAYERNORM;
    if (m->wei) {
        dnnl_memory_set_data_handle(m->wei, d->wei_alt ? d->wei_alt : p->tensors[n->w].data);
        args[na++] = (dnnl_exec_arg_t){ln ? DNNL_ARG_SCALE : DNNL_ARG_WEIGHTS, m->wei};
    }
    if (m->bias) args[na++] = (dnnl_exec_arg_t){ln ? DNNL_ARG_SHIFT : DNNL_ARG_BIAS, m->bias};
    if (s == dnnl_success && d->dst_in) {
        dnnl_exec_arg_t ra[] = {{DNNL_ARG_FROM, m->udst}, {DNNL_ARG_TO, m->dst}};
        s = dnnl_primitive_execute(d->dst_in, strm, 2, ra);
    }
    if (s == dnnl_success) s = dnnl_primitive_execute(d->prim, strm, na, args);
    if (s == dnnl_success && d->dst_cvt) {
        dnnl_exec_arg_t ra[] = {{DNNL_ARG_FROM, m->dst}, {DNNL_ARG_TO, m->udst}};
        s = dnnl_primitive_execute(d->dst_cvt, strm, 2, ra);
    }
    return s;
}

/* A per-sample primitive over d->B samples: thread j of the run's team takes the j-th contiguous
 * share (where the node before left it in its core's cache), its memory objects, stream and slice of
 * the scratch region. Every thread waits for its own stream. */
static dnnl_status_t exec_samples(rs_plan *p, const rs_pnode *n, rs_pdnnl_prim *d, char *src, char *dst, char *scratch)
{
    size_t sb = dnnl_memory_desc_get_size(&d->user_src), db = dnnl_memory_desc_get_size(&d->dst);
    size_t one = d->cvt_bytes + d->dcvt_bytes + (d->pad_bytes + 63) / 64 * 64;
    int T = d->ntm + 1 < d->B ? d->ntm + 1 : d->B;
    dnnl_status_t bad = dnnl_success;
    #pragma omp parallel num_threads(T) if (T > 1)
    {
        int j = omp_get_thread_num();
        rs_pdnnl_mem *m = j ? &d->tm[j - 1] : &d->m;
        dnnl_stream_t strm = j ? p->dn->tstrm[j - 1] : p->dn->strm;
        dnnl_status_t s = dnnl_success;
        for (int b = j * d->B / T; b < (j + 1) * d->B / T && s == dnnl_success; b++)
            s = exec_one(p, n, d, m, strm, src + (size_t)b * sb, dst + (size_t)b * db, scratch + (size_t)j * one);
        if (s == dnnl_success && j) s = dnnl_stream_wait(strm);
        if (s != dnnl_success) {
            #pragma omp critical(rs_plan_samples)
            bad = s;
        }
    }
    return bad;
}

dnnl_status_t rs_pdnnl_exec_prim(rs_plan *p, const rs_pnode *n, rs_pdnnl_prim *d, void *src, void *dst, char *scratch)
{
    if (d->each) return exec_samples(p, n, d, src, dst, scratch);
    return exec_one(p, n, d, &d->m, p->dn->strm, src, dst, scratch);
}

rs_status rs_plan_dnnl_exec(rs_plan *p, int i, const void *x, int B, rs_err *err)
{
    const rs_pnode *n = &p->nodes[i];
    rs_pdnnl_prim *d = &p->dn->slot[i][p->dn->cur[i]];
    if (d->B != B) return rs_err_set(err, RS_ERR_INTERNAL, "plan: node %s has no primitive for batch %d", n->name, B);
    /* the CPU stream runs each primitive in order; rs_plan_dnnl_sync waits once at the end of a run,
     * and the engine's ops in between run on the calling thread after the primitive before them */
    dnnl_status_t s = rs_pdnnl_exec_prim(p, n, d, rs_plan_value_ptr(p, n->in[0], x), rs_plan_value_ptr(p, n->out, x),
                                (char *)p->arena + p->scratch_off);
    if (s != dnnl_success) return rs_pdnnl_fail(err, s, "execute", n);
    return RS_OK;
}

rs_status rs_plan_dnnl_sync(rs_plan *p, rs_err *err)
{
    const rs_pnode *n = NULL;
    DTRY(dnnl_stream_wait(p->dn->strm), "stream wait");
    return RS_OK;
}

/* oneDNN's implementation name of d's primitive, "... per sample" for a per-sample one (in node i's
 * label buffer). */
static const char *prim_name(const rs_plan *p, int i, const rs_pdnnl_prim *d)
{
    const char *s = NULL;
    if (!d->pd || dnnl_primitive_desc_query(d->pd, dnnl_query_impl_info_str, 0, &s) != dnnl_success || !s) return "";
    if (!d->each) return s;
    snprintf(p->dn->label[i], sizeof p->dn->label[i], "%s per sample", s);
    return p->dn->label[i];
}

/* What the primitive of node i is (oneDNN's implementation name), for `plan show`. */
const char *rs_plan_dnnl_impl(const rs_plan *p, int i)
{
    if (!p->dn || i >= p->dn->n) return "";
    return prim_name(p, i, &p->dn->slot[i][0]);
}

/* The same for the primitive node i ran last (another batch's may be another kernel: Winograd's
 * 2x3 at batch 1, 4x3 at 64), for `plan bench nodes=on`. */
const char *rs_plan_dnnl_impl_ran(const rs_plan *p, int i)
{
    if (!p->dn || i >= p->dn->n) return "";
    const rs_pdnnl_prim *d = &p->dn->slot[i][p->dn->cur[i]];
    return d->pd ? prim_name(p, i, d) : rs_plan_dnnl_impl(p, i);
}
