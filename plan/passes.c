/* The graph passes of compile, in order: dead nodes out, views out (their value becomes an alias of
 * their input's memory), per-channel scale/shift folded into the conv or linear before it (what an
 * imported BatchNormalization became), activations fused as eltwise post-ops, residual adds fused as
 * sum post-ops computed in place, then the graph compacted.
 *
 * Adding a pass: a function over p->nodes that marks what it removes `dead` and records one line in
 * p->fusions per rewrite (note_fusion); the values it makes unused simply lose their writer, and
 * memplan.c places only values some live node writes. Keep the order: a pass may only assume that
 * the ones above it have run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

void rs_plan_note(rs_plan *p, const char *line)
{
    char(*f)[160] = realloc(p->fusions, (size_t)(p->nfusions + 1) * sizeof *f);
    if (!f) return; /* the report loses a line; the plan is unaffected */
    p->fusions = f;
    snprintf(f[p->nfusions++], sizeof f[0], "%s", line);
}

static void note_fusion(rs_plan *p, const char *fmt, const char *a, const char *b, const char *c)
{
    char line[160];
    snprintf(line, sizeof line, fmt, a, b, c);
    rs_plan_note(p, line);
}

static bool is_product(const rs_pnode *n) { return n->kind == RS_PK_CONV || n->kind == RS_PK_LINEAR; }

/* Live nodes reading value v (as an input or a fused sum; views are bypassed by then, so their readers
 * read v itself); *only: the one when there is exactly one. Being the plan's output counts twice. */
static int readers(const rs_plan *p, int v, int *only)
{
    int n = 0;
    for (int i = 0; i < p->nnodes; i++) {
        const rs_pnode *x = &p->nodes[i];
        if (x->dead) continue;
        int hits = 0;
        for (int j = 0; j < x->nin; j++) hits += x->in[j] == v;
        for (int j = 0; j < x->npost; j++) hits += x->post[j].kind == RS_PPOST_SUM && x->post[j].value == v;
        if (hits) {
            n += hits;
            if (only) *only = i;
        }
    }
    if (rs_plan_root(p, p->output) == v) n += 2; /* never "the one reader" */
    return n;
}

static void dead_nodes(rs_plan *p)
{
    bool *need = calloc((size_t)p->nvalues, sizeof *need);
    if (!need) return; /* nothing removed: still correct */
    need[p->output] = true;
    for (int i = p->nnodes - 1; i >= 0; i--) {
        rs_pnode *n = &p->nodes[i];
        if (!need[n->out]) {
            n->dead = true;
            note_fusion(p, "dead node %.40s (%.40s) removed%.40s", n->name, rs_pk_name(n->kind), "");
            continue;
        }
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] >= 0) need[n->in[j]] = true;
    }
    free(need);
}

/* A view's value becomes an alias of its input, and whoever read the view reads its input instead
 * (nodes carry their own shapes, so only the bytes matter), which lets the fusions below see a
 * product and its reader across a flatten or a dropout. */
static rs_status views(rs_plan *p, rs_err *err)
{
    int *src = malloc((size_t)p->nvalues * sizeof *src);
    if (!src) return rs_err_set(err, RS_ERR_NOMEM, "compile: out of memory");
    for (int v = 0; v < p->nvalues; v++) src[v] = -1;
    for (int i = 0; i < p->nnodes; i++) {
        rs_pnode *n = &p->nodes[i];
        if (n->dead || n->kind != RS_PK_VIEW) continue;
        p->values[n->out].alias = n->in[0];
        src[n->out] = n->in[0];
        n->dead = true;
        p->views_removed++;
    }
    for (int i = 0; i < p->nnodes; i++) {
        rs_pnode *n = &p->nodes[i];
        for (int j = 0; j < n->nin && !n->dead; j++)
            while (n->in[j] >= 0 && src[n->in[j]] >= 0) n->in[j] = src[n->in[j]];
    }
    free(src);
    return RS_OK;
}

/* Which element of a per-channel constant applies to output channel c, or -1 when the constant is
 * not per channel of this product's output (dims aligned from the right, numpy style). */
static bool per_channel(const rs_plan *p, const rs_pnode *prod, const rs_pnode *z, int k, int64_t *count)
{
    const rs_dims *cd = &z->ds[k], *od = &z->dout;
    int ch_from_right = prod->kind == RS_PK_CONV ? 3 : 1; /* (N, OC, OH, OW) or (..., O) */
    int64_t OC = prod->kind == RS_PK_CONV ? prod->g.oc : prod->O;
    if (cd->rank > od->rank) return false;
    int64_t n = 1;
    for (int i = 0; i < cd->rank; i++) {
        int from_right = cd->rank - i;
        int64_t d = cd->d[i];
        if (d == RS_DIM_BATCH) return false;
        if (from_right == ch_from_right) {
            if (d != 1 && d != OC) return false;
        } else if (d != 1) {
            return false;
        }
        n *= d;
    }
    (void)p;
    *count = n;
    return true;
}

