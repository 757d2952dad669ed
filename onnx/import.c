/* ONNX ModelProto -> rs_onnx_graph (see import.h). One pass over the nodes in topological order keeps
 * an "import value" per name: computed at run time (a graph value with a symbolic shape), or known now
 * (float or int64 constant). Nodes whose inputs are all known are evaluated here with the executor's
 * own kernels; shape arithmetic carries the batch as RS_ONNX_BATCH. Only what depends on the input
 * becomes a graph node. Every count, size and index from the file is checked before it is used. */
#include "import.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/spec.h"
#include "onnx/onnx.pb-c.h"

/* TensorProto.DataType and AttributeProto.AttributeType numbers from the ONNX specification, spelled
 * out so this file does not depend on which enum members the project's .proto subset declares. */
enum { DT_FLOAT = 1, DT_UINT8 = 2, DT_INT8 = 3, DT_INT16 = 5, DT_INT32 = 6, DT_INT64 = 7, DT_BOOL = 9,
       DT_DOUBLE = 11 };
enum { AT_FLOAT = 1, AT_INT = 2, AT_STRING = 3, AT_TENSOR = 4, AT_FLOATS = 6, AT_INTS = 7 };

/* Elements that folding at import may create in all (a file of a few bytes must not make gigabytes). */
#define FOLD_BUDGET ((int64_t)1 << 24)
#define MAX_NODES 100000

typedef enum { IV_NONE = 0, IV_DYN, IV_F, IV_I } iv_kind;

typedef struct ival {
    iv_kind kind;
    rs_onnx_shape shape;
    float *f;    /* IV_F: owned */
    int64_t *i;  /* IV_I: owned; may hold RS_ONNX_BATCH (folded shapes) */
    int vid;     /* graph value (IV_DYN, or a constant once a node uses it), -1 before */
} ival;

typedef struct imp {
    const char *file;
    rs_err *err;
    int64_t opset;
    rs_onnx_graph *g;
    int cap_values, cap_nodes;
    /* name -> ival, open addressing */
    char **keys;
    ival *vals;
    size_t ht_cap;
    int64_t budget;
    const Onnx__NodeProto *node; /* the node being imported, for messages */
    int node_index;              /* its position in the file */
} imp;

/* ---- messages ---- */

static const char *str_or(const char *s, const char *d) { return s && *s ? s : d; }

static rs_status fail(imp *p, rs_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static rs_status fail(imp *p, rs_status code, const char *fmt, ...)
{
    char msg[RS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->node && p->node->name && *p->node->name)
        return rs_err_set(p->err, code, "%s: node '%s' (%s): %s", p->file, p->node->name,
                          str_or(p->node->op_type, "?"), msg);
    if (p->node)
        return rs_err_set(p->err, code, "%s: node #%d (%s, unnamed): %s", p->file, p->node_index,
                          str_or(p->node->op_type, "?"), msg);
    return rs_err_set(p->err, code, "%s: %s", p->file, msg);
}

/* ---- name table ---- */

static size_t hash(const char *s)
{
    size_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static ival *lookup(imp *p, const char *name, bool create)
{
    if (!name) return NULL;
    size_t mask = p->ht_cap - 1, i = hash(name) & mask;
    for (; p->keys[i]; i = (i + 1) & mask)
        if (!strcmp(p->keys[i], name)) return &p->vals[i];
    if (!create) return NULL;
    p->keys[i] = strdup(name);
    if (!p->keys[i]) return NULL;
    p->vals[i] = (ival){.vid = -1};
    return &p->vals[i];
}

/* ---- graph building ---- */

static int add_value(imp *p, const char *name, const rs_onnx_shape *s, float *data)
{
    rs_onnx_graph *g = p->g;
    if (g->nvalues == p->cap_values) {
        int nc = p->cap_values ? p->cap_values * 2 : 64;
        rs_onnx_value *nv = realloc(g->values, sizeof *nv * (size_t)nc);
        if (!nv) return -1;
        g->values = nv;
        p->cap_values = nc;
    }
    rs_onnx_value *v = &g->values[g->nvalues];
    *v = (rs_onnx_value){.name = strdup(name ? name : ""), .shape = *s, .data = data, .producer = -1};
    if (!v->name) return -1;
    return g->nvalues++;
}

/* The graph value behind an import value; constants become graph values (copied) on first use. */
static rs_status materialize(imp *p, ival *v, const char *name, int *vid)
{
    if (v->vid >= 0) {
        *vid = v->vid;
        return RS_OK;
    }
    float *data = NULL;
    size_t n = (size_t)rs_onnx_shape_numel(&v->shape, 1);
    if (v->kind == IV_F || v->kind == IV_I) {
        data = malloc(sizeof(float) * (n ? n : 1));
        if (!data) return fail(p, RS_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < n; k++) {
            if (v->kind == IV_I && v->i[k] == RS_ONNX_BATCH) {
                free(data);
                return fail(p, RS_ERR_UNSUPPORTED, "value '%s' uses the batch size as data", name);
            }
            data[k] = v->kind == IV_F ? v->f[k] : (float)v->i[k];
        }
    }
    int id = add_value(p, name, &v->shape, data);
    if (id < 0) {
        free(data);
        return fail(p, RS_ERR_NOMEM, "out of memory");
    }
    v->vid = *vid = id;
    return RS_OK;
}

static char *node_name(const Onnx__NodeProto *np, int k)
{
    char buf[96];
    if (np->name && *np->name) return strdup(np->name);
    snprintf(buf, sizeof buf, "%.60s_%d", str_or(np->op_type, "node"), k);
    return strdup(buf);
}

/* ---- tensors from the file ---- */

static rs_status check_dims(imp *p, const char *what, size_t nd, const int64_t *dims, rs_onnx_shape *s)
{
    if (nd > RS_ONNX_MAX_RANK)
        return fail(p, RS_ERR_UNSUPPORTED, "%s has rank %zu; at most %d is supported", what, nd, RS_ONNX_MAX_RANK);
    s->rank = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        if (dims[i] < 0) return fail(p, RS_ERR_FORMAT, "%s has a negative dimension %lld", what, (long long)dims[i]);
        s->d[i] = dims[i];
    }
    if (rs_onnx_shape_numel(s, 1) < 0)
        return fail(p, RS_ERR_FORMAT, "%s declares more than 2^31 elements", what);
    return RS_OK;
}

static const char *dtype_name(int t)
{
    static const char *const n[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
                                    "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
                                    "complex128", "bfloat16"};
    return t >= 0 && t < (int)(sizeof n / sizeof *n) ? n[t] : "unknown";
}

static rs_status tensor_to_ival(imp *p, const Onnx__TensorProto *t, const char *what, ival *out)
{
    rs_onnx_shape s;
    rs_status st = check_dims(p, what, t->n_dims, t->dims, &s);
    if (st) return st;
    if (t->data_location == 1 || t->n_external_data)
        return fail(p, RS_ERR_UNSUPPORTED, "%s keeps its data in an external file; save the model with the "
                    "weights inside (onnx.save(..., save_as_external_data=False))", what);
    size_t n = (size_t)rs_onnx_shape_numel(&s, 1), esz;
    int dt = t->data_type;
    bool is_float = dt == DT_FLOAT || dt == DT_DOUBLE;
    switch (dt) {
    case DT_FLOAT: case DT_INT32: esz = 4; break;
    case DT_DOUBLE: case DT_INT64: esz = 8; break;
    case DT_INT16: esz = 2; break;
    case DT_INT8: case DT_UINT8: case DT_BOOL: esz = 1; break;
    default:
        return fail(p, RS_ERR_UNSUPPORTED, "%s has element type %s (%d); supported: float, double, int8/16/32/64, "
                    "uint8, bool", what, dtype_name(dt), dt);
    }
    size_t have;
    bool raw = t->raw_data.len > 0;
    if (raw) have = t->raw_data.len / esz;
    else if (dt == DT_FLOAT) have = t->n_float_data;
    else if (dt == DT_DOUBLE) have = t->n_double_data;
    else if (dt == DT_INT64) have = t->n_int64_data;
    else have = t->n_int32_data;
    if ((raw && t->raw_data.len != n * esz) || (!raw && have != n))
        return fail(p, RS_ERR_FORMAT, "%s: shape (%zu elements) does not match its data (%zu %s)", what, n,
                    raw ? t->raw_data.len : have, raw ? "bytes of raw_data" : "values");
    *out = (ival){.kind = is_float ? IV_F : IV_I, .shape = s, .vid = -1};
    if (is_float) out->f = malloc(sizeof(float) * (n ? n : 1));
    else out->i = malloc(sizeof(int64_t) * (n ? n : 1));
    if (!out->f && !out->i) return fail(p, RS_ERR_NOMEM, "out of memory for %s", what);
    const uint8_t *r = t->raw_data.data;
    for (size_t k = 0; k < n; k++) {
        /* raw_data is little-endian and may be unaligned: memcpy each element */
        switch (dt) {
        case DT_FLOAT: if (raw) memcpy(&out->f[k], r + 4 * k, 4); else out->f[k] = t->float_data[k]; break;
        case DT_DOUBLE: {
            double d;
            if (raw) memcpy(&d, r + 8 * k, 8); else d = t->double_data[k];
            out->f[k] = (float)d;
            break;
        }
        case DT_INT64: if (raw) memcpy(&out->i[k], r + 8 * k, 8); else out->i[k] = t->int64_data[k]; break;
        case DT_INT32: {
            int32_t v;
            if (raw) memcpy(&v, r + 4 * k, 4); else v = t->int32_data[k];
            out->i[k] = v;
            break;
        }
        case DT_INT16: {
            int16_t v;
            if (raw) memcpy(&v, r + 2 * k, 2); else v = (int16_t)t->int32_data[k];
            out->i[k] = v;
            break;
        }
        case DT_INT8: out->i[k] = raw ? (int8_t)r[k] : (int8_t)t->int32_data[k]; break;
        default: out->i[k] = raw ? r[k] : (uint8_t)t->int32_data[k]; break;
        }
    }
    /* ints are shape material: keep them out of the batch sentinel's way */
    if (!is_float)
        for (size_t k = 0; k < n; k++)
            if (out->i[k] == RS_ONNX_BATCH) out->i[k] = RS_ONNX_BATCH - 1;
    return RS_OK;
}

static void ival_clear(ival *v)
{
    free(v->f);
    free(v->i);
    v->f = NULL;
    v->i = NULL;
}

/* ---- attributes ---- */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t i = 0; i < np->n_attribute; i++)
        if (np->attribute[i]->name && !strcmp(np->attribute[i]->name, name)) return np->attribute[i];
    return NULL;
}

static rs_status attr_int(imp *p, const char *name, int64_t def, int64_t *out)
{
    const Onnx__AttributeProto *a = attr(p->node, name);
    *out = def;
    if (!a) return RS_OK;
    if ((int)a->type != AT_INT) return fail(p, RS_ERR_FORMAT, "attribute '%s' should be an int", name);
    *out = a->i;
    return RS_OK;
}

static rs_status attr_float(imp *p, const char *name, float def, float *out)
{
    const Onnx__AttributeProto *a = attr(p->node, name);
    *out = def;
    if (!a) return RS_OK;
    if ((int)a->type != AT_FLOAT) return fail(p, RS_ERR_FORMAT, "attribute '%s' should be a float", name);
    *out = a->f;
    return RS_OK;
}

/* ints attribute: *n = -1 when absent. */
static rs_status attr_ints(imp *p, const char *name, int64_t *out, int max, int *n)
{
    const Onnx__AttributeProto *a = attr(p->node, name);
    *n = -1;
    if (!a) return RS_OK;
    if ((int)a->type != AT_INTS) return fail(p, RS_ERR_FORMAT, "attribute '%s' should be a list of ints", name);
    if (a->n_ints > (size_t)max) return fail(p, RS_ERR_UNSUPPORTED, "attribute '%s' has %zu values; at most %d", name,
                                             a->n_ints, max);
    if (a->n_ints) memcpy(out, a->ints, sizeof(int64_t) * a->n_ints);
    *n = (int)a->n_ints;
    return RS_OK;
}

