/* One run across ranks (repl/ranks_job.c), shared by the commands that start ranks: collective, bench,
 * p2p, world (cmd_dist.c), pi (cmd_pi.c), tp matmul (cmd_tp.c) and train across ranks
 * (cmd_train_ranks.c). The job's core hosts the ranks' store and starts them (dist/launch/spawn.h),
 * reads every line they print into the session log and the live view, handles Ctrl-C, `q` and the
 * background, and ends the run. What a kind of run does with its ranks' machine lines and what it
 * prints at the end is its own: a table of callbacks (rs_job_kind) and a state struct of its own
 * (j->state), both in the command's file. */
#ifndef RS_RANKS_JOB_H
#define RS_RANKS_JOB_H

#include <stdbool.h>
#include <stdio.h>

#include "dist/launch/launch.h"
#include "dist/pg/pg.h"
#include "dist/store/store.h"
#include "dist/worker/worker.h"
#include "session.h"
#include "view_live.h"

typedef struct rs_job rs_job;

/* Seconds between SIGTERM and SIGKILL when a run's ranks are stopped, unless its kind says more. */
#define RS_JOB_GRACE_S 2.0
/* Seconds a run's last frame stays up in `play` before the view closes by itself (a key closes it sooner). */
#define RS_JOB_HOLD_S 3.0

/* A kind of run on ranks: what the core asks of it. Optional members are marked. */
typedef struct rs_job_kind {
    const char *what;     /* the worker's job (`ringside --worker WHAT`), `jobs`' kind, the messages' prefix */
    size_t state_size;    /* bytes of j->state, zeroed by rs_job_new */
    bool collect;         /* keep the ranks' human lines for the end (rs_job_print_lines) */
    bool coll_data;       /* a collective: step=1 applies, and RINGSIDE_VIEW_DUMP asks the ranks for data=1 */
    double grace_s;       /* SIGTERM -> SIGKILL when the ranks are stopped; 0: RS_JOB_GRACE_S */
    bool own_cancel;      /* a stop (Ctrl-C, `jobs stop`) is the finish's to report and log (j->cancelled,
                             rc 0): a stopped training run says how far it got, as in one process */
    /* optional: the per-rank tables, once j->world is known; false when out of memory */
    bool (*init)(rs_job *j);
    /* optional: a trace event, after the core has logged it */
    void (*event)(rs_job *j, const rs_pg_event *ev);
    /* optional: a rank's machine line ('@...', not a trace event or @data); true when it used it */
    bool (*line)(rs_job *j, const char *line);
    /* optional: the ranks failed, first rank `rank` (how); true when that is the fault the command
     * asked for, after saying so: the run is logged failed but the command does not fail */
    bool (*fault)(rs_job *j, int rank, const rs_launch_rank *how, const rs_err *e);
    /* the command's end: prints its results and ends the run in the log; rc = 0 when every rank exited
     * 0, else the error already reported; returns the command's rc */
    int (*finish)(rs_job *j, int rc);
    /* optional: frees what j->state owns (not j->state itself) */
    void (*free)(rs_job *j);
} rs_job_kind;

/* One run across ranks, from its start to its end. Heap-allocated (the launcher keeps a pointer to it):
 * the command owns it while the run is in the foreground; after `q` at the prompt the session's
 * background list (s->jobs) owns it until the ranks end, the kind's finish has printed the end, and
 * the job is freed. */
