/* `replay SESSION` and `export session N FILE.ring`: the commands of a past session in order, and the
 * rule for which of them belong in a script (those that succeeded, minus the ones that replay, export
 * or quit). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repl/slog/slog_internal.h"

/* Commands a replay or an exported script must not repeat: the ones that replay or export sessions
 * (a replay of a replay would run forever), play (the played lines are logged one by one and are
 * kept) and quit. */
static bool replayable(const char *text)
{
    static const char *const skip[] = {"replay", "play", "quit", "exit"};
    char w1[16] = "", w2[16] = "";
    if (sscanf(text, "%15s %15s", w1, w2) < 1 || w1[0] == '#') return false;
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (strcmp(w1, skip[i]) == 0) return false;
    return !(strcmp(w1, "export") == 0 && strcmp(w2, "session") == 0);
}

rs_status rs_slog_session_commands(rs_slog *log, int64_t session, int replayable_only, rs_slog_command_fn fn, void *ud,
                                   rs_err *err)
{
    if (!log) return rs_err_set(err, RS_ERR_ARG, "no session log");
    sqlite3_stmt *st;
    rs_status s = rs_slog__query(
        log, "SELECT seq, text, source, status FROM commands WHERE session_id = ?1 ORDER BY seq", &st, err);
    if (s) return s;
    sqlite3_bind_int64(st, 1, session);
    int rc, rows = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        rows++;
        const char *text = rs_slog__col(st, 1), *status = rs_slog__col(st, 3);
        if (replayable_only && (strcmp(status, "ok") != 0 || !replayable(text))) continue;
        if (fn(ud, sqlite3_column_int64(st, 0), text, rs_slog__col(st, 2), status)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE) s = rs_slog__query_error(log, "reading commands", err);
    sqlite3_finalize(st);
    if (!s && rows == 0) {
        int64_t n = 0;
        if (rs_slog__query(log, "SELECT count(*) FROM sessions WHERE id = ?1", &st, err) == RS_OK) {
            sqlite3_bind_int64(st, 1, session);
            if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
        }
        if (n == 0) s = rs_err_set(err, RS_ERR_ARG, "no session %lld in the session log", (long long)session);
    }
    return s;
}

typedef struct export_ctx {
    FILE *f;
    int n;
} export_ctx;

/* Whether the word at p (len bytes) is a step=1 that waits for a key between algorithm steps. */
static bool stepping_word(const char *p, size_t len)
{
    static const char *const on[] = {"step=1", "step=on", "step=true", "step=yes"};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++)
        if (len == strlen(on[i]) && strncmp(p, on[i], len) == 0) return true;
    return false;
}

static int export_line(void *ud, int64_t seq, const char *text, const char *source, const char *status)
{
    (void)seq, (void)source, (void)status;
    export_ctx *x = ud;
    /* One command per line: a stray newline in a logged command must not split it. A script cannot
     * answer step=1's keys (it refuses without the live view), so step=1 is dropped and a comment says
     * so. The words are gathered in a copy (owned here), so no blank is left where one was dropped. */
    char *line = malloc(strlen(text) + 1);
    if (!line) return 1;
    size_t n = 0;
    bool stepped = false;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, " \t\r\n");
        if (len && stepping_word(p, len) && (p == text || strchr(" \t\r\n", p[-1]))) {
            stepped = true;
            for (p += len; *p == ' ' || *p == '\t';) p++;
        } else if (!len) {
            line[n++] = ' ';
            p++;
        } else {
            memcpy(line + n, p, len);
            n += len;
            p += len;
        }
    }
    while (n && line[n - 1] == ' ') n--;
    if (stepped) fputs("# step=1 left out: it waits for a key at the live view, which a script has not\n", x->f);
    fwrite(line, 1, n, x->f);
    fputc('\n', x->f);
    free(line);
    x->n++;
    return 0;
}

rs_status rs_slog_export_session(rs_slog *log, int64_t session, const char *path, int *ncommands, rs_err *err)
{
    if (ncommands) *ncommands = 0;
    if (!log) return rs_err_set(err, RS_ERR_ARG, "no session log");
    sqlite3_stmt *st;
    rs_status s = rs_slog__query(log, "SELECT started_at, host, argv, version FROM sessions WHERE id = ?1", &st, err);
    if (s) return s;
    sqlite3_bind_int64(st, 1, session);
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return rs_err_set(err, RS_ERR_ARG, "no session %lld in the session log", (long long)session);
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        sqlite3_finalize(st);
        return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
    }
    char when[64];
    fprintf(f, "# ringside session %lld, started %s on %s (ringside %s)\n", (long long)session,
            rs_slog__fmt_time(sqlite3_column_double(st, 0), when, sizeof when, true), rs_slog__col(st, 1),
            rs_slog__col(st, 3));
    if (*rs_slog__col(st, 2)) fprintf(f, "# argv: %s\n", rs_slog__col(st, 2));
    fprintf(f, "# the commands that succeeded, in order; replay/export/play/quit left out\n");
    sqlite3_finalize(st);
    export_ctx x = {f, 0};
    s = rs_slog_session_commands(log, session, 1, export_line, &x, err);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    if (!s && bad) s = rs_err_set(err, RS_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (!s && ncommands) *ncommands = x.n;
    return s;
}
