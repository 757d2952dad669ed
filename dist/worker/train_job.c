/* The `train` job: one rank of `train m on d mode=NAME ranks=N`, for every mode the registry of
 * strategies (dist/train/registry.h) gives a factory. The REPL hands over the model spec and its
 * current weights (a safetensors file), the data source and seed, the mode with its own options and
 * every other option; each rank builds the same model, joins the group, trains its share with the
 * strategy the mode's factory makes, and reports
 * phases, collectives, loss and memory as '@' lines (worker.h). Rank 0 writes the trained weights where
 * the REPL reads them back. */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "dist/launch/rank_status.h"
#include "dist/store/store.h"
#include "dist/train/dtrain.h"
#include "dist/train/registry.h"
#include "engine/ckpt/checkpoint.h"
#include "engine/cuda/cuda.h"
#include "engine/data/source.h"
#include "engine/nn/spec.h"
#include "worker.h"

typedef struct tjob {
    FILE *out, *errf;
    int rank;
    /* options of every run */
    const char *backend, *group, *spec, *data, *init, *outp, *ckpt, *resume;
    uint64_t data_seed, model_seed, seed;
    int accum, epochs, batch, warmup, threads, eval, nesterov;
    int64_t steps, step_size, ckpt_every, eval_every, eval_samples;
    double beta1, beta2; /* Adam's, when has_betas */
    bool has_betas;
    int drop_last;
    double lr, momentum, wd, gamma, min_lr, timeout, clip, loss_scale;
    int groups;
    int64_t inject_inf;
    rs_prec precision;
    const char *opt, *sched;
    bool store_from_launcher, has_lr, has_wd;
    /* the mode and its own options, as the registry declares them (dist/train/registry.h) */
    rs_strategy_args sargs;
    int64_t die_rank, die_step; /* kill=RANK:STEP (or RINGSIDE_TEST_KILL): that rank dies after that step */
    int64_t spin_rank, spin_step; /* RINGSIDE_FAULT=RANK:spin@STEP: that rank computes forever (a hang) */
    struct rs_rank_status *status; /* this rank's slot on the launcher's board, or NULL */
} tjob;

static bool num(const char *v, double *out)
{
    char *end;
    *out = strtod(v, &end);
    return *v && !*end && isfinite(*out);
}

/* The mode first (its options are read against its declaration, wherever mode= stands on the line):
 * an unknown mode, or one that runs in the REPL's own process, is refused, never replaced by another. */
static int parse_mode(tjob *j, int argc, char **argv)
{
    const char *mode = NULL;
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "mode=", 5)) {
            if (mode) {
                fprintf(j->errf, "ringside --worker train: mode= is given twice\n");
                return 2;
            }
            mode = argv[i] + 5;
        }
    char names[256];
    rs_strategy_names(names, sizeof names, true);
    if (!mode) {
        fprintf(j->errf, "ringside --worker train: needs mode= (one of %s)\n", names);
        return 2;
    }
    const rs_strategy_def *d = rs_strategy_find(mode);
    if (!d || !d->make) {
        fprintf(j->errf, "ringside --worker train: %s mode '%s'; ranks train with one of %s\n",
                d ? "the REPL runs" : "unknown", mode, names);
        return 2;
    }
    rs_strategy_args_init(&j->sargs, d);
    return 0;
}

