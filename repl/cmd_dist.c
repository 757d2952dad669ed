/* Commands that start ranks — collective, bench, p2p — and `backends`. Each run spawns real rank
 * processes (`ringside --worker ...`, or under mpirun for backend=mpi), hosts their rendezvous store,
 * reads their output line by line (dist/worker/worker.h: human lines and '@' machine lines), stores
 * their trace events in the session log, and prints what they found. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "call.h"
#include "dist/launch/launch.h"
#include "dist/pg/pg.h"
#include "dist/store/store.h"
#include "dist/train/dtrain.h"
#include "dist/worker/worker.h"
#include "engine/ckpt/checkpoint.h"
#include "lang/value.h"
#include "repl_log.h"
#include "session.h"
#include "view_live.h"

/* ---------------------------------------------------------------- one job across ranks */

/* One run across ranks, from its start to its end. Heap-allocated (the launcher keeps a pointer to it):
 * the command owns it while the run is in the foreground; after `q` at the prompt the session's
 * background list (s->jobs) owns it until the ranks end, `finish` has printed the command's end, and
 * job_finish has freed it. */
typedef struct rs_job dist_job;
struct rs_job {
    rs_session *s;
    const rs_call *c;       /* borrowed; NULL once in the background (the call is gone by then) */
    const char *what;       /* "collective", "bench", "p2p", "train" */
    const char *backend;    /* points into backend_name */
    char backend_name[32];
    int world;
    int64_t run;
    double mono_to_unix;    /* add to a rank's monotonic stamp (same host) */
    bool collect;           /* keep human lines to print in rank order at the end */
    char **lines;           /* (nlines) owned */
    int *line_rank;
    int nlines, cap;
    /* per rank (world), owned */
    uint64_t *wrong;
    double *seconds, *begin_t;
    bool *checked;
    int64_t nevents;
    char algo[32];          /* the algorithm the steps reported */
    int steps;
    /* bench */
    int nrows;
    double busbw_sum;
    uint64_t wrong_rows;
    /* train */
    rs_train_line *mem;     /* (world) each rank's last @mem */
    rs_train_line *done;    /* (world) each rank's @done */
    struct tspan { int rank; int64_t step; bool comm; double t0, t1; } *spans; /* backward and comm spans */
    int nspans, capspans;
    double eval_acc, eval_loss, last_print, t_start;
    int64_t last_step;
    double last_loss;
    bool evaluated;
    int ckpts;
    int64_t last_ckpt_step;
    /* the live dashboard (view_live.h); NULL without a terminal, with view=off, or after `q` */
    rs_live *live;
    rs_view_model *dump_vm;  /* RINGSIDE_VIEW_DUMP=FILE: the same model fed headless, its last frame saved */
    /* step=1: the ranks wait on store key "step/<coll>/<k>" before step k; the REPL sets it on a key */
    bool stepwise;
    rs_store *step_store;    /* owned: the REPL's own client of the store it hosts */
    uint64_t step_coll;      /* the collective whose steps are counted */
    int step_max;            /* highest step index a rank reported (-1: none yet) */
    int step_next;           /* the next step index to release */
    /* the ranks while they run */
    rs_launch *l;            /* owned */
    rs_store_server *srv;    /* owned; NULL under mpirun */
    char *dump;              /* owned copy of RINGSIDE_VIEW_DUMP, or NULL */
    double t_begin;          /* rs_pg_now() at the start, for `jobs` */
    /* the background (`q` at the prompt) */
    int64_t id;              /* the run id `jobs` shows (the log's run, or a number of our own without a log) */
    bool detach;             /* `q` was pressed: hand the run to the background at the next pump */
    bool background;         /* in s->jobs: nothing printed until the end */
    bool stopping;           /* `jobs stop=N` or quit asked the ranks to stop */
    FILE *held;              /* background: bench rows wait here (open_memstream over held_buf) */
    char *held_buf;
    size_t held_len;
    struct rs_job *next;     /* the background list */
    /* what the command does when the ranks end (prints its results, ends the run in the log); runs with
     * rc = 0 when every rank exited 0, else after the error was reported; returns the command's rc */
    int (*finish)(dist_job *j, int rc);
    /* collective, bench: what the end prints */
    rs_pg_opkind op;
    rs_dtype dt;
    long long count;
    char redop[16];
    /* train: the session names (looked up again at the end: s->objs may move meanwhile) and the files */
    char mname[64], dname[64], mode[8];
    char dir[32], init[64], outp[64];
    char *ckpt;              /* owned copy of ckpt=, or NULL */
    int zero, opt_states;
};

static void keep_line(dist_job *j, int rank, const char *line)
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

static void log_trace(dist_job *j, const rs_pg_event *ev)
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
    char detail[64];
    if (ev->kind == RS_PG_EV_STEP) {
        e.astep = ev->step;
        e.peer = ev->peer;
        e.chunk = ev->chunk;
        snprintf(detail, sizeof detail, "{\"steps\":%d,\"group\":%d}", ev->steps, ev->group);
        e.detail_json = detail;
        if (!j->algo[0]) snprintf(j->algo, sizeof j->algo, "%s", rs_pg_algo_name(ev->algo));
        if (ev->steps > j->steps) j->steps = ev->steps;
    } else if (ev->group) {
        snprintf(detail, sizeof detail, "{\"group\":%d}", ev->group);
        e.detail_json = detail;
    }
    if (ev->rank < j->world) {
        if (ev->kind == RS_PG_EV_BEGIN) j->begin_t[ev->rank] = ev->t;
        if (ev->kind == RS_PG_EV_END) e.value = ev->t - j->begin_t[ev->rank];
    }
    rs_log_event(j->s, j->run, &e);
    j->nevents++;
}

