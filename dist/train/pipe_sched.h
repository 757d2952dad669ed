/* Pipeline schedules as pure functions: for P ranks, M micro-batches and V stages per rank (virtual
 * stages, interleaved only), the ordered list of forwards and backwards each rank runs, the messages
 * each pair of ranks exchanges in the order they are sent, a simulation with fixed costs (when each
 * op would start, whether the schedule can deadlock, how many micro-batches each rank holds), and the
 * bubble measured from a trace beside its formula. Nothing here moves data or computes: the executor
 * (pipe_run.h) and the strategy (pipeline.c) do, and the tests check these lists on their own.
 *
 * Stages: the model is cut into S = P*V contiguous stages; rank r runs stages r, r+P, r+2P, ... (its
 * chunk c is stage c*P + r), as Megatron-LM's interleaved schedule places them. */
#ifndef RS_PIPE_SCHED_H
#define RS_PIPE_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/core/status.h"

typedef enum rs_pipe_kind {
    RS_PIPE_NAIVE,       /* model parallelism: one batch, no micro-batches (M = 1): F then B */
    RS_PIPE_GPIPE,       /* every forward, then every backward (GPipe): M micro-batches in flight */
    RS_PIPE_1F1B,        /* warm-up forwards, then one forward one backward (PipeDream-Flush): at most
                            P - rank in flight */
    RS_PIPE_INTERLEAVED, /* 1F1B over V stages per rank (Megatron-LM): a smaller bubble, more messages */
    RS_PIPE_KIND_COUNT
} rs_pipe_kind;

const char *rs_pipe_kind_name(rs_pipe_kind k); /* "naive", "gpipe", "1f1b", "interleaved" */
bool rs_pipe_kind_from_name(const char *s, rs_pipe_kind *out);

/* One op of a rank's schedule. */
typedef struct rs_pipe_op {
    char kind;  /* 'F' forward, 'B' backward */
    int micro;  /* 0..M-1 */
    int chunk;  /* 0..V-1: which of the rank's stages */
    int stage;  /* the stage: chunk * P + rank */
} rs_pipe_op;

/* Whether the schedule exists for these sizes: P >= 1, M >= 1; naive: M = 1, V = 1; gpipe and 1f1b:
 * V = 1; interleaved: V >= 2 and M a multiple of P (Megatron's rule: micro-batches go round the ranks
 * in groups of P). RS_ERR_ARG saying what would work. */
rs_status rs_pipe_check(rs_pipe_kind k, int P, int M, int V, rs_err *err);
/* Rank r's ops in the order it runs them: 2*M*V of them, written to out (room for 2*M*V). Returns the
 * count, or -1 when rs_pipe_check refuses the sizes or r is not a rank. */
int rs_pipe_schedule(rs_pipe_kind k, int P, int M, int V, int r, rs_pipe_op *out);

/* A message between stages: an activation going forward ('A': the output of stage `stage - 1` for
 * `stage`) or a gradient going back ('G': the gradient of stage `stage + 1`'s input, for `stage`). */
typedef struct rs_pipe_msg {
    char kind;   /* 'A' or 'G' */
    int micro;
    int stage;   /* the stage that receives it */
} rs_pipe_msg;
/* What rank `from` sends to rank `to`, in the order it sends it (one message right after each op that
 * produces one): the order `to` must post its receives in, since a pair's messages are not tagged.
 * Writes at most cap, returns how many there are (or -1 for sizes the schedule refuses). */
int rs_pipe_messages(rs_pipe_kind k, int P, int M, int V, int from, int to, rs_pipe_msg *out, int cap);

/* The schedule run with fixed costs (every stage's forward tf, backward tb, messages free): each op's
 * start and end, and the makespan. Returns RS_ERR_ARG for sizes the schedule refuses and RS_ERR_STATE
 * when the ranks would wait on each other forever. start/end: (P, 2*M*V) row-major, may be NULL. */
rs_status rs_pipe_simulate(rs_pipe_kind k, int P, int M, int V, double tf, double tb, double *start, double *end,
                           double *makespan, rs_err *err);
/* The same with each stage's own costs: tf[s], tb[s] for the S = P*V stages. */
rs_status rs_pipe_simulate_costs(rs_pipe_kind k, int P, int M, int V, const double *tf, const double *tb,
                                 double *start, double *end, double *makespan, rs_err *err);
/* The idle share of the simulated step with those costs: 1 - (work of all stages) / (P * makespan); -1
 * for sizes the schedule refuses. */
double rs_pipe_bubble_of_costs(rs_pipe_kind k, int P, int M, int V, const double *tf, const double *tb);

/* A measured bubble taken apart, each a share of the step's time (they add up to measured):
 *  - schedule: the schedule's own fill and drain, simulated with every stage at the stages' mean
 *    forward and backward times ((p-1)/(m+p-1) for GPipe and 1F1B);
 *  - imbalance: what the stages' unequal times add (simulated with each stage's own measured times);
 *  - overhead: the rest, which no schedule explains: messages, waits for a peer that was not running
 *    (ranks sharing cores), and the gaps between one op and the next. */
typedef struct rs_pipe_bubble_parts {
    double measured, schedule, imbalance, overhead;
} rs_pipe_bubble_parts;
/* tf, tb: each stage's mean forward and backward of one micro-batch (S = P*V of each). RS_ERR_ARG for
 * sizes the schedule refuses. */
rs_status rs_pipe_bubble_split(rs_pipe_kind k, int P, int M, int V, const double *tf, const double *tb,
                               double measured, rs_pipe_bubble_parts *out, rs_err *err);

/* The most micro-batches rank r holds at once (forward done, backward not yet, counted per stage),
 * from its order alone: GPipe M, 1F1B min(P - r, M). */
int rs_pipe_peak_inflight(rs_pipe_kind k, int P, int M, int V, int r);

/* The bubble: the idle share of the pipeline's time, (p-1)/(m+p-1) for GPipe and 1F1B (equal stages),
 * (p-1)/(v*m+p-1) interleaved, (p-1)/p naive. */
double rs_pipe_bubble_formula(rs_pipe_kind k, int P, int M, int V);

/* One forward or backward as a rank traced it. */
typedef struct rs_pipe_span {
    int rank;
    int64_t step;
    char kind;
    int micro, stage;
    double t0, t1;
} rs_pipe_span;
/* The bubble measured: per optimizer step, 1 - (time the P ranks spent computing) / (P * the step's
 * span from the first op's start to the last op's end, over all ranks); the mean over the steps that
 * have spans of all P ranks. Spans of ranks >= P are ignored. Returns -1 when no step qualifies. */
double rs_pipe_bubble_measured(const rs_pipe_span *s, int n, int P, int *steps);

#endif