struct rs_job {
    rs_session *s;
    const rs_call *c;           /* borrowed; NULL once in the background (the call is gone by then) */
    const rs_job_kind *kind;
    void *state;                /* owned: the kind's own (kind->state_size bytes) */
    const char *backend;        /* points into backend_name, a copy: the call is gone when a background run ends */
    char backend_name[32];
    int world;
    double timeout_s;           /* the group's timeout (timeout=) */
    int64_t run;                /* the session log's run row (<= 0: no log) */
    int64_t last_step;          /* the last step rank 0 reported: the run row's steps when the ranks fail */
    char failure[RS_ERR_MSG_MAX]; /* why the ranks failed (the launcher's message), "" when they did not */
    double mono_to_unix;        /* add to a rank's monotonic stamp (same host) */
    double *begin_t;            /* (world) owned: each rank's last coll_begin, for the log's coll_end */
    int64_t nevents;            /* trace events logged */
    struct rs_job_kept {        /* the ranks' human lines, kept for the end (kind->collect) */
        char **text;            /* (n) owned */
        int *rank;              /* (n) owned: whose line */
        int n, cap;
    } kept;
    /* what the run works on: the session objects it keeps busy in the background, its mode, the view's
     * plan (train: optimizer steps and epochs; bench: message sizes) */
    char mname[64], dname[64], mode[24];
    int64_t steps_total;
    int epochs;
    /* how the ranks start: nodes of per_node ranks on this host (0: one node), rank 0 hosting the store
     * as when started by hand, the port they were given */
    int per_node;
    bool store_rank0;
    int master_port;
    char hosts[1024];           /* hostfile=: mpirun's --host list ("a:2,b:2"), "" on this host alone */
    rs_launch *l;               /* owned: the ranks while they run */
    rs_store_server *srv;       /* owned; NULL under mpirun and with store_rank0 */
    /* the live dashboard (view_live.h); NULL without a terminal, with view=off, or after `q` */
    rs_live *live;
    rs_view_model *dump_vm;     /* RINGSIDE_VIEW_DUMP=FILE: the same model fed headless, its last frame saved */
    char *dump;                 /* owned copy of RINGSIDE_VIEW_DUMP, or NULL */
    struct rs_job_step {        /* step=1: the ranks wait on store key "step/<coll>/<k>" before step k;
                                   the REPL sets it on a key */
        bool on;
        rs_store *store;        /* owned: the REPL's own client of the store it hosts */
        uint64_t coll;          /* the collective whose steps are counted */
        int max;                /* highest step index a rank reported (-1: none yet) */
        int next;               /* the next step index to release */
    } step;
    /* the background (`q` at the prompt) */
    double t_begin;             /* rs_pg_now() at the start, for `jobs` */
    int64_t id;                 /* the run id `jobs` shows (the log's run, or a number of our own without a log) */
    bool detach;                /* `q` was pressed: hand the run to the background at the next pump */
    bool background;            /* in s->jobs: nothing printed until the end */
    bool cancelled;             /* the ranks were stopped (Ctrl-C, `jobs stop`): set before finish runs */
    bool stopping;              /* `jobs stop=N` or quit asked the ranks to stop */
    struct rs_job_held {        /* background: output that waits for the end (open_memstream over buf) */
        FILE *f;
        char *buf;              /* owned */
        size_t len;
    } held;
    struct rs_job *next;        /* the background list */
};

/* A job of `kind` for command c with what every rank-starting command checks (ranks=, backend=, algo=,
 * timeout=); NULL after reporting an error. Caller owns it until rs_job_run. */
rs_job *rs_job_new(rs_session *s, const rs_call *c, const rs_job_kind *kind);
/* Starts the ranks with job_args (after `--worker WHAT` and the common options), waits for them (or
 * hands the job to the background), runs the kind's finish and frees j. Returns the command's rc. */
int rs_job_run(rs_job *j, const char *const *job_args, int nargs);
/* Marks the objects a job uses (mname, dname) as in use by run id, or free again with 0. */
void rs_job_mark_busy(rs_job *j, int64_t id);
/* Frees a job that never ran (the kind's state with it). NULL: no-op. */
void rs_job_free(rs_job *j);
/* The kept rank lines: rank-tagged ones in rank order, then the rest. */
void rs_job_print_lines(rs_job *j, const char *indent);
/* OP as users write it (torch's names, nccl-tests' and MPI's spellings); 1 after reporting. */
int rs_job_parse_op(rs_session *s, const rs_call *c, rs_pg_opkind *op);
/* A session-log event's detail from a json_pack format, as compact JSON text (caller frees; NULL when
 * out of memory: the event goes without it). Reals keep 9 significant digits. */
char *rs_job_detail(const char *fmt, ...);

/* ---------------------------------------------------------------- what several kinds keep (ranks_tally.c) */

/* Each rank's own verdict on its result (@check): elements that differ, its seconds, whether it said. */
typedef struct rs_job_checks {
    uint64_t *wrong;            /* (world) owned */
    double *seconds;            /* (world) owned */
    bool *checked;              /* (world) owned */
} rs_job_checks;
bool rs_job_checks_init(rs_job_checks *k, int world);
bool rs_job_checks_line(rs_job_checks *k, int world, const char *line);
/* Sums over the ranks: wrong elements, the slowest's seconds, the ranks that did not report. */
void rs_job_checks_sum(const rs_job_checks *k, int world, uint64_t *wrong, double *slowest, int *missing);
void rs_job_checks_free(rs_job_checks *k);

/* The buffers the ranks sent (@vals), for `expect rank 0 = [2, 110]`. */
typedef struct rs_job_vals {
    rs_wire_vals *v;            /* (n) owned */
    int n, cap;
} rs_job_vals;
bool rs_job_vals_line(rs_job_vals *k, int world, const char *line);
void rs_job_vals_record(const rs_job_vals *k, rs_session *s);
void rs_job_vals_free(rs_job_vals *k);

/* The ranks' named numbers (@num). */
typedef struct rs_job_num { int rank; char name[32]; double v; } rs_job_num;
typedef struct rs_job_nums {
    rs_job_num *v;              /* (n) owned */
    int n, cap;
} rs_job_nums;
bool rs_job_nums_line(rs_job_nums *k, int world, const char *line);
void rs_job_nums_free(rs_job_nums *k);

#endif
