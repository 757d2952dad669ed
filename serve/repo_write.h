/* Writing a model into a repository in Triton's layout (what `serve` does for a session model or a
 * lone ONNX file): NAME/config.pbtxt and NAME/1/model.onnx, plus NAME/1/model.safetensors for a
 * session model, so Triton itself could serve the folder too. */
#ifndef RS_SERVE_REPO_WRITE_H
#define RS_SERVE_REPO_WRITE_H

#include "config.h"
#include "engine/nn/model.h"
#include "plan/plan.h"

/* Exactly one of m (exported with the ONNX exporter; read, not changed) and onnx (copied) is given.
 * base supplies the scheduling settings (max_batch_size, instances, dynamic batching); its name and
 * tensors are replaced by name and the model file's. The repository folder is created if missing;
 * an existing NAME/ is replaced. */
rs_status rs_serve_repo_write(const char *repo, const char *name, rs_model *m, const char *onnx,
                              const rs_serve_config *base, rs_err *err);

/* A token model (a GPT) into REPO/NAME, to be served decoupled: 1/model.safetensors (the spec rides in
 * its metadata), 1/vocab.json (chars[id]: the byte of token id, nchars of them) and a config.pbtxt
 * with text_input -> text_output (TYPE_STRING, [ 1 ]) and model_transaction_policy { decoupled: true }.
 * base gives instance_group's count; batching settings do not apply (a generation runs alone). */
rs_status rs_serve_repo_write_gpt(const char *repo, const char *name, rs_model *m, const uint8_t *chars, int nchars,
                                  const rs_serve_config *base, rs_err *err);

/* A compiled plan into REPO/NAME: 1/model.plan (plan saved, or the file copied; exactly one given) and
 * a config.pbtxt with platform "ringside_plan" and the plan's tensors. base gives the scheduling
 * settings; a max_batch_size above the plan's compiled batch is refused naming both. */
rs_status rs_serve_repo_write_plan(const char *repo, const char *name, const rs_plan *plan, const char *file,
                                   const rs_serve_config *base, rs_err *err);

#endif
