/* The weights of oneDNN's primitives: laid out once at compile as each node's primitive at the plan's
 * batch takes them (blocked, bf16, s8 with its scales) and stored so in the plan file; for a 3x3
 * convolution, the algorithm (direct or Winograd, whole batch or per sample) timed on this machine,
 * and for a bf16 image convolution whether fp32 is faster; per slot, a copy for another batch's
 * layout. The primitives themselves are dnnl.c's. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_internal.h"

/* Reorders `from` (bytes laid out as md_from) into a new buffer laid out as md_to. */
static rs_status reorder_to(rs_plan *p, const rs_pnode *n, const dnnl_memory_desc_t *md_from, void *from,
                            const dnnl_memory_desc_t *md_to, void **to, size_t *bytes, const_dnnl_primitive_attr_t attr,
                            rs_err *err)
{
    *bytes = dnnl_memory_desc_get_size(md_to);
    *to = rs_plan_aligned_alloc(*bytes);
    if (!*to) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    dnnl_memory_t a, b;
    DTRY(dnnl_reorder_primitive_desc_create(&rpd, md_from, p->dn->eng, md_to, p->dn->eng, attr), "weights reorder");
    dnnl_status_t s = dnnl_primitive_create(&r, rpd);
    dnnl_primitive_desc_destroy(rpd);
    if (s != dnnl_success) return rs_pdnnl_fail(err, s, "weights reorder", n);
    dnnl_memory_create(&a, md_from, p->dn->eng, from);
    dnnl_memory_create(&b, md_to, p->dn->eng, *to);
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    s = dnnl_primitive_execute(r, p->dn->strm, 2, args);
    if (s == dnnl_success) s = dnnl_stream_wait(p->dn->strm);
    dnnl_memory_destroy(a);
    dnnl_memory_destroy(b);
    dnnl_primitive_destroy(r);
    if (s != dnnl_success) return rs_pdnnl_fail(err, s, "weights reorder", n);
    return RS_OK;
}

static dnnl_memory_desc_t plain_weights(const rs_plan *p, const rs_pnode *n)
{
    dnnl_memory_desc_t md;
    if (n->kind == RS_PK_LINEAR && n->in[0] > 0 && p->values[rs_plan_root(p, n->in[0])].layout == 1) {
        /* blocked_weights made them (O, P) row-major */
        dnnl_dims_t w = {n->O, rs_pdnnl_per_sample(&p->dn->vmd[rs_plan_root(p, n->in[0])])};
        dnnl_memory_desc_init_by_tag(&md, 2, w, dnnl_f32, dnnl_oi);
    } else if (n->kind == RS_PK_LINEAR) {
        dnnl_dims_t w = {n->O, n->I};
        dnnl_memory_desc_init_by_tag(&md, 2, w, dnnl_f32, dnnl_oi);
    } else {
        rs_pdnnl_conv_wmd(n, dnnl_f32, false, &md);
    }
    return md;
}

/* An inner product reading a blocked value: its (O, I) weights are (O, C, H, W) row-major (the
 * flatten of nchw); laid out as the value is (each of the O rows a "sample" of the value's layout,
 * zeros in its padding) they are the (O, P) matrix the product takes. Replaces t's data. */
static rs_status blocked_weights(rs_plan *p, const rs_pnode *n, rs_ptensor *t, rs_err *err)
{
    const dnnl_memory_desc_t *s = &p->dn->vmd[rs_plan_root(p, n->in[0])];
    dnnl_dims_t w = {n->O, s->dims[1], s->dims[2], s->dims[3]};
    dnnl_memory_desc_t from, to;
    DTRY(dnnl_memory_desc_init_by_tag(&from, 4, w, dnnl_f32, dnnl_oihw), "weights desc");
    if (!rs_pdnnl_md_with_batch(s, (int)n->O, &to))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "plan: node %s's input layout does not scale with the batch", n->name);
    void *data;
    size_t bytes;
    rs_status st = reorder_to(p, n, &from, t->data, &to, &data, &bytes, NULL, err);
    if (st) return st;
    rs_plan_tensor_replace(t, RS_F32, 0, data, bytes);
    return RS_OK;
}

/* int8 node: per output channel weight scales from the fp32 weights, the output scales the primitive
 * applies (1 / (input scale x weight scale), a tensor of the plan, so the file keeps them), and the
 * bias in the accumulators' units (oneDNN 2.x adds it before the output scale). */
