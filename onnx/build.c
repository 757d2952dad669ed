/* The hand builder: a GraphProto grown one input, initializer or node at a time, written as a
 * ModelProto on save. Every part is malloc'd the way protobuf-c's own unpacker allocates, so one
 * protobuf_c_message_free_unpacked(graph, NULL) releases all of it. */
#include "onnx/build.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/core/rng.h"
#include "onnx/inspect.h"
#include "onnx/onnx.pb-c.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian in ONNX; this writer copies host floats as they are"
#endif

#ifndef RS_ONNX_PRODUCER_VERSION
#define RS_ONNX_PRODUCER_VERSION "0.0.0"
#endif

struct rs_onnx_builder {
    Onnx__GraphProto *g; /* owned; everything hanging from it too */
    char *producer_name, *producer_version;
};

/* ---- small helpers ---- */

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Appends item to a protobuf-c repeated field (array + count); false when out of memory. */
static bool push_ptr(void ***arr, size_t *n, void *item)
{
    void **a = realloc(*arr, (*n + 1) * sizeof *a);
    if (!a) return false;
    a[(*n)++] = item;
    *arr = a;
    return true;
}
#define PUSH(arr, n, item) push_ptr((void ***)&(arr), &(n), (item))

static rs_status nomem(rs_err *err) { return rs_err_set(err, RS_ERR_NOMEM, "onnx builder: out of memory"); }

int rs_onnx_dtype_parse(const char *name)
{
    static const struct {
        const char *name;
        int t;
    } names[] = {
        {"float", RS_ONNX_FLOAT},   {"float32", RS_ONNX_FLOAT}, {"f32", RS_ONNX_FLOAT},
        {"double", RS_ONNX_DOUBLE}, {"float64", RS_ONNX_DOUBLE}, {"f64", RS_ONNX_DOUBLE},
        {"float16", RS_ONNX_FLOAT16}, {"f16", RS_ONNX_FLOAT16}, {"bfloat16", RS_ONNX_BFLOAT16},
        {"bf16", RS_ONNX_BFLOAT16}, {"int64", RS_ONNX_INT64}, {"i64", RS_ONNX_INT64},
        {"int32", RS_ONNX_INT32},   {"i32", RS_ONNX_INT32},   {"int8", RS_ONNX_INT8},
        {"i8", RS_ONNX_INT8},       {"uint8", RS_ONNX_UINT8}, {"u8", RS_ONNX_UINT8},
        {"bool", RS_ONNX_BOOL},
    };
    if (!name) return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(name, names[i].name)) return names[i].t;
    return 0;
}

const char *rs_onnx_dtype_name(int dtype)
{
    static const char *const names[] = {
        "undefined", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "string", "bool",
        "float16", "float64", "uint32", "uint64", "complex64", "complex128", "bfloat16", "float8e4m3fn",
        "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4", "float4e2m1",
    };
    if (dtype < 0 || dtype >= (int)(sizeof names / sizeof names[0])) return "?";
    return names[dtype];
}

size_t rs_onnx_dtype_size(int dtype)
{
    switch (dtype) {
    case 1: case 6: case 12: return 4;             /* float, int32, uint32 */
    case 2: case 3: case 9: return 1;              /* uint8, int8, bool */
    case 17: case 18: case 19: case 20: return 1;  /* float8 variants */
    case 4: case 5: case 10: case 16: return 2;    /* uint16, int16, float16, bfloat16 */
    case 7: case 11: case 13: case 14: return 8;   /* int64, double, uint64, complex64 */
    case 15: return 16;                            /* complex128 */
    default: return 0;                             /* string, 4-bit types, unknown */
    }
}

int rs_onnx_ir_version_for_opset(int opset)
{
    /* onnx's helper.VERSION_TABLE: the IR version of the release that introduced each opset. */
    if (opset == 13 || opset == 14) return 7;
    if (opset >= 15 && opset <= 18) return 8;
    if (opset == 19 || opset == 20) return 9;
    if (opset == 21) return 10;
    return 0;
}

