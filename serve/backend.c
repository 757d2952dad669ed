/* backend.h's calls, dispatched through the backend's table of functions (backend_ops.h): the one
 * probe list of the backends a version folder can hold, and what every backend shares (a config's
 * checks that do not depend on the kind, the tensor completion of the tensor backends). */
#include "backend_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/generate.h"

const rs_srv_backend_ops *const rs_srv_backends[] = {&rs_srv_backend_engine, &rs_srv_backend_plan,
                                                      &rs_srv_backend_gpt, NULL};

struct rs_serve_inst {
    rs_serve_backend *b; /* borrowed */
    void *impl;          /* owned: ops->free_instance */
};

const rs_srv_backend_ops *rs_srv_backend_for_path(const char *path)
{
    size_t pn = strlen(path);
    for (const rs_srv_backend_ops *const *o = rs_srv_backends; *o; o++) {
        const char *ext = strrchr((*o)->file, '.');
        size_t en = strlen(ext);
        if (pn > en && !strcmp(path + pn - en, ext)) return *o;
    }
    return rs_srv_backends[0];
}

rs_status rs_serve_backend_load(const char *path, rs_serve_backend **out, rs_err *err)
{
    *out = NULL;
    rs_serve_backend *b = calloc(1, sizeof *b); /* the caller's */
    if (!b || !(b->path = strdup(path))) {
        free(b);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    b->ops = rs_srv_backend_for_path(path);
    rs_status st = b->ops->load(path, &b->impl, err);
    if (st) {
        free(b->path);
        free(b);
        return st;
    }
    *out = b;
    return RS_OK;
}

void rs_serve_backend_free(rs_serve_backend *b)
{
    if (!b) return;
    b->ops->free(b->impl);
    free(b->path);
    free(b);
}

void rs_serve_backend_io(const rs_serve_backend *b, rs_serve_io *in, rs_serve_io *out) { b->ops->io(b->impl, in, out); }

const char *rs_serve_backend_kind(const rs_serve_backend *b) { return b->ops->name; }
bool rs_serve_backend_generates(const rs_serve_backend *b) { return b->ops->generate != NULL; }
int rs_serve_backend_max_batch(const rs_serve_backend *b) { return b->ops->max_batch ? b->ops->max_batch(b->impl) : 0; }
struct rs_model *rs_serve_backend_model(rs_serve_backend *b) { return b->ops->model ? b->ops->model(b->impl) : NULL; }

static bool says(const rs_serve_config *c, const char *platform)
{
    return !strcmp(c->platform, platform) || !strcmp(c->backend, platform);
}

/* What the config names against what the folder holds, before the backend checks the rest. Triton's
 * "tensorrt_plan" names a TensorRT engine, which this server cannot run, so it is refused by name
 * rather than taken as meaning a ringside plan. */
static rs_status check_names(const rs_serve_backend *b, const rs_serve_config *c, const char *where, rs_err *err)
{
    if (!strcmp(c->platform, "tensorrt_plan") || !strcmp(c->backend, "tensorrt"))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: the config says %s \"%s\" (a TensorRT engine, which ringside "
                          "does not run); a model.plan written by `compile` is platform: \"ringside_plan\"", where,
                          c->platform[0] ? "platform" : "backend", c->platform[0] ? c->platform : c->backend);
    for (const rs_srv_backend_ops *const *o = rs_srv_backends; *o; o++)
        if (*o != b->ops && (*o)->platform && says(c, (*o)->platform))
            return rs_err_set(err, RS_ERR_ARG, "%s: the config says %s, but the version folder holds no %s (%s is "
                              "served from VERSION/%s)", where, (*o)->platform, (*o)->file, (*o)->what, (*o)->file);
    return RS_OK;
}

rs_status rs_serve_backend_complete(const rs_serve_backend *b, rs_serve_config *c, const char *where, rs_err *err)
{
    rs_status st = check_names(b, c, where, err);
    if (!st) st = b->ops->complete(b->impl, c, where, err);
    if (st) return st;
    if (!c->instance_kind[0]) snprintf(c->instance_kind, sizeof c->instance_kind, "KIND_CPU");
    if (c->instance_count <= 0) c->instance_count = 1;
    if (c->decoupled && !b->ops->generate)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: model '%s' is decoupled (model_transaction_policy), but "
                          "only a GPT (model.safetensors) answers with a stream of responses", where, c->name);
    return RS_OK;
}

static bool io_same(const rs_serve_io *a, const rs_serve_io *b)
{
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d] && a->dims[d] != -1) return false;
    return true;
}

