// What the CUDA kernel files share (elem.cu, nn.cu, attn.cu, tensor.cu): the grid-stride loop, the
// launch of one thread per element, and the block reductions of the row kernels. Internal to
// engine/cuda/; CUDA C++ only (the C files include cuda_common.h).
#ifndef RS_CUDA_KERNEL_UTIL_CUH
#define RS_CUDA_KERNEL_UTIL_CUH

#include "cuda_common.h"

#define GRID_STRIDE(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)
#define LAUNCH(n) <<<cu_blocks(n), 256, 0, cu_stream(ctx)>>>
#define ROW_THREADS 256

// Sum over a block of ROW_THREADS threads; every thread gets the total.
template <typename T> __device__ static inline T block_sum(T v, T *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = ROW_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();
    return r;
}

__device__ static inline float block_max(float v, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = ROW_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

#endif
