/* serve/'s model adapter. An ONNX file becomes an inference-only rs_model (the engine's one
 * executor), and each instance owns an activation set (rs_acts), so instances run one model side by
 * side. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/model.h"
#include "onnx/import.h"

struct rs_serve_backend {
    char *path;          /* owned */
    rs_onnx_graph *g;    /* owned: describes the tensors */
    rs_model *m;         /* owned: the graph on the engine's executor, inference only */
    size_t out_numel;    /* output elements per sample */
    rs_serve_io in, out;
};

struct rs_serve_inst {
    rs_serve_backend *b; /* borrowed */
    rs_acts *acts;       /* owned: this instance's activations, so instances run side by side */
};

static void io_of(const rs_onnx_graph *g, int v, rs_serve_io *io)
{
    memset(io, 0, sizeof *io);
    snprintf(io->name, sizeof io->name, "%s", g->values[v].name);
    io->dtype = RS_SERVE_FP32;
    const rs_dims *s = &g->values[v].shape;
    for (int d = 1; d < s->rank && io->rank < RS_SERVE_MAX_DIMS; d++) io->dims[io->rank++] = s->d[d];
}

rs_status rs_serve_backend_load(const char *path, rs_serve_backend **out, rs_err *err)
{
    *out = NULL;
    rs_serve_backend *b = calloc(1, sizeof *b); /* the caller's */
    if (!b || !(b->path = strdup(path))) {
        free(b);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    rs_status st = rs_onnx_load(path, &b->g, err);
    if (st) {
        rs_serve_backend_free(b);
        return st;
    }
    if (b->g->values[b->g->input].shape.rank < 1) {
        rs_serve_backend_free(b);
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: the input has no batch dimension", path);
    }
    io_of(b->g, b->g->input, &b->in);
    io_of(b->g, b->g->output, &b->out);
    b->out_numel = rs_onnx_graph_output_numel(b->g);
    st = rs_onnx_to_inference_model(b->g, "served", &b->m, err);
    if (st) {
        rs_serve_backend_free(b);
        return st;
    }
    rs_model_set_training(b->m, false);
    *out = b;
    return RS_OK;
}

void rs_serve_backend_free(rs_serve_backend *b)
{
    if (!b) return;
    rs_model_free(b->m);
    rs_onnx_graph_free(b->g);
    free(b->path);
    free(b);
}

void rs_serve_backend_io(const rs_serve_backend *b, rs_serve_io *in, rs_serve_io *out)
{
    *in = b->in;
    *out = b->out;
}

const char *rs_serve_backend_kind(const rs_serve_backend *b)
{
    (void)b;
    return "engine";
}

rs_status rs_serve_inst_new(rs_serve_backend *b, int max_batch, rs_serve_inst **out, rs_err *err)
{
    *out = NULL;
    rs_serve_inst *in = calloc(1, sizeof *in); /* the caller's */
    if (!in) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    in->b = b;
    rs_status st = RS_OK;
    in->acts = rs_acts_new(b->m, max_batch > 0 ? max_batch : 1, err);
    if (!in->acts) st = err && err->code ? err->code : RS_ERR_NOMEM;
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
    rs_acts_free(in->acts);
    free(in);
}

rs_status rs_serve_inst_run(rs_serve_inst *in, const float *x, int B, float *y, rs_err *err)
{
    const float *o;
    rs_status st = rs_model_forward_acts(in->b->m, in->acts, x, B, &o, err);
    if (st) return st;
    memcpy(y, o, (size_t)B * in->b->out_numel * sizeof *y);
    return RS_OK;
}
