/* The plan backend: a model.plan compiled by `compile` (plan/plan.h) in a repository version folder.
 * A plan runs one batch at a time (its arena holds the activations), so every instance holds a plan
 * of its own: the first takes the plan loaded to check and describe the file, each further one is
 * loaded from the same bytes. Memory: the file's bytes once (kept for the further instances) plus
 * per instance the plan's weights and its arena. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "plan/plan.h"

typedef struct splan {
    char *path;       /* owned */
    rs_plan *first;   /* owned until the first instance takes it (NULL after) */
    uint8_t *bytes;   /* owned: the serialized plan, what further instances load */
    size_t nbytes;
    rs_serve_ios io;     /* what the plan takes and gives, read once at load */
    size_t out_numel;
    int batch;        /* the batch it was compiled for */
} splan;

/* Per sample, named as the ONNX exporter names them ("input", "logits"): the input shape the plan was
 * compiled for and its (rows x) classes outputs. */
static void describe(splan *sp)
{
    sp->io.nin = sp->io.nout = 1;
    rs_serve_io *in = &sp->io.in[0], *out = &sp->io.out[0];
    snprintf(in->name, sizeof in->name, "input");
    snprintf(out->name, sizeof out->name, "logits");
    in->dtype = out->dtype = RS_SERVE_FP32;
    const rs_shape *s = rs_plan_input_shape(sp->first);
    for (int d = 0; d < s->ndim && in->rank < RS_SERVE_MAX_DIMS; d++) in->dims[in->rank++] = s->d[d];
    int rows = rs_plan_rows(sp->first), classes = rs_plan_classes(sp->first);
    if (rows > 1) out->dims[out->rank++] = rows;
    out->dims[out->rank++] = classes;
    sp->out_numel = (size_t)rows * (size_t)classes;
    sp->batch = rs_plan_batch(sp->first);
}

static void plan_free(void *impl)
{
    splan *sp = impl;
    if (!sp) return;
    rs_plan_free(sp->first);
    free(sp->bytes);
    free(sp->path);
    free(sp);
}

/* A file for another ISA or oneDNN version, or a corrupted one, is refused with the loader's message;
 * a token plan (a GPT) too, since serve/ takes FP32 tensors. */
static rs_status plan_load(const char *path, void **impl, rs_err *err)
{
    splan *sp = calloc(1, sizeof *sp); /* the caller's: plan_free */
    if (!sp || !(sp->path = strdup(path))) {
        free(sp);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    rs_status st = rs_plan_load(path, &sp->first, err);
    if (!st && rs_plan_tokens(sp->first))
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: a token plan (a GPT) takes int32 token ids; serve/ serves FP32 "
                        "tensors: serve the GPT itself (its model.safetensors) to generate text", path);
    if (!st && rs_plan_rows(sp->first) < 1)
        st = rs_err_set(err, RS_ERR_FORMAT, "%s: the plan has %d output rows", path, rs_plan_rows(sp->first));
    if (!st) st = rs_plan_serialize(sp->first, &sp->bytes, &sp->nbytes, err);
    if (st) {
        plan_free(sp);
        return st;
    }
    describe(sp);
    *impl = sp;
    return RS_OK;
}

static void plan_io(const void *impl, rs_serve_ios *io) { *io = ((const splan *)impl)->io; }

/* A model.plan is ringside's own (oneDNN, from `compile`): platform "ringside_plan", and a config
 * may not ask for batches larger than the one it was compiled for. */
static rs_status plan_complete(const void *impl, rs_serve_config *c, const char *where, rs_err *err)
{
    const splan *sp = impl;
    if ((c->platform[0] && strcmp(c->platform, "ringside_plan")) || (c->backend[0] && strcmp(c->backend, "ringside_plan")))
        return rs_err_set(err, RS_ERR_ARG, "%s: a compiled plan is platform: \"ringside_plan\", not %s \"%s\"", where,
                          c->platform[0] ? "platform" : "backend", c->platform[0] ? c->platform : c->backend);
    if (!c->platform[0]) snprintf(c->platform, sizeof c->platform, "ringside_plan");
    int pb = sp->batch;
    if (c->max_batch_size > pb)
        return rs_err_set(err, RS_ERR_ARG, "%s: max_batch_size %d is larger than the batch %d the plan was compiled "
                          "for: set max_batch_size to 1..%d, or compile the model again with batch=%d", where,
                          c->max_batch_size, pb, pb, c->max_batch_size);
    return rs_srv_complete_tensors(c, &sp->io, where, err);
}

static rs_status plan_new_instance(void *impl, int max_batch, void **inst, rs_err *err)
{
    (void)max_batch;
    splan *sp = impl;
    rs_plan *p = sp->first; /* the instance's: plan_free_instance (instances are made one at a time) */
    sp->first = NULL;
    rs_status st = p ? RS_OK : rs_plan_load_buffer(sp->bytes, sp->nbytes, sp->path, &p, err);
    if (!st) *inst = p;
    return st;
}

static void plan_free_instance(void *inst) { rs_plan_free(inst); }

static rs_status plan_run(void *impl, void *inst, const rs_serve_tensor *x, int B, rs_serve_tensor *y, rs_err *err)
{
    const splan *sp = impl;
    const float *o;
    rs_status st = rs_plan_run(inst, x[0].data, B, &o, err);
    if (st) return st;
    return rs_srv_output_f32(o, (size_t)B * sp->out_numel, &y[0], err);
}

static int plan_max_batch(const void *impl) { return ((const splan *)impl)->batch; }

static rs_status plan_ranks_cfg(const void *impl, const char *path, int max_batch, rs_serve_ranks_cfg *c, rs_err *err)
{
    (void)impl, (void)max_batch;
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: a compiled plan runs in one process (ranks=1); to serve across "
                      "%d ranks, serve the model or the .onnx file it was compiled from", path, c->ranks);
}

const rs_srv_backend_ops rs_srv_backend_plan = {
    .name = "plan",
    .file = "model.plan",
    .what = "a plan",
    .platform = "ringside_plan",
    .load = plan_load,
    .free = plan_free,
    .io = plan_io,
    .complete = plan_complete,
    .new_instance = plan_new_instance,
    .free_instance = plan_free_instance,
    .run = plan_run,
    .max_batch = plan_max_batch,
    .ranks_cfg = plan_ranks_cfg,
};
