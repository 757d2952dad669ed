/* The session log's readers behind `runs`, `show run N`, `compare N M` and `history` (replay and export
 * are in slog_export.c): each turns a few queries into an rs_table, or printed tables, that the REPL
 * shows as is. Options and final figures are JSON objects in the log, flattened here (a.b = value). */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "repl/slog/slog_internal.h"

/* ---- formatting ------------------------------------------------------------------------------- */

const char *rs_slog__fmt_time(double t, char *buf, size_t size, bool seconds)
{
    if (t <= 0) return "";
    time_t s = (time_t)t;
    struct tm tm;
    if (!localtime_r(&s, &tm) || !strftime(buf, size, seconds ? "%Y-%m-%d %H:%M:%S" : "%Y-%m-%d %H:%M", &tm)) return "";
    return buf;
}

static const char *fmt_duration(double s, char *buf, size_t size)
{
    if (s < 0) return "";
    if (s < 60)
        snprintf(buf, size, "%.1fs", s);
    else if (s < 3600)
        snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    return buf;
}

static const char *fmt_num(double v, char *buf, size_t size)
{
    snprintf(buf, size, "%.6g", v);
    return buf;
}

const char *rs_slog__col(sqlite3_stmt *st, int i)
{
    const char *s = (const char *)sqlite3_column_text(st, i);
    return s ? s : "";
}

rs_status rs_slog__query_error(rs_slog *log, const char *what, rs_err *err)
{
    return rs_err_set(err, RS_ERR_IO, "session log %s: %s: %s", log->path, what, sqlite3_errmsg(log->db));
}

rs_status rs_slog__query(rs_slog *log, const char *sql, sqlite3_stmt **st, rs_err *err)
{
    if (sqlite3_prepare_v2(log->db, sql, -1, st, NULL) != SQLITE_OK) return rs_slog__query_error(log, "query", err);
    return RS_OK;
}

static rs_status add_row(rs_table *t, const char *const *cells, rs_err *err)
{
    return rs_table_add(t, cells) ? rs_err_set(err, RS_ERR_NOMEM, "out of memory") : RS_OK;
}

static rs_table *new_table(int ncols, const char *const *names, rs_err *err)
{
    rs_table *t = rs_table_new(ncols, names);
    if (!t) rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    return t;
}

/* Runs a prepared query, turning each row into table cells with to_cells; finalizes st. */
typedef void (*cells_fn)(sqlite3_stmt *st, const char **cells, char (*buf)[64]);

static rs_status fill(rs_slog *log, sqlite3_stmt *st, rs_table *t, cells_fn to_cells, rs_err *err)
{
    const char *cells[16];
    char buf[16][64];
    int rc;
    rs_status s = RS_OK;
    while (s == RS_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        to_cells(st, cells, buf);
        s = add_row(t, cells, err);
    }
    if (s == RS_OK && rc != SQLITE_DONE) s = rs_slog__query_error(log, "query", err);
    sqlite3_finalize(st);
    return s;
}

/* ---- JSON objects as flat key = value lists ------------------------------------------------------- */

typedef struct kv_list {
    char **keys, **vals;
    size_t n, cap;
} kv_list;

static void kv_clear(kv_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->keys[i]);
        free(l->vals[i]);
    }
    free(l->keys);
    free(l->vals);
    memset(l, 0, sizeof *l);
}

static bool kv_add(kv_list *l, const char *k, const char *v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **k2 = realloc(l->keys, cap * sizeof *k2);
        if (!k2) return false;
        l->keys = k2;
        char **v2 = realloc(l->vals, cap * sizeof *v2);
        if (!v2) return false;
        l->vals = v2;
        l->cap = cap;
    }
    char *kc = strdup(k), *vc = strdup(v);
    if (!kc || !vc) {
        free(kc);
        free(vc);
        return false;
    }
    l->keys[l->n] = kc;
    l->vals[l->n++] = vc;
    return true;
}

static const char *kv_get(const kv_list *l, const char *k)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->keys[i], k) == 0) return l->vals[i];
    return NULL;
}

/* Nested objects become dotted keys (zero.stage = 3); other values print as a person would type them:
 * strings bare, numbers short, arrays as compact JSON. */
