/* `onnx show` and `onnx check`: a file read back and printed, or checked the way onnx.checker would
 * for what ringside writes and reads (IR and opset present, values defined before use and once,
 * tensors as long as their shapes say, attributes of the types their operators define).
 * Everything read from the file may be absent or hostile: strings can be NULL, counts huge, names
 * full of control characters, so every field is checked before it is used and escaped when printed. */
#include "onnx/inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx/build.h"

/* ---- operators ringside knows ---- */

/* Attribute lists are complete for the opsets 13..21, so an attribute not listed is reported. */
static const rs_onnx_op_info ops[] = {
    {"Gemm", 2, 3, 1, 1, "alpha:f beta:f transA:i transB:i", 0},
    {"MatMul", 2, 2, 1, 1, "", 0},
    {"Add", 2, 2, 1, 1, "", 0},
    {"Sub", 2, 2, 1, 1, "", 0},
    {"Mul", 2, 2, 1, 1, "", 0},
    {"Div", 2, 2, 1, 1, "", 0},
    {"Conv", 2, 3, 1, 1, "auto_pad:s dilations:is group:i kernel_shape:is pads:is strides:is", 0},
    {"MaxPool", 1, 1, 1, 2,
     "auto_pad:s ceil_mode:i dilations:is kernel_shape:is pads:is storage_order:i strides:is", 0},
    {"AveragePool", 1, 1, 1, 1,
     "auto_pad:s ceil_mode:i count_include_pad:i dilations:is kernel_shape:is pads:is strides:is", 0},
    {"GlobalAveragePool", 1, 1, 1, 1, "", 0},
    {"Relu", 1, 1, 1, 1, "", 0},
    {"Tanh", 1, 1, 1, 1, "", 0},
    {"Gelu", 1, 1, 1, 1, "approximate:s", 20},
    {"Erf", 1, 1, 1, 1, "", 0},
    {"Sqrt", 1, 1, 1, 1, "", 0},
    {"Identity", 1, 1, 1, 1, "", 0},
    {"Flatten", 1, 1, 1, 1, "axis:i", 0},
    {"Dropout", 1, 3, 1, 2, "seed:i", 0},
    {"LayerNormalization", 2, 3, 1, 3, "axis:i epsilon:f stash_type:i", 17},
    {"ReduceMean", 1, 2, 1, 1, "axes:is keepdims:i noop_with_empty_axes:i", 0},
    {"BatchNormalization", 5, 5, 1, 3, "epsilon:f momentum:f training_mode:i", 0},
    {"Softmax", 1, 1, 1, 1, "axis:i", 0},
    {"Constant", 0, 0, 1, 1,
     "sparse_value:st value:t value_float:f value_floats:fs value_int:i value_ints:is value_string:s "
     "value_strings:ss", 0},
    {"Shape", 1, 1, 1, 1, "end:i start:i", 0},
    {"Gather", 2, 2, 1, 1, "axis:i", 0},
    {"Unsqueeze", 1, 2, 1, 1, "axes:is", 0},
    {"Squeeze", 1, 2, 1, 1, "axes:is", 0},
    {"Concat", 1, -1, 1, 1, "axis:i", 0},
    {"Reshape", 2, 2, 1, 1, "allowzero:i", 0},
    {"Transpose", 1, 1, 1, 1, "perm:is", 0},
    {"Split", 1, 2, 1, -1, "axis:i num_outputs:i", 0},
};

const rs_onnx_op_info *rs_onnx_op_find(const char *op_type)
{
    if (!op_type) return NULL;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(ops[i].op_type, op_type)) return &ops[i];
    return NULL;
}

int rs_onnx_op_attr_type(const char *op_type, const char *attr)
{
    const rs_onnx_op_info *op = rs_onnx_op_find(op_type);
    if (!op || !attr || !*attr) return 0;
    size_t n = strlen(attr);
    for (const char *p = op->attrs; *p;) {
        while (*p == ' ') p++;
        const char *colon = strchr(p, ':');
        if (!colon) break;
        const char *end = colon + strcspn(colon, " ");
        if ((size_t)(colon - p) == n && !strncmp(p, attr, n)) {
            size_t tl = (size_t)(end - colon - 1);
            const char *t = colon + 1;
            static const struct {
                const char *code;
                int type;
            } codes[] = {{"f", 1}, {"i", 2}, {"s", 3}, {"t", 4}, {"g", 5}, {"fs", 6}, {"is", 7}, {"ss", 8}, {"st", 11}};
            for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++)
                if (strlen(codes[k].code) == tl && !strncmp(codes[k].code, t, tl)) return codes[k].type;
            return 0;
        }
        p = end;
    }
    return 0;
}

