/* ZeRO stages 1-3 against one process: `test-zero BACKEND ZERO WORLD [ACCUM]`.
 * The parent forks WORLD ranks; each builds the same model from the same seed, trains it on the
 * built-in digits with rs_train and the ZeRO strategy (Adam, global batch 24, one epoch of 20 steps
 * ending in an evaluation on rank 0, so gather() is exercised mid-run and at the end), then checks that
 * every rank holds the same weights. Rank 0 then trains the same model in one process without a
 * strategy and compares the weights: the two runs differ only in the order floating-point sums are
 * taken. With WORLD 4 each rank also compares the bytes its tracker measured after a step with the
 * ZeRO paper's formula (rs_zero_mem_formula). A rank exits non-zero on any failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/pg/pg.h"
#include "dist/train/dtrain.h"
#include "engine/data/source.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/dist/forkranks.h"
#include "tests/rs_test.h"

/* An MLP (every layer a unit), a small CNN, and one with blocks (units of several layers, and units
 * without parameters between them). */
static const char *const specs[] = {
    "mlp 784-48-32-10",
    "seq in=1x28x28 conv(4,3,pad=1) relu maxpool(2) flatten linear(10)",
    "seq in=1x28x28 [ conv(4,3,pad=1) relu ] maxpool(2) flatten [ linear(24) relu ] linear(10)",
};
#define NSPECS (int)(sizeof specs / sizeof specs[0])

/* The difference is taken per tensor, relative to the tensor's largest weight (normwise, as numerical
 * linear algebra measures it): one element's own relative error is unbounded, because a gradient that
 * nearly cancels over the batch keeps only rounding, and Adam, which divides by sqrt(v), turns it into
 * a full-size update of either sign. Bound: one process and W ranks sum a batch's gradients in
 * different orders (one GEMM over 24 rows, or W GEMMs over 24/W rows and a ring reduction), relative
 * rounding ~1e-7 of the gradient's terms. An update is at most lr = 1e-3 per step, so after 20 steps
 * an element moves at most 0.02 and typical elements differ by ~1e-8; elements at rounding level
 * differ by up to a few 1e-7, against weights of ~0.05-0.1 per tensor: 1e-5 of the tensor's scale
 * is about 1.5x the largest the runs show (6.9e-6, the MLP's first layer; the runs are deterministic:
 * threads=1 and fixed ring orders, so this does not flake) while a wrong average (a factor of W) or a
 * lost shard (an O(lr) error) is 100x over it. */
#define RTOL 1e-5

typedef struct job {
    const char *backend;
    int zero, accum, spec;
    pid_t parent; /* names the groups: tests run in parallel and shm segments are system-wide */
} job;

typedef struct rank_state {
    rs_model *m;
    int64_t live[RS_POOL_COUNT]; /* after the last step */
    int64_t peak[RS_POOL_COUNT]; /* within the last step */
    int calls[RS_OP_KIND_COUNT];
} rank_state;

static void on_event(void *ud, const rs_train_event *ev)
{
    rank_state *s = ud;
    if (ev->kind != RS_TRAIN_EV_STEP) return;
    rs_mem *mem = rs_model_mem(s->m);
    for (int p = 0; p < RS_POOL_COUNT; p++) {
        s->live[p] = mem->live[p];
        s->peak[p] = mem->peak[p];
    }
    rs_mem_reset_peaks(mem); /* the next step's peaks are its own, not setup's */
}

static void on_comm(void *ud, int64_t step, const char *op, int index, size_t bytes, double t0, double t1)
{
    rank_state *s = ud;
    (void)step, (void)index, (void)bytes;
    if (t1 < t0) fprintf(stderr, "comm span of %s ends before it starts\n", op);
    for (int k = 0; k < RS_OP_KIND_COUNT; k++)
        if (!strcmp(op, rs_pg_op_name(k))) s->calls[k]++;
}

static rs_train_cfg train_cfg(int accum)
{
    rs_train_cfg c = rs_train_defaults();
    c.batch = 24;
    c.accum = accum;
    c.seed = 3;
    c.threads = 1;
    c.eval = true;
    return c;
}

