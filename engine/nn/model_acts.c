/* Activation sets and cut points (see model.h). A set is the memory of one pass, so passes that each
 * have one can run side by side on one model; the default set keeps the one-pass API. Cut points say
 * where a model can be split into pipeline stages with one value crossing each boundary. */
#include "model_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/kernels.h"

/* Plans where each node's output gradient lives during backward (see model_internal.h): walking
 * backward, a node takes the lowest free slot when its first consumer runs and gives it back after
 * its own backward. A range's backward touches a subset of the nodes live at each point of the whole
 * backward, so one plan serves every range. */
rs_status rs_model_plan_grads(rs_model *m, rs_err *err)
{
    int n = m->nlayers, nslots = 0;
    free(m->gslot);
    m->gslot = malloc((size_t)n * sizeof *m->gslot);
    unsigned char *busy = calloc((size_t)n + 1, 1); /* at most one live slot per node; freed here */
    if (!m->gslot || !busy) {
        free(busy);
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory", m->name);
    }
    int *slot = m->gslot;
    m->ntmp = 0;
    for (int i = 0; i < n; i++) slot[i] = -1;
    for (int i = n - 1; i >= 0; i--) {
        const rs_layer *l = &m->layers[i];
        /* The output (read by the loss) or a value nothing reads takes its slot here; sources
         * take theirs at their first consumer, and a second consumer means a second contribution. */
        for (int k = -1; k < l->nsrc; k++) {
            int v = k < 0 ? i : l->src[k];
            if (v < 0) continue;
            if (slot[v] >= 0) {
                if (k >= 0) m->ntmp = 2;
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
    m->nslots = nslots;
    return RS_OK;
}

static size_t layer_ws(rs_acts *a, const rs_layer *l, int B)
{
    return l->ops->workspace_bytes ? l->ops->workspace_bytes(l, a->ctx, B) : 0;
}

/* A set with its own context follows the model's thread count, product blocks and stream. */
static void acts_follow(rs_acts *a)
{
    if (a->ctx == &a->own) {
        a->own.threads = a->m->ctx.threads;
        a->own.blocks = a->m->ctx.blocks; /* the tuner's (engine/train/tune.h) */
        a->own.stream = a->m->ctx.stream;
    }
}

rs_status rs_acts_sync_ctx(rs_acts *a, rs_err *err)
{
    rs_kctx *mc = &a->m->ctx;
    rs_status ust = a->staged ? rs_model_use_device(a->m, err) : RS_OK;
    if (ust) return ust;
    acts_follow(a);
    if (a->ctx != mc && rs_kctx_status(mc)) return rs_kctx_check(mc, err);
    return rs_kctx_check(a->ctx, err);
}

static size_t align(size_t n, size_t to) { return (n + to - 1) & ~(to - 1); }

/* The set's memory comes from the model's table, so it lives where the model does. A failure stays in
 * the context for rs_acts_reserve to report. */
static void *dev_alloc(rs_acts *a, rs_pool p, size_t bytes)
{
    void *ptr = NULL;
    a->m->k->mem_alloc(a->ctx, a->m->mem, p, bytes, &ptr);
    return ptr;
}

static void dev_free(rs_acts *a, rs_pool p, void *ptr, size_t bytes)
{
    if (ptr) a->m->k->mem_free(a->ctx, a->m->mem, p, ptr, bytes);
}

/* Gives back the set's pooled memory (its per-layer arrays stay). */
static void acts_release(rs_acts *a)
{
    dev_free(a, RS_POOL_ACTS, a->acts, a->acts_bytes);
    dev_free(a, RS_POOL_ACTS, a->dbuf, a->dbuf_bytes);
    dev_free(a, RS_POOL_ACTS, a->saved, a->saved_bytes);
    dev_free(a, RS_POOL_ACTS, a->probs, a->probs_bytes);
    dev_free(a, RS_POOL_SCRATCH, a->ws, a->ws_bytes);
    dev_free(a, RS_POOL_ACTS, a->in_dev, a->in_bytes);
    dev_free(a, RS_POOL_ACTS, a->y_dev, a->y_bytes);
    free(a->out_host);
    free(a->loss_host);
    a->acts = a->dbuf = a->probs = a->losses = a->ws = NULL;
    a->out = NULL;
    a->saved = NULL;
    a->in_dev = NULL;
    a->y_dev = NULL;
    a->out_host = a->loss_host = NULL;
    a->acts_bytes = a->dbuf_bytes = a->saved_bytes = a->probs_bytes = a->ws_bytes = 0;
    a->in_bytes = a->y_bytes = a->out_bytes = 0;
    a->cap_B = 0;
}

/* A device model's staging buffers for batches of B (see model_internal.h). */
static bool stage_alloc(rs_acts *a, const rs_shape *in, bool last, size_t R, int B)
{
    rs_model *m = a->m;
    a->in_bytes = (size_t)B * (size_t)rs_shape_numel(in) * 4; /* floats or int32 token ids */
    a->in_dev = dev_alloc(a, RS_POOL_ACTS, a->in_bytes);
    if (!a->in_dev) return false;
    if (!last) return true;
    a->y_bytes = R * sizeof(int32_t);
    a->out_bytes = (size_t)B * (size_t)rs_shape_numel(&m->layers[m->nlayers - 1].out) * sizeof(float);
    a->y_dev = dev_alloc(a, RS_POOL_ACTS, a->y_bytes);
    a->out_host = malloc(a->out_bytes ? a->out_bytes : 1);
    a->loss_host = malloc(R ? R * sizeof(float) : 1);
    return a->y_dev && a->out_host && a->loss_host;
}

rs_status rs_acts_reserve(rs_acts *a, int B, rs_err *err)
{
    rs_model *m = a->m;
    if (B < 1) return rs_err_set(err, RS_ERR_ARG, "batch size must be >= 1, got %d", B);
    acts_follow(a);
    size_t ws = 0;
    for (int i = a->first; i < a->last; i++) {
        size_t w = layer_ws(a, &m->layers[i], B);
        ws = w > ws ? w : ws;
    }
    rs_status st = rs_kctx_check(a->ctx, err); /* a failed workspace query */
    if (st) return st;
    /* Workspace can grow with the thread count even when B does not. */
    if (B <= a->cap_B && ws <= a->ws_bytes) return RS_OK;
    if (B < a->cap_B) B = a->cap_B;
    acts_release(a);
    /* The slots hold the gradient of any node of the range and of its input. */
    const rs_shape *in = a->first ? &m->layers[a->first - 1].out : &m->in;
    size_t acts = 0, dmax = (size_t)rs_shape_numel(in), saved = 0;
    for (int i = a->first; i < a->last; i++) {
        const rs_layer *l = &m->layers[i];
        size_t o = (size_t)rs_shape_numel(&l->out);
        a->act_off[i] = acts;
        if (!l->view) acts += align((size_t)B * o, 16); /* a view owns no memory */
        dmax = o > dmax ? o : dmax;
        a->saved_off[i] = SIZE_MAX;
        if (l->ops->saved_bytes) {
            a->saved_off[i] = saved;
            saved += align(l->ops->saved_bytes(l, B), 64);
        }
        size_t w = layer_ws(a, l, B);
        ws = w > ws ? w : ws;
    }
    bool last = a->last == m->nlayers;
    int C = rs_model_classes(m);
    size_t R = (size_t)B * (size_t)rs_model_rows(m); /* rows of scores, one label each */
    a->dslot = align((size_t)B * dmax, 16);
    a->acts_bytes = acts * sizeof(float);
    /* an inference-only model has no backward: no gradient slots */
    a->dbuf_bytes = m->inference ? 64 : (size_t)(m->nslots + m->ntmp) * a->dslot * sizeof(float);
    a->saved_bytes = saved ? saved : 64;
    a->probs_bytes = last ? (R * (size_t)C + R) * sizeof(float) : 0;
    a->ws_bytes = ws ? ws : 64;
    a->acts = dev_alloc(a, RS_POOL_ACTS, a->acts_bytes);
    a->dbuf = dev_alloc(a, RS_POOL_ACTS, a->dbuf_bytes);
    a->saved = dev_alloc(a, RS_POOL_ACTS, a->saved_bytes);
    if (last) a->probs = dev_alloc(a, RS_POOL_ACTS, a->probs_bytes);
    a->ws = dev_alloc(a, RS_POOL_SCRATCH, a->ws_bytes);
    bool staged_ok = !a->staged || stage_alloc(a, in, last, R, B);
    if (!a->acts || !a->dbuf || !a->saved || (last && !a->probs) || !a->ws || !staged_ok) {
        acts_release(a);
        /* the table's own reason when it refused for another (an unusable context); else out of memory */
        rs_err e = {0};
        if (rs_kctx_check(a->ctx, &e) && e.code != RS_ERR_NOMEM) return rs_err_set(err, e.code, "%s", e.msg);
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for activations of batch %d", m->name, B);
    }
    if (last) a->losses = a->probs + R * (size_t)C;
    a->cap_B = B;
    return RS_OK;
}

/* A set on the model's own context (the default set) or on a copy of it. */
static rs_acts *acts_new(rs_model *m, int first, int last, int B, bool model_ctx, rs_err *err)
{
    if (!m->built) {
        rs_err_set(err, RS_ERR_ARG, "model %s is not built", m->name);
        return NULL;
    }
    int n = m->nlayers;
    if (first < 0 || last > n || first >= last) {
        rs_err_set(err, RS_ERR_ARG, "model %s: layers [%d, %d) are not a range of its %d layers", m->name, first,
                   last, n);
        return NULL;
    }
    for (int k = 0; k < 2; k++) {
        int at = k ? last : first;
        if (!rs_model_cut_ok(m, at)) {
            rs_err_set(err, RS_ERR_ARG, "model %s: a cut before layer %s splits a residual block (a layer after it "
                       "reads an earlier one); cut between top-level items", m->name, m->layers[at].name);
            return NULL;
        }
    }
    rs_acts *a = calloc(1, sizeof *a); /* caller owns; freed by rs_acts_free */
    if (!a) goto nomem;
    a->m = m;
    a->first = first;
    a->last = last;
    a->loss_scale = 1.0f;
    a->own = m->ctx;
    rs_kctx_check(&a->own, NULL); /* the copy starts without the model's failure */
    a->ctx = model_ctx ? &m->ctx : &a->own;
    a->staged = m->k->kind != RS_DEV_CPU;
    a->act_off = malloc(2 * (size_t)n * sizeof *a->act_off);
    a->gdone = calloc((size_t)n, 1);
    if (!a->act_off || !a->gdone) goto nomem;
    a->saved_off = a->act_off + n;
    if (rs_acts_reserve(a, B, err)) {
        rs_acts_free(a);
        return NULL;
    }
    return a;
nomem:
    rs_acts_free(a);
    rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for an activation set", m->name);
    return NULL;
}

rs_acts *rs_acts_new_range(rs_model *m, int first, int last, int B, rs_err *err)
{
    return acts_new(m, first, last, B, false, err);
}

rs_acts *rs_acts_new(rs_model *m, int B, rs_err *err) { return acts_new(m, 0, m->nlayers, B, false, err); }

void rs_acts_free(rs_acts *a)
{
    if (!a) return;
    acts_release(a);
    free(a->act_off);
    free(a->gdone);
    free(a);
}

int rs_acts_batch(const rs_acts *a) { return a->cap_B; }
int rs_acts_first(const rs_acts *a) { return a->first; }
int rs_acts_last(const rs_acts *a) { return a->last; }
uint64_t rs_acts_step(const rs_acts *a) { return a->step; }
void rs_acts_set_step(rs_acts *a, uint64_t step) { a->step = step; }
void rs_acts_set_loss_scale(rs_acts *a, float loss_scale) { a->loss_scale = loss_scale; }

rs_status rs_model_reserve(rs_model *m, int B, rs_err *err)
{
    if (!m->built) return rs_err_set(err, RS_ERR_ARG, "model %s is not built", m->name);
    if (B < 1) return rs_err_set(err, RS_ERR_ARG, "batch size must be >= 1, got %d", B);
    if (!m->dflt) return (m->dflt = acts_new(m, 0, m->nlayers, B, true, err)) ? RS_OK : (err ? err->code : RS_ERR_NOMEM);
    return rs_acts_reserve(m->dflt, B, err);
}

void rs_model_free_acts(rs_model *m)
{
    rs_acts_free(m->dflt);
    m->dflt = NULL;
    free(m->gslot);
    m->gslot = NULL;
}

/* ---- Cut points ---- */

bool rs_model_cut_ok(const rs_model *m, int at)
{
    int n = m->nlayers;
    if (!m->laid_out || at < 0 || at > n) return false;
    if (at == 0 || at == n) return true;
    bool read = false;
    for (int j = at; j < n; j++)
        for (int k = 0; k < m->layers[j].nsrc; k++) {
            int s = m->layers[j].src[k];
            if (s < at - 1) return false; /* an earlier value (or the model's input) would cross too */
            read |= s == at - 1;
        }
    return read;
}

int rs_model_cut_points(const rs_model *m, int *at, int max)
{
    int c = 0;
    for (int i = 1; i < m->nlayers; i++)
        if (rs_model_cut_ok(m, i)) {
            if (c < max) at[c] = i;
            c++;
        }
    return c;
}

size_t rs_model_range_params(const rs_model *m, int first, int last)
{
    size_t n = 0;
    for (int i = first < 0 ? 0 : first; i < last && i < m->nlayers; i++)
        for (int j = 0; j < m->layers[i].np; j++)
            if (!m->layers[i].p[j].tied) n += m->layers[i].p[j].numel;
    return n;
}

int rs_model_top_items(const rs_model *m, rs_top_item *out, int max)
{
    int c = 0;
    for (int i = 0; i < m->nlayers;) {
        int count = 1;
        for (int b = 0; b < m->nblocks; b++)
            if (m->blocks[b].depth == 0 && m->blocks[b].first == i) count = m->blocks[b].count;
        if (c < max) out[c] = (rs_top_item){.first = i, .count = count, .params = rs_model_range_params(m, i, i + count)};
        c++;
        i += count;
    }
    return c;
}
