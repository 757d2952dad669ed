/* The one place serve/ runs a model: load a model file, describe its tensors, and run batches on an
 * instance. Everything model-specific stays behind these calls, so a change of executor (imported
 * ONNX graphs moving onto the engine's) touches this file alone. */
#ifndef RS_SERVE_BACKEND_H
#define RS_SERVE_BACKEND_H

#include "config.h"

typedef struct rs_serve_backend rs_serve_backend; /* a loaded model, shared by its instances */
typedef struct rs_serve_inst rs_serve_inst;       /* one instance: what a pass writes (its own rs_acts) */

/* Loads path (an .onnx file). Caller owns *out. */
rs_status rs_serve_backend_load(const char *path, rs_serve_backend **out, rs_err *err);
void rs_serve_backend_free(rs_serve_backend *b); /* after every instance; NULL is a no-op */
/* The model's input and output as a config states them (per sample: no batch dim). */
void rs_serve_backend_io(const rs_serve_backend *b, rs_serve_io *in, rs_serve_io *out);
/* "engine": every model runs on the engine's executor with an activation set per instance. */
const char *rs_serve_backend_kind(const rs_serve_backend *b);

/* An instance for batches up to max_batch. Instances of one backend run at the same time. */
rs_status rs_serve_inst_new(rs_serve_backend *b, int max_batch, rs_serve_inst **out, rs_err *err);
void rs_serve_inst_free(rs_serve_inst *in);
/* y (B, output numel) = model(x (B, input numel)). */
rs_status rs_serve_inst_run(rs_serve_inst *in, const float *x, int B, float *y, rs_err *err);

#endif