static uint64_t hash(const void *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

/* Measured bytes of pool p against the formula's, within 10%. */
static int check_bytes(int rank, const char *pool, double got, double want)
{
    double rel = fabs(got - want) / want;
    printf("rank %d: %-9s measured %9.0f B  formula %9.0f B  (%+.2f%%)\n", rank, pool, got, want,
           100 * (got - want) / want);
    if (rel <= 0.10) return 0;
    fprintf(stderr, "rank %d: %s: measured %.0f B is not within 10%% of the formula's %.0f B\n", rank, pool, got, want);
    return 1;
}

/* The memory pools measured at the allocator against the ZeRO paper's formula (world 4, the first spec). */
static int check_memory(const job *j, rs_model *m, const rank_state *s, int rank, int world)
{
    int fails = 0;
    size_t n = rs_model_numel(m);
    size_t P = rs_model_param_count(m);
    rs_zero_bytes f = rs_zero_mem_formula(P, world, j->zero, 2);
    if (j->zero == 3) {
        /* A quarter of DDP's whole; nothing of the full buffers is resident between steps. */
        rs_zero_bytes d = rs_zero_mem_formula(P, world, 0, 2);
        double got = (double)(s->live[RS_POOL_PARAMS] + s->live[RS_POOL_GRADS] + s->live[RS_POOL_OPTIM]);
        fails += check_bytes(rank, "total", got, (d.params + d.grads + d.optim) / world);
        size_t unit = 0;
        for (int u = 0; u < rs_model_unit_count(m); u++)
            if (rs_model_unit(m, u)->numel > unit) unit = rs_model_unit(m, u)->numel;
        /* Within a step one unit is gathered at a time (two around the forward/backward turn). */
        printf("rank %d: peaks within a step: params %lld B, grads %lld B (full buffers %zu B, the largest unit "
               "%zu B); comm %lld B\n",
               rank, (long long)s->peak[RS_POOL_PARAMS], (long long)s->peak[RS_POOL_GRADS], n * sizeof(float),
               unit * sizeof(float), (long long)s->live[RS_POOL_COMM]);
    }
    fails += check_bytes(rank, "params", (double)s->live[RS_POOL_PARAMS], f.params);
    fails += check_bytes(rank, "grads", (double)s->live[RS_POOL_GRADS], f.grads);
    fails += check_bytes(rank, "optimizer", (double)s->live[RS_POOL_OPTIM], f.optim);
    return fails;
}

static int rank_main(void *ud, int rank, int world, rs_store *store)
{
    const job *j = ud;
    rs_err e = {0};
    int fails = 0;
    char name[64];
    snprintf(name, sizeof name, "zero%d-%ld-%d", j->zero, (long)j->parent, j->spec);
    rs_pg *g = NULL;
    rs_data_pair data = {0};
    rs_model *m = NULL, *ref = NULL;
    rs_train_strategy sg = {0};
    rank_state s = {0};
    if (rs_pg_new(j->backend, store, name, rank, world, 30, &g, &e) || rs_data_open("digits:480", 1, &data, &e) ||
        rs_model_parse(specs[j->spec], "net", rs_device_cpu(), NULL, 7, &m, NULL, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        fails++;
        goto out;
    }
    s.m = m;
    rs_dtrain_cfg dc = rs_dtrain_defaults();
    dc.zero = j->zero;
    if (rs_zero_strategy(g, m, &dc, on_comm, &s, &sg, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        fails++;
        goto out;
    }
    rs_train_cfg cfg = train_cfg(j->accum);
    cfg.strategy = &sg;
    rs_train_hooks hooks = {.on_event = on_event, .ud = &s};
    rs_train_result res;
    if (rs_train(m, &data, &cfg, &hooks, &res, &e)) {
        fprintf(stderr, "rank %d: zero=%d %s: %s\n", rank, j->zero, specs[j->spec], e.msg);
        fails++;
        goto out;
    }
    int64_t want_steps = 20 / j->accum;
    if (res.steps != want_steps) {
        fprintf(stderr, "rank %d: %lld steps, wanted %lld\n", rank, (long long)res.steps, (long long)want_steps);
        fails++;
    }
    if (rank == 0 && res.test_acc < 0) {
        fprintf(stderr, "rank 0: no evaluation ran after the epoch\n");
        fails++;
    }
    /* The strategy's collectives were reported: zero 1 all-reduces gradients and all-gathers
     * parameters; 2 and 3 reduce-scatter gradients instead. */
    rs_pg_opkind want_grad = j->zero == 1 ? RS_OP_ALL_REDUCE : RS_OP_REDUCE_SCATTER;
    if (s.calls[RS_OP_BROADCAST] != 1 || s.calls[want_grad] < want_steps || s.calls[RS_OP_ALL_GATHER] < want_steps) {
        fprintf(stderr, "rank %d: reported collectives: broadcast %d, %s %d, all_gather %d\n", rank,
                s.calls[RS_OP_BROADCAST], rs_pg_op_name(want_grad), s.calls[want_grad], s.calls[RS_OP_ALL_GATHER]);
        fails++;
    }
    /* The strategy was torn down: the model owns ordinary buffers again, with the full weights, the
     * same bits on every rank. */
    if (rs_model_buffers_sharded(m) || rs_model_grads_released(m)) {
        fprintf(stderr, "rank %d: the model's buffers were not restored by teardown\n", rank);
        fails++;
    }
    size_t n = rs_model_numel(m);
    int64_t h = (int64_t)hash(rs_model_params(m), n * sizeof(float)), all[64];
    if (rs_pg_all_gather(g, &h, all, 1, RS_I64, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        fails++;
        goto out;
    }
    for (int r = 0; r < world; r++)
        if (all[r] != h) {
            fprintf(stderr, "rank %d: final weights differ from rank %d's\n", rank, r);
            fails++;
        }

    if (world == 4 && j->spec == 0) fails += check_memory(j, m, &s, rank, world);

    if (rank == 0) {
        if (rs_model_parse(specs[j->spec], "ref", rs_device_cpu(), NULL, 7, &ref, NULL, &e)) {
            fprintf(stderr, "rank 0: %s\n", e.msg);
            fails++;
            goto out;
        }
        rs_train_cfg rc = train_cfg(j->accum);
        if (rs_train(ref, &data, &rc, NULL, NULL, &e)) {
            fprintf(stderr, "rank 0: reference run: %s\n", e.msg);
            fails++;
            goto out;
        }
        const float *a = rs_model_params(m), *b = rs_model_params(ref);
        double worst = 0, worst_abs = 0;
        const char *where = "";
        for (int t = 0; t < rs_model_tensor_count(m); t++) {
            const rs_param_info *pi = rs_model_tensor(m, t);
            double scale = 0, d = 0;
            for (size_t i = pi->offset; i < pi->offset + pi->numel; i++) {
                scale = fmax(scale, fabs((double)b[i]));
                d = fmax(d, fabs((double)a[i] - b[i]));
            }
            double rel = d / fmax(scale, 1e-30);
            if (d > worst_abs) worst_abs = d;
            if (rel > worst) worst = rel, where = pi->name;
        }
        printf("zero=%d world=%d accum=%d %s: max difference %.3g of a tensor's scale (%s), max absolute %.3g\n",
               j->zero, world, j->accum, specs[j->spec], worst, where, worst_abs);
        if (!(worst <= RTOL)) {
            fprintf(stderr, "rank 0: zero=%d weights differ from one process's by %.3g relative (> %g)\n", j->zero,
                    worst, RTOL);
            fails++;
        }
    }
out:
    rs_model_free(ref);
    rs_model_free(m);
    rs_data_pair_clear(&data);
    rs_pg_destroy(g);
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: test-zero BACKEND ZERO WORLD [ACCUM]\n");
        return 2;
    }
    job j = {.backend = argv[1], .zero = atoi(argv[2]), .accum = argc > 4 ? atoi(argv[4]) : 1, .parent = getpid()};
    int world = atoi(argv[3]);
    if (j.zero < 1 || j.zero > 3 || world < 1 || world > 8 || j.accum < 1 || 20 % j.accum) {
        fprintf(stderr, "test-zero: zero must be 1..3, world 1..8, accum a divisor of 20\n");
        return 2;
    }
    for (j.spec = 0; j.spec < NSPECS; j.spec++) {
        int bad = rs_fork_ranks(world, rank_main, &j, NULL, NULL);
        RS_CHECK(bad == 0, "zero=%d world=%d accum=%d %s on %s: %d ranks failed", j.zero, world, j.accum,
                 specs[j.spec], j.backend, bad);
    }
    return rs_test_finish("test-zero");
}
