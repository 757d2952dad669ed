/* Commands that run models: train, eval, predict. Training reports through the engine's observer
 * callback to the progress bar and the session log; Ctrl-C is polled between steps. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/pg/pg.h"
#include "dist/train/registry.h"
#include "ds_config.h"
#include "engine/cpu/amp.h"
#include "engine/train/dp.h"
#include "engine/train/train.h"
#include "plan/plan.h"
#include "progress.h"
#include "wrap.h"
#include "repl_log.h"
#include "result.h"
#include "session.h"

/* repl/cmd_train_ranks.c: training across rank processes (the modes with a factory in the registry). */
int rs_cmd_train_ranks(rs_session *s, const rs_call *c, rs_obj *m, rs_obj *d, const rs_train_cfg *cfg,
                       const rs_strategy_args *sa);

typedef struct train_watch {
    rs_session *s;
    rs_progress bar;
    int64_t run;
    double dp_phase[RS_DP_PHASE_COUNT]; /* mode=dp: seconds in each DataParallel phase */
} train_watch;

static void on_dp_phase(void *ud, int64_t step, rs_dp_phase p, int replica, double t0, double t1)
{
    train_watch *w = ud;
    (void)step;
    /* the replicas compute side by side: count replica 0's span as the wall time of the phase */
    if (p != RS_DP_COMPUTE || replica == 0) w->dp_phase[p] += t1 - t0;
}

static void on_event(void *ud, const rs_train_event *ev)
{
    train_watch *w = ud;
    rs_progress_event(&w->bar, ev);
    if (ev->kind == RS_TRAIN_EV_STEP) {
        rs_log_metric(w->s, w->run, ev->step, ev->epoch, "loss", ev->loss);
        rs_log_metric(w->s, w->run, ev->step, ev->epoch, "lr", ev->lr);
    } else if (ev->kind == RS_TRAIN_EV_EPOCH) {
        rs_log_metric(w->s, w->run, ev->step, ev->epoch, "train_loss", ev->epoch_loss);
        rs_log_metric(w->s, w->run, ev->step, ev->epoch, "train_acc", ev->epoch_acc);
        rs_log_metric(w->s, w->run, ev->step, ev->epoch, "samples_per_s", ev->samples_per_s);
        if (ev->prec == RS_PREC_FP16) { /* the loss scaler's figures */
            rs_log_metric(w->s, w->run, ev->step, ev->epoch, "skipped_steps", (double)ev->skipped);
            rs_log_metric(w->s, w->run, ev->step, ev->epoch, "loss_scale", ev->loss_scale);
        }
    } else if (ev->kind == RS_TRAIN_EV_EVAL) {
        rs_log_metric(w->s, w->run, ev->step, ev->epoch, "test_acc", ev->test_acc);
        rs_log_metric(w->s, w->run, ev->step, ev->epoch, "test_loss", ev->test_loss);
        if (ev->rows > 1) rs_log_metric(w->s, w->run, ev->step, ev->epoch, "val_loss", ev->test_loss);
        /* the training loss estimated beside it, named as the ranks' (repl/ranks_train.c) */
        if (ev->train_eval_loss >= 0)
            rs_log_metric(w->s, w->run, ev->step, ev->epoch, "lm_train_loss", ev->train_eval_loss);
    } else if (ev->kind == RS_TRAIN_EV_CKPT) {
        rs_log_artifact_run(w->s, w->run, ev->path, "checkpoint");
    }
}

static bool should_stop(void *ud)
{
    train_watch *w = ud;
    return w->s->interrupt && *w->s->interrupt;
}

/* The model and data set named by `X on Y`; the parser has checked their kinds. */
static void operands(rs_session *s, const rs_call *c, rs_obj **m, rs_obj **d)
{
    *m = rs_session_find(s, c->args[0]);
    *d = rs_session_find(s, c->args[2]);
}

static int fit_check(rs_session *s, const rs_call *c, rs_obj *m, rs_obj *d)
{
    rs_err err = {0};
    if (m->plan) return 0; /* a plan checks the data itself (rs_plan_evaluate, plan_logits) */
    if (rs_train_check_data(m->model, d->data.train, &err))
        return rs_session_error(s, c, c->arg_pos[2], strlen(c->args[2]), "%s: %s", c->cmd->name, err.msg);
    return 0;
}

