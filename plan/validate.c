/* Checks a graph read from a plan file before anything runs it: every reference in range, every value
 * written once before it is read, every node's sizes consistent with its inputs, outputs, geometry
 * and weights, so that no kernel can be handed a buffer smaller than it will touch. The memory plan
 * is checked by rs_plan_check_memory after this (file.c). A file the compiler wrote always passes;
 * these checks are what stand between a corrupted or crafted file and the kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define MAX_NUMEL ((int64_t)1 << 31)

#define BAD(...) rs_err_set(err, RS_ERR_FORMAT, __VA_ARGS__)

static bool pos(int64_t x) { return x >= 1 && x < MAX_NUMEL; }

static rs_status check_tensor(const rs_plan *p, const rs_pnode *n, int t, int64_t want, bool plain, rs_err *err)
{
    if (t < 0 || t >= p->ntensors) return BAD("node %s reads tensor %d of %d", n->name, t, p->ntensors);
    const rs_ptensor *x = &p->tensors[t];
    int64_t numel = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (!pos(x->dims[i])) return BAD("tensor %s has a dimension of %lld", x->name, (long long)x->dims[i]);
        numel *= x->dims[i];
        if (numel >= MAX_NUMEL) return BAD("tensor %s is too large", x->name);
    }
    if (numel != want)
        return BAD("tensor %s holds %lld values; node %s (%s) needs %lld", x->name, (long long)numel, n->name,
                   rs_pk_name(n->kind), (long long)want);
    if (x->dtype != RS_F32 && x->dtype != RS_BF16 && x->dtype != RS_I8) return BAD("tensor %s has dtype %d", x->name, (int)x->dtype);
    if (p->dev == RS_PLAN_DEV_CUDA) { /* plain row-major always; a bf16 product's weights in bf16 */
        rs_dtype want = !plain && n->prec == RS_PLAN_BF16 ? RS_BF16 : RS_F32;
        if (x->layout != 0 || x->dtype != want || x->bytes != (size_t)numel * rs_dtype_size(want))
            return BAD("tensor %s: %zu bytes of dtype %d, layout %d, but node %s of a cuda plan reads %lld plain %s",
                       x->name, x->bytes, (int)x->dtype, x->layout, n->name, (long long)numel,
                       want == RS_BF16 ? "bf16" : "floats");
        return RS_OK;
    }
    if (plain || x->layout == 0) {
        if (x->layout != 0 || x->dtype != RS_F32 || x->bytes != (size_t)numel * sizeof(float))
            return BAD("tensor %s: %zu bytes of layout %d, but node %s reads %lld plain floats", x->name, x->bytes,
                       x->layout, n->name, (long long)numel);
    } else if (x->layout != 1 || x->bytes < (size_t)numel * rs_dtype_size(x->dtype)) {
        return BAD("tensor %s: %zu bytes of layout %d for %lld values", x->name, x->bytes, x->layout, (long long)numel);
    }
    return RS_OK;
}

static bool geom_ok(const rs_conv_geom *g, bool conv)
{
    if (!pos(g->c) || !pos(g->h) || !pos(g->w) || !pos(g->kh) || !pos(g->kw) || !pos(g->sh) || !pos(g->sw)) return false;
    if (conv && !pos(g->oc)) return false;
    if (g->ph < 0 || g->pw < 0 || g->ph >= g->kh || g->pw >= g->kw || g->oh < 1 || g->ow < 1) return false;
    /* the end pads (asymmetric where an imported Conv or pool had them) follow from the output size */
    if (rs_plan_pad_end(g->h, g->kh, g->sh, g->ph, g->oh) < 0 || rs_plan_pad_end(g->w, g->kw, g->sw, g->pw, g->ow) < 0)
        return false;
    return (int64_t)g->c * g->h * g->w < MAX_NUMEL && (int64_t)(conv ? g->oc : g->c) * g->oh * g->ow < MAX_NUMEL &&
           (int64_t)g->oc * g->c * g->kh * g->kw < MAX_NUMEL;
}

static bool dims_ok(const rs_dims *d, bool allow_batch)
{
    if (d->rank < 0 || d->rank > RS_DIMS_MAX) return false;
    int batches = 0;
    int64_t n = 1;
    for (int i = 0; i < d->rank; i++) {
        if (d->d[i] == RS_DIM_BATCH) {
            batches++;
            continue;
        }
        if (!pos(d->d[i])) return false;
        n *= d->d[i];
        if (n >= MAX_NUMEL) return false;
    }
    return batches <= (allow_batch ? 1 : 0);
}

