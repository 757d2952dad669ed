/* DistributedDataParallel as a training strategy (see dtrain.h). Like torch's DDP: rank 0's initial
 * parameters are broadcast; the flat gradient buffer is cut into buckets of whole layers, in the
 * order backward produces them (last layer first; the first bucket at most 1 MiB, as torch's); each bucket is all-reduced (AVG) as soon as its
 * last layer's backward is done, by a communication thread, so communication overlaps the rest of
 * backward; the optimizer step waits for every bucket and is the same on every rank. With
 * accumulation only the last micro-batch's backward communicates (no_sync for the others). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "engine/core/kernels.h"
#include "engine/optim/optim.h"
#include "registry.h"

rs_dtrain_cfg rs_dtrain_defaults(void)
{
    return (rs_dtrain_cfg){.zero = 0, .bucket_bytes = 25u << 20, .overlap = true, .offload = false};
}

typedef struct ddp_layer {
    size_t first, last; /* the gradient range the layer's backward reports */
    int layer, bucket;
} ddp_layer;

typedef struct ddp_bucket {
    size_t lo, hi;      /* [lo, hi) of the flat gradient buffer */
    int layers, ready;  /* layers in it; reported so far this step */
} ddp_bucket;

typedef struct ddp {
    rs_pg *g;
    rs_model *m;
    rs_dtrain_cfg cfg;
    rs_dtrain_comm_fn comm;
    void *comm_ud;
    rs_optim *opt;
    ddp_layer *layers;  /* (nl) by first offset, ascending */
    int nl;
    ddp_bucket *buckets; /* (nb) bucket 0 is the last layers: the first backward finishes */
    int nb;
    bool armed;         /* this backward communicates (the last micro-batch) */
    int64_t step;
    /* the communication thread and its queue of buckets (indices, in launch order) */
    pthread_t th;
    bool th_started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *queue, qhead, qtail, done;
    rs_status st;
    rs_err err;
} ddp;

static void comm_span(ddp *d, const char *op, int index, size_t bytes, double t0, double t1)
{
    if (d->comm) d->comm(d->comm_ud, d->step, op, index, bytes, t0, t1);
}

static rs_status all_reduce_bucket(ddp *d, int b, rs_err *err)
{
    ddp_bucket *k = &d->buckets[b];
    double t0 = rs_train_now();
    rs_status st = rs_pg_all_reduce(d->g, rs_model_grads(d->m) + k->lo, k->hi - k->lo, RS_F32, RS_AVG, err);
    comm_span(d, "all_reduce", b, (k->hi - k->lo) * sizeof(float), t0, rs_train_now());
    return st;
}

/* The communication thread: all-reduces buckets in the order they were queued. It is the only user of
 * the process group while a backward runs; the main thread waits for it before touching the group. */
