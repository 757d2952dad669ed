/* The session log's schema as a list of migrations keyed on PRAGMA user_version: step i takes a file
 * from version i to i+1. Append a step to change the schema; never edit a released one. The comments
 * inside CREATE TABLE are kept by SQLite, so `sqlite3 sessions.db .schema` documents every column. */
#include <stdio.h>

#include "repl/slog/slog_internal.h"

static const char *const migrations[] = {
    /* v0 -> v1 */
    "CREATE TABLE sessions (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  started_at REAL NOT NULL,     -- unix seconds (wall clock), as every time in this file\n"
    "  ended_at REAL,                -- NULL while open; last sign of life for a crashed session\n"
    "  pid INTEGER NOT NULL,         -- the ringside process\n"
    "  host TEXT NOT NULL,           -- gethostname(): liveness is only judged on the same host\n"
    "  proc_start TEXT,              -- boot id and start tick of pid: tells a reused pid apart\n"
    "  cwd TEXT,                     -- where relative paths of the commands were resolved\n"
    "  argv TEXT,\n"
    "  version TEXT NOT NULL,        -- ringside version\n"
    "  status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed', 'crashed'))\n"
    ");\n"
    "CREATE INDEX sessions_open ON sessions(status) WHERE status = 'open';\n"
    "\n"
    "CREATE TABLE commands (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL,         -- 1, 2, ... within the session\n"
    "  text TEXT NOT NULL,           -- the line as typed\n"
    "  source TEXT NOT NULL,         -- tty | -c | script:FILE:LINE | replay:SESSION\n"
    "  started_at REAL NOT NULL,\n"
    "  ended_at REAL,\n"
    "  status TEXT NOT NULL DEFAULT 'running'\n"
    "    CHECK (status IN ('running', 'ok', 'error', 'cancelled', 'interrupted')),\n"
    "  error TEXT,                   -- the message the user saw\n"
    "  UNIQUE (session_id, seq)\n"
    ");\n"
    "\n"
    "CREATE TABLE runs (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  command_id INTEGER REFERENCES commands(id) ON DELETE SET NULL,\n"
    "  kind TEXT NOT NULL,           -- train | eval | collective | bench | ...\n"
    "  model TEXT,                   -- binding name\n"
    "  model_spec TEXT,              -- what it was built from\n"
    "  dataset TEXT,\n"
    "  options TEXT CHECK (options IS NULL OR json_valid(options)),  -- JSON object, defaults included\n"
    "  mode TEXT,                    -- single | dp | ddp | fsdp | pipeline | tp ...\n"
    "  backend TEXT,                 -- cpu | shm | tcp | mpi | nccl ...\n"
    "  world_size INTEGER NOT NULL DEFAULT 1,\n"
    "  status TEXT NOT NULL DEFAULT 'running'\n"
    "    CHECK (status IN ('running', 'done', 'failed', 'cancelled', 'interrupted')),\n"
    "  started_at REAL NOT NULL,\n"
    "  ended_at REAL,\n"
    "  steps INTEGER,                -- steps completed\n"
    "  final TEXT CHECK (final IS NULL OR json_valid(final)),  -- final figures, JSON object\n"
    "  error TEXT\n"
    ");\n"
    "CREATE INDEX runs_session ON runs(session_id);\n"
    "CREATE INDEX runs_command ON runs(command_id);\n"
    "CREATE INDEX runs_running ON runs(session_id) WHERE status = 'running';\n"
    "\n"
    "CREATE TABLE metrics (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  rank INTEGER NOT NULL DEFAULT 0,\n"
    "  step INTEGER,\n"
    "  epoch INTEGER,\n"
    "  name TEXT NOT NULL,           -- loss | acc | lr | step_ms ...\n"
    "  value REAL,                   -- NULL for NaN\n"
    "  t REAL NOT NULL\n"
    ");\n"
    "CREATE INDEX metrics_run_name_step ON metrics(run_id, name, step);\n"
    "\n"
    "CREATE TABLE events (\n"
    "  -- What ranks report while a run goes: phases, collectives (begin, end and, in the built-in\n"
    "  -- backends, every algorithm step: ring step astep moves chunk to peer), memory per pool, logs.\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  rank INTEGER NOT NULL DEFAULT 0,\n"
    "  t REAL NOT NULL,\n"
    "  kind TEXT NOT NULL,           -- phase | coll_begin | coll_step | coll_end | memory | log ...\n"
    "  name TEXT,                    -- phase, collective op (allreduce), memory pool, log level\n"
    "  step INTEGER,                 -- training step\n"
    "  coll INTEGER,                 -- collective number in the run, equal on all ranks\n"
    "  astep INTEGER,                -- algorithm step within the collective\n"
    "  algo TEXT,                    -- ring | tree | recursive_doubling | ...\n"
    "  peer INTEGER,                 -- the rank sent to / received from\n"
    "  chunk INTEGER,\n"
    "  bytes INTEGER,\n"
    "  value REAL,                   -- seconds for phase/coll_end, peak bytes for memory\n"
    "  detail TEXT CHECK (detail IS NULL OR json_valid(detail))  -- anything else, JSON object\n"
    ");\n"
    "CREATE INDEX events_run_kind ON events(run_id, kind, rank, t);\n"
    "\n"
    "CREATE TABLE artifacts (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  command_id INTEGER REFERENCES commands(id) ON DELETE SET NULL,\n"
    "  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,\n"
    "  path TEXT NOT NULL,           -- absolute\n"
    "  kind TEXT,                    -- checkpoint | onnx | plan | script ...\n"
    "  sha256 TEXT NOT NULL CHECK (length(sha256) = 64),\n"
    "  bytes INTEGER NOT NULL,\n"
    "  created_at REAL NOT NULL\n"
    ");\n"
    "CREATE INDEX artifacts_run ON artifacts(run_id);\n"
    "CREATE INDEX artifacts_command ON artifacts(command_id);\n",
};

