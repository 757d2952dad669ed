/* Growing the plan's arrays of nodes, values and tensors, and the small helpers every pass uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static bool grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return true;
    int n = *cap ? *cap * 2 : 16;
    while (n < need) n *= 2;
    void *q = realloc(*arr, (size_t)n * elem);
    if (!q) return false;
    memset((char *)q + (size_t)*cap * elem, 0, (size_t)(n - *cap) * elem);
    *arr = q;
    *cap = n;
    return true;
}

int rs_plan_add_value(rs_plan *p, int64_t numel)
{
    if (!grow((void **)&p->values, &p->cap_values, p->nvalues + 1, sizeof *p->values)) return -1;
    p->values[p->nvalues] = (rs_pvalue){.numel = numel, .alias = -1, .offset = -1, .def = -1, .last = -1};
    return p->nvalues++;
}

int rs_plan_add_node(rs_plan *p, const rs_pnode *n)
{
    if (!grow((void **)&p->nodes, &p->cap_nodes, p->nnodes + 1, sizeof *p->nodes)) return -1;
    p->nodes[p->nnodes] = *n;
    return p->nnodes++;
}

void *rs_plan_aligned_alloc(size_t bytes)
{
    size_t n = (bytes + 63) / 64 * 64;
    void *q = aligned_alloc(64, n ? n : 64);
    if (q) memset(q, 0, n ? n : 64);
    return q;
}

int rs_plan_add_tensor(rs_plan *p, const char *name, int ndim, const int64_t *dims, const float *src)
{
    if (!grow((void **)&p->tensors, &p->cap_tensors, p->ntensors + 1, sizeof *p->tensors)) return -1;
    rs_ptensor *t = &p->tensors[p->ntensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = RS_F32;
    t->ndim = ndim;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        t->dims[i] = dims[i];
        n *= (size_t)dims[i];
    }
    t->bytes = n * sizeof(float);
    t->data = rs_plan_aligned_alloc(t->bytes);
    if (!t->data) return -1;
    if (src) memcpy(t->data, src, t->bytes);
    return p->ntensors++;
}

void rs_plan_tensor_replace(rs_ptensor *t, rs_dtype dtype, int layout, void *data, size_t bytes)
{
    free(t->data);
    t->data = data;
    t->bytes = bytes;
    t->dtype = dtype;
    t->layout = layout;
}

rs_pnode rs_pnode_empty(rs_pk kind, const char *name)
{
    rs_pnode n;
    memset(&n, 0, sizeof n);
    n.kind = kind;
    snprintf(n.name, sizeof n.name, "%s", name);
    n.w = n.b = n.tmp = n.oscales = -1;
    for (int i = 0; i < RS_OP_MAX_IN; i++) {
        n.in[i] = -1;
        n.cin[i] = -1;
    }
    n.out = -1;
    n.group = 1;
    return n;
}

const char *rs_pk_name(rs_pk k)
{
    static const char *const names[RS_PK_COUNT] = {"conv", "linear", "maxpool", "avgpool", "act", "layernorm",
                                                   "embed", "attn", "add", "op", "view"};
    return (unsigned)k < RS_PK_COUNT ? names[k] : "?";
}

const char *rs_plan_act_name(int op) { return rs_unary_name(op); }

const char *const rs_plan_prec_names[] = {[RS_PLAN_FP32] = "fp32", [RS_PLAN_BF16] = "bf16", [RS_PLAN_INT8] = "int8",
                                          NULL};

const char *rs_plan_prec_name(rs_plan_prec p)
{
    return (unsigned)p < sizeof rs_plan_prec_names / sizeof *rs_plan_prec_names - 1 ? rs_plan_prec_names[p] : "fp32";
}

int rs_plan_root(const rs_plan *p, int v)
{
    /* alias chains are acyclic (validate.c checks files; the passes only alias to older values) */
    for (int guard = 0; v >= 0 && p->values[v].alias >= 0 && guard < p->nvalues; guard++) v = p->values[v].alias;
    return v;
}

int rs_plan_pad_end(int in, int k, int s, int pad, int out)
{
    if (out == (in + 2 * pad - k) / s + 1) return pad; /* symmetric: the engine's windows */
    for (int e = 0; e < k; e++)
        if (in + pad + e >= k && (in + pad + e - k) / s + 1 == out) return e;
    return -1;
}