/* Each of the k shapes in s broadcasts (numpy's rules) to the first r dims of y, whose rank is r. */
static rs_status broadcasts(const rs_pnode *n, int k, const rs_dims *s, const rs_dims *y, int r, rs_err *err)
{
    for (int j = 0; j < k; j++) {
        if (s[j].rank > r) return BAD("node %s: input %d has more dims than its output", n->name, j);
        for (int i = 0; i < r; i++) {
            int64_t d = i - (r - s[j].rank) >= 0 ? s[j].d[i - (r - s[j].rank)] : 1;
            if (d != y->d[i] && d != 1) return BAD("node %s: input %d does not broadcast to the output", n->name, j);
        }
    }
    return RS_OK;
}

/* numpy's matmul: (..., M, K) x (..., K, N) -> (broadcast ..., M, N); a 1-d operand is a row (first)
 * or a column (second) whose unit dim the output drops. */
static rs_status check_matmul(const rs_pnode *n, rs_err *err)
{
    rs_dims a = n->ds[0], b = n->ds[1];
    const rs_dims *y = &n->dout;
    if (a.rank < 1 || b.rank < 1) return BAD("node %s: matmul of a scalar", n->name);
    bool va = a.rank == 1, vb = b.rank == 1;
    if (va) a = (rs_dims){2, {1, a.d[0]}};
    if (vb) b = (rs_dims){2, {b.d[0], 1}};
    int64_t M = a.d[a.rank - 2], K = a.d[a.rank - 1], N = b.d[b.rank - 1];
    if (K == RS_DIM_BATCH || b.d[b.rank - 2] != K) return BAD("node %s: matmul inner sizes differ", n->name);
    int r = (a.rank > b.rank ? a.rank : b.rank) - 2; /* the broadcast leading dims */
    if (y->rank != r + 2 - va - vb || (!va && y->d[r] != M) || (!vb && y->d[y->rank - 1] != N))
        return BAD("node %s: matmul output shape", n->name);
    a.rank -= 2;
    b.rank -= 2;
    rs_dims lead[2] = {a, b};
    return broadcasts(n, 2, lead, y, r, err);
}

/* LayerNormalization over the dims from axis on (the batch before them): scale and bias of that many
 * floats, the shape kept, a scratch value of (2 rows + len) floats a sample (rs_op_workspace's). */
static rs_status check_layernorm(const rs_pnode *n, const int64_t *numel, rs_err *err)
{
    const rs_dims *x = &n->ds[0];
    int bp = rs_dims_batch_pos(x);
    if (n->a.axis < 0 || n->a.axis >= x->rank || bp >= n->a.axis || !(n->a.eps >= 0 && n->a.eps < 1e30f) || n->tmp < 0)
        return BAD("node %s: layernorm axis %d, eps %g, scratch %d", n->name, n->a.axis, (double)n->a.eps, n->tmp);
    int64_t rows = 1, len = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i == bp) continue;
        if (i < n->a.axis) rows *= x->d[i];
        else len *= x->d[i];
        if (x->d[i] != n->dout.d[i]) return BAD("node %s: layernorm changes the shape", n->name);
    }
    if (n->dout.rank != x->rank || numel[n->tmp] < 2 * rows + len) return BAD("node %s: layernorm sizes", n->name);
    for (int i = 1; i < n->nin; i++)
        if (rs_dims_numel(&n->ds[i], 1) != len || rs_dims_batch_pos(&n->ds[i]) >= 0)
            return BAD("node %s: layernorm %s of another size", n->name, i == 1 ? "scale" : "bias");
    return RS_OK;
}

