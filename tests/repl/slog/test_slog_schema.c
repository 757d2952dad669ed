/* Session log: opening. A new file gets the v1 schema (user_version, application_id, WAL, every table);
 * opening again migrates nothing; a newer schema, a file that is not a database and somebody else's
 * SQLite file are refused with the path in the message; the default path follows XDG. */
#include "slog_util.h"

#include <sys/stat.h>

#include "repl/slog/slog.h"
#include "tests/rs_test.h"

static void test_new_file(const char *dir)
{
    /* Missing folders are created, privately. */
    const char *db = slog_path(dir, "a/b/c/sessions.db");
    rs_err err = {0};
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, "ringside --db x", &log, &err) == RS_OK, "open: %s", err.msg);
    RS_CHECK(log && rs_slog_session(log) == 1, "first session id %lld", (long long)rs_slog_session(log));
    RS_CHECK(log && strcmp(rs_slog_path(log), db) == 0, "path kept");
    struct stat sb;
    RS_CHECK(stat(slog_path(dir, "a/b/c"), &sb) == 0 && (sb.st_mode & 0777) == 0700, "new folder is 0700");

    RS_CHECK(q_int(db, "PRAGMA user_version") == RS_SLOG_SCHEMA_VERSION, "user_version");
    RS_CHECK(q_int(db, "PRAGMA application_id") == RS_SLOG_APPLICATION_ID, "application_id");
    RS_CHECK(strcmp(q_text(db, "PRAGMA journal_mode"), "wal") == 0, "journal_mode %s",
             q_text(db, "PRAGMA journal_mode"));
    static const char *const tables[] = {"sessions", "commands", "runs", "metrics", "events", "artifacts"};
    for (int i = 0; i < 6; i++) {
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '%s'", tables[i]);
        RS_CHECK(q_int(db, sql) == 1, "table %s", tables[i]);
    }
    RS_CHECK(q_int(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'metrics_run_name_step'") == 1,
             "metrics index on (run_id, name, step)");
    /* The column comments survive in the schema, for people reading it with sqlite3. */
    RS_CHECK(strstr(q_text(db, "SELECT sql FROM sqlite_schema WHERE name = 'sessions'"), "unix seconds"),
             "schema keeps its comments");
    RS_CHECK(q_int(db, "SELECT count(*) FROM sessions WHERE status = 'open' AND pid > 0 AND host <> ''"
                       " AND argv = 'ringside --db x' AND version <> '' AND cwd <> '' AND proc_start LIKE '%:%'") == 1,
             "session row: %s", q_text(db, "SELECT pid || ' ' || host || ' ' || proc_start FROM sessions"));
    RS_CHECK(q_int(db, "PRAGMA foreign_key_check") == 0, "foreign keys consistent");
    rs_slog_close(log);
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM sessions WHERE id = 1"), "closed") == 0, "closed on close");
    RS_CHECK(q_int(db, "SELECT ended_at >= started_at FROM sessions WHERE id = 1") == 1, "ended_at set");

    /* Again: nothing to migrate, a second session, the first untouched. */
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "reopen: %s", err.msg);
    RS_CHECK(rs_slog_session(log) == 2, "second session");
    RS_CHECK(q_int(db, "PRAGMA user_version") == RS_SLOG_SCHEMA_VERSION, "user_version after reopen");
    RS_CHECK(q_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'") == 6,
             "no tables added");
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM sessions WHERE id = 1"), "closed") == 0, "first still closed");

    /* A second handle in the same process does not take the first for a crashed one. */
    rs_slog *log2 = NULL;
    RS_CHECK(rs_slog_open(db, NULL, &log2, &err) == RS_OK, "second handle: %s", err.msg);
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM sessions WHERE id = 2"), "open") == 0,
             "the first handle's session stays open");
    rs_slog_close(log2);
    rs_slog_close(log);
    RS_CHECK(q_int(db, "SELECT count(*) FROM sessions WHERE status = 'closed'") == 3, "all three closed");
}

static void test_empty_file(const char *dir)
{
    /* An empty file (touch sessions.db) is a new database, not an error. */
    const char *db = slog_path(dir, "empty.db");
    FILE *f = fopen(db, "w");
    fclose(f);
    rs_err err = {0};
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "empty file: %s", err.msg);
    rs_slog_close(log);
    RS_CHECK(q_int(db, "PRAGMA user_version") == RS_SLOG_SCHEMA_VERSION, "migrated");
}

