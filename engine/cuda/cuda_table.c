/* The CUDA kernel table (engine/core/device.c returns it for RS_DEV_CUDA in builds with CUDA): every
 * entry of kernels.def as rs_cuda_<name>, on the calling thread's current GPU and the context's
 * stream. Memory and copies: cuda_mem.c; products: cuda_blas.c (cuBLAS); elementwise, activations,
 * dropout, optimizers: elem.cu; layers (conv, pools, layer norm, softmax cross-entropy, embedding):
 * nn.cu; attention: attn.cu; the generic tensor ops: tensor.cu. tests/engine/kernels/test_kernel_harness.c checks it
 * against the CPU table on a machine with a GPU. */
#include "cuda_kernels.h"

const rs_kernels rs_cuda_kernels = {
    .name = "cuda",
    .kind = RS_DEV_CUDA,
#define RS_KERNEL(name, params, args) .name = rs_cuda_##name,
#include "engine/core/kernels.def"
};
