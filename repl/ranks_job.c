/* One run across ranks: launch, the ranks' lines, the live view's side, the end, and runs in the
 * background (see ranks_job.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "call.h"
#include "dist/launch/launch.h"
#include "dist/launch/spawn.h"
#include "dist/pg/pg.h"
#include "dist/store/store.h"
#include "dist/train/dtrain.h"
#include "dist/worker/worker.h"
#include "engine/ckpt/checkpoint.h"
#include "engine/cuda/cuda.h"
#include "lang/value.h"
#include "repl_log.h"
#include "result.h"
#include "session.h"
#include "view_live.h"

#include "ranks_job.h"

static void keep_line(rs_job *j, int rank, const char *line)
{
    if (j->nlines == j->cap) {
        int cap = j->cap ? 2 * j->cap : 16;
        char **l = realloc(j->lines, sizeof *l * (size_t)cap);
        if (!l) return;
        j->lines = l;
        int *r = realloc(j->line_rank, sizeof *r * (size_t)cap);
        if (!r) return;
        j->line_rank = r;
        j->cap = cap;
    }
    char *copy = strdup(line);
    if (!copy) return;
    j->lines[j->nlines] = copy;
    j->line_rank[j->nlines++] = rank;
}

/* "rank 3: ..." lines carry their own rank (mpirun's output all comes through one pipe). */
static int line_owner(const char *line, int fallback)
{
    int r;
    return sscanf(line, "rank %d:", &r) == 1 ? r : fallback;
}

/* A session-log event's detail from a json_pack format, as compact JSON text (caller frees; NULL when
 * out of memory: the event goes without it). Reals keep 9 significant digits. */
