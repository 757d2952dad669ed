/* Optimizer state and stepping over a flat slice (see optim.h).
 * This file owns the bookkeeping (configuration, state buffers, step count); the arithmetic is the
 * device's sgd_update / adam_update kernel, so a GPU table steps the same optimizer unchanged. */
#include "engine/optim/optim.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/core/kernels.h"

#define MAX_STATE 2

struct rs_optim {
    rs_opt_cfg cfg;
    const rs_kernels *k;           /* borrowed: static table of the device */
    rs_kctx own;                   /* the context the optimizer makes for itself */
    rs_kctx *ctx;                  /* the one updates run on: &own, or its owner's (rs_optim_set_ctx) */
    rs_mem *mem;                   /* borrowed: tracker the state is counted in (may be NULL) */
    size_t n;                      /* elements in the slice */
    int64_t step;                  /* steps taken */
    int nstate;
    float *state[MAX_STATE];       /* (n) each, owned, from RS_POOL_OPTIM */
    const char *names[MAX_STATE];  /* static strings */
    size_t (*decay)[2];            /* (ndecay) ranges of the slice that decay, owned; NULL: all */
    int ndecay;
};

/* NULL-terminated (the entry at RS_OPT_KIND_COUNT): train's opt= offers and parses these. */
const char *const rs_opt_kind_names[RS_OPT_KIND_COUNT + 1] = {
    [RS_OPT_SGD] = "sgd", [RS_OPT_ADAM] = "adam", [RS_OPT_ADAMW] = "adamw"};

rs_opt_cfg rs_opt_defaults(rs_opt_kind kind)
{
    rs_opt_cfg c = {.kind = kind};
    if (kind == RS_OPT_SGD) {
        c.lr = 0.01f;
        return c;
    }
    c.lr = 1e-3f;
    c.beta1 = 0.9f;
    c.beta2 = 0.999f;
    c.eps = 1e-8f;
    c.weight_decay = kind == RS_OPT_ADAMW ? 1e-2f : 0.0f;
    return c;
}

const char *rs_opt_kind_name(rs_opt_kind kind)
{
    return (unsigned)kind < RS_OPT_KIND_COUNT ? rs_opt_kind_names[kind] : "?";
}

rs_status rs_opt_kind_parse(const char *s, rs_opt_kind *out, rs_err *err)
{
    for (int i = 0; s && i < RS_OPT_KIND_COUNT; i++) {
        if (strcasecmp(s, rs_opt_kind_names[i]) == 0) {
            *out = (rs_opt_kind)i;
            return RS_OK;
        }
    }
    char valid[128] = "";
    for (int i = 0; i < RS_OPT_KIND_COUNT; i++)
        snprintf(valid + strlen(valid), sizeof valid - strlen(valid), "%s%s", i ? ", " : "", rs_opt_kind_names[i]);
    return rs_err_set(err, RS_ERR_ARG, "unknown optimizer '%s' (valid: %s)", s ? s : "", valid);
}

/* Written so that NaN fails too: every comparison with NaN is false. */
static bool at_least_zero(float x) { return isfinite(x) && x >= 0.0f; }