static rs_status int8_scales(rs_plan *p, rs_pnode *n, rs_err *err)
{
    int64_t OC = n->kind == RS_PK_CONV ? n->g.oc : n->O;
    const rs_ptensor *w = &p->tensors[n->w];
    int64_t per = (int64_t)(w->bytes / sizeof(float)) / OC;
    char name[64];
    snprintf(name, sizeof name, "%.50s.oscales", n->name);
    int t = rs_plan_add_tensor(p, name, 1, &OC, NULL);
    if (t < 0) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
    n->oscales = t;
    w = &p->tensors[n->w]; /* the array may have moved */
    float *os = p->tensors[t].data, *b = n->b >= 0 ? p->tensors[n->b].data : NULL;
    const float *wd = w->data;
    for (int64_t o = 0; o < OC; o++) {
        float amax = 0;
        for (int64_t j = 0; j < per; j++) amax = fabsf(wd[o * per + j]) > amax ? fabsf(wd[o * per + j]) : amax;
        float sw = amax > 0 ? 127.0f / amax : 1.0f;
        os[o] = 1.0f / (n->qscale * sw);
        if (b) b[o] *= n->qscale * sw;
    }
    return RS_OK;
}

/* Whether oneDNN's effective ISA multiplies 8-bit pairs into 32 bits (VNNI: vpdpbusd). Without it
 * its int8 kernels sum two u8 x s8 products in a saturating 16-bit lane (vpmaddubsw) first. */
