/* Running a model: forward, loss and backward over an activation set, for the whole model or a range
 * of layers (a pipeline stage); see model.h. */
#include "model_internal.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "engine/core/kernels.h"

/* The pass's view of the model: buffers, mode, and the dropout seed of the set's step. */
static rs_exec exec_for(const rs_model *m, rs_acts *a)
{
    uint64_t z = m->seed ^ (a->step * 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ULL;
    return (rs_exec){.k = m->k, .ctx = a->ctx, .params = m->params, .grads = m->grads, .ws = a->ws,
                     .ws_bytes = a->ws_bytes, .training = a->training, .inference = m->inference,
                     .dropout_seed = z ^ (z >> 29), .tp_all_reduce = m->tp_comm,
                     .tp_ud = m->tp_comm_ud};
}

static void *layer_saved(const rs_acts *a, int i)
{
    return a->saved_off[i] == SIZE_MAX ? NULL : a->saved + a->saved_off[i];
}

void rs_model_set_training(rs_model *m, bool training) { m->training = training; }
bool rs_model_training(const rs_model *m) { return m->training; }

/* The output of node i in a pass over layers [first, ...): `in` for a node before the range (the
 * model's input, or layer first-1's output), else the set's; a view's is its source's. */
static const float *node_out(const rs_acts *a, int i, int first, const void *in)
{
    while (i >= first && a->m->layers[i].view) i = a->m->layers[i].src[0];
    return i < first ? (const float *)in : a->acts + a->act_off[i];
}

/* The first unit holding a layer >= i. */
static int unit_of(const rs_model *m, int i)
{
    int u = 0;
    while (u + 1 < m->nunits && m->units[u].first + m->units[u].count <= i) u++;
    return u;
}

static rs_status check_tokens(const rs_model *m, const int32_t *tok, int B, rs_err *err)
{
    /* An id outside the vocabulary would index past the embedding table. */
    int V = rs_model_vocab(m);
    size_t n = (size_t)B * (size_t)rs_shape_numel(&m->in);
    for (size_t i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= V)
            return rs_err_set(err, RS_ERR_ARG, "token %d at position %zu of the batch is outside the model's "
                              "vocabulary of %d; the data set and the model must share one vocabulary",
                              (int)tok[i], i, V);
    return RS_OK;
}

rs_status rs_model_run_range(rs_model *m, rs_acts *a, int first, int last, const void *in, int B, bool training,
                             const float **out, rs_err *err)
{
    int n = m->nlayers;
    if (!m->built) return rs_err_set(err, RS_ERR_ARG, "model %s is not built", m->name);
    if (a->m != m) return rs_err_set(err, RS_ERR_ARG, "model %s: the activation set belongs to model %s", m->name, a->m->name);
    if (first < 0 || last > n || first >= last)
        return rs_err_set(err, RS_ERR_ARG, "model %s: layers [%d, %d) are not a range of its %d layers", m->name, first,
                          last, n);
    if (first < a->first || last > a->last)
        return rs_err_set(err, RS_ERR_ARG, "model %s: the activation set holds layers [%d, %d), not [%d, %d)", m->name,
                          a->first, a->last, first, last);
    /* A set's own ends were checked when it was made. */
    if ((first != a->first && !rs_model_cut_ok(m, first)) || (last != a->last && !rs_model_cut_ok(m, last)))
        return rs_err_set(err, RS_ERR_ARG, "model %s: a cut before layer %s splits a residual block; cut between "
                          "top-level items", m->name, m->layers[rs_model_cut_ok(m, first) ? last : first].name);
    if (!in) return rs_err_set(err, RS_ERR_ARG, "model %s: no input for layers [%d, %d)", m->name, first, last);
    /* A kernel failure of the last backward or zero_grad (void calls) surfaces here. */
    rs_status st = rs_acts_sync_ctx(a, err);
    if (st) return st;
    st = rs_acts_reserve(a, B, err);
    if (st) return st;
    if (first == 0 && m->tokens && (st = check_tokens(m, in, B, err))) return st;
    if (a->staged) {
        /* Stages pass host buffers between ranks; a model on a device runs whole passes only. */
        if (first != 0 || last != n)
            return rs_err_set(err, RS_ERR_UNSUPPORTED, "model %s is on %s: a range of its layers (a pipeline "
                              "stage) runs on the CPU only; `to %s cpu` moves it back", m->name,
                              rs_device_name(m->dev), m->name);
        if (m->k->copy_h2d(a->ctx, a->in_dev, in, (size_t)B * (size_t)rs_shape_numel(&m->in) * 4))
            return rs_kctx_check(a->ctx, err);
        in = a->in_dev;
    }
    if (training && first == 0) a->step = ++m->step;
    a->training = training;
    rs_exec ex = exec_for(m, a);
    for (int u = unit_of(m, first); u < m->nunits && m->units[u].first < last; u++) {
        const rs_unit *un = &m->units[u];
        if (m->has_uh && m->uh.before_forward && (st = m->uh.before_forward(m->uh.ud, un, err))) return st;
        int lo = un->first > first ? un->first : first, hi = un->first + un->count;
        if (hi > last) hi = last;
        for (int i = lo; i < hi; i++) {
            rs_layer *l = &m->layers[i];
            if (l->view) continue;
            float *o = a->acts + a->act_off[i];
            const float *x0 = node_out(a, l->src[0], first, in);
            ex.saved = layer_saved(a, i);
            if (l->ops->forward_n) {
                const float *ins[RS_LAYER_MAX_SRC];
                for (int k = 0; k < l->nsrc; k++) ins[k] = node_out(a, l->src[k], first, in);
                l->ops->forward_n(l, &ex, ins, o, B);
            } else if (l->ops->nin == 2) {
                l->ops->forward2(l, &ex, x0, node_out(a, l->src[1], first, in), o, B);
            } else {
                l->ops->forward(l, &ex, x0, o, B);
            }
            if (rs_kctx_status(a->ctx)) return rs_kctx_check(a->ctx, err);
        }
        if (m->has_uh && m->uh.after_forward && (st = m->uh.after_forward(m->uh.ud, un, err))) return st;
    }
    const float *o = node_out(a, last - 1, first, in);
    if (last == n) a->out = o;
    if (a->staged && out) {
        /* The caller reads the output on the host (accuracy, sampling): a copy, after the pass. */
        size_t bytes = (size_t)B * (size_t)rs_shape_numel(&m->layers[n - 1].out) * sizeof(float);
        if (m->k->copy_d2h(a->ctx, a->out_host, o, bytes)) return rs_kctx_check(a->ctx, err);
        o = a->out_host;
    }
    if (out) *out = o;
    return RS_OK;
}

rs_status rs_model_forward_range(rs_model *m, rs_acts *a, int first, int last, const void *in, int B,
                                 const float **out, rs_err *err)
{
    return rs_model_run_range(m, a, first, last, in, B, m->training, out, err);
}

rs_status rs_model_forward_acts(rs_model *m, rs_acts *a, const void *x, int B, const float **out, rs_err *err)
{
    return rs_model_run_range(m, a, 0, m->nlayers, x, B, m->training, out, err);
}

rs_status rs_model_forward(rs_model *m, const void *x, int B, const float **logits, rs_err *err)
{
    /* The default set runs on the model's context: a failure of the last backward or zero_grad first. */
    rs_status st = rs_kctx_check(&m->ctx, err);
    if (st) return st;
    st = m->dflt ? RS_OK : rs_model_reserve(m, B, err);
    return st ? st : rs_model_forward_acts(m, m->dflt, x, B, logits, err);
}

rs_status rs_model_loss_acts(rs_model *m, rs_acts *a, const int32_t *y, int B, float *loss, rs_err *err)
{
    rs_status st = rs_acts_sync_ctx(a, err);
    if (st) return st;
    int C = rs_model_classes(m), R = B * rs_model_rows(m);
    if (a->last != m->nlayers)
        return rs_err_set(err, RS_ERR_ARG, "model %s: the activation set holds layers [%d, %d); the loss needs the "
                          "last layer's output", m->name, a->first, a->last);
    if (B > a->cap_B) return rs_err_set(err, RS_ERR_ARG, "loss of batch %d before a forward of that batch", B);
    for (int b = 0; b < R; b++)
        if (y[b] < 0 || y[b] >= C)
            return rs_err_set(err, RS_ERR_ARG,
                              "label %d of %s %d is outside the model's %d classes (0..%d); "
                              "the last layer needs as many outputs as the data has classes",
                              (int)y[b], R == B ? "sample" : "row", b, C, C - 1);
    const float *logits = a->out;
    if (!logits) return rs_err_set(err, RS_ERR_ARG, "loss of batch %d before a forward of that batch", B);
    const int32_t *yd = y;
    const float *losses = a->losses;
    if (a->staged) {
        if (m->k->copy_h2d(a->ctx, a->y_dev, y, (size_t)R * sizeof *y)) return rs_kctx_check(a->ctx, err);
        yd = a->y_dev;
    }
    if (m->k->softmax_xent_fwd(a->ctx, logits, yd, a->probs, a->losses, R, C)) return rs_kctx_check(a->ctx, err);
    a->y = yd;
    if (a->staged) {
        if (m->k->copy_d2h(a->ctx, a->loss_host, a->losses, (size_t)R * sizeof(float))) return rs_kctx_check(a->ctx, err);
        losses = a->loss_host;
    }
    /* Mean over the rows in double: the figure reported does not drift with batch size. */
    double s = 0.0;
    for (int b = 0; b < R; b++) s += losses[b];
    if (loss) *loss = (float)(s / R);
    return RS_OK;
}

rs_status rs_model_loss(rs_model *m, const int32_t *y, int B, float *loss, rs_err *err)
{
    if (!m->dflt) return rs_err_set(err, RS_ERR_ARG, "loss of batch %d before a forward of that batch", B);
    return rs_model_loss_acts(m, m->dflt, y, B, loss, err);
}

static float *grad_slot(const rs_acts *a, int slot) { return a->dbuf + (size_t)slot * a->dslot; }

/* Where a backward writes the gradient for source s: s's own slot on its first contribution, else
 * the scratch slot tmp (added in by add_back). NULL when s is below lo (the model's input, or the
 * range's input when nobody wants its gradient). */
static float *din_for(rs_acts *a, int s, int lo, int tmp, bool *later)
{
    const rs_model *m = a->m;
    *later = false;
    if (s < lo) return NULL;
    if (!a->gdone[s]) {
        a->gdone[s] = 1;
        return grad_slot(a, m->gslot[s]);
    }
    *later = true;
    return grad_slot(a, m->nslots + tmp);
}

static void add_back(rs_acts *a, int s, int tmp, int B)
{
    const rs_model *m = a->m;
    size_t n = (size_t)B * (size_t)rs_shape_numel(&m->layers[s].out);
    m->k->axpy(a->ctx, grad_slot(a, m->gslot[s]), grad_slot(a, m->nslots + tmp), n, 1.0f);
}

static void report_grads(rs_model *m, const rs_layer *l)
{
    if (!m->grad_hook) return;
    size_t first = SIZE_MAX, last = 0;
    for (int j = 0; j < l->np; j++) {
        if (l->p[j].tied) continue; /* the owner reports it, after the last contribution */
        if (l->p[j].offset < first) first = l->p[j].offset;
        if (l->p[j].offset + l->p[j].numel > last) last = l->p[j].offset + l->p[j].numel;
    }
    if (first != SIZE_MAX) m->grad_hook(m->grad_hook_ud, first, last - first);
}

/* Backward of layers [first, last) on a, from dout (or from the loss on y scaled by loss_scale when
 * dout is NULL and last is the end), leaving the gradient of `in` in din when asked. */
static void run_backward(rs_model *m, rs_acts *a, int first, int last, const void *in, const float *dout,
                         float *din, int B, const int32_t *y, float loss_scale)
{
    int n = m->nlayers;
    if (m->inference) return; /* rs_model_check_trainable refused it before any training started */
    assert(a->m == m && first >= a->first && last <= a->last && first < last && B <= a->cap_B);
    assert(dout || (last == n && y));
    rs_exec ex = exec_for(m, a);
    memset(a->gdone, 0, (size_t)n);
    a->gdone[last - 1] = 1;
    float *top = grad_slot(a, m->gslot[last - 1]);
    /* Kernel failures stay in a's context for the next forward or loss on it (model.h). */
    if (dout) {
        size_t ntop = (size_t)B * (size_t)rs_shape_numel(&m->layers[last - 1].out);
        if (m->k->copy_d2d(a->ctx, top, dout, ntop * sizeof(float))) return;
    } else {
        int C = rs_model_classes(m), R = B * rs_model_rows(m);
        if (m->k->softmax_xent_bwd(a->ctx, a->probs, y, top, R, C, loss_scale / (float)R)) return;
    }
    /* A gradient for the range's input only when someone wants it. */
    int lo = first > 0 && din ? first - 1 : first;
    /* Units in reverse; a failing unit hook stops the pass (its owner keeps the error). */
    int u = unit_of(m, last - 1);
    rs_err herr = {0};
    if (m->has_uh && m->uh.before_backward && m->uh.before_backward(m->uh.ud, &m->units[u], &herr)) return;
    /* exec_for read the buffers' addresses, which a hook may not change: acquire_grads happens before
     * backward, and sharded buffers keep their addresses. */
    for (int i = last - 1; i >= first; i--) {
        if (i < m->units[u].first) {
            if (m->has_uh && m->uh.after_backward && m->uh.after_backward(m->uh.ud, &m->units[u], &herr)) return;
            u--;
            if (m->has_uh && m->uh.before_backward && m->uh.before_backward(m->uh.ud, &m->units[u], &herr)) return;
        }
        rs_layer *l = &m->layers[i];
        const float *out = a->acts + a->act_off[i];
        const float *g = grad_slot(a, m->gslot[i]);
        if (!a->gdone[i]) continue; /* nothing downstream reads this node: no gradient flows through it */
        ex.saved = layer_saved(a, i);
        if (l->ops->nin == 2) {
            bool la, lb;
            float *da = din_for(a, l->src[0], lo, 0, &la), *db = din_for(a, l->src[1], lo, 1, &lb);
            l->ops->backward2(l, &ex, g, da, db, B);
            if (la) add_back(a, l->src[0], 0, B);
            if (lb) add_back(a, l->src[1], 1, B);
        } else {
            bool later;
            float *d = din_for(a, l->src[0], lo, 0, &later); /* nobody needs d(loss)/d(model input) */
            l->ops->backward(l, &ex, node_out(a, l->src[0], first, in), out, g, d, B);
            if (later) add_back(a, l->src[0], 0, B);
        }
        if (rs_kctx_status(a->ctx)) return;
        report_grads(m, l);
    }
    if (m->has_uh && m->uh.after_backward) m->uh.after_backward(m->uh.ud, &m->units[u], &herr);
    if (lo < first) {
        size_t nin = (size_t)B * (size_t)rs_shape_numel(&m->layers[first - 1].out);
        if (a->gdone[first - 1]) m->k->copy_d2d(a->ctx, din, grad_slot(a, m->gslot[first - 1]), nin * sizeof(float));
        else m->k->fill(a->ctx, din, nin, 0.0f);
    }
}

void rs_model_backward_range(rs_model *m, rs_acts *a, int first, int last, const void *in, const float *dout,
                             float *din, int B)
{
    if (a->staged && (dout || din || first != 0 || last != m->nlayers)) {
        /* dout and din are host buffers between stages (see rs_model_run_range) */
        rs_kctx_fail(a->ctx, RS_ERR_UNSUPPORTED, "model %s is on %s: a range of its layers runs on the CPU only",
                     m->name, rs_device_name(m->dev));
        return;
    }
    if (a->staged) in = a->in_dev;
    run_backward(m, a, first, last, in, dout, din, B, a->y, a->loss_scale);
}

void rs_model_backward_acts(rs_model *m, rs_acts *a, const void *x, const int32_t *y, int B, float loss_scale)
{
    if (a->staged) {
        /* The device copies the forward and the loss made of this batch's x and y (model.h: backward
         * follows them); the host pointers say only which batch. */
        if (!a->in_dev || !a->y_dev || B > a->cap_B) {
            rs_kctx_fail(a->ctx, RS_ERR_ARG, "model %s: backward of batch %d before a forward and loss of that batch",
                         m->name, B);
            return;
        }
        x = a->in_dev;
        y = a->y_dev;
    }
    run_backward(m, a, 0, m->nlayers, x, NULL, NULL, B, y, loss_scale);
}

void rs_model_backward(rs_model *m, const void *x, const int32_t *y, int B, float loss_scale)
{
    if (m->dflt) rs_model_backward_acts(m, m->dflt, x, y, B, loss_scale);
}

void rs_model_zero_grad(rs_model *m)
{
    /* Released (ZeRO-2) or sharded (ZeRO-3) gradients are zero-filled when acquired. */
    if (m->grads_released || m->sharded || !m->grads) return;
    m->k->fill(&m->ctx, m->grads, m->numel, 0.0f);
}

void rs_model_set_grad_hook(rs_model *m, rs_grad_ready_fn fn, void *ud)
{
    m->grad_hook = fn;
    m->grad_hook_ud = ud;
}

