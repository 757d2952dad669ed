/* Test harness for code that runs on several ranks: forks `world` processes, hosts the rendezvous
 * store in the parent (started after the forks, so no child inherits a running thread: see the note
 * in docs/dist.md on fork and ASan), hands each child the store's port, runs fn in each and collects
 * the exit codes. Header-only so each test executable builds it with its own flags. */
#ifndef RS_TEST_FORKRANKS_H
#define RS_TEST_FORKRANKS_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/store/store.h"

/* Runs in rank r's process with a connected store; returns its exit code. */
typedef int (*rs_rank_fn)(void *ud, int rank, int world, rs_store *store);

/* exits[r] gets rank r's exit code (128 + signal when killed). Returns the number of ranks whose code
 * differs from want[r] (want may be NULL: all 0), or -1 when the harness itself failed. */
static inline int rs_fork_ranks(int world, rs_rank_fn fn, void *ud, const int *want, int *exits)
{
    int fds[2];
    if (world < 1 || world > 64 || pipe(fds) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pids[64];
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            close(fds[1]);
            alarm(120); /* a hang becomes a visible failure, not a stuck suite */
            int port = 0, rc = 2;
            if (read(fds[0], &port, sizeof port) == (ssize_t)sizeof port) {
                rs_err e = {0};
                rs_store *st = NULL;
                if (rs_store_connect("127.0.0.1", port, 10, &st, &e)) fprintf(stderr, "rank %d: %s\n", r, e.msg);
                else rc = fn(ud, r, world, st);
                rs_store_close(st);
            }
            fflush(stdout);
            fflush(stderr);
            _exit(rc);
        }
    }
    close(fds[0]);
    rs_err e = {0};
    rs_store_server *srv = NULL;
    int bad = 0;
    if (rs_store_server_start("127.0.0.1", 0, &srv, &e)) {
        fprintf(stderr, "store: %s\n", e.msg);
        bad = -1;
    } else {
        int port = rs_store_server_port(srv);
        for (int r = 0; r < world; r++)
            if (write(fds[1], &port, sizeof port) != (ssize_t)sizeof port) bad = -1;
    }
    close(fds[1]);
    for (int r = 0; r < world; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (exits) exits[r] = code;
        if (bad >= 0 && code != (want ? want[r] : 0)) {
            fprintf(stderr, "rank %d: exit %d (wanted %d)\n", r, code, want ? want[r] : 0);
            bad++;
        }
    }
    rs_store_server_stop(srv);
    return bad;
}

#endif
