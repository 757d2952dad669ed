/* Pipeline stages combined with data and tensor parallelism against one process:
 * `test-combo BACKEND RANKS DP TP mlp|gpt [zero|sgd] [SCHEDULE MICRO]`, pp = RANKS / (DP x TP).
 * Every rank makes mode=pipeline through the registry (as the worker does) with dp= and tp=; the dp
 * pipelines read their halves of each global batch, a stage's layers are split over its tp group, and
 * rank 0, which gathered the whole model (each stage's range, then the first stage's tp shards), trains
 * the same model in one process with the same global batches and compares: ||a-b||/||b|| <= 1e-5.
 * zero: the same run twice, plain dp and zero=1 (each stage's optimizer state sharded over its dp
 * group): the weights must agree (the same Adam on the same averaged gradients, element by element)
 * and each rank's optimizer pool, measured at the allocator, must be 1/dp of plain dp's.
 * sgd: SGD with momentum (the GPT under dp x tp: see tests/dist/tensor/test_tensor.c on why Adam's
 * g/sqrt(v) magnifies the rounding of an attention key bias's zero gradient).
 * resume: half the steps with a checkpoint (zero=1 when DP > 1), then the rest from it on another layout
 * (DP and TP swapped, on RANKS / DP x TP ... ranks as it comes out): the checkpoint is the whole model
 * and the whole optimizer, whatever layout wrote it.
 * `test-combo refuse`: layouts that cannot be are refused by the registry's check, with the arithmetic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/pg/pg.h"
#include "dist/train/registry.h"
#include "engine/data/source.h"
#include "engine/nn/spec.h"
#include "tests/dist/forkranks.h"
#include "tests/dist/rankmodel.h"
#include "tests/rs_test.h"

typedef struct job {
    const char *backend, *schedule, *spec, *data;
    int dp, tp, micro, batch, steps;
    bool gpt, zero, sgd;
    bool zero_only;             /* resume: train once, with zero=1 when dp > 1 */
    const char *ckpt, *resume;  /* resume: the first run writes ckpt, the second resumes from it */
} job;

static rs_train_cfg cfg_for(const job *j)
{
    rs_train_cfg c = rs_train_defaults();
    c.batch = j->batch;
    c.max_steps = j->steps;
    c.seed = 7;
    c.eval = false;
    c.opt.lr = 3e-3f;
    if (j->gpt) {
        /* nanoGPT's recipe: AdamW with its decay group and clipping (a global norm over stages and shards) */
        c.opt = rs_opt_defaults(RS_OPT_ADAMW);
        c.opt.lr = 3e-3f;
        c.opt.weight_decay = 0.1f;
        c.opt.groups = true;
        c.clip = 0.5f;
    }
    if (j->sgd) {
        c.opt = rs_opt_defaults(RS_OPT_SGD);
        c.opt.lr = 0.05f;
        c.opt.momentum = 0.9f;
    }
    return c;
}

typedef struct watch {
    rs_model *m;
    int64_t optim, params; /* the OPTIM and PARAMS pools after the last step */
    double stage_params;   /* the strategy's count of what this rank keeps: its stages' floats + tied copies */
} watch;

static void on_event(void *ud, const rs_train_event *ev)
{
    watch *w = ud;
    if (ev->kind != RS_TRAIN_EV_STEP) return;
    w->optim = rs_model_mem(w->m)->live[RS_POOL_OPTIM];
    w->params = rs_model_mem(w->m)->live[RS_POOL_PARAMS];
}

static void on_metric(void *ud, int64_t step, const char *name, double v)
{
    (void)step;
    if (!strcmp(name, "stage_params")) ((watch *)ud)->stage_params = v;
}

static int set(rs_strategy_args *a, const char *key, int v, rs_err *e)
{
    char t[16];
    snprintf(t, sizeof t, "%d", v);
    return rs_strategy_args_set(a, key, t, e) != RS_OK;
}

