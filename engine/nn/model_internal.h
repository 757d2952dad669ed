/* The model's state, shared by the files that implement it (model.c: building and layout;
 * model_acts.c: activation sets and cut points; model_exec.c: forward, loss, backward over a set or
 * a range of layers; model_text.c: spec and summary; model_shard.c: sharded buffers). Nothing outside
 * engine/nn includes this. */
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
    bool inference;   /* inference-only (see rs_model_set_inference_only) */
    int fixed_batch;  /* data samples per model sample (rs_model_set_fixed_batch); 0 or 1: one */

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

    /* Gradients of layer outputs, in backward: node i's gradient lives in slot gslot[i] of a set's
     * dbuf from its first consumer's backward to its own, so a chain needs two slots (the old
     * ping-pong) and a residual block one more; slots nslots and nslots+1 (ntmp = 2 of them when some
     * value is read twice) take a second contribution before it is added in. Planned once at build
     * from the graph alone, so every set shares the plan. (nlayers) owned. */
    int *gslot, nslots, ntmp;
    rs_acts *dflt;    /* the set rs_model_forward/loss/backward use, owned; NULL until the first */

    uint64_t step; /* training-mode forwards from layer 0: varies the dropout mask */
    int failed_layer; /* layer whose setup failed in the last layout, or -1 */
    rs_grad_ready_fn grad_hook;
    void *grad_hook_ud;
    rs_tp_comm_fn tp_comm; /* the tensor-parallel group's all-reduce (tp_copy, tp_reduce) */
    void *tp_comm_ud;

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

/* An activation set (model.h): everything one pass writes besides the parameter gradients, for
 * layers [first, last). Offsets are per layer of the model; only those of the set's layers mean
 * anything. */
struct rs_acts {
    rs_model *m;              /* borrowed */
    /* The context its passes run on: the model's for the default set, else own, a copy of the model's
     * made with the set and given the model's threads again at each pass. Passes over different sets
     * can run at once, so each keeps its first failure apart from the others'. */
    rs_kctx *ctx;
    rs_kctx own;
    int first, last;          /* the layers it holds memory for */
    int cap_B;                /* batches up to cap_B fit (0: nothing allocated yet) */
    float *acts;              /* every output of its layers, back to back */
    size_t *act_off;          /* (nlayers) offset of layer i's output in acts, then (nlayers) of its
                                 saved area in saved (SIZE_MAX: it keeps nothing); owned */
    size_t *saved_off;        /* act_off + nlayers */
    unsigned char *saved;     /* what layers keep from forward for backward, 64-byte aligned each */
    float *dbuf;              /* gradient slots (model's nslots + ntmp) of dslot floats */
    size_t dslot;
    unsigned char *gdone;     /* (nlayers) node i's slot has had its first write in this backward; owned */
    float *probs, *losses;    /* (R, C) and (R): only when the set holds the last layer */
    const float *out;         /* the last whole pass's output (a view may make it the input itself) */
    float *ws;                /* workspace: the largest workspace_bytes of its layers */
    size_t acts_bytes, dbuf_bytes, saved_bytes, probs_bytes, ws_bytes;
    /* A model on a device (not the CPU) takes its inputs and labels from host memory and gives its
     * output and losses back there, so a set stages them: in_dev and y_dev are device memory (from
     * the table, counted in RS_POOL_ACTS) the host values are copied into before a pass; out_host and
     * loss_host are host copies of the output and the row losses (malloc, owned). All NULL on the CPU,
     * where the caller's buffers are used directly. */
    bool staged;
    void *in_dev;
    int32_t *y_dev;
    float *out_host, *loss_host;
    size_t in_bytes, y_bytes, out_bytes;
    /* the last forward's mode and dropout step, the last loss's labels (borrowed), the loss factor */
    bool training;
    uint64_t step;
    const int32_t *y;
    float loss_scale;
};

/* Takes the failure a's context recorded (a void backward's), and for a set with its own context one
 * the model's recorded (zero_grad, the optimizer); gives its own context the model's threads. Before
 * each pass on a (model_acts.c). */
rs_status rs_acts_sync_ctx(rs_acts *a, rs_err *err);
/* Grows set a (model_acts.c) for batches of B at the current thread count; a no-op when it fits. */
rs_status rs_acts_reserve(rs_acts *a, int B, rs_err *err);
/* Plans the gradient slots (model_acts.c); at build, once the graph is final. */
rs_status rs_model_plan_grads(rs_model *m, rs_err *err);
/* Frees the default set and the slot plan (model_acts.c). */
void rs_model_free_acts(rs_model *m);
/* Forward of layers [first, last) on a in the given mode (model_exec.c): what rs_model_forward_range
 * does with the model's mode; generate.c runs eval passes through it without switching the model. */
rs_status rs_model_run_range(rs_model *m, rs_acts *a, int first, int last, const void *in, int B, bool training,
                             const float **out, rs_err *err);
/* The parameter or gradient buffer (pool RS_POOL_PARAMS or RS_POOL_GRADS, rs_model_buf_bytes) from the
 * device's allocator, counted in the model's tracker; NULL when out of memory. */
float *rs_model_buf_alloc(rs_model *m, rs_pool pool);
void rs_model_buf_free(rs_model *m, rs_pool pool, float *buf);
/* Size of the parameter or gradient buffer in bytes (at least one float). */
static inline size_t rs_model_buf_bytes(const rs_model *m) { return (m->numel ? m->numel : 1) * sizeof(float); }

#endif