static char *detail_pack(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_t *o = json_vpack_ex(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(o);
    return text;
}

static void log_trace(rs_job *j, const rs_pg_event *ev)
{
    static const char *const kinds[] = {"coll_begin", "coll_step", "coll_end"};
    rs_slog_event_info e = RS_SLOG_EVENT_INIT;
    e.rank = ev->rank;
    e.t = ev->t + j->mono_to_unix;
    e.kind = kinds[ev->kind];
    e.name = rs_pg_op_name(ev->op);
    e.coll = (int64_t)ev->coll;
    e.algo = rs_pg_algo_name(ev->algo);
    e.bytes = (int64_t)ev->bytes;
    char *detail = NULL; /* owned here */
    if (ev->kind == RS_PG_EV_STEP) {
        e.astep = ev->step;
        e.peer = ev->peer;
        e.chunk = ev->chunk;
        detail = detail_pack("{s:i, s:i}", "steps", ev->steps, "group", ev->group);
        e.detail_json = detail;
        if (!j->algo[0]) snprintf(j->algo, sizeof j->algo, "%s", rs_pg_algo_name(ev->algo));
        if (ev->rank < j->world && j->rank_steps && ++j->rank_steps[ev->rank] > j->steps) j->steps = j->rank_steps[ev->rank];
    } else if (ev->group) {
        detail = detail_pack("{s:i}", "group", ev->group);
        e.detail_json = detail;
    }
    if (ev->rank < j->world) {
        if (ev->kind == RS_PG_EV_STEP && j->sent && ev->peer >= 0) j->sent[ev->rank] += (double)ev->bytes;
        if (ev->kind == RS_PG_EV_BEGIN) j->begin_t[ev->rank] = ev->t;
        if (ev->kind == RS_PG_EV_END) e.value = ev->t - j->begin_t[ev->rank];
    }
    rs_log_event(j->s, j->run, &e);
    free(detail);
    j->nevents++;
}

/* One more number at the end of a vector of the last result (bench: a column of the table). */
static void append_num(rs_session *s, const char *name, double v)
{
    const rs_result_val *old = rs_result_find(s->results, name, -1);
    int n = old ? old->n : 0;
    double *buf = malloc(sizeof *buf * (size_t)(n + 1));
    if (!buf) return;
    if (n) memcpy(buf, old->v, sizeof *buf * (size_t)n);
    buf[n] = v;
    rs_result_vec(s, name, -1, buf, n + 1);
    free(buf);
}

static void bench_row(rs_job *j, const rs_bench_row *r)
{
    FILE *f = j->held ? j->held : j->s->out; /* the background's rows are printed at its end */
    /* the view has the row in its bench pane (fed from the @bench line): the table's text, as wide as
     * nccl-tests prints it, stays out of its narrower log pane and is printed when the view closes */
    bool quiet = j->live && f == j->s->out;
    if (quiet) rs_live_quiet(j->live, true);
    if (j->nrows++ == 0) {
        fprintf(f, "#\n#%12s %13s %6s %7s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time", "algbw",
                "busbw", "#wrong");
        fprintf(f, "#%12s %13s %6s %7s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
    }
    fprintf(f, " %12llu %13llu %6s %7s %10.2f %8.2f %8.2f %7llu\n", (unsigned long long)r->bytes,
            (unsigned long long)r->count, rs_dtype_name(r->dtype), rs_redop_name(r->redop), r->time_us, r->algbw,
            r->busbw, (unsigned long long)r->wrong);
    fflush(f);
    if (quiet) rs_live_quiet(j->live, false);
    j->busbw_sum += r->busbw;
    if (r->wrong) j->wrong_rows++;
    int64_t step = (int64_t)r->bytes;
    rs_log_metric(j->s, j->run, step, 0, "time_us", r->time_us);
    rs_log_metric(j->s, j->run, step, 0, "algbw", r->algbw);
    rs_log_metric(j->s, j->run, step, 0, "busbw", r->busbw);
    rs_log_metric(j->s, j->run, step, 0, "wrong", (double)r->wrong);
    if (!j->background) { /* for `expect busbw.1M > 0` (repl/result.h) */
        char size[32], name[64];
        rs_val_fmt_size(r->bytes, size, sizeof size);
        const char *names[] = {"busbw", "algbw", "time_us", "wrong"};
        double vals[] = {r->busbw, r->algbw, r->time_us, (double)r->wrong};
        for (int i = 0; i < 4; i++) {
            snprintf(name, sizeof name, "%s.%s", names[i], size);
            rs_result_num(j->s, name, vals[i]);
            append_num(j->s, names[i], vals[i]);
        }
        append_num(j->s, "size", (double)r->bytes);
    }
}

static void keep_span(rs_job *j, int rank, int64_t step, bool comm, double t0, double t1, size_t bytes)
{
    if (j->nspans == j->capspans) {
        int cap = j->capspans ? 2 * j->capspans : 256;
        struct tspan *p = realloc(j->spans, sizeof *p * (size_t)cap);
        if (!p) return;
        j->spans = p;
        j->capspans = cap;
    }
    j->spans[j->nspans++] = (struct tspan){rank, step, comm, t0, t1, bytes};
}

static void keep_micro(rs_job *j, const rs_train_line *t)
{
    if (j->nmicros == j->capmicros) {
        int cap = j->capmicros ? 2 * j->capmicros : 1024;
        rs_train_line *p = realloc(j->micros, sizeof *p * (size_t)cap);
        if (!p) return;
        j->micros = p;
        j->capmicros = cap;
    }
    j->micros[j->nmicros++] = *t;
}

/* A training rank's report: into the session log, and the figures the summary prints. */
static void train_line(rs_job *j, const rs_train_line *t)
{
    rs_session *s = j->s;
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
        if (!strcmp(t->name, "backward")) keep_span(j, t->rank, t->step, false, t->t0, t->t1, 0);
        break;
    case RS_TL_COMM:
        e.kind = "phase";
        e.name = "comm";
        e.t = t->t0 + j->mono_to_unix;
        e.value = t->t1 - t->t0;
        e.bytes = (int64_t)t->bytes;
        e.chunk = t->index;
        detail = detail_pack("{s:s, s:i}", "op", t->name, "bucket", t->index);
        e.detail_json = detail;
        rs_log_event(s, j->run, &e);
        keep_span(j, t->rank, t->step, true, t->t0, t->t1, t->bytes);
        break;
    case RS_TL_STEP:
        if (s->log && j->run > 0) {
            rs_slog_metric(s->log, j->run, t->rank, t->step, t->epoch, "loss", t->loss);
            if (t->rank == 0) rs_slog_metric(s->log, j->run, 0, t->step, t->epoch, "lr", t->lr);
        }
        if (t->rank == 0) {
            j->last_step = t->step;
            j->last_loss = t->loss;
            double now = rs_pg_now();
            if (!j->background && now - j->last_print > 2) {
                fprintf(s->out, "  step %lld: loss %.4f (rank 0), %.0f samples/s per rank\n", (long long)t->step,
                        t->loss, t->sps);
                fflush(s->out);
                j->last_print = now;
            }
        }
        break;
    case RS_TL_MEM:
        j->mem[t->rank] = *t;
        for (int p = 0; p < RS_POOL_COUNT; p++) {
            e.kind = "memory";
            e.name = rs_pool_name((rs_pool)p);
            e.bytes = t->live[p];
            e.value = (double)t->peak[p];
            rs_log_event(s, j->run, &e);
        }
        break;
    case RS_TL_EVAL:
        j->eval_acc = t->acc;
        j->eval_loss = t->loss;
        j->evaluated = true;
        if (!j->background) fprintf(s->out, "  epoch %d: test accuracy %.4f, test loss %.4f\n", t->epoch + 1, t->acc, t->loss);
        rs_log_metric(s, j->run, j->last_step, t->epoch, "test_acc", t->acc);
        rs_log_metric(s, j->run, j->last_step, t->epoch, "test_loss", t->loss);
        break;
    case RS_TL_MICRO:
        e.kind = "micro";
        e.name = t->work == 'F' ? "forward" : "backward";
        e.t = t->t0 + j->mono_to_unix;
        e.value = t->t1 - t->t0;
        e.chunk = t->micro;
        detail = detail_pack("{s:i}", "stage", t->stage);
        e.detail_json = detail;
        rs_log_event(s, j->run, &e);
        keep_micro(j, t);
        break;
    case RS_TL_STAGE:
        e.kind = "stage";
        e.t = rs_pg_now() + j->mono_to_unix;
        e.chunk = t->stage;
        detail = detail_pack("{s:i, s:i, s:i}", "stages", t->index, "first", t->first, "last", t->last);
        e.detail_json = detail;
        e.step = -1;
        rs_log_event(s, j->run, &e);
        if (j->stage_text && j->stage_short) {
            char *txt = j->stage_text[t->rank], *sh = j->stage_short[t->rank];
            size_t k = strlen(txt), ks = strlen(sh);
            snprintf(txt + k, 96 - k, "%sstage %d of %d (layers %d..%d)", k ? ", " : "", t->stage, t->index, t->first,
                     t->last);
            snprintf(sh + ks, 48 - ks, "%s%d:%d..%d", ks ? " " : "", t->stage, t->first, t->last);
        }
        break;
    case RS_TL_METRIC:
        if (s->log && j->run > 0) rs_slog_metric(s->log, j->run, t->rank, t->step, 0, t->name, t->value);
        for (int i = 0; j->figs && i < 8; i++) {
            struct rs_job_fig *f = &j->figs[t->rank][i];
            if (f->name[0] && strcmp(f->name, t->name)) continue;
            if (!f->name[0]) {
                snprintf(f->name, sizeof f->name, "%s", t->name);
                f->max = t->value;
            }
            f->last = t->value;
            if (t->value > f->max) f->max = t->value;
            break;
        }
        break;
    case RS_TL_DONE: j->done[t->rank] = *t; break;
    case RS_TL_CKPT:
        j->ckpts++;
        j->last_ckpt_step = t->step;
        break;
    }
    free(detail);
}

/* ---------------------------------------------------------------- the live view's side of a job */

/* A rank's monotonic stamp as the session log keeps it (unix seconds lose the bits below ~0.2 us) and
 * back: the model sees the times a replay of the log will see, so both draw the same frame. */
static double logged_time(const rs_job *j, double t) { return (t + j->mono_to_unix) - j->mono_to_unix; }

/* Every line of every rank goes to the dashboard's model as it came. */
static void view_feed(rs_job *j, int rank, int is_stderr, const char *line)
{
    rs_view_model *vms[2] = {j->live ? rs_live_model(j->live) : NULL, j->dump_vm};
    if (!vms[0] && !vms[1]) return;
    rs_pg_event ev;
    rs_train_line tl;
    rs_data_line dl;
    char buf[RS_VIEW_LOG_W + 16];
    bool is_ev = !is_stderr && rs_wire_parse_event(line, &ev), is_tl = !is_ev && !is_stderr && rs_wire_parse_train(line, &tl);
    bool is_data = !is_ev && !is_tl && !is_stderr && rs_wire_parse_data(line, &dl);
    if (is_ev) ev.t = logged_time(j, ev.t);
    if (is_tl) tl.t0 = logged_time(j, tl.t0), tl.t1 = logged_time(j, tl.t1);
    if (is_data) dl.t = logged_time(j, dl.t);
    if (is_stderr) snprintf(buf, sizeof buf, "stderr: %s", line); /* never parsed as a machine line */
    for (int i = 0; i < 2; i++) {
        if (!vms[i]) continue;
        if (is_ev) rs_view_feed_event(vms[i], &ev);
        else if (is_tl) rs_view_feed_train(vms[i], &tl);
        else if (is_data) rs_view_feed_data(vms[i], &dl);
        else rs_view_feed_line(vms[i], rank, is_stderr ? buf : line);
    }
}

/* {"text": line} for the session log (caller frees; NULL when out of memory or the line is not
 * UTF-8), the line cut to max bytes at a character boundary. */
static char *text_detail(const char *line, size_t max)
{
    size_t n = strlen(line);
    if (n > max)
        for (n = max; n > 0 && ((unsigned char)line[n] & 0xC0) == 0x80; n--) continue;
    return detail_pack("{s:s%}", "text", line, n);
}

/* A rank's plain line into the session log (kind 'log', detail {"text": ...}), so `view run N` can show
 * the log pane the live view showed. */
static void log_plain(rs_job *j, int rank, int is_stderr, const char *line)
{
    char *detail = text_detail(line, 505); /* owned here */
    rs_slog_event_info e = RS_SLOG_EVENT_INIT;
    e.rank = rank;
    e.t = rs_pg_now() + j->mono_to_unix;
    e.kind = "log";
    e.name = is_stderr ? "stderr" : "stdout";
    e.detail_json = detail;
    rs_log_event(j->s, j->run, &e);
    free(detail);
}

/* A rank's values (@data, step=1) as the line itself (kind 'coll_data', detail {"text": line}): `view
 * run N` feeds it back through the same parser. */
static void log_data(rs_job *j, const rs_data_line *d, const char *line)
{
    char *detail = text_detail(line, RS_WIRE_DATA_MAX * 28 + 193); /* owned here */
    rs_slog_event_info e = RS_SLOG_EVENT_INIT;
    e.rank = d->rank;
    e.t = d->t + j->mono_to_unix;
    e.kind = "coll_data";
    e.coll = (int64_t)d->coll;
    e.astep = d->done;
    e.detail_json = detail;
    rs_log_event(j->s, j->run, &e);
    free(detail);
}

/* A training rank's @done (its step count, seconds and samples/s), for replays. */
static void log_done(rs_job *j, const rs_train_line *t)
{
    char *detail = detail_pack("{s:f}", "sps", t->sps); /* owned here */
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

/* step=1: lets the ranks run algorithm step k of the current collective (once some rank reached it). */
static void step_release(rs_job *j, int k)
{
    if (!j->stepwise || !j->step_store || k > j->step_max || k < j->step_next) return;
    double t = logged_time(j, rs_pg_now());
    for (; j->step_next <= k; j->step_next++) {
        /* the models learn which ranks waited for this key and how long (not the collective's time) */
        if (j->live) rs_view_feed_release(rs_live_model(j->live), j->step_coll, j->step_next, t);
        if (j->dump_vm) rs_view_feed_release(j->dump_vm, j->step_coll, j->step_next, t);
        rs_slog_event_info rel = RS_SLOG_EVENT_INIT; /* for replays (cmd_view.c feeds it the same way) */
        rel.kind = "step_release";
        rel.coll = (int64_t)j->step_coll;
        rel.astep = j->step_next;
        rel.t = t + j->mono_to_unix;
        rs_log_event(j->s, j->run, &rel);
        char key[64];
        rs_err e = {0};
        snprintf(key, sizeof key, "step/%llu/%d", (unsigned long long)j->step_coll, j->step_next);
        rs_store_set(j->step_store, key, "1", 1, &e);
    }
}

static void step_reported(rs_job *j, const rs_pg_event *ev)
{
    if (j->step_max < 0 || ev->coll > j->step_coll) {
        j->step_coll = ev->coll;
        j->step_next = 0;
        j->step_max = -1;
    } else if (ev->coll < j->step_coll) return;
    if (ev->step > j->step_max) j->step_max = ev->step;
    if (!j->live) step_release(j, j->step_max); /* nobody is stepping: let them run */
}

/* `q`: the view goes, the run goes on in the foreground with plain lines. */
static void leave_view(rs_job *j)
{
    rs_live_end(j->live);
    j->live = NULL;
    fprintf(j->s->out, "%s: left the dashboard; the run goes on\n", j->what);
    fflush(j->s->out);
    step_release(j, j->step_max);
}

/* A rank's buffer (@vals), kept for the command's end to record for `expect`. */
static void keep_vals(rs_job *j, const char *line)
{
    if (j->nvals == j->capvals) {
        int cap = j->capvals ? 2 * j->capvals : 8;
        rs_wire_vals *v = realloc(j->vals, sizeof *v * (size_t)cap);
        if (!v) return;
        j->vals = v;
        j->capvals = cap;
    }
    if (rs_wire_parse_vals(line, &j->vals[j->nvals]) && j->vals[j->nvals].rank < j->world) j->nvals++;
}

/* A rank's named number (@num), kept for the command's end. */
static void keep_num(rs_job *j, const struct rs_job_num *n)
{
    if (n->rank >= j->world) return;
    if (j->nnums == j->capnums) {
        int cap = j->capnums ? 2 * j->capnums : 32;
        struct rs_job_num *v = realloc(j->nums, sizeof *v * (size_t)cap);
        if (!v) return;
        j->nums = v;
        j->capnums = cap;
    }
    j->nums[j->nnums++] = *n;
}

static void on_line(void *ud, int rank, int is_stderr, const char *line)
{
    rs_job *j = ud;
    /* mpirun --tag-output: "[job,rank]<stdout>:line" (it forwards output in pieces; tagged, it keeps
     * each rank's lines whole) */
    int job, r, used = 0;
    char which[8];
    if (line[0] == '[' && sscanf(line, "[%d,%d]<%6[a-z]>:%n", &job, &r, which, &used) == 3 && used > 0) {
        rank = r;
        is_stderr = !strcmp(which, "stderr");
        line += used;
    }
    view_feed(j, line_owner(line, rank), is_stderr, line);
    if (!is_stderr && line[0] == '@') {
        rs_pg_event ev;
        rs_bench_row row;
        int r;
        uint64_t wrong;
        double secs;
        if (rs_wire_parse_event(line, &ev)) {
            log_trace(j, &ev);
            if (j->stepwise && ev.kind == RS_PG_EV_STEP) step_reported(j, &ev);
            return;
        }
        rs_data_line d;
        if (rs_wire_parse_data(line, &d)) {
            log_data(j, &d, line);
            return;
        }
        if (rs_wire_parse_check(line, &r, &wrong, &secs)) {
            if (r < j->world) {
                j->wrong[r] = wrong;
                j->seconds[r] = secs;
                j->checked[r] = true;
            }
            return;
        }
        if (rs_wire_parse_bench(line, &row)) {
            bench_row(j, &row);
            return;
        }
        if (!strncmp(line, "@vals ", 6)) {
            keep_vals(j, line);
            return;
        }
        if (rs_wire_parse_p2p(line, &j->p2p)) {
            j->have_p2p = true;
            return;
        }
        struct rs_job_num num;
        if (rs_wire_parse_num(line, &num.rank, num.name, &num.v)) {
            keep_num(j, &num);
            return;
        }
        rs_train_line tl;
        if (rs_wire_parse_train(line, &tl)) {
            if (tl.kind == RS_TL_DONE) log_done(j, &tl);
            train_line(j, &tl);
            return;
        }
    }
    int owner = line_owner(line, rank);
    if (line[0] != '@') log_plain(j, owner, is_stderr, line);
    if (j->collect && !is_stderr) {
        keep_line(j, owner, line);
        return;
    }
    if (j->background) return; /* in the session log already; the prompt is not theirs */
    if (is_stderr && owner == rank && strncmp(line, "rank ", 5) != 0) fprintf(j->s->out, "[rank %d] %s\n", rank, line);
    else fprintf(j->s->out, "%s\n", line);
    fflush(j->s->out);
}

static int stop_requested(void *ud)
{
    rs_job *j = ud;
    if (j->live) {
        int k = rs_live_tick(j->live);
        if (k & RS_LIVE_NEXT) step_release(j, j->step_next);
        /* at the prompt `q` sends the run to the background (run_ranks sees j->detach); elsewhere (a
         * script being played) the run goes on in the foreground with plain lines */
        if (k & RS_LIVE_QUIT) {
            if (j->s->can_detach && !j->s->play_depth) j->detach = true;
            else leave_view(j);
        }
    }
    if (j->background) return 0; /* Ctrl-C at the prompt is not for background runs: `jobs stop=N` is */
    return j->s->interrupt && *j->s->interrupt;
}

static int by_rank(const void *a, const void *b, void *ud)
{
    const int *r = ud;
    int x = *(const int *)a, y = *(const int *)b;
    return r[x] != r[y] ? (r[x] > r[y]) - (r[x] < r[y]) : (x > y) - (x < y);
}

/* The kept lines: those a rank tagged ("rank 2: ...") in rank order, then the others as they came. */
void rs_job_print_lines(rs_job *j, const char *indent)
{
    int *idx = malloc(sizeof *idx * (size_t)(j->nlines + 1));
    if (!idx) return;
    int n = 0;
    for (int i = 0; i < j->nlines; i++)
        if (!strncmp(j->lines[i], "rank ", 5)) idx[n++] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, by_rank, j->line_rank);
    for (int i = 0; i < j->nlines; i++)
        if (strncmp(j->lines[i], "rank ", 5)) idx[n++] = i;
    for (int i = 0; i < n; i++) fprintf(j->s->out, "%s%s\n", indent, j->lines[idx[i]]);
    free(idx);
}

void rs_job_free(rs_job *j)
{
    if (!j) return;
    for (int i = 0; i < j->nlines; i++) free(j->lines[i]);
    free(j->lines);
    free(j->line_rank);
    free(j->wrong);
    free(j->seconds);
    free(j->begin_t);
    free(j->checked);
    free(j->mem);
    free(j->done);
    free(j->spans);
    free(j->micros);
    free(j->stage_text);
    free(j->stage_short);
    free(j->figs);
    free(j->vals);
    free(j->nums);
    free(j->sent);
    free(j->rank_steps);
    if (j->held) fclose(j->held);
    free(j->held_buf);
    free(j->dump);
    free(j->ckpt);
    free(j->sargs);
    free(j);
}

/* The command's end (j->finish), then the job is gone. Returns the command's rc. */
int rs_job_finish(rs_job *j, int rc)
{
    if (j->finish) rc = j->finish(j, rc);
    rs_job_free(j);
    return rc;
}

static double mono_to_unix(void)
{
    struct timespec m, r;
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &r);
    return (double)(r.tv_sec - m.tv_sec) + (double)(r.tv_nsec - m.tv_nsec) * 1e-9;
}

