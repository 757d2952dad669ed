/* Session log: writing. Commands, runs, metrics, events and artifacts land in their tables as they
 * should; metrics and events are buffered (visible after a flush, at 512 rows, after half a second,
 * and at close); a failing write sets the last error instead of stopping anything; an artifact's
 * SHA-256 agrees with sha256sum. Prints the time to log 100k metrics. */
#include "slog_util.h"

#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include "repl/slog/slog.h"
#include "tests/rs_test.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t count(const char *db, const char *table, int64_t run)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE run_id = %lld", table, (long long)run);
    return q_int(db, sql);
}

/* A ring step's chunk move on rank 2 and a memory snapshot with most fields unset, as the ranks log them. */
static void log_two_events(rs_slog *log, int64_t run)
{
    rs_slog_event_info ev = RS_SLOG_EVENT_INIT;
    ev.kind = "coll_step";
    ev.name = "allreduce";
    ev.algo = "ring";
    ev.rank = 2;
    ev.coll = 7;
    ev.astep = 1;
    ev.chunk = 3;
    ev.peer = 3;
    ev.bytes = 4096;
    ev.step = 5;
    rs_slog_event(log, run, &ev);
    rs_slog_event_info mem = RS_SLOG_EVENT_INIT;
    mem.kind = "memory";
    mem.name = "grads";
    mem.bytes = 1 << 20;
    mem.value = 2 << 20;
    mem.detail_json = "{\"device\":\"cpu\"}";
    rs_slog_event(log, run, &mem);
}