static int parse(tjob *j, int argc, char **argv)
{
    int rc = parse_mode(j, argc, argv);
    if (rc) return rc;
    for (int i = 1; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(j->errf, "ringside --worker train: '%s' is not key=value\n", argv[i]);
            return 2;
        }
        size_t kl = (size_t)(eq - argv[i]);
        const char *v = eq + 1;
        double d = 0;
#define KEY(k) (kl == strlen(k) && !strncmp(argv[i], k, kl))
        bool good = true, common = true;
        if (KEY("backend")) j->backend = v;
        else if (KEY("mode")) continue; /* read first */
        else if (KEY("group")) j->group = v;
        else if (KEY("spec")) j->spec = v;
        else if (KEY("data")) j->data = v;
        else if (KEY("init")) j->init = v;
        else if (KEY("out")) j->outp = v;
        else if (KEY("ckpt")) j->ckpt = v;
        else if (KEY("resume")) j->resume = v;
        else if (KEY("opt")) j->opt = v;
        else if (KEY("sched")) j->sched = v;
        else if (KEY("kill")) {
            long long kr, ks;
            if ((good = sscanf(v, "%lld:%lld", &kr, &ks) == 2)) j->die_rank = kr, j->die_step = ks;
        }
        else if (KEY("store")) j->store_from_launcher = !strcmp(v, "launcher");
        else if (KEY("precision")) good = rs_prec_parse(v, &j->precision);
        else if (KEY("data_seed") || KEY("model_seed") || KEY("seed") || KEY("accum") || KEY("epochs") ||
                 KEY("batch") || KEY("warmup") || KEY("threads") || KEY("eval") || KEY("nesterov") ||
                 KEY("steps") || KEY("step_size") || KEY("ckpt_every") || KEY("lr") || KEY("momentum") ||
                 KEY("wd") || KEY("gamma") || KEY("min_lr") || KEY("timeout") || KEY("clip") || KEY("groups") ||
                 KEY("eval_every") || KEY("eval_samples") || KEY("loss_scale") || KEY("inject_inf") ||
                 KEY("beta1") || KEY("beta2") || KEY("drop_last")) {
            if (!(good = num(v, &d))) ;
            else if (KEY("data_seed")) j->data_seed = (uint64_t)d;
            else if (KEY("model_seed")) j->model_seed = (uint64_t)d;
            else if (KEY("seed")) j->seed = (uint64_t)d;
            else if (KEY("accum")) j->accum = (int)d;
            else if (KEY("epochs")) j->epochs = (int)d;
            else if (KEY("batch")) j->batch = (int)d;
            else if (KEY("warmup")) j->warmup = (int)d;
            else if (KEY("threads")) j->threads = (int)d;
            else if (KEY("eval")) j->eval = (int)d;
            else if (KEY("nesterov")) j->nesterov = (int)d;
            else if (KEY("steps")) j->steps = (int64_t)d;
            else if (KEY("step_size")) j->step_size = (int64_t)d;
            else if (KEY("ckpt_every")) j->ckpt_every = (int64_t)d;
            else if (KEY("lr")) j->lr = d, j->has_lr = true;
            else if (KEY("momentum")) j->momentum = d;
            else if (KEY("wd")) j->wd = d, j->has_wd = true;
            else if (KEY("gamma")) j->gamma = d;
            else if (KEY("min_lr")) j->min_lr = d;
            else if (KEY("timeout")) j->timeout = d;
            else if (KEY("clip")) j->clip = d;
            else if (KEY("groups")) j->groups = (int)d;
            else if (KEY("eval_every")) j->eval_every = (int64_t)d;
            else if (KEY("eval_samples")) j->eval_samples = (int64_t)d;
            else if (KEY("loss_scale")) j->loss_scale = d;
            else if (KEY("inject_inf")) j->inject_inf = (int64_t)d;
            else if (KEY("beta1")) j->beta1 = d, j->has_betas = true;
            else if (KEY("beta2")) j->beta2 = d, j->has_betas = true;
            else if (KEY("drop_last")) j->drop_last = (int)d;
        } else {
            common = false;
        }
#undef KEY
        if (!good) {
            fprintf(j->errf, "ringside --worker train: bad value in '%s' (expected a number)\n", argv[i]);
            return 2;
        }
        if (common) continue;
        /* the mode's own option, checked against its declaration: anything else is refused */
        char key[64];
        rs_err e = {0};
        snprintf(key, sizeof key, "%.*s", (int)(kl < sizeof key ? kl : sizeof key - 1), argv[i]);
        if (rs_strategy_args_set(&j->sargs, key, v, &e)) {
            fprintf(j->errf, "ringside --worker train: %s\n", e.msg);
            return 2;
        }
    }
    if (!j->spec || !j->data) {
        fprintf(j->errf, "ringside --worker train: needs spec= and data=\n");
        return 2;
    }
    return 0;
}

typedef struct watch {
    struct tjob *j;
    rs_model *m;
    rs_store *store;  /* where rank 0 posts the step every rank stops after; NULL under mpirun */
    int64_t step;     /* steps finished (the global count, resumes included) */
    int64_t stop_at;  /* -1 until a stop is agreed */
} watch;

/* The launcher's SIGTERM (Ctrl-C or `jobs stop` in the REPL) asks for a stop at a step boundary, so
 * that rank 0 can hand back the weights of the last finished step. */