static rs_status check_op(const rs_plan *p, const rs_pnode *n, const int64_t *numel, rs_err *err)
{
    int want_in = n->op == RS_OP_BINARY || n->op == RS_OP_MATMUL ? 2 : n->op == RS_OP_WHERE ? 3 : 1;
    if (n->op == RS_OP_LAYERNORM) want_in = n->nin == 3 ? 3 : 2; /* the bias is optional */
    if (n->op != RS_OP_BINARY && n->op != RS_OP_SOFTMAX && n->op != RS_OP_LOGSOFTMAX && n->op != RS_OP_TRANSPOSE &&
        n->op != RS_OP_CONCAT && n->op != RS_OP_SLICE && n->op != RS_OP_REDUCEMEAN && n->op != RS_OP_REDUCESUM &&
        n->op != RS_OP_MATMUL && n->op != RS_OP_EXPAND && n->op != RS_OP_WHERE && n->op != RS_OP_LAYERNORM)
        return BAD("node %s runs op %d, which plans do not run", n->name, (int)n->op);
    if (n->op == RS_OP_CONCAT ? n->nin < 1 : n->nin != want_in)
        return BAD("node %s (%s) has %d inputs", n->name, rs_op_name(n->op), n->nin);
    if (!dims_ok(&n->dout, true)) return BAD("node %s has a bad output shape", n->name);
    bool batched = rs_dims_batch_pos(&n->dout) >= 0;
    if (rs_dims_numel(&n->dout, 1) != numel[n->out]) return BAD("node %s: output shape and value disagree", n->name);
    for (int i = 0; i < n->nin; i++) {
        bool cst = n->cin[i] >= 0;
        if (!dims_ok(&n->ds[i], !cst)) return BAD("node %s has a bad shape for input %d", n->name, i);
        if (cst) {
            rs_status st = check_tensor(p, n, n->cin[i], rs_dims_numel(&n->ds[i], 1), true, err);
            if (st) return st;
        } else {
            if ((rs_dims_batch_pos(&n->ds[i]) >= 0) != batched) return BAD("node %s: input %d and output disagree on the batch", n->name, i);
            if (rs_dims_numel(&n->ds[i], 1) != numel[n->in[i]]) return BAD("node %s: input %d's shape and value disagree", n->name, i);
        }
    }
    const rs_dims *x = &n->ds[0], *y = &n->dout;
    switch (n->op) {
    case RS_OP_BINARY:
        if (n->a.sub < 0 || n->a.sub > RS_BINARY_XOR) return BAD("node %s: binary op %d", n->name, n->a.sub);
        return broadcasts(n, n->nin, n->ds, y, y->rank, err);
    case RS_OP_EXPAND:
    case RS_OP_WHERE: return broadcasts(n, n->nin, n->ds, y, y->rank, err);
    case RS_OP_MATMUL: return check_matmul(n, err);
    case RS_OP_LAYERNORM: return check_layernorm(n, numel, err);
    case RS_OP_SOFTMAX:
    case RS_OP_LOGSOFTMAX:
        if (n->a.axis < 0 || n->a.axis >= x->rank || y->rank != x->rank) return BAD("node %s: softmax axis %d", n->name, n->a.axis);
        for (int i = 0; i < x->rank; i++)
            if (x->d[i] != y->d[i]) return BAD("node %s: softmax changes the shape", n->name);
        if (x->d[n->a.axis] == RS_DIM_BATCH && !n->a.legacy_softmax) return BAD("node %s: softmax over the batch", n->name);
        return RS_OK;
    case RS_OP_TRANSPOSE: {
        unsigned seen = 0;
        if (y->rank != x->rank) return BAD("node %s: transpose rank", n->name);
        for (int i = 0; i < x->rank; i++) {
            int q = n->a.perm[i];
            if (q < 0 || q >= x->rank || (seen >> q & 1u)) return BAD("node %s: not a permutation", n->name);
            seen |= 1u << q;
            if (y->d[i] != x->d[q]) return BAD("node %s: transposed shape", n->name);
        }
        return RS_OK;
    }
    case RS_OP_CONCAT: {
        int64_t along = 0;
        if (n->a.axis < 0 || n->a.axis >= y->rank) return BAD("node %s: concat axis %d", n->name, n->a.axis);
        for (int j = 0; j < n->nin; j++) {
            const rs_dims *d = &n->ds[j];
            if (d->rank != y->rank) return BAD("node %s: concat ranks differ", n->name);
            for (int i = 0; i < y->rank; i++)
                if (i != n->a.axis && d->d[i] != y->d[i]) return BAD("node %s: concat shapes differ", n->name);
            along += d->d[n->a.axis];
        }
        if (y->d[n->a.axis] == RS_DIM_BATCH || along != y->d[n->a.axis]) return BAD("node %s: concat sizes", n->name);
        return RS_OK;
    }
    case RS_OP_SLICE:
        if (y->rank != x->rank || !dims_ok(&n->a.shape, true) || n->a.shape.rank != y->rank)
            return BAD("node %s: slice rank", n->name);
        for (int i = 0; i < x->rank; i++) {
            int64_t s = n->a.starts[i], st = n->a.steps[i], k = y->d[i];
            if (k != n->a.shape.d[i]) return BAD("node %s: slice shape", n->name);
            if (x->d[i] == RS_DIM_BATCH) {
                if (k != RS_DIM_BATCH || s != 0 || st != 1) return BAD("node %s: slice of the batch", n->name);
                continue;
            }
            /* every index it reads in range: start and start + (k - 1) step */
            if (st == 0 || s < 0 || s >= x->d[i] || s + (k - 1) * st < 0 || s + (k - 1) * st >= x->d[i])
                return BAD("node %s: slice reads outside its input", n->name);
        }
        return RS_OK;
    case RS_OP_REDUCEMEAN:
    case RS_OP_REDUCESUM:
        if (n->a.axes_mask >> x->rank || y->rank != (n->a.keepdims ? x->rank : x->rank - __builtin_popcount(n->a.axes_mask)))
            return BAD("node %s: reduction axes", n->name);
        for (int i = 0, j = 0; i < x->rank; i++) {
            bool r = n->a.axes_mask >> i & 1u;
            if (r && x->d[i] == RS_DIM_BATCH) return BAD("node %s: reduction over the batch", n->name);
            if (r && !n->a.keepdims) continue;
            if (y->d[j++] != (r ? 1 : x->d[i])) return BAD("node %s: reduced shape", n->name);
        }
        return RS_OK;
    default: return BAD("node %s: op %d", n->name, (int)n->op);
    }
}