rs_status rs_srv_complete_tensors(rs_serve_config *c, const rs_serve_io *in, const rs_serve_io *out, const char *where,
                                  rs_err *err)
{
    if (c->ninputs == 0) c->inputs[c->ninputs++] = *in;
    if (c->noutputs == 0) c->outputs[c->noutputs++] = *out;
    if (c->ninputs != 1 || c->noutputs != 1)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: the config states %d inputs and %d outputs; the model has one "
                          "of each", where, c->ninputs, c->noutputs);
    const rs_serve_io *pairs[2][2] = {{&c->inputs[0], in}, {&c->outputs[0], out}};
    for (int k = 0; k < 2; k++) {
        const rs_serve_io *cf = pairs[k][0], *md = pairs[k][1];
        if (strcmp(cf->name, md->name))
            return rs_err_set(err, RS_ERR_ARG, "%s: %s '%s' is called '%s' in the model file", where,
                              k ? "output" : "input", cf->name, md->name);
        if (cf->dtype != RS_SERVE_FP32)
            return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: %s '%s' is %s; ringside serves TYPE_FP32 tensors", where,
                              k ? "output" : "input", cf->name, rs_serve_dtype_config_name(cf->dtype));
        /* With or without batching: a request's buffers are sized from the config's dims and the model
         * reads and writes its own, so they must be the same (Triton's "no batching" dims would hold
         * the batch too; ringside keeps the per-sample dims and a batch per request). */
        if (!io_same(cf, md))
            return rs_err_set(err, RS_ERR_SHAPE, "%s: %s '%s' dims differ from the model file's", where,
                              k ? "output" : "input", cf->name);
        /* -1 (any) in the config: the model file's size */
        rs_serve_io *fill = k ? &c->outputs[0] : &c->inputs[0];
        for (int d = 0; d < md->rank; d++) {
            if (md->dims[d] < 1)
                return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: %s '%s' has a dimension of any size; ringside "
                                  "serves fixed per-sample shapes", where, k ? "output" : "input", cf->name);
            fill->dims[d] = md->dims[d];
        }
    }
    return RS_OK;
}

rs_status rs_serve_backend_use_ranks(rs_serve_backend *b, int ranks, const char *mode, int max_batch, int worker_index,
                                     rs_err *err)
{
    rs_serve_ranks_cfg c = {.model = b->path, .ranks = ranks, .mode = mode, .max_batch = max_batch,
                            .worker_index = worker_index};
    if (!b->ops->ranks_cfg)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: %s runs in one process (ranks=1)", b->path, b->ops->what);
    rs_status st = b->ops->ranks_cfg(b->impl, b->path, max_batch, &c, err);
    if (st) return st;
    if (c.max_batch < 1) c.max_batch = 1;
    return rs_srv_ranks_wrap(b, &c, err);
}

void rs_serve_backend_ranks_text(rs_serve_backend *b, char *buf, size_t cap)
{
    if (b->ops->describe) b->ops->describe(b->impl, buf, cap);
    else if (cap) buf[0] = 0;
}

rs_status rs_serve_inst_new(rs_serve_backend *b, int max_batch, rs_serve_inst **out, rs_err *err)
{
    *out = NULL;
    rs_serve_inst *in = calloc(1, sizeof *in); /* the caller's */
    if (!in) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    in->b = b;
    rs_status st = b->ops->new_instance(b->impl, max_batch > 0 ? max_batch : 1, &in->impl, err);
    if (st) {
        rs_serve_inst_free(in);
        return st;
    }
    *out = in;
    return RS_OK;
}

void rs_serve_inst_free(rs_serve_inst *in)
{
    if (!in) return;
    if (in->impl && in->b->ops->free_instance) in->b->ops->free_instance(in->impl);
    free(in);
}

rs_status rs_serve_inst_run(rs_serve_inst *in, const float *x, int B, float *y, rs_err *err)
{
    const rs_serve_backend *b = in->b;
    if (!b->ops->run) return rs_err_set(err, RS_ERR_UNSUPPORTED, "this model generates text; it runs no tensors");
    return b->ops->run(b->impl, in->impl, x, B, y, err);
}

void rs_serve_gen_init(rs_serve_gen *g)
{
    rs_gen_cfg d = rs_gen_defaults();
    memset(g, 0, sizeof *g);
    g->max_tokens = d.n;
    g->temperature = d.temp;
    g->top_k = d.top_k;
    g->seed = d.seed;
}

rs_status rs_serve_inst_generate(rs_serve_inst *in, rs_serve_gen *g, rs_err *err)
{
    const rs_serve_backend *b = in->b;
    if (!b->ops->generate) return rs_err_set(err, RS_ERR_UNSUPPORTED, "this model does not generate text");
    if (g->max_tokens < 0 || g->max_tokens > 100000 || !(g->temperature >= 0.0f) || g->top_k < 0)
        return rs_err_set(err, RS_ERR_ARG, "max_tokens must be 0..100000, temperature >= 0 and top_k >= 0");
    return b->ops->generate(b->impl, in->impl, g, err);
}
