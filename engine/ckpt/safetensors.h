/* Hugging Face's safetensors format, so checkpoints open in PyTorch and NumPy as they are.
 * A file is an 8-byte little-endian header length N, N bytes of JSON (name -> dtype, shape,
 * data_offsets, plus an optional "__metadata__" of strings), then the tensors' bytes, tightly packed.
 * The reader checks everything the reference implementation checks and says what would work. */
#ifndef RS_CKPT_SAFETENSORS_H
#define RS_CKPT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"
#include "engine/core/tensor.h"

/* Same limit as the reference reader: a larger header is refused there, so we refuse it too. */
#define RS_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* One tensor to write. data holds numel(shape) * rs_dtype_size(dtype) contiguous row-major bytes in
 * host order (little-endian hosts only); it is borrowed for the duration of the call. */
typedef struct rs_st_tensor {
    const char *name; /* unique in the file, valid UTF-8, not "__metadata__"; dots are fine */
    rs_dtype dtype;
    rs_shape shape; /* ndim 0 is a scalar (one element); a 0 in a dim makes an empty tensor */
    const void *data;
} rs_st_tensor;

/* Writes n tensors, in the order given, to path. meta is n_meta (key, value) pairs, i.e. 2*n_meta
 * strings, stored in "__metadata__" (may be NULL when n_meta is 0); keys must be unique.
 * The file is written to path + ".tmp", fsynced and renamed over path, so a crash leaves either the
 * old file or the new one, never half of one. The header is space-padded to a multiple of 8 bytes.
 * Tensors are packed with no gaps (the format forbids them), so a tensor is aligned to its dtype
 * only if the ones before it keep it so; put the widest dtypes first where that matters. */
rs_status rs_st_write(const char *path, const rs_st_tensor *t, int n, const char *const *meta,
                      int n_meta, rs_err *err);

/* A tensor of an opened file. Valid until rs_st_close. */
typedef struct rs_st_info {
    const char *name;
    rs_dtype dtype;
    rs_shape shape;
    size_t offset; /* from the start of the data region (data_offsets[0]) */
    size_t nbytes; /* data_offsets[1] - data_offsets[0] == numel * dtype size */
} rs_st_info;

typedef struct rs_st_file rs_st_file;

/* Reads and validates the whole file; the caller owns *out (rs_st_close). Fails with RS_ERR_IO when
 * the file cannot be read, RS_ERR_FORMAT when its bytes break the format, RS_ERR_UNSUPPORTED for a
 * valid dtype this build does not carry or more than RS_MAX_DIMS dims. */
rs_status rs_st_open(const char *path, rs_st_file **out, rs_err *err);

/* Same over memory: buf is copied, so the caller may free it as soon as this returns.
 * name_for_messages starts every error message (a path, or "<memory>" when NULL). */
rs_status rs_st_parse(const uint8_t *buf, size_t len, const char *name_for_messages,
                      rs_st_file **out, rs_err *err);

void rs_st_close(rs_st_file *f); /* NULL is a no-op */

/* Tensors in the order of their data in the file (ties between empty tensors: header order). */
int rs_st_count(const rs_st_file *f);
const rs_st_info *rs_st_at(const rs_st_file *f, int i); /* NULL when i is out of range */
const rs_st_info *rs_st_find(const rs_st_file *f, const char *name); /* NULL if absent */

/* The tensor's bytes inside the file's buffer (valid until rs_st_close). The buffer starts 16-byte
 * aligned and the data region 8-byte aligned, but a tensor is aligned to its dtype only when
 * info->offset is a multiple of its size: other writers may pack an I8 before an F32. When in
 * doubt, memcpy out, or use rs_st_copy. */
const void *rs_st_data(const rs_st_file *f, const rs_st_info *info);

/* Copies tensor `name` into dst after checking that it exists with this dtype and shape; the message
 * names what the file has instead. For loading a checkpoint into a model's existing buffers. */
rs_status rs_st_copy(const rs_st_file *f, const char *name, rs_dtype dtype, const rs_shape *shape,
                     void *dst, rs_err *err);

/* "__metadata__" entries. rs_st_meta returns the value of key, or NULL if absent. */
const char *rs_st_meta(const rs_st_file *f, const char *key);
int rs_st_meta_count(const rs_st_file *f);
/* Key of entry i (NULL when out of range); its value goes to *value when value is not NULL. */
const char *rs_st_meta_at(const rs_st_file *f, int i, const char **value);

/* The name errors of this file start with (the path it was opened from). */
const char *rs_st_name(const rs_st_file *f);

#endif
