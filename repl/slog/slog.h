/* The session log: every command, run, metric, rank event and artifact of a ringside session, kept in
 * an ordinary SQLite file (WAL) that anyone can open with `sqlite3`. The REPL process is the one
 * writer; a kill -9 loses at most the buffered metrics/events of the last half second, never a command.
 *
 * Times are REAL unix seconds from the wall clock (CLOCK_REALTIME), so `datetime(t, 'unixepoch')`
 * works in any query. The schema, with a comment on every column, is in slog_schema.c and shows up in
 * `sqlite3 sessions.db .schema`.
 *
 * Errors: rs_slog_open and the readers return an rs_status and fill an rs_err. The writers never fail
 * the caller: a write that does not succeed (disk full, file removed) is recorded in a last-error
 * string (rs_slog_last_error) and the session goes on; the REPL warns once. Every writer is a no-op on
 * a NULL log, and ids returned as 0 mean "not logged" (later writers given id 0 skip quietly).
 *
 * Threads and processes: use one rs_slog from one thread at a time, and never across fork(). Other
 * ringside processes may use the same file at the same time (busy timeout, short transactions). */
#ifndef RS_SLOG_H
#define RS_SLOG_H

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/core/status.h"
#include "repl/slog/table.h"

typedef struct rs_slog rs_slog;

/* The schema version this build writes (PRAGMA user_version). A file with a higher version is refused;
 * a lower one is migrated on open. */
#define RS_SLOG_SCHEMA_VERSION 1
/* PRAGMA application_id of a ringside session log ("RSLG"): tells it from other SQLite files. */
#define RS_SLOG_APPLICATION_ID 0x52534C47

/* ---- open / close ------------------------------------------------------------------------------ */

/* Where the log lives when --db is not given: $XDG_DATA_HOME/ringside/sessions.db when XDG_DATA_HOME
 * is an absolute path, else ~/.local/share/ringside/sessions.db. */
rs_status rs_slog_default_path(char *buf, size_t size, rs_err *err);

/* Opens (creating file and missing directories) the log at path, or the default path when NULL;
 * migrates the schema; marks what dead ringside processes left running as interrupted (their runs
 * `interrupted`, their commands `interrupted`, their sessions `crashed`); and starts this process's
 * session, recording argv_text (may be NULL). A process counts as dead when it is on this host and
 * its pid is gone, a zombie, reused by another process, or is this very process from before an
 * exec(). Sessions of other hosts are left alone. The caller owns *out (rs_slog_close). */
rs_status rs_slog_open(const char *path, const char *argv_text, rs_slog **out, rs_err *err);

/* Flushes, marks anything still running in this session as interrupted, closes the session as
 * `closed`, and frees. NULL is a no-op. */
void rs_slog_close(rs_slog *log);

const char *rs_slog_path(const rs_slog *log); /* the file, as opened */
int64_t rs_slog_session(const rs_slog *log);  /* this process's session id (0 for NULL) */

/* The first write failure since the last clear, as "session log PATH: what failed: why", or NULL. */
const char *rs_slog_last_error(const rs_slog *log);
void rs_slog_clear_error(rs_slog *log);
/* Buffered metric/event rows that could not be written since open (a warning can say how many). */
uint64_t rs_slog_lost_rows(const rs_slog *log);

/* ---- writers ----------------------------------------------------------------------------------- */

/* A command as typed. source: "tty", "-c", "script:FILE:LINE" or "replay:SESSION". Written at once.
 * Returns the command id, 0 when it could not be logged. */
int64_t rs_slog_command_begin(rs_slog *log, const char *text, const char *source);
/* status: "ok", "error" or "cancelled"; error: the message shown to the user, or NULL. */
void rs_slog_command_end(rs_slog *log, int64_t cmd, const char *status, const char *error);

typedef struct rs_slog_run_info {
    const char *kind;         /* "train", "eval", "collective", "bench", ... (NULL = "run") */
    const char *model;        /* binding name ("m"), NULL if none */
    const char *model_spec;   /* what the model was built from ("mlp 784-256-10 act=relu") */
    const char *dataset;      /* binding name or source ("d", "digits n=20000") */
    const char *options_json; /* every option of the run, defaults included, as a JSON object; text
                               * that is not JSON is stored as a JSON string rather than lost */
    const char *mode;         /* "single", "dp", "ddp", "fsdp", ... (NULL = "single") */
    const char *backend;      /* "cpu", "shm", "tcp", "mpi", "nccl" (NULL = none) */
    int world_size;           /* ranks; <= 0 is stored as 1 */
} rs_slog_run_info;

