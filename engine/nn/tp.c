/* Tensor-parallel plans and shards (see tp.h): which layers pair up, each rank's shard model built
 * with the model API (the whole model's blocks, with tp_copy/tp_reduce around each pair), and the
 * maps between whole-model and shard buffers. */
#include "tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* How one tensor of a shard comes out of the whole model's tensor (R rows of C floats). */
typedef enum { MAP_COPY, MAP_ROWS, MAP_COLS } map_kind;
typedef struct tp_map {
    map_kind kind;
    size_t soff, woff;  /* floats into the shard's and the whole model's buffers */
    int64_t rows, cols; /* the whole tensor as (rows, cols); a bias is (O, 1) */
    int parts;          /* MAP_ROWS: the rows are `parts` blocks (q, k, v), each split over the ranks */
    bool counted;       /* in this rank's share of the sum of squares */
} tp_map;

typedef struct tp_rank {
    tp_map *maps;
    int nmaps;
    size_t numel;
} tp_rank;

struct rs_tp_plan {
    const rs_model *whole;
    int tp, pairs;
    rs_tp_role *role;   /* (whole nlayers) */
    tp_rank *ranks;     /* (tp) */
    size_t replicated, split, row_bias;
};

void rs_model_set_tp_comm(rs_model *m, rs_tp_comm_fn fn, void *ud)
{
    m->tp_comm = fn;
    m->tp_comm_ud = ud;
}

/* What may stand between the two linears of a pair: layers that run on a rank's slice as they are,
 * and one that runs on its heads (attention), as each layer's descriptor says. */
static bool elementwise(const rs_layer *l) { return l->ops->tp == RS_LAYER_TP_ELEMENTWISE; }
static bool by_heads(const rs_layer *l) { return l->ops->tp == RS_LAYER_TP_HEADS; }

/* Layer i's output is read by layer i+1 alone (and is not the model's output). */
static bool feeds_next_only(const rs_model *m, int i)
{
    if (i + 1 >= m->nlayers) return false;
    for (int j = 0; j < m->nlayers; j++)
        for (int k = 0; k < m->layers[j].nsrc; k++)
            if (m->layers[j].src[k] == i && j != i + 1) return false;
    const rs_layer *n = &m->layers[i + 1];
    return n->nsrc == 1 && n->src[0] == i;
}

static bool splittable_linear(const rs_layer *l)
{
    return l->ops->tp == RS_LAYER_TP_SPLIT && !l->cfg.tie[0] && l->nsrc == 1;
}

/* Marks the pairs (see tp.h); an error names a pair that tp ranks cannot split evenly. */
static rs_status find_pairs(rs_tp_plan *p, rs_err *err)
{
    const rs_model *m = p->whole;
    for (int i = 0; i < m->nlayers; i++) {
        const rs_layer *a = &m->layers[i];
        if (!splittable_linear(a) || !feeds_next_only(m, i)) continue;
        int j = i + 1, attn = -1;
        while (j < m->nlayers && (elementwise(&m->layers[j]) || (by_heads(&m->layers[j]) && attn < 0)) &&
               feeds_next_only(m, j)) {
            if (by_heads(&m->layers[j])) attn = j;
            j++;
        }
        if (j >= m->nlayers || !splittable_linear(&m->layers[j])) continue;
        if (attn >= 0 && m->layers[attn].cfg.heads % p->tp)
            return rs_err_set(err, RS_ERR_ARG, "tensor: layer %s (attn(%d)) splits by heads over tp=%d ranks, and "
                              "%d heads do not divide by %d; use a tp that divides the heads", m->layers[attn].name,
                              m->layers[attn].cfg.heads, p->tp, m->layers[attn].cfg.heads, p->tp);
        if (attn < 0 && a->cfg.out % p->tp)
            return rs_err_set(err, RS_ERR_ARG, "tensor: layer %s (linear(%d)) splits by columns over tp=%d ranks, and "
                              "%d outputs do not divide by %d; use a tp that divides them", a->name, a->cfg.out, p->tp,
                              a->cfg.out, p->tp);
        p->role[i] = attn >= 0 ? RS_TP_QKV : RS_TP_COLUMN;
        for (int k = i + 1; k < j; k++) p->role[k] = RS_TP_INNER;
        p->role[j] = RS_TP_ROW;
        p->pairs++;
        i = j;
    }
    if (!p->pairs)
        return rs_err_set(err, RS_ERR_ARG, "tensor: model %s has no pair of linear layers to split (a linear, then "
                          "relu/gelu/tanh/dropout or attn, then a linear); e.g. mlp 784-256-10 or gpt", m->name);
    return RS_OK;
}

