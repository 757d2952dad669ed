/* mode=dp against one process: DataParallel over 1-4 replicas must give one process's gradients, and
 * train an MLP and a CNN to its weights (up to float rounding), with an uneven split, with a replica
 * left without rows, and with gradient accumulation; its phase callback must see every phase of
 * every micro-batch in order; its replicas must hold (replicas-1) copies of the parameters and
 * gradients.
 *
 * Why tolerances and not bit equality: a replica's gradient is a sum over its own rows and the reduce
 * adds those partial sums, so the sum over the batch is rounded in another order than one BLAS product
 * over all rows: a few ulp of the largest term (measured ~4e-7 of each tensor's largest gradient).
 * - Gradients of one step: within 1e-5 of the tensor's largest gradient.
 * - Weights after 20-30 SGD (momentum 0.9) steps: |a-b| <= 1e-5 (|b| + 1e-3) for every weight. SGD is
 *   linear in the gradient, so the rounding stays ~1e-6 of a weight (measured <= 5e-6); the 1e-3
 *   floor covers weights passing near zero, where a relative bound means nothing.
 * - Weights after 20-30 Adam steps: the same bound for 99.9% of the weights, and that bound plus
 *   1e-2 lr for every weight. Adam divides each element's gradient by its own running RMS, so where
 *   that RMS is tiny (input pixels that are almost always background) a rounding difference of 1e-7
 *   of the tensor's largest gradient becomes ~1e-3 lr per step (measured: <= 4 weights of 50896 past
 *   the strict bound, by at most 1.4e-6 = 1.4e-3 lr).
 * A wrong split, scale or reduce (a replica dropped, counted twice, scaled by rows instead of rows/B)
 * breaks the gradient check by O(1) and the weights by ~lr per step; both were tried and fail here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/data.h"
#include "engine/data/gen/digits.h"
#include "engine/nn/spec.h"
#include "engine/train/dp.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

static const char *const MLP = "mlp 784-64-10";
static const char *const CNN = "seq in=1x28x28 conv(4,3,pad=1) relu maxpool(2) flatten linear(10)";
#define MODEL_SEED 11
#define DATA_SEED 5

static rs_model *build(const char *spec)
{
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, MODEL_SEED, &m, NULL, &e) == RS_OK, "%s: %s", spec,
             e.msg);
    return m;
}

static rs_prec run_prec = RS_PREC_FP32; /* the precision of the equivalence runs (bf16: replicas must take it) */

static rs_train_cfg cfg_for(rs_opt_kind opt, int batch, int accum, int steps)
{
    rs_train_cfg c = rs_train_defaults();
    c.precision = run_prec;
    c.opt = rs_opt_defaults(opt);
    if (opt == RS_OPT_SGD) c.opt.momentum = 0.9f;
    c.batch = batch;
    c.accum = accum;
    c.max_steps = steps;
    c.epochs = 3;
    c.eval = false;
    c.threads = 2; /* the dp step lowers it to 1 per replica and must put it back */
    c.seed = DATA_SEED;
    return c;
}

/* Compares weights with the bounds explained at the top; prints the first few misses and the max. */
static void check_close(rs_model *dp, rs_model *ref, rs_opt_kind opt, const char *what)
{
    const float *a = rs_model_params(dp), *b = rs_model_params(ref);
    size_t n = rs_model_numel(ref), strict_miss = 0, bad = 0;
    double maxrel = 0, maxabs = 0;
    /* Adam: a floor of 1e-2 lr per weight for the elements whose own gradient is rounding-sized */
    double floor = opt == RS_OPT_SGD ? 0 : 1e-2 * rs_opt_defaults(opt).lr;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]), strict = 1e-5 * (fabs(b[i]) + 1e-3);
        double rel = d / (fabs(b[i]) + 1e-3);
        if (rel > maxrel) maxrel = rel;
        if (d > maxabs) maxabs = d;
        if (d > strict) strict_miss++;
        if (d > strict + floor && bad++ < 5)
            fprintf(stderr, "  %s: param[%zu] dp %.9g single %.9g\n", what, i, a[i], b[i]);
    }
    printf("%-46s %6zu weights, max |a-b|/(|b|+1e-3) %.1e, max |a-b| %.1e, %zu beyond 1e-5 (|b|+1e-3)\n", what, n,
           maxrel, maxabs, strict_miss);
    RS_CHECK(bad == 0, "%s: %zu of %zu weights differ beyond 1e-5 (|b| + 1e-3) + %g", what, bad, n, floor);
    /* Adam's floor is for the few elements with rounding-sized gradients, not for the model */
    RS_CHECK(strict_miss * 1000 <= n, "%s: %zu of %zu weights differ beyond 1e-5 (|b| + 1e-3)", what, strict_miss,
             n);
}

