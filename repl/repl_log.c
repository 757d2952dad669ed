/* Session-log glue and the session-log commands: runs, compare, sql, history, replay, export. */
#include "repl_log.h"
#include "wrap.h"

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "call.h"
#include "ds_config.h"
#include "dist/train/registry.h"
#include "engine/optim/optim.h"
#include "repl.h"
#include "slog/slog.h"
#include "slog/table.h"

void rs_log_check(rs_session *s)
{
    const char *e = s->log ? rs_slog_last_error(s->log) : NULL;
    if (e && *e && !s->warned_log) {
        rs_session_warn(s, "the session log could not be written (%s); ringside goes on without it", e);
        s->warned_log = true;
    }
}

/* Which runs of `train` read an option. The modes' own options and the common options a mode uses
 * (ranks=, backend=, threads=, ...) come from the registry of strategies; the optimizer's and the
 * schedule's own options are listed here. An option in neither applies to every run. */
static const struct {
    const char *name, *when; /* "opt=sgd" style: the run reads it when that option has that value */
} applies_to[] = {
    {"momentum", "opt=sgd"}, {"nesterov", "opt=sgd"}, {"step_size", "sched=step"}, {"gamma", "sched=step"},
    {"min_lr", "sched=cosine"},
};

static bool applies(const rs_call *c, const char *name)
{
    for (size_t i = 0; i < sizeof applies_to / sizeof applies_to[0]; i++) {
        if (strcmp(applies_to[i].name, name)) continue;
        const char *m = applies_to[i].when, *eq = strchr(m, '=');
        char key[16];
        snprintf(key, sizeof key, "%.*s", (int)(eq - m), m);
        return !strcmp(rs_call_str(c, key, ""), eq + 1);
    }
    const rs_strategy_def *d = rs_strategy_find(rs_call_str(c, "mode", "single"));
    return !d || rs_strategy_uses(d, name);
}

/* An option whose default depends on the run (the table gives none): the value the run used. */
static json_t *run_default(const rs_session *s, const rs_call *c, const char *name)
{
    rs_opt_kind kind = RS_OPT_ADAM;
    rs_opt_kind_parse(rs_call_str(c, "opt", "adam"), &kind, NULL);
    if (!strcmp(name, "lr")) return json_real(rs_opt_defaults(kind).lr);
    if (!strcmp(name, "wd")) return json_real(rs_opt_defaults(kind).weight_decay);
    if (!strcmp(name, "seed")) return json_integer((json_int_t)s->seed);
    if (!strcmp(name, "threads")) return json_integer(s->threads);
    return NULL;
}

/* The default of an option of the run's mode as the registry declares it (two modes may share a name
 * with different defaults: fsdp's zero=3, pipeline's zero=0); json_null() when it has none, NULL when
 * the mode has no such option. */
static json_t *mode_default(const rs_call *c, const char *name)
{
    const rs_strategy_def *md = rs_strategy_find(rs_call_str(c, "mode", "single"));
    const rs_strategy_opt *so = md ? rs_strategy_opt_find(md, name, NULL) : NULL;
    if (!so) return NULL;
    if (!so->def) return json_null();
    rs_strategy_args a;
    rs_strategy_args_init(&a, md);
    switch (so->type) {
    case RS_SOPT_INT: return json_integer((json_int_t)rs_strategy_int(&a, name));
    case RS_SOPT_FLOAT: return json_real(rs_strategy_float(&a, name));
    case RS_SOPT_SIZE: return json_integer((json_int_t)rs_strategy_size(&a, name));
    case RS_SOPT_BOOL: return json_boolean(rs_strategy_bool(&a, name));
    default: return rs_strategy_str(&a, name) ? json_string(rs_strategy_str(&a, name)) : json_null();
    }
}

/* Every option of the run, defaults included (those the table leaves open as the run resolved them),
 * and of `train` only those its mode, optimizer and schedule read unless they were given: so that
 * `compare` lines up what mattered. */