static const char *attr_str(imp *p, const char *name, const char *def)
{
    const Onnx__AttributeProto *a = attr(p->node, name);
    if (!a || (int)a->type != AT_STRING || !a->s.data) return def;
    static _Thread_local char buf[64];
    size_t n = a->s.len < sizeof buf - 1 ? a->s.len : sizeof buf - 1;
    memcpy(buf, a->s.data, n);
    buf[n] = '\0';
    return buf;
}

static rs_status norm_axis(imp *p, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank)
        return fail(p, RS_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return RS_OK;
}

/* ---- node emission ---- */

typedef struct nctx {
    imp *p;
    const Onnx__NodeProto *np;
    int index;
    ival *in[8];  /* resolved inputs; NULL for absent optional ones */
    int nin;
    const char *in_names[8];
    ival res;     /* the result for output 0 */
} nctx;

static bool is_const(const ival *v) { return v && (v->kind == IV_F || v->kind == IV_I); }

/* Adds node op over inputs ins (ival pointers, NULL = absent), or evaluates it now when every input is
 * known. The result goes to c->res. */
static rs_status emit(nctx *c, rs_onnx_op op, const rs_onnx_attrs *a, ival **ins, int nin)
{
    imp *p = c->p;
    rs_onnx_node n = {.op = op, .name = (char *)str_or(c->np->name, c->np->op_type), .op_type = c->np->op_type,
                      .nin = nin, .a = *a};
    const rs_onnx_shape *is[RS_ONNX_MAX_IN] = {0};
    bool all_const = true;
    if (nin > RS_ONNX_MAX_IN) return fail(p, RS_ERR_UNSUPPORTED, "more than %d inputs", RS_ONNX_MAX_IN);
    for (int k = 0; k < nin; k++) {
        n.in[k] = -1;
        if (!ins[k]) continue;
        is[k] = &ins[k]->shape;
        if (!is_const(ins[k])) all_const = false;
    }
    rs_onnx_shape os;
    rs_err e2 = {0};
    if (rs_onnx_infer(&n, is, RS_ONNX_BATCH, &os, &e2)) return rs_err_set(p->err, e2.code, "%s: %s", p->file, e2.msg);
    int64_t on = rs_onnx_shape_numel(&os, 1);
    if (on < 0) return fail(p, RS_ERR_SHAPE, "output would exceed 2^31 elements");
    int batch_dims = 0;
    for (int k = 0; k < os.rank; k++) batch_dims += os.d[k] == RS_ONNX_BATCH;
    bool has_batch = batch_dims > 0;
    /* (N, 1) + (1, N) would give (N, N): rows would no longer be samples */
    if (batch_dims > 1) return fail(p, RS_ERR_UNSUPPORTED, "the batch would appear in two dimensions of the output");
    if (all_const && !has_batch && on <= p->budget) {
        /* fold: evaluate now on the constants */
        float *bufs[RS_ONNX_MAX_IN] = {0};
        const float *cins[RS_ONNX_MAX_IN] = {0};
        rs_status st = RS_OK;
        for (int k = 0; k < nin && !st; k++) {
            if (!ins[k]) continue;
            if (ins[k]->kind == IV_F) {
                cins[k] = ins[k]->f;
                continue;
            }
            size_t m = (size_t)rs_onnx_shape_numel(&ins[k]->shape, 1);
            bufs[k] = malloc(sizeof(float) * (m ? m : 1));
            if (!bufs[k]) st = fail(p, RS_ERR_NOMEM, "out of memory");
            for (size_t j = 0; !st && j < m; j++) {
                if (ins[k]->i[j] == RS_ONNX_BATCH) st = fail(p, RS_ERR_UNSUPPORTED, "arithmetic on the batch size");
                else bufs[k][j] = (float)ins[k]->i[j];
            }
            cins[k] = bufs[k];
        }
        float *out = st ? NULL : malloc(sizeof(float) * (size_t)(on ? on : 1));
        if (!st && !out) st = fail(p, RS_ERR_NOMEM, "out of memory");
        if (!st && rs_onnx_exec(&n, cins, is, out, &os, &e2)) st = rs_err_set(p->err, e2.code, "%s: %s", p->file, e2.msg);
        for (int k = 0; k < nin; k++) free(bufs[k]);
        if (st) {
            free(out);
            return st;
        }
        p->budget -= on;
        c->res = (ival){.kind = IV_F, .shape = os, .f = out, .vid = -1};
        return RS_OK;
    }
    for (int k = 0; k < nin; k++) {
        if (!ins[k]) continue;
        if (ins[k]->kind == IV_I && op != RS_ONNX_OP_RESHAPE)
            return fail(p, RS_ERR_UNSUPPORTED, "integer input '%s' to a computed node", c->in_names[k]);
        rs_status st = materialize(p, ins[k], c->in_names[k], &n.in[k]);
        if (st) return st;
    }
    rs_onnx_graph *g = p->g;
    if (g->nnodes == p->cap_nodes) {
        int nc = p->cap_nodes ? p->cap_nodes * 2 : 32;
        rs_onnx_node *nn = realloc(g->nodes, sizeof *nn * (size_t)nc);
        if (!nn) return fail(p, RS_ERR_NOMEM, "out of memory");
        g->nodes = nn;
        p->cap_nodes = nc;
    }
    const char *oname = c->np->n_output ? c->np->output[0] : "";
    int out = add_value(p, oname, &os, NULL);
    if (out < 0) return fail(p, RS_ERR_NOMEM, "out of memory");
    n.name = node_name(c->np, c->index);
    n.op_type = strdup(str_or(c->np->op_type, "?"));
    n.out = out;
    if (!n.name || !n.op_type) {
        free(n.name);
        free(n.op_type);
        return fail(p, RS_ERR_NOMEM, "out of memory");
    }
    g->values[out].producer = g->nnodes;
    g->nodes[g->nnodes++] = n;
    c->res = (ival){.kind = IV_DYN, .shape = os, .vid = out};
    return RS_OK;
}

/* A view with a new shape: constants are copied, computed values get a RESHAPE node. */
static rs_status reshape_to(nctx *c, ival *x, const rs_onnx_shape *s)
{
    if (x->kind == IV_DYN) {
        rs_onnx_attrs a = {.shape = *s};
        return emit(c, RS_ONNX_OP_RESHAPE, &a, &x, 1);
    }
    size_t n = (size_t)rs_onnx_shape_numel(&x->shape, 1);
    c->res = (ival){.kind = x->kind, .shape = *s, .vid = -1};
    if (x->kind == IV_F) {
        c->res.f = malloc(sizeof(float) * (n ? n : 1));
        if (c->res.f) memcpy(c->res.f, x->f, sizeof(float) * n);
    } else {
        c->res.i = malloc(sizeof(int64_t) * (n ? n : 1));
        if (c->res.i) memcpy(c->res.i, x->i, sizeof(int64_t) * n);
    }
    if (!c->res.f && !c->res.i) return fail(c->p, RS_ERR_NOMEM, "out of memory");
    return RS_OK;
}

static rs_status need_inputs(nctx *c, int lo, int hi)
{
    int present = 0;
    for (int k = 0; k < c->nin; k++) present += c->in[k] != NULL;
    if (c->nin < lo || c->nin > hi || (lo > 0 && !c->in[0]))
        return fail(c->p, RS_ERR_FORMAT, "expects %d to %d inputs, has %d", lo, hi, c->nin);
    for (int k = 0; k < lo; k++)
        if (!c->in[k]) return fail(c->p, RS_ERR_FORMAT, "input %d is required", k);
    (void)present;
    return RS_OK;
}

/* int64 list from a constant input (axes, shape, pads); BATCH allowed only where allow_batch. */
static rs_status const_ints(nctx *c, const ival *v, const char *what, int64_t *out, int max, int *n, bool allow_batch)
{
    if (!v || !is_const(v)) return fail(c->p, RS_ERR_UNSUPPORTED, "%s must be a constant (known at import)", what);
    int64_t m = rs_onnx_shape_numel(&v->shape, 1);
    if (v->shape.rank > 1 || m > max) return fail(c->p, RS_ERR_UNSUPPORTED, "%s must be a list of at most %d values", what, max);
    for (int64_t k = 0; k < m; k++) {
        if (v->kind == IV_F && !(fabsf(v->f[k]) < 1e15f))
            return fail(c->p, RS_ERR_FORMAT, "%s holds %g, not an integer", what, (double)v->f[k]);
        out[k] = v->kind == IV_I ? v->i[k] : (int64_t)v->f[k];
        if (out[k] == RS_ONNX_BATCH && !allow_batch)
            return fail(c->p, RS_ERR_UNSUPPORTED, "%s depends on the batch size", what);
    }
    *n = (int)m;
    return RS_OK;
}

/* ---- handlers ---- */

typedef rs_status (*handler)(nctx *c);

static rs_status h_identity(nctx *c)
{
    rs_status st = need_inputs(c, 1, 3);
    if (st) return st;
    if (!strcmp(c->np->op_type, "Dropout") && c->nin > 2 && c->in[2]) {
        const ival *t = c->in[2];
        if (!is_const(t) || rs_onnx_shape_numel(&t->shape, 1) < 1 || (t->kind == IV_I ? t->i[0] != 0 : t->f[0] != 0.0f))
            return fail(c->p, RS_ERR_UNSUPPORTED, "dropout in training mode");
    }
    return reshape_to(c, c->in[0], &c->in[0]->shape);
}

static rs_status h_constant(nctx *c)
{
    imp *p = c->p;
    const Onnx__NodeProto *np = c->np;
    if (np->n_attribute != 1) return fail(p, RS_ERR_FORMAT, "needs exactly one value attribute");
    const Onnx__AttributeProto *a = np->attribute[0];
    const char *nm = str_or(a->name, "");
    if (!strcmp(nm, "value")) {
        if ((int)a->type != AT_TENSOR || !a->t) return fail(p, RS_ERR_FORMAT, "attribute 'value' should be a tensor");
        return tensor_to_ival(p, a->t, "its value", &c->res);
    }
    bool f = !strcmp(nm, "value_float") || !strcmp(nm, "value_floats");
    bool i = !strcmp(nm, "value_int") || !strcmp(nm, "value_ints");
    bool list = !strcmp(nm, "value_floats") || !strcmp(nm, "value_ints");
    if (!f && !i) return fail(p, RS_ERR_UNSUPPORTED, "value attribute '%s'", nm);
    int want = f ? (list ? AT_FLOATS : AT_FLOAT) : (list ? AT_INTS : AT_INT);
    if ((int)a->type != want) return fail(p, RS_ERR_FORMAT, "attribute '%s' has the wrong type", nm);
    size_t n = list ? (f ? a->n_floats : a->n_ints) : 1;
    c->res = (ival){.kind = f ? IV_F : IV_I, .shape = {list ? 1 : 0, {(int64_t)n}}, .vid = -1};
    if (f) c->res.f = malloc(sizeof(float) * (n ? n : 1));
    else c->res.i = malloc(sizeof(int64_t) * (n ? n : 1));
    if (!c->res.f && !c->res.i) return fail(p, RS_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        if (f) c->res.f[k] = list ? a->floats[k] : a->f;
        else c->res.i[k] = list ? a->ints[k] : a->i;
        if (i && c->res.i[k] == RS_ONNX_BATCH) c->res.i[k]--;
    }
    return RS_OK;
}

