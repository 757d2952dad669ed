/* The engine backend: an ONNX file becomes an inference-only rs_model (the engine's one executor),
 * and each instance owns an activation set (rs_acts), so instances run one model side by side. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "engine/nn/model.h"
#include "onnx/import.h"

typedef struct engine {
    rs_onnx_graph *g;   /* owned: describes the tensors */
    rs_model *m;        /* owned: the graph on the engine's executor, inference only */
    size_t out_numel;   /* output elements per sample */
    rs_serve_io in, out;
} engine;

static void io_of(const rs_onnx_graph *g, int v, rs_serve_io *io)
{
    memset(io, 0, sizeof *io);
    snprintf(io->name, sizeof io->name, "%s", g->values[v].name);
    io->dtype = RS_SERVE_FP32;
    const rs_dims *s = &g->values[v].shape;
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
    if (!st) {
        io_of(e->g, e->g->input, &e->in);
        io_of(e->g, e->g->output, &e->out);
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

static void engine_io(const void *impl, rs_serve_io *in, rs_serve_io *out)
{
    const engine *e = impl;
    *in = e->in;
    *out = e->out;
}

static rs_status engine_complete(const void *impl, rs_serve_config *c, const char *where, rs_err *err)
{
    const engine *e = impl;
    rs_status st = rs_srv_complete_tensors(c, &e->in, &e->out, where, err);
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

static rs_status engine_run(void *impl, void *inst, const float *x, int B, float *y, rs_err *err)
{
    engine *e = impl;
    const float *o;
    rs_status st = rs_model_forward_acts(e->m, inst, x, B, &o, err);
    if (st) return st;
    memcpy(y, o, (size_t)B * e->out_numel * sizeof *y);
    return RS_OK;
}

static rs_status engine_ranks_cfg(const void *impl, const char *path, int max_batch, rs_serve_ranks_cfg *c,
                                  rs_err *err)
{
    (void)path, (void)err;
    const engine *e = impl;
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
