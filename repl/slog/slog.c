/* Opening and closing the session log: where the file lives, the connection settings (WAL, busy timeout,
 * foreign keys), the schema check, and crash recovery, which marks what a dead ringside process left
 * running as interrupted before this process starts its own session. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "repl/slog/slog_internal.h"

#ifndef RS_VERSION
#define RS_VERSION "dev"
#endif

/* Another ringside process may be writing a batch; a batch takes milliseconds, so a few seconds of
 * patience covers any real contention without hanging the prompt on a stuck lock forever. */
#define SLOG_BUSY_MS 5000

double rs_slog__wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double rs_slog__monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rs_slog__fail(rs_slog *log, const char *what, const char *why)
{
    if (!log || log->has_error) return; /* the first failure is the one worth reading */
    snprintf(log->error, sizeof log->error, "session log %s: %s: %s", log->path, what, why);
    log->has_error = true;
}

void rs_slog__fail_db(rs_slog *log, const char *what)
{
    if (log) rs_slog__fail(log, what, sqlite3_errmsg(log->db));
}

const char *rs_slog_last_error(const rs_slog *log)
{
    return log && log->has_error ? log->error : NULL;
}

void rs_slog_clear_error(rs_slog *log)
{
    if (!log) return;
    log->has_error = false;
    log->error[0] = '\0';
}

uint64_t rs_slog_lost_rows(const rs_slog *log)
{
    return log ? log->lost : 0;
}

const char *rs_slog_path(const rs_slog *log)
{
    return log ? log->path : NULL;
}
int64_t rs_slog_session(const rs_slog *log)
{
    return log ? log->session : 0;
}

/* ---- sessions open in this process image -------------------------------------------------------
 * A session row whose pid is our own pid is either one we opened (alive: a second handle in the same
 * process, as tests do) or one left by the program this process was before an exec() (dead). Only
 * this image's memory can tell them apart, so it keeps the list. */

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t *live_ids;
static size_t live_n, live_cap;

static bool live_add(int64_t id)
{
    pthread_mutex_lock(&live_mu);
    bool ok = true;
    if (live_n == live_cap) {
        size_t cap = live_cap ? 2 * live_cap : 8;
        int64_t *p = realloc(live_ids, cap * sizeof *p);
        if (p) {
            live_ids = p;
            live_cap = cap;
        } else {
            ok = false;
        }
    }
    if (ok) live_ids[live_n++] = id;
    pthread_mutex_unlock(&live_mu);
    return ok;
}

static void live_remove(int64_t id)
{
    pthread_mutex_lock(&live_mu);
    for (size_t i = 0; i < live_n; i++)
        if (live_ids[i] == id) {
            live_ids[i] = live_ids[--live_n];
            break;
        }
    if (live_n == 0) {
        free(live_ids);
        live_ids = NULL;
        live_cap = 0;
    }
    pthread_mutex_unlock(&live_mu);
}

static bool live_has(int64_t id)
{
    pthread_mutex_lock(&live_mu);
    bool found = false;
    for (size_t i = 0; i < live_n && !found; i++) found = live_ids[i] == id;
    pthread_mutex_unlock(&live_mu);
    return found;
}

/* ---- is the process of a session still there? -------------------------------------------------- */

/* "BOOT_ID:START_TICK" of a process, from /proc: a pid plus this pair names one process for good, even
 * after the pid is reused or the machine rebooted. *state gets the process state letter ('Z' zombie).
 * false when /proc cannot tell (not Linux, process gone). */
static bool proc_start(long pid, char *buf, size_t size, char *state)
{
    char boot[64] = "", stat[1024], path[64];
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = '\0';
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (!(f = fopen(path, "r"))) return false;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
     * Field 3 is the state, field 22 the start time in clock ticks since boot. */
    char *p = strrchr(stat, ')');
    if (!p) return false;
    p++;
    char *save = NULL, *tok = strtok_r(p, " ", &save);
    if (!tok) return false;
    if (state) *state = tok[0];
    for (int field = 4; field <= 22; field++)
        if (!(tok = strtok_r(NULL, " ", &save))) return false;
    snprintf(buf, size, "%s:%s", boot, tok);
    return true;
}

