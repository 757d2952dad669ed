/* A training run across ranks as a kind of run on ranks (ranks_job.h): its state, and what it keeps of
 * its ranks' @phase, @comm, @step, @mem, @eval, @micro, @stage, @metric, @done and @ckpt lines
 * (ranks_train.c). cmd_train_ranks.c starts it and prints its end; train_pipe.c reads a pipeline's part. */
#ifndef RS_RANKS_TRAIN_H
#define RS_RANKS_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "dist/worker/worker.h"
#include "ranks_job.h"

struct rs_strategy_args;

/* A rank's backward or comm span (bytes: comm), for the share of comm hidden behind backward. */
typedef struct rs_ranks_span { int rank; int64_t step; bool comm; double t0, t1; size_t bytes; } rs_ranks_span;
/* A strategy's own figure (@metric) of a rank: the last and the largest value of one name. */
typedef struct rs_ranks_fig { char name[24]; double last, max; } rs_ranks_fig;

/* j->state of a training run. */
typedef struct rs_ranks_train {
    rs_train_line *mem;          /* (world) owned: each rank's last @mem */
    rs_train_line *done;         /* (world) owned: each rank's @done */
    rs_ranks_span *spans;        /* (nspans) owned */
    int nspans, capspans;
    /* pipeline: every micro-batch's forward and backward (the bubble is measured from them) and the
     * stages each rank said it runs ("stage 1 of 2: layers 4..7"), for the summary and a failure */
    rs_train_line *micros;       /* (nmicros) owned */
    int nmicros, capmicros;
    char (*stage_text)[96];      /* (world) owned */
    char (*stage_short)[48];     /* (world) owned: the same as "STAGE:FIRST..LAST", for the summary's table */
    rs_ranks_fig (*figs)[8];     /* (world) owned */
    /* mode=pipeline: schedule (rs_pipe_kind), micro-batches, stages per rank; its pipelines' copies and
     * each stage's tp group (dist/train/grid.h) */
    int pipe_kind, pipe_m, pipe_v;
    int pipe_dp, pipe_tp;
    char pipe_cut[24];           /* how the stages were cut: "split=3,6" or "partition=time" */
    double eval_acc, eval_loss, last_print, last_loss;
    bool evaluated;
    /* a language model (rows labels a sample): its evaluations print as one process prints them, from
     * the lm_* figures rank 0 sends before each @eval */
    int rows;
    int64_t lm_step;
    double lm_train_loss, lm_tps;
    int ckpts;
    int64_t last_ckpt_step;
    /* kill=RANK:STEP: the fault asked for. When that rank dies of SIGKILL the command did what it was
     * told: the run is logged failed, but the end is a report, not an error (killed is set) */
    bool kill_asked, killed;
    int kill_rank;
    int64_t kill_step;
    /* the files handed to the ranks and back, and what the end's tables need (the call is gone then) */
    char dir[32], init[64], outp[64];
    char *ckpt;                  /* owned copy of ckpt=, or NULL */
    int zero, opt_states;
    int batch_parts;             /* the global batch's parts (data-parallel degree; world unless the mode says) */
    struct rs_strategy_args *sargs; /* owned copy of the mode's options (the memory table's formula) */
} rs_ranks_train;

/* The kind's callbacks (rs_job_kind's init, line, fault and free); cmd_train_ranks.c's table. */
bool rs_ranks_train_init(rs_job *j);
bool rs_ranks_train_line(rs_job *j, const char *line);
bool rs_ranks_train_fault(rs_job *j, int rank, const rs_launch_rank *how, const rs_err *e);
void rs_ranks_train_free(rs_job *j);

#endif
