/* ZeRO / FSDP as a training strategy (see dtrain.h): each rank keeps the optimizer state of its
 * shard only (zero=1), also only its shard of the gradients (zero=2), also only its shard of the
 * parameters, gathering each unit's parameters around its forward and backward (zero=3).
 * The flat buffer is split per unit (one unit, the whole buffer, for zero 1 and 2; the model's
 * top-level units for zero 3), each unit padded to a multiple of world so collectives move equal
 * blocks: rank r owns elements [r*s, r*s + mine) of a unit of length len, s = ceil(len/world).
 * One optimizer per unit slice steps bit-for-bit like one over the whole buffer (engine/optim). */
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "registry.h"

typedef struct zunit {
    size_t off, len; /* the unit's range of the model's buffers */
    size_t s;        /* block per rank: ceil(len/world) */
    size_t mine;     /* elements of this rank's block inside the range (the rest is padding) */
    size_t soff;     /* zero 3: where this unit's block sits in the shard buffers */
} zunit;

typedef struct zero {
    rs_pg *g;
    rs_model *m;
    rs_mem *mem;
    int zero, rank, world;
    rs_dtrain_comm_fn comm;
    void *comm_ud;
    int64_t step;        /* optimizer steps done: the step comm spans belong to */
    zunit *u;            /* (nu) owned; zero 3: indexed like the model's units */
    int nu, last_param;  /* zero 3: the last unit with parameters (kept gathered from forward to backward) */
    rs_optim **opt;      /* (nu) owned; NULL for a unit without parameters */
    size_t shard_n;      /* zero 3: sum of s over units */
    float *pshard;       /* zero 3: (shard_n) PARAMS pool, owned */
    float *gshard;       /* zero 2: (s) zero 3: (shard_n) GRADS pool, owned */
    float *stage;        /* (stage_n) COMM pool, owned: padded copies for units whose length does not
                            divide by world (NULL when all divide) */
    size_t stage_n;
    float *rs_out;       /* zero 3: (max s) COMM pool, owned: a unit's reduce-scattered block before it
                            is added to the gradient shard (micro-batches accumulate) */
    size_t rs_out_n;
    rs_status hook_st;   /* zero 3: the first failure inside backward (which has no status) */
    rs_err hook_err;
    rs_opt_cfg optcfg;
    /* offload=cpu: optimizer state (and the master copy of the parameter shard, and for zero 3 the
     * parameter shard itself) in host memory, the OFFLOAD pool; each step copies this rank's gradient
     * block out and the updated parameter block back, as ZeRO-Offload does over PCIe. On a CPU-only
     * machine the copies are memcpy, but the pools show where each byte would live. */
    bool offload;
    int wrap;
    rs_mem off_mem;      /* tracks the offloaded optimizers; mirrored into the model's OFFLOAD pool */
    float *host_p, *host_g; /* zero 1/2 offload: (u[0].mine) master parameters and gradient block */
    rs_optim *full;      /* checkpoints: the whole optimizer, made only when a run checkpoints or resumes;
                            its state is tracked by full_mem and counted in the model's SCRATCH pool */
    rs_mem full_mem;
    /* zero 3 with precision=bf16 (FSDP's MixedPrecision(param_dtype=bfloat16, reduce_dtype=float32)):
     * the training passes gather the parameters as bf16, half the bytes, while the shards, the
     * optimizer and the gradients' reduce-scatter stay fp32; gather() for evaluation and checkpoints
     * still moves the exact fp32 master weights. */
    bool gather_bf16;
    uint32_t *half;      /* (half_n) COMM pool, owned: every rank's block as bf16 pairs */
    size_t half_n;
} zero;

static void report(zero *z, const char *op, int index, size_t bytes, double t0)
{
    if (z->comm) z->comm(z->comm_ud, z->step, op, index, bytes, t0, rs_train_now());
}