static void bench_row(dist_job *j, const rs_bench_row *r)
{
    FILE *f = j->held ? j->held : j->s->out; /* the background's rows are printed at its end */
    if (j->nrows++ == 0) {
        fprintf(f, "#\n#%12s %13s %6s %7s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time", "algbw",
                "busbw", "#wrong");
        fprintf(f, "#%12s %13s %6s %7s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
    }
    fprintf(f, " %12llu %13llu %6s %7s %10.2f %8.2f %8.2f %7llu\n", (unsigned long long)r->bytes,
            (unsigned long long)r->count, rs_dtype_name(r->dtype), rs_redop_name(r->redop), r->time_us, r->algbw,
            r->busbw, (unsigned long long)r->wrong);
    fflush(f);
    j->busbw_sum += r->busbw;
    if (r->wrong) j->wrong_rows++;
    int64_t step = (int64_t)r->bytes;
    rs_log_metric(j->s, j->run, step, 0, "time_us", r->time_us);
    rs_log_metric(j->s, j->run, step, 0, "algbw", r->algbw);
    rs_log_metric(j->s, j->run, step, 0, "busbw", r->busbw);
    rs_log_metric(j->s, j->run, step, 0, "wrong", (double)r->wrong);
}

static void keep_span(dist_job *j, int rank, int64_t step, bool comm, double t0, double t1)
{
    if (j->nspans == j->capspans) {
        int cap = j->capspans ? 2 * j->capspans : 256;
        struct tspan *p = realloc(j->spans, sizeof *p * (size_t)cap);
        if (!p) return;
        j->spans = p;
        j->capspans = cap;
    }
    j->spans[j->nspans++] = (struct tspan){rank, step, comm, t0, t1};
}

/* A training rank's report: into the session log, and the figures the summary prints. */
static void train_line(dist_job *j, const rs_train_line *t)
{
    rs_session *s = j->s;
    if (t->rank >= j->world) return;
    rs_slog_event_info e = RS_SLOG_EVENT_INIT;
    e.rank = t->rank;
    e.step = t->step;
    char detail[96];
    switch (t->kind) {
    case RS_TL_PHASE:
        e.kind = "phase";
        e.name = t->name;
        e.t = t->t0 + j->mono_to_unix;
        e.value = t->t1 - t->t0;
        rs_log_event(s, j->run, &e);
        if (!strcmp(t->name, "backward")) keep_span(j, t->rank, t->step, false, t->t0, t->t1);
        break;
    case RS_TL_COMM:
        e.kind = "phase";
        e.name = "comm";
        e.t = t->t0 + j->mono_to_unix;
        e.value = t->t1 - t->t0;
        e.bytes = (int64_t)t->bytes;
        e.chunk = t->index;
        snprintf(detail, sizeof detail, "{\"op\":\"%s\",\"bucket\":%d}", t->name, t->index);
        e.detail_json = detail;
        rs_log_event(s, j->run, &e);
        keep_span(j, t->rank, t->step, true, t->t0, t->t1);
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
    case RS_TL_DONE: j->done[t->rank] = *t; break;
    case RS_TL_CKPT:
        j->ckpts++;
        j->last_ckpt_step = t->step;
        break;
    }
}

/* ---------------------------------------------------------------- the live view's side of a job */

/* A rank's monotonic stamp as the session log keeps it (unix seconds lose the bits below ~0.2 us) and
 * back: the model sees the times a replay of the log will see, so both draw the same frame. */
static double logged_time(const dist_job *j, double t) { return (t + j->mono_to_unix) - j->mono_to_unix; }

/* Every line of every rank goes to the dashboard's model as it came. */
static void view_feed(dist_job *j, int rank, int is_stderr, const char *line)
{
    rs_view_model *vms[2] = {j->live ? rs_live_model(j->live) : NULL, j->dump_vm};
    if (!vms[0] && !vms[1]) return;
    rs_pg_event ev;
    rs_train_line tl;
    char buf[RS_VIEW_LOG_W + 16];
    bool is_ev = !is_stderr && rs_wire_parse_event(line, &ev), is_tl = !is_ev && !is_stderr && rs_wire_parse_train(line, &tl);
    if (is_ev) ev.t = logged_time(j, ev.t);
    if (is_tl) tl.t0 = logged_time(j, tl.t0), tl.t1 = logged_time(j, tl.t1);
    if (is_stderr) snprintf(buf, sizeof buf, "stderr: %s", line); /* never parsed as a machine line */
    for (int i = 0; i < 2; i++) {
        if (!vms[i]) continue;
        if (is_ev) rs_view_feed_event(vms[i], &ev);
        else if (is_tl) rs_view_feed_train(vms[i], &tl);
        else rs_view_feed_line(vms[i], rank, is_stderr ? buf : line);
    }
}

/* JSON string body of s (quotes, backslashes and control characters escaped), cut to fit out. */
static void json_text(char *out, size_t cap, const char *s)
{
    size_t o = 0;
    for (; *s && o + 7 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') out[o++] = '\\', out[o++] = (char)ch;
        else if (ch < 0x20) o += (size_t)snprintf(out + o, cap - o, "\\u%04x", ch);
        else out[o++] = (char)ch;
    }
    out[o] = 0;
}

/* A rank's plain line into the session log (kind 'log', detail {"text": ...}), so `view run N` can show
 * the log pane the live view showed. */
static void log_plain(dist_job *j, int rank, int is_stderr, const char *line)
{
    char text[512], detail[560];
    json_text(text, sizeof text, line);
    snprintf(detail, sizeof detail, "{\"text\":\"%s\"}", text);
    rs_slog_event_info e = RS_SLOG_EVENT_INIT;
    e.rank = rank;
    e.t = rs_pg_now() + j->mono_to_unix;
    e.kind = "log";
    e.name = is_stderr ? "stderr" : "stdout";
    e.detail_json = detail;
    rs_log_event(j->s, j->run, &e);
}

/* A training rank's @done (its step count, seconds and samples/s), for replays. */
static void log_done(dist_job *j, const rs_train_line *t)
{
    char detail[64];
    snprintf(detail, sizeof detail, "{\"sps\":%.9g}", t->sps);
    rs_slog_event_info e = RS_SLOG_EVENT_INIT;
    e.rank = t->rank;
    e.t = rs_pg_now() + j->mono_to_unix;
    e.kind = "done";
    e.step = t->step;
    e.value = t->seconds;
    e.detail_json = detail;
    rs_log_event(j->s, j->run, &e);
}

/* step=1: lets the ranks run algorithm step k of the current collective (once some rank reached it). */
static void step_release(dist_job *j, int k)
{
    if (!j->stepwise || !j->step_store || k > j->step_max || k < j->step_next) return;
    for (; j->step_next <= k; j->step_next++) {
        char key[64];
        rs_err e = {0};
        snprintf(key, sizeof key, "step/%llu/%d", (unsigned long long)j->step_coll, j->step_next);
        rs_store_set(j->step_store, key, "1", 1, &e);
    }
}

static void step_reported(dist_job *j, const rs_pg_event *ev)
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
static void leave_view(dist_job *j)
{
    rs_live_end(j->live);
    j->live = NULL;
    fprintf(j->s->out, "%s: left the dashboard; the run goes on\n", j->what);
    fflush(j->s->out);
    step_release(j, j->step_max);
}

static void on_line(void *ud, int rank, int is_stderr, const char *line)
{
    dist_job *j = ud;
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
    dist_job *j = ud;
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
static void print_lines(dist_job *j, const char *indent)
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

static void job_free(dist_job *j)
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
    if (j->held) fclose(j->held);
    free(j->held_buf);
    free(j->dump);
    free(j->ckpt);
    free(j);
}

/* The command's end (j->finish), then the job is gone. Returns the command's rc. */
static int job_finish(dist_job *j, int rc)
{
    if (j->finish) rc = j->finish(j, rc);
    job_free(j);
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
static int ranks_ended(dist_job *j, rs_status st, const rs_err *e)
{
    rs_session *s = j->s;
    rs_launch_free(j->l);
    j->l = NULL;
    if (j->live && j->stepwise && !st) {
        /* the last step's picture stays until a key: the lesson ends when the teacher says so */
        rs_live_status(j->live, "done: press n, Enter or q");
        while (!(rs_live_tick(j->live) & (RS_LIVE_NEXT | RS_LIVE_QUIT | RS_LIVE_STOP))) usleep(20000);
    }
    rs_live_end(j->live);
    j->live = NULL;
    rs_store_close(j->step_store);
    j->step_store = NULL;
    rs_store_server_stop(j->srv);
    j->srv = NULL;
    if (j->dump_vm) {
        char *text = rs_live_frame_text(j->dump_vm, 100, 30);
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
    if (st == RS_ERR_CANCELLED) {
        rs_log_run_end(s, j->run, "cancelled", 0, NULL, j->background ? "stopped in the background" : "stopped by Ctrl-C");
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "%s: stopped (%s); the ranks were ended", j->what,
                              j->background ? "jobs stop" : "Ctrl-C");
    } else if (st) {
        rs_log_run_end(s, j->run, "failed", j->last_step, NULL, e->msg);
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "%s: %s", j->what, e->msg);
    }
    return job_finish(j, rc);
}

/* Marks the objects a background run uses (train: its model and data) busy, or free again (id 0). */
static void mark_busy(dist_job *j, int64_t id)
{
    const char *names[2] = {j->mname, j->dname};
    for (int i = 0; i < 2; i++) {
        rs_obj *o = names[i][0] ? rs_session_find(j->s, names[i]) : NULL;
        if (o && (id || o->busy_run == j->id)) o->busy_run = id;
    }
}

/* `q` at the prompt: the run goes on in the session's background list, which the prompt pumps. */
static int detach(dist_job *j)
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
    mark_busy(j, j->id);
    dist_job **pp = &s->jobs;
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
static int run_ranks(dist_job *j, const char *const *job_args, int nargs, double timeout_s)
{
    rs_session *s = j->s;
    const rs_call *c = j->c;
    rs_err e = {0};
    const rs_pg_backend *be = rs_pg_backend_find(j->backend);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return job_finish(j, rs_session_error(s, c, (size_t)-1, 0, "%s: cannot find the ringside binary to start ranks",
                                              j->what));
    exe[n] = 0;

    /* the dashboard: on a terminal unless view=off; step=1 needs it (a person presses the keys) */
    bool want_view = rs_call_bool(c, "view", true);
    j->stepwise = !strcmp(j->what, "collective") && rs_call_bool(c, "step", false);
    j->step_max = -1;
    if (j->stepwise && (!want_view || !rs_live_possible(s) || be->needs_launcher || !be->ops->transport)) {
        rs_log_run_end(s, j->run, "failed", 0, NULL, "step=1 refused");
        return job_finish(j, rs_session_error(s, c, rs_call_opt(c, "step")->pos, 6,
                                              "%s: step=1 waits for a key between algorithm steps, so it needs the live "
                                              "view on a terminal (not view=off, a script or a pipe) and a backend with "
                                              "algorithm steps (shm, tcp)", j->what));
    }
    char run_id[32];
    snprintf(run_id, sizeof run_id, "r%lld", (long long)j->run);
    rs_view_run vr = {.id = j->run > 0 ? run_id : NULL, .kind = j->what, .backend = j->backend, .world = j->world,
                      .mode = !strcmp(j->what, "train") ? rs_call_str(c, "mode", NULL) : NULL, .t_start = -1};
    const char *dump = getenv("RINGSIDE_VIEW_DUMP");
    if (dump && *dump && (j->dump = strdup(dump)) != NULL && (j->dump_vm = rs_view_model_new(&e)) != NULL)
        rs_view_set_run(j->dump_vm, &vr);

    /* the replay's way back from the log's unix times to the ranks' clock (see logged_time) */
    rs_slog_event_info clock = RS_SLOG_EVENT_INIT;
    clock.kind = "clock";
    clock.value = j->mono_to_unix;
    rs_log_event(s, j->run, &clock);

    rs_store_server *srv = NULL;
    if (!be->needs_launcher && rs_store_server_start("127.0.0.1", 0, &srv, &e)) {
        rs_view_model_free(j->dump_vm);
        j->dump_vm = NULL;
        return job_finish(j, rs_session_error(s, c, (size_t)-1, 0, "%s: starting the rendezvous store: %s", j->what,
                                              e.msg));
    }
    j->srv = srv;
    if (j->stepwise && rs_store_connect("127.0.0.1", rs_store_server_port(srv), timeout_s, &j->step_store, &e)) {
        rs_store_server_stop(srv);
        j->srv = NULL;
        rs_view_model_free(j->dump_vm);
        j->dump_vm = NULL;
        return job_finish(j, rs_session_error(s, c, (size_t)-1, 0, "%s: connecting to the rendezvous store: %s",
                                              j->what, e.msg));
    }

    char world[16], port[16], group[48], tmo[32];
    snprintf(world, sizeof world, "%d", j->world);
    snprintf(port, sizeof port, "%d", srv ? rs_store_server_port(srv) : 0);
    snprintf(group, sizeof group, "group=r%lld-%ld", (long long)j->run, (long)getpid());
    snprintf(tmo, sizeof tmo, "timeout=%g", timeout_s);
    const char *argv[64];
    int a = 0;
    if (be->needs_launcher) {
        argv[a++] = "mpirun";
        if (geteuid() == 0) argv[a++] = "--allow-run-as-root";
        argv[a++] = "--oversubscribe";
        argv[a++] = "--tag-output";
        argv[a++] = "-np";
        argv[a++] = world;
    }
    argv[a++] = exe;
    argv[a++] = "--worker";
    argv[a++] = j->what;
    argv[a++] = group;
    argv[a++] = tmo;
    argv[a++] = "store=launcher";
    for (int i = 0; i < nargs && a < 61; i++) argv[a++] = job_args[i];
    if (j->stepwise) argv[a++] = "stepwise=1";
    argv[a] = NULL;

    rs_launch_cfg cfg = {.nranks = be->needs_launcher ? 1 : j->world, .argv = argv,
                         .master_port = srv ? rs_store_server_port(srv) : 1, .grace_s = 2,
                         .on_line = on_line, .line_ud = j, .should_stop = stop_requested, .stop_ud = j};
    rs_launch_result res;
    if (want_view) j->live = rs_live_start(s, &vr);
    if (j->live && j->stepwise) rs_live_status(j->live, "step=1: n / Enter / Right for the next step");
    j->t_begin = rs_pg_now();
    rs_status st = rs_launch_start(&cfg, &j->l, &e);
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
    for (const dist_job *j = s->jobs; j; j = j->next) n++;
    return n;
}

/* A job that ended leaves the list, then prints its end under a line saying which run it was. */
static void job_ended(rs_session *s, dist_job **link, rs_status st, const rs_err *e)
{
    dist_job *j = *link;
    *link = j->next;
    fprintf(s->out, "run %lld (%s, in the background) has ended:\n", (long long)j->id, j->what);
    ranks_ended(j, st, e);
    fflush(s->out);
}

void rs_jobs_pump(rs_session *s)
{
    dist_job **link = &s->jobs;
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

int rs_cmd_jobs(rs_session *s, const rs_call *c)
{
    if (rs_call_given(c, "stop")) {
        long long id = rs_call_int(c, "stop", 0);
        const rs_optval *v = rs_call_opt(c, "stop");
        dist_job *j = s->jobs;
        while (j && j->id != id) j = j->next;
        if (!j)
            return rs_session_error(s, c, v->pos, 5 + strlen(v->text),
                                    "jobs: no run %lld in the background (`jobs` lists them)", id);
        rs_launch_stop(j->l);
        j->stopping = true;
        fprintf(s->out, "stopping run %lld (%s); its end will be printed here\n", id, j->what);
        return 0;
    }
    if (!s->jobs) {
        fprintf(s->out, "no runs in the background (press q in the live view of a run to send it there)\n");
        return 0;
    }
    fprintf(s->out, "  %-6s %-11s %5s %9s  %s\n", "run", "kind", "ranks", "elapsed", "what");
    double now = rs_pg_now();
    for (const dist_job *j = s->jobs; j; j = j->next) {
        char what[160];
        if (j->mname[0]) snprintf(what, sizeof what, "%s on %s, %s on %s", j->mname, j->dname, j->mode, j->backend);
        else snprintf(what, sizeof what, "on %s", j->backend);
        fprintf(s->out, "  %-6lld %-11s %5d %8.1fs  %s%s\n", (long long)j->id, j->what, j->world, now - j->t_begin, what,
                j->stopping ? " (stopping)" : "");
    }
    return 0;
}

/* The checks every rank-starting command shares: ranks, backend, algo (for step-based backends). */
static int common_opts(rs_session *s, const rs_call *c, dist_job *j, double *timeout_s)
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
    j->mono_to_unix = mono_to_unix();
    if (!j->wrong || !j->seconds || !j->begin_t || !j->checked)
        return rs_session_error(s, c, (size_t)-1, 0, "%s: out of memory", c->cmd->name);
    return 0;
}

/* OP as users write it: torch's names, and nccl-tests' / MPI's spellings. */
static int parse_op(rs_session *s, const rs_call *c, rs_pg_opkind *op)
{
    static const char *const alias[][2] = {{"allreduce", "all_reduce"}, {"allgather", "all_gather"},
                                           {"reducescatter", "reduce_scatter"}, {"alltoall", "all_to_all"},
                                           {"bcast", "broadcast"}};
    const char *w = c->args[0];
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(w, alias[i][0])) w = alias[i][1];
    if (rs_pg_op_from_name(w, op) && *op != RS_OP_SEND && *op != RS_OP_RECV) return 0;
    static const char *const names[] = {"broadcast", "reduce", "all_reduce", "scatter", "gather", "all_gather",
                                        "reduce_scatter", "all_to_all", "barrier"};
    const char *near = rs_val_near_miss(c->args[0], names, 9);
    char hint[64] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    bool p2p = !strcmp(w, "send") || !strcmp(w, "recv");
    return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]),
                            "%s: '%s' is not a collective%s; one of broadcast, reduce, all_reduce, scatter, gather, "
                            "all_gather, reduce_scatter, all_to_all, barrier%s",
                            c->cmd->name, c->args[0], hint, p2p ? " (send and recv: try `p2p`)" : "");
}