rs_status rs_onnx_ushape_parse(const char *text, rs_onnx_ushape *out, rs_err *err)
{
    memset(out, 0, sizeof *out);
    const char *p = text ? text : "";
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '[' || *p == '(') p++;
        if (!*p || *p == ']' || *p == ')') break;
        const char *a = p;
        while (*p && *p != ',' && *p != 'x' && *p != 'X' && *p != ' ' && *p != ']' && *p != ')') p++;
        /* "x" separates dims only between words: a symbolic name such as "max_len" keeps its x. */
        if ((*p == 'x' || *p == 'X') && p > a && !isdigit((unsigned char)p[-1]))
            while (*p && *p != ',' && *p != ' ' && *p != ']' && *p != ')') p++;
        size_t n = (size_t)(p - a);
        if (n == 0) return rs_err_set(err, RS_ERR_ARG, "shape '%s': empty dimension", text);
        if (out->ndim == RS_ONNX_MAX_DIMS)
            return rs_err_set(err, RS_ERR_ARG, "shape '%s': more than %d dimensions", text, RS_ONNX_MAX_DIMS);
        char word[32];
        if (n >= sizeof word) return rs_err_set(err, RS_ERR_ARG, "shape '%s': dimension name too long", text);
        memcpy(word, a, n);
        word[n] = 0;
        int k = out->ndim++;
        if (isdigit((unsigned char)word[0])) {
            char *end;
            errno = 0;
            long long v = strtoll(word, &end, 10);
            if (*end || errno || v < 0)
                return rs_err_set(err, RS_ERR_ARG, "shape '%s': '%s' is neither a size nor a name", text, word);
            out->d[k] = v;
        } else {
            out->d[k] = -1;
            if (strcmp(word, "?")) memcpy(out->param[k], word, n + 1);
        }
        while (*p == ' ' || *p == '\t') p++;
        if (*p == ',' || *p == 'x' || *p == 'X') p++;
    }
    return RS_OK;
}

/* ---- builder ---- */

rs_onnx_builder *rs_onnx_builder_new(const char *graph_name)
{
    rs_onnx_builder *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->g = malloc(sizeof *b->g);
    if (!b->g) {
        free(b);
        return NULL;
    }
    onnx__graph_proto__init(b->g);
    b->g->name = dup_str(graph_name && *graph_name ? graph_name : "graph");
    b->producer_name = dup_str("ringside");
    b->producer_version = dup_str(RS_ONNX_PRODUCER_VERSION);
    if (!b->g->name || !b->producer_name || !b->producer_version) {
        rs_onnx_builder_free(b);
        return NULL;
    }
    return b;
}

void rs_onnx_builder_free(rs_onnx_builder *b)
{
    if (!b) return;
    if (b->g) protobuf_c_message_free_unpacked(&b->g->base, NULL);
    free(b->producer_name);
    free(b->producer_version);
    free(b);
}

rs_status rs_onnx_builder_set_producer(rs_onnx_builder *b, const char *name, const char *version, rs_err *err)
{
    char *n = dup_str(name ? name : ""), *v = dup_str(version ? version : "");
    if (!n || !v) {
        free(n);
        free(v);
        return nomem(err);
    }
    free(b->producer_name);
    free(b->producer_version);
    b->producer_name = n;
    b->producer_version = v;
    return RS_OK;
}

static Onnx__ValueInfoProto *value_info(const char *name, int dtype, int ndim, const int64_t *dims,
                                        const char *const *dim_names)
{
    Onnx__ValueInfoProto *vi = malloc(sizeof *vi);
    Onnx__TypeProto *tp = malloc(sizeof *tp);
    Onnx__TypeProto__Tensor *tt = malloc(sizeof *tt);
    Onnx__TensorShapeProto *sh = malloc(sizeof *sh);
    if (!vi || !tp || !tt || !sh) {
        free(vi);
        free(tp);
        free(tt);
        free(sh);
        return NULL;
    }
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = dtype;
    tt->shape = sh;
    bool ok = (vi->name = dup_str(name)) != NULL;
    for (int i = 0; ok && i < ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d = malloc(sizeof *d);
        if (!d || !PUSH(sh->dim, sh->n_dim, d)) {
            free(d);
            ok = false;
            break;
        }
        onnx__tensor_shape_proto__dimension__init(d);
        if (dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        } else if (dim_names && dim_names[i] && dim_names[i][0]) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            ok = (d->dim_param = dup_str(dim_names[i])) != NULL;
            if (!ok) d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
        }
    }
    if (!ok) {
        protobuf_c_message_free_unpacked(&vi->base, NULL);
        return NULL;
    }
    return vi;
}

