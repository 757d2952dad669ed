/* mode=dp: PyTorch's nn.DataParallel as a training strategy. One process, `replicas` threads; every
 * step copies the parameters into each replica, splits the batch by rows, runs forward and backward
 * on every replica side by side, gathers the outputs and adds the gradients back into the model.
 * It exists to be measured against DDP: the copies, the gather and the serial reduce are its cost. */
#ifndef RS_DP_H
#define RS_DP_H

#include <stdint.h>

#include "engine/core/mem.h"
#include "engine/nn/model.h"
#include "train.h"

typedef struct rs_dp rs_dp;

/* Phases of one DataParallel step, for the timeline: what makes nn.DataParallel slow shows here. */
typedef enum rs_dp_phase {
    RS_DP_REPLICATE, /* m's parameters copied into every other replica (the calling thread) */
    RS_DP_SCATTER,   /* the micro-batch split into contiguous row ranges */
    RS_DP_COMPUTE,   /* forward + loss + backward of one replica (one span per replica) */
    RS_DP_GATHER,    /* the replicas' logits copied into one B-row buffer; mean loss */
    RS_DP_REDUCE,    /* every other replica's gradients added into m's (the calling thread) */
    RS_DP_PHASE_COUNT
} rs_dp_phase;
const char *rs_dp_phase_name(rs_dp_phase p);

/* A span of micro-batch work of optimizer step `step` (steps completed before it, as the loop's
 * on_phase counts), from t0 to t1 in rs_train_now seconds. replica is the replica for
 * RS_DP_COMPUTE and -1 for the other phases (the calling thread does them for all). Always called
 * on the thread that runs rs_train, in the order replicate, scatter, compute 0..n-1, gather, reduce,
 * once per micro-batch. */
typedef void (*rs_dp_phase_fn)(void *ud, int64_t step, rs_dp_phase p, int replica, double t0, double t1);

/* DataParallel over `replicas` (1..RS_DP_MAX_REPLICAS) threads in this process for model m
 * (borrowed, built; replica 0 is m itself and runs on the calling thread). The other replicas are
 * models built from rs_model_spec(m), each with its own buffers and its own rs_mem tracker; their
 * worker threads start here and wait between steps. fn may be NULL. Caller owns *out (rs_dp_free). */
#define RS_DP_MAX_REPLICAS 64
rs_status rs_dp_new(rs_model *m, int replicas, rs_dp_phase_fn fn, void *ud, rs_dp **out, rs_err *err);
/* Valid while d lives; put it in rs_train_cfg.strategy (world 1, rank 0, report). */
const rs_train_strategy *rs_dp_strategy(rs_dp *d);
int rs_dp_replicas(const rs_dp *d);
/* Joins the worker threads, frees the replicas and the optimizer. NULL is a no-op. */
void rs_dp_free(rs_dp *d);
/* Bytes held beyond m, from the trackers: the replicas' parameters, gradients, activations and
 * scratch, plus DataParallel's own gather buffer (in RS_POOL_ACTS). Peaks are summed tracker by
 * tracker, so peak figures are an upper bound of the peak of the sum. */
void rs_dp_replica_mem(const rs_dp *d, rs_mem *sum);

#endif
