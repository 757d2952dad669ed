/* The model: layer list, parameter layout, activation memory, forward/loss/backward (see model.h). */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_DEPTH 8

struct rs_model {
    char name[64];
    rs_shape in;
    rs_device dev;
    const rs_kernels *k;
    rs_mem own_mem;   /* used when the caller gave no tracker */
    rs_mem *mem;
    uint64_t seed;
    bool laid_out, built, training;

    rs_layer *layers; /* execution order */
    int nlayers, cap_layers;
    rs_block *blocks;
    int nblocks, cap_blocks;
    /* building state: the open block at each depth and the child counter at each depth */
    int depth, open_block[MAX_DEPTH], child_count[MAX_DEPTH + 1];

    rs_param_info *tensors;
    int ntensors;
    size_t numel;
    float *params, *grads;

    /* activation memory for batches up to cap_B */
    int cap_B;
    float *acts;      /* every layer's output, back to back */
    size_t *act_off;  /* (nlayers) offsets into acts */
    float *dbuf[2];   /* ping-pong activation gradients */
    unsigned char *saved;
    float *probs, *losses;
    float *ws;
    size_t acts_bytes, dbuf_bytes, saved_bytes, probs_bytes, ws_bytes;

    uint64_t step; /* forward calls in training mode: varies the dropout mask */
    int failed_layer; /* layer whose setup failed in the last layout, or -1 */
    rs_grad_ready_fn grad_hook;
    void *grad_hook_ud;

    /* Sharded training (see model.h): the units (top-level items, owned), their hooks, whether the
     * gradient buffer is released (ZeRO-2), and whether params/grads are reservations of map_bytes
     * each (ZeRO-3) with a resident flag per unit for each (owned, nunits bytes each). */
    rs_unit *units;
    int nunits;
    rs_wrap wrap;
    rs_unit_hooks uh;
    bool has_uh, grads_released, sharded;
    size_t map_bytes;
    unsigned char *resident[2]; /* [0] params, [1] grads */
};

rs_model *rs_model_new(const char *name, const rs_shape *in, rs_device dev, rs_mem *mem)
{
    const rs_kernels *k = rs_kernels_for(dev);
    if (!k || !in || in->ndim < 1 || in->ndim > 3) return NULL;
    rs_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    snprintf(m->name, sizeof m->name, "%s", name ? name : "model");
    m->in = *in;
    m->dev = dev;
    m->k = k;
    m->mem = mem ? mem : &m->own_mem;
    m->training = true;
    return m;
}

static void layer_name(rs_model *m, char *buf, size_t n)
{
    /* PyTorch nn.Sequential naming: the path of child indices, "3" or "0.1". */
    size_t k = 0;
    for (int d = 0; d <= m->depth; d++)
        k += (size_t)snprintf(buf + k, n > k ? n - k : 0, d ? ".%d" : "%d", m->child_count[d]);
}

rs_status rs_model_add(rs_model *m, const rs_layer_cfg *cfg, rs_err *err)
{
    if (m->built || m->laid_out)
        return rs_err_set(err, RS_ERR_ARG, "model %s is already built; layers cannot be added", m->name);
    const rs_layer_ops *ops = rs_layer_ops_for(cfg->kind);
    if (!ops) return rs_err_set(err, RS_ERR_ARG, "unknown layer kind %d", (int)cfg->kind);
    if (m->nlayers == m->cap_layers) {
        int cap = m->cap_layers ? 2 * m->cap_layers : 16;
        rs_layer *nl = realloc(m->layers, (size_t)cap * sizeof *nl);
        if (!nl) return rs_err_set(err, RS_ERR_NOMEM, "out of memory adding a layer");
        m->layers = nl;
        m->cap_layers = cap;
    }
    rs_layer *l = &m->layers[m->nlayers];
    memset(l, 0, sizeof *l);
    l->ops = ops;
    l->cfg = *cfg;
    l->index = m->nlayers++;
    layer_name(m, l->name, sizeof l->name);
    m->child_count[m->depth]++;
    for (int d = 0; d < m->depth; d++) m->blocks[m->open_block[d]].count++;
    return RS_OK;
}