typedef struct span_log {
    int n, cap;
    struct { int64_t step; rs_dp_phase p; int replica; double t0, t1; } *e;
} span_log;

static void on_span(void *ud, int64_t step, rs_dp_phase p, int replica, double t0, double t1)
{
    span_log *l = ud;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->e = realloc(l->e, (size_t)l->cap * sizeof *l->e);
        if (!l->e) abort();
    }
    l->e[l->n].step = step;
    l->e[l->n].p = p;
    l->e[l->n].replica = replica;
    l->e[l->n].t0 = t0;
    l->e[l->n].t1 = t1;
    l->n++;
}

/* Every micro-batch: replicate, scatter, compute 0..n-1, gather, reduce; steps 0..steps-1 with
 * accum micro-batches each; spans well formed. */
static void check_spans(const span_log *l, int replicas, int steps, int accum, const char *what)
{
    int per = 4 + replicas, want = per * steps * accum, bad = 0;
    RS_CHECK(l->n == want, "%s: %d phase spans, want %d", what, l->n, want);
    for (int i = 0; i < l->n && i < want && bad < 5; i++) {
        int j = i % per, s = i / (per * accum);
        rs_dp_phase p = j == 0 ? RS_DP_REPLICATE : j == 1 ? RS_DP_SCATTER : j < 2 + replicas ? RS_DP_COMPUTE
                        : j == 2 + replicas ? RS_DP_GATHER : RS_DP_REDUCE;
        int r = p == RS_DP_COMPUTE ? j - 2 : -1;
        bool ok = l->e[i].p == p && l->e[i].replica == r && l->e[i].step == s && l->e[i].t1 >= l->e[i].t0;
        if (!ok) {
            bad++;
            RS_CHECK(ok, "%s: span %d is %s replica %d step %lld, want %s replica %d step %d", what, i,
                     rs_dp_phase_name(l->e[i].p), l->e[i].replica, (long long)l->e[i].step, rs_dp_phase_name(p),
                     r, s);
        }
    }
}

/* Trains spec once alone (batch*accum, no accumulation) and once with dp (batch, accum) and
 * compares. Returns nothing; failures are counted. */
static void equivalence(const rs_data_pair *d, rs_opt_kind opt, const char *spec, int replicas, int batch,
                        int accum, int steps, const char *what)
{
    rs_model *ref = build(spec), *m = build(spec);
    if (!ref || !m) goto out;
    rs_err e = {0};
    rs_train_result r1 = {0}, r2 = {0};
    rs_train_cfg c1 = cfg_for(opt, batch * accum, 1, steps);
    RS_CHECK(rs_train(ref, d, &c1, NULL, &r1, &e) == RS_OK, "%s single: %s", what, e.msg);

    span_log log = {0};
    rs_dp *dp = NULL;
    RS_CHECK(rs_dp_new(m, replicas, on_span, &log, &dp, &e) == RS_OK, "%s: rs_dp_new: %s", what, e.msg);
    if (dp) {
        rs_train_cfg c2 = cfg_for(opt, batch, accum, steps);
        c2.strategy = rs_dp_strategy(dp);
        RS_CHECK(rs_train(m, d, &c2, NULL, &r2, &e) == RS_OK, "%s dp: %s", what, e.msg);
        RS_CHECK(r2.steps == steps && r1.steps == steps, "%s: %lld and %lld steps, want %d", what,
                 (long long)r1.steps, (long long)r2.steps, steps);
        RS_CHECK_CLOSE(r2.train_loss, r1.train_loss, 1e-5, 1e-4, "mean training loss");
        /* one training forward per micro-batch on m, as in one process: dropout and checkpoints count on it */
        RS_CHECK(rs_model_step(m) == (uint64_t)steps * accum, "%s: model step %llu, want %d", what,
                 (unsigned long long)rs_model_step(m), steps * accum);
        check_close(m, ref, opt, what);
        check_spans(&log, replicas, steps, accum, what);
        /* the model's context is back to the loop's setting after each step */
        RS_CHECK(rs_model_threads(m) == 2, "%s: %d threads on the model's context after training, want 2", what,
                 rs_model_threads(m));
    }
    rs_dp_free(dp);
    free(log.e);
out:
    rs_model_free(ref);
    rs_model_free(m);
}