static rs_status check_io(const char *what, const char *name, int dtype, int ndim, const int64_t *dims, rs_err *err)
{
    if (!name || !*name) return rs_err_set(err, RS_ERR_ARG, "onnx %s: a name is needed", what);
    if (dtype <= 0 || !strcmp(rs_onnx_dtype_name(dtype), "?"))
        return rs_err_set(err, RS_ERR_ARG, "onnx %s '%s': unknown element type %d", what, name, dtype);
    if (ndim < 0 || ndim > RS_ONNX_MAX_DIMS || (ndim > 0 && !dims))
        return rs_err_set(err, RS_ERR_ARG, "onnx %s '%s': rank must be 0..%d", what, name, RS_ONNX_MAX_DIMS);
    return RS_OK;
}

static rs_status add_io(rs_onnx_builder *b, bool output, const char *name, int dtype, int ndim, const int64_t *dims,
                        const char *const *dim_names, rs_err *err)
{
    rs_status st = check_io(output ? "output" : "input", name, dtype, ndim, dims, err);
    if (st) return st;
    Onnx__ValueInfoProto ***arr = output ? &b->g->output : &b->g->input;
    size_t *n = output ? &b->g->n_output : &b->g->n_input;
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*arr)[i]->name, name))
            return rs_err_set(err, RS_ERR_ARG, "onnx %s '%s' is already declared", output ? "output" : "input",
                              name);
    Onnx__ValueInfoProto *vi = value_info(name, dtype, ndim, dims, dim_names);
    if (!vi) return nomem(err);
    if (!push_ptr((void ***)arr, n, vi)) {
        protobuf_c_message_free_unpacked(&vi->base, NULL);
        return nomem(err);
    }
    return RS_OK;
}

rs_status rs_onnx_builder_input(rs_onnx_builder *b, const char *name, int dtype, int ndim, const int64_t *dims,
                                const char *const *dim_names, rs_err *err)
{
    return add_io(b, false, name, dtype, ndim, dims, dim_names, err);
}

rs_status rs_onnx_builder_output(rs_onnx_builder *b, const char *name, int dtype, int ndim, const int64_t *dims,
                                 const char *const *dim_names, rs_err *err)
{
    return add_io(b, true, name, dtype, ndim, dims, dim_names, err);
}

static rs_status add_io_shape(rs_onnx_builder *b, bool output, const char *name, int dtype, const rs_onnx_ushape *s,
                              rs_err *err)
{
    const char *names[RS_ONNX_MAX_DIMS];
    for (int i = 0; i < s->ndim && i < RS_ONNX_MAX_DIMS; i++) names[i] = s->param[i];
    return add_io(b, output, name, dtype, s->ndim, s->d, names, err);
}

rs_status rs_onnx_builder_input_shape(rs_onnx_builder *b, const char *name, int dtype, const rs_onnx_ushape *s,
                                      rs_err *err)
{
    return add_io_shape(b, false, name, dtype, s, err);
}

rs_status rs_onnx_builder_output_shape(rs_onnx_builder *b, const char *name, int dtype, const rs_onnx_ushape *s,
                                       rs_err *err)
{
    return add_io_shape(b, true, name, dtype, s, err);
}

