/* One run across ranks, the core every kind shares (see ranks_job.h): the common options, the launch,
 * Ctrl-C and `q`, the end, and runs in the background. What a rank's line goes through is ranks_feed.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "call.h"
#include "dist/launch/hostfile.h"
#include "dist/launch/launch.h"
#include "dist/launch/spawn.h"
#include "dist/pg/pg.h"
#include "dist/store/store.h"
#include "dist/worker/worker.h"
#include "engine/cuda/cuda.h"
#include "lang/value.h"
#include "repl_log.h"
#include "session.h"
#include "view_live.h"

#include "ranks_feed.h"
#include "ranks_job.h"

/* `q`: the view goes, the run goes on in the foreground with plain lines. */
static void leave_view(rs_job *j)
{
    rs_live_end(j->live);
    j->live = NULL;
    fprintf(j->s->out, "%s: left the dashboard; the run goes on\n", j->kind->what);
    fflush(j->s->out);
    rs_job_step_release(j, j->step.max);
}

static int stop_requested(void *ud)
{
    rs_job *j = ud;
    if (j->live) {
        int k = rs_live_tick(j->live);
        if (k & RS_LIVE_NEXT) rs_job_step_release(j, j->step.next);
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
    int *idx = malloc(sizeof *idx * (size_t)(j->kept.n + 1));
    if (!idx) return;
    int n = 0;
    for (int i = 0; i < j->kept.n; i++)
        if (!strncmp(j->kept.text[i], "rank ", 5)) idx[n++] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, by_rank, j->kept.rank);
    for (int i = 0; i < j->kept.n; i++)
        if (strncmp(j->kept.text[i], "rank ", 5)) idx[n++] = i;
    for (int i = 0; i < n; i++) fprintf(j->s->out, "%s%s\n", indent, j->kept.text[idx[i]]);
    free(idx);
}

void rs_job_free(rs_job *j)
{
    if (!j) return;
    if (j->kind->free && j->state) j->kind->free(j);
    free(j->state);
    /* what a run that stopped before its ranks started still holds (ranks_ended releases the rest) */
    rs_view_model_free(j->dump_vm);
    rs_store_close(j->step.store);
    rs_store_server_stop(j->srv);
    rs_launch_free(j->l);
    for (int i = 0; i < j->kept.n; i++) free(j->kept.text[i]);
    free(j->kept.text);
    free(j->kept.rank);
    free(j->begin_t);
    if (j->held.f) fclose(j->held.f);
    free(j->held.buf);
    free(j->dump);
    free(j);
}

