/* `onnx check`: a file checked the way onnx.checker (full_check) would, for the operators ringside knows:
 * IR and opset present, values defined before use and once, tensors as long as their shapes say, each
 * node's operator, arity and attributes as its registry entry (ops.c) has them for the model's opset,
 * and the shapes the importer's rules can infer from what the file fixes (a Gemm whose inner dimensions
 * differ). Everything read from the file may be absent or hostile, as in inspect.c. */
#include "onnx/inspect.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "onnx/build.h"
#include "onnx/external.h"
#include "onnx/ops.h"

/* The names defined so far: an open-addressing set of borrowed strings (the model owns them). */
typedef struct name_set {
    const char **slot;
    int *who;       /* -2 graph input, -1 initializer, >= 0 the node */
    rs_dims *shape; /* what the checker knows of the value's shape: rank -1 unknown, a dim < 0 a name */
    const Onnx__TensorProto **tensor; /* an initializer's own tensor (borrowed), NULL for the others */
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
    s->shape = malloc(s->cap * sizeof *s->shape); /* owned by the set, with slot and who */
    s->tensor = calloc(s->cap, sizeof *s->tensor);
    return s->slot && s->who && s->shape && s->tensor;
}

static void set_free(name_set *s)
{
    free(s->slot);
    free(s->who);
    free(s->shape);
    free(s->tensor);
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
    s->shape[i].rank = -1;
    s->n++;
}

/* The shape known for name; NULL when it is not (or name is not defined). */
static const rs_dims *set_shape(const name_set *s, const char *name)
{
    size_t i = set_find(s, name);
    return s->slot[i] && s->shape[i].rank >= 0 ? &s->shape[i] : NULL;
}

static void set_put_shape(name_set *s, const char *name, const rs_dims *shape)
{
    size_t i = set_find(s, name);
    if (s->slot[i]) s->shape[i] = *shape;
}

typedef struct checker {
    FILE *out;
    int count;
    const char *dir; /* the model's folder, where its external data files are; NULL for a model in memory */
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
    if (!tt->shape)
        finding(c, "graph %s '%s' has no shape (the ONNX checker wants one on the main graph's inputs and outputs, "
                   "if only an empty one)", what, q(v->name, b, sizeof b));
    else
        for (size_t k = 0; k < tt->shape->n_dim; k++) {
            const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
            if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value < 0)
                finding(c, "graph %s '%s': dimension %zu is %" PRId64 "; sizes are >= 0 (use a name for unknown)",
                        what, q(v->name, b, sizeof b), k, d->dim_value);
        }
}

/* Data in another file, as onnx.checker wants it: a location inside the model's folder, a regular
 * file there (not a link), offset and length within it. */
static void check_external(checker *c, const char *what, const char *name, const Onnx__TensorProto *t)
{
    char b[320];
    rs_onnx_ext e;
    rs_onnx_ext_fields(t, 0, &e);
    if (e.bad_key) {
        finding(c, "%s '%s': external data %s '%s' is not a number", what, name, e.bad_key, q(e.bad_val, b, sizeof b));
        return;
    }
    if (!e.loc || !*e.loc) {
        finding(c, "%s '%s' is marked external but names no location", what, name);
        return;
    }
    if (rs_onnx_ext_escapes(e.loc)) {
        finding(c, "%s '%s': external data location '%s' leaves the model's folder (absolute or with '..')", what,
                name, q(e.loc, b, sizeof b));
        return;
    }
    if (!c->dir) return; /* a model in memory: nothing to look at */
    char path[4096];
    struct stat sb;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", c->dir, e.loc) >= sizeof path || lstat(path, &sb) != 0)
        finding(c, "%s '%s': external data file '%s' is missing", what, name, q(e.loc, b, sizeof b));
    else if (S_ISLNK(sb.st_mode))
        finding(c, "%s '%s': external data file '%s' is a symbolic link (the ONNX checker takes regular files only)",
                what, name, q(e.loc, b, sizeof b));
    else if (!S_ISREG(sb.st_mode))
        finding(c, "%s '%s': external data '%s' is not a regular file", what, name, q(e.loc, b, sizeof b));
    else if (e.off > (uint64_t)sb.st_size || e.len > (uint64_t)sb.st_size - e.off)
        finding(c, "%s '%s': external data (offset %" PRIu64 ", length %" PRIu64 ") runs past the end of '%s' "
                   "(%lld bytes)", what, name, e.off, e.len, q(e.loc, b, sizeof b), (long long)sb.st_size);
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
    if (!rs_onnx_tensor_numel(t, &n)) {
        finding(c, "%s '%s': dims hold a negative size or their product overflows", what, name);
        return;
    }
    if (rs_onnx_ext_is(t)) {
        check_external(c, what, name, t);
        return;
    }
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

/* The attribute names op has at opset, for a finding ("alpha, beta, transA, transB"). */
static const char *attr_names(const rs_onnx_op_def *op, int64_t opset, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (const rs_onnx_attr_def *d = op->attrs; d->name && o < n; d++)
        if (rs_onnx_op_attr(op, d->name, opset) == d)
            o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? ", " : "", d->name);
    return buf;
}