/* The unit's parameters from every rank's block into the model's range. pshard NULL: the blocks
 * are already in place in the model's buffer (zero 1 and 2). */
static rs_status gather_into(zero *z, int i, const float *block, float *dst, rs_err *err)
{
    zunit *u = &z->u[i];
    size_t n = u->s * (size_t)z->world;
    double t0 = rs_train_now();
    rs_status st;
    if (n == u->len) {
        /* in place when the block already sits at its place (send == recv + rank*s) */
        st = rs_pg_all_gather(z->g, block, dst, u->s, RS_F32, err);
    } else {
        memset(z->stage + (size_t)z->rank * u->s, 0, u->s * sizeof(float));
        memcpy(z->stage + (size_t)z->rank * u->s, block, u->mine * sizeof(float));
        st = rs_pg_all_gather(z->g, z->stage + (size_t)z->rank * u->s, z->stage, u->s, RS_F32, err);
        if (!st) memcpy(dst, z->stage, u->len * sizeof(float));
    }
    report(z, rs_pg_op_name(RS_OP_ALL_GATHER), z->zero == 3 ? i : -1, n * sizeof(float), t0);
    return st;
}

static rs_status gather_unit(zero *z, int i, const float *block, rs_err *err)
{
    return gather_into(z, i, block, rs_model_params(z->m) + z->u[i].off, err);
}

/* bf16 of x, to nearest even (NaN kept a NaN), as the upper 16 bits of its fp32 pattern. */
static uint16_t to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The unit's parameters gathered in bf16: this rank's block rounded, every rank's block moved as bf16
 * (the process groups' element types are 32 and 64 bits and an all-gather only copies, so two bf16
 * values travel as one i32 word: ceil(s/2) words a rank), widened back to fp32 in the model's range. */
static rs_status gather_unit_bf16(zero *z, int i, rs_err *err)
{
    zunit *u = &z->u[i];
    size_t w = (u->s + 1) / 2, W = (size_t)z->world; /* words a rank */
    uint16_t *all = (uint16_t *)z->half, *mine = all + 2 * w * (size_t)z->rank;
    const float *block = z->pshard + u->soff;
    for (size_t k = 0; k < 2 * w; k++) mine[k] = k < u->mine ? to_bf16(block[k]) : 0;
    double t0 = rs_train_now();
    rs_status st = rs_pg_all_gather(z->g, z->half + w * (size_t)z->rank, z->half, w, RS_I32, err);
    report(z, rs_pg_op_name(RS_OP_ALL_GATHER), i, w * W * sizeof(uint32_t), t0);
    if (st) return st;
    float *dst = rs_model_params(z->m) + u->off;
    for (size_t k = 0; k < u->len; k++) {
        size_t r = k / u->s, j = k % u->s;
        uint32_t b = (uint32_t)all[2 * w * r + j] << 16;
        memcpy(&dst[k], &b, 4);
    }
    return RS_OK;
}

/* The average over ranks of this rank's block of the unit's gradients, into out (s floats). */
static rs_status reduce_scatter_unit(zero *z, int i, float *out, rs_err *err)
{
    zunit *u = &z->u[i];
    const float *src = rs_model_grads(z->m) + u->off;
    size_t n = u->s * (size_t)z->world;
    if (n != u->len) {
        memcpy(z->stage, src, u->len * sizeof(float));
        memset(z->stage + u->len, 0, (n - u->len) * sizeof(float));
        src = z->stage;
    }
    double t0 = rs_train_now();
    rs_status st = rs_pg_reduce_scatter(z->g, src, out, u->s, RS_F32, RS_AVG, err);
    report(z, rs_pg_op_name(RS_OP_REDUCE_SCATTER), z->zero == 3 ? i : -1, n * sizeof(float), t0);
    return st;
}

/* ---- zero 3: the unit hooks ---- */

