/* A model's place: moving it to another device (torch's `model.to(device)`) and host access to its
 * parameters for code that reads or writes them as host floats (checkpoints, ONNX export, plans). */
#include "model_internal.h"

#include "engine/core/kernels.h"
#include "engine/cuda/cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rs_status rs_model_use_device(const rs_model *m, rs_err *err)
{
    /* the CUDA table runs on the thread's current GPU; a session may hold models on several */
    return m->dev.kind == RS_DEV_CUDA ? rs_cuda_use(m->dev.index, err) : RS_OK;
}

const char *rs_model_device_str(const rs_model *m, char *buf, size_t n)
{
    if (m->dev.kind == RS_DEV_CUDA) snprintf(buf, n, "cuda:%d", m->dev.index);
    else snprintf(buf, n, "%s", rs_device_name(m->dev));
    return buf;
}

float *rs_model_params_map(rs_model *m, rs_err *err)
{
    if (!m->built || !m->params) {
        rs_err_set(err, RS_ERR_ARG, "model %s is not built", m->name);
        return NULL;
    }
    if (rs_model_use_device(m, err)) return NULL;
    return rs_kctx_host_view(&m->ctx, m->params, m->numel * sizeof(float), err);
}

rs_status rs_model_params_unmap(rs_model *m, float *host, bool write_back, rs_err *err)
{
    return rs_kctx_host_done(&m->ctx, m->params, host, m->numel * sizeof(float), write_back, err);
}

rs_status rs_model_grads_sumsq(rs_model *m, double *sq, rs_err *err)
{
    *sq = 0.0;
    if (!m->grads) return RS_OK;
    rs_status st = rs_model_use_device(m, err);
    if (st) return st;
    const float *g = rs_kctx_host_view(&m->ctx, m->grads, m->numel * sizeof(float), err);
    if (!g) return err ? err->code : RS_ERR_NOMEM;
    for (size_t i = 0; i < m->numel; i++) *sq += (double)g[i] * g[i];
    return rs_kctx_host_done(&m->ctx, m->grads, (void *)g, m->numel * sizeof(float), false, err);
}

/* One buffer of numel floats moved from table `from` (context fc) to table `to` (context tc) through
 * host memory: the two devices need not see each other. *out is to's block, counted in pool p. */
static rs_status move_buf(rs_model *m, rs_device tdev, const rs_kernels *to, rs_kctx *tc, rs_pool p,
                          const float *src, bool copy, float **out, rs_err *err)
{
    /* the size rs_model_buf_free gives back (one float for a model without parameters) */
    size_t bytes = rs_model_buf_bytes(m);
    void *dst = NULL;
    /* each side's calls run with its own GPU current (cuda:0 -> cuda:1 goes through both) */
    rs_status st = tdev.kind == RS_DEV_CUDA ? rs_cuda_use(tdev.index, err) : RS_OK;
    if (st) return st;
    if (to->mem_alloc(tc, m->mem, p, bytes, &dst)) {
        rs_err e = {0};
        rs_kctx_check(tc, &e);
        return rs_err_set(err, RS_ERR_NOMEM, "model %s: no room for its %s on the new device (%s)", m->name,
                          rs_pool_name(p), e.msg);
    }
    if (copy) {
        float *h = malloc(bytes ? bytes : 1); /* the stage between the devices, freed here */
        if (!h) st = rs_err_set(err, RS_ERR_NOMEM, "model %s: out of host memory moving it", m->name);
        if (!st) st = rs_model_use_device(m, err);
        if (!st && (m->k->sync(&m->ctx) || m->k->copy_d2h(&m->ctx, h, src, bytes))) st = rs_kctx_check(&m->ctx, err);
        if (!st && tdev.kind == RS_DEV_CUDA) st = rs_cuda_use(tdev.index, err);
        if (!st && to->copy_h2d(tc, dst, h, bytes)) st = rs_kctx_check(tc, err);
        free(h);
        if (st) {
            to->mem_free(tc, m->mem, p, dst, bytes);
            return st;
        }
    }
    *out = dst;
    return RS_OK;
}

rs_status rs_model_to(rs_model *m, rs_device dev, rs_err *err)
{
    if (!m->built) return rs_err_set(err, RS_ERR_ARG, "model %s is not built", m->name);
    if (m->dev.kind == dev.kind && m->dev.index == dev.index) return RS_OK;
    if (m->sharded || m->grads_released || m->tp_comm)
        return rs_err_set(err, RS_ERR_ARG, "model %s is sharded across ranks; only a whole model moves", m->name);
    if (m->fixed_batch > 1)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "model %s takes %d samples at a time (an imported fixed batch); "
                          "such a model runs on the CPU", m->name, m->fixed_batch);
    const rs_kernels *k = rs_kernels_for(dev);
    if (!k) return rs_err_set(err, RS_ERR_UNSUPPORTED, "this build has no kernels for %s", rs_device_name(dev));
    rs_kctx ctx;
    /* host threads stay the model's where the new table uses them (CPU to guard and back) */
    rs_status st = rs_kctx_init(&ctx, k, k->kind == RS_DEV_CUDA ? 0 : m->ctx.threads, err);
    if (st) return st;
    ctx.prec = m->ctx.prec;
    float *p = NULL, *g = NULL;
    st = move_buf(m, dev, k, &ctx, RS_POOL_PARAMS, m->params, true, &p, err);
    /* gradients do not outlive a step (zero_grad starts every one): fresh zeros */
    if (!st && m->grads) st = move_buf(m, dev, k, &ctx, RS_POOL_GRADS, NULL, false, &g, err);
    if (st) {
        if (p) k->mem_free(&ctx, m->mem, RS_POOL_PARAMS, p, rs_model_buf_bytes(m));
        return st;
    }
    /* the activations were sized and placed for the old device: the next pass makes new ones */
    rs_model_use_device(m, NULL); /* the old blocks are freed on their own GPU */
    rs_acts_free(m->dflt);
    m->dflt = NULL;
    rs_model_buf_free(m, RS_POOL_PARAMS, m->params);
    rs_model_buf_free(m, RS_POOL_GRADS, m->grads);
    m->params = p;
    m->grads = g;
    m->k = k;
    m->dev = dev;
    m->ctx = ctx;
    return rs_model_use_device(m, err);
}
