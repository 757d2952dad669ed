/* Joining the group: the part every worker job starts with (see worker.h). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "dist/launch/launch.h"
#include "dist/store/store.h"
#include "worker.h"

int rs_worker_join(const char *backend, const char *group, double timeout, bool store_from_launcher, FILE *errf,
                   rs_worker_conn *c)
{
    *c = (rs_worker_conn){0};
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
        if (rs_store_connect(env.master_addr, env.master_port, timeout, &c->store, &e) ||
            rs_store_rendezvous(c->store, c->rank, c->world, timeout, &e)) {
            fprintf(errf, "rank %d: %s\n", c->rank, e.msg);
            return 1;
        }
    }
    if (rs_pg_new(backend, c->store, group, c->rank, c->world, timeout, &c->g, &e)) {
        fprintf(errf, "rank %d: %s\n", c->rank, e.msg);
        return 1;
    }
    return 0;
}

void rs_worker_leave(rs_worker_conn *c, bool ok, double timeout)
{
    if (c->store && ok) {
        rs_err e = {0};
        rs_store_barrier(c->store, "worker/end", c->world, timeout, &e);
    }
    rs_pg_destroy(c->g);
    rs_store_close(c->store);
    rs_store_server_stop(c->server);
    *c = (rs_worker_conn){0};
}
