/* Compiling a model into a plan (docs/plan.md): options checked, the model's layers into plan nodes
 * (build.c), calibration for int8, the passes, then the device's own finishing: for the CPU oneDNN's
 * weights and primitives, the memory plan and the runtime (run.c); for a GPU host work only. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir.h"

rs_plan_opts rs_plan_opts_default(void)
{
    return (rs_plan_opts){.prec = RS_PLAN_FP32, .batch = 64, .threads = 1, .passes = RS_PLAN_PASS_ALL, .source = NULL};
}

/* Refuses options and models no plan can be made from, before anything is allocated. */
static rs_status compile_check(rs_model *m, const rs_plan_opts *o, rs_err *err)
{
    if (o->batch < 1 || o->batch > 65536)
        return rs_err_set(err, RS_ERR_ARG, "compile: batch must be 1..65536, got %d", o->batch);
    if (o->threads < 1 || o->threads > 1024)
        return rs_err_set(err, RS_ERR_ARG, "compile: threads must be >= 1, got %d", o->threads);
    if (o->device != RS_PLAN_DEV_CPU && o->device != RS_PLAN_DEV_CUDA)
        return rs_err_set(err, RS_ERR_ARG, "compile: device %d; plans are for the cpu or cuda", (int)o->device);
    if (o->device == RS_PLAN_DEV_CUDA && o->prec == RS_PLAN_INT8)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "compile: precision=int8 is for device=cpu (oneDNN's s8 kernels "
                          "with calibration); device=cuda compiles precision=fp32 or precision=bf16");
    if (o->prec == RS_PLAN_INT8 && !o->calib)
        return rs_err_set(err, RS_ERR_ARG, "compile: precision=int8 needs calibration data (calib=DATA): the input "
                                           "scales come from what the model sees there");
    if (!rs_model_params(m)) return rs_err_set(err, RS_ERR_ARG, "compile: model %s is not built", rs_model_name(m));
    if (rs_model_device(m).kind != RS_DEV_CPU) {
        char where[32];
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "compile: model %s is on %s; plans are built from a model on the "
                          "CPU (device=cuda then makes one for a GPU): `to %s cpu` first", rs_model_name(m),
                          rs_model_device_str(m, where, sizeof where), rs_model_name(m));
    }
    return RS_OK;
}

rs_status rs_plan_compile(rs_model *m, const rs_plan_opts *o, rs_plan **out, rs_err *err)
{
    *out = NULL;
    double t0 = rs_plan_now_s();
    rs_status st = compile_check(m, o, err);
    if (st) return st;
    rs_plan *p = calloc(1, sizeof *p);
    if (!p) return rs_err_set(err, RS_ERR_NOMEM, "compile: out of memory");
    p->prec = o->prec;
    p->batch = o->batch;
    p->threads = p->build_threads = o->threads;
    p->dev = o->device;
    if (p->dev == RS_PLAN_DEV_CUDA) /* no ISA or oneDNN: the GPU's target and libraries instead */
        rs_plan_cuda_target(p->cuda_target, sizeof p->cuda_target, p->cudnn_version, sizeof p->cudnn_version,
                            p->cublaslt_version, sizeof p->cublaslt_version);
    else {
        rs_plan_dnnl_isa(p->isa, sizeof p->isa);
        rs_plan_dnnl_version(p->dnnl_version, sizeof p->dnnl_version);
    }
    snprintf(p->device, sizeof p->device, "%s", rs_plan_device(p));
    snprintf(p->source, sizeof p->source, "%s", o->source ? o->source : rs_model_name(m));
    float *amax = NULL; /* int8: per node, the threshold calibration chose for its input (owned here) */
    st = o->prec == RS_PLAN_INT8 ? rs_plan_calibrate(m, o, &amax, err) : RS_OK;
    if (!st) st = rs_plan_from_model(p, m, err);
    if (!st) st = rs_plan_run_passes(p, o, err);
    for (int i = 0; !st && amax && i < p->nnodes; i++)
        p->nodes[i].qscale = amax[i] > 0 ? 127.0f / amax[i] : 1.0f;
    free(amax);
    if (p->dev == RS_PLAN_DEV_CUDA) { /* host work only: the GPU is opened by the first run, or at load */
        if (!st) st = rs_plan_cuda_finalize(p, err);
        if (!st) st = rs_plan_memplan_mode(p, (o->passes & RS_PLAN_PASS_REUSE) != 0, err);
        if (!st) st = rs_plan_check_memory(p, err);
        if (st) {
            rs_plan_free(p);
            return st;
        }
        p->build_s = rs_plan_now_s() - t0;
        *out = p;
        return RS_OK;
    }
    if (!st) st = rs_plan_dnnl_open(p, err);
    /* oneDNN fixes a primitive's threads when it is made: make them with the plan's */
    int was = omp_get_max_threads();
    omp_set_num_threads(p->build_threads);
    if (!st) st = rs_plan_dnnl_finalize_weights(p, o, err);
    size_t scratch = 0;
    if (!st) st = rs_plan_dnnl_prepare(p, p->batch, &scratch, err);
    omp_set_num_threads(was);
    p->scratch_bytes = scratch;
    if (!st) st = rs_plan_memplan_mode(p, (o->passes & RS_PLAN_PASS_REUSE) != 0, err);
    if (!st) st = rs_plan_check_memory(p, err);
    if (!st) st = rs_plan_open_runtime(p, err);
    if (st) {
        rs_plan_free(p);
        return st;
    }
    p->build_s = rs_plan_now_s() - t0;
    *out = p;
    return RS_OK;
}