static rs_status fetch_params(zero *z, int i, rs_err *err)
{
    if (rs_model_unit_resident(z->m, RS_POOL_PARAMS, i)) return RS_OK;
    rs_model_unit_acquire(z->m, RS_POOL_PARAMS, i);
    if (z->gather_bf16) return gather_unit_bf16(z, i, err);
    return gather_unit(z, i, z->pshard + z->u[i].soff, err);
}

/* A unit may read another unit's parameters through a tied slot (un->uses): those are gathered
 * with it and their gradient range is acquired with its own, so the contribution it adds there is
 * kept until the owner's own backward reduce-scatters the sum. */
static rs_status h_before_forward(void *ud, const rs_unit *un, rs_err *err)
{
    zero *z = ud;
    int ids[2] = {un->index, un->uses};
    for (int k = 0; k < 2; k++) {
        if (ids[k] < 0 || z->u[ids[k]].len == 0) continue;
        /* Evaluation runs on the reporting rank alone, so it cannot gather: gather() must come first. */
        if (!rs_model_training(z->m) && !rs_model_unit_resident(z->m, RS_POOL_PARAMS, ids[k]))
            return rs_err_set(err, RS_ERR_ARG, "zero=3: unit %d is sharded; evaluation needs the strategy's gather first",
                              ids[k]);
        rs_status st = fetch_params(z, ids[k], err);
        if (st) return st;
    }
    return RS_OK;
}

static rs_status h_after_forward(void *ud, const rs_unit *un, rs_err *err)
{
    zero *z = ud;
    (void)err;
    /* Training only (evaluation keeps what gather() gave); the last unit is kept for its backward,
     * which comes next, as FSDP does not reshard the root after forward. */
    if (!rs_model_training(z->m) || un->index == z->last_param || un->index == z->nu - 1) return RS_OK;
    rs_model_unit_release(z->m, RS_POOL_PARAMS, un->index);
    if (un->uses >= 0 && un->uses != z->last_param) rs_model_unit_release(z->m, RS_POOL_PARAMS, un->uses);
    return RS_OK;
}

static rs_status h_before_backward(void *ud, const rs_unit *un, rs_err *err)
{
    zero *z = ud;
    int ids[2] = {un->index, un->uses};
    for (int k = 0; k < 2; k++) {
        if (ids[k] < 0 || z->u[ids[k]].len == 0) continue;
        rs_status st = fetch_params(z, ids[k], err);
        if (st) {
            z->hook_st = st;
            z->hook_err = *err;
            return st;
        }
        rs_model_unit_acquire(z->m, RS_POOL_GRADS, ids[k]); /* a resident range keeps what it holds */
    }
    return RS_OK;
}

static rs_status h_after_backward(void *ud, const rs_unit *un, rs_err *err)
{
    zero *z = ud;
    int i = un->index;
    zunit *u = &z->u[i];
    if (un->uses >= 0) rs_model_unit_release(z->m, RS_POOL_PARAMS, un->uses); /* its gradient stays */
    if (u->len == 0) return RS_OK;
    rs_status st = reduce_scatter_unit(z, i, z->rs_out, err);
    if (st) {
        z->hook_st = st;
        z->hook_err = *err;
        return st;
    }
    /* Micro-batches accumulate into the shard; step() zeroes it after using it. */
    float *g = z->gshard + u->soff;
    for (size_t k = 0; k < u->mine; k++) g[k] += z->rs_out[k];
    rs_model_unit_release(z->m, RS_POOL_GRADS, i);
    rs_model_unit_release(z->m, RS_POOL_PARAMS, i);
    return RS_OK;
}

/* ---- the strategy entries ---- */