static json_t *options_json(const rs_session *s, const rs_call *c)
{
    json_t *o = json_object();
    bool train = !strcmp(c->cmd->name, "train");
    for (int i = 0; c->cmd->opts && c->cmd->opts[i].name; i++) {
        const rs_optdef *d = &c->cmd->opts[i];
        const rs_optval *v = &c->opts[i];
        if (train && !v->set && !applies(c, d->name)) continue;
        json_t *j = NULL;
        if (train && !v->set && (j = mode_default(c, d->name)) != NULL) {
            if (j != json_null()) json_object_set_new(o, d->name, j);
            continue;
        }
        if (!v->text) {
            if (train && (j = run_default(s, c, d->name)) != NULL) json_object_set_new(o, d->name, j);
            continue;
        }
        switch (d->type) {
        case RS_T_INT: j = json_integer(v->v.i); break;
        case RS_T_FLOAT:
        case RS_T_DURATION: j = json_real(v->v.f); break;
        case RS_T_BOOL: j = json_boolean(v->v.b); break;
        case RS_T_SIZE: j = json_integer((json_int_t)v->v.size); break;
        default: j = json_string(v->text); break;
        }
        json_object_set_new(o, d->name, j);
    }
    return o;
}

int64_t rs_log_run_begin(rs_session *s, const char *kind, const char *model, const char *spec, const char *data,
                         const rs_call *c)
{
    return rs_log_run_begin_dist(s, kind, model, spec, data, c, "single", "cpu", 1);
}

int64_t rs_log_run_begin_dist(rs_session *s, const char *kind, const char *model, const char *spec, const char *data,
                              const rs_call *c, const char *mode, const char *backend, int world)
{
    if (!s->log) return 0;
    json_t *o = options_json(s, c);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(o);
    rs_slog_run_info info = {.kind = kind, .model = model, .model_spec = spec, .dataset = data,
                             .options_json = text, .mode = mode, .backend = backend, .world_size = world};
    int64_t id = rs_slog_run_begin(s->log, s->cmd_id, &info);
    free(text);
    rs_log_check(s);
    return id;
}

void rs_log_metric(rs_session *s, int64_t run, int64_t step, int epoch, const char *name, double value)
{
    if (s->log && run > 0) rs_slog_metric(s->log, run, 0, step, epoch, name, value);
}

void rs_log_event(rs_session *s, int64_t run, const rs_slog_event_info *ev)
{
    if (s->log && run > 0) rs_slog_event(s->log, run, ev);
}

void rs_log_run_end(rs_session *s, int64_t run, const char *status, int64_t steps, const char *final_json,
                    const char *error)
{
    if (!s->log || run <= 0) return;
    rs_slog_run_end(s->log, run, status, steps, final_json, error);
    rs_slog_flush(s->log);
    rs_log_check(s);
}

void rs_log_artifact_run(rs_session *s, int64_t run, const char *path, const char *kind)
{
    if (!s->log) return;
    rs_err err = {0};
    if (rs_slog_artifact(s->log, s->cmd_id, run, path, kind, &err) <= 0 && err.msg[0] && !s->warned_log) {
        rs_session_warn(s, "artifact %s not logged: %s", path, err.msg);
        s->warned_log = true;
    }
}

void rs_log_artifact(rs_session *s, const char *path, const char *kind) { rs_log_artifact_run(s, 0, path, kind); }

/* Tables fit the terminal (80 columns in scripts and pipes: wrap.h). */
static int width(rs_session *s) { return rs_wrap_cols(s->out); }

static int no_log(rs_session *s, const rs_call *c)
{
    return rs_session_error(s, c, (size_t)-1, 0, "%s: there is no session log in this session (started with --no-db?)",
                            c->cmd->name);
}

int rs_log_show_run(rs_session *s, const rs_call *c, int64_t run)
{
    if (!s->log)
        return rs_session_error(s, c, (size_t)-1, 0,
                                "show run: there is no session log in this session (started with --no-db?)");
    rs_err err = {0};
    rs_slog_flush(s->log);
    if (rs_slog_show_run(s->log, run, s->out, width(s), &err))
        return rs_session_error(s, c, c->nargs > 1 ? c->arg_pos[1] : (size_t)-1, c->nargs > 1 ? strlen(c->args[1]) : 1,
                                "show run: %s", err.msg);
    return 0;
}