/* The ranks have ended (st from rs_launch_wait): the launcher, view, store and dump go, a failure is
 * reported, and the command's end runs. Returns the command's rc; j is freed. */
static int ranks_ended(rs_job *j, rs_status st, const rs_err *e)
{
    rs_session *s = j->s;
    if (st && st != RS_ERR_CANCELLED && j->kill_asked && j->l) {
        /* the ranks have all ended: asking again only reads back how each one did */
        rs_launch_result res;
        rs_err again = {0};
        rs_launch_wait(j->l, 0, &res, &again);
        const rs_launch_rank *k = res.failed_rank == j->kill_rank ? &res.ranks[j->kill_rank] : NULL;
        j->killed = k && k->state == RS_LAUNCH_SIGNALED && k->status == SIGKILL;
    }
    rs_launch_free(j->l);
    j->l = NULL;
    if (j->live && st != RS_ERR_CANCELLED && !(s->play_depth && s->play_mode == RS_PLAY_AUTO)) {
        /* the last frame stays until a key, then the summary: a class reads the picture before the
         * text scrolls it away (auto playback goes straight on; scripts and pipes have no view) */
        rs_live_status(j->live, "done: press a key");
        rs_live_dirty(j->live);
        while (!(rs_live_tick(j->live) & (RS_LIVE_KEY | RS_LIVE_STOP))) usleep(20000);
    }
    rs_live_end(j->live);
    j->live = NULL;
    rs_store_close(j->step_store);
    j->step_store = NULL;
    rs_store_server_stop(j->srv);
    j->srv = NULL;
    if (j->dump_vm) {
        int w, h;
        rs_live_frame_size(s, &w, &h);
        char *text = rs_live_frame_text(j->dump_vm, w, h);
        FILE *f = fopen(j->dump, "w");
        if (f && text) fputs(text, f);
        if (f) fclose(f);
        free(text);
        rs_view_model_free(j->dump_vm);
        j->dump_vm = NULL;
    }
    if (j->held) {
        /* what waited while the run was in the background */
        fclose(j->held);
        j->held = NULL;
        if (j->held_len) fwrite(j->held_buf, 1, j->held_len, s->out);
    }
    int rc = 0;
    j->cancelled = st == RS_ERR_CANCELLED;
    if (st == RS_ERR_CANCELLED) {
        rs_log_run_end(s, j->run, "cancelled", 0, NULL, j->background ? "stopped in the background" : "stopped by Ctrl-C");
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "%s: stopped (%s); the ranks were ended", j->what,
                              j->background ? "jobs stop" : "Ctrl-C");
    } else if (st && j->killed) {
        rs_log_run_end(s, j->run, "failed", j->last_step, NULL, e->msg);
        fprintf(s->out, "%s: as kill=%d:%lld asked, %s\n", j->what, j->kill_rank, (long long)j->kill_step, e->msg);
    } else if (st) {
        snprintf(j->failure, sizeof j->failure, "%s", e->msg);
        rs_log_run_end(s, j->run, "failed", j->last_step, NULL, e->msg);
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "%s: %s", j->what, e->msg);
    }
    return rs_job_finish(j, rc);
}