/* Whether session `id`, opened by pid on this host with proc_start `start` (may be NULL), may still be
 * running. In doubt (no /proc, no permission) the answer is yes: marking a live run interrupted would
 * be a lie in the log, while a dead one left `running` is fixed by the next start. */
static bool session_alive(int64_t id, long pid, const char *start)
{
    if (pid == (long)getpid()) return live_has(id);
    if (pid <= 0 || (kill((pid_t)pid, 0) == -1 && errno == ESRCH)) return false;
    char now[128], state = 0;
    if (!proc_start(pid, now, sizeof now, &state)) return true;
    if (state == 'Z' || state == 'X') return false;     /* killed, not yet reaped by its parent */
    if (start && strcmp(start, now) != 0) return false; /* the pid now belongs to another process */
    return true;
}

/* ---- opening ---------------------------------------------------------------------------------- */

rs_status rs_slog_default_path(char *buf, size_t size, rs_err *err)
{
    const char *xdg = getenv("XDG_DATA_HOME");
    int n;
    /* The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored. */
    if (xdg && xdg[0] == '/') {
        n = snprintf(buf, size, "%s/ringside/sessions.db", xdg);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home)
            return rs_err_set(err, RS_ERR_ARG, "no HOME or XDG_DATA_HOME to put the session log in; give --db PATH");
        n = snprintf(buf, size, "%s/.local/share/ringside/sessions.db", home);
    }
    if (n < 0 || (size_t)n >= size) return rs_err_set(err, RS_ERR_ARG, "session log path too long; give --db PATH");
    return RS_OK;
}

/* mkdir -p of the folder that will hold `path`. New folders are private (0700): the log holds every
 * command a person typed. */
static rs_status make_parent_dirs(const char *path, rs_err *err)
{
    char *dir = strdup(path);
    if (!dir) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    char *slash = strrchr(dir, '/');
    rs_status st = RS_OK;
    if (slash && slash != dir) {
        *slash = '\0';
        for (char *p = dir + 1;; p++) {
            bool end = *p == '\0';
            if (*p == '/' || end) {
                *p = '\0';
                if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
                    st = rs_err_set(err, RS_ERR_IO, "%s: cannot create folder %s: %s", path, dir, strerror(errno));
                    break;
                }
                if (end) break;
                *p = '/';
            }
        }
    }
    free(dir);
    return st;
}

/* An error from the connection, worded for the person who chose the file. */
static rs_status db_error(sqlite3 *db, const char *path, const char *what, rs_err *err)
{
    int code = sqlite3_errcode(db);
    if (code == SQLITE_NOTADB)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: not a SQLite database, so not a ringside session log; give another file with --db PATH",
                          path);
    if (code == SQLITE_BUSY)
        return rs_err_set(err, RS_ERR_TIMEOUT, "%s: %s: the file stayed locked by another process for %d s", path, what,
                          SLOG_BUSY_MS / 1000);
    return rs_err_set(err, RS_ERR_IO, "%s: %s: %s", path, what, sqlite3_errmsg(db));
}

/* One UPDATE of end_session: ?1 session id, ?2 the error text, ?3 the end time (NULL: the last thing
 * the session wrote), ?4 the session's new status. */
static bool end_update(sqlite3 *db, const char *sql, int64_t id, const char *why, double when, const char *status)
{
    sqlite3_stmt *st = NULL;
    bool ok = sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK;
    if (ok) {
        sqlite3_bind_int64(st, 1, id);
        if (sqlite3_bind_parameter_count(st) >= 2) sqlite3_bind_text(st, 2, why, -1, SQLITE_STATIC);
        if (when > 0 && sqlite3_bind_parameter_count(st) >= 3) sqlite3_bind_double(st, 3, when);
        if (sqlite3_bind_parameter_count(st) >= 4) sqlite3_bind_text(st, 4, status, -1, SQLITE_STATIC);
        ok = sqlite3_step(st) == SQLITE_DONE;
    }
    sqlite3_finalize(st);
    return ok;
}

