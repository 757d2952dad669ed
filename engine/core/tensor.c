/* Tensor descriptors (see tensor.h). */
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name, *st;
    size_t size;
} dtypes[RS_DTYPE_COUNT] = {
    [RS_F32] = {"f32", "F32", 4}, [RS_F16] = {"f16", "F16", 2}, [RS_BF16] = {"bf16", "BF16", 2},
    [RS_F64] = {"f64", "F64", 8}, [RS_I8] = {"i8", "I8", 1},    [RS_U8] = {"u8", "U8", 1},
    [RS_I32] = {"i32", "I32", 4}, [RS_I64] = {"i64", "I64", 8},
};

size_t rs_dtype_size(rs_dtype t) { return (unsigned)t < RS_DTYPE_COUNT ? dtypes[t].size : 0; }
const char *rs_dtype_name(rs_dtype t) { return (unsigned)t < RS_DTYPE_COUNT ? dtypes[t].name : "?"; }
const char *rs_dtype_st_name(rs_dtype t) { return (unsigned)t < RS_DTYPE_COUNT ? dtypes[t].st : "?"; }

bool rs_dtype_from_name(const char *s, rs_dtype *out)
{
    for (int i = 0; i < RS_DTYPE_COUNT; i++)
        if (strcmp(s, dtypes[i].name) == 0) {
            *out = (rs_dtype)i;
            return true;
        }
    return false;
}

bool rs_dtype_from_st_name(const char *s, rs_dtype *out)
{
    for (int i = 0; i < RS_DTYPE_COUNT; i++)
        if (strcmp(s, dtypes[i].st) == 0) {
            *out = (rs_dtype)i;
            return true;
        }
    return false;
}

int64_t rs_shape_numel(const rs_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->d[i];
    return n;
}

bool rs_shape_eq(const rs_shape *a, const rs_shape *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i]) return false;
    return true;
}

char *rs_shape_str(const rs_shape *s, char *buf, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n > k ? n - k : 0, "(");
    for (int i = 0; i < s->ndim; i++)
        k += (size_t)snprintf(buf + k, n > k ? n - k : 0, i ? ", %lld" : "%lld", (long long)s->d[i]);
    snprintf(buf + k, n > k ? n - k : 0, ")");
    return buf;
}

static void set_contiguous(rs_tensor *t)
{
    int64_t st = 1;
    for (int i = t->shape.ndim - 1; i >= 0; i--) {
        t->stride[i] = st;
        st *= t->shape.d[i];
    }
}

rs_tensor *rs_tensor_new(rs_dtype dt, const rs_shape *shape, rs_mem *mem, rs_pool pool)
{
    rs_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->dtype = dt;
    t->device = rs_device_cpu();
    t->shape = *shape;
    set_contiguous(t);
    t->mem = mem;
    t->pool = pool;
    t->data = rs_mem_alloc(mem, pool, rs_tensor_bytes(t));
    if (!t->data) {
        free(t);
        return NULL;
    }
    t->owns = true;
    return t;
}

rs_tensor rs_tensor_view(void *base, rs_dtype dt, size_t offset, const rs_shape *shape)
{
    rs_tensor t = {0};
    t.dtype = dt;
    t.device = rs_device_cpu();
    t.shape = *shape;
    set_contiguous(&t);
    t.data = (char *)base + offset * rs_dtype_size(dt);
    return t;
}

void rs_tensor_free(rs_tensor *t)
{
    if (!t) return;
    if (t->owns) rs_mem_free(t->mem, t->pool, t->data, rs_tensor_bytes(t));
    free(t);
}

size_t rs_tensor_bytes(const rs_tensor *t) { return (size_t)rs_shape_numel(&t->shape) * rs_dtype_size(t->dtype); }

bool rs_tensor_is_contiguous(const rs_tensor *t)
{
    int64_t st = 1;
    for (int i = t->shape.ndim - 1; i >= 0; i--) {
        if (t->shape.d[i] != 1 && t->stride[i] != st) return false;
        st *= t->shape.d[i];
    }
    return true;
}
