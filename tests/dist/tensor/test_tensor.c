/* Tensor parallelism against one process: `test-tensor BACKEND WORLD TP mlp|gpt [plain|clip|dropout|resume|sgd]`.
 * WORLD forked ranks train with the tensor strategy (TP ranks per tensor-parallel group, WORLD/TP
 * groups data parallel over each other), each from its own perturbed copy of the weights (the
 * strategy must start every shard from rank 0's); rank 0 then trains the same model in one process on
 * the same global batches and compares the whole weights it gathered (||a-b||/||b|| <= 1e-5).
 * Each rank's parameter memory, read from the tracker after the last step, must be exactly its
 * shard (the whole model's buffer is given back while training). clip: clip= across the shards'
 * norm shares; dropout: the GPT with dropout, whose masks sit on replicated activations and must be
 * one process's; resume: 8 steps with a checkpoint, then to 16 from it on the same layout, against
 * 16 steps of one process (the checkpoint is whole-model safetensors with the whole optimizer).
 * sgd: SGD with momentum, every weight within 1e-5. The GPT under dp x tp runs it rather than Adam:
 * the gradient of an attention key's bias is exactly zero in exact arithmetic (a shift of every key
 * cancels in the softmax), so what it holds is rounding, which the order of the dp average changes,
 * and Adam's g / sqrt(v) turns any such noise into a step of ~lr: 1e-5 of the whole norm after one
 * step (measured: 9.2e-6 at dp=2 x tp=2; dp=2 alone 3.3e-6), not a difference in what is trained. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/pg/pg.h"
#include "dist/train/dtrain.h"
#include "engine/data/source.h"
#include "engine/nn/spec.h"
#include "engine/nn/tp.h"
#include "tests/dist/forkranks.h"
#include "tests/rs_test.h"

typedef struct job {
    const char *backend, *mode, *model;
    int tp, steps, total_steps;
    char spec[160];
    const char *data;
    const char *ckpt, *resume;
} job;

typedef struct watch {
    rs_model *m;
    int64_t live[RS_POOL_COUNT];
    int comm_all_reduce; /* tp all-reduces seen (the comm spans with an index) */
} watch;

static void on_comm(void *ud, int64_t step, const char *op, int index, size_t bytes, double t0, double t1)
{
    watch *w = ud;
    (void)step, (void)bytes, (void)t0, (void)t1;
    if (!strcmp(op, "all_reduce") && index >= 0) w->comm_all_reduce++;
}

static void on_event(void *ud, const rs_train_event *ev)
{
    watch *w = ud;
    if (ev->kind == RS_TRAIN_EV_STEP)
        for (int p = 0; p < RS_POOL_COUNT; p++) w->live[p] = rs_model_mem(w->m)->live[p];
}

static rs_train_cfg cfg_for(const job *j, int steps)
{
    rs_train_cfg c = rs_train_defaults();
    c.batch = 8;
    c.max_steps = steps;
    c.seed = 7;
    c.eval = false;
    c.opt = rs_opt_defaults(RS_OPT_ADAMW);
    c.opt.lr = 3e-3f;
    c.opt.groups = !strcmp(j->model, "gpt");
    if (!strcmp(j->mode, "clip")) c.clip = 0.05f; /* small enough that every step clips */
    if (!strcmp(j->mode, "sgd")) {
        c.opt = rs_opt_defaults(RS_OPT_SGD);
        c.opt.lr = 0.05f;
        c.opt.momentum = 0.9f;
    }
    return c;
}