static int print_table(rs_session *s, const rs_call *c, rs_status st, rs_table *t, const rs_err *err)
{
    if (st) return rs_session_error(s, c, (size_t)-1, 0, "%s: %s", c->cmd->name, err->msg);
    if (!rs_table_nrows(t)) fprintf(s->out, "(none yet)\n");
    else rs_table_print(s->out, t, width(s), 0);
    rs_table_free(t);
    return 0;
}

int rs_cmd_runs(rs_session *s, const rs_call *c)
{
    if (!s->log) return no_log(s, c);
    rs_table *t = NULL;
    rs_err err = {0};
    rs_slog_flush(s->log);
    long long n = rs_call_int(c, "n", 20);
    if (n < 1 || n > 100000) return rs_session_error(s, c, rs_call_opt(c, "n")->pos, 2, "runs: n must be 1..100000, got %lld", n);
    rs_status st = rs_slog_runs(s->log, (int)n, &t, &err);
    return print_table(s, c, st, t, &err);
}

/* compare's table as differences first: the rows whose diff is set (under their section's title when
 * they have one), then one paragraph "the same in both: kind train, data d, ..., options: accum 1, ...". */
static void print_differences(rs_session *s, const rs_table *t, int64_t a, int64_t b)
{
    static const char *const names[] = {"", "", "", "diff"};
    char na[32], nb[32];
    snprintf(na, sizeof na, "run %lld", (long long)a);
    snprintf(nb, sizeof nb, "run %lld", (long long)b);
    const char *cols[4] = {names[0], na, nb, names[3]};
    rs_table *d = rs_table_new(4, cols);
    char *same = NULL;
    size_t same_len = 0;
    FILE *sf = open_memstream(&same, &same_len);
    if (!d || !sf) {
        rs_table_free(d);
        if (sf) fclose(sf);
        free(same);
        rs_table_print(s->out, t, width(s), 0);
        return;
    }
    rs_table_set_align(d, 1, RS_TABLE_LEFT);
    rs_table_set_align(d, 2, RS_TABLE_LEFT);
    /* a section's title ("options", "final"), written before its first difference and before its
     * first equal field */
    const char *section = NULL, *same_section = NULL;
    int nsame = 0;
    for (size_t r = 0; r < rs_table_nrows(t); r++) {
        const char *k = rs_table_cell(t, r, 0), *va = rs_table_cell(t, r, 1), *vb = rs_table_cell(t, r, 2);
        const char *diff = rs_table_cell(t, r, 3);
        if (k[0] != ' ' && !va[0] && !vb[0] && !diff[0]) {
            section = same_section = k;
            continue;
        }
        /* two runs' durations are a matter of the clock: with the differences, equal or not */
        if (diff[0] || !strcmp(k, "duration")) {
            if (section) {
                const char *row[4] = {section, "", "", ""};
                rs_table_add(d, row);
                section = NULL;
            }
            const char *row[4] = {k, va, vb, diff};
            rs_table_add(d, row);
        } else {
            while (*k == ' ') k++;
            if (same_section) fprintf(sf, "%s %s:", nsame ? ";" : "", same_section);
            fprintf(sf, "%s %s %s", nsame++ && !same_section ? "," : "", k, va[0] ? va : "(none)");
            same_section = NULL;
        }
    }
    fclose(sf);
    if (rs_table_nrows(d)) rs_table_print(s->out, d, width(s), 0);
    else fprintf(s->out, "runs %lld and %lld: nothing the log holds differs\n", (long long)a, (long long)b);
    fprintf(s->out, "\nthe same in both:%s\n(`compare %lld %lld all=on`: every field in one table)\n", same, (long long)a,
            (long long)b);
    free(same);
    rs_table_free(d);
}