static bool dnnl_isa_has_vnni(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx2_vnni || isa == dnnl_cpu_isa_avx512_core_vnni ||
           isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

/* int8 node i (slot 0, d, made): oneDNN's GEMM kernel for s8 x s8 (`x64:gemm_s8s8s32:jit`, its inner
 * products on AVX2) shifts the input to u8 and, without VNNI, adds pairs of u8 x s8 products in 16
 * bits: 255 x 127 x 2 = 64770 saturates at 32767 (measured on AVX2: 29603 off in an accumulator of
 * 60227, the mlp test's plan 0.142 off fp32). oneDNN's direct int8 convolutions halve their s8
 * weights themselves when they lay them out; its GEMM leaves that to the caller. So such a node's
 * weights take 7 bits (w * 63.5 / max|w|: 64 x 255 x 2 = 32640 fits), its output scales doubled and
 * its bias halved to match, and its primitive is made again with them. The report says so. */
static rs_status int8_pairs_fit(rs_plan *p, int i, rs_pdnnl_prim *d, rs_err *err)
{
    rs_pnode *n = &p->nodes[i];
    const char *impl = NULL;
    dnnl_primitive_desc_query(d->pd, dnnl_query_impl_info_str, 0, &impl);
    if (dnnl_isa_has_vnni() || !impl || !strstr(impl, "gemm_s8")) return RS_OK;
    float *os = p->tensors[n->oscales].data, *b = n->b >= 0 ? p->tensors[n->b].data : NULL;
    int64_t OC = (int64_t)(p->tensors[n->oscales].bytes / sizeof(float));
    for (int64_t o = 0; o < OC; o++) {
        os[o] *= 2.0f;
        if (b) b[o] *= 0.5f;
    }
    char isa[32], line[256];
    rs_plan_dnnl_isa(isa, sizeof isa);
    snprintf(line, sizeof line, "%s %.40s: int8 weights at 7 bits (oneDNN's %.40s on %s, no VNNI, adds pairs of "
             "8-bit products in 16 bits)", rs_pk_name(n->kind), n->name, impl, isa);
    rs_plan_note(p, line);
    rs_pdnnl_free_prim(d);
    return rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, d, err);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bytes primitive d writes in the arena: its output, or the value's layout it reorders that into. */
static size_t out_bytes(const rs_pdnnl_prim *d)
{
    size_t a = dnnl_memory_desc_get_size(&d->dst), b = d->dst_cvt ? dnnl_memory_desc_get_size(&d->user_dst) : 0;
    return a > b ? a : b;
}

/* The fastest ms of node n's primitives a and b (two algorithms for the same node, the same input and
 * output layouts), run in turns on the same buffers; at most 21 runs each and about 0.2 s. The
 * fastest, not the median: on this shared 2-core machine a two-thread run's median is how long its
 * second thread waited for a core (9 ms against 1.2 for the same primitive, runs apart). */
static rs_status time_pair(rs_plan *p, const rs_pnode *n, rs_pdnnl_prim *a, rs_pdnnl_prim *b, double *ta, double *tb,
                           rs_err *err)
{
    enum { RUNS = 21, WARM = 2 };
    /* a runs the whole batch in one primitive (b may run it per sample) */
    size_t sbytes = dnnl_memory_desc_get_size(&a->user_src), dbytes = out_bytes(a);
    size_t sb = dnnl_memory_desc_get_size(&b->user_src), db = out_bytes(b);
    sbytes = sb > sbytes ? sb : sbytes;
    dbytes = db > dbytes ? db : dbytes; /* int8 and fp32 may choose other output layouts */
    size_t pa = rs_pdnnl_prim_scratch(a), pb = rs_pdnnl_prim_scratch(b);
    float *src = rs_plan_aligned_alloc(sbytes), *dst = rs_plan_aligned_alloc(dbytes); /* owned here */
    char *scratch = rs_plan_aligned_alloc(pa > pb ? pa : pb);
    rs_status st = RS_OK;
    if (!src || !dst || !scratch) st = rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory timing node %s", n->name);
    /* activations of either sign around 1: no denormals, no zeros a kernel could skip */
    for (size_t i = 0; !st && i < sbytes / sizeof(float); i++) src[i] = (float)((i * 7919) % 251) / 125.0f - 1.0f;
    double xa[RUNS], xb[RUNS], t0 = 1e3 * rs_plan_now_s();
    int runs = 0;
    for (int r = -WARM; !st && r < RUNS; r++) {
        double t[3];
        dnnl_status_t s = dnnl_success;
        t[0] = 1e3 * rs_plan_now_s();
        s = rs_pdnnl_exec_prim(p, n, a, src, dst, scratch);
        if (s == dnnl_success) s = dnnl_stream_wait(p->dn->strm);
        t[1] = 1e3 * rs_plan_now_s();
        if (s == dnnl_success) s = rs_pdnnl_exec_prim(p, n, b, src, dst, scratch);
        if (s == dnnl_success) s = dnnl_stream_wait(p->dn->strm);
        t[2] = 1e3 * rs_plan_now_s();
        if (s != dnnl_success) st = rs_pdnnl_fail(err, s, "execute", n);
        if (st || r < 0) continue;
        xa[runs] = t[1] - t[0];
        xb[runs] = t[2] - t[1];
        runs++;
        if (runs >= 5 && t[2] - t0 > 200) break;
    }
    if (!st) {
        qsort(xa, (size_t)runs, sizeof *xa, cmp_double);
        qsort(xb, (size_t)runs, sizeof *xb, cmp_double);
        *ta = xa[0];
        *tb = xb[0];
    }
    free(src);
    free(dst);
    free(scratch);
    return st;
}

/* Int8 node n back to fp32: int8_scales put its bias in the accumulators' units (int8_pairs_fit
 * kept their product), back to fp32's; its output scales are dropped. */
static void int8_undo(rs_plan *p, rs_pnode *n)
{
    const float *os = p->tensors[n->oscales].data;
    float *b = n->b >= 0 ? p->tensors[n->b].data : NULL;
    int64_t OC = (int64_t)(p->tensors[n->oscales].bytes / sizeof(float));
    for (int64_t o = 0; b && o < OC; o++) b[o] *= os[o];
    n->oscales = -1;
    n->prec = RS_PLAN_FP32;
}

/* A zeroed weights buffer for primitive c (timing only: the same work whatever the weights). */
static rs_status zero_weights(const rs_pnode *n, rs_pdnnl_prim *c, rs_err *err)
{
    size_t bytes = dnnl_memory_desc_get_size(&c->wei);
    c->wei_alt = rs_plan_aligned_alloc(bytes ? bytes : 64);
    if (!c->wei_alt) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory timing node %s", n->name);
    memset(c->wei_alt, 0, bytes);
    return RS_OK;
}

/* Int8 node i (slot 0, d, made with a jit kernel) stays int8 only where it pays: an int8 and an fp32
 * primitive of the node, each in the output layout it chooses itself, are timed on one thread at the
 * plan's batch (time_pair; zero weights: timing only) and the faster is kept. int8 adds a reorder of
 * its input to 8 bits (and, summing into a residual its kernels do not write, two copies of it:
 * dnnl.c's cvt_dst), and without VNNI it multiplies 8-bit pairs in three instructions (vpmaddubsw,
 * vpmaddwd, vpaddd) where VNNI has one: a small node or an AVX2 CPU may run it slower than fp32.
 * fp32 is not timed where oneDNN has only its reference kernel for it (int8 wins). The report gets
 * one line naming the node, the choice and the times. */
static rs_status int8_pays(rs_plan *p, int i, const rs_plan_opts *o, rs_pdnnl_prim *d, rs_err *err)
{
    rs_pnode *n = &p->nodes[i];
    if (o->int8_all) return RS_OK;
    int v = n->out;
    bool chose = p->values[v].layout == 1; /* d chose v's layout: fp32 chooses its own */
    dnnl_memory_desc_t md8 = p->dn->vmd[v], md32;
    int64_t pad8 = p->values[v].padded, pad32 = 0;
    rs_pdnnl_prim c[2] = {{0}}; /* fp32, int8: made for one thread (d runs the build's threads, which
                                    on a loaded machine would time how long the others wait for a core) */
    double t[2] = {0};
    int was = omp_get_max_threads();
    omp_set_num_threads(1);
    rs_status st = rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, &c[1], err);
    if (chose) {
        p->dn->vset[v] = 0;
        p->values[v].padded = 0;
    }
    n->prec = RS_PLAN_FP32;
    if (!st) st = rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, &c[0], err);
    n->prec = RS_PLAN_INT8;
    md32 = p->dn->vmd[v];
    pad32 = p->values[v].padded;
    const char *impl = NULL;
    if (!st) dnnl_primitive_desc_query(c[0].pd, dnnl_query_impl_info_str, 0, &impl);
    bool slow = !impl || strncmp(impl, "ref", 3) == 0;
    for (int j = 0; j < 2 && !st && !slow; j++) st = zero_weights(n, &c[j], err);
    if (!st && !slow) st = time_pair(p, n, &c[0], &c[1], &t[0], &t[1], err);
    rs_pdnnl_free_prim(&c[0]);
    rs_pdnnl_free_prim(&c[1]);
    omp_set_num_threads(was);
    if (st) return st;
    bool int8 = slow || t[1] < t[0];
    if (chose) { /* the layout of the kept one */
        p->dn->vmd[v] = int8 ? md8 : md32;
        p->values[v].padded = int8 ? pad8 : pad32;
    }
    char isa[32], line[256];
    rs_plan_dnnl_isa(isa, sizeof isa);
    if (slow)
        snprintf(line, sizeof line, "%s %.40s: int8 (fp32 here is oneDNN's %.40s on %s)", rs_pk_name(n->kind), n->name,
                 impl ? impl : "?", isa);
    else
        snprintf(line, sizeof line, "%s %.40s: %s (%.3f ms) over %s (%.3f ms) at batch %d on %s, timed on 1 thread",
                 rs_pk_name(n->kind), n->name, int8 ? "int8" : "fp32", int8 ? t[1] : t[0], int8 ? "fp32" : "int8",
                 int8 ? t[0] : t[1], p->batch, isa);
    rs_plan_note(p, line);
    if (int8) return RS_OK;
    int8_undo(p, n);
    rs_pdnnl_free_prim(d);
    return rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, d, err);
}

