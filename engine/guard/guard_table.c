/* The guard table (guard.h): every entry is the CPU table's entry of the same name, called with the
 * same arguments between rs_guard_enter and rs_guard_leave, so the device's memory is open exactly
 * while one of its entries runs. Memory and copies are its own (guard_arena.c), checked for which side
 * is the device's.
 *
 * The context is passed down as it is: the CPU entries read only ctx->threads and ctx->prec and
 * record failures with rs_kctx_fail in the context they are given, so the first failure sticks in
 * the caller's context as on every table; ctx->k (this table) is never read by them.
 *
 * The wrappers come from one X-macro, GUARD_ENTRIES, with each entry's parameters and arguments; a
 * static assertion counts them against rs_kernels, so an entry added to the struct without a wrapper
 * here does not compile. */
#include <stdarg.h>
#include <stdint.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_scope.h" /* CPU_CTX: the CPU table's own check of a context, with its message */
#include "guard.h"
#include "guard_arena.h"

/* ---- array arguments must be device memory ----
 * The device.h contract: every float, int32 and byte array an entry takes is device memory. A GPU
 * faults on a host pointer there; the guard refuses it with the argument's name. NULL passes (optional
 * arrays; the CPU entry refuses a missing one). */

static bool dev_arg(const char *name, const void *p, const char **bad, const void **badp)
{
    if (!p || rs_guard_owns(p, 0)) return true;
    *bad = name;
    *badp = p;
    return false;
}

/* Sizes, flags, host structs and the context: nothing to check. */
static bool other_arg(const char *name, ...)
{
    (void)name;
    return true;
}

#define GUARD_ARG(a)                                                                                   \
    if (!bad_)                                                                                         \
        _Generic((a), float *: dev_arg, const float *: dev_arg, int32_t *: dev_arg, const int32_t *: dev_arg, \
                 uint8_t *: dev_arg, const uint8_t *: dev_arg, default: other_arg)(#a, (a), &bad_, &badp_);

static rs_status host_arg(rs_kctx *ctx, const char *entry, const char *name, const void *p)
{
    return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: %s=%p is host memory, not the guard device's (a kernel on a GPU would "
                        "fault on it); allocate it with mem_alloc and fill it with copy_h2d", entry, name, p);
}

/* GUARD_EACH(m, a, b, ...) is m(a) m(b) ...: up to 16 arguments. */
#define GUARD_N(...) GUARD_N_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define GUARD_N_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, n, ...) n
#define GUARD_CAT(a, b) GUARD_CAT_(a, b)
#define GUARD_CAT_(a, b) a##b
#define GUARD_EACH(m, ...) GUARD_CAT(GUARD_EACH_, GUARD_N(__VA_ARGS__))(m, __VA_ARGS__)
#define GUARD_EACH_1(m, a) m(a)
#define GUARD_EACH_2(m, a, ...) m(a) GUARD_EACH_1(m, __VA_ARGS__)
#define GUARD_EACH_3(m, a, ...) m(a) GUARD_EACH_2(m, __VA_ARGS__)
#define GUARD_EACH_4(m, a, ...) m(a) GUARD_EACH_3(m, __VA_ARGS__)
#define GUARD_EACH_5(m, a, ...) m(a) GUARD_EACH_4(m, __VA_ARGS__)
#define GUARD_EACH_6(m, a, ...) m(a) GUARD_EACH_5(m, __VA_ARGS__)
#define GUARD_EACH_7(m, a, ...) m(a) GUARD_EACH_6(m, __VA_ARGS__)
#define GUARD_EACH_8(m, a, ...) m(a) GUARD_EACH_7(m, __VA_ARGS__)
#define GUARD_EACH_9(m, a, ...) m(a) GUARD_EACH_8(m, __VA_ARGS__)
#define GUARD_EACH_10(m, a, ...) m(a) GUARD_EACH_9(m, __VA_ARGS__)
#define GUARD_EACH_11(m, a, ...) m(a) GUARD_EACH_10(m, __VA_ARGS__)
#define GUARD_EACH_12(m, a, ...) m(a) GUARD_EACH_11(m, __VA_ARGS__)
#define GUARD_EACH_13(m, a, ...) m(a) GUARD_EACH_12(m, __VA_ARGS__)
#define GUARD_EACH_14(m, a, ...) m(a) GUARD_EACH_13(m, __VA_ARGS__)
#define GUARD_EACH_15(m, a, ...) m(a) GUARD_EACH_14(m, __VA_ARGS__)
#define GUARD_EACH_16(m, a, ...) m(a) GUARD_EACH_15(m, __VA_ARGS__)
#define GUARD_UNPAREN(...) __VA_ARGS__