rs_status rs_model_begin_block(rs_model *m, rs_err *err)
{
    if (m->built) return rs_err_set(err, RS_ERR_ARG, "model %s is already built", m->name);
    if (m->depth + 1 >= MAX_DEPTH) return rs_err_set(err, RS_ERR_ARG, "blocks nest at most %d deep", MAX_DEPTH - 1);
    if (m->nblocks == m->cap_blocks) {
        int cap = m->cap_blocks ? 2 * m->cap_blocks : 8;
        rs_block *nb = realloc(m->blocks, (size_t)cap * sizeof *nb);
        if (!nb) return rs_err_set(err, RS_ERR_NOMEM, "out of memory adding a block");
        m->blocks = nb;
        m->cap_blocks = cap;
    }
    rs_block *b = &m->blocks[m->nblocks];
    memset(b, 0, sizeof *b);
    layer_name(m, b->name, sizeof b->name);
    b->first = m->nlayers;
    b->depth = m->depth;
    m->open_block[m->depth] = m->nblocks++;
    m->depth++;
    m->child_count[m->depth] = 0;
    return RS_OK;
}

rs_status rs_model_end_block(rs_model *m, rs_err *err)
{
    if (m->depth == 0) return rs_err_set(err, RS_ERR_ARG, "end of a block that was not begun");
    rs_block *b = &m->blocks[m->open_block[m->depth - 1]];
    if (b->count == 0) return rs_err_set(err, RS_ERR_ARG, "block %s is empty; put at least one layer in it", b->name);
    m->depth--;
    m->child_count[m->depth]++;
    return RS_OK;
}

/* numel of s, or false when it exceeds limit (checked multiplication: shapes come from users). */
static bool numel_within(const rs_shape *s, int64_t limit, int64_t *out)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        if (s->d[i] < 0 || __builtin_mul_overflow(n, s->d[i], &n) || n > limit) return false;
    *out = n;
    return true;
}

rs_status rs_model_layout(rs_model *m, rs_err *err)
{
    if (m->laid_out) return RS_OK;
    if (m->depth != 0) return rs_err_set(err, RS_ERR_ARG, "model %s: a block is still open; close it with ']'", m->name);
    if (m->nlayers == 0) return rs_err_set(err, RS_ERR_ARG, "model %s has no layers", m->name);
    char s[64];
    int64_t n;
    if (!numel_within(&m->in, RS_MODEL_MAX_ELEMS, &n))
        return rs_err_set(err, RS_ERR_SHAPE, "model %s: input %s is too large (at most %lld values per sample)",
                          m->name, rs_shape_str(&m->in, s, sizeof s), (long long)RS_MODEL_MAX_ELEMS);
    /* Shapes and the parameter layout, in forward order. */
    rs_shape cur = m->in;
    int nt = 0;
    size_t off = 0;
    m->failed_layer = -1;
    for (int i = 0; i < m->nlayers; i++) {
        rs_layer *l = &m->layers[i];
        m->failed_layer = i;
        rs_status st = l->ops->setup(l, &cur, err);
        if (st) return st;
        if (!numel_within(&l->out, RS_MODEL_MAX_ELEMS, &n))
            return rs_err_set(err, RS_ERR_SHAPE, "layer %s (%s): output %s is too large (at most %lld values per sample)",
                              l->name, l->ops->kind, rs_shape_str(&l->out, s, sizeof s), (long long)RS_MODEL_MAX_ELEMS);
        for (int j = 0; j < l->np; j++) {
            if (!numel_within(&l->p[j].shape, RS_MODEL_MAX_ELEMS, &n))
                return rs_err_set(err, RS_ERR_SHAPE, "layer %s (%s): %s %s is too large (at most %lld values)", l->name,
                                  l->ops->kind, l->p[j].suffix, rs_shape_str(&l->p[j].shape, s, sizeof s),
                                  (long long)RS_MODEL_MAX_ELEMS);
            l->p[j].numel = (size_t)n;
            l->p[j].offset = off;
            off += l->p[j].numel;
            /* Keep every tensor 16-float (64-byte) aligned so views are SIMD friendly. */
            off = (off + 15) & ~(size_t)15;
            nt++;
        }
        cur = l->out;
    }
    m->failed_layer = m->nlayers - 1;
    if (cur.ndim != 1) {
        return rs_err_set(err, RS_ERR_SHAPE,
                          "model %s ends with output %s; the last layer must give one score per class: "
                          "add `flatten linear(CLASSES)`",
                          m->name, rs_shape_str(&cur, s, sizeof s));
    }
    m->failed_layer = -1;
    m->numel = off;
    m->ntensors = nt;
    m->laid_out = true;
    return RS_OK;
}

