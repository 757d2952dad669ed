/* Determinism on one thread: the same seeds give the same bytes after training, for an MLP with
 * dropout and a small CNN with layernorm on the built-in digits. The test can fail: another data seed
 * or another model seed must give other weights, and rs_train must equal a hand-written loop over
 * the same loader, bit for bit. */
#include <stdlib.h>
#include <string.h>

#include "engine/data/gen/digits.h"
#include "engine/data/loader.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

#define STEPS 40
#define BATCH 32

static const char *const MLP = "mlp 784-64-10 dropout=0.3 in=1x28x28";
static const char *const CNN =
    "seq in=1x28x28 conv(4,3,pad=1) layernorm relu maxpool(2) conv(8,3,pad=1) relu maxpool(2) flatten linear(10)";

static rs_data_pair data_for(uint64_t seed)
{
    rs_data_pair p = {0};
    rs_err e = {0};
    RS_CHECK(rs_data_digits_pair(1000, 200, seed, &p, &e) == RS_OK, "digits: %s", e.msg);
    return p;
}

static rs_model *build(const char *spec, uint64_t seed)
{
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, seed, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    /* One thread, as the runs' threads=1: threads are the model's own, and conv backward's sums
     * depend on the count. */
    if (m) rs_model_set_threads(m, 1);
    return m;
}

static rs_train_cfg cfg_for(uint64_t data_seed, rs_opt_kind opt)
{
    rs_train_cfg c = rs_train_defaults();
    c.opt = rs_opt_defaults(opt);
    if (opt == RS_OPT_SGD) c.opt.momentum = 0.9f;
    c.batch = BATCH;
    c.epochs = 2; /* 32 batches an epoch: the run crosses an epoch boundary */
    c.max_steps = STEPS;
    c.eval = false;
    c.threads = 1;
    c.seed = data_seed;
    return c;
}

/* Trains a fresh model; the caller owns the result. */
static rs_model *trained(const char *spec, uint64_t model_seed, const rs_data_pair *d, uint64_t data_seed,
                         rs_opt_kind opt)
{
    rs_model *m = build(spec, model_seed);
    if (!m) return NULL;
    rs_train_cfg c = cfg_for(data_seed, opt);
    rs_train_result r;
    rs_err e = {0};
    rs_status st = rs_train(m, d, &c, NULL, &r, &e);
    RS_CHECK(st == RS_OK, "train %s: %s", spec, e.msg);
    RS_CHECK(r.steps == STEPS && r.global_step == STEPS, "%lld steps, want %d", (long long)r.steps, STEPS);
    RS_CHECK(rs_model_step(m) == STEPS, "model step counter %llu, want %d", (unsigned long long)rs_model_step(m), STEPS);
    return m;
}

/* memcmp of the whole buffers; on a difference, the first few values that differ and the max. */
static bool same_bytes(rs_model *a, rs_model *b)
{
    return rs_model_numel(a) == rs_model_numel(b) &&
           !memcmp(rs_model_params(a), rs_model_params(b), rs_model_numel(a) * sizeof(float));
}

static void report_diff(rs_model *a, rs_model *b, const char *what)
{
    if (rs_model_numel(a) != rs_model_numel(b)) return;
    const float *x = rs_model_params(a), *y = rs_model_params(b);
    size_t n = rs_model_numel(a), ndiff = 0;
    double maxd = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&x[i], &y[i], sizeof(float)) == 0) continue;
        if (ndiff++ < 4) fprintf(stderr, "  %s: [%zu] %.9g vs %.9g\n", what, i, (double)x[i], (double)y[i]);
        double d = x[i] > y[i] ? x[i] - y[i] : y[i] - x[i];
        maxd = d > maxd ? d : maxd;
    }
    fprintf(stderr, "  %s: %zu of %zu values differ, max |diff| %.3g\n", what, ndiff, n, maxd);
}

static void check_same(rs_model *a, rs_model *b, const char *what)
{
    bool same = a && b && same_bytes(a, b);
    RS_CHECK(same, "%s: weights are not bit-identical", what);
    if (!same && a && b) report_diff(a, b, what);
}

static void check_differ(rs_model *a, rs_model *b, const char *what)
{
    if (!a || !b) return;
    size_t n = rs_model_numel(a), same = 0;
    for (size_t i = 0; i < n; i++)
        same += rs_model_params(a)[i] == rs_model_params(b)[i] && rs_model_params(a)[i] != 0.0f;
    RS_CHECK(!same_bytes(a, b), "%s: weights are identical", what);
    /* Not just one value: training from another seed moves nearly every weight elsewhere. */
    RS_CHECK(same < n / 10, "%s: %zu of %zu weights are the same", what, same, n);
    printf("  %-44s %zu of %zu weights equal\n", what, same, n);
}

