/* Launcher tests: the torchrun environment each rank sees, line capture under floods and split
 * writes, stopping everyone when a rank fails (exit code, signal, a rank ignoring SIGTERM), cancel,
 * timeout, a rank stopped by SIGSTOP named as the hung one, and no zombies afterwards. argv[1] is the
 * launch_child helper. */
#define _GNU_SOURCE
#include "dist/launch/launch.h"
#include "tests/rs_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static const char *child, *board_child;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Every test ends with this: the launcher must have reaped every rank. */
static void check_no_zombies(const char *what)
{
    errno = 0;
    pid_t p = waitpid(-1, NULL, WNOHANG);
    RS_CHECK(p == -1 && errno == ECHILD, "%s: a child is left over (waitpid gave %d, errno %d)", what, (int)p,
             errno);
}

/* Keeps the first line per rank and stream, and counts lines. */
typedef struct capture {
    char first[8][2][512];
    int lines[8][2];
} capture;

static void on_line_capture(void *ud, int rank, int is_stderr, const char *line)
{
    capture *c = ud;
    if (rank < 0 || rank >= 8) return;
    if (c->lines[rank][is_stderr]++ == 0) snprintf(c->first[rank][is_stderr], 512, "%s", line);
}

static int stop_after(void *ud);

static rs_status run(const char *const *argv, int n, double grace, rs_launch_line_fn fn, void *ud,
                     rs_launch_result *res, rs_err *err, rs_launch **keep)
{
    rs_launch_cfg cfg = {.nranks = n, .argv = argv, .master_port = 29511, .grace_s = grace, .on_line = fn,
                         .line_ud = ud};
    rs_launch *l = NULL;
    rs_status st = rs_launch_start(&cfg, &l, err);
    if (st != RS_OK) return st;
    st = rs_launch_wait(l, 20.0, res, err);
    *keep = l;
    return st;
}

static void test_env(void)
{
    setenv("RANK", "99", 1);              /* the parent's own RANK must not leak into the ranks */
    setenv("GROUP_RANK", "7", 1);
    setenv("RS_TEST_INHERIT", "yes", 1);  /* like OPENBLAS_CORETYPE: passes through */
    FILE *leak = fopen("/proc/self/status", "r"); /* an fd without O_CLOEXEC: must not reach ranks */
    const char *argv[] = {child, "env", NULL};
    const char *extra[] = {"RS_TEST_EXTRA=hi", NULL};
    rs_launch_cfg cfg = {.nranks = 4, .argv = argv, .master_addr = "10.1.2.3", .master_port = 29512,
                         .extra_env = extra, .on_line = on_line_capture};
    capture cap = {0};
    cfg.line_ud = &cap;
    rs_launch *l = NULL;
    rs_err err = {0};
    rs_launch_result res;
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_OK, "start: %s", err.msg);
    rs_status st = rs_launch_wait(l, 10.0, &res, &err);
    RS_CHECK(st == RS_OK, "wait: %s", err.msg);
    RS_CHECK(res.failed_rank == -1 && !res.cancelled && !res.timed_out, "result flags");
    for (int r = 0; r < 4; r++) {
        char want[512];
        snprintf(want, sizeof want,
                 "RANK=%d WORLD_SIZE=4 LOCAL_RANK=%d LOCAL_WORLD_SIZE=4 GROUP_RANK=0 MASTER_ADDR=10.1.2.3 "
                 "MASTER_PORT=29512 EXTRA=hi INHERIT=yes fds=0",
                 r, r);
        RS_CHECK(strcmp(cap.first[r][0], want) == 0, "rank %d stdout: got '%s' want '%s'", r, cap.first[r][0],
                 want);
        snprintf(want, sizeof want, "hello from rank %d", r);
        RS_CHECK(strcmp(cap.first[r][1], want) == 0, "rank %d stderr: got '%s'", r, cap.first[r][1]);
        RS_CHECK(cap.lines[r][0] == 1 && cap.lines[r][1] == 1, "rank %d: %d/%d lines", r, cap.lines[r][0],
                 cap.lines[r][1]);
        RS_CHECK(res.ranks[r].state == RS_LAUNCH_EXITED && res.ranks[r].exit_code == 0, "rank %d exit %d", r,
                 res.ranks[r].exit_code);
    }
    rs_launch_free(l);
    if (leak) fclose(leak);
    unsetenv("RANK");
    unsetenv("GROUP_RANK");
    check_no_zombies("env");

    /* Six ranks as three nodes of two (the lecture's three machines of two GPUs): local ranks restart
     * at 0 on each node, GROUP_RANK numbers the nodes. */
    capture six = {0};
    cfg = (rs_launch_cfg){.nranks = 6, .local_world_size = 2, .argv = argv, .master_port = 29514,
                          .on_line = on_line_capture, .line_ud = &six};
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_OK, "start 3 nodes: %s", err.msg);
    RS_CHECK(rs_launch_wait(l, 10.0, NULL, &err) == RS_OK, "3 nodes: %s", err.msg);
    for (int r = 0; r < 6; r++) {
        char want[160];
        snprintf(want, sizeof want, "RANK=%d WORLD_SIZE=6 LOCAL_RANK=%d LOCAL_WORLD_SIZE=2 GROUP_RANK=%d ", r, r % 2,
                 r / 2);
        RS_CHECK(strncmp(six.first[r][0], want, strlen(want)) == 0, "3 nodes, rank %d: '%s', want '%s...'", r,
                 six.first[r][0], want);
    }
    rs_launch_free(l);
    check_no_zombies("3 nodes");
    cfg.local_world_size = 4;
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_ERR_ARG && strstr(err.msg, "do not split into nodes of 4"),
             "6 ranks in nodes of 4 refused: %s", err.msg);

    /* The default sink prints "[rank N] ..." to stdout; run it once so it is exercised. */
    const char *argv_ok[] = {child, "env", NULL};
    cfg = (rs_launch_cfg){.nranks = 2, .argv = argv_ok, .master_port = 29513};
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_OK, "start: %s", err.msg);
    RS_CHECK(rs_launch_wait(l, 10.0, NULL, &err) == RS_OK, "default sink: %s", err.msg);
    rs_launch_free(l);
    check_no_zombies("default sink");
}