static bool flatten(const json_t *v, const char *prefix, kv_list *out)
{
    if (json_is_object(v) && json_object_size(v) > 0) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            char key[256];
            snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", k);
            if (!flatten(x, key, out)) return false;
        }
        return true;
    }
    char buf[64];
    const char *text = buf;
    char *dumped = NULL;
    if (json_is_string(v))
        text = json_string_value(v);
    else if (json_is_integer(v))
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        fmt_num(json_real_value(v), buf, sizeof buf);
    else if (json_is_true(v))
        text = "true";
    else if (json_is_false(v))
        text = "false";
    else if (json_is_null(v))
        text = "null";
    else
        text = dumped = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    bool ok = kv_add(out, *prefix ? prefix : "value", text ? text : "");
    free(dumped);
    return ok;
}

/* Flattens JSON text; text that does not parse (or is not an object) becomes one entry. */
static bool flatten_text(const char *json, kv_list *out)
{
    if (!json || !*json) return true;
    json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
    if (!v) return kv_add(out, "value", json);
    bool ok = flatten(v, "", out);
    json_decref(v);
    return ok;
}

/* The headline of a run's final figures for `runs`: its first two numbers, "test_acc=0.9712 loss=0.08". */
static const char *mode_text(const char *mode, int64_t world, char *buf, size_t size)
{
    if (world > 1)
        snprintf(buf, size, "%s x%lld", mode, (long long)world);
    else
        snprintf(buf, size, "%s", mode);
    return buf;
}

/* ---- runs ------------------------------------------------------------------------------------- */

/* The test accuracy a run ended with (train, eval), or "". */
static const char *test_acc(const char *final, char *buf, size_t size)
{
    buf[0] = '\0';
    json_t *v = final ? json_loads(final, 0, NULL) : NULL;
    json_t *acc = json_is_object(v) ? json_object_get(v, "test_acc") : NULL;
    if (json_is_number(acc)) snprintf(buf, size, "%.4f", json_number_value(acc));
    json_decref(v);
    return buf;
}

static void run_cells(sqlite3_stmt *st, const char **c, char (*buf)[64])
{
    double start = sqlite3_column_double(st, 9);
    double end = sqlite3_column_type(st, 10) == SQLITE_NULL ? rs_slog__wall() : sqlite3_column_double(st, 10);
    const char *kind = rs_slog__col(st, 1), *mode = rs_slog__col(st, 4);
    c[0] = rs_slog__col(st, 0);
    c[1] = kind;
    c[2] = rs_slog__col(st, 2);
    c[3] = rs_slog__col(st, 3);
    /* a collective's mode is its kind again: its backend says more */
    if ((!*mode || !strcmp(mode, kind)) && *rs_slog__col(st, 11)) mode = rs_slog__col(st, 11);
    c[4] = mode_text(mode, sqlite3_column_int64(st, 5), buf[4], 64);
    c[5] = rs_slog__col(st, 6);
    c[6] = rs_slog__col(st, 7);
    c[7] = test_acc((const char *)sqlite3_column_text(st, 8), buf[7], 64);
    c[8] = fmt_duration(end - start, buf[8], 64);
    /* the year is in `show run N`; an 80-column table has no room for it */
    const char *when = rs_slog__fmt_time(start, buf[9], 64, false);
    c[9] = strlen(when) > 5 ? when + 5 : when;
}

rs_status rs_slog_runs(rs_slog *log, int limit, rs_table **out, rs_err *err)
{
    *out = NULL;
    if (!log) return rs_err_set(err, RS_ERR_ARG, "no session log");
    rs_slog_flush(log);
    static const char *const names[] = {"id",     "kind",  "model",    "data", "mode",
                                        "status", "steps", "acc",   "time", "started"};
    sqlite3_stmt *st;
    rs_status s =
        rs_slog__query(log,
                       "SELECT * FROM (SELECT id, kind, model, dataset, mode, world_size, status, steps, final,"
                       " started_at, ended_at, backend FROM runs ORDER BY id DESC LIMIT ?1) ORDER BY id",
                       &st, err);
    if (s) return s;
    sqlite3_bind_int(st, 1, limit > 0 ? limit : 20);
    rs_table *t = new_table(10, names, err);
    if (!t) {
        sqlite3_finalize(st);
        return RS_ERR_NOMEM;
    }
    if ((s = fill(log, st, t, run_cells, err))) {
        rs_table_free(t);
        return s;
    }
    /* at 80 columns the names give way, never what says what a run was, how it went and how long */
    static const int keep[] = {0, 1, 5, 6, 7, 8, 9};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) rs_table_set_keep(t, keep[i], true);
    *out = t;
    return RS_OK;
}