static void test_rows(const char *dir)
{
    const char *db = slog_path(dir, "rows.db");
    rs_err err = {0};
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, "ringside -c 'train m on d'", &log, &err) == RS_OK, "open: %s", err.msg);
    if (!log) return;

    int64_t c1 = rs_slog_command_begin(log, "model m = mlp 784-256-10", "tty");
    rs_slog_command_end(log, c1, "ok", NULL);
    int64_t c2 = rs_slog_command_begin(log, "train m on dd", "script:tour.ring:3");
    rs_slog_command_end(log, c2, "error", "train: unknown name 'dd' (did you mean 'd'?)");
    int64_t c3 = rs_slog_command_begin(log, "train m on d epochs=2", "-c");
    RS_CHECK(c1 > 0 && c2 > c1 && c3 > c2, "command ids %lld %lld %lld", (long long)c1, (long long)c2, (long long)c3);
    RS_CHECK(strcmp(q_text(db, "SELECT group_concat(seq || ':' || status || ':' || source, ' ') FROM commands"),
                    "1:ok:tty 2:error:script:tour.ring:3 3:running:-c") == 0,
             "commands: %s",
             q_text(db, "SELECT group_concat(seq || ':' || status || ':' || source, ' ') FROM commands"));
    RS_CHECK(strcmp(q_text(db, "SELECT error FROM commands WHERE seq = 2"),
                    "train: unknown name 'dd' (did you mean 'd'?)") == 0,
             "error text kept");
    RS_CHECK(q_int(db, "SELECT count(*) FROM commands WHERE seq = 1 AND ended_at >= started_at") == 1, "times");

    rs_slog_run_info info = {.kind = "train",
                             .model = "m",
                             .model_spec = "mlp 784-256-10",
                             .dataset = "d",
                             .options_json = "{\"epochs\":2,\"lr\":0.05,\"opt\":\"adam\"}",
                             .mode = "ddp",
                             .backend = "shm",
                             .world_size = 4};
    int64_t run = rs_slog_run_begin(log, c3, &info);
    RS_CHECK(run > 0, "run id");
    RS_CHECK(
        strcmp(q_text(db, "SELECT status || ' ' || mode || ' ' || world_size || ' ' || json_extract(options, '$.lr')"
                          " FROM runs"),
               "running ddp 4 0.05") == 0,
        "run row: %s", q_text(db, "SELECT status || mode || world_size FROM runs"));

    for (int s = 0; s < 10; s++) {
        rs_slog_metric(log, run, 0, s, 0, "loss", 2.0 / (s + 1));
        rs_slog_metric(log, run, 1, s, 0, "loss", 2.1 / (s + 1));
    }
    rs_slog_metric(log, run, 0, 10, 1, "loss", NAN);
    log_two_events(log, run);
    RS_CHECK(count(db, "metrics", run) == 0 && count(db, "events", run) == 0, "buffered: nothing on disk yet");
    rs_slog_flush(log);
    RS_CHECK(count(db, "metrics", run) == 21, "metrics after flush: %lld", (long long)count(db, "metrics", run));
    RS_CHECK(count(db, "events", run) == 2, "events after flush");
    RS_CHECK(q_int(db, "SELECT count(*) FROM metrics WHERE rank = 1 AND name = 'loss'") == 10, "per-rank rows");
    RS_CHECK(strcmp(q_text(db, "SELECT value FROM metrics WHERE step = 10"), "<null>") == 0, "NaN stored as NULL");
    RS_CHECK(
        strcmp(q_text(db, "SELECT printf('%d %s %s %s %d %d %d %d %d %d', rank, kind, name, algo, coll, astep, chunk,"
                          " peer, bytes, step) FROM events WHERE kind = 'coll_step'"),
               "2 coll_step allreduce ring 7 1 3 3 4096 5") == 0,
        "ring chunk move: %s", q_text(db, "SELECT * FROM events"));
    RS_CHECK(q_int(db, "SELECT count(*) FROM events WHERE kind = 'memory' AND step IS NULL AND peer IS NULL"
                       " AND chunk IS NULL AND coll IS NULL AND algo IS NULL AND value = 2097152"
                       " AND json_extract(detail, '$.device') = 'cpu'") == 1,
             "memory snapshot: unset fields are NULL");

    rs_slog_run_end(log, run, "done", 10, "{\"test_acc\":0.9712,\"loss\":0.084}", NULL);
    rs_slog_command_end(log, c3, "ok", NULL);
    RS_CHECK(strcmp(q_text(db, "SELECT status || ' ' || steps || ' ' || json_extract(final, '$.test_acc') FROM runs"),
                    "done 10 0.9712") == 0,
             "run end: %s", q_text(db, "SELECT status || steps || final FROM runs"));

    /* Text that is not JSON is kept, as a JSON string. */
    info.options_json = "epochs=2 lr=0.05";
    int64_t run2 = rs_slog_run_begin(log, 0, &info);
    RS_CHECK(run2 > 0, "run with non-JSON options still logged");
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT json_extract(options, '$') FROM runs WHERE id = %lld", (long long)run2);
    RS_CHECK(strcmp(q_text(db, sql), "epochs=2 lr=0.05") == 0, "options as a JSON string: %s", q_text(db, sql));

    /* A failing write: recorded, not fatal. */
    RS_CHECK(rs_slog_last_error(log) == NULL, "no error so far: %s", rs_slog_last_error(log));
    rs_slog_run_end(log, run2, "exploded", 0, NULL, NULL);
    const char *e = rs_slog_last_error(log);
    RS_CHECK(e && strstr(e, db) && strstr(e, "ending a run") && strstr(e, "CHECK"), "last error: %s", e ? e : "(none)");
    rs_slog_clear_error(log);
    RS_CHECK(rs_slog_last_error(log) == NULL, "cleared");
    rs_slog_metric(log, 999999, 0, 0, 0, "loss", 1); /* no such run: a foreign key failure at flush */
    rs_slog_metric(log, run2, 0, 0, 0, "loss", 1);
    rs_slog_flush(log);
    e = rs_slog_last_error(log);
    RS_CHECK(e && strstr(e, "FOREIGN KEY"), "bad run id reported: %s", e ? e : "(none)");
    RS_CHECK(rs_slog_lost_rows(log) == 1, "one row lost");
    RS_CHECK(count(db, "metrics", run2) == 1, "the good row of the batch still written");
    rs_slog_clear_error(log);

    /* A command left running and a run left running are closed as interrupted by close. */
    int64_t c4 = rs_slog_command_begin(log, "train m on d epochs=100", "tty");
    int64_t run3 = rs_slog_run_begin(log, c4, &info);
    rs_slog_metric(log, run3, 0, 1, 0, "loss", 1.5);
    int64_t sid = rs_slog_session(log);
    rs_slog_close(log);
    snprintf(sql, sizeof sql, "SELECT status || ' ' || (error IS NOT NULL) FROM runs WHERE id = %lld", (long long)run3);
    RS_CHECK(strcmp(q_text(db, sql), "interrupted 1") == 0, "run left running: %s", q_text(db, sql));
    RS_CHECK(count(db, "metrics", run3) == 1, "buffered metric written at close");
    snprintf(sql, sizeof sql, "SELECT status FROM commands WHERE id = %lld", (long long)c4);
    RS_CHECK(strcmp(q_text(db, sql), "interrupted") == 0, "command left running: %s", q_text(db, sql));
    snprintf(sql, sizeof sql, "SELECT status FROM sessions WHERE id = %lld", (long long)sid);
    RS_CHECK(strcmp(q_text(db, sql), "closed") == 0, "session closed");
    RS_CHECK(q_int(db, "PRAGMA foreign_key_check") == 0, "foreign keys consistent");
}

