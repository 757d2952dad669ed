/* Session log: reading. runs, show run, compare, history, sessions, the commands of a session for
 * replay, export to a script, and `sql` (reads run, writes refused before anything runs). The tables
 * are printed too, so a failing test shows what a person would have seen. */
#include "slog_util.h"

#include <stdbool.h>

#include "repl/slog/slog.h"
#include "tests/rs_test.h"

typedef struct fixture {
    rs_slog *log;
    const char *db;
    int64_t run1, run2, session;
} fixture;

static int64_t cmd(rs_slog *log, const char *text, const char *status, const char *source)
{
    int64_t c = rs_slog_command_begin(log, text, source ? source : "tty");
    if (status) rs_slog_command_end(log, c, status, strcmp(status, "error") == 0 ? "something was wrong" : NULL);
    return c;
}

/* A session as a person would leave it: bindings, a typo, two trainings, a played script, a replay. */
static void build(fixture *fx, const char *dir)
{
    fx->db = slog_path(dir, "query.db");
    rs_err err = {0};
    if (rs_slog_open(fx->db, "ringside", &fx->log, &err)) {
        fprintf(stderr, "open: %s\n", err.msg);
        exit(1);
    }
    rs_slog *log = fx->log;
    fx->session = rs_slog_session(log);
    cmd(log, "model m = mlp 784-256-10 act=relu", "ok", NULL);
    cmd(log, "data d = digits n=20000 seed=1", "ok", NULL);
    cmd(log, "trian m on d", "error", NULL);
    int64_t c = cmd(log, "train m on d epochs=2 lr=0.05", NULL, NULL);
    rs_slog_run_info info = {.kind = "train",
                             .model = "m",
                             .model_spec = "mlp 784-256-10 act=relu",
                             .dataset = "d",
                             .options_json =
                                 "{\"epochs\":2,\"batch\":64,\"lr\":0.05,\"opt\":{\"name\":\"adam\",\"beta1\":0.9}}"};
    fx->run1 = rs_slog_run_begin(log, c, &info);
    for (int s = 0; s < 10; s++) {
        rs_slog_metric(log, fx->run1, 0, s, s / 5, "loss", 2.0 - 0.1 * s);
        rs_slog_metric(log, fx->run1, 0, s, s / 5, "acc", 0.5 + 0.04 * s);
    }
    rs_slog_event_info ev = RS_SLOG_EVENT_INIT;
    ev.kind = "memory";
    ev.name = "params";
    ev.bytes = 813000;
    rs_slog_event(log, fx->run1, &ev);
    rs_slog_run_end(log, fx->run1, "done", 10, "{\"test_acc\":0.9712,\"loss\":0.084,\"note\":\"fine\"}", NULL);
    rs_slog_command_end(log, c, "ok", NULL);
    c = cmd(log, "train m on d epochs=3 lr=0.1 mode=ddp ranks=4", NULL, NULL);
    info.options_json = "{\"epochs\":3,\"batch\":64,\"lr\":0.1,\"opt\":{\"name\":\"adam\",\"beta1\":0.9},\"ranks\":4}";
    info.mode = "ddp";
    info.backend = "shm";
    info.world_size = 4;
    fx->run2 = rs_slog_run_begin(log, c, &info);
    rs_slog_metric(log, fx->run2, 0, 0, 0, "loss", 1.0);
    rs_slog_run_end(log, fx->run2, "done", 15, "{\"test_acc\":0.9801,\"loss\":0.07}", NULL);
    rs_slog_command_end(log, c, "ok", NULL);
    cmd(log, "play tutorials/00-tour.ring", "ok", NULL);
    cmd(log, "say \"hello\"", "ok", "script:tutorials/00-tour.ring:1");
    cmd(log, "show m", "ok", "script:tutorials/00-tour.ring:2");
    cmd(log, "collective all_reduce ranks=4 algo=ring count=8 step=1 view=on", "ok", NULL);
    cmd(log, "train m on d epochs=50", "cancelled", NULL);
    cmd(log, "replay 1", "ok", NULL);
    cmd(log, "runs", "ok", "replay:1");
    cmd(log, "export m m.onnx", "ok", NULL);
    cmd(log, "export session 1 s.ring", NULL, NULL); /* the one running now */
}