/* The gathered scores against one process's: within 1e-5 of the largest (ldp NULL: none came back). */
static void check_logits(const float *ldp, const float *lref, size_t n, const char *what)
{
    double lmax = 0, ldiff = 0;
    for (size_t i = 0; ldp && i < n; i++) {
        lmax = fmax(lmax, fabs(lref[i]));
        ldiff = fmax(ldiff, fabs((double)ldp[i] - lref[i]));
    }
    RS_CHECK(ldp && ldiff <= 1e-5 * lmax, "%s: gathered logits differ by %.3g (largest %.3g)", what, ldiff, lmax);
}

/* Each tensor's gradient against one process's: within 1e-5 of the tensor's largest. */
static void check_grads(rs_model *m, rs_model *ref, const char *what)
{
    double worst = 0;
    for (int t = 0; t < rs_model_tensor_count(m); t++) {
        const rs_param_info *pi = rs_model_tensor(m, t);
        const float *ga = rs_model_grads(m) + pi->offset, *gb = rs_model_grads(ref) + pi->offset;
        double gmax = 0, dmax = 0;
        for (size_t i = 0; i < pi->numel; i++) {
            gmax = fmax(gmax, fabs(gb[i]));
            dmax = fmax(dmax, fabs((double)ga[i] - gb[i]));
        }
        worst = fmax(worst, gmax > 0 ? dmax / gmax : dmax);
        RS_CHECK(dmax <= 1e-5 * gmax, "%s: gradient of %s differs by %.3g (largest %.3g)", what, pi->name, dmax, gmax);
    }
    printf("%-46s gradients within %.1e of each tensor's largest\n", what, worst);
}

/* One step's gradient, the strategy called as the loop calls it: accum micro-batches of B rows
 * through forward_backward (each loss scaled by 1/accum) against one backward over all B*accum rows.
 * Rounding in a sum of B terms is a few ulp of the largest term, so each tensor is compared to 1e-5
 * of its own largest gradient (observed: ~4e-7); a missing replica, a double count or a wrong scale
 * is off by O(1) of it. The gathered logits and the mean loss are checked the same way. */