static rs_status z_setup(void *ud, rs_model *m, const rs_opt_cfg *opt, rs_err *err)
{
    zero *z = ud;
    if (m != z->m) return rs_err_set(err, RS_ERR_ARG, "zero: set up for model %s, trained with %s", rs_model_name(z->m),
                                     rs_model_name(m));
    z->optcfg = *opt;
    /* Every rank starts from rank 0's parameters. */
    double t0 = rs_train_now();
    rs_status st = rs_pg_broadcast(z->g, rs_model_params(m), rs_model_numel(m), RS_F32, 0, err);
    report(z, rs_pg_op_name(RS_OP_BROADCAST), -1, rs_model_numel(m) * sizeof(float), t0);
    if (st) return st;

    int W = z->world, r = z->rank;
    if (z->zero == 3) {
        st = rs_model_set_wrap(m, (rs_wrap)z->wrap, err);
        if (st) return st;
    }
    z->nu = z->zero == 3 ? rs_model_unit_count(m) : 1;
    z->u = calloc((size_t)z->nu, sizeof *z->u);
    z->opt = calloc((size_t)z->nu, sizeof *z->opt);
    if (!z->u || !z->opt) return rs_err_set(err, RS_ERR_NOMEM, "zero: out of memory");
    size_t smax = 0;
    z->last_param = -1;
    for (int i = 0; i < z->nu; i++) {
        zunit *u = &z->u[i];
        if (z->zero == 3) {
            u->off = rs_model_unit(m, i)->offset;
            u->len = rs_model_unit(m, i)->numel;
        } else {
            u->len = rs_model_numel(m);
        }
        u->s = (u->len + (size_t)W - 1) / (size_t)W;
        size_t lo = (size_t)r * u->s;
        u->mine = lo >= u->len ? 0 : (u->len - lo < u->s ? u->len - lo : u->s);
        u->soff = z->shard_n;
        z->shard_n += u->s;
        if (u->len) z->last_param = i;
        if (u->s > smax) smax = u->s;
        if (u->s * (size_t)W != u->len && u->s * (size_t)W > z->stage_n) z->stage_n = u->s * (size_t)W;
    }
    if (z->stage_n) {
        z->stage = rs_mem_alloc(z->mem, RS_POOL_COMM, z->stage_n * sizeof(float));
        if (!z->stage) return rs_err_set(err, RS_ERR_NOMEM, "zero: out of memory for a staging buffer");
    }
    /* One optimizer per unit over this rank's block, counted in OPTIM. */
    for (int i = 0; i < z->nu; i++) {
        if (!z->u[i].len) continue;
        z->opt[i] = rs_optim_new(opt, rs_model_device(m), z->u[i].mine, z->offload ? &z->off_mem : z->mem, err);
        if (!z->opt[i]) return err ? err->code : RS_ERR_NOMEM;
        /* On the model's context, so its threads cover the update; an offloaded state is host memory
         * and keeps the optimizer's own (CPU) context, with the model's count. */
        if (z->offload) rs_kctx_set_threads(rs_optim_ctx(z->opt[i]), rs_model_threads(m));
        else rs_optim_set_ctx(z->opt[i], rs_model_ctx(m));
        rs_status gst = rs_train_apply_groups(z->opt[i], m, z->u[i].off + (size_t)r * z->u[i].s, err);
        if (gst) return gst;
        if (z->offload) rs_mem_count(z->mem, RS_POOL_OFFLOAD, (int64_t)rs_optim_state_bytes(z->opt[i]));
    }
    if (z->offload && z->zero != 3) {
        size_t n = z->u[0].mine ? z->u[0].mine : 1;
        z->host_p = rs_mem_alloc(z->mem, RS_POOL_OFFLOAD, n * sizeof(float));
        z->host_g = rs_mem_alloc(z->mem, RS_POOL_OFFLOAD, n * sizeof(float));
        if (!z->host_p || !z->host_g) return rs_err_set(err, RS_ERR_NOMEM, "zero: out of host memory for offload");
        memcpy(z->host_p, rs_model_params(m) + (size_t)r * z->u[0].s, z->u[0].mine * sizeof(float));
    }
    if (z->zero == 2) {
        z->gshard = rs_mem_alloc(z->mem, RS_POOL_GRADS, z->u[0].s * sizeof(float));
        if (!z->gshard) return rs_err_set(err, RS_ERR_NOMEM, "zero: out of memory for the gradient shard");
        rs_model_release_grads(m); /* acquired again before the next backward */
    }
    if (z->zero == 3) {
        z->pshard = rs_mem_alloc(z->mem, z->offload ? RS_POOL_OFFLOAD : RS_POOL_PARAMS, z->shard_n * sizeof(float));
        z->gshard = rs_mem_alloc(z->mem, RS_POOL_GRADS, z->shard_n * sizeof(float));
        z->rs_out_n = smax;
        z->rs_out = rs_mem_alloc(z->mem, RS_POOL_COMM, smax * sizeof(float));
        /* the training loop set the model's context to the run's precision before setup */
        z->gather_bf16 = rs_model_ctx(m)->prec == RS_PREC_BF16;
        if (z->gather_bf16) {
            z->half_n = (smax + 1) / 2 * (size_t)W;
            z->half = rs_mem_alloc(z->mem, RS_POOL_COMM, z->half_n * sizeof(uint32_t));
            if (!z->half) return rs_err_set(err, RS_ERR_NOMEM, "zero: out of memory for the bf16 gather buffer");
        }
        if (!z->pshard || !z->gshard || !z->rs_out)
            return rs_err_set(err, RS_ERR_NOMEM, "zero: out of memory for %zu-element shards", z->shard_n);
        const float *p = rs_model_params(m);
        for (int i = 0; i < z->nu; i++)
            memcpy(z->pshard + z->u[i].soff, p + z->u[i].off + (size_t)r * z->u[i].s, z->u[i].mine * sizeof(float));
        st = rs_model_shard_buffers(m, err); /* the full buffers become reservations */
        if (st) return st;
        rs_unit_hooks h = {.before_forward = h_before_forward, .after_forward = h_after_forward,
                           .before_backward = h_before_backward, .after_backward = h_after_backward, .ud = z};
        rs_model_set_unit_hooks(m, &h);
    }
    return RS_OK;
}