static void test_runs(fixture *fx)
{
    rs_table *t = NULL;
    rs_err err = {0};
    RS_CHECK(rs_slog_runs(fx->log, 0, &t, &err) == RS_OK, "runs: %s", err.msg);
    rs_table_print(stdout, t, 100, 0);
    RS_CHECK(rs_table_nrows(t) == 2 && rs_table_ncols(t) == 10, "2 runs x 10 columns");
    /* the test accuracy has a column of its own (the result column showed steps= and epochs=) */
    RS_CHECK(strcmp(rs_table_name(t, 7), "acc") == 0, "acc column: %s", rs_table_name(t, 7));
    RS_CHECK(strcmp(rs_table_cell(t, 0, 7), "0.9712") == 0, "test accuracy: %s", rs_table_cell(t, 0, 7));
    RS_CHECK(strcmp(rs_table_cell(t, 1, 4), "ddp x4") == 0, "mode: %s", rs_table_cell(t, 1, 4));
    RS_CHECK(strcmp(rs_table_cell(t, 1, 6), "15") == 0 && strcmp(rs_table_cell(t, 1, 5), "done") == 0, "steps, status");
    rs_table_free(t);
    RS_CHECK(rs_slog_runs(fx->log, 1, &t, &err) == RS_OK && rs_table_nrows(t) == 1 &&
                 atoll(rs_table_cell(t, 0, 0)) == fx->run2,
             "limit 1 gives the newest");
    rs_table_free(t);
}

/* At 80 columns the table fits and kind, status and time stay whole (they came out as `collecti…`):
 * long model and data names give way instead. */
static void test_runs_80(const char *dir)
{
    char db[512];
    snprintf(db, sizeof db, "%s/narrow.db", dir);
    rs_slog *log = NULL;
    rs_err err = {0};
    RS_CHECK(rs_slog_open(db, "ringside", &log, &err) == RS_OK, "open: %s", err.msg);
    if (!log) return;
    rs_slog_session(log);
    int64_t c = cmd(log, "collective all_reduce ranks=4", NULL, NULL);
    rs_slog_run_info ci = {.kind = "collective", .mode = "collective", .backend = "shm", .world_size = 4};
    rs_slog_run_end(log, rs_slog_run_begin(log, c, &ci), "done", 1, "{\"seconds\":0.0012}", NULL);
    rs_slog_run_info ti = {.kind = "train", .model = "a_rather_long_model_name", .dataset = "fashion_mnist_train",
                           .mode = "fsdp", .backend = "shm", .world_size = 16};
    rs_slog_run_end(log, rs_slog_run_begin(log, c, &ti), "interrupted", 123456, "{\"test_acc\":0.8125}", NULL);
    rs_slog_run_end(log, rs_slog_run_begin(log, c, &ti), "cancelled", 99, NULL, NULL);
    rs_table *t = NULL;
    RS_CHECK(rs_slog_runs(log, 0, &t, &err) == RS_OK, "runs: %s", err.msg);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    rs_table_print(f, t, 80, 0);
    fclose(f);
    fputs(text, stdout);
    int widest = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p), w = 0;
        for (size_t i = 0; i < n; i++) w += ((unsigned char)p[i] & 0xC0) != 0x80; /* characters, not bytes */
        if ((int)w > widest) widest = (int)w;
        p += n + (nl != NULL);
    }
    RS_CHECK(widest <= 80, "the runs table fits 80 columns (widest line %d)", widest);
    RS_CHECK(strstr(text, "collective ") && strstr(text, "interrupted") && strstr(text, "cancelled"),
             "kind and status whole at 80 columns");
    RS_CHECK(!strcmp(rs_table_cell(t, 0, 4), "shm x4"), "a collective's mode shows its backend and ranks, not "
             "`collective x4` again: %s", rs_table_cell(t, 0, 4));
    RS_CHECK(strstr(text, "0.8125") != NULL && strstr(text, "123456") != NULL, "accuracy and steps whole");
    RS_CHECK(strstr(text, "\xe2\x80\xa6") != NULL, "the long names are the ones cut");
    for (size_t r = 0; r < rs_table_nrows(t); r++)
        RS_CHECK(strstr(text, rs_table_cell(t, r, 8)) != NULL, "time '%s' whole", rs_table_cell(t, r, 8));
    free(text);
    rs_table_free(t);
    rs_slog_close(log);
}

