/* What a pipeline rank keeps (see pipe_keep.h): its stages' parameters alone, ZeRO-1's parts of the
 * optimizer, and the whole optimizer for checkpoints. */
#include "pipe_keep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_gather.h"

/* The parameters a stage owns: its layers' tensors (tied slots belong to their owner). */
void rs_pipe_stage_range(rs_model *m, int first, int last, size_t *off, size_t *len)
{
    size_t lo = (size_t)-1, hi = 0;
    for (int t = 0; t < rs_model_tensor_count(m); t++) {
        const rs_param_info *pi = rs_model_tensor(m, t);
        if (pi->layer < first || pi->layer >= last) continue;
        if (pi->offset < lo) lo = pi->offset;
        if (pi->offset + pi->numel > hi) hi = pi->offset + pi->numel;
    }
    *off = hi ? lo : 0;
    *len = hi ? hi - lo : 0;
}

/* With zero=1 each replica of a stage keeps the optimizer of its 1/dp part of each range of len floats
 * (equal blocks of blk, the last one short): [zlo, zlo+zlen) of it. */
void rs_pipe_zero_part(const rs_pipe_state *p, size_t len, size_t *blk, size_t *zlo, size_t *zlen)
{
    int D = p->grid.dp;
    *blk = (len + (size_t)D - 1) / (size_t)D;
    *zlo = p->zero ? (size_t)p->grid.d * *blk : 0;
    if (*zlo > len) *zlo = len;
    *zlen = !p->zero ? len : len - *zlo < *blk ? len - *zlo : *blk;
}

/* Whether [off, off+n) meets this rank's stages' ranges or its tied copies. */
bool rs_pipe_owns(const rs_pipe_state *p, size_t off, size_t n)
{
    for (int c = 0; c < p->V; c++)
        if (off < p->ch[c].off + p->ch[c].len && p->ch[c].off < off + n) return true;
    for (int i = 0; i < p->nties; i++)
        if (p->ties[i].reader && off < p->ties[i].off + p->ties[i].numel && p->ties[i].off < off + n) return true;
    return false;
}

/* This rank's ranges of the buffer w (its stages', then its tied copies) to or from the packed keep. */
static void move_own(const rs_pipe_state *p, float *w, float *keep, bool to_keep)
{
    size_t at = 0;
    for (int r = 0; r < p->V + p->nties; r++) {
        const rs_pipe_tie *t = r >= p->V ? &p->ties[r - p->V] : NULL;
        if (t && !t->reader) continue;
        size_t off = t ? t->off : p->ch[r].off, n = t ? t->numel : p->ch[r].len;
        if (to_keep) memcpy(keep + at, w + off, n * sizeof(float));
        else memcpy(w + off, keep + at, n * sizeof(float));
        at += n;
    }
}

/* Only this rank's stages keep parameters and gradients: the units (top-level items) of the other
 * stages go back to the system, so the PARAMS and GRADS pools measure a stage, not the model. */
rs_status rs_pipe_keep_own(rs_pipe_state *p, rs_err *err)
{
    rs_model *m = p->m;
    size_t n = 0;
    for (int c = 0; c < p->V; c++) n += p->ch[c].len;
    for (int i = 0; i < p->nties; i++) n += p->ties[i].reader ? p->ties[i].numel : 0;
    p->own_floats = n;
    float *keep = malloc((n ? n : 1) * sizeof *keep); /* freed here: the weights while the buffers change */
    if (!keep) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
    move_own(p, rs_model_params(m), keep, true);
    rs_status st = rs_model_shard_buffers(m, err);
    for (int u = 0; !st && u < rs_model_unit_count(m); u++) {
        const rs_unit *un = rs_model_unit(m, u);
        if (!un->numel || !rs_pipe_owns(p, un->offset, un->numel)) continue;
        rs_model_unit_acquire(m, RS_POOL_PARAMS, u);
        rs_model_unit_acquire(m, RS_POOL_GRADS, u);
    }
    if (!st) move_own(p, rs_model_params(m), keep, false);
    free(keep);
    return st;
}

