/* serve/'s side of a compiled plan (plan/plan.h): a model.plan in a repository version folder, run by
 * backend.c for the "plan" kind. A plan runs one batch at a time (its arena holds the activations),
 * so every instance holds a plan of its own: the first takes the plan loaded to check and describe
 * the file, each further one is loaded from the same bytes. Memory: the file's bytes once (kept for
 * the further instances) plus per instance the plan's weights and its arena. */
#ifndef RS_SERVE_BACKEND_PLAN_H
#define RS_SERVE_BACKEND_PLAN_H

#include "config.h"
#include "plan/plan.h"

typedef struct rs_serve_plan rs_serve_plan;

/* Loads path with rs_plan_load: a file for another ISA or oneDNN version, or a corrupted one, is
 * refused with the loader's message; a token plan (a GPT) too, since serve/ takes FP32 tensors.
 * Caller owns *out. */
rs_status rs_serve_plan_open(const char *path, rs_serve_plan **out, rs_err *err);
void rs_serve_plan_close(rs_serve_plan *sp); /* after every instance's plan is freed; NULL is a no-op */

/* Per sample, named as the ONNX exporter names them ("input", "logits"): the input shape the plan was
 * compiled for and its (rows x) classes outputs. */
void rs_serve_plan_io(const rs_serve_plan *sp, rs_serve_io *in, rs_serve_io *out, size_t *out_numel);
int rs_serve_plan_batch(const rs_serve_plan *sp);           /* the batch it was compiled for */

/* A plan for one instance (caller frees it with rs_plan_free). Not called from two threads at once. */
rs_status rs_serve_plan_instance(rs_serve_plan *sp, rs_plan **out, rs_err *err);

#endif