static rs_status h_shape(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    int64_t start, end;
    int r = c->in[0]->shape.rank;
    if ((st = attr_int(c->p, "start", 0, &start)) || (st = attr_int(c->p, "end", r, &end))) return st;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    int64_t n = end - start;
    c->res = (ival){.kind = IV_I, .shape = {1, {n}}, .i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), .vid = -1};
    if (!c->res.i) return fail(c->p, RS_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; k < n; k++) c->res.i[k] = c->in[0]->shape.d[start + k];
    return RS_OK;
}

/* numpy take along axis, on constants */
static rs_status h_gather(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 2, 2);
    if (st) return st;
    ival *x = c->in[0], *ix = c->in[1];
    if (!is_const(x)) return fail(p, RS_ERR_UNSUPPORTED, "Gather on computed data (only constants and shapes)");
    if (ix->kind != IV_I) return fail(p, RS_ERR_UNSUPPORTED, "Gather indices must be integer constants");
    int64_t ax;
    int axis = 0;
    if ((st = attr_int(p, "axis", 0, &ax)) || (st = norm_axis(p, ax, x->shape.rank, &axis))) return st;
    rs_onnx_shape os = {0, {0}};
    if (x->shape.rank - 1 + ix->shape.rank > RS_ONNX_MAX_RANK) return fail(p, RS_ERR_UNSUPPORTED, "rank too high");
    for (int k = 0; k < axis; k++) os.d[os.rank++] = x->shape.d[k];
    for (int k = 0; k < ix->shape.rank; k++) os.d[os.rank++] = ix->shape.d[k];
    for (int k = axis + 1; k < x->shape.rank; k++) os.d[os.rank++] = x->shape.d[k];
    int64_t on = rs_onnx_shape_numel(&os, 1);
    if (on < 0 || on > p->budget) return fail(p, RS_ERR_UNSUPPORTED, "gather result too large");
    size_t outer = 1, inner = 1, ni = (size_t)rs_onnx_shape_numel(&ix->shape, 1), dim = (size_t)x->shape.d[axis];
    for (int k = 0; k < axis; k++) outer *= (size_t)x->shape.d[k];
    for (int k = axis + 1; k < x->shape.rank; k++) inner *= (size_t)x->shape.d[k];
    c->res = (ival){.kind = x->kind, .shape = os, .vid = -1};
    if (x->kind == IV_F) c->res.f = malloc(sizeof(float) * (size_t)(on ? on : 1));
    else c->res.i = malloc(sizeof(int64_t) * (size_t)(on ? on : 1));
    if (!c->res.f && !c->res.i) return fail(p, RS_ERR_NOMEM, "out of memory");
    for (size_t o = 0; o < outer; o++)
        for (size_t j = 0; j < ni; j++) {
            int64_t q = ix->i[j];
            if (q < 0) q += (int64_t)dim;
            if (q < 0 || q >= (int64_t)dim)
                return fail(p, RS_ERR_SHAPE, "index %lld out of range for dimension %zu", (long long)ix->i[j], dim);
            size_t src = (o * dim + (size_t)q) * inner, dst = (o * ni + j) * inner;
            if (x->kind == IV_F) memcpy(c->res.f + dst, x->f + src, sizeof(float) * inner);
            else memcpy(c->res.i + dst, x->i + src, sizeof(int64_t) * inner);
        }
    p->budget -= on;
    return RS_OK;
}

/* axes from the attribute (old opsets) or the second input (opset 13) */
static rs_status get_axes(nctx *c, int64_t *axes, int *n)
{
    rs_status st = attr_ints(c->p, "axes", axes, RS_ONNX_MAX_RANK, n);
    if (st || *n >= 0) return st;
    if (c->nin > 1 && c->in[1]) return const_ints(c, c->in[1], "axes", axes, RS_ONNX_MAX_RANK, n, false);
    *n = -1;
    return RS_OK;
}

static rs_status h_unsqueeze(nctx *c)
{
    rs_status st = need_inputs(c, 1, 2);
    if (st) return st;
    int64_t axes[RS_ONNX_MAX_RANK];
    int na;
    if ((st = get_axes(c, axes, &na))) return st;
    if (na < 0) return fail(c->p, RS_ERR_FORMAT, "needs axes");
    const rs_onnx_shape *x = &c->in[0]->shape;
    int r = x->rank + na;
    if (r > RS_ONNX_MAX_RANK) return fail(c->p, RS_ERR_UNSUPPORTED, "rank too high");
    bool ins[RS_ONNX_MAX_RANK] = {0};
    for (int k = 0; k < na; k++) {
        int a = 0;
        if ((st = norm_axis(c->p, axes[k], r, &a))) return st;
        if (ins[a]) return fail(c->p, RS_ERR_FORMAT, "repeated axis %d", a);
        ins[a] = true;
    }
    rs_onnx_shape s = {r, {0}};
    for (int k = 0, j = 0; k < r; k++) s.d[k] = ins[k] ? 1 : x->d[j++];
    return reshape_to(c, c->in[0], &s);
}

static rs_status h_squeeze(nctx *c)
{
    rs_status st = need_inputs(c, 1, 2);
    if (st) return st;
    int64_t axes[RS_ONNX_MAX_RANK];
    int na;
    if ((st = get_axes(c, axes, &na))) return st;
    const rs_onnx_shape *x = &c->in[0]->shape;
    bool drop[RS_ONNX_MAX_RANK] = {0};
    for (int k = 0; k < x->rank; k++) drop[k] = na < 0 && x->d[k] == 1;
    for (int k = 0; k < na; k++) {
        int a = 0;
        if ((st = norm_axis(c->p, axes[k], x->rank, &a))) return st;
        if (x->d[a] != 1) return fail(c->p, RS_ERR_SHAPE, "cannot squeeze dimension %d of size %lld", a, (long long)x->d[a]);
        drop[a] = true;
    }
    rs_onnx_shape s = {0, {0}};
    for (int k = 0; k < x->rank; k++)
        if (!drop[k]) s.d[s.rank++] = x->d[k];
    return reshape_to(c, c->in[0], &s);
}

static rs_status h_flatten(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    int64_t ax;
    int axis = 0;
    const rs_onnx_shape *x = &c->in[0]->shape;
    if ((st = attr_int(c->p, "axis", 1, &ax))) return st;
    if (ax == x->rank) axis = x->rank;
    else if ((st = norm_axis(c->p, ax, x->rank, &axis))) return st;
    rs_onnx_shape s = {2, {1, 1}};
    for (int k = 0; k < x->rank; k++) {
        int64_t *d = &s.d[k < axis ? 0 : 1];
        if (x->d[k] == RS_ONNX_BATCH) {
            if (*d != 1) return fail(c->p, RS_ERR_UNSUPPORTED, "flattening the batch into other dimensions");
            *d = RS_ONNX_BATCH;
        } else if (*d == RS_ONNX_BATCH) {
            if (x->d[k] != 1) return fail(c->p, RS_ERR_UNSUPPORTED, "flattening the batch into other dimensions");
        } else {
            *d *= x->d[k];
        }
    }
    return reshape_to(c, c->in[0], &s);
}

static rs_status h_reshape(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 2, 2);
    if (st) return st;
    int64_t t[RS_ONNX_MAX_RANK], allowzero;
    int nt;
    if ((st = const_ints(c, c->in[1], "the target shape", t, RS_ONNX_MAX_RANK, &nt, true))) return st;
    if ((st = attr_int(p, "allowzero", 0, &allowzero))) return st;
    const rs_onnx_shape *x = &c->in[0]->shape;
    rs_onnx_shape s = {nt, {0}};
    int infer = -1;
    bool xb = false, sb = false;
    int64_t known = 1, total = 1;
    for (int k = 0; k < x->rank; k++) {
        if (x->d[k] == RS_ONNX_BATCH) xb = true;
        else total *= x->d[k];
    }
    for (int k = 0; k < nt; k++) {
        int64_t d = t[k];
        if (d == 0 && !allowzero) {
            if (k >= x->rank) return fail(p, RS_ERR_SHAPE, "target dim %d copies a dimension the input lacks", k);
            d = x->d[k];
        }
        if (d == -1) {
            if (infer >= 0) return fail(p, RS_ERR_SHAPE, "more than one -1 in the target shape");
            infer = k;
            continue;
        }
        if (d < 0 && d != RS_ONNX_BATCH) return fail(p, RS_ERR_SHAPE, "negative target dimension %lld", (long long)d);
        s.d[k] = d;
        if (d == RS_ONNX_BATCH) {
            if (sb) return fail(p, RS_ERR_UNSUPPORTED, "the batch appears twice in the target shape");
            sb = true;
        } else {
            if (d && known > RS_ONNX_MAX_ELEMS / d) return fail(p, RS_ERR_SHAPE, "target shape too large");
            known *= d;
        }
    }
    char b1[96];
    if (infer >= 0) {
        /* the -1 takes what is left: the batch itself when the rest of the sizes match */
        if (known == 0) return fail(p, RS_ERR_SHAPE, "cannot infer -1 next to a zero dimension");
        if (xb && !sb && total == known) s.d[infer] = RS_ONNX_BATCH;
        else if (xb != sb) return fail(p, RS_ERR_UNSUPPORTED, "cannot tell where the batch goes reshaping %s",
                                       rs_onnx_shape_str(x, b1, sizeof b1));
        else if (total % known) return fail(p, RS_ERR_SHAPE, "cannot reshape %s: %lld elements are not a multiple of %lld",
                                            rs_onnx_shape_str(x, b1, sizeof b1), (long long)total, (long long)known);
        else s.d[infer] = total / known;
    } else if (xb != sb || known != total) {
        char b2[96];
        return fail(p, RS_ERR_SHAPE, "cannot reshape %s to %s", rs_onnx_shape_str(x, b1, sizeof b1),
                    rs_onnx_shape_str(&s, b2, sizeof b2));
    }
    return reshape_to(c, c->in[0], &s);
}

static rs_status h_concat(nctx *c)
{
    imp *p = c->p;
    if (c->nin < 1) return fail(p, RS_ERR_FORMAT, "needs inputs");
    for (int k = 0; k < c->nin; k++)
        if (!c->in[k]) return fail(p, RS_ERR_FORMAT, "input %d is missing", k);
    int64_t ax;
    int axis = 0;
    rs_status st;
    if ((st = attr_int(p, "axis", 0, &ax)) || (st = norm_axis(p, ax, c->in[0]->shape.rank, &axis))) return st;
    bool ints = true;
    for (int k = 0; k < c->nin; k++) ints &= c->in[k]->kind == IV_I;
    if (ints) {
        /* shape tensors: 1-d int constants, possibly carrying the batch */
        int64_t n = 0;
        for (int k = 0; k < c->nin; k++) {
            if (c->in[k]->shape.rank != 1) return fail(p, RS_ERR_UNSUPPORTED, "integer Concat of rank %d", c->in[k]->shape.rank);
            n += c->in[k]->shape.d[0];
            if (n > p->budget) return fail(p, RS_ERR_UNSUPPORTED, "result too large");
        }
        c->res = (ival){.kind = IV_I, .shape = {1, {n}}, .i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), .vid = -1};
        if (!c->res.i) return fail(p, RS_ERR_NOMEM, "out of memory");
        for (int k = 0, at = 0; k < c->nin; k++) {
            memcpy(c->res.i + at, c->in[k]->i, sizeof(int64_t) * (size_t)c->in[k]->shape.d[0]);
            at += (int)c->in[k]->shape.d[0];
        }
        p->budget -= n;
        return RS_OK;
    }
    rs_onnx_attrs a = {.axis = axis};
    return emit(c, RS_ONNX_OP_CONCAT, &a, c->in, c->nin);
}

