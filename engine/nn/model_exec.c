/* Running a model: activation memory, forward, loss, backward (see model.h). */
#include "model_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void rs_model_free_acts(rs_model *m)
{
    rs_mem_free(m->mem, RS_POOL_ACTS, m->acts, m->acts_bytes);
    rs_mem_free(m->mem, RS_POOL_ACTS, m->dbuf, m->dbuf_bytes);
    rs_mem_free(m->mem, RS_POOL_ACTS, m->saved, m->saved_bytes);
    rs_mem_free(m->mem, RS_POOL_ACTS, m->probs, m->probs_bytes);
    rs_mem_free(m->mem, RS_POOL_SCRATCH, m->ws, m->ws_bytes);
    free(m->act_off);
    free(m->gslot);
    free(m->gdone);
    m->gslot = NULL;
    m->gdone = NULL;
    m->acts = m->dbuf = m->probs = m->ws = NULL;
    m->saved = NULL;
    m->act_off = NULL;
    m->losses = NULL;
    m->cap_B = 0;
}

/* Plans where each node's output gradient lives during backward (see model_internal.h): walking
 * backward, a node takes the lowest free slot when its first consumer runs and gives it back after
 * its own backward. Returns the slots needed (or -1 when out of memory); *ntmp gets the spare slots
 * for second contributions: 2 when some value is read twice, else 0. */
static int plan_grad_slots(const rs_model *m, int *slot, int *ntmp)
{
    int n = m->nlayers, nslots = 0;
    unsigned char *busy = calloc((size_t)n + 1, 1); /* at most one live slot per node; freed here */
    if (!busy) return -1;
    *ntmp = 0;
    for (int i = 0; i < n; i++) slot[i] = -1;
    for (int i = n - 1; i >= 0; i--) {
        const rs_layer *l = &m->layers[i];
        /* The output (read by the loss) or a value nothing reads takes its slot here; sources
         * take theirs at their first consumer, and a second consumer means a second contribution. */
        for (int k = -1; k < l->nsrc; k++) {
            int v = k < 0 ? i : l->src[k];
            if (v < 0) continue;
            if (slot[v] >= 0) {
                if (k >= 0) *ntmp = 2;
                continue;
            }
            int f = 0;
            while (busy[f]) f++;
            busy[f] = 1;
            slot[v] = f;
            if (f + 1 > nslots) nslots = f + 1;
        }
        busy[slot[i]] = 0;
    }
    free(busy);
    return nslots;
}

static size_t layer_ws(rs_model *m, const rs_layer *l, int B)
{
    return l->ops->workspace_bytes ? l->ops->workspace_bytes(l, &m->ctx, B) : 0;
}

