/* Generic tensor ops (see tensor_op.h): rs_op_run, which maps one op on concrete shapes onto the
 * device's kernel entries, and the layer kind RS_LAYER_OP, which holds an op with its symbolic shapes
 * and runs it with the batch filled in. */
#include "tensor_op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/kernels.h"
#include "model_internal.h"

static const char *const op_names[RS_OP_COUNT] = {
    "reshape", "gemm", "matmul", "conv", "maxpool", "avgpool", "globalavgpool", "unary", "binary", "softmax",
    "logsoftmax", "layernorm", "transpose", "concat", "reducemean", "reducesum", "where", "expand", "slice", "trilu",
    "gather",
};

const char *rs_op_name(rs_op op) { return (unsigned)op < RS_OP_COUNT ? op_names[op] : "?"; }

static size_t numel(const rs_dims *s) { return (size_t)rs_dims_numel(s, 0); }

/* The window of a conv or pool on x (N, C, [H,] W) -> y; pads are top and left (the kernels take the
 * output size as given, so the bottom and right pads need no field). */
static rs_conv_geom window_geom(const rs_op_attrs *a, const rs_dims *xs, const rs_dims *ys)
{
    bool two = xs->rank == 4;
    return (rs_conv_geom){.c = (int)xs->d[1], .h = two ? (int)xs->d[2] : 1, .w = (int)xs->d[xs->rank - 1],
                          .oc = (int)ys->d[1], .kh = a->kh, .kw = a->kw, .sh = a->sh, .sw = a->sw,
                          .ph = a->pt, .pw = a->pl, .oh = two ? (int)ys->d[2] : 1, .ow = (int)ys->d[ys->rank - 1]};
}

/* LayerNorm over the dims from axis on: rows and row length. */
static void ln_rows(const rs_op_attrs *a, const rs_dims *xs, size_t *rows, size_t *len)
{
    *rows = *len = 1;
    for (int i = 0; i < xs->rank; i++) {
        if (i < a->axis) *rows *= (size_t)xs->d[i];
        else *len *= (size_t)xs->d[i];
    }
}

rs_status rs_op_workspace(rs_kctx *ctx, rs_op op, const rs_op_attrs *a, const rs_dims *const *is, const rs_dims *os,
                          size_t *bytes, rs_err *err)
{
    *bytes = 0;
    if (op == RS_OP_CONV) {
        rs_conv_geom g = window_geom(a, is[0], os);
        int B = (int)is[0]->d[0];
        if (a->group != 1) {
            g.c /= a->group;
            g.oc /= a->group;
            B = 1;
        }
        if (ctx->k->conv2d_workspace(ctx, &g, B, bytes)) return rs_kctx_check(ctx, err);
    } else if (op == RS_OP_LAYERNORM) {
        size_t rows, len;
        ln_rows(a, is[0], &rows, &len);
        *bytes = (2 * rows + len) * sizeof(float); /* mean, 1/std per row; zeros for an absent bias */
    }
    return RS_OK;
}

/* ONNX Gemm: Y = alpha op(A) op(B) + beta C, C broadcast to (M, N). */
static rs_status gemm_op(rs_kctx *ctx, const rs_op_attrs *a, const float *A, const rs_dims *as, const float *B,
                         const float *C, const rs_dims *cs, float *Y, const rs_dims *ys)
{
    const rs_kernels *k = ctx->k;
    int M = (int)ys->d[0], N = (int)ys->d[1], K = (int)(a->ta ? as->d[0] : as->d[1]);
    size_t mn = (size_t)M * (size_t)N;
    float acc = 0.0f;
    if (C) {
        RS_KTRY(k->select(ctx, NULL, NULL, C, cs, NULL, NULL, Y, ys));
        if (a->beta != 1.0f) RS_KTRY(k->scale(ctx, Y, mn, a->beta));
        acc = 1.0f;
    }
    if (K == 0) return C ? RS_OK : k->fill(ctx, Y, mn, 0.0f);
    return k->gemm(ctx, a->ta, a->tb, M, N, K, a->alpha, A, a->ta ? M : K, B, a->tb ? K : N, acc, Y, N);
}

