/* mode=dp (see dp.h): nn.DataParallel's step, replicate -> scatter -> parallel compute -> gather ->
 * reduce, on threads of one process. The worker threads start once in rs_dp_new and wait on a
 * condition variable between micro-batches, so a step creates no thread and allocates nothing after
 * the first one (which sizes the replicas' activations and the gather buffer).
 *
 * Threads: a replica runs with one thread (its kernel context's count), as nn.DataParallel puts one
 * replica on each device; n replicas with k threads each would oversubscribe the cores. Replicas 1..
 * have contexts of one thread from the start; replica 0 is the model itself, whose context drops to
 * one thread for the compute phase only and keeps the loop's count for the reduce, the optimizer and
 * evaluation. Contexts are per model, so nothing process-wide changes (engine/cpu/cpu_scope.h). */
#include "dp.h"

#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/kernels.h"
#include "engine/nn/spec.h"

/* One replica's share of the current micro-batch and what came back. */
typedef struct dp_part {
    int off, rows;       /* rows [off, off + rows) of the micro-batch */
    float loss;          /* mean over its rows */
    const float *logits; /* (rows, T * C) in the replica, valid until its next forward */
    double t0, t1;       /* compute span */
    rs_status st;
    rs_err err;
} dp_part;

struct rs_dp {
    rs_model *m;          /* borrowed: replica 0 */
    int n;                /* replicas */
    rs_model **rep;       /* (n): rep[0] = m, rep[1..] owned, each with its own tracker */
    dp_part *part;        /* (n) */
    pthread_t *th;        /* (n): th[0] unused (replica 0 is the calling thread) */
    int started;          /* worker threads running: 1..started-1 */
    rs_dp_phase_fn fn;
    void *fn_ud;
    rs_train_strategy sg;
    rs_optim *opt;        /* over m's whole buffer, in m's tracker; setup..teardown */
    rs_mem mem;           /* DataParallel's own buffers */
    float *logits;        /* (cap_B, rows * C) gathered outputs, in mem's RS_POOL_ACTS */
    int cap_B;

    /* The micro-batch the workers read; written before `gen` moves, under mu. */
    const float *x;       /* (B, in) */
    const int32_t *y;     /* (B) */
    int B;
    float loss_scale;

    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;         /* bumped once per micro-batch: workers run when it changes */
    int pending;          /* workers still computing the current micro-batch */
    bool quit;
};

const char *rs_dp_phase_name(rs_dp_phase p)
{
    static const char *const n[RS_DP_PHASE_COUNT] = {"replicate", "scatter", "compute", "gather", "reduce"};
    return (unsigned)p < RS_DP_PHASE_COUNT ? n[p] : "?";
}

static void span(const rs_dp *d, int64_t step, rs_dp_phase p, int replica, double t0, double t1)
{
    if (d->fn) d->fn(d->fn_ud, step, p, replica, t0, t1);
}

/* Forward, loss and backward of replica i on its rows. Replica 0 accumulates straight into m's
 * gradients (the loop zeroed them at the first micro-batch); the others start from zero and are
 * added in by the reduce. loss_scale * rows/B makes each replica's gradient its share of the
 * gradient of the mean over all B rows. */
static void compute(rs_dp *d, int i)
{
    dp_part *p = &d->part[i];
    rs_model *r = d->rep[i];
    p->t0 = rs_train_now();
    p->st = RS_OK;
    p->loss = 0;
    if (i > 0) rs_model_zero_grad(r); /* a failure surfaces at the forward */
    if (p->rows > 0) {
        const float *x = d->x + (size_t)p->off * (size_t)rs_shape_numel(rs_model_input_shape(r));
        const int32_t *y = d->y + (size_t)p->off * (size_t)rs_model_rows(r); /* a token model: T labels a sample */
        p->st = rs_model_forward(r, x, p->rows, &p->logits, &p->err);
        if (!p->st) p->st = rs_model_loss(r, y, p->rows, &p->loss, &p->err);
        if (!p->st) rs_model_backward(r, x, y, p->rows, d->loss_scale * (float)p->rows / (float)d->B);
        if (!p->st) p->st = rs_kctx_check(rs_model_ctx(r), &p->err);
    }
    p->t1 = rs_train_now();
}