/* The algorithm node n's convolution runs at batch B: the one timed at the plan's batch, or at
 * batch 1 for batches nearer 1 (geometrically) than the plan's. Per sample is batch 1's kernel at
 * any batch (at 2..8 the batch Winograd kernel would be the 4x4 tiles that lost): batch 1 runs it
 * as it is. */
int rs_pdnnl_alg_for(const rs_plan *p, const rs_pnode *n, int B)
{
    if (n->kind != RS_PK_CONV) return RS_PCONV_DIRECT;
    if (n->alg == RS_PCONV_SAMPLES) return B == 1 ? n->alg1 : RS_PCONV_SAMPLES;
    return B == p->batch || (double)B * B > (double)p->batch ? n->alg : n->alg1;
}

/* Weights for primitive d of node i: the tensor's bytes where they are laid out as d wants, else a
 * copy in d->wei_alt reordered from them. The tensor is plain (Winograd at the plan's batch, or
 * before finalize) or in slot 0's layout; oneDNN makes Winograd weights from plain ones only, so a
 * blocked tensor goes through a plain copy first. */
rs_status rs_pdnnl_slot_weights(rs_plan *p, int i, rs_pdnnl_prim *d, rs_err *err)
{
    const rs_pnode *n = &p->nodes[i];
    const rs_ptensor *t = &p->tensors[n->w];
    dnnl_memory_desc_t plain = plain_weights(p, n);
    const dnnl_memory_desc_t *have = t->layout == 0 ? &plain : &p->dn->slot[i][0].wei;
    if (dnnl_memory_desc_equal(have, &d->wei)) return RS_OK;
    size_t bytes;
    if (d->wei.format_kind == dnnl_format_kind_wino && t->layout != 0) {
        void *tmp; /* owned here */
        rs_status st = reorder_to(p, n, have, t->data, &plain, &tmp, &bytes, NULL, err);
        if (!st) st = reorder_to(p, n, &plain, tmp, &d->wei, &d->wei_alt, &bytes, NULL, err);
        free(tmp);
        return st;
    }
    return reorder_to(p, n, have, t->data, &d->wei, &d->wei_alt, &bytes, NULL, err);
}

/* Node i (an fp32 3x3 stride-1 convolution over 8 or more channels; its weights still plain) at
 * batch B: Winograd where oneDNN has it (jit_wino_4x3 at larger batches, jit_fp32_wino_2x3 at batch
 * 1, AVX-512: 2.25x fewer multiplies, more memory traffic for the transforms) and, at B > 1 when
 * the batch-1 kernel won at batch 1 (a1), that kernel once per sample; kept when `want` forces it or
 * when it runs at least 5% faster than the best before it (its transforms round more: within 1e-6 of
 * the output's scale in tests/plan). All are timed on one thread whatever the plan's count: on this
 * shared 2-core machine a two-thread time is mostly how long the second thread waited for a core
 * (15 ms against 0.45 on one thread for Fashion's second conv at load 7), which decided nothing; the
 * kernels' ratio is their own. Returns the choice; the report gets one line. */