/* The shard's spelling of a whole-model tie= ("0.wte"): the same tensor under its shard layer's name. */
static void shard_tie(const rs_model *w, const rs_model *s, const int *shard_of, char *tie, size_t n)
{
    const char *dot = strrchr(tie, '.');
    if (!dot) return;
    for (int i = 0; i < w->nlayers; i++)
        if ((size_t)(dot - tie) == strlen(w->layers[i].name) && !strncmp(tie, w->layers[i].name, (size_t)(dot - tie)) &&
            shard_of[i] >= 0) {
            char t[112];
            int k = snprintf(t, sizeof t, "%s%s", s->layers[shard_of[i]].name, dot);
            if (k > 0 && (size_t)k < n) memcpy(tie, t, (size_t)k + 1);
            return;
        }
}

static rs_status add_kind(rs_model *s, rs_layer_kind k, rs_err *err)
{
    rs_layer_cfg c = rs_layer_cfg_default(k);
    return rs_model_add(s, &c, err);
}

/* Rank's shard, laid out (nothing allocated): the whole model's layers and blocks in order, resized
 * by their roles, tp_copy before each pair and tp_reduce after it. shard_of (whole nlayers) gets each
 * whole layer's index in the shard (-1: the add of a residual block, which end_block makes again). */
static rs_status shard_layout(const rs_tp_plan *p, int rank, rs_mem *mem, int *shard_of, rs_model **out, rs_err *err)
{
    const rs_model *w = p->whole;
    rs_model *s = rs_model_new(w->name, &w->in, w->dev, mem);
    if (!s) return rs_err_set(err, RS_ERR_NOMEM, "tensor: out of memory for a shard of %s", w->name);
    s->tokens = w->tokens;
    const rs_block *open[MAX_DEPTH];
    int depth = 0;
    rs_status st = RS_OK;
    for (int i = 0; i < w->nlayers && !st; i++) {
        const rs_layer *l = &w->layers[i];
        shard_of[i] = -1;
        for (int d = 0; d < MAX_DEPTH && !st; d++)
            for (int b = 0; b < w->nblocks && !st; b++)
                if (w->blocks[b].first == i && w->blocks[b].depth == d) {
                    st = w->blocks[b].residual ? rs_model_begin_residual(s, err) : rs_model_begin_block(s, err);
                    open[depth++] = &w->blocks[b];
                }
        if (st) break;
        rs_tp_role r = p->role[i];
        bool closes_residual = l->cfg.kind == RS_LAYER_ADD && depth && open[depth - 1]->residual &&
                               open[depth - 1]->first + open[depth - 1]->count - 1 == i;
        if (!closes_residual) {
            rs_layer_cfg c = l->cfg;
            if (r == RS_TP_COLUMN || r == RS_TP_QKV) c.out /= p->tp;
            if (r == RS_TP_INNER && by_heads(l)) c.heads /= p->tp;
            if (r == RS_TP_ROW) c.bias = c.bias && rank == 0;
            if (c.tie[0]) shard_tie(w, s, shard_of, c.tie, sizeof c.tie);
            if (r == RS_TP_COLUMN || r == RS_TP_QKV) st = add_kind(s, RS_LAYER_TP_COPY, err);
            if (!st) st = rs_model_add(s, &c, err);
            if (!st) {
                shard_of[i] = s->nlayers - 1;
                /* Replicated activations draw one process's dropout masks; a split one, each rank its own. */
                s->layers[s->nlayers - 1].rng_id = r == RS_TP_REPLICATED ? i : i + (rank + 1) * w->nlayers;
            }
            if (!st && r == RS_TP_ROW) st = add_kind(s, RS_LAYER_TP_REDUCE, err);
        }
        while (!st && depth && open[depth - 1]->first + open[depth - 1]->count - 1 == i) {
            st = rs_model_end_block(s, err);
            depth--;
        }
    }
    if (!st) st = rs_model_layout(s, err);
    if (st) {
        rs_model_free(s);
        return st;
    }
    *out = s;
    return RS_OK;
}