/* Starts a run of command cmd (0 = none) with status `running`; written at once. Returns its id. */
int64_t rs_slog_run_begin(rs_slog *log, int64_t cmd, const rs_slog_run_info *info);
/* Flushes the run's buffered rows, then records how it ended. status: "done", "failed",
 * "cancelled" (Ctrl-C) or "interrupted"; steps: steps completed; final_json: the final figures as
 * a JSON object ({"test_acc":0.97,"loss":0.08}), or NULL; error: NULL unless it failed. */
void rs_slog_run_end(rs_slog *log, int64_t run, const char *status, int64_t steps, const char *final_json,
                     const char *error);

/* One figure of a run at a step ("loss", "acc", "lr", "step_ms"...), time-stamped now. Buffered: rows
 * are written in one transaction when 512 are waiting or 0.5 s have passed since the last write (checked
 * on each call), and at rs_slog_flush, rs_slog_run_end and rs_slog_close. A NaN value is stored as NULL
 * (SQLite has no NaN). The call itself only copies the row: it does not touch the disk. */
void rs_slog_metric(rs_slog *log, int64_t run, int rank, int64_t step, int epoch, const char *name, double value);

/* An event a rank reported, buffered like metrics. Start from RS_SLOG_EVENT_INIT so that fields you do
 * not set are stored as NULL:
 *   phase      name = "forward"/"backward"/"optimizer"...; value = seconds it took
 *   coll_begin name = op ("allreduce"); coll = per-run collective number (the same on every rank);
 *              algo = "ring"/"tree"/...; bytes = payload
 *   coll_step  one algorithm step of a built-in backend: astep = k, chunk = c, peer = rank sent to,
 *              bytes = chunk bytes, coll/name/algo as in coll_begin ("ring step k: r sends c to peer")
 *   coll_end   as coll_begin; value = seconds
 *   memory     name = pool ("params", "grads", "optim", "activations"); bytes = in use; value = peak
 *   log        name = level; detail = {"text": "..."}
 *   micro      a pipeline micro-batch's work: name = "forward"/"backward"; chunk = micro-batch;
 *              value = seconds; detail = {"stage": virtual stage}
 *   stage      pipeline: the rank runs a stage: chunk = stage; detail = {"stages":S,"first":a,"last":b}
 *              (its layers a..b)
 * New kinds need no migration: kind is free text, and anything else goes in detail (a JSON object). */
typedef struct rs_slog_event_info {
    int rank;
    double t;                /* unix seconds (convert a rank's monotonic stamp); 0 = now */
    const char *kind;        /* required */
    const char *name;        /* phase, collective op, memory pool, log level */
    int64_t step;            /* training step; -1 = none */
    int64_t coll;            /* collective number within the run; -1 = none */
    int64_t astep;           /* algorithm step within the collective; -1 = none */
    const char *algo;        /* NULL = none */
    int peer;                /* the other rank; -1 = none */
    int64_t chunk;           /* chunk index; -1 = none */
    int64_t bytes;           /* -1 = none */
    double value;            /* NAN = none */
    const char *detail_json; /* a JSON object, NULL = none */
} rs_slog_event_info;

#define RS_SLOG_EVENT_INIT                                                                                             \
    ((rs_slog_event_info){.step = -1, .coll = -1, .astep = -1, .peer = -1, .chunk = -1, .bytes = -1, .value = NAN})

void rs_slog_event(rs_slog *log, int64_t run, const rs_slog_event_info *ev);

/* Records a file that command cmd (and run, 0 = none) produced: its absolute path, kind ("checkpoint",
 * "onnx", "plan", "script", ...), size and SHA-256. Returns its id, or 0 with err set (a file that cannot
 * be read, or a failed write, which also sets the last error). */
int64_t rs_slog_artifact(rs_slog *log, int64_t cmd, int64_t run, const char *path, const char *kind, rs_err *err);

/* Writes the buffered metrics and events now. */
void rs_slog_flush(rs_slog *log);

/* SHA-256 of a file as 64 lowercase hex digits (OpenSSL EVP), and its size in bytes. */
rs_status rs_slog_sha256_file(const char *path, char hex[65], int64_t *bytes, rs_err *err);