/* ---- one run ---------------------------------------------------------------------------------- */

enum {
    R_ID,
    R_SESSION,
    R_CMD,
    R_CMD_TEXT,
    R_KIND,
    R_MODEL,
    R_SPEC,
    R_DATA,
    R_OPTIONS,
    R_MODE,
    R_BACKEND,
    R_WORLD,
    R_STATUS,
    R_START,
    R_END,
    R_STEPS,
    R_FINAL,
    R_ERROR
};

static rs_status load_run(rs_slog *log, int64_t run, sqlite3_stmt **out, rs_err *err)
{
    sqlite3_stmt *st;
    rs_status s =
        rs_slog__query(log,
                       "SELECT r.id, r.session_id, r.command_id, c.text, r.kind, r.model, r.model_spec, r.dataset,"
                       " r.options, r.mode, r.backend, r.world_size, r.status, r.started_at, r.ended_at, r.steps,"
                       " r.final, r.error FROM runs r LEFT JOIN commands c ON c.id = r.command_id WHERE r.id = ?1",
                       &st, err);
    if (s) return s;
    sqlite3_bind_int64(st, 1, run);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = st;
        return RS_OK;
    }
    s = rc == SQLITE_DONE
            ? rs_err_set(err, RS_ERR_ARG, "no run %lld in the session log (`runs` lists them)", (long long)run)
            : rs_slog__query_error(log, "reading a run", err);
    sqlite3_finalize(st);
    return s;
}

static double run_duration(sqlite3_stmt *st)
{
    double end = sqlite3_column_type(st, R_END) == SQLITE_NULL ? rs_slog__wall() : sqlite3_column_double(st, R_END);
    return end - sqlite3_column_double(st, R_START);
}

static rs_status kv_row(rs_table *t, const char *k, const char *v, rs_err *err)
{
    if (!v || !*v) return RS_OK; /* nothing to say: no row */
    const char *cells[2] = {k, v};
    return add_row(t, cells, err);
}

/* Prints a section title and its table, when it has rows. */
static void section(FILE *f, const char *title, rs_table *t, int max_width, unsigned flags)
{
    if (!rs_table_nrows(t)) return;
    fprintf(f, "\n%s\n", title);
    rs_table_print(f, t, max_width, flags);
}

static rs_status kv_table(const kv_list *l, rs_table **out, rs_err *err)
{
    static const char *const names[] = {"key", "value"};
    rs_table *t = *out = new_table(2, names, err);
    if (!t) return RS_ERR_NOMEM;
    rs_table_set_align(t, 1, RS_TABLE_LEFT);
    for (size_t i = 0; i < l->n; i++) {
        const char *cells[2] = {l->keys[i], l->vals[i]};
        if (add_row(t, cells, err)) return RS_ERR_NOMEM;
    }
    return RS_OK;
}

static void metric_cells(sqlite3_stmt *st, const char **c, char (*buf)[64])
{
    c[0] = rs_slog__col(st, 0);
    c[1] = rs_slog__col(st, 1);
    c[2] = rs_slog__col(st, 2);
    snprintf(buf[3], 64, "%s..%s", rs_slog__col(st, 3), rs_slog__col(st, 4));
    c[3] = buf[3];
    for (int i = 4; i < 8; i++)
        c[i] =
            sqlite3_column_type(st, i + 1) == SQLITE_NULL ? "" : fmt_num(sqlite3_column_double(st, i + 1), buf[i], 64);
}

static void event_cells(sqlite3_stmt *st, const char **c, char (*buf)[64])
{
    (void)buf;
    for (int i = 0; i < 5; i++) c[i] = rs_slog__col(st, i);
}

static void artifact_cells(sqlite3_stmt *st, const char **c, char (*buf)[64])
{
    (void)buf;
    for (int i = 0; i < 5; i++) c[i] = rs_slog__col(st, i);
}