/* The kind's end, then the job is gone. Returns the command's rc. */
static int job_finish(rs_job *j, int rc)
{
    rc = j->kind->finish(j, rc);
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

/* Whether the line after the one running in the script being played is `pause` (blank lines and
 * comments skipped): the tutorial asks the class to keep looking at the view. */
static bool next_line_pauses(const rs_session *s)
{
    if (!s->where_file || s->where_line <= 0) return false;
    FILE *f = fopen(s->where_file, "r");
    if (!f) return false;
    char line[512];
    int n = 0;
    bool pause = false;
    while (fgets(line, sizeof line, f)) {
        if (++n <= s->where_line) continue;
        const char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || *p == '\r' || !*p) continue;
        pause = !strncmp(p, "pause", 5) && (p[5] == '\0' || strchr(" \t\r\n", p[5]));
        break;
    }
    fclose(f);
    return pause;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A run's last frame stays up: at the prompt until a key; in `play` for RS_JOB_HOLD_S, a key closing it
 * sooner, so the teacher presses nothing per view, unless a `pause` line follows (then until a key, which
 * stands for the pause). */
static void hold_last_frame(rs_job *j)
{
    rs_session *s = j->s;
    bool playing = s->play_depth > 0;
    if (!playing || (s->play_mode != RS_PLAY_AUTO && next_line_pauses(s))) {
        rs_live_status(j->live, "done: press a key");
        rs_live_dirty(j->live);
        while (!(rs_live_tick(j->live) & (RS_LIVE_KEY | RS_LIVE_STOP))) usleep(20000);
        if (playing) s->pause_served = true;
        return;
    }
    double end = mono_s() + RS_JOB_HOLD_S;
    int shown = -1;
    for (double left; (left = end - mono_s()) > 0;) {
        int secs = (int)left + 1;
        if (secs != shown) {
            char st[48];
            snprintf(st, sizeof st, "done: closes in %d s", secs);
            rs_live_status(j->live, st);
            rs_live_dirty(j->live);
            shown = secs;
        }
        if (rs_live_tick(j->live) & (RS_LIVE_KEY | RS_LIVE_STOP)) break;
        usleep(20000);
    }
}

/* The live view's last frame stays (hold_last_frame), then the summary: a class reads the picture before
 * the text scrolls it away (scripts and pipes have no view). The dump's frame is written, and what
 * waited while the run was in the background is printed. */
static void view_end(rs_job *j, rs_status st)
{
    rs_session *s = j->s;
    if (j->live && st != RS_ERR_CANCELLED) hold_last_frame(j);
    rs_live_end(j->live);
    j->live = NULL;
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
    if (j->held.f) {
        fclose(j->held.f);
        j->held.f = NULL;
        if (j->held.len) fwrite(j->held.buf, 1, j->held.len, s->out);
    }
}

/* The ranks have ended (st from rs_launch_wait): the launcher, view, store and dump go, a failure is
 * reported, and the kind's end runs. Returns the command's rc; j is freed. */
static int ranks_ended(rs_job *j, rs_status st, const rs_err *e)
{
    rs_session *s = j->s;
    rs_launch_rank how = {0};
    int failed = -1;
    if (st && st != RS_ERR_CANCELLED && j->kind->fault && j->l) {
        /* the ranks have all ended: asking again only reads back how each one did */
        rs_launch_result res;
        rs_err again = {0};
        rs_launch_wait(j->l, 0, &res, &again);
        failed = res.failed_rank;
        if (failed >= 0) how = res.ranks[failed];
    }
    rs_launch_free(j->l);
    j->l = NULL;
    view_end(j, st);
    rs_store_close(j->step.store);
    j->step.store = NULL;
    rs_store_server_stop(j->srv);
    j->srv = NULL;
    int rc = 0;
    j->cancelled = st == RS_ERR_CANCELLED;
    if (st == RS_ERR_CANCELLED && j->kind->own_cancel) {
        /* the kind's finish reports it */
    } else if (st == RS_ERR_CANCELLED) {
        rs_log_run_end(s, j->run, "cancelled", 0, NULL,
                       j->background ? "stopped in the background" : "stopped by Ctrl-C");
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "%s: stopped (%s); the ranks were ended", j->kind->what,
                              j->background ? "jobs stop" : "Ctrl-C");
    } else if (st && j->kind->fault && j->kind->fault(j, failed, &how, e)) {
        rs_log_run_end(s, j->run, "failed", j->last_step, NULL, e->msg);
    } else if (st) {
        snprintf(j->failure, sizeof j->failure, "%s", e->msg);
        rs_log_run_end(s, j->run, "failed", j->last_step, NULL, e->msg);
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "%s: %s", j->kind->what, e->msg);
    }
    return job_finish(j, rc);
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
    rs_job_step_release(j, j->step.max);
    j->background = true;
    j->c = NULL;
    if (!j->kind->collect) j->held.f = open_memstream(&j->held.buf, &j->held.len); /* NULL: rows print as they come */
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

/* step=1 waits for a key between algorithm steps: a person at the live view, and steps to wait
 * between. True after refusing: j is freed and *rc is the command's. */
static bool refuse_step(rs_job *j, const rs_pg_backend *be, bool want_view, int *rc)
{
    rs_session *s = j->s;
    const rs_call *c = j->c;
    j->step.on = j->kind->coll_data && rs_call_bool(c, "step", false);
    j->step.max = -1;
    /* the REPL releases the steps through the store it hosts: not rank 0's on another host */
    if (!j->step.on || (want_view && rs_live_possible(s) && !be->needs_launcher && be->ops->transport && !j->hosts[0]))
        return false;
    rs_log_run_end(s, j->run, "failed", 0, NULL, "step=1 refused");
    *rc = job_finish(j, rs_session_error(s, c, rs_call_opt(c, "step")->pos, 6,
                                         "%s: step=1 waits for a key between algorithm steps, so it needs the live "
                                         "view on a terminal (not view=off, a script or a pipe) and a backend with "
                                         "algorithm steps (shm, tcp) on this host (no hostfile=)", j->kind->what));
    return true;
}

/* The run as the view's header shows it; the headless dump's model (RINGSIDE_VIEW_DUMP) made here,
 * with what a replay of the log knows (`view run N` compares with it): the run's start is its first
 * event, the plan unknown. The live view's copy counts from the launch, with the plan. */
