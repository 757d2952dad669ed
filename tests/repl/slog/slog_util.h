/* Helpers shared by the session log tests: a scratch folder removed at exit, and one-line queries on
 * a second, independent SQLite connection, so a test sees what is really on disk, not what the log's
 * own connection believes. */
#ifndef SLOG_UTIL_H
#define SLOG_UTIL_H

#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char slog_tmp_root[512];

static int slog_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void slog_rm_tmp(void)
{
    if (slog_tmp_root[0]) nftw(slog_tmp_root, slog_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh folder under $TMPDIR (or /tmp), removed when the process that made it exits normally. */
static const char *slog_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(slog_tmp_root, sizeof slog_tmp_root, "%s/rs-slog-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(slog_tmp_root)) {
        perror("mkdtemp");
        exit(1);
    }
    atexit(slog_rm_tmp);
    return slog_tmp_root;
}

/* path = dir/name in a static buffer ring (up to 8 live at once). */
static inline const char *slog_path(const char *dir, const char *name)
{
    static char bufs[8][600];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 600, "%s/%s", dir, name);
    return b;
}

/* First column of the first row of sql as int64 (-1 on any error: printed). */
static inline int64_t q_int(const char *db_path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
        else if (rc == SQLITE_DONE)
            v = 0;
    }
    if (v == -1) fprintf(stderr, "q_int(%s): %s\n", sql, db ? sqlite3_errmsg(db) : "no db");
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static inline double q_real(const char *db_path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    double v = -1;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* First column of the first row as text, in a static buffer ring; "<null>" for NULL, "<none>" for no
 * row, "<error: ...>" on failure. */
static inline const char *q_text(const char *db_path, const char *sql)
{
    static char bufs[8][1024];
    static int next;
    char *b = bufs[next++ % 8];
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        snprintf(b, 1024, "<error: %s>", db ? sqlite3_errmsg(db) : "no db");
    else if ((rc = sqlite3_step(st)) == SQLITE_ROW)
        snprintf(b, 1024, "%s",
                 sqlite3_column_type(st, 0) == SQLITE_NULL ? "<null>" : (const char *)sqlite3_column_text(st, 0));
    else
        snprintf(b, 1024, rc == SQLITE_DONE ? "<none>" : "<error: step>");
    sqlite3_finalize(st);
    sqlite3_close(db);
    return b;
}

/* Runs sql (writes allowed) on its own connection: how tests forge rows a real process would leave. */
static inline int q_exec(const char *db_path, const char *sql)
{
    sqlite3 *db = NULL;
    char *msg = NULL;
    int rc = sqlite3_open(db_path, &db);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    }
    if (rc != SQLITE_OK) fprintf(stderr, "q_exec(%s): %s\n", sql, msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    sqlite3_close(db);
    return rc;
}

#endif