/* ||a-b|| / ||b||, and the worst element |a-b| / (|b| + 1e-2). */
static double rel_diff(const float *a, const float *b, size_t n, double *worst)
{
    double num = 0, den = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i], e = fabs(d) / (fabs((double)b[i]) + 1e-2);
        num += d * d;
        den += (double)b[i] * (double)b[i];
        *worst = e > *worst ? e : *worst;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int rank_main(void *ud, int rank, int world, rs_store *st)
{
    job *j = ud;
    rs_err e = {0};
    rs_pg *g = NULL;
    rs_model *m = NULL;
    rs_data_pair data = {0};
    watch w = {0};
    if (rs_pg_new(j->backend, st, "tensor", rank, world, 30, &g, &e) ||
        rs_model_parse(j->spec, "m", rs_device_cpu(), NULL, 11, &m, NULL, &e) || rs_data_open(j->data, 3, &data, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        return 2;
    }
    if (rank) { /* the strategy must cut every shard from rank 0's weights */
        float *p = rs_model_params(m);
        for (size_t i = 0; i < rs_model_numel(m); i++) p[i] += 0.5f;
    }
    rs_tp_plan *plan = NULL;
    if (rs_tp_plan_new(m, j->tp, &plan, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        return 2;
    }
    size_t shard_bytes = rs_tp_shard_numel(plan, rank % j->tp) * sizeof(float);
    rs_dtrain_cfg dc = rs_dtrain_defaults();
    dc.tp = j->tp;
    rs_train_strategy sg;
    w.m = m;
    if (rs_tensor_strategy(g, m, &dc, on_comm, &w, &sg, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        return 2;
    }
    rs_train_cfg cfg = cfg_for(j, j->steps);
    cfg.strategy = &sg;
    cfg.ckpt_path = j->ckpt;
    cfg.resume = j->resume;
    rs_train_hooks hooks = {.on_event = on_event, .ud = &w};
    rs_train_result res;
    if (rs_train(m, &data, &cfg, &hooks, &res, &e)) {
        fprintf(stderr, "rank %d: train: %s\n", rank, e.msg);
        return 1;
    }
    RS_CHECK(res.global_step == cfg.max_steps, "rank %d: %lld steps", rank, (long long)res.global_step);
    /* measured: a rank's parameters are its shard and nothing else (the whole buffer is given back) */
    RS_CHECK(w.live[RS_POOL_PARAMS] == (int64_t)shard_bytes, "rank %d: %lld bytes of parameters after the last step, "
             "its shard is %zu", rank, (long long)w.live[RS_POOL_PARAMS], shard_bytes);
    /* one all-reduce in forward and one in backward per pair, every step; the MLP's pair reads the
     * model's input, which needs no gradient, so its tp_copy has nothing to all-reduce in backward */
    int per_pair = !strcmp(j->model, "mlp") ? 1 : 2;
    int want_ar = j->tp > 1 ? per_pair * rs_tp_plan_pairs(plan) * (int)res.steps : 0;
    RS_CHECK(w.comm_all_reduce == want_ar, "rank %d: %d tensor-parallel all-reduces, want %d", rank,
             w.comm_all_reduce, want_ar);
    if (rank == 0) {
        printf("tensor %s %s world %d tp %d %s: %zu parameter bytes per rank (rank 0), %d all-reduces\n", j->model,
               j->backend, world, j->tp, j->mode, shard_bytes, w.comm_all_reduce);
        if (!j->ckpt) {
            rs_model *ref = NULL;
            if (rs_model_parse(j->spec, "ref", rs_device_cpu(), NULL, 11, &ref, NULL, &e)) {
                fprintf(stderr, "%s\n", e.msg);
                return 2;
            }
            rs_train_cfg one = cfg_for(j, j->total_steps ? j->total_steps : j->steps);
            if (rs_train(ref, &data, &one, NULL, &res, &e)) {
                fprintf(stderr, "reference: %s\n", e.msg);
                return 1;
            }
            double worst, d = rel_diff(rs_model_params(m), rs_model_params(ref), rs_model_numel(m), &worst);
            printf("tensor %s %s world %d tp %d %s: weights differ from one process by %.3g (worst element %.3g) "
                   "after %lld steps\n", j->model, j->backend, world, j->tp, j->mode, d, worst,
                   (long long)res.global_step);
            RS_CHECK(d <= 1e-5, "weights differ from one process by %.3g (relative)", d);
            /* without Adam's division by sqrt(v), every single weight agrees too */
            if (!strcmp(j->mode, "sgd")) RS_CHECK(worst <= 1e-5, "a weight differs by %.3g (relative)", worst);
            rs_model_free(ref);
        }
    }
    rs_tp_plan_free(plan);
    rs_model_free(m);
    rs_data_pair_clear(&data);
    rs_pg_destroy(g);
    return rs_test_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: test-tensor shm|tcp|mpi WORLD TP mlp|gpt [plain|clip|dropout|resume|sgd] [STEPS]\n");
        return 2;
    }
    job j = {.backend = argv[1], .tp = atoi(argv[3]), .model = argv[4], .mode = argc > 5 ? argv[5] : "plain",
             .steps = 12};
    int world = atoi(argv[2]);
    if (argc > 6) j.steps = atoi(argv[6]); /* by hand: how the difference grows with the steps */
    if (!strcmp(j.model, "gpt")) {
        j.data = "text:builtin,ctx=16";
        rs_data_pair d = {0};
        rs_err e = {0};
        if (rs_data_open(j.data, 3, &d, &e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 2;
        }
        snprintf(j.spec, sizeof j.spec, "gpt layers=2 heads=4 dim=16 ctx=16 vocab=%d%s", d.train->n_classes,
                 !strcmp(j.mode, "dropout") ? " dropout=0.1" : "");
        rs_data_pair_clear(&d);
    } else {
        j.data = "digits:2400";
        snprintf(j.spec, sizeof j.spec, "mlp 784-64-32-10");
    }
    if (!strcmp(j.mode, "resume")) {
        char path[] = "/tmp/ringside-tensor-XXXXXX", file[64], optim[80];
        if (!mkdtemp(path)) return 2;
        snprintf(file, sizeof file, "%s/c.safetensors", path);
        snprintf(optim, sizeof optim, "%s/c.optim.safetensors", path);
        job first = j;
        first.steps = 8;
        first.ckpt = file;
        int bad = rs_fork_ranks(world, rank_main, &first, NULL, NULL);
        RS_CHECK(bad == 0, "first run: %d ranks failed", bad);
        job second = j;
        second.steps = 16;
        second.resume = file;
        bad = rs_fork_ranks(world, rank_main, &second, NULL, NULL);
        RS_CHECK(bad == 0, "resumed run: %d ranks failed", bad);
        unlink(file);
        unlink(optim);
        rmdir(path);
        return rs_test_finish("test-tensor");
    }
    int bad = rs_fork_ranks(world, rank_main, &j, NULL, NULL);
    RS_CHECK(bad == 0, "%d ranks failed", bad);
    return rs_test_finish("test-tensor");
}