/* The other stages' units, which a first stage's rank acquired to gather into, go back after a step. */
void rs_pipe_release_others(rs_pipe_state *p)
{
    if (!p->others_resident) return;
    for (int u = 0; u < rs_model_unit_count(p->m); u++) {
        const rs_unit *un = rs_model_unit(p->m, u);
        if (un->numel && !rs_pipe_owns(p, un->offset, un->numel)) rs_model_unit_release(p->m, RS_POOL_PARAMS, u);
    }
    p->others_resident = false;
}

/* zero=1: every replica stepped its part of the range [off, off+len); the parts go round the dp group
 * (padded to equal blocks of blk, as all_gather moves them). */
rs_status rs_pipe_zero_gather(rs_pipe_state *p, size_t off, size_t len, size_t blk, size_t zlo, size_t zlen, rs_err *err)
{
    float *w = rs_model_params(p->m);
    memset(p->zsend, 0, blk * sizeof(float));
    memcpy(p->zsend, w + off + zlo, zlen * sizeof(float));
    double t0 = rs_train_now();
    rs_status st = rs_pg_all_gather(p->gg.dp, p->zsend, p->zrecv, blk, RS_F32, err);
    rs_pipe_comm(p, rs_pg_op_name(RS_OP_ALL_GATHER), -1, blk * (size_t)p->grid.dp * sizeof(float), t0);
    if (st) return rs_err_prefix(err, "pipeline zero=1: gathering stage %d's parameters over its dp group", p->rank);
    memcpy(w + off, p->zrecv, len * sizeof(float));
    return RS_OK;
}

rs_optim *rs_pipe_optimizer(void *ud)
{
    rs_pipe_state *p = ud;
    if (!p->full) {
        rs_err e = {0};
        p->full = rs_optim_new(&p->optcfg, rs_model_device(p->whole), rs_model_numel(p->whole), &p->full_mem, &e);
        if (p->full) rs_mem_count(p->mem, RS_POOL_SCRATCH, (int64_t)rs_optim_state_bytes(p->full));
        if (p->full) rs_train_apply_groups(p->full, p->whole, 0, &e);
    }
    return p->full;
}

/* A buffer in the layout of m's parameters (SCRATCH), for the optimizer state of a checkpoint. */
static float *ckpt_buf(rs_pipe_state *p, rs_err *err)
{
    if (!p->ck) {
        p->ck_n = rs_model_numel(p->m);
        p->ck = rs_mem_alloc(p->mem, RS_POOL_SCRATCH, p->ck_n * sizeof(float));
        if (!p->ck) rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory for a checkpoint's optimizer state");
    }
    return p->ck;
}

/* State k of the whole optimizer into rank 0's full one: each stage's range (with zero=1 its parts
 * all-gathered over the dp group first) to its pipeline's first stage, then (tp > 1) the first
 * stage's shards into the whole layout. */
static rs_status state_to_full(rs_pipe_state *p, int k, float *ck, rs_err *err)
{
    rs_status st = RS_OK;
    for (int c = 0; c < p->V && !st; c++) {
        rs_pipe_chunk *ch = &p->ch[c];
        if (!ch->len) continue;
        if (!p->zero) {
            memcpy(ck + ch->off, rs_optim_state(ch->opt, k), ch->len * sizeof(float));
            continue;
        }
        memset(p->zsend, 0, ch->blk * sizeof(float));
        if (ch->opt) memcpy(p->zsend, rs_optim_state(ch->opt, k), ch->zlen * sizeof(float));
        st = rs_pg_all_gather(p->gg.dp, p->zsend, p->zrecv, ch->blk, RS_F32, err);
        if (!st) memcpy(ck + ch->off, p->zrecv, ch->len * sizeof(float));
    }
    if (st || p->grid.d != 0) return st;
    for (int s = 0; s < p->S && !st; s++) {
        int owner = s % p->P;
        size_t off, len;
        rs_pipe_stage_range(p->m, p->cuts[s], p->cuts[s + 1], &off, &len);
        if (owner == 0 || !len) continue;
        if (p->rank == 0) st = rs_pg_recv(p->ppg, ck + off, len, RS_F32, owner, err);
        else if (p->rank == owner) st = rs_pg_send(p->ppg, ck + off, len, RS_F32, 0, err);
    }
    if (st || p->rank != 0) return st;
    float *full = p->g->rank == 0 ? rs_optim_state(p->full, k) : NULL;
    if (!p->plan) {
        memcpy(full, ck, rs_model_numel(p->m) * sizeof(float));
        return RS_OK;
    }
    return rs_tp_gather_whole(p->gg.tp, p->plan, ck, full, p->tp_stage, p->ctx.comm, p->ctx.comm_ud, p->step, err);
}

