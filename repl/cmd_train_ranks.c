/* `train ... mode=NAME` for the modes that run as rank processes (a factory in the registry of
 * strategies, dist/train/registry.h): the model spec, its weights, the data source and every option
 * handed to rank processes (the worker's train job), the trained weights read back, and the summary:
 * samples/s, communication hidden behind backward, memory per rank by pool beside the ZeRO paper's
 * formula. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "dist/train/dtrain.h"
#include "dist/train/registry.h"
#include "engine/ckpt/checkpoint.h"
#include "ranks_job.h"
#include "ranks_train.h"
#include "repl_log.h"
#include "result.h"
#include "session.h"
#include "train_pipe.h"
#include "view/render.h"
#include "wrap.h"

/* ---------------------------------------------------------------- train across ranks */

/* Of the communication time each rank spent, how much ran while its backward was still going. */
static void comm_hidden(const rs_job *j, int rank, double *comm, double *hidden)
{
    const rs_ranks_train *tr = j->state;
    *comm = *hidden = 0;
    for (int a = 0; a < tr->nspans; a++) {
        const rs_ranks_span *c = &tr->spans[a];
        if (c->rank != rank || !c->comm || c->step < 0) continue;
        *comm += c->t1 - c->t0;
        for (int b = 0; b < tr->nspans; b++) {
            const rs_ranks_span *k = &tr->spans[b];
            if (k->rank != rank || k->comm || k->step != c->step) continue;
            double lo = c->t0 > k->t0 ? c->t0 : k->t0, hi = c->t1 < k->t1 ? c->t1 : k->t1;
            if (hi > lo) *hidden += hi - lo;
        }
    }
}

static void print_memory(rs_job *j, const rs_obj *m, int zero, int opt_states)
{
    rs_ranks_train *tr = j->state;
    FILE *f = j->s->out;
    size_t P = rs_model_param_count(m->model);
    rs_zero_bytes z = rs_zero_mem_formula(P, j->world, zero, opt_states);
    const rs_strategy_def *sd = rs_strategy_find(j->mode);
    char formula[256] = "";
    if (sd && sd->mem_formula && tr->sargs) {
        double b[3];
        sd->mem_formula(tr->sargs, m->model, j->world, opt_states, b, formula, sizeof formula);
        z = (rs_zero_bytes){.params = b[0], .grads = b[1], .optim = b[2]};
    }
    bool off = false;
    for (int r = 0; r < j->world; r++) off |= tr->mem[r].live[RS_POOL_OFFLOAD] > 0;
    static const rs_pool pools[] = {RS_POOL_PARAMS, RS_POOL_GRADS, RS_POOL_OPTIM, RS_POOL_ACTS, RS_POOL_COMM,
                                    RS_POOL_OFFLOAD};
    static const char *const heads[] = {"parameters", "gradients", "optimizer", "activations", "comm", "offload (host)"};
    int np = off ? 6 : 5;
    /* columns of 14 where the terminal has room, down to 10 on 80 columns (offload's head shortened) */
    int cols = rs_wrap_cols(f), cw = (cols - 7) / np - 1;
    if (cw > 14) cw = 14;
    if (cw < 10) cw = 10;
    char b[32];
    fprintf(f, "memory per rank after the last step, measured at the allocator (live bytes by pool):\n  %-5s", "rank");
    for (int p = 0; p < np; p++) fprintf(f, " %*s", cw, p == 5 && cw < 14 ? "offload" : heads[p]);
    fputc('\n', f);
    for (int r = 0; r < j->world; r++) {
        fprintf(f, "  %-5d", r);
        for (int p = 0; p < np; p++) {
            rs_view_fmt_bytes(b, (double)tr->mem[r].live[pools[p]]);
            fprintf(f, " %*s", cw, b);
        }
        fputc('\n', f);
    }
    if (zero < 0) return; /* no ZeRO formula for this mode */
    double zp[3] = {z.params, z.grads, z.optim};
    fprintf(f, "  %-5s", "paper");
    for (int p = 0; p < 3; p++) {
        rs_view_fmt_bytes(b, zp[p]);
        fprintf(f, " %*s", cw, b);
    }
    /* the strategy's own formula when it has one (tensor), else the ZeRO paper's */
    char zf[160];
    const char *text = formula;
    int n = (int)strlen(formula);
    if (!formula[0]) {
        n = snprintf(zf, sizeof zf, "the ZeRO paper's formula, P=%zu parameters, N=%d: %s%s", P, j->world,
                     zero == 0   ? "4P + 4P + 4kP"
                     : zero == 1 ? "4P + 4P + 4kP/N"
                     : zero == 2 ? "4P + (4P + 4kP)/N"
                                 : "(4P + 4P + 4kP)/N",
                     off ? " (offloaded state counted under offload)" : "");
        text = zf;
    }
    /* beside the paper's figures when it fits, else under them */
    if (7 + 3 * (cw + 1) + 3 + n <= cols) fprintf(f, "   %s\n", text);
    else fprintf(f, "\n  %5s %s\n", "", text);
}