static void run_model(const char *spec, const char *label, rs_opt_kind opt)
{
    printf("%s (%s):\n", label, rs_opt_kind_name(opt));
    rs_data_pair d1 = data_for(1), d1b = data_for(1);
    RS_CHECK(d1.train && d1b.train &&
                 !memcmp(d1.train->x, d1b.train->x, (size_t)d1.train->n * 784 * sizeof(float)) &&
                 !memcmp(d1.train->y, d1b.train->y, d1.train->n * sizeof(int32_t)),
             "digits: the same seed gives other samples");
    rs_model *init = build(spec, 42);
    rs_model *a = trained(spec, 42, &d1, 7, opt);
    rs_model *b = trained(spec, 42, &d1b, 7, opt);
    check_same(a, b, "same seeds, two runs");
    if (init && a) check_differ(init, a, "initial vs trained (training moved them)");

    /* Another data seed (the order of the batches): other weights. */
    rs_model *c = trained(spec, 42, &d1, 8, opt);
    check_differ(a, c, "data seed 7 vs 8");

    /* Another model seed: other initial weights, and so other trained weights. */
    rs_model *init2 = build(spec, 43);
    if (init && init2) check_differ(init, init2, "initial weights, model seed 42 vs 43");
    rs_model *e = trained(spec, 43, &d1, 7, opt);
    check_differ(a, e, "trained, model seed 42 vs 43");

    rs_model_free(init);
    rs_model_free(init2);
    rs_model_free(a);
    rs_model_free(b);
    rs_model_free(c);
    rs_model_free(e);
    rs_data_pair_clear(&d1);
    rs_data_pair_clear(&d1b);
}

/* The model seed also drives the dropout masks: two models with the same initial weights but other
 * seeds train apart when there is dropout, and stay together when there is none. */
static void dropout_masks(void)
{
    printf("dropout masks:\n");
    rs_data_pair d = data_for(1);
    static const char *const specs[] = {MLP, "mlp 784-64-10 in=1x28x28"};
    for (int k = 0; k < 2; k++) {
        rs_model *a = build(specs[k], 42), *b = build(specs[k], 43);
        if (!a || !b) break;
        memcpy(rs_model_params(b), rs_model_params(a), rs_model_numel(a) * sizeof(float));
        rs_train_cfg c = cfg_for(7, RS_OPT_ADAM);
        rs_err e = {0};
        RS_CHECK(rs_train(a, &d, &c, NULL, NULL, &e) == RS_OK, "%s", e.msg);
        RS_CHECK(rs_train(b, &d, &c, NULL, NULL, &e) == RS_OK, "%s", e.msg);
        if (k == 0) check_differ(a, b, "with dropout: seeds 42 vs 43, same init");
        else check_same(a, b, "without dropout: seeds 42 vs 43, same init");
        rs_model_free(a);
        rs_model_free(b);
    }
    rs_data_pair_clear(&d);
}

/* rs_train is the plain loop: set_epoch, next, forward, loss, zero_grad, backward, step at lr. */
static void hand_loop(const char *spec, rs_opt_kind opt)
{
    rs_data_pair d = data_for(1);
    rs_model *a = trained(spec, 42, &d, 7, opt);
    rs_model *b = build(spec, 42);
    rs_err e = {0};
    rs_train_cfg c = cfg_for(7, opt);
    rs_sampler_cfg sc = rs_sampler_cfg_default();
    sc.seed = 7;
    rs_loader *l = rs_loader_new(d.train, BATCH, &sc, &e);
    rs_optim *o = rs_optim_new(&c.opt, rs_device_cpu(), b ? rs_model_numel(b) : 0, NULL, &e);
    if (o && b) rs_optim_set_ctx(o, rs_model_ctx(b));
    float *x = malloc((size_t)BATCH * 784 * sizeof *x);
    int32_t *y = malloc(BATCH * sizeof *y);
    if (a && b && l && o && x && y) {
        rs_model_set_training(b, true);
        int step = 0;
        for (int epoch = 0; step < STEPS; epoch++) {
            rs_loader_set_epoch(l, epoch);
            int B;
            while (step < STEPS && (B = rs_loader_next(l, x, y)) > 0) {
                float loss;
                RS_CHECK(rs_model_forward(b, x, B, NULL, &e) == RS_OK, "%s", e.msg);
                RS_CHECK(rs_model_loss(b, y, B, &loss, &e) == RS_OK, "%s", e.msg);
                rs_model_zero_grad(b);
                rs_model_backward(b, x, y, B, 1.0f);
                rs_optim_step(o, rs_model_params(b), rs_model_grads(b), c.opt.lr);
                step++;
            }
        }
        char what[96];
        snprintf(what, sizeof what, "rs_train vs hand loop (%s)", rs_opt_kind_name(opt));
        check_same(a, b, what);
    }
    free(x);
    free(y);
    rs_optim_free(o);
    rs_loader_free(l);
    rs_model_free(a);
    rs_model_free(b);
    rs_data_pair_clear(&d);
}

int main(void)
{
    run_model(MLP, "mlp with dropout", RS_OPT_ADAM);
    run_model(CNN, "cnn with layernorm", RS_OPT_ADAM);
    run_model(CNN, "cnn with layernorm", RS_OPT_SGD);
    dropout_masks();
    hand_loop(MLP, RS_OPT_ADAM);
    hand_loop(CNN, RS_OPT_SGD);
    return rs_test_finish("engine-determinism");
}