static rs_status conv_op(rs_kctx *ctx, const rs_op_attrs *a, const float *x, const rs_dims *xs, const float *w,
                         const float *bias, float *y, const rs_dims *ys, float *ws, size_t ws_bytes)
{
    const rs_kernels *k = ctx->k;
    rs_conv_geom g = window_geom(a, xs, ys);
    int B = (int)xs->d[0], G = a->group;
    /* The training kernel: one product per sample over the threads, each with its own column buffer
     * that stays in cache. (Tried: one product over the whole batch; slower here, the columns of a
     * batch of 64 spill out of L2.) */
    if (G == 1) return k->conv2d_fwd(ctx, &g, B, x, w, bias, y, ws, ws_bytes);
    /* grouped (depthwise included): per sample and group, the input channels, weights and outputs are
     * contiguous slices, which the kernel takes as a batch of one. (Tried for depthwise: a direct loop,
     * per tap a row segment multiply-add; 8.0 ms against this path's 5.8 ms for 8 x 96 x 56 x 56, 3x3,
     * 2 threads, as OpenBLAS's product runs AVX2 and the loop only SSE2 here.) */
    rs_conv_geom gg = g;
    gg.c = g.c / G;
    gg.oc = g.oc / G;
    size_t in_g = (size_t)gg.c * g.h * g.w, out_g = (size_t)gg.oc * g.oh * g.ow;
    size_t w_g = (size_t)gg.oc * gg.c * g.kh * g.kw;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < G; j++)
            RS_KTRY(k->conv2d_fwd(ctx, &gg, 1, x + ((size_t)b * G + j) * in_g, w + (size_t)j * w_g,
                                  bias ? bias + (size_t)j * gg.oc : NULL, y + ((size_t)b * G + j) * out_g, ws,
                                  ws_bytes));
    return RS_OK;
}

static rs_status pool_op(rs_kctx *ctx, rs_op op, const rs_op_attrs *a, const float *x, const rs_dims *xs, float *y,
                         const rs_dims *ys)
{
    const rs_kernels *k = ctx->k;
    rs_conv_geom g = window_geom(a, xs, ys);
    int B = (int)xs->d[0];
    bool is_max = op == RS_OP_MAXPOOL;
    /* The layer kernels take PyTorch's symmetric padding and floor mode; anything else goes to pool2d. */
    bool sym = a->pt == a->pb && a->pl == a->pr && !a->ceil_mode;
    if (sym && is_max && a->pt < a->kh && a->pl < a->kw) return k->maxpool_fwd(ctx, &g, B, x, y, NULL);
    if (sym && !is_max && (a->count_include_pad || (a->pt == 0 && a->pl == 0))) return k->avgpool_fwd(ctx, &g, B, x, y);
    return k->pool2d(ctx, &g, a->pb, a->pr, is_max, a->count_include_pad, B, x, y);
}

static rs_status softmax_op(rs_kctx *ctx, const rs_op_attrs *a, bool log_out, const float *x, const rs_dims *xs,
                            float *y)
{
    size_t outer = 1, len = 1, inner = 1;
    for (int i = 0; i < xs->rank; i++) {
        size_t d = (size_t)xs->d[i];
        if (i < a->axis) outer *= d;
        else if (i == a->axis || a->legacy_softmax) len *= d;
        else inner *= d;
    }
    return ctx->k->softmax(ctx, x, y, outer, len, inner, log_out);
}

static rs_status layernorm_op(rs_kctx *ctx, const rs_op_attrs *a, const float *x, const rs_dims *xs,
                              const float *scale, const float *bias, float *y, float *ws, size_t ws_bytes)
{
    size_t rows, len;
    ln_rows(a, xs, &rows, &len);
    if (!ws || ws_bytes < (2 * rows + len) * sizeof(float))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "layernorm op: workspace of %zu bytes, %zu needed", ws ? ws_bytes : 0,
                            (2 * rows + len) * sizeof(float));
    float *mean = ws, *rstd = ws + rows;
    if (!bias) {
        float *zeros = ws + 2 * rows;
        RS_KTRY(ctx->k->fill(ctx, zeros, len, 0.0f));
        bias = zeros;
    }
    return ctx->k->layernorm_fwd(ctx, x, scale, bias, y, mean, rstd, (int)rows, (int)len, a->eps);
}

