/* The CUDA table's context and memory entries. Blocks come from cudaMalloc (256-byte aligned) and are
 * counted in the caller's rs_mem tracker with rs_mem_count, so every memory figure the REPL prints for
 * a model on the GPU is measured from cudaMalloc'd bytes exactly as the CPU's are from its allocator.
 * Work is queued on ctx->stream; copies to and from the host wait for it, as kernels.h promises. */
#include <stdint.h>

#include "cuda_common.h"

rs_status rs_cuda_default_threads(rs_kctx *ctx, int *threads)
{
    if (!ctx) return RS_ERR_ARG;
    CU_PTR(ctx, "default_threads", threads, 1);
    *threads = 1; /* kernels run on the GPU; no host threads to share out */
    return RS_OK;
}

rs_status rs_cuda_mem_alloc(rs_kctx *ctx, rs_mem *mem, rs_pool p, size_t bytes, void **out)
{
    CU_CTX(ctx, "mem_alloc");
    CU_PTR(ctx, "mem_alloc", out, 1);
    *out = NULL;
    if ((unsigned)p >= RS_POOL_COUNT) return rs_kctx_fail(ctx, RS_ERR_ARG, "mem_alloc: pool %d does not exist", (int)p);
    void *d = NULL;
    /* at least one byte, so an empty tensor still has an address of its own, as on the CPU */
    cudaError_t e = cudaMalloc(&d, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return rs_kctx_fail(ctx, RS_ERR_NOMEM, "mem_alloc: the GPU is out of memory for %zu bytes of %s", bytes,
                            rs_pool_name(p));
    }
    CU_TRY(ctx, "mem_alloc", e);
    e = cudaMemsetAsync(d, 0, bytes ? bytes : 1, cu_stream(ctx));
    if (e != cudaSuccess) {
        cudaFree(d);
        return cu_fail(ctx, "mem_alloc", e);
    }
    rs_mem_count(mem, p, (int64_t)bytes);
    *out = d;
    return RS_OK;
}

rs_status rs_cuda_mem_free(rs_kctx *ctx, rs_mem *mem, rs_pool p, void *ptr, size_t bytes)
{
    CU_CTX(ctx, "mem_free");
    if ((unsigned)p >= RS_POOL_COUNT) return rs_kctx_fail(ctx, RS_ERR_ARG, "mem_free: pool %d does not exist", (int)p);
    if (!ptr) return RS_OK;
    rs_mem_count(mem, p, -(int64_t)bytes);
    /* cudaFree waits for the device, so no queued kernel still reads the block */
    CU_TRY(ctx, "mem_free", cudaFree(ptr));
    return RS_OK;
}

/* Both ranges there and apart, as on the CPU; the host copies return when the bytes have moved. */
static rs_status copy(rs_kctx *ctx, const char *who, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    CU_CTX(ctx, who);
    if (!bytes) return RS_OK;
    CU_PTR(ctx, who, dst, 1);
    CU_PTR(ctx, who, src, 1);
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (d < s + bytes && s < d + bytes)
        return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: the %zu-byte ranges overlap (dst %p, src %p)", who, bytes, dst, src);
    CU_TRY(ctx, who, cudaMemcpyAsync(dst, src, bytes, kind, cu_stream(ctx)));
    if (kind != cudaMemcpyDeviceToDevice) CU_TRY(ctx, who, cudaStreamSynchronize(cu_stream(ctx)));
    return RS_OK;
}

rs_status rs_cuda_copy_h2d(rs_kctx *ctx, void *dst, const void *src, size_t bytes)
{
    return copy(ctx, "copy_h2d", dst, src, bytes, cudaMemcpyHostToDevice);
}

rs_status rs_cuda_copy_d2h(rs_kctx *ctx, void *dst, const void *src, size_t bytes)
{
    return copy(ctx, "copy_d2h", dst, src, bytes, cudaMemcpyDeviceToHost);
}

rs_status rs_cuda_copy_d2d(rs_kctx *ctx, void *dst, const void *src, size_t bytes)
{
    return copy(ctx, "copy_d2d", dst, src, bytes, cudaMemcpyDeviceToDevice);
}

rs_status rs_cuda_mem_set(rs_kctx *ctx, void *dst, int value, size_t bytes)
{
    CU_CTX(ctx, "mem_set");
    CU_PTR(ctx, "mem_set", dst, bytes);
    if (bytes) CU_TRY(ctx, "mem_set", cudaMemsetAsync(dst, value & 0xff, bytes, cu_stream(ctx)));
    return RS_OK;
}

rs_status rs_cuda_sync(rs_kctx *ctx)
{
    CU_CTX(ctx, "sync");
    /* also where a fault of an earlier asynchronous launch surfaces */
    CU_TRY(ctx, "sync", cudaStreamSynchronize(cu_stream(ctx)));
    return RS_OK;
}