static rs_status pick_conv_alg(rs_plan *p, int i, int B, rs_plan_conv_alg want, int a1, int *alg, rs_err *err)
{
    static const char *const names[] = {"direct", "winograd", "winograd per sample"};
    const rs_pnode *n = &p->nodes[i];
    rs_pdnnl_prim c[3] = {{0}}; /* indexed by RS_PCONV_* */
    bool have[3] = {true, false, false};
    double t[3] = {0};
    int forced = want == RS_PLAN_CONV_WINOGRAD                  ? RS_PCONV_WINOGRAD
                 : want == RS_PLAN_CONV_SAMPLES                 ? (B > 1 ? RS_PCONV_SAMPLES : RS_PCONV_WINOGRAD)
                                                                : -1;
    rs_err why = {0}; /* oneDNN without a kernel for this shape or ISA: that candidate is not one */
    int was = omp_get_max_threads();
    omp_set_num_threads(1);
    rs_status st = RS_OK;
    if (forced < 0 || forced == RS_PCONV_WINOGRAD)
        have[1] = rs_pdnnl_make_prim(p, i, B, RS_PCONV_WINOGRAD, &c[1], &why) == RS_OK;
    if (B > 1 && (forced == RS_PCONV_SAMPLES || (forced < 0 && a1 == RS_PCONV_WINOGRAD)))
        have[2] = rs_pdnnl_make_prim(p, i, B, RS_PCONV_SAMPLES, &c[2], &why) == RS_OK;
    int best = RS_PCONV_DIRECT;
    char line[160];
    line[0] = 0;
    if (forced >= 0) {
        if (have[forced]) {
            best = forced;
            snprintf(line, sizeof line, "conv %.40s: %s at batch %d (asked for)", n->name, names[best], B);
        }
    } else if (have[1] || have[2]) {
        st = rs_pdnnl_make_prim(p, i, B, RS_PCONV_DIRECT, &c[0], err);
        for (int k = 0; k < 3 && !st; k++)
            if (have[k]) st = rs_pdnnl_slot_weights(p, i, &c[k], err);
        if (!st && have[1]) {
            st = time_pair(p, n, &c[0], &c[1], &t[0], &t[1], err);
            if (!st && t[1] < 0.95 * t[0]) best = RS_PCONV_WINOGRAD;
        }
        if (!st && have[2]) {
            st = time_pair(p, n, &c[best], &c[2], &t[best], &t[2], err);
            if (!st && t[2] < 0.95 * t[best]) best = RS_PCONV_SAMPLES;
        }
        int len = snprintf(line, sizeof line, "conv %.40s: %s (%.3f ms) over", n->name, names[best], t[best]);
        for (int k = 0, first = 1; k < 3 && len < (int)sizeof line; k++)
            if (k != best && have[k]) {
                len += snprintf(line + len, sizeof line - (size_t)len, "%s %s (%.3f ms)", first ? "" : ",", names[k], t[k]);
                first = 0;
            }
        if (len < (int)sizeof line)
            snprintf(line + len, sizeof line - (size_t)len, " at batch %d, timed on 1 thread", B);
    }
    for (int k = 0; k < 3; k++) rs_pdnnl_free_prim(&c[k]);
    omp_set_num_threads(was);
    if (st) return st;
    *alg = best;
    if (line[0]) rs_plan_note(p, line);
    return RS_OK;
}

/* A bf16 convolution over an image's few channels (slot 0, d, made in bf16): an fp32 primitive and a
 * second bf16 one are timed on one thread at the plan's batch (time_pair's reasons), and the node
 * stays bf16 only when that is at least 5% faster: it rounds the image to 8 bits of mantissa for
 * nothing otherwise. Slot 0 is made again in fp32 when fp32 wins. The report gets one line. */
