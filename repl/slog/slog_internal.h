/* What the session log's files share and nobody else sees: the rs_slog struct, its cached statements
 * and the row buffers. Names here carry rs_slog__ (two underscores): internal, linked across
 * slog*.c only. */
#ifndef RS_SLOG_INTERNAL_H
#define RS_SLOG_INTERNAL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "repl/slog/slog.h"

/* Statements prepared once at open and reused (bind, step, reset). */
enum {
    SLOG_ST_CMD_BEGIN,
    SLOG_ST_CMD_END,
    SLOG_ST_RUN_BEGIN,
    SLOG_ST_RUN_END,
    SLOG_ST_METRIC,
    SLOG_ST_EVENT,
    SLOG_ST_ARTIFACT,
    SLOG_ST_COUNT
};

/* Rows wait in these buffers until a flush; strings live in one arena (`strs`) by offset, so a
 * buffered row costs no allocation of its own. */
#define SLOG_NOSTR UINT32_MAX
#define SLOG_FLUSH_ROWS 512
#define SLOG_FLUSH_SECONDS 0.5

typedef struct slog_metric_row {
    int64_t run, step;
    double value, t;
    int rank, epoch;
    uint32_t name;
} slog_metric_row;

typedef struct slog_event_row {
    int64_t run, step, coll, astep, chunk, bytes;
    double t, value;
    int rank, peer;
    uint32_t kind, name, algo, detail;
} slog_event_row;

struct rs_slog {
    sqlite3 *db;
    char *path;
    int64_t session;
    int64_t cmd_seq; /* commands.seq of the last command of this session */
    sqlite3_stmt *st[SLOG_ST_COUNT];

    slog_metric_row metrics[SLOG_FLUSH_ROWS];
    slog_event_row events[SLOG_FLUSH_ROWS];
    int nmetrics, nevents;
    char *strs;
    size_t strs_len, strs_cap;
    double last_flush; /* monotonic seconds */
    uint64_t lost;     /* buffered rows that could not be written */

    volatile sig_atomic_t *interrupt; /* borrowed; stops `sql` queries */

    bool has_error;
    char error[RS_ERR_MSG_MAX];
};

double rs_slog__wall(void);      /* unix seconds, wall clock */
double rs_slog__monotonic(void); /* seconds, for flush intervals */

/* Records the first write failure: "session log PATH: what: sqlite's message". */
void rs_slog__fail(rs_slog *log, const char *what, const char *why);
void rs_slog__fail_db(rs_slog *log, const char *what);

/* Brings the schema of an open connection to RS_SLOG_SCHEMA_VERSION (slog_schema.c). */
rs_status rs_slog__migrate(sqlite3 *db, const char *path, rs_err *err);

/* Prepares the cached statements (slog_write.c). */
rs_status rs_slog__prepare(rs_slog *log, rs_err *err);
void rs_slog__finalize(rs_slog *log);

/* Reader helpers shared by slog_query.c and slog_export.c. */
const char *rs_slog__col(sqlite3_stmt *st, int i); /* a column as text, "" for NULL */
rs_status rs_slog__query(rs_slog *log, const char *sql, sqlite3_stmt **st, rs_err *err); /* prepare */
rs_status rs_slog__query_error(rs_slog *log, const char *what, rs_err *err);
/* Local time "YYYY-MM-DD HH:MM[:SS]", "" for t <= 0. */
const char *rs_slog__fmt_time(double t, char *buf, size_t size, bool seconds);

#endif