/* A TensorProto header (name, dims, dtype) with room for nbytes of raw_data; NULL on bad dims or no memory. */
static rs_status new_tensor(rs_onnx_builder *b, const char *name, int dtype, int ndim, const int64_t *dims,
                            Onnx__TensorProto **out, size_t *numel, rs_err *err)
{
    if (!name || !*name) return rs_err_set(err, RS_ERR_ARG, "onnx initializer: a name is needed");
    if (ndim < 0 || ndim > RS_ONNX_MAX_DIMS || (ndim > 0 && !dims))
        return rs_err_set(err, RS_ERR_ARG, "onnx initializer '%s': rank must be 0..%d", name, RS_ONNX_MAX_DIMS);
    for (size_t i = 0; i < b->g->n_initializer; i++)
        if (!strcmp(b->g->initializer[i]->name, name))
            return rs_err_set(err, RS_ERR_ARG, "onnx initializer '%s' is already defined", name);
    /* 2^31 elements: beyond it the byte count no longer fits one protobuf message. */
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0)
            return rs_err_set(err, RS_ERR_ARG, "onnx initializer '%s': dimension %d must be a fixed size", name, i);
        if (dims[i] > 0 && n > ((size_t)1 << 31) / (size_t)dims[i])
            return rs_err_set(err, RS_ERR_ARG, "onnx initializer '%s': too many elements", name);
        n *= (size_t)dims[i];
    }
    size_t nbytes = n * rs_onnx_dtype_size(dtype);
    Onnx__TensorProto *t = malloc(sizeof *t);
    if (!t) return nomem(err);
    onnx__tensor_proto__init(t);
    t->has_data_type = 1;
    t->data_type = dtype;
    t->name = dup_str(name);
    t->dims = ndim ? malloc((size_t)ndim * sizeof *t->dims) : NULL;
    t->has_raw_data = 1;
    t->raw_data.len = nbytes;
    t->raw_data.data = malloc(nbytes ? nbytes : 1);
    if (!t->name || (ndim && !t->dims) || !t->raw_data.data) {
        protobuf_c_message_free_unpacked(&t->base, NULL);
        return nomem(err);
    }
    t->n_dims = (size_t)ndim;
    if (ndim) memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    if (!PUSH(b->g->initializer, b->g->n_initializer, t)) {
        protobuf_c_message_free_unpacked(&t->base, NULL);
        return nomem(err);
    }
    *out = t;
    *numel = n;
    return RS_OK;
}

rs_status rs_onnx_builder_initializer(rs_onnx_builder *b, const char *name, int ndim, const int64_t *dims,
                                      const float *data, uint64_t seed, rs_err *err)
{
    Onnx__TensorProto *t;
    size_t n;
    rs_status st = new_tensor(b, name, RS_ONNX_FLOAT, ndim, dims, &t, &n, err);
    if (st) return st;
    float *dst = (float *)(void *)t->raw_data.data;
    if (data) {
        memcpy(dst, data, n * sizeof(float));
    } else if (seed == 0) {
        memset(dst, 0, n * sizeof(float));
    } else {
        size_t fan_in = (ndim > 0 && dims[0] > 0) ? n / (size_t)dims[0] : 1;
        float bound = 1.0f / sqrtf((float)(fan_in ? fan_in : 1));
        rs_rng r;
        rs_rng_seed(&r, seed);
        for (size_t i = 0; i < n; i++) dst[i] = rs_rng_range(&r, -bound, bound);
    }
    return RS_OK;
}

rs_status rs_onnx_builder_initializer_i64(rs_onnx_builder *b, const char *name, int ndim, const int64_t *dims,
                                          const int64_t *data, rs_err *err)
{
    Onnx__TensorProto *t;
    size_t n;
    rs_status st = new_tensor(b, name, RS_ONNX_INT64, ndim, dims, &t, &n, err);
    if (st) return st;
    if (n) memcpy(t->raw_data.data, data, n * sizeof(int64_t));
    return RS_OK;
}

/* ---- nodes and attributes ---- */

static Onnx__NodeProto *last_node(rs_onnx_builder *b)
{
    return b->g->n_node ? b->g->node[b->g->n_node - 1] : NULL;
}

