/* Full shapes with a symbolic batch (see dims.h). */
#include "dims.h"

#include <stdio.h>

int64_t rs_dims_numel(const rs_dims *s, int64_t batch)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        int64_t d = s->d[i] == RS_DIM_BATCH ? batch : s->d[i];
        if (d < 0) return -1;
        if (d != 0 && n > RS_DIMS_MAX_ELEMS / d) return -1;
        n *= d;
    }
    return n >= RS_DIMS_MAX_ELEMS ? -1 : n;
}

int rs_dims_batch_pos(const rs_dims *s)
{
    for (int i = 0; i < s->rank; i++)
        if (s->d[i] == RS_DIM_BATCH) return i;
    return -1;
}

rs_dims rs_dims_with_batch(const rs_dims *s, int64_t batch)
{
    rs_dims o = *s;
    for (int i = 0; i < o.rank; i++)
        if (o.d[i] == RS_DIM_BATCH) o.d[i] = batch;
    return o;
}

char *rs_dims_str(const rs_dims *s, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < s->rank && k < n; i++) {
        if (s->d[i] == RS_DIM_BATCH) k += (size_t)snprintf(buf + k, n - k, "%sN", i ? ", " : "");
        else k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)s->d[i]);
    }
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}