static char *show(fixture *fx, int64_t run, rs_status *st, rs_err *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    *st = rs_slog_show_run(fx->log, run, f, 100, err);
    fclose(f);
    return text;
}

static void test_show_run(fixture *fx)
{
    rs_err err = {0};
    rs_status st;
    char *text = show(fx, fx->run1, &st, &err);
    RS_CHECK(st == RS_OK, "show run: %s", err.msg);
    fputs(text, stdout);
    static const char *const want[] = {"run 1\n",
                                       "train m on d epochs=2 lr=0.05",
                                       "m = mlp 784-256-10 act=relu",
                                       "\noptions\n",
                                       "opt.name",
                                       "adam",
                                       "opt.beta1",
                                       "\nfinal\n",
                                       "test_acc",
                                       "0.9712",
                                       "\nmetrics\n",
                                       "events",
                                       "memory",
                                       "813000"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        RS_CHECK(strstr(text, want[i]) != NULL, "show run has '%s'", want[i]);
    /* metric  rows  ranks  steps  first  last  min  max: loss goes 2.0 -> 1.1 */
    const char *loss = strstr(text, "\nloss ");
    RS_CHECK(loss && strstr(loss, "10") && strstr(loss, "0..9") && strstr(loss, "2") && strstr(loss, "1.1"),
             "loss summary: %.80s", loss ? loss : "(missing)");
    free(text);
    text = show(fx, 999, &st, &err);
    RS_CHECK(st == RS_ERR_ARG && strstr(err.msg, "no run 999"), "unknown run: %s", err.msg);
    free(text);
}

static const char *cmp_cell(const rs_table *t, const char *field, int col)
{
    long r = rs_table_find(t, field);
    return r < 0 ? "(no row)" : rs_table_cell(t, (size_t)r, col);
}

static void test_compare(fixture *fx)
{
    rs_table *t = NULL;
    rs_err err = {0};
    RS_CHECK(rs_slog_compare(fx->log, fx->run1, fx->run2, &t, &err) == RS_OK, "compare: %s", err.msg);
    rs_table_print(stdout, t, 100, 0);
    RS_CHECK(strcmp(rs_table_name(t, 1), "run 1") == 0 && strcmp(rs_table_name(t, 2), "run 2") == 0, "headers");
    RS_CHECK(strcmp(cmp_cell(t, "kind", 3), "") == 0, "same kind: no mark");
    RS_CHECK(strcmp(cmp_cell(t, "mode", 3), "*") == 0, "mode differs: %s", cmp_cell(t, "mode", 3));
    RS_CHECK(strcmp(cmp_cell(t, "ranks", 3), "+3") == 0, "ranks: %s", cmp_cell(t, "ranks", 3));
    RS_CHECK(strcmp(cmp_cell(t, "  lr", 3), "+0.05") == 0, "lr: %s", cmp_cell(t, "  lr", 3));
    RS_CHECK(strcmp(cmp_cell(t, "  epochs", 3), "+1") == 0, "epochs: %s", cmp_cell(t, "  epochs", 3));
    RS_CHECK(strcmp(cmp_cell(t, "  batch", 3), "") == 0, "batch same");
    RS_CHECK(strcmp(cmp_cell(t, "  opt.name", 1), "adam") == 0, "nested option flattened");
    RS_CHECK(strcmp(cmp_cell(t, "  ranks", 1), "") == 0 && strcmp(cmp_cell(t, "  ranks", 3), "*") == 0,
             "option only in run 2");
    RS_CHECK(strcmp(cmp_cell(t, "  test_acc", 3), "+0.0089") == 0, "final test_acc: %s", cmp_cell(t, "  test_acc", 3));
    RS_CHECK(rs_table_find(t, "final") > rs_table_find(t, "options"), "sections in order");
    rs_table_free(t);
    RS_CHECK(rs_slog_compare(fx->log, fx->run1, 77, &t, &err) == RS_ERR_ARG && !t && strstr(err.msg, "77"),
             "unknown run: %s", err.msg);
}

static void test_history(fixture *fx)
{
    rs_table *t = NULL;
    rs_err err = {0};
    RS_CHECK(rs_slog_history(fx->log, 5, &t, &err) == RS_OK, "history: %s", err.msg);
    rs_table_print(stdout, t, 100, 0);
    RS_CHECK(rs_table_nrows(t) == 5, "5 rows");
    RS_CHECK(strcmp(rs_table_cell(t, 4, 4), "export session 1 s.ring") == 0, "newest last: %s", rs_table_cell(t, 4, 4));
    RS_CHECK(strcmp(rs_table_cell(t, 0, 3), "cancelled") == 0, "status column");
    rs_table_free(t);
    RS_CHECK(rs_slog_sessions(fx->log, 0, &t, &err) == RS_OK && rs_table_nrows(t) == 1, "sessions: %s", err.msg);
    rs_table_print(stdout, t, 100, 0);
    RS_CHECK(strcmp(rs_table_cell(t, 0, 5), "14") == 0 && strcmp(rs_table_cell(t, 0, 6), "2") == 0,
             "14 commands, 2 runs: %s %s", rs_table_cell(t, 0, 5), rs_table_cell(t, 0, 6));
    rs_table_free(t);
}

static int collect(void *ud, int64_t seq, const char *text, const char *source, const char *status)
{
    (void)seq, (void)source, (void)status;
    char *buf = ud;
    strcat(buf, text);
    strcat(buf, "\n");
    return 0;
}

static const char *expected_script = "model m = mlp 784-256-10 act=relu\n"
                                     "data d = digits n=20000 seed=1\n"
                                     "train m on d epochs=2 lr=0.05\n"
                                     "train m on d epochs=3 lr=0.1 mode=ddp ranks=4\n"
                                     "say \"hello\"\n"
                                     "show m\n"
                                     "collective all_reduce ranks=4 algo=ring count=8 step=1 view=on\n"
                                     "runs\n"
                                     "export m m.onnx\n";
/* What a script can run: step=1 waits for a key at the live view, so the exported line goes without it. */
static const char *expected_export = "model m = mlp 784-256-10 act=relu\n"
                                     "data d = digits n=20000 seed=1\n"
                                     "train m on d epochs=2 lr=0.05\n"
                                     "train m on d epochs=3 lr=0.1 mode=ddp ranks=4\n"
                                     "say \"hello\"\n"
                                     "show m\n"
                                     "collective all_reduce ranks=4 algo=ring count=8 view=on\n"
                                     "runs\n"
                                     "export m m.onnx\n";

static void test_replay_export(fixture *fx, const char *dir)
{
    char all[4096] = "", ok[4096] = "";
    rs_err err = {0};
    RS_CHECK(rs_slog_session_commands(fx->log, fx->session, 0, collect, all, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(rs_slog_session_commands(fx->log, fx->session, 1, collect, ok, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(strstr(all, "trian m on d\n") && strstr(all, "replay 1\n"), "all commands");
    RS_CHECK(strcmp(ok, expected_script) == 0, "replayable commands:\n%s", ok);
    RS_CHECK(rs_slog_session_commands(fx->log, 42, 1, collect, ok, &err) == RS_ERR_ARG && strstr(err.msg, "42"),
             "unknown session: %s", err.msg);

    const char *path = slog_path(dir, "s.ring");
    int n = 0;
    RS_CHECK(rs_slog_export_session(fx->log, fx->session, path, &n, &err) == RS_OK, "export: %s", err.msg);
    RS_CHECK(n == 9, "9 commands exported, not %d", n);
    FILE *f = fopen(path, "r");
    char line[1024], body[4096] = "", head[1024] = "";
    int step_notes = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == '#') {
            if (!head[0]) snprintf(head, sizeof head, "%s", line);
            if (strstr(line, "step=1 left out")) step_notes++;
        } else {
            strcat(body, line);
        }
    }
    if (f) fclose(f);
    RS_CHECK(strncmp(head, "# ringside session 1, started 20", 32) == 0, "header: %s", head);
    RS_CHECK(strcmp(body, expected_export) == 0, "script body:\n%s", body);
    RS_CHECK(step_notes == 1, "one comment says step=1 was left out, not %d", step_notes);
    RS_CHECK(rs_slog_export_session(fx->log, fx->session, slog_path(dir, "no/such/dir/s.ring"), &n, &err) ==
                     RS_ERR_IO &&
                 strstr(err.msg, "no/such/dir"),
             "unwritable path: %s", err.msg);
}

typedef struct rows {
    int headers, rows, last_stmt;
    char first[256];
} rows;

static int count_rows(void *ud, int stmt, int ncols, const char *const *names, const char *const *values)
{
    rows *r = ud;
    r->last_stmt = stmt;
    if (!values) {
        r->headers++;
        if (!r->first[0]) snprintf(r->first, sizeof r->first, "%s/%d", names[0], ncols);
    } else {
        r->rows++;
    }
    return 0;
}

static void test_sql(fixture *fx)
{
    rs_err err = {0};
    rows r = {0};
    RS_CHECK(rs_slog_sql(fx->log, "select count(*) as n from commands", count_rows, &r, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(r.headers == 1 && r.rows == 1 && strcmp(r.first, "n/1") == 0, "one header, one row: %s", r.first);

    r = (rows){0};
    RS_CHECK(rs_slog_sql(fx->log, "select 1 as a; -- two\n select 2 as b, 3 as c where 0;  ", count_rows, &r, &err) ==
                 RS_OK,
             "multi: %s", err.msg);
    RS_CHECK(r.headers == 2 && r.rows == 1 && r.last_stmt == 1, "two statements, the second empty but with a header");

    r = (rows){0};
    RS_CHECK(rs_slog_sql(fx->log, "pragma table_info(runs); pragma user_version", count_rows, &r, &err) == RS_OK,
             "read pragmas: %s", err.msg);

    static const char *const reads[] = {
        "select * from pragma_table_info('runs')",
        "explain query plan select * from metrics where run_id = 1 and name = 'loss' order by step",
        "with recursive n(i) as (select 1 union all select i + 1 from n where i < 10) select sum(i) from n",
        "select json_extract(options, '$.opt.name') from runs",
    };
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        r = (rows){0};
        RS_CHECK(rs_slog_sql(fx->log, reads[i], count_rows, &r, &err) == RS_OK && r.rows > 0, "'%s': %s", reads[i],
                 err.msg);
    }

    /* Ctrl-C stops a query that would run for ages. */
    volatile sig_atomic_t stop = 1;
    rs_slog_set_interrupt(fx->log, &stop);
    r = (rows){0};
    RS_CHECK(rs_slog_sql(fx->log,
                         "with recursive n(i) as (select 1 union all select i + 1 from n) select count(*) from n",
                         count_rows, &r, &err) == RS_ERR_CANCELLED,
             "interrupted: %s", err.msg);
    stop = 0;
    RS_CHECK(rs_slog_sql(fx->log, "select 1", count_rows, &r, &err) == RS_OK, "runs again once the flag is down");
    rs_slog_set_interrupt(fx->log, NULL);

    static const char *const refused[] = {
        "delete from runs",
        "select 1; delete from commands",
        "update runs set status = 'done'",
        "insert into sessions (started_at, pid, host, version) values (1, 1, 'h', 'v')",
        "drop table metrics",
        "create table t (x)",
        "begin",
        "pragma journal_mode = delete",
        "pragma foreign_keys = off",
        "attach 'other.db' as o",
        "vacuum",
        "pragma writable_schema = 1",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        r = (rows){0};
        err.msg[0] = '\0';
        rs_status st = rs_slog_sql(fx->log, refused[i], count_rows, &r, &err);
        RS_CHECK(st == RS_ERR_ARG && strstr(err.msg, "only reads") && strstr(err.msg, "sqlite3 ") &&
                     strstr(err.msg, fx->db),
                 "'%s' refused: %s", refused[i], err.msg);
        RS_CHECK(r.headers == 0 && r.rows == 0, "'%s': nothing ran", refused[i]);
    }
    printf("refused: %s\n", err.msg);
    RS_CHECK(rs_slog_sql(fx->log, "update sqlite_master set sql = '' where 0", count_rows, &r, &err) != RS_OK,
             "the schema table cannot be written either");
    RS_CHECK(q_int(fx->db, "SELECT count(*) FROM runs") == 2 && q_int(fx->db, "SELECT count(*) FROM commands") == 14,
             "nothing changed");
    RS_CHECK(strcmp(q_text(fx->db, "PRAGMA journal_mode"), "wal") == 0, "still WAL");
    RS_CHECK(rs_slog_sql(fx->log, "selec 1", count_rows, &r, &err) == RS_ERR_ARG && strstr(err.msg, "syntax error"),
             "syntax error: %s", err.msg);
    RS_CHECK(rs_slog_sql(fx->log, "  ; -- nothing", count_rows, &r, &err) == RS_ERR_ARG, "empty: %s", err.msg);
    /* The log still writes afterwards (the guard is gone). */
    int64_t c = rs_slog_command_begin(fx->log, "sql \"select 1\"", "tty");
    RS_CHECK(c > 0 && rs_slog_last_error(fx->log) == NULL, "writes work after sql: %s", rs_slog_last_error(fx->log));
    rs_slog_command_end(fx->log, c, "ok", NULL);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    RS_CHECK(rs_slog_sql_print(fx->log,
                               "select id, kind, steps, mode from runs order by id; select * from runs where 0;"
                               " select name, value from metrics where run_id = 1 order by id",
                               f, 80, 3, &err) == RS_OK,
             "sql_print: %s", err.msg);
    fclose(f);
    fputs(text, stdout);
    RS_CHECK(
        strstr(text,
               "id  kind   steps  mode\n--  -----  -----  ------\n 1  train     10  single\n 2  train     15  ddp\n") !=
            NULL,
        "aligned, numbers right");
    RS_CHECK(strstr(text, "(no rows)\n") != NULL, "empty result says so");
    RS_CHECK(strstr(text, "(17 more rows not shown") != NULL, "row limit noted");
    free(text);
}

int main(void)
{
    const char *dir = slog_tmpdir();
    fixture fx = {0};
    build(&fx, dir);
    test_runs(&fx);
    test_runs_80(dir);
    test_show_run(&fx);
    test_compare(&fx);
    test_history(&fx);
    test_replay_export(&fx, dir);
    test_sql(&fx);
    rs_slog_close(fx.log);
    return rs_test_finish("slog-query");
}