static rs_status h_cast(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    int64_t to;
    if ((st = attr_int(c->p, "to", DT_FLOAT, &to))) return st;
    ival *x = c->in[0];
    bool to_f = to == DT_FLOAT || to == DT_DOUBLE;
    bool to_i = to == DT_INT64 || to == DT_INT32 || to == DT_INT16 || to == DT_INT8 || to == DT_UINT8 || to == DT_BOOL;
    if (!to_f && !to_i) return fail(c->p, RS_ERR_UNSUPPORTED, "cast to %s", dtype_name((int)to));
    if (x->kind == IV_DYN) {
        if (!to_f) return fail(c->p, RS_ERR_UNSUPPORTED, "cast of computed values to %s", dtype_name((int)to));
        return reshape_to(c, x, &x->shape);
    }
    size_t n = (size_t)rs_onnx_shape_numel(&x->shape, 1);
    if ((x->kind == IV_F) == to_f) return reshape_to(c, x, &x->shape);
    c->res = (ival){.kind = to_f ? IV_F : IV_I, .shape = x->shape, .vid = -1};
    if (to_f) c->res.f = malloc(sizeof(float) * (n ? n : 1));
    else c->res.i = malloc(sizeof(int64_t) * (n ? n : 1));
    if (!c->res.f && !c->res.i) return fail(c->p, RS_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        if (to_f) {
            if (x->i[k] == RS_ONNX_BATCH) return fail(c->p, RS_ERR_UNSUPPORTED, "the batch size as data");
            c->res.f[k] = (float)x->i[k];
        } else {
            float v = x->f[k];
            c->res.i[k] = isfinite(v) && fabsf(v) < 9e18f ? (to == DT_BOOL ? v != 0.0f : (int64_t)v) : 0;
        }
    }
    return RS_OK;
}

/* Slice on 1-d constants (shape tensors), step 1 or more */
static rs_status h_slice(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 1, 5);
    if (st) return st;
    ival *x = c->in[0];
    if (!is_const(x) || x->shape.rank != 1) return fail(p, RS_ERR_UNSUPPORTED, "Slice of computed or multi-dimensional values");
    int64_t s[1], e[1], stp = 1;
    int ns, ne;
    if (p->opset < 10) {
        if ((st = attr_ints(p, "starts", s, 1, &ns)) || (st = attr_ints(p, "ends", e, 1, &ne))) return st;
    } else {
        if (c->nin < 3) return fail(p, RS_ERR_FORMAT, "needs starts and ends");
        if ((st = const_ints(c, c->in[1], "starts", s, 1, &ns, false)) ||
            (st = const_ints(c, c->in[2], "ends", e, 1, &ne, false)))
            return st;
        if (c->nin > 4 && c->in[4]) {
            int64_t sv[1];
            int n4;
            if ((st = const_ints(c, c->in[4], "steps", sv, 1, &n4, false))) return st;
            if (n4 == 1) stp = sv[0];
        }
    }
    if (ns != 1 || ne != 1 || stp < 1) return fail(p, RS_ERR_UNSUPPORTED, "Slice other than one axis with a positive step");
    int64_t d = x->shape.d[0], a = s[0] < 0 ? s[0] + d : s[0], b = e[0] < 0 ? e[0] + d : e[0];
    a = a < 0 ? 0 : a > d ? d : a;
    b = b < a ? a : b > d ? d : b;
    int64_t n = (b - a + stp - 1) / stp;
    c->res = (ival){.kind = x->kind, .shape = {1, {n}}, .vid = -1};
    if (x->kind == IV_F) c->res.f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    else c->res.i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!c->res.f && !c->res.i) return fail(p, RS_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; k < n; k++) {
        if (x->kind == IV_F) c->res.f[k] = x->f[a + k * stp];
        else c->res.i[k] = x->i[a + k * stp];
    }
    return RS_OK;
}

static rs_status h_constant_of_shape(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    int64_t d[RS_ONNX_MAX_RANK];
    int nd;
    if ((st = const_ints(c, c->in[0], "the shape", d, RS_ONNX_MAX_RANK, &nd, false))) return st;
    rs_onnx_shape s;
    if ((st = check_dims(p, "the shape", (size_t)nd, d, &s))) return st;
    int64_t n = rs_onnx_shape_numel(&s, 1);
    if (n > p->budget) return fail(p, RS_ERR_UNSUPPORTED, "result too large");
    ival v = {.kind = IV_F, .shape = {0, {0}}};
    float fill = 0.0f;
    const Onnx__AttributeProto *a = attr(c->np, "value");
    if (a) {
        if ((int)a->type != AT_TENSOR || !a->t) return fail(p, RS_ERR_FORMAT, "attribute 'value' should be a tensor");
        if ((st = tensor_to_ival(p, a->t, "its value", &v))) return st;
        if (rs_onnx_shape_numel(&v.shape, 1) != 1) {
            ival_clear(&v);
            return fail(p, RS_ERR_FORMAT, "value must hold one element");
        }
    }
    c->res = (ival){.kind = a ? v.kind : IV_F, .shape = s, .vid = -1};
    if (c->res.kind == IV_F) {
        fill = a ? v.f[0] : 0.0f;
        c->res.f = malloc(sizeof(float) * (size_t)(n ? n : 1));
        for (int64_t k = 0; c->res.f && k < n; k++) c->res.f[k] = fill;
    } else {
        c->res.i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        for (int64_t k = 0; c->res.i && k < n; k++) c->res.i[k] = v.i[0];
    }
    ival_clear(&v);
    if (!c->res.f && !c->res.i) return fail(p, RS_ERR_NOMEM, "out of memory");
    p->budget -= n;
    return RS_OK;
}

static rs_status h_unary(nctx *c)
{
    static const struct { const char *name; rs_onnx_unary u; } map[] = {
        {"Relu", RS_ONNX_RELU}, {"Tanh", RS_ONNX_TANH}, {"Sigmoid", RS_ONNX_SIGMOID}, {"Erf", RS_ONNX_ERF},
        {"Gelu", RS_ONNX_GELU}, {"Sqrt", RS_ONNX_SQRT}, {"Exp", RS_ONNX_EXP}, {"Log", RS_ONNX_LOG},
        {"Neg", RS_ONNX_NEG}, {"Abs", RS_ONNX_ABS}, {"Reciprocal", RS_ONNX_RECIPROCAL},
        {"LeakyRelu", RS_ONNX_LEAKYRELU}, {"Clip", RS_ONNX_CLIP},
    };
    imp *p = c->p;
    rs_status st = need_inputs(c, 1, 3);
    if (st) return st;
    rs_onnx_attrs a = {0};
    for (size_t k = 0; k < sizeof map / sizeof *map; k++)
        if (!strcmp(map[k].name, c->np->op_type)) a.sub = map[k].u;
    if (a.sub == RS_ONNX_GELU && !strcmp(attr_str(p, "approximate", "none"), "tanh")) a.sub = RS_ONNX_GELU_TANH;
    if (a.sub == RS_ONNX_LEAKYRELU && (st = attr_float(p, "alpha", 0.01f, &a.alpha))) return st;
    if (a.sub == RS_ONNX_CLIP) {
        a.alpha = -FLT_MAX;
        a.beta = FLT_MAX;
        if (p->opset < 11) {
            if ((st = attr_float(p, "min", -FLT_MAX, &a.alpha)) || (st = attr_float(p, "max", FLT_MAX, &a.beta))) return st;
        } else {
            for (int k = 1; k < c->nin; k++) {
                ival *v = c->in[k];
                if (!v) continue;
                if (v->kind != IV_F || rs_onnx_shape_numel(&v->shape, 1) != 1)
                    return fail(p, RS_ERR_UNSUPPORTED, "Clip bounds must be float scalar constants");
                if (k == 1) a.alpha = v->f[0];
                else a.beta = v->f[0];
            }
        }
    }
    return emit(c, RS_ONNX_OP_UNARY, &a, c->in, 1);
}

static rs_status h_binary(nctx *c)
{
    static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Pow"};
    rs_status st = need_inputs(c, 2, 2);
    if (st) return st;
    rs_onnx_attrs a = {0};
    for (int k = 0; k < 5; k++)
        if (!strcmp(names[k], c->np->op_type)) a.sub = k;
    ival *x = c->in[0], *y = c->in[1];
    if (x->kind == IV_I && y->kind == IV_I && a.sub != RS_ONNX_POW) {
        /* integer shape arithmetic (never on the batch) */
        int64_t nx = rs_onnx_shape_numel(&x->shape, 1), ny = rs_onnx_shape_numel(&y->shape, 1);
        if (x->shape.rank > 1 || y->shape.rank > 1 || (nx != ny && nx != 1 && ny != 1))
            return fail(c->p, RS_ERR_UNSUPPORTED, "integer arithmetic beyond 1-d lists");
        int64_t n = nx > ny ? nx : ny;
        c->res = (ival){.kind = IV_I, .shape = {nx == 1 && ny == 1 ? (x->shape.rank > y->shape.rank ? x->shape.rank : y->shape.rank) : 1, {n}},
                        .i = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), .vid = -1};
        if (!c->res.i) return fail(c->p, RS_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < n; k++) {
            int64_t u = x->i[nx == 1 ? 0 : k], v = y->i[ny == 1 ? 0 : k];
            if (u == RS_ONNX_BATCH || v == RS_ONNX_BATCH)
                return fail(c->p, RS_ERR_UNSUPPORTED, "arithmetic on the batch size");
            if (llabs(u) > (1LL << 31) || llabs(v) > (1LL << 31)) return fail(c->p, RS_ERR_UNSUPPORTED, "integer too large");
            if (a.sub == RS_ONNX_DIV && v == 0) return fail(c->p, RS_ERR_FORMAT, "integer division by zero");
            c->res.i[k] = a.sub == RS_ONNX_ADD ? u + v : a.sub == RS_ONNX_SUB ? u - v : a.sub == RS_ONNX_MUL ? u * v : u / v;
        }
        return RS_OK;
    }
    return emit(c, RS_ONNX_OP_BINARY, &a, c->in, 2);
}

static rs_status h_matmul(nctx *c)
{
    rs_status st = need_inputs(c, 2, 2);
    if (st) return st;
    rs_onnx_attrs a = {0};
    return emit(c, RS_ONNX_OP_MATMUL, &a, c->in, 2);
}

static rs_status h_gemm(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 2, 3);
    if (st) return st;
    int64_t ta, tb;
    rs_onnx_attrs a = {0};
    if ((st = attr_int(p, "transA", 0, &ta)) || (st = attr_int(p, "transB", 0, &tb)) ||
        (st = attr_float(p, "alpha", 1.0f, &a.alpha)) || (st = attr_float(p, "beta", 1.0f, &a.beta)))
        return st;
    a.ta = ta != 0;
    a.tb = tb != 0;
    return emit(c, RS_ONNX_OP_GEMM, &a, c->in, c->nin > 2 && c->in[2] ? 3 : 2);
}