static rs_status slice_op(rs_kctx *ctx, const rs_op_attrs *a, const float *x, const rs_dims *xs, float *y,
                          const rs_dims *ys)
{
    int64_t starts[RS_DIMS_MAX], steps[RS_DIMS_MAX];
    for (int i = 0; i < xs->rank; i++) {
        bool whole = a->shape.d[i] == RS_DIM_BATCH; /* the batch is only ever taken whole */
        starts[i] = whole ? 0 : a->starts[i];
        steps[i] = whole ? 1 : a->steps[i];
    }
    return ctx->k->slice(ctx, x, xs, starts, steps, y, ys);
}

/* The op's kernel calls; a failing entry has recorded itself in ctx. */
static rs_status run_op(rs_kctx *ctx, rs_op op, const rs_op_attrs *a, const float *const *ins,
                        const rs_dims *const *is, float *out, const rs_dims *os, void *ws, size_t ws_bytes)
{
    const rs_kernels *k = ctx->k;
    const float *x = ins[0];
    const rs_dims *xs = is[0];
    switch (op) {
    case RS_OP_RESHAPE: return out != x ? k->copy_d2d(ctx, out, x, sizeof(float) * numel(os)) : RS_OK;
    case RS_OP_GEMM: return gemm_op(ctx, a, x, xs, ins[1], ins[2], is[2], out, os);
    case RS_OP_MATMUL: return k->matmul(ctx, x, xs, ins[1], is[1], out, os);
    case RS_OP_CONV: return conv_op(ctx, a, x, xs, ins[1], ins[2], out, os, ws, ws_bytes);
    case RS_OP_MAXPOOL:
    case RS_OP_AVGPOOL: return pool_op(ctx, op, a, x, xs, out, os);
    case RS_OP_GLOBALAVGPOOL: return k->reduce(ctx, true, x, xs, ((1u << xs->rank) - 1) & ~3u, out);
    case RS_OP_UNARY: return k->unary(ctx, (rs_unary_op)a->sub, x, out, numel(os), a->alpha, a->beta);
    case RS_OP_BINARY: return k->binary(ctx, (rs_binary_op)a->sub, x, xs, ins[1], is[1], out, os);
    case RS_OP_SOFTMAX:
    case RS_OP_LOGSOFTMAX: return softmax_op(ctx, a, op == RS_OP_LOGSOFTMAX, x, xs, out);
    case RS_OP_LAYERNORM: return layernorm_op(ctx, a, x, xs, ins[1], ins[2], out, ws, ws_bytes);
    case RS_OP_TRANSPOSE: return k->transpose(ctx, x, xs, a->perm, out);
    case RS_OP_CONCAT: {
        int n = 0;
        while (n < RS_OP_MAX_IN && ins[n]) n++;
        return k->concat(ctx, n, ins, is, a->axis, out, os);
    }
    case RS_OP_REDUCEMEAN:
    case RS_OP_REDUCESUM: return k->reduce(ctx, op == RS_OP_REDUCEMEAN, x, xs, a->axes_mask, out);
    case RS_OP_WHERE: return k->select(ctx, x, xs, ins[1], is[1], ins[2], is[2], out, os);
    case RS_OP_EXPAND: return k->select(ctx, NULL, NULL, x, xs, NULL, NULL, out, os);
    case RS_OP_SLICE: return slice_op(ctx, a, x, xs, out, os);
    case RS_OP_TRILU: return k->trilu(ctx, x, xs, a->upper, a->k, out);
    case RS_OP_GATHER:
    case RS_OP_COUNT: break;
    }
    return rs_kctx_fail(ctx, RS_ERR_INTERNAL, "tensor op %d has no kernel", (int)op);
}

