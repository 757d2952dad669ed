/* A run's ranks started the one way every caller starts them (the REPL's runs on ranks, the server's
 * model across ranks): the rendezvous store hosted for the run, the worker's command line
 * (`ringside --worker JOB group=... timeout=... store=... k=v...`) or mpirun's around it, and the
 * launcher started on it. What differs between callers is a parameter here, never a copy there. */
#ifndef RS_SPAWN_H
#define RS_SPAWN_H

#include <stdbool.h>
#include <stddef.h>

#include "dist/launch/bind.h"
#include "dist/launch/launch.h"
#include "dist/store/store.h"
#include "engine/core/status.h"

/* Where the ranks meet. */
typedef enum rs_spawn_store {
    RS_SPAWN_STORE_LAUNCHER = 0, /* the caller hosts the store (rs_spawn_host_store) */
    RS_SPAWN_STORE_RANK0,        /* rank 0 hosts it, as ranks started by hand do; the caller picks its port */
    RS_SPAWN_STORE_MPI,          /* mpirun starts and wires the ranks: no store, one launched process */
} rs_spawn_store;

typedef struct rs_spawn_cfg {
    const char *exe;              /* the ringside binary; NULL: this process's (/proc/self/exe) */
    const char *job;              /* the worker's job: `ringside --worker JOB` */
    const char *group;            /* the process group's name, unique per run (the worker's group=) */
    double timeout_s;             /* the group's timeout (the worker's timeout=) */
    int world;                    /* ranks, 1..RS_LAUNCH_MAX_RANKS */
    int per_node;                 /* ranks per node on this host (torchrun's numbering); 0: one node */
    rs_spawn_store store;
    const char *const *args;      /* (nargs) the job's own options, after the common ones */
    int nargs;
    const char *const *extra_env; /* NULL or NULL-terminated "NAME=VALUE" (CUDA_VISIBLE_DEVICES...) */
    const char *hosts;            /* NULL (this host), or the hosts' list "a:2,b:2" (rs_hostfile_mpi_hosts):
                                     mpirun's --host, which reaches them with its rsh agent; without mpirun
                                     (RS_SPAWN_STORE_RANK0) each rank is started through the rsh agent
                                     (remote.h) and rank 0's host is MASTER_ADDR, hosting the store */
    double grace_s;               /* SIGTERM -> SIGKILL when stopping (rs_launch_cfg.grace_s) */
    const char *bind;             /* NULL: placement not asked (the kernel's; mpirun's own default). Else a
                                     word of rs_bind_names: ranks started here are bound by plan (bind.h);
                                     under mpirun it becomes --bind-to WORD (none where this host has fewer
                                     cores than ranks); ranks on other hosts without mpirun are not bound */
    int bind_cores;               /* cores per rank when binding (a rank's threads); 0: 1 */
    rs_bind_plan **bind_plan;     /* NULL, or receives the plan (the caller's, rs_bind_plan_free; NULL when
                                     bind was not asked or the ranks are on other hosts) */
    rs_launch_line_fn on_line;
    void *line_ud;
    rs_launch_stop_fn should_stop;
    void *stop_ud;
} rs_spawn_cfg;

/* This process's binary into exe (cap bytes), to start ranks of; RS_ERR_IO when it cannot be found. */
rs_status rs_spawn_self(char *exe, size_t cap, rs_err *err);

/* Makes the run's meeting point: RS_SPAWN_STORE_LAUNCHER starts a store on 127.0.0.1 (*srv, owned by
 * the caller: rs_store_server_stop) and *port is its port; RS_SPAWN_STORE_RANK0 leaves *srv NULL and
 * *port a port free right now, for rank 0's store; RS_SPAWN_STORE_MPI sets neither (NULL, 0). */
rs_status rs_spawn_host_store(rs_spawn_store how, rs_store_server **srv, int *port, rs_err *err);

/* The launched command line, NULL-terminated: `[mpirun --oversubscribe --tag-output [--bind-to B] -np N] EXE --worker
 * JOB group=G timeout=T store=launcher|rank0 ARGS...`. One allocation (the array and its strings): the
 * caller frees it with free(). cfg->exe must be set. NULL when out of memory. */
char **rs_spawn_argv(const rs_spawn_cfg *cfg);

/* A line as mpirun --tag-output forwards it ("[job,rank]<stdout>:text", whole lines per rank, where
 * untagged it forwards pieces): *rank, *is_stderr and *line (past the tag) from the tag; false, with
 * nothing changed, for a line without one. */
bool rs_spawn_untag(const char **line, int *rank, int *is_stderr);

/* Starts the ranks on port (rs_spawn_host_store's; ignored under mpirun) with the torchrun variables:
 * cfg->world ranks, or one mpirun that starts them. *out is the caller's (rs_launch_free). */
rs_status rs_spawn_start(const rs_spawn_cfg *cfg, int port, rs_launch **out, rs_err *err);

#endif
