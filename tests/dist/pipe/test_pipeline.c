/* mode=pipeline against one process: `test-pipeline BACKEND RANKS SCHEDULE MICRO [virtual=V] [gpt]
 * [split=...] [partition=time] [memory] [resume]`. Every rank makes the strategy through the registry
 * (as the worker does), trains its stages on the whole global batch, and rank 0, which gathered the
 * whole model, trains a copy in one process with the same global batch and compares:
 * ||a-b||/||b|| <= 1e-5 (the micro-batches' gradients add in another order than one batch's). The
 * GPT's head reads the token embedding from another stage: unless the two gradients are summed on
 * both ranks, the weights part. Each rank's activation sets held at once are the schedule's count
 * (GPipe m, 1F1B p - rank). `memory` trains gpipe and 1f1b one after the other on every rank and
 * compares the ACTS bytes each held; `resume` stops with a checkpoint and goes on from it on another
 * number of ranks with another schedule. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/pg/pg.h"
#include "dist/train/pipe_sched.h"
#include "dist/train/registry.h"
#include "engine/data/source.h"
#include "engine/nn/spec.h"
#include "tests/dist/forkranks.h"
#include "tests/dist/rankmodel.h"
#include "tests/rs_test.h"

typedef struct job {
    const char *backend, *schedule, *spec, *data, *split, *balance;
    int micro, V, batch, steps, total_steps;
    bool gpt, memory;
    const char *ckpt, *resume;
} job;

typedef struct figs {
    double peak_bytes, inflight, set_bytes;
} figs;

static void on_metric(void *ud, int64_t step, const char *name, double v)
{
    figs *f = ud;
    (void)step;
    double *d = !strcmp(name, "acts_peak_bytes") ? &f->peak_bytes
                : !strcmp(name, "acts_inflight")  ? &f->inflight
                : !strcmp(name, "act_set_bytes")  ? &f->set_bytes
                                                  : NULL;
    if (d && v > *d) *d = v;
}

static rs_train_cfg cfg_for(const job *j, int steps)
{
    rs_train_cfg c = rs_train_defaults();
    c.batch = j->batch;
    c.max_steps = steps;
    c.seed = 7;
    c.eval = false;
    c.opt.lr = 3e-3f;
    if (j->gpt) {
        /* nanoGPT's recipe: AdamW with its decay group and clipping (a global norm over the stages) */
        c.opt = rs_opt_defaults(RS_OPT_ADAMW);
        c.opt.lr = 3e-3f;
        c.opt.weight_decay = 0.1f;
        c.opt.groups = true;
        c.clip = 0.5f;
    }
    return c;
}

/* One training run of schedule `schedule` on this rank; figures of its activations into *f. */
static int train_pipe(const job *j, const char *schedule, int micro, rs_pg *g, rs_model *m, rs_data_pair *data,
                      figs *f)
{
    rs_err e = {0};
    rs_strategy_args a;
    rs_strategy_args_init(&a, &rs_strategy_pipeline);
    char mv[16], vv[16];
    snprintf(mv, sizeof mv, "%d", micro);
    snprintf(vv, sizeof vv, "%d", j->V);
    if (rs_strategy_args_set(&a, "schedule", schedule, &e) || rs_strategy_args_set(&a, "micro", mv, &e) ||
        (!strcmp(schedule, "interleaved") && rs_strategy_args_set(&a, "virtual", vv, &e)) ||
        (j->split && rs_strategy_args_set(&a, "split", j->split, &e)) ||
        (j->balance && rs_strategy_args_set(&a, "partition", j->balance, &e))) {
        fprintf(stderr, "rank %d: %s\n", g->rank, e.msg);
        return 2;
    }
    rs_train_cfg cfg = cfg_for(j, j->steps);
    cfg.ckpt_path = j->ckpt;
    cfg.resume = j->resume;
    rs_strategy_ctx ctx = {.g = g, .m = m, .args = &a, .cfg = &cfg, .metric = on_metric, .ud = f};
    rs_train_strategy sg;
    if (rs_strategy_pipeline.check(&a, m, g->world, &cfg, &e) || rs_strategy_pipeline.make(&ctx, &sg, &e)) {
        fprintf(stderr, "rank %d: %s\n", g->rank, e.msg);
        return 2;
    }
    cfg.strategy = &sg;
    rs_train_result res;
    if (rs_train(m, data, &cfg, NULL, &res, &e)) {
        fprintf(stderr, "rank %d: train: %s\n", g->rank, e.msg);
        return 1;
    }
    RS_CHECK(res.global_step == (j->total_steps && j->resume ? j->total_steps : j->steps), "rank %d: %lld steps",
             g->rank, (long long)res.global_step);
    return 0;
}