/* What `expect` reads after a run across ranks (repl/result.h; docs/repl.md lists it): the summary's
 * figures, and each rank's memory by pool beside the ZeRO paper's formula for it. */
static void record_ranks(rs_job *j, const rs_obj *m, double sps, double secs, double comm, double hidden)
{
    rs_ranks_train *tr = j->state;
    rs_session *s = j->s;
    rs_result_num(s, "world", j->world);
    rs_result_num(s, "steps", (double)tr->done[0].step);
    rs_result_num(s, "seconds", secs);
    rs_result_num(s, "samples_per_s", sps);
    rs_result_num(s, "loss", tr->last_loss);
    if (tr->evaluated) {
        rs_result_num(s, "accuracy", tr->eval_acc);
        rs_result_num(s, "test_loss", tr->eval_loss);
    }
    rs_result_num(s, "comm_s", comm / j->world);
    rs_result_num(s, "comm_hidden", comm > 0 ? hidden / comm : 0);
    /* the collectives each rank called, from its comm spans: a DDP step calls one per bucket, and with
     * accum=K only the last micro-batch of a step communicates, so the count does not grow with K */
    int64_t last = -1;
    for (int a = 0; a < tr->nspans; a++)
        if (tr->spans[a].comm && tr->spans[a].rank == 0 && tr->spans[a].step > last) last = tr->spans[a].step;
    int buckets = 0;
    for (int r = 0; r < j->world; r++) {
        double calls = 0, bytes = 0;
        for (int a = 0; a < tr->nspans; a++) {
            const rs_ranks_span *c = &tr->spans[a];
            if (c->rank != r || !c->comm || c->step < 0) continue;
            calls++;
            bytes += (double)c->bytes;
            if (r == 0 && c->step == last) buckets++;
        }
        rs_result_rank(s, "comm_calls", r, calls);
        rs_result_rank(s, "comm_bytes", r, bytes);
    }
    rs_result_num(s, "comm_per_step", buckets);
    static const rs_pool pools[] = {RS_POOL_PARAMS, RS_POOL_GRADS, RS_POOL_OPTIM, RS_POOL_ACTS, RS_POOL_COMM,
                                    RS_POOL_OFFLOAD};
    static const char *const names[] = {"parameters", "gradients", "optimizer", "activations", "comm", "offload"};
    rs_zero_bytes z = rs_zero_mem_formula(rs_model_param_count(m->model), j->world, tr->zero, tr->opt_states);
    double formula[3] = {z.params, z.grads, z.optim};
    const rs_strategy_def *sd = rs_strategy_find(j->mode);
    char text[256];
    if (sd && sd->mem_formula && tr->sargs) sd->mem_formula(tr->sargs, m->model, j->world, tr->opt_states, formula, text, sizeof text);
    for (int r = 0; r < j->world; r++)
        for (int p = 0; p < 6; p++) {
            char name[64];
            snprintf(name, sizeof name, "memory.%s", names[p]);
            rs_result_rank(s, name, r, (double)tr->mem[r].live[pools[p]]);
            if (p >= 3) continue;
            snprintf(name, sizeof name, "formula.memory.%s", names[p]);
            rs_result_rank(s, name, r, formula[p]);
        }
}