/* One attribute of a node against its operator's entry at the model's opset. */
static void check_attr_def(checker *c, size_t i, const char *opn, const Onnx__AttributeProto *a, int type,
                           const rs_onnx_op_def *op, int64_t opset)
{
    char b2[320], b3[320];
    const char *an = q(a->name, b2, sizeof b2);
    const rs_onnx_attr_def *d = rs_onnx_op_attr(op, a->name, opset), *any = rs_onnx_op_attr(op, a->name, 0);
    if (!any)
        finding(c, "node #%zu (%s): %s has no attribute '%s'%s%s", i, opn, op->name, an,
                op->attrs[0].name ? "; it takes " : "", attr_names(op, opset, b3, sizeof b3));
    else if ((d ? d : any)->type != type)
        finding(c, "node #%zu (%s): attribute '%s' must be %s, not %s", i, opn, an,
                rs_onnx_attr_type_name((d ? d : any)->type), rs_onnx_attr_type_name(type));
    else if (!d && any->since && opset < any->since)
        finding(c, "node #%zu (%s): %s has '%s' from opset %d; the model imports opset %" PRId64, i, opn, op->name,
                an, any->since, opset);
    else if (!d)
        finding(c, "node #%zu (%s): in opset %" PRId64 " '%s' is %s of %s, not an attribute", i, opn, opset, an,
                any->to_input ? "an input" : "no longer an attribute", op->name);
}

/* The node's attributes: named, typed, once, holding the value their type says, and (for an operator
 * ringside knows) ones its entry lists for the opset, the required ones present. Returns the count. */
static int check_attrs(checker *c, size_t i, const Onnx__NodeProto *n, const rs_onnx_op_def *op, int64_t opset)
{
    char b1[320], b2[320];
    int before = c->count;
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
        if (op) check_attr_def(c, i, opn, a, type, op, opset > 0 ? opset : 0);
    }
    for (const rs_onnx_attr_def *d = op ? op->attrs : NULL; d && d->name; d++) {
        bool applies = opset > 0 ? rs_onnx_op_attr(op, d->name, opset) == d : !d->since && !d->until;
        bool present = false;
        for (size_t k = 0; k < n->n_attribute && !present; k++)
            present = n->attribute[k]->name && !strcmp(n->attribute[k]->name, d->name);
        if (d->required && applies && !present)
            finding(c, "node #%zu (%s): required attribute '%s' is missing", i, opn, d->name);
    }
    return c->count - before;
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

