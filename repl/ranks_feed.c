/* What a rank's line goes through in a run on ranks (see ranks_job.h): mpirun's tag stripped, the live
 * view and its headless dump fed, trace events, values and plain lines into the session log, step=1's
 * steps counted, then the kind's own machine lines (j->kind->line) and the human lines, kept for the
 * end or printed as they come. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/launch/spawn.h"
#include "dist/pg/pg.h"
#include "dist/store/store.h"
#include "dist/worker/worker.h"
#include "repl_log.h"
#include "session.h"
#include "view_live.h"

#include "ranks_feed.h"
#include "ranks_job.h"

static void keep_line(rs_job *j, int rank, const char *line)
{
    if (j->kept.n == j->kept.cap) {
        int cap = j->kept.cap ? 2 * j->kept.cap : 16;
        char **l = realloc(j->kept.text, sizeof *l * (size_t)cap);
        if (!l) return;
        j->kept.text = l;
        int *r = realloc(j->kept.rank, sizeof *r * (size_t)cap);
        if (!r) return;
        j->kept.rank = r;
        j->kept.cap = cap;
    }
    char *copy = strdup(line);
    if (!copy) return;
    j->kept.text[j->kept.n] = copy;
    j->kept.rank[j->kept.n++] = rank;
}

/* "rank 3: ..." lines carry their own rank (mpirun's output all comes through one pipe). */
static int line_owner(const char *line, int fallback)
{
    int r;
    return sscanf(line, "rank %d:", &r) == 1 ? r : fallback;
}

/* A session-log event's detail from a json_pack format, as compact JSON text (caller frees; NULL when
 * out of memory: the event goes without it). Reals keep 9 significant digits. */
char *rs_job_detail(const char *fmt, ...)
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
        detail = rs_job_detail("{s:i, s:i}", "steps", ev->steps, "group", ev->group);
        e.detail_json = detail;
    } else if (ev->group) {
        detail = rs_job_detail("{s:i}", "group", ev->group);
        e.detail_json = detail;
    }
    if (ev->rank < j->world) {
        if (ev->kind == RS_PG_EV_BEGIN) j->begin_t[ev->rank] = ev->t;
        if (ev->kind == RS_PG_EV_END) e.value = ev->t - j->begin_t[ev->rank];
    }
    rs_log_event(j->s, j->run, &e);
    free(detail);
    j->nevents++;
}

/* ---------------------------------------------------------------- the live view's side of a job */

/* A rank's monotonic stamp as the session log keeps it (unix seconds lose the bits below ~0.2 us) and
 * back: the model sees the times a replay of the log will see, so both draw the same frame. */
double rs_job_logged_time(const rs_job *j, double t) { return (t + j->mono_to_unix) - j->mono_to_unix; }

/* Every line of every rank goes to the dashboard's model as it came. */
static void view_feed(rs_job *j, int rank, int is_stderr, const char *line)
{
    rs_view_model *vms[2] = {j->live ? rs_live_model(j->live) : NULL, j->dump_vm};
    if (!vms[0] && !vms[1]) return;
    rs_pg_event ev;
    rs_train_line tl;
    rs_data_line dl;
    char buf[RS_VIEW_LOG_W + 16];
    bool is_ev = !is_stderr && rs_wire_parse_event(line, &ev);
    bool is_tl = !is_ev && !is_stderr && rs_wire_parse_train(line, &tl);
    bool is_data = !is_ev && !is_tl && !is_stderr && rs_wire_parse_data(line, &dl);
    if (is_ev) ev.t = rs_job_logged_time(j, ev.t);
    if (is_tl) tl.t0 = rs_job_logged_time(j, tl.t0), tl.t1 = rs_job_logged_time(j, tl.t1);
    if (is_data) dl.t = rs_job_logged_time(j, dl.t);
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
    return rs_job_detail("{s:s%}", "text", line, n);
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

/* step=1: lets the ranks run algorithm step k of the current collective (once some rank reached it). */
void rs_job_step_release(rs_job *j, int k)
{
    if (!j->step.on || !j->step.store || k > j->step.max || k < j->step.next) return;
    double t = rs_job_logged_time(j, rs_pg_now());
    for (; j->step.next <= k; j->step.next++) {
        /* the models learn which ranks waited for this key and how long (not the collective's time) */
        if (j->live) rs_view_feed_release(rs_live_model(j->live), j->step.coll, j->step.next, t);
        if (j->dump_vm) rs_view_feed_release(j->dump_vm, j->step.coll, j->step.next, t);
        rs_slog_event_info rel = RS_SLOG_EVENT_INIT; /* for replays (cmd_view.c feeds it the same way) */
        rel.kind = "step_release";
        rel.coll = (int64_t)j->step.coll;
        rel.astep = j->step.next;
        rel.t = t + j->mono_to_unix;
        rs_log_event(j->s, j->run, &rel);
        char key[64];
        rs_err e = {0};
        snprintf(key, sizeof key, "step/%llu/%d", (unsigned long long)j->step.coll, j->step.next);
        rs_store_set(j->step.store, key, "1", 1, &e);
    }
}

static void step_reported(rs_job *j, const rs_pg_event *ev)
{
    if (j->step.max < 0 || ev->coll > j->step.coll) {
        j->step.coll = ev->coll;
        j->step.next = 0;
        j->step.max = -1;
    } else if (ev->coll < j->step.coll) return;
    if (ev->step > j->step.max) j->step.max = ev->step;
    if (!j->live) rs_job_step_release(j, j->step.max); /* nobody is stepping: let them run */
}

/* A machine line of any kind of run (dist/worker/worker.h's), which never reaches the printed output
 * even when this kind keeps nothing of it. */
static bool machine_line(const char *line)
{
    rs_bench_row row;
    rs_p2p_times p2p;
    rs_train_line tl;
    int r;
    uint64_t wrong;
    double v;
    char name[32];
    return rs_wire_parse_check(line, &r, &wrong, &v) || rs_wire_parse_bench(line, &row) ||
           !strncmp(line, "@vals ", 6) || rs_wire_parse_p2p(line, &p2p) || rs_wire_parse_num(line, &r, name, &v) ||
           rs_wire_parse_train(line, &tl);
}

void rs_job_on_line(void *ud, int rank, int is_stderr, const char *line)
{
    rs_job *j = ud;
    rs_spawn_untag(&line, &rank, &is_stderr); /* under mpirun every rank's lines come through one pipe */
    view_feed(j, line_owner(line, rank), is_stderr, line);
    if (!is_stderr && line[0] == '@') {
        rs_pg_event ev;
        rs_data_line d;
        if (rs_wire_parse_event(line, &ev)) {
            log_trace(j, &ev);
            if (j->step.on && ev.kind == RS_PG_EV_STEP) step_reported(j, &ev);
            if (j->kind->event) j->kind->event(j, &ev);
            return;
        }
        if (rs_wire_parse_data(line, &d)) {
            log_data(j, &d, line);
            return;
        }
        if ((j->kind->line && j->kind->line(j, line)) || machine_line(line)) return;
    }
    int owner = line_owner(line, rank);
    if (line[0] != '@') log_plain(j, owner, is_stderr, line);
    if (j->kind->collect && !is_stderr) {
        keep_line(j, owner, line);
        return;
    }
    if (j->background) return; /* in the session log already; the prompt is not theirs */
    if (is_stderr && owner == rank && strncmp(line, "rank ", 5) != 0) fprintf(j->s->out, "[rank %d] %s\n", rank, line);
    else fprintf(j->s->out, "%s\n", line);
    fflush(j->s->out);
}