/* Checks that each line of the flood is whole and in order. */
typedef struct flood_check {
    long next[2][2]; /* (rank, stream) next line index */
    long bad, bytes;
    int tails[2];
} flood_check;

static void on_line_flood(void *ud, int rank, int is_stderr, const char *line)
{
    flood_check *f = ud;
    if (rank < 0 || rank > 1) { f->bad++; return; }
    f->bytes += (long)strlen(line) + 1;
    if (!is_stderr && strcmp(line, "tail-no-newline") == 0) { f->tails[rank]++; return; }
    int r;
    long i;
    char kind;
    if (sscanf(line, "%c%d l%ld", &kind, &r, &i) != 3 || r != rank || kind != (is_stderr ? 'e' : 'r')) {
        f->bad++;
        return;
    }
    if (!is_stderr) {
        size_t len = strlen(line);
        char head[64];
        int hn = snprintf(head, sizeof head, "r%d l%ld ", rank, i);
        if (len != (size_t)hn + (size_t)(i * 7 % 100) + 1 || line[len - 1] != '|') f->bad++;
        if (i != f->next[rank][0]) f->bad++;
        f->next[rank][0] = i + 1;
    } else {
        if (i != f->next[rank][1]) f->bad++;
        f->next[rank][1] = i + 1000;
    }
}

static void test_flood(void)
{
    const char *argv[] = {child, "flood:1048576", NULL};
    flood_check f = {0};
    rs_launch_result res;
    rs_err err = {0};
    rs_launch *l = NULL;
    rs_status st = run(argv, 2, 0.5, on_line_flood, &f, &res, &err, &l);
    RS_CHECK(st == RS_OK, "flood: %s", err.msg);
    RS_CHECK(f.bad == 0, "flood: %ld malformed or out-of-order lines", f.bad);
    RS_CHECK(f.bytes > 2 * 1048576, "flood: only %ld bytes came through", f.bytes);
    RS_CHECK(f.tails[0] == 1 && f.tails[1] == 1, "flood: unterminated tail flushed %d/%d times", f.tails[0],
             f.tails[1]);
    RS_CHECK(f.next[0][0] > 10000 && f.next[0][0] == f.next[1][0], "flood: line counts %ld/%ld", f.next[0][0],
             f.next[1][0]);
    rs_launch_free(l);
    check_no_zombies("flood");
}