const char *rs_onnx_attr_type_name(int type)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT",   "INT",    "STRING",         "TENSOR",
                                        "GRAPH",     "FLOATS",  "INTS",   "STRINGS",        "TENSORS",
                                        "GRAPHS",    "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO",
                                        "TYPE_PROTOS"};
    if (type < 0 || type >= (int)(sizeof names / sizeof names[0])) return "?";
    return names[type];
}

/* ---- loading ---- */

rs_status rs_onnx_model_load(const char *path, Onnx__ModelProto **out, rs_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return rs_err_set(err, RS_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size == 0) {
        fclose(f);
        return rs_err_set(err, RS_ERR_FORMAT, "%s: empty file, not an ONNX model", path);
    }
    if ((uint64_t)sb.st_size > RS_ONNX_MAX_FILE_BYTES) {
        fclose(f);
        return rs_err_set(err, RS_ERR_FORMAT, "%s: %lld bytes, over the 2 GiB a protobuf message can hold", path,
                          (long long)sb.st_size);
    }
    size_t len = (size_t)sb.st_size;
    uint8_t *buf = malloc(len);
    if (!buf) {
        fclose(f);
        return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, len);
    }
    size_t got = fread(buf, 1, len, f);
    fclose(f);
    if (got != len) {
        free(buf);
        return rs_err_set(err, RS_ERR_IO, "%s: short read (%zu of %zu bytes)", path, got, len);
    }
    /* protobuf-c checks every length against the bytes left and every wire type against the field's,
     * and returns NULL instead of reading past the buffer. */
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
    free(buf);
    if (!m) return rs_err_set(err, RS_ERR_FORMAT, "%s: not a valid ONNX ModelProto (protobuf parse failed)", path);
    *out = m;
    return RS_OK;
}

/* ---- printing ---- */

/* A string from the file, printed with control and non-ASCII bytes escaped and at most max bytes. */
static void put_str(FILE *out, const char *s, size_t max)
{
    if (!s) return;
    size_t i = 0;
    for (; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) fputc(c, out);
        else fprintf(out, "\\x%02x", c);
    }
    if (s[i]) fputs("...", out);
}

static void put_bytes(FILE *out, const ProtobufCBinaryData *b, size_t max)
{
    fputc('"', out);
    for (size_t i = 0; i < b->len && i < max; i++) {
        unsigned char c = b->data[i];
        if (c >= 0x20 && c < 0x7f && c != '"') fputc(c, out);
        else fprintf(out, "\\x%02x", c);
    }
    if (b->len > max) fputs("...", out);
    fputc('"', out);
}

static void put_shape(FILE *out, const Onnx__TensorShapeProto *sh)
{
    if (!sh) {
        fputs("(unknown rank)", out);
        return;
    }
    fputc('[', out);
    for (size_t i = 0; i < sh->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
        if (i) fputs(", ", out);
        if (i == 16 && sh->n_dim > 17) {
            fprintf(out, "... %zu dims", sh->n_dim);
            break;
        }
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            fprintf(out, "%" PRId64, d->dim_value);
        else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param)
            put_str(out, d->dim_param, 32);
        else
            fputc('?', out);
    }
    fputc(']', out);
}

static void put_dims(FILE *out, const int64_t *dims, size_t n)
{
    fputc('[', out);
    for (size_t i = 0; i < n; i++) {
        if (i == 16 && n > 17) {
            fprintf(out, ", ... %zu dims", n);
            break;
        }
        fprintf(out, "%s%" PRId64, i ? ", " : "", dims[i]);
    }
    fputc(']', out);
}

static void put_value_info(FILE *out, const Onnx__ValueInfoProto *v)
{
    fputs("  ", out);
    put_str(out, v->name ? v->name : "(no name)", 64);
    fputs("  ", out);
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type) {
        fputs("(not a tensor, or no type)\n", out);
        return;
    }
    fprintf(out, "%s ", t->tensor_type->has_elem_type ? rs_onnx_dtype_name(t->tensor_type->elem_type) : "(no dtype)");
    put_shape(out, t->tensor_type->shape);
    fputc('\n', out);
}