static volatile sig_atomic_t term_asked;
static void on_term(int sig)
{
    (void)sig;
    term_asked = 1;
}

#define STOP_KEY "train/stop_at"

/* Polled before each step. The ranks must stop after the same step (the gather that follows is a
 * collective), so rank 0 decides: when asked, it posts "one more step" to the store before starting
 * that step; no other rank can finish that step before the post (the step's collectives need rank
 * 0), so each one sees it, at the latest, when it reaches the same boundary. */
static bool should_stop(void *ud)
{
    watch *w = ud;
    if (w->stop_at < 0 && w->j->rank == 0 && term_asked) {
        char v[32];
        int n = snprintf(v, sizeof v, "%lld", (long long)(w->step + 1));
        rs_err e = {0};
        if (!rs_store_set(w->store, STOP_KEY, v, (size_t)n, &e)) w->stop_at = w->step + 1;
    } else if (w->stop_at < 0 && w->j->rank != 0) {
        int exists = 0;
        rs_err e = {0};
        void *val = NULL;
        size_t n = 0;
        if (!rs_store_check(w->store, STOP_KEY, &exists, &e) && exists &&
            !rs_store_get(w->store, STOP_KEY, &val, &n, 5, &e))
            w->stop_at = strtoll(val, NULL, 10);
        free(val);
    }
    return w->stop_at >= 0 && w->step >= w->stop_at;
}

static void on_phase(void *ud, int64_t step, rs_phase p, double t0, double t1)
{
    tjob *j = ((watch *)ud)->j;
    fprintf(j->out, "@phase %d %lld %s %.9f %.9f\n", j->rank, (long long)step, rs_phase_name(p), t0, t1);
    rs_rank_status_phase(j->status, step, (int)p);
    if (j->rank == j->spin_rank && step == j->spin_step && p == RS_PHASE_FORWARD) {
        fflush(j->out);
        fprintf(j->errf, "rank %d: RINGSIDE_FAULT: computing forever after step %lld's forward (a hang to "
                "practise on)\n", j->rank, (long long)step);
        fflush(j->errf);
        for (volatile uint64_t busy = 0;; busy++) {} /* the fault tests' hang: computing, never communicating */
    }
}

/* A micro-batch's forward or backward on a pipeline stage. */
static void on_work(void *ud, int64_t step, char kind, int micro, int stage, double t0, double t1)
{
    tjob *j = ud;
    fprintf(j->out, "@micro %d %lld %c %d %d %.9f %.9f\n", j->rank, (long long)step, kind, micro, stage, t0, t1);
}

static void on_metric(void *ud, int64_t step, const char *name, double value)
{
    tjob *j = ud;
    fprintf(j->out, "@metric %d %lld %s %.9g\n", j->rank, (long long)step, name, value);
}

static void on_stage(void *ud, int stage, int stages, int first, int last)
{
    tjob *j = ud;
    fprintf(j->out, "@stage %d %d %d %d %d\n", j->rank, stage, stages, first, last);
}

/* From the communication thread too: one fprintf per line, which stdio keeps whole. */
static void on_comm(void *ud, int64_t step, const char *op, int index, size_t bytes, double t0, double t1)
{
    tjob *j = ud;
    fprintf(j->out, "@comm %d %lld %s %d %zu %.9f %.9f\n", j->rank, (long long)step, op, index, bytes, t0, t1);
}

