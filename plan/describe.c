/* The plan as text (`plan show`, and the node table `compile` prints). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

static void add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t cap = (b->cap ? 2 * b->cap : 1024) + (size_t)k;
        char *q = realloc(b->s, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->s = q;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

static void what(const rs_plan *p, const rs_pnode *n, char *buf, size_t len)
{
    const rs_conv_geom *g = &n->g;
    switch (n->kind) {
    case RS_PK_CONV:
        /* dwconv: one group per channel (depthwise); gconv: grouped */
        snprintf(buf, len, "%s %dx%dx%d>%dx%dx%d k%d s%d p%d",
                 n->group == 1 ? "conv" : n->group == g->c ? "dwconv" : "gconv", g->c, g->h, g->w, g->oc, g->oh, g->ow,
                 g->kh, g->sh, g->ph);
        break;
    case RS_PK_MAXPOOL:
    case RS_PK_AVGPOOL:
        snprintf(buf, len, "%s %dx%dx%d>%dx%d k%d s%d", n->kind == RS_PK_MAXPOOL ? "maxpool" : "avgpool", g->c, g->h,
                 g->w, g->oh, g->ow, g->kh, g->sh);
        break;
    case RS_PK_LINEAR:
        if (n->rows > 1) snprintf(buf, len, "linear %d>%d x%lld rows", n->I, n->O, (long long)n->rows);
        else snprintf(buf, len, "linear %d>%d", n->I, n->O);
        break;
    case RS_PK_ACT: snprintf(buf, len, "%s", rs_plan_act_name(n->act)); break;
    case RS_PK_LAYERNORM: snprintf(buf, len, "layernorm over %d", n->C); break;
    case RS_PK_EMBED: snprintf(buf, len, "embed %d tokens x %d of %d", n->T, n->C, n->V); break;
    case RS_PK_ATTN: snprintf(buf, len, "attn T=%d C=%d heads=%d", n->T, n->C, n->heads); break;
    case RS_PK_ADD: snprintf(buf, len, "add"); break;
    case RS_PK_OP: snprintf(buf, len, "%s", rs_op_name(n->op)); break;
    default: snprintf(buf, len, "%s", rs_pk_name(n->kind)); break;
    }
    (void)p;
}

static void post_str(const rs_pnode *n, char *buf, size_t len)
{
    buf[0] = 0;
    size_t at = 0;
    for (int j = 0; j < n->npost && at < len; j++)
        at += (size_t)snprintf(buf + at, len - at, " +%s", n->post[j].kind == RS_PPOST_SUM ? "sum" : rs_plan_act_name(n->post[j].op));
}

void rs_plan_target(const rs_plan *p, char *buf, size_t n)
{
    if (p->dev == RS_PLAN_DEV_CUDA)
        snprintf(buf, n, "cuda %s, cuDNN %s, cuBLASLt %s", p->cuda_target, p->cudnn_version, p->cublaslt_version);
    else
        snprintf(buf, n, "cpu %s, oneDNN %s", p->isa, p->dnnl_version);
}

char *rs_plan_describe(const rs_plan *p)
{
    sbuf b = {0};
    rs_plan_stats st;
    rs_plan_get_stats(p, &st);
    if (p->dev == RS_PLAN_DEV_CUDA)
        add(&b, "plan: %s, batch up to %d, %s on cuda %s (cuDNN %s, cuBLASLt %s)%s\n", p->source, p->batch,
            rs_plan_prec_name(p->prec), p->cuda_target, p->cudnn_version, p->cublaslt_version,
            p->cu ? "" : "; not opened on a GPU here");
    else
        add(&b, "plan: %s, batch up to %d, %s on %s (oneDNN %s, %s)\n", p->source, p->batch, rs_plan_prec_name(p->prec),
            p->device, p->dnnl_version, p->isa);
    add(&b, "nodes: %d before, %d after (%d views removed, %d rewrites)\n", st.nodes_before, st.nodes_after,
        st.views_removed, st.fusions);
    add(&b, "  %-2s %-5s %-28s %-4s %-11s %s\n", "#", "layer", "node", "prec", "post-ops", "kernel");
    for (int i = 0; i < p->nnodes; i++) {
        const rs_pnode *n = &p->nodes[i];
        char w[96], po[64];
        what(p, n, w, sizeof w);
        post_str(n, po, sizeof po);
        /* a per-sample conv's kernel name with " per sample" is wider than the column: its batch-1
         * kernel is in `plan bench nodes=on` */
        const char *impl = p->dev == RS_PLAN_DEV_CUDA   ? rs_plan_cuda_impl(p, i)
                           : !rs_plan_node_is_dnnl(n)   ? "engine cpu table"
                           : n->alg == RS_PCONV_SAMPLES ? "winograd per sample"
                                                        : rs_plan_dnnl_impl(p, i);
        add(&b, "  %-2d %-5.5s %-28.28s %-4s %-11.11s %.22s\n", i, n->name, w, rs_plan_prec_name(n->prec),
            po[0] ? po + 1 : "-", impl);
    }
    add(&b, "memory: arena %zu bytes (activations %zu + scratch %zu) with reuse; %zu without (%.1fx)\n", st.arena_bytes,
        p->scratch_off, st.arena_bytes - p->scratch_off, st.naive_bytes,
        st.arena_bytes ? (double)st.naive_bytes / (double)st.arena_bytes : 0.0);
    add(&b, "  %-5s %-12s %-12s %s\n", "value", "arena offset", "bytes", "alive (nodes)");
    for (int v = 1; v < p->nvalues; v++) {
        const rs_pvalue *x = &p->values[v];
        if (x->alias >= 0 || x->def < 0) continue;
        add(&b, "  %-5d %-12lld %-12zu %d..%d\n", v, (long long)x->offset, (size_t)x->numel * (size_t)p->batch * 4, x->def,
            x->last);
    }
    add(&b, "weights: %zu bytes in %d tensors\n", st.weight_bytes, p->ntensors);
    for (int i = 0; i < p->nfusions; i++) add(&b, "  rewrite: %s\n", p->fusions[i]);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