static void view_begin(rs_job *j, char run_id[32], rs_view_run *vr_live)
{
    rs_err e = {0};
    snprintf(run_id, 32, "r%lld", (long long)j->run);
    rs_view_run vr = {.id = j->run > 0 ? run_id : NULL, .kind = j->kind->what, .backend = j->backend, .world = j->world,
                      .mode = j->mode[0] ? j->mode : NULL, .t_start = -1};
    const char *dump = getenv("RINGSIDE_VIEW_DUMP");
    if (dump && *dump && (j->dump = strdup(dump)) != NULL && (j->dump_vm = rs_view_model_new(&e)) != NULL)
        rs_view_set_run(j->dump_vm, &vr);
    *vr_live = vr;
    vr_live->steps_total = j->steps_total;
    vr_live->epochs = j->epochs;
    /* the replay's way back from the log's unix times to the ranks' clock (see rs_job_logged_time) */
    rs_slog_event_info clock = RS_SLOG_EVENT_INIT;
    clock.kind = "clock";
    clock.value = j->mono_to_unix;
    rs_log_event(j->s, j->run, &clock);
}

/* The ranks' meeting point, and step=1's own client of it. 0, or RS_ERR_* in e. */
static rs_status host(rs_job *j, rs_spawn_store how, rs_err *e)
{
    rs_status st = rs_spawn_host_store(how, &j->srv, &j->master_port, e);
    if (st || !j->step.on) return st;
    rs_err ce = {0};
    st = rs_store_connect("127.0.0.1", j->master_port, j->timeout_s, &j->step.store, &ce);
    if (st) rs_err_set(e, st, "connecting to the rendezvous store: %s", ce.msg);
    return st;
}

/* Where the ranks run (bind=): one line before the run's own output (in the live view, its status line)
 * and a "bind" event per rank in the session log, with the CPUs it was bound to. */
static void say_binding(rs_job *j, const rs_bind_plan *plan)
{
    if (!plan) return;
    char line[1024];
    rs_bind_plan_describe(plan, line, sizeof line);
    if (j->live && !j->step.on) rs_live_status(j->live, line);
    else if (!j->live) fprintf(j->s->out, "%s: %s\n", j->kind->what, line);
    for (int r = 0; r < j->world; r++) {
        char detail[600];
        snprintf(detail, sizeof detail, "{\"cpus\": \"%s\", \"note\": \"%s\"}", plan->bound ? plan->cpus[r] : "",
                 plan->bound ? plan->domain : plan->note);
        rs_slog_event_info ev = RS_SLOG_EVENT_INIT;
        ev.rank = r;
        ev.kind = "bind";
        ev.name = rs_call_str(j->c, "bind", "core");
        ev.detail_json = detail;
        rs_log_event(j->s, j->run, &ev);
    }
}

/* The ranks started: the job's options after the common ones, and the two that step=1 and the view's
 * dump add (the ranks also report the values their buffers hold, which the data pane shows). The
 * live view comes up as they start. */
static rs_status launch(rs_job *j, rs_spawn_store how, const char *const *job_args, int nargs,
                        const rs_view_run *vr_live, bool want_view, rs_err *e)
{
    const char **args = malloc(sizeof *args * (size_t)(nargs + 2)); /* owned here */
    if (!args) return rs_err_set(e, RS_ERR_NOMEM, "out of memory");
    int a = 0;
    for (int i = 0; i < nargs; i++) args[a++] = job_args[i];
    if (j->step.on) args[a++] = "stepwise=1";
    if (j->step.on || (j->dump && j->kind->coll_data)) args[a++] = "data=1";
    char group[48];
    snprintf(group, sizeof group, "r%lld-%ld", (long long)j->run, (long)getpid());
    rs_spawn_cfg cfg = {.job = j->kind->what, .group = group, .timeout_s = j->timeout_s, .world = j->world,
                        .per_node = j->per_node, .store = how, .args = args, .nargs = a,
                        .hosts = j->hosts[0] ? j->hosts : NULL,
                        .grace_s = j->kind->grace_s > 0 ? j->kind->grace_s : RS_JOB_GRACE_S,
                        .on_line = rs_job_on_line, .line_ud = j, .should_stop = stop_requested, .stop_ud = j};
    rs_view_run vr = *vr_live;
    vr.t_start = rs_job_logged_time(j, rs_pg_now());
    if (want_view) j->live = rs_live_start(j->s, &vr);
    if (j->live && j->step.on) rs_live_status(j->live, "step=1: n / Enter / Right for the next step");
    rs_bind_plan *plan = NULL; /* owned here */
    cfg.bind = rs_call_str(j->c, "bind", "core");
    cfg.bind_plan = &plan;
    j->t_begin = rs_pg_now();
    rs_status st = rs_spawn_start(&cfg, j->master_port, &j->l, e);
    free(args);
    if (!st) say_binding(j, plan);
    rs_bind_plan_free(plan);
    return st;
}

