/* `view run N` (`view serve` is view_serve.c): a run across ranks replayed from the session log into the live dashboard's panes. The
 * log holds what the ranks reported (events: collectives' steps, phases, memory, plain lines, @done;
 * metrics: losses and evaluations); each row is turned back into what the rank said (an rs_pg_event, an
 * rs_train_line or a log line) and fed to the same model the live view uses, so a replay draws what the
 * live run drew. Scrubbing back re-feeds the model from the start: simple, and always right. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "dist/pg/pg.h"
#include "dist/worker/worker.h"
#include "repl_log.h"
#include "session.h"
#include "view_live.h"

/* One thing a rank reported, in the order the replay feeds it. */
typedef enum { IT_EVENT, IT_TRAIN, IT_LOG, IT_RELEASE, IT_DATA } item_kind;

typedef struct item {
    double t;               /* the model's clock (the log's unix seconds) */
    item_kind kind;
    int rank;
    rs_pg_event ev;         /* IT_EVENT; IT_RELEASE: coll and step (step=1: the key of that step set) */
    rs_train_line tl;       /* IT_TRAIN */
    char *text;             /* IT_LOG, owned */
    rs_data_line *data;     /* IT_DATA, owned */
} item;

typedef struct replay {
    item *items;            /* (n) owned, sorted by t */
    int n, cap;
    rs_train_line mem[RS_VIEW_MAX_RANKS]; /* memory rows come a pool at a time: each rank's so far */
    double test_acc;
    /* the run */
    char kind[32], mode[32], backend[32];
    int world;
    bool found;
} replay;

static item *push(replay *r)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 256;
        item *p = realloc(r->items, sizeof *p * (size_t)cap);
        if (!p) return NULL;
        r->items = p;
        r->cap = cap;
    }
    item *it = &r->items[r->n++];
    memset(it, 0, sizeof *it);
    return it;
}

static double num(const char *v, double fallback) { return v ? strtod(v, NULL) : fallback; }
static long long inum(const char *v, long long fallback) { return v ? strtoll(v, NULL, 10) : fallback; }

static int run_row(void *ud, int stmt, int ncols, const char *const *names, const char *const *v)
{
    (void)stmt, (void)names;
    replay *r = ud;
    if (!v || ncols < 4) return 0;
    snprintf(r->kind, sizeof r->kind, "%s", v[0] ? v[0] : "");
    snprintf(r->mode, sizeof r->mode, "%s", v[1] ? v[1] : "");
    snprintf(r->backend, sizeof r->backend, "%s", v[2] ? v[2] : "");
    r->world = (int)inum(v[3], 1);
    r->found = true;
    return 0;
}

/* Columns of the events/metrics union below. */
enum { C_SRC, C_RANK, C_T, C_KIND, C_NAME, C_STEP, C_COLL, C_ASTEP, C_ALGO, C_PEER, C_CHUNK, C_BYTES, C_VALUE,
       C_TEXT, C_STEPS, C_GROUP, C_SPS, C_OP, C_EPOCH, C_ID, C_STAGE, C_N };

/* An events row back into what the rank wrote: a collective's BEGIN/STEP/END, a phase or a bucket's
 * communication, a pipeline's micro-batch, memory, a plain line or @done. Rows of other kinds are
 * skipped. */