/* A new attribute on the last node; NULL with err set when there is none, the name repeats, or no memory. */
static Onnx__AttributeProto *new_attr(rs_onnx_builder *b, const char *name, int type, rs_err *err)
{
    Onnx__NodeProto *n = last_node(b);
    if (!n) {
        rs_err_set(err, RS_ERR_ARG, "onnx attribute '%s': add a node first", name);
        return NULL;
    }
    if (!name || !*name) {
        rs_err_set(err, RS_ERR_ARG, "onnx attribute of %s: a name is needed", n->op_type);
        return NULL;
    }
    for (size_t i = 0; i < n->n_attribute; i++)
        if (!strcmp(n->attribute[i]->name, name)) {
            rs_err_set(err, RS_ERR_ARG, "onnx node %s: attribute '%s' given twice", n->name, name);
            return NULL;
        }
    Onnx__AttributeProto *a = malloc(sizeof *a);
    if (!a) {
        nomem(err);
        return NULL;
    }
    onnx__attribute_proto__init(a);
    a->has_type = 1;
    a->type = (Onnx__AttributeProto__AttributeType)type;
    if (!(a->name = dup_str(name)) || !PUSH(n->attribute, n->n_attribute, a)) {
        protobuf_c_message_free_unpacked(&a->base, NULL);
        nomem(err);
        return NULL;
    }
    return a;
}

rs_status rs_onnx_builder_attr_int(rs_onnx_builder *b, const char *name, int64_t v, rs_err *err)
{
    Onnx__AttributeProto *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, err);
    if (!a) return err ? err->code : RS_ERR_ARG;
    a->has_i = 1;
    a->i = v;
    return RS_OK;
}

rs_status rs_onnx_builder_attr_ints(rs_onnx_builder *b, const char *name, int n, const int64_t *v, rs_err *err)
{
    Onnx__AttributeProto *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, err);
    if (!a) return err ? err->code : RS_ERR_ARG;
    if (n > 0) {
        if (!(a->ints = malloc((size_t)n * sizeof *a->ints))) return nomem(err);
        memcpy(a->ints, v, (size_t)n * sizeof *v);
        a->n_ints = (size_t)n;
    }
    return RS_OK;
}

static rs_status attr_floats(rs_onnx_builder *b, const char *name, int n, const float *v, rs_err *err)
{
    Onnx__AttributeProto *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS, err);
    if (!a) return err ? err->code : RS_ERR_ARG;
    if (n > 0) {
        if (!(a->floats = malloc((size_t)n * sizeof *a->floats))) return nomem(err);
        memcpy(a->floats, v, (size_t)n * sizeof *v);
        a->n_floats = (size_t)n;
    }
    return RS_OK;
}

rs_status rs_onnx_builder_attr_float(rs_onnx_builder *b, const char *name, float v, rs_err *err)
{
    Onnx__AttributeProto *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, err);
    if (!a) return err ? err->code : RS_ERR_ARG;
    a->has_f = 1;
    a->f = v;
    return RS_OK;
}

rs_status rs_onnx_builder_attr_string(rs_onnx_builder *b, const char *name, const char *v, rs_err *err)
{
    Onnx__AttributeProto *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, err);
    if (!a) return err ? err->code : RS_ERR_ARG;
    size_t n = strlen(v);
    if (!(a->s.data = malloc(n ? n : 1))) return nomem(err);
    memcpy(a->s.data, v, n);
    a->s.len = n;
    a->has_s = 1;
    return RS_OK;
}

/* Splits "1,2,3" into numbers; *all_int tells whether every item was an integer literal. */
static rs_status parse_numbers(const char *node, const char *key, const char *val, int64_t *iv, float *fv, int *n,
                               bool *all_int, rs_err *err)
{
    *n = 0;
    *all_int = true;
    const char *p = val;
    while (*p) {
        if (*n == 64) return rs_err_set(err, RS_ERR_ARG, "%s: attribute %s has more than 64 values", node, key);
        char *end;
        errno = 0;
        double d = strtod(p, &end);
        if (end == p || errno == ERANGE)
            return rs_err_set(err, RS_ERR_ARG, "%s: attribute %s='%s' is not a list of numbers", node, key, val);
        bool is_int = true;
        for (const char *q = p; q < end; q++)
            if (!isdigit((unsigned char)*q) && *q != '-' && *q != '+') is_int = false;
        if (is_int) {
            iv[*n] = strtoll(p, NULL, 10);
        } else {
            *all_int = false;
            iv[*n] = (int64_t)d;
        }
        fv[*n] = (float)d;
        (*n)++;
        p = end;
        if (*p == ',') p++;
        else if (*p)
            return rs_err_set(err, RS_ERR_ARG, "%s: attribute %s='%s' is not a list of numbers", node, key, val);
    }
    return RS_OK;
}