int rs_cmd_compare(rs_session *s, const rs_call *c)
{
    if (!s->log) return no_log(s, c);
    rs_table *t = NULL;
    rs_err err = {0};
    rs_slog_flush(s->log);
    int64_t a = atoll(c->args[0]), b = atoll(c->args[1]);
    rs_status st = rs_slog_compare(s->log, a, b, &t, &err);
    if (st || rs_call_bool(c, "all", false)) return print_table(s, c, st, t, &err);
    print_differences(s, t, a, b);
    rs_table_free(t);
    return 0;
}

int rs_cmd_history(rs_session *s, const rs_call *c)
{
    if (!s->log) return no_log(s, c);
    rs_table *t = NULL;
    rs_err err = {0};
    long long n = rs_call_int(c, "n", 20);
    if (n < 1 || n > 100000) return rs_session_error(s, c, rs_call_opt(c, "n")->pos, 2, "history: n must be 1..100000, got %lld", n);
    rs_status st = rs_slog_history(s->log, (int)n, &t, &err);
    return print_table(s, c, st, t, &err);
}

/* sql format=csv|json: every row, for another program (the table is for people, and stops at 200). */
typedef struct sql_out {
    FILE *f;
    bool json;
    int stmt, rows;
    json_t *names; /* json: the statement's column names */
} sql_out;

static void csv_field(FILE *f, const char *v)
{
    if (!v) return; /* NULL: an empty field, as the sqlite3 shell writes it */
    if (!strpbrk(v, ",\"\r\n")) {
        fputs(v, f);
        return;
    }
    fputc('"', f);
    for (; *v; v++) {
        if (*v == '"') fputc('"', f);
        fputc(*v, f);
    }
    fputc('"', f);
}

/* A value as JSON by its SQLite type (text and blobs as strings). */
static json_t *json_value(const char *v, int type)
{
    if (!v || type == SQLITE_NULL) return json_null();
    if (type == SQLITE_INTEGER) return json_integer(strtoll(v, NULL, 10));
    if (type == SQLITE_FLOAT) {
        double x = strtod(v, NULL);
        return isfinite(x) ? json_real(x) : json_null(); /* JSON has no inf */
    }
    return json_string(v);
}

static void sql_end_stmt(sql_out *o)
{
    if (o->json && o->names) fprintf(o->f, "%s]\n", o->rows ? "\n" : "");
    json_decref(o->names);
    o->names = NULL;
}

static int sql_row(void *ud, int stmt, int ncols, const char *const *names, const char *const *values,
                   const int *types)
{
    sql_out *o = ud;
    if (!values) { /* a statement's header */
        sql_end_stmt(o);
        if (o->stmt++ && !o->json) fputc('\n', o->f);
        o->rows = 0;
        if (o->json) {
            o->names = json_array();
            for (int i = 0; i < ncols; i++) json_array_append_new(o->names, json_string(names[i] ? names[i] : ""));
            fputc('[', o->f);
        } else {
            for (int i = 0; i < ncols; i++) {
                if (i) fputc(',', o->f);
                csv_field(o->f, names[i]);
            }
            fputs("\r\n", o->f);
        }
        return 0;
    }
    (void)stmt;
    if (o->json) {
        json_t *row = json_object();
        for (int i = 0; i < ncols; i++)
            json_object_set_new(row, json_string_value(json_array_get(o->names, (size_t)i)), json_value(values[i], types[i]));
        /* 17 digits: a double read back exactly (jansson writes the shortest that does) */
        char *text = json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(17));
        fprintf(o->f, "%s\n%s", o->rows ? "," : "", text ? text : "{}");
        free(text);
        json_decref(row);
    } else {
        for (int i = 0; i < ncols; i++) {
            if (i) fputc(',', o->f);
            csv_field(o->f, values[i]);
        }
        fputs("\r\n", o->f);
    }
    o->rows++;
    return 0;
}

