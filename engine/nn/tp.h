/* Tensor parallelism (Megatron-LM): the shard of a model that one rank of a tensor-parallel group of
 * `tp` ranks holds, and the maps between the whole model's flat buffer and each shard's.
 *
 * A plan finds the model's pairs: a linear, then elementwise layers (relu, gelu, tanh, dropout) or an
 * attention core, then a linear, each reading only the one before. In a pair the first linear is
 * split by columns (each rank computes out/tp of the outputs; before attention, the q, k and v
 * outputs of heads/tp heads), the layers between run on that part (attn on heads/tp heads) and the
 * second linear is split by rows (each rank reads its in/tp inputs and makes a partial sum; the bias
 * is rank 0's alone so it is added once). A tp_copy (f) goes before the pair and a tp_reduce (g)
 * after: one all-reduce in forward and one in backward per pair. Every other layer is replicated
 * (layer norms, embeddings, the head). The MLP's hidden layers and the GPT's attention and MLP halves
 * are such pairs.
 *
 * Rank r's shard is cut from the whole model's weights (rs_tp_cut), so a run initialised from one
 * seed is the run one process would make; rs_tp_place writes a shard back into a whole-model buffer
 * (checkpoints stay whole-model safetensors). Buffers of the same layout as the parameters (gradients,
 * optimizer moments) map the same way. */
#ifndef RS_TP_H
#define RS_TP_H

#include "model.h"

typedef enum rs_tp_role {
    RS_TP_REPLICATED = 0, /* every rank holds the whole layer */
    RS_TP_COLUMN,         /* linear: this rank's rows of W (O, I) and of b, out/tp output features */
    RS_TP_QKV,            /* linear(3C) before attn: the q, k and v rows of this rank's heads */
    RS_TP_INNER,          /* between the linears of a pair: runs on this rank's part (attn: heads/tp) */
    RS_TP_ROW,            /* linear: this rank's columns of W, in/tp input features; b on rank 0 */
} rs_tp_role;

typedef struct rs_tp_plan rs_tp_plan;

/* The plan for splitting `whole` (laid out; borrowed: it must outlive the plan) over tp ranks. An
 * error names the layer that cannot be split (outputs or heads that tp does not divide) or says that
 * the model has no pair to split. Caller owns *out. */
rs_status rs_tp_plan_new(const rs_model *whole, int tp, rs_tp_plan **out, rs_err *err);
void rs_tp_plan_free(rs_tp_plan *p);
int rs_tp_plan_ways(const rs_tp_plan *p);
/* Column/row pairs found (all-reduces per forward). */
int rs_tp_plan_pairs(const rs_tp_plan *p);
rs_tp_role rs_tp_plan_role(const rs_tp_plan *p, int whole_layer);
/* Parameters every rank holds whole, and parameters split over the ranks (rank r holds split/tp of
 * them, plus on rank 0 the biases of the row-parallel linears, counted in `row_bias`). */
void rs_tp_plan_counts(const rs_tp_plan *p, size_t *replicated, size_t *split, size_t *row_bias);

/* Floats in rank's shard buffer (rs_model_numel of its shard). */
size_t rs_tp_shard_numel(const rs_tp_plan *p, int rank);
/* Builds rank's shard (allocated on mem, NULL: its own tracker), its weights cut from the whole
 * model's parameters, its seed and step the whole model's (dropout on replicated activations draws
 * the masks one process draws; inside a pair each rank draws its own). Caller owns *out. */
rs_status rs_tp_shard_new(const rs_tp_plan *p, int rank, rs_mem *mem, rs_model **out, rs_err *err);
/* Buffers in the parameters' layout: whole (rs_model_numel of the whole model) to rank's shard, and
 * back. place writes only what rank holds: replicated tensors only from rank 0, so placing every
 * rank's shard rebuilds the whole buffer. */
void rs_tp_cut(const rs_tp_plan *p, int rank, const float *whole, float *shard);
void rs_tp_place(const rs_tp_plan *p, int rank, const float *shard, float *whole);
/* Rank's share of the sum of squares of the whole buffer: its split tensors, and the replicated ones
 * on rank 0 only, so the sum over the ranks is the whole buffer's (clip=). */
double rs_tp_sumsq(const rs_tp_plan *p, int rank, const float *shard);

#endif