/* The maps of rank's shard tensors, from its layout. */
static rs_status rank_maps(rs_tp_plan *p, int rank, rs_err *err)
{
    const rs_model *w = p->whole;
    int *shard_of = malloc((size_t)w->nlayers * sizeof *shard_of); /* freed here */
    if (!shard_of) return rs_err_set(err, RS_ERR_NOMEM, "tensor: out of memory");
    rs_model *s = NULL;
    rs_status st = shard_layout(p, rank, NULL, shard_of, &s, err);
    tp_rank *tr = &p->ranks[rank];
    if (!st) {
        tr->maps = calloc((size_t)s->ntensors + 1, sizeof *tr->maps);
        if (!tr->maps) st = rs_err_set(err, RS_ERR_NOMEM, "tensor: out of memory");
    }
    for (int i = 0; i < w->nlayers && !st; i++) {
        if (shard_of[i] < 0) continue;
        const rs_layer *wl = &w->layers[i], *sl = &s->layers[shard_of[i]];
        rs_tp_role r = p->role[i];
        for (int j = 0; j < sl->np; j++) {
            if (sl->p[j].tied) continue;
            const rs_param_slot *ws = &wl->p[j];
            tp_map mp = {.kind = MAP_COPY, .soff = sl->p[j].offset, .woff = ws->offset, .parts = 1,
                         .rows = ws->shape.d[0], .cols = ws->shape.ndim > 1 ? (int64_t)(ws->numel / (size_t)ws->shape.d[0]) : 1};
            if (r == RS_TP_COLUMN || r == RS_TP_QKV) {
                mp.kind = MAP_ROWS;
                mp.parts = r == RS_TP_QKV ? 3 : 1;
            } else if (r == RS_TP_ROW && j == 0) {
                mp.kind = MAP_COLS;
            }
            mp.counted = mp.kind != MAP_COPY || rank == 0;
            tr->maps[tr->nmaps++] = mp;
            if (rank == 0) {
                if (mp.kind != MAP_COPY) p->split += ws->numel;
                else if (r == RS_TP_ROW) p->row_bias += ws->numel;
                else p->replicated += ws->numel;
            }
        }
    }
    if (!st) tr->numel = s->numel;
    rs_model_free(s);
    free(shard_of);
    return st;
}

rs_status rs_tp_plan_new(const rs_model *whole, int tp, rs_tp_plan **out, rs_err *err)
{
    *out = NULL;
    if (!whole || !whole->laid_out) return rs_err_set(err, RS_ERR_ARG, "tensor: the model is not laid out");
    if (tp < 1 || tp > 4096) return rs_err_set(err, RS_ERR_ARG, "tensor: tp=%d; expected 1 or more ranks", tp);
    rs_tp_plan *p = calloc(1, sizeof *p); /* owned by the caller: rs_tp_plan_free */
    if (!p) return rs_err_set(err, RS_ERR_NOMEM, "tensor: out of memory");
    p->whole = whole;
    p->tp = tp;
    p->role = calloc((size_t)whole->nlayers, sizeof *p->role);
    p->ranks = calloc((size_t)tp, sizeof *p->ranks);
    rs_status st = p->role && p->ranks ? find_pairs(p, err) : rs_err_set(err, RS_ERR_NOMEM, "tensor: out of memory");
    for (int r = 0; r < tp && !st; r++) st = rank_maps(p, r, err);
    if (st) {
        rs_tp_plan_free(p);
        return st;
    }
    *out = p;
    return RS_OK;
}

void rs_tp_plan_free(rs_tp_plan *p)
{
    if (!p) return;
    for (int r = 0; p->ranks && r < p->tp; r++) free(p->ranks[r].maps);
    free(p->ranks);
    free(p->role);
    free(p);
}

int rs_tp_plan_ways(const rs_tp_plan *p) { return p->tp; }
int rs_tp_plan_pairs(const rs_tp_plan *p) { return p->pairs; }

rs_tp_role rs_tp_plan_role(const rs_tp_plan *p, int whole_layer)
{
    return whole_layer >= 0 && whole_layer < p->whole->nlayers ? p->role[whole_layer] : RS_TP_REPLICATED;
}

void rs_tp_plan_counts(const rs_tp_plan *p, size_t *replicated, size_t *split, size_t *row_bias)
{
    if (replicated) *replicated = p->replicated;
    if (split) *split = p->split;
    if (row_bias) *row_bias = p->row_bias;
}

