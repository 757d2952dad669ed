/* Session log: crash recovery with real processes. A child that is killed with SIGKILL mid-run leaves a
 * log that opens, keeps every earlier command, and shows the run `interrupted` and the session
 * `crashed` after the next open (reaped or still a zombie). A live process's running run is left
 * alone. A process that exec()s ringside again sees its former self as dead. A reused pid (same pid,
 * another process) is not taken for the old session; a session of another host is left alone. */
#include "slog_util.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "repl/slog/slog.h"
#include "tests/rs_test.h"

static char self_exe[1024];

/* The child's part: open, log two commands and a run with metrics, flush, tell the parent (one byte
 * on `ready`), then wait for a byte on `go` (or to be killed), and finish cleanly if it comes. */
static void child_run(const char *db, int ready, int go)
{
    rs_err err = {0};
    rs_slog *log = NULL;
    if (rs_slog_open(db, "child", &log, &err)) {
        fprintf(stderr, "child: %s\n", err.msg);
        _exit(2);
    }
    int64_t c1 = rs_slog_command_begin(log, "model m = mlp 784-32-10", "tty");
    rs_slog_command_end(log, c1, "ok", NULL);
    int64_t c2 = rs_slog_command_begin(log, "train m on d epochs=100", "tty");
    int64_t run = rs_slog_run_begin(log, c2, &(rs_slog_run_info){.kind = "train", .model = "m"});
    for (int s = 0; s < 100; s++) rs_slog_metric(log, run, 0, s, 0, "loss", 1.0 / (s + 1));
    rs_slog_flush(log);
    for (int s = 100; s < 110; s++)
        rs_slog_metric(log, run, 0, s, 0, "loss", 1.0 / (s + 1)); /* lost with the process */
    char b = 1;
    if (write(ready, &b, 1) != 1) _exit(3);
    if (read(go, &b, 1) != 1) _exit(4);
    rs_slog_run_end(log, run, "done", 110, "{\"test_acc\":0.5}", NULL);
    rs_slog_command_end(log, c2, "ok", NULL);
    rs_slog_close(log);
    _exit(0);
}

typedef struct child {
    pid_t pid;
    int ready, go; /* parent's ends */
} child;

static child start_child(const char *db)
{
    int r[2], g[2];
    if (pipe(r) || pipe(g)) {
        perror("pipe");
        exit(1);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(r[0]);
        close(g[1]);
        child_run(db, r[1], g[0]);
    }
    close(r[1]);
    close(g[0]);
    child c = {pid, r[0], g[1]};
    char b;
    if (read(c.ready, &b, 1) != 1) {
        fprintf(stderr, "child did not get ready\n");
        exit(1);
    }
    return c;
}

static void check_interrupted(const char *db, const char *what)
{
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM runs WHERE id = 1"), "interrupted") == 0, "%s: run %s", what,
             q_text(db, "SELECT status FROM runs WHERE id = 1"));
    RS_CHECK(strstr(q_text(db, "SELECT error FROM runs WHERE id = 1"), "killed or crashed") != NULL, "%s: why: %s",
             what, q_text(db, "SELECT error FROM runs WHERE id = 1"));
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM sessions WHERE id = 1"), "crashed") == 0, "%s: session %s", what,
             q_text(db, "SELECT status FROM sessions WHERE id = 1"));
    RS_CHECK(strcmp(q_text(db, "SELECT group_concat(status, ',') FROM commands WHERE session_id = 1"),
                    "ok,interrupted") == 0,
             "%s: commands %s", what,
             q_text(db, "SELECT group_concat(status, ',') FROM commands WHERE session_id = 1"));
    RS_CHECK(strcmp(q_text(db, "SELECT text FROM commands WHERE session_id = 1 AND seq = 1"),
                    "model m = mlp 784-32-10") == 0,
             "%s: earlier command kept", what);
    RS_CHECK(q_int(db, "SELECT count(*) FROM metrics WHERE run_id = 1") == 100, "%s: flushed metrics kept", what);
    /* The end time is the last thing the dead process wrote, not the time of the recovery. */
    RS_CHECK(q_int(db, "SELECT r.ended_at = (SELECT max(t) FROM metrics) AND s.ended_at >= r.ended_at"
                       " FROM runs r, sessions s WHERE r.id = 1 AND s.id = 1") == 1,
             "%s: end times", what);
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM sessions WHERE id = 2"), "open") == 0, "%s: new session open", what);
}

static void test_kill9(const char *dir, bool reap_first)
{
    const char *db = slog_path(dir, reap_first ? "kill9.db" : "zombie.db");
    child c = start_child(db);
    kill(c.pid, SIGKILL);
    int status = 0;
    if (reap_first)
        waitpid(c.pid, &status, 0);
    else {
        /* Wait until it is a zombie: killed, not yet reaped. */
        char path[64], st[256] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)c.pid);
        for (int i = 0; i < 500; i++) {
            FILE *f = fopen(path, "r");
            if (f) {
                if (!fgets(st, sizeof st, f)) st[0] = '\0';
                fclose(f);
            }
            if (strstr(st, ") Z")) break;
            usleep(2000);
        }
    }
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM runs WHERE id = 1"), "running") == 0, "left running by the dead");
    rs_err err = {0};
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "reopen after kill -9: %s", err.msg);
    check_interrupted(db, reap_first ? "kill -9" : "zombie");
    RS_CHECK(strcmp(q_text(db, "PRAGMA integrity_check"), "ok") == 0, "integrity");
    rs_slog_close(log);
    if (!reap_first) waitpid(c.pid, &status, 0);
    RS_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child was killed");
    close(c.ready);
    close(c.go);
}