static void on_event(void *ud, const rs_train_event *ev)
{
    watch *w = ud;
    tjob *j = w->j;
    if (ev->kind == RS_TRAIN_EV_BEGIN || ev->kind == RS_TRAIN_EV_STEP) w->step = ev->step;
    if (ev->kind == RS_TRAIN_EV_STEP) rs_rank_status_phase(j->status, ev->step, -1);
    if (ev->kind == RS_TRAIN_EV_STEP && j->rank == j->die_rank && ev->step == j->die_step) {
        fflush(j->out);
        raise(SIGKILL); /* the fault tests: kill -9 in the middle of a run */
    }
    if (ev->kind == RS_TRAIN_EV_STEP) {
        fprintf(j->out, "@step %d %lld %d %.9g %.9g %.6g\n", j->rank, (long long)ev->step, ev->epoch, (double)ev->loss,
                (double)ev->lr, ev->samples_per_s);
        const rs_mem *mem = rs_model_mem(w->m);
        fprintf(j->out, "@mem %d %lld", j->rank, (long long)ev->step);
        for (int p = 0; p < RS_POOL_COUNT; p++) fprintf(j->out, " %lld", (long long)mem->live[p]);
        for (int p = 0; p < RS_POOL_COUNT; p++) fprintf(j->out, " %lld", (long long)mem->peak[p]);
        fputc('\n', j->out);
        fflush(j->out);
    } else if (ev->kind == RS_TRAIN_EV_CKPT) {
        fprintf(j->out, "@ckpt %d %lld\n", j->rank, (long long)ev->step);
        fflush(j->out);
    } else if (ev->kind == RS_TRAIN_EV_EVAL) {
        if (ev->rows > 1) { /* a language model: the REPL prints its evaluation as one process does */
            on_metric(j, ev->step, "lm_train_loss", ev->train_eval_loss >= 0 ? ev->train_eval_loss : ev->epoch_loss);
            on_metric(j, ev->step, "lm_tokens_per_s", ev->samples_per_s * ev->rows); /* this rank's */
        }
        fprintf(j->out, "@eval %d %d %.9g %.9g\n", j->rank, ev->epoch, ev->test_acc, ev->test_loss);
        fflush(j->out);
    }
}

static rs_train_cfg train_cfg(const tjob *j, rs_err *err, rs_status *st)
{
    rs_train_cfg c = rs_train_defaults();
    rs_opt_kind kind = RS_OPT_ADAM;
    *st = j->opt ? rs_opt_kind_parse(j->opt, &kind, err) : RS_OK;
    c.opt = rs_opt_defaults(kind);
    if (j->has_lr) c.opt.lr = (float)j->lr;
    c.opt.momentum = (float)j->momentum;
    c.opt.nesterov = j->nesterov;
    if (j->has_wd) c.opt.weight_decay = (float)j->wd;
    if (j->sched && !strcmp(j->sched, "step")) c.sched.kind = RS_SCHED_STEP;
    else if (j->sched && !strcmp(j->sched, "cosine")) c.sched.kind = RS_SCHED_COSINE;
    c.sched.warmup = j->warmup;
    c.sched.step_size = j->step_size ? j->step_size : 1000;
    c.sched.gamma = j->gamma > 0 ? (float)j->gamma : 0.1f;
    c.sched.min_lr = (float)j->min_lr;
    c.epochs = j->epochs ? j->epochs : 1;
    c.batch = j->batch ? j->batch : 64;
    c.max_steps = j->steps;
    c.seed = j->seed;
    c.threads = j->threads ? j->threads : 1;
    c.eval = j->eval;
    c.accum = j->accum;
    c.clip = (float)j->clip;
    c.precision = j->precision;
    c.loss_scale = (float)j->loss_scale;
    c.inject_inf = j->inject_inf;
    c.opt.groups = j->groups != 0;
    if (j->has_betas) c.opt.beta1 = (float)j->beta1, c.opt.beta2 = (float)j->beta2;
    c.drop_last = j->drop_last != 0;
    c.eval_every = j->eval_every;
    c.eval_samples = j->eval_samples;
    c.ckpt_path = j->ckpt;
    c.ckpt_every = j->ckpt_every;
    c.resume = j->resume;
    return c;
}

