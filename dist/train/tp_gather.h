/* The whole model's buffer rebuilt from a tensor-parallel group's shards: what tensor parallelism
 * (tensor.c) and pipeline stages whose layers are tensor-parallel (pipeline.c) do before an evaluation,
 * a checkpoint or the end, so both stay whole-model safetensors. */
#ifndef RS_TP_GATHER_H
#define RS_TP_GATHER_H

#include "dist/pg/pg.h"
#include "dtrain.h"
#include "engine/nn/tp.h"

/* Rank 0 of tpg places every rank's shard into whole (its own from src, the others' received into
 * stage, a buffer of at least the largest shard); the other ranks send src. src and whole are buffers
 * in the parameters' layout (parameters, or an optimizer moment). Each transfer is reported to comm
 * (may be NULL) as step `step`. */
rs_status rs_tp_gather_whole(rs_pg *tpg, const rs_tp_plan *plan, const float *src, float *whole, float *stage,
                             rs_dtrain_comm_fn comm, void *comm_ud, int64_t step, rs_err *err);
/* The largest shard of the plan, in floats (the size stage needs). */
size_t rs_tp_max_shard(const rs_tp_plan *plan);

#endif
