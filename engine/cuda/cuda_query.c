/* engine/cuda/cuda.h from the CUDA runtime: device count, properties and versions. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"

void rs_cuda_query(rs_cuda_info *info)
{
    memset(info, 0, sizeof *info);
    info->built = true;
    cudaRuntimeGetVersion(&info->runtime_version);
    if (cudaDriverGetVersion(&info->driver_version) != cudaSuccess) info->driver_version = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        /* cudaGetDeviceCount's error is sticky for nothing: clear it so later calls start clean */
        cudaGetLastError();
        info->count = 0;
        snprintf(info->why, sizeof info->why, "no CUDA device: %s (%s)%s",
                 e == cudaSuccess ? "the driver reports 0 GPUs" : cudaGetErrorString(e),
                 e == cudaSuccess ? "cudaGetDeviceCount" : cudaGetErrorName(e),
                 e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice
                     ? "; this machine has no GPU, or no NVIDIA driver for one" : "");
        return;
    }
    info->count = n;
}

/* index is not a GPU here: none at all (the reason), or past the last one. */
static rs_status no_such(const rs_cuda_info *info, int index, rs_err *err)
{
    if (!info->count) return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s", info->why);
    if (info->count == 1) return rs_err_set(err, RS_ERR_ARG, "there is no cuda:%d; this machine has one GPU, cuda:0", index);
    return rs_err_set(err, RS_ERR_ARG, "there is no cuda:%d; this machine has %d GPUs, cuda:0 to cuda:%d", index,
                      info->count, info->count - 1);
}

rs_status rs_cuda_gpu_info(int index, rs_cuda_gpu *gpu, rs_err *err)
{
    rs_cuda_info info;
    rs_cuda_query(&info);
    if (index < 0 || index >= info.count) return no_such(&info, index, err);
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, index);
    if (e != cudaSuccess) return rs_err_set(err, RS_ERR_INTERNAL, "cuda:%d: %s", index, cudaGetErrorString(e));
    memset(gpu, 0, sizeof *gpu);
    snprintf(gpu->name, sizeof gpu->name, "%s", p.name);
    gpu->cc_major = p.major;
    gpu->cc_minor = p.minor;
    gpu->sms = p.multiProcessorCount;
    gpu->total_bytes = p.totalGlobalMem;
    /* free memory is the current device's: ask on that device, then put the caller's back */
    int cur = 0;
    cudaGetDevice(&cur);
    size_t fr = 0, tot = 0;
    if (cudaSetDevice(index) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess) gpu->free_bytes = fr;
    cudaSetDevice(cur);
    return RS_OK;
}

rs_status rs_cuda_use(int index, rs_err *err)
{
    rs_cuda_info info;
    rs_cuda_query(&info);
    if (index < 0 || index >= info.count) return no_such(&info, index, err);
    cudaError_t e = cudaSetDevice(index);
    if (e != cudaSuccess) return rs_err_set(err, RS_ERR_INTERNAL, "cuda:%d: %s", index, cudaGetErrorString(e));
    return RS_OK;
}