rs_status rs_opt_cfg_check(const rs_opt_cfg *c, rs_err *err)
{
    if ((unsigned)c->kind >= RS_OPT_KIND_COUNT)
        return rs_err_set(err, RS_ERR_ARG, "optimizer kind %d is not one of sgd, adam, adamw",
                          (int)c->kind);
    const char *who = rs_opt_kind_names[c->kind];
    if (!at_least_zero(c->lr))
        return rs_err_set(err, RS_ERR_ARG, "%s: lr=%g is invalid (need a finite lr >= 0)", who,
                          (double)c->lr);
    if (!at_least_zero(c->weight_decay))
        return rs_err_set(err, RS_ERR_ARG,
                          "%s: weight_decay=%g is invalid (need a finite weight_decay >= 0)", who,
                          (double)c->weight_decay);
    if (c->kind == RS_OPT_SGD) {
        if (!at_least_zero(c->momentum))
            return rs_err_set(err, RS_ERR_ARG,
                              "sgd: momentum=%g is invalid (need a finite momentum >= 0)",
                              (double)c->momentum);
        if (!isfinite(c->dampening))
            return rs_err_set(err, RS_ERR_ARG, "sgd: dampening=%g is invalid (need a finite value)",
                              (double)c->dampening);
        if (c->nesterov && (c->momentum <= 0.0f || c->dampening != 0.0f))
            return rs_err_set(err, RS_ERR_ARG,
                              "sgd: nesterov needs momentum > 0 and dampening = 0 (have momentum=%g, "
                              "dampening=%g)",
                              (double)c->momentum, (double)c->dampening);
        return RS_OK;
    }
    const float betas[2] = {c->beta1, c->beta2};
    for (int i = 0; i < 2; i++) {
        if (!(betas[i] >= 0.0f && betas[i] < 1.0f))
            return rs_err_set(err, RS_ERR_ARG, "%s: beta%d=%g is invalid (need 0 <= beta%d < 1)", who,
                              i + 1, (double)betas[i], i + 1);
    }
    if (!at_least_zero(c->eps))
        return rs_err_set(err, RS_ERR_ARG, "%s: eps=%g is invalid (need a finite eps >= 0)", who,
                          (double)c->eps);
    return RS_OK;
}

rs_optim *rs_optim_new(const rs_opt_cfg *cfg, rs_device dev, size_t n, rs_mem *mem, rs_err *err)
{
    if (rs_opt_cfg_check(cfg, err) != RS_OK) return NULL;
    const rs_kernels *k = rs_kernels_for(dev);
    if (!k) {
        rs_err_set(err, RS_ERR_UNSUPPORTED, "optimizer: this build has no kernels for device %s",
                   rs_device_name(dev));
        return NULL;
    }
    /* The state comes from the table's allocator, counted in mem: it lives where the parameters do
     * (checkpoints copy it through host memory, engine/ckpt/checkpoint.c). */
    if (n > SIZE_MAX / (MAX_STATE * sizeof(float))) {
        rs_err_set(err, RS_ERR_ARG, "optimizer: %zu elements is too many to hold state for", n);
        return NULL;
    }

    /* Owned by the caller, released by rs_optim_free. The struct is bookkeeping, not optimizer state,
     * so it is not counted: RS_POOL_OPTIM then reads exactly count * n * 4 bytes. */
    rs_optim *o = calloc(1, sizeof *o);
    if (!o) {
        rs_err_set(err, RS_ERR_NOMEM, "optimizer: out of memory");
        return NULL;
    }
    o->cfg = *cfg;
    o->k = k;
    o->mem = mem;
    if (rs_kctx_init(&o->own, k, 0, err)) {
        free(o);
        return NULL;
    }
    o->ctx = &o->own;
    o->n = n;
    if (cfg->kind == RS_OPT_SGD) {
        if (cfg->momentum != 0.0f) o->names[o->nstate++] = "momentum_buffer";
    } else {
        o->names[o->nstate++] = "exp_avg";
        o->names[o->nstate++] = "exp_avg_sq";
    }
    for (int i = 0; i < o->nstate; i++) {
        /* Owned by o; zero-filled by rs_mem_alloc, which is the state torch starts from. */
        void *st = NULL;
        if (k->mem_alloc(o->ctx, mem, RS_POOL_OPTIM, n * sizeof(float), &st)) {
            rs_err e = {0};
            rs_kctx_check(o->ctx, &e); /* the table's reason: no memory, or no device at all */
            rs_err_set(err, e.code ? e.code : RS_ERR_NOMEM, "optimizer: no room for %s (%zu bytes) on %s: %s",
                       o->names[i], n * sizeof(float), rs_device_name(dev), e.msg);
            rs_optim_free(o);
            return NULL;
        }
        o->state[i] = st;
    }
    return o;
}

void rs_optim_free(rs_optim *o)
{
    if (!o) return;
    for (int i = 0; i < o->nstate; i++)
        if (o->state[i]) o->k->mem_free(&o->own, o->mem, RS_POOL_OPTIM, o->state[i], o->n * sizeof(float));
    free(o->decay);
    free(o);
}