static void put_list_i(FILE *out, const int64_t *v, size_t n)
{
    fputc('[', out);
    for (size_t i = 0; i < n && i < 32; i++) fprintf(out, "%s%" PRId64, i ? "," : "", v[i]);
    if (n > 32) fputs(",...", out);
    fputc(']', out);
}

static void put_attr(FILE *out, const Onnx__AttributeProto *a)
{
    put_str(out, a->name ? a->name : "?", 48);
    fputc('=', out);
    switch (a->has_type ? (int)a->type : 0) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: fprintf(out, "%g", (double)a->f); break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: fprintf(out, "%" PRId64, a->i); break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: put_bytes(out, &a->s, 48); break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: put_list_i(out, a->ints, a->n_ints); break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        fputc('[', out);
        for (size_t i = 0; i < a->n_floats && i < 32; i++) fprintf(out, "%s%g", i ? "," : "", (double)a->floats[i]);
        fputs(a->n_floats > 32 ? ",...]" : "]", out);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        fputc('[', out);
        for (size_t i = 0; i < a->n_strings && i < 16; i++) {
            if (i) fputc(',', out);
            put_bytes(out, &a->strings[i], 32);
        }
        fputs(a->n_strings > 16 ? ",...]" : "]", out);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        if (a->t) {
            fprintf(out, "<tensor %s ", a->t->has_data_type ? rs_onnx_dtype_name(a->t->data_type) : "?");
            put_dims(out, a->t->dims, a->t->n_dims);
            fputc('>', out);
        } else {
            fputs("<tensor missing>", out);
        }
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
        fprintf(out, "<graph, %zu nodes>", a->g ? a->g->n_node : (size_t)0);
        break;
    default: fprintf(out, "<%s>", rs_onnx_attr_type_name(a->has_type ? (int)a->type : 0)); break;
    }
}

/* Elements of a tensor from its dims; false when a dim is negative or the product overflows. */
static bool tensor_numel(const Onnx__TensorProto *t, uint64_t *n)
{
    uint64_t p = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0) return false;
        uint64_t d = (uint64_t)t->dims[i];
        if (d && p > UINT64_MAX / d) return false;
        p *= d;
    }
    *n = p;
    return true;
}

/* Bytes the tensor's data occupies in the file, whichever field holds it. */
static uint64_t tensor_bytes(const Onnx__TensorProto *t)
{
    if (t->has_raw_data || t->raw_data.len) return t->raw_data.len;
    return t->n_float_data * 4 + t->n_int32_data * 4 + t->n_int64_data * 8 + t->n_double_data * 8 +
           t->n_uint64_data * 8;
}

void rs_onnx_summarize(const Onnx__ModelProto *m, rs_onnx_summary *out)
{
    *out = (rs_onnx_summary){0};
    out->ir_version = m->has_ir_version ? m->ir_version : 0;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if ((!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) && o->has_version) out->opset = o->version;
    }
    const Onnx__GraphProto *g = m->graph;
    if (!g) return;
    out->inputs = g->n_input;
    out->outputs = g->n_output;
    out->initializers = g->n_initializer;
    out->nodes = g->n_node;
    for (size_t i = 0; i < g->n_initializer; i++) {
        uint64_t n = 0;
        if (tensor_numel(g->initializer[i], &n)) out->values += n;
        out->bytes += tensor_bytes(g->initializer[i]);
    }
}

