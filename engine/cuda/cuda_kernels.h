/* The CUDA kernel functions behind rs_cuda_kernels (engine/cuda/cuda_table.c assembles the table): one
 * rs_cuda_<name> per entry of engine/core/kernels.def, with that entry's parameters and contract, on
 * the calling thread's current CUDA device and the context's stream. Exposed so tests and benches can
 * call one kernel directly; everything else goes through the table. Present only in builds with CUDA
 * (RS_HAVE_CUDA); engine/cuda/cuda.h is the part every build has. The .cu files define them with C
 * linkage (cuda_common.h includes this inside extern "C"). */
#ifndef RS_CUDA_KERNELS_H
#define RS_CUDA_KERNELS_H

#include "engine/core/kernels.h"

#define RS_KERNEL(name, params, args) rs_status rs_cuda_##name params;
#include "engine/core/kernels.def"

#endif
