/* A rank for the launcher's board test (test_launch.c, test_hung_board): argv[1 + RANK] says what it
 * writes on the ranks' board (dist/launch/rank_status.h), through rs_rank_status_trace, the function a
 * rank's process group calls. Apart from launch_child, which stays small so that it starts at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/launch/rank_status.h"

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v ? v : "(unset)";
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* "DONE:idle" finishes DONE all_reduces of 4 KiB then sleeps (a rank computing forever, as the board
 * sees it); "DONE:wait" enters the next one and stays in it; "DONE:bcast" enters a broadcast instead (a
 * program that diverged: a deadlock in another collective); "DONE:fail:S" enters it, gives up after S
 * seconds (END with failed, as a timeout) and exits 1. Events go through rs_rank_status_trace, the
 * function a rank's process group calls. */
static int board(int rank, const char *how)
{
    int world = atoi(env("WORLD_SIZE"));
    rs_rank_status *s = rs_rank_status_attach(rank, world);
    if (!s) {
        fprintf(stderr, "launch_child: no board in %s\n", env(RS_RANK_STATUS_ENV));
        return 4;
    }
    int done = atoi(how);
    const char *what = strchr(how, ':');
    rs_pg_event ev = {.op = RS_OP_ALL_REDUCE, .bytes = 4096};
    for (int i = 0; i <= done; i++) {
        ev.kind = RS_PG_EV_BEGIN;
        ev.coll = (uint64_t)i;
        if (i == done && what && !strcmp(what, ":bcast")) ev.op = RS_OP_BROADCAST;
        if (i == done && what && !strcmp(what, ":idle")) break;
        rs_rank_status_trace(s, &ev);
        if (i == done) break;
        ev.kind = RS_PG_EV_END;
        rs_rank_status_trace(s, &ev);
    }
    if (what && !strncmp(what, ":fail:", 6)) {
        sleep_s(atof(what + 6));
        ev.kind = RS_PG_EV_END;
        ev.failed = true;
        rs_rank_status_trace(s, &ev);
        rs_rank_status_detach(s);
        return 1;
    }
    sleep_s(60);
    rs_rank_status_detach(s);
    return 0;
}

int main(int argc, char **argv)
{
    int rank = atoi(env("RANK"));
    if (argc < 2) return 2;
    return board(rank, argv[1 + rank < argc ? 1 + rank : argc - 1]);
}
