/* The tensors of an ONNX file as import values: dims checked, data read from whichever field holds it
 * or from an external data file beside the model (never above its folder), converted to float or
 * int64 constants. Split from import.c, which builds the graph from them. */
#include "import_internal.h"
#include "onnx/external.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rs_status rs_onnx_check_dims(imp *p, const char *what, size_t nd, const int64_t *dims, rs_dims *s)
{
    if (nd > RS_DIMS_MAX)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "%s has rank %zu; at most %d is supported", what, nd, RS_DIMS_MAX);
    s->rank = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        if (dims[i] < 0) return rs_onnx_fail(p, RS_ERR_FORMAT, "%s has a negative dimension %lld", what, (long long)dims[i]);
        s->d[i] = dims[i];
    }
    if (rs_dims_numel(s, 1) < 0)
        return rs_onnx_fail(p, RS_ERR_FORMAT, "%s declares more than 2^31 elements", what);
    return RS_OK;
}

const char *rs_onnx_import_dtype_name(int t)
{
    static const char *const n[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
                                    "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
                                    "complex128", "bfloat16"};
    return t >= 0 && t < (int)(sizeof n / sizeof *n) ? n[t] : "unknown";
}

/* The bytes of a tensor kept outside the model (data_location EXTERNAL, as torch's dynamo exporter and
 * onnx.save(save_as_external_data=True) write): external_data names the file (relative to the model's
 * folder, never above it), an offset and a length. want is what the tensor's shape and type need. */
static rs_status read_external(imp *p, const Onnx__TensorProto *t, const char *what, size_t want, uint8_t **out)
{
    *out = NULL;
    if (t->raw_data.len || t->n_float_data || t->n_int32_data || t->n_int64_data || t->n_double_data)
        return rs_onnx_fail(p, RS_ERR_FORMAT, "%s has both external and inline data", what);
    rs_onnx_ext e;
    rs_onnx_ext_fields(t, want, &e);
    if (e.bad_key)
        return rs_onnx_fail(p, RS_ERR_FORMAT, "%s: external data %s '%.40s' is not a number", what, e.bad_key, e.bad_val);
    const char *loc = e.loc;
    uint64_t off = e.off, len = e.len;
    if (!loc || !*loc) return rs_onnx_fail(p, RS_ERR_FORMAT, "%s is marked external but names no location", what);
    if (!p->dir)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "%s keeps its data in '%.100s', and a model read from memory has no "
                            "folder to find it in; load the file by its path", what, loc);
    /* the file must sit in the model's folder or below it: no absolute paths, no '..' component */
    if (rs_onnx_ext_escapes(loc))
        return rs_onnx_fail(p, RS_ERR_FORMAT, "%s: external data location '%.100s' leaves the model's folder "
                            "(absolute or with '..'); refused", what, loc);
    if (len != want)
        return rs_onnx_fail(p, RS_ERR_FORMAT, "%s: external data length %llu does not match its shape and type (%zu "
                            "bytes)", what, (unsigned long long)len, want);
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", p->dir, loc) >= sizeof path)
        return rs_onnx_fail(p, RS_ERR_FORMAT, "%s: external data path too long", what);
    /* a link inside the folder must not lead out of it either */
    char *real_dir = realpath(p->dir, NULL), *real_file = realpath(path, NULL);
    if (!real_file) {
        int e = errno;
        free(real_dir);
        return rs_onnx_fail(p, RS_ERR_IO, "%s: external data file '%s': %s", what, path, strerror(e));
    }
    size_t dl = real_dir ? strlen(real_dir) : 0;
    bool inside = real_dir && !strncmp(real_file, real_dir, dl) && (real_file[dl] == '/' || (dl == 1 && real_dir[0] == '/'));
    free(real_dir);
    free(real_file);
    if (!inside)
        return rs_onnx_fail(p, RS_ERR_FORMAT, "%s: external data location '%.100s' leads out of the model's folder "
                            "(through a link); refused", what, loc);
    FILE *f = fopen(path, "rb");
    if (!f) return rs_onnx_fail(p, RS_ERR_IO, "%s: external data file '%s': %s", what, path, strerror(errno));
    long size = -1;
    if (!fseek(f, 0, SEEK_END)) size = ftell(f);
    if (size < 0 || off > (uint64_t)size || len > (uint64_t)size - off) {
        fclose(f);
        return rs_onnx_fail(p, RS_ERR_FORMAT, "%s: external data (offset %llu, length %llu) runs past the end of "
                            "'%s' (%ld bytes); truncated file?", what, (unsigned long long)off, (unsigned long long)len,
                            path, size);
    }
    uint8_t *buf = malloc(want ? want : 1);
    bool ok = buf && !fseek(f, (long)off, SEEK_SET) && fread(buf, 1, want, f) == want;
    fclose(f);
    if (!ok) {
        free(buf);
        return rs_onnx_fail(p, buf ? RS_ERR_IO : RS_ERR_NOMEM, "%s: cannot read %zu bytes of external data from '%s'",
                            what, want, path);
    }
    *out = buf;
    return RS_OK;
}

