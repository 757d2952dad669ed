/* The model: layer list, parameter layout, units, accessors (see model.h). */
#include "model_internal.h"
#include "engine/core/kernels.h"
#include "tensor_op.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

rs_model *rs_model_new(const char *name, const rs_shape *in, rs_device dev, rs_mem *mem)
{
    const rs_kernels *k = rs_kernels_for(dev);
    if (!k || !in || in->ndim < 1 || in->ndim > RS_MAX_DIMS) return NULL;
    rs_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    snprintf(m->name, sizeof m->name, "%s", name ? name : "model");
    m->in = *in;
    m->dev = dev;
    m->k = k;
    if (rs_kctx_init(&m->ctx, k, 0, NULL)) {
        free(m);
        return NULL;
    }
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
    l->nsrc = 1;
    l->src[0] = m->nlayers - 1; /* a chain by default: the previous node, or the model's input */
    l->index = m->nlayers++;
    l->rng_id = l->index;
    layer_name(m, l->name, sizeof l->name);
    m->child_count[m->depth]++;
    for (int d = 0; d < m->depth; d++) m->blocks[m->open_block[d]].count++;
    return RS_OK;
}

rs_status rs_model_add_from(rs_model *m, const rs_layer_cfg *cfg, const int *src, int nsrc, rs_err *err)
{
    if (nsrc < 1 || nsrc > RS_LAYER_MAX_SRC)
        return rs_err_set(err, RS_ERR_ARG, "model %s: a node reads 1 to %d values, not %d", m->name, RS_LAYER_MAX_SRC,
                          nsrc);
    for (int k = 0; k < nsrc; k++)
        if (src[k] < -1 || src[k] >= m->nlayers)
            return rs_err_set(err, RS_ERR_ARG, "model %s: node %d cannot read node %d (only earlier ones)", m->name,
                              m->nlayers, src[k]);
    rs_status st = rs_model_add(m, cfg, err);
    if (st) return st;
    rs_layer *l = &m->layers[m->nlayers - 1];
    l->nsrc = nsrc;
    for (int k = 0; k < nsrc; k++) l->src[k] = src[k];
    return RS_OK;
}

void rs_model_set_inference_only(rs_model *m)
{
    if (!m->laid_out) m->inference = true;
}
bool rs_model_inference_only(const rs_model *m) { return m->inference; }

void rs_model_set_fixed_batch(rs_model *m, int k) { m->fixed_batch = k > 1 ? k : 1; }
int rs_model_fixed_batch(const rs_model *m) { return m->fixed_batch > 1 ? m->fixed_batch : 1; }

rs_status rs_model_share_param(rs_model *m, int layer, int slot, int owner, int owner_slot, rs_err *err)
{
    if (m->laid_out) return rs_err_set(err, RS_ERR_ARG, "model %s is already laid out; parameters cannot be shared", m->name);
    if (layer < 0 || layer >= m->nlayers || owner < 0 || owner >= layer || slot < 0 || slot >= RS_LAYER_MAX_PARAMS ||
        owner_slot < 0 || owner_slot >= RS_LAYER_MAX_PARAMS)
        return rs_err_set(err, RS_ERR_ARG, "model %s: layer %d cannot share slot %d of layer %d (only an earlier one)",
                          m->name, layer, owner_slot, owner);
    m->layers[layer].share[slot].on = true;
    m->layers[layer].share[slot].layer = owner;
    m->layers[layer].share[slot].slot = owner_slot;
    return RS_OK;
}

rs_status rs_model_check_trainable(const rs_model *m, rs_err *err)
{
    if (!m->inference) return RS_OK;
    for (int i = 0; i < m->nlayers; i++) {
        const rs_layer *l = &m->layers[i];
        if (l->op || (!l->ops->backward && !l->ops->backward2))
            return rs_err_set(err, RS_ERR_UNSUPPORTED,
                              "model %s is an imported graph that runs for inference only: its node %s (%s%s%s) has "
                              "no backward; eval and predict run it, and a file that is a plain sequence of ringside "
                              "layers imports as a model that trains",
                              m->name, l->name, l->op ? l->op->type : l->ops->kind, l->op ? " " : "",
                              l->op ? l->op->name : "");
    }
    return rs_err_set(err, RS_ERR_UNSUPPORTED,
                      "model %s is an imported graph that runs for inference only; eval and predict run it, and a "
                      "file that is a plain sequence of ringside layers imports as a model that trains", m->name);
}

