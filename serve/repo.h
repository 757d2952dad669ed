/* The model repository, in Triton's layout:
 *     REPO/NAME/config.pbtxt          (optional: without it the model file states the tensors)
 *     REPO/NAME/VERSION/model.onnx    VERSION a positive integer; model.safetensors may sit beside it
 *     REPO/NAME/VERSION/model.plan    a plan `compile` wrote (platform "ringside_plan"), when no model.onnx
 * Names are checked before any path is built, so no request can reach outside the repository. */
#ifndef RS_SERVE_REPO_H
#define RS_SERVE_REPO_H

#include "config.h"

/* A model name that is safe as one path component: 1..127 of [A-Za-z0-9_.-], not starting with '.'. */
bool rs_serve_name_ok(const char *name);

/* The model folders of repo (names that pass rs_serve_name_ok), sorted. Caller frees the array and
 * each string. */
rs_status rs_serve_repo_list(const char *repo, char ***names, int *n, rs_err *err);

/* Whether REPO/NAME is a folder (name checked first: false for one that is not a model name). */
bool rs_serve_repo_has(const char *repo, const char *name);

/* The newest modification time (ns) of REPO/NAME, its files and its version folders' files: a model
 * changed on disk has a newer stamp (the poll mode's look). 0 when there is no such folder. */
int64_t rs_serve_repo_stamp(const char *repo, const char *name);

/* Removes a temporary repository folder `serve` made (a /tmp/ringside-serve-* path; anything else
 * is left alone) with everything in it, links not followed. */
void rs_serve_repo_remove_temp(const char *dir);

/* Reads NAME's config (or a default one named NAME) and picks the versions its version_policy
 * serves from the numeric folders holding a model.onnx (or a model.plan, or a GPT's model.safetensors): writes at most max, ascending. */
rs_status rs_serve_repo_model(const char *repo, const char *name, rs_serve_config *c, int64_t *versions, int *nversions,
                              int max, rs_err *err);
/* REPO/NAME/VERSION/model.onnx into buf; else its model.plan; else model.safetensors (a GPT's). */
void rs_serve_repo_model_path(const char *repo, const char *name, int64_t version, char *buf, size_t n);

#endif