static void test_exit_status(void)
{
    const char *argv[] = {child, "sleep:60", "sleep:60", "exit:3", "sleep:60", NULL};
    capture cap = {0};
    rs_launch_result res;
    rs_err err = {0};
    rs_launch *l = NULL;
    double t = now_s();
    rs_status st = run(argv, 4, 0.5, on_line_capture, &cap, &res, &err, &l);
    t = now_s() - t;
    RS_CHECK(st == RS_ERR_IO, "exit 3: status %s (%s)", rs_status_name(st), err.msg);
    RS_CHECK(strstr(err.msg, "rank 2 exited with status 3") != NULL, "message: %s", err.msg);
    RS_CHECK(strstr(err.msg, "stopped by the launcher: ranks 0, 1, 3") != NULL, "message: %s", err.msg);
    RS_CHECK(res.failed_rank == 2 && res.ranks[2].exit_code == 3 && !res.ranks[2].stopped_by_launcher,
             "failed rank %d", res.failed_rank);
    for (int r = 0; r < 4; r++)
        if (r != 2)
            RS_CHECK(res.ranks[r].stopped_by_launcher && res.ranks[r].state == RS_LAUNCH_SIGNALED &&
                         res.ranks[r].status == SIGTERM,
                     "rank %d: state %d status %d", r, (int)res.ranks[r].state, res.ranks[r].status);
    RS_CHECK(t < 3.0 && res.stop_s < 1.0, "stopping took %.2f s (stop %.2f s)", t, res.stop_s);
    printf("exit 3: %s (%.2f s)\n", err.msg, t);
    rs_launch_free(l);
    check_no_zombies("exit 3");
}

static void test_signal(void)
{
    const char *argv[] = {child, "sleep:60", "sigkill", "sleep:60", NULL};
    capture cap = {0};
    rs_launch_result res;
    rs_err err = {0};
    rs_launch *l = NULL;
    rs_status st = run(argv, 3, 0.5, on_line_capture, &cap, &res, &err, &l);
    RS_CHECK(st == RS_ERR_IO, "sigkill: status %s", rs_status_name(st));
    RS_CHECK(strstr(err.msg, "rank 1 was killed by signal 9 (SIGKILL)") != NULL, "message: %s", err.msg);
    RS_CHECK(strstr(err.msg, "stopped by the launcher: ranks 0, 2") != NULL, "message: %s", err.msg);
    RS_CHECK(res.failed_rank == 1 && res.ranks[1].state == RS_LAUNCH_SIGNALED && res.ranks[1].exit_code == 137,
             "rank 1 exit code %d", res.ranks[1].exit_code);
    printf("sigkill: %s\n", err.msg);
    rs_launch_free(l);
    check_no_zombies("sigkill");
}

static void test_ignore_term(void)
{
    const char *argv[] = {child, "exit:3", "ignterm:60", "sleep:60", NULL};
    capture cap = {0};
    rs_launch_result res;
    rs_err err = {0};
    rs_launch *l = NULL;
    double t = now_s();
    rs_status st = run(argv, 3, 2.0, on_line_capture, &cap, &res, &err, &l);
    t = now_s() - t;
    RS_CHECK(st == RS_ERR_IO && res.failed_rank == 0, "ignterm: %s", err.msg);
    RS_CHECK(res.ranks[1].state == RS_LAUNCH_SIGNALED && res.ranks[1].status == SIGKILL,
             "rank 1 should be SIGKILLed after the grace: state %d status %d", (int)res.ranks[1].state,
             res.ranks[1].status);
    RS_CHECK(res.ranks[2].status == SIGTERM, "rank 2 should end on SIGTERM: %d", res.ranks[2].status);
    /* after a failure the others get the failure's grace (0.3 s), not grace_s (2 s here) */
    RS_CHECK(res.stop_s >= 0.25 && res.stop_s < 1.5, "stop took %.2f s with a 0.3 s failure grace, not 2", res.stop_s);
    RS_CHECK(t < 3.0, "whole run took %.2f s", t);
    printf("ignterm: %s (stop %.2f s)\n", err.msg, res.stop_s);
    rs_launch_free(l);
    check_no_zombies("ignterm");

    /* a cancel keeps grace_s: a rank that ignores SIGTERM is killed only after it */
    const char *argv2[] = {child, "ignterm:60", NULL};
    double when = now_s() + 0.3;
    rs_launch_cfg cfg = {.nranks = 2, .argv = argv2, .master_port = 29517, .grace_s = 0.8,
                         .on_line = on_line_capture, .line_ud = &cap, .should_stop = stop_after, .stop_ud = &when};
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_OK, "start: %s", err.msg);
    st = rs_launch_wait(l, 10.0, &res, &err);
    RS_CHECK(st == RS_ERR_CANCELLED && res.stop_s >= 0.75 && res.stop_s < 2.0, "cancel of ranks ignoring SIGTERM took "
             "%.2f s with a 0.8 s grace (%s)", res.stop_s, err.msg);
    rs_launch_free(l);
    check_no_zombies("ignterm cancel");
}

/* A rank stopped by SIGSTOP while another gives up waiting for it: the stopped one is named first, as
 * the hung rank, with its signal, and the launcher returns at once (SIGKILL reaches a stopped process). */