rs_status rs_op_run(rs_kctx *ctx, rs_op op, const rs_op_attrs *a, const float *const *ins, const rs_dims *const *is,
                    float *out, const rs_dims *os, void *ws, size_t ws_bytes, rs_err *err)
{
    /* nothing to write; and the loops below may not even look at a zero-sized tensor */
    if (numel(os) == 0) return RS_OK;
    if (run_op(ctx, op, a, ins, is, out, os, ws, ws_bytes)) return rs_kctx_check(ctx, err);
    return RS_OK;
}

/* ---- the layer kind ---- */

/* More dims than rs_shape holds fold into the first: the executor only needs the count, and the
 * last dim, which linear and layernorm read, stays what it is. */
rs_shape rs_op_sample_shape(const rs_dims *full)
{
    rs_dims d = {0, {0}};
    for (int i = 0; i < full->rank; i++)
        if (full->d[i] != RS_DIM_BATCH) d.d[d.rank++] = full->d[i];
    rs_shape s = {0, {0}};
    int extra = d.rank > RS_MAX_DIMS ? d.rank - RS_MAX_DIMS : 0;
    for (int i = 0; i < d.rank; i++) {
        if (i <= extra && s.ndim == 1) s.d[0] *= d.d[i];
        else s.d[s.ndim++] = d.d[i];
    }
    if (s.ndim == 0) s = (rs_shape){1, {1}};
    return s;
}

static rs_status setup(rs_layer *l, const rs_shape *in, rs_err *err)
{
    const rs_op_node *n = l->op;
    char s1[64], s2[96];
    if (!n) return rs_err_set(err, RS_ERR_ARG, "layer %s (op): a generic op comes from an imported graph", l->name);
    bool batched = rs_dims_batch_pos(&n->out) >= 0;
    l->np = 0;
    for (int i = 0; i < n->nin; i++) {
        if (n->from[i] == RS_OP_IN_CONST) {
            if (n->slot[i] != l->np || l->np == RS_LAYER_MAX_PARAMS)
                return rs_err_set(err, RS_ERR_ARG, "layer %s (%s '%s'): more than %d constant inputs", l->name, n->type,
                                  n->name, RS_LAYER_MAX_PARAMS);
            rs_param_slot *p = &l->p[l->np++];
            *p = (rs_param_slot){.shape = rs_op_sample_shape(&n->in[i]), .frozen = true};
            snprintf(p->suffix, sizeof p->suffix, "c%d", n->slot[i]);
        } else if (n->from[i] == RS_OP_IN_SRC) {
            if (n->slot[i] < 0 || n->slot[i] >= l->nsrc)
                return rs_err_set(err, RS_ERR_ARG, "layer %s (%s '%s'): input %d reads source %d of %d", l->name,
                                  n->type, n->name, i, n->slot[i], l->nsrc);
            /* the batch in every computed value or in none (a file that fixed it) */
            if ((rs_dims_batch_pos(&n->in[i]) >= 0) != batched)
                return rs_err_set(err, RS_ERR_SHAPE, "layer %s (%s '%s'): input %s and output %s disagree on the batch",
                                  l->name, n->type, n->name, rs_dims_str(&n->in[i], s2, sizeof s2),
                                  rs_dims_str(&n->out, s1, sizeof s1));
            if (n->slot[i] == 0 && rs_dims_numel(&n->in[i], 1) != rs_shape_numel(in))
                return rs_err_set(err, RS_ERR_SHAPE, "layer %s (%s '%s'): input %s, but its source gives %s", l->name,
                                  n->type, n->name, rs_dims_str(&n->in[i], s2, sizeof s2), rs_shape_str(in, s1, sizeof s1));
        }
    }
    l->out = rs_op_sample_shape(&n->out);
    l->view = n->op == RS_OP_RESHAPE && n->from[0] == RS_OP_IN_SRC && n->slot[0] == 0;
    return RS_OK;
}