/* The first parameter offset of layers [first, first+count), or SIZE_MAX when they have none. */
static size_t layers_first_offset(const rs_model *m, int first, int count)
{
    for (int i = first; i < first + count; i++)
        if (m->layers[i].np) return m->layers[i].p[0].offset;
    return SIZE_MAX;
}

/* Units: each depth-0 block, and each top-level layer outside blocks, in execution order. A unit's
 * range runs from its first parameter to the next unit's first parameter (or the end), so the ranges
 * tile the buffer, padding included. */
static rs_status build_units(rs_model *m, rs_err *err)
{
    free(m->units);
    m->units = calloc((size_t)(unsigned)m->nlayers + 1, sizeof *m->units); /* at most one unit per layer */
    if (!m->units) return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for its units", m->name);
    int n = 0;
    for (int i = 0; i < m->nlayers;) {
        int count = 1;
        if (m->wrap == RS_WRAP_MODEL) count = m->nlayers;
        else if (m->wrap == RS_WRAP_TOP)
            for (int b = 0; b < m->nblocks; b++)
                if (m->blocks[b].depth == 0 && m->blocks[b].first == i) count = m->blocks[b].count;
        m->units[n] = (rs_unit){.index = n, .first = i, .count = count};
        n++;
        i += count;
    }
    m->nunits = n;
    for (int u = 0; u < n; u++) {
        rs_unit *x = &m->units[u];
        size_t off = layers_first_offset(m, x->first, x->count);
        if (off == SIZE_MAX) continue;
        size_t end = m->numel;
        for (int v = u + 1; v < n; v++) {
            size_t o = layers_first_offset(m, m->units[v].first, m->units[v].count);
            if (o != SIZE_MAX) {
                end = o;
                break;
            }
        }
        x->offset = off;
        x->numel = end - off;
    }
    return RS_OK;
}

rs_status rs_model_build(rs_model *m, uint64_t seed, rs_err *err)
{
    if (m->built) return RS_OK;
    rs_status st = rs_model_layout(m, err);
    if (st) return st;
    m->seed = seed;
    /* A typo such as mlp 784-2560000-10 should be an error, not a machine swapping itself to death. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double need = 2.0 * (double)m->numel * sizeof(float), have = (double)pages * (double)page;
    if (pages > 0 && page > 0 && need > 0.75 * have)
        return rs_err_set(err, RS_ERR_NOMEM,
                          "model %s has %zu parameters: %.1f GiB for parameters and gradients, more than this "
                          "machine's %.1f GiB of memory allows",
                          m->name, m->numel, need / (1 << 30), have / (1 << 30));
    int nt = m->ntensors;
    m->tensors = calloc((size_t)(nt ? nt : 1), sizeof *m->tensors);
    m->params = rs_mem_alloc(m->mem, RS_POOL_PARAMS, (m->numel ? m->numel : 1) * sizeof(float));
    m->grads = rs_mem_alloc(m->mem, RS_POOL_GRADS, (m->numel ? m->numel : 1) * sizeof(float));
    if (!m->tensors || !m->params || !m->grads)
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for %zu parameters", m->name, m->numel);
    int t = 0;
    rs_rng root;
    rs_rng_seed(&root, seed);
    for (int i = 0; i < m->nlayers; i++) {
        rs_layer *l = &m->layers[i];
        for (int j = 0; j < l->np; j++, t++) {
            rs_param_info *pi = &m->tensors[t];
            snprintf(pi->name, sizeof pi->name, "%s.%s", l->name, l->p[j].suffix);
            pi->shape = l->p[j].shape;
            pi->offset = l->p[j].offset;
            pi->numel = l->p[j].numel;
            pi->layer = i;
        }
        /* One stream per layer: adding a layer does not change the others' initial weights. */
        rs_rng r = rs_rng_fork(&root, (uint64_t)i);
        if (l->ops->init) l->ops->init(l, m->params, &r);
    }
    st = build_units(m, err);
    if (st) return st;
    m->built = true;
    return RS_OK;
}