/* One run of mode=pipeline dp= tp= (zero=1 when zero) on this rank; the optimizer pool into *optim. */
static int train_combo(const job *j, bool zero, rs_pg *g, rs_model *m, rs_data_pair *data, int64_t *optim)
{
    rs_err e = {0};
    rs_strategy_args a;
    rs_strategy_args_init(&a, &rs_strategy_pipeline);
    if (rs_strategy_args_set(&a, "schedule", j->schedule, &e) || set(&a, "micro", j->micro, &e) ||
        set(&a, "dp", j->dp, &e) || set(&a, "tp", j->tp, &e) || (zero && set(&a, "zero", 1, &e))) {
        fprintf(stderr, "rank %d: %s\n", g->rank, e.msg);
        return 2;
    }
    rs_train_cfg cfg = cfg_for(j);
    cfg.ckpt_path = j->ckpt;
    cfg.resume = j->resume;
    watch w = {.m = m};
    rs_strategy_ctx ctx = {.g = g, .m = m, .args = &a, .cfg = &cfg, .metric = on_metric, .ud = &w};
    rs_train_strategy sg;
    if (rs_strategy_pipeline.check(&a, m, g->world, &cfg, &e) || rs_strategy_pipeline.make(&ctx, &sg, &e)) {
        fprintf(stderr, "rank %d: %s\n", g->rank, e.msg);
        return 2;
    }
    cfg.strategy = &sg;
    rs_train_hooks hooks = {.on_event = on_event, .ud = &w};
    rs_train_result res;
    if (rs_train(m, data, &cfg, &hooks, &res, &e)) {
        fprintf(stderr, "rank %d: train: %s\n", g->rank, e.msg);
        return 1;
    }
    RS_CHECK(res.global_step == j->steps, "rank %d: %lld steps", g->rank, (long long)res.global_step);
    *optim = w.optim;
    /* measured: a rank keeps its stages' parameters (of its shard) and tied copies, not the model's; the
     * units' alignment padding (16 floats a tensor at most) comes with them */
    double want = 4 * w.stage_params, slack = 64.0 * rs_model_tensor_count(m);
    printf("rank %d: %lld parameter bytes after the last step, its stages hold 4 x %.0f = %.0f\n", g->rank,
           (long long)w.params, w.stage_params, want);
    RS_CHECK(w.stage_params > 0 && w.params >= want && w.params <= want + slack,
             "rank %d: %lld bytes of parameters, its stages' are %.0f (the whole model's %zu)", g->rank,
             (long long)w.params, want, 4 * rs_model_numel(m));
    return 0;
}

