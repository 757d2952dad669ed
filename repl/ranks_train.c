/* A training run across ranks as a kind of run on ranks (see ranks_train.h): what each of its ranks'
 * training lines goes into — the session log, and the figures the end's summary and tables print. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repl_log.h"
#include "session.h"

#include "ranks_train.h"

/* A training rank's @done (its step count, seconds and samples/s), for replays. */
static void log_done(rs_job *j, const rs_train_line *t)
{
    char *detail = rs_job_detail("{s:f}", "sps", t->sps); /* owned here */
    rs_slog_event_info e = RS_SLOG_EVENT_INIT;
    e.rank = t->rank;
    e.t = rs_pg_now() + j->mono_to_unix;
    e.kind = "done";
    e.step = t->step;
    e.value = t->seconds;
    e.detail_json = detail;
    rs_log_event(j->s, j->run, &e);
    free(detail);
}

static void keep_span(rs_ranks_train *k, int rank, int64_t step, bool comm, double t0, double t1, size_t bytes)
{
    if (k->nspans == k->capspans) {
        int cap = k->capspans ? 2 * k->capspans : 256;
        rs_ranks_span *p = realloc(k->spans, sizeof *p * (size_t)cap);
        if (!p) return;
        k->spans = p;
        k->capspans = cap;
    }
    k->spans[k->nspans++] = (rs_ranks_span){rank, step, comm, t0, t1, bytes};
}

static void keep_micro(rs_ranks_train *k, const rs_train_line *t)
{
    if (k->nmicros == k->capmicros) {
        int cap = k->capmicros ? 2 * k->capmicros : 1024;
        rs_train_line *p = realloc(k->micros, sizeof *p * (size_t)cap);
        if (!p) return;
        k->micros = p;
        k->capmicros = cap;
    }
    k->micros[k->nmicros++] = *t;
}

/* A rank's evaluation: a language model's as one process prints it (repl/progress.c), from the lm_*
 * figures that came before it; a classifier's test accuracy. */
static void eval_line(rs_job *j, const rs_train_line *t)
{
    rs_session *s = j->s;
    rs_ranks_train *k = j->state;
    k->eval_acc = t->acc;
    k->eval_loss = t->loss;
    k->evaluated = true;
    if (!j->background && k->rows > 1)
        fprintf(s->out, "  step %lld/%lld: val loss %.4f  train loss %.4f  %.0f tok/s\n", (long long)k->lm_step,
                (long long)j->steps_total, t->loss, k->lm_train_loss,
                k->lm_tps * (k->batch_parts > 0 ? k->batch_parts : j->world));
    else if (!j->background)
        fprintf(s->out, "  epoch %d: test accuracy %.4f, test loss %.4f\n", t->epoch + 1, t->acc, t->loss);
    rs_log_metric(s, j->run, j->last_step, t->epoch, "test_acc", t->acc);
    rs_log_metric(s, j->run, j->last_step, t->epoch, "test_loss", t->loss);
    if (k->rows > 1) rs_log_metric(s, j->run, j->last_step, t->epoch, "val_loss", t->loss);
}

/* A rank's named figure: into the log, and the end's table of figures; a language model's evaluation
 * figures (lm_*) are kept for its @eval line instead. */
static void metric_line(rs_job *j, const rs_train_line *t)
{
    rs_session *s = j->s;
    rs_ranks_train *k = j->state;
    if (s->log && j->run > 0) rs_slog_metric(s->log, j->run, t->rank, t->step, 0, t->name, t->value);
    if (!strncmp(t->name, "lm_", 3)) {
        k->lm_step = t->step;
        if (!strcmp(t->name, "lm_train_loss")) k->lm_train_loss = t->value;
        else if (!strcmp(t->name, "lm_tokens_per_s")) k->lm_tps = t->value;
        return;
    }
    for (int i = 0; k->figs && i < 8; i++) {
        rs_ranks_fig *f = &k->figs[t->rank][i];
        if (f->name[0] && strcmp(f->name, t->name)) continue;
        if (!f->name[0]) {
            snprintf(f->name, sizeof f->name, "%s", t->name);
            f->max = t->value;
        }
        f->last = t->value;
        if (t->value > f->max) f->max = t->value;
        break;
    }
}