static void test_buffering(const char *dir)
{
    const char *db = slog_path(dir, "buffer.db");
    rs_err err = {0};
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "open: %s", err.msg);
    if (!log) return;
    int64_t run = rs_slog_run_begin(log, 0, &(rs_slog_run_info){.kind = "train"});
    /* 512 rows make a batch. */
    for (int i = 0; i < 600; i++) rs_slog_metric(log, run, 0, i, 0, "loss", i);
    RS_CHECK(count(db, "metrics", run) == 512, "one batch of 512 written: %lld", (long long)count(db, "metrics", run));
    /* Half a second after the last write, the next row writes what waits. */
    struct timespec half = {0, 600 * 1000 * 1000};
    nanosleep(&half, NULL);
    rs_slog_metric(log, run, 0, 600, 0, "loss", 600);
    RS_CHECK(count(db, "metrics", run) == 601, "written after 0.5 s: %lld", (long long)count(db, "metrics", run));
    /* And at close. */
    rs_slog_metric(log, run, 0, 601, 0, "loss", 601);
    rs_slog_event_info ev = RS_SLOG_EVENT_INIT;
    ev.kind = "phase";
    ev.name = "forward";
    ev.value = 0.001;
    rs_slog_event(log, run, &ev);
    RS_CHECK(count(db, "metrics", run) == 601 && count(db, "events", run) == 0, "waiting in the buffer");
    rs_slog_close(log);
    RS_CHECK(count(db, "metrics", run) == 602 && count(db, "events", run) == 1, "written at close");
    RS_CHECK(q_int(db, "SELECT sum(step) FROM metrics") == 601 * 602 / 2, "every row once");
}

static void test_timing(const char *dir)
{
    const char *db = slog_path(dir, "timing.db");
    rs_err err = {0};
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "open: %s", err.msg);
    if (!log) return;
    int64_t run = rs_slog_run_begin(log, 0, &(rs_slog_run_info){.kind = "bench"});
    static const char *const names[] = {"loss", "acc", "lr", "step_ms"};
    enum { N = 100000 };
    double t0 = now(), worst = 0;
    for (int i = 0; i < N; i++) {
        double a = now();
        rs_slog_metric(log, run, 0, i / 4, 0, names[i % 4], 1.0 / (i + 1));
        double d = now() - a;
        if (d > worst) worst = d;
    }
    double t1 = now();
    rs_slog_flush(log);
    double t2 = now();
    printf("100k buffered metrics: %.1f ms in rs_slog_metric (%.2f us/row, incl. %d batch writes; slowest call "
           "%.2f ms), %.2f ms final flush\n",
           1e3 * (t1 - t0), 1e6 * (t1 - t0) / N, N / 512, 1e3 * worst, 1e3 * (t2 - t1));
    RS_CHECK(count(db, "metrics", run) == N, "all 100k rows: %lld", (long long)count(db, "metrics", run));
    RS_CHECK(rs_slog_last_error(log) == NULL, "no error: %s", rs_slog_last_error(log));
    rs_slog_close(log);
}

/* sha256sum's answer for path, or "" when the tool is not there. */
static const char *sha256sum(const char *path, char out[65])
{
    out[0] = '\0';
    if (access("/usr/bin/sha256sum", X_OK) != 0 && access("/bin/sha256sum", X_OK) != 0) return out;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "sha256sum '%s' 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    if (!p) return out;
    if (fscanf(p, "%64s", out) != 1) out[0] = '\0';
    pclose(p);
    return out;
}