/* The run's settings from the call (shared by every mode). Returns 0, or 1 after reporting. */
static int train_cfg(rs_session *s, const rs_call *c, rs_train_cfg *out)
{
    rs_train_cfg cfg = rs_train_defaults();
    rs_err err = {0};
    cfg.opt = rs_opt_defaults((rs_opt_kind)rs_call_opt(c, "opt")->v.choice);
    if (rs_call_given(c, "lr")) cfg.opt.lr = (float)rs_call_float(c, "lr", cfg.opt.lr);
    cfg.opt.momentum = (float)rs_call_float(c, "momentum", 0);
    cfg.opt.nesterov = rs_call_bool(c, "nesterov", false);
    if (rs_call_given(c, "wd")) cfg.opt.weight_decay = (float)rs_call_float(c, "wd", 0);
    cfg.sched.kind = (rs_sched_kind)rs_call_opt(c, "sched")->v.choice;
    cfg.sched.warmup = rs_call_int(c, "warmup", 0);
    cfg.sched.step_size = rs_call_int(c, "step_size", 1000);
    cfg.sched.gamma = (float)rs_call_float(c, "gamma", 0.1);
    cfg.sched.min_lr = (float)rs_call_float(c, "min_lr", 0);
    cfg.epochs = (int)rs_call_int(c, "epochs", 1);
    cfg.batch = (int)rs_call_int(c, "batch", 64);
    cfg.max_steps = rs_call_int(c, "steps", 0);
    cfg.seed = rs_call_given(c, "seed") ? (uint64_t)rs_call_int(c, "seed", 0) : s->seed;
    cfg.threads = (int)rs_call_int(c, "threads", s->threads);
    cfg.eval = rs_call_bool(c, "eval", true);
    cfg.ckpt_path = rs_call_str(c, "ckpt", NULL);
    cfg.ckpt_every = rs_call_int(c, "ckpt_every", 0);
    cfg.resume = rs_call_str(c, "resume", NULL);
    if (cfg.epochs < 1 || cfg.epochs > 100000)
        return rs_session_error(s, c, rs_call_opt(c, "epochs")->pos, 6, "train: epochs must be 1..100000, got %d",
                                cfg.epochs);
    if (cfg.batch < 1 || cfg.batch > 65536)
        return rs_session_error(s, c, rs_call_opt(c, "batch")->pos, 5, "train: batch must be 1..65536, got %d",
                                cfg.batch);
    if (cfg.max_steps < 0)
        return rs_session_error(s, c, rs_call_opt(c, "steps")->pos, 5 + strlen(rs_call_opt(c, "steps")->text),
                                "train: steps= takes 0 or more (0: every epoch), got %lld", (long long)cfg.max_steps);
    if (rs_opt_cfg_check(&cfg.opt, &err)) return rs_session_error(s, c, (size_t)-1, 0, "train: %s", err.msg);
    cfg.clip = (float)rs_call_float(c, "clip", 0);
    if (!(cfg.clip >= 0.0f) || !isfinite(cfg.clip))
        return rs_session_error(s, c, rs_call_opt(c, "clip")->pos, 4, "train: clip must be a norm >= 0 (0 is off), got %g",
                                (double)cfg.clip);
    if (!rs_prec_parse(rs_call_str(c, "precision", "fp32"), &cfg.precision)) cfg.precision = RS_PREC_FP32;
    cfg.inject_inf = rs_call_int(c, "inject_inf", 0);
    if (cfg.precision == RS_PREC_FP16) cfg.loss_scale = (float)rs_call_float(c, "loss_scale", 65536);
    if ((rs_call_given(c, "loss_scale") || cfg.inject_inf) && cfg.precision != RS_PREC_FP16)
        return rs_session_error(s, c, rs_call_opt(c, rs_call_given(c, "loss_scale") ? "loss_scale" : "inject_inf")->pos, 0,
                                "train: %s is for precision=fp16 (its loss scaler); add precision=fp16",
                                rs_call_given(c, "loss_scale") ? "loss_scale" : "inject_inf");
    if (cfg.precision == RS_PREC_FP16 && (!(cfg.loss_scale > 0.0f) || !isfinite(cfg.loss_scale) || cfg.inject_inf < 0))
        return rs_session_error(s, c, (size_t)-1, 0, "train: loss_scale must be a finite scale > 0 (e.g. 65536) and "
                                "inject_inf a step >= 1 (0: none)");
    cfg.eval_every = rs_call_int(c, "eval_every", 0);
    cfg.eval_samples = rs_call_int(c, "eval_samples", 0);
    if (cfg.eval_every < 0 || cfg.eval_samples < 0) {
        const char *k = cfg.eval_every < 0 ? "eval_every" : "eval_samples";
        return rs_session_error(s, c, rs_call_opt(c, k)->pos, strlen(k) + 1 + strlen(rs_call_opt(c, k)->text),
                                "train: %s= takes 0 or more (0: %s)", k,
                                cfg.eval_every < 0 ? "after each epoch" : "the whole test split");
    }
    cfg.accum = (int)rs_call_int(c, "accum", 1);
    if (cfg.accum < 1 || cfg.accum > 4096)
        return rs_session_error(s, c, rs_call_opt(c, "accum")->pos, 5, "train: accum must be 1..4096, got %d",
                                cfg.accum);
    *out = cfg;
    return 0;
}

/* betas= and drop_last= (the optimizer's moments and the epoch's tail). Returns 0, or 1 after
 * reporting. */
static int train_cfg_more(rs_session *s, const rs_call *c, rs_train_cfg *cfg)
{
    cfg->drop_last = rs_call_bool(c, "drop_last", false);
    if (!rs_call_given(c, "betas")) return 0;
    const rs_optval *v = rs_call_opt(c, "betas");
    double b1, b2;
    char end;
    if (sscanf(rs_call_str(c, "betas", ""), "%lf,%lf%c", &b1, &b2, &end) != 2 || !(b1 >= 0 && b1 < 1) ||
        !(b2 >= 0 && b2 < 1))
        return rs_session_error(s, c, v->pos, 6 + strlen(v->text),
                                "train: betas= takes two rates in [0, 1) with a comma, e.g. betas=0.9,0.99");
    if (cfg->opt.kind == RS_OPT_SGD)
        return rs_session_error(s, c, v->pos, 6 + strlen(v->text),
                                "train: betas= are Adam's and AdamW's moments; this run is opt=sgd (momentum= is its own)");
    cfg->opt.beta1 = (float)b1;
    cfg->opt.beta2 = (float)b2;
    return 0;
}