/* Marks the objects a background run uses (train: its model and data) busy, or free again (id 0). */
void rs_job_mark_busy(rs_job *j, int64_t id)
{
    const char *names[2] = {j->mname, j->dname};
    for (int i = 0; i < 2; i++) {
        rs_obj *o = names[i][0] ? rs_session_find(j->s, names[i]) : NULL;
        if (o && (id || o->busy_run == j->id)) o->busy_run = id;
    }
}

/* `q` at the prompt: the run goes on in the session's background list, which the prompt pumps. */
static int detach(rs_job *j)
{
    rs_session *s = j->s;
    rs_live_end(j->live);
    j->live = NULL;
    step_release(j, j->step_max);
    j->background = true;
    j->c = NULL;
    if (!j->collect) j->held = open_memstream(&j->held_buf, &j->held_len); /* NULL: rows print as they come */
    static int64_t own_ids = 1000000; /* no session log: ids of our own, away from the log's */
    j->id = j->run > 0 ? j->run : ++own_ids;
    rs_job_mark_busy(j, j->id);
    rs_job **pp = &s->jobs;
    while (*pp) pp = &(*pp)->next;
    *pp = j;
    fprintf(s->out, "run %lld continues in the background; its end will be printed here (`jobs` lists runs in "
                    "progress, `jobs stop=%lld` stops it)\n", (long long)j->id, (long long)j->id);
    fflush(s->out);
    return 0;
}