rs_status rs_slog_show_run(rs_slog *log, int64_t run, FILE *f, int max_width, rs_err *err)
{
    if (!log) return rs_err_set(err, RS_ERR_ARG, "no session log");
    rs_slog_flush(log);
    sqlite3_stmt *r;
    rs_status s = load_run(log, run, &r, err);
    if (s) return s;
    char b[8][1024], title[128]; /* b[0] holds a whole model spec */
    rs_table *head = NULL, *opts = NULL, *fin = NULL, *met = NULL, *ev = NULL, *art = NULL;
    kv_list lo = {0}, lf = {0};
    static const char *const kv_names[] = {"key", "value"};
    if (!(head = new_table(2, kv_names, err))) goto nomem;
    rs_table_set_align(head, 1, RS_TABLE_LEFT);
    snprintf(title, sizeof title, "session %s, command %s", rs_slog__col(r, R_SESSION), rs_slog__col(r, R_CMD));
    const char *spec = rs_slog__col(r, R_SPEC);
    if (*spec && *rs_slog__col(r, R_MODEL))
        snprintf(b[0], sizeof b[0], "%s = %s", rs_slog__col(r, R_MODEL), spec);
    else
        snprintf(b[0], sizeof b[0], "%s%s", rs_slog__col(r, R_MODEL), spec);
    snprintf(b[1], sizeof b[1], "%s", rs_slog__col(r, R_WORLD));
    if ((s = kv_row(head, "kind", rs_slog__col(r, R_KIND), err)) ||
        (s = kv_row(head, "command", rs_slog__col(r, R_CMD_TEXT), err)) ||
        (s = kv_row(head, "from", sqlite3_column_type(r, R_CMD) == SQLITE_NULL ? "" : title, err)) ||
        (s = kv_row(head, "model", b[0], err)) || (s = kv_row(head, "data", rs_slog__col(r, R_DATA), err)) ||
        (s = kv_row(head, "mode", rs_slog__col(r, R_MODE), err)) ||
        (s = kv_row(head, "backend", rs_slog__col(r, R_BACKEND), err)) || (s = kv_row(head, "ranks", b[1], err)) ||
        (s = kv_row(head, "status", rs_slog__col(r, R_STATUS), err)) ||
        (s = kv_row(head, "steps", rs_slog__col(r, R_STEPS), err)) ||
        (s = kv_row(head, "started", rs_slog__fmt_time(sqlite3_column_double(r, R_START), b[2], 64, true), err)) ||
        (s = kv_row(head, "ended", rs_slog__fmt_time(sqlite3_column_double(r, R_END), b[3], 64, true), err)) ||
        (s = kv_row(head, "duration", fmt_duration(run_duration(r), b[4], 64), err)) ||
        (s = kv_row(head, "error", rs_slog__col(r, R_ERROR), err)))
        goto out;
    if (!flatten_text((const char *)sqlite3_column_text(r, R_OPTIONS), &lo) ||
        !flatten_text((const char *)sqlite3_column_text(r, R_FINAL), &lf))
        goto nomem;
    if ((s = kv_table(&lo, &opts, err)) || (s = kv_table(&lf, &fin, err))) goto out;

    static const char *const met_names[] = {"metric", "rows", "ranks", "steps", "first", "last", "min", "max"};
    sqlite3_stmt *q;
    if (!(met = new_table(8, met_names, err))) goto nomem;
    /* first/last by step (then by row order): the index on (run_id, name, step) makes each a seek. */
    if ((s = rs_slog__query(
             log,
             "SELECT name, count(*), count(DISTINCT rank), min(step), max(step),"
             " (SELECT value FROM metrics x WHERE x.run_id = ?1 AND x.name = m.name ORDER BY step, id LIMIT 1),"
             " (SELECT value FROM metrics x WHERE x.run_id = ?1 AND x.name = m.name"
             "  ORDER BY step DESC, id DESC LIMIT 1),"
             " min(value), max(value) FROM metrics m WHERE run_id = ?1 GROUP BY name ORDER BY min(id)",
             &q, err)))
        goto out;
    sqlite3_bind_int64(q, 1, run);
    if ((s = fill(log, q, met, metric_cells, err))) goto out;

    static const char *const ev_names[] = {"event", "rows", "ranks", "names", "bytes"};
    if (!(ev = new_table(5, ev_names, err))) goto nomem;
    if ((s = rs_slog__query(log,
                            "SELECT kind, count(*), count(DISTINCT rank), group_concat(DISTINCT name), sum(bytes)"
                            " FROM events WHERE run_id = ?1 GROUP BY kind ORDER BY min(id)",
                            &q, err)))
        goto out;
    sqlite3_bind_int64(q, 1, run);
    if ((s = fill(log, q, ev, event_cells, err))) goto out;

    static const char *const art_names[] = {"artifact", "kind", "bytes", "sha256", "path"};
    if (!(art = new_table(5, art_names, err))) goto nomem;
    if ((s = rs_slog__query(
             log,
             "SELECT id, kind, bytes, substr(sha256, 1, 16) || '…', path FROM artifacts WHERE run_id = ?1"
             " ORDER BY id",
             &q, err)))
        goto out;
    sqlite3_bind_int64(q, 1, run);
    if ((s = fill(log, q, art, artifact_cells, err))) goto out;

    fprintf(f, "run %lld\n", (long long)run);
    rs_table_print(f, head, max_width, RS_TABLE_NO_HEADER);
    section(f, "options", opts, max_width, RS_TABLE_NO_HEADER);
    section(f, "final", fin, max_width, RS_TABLE_NO_HEADER);
    section(f, "metrics", met, max_width, 0);
    section(f, "events", ev, max_width, 0);
    section(f, "artifacts", art, max_width, 0);
    goto out;
nomem:
    s = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
out:
    sqlite3_finalize(r);
    kv_clear(&lo);
    kv_clear(&lf);
    rs_table_free(head);
    rs_table_free(opts);
    rs_table_free(fin);
    rs_table_free(met);
    rs_table_free(ev);
    rs_table_free(art);
    return s;
}