/* The mode's entry in the registry of strategies and its own options from the call. An option that
 * belongs to another mode is refused (it would do nothing here), and the mode's options are checked
 * against their declared ranges. Returns 0, or 1 after reporting. */
static int strategy_args(rs_session *s, const rs_call *c, rs_strategy_args *a)
{
    const char *mode = rs_call_str(c, "mode", "single");
    const rs_strategy_def *sd = rs_strategy_find(mode); /* mode='s choices are the registry's names */
    if (!sd) return rs_session_error(s, c, rs_call_opt(c, "mode")->pos, 5 + strlen(mode), "train: unknown mode '%s'", mode);
    rs_strategy_args_init(a, sd);
    for (int i = 0; c->cmd->opts[i].name; i++) {
        const rs_optdef *od = &c->cmd->opts[i];
        const rs_optval *v = &c->opts[i];
        const rs_strategy_def *owner = rs_strategy_opt_owner(od->name);
        if (!v->set || !owner) continue;
        size_t len = strlen(od->name) + 1 + strlen(v->text);
        const rs_strategy_opt *o = rs_strategy_opt_find(sd, od->name, NULL);
        if (!o) {
            /* the modes that have it, for the message */
            char modes[128] = "";
            size_t k = 0;
            for (const rs_strategy_def *const *e = rs_strategy_list(); *e; e++)
                if (rs_strategy_opt_find(*e, od->name, NULL))
                    k += (size_t)snprintf(modes + k, k < sizeof modes ? sizeof modes - k : 0, "%smode=%s",
                                          k ? " or " : "", (*e)->name);
            return rs_session_error(s, c, v->pos, len, "train: %s= is an option of %s; this run is mode=%s", od->name,
                                    modes, sd->name);
        }
        char text[64];
        const char *val = text;
        switch (o->type) {
        case RS_SOPT_INT: snprintf(text, sizeof text, "%lld", v->v.i); break;
        case RS_SOPT_FLOAT: snprintf(text, sizeof text, "%.17g", v->v.f); break;
        case RS_SOPT_SIZE: snprintf(text, sizeof text, "%llu", (unsigned long long)v->v.size); break;
        case RS_SOPT_BOOL: snprintf(text, sizeof text, "%s", v->v.b ? "on" : "off"); break;
        default: val = v->text; break;
        }
        rs_err err = {0};
        if (rs_strategy_args_set(a, od->name, val, &err))
            return rs_session_error(s, c, v->pos, len, "train: %s", err.msg);
    }
    return 0;
}

/* What `expect` reads after a run in this process (repl/result.h; docs/repl.md lists it). rows > 1: a
 * language model (per-token figures, validation loss). */
static void record_train(rs_session *s, const rs_train_result *r, int rows, const train_watch *w, bool dp)
{
    rs_result_num(s, "steps", (double)r->global_step);
    rs_result_num(s, "epochs", r->epochs_done);
    rs_result_num(s, "seconds", r->seconds);
    rs_result_num(s, "loss", r->train_loss);
    rs_result_num(s, "samples_per_s", r->samples_per_s);
    if (rows > 1) rs_result_num(s, "tokens_per_s", r->samples_per_s * rows);
    rs_result_num(s, "skipped_steps", (double)r->skipped);
    rs_result_num(s, "loss_scale", r->loss_scale);
    if (r->test_acc >= 0) {
        rs_result_num(s, "accuracy", r->test_acc);
        rs_result_num(s, rows > 1 ? "val_loss" : "test_loss", r->test_loss);
    }
    if (r->train_eval_loss >= 0) rs_result_num(s, "train_eval_loss", r->train_eval_loss);
    double tot = 0;
    for (int p = 0; dp && p < RS_DP_PHASE_COUNT; p++) tot += w->dp_phase[p];
    for (int p = 0; dp && p < RS_DP_PHASE_COUNT; p++) { /* DataParallel's step time by phase, as shares */
        char name[64];
        snprintf(name, sizeof name, "phase.%s", rs_dp_phase_name((rs_dp_phase)p));
        rs_result_num(s, name, tot > 0 ? w->dp_phase[p] / tot : 0);
    }
}

/* Refusals before anything is said about the run (its settings, where its weights come from): a
 * backend or device that mode= cannot train on. Returns 0, or 1 after reporting. */
