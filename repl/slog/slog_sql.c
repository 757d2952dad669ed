/* `sql "..."`: the person's own queries over the session log, reads only. Two guards: an authorizer
 * that refuses writes, transactions, ATTACH and setting changes while the statements are prepared, and
 * sqlite3_stmt_readonly on what got through. Every statement is checked before the first one runs, so a
 * refused string changes nothing and prints nothing. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "repl/slog/slog_internal.h"

typedef struct guard {
    const char *why; /* what the authorizer refused, NULL when it refused nothing */
} guard;

/* PRAGMAs that only report. Those in `any_arg` take a table or index name; those in `bare` read a
 * setting when given no value (PRAGMA user_version) and change it when given one. */
static bool pragma_is_query(const char *name, const char *arg)
{
    static const char *const any_arg[] = {"table_info",        "table_xinfo",     "index_list",
                                          "index_info",        "index_xinfo",     "foreign_key_list",
                                          "foreign_key_check", "integrity_check", "quick_check"};
    static const char *const bare[] = {
        "table_list",      "database_list",  "collation_list", "function_list",  "module_list",  "pragma_list",
        "compile_options", "user_version",   "application_id", "schema_version", "data_version", "page_count",
        "page_size",       "freelist_count", "journal_mode",   "encoding",       "foreign_keys", "synchronous"};
    if (!name) return false;
    for (size_t i = 0; i < sizeof any_arg / sizeof any_arg[0]; i++)
        if (strcasecmp(name, any_arg[i]) == 0) return true;
    for (size_t i = 0; i < sizeof bare / sizeof bare[0]; i++)
        if (strcasecmp(name, bare[i]) == 0) return arg == NULL;
    return false;
}

static int authorize(void *ud, int action, const char *a, const char *b, const char *db, const char *trigger)
{
    (void)db, (void)trigger;
    guard *g = ud;
    switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_FUNCTION:
    case SQLITE_RECURSIVE: return SQLITE_OK;
    case SQLITE_UPDATE:
        /* Reading an eponymous table like pragma_table_info('runs') makes SQLite register it, which it
         * reports as an update of sqlite_master; a real one cannot happen (writable_schema is off), and
         * sqlite3_stmt_readonly still stands behind this. */
        if (a && strcmp(a, "sqlite_master") == 0) return SQLITE_OK;
        g->why = "writes";
        break;
    case SQLITE_PRAGMA:
        if (pragma_is_query(a, b)) return SQLITE_OK;
        g->why = "changes a setting";
        break;
    case SQLITE_TRANSACTION:
    case SQLITE_SAVEPOINT: g->why = "opens or ends a transaction"; break;
    case SQLITE_ATTACH:
    case SQLITE_DETACH: g->why = "attaches a database"; break;
    default: g->why = "writes"; break;
    }
    return SQLITE_DENY;
}

static rs_status refuse(rs_slog *log, int index, int total, const char *why, rs_err *err)
{
    char which[48];
    if (total > 1 || index > 0)
        snprintf(which, sizeof which, "statement %d", index + 1);
    else
        snprintf(which, sizeof which, "this statement");
    return rs_err_set(err, RS_ERR_ARG,
                      "only reads are allowed here, and %s %s: ringside keeps the session log consistent; "
                      "to change it by hand use: sqlite3 %s",
                      which, why, log->path);
}

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ';') p++;
    return p;
}

/* Pass 1: prepares every statement without running it. *count gets how many there are. */
static rs_status check_all(rs_slog *log, const char *sql, guard *g, int *count, rs_err *err)
{
    int k = 0;
    for (const char *p = skip_space(sql); *p; p = skip_space(p)) {
        sqlite3_stmt *st = NULL;
        const char *tail = NULL;
        g->why = NULL;
        int rc = sqlite3_prepare_v2(log->db, p, -1, &st, &tail);
        if (rc != SQLITE_OK) {
            rs_status s = g->why ? refuse(log, k, k + 1 + (*skip_space(tail ? tail : "") != 0), g->why, err)
                                 : rs_err_set(err, RS_ERR_ARG, "%s", sqlite3_errmsg(log->db));
            sqlite3_finalize(st);
            return s;
        }
        if (!st) break; /* only comments left */
        bool ro = sqlite3_stmt_readonly(st);
        sqlite3_finalize(st);
        if (!ro) return refuse(log, k, k + 1 + (*skip_space(tail) != 0), "writes", err);
        k++;
        p = tail;
    }
    *count = k;
    return RS_OK;
}

/* A REAL with the fewest digits that read back to the same double (SQLite's text keeps 15). */
static const char *exact_real(double x, char *buf, size_t n)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

/* Pass 2: runs them, feeding fn (or tfn, with the values' types and exact REALs) a header and the rows
 * of each statement that has columns. */