/* ---- readers ----------------------------------------------------------------------------------- */
/* The table-returning readers hand the caller an rs_table to print with rs_table_print and free with
 * rs_table_free. They flush first, so they see this process's latest rows. */

/* `runs`: the last `limit` runs (<= 0: 20), oldest first, of every session:
 *   id kind model data mode status steps result time started */
rs_status rs_slog_runs(rs_slog *log, int limit, rs_table **out, rs_err *err);

/* `show run N`: everything about run N (what ran, options, status, final figures, per metric
 * count/first/last/min/max, events by kind, artifacts) printed to f, tables no wider than max_width
 * (<= 0: no limit). RS_ERR_ARG when there is no run N. */
rs_status rs_slog_show_run(rs_slog *log, int64_t run, FILE *f, int max_width, rs_err *err);

/* `compare N M`: one row per field (what ran, options flattened as a.b, final figures as final.x),
 * columns: field, run N, run M, diff. diff is M - N for two numbers, '*' for other differences,
 * empty when equal. */
rs_status rs_slog_compare(rs_slog *log, int64_t a, int64_t b, rs_table **out, rs_err *err);

/* `history [N]`: the last `limit` commands (<= 0: 20) of this and past sessions, oldest first:
 *   session seq when status command */
rs_status rs_slog_history(rs_slog *log, int limit, rs_table **out, rs_err *err);

/* The last `limit` sessions (<= 0: 20), oldest first: id started host status commands runs argv. */
rs_status rs_slog_sessions(rs_slog *log, int limit, rs_table **out, rs_err *err);

/* The commands of a session in order, for `replay SESSION`. With replayable_only, only what a script of
 * the session should hold: commands that ended `ok`, without replay/export session/play/quit/exit (a
 * played script's own lines are logged one by one, so they are kept and `play` is not). fn returns
 * nonzero to stop early. RS_ERR_ARG when there is no such session. */
typedef int (*rs_slog_command_fn)(void *ud, int64_t seq, const char *text, const char *source, const char *status);
rs_status rs_slog_session_commands(rs_slog *log, int64_t session, int replayable_only, rs_slog_command_fn fn, void *ud,
                                   rs_err *err);

/* `export session N FILE.ring`: writes the replayable commands of session N as a script, one per line,
 * under a comment header with the session's date, host and argv. *ncommands (may be NULL) gets the
 * number written. */
rs_status rs_slog_export_session(rs_slog *log, int64_t session, const char *path, int *ncommands, rs_err *err);

/* `sql "..."`: runs every statement of sql, which must all be reads (SELECT, read-only PRAGMA queries,
 * EXPLAIN): the log is kept consistent by ringside, and a write, a transaction, ATTACH or a setting
 * change is refused before anything runs, with a hint to use `sqlite3 PATH`. For each statement that
 * returns columns, fn is called once with values == NULL (the header: names only, so an empty result
 * still has one), then once per row; a NULL value is SQL NULL. stmt is the statement's index in sql.
 * fn returns nonzero to stop. */
typedef int (*rs_slog_row_fn)(void *ud, int stmt, int ncols, const char *const *names, const char *const *values);
rs_status rs_slog_sql(rs_slog *log, const char *sql, rs_slog_row_fn fn, void *ud, rs_err *err);

/* rs_slog_sql for other programs (`sql ... format=csv|json`): each value's SQLite type too (types[c]:
 * SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB or SQLITE_NULL; NULL in the header call), and
 * a REAL as the fewest digits that read back to the same double (SQLite's own text keeps 15). */
typedef int (*rs_slog_typed_row_fn)(void *ud, int stmt, int ncols, const char *const *names,
                                    const char *const *values, const int *types);
rs_status rs_slog_sql_typed(rs_slog *log, const char *sql, rs_slog_typed_row_fn fn, void *ud, rs_err *err);

/* A flag (Ctrl-C's) that stops a long `sql` query: polled while SQLite works, the query then fails with
 * RS_ERR_CANCELLED. NULL: none. The flag is borrowed and must outlive the log or be unset. */
void rs_slog_set_interrupt(rs_slog *log, volatile sig_atomic_t *flag);

/* rs_slog_sql printed as one aligned table per statement (NULL shown empty), at most max_rows rows each
 * (<= 0: no limit; the rest are counted in a note), no wider than max_width (<= 0: no limit). */
rs_status rs_slog_sql_print(rs_slog *log, const char *sql, FILE *f, int max_width, int max_rows, rs_err *err);

#endif