static int ensure_bias(rs_plan *p, rs_pnode *prod)
{
    if (prod->b >= 0) return prod->b;
    int64_t OC = prod->kind == RS_PK_CONV ? prod->g.oc : prod->O;
    char name[64];
    snprintf(name, sizeof name, "%.56s.bias", prod->name);
    prod->b = rs_plan_add_tensor(p, name, 1, &OC, NULL);
    return prod->b;
}

/* conv/linear -> Mul(per-channel constant) / Add(per-channel constant): into its weights and bias. */
static rs_status fold(rs_plan *p, rs_err *err)
{
    for (int i = 0; i < p->nnodes; i++) {
        rs_pnode *a = &p->nodes[i];
        if (a->dead || !is_product(a) || a->npost) continue;
        for (;;) {
            int zi = -1;
            if (readers(p, a->out, &zi) != 1) break;
            rs_pnode *z = &p->nodes[zi];
            if (z->kind != RS_PK_OP || z->op != RS_OP_BINARY ||
                (z->a.sub != RS_BINARY_MUL && z->a.sub != RS_BINARY_ADD) || z->nin != 2)
                break;
            int k = z->in[0] == a->out ? 1 : 0; /* the constant's position */
            int64_t cnt = 0;
            if (z->in[1 - k] != a->out || z->cin[k] < 0 || !per_channel(p, a, z, k, &cnt)) break;
            if (rs_dims_numel(&z->dout, 1) != p->values[a->out].numel) break; /* no broadcast of the value itself */
            int64_t OC = a->kind == RS_PK_CONV ? a->g.oc : a->O;
            if (ensure_bias(p, a) < 0) return rs_err_set(err, RS_ERR_NOMEM, "compile: out of memory");
            const float *c = p->tensors[z->cin[k]].data;
            float *w = p->tensors[a->w].data, *b = p->tensors[a->b].data;
            int64_t per = (int64_t)(p->tensors[a->w].bytes / sizeof(float)) / OC;
            for (int64_t o = 0; o < OC; o++) {
                float s = c[cnt == 1 ? 0 : o];
                if (z->a.sub == RS_BINARY_MUL) {
                    for (int64_t j = 0; j < per; j++) w[o * per + j] *= s;
                    b[o] *= s;
                } else {
                    b[o] += s;
                }
            }
            note_fusion(p, "%s %.40s + %.40s (a per-channel constant, folded into the weights)", rs_pk_name(a->kind),
                        a->name, z->a.sub == RS_BINARY_MUL ? "Mul" : "Add");
            a->out = z->out;
            z->dead = true;
        }
    }
    return RS_OK;
}


static int acts(rs_plan *p)
{
    int done = 0;
    for (int i = 0; i < p->nnodes; i++) {
        rs_pnode *a = &p->nodes[i];
        if (a->dead || !is_product(a) || a->npost >= RS_PLAN_MAX_POST) continue;
        int zi = -1;
        if (readers(p, a->out, &zi) != 1) continue;
        rs_pnode *z = &p->nodes[zi];
        if (z->kind != RS_PK_ACT || !rs_plan_fusable_act(z->act) || z->in[0] != a->out) continue;
        /* after a sum post-op the product writes in the residual's memory: so does the activation now */
        bool in_place = false;
        for (int j = 0; j < a->npost; j++) in_place |= a->post[j].kind == RS_PPOST_SUM;
        if (in_place) p->values[z->out].alias = a->out;
        a->post[a->npost++] = (rs_ppost){.kind = RS_PPOST_ELT, .op = z->act, .alpha = z->alpha, .beta = z->beta};
        note_fusion(p, "%s %.40s + %.40s (eltwise post-op)", rs_pk_name(a->kind), a->name, rs_plan_act_name(z->act));
        a->out = z->out;
        z->dead = true;
        i--; /* the same product may take another */
        done++;
    }
    return done;
}

/* Position of the last live node reading any value of v's memory (its root's group), or INT32_MAX
 * when that memory is the plan's output. */
static int group_last_use(const rs_plan *p, int v)
{
    int root = rs_plan_root(p, v), last = -1;
    if (rs_plan_root(p, p->output) == root) return INT32_MAX;
    for (int i = 0; i < p->nnodes; i++) {
        const rs_pnode *x = &p->nodes[i];
        if (x->dead) continue;
        for (int j = 0; j < x->nin; j++)
            if (x->in[j] >= 0 && rs_plan_root(p, x->in[j]) == root) last = i;
        for (int j = 0; j < x->npost; j++)
            if (x->post[j].kind == RS_PPOST_SUM && rs_plan_root(p, x->post[j].value) == root) last = i;
    }
    return last;
}