static void test_live_other_process(const char *dir)
{
    const char *db = slog_path(dir, "live.db");
    child c = start_child(db);
    rs_err err = {0};
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "open beside a live process: %s", err.msg);
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM runs WHERE id = 1"), "running") == 0, "live run left running: %s",
             q_text(db, "SELECT status FROM runs WHERE id = 1"));
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM sessions WHERE id = 1"), "open") == 0, "live session left open");
    /* Both write at once. */
    int64_t cmd = rs_slog_command_begin(log, "runs", "tty");
    rs_slog_command_end(log, cmd, "ok", NULL);
    char b = 1;
    RS_CHECK(write(c.go, &b, 1) == 1, "tell the child to finish");
    int status = 0;
    waitpid(c.pid, &status, 0);
    RS_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child finished cleanly (status %d)", status);
    RS_CHECK(strcmp(q_text(db, "SELECT status || ' ' || steps FROM runs WHERE id = 1"), "done 110") == 0,
             "child's run done: %s", q_text(db, "SELECT status || ' ' || steps FROM runs WHERE id = 1"));
    RS_CHECK(q_int(db, "SELECT count(*) FROM metrics WHERE run_id = 1") == 110, "all its metrics");
    rs_slog_close(log);
    RS_CHECK(q_int(db, "SELECT count(*) FROM sessions WHERE status = 'closed'") == 2, "both sessions closed");
    close(c.ready);
    close(c.go);
}

/* The second half of the exec test, in the re-executed image: the same pid opens the log again. */
static int exec_stage2(const char *db)
{
    rs_err err = {0};
    rs_slog *log = NULL;
    if (rs_slog_open(db, "after exec", &log, &err)) {
        fprintf(stderr, "stage2: %s\n", err.msg);
        return 2;
    }
    rs_slog_close(log);
    return 0;
}

static void test_exec(const char *dir)
{
    const char *db = slog_path(dir, "exec.db");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        rs_err err = {0};
        rs_slog *log = NULL;
        if (rs_slog_open(db, "before exec", &log, &err)) _exit(3);
        int64_t cmd = rs_slog_command_begin(log, "train m on d", "tty");
        int64_t run = rs_slog_run_begin(log, cmd, &(rs_slog_run_info){.kind = "train"});
        rs_slog_metric(log, run, 0, 0, 0, "loss", 1);
        rs_slog_flush(log);
        /* exec without closing: the log's memory is gone, its session row still says `open`. */
        execl(self_exe, self_exe, "exec-stage2", db, (char *)NULL);
        _exit(4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    RS_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exec child status %d", status);
    RS_CHECK(q_int(db, "SELECT count(DISTINCT pid) FROM sessions") == 1, "one pid for both sessions");
    RS_CHECK(strcmp(q_text(db, "SELECT group_concat(status, ',') FROM sessions"), "crashed,closed") == 0,
             "the pre-exec session is crashed: %s", q_text(db, "SELECT group_concat(status, ',') FROM sessions"));
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM runs"), "interrupted") == 0, "its run interrupted");
}

static void test_forged_sessions(const char *dir)
{
    /* Rows as other processes would leave them: our parent's pid with a start stamp that is not its
     * own (the pid was reused), and a dead pid on another host (not ours to judge). */
    const char *db = slog_path(dir, "forged.db");
    rs_err err = {0};
    rs_slog *log = NULL;
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "open: %s", err.msg);
    rs_slog_close(log);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char sql[1024];
    snprintf(sql, sizeof sql,
             "INSERT INTO sessions (id, started_at, pid, host, proc_start, version) VALUES"
             " (10, 1.7e9, %d, '%s', 'another-boot:1', 'x'), (11, 1.7e9, 2147483000, 'elsewhere', NULL, 'x');"
             "INSERT INTO runs (id, session_id, kind, started_at) VALUES (10, 10, 'train', 1.7e9), (11, 11, 'train', "
             "1.7e9);",
             (int)getppid(), host);
    RS_CHECK(q_exec(db, sql) == SQLITE_OK, "forge");
    RS_CHECK(rs_slog_open(db, NULL, &log, &err) == RS_OK, "open: %s", err.msg);
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM runs WHERE id = 10"), "interrupted") == 0, "reused pid: run %s",
             q_text(db, "SELECT status FROM runs WHERE id = 10"));
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM sessions WHERE id = 10"), "crashed") == 0, "reused pid: session");
    RS_CHECK(q_real(db, "SELECT ended_at FROM sessions WHERE id = 10") == 1.7e9, "ended at its last sign of life");
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM runs WHERE id = 11"), "running") == 0, "other host: left alone");
    RS_CHECK(strcmp(q_text(db, "SELECT status FROM sessions WHERE id = 11"), "open") == 0, "other host: still open");
    rs_slog_close(log);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "exec-stage2") == 0) return exec_stage2(argv[2]);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) RS_SKIP("no /proc/self/exe: crash recovery needs Linux /proc");
    self_exe[n] = '\0';
    const char *dir = slog_tmpdir();
    test_kill9(dir, true);
    test_kill9(dir, false);
    test_live_other_process(dir);
    test_exec(dir);
    test_forged_sessions(dir);
    return rs_test_finish("slog-crash");
}
