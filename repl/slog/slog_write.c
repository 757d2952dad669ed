/* The session log's writers. Commands, runs and artifacts are written at once (one small transaction
 * each: a kill -9 keeps them); metrics and events, which come every step from every rank, are copied
 * into fixed buffers and written in batches, so a training step never waits on the disk. Failures go
 * to the last-error string and never reach the caller: a full disk must not stop a session. */
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "repl/slog/slog_internal.h"

static const char *const statements[SLOG_ST_COUNT] = {
    [SLOG_ST_CMD_BEGIN] =
        "INSERT INTO commands (session_id, seq, text, source, started_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    [SLOG_ST_CMD_END] = "UPDATE commands SET ended_at = ?2, status = ?3, error = ?4 WHERE id = ?1",
    /* Text that is not JSON is kept as a JSON string: the column stays queryable with json_extract and
     * the caller's bug costs a warning, not the run's row (and with it all its metrics). */
    [SLOG_ST_RUN_BEGIN] = "INSERT INTO runs (session_id, command_id, kind, model, model_spec, dataset, options, mode,"
                          " backend, world_size, started_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
                          " CASE WHEN ?7 IS NULL OR json_valid(?7) THEN ?7 ELSE json_quote(?7) END,"
                          " ?8, ?9, ?10, ?11)",
    [SLOG_ST_RUN_END] = "UPDATE runs SET status = ?2, steps = ?3,"
                        " final = CASE WHEN ?4 IS NULL OR json_valid(?4) THEN ?4 ELSE json_quote(?4) END,"
                        " ended_at = ?5, error = ?6 WHERE id = ?1",
    [SLOG_ST_METRIC] =
        "INSERT INTO metrics (run_id, rank, step, epoch, name, value, t) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [SLOG_ST_EVENT] = "INSERT INTO events (run_id, rank, t, kind, name, step, coll, astep, algo, peer, chunk, bytes,"
                      " value, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"
                      " CASE WHEN ?14 IS NULL OR json_valid(?14) THEN ?14 ELSE json_object('text', ?14) END)",
    [SLOG_ST_ARTIFACT] = ("INSERT INTO artifacts (session_id, command_id, run_id, path, kind, sha256, bytes,"
                          " created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
};

rs_status rs_slog__prepare(rs_slog *log, rs_err *err)
{
    for (int i = 0; i < SLOG_ST_COUNT; i++)
        if (sqlite3_prepare_v3(log->db, statements[i], -1, SQLITE_PREPARE_PERSISTENT, &log->st[i], NULL) != SQLITE_OK)
            return rs_err_set(err, RS_ERR_INTERNAL, "%s: preparing the session log's statements: %s", log->path,
                              sqlite3_errmsg(log->db));
    return RS_OK;
}

void rs_slog__finalize(rs_slog *log)
{
    for (int i = 0; i < SLOG_ST_COUNT; i++) {
        sqlite3_finalize(log->st[i]);
        log->st[i] = NULL;
    }
}

/* Binding helpers: 0 ids, negative "none" sentinels and NULL strings become SQL NULL. */
static void bind_id(sqlite3_stmt *st, int i, int64_t v)
{
    if (v > 0)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

static void bind_opt(sqlite3_stmt *st, int i, int64_t v)
{
    if (v >= 0)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static void bind_real(sqlite3_stmt *st, int i, double v)
{
    if (v == v)
        sqlite3_bind_double(st, i, v);
    else
        sqlite3_bind_null(st, i); /* NaN */
}

/* Steps a cached statement once and resets it; false (and the last error set, and err when given)
 * when it failed. */
static bool step_once(rs_slog *log, int which, const char *what, rs_err *err)
{
    sqlite3_stmt *st = log->st[which];
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
        rs_slog__fail_db(log, what);
        rs_err_set(err, RS_ERR_IO, "session log %s: %s: %s", log->path, what, sqlite3_errmsg(log->db));
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE;
}

int64_t rs_slog_command_begin(rs_slog *log, const char *text, const char *source)
{
    if (!log) return 0;
    sqlite3_stmt *st = log->st[SLOG_ST_CMD_BEGIN];
    sqlite3_bind_int64(st, 1, log->session);
    sqlite3_bind_int64(st, 2, log->cmd_seq + 1);
    sqlite3_bind_text(st, 3, text ? text : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, source ? source : "tty", -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 5, rs_slog__wall());
    if (!step_once(log, SLOG_ST_CMD_BEGIN, "logging a command", NULL)) return 0;
    log->cmd_seq++;
    return sqlite3_last_insert_rowid(log->db);
}

void rs_slog_command_end(rs_slog *log, int64_t cmd, const char *status, const char *error)
{
    if (!log || cmd <= 0) return;
    sqlite3_stmt *st = log->st[SLOG_ST_CMD_END];
    sqlite3_bind_int64(st, 1, cmd);
    sqlite3_bind_double(st, 2, rs_slog__wall());
    bind_text(st, 3, status ? status : "ok");
    bind_text(st, 4, error);
    step_once(log, SLOG_ST_CMD_END, "ending a command", NULL);
}

int64_t rs_slog_run_begin(rs_slog *log, int64_t cmd, const rs_slog_run_info *info)
{
    if (!log) return 0;
    rs_slog_run_info none = {0};
    if (!info) info = &none;
    sqlite3_stmt *st = log->st[SLOG_ST_RUN_BEGIN];
    sqlite3_bind_int64(st, 1, log->session);
    bind_id(st, 2, cmd);
    bind_text(st, 3, info->kind ? info->kind : "run");
    bind_text(st, 4, info->model);
    bind_text(st, 5, info->model_spec);
    bind_text(st, 6, info->dataset);
    bind_text(st, 7, info->options_json);
    bind_text(st, 8, info->mode ? info->mode : "single");
    bind_text(st, 9, info->backend);
    sqlite3_bind_int(st, 10, info->world_size > 0 ? info->world_size : 1);
    sqlite3_bind_double(st, 11, rs_slog__wall());
    if (!step_once(log, SLOG_ST_RUN_BEGIN, "logging a run", NULL)) return 0;
    return sqlite3_last_insert_rowid(log->db);
}

void rs_slog_run_end(rs_slog *log, int64_t run, const char *status, int64_t steps, const char *final_json,
                     const char *error)
{
    if (!log || run <= 0) return;
    rs_slog_flush(log); /* the run's figures land before it is marked ended */
    sqlite3_stmt *st = log->st[SLOG_ST_RUN_END];
    sqlite3_bind_int64(st, 1, run);
    bind_text(st, 2, status ? status : "done");
    bind_opt(st, 3, steps);
    bind_text(st, 4, final_json);
    sqlite3_bind_double(st, 5, rs_slog__wall());
    bind_text(st, 6, error);
    step_once(log, SLOG_ST_RUN_END, "ending a run", NULL);
}

/* ---- buffered rows ---------------------------------------------------------------------------- */

/* Copies s into the string arena; SLOG_NOSTR for NULL or when memory runs out (*ok cleared). */
static uint32_t keep_str(rs_slog *log, const char *s, bool *ok)
{
    if (!s) return SLOG_NOSTR;
    size_t n = strlen(s) + 1;
    if (log->strs_len + n > log->strs_cap) {
        size_t cap = log->strs_cap;
        while (log->strs_len + n > cap) cap *= 2;
        char *p = cap < UINT32_MAX ? realloc(log->strs, cap) : NULL;
        if (!p) {
            *ok = false;
            return SLOG_NOSTR;
        }
        log->strs = p;
        log->strs_cap = cap;
    }
    memcpy(log->strs + log->strs_len, s, n);
    uint32_t off = (uint32_t)log->strs_len;
    log->strs_len += n;
    return off;
}

static const char *str_at(const rs_slog *log, uint32_t off)
{
    return off == SLOG_NOSTR ? NULL : log->strs + off;
}

static void flush_if_due(rs_slog *log)
{
    if (log->nmetrics >= SLOG_FLUSH_ROWS || log->nevents >= SLOG_FLUSH_ROWS ||
        rs_slog__monotonic() - log->last_flush >= SLOG_FLUSH_SECONDS)
        rs_slog_flush(log);
}

void rs_slog_metric(rs_slog *log, int64_t run, int rank, int64_t step, int epoch, const char *name, double value)
{
    if (!log || run <= 0 || !name) return;
    bool ok = true;
    slog_metric_row *r = &log->metrics[log->nmetrics];
    r->name = keep_str(log, name, &ok);
    if (!ok) {
        log->lost++;
        rs_slog__fail(log, "buffering a metric", "out of memory");
        return;
    }
    r->run = run;
    r->rank = rank;
    r->step = step;
    r->epoch = epoch;
    r->value = value;
    r->t = rs_slog__wall();
    log->nmetrics++;
    flush_if_due(log);
}

void rs_slog_event(rs_slog *log, int64_t run, const rs_slog_event_info *ev)
{
    if (!log || run <= 0 || !ev || !ev->kind) return;
    bool ok = true;
    slog_event_row *r = &log->events[log->nevents];
    r->kind = keep_str(log, ev->kind, &ok);
    r->name = keep_str(log, ev->name, &ok);
    r->algo = keep_str(log, ev->algo, &ok);
    r->detail = keep_str(log, ev->detail_json, &ok);
    if (!ok) {
        log->lost++;
        rs_slog__fail(log, "buffering an event", "out of memory");
        return;
    }
    r->run = run;
    r->rank = ev->rank;
    r->t = ev->t > 0 ? ev->t : rs_slog__wall();
    r->step = ev->step;
    r->coll = ev->coll;
    r->astep = ev->astep;
    r->peer = ev->peer;
    r->chunk = ev->chunk;
    r->bytes = ev->bytes;
    r->value = ev->value;
    log->nevents++;
    flush_if_due(log);
}

/* Writes one buffered row; false when the transaction itself is gone (disk full, I/O error), after
 * which the batch cannot go on. A row refused on its own (a constraint) is counted lost and skipped. */
static bool write_row(rs_slog *log, int which, const char *what)
{
    if (step_once(log, which, what, NULL)) return true;
    log->lost++;
    return !sqlite3_get_autocommit(log->db);
}

void rs_slog_flush(rs_slog *log)
{
    if (!log) return;
    log->last_flush = rs_slog__monotonic();
    int nm = log->nmetrics, ne = log->nevents;
    if (nm + ne == 0) return;
    log->nmetrics = log->nevents = 0;
    bool ok = sqlite3_exec(log->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
    if (!ok) rs_slog__fail_db(log, "writing buffered metrics");
    int done = 0;
    sqlite3_stmt *st = log->st[SLOG_ST_METRIC];
    for (int i = 0; ok && i < nm; i++, done++) {
        const slog_metric_row *r = &log->metrics[i];
        sqlite3_bind_int64(st, 1, r->run);
        sqlite3_bind_int(st, 2, r->rank);
        bind_opt(st, 3, r->step);
        bind_opt(st, 4, r->epoch);
        sqlite3_bind_text(st, 5, str_at(log, r->name), -1, SQLITE_STATIC);
        bind_real(st, 6, r->value);
        sqlite3_bind_double(st, 7, r->t);
        ok = write_row(log, SLOG_ST_METRIC, "writing a metric");
    }
    st = log->st[SLOG_ST_EVENT];
    for (int i = 0; ok && i < ne; i++, done++) {
        const slog_event_row *r = &log->events[i];
        sqlite3_bind_int64(st, 1, r->run);
        sqlite3_bind_int(st, 2, r->rank);
        sqlite3_bind_double(st, 3, r->t);
        bind_text(st, 4, str_at(log, r->kind));
        bind_text(st, 5, str_at(log, r->name));
        bind_opt(st, 6, r->step);
        bind_opt(st, 7, r->coll);
        bind_opt(st, 8, r->astep);
        bind_text(st, 9, str_at(log, r->algo));
        bind_opt(st, 10, r->peer);
        bind_opt(st, 11, r->chunk);
        bind_opt(st, 12, r->bytes);
        bind_real(st, 13, r->value);
        bind_text(st, 14, str_at(log, r->detail));
        ok = write_row(log, SLOG_ST_EVENT, "writing an event");
    }
    if (ok && sqlite3_exec(log->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        rs_slog__fail_db(log, "writing buffered metrics");
        done = 0; /* nothing of the batch is on disk */
        ok = false;
    }
    if (!ok) {
        if (!sqlite3_get_autocommit(log->db)) sqlite3_exec(log->db, "ROLLBACK", NULL, NULL, NULL);
        log->lost += (uint64_t)(nm + ne - done);
    }
    log->strs_len = 0;
}

/* ---- artifacts -------------------------------------------------------------------------------- */

rs_status rs_slog_sha256_file(const char *path, char hex[65], int64_t *bytes, rs_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
    rs_status st = RS_OK;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        st = rs_err_set(err, RS_ERR_INTERNAL, "OpenSSL: cannot start a SHA-256 digest");
        goto out;
    }
    unsigned char buf[1 << 16];
    int64_t total = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (EVP_DigestUpdate(ctx, buf, n) != 1) {
            st = rs_err_set(err, RS_ERR_INTERNAL, "OpenSSL: SHA-256 update failed");
            goto out;
        }
        total += (int64_t)n;
    }
    if (ferror(f)) {
        st = rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
        goto out;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx, md, &len) != 1 || len != 32) {
        st = rs_err_set(err, RS_ERR_INTERNAL, "OpenSSL: SHA-256 final failed");
        goto out;
    }
    for (unsigned i = 0; i < len; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    if (bytes) *bytes = total;
out:
    EVP_MD_CTX_free(ctx);
    fclose(f);
    return st;
}

int64_t rs_slog_artifact(rs_slog *log, int64_t cmd, int64_t run, const char *path, const char *kind, rs_err *err)
{
    if (!log) return 0;
    if (!path) {
        rs_err_set(err, RS_ERR_ARG, "artifact: no path");
        return 0;
    }
    char hex[65];
    int64_t bytes = 0;
    if (rs_slog_sha256_file(path, hex, &bytes, err)) return 0;
    /* Absolute, so that the row still names the file when read from another folder later. */
    char *abs = realpath(path, NULL);
    sqlite3_stmt *st = log->st[SLOG_ST_ARTIFACT];
    sqlite3_bind_int64(st, 1, log->session);
    bind_id(st, 2, cmd);
    bind_id(st, 3, run);
    sqlite3_bind_text(st, 4, abs ? abs : path, -1, SQLITE_STATIC);
    bind_text(st, 5, kind);
    sqlite3_bind_text(st, 6, hex, 64, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, bytes);
    sqlite3_bind_double(st, 8, rs_slog__wall());
    bool ok = step_once(log, SLOG_ST_ARTIFACT, "logging an artifact", err);
    free(abs);
    if (!ok) return 0;
    return sqlite3_last_insert_rowid(log->db);
}