static void *comm_main(void *arg)
{
    ddp *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && d->qhead == d->qtail) pthread_cond_wait(&d->cv, &d->mu);
        if (d->stop) break;
        int b = d->queue[d->qhead++];
        bool failed = d->st != RS_OK;
        pthread_mutex_unlock(&d->mu);
        rs_err e = {0};
        rs_status st = failed ? RS_OK : all_reduce_bucket(d, b, &e);
        pthread_mutex_lock(&d->mu);
        if (st && !d->st) {
            d->st = st;
            d->err = e;
        }
        d->done++;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static int layer_of(const ddp *d, size_t first)
{
    int lo = 0, hi = d->nl - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (d->layers[mid].first == first) return mid;
        if (d->layers[mid].first < first) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static void sync_model(ddp *d)
{
    if (rs_model_device(d->m).kind != RS_DEV_CPU) rs_model_kernels(d->m)->sync(rs_model_ctx(d->m));
}

/* Backward finished a layer: when its bucket is complete, hand it to the communication thread. */
static void on_grad_ready(void *ud, size_t offset, size_t numel)
{
    ddp *d = ud;
    (void)numel;
    if (!d->armed) return;
    int l = layer_of(d, offset);
    if (l < 0) return;
    ddp_bucket *k = &d->buckets[d->layers[l].bucket];
    if (++k->ready < k->layers || !d->cfg.overlap) return;
    /* On a GPU the layer's kernels were only queued: the bucket is read by another stream (NCCL's) once
     * they are done. Synced here, on the thread whose device and stream the model's are. */
    sync_model(d);
    pthread_mutex_lock(&d->mu);
    d->queue[d->qtail++] = d->layers[l].bucket;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static int cmp_layer(const void *a, const void *b)
{
    const ddp_layer *x = a, *y = b;
    return (x->first > y->first) - (x->first < y->first);
}

/* Buckets of whole layers, walking from the last layer back, each closed once it holds bucket_bytes
 * (torch closes its buckets the same way, in reverse order of the parameters). */
static rs_status make_buckets(ddp *d, rs_err *err)
{
    rs_model *m = d->m;
    int L = rs_model_layer_count(m);
    d->layers = calloc((size_t)L + 1, sizeof *d->layers);
    d->buckets = calloc((size_t)L + 1, sizeof *d->buckets);
    d->queue = calloc((size_t)L + 1, sizeof *d->queue);
    if (!d->layers || !d->buckets || !d->queue) return rs_err_set(err, RS_ERR_NOMEM, "ddp: out of memory");
    /* a layer's gradient range: its first tensor's offset to its last tensor's end, as the hook reports */
    for (int t = 0; t < rs_model_tensor_count(m); t++) {
        const rs_param_info *p = rs_model_tensor(m, t);
        int i;
        for (i = 0; i < d->nl; i++)
            if (d->layers[i].layer == p->layer) break;
        if (i == d->nl) {
            d->layers[d->nl++] = (ddp_layer){.first = p->offset, .last = p->offset + p->numel, .layer = p->layer};
        } else {
            if (p->offset < d->layers[i].first) d->layers[i].first = p->offset;
            if (p->offset + p->numel > d->layers[i].last) d->layers[i].last = p->offset + p->numel;
        }
    }
    qsort(d->layers, (size_t)d->nl, sizeof *d->layers, cmp_layer);
    /* torch caps the first bucket at 1 MiB so that communication starts early in backward */
    size_t cap = d->cfg.bucket_bytes / sizeof(float), first = (1u << 20) / sizeof(float);
    if (cap == 0) cap = 1;
    if (first > cap) first = cap;
    d->nb = 0;
    for (int i = d->nl - 1; i >= 0; i--) {
        ddp_bucket *k = d->nb ? &d->buckets[d->nb - 1] : NULL;
        if (!k || k->hi - k->lo >= (d->nb == 1 ? first : cap)) {
            k = &d->buckets[d->nb++];
            *k = (ddp_bucket){.lo = d->layers[i].first, .hi = d->layers[i].last};
        }
        k->lo = d->layers[i].first;
        k->layers++;
        d->layers[i].bucket = (int)(k - d->buckets);
    }
    return RS_OK;
}

static rs_status ddp_setup(void *ud, rs_model *m, const rs_opt_cfg *opt, rs_err *err)
{
    ddp *d = ud;
    /* every rank starts from rank 0's weights, as DDP's constructor broadcasts them */
    double t0 = rs_train_now();
    rs_status st = rs_pg_broadcast(d->g, rs_model_params(m), rs_model_numel(m), RS_F32, 0, err);
    comm_span(d, "broadcast", -1, rs_model_numel(m) * sizeof(float), t0, rs_train_now());
    if (st) return st;
    d->opt = rs_optim_new(opt, rs_model_device(m), rs_model_numel(m), rs_model_mem(m), err);
    if (!d->opt) return err ? err->code : RS_ERR_NOMEM;
    rs_optim_set_ctx(d->opt, rs_model_ctx(m)); /* the model's threads, tuned or set, for the update too */
    st = rs_train_apply_groups(d->opt, m, 0, err);
    if (st) return st;
    st = make_buckets(d, err);
    if (st) return st;
    rs_model_set_grad_hook(m, on_grad_ready, d);
    if (d->cfg.overlap && d->g->world > 1) {
        d->g->polite = true; /* the thread shares the cores with backward: waiting must not spin */
        if (pthread_create(&d->th, NULL, comm_main, d) != 0)
            return rs_err_set(err, RS_ERR_IO, "ddp: cannot start the communication thread");
        d->th_started = true;
    }
    return RS_OK;
}

static rs_status ddp_before_backward(void *ud, bool last, rs_err *err)
{
    ddp *d = ud;
    (void)err;
    d->armed = last;
    if (last) {
        for (int b = 0; b < d->nb; b++) d->buckets[b].ready = 0;
        pthread_mutex_lock(&d->mu);
        d->qhead = d->qtail = d->done = 0;
        pthread_mutex_unlock(&d->mu);
    }
    return RS_OK;
}

/* Waits for the buckets still in flight (all of them when nothing overlapped) and reports the wait. */
static rs_status ddp_after_backward(void *ud, rs_err *err)
{
    ddp *d = ud;
    d->armed = false;
    if (d->g->world == 1) return RS_OK;
    sync_model(d); /* the gradients of the buckets sent from here (see on_grad_ready) */
    if (!d->th_started) {
        for (int b = 0; b < d->nb; b++) {
            rs_status st = all_reduce_bucket(d, b, err);
            if (st) return st;
        }
        return RS_OK;
    }
    pthread_mutex_lock(&d->mu);
    /* buckets whose layers the hook never saw (none, unless a layer skipped backward) go now */
    for (int b = 0; b < d->nb; b++)
        if (d->buckets[b].ready < d->buckets[b].layers) {
            d->buckets[b].ready = d->buckets[b].layers;
            d->queue[d->qtail++] = b;
            pthread_cond_signal(&d->cv);
        }
    while (d->done < d->qtail) pthread_cond_wait(&d->cv, &d->mu);
    rs_status st = d->st;
    if (st) *err = d->err;
    pthread_mutex_unlock(&d->mu);
    return st;
}

static rs_status ddp_step(void *ud, float lr, rs_err *err)
{
    ddp *d = ud;
    rs_status st = rs_optim_step(d->opt, rs_model_params(d->m), rs_model_grads(d->m), lr);
    if (st && rs_kctx_check(rs_optim_ctx(d->opt), err)) return rs_err_prefix(err, "ddp: optimizer step");
    if (st) return rs_err_set(err, st, "ddp: optimizer step at lr %g failed", (double)lr);
    d->step++;
    return RS_OK;
}

static rs_optim *ddp_optimizer(void *ud) { return ((ddp *)ud)->opt; }

static void ddp_free(ddp *d)
{
    if (d->th_started) {
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->th, NULL);
    }
    d->g->polite = false;
    rs_model_set_grad_hook(d->m, NULL, NULL);
    rs_optim_free(d->opt);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d->layers);
    free(d->buckets);
    free(d->queue);
    free(d);
}

