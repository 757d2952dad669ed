/* oneDNN for the plan's convolutions, inner products, pools and layer norms (the C API of Debian's
 * libdnnl 2.6), split by job: this file opens and closes oneDNN's engine, keeps each node's primitives
 * per (batch, threads) slot and runs them; dnnl_layout.c chooses the values' layouts and spells the
 * memory descriptors; dnnl_prim.c makes the primitives; dnnl_weights.c lays out the weights at
 * compile. dnnl_internal.h is what they share.
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
           n->kind == RS_PK_LAYERNORM || rs_pdnnl_is_op(n);
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
    if (d->then) dnnl_primitive_destroy(d->then);
    free_mem(&d->m);
    for (int j = 0; j < d->ntm; j++) free_mem(&d->tm[j]);
    free(d->tm);
    for (int j = 0; j < d->nx; j++)
        if (d->xs[j]) dnnl_memory_destroy(d->xs[j]);
    free(d->xs);
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
    dnnl_status_t s = rs_pdnnl_is_op(n) ? rs_pdnnl_exec_op(p, n, d, x, (char *)p->arena + p->scratch_off)
                      : rs_pdnnl_exec_prim(p, n, d, rs_plan_value_ptr(p, n->in[0], x), rs_plan_value_ptr(p, n->out, x),
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
