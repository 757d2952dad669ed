/* Values whose dimension merges the batch with other sizes, as torch writes them: nn.MultiheadAttention
 * reshapes (T, N, E) to (T, N*heads, hd) and runs its output projection on (T*N, E); the dynamo
 * exporter's attention reshapes (N, H, T, d) to (N*H, T, d). The engine keeps the batch a dimension of
 * its own, so such a value is held as a view with that dimension split ((T, N, heads, hd): the same
 * bytes); ival.glo/gn say which of its dims make up the one dimension the file sees, and shape lists
 * carry that dimension as rs_onnx_batch_times(k). Reshapes, transposes, products, elementwise ops and
 * the ops over the last axes follow such values; whatever would need the batch's size is refused
 * naming the node. */
#include "import_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rs_dims rs_onnx_file_shape(const ival *v)
{
    if (v->gn < 2) return v->shape;
    rs_dims s = {0, {0}};
    int64_t k = 1;
    for (int i = v->glo; i < v->glo + v->gn; i++)
        if (v->shape.d[i] != RS_DIM_BATCH) k *= v->shape.d[i];
    for (int i = 0; i < v->shape.rank; i++) {
        if (i == v->glo) s.d[s.rank++] = rs_onnx_batch_times(k);
        else if (i < v->glo || i >= v->glo + v->gn) s.d[s.rank++] = v->shape.d[i];
    }
    return s;
}

const char *rs_onnx_file_shape_str(const rs_dims *s, char *buf, size_t n)
{
    size_t at = 0;
    at += (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < s->rank && at < n; i++) {
        int64_t k = rs_onnx_batch_factor(s->d[i]);
        const char *sep = i ? ", " : "";
        if (k == 1) at += (size_t)snprintf(buf + at, n - at, "%sN", sep);
        else if (k) at += (size_t)snprintf(buf + at, n - at, "%sN*%lld", sep, (long long)k);
        else at += (size_t)snprintf(buf + at, n - at, "%s%lld", sep, (long long)s->d[i]);
    }
    if (at < n) snprintf(buf + at, n - at, ")");
    return buf;
}

/* The target's sizes resolved (0 copied, -1 inferred), *bj the dimension holding the batch (-1: none)
 * and *kb its factor. */