static rs_status z_before_backward(void *ud, bool last, rs_err *err)
{
    zero *z = ud;
    (void)last;
    /* zero 2: the full gradient buffer lives from the first backward of a step to the reduce-scatter. */
    if (z->zero == 2) return rs_model_acquire_grads(z->m, err);
    return RS_OK;
}

static rs_status z_after_backward(void *ud, rs_err *err)
{
    zero *z = ud;
    if (z->zero == 1) {
        double t0 = rs_train_now();
        rs_status st = rs_pg_all_reduce(z->g, rs_model_grads(z->m), rs_model_numel(z->m), RS_F32, RS_AVG, err);
        report(z, rs_pg_op_name(RS_OP_ALL_REDUCE), -1, rs_model_numel(z->m) * sizeof(float), t0);
        return st;
    }
    if (z->zero == 2) {
        rs_status st = reduce_scatter_unit(z, 0, z->gshard, err);
        rs_model_release_grads(z->m);
        return st;
    }
    if (z->hook_st) { /* a unit's backward hook failed */
        if (err) *err = z->hook_err;
        return z->hook_st;
    }
    return RS_OK;
}

/* The gradient step() applies: zero 1 the whole all-reduced buffer on every rank; zero 2 and 3 this
 * rank's block(s), so the sum of squares is all-reduced (padding past a range is zero). */
static float *grad_part(zero *z, size_t *n)
{
    if (z->zero == 1) {
        *n = rs_model_numel(z->m);
        return rs_model_grads(z->m);
    }
    *n = z->zero == 2 ? z->u[0].mine : z->shard_n;
    return z->gshard;
}