static int refuse_placement(rs_session *s, const rs_call *c, const rs_obj *m, const rs_strategy_args *sa)
{
    const char *backend = rs_call_str(c, "backend", "shm");
    const rs_pg_backend *be = rs_pg_backend_find(backend);
    bool gpu_ranks = sa->def->make && be && !(be->ops->devices & RS_PG_DEV_CPU);
    if (gpu_ranks && sa->def != &rs_strategy_ddp) {
        /* ddp's buckets are the model's own gradient buffer; the others pass host buffers between ranks */
        const rs_optval *v = rs_call_opt(c, "backend");
        return rs_session_error(s, c, v->pos, 8 + strlen(backend),
                                "train: backend=%s trains mode=ddp on GPUs in this build; mode=%s's ranks exchange "
                                "host buffers: use backend=shm or tcp for it", backend, sa->def->name);
    }
    if (m->model && rs_model_device(m->model).kind != RS_DEV_CPU && sa->def != &rs_strategy_single && !gpu_ranks) {
        /* ranks build their own copies on the CPU from the spec, and dp's replicas are CPU threads: a
         * model on a device would be trained somewhere else than it lives, silently */
        char dv[32];
        const rs_optval *v = rs_call_opt(c, "mode");
        return rs_session_error(s, c, v->pos, 5 + strlen(v->text),
                                "train: %s lives on %s and mode=%s trains on the CPU over backend=shm, tcp or mpi "
                                "(GPU ranks: mode=ddp backend=nccl); train it with mode=single there, or `to %s cpu` "
                                "first",
                                m->name, rs_repl_device_str(rs_model_device(m->model), dv, sizeof dv), sa->def->name,
                                m->name);
    }
    return 0;
}

/* A language model trains as nanoGPT does: decay on matrix weights only, and its long epoch is
 * measured by validation loss every few hundred steps unless told otherwise. */
static void language_model_defaults(rs_session *s, const rs_call *c, rs_train_cfg *cfg)
{
    /* An epoch of text is every window: far longer than a first try should wait. What is not
     * given comes from nanoGPT's CPU recipe (batch 12, AdamW, weight decay 0.1, clip 1.0), and
     * without steps= or epochs= a run is 500 steps (under a minute here). */
    char said[160] = "";
    size_t k = 0;
    if (!rs_call_given(c, "steps") && !rs_call_given(c, "epochs")) {
        cfg->max_steps = 500;
        k += (size_t)snprintf(said + k, sizeof said - k, " steps=500");
    }
    if (!rs_call_given(c, "batch")) {
        cfg->batch = 12;
        k += (size_t)snprintf(said + k, sizeof said - k, " batch=12");
    }
    if (!rs_call_given(c, "opt")) {
        float lr = cfg->opt.lr, b1 = cfg->opt.beta1, b2 = cfg->opt.beta2; /* betas= stays */
        cfg->opt = rs_opt_defaults(RS_OPT_ADAMW);
        cfg->opt.lr = lr;
        cfg->opt.beta1 = b1;
        cfg->opt.beta2 = b2;
        cfg->opt.weight_decay = rs_call_given(c, "wd") ? (float)rs_call_float(c, "wd", 0) : 0.1f;
        k += (size_t)snprintf(said + k, sizeof said - k, " opt=adamw wd=%g", (double)cfg->opt.weight_decay);
    }
    if (!rs_call_given(c, "clip")) {
        cfg->clip = 1.0f;
        k += (size_t)snprintf(said + k, sizeof said - k, " clip=1");
    }
    if (k) fprintf(s->out, "language model: nanoGPT's settings where none were given:%s\n", said);
    cfg->opt.groups = true;
    if (!rs_call_given(c, "eval_every") && cfg->max_steps && cfg->eval)
        cfg->eval_every = cfg->max_steps >= 1000 ? 250 : (cfg->max_steps + 3) / 4;
    if (!rs_call_given(c, "eval_samples")) cfg->eval_samples = 20 * (int64_t)cfg->batch;
}

/* mode=dp: the replicas as threads of this process, made the run's strategy. *dp stays NULL for the
 * other in-process modes. Returns 0, or 1 after reporting. */
static int dp_begin(rs_session *s, const rs_call *c, rs_obj *m, const rs_strategy_args *sa, train_watch *w,
                    rs_train_cfg *cfg, rs_dp **dp)
{
    *dp = NULL;
    if (sa->def != &rs_strategy_dp) return 0;
    rs_err err = {0};
    long long n = rs_call_int(c, "ranks", 2);
    const rs_optval *v = rs_call_opt(c, "ranks");
    if (n < 1 || n > RS_DP_MAX_REPLICAS)
        return rs_session_error(s, c, v->pos, 6 + strlen(v->text), "train: dp replicas (ranks=) must be 1..%d",
                                RS_DP_MAX_REPLICAS);
    if (rs_dp_new(m->model, (int)n, on_dp_phase, w, dp, &err))
        return rs_session_error(s, c, (size_t)-1, 0, "train: %s", err.msg);
    cfg->strategy = rs_dp_strategy(*dp);
    fprintf(s->out, "dp: %lld replicas as threads of this process (nn.DataParallel)\n", n);
    return 0;
}

/* The run's final figures for the session log, as compact JSON (caller frees; NULL when out of
 * memory). */
