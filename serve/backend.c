/* serve/'s model adapter. An ONNX file that is a plain layer sequence becomes an rs_model in eval
 * mode, and each instance owns an activation set (rs_acts), so instances run one model side by side;
 * any other graph runs on the ONNX graph executor, which keeps its buffers inside the graph, so each
 * instance loads a graph of its own. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/model.h"
#include "onnx/import.h"

struct rs_serve_backend {
    char *path;          /* owned */
    rs_onnx_graph *g;    /* owned: the first load (describes the tensors; the "graph" kind's instance 0) */
    rs_model *m;         /* owned, or NULL when the graph has no engine equivalent */
    bool g_taken;        /* the first graph is in use by an instance */
    rs_serve_io in, out;
};

struct rs_serve_inst {
    rs_serve_backend *b; /* borrowed */
    rs_acts *acts;       /* owned ("engine") */
    rs_onnx_graph *g;    /* "graph": owned unless it is b->g */
};

static void io_of(const rs_onnx_graph *g, int v, rs_serve_io *io)
{
    memset(io, 0, sizeof *io);
    snprintf(io->name, sizeof io->name, "%s", g->values[v].name);
    io->dtype = RS_SERVE_FP32;
    const rs_onnx_shape *s = &g->values[v].shape;
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
    rs_err e2 = {0};
    if (rs_onnx_to_model(b->g, "served", &b->m, &e2) == RS_OK) rs_model_set_training(b->m, false);
    else b->m = NULL; /* not a plain sequence: the graph executor runs it */
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

const char *rs_serve_backend_kind(const rs_serve_backend *b) { return b->m ? "engine" : "graph"; }

rs_status rs_serve_inst_new(rs_serve_backend *b, int max_batch, rs_serve_inst **out, rs_err *err)
{
    *out = NULL;
    rs_serve_inst *in = calloc(1, sizeof *in); /* the caller's */
    if (!in) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    in->b = b;
    rs_status st = RS_OK;
    if (b->m) {
        in->acts = rs_acts_new(b->m, max_batch > 0 ? max_batch : 1, err);
        if (!in->acts) st = err && err->code ? err->code : RS_ERR_NOMEM;
    } else if (!b->g_taken) {
        b->g_taken = true;
        in->g = b->g;
    } else {
        st = rs_onnx_load(b->path, &in->g, err);
    }
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
    if (in->g && in->g != in->b->g) rs_onnx_graph_free(in->g);
    else if (in->g) in->b->g_taken = false;
    free(in);
}

rs_status rs_serve_inst_run(rs_serve_inst *in, const float *x, int B, float *y, rs_err *err)
{
    if (in->acts) {
        const float *o;
        rs_status st = rs_model_forward_acts(in->b->m, in->acts, x, B, &o, err);
        if (st) return st;
        size_t n = (size_t)B * (size_t)rs_model_rows(in->b->m) * (size_t)rs_model_classes(in->b->m);
        memcpy(y, o, n * sizeof *y);
        return RS_OK;
    }
    return rs_onnx_run(in->g, x, B, y, err);
}