/* ---------------------------------------------------------------- collective */

/* The job's end: the ranks' lines in rank order, the verdict, the run's end in the log. */
static int collective_end(dist_job *j, int rc)
{
    rs_session *s = j->s;
    print_lines(j, "  ");
    if (rc) return rc;
    uint64_t wrong = 0;
    double slowest = 0;
    int missing = 0;
    for (int r = 0; r < j->world; r++) {
        wrong += j->wrong[r];
        if (j->seconds[r] > slowest) slowest = j->seconds[r];
        if (!j->checked[r]) missing++;
    }
    char when[32], algo[64] = "";
    if (slowest < 1e-3) snprintf(when, sizeof when, "%.1f us", slowest * 1e6);
    else snprintf(when, sizeof when, "%.3f ms", slowest * 1e3);
    if (j->steps)
        snprintf(algo, sizeof algo, ", %s%s%d step%s", strcmp(j->algo, "auto") ? j->algo : "",
                 strcmp(j->algo, "auto") ? " in " : "", j->steps, j->steps == 1 ? "" : "s");
    rs_pg_opkind op = j->op;
    bool reduces = op == RS_OP_REDUCE || op == RS_OP_ALL_REDUCE || op == RS_OP_REDUCE_SCATTER;
    char red[32] = "";
    if (reduces) snprintf(red, sizeof red, " (%s)", j->redop);
    fprintf(s->out, "%s%s of %lld x %s on %d ranks, %s%s: %s (slowest rank)\n", rs_pg_op_name(op), red, j->count,
            rs_dtype_name(j->dt), j->world, j->backend, algo, when);
    if (missing || wrong) {
        for (int r = 0; r < j->world; r++)
            if (j->wrong[r]) fprintf(s->out, "  rank %d: %llu elements differ from the serial computation\n", r,
                                     (unsigned long long)j->wrong[r]);
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "collective: %s", missing ? "some ranks did not report a result"
                                                                                : "wrong results (see above)");
        rs_log_run_end(s, j->run, "failed", 1, NULL, s->last_error);
    } else {
        fprintf(s->out, "every rank's result equals the serial computation%s\n",
                j->run > 0 ? "; trace in the session log" : "");
        char final[128];
        snprintf(final, sizeof final, "{\"seconds\":%.9g,\"events\":%lld}", slowest, (long long)j->nevents);
        rs_log_run_end(s, j->run, "done", 1, final, NULL);
    }
    return rc;
}