static char *final_json(const rs_train_cfg *cfg, const rs_train_result *r)
{
    json_t *fin = json_pack("{s:I, s:i, s:f, s:f, s:f}", "steps", (json_int_t)r->global_step, "epochs",
                            r->epochs_done, "train_loss", r->train_loss, "seconds", r->seconds, "samples_per_s",
                            r->samples_per_s);
    if (fin && cfg->precision != RS_PREC_FP32) {
        json_object_set_new(fin, "precision", json_string(rs_prec_name(cfg->precision)));
        if (cfg->precision == RS_PREC_FP16) {
            json_object_set_new(fin, "skipped_steps", json_integer((json_int_t)r->skipped));
            json_object_set_new(fin, "loss_scale", json_real(r->loss_scale));
        }
    }
    if (fin && r->test_acc >= 0) {
        json_object_set_new(fin, "test_acc", json_real(r->test_acc));
        json_object_set_new(fin, "test_loss", json_real(r->test_loss));
    }
    char *text = fin ? json_dumps(fin, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(fin);
    return text;
}

/* mode=dp after a good run: its step time by phase and what the replicas hold beyond the model. */
static void dp_report(rs_session *s, const rs_dp *dp, const train_watch *w)
{
    double tot = 0;
    for (int p = 0; p < RS_DP_PHASE_COUNT; p++) tot += w->dp_phase[p];
    fprintf(s->out, "dp step time by phase:");
    for (int p = 0; p < RS_DP_PHASE_COUNT; p++)
        fprintf(s->out, " %s %.0f%%", rs_dp_phase_name((rs_dp_phase)p), tot > 0 ? 100 * w->dp_phase[p] / tot : 0);
    rs_mem extra;
    rs_dp_replica_mem(dp, &extra);
    fprintf(s->out, "\nreplicas hold %.1f KiB of parameters and %.1f KiB of gradients beyond the model\n",
            (double)extra.live[RS_POOL_PARAMS] / 1024, (double)extra.live[RS_POOL_GRADS] / 1024);
    rs_result_num(s, "replicas", rs_dp_replicas(dp));
    rs_result_num(s, "replica.parameters", (double)extra.live[RS_POOL_PARAMS]);
    rs_result_num(s, "replica.gradients", (double)extra.live[RS_POOL_GRADS]);
}

/* The summary line of a finished run: per token for a language model (rows > 1), per sample else. */
static void say_trained(rs_session *s, const rs_obj *m, const rs_obj *d, const rs_train_cfg *cfg,
                        const rs_train_result *r, int rows, int64_t run)
{
    if (rows > 1) {
        fprintf(s->out, "trained %s on %s: %lld steps in %.1fs, %.0f tokens/s", m->name, d->name, (long long)r->steps,
                r->seconds, r->samples_per_s * rows);
        if (r->test_loss >= 0) fprintf(s->out, ", validation loss %.4f", r->test_loss);
    } else {
        fprintf(s->out, "trained %s on %s: %lld steps in %.1fs, %.0f samples/s", m->name, d->name, (long long)r->steps,
                r->seconds, r->samples_per_s);
        if (r->test_acc >= 0) fprintf(s->out, ", test accuracy %.4f", r->test_acc);
    }
    if (cfg->precision == RS_PREC_BF16) fprintf(s->out, "; bf16 products: %s", rs_cpu_bf16_backend());
    if (cfg->precision == RS_PREC_FP16)
        fprintf(s->out, "; fp16 products, %lld step%s skipped (loss scale %g)", (long long)r->skipped,
                r->skipped == 1 ? "" : "s", (double)r->loss_scale);
    fprintf(s->out, "\n");
    if (run > 0) fprintf(s->out, "run %lld logged: `show run %lld`\n", (long long)run, (long long)run);
}

/* The run in this process (mode=single or dp), from its session-log entry to its summary. */
static int train_here(rs_session *s, const rs_call *c, rs_obj *m, rs_obj *d, rs_train_cfg *cfg,
                      const rs_strategy_args *sa)
{
    train_watch w = {.s = s};
    rs_dp *dp;
    rs_err err = {0};
    if (dp_begin(s, c, m, sa, &w, cfg, &dp)) return 1;
    rs_progress_init(&w.bar, s->out);
    w.run = dp ? rs_log_run_begin_dist(s, "train", m->name, m->spec, d->name, c, "dp", "threads",
                                       rs_dp_replicas(dp))
               : rs_log_run_begin(s, "train", m->name, m->spec, d->name, c);
    rs_train_hooks hooks = {.on_event = on_event, .should_stop = should_stop, .ud = &w};
    rs_train_result r;
    rs_status st = rs_train(m->model, &d->data, cfg, &hooks, &r, &err);
    rs_progress_close(&w.bar); /* a run that stopped or failed mid-epoch left its bar open */
    rs_model_set_threads(m->model, s->threads); /* threads= was for this run */
    char *fin_text = final_json(cfg, &r); /* owned here */
    if (dp) {
        if (!st) dp_report(s, dp, &w);
        rs_dp_free(dp);
    }
    if (st) {
        rs_log_run_end(s, w.run, "failed", r.global_step, fin_text, err.msg);
        free(fin_text);
        return rs_session_error(s, c, (size_t)-1, 0, "train: %s", err.msg);
    }
    if (r.global_step > 0) m->trained_run = w.run > 0 ? w.run : -1;
    if (r.stopped) {
        fprintf(s->out, "cancelled: stopped after step %lld (%d full epochs done); %s keeps the weights of that step\n",
                (long long)r.global_step, r.epochs_done, m->name);
        rs_log_run_end(s, w.run, "cancelled", r.global_step, fin_text, NULL);
        free(fin_text);
        if (s->interrupt) *s->interrupt = 0;
        return 2;
    }
    int rows = m->model ? rs_model_rows(m->model) : 1;
    record_train(s, &r, rows, &w, cfg->strategy != NULL);
    say_trained(s, m, d, cfg, &r, rows, w.run);
    rs_log_run_end(s, w.run, "done", r.global_step, fin_text, NULL);
    free(fin_text);
    return 0;
}

/* A model trained before continues from its weights; its optimizer state (Adam's moments, SGD's
 * momentum) is not kept with the model, so it starts at zero as a new torch.optim would: said, with
 * the way that keeps it (a checkpoint's resume=, which restores weights, optimizer and position). */
static void say_continues(rs_session *s, const rs_obj *m, const rs_train_cfg *cfg)
{
    if (cfg->resume) {
        fprintf(s->out, "train: %s resumes from %s: its weights, optimizer state and position\n", m->name,
                cfg->resume);
        return;
    }
    if (!m->trained_run) return;
    char from[48] = "its last training";
    if (m->trained_run > 0) snprintf(from, sizeof from, "run %lld", (long long)m->trained_run);
    fprintf(s->out, "train: %s continues from the weights of %s with a new optimizer state (ckpt= and resume= "
            "keep it); `reset %s` starts afresh\n", m->name, from, m->name);
}

int rs_cmd_train(rs_session *s, const rs_call *c)
{
    /* config=ds_config.json: the file's keys as options, then this again with them (repl/ds_config.c) */
    if (rs_call_given(c, "config")) return rs_ds_config_train(s, c);
    rs_result_begin(s, NULL);
    rs_obj *m, *d;
    operands(s, c, &m, &d);
    /* a background run is still changing m's weights (its data may be shared: reading it is fine) */
    if (rs_session_check_busy(s, c, m, c->arg_pos[0], strlen(c->args[0]))) return 1;
    if (fit_check(s, c, m, d)) return 1;
    rs_train_cfg cfg;
    if (train_cfg(s, c, &cfg)) return 1;
    if (train_cfg_more(s, c, &cfg)) return 1;
    rs_strategy_args sa;
    if (strategy_args(s, c, &sa)) return 1;
    if (refuse_placement(s, c, m, &sa)) return 1;
    if (m->model && rs_model_tokens(m->model)) language_model_defaults(s, c, &cfg);
    say_continues(s, m, &cfg);
    if (sa.def->make) return rs_cmd_train_ranks(s, c, m, d, &cfg, &sa);
    if (rs_call_given(c, "kill")) {
        const rs_optval *v = rs_call_opt(c, "kill");
        return rs_session_error(s, c, v->pos, 5 + strlen(v->text),
                                "train: kill= stops a rank process; it needs a mode that runs ranks (ddp, fsdp, ...)");
    }
    return train_here(s, c, m, d, &cfg, &sa);
}

static const rs_dataset *split_of(const rs_call *c, rs_obj *d)
{
    bool train = rs_call_opt(c, "split")->v.choice == 1;
    return train || !d->data.test || !d->data.test->n ? d->data.train : d->data.test;
}

/* eval's hooks: a bar of samples on a terminal, and Ctrl-C between batches. */
typedef struct eval_watch {
    rs_session *s;
    rs_progress bar;
} eval_watch;

static void eval_progress(void *ud, uint32_t done, uint32_t total, double elapsed_s)
{
    eval_watch *w = ud;
    rs_progress_count(&w->bar, "eval", done, total, elapsed_s);
}

static bool eval_should_stop(void *ud)
{
    eval_watch *w = ud;
    return w->s->interrupt && *w->s->interrupt;
}

/* A model's evaluation with its progress shown and Ctrl-C honoured between batches: stopped, it says so,
 * logs the run cancelled and returns 2, as a stopped train does (*stopped set). */
static rs_status eval_watched(rs_session *s, rs_obj *m, const rs_dataset *ds, int batch, int64_t run, double *acc,
                              double *loss, bool *stopped, rs_err *err)
{
    eval_watch w = {.s = s};
    rs_progress_init(&w.bar, s->out);
    rs_eval_hooks h = {.progress = eval_progress, .should_stop = eval_should_stop, .ud = &w};
    rs_status st = rs_evaluate_hooked(m->model, ds, batch, 0, &h, acc, loss, err);
    rs_progress_close(&w.bar);
    *stopped = st == RS_ERR_CANCELLED;
    if (*stopped) {
        if (w.bar.tty) fputs("\r\033[K", s->out);
        fprintf(s->out, "cancelled: eval of %s %s; no figures\n", m->name, err->msg);
        rs_log_run_end(s, run, "cancelled", 0, NULL, err->msg);
        if (s->interrupt) *s->interrupt = 0;
    }
    return st;
}

int rs_cmd_eval(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    rs_obj *m, *d;
    operands(s, c, &m, &d);
    if (fit_check(s, c, m, d)) return 1;
    const rs_dataset *ds = split_of(c, d);
    double acc, loss;
    rs_err err = {0};
    int64_t run = rs_log_run_begin(s, "eval", m->name, m->spec, d->name, c);
    bool stopped = false;
    rs_status est = m->plan ? rs_plan_evaluate(m->plan, ds, &acc, &loss, &err)
                            : eval_watched(s, m, ds, (int)rs_call_int(c, "batch", 256), run, &acc, &loss, &stopped, &err);
    if (stopped) return 2;
    if (est) {
        rs_log_run_end(s, run, "failed", 0, NULL, err.msg);
        return rs_session_error(s, c, (size_t)-1, 0, "eval: %s", err.msg);
    }
    /* figures to 6 decimals; 15 digits print such a value back exactly */
    json_t *fo = json_pack("{s:f, s:f, s:I}", "test_acc", round(acc * 1e6) / 1e6, "test_loss", round(loss * 1e6) / 1e6,
                           "samples", (json_int_t)ds->n);
    char *fin = fo ? json_dumps(fo, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL; /* owned here */
    json_decref(fo);
    rs_log_run_end(s, run, "done", 0, fin, NULL);
    free(fin);
    rs_result_num(s, "accuracy", acc);
    rs_result_num(s, "loss", loss);
    rs_result_num(s, "samples", ds->n);
    fprintf(s->out, "%s on %s (%s, %u samples): accuracy %.4f, loss %.4f\n", m->name, d->name, ds->name, ds->n, acc,
            loss);
    int k = m->model ? rs_model_fixed_batch(m->model) : 1, pad = /* a plan (m->plan) has no model */ (int)((k - ds->n % (uint32_t)k) % (uint32_t)k);
    if (k > 1 && pad)
        fprintf(s->out, "  %s takes %d samples at a time (its file fixed the batch at %d): the last batch was padded "
                "with %d copies of its last sample, their rows left out of the figures\n", m->name, k, k, pad);
    else if (k > 1)
        fprintf(s->out, "  %s takes %d samples at a time (its file fixed the batch at %d)\n", m->name, k, k);
    return 0;
}

/* One image x of ds's shape as rows of a brightness ramp, two image rows per text row. */
static void render_rows(const rs_dataset *ds, const float *x, char rows[][64], int *nrows, int width)
{
    static const char ramp[] = " .:-=+*#%@";
    int H = ds->h, W = ds->w, C = ds->c;
    int step = W > width ? (W + width - 1) / width : 1;
    int cols = W / step;
    *nrows = 0;
    for (int y = 0; y + 1 < H + 1 && *nrows < 32; y += 2 * step) {
        char *r = rows[(*nrows)++];
        for (int xx = 0; xx < cols; xx++) {
            double v = 0;
            int cnt = 0;
            for (int dy = 0; dy < 2 * step && y + dy < H; dy++)
                for (int dx = 0; dx < step; dx++)
                    for (int ch = 0; ch < C; ch++, cnt++) v += x[((size_t)ch * H + y + dy) * W + xx * step + dx];
            v = cnt ? v / cnt : 0;
            int k = (int)(v * 9.999);
            r[xx] = ramp[k < 0 ? 0 : k > 9 ? 9 : k];
        }
        r[cols] = '\0';
    }
}

/* A plan's scores for n samples x, in batches it takes, into a buffer the caller frees. */
static rs_status plan_logits(rs_plan *p, const rs_dataset *ds, const float *x, int n, float **out, rs_err *err)
{
    size_t per = rs_dataset_sample_numel(ds), C = (size_t)rs_plan_classes(p) * (size_t)rs_plan_rows(p);
    if ((int64_t)per != rs_shape_numel(rs_plan_input_shape(p)) || ds->tokens != rs_plan_tokens(p))
        return rs_err_set(err, RS_ERR_SHAPE, "the plan takes %lld values per sample, %s has %zu",
                          (long long)rs_shape_numel(rs_plan_input_shape(p)), ds->name, per);
    *out = malloc((size_t)n * C * sizeof **out);
    if (!*out) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    for (int at = 0; at < n; at += rs_plan_batch(p)) {
        int B = n - at < rs_plan_batch(p) ? n - at : rs_plan_batch(p);
        const float *z;
        rs_status st = rs_plan_run(p, x + (size_t)at * per, B, &z, err);
        if (st) return st;
        memcpy(*out + (size_t)at * C, z, (size_t)B * C * sizeof **out);
    }
    return RS_OK;
}

int rs_cmd_predict(rs_session *s, const rs_call *c)
{
    rs_obj *m, *d;
    operands(s, c, &m, &d);
    if (fit_check(s, c, m, d)) return 1;
    const rs_dataset *ds = split_of(c, d);
    if (ds->y_len != 1)
        return rs_session_error(s, c, c->arg_pos[2], strlen(c->args[2]),
                                "predict: %s holds windows of text with a label per token; predict shows one class "
                                "per sample (eval %s on %s gives the per-token accuracy, generate %s samples text)",
                                d->name, m->name, d->name, m->name);
    long long n = rs_call_int(c, "n", 4);
    if (n < 1 || n > 16)
        return rs_session_error(s, c, rs_call_opt(c, "n")->pos, 2 + strlen(rs_call_opt(c, "n")->text),
                                "predict: n must be 1..16, got %lld", n);
    int k = m->model ? rs_model_fixed_batch(m->model) : 1; /* a plan (m->plan) has no model */
    size_t npos = rs_call_given(c, "n") ? rs_call_opt(c, "n")->pos : (size_t)-1;
    size_t nlen = rs_call_given(c, "n") ? 2 + strlen(rs_call_opt(c, "n")->text) : 0;
    if (k > 16)
        return rs_session_error(s, c, npos, nlen, "predict: %s takes %d samples at a time (its file fixed the batch "
                                "at %d) and predict shows at most 16; eval %s on %s runs it", m->name, k, k, m->name,
                                d->name);
    if ((uint32_t)k > ds->n)
        return rs_session_error(s, c, (size_t)-1, 0, "predict: %s takes %d samples at a time (its file fixed the batch "
                                "at %d) but %s's %s split has %u; eval %s on %s pads the last batch", m->name, k, k,
                                d->name, ds == d->data.train ? "train" : "test", ds->n, m->name, d->name);
    if ((uint32_t)n > ds->n) n = ds->n / (uint32_t)k * (uint32_t)k; /* all there is, in whole groups of k */
    if (n % k)
        return rs_session_error(s, c, npos, nlen, "predict: %s takes %d samples at a time (its file fixed the batch at "
                                "%d), not %lld; give n=%d%s", m->name, k, k, n, k,
                                2 * k <= 16 ? " or a multiple of it up to 16" : "");
    uint32_t idx[16];
    rs_rng r;
    rs_rng_seed(&r, (uint64_t)rs_call_int(c, "seed", 0));
    for (int i = 0; i < n; i++) idx[i] = rs_call_given(c, "seed") ? (uint32_t)rs_rng_below(&r, ds->n) : (uint32_t)i;
    size_t per = rs_dataset_sample_numel(ds);
    float *x = malloc((size_t)n * per * sizeof *x); /* owned here */
    int32_t *y = malloc((size_t)n * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return rs_session_error(s, c, (size_t)-1, 0, "out of memory");
    }
    for (int i = 0; i < n; i++) rs_dataset_get(ds, idx[i], x + (size_t)i * per, y + i);
    const float *logits;
    float *plan_out = NULL; /* owned here: a plan's scores */
    rs_err err = {0};
    rs_status st;
    int C;
    if (m->plan) {
        st = plan_logits(m->plan, ds, x, (int)n, &plan_out, &err);
        logits = plan_out;
        C = rs_plan_classes(m->plan);
    } else {
        bool was = rs_model_training(m->model);
        rs_model_set_training(m->model, false);
        st = rs_model_forward(m->model, x, (int)n / k, &logits, &err); /* k samples are one of the model's */
        rs_model_set_training(m->model, was);
        C = rs_model_classes(m->model);
    }
    if (st) {
        free(plan_out);
        free(x);
        free(y);
        return rs_session_error(s, c, (size_t)-1, 0, "predict: %s", err.msg);
    }
    bool image = ds->h > 1 && ds->w > 1;
    /* samples side by side, 32 columns each, as many as the terminal holds (4 at most; 2 at 80) */
    int per_row = (rs_wrap_cols(s->out) + 2) / 32;
    if (per_row < 1) per_row = 1;
    if (per_row > 4) per_row = 4;
    for (int base = 0; base < n; base += per_row) {
        int k = (int)(n - base < per_row ? n - base : per_row);
        char rows[4][32][64];
        int nrows[4];
        int maxr = 0;
        for (int i = 0; i < k && image; i++) {
            render_rows(ds, x + (size_t)(base + i) * per, rows[i], &nrows[i], 28);
            maxr = nrows[i] > maxr ? nrows[i] : maxr;
        }
        for (int r0 = 0; r0 < maxr; r0++) {
            for (int i = 0; i < k; i++) fprintf(s->out, "  %-28s  ", r0 < nrows[i] ? rows[i][r0] : "");
            fputc('\n', s->out);
        }
        for (int i = 0; i < k; i++) {
            const float *z = logits + (size_t)(base + i) * C;
            int best = 0;
            for (int j = 1; j < C; j++)
                if (z[j] > z[best]) best = j;
            bool ok = best == y[base + i];
            char lab[64];
            if (ds->class_names && best < ds->n_classes && y[base + i] < ds->n_classes)
                snprintf(lab, sizeof lab, "%s %s (true %s)", ok ? "ok" : "NO", ds->class_names[best],
                         ds->class_names[y[base + i]]);
            else
                snprintf(lab, sizeof lab, "%s %d (true %d)", ok ? "ok" : "NO", best, (int)y[base + i]);
            fprintf(s->out, "  %s%-28.28s%s  ", rs_sty(s, ok ? "\033[32m" : "\033[31m"), lab, rs_sty(s, "\033[0m"));
        }
        fputs("\n\n", s->out);
    }
    free(plan_out);
    free(x);
    free(y);
    return 0;
}