static void test_hung(void)
{
    const char *argv[] = {child, "late:0.6:1", "stopself", "sleep:60", NULL};
    capture cap = {0};
    rs_launch_result res;
    rs_err err = {0};
    rs_launch *l = NULL;
    double t = now_s();
    rs_status st = run(argv, 3, 5.0, on_line_capture, &cap, &res, &err, &l);
    t = now_s() - t;
    RS_CHECK(st == RS_ERR_IO && res.failed_rank == 0 && res.hung_rank == 1, "hung: failed %d hung %d (%s)",
             res.failed_rank, res.hung_rank, err.msg);
    RS_CHECK(strstr(err.msg, "rank 1 hung: stopped by signal 19 (SIGSTOP)") == err.msg, "message: %s", err.msg);
    RS_CHECK(strstr(err.msg, "rank 0 gave up waiting for it") && strstr(err.msg, "(exited with status 1)"),
             "message: %s", err.msg);
    RS_CHECK(t < 3.0, "the hung run ended %.2f s after its start, not a 5 s grace later", t);
    printf("hung: %s (%.2f s)\n", err.msg, t);
    rs_launch_free(l);
    check_no_zombies("hung");
}

/* A hang that is no signal: rank 1 computes (idle on the board after 5 collectives) while rank 0 gives up
 * in the 6th (#5) and rank 2 still waits in it. The board names rank 1, not the one that gave up nor the
 * one that still waits, with what each was doing. */
static void test_hung_board(void)
{
    const char *argv[] = {board_child, "5:fail:0.6", "5:idle", "5:wait", NULL};
    if (!board_child) return;
    capture cap = {0};
    rs_launch_result res;
    rs_err err = {0};
    rs_launch *l = NULL;
    double t = now_s();
    rs_status st = run(argv, 3, 5.0, on_line_capture, &cap, &res, &err, &l);
    t = now_s() - t;
    RS_CHECK(st == RS_ERR_IO && res.failed_rank == 0 && res.hung_rank == 1, "board: failed %d hung %d (%s)",
             res.failed_rank, res.hung_rank, err.msg);
    RS_CHECK(strstr(err.msg, "rank 1 hung: no progress for ") == err.msg, "message: %s", err.msg);
    RS_CHECK(strstr(err.msg, "(last: not in a collective, 5 finished)"), "rank 1's state: %s", err.msg);
    RS_CHECK(strstr(err.msg, "rank 0 gave up waiting for it at ") &&
             strstr(err.msg, "(in all_reduce #5 of 4.0 KiB"), "rank 0's state: %s", err.msg);
    /* rank 0 is stopped too when its fault record is read before its exit */
    RS_CHECK(strstr(err.msg, "stopped by the launcher: ranks 1, 2") ||
                 strstr(err.msg, "stopped by the launcher: ranks 0, 1, 2"),
             "the others were stopped: %s", err.msg);
    RS_CHECK(t < 3.0, "the run ended %.2f s after its start, not a 5 s grace later", t);
    printf("hung (board): %s (%.2f s)\n", err.msg, t);
    rs_launch_free(l);
    check_no_zombies("hung board");

    /* a deadlock in another collective: rank 2 waits in broadcast #5 where the others are in all_reduce #5 */
    const char *argv2[] = {board_child, "5:fail:0.6", "5:wait", "5:bcast", NULL};
    st = run(argv2, 3, 5.0, on_line_capture, &cap, &res, &err, &l);
    RS_CHECK(st == RS_ERR_IO && res.failed_rank == 0 && res.hung_rank == 2, "diverged: failed %d hung %d (%s)",
             res.failed_rank, res.hung_rank, err.msg);
    RS_CHECK(strstr(err.msg, "rank 2 hung: no progress for ") == err.msg &&
                 strstr(err.msg, "(last: in broadcast #5 of 4.0 KiB)"),
             "the rank in the other collective is named, with it: %s", err.msg);
    printf("hung (diverged): %s\n", err.msg);
    rs_launch_free(l);
    check_no_zombies("hung diverged");
}

/* A rank through a shell: the shell forks `sleep`, which only the process group reaches. */
static void test_shell_group(void)
{
    const char *argv[] = {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then echo bye; exit 4; fi; sleep 60; echo never",
                          NULL};
    capture cap = {0};
    rs_launch_result res;
    rs_err err = {0};
    rs_launch *l = NULL;
    double t = now_s();
    rs_status st = run(argv, 3, 0.5, on_line_capture, &cap, &res, &err, &l);
    t = now_s() - t;
    RS_CHECK(st == RS_ERR_IO && strstr(err.msg, "rank 1 exited with status 4"), "shell: %s", err.msg);
    RS_CHECK(strcmp(cap.first[1][0], "bye") == 0 && cap.lines[0][0] == 0, "shell output '%s' / %d lines",
             cap.first[1][0], cap.lines[0][0]);
    RS_CHECK(t < 3.0, "shell ranks took %.2f s to stop", t);
    rs_launch_free(l);
    check_no_zombies("shell");
}