static void event_row(replay *r, const char *const *v)
{
    const char *kind = v[C_KIND] ? v[C_KIND] : "", *name = v[C_NAME] ? v[C_NAME] : "";
    double t = num(v[C_T], 0) / 4194304;
    int rank = (int)inum(v[C_RANK], 0);
    item *it;
    if (!strcmp(kind, "coll_data")) {
        /* the rank's @data line as it came */
        rs_data_line *d = malloc(sizeof *d);
        if (!d || !v[C_TEXT] || !rs_wire_parse_data(v[C_TEXT], d) || !(it = push(r))) {
            free(d);
            return;
        }
        d->t = t;
        it->kind = IT_DATA, it->data = d;
    } else if (!strncmp(kind, "coll_", 5)) {
        rs_pg_event ev = {0};
        if (!strcmp(kind, "coll_begin")) ev.kind = RS_PG_EV_BEGIN;
        else if (!strcmp(kind, "coll_step")) ev.kind = RS_PG_EV_STEP;
        else if (!strcmp(kind, "coll_end")) ev.kind = RS_PG_EV_END;
        else return;
        if (!rs_pg_op_from_name(name, &ev.op)) return;
        if (!v[C_ALGO] || !rs_pg_algo_from_name(v[C_ALGO], &ev.algo)) ev.algo = RS_ALGO_AUTO;
        ev.coll = (uint64_t)inum(v[C_COLL], 0);
        ev.step = (int)inum(v[C_ASTEP], 0);
        ev.steps = (int)inum(v[C_STEPS], 0);
        ev.group = (int)inum(v[C_GROUP], 0);
        ev.rank = rank;
        ev.peer = (int)inum(v[C_PEER], -1);
        ev.chunk = (int)inum(v[C_CHUNK], 0);
        ev.bytes = (size_t)inum(v[C_BYTES], 0);
        ev.t = t;
        if (!(it = push(r))) return;
        it->kind = IT_EVENT, it->ev = ev;
    } else if (!strcmp(kind, "phase")) {
        rs_train_line tl = {.rank = rank, .step = inum(v[C_STEP], -1), .t0 = t, .t1 = t + num(v[C_VALUE], 0)};
        if (!strcmp(name, "comm")) {
            tl.kind = RS_TL_COMM;
            snprintf(tl.name, sizeof tl.name, "%s", v[C_OP] ? v[C_OP] : "all_reduce");
            tl.index = (int)inum(v[C_CHUNK], 0);
            tl.bytes = (uint64_t)inum(v[C_BYTES], 0);
        } else {
            tl.kind = RS_TL_PHASE;
            snprintf(tl.name, sizeof tl.name, "%s", name);
        }
        if (!(it = push(r))) return;
        it->kind = IT_TRAIN, it->tl = tl;
        t = tl.t1; /* the rank reports a span when it ends */
    } else if (!strcmp(kind, "micro")) {
        /* a pipeline stage's forward or backward of one micro-batch */
        rs_train_line tl = {.kind = RS_TL_MICRO, .rank = rank, .step = inum(v[C_STEP], -1), .work = name[0] == 'f' ? 'F' : 'B',
                            .micro = (int)inum(v[C_CHUNK], 0), .stage = (int)inum(v[C_STAGE], 0),
                            .t0 = t, .t1 = t + num(v[C_VALUE], 0)};
        if (!(it = push(r))) return;
        it->kind = IT_TRAIN, it->tl = tl;
        t = tl.t1;
    } else if (!strcmp(kind, "memory")) {
        if (rank < 0 || rank >= RS_VIEW_MAX_RANKS) return;
        rs_train_line *m = &r->mem[rank];
        m->kind = RS_TL_MEM, m->rank = rank;
        for (int p = 0; p < RS_POOL_COUNT; p++)
            if (!strcmp(name, rs_pool_name((rs_pool)p))) {
                m->live[p] = inum(v[C_BYTES], 0);
                m->peak[p] = (int64_t)num(v[C_VALUE], 0);
            }
        if (!(it = push(r))) return;
        it->kind = IT_TRAIN, it->tl = *m;
    } else if (!strcmp(kind, "log")) {
        if (!(it = push(r))) return;
        const char *text = v[C_TEXT] ? v[C_TEXT] : "";
        it->kind = IT_LOG;
        if (name && !strcmp(name, "stderr")) {
            /* as ranks_job.c's view_feed shows a rank's stderr */
            if (asprintf(&it->text, "stderr: %s", text) < 0) it->text = NULL;
        } else it->text = strdup(text);
        if (!it->text) r->n--;
    } else if (!strcmp(kind, "step_release")) {
        if (!(it = push(r))) return;
        it->kind = IT_RELEASE;
        it->ev = (rs_pg_event){.coll = (uint64_t)inum(v[C_COLL], 0), .step = (int)inum(v[C_ASTEP], 0), .t = t};
    } else if (!strcmp(kind, "done")) {
        rs_train_line tl = {.kind = RS_TL_DONE, .rank = rank, .step = inum(v[C_STEP], 0), .seconds = num(v[C_VALUE], 0),
                            .sps = num(v[C_SPS], 0)};
        if (!(it = push(r))) return;
        it->kind = IT_TRAIN, it->tl = tl;
    } else return;
    it->t = t;
    it->rank = rank;
}

/* A metrics row: a rank's loss at a step, or the evaluation after an epoch. */
static void metric_row(replay *r, const char *const *v)
{
    const char *name = v[C_NAME] ? v[C_NAME] : "";
    rs_train_line tl = {.rank = (int)inum(v[C_RANK], 0), .step = inum(v[C_STEP], 0), .epoch = (int)inum(v[C_EPOCH], 0)};
    if (!strcmp(name, "loss")) {
        tl.kind = RS_TL_STEP;
        tl.loss = num(v[C_VALUE], NAN);
    } else if (!strcmp(name, "test_acc")) {
        r->test_acc = num(v[C_VALUE], 0);
        return;
    } else if (!strcmp(name, "test_loss")) {
        tl.kind = RS_TL_EVAL;
        tl.acc = r->test_acc;
        tl.loss = num(v[C_VALUE], NAN);
    } else return;
    item *it = push(r);
    if (!it) return;
    it->kind = IT_TRAIN, it->tl = tl, it->t = num(v[C_T], 0) / 4194304, it->rank = tl.rank;
}

