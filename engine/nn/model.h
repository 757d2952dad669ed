/* Models: a sequence of layers (blocks may nest) over one parameter buffer and one gradient buffer.
 * Lifecycle, as in llm.c: build (shapes, layout, allocation, init) -> reserve(B) -> forward -> loss
 * -> zero_grad -> backward -> (optimizer on the flat buffers) -> free. Every tensor of the model is
 * an {offset, shape} into the buffers, so checkpoints, DDP buckets and ZeRO shards are ranges. */
#ifndef RS_MODEL_H
#define RS_MODEL_H

#include "engine/core/mem.h"
#include "layer.h"

/* A named parameter tensor ("3.weight") as an offset range of the model's buffers. */
typedef struct rs_param_info {
    char name[64];
    rs_shape shape;
    size_t offset, numel;
    int layer; /* index into the execution order */
} rs_param_info;

/* A group of consecutive layers: every top-level item is a unit (FSDP wraps units by default). */
typedef struct rs_block {
    char name[48];
    int first, count; /* layers [first, first+count) */
    int depth;        /* 0 = top level */
    bool residual;    /* res[ ... ]: its last layer is an add of the block's output and input */
    int input;        /* the node feeding the block (-1: the model's input) */
} rs_block;

/* Called after a layer's backward with the gradient range it has finished (DDP buckets listen). */
typedef void (*rs_grad_ready_fn)(void *ud, size_t offset, size_t numel);

typedef struct rs_model rs_model;

/* An empty model taking per-sample input `in`. mem may be NULL: the model then keeps its own
 * tracker (rs_model_mem). Caller owns the result. */
rs_model *rs_model_new(const char *name, const rs_shape *in, rs_device dev, rs_mem *mem);
rs_status rs_model_add(rs_model *m, const rs_layer_cfg *cfg, rs_err *err);
/* A node reading the producers src[0..nsrc) (-1: the model's input; each before it) rather than the
 * previous node: how an imported graph's nodes are added. Blocks are not tracked for it. */
rs_status rs_model_add_from(rs_model *m, const rs_layer_cfg *cfg, const int *src, int nsrc, rs_err *err);
rs_status rs_model_begin_block(rs_model *m, rs_err *err);
/* A residual block: end_block appends an add of the block's output and the block's input. */
rs_status rs_model_begin_residual(rs_model *m, rs_err *err);
rs_status rs_model_end_block(rs_model *m, rs_err *err);
/* Largest per-sample activation or parameter tensor, in elements: beyond it shapes are rejected
 * before any size is computed in a type that could overflow. */
#define RS_MODEL_MAX_ELEMS ((int64_t)1 << 31)

/* Infers every layer's shapes and lays out the parameter offsets, allocating nothing; the shape
 * errors of a spec show up here. Idempotent. */
rs_status rs_model_layout(rs_model *m, rs_err *err);
/* After a failed layout: the index of the layer at fault (or -1), so a front end can point at it. */
int rs_model_failed_layer(const rs_model *m);
/* rs_model_layout, then allocates parameters and gradients and initialises them from seed. */
rs_status rs_model_build(rs_model *m, uint64_t seed, rs_err *err);
/* Allocates the default activation set's memory for batches up to B (forward does it too when B
 * grows). */
rs_status rs_model_reserve(rs_model *m, int B, rs_err *err);

/* An inference-only model (an imported graph; rs_model_add_op makes one): forward runs, its output
 * may have any shape, and no gradient buffer or backward memory is allocated; rs_model_backward does
 * nothing and rs_model_check_trainable (which training calls) refuses it. Set before layout. */
void rs_model_set_inference_only(rs_model *m);
bool rs_model_inference_only(const rs_model *m);
/* Makes slot `slot` of layer `layer` a view of slot `owner_slot` of the earlier layer `owner` (the same
 * number of values): one range of the parameter buffer that both read, counted and stored once, as
 * tie= does for a linear's weight. How the constants an imported graph's nodes share stay one tensor.
 * Before layout, which checks it. */
rs_status rs_model_share_param(rs_model *m, int layer, int slot, int owner, int owner_slot, rs_err *err);
/* A model whose one sample is k samples of its data (an imported graph whose file fixed the batch at
 * k > 1): its input is k data samples back to back and its output k times the rows of scores per data
 * sample. Evaluation runs it k data samples at a time (rs_evaluate pads the last group); 1 for every
 * other model. */
void rs_model_set_fixed_batch(rs_model *m, int k);
int rs_model_fixed_batch(const rs_model *m);
/* RS_OK, or why the model cannot train (naming the first node without a backward). */
rs_status rs_model_check_trainable(const rs_model *m, rs_err *err);

