/* The cast backend: a model.onnx whose graph only passes tensors on and converts their types
 * (Identity and Cast nodes, no weights): the boundary models users put in front of a network or
 * deploy alone to convert, and what exercises every Triton data type end to end. The engine computes
 * in FP32 on one input, so it refuses these graphs; this backend takes them, any number of inputs and
 * outputs of every type (BYTES through Identity). It is probed after the engine for the same file.
 * An input may have a default, an initializer of the same name (ONNX's overridable initializer: what
 * ONNX Runtime uses when the input is not fed), of one sample; an optional input a request leaves out
 * takes it. A run needs no state: instances hold nothing and run side by side. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "onnx/onnx.pb-c.h"

#define MAX_VALUES (2 * RS_SERVE_MAX_IO + 64)

typedef struct step {
    int in, out;             /* value indices */
    rs_serve_dtype to;       /* Cast's target; INVALID for Identity */
} step;

typedef struct cast_model {
    rs_serve_ios io;
    int nvalues, nsteps;
    char *names[MAX_VALUES]; /* owned: each value's name */
    rs_serve_dtype type[MAX_VALUES];
    step steps[MAX_VALUES];
    int out_value[RS_SERVE_MAX_IO]; /* the value each output is */
    size_t numel[MAX_VALUES];       /* elements per sample */
    rs_serve_tensor def[RS_SERVE_MAX_IO]; /* each input's default of one sample (data owned), or {NULL, 0} */
} cast_model;

/* ONNX TensorProto.DataType -> Triton's. */
static rs_serve_dtype from_onnx(int t)
{
    static const rs_serve_dtype map[] = {
        [1] = RS_SERVE_FP32, [2] = RS_SERVE_UINT8, [3] = RS_SERVE_INT8, [4] = RS_SERVE_UINT16, [5] = RS_SERVE_INT16,
        [6] = RS_SERVE_INT32, [7] = RS_SERVE_INT64, [8] = RS_SERVE_STRING, [9] = RS_SERVE_BOOL, [10] = RS_SERVE_FP16,
        [11] = RS_SERVE_FP64, [12] = RS_SERVE_UINT32, [13] = RS_SERVE_UINT64, [16] = RS_SERVE_BF16};
    return t > 0 && t < (int)(sizeof map / sizeof *map) ? map[t] : RS_SERVE_INVALID;
}

static void cast_free(void *impl)
{
    cast_model *m = impl;
    if (!m) return;
    for (int i = 0; i < m->nvalues; i++) free(m->names[i]);
    for (int i = 0; i < RS_SERVE_MAX_IO; i++) free(m->def[i].data);
    free(m);
}

static int value_of(const cast_model *m, const char *name)
{
    for (int i = 0; name && i < m->nvalues; i++)
        if (!strcmp(m->names[i], name)) return i;
    return -1;
}

static rs_status add_value(cast_model *m, const char *name, rs_serve_dtype t, size_t numel, const char *path,
                           rs_err *err)
{
    if (m->nvalues == MAX_VALUES) return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: more than %d values", path, MAX_VALUES);
    if (value_of(m, name) >= 0) return rs_err_set(err, RS_ERR_FORMAT, "%s: value '%s' is defined twice", path, name);
    m->names[m->nvalues] = strdup(name ? name : "");
    if (!m->names[m->nvalues]) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    m->type[m->nvalues] = t;
    m->numel[m->nvalues++] = numel;
    return RS_OK;
}

/* A graph input or output: its type and per-sample dims (the first dim is the batch). */
static rs_status io_of(const Onnx__ValueInfoProto *v, rs_serve_io *io, const char *path, rs_err *err)
{
    const Onnx__TypeProto__Tensor *tt = v && v->type && v->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
                                            ? v->type->tensor_type : NULL;
    memset(io, 0, sizeof *io);
    if (!tt || !tt->shape || tt->shape->n_dim < 1 || tt->shape->n_dim > RS_SERVE_MAX_DIMS + 1)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: '%s' needs a tensor type with a batch dim first and at most %d "
                          "more", path, v && v->name ? v->name : "?", RS_SERVE_MAX_DIMS);
    snprintf(io->name, sizeof io->name, "%s", v->name ? v->name : "");
    io->dtype = from_onnx(tt->elem_type);
    if (io->dtype == RS_SERVE_INVALID)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: '%s' has ONNX element type %d, which Triton has no type for",
                          path, io->name, tt->elem_type);
    for (size_t d = 1; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE || dim->dim_value < 1)
            return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: '%s' dim %zu is not a fixed size; ringside serves fixed "
                              "per-sample shapes", path, io->name, d);
        io->dims[io->rank++] = dim->dim_value;
    }
    return RS_OK;
}

static size_t numel_of(const rs_serve_io *io)
{
    size_t n = 1;
    for (int d = 0; d < io->rank; d++) n *= (size_t)io->dims[d];
    return n;
}