static int rank_main(void *ud, int rank, int world, rs_store *st)
{
    job *j = ud;
    rs_err e = {0};
    rs_pg *g = NULL;
    rs_model *m = NULL;
    rs_data_pair data = {0};
    /* other initial weights elsewhere: every stage and shard must start from rank 0's */
    if (rs_test_rank_model(j->backend, st, "combo", rank, world, j->spec, j->data, &g, &m, &data)) return 2;
    int64_t optim = 0, optim_zero = 0;
    int rc = train_combo(j, j->zero_only && j->dp > 1, g, m, &data, &optim);
    if (rc) return rc;
    int pp = world / (j->dp * j->tp);
    if (j->zero) {
        rs_model *mz = NULL;
        if (rs_model_parse(j->spec, "mz", rs_device_cpu(), NULL, 11, &mz, NULL, &e)) return 2;
        rc = train_combo(j, true, g, mz, &data, &optim_zero);
        if (rc) return rc;
        printf("rank %d: optimizer state %lld bytes with zero=1, %lld with plain dp=%d\n", rank, (long long)optim_zero,
               (long long)optim, j->dp);
        /* each replica keeps the state of its 1/dp of the stage's range (parts padded to equal blocks) */
        RS_CHECK(optim_zero > 0 && optim_zero * j->dp <= optim + 64 * j->dp && optim_zero * j->dp >= optim - 64 * j->dp,
                 "rank %d: zero=1 keeps %lld bytes of optimizer state; plain dp %lld, so 1/%d of it is %lld", rank,
                 (long long)optim_zero, (long long)optim, j->dp, (long long)(optim / j->dp));
        if (rank == 0) {
            double d = rs_test_rel_diff(rs_model_params(mz), rs_model_params(m), rs_model_numel(m), NULL);
            printf("pipeline dp=%d pp=%d tp=%d zero=1 against plain dp: %.3g\n", j->dp, pp, j->tp, d);
            RS_CHECK(d <= 1e-6, "zero=1 differs from plain dp by %.3g (relative)", d);
        }
        rs_model_free(mz);
    }
    if (rank == 0 && !j->ckpt) {
        rs_model *ref = NULL;
        if (rs_model_parse(j->spec, "ref", rs_device_cpu(), NULL, 11, &ref, NULL, &e)) return 2;
        rs_train_cfg one = cfg_for(j);
        rs_train_result res;
        if (rs_train(ref, &data, &one, NULL, &res, &e)) {
            fprintf(stderr, "reference: %s\n", e.msg);
            return 1;
        }
        double d = rs_test_rel_diff(rs_model_params(m), rs_model_params(ref), rs_model_numel(m), NULL);
        printf("pipeline %s %s dp=%d x pp=%d x tp=%d %s micro=%d: weights differ from one process by %.3g "
               "(||a-b||/||b||) after %d steps\n",
               j->gpt ? "gpt" : "mlp", j->backend, j->dp, pp, j->tp, j->schedule, j->micro, d, j->steps);
        RS_CHECK(d <= 1e-5, "weights differ from one process by %.3g (relative)", d);
        rs_model_free(ref);
    }
    rs_model_free(m);
    rs_data_pair_clear(&data);
    rs_pg_destroy(g);
    return rs_test_failures ? 1 : 0;
}