/* A job for a command, with what common_opts checks; NULL after reporting an error. */
static dist_job *job_new(rs_session *s, const rs_call *c, const char *what, bool collect, double *timeout)
{
    dist_job *j = calloc(1, sizeof *j);
    if (!j) {
        rs_session_error(s, c, (size_t)-1, 0, "%s: out of memory", what);
        return NULL;
    }
    j->what = what;
    j->collect = collect;
    if (common_opts(s, c, j, timeout)) {
        job_free(j);
        return NULL;
    }
    return j;
}

int rs_cmd_collective(rs_session *s, const rs_call *c)
{
    double timeout = 30;
    rs_pg_opkind op;
    if (parse_op(s, c, &op)) return 1;
    dist_job *j = job_new(s, c, "collective", true, &timeout);
    if (!j) return 1;
    rs_dtype dt = RS_F32;
    const char *dts = rs_call_str(c, "dtype", "f32");
    for (int t = 0; t < RS_DTYPE_COUNT; t++)
        if (!strcmp(dts, rs_dtype_name((rs_dtype)t))) dt = (rs_dtype)t;
    long long count = rs_call_int(c, "count", 2);
    if (rs_call_given(c, "size") && !rs_call_given(c, "count"))
        count = (long long)(rs_call_opt(c, "size")->v.size / rs_dtype_size(dt));
    long long root = rs_call_int(c, "root", 0);
    if (count < 0 || count > (1ll << 31)) {
        const rs_optval *v = rs_call_given(c, "count") ? rs_call_opt(c, "count") : rs_call_opt(c, "size");
        job_free(j);
        return rs_session_error(s, c, v->pos, strlen(v->text) + 6, "collective: %lld elements per rank is out of range "
                                "(0..2^31)", count);
    }
    if (root < 0 || root >= j->world) {
        const rs_optval *v = rs_call_opt(c, "root");
        int world = j->world;
        job_free(j);
        return rs_session_error(s, c, v->pos, strlen(v->text) + 5, "collective: root %lld is not a rank (0..%d)", root,
                                world - 1);
    }
    j->op = op;
    j->dt = dt;
    j->count = count;
    snprintf(j->redop, sizeof j->redop, "%s", rs_call_str(c, "op", "sum"));
    j->finish = collective_end;
    j->run = rs_log_run_begin_dist(s, "collective", NULL, NULL, NULL, c, "collective", j->backend, j->world);
    char a_op[48], a_cnt[48], a_dt[24], a_red[32], a_algo[48], a_root[24], a_show[24], a_be[48];
    snprintf(a_op, sizeof a_op, "op=%s", rs_pg_op_name(op));
    snprintf(a_cnt, sizeof a_cnt, "count=%lld", count);
    snprintf(a_dt, sizeof a_dt, "dtype=%s", rs_dtype_name(dt));
    snprintf(a_red, sizeof a_red, "redop=%s", j->redop);
    snprintf(a_algo, sizeof a_algo, "algo=%s", rs_call_str(c, "algo", "auto"));
    snprintf(a_root, sizeof a_root, "root=%lld", root);
    snprintf(a_show, sizeof a_show, "show=%lld", rs_call_int(c, "show", 16));
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    const char *args[] = {a_be, a_op, a_cnt, a_dt, a_red, a_algo, a_root, a_show, "trace=1"};
    return run_ranks(j, args, 9, timeout);
}