/* The standard domain's opset (0 when not imported), after checking the IR version and opset_import. */
static int64_t check_header(checker *c, const Onnx__ModelProto *m)
{
    char b1[320];
    if (!m->has_ir_version) finding(c, "ir_version is missing (the ONNX checker requires it)");
    else if (m->ir_version < 3)
        finding(c, "ir_version %" PRId64 " is too old: opset_import needs IR version 3 or later", m->ir_version);
    if (!m->n_opset_import)
        finding(c, "opset_import is missing: the model must say which ONNX opset its nodes use "
                   "(e.g. domain \"\" version 17)");
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!o->has_version || o->version < 1)
            finding(c, "opset_import #%zu (domain '%s') has no valid version", i,
                    q(o->domain ? o->domain : "", b1, sizeof b1));
        for (size_t j = 0; j < i; j++) {
            const char *a = o->domain ? o->domain : "";
            const char *b = m->opset_import[j]->domain ? m->opset_import[j]->domain : "";
            if (!strcmp(a, b)) {
                finding(c, "opset_import lists domain '%s' twice", q(a, b1, sizeof b1));
                break;
            }
        }
    }
    int64_t opset = 0;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if ((!d || !*d || !strcmp(d, "ai.onnx")) && m->opset_import[i]->has_version)
            opset = m->opset_import[i]->version;
    }
    return opset;
}

/* A declared value's shape as the checker follows it: a name (or nothing) is an unknown dim. */
static void put_declared(name_set *defined, const Onnx__ValueInfoProto *v)
{
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type || !t->tensor_type->shape)
        return;
    const Onnx__TensorShapeProto *sh = t->tensor_type->shape;
    if (sh->n_dim > RS_DIMS_MAX) return;
    rs_dims s = {.rank = (int)sh->n_dim};
    for (size_t k = 0; k < sh->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
        bool val = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0;
        s.d[k] = val ? d->dim_value : -1;
    }
    set_put_shape(defined, v->name, &s);
}

/* Graph inputs and initializers: declared once each, well formed; their shapes start the following. */
static void check_sources(checker *c, const Onnx__GraphProto *g, name_set *defined)
{
    char b1[320];
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *v = g->input[i];
        check_value_info(c, "input", i, v);
        if (!v->name || !*v->name) continue;
        if (set_has(defined, v->name, NULL))
            finding(c, "graph input '%s' is declared twice", q(v->name, b1, sizeof b1));
        set_add(defined, v->name, -2);
        put_declared(defined, v);
    }
    /* Initializers may repeat a graph input's name (IR >= 4: a default the caller may override). */
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !*t->name) {
            finding(c, "initializer #%zu has no name", i);
            continue;
        }
        check_tensor(c, "initializer", t);
        for (size_t j = 0; j < i; j++)
            if (g->initializer[j]->name && !strcmp(g->initializer[j]->name, t->name)) {
                finding(c, "initializer '%s' is defined twice", q(t->name, b1, sizeof b1));
                break;
            }
        set_add(defined, t->name, -1);
        size_t slot = set_find(defined, t->name);
        if (defined->slot[slot] && defined->who[slot] == -1) defined->tensor[slot] = t;
        bool dims_ok = t->n_dims <= RS_DIMS_MAX;
        for (size_t k = 0; k < t->n_dims && dims_ok; k++) dims_ok = t->dims[k] >= 0;
        if (!dims_ok) continue;
        rs_dims s = {.rank = (int)t->n_dims};
        for (size_t k = 0; k < t->n_dims; k++) s.d[k] = t->dims[k];
        set_put_shape(defined, t->name, &s);
    }
}

/* Arity against the registry entry. */
static int check_arity(checker *c, size_t i, const char *opn, const Onnx__NodeProto *n, const rs_onnx_op_def *op)
{
    int before = c->count;
    if ((int)n->n_input < op->min_in || (op->max_in >= 0 && (int)n->n_input > op->max_in))
        finding(c, "node #%zu (%s): %zu inputs; %s takes %d..%d", i, opn, n->n_input, op->name, op->min_in,
                op->max_in);
    if ((int)n->n_output < op->min_out || (op->max_out >= 0 && (int)n->n_output > op->max_out))
        finding(c, "node #%zu (%s): %zu outputs; %s gives %d..%d", i, opn, n->n_output, op->name, op->min_out,
                op->max_out);
    return c->count - before;
}

/* The operator's shape rule on what is known of the inputs (a node with other findings is not
 * inferred: its attributes cannot be trusted), and output 0's shape for the nodes after it. */