static rs_status z_grad_sumsq(void *ud, double *sumsq, rs_err *err)
{
    zero *z = ud;
    size_t n;
    const float *g = grad_part(z, &n);
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    if (z->zero != 1) {
        double t0 = rs_train_now();
        rs_status st = rs_pg_all_reduce(z->g, &s, 1, RS_F64, RS_SUM, err);
        report(z, rs_pg_op_name(RS_OP_ALL_REDUCE), -1, sizeof s, t0);
        if (st) return st;
    }
    *sumsq = s;
    return RS_OK;
}

static void z_grad_scale(void *ud, float s)
{
    zero *z = ud;
    size_t n;
    float *g = grad_part(z, &n);
    for (size_t i = 0; i < n; i++) g[i] *= s;
}

/* An optimizer's failure, with its kernel's message when it was one. */
static rs_status step_err(zero *z, rs_status st, float lr, rs_err *err)
{
    for (int i = 0; i < z->nu; i++)
        if (z->opt[i] && rs_kctx_check(rs_optim_ctx(z->opt[i]), err)) return rs_err_prefix(err, "zero: optimizer step");
    return rs_err_set(err, st, "zero: optimizer step failed (lr=%g)", (double)lr);
}

static rs_status z_step(void *ud, float lr, rs_err *err)
{
    zero *z = ud;
    rs_status st = RS_OK;
    if (z->zero == 3) {
        for (int i = 0; i < z->nu && !st; i++)
            if (z->opt[i]) st = rs_optim_step(z->opt[i], z->pshard + z->u[i].soff, z->gshard + z->u[i].soff, lr);
        memset(z->gshard, 0, z->shard_n * sizeof(float));
        /* What gather() left resident is stale now; the next forward gathers the new values. */
        for (int i = 0; i < z->nu; i++) rs_model_unit_release(z->m, RS_POOL_PARAMS, i);
        if (!st) z->step++;
        return st ? step_err(z, st, lr, err) : RS_OK;
    }
    zunit *u = &z->u[0];
    size_t lo = (size_t)z->rank * u->s;
    float *p = rs_model_params(z->m) + (lo < u->len ? lo : 0);
    const float *g = z->zero == 2 ? z->gshard : rs_model_grads(z->m) + (lo < u->len ? lo : 0);
    if (z->offload) {
        /* the gradient block goes to the host, the host updates its master copy, the block comes back */
        memcpy(z->host_g, g, u->mine * sizeof(float));
        st = rs_optim_step(z->opt[0], z->host_p, z->host_g, lr);
        if (!st) memcpy(p, z->host_p, u->mine * sizeof(float));
    } else {
        st = rs_optim_step(z->opt[0], p, g, lr);
    }
    if (st) return step_err(z, st, lr, err);
    st = gather_unit(z, 0, rs_model_params(z->m) + lo, err);
    z->step++;
    return st;
}

static rs_status z_gather(void *ud, rs_err *err)
{
    zero *z = ud;
    if (z->zero != 3) return RS_OK; /* every step ends with the full parameters on every rank */
    for (int i = 0; i < z->nu; i++) {
        if (!z->u[i].len) continue;
        rs_status st;
        if (z->gather_bf16) { /* the exact fp32 weights, even where a training pass left a unit gathered in bf16 */
            if (!rs_model_unit_resident(z->m, RS_POOL_PARAMS, i)) rs_model_unit_acquire(z->m, RS_POOL_PARAMS, i);
            st = gather_unit(z, i, z->pshard + z->u[i].soff, err);
        } else {
            st = fetch_params(z, i, err);
        }
        if (st) return st;
    }
    return RS_OK;
}

/* ---- checkpoints: the whole optimizer, gathered from and scattered to the shards ---- */

static rs_optim *z_optimizer(void *ud)
{
    zero *z = ud;
    if (!z->full) {
        rs_err e = {0};
        z->full = rs_optim_new(&z->optcfg, rs_model_device(z->m), rs_model_numel(z->m), &z->full_mem, &e);
        if (z->full) rs_mem_count(z->mem, RS_POOL_SCRATCH, (int64_t)rs_optim_state_bytes(z->full));
    }
    return z->full;
}