rs_status rs_onnx_show_model(const Onnx__ModelProto *m, FILE *out)
{
    fputs("producer     ", out);
    put_str(out, m->producer_name && *m->producer_name ? m->producer_name : "(none)", 64);
    if (m->producer_version && *m->producer_version) {
        fputc(' ', out);
        put_str(out, m->producer_version, 32);
    }
    fputc('\n', out);
    if (m->has_ir_version) fprintf(out, "ir_version   %" PRId64 "\n", m->ir_version);
    else fputs("ir_version   (missing)\n", out);
    fputs("opsets      ", out);
    if (!m->n_opset_import) fputs(" (none)", out);
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        fputc(' ', out);
        put_str(out, o->domain && *o->domain ? o->domain : "ai.onnx", 48);
        fprintf(out, " %" PRId64, o->has_version ? o->version : 0);
        if (i + 1 < m->n_opset_import) fputc(',', out);
    }
    fputc('\n', out);
    const Onnx__GraphProto *g = m->graph;
    if (!g) {
        fputs("graph        (missing)\n", out);
        return RS_OK;
    }
    fputs("graph        ", out);
    put_str(out, g->name && *g->name ? g->name : "(unnamed)", 64);
    fputc('\n', out);

    fprintf(out, "inputs (%zu)\n", g->n_input);
    for (size_t i = 0; i < g->n_input; i++) put_value_info(out, g->input[i]);
    fprintf(out, "outputs (%zu)\n", g->n_output);
    for (size_t i = 0; i < g->n_output; i++) put_value_info(out, g->output[i]);

    uint64_t total_elems = 0, total_bytes = 0;
    for (size_t i = 0; i < g->n_initializer; i++) {
        uint64_t n = 0;
        if (tensor_numel(g->initializer[i], &n)) total_elems += n;
        total_bytes += tensor_bytes(g->initializer[i]);
    }
    fprintf(out, "initializers (%zu: %" PRIu64 " values, %" PRIu64 " bytes)\n", g->n_initializer, total_elems,
            total_bytes);
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        fputs("  ", out);
        put_str(out, t->name ? t->name : "(no name)", 64);
        fprintf(out, "  %s ", t->has_data_type ? rs_onnx_dtype_name(t->data_type) : "(no dtype)");
        put_dims(out, t->dims, t->n_dims);
        fprintf(out, "  %" PRIu64 " B\n", tensor_bytes(t));
    }

    fprintf(out, "nodes (%zu)\n", g->n_node);
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        fprintf(out, "  #%-3zu ", i);
        put_str(out, n->op_type ? n->op_type : "?", 48);
        if (n->domain && *n->domain) {
            fputs(" (", out);
            put_str(out, n->domain, 48);
            fputc(')', out);
        }
        if (n->name && *n->name) {
            fputs(" '", out);
            put_str(out, n->name, 64);
            fputc('\'', out);
        }
        fputs("  ", out);
        for (size_t k = 0; k < n->n_input; k++) {
            if (k) fputs(", ", out);
            put_str(out, n->input[k] && *n->input[k] ? n->input[k] : "-", 64);
        }
        fputs(" -> ", out);
        for (size_t k = 0; k < n->n_output; k++) {
            if (k) fputs(", ", out);
            put_str(out, n->output[k] && *n->output[k] ? n->output[k] : "-", 64);
        }
        for (size_t k = 0; k < n->n_attribute; k++) {
            fputs(k ? " " : "   ", out);
            put_attr(out, n->attribute[k]);
        }
        fputc('\n', out);
    }
    return RS_OK;
}

rs_status rs_onnx_show(const char *path, FILE *out, rs_err *err)
{
    Onnx__ModelProto *m;
    rs_status st = rs_onnx_model_load(path, &m, err);
    if (st) return st;
    fputs("file         ", out);
    put_str(out, path, 256);
    fputc('\n', out);
    rs_onnx_show_model(m, out);
    onnx__model_proto__free_unpacked(m, NULL);
    return RS_OK;
}

/* ---- checking ---- */

/* The names defined so far: an open-addressing set of borrowed strings (the model owns them). */
typedef struct name_set {
    const char **slot;
    int *who; /* -2 graph input, -1 initializer, >= 0 the node */
    size_t cap, n;
} name_set;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool set_init(name_set *s, size_t expect)
{
    s->cap = 16;
    while (s->cap < expect * 2 + 16) s->cap *= 2;
    s->n = 0;
    s->slot = calloc(s->cap, sizeof *s->slot);
    s->who = calloc(s->cap, sizeof *s->who);
    return s->slot && s->who;
}

static void set_free(name_set *s)
{
    free(s->slot);
    free(s->who);
}

/* Index of name's slot: where it is, or the empty slot where it would go. */
static size_t set_find(const name_set *s, const char *name)
{
    size_t i = (size_t)hash_str(name) & (s->cap - 1);
    while (s->slot[i] && strcmp(s->slot[i], name)) i = (i + 1) & (s->cap - 1);
    return i;
}

