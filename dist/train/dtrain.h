/* Training across ranks: the strategies that plug into the engine's one training loop
 * (rs_train_strategy in engine/train/train.h) to make it DDP (ddp.c), FSDP/ZeRO (zero.c) or tensor
 * parallel (tensor.c). Every rank runs rs_train with the same model spec, seed, data and configuration plus its strategy; the ranks
 * meet through the process group. The loop keeps the data order (each rank reads batch/world of every
 * global batch, DistributedSampler semantics), micro-batches, schedule, events and evaluation, so
 * every mode trains the same model as one process would, up to the order of floating-point sums. */
#ifndef RS_DTRAIN_H
#define RS_DTRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dist/pg/pg.h"
#include "engine/train/train.h"

typedef struct rs_dtrain_cfg {
    int zero;               /* FSDP: 1 shards optimizer state, 2 also gradients, 3 also parameters */
    size_t bucket_bytes;    /* DDP: gradient bucket size (0: 25 MiB, as torch) */
    bool overlap;           /* DDP: all-reduce each bucket from a communication thread as soon as
                               backward has produced it (default on); off: all after backward */
    bool offload;           /* FSDP: parameter shards and optimizer state in host memory */
    int wrap;               /* FSDP zero=3: rs_wrap, which layers make a unit (default: top-level items) */
    int tp;                 /* tensor: ranks per tensor-parallel group (0: all); the world / tp groups
                               are data parallel over each other */
} rs_dtrain_cfg;

rs_dtrain_cfg rs_dtrain_defaults(void);

/* A communication span: bytes moved by op (rs_pg_op_name) for bucket/unit `index` (-1: none), from
 * t0 to t1 (rs_train_now). May be called from the communication thread. */
typedef void (*rs_dtrain_comm_fn)(void *ud, int64_t step, const char *op, int index, size_t bytes, double t0,
                                  double t1);
/* A piece of one micro-batch's compute: its forward (kind 'F') or backward ('B') on (virtual) pipeline
 * stage `stage`, from t0 to t1 (rs_train_now), in optimizer step `step`. What the pipeline timeline
 * draws and the bubble is measured from. */
typedef void (*rs_dtrain_work_fn)(void *ud, int64_t step, char kind, int micro, int stage, double t0, double t1);

/* The strategy objects fill *out (a strategy whose ud they own; rs_train calls its teardown, which
 * frees everything). g and m are borrowed and must outlive the training run. Optimizer state,
 * buckets and gathered shards are allocated in m's tracker (rs_model_mem): pools OPTIM, COMM,
 * PARAMS, GRADS, so the memory figures are measured, not computed. */
rs_status rs_ddp_strategy(rs_pg *g, rs_model *m, const rs_dtrain_cfg *cfg, rs_dtrain_comm_fn comm, void *comm_ud,
                          rs_train_strategy *out, rs_err *err);
rs_status rs_zero_strategy(rs_pg *g, rs_model *m, const rs_dtrain_cfg *cfg, rs_dtrain_comm_fn comm, void *comm_ud,
                           rs_train_strategy *out, rs_err *err);
/* Tensor parallelism (tensor.c): cfg->tp ranks split the model (engine/nn/tp.h), world/tp such groups
 * average their shards' gradients (dp x tp). Every rank of g calls it: it makes the sub-groups. m's
 * buffers are released while training (every rank computes on its shard); rank 0 holds the whole
 * weights after gather, for evaluation, checkpoints and the end. */
rs_status rs_tensor_strategy(rs_pg *g, rs_model *m, const rs_dtrain_cfg *cfg, rs_dtrain_comm_fn comm, void *comm_ud,
                             rs_train_strategy *out, rs_err *err);

/* The ZeRO paper's prediction of persistent bytes per rank for `params` parameters over `world` ranks,
 * f32 training with an optimizer keeping `opt_states` floats per parameter (Adam 2, SGD with momentum 1,
 * plain SGD 0): DDP (zero 0) 4P + 4P + 4kP; zero 1: 4P + 4P + 4kP/N; zero 2: 4P + (4P + 4kP)/N;
 * zero 3: (4P + 4P + 4kP)/N. Per pool, for printing beside the measured figures. */
typedef struct rs_zero_bytes {
    double params, grads, optim;
} rs_zero_bytes;
rs_zero_bytes rs_zero_mem_formula(size_t params, int world, int zero, int opt_states);

#endif