static int data_row(void *ud, int stmt, int ncols, const char *const *names, const char *const *v)
{
    (void)stmt, (void)names;
    if (!v || ncols < C_N) return 0;
    if (v[C_SRC] && v[C_SRC][0] == '0') event_row(ud, v);
    else metric_row(ud, v);
    return 0;
}

static void feed(rs_view_model *vm, const item *it)
{
    switch (it->kind) {
    case IT_EVENT: rs_view_feed_event(vm, &it->ev); break;
    case IT_TRAIN: rs_view_feed_train(vm, &it->tl); break;
    case IT_LOG: rs_view_feed_log(vm, it->rank, it->text); break;
    case IT_RELEASE: rs_view_feed_release(vm, it->ev.coll, it->ev.step, it->t); break;
    case IT_DATA: rs_view_feed_data(vm, it->data); break;
    }
}

static void replay_clear(replay *r)
{
    for (int i = 0; i < r->n; i++) free(r->items[i].text), free(r->items[i].data);
    free(r->items);
}

/* The replay on a terminal: a clock that runs at speed x real time from the first row to the last, the
 * model fed up to it each tick. */
static void play(rs_session *s, const replay *r, const rs_view_run *run, double speed)
{
    rs_live *lv = rs_live_start(s, run);
    if (!lv) return;
    rs_live_set_speed(lv, speed, true);
    rs_view_model *vm = rs_live_model(lv);
    double t0 = r->items[0].t, t1 = r->items[r->n - 1].t, pos = t0, wall = rs_pg_now();
    double jump = (t1 - t0) / 20 > 0 ? (t1 - t0) / 20 : 1e-3;
    int fed = 0;
    char shown[64] = "";
    for (;;) {
        int k = rs_live_tick(lv);
        if (k & (RS_LIVE_QUIT | RS_LIVE_STOP)) break;
        double now = rs_pg_now();
        if (!rs_live_paused(lv) && pos < t1) pos += (now - wall) * rs_live_speed(lv);
        wall = now;
        if (k & RS_LIVE_FWD) pos += jump;
        if (k & RS_LIVE_BACK) {
            pos = pos - jump > t0 ? pos - jump : t0;
            rs_view_model_reset(vm);
            rs_view_set_run(vm, run);
            fed = 0;
        }
        if (pos > t1) pos = t1;
        while (fed < r->n && r->items[fed].t <= pos) feed(vm, &r->items[fed++]);
        rs_live_set_now(lv, pos);
        char st[64];
        snprintf(st, sizeof st, "replay %gx%s", rs_live_speed(lv), pos >= t1 ? ", end: q leaves" : "");
        if (strcmp(st, shown)) {
            rs_live_status(lv, st);
            snprintf(shown, sizeof shown, "%s", st);
        }
        if (k & (RS_LIVE_FWD | RS_LIVE_BACK)) rs_live_dirty(lv);
        usleep(20000);
    }
    rs_live_end(lv);
}

typedef struct keyed {
    double t;
    int i;
} keyed;

static int by_time(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->t != y->t) return (x->t > y->t) - (x->t < y->t);
    return (x->i > y->i) - (x->i < y->i);
}

/* By time; rows of one time keep the query's order (events by id, as they arrived): qsort is not
 * stable, so the index is part of the key. */
static rs_status sort_items(replay *r)
{
    keyed *k = malloc(sizeof *k * (size_t)r->n);
    item *out = malloc(sizeof *out * (size_t)r->n);
    if (!k || !out) {
        free(k);
        free(out);
        return RS_ERR_NOMEM;
    }
    for (int i = 0; i < r->n; i++) k[i] = (keyed){r->items[i].t, i};
    qsort(k, (size_t)r->n, sizeof *k, by_time);
    for (int i = 0; i < r->n; i++) out[i] = r->items[k[i].i];
    free(r->items);
    free(k);
    r->items = out;
    r->cap = r->n;
    return RS_OK;
}

int rs_cmd_view_serve(rs_session *s, const rs_call *c); /* view_serve.c */

