/* The CPU table's context and memory entries. Device memory is host memory here: allocation is the
 * tracker's own (rs_mem_alloc: 64-byte aligned, zero-filled, counted in the pool asked for), copies
 * are memcpy, and every call has finished when it returns, so sync has nothing to wait for. */
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_scope.h"

rs_status rs_cpu_default_threads(rs_kctx *ctx, int *threads)
{
    if (!ctx) return RS_ERR_ARG;
    CPU_PTR(ctx, "default_threads", threads, 1);
    /* OpenMP's own initial count: the first entry of OMP_NUM_THREADS, else the processors this
     * process may run on. Read from the environment rather than omp_get_max_threads(), which answers
     * for the calling thread's ICV and so for whatever that thread last set. */
    const char *env = getenv("OMP_NUM_THREADS");
    char *end = NULL;
    long n = env ? strtol(env, &end, 10) : 0;
    if (!env || end == env || n < 1 || n > 1024) n = omp_get_num_procs();
    *threads = n < 1 ? 1 : (int)n;
    return RS_OK;
}

rs_status rs_cpu_mem_alloc(rs_kctx *ctx, rs_mem *mem, rs_pool p, size_t bytes, void **out)
{
    CPU_CTX(ctx, "mem_alloc");
    CPU_PTR(ctx, "mem_alloc", out, 1);
    *out = NULL;
    if ((unsigned)p >= RS_POOL_COUNT) return rs_kctx_fail(ctx, RS_ERR_ARG, "mem_alloc: pool %d does not exist", (int)p);
    *out = rs_mem_alloc(mem, p, bytes);
    if (!*out)
        return rs_kctx_fail(ctx, RS_ERR_NOMEM, "mem_alloc: out of memory for %zu bytes of %s", bytes, rs_pool_name(p));
    return RS_OK;
}

rs_status rs_cpu_mem_free(rs_kctx *ctx, rs_mem *mem, rs_pool p, void *ptr, size_t bytes)
{
    CPU_CTX(ctx, "mem_free");
    if ((unsigned)p >= RS_POOL_COUNT) return rs_kctx_fail(ctx, RS_ERR_ARG, "mem_free: pool %d does not exist", (int)p);
    rs_mem_free(mem, p, ptr, bytes);
    return RS_OK;
}

/* memcpy's contract, checked: both ranges there and apart. */
static rs_status copy(rs_kctx *ctx, const char *who, void *dst, const void *src, size_t bytes)
{
    CPU_CTX(ctx, who);
    if (!bytes) return RS_OK;
    CPU_PTR(ctx, who, dst, 1);
    CPU_PTR(ctx, who, src, 1);
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (d < s + bytes && s < d + bytes)
        return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: the %zu-byte ranges overlap (dst %p, src %p)", who, bytes, dst, src);
    memcpy(dst, src, bytes);
    return RS_OK;
}

rs_status rs_cpu_copy_h2d(rs_kctx *ctx, void *dst, const void *src, size_t bytes)
{
    return copy(ctx, "copy_h2d", dst, src, bytes);
}

rs_status rs_cpu_copy_d2h(rs_kctx *ctx, void *dst, const void *src, size_t bytes)
{
    return copy(ctx, "copy_d2h", dst, src, bytes);
}

rs_status rs_cpu_copy_d2d(rs_kctx *ctx, void *dst, const void *src, size_t bytes)
{
    return copy(ctx, "copy_d2d", dst, src, bytes);
}

rs_status rs_cpu_mem_set(rs_kctx *ctx, void *dst, int value, size_t bytes)
{
    CPU_CTX(ctx, "mem_set");
    CPU_PTR(ctx, "mem_set", dst, bytes);
    if (bytes) memset(dst, value, bytes);
    return RS_OK;
}

rs_status rs_cpu_sync(rs_kctx *ctx)
{
    CPU_CTX(ctx, "sync");
    return RS_OK;
}