static bool set_has(const name_set *s, const char *name, int *who)
{
    size_t i = set_find(s, name);
    if (s->slot[i] && who) *who = s->who[i];
    return s->slot[i] != NULL;
}

/* Adds name (capacity was sized for every name the graph can define, so no growth is needed). */
static void set_add(name_set *s, const char *name, int who)
{
    if (s->n * 2 >= s->cap) return;
    size_t i = set_find(s, name);
    if (s->slot[i]) return;
    s->slot[i] = name;
    s->who[i] = who;
    s->n++;
}

typedef struct checker {
    FILE *out;
    int count;
} checker;

static void finding(checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void finding(checker *c, const char *fmt, ...)
{
    c->count++;
    if (!c->out) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(c->out, fmt, ap);
    va_end(ap);
    fputc('\n', c->out);
}

/* A name from the file made safe to quote in a finding (escaped, cut at 64 bytes). */
static const char *q(const char *s, char *buf, size_t n)
{
    if (!s) return "(none)";
    size_t o = 0;
    for (size_t i = 0; s[i] && o + 5 < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (i == 64) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (ch >= 0x20 && ch < 0x7f) buf[o++] = (char)ch;
        else o += (size_t)snprintf(buf + o, n - o, "\\x%02x", ch);
    }
    buf[o] = 0;
    return buf;
}

static void check_value_info(checker *c, const char *what, size_t i, const Onnx__ValueInfoProto *v)
{
    char b[320];
    if (!v->name || !*v->name) {
        finding(c, "graph %s #%zu has no name", what, i);
        return;
    }
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type) {
        finding(c, "graph %s '%s' has no tensor type", what, q(v->name, b, sizeof b));
        return;
    }
    const Onnx__TypeProto__Tensor *tt = t->tensor_type;
    if (!tt->has_elem_type || tt->elem_type <= 0 || !strcmp(rs_onnx_dtype_name(tt->elem_type), "?"))
        finding(c, "graph %s '%s': element type %d is not a valid TensorProto.DataType", what,
                q(v->name, b, sizeof b), tt->has_elem_type ? tt->elem_type : 0);
    if (tt->shape)
        for (size_t k = 0; k < tt->shape->n_dim; k++) {
            const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
            if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value < 0)
                finding(c, "graph %s '%s': dimension %zu is %" PRId64 "; sizes are >= 0 (use a name for unknown)",
                        what, q(v->name, b, sizeof b), k, d->dim_value);
        }
}

static void check_tensor(checker *c, const char *what, const Onnx__TensorProto *t)
{
    char b[320];
    const char *name = q(t->name, b, sizeof b);
    if (!t->has_data_type || t->data_type <= 0 || !strcmp(rs_onnx_dtype_name(t->data_type), "?")) {
        finding(c, "%s '%s': data type %d is not a valid TensorProto.DataType", what, name,
                t->has_data_type ? t->data_type : 0);
        return;
    }
    uint64_t n;
    if (!tensor_numel(t, &n)) {
        finding(c, "%s '%s': dims hold a negative size or their product overflows", what, name);
        return;
    }
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) return;
    int dt = t->data_type;
    if (t->has_raw_data || t->raw_data.len) {
        if (dt == RS_ONNX_UNDEFINED || dt == 8) {
            finding(c, "%s '%s': raw_data cannot hold %s elements", what, name, rs_onnx_dtype_name(dt));
            return;
        }
        uint64_t esz = rs_onnx_dtype_size(dt);
        uint64_t want = esz ? n * esz : (n + 1) / 2; /* 4-bit types pack two elements a byte */
        if (esz && n > UINT64_MAX / esz) want = UINT64_MAX;
        if (t->raw_data.len != want)
            finding(c, "%s '%s': raw_data has %zu bytes, but %" PRIu64 " %s elements need %" PRIu64, what, name,
                    t->raw_data.len, n, rs_onnx_dtype_name(dt), want);
        return;
    }
    size_t have;
    const char *field;
    uint64_t per = 1;
    switch (dt) {
    case 1: field = "float_data"; have = t->n_float_data; break;
    case 14: field = "float_data"; have = t->n_float_data; per = 2; break;
    case 7: field = "int64_data"; have = t->n_int64_data; break;
    case 8: field = "string_data"; have = t->n_string_data; break;
    case 11: field = "double_data"; have = t->n_double_data; break;
    case 15: field = "double_data"; have = t->n_double_data; per = 2; break;
    case 12: case 13: field = "uint64_data"; have = t->n_uint64_data; break;
    default: field = "int32_data"; have = t->n_int32_data; break;
    }
    if (n > UINT64_MAX / per || (uint64_t)have != n * per)
        finding(c, "%s '%s': %s has %zu values, but its dims give %" PRIu64 " elements%s", what, name, field, have,
                n, per == 2 ? " (x2 for complex)" : "");
}

