/* One run across ranks (repl/ranks_job.c), shared by the commands that start ranks: collective,
 * bench, p2p (cmd_dist.c) and train across ranks (cmd_train_ranks.c). A job hosts the rank's store,
 * launches them, reads every line they print (into the session log, the live view, and the figures
 * its command prints), and runs the command's end when the ranks end — at once, or, after `q` in the
 * live view at the prompt, from the prompt's loop while the run goes on in the background. */
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


/* One run across ranks, from its start to its end. Heap-allocated (the launcher keeps a pointer to it):
 * the command owns it while the run is in the foreground; after `q` at the prompt the session's
 * background list (s->jobs) owns it until the ranks end, `finish` has printed the command's end, and
 * job_finish has freed it. */
typedef struct rs_job rs_job;
struct rs_job {
    rs_session *s;
    const rs_call *c;       /* borrowed; NULL once in the background (the call is gone by then) */
    const char *what;       /* "collective", "bench", "p2p", "train" */
    const char *backend;    /* points into backend_name */
    char backend_name[32];
    int world;
    int64_t run;
    double mono_to_unix;    /* add to a rank's monotonic stamp (same host) */
    bool collect;           /* keep human lines to print in rank order at the end */
    char **lines;           /* (nlines) owned */
    int *line_rank;
    int nlines, cap;
    /* per rank (world), owned */
    uint64_t *wrong;
    double *seconds, *begin_t;
    bool *checked;
    int64_t nevents;
    char algo[32];          /* the algorithm the steps reported */
    int steps;              /* the most steps a rank took (a tree's reduce and broadcast count both) */
    /* bench */
    int nrows;
    double busbw_sum;
    uint64_t wrong_rows;
    /* train */
    rs_train_line *mem;     /* (world) each rank's last @mem */
    rs_train_line *done;    /* (world) each rank's @done */
    struct tspan { int rank; int64_t step; bool comm; double t0, t1; size_t bytes; } *spans; /* backward and comm spans (bytes: comm) */
    int nspans, capspans;
    /* pipeline: every micro-batch's forward and backward (the bubble is measured from them) and the
     * stages each rank said it runs ("stage 1 of 2: layers 4..7"), for the summary and a failure */
    rs_train_line *micros;
    int nmicros, capmicros;
    char (*stage_text)[96];  /* (world) */
    char (*stage_short)[48]; /* (world) the same as "STAGE:FIRST..LAST", for the summary's table */
    /* a strategy's own figures (@metric) per rank: the last and the largest value of each name */
    struct rs_job_fig { char name[24]; double last, max; } (*figs)[8]; /* (world) */
    int pipe_kind, pipe_m, pipe_v; /* mode=pipeline: schedule (rs_pipe_kind), micro-batches, stages per rank */
    int pipe_dp, pipe_tp;          /* mode=pipeline: its pipelines' copies and each stage's tp group (dist/train/grid.h) */
    char failure[RS_ERR_MSG_MAX];       /* why the ranks failed (the launcher's message), "" when they did not */
    double eval_acc, eval_loss, last_print, t_start;
    int64_t last_step;
    double last_loss;
    bool evaluated;
    int ckpts;
    int64_t last_ckpt_step;
    /* train kill=RANK:STEP: the fault asked for. When that rank dies of SIGKILL the command did what it
     * was told: the run is logged failed, but the end is a report, not an error (killed is set) */
    /* pi: the number of terms and the sum (dist/worker/pi.h), for the end's serial check */
    uint64_t pi_n;
    char pi_method[16];
    bool kill_asked, killed;
    int kill_rank;
    int64_t kill_step;
    /* the live dashboard (view_live.h); NULL without a terminal, with view=off, or after `q` */
    rs_live *live;
    rs_view_model *dump_vm;  /* RINGSIDE_VIEW_DUMP=FILE: the same model fed headless, its last frame saved */
    /* step=1: the ranks wait on store key "step/<coll>/<k>" before step k; the REPL sets it on a key */
    bool stepwise;
    rs_store *step_store;    /* owned: the REPL's own client of the store it hosts */
    uint64_t step_coll;      /* the collective whose steps are counted */
    int step_max;            /* highest step index a rank reported (-1: none yet) */
    int step_next;           /* the next step index to release */
    /* for `expect` (repl/result.h): the buffers the ranks sent (@vals), p2p's timings (@p2p), and the
     * bytes each rank sent in the algorithm's steps (world, from the trace) */
    rs_wire_vals *vals;      /* (nvals) owned */
    int nvals, capvals;
    rs_p2p_times p2p;
    bool have_p2p;
    double *sent;            /* (world) owned: bytes of the steps that send (peer >= 0) */
    struct rs_job_num { int rank; char name[32]; double v; } *nums; /* (nnums) owned: the ranks' @num lines */
    int nnums, capnums;
    int *rank_steps;         /* (world) owned: the steps each rank took part in */
    /* how the ranks start (world): nodes of per_node ranks on this host (0: one node), and rank 0 hosting
     * the rendezvous store as when started by hand, instead of the REPL */
    int per_node;
    bool store_rank0;
    int master_port;         /* the port the ranks were given */
    /* the ranks while they run */
    rs_launch *l;            /* owned */
    rs_store_server *srv;    /* owned; NULL under mpirun */
    char *dump;              /* owned copy of RINGSIDE_VIEW_DUMP, or NULL */
    double t_begin;          /* rs_pg_now() at the start, for `jobs` */
    /* the background (`q` at the prompt) */
    int64_t id;              /* the run id `jobs` shows (the log's run, or a number of our own without a log) */
    bool detach;             /* `q` was pressed: hand the run to the background at the next pump */
    bool background;         /* in s->jobs: nothing printed until the end */
    bool cancelled;          /* the ranks were stopped (Ctrl-C, `jobs stop`): set before j->finish runs */
    bool stopping;           /* `jobs stop=N` or quit asked the ranks to stop */
    FILE *held;              /* background: bench rows wait here (open_memstream over held_buf) */
    char *held_buf;
    size_t held_len;
    struct rs_job *next;     /* the background list */
    /* what the command does when the ranks end (prints its results, ends the run in the log); runs with
     * rc = 0 when every rank exited 0, else after the error was reported; returns the command's rc */
    int (*finish)(rs_job *j, int rc);
    /* collective, bench: what the end prints */
    rs_pg_opkind op;
    rs_dtype dt;
    long long count;
    char redop[16];
    /* the live view's header: train: planned optimizer steps and epochs; bench: message sizes */
    int64_t steps_total;
    int epochs;
    /* train: the session names (looked up again at the end: s->objs may move meanwhile) and the files */
    char mname[64], dname[64], mode[24];
    char dir[32], init[64], outp[64];
    char *ckpt;              /* owned copy of ckpt=, or NULL */
    int zero, opt_states;
    int batch_parts;         /* the global batch's parts (data-parallel degree; world unless the mode says) */
    struct rs_strategy_args *sargs; /* owned copy of the mode's options (the memory table's formula) */
};

/* A job for command c with what every rank-starting command checks (ranks=, backend=, algo=,
 * timeout= into *timeout); NULL after reporting an error. Caller owns it until rs_job_run. */
rs_job *rs_job_new(rs_session *s, const rs_call *c, const char *what, bool collect, double *timeout);
/* Starts the ranks with job_args (after `--worker JOB`), waits for them (or hands the job to the
 * background), runs j->finish and frees j. Returns the command's rc. */
int rs_job_run(rs_job *j, const char *const *job_args, int nargs, double timeout_s);
/* Marks the objects a job uses (its model and data set) as in use by run id, or free again with 0. */
void rs_job_mark_busy(rs_job *j, int64_t id);
/* Frees a job that never ran. */
void rs_job_free(rs_job *j);
/* The kept rank lines: rank-tagged ones in rank order, then the rest. */
void rs_job_print_lines(rs_job *j, const char *indent);
/* OP as users write it (torch's names, nccl-tests' and MPI's spellings); 1 after reporting. */
int rs_job_parse_op(rs_session *s, const rs_call *c, rs_pg_opkind *op);

#endif