static rs_status z_sync_optimizer(void *ud, bool to_full, rs_err *err)
{
    zero *z = ud;
    if (!z->full) return rs_err_set(err, RS_ERR_NOMEM, "zero: no memory for the checkpoint's optimizer state");
    int64_t steps = 0;
    for (int i = 0; i < z->nu; i++) {
        zunit *u = &z->u[i];
        if (!z->opt[i]) continue;
        steps = rs_optim_step_count(z->opt[i]);
        for (int k = 0; k < rs_optim_state_count(z->full); k++) {
            float *full = rs_optim_state(z->full, k) + u->off, *mine = rs_optim_state(z->opt[i], k);
            if (to_full) {
                rs_status st = gather_into(z, i, mine, full, err);
                if (st) return st;
            } else if (u->mine) {
                memcpy(mine, full + (size_t)z->rank * u->s, u->mine * sizeof(float));
            }
        }
        if (!to_full) rs_optim_set_step_count(z->opt[i], rs_optim_step_count(z->full));
    }
    if (to_full) {
        rs_optim_set_step_count(z->full, steps);
        return RS_OK;
    }
    if (z->host_p)
        memcpy(z->host_p, rs_model_params(z->m) + (size_t)z->rank * z->u[0].s, z->u[0].mine * sizeof(float));
    /* After a resume the model's buffer holds the loaded weights: zero 3 takes its shard from them and
     * gives the pages back (acquire counts the range and zero-fills it, release returns it). */
    if (z->zero == 3) {
        const float *p = rs_model_params(z->m);
        for (int i = 0; i < z->nu; i++) {
            memcpy(z->pshard + z->u[i].soff, p + z->u[i].off + (size_t)z->rank * z->u[i].s,
                   z->u[i].mine * sizeof(float));
            rs_model_unit_acquire(z->m, RS_POOL_PARAMS, i);
            rs_model_unit_release(z->m, RS_POOL_PARAMS, i);
        }
    }
    return RS_OK;
}

static void z_teardown(void *ud)
{
    zero *z = ud;
    if (!z) return;
    rs_model_set_unit_hooks(z->m, NULL);
    if (rs_model_buffers_sharded(z->m)) {
        rs_err e = {0};
        if (rs_model_unshard_buffers(z->m, &e)) {
            /* teardown has no status; the model keeps its reservations, which rs_model_free handles */
        }
    }
    rs_model_acquire_grads(z->m, NULL);
    if (z->opt)
        for (int i = 0; i < z->nu; i++) {
            if (z->opt[i] && z->offload)
                rs_mem_count(z->mem, RS_POOL_OFFLOAD, -(int64_t)rs_optim_state_bytes(z->opt[i]));
            rs_optim_free(z->opt[i]);
        }
    if (z->host_p) {
        size_t n = z->u[0].mine ? z->u[0].mine : 1;
        rs_mem_free(z->mem, RS_POOL_OFFLOAD, z->host_p, n * sizeof(float));
        rs_mem_free(z->mem, RS_POOL_OFFLOAD, z->host_g, n * sizeof(float));
    }
    if (z->full) {
        rs_mem_count(z->mem, RS_POOL_SCRATCH, -(int64_t)rs_optim_state_bytes(z->full));
        rs_optim_free(z->full);
    }
    free(z->opt);
    size_t gn = z->zero == 2 && z->u ? z->u[0].s : z->shard_n;
    rs_mem_free(z->mem, z->offload ? RS_POOL_OFFLOAD : RS_POOL_PARAMS, z->pshard, z->shard_n * sizeof(float));
    rs_mem_free(z->mem, RS_POOL_GRADS, z->gshard, gn * sizeof(float));
    rs_mem_free(z->mem, RS_POOL_COMM, z->stage, z->stage_n * sizeof(float));
    rs_mem_free(z->mem, RS_POOL_COMM, z->rs_out, z->rs_out_n * sizeof(float));
    rs_mem_free(z->mem, RS_POOL_COMM, z->half, z->half_n * sizeof(uint32_t));
    free(z->u);
    free(z);
}