static int stop_after(void *ud)
{
    return now_s() > *(double *)ud;
}

static void test_cancel(void)
{
    const char *argv[] = {child, "sleep:60", NULL};
    double when = now_s() + 0.3;
    static capture cap;
    rs_launch_cfg cfg = {.nranks = 3, .argv = argv, .master_port = 29514, .grace_s = 0.5,
                         .on_line = on_line_capture, .line_ud = &cap, .should_stop = stop_after,
                         .stop_ud = &when};
    rs_launch *l = NULL;
    rs_err err = {0};
    rs_launch_result res;
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_OK, "start: %s", err.msg);
    double t = now_s();
    rs_status st = rs_launch_wait(l, 10.0, &res, &err);
    t = now_s() - t;
    RS_CHECK(st == RS_ERR_CANCELLED && res.cancelled && res.failed_rank == -1, "cancel: %s", err.msg);
    RS_CHECK(strcmp(err.msg, "cancelled; stopped by the launcher: ranks 0, 1, 2") == 0, "message: %s",
             err.msg);
    RS_CHECK(t < 2.0, "cancel took %.2f s", t);
    rs_launch_free(l);
    check_no_zombies("cancel");
}

static void test_timeout_and_free(void)
{
    const char *argv[] = {child, "sleep:60", NULL};
    static capture cap;
    rs_launch_cfg cfg = {.nranks = 2, .argv = argv, .master_port = 29515, .on_line = on_line_capture,
                         .line_ud = &cap};
    rs_launch *l = NULL;
    rs_err err = {0};
    rs_launch_result res;
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_OK, "start: %s", err.msg);
    rs_status st = rs_launch_wait(l, 0.2, &res, &err);
    RS_CHECK(st == RS_ERR_TIMEOUT && res.timed_out, "timeout: %s", err.msg);
    RS_CHECK(strstr(err.msg, "ranks still running after 0.2 s: 0, 1") != NULL, "message: %s", err.msg);
    RS_CHECK(res.ranks[0].state == RS_LAUNCH_RUNNING && res.ranks[0].exit_code == -1, "rank 0 still running");
    double t = now_s();
    rs_launch_free(l); /* kills and reaps */
    RS_CHECK(now_s() - t < 1.0, "free took %.2f s", now_s() - t);
    check_no_zombies("free while running");

    /* Free right after start, never waited on. */
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_OK, "start: %s", err.msg);
    rs_launch_free(l);
    check_no_zombies("free without wait");
    rs_launch_free(NULL);
}

static void test_bad_cfg(void)
{
    rs_err err = {0};
    rs_launch *l = NULL;
    const char *missing[] = {"/nonexistent/ringside-worker", NULL};
    rs_launch_cfg cfg = {.nranks = 2, .argv = missing, .master_port = 29516};
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_ERR_IO && l == NULL, "missing program: %s", err.msg);
    RS_CHECK(strstr(err.msg, "cannot start rank 0: '/nonexistent/ringside-worker'") != NULL, "message: %s",
             err.msg);
    const char *argv[] = {child, "ok", NULL};
    cfg.argv = argv;
    cfg.nranks = 0;
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_ERR_ARG && strstr(err.msg, "ranks=0"), "%s", err.msg);
    cfg.nranks = 1;
    cfg.master_port = 0;
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_ERR_ARG && strstr(err.msg, "port"), "%s", err.msg);
    cfg.master_port = 29516;
    const char *bad_env[] = {"NOEQUALS", NULL};
    cfg.extra_env = bad_env;
    RS_CHECK(rs_launch_start(&cfg, &l, &err) == RS_ERR_ARG && strstr(err.msg, "NOEQUALS"), "%s", err.msg);
    check_no_zombies("bad cfg");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test-launch PATH/launch-child [PATH/board-child]\n");
        return 2;
    }
    child = argv[1];
    board_child = argc > 2 ? argv[2] : NULL;
    test_env();
    test_flood();
    test_exit_status();
    test_signal();
    test_ignore_term();
    test_hung();
    test_hung_board();
    test_shell_group();
    test_cancel();
    test_timeout_and_free();
    test_bad_cfg();
    return rs_test_finish("launch");
}