static rs_status run_all(rs_slog *log, const char *sql, rs_slog_row_fn fn, rs_slog_typed_row_fn tfn, void *ud,
                         rs_err *err)
{
    int k = 0;
    for (const char *p = skip_space(sql); *p; p = skip_space(p), k++) {
        sqlite3_stmt *st = NULL;
        const char *tail = NULL;
        if (sqlite3_prepare_v2(log->db, p, -1, &st, &tail) != SQLITE_OK)
            return rs_err_set(err, RS_ERR_ARG, "%s", sqlite3_errmsg(log->db));
        if (!st) break;
        p = tail;
        int n = sqlite3_column_count(st);
        const char **names = calloc((size_t)(n ? 2 * n : 1), sizeof *names);
        int *types = calloc((size_t)(n ? n : 1), sizeof *types);
        char(*reals)[32] = calloc((size_t)(n ? n : 1), sizeof *reals);
        if (!names || !types || !reals) {
            free(names);
            free(types);
            free(reals);
            sqlite3_finalize(st);
            return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
        }
        const char **values = names + n;
        bool stop = false;
        for (int c = 0; c < n; c++) names[c] = sqlite3_column_name(st, c);
        if (n) stop = (tfn ? tfn(ud, k, n, names, NULL, NULL) : fn(ud, k, n, names, NULL)) != 0;
        int rc = SQLITE_DONE;
        while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            for (int c = 0; c < n; c++) {
                types[c] = sqlite3_column_type(st, c);
                values[c] = tfn && types[c] == SQLITE_FLOAT
                                ? exact_real(sqlite3_column_double(st, c), reals[c], sizeof reals[c])
                                : (const char *)sqlite3_column_text(st, c);
            }
            if (n) stop = (tfn ? tfn(ud, k, n, names, values, types) : fn(ud, k, n, names, values)) != 0;
        }
        free(names);
        free(types);
        free(reals);
        rs_status s = RS_OK;
        if (!stop && rc == SQLITE_INTERRUPT)
            s = rs_err_set(err, RS_ERR_CANCELLED, "query interrupted");
        else if (!stop && rc != SQLITE_DONE)
            s = rs_err_set(err, RS_ERR_ARG, "%s", sqlite3_errmsg(log->db));
        sqlite3_finalize(st);
        if (s || stop) return s;
    }
    return RS_OK;
}

void rs_slog_set_interrupt(rs_slog *log, volatile sig_atomic_t *flag)
{
    if (log) log->interrupt = flag;
}

/* SQLite calls this every few thousand VM steps; nonzero makes the statement fail with SQLITE_INTERRUPT,
 * so a cross join over the metrics stops at Ctrl-C instead of holding the prompt. */
static int poll_interrupt(void *ud)
{
    const rs_slog *log = ud;
    return log->interrupt && *log->interrupt;
}

static rs_status sql_run(rs_slog *log, const char *sql, rs_slog_row_fn fn, rs_slog_typed_row_fn tfn, void *ud,
                         rs_err *err)
{
    if (!log) return rs_err_set(err, RS_ERR_ARG, "no session log");
    if (!sql || (!fn && !tfn)) return rs_err_set(err, RS_ERR_ARG, "sql: nothing to run");
    rs_slog_flush(log); /* a query sees this process's latest metrics */
    guard g = {0};
    int count = 0;
    sqlite3_set_authorizer(log->db, authorize, &g);
    rs_status s = check_all(log, sql, &g, &count, err);
    if (!s && count == 0) s = rs_err_set(err, RS_ERR_ARG, "no SQL statement to run");
    if (!s) {
        sqlite3_progress_handler(log->db, 10000, poll_interrupt, log);
        s = run_all(log, sql, fn, tfn, ud, err);
        sqlite3_progress_handler(log->db, 0, NULL, NULL);
    }
    sqlite3_set_authorizer(log->db, NULL, NULL);
    return s;
}

rs_status rs_slog_sql(rs_slog *log, const char *sql, rs_slog_row_fn fn, void *ud, rs_err *err)
{
    return sql_run(log, sql, fn, NULL, ud, err);
}

rs_status rs_slog_sql_typed(rs_slog *log, const char *sql, rs_slog_typed_row_fn fn, void *ud, rs_err *err)
{
    return sql_run(log, sql, NULL, fn, ud, err);
}

/* ---- printed as tables ------------------------------------------------------------------------ */

typedef struct print_ctx {
    FILE *f;
    int max_width, max_rows;
    rs_table *t;
    long more; /* rows past max_rows */
    int printed;
    bool nomem;
} print_ctx;

static void print_table(print_ctx *c)
{
    if (!c->t) return;
    if (c->printed++) fputc('\n', c->f);
    rs_table_print(c->f, c->t, c->max_width, 0);
    if (!rs_table_nrows(c->t)) fputs("(no rows)\n", c->f);
    if (c->more) fprintf(c->f, "(%ld more rows not shown: add LIMIT, or use sqlite3)\n", c->more);
    rs_table_free(c->t);
    c->t = NULL;
    c->more = 0;
}

static int print_row(void *ud, int stmt, int ncols, const char *const *names, const char *const *values)
{
    (void)stmt;
    print_ctx *c = ud;
    if (!values) {
        print_table(c);
        c->t = rs_table_new(ncols, names);
        c->nomem = !c->t;
        return c->nomem;
    }
    if (c->max_rows > 0 && rs_table_nrows(c->t) >= (size_t)c->max_rows) {
        c->more++;
        return 0;
    }
    c->nomem = rs_table_add(c->t, values) != RS_OK;
    return c->nomem;
}

rs_status rs_slog_sql_print(rs_slog *log, const char *sql, FILE *f, int max_width, int max_rows, rs_err *err)
{
    print_ctx c = {.f = f, .max_width = max_width, .max_rows = max_rows};
    rs_status s = rs_slog_sql(log, sql, print_row, &c, err);
    if (!s && c.nomem) s = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    if (!s) print_table(&c);
    rs_table_free(c.t);
    return s;
}