/* kernel_shape, strides, pads, dilations, auto_pad, ceil_mode for Conv and the pools */
static rs_status window_attrs(nctx *c, rs_onnx_attrs *a, bool conv)
{
    imp *p = c->p;
    const rs_onnx_shape *x = &c->in[0]->shape;
    if (x->rank != 3 && x->rank != 4)
        return fail(p, RS_ERR_UNSUPPORTED, "only 1-d and 2-d windows (input rank 3 or 4)");
    int sp = x->rank - 2;
    int64_t ks[2] = {1, 1}, st2[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, dil[2] = {1, 1}, v;
    int nk, ns, np, nd;
    rs_status st;
    if ((st = attr_ints(p, "kernel_shape", ks, 2, &nk)) || (st = attr_ints(p, "strides", st2, 2, &ns)) ||
        (st = attr_ints(p, "pads", pads, 4, &np)) || (st = attr_ints(p, "dilations", dil, 2, &nd)))
        return st;
    if (nk < 0) {
        if (!conv) return fail(p, RS_ERR_FORMAT, "needs kernel_shape");
        const rs_onnx_shape *w = &c->in[1]->shape;
        if (w->rank != x->rank) return fail(p, RS_ERR_SHAPE, "weight rank %d does not match input rank %d", w->rank, x->rank);
        for (int k = 0; k < sp; k++) ks[k] = w->d[2 + k];
        nk = sp;
    }
    if (nk != sp || (ns >= 0 && ns != sp) || (np >= 0 && np != 2 * sp) || (nd >= 0 && nd != sp))
        return fail(p, RS_ERR_FORMAT, "window attributes do not match %d spatial dims", sp);
    if (ns < 0) st2[0] = st2[1] = 1;
    for (int k = 0; k < sp; k++) {
        if (ks[k] < 1 || ks[k] > 4096 || st2[k] < 1 || st2[k] > 4096)
            return fail(p, RS_ERR_FORMAT, "kernel %lld / stride %lld out of range", (long long)ks[k], (long long)st2[k]);
        if (dil[k] != 1) return fail(p, RS_ERR_UNSUPPORTED, "dilations other than 1");
    }
    for (int k = 0; k < 2 * sp; k++)
        if (pads[k] < 0 || pads[k] > 4096) return fail(p, RS_ERR_FORMAT, "pad %lld out of range", (long long)pads[k]);
    const char *ap = attr_str(p, "auto_pad", "NOTSET");
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int k = 0; k < sp; k++) {
            int64_t in = x->d[2 + k];
            if (in < 0) return fail(p, RS_ERR_UNSUPPORTED, "auto_pad over the batch");
            int64_t out = (in + st2[k] - 1) / st2[k], tot = (out - 1) * st2[k] + ks[k] - in;
            if (tot < 0) tot = 0;
            int64_t small = tot / 2, big = tot - small;
            pads[k] = !strcmp(ap, "SAME_UPPER") ? small : big;
            pads[k + sp] = tot - pads[k];
        }
    } else if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) {
        return fail(p, RS_ERR_FORMAT, "auto_pad '%s'", ap);
    } else if (!strcmp(ap, "VALID")) {
        memset(pads, 0, sizeof pads);
    }
    if (sp == 2) {
        a->kh = (int)ks[0]; a->kw = (int)ks[1]; a->sh = (int)st2[0]; a->sw = (int)st2[1];
        a->pt = (int)pads[0]; a->pl = (int)pads[1]; a->pb = (int)pads[2]; a->pr = (int)pads[3];
    } else {
        a->kh = 1; a->sh = 1; a->kw = (int)ks[0]; a->sw = (int)st2[0];
        a->pl = (int)pads[0]; a->pr = (int)pads[1];
    }
    if ((st = attr_int(p, "ceil_mode", 0, &v))) return st;
    a->ceil_mode = v != 0;
    if ((st = attr_int(p, "count_include_pad", 0, &v))) return st;
    a->count_include_pad = v != 0;
    if ((st = attr_int(p, "group", 1, &v))) return st;
    if (v < 1 || v > 1 << 20) return fail(p, RS_ERR_FORMAT, "group %lld", (long long)v);
    a->group = (int)v;
    return RS_OK;
}

static rs_status h_conv(nctx *c)
{
    rs_status st = need_inputs(c, 2, 3);
    if (st) return st;
    rs_onnx_attrs a = {0};
    if ((st = window_attrs(c, &a, true))) return st;
    return emit(c, RS_ONNX_OP_CONV, &a, c->in, c->nin > 2 && c->in[2] ? 3 : 2);
}

static rs_status h_pool(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    rs_onnx_attrs a = {0};
    if ((st = window_attrs(c, &a, false))) return st;
    if (c->np->n_output > 1 && c->np->output[1] && *c->np->output[1] && !strcmp(c->np->op_type, "MaxPool"))
        return fail(c->p, RS_ERR_UNSUPPORTED, "MaxPool's Indices output");
    return emit(c, !strcmp(c->np->op_type, "MaxPool") ? RS_ONNX_OP_MAXPOOL : RS_ONNX_OP_AVGPOOL, &a, c->in, 1);
}

static rs_status h_gap(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    rs_onnx_attrs a = {0};
    return emit(c, RS_ONNX_OP_GLOBALAVGPOOL, &a, c->in, 1);
}

static rs_status h_softmax(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    rs_onnx_attrs a = {.legacy_softmax = c->p->opset < 13};
    int64_t ax;
    if ((st = attr_int(c->p, "axis", a.legacy_softmax ? 1 : -1, &ax)) ||
        (st = norm_axis(c->p, ax, c->in[0]->shape.rank, &a.axis)))
        return st;
    if (a.legacy_softmax)
        for (int k = a.axis; k < c->in[0]->shape.rank; k++)
            if (c->in[0]->shape.d[k] == RS_ONNX_BATCH) return fail(c->p, RS_ERR_UNSUPPORTED, "softmax over the batch");
    if (!a.legacy_softmax && c->in[0]->shape.d[a.axis] == RS_ONNX_BATCH)
        return fail(c->p, RS_ERR_UNSUPPORTED, "softmax over the batch");
    return emit(c, strcmp(c->np->op_type, "Softmax") ? RS_ONNX_OP_LOGSOFTMAX : RS_ONNX_OP_SOFTMAX, &a, c->in, 1);
}

static rs_status h_layernorm(nctx *c)
{
    rs_status st = need_inputs(c, 2, 3);
    if (st) return st;
    for (size_t k = 1; k < c->np->n_output; k++)
        if (c->np->output[k] && *c->np->output[k]) return fail(c->p, RS_ERR_UNSUPPORTED, "the Mean/InvStdDev outputs");
    rs_onnx_attrs a = {0};
    int64_t ax;
    if ((st = attr_int(c->p, "axis", -1, &ax)) || (st = attr_float(c->p, "epsilon", 1e-5f, &a.eps)) ||
        (st = norm_axis(c->p, ax, c->in[0]->shape.rank, &a.axis)))
        return st;
    if (!(a.eps >= 0.0f)) return fail(c->p, RS_ERR_FORMAT, "epsilon must be >= 0");
    return emit(c, RS_ONNX_OP_LAYERNORM, &a, c->in, c->nin > 2 && c->in[2] ? 3 : 2);
}

static rs_status h_batchnorm(nctx *c)
{
    rs_status st = need_inputs(c, 5, 5);
    if (st) return st;
    int64_t tm;
    rs_onnx_attrs a = {0};
    if ((st = attr_int(c->p, "training_mode", 0, &tm)) || (st = attr_float(c->p, "epsilon", 1e-5f, &a.eps))) return st;
    if (tm) return fail(c->p, RS_ERR_UNSUPPORTED, "training_mode=1 (inference only)");
    for (size_t k = 1; k < c->np->n_output; k++)
        if (c->np->output[k] && *c->np->output[k]) return fail(c->p, RS_ERR_UNSUPPORTED, "running statistics outputs");
    if (!(a.eps >= 0.0f)) return fail(c->p, RS_ERR_FORMAT, "epsilon must be >= 0");
    /* five inputs do not fit a node: fold scale/sqrt(var+eps) and bias - mean*k into two constants */
    for (int k = 1; k < 5; k++)
        if (c->in[k]->kind != IV_F) return fail(c->p, RS_ERR_UNSUPPORTED, "parameters must be float constants");
    const rs_onnx_shape *x = &c->in[0]->shape;
    if (x->rank < 2 || x->d[1] < 0) return fail(c->p, RS_ERR_SHAPE, "input needs channels in dim 1");
    int64_t C = x->d[1];
    for (int k = 1; k < 5; k++)
        if (c->in[k]->shape.rank != 1 || c->in[k]->shape.d[0] != C) {
            char b[96];
            return fail(c->p, RS_ERR_SHAPE, "parameter %d has shape %s, expected (%lld)", k,
                        rs_onnx_shape_str(&c->in[k]->shape, b, sizeof b), (long long)C);
        }
    rs_onnx_shape ps = {x->rank - 1, {C}};
    for (int k = 1; k < ps.rank; k++) ps.d[k] = 1;
    ival mul = {.kind = IV_F, .shape = ps, .f = malloc(sizeof(float) * (size_t)(C ? C : 1)), .vid = -1};
    ival add = {.kind = IV_F, .shape = ps, .f = malloc(sizeof(float) * (size_t)(C ? C : 1)), .vid = -1};
    if (!mul.f || !add.f) {
        ival_clear(&mul);
        ival_clear(&add);
        return fail(c->p, RS_ERR_NOMEM, "out of memory");
    }
    for (int64_t k = 0; k < C; k++) {
        float s = c->in[1]->f[k] / sqrtf(c->in[4]->f[k] + a.eps);
        mul.f[k] = s;
        add.f[k] = c->in[2]->f[k] - c->in[3]->f[k] * s;
    }
    /* x * mul + add as two broadcast nodes (the second named after the BatchNormalization's output) */
    rs_onnx_attrs am = {.sub = RS_ONNX_MUL}, aa = {.sub = RS_ONNX_ADD};
    ival *ins[2] = {c->in[0], &mul};
    const char *saved = c->in_names[1];
    c->in_names[1] = "bn_scale";
    st = emit(c, RS_ONNX_OP_BINARY, &am, ins, 2);
    if (!st) {
        ival mid = c->res;
        c->res = (ival){.vid = -1}; /* mid is ours now: the caller must not free it twice */
        ins[0] = &mid;
        ins[1] = &add;
        c->in_names[1] = "bn_shift";
        st = emit(c, RS_ONNX_OP_BINARY, &aa, ins, 2);
        ival_clear(&mid);
    }
    c->in_names[1] = saved;
    ival_clear(&mul);
    ival_clear(&add);
    return st;
}

static rs_status h_transpose(nctx *c)
{
    rs_status st = need_inputs(c, 1, 1);
    if (st) return st;
    int r = c->in[0]->shape.rank, np;
    int64_t perm[RS_ONNX_MAX_RANK];
    if ((st = attr_ints(c->p, "perm", perm, RS_ONNX_MAX_RANK, &np))) return st;
    rs_onnx_attrs a = {0};
    if (np < 0) {
        for (int k = 0; k < r; k++) a.perm[k] = r - 1 - k;
    } else {
        if (np != r) return fail(c->p, RS_ERR_FORMAT, "perm has %d entries for rank %d", np, r);
        unsigned seen = 0;
        for (int k = 0; k < r; k++) {
            if (perm[k] < 0 || perm[k] >= r || (seen >> perm[k] & 1)) return fail(c->p, RS_ERR_FORMAT, "perm is not a permutation");
            seen |= 1u << perm[k];
            a.perm[k] = (int)perm[k];
        }
    }
    return emit(c, RS_ONNX_OP_TRANSPOSE, &a, c->in, 1);
}

static rs_status h_reduce(nctx *c)
{
    imp *p = c->p;
    rs_status st = need_inputs(c, 1, 2);
    if (st) return st;
    int64_t axes[RS_ONNX_MAX_RANK], kd, noop;
    int na;
    if ((st = get_axes(c, axes, &na)) || (st = attr_int(p, "keepdims", 1, &kd)) ||
        (st = attr_int(p, "noop_with_empty_axes", 0, &noop)))
        return st;
    rs_onnx_attrs a = {.keepdims = kd != 0};
    int r = c->in[0]->shape.rank;
    if (na <= 0) {
        if (noop) return reshape_to(c, c->in[0], &c->in[0]->shape);
        a.axes_mask = (1u << r) - 1;
    }
    for (int k = 0; k < na; k++) {
        int ax = 0;
        if ((st = norm_axis(p, axes[k], r, &ax))) return st;
        a.axes_mask |= 1u << ax;
    }
    return emit(c, strcmp(c->np->op_type, "ReduceMean") ? RS_ONNX_OP_REDUCESUM : RS_ONNX_OP_REDUCEMEAN, &a, c->in, 1);
}