static int rank_main(void *ud, int rank, int world, rs_store *st)
{
    job *j = ud;
    rs_err e = {0};
    rs_pg *g = NULL;
    rs_model *m = NULL, *ref = NULL;
    rs_data_pair data = {0};
    /* other initial weights elsewhere: the stages must start from rank 0's */
    if (rs_test_rank_model(j->backend, st, "pipe", rank, world, j->spec, j->data, &g, &m, &data)) return 2;
    rs_pipe_kind kind;
    rs_pipe_kind_from_name(j->schedule, &kind);
    int V = kind == RS_PIPE_INTERLEAVED ? j->V : 1;
    figs f = {0};
    int rc = train_pipe(j, j->schedule, j->micro, g, m, &data, &f);
    if (rc) return rc;
    int want = rs_pipe_peak_inflight(kind, world, j->micro, V, rank);
    printf("rank %d: %s held up to %.0f activation sets at once (the schedule: %d), %.0f bytes in flight, %.0f a set\n",
           rank, j->schedule, f.inflight, want, f.peak_bytes, f.set_bytes);
    RS_CHECK(f.inflight == want, "rank %d: %.0f sets in flight, the schedule holds %d", rank, f.inflight, want);
    /* one stage per rank: its sets are alike (interleaved: the largest set of its stages) */
    RS_CHECK(f.peak_bytes >= (V == 1 ? f.inflight : 1) * f.set_bytes && f.set_bytes > 0,
             "rank %d: %.0f bytes for %.0f sets of %.0f", rank, f.peak_bytes, f.inflight, f.set_bytes);

    if (j->memory) {
        /* the other schedule on a fresh copy: 1F1B holds at most p micro-batches' activations, GPipe m */
        rs_model *m2 = NULL;
        figs f2 = {0};
        if (rs_model_parse(j->spec, "m2", rs_device_cpu(), NULL, 11, &m2, NULL, &e)) return 2;
        rc = train_pipe(j, "gpipe", j->micro, g, m2, &data, &f2);
        if (rc) return rc;
        /* the largest boundary a stage can receive, for the inputs it holds beside its sets */
        size_t biggest = 0;
        for (int i = 0; i < rs_model_layer_count(m2); i++) {
            size_t n = (size_t)rs_shape_numel(&rs_model_layer(m2, i)->out);
            if (n > biggest) biggest = n;
        }
        double input = (double)biggest * sizeof(float) * ((j->batch + j->micro - 1) / j->micro);
        printf("rank %d: activations in flight: 1f1b %.0f bytes (%.0f sets), gpipe %.0f bytes (%.0f sets)\n", rank,
               f.peak_bytes, f.inflight, f2.peak_bytes, f2.inflight);
        RS_CHECK(f.inflight <= world && f2.inflight == j->micro, "rank %d: 1f1b %.0f sets (<= %d), gpipe %.0f (== %d)",
                 rank, f.inflight, world, f2.inflight, j->micro);
        RS_CHECK(f2.peak_bytes >= j->micro * f2.set_bytes, "rank %d: gpipe held %.0f bytes, less than %d sets of %.0f",
                 rank, f2.peak_bytes, j->micro, f2.set_bytes);
        RS_CHECK(f.peak_bytes <= (world - rank) * (f.set_bytes + input) + input,
                 "rank %d: 1f1b held %.0f bytes, more than %d sets and inputs of %.0f + %.0f", rank, f.peak_bytes,
                 world - rank, f.set_bytes, input);
        RS_CHECK(f.peak_bytes < f2.peak_bytes || j->micro <= world - rank, "rank %d: 1f1b held no less than gpipe", rank);
        rs_model_free(m2);
    }

    if (rank == 0 && !j->ckpt) {
        if (rs_model_parse(j->spec, "ref", rs_device_cpu(), NULL, 11, &ref, NULL, &e)) return 2;
        rs_train_cfg one = cfg_for(j, j->total_steps ? j->total_steps : j->steps);
        rs_train_result res;
        if (rs_train(ref, &data, &one, NULL, &res, &e)) {
            fprintf(stderr, "reference: %s\n", e.msg);
            return 1;
        }
        double d = rs_test_rel_diff(rs_model_params(m), rs_model_params(ref), rs_model_numel(m), NULL);
        printf("pipeline %s %s ranks=%d micro=%d virtual=%d %s: weights differ from one process by %.3g "
               "(||a-b||/||b||) after %lld steps\n",
               j->backend, j->schedule, world, j->micro, V, j->gpt ? "gpt" : "mlp", d, (long long)one.max_steps);
        RS_CHECK(d <= 1e-5, "weights differ from one process by %.3g (relative)", d);
        RS_CHECK(rs_model_step(m) == rs_model_step(ref) * (uint64_t)j->micro || j->resume,
                 "model step %llu: a micro-batch's forward each", (unsigned long long)rs_model_step(m));
        rs_model_free(ref);
    }
    rs_model_free(m);
    rs_data_pair_clear(&data);
    rs_pg_destroy(g);
    return rs_test_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: test-pipeline shm|tcp RANKS SCHEDULE MICRO [virtual=V] [gpt] [split=...] "
                        "[partition=time] [memory] [resume]\n");
        return 2;
    }
    job j = {.backend = argv[1], .schedule = argv[3], .micro = atoi(argv[4]), .V = 2, .spec = "mlp 784-64-32-10",
             .data = "digits:1200", .batch = 24, .steps = 12};
    int P = atoi(argv[2]);
    bool resume = false;
    for (int i = 5; i < argc; i++) {
        if (!strncmp(argv[i], "virtual=", 8)) j.V = atoi(argv[i] + 8);
        else if (!strncmp(argv[i], "split=", 6)) j.split = argv[i] + 6;
        else if (!strncmp(argv[i], "partition=", 10)) j.balance = argv[i] + 10;
        else if (!strcmp(argv[i], "memory")) j.memory = true;
        else if (!strcmp(argv[i], "resume")) resume = true;
        else if (!strcmp(argv[i], "gpt")) {
            j.gpt = true;
            j.spec = "gpt layers=2 heads=2 dim=16 ctx=16 vocab=50";
            j.data = "text:builtin,ctx=16";
            j.batch = 8;
            j.steps = 6;
        }
    }
    if (resume) {
        /* 6 steps with a checkpoint, then on another layout (ranks and schedule) to 12: the same weights as
         * one process for 12 steps */
        char path[] = "/tmp/ringside-pipe-XXXXXX", file[64], optim[80];
        if (!mkdtemp(path)) return 2;
        snprintf(file, sizeof file, "%s/c.safetensors", path);
        snprintf(optim, sizeof optim, "%s/c.optim.safetensors", path);
        job first = j;
        first.steps = j.steps / 2;
        first.ckpt = file;
        int bad = rs_fork_ranks(P, rank_main, &first, NULL, NULL);
        RS_CHECK(bad == 0, "first run: %d ranks failed", bad);
        job second = j;
        second.resume = file;
        second.total_steps = j.steps;
        second.schedule = !strcmp(j.schedule, "gpipe") ? "1f1b" : "gpipe";
        int P2 = P == 2 ? 3 : 2;
        printf("resuming on %d ranks with %s from a checkpoint written by %d ranks with %s\n", P2, second.schedule, P,
               j.schedule);
        bad = rs_fork_ranks(P2, rank_main, &second, NULL, NULL);
        RS_CHECK(bad == 0, "resumed run: %d ranks failed", bad);
        unlink(file);
        unlink(optim);
        rmdir(path);
        return rs_test_finish("test-pipeline");
    }
    int bad = rs_fork_ranks(P, rank_main, &j, NULL, NULL);
    RS_CHECK(bad == 0, "%d ranks failed", bad);
    return rs_test_finish("test-pipeline");
}