static void *worker(void *arg)
{
    rs_dp *d = ((void **)arg)[0];
    int i = (int)(intptr_t)((void **)arg)[1];
    free(arg);
    uint64_t seen = 0;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->gen == seen && !d->quit) pthread_cond_wait(&d->go, &d->mu);
        if (d->quit) break;
        seen = d->gen;
        pthread_mutex_unlock(&d->mu);
        compute(d, i);
        pthread_mutex_lock(&d->mu);
        if (--d->pending == 0) pthread_cond_signal(&d->done);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static rs_status dp_setup(void *ud, rs_model *m, const rs_opt_cfg *opt, rs_err *err)
{
    rs_dp *d = ud;
    if (m != d->m)
        return rs_err_set(err, RS_ERR_ARG, "dp: the strategy was made for model %s but trains %s; make it with "
                          "rs_dp_new for this model", rs_model_name(d->m), rs_model_name(m));
    rs_optim_free(d->opt);
    d->opt = rs_optim_new(opt, rs_model_device(m), rs_model_numel(m), rs_model_mem(m), err);
    if (!d->opt) return err ? err->code : RS_ERR_NOMEM;
    rs_optim_set_ctx(d->opt, rs_model_ctx(m)); /* the loop's threads, not a replica's */
    return rs_train_apply_groups(d->opt, m, 0, err);
}

static rs_status dp_forward_backward(void *ud, const float *x, const int32_t *y, int B, float loss_scale,
                                     float *loss, const float **logits, rs_err *err)
{
    rs_dp *d = ud;
    rs_model *m = d->m;
    const rs_kernels *k = rs_model_kernels(m);
    rs_kctx *kc = rs_model_ctx(m);
    size_t numel = rs_model_numel(m);
    int C = rs_model_classes(m) * rs_model_rows(m); /* scores per sample: T rows of them for a token model */
    int64_t step = d->opt ? rs_optim_step_count(d->opt) : 0; /* restored by a resume, like the loop's */
    if (B < 1) return rs_err_set(err, RS_ERR_ARG, "dp: empty micro-batch");
    if (B > d->cap_B) { /* first micro-batch (or a larger one): the only allocation of a run */
        float *nl = rs_mem_alloc(&d->mem, RS_POOL_ACTS, (size_t)B * C * sizeof *nl);
        if (!nl) return rs_err_set(err, RS_ERR_NOMEM, "dp: out of memory gathering %d x %d logits", B, C);
        rs_mem_free(&d->mem, RS_POOL_ACTS, d->logits, (size_t)d->cap_B * C * sizeof *d->logits);
        d->logits = nl;
        d->cap_B = B;
    }

    /* (1) replicate: every replica starts from m's parameters, in m's mode. Dropout: each replica
     * takes m's step count (m itself advances once per micro-batch, as in one process, so checkpoints
     * and resumes count the same) and a seed of its own, so replicas draw independent masks. The
     * masks are not those of one process: a mask is hashed from the element's index in the whole
     * batch, and a replica sees its rows from index 0. Matching them would need a row offset in the
     * model's forward; until then dp with dropout trains like one process in distribution only. */
    double t0 = rs_train_now();
    const float *pm = rs_model_params(m);
    bool training = rs_model_training(m);
    uint64_t mstep = rs_model_step(m), mseed = rs_model_seed(m);
    for (int i = 1; i < d->n; i++) {
        if (k->copy_d2d(kc, rs_model_params(d->rep[i]), pm, numel * sizeof(float)))
            return rs_kctx_check(kc, err);
        rs_model_set_training(d->rep[i], training);
        rs_model_set_seed(d->rep[i], mseed + (uint64_t)i * 0x9e3779b97f4a7c15ULL);
        rs_model_set_step(d->rep[i], mstep);
        rs_model_ctx(d->rep[i])->prec = kc->prec; /* the run's precision (the loop set m's) */
    }
    double t1 = rs_train_now();
    span(d, step, RS_DP_REPLICATE, -1, t0, t1);

    /* (2) scatter: contiguous row ranges, sizes within one of each other (the first B % n get one
     * more). The replicas share this process's memory, so a range is a pointer, not a copy. */
    int base = B / d->n, extra = B % d->n;
    for (int i = 0, off = 0; i < d->n; i++) {
        d->part[i].off = off;
        d->part[i].rows = base + (i < extra);
        off += d->part[i].rows;
    }
    double t2 = rs_train_now();
    span(d, step, RS_DP_SCATTER, -1, t1, t2);

    /* (3) compute: wake the workers, run replica 0 here, wait for the rest. */
    /* Replica 0 computes with one thread too. */
    int prev_threads = rs_kctx_threads(kc);
    rs_kctx_set_threads(kc, 1);
    pthread_mutex_lock(&d->mu);
    d->x = x;
    d->y = y;
    d->B = B;
    d->loss_scale = loss_scale;
    d->pending = d->n - 1;
    d->gen++;
    pthread_cond_broadcast(&d->go);
    pthread_mutex_unlock(&d->mu);
    compute(d, 0);
    pthread_mutex_lock(&d->mu);
    while (d->pending > 0) pthread_cond_wait(&d->done, &d->mu);
    pthread_mutex_unlock(&d->mu);
    rs_kctx_set_threads(kc, prev_threads);
    for (int i = 0; i < d->n; i++) span(d, step, RS_DP_COMPUTE, i, d->part[i].t0, d->part[i].t1);
    for (int i = 0; i < d->n; i++)
        if (d->part[i].st) {
            if (err) {
                *err = d->part[i].err;
                rs_err_prefix(err, "dp replica %d of %d", i, d->n);
            }
            return d->part[i].st;
        }

    /* (4) gather: the outputs into one B-row buffer for the loop's accuracy; the mean loss over B is
     * the replicas' means weighted by their rows. */
    double t3 = rs_train_now();
    double lsum = 0;
    for (int i = 0; i < d->n; i++) {
        const dp_part *p = &d->part[i];
        if (!p->rows) continue;
        memcpy(d->logits + (size_t)p->off * C, p->logits, (size_t)p->rows * C * sizeof(float));
        lsum += (double)p->loss * p->rows;
    }
    *loss = (float)(lsum / B);
    *logits = d->logits;
    double t4 = rs_train_now();
    span(d, step, RS_DP_GATHER, -1, t3, t4);

    /* (5) reduce: the other replicas' gradients added into m's, in replica order, on this thread
     * (nn.DataParallel's reduce-add onto device 0). */
    float *gm = rs_model_grads(m);
    for (int i = 1; i < d->n; i++)
        if (d->part[i].rows && k->axpy(kc, gm, rs_model_grads(d->rep[i]), numel, 1.0f))
            return rs_kctx_check(kc, err);
    span(d, step, RS_DP_REDUCE, -1, t4, rs_train_now());
    return RS_OK;
}

