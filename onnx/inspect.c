/* `onnx show`: a file read back and printed (`onnx check` is check.c).
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

bool rs_onnx_tensor_numel(const Onnx__TensorProto *t, uint64_t *n)
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
        if (rs_onnx_tensor_numel(g->initializer[i], &n)) out->values += n;
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
        if (rs_onnx_tensor_numel(g->initializer[i], &n)) total_elems += n;
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
        } else if (!rs_onnx_op_find(n->op_type)) {
            fputs(" (unknown to ringside)", out); /* what import and `onnx check` would refuse */
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