static rs_status resolve_target(nctx *c, const ival *x, const int64_t *t, int nt, bool allowzero, int64_t *d, int *bj,
                                int64_t *kb)
{
    imp *p = c->p;
    rs_dims xf = rs_onnx_file_shape(x);
    int64_t known = 1, total = 1;
    bool xb = false;
    int infer = -1;
    *bj = -1;
    *kb = 0;
    for (int k = 0; k < x->shape.rank; k++) {
        if (x->shape.d[k] == RS_DIM_BATCH) xb = true;
        else total *= x->shape.d[k];
    }
    for (int k = 0; k < nt; k++) {
        int64_t v = t[k];
        if (v == 0 && !allowzero) {
            if (k >= xf.rank) return rs_onnx_fail(p, RS_ERR_SHAPE, "target dim %d copies a dimension the input lacks", k);
            v = xf.d[k];
        }
        d[k] = v;
        int64_t f = rs_onnx_batch_factor(v);
        if (v == -1) {
            if (infer >= 0) return rs_onnx_fail(p, RS_ERR_SHAPE, "more than one -1 in the target shape");
            infer = k;
        } else if (f) {
            if (*bj >= 0) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "the batch appears twice in the target shape");
            *bj = k;
            *kb = f;
        } else if (v < 0) {
            return rs_onnx_fail(p, RS_ERR_SHAPE, "negative target dimension %lld", (long long)v);
        } else {
            if (v && known > RS_DIMS_MAX_ELEMS / v) return rs_onnx_fail(p, RS_ERR_SHAPE, "target shape too large");
            known *= v;
        }
    }
    char b1[128], b2[128];
    rs_dims ts = {nt, {0}};
    memcpy(ts.d, d, sizeof(int64_t) * (size_t)nt);
    if (!xb && *bj >= 0)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "the target shape %s holds the batch size but the input %s does not",
                            rs_onnx_file_shape_str(&ts, b1, sizeof b1), rs_onnx_file_shape_str(&xf, b2, sizeof b2));
    if (xb && *bj < 0) {
        /* the -1 takes the batch and whatever the fixed sizes leave */
        if (infer < 0 || known == 0 || total % known)
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "cannot tell where the batch goes reshaping %s to %s",
                                rs_onnx_file_shape_str(&xf, b1, sizeof b1), rs_onnx_file_shape_str(&ts, b2, sizeof b2));
        *bj = infer;
        *kb = total / known;
        d[infer] = rs_onnx_batch_times(*kb);
        return RS_OK;
    }
    int64_t want = xb ? known * *kb : known;
    if (infer >= 0) {
        if (want == 0 || total % want)
            return rs_onnx_fail(p, RS_ERR_SHAPE, "cannot reshape %s to %s: %lld elements are not a multiple of %lld",
                                rs_onnx_file_shape_str(&xf, b1, sizeof b1), rs_onnx_file_shape_str(&ts, b2, sizeof b2),
                                (long long)total, (long long)want);
        d[infer] = total / want;
    } else if (want != total) {
        return rs_onnx_fail(p, RS_ERR_SHAPE, "cannot reshape %s to %s", rs_onnx_file_shape_str(&xf, b1, sizeof b1),
                            rs_onnx_file_shape_str(&ts, b2, sizeof b2));
    }
    return RS_OK;
}

rs_status rs_onnx_reshape_file(nctx *c, ival *x, const int64_t *t, int nt, bool allowzero)
{
    imp *p = c->p;
    int64_t d[RS_DIMS_MAX], kb;
    int bj;
    if (nt > RS_DIMS_MAX) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "rank %d", nt);
    rs_status st = resolve_target(c, x, t, nt, allowzero, d, &bj, &kb);
    if (st) return st;
    rs_dims s = {nt, {0}};
    if (bj < 0) {
        memcpy(s.d, d, sizeof(int64_t) * (size_t)nt);
        return rs_onnx_reshape_to(c, x, &s);
    }
    /* the bytes stay where they are: the target's dims around the batch must split the sizes the input
     * holds before and after it (P = u * P2, S = v * S2), and (u, N, v) is the graph's view of dim bj */
    int64_t P = 1, S = 1, P2 = 1, S2 = 1;
    bool after = false;
    for (int k = 0; k < x->shape.rank; k++) {
        if (x->shape.d[k] == RS_DIM_BATCH) after = true;
        else if (after) S *= x->shape.d[k];
        else P *= x->shape.d[k];
    }
    for (int k = 0; k < nt; k++)
        if (k < bj) P2 *= d[k];
        else if (k > bj) S2 *= d[k];
    if (!P2 || !S2 || P % P2 || S % S2 || (P / P2) * (S / S2) != kb) {
        char b1[128], b2[128];
        rs_dims xf = rs_onnx_file_shape(x), ts = {nt, {0}};
        memcpy(ts.d, d, sizeof(int64_t) * (size_t)nt);
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "cannot tell where the batch goes reshaping %s to %s: the sizes "
                            "around the batch do not line up, so each sample's elements would depend on the batch size",
                            rs_onnx_file_shape_str(&xf, b1, sizeof b1), rs_onnx_file_shape_str(&ts, b2, sizeof b2));
    }
    int64_t u = P / P2, v = S / S2;
    int gn = 1 + (u > 1) + (v > 1);
    if (nt + gn - 1 > RS_DIMS_MAX) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "rank too high");
    s.rank = 0;
    for (int k = 0; k < nt; k++) {
        if (k != bj) {
            s.d[s.rank++] = d[k];
            continue;
        }
        if (u > 1) s.d[s.rank++] = u;
        s.d[s.rank++] = RS_DIM_BATCH;
        if (v > 1) s.d[s.rank++] = v;
    }
    if ((st = rs_onnx_reshape_to(c, x, &s))) return st;
    c->res.glo = gn > 1 ? bj : 0;
    c->res.gn = gn > 1 ? gn : 0;
    return RS_OK;
}