int rs_worker_train(int argc, char **argv, FILE *out, FILE *errf)
{
    tjob j = {.out = out, .errf = errf, .backend = "shm", .group = "train", .timeout = 30, .eval = 1, .accum = 1,
              .die_rank = -1, .spin_rank = -1};
    const char *kill = getenv("RINGSIDE_TEST_KILL"); /* the tests' way; `train ... kill=R:S` overrides it */
    long long kr, ks;
    if (kill && sscanf(kill, "%lld:%lld", &kr, &ks) == 2) j.die_rank = kr, j.die_step = ks;
    /* a testing aid (docs/dist.md, "Faults"): read here only, at the rank's start */
    const char *fault = getenv("RINGSIDE_FAULT");
    if (fault && sscanf(fault, "%lld:spin@%lld", &kr, &ks) == 2) j.spin_rank = kr, j.spin_step = ks;
    int rc = parse(&j, argc, argv);
    if (rc) return rc;
    /* a layout the ranks cannot make (pipeline's dp x pp x tp) is refused before joining any group, when
     * the launcher's WORLD_SIZE says how many ranks there are; every rank checks again with the model */
    const char *ws = getenv("WORLD_SIZE");
    if (ws && atoi(ws) > 0 && j.sargs.def->check) {
        rs_err e0 = {0};
        rs_status s0 = RS_OK;
        rs_train_cfg c0 = train_cfg(&j, &e0, &s0);
        if (!s0) s0 = j.sargs.def->check(&j.sargs, NULL, atoi(ws), &c0, &e0);
        if (s0) {
            fprintf(errf, "ringside --worker train: %s\n", e0.msg);
            return 2;
        }
    }
    rs_worker_conn conn;
    rc = rs_worker_join(j.backend, j.group, j.timeout, j.store_from_launcher, errf, &conn);
    j.rank = conn.rank;
    j.status = conn.status;
    rs_err e = {0};
    rs_model *m = NULL;
    rs_data_pair data = {0};
    rs_status st = RS_OK;
    if (!rc) {
        size_t pos = 0;
        /* A GPU backend's ranks train on their GPUs: the one the group chose (LOCAL_RANK mod the GPUs, as
         * torchrun's ranks do with torch.cuda.set_device(local_rank)); host backends' on the CPU. */
        rs_device dev = rs_device_cpu();
        if (!(conn.g->ops->devices & RS_PG_DEV_CPU)) {
            int gpu = rs_pg_gpu(conn.g);
            st = gpu < 0 ? rs_err_set(&e, RS_ERR_UNSUPPORTED, "backend %s has no GPU for this rank", j.backend)
                         : rs_cuda_use(gpu, &e);
            dev = (rs_device){RS_DEV_CUDA, gpu};
        }
        if (!st) st = rs_model_parse(j.spec, "m", dev, NULL, j.model_seed, &m, &pos, &e);
        /* Rank 0 starts from the REPL's weights; DDP's broadcast (or ZeRO's) gives them to the others. */
        if (!st && j.init && j.rank == 0) st = rs_ckpt_load_model(j.init, m, &e);
        if (!st) st = rs_data_open(j.data, j.data_seed, &data, &e);
        if (st) {
            fprintf(errf, "rank %d: %s\n", j.rank, e.msg);
            rc = 1;
        }
    }
    if (!rc) {
        rs_train_cfg cfg = train_cfg(&j, &e, &st);
        rs_train_strategy sg;
        const rs_strategy_def *sd = j.sargs.def;
        rs_strategy_ctx ctx = {.g = conn.g, .m = m, .args = &j.sargs, .cfg = &cfg, .comm = on_comm, .comm_ud = &j,
                               .work = on_work, .work_ud = &j, .metric = on_metric, .stage = on_stage, .ud = &j};
        if (!st && sd->check) st = sd->check(&j.sargs, m, conn.world, &cfg, &e);
        if (!st) st = sd->make(&ctx, &sg, &e);
        if (!st) {
            cfg.strategy = &sg;
            /* cfg.eval stays on every rank: the loop gathers the parameters on all of them (a collective)
             * and evaluates only on the reporting one */
            watch w = {.j = &j, .m = m, .store = conn.store, .stop_at = -1};
            rs_train_hooks hooks = {.on_event = on_event, .on_phase = on_phase, .ud = &w,
                                    .should_stop = conn.store ? should_stop : NULL};
            if (conn.store)
                sigaction(SIGTERM, &(struct sigaction){.sa_handler = on_term, .sa_flags = SA_RESTART}, NULL);
            rs_train_result res;
            st = rs_train(m, &data, &cfg, &hooks, &res, &e);
            /* stopped or not, the model holds the last finished step: rank 0 hands it back */
            if (!st) {
                fprintf(out, "@done %d %lld %.6f %.6g\n", j.rank, (long long)res.global_step, res.seconds,
                        res.samples_per_s);
                if (j.rank == 0 && cfg.precision == RS_PREC_FP16)
                    fprintf(out, "fp16: %lld step%s skipped, loss scale %g\n", (long long)res.skipped,
                            res.skipped == 1 ? "" : "s", (double)res.loss_scale);
                if (j.rank == 0 && j.outp) st = rs_ckpt_save_model(j.outp, m, &e);
            }
        }
        if (st) {
            fprintf(errf, "rank %d: train: %s\n", j.rank, e.msg);
            rc = 1;
        }
    }
    fflush(out);
    rs_worker_leave(&conn, rc == 0, j.timeout);
    rs_model_free(m);
    rs_data_pair_clear(&data);
    return rc;
}