rs_status rs_onnx_tensor_to_ival(imp *p, const Onnx__TensorProto *t, const char *what, ival *out)
{
    rs_dims s;
    rs_status st = rs_onnx_check_dims(p, what, t->n_dims, t->dims, &s);
    if (st) return st;
    size_t n = (size_t)rs_dims_numel(&s, 1), esz;
    int dt = t->data_type;
    bool is_float = dt == DT_FLOAT || dt == DT_DOUBLE;
    switch (dt) {
    case DT_FLOAT: case DT_INT32: esz = 4; break;
    case DT_DOUBLE: case DT_INT64: esz = 8; break;
    case DT_INT16: esz = 2; break;
    case DT_INT8: case DT_UINT8: case DT_BOOL: esz = 1; break;
    default:
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "%s has element type %s (%d); supported: float, double, int8/16/32/64, "
                    "uint8, bool", what, rs_onnx_import_dtype_name(dt), dt);
    }
    size_t have, raw_len = t->raw_data.len;
    const uint8_t *r = t->raw_data.data;
    uint8_t *ext = NULL;
    if (rs_onnx_ext_is(t)) {
        if ((st = read_external(p, t, what, n * esz, &ext))) return st;
        r = ext;
        raw_len = n * esz;
    }
    bool raw = raw_len > 0;
    if (raw) have = raw_len / esz;
    else if (dt == DT_FLOAT) have = t->n_float_data;
    else if (dt == DT_DOUBLE) have = t->n_double_data;
    else if (dt == DT_INT64) have = t->n_int64_data;
    else have = t->n_int32_data;
    if ((raw && raw_len != n * esz) || (!raw && have != n))
        return rs_onnx_fail(p, RS_ERR_FORMAT, "%s: shape (%zu elements) does not match its data (%zu %s)", what, n,
                    raw ? raw_len : have, raw ? "bytes of raw_data" : "values");
    *out = (ival){.kind = is_float ? IV_F : IV_I, .shape = s, .vid = -1};
    if (is_float) out->f = malloc(sizeof(float) * (n ? n : 1));
    else out->i = malloc(sizeof(int64_t) * (n ? n : 1));
    if (!out->f && !out->i) {
        free(ext);
        return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory for %s", what);
    }
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
    free(ext);
    /* ints are shape material: keep them out of the batch sentinel's way */
    for (size_t k = 0; !is_float && k < n; k++) {
        if (out->i[k] == RS_DIM_BATCH) out->i[k] = RS_DIM_BATCH - 1;
        else if (rs_onnx_batch_factor(out->i[k])) out->i[k] = RS_ONNX_BATCH_BASE - RS_ONNX_BATCH_KMAX - 1;
    }
    return RS_OK;
}

void rs_onnx_ival_clear(ival *v)
{
    free(v->f);
    free(v->i);
    v->f = NULL;
    v->i = NULL;
}

