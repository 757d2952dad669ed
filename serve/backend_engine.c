/* The engine backend: an ONNX file becomes an inference-only rs_model (the engine's one executor),
 * and each instance owns an activation set (rs_acts), so instances run one model side by side. A file
 * with several inputs (a two-tower model) lists them as the file declares them; the model reads them
 * packed per sample (onnx/graph.h: rs_onnx_input), so a run packs the request's tensors first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "engine/nn/model.h"
#include "onnx/import.h"

typedef struct engine {
    rs_onnx_graph *g;   /* owned: describes the tensors */
    rs_model *m;        /* owned: the graph on the engine's executor, inference only */
    size_t in_numel, out_numel; /* elements per sample */
    rs_serve_ios io;
} engine;

/* A graph of token ids (g->tokens) takes INT64, as torch exports them; the model reads int32, so a
 * run narrows them at the boundary. */
static void io_of(const char *name, const rs_dims *s, rs_serve_dtype t, rs_serve_io *io)
{
    memset(io, 0, sizeof *io);
    snprintf(io->name, sizeof io->name, "%s", name);
    io->dtype = t;
    for (int d = 1; d < s->rank && io->rank < RS_SERVE_MAX_DIMS; d++) io->dims[io->rank++] = s->d[d];
}

static void engine_free(void *impl)
{
    engine *e = impl;
    if (!e) return;
    rs_model_free(e->m);
    rs_onnx_graph_free(e->g);
    free(e);
}

static rs_status engine_load(const char *path, void **impl, rs_err *err)
{
    engine *e = calloc(1, sizeof *e); /* the caller's: engine_free */
    if (!e) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    rs_status st = rs_onnx_load(path, &e->g, err);
    if (!st && e->g->values[e->g->input].shape.rank < 1)
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: the input has no batch dimension", path);
    if (!st && e->g->ninputs > RS_SERVE_MAX_IO)
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: the graph has %d inputs; a served model has at most %d", path,
                        e->g->ninputs, RS_SERVE_MAX_IO);
    if (!st) {
        e->io.nin = e->g->ninputs;
        e->io.nout = 1;
        for (int k = 0; k < e->g->ninputs; k++)
            io_of(e->g->inputs[k].name, &e->g->inputs[k].shape, e->g->tokens ? RS_SERVE_INT64 : RS_SERVE_FP32,
                  &e->io.in[k]);
        io_of(e->g->values[e->g->output].name, &e->g->values[e->g->output].shape, RS_SERVE_FP32, &e->io.out[0]);
        e->in_numel = rs_onnx_graph_input_numel(e->g);
        e->out_numel = rs_onnx_graph_output_numel(e->g);
        st = rs_onnx_to_inference_model(e->g, "served", &e->m, err);
    }
    if (st) {
        engine_free(e);
        return st;
    }
    rs_model_set_training(e->m, false);
    *impl = e;
    return RS_OK;
}

static void engine_io(const void *impl, rs_serve_ios *io) { *io = ((const engine *)impl)->io; }

static rs_status engine_complete(const void *impl, rs_serve_config *c, const char *where, rs_err *err)
{
    const engine *e = impl;
    rs_status st = rs_srv_complete_tensors(c, &e->io, where, err);
    if (!st && !c->platform[0] && !c->backend[0]) snprintf(c->platform, sizeof c->platform, "onnxruntime_onnx");
    return st;
}

static rs_status engine_new_instance(void *impl, int max_batch, void **inst, rs_err *err)
{
    engine *e = impl;
    rs_acts *a = rs_acts_new(e->m, max_batch, err); /* the instance's: engine_free_instance */
    if (!a) return err && err->code ? err->code : RS_ERR_NOMEM;
    *inst = a;
    return RS_OK;
}

static void engine_free_instance(void *inst) { rs_acts_free(inst); }

/* INT64 token ids -> the int32 the model reads, each checked to fit. ids (n) is the caller's. */
static rs_status narrow_ids(const void *x, size_t n, int32_t *ids, rs_err *err)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        memcpy(&v, (const char *)x + i * 8, 8);
        if (v < INT32_MIN || v > INT32_MAX)
            return rs_err_set(err, RS_ERR_ARG, "token id %lld (element %zu) does not fit the model's int32 ids",
                              (long long)v, i);
        ids[i] = (int32_t)v;
    }
    return RS_OK;
}

/* Several inputs -> the model's one input: per sample, each input's values in the file's order.
 * Returns the packed rows (B * in_numel, the caller frees) or NULL when out of memory. */
static float *pack_inputs(const engine *e, const rs_serve_tensor *x, int B)
{
    float *p = malloc((size_t)B * e->in_numel * sizeof *p + 1);
    if (!p) return NULL;
    for (int k = 0; k < e->g->ninputs; k++) {
        const rs_onnx_input *in = &e->g->inputs[k];
        for (int b = 0; b < B; b++)
            memcpy(p + (size_t)b * e->in_numel + in->offset, (const float *)x[k].data + (size_t)b * in->numel,
                   in->numel * sizeof *p);
    }
    return p;
}

static rs_status engine_run(void *impl, void *inst, const rs_serve_tensor *x, int B, rs_serve_tensor *y, rs_err *err)
{
    engine *e = impl;
    const float *o, *in = x[0].data;
    int32_t *ids = NULL; /* owned here */
    float *packed = NULL; /* owned here */
    size_t n = (size_t)B * e->in_numel;
    rs_status st = RS_OK;
    if (e->g->ninputs > 1) {
        in = packed = pack_inputs(e, x, B);
        if (!packed) st = rs_err_set(err, RS_ERR_NOMEM, "out of memory packing %d inputs", e->g->ninputs);
    } else if (e->g->tokens) {
        ids = malloc(n * sizeof *ids + 1);
        st = ids ? narrow_ids(x[0].data, n, ids, err) : rs_err_set(err, RS_ERR_NOMEM, "out of memory");
        in = (const float *)(const void *)ids; /* the model reads ids in its 4-byte input elements */
    }
    if (!st) st = rs_model_forward_acts(e->m, inst, in, B, &o, err);
    if (!st) st = rs_srv_output_f32(o, (size_t)B * e->out_numel, &y[0], err);
    free(ids);
    free(packed);
    return st;
}

static rs_status engine_ranks_cfg(const void *impl, const char *path, int max_batch, rs_serve_ranks_cfg *c,
                                  rs_err *err)
{
    const engine *e = impl;
    if (e->g->ninputs > 1) /* the ranks' wire carries one input tensor */
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: ranks serve models with one input; this one has %d", path,
                          e->g->ninputs);
    c->max_batch = max_batch;
    c->in_bytes = (size_t)rs_shape_numel(rs_model_input_shape(e->m)) * 4;
    c->out_numel = e->out_numel;
    return RS_OK;
}

static struct rs_model *engine_model(void *impl) { return ((engine *)impl)->m; }

const rs_srv_backend_ops rs_srv_backend_engine = {
    .name = "engine",
    .file = "model.onnx",
    .what = "an ONNX model",
    .load = engine_load,
    .free = engine_free,
    .io = engine_io,
    .complete = engine_complete,
    .new_instance = engine_new_instance,
    .free_instance = engine_free_instance,
    .run = engine_run,
    .ranks_cfg = engine_ranks_cfg,
    .model = engine_model,
};
