/* Full shapes of the generic tensor ops (engine/nn/tensor_op.h): up to RS_DIMS_MAX dims, batch
 * included. Until a run fixes the batch size, the dimension that holds it reads RS_DIM_BATCH; it may
 * sit in any position (a Transpose moves it), so a value is always B * (numel without the batch)
 * floats. rs_shape (tensor.h) is the per-sample shape layers see; this is what an op needs to index. */
#ifndef RS_DIMS_H
#define RS_DIMS_H

#include <stddef.h>
#include <stdint.h>

#define RS_DIMS_MAX 8
/* The symbolic batch dimension (and, in folded shape lists, the batch size). Any other negative
 * number is refused where a file could supply one, so it cannot be forged. */
#define RS_DIM_BATCH ((int64_t)-7)
/* Values stay below this many elements, so every count fits the int the BLAS and conv kernels take. */
#define RS_DIMS_MAX_ELEMS ((int64_t)1 << 31)

typedef struct rs_dims {
    int rank;
    int64_t d[RS_DIMS_MAX];
} rs_dims;

/* Elements with the batch set to `batch`; -1 when a dim is negative or the count reaches
 * RS_DIMS_MAX_ELEMS. */
int64_t rs_dims_numel(const rs_dims *s, int64_t batch);
/* The position of the batch dimension, -1 when there is none. */
int rs_dims_batch_pos(const rs_dims *s);
/* s with the batch set to `batch`. */
rs_dims rs_dims_with_batch(const rs_dims *s, int64_t batch);
/* "(N, 3, 28, 28)" */
char *rs_dims_str(const rs_dims *s, char *buf, size_t n);

#endif