static rs_status pick_image_prec(rs_plan *p, int i, rs_pdnnl_prim *d, rs_err *err)
{
    rs_pnode *n = &p->nodes[i];
    rs_pdnnl_prim c[2] = {{0}}; /* fp32, bf16 */
    double t[2] = {0};
    int was = omp_get_max_threads();
    omp_set_num_threads(1);
    n->prec = RS_PLAN_FP32;
    rs_status st = rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, &c[0], err);
    n->prec = RS_PLAN_BF16;
    if (!st) st = rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, &c[1], err);
    /* not timed against a reference or gemm kernel (8 output channels: ref:any, 70 ms a batch of 64
     * against 0.14 fp32, and 21 runs of it would make compile wait) */
    const char *impl = NULL;
    if (!st) dnnl_primitive_desc_query(c[1].pd, dnnl_query_impl_info_str, 0, &impl);
    bool slow = !impl || strncmp(impl, "ref", 3) == 0 || strstr(impl, "gemm");
    for (int k = 0; k < 2 && !st && !slow; k++) st = rs_pdnnl_slot_weights(p, i, &c[k], err);
    if (!st && !slow) st = time_pair(p, n, &c[0], &c[1], &t[0], &t[1], err);
    rs_pdnnl_free_prim(&c[0]);
    rs_pdnnl_free_prim(&c[1]);
    omp_set_num_threads(was);
    if (st) return st;
    bool bf16 = !slow && t[1] < 0.95 * t[0];
    char line[160];
    if (slow)
        snprintf(line, sizeof line, "conv %.40s: fp32 (oneDNN's bf16 kernel for it is %.40s)", n->name, impl ? impl : "?");
    else
        snprintf(line, sizeof line, "conv %.40s: %s (%.3f ms) over %s (%.3f ms) at batch %d, timed on 1 thread", n->name,
                 bf16 ? "bf16" : "fp32", bf16 ? t[1] : t[0], bf16 ? "fp32" : "bf16", bf16 ? t[0] : t[1], p->batch);
    rs_plan_note(p, line);
    if (bf16) return RS_OK;
    n->prec = RS_PLAN_FP32;
    rs_pdnnl_free_prim(d);
    return rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, d, err);
}

/* Grouped conv i (depthwise and the rest; fp32 or bf16, slot 0 d made with oneDNN's first choice):
 * oneDNN 2.6 ranks its implementations by ISA, not by shape, and its first is not always its fastest
 * (mobilenet_v3_small's 5x5 depthwise convs at batch 64 on AVX-512, one thread: 0.09-0.15 ms each on
 * brdgmm_dw:avx512_core, its first, against 0.04-0.11 on jit_dw:avx512_core). Every implementation it
 * offers for the node's descriptors but its reference ones (and, for a depthwise conv, its gemm one)
 * is timed against its first (time_pair: one thread, the plan's batch, zero weights, each in the
 * output layout it chooses itself, its input reorder included), and one at least 5% faster than that
 * is kept: its name goes in n->impl (the plan file keeps it), which every primitive of the node then
 * asks oneDNN for. The report gets one line. int8 nodes are left to oneDNN (int8_pairs_fit's 7-bit
 * weights are for the kernel it chose). */
static rs_status pick_impl(rs_plan *p, int i, rs_pdnnl_prim *d, rs_err *err)
{
    enum { MAXC = 8 };
    rs_pnode *n = &p->nodes[i];
    int v = rs_plan_root(p, n->out);
    bool chose = p->values[v].layout == 1; /* d chose v's layout: each candidate chooses its own */
    char names[MAXC][48], first[48];
    const char *impl = NULL;
    dnnl_primitive_desc_query(d->pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(first, sizeof first, "%s", impl ? impl : "");
    int nc = 0, best = -1;
    double t0 = 1e30, tbest = 1e30, t[MAXC];
    rs_pdnnl_prim c0 = {0}, c = {0};
    int was = omp_get_max_threads();
    omp_set_num_threads(1);
    if (chose) p->dn->vset[v] = 0, p->values[v].padded = 0;
    rs_status st = rs_pdnnl_impl_names(p, i, p->batch, names, MAXC, &nc, err);
    n->impl[0] = 0;
    if (!st) st = rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, &c0, err);
    if (!st) st = zero_weights(n, &c0, err);
    for (int k = 0; k < nc && !st; k++) {
        t[k] = -1;
        /* a depthwise conv as im2col + gemm: 4-14 ms against 0.04-0.6 for the jit kernels on each of
         * mobilenet_v3_small's at batch 64, AVX2 and AVX-512 alike; timing it was half of compile */
        if (!strcmp(names[k], first) || (n->group == n->g.c && strstr(names[k], "gemm"))) continue;
        if (chose) p->dn->vset[v] = 0, p->values[v].padded = 0;
        memcpy(n->impl, names[k], sizeof n->impl); /* both 48, NUL-terminated */
        rs_err why = {0}; /* a candidate oneDNN cannot make after all is not one */
        if (rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, &c, &why) == RS_OK) {
            impl = NULL;
            dnnl_primitive_desc_query(c.pd, dnnl_query_impl_info_str, 0, &impl);
            double ta;
            if (impl && !strcmp(impl, names[k]) && !(st = zero_weights(n, &c, err)))
                st = time_pair(p, n, &c0, &c, &ta, &t[k], err);
            if (!st && t[k] >= 0) {
                t0 = ta < t0 ? ta : t0;
                if (t[k] < tbest) best = k, tbest = t[k];
            }
        }
        rs_pdnnl_free_prim(&c);
        n->impl[0] = 0;
    }
    rs_pdnnl_free_prim(&c0);
    omp_set_num_threads(was);
    if (chose) p->dn->vset[v] = 0, p->values[v].padded = 0; /* slot 0 chooses it again below */
    if (st) return st;
    if (best < 0) { /* nothing else to time: oneDNN's choice, as it was */
        rs_pdnnl_free_prim(d);
        return rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, d, err);
    }
    bool other = tbest < 0.95 * t0;
    memcpy(n->impl, other ? names[best] : first, sizeof n->impl);
    char line[160];
    int len;
    if (other)
        len = snprintf(line, sizeof line, "conv %.40s: kernel %s (%.3f ms) over %s (%.3f ms) at batch %d on 1 thread",
                       n->name, n->impl, tbest, first, t0, p->batch);
    else
        len = snprintf(line, sizeof line,
                       "conv %.40s: kernel %s (%.3f ms), oneDNN's first, kept: the next, %s (%.3f ms), is not 5%% "
                       "faster at batch %d on 1 thread",
                       n->name, n->impl, t0, names[best], tbest, p->batch);
    for (int k = 0, m = 0; k < nc && len < (int)sizeof line; k++)
        if (t[k] >= 0 && k != best)
            len += snprintf(line + len, sizeof line - (size_t)len, "%s%s (%.3f ms)", m++ ? ", " : "; also ", names[k],
                            t[k]);
    rs_plan_note(p, line);
    rs_pdnnl_free_prim(d);
    return rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, d, err);
}