/* ---- the wrapped entries: X(name, (parameters), (arguments)); the context is always `ctx` ---- */
#define GUARD_ENTRIES(X)                                                                               \
    X(sync, (rs_kctx *ctx), (ctx))                                                                     \
    X(fill, (rs_kctx *ctx, float *x, size_t n, float v), (ctx, x, n, v))                               \
    X(axpy, (rs_kctx *ctx, float *y, const float *x, size_t n, float a), (ctx, y, x, n, a))            \
    X(scale, (rs_kctx *ctx, float *x, size_t n, float a), (ctx, x, n, a))                              \
    X(gemm, (rs_kctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, \
             const float *B, int ldb, float beta, float *C, int ldc),                                  \
      (ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))                                     \
    X(bias_rows, (rs_kctx *ctx, float *out, const float *bias, int B, int N), (ctx, out, bias, B, N))  \
    X(bias_rows_grad, (rs_kctx *ctx, float *db, const float *dout, int B, int N), (ctx, db, dout, B, N)) \
    X(conv2d_workspace, (rs_kctx *ctx, const rs_conv_geom *g, int B, size_t *bytes), (ctx, g, B, bytes)) \
    X(conv2d_fwd, (rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, const float *w,        \
                   const float *bias, float *out, float *ws, size_t ws_bytes),                         \
      (ctx, g, B, in, w, bias, out, ws, ws_bytes))                                                     \
    X(conv2d_bwd, (rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, const float *w,        \
                   const float *dout, float *din, float *dw, float *db, float *ws, size_t ws_bytes),   \
      (ctx, g, B, in, w, dout, din, dw, db, ws, ws_bytes))                                             \
    X(maxpool_fwd, (rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, float *out, int32_t *argmax), \
      (ctx, g, B, in, out, argmax))                                                                    \
    X(maxpool_bwd, (rs_kctx *ctx, const rs_conv_geom *g, int B, const float *dout, const int32_t *argmax, \
                    float *din),                                                                       \
      (ctx, g, B, dout, argmax, din))                                                                  \
    X(avgpool_fwd, (rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, float *out), (ctx, g, B, in, out)) \
    X(avgpool_bwd, (rs_kctx *ctx, const rs_conv_geom *g, int B, const float *dout, float *din),        \
      (ctx, g, B, dout, din))                                                                          \
    X(relu_fwd, (rs_kctx *ctx, const float *in, float *out, size_t n), (ctx, in, out, n))              \
    X(relu_bwd, (rs_kctx *ctx, const float *out, const float *dout, float *din, size_t n), (ctx, out, dout, din, n)) \
    X(gelu_fwd, (rs_kctx *ctx, const float *in, float *out, size_t n), (ctx, in, out, n))              \
    X(gelu_bwd, (rs_kctx *ctx, const float *in, const float *dout, float *din, size_t n), (ctx, in, dout, din, n)) \
    X(tanh_fwd, (rs_kctx *ctx, const float *in, float *out, size_t n), (ctx, in, out, n))              \
    X(tanh_bwd, (rs_kctx *ctx, const float *out, const float *dout, float *din, size_t n), (ctx, out, dout, din, n)) \
    X(dropout_fwd, (rs_kctx *ctx, const float *in, float *out, uint8_t *mask, size_t n, float p, uint64_t seed), \
      (ctx, in, out, mask, n, p, seed))                                                                \
    X(dropout_bwd, (rs_kctx *ctx, const float *dout, const uint8_t *mask, float *din, size_t n, float p), \
      (ctx, dout, mask, din, n, p))                                                                    \
    X(layernorm_fwd, (rs_kctx *ctx, const float *in, const float *gamma, const float *beta, float *out, \
                      float *mean, float *rstd, int B, int N, float eps),                              \
      (ctx, in, gamma, beta, out, mean, rstd, B, N, eps))                                              \
    X(layernorm_bwd, (rs_kctx *ctx, const float *in, const float *gamma, const float *mean, const float *rstd, \
                      const float *dout, float *din, float *dgamma, float *dbeta, int B, int N),       \
      (ctx, in, gamma, mean, rstd, dout, din, dgamma, dbeta, B, N))                                    \
    X(softmax_xent_fwd, (rs_kctx *ctx, const float *logits, const int32_t *labels, float *probs, float *losses, \
                         int B, int C),                                                                \
      (ctx, logits, labels, probs, losses, B, C))                                                      \
    X(softmax_xent_bwd, (rs_kctx *ctx, const float *probs, const int32_t *labels, float *dlogits, int B, int C, \
                         float scale),                                                                 \
      (ctx, probs, labels, dlogits, B, C, scale))                                                      \
    X(embed_fwd, (rs_kctx *ctx, const int32_t *tok, const float *wte, const float *wpe, float *out, int B, int T, \
                  int C),                                                                              \
      (ctx, tok, wte, wpe, out, B, T, C))                                                              \
    X(embed_bwd, (rs_kctx *ctx, const int32_t *tok, const float *dout, float *dwte, float *dwpe, int B, int T, \
                  int C),                                                                              \
      (ctx, tok, dout, dwte, dwpe, B, T, C))                                                           \
    X(attn_fwd, (rs_kctx *ctx, const float *qkv, float *out, float *att, int B, int T, int C, int NH), \
      (ctx, qkv, out, att, B, T, C, NH))                                                               \
    X(attn_workspace, (rs_kctx *ctx, int B, int T, int C, int NH, size_t *bytes), (ctx, B, T, C, NH, bytes)) \
    X(attn_bwd, (rs_kctx *ctx, const float *qkv, const float *att, const float *dout, float *dqkv, float *ws, \
                 size_t ws_bytes, int B, int T, int C, int NH),                                        \
      (ctx, qkv, att, dout, dqkv, ws, ws_bytes, B, T, C, NH))                                          \
    X(attn_step, (rs_kctx *ctx, const float *q, const float *kc, const float *vc, float *out, int B, int len, \
                  int maxT, int C, int NH),                                                            \
      (ctx, q, kc, vc, out, B, len, maxT, C, NH))                                                      \
    X(gelu_tanh_fwd, (rs_kctx *ctx, const float *in, float *out, size_t n), (ctx, in, out, n))         \
    X(gelu_tanh_bwd, (rs_kctx *ctx, const float *in, const float *dout, float *din, size_t n),         \
      (ctx, in, dout, din, n))                                                                         \
    X(add, (rs_kctx *ctx, const float *a, const float *b, float *out, size_t n), (ctx, a, b, out, n))  \
    X(unary, (rs_kctx *ctx, rs_unary_op op, const float *x, float *y, size_t n, float alpha, float beta), \
      (ctx, op, x, y, n, alpha, beta))                                                                 \
    X(binary, (rs_kctx *ctx, rs_binary_op op, const float *a, const rs_dims *as, const float *b,       \
               const rs_dims *bs, float *y, const rs_dims *ys),                                        \
      (ctx, op, a, as, b, bs, y, ys))                                                                  \
    X(select, (rs_kctx *ctx, const float *c, const rs_dims *cs, const float *a, const rs_dims *as,     \
               const float *b, const rs_dims *bs, float *y, const rs_dims *ys),                        \
      (ctx, c, cs, a, as, b, bs, y, ys))                                                               \
    X(matmul, (rs_kctx *ctx, const float *a, const rs_dims *as, const float *b, const rs_dims *bs, float *y, \
               const rs_dims *ys),                                                                     \
      (ctx, a, as, b, bs, y, ys))                                                                      \
    X(slice, (rs_kctx *ctx, const float *x, const rs_dims *xs, const int64_t *starts, const int64_t *steps, \
              float *y, const rs_dims *ys),                                                            \
      (ctx, x, xs, starts, steps, y, ys))                                                              \
    X(reduce, (rs_kctx *ctx, bool mean, const float *x, const rs_dims *xs, uint32_t mask, float *y),   \
      (ctx, mean, x, xs, mask, y))                                                                     \
    X(softmax, (rs_kctx *ctx, const float *x, float *y, size_t outer, size_t len, size_t inner, bool log), \
      (ctx, x, y, outer, len, inner, log))                                                             \
    X(trilu, (rs_kctx *ctx, const float *x, const rs_dims *xs, bool upper, int64_t k, float *y),       \
      (ctx, x, xs, upper, k, y))                                                                       \
    X(pool2d, (rs_kctx *ctx, const rs_conv_geom *g, int pb, int pr, bool max, bool count_include_pad, int B, \
               const float *in, float *out),                                                           \
      (ctx, g, pb, pr, max, count_include_pad, B, in, out))                                            \
    X(sgd_update, (rs_kctx *ctx, float *p, const float *g, float *mom, size_t n, float lr, float momentum, \
                   float dampening, float wd, bool nesterov, bool first_step),                         \
      (ctx, p, g, mom, n, lr, momentum, dampening, wd, nesterov, first_step))                          \
    X(adam_update, (rs_kctx *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, \
                    float b2, float eps, float wd, bool decoupled, int64_t t),                         \
      (ctx, p, g, m, v, n, lr, b1, b2, eps, wd, decoupled, t))