/* Starts the ranks with `job_args` (after `--worker JOB`), waits for them, reports a failure and runs
 * j->finish; j is freed. Returns the command's rc. At the prompt, `q` in the live view hands j to the
 * background instead and returns 0 at once. */
int rs_job_run(rs_job *j, const char *const *job_args, int nargs, double timeout_s)
{
    rs_session *s = j->s;
    const rs_call *c = j->c;
    rs_err e = {0};
    const rs_pg_backend *be = rs_pg_backend_find(j->backend);
    char exe[PATH_MAX];
    if (rs_spawn_self(exe, sizeof exe, &e))
        return rs_job_finish(j, rs_session_error(s, c, (size_t)-1, 0, "%s: %s", j->what, e.msg));

    /* the dashboard: on a terminal unless view=off; step=1 needs it (a person presses the keys) */
    bool want_view = rs_call_bool(c, "view", true);
    j->stepwise = !strcmp(j->what, "collective") && rs_call_bool(c, "step", false);
    j->step_max = -1;
    if (j->stepwise && (!want_view || !rs_live_possible(s) || be->needs_launcher || !be->ops->transport)) {
        rs_log_run_end(s, j->run, "failed", 0, NULL, "step=1 refused");
        return rs_job_finish(j, rs_session_error(s, c, rs_call_opt(c, "step")->pos, 6,
                                              "%s: step=1 waits for a key between algorithm steps, so it needs the live "
                                              "view on a terminal (not view=off, a script or a pipe) and a backend with "
                                              "algorithm steps (shm, tcp)", j->what));
    }
    char run_id[32];
    snprintf(run_id, sizeof run_id, "r%lld", (long long)j->run);
    rs_view_run vr = {.id = j->run > 0 ? run_id : NULL, .kind = j->what, .backend = j->backend, .world = j->world,
                      .mode = !strcmp(j->what, "train") ? rs_call_str(c, "mode", NULL) : NULL, .t_start = -1};
    const char *dump = getenv("RINGSIDE_VIEW_DUMP");
    /* the dump has what a replay of the log knows (`view run N` compares with it): the run's start is
     * its first event, the plan unknown */
    if (dump && *dump && (j->dump = strdup(dump)) != NULL && (j->dump_vm = rs_view_model_new(&e)) != NULL)
        rs_view_set_run(j->dump_vm, &vr);
    /* the live view counts from the launch (ranks that are still starting say nothing), with the plan */
    rs_view_run vr_live = vr;
    vr_live.steps_total = j->steps_total;
    vr_live.epochs = j->epochs;

    /* the replay's way back from the log's unix times to the ranks' clock (see logged_time) */
    rs_slog_event_info clock = RS_SLOG_EVENT_INIT;
    clock.kind = "clock";
    clock.value = j->mono_to_unix;
    rs_log_event(s, j->run, &clock);

    rs_spawn_store how = be->needs_launcher ? RS_SPAWN_STORE_MPI
                         : j->store_rank0     ? RS_SPAWN_STORE_RANK0
                                              : RS_SPAWN_STORE_LAUNCHER;
    if (rs_spawn_host_store(how, &j->srv, &j->master_port, &e)) {
        rs_view_model_free(j->dump_vm);
        j->dump_vm = NULL;
        return rs_job_finish(j, rs_session_error(s, c, (size_t)-1, 0, "%s: %s", j->what, e.msg));
    }
    if (j->stepwise && rs_store_connect("127.0.0.1", j->master_port, timeout_s, &j->step_store, &e)) {
        rs_store_server_stop(j->srv);
        j->srv = NULL;
        rs_view_model_free(j->dump_vm);
        j->dump_vm = NULL;
        return rs_job_finish(j, rs_session_error(s, c, (size_t)-1, 0, "%s: connecting to the rendezvous store: %s",
                                              j->what, e.msg));
    }

    char group[48];
    snprintf(group, sizeof group, "r%lld-%ld", (long long)j->run, (long)getpid());
    /* as many as the job has, and the two that step=1 and the view's dump add */
    const char **args = malloc(sizeof *args * (size_t)(nargs + 2));
    if (!args) {
        rs_store_close(j->step_store);
        j->step_store = NULL;
        rs_store_server_stop(j->srv);
        j->srv = NULL;
        rs_view_model_free(j->dump_vm);
        j->dump_vm = NULL;
        return rs_job_finish(j, rs_session_error(s, c, (size_t)-1, 0, "%s: out of memory", j->what));
    }
    int a = 0;
    for (int i = 0; i < nargs; i++) args[a++] = job_args[i];
    /* step=1: the ranks also report the values their buffers hold, which the data pane shows (and a
     * dump for the tests, which compare it with a replay) */
    if (j->stepwise) args[a++] = "stepwise=1";
    if (j->stepwise || (j->dump && !strcmp(j->what, "collective"))) args[a++] = "data=1";

    rs_spawn_cfg cfg = {.exe = exe, .job = j->what, .group = group, .timeout_s = timeout_s, .world = j->world,
                        .per_node = j->per_node, .store = how, .args = args, .nargs = a,
                        /* training ranks finish a step, gather and write the weights when stopped */
                        .grace_s = !strcmp(j->what, "train") ? 10 : 2,
                        .on_line = on_line, .line_ud = j, .should_stop = stop_requested, .stop_ud = j};
    rs_launch_result res;
    vr_live.t_start = logged_time(j, rs_pg_now());
    if (want_view) j->live = rs_live_start(s, &vr_live);
    if (j->live && j->stepwise) rs_live_status(j->live, "step=1: n / Enter / Right for the next step");
    j->t_begin = rs_pg_now();
    rs_status st = rs_spawn_start(&cfg, j->master_port, &j->l, &e);
    free(args);
    /* with the view up, short waits, so that `q` can hand the run to the background; without it one wait
     * to the end, as ever */
    if (!st)
        while ((st = rs_launch_wait(j->l, j->live ? 0.05 : 0, &res, &e)) == RS_ERR_TIMEOUT)
            if (j->detach) return detach(j);
    return ranks_ended(j, st, &e);
}