static int residuals(rs_plan *p)
{
    int done = 0;
    for (int zi = 0; zi < p->nnodes; zi++) {
        rs_pnode *z = &p->nodes[zi];
        if (z->dead || z->kind != RS_PK_ADD) continue;
        for (int k = 0; k < 2; k++) {
            int u = z->in[k], v = z->in[1 - k];
            int ai = -1, vi = -1;
            for (int i = 0; i < zi; i++) {
                if (!p->nodes[i].dead && p->nodes[i].out == u) ai = i;
                if (!p->nodes[i].dead && p->nodes[i].out == v) vi = i;
            }
            /* the residual must be computed before the product sums into it: regnet's shortcut
             * projection runs before its branch, so the branch's last conv takes the sum */
            if (ai < 0 || vi > ai) continue;
            rs_pnode *a = &p->nodes[ai];
            int only = -1;
            if (!is_product(a) || a->npost >= RS_PLAN_MAX_POST || readers(p, u, &only) != 1 || only != zi) continue;
            if (u == v || p->values[u].numel != p->values[v].numel) continue;
            int root = rs_plan_root(p, v);
            /* in place: the residual's memory must be ours to overwrite (not the caller's input, read by
             * nobody after the add) and must not be what the product reads */
            if (root == 0 || group_last_use(p, v) != zi || rs_plan_root(p, a->in[0]) == root) continue;
            a->post[a->npost++] = (rs_ppost){.kind = RS_PPOST_SUM, .value = v};
            note_fusion(p, "%s %.40s + add %.40s (sum post-op, in place in the residual's memory)", rs_pk_name(a->kind),
                        a->name, z->name);
            p->values[z->out].alias = v;
            a->out = z->out;
            z->dead = true;
            done++;
            break;
        }
    }
    return done;
}

static void compact(rs_plan *p)
{
    int k = 0;
    for (int i = 0; i < p->nnodes; i++)
        if (!p->nodes[i].dead) p->nodes[k++] = p->nodes[i];
    p->nnodes = k;
}

rs_status rs_plan_run_passes(rs_plan *p, const rs_plan_opts *o, rs_err *err)
{
    dead_nodes(p);
    rs_status st = views(p, err);
    if (!st && (o->passes & RS_PLAN_PASS_FOLD)) st = fold(p, err);
    if (st) return st;
    for (int round = 0; round < 4; round++) {
        int n = 0;
        if (o->passes & RS_PLAN_PASS_ACT) n += acts(p);
        if (o->passes & RS_PLAN_PASS_RESIDUAL) n += residuals(p);
        if (!n) break;
    }
    compact(p);
    /* Precision per node: pools and the engine's ops stay fp32, and so does an int8 convolution over
     * fewer than 4 input channels (an image): with so few products per output an int8 kernel has
     * nothing to gain (Fashion's 1-channel conv at batch 64: 0.094 ms fp32, 0.13 ms int8) while the
     * input keeps its precision. A bf16 one is timed against fp32 at finalize (dnnl.c): oneDNN's bf16
     * kernel for a plain image gains on 3 channels (the SimpleCNN's: 0.35 ms against 0.46) and not
     * on 1. TensorRT's builder chooses per layer the same way. The channels that count are a group's:
     * a depthwise convolution (one channel a group, k x k products an output) stays fp32 in an int8
     * plan too, and the report says so. Measured on mobilenet_v3_small (random weights, 32 Fashion
     * images, plan batch 16) with its weights' scales per output channel (int8_scales): oneDNN's int8
     * depthwise kernel is slower than fp32's brdgmm_dw on 10 of its 11 (0.099 against 0.043 ms
     * natively, 0.103 against 0.043 capped to AVX2), and all 11 int8 took the plan from 0.054 to
     * 0.079 of the logits' scale off ORT (AVX2: 0.115) and top-1 on the images with a clear best
     * from 100% to 93% natively: the loss is the activations' one scale per tensor, which oneDNN 2.6
     * cannot make per channel for a convolution's input. */
    for (int i = 0; i < p->nnodes; i++) {
        rs_pnode *n = &p->nodes[i];
        if (!is_product(n)) continue;
        bool few = n->kind == RS_PK_CONV && n->g.c / n->group < 4 && o->prec == RS_PLAN_INT8;
        n->prec = few ? RS_PLAN_FP32 : o->prec;
        if (few && n->group > 1) {
            char line[256];
            snprintf(line, sizeof line, "conv %.40s: fp32 in an int8 plan (%d input channels a group: oneDNN's int8 "
                     "kernel is slower there and loses accuracy)", n->name, n->g.c / n->group);
            rs_plan_note(p, line);
        }
    }
    return RS_OK;
}