/* ---------------------------------------------------------------- bench */

/* The job's end: nccl-tests' footer and the run's end in the log. */
static int bench_end(dist_job *j, int rc)
{
    rs_session *s = j->s;
    if (rc) return rc;
    double avg = j->nrows ? j->busbw_sum / j->nrows : 0;
    fprintf(s->out, "# Out of bounds values : %llu %s\n", (unsigned long long)j->wrong_rows,
            j->wrong_rows ? "WRONG" : "OK");
    fprintf(s->out, "# Avg bus bandwidth    : %.4f GB/s\n#\n", avg);
    char final[96];
    snprintf(final, sizeof final, "{\"avg_busbw\":%.6g,\"rows\":%d}", avg, j->nrows);
    rs_log_run_end(s, j->run, j->wrong_rows ? "failed" : "done", j->nrows, final, j->wrong_rows ? "wrong results" : NULL);
    if (j->wrong_rows) rc = rs_session_error(s, j->c, (size_t)-1, 0, "bench: some sizes gave wrong results");
    return rc;
}

int rs_cmd_bench(rs_session *s, const rs_call *c)
{
    double timeout = 30;
    rs_pg_opkind op;
    if (parse_op(s, c, &op)) return 1;
    dist_job *j = job_new(s, c, "bench", false, &timeout);
    if (!j) return 1;
    uint64_t lo, hi;
    rs_err e = {0};
    const rs_optval *sv = rs_call_opt(c, "sizes");
    if (rs_val_size_range(rs_call_str(c, "sizes", "8..64M"), &lo, &hi, &e) || lo == 0 || hi > (1ull << 32)) {
        job_free(j);
        return rs_session_error(s, c, sv->pos, strlen(sv->text) + 6, "bench: sizes: %s",
                                e.msg[0] ? e.msg : "give LO..HI between 1 and 4G, e.g. sizes=8..64M");
    }
    const char *dts = rs_call_str(c, "dtype", "f32");
    j->finish = bench_end;
    j->run = rs_log_run_begin_dist(s, "bench", NULL, NULL, NULL, c, "bench", j->backend, j->world);
    fprintf(s->out, "# bench %s: %d ranks, %s backend, %s, %s%s\n", rs_pg_op_name(op), j->world, j->backend, dts,
            rs_call_str(c, "op", "sum"), j->run > 0 ? "" : " (no session log)");
    char a_op[48], a_lo[48], a_hi[48], a_dt[24], a_red[32], a_algo[48], a_it[32], a_be[48];
    snprintf(a_op, sizeof a_op, "op=%s", rs_pg_op_name(op));
    snprintf(a_lo, sizeof a_lo, "minbytes=%llu", (unsigned long long)lo);
    snprintf(a_hi, sizeof a_hi, "maxbytes=%llu", (unsigned long long)hi);
    snprintf(a_dt, sizeof a_dt, "dtype=%s", dts);
    snprintf(a_red, sizeof a_red, "redop=%s", rs_call_str(c, "op", "sum"));
    snprintf(a_algo, sizeof a_algo, "algo=%s", rs_call_str(c, "algo", "auto"));
    snprintf(a_it, sizeof a_it, "iters=%lld", rs_call_int(c, "iters", 0));
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    const char *args[] = {a_be, a_op, a_lo, a_hi, a_dt, a_red, a_algo, a_it};
    return run_ranks(j, args, 8, timeout);
}

