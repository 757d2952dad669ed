/* Sharded buffers for ZeRO-2 and ZeRO-3 (see model.h). */
#include "model_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>



bool rs_model_grads_released(const rs_model *m) { return m->grads_released; }

void rs_model_release_grads(rs_model *m)
{
    if (!m->built || m->grads_released || m->sharded) return;
    rs_model_buf_free(m, RS_POOL_GRADS, m->grads);
    m->grads = NULL;
    m->grads_released = true;
}

rs_status rs_model_acquire_grads(rs_model *m, rs_err *err)
{
    if (!m->grads_released) return RS_OK;
    m->grads = rs_model_buf_alloc(m, RS_POOL_GRADS); /* zero-filled; owned by m */
    if (!m->grads)
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for %zu gradients", m->name, m->numel);
    m->grads_released = false;
    return RS_OK;
}

bool rs_model_buffers_sharded(const rs_model *m) { return m->sharded; }

/* A reservation: address space only; pages are committed when first written. */
static float *reserve(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

rs_status rs_model_shard_buffers(rs_model *m, rs_err *err)
{
    if (!m->built) return rs_err_set(err, RS_ERR_ARG, "model %s is not built", m->name);
    if (m->sharded) return RS_OK;
    if (m->dev.kind != RS_DEV_CPU)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "model %s: sharded buffers are for CPU models", m->name);
    rs_status st = rs_model_acquire_grads(m, err);
    if (st) return st;
    long page = sysconf(_SC_PAGESIZE);
    size_t pg = page > 0 ? (size_t)page : 4096;
    size_t bytes = (rs_model_buf_bytes(m) + pg - 1) / pg * pg;
    float *p = reserve(bytes), *g = reserve(bytes);
    unsigned char *rp = calloc((size_t)m->nunits + 1, 1), *rg = calloc((size_t)m->nunits + 1, 1);
    if (!p || !g || !rp || !rg) {
        if (p) munmap(p, bytes);
        if (g) munmap(g, bytes);
        free(rp);
        free(rg);
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: cannot reserve %zu bytes of address space", m->name, bytes);
    }
    rs_model_buf_free(m, RS_POOL_PARAMS, m->params);
    rs_model_buf_free(m, RS_POOL_GRADS, m->grads);
    m->params = p;
    m->grads = g;
    m->map_bytes = bytes;
    m->resident[0] = rp;
    m->resident[1] = rg;
    m->sharded = true;
    return RS_OK;
}

rs_status rs_model_unshard_buffers(rs_model *m, rs_err *err)
{
    if (!m->sharded) return RS_OK;
    float *p = rs_model_buf_alloc(m, RS_POOL_PARAMS); /* owned by m */
    float *g = rs_model_buf_alloc(m, RS_POOL_GRADS);
    if (!p || !g) {
        rs_model_buf_free(m, RS_POOL_PARAMS, p);
        rs_model_buf_free(m, RS_POOL_GRADS, g);
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: out of memory for %zu parameters", m->name, m->numel);
    }
    /* Released ranges read as zero, except what shares a page with a resident neighbour: zero those
     * explicitly so the result does not depend on page boundaries. */
    memcpy(p, m->params, m->numel * sizeof(float));
    for (int u = 0; u < m->nunits; u++)
        if (!m->resident[0][u]) memset(p + m->units[u].offset, 0, m->units[u].numel * sizeof(float));
    for (int u = 0; u < m->nunits; u++) {
        rs_model_unit_release(m, RS_POOL_PARAMS, u);
        rs_model_unit_release(m, RS_POOL_GRADS, u);
    }
    munmap(m->params, m->map_bytes);
    munmap(m->grads, m->map_bytes);
    free(m->resident[0]);
    free(m->resident[1]);
    m->resident[0] = m->resident[1] = NULL;
    m->params = p;
    m->grads = g;
    m->map_bytes = 0;
    m->sharded = false;
    return RS_OK;
}

static unsigned char *resident_flag(const rs_model *m, rs_pool which, int unit)
{
    if (!m->sharded || unit < 0 || unit >= m->nunits || (which != RS_POOL_PARAMS && which != RS_POOL_GRADS))
        return NULL;
    return &m->resident[which == RS_POOL_GRADS][unit];
}

bool rs_model_unit_resident(const rs_model *m, rs_pool which, int unit)
{
    const unsigned char *f = resident_flag(m, which, unit);
    return f && *f;
}

void rs_model_unit_acquire(rs_model *m, rs_pool which, int unit)
{
    unsigned char *f = resident_flag(m, which, unit);
    if (!f || *f) return;
    const rs_unit *u = &m->units[unit];
    /* Gradients accumulate, so they start at zero; a released range's whole pages already read as
     * zero but the pages it shares with neighbours may hold old values. */
    if (which == RS_POOL_GRADS) memset(m->grads + u->offset, 0, u->numel * sizeof(float));
    rs_mem_count(m->mem, which, (int64_t)(u->numel * sizeof(float)));
    *f = 1;
}

void rs_model_unit_release(rs_model *m, rs_pool which, int unit)
{
    unsigned char *f = resident_flag(m, which, unit);
    if (!f || !*f) return;
    const rs_unit *u = &m->units[unit];
    float *base = which == RS_POOL_GRADS ? m->grads : m->params;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t pg = page > 0 ? (uintptr_t)page : 4096;
    uintptr_t a = (uintptr_t)(base + u->offset), b = (uintptr_t)(base + u->offset + u->numel);
    a = (a + pg - 1) / pg * pg; /* whole pages inside the range only: neighbours keep theirs */
    b = b / pg * pg;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
    rs_mem_count(m->mem, which, -(int64_t)(u->numel * sizeof(float)));
    *f = 0;
}