void rs_model_set_training(rs_model *m, bool training);
bool rs_model_training(const rs_model *m);
/* The default pass, through an activation set the model owns (below): one pass at a time.
 * x (B, in) must stay valid until backward: floats, or int32 token ids for a token model (ids outside
 * the vocabulary are an error). *logits (B * rows, classes) points into the model (valid until the
 * next forward). */
rs_status rs_model_forward(rs_model *m, const void *x, int B, const float **logits, rs_err *err);
/* Mean softmax cross-entropy of the last forward against labels y (B * rows: one per row of scores,
 * so one per position for a token model); keeps probabilities for backward. Labels outside
 * [0, classes) are an error. */
rs_status rs_model_loss(rs_model *m, const int32_t *y, int B, float *loss, rs_err *err);
/* Accumulates d(loss)/d(params) into the gradient buffer (call zero_grad first unless accumulating).
 * loss_scale multiplies the loss gradient: 1 for one batch, 1/K when accumulating K micro-batches. */
void rs_model_backward(rs_model *m, const void *x, const int32_t *y, int B, float loss_scale);
void rs_model_zero_grad(rs_model *m);
void rs_model_set_grad_hook(rs_model *m, rs_grad_ready_fn fn, void *ud);
/* The all-reduce a tensor-parallel shard's tp_copy and tp_reduce layers call (engine/nn/tp.h); NULL:
 * a group of one rank. */
void rs_model_set_tp_comm(rs_model *m, rs_tp_comm_fn fn, void *ud);

/* ---- Activation sets: passes that run side by side ----
 * Everything a pass writes besides the parameter gradients (every layer's output, what layers keep
 * for backward, gradient slots, probabilities, workspace) lives in an activation set. The functions
 * above use a default set the model owns; a caller that needs several passes at once gives each its
 * own set: two server threads answering requests from one model, or a pipeline stage keeping several
 * micro-batches in flight. The model itself is then read-only during a pass, except:
 *   - the step counter (dropout masks), advanced by a training-mode forward that starts at layer 0;
 *   - the gradient buffer, which backward accumulates into;
 *   - the unit hooks and the grad hook, which are the caller's own code.
 * So the rule is: concurrent sets are for inference (eval mode, rs_model_set_training(m, false)), or
 * for training passes the caller serialises (a pipeline's schedule runs one pass at a time per model;
 * separate sets let micro-batch 2's forward happen before micro-batch 1's backward). Nothing may change
 * the model (training mode, parameters, hooks, wrap, sharding) while another thread runs a pass.
 *
 * A set holds memory for a range of layers (all of them from rs_acts_new), counted in the model's
 * tracker: outputs, saved values and gradient slots in RS_POOL_ACTS, workspace in RS_POOL_SCRATCH.
 * It grows when a pass needs more (a larger B, or more threads needing more workspace); an output a
 * pass returned is valid until the next pass on the same set. Free every set before its model.
 * A set's passes run on its own kernel context (a copy of rs_model_ctx taking the model's threads at
 * each pass), so concurrent passes never share a first-failure slot; a failure of a void backward on
 * a set surfaces at that set's next forward or loss. The default set runs on the model's context. */
typedef struct rs_acts rs_acts;

/* A set for batches up to B over every layer (B >= 1; the model must be built). Caller owns it. */
rs_acts *rs_acts_new(rs_model *m, int B, rs_err *err);
/* A set for layers [first, last) only (a pipeline stage's memory): both ends must be legal cuts
 * (rs_model_cut_ok). Caller owns it. */
rs_acts *rs_acts_new_range(rs_model *m, int first, int last, int B, rs_err *err);
void rs_acts_free(rs_acts *a); /* NULL is a no-op */
/* Batch capacity, and the layers it holds memory for. */
int rs_acts_batch(const rs_acts *a);
int rs_acts_first(const rs_acts *a);
int rs_acts_last(const rs_acts *a);
/* The training step whose dropout masks the set's last forward drew. A training-mode forward from
 * layer 0 takes the model's next step (rs_model_step) and records it here; a forward starting later
 * (a pipeline stage after the first) uses what is recorded, so a stage in another process sets it
 * (rs_acts_set_step) to the step the first stage drew for that micro-batch, and its masks then equal
 * a whole-model pass's. Eval mode ignores it. */