/* ---------------------------------------------------------------- p2p */

static int p2p_end(dist_job *j, int rc)
{
    rs_session *s = j->s;
    print_lines(j, "");
    if (rc) return rc;
    bool bad = j->wrong[0] || j->wrong[1] || !j->checked[0] || !j->checked[1];
    if (bad) rc = rs_session_error(s, j->c, (size_t)-1, 0, "p2p: the received data was not the peer's");
    rs_log_run_end(s, j->run, bad ? "failed" : "done", 1, NULL, bad ? "wrong data" : NULL);
    return rc;
}

int rs_cmd_p2p(rs_session *s, const rs_call *c)
{
    double timeout = 30;
    dist_job *j = job_new(s, c, "p2p", true, &timeout);
    if (!j) return 1;
    if (j->world < 2) {
        const rs_optval *v = rs_call_opt(c, "ranks");
        job_free(j);
        return rs_session_error(s, c, v->pos, 5 + strlen(v->text), "p2p: needs 2 ranks or more");
    }
    uint64_t size = rs_call_opt(c, "size")->v.size;
    if (size < 4 || size > (1ull << 31)) {
        const rs_optval *v = rs_call_opt(c, "size");
        job_free(j);
        return rs_session_error(s, c, v->pos, 5 + strlen(v->text), "p2p: size must be 4 bytes .. 2G");
    }
    j->finish = p2p_end;
    j->run = rs_log_run_begin_dist(s, "p2p", NULL, NULL, NULL, c, "p2p", j->backend, j->world);
    char a_size[48], a_be[48], a_it[32];
    snprintf(a_size, sizeof a_size, "size=%llu", (unsigned long long)size);
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    snprintf(a_it, sizeof a_it, "iters=%lld", rs_call_int(c, "iters", 0));
    const char *args[] = {a_be, a_size, a_it};
    return run_ranks(j, args, 3, timeout);
}

/* ---------------------------------------------------------------- backends */

int rs_cmd_backends(rs_session *s, const rs_call *c)
{
    (void)c;
    FILE *f = s->out;
    const char *lang = getenv("LC_ALL");
    if (!lang || !*lang) lang = getenv("LC_CTYPE");
    if (!lang || !*lang) lang = getenv("LANG");
    bool utf8 = lang && (strstr(lang, "UTF-8") || strstr(lang, "utf8") || strstr(lang, "UTF8"));
    const char *yes = utf8 ? "✓" : "y", *no = utf8 ? "✘" : "-";
    const rs_pg_backend *b = rs_pg_backends();
    int nb = 0;
    while (b[nb].name) nb++;
    fprintf(f, "Process-group backends in this build: which operation runs where (read from each backend's table)\n\n");
    fprintf(f, "%-16s", "");
    for (int i = 0; i < nb; i++) fprintf(f, "  %-9s", b[i].name);
    fprintf(f, "\n%-16s", "");
    for (int i = 0; i < nb; i++) fprintf(f, "  CPU  GPU ");
    fputc('\n', f);
    static const char *const rows[] = {"send", "recv", "isend/irecv", "broadcast", "reduce", "all_reduce",
                                       "scatter", "gather", "all_gather", "reduce_scatter", "all_to_all",
                                       "barrier", "new_group"};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        fprintf(f, "%-16s", rows[r]);
        for (int i = 0; i < nb; i++) {
            const rs_pg_ops *o = b[i].ops;
            const void *fn[] = {(const void *)o->send, (const void *)o->recv, (const void *)o->isend,
                                (const void *)o->broadcast, (const void *)o->reduce, (const void *)o->all_reduce,
                                (const void *)o->scatter, (const void *)o->gather, (const void *)o->all_gather,
                                (const void *)o->reduce_scatter, (const void *)o->all_to_all,
                                (const void *)o->barrier, (const void *)o->new_group};
            bool have = fn[r] != NULL;
            fprintf(f, "   %s    %s  ", have && (o->devices & RS_PG_DEV_CPU) ? yes : no,
                    have && (o->devices & RS_PG_DEV_GPU) ? yes : no);
        }
        fputc('\n', f);
    }
    fputc('\n', f);
    for (int i = 0; i < nb; i++) fprintf(f, "  %-5s %s\n        %s\n", b[i].name, b[i].about, b[i].ops->algos);
    static const char *const all[] = {"shm", "tcp", "mpi", "nccl"};
    for (int i = 0; i < 4; i++)
        if (!rs_pg_backend_find(all[i]))
            fprintf(f, "  %-5s not built: meson did not find %s\n", all[i],
                    !strcmp(all[i], "mpi") ? "Open MPI (apt-get install libopenmpi-dev)" : "CUDA and NCCL");
    fprintf(f, "\nTry: collective all_reduce ranks=4 backend=shm algo=ring   bench all_reduce ranks=2 sizes=8..64M\n");
    return 0;
}