static rs_status check_node(const rs_plan *p, const rs_pnode *n, const int64_t *numel, rs_err *err)
{
    int64_t in0 = numel[n->in[0] >= 0 ? n->in[0] : 0], out = numel[n->out];
    const rs_conv_geom *g = &n->g;
    rs_status st;
    switch (n->kind) {
    case RS_PK_CONV:
    case RS_PK_MAXPOOL:
    case RS_PK_AVGPOOL: {
        bool conv = n->kind == RS_PK_CONV;
        if (!geom_ok(g, conv)) return BAD("node %s (%s) has an inconsistent window geometry", n->name, rs_pk_name(n->kind));
        if (n->nin != 1 || in0 != (int64_t)g->c * g->h * g->w || out != (int64_t)(conv ? g->oc : g->c) * g->oh * g->ow)
            return BAD("node %s (%s): its values do not fit its geometry", n->name, rs_pk_name(n->kind));
        if (!conv) return RS_OK;
        if (n->group < 1 || g->c % n->group || g->oc % n->group ||
            (n->group > 1 && (n->alg != RS_PCONV_DIRECT || n->alg1 != RS_PCONV_DIRECT)))
            return BAD("node %s (conv): %d groups do not divide %d > %d channels (or take Winograd)", n->name, n->group,
                       g->c, g->oc);
        for (int k = 0; k < 2; k++) {
            int a = k ? n->alg1 : n->alg;
            /* per sample: at the plan's batch only (batch 1 runs its kernel as it is) */
            bool wino = a == RS_PCONV_WINOGRAD || (a == RS_PCONV_SAMPLES && !k);
            if (a != RS_PCONV_DIRECT &&
                (!wino || n->prec != RS_PLAN_FP32 || g->kh != 3 || g->kw != 3 || g->sh != 1 || g->sw != 1))
                return BAD("node %s (conv): algorithm %d does not apply (Winograd: fp32, 3x3, stride 1; per sample: "
                           "at the plan's batch)", n->name, a);
        }
        /* Winograd weights stay plain: each primitive lays them out its own way */
        if ((st = check_tensor(p, n, n->w, (int64_t)g->oc * (g->c / n->group) * g->kh * g->kw, n->alg != RS_PCONV_DIRECT,
                               err)))
            return st;
        if (n->b >= 0 && (st = check_tensor(p, n, n->b, g->oc, true, err))) return st;
        return RS_OK;
    }
    case RS_PK_LINEAR:
        if (!pos(n->I) || !pos(n->O) || !pos(n->rows) || n->nin != 1 || in0 != n->rows * n->I || out != n->rows * n->O)
            return BAD("node %s (linear): %lld rows of %d -> %d do not fit its values", n->name, (long long)n->rows, n->I,
                       n->O);
        if ((st = check_tensor(p, n, n->w, (int64_t)n->O * n->I, false, err))) return st;
        if (n->b >= 0 && (st = check_tensor(p, n, n->b, n->O, true, err))) return st;
        return RS_OK;
    case RS_PK_ACT:
        if (n->nin != 1 || n->act < 0 || n->act >= RS_UNARY_COUNT || in0 != out)
            return BAD("node %s (act): bad operator or sizes", n->name);
        return RS_OK;
    case RS_PK_ADD:
        if (n->nin != 2 || n->in[1] < 0 || in0 != out || numel[n->in[1]] != out) return BAD("node %s (add): sizes differ", n->name);
        return RS_OK;
    case RS_PK_LAYERNORM:
        if (n->nin != 1 || !pos(n->C) || out % n->C || in0 != out || n->tmp < 0 || numel[n->tmp] < 2 * (out / n->C) ||
            !(n->eps > 0))
            return BAD("node %s (layernorm): sizes", n->name);
        if ((st = check_tensor(p, n, n->w, n->C, true, err)) || (st = check_tensor(p, n, n->b, n->C, true, err))) return st;
        return RS_OK;
    case RS_PK_EMBED:
        if (!p->tokens || n->nin != 1 || n->in[0] != 0 || !pos(n->T) || !pos(n->C) || !pos(n->V) || n->V != p->vocab ||
            in0 != n->T || out != (int64_t)n->T * n->C)
            return BAD("node %s (embed): sizes", n->name);
        if ((st = check_tensor(p, n, n->w, (int64_t)n->V * n->C, true, err)) ||
            (st = check_tensor(p, n, n->b, (int64_t)n->T * n->C, true, err)))
            return st;
        return RS_OK;
    case RS_PK_ATTN:
        if (n->nin != 1 || !pos(n->T) || !pos(n->C) || !pos(n->heads) || n->C % n->heads || in0 != (int64_t)n->T * 3 * n->C ||
            out != (int64_t)n->T * n->C || n->tmp < 0 || numel[n->tmp] < (int64_t)n->heads * n->T * n->T)
            return BAD("node %s (attn): sizes", n->name);
        return RS_OK;
    case RS_PK_OP: return check_op(p, n, numel, err);
    default: return BAD("node %s has kind %d", n->name, (int)n->kind);
    }
}