static void free_acts(rs_model *m)
{
    rs_mem_free(m->mem, RS_POOL_ACTS, m->acts, m->acts_bytes);
    rs_mem_free(m->mem, RS_POOL_ACTS, m->dbuf[0], m->dbuf_bytes);
    rs_mem_free(m->mem, RS_POOL_ACTS, m->dbuf[1], m->dbuf_bytes);
    rs_mem_free(m->mem, RS_POOL_ACTS, m->saved, m->saved_bytes);
    rs_mem_free(m->mem, RS_POOL_ACTS, m->probs, m->probs_bytes);
    rs_mem_free(m->mem, RS_POOL_SCRATCH, m->ws, m->ws_bytes);
    free(m->act_off);
    m->acts = m->dbuf[0] = m->dbuf[1] = m->probs = m->ws = NULL;
    m->saved = NULL;
    m->act_off = NULL;
    m->losses = NULL;
    m->cap_B = 0;
}

static size_t layer_ws(const rs_model *m, const rs_layer *l, int B)
{
    return l->ops->workspace_bytes ? l->ops->workspace_bytes(l, m->k, B) : 0;
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
    /* Workspace can grow with the thread count even when B does not. */
    if (B <= m->cap_B && ws <= m->ws_bytes) return RS_OK;
    if (B < m->cap_B) B = m->cap_B;
    free_acts(m);
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
    m->acts_bytes = acts * sizeof(float);
    m->dbuf_bytes = (size_t)B * dmax * sizeof(float);
    m->saved_bytes = saved ? saved : 64;
    m->probs_bytes = ((size_t)B * C + (size_t)B) * sizeof(float);
    m->ws_bytes = ws ? ws : 64;
    m->acts = rs_mem_alloc(m->mem, RS_POOL_ACTS, m->acts_bytes);
    m->dbuf[0] = rs_mem_alloc(m->mem, RS_POOL_ACTS, m->dbuf_bytes);
    m->dbuf[1] = rs_mem_alloc(m->mem, RS_POOL_ACTS, m->dbuf_bytes);
    m->saved = rs_mem_alloc(m->mem, RS_POOL_ACTS, m->saved_bytes);
    m->probs = rs_mem_alloc(m->mem, RS_POOL_ACTS, m->probs_bytes);
    m->ws = rs_mem_alloc(m->mem, RS_POOL_SCRATCH, m->ws_bytes);
    if (!m->acts || !m->dbuf[0] || !m->dbuf[1] || !m->saved || !m->probs || !m->ws) {
        free_acts(m);
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for activations of batch %d", m->name, B);
    }
    m->losses = m->probs + (size_t)B * C;
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
    return (rs_exec){.k = m->k, .params = m->params, .grads = m->grads, .ws = m->ws,
                     .training = m->training, .dropout_seed = z ^ (z >> 29)};
}

void rs_model_set_training(rs_model *m, bool training) { m->training = training; }
bool rs_model_training(const rs_model *m) { return m->training; }

rs_status rs_model_forward(rs_model *m, const float *x, int B, const float **logits, rs_err *err)
{
    rs_status st = rs_model_reserve(m, B, err);
    if (st) return st;
    if (m->training) m->step++;
    rs_exec ex = exec_ctx(m);
    const float *in = x;
    for (int u = 0; u < m->nunits; u++) {
        const rs_unit *un = &m->units[u];
        if (m->has_uh && m->uh.before_forward && (st = m->uh.before_forward(m->uh.ud, un, err))) return st;
        for (int i = un->first; i < un->first + un->count; i++) {
            float *out = m->acts + m->act_off[i];
            m->layers[i].ops->forward(&m->layers[i], &ex, in, out, B);
            in = out;
        }
        if (m->has_uh && m->uh.after_forward && (st = m->uh.after_forward(m->uh.ud, un, err))) return st;
    }
    if (logits) *logits = in;
    return RS_OK;
}

