/* The model's state, shared by the files that implement it (model.c: building and layout;
 * model_exec.c: activation memory, forward, loss, backward; model_text.c: spec and summary;
 * model_shard.c: sharded buffers). Nothing outside engine/nn includes this. */
#ifndef RS_MODEL_INTERNAL_H
#define RS_MODEL_INTERNAL_H

#include "model.h"

#define MAX_DEPTH 8

struct rs_model {
    char name[64];
    rs_shape in;
    rs_device dev;
    const rs_kernels *k;
    rs_kctx ctx;      /* the default context: forward, backward and zero_grad run on it (threads from
                         rs_model_set_threads, the device's default until then) */
    rs_mem own_mem;   /* used when the caller gave no tracker */
    rs_mem *mem;
    uint64_t seed;
    bool laid_out, built, training;
    bool tokens;      /* the input is a sequence of int32 token ids (a language model) */

    rs_layer *layers; /* execution order */
    int nlayers, cap_layers;
    rs_block *blocks;
    int nblocks, cap_blocks;
    /* building state: the open block at each depth and the child counter at each depth */
    int depth, open_block[MAX_DEPTH], child_count[MAX_DEPTH + 1];

    rs_param_info *tensors;
    int ntensors;
    size_t numel;
    float *params, *grads;

    /* activation memory for batches up to cap_B */
    int cap_B;
    float *acts;      /* every layer's output, back to back */
    size_t *act_off;  /* (nlayers) offsets into acts */
    /* Gradients of layer outputs, in backward: node i's gradient lives in slot gslot[i] of dbuf (slots
     * of B * dmax floats) from its first consumer's backward to its own, so a chain needs two slots
     * (the old ping-pong) and a residual block one more; slots nslots and nslots+1 take a second
     * contribution before it is added in. gdone[i]: node i's gradient has received a first write. */
    float *dbuf;
    int *gslot, nslots;
    unsigned char *gdone;
    size_t dslot;     /* floats per slot */
    unsigned char *saved;
    float *probs, *losses;
    float *ws;
    size_t acts_bytes, dbuf_bytes, saved_bytes, probs_bytes, ws_bytes;

    uint64_t step; /* forward calls in training mode: varies the dropout mask */
    int failed_layer; /* layer whose setup failed in the last layout, or -1 */
    rs_grad_ready_fn grad_hook;
    void *grad_hook_ud;

    /* Sharded training (see model.h): the units (top-level items, owned), their hooks, whether the
     * gradient buffer is released (ZeRO-2), and whether params/grads are reservations of map_bytes
     * each (ZeRO-3) with a resident flag per unit for each (owned, nunits bytes each). */
    rs_unit *units;
    int nunits;
    rs_wrap wrap;
    rs_unit_hooks uh;
    bool has_uh, grads_released, sharded;
    size_t map_bytes;
    unsigned char *resident[2]; /* [0] params, [1] grads */
};

/* Frees the activation memory (model_exec.c); the next forward reserves it again. */
void rs_model_free_acts(rs_model *m);
/* The parameter or gradient buffer (pool RS_POOL_PARAMS or RS_POOL_GRADS, rs_model_buf_bytes) from the
 * device's allocator, counted in the model's tracker; NULL when out of memory. */
float *rs_model_buf_alloc(rs_model *m, rs_pool pool);
void rs_model_buf_free(rs_model *m, rs_pool pool, float *buf);
/* Size of the parameter or gradient buffer in bytes (at least one float). */
static inline size_t rs_model_buf_bytes(const rs_model *m) { return (m->numel ? m->numel : 1) * sizeof(float); }

#endif