/* After a resume wrote whole-model weights into buffers whose pages this rank had given back: the pages
 * of the units it does not keep go back again (acquire then release: releasing a released unit does
 * nothing). */
static void drop_others(rs_pipe_state *p, rs_model *m, bool all)
{
    for (int u = 0; u < rs_model_unit_count(m); u++) {
        const rs_unit *un = rs_model_unit(m, u);
        if (!un->numel || (!all && rs_pipe_owns(p, un->offset, un->numel))) continue;
        rs_model_unit_acquire(m, RS_POOL_PARAMS, u);
        rs_model_unit_release(m, RS_POOL_PARAMS, u);
    }
}

/* Checkpoints hold the whole optimizer: to_full brings every stage's (and shard's) state to rank 0's
 * full one; !to_full (after a resume loaded the whole weights and the full optimizer on every rank)
 * takes this rank's ranges back out, whatever layout wrote it. */
rs_status rs_pipe_sync_optimizer(void *ud, bool to_full, rs_err *err)
{
    rs_pipe_state *p = ud;
    if (!p->full) return RS_OK;
    int ns = rs_optim_state_count(p->full);
    float *ck = ckpt_buf(p, err);
    if (!ck) return RS_ERR_NOMEM;
    if (to_full) {
        for (int k = 0; k < ns; k++) {
            rs_status st = state_to_full(p, k, ck, err);
            if (st) return rs_err_prefix(err, "pipeline: gathering the optimizer state for a checkpoint");
        }
        /* the step count (Adam's bias correction) is the same on every stage */
        for (int c = 0; c < p->V; c++)
            if (p->ch[c].opt) rs_optim_set_step_count(p->full, rs_optim_step_count(p->ch[c].opt));
        return RS_OK;
    }
    for (int k = 0; k < ns; k++) {
        const float *src = rs_optim_state(p->full, k);
        if (p->plan) {
            rs_tp_cut(p->plan, p->grid.t, src, ck);
            src = ck;
        }
        for (int c = 0; c < p->V; c++)
            if (p->ch[c].opt)
                memcpy(rs_optim_state(p->ch[c].opt, k), src + p->ch[c].off + p->ch[c].zlo, p->ch[c].zlen * sizeof(float));
        for (int i = 0; i < p->nties; i++)
            if (p->ties[i].opt)
                memcpy(rs_optim_state(p->ties[i].opt, k), src + p->ties[i].off + p->ties[i].zlo,
                       p->ties[i].zlen * sizeof(float));
    }
    int64_t steps = rs_optim_step_count(p->full);
    for (int c = 0; c < p->V; c++)
        if (p->ch[c].opt) rs_optim_set_step_count(p->ch[c].opt, steps);
    for (int i = 0; i < p->nties; i++)
        if (p->ties[i].opt) rs_optim_set_step_count(p->ties[i].opt, steps);
    if (p->plan) {
        /* the shard's weights out of the whole ones the checkpoint held, then the whole's pages go back */
        rs_tp_cut(p->plan, p->grid.t, rs_model_params(p->whole), rs_model_params(p->m));
        rs_model_set_seed(p->m, rs_model_seed(p->whole));
        rs_model_set_step(p->m, rs_model_step(p->whole));
        drop_others(p, p->whole, true);
    }
    drop_others(p, p->m, false);
    p->whole_resident = p->others_resident = p->gathered = false;
    return RS_OK;
}