/* One node: Identity, or Cast with its "to" (not to or from BYTES). */
static rs_status add_step(cast_model *m, const Onnx__NodeProto *nd, const char *path, rs_err *err)
{
    const char *op = nd->op_type ? nd->op_type : "";
    bool cast = !strcmp(op, "Cast");
    if ((!cast && strcmp(op, "Identity")) || (nd->domain && nd->domain[0] && strcmp(nd->domain, "ai.onnx")))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: node '%s' is %s; a graph the engine does not run is served "
                          "when it holds only Identity and Cast nodes", path, nd->name ? nd->name : "", op);
    if (nd->n_input != 1 || nd->n_output != 1)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: node '%s' (%s) takes one input and gives one output", path,
                          nd->name ? nd->name : "", op);
    int in = value_of(m, nd->input[0]);
    if (in < 0) return rs_err_set(err, RS_ERR_FORMAT, "%s: node '%s' reads '%s', which nothing before it gives", path,
                                  nd->name ? nd->name : "", nd->input[0]);
    rs_serve_dtype to = RS_SERVE_INVALID;
    for (size_t a = 0; cast && a < nd->n_attribute; a++)
        if (nd->attribute[a]->name && !strcmp(nd->attribute[a]->name, "to")) to = from_onnx((int)nd->attribute[a]->i);
    if (cast && (to == RS_SERVE_INVALID || to == RS_SERVE_STRING || m->type[in] == RS_SERVE_STRING))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: Cast node '%s' converts %s to a type this backend does not "
                          "(numbers and BOOL only)", path, nd->name ? nd->name : "", rs_serve_dtype_v2_name(m->type[in]));
    m->steps[m->nsteps++] = (step){.in = in, .out = m->nvalues, .to = to};
    return add_value(m, nd->output[0], cast ? to : m->type[in], m->numel[in], path, err);
}

/* An initializer: the default of the graph input of its name, of one sample ([1, dims...]) in that
 * input's type, stored as raw_data (numpy_helper.from_array's form); anything else is a weight. */
static rs_status add_default(cast_model *m, const Onnx__TensorProto *t, const char *path, rs_err *err)
{
    int i = 0;
    while (i < m->io.nin && (!t->name || strcmp(m->io.in[i].name, t->name))) i++;
    if (i == m->io.nin)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: the graph holds weights but the engine could not run it (the "
                          "engine computes in FP32 on one input)", path);
    const rs_serve_io *io = &m->io.in[i];
    bool shape = t->n_dims == (size_t)io->rank + 1 && t->dims[0] == 1;
    for (int d = 0; shape && d < io->rank; d++) shape = t->dims[d + 1] == io->dims[d];
    size_t want = rs_serve_dtype_bytes(io->dtype, numel_of(io));
    if (!shape || from_onnx(t->data_type) != io->dtype || io->dtype == RS_SERVE_STRING || !t->has_raw_data ||
        t->raw_data.len != want)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: the default of input '%s' (its initializer) must be one sample "
                          "(dims [1, ...] as the input's), of its type, not BYTES, stored as raw_data", path, io->name);
    if (!(m->def[i].data = malloc(want))) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    memcpy(m->def[i].data, t->raw_data.data, want);
    m->def[i].bytes = want;
    return RS_OK;
}

static rs_status build(cast_model *m, const Onnx__GraphProto *g, const char *path, rs_err *err)
{
    if (g->n_input < 1 || g->n_input > RS_SERVE_MAX_IO || g->n_output < 1 || g->n_output > RS_SERVE_MAX_IO)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: %zu inputs and %zu outputs (1..%d each)", path, g->n_input,
                          g->n_output, RS_SERVE_MAX_IO);
    if (g->n_node > MAX_VALUES - RS_SERVE_MAX_IO)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: %zu nodes", path, g->n_node);
    rs_status st = RS_OK;
    for (size_t i = 0; !st && i < g->n_input; i++) {
        st = io_of(g->input[i], &m->io.in[m->io.nin], path, err);
        if (!st) st = add_value(m, m->io.in[m->io.nin].name, m->io.in[m->io.nin].dtype, numel_of(&m->io.in[m->io.nin]),
                                path, err);
        m->io.nin++;
    }
    for (size_t i = 0; !st && i < g->n_initializer; i++) st = add_default(m, g->initializer[i], path, err);
    for (size_t i = 0; !st && i < g->n_node; i++) st = add_step(m, g->node[i], path, err);
    for (size_t k = 0; !st && k < g->n_output; k++) {
        rs_serve_io *o = &m->io.out[m->io.nout];
        st = io_of(g->output[k], o, path, err);
        int v = st ? -1 : value_of(m, o->name);
        if (!st && v < 0) st = rs_err_set(err, RS_ERR_FORMAT, "%s: output '%s' is given by no node", path, o->name);
        if (!st && (m->type[v] != o->dtype || m->numel[v] != numel_of(o)))
            st = rs_err_set(err, RS_ERR_FORMAT, "%s: output '%s' is declared %s of %zu elements per sample, but its "
                            "node gives %s of %zu", path, o->name, rs_serve_dtype_v2_name(o->dtype), numel_of(o),
                            rs_serve_dtype_v2_name(m->type[v]), m->numel[v]);
        m->out_value[m->io.nout++] = v;
    }
    return st;
}

