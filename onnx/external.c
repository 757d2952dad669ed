/* external_data fields and the location rule (see external.h). */
#include "onnx/external.h"

#include <string.h>

bool rs_onnx_ext_is(const Onnx__TensorProto *t)
{
    return (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
           t->n_external_data;
}

/* A decimal field of external_data ("offset", "length"): digits only, below 2^62. */
static bool parse_size(const char *v, uint64_t *out)
{
    uint64_t x = 0;
    if (!v || !*v) return false;
    for (; *v; v++) {
        if (*v < '0' || *v > '9' || x > (UINT64_C(1) << 62) / 10) return false;
        x = x * 10 + (uint64_t)(*v - '0');
    }
    *out = x;
    return true;
}

void rs_onnx_ext_fields(const Onnx__TensorProto *t, uint64_t want, rs_onnx_ext *e)
{
    *e = (rs_onnx_ext){.len = want};
    for (size_t k = 0; k < t->n_external_data; k++) {
        const char *key = t->external_data[k]->key ? t->external_data[k]->key : "";
        const char *val = t->external_data[k]->value;
        uint64_t *dst = !strcmp(key, "offset") ? &e->off : !strcmp(key, "length") ? &e->len : NULL;
        if (!strcmp(key, "location")) e->loc = val;
        else if (dst && !parse_size(val, dst)) {
            e->bad_key = key;
            e->bad_val = val ? val : "";
            return;
        }
    }
}

bool rs_onnx_ext_escapes(const char *loc)
{
    bool escapes = loc[0] == '/' || loc[0] == '\\' || strchr(loc, ':') != NULL;
    for (const char *c = loc; *c && !escapes; c++) {
        bool start = c == loc || c[-1] == '/' || c[-1] == '\\';
        escapes = start && c[0] == '.' && c[1] == '.' && (c[2] == '\0' || c[2] == '/' || c[2] == '\\');
    }
    return escapes;
}