/* Whether exactly the field that the attribute's type names is set (empty lists count as set). */
static int attr_fields_set(const Onnx__AttributeProto *a, int *which)
{
    int n = 0;
    if (a->has_f) n++, *which = 1;
    if (a->has_i) n++, *which = 2;
    if (a->has_s) n++, *which = 3;
    if (a->t) n++, *which = 4;
    if (a->g) n++, *which = 5;
    if (a->n_floats) n++, *which = 6;
    if (a->n_ints) n++, *which = 7;
    if (a->n_strings) n++, *which = 8;
    if (a->n_tensors) n++, *which = 9;
    if (a->n_graphs) n++, *which = 10;
    return n;
}

/* An attribute that an operator had until `until` (exclusive) and then took as an input instead. */
static bool attr_retired(const char *op, const char *attr, int64_t opset)
{
    if (strcmp(attr, "axes")) return false;
    if (!strcmp(op, "ReduceMean")) return opset >= 18;
    if (!strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze")) return opset >= 13;
    return false;
}

static void check_attrs(checker *c, size_t i, const Onnx__NodeProto *n, const rs_onnx_op_info *op, int64_t opset)
{
    char b1[320], b2[320], b3[320];
    const char *opn = q(n->op_type, b1, sizeof b1);
    for (size_t k = 0; k < n->n_attribute; k++) {
        const Onnx__AttributeProto *a = n->attribute[k];
        if (!a->name || !*a->name) {
            finding(c, "node #%zu (%s): attribute #%zu has no name", i, opn, k);
            continue;
        }
        const char *an = q(a->name, b2, sizeof b2);
        for (size_t j = 0; j < k; j++)
            if (n->attribute[j]->name && !strcmp(n->attribute[j]->name, a->name)) {
                finding(c, "node #%zu (%s): attribute '%s' appears twice", i, opn, an);
                break;
            }
        if (a->ref_attr_name && *a->ref_attr_name) {
            finding(c, "node #%zu (%s): attribute '%s' refers to a function attribute (ref_attr_name), which the "
                       "main graph cannot have", i, opn, an);
            continue;
        }
        int type = a->has_type ? (int)a->type : 0;
        if (type == 0) {
            finding(c, "node #%zu (%s): attribute '%s' has no type (required since IR version 2)", i, opn, an);
            continue;
        }
        int which = 0, set = attr_fields_set(a, &which);
        bool list = type >= 6 && type <= 10;
        if (set > 1 || (set == 1 && which != type) || (set == 0 && !list && type <= 5))
            finding(c, "node #%zu (%s): attribute '%s' says %s but holds %s", i, opn, an, rs_onnx_attr_type_name(type),
                    set == 0 ? "no value" : set > 1 ? "several values" : rs_onnx_attr_type_name(which));
        if (!op) continue;
        int want = rs_onnx_op_attr_type(op->op_type, a->name);
        if (!want)
            finding(c, "node #%zu (%s): %s has no attribute '%s'%s%s", i, opn, op->op_type, an,
                    *op->attrs ? "; it takes " : "", *op->attrs ? q(op->attrs, b3, sizeof b3) : "");
        else if (want != type)
            finding(c, "node #%zu (%s): attribute '%s' must be %s, not %s", i, opn, an, rs_onnx_attr_type_name(want),
                    rs_onnx_attr_type_name(type));
        else if (opset > 0 && opset < 18 && !strcmp(op->op_type, "Split") && !strcmp(a->name, "num_outputs"))
            finding(c, "node #%zu (%s): Split has 'num_outputs' from opset 18; the model imports opset %" PRId64, i,
                    opn, opset);
        else if (opset > 0 && attr_retired(op->op_type, a->name, opset))
            finding(c, "node #%zu (%s): in opset %" PRId64 " '%s' is an input of %s, not an attribute", i, opn, opset,
                    an, op->op_type);
    }
    if (!op) return;
    bool has_kernel = false;
    int values = 0;
    for (size_t k = 0; k < n->n_attribute; k++) {
        const char *an = n->attribute[k]->name;
        if (!an) continue;
        if (!strcmp(an, "kernel_shape")) has_kernel = true;
        if (!strncmp(an, "value", 5) || !strcmp(an, "sparse_value")) values++;
    }
    if ((!strcmp(op->op_type, "MaxPool") || !strcmp(op->op_type, "AveragePool")) && !has_kernel)
        finding(c, "node #%zu (%s): required attribute 'kernel_shape' is missing", i, opn);
    if (!strcmp(op->op_type, "Constant") && values != 1)
        finding(c, "node #%zu (Constant): needs exactly one value attribute (value, value_float, ...), has %d", i,
                values);
}

/* Does the model import the opset of domain d ("" and "ai.onnx" are the same one)? */
static bool imports(const Onnx__ModelProto *m, const char *d)
{
    bool std = !d || !*d || !strcmp(d, "ai.onnx");
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *od = m->opset_import[i]->domain;
        bool ostd = !od || !*od || !strcmp(od, "ai.onnx");
        if (std ? ostd : (od && !strcmp(od, d))) return true;
    }
    return false;
}