uint64_t rs_acts_step(const rs_acts *a);
void rs_acts_set_step(rs_acts *a, uint64_t step);
/* The factor rs_model_backward_range applies to the loss gradient (dout == NULL): 1 by default, 1/M
 * when M micro-batches make one step. rs_model_backward(_acts) take theirs as an argument. */
void rs_acts_set_loss_scale(rs_acts *a, float loss_scale);

/* As rs_model_forward / _loss / _backward, on the caller's set: *out points into the set. B may not
 * exceed what the set can grow to in memory; x must stay valid until backward. */
rs_status rs_model_forward_acts(rs_model *m, rs_acts *a, const void *x, int B, const float **out, rs_err *err);
rs_status rs_model_loss_acts(rs_model *m, rs_acts *a, const int32_t *y, int B, float *loss, rs_err *err);
void rs_model_backward_acts(rs_model *m, rs_acts *a, const void *x, const int32_t *y, int B, float loss_scale);

/* ---- Ranges: a pipeline stage runs layers [first, last) ----
 * A cut at `at` splits the model into layers [0, at) and [at, n). It is legal when exactly one value
 * crosses it: layers >= at read no node before at-1 (nor the model's input), so layer at-1's output is
 * the whole boundary. A cut inside res[ ... ] is never legal (the closing add reads the block's
 * input); the boundaries between top-level items always are. 0 and n are legal (the model's ends). */
bool rs_model_cut_ok(const rs_model *m, int at);
/* The legal cuts strictly inside the model (0 < at < n), increasing; writes at most max, returns how
 * many there are. */
int rs_model_cut_points(const rs_model *m, int *at, int max);
/* Parameters owned by layers [first, last): a tied slot counts with its owner, padding not at all. */
size_t rs_model_range_params(const rs_model *m, int first, int last);
/* Top-level items (a depth-0 block, or a layer outside blocks): what a stage split balances. Item i
 * runs layers [first, first+count) and owns params parameters (rs_model_range_params). Writes at most
 * max, returns how many there are. Whatever the FSDP wrap policy, these are the top-level items. */
typedef struct rs_top_item {
    int first, count;
    size_t params;
} rs_top_item;
int rs_model_top_items(const rs_model *m, rs_top_item *out, int max);

/* Forward of layers [first, last) on set a (which must hold them; both ends legal cuts). `in` is the
 * model's input when first == 0, else the output of layer first-1: floats (B, shape of layer first-1's
 * output), which the caller keeps until the range's backward. *out (B, shape of layer last-1's output)
 * points into the set. Unit hooks fire for every unit the range touches. */
rs_status rs_model_forward_range(rs_model *m, rs_acts *a, int first, int last, const void *in, int B,
                                 const float **out, rs_err *err);
/* Backward of layers [first, last) after their forward on the same set, with the same in and B.
 * dout (B, layer last-1's output shape) is the gradient of the range's output; NULL when last == n:
 * the loss on this set (rs_model_loss_acts, with its labels, scaled by rs_acts_set_loss_scale) gives
 * it. din (may be NULL; first > 0) receives the gradient of `in`. Parameter gradients accumulate as in
 * rs_model_backward; the grad hook and the unit hooks fire for the layers and units of the range.
 *
 * Tied parameters across stages. A tied slot (rs_param_slot.tied: GPT-2's head, `tie=0.wte`) has the
 * owner's offset in p[j].offset and adds its gradient into the owner's range [offset, offset+numel),
 * which rs_model_tensor / rs_model_find_tensor name ("0.wte"); rs_unit.uses gives the owning unit.
 * When owner and reader run in different stages (different processes, each with its own buffers),
 * each stage's range holds only its contribution, and the grad hook reports the owner's range only on
 * the stage that runs the owner (the reader's layer never reports a tied slot). The pipeline must add
 * the two contributions on both stages (an all-reduce between them) before the optimizer step, so
 * both copies of the weight update alike: find the slots with rs_model_layer(m, i)->p[j].tied for i in
 * the reader's range, and use the owner's offset and numel. */
void rs_model_backward_range(rs_model *m, rs_acts *a, int first, int last, const void *in, const float *dout,
                             float *din, int B);

/* nanoGPT's decay group: the weights of linear and conv layers, as {begin, end} ranges of the buffer
 * in offset order (biases, norms and embeddings are left out; a tied weight counts with its owner).
 * Writes at most max, returns how many there are. */
int rs_model_decay_ranges(const rs_model *m, size_t (*out)[2], int max);

const char *rs_model_name(const rs_model *m);
void rs_model_set_name(rs_model *m, const char *name);
const rs_shape *rs_model_input_shape(const rs_model *m);
/* Scores per row: the last dimension of the output (classes, or the vocabulary of a token model). */
int rs_model_classes(const rs_model *m);
/* Rows of scores per sample, each with its own label: 1 for a classifier, T for a token model
 * (one next-token prediction per position). */