/* A run stopped by Ctrl-C (or `jobs stop`), as one process reports it: the weights of the last step every
 * rank finished (rank 0 wrote them; its @done says which) back into the model, the steps done, the run
 * logged 'cancelled' with them. Returns 2, a stopped command's rc. */
static int train_cancelled(rs_job *j, rs_obj *m)
{
    rs_ranks_train *tr = j->state;
    rs_session *s = j->s;
    rs_err err = {0};
    int64_t steps = tr->done[0].kind == RS_TL_DONE ? tr->done[0].step : 0;
    bool back = m && m->model && tr->done[0].kind == RS_TL_DONE && access(tr->outp, R_OK) == 0 &&
                !rs_ckpt_load_model(tr->outp, m->model, &err);
    if (back) {
        fprintf(s->out, "cancelled: stopped after step %lld (%s); %s keeps the weights of step %lld, the last one "
                "every rank finished\n", (long long)steps, j->background ? "jobs stop" : "Ctrl-C", j->mname,
                (long long)steps);
        if (steps > 0) m->trained_run = j->run > 0 ? j->run : -1;
    } else {
        fprintf(s->out, "cancelled: stopped (%s) before the ranks handed back a finished step%s%s; %s keeps the "
                "weights it had\n", j->background ? "jobs stop" : "Ctrl-C", err.msg[0] ? ": " : "", err.msg, j->mname);
        steps = 0;
    }
    json_t *fo = json_pack("{s:I}", "steps", (json_int_t)steps);
    char *final = fo ? json_dumps(fo, JSON_COMPACT) : NULL; /* owned here */
    json_decref(fo);
    rs_log_run_end(s, j->run, "cancelled", steps, final, j->background ? "stopped in the background" : "stopped by Ctrl-C");
    free(final);
    unlink(tr->init);
    unlink(tr->outp);
    rmdir(tr->dir);
    if (s->interrupt) *s->interrupt = 0; /* as in single mode: the script or prompt goes on */
    return 2;
}