static void ddp_teardown(void *ud) { ddp_free(ud); }

rs_status rs_ddp_strategy(rs_pg *g, rs_model *m, const rs_dtrain_cfg *cfg, rs_dtrain_comm_fn comm, void *comm_ud,
                          rs_train_strategy *out, rs_err *err)
{
    if (!g || !m) return rs_err_set(err, RS_ERR_ARG, "ddp: needs a process group and a model");
    ddp *d = calloc(1, sizeof *d);
    if (!d) return rs_err_set(err, RS_ERR_NOMEM, "ddp: out of memory");
    d->g = g;
    d->m = m;
    d->cfg = cfg ? *cfg : rs_dtrain_defaults();
    if (!d->cfg.bucket_bytes) d->cfg.bucket_bytes = 25u << 20;
    d->comm = comm;
    d->comm_ud = comm_ud;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    *out = (rs_train_strategy){.name = "ddp", .ud = d, .rank = g->rank, .world = g->world, .report = g->rank == 0,
                               .setup = ddp_setup, .before_backward = ddp_before_backward,
                               .after_backward = ddp_after_backward, .step = ddp_step, .optimizer = ddp_optimizer,
                               .teardown = ddp_teardown};
    return RS_OK;
}

/* ---- the registry's entry (registry.h) ---- */

static const rs_strategy_opt ddp_opts[] = {
    {"bucket", RS_SOPT_SIZE, "25M", "ddp: gradient bucket size", NULL, 1024, 4294967296.0},
    {"overlap", RS_SOPT_BOOL, "on", "ddp: all-reduce buckets during backward", NULL, 0, -1},
    {NULL, 0, NULL, NULL, NULL, 0, 0},
};

static rs_status ddp_make(const rs_strategy_ctx *x, rs_train_strategy *out, rs_err *err)
{
    rs_dtrain_cfg c = rs_dtrain_defaults();
    c.bucket_bytes = (size_t)rs_strategy_size(x->args, "bucket");
    c.overlap = rs_strategy_bool(x->args, "overlap");
    return rs_ddp_strategy(x->g, x->m, &c, x->comm, x->comm_ud, out, err);
}

const rs_strategy_def rs_strategy_ddp = {
    .name = "ddp", .kind = "rank processes",
    .about = "DistributedDataParallel: gradients all-reduced in buckets during backward",
    .uses = RS_SUSE_RANKS | RS_SUSE_PROCS, .opts = ddp_opts, .make = ddp_make,
};