int rs_cmd_sql(rs_session *s, const rs_call *c)
{
    if (!s->log) return no_log(s, c);
    rs_err err = {0};
    rs_slog_flush(s->log);
    int format = rs_call_opt(c, "format")->v.choice; /* rs_words_sql_format: table, csv, json */
    rs_status st;
    if (format == 0) st = rs_slog_sql_print(s->log, c->args[0], s->out, width(s), 200, &err);
    else {
        /* raw: the wrapper must not fold a long row, another program reads it */
        sql_out o = {.f = s->out, .json = format == 2};
        char *buf = NULL;
        size_t len = 0;
        o.f = open_memstream(&buf, &len);
        if (!o.f) return rs_session_error(s, c, (size_t)-1, 0, "sql: out of memory");
        st = rs_slog_sql_typed(s->log, c->args[0], sql_row, &o, &err);
        sql_end_stmt(&o);
        fclose(o.f);
        if (!st && buf) rs_wrap_raw(s->out, buf, len);
        free(buf);
    }
    if (st) return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]) + 2, "sql: %s", err.msg);
    return 0;
}

typedef struct replay_ctx {
    rs_session *s;
    int errors, ran;
} replay_ctx;

static int replay_one(void *ud, int64_t seq, const char *text, const char *source, const char *status)
{
    (void)seq;
    (void)source;
    (void)status;
    replay_ctx *r = ud;
    if (r->s->quit || (r->s->interrupt && *r->s->interrupt)) return 1;
    bool echo = r->s->echo;
    r->s->echo = true; /* the runner shows each replayed command once */
    r->ran++;
    r->errors += rs_repl_line(r->s, text) ? 1 : 0;
    r->s->echo = echo;
    return r->errors && !r->s->keep_going ? 1 : 0;
}

int rs_cmd_replay(rs_session *s, const rs_call *c)
{
    if (!s->log) return no_log(s, c);
    int64_t id = atoll(c->args[0]);
    if (id == rs_slog_session(s->log))
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]), "replay: %lld is this session; replay an earlier one",
                                (long long)id);
    replay_ctx r = {.s = s};
    rs_err err = {0};
    const char *old = s->source;
    char src[32];
    snprintf(src, sizeof src, "replay:%lld", (long long)id);
    s->source = src;
    int64_t saved = s->cmd_id;
    rs_status st = rs_slog_session_commands(s->log, id, 1, replay_one, &r, &err);
    s->cmd_id = saved;
    s->source = old;
    if (st) return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]), "replay: %s", err.msg);
    fprintf(s->out, "replayed %d commands of session %lld, %d failed\n", r.ran, (long long)id, r.errors);
    return r.errors ? 1 : 0;
}

int rs_cmd_export_onnx(rs_session *s, const rs_call *c); /* repl/cmd_onnx.c */

/* `export session N FILE.ring`, or `export MODEL FILE.onnx` (cmd_onnx.c). */
int rs_cmd_export(rs_session *s, const rs_call *c)
{
    if (!strcmp(c->args[0], "config")) return rs_ds_config_export(s, c); /* repl/ds_config.c */
    if (strcmp(c->args[0], "session")) return rs_cmd_export_onnx(s, c);
    if (c->nargs < 3)
        return rs_session_error(s, c, (size_t)-1, 0, "export session: give the session number and a file: export "
                                                     "session N FILE.ring");
    char *end;
    long long id = strtoll(c->args[1], &end, 10);
    if (*end || id < 1)
        return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]),
                                "export session: '%s' is not a session number (`sql \"select id from sessions\"`)",
                                c->args[1]);
    if (!s->log) return no_log(s, c);
    int n = 0;
    rs_err err = {0};
    rs_slog_flush(s->log);
    if (rs_slog_export_session(s->log, atoll(c->args[1]), c->args[2], &n, &err)) {
        int a = strstr(err.msg, c->args[2]) ? 2 : 1; /* point at the file when the file is what failed */
        return rs_session_error(s, c, c->arg_pos[a], strlen(c->args[a]), "export: %s", err.msg);
    }
    rs_log_artifact(s, c->args[2], "script");
    fprintf(s->out, "wrote %d commands of session %s to %s\n", n, c->args[1], c->args[2]);
    return 0;
}