/* The job's end: the trained weights back into the model, the summary, the memory table, the run's end. */
static int train_end(rs_job *j, int rc)
{
    rs_ranks_train *tr = j->state;
    rs_session *s = j->s;
    rs_job_mark_busy(j, 0);
    rs_obj *m = rs_session_find(s, j->mname);
    if (j->cancelled) return train_cancelled(j, m);
    if (tr->killed) {
        /* the fault kill= asked for: where the run got to and what is left to resume from */
        if (tr->ckpt && tr->ckpts > 0)
            fprintf(s->out, "the last checkpoint is %s (step %lld); continue with `train %s on %s ... resume=%s`\n",
                    tr->ckpt, (long long)tr->last_ckpt_step, j->mname, j->dname, tr->ckpt);
        else fprintf(s->out, "no checkpoint was written (ckpt=FILE ckpt_every=N): the run's work is lost\n");
        fprintf(s->out, "%s keeps the weights it had before this run\n", j->mname);
        if (!j->background) {
            rs_result_num(s, "world", j->world);
            rs_result_num(s, "killed_rank", tr->kill_rank);
            rs_result_num(s, "signal", SIGKILL);
            rs_result_num(s, "last_step", (double)j->last_step);
            rs_result_num(s, "ckpt_step", tr->ckpts > 0 ? (double)tr->last_ckpt_step : 0);
        }
        return 0;
    }
    /* a rank that failed is named by the launcher; a pipeline rank is a stage: say which layers died */
    const char *rk = strstr(j->failure, "rank ");
    int bad = -1;
    if (rc && rk && sscanf(rk, "rank %d", &bad) == 1 && bad >= 0 && bad < j->world && tr->stage_text &&
        tr->stage_text[bad][0])
        fprintf(s->out, "rank %d ran %s %s; the pipeline stops without it\n", bad, j->mode, tr->stage_text[bad]);
    if (rc && tr->ckpt && tr->ckpts > 0)
        fprintf(s->out, "the last checkpoint is %s (step %lld); continue with `train %s on %s ... resume=%s`\n",
                tr->ckpt, (long long)tr->last_ckpt_step, j->mname, j->dname, tr->ckpt);
    if (!rc && (!m || !m->model)) /* cannot happen while busy: drop and rebinding refuse */
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "train: model %s is gone; the trained weights are lost", j->mname);
    rs_err err = {0};
    if (!rc && rs_ckpt_load_model(tr->outp, m->model, &err))
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "train: reading the trained weights back: %s", err.msg);
    if (!rc) m->trained_run = j->run > 0 ? j->run : -1;
    unlink(tr->init);
    unlink(tr->outp);
    rmdir(tr->dir);
    if (rc) return rc;
    double sps = 0, secs = 0;
    int per_stage = tr->pipe_dp * tr->pipe_tp;
    for (int r = 0; r < j->world; r++) {
        /* every stage of a pipeline (and shard of a stage) works on the same samples: the pipelines' rate
         * is their first stages' first shards' (ranks d * tp of the first dp x tp, dist/train/grid.h) */
        if (!tr->nmicros || (per_stage > 0 && r < per_stage && r % tr->pipe_tp == 0)) sps += tr->done[r].sps;
        if (tr->done[r].seconds > secs) secs = tr->done[r].seconds;
    }
    /* every sample is read by world/parts ranks (a tensor-parallel group): count it once */
    if (!tr->nmicros && tr->batch_parts > 0 && tr->batch_parts < j->world) sps *= (double)tr->batch_parts / j->world;
    if (tr->rows > 1) { /* a language model: per token, and its validation loss, as one process says it */
        fprintf(s->out, "trained %s on %s with %s on %d ranks: %lld steps in %.1fs, %.0f tokens/s in all", j->mname,
                j->dname, j->mode, j->world, (long long)tr->done[0].step, secs, sps * tr->rows);
        if (tr->evaluated) fprintf(s->out, ", validation loss %.4f", tr->eval_loss);
    } else {
        fprintf(s->out, "trained %s on %s with %s on %d ranks: %lld steps in %.1fs, %.0f samples/s in all", j->mname,
                j->dname, j->mode, j->world, (long long)tr->done[0].step, secs, sps);
        if (tr->evaluated) fprintf(s->out, ", test accuracy %.4f", tr->eval_acc);
    }
    fputc('\n', s->out);
    double comm0 = 0, hid0 = 0, bubble = -1;
    int bsteps = 0;
    if (tr->nmicros) {
        /* a pipeline: its bubble and the activations each stage holds, not the data-parallel figures */
        rs_train_pipe_summary(j, s->out);
        bubble = rs_train_pipe_bubble(j, &bsteps);
    }
    for (int r = 0; r < j->world && !tr->nmicros; r++) {
        double cm, hd;
        comm_hidden(j, r, &cm, &hd);
        comm0 += cm;
        hid0 += hd;
    }
    const rs_strategy_def *sd = rs_strategy_find(j->mode);
    if (comm0 > 0 && sd && (sd->uses & RS_SUSE_INLINE_COMM))
        fprintf(s->out, "communication: %.3f s per rank, inside forward and backward (the layers wait for it)\n",
                comm0 / j->world);
    else if (comm0 > 0)
        fprintf(s->out, "communication: %.3f s per rank, %.0f%% of it hidden behind backward\n", comm0 / j->world,
                100 * hid0 / comm0);
    print_memory(j, m, tr->nmicros ? -1 : tr->zero, tr->opt_states);
    if (!j->background) record_ranks(j, m, sps, secs, comm0, hid0);
    if (!j->background && tr->nmicros) rs_train_pipe_record(j);
    json_t *fo = json_pack("{s:I, s:f, s:f, s:f, s:f}", "steps", (json_int_t)tr->done[0].step, "seconds", secs,
                           "samples_per_s", sps, "comm_hidden", comm0 > 0 ? hid0 / comm0 : 0,
                           tr->evaluated ? "test_acc" : "test_acc_none", tr->evaluated ? tr->eval_acc : 0);
    if (fo && bubble >= 0) json_object_set_new(fo, "bubble", json_real(bubble));
    char *final = fo ? json_dumps(fo, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL; /* owned here */
    json_decref(fo);
    rs_log_run_end(s, j->run, "done", tr->done[0].step, final, NULL);
    free(final);
    if (j->run > 0) fprintf(s->out, "run %lld logged: `show run %lld`\n", (long long)j->run, (long long)j->run);
    return rc;
}