size_t rs_tp_shard_numel(const rs_tp_plan *p, int rank)
{
    return rank >= 0 && rank < p->tp ? p->ranks[rank].numel : 0;
}

rs_status rs_tp_shard_new(const rs_tp_plan *p, int rank, rs_mem *mem, rs_model **out, rs_err *err)
{
    *out = NULL;
    if (rank < 0 || rank >= p->tp) return rs_err_set(err, RS_ERR_ARG, "tensor: rank %d of %d", rank, p->tp);
    if (!p->whole->built) return rs_err_set(err, RS_ERR_ARG, "tensor: model %s is not built", p->whole->name);
    int *shard_of = malloc((size_t)p->whole->nlayers * sizeof *shard_of); /* freed here */
    if (!shard_of) return rs_err_set(err, RS_ERR_NOMEM, "tensor: out of memory");
    rs_model *s = NULL;
    rs_status st = shard_layout(p, rank, mem, shard_of, &s, err);
    free(shard_of);
    if (!st) st = rs_model_build(s, p->whole->seed, err);
    if (st) {
        rs_model_free(s);
        return st;
    }
    s->step = p->whole->step;
    s->training = p->whole->training;
    /* The shard computes for the whole model: same threads (a rank trains with threads=1; a default
     * context of every core in each of two ranks on two cores made tensor-parallel steps 100x slower). */
    rs_kctx_set_threads(&s->ctx, p->whole->ctx.threads);
    rs_tp_cut(p, rank, p->whole->params, s->params);
    *out = s;
    return RS_OK;
}

/* Moves one tensor between the whole buffer and a shard: to_shard cuts (src is the whole buffer),
 * else places (src is the shard). */
static void move(const tp_map *mp, int rank, int tp, float *dst, const float *src, bool to_shard)
{
    size_t dw = to_shard ? mp->soff : mp->woff, sw = to_shard ? mp->woff : mp->soff;
    dst += dw;
    src += sw;
    if (mp->kind == MAP_COPY) {
        memcpy(dst, src, (size_t)(mp->rows * mp->cols) * sizeof(float));
        return;
    }
    /* whole offset, shard offset and length of each contiguous run */
    int64_t runs, len, wstep, sstep, wfirst;
    if (mp->kind == MAP_ROWS) { /* per part: this rank's block of rows */
        int64_t per_part = mp->rows / mp->parts, mine = per_part / tp;
        runs = mp->parts;
        len = mine * mp->cols;
        wstep = per_part * mp->cols;
        sstep = len;
        wfirst = rank * mine * mp->cols;
    } else { /* per row: this rank's block of columns */
        int64_t mine = mp->cols / tp;
        runs = mp->rows;
        len = mine;
        wstep = mp->cols;
        sstep = mine;
        wfirst = rank * mine;
    }
    for (int64_t k = 0; k < runs; k++) {
        int64_t w = wfirst + k * wstep, s = k * sstep;
        if (to_shard) memcpy(dst + s, src + w, (size_t)len * sizeof(float));
        else memcpy(dst + w, src + s, (size_t)len * sizeof(float));
    }
}

void rs_tp_cut(const rs_tp_plan *p, int rank, const float *whole, float *shard)
{
    const tp_rank *tr = &p->ranks[rank];
    for (int i = 0; i < tr->nmaps; i++) move(&tr->maps[i], rank, p->tp, shard, whole, true);
}

void rs_tp_place(const rs_tp_plan *p, int rank, const float *shard, float *whole)
{
    const tp_rank *tr = &p->ranks[rank];
    for (int i = 0; i < tr->nmaps; i++)
        if (tr->maps[i].kind != MAP_COPY || rank == 0) move(&tr->maps[i], rank, p->tp, whole, shard, false);
}

double rs_tp_sumsq(const rs_tp_plan *p, int rank, const float *shard)
{
    const tp_rank *tr = &p->ranks[rank];
    double s = 0.0;
    for (int i = 0; i < tr->nmaps; i++) {
        const tp_map *mp = &tr->maps[i];
        if (!mp->counted) continue;
        size_t n = mp->kind == MAP_COPY ? (size_t)(mp->rows * mp->cols) : (size_t)(mp->rows * mp->cols / p->tp);
        for (size_t k = 0; k < n; k++) s += (double)shard[mp->soff + k] * shard[mp->soff + k];
    }
    return s;
}