static rs_status dp_step(void *ud, float lr, rs_err *err)
{
    rs_dp *d = ud;
    if (!d->opt) return rs_err_set(err, RS_ERR_ARG, "dp: step before setup");
    rs_status st = rs_optim_step(d->opt, rs_model_params(d->m), rs_model_grads(d->m), lr);
    if (st && !rs_kctx_check(rs_optim_ctx(d->opt), err))
        rs_err_set(err, st, "dp: optimizer step with lr=%g failed", (double)lr);
    return st;
}

static rs_optim *dp_optimizer(void *ud) { return ((rs_dp *)ud)->opt; }

static void dp_teardown(void *ud)
{
    rs_dp *d = ud;
    rs_optim_free(d->opt);
    d->opt = NULL;
}

rs_status rs_dp_new(rs_model *m, int replicas, rs_dp_phase_fn fn, void *ud, rs_dp **out, rs_err *err)
{
    *out = NULL;
    if (!m || !rs_model_params(m)) return rs_err_set(err, RS_ERR_ARG, "dp: the model is not built");
    if (rs_model_check_trainable(m, err)) return err ? err->code : RS_ERR_UNSUPPORTED;
    if (replicas < 1 || replicas > RS_DP_MAX_REPLICAS)
        return rs_err_set(err, RS_ERR_ARG, "dp: replicas must be 1..%d, got %d", RS_DP_MAX_REPLICAS, replicas);
    rs_dp *d = calloc(1, sizeof *d); /* owned by the caller via *out; rs_dp_free releases it */
    if (!d) return rs_err_set(err, RS_ERR_NOMEM, "dp: out of memory");
    d->m = m;
    d->n = replicas;
    d->fn = fn;
    d->fn_ud = ud;
    d->started = 1;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->go, NULL);
    pthread_cond_init(&d->done, NULL);
    d->rep = calloc((size_t)replicas, sizeof *d->rep);     /* freed in rs_dp_free */
    d->part = calloc((size_t)replicas, sizeof *d->part);
    d->th = calloc((size_t)replicas, sizeof *d->th);
    char *spec = rs_model_spec(m); /* freed below */
    rs_status st = RS_OK;
    if (!d->rep || !d->part || !d->th || !spec) {
        st = rs_err_set(err, RS_ERR_NOMEM, "dp: out of memory");
        goto fail;
    }
    d->rep[0] = m;
    for (int i = 1; i < replicas; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.replica%d", rs_model_name(m), i);
        /* mem NULL: each replica keeps its own tracker, so its bytes are counted apart from m's */
        st = rs_model_parse(spec, name, rs_model_device(m), NULL, rs_model_seed(m), &d->rep[i], NULL, err);
        if (st) {
            rs_err_prefix(err, "dp: building replica %d from '%s'", i, spec);
            goto fail;
        }
        rs_model_set_threads(d->rep[i], 1);
        /* The flat layouts must agree offset for offset: the replicate copy and the reduce add are
         * whole-buffer operations. */
        bool same = rs_model_numel(d->rep[i]) == rs_model_numel(m) &&
                    rs_model_tensor_count(d->rep[i]) == rs_model_tensor_count(m);
        for (int t = 0; same && t < rs_model_tensor_count(m); t++)
            same = rs_model_tensor(d->rep[i], t)->offset == rs_model_tensor(m, t)->offset &&
                   rs_model_tensor(d->rep[i], t)->numel == rs_model_tensor(m, t)->numel;
        if (!same) {
            st = rs_err_set(err, RS_ERR_INTERNAL, "dp: replica %d built from '%s' has another parameter layout "
                            "than model %s", i, spec, rs_model_name(m));
            goto fail;
        }
    }
    for (int i = 1; i < replicas; i++) {
        void **arg = malloc(2 * sizeof *arg); /* freed by the worker */
        if (!arg) {
            st = rs_err_set(err, RS_ERR_NOMEM, "dp: out of memory");
            goto fail;
        }
        arg[0] = d;
        arg[1] = (void *)(intptr_t)i;
        int rc = pthread_create(&d->th[i], NULL, worker, arg);
        if (rc) {
            free(arg);
            st = rs_err_set(err, RS_ERR_UNSUPPORTED, "dp: cannot start the thread of replica %d (%s)", i,
                            strerror(rc));
            goto fail;
        }
        d->started = i + 1;
    }
    free(spec);
    d->sg = (rs_train_strategy){.name = "dp", .ud = d, .rank = 0, .world = 1, .report = true,
                                .setup = dp_setup, .forward_backward = dp_forward_backward, .step = dp_step,
                                .optimizer = dp_optimizer, .teardown = dp_teardown};
    *out = d;
    return RS_OK;