static const struct { const char *name; handler fn; } handlers[] = {
    {"Abs", h_unary}, {"Add", h_binary}, {"AveragePool", h_pool}, {"BatchNormalization", h_batchnorm},
    {"Cast", h_cast}, {"Clip", h_unary}, {"Concat", h_concat}, {"Constant", h_constant},
    {"ConstantOfShape", h_constant_of_shape}, {"Conv", h_conv}, {"Div", h_binary}, {"Dropout", h_identity},
    {"Erf", h_unary}, {"Exp", h_unary}, {"Flatten", h_flatten}, {"Gather", h_gather}, {"Gelu", h_unary},
    {"Gemm", h_gemm}, {"GlobalAveragePool", h_gap}, {"Identity", h_identity},
    {"LayerNormalization", h_layernorm}, {"LeakyRelu", h_unary}, {"Log", h_unary}, {"LogSoftmax", h_softmax},
    {"MatMul", h_matmul}, {"MaxPool", h_pool}, {"Mul", h_binary}, {"Neg", h_unary}, {"Pow", h_binary},
    {"Reciprocal", h_unary}, {"ReduceMean", h_reduce}, {"ReduceSum", h_reduce}, {"Relu", h_unary},
    {"Reshape", h_reshape}, {"Shape", h_shape}, {"Sigmoid", h_unary}, {"Slice", h_slice},
    {"Softmax", h_softmax}, {"Sqrt", h_unary}, {"Squeeze", h_squeeze}, {"Sub", h_binary}, {"Tanh", h_unary},
    {"Transpose", h_transpose}, {"Unsqueeze", h_unsqueeze},
};
#define NHANDLERS (sizeof handlers / sizeof *handlers)

const char *rs_onnx_supported_ops(void)
{
    static char list[1024];
    if (!list[0]) {
        size_t k = 0;
        for (size_t i = 0; i < NHANDLERS && k < sizeof list; i++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", handlers[i].name);
    }
    return list;
}

/* ---- the whole model ---- */

/* Kahn's algorithm over node indices; a node left over sits on a cycle. */
static rs_status topo_order(imp *p, const Onnx__GraphProto *gp, int *order)
{
    size_t n = gp->n_node;
    int *indeg = calloc(n ? n : 1, sizeof(int)), *queue = malloc(sizeof(int) * (n ? n : 1));
    int *prod_of = NULL;
    /* producer of each name: reuse the hash table slots (vid field of a scratch table) */
    size_t cap = p->ht_cap;
    prod_of = malloc(sizeof(int) * cap);
    int *edges_start = calloc(n + 1, sizeof(int)), *edges = NULL;
    rs_status st = RS_OK;
    if (!indeg || !queue || !prod_of || !edges_start) {
        st = fail(p, RS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < cap; i++) prod_of[i] = -1;
    size_t mask = cap - 1;
    for (size_t k = 0; k < n; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        for (size_t o = 0; o < np->n_output; o++) {
            const char *nm = np->output[o];
            if (!nm || !*nm) continue;
            size_t i = hash(nm) & mask;
            while (p->keys[i] && strcmp(p->keys[i], nm)) i = (i + 1) & mask;
            if (!p->keys[i]) continue;
            if (prod_of[i] >= 0 || p->vals[i].kind != IV_NONE) {
                p->node = np, p->node_index = (int)k;
                st = fail(p, RS_ERR_FORMAT, "value '%s' is defined twice", nm);
                goto done;
            }
            prod_of[i] = (int)k;
        }
    }
    /* edges: producer -> consumer, counted then filled */
    size_t ne = 0;
    for (size_t k = 0; k < n; k++) ne += gp->node[k]->n_input;
    edges = malloc(sizeof(int) * (ne ? ne : 1));
    int *fill = calloc(n + 1, sizeof(int));
    if (!edges || !fill) {
        free(fill);
        st = fail(p, RS_ERR_NOMEM, "out of memory");
        goto done;
    }
    int *src = malloc(sizeof(int) * (ne ? ne : 1)), *dst = malloc(sizeof(int) * (ne ? ne : 1));
    size_t m = 0;
    if (!src || !dst) {
        free(fill), free(src), free(dst);
        st = fail(p, RS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < n; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        for (size_t j = 0; j < np->n_input; j++) {
            const char *nm = np->input[j];
            if (!nm || !*nm) continue;
            size_t i = hash(nm) & mask;
            while (p->keys[i] && strcmp(p->keys[i], nm)) i = (i + 1) & mask;
            if (!p->keys[i] || (prod_of[i] < 0 && p->vals[i].kind == IV_NONE)) {
                p->node = np, p->node_index = (int)k;
                free(fill), free(src), free(dst);
                st = fail(p, RS_ERR_FORMAT, "input '%s' is not defined (no initializer, graph input or node output)", nm);
                goto done;
            }
            if (prod_of[i] < 0) continue;
            src[m] = prod_of[i];
            dst[m++] = (int)k;
            indeg[k]++;
            edges_start[prod_of[i] + 1]++;
        }
    }
    for (size_t k = 0; k < n; k++) edges_start[k + 1] += edges_start[k];
    for (size_t e = 0; e < m; e++) edges[edges_start[src[e]] + fill[src[e]]++] = dst[e];
    free(fill), free(src), free(dst);
    size_t head = 0, tail = 0, done_n = 0;
    for (size_t k = 0; k < n; k++)
        if (!indeg[k]) queue[tail++] = (int)k;
    while (head < tail) {
        int k = queue[head++];
        order[done_n++] = k;
        for (int e = edges_start[k]; e < edges_start[k + 1]; e++)
            if (--indeg[edges[e]] == 0) queue[tail++] = edges[e];
    }
    if (done_n < n) {
        for (size_t k = 0; k < n; k++)
            if (indeg[k]) {
                p->node = NULL;
                st = fail(p, RS_ERR_FORMAT, "cyclic graph: node '%s' (%s) depends on its own output", str_or(gp->node[k]->name, "?"),
                          str_or(gp->node[k]->op_type, "?"));
                break;
            }
    }
done:
    free(indeg), free(queue), free(prod_of), free(edges_start), free(edges);
    return st;
}

static rs_status graph_input(imp *p, const Onnx__ValueInfoProto *vi, rs_onnx_shape *s, int64_t *fixed)
{
    const char *nm = str_or(vi->name, "?");
    const Onnx__TypeProto *t = vi->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
        return fail(p, RS_ERR_UNSUPPORTED, "input '%s' is not a tensor", nm);
    const Onnx__TypeProto__Tensor *tt = t->tensor_type;
    if (tt->elem_type != DT_FLOAT)
        return fail(p, RS_ERR_UNSUPPORTED, "input '%s' has element type %s; only float inputs are supported", nm,
                    dtype_name(tt->elem_type));
    if (!tt->shape || tt->shape->n_dim < 1)
        return fail(p, RS_ERR_UNSUPPORTED, "input '%s' has no shape; a (batch, ...) shape is needed", nm);
    const Onnx__TensorShapeProto *sh = tt->shape;
    if (sh->n_dim > RS_ONNX_MAX_RANK) return fail(p, RS_ERR_UNSUPPORTED, "input '%s' has rank %zu", nm, sh->n_dim);
    s->rank = (int)sh->n_dim;
    *fixed = 0;
    for (size_t k = 0; k < sh->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
        bool val = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (k == 0) {
            if (val && d->dim_value >= 1 && d->dim_value <= 1 << 20) *fixed = d->dim_value;
            else if (val) return fail(p, RS_ERR_FORMAT, "input '%s' has batch size %lld", nm, (long long)d->dim_value);
            s->d[0] = val ? d->dim_value : RS_ONNX_BATCH;
            continue;
        }
        if (!val || d->dim_value < 1)
            return fail(p, RS_ERR_UNSUPPORTED, "input '%s': dimension %zu must be a fixed size >= 1 (only the batch, "
                        "dimension 0, may be symbolic)", nm, k);
        s->d[k] = d->dim_value;
    }
    if (rs_onnx_shape_numel(s, 1) < 0) return fail(p, RS_ERR_FORMAT, "input '%s' is larger than 2^31 elements", nm);
    return RS_OK;
}

/* Drops nodes and values the output does not need, renumbering what stays. */
static rs_status prune(imp *p)
{
    rs_onnx_graph *g = p->g;
    bool *need = calloc((size_t)g->nvalues + 1, 1);
    int *map = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    if (!need || !map) {
        free(need), free(map);
        return fail(p, RS_ERR_NOMEM, "out of memory");
    }
    need[g->output] = need[g->input] = true;
    for (int k = g->nnodes - 1; k >= 0; k--) {
        const rs_onnx_node *n = &g->nodes[k];
        if (!need[n->out]) continue;
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] >= 0) need[n->in[j]] = true;
    }
    int nv = 0;
    for (int i = 0; i < g->nvalues; i++) {
        if (need[i]) {
            map[i] = nv;
            g->values[nv++] = g->values[i];
        } else {
            free(g->values[i].name);
            free(g->values[i].data);
            map[i] = -1;
        }
    }
    int nn = 0;
    for (int k = 0; k < g->nnodes; k++) {
        rs_onnx_node n = g->nodes[k];
        if (map[n.out] < 0) {
            free(n.name);
            free(n.op_type);
            continue;
        }
        n.out = map[n.out];
        for (int j = 0; j < n.nin; j++)
            if (n.in[j] >= 0) n.in[j] = map[n.in[j]];
        g->values[n.out].producer = nn;
        g->nodes[nn++] = n;
    }
    g->nvalues = nv;
    g->nnodes = nn;
    g->input = map[g->input];
    g->output = map[g->output];
    free(need);
    free(map);
    return RS_OK;
}

static rs_status import_model(imp *p, const Onnx__ModelProto *m)
{
    const Onnx__GraphProto *gp = m->graph;
    if (!gp) return fail(p, RS_ERR_FORMAT, "the model has no graph");
    p->opset = 0;
    for (size_t k = 0; k < m->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[k];
        if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) p->opset = o->version;
    }
    if (p->opset < 1) return fail(p, RS_ERR_FORMAT, "no opset_import for the default domain");
    if (gp->n_node > MAX_NODES) return fail(p, RS_ERR_UNSUPPORTED, "%zu nodes (at most %d)", gp->n_node, MAX_NODES);
    size_t names = gp->n_initializer + gp->n_input + 1;
    for (size_t k = 0; k < gp->n_node; k++) names += gp->node[k]->n_output + gp->node[k]->n_input;
    p->ht_cap = 16;
    while (p->ht_cap < 2 * names) p->ht_cap *= 2;
    p->keys = calloc(p->ht_cap, sizeof(char *));
    p->vals = calloc(p->ht_cap, sizeof(ival));
    rs_onnx_graph *g = p->g = calloc(1, sizeof *g);
    if (!p->keys || !p->vals || !g) return fail(p, RS_ERR_NOMEM, "out of memory");
    g->opset = p->opset;
    g->name = strdup(str_or(gp->name, "graph"));
    char prod[160];
    snprintf(prod, sizeof prod, "%.60s%s%.60s", str_or(m->producer_name, "unknown producer"),
             m->producer_version && *m->producer_version ? " " : "", str_or(m->producer_version, ""));
    g->producer = strdup(prod);
    if (!g->name || !g->producer) return fail(p, RS_ERR_NOMEM, "out of memory");
    rs_status st;
    char what[160];
    for (size_t k = 0; k < gp->n_initializer; k++) {
        const Onnx__TensorProto *t = gp->initializer[k];
        const char *nm = str_or(t->name, "");
        if (!*nm) return fail(p, RS_ERR_FORMAT, "initializer %zu has no name", k);
        ival *v = lookup(p, nm, true);
        if (!v) return fail(p, RS_ERR_NOMEM, "out of memory");
        if (v->kind != IV_NONE) return fail(p, RS_ERR_FORMAT, "initializer '%s' appears twice", nm);
        snprintf(what, sizeof what, "initializer '%.100s'", nm);
        if ((st = tensor_to_ival(p, t, what, v))) return st;
    }
    const Onnx__ValueInfoProto *in = NULL;
    int nin = 0;
    for (size_t k = 0; k < gp->n_input; k++) {
        const Onnx__ValueInfoProto *vi = gp->input[k];
        ival *v = lookup(p, str_or(vi->name, ""), false);
        if (v && v->kind != IV_NONE) continue; /* IR < 4 lists initializers as inputs too */
        in = vi;
        nin++;
    }
    if (nin != 1)
        return fail(p, RS_ERR_UNSUPPORTED, "the graph has %d inputs; models with exactly one input are supported", nin);
    rs_onnx_shape is;
    if ((st = graph_input(p, in, &is, &g->fixed_batch))) return st;
    ival *iv = lookup(p, str_or(in->name, ""), true);
    if (!iv) return fail(p, RS_ERR_NOMEM, "out of memory");
    g->input = add_value(p, in->name, &is, NULL);
    if (g->input < 0) return fail(p, RS_ERR_NOMEM, "out of memory");
    *iv = (ival){.kind = IV_DYN, .shape = is, .vid = g->input};
    if (gp->n_output < 1 || !gp->output[0]->name) return fail(p, RS_ERR_FORMAT, "the graph has no output");
    /* every name a node mentions gets a slot, so topo_order can find producers by name */
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        for (size_t o = 0; o < np->n_output; o++)
            if (np->output[o] && *np->output[o] && !lookup(p, np->output[o], true)) return fail(p, RS_ERR_NOMEM, "out of memory");
    }
    int *order = malloc(sizeof(int) * (gp->n_node ? gp->n_node : 1));
    if (!order) return fail(p, RS_ERR_NOMEM, "out of memory");
    if ((st = topo_order(p, gp, order))) {
        free(order);
        return st;
    }
    for (size_t q = 0; q < gp->n_node && !st; q++) {
        int k = order[q];
        const Onnx__NodeProto *np = gp->node[k];
        p->node = np;
        p->node_index = k;
        if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx")) {
            st = fail(p, RS_ERR_UNSUPPORTED, "operator domain '%s' (only the default ONNX domain)", np->domain);
            break;
        }
        handler fn = NULL;
        for (size_t h = 0; h < NHANDLERS; h++)
            if (np->op_type && !strcmp(handlers[h].name, np->op_type)) fn = handlers[h].fn;
        if (!fn) {
            p->node = NULL;
            st = fail(p, RS_ERR_UNSUPPORTED, "unsupported operator '%s' (node '%s', opset %lld); supported: %s",
                      str_or(np->op_type, "?"), str_or(np->name, "?"), (long long)p->opset, rs_onnx_supported_ops());
            break;
        }
        nctx c = {.p = p, .np = np, .index = k, .nin = (int)np->n_input};
        if (np->n_input > 8) {
            st = fail(p, RS_ERR_UNSUPPORTED, "%zu inputs", np->n_input);
            break;
        }
        for (int j = 0; j < c.nin && !st; j++) {
            c.in_names[j] = np->input[j];
            if (!np->input[j] || !*np->input[j]) continue;
            c.in[j] = lookup(p, np->input[j], false);
            if (!c.in[j] || c.in[j]->kind == IV_NONE)
                st = fail(p, RS_ERR_UNSUPPORTED, "input '%s' comes from an output this importer does not produce "
                          "(only the first output of a node is supported)", np->input[j]);
        }
        if (st) break;
        if (np->n_output < 1 || !np->output[0] || !*np->output[0]) continue; /* nothing to produce */
        c.res.vid = -1;
        if ((st = fn(&c))) {
            ival_clear(&c.res);
            break;
        }
        ival *out = lookup(p, np->output[0], false);
        if (!out) {
            ival_clear(&c.res);
            st = fail(p, RS_ERR_INTERNAL, "output slot missing");
            break;
        }
        *out = c.res;
    }
    free(order);
    p->node = NULL;
    if (st) return st;
    const char *oname = gp->output[0]->name;
    ival *ov = lookup(p, oname, false);
    if (!ov || ov->kind == IV_NONE) return fail(p, RS_ERR_FORMAT, "graph output '%s' is not produced by any node", oname);
    if (ov->kind != IV_DYN)
        return fail(p, RS_ERR_UNSUPPORTED, "graph output '%s' is a constant: it does not depend on the input", oname);
    int batch_dims = 0;
    for (int k = 0; k < ov->shape.rank; k++) batch_dims += ov->shape.d[k] == RS_ONNX_BATCH;
    if (!g->fixed_batch && batch_dims != 1)
        return fail(p, RS_ERR_UNSUPPORTED, "graph output '%s' does not keep the batch dimension", oname);
    g->output = ov->vid;
    return prune(p);
}