static void check_shape(checker *c, size_t i, const char *opn, const Onnx__NodeProto *n, const rs_onnx_op_def *op,
                        int64_t opset, name_set *defined)
{
    if (!op->shape || n->n_input > 8) return;
    rs_onnx_shape_io io = {.node = n, .opset = opset, .nin = (int)n->n_input};
    for (size_t k = 0; k < n->n_input; k++) {
        if (!n->input[k] || !*n->input[k]) continue;
        io.in[k] = set_shape(defined, n->input[k]);
        size_t slot = set_find(defined, n->input[k]);
        io.cin[k] = defined->slot[slot] ? defined->tensor[slot] : NULL;
    }
    if (!op->shape(&io)) finding(c, "node #%zu (%s): %s", i, opn, io.msg);
    else if (io.out_known && n->n_output && n->output[0] && *n->output[0]) set_put_shape(defined, n->output[0], &io.out);
}

static void check_node(checker *c, const Onnx__ModelProto *m, size_t i, int64_t opset, name_set *defined)
{
    const Onnx__NodeProto *n = m->graph->node[i];
    char b1[320], b2[320], wb[32];
    if (!n->op_type || !*n->op_type) {
        finding(c, "node #%zu has no op_type", i);
        return;
    }
    const char *opn = q(n->op_type, b1, sizeof b1);
    int before = c->count;
    bool std = !n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx");
    const rs_onnx_op_def *op = std ? rs_onnx_op_find(n->op_type) : NULL;
    if (m->n_opset_import && !imports(m, n->domain))
        finding(c, "node #%zu (%s): domain '%s' is not in opset_import", i, opn,
                q(n->domain ? n->domain : "", b2, sizeof b2));
    if (op && opset > 0 && opset < op->since)
        finding(c, "node #%zu (%s): %s needs opset %d or later; the model imports opset %" PRId64, i, opn, op->name,
                op->since, opset);
    if (std && !op)
        finding(c, "node #%zu: unknown operator '%s' in the standard domain (not one ringside knows or "
                   "checks)", i, opn);
    if (op) check_arity(c, i, opn, n, op);
    for (size_t k = 0; k < n->n_input; k++) {
        const char *in = n->input[k];
        if (!in || !*in) continue; /* an optional input left out */
        if (!set_has(defined, in, NULL))
            finding(c, "node #%zu (%s): input '%s' is not defined before it is used (not a graph input, "
                       "an initializer, or an output of an earlier node)", i, opn, q(in, b2, sizeof b2));
    }
    check_attrs(c, i, n, op, opset);
    if (!n->n_output) finding(c, "node #%zu (%s) has no outputs", i, opn);
    for (size_t k = 0; k < n->n_output; k++) {
        const char *o = n->output[k];
        if (!o || !*o) continue;
        int who;
        if (set_has(defined, o, &who))
            finding(c, "node #%zu (%s): output '%s' is already defined by %s; every value is assigned once", i, opn,
                    q(o, b2, sizeof b2), who_str(who, wb, sizeof wb));
        else set_add(defined, o, (int)i);
    }
    if (op && c->count == before) check_shape(c, i, opn, n, op, opset, defined);
}

static int check_model_in(const Onnx__ModelProto *m, FILE *out, const char *dir)
{
    checker c = {.out = out, .dir = dir};
    char b1[320];
    int64_t opset = check_header(&c, m); /* of the standard domain; 0 when not imported */
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
    check_sources(&c, g, &defined);
    for (size_t i = 0; i < g->n_node; i++) check_node(&c, m, i, opset, &defined);
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

int rs_onnx_check_model(const Onnx__ModelProto *m, FILE *out) { return check_model_in(m, out, NULL); }

rs_status rs_onnx_check(const char *path, FILE *out, int *findings, rs_err *err)
{
    if (findings) *findings = 0;
    Onnx__ModelProto *m;
    rs_status st = rs_onnx_model_load(path, &m, err);
    if (st) return st;
    /* external data files are looked up beside the model */
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int n = check_model_in(m, out, dir);
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