rs_status rs_model_loss(rs_model *m, const int32_t *y, int B, float *loss, rs_err *err)
{
    int C = rs_model_classes(m);
    if (B > m->cap_B) return rs_err_set(err, RS_ERR_ARG, "loss of batch %d before a forward of that batch", B);
    for (int b = 0; b < B; b++)
        if (y[b] < 0 || y[b] >= C)
            return rs_err_set(err, RS_ERR_ARG,
                              "label %d of sample %d is outside the model's %d classes (0..%d); "
                              "the last layer needs as many outputs as the data has classes",
                              (int)y[b], b, C, C - 1);
    const float *logits = m->acts + m->act_off[m->nlayers - 1];
    m->k->softmax_xent_fwd(logits, y, m->probs, m->losses, B, C);
    /* Mean over the batch in double: the figure reported does not drift with batch size. */
    double s = 0.0;
    for (int b = 0; b < B; b++) s += m->losses[b];
    if (loss) *loss = (float)(s / B);
    return RS_OK;
}

void rs_model_backward(rs_model *m, const float *x, const int32_t *y, int B, float loss_scale)
{
    rs_exec ex = exec_ctx(m);
    int C = rs_model_classes(m);
    float *dcur = m->dbuf[0], *dnext = m->dbuf[1];
    m->k->softmax_xent_bwd(m->probs, y, dcur, B, C, loss_scale / (float)B);
    /* Units in reverse; a failing unit hook stops the pass (its owner keeps the error). */
    int u = m->nunits - 1;
    rs_err herr = {0};
    if (m->has_uh && m->uh.before_backward && m->uh.before_backward(m->uh.ud, &m->units[u], &herr)) return;
    /* exec_ctx read the buffers' addresses, which a hook may not change: acquire_grads happens before
     * backward, and sharded buffers keep their addresses. */
    for (int i = m->nlayers - 1; i >= 0; i--) {
        if (i < m->units[u].first) {
            if (m->has_uh && m->uh.after_backward && m->uh.after_backward(m->uh.ud, &m->units[u], &herr)) return;
            u--;
            if (m->has_uh && m->uh.before_backward && m->uh.before_backward(m->uh.ud, &m->units[u], &herr)) return;
        }
        rs_layer *l = &m->layers[i];
        const float *in = i ? m->acts + m->act_off[i - 1] : x;
        const float *out = m->acts + m->act_off[i];
        float *din = i ? dnext : NULL; /* nobody needs d(loss)/d(input) */
        l->ops->backward(l, &ex, in, out, dcur, din, B);
        if (m->grad_hook && l->np) {
            size_t first = l->p[0].offset, last = l->p[l->np - 1].offset + l->p[l->np - 1].numel;
            m->grad_hook(m->grad_hook_ud, first, last - first);
        }
        float *t = dcur;
        dcur = dnext;
        dnext = t;
    }
    if (m->has_uh && m->uh.after_backward) m->uh.after_backward(m->uh.ud, &m->units[0], &herr);
}

void rs_model_zero_grad(rs_model *m)
{
    /* Released (ZeRO-2) or sharded (ZeRO-3) gradients are zero-filled when acquired. */
    if (m->grads_released || m->sharded) return;
    m->k->fill(m->grads, m->numel, 0.0f);
}

void rs_model_set_grad_hook(rs_model *m, rs_grad_ready_fn fn, void *ud)
{
    m->grad_hook = fn;
    m->grad_hook_ud = ud;
}

const char *rs_model_name(const rs_model *m) { return m->name; }
void rs_model_set_name(rs_model *m, const char *name) { snprintf(m->name, sizeof m->name, "%s", name); }
const rs_shape *rs_model_input_shape(const rs_model *m) { return &m->in; }
int rs_model_classes(const rs_model *m)
{
    return m->nlayers ? (int)rs_shape_numel(&m->layers[m->nlayers - 1].out) : 0;
}
int rs_model_layer_count(const rs_model *m) { return m->nlayers; }
rs_layer *rs_model_layer(rs_model *m, int i) { return (i >= 0 && i < m->nlayers) ? &m->layers[i] : NULL; }
int rs_model_block_count(const rs_model *m) { return m->nblocks; }
const rs_block *rs_model_block(const rs_model *m, int i) { return (i >= 0 && i < m->nblocks) ? &m->blocks[i] : NULL; }
size_t rs_model_numel(const rs_model *m) { return m->numel; }
float *rs_model_params(rs_model *m) { return m->params; }
float *rs_model_grads(rs_model *m) { return m->grads; }
int rs_model_tensor_count(const rs_model *m) { return m->ntensors; }
const rs_param_info *rs_model_tensor(const rs_model *m, int i) { return (i >= 0 && i < m->ntensors) ? &m->tensors[i] : NULL; }
rs_mem *rs_model_mem(rs_model *m) { return m->mem; }
const rs_kernels *rs_model_kernels(const rs_model *m) { return m->k; }
rs_device rs_model_device(const rs_model *m) { return m->dev; }
uint64_t rs_model_seed(const rs_model *m) { return m->seed; }
int rs_model_failed_layer(const rs_model *m) { return m->failed_layer; }
uint64_t rs_model_step(const rs_model *m) { return m->step; }
void rs_model_set_step(rs_model *m, uint64_t step) { m->step = step; }
void rs_model_set_seed(rs_model *m, uint64_t seed) { m->seed = seed; }