static void test_newer(const char *dir)
{
    const char *db = slog_path(dir, "newer.db");
    rs_err err = {0};
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "open: %s", err.msg);
    rs_slog_close(log);
    q_exec(db, "PRAGMA user_version = 99");
    rs_status st = rs_slog_open(db, NULL, &log, &err);
    RS_CHECK(st == RS_ERR_UNSUPPORTED && !log, "newer schema refused: %s", rs_status_name(st));
    RS_CHECK(strstr(err.msg, db) && strstr(err.msg, "newer") && strstr(err.msg, "v99"), "message: %s", err.msg);
    printf("newer schema: %s\n", err.msg);
    RS_CHECK(q_int(db, "PRAGMA user_version") == 99, "never downgraded");
    RS_CHECK(q_int(db, "SELECT count(*) FROM sessions") == 1, "no session added");
}

static void test_not_a_database(const char *dir)
{
    const char *db = slog_path(dir, "notes.txt");
    FILE *f = fopen(db, "w");
    fputs("these are my notes, not a database; there is more than a page of them? no, but enough.\n", f);
    for (int i = 0; i < 64; i++) fputs("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n", f);
    fclose(f);
    rs_err err = {0};
    rs_slog *log = NULL;
    rs_status st = rs_slog_open(db, NULL, &log, &err);
    RS_CHECK(st == RS_ERR_FORMAT && !log, "not a database refused: %s", rs_status_name(st));
    RS_CHECK(strstr(err.msg, db) && strstr(err.msg, "--db"), "message names the path and --db: %s", err.msg);
    printf("not a database: %s\n", err.msg);
    f = fopen(db, "r");
    char head[16] = "";
    RS_CHECK(f && fread(head, 1, 15, f) == 15 && strncmp(head, "these are my no", 15) == 0, "file untouched");
    if (f) fclose(f);

    /* A SQLite file of something else. */
    const char *other = slog_path(dir, "other.db");
    q_exec(other, "CREATE TABLE recipes (name TEXT)");
    st = rs_slog_open(other, NULL, &log, &err);
    RS_CHECK(st == RS_ERR_FORMAT && !log, "foreign SQLite file refused: %s", rs_status_name(st));
    RS_CHECK(strstr(err.msg, other) && strstr(err.msg, "not a ringside session log"), "message: %s", err.msg);
    RS_CHECK(q_int(other, "SELECT count(*) FROM sqlite_schema") == 1, "no tables added to it");

    /* A folder where the file should be. */
    st = rs_slog_open(dir, NULL, &log, &err);
    RS_CHECK(st != RS_OK && !log && strstr(err.msg, dir), "a folder is refused: %s", err.msg);
}

static void test_default_path(const char *dir)
{
    char buf[1024];
    rs_err err = {0};
    setenv("XDG_DATA_HOME", slog_path(dir, "xdg"), 1);
    RS_CHECK(rs_slog_default_path(buf, sizeof buf, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(strcmp(buf, slog_path(dir, "xdg/ringside/sessions.db")) == 0, "XDG_DATA_HOME: %s", buf);
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(NULL, NULL, &log, &err) == RS_OK, "open default: %s", err.msg);
    rs_slog_close(log);
    RS_CHECK(access(slog_path(dir, "xdg/ringside/sessions.db"), F_OK) == 0, "created under XDG_DATA_HOME");

    setenv("XDG_DATA_HOME", "relative/dir", 1); /* invalid per the XDG spec: ignored */
    setenv("HOME", slog_path(dir, "home"), 1);
    RS_CHECK(rs_slog_default_path(buf, sizeof buf, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(strcmp(buf, slog_path(dir, "home/.local/share/ringside/sessions.db")) == 0, "HOME: %s", buf);
    unsetenv("XDG_DATA_HOME");
    unsetenv("HOME");
    RS_CHECK(rs_slog_default_path(buf, sizeof buf, &err) == RS_ERR_ARG && strstr(err.msg, "--db"), "no HOME: %s",
             err.msg);
}

static void test_null_log(void)
{
    /* A REPL without a log calls the same writers. */
    rs_slog_close(NULL);
    RS_CHECK(rs_slog_command_begin(NULL, "x", "tty") == 0, "command on NULL");
    rs_slog_command_end(NULL, 1, "ok", NULL);
    RS_CHECK(rs_slog_run_begin(NULL, 1, NULL) == 0, "run on NULL");
    rs_slog_metric(NULL, 1, 0, 0, 0, "loss", 1.0);
    rs_slog_event_info ev = RS_SLOG_EVENT_INIT;
    ev.kind = "phase";
    rs_slog_event(NULL, 1, &ev);
    rs_slog_run_end(NULL, 1, "done", 1, NULL, NULL);
    rs_slog_flush(NULL);
    RS_CHECK(rs_slog_last_error(NULL) == NULL, "no error on NULL");
    RS_CHECK(rs_slog_session(NULL) == 0 && rs_slog_path(NULL) == NULL, "accessors on NULL");
}

int main(void)
{
    const char *dir = slog_tmpdir();
    test_new_file(dir);
    test_empty_file(dir);
    test_newer(dir);
    test_not_a_database(dir);
    test_default_path(dir);
    test_null_log();
    return rs_test_finish("slog-schema");
}