void rs_onnx_group_perm(const ival *x, const int *perm, int fr, int *iperm, int *glo)
{
    int n = 0;
    *glo = 0;
    for (int k = 0; k < fr; k++) {
        int f = perm[k];
        if (f == x->glo) {
            *glo = n;
            for (int j = 0; j < x->gn; j++) iperm[n++] = x->glo + j;
        } else {
            iperm[n++] = f < x->glo ? f : f + x->gn - 1;
        }
    }
}

rs_status rs_onnx_gemm_grouped(nctx *c, const rs_op_attrs *a)
{
    imp *p = c->p;
    ival *x = c->in[0], *b = c->in[1], *bias = c->nin > 2 ? c->in[2] : NULL;
    if (a->ta || a->alpha != 1.0f || a->beta != 1.0f || b->kind != IV_F || b->shape.rank != 2)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Gemm on a value that merges the batch with other sizes needs transA=0, "
                            "alpha=beta=1 and a constant 2-d B (as torch writes a Linear)");
    int64_t K = b->shape.d[a->tb ? 1 : 0], M = b->shape.d[a->tb ? 0 : 1];
    ival bt = {.kind = IV_F, .shape = {2, {K, M}}, .f = malloc(sizeof(float) * (size_t)(K * M > 0 ? K * M : 1)), .vid = -1};
    if (!bt.f) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < K; i++)
        for (int64_t j = 0; j < M; j++) bt.f[i * M + j] = a->tb ? b->f[j * K + i] : b->f[i * M + j];
    rs_op_attrs am = {0}, aa = {.sub = RS_BINARY_ADD};
    ival *ins[2] = {x, &bt};
    const char *saved = c->in_names[1];
    c->in_names[1] = a->tb ? "gemm_B_T" : saved;
    rs_status st = rs_onnx_emit(c, RS_OP_MATMUL, &am, ins, 2);
    c->in_names[1] = saved;
    rs_onnx_ival_clear(&bt);
    if (!st && bias) {
        ival mid = c->res;
        c->res = (ival){.vid = -1};
        ins[0] = &mid;
        ins[1] = bias;
        st = rs_onnx_emit(c, RS_OP_BINARY, &aa, ins, 2);
        rs_onnx_ival_clear(&mid);
    }
    if (st) return st;
    c->res.glo = x->glo;
    c->res.gn = x->gn;
    return RS_OK;
}

/* The operators whose handlers follow a grouped value themselves (reading its file shape), and those
 * that act on the last axes only, which run on the graph's shape as they are. */
static bool self_aware(const rs_onnx_op_def *d)
{
    return d->import == rs_onnx_h_shape || d->import == rs_onnx_h_reshape || d->import == rs_onnx_h_squeeze ||
           d->import == rs_onnx_h_unsqueeze || d->import == rs_onnx_h_transpose || d->import == rs_onnx_h_gemm ||
           d->import == rs_onnx_h_identity;
}

static bool on_last_axes(const rs_onnx_op_def *d)
{
    return d->import == rs_onnx_h_unary || d->import == rs_onnx_h_binary || d->import == rs_onnx_h_matmul ||
           d->import == rs_onnx_h_softmax || d->import == rs_onnx_h_layernorm || d->import == rs_onnx_h_reduce ||
           d->import == rs_onnx_h_where || d->import == rs_onnx_h_cast;
}