size_t rs_model_param_count(const rs_model *m)
{
    size_t n = 0;
    for (int i = 0; i < m->ntensors; i++) n += m->tensors[i].numel;
    return n;
}

const rs_param_info *rs_model_find_tensor(const rs_model *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

/* A growing string for the text renderers below. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 256) + (size_t)n;
        char *ns = realloc(b->s, cap);
        if (!ns) return;
        b->s = ns;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static const rs_block *block_starting(const rs_model *m, int layer, int depth)
{
    for (int i = 0; i < m->nblocks; i++)
        if (m->blocks[i].first == layer && m->blocks[i].depth == depth) return &m->blocks[i];
    return NULL;
}

static int block_depth_at(const rs_model *m, int layer)
{
    int d = 0;
    for (int i = 0; i < m->nblocks; i++)
        if (layer >= m->blocks[i].first && layer < m->blocks[i].first + m->blocks[i].count &&
            m->blocks[i].depth + 1 > d)
            d = m->blocks[i].depth + 1;
    return d;
}

char *rs_model_spec(const rs_model *m)
{
    sbuf b = {0};
    char s[64];
    if (m->in.ndim == 3)
        sb_printf(&b, "seq in=%lldx%lldx%lld", (long long)m->in.d[0], (long long)m->in.d[1], (long long)m->in.d[2]);
    else
        sb_printf(&b, "seq in=%lld", (long long)rs_shape_numel(&m->in));
    /* The blocks open at each layer, outermost first; a block ends after its last layer. Sibling
     * blocks ([ a ] [ b ]) are told apart by where each one starts, not by depth alone. */
    int open[MAX_DEPTH], depth = 0; /* indices of the blocks currently open */
    for (int i = 0; i < m->nlayers; i++) {
        for (int d = 0; d < MAX_DEPTH; d++) {
            const rs_block *bl = block_starting(m, i, d);
            if (!bl) continue;
            while (depth > d) { /* close blocks that end before this one starts */
                sb_printf(&b, " ]");
                depth--;
            }
            open[depth++] = (int)(bl - m->blocks);
            sb_printf(&b, " [");
        }
        sb_printf(&b, " %s", rs_layer_cfg_str(&m->layers[i].cfg, s, sizeof s));
        while (depth > 0) {
            const rs_block *bl = &m->blocks[open[depth - 1]];
            if (bl->first + bl->count - 1 != i) break;
            sb_printf(&b, " ]");
            depth--;
        }
    }
    while (depth-- > 0) sb_printf(&b, " ]");
    return b.s;
}

static void human_bytes(size_t n, char *buf, size_t len)
{
    if (n < 1024) snprintf(buf, len, "%zu B", n);
    else if (n < 1024 * 1024) snprintf(buf, len, "%.1f KiB", n / 1024.0);
    else snprintf(buf, len, "%.2f MiB", n / (1024.0 * 1024.0));
}