/* Starts the ranks with `job_args` (after `--worker JOB` and the common options), waits for them,
 * reports a failure and runs the kind's finish; j is freed. Returns the command's rc. At the prompt,
 * `q` in the live view hands j to the background instead and returns 0 at once. */
int rs_job_run(rs_job *j, const char *const *job_args, int nargs)
{
    rs_err e = {0};
    const rs_pg_backend *be = rs_pg_backend_find(j->backend);
    /* the dashboard: on a terminal unless view=off; step=1 needs it (a person presses the keys) */
    bool want_view = rs_call_bool(j->c, "view", true);
    int rc;
    if (refuse_step(j, be, want_view, &rc)) return rc;
    char run_id[32];
    rs_view_run vr_live;
    view_begin(j, run_id, &vr_live);
    rs_spawn_store how = be->needs_launcher ? RS_SPAWN_STORE_MPI
                         : j->store_rank0 || j->hosts[0] ? RS_SPAWN_STORE_RANK0 /* other hosts: rank 0's runs it */
                                              : RS_SPAWN_STORE_LAUNCHER;
    if (host(j, how, &e))
        return job_finish(j, rs_session_error(j->s, j->c, (size_t)-1, 0, "%s: %s", j->kind->what, e.msg));
    rs_status st = launch(j, how, job_args, nargs, &vr_live, want_view, &e);
    /* with the view up, short waits, so that `q` can hand the run to the background; without it one wait
     * to the end, as ever */
    if (!st)
        while ((st = rs_launch_wait(j->l, j->live ? 0.05 : 0, NULL, &e)) == RS_ERR_TIMEOUT)
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
    fprintf(s->out, "run %lld (%s, in the background) has ended:\n", (long long)j->id, j->kind->what);
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
        if (say)
            fprintf(s->out, "stopping run %lld (%s in the background)\n", (long long)s->jobs->id, s->jobs->kind->what);
        rs_launch_stop(s->jobs->l);
        rs_err e = {0};
        rs_status st = rs_launch_wait(s->jobs->l, 0, NULL, &e);
        job_ended(s, &s->jobs, st, &e);
    }
}


/* Values the ranks would only refuse after starting (a group that times out at once, a negative count,
 * a checkpoint that is not there): refused here, at the prompt, before any process. 0, or the rc. */
static int refuse_before_spawn(rs_session *s, const rs_call *c, double timeout_s)
{
    const rs_optval *v = rs_call_opt(c, "timeout");
    if (v && !(timeout_s > 0))
        return rs_session_error(s, c, v->pos, 8 + strlen(v->text ? v->text : ""),
                                "%s: timeout=%s would fail every wait at once; give how long a rank may wait for "
                                "another, e.g. timeout=30s", c->cmd->name, v->text ? v->text : "");
    v = rs_call_opt(c, "iters");
    if (v && v->set && (v->v.i < 0 || v->v.i >= RS_WORKER_COUNT_MAX))
        return rs_session_error(s, c, v->pos, 6 + strlen(v->text),
                                "%s: iters=%lld is %s; give a count of iterations below %d, or iters=0 for automatic",
                                c->cmd->name, v->v.i, v->v.i < 0 ? "negative" : "too many", RS_WORKER_COUNT_MAX);
    v = rs_call_opt(c, "resume");
    if (v && v->set && v->text) {
        struct stat sb;
        const char *why = stat(v->text, &sb) != 0 ? strerror(errno)
                          : !S_ISREG(sb.st_mode) ? "not a regular file"
                          : access(v->text, R_OK) != 0 ? strerror(errno) : NULL;
        if (why)
            return rs_session_error(s, c, v->pos, 7 + strlen(v->text),
                                    "%s: resume=%s: %s; give a checkpoint written by ckpt= (a .safetensors file)",
                                    c->cmd->name, v->text, why);
    }
    return 0;
}