fail:
    free(spec);
    rs_dp_free(d);
    return st;
}

const rs_train_strategy *rs_dp_strategy(rs_dp *d) { return &d->sg; }
int rs_dp_replicas(const rs_dp *d) { return d->n; }

void rs_dp_free(rs_dp *d)
{
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->quit = true;
    pthread_cond_broadcast(&d->go);
    pthread_mutex_unlock(&d->mu);
    for (int i = 1; i < d->started; i++) pthread_join(d->th[i], NULL);
    if (d->rep)
        for (int i = 1; i < d->n; i++) rs_model_free(d->rep[i]);
    rs_optim_free(d->opt);
    rs_mem_free(&d->mem, RS_POOL_ACTS, d->logits,
                (size_t)d->cap_B * rs_model_classes(d->m) * rs_model_rows(d->m) * sizeof(float));
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->go);
    pthread_cond_destroy(&d->done);
    free(d->rep);
    free(d->part);
    free(d->th);
    free(d);
}

void rs_dp_replica_mem(const rs_dp *d, rs_mem *sum)
{
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < d->n; i++) {
        /* replica 0 is m: its bytes are m's own; index 0 stands for DataParallel's own tracker */
        const rs_mem *t = i ? rs_model_mem(d->rep[i]) : &d->mem;
        for (int p = 0; p < RS_POOL_COUNT; p++) {
            sum->live[p] += __atomic_load_n(&t->live[p], __ATOMIC_RELAXED);
            sum->peak[p] += __atomic_load_n(&t->peak[p], __ATOMIC_RELAXED);
        }
        sum->live_total += __atomic_load_n(&t->live_total, __ATOMIC_RELAXED);
        sum->peak_total += __atomic_load_n(&t->peak_total, __ATOMIC_RELAXED);
    }
}