/* ---------------------------------------------------------------- runs in the background */

int rs_jobs_count(const rs_session *s)
{
    int n = 0;
    for (const rs_job *j = s->jobs; j; j = j->next) n++;
    return n;
}

/* A job that ended leaves the list, then prints its end under a line saying which run it was. */
static void job_ended(rs_session *s, rs_job **link, rs_status st, const rs_err *e)
{
    rs_job *j = *link;
    *link = j->next;
    fprintf(s->out, "run %lld (%s, in the background) has ended:\n", (long long)j->id, j->what);
    ranks_ended(j, st, e);
    fflush(s->out);
}

void rs_jobs_pump(rs_session *s)
{
    rs_job **link = &s->jobs;
    while (*link) {
        rs_err e = {0};
        /* drains the ranks' pipes for a while (a rank blocked on a full pipe stalls them all), then
         * back to the keyboard: the prompt's select waits only 5 ms between pumps */
        rs_status st = rs_launch_wait((*link)->l, 0.015, NULL, &e);
        if (st == RS_ERR_TIMEOUT) link = &(*link)->next;
        else job_ended(s, link, st, &e);
    }
}

void rs_jobs_stop_all(rs_session *s, bool say)
{
    while (s->jobs) {
        if (say) fprintf(s->out, "stopping run %lld (%s in the background)\n", (long long)s->jobs->id, s->jobs->what);
        rs_launch_stop(s->jobs->l);
        rs_err e = {0};
        rs_status st = rs_launch_wait(s->jobs->l, 0, NULL, &e);
        job_ended(s, &s->jobs, st, &e);
    }
}