/* ---------------------------------------------------------------- train across ranks */

static void fmt_bytes(double b, char *buf, size_t n)
{
    if (b >= 1 << 20) snprintf(buf, n, "%.2f MiB", b / (1 << 20));
    else if (b >= 1 << 10) snprintf(buf, n, "%.1f KiB", b / (1 << 10));
    else snprintf(buf, n, "%.0f B", b);
}

/* Of the communication time each rank spent, how much ran while its backward was still going. */
static void comm_hidden(const dist_job *j, int rank, double *comm, double *hidden)
{
    *comm = *hidden = 0;
    for (int a = 0; a < j->nspans; a++) {
        const struct tspan *c = &j->spans[a];
        if (c->rank != rank || !c->comm || c->step < 0) continue;
        *comm += c->t1 - c->t0;
        for (int b = 0; b < j->nspans; b++) {
            const struct tspan *k = &j->spans[b];
            if (k->rank != rank || k->comm || k->step != c->step) continue;
            double lo = c->t0 > k->t0 ? c->t0 : k->t0, hi = c->t1 < k->t1 ? c->t1 : k->t1;
            if (hi > lo) *hidden += hi - lo;
        }
    }
}

static void print_memory(dist_job *j, const rs_obj *m, int zero, int opt_states)
{
    FILE *f = j->s->out;
    size_t P = rs_model_param_count(m->model);
    rs_zero_bytes z = rs_zero_predict(P, j->world, zero, opt_states);
    bool off = false;
    for (int r = 0; r < j->world; r++) off |= j->mem[r].live[RS_POOL_OFFLOAD] > 0;
    static const rs_pool pools[] = {RS_POOL_PARAMS, RS_POOL_GRADS, RS_POOL_OPTIM, RS_POOL_ACTS, RS_POOL_COMM,
                                    RS_POOL_OFFLOAD};
    static const char *const heads[] = {"parameters", "gradients", "optimizer", "activations", "comm", "offload (host)"};
    int np = off ? 6 : 5;
    char b[32];
    fprintf(f, "memory per rank after the last step, measured at the allocator (live bytes by pool):\n  %-5s", "rank");
    for (int p = 0; p < np; p++) fprintf(f, " %14s", heads[p]);
    fputc('\n', f);
    for (int r = 0; r < j->world; r++) {
        fprintf(f, "  %-5d", r);
        for (int p = 0; p < np; p++) {
            fmt_bytes((double)j->mem[r].live[pools[p]], b, sizeof b);
            fprintf(f, " %14s", b);
        }
        fputc('\n', f);
    }
    double zp[3] = {z.params, z.grads, z.optim};
    fprintf(f, "  %-5s", "paper");
    for (int p = 0; p < 3; p++) {
        fmt_bytes(zp[p], b, sizeof b);
        fprintf(f, " %14s", b);
    }
    fprintf(f, "   the ZeRO paper's formula, P=%zu parameters, N=%d: %s%s\n", P, j->world,
            zero == 0   ? "4P + 4P + 4kP"
            : zero == 1 ? "4P + 4P + 4kP/N"
            : zero == 2 ? "4P + (4P + 4kP)/N"
                        : "(4P + 4P + 4kP)/N",
            off ? " (offloaded state counted under offload)" : "");
}

/* The job's end: the trained weights back into the model, the summary, the memory table, the run's end. */
static int train_end(dist_job *j, int rc)
{
    rs_session *s = j->s;
    mark_busy(j, 0);
    rs_obj *m = rs_session_find(s, j->mname);
    if (rc && j->ckpt && j->ckpts > 0)
        fprintf(s->out, "the last checkpoint is %s (step %lld); continue with `train %s on %s ... resume=%s`\n",
                j->ckpt, (long long)j->last_ckpt_step, j->mname, j->dname, j->ckpt);
    if (!rc && (!m || !m->model)) /* cannot happen while busy: drop and rebinding refuse */
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "train: model %s is gone; the trained weights are lost", j->mname);
    rs_err err = {0};
    if (!rc && rs_ckpt_load_model(j->outp, m->model, &err))
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "train: reading the trained weights back: %s", err.msg);
    unlink(j->init);
    unlink(j->outp);
    rmdir(j->dir);
    if (rc) return rc;
    double sps = 0, secs = 0;
    for (int r = 0; r < j->world; r++) {
        sps += j->done[r].sps;
        if (j->done[r].seconds > secs) secs = j->done[r].seconds;
    }
    fprintf(s->out, "trained %s on %s with %s on %d ranks: %lld steps in %.1fs, %.0f samples/s in all", j->mname,
            j->dname, j->mode, j->world, (long long)j->done[0].step, secs, sps);
    if (j->evaluated) fprintf(s->out, ", test accuracy %.4f", j->eval_acc);
    fputc('\n', s->out);
    double comm0 = 0, hid0 = 0;
    for (int r = 0; r < j->world; r++) {
        double cm, hd;
        comm_hidden(j, r, &cm, &hd);
        comm0 += cm;
        hid0 += hd;
    }
    if (comm0 > 0)
        fprintf(s->out, "communication: %.3f s per rank, %.0f%% of it hidden behind backward\n", comm0 / j->world,
                100 * hid0 / comm0);
    print_memory(j, m, j->zero, j->opt_states);
    char final[256];
    snprintf(final, sizeof final, "{\"steps\":%lld,\"seconds\":%.6g,\"samples_per_s\":%.6g,\"comm_hidden\":%.6g%s%.6g}",
             (long long)j->done[0].step, secs, sps, comm0 > 0 ? hid0 / comm0 : 0,
             j->evaluated ? ",\"test_acc\":" : ",\"test_acc_none\":", j->evaluated ? j->eval_acc : 0);
    rs_log_run_end(s, j->run, "done", j->done[0].step, final, NULL);
    if (j->run > 0) fprintf(s->out, "run %lld logged: `show run %lld`\n", (long long)j->run, (long long)j->run);
    return rc;
}

