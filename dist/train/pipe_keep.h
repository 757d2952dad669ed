/* What one rank of a mode=pipeline run keeps and how (shared by pipeline.c, the strategy, and
 * pipe_keep.c): its stages (chunks) and the parameters shared with a stage on another rank (ties),
 * the run's state, and pipe_keep.c's part of it: only its stages' parameters resident (measured in
 * the PARAMS and GRADS pools), ZeRO-1's parts of the optimizer over the dp group, and the whole
 * optimizer gathered for a checkpoint and cut back out after a resume. Internal to dist/train. */
#ifndef RS_PIPE_KEEP_H
#define RS_PIPE_KEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtrain.h"
#include "engine/nn/tp.h"
#include "engine/optim/optim.h"
#include "grid.h"
#include "pipe_run.h"
#include "pipe_sched.h"
#include "registry.h"

typedef struct rs_pipe_chunk {
    int stage, first, last; /* layers [first, last) */
    size_t off, len;        /* the parameters it owns: [off, off+len) of the flat buffers */
    size_t zlo, zlen;       /* zero=1: this dp rank's part [off+zlo, off+zlo+zlen) of it, blk the parts' size */
    size_t blk;
    rs_optim *opt;          /* over [off, off+len), or with zero=1 over its part; NULL when it owns none */
    rs_acts **sets;         /* (nsets) allocated activation sets; busy[] those in use */
    bool *busy;
    size_t *bytes;          /* what each set took from the ACTS pool, measured when it was made */
    int nsets;
} rs_pipe_chunk;

/* A parameter read on this rank and owned on another (or the reverse): its gradient is summed with
 * the peer's before the step. */
typedef struct rs_pipe_tie {
    size_t off, numel;
    int peer;
    bool reader;            /* this rank reads it (and keeps a copy with its own optimizer) */
    size_t zlo, zlen, blk;  /* reader, zero=1: its part of the copy, as a chunk's */
    rs_optim *opt;          /* reader: the optimizer of the copy (or of its part) */
} rs_pipe_tie;

typedef struct rs_pipe_state {
    rs_pg *g;               /* the world, borrowed */
    rs_grid grid;           /* this rank's place in dp x pp x tp */
    rs_grid_groups gg;      /* its groups (owned unless the world itself); gg.pp is never NULL */
    rs_pg *ppg;             /* = gg.pp: the stages of this rank's pipeline */
    rs_model *whole;        /* the loop's model, borrowed */
    rs_model *m;            /* the model the stages run: whole, or with tp > 1 this rank's shard (owned) */
    rs_tp_plan *plan;       /* tp > 1 */
    float *tp_stage;        /* rank 0: another shard in flight to the whole buffer (COMM) */
    size_t tp_stage_n;
    bool whole_resident;    /* rank 0 with tp > 1: whole holds the gathered weights */
    bool gathered;          /* since the last step */
    bool others_resident;   /* m's units of other stages hold the gathered weights (first stage's ranks) */
    size_t own_floats;      /* parameters this rank keeps: its stages' ranges and tied copies */
    float *ck;              /* checkpoints: one optimizer state in m's layout (SCRATCH) */
    size_t ck_n;
    rs_status comm_st;      /* the first failure of a tensor-parallel all-reduce inside a pass */
    rs_err comm_err;
    int ar_index;           /* this step's tensor-parallel all-reduces so far */
    int zero;               /* 1: optimizer state sharded over the dp group */
    float *zsend, *zrecv;   /* zero=1: one part and dp parts of the largest stage range (COMM) */
    size_t zblk;
    rs_mem *mem;
    rs_pipe_kind kind;
    int P, V, S, M, rank;   /* P = pp, rank = this rank's place in its pipeline (grid.p) */
    int *cuts;              /* (S+1) in m's layers */
    int *wcuts;             /* (S+1) in the whole model's layers */
    rs_pipe_chunk *ch;              /* (V) */
    rs_pipe_tie *ties;
    int nties;
    float *tie_buf;         /* COMM: the peer's contribution while summing */
    size_t tie_max;
    rs_pipe_exec *ex;
    rs_strategy_ctx ctx;
    int64_t step;
    rs_opt_cfg optcfg;
    int batch_cap;          /* rows of a micro-batch's activation set */
    /* the current forward_backward */
    const void *x;
    const int32_t *y;
    int B, Meff;
    float loss_scale;
    int *rows, *row0;       /* (M) */
    double loss;
    rs_acts **held;         /* (M * V): the set of micro-batch m on chunk c */
    float *logits;          /* (B * rows * classes) SCRATCH: what the loop counts accuracy from */
    size_t logits_n;
    uint64_t step_base;     /* the model's step before this batch: micro-batch m draws step_base + m + 1 */
    /* activations in flight, measured: the bytes of the sets in use plus the received stage inputs,
     * their peak during a step, and the sets' count */
    size_t acts_now, acts_peak, set_bytes;
    int sets_held, sets_peak;
    /* checkpoints: the whole optimizer, only when a run checkpoints or resumes */
    rs_optim *full;
    rs_mem full_mem;
} rs_pipe_state;

/* A communication span of this rank's current step, to the strategy's reporter. */
static inline void rs_pipe_comm(rs_pipe_state *p, const char *op, int index, size_t bytes, double t0)
{
    if (p->ctx.comm) p->ctx.comm(p->ctx.comm_ud, p->step, op, index, bytes, t0, rs_train_now());
}

/* The parameters layers [first, last) of m own: [*off, *off + *len) of the flat buffers. */
void rs_pipe_stage_range(rs_model *m, int first, int last, size_t *off, size_t *len);
/* With zero=1 this dp rank's part of a range of len floats: [zlo, zlo + zlen), parts of blk (the last
 * one short); without, the whole range. */
void rs_pipe_zero_part(const rs_pipe_state *p, size_t len, size_t *blk, size_t *zlo, size_t *zlen);
/* Whether [off, off + n) meets this rank's stages' ranges or its tied copies. */
bool rs_pipe_owns(const rs_pipe_state *p, size_t off, size_t n);
/* Gives back the pages of every unit no stage of this rank runs (m's buffers become reservations), its
 * own weights kept. */
rs_status rs_pipe_keep_own(rs_pipe_state *p, rs_err *err);
/* After a step: the other stages' units a first stage's rank took to gather into go back. */
void rs_pipe_release_others(rs_pipe_state *p);
/* zero=1: the dp group's parts of [off, off + len) all-gathered into m's parameters. */
rs_status rs_pipe_zero_gather(rs_pipe_state *p, size_t off, size_t len, size_t blk, size_t zlo, size_t zlen,
                              rs_err *err);
/* The strategy's optimizer and sync_optimizer (engine/train/train.h): the whole optimizer, and its
 * state gathered to rank 0 or cut back out. */
rs_optim *rs_pipe_optimizer(void *ud);
rs_status rs_pipe_sync_optimizer(void *ud, bool to_full, rs_err *err);

#endif