/* The op's concrete shapes for one run: the batch filled in (B for a batched op, else the op runs
 * once per sample on its own shapes). */
typedef struct run_shapes {
    rs_dims in[RS_OP_MAX_IN], out;
    const rs_dims *inp[RS_OP_MAX_IN];
    int reps;
} run_shapes;

static void shapes_for(const rs_op_node *n, int B, run_shapes *r)
{
    r->reps = 1;
    int64_t b = B;
    if (rs_dims_batch_pos(&n->out) < 0) {
        r->reps = B;
        b = 1;
    }
    r->out = rs_dims_with_batch(&n->out, b);
    for (int i = 0; i < RS_OP_MAX_IN; i++) {
        r->inp[i] = NULL;
        if (i >= n->nin || n->from[i] == RS_OP_IN_ABSENT) continue;
        r->in[i] = rs_dims_with_batch(&n->in[i], b);
        r->inp[i] = &r->in[i];
    }
}

static size_t workspace_bytes(const rs_layer *l, rs_kctx *ctx, int B)
{
    run_shapes r;
    shapes_for(l->op, B, &r);
    size_t n = 0;
    rs_err e;
    /* a failure goes back into ctx for the caller's next check */
    if (rs_op_workspace(ctx, l->op->op, &l->op->a, r.inp, &r.out, &n, &e)) rs_kctx_fail(ctx, e.code, "%s", e.msg);
    return n;
}

static void forward_n(rs_layer *l, const rs_exec *x, const float *const *in, float *out, int B)
{
    const rs_op_node *n = l->op;
    run_shapes r;
    shapes_for(n, B, &r);
    size_t ostep = numel(&r.out);
    for (int rep = 0; rep < r.reps; rep++) {
        const float *ins[RS_OP_MAX_IN] = {0};
        for (int i = 0; i < n->nin; i++) {
            if (n->from[i] == RS_OP_IN_SRC) ins[i] = in[n->slot[i]] + (size_t)rep * numel(&r.in[i]);
            else if (n->from[i] == RS_OP_IN_CONST) ins[i] = x->params + l->p[n->slot[i]].offset;
        }
        /* shapes were checked when the model was laid out; a kernel's failure goes back into the
         * context, named after the node, for the executor's check after this layer */
        rs_err e;
        rs_status st = rs_op_run(x->ctx, n->op, &n->a, ins, r.inp, out + (size_t)rep * ostep, &r.out, x->ws,
                                 x->ws_bytes, &e);
        if (st) {
            rs_kctx_fail(x->ctx, st, "layer %s (%s '%s'): %s", l->name, n->type, n->name, e.msg);
            return;
        }
    }
}

/* No spelling: an import makes it (engine/nn/tensor_op.h). It has no one-position form: a model
 * that has one generates by recomputing the window per token (the KV cache is skipped). */
const rs_layer_ops rs_op_ops = {
    .kind = "op",
    .unspelled = true,
    .tp = RS_LAYER_TP_REPLICATE,
    .gen = RS_LAYER_GEN_NONE,
    .setup = setup,
    .workspace_bytes = workspace_bytes,
    .forward_n = forward_n,
};

rs_status rs_model_add_op(rs_model *m, const rs_op_node *op, const int *src, int nsrc, rs_err *err)
{
    if ((unsigned)op->op >= RS_OP_COUNT || op->nin < 1 || op->nin > RS_OP_MAX_IN)
        return rs_err_set(err, RS_ERR_ARG, "model %s: op %d with %d inputs", m->name, (int)op->op, op->nin);
    rs_op_node *copy = malloc(sizeof *copy); /* owned by the layer, freed with the model */
    if (!copy) return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory adding an op", m->name);
    *copy = *op;
    rs_layer_cfg cfg = rs_layer_cfg_default(RS_LAYER_OP);
    rs_status st = rs_model_add_from(m, &cfg, src, nsrc, err);
    if (st) {
        free(copy);
        return st;
    }
    m->layers[m->nlayers - 1].op = copy;
    m->inference = true;
    return RS_OK;
}