/* The check at the prompt and on each rank refuses what cannot be, saying why. */
static void refusals(void)
{
    static const struct {
        int world;
        const char *opts, *want;
    } cases[] = {
        {8, "dp=3 pp=2", "dp=3 x pp=2 x tp=1 = 6 ranks, but this run has ranks=8"},
        {6, "dp=2 tp=2", "ranks=6 does not split into stages of dp=2 x tp=2 = 4 ranks"},
        {4, "dp=2 tp=2", "leaves pp=1"},
        {4, "tp=3", "ranks=4 does not split into stages of dp=1 x tp=3"},
        {2, "dp=2 tp=2", "(pp would be 2/4); use ranks=4, or give"}, /* no multiple below: not ranks=0 */
        {6, "tp=3", "linear(64)"},                         /* 64 outputs over 3 ranks */
        {2, "zero=1", "dp=1 has no other replica"},
        {4, "tp=2 split=2", "inside the tensor-parallel pair of layers 0..2"},
        {4, "dp=2 micro=8", "cannot make micro=8 micro-batches"},
        {4, "dp=2 pp=2 zero=2", "zero must be 0..1"},
        {2, "dp=2", "leaves pp=1: a pipeline needs 2 stages' ranks or more (ranks=4 for pp=2; dp alone is mode=ddp)"},
    };
    rs_model *m = NULL;
    rs_err e = {0};
    if (rs_model_parse("mlp 784-64-32-10", "m", rs_device_cpu(), NULL, 11, &m, NULL, &e)) {
        RS_CHECK(0, "%s", e.msg);
        return;
    }
    rs_train_cfg cfg = rs_train_defaults();
    cfg.batch = 12;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rs_strategy_args a;
        rs_strategy_args_init(&a, &rs_strategy_pipeline);
        char opts[64];
        snprintf(opts, sizeof opts, "%s", cases[i].opts);
        rs_status st = RS_OK;
        e = (rs_err){0};
        for (char *save = NULL, *t = strtok_r(opts, " ", &save); t && !st; t = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(t, '=');
            *eq = 0;
            st = rs_strategy_args_set(&a, t, eq + 1, &e);
        }
        if (!st) st = rs_strategy_pipeline.check(&a, m, cases[i].world, &cfg, &e);
        printf("ranks=%d %s: %s\n", cases[i].world, cases[i].opts, st ? e.msg : "accepted");
        RS_CHECK(st == RS_ERR_ARG && strstr(e.msg, cases[i].want), "ranks=%d %s: want a refusal with '%s'",
                 cases[i].world, cases[i].opts, cases[i].want);
    }
    /* and what can be is accepted */
    rs_strategy_args a;
    rs_strategy_args_init(&a, &rs_strategy_pipeline);
    rs_strategy_args_set(&a, "dp", "2", &e);
    rs_strategy_args_set(&a, "tp", "2", &e);
    rs_strategy_args_set(&a, "zero", "1", &e);
    RS_CHECK(rs_strategy_pipeline.check(&a, m, 8, &cfg, &e) == RS_OK, "dp=2 tp=2 zero=1 on 8 ranks: %s", e.msg);
    RS_CHECK(rs_strategy_batch_parts(&rs_strategy_pipeline, &a, 8) == 2, "the batch splits over the dp pipelines");
    rs_model_free(m);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "refuse")) {
        refusals();
        return rs_test_finish("test-combo");
    }
    if (argc < 6) {
        fprintf(stderr, "usage: test-combo shm|tcp RANKS DP TP mlp|gpt [zero|sgd] [SCHEDULE MICRO] | test-combo refuse\n");
        return 2;
    }
    job j = {.backend = argv[1], .dp = atoi(argv[3]), .tp = atoi(argv[4]), .schedule = "1f1b", .micro = 4,
             .spec = "mlp 784-64-32-10", .data = "digits:1200", .batch = 24, .steps = 8};
    int world = atoi(argv[2]);
    int at = 6;
    if (!strcmp(argv[5], "gpt")) {
        j.gpt = true;
        j.spec = "gpt layers=2 heads=2 dim=16 ctx=16 vocab=50";
        j.data = "text:builtin,ctx=16";
        j.batch = 8;
        j.micro = 2;
        j.steps = 6;
    }
    bool resume = false;
    if (argc > at && !strcmp(argv[at], "resume")) resume = true, at++;
    if (argc > at && !strcmp(argv[at], "zero")) j.zero = true, at++;
    else if (argc > at && !strcmp(argv[at], "sgd")) j.sgd = true, at++;
    if (argc > at + 1) j.schedule = argv[at], j.micro = atoi(argv[at + 1]);
    if (resume) {
        char path[] = "/tmp/ringside-combo-XXXXXX", file[64], optim[80];
        if (!mkdtemp(path)) return 2;
        snprintf(file, sizeof file, "%s/c.safetensors", path);
        snprintf(optim, sizeof optim, "%s/c.optim.safetensors", path);
        job first = j;
        first.steps = j.steps / 2;
        first.ckpt = file;
        first.zero_only = true;
        int bad = rs_fork_ranks(world, rank_main, &first, NULL, NULL);
        RS_CHECK(bad == 0, "first run: %d ranks failed", bad);
        /* the other layout: dp and tp swapped, two stages */
        job second = j;
        second.resume = file;
        second.dp = j.tp, second.tp = j.dp;
        second.zero_only = true;
        int world2 = 2 * second.dp * second.tp;
        printf("resuming on %d ranks as dp=%d x pp=2 x tp=%d from a checkpoint of dp=%d x pp=%d x tp=%d%s\n", world2,
               second.dp, second.tp, j.dp, world / (j.dp * j.tp), j.tp, j.dp > 1 ? " with zero=1" : "");
        bad = rs_fork_ranks(world2, rank_main, &second, NULL, NULL);
        RS_CHECK(bad == 0, "resumed run: %d ranks failed", bad);
        unlink(file);
        unlink(optim);
        rmdir(path);
        return rs_test_finish("test-combo");
    }
    int bad = rs_fork_ranks(world, rank_main, &j, NULL, NULL);
    RS_CHECK(bad == 0, "%d ranks failed", bad);
    return rs_test_finish("test-combo");
}