int rs_cmd_view(rs_session *s, const rs_call *c)
{
    if (!strcmp(c->args[0], "serve")) return rs_cmd_view_serve(s, c);
    if (strcmp(c->args[0], "run"))
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]), "view: '%s' is neither run nor serve: view run N "
                                "replays a logged run, view serve watches the server", c->args[0]);
    if (c->nargs < 2)
        return rs_session_error(s, c, (size_t)-1, 0, "view run: expected N, the run's number (`runs` lists them)");
    char *end;
    long long n = strtoll(c->args[1], &end, 10);
    if (*end || n <= 0)
        return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "view: '%s' is not a run number (`runs` lists them)",
                                c->args[1]);
    if (!s->log) return rs_session_error(s, c, (size_t)-1, 0, "view: this session has no log to replay from");
    double speed = rs_call_float(c, "speed", 1);
    if (!(speed > 0)) {
        const rs_optval *v = rs_call_opt(c, "speed");
        return rs_session_error(s, c, v->pos, 6 + strlen(v->text), "view: speed must be above 0, e.g. speed=0.01");
    }
    rs_slog_flush(s->log);
    replay r = {0};
    rs_err e = {0};
    char sql[2400];
    snprintf(sql, sizeof sql, "SELECT kind, mode, backend, world_size FROM runs WHERE id = %lld", n);
    if (rs_slog_sql(s->log, sql, run_row, &r, &e)) return rs_session_error(s, c, (size_t)-1, 0, "view: %s", e.msg);
    if (!r.found)
        return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "view: no run %lld in the session log (`runs` lists them)", n);
    /* Times relative to the run's clock event (unix minus the ranks' monotonic seconds), in units of
     * 2^-22 s: a unix time's last bit, so the numbers are whole and exact as text (SQLite prints a REAL
     * with 15 digits, 10 us of a unix time). Events are kept in the order they arrived (id) within a
     * time; sorting by time merges in the metrics. */
    char clock[160];
    snprintf(clock, sizeof clock,
             "COALESCE((SELECT value FROM events WHERE run_id = %lld AND kind = 'clock' ORDER BY id LIMIT 1), 0)", n);
    snprintf(sql, sizeof sql,
             "SELECT 0, rank, CAST(round((t - %s) * 4194304) AS INTEGER), kind, name, step, coll, astep, algo, peer, "
             "chunk, bytes, printf('%%.17g', value), json_extract(detail, '$.text'), json_extract(detail, '$.steps'), "
             "json_extract(detail, '$.group'), json_extract(detail, '$.sps'), json_extract(detail, '$.op'), NULL, id, "
             "json_extract(detail, '$.stage') FROM events WHERE run_id = %lld "
             "UNION ALL SELECT 1, rank, CAST(round((t - %s) * 4194304) AS INTEGER), 'metric', name, step, NULL, NULL, "
             "NULL, NULL, NULL, NULL, printf('%%.17g', value), NULL, NULL, NULL, NULL, NULL, epoch, id, NULL FROM metrics "
             "WHERE run_id = %lld ORDER BY 1, 20",
             clock, n, clock, n);
    if (rs_slog_sql(s->log, sql, data_row, &r, &e)) {
        replay_clear(&r);
        return rs_session_error(s, c, (size_t)-1, 0, "view: %s", e.msg);
    }
    if (r.n == 0) {
        replay_clear(&r);
        return rs_session_error(s, c, (size_t)-1, 0, "view: run %lld has no events to replay (only runs across ranks "
                                "record them: collective, bench, train mode=ddp|fsdp)", n);
    }
    if (sort_items(&r)) {
        replay_clear(&r);
        return rs_session_error(s, c, (size_t)-1, 0, "view: out of memory");
    }
    char id[32];
    snprintf(id, sizeof id, "r%lld", n);
    rs_view_run run = {.id = id, .kind = r.kind, .backend = r.backend[0] ? r.backend : NULL, .world = r.world,
                       .mode = !strcmp(r.kind, "train") && r.mode[0] ? r.mode : NULL, .t_start = -1};
    if (rs_live_possible(s)) play(s, &r, &run, speed);
    else {
        rs_view_model *vm = rs_view_model_new(&e);
        char *text = NULL;
        if (vm) {
            rs_view_set_run(vm, &run);
            for (int i = 0; i < r.n; i++) feed(vm, &r.items[i]);
            int w, h;
            rs_live_frame_size(s, &w, &h);
            text = rs_live_frame_text(vm, w, h);
        }
        if (text) fputs(text, s->out);
        free(text);
        rs_view_model_free(vm);
        if (!text) {
            replay_clear(&r);
            return rs_session_error(s, c, (size_t)-1, 0, "view: out of memory");
        }
    }
    replay_clear(&r);
    return 0;
}
