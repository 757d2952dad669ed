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
} rs_block;

/* Called after a layer's backward with the gradient range it has finished (DDP buckets listen). */
typedef void (*rs_grad_ready_fn)(void *ud, size_t offset, size_t numel);

typedef struct rs_model rs_model;

/* An empty model taking per-sample input `in`. mem may be NULL: the model then keeps its own
 * tracker (rs_model_mem). Caller owns the result. */
rs_model *rs_model_new(const char *name, const rs_shape *in, rs_device dev, rs_mem *mem);
rs_status rs_model_add(rs_model *m, const rs_layer_cfg *cfg, rs_err *err);
rs_status rs_model_begin_block(rs_model *m, rs_err *err);
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
/* Allocates activation memory for batches up to B (forward does it too when B grows). */
rs_status rs_model_reserve(rs_model *m, int B, rs_err *err);

void rs_model_set_training(rs_model *m, bool training);
bool rs_model_training(const rs_model *m);
/* x (B, in) must stay valid until backward. *logits points into the model (valid until the next
 * forward). */
rs_status rs_model_forward(rs_model *m, const float *x, int B, const float **logits, rs_err *err);
/* Mean softmax cross-entropy of the last forward against labels y (B); keeps probabilities for
 * backward. Labels outside [0, classes) are an error. */
rs_status rs_model_loss(rs_model *m, const int32_t *y, int B, float *loss, rs_err *err);
/* Accumulates d(loss)/d(params) into the gradient buffer (call zero_grad first unless accumulating).
 * loss_scale multiplies the loss gradient: 1 for one batch, 1/K when accumulating K micro-batches. */
void rs_model_backward(rs_model *m, const float *x, const int32_t *y, int B, float loss_scale);
void rs_model_zero_grad(rs_model *m);
void rs_model_set_grad_hook(rs_model *m, rs_grad_ready_fn fn, void *ud);

const char *rs_model_name(const rs_model *m);
void rs_model_set_name(rs_model *m, const char *name);
const rs_shape *rs_model_input_shape(const rs_model *m);
int rs_model_classes(const rs_model *m);
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
rs_device rs_model_device(const rs_model *m);
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
void rs_model_free(rs_model *m);

#endif