rs_status rs_plan_validate(const rs_plan *p, rs_err *err)
{
    if (p->batch < 1 || p->batch > 65536) return BAD("batch %d", p->batch);
    if (p->prec != RS_PLAN_FP32 && p->prec != RS_PLAN_BF16 && p->prec != RS_PLAN_INT8) return BAD("precision %d", (int)p->prec);
    /* what the GPU runtime (cuda.c) takes: no int8, no oneDNN layouts or Winograd */
    bool cuda = p->dev == RS_PLAN_DEV_CUDA;
    if (cuda && p->prec == RS_PLAN_INT8) return BAD("a cuda plan in int8 (cuda plans are fp32 or bf16)");
    if (p->nvalues < 2 || p->nnodes < 1) return BAD("a plan without nodes");
    if (p->output < 1 || p->output >= p->nvalues) return BAD("output value %d of %d", p->output, p->nvalues);
    if (p->classes < 1 || p->rows < 1 || (p->tokens && p->vocab < 1)) return BAD("classes %d, rows %d", p->classes, p->rows);
    int64_t in = 1;
    for (int i = 0; i < p->in.ndim; i++) {
        if (!pos(p->in.d[i])) return BAD("input dimension %lld", (long long)p->in.d[i]);
        in *= p->in.d[i];
        if (in >= MAX_NUMEL) return BAD("input too large");
    }
    if (p->arena_bytes > ((size_t)1 << 34) || p->scratch_off > p->arena_bytes || p->scratch_bytes > p->arena_bytes)
        return BAD("an arena of %zu bytes (scratch %zu at %zu)", p->arena_bytes, p->scratch_bytes, p->scratch_off);
    int64_t *numel = calloc((size_t)p->nvalues, sizeof *numel); /* owned here */
    char *written = calloc((size_t)p->nvalues, 1);
    if (!numel || !written) {
        free(numel);
        free(written);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    rs_status st = RS_OK;
    for (int v = 0; v < p->nvalues && !st; v++) {
        const rs_pvalue *x = &p->values[v];
        numel[v] = x->numel;
        if (!pos(x->numel)) st = BAD("value %d holds %lld floats", v, (long long)x->numel);
        else if (x->alias >= v || x->alias < -1 || (v == 0 && x->alias != -1))
            st = BAD("value %d is an alias of %d (only of an older value)", v, x->alias);
        else if ((x->layout != 0 && x->layout != 1) || x->padded < 0 || x->padded >= MAX_NUMEL ||
                 (x->layout == 1 && (x->padded < x->numel || x->alias >= 0 || v == 0)))
            st = BAD("value %d has layout %d with %lld padded floats", v, x->layout, (long long)x->padded);
        else if (cuda && x->layout != 0)
            st = BAD("value %d of a cuda plan has oneDNN's layout %d", v, x->layout);
        else if (x->alias >= 0 && p->values[x->alias].numel != x->numel)
            st = BAD("value %d (%lld floats) aliases value %d of another size", v, (long long)x->numel, x->alias);
    }
    if (!st && numel[0] != in) st = BAD("input value of %lld floats for an input of %lld", (long long)numel[0], (long long)in);
    if (!st && numel[p->output] != (int64_t)p->classes * p->rows) st = BAD("output of %lld floats", (long long)numel[p->output]);
    written[0] = 1;
    for (int i = 0; i < p->nnodes && !st; i++) {
        const rs_pnode *n = &p->nodes[i];
        if (n->nin < 1 || n->nin > RS_OP_MAX_IN) {
            st = BAD("node %s has %d inputs", n->name, n->nin);
            break;
        }
        bool product = n->kind == RS_PK_CONV || n->kind == RS_PK_LINEAR;
        if (n->prec != RS_PLAN_FP32 && !((n->prec == RS_PLAN_BF16 || (n->prec == RS_PLAN_INT8 && !cuda)) && product)) {
            st = BAD("node %s has precision %d", n->name, (int)n->prec);
            break;
        }
        if ((n->kind != RS_PK_CONV || cuda) && (n->alg != RS_PCONV_DIRECT || n->alg1 != RS_PCONV_DIRECT)) {
            st = BAD("node %s (%s) has a convolution algorithm", n->name, rs_pk_name(n->kind));
            break;
        }
        if (n->prec == RS_PLAN_INT8) {
            int64_t OC = n->kind == RS_PK_CONV ? n->g.oc : n->O;
            if (!(n->qscale > 0 && n->qscale < 1e30f) || !pos(OC)) st = BAD("node %s: int8 input scale %g", n->name, (double)n->qscale);
            else st = check_tensor(p, n, n->oscales, OC, true, err);
            if (st) break;
        }
        for (int j = 0; j < n->nin && !st; j++) {
            int v = n->in[j];
            bool cst = n->kind == RS_PK_OP && n->cin[j] >= 0;
            if (cst) continue;
            if (v < 0 || v >= p->nvalues) st = BAD("node %s reads value %d of %d", n->name, v, p->nvalues);
            else if (!written[rs_plan_root(p, v)] && !written[v]) st = BAD("node %s reads value %d before it is written", n->name, v);
        }
        if (st) break;
        if (n->out < 1 || n->out >= p->nvalues || written[n->out]) {
            st = BAD("node %s writes value %d (out of range or written twice)", n->name, n->out);
            break;
        }
        if (n->tmp >= 0 && (n->tmp >= p->nvalues || written[n->tmp] || n->tmp == n->out || p->values[n->tmp].alias >= 0)) {
            st = BAD("node %s has scratch value %d", n->name, n->tmp);
            break;
        }
        for (int j = 0; j < n->npost && !st; j++) {
            const rs_ppost *q = &n->post[j];
            if (n->kind != RS_PK_CONV && n->kind != RS_PK_LINEAR) st = BAD("node %s (%s) has post-ops", n->name, rs_pk_name(n->kind));
            else if (q->kind == RS_PPOST_SUM) {
                if (q->value < 0 || q->value >= p->nvalues || !written[q->value] || numel[q->value] != numel[n->out] ||
                    rs_plan_root(p, q->value) != rs_plan_root(p, n->out) || rs_plan_root(p, q->value) == 0)
                    st = BAD("node %s: a sum of value %d that is not its output's memory", n->name, q->value);
            } else if (q->kind != RS_PPOST_ELT || !rs_plan_fusable_act(q->op)) {
                st = BAD("node %s: post-op %d", n->name, (int)q->kind);
            }
        }
        if (st) break;
        if (!st && n->npost == 0 && p->values[n->out].alias >= 0) st = BAD("node %s writes into another value's memory", n->name);
        if (!st) st = check_node(p, n, numel, err);
        written[n->out] = 1;
        if (n->tmp >= 0) written[n->tmp] = 1;
    }
    /* aliases of written values (views: an output reshaped last) count as written from their root;
     * anything else unwritten is simply unused */
    if (!st && !written[rs_plan_root(p, p->output)]) st = BAD("no node writes the output");
    free(numel);
    free(written);
    return st;
}