/* Marks what session `id` left running as interrupted (error `why`) and the session itself as `status`,
 * ended at `when`, or when 0, at the last thing it wrote: the best guess of when a killed process died.
 * Inside the caller's transaction. */
static bool end_session(sqlite3 *db, int64_t id, const char *status, double when, const char *why)
{
    return end_update(db,
                      "UPDATE runs SET status = 'interrupted', error = coalesce(error, ?2),"
                      " ended_at = coalesce(?3, max(started_at,"
                      "   coalesce((SELECT max(t) FROM metrics WHERE run_id = runs.id), 0),"
                      "   coalesce((SELECT max(t) FROM events WHERE run_id = runs.id), 0)))"
                      " WHERE session_id = ?1 AND status = 'running'",
                      id, why, when, status) &&
           end_update(db,
                      "UPDATE commands SET status = 'interrupted', error = coalesce(error, ?2),"
                      " ended_at = coalesce(?3, max(started_at,"
                      "   coalesce((SELECT max(ended_at) FROM runs WHERE command_id = commands.id), 0)))"
                      " WHERE session_id = ?1 AND status = 'running'",
                      id, why, when, status) &&
           end_update(
               db,
               "UPDATE sessions SET status = ?4, ended_at = coalesce(?3, max(started_at,"
               "   coalesce((SELECT max(coalesce(ended_at, started_at)) FROM commands WHERE session_id = ?1), 0),"
               "   coalesce((SELECT max(coalesce(ended_at, started_at)) FROM runs WHERE session_id = ?1), 0)))"
               " WHERE id = ?1",
               id, why, when, status);
}

/* Crash recovery and this process's session row, in one transaction so that two ringside processes
 * starting together each see the other either fully open or not yet there. */
static rs_status start_session(rs_slog *log, const char *argv_text, rs_err *err)
{
    sqlite3 *db = log->db;
    char host[256] = "", start[128], cwd[4096];
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
    bool have_start = proc_start((long)getpid(), start, sizeof start, NULL);
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = '\0';

    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return db_error(db, log->path, "starting the session", err);
    bool ok = true;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db, "SELECT id, pid, proc_start FROM sessions WHERE status = 'open' AND host = ?1", -1, &q,
                           NULL) != SQLITE_OK) {
        ok = false;
    } else {
        sqlite3_bind_text(q, 1, host, -1, SQLITE_STATIC);
        /* Collect first, update after: no writes while the query's cursor is open. */
        int64_t dead[256];
        long dead_pid[256];
        int ndead = 0, rc;
        while ((rc = sqlite3_step(q)) == SQLITE_ROW && ndead < 256) {
            int64_t id = sqlite3_column_int64(q, 0);
            long pid = (long)sqlite3_column_int64(q, 1);
            const char *ps = (const char *)sqlite3_column_text(q, 2);
            if (!session_alive(id, pid, ps)) {
                dead_pid[ndead] = pid;
                dead[ndead++] = id;
            }
        }
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) ok = false;
        sqlite3_finalize(q);
        for (int i = 0; ok && i < ndead; i++) {
            char why[384];
            snprintf(why, sizeof why,
                     "interrupted: ringside (pid %ld on %s) ended without finishing it (killed or crashed)",
                     dead_pid[i], host);
            ok = end_session(db, dead[i], "crashed", 0, why);
        }
    }
    if (ok) {
        sqlite3_stmt *ins = NULL;
        ok = sqlite3_prepare_v2(db,
                                "INSERT INTO sessions (started_at, pid, host, proc_start, cwd, argv, version)"
                                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                -1, &ins, NULL) == SQLITE_OK;
        if (ok) {
            sqlite3_bind_double(ins, 1, rs_slog__wall());
            sqlite3_bind_int64(ins, 2, (int64_t)getpid());
            sqlite3_bind_text(ins, 3, host, -1, SQLITE_STATIC);
            if (have_start) sqlite3_bind_text(ins, 4, start, -1, SQLITE_STATIC);
            if (cwd[0]) sqlite3_bind_text(ins, 5, cwd, -1, SQLITE_STATIC);
            if (argv_text) sqlite3_bind_text(ins, 6, argv_text, -1, SQLITE_STATIC);
            sqlite3_bind_text(ins, 7, RS_VERSION, -1, SQLITE_STATIC);
            ok = sqlite3_step(ins) == SQLITE_DONE;
        }
        sqlite3_finalize(ins);
        if (ok) log->session = sqlite3_last_insert_rowid(db);
    }
    if (ok && !live_add(log->session)) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    if (ok && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) return RS_OK;
    rs_status st = db_error(db, log->path, "starting the session", err);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    if (log->session) live_remove(log->session);
    log->session = 0;
    return st;
}