static void gradients(const rs_data_pair *d, const char *spec, int replicas, int B, int accum, const char *what)
{
    rs_model *ref = build(spec), *m = build(spec);
    rs_dp *dp = NULL;
    rs_err e = {0};
    if (!ref || !m) goto out;
    RS_CHECK(rs_dp_new(m, replicas, NULL, NULL, &dp, &e) == RS_OK, "%s: rs_dp_new: %s", what, e.msg);
    if (!dp) goto out;
    const rs_train_strategy *sg = rs_dp_strategy(dp);
    rs_opt_cfg oc = rs_opt_defaults(RS_OPT_ADAM);
    RS_CHECK(sg->setup(sg->ud, m, &oc, &e) == RS_OK, "%s: setup: %s", what, e.msg);
    size_t per = rs_dataset_sample_numel(d->train);
    int C = rs_model_classes(m), N = B * accum;
    const float *lref, *ldp = NULL;
    float loss_ref = 0, loss_dp = 0;
    rs_model_set_training(ref, true);
    rs_model_set_training(m, true);
    RS_CHECK(rs_model_forward(ref, d->train->x, N, &lref, &e) == RS_OK, "%s: %s", what, e.msg);
    RS_CHECK(rs_model_loss(ref, d->train->y, N, &loss_ref, &e) == RS_OK, "%s: %s", what, e.msg);
    rs_model_zero_grad(ref);
    rs_model_backward(ref, d->train->x, d->train->y, N, 1.0f);
    rs_model_zero_grad(m);
    for (int k = 0; k < accum; k++) {
        float l = 0;
        RS_CHECK(sg->forward_backward(sg->ud, d->train->x + (size_t)k * B * per, d->train->y + (size_t)k * B, B,
                                      1.0f / (float)accum, &l, &ldp, &e) == RS_OK, "%s: %s", what, e.msg);
        loss_dp += l / (float)accum;
    }
    RS_CHECK_CLOSE(loss_dp, loss_ref, 0, 1e-6, "mean loss");
    check_logits(ldp, lref + (size_t)(accum - 1) * B * C, (size_t)B * C, what); /* the last micro-batch's rows */
    check_grads(m, ref, what);
    if (sg->teardown) sg->teardown(sg->ud);
out:
    rs_dp_free(dp);
    rs_model_free(ref);
    rs_model_free(m);
}

/* The same for a token model, whose samples carry T labels and T rows of scores each (mode=dp once
 * offset a replica's labels by samples, not by T labels a sample, and gathered B rows of scores instead
 * of B*T: wrong labels, and a read past the buffer). Text windows are made on demand, so the batch is
 * fetched first. */
static void text_gradients(const rs_data_pair *d, const char *spec, int replicas, int B, const char *what)
{
    rs_model *ref = build(spec), *m = build(spec);
    rs_dp *dp = NULL;
    rs_err e = {0};
    int T = d->train->y_len;
    int32_t *x = calloc((size_t)B * T, sizeof *x), *y = calloc((size_t)B * T, sizeof *y);
    if (!ref || !m || !x || !y) goto out;
    for (int i = 0; i < B; i++) rs_dataset_get(d->train, (uint32_t)(i * 37), x + (size_t)i * T, y + (size_t)i * T);
    RS_CHECK(rs_dp_new(m, replicas, NULL, NULL, &dp, &e) == RS_OK, "%s: rs_dp_new: %s", what, e.msg);
    if (!dp) goto out;
    const rs_train_strategy *sg = rs_dp_strategy(dp);
    rs_opt_cfg oc = rs_opt_defaults(RS_OPT_ADAMW);
    RS_CHECK(sg->setup(sg->ud, m, &oc, &e) == RS_OK, "%s: setup: %s", what, e.msg);
    const float *xf = (const float *)(const void *)x, *lref = NULL, *ldp = NULL;
    float loss_ref = 0, loss_dp = 0;
    RS_CHECK(rs_model_forward(ref, xf, B, &lref, &e) == RS_OK, "%s: %s", what, e.msg);
    RS_CHECK(rs_model_loss(ref, y, B, &loss_ref, &e) == RS_OK, "%s: %s", what, e.msg);
    rs_model_zero_grad(ref);
    rs_model_backward(ref, xf, y, B, 1.0f);
    rs_model_zero_grad(m);
    RS_CHECK(sg->forward_backward(sg->ud, xf, y, B, 1.0f, &loss_dp, &ldp, &e) == RS_OK, "%s: %s", what, e.msg);
    RS_CHECK_CLOSE(loss_dp, loss_ref, 0, 1e-6, "mean loss per token");
    check_logits(ldp, lref, (size_t)B * T * rs_model_classes(m), what); /* B*T rows of scores */
    check_grads(m, ref, what);
    if (sg->teardown) sg->teardown(sg->ud);
out:
    rs_dp_free(dp);
    rs_model_free(ref);
    rs_model_free(m);
    free(x);
    free(y);
}

