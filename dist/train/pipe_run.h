/* The pipeline executor: one rank runs its schedule (pipe_sched.h) for one optimizer step, moving
 * activations forward and gradients back between the stages' ranks with immediate sends and receives
 * over the process group. What a forward or a backward computes is the caller's (rs_pipe_io): the
 * pipeline strategy runs ranges of the model's layers (pipeline.c), a test can sleep or add numbers.
 *
 * Messages carry no tags, so a rank posts its receives from a peer in the order the peer's schedule
 * sends them (rs_pipe_messages) — one ahead of need, so a transfer overlaps the computation before it
 * — and sends with isend right after the op that produced the message, its buffer released once the
 * transfer is done. Every wait also moves the other transfers along (the backends' rule). Received
 * activations are the stages' inputs and stay until their backward: they count in the ACTS pool of the
 * tracker, gradients and outgoing copies in COMM. Buffers are kept for reuse between steps. */
#ifndef RS_PIPE_RUN_H
#define RS_PIPE_RUN_H

#include "dist/pg/pg.h"
#include "dtrain.h"
#include "engine/core/mem.h"
#include "pipe_sched.h"

typedef struct rs_pipe_io {
    /* Forward of micro-batch `micro` on this rank's chunk `chunk` (stage chunk*P + rank). in: the
     * previous stage's output (NULL on stage 0: the callback reads its data). *out: the output to send
     * on (ignored on the last stage), valid until the next call. */
    rs_status (*forward)(void *ud, int micro, int chunk, const float *in, const float **out, rs_err *err);
    /* Backward of the same. dout: the next stage's gradient for our output (NULL on the last stage:
     * the loss gives it). din: where the gradient of `in` goes (NULL on stage 0), numel(micro, stage)
     * floats. in is what forward had. */
    rs_status (*backward)(void *ud, int micro, int chunk, const float *in, const float *dout, float *din,
                          rs_err *err);
    /* Floats of the boundary into stage `stage` (>= 1) for micro-batch `micro`. */
    size_t (*numel)(void *ud, int micro, int stage);
    void *ud;
} rs_pipe_io;

typedef struct rs_pipe_exec rs_pipe_exec;

/* An executor for rank g->rank of g->world stages' ranks; buffers are counted in mem (may be NULL).
 * g and mem are borrowed. Caller owns the result. */
rs_pipe_exec *rs_pipe_exec_new(rs_pg *g, rs_mem *mem, rs_err *err);
void rs_pipe_exec_free(rs_pipe_exec *x);

/* Runs this rank's part of one step of schedule k over M micro-batches and V chunks per rank, tracing
 * each forward and backward (work may be NULL) as step `step`. On a failure (a peer that died or timed
 * out) the message names the stage, the micro-batch and the peer; the transfers in flight are
 * abandoned. */
rs_status rs_pipe_exec_step(rs_pipe_exec *x, rs_pipe_kind k, int M, int V, const rs_pipe_io *io, int64_t step,
                            rs_dtrain_work_fn work, void *work_ud, rs_err *err);

/* The bytes of received activations this rank holds now (its stages' inputs waiting for their
 * backward, and those received ahead), and the most it held at once in the last step. */
size_t rs_pipe_exec_inputs(const rs_pipe_exec *x);
size_t rs_pipe_exec_peak_inputs(const rs_pipe_exec *x);

#endif
