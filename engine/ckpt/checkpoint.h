/* Checkpoints of models and training runs in the safetensors format.
 * The weights file holds one F32 tensor per parameter, named as in the model ("3.weight"), with
 * PyTorch's layouts, so `safetensors.torch.load_file` loads it into the equivalent nn.Sequential.
 * A training checkpoint adds a second file, NAME.optim.safetensors, with the optimizer state per
 * parameter ("3.weight.exp_avg") and the position in the run (step, epoch, batch) as metadata, which
 * is what an exact resume needs. State is kept per tensor, not as one flat blob, so a later world
 * size can re-shard it. */
#ifndef RS_CHECKPOINT_H
#define RS_CHECKPOINT_H

#include "engine/nn/model.h"
#include "engine/optim/optim.h"

/* Where a run stood when its checkpoint was written. */
typedef struct rs_ckpt_pos {
    int64_t step;           /* optimizer steps done */
    int epoch;              /* epoch in progress (0-based) */
    int64_t batch_in_epoch; /* batches of that epoch done */
    uint64_t data_seed;     /* the run's data-order seed */
    uint64_t model_seed;    /* the model's seed: with model_step it fixes the dropout masks */
    uint64_t model_step;    /* the model's forward counter (dropout masks) */
    int64_t batch;          /* batch size: batch_in_epoch counts batches of this size */
} rs_ckpt_pos;

/* Weights only (plus metadata: format, the model spec, parameter count). */
rs_status rs_ckpt_save_model(const char *path, rs_model *m, rs_err *err);
/* Loads weights into m, checking every tensor's name and shape; a mismatch names the tensor, the
 * shape in the file and the shape the model expects. m is unchanged when it fails. */
rs_status rs_ckpt_load_model(const char *path, rs_model *m, rs_err *err);

/* The optimizer file's path for a weights path: "a/b.safetensors" -> "a/b.optim.safetensors".
 * Caller frees. */
char *rs_ckpt_optim_path(const char *path);

rs_status rs_ckpt_save_train(const char *path, rs_model *m, rs_optim *o, const rs_ckpt_pos *pos, rs_err *err);
/* Reads only the position of a training checkpoint (nothing is loaded), so a caller can check that a
 * resume makes sense before the model is touched. */
rs_status rs_ckpt_read_pos(const char *path, rs_ckpt_pos *pos, rs_err *err);
/* Loads weights, optimizer state (o must be of the kind saved and cover the whole model) and the
 * position. */
rs_status rs_ckpt_load_train(const char *path, rs_model *m, rs_optim *o, rs_ckpt_pos *pos, rs_err *err);

/* The model spec stored in a checkpoint's metadata (malloc'd) or NULL, to rebuild its model. */
char *rs_ckpt_read_spec(const char *path, rs_err *err);

#endif