static int ignore_rows(void *ud, int n, char **v, char **names)
{
    (void)ud, (void)n, (void)v, (void)names;
    return 0;
}

rs_status rs_slog_open(const char *path, const char *argv_text, rs_slog **out, rs_err *err)
{
    *out = NULL;
    char def[4096];
    if (!path) {
        rs_status st = rs_slog_default_path(def, sizeof def, err);
        if (st) return st;
        path = def;
    }
    rs_status st = make_parent_dirs(path, err);
    if (st) return st;

    rs_slog *log = calloc(1, sizeof *log);
    if (!log || !(log->path = strdup(path))) {
        free(log);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    if (sqlite3_open_v2(path, &log->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        st = log->db ? db_error(log->db, path, "cannot open", err)
                     : rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    sqlite3 *db = log->db;
    sqlite3_busy_timeout(db, SLOG_BUSY_MS);
    /* journal_mode is the first statement that reads the file: it is where a file that is not a
     * database shows itself. WAL lets readers (sqlite3 in another terminal) work while we write. */
    if (sqlite3_exec(db, "PRAGMA journal_mode = WAL", ignore_rows, NULL, NULL) != SQLITE_OK) {
        st = db_error(db, path, "cannot open", err);
        goto fail;
    }
    if (sqlite3_db_readonly(db, "main") == 1) {
        st = rs_err_set(err, RS_ERR_IO, "%s: the session log is read-only here; give a writable file with --db", path);
        goto fail;
    }
    /* synchronous=NORMAL in WAL mode: a committed transaction survives a crash of the process (what
     * kill -9 tests), and only a power cut can lose the last commits. Each commit is then no fsync. */
    if (sqlite3_exec(db, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON", NULL, NULL, NULL) != SQLITE_OK) {
        st = db_error(db, path, "cannot configure", err);
        goto fail;
    }
    if ((st = rs_slog__migrate(db, path, err))) goto fail;
    if ((st = rs_slog__prepare(log, err))) goto fail;
    log->strs_cap = 16384;
    if (!(log->strs = malloc(log->strs_cap))) {
        st = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = start_session(log, argv_text, err))) goto fail;
    log->last_flush = rs_slog__monotonic();
    *out = log;
    return RS_OK;
fail:
    rs_slog__finalize(log);
    sqlite3_close(log->db);
    free(log->strs);
    free(log->path);
    free(log);
    return st;
}

void rs_slog_close(rs_slog *log)
{
    if (!log) return;
    rs_slog_flush(log);
    if (log->session) {
        bool ok = sqlite3_exec(log->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
        ok = ok && end_session(log->db, log->session, "closed", rs_slog__wall(),
                               "interrupted: the session was closed while it ran");
        if (ok) ok = sqlite3_exec(log->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
        if (!ok) sqlite3_exec(log->db, "ROLLBACK", NULL, NULL, NULL);
        live_remove(log->session);
    }
    rs_slog__finalize(log);
    /* Keeps the query planner's statistics fresh for `sql`; cheap, and a no-op most of the time. */
    sqlite3_exec(log->db, "PRAGMA optimize", NULL, NULL, NULL);
    sqlite3_close(log->db);
    free(log->strs);
    free(log->path);
    free(log);
}
