/* Device names, the kernel-table registry and kernel contexts (see device.h and kernels.h). */
#include "device.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

const char *rs_device_name(rs_device d)
{
    switch (d.kind) {
    case RS_DEV_CPU: return "cpu";
    case RS_DEV_CUDA: return "cuda";
    case RS_DEV_GUARD: return "guard";
    default: return "?";
    }
}

const rs_kernels *rs_kernels_for(rs_device d)
{
    switch (d.kind) {
    case RS_DEV_CPU: return &rs_cpu_kernels;
#ifdef RS_HAVE_CUDA
    /* the table whether or not a GPU is present: its calls then fail with "no CUDA device"; callers
     * that choose a device ask rs_cuda_query (engine/cuda/cuda.h) first */
    case RS_DEV_CUDA: return &rs_cuda_kernels;
#endif
    case RS_DEV_GUARD: return &rs_guard_kernels;
    default: return NULL;
    }
}

const char *rs_prec_name(rs_prec p)
{
    static const char *const n[RS_PREC_COUNT] = {"fp32", "bf16", "fp16"};
    return (unsigned)p < RS_PREC_COUNT ? n[p] : "?";
}

bool rs_prec_parse(const char *s, rs_prec *p)
{
    for (int i = 0; s && i < RS_PREC_COUNT; i++)
        if (!strcmp(s, rs_prec_name((rs_prec)i))) {
            *p = (rs_prec)i;
            return true;
        }
    return false;
}

rs_status rs_kctx_init(rs_kctx *ctx, const rs_kernels *k, int threads, rs_err *err)
{
    if (!ctx || !k) return rs_err_set(err, RS_ERR_ARG, "kernel context: no %s", ctx ? "kernel table" : "context");
    memset(ctx, 0, sizeof *ctx);
    ctx->k = k;
    ctx->threads = 1;
    if (threads < 1) {
        rs_status st = k->default_threads(ctx, &threads);
        if (st) return rs_kctx_check(ctx, err);
    }
    rs_kctx_set_threads(ctx, threads);
    return RS_OK;
}

void rs_kctx_set_threads(rs_kctx *ctx, int threads) { ctx->threads = threads < 1 ? 1 : threads; }

int rs_kctx_threads(const rs_kctx *ctx) { return ctx->threads; }

rs_status rs_kctx_fail(rs_kctx *ctx, rs_status code, const char *fmt, ...)
{
    if (!ctx || code == RS_OK) return code;
    /* The first failure wins: threads sharing a context race here only to lose quietly. */
    rs_status none = RS_OK;
    if (!__atomic_compare_exchange_n(&ctx->status, &none, code, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return code;
    ctx->err.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err.msg, sizeof ctx->err.msg, fmt, ap);
    va_end(ap);
    return code;
}

rs_status rs_kctx_status(const rs_kctx *ctx) { return __atomic_load_n(&ctx->status, __ATOMIC_ACQUIRE); }

rs_status rs_kctx_check(rs_kctx *ctx, rs_err *err)
{
    rs_status st = rs_kctx_status(ctx);
    if (st == RS_OK) return RS_OK;
    if (err) *err = ctx->err;
    rs_err_clear(&ctx->err);
    __atomic_store_n(&ctx->status, RS_OK, __ATOMIC_RELEASE);
    return st;
}

void *rs_kctx_host_view(rs_kctx *ctx, void *dev, size_t bytes, rs_err *err)
{
    if (ctx->k->kind == RS_DEV_CPU) return dev;
    void *h = malloc(bytes ? bytes : 1); /* the caller's until rs_kctx_host_done */
    if (!h) {
        rs_err_set(err, RS_ERR_NOMEM, "out of host memory for a copy of %zu bytes of %s memory", bytes, ctx->k->name);
        return NULL;
    }
    if (ctx->k->sync(ctx) || ctx->k->copy_d2h(ctx, h, dev, bytes)) {
        rs_kctx_check(ctx, err);
        free(h);
        return NULL;
    }
    return h;
}

rs_status rs_kctx_host_done(rs_kctx *ctx, void *dev, void *host, size_t bytes, bool write_back, rs_err *err)
{
    if (!host || host == dev) return RS_OK;
    rs_status st = write_back && ctx->k->copy_h2d(ctx, dev, host, bytes) ? rs_kctx_check(ctx, err) : RS_OK;
    free(host);
    return st;
}

const char *rs_unary_name(int op)
{
    static const char *const names[] = {
#define RS_UNARY(E, name) [RS_UNARY_##E] = name,
#include "engine/core/unary_ops.def"
#undef RS_UNARY
    };
    return op >= 0 && op < RS_UNARY_COUNT ? names[op] : "unary";
}