/* bf16 or int8 node i's primitive at the plan's batch into slot 0 (d): in its precision where oneDNN
 * has a kernel for it on this CPU, fp32 where it has none (bf16's descriptor is unimplemented: inner
 * products and most convolutions on AVX2) or only its reference kernel (`ref:any`, `ref_int8:any`,
 * hundreds of times slower than fp32's jit: an int8 convolution writing the plain fp32 memory of a
 * residual sum, resnet18's, on every ISA). oneDNN decides, per node, as it would at run time: no CPU
 * flag is read here. The node's precision then says what runs, and the report gets one line naming
 * the node and why. */
static rs_status lowp_or_fp32(rs_plan *p, int i, rs_pdnnl_prim *d, rs_err *err)
{
    rs_pnode *n = &p->nodes[i];
    rs_err why = {0};
    dnnl_status_t ds;
    rs_status st = rs_pdnnl_make_prim_why(p, i, p->batch, RS_PCONV_DIRECT, d, &ds, &why);
    const char *impl = NULL;
    if (!st) dnnl_primitive_desc_query(d->pd, dnnl_query_impl_info_str, 0, &impl);
    if (!st && impl && strncmp(impl, "ref", 3) != 0) return RS_OK;
    /* only oneDNN's "unimplemented" means no bf16 kernel; any other failure is the plan's own */
    if (st && ds != dnnl_unimplemented) {
        *err = why;
        return st;
    }
    char isa[32], line[256];
    rs_plan_dnnl_isa(isa, sizeof isa);
    if (st)
        snprintf(line, sizeof line, "%s %.40s: %s unimplemented by oneDNN %s on %s; stays fp32", rs_pk_name(n->kind),
                 n->name, rs_plan_prec_name(n->prec), p->dnnl_version, isa);
    else
        snprintf(line, sizeof line, "%s %.40s: %s only as oneDNN %s's reference kernel %.40s on %s; stays fp32",
                 rs_pk_name(n->kind), n->name, rs_plan_prec_name(n->prec), p->dnnl_version, impl ? impl : "?", isa);
    rs_plan_note(p, line);
    rs_pdnnl_free_prim(d);
    /* the bf16 attempt may have fixed the output's layout: fp32's primitive chooses it again */
    if (p->values[n->out].layout == 1) {
        p->dn->vset[n->out] = 0;
        p->values[n->out].padded = 0;
    }
    if (n->prec == RS_PLAN_INT8) int8_undo(p, n);
    n->prec = RS_PLAN_FP32;
    return rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, d, err);
}