/* The axes an op over the last axes names must be counted from the end and lie after the grouped dim. */
static rs_status check_axes(nctx *c, const ival *x)
{
    imp *p = c->p;
    int64_t axes[RS_DIMS_MAX];
    int na = 0;
    rs_status st = RS_OK;
    if (c->def->import == rs_onnx_h_softmax || c->def->import == rs_onnx_h_layernorm) {
        axes[0] = 0;
        if (c->def->import == rs_onnx_h_softmax && p->opset < 13) axes[0] = 0; /* flattens from axis 1 */
        else st = rs_onnx_attr_int(p, "axis", &axes[0]);
        na = 1;
    } else if (c->def->import == rs_onnx_h_reduce) {
        st = rs_onnx_get_axes(c, axes, &na);
        if (!st && na <= 0) axes[0] = 0, na = 1; /* all axes: the batch too */
    }
    if (st) return st;
    rs_dims xf = rs_onnx_file_shape(x);
    for (int k = 0; k < na; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + xf.rank : axes[k];
        if (axes[k] >= 0 || a <= x->glo) {
            char b[128];
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "axis %lld of %s, whose dimension %d merges the batch with other "
                                "sizes: only axes after it, counted from the end (-1), follow such a value",
                                (long long)axes[k], rs_onnx_file_shape_str(&xf, b, sizeof b), x->glo);
        }
    }
    return RS_OK;
}

rs_status rs_onnx_batch_gate(nctx *c, int *g)
{
    imp *p = c->p;
    *g = -1;
    for (int k = 0; k < c->nin; k++)
        if (c->in[k] && c->in[k]->gn > 1 && *g < 0) *g = k;
    if (*g < 0 || self_aware(c->def)) return RS_OK;
    const ival *x = c->in[*g];
    rs_dims xf = rs_onnx_file_shape(x);
    char b[128];
    if (!on_last_axes(c->def))
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "%s on '%s' of shape %s, whose dimension %d merges the batch with other "
                            "sizes: only Reshape, Transpose, Squeeze/Unsqueeze, products, elementwise operators and those "
                            "over the last axes follow such a value (a Reshape that gives the batch its own dimension "
                            "first would import)", c->def->name, c->in_names[*g], rs_onnx_file_shape_str(&xf, b, sizeof b),
                            x->glo);
    rs_status st = check_axes(c, x);
    if (st) return st;
    /* the other inputs: grouped the same way, or reaching only the dims after the grouped one */
    int trailing = xf.rank - x->glo - 1;
    for (int k = 0; k < c->nin; k++) {
        const ival *y = c->in[k];
        if (!y || k == *g) continue;
        bool same = y->gn == x->gn && y->glo == x->glo && y->shape.rank >= x->glo + x->gn &&
                    !memcmp(y->shape.d, x->shape.d, sizeof(int64_t) * (size_t)(x->glo + x->gn));
        if (same || (!y->gn && y->shape.rank <= trailing)) continue;
        rs_dims yf = rs_onnx_file_shape(y);
        char b2[128];
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input '%s' %s does not line up with '%s' %s, whose dimension %d merges "
                            "the batch with other sizes", c->in_names[k], rs_onnx_file_shape_str(&yf, b2, sizeof b2),
                            c->in_names[*g], rs_onnx_file_shape_str(&xf, b, sizeof b), x->glo);
    }
    return RS_OK;
}

rs_status rs_onnx_batch_after(nctx *c, int g)
{
    if (g < 0 || self_aware(c->def) || c->res.kind != IV_DYN || c->res.gn) return RS_OK;
    const ival *x = c->in[g];
    int n = x->glo + x->gn;
    if (c->res.shape.rank < n || memcmp(c->res.shape.d, x->shape.d, sizeof(int64_t) * (size_t)n))
        return rs_onnx_fail(c->p, RS_ERR_INTERNAL, "lost track of the batch's dimension through this node");
    c->res.glo = x->glo;
    c->res.gn = x->gn;
    return RS_OK;
}