int rs_cmd_train_ranks(rs_session *s, const rs_call *c, rs_obj *m, rs_obj *d, const rs_train_cfg *cfg)
{
    double timeout = 60;
    dist_job *j = job_new(s, c, "train", false, &timeout);
    if (!j) return 1;
    const char *mode = rs_call_str(c, "mode", "ddp");
    bool fsdp = !strcmp(mode, "fsdp");
    long long zero = fsdp ? rs_call_int(c, "zero", 3) : 0;
    if (fsdp && (zero < 1 || zero > 3)) {
        const rs_optval *v = rs_call_opt(c, "zero");
        job_free(j);
        return rs_session_error(s, c, v->pos, 5 + strlen(v->text), "train: zero must be 1, 2 or 3, got %lld", zero);
    }
    if (cfg->batch % j->world) {
        const rs_optval *v = rs_call_opt(c, "batch");
        int world = j->world;
        job_free(j);
        return rs_session_error(s, c, v->pos, v->set ? 6 + strlen(v->text) : 0,
                                "train: batch=%d is the global batch and does not split over %d ranks (try batch=%d)",
                                cfg->batch, world, (cfg->batch / world + 1) * world);
    }
    if (d->source_cut) {
        job_free(j);
        return rs_session_error(s, c, c->arg_pos[2], strlen(c->args[2]),
                                "train: data %s's source is too long to hand to the ranks; use fewer or shorter paths",
                                d->name);
    }
    j->mem = calloc((size_t)j->world, sizeof *j->mem);
    j->done = calloc((size_t)j->world, sizeof *j->done);
    char *dir = j->dir;
    snprintf(j->dir, sizeof j->dir, "/tmp/ringside-train-XXXXXX");
    if (!j->mem || !j->done || !mkdtemp(dir)) {
        job_free(j);
        return rs_session_error(s, c, (size_t)-1, 0, "train: cannot make a folder for the ranks' files: %s",
                                strerror(errno));
    }
    char *init = j->init, *outp = j->outp;
    snprintf(j->init, sizeof j->init, "%s/init.safetensors", dir);
    snprintf(j->outp, sizeof j->outp, "%s/out.safetensors", dir);
    rs_err err = {0};
    if (rs_ckpt_save_model(init, m->model, &err)) {
        rmdir(dir);
        job_free(j);
        return rs_session_error(s, c, (size_t)-1, 0, "train: %s", err.msg);
    }
    char *spec = rs_model_spec(m->model);
    /* what the end needs, copied: the call and cfg are gone when a background run ends */
    snprintf(j->mname, sizeof j->mname, "%s", m->name);
    snprintf(j->dname, sizeof j->dname, "%s", d->name);
    snprintf(j->mode, sizeof j->mode, "%s", mode);
    j->ckpt = cfg->ckpt_path ? strdup(cfg->ckpt_path) : NULL;
    j->zero = (int)zero;
    j->opt_states = cfg->opt.kind == RS_OPT_SGD ? (cfg->opt.momentum != 0 ? 1 : 0) : 2;
    j->finish = train_end;
    j->run = rs_log_run_begin_dist(s, "train", m->name, m->spec, d->name, c, mode, j->backend, j->world);
    j->t_start = j->last_print = rs_pg_now();
    fprintf(s->out, "%s: %d ranks on %s, global batch %d (%d per rank)%s\n", mode, j->world, j->backend, cfg->batch,
            cfg->batch / j->world, fsdp ? (zero == 3 ? ", ZeRO-3" : zero == 2 ? ", ZeRO-2" : ", ZeRO-1") : "");

    /* every option, as the worker reads them */
    char a[32][300];
    int n = 0;
#define ARG(...) snprintf(a[n++], sizeof a[0], __VA_ARGS__)
    ARG("backend=%s", j->backend);
    ARG("mode=%s", mode);
    ARG("init=%s", init);
    ARG("out=%s", outp);
    ARG("data=%s", d->source);
    ARG("data_seed=%llu", (unsigned long long)d->data_seed);
    ARG("model_seed=%llu", (unsigned long long)rs_model_seed(m->model));
    ARG("seed=%llu", (unsigned long long)cfg->seed);
    ARG("zero=%lld", zero);
    ARG("accum=%d", cfg->accum);
    ARG("epochs=%d", cfg->epochs);
    ARG("batch=%d", cfg->batch);
    ARG("opt=%s", rs_opt_kind_name(cfg->opt.kind));
    ARG("lr=%.9g", (double)cfg->opt.lr);
    ARG("momentum=%.9g", (double)cfg->opt.momentum);
    ARG("nesterov=%d", cfg->opt.nesterov);
    ARG("wd=%.9g", (double)cfg->opt.weight_decay);
    ARG("sched=%s", cfg->sched.kind == RS_SCHED_COSINE ? "cosine" : cfg->sched.kind == RS_SCHED_STEP ? "step" : "constant");
    ARG("warmup=%lld", (long long)cfg->sched.warmup);
    ARG("step_size=%lld", (long long)cfg->sched.step_size);
    ARG("gamma=%.9g", (double)cfg->sched.gamma);
    ARG("min_lr=%.9g", (double)cfg->sched.min_lr);
    ARG("steps=%lld", (long long)cfg->max_steps);
    ARG("eval=%d", cfg->eval);
    ARG("bucket=%llu", (unsigned long long)rs_call_opt(c, "bucket")->v.size);
    ARG("overlap=%d", rs_call_bool(c, "overlap", true));
    ARG("offload=%d", !strcmp(rs_call_str(c, "offload", "none"), "cpu"));
    ARG("wrap=%d", rs_call_opt(c, "wrap")->v.choice);
    if (cfg->ckpt_path) ARG("ckpt=%s", cfg->ckpt_path);
    if (cfg->ckpt_every) ARG("ckpt_every=%lld", (long long)cfg->ckpt_every);
    if (cfg->resume) ARG("resume=%s", cfg->resume);
#undef ARG
    const char *args[40];
    for (int i = 0; i < n; i++) args[i] = a[i];
    char specarg[4200];
    snprintf(specarg, sizeof specarg, "spec=%s", spec ? spec : m->spec);
    args[n++] = specarg;
    free(spec);
    return run_ranks(j, args, n, timeout);
}