static void imp_free(imp *p)
{
    if (p->keys) {
        for (size_t i = 0; i < p->ht_cap; i++) {
            free(p->keys[i]);
            if (p->vals) ival_clear(&p->vals[i]);
        }
    }
    free(p->keys);
    free(p->vals);
}

rs_status rs_onnx_load_buffer(const uint8_t *buf, size_t n, const char *name, rs_onnx_graph **out, rs_err *err)
{
    *out = NULL;
    name = name ? name : "<buffer>";
    if (!buf && n) return rs_err_set(err, RS_ERR_ARG, "%s: no data", name);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, buf);
    if (!m)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: not a valid ONNX ModelProto (%zu bytes did not parse as protobuf; "
                          "truncated, or not an .onnx file?)", name, n);
    imp p = {.file = name, .err = err, .budget = FOLD_BUDGET};
    rs_status st = import_model(&p, m);
    imp_free(&p);
    onnx__model_proto__free_unpacked(m, NULL);
    if (st) {
        rs_onnx_graph_free(p.g);
        return st;
    }
    *out = p.g;
    return RS_OK;
}

rs_status rs_onnx_load(const char *path, rs_onnx_graph **out, rs_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory reading the file", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return rs_err_set(err, RS_ERR_IO, "%s: read error", path);
    }
    rs_status st = rs_onnx_load_buffer(buf, len, path, out, err);
    free(buf);
    return st;
}

/* ---- a trainable model from a plain layer sequence ---- */

typedef struct seq_layer {
    rs_layer_cfg cfg;
    const float *w, *b;  /* graph constants (w NULL: no parameters) */
    bool w_transposed;   /* MatMul's (K, N) weight: the engine's linear wants (N, K) */
    int wk, wn;          /* (K, N) of a transposed weight */
} seq_layer;

static bool const_scalar(const rs_onnx_graph *g, int v, float *out)
{
    if (v < 0 || !g->values[v].data || rs_onnx_shape_numel(&g->values[v].shape, 1) != 1) return false;
    *out = g->values[v].data[0];
    return true;
}

/* Does node k, with input cur, compute a bias add over the last dim (constant (N) or (1, N))? */
static const float *bias_add(const rs_onnx_graph *g, int k, int cur, int64_t N)
{
    if (k >= g->nnodes) return NULL;
    const rs_onnx_node *n = &g->nodes[k];
    if (n->op != RS_ONNX_OP_BINARY || n->a.sub != RS_ONNX_ADD) return NULL;
    int other = n->in[0] == cur ? n->in[1] : n->in[1] == cur ? n->in[0] : -1;
    if (other < 0 || !g->values[other].data) return NULL;
    const rs_onnx_shape *s = &g->values[other].shape;
    if (rs_onnx_shape_numel(s, 1) != N || s->d[s->rank - 1] != N) return NULL;
    return g->values[other].data;
}

/* The exporters' exact GELU: x * 0.5 * (1 + erf(x / sqrt 2)) in five nodes from k (either order of the
 * two products, division or multiplication by 1/sqrt 2). Returns the nodes used, 0 when no match. */
static int gelu_expansion(const rs_onnx_graph *g, int k, int x)
{
    if (k + 4 >= g->nnodes) return 0;
    const rs_onnx_node *d = &g->nodes[k], *e = &g->nodes[k + 1], *a = &g->nodes[k + 2], *m1 = &g->nodes[k + 3],
                       *m2 = &g->nodes[k + 4];
    float c;
    bool scale_ok = d->op == RS_ONNX_OP_BINARY && d->in[0] == x && const_scalar(g, d->in[1], &c) &&
                    ((d->a.sub == RS_ONNX_DIV && fabsf(c - 1.41421356f) < 1e-5f) ||
                     (d->a.sub == RS_ONNX_MUL && fabsf(c - 0.70710678f) < 1e-5f));
    if (!scale_ok || e->op != RS_ONNX_OP_UNARY || e->a.sub != RS_ONNX_ERF || e->in[0] != d->out) return 0;
    if (a->op != RS_ONNX_OP_BINARY || a->a.sub != RS_ONNX_ADD || a->in[0] != e->out || !const_scalar(g, a->in[1], &c) ||
        c != 1.0f)
        return 0;
    if (m1->op != RS_ONNX_OP_BINARY || m1->a.sub != RS_ONNX_MUL || m2->op != RS_ONNX_OP_BINARY || m2->a.sub != RS_ONNX_MUL)
        return 0;
    /* (x * (1 + erf)) * 0.5 or (x * 0.5) * (1 + erf) is rarer; accept the first, as both exporters write it */
    bool m1_ok = (m1->in[0] == x && m1->in[1] == a->out) || (m1->in[1] == x && m1->in[0] == a->out);
    bool m2_ok = m2->in[0] == m1->out && const_scalar(g, m2->in[1], &c) && c == 0.5f;
    return m1_ok && m2_ok ? 5 : 0;
}

/* LayerNorm as opset < 17 exporters expand it: ReduceMean, Sub, Pow 2 (or Mul by itself), ReduceMean, Add eps, Sqrt, Div,
 * Mul gamma, Add beta, over the last dim. Returns the nodes used (9), 0 when no match; eps and the
 * parameters come back through the pointers. */
static int layernorm_expansion(const rs_onnx_graph *g, int k, int x, float *eps, const float **gamma, const float **beta)
{
    if (k + 8 >= g->nnodes) return 0;
    const rs_onnx_node *n = &g->nodes[k];
    int r = g->values[x].shape.rank;
    int64_t N = g->values[x].shape.d[r - 1];
    float c;
#define IS(j, o, s) (n[j].op == (o) && (o != RS_ONNX_OP_BINARY || n[j].a.sub == (s)))
    if (!IS(0, RS_ONNX_OP_REDUCEMEAN, 0) || n[0].in[0] != x || n[0].a.axes_mask != 1u << (r - 1) || !n[0].a.keepdims)
        return 0;
    if (!IS(1, RS_ONNX_OP_BINARY, RS_ONNX_SUB) || n[1].in[0] != x || n[1].in[1] != n[0].out) return 0;
    bool pow2 = IS(2, RS_ONNX_OP_BINARY, RS_ONNX_POW) && const_scalar(g, n[2].in[1], &c) && c == 2.0f;
    bool square = IS(2, RS_ONNX_OP_BINARY, RS_ONNX_MUL) && n[2].in[1] == n[1].out; /* ringside writes x*x */
    if (!(pow2 || square) || n[2].in[0] != n[1].out) return 0;
    if (!IS(3, RS_ONNX_OP_REDUCEMEAN, 0) || n[3].in[0] != n[2].out || n[3].a.axes_mask != n[0].a.axes_mask) return 0;
    if (!IS(4, RS_ONNX_OP_BINARY, RS_ONNX_ADD) || n[4].in[0] != n[3].out || !const_scalar(g, n[4].in[1], eps) || !(*eps > 0))
        return 0;
    if (n[5].op != RS_ONNX_OP_UNARY || n[5].a.sub != RS_ONNX_SQRT || n[5].in[0] != n[4].out) return 0;
    if (!IS(6, RS_ONNX_OP_BINARY, RS_ONNX_DIV) || n[6].in[0] != n[1].out || n[6].in[1] != n[5].out) return 0;
    if (!IS(7, RS_ONNX_OP_BINARY, RS_ONNX_MUL) || n[7].in[0] != n[6].out) return 0;
    if (!IS(8, RS_ONNX_OP_BINARY, RS_ONNX_ADD) || n[8].in[0] != n[7].out) return 0;
#undef IS
    const rs_onnx_value *gv = &g->values[n[7].in[1]], *bv = &g->values[n[8].in[1]];
    if (!gv->data || !bv->data || rs_onnx_shape_numel(&gv->shape, 1) != N || rs_onnx_shape_numel(&bv->shape, 1) != N)
        return 0;
    *gamma = gv->data;
    *beta = bv->data;
    return 9;
}