/* ---- compare ---------------------------------------------------------------------------------- */

/* diff of two cells: "" when equal, b - a for two numbers with the same unit, else "*". */
static const char *diff_text(const char *a, const char *b, char *buf, size_t size)
{
    if (strcmp(a, b) == 0) return "";
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    if (ea == a || eb == b || strcmp(ea, eb) != 0) return "*";
    if (x == y) return "";
    snprintf(buf, size, "%+.4g%s", y - x, ea);
    return buf;
}

static rs_status cmp_row(rs_table *t, const char *field, const char *a, const char *b, rs_err *err)
{
    char d[64];
    a = a ? a : "";
    b = b ? b : "";
    const char *cells[4] = {field, a, b, diff_text(a, b, d, sizeof d)};
    return add_row(t, cells, err);
}

/* Both runs' entries of a flattened object, A's order first, then what only B has. */
static rs_status cmp_section(rs_table *t, const char *title, const kv_list *a, const kv_list *b, rs_err *err)
{
    if (!a->n && !b->n) return RS_OK;
    const char *head[4] = {title, "", "", ""};
    rs_status s = add_row(t, head, err);
    char key[300];
    for (size_t i = 0; !s && i < a->n; i++) {
        snprintf(key, sizeof key, "  %s", a->keys[i]);
        s = cmp_row(t, key, a->vals[i], kv_get(b, a->keys[i]), err);
    }
    for (size_t i = 0; !s && i < b->n; i++) {
        if (kv_get(a, b->keys[i])) continue;
        snprintf(key, sizeof key, "  %s", b->keys[i]);
        s = cmp_row(t, key, NULL, b->vals[i], err);
    }
    return s;
}