static rs_status begin_block(rs_model *m, bool residual, rs_err *err)
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
    b->residual = residual;
    b->input = m->nlayers - 1;
    m->open_block[m->depth] = m->nblocks++;
    m->depth++;
    m->child_count[m->depth] = 0;
    return RS_OK;
}

rs_status rs_model_begin_block(rs_model *m, rs_err *err) { return begin_block(m, false, err); }
rs_status rs_model_begin_residual(rs_model *m, rs_err *err) { return begin_block(m, true, err); }

rs_status rs_model_end_block(rs_model *m, rs_err *err)
{
    if (m->depth == 0) return rs_err_set(err, RS_ERR_ARG, "end of a block that was not begun");
    int bi = m->open_block[m->depth - 1];
    if (m->blocks[bi].count == 0)
        return rs_err_set(err, RS_ERR_ARG, "block %s is empty; put at least one layer in it", m->blocks[bi].name);
    if (m->blocks[bi].residual) {
        /* The block's output plus its input, as the block's last node. */
        rs_layer_cfg add = rs_layer_cfg_default(RS_LAYER_ADD);
        rs_status st = rs_model_add(m, &add, err);
        if (st) return st;
        rs_layer *l = &m->layers[m->nlayers - 1];
        l->nsrc = 2;
        l->src[1] = m->blocks[bi].input;
    }
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

/* A tied slot takes the offset of the parameter its tie= names ("0.wte"), which must belong to an
 * earlier layer (its owner runs backward last, so the range is complete when the owner reports it)
 * and have the same shape. */
static rs_status resolve_tie(rs_model *m, rs_layer *l, rs_param_slot *p, rs_err *err)
{
    char s1[64], s2[64];
    for (int i = 0; i < l->index; i++) {
        const rs_layer *o = &m->layers[i];
        for (int j = 0; j < o->np; j++) {
            char full[64];
            snprintf(full, sizeof full, "%s.%s", o->name, o->p[j].suffix);
            if (strcmp(full, l->cfg.tie) || o->p[j].tied) continue;
            if (!rs_shape_eq(&o->p[j].shape, &p->shape))
                return rs_err_set(err, RS_ERR_SHAPE, "layer %s (%s): tie=%s is %s but its %s must be %s", l->name,
                                  l->ops->kind, l->cfg.tie, rs_shape_str(&o->p[j].shape, s1, sizeof s1), p->suffix,
                                  rs_shape_str(&p->shape, s2, sizeof s2));
            p->offset = o->p[j].offset;
            return RS_OK;
        }
    }
    return rs_err_set(err, RS_ERR_ARG, "layer %s (%s): tie=%s names no parameter of an earlier layer "
                      "(write LAYER.NAME as `show` lists them, e.g. 0.wte)", l->name, l->ops->kind, l->cfg.tie);
}

/* Slot j of l as a view of the slot rs_model_share_param named: that slot's own range (never itself a
 * view), of the same size whatever shape each layer gives it. */
static rs_status resolve_share(rs_model *m, rs_layer *l, int j, rs_err *err)
{
    const rs_layer *o = &m->layers[l->share[j].layer];
    int s = l->share[j].slot;
    if (j >= l->np || s >= o->np || o->p[s].tied || o->p[s].numel != l->p[j].numel)
        return rs_err_set(err, RS_ERR_SHAPE, "layer %s (%s): its parameter %d cannot share parameter %d of layer %s "
                          "(%zu values)", l->name, l->ops->kind, j, s, o->name, s < o->np ? o->p[s].numel : 0);
    l->p[j].tied = true;
    l->p[j].offset = o->p[s].offset;
    return RS_OK;
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
    /* Shapes and the parameter layout, in forward order: a node's producers come before it. */
    rs_shape cur = m->in;
    int nt = 0;
    size_t off = 0;
    m->failed_layer = -1;
    for (int i = 0; i < m->nlayers; i++) {
        rs_layer *l = &m->layers[i];
        m->failed_layer = i;
        const rs_shape *src_shape[RS_LAYER_MAX_SRC];
        for (int k = 0; k < l->nsrc; k++)
            src_shape[k] = l->src[k] < 0 ? &m->in : &m->layers[l->src[k]].out;
        if (m->tokens && l->src[0] < 0 && l->ops != &rs_embed_ops)
            return rs_err_set(err, RS_ERR_SHAPE, "layer %s (%s) reads the model's tokens; a token model starts "
                              "with embed(VOCAB,WIDTH)", l->name, l->ops->kind);
        if (!m->tokens && l->ops == &rs_embed_ops)
            return rs_err_set(err, RS_ERR_SHAPE, "layer %s (embed) needs token input: give the model ctx=T "
                              "(e.g. seq ctx=64 embed(65,128) ...)", l->name);
        l->in = *src_shape[0];
        rs_status st = l->ops->setup(l, src_shape[0], err);
        if (st) return st;
        for (int k = 1; k < l->nsrc && l->ops->nin == 2; k++)
            if (!rs_shape_eq(src_shape[k], src_shape[0])) {
                char s2[64];
                return rs_err_set(err, RS_ERR_SHAPE, "layer %s (%s): inputs %s and %s differ; a residual block "
                                  "must give back the shape it was given", l->name, l->ops->kind,
                                  rs_shape_str(src_shape[0], s, sizeof s), rs_shape_str(src_shape[k], s2, sizeof s2));
            }
        if (!numel_within(&l->out, RS_MODEL_MAX_ELEMS, &n))
            return rs_err_set(err, RS_ERR_SHAPE, "layer %s (%s): output %s is too large (at most %lld values per sample)",
                              l->name, l->ops->kind, rs_shape_str(&l->out, s, sizeof s), (long long)RS_MODEL_MAX_ELEMS);
        for (int j = 0; j < l->np; j++) {
            if (!numel_within(&l->p[j].shape, RS_MODEL_MAX_ELEMS, &n))
                return rs_err_set(err, RS_ERR_SHAPE, "layer %s (%s): %s %s is too large (at most %lld values)", l->name,
                                  l->ops->kind, l->p[j].suffix, rs_shape_str(&l->p[j].shape, s, sizeof s),
                                  (long long)RS_MODEL_MAX_ELEMS);
            l->p[j].numel = (size_t)n;
            if (l->share[j].on) {
                st = resolve_share(m, l, j, err);
                if (st) return st;
                continue;
            }
            if (l->p[j].tied) {
                st = resolve_tie(m, l, &l->p[j], err);
                if (st) return st;
                continue;
            }
            l->p[j].offset = off;
            off += l->p[j].numel;
            /* Keep every tensor 16-float (64-byte) aligned so views are SIMD friendly. */
            off = (off + 15) & ~(size_t)15;
            nt++;
        }
        cur = l->out;
    }
    m->failed_layer = m->nlayers - 1;
    if (cur.ndim != 1 && !(m->tokens && cur.ndim == 2) && !m->inference) {
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
        for (int j = 0; j < m->layers[i].np; j++)
            if (!m->layers[i].p[j].tied) return m->layers[i].p[j].offset;
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
    for (int u = 0; u < n; u++) {
        rs_unit *x = &m->units[u];
        x->uses = -1;
        for (int i = x->first; i < x->first + x->count; i++)
            for (int j = 0; j < m->layers[i].np; j++) {
                if (!m->layers[i].p[j].tied) continue;
                size_t off = m->layers[i].p[j].offset;
                for (int v = 0; v < n; v++)
                    if (v != u && m->units[v].numel && off >= m->units[v].offset &&
                        off < m->units[v].offset + m->units[v].numel)
                        x->uses = v;
            }
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
    m->params = rs_model_buf_alloc(m, RS_POOL_PARAMS);
    /* nothing computes gradients of an inference-only model */
    m->grads = m->inference ? NULL : rs_model_buf_alloc(m, RS_POOL_GRADS);
    if (!m->tensors || !m->params || (!m->grads && !m->inference))
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for %zu parameters", m->name, m->numel);
    /* Initialisers write host floats: a model on a device gets them through a host copy (owned here). */
    bool staged = m->k->kind != RS_DEV_CPU && !m->inference;
    float *init = staged ? calloc(m->numel ? m->numel : 1, sizeof *init) : m->params;
    if (!init) return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for %zu parameters", m->name, m->numel);
    int t = 0;
    rs_rng root;
    rs_rng_seed(&root, seed);
    for (int i = 0; i < m->nlayers; i++) {
        rs_layer *l = &m->layers[i];
        for (int j = 0; j < l->np; j++) {
            if (l->p[j].tied) continue;
            rs_param_info *pi = &m->tensors[t++];
            snprintf(pi->name, sizeof pi->name, "%s.%s", l->name, l->p[j].suffix);
            pi->shape = l->p[j].shape;
            pi->offset = l->p[j].offset;
            pi->numel = l->p[j].numel;
            pi->layer = i;
        }
        /* One stream per layer: adding a layer does not change the others' initial weights. */
        rs_rng r = rs_rng_fork(&root, (uint64_t)i);
        /* an inference-only model's weights are its file's, copied in after build */
        if (l->ops->init && !m->inference) l->ops->init(l, init, &r);
    }
    if (staged) {
        st = m->k->copy_h2d(&m->ctx, m->params, init, m->numel * sizeof *init) ? rs_kctx_check(&m->ctx, err) : RS_OK;
        free(init);
        if (st) return st;
    }
    st = build_units(m, err);
    if (!st) st = rs_model_plan_grads(m, err);
    if (st) return st;
    m->built = true;
    return RS_OK;
}

int rs_model_decay_ranges(const rs_model *m, size_t (*out)[2], int max)
{
    int n = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const rs_param_info *t = &m->tensors[i];
        rs_layer_kind k = m->layers[t->layer].cfg.kind;
        if ((k != RS_LAYER_LINEAR && k != RS_LAYER_CONV2D) || t->shape.ndim < 2) continue;
        if (n < max) {
            out[n][0] = t->offset;
            out[n][1] = t->offset + t->numel;
        }
        n++;
    }
    return n;
}

const char *rs_model_name(const rs_model *m) { return m->name; }
void rs_model_set_name(rs_model *m, const char *name) { snprintf(m->name, sizeof m->name, "%s", name); }
const rs_shape *rs_model_input_shape(const rs_model *m) { return &m->in; }
int rs_model_classes(const rs_model *m)
{
    if (!m->nlayers) return 0;
    const rs_shape *o = &m->layers[m->nlayers - 1].out;
    return o->ndim ? (int)o->d[o->ndim - 1] : 0;
}

int rs_model_rows(const rs_model *m)
{
    int C = rs_model_classes(m);
    return C ? (int)(rs_shape_numel(&m->layers[m->nlayers - 1].out) / C) : 0;
}

void rs_model_set_tokens(rs_model *m, bool tokens)
{
    if (!m->laid_out) m->tokens = tokens;
}
bool rs_model_tokens(const rs_model *m) { return m->tokens; }

int rs_model_vocab(const rs_model *m)
{
    return m->tokens && m->nlayers && m->layers[0].ops == &rs_embed_ops ? m->layers[0].cfg.vocab : 0;
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
rs_kctx *rs_model_ctx(rs_model *m) { return &m->ctx; }
void rs_model_set_threads(rs_model *m, int threads) { rs_kctx_set_threads(&m->ctx, threads); }
int rs_model_threads(const rs_model *m) { return m->ctx.threads; }

float *rs_model_buf_alloc(rs_model *m, rs_pool pool)
{
    void *p = NULL;
    /* A failure is the caller's to report (out of memory); it must not linger in the context. */
    if (m->k->mem_alloc(&m->ctx, m->mem, pool, rs_model_buf_bytes(m), &p)) rs_kctx_check(&m->ctx, NULL);
    return p;
}

void rs_model_buf_free(rs_model *m, rs_pool pool, float *buf)
{
    if (buf) m->k->mem_free(&m->ctx, m->mem, pool, buf, rs_model_buf_bytes(m));
}
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

void rs_model_free(rs_model *m)
{
    if (!m) return;
    rs_model_free_acts(m);
    if (m->sharded) {
        for (int u = 0; u < m->nunits; u++) {
            rs_model_unit_release(m, RS_POOL_PARAMS, u);
            rs_model_unit_release(m, RS_POOL_GRADS, u);
        }
        munmap(m->params, m->map_bytes);
        munmap(m->grads, m->map_bytes);
    } else {
        rs_model_buf_free(m, RS_POOL_PARAMS, m->params);
        rs_model_buf_free(m, RS_POOL_GRADS, m->grads);
    }
    free(m->resident[0]);
    free(m->resident[1]);
    free(m->units);
    free(m->tensors);
    for (int i = 0; i < m->nlayers; i++) free(m->layers[i].op);
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
