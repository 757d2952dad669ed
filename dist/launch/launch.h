/* The rank launcher: spawns N copies of a program with the torchrun environment (RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT), hands their output to a callback line by
 * line, and stops them all when one fails, so a learner is told which rank died and how, never left
 * with a hang. rs_launch_env_from_environ is the other side: a rank reading what it was given. */
#ifndef RS_LAUNCH_H
#define RS_LAUNCH_H

#include "engine/core/status.h"

#include <sys/types.h>

#define RS_LAUNCH_MAX_RANKS 1024
#define RS_LAUNCH_ADDR_MAX 256

/* Receives each complete line of a rank's output, without its '\n' (a line longer than 1 MiB is
 * handed over in 1 MiB pieces). `line` is valid only during the call. */
typedef void (*rs_launch_line_fn)(void *ud, int rank, int is_stderr, const char *line);

/* Polled by the event loop about every 20 ms; non-zero stops all ranks and reports "cancelled". */
typedef int (*rs_launch_stop_fn)(void *ud);

typedef struct rs_launch_cfg {
    int nranks;                   /* 1..RS_LAUNCH_MAX_RANKS */
    const char *const *argv;      /* NULL-terminated; argv[0] is looked up in PATH without a '/' */
    const char *master_addr;      /* NULL: "127.0.0.1" */
    int master_port;              /* 1..65535 */
    const char *const *extra_env; /* NULL or NULL-terminated "NAME=VALUE" list, set last (wins) */
    int clear_env;                /* 0: ranks inherit this process's environment (OPENBLAS_CORETYPE,
                                     PATH, OMP_NUM_THREADS...); 1: only the torchrun set + extra_env */
    int local_world_size;         /* ranks per node: this host plays nodes of that many ranks, numbered as
                                     torchrun numbers them (LOCAL_RANK = rank % it, GROUP_RANK = rank / it);
                                     must divide nranks; 0: one node of nranks */
    const char *const *rank_hosts; /* NULL: every rank on this host. Else (nranks) rank r's host, reached
                                     through the rsh agent (remote.h: ssh by default) with the torchrun
                                     variables and extra_env on its command line; a host's ranks are a node
                                     (LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK follow the hosts, and
                                     local_world_size is not used) */
    double store_wait_s;          /* > 0 with rank_hosts: rank 0 hosts the rendezvous store on its host; it is
                                     started first (RINGSIDE_STORE_READY=1 on its command line) and the others
                                     only once it says "@store ready ADDR:PORT", or after this many seconds.
                                     If it ends before, rs_launch_start fails saying why (a port in use on its
                                     host, which the caller's check on this host could not see) */
    double grace_s;               /* SIGTERM -> SIGKILL delay when stopping on request (cancel); <= 0: 5 s */
    double fail_grace_s;          /* the same after a rank failed, when the others sit in a collective
                                     with it and can only be ended; <= 0: the smaller of grace_s and
                                     0.3 s, so a failure is reported within a second */
    int death_sig;                /* what a rank gets when the launcher dies (PR_SET_PDEATHSIG); 0: SIGKILL.
                                     mpirun takes SIGTERM, which it handles: it ends its ranks and removes
                                     Open MPI's session directory and shared-memory segments */
    rs_launch_line_fn on_line;    /* NULL: print "[rank N] line" ("[rank N stderr] line") to stdout */
    void *line_ud;
    rs_launch_stop_fn should_stop; /* NULL: never */
    void *stop_ud;
} rs_launch_cfg;

typedef enum rs_launch_rank_state {
    RS_LAUNCH_RUNNING = 0,
    RS_LAUNCH_EXITED,   /* `status` is the exit code */
    RS_LAUNCH_SIGNALED, /* `status` is the signal number */
} rs_launch_rank_state;

typedef struct rs_launch_rank {
    pid_t pid;
    rs_launch_rank_state state;
    int status;            /* exit code or signal number, by state */
    int exit_code;         /* shell convention: exit code, or 128 + signal; -1 while running */
    int stopped_by_launcher; /* ended after the launcher began stopping the ranks */
    double end_s;          /* seconds from start to when the launcher saw it end */
    int stop_sig;          /* while running: the signal that stopped it (SIGSTOP, SIGTSTP...), 0 when not */
    double stop_at_s;      /* seconds from start to when the launcher saw it stop */
} rs_launch_rank;

typedef struct rs_launch_result {
    int nranks;
    const rs_launch_rank *ranks; /* (nranks), borrowed from the rs_launch, valid until its _free */
    int failed_rank;       /* first rank that exited abnormally, -1 if none */
    int hung_rank;         /* a rank that was stopped (SIGSTOP) when failed_rank failed: the rank the
                              others gave up waiting for, named first in the message; -1 if none */
    int cancelled;         /* should_stop or rs_launch_stop asked to stop */
    int timed_out;         /* rs_launch_wait's timeout passed with ranks still running */
    double elapsed_s;      /* from start to the end of this wait */
    double stop_s;         /* from the start of stopping to the last rank's end; 0 if no stop */
} rs_launch_result;

typedef struct rs_launch rs_launch;

/* Spawns cfg->nranks processes, all in one new process group. *out is owned by the caller
 * (rs_launch_free). cfg and the strings it points to are only read during the call. On failure no
 * process is left running. */
rs_status rs_launch_start(const rs_launch_cfg *cfg, rs_launch **out, rs_err *err);

/* Runs the event loop (output, exits, should_stop) until every rank has ended or timeout_s passes
 * (<= 0: no timeout). A rank's end wakes the loop at once (a pidfd in the poll set). Returns RS_OK when
 * every rank exited with 0; RS_ERR_IO when a rank failed (the message names it, how, and the ranks
 * stopped by the launcher; a rank stopped by a signal while another gave up waiting is named first,
 * as the hung one); RS_ERR_CANCELLED when stopped on
 * request; RS_ERR_TIMEOUT with the ranks left running (wait again, rs_launch_stop, or _free).
 * res may be NULL. */
rs_status rs_launch_wait(rs_launch *l, double timeout_s, rs_launch_result *res, rs_err *err);

/* Starts stopping every rank (SIGTERM, SIGKILL after the grace period) as a cancel; the next
 * rs_launch_wait completes it. */
void rs_launch_stop(rs_launch *l);

/* Kills (SIGKILL) and reaps any rank still running, closes the pipes, frees. NULL is a no-op. */
void rs_launch_free(rs_launch *l);

/* What a rank was told about itself. */
typedef struct rs_launch_env {
    int rank, world_size;
    int local_rank, local_world_size;
    int group_rank;                       /* the node's number (torchrun's GROUP_RANK) */
    char master_addr[RS_LAUNCH_ADDR_MAX]; /* "" when not given (mpirun without MASTER_ADDR) */
    int master_port;                      /* 0 when not given (mpirun without MASTER_PORT) */
    const char *source;                   /* "torchrun" or "mpirun" (static string) */
} rs_launch_env;

/* Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT from the
 * environment, falling back to Open MPI's OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE when RANK is
 * not set. With the torchrun variables MASTER_ADDR and MASTER_PORT are required; LOCAL_RANK defaults to
 * RANK, LOCAL_WORLD_SIZE to WORLD_SIZE and GROUP_RANK to RANK / LOCAL_WORLD_SIZE (nodes of equal size
 * numbered in order, as torchrun and mpirun's default mapping number them). A missing or malformed value is an RS_ERR_ARG naming the
 * variable, its value, and what would work. */
rs_status rs_launch_env_from_environ(rs_launch_env *out, rs_err *err);

#endif