rs_status rs_optim_set_decay_ranges(rs_optim *o, size_t base, const size_t (*ranges)[2], int n, rs_err *err)
{
    size_t (*d)[2] = calloc((size_t)(n > 0 ? n : 1), sizeof *d); /* owned by o */
    if (!d) return rs_err_set(err, RS_ERR_NOMEM, "out of memory for weight decay ranges");
    int k = 0;
    for (int i = 0; i < n; i++) {
        size_t a = ranges[i][0] > base ? ranges[i][0] - base : 0, b = ranges[i][1] > base ? ranges[i][1] - base : 0;
        if (b > o->n) b = o->n;
        if (a < b) {
            d[k][0] = a;
            d[k][1] = b;
            k++;
        }
    }
    free(o->decay);
    o->decay = d;
    o->ndecay = k;
    return RS_OK;
}

rs_status rs_optim_set_ctx(rs_optim *o, rs_kctx *ctx)
{
    if (ctx && ctx->k != o->k) return RS_ERR_ARG;
    o->ctx = ctx ? ctx : &o->own;
    return RS_OK;
}

rs_kctx *rs_optim_ctx(rs_optim *o) { return o->ctx; }

/* One update of elements [a, b) of the slice with weight decay wd. */
static rs_status update(rs_optim *o, float *p, const float *g, size_t a, size_t b, float lr, float wd)
{
    const rs_opt_cfg *c = &o->cfg;
    if (b <= a) return RS_OK;
    if (c->kind == RS_OPT_SGD)
        return o->k->sgd_update(o->ctx, p + a, g + a, o->nstate ? o->state[0] + a : NULL, b - a, lr, c->momentum,
                                c->dampening, wd, c->nesterov, o->step == 0);
    return o->k->adam_update(o->ctx, p + a, g + a, o->state[0] + a, o->state[1] + a, b - a, lr, c->beta1, c->beta2,
                             c->eps, wd, c->kind == RS_OPT_ADAMW, o->step);
}

rs_status rs_optim_step(rs_optim *o, float *p, const float *g, float lr)
{
    if (!o || !at_least_zero(lr) || (o->n > 0 && (!p || !g))) return RS_ERR_ARG;
    /* A failure still pending on the context (a backward's) means g is not a gradient to apply. */
    rs_status st = rs_kctx_status(o->ctx);
    if (st) return st;
    const rs_opt_cfg *c = &o->cfg;
    /* Adam's bias correction counts steps from 1; SGD's step 0 is the one that creates the momentum
     * buffer from the first gradient, as torch does. */
    if (c->kind != RS_OPT_SGD) o->step++;
    if (o->decay) {
        /* Alternate: no decay up to each range, decay inside it. */
        size_t at = 0;
        for (int i = 0; i < o->ndecay && !st; i++) {
            st = update(o, p, g, at, o->decay[i][0], lr, 0.0f);
            if (!st) st = update(o, p, g, o->decay[i][0], o->decay[i][1], lr, c->weight_decay);
            at = o->decay[i][1];
        }
        if (!st) st = update(o, p, g, at, o->n, lr, 0.0f);
    } else {
        st = update(o, p, g, 0, o->n, lr, c->weight_decay);
    }
    if (c->kind == RS_OPT_SGD) o->step++;
    return st;
}

int rs_optim_state_count(const rs_optim *o) { return o->nstate; }

const char *rs_optim_state_name(const rs_optim *o, int i)
{
    return i >= 0 && i < o->nstate ? o->names[i] : NULL;
}

float *rs_optim_state(rs_optim *o, int i) { return i >= 0 && i < o->nstate ? o->state[i] : NULL; }

int64_t rs_optim_step_count(const rs_optim *o) { return o->step; }

void rs_optim_set_step_count(rs_optim *o, int64_t steps) { o->step = steps > 0 ? steps : 0; }

size_t rs_optim_state_bytes(const rs_optim *o) { return (size_t)o->nstate * o->n * sizeof(float); }

const rs_opt_cfg *rs_optim_cfg(const rs_optim *o) { return &o->cfg; }

size_t rs_optim_numel(const rs_optim *o) { return o->n; }
