/* engine/cuda/cuda.h in a build without CUDA (meson found no nvcc, or -Dcuda=disabled): no table,
 * no GPU, and a reason that says how to get one. */
#include "cuda.h"

#include <stdio.h>
#include <string.h>

#define WHY                                                                                            \
    "no CUDA device: this build has no CUDA support (configured without nvcc or with -Dcuda=disabled; "  \
    "install the CUDA toolkit and reconfigure with -Dcuda=enabled)"

void rs_cuda_query(rs_cuda_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->why, sizeof info->why, "%s", WHY);
}

rs_status rs_cuda_gpu_info(int index, rs_cuda_gpu *gpu, rs_err *err)
{
    (void)index, (void)gpu;
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s", WHY);
}

rs_status rs_cuda_use(int index, rs_err *err)
{
    (void)index;
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s", WHY);
}