/* One "key=value" of the text form onto the last node, typed by the operator's schema when known. */
static rs_status text_attr(rs_onnx_builder *b, const char *op, const char *key, const char *val, rs_err *err)
{
    int type = rs_onnx_op_attr_type(op, key);
    if (!type) {
        bool numeric = *val && strspn(val, "0123456789+-.,eE") == strlen(val) && strpbrk(val, "0123456789");
        if (!numeric) type = strchr(val, ',') ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS
                                              : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        else {
            int64_t iv[64];
            float fv[64];
            int n;
            bool all_int;
            rs_status st = parse_numbers(op, key, val, iv, fv, &n, &all_int, err);
            if (st) return st;
            bool list = strchr(val, ',') != NULL;
            type = list ? (all_int ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS
                                   : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)
                        : (all_int ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT
                                   : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
        }
    }
    int64_t iv[64];
    float fv[64];
    int n;
    bool all_int;
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        return rs_onnx_builder_attr_string(b, key, val, err);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: {
        rs_status st = parse_numbers(op, key, val, iv, fv, &n, &all_int, err);
        if (st) return st;
        bool single = type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ||
                      type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        if (single && n != 1)
            return rs_err_set(err, RS_ERR_ARG, "%s: attribute %s takes one %s, got '%s'", op, key,
                              rs_onnx_attr_type_name(type), val);
        bool ints = type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ||
                    type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        if (ints && !all_int)
            return rs_err_set(err, RS_ERR_ARG, "%s: attribute %s takes %s, got '%s'", op, key,
                              single ? "an integer" : "integers", val);
        if (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) return rs_onnx_builder_attr_int(b, key, iv[0], err);
        if (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) return rs_onnx_builder_attr_float(b, key, fv[0], err);
        if (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) return rs_onnx_builder_attr_ints(b, key, n, iv, err);
        return attr_floats(b, key, n, fv, err);
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
        Onnx__AttributeProto *a = new_attr(b, key, type, err);
        if (!a) return err ? err->code : RS_ERR_ARG;
        const char *p = val;
        for (;;) {
            size_t len = strcspn(p, ",");
            ProtobufCBinaryData *s = realloc(a->strings, (a->n_strings + 1) * sizeof *s);
            if (!s) return nomem(err);
            a->strings = s;
            s[a->n_strings].data = malloc(len ? len : 1);
            if (!s[a->n_strings].data) return nomem(err);
            memcpy(s[a->n_strings].data, p, len);
            s[a->n_strings++].len = len;
            if (!p[len]) break;
            p += len + 1;
        }
        return RS_OK;
    }
    default:
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: attribute %s is a %s, which cannot be written as text", op,
                          key, rs_onnx_attr_type_name(type));
    }
}

static rs_status text_attrs(rs_onnx_builder *b, const char *op, const char *attrs, rs_err *err)
{
    const char *p = attrs;
    while (p && *p) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        size_t len = strcspn(p, " \t");
        char item[512];
        if (len >= sizeof item) return rs_err_set(err, RS_ERR_ARG, "%s: attribute text too long", op);
        memcpy(item, p, len);
        item[len] = 0;
        p += len;
        char *eq = strchr(item, '=');
        if (!eq || eq == item || !eq[1])
            return rs_err_set(err, RS_ERR_ARG, "%s: attribute '%s' should read name=value, e.g. transB=1", op, item);
        *eq = 0;
        rs_status st = text_attr(b, op, item, eq + 1, err);
        if (st) return st;
    }
    return RS_OK;
}

static bool push_strs(char ***arr, size_t *n, int count, const char *const *names)
{
    for (int i = 0; i < count; i++) {
        char *s = dup_str(names[i] ? names[i] : "");
        if (!s || !push_ptr((void ***)arr, n, s)) {
            free(s);
            return false;
        }
    }
    return true;
}