int rs_model_rows(const rs_model *m);
/* A token model's input is T int32 token ids per sample (stored in the 4-byte elements of the input
 * buffer); set before layout. Its first layer is embed(V, C). */
void rs_model_set_tokens(rs_model *m, bool tokens);
bool rs_model_tokens(const rs_model *m);
/* The vocabulary of a token model (its embedding's), 0 for other models. */
int rs_model_vocab(const rs_model *m);
int rs_model_layer_count(const rs_model *m);
rs_layer *rs_model_layer(rs_model *m, int i);
int rs_model_block_count(const rs_model *m);
const rs_block *rs_model_block(const rs_model *m, int i);
/* Length of the parameter buffer in floats: the parameters plus alignment padding between tensors
 * (the padding stays zero). rs_model_param_count gives the parameters alone. */
size_t rs_model_numel(const rs_model *m);
size_t rs_model_param_count(const rs_model *m);
float *rs_model_params(rs_model *m);                /* (numel) on the model's device */
float *rs_model_grads(rs_model *m);
int rs_model_tensor_count(const rs_model *m);
const rs_param_info *rs_model_tensor(const rs_model *m, int i);
const rs_param_info *rs_model_find_tensor(const rs_model *m, const char *name);
rs_mem *rs_model_mem(rs_model *m);
const rs_kernels *rs_model_kernels(const rs_model *m);
/* The model's kernel context: forward, loss, backward and zero_grad run on it; the training loop runs
 * the optimizer and the thread tuner on it too. Its thread count starts at the device's default
 * (rs_kctx_init) and is the model's own: another model, a decoder or an optimizer elsewhere in the
 * process keeps its own. Not while a pass runs. Kernel failures of backward and zero_grad, which
 * return nothing, stay in it until the next forward or loss reports them (or rs_kctx_check). */
rs_kctx *rs_model_ctx(rs_model *m);
void rs_model_set_threads(rs_model *m, int threads);
int rs_model_threads(const rs_model *m);
rs_device rs_model_device(const rs_model *m);
/* Makes the model's GPU the calling thread's current one (the CUDA table runs there); RS_OK for other
 * devices. Every pass does it (rs_acts_sync_ctx), so models on different GPUs can share a thread. */
rs_status rs_model_use_device(const rs_model *m, rs_err *err);
/* "cpu", "cuda:0", ... into buf; returns buf. */
const char *rs_model_device_str(const rs_model *m, char *buf, size_t n);
/* Moves a built model to device dev (torch's model.to): its parameters are copied through host memory
 * into blocks of dev's table (counted in the model's tracker as before) and the old ones freed; the
 * gradients start again at zero; activation sets are made anew by the next pass (a set made with
 * rs_acts_new before the move must be freed first). Refused for a sharded model (ranks hold its parts)
 * and an imported fixed-batch model. On failure the model stays where it was.
 * A model on a device takes host buffers in the API above (inputs, labels) and gives host ones back
 * (rs_model_forward's output, the loss), staging them in its activation set; its parameter and
 * gradient buffers (rs_model_params, rs_model_grads) are device memory, read from the host only
 * through rs_model_params_map or rs_model_grads_sumsq. Ranges of layers (pipeline stages) run on the
 * CPU only. */
rs_status rs_model_to(rs_model *m, rs_device dev, rs_err *err);
/* Host floats of the parameters: the buffer itself on the CPU, else a copy (d2h). Give it back with
 * rs_model_params_unmap, write_back true when it was changed (copied h2d; the copy is then freed). */
float *rs_model_params_map(rs_model *m, rs_err *err);
rs_status rs_model_params_unmap(rs_model *m, float *host, bool write_back, rs_err *err);
/* The sum of the squares of the gradient buffer in double (clipping's norm, the loss scaler's check),
 * through a host copy on a device. */