#define GUARD_WRAP(name, params, args)                                                                 \
    static rs_status guard_##name params                                                               \
    {                                                                                                  \
        const char *bad_ = NULL;                                                                       \
        const void *badp_ = NULL;                                                                      \
        GUARD_EACH(GUARD_ARG, GUARD_UNPAREN args)                                                      \
        if (bad_) return host_arg(ctx, #name, bad_, badp_);                                            \
        rs_guard_enter();                                                                              \
        rs_status st_ = rs_cpu_kernels.name args;                                                      \
        rs_guard_leave();                                                                              \
        return st_;                                                                                    \
    }
GUARD_ENTRIES(GUARD_WRAP)

/* Written out: int32_t is int here, so _Generic cannot tell default_threads' out-parameter and
 * transpose's perm (host) from an int32 array (device). */
static rs_status guard_default_threads(rs_kctx *ctx, int *threads)
{
    return rs_cpu_kernels.default_threads(ctx, threads); /* no device memory */
}

static rs_status guard_transpose(rs_kctx *ctx, const float *x, const rs_dims *xs, const int *perm, float *y)
{
    if (x && !rs_guard_owns(x, 0)) return host_arg(ctx, "transpose", "x", x);
    if (y && !rs_guard_owns(y, 0)) return host_arg(ctx, "transpose", "y", y);
    rs_guard_enter();
    rs_status st = rs_cpu_kernels.transpose(ctx, x, xs, perm, y);
    rs_guard_leave();
    return st;
}

/* concat takes a host array of device arrays: each of the n is checked. */
static rs_status guard_concat(rs_kctx *ctx, int n, const float *const *x, const rs_dims *const *xs, int axis,
                              float *y, const rs_dims *ys)
{
    if (y && !rs_guard_owns(y, 0)) return host_arg(ctx, "concat", "y", y);
    for (int i = 0; x && i < n; i++)
        if (x[i] && !rs_guard_owns(x[i], 0)) return host_arg(ctx, "concat", "x[i]", x[i]);
    rs_guard_enter();
    rs_status st = rs_cpu_kernels.concat(ctx, n, x, xs, axis, y, ys);
    rs_guard_leave();
    return st;
}

/* ---- memory and copies ---- */

static rs_status guard_mem_alloc(rs_kctx *ctx, rs_mem *mem, rs_pool p, size_t bytes, void **out)
{
    CPU_CTX(ctx, "mem_alloc");
    if (!out) return rs_kctx_fail(ctx, RS_ERR_ARG, "mem_alloc: out is NULL");
    *out = NULL;
    if ((unsigned)p >= RS_POOL_COUNT) return rs_kctx_fail(ctx, RS_ERR_ARG, "mem_alloc: pool %d does not exist", (int)p);
    const char *why = "";
    void *b = rs_guard_block_alloc(bytes, &why);
    if (!b) return rs_kctx_fail(ctx, RS_ERR_NOMEM, "mem_alloc: out of memory for %zu bytes of %s: %s", bytes,
                                rs_pool_name(p), why);
    rs_mem_count(mem, p, (int64_t)bytes);
    *out = b;
    return RS_OK;
}

static rs_status guard_mem_free(rs_kctx *ctx, rs_mem *mem, rs_pool p, void *ptr, size_t bytes)
{
    CPU_CTX(ctx, "mem_free");
    if ((unsigned)p >= RS_POOL_COUNT) return rs_kctx_fail(ctx, RS_ERR_ARG, "mem_free: pool %d does not exist", (int)p);
    if (!ptr) return RS_OK;
    size_t was = 0;
    int rc = rs_guard_block_free(ptr, bytes, &was);
    if (rc == -1)
        return rs_kctx_fail(ctx, RS_ERR_ARG, "mem_free: %p is not a live block of the guard device (freed twice, or "
                            "not from its mem_alloc)", ptr);
    if (rc == -2)
        return rs_kctx_fail(ctx, RS_ERR_ARG, "mem_free: the block at %p has %zu bytes, not %zu (the tracker would "
                            "count it wrong)", ptr, was, bytes);
    rs_mem_count(mem, p, -(int64_t)bytes);
    return RS_OK;
}

/* A copy's sides: dev_* must be a range of the device, host_* must not lie in it. NULL and empty
 * copies are left to the CPU entry's own checks. */
static rs_status copy_sides(rs_kctx *ctx, const char *who, const void *dev1, const void *dev2, const void *host,
                            size_t bytes)
{
    if (!bytes) return RS_OK;
    const void *dev[2] = {dev1, dev2};
    for (int i = 0; i < 2; i++)
        if (dev[i] && !rs_guard_owns(dev[i], bytes))
            return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: %p (%zu bytes) is not memory of the guard device; only its "
                                "mem_alloc's blocks are", who, dev[i], bytes);
    if (host && rs_guard_in_arena(host))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: the host side %p is the guard device's memory; copy_d2d copies "
                            "between device blocks", who, host);
    return RS_OK;
}