rs_status rs_onnx_builder_node(rs_onnx_builder *b, const char *op_type, int n_in, const char *const *inputs,
                               int n_out, const char *const *outputs, const char *attrs, rs_err *err)
{
    if (!op_type || !*op_type) return rs_err_set(err, RS_ERR_ARG, "onnx node: an op type is needed, e.g. Gemm");
    if (n_in < 0 || n_out < 1 || (n_in && !inputs) || !outputs)
        return rs_err_set(err, RS_ERR_ARG, "onnx node %s: needs at least one output", op_type);
    for (int i = 0; i < n_out; i++)
        if (!outputs[i] || !*outputs[i])
            return rs_err_set(err, RS_ERR_ARG, "onnx node %s: output %d has no name", op_type, i);
    Onnx__NodeProto *n = malloc(sizeof *n);
    if (!n) return nomem(err);
    onnx__node_proto__init(n);
    char name[96];
    snprintf(name, sizeof name, "%s_%zu", op_type, b->g->n_node);
    bool ok = (n->op_type = dup_str(op_type)) && (n->name = dup_str(name)) && (n->domain = dup_str("")) &&
              push_strs(&n->input, &n->n_input, n_in, inputs) && push_strs(&n->output, &n->n_output, n_out, outputs);
    if (!ok || !PUSH(b->g->node, b->g->n_node, n)) {
        protobuf_c_message_free_unpacked(&n->base, NULL);
        return nomem(err);
    }
    rs_status st = text_attrs(b, op_type, attrs, err);
    if (st) { /* a node with half its attributes would be worse than none */
        b->g->n_node--;
        protobuf_c_message_free_unpacked(&n->base, NULL);
    }
    return st;
}

rs_status rs_onnx_builder_name_last(rs_onnx_builder *b, const char *name, rs_err *err)
{
    Onnx__NodeProto *n = last_node(b);
    if (!n) return rs_err_set(err, RS_ERR_ARG, "onnx: no node to name yet");
    char *s = dup_str(name ? name : "");
    if (!s) return nomem(err);
    free(n->name);
    n->name = s;
    return RS_OK;
}

int rs_onnx_builder_node_count(const rs_onnx_builder *b) { return (int)b->g->n_node; }

rs_status rs_onnx_builder_rename_output(rs_onnx_builder *b, int node, int k, const char *name, rs_err *err)
{
    if (node < 0 || (size_t)node >= b->g->n_node || k < 0 || (size_t)k >= b->g->node[node]->n_output)
        return rs_err_set(err, RS_ERR_ARG, "onnx: no output %d of node %d", k, node);
    char *s = dup_str(name);
    if (!s) return nomem(err);
    free(b->g->node[node]->output[k]);
    b->g->node[node]->output[k] = s;
    return RS_OK;
}

/* ---- saving ---- */

rs_status rs_onnx_builder_save(rs_onnx_builder *b, const char *path, int opset, rs_err *err)
{
    int ir = rs_onnx_ir_version_for_opset(opset);
    if (!ir)
        return rs_err_set(err, RS_ERR_ARG, "opset %d is not one ringside writes; use %d..%d (default %d)", opset,
                          RS_ONNX_OPSET_MIN, RS_ONNX_OPSET_MAX, RS_ONNX_OPSET_DEFAULT);
    Onnx__OperatorSetIdProto os = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__OperatorSetIdProto *osp = &os;
    os.domain = (char *)"";
    os.has_version = 1;
    os.version = opset;
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = ir;
    m.n_opset_import = 1;
    m.opset_import = &osp;
    m.producer_name = b->producer_name;
    m.producer_version = b->producer_version;
    m.graph = b->g;
    size_t len = onnx__model_proto__get_packed_size(&m);
    if (len > RS_ONNX_MAX_FILE_BYTES)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: the model is %zu bytes, over protobuf's 2 GiB limit", path,
                          len);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) return nomem(err);
    onnx__model_proto__pack(&m, buf);

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        free(buf);
        return nomem(err);
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    rs_status st = RS_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = rs_err_set(err, RS_ERR_IO, "%s: %s", tmp, strerror(errno));
    } else {
        bool ok = fwrite(buf, 1, len, f) == len;
        int e = errno;
        if (fclose(f) != 0 && ok) {
            ok = false;
            e = errno;
        }
        if (!ok) st = rs_err_set(err, RS_ERR_IO, "%s: write failed: %s", tmp, strerror(e));
        else if (rename(tmp, path) != 0) st = rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
        if (st) remove(tmp);
    }
    free(tmp);
    free(buf);
    return st;
}