/* The checks every rank-starting command shares: ranks, backend, algo (for step-based backends). */
int rs_job_common_opts(rs_session *s, const rs_call *c, rs_job *j, double *timeout_s)
{
    long long ranks = rs_call_int(c, "ranks", 2);
    const rs_optval *rv = rs_call_opt(c, "ranks");
    if (ranks < 1 || ranks > 64)
        return rs_session_error(s, c, rv->pos, 5 + strlen(rv->text ? rv->text : ""),
                                "%s: ranks must be 1..64 (this machine has %ld cores; more ranks share them), got %lld",
                                c->cmd->name, sysconf(_SC_NPROCESSORS_ONLN), ranks);
    j->world = (int)ranks;
    snprintf(j->backend_name, sizeof j->backend_name, "%s", rs_call_str(c, "backend", "shm"));
    j->backend = j->backend_name; /* a copy: the call is gone when a background run ends */
    const rs_optval *bv = rs_call_opt(c, "backend");
    if (!rs_pg_backend_find(j->backend)) {
        rs_err e = {0};
        rs_pg *g = NULL;
        rs_pg_new(j->backend, NULL, "x", 0, 1, 1, &g, &e);
        return rs_session_error(s, c, bv->pos, 8 + strlen(j->backend), "%s: %s", c->cmd->name, e.msg);
    }
    if (!(rs_pg_backend_find(j->backend)->ops->devices & RS_PG_DEV_CPU)) {
        /* A GPU backend: rank r takes GPU LOCAL_RANK mod count, and NCCL refuses two ranks of one
         * communicator on one GPU, so say so here rather than after the ranks have started. */
        rs_cuda_info ci;
        rs_cuda_query(&ci);
        if (ci.count < 1)
            return rs_session_error(s, c, bv->pos, 8 + strlen(j->backend), "%s: backend=%s runs on GPUs, one per rank, "
                                    "and this machine has none (%s); backend=shm or tcp run the ranks on the CPU",
                                    c->cmd->name, j->backend, ci.why);
        if (ci.count < j->world)
            return rs_session_error(s, c, bv->pos, 8 + strlen(j->backend), "%s: backend=%s puts each rank on its own "
                                    "GPU and this machine has %d: NCCL refuses two ranks of one group on one GPU "
                                    "(ncclInvalidUsage, \"Duplicate GPU detected\"); use ranks=%d, or backend=shm or "
                                    "tcp, whose ranks share the host", c->cmd->name, j->backend, ci.count, ci.count);
    }
    const rs_optval *av = rs_call_opt(c, "algo");
    if (av && av->set && rs_pg_backend_find(j->backend)->ops->transport == NULL &&
        strcmp(rs_call_str(c, "algo", "auto"), "auto") != 0)
        return rs_session_error(s, c, av->pos, 5 + strlen(av->text),
                                "%s: backend %s chooses its own algorithms; algo= applies to shm and tcp",
                                c->cmd->name, j->backend);
    *timeout_s = rs_call_float(c, "timeout", 30);
    j->s = s;
    j->c = c;
    j->wrong = calloc((size_t)j->world, sizeof *j->wrong);
    j->seconds = calloc((size_t)j->world, sizeof *j->seconds);
    j->begin_t = calloc((size_t)j->world, sizeof *j->begin_t);
    j->checked = calloc((size_t)j->world, sizeof *j->checked);
    j->sent = calloc((size_t)j->world, sizeof *j->sent);
    j->rank_steps = calloc((size_t)j->world, sizeof *j->rank_steps);
    j->mono_to_unix = mono_to_unix();
    if (!j->wrong || !j->seconds || !j->begin_t || !j->checked || !j->sent || !j->rank_steps)
        return rs_session_error(s, c, (size_t)-1, 0, "%s: out of memory", c->cmd->name);
    return 0;
}