rs_status rs_slog_compare(rs_slog *log, int64_t a, int64_t b, rs_table **out, rs_err *err)
{
    *out = NULL;
    if (!log) return rs_err_set(err, RS_ERR_ARG, "no session log");
    rs_slog_flush(log);
    sqlite3_stmt *ra = NULL, *rb = NULL;
    rs_status s;
    if ((s = load_run(log, a, &ra, err)) || (s = load_run(log, b, &rb, err))) {
        sqlite3_finalize(ra);
        return s;
    }
    char na[32], nb[32];
    snprintf(na, sizeof na, "run %lld", (long long)a);
    snprintf(nb, sizeof nb, "run %lld", (long long)b);
    const char *names[4] = {"", na, nb, "diff"};
    kv_list oa = {0}, ob = {0}, fa = {0}, fb = {0};
    rs_table *t = new_table(4, names, err);
    if (!t) {
        s = RS_ERR_NOMEM;
        goto out;
    }
    rs_table_set_align(t, 1, RS_TABLE_LEFT);
    rs_table_set_align(t, 2, RS_TABLE_LEFT);
    static const struct {
        const char *label;
        int col;
    } fields[] = {
        {"kind", R_KIND},       {"model", R_MODEL}, {"spec", R_SPEC},     {"data", R_DATA},   {"mode", R_MODE},
        {"backend", R_BACKEND}, {"ranks", R_WORLD}, {"status", R_STATUS}, {"steps", R_STEPS},
    };
    for (size_t i = 0; !s && i < sizeof fields / sizeof fields[0]; i++)
        s = cmp_row(t, fields[i].label, rs_slog__col(ra, fields[i].col), rs_slog__col(rb, fields[i].col), err);
    char da[32], db[32];
    if (!s)
        s = cmp_row(t, "duration", fmt_duration(run_duration(ra), da, sizeof da),
                    fmt_duration(run_duration(rb), db, sizeof db), err);
    if (s) goto out;
    if (!flatten_text((const char *)sqlite3_column_text(ra, R_OPTIONS), &oa) ||
        !flatten_text((const char *)sqlite3_column_text(rb, R_OPTIONS), &ob) ||
        !flatten_text((const char *)sqlite3_column_text(ra, R_FINAL), &fa) ||
        !flatten_text((const char *)sqlite3_column_text(rb, R_FINAL), &fb)) {
        s = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((s = cmp_section(t, "options", &oa, &ob, err)) || (s = cmp_section(t, "final", &fa, &fb, err))) goto out;
    *out = t;
    t = NULL;
out:
    rs_table_free(t);
    kv_clear(&oa);
    kv_clear(&ob);
    kv_clear(&fa);
    kv_clear(&fb);
    sqlite3_finalize(ra);
    sqlite3_finalize(rb);
    return s;
}

/* ---- history and sessions ------------------------------------------------------------------------ */

static void history_cells(sqlite3_stmt *st, const char **c, char (*buf)[64])
{
    c[0] = rs_slog__col(st, 0);
    c[1] = rs_slog__col(st, 1);
    c[2] = rs_slog__fmt_time(sqlite3_column_double(st, 2), buf[2], 64, true);
    c[3] = rs_slog__col(st, 3);
    c[4] = rs_slog__col(st, 4);
}

rs_status rs_slog_history(rs_slog *log, int limit, rs_table **out, rs_err *err)
{
    *out = NULL;
    if (!log) return rs_err_set(err, RS_ERR_ARG, "no session log");
    static const char *const names[] = {"session", "seq", "when", "status", "command"};
    sqlite3_stmt *st;
    rs_status s = rs_slog__query(log,
                                 "SELECT * FROM (SELECT session_id, seq, started_at, status, text, id FROM commands"
                                 " ORDER BY id DESC LIMIT ?1) ORDER BY id",
                                 &st, err);
    if (s) return s;
    sqlite3_bind_int(st, 1, limit > 0 ? limit : 20);
    rs_table *t = new_table(5, names, err);
    if (!t) {
        sqlite3_finalize(st);
        return RS_ERR_NOMEM;
    }
    rs_table_set_align(t, 4, RS_TABLE_LEFT);
    if ((s = fill(log, st, t, history_cells, err))) {
        rs_table_free(t);
        return s;
    }
    *out = t;
    return RS_OK;
}

static void session_cells(sqlite3_stmt *st, const char **c, char (*buf)[64])
{
    double start = sqlite3_column_double(st, 1);
    double end = sqlite3_column_type(st, 2) == SQLITE_NULL ? rs_slog__wall() : sqlite3_column_double(st, 2);
    c[0] = rs_slog__col(st, 0);
    c[1] = rs_slog__fmt_time(start, buf[1], 64, false);
    c[2] = fmt_duration(end - start, buf[2], 64);
    for (int i = 3; i < 8; i++) c[i] = rs_slog__col(st, i);
}

rs_status rs_slog_sessions(rs_slog *log, int limit, rs_table **out, rs_err *err)
{
    *out = NULL;
    if (!log) return rs_err_set(err, RS_ERR_ARG, "no session log");
    static const char *const names[] = {"id", "started", "time", "host", "status", "commands", "runs", "argv"};
    sqlite3_stmt *st;
    rs_status s = rs_slog__query(log,
                                 "SELECT * FROM (SELECT s.id, s.started_at, s.ended_at, s.host, s.status,"
                                 " (SELECT count(*) FROM commands WHERE session_id = s.id),"
                                 " (SELECT count(*) FROM runs WHERE session_id = s.id), s.argv"
                                 " FROM sessions s ORDER BY s.id DESC LIMIT ?1) ORDER BY 1",
                                 &st, err);
    if (s) return s;
    sqlite3_bind_int(st, 1, limit > 0 ? limit : 20);
    rs_table *t = new_table(8, names, err);
    if (!t) {
        sqlite3_finalize(st);
        return RS_ERR_NOMEM;
    }
    if ((s = fill(log, st, t, session_cells, err))) {
        rs_table_free(t);
        return s;
    }
    *out = t;
    return RS_OK;
}