static const char *who_str(int who, char *buf, size_t n)
{
    if (who == -2) return "a graph input";
    if (who == -1) return "an initializer";
    snprintf(buf, n, "node #%d", who);
    return buf;
}

int rs_onnx_check_model(const Onnx__ModelProto *m, FILE *out)
{
    checker c = {.out = out};
    char b1[320], b2[320], wb[32];
    if (!m->has_ir_version) finding(&c, "ir_version is missing (the ONNX checker requires it)");
    else if (m->ir_version < 3)
        finding(&c, "ir_version %" PRId64 " is too old: opset_import needs IR version 3 or later", m->ir_version);
    if (!m->n_opset_import)
        finding(&c, "opset_import is missing: the model must say which ONNX opset its nodes use "
                    "(e.g. domain \"\" version 17)");
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!o->has_version || o->version < 1)
            finding(&c, "opset_import #%zu (domain '%s') has no valid version", i,
                    q(o->domain ? o->domain : "", b1, sizeof b1));
        for (size_t j = 0; j < i; j++) {
            const char *a = o->domain ? o->domain : "";
            const char *b = m->opset_import[j]->domain ? m->opset_import[j]->domain : "";
            if (!strcmp(a, b)) {
                finding(&c, "opset_import lists domain '%s' twice", q(a, b1, sizeof b1));
                break;
            }
        }
    }
    int64_t opset = 0; /* of the standard domain; 0 when not imported */
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if ((!d || !*d || !strcmp(d, "ai.onnx")) && m->opset_import[i]->has_version)
            opset = m->opset_import[i]->version;
    }
    const Onnx__GraphProto *g = m->graph;
    if (!g) {
        finding(&c, "the model has no graph");
        return c.count;
    }
    size_t total = g->n_input + g->n_initializer;
    for (size_t i = 0; i < g->n_node; i++) total += g->node[i]->n_output;
    name_set defined;
    if (!set_init(&defined, total)) {
        set_free(&defined);
        finding(&c, "out of memory checking the graph");
        return c.count;
    }

    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *v = g->input[i];
        check_value_info(&c, "input", i, v);
        if (!v->name || !*v->name) continue;
        if (set_has(&defined, v->name, NULL))
            finding(&c, "graph input '%s' is declared twice", q(v->name, b1, sizeof b1));
        set_add(&defined, v->name, -2);
    }
    /* Initializers may repeat a graph input's name (IR >= 4: a default the caller may override). */
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !*t->name) {
            finding(&c, "initializer #%zu has no name", i);
            continue;
        }
        check_tensor(&c, "initializer", t);
        for (size_t j = 0; j < i; j++)
            if (g->initializer[j]->name && !strcmp(g->initializer[j]->name, t->name)) {
                finding(&c, "initializer '%s' is defined twice", q(t->name, b1, sizeof b1));
                break;
            }
        set_add(&defined, t->name, -1);
    }

    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n->op_type || !*n->op_type) {
            finding(&c, "node #%zu has no op_type", i);
            continue;
        }
        const char *opn = q(n->op_type, b1, sizeof b1);
        bool std = !n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx");
        const rs_onnx_op_info *op = std ? rs_onnx_op_find(n->op_type) : NULL;
        if (m->n_opset_import && !imports(m, n->domain))
            finding(&c, "node #%zu (%s): domain '%s' is not in opset_import", i, opn,
                    q(n->domain ? n->domain : "", b2, sizeof b2));
        if (op && opset > 0 && opset < op->since)
            finding(&c, "node #%zu (%s): %s needs opset %d or later; the model imports opset %" PRId64, i, opn,
                    op->op_type, op->since, opset);
        if (std && !op)
            finding(&c, "node #%zu: unknown operator '%s' in the standard domain (not one ringside knows or "
                        "checks)", i, opn);
        if (op) {
            if ((int)n->n_input < op->min_in || (op->max_in >= 0 && (int)n->n_input > op->max_in))
                finding(&c, "node #%zu (%s): %zu inputs; %s takes %d..%d", i, opn, n->n_input, op->op_type,
                        op->min_in, op->max_in);
            if ((int)n->n_output < op->min_out || (op->max_out >= 0 && (int)n->n_output > op->max_out))
                finding(&c, "node #%zu (%s): %zu outputs; %s gives %d..%d", i, opn, n->n_output, op->op_type,
                        op->min_out, op->max_out);
        }
        for (size_t k = 0; k < n->n_input; k++) {
            const char *in = n->input[k];
            if (!in || !*in) continue; /* an optional input left out */
            if (!set_has(&defined, in, NULL))
                finding(&c, "node #%zu (%s): input '%s' is not defined before it is used (not a graph input, "
                            "an initializer, or an output of an earlier node)",
                        i, opn, q(in, b2, sizeof b2));
        }
        check_attrs(&c, i, n, op, opset);
        if (!n->n_output) finding(&c, "node #%zu (%s) has no outputs", i, opn);
        for (size_t k = 0; k < n->n_output; k++) {
            const char *o = n->output[k];
            if (!o || !*o) continue;
            int who;
            if (set_has(&defined, o, &who))
                finding(&c, "node #%zu (%s): output '%s' is already defined by %s; every value is assigned once",
                        i, opn, q(o, b2, sizeof b2), who_str(who, wb, sizeof wb));
            else set_add(&defined, o, (int)i);
        }
    }

    if (!g->n_output) finding(&c, "the graph has no outputs");
    for (size_t i = 0; i < g->n_output; i++) {
        const Onnx__ValueInfoProto *v = g->output[i];
        check_value_info(&c, "output", i, v);
        if (!v->name || !*v->name) continue;
        if (!set_has(&defined, v->name, NULL))
            finding(&c, "graph output '%s' is not produced by any node, input or initializer",
                    q(v->name, b1, sizeof b1));
        for (size_t j = 0; j < i; j++)
            if (g->output[j]->name && !strcmp(g->output[j]->name, v->name)) {
                finding(&c, "graph output '%s' is declared twice", q(v->name, b1, sizeof b1));
                break;
            }
    }
    set_free(&defined);
    return c.count;
}

rs_status rs_onnx_check(const char *path, FILE *out, int *findings, rs_err *err)
{
    if (findings) *findings = 0;
    Onnx__ModelProto *m;
    rs_status st = rs_onnx_model_load(path, &m, err);
    if (st) return st;
    int n = rs_onnx_check_model(m, out);
    if (out) {
        char b[320];
        if (n) fprintf(out, "%s: %d finding%s\n", q(path, b, sizeof b), n, n == 1 ? "" : "s");
        else {
            size_t nn = m->graph ? m->graph->n_node : 0, ni = m->graph ? m->graph->n_initializer : 0;
            fprintf(out, "%s: ok (ir_version %" PRId64 ", %zu node%s, %zu initializer%s)\n", q(path, b, sizeof b),
                    m->ir_version, nn, nn == 1 ? "" : "s", ni, ni == 1 ? "" : "s");
        }
    }
    onnx__model_proto__free_unpacked(m, NULL);
    if (findings) *findings = n;
    return RS_OK;
}