rs_status rs_zero_strategy(rs_pg *g, rs_model *m, const rs_dtrain_cfg *cfg, rs_dtrain_comm_fn comm, void *comm_ud,
                           rs_train_strategy *out, rs_err *err)
{
    if (!g || !m || !cfg || !out) return rs_err_set(err, RS_ERR_ARG, "zero: missing group, model or configuration");
    if (cfg->zero < 1 || cfg->zero > 3)
        return rs_err_set(err, RS_ERR_ARG, "zero=%d: ZeRO stages are 1 (optimizer state), 2 (also gradients) and 3 "
                                           "(also parameters)", cfg->zero);
    if (rs_model_device(m).kind != RS_DEV_CPU || !(g->ops->devices & RS_PG_DEV_CPU))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "zero: needs a CPU model and a host-memory backend (shm, tcp, mpi)");
    zero *z = calloc(1, sizeof *z); /* owned by the strategy; z_teardown frees it */
    if (!z) return rs_err_set(err, RS_ERR_NOMEM, "zero: out of memory");
    *z = (zero){.g = g, .m = m, .mem = rs_model_mem(m), .zero = cfg->zero, .rank = g->rank, .world = g->world,
                .comm = comm, .comm_ud = comm_ud, .offload = cfg->offload, .wrap = cfg->wrap};
    *out = (rs_train_strategy){.name = cfg->zero == 1 ? "zero1" : cfg->zero == 2 ? "zero2" : "zero3",
                               .ud = z, .rank = g->rank, .world = g->world, .report = g->rank == 0,
                               .setup = z_setup, .before_backward = z_before_backward,
                               .after_backward = z_after_backward, .step = z_step, .grad_sumsq = z_grad_sumsq, .grad_scale = z_grad_scale, .gather = z_gather,
                               .optimizer = z_optimizer, .sync_optimizer = z_sync_optimizer,
                               .teardown = z_teardown};
    return RS_OK;
}

/* ---- the registry's entry (registry.h) ---- */

static const char *const wrap_words[] = {"top", "layer", "model", NULL}; /* rs_wrap's order */
static const char *const offload_words[] = {"none", "cpu", NULL};

static const rs_strategy_opt fsdp_opts[] = {
    {"zero", RS_SOPT_INT, "3",
     "fsdp: 1 shards optimizer state, 2 also gradients, 3 also parameters (default 3); pipeline: 1 shards optimizer "
     "state over the dp group (default 0)", NULL, 1, 3},
    {"wrap", RS_SOPT_ENUM, "top", "fsdp zero=3: a unit per top-level item, per layer, or the whole model",
     wrap_words, 0, -1},
    {"offload", RS_SOPT_ENUM, "none", "fsdp: cpu keeps optimizer state and parameter shards in host memory",
     offload_words, 0, -1},
    {NULL, 0, NULL, NULL, NULL, 0, 0},
};

static rs_status fsdp_make(const rs_strategy_ctx *x, rs_train_strategy *out, rs_err *err)
{
    rs_dtrain_cfg c = rs_dtrain_defaults();
    c.zero = (int)rs_strategy_int(x->args, "zero");
    c.wrap = rs_strategy_choice(x->args, "wrap");
    c.offload = rs_strategy_choice(x->args, "offload") == 1;
    return rs_zero_strategy(x->g, x->m, &c, x->comm, x->comm_ud, out, err);
}

const rs_strategy_def rs_strategy_fsdp = {
    .name = "fsdp", .kind = "rank processes",
    .about = "FSDP / ZeRO: optimizer state, gradients and parameters sharded over the ranks",
    .uses = RS_SUSE_RANKS | RS_SUSE_PROCS, .opts = fsdp_opts, .make = fsdp_make,
};
