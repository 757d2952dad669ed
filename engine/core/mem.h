/* Memory accounting by pool, measured at the allocator.
 * Every buffer a model, optimizer or communication layer owns is allocated through an rs_mem tracker,
 * which counts live and peak bytes per pool. The figures the REPL and the memory view print come from
 * here, not from formulas. A tracker is an object (one per model or per rank), never a global, so two
 * replicas in one process keep separate books. */
#ifndef RS_MEM_H
#define RS_MEM_H

#include <stddef.h>
#include <stdint.h>

typedef enum rs_pool {
    RS_POOL_PARAMS = 0,
    RS_POOL_GRADS,
    RS_POOL_OPTIM,
    RS_POOL_ACTS,   /* activations saved for backward and their gradients */
    RS_POOL_COMM,   /* communication buffers (buckets, gathered shards) */
    RS_POOL_SCRATCH,/* workspaces such as im2col columns */
    RS_POOL_OFFLOAD,/* state moved out of the compute device's memory (FSDP offload=cpu): host memory */
    RS_POOL_COUNT
} rs_pool;

typedef struct rs_mem {
    /* Plain counters updated with atomic builtins: a tracker may be shared by threads of one rank. */
    int64_t live[RS_POOL_COUNT];
    int64_t peak[RS_POOL_COUNT];
    int64_t peak_total;
    int64_t live_total;
} rs_mem;

const char *rs_pool_name(rs_pool p);

/* 64-byte aligned, zero-filled allocation counted in pool p of tracker m (m may be NULL: uncounted).
 * The caller owns the result and releases it with rs_mem_free(m, p, ptr, bytes) using the same size. */
void *rs_mem_alloc(rs_mem *m, rs_pool p, size_t bytes);
void rs_mem_free(rs_mem *m, rs_pool p, void *ptr, size_t bytes);
/* Counts delta bytes (negative: released) in pool p for memory managed outside rs_mem_alloc, such as
 * the ranges of a reserved mapping that ZeRO-3 fills and gives back (engine/nn/model.h). m may be NULL. */
void rs_mem_count(rs_mem *m, rs_pool p, int64_t delta);
/* Resets peaks to the current live figures (e.g. at the start of a measured step). */
void rs_mem_reset_peaks(rs_mem *m);

#endif
