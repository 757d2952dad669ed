/* Joining the group: the part every worker job starts with (see worker.h), and the two ways a rank
 * learns that what started it is gone: the death signal under mpirun, and the store's host closing
 * the connection (the REPL, or rank 0 for ranks started by hand). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "dist/launch/launch.h"
#include "dist/launch/rank_status.h"
#include "dist/store/store.h"
#include "worker.h"

/* The store watcher: one per process (a rank joins one group), so plain statics. */
static pthread_t watch_th;
static int watch_wake[2] = {-1, -1}, watch_fd = -1, watch_rank;
static bool watching;

/* Waits for the store's host to close our connection (POLLRDHUP: it ended, killed or not) or for the
 * wake pipe (the rank is leaving on its own). The first ends the rank at once: its peers and its
 * launcher are gone, and a collective in progress would otherwise wait out its whole timeout. */
static void *watch_main(void *ud)
{
    (void)ud;
    struct pollfd p[2] = {{.fd = watch_fd, .events = POLLRDHUP}, {.fd = watch_wake[0], .events = POLLIN}};
    for (;;) {
        int n = poll(p, 2, -1);
        if (n < 0) continue; /* EINTR */
        if (p[1].revents) return NULL;
        if (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
            char msg[128];
            int len = snprintf(msg, sizeof msg, "rank %d: the store's host closed the connection (it ended); stopping\n",
                               watch_rank);
            (void)!write(2, msg, (size_t)len);
            _exit(1);
        }
    }
}

static void watch_start(const rs_store *st, int rank)
{
    if (watching || pipe2(watch_wake, O_CLOEXEC) < 0) return;
    watch_fd = rs_store_fd(st);
    watch_rank = rank;
    if (pthread_create(&watch_th, NULL, watch_main, NULL) != 0) {
        close(watch_wake[0]);
        close(watch_wake[1]);
        return;
    }
    watching = true;
}

static void watch_stop(void)
{
    if (!watching) return;
    (void)!write(watch_wake[1], "x", 1);
    pthread_join(watch_th, NULL);
    close(watch_wake[0]);
    close(watch_wake[1]);
    watching = false;
}

int rs_worker_join(const char *backend, const char *group, double timeout, bool store_from_launcher, FILE *errf,
                   rs_worker_conn *c)
{
    *c = (rs_worker_conn){0};
    /* Under mpirun the rank's parent is mpirun (or its daemon): when it dies, so does the rank. The REPL's
     * launcher set this already for the ranks it forks; a rank started by hand keeps its shell's rules. */
    if (getenv("OMPI_COMM_WORLD_SIZE")) {
        pid_t parent = getppid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (parent == 1 || getppid() != parent) {
            fprintf(errf, "ringside --worker: mpirun has ended already\n");
            return 1;
        }
    }
    rs_err e = {0};
    rs_launch_env env;
    const rs_pg_backend *be = rs_pg_backend_find(backend);
    /* Under mpirun, who we are is mpirun's to say: the torchrun variables the REPL's launcher gave the
     * mpirun process itself (rank 0 of 1) are not ours. */
    if (be && be->needs_launcher && getenv("OMPI_COMM_WORLD_SIZE")) {
        static const char *const torchrun[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
        for (size_t i = 0; i < 4; i++) unsetenv(torchrun[i]);
    }
    if (rs_launch_env_from_environ(&env, &e)) {
        fprintf(errf, "ringside --worker: %s\n", e.msg);
        return 2;
    }
    c->rank = env.rank;
    c->world = env.world_size;
    if (!be) {
        rs_pg_new(backend, NULL, "x", 0, 1, 1, &c->g, &e); /* for its message listing what exists */
        fprintf(errf, "rank %d: %s\n", c->rank, e.msg);
        return 2;
    }
    if (!be->needs_launcher) {
        if (!env.master_port) {
            fprintf(errf, "rank %d: backend %s needs MASTER_ADDR and MASTER_PORT\n", c->rank, backend);
            return 2;
        }
        /* Started by hand (no launcher hosting the store): rank 0 hosts it, as c10d's TCPStore does. */
        if (!store_from_launcher && c->rank == 0 &&
            rs_store_server_start(env.master_addr, env.master_port, &c->server, &e)) {
            fprintf(errf, "rank 0: hosting the store: %s\n", e.msg);
            return 1;
        }
        if (c->server && getenv("RINGSIDE_STORE_READY")) { /* a launcher starts the others once it reads this */
            printf("@store ready %s:%d\n", env.master_addr, env.master_port);
            fflush(stdout);
        }
        if (rs_store_connect(env.master_addr, env.master_port, timeout, &c->store, &e) ||
            rs_store_rendezvous(c->store, c->rank, c->world, timeout, &e)) {
            fprintf(errf, "rank %d: %s\n", c->rank, e.msg);
            if (c->server && e.code == RS_ERR_ARG) /* world sizes differ: the others read it from our store */
                nanosleep(&(struct timespec){.tv_nsec = 500000000}, NULL);
            return 1;
        }
        if (!c->server) watch_start(c->store, c->rank); /* rank 0 by hand hosts it: nothing to watch */
    }
    if (rs_pg_new(backend, c->store, group, c->rank, c->world, timeout, &c->g, &e)) {
        fprintf(errf, "rank %d: %s\n", c->rank, e.msg);
        return 1;
    }
    c->status = rs_rank_status_attach(c->rank, c->world);
    if (c->status) {
        c->g->trace = rs_rank_status_trace; /* a job with a trace of its own calls it from there */
        c->g->trace_ud = c->status;
    }
    return 0;
}

void rs_worker_leave(rs_worker_conn *c, bool ok, double timeout)
{
    if (!ok) rs_rank_status_fault(c->status);
    if (!ok && c->g && c->g->ops && !strcmp(c->g->ops->name, "mpi")) {
        /* MPI_Finalize (run at exit) waits for every rank: a rank that gave up on a hung peer would wait for
         * it forever. Leaving without it makes mpirun end the whole job at once, as MPI_Abort would. */
        fflush(NULL);
        _exit(1);
    }
    watch_stop(); /* from here the host may close the store as the ranks leave */
    if (c->store && ok) {
        rs_err e = {0};
        rs_store_barrier(c->store, "worker/end", c->world, timeout, &e);
    }
    rs_pg_destroy(c->g);
    rs_store_close(c->store);
    rs_store_server_stop(c->server);
    rs_rank_status_detach(c->status);
    *c = (rs_worker_conn){0};
}