char *rs_model_summary(const rs_model *m)
{
    sbuf b = {0};
    char s[64], cfg[64], by[32];
    size_t real = 0;
    for (int i = 0; i < m->ntensors; i++) real += m->tensors[i].numel;
    human_bytes(real * sizeof(float), by, sizeof by);
    sb_printf(&b, "model %s: %d layers, %zu parameters (%s as f32), input %s, %d classes, on %s\n", m->name,
              m->nlayers, real, by, rs_shape_str(&m->in, s, sizeof s), rs_model_classes(m), rs_device_name(m->dev));
    sb_printf(&b, "  %-8s %-24s %-16s %12s\n", "name", "layer", "output", "params");
    for (int i = 0; i < m->nlayers; i++) {
        const rs_layer *l = &m->layers[i];
        for (int d = 0; d < MAX_DEPTH; d++) {
            const rs_block *bl = block_starting(m, i, d);
            if (bl) sb_printf(&b, "  %*s%-8s block (%d layers)\n", 2 * d, "", bl->name, bl->count);
        }
        size_t np = 0;
        for (int j = 0; j < l->np; j++) np += l->p[j].numel;
        int d = block_depth_at(m, i);
        sb_printf(&b, "  %*s%-*s %-24s %-16s %12zu\n", 2 * d, "", 8 - 2 * d > 0 ? 8 - 2 * d : 1, l->name,
                  rs_layer_cfg_str(&l->cfg, cfg, sizeof cfg), rs_shape_str(&l->out, s, sizeof s), np);
    }
    return b.s;
}

void rs_model_free(rs_model *m)
{
    if (!m) return;
    free_acts(m);
    if (m->sharded) {
        for (int u = 0; u < m->nunits; u++) {
            rs_model_unit_release(m, RS_POOL_PARAMS, u);
            rs_model_unit_release(m, RS_POOL_GRADS, u);
        }
        munmap(m->params, m->map_bytes);
        munmap(m->grads, m->map_bytes);
    } else {
        rs_mem_free(m->mem, RS_POOL_PARAMS, m->params, (m->numel ? m->numel : 1) * sizeof(float));
        rs_mem_free(m->mem, RS_POOL_GRADS, m->grads, (m->numel ? m->numel : 1) * sizeof(float));
    }
    free(m->resident[0]);
    free(m->resident[1]);
    free(m->units);
    free(m->tensors);
    free(m->layers);
    free(m->blocks);
    free(m);
}

/* ---- Sharded training (see model.h) ---- */

int rs_model_unit_count(const rs_model *m) { return m->nunits; }

rs_status rs_model_set_wrap(rs_model *m, rs_wrap w, rs_err *err)
{
    if (w < RS_WRAP_TOP || w > RS_WRAP_MODEL) return rs_err_set(err, RS_ERR_ARG, "model %s: unknown wrap policy", m->name);
    if (m->sharded || m->has_uh)
        return rs_err_set(err, RS_ERR_ARG, "model %s: its units are in use (sharded); set wrap= before training", m->name);
    m->wrap = w;
    return m->built ? build_units(m, err) : RS_OK;
}
const rs_unit *rs_model_unit(const rs_model *m, int i) { return (i >= 0 && i < m->nunits) ? &m->units[i] : NULL; }

void rs_model_set_unit_hooks(rs_model *m, const rs_unit_hooks *h)
{
    m->has_uh = h != NULL;
    m->uh = h ? *h : (rs_unit_hooks){0};
}

static size_t buf_bytes(const rs_model *m) { return (m->numel ? m->numel : 1) * sizeof(float); }

bool rs_model_grads_released(const rs_model *m) { return m->grads_released; }

void rs_model_release_grads(rs_model *m)
{
    if (!m->built || m->grads_released || m->sharded) return;
    rs_mem_free(m->mem, RS_POOL_GRADS, m->grads, buf_bytes(m));
    m->grads = NULL;
    m->grads_released = true;
}

rs_status rs_model_acquire_grads(rs_model *m, rs_err *err)
{
    if (!m->grads_released) return RS_OK;
    m->grads = rs_mem_alloc(m->mem, RS_POOL_GRADS, buf_bytes(m)); /* zero-filled; owned by m */
    if (!m->grads)
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for %zu gradients", m->name, m->numel);
    m->grads_released = false;
    return RS_OK;
}

bool rs_model_buffers_sharded(const rs_model *m) { return m->sharded; }

