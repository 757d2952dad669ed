/* The memory plan: every value a node writes gets a place in one arena, sized for the plan's batch.
 * Values that share memory (views, in-place sums) form a group under their root; a group lives from
 * the first write of any member to the last read of any member (inclusive at both ends, so a node's
 * output never shares bytes with its inputs). Groups are placed largest first at the lowest offset
 * that no group alive at the same time occupies (greedy by size, as TensorRT's and TVM's planners
 * do); oneDNN's scratchpads share one region after the values, since one primitive runs at a time.
 * The checker below verifies the result independently of how it was made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define ALIGN 64

static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

/* Bytes of value v (its root's group) at the plan's batch. */
static size_t value_bytes(const rs_plan *p, int v)
{
    const rs_pvalue *x = &p->values[v];
    int64_t per = x->padded > x->numel ? x->padded : x->numel;
    return round_up((size_t)per * (size_t)p->batch * sizeof(float));
}

/* def/last of every value from the node order; roots get their group's span. */
rs_status rs_plan_liveness(rs_plan *p, rs_err *err)
{
    for (int v = 0; v < p->nvalues; v++) p->values[v].def = p->values[v].last = -1;
    for (int i = 0; i < p->nnodes; i++) {
        rs_pnode *n = &p->nodes[i];
        int touched[RS_OP_MAX_IN + RS_PLAN_MAX_POST + 2], nt = 0;
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] >= 0) touched[nt++] = n->in[j];
        for (int j = 0; j < n->npost; j++)
            if (n->post[j].kind == RS_PPOST_SUM) touched[nt++] = n->post[j].value;
        touched[nt++] = n->out;
        if (n->tmp >= 0) touched[nt++] = n->tmp;
        for (int t = 0; t < nt; t++) {
            int r = rs_plan_root(p, touched[t]);
            if (r < 0 || r >= p->nvalues) return rs_err_set(err, RS_ERR_INTERNAL, "plan: node %d reads a bad value", i);
            rs_pvalue *rv = &p->values[r];
            if (rv->def < 0) rv->def = i;
            rv->last = i;
        }
    }
    int ro = rs_plan_root(p, p->output);
    if (ro >= 0 && p->values[ro].def >= 0) p->values[ro].last = p->nnodes; /* read by the caller */
    p->values[0].def = -1; /* the input is the caller's memory */
    return RS_OK;
}

static bool overlap_time(const rs_pvalue *a, const rs_pvalue *b) { return a->def <= b->last && b->def <= a->last; }

typedef struct placed {
    int v;
    size_t off, bytes;
} placed;

static int by_size_desc(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->v - y->v;
}

static int by_off(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static rs_status place(rs_plan *p, bool reuse, rs_err *err)
{
    placed *g = calloc((size_t)p->nvalues, sizeof *g); /* owned here: the groups to place */
    placed *busy = calloc((size_t)p->nvalues, sizeof *busy);
    if (!g || !busy) {
        free(g);
        free(busy);
        return rs_err_set(err, RS_ERR_NOMEM, "compile: out of memory");
    }
    int ng = 0;
    size_t naive = 0;
    for (int v = 1; v < p->nvalues; v++) {
        p->values[v].offset = -1;
        if (p->values[v].alias >= 0 || p->values[v].def < 0) continue;
        g[ng++] = (placed){v, 0, value_bytes(p, v)};
        naive += value_bytes(p, v);
    }
    qsort(g, (size_t)ng, sizeof *g, by_size_desc);
    size_t arena = 0;
    for (int i = 0; i < ng; i++) {
        size_t off = 0;
        if (reuse) {
            int nb = 0;
            for (int j = 0; j < i; j++)
                if (overlap_time(&p->values[g[i].v], &p->values[g[j].v])) busy[nb++] = g[j];
            qsort(busy, (size_t)nb, sizeof *busy, by_off);
            for (int j = 0; j < nb; j++) {
                if (busy[j].off >= off + g[i].bytes) break; /* fits in the gap before it */
                if (busy[j].off + busy[j].bytes > off) off = busy[j].off + busy[j].bytes;
            }
        } else {
            off = arena;
        }
        g[i].off = off;
        p->values[g[i].v].offset = (int64_t)off;
        if (off + g[i].bytes > arena) arena = off + g[i].bytes;
    }
    free(g);
    free(busy);
    p->scratch_off = arena;
    p->arena_bytes = arena + round_up(p->scratch_bytes);
    p->naive_bytes = naive + round_up(p->scratch_bytes);
    return RS_OK;
}

rs_status rs_plan_memplan_mode(rs_plan *p, bool reuse, rs_err *err)
{
    rs_status st = rs_plan_liveness(p, err);
    return st ? st : place(p, reuse, err);
}

rs_status rs_plan_memplan(rs_plan *p, rs_err *err) { return rs_plan_memplan_mode(p, true, err); }

rs_status rs_plan_check_memory(const rs_plan *p, rs_err *err)
{
    for (int a = 1; a < p->nvalues; a++) {
        const rs_pvalue *va = &p->values[a];
        if (va->alias >= 0 || va->def < 0) continue;
        if (va->offset < 0 || (size_t)va->offset + value_bytes(p, a) > p->scratch_off)
            return rs_err_set(err, RS_ERR_FORMAT, "memory plan: value %d [%lld, +%zu) lies outside the arena (%zu bytes)",
                              a, (long long)va->offset, value_bytes(p, a), p->scratch_off);
        if (va->offset % ALIGN)
            return rs_err_set(err, RS_ERR_FORMAT, "memory plan: value %d at %lld is not %d-byte aligned", a,
                              (long long)va->offset, ALIGN);
        for (int b = a + 1; b < p->nvalues; b++) {
            const rs_pvalue *vb = &p->values[b];
            if (vb->alias >= 0 || vb->def < 0 || !overlap_time(va, vb)) continue;
            size_t a0 = (size_t)va->offset, a1 = a0 + value_bytes(p, a);
            size_t b0 = (size_t)vb->offset, b1 = b0 + value_bytes(p, b);
            if (a0 < b1 && b0 < a1)
                return rs_err_set(err, RS_ERR_FORMAT,
                                  "memory plan: values %d (nodes %d..%d, bytes %zu..%zu) and %d (nodes %d..%d, bytes "
                                  "%zu..%zu) are alive together in the same bytes",
                                  a, va->def, va->last, a0, a1, b, vb->def, vb->last, b0, b1);
        }
    }
    if (p->arena_bytes < p->scratch_off + p->scratch_bytes)
        return rs_err_set(err, RS_ERR_FORMAT, "memory plan: scratch (%zu bytes at %zu) past the arena's %zu bytes",
                          p->scratch_bytes, p->scratch_off, p->arena_bytes);
    return RS_OK;
}
