/* engine/cuda/cuda.h in a build without CUDA (meson found no nvcc, or -Dcuda=disabled): no table,
 * no GPU, and a reason that says how to get one. */
#include "cuda.h"

#include <string.h>

void rs_cuda_query(rs_cuda_info *info)
{
    memset(info, 0, sizeof *info);
    strcpy(info->why, "no CUDA device: this build has no CUDA support (nvcc was not found when it was configured; "
                      "install the CUDA toolkit and reconfigure with -Dcuda=enabled)");
}

rs_status rs_cuda_gpu_info(int index, rs_cuda_gpu *gpu, rs_err *err)
{
    (void)gpu;
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "cuda:%d: this build has no CUDA support", index);
}

rs_status rs_cuda_use(int index, rs_err *err)
{
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "cuda:%d: this build has no CUDA support", index);
}