/* Training across ranks as a kind of run on ranks: its lines and its fault are ranks_train.c's. Its
 * ranks finish a step, gather and write the weights when stopped: a longer grace. */
static const rs_job_kind train_kind = {
    .what = "train", .state_size = sizeof(rs_ranks_train), .grace_s = 10, .own_cancel = true, .init = rs_ranks_train_init,
    .line = rs_ranks_train_line, .fault = rs_ranks_train_fault, .finish = train_end,
    .free = rs_ranks_train_free,
};

/* The lines handed to the ranks, as many as there are (a growable list of owned strings). */
typedef struct arglist {
    char **v;
    int n, cap;
    bool oom;
} arglist;

static void arg_add(arglist *l, const char *text)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    char *copy = strdup(text);
    if (!copy) l->oom = true;
    else l->v[l->n++] = copy;
}

__attribute__((format(printf, 2, 3))) static void arg_fmt(arglist *l, const char *fmt, ...)
{
    char *t = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&t, fmt, ap);
    va_end(ap);
    if (n < 0) l->oom = true;
    else arg_add(l, t);
    free(t);
}

static void arg_line(void *ud, const char *text) { arg_add(ud, text); }

static void args_free(arglist *l)
{
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

/* Refusals that need the job's world: the mode's own check, a batch that does not split, kill= that
 * names no rank, a data source too long to hand over. Sets the job's kill fields. Returns 0, or 1
 * after reporting. */
static int ranks_check(rs_session *s, const rs_call *c, const rs_obj *m, const rs_obj *d, const rs_train_cfg *cfg,
                       const rs_strategy_args *sa, rs_job *j)
{
    rs_ranks_train *tr = j->state;
    const rs_strategy_def *sd = sa->def;
    rs_err err = {0};
    if (sd->check && sd->check(sa, m->model, j->world, cfg, &err))
        return rs_session_error(s, c, (size_t)-1, 0, "train: %s", err.msg);
    int split = rs_strategy_batch_parts(sd, sa, j->world); /* the data-parallel degree */
    if (cfg->batch % split) {
        const rs_optval *v = rs_call_opt(c, "batch");
        return rs_session_error(s, c, v->pos, v->set ? 6 + strlen(v->text) : 0,
                                "train: batch=%d is the global batch and does not split over %d ranks (try batch=%d)",
                                cfg->batch, split, (cfg->batch / split + 1) * split);
    }
    long long kill_rank = -1, kill_step = 0;
    if (rs_call_given(c, "kill")) {
        const rs_optval *v = rs_call_opt(c, "kill");
        char end = 0;
        if (sscanf(rs_call_str(c, "kill", ""), "%lld:%lld%c", &kill_rank, &kill_step, &end) != 2 || kill_rank < 0 ||
            kill_rank >= j->world || kill_step < 1)
            return rs_session_error(s, c, v->pos, 5 + strlen(v->text),
                                    "train: kill=RANK:STEP with a rank 0..%d and a step from 1, e.g. kill=1:20",
                                    j->world - 1);
    }
    tr->kill_asked = kill_rank >= 0;
    tr->kill_rank = (int)kill_rank;
    tr->kill_step = kill_step;
    if (d->source_cut)
        return rs_session_error(s, c, c->arg_pos[2], strlen(c->args[2]),
                                "train: data %s's source is too long to hand to the ranks; use fewer or shorter paths",
                                d->name);
    return 0;
}

/* The job's folder and the model's weights in it (init.safetensors), which every rank starts from.
 * Returns 0, or 1 after reporting. */
static int ranks_files(rs_session *s, const rs_call *c, const rs_obj *m, rs_job *j)
{
    rs_ranks_train *tr = j->state;
    snprintf(tr->dir, sizeof tr->dir, "/tmp/ringside-train-XXXXXX");
    if (!mkdtemp(tr->dir))
        return rs_session_error(s, c, (size_t)-1, 0, "train: cannot make a folder for the ranks' files: %s",
                                strerror(errno));
    snprintf(tr->init, sizeof tr->init, "%s/init.safetensors", tr->dir);
    snprintf(tr->outp, sizeof tr->outp, "%s/out.safetensors", tr->dir);
    rs_err err = {0};
    if (rs_ckpt_save_model(tr->init, m->model, &err)) {
        rmdir(tr->dir);
        return rs_session_error(s, c, (size_t)-1, 0, "train: %s", err.msg);
    }
    return 0;
}

/* What the end and the view need, copied: the call and cfg are gone when a background run ends. */
static void ranks_plan(rs_job *j, const rs_obj *m, const rs_obj *d, const rs_train_cfg *cfg,
                       const rs_strategy_args *sa, int split, long long zero)
{
    rs_ranks_train *tr = j->state;
    snprintf(j->mname, sizeof j->mname, "%s", m->name);
    snprintf(j->dname, sizeof j->dname, "%s", d->name);
    snprintf(j->mode, sizeof j->mode, "%s", sa->def->name);
    tr->ckpt = cfg->ckpt_path ? strdup(cfg->ckpt_path) : NULL;
    tr->zero = (int)zero;
    tr->opt_states = cfg->opt.kind == RS_OPT_SGD ? (cfg->opt.momentum != 0 ? 1 : 0) : 2;
    /* the plan, for the view's header: each rank takes ceil(n/W) samples (DistributedSampler pads), in
     * batches of batch/W, the last one partial; accum of them make a step (a mode that gives every rank
     * the whole batch reads it all) */
    tr->batch_parts = split;
    tr->rows = rs_model_rows(m->model);
    tr->sargs = malloc(sizeof *tr->sargs);
    if (tr->sargs) *tr->sargs = *sa;
    int64_t per_rank = cfg->drop_last ? (int64_t)d->data.train->n / split : ((int64_t)d->data.train->n + split - 1) / split;
    int64_t local = cfg->batch / split;
    int64_t batches = local > 0 ? (cfg->drop_last ? per_rank / local : (per_rank + local - 1) / local) /
                                      (cfg->accum > 1 ? cfg->accum : 1)
                                : 0;
    j->steps_total = batches * cfg->epochs;
    if (cfg->max_steps > 0 && cfg->max_steps < j->steps_total) j->steps_total = cfg->max_steps;
    j->epochs = cfg->epochs;
}

/* The run's first line: ranks, backend and how the global batch splits. */
static void say_layout(rs_session *s, const rs_job *j, const rs_train_cfg *cfg, int split, long long zero)
{
    if (split == 1)
        fprintf(s->out, "%s: %d ranks on %s, global batch %d (every rank sees all of it)\n", j->mode, j->world,
                j->backend, cfg->batch);
    else if (split < j->world)
        fprintf(s->out, "%s: %d ranks on %s, global batch %d (%d per group of %d ranks, %d groups)\n", j->mode,
                j->world, j->backend, cfg->batch, cfg->batch / split, j->world / split, split);
    else
        fprintf(s->out, "%s: %d ranks on %s, global batch %d (%d per rank)%s\n", j->mode, j->world, j->backend,
                cfg->batch, cfg->batch / j->world,
                zero == 3 ? ", ZeRO-3" : zero == 2 ? ", ZeRO-2" : zero == 1 ? ", ZeRO-1" : "");
}

/* An epoch that does not split evenly over the data-parallel ranks: torch's DistributedSampler (and so
 * ringside's) repeats the epoch's first samples to fill the last ranks, so the epoch's last step is not
 * one process's. Said, with the way to the same steps (drop_last=on; docs/parallel.md "Uneven splits"). */
static void say_uneven(rs_session *s, const rs_job *j, const rs_obj *d, const rs_train_cfg *cfg, int split)
{
    uint32_t n = d->data.train->n;
    if (split <= 1 || n % (uint32_t)split == 0) return;
    uint32_t per = n / (uint32_t)split + 1, pad = per * (uint32_t)split - n;
    if (cfg->drop_last) {
        uint64_t step = (uint64_t)cfg->batch * (uint64_t)(cfg->accum > 1 ? cfg->accum : 1);
        fprintf(s->out, "%s: drop_last=on: each epoch leaves out its last %llu of %u samples (what does not fill a "
                "global batch of %llu), as one process with drop_last=on does, so the ranks train its steps\n",
                j->mode, (unsigned long long)(n % step), n, (unsigned long long)step);
        return;
    }
    fprintf(s->out, "%s: %u samples do not split evenly over %d ranks: each reads %u an epoch, %u of them twice (the "
            "sampler pads as torch's DistributedSampler does), so the epoch's last step differs from one process's; "
            "drop_last=on trains exactly one process's steps\n", j->mode, n, split, per, pad);
}

/* Every option, as the worker reads them: the mode and its own options from the registry's
 * declaration, then those of every run. a->oom says when one was lost. */
static void ranks_args(arglist *a, const rs_job *j, const rs_obj *m, const rs_obj *d, const rs_train_cfg *cfg,
                       const rs_strategy_args *sa)
{
    const rs_ranks_train *tr = j->state;
    rs_strategy_args_lines(sa, arg_line, a);
    arg_fmt(a, "backend=%s", j->backend);
    arg_fmt(a, "init=%s", tr->init);
    arg_fmt(a, "out=%s", tr->outp);
    arg_fmt(a, "data=%s", d->source);
    arg_fmt(a, "data_seed=%llu", (unsigned long long)d->data_seed);
    arg_fmt(a, "model_seed=%llu", (unsigned long long)rs_model_seed(m->model));
    arg_fmt(a, "seed=%llu", (unsigned long long)cfg->seed);
    arg_fmt(a, "accum=%d", cfg->accum);
    arg_fmt(a, "epochs=%d", cfg->epochs);
    arg_fmt(a, "batch=%d", cfg->batch);
    arg_fmt(a, "opt=%s", rs_opt_kind_name(cfg->opt.kind));
    arg_fmt(a, "lr=%.9g", (double)cfg->opt.lr);
    arg_fmt(a, "momentum=%.9g", (double)cfg->opt.momentum);
    arg_fmt(a, "nesterov=%d", cfg->opt.nesterov);
    arg_fmt(a, "wd=%.9g", (double)cfg->opt.weight_decay);
    arg_fmt(a, "beta1=%.9g", (double)cfg->opt.beta1);
    arg_fmt(a, "beta2=%.9g", (double)cfg->opt.beta2);
    arg_fmt(a, "drop_last=%d", cfg->drop_last);
    arg_fmt(a, "sched=%s",
            cfg->sched.kind == RS_SCHED_COSINE ? "cosine" : cfg->sched.kind == RS_SCHED_STEP ? "step" : "constant");
    arg_fmt(a, "warmup=%lld", (long long)cfg->sched.warmup);
    arg_fmt(a, "step_size=%lld", (long long)cfg->sched.step_size);
    arg_fmt(a, "gamma=%.9g", (double)cfg->sched.gamma);
    arg_fmt(a, "min_lr=%.9g", (double)cfg->sched.min_lr);
    arg_fmt(a, "steps=%lld", (long long)cfg->max_steps);
    arg_fmt(a, "eval=%d", cfg->eval);
    arg_fmt(a, "clip=%.9g", (double)cfg->clip);
    arg_fmt(a, "precision=%s", rs_prec_name(cfg->precision));
    if (cfg->precision == RS_PREC_FP16) arg_fmt(a, "loss_scale=%.9g", (double)cfg->loss_scale);
    if (cfg->inject_inf) arg_fmt(a, "inject_inf=%lld", (long long)cfg->inject_inf);
    arg_fmt(a, "groups=%d", cfg->opt.groups);
    arg_fmt(a, "eval_every=%lld", (long long)cfg->eval_every);
    arg_fmt(a, "eval_samples=%lld", (long long)cfg->eval_samples);
    if (cfg->ckpt_path) arg_fmt(a, "ckpt=%s", cfg->ckpt_path);
    if (cfg->ckpt_every) arg_fmt(a, "ckpt_every=%lld", (long long)cfg->ckpt_every);
    if (cfg->resume) arg_fmt(a, "resume=%s", cfg->resume);
    if (tr->kill_asked) arg_fmt(a, "kill=%lld:%lld", (long long)tr->kill_rank, (long long)tr->kill_step);
    char *spec = rs_model_spec(m->model); /* owned here */
    arg_fmt(a, "spec=%s", spec ? spec : m->spec);
    free(spec);
}

int rs_cmd_train_ranks(rs_session *s, const rs_call *c, rs_obj *m, rs_obj *d, const rs_train_cfg *cfg,
                       const rs_strategy_args *sa)
{
    const rs_strategy_def *sd = sa->def;
    rs_job *j = rs_job_new(s, c, &train_kind); /* owned here until rs_job_run takes it */
    if (!j) return 1;
    rs_ranks_train *tr = j->state;
    /* the summary prints the ZeRO paper's formula beside the memory: a mode that shards says how far */
    long long zero = rs_strategy_opt_find(sd, "zero", NULL) ? rs_strategy_int(sa, "zero") : 0;
    if (ranks_check(s, c, m, d, cfg, sa, j) || ranks_files(s, c, m, j)) {
        rs_job_free(j);
        return 1;
    }
    int split = rs_strategy_batch_parts(sd, sa, j->world);
    ranks_plan(j, m, d, cfg, sa, split, zero);
    if (sd == &rs_strategy_pipeline) rs_train_pipe_begin(j, sa);
    j->run = rs_log_run_begin_dist(s, "train", m->name, m->spec, d->name, c, j->mode, j->backend, j->world);
    tr->last_print = rs_pg_now();
    say_layout(s, j, cfg, split, zero);
    say_uneven(s, j, d, cfg, split);
    arglist a = {0};
    ranks_args(&a, j, m, d, cfg, sa);
    if (a.oom) {
        args_free(&a);
        unlink(tr->init);
        rmdir(tr->dir);
        rs_log_run_end(s, j->run, "failed", 0, NULL, "out of memory");
        rs_job_free(j);
        return rs_session_error(s, c, (size_t)-1, 0, "train: out of memory for the ranks' options");
    }
    int rc = rs_job_run(j, (const char *const *)a.v, a.n);
    args_free(&a);
    return rc;
}