static void memory(const char *spec, int replicas)
{
    rs_model *m = build(spec);
    if (!m) return;
    rs_dp *dp = NULL;
    rs_err e = {0};
    RS_CHECK(rs_dp_new(m, replicas, NULL, NULL, &dp, &e) == RS_OK, "rs_dp_new: %s", e.msg);
    if (dp) {
        rs_mem s;
        rs_dp_replica_mem(dp, &s);
        const rs_mem *mm = rs_model_mem(m);
        int64_t pb = mm->live[RS_POOL_PARAMS], gb = mm->live[RS_POOL_GRADS];
        printf("%-34s m: params %lld B, grads %lld B; %d replicas beyond m: params %lld B, grads %lld B\n", spec,
               (long long)pb, (long long)gb, replicas - 1, (long long)s.live[RS_POOL_PARAMS],
               (long long)s.live[RS_POOL_GRADS]);
        RS_CHECK(pb > 0 && s.live[RS_POOL_PARAMS] == (replicas - 1) * pb, "params %lld, want %d x %lld",
                 (long long)s.live[RS_POOL_PARAMS], replicas - 1, (long long)pb);
        RS_CHECK(s.live[RS_POOL_GRADS] == (replicas - 1) * gb, "grads %lld, want %d x %lld",
                 (long long)s.live[RS_POOL_GRADS], replicas - 1, (long long)gb);
        RS_CHECK(s.live[RS_POOL_OPTIM] == 0, "replicas hold optimizer state (%lld B)", (long long)s.live[RS_POOL_OPTIM]);
    }
    rs_dp_free(dp);
    rs_model_free(m);
}

/* Activations appear in the replicas' trackers once they have run a step. */
static void memory_after_step(const rs_data_pair *d)
{
    rs_model *m = build(MLP);
    if (!m) return;
    rs_dp *dp = NULL;
    rs_err e = {0};
    RS_CHECK(rs_dp_new(m, 2, NULL, NULL, &dp, &e) == RS_OK, "rs_dp_new: %s", e.msg);
    if (dp) {
        rs_train_cfg c = cfg_for(RS_OPT_ADAM, 32, 1, 2);
        c.strategy = rs_dp_strategy(dp);
        RS_CHECK(rs_train(m, d, &c, NULL, NULL, &e) == RS_OK, "dp: %s", e.msg);
        rs_mem s;
        rs_dp_replica_mem(dp, &s);
        RS_CHECK(s.live[RS_POOL_ACTS] > 0, "no activation bytes in the replicas after a step");
    }
    rs_dp_free(dp);
    rs_model_free(m);
}

/* Dropout: masks differ from one process's (dp.c says why), so only the bookkeeping is checked: it
 * trains, and m's step counter (which seeds the masks and goes into checkpoints) counts micro-batches
 * as in one process. */
static void dropout(const rs_data_pair *d)
{
    static const char *const spec = "mlp 784-64-10 dropout=0.3";
    rs_model *m1 = build(spec), *m3 = build(spec);
    rs_dp *dp1 = NULL, *dp3 = NULL;
    rs_err e = {0};
    if (!m1 || !m3) goto out;
    RS_CHECK(rs_dp_new(m1, 1, NULL, NULL, &dp1, &e) == RS_OK, "rs_dp_new: %s", e.msg);
    RS_CHECK(rs_dp_new(m3, 3, NULL, NULL, &dp3, &e) == RS_OK, "rs_dp_new: %s", e.msg);
    if (!dp1 || !dp3) goto out;
    rs_train_cfg c = cfg_for(RS_OPT_ADAM, 32, 2, 5);
    c.strategy = rs_dp_strategy(dp1);
    RS_CHECK(rs_train(m1, d, &c, NULL, NULL, &e) == RS_OK, "dp 1 with dropout: %s", e.msg);
    c.strategy = rs_dp_strategy(dp3);
    RS_CHECK(rs_train(m3, d, &c, NULL, NULL, &e) == RS_OK, "dp 3 with dropout: %s", e.msg);
    RS_CHECK(rs_model_step(m3) == 10, "model step %llu after 5 steps of 2 micro-batches, want 10",
             (unsigned long long)rs_model_step(m3));
    RS_CHECK(rs_model_step(m1) == 10, "model step %llu with 1 replica, want 10", (unsigned long long)rs_model_step(m1));
out:
    rs_dp_free(dp1);
    rs_dp_free(dp3);
    rs_model_free(m1);
    rs_model_free(m3);
}