/* OP as users write it: torch's names, and nccl-tests' / MPI's spellings. */
int rs_job_parse_op(rs_session *s, const rs_call *c, rs_pg_opkind *op)
{
    static const char *const alias[][2] = {{"allreduce", "all_reduce"}, {"allgather", "all_gather"},
                                           {"reducescatter", "reduce_scatter"}, {"alltoall", "all_to_all"},
                                           {"bcast", "broadcast"}};
    const char *w = c->args[0];
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(w, alias[i][0])) w = alias[i][1];
    if (rs_pg_op_from_name(w, op) && *op != RS_OP_SEND && *op != RS_OP_RECV) return 0;
    const char *const *names = c->cmd->args[0].choices; /* the command table's list (completion offers it) */
    int n = 0;
    while (names && names[n]) n++;
    const char *near = n ? rs_val_near_miss(c->args[0], names, n) : NULL;
    char hint[64] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    bool p2p = !strcmp(w, "send") || !strcmp(w, "recv");
    return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]),
                            "%s: '%s' is not a collective%s; one of broadcast, reduce, all_reduce, scatter, gather, "
                            "all_gather, reduce_scatter, all_to_all, barrier%s",
                            c->cmd->name, c->args[0], hint, p2p ? " (send and recv: try `p2p`)" : "");
}

/* A job for a command, with what common_opts checks; NULL after reporting an error. */
rs_job *rs_job_new(rs_session *s, const rs_call *c, const char *what, bool collect, double *timeout)
{
    rs_job *j = calloc(1, sizeof *j);
    if (!j) {
        rs_session_error(s, c, (size_t)-1, 0, "%s: out of memory", what);
        return NULL;
    }
    j->what = what;
    j->collect = collect;
    if (rs_job_common_opts(s, c, j, timeout)) {
        rs_job_free(j);
        return NULL;
    }
    return j;
}

