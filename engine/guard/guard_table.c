/* The guard table (guard.h): every entry is the CPU table's entry of the same name, called with the
 * same arguments between rs_guard_enter and rs_guard_leave, so the device's memory is open exactly
 * while one of its entries runs. Memory and copies are its own (guard_arena.c), checked for which side
 * is the device's.
 *
 * The context is passed down as it is: the CPU entries read only ctx->threads and ctx->prec and
 * record failures with rs_kctx_fail in the context they are given, so the first failure sticks in
 * the caller's context as on every table; ctx->k (this table) is never read by them.
 *
 * The wrappers and the table come from engine/core/kernels.def: an RS_KERNEL entry's wrapper is
 * derived (its array arguments are checked by type), an RS_KERNEL_MIXED entry's is written out here,
 * and the list declares it, so a MIXED entry without its wrapper does not compile ("used but never
 * defined"). */
#include <stdarg.h>
#include <stdint.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_scope.h" /* CPU_CTX: the CPU table's own check of a context, with its message */
#include "guard.h"
#include "guard_arena.h"

/* ---- array arguments must be device memory ----
 * The kernels.h contract: every float, int32 and byte array an entry takes is device memory. A GPU
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

/* ---- the wrappers: an RS_KERNEL entry's is derived here; a MIXED entry's is only declared, and
 *      written out below, since its pointers' sides are not in their types ---- */
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
#define RS_KERNEL(name, params, args) GUARD_WRAP(name, params, args)
#define RS_KERNEL_MIXED(name, params, args) static rs_status guard_##name params;
#include "engine/core/kernels.def"

/* ---- the MIXED entries, written out ---- */

/* int32_t is int here, so _Generic cannot tell default_threads' out-parameter and transpose's perm
 * (host) from an int32 array (device). */
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

const rs_kernels rs_guard_kernels = {
    .name = "guard",
    .kind = RS_DEV_GUARD,
#define RS_KERNEL(name, params, args) .name = guard_##name,
#include "engine/core/kernels.def"
};