static rs_status seq_fail(rs_err *err, const rs_onnx_node *n, const char *why)
{
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: node '%s' (%s) %s; the graph still runs with "
                      "predict/eval, it just cannot be trained as an engine model", n->name, n->op_type, why);
}

rs_status rs_onnx_to_model(const rs_onnx_graph *g, const char *name, rs_model **out, rs_err *err)
{
    *out = NULL;
    int cap = g->nnodes + 1, nl = 0, cur = g->input;
    seq_layer *L = calloc((size_t)cap, sizeof *L);
    if (!L) return rs_err_set(err, RS_ERR_NOMEM, "onnx to model: out of memory");
    rs_status st = RS_OK;
    for (int k = 0; k < g->nnodes && !st; k++) {
        const rs_onnx_node *n = &g->nodes[k];
        const rs_onnx_attrs *a = &n->a;
        if (n->in[0] != cur) {
            st = seq_fail(err, n, "does not take the previous layer's output: the graph is not a plain sequence");
            break;
        }
        const rs_onnx_shape *xs = &g->values[cur].shape, *os = &g->values[n->out].shape;
        seq_layer *l = &L[nl];
        switch (n->op) {
        case RS_ONNX_OP_GEMM: {
            const rs_onnx_value *w = &g->values[n->in[1]];
            if (a->ta || a->alpha != 1.0f || (n->nin > 2 && a->beta != 1.0f) || !w->data ||
                (n->nin > 2 && (!g->values[n->in[2]].data || g->values[n->in[2]].shape.rank != 1))) {
                st = seq_fail(err, n, "is not a linear layer (needs constant weights, a 1-d bias, alpha = beta = 1)");
                break;
            }
            l->cfg = rs_layer_cfg_default(RS_LAYER_LINEAR);
            l->cfg.out = (int)os->d[1];
            l->cfg.bias = n->nin > 2;
            l->w = w->data;
            l->b = n->nin > 2 ? g->values[n->in[2]].data : NULL;
            l->w_transposed = !a->tb;
            l->wk = (int)xs->d[1];
            l->wn = (int)os->d[1];
            nl++;
            break;
        }
        case RS_ONNX_OP_MATMUL: {
            const rs_onnx_value *w = &g->values[n->in[1]];
            if (!w->data || w->shape.rank != 2 || xs->rank != 2) {
                st = seq_fail(err, n, "is not a linear layer (needs (batch, K) x constant (K, N))");
                break;
            }
            int64_t N = w->shape.d[1];
            l->cfg = rs_layer_cfg_default(RS_LAYER_LINEAR);
            l->cfg.out = (int)N;
            l->w = w->data;
            l->w_transposed = true;
            l->wk = (int)w->shape.d[0];
            l->wn = (int)N;
            l->b = bias_add(g, k + 1, n->out, N);
            l->cfg.bias = l->b != NULL;
            if (l->b) n = &g->nodes[++k];
            nl++;
            break;
        }
        case RS_ONNX_OP_CONV:
            if (a->group != 1 || a->pt != a->pb || a->pl != a->pr || xs->rank != 4 || !g->values[n->in[1]].data ||
                (n->nin > 2 && !g->values[n->in[2]].data)) {
                st = seq_fail(err, n, "is not an engine conv (needs group 1, symmetric pads, 2-d, constant weights)");
                break;
            }
            l->cfg = rs_layer_cfg_default(RS_LAYER_CONV2D);
            l->cfg.out = (int)os->d[1];
            l->cfg.kh = a->kh, l->cfg.kw = a->kw, l->cfg.sh = a->sh, l->cfg.sw = a->sw;
            l->cfg.ph = a->pt, l->cfg.pw = a->pl;
            l->cfg.bias = n->nin > 2;
            l->w = g->values[n->in[1]].data;
            l->b = n->nin > 2 ? g->values[n->in[2]].data : NULL;
            nl++;
            break;
        case RS_ONNX_OP_MAXPOOL:
        case RS_ONNX_OP_AVGPOOL: {
            bool max = n->op == RS_ONNX_OP_MAXPOOL;
            if (a->pt != a->pb || a->pl != a->pr || a->ceil_mode || xs->rank != 4 ||
                (!max && !a->count_include_pad && (a->pt || a->pl))) {
                st = seq_fail(err, n, "is not an engine pool (needs symmetric pads, floor mode, and for averages "
                              "count_include_pad=1 when padded)");
                break;
            }
            l->cfg = rs_layer_cfg_default(max ? RS_LAYER_MAXPOOL2D : RS_LAYER_AVGPOOL2D);
            l->cfg.kh = a->kh, l->cfg.kw = a->kw, l->cfg.sh = a->sh, l->cfg.sw = a->sw;
            l->cfg.ph = a->pt, l->cfg.pw = a->pl;
            nl++;
            break;
        }
        case RS_ONNX_OP_UNARY: {
            int used = a->sub == RS_ONNX_RELU || a->sub == RS_ONNX_TANH || a->sub == RS_ONNX_GELU;
            if (!used) {
                st = seq_fail(err, n, "is an activation the engine has no layer for");
                break;
            }
            l->cfg = rs_layer_cfg_default(a->sub == RS_ONNX_RELU ? RS_LAYER_RELU
                                          : a->sub == RS_ONNX_TANH ? RS_LAYER_TANH : RS_LAYER_GELU);
            nl++;
            break;
        }
        case RS_ONNX_OP_BINARY: {
            int used = gelu_expansion(g, k, cur);
            if (!used) {
                st = seq_fail(err, n, "is arithmetic that is not part of a linear layer or a GELU");
                break;
            }
            l->cfg = rs_layer_cfg_default(RS_LAYER_GELU);
            nl++;
            k += used - 1;
            n = &g->nodes[k];
            break;
        }
        case RS_ONNX_OP_RESHAPE:
            /* (N, ...) -> (N, rest): the engine's flatten; a reshape that keeps the shape is nothing */
            if (os->rank == 2 && xs->d[0] == os->d[0] && xs->rank > 2) {
                l->cfg = rs_layer_cfg_default(RS_LAYER_FLATTEN);
                nl++;
            } else if (!(os->rank == xs->rank && !memcmp(os->d, xs->d, sizeof(int64_t) * (size_t)os->rank))) {
                st = seq_fail(err, n, "reshapes other than flattening to (batch, features)");
            }
            break;
        case RS_ONNX_OP_REDUCEMEAN: {
            float eps = 0;
            int used = layernorm_expansion(g, k, cur, &eps, &l->w, &l->b);
            if (!used) {
                st = seq_fail(err, n, "is a reduction that is not part of a LayerNorm");
                break;
            }
            l->cfg = rs_layer_cfg_default(RS_LAYER_LAYERNORM);
            l->cfg.eps = eps;
            nl++;
            k += used - 1;
            n = &g->nodes[k];
            break;
        }
        case RS_ONNX_OP_LAYERNORM:
            if (a->axis != xs->rank - 1 || !g->values[n->in[1]].data || (n->nin > 2 && !g->values[n->in[2]].data)) {
                st = seq_fail(err, n, "normalises over more than the last dimension");
                break;
            }
            l->cfg = rs_layer_cfg_default(RS_LAYER_LAYERNORM);
            l->cfg.eps = a->eps > 0 ? a->eps : 1e-5f;
            l->w = g->values[n->in[1]].data;
            l->b = n->nin > 2 ? g->values[n->in[2]].data : NULL;
            nl++;
            break;
        default: st = seq_fail(err, n, "has no engine layer"); break;
        }
        cur = n->out;
    }
    if (!st && cur != g->output)
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: the graph's output is not the end of the layer chain");
    if (!st && nl == 0) st = rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: no layers");
    if (!st && g->values[g->output].shape.rank != 2)
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "onnx to model: the output must be (batch, classes)");
    if (st) {
        free(L);
        return st;
    }
    /* the spec: "seq in=CxHxW layer layer ..." */
    size_t cap_s = 64 + (size_t)nl * 64, len = 0;
    char *spec = malloc(cap_s);
    if (!spec) {
        free(L);
        return rs_err_set(err, RS_ERR_NOMEM, "onnx to model: out of memory");
    }
    const rs_onnx_shape *is = &g->values[g->input].shape;
    len += (size_t)snprintf(spec + len, cap_s - len, "seq in=");
    for (int i = 1; i < is->rank; i++) len += (size_t)snprintf(spec + len, cap_s - len, "%s%lld", i > 1 ? "x" : "", (long long)is->d[i]);
    for (int i = 0; i < nl; i++) {
        char w[64];
        len += (size_t)snprintf(spec + len, cap_s - len, " %s", rs_layer_cfg_str(&L[i].cfg, w, sizeof w));
    }
    rs_model *m = NULL;
    st = rs_model_parse(spec, name ? name : "onnx", rs_device_cpu(), NULL, 0, &m, NULL, err);
    if (st) {
        rs_err_prefix(err, "onnx to model: spec '%s'", spec);
        free(spec);
        free(L);
        return st;
    }
    /* copy the weights in, layer by layer, checking every size against the engine's layout */
    float *P = rs_model_params(m);
    if (rs_model_layer_count(m) != nl) st = rs_err_set(err, RS_ERR_INTERNAL, "onnx to model: layer count differs");
    for (int i = 0; i < nl && !st; i++) {
        rs_layer *ly = rs_model_layer(m, i);
        const float *src[2] = {L[i].w, L[i].b};
        for (int j = 0; j < ly->np && !st; j++) {
            const rs_param_slot *ps = &ly->p[j];
            if (!src[j]) {
                memset(P + ps->offset, 0, sizeof(float) * ps->numel); /* layernorm without bias */
                continue;
            }
            if (j == 0 && L[i].w_transposed) {
                if ((size_t)L[i].wk * (size_t)L[i].wn != ps->numel) {
                    st = rs_err_set(err, RS_ERR_SHAPE, "onnx to model: layer %s weight size differs", ly->name);
                    break;
                }
                for (int r = 0; r < L[i].wn; r++)
                    for (int q = 0; q < L[i].wk; q++) P[ps->offset + (size_t)r * L[i].wk + q] = src[0][(size_t)q * L[i].wn + r];
            } else {
                memcpy(P + ps->offset, src[j], sizeof(float) * ps->numel);
            }
        }
    }
    /* the engine's shapes must agree with the graph's (same pooling and padding rules) */
    if (!st) {
        const rs_shape *ms = &rs_model_layer(m, nl - 1)->out;
        if (rs_shape_numel(ms) != (int64_t)rs_onnx_graph_output_numel(g))
            st = rs_err_set(err, RS_ERR_SHAPE, "onnx to model: the engine's output size %lld differs from the graph's %zu",
                            (long long)rs_shape_numel(ms), rs_onnx_graph_output_numel(g));
    }
    free(spec);
    free(L);
    if (st) {
        rs_model_free(m);
        return st;
    }
    rs_model_set_training(m, false);
    *out = m;
    return RS_OK;
}