_Static_assert(sizeof migrations / sizeof migrations[0] == RS_SLOG_SCHEMA_VERSION, "one migration per schema version");

static int64_t pragma_int(sqlite3 *db, const char *sql, int *rc)
{
    sqlite3_stmt *st = NULL;
    int64_t v = 0;
    *rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (*rc == SQLITE_OK) {
        *rc = sqlite3_step(st);
        if (*rc == SQLITE_ROW) {
            v = sqlite3_column_int64(st, 0);
            *rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return v;
}

rs_status rs_slog__migrate(sqlite3 *db, const char *path, rs_err *err)
{
    /* IMMEDIATE takes the write lock first: two ringside processes starting on a new file at once wait
     * for each other (busy timeout) and the second then sees the first one's version. */
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return rs_err_set(err, RS_ERR_IO, "%s: cannot lock the session log: %s", path, sqlite3_errmsg(db));
    int rc;
    rs_status st = RS_OK;
    int64_t version = pragma_int(db, "PRAGMA user_version", &rc);
    int64_t app = rc == SQLITE_OK ? pragma_int(db, "PRAGMA application_id", &rc) : 0;
    int64_t tables = rc == SQLITE_OK ? pragma_int(db, "SELECT count(*) FROM sqlite_schema", &rc) : 0;
    if (rc != SQLITE_OK) {
        st = rs_err_set(err, RS_ERR_IO, "%s: %s", path, sqlite3_errmsg(db));
        goto out;
    }
    /* A SQLite file of something else: refuse rather than add tables to somebody's database. */
    if ((app != 0 && app != RS_SLOG_APPLICATION_ID) || (app == 0 && version == 0 && tables > 0)) {
        st = rs_err_set(err, RS_ERR_FORMAT,
                        "%s: a SQLite database, but not a ringside session log; give another file with --db", path);
        goto out;
    }
    if (version > RS_SLOG_SCHEMA_VERSION) {
        st = rs_err_set(err, RS_ERR_UNSUPPORTED,
                        "%s: written by a newer ringside (session log schema v%lld; this build knows up to v%d); "
                        "use that ringside, or give another file with --db",
                        path, (long long)version, RS_SLOG_SCHEMA_VERSION);
        goto out;
    }
    for (int64_t v = version; v < RS_SLOG_SCHEMA_VERSION; v++) {
        char *msg = NULL;
        if (sqlite3_exec(db, migrations[v], NULL, NULL, &msg) != SQLITE_OK) {
            st = rs_err_set(err, RS_ERR_IO, "%s: migrating the session log to v%lld: %s", path, (long long)v + 1,
                            msg ? msg : sqlite3_errmsg(db));
            sqlite3_free(msg);
            goto out;
        }
    }
    if (version < RS_SLOG_SCHEMA_VERSION) {
        char sql[96];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d; PRAGMA application_id = %d", RS_SLOG_SCHEMA_VERSION,
                 RS_SLOG_APPLICATION_ID);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
            st = rs_err_set(err, RS_ERR_IO, "%s: %s", path, sqlite3_errmsg(db));
            goto out;
        }
    }
out:
    if (st == RS_OK && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        st = rs_err_set(err, RS_ERR_IO, "%s: committing the schema: %s", path, sqlite3_errmsg(db));
    if (st != RS_OK) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}