static rs_status cast_load(const char *path, void **impl, rs_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return rs_err_set(err, RS_ERR_IO, "%s: cannot open", path);
    uint8_t *buf = NULL; /* owned here */
    size_t n = 0;
    if (!fseek(f, 0, SEEK_END)) {
        long len = ftell(f);
        if (len > 0 && len < (1L << 30) && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)len)))
            n = fread(buf, 1, (size_t)len, f);
    }
    fclose(f);
    Onnx__ModelProto *mp = buf ? onnx__model_proto__unpack(NULL, n, buf) : NULL;
    free(buf);
    if (!mp || !mp->graph) {
        if (mp) onnx__model_proto__free_unpacked(mp, NULL);
        return rs_err_set(err, RS_ERR_FORMAT, "%s: not an ONNX model", path);
    }
    cast_model *m = calloc(1, sizeof *m); /* the caller's: cast_free */
    rs_status st = m ? build(m, mp->graph, path, err) : rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    onnx__model_proto__free_unpacked(mp, NULL);
    if (st) {
        cast_free(m);
        return st;
    }
    *impl = m;
    return RS_OK;
}

static void cast_io(const void *impl, rs_serve_ios *io) { *io = ((const cast_model *)impl)->io; }

static rs_status cast_complete(const void *impl, rs_serve_config *c, const char *where, rs_err *err)
{
    const cast_model *m = impl;
    rs_status st = rs_srv_complete_tensors(c, &m->io, where, err);
    if (!st && !c->platform[0] && !c->backend[0]) snprintf(c->platform, sizeof c->platform, "onnxruntime_onnx");
    return st;
}

static rs_status cast_new_instance(void *impl, int max_batch, void **inst, rs_err *err)
{
    (void)impl, (void)max_batch, (void)inst, (void)err;
    return RS_OK;
}

/* Each value of the batch: an input's bytes as given, an Identity's the same bytes, a Cast's its own. */
static rs_status cast_run(void *impl, void *inst, const rs_serve_tensor *x, int B, rs_serve_tensor *y, rs_err *err)
{
    (void)inst;
    const cast_model *m = impl;
    rs_serve_tensor v[MAX_VALUES] = {{0}};
    bool owned[MAX_VALUES] = {false};
    rs_status st = RS_OK;
    for (int i = 0; !st && i < m->io.nin; i++) {
        v[i] = x[i].data ? x[i] : m->def[i];
        if (!x[i].data && !m->def[i].data)
            st = rs_err_set(err, RS_ERR_ARG, "input '%s' was left out, and the graph gives it no default (an "
                            "initializer of that name), which ONNX Runtime needs for an input not fed: send it",
                            m->io.in[i].name);
        else if (!x[i].data && B != 1)
            st = rs_err_set(err, RS_ERR_ARG, "input '%s' was left out in a request of %d samples, but its default (the "
                            "graph's initializer) is one sample: leave it out only from requests of one", m->io.in[i].name,
                            B);
    }
    for (int s = 0; !st && s < m->nsteps; s++) {
        const step *p = &m->steps[s];
        if (p->to == RS_SERVE_INVALID) {
            v[p->out] = v[p->in];
            continue;
        }
        size_t count = (size_t)B * m->numel[p->in];
        v[p->out].bytes = rs_serve_dtype_bytes(p->to, count);
        v[p->out].data = malloc(v[p->out].bytes + 1);
        owned[p->out] = true;
        if (!v[p->out].data) st = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
        else rs_serve_dtype_convert(m->type[p->in], v[p->in].data, p->to, v[p->out].data, count);
    }
    for (int k = 0; !st && k < m->io.nout; k++) {
        const rs_serve_tensor *o = &v[m->out_value[k]];
        y[k].data = malloc(o->bytes + 1); /* the caller's */
        y[k].bytes = o->bytes;
        if (!y[k].data) st = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
        else if (o->bytes) memcpy(y[k].data, o->data, o->bytes);
    }
    for (int i = 0; i < m->nvalues; i++)
        if (owned[i]) free(v[i].data);
    if (st)
        for (int k = 0; k < m->io.nout; k++) {
            free(y[k].data);
            y[k].data = NULL;
        }
    return st;
}

const rs_srv_backend_ops rs_srv_backend_cast = {
    .name = "cast",
    .file = "model.onnx",
    .what = "an ONNX graph of Identity and Cast nodes",
    .load = cast_load,
    .free = cast_free,
    .io = cast_io,
    .complete = cast_complete,
    .new_instance = cast_new_instance,
    .run = cast_run,
    .absent_inputs = true,
};