/* A training rank's report: into the session log, and the figures the summary prints. */
static void train_line(rs_job *j, const rs_train_line *t)
{
    rs_session *s = j->s;
    rs_ranks_train *k = j->state;
    if (t->rank >= j->world) return;
    rs_slog_event_info e = RS_SLOG_EVENT_INIT;
    e.rank = t->rank;
    e.step = t->step;
    char *detail = NULL; /* owned here */
    switch (t->kind) {
    case RS_TL_PHASE:
        e.kind = "phase";
        e.name = t->name;
        e.t = t->t0 + j->mono_to_unix;
        e.value = t->t1 - t->t0;
        rs_log_event(s, j->run, &e);
        if (!strcmp(t->name, "backward")) keep_span(k, t->rank, t->step, false, t->t0, t->t1, 0);
        break;
    case RS_TL_COMM:
        e.kind = "phase";
        e.name = "comm";
        e.t = t->t0 + j->mono_to_unix;
        e.value = t->t1 - t->t0;
        e.bytes = (int64_t)t->bytes;
        e.chunk = t->index;
        detail = rs_job_detail("{s:s, s:i}", "op", t->name, "bucket", t->index);
        e.detail_json = detail;
        rs_log_event(s, j->run, &e);
        keep_span(k, t->rank, t->step, true, t->t0, t->t1, t->bytes);
        break;
    case RS_TL_STEP:
        if (s->log && j->run > 0) {
            rs_slog_metric(s->log, j->run, t->rank, t->step, t->epoch, "loss", t->loss);
            if (t->rank == 0) rs_slog_metric(s->log, j->run, 0, t->step, t->epoch, "lr", t->lr);
        }
        if (t->rank == 0) {
            j->last_step = t->step;
            k->last_loss = t->loss;
            double now = rs_pg_now();
            if (!j->background && now - k->last_print > 2) {
                if (k->rows > 1)
                    fprintf(s->out, "  step %lld: loss %.4f (rank 0), %.0f tokens/s per rank\n", (long long)t->step,
                            t->loss, t->sps * k->rows);
                else
                    fprintf(s->out, "  step %lld: loss %.4f (rank 0), %.0f samples/s per rank\n", (long long)t->step,
                            t->loss, t->sps);
                fflush(s->out);
                k->last_print = now;
            }
        }
        break;
    case RS_TL_MEM:
        k->mem[t->rank] = *t;
        for (int p = 0; p < RS_POOL_COUNT; p++) {
            e.kind = "memory";
            e.name = rs_pool_name((rs_pool)p);
            e.bytes = t->live[p];
            e.value = (double)t->peak[p];
            rs_log_event(s, j->run, &e);
        }
        break;
    case RS_TL_EVAL: eval_line(j, t); break;
    case RS_TL_MICRO:
        e.kind = "micro";
        e.name = t->work == 'F' ? "forward" : "backward";
        e.t = t->t0 + j->mono_to_unix;
        e.value = t->t1 - t->t0;
        e.chunk = t->micro;
        detail = rs_job_detail("{s:i}", "stage", t->stage);
        e.detail_json = detail;
        rs_log_event(s, j->run, &e);
        keep_micro(k, t);
        break;
    case RS_TL_STAGE:
        e.kind = "stage";
        e.t = rs_pg_now() + j->mono_to_unix;
        e.chunk = t->stage;
        detail = rs_job_detail("{s:i, s:i, s:i}", "stages", t->index, "first", t->first, "last", t->last);
        e.detail_json = detail;
        e.step = -1;
        rs_log_event(s, j->run, &e);
        if (k->stage_text && k->stage_short) {
            char *txt = k->stage_text[t->rank], *sh = k->stage_short[t->rank];
            size_t k = strlen(txt), ks = strlen(sh);
            snprintf(txt + k, 96 - k, "%sstage %d of %d (layers %d..%d)", k ? ", " : "", t->stage, t->index, t->first,
                     t->last);
            snprintf(sh + ks, 48 - ks, "%s%d:%d..%d", ks ? " " : "", t->stage, t->first, t->last);
        }
        break;
    case RS_TL_METRIC: metric_line(j, t); break;
    case RS_TL_DONE: k->done[t->rank] = *t; break;
    case RS_TL_CKPT:
        k->ckpts++;
        k->last_ckpt_step = t->step;
        break;
    }
    free(detail);
}


bool rs_ranks_train_line(rs_job *j, const char *line)
{
    rs_train_line tl;
    if (!rs_wire_parse_train(line, &tl)) return false;
    if (tl.kind == RS_TL_DONE) log_done(j, &tl);
    train_line(j, &tl);
    return true;
}

bool rs_ranks_train_init(rs_job *j)
{
    rs_ranks_train *k = j->state;
    k->mem = calloc((size_t)j->world, sizeof *k->mem);
    k->done = calloc((size_t)j->world, sizeof *k->done);
    k->stage_text = calloc((size_t)j->world, sizeof *k->stage_text);
    k->stage_short = calloc((size_t)j->world, sizeof *k->stage_short);
    k->figs = calloc((size_t)j->world, sizeof *k->figs);
    return k->mem && k->done && k->stage_text && k->stage_short && k->figs;
}

/* kill=RANK:STEP asked for that rank's SIGKILL: its death is the report, not an error. */
bool rs_ranks_train_fault(rs_job *j, int rank, const rs_launch_rank *how, const rs_err *e)
{
    rs_ranks_train *k = j->state;
    k->killed = k->kill_asked && rank == k->kill_rank && how->state == RS_LAUNCH_SIGNALED && how->status == SIGKILL;
    if (k->killed)
        fprintf(j->s->out, "%s: as kill=%d:%lld asked, %s\n", j->kind->what, k->kill_rank, (long long)k->kill_step,
                e->msg);
    return k->killed;
}

void rs_ranks_train_free(rs_job *j)
{
    rs_ranks_train *k = j->state;
    free(k->mem);
    free(k->done);
    free(k->spans);
    free(k->micros);
    free(k->stage_text);
    free(k->stage_short);
    free(k->figs);
    free(k->ckpt);
    free(k->sargs);
}