static void errors(void)
{
    rs_model *m = build(MLP);
    rs_dp *dp = (rs_dp *)1;
    rs_err e = {0};
    RS_CHECK(rs_dp_new(m, 0, NULL, NULL, &dp, &e) == RS_ERR_ARG && !dp, "replicas=0 accepted");
    RS_CHECK(strstr(e.msg, "replicas must be") != NULL, "message: %s", e.msg);
    rs_dp_free(NULL);
    /* a strategy made for one model refuses to train another */
    rs_model *other = build(MLP);
    RS_CHECK(rs_dp_new(m, 2, NULL, NULL, &dp, &e) == RS_OK, "rs_dp_new: %s", e.msg);
    rs_data_pair d = {0};
    RS_CHECK(rs_data_digits_pair(200, 10, DATA_SEED, &d, &e) == RS_OK, "digits: %s", e.msg);
    if (dp && other && d.train) {
        rs_train_cfg c = cfg_for(RS_OPT_ADAM, 32, 1, 1);
        c.strategy = rs_dp_strategy(dp);
        RS_CHECK(rs_train(other, &d, &c, NULL, NULL, &e) == RS_ERR_ARG, "dp trained a model it was not made for");
    }
    /* a replica's error comes back through the strategy, naming the replica */
    if (dp && d.train) {
        const rs_train_strategy *sg = rs_dp_strategy(dp);
        rs_opt_cfg oc = rs_opt_defaults(RS_OPT_SGD);
        int32_t y[4] = {1, 2, 3, 99}; /* row 3 goes to replica 1 */
        float l;
        const float *lg;
        RS_CHECK(sg->setup(sg->ud, m, &oc, &e) == RS_OK, "setup: %s", e.msg);
        rs_model_set_training(m, true);
        RS_CHECK(sg->forward_backward(sg->ud, d.train->x, y, 4, 1.0f, &l, &lg, &e) == RS_ERR_ARG,
                 "label 99 of 10 classes accepted");
        RS_CHECK(strstr(e.msg, "dp replica 1 of 2") && strstr(e.msg, "label 99"), "message: %s", e.msg);
        sg->teardown(sg->ud);
    }
    rs_data_pair_clear(&d);
    rs_dp_free(dp);
    rs_model_free(other);
    rs_model_free(m);
}