rs_status rs_model_grads_sumsq(rs_model *m, double *sq, rs_err *err);
uint64_t rs_model_seed(const rs_model *m);
/* Forward passes done in training mode; it seeds the dropout masks, so checkpoints carry it. */
uint64_t rs_model_step(const rs_model *m);
/* The seed drives the dropout masks after build (init is done); a resumed run restores it. */
void rs_model_set_seed(rs_model *m, uint64_t seed);
void rs_model_set_step(rs_model *m, uint64_t step);
/* The layers as the spec language writes them, e.g. "seq conv(16,3,pad=1) relu ..." (malloc'd). */
char *rs_model_spec(const rs_model *m);
/* A printable table: layers, output shapes, parameter counts and bytes. Caller frees. */
char *rs_model_summary(const rs_model *m);
/* ---- Sharded training (ZeRO, dist/train/zero.c) ----
 * Units: what FSDP wraps. Every top-level item is one unit: a depth-0 block, or a layer outside any
 * block. Unit i runs layers [first, first+count) and owns the offset range [offset, offset+numel) of
 * the buffers; the ranges of the units follow each other and cover [0, rs_model_numel) (a unit
 * without parameters has numel 0; alignment padding belongs to the unit before it). */
typedef struct rs_unit {
    int index;
    int first, count; /* layers */
    size_t offset, numel;
    int uses;         /* another unit whose parameters this one reads through a tied slot (GPT-2's
                         head reads the token embedding), -1 = none: ZeRO-3 gathers it too */
} rs_unit;
/* Which layers make a unit (FSDP's wrapping policy): TOP, the default, each top-level item; LAYER,
 * every layer on its own (blocks ignored); MODEL, the whole model as one unit (nothing is gained
 * over ZeRO-2 but the lesson: peak memory is the whole model). Not while the units are in use. */
typedef enum rs_wrap { RS_WRAP_TOP = 0, RS_WRAP_LAYER, RS_WRAP_MODEL } rs_wrap;
rs_status rs_model_set_wrap(rs_model *m, rs_wrap w, rs_err *err);
int rs_model_unit_count(const rs_model *m);
const rs_unit *rs_model_unit(const rs_model *m, int i);

/* ZeRO-2: the full gradient buffer is only needed from backward until the gradients have been
 * reduce-scattered. release frees it (GRADS pool); while released rs_model_grads is NULL,
 * rs_model_zero_grad does nothing (there is nothing to zero) and rs_model_backward must not run.
 * acquire allocates it again zero-filled, which is what zero_grad would have left, so a loop that
 * calls zero_grad before forward and the strategy's acquire before backward trains as usual.
 * Both are no-ops when there is nothing to do. */
void rs_model_release_grads(rs_model *m);
rs_status rs_model_acquire_grads(rs_model *m, rs_err *err);
bool rs_model_grads_released(const rs_model *m);

/* Called around each unit's forward and backward (ZeRO-3 gathers a unit's parameters before and
 * gives them back after). A hook that fails stops the pass: forward returns its status; backward,
 * which has none, just stops, so the hook must keep its error for its owner to report. Any entry
 * may be NULL; h is copied; NULL removes the hooks. */
typedef struct rs_unit_hooks {
    rs_status (*before_forward)(void *ud, const rs_unit *u, rs_err *err);
    rs_status (*after_forward)(void *ud, const rs_unit *u, rs_err *err);
    rs_status (*before_backward)(void *ud, const rs_unit *u, rs_err *err);
    rs_status (*after_backward)(void *ud, const rs_unit *u, rs_err *err);
    void *ud;
} rs_unit_hooks;
void rs_model_set_unit_hooks(rs_model *m, const rs_unit_hooks *h);

/* ZeRO-3: the parameter and gradient buffers become reservations of address space
 * (mmap MAP_NORESERVE): same addresses, same layout, but no memory is committed or counted until a
 * unit's range is acquired. Their contents are dropped (the caller keeps its shards first).
 * rs_model_unit_acquire(m, RS_POOL_PARAMS or RS_POOL_GRADS, i) counts unit i's range in that pool
 * (gradients are zero-filled; parameters are the caller's to fill); release gives the whole pages
 * inside the range back to the system (madvise MADV_DONTNEED; the at most two pages a range shares
 * with its neighbours stay) and uncounts the range. Acquiring a resident range or releasing a
 * released one does nothing. While sharded, rs_model_zero_grad does nothing (acquired gradients
 * start at zero). rs_model_unshard_buffers makes ordinary allocations again, keeping what the
 * parameter ranges hold (released ranges read as zero), gradients zeroed. */
rs_status rs_model_shard_buffers(rs_model *m, rs_err *err);
rs_status rs_model_unshard_buffers(rs_model *m, rs_err *err);
bool rs_model_buffers_sharded(const rs_model *m);
void rs_model_unit_acquire(rs_model *m, rs_pool which, int unit);
void rs_model_unit_release(rs_model *m, rs_pool which, int unit);
bool rs_model_unit_resident(const rs_model *m, rs_pool which, int unit);

void rs_model_free(rs_model *m);

#endif