/* hostfile=: DeepSpeed's hostfile, read with its rules, as the hosts' list (j->hosts); without it,
 * `ringside launch`'s hosts (s->launch) when they are not this host alone. mpirun starts mpi ranks
 * there; tcp ranks are started through ssh (or the rsh agent) with rank 0's host running the store.
 * 0, or the rc. */
static int hosts(rs_session *s, const rs_call *c, rs_job *j)
{
    const rs_optval *v = rs_call_opt(c, "hostfile");
    bool given = v && v->set;
    if (!given && !(s->launch && !rs_hostfile_is_local(s->launch))) return 0;
    size_t pos = given ? v->pos : (size_t)-1, len = given ? 9 + strlen(v->text) : 0;
    bool mpi = rs_pg_backend_find(j->backend)->needs_launcher;
    if (!mpi && strcmp(j->backend, "tcp"))
        return rs_session_error(s, c, pos, len, "%s: %s puts ranks on other hosts, which backend=%s cannot join: "
                                "backend=tcp (ranks started through ssh or RINGSIDE_RSH_AGENT, torchrun's variables) "
                                "or backend=mpi (Open MPI's mpirun and its rsh agent)", c->cmd->name,
                                given ? "hostfile=" : "`ringside launch`", j->backend);
    j->store_rank0 = !mpi; /* rank 0's host runs the store, as torchrun's rank 0 does */
    rs_hostfile hf;
    rs_err e = {0};
    rs_status st = given ? rs_hostfile_read(v->text, &hf, &e) : RS_OK;
    if (!st) st = rs_hostfile_mpi_hosts(given ? &hf : s->launch, j->world, j->hosts, sizeof j->hosts, &e);
    if (given) rs_hostfile_clear(&hf);
    if (st) return rs_session_error(s, c, pos, len, "%s: %s", c->cmd->name, e.msg);
    if (!given)
        fprintf(s->out, "%s: %d ranks on `ringside launch`'s hosts %s (host:ranks), %s backend\n", c->cmd->name,
                j->world, j->hosts, j->backend);
    return 0;
}

/* The checks every rank-starting command shares: ranks, backend, algo (for step-based backends). */
static int common_opts(rs_session *s, const rs_call *c, rs_job *j)
{
    /* under `ringside launch`: a rank a slot, started by mpirun on the launch's hosts (DeepSpeed's way) */
    bool remote = s->launch && !rs_hostfile_is_local(s->launch);
    long long ranks = s->launch && !rs_call_given(c, "ranks") ? (s->launch->slots < 64 ? s->launch->slots : 64)
                                                              : rs_call_int(c, "ranks", 2);
    const rs_optval *rv = rs_call_opt(c, "ranks");
    if (ranks < 1 || ranks > 64)
        return rs_session_error(s, c, rv->pos, 5 + strlen(rv->text ? rv->text : ""),
                                "%s: ranks must be 1..64 (this machine has %ld cores; more ranks share them), got %lld",
                                c->cmd->name, sysconf(_SC_NPROCESSORS_ONLN), ranks);
    j->world = (int)ranks;
    snprintf(j->backend_name, sizeof j->backend_name, "%s", !remote || rs_call_given(c, "backend") ? rs_call_str(c, "backend", "shm")
                                                               : rs_pg_backend_find("mpi") ? "mpi" : "tcp");
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
    j->timeout_s = rs_call_float(c, "timeout", 30);
    if (refuse_before_spawn(s, c, j->timeout_s) || hosts(s, c, j)) return 1;
    j->begin_t = calloc((size_t)j->world, sizeof *j->begin_t);                  /* j's */
    j->state = calloc(1, j->kind->state_size ? j->kind->state_size : 1);         /* j's; kind->free empties it */
    j->mono_to_unix = mono_to_unix();
    if (!j->begin_t || !j->state || (j->kind->init && !j->kind->init(j)))
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

/* A job of a kind for a command, with what common_opts checks; NULL after reporting an error. */
rs_job *rs_job_new(rs_session *s, const rs_call *c, const rs_job_kind *kind)
{
    rs_job *j = calloc(1, sizeof *j); /* the caller's until rs_job_run */
    if (!j) {
        rs_session_error(s, c, (size_t)-1, 0, "%s: out of memory", kind->what);
        return NULL;
    }
    *j = (rs_job){.s = s, .c = c, .kind = kind};
    if (common_opts(s, c, j)) {
        rs_job_free(j);
        return NULL;
    }
    return j;
}