/* A reservation: address space only; pages are committed when first written. */
static float *reserve(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

rs_status rs_model_shard_buffers(rs_model *m, rs_err *err)
{
    if (!m->built) return rs_err_set(err, RS_ERR_ARG, "model %s is not built", m->name);
    if (m->sharded) return RS_OK;
    if (m->dev.kind != RS_DEV_CPU)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "model %s: sharded buffers are for CPU models", m->name);
    rs_status st = rs_model_acquire_grads(m, err);
    if (st) return st;
    long page = sysconf(_SC_PAGESIZE);
    size_t pg = page > 0 ? (size_t)page : 4096;
    size_t bytes = (buf_bytes(m) + pg - 1) / pg * pg;
    float *p = reserve(bytes), *g = reserve(bytes);
    unsigned char *rp = calloc((size_t)m->nunits + 1, 1), *rg = calloc((size_t)m->nunits + 1, 1);
    if (!p || !g || !rp || !rg) {
        if (p) munmap(p, bytes);
        if (g) munmap(g, bytes);
        free(rp);
        free(rg);
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: cannot reserve %zu bytes of address space", m->name, bytes);
    }
    rs_mem_free(m->mem, RS_POOL_PARAMS, m->params, buf_bytes(m));
    rs_mem_free(m->mem, RS_POOL_GRADS, m->grads, buf_bytes(m));
    m->params = p;
    m->grads = g;
    m->map_bytes = bytes;
    m->resident[0] = rp;
    m->resident[1] = rg;
    m->sharded = true;
    return RS_OK;
}

rs_status rs_model_unshard_buffers(rs_model *m, rs_err *err)
{
    if (!m->sharded) return RS_OK;
    float *p = rs_mem_alloc(m->mem, RS_POOL_PARAMS, buf_bytes(m)); /* owned by m */
    float *g = rs_mem_alloc(m->mem, RS_POOL_GRADS, buf_bytes(m));
    if (!p || !g) {
        rs_mem_free(m->mem, RS_POOL_PARAMS, p, buf_bytes(m));
        rs_mem_free(m->mem, RS_POOL_GRADS, g, buf_bytes(m));
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for %zu parameters", m->name, m->numel);
    }
    /* Released ranges read as zero, except what shares a page with a resident neighbour: zero those
     * explicitly so the result does not depend on page boundaries. */
    memcpy(p, m->params, m->numel * sizeof(float));
    for (int u = 0; u < m->nunits; u++)
        if (!m->resident[0][u]) memset(p + m->units[u].offset, 0, m->units[u].numel * sizeof(float));
    for (int u = 0; u < m->nunits; u++) {
        rs_model_unit_release(m, RS_POOL_PARAMS, u);
        rs_model_unit_release(m, RS_POOL_GRADS, u);
    }
    munmap(m->params, m->map_bytes);
    munmap(m->grads, m->map_bytes);
    free(m->resident[0]);
    free(m->resident[1]);
    m->resident[0] = m->resident[1] = NULL;
    m->params = p;
    m->grads = g;
    m->map_bytes = 0;
    m->sharded = false;
    return RS_OK;
}

static unsigned char *resident_flag(const rs_model *m, rs_pool which, int unit)
{
    if (!m->sharded || unit < 0 || unit >= m->nunits || (which != RS_POOL_PARAMS && which != RS_POOL_GRADS))
        return NULL;
    return &m->resident[which == RS_POOL_GRADS][unit];
}

bool rs_model_unit_resident(const rs_model *m, rs_pool which, int unit)
{
    const unsigned char *f = resident_flag(m, which, unit);
    return f && *f;
}

void rs_model_unit_acquire(rs_model *m, rs_pool which, int unit)
{
    unsigned char *f = resident_flag(m, which, unit);
    if (!f || *f) return;
    const rs_unit *u = &m->units[unit];
    /* Gradients accumulate, so they start at zero; a released range's whole pages already read as
     * zero but the pages it shares with neighbours may hold old values. */
    if (which == RS_POOL_GRADS) memset(m->grads + u->offset, 0, u->numel * sizeof(float));
    rs_mem_count(m->mem, which, (int64_t)(u->numel * sizeof(float)));
    *f = 1;
}

void rs_model_unit_release(rs_model *m, rs_pool which, int unit)
{
    unsigned char *f = resident_flag(m, which, unit);
    if (!f || !*f) return;
    const rs_unit *u = &m->units[unit];
    float *base = which == RS_POOL_GRADS ? m->grads : m->params;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t pg = page > 0 ? (uintptr_t)page : 4096;
    uintptr_t a = (uintptr_t)(base + u->offset), b = (uintptr_t)(base + u->offset + u->numel);
    a = (a + pg - 1) / pg * pg; /* whole pages inside the range only: neighbours keep theirs */
    b = b / pg * pg;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
    rs_mem_count(m->mem, which, -(int64_t)(u->numel * sizeof(float)));
    *f = 0;
}