static rs_status guard_copy_h2d(rs_kctx *ctx, void *dst, const void *src, size_t bytes)
{
    RS_KTRY(copy_sides(ctx, "copy_h2d", dst, NULL, src, bytes));
    rs_guard_enter();
    rs_status st = rs_cpu_kernels.copy_h2d(ctx, dst, src, bytes);
    rs_guard_leave();
    return st;
}

static rs_status guard_copy_d2h(rs_kctx *ctx, void *dst, const void *src, size_t bytes)
{
    RS_KTRY(copy_sides(ctx, "copy_d2h", src, NULL, dst, bytes));
    rs_guard_enter();
    rs_status st = rs_cpu_kernels.copy_d2h(ctx, dst, src, bytes);
    rs_guard_leave();
    return st;
}

static rs_status guard_copy_d2d(rs_kctx *ctx, void *dst, const void *src, size_t bytes)
{
    RS_KTRY(copy_sides(ctx, "copy_d2d", dst, src, NULL, bytes));
    rs_guard_enter();
    rs_status st = rs_cpu_kernels.copy_d2d(ctx, dst, src, bytes);
    rs_guard_leave();
    return st;
}

static rs_status guard_mem_set(rs_kctx *ctx, void *dst, int value, size_t bytes)
{
    RS_KTRY(copy_sides(ctx, "mem_set", dst, NULL, NULL, bytes));
    rs_guard_enter();
    rs_status st = rs_cpu_kernels.mem_set(ctx, dst, value, bytes);
    rs_guard_leave();
    return st;
}

/* Every entry: the wrapped ones, the three written out and the six memory entries. */
#define GUARD_ONE(name, params, args) +1
#define GUARD_OWN 9
_Static_assert(0 GUARD_ENTRIES(GUARD_ONE) + GUARD_OWN ==
                   (sizeof(rs_kernels) - offsetof(rs_kernels, default_threads)) / sizeof(void (*)(void)),
               "rs_kernels has an entry the guard table does not wrap: add it to GUARD_ENTRIES");

#define GUARD_FIELD(name, params, args) .name = guard_##name,
const rs_kernels rs_guard_kernels = {
    .name = "guard",
    .kind = RS_DEV_GUARD,
    GUARD_ENTRIES(GUARD_FIELD)
    .default_threads = guard_default_threads,
    .transpose = guard_transpose,
    .concat = guard_concat,
    .mem_alloc = guard_mem_alloc,
    .mem_free = guard_mem_free,
    .copy_h2d = guard_copy_h2d,
    .copy_d2h = guard_copy_d2h,
    .copy_d2d = guard_copy_d2d,
    .mem_set = guard_mem_set,
};
