/* The pipeline's part of `train` across ranks (repl/train_pipe.c): what the run's end prints. */
#ifndef RS_TRAIN_PIPE_H
#define RS_TRAIN_PIPE_H

#include <stdio.h>

#include "dist/train/registry.h"
#include "ranks_job.h"

/* Keeps the schedule, micro-batches and virtual stages of a mode=pipeline run in the job. */
void rs_train_pipe_begin(rs_job *j, const rs_strategy_args *sa);
/* The bubble measured from the micro-batches the ranks traced (-1 without them); *steps: how many. */
double rs_train_pipe_bubble(const rs_job *j, int *steps);
/* The bubble beside its formula and each stage's activations in flight beside the schedule's. */
void rs_train_pipe_summary(rs_job *j, FILE *f);
/* Records the bubble, its formula and each stage's micro-batches in flight for `expect`. */
void rs_train_pipe_record(rs_job *j);

#endif
