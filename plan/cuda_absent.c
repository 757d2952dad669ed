/* plan/cuda.c's entries in a build without CUDA, cuDNN or cuBLASLt (meson says which it missed): a
 * cuda plan still compiles (graph, memory plan and plain weights need no GPU), records the target this
 * build's CUDA kernels would have and "none" for the libraries, and is refused when it is to run,
 * with the reason. */
#include <stdio.h>

#include "engine/cuda/cuda.h"
#include "ir.h"

#ifndef RS_PLAN_CUDA_WHY
#define RS_PLAN_CUDA_WHY "this build has no cuDNN or cuBLASLt"
#endif

void rs_plan_cuda_target(char *target, size_t nt, char *cudnn, size_t nc, char *lt, size_t nl)
{
    snprintf(target, nt, "sm_%d", RS_PLAN_CUDA_SM);
    snprintf(cudnn, nc, "none");
    snprintf(lt, nl, "none");
}

rs_status rs_plan_cuda_open(rs_plan *p, rs_err *err)
{
    rs_cuda_info info;
    rs_cuda_query(&info);
    if (info.count < 1)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "this plan was built for cuda (%s, cuDNN %s); this machine has no "
                          "GPU: %s; compile it with device=cpu", p->cuda_target, p->cudnn_version, info.why);
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "this plan was built for cuda (%s, cuDNN %s); %s (%s), so it cannot run "
                      "on this machine's GPU: compile it with device=cpu, or build ringside where meson finds them",
                      p->cuda_target, p->cudnn_version, RS_PLAN_CUDA_WHY,
                      info.built ? "the CUDA table is built" : "nor the CUDA table");
}

void rs_plan_cuda_close(rs_plan *p) { (void)p; }

rs_status rs_plan_cuda_run(rs_plan *p, const void *x, int B, const float **out, rs_err *err)
{
    (void)x, (void)B, (void)out;
    return rs_plan_cuda_open(p, err);
}