rs_status rs_model_reserve(rs_model *m, int B, rs_err *err)
{
    if (!m->built) return rs_err_set(err, RS_ERR_ARG, "model %s is not built", m->name);
    if (B < 1) return rs_err_set(err, RS_ERR_ARG, "batch size must be >= 1, got %d", B);
    size_t ws = 0;
    for (int i = 0; i < m->nlayers; i++) {
        size_t w = layer_ws(m, &m->layers[i], B);
        ws = w > ws ? w : ws;
    }
    rs_status st = rs_kctx_check(&m->ctx, err); /* a failed workspace query */
    if (st) return st;
    /* Workspace can grow with the thread count even when B does not. */
    if (B <= m->cap_B && ws <= m->ws_bytes) return RS_OK;
    if (B < m->cap_B) B = m->cap_B;
    rs_model_free_acts(m);
    size_t acts = 0, dmax = (size_t)rs_shape_numel(&m->in), saved = 0;
    m->act_off = malloc((size_t)m->nlayers * sizeof *m->act_off);
    if (!m->act_off) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->nlayers; i++) {
        rs_layer *l = &m->layers[i];
        size_t o = (size_t)rs_shape_numel(&l->out);
        m->act_off[i] = acts;
        acts += ((size_t)B * o + 15) & ~(size_t)15;
        dmax = o > dmax ? o : dmax;
        if (l->ops->saved_bytes) saved += (l->ops->saved_bytes(l, B) + 63) & ~(size_t)63;
        size_t w = layer_ws(m, l, B);
        ws = w > ws ? w : ws;
    }
    int C = rs_model_classes(m);
    size_t R = (size_t)B * (size_t)rs_model_rows(m); /* rows of scores, one label each */
    m->gslot = malloc((size_t)m->nlayers * sizeof *m->gslot);
    m->gdone = malloc((size_t)m->nlayers);
    if (!m->gslot || !m->gdone) {
        rs_model_free_acts(m);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    int ntmp = 0;
    m->nslots = plan_grad_slots(m, m->gslot, &ntmp);
    if (m->nslots < 0) {
        rs_model_free_acts(m);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    m->dslot = ((size_t)B * dmax + 15) & ~(size_t)15;
    m->acts_bytes = acts * sizeof(float);
    m->dbuf_bytes = (size_t)(m->nslots + ntmp) * m->dslot * sizeof(float);
    m->saved_bytes = saved ? saved : 64;
    m->probs_bytes = (R * (size_t)C + R) * sizeof(float);
    m->ws_bytes = ws ? ws : 64;
    m->acts = rs_mem_alloc(m->mem, RS_POOL_ACTS, m->acts_bytes);
    m->dbuf = rs_mem_alloc(m->mem, RS_POOL_ACTS, m->dbuf_bytes);
    m->saved = rs_mem_alloc(m->mem, RS_POOL_ACTS, m->saved_bytes);
    m->probs = rs_mem_alloc(m->mem, RS_POOL_ACTS, m->probs_bytes);
    m->ws = rs_mem_alloc(m->mem, RS_POOL_SCRATCH, m->ws_bytes);
    if (!m->acts || !m->dbuf || !m->saved || !m->probs || !m->ws) {
        rs_model_free_acts(m);
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for activations of batch %d", m->name, B);
    }
    m->losses = m->probs + R * (size_t)C;
    size_t so = 0;
    for (int i = 0; i < m->nlayers; i++) {
        rs_layer *l = &m->layers[i];
        l->saved = NULL;
        if (l->ops->saved_bytes) {
            l->saved = m->saved + so;
            so += (l->ops->saved_bytes(l, B) + 63) & ~(size_t)63;
        }
    }
    m->cap_B = B;
    return RS_OK;
}

static rs_exec exec_ctx(rs_model *m)
{
    uint64_t z = m->seed ^ (m->step * 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ULL;
    return (rs_exec){.k = m->k, .ctx = &m->ctx, .params = m->params, .grads = m->grads, .ws = m->ws,
                     .ws_bytes = m->ws_bytes, .training = m->training, .dropout_seed = z ^ (z >> 29)};
}

void rs_model_set_training(rs_model *m, bool training) { m->training = training; }
bool rs_model_training(const rs_model *m) { return m->training; }

/* The output of node i (or the model's input for -1). */
static const float *node_out(const rs_model *m, int i, const void *x)
{
    return i < 0 ? (const float *)x : m->acts + m->act_off[i];
}

rs_status rs_model_forward(rs_model *m, const void *x, int B, const float **logits, rs_err *err)
{
    /* A kernel failure of the last backward or zero_grad (void calls) surfaces here. */
    rs_status st = rs_kctx_check(&m->ctx, err);
    if (st) return st;
    st = rs_model_reserve(m, B, err);
    if (st) return st;
    if (m->tokens) {
        /* An id outside the vocabulary would index past the embedding table. */
        int V = rs_model_vocab(m);
        size_t n = (size_t)B * (size_t)rs_shape_numel(&m->in);
        const int32_t *tok = x;
        for (size_t i = 0; i < n; i++)
            if (tok[i] < 0 || tok[i] >= V)
                return rs_err_set(err, RS_ERR_ARG, "token %d at position %zu of the batch is outside the model's "
                                  "vocabulary of %d; the data set and the model must share one vocabulary",
                                  (int)tok[i], i, V);
    }
    if (m->training) m->step++;
    rs_exec ex = exec_ctx(m);
    for (int u = 0; u < m->nunits; u++) {
        const rs_unit *un = &m->units[u];
        if (m->has_uh && m->uh.before_forward && (st = m->uh.before_forward(m->uh.ud, un, err))) return st;
        for (int i = un->first; i < un->first + un->count; i++) {
            rs_layer *l = &m->layers[i];
            float *out = m->acts + m->act_off[i];
            const float *in = node_out(m, l->src[0], x);
            if (l->ops->nin == 2) l->ops->forward2(l, &ex, in, node_out(m, l->src[1], x), out, B);
            else l->ops->forward(l, &ex, in, out, B);
            if (rs_kctx_status(&m->ctx)) return rs_kctx_check(&m->ctx, err);
        }
        if (m->has_uh && m->uh.after_forward && (st = m->uh.after_forward(m->uh.ud, un, err))) return st;
    }
    if (logits) *logits = m->acts + m->act_off[m->nlayers - 1];
    return RS_OK;
}

rs_status rs_model_loss(rs_model *m, const int32_t *y, int B, float *loss, rs_err *err)
{
    rs_status st = rs_kctx_check(&m->ctx, err);
    if (st) return st;
    int C = rs_model_classes(m), R = B * rs_model_rows(m);
    if (B > m->cap_B) return rs_err_set(err, RS_ERR_ARG, "loss of batch %d before a forward of that batch", B);
    for (int b = 0; b < R; b++)
        if (y[b] < 0 || y[b] >= C)
            return rs_err_set(err, RS_ERR_ARG,
                              "label %d of %s %d is outside the model's %d classes (0..%d); "
                              "the last layer needs as many outputs as the data has classes",
                              (int)y[b], R == B ? "sample" : "row", b, C, C - 1);
    const float *logits = m->acts + m->act_off[m->nlayers - 1];
    st = m->k->softmax_xent_fwd(&m->ctx, logits, y, m->probs, m->losses, R, C);
    if (st) return rs_kctx_check(&m->ctx, err);
    /* Mean over the rows in double: the figure reported does not drift with batch size. */
    double s = 0.0;
    for (int b = 0; b < R; b++) s += m->losses[b];
    if (loss) *loss = (float)(s / R);
    return RS_OK;
}

static float *grad_slot(const rs_model *m, int slot) { return m->dbuf + (size_t)slot * m->dslot; }

/* Where a backward writes the gradient for source s: s's own slot on its first contribution, else
 * the scratch slot tmp (added in by add_back). NULL when s is the model's input. */
static float *din_for(rs_model *m, int s, int tmp, bool *later)
{
    *later = false;
    if (s < 0) return NULL;
    if (!m->gdone[s]) {
        m->gdone[s] = 1;
        return grad_slot(m, m->gslot[s]);
    }
    *later = true;
    return grad_slot(m, m->nslots + tmp);
}

static void add_back(rs_model *m, int s, int tmp, int B)
{
    size_t n = (size_t)B * (size_t)rs_shape_numel(&m->layers[s].out);
    m->k->axpy(&m->ctx, grad_slot(m, m->gslot[s]), grad_slot(m, m->nslots + tmp), n, 1.0f);
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

void rs_model_backward(rs_model *m, const void *x, const int32_t *y, int B, float loss_scale)
{
    rs_exec ex = exec_ctx(m);
    int C = rs_model_classes(m), R = B * rs_model_rows(m), n = m->nlayers;
    memset(m->gdone, 0, (size_t)n);
    m->gdone[n - 1] = 1;
    if (m->k->softmax_xent_bwd(&m->ctx, m->probs, y, grad_slot(m, m->gslot[n - 1]), R, C, loss_scale / (float)R))
        return; /* kernel failures stay in m->ctx for the next forward or loss (model.h) */
    /* Units in reverse; a failing unit hook stops the pass (its owner keeps the error). */
    int u = m->nunits - 1;
    rs_err herr = {0};
    if (m->has_uh && m->uh.before_backward && m->uh.before_backward(m->uh.ud, &m->units[u], &herr)) return;
    /* exec_ctx read the buffers' addresses, which a hook may not change: acquire_grads happens before
     * backward, and sharded buffers keep their addresses. */
    for (int i = n - 1; i >= 0; i--) {
        if (i < m->units[u].first) {
            if (m->has_uh && m->uh.after_backward && m->uh.after_backward(m->uh.ud, &m->units[u], &herr)) return;
            u--;
            if (m->has_uh && m->uh.before_backward && m->uh.before_backward(m->uh.ud, &m->units[u], &herr)) return;
        }
        rs_layer *l = &m->layers[i];
        const float *out = m->acts + m->act_off[i];
        const float *dout = grad_slot(m, m->gslot[i]);
        if (!m->gdone[i]) continue; /* nothing downstream reads this node: no gradient flows through it */
        if (l->ops->nin == 2) {
            bool la, lb;
            float *da = din_for(m, l->src[0], 0, &la), *db = din_for(m, l->src[1], 1, &lb);
            l->ops->backward2(l, &ex, dout, da, db, B);
            if (la) add_back(m, l->src[0], 0, B);
            if (lb) add_back(m, l->src[1], 1, B);
        } else {
            bool later;
            float *din = din_for(m, l->src[0], 0, &later); /* nobody needs d(loss)/d(input) */
            l->ops->backward(l, &ex, node_out(m, l->src[0], x), out, dout, din, B);
            if (later) add_back(m, l->src[0], 0, B);
        }
        if (rs_kctx_status(&m->ctx)) return;
        report_grads(m, l);
    }
    if (m->has_uh && m->uh.after_backward) m->uh.after_backward(m->uh.ud, &m->units[0], &herr);
}

void rs_model_zero_grad(rs_model *m)
{
    /* Released (ZeRO-2) or sharded (ZeRO-3) gradients are zero-filled when acquired. */
    if (m->grads_released || m->sharded) return;
    m->k->fill(&m->ctx, m->grads, m->numel, 0.0f);
}

void rs_model_set_grad_hook(rs_model *m, rs_grad_ready_fn fn, void *ud)
{
    m->grad_hook = fn;
    m->grad_hook_ud = ud;
}