int main(void)
{
    rs_data_pair d = {0};
    rs_err e = {0};
    RS_CHECK(rs_data_digits_pair(1600, 100, DATA_SEED, &d, &e) == RS_OK, "digits: %s", e.msg);
    if (!d.train) return rs_test_finish("dp");

    gradients(&d, MLP, 2, 32, 1, "grad mlp, 2 replicas, batch 32");
    gradients(&d, MLP, 3, 31, 1, "grad mlp, 3 replicas, batch 31");
    gradients(&d, MLP, 4, 3, 1, "grad mlp, 4 replicas, batch 3 (1/1/1/0)");
    gradients(&d, CNN, 2, 32, 1, "grad cnn, 2 replicas, batch 32");
    gradients(&d, CNN, 3, 31, 1, "grad cnn, 3 replicas, batch 31");
    gradients(&d, CNN, 3, 16, 3, "grad cnn, 3 replicas, accum 3 x 16");
    gradients(&d, MLP, 1, 32, 1, "grad mlp, 1 replica");
    equivalence(&d, RS_OPT_SGD, MLP, 2, 32, 1, 30, "sgd mlp, 2 replicas, batch 32");
    equivalence(&d, RS_OPT_SGD, MLP, 3, 32, 1, 30, "sgd mlp, 3 replicas, batch 32");
    equivalence(&d, RS_OPT_SGD, CNN, 2, 32, 1, 30, "sgd cnn, 2 replicas, batch 32");
    equivalence(&d, RS_OPT_SGD, CNN, 3, 32, 1, 30, "sgd cnn, 3 replicas, batch 32");
    equivalence(&d, RS_OPT_SGD, MLP, 3, 31, 1, 30, "sgd mlp, 3 replicas, batch 31 (11/10/10)");
    equivalence(&d, RS_OPT_SGD, CNN, 3, 31, 1, 30, "sgd cnn, 3 replicas, batch 31 (11/10/10)");
    equivalence(&d, RS_OPT_SGD, MLP, 3, 2, 1, 20, "sgd mlp, 3 replicas, batch 2 (1/1/0)");
    equivalence(&d, RS_OPT_SGD, MLP, 2, 32, 2, 20, "sgd mlp, 2 replicas, accum 2 vs batch 64");
    equivalence(&d, RS_OPT_SGD, CNN, 3, 32, 2, 20, "sgd cnn, 3 replicas, accum 2 vs batch 64");
    equivalence(&d, RS_OPT_ADAM, MLP, 2, 32, 1, 30, "adam mlp, 2 replicas, batch 32");
    equivalence(&d, RS_OPT_ADAM, MLP, 3, 32, 1, 30, "adam mlp, 3 replicas, batch 32");
    equivalence(&d, RS_OPT_ADAM, CNN, 2, 32, 1, 30, "adam cnn, 2 replicas, batch 32");
    equivalence(&d, RS_OPT_ADAM, CNN, 3, 32, 1, 30, "adam cnn, 3 replicas, batch 32");
    equivalence(&d, RS_OPT_ADAM, MLP, 3, 31, 1, 30, "adam mlp, 3 replicas, batch 31 (11/10/10)");
    equivalence(&d, RS_OPT_ADAM, CNN, 3, 31, 1, 30, "adam cnn, 3 replicas, batch 31 (11/10/10)");
    equivalence(&d, RS_OPT_ADAM, MLP, 3, 2, 1, 20, "adam mlp, 3 replicas, batch 2 (1/1/0)");
    equivalence(&d, RS_OPT_ADAM, MLP, 2, 32, 2, 20, "adam mlp, 2 replicas, accum 2 vs batch 64");
    run_prec = RS_PREC_BF16; /* every replica computes in bf16, as one bf16 process does */
    equivalence(&d, RS_OPT_SGD, CNN, 2, 32, 1, 20, "bf16 sgd cnn, 2 replicas, batch 32");
    run_prec = RS_PREC_FP32;
    equivalence(&d, RS_OPT_ADAM, CNN, 3, 32, 2, 20, "adam cnn, 3 replicas, accum 2 vs batch 64");
    rs_data_pair t = {0};
    RS_CHECK(rs_data_text_builtin(16, &t, &e) == RS_OK, "text: %s", e.msg);
    if (t.train) {
        char gpt[128];
        int V = t.train->n_classes; /* the vocabulary */
        snprintf(gpt, sizeof gpt, "seq ctx=16 embed(%d,32) layernorm linear(96) attn(4) linear(32) gelu(tanh) linear(%d)",
                 V, V);
        text_gradients(&t, gpt, 2, 16, "grad token model, 2 replicas, batch 16");
        text_gradients(&t, gpt, 3, 7, "grad token model, 3 replicas, batch 7 (3/2/2)");
        equivalence(&t, RS_OPT_SGD, gpt, 2, 8, 1, 10, "sgd token model, 2 replicas, batch 8");
        equivalence(&t, RS_OPT_SGD, gpt, 3, 7, 1, 10, "sgd token model, 3 replicas, batch 7 (3/2/2)");
    }
    rs_data_pair_clear(&t);
    memory(MLP, 2);
    memory(MLP, 3);
    memory(CNN, 4);
    memory_after_step(&d);
    dropout(&d);
    errors();
    rs_data_pair_clear(&d);
    return rs_test_finish("dp");
}