static void test_artifact(const char *dir)
{
    /* FIPS 180-2's "abc", independent of any tool. */
    const char *abc = slog_path(dir, "abc.txt");
    FILE *f = fopen(abc, "w");
    fputs("abc", f);
    fclose(f);
    char hex[65];
    int64_t bytes = 0;
    rs_err err = {0};
    RS_CHECK(rs_slog_sha256_file(abc, hex, &bytes, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "sha256(abc) %s",
             hex);
    RS_CHECK(bytes == 3, "bytes");

    /* A bigger file, more than one read buffer, against sha256sum. */
    const char *big = slog_path(dir, "model.bin");
    f = fopen(big, "wb");
    uint32_t x = 12345;
    for (int i = 0; i < 300000; i++) {
        x = x * 1664525u + 1013904223u;
        fwrite(&x, 4, 1, f);
    }
    fclose(f);
    const char *db = slog_path(dir, "artifacts.db");
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "open: %s", err.msg);
    if (!log) return;
    int64_t cmd = rs_slog_command_begin(log, "save m model.bin", "tty");
    int64_t run = rs_slog_run_begin(log, cmd, &(rs_slog_run_info){.kind = "train"});
    int64_t id = rs_slog_artifact(log, cmd, run, big, "checkpoint", &err);
    RS_CHECK(id > 0, "artifact logged: %s", err.msg);
    char want[65];
    if (sha256sum(big, want)[0]) {
        RS_CHECK(strcmp(q_text(db, "SELECT sha256 FROM artifacts"), want) == 0, "sha256 %s, sha256sum says %s",
                 q_text(db, "SELECT sha256 FROM artifacts"), want);
    } else {
        printf("sha256sum not found: comparing with it skipped\n");
    }
    RS_CHECK(q_int(db, "SELECT bytes FROM artifacts") == 1200000, "bytes");
    RS_CHECK(strcmp(q_text(db, "SELECT path FROM artifacts"), big) == 0 ||
                 q_text(db, "SELECT path FROM artifacts")[0] == '/',
             "absolute path: %s", q_text(db, "SELECT path FROM artifacts"));
    RS_CHECK(q_int(db, "SELECT count(*) FROM artifacts WHERE kind = 'checkpoint' AND run_id IS NOT NULL"
                       " AND command_id IS NOT NULL AND created_at > 1.6e9") == 1,
             "artifact row");

    /* A missing file: an error for the caller, nothing logged. */
    err.msg[0] = '\0';
    RS_CHECK(rs_slog_artifact(log, cmd, 0, slog_path(dir, "nope.onnx"), "onnx", &err) == 0, "missing file");
    RS_CHECK(strstr(err.msg, "nope.onnx") && err.code == RS_ERR_IO, "names the file: %s", err.msg);
    rs_slog_close(log);
    RS_CHECK(q_int(db, "SELECT count(*) FROM artifacts") == 1, "one artifact");
}

/* A full disk, simulated with a file size limit: writes fail, the failure is reported once through
 * the last error, nothing crashes, and logging works again when there is room. */
static void test_disk_full(const char *dir)
{
    const char *db = slog_path(dir, "full.db");
    rs_err err = {0};
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "open: %s", err.msg);
    if (!log) return;
    int64_t run = rs_slog_run_begin(log, 0, &(rs_slog_run_info){.kind = "train"});
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit then fails with EFBIG instead of killing us */
    struct rlimit old, tiny;
    getrlimit(RLIMIT_FSIZE, &old);
    tiny = old;
    tiny.rlim_cur = 64 * 1024;
    setrlimit(RLIMIT_FSIZE, &tiny);
    for (int i = 0; i < 20000; i++) rs_slog_metric(log, run, 0, i, 0, "loss", i);
    rs_slog_flush(log);
    int64_t c = rs_slog_command_begin(log, "train m on d", "tty");
    rs_slog_command_end(log, c, "ok", NULL);
    const char *e = rs_slog_last_error(log);
    RS_CHECK(e != NULL, "the failure is reported");
    RS_CHECK(rs_slog_lost_rows(log) > 0 && rs_slog_lost_rows(log) <= 20000, "lost rows counted: %llu",
             (unsigned long long)rs_slog_lost_rows(log));
    printf("disk full: %s\n", e ? e : "(none)");
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    rs_slog_clear_error(log);
    int64_t before = count(db, "metrics", run);
    for (int i = 0; i < 10; i++) rs_slog_metric(log, run, 0, i, 0, "after", i);
    c = rs_slog_command_begin(log, "runs", "tty");
    rs_slog_command_end(log, c, "ok", NULL);
    rs_slog_close(log);
    RS_CHECK(c > 0, "commands logged again once there is room");
    RS_CHECK(count(db, "metrics", run) == before + 10, "metrics too: %lld -> %lld", (long long)before,
             (long long)count(db, "metrics", run));
    RS_CHECK(strcmp(q_text(db, "PRAGMA integrity_check"), "ok") == 0, "file intact");
}

int main(void)
{
    const char *dir = slog_tmpdir();
    test_rows(dir);
    test_buffering(dir);
    test_timing(dir);
    test_artifact(dir);
    test_disk_full(dir);
    return rs_test_finish("slog-write");
}