rs_status rs_plan_dnnl_finalize_weights(rs_plan *p, const rs_plan_opts *o, rs_err *err)
{
    rs_plan_conv_alg alg = o->conv_alg;
    /* in order: a node's input layout is known when its primitive is made */
    for (int i = 0; i < p->nnodes; i++) {
        rs_pnode *n = &p->nodes[i];
        if (!rs_plan_node_is_dnnl(n)) continue;
        if (rs_pdnnl_can_block(p, n->out)) /* it checks the writer too */
            p->values[n->out].layout = 1;
        if (n->prec == RS_PLAN_INT8) {
            rs_status st = int8_scales(p, n, err);
            if (st) return st;
        }
        rs_pdnnl_prim *d = &p->dn->slot[i][0];
        n->alg = n->alg1 = RS_PCONV_DIRECT;
        /* bf16 over an image: only where oneDNN's first-conv kernel takes it (plain input, an output
         * layout fixed by its channels, as the fp32 kernel's) */
        bool image16 = n->kind == RS_PK_CONV && n->prec == RS_PLAN_BF16 && n->g.c < 4 && n->group == 1;
        if (image16 && (o->image_bf16 < 0 || n->g.oc % 8 || (n->in[0] > 0 && p->values[rs_plan_root(p, n->in[0])].layout == 1))) {
            n->prec = RS_PLAN_FP32;
            image16 = false;
        }
        if (!d->B) {
            rs_status st = n->prec != RS_PLAN_FP32 ? lowp_or_fp32(p, i, d, err)
                                                   : rs_pdnnl_make_prim(p, i, p->batch, RS_PCONV_DIRECT, d, err);
            if (st) return st;
            image16 = image16 && n->prec == RS_PLAN_BF16;
        }
        if (image16 && !o->image_bf16) {
            rs_status st = pick_image_prec(p, i, d, err);
            if (st) return st;
        }
        if (n->prec == RS_PLAN_INT8) {
            rs_status st = int8_pays(p, i, o, d, err);
            if (!st && n->prec == RS_PLAN_INT8) st = int8_pairs_fit(p, i, d, err);
            if (st) return st;
        }
        if (n->kind == RS_PK_CONV && n->group > 1 && n->prec != RS_PLAN_INT8) {
            rs_status st = pick_impl(p, i, d, err);
            if (st) return st;
        }
        if (n->kind != RS_PK_CONV && n->kind != RS_PK_LINEAR) continue;
        const rs_conv_geom *g = &n->g;
        /* an image's few channels: the Winograd kernels work on blocks of 16 (Fashion's 1-channel
         * conv: 0.76 ms against 0.20 direct at batch 64) */
        if (n->kind == RS_PK_CONV && n->prec == RS_PLAN_FP32 && alg != RS_PLAN_CONV_DIRECT && g->kh == 3 && g->kw == 3 &&
            g->sh == 1 && g->sw == 1 && g->c >= 8 && n->group == 1) {
            /* batch 1 first: its answer decides whether its kernel is tried once per sample */
            int a = RS_PCONV_DIRECT, a1 = RS_PCONV_DIRECT;
            rs_status st = p->batch > 1 ? pick_conv_alg(p, i, 1, alg, -1, &a1, err) : RS_OK;
            if (!st) st = pick_conv_alg(p, i, p->batch, alg, a1, &a, err);
            if (st) return st;
            n->alg1 = p->batch > 1 ? a1 : a;
            if (a != RS_PCONV_DIRECT) {
                /* its weights stay plain: each primitive lays them out its own way (rs_pdnnl_slot_weights) */
                rs_pdnnl_free_prim(d);
                n->alg = a;
                st = rs_pdnnl_make_prim(p, i, p->batch, a, d, err);
                if (!st) st = rs_pdnnl_slot_weights(p, i, d, err);
                if (st) return st;
                continue;
            }
        }
        rs_ptensor *t = &p->tensors[n->w];
        if (t->layout != 0) continue; /* shared with a node already done (it never is today) */
        if (n->kind == RS_PK_LINEAR && n->in[0] > 0 && p->values[rs_plan_root(p, n->in[0])].layout == 1) {
            rs_status st = blocked_weights(p, n, t, err);
            if (st) return st;
        }
        dnnl_memory_desc_t plain = plain_weights(p, n);
        void *to;
        size_t bytes;
        dnnl_primitive_attr_t wattr = NULL;
        float *ws = NULL;
        if (n->prec == RS_PLAN_INT8) { /* w_q[oc] = round(w[oc] * 127 / max|w[oc]|): per output channel */
            const float *os = p->tensors[n->oscales].data;
            int64_t OC = (int64_t)(p->tensors[n->oscales].bytes / sizeof(float));
            ws = malloc((size_t)OC * sizeof *ws);
            if (!ws) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
            for (int64_t o = 0; o < OC; o++) ws[o] = 1.0f / (os[o] * n->qscale);
            DTRY(dnnl_primitive_attr_create(&wattr), "attributes");
            /* per output channel: dim 0 of (OC, ...), dims 0 and 1 of the grouped (G, OC / G, ...) */
            dnnl_primitive_attr_set_output_scales(wattr, OC, n->group > 1 ? 3 : 1 << 0, ws);
        }
        rs_status st = reorder_to(p, n, &plain, t->data, &d->wei, &to, &bytes, wattr, err);
        if (wattr) dnnl_primitive_attr_destroy(wattr);
        free(ws);
        if (st) return st;
        rs_plan_tensor_replace(t, n->prec == RS_PLAN_BF16 ? RS_BF16 : n->prec == RS_PLAN_INT8 ? RS_I8 : RS_F32, 1, to, bytes);
    }
    return RS_OK;
}
