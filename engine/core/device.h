/* Devices and the context every kernel call runs with: what a device is (rs_device), the compute type
 * of products (rs_prec), the small host structs and operator enums kernel entries take, and rs_kctx
 * with its functions. The kernel table itself (struct rs_kernels, rs_kernels_for, the tables) is in
 * engine/core/kernels.h with what every table guarantees; only files that call entries include it.
 * A context's failure and thread count behave as kernels.h says. */
#ifndef RS_DEVICE_H
#define RS_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/dims.h"
#include "engine/core/mem.h"
#include "engine/core/status.h"

/* RS_DEV_GUARD is a test device: the CPU's kernels on memory the host cannot touch between calls
 * (engine/guard/guard.h). */
typedef enum rs_device_kind { RS_DEV_CPU = 0, RS_DEV_CUDA = 1, RS_DEV_GUARD = 2, RS_DEV_KIND_COUNT } rs_device_kind;

typedef struct rs_device {
    rs_device_kind kind;
    int index; /* GPU ordinal; 0 for the CPU */
} rs_device;

static inline rs_device rs_device_cpu(void) { return (rs_device){RS_DEV_CPU, 0}; }
const char *rs_device_name(rs_device d);

/* Geometry of one 2-d convolution or pooling window, shared by the conv and pool entries. */
typedef struct rs_conv_geom {
    int c, h, w;       /* input channels, height, width (per sample) */
    int oc;            /* output channels (conv only; pools keep c) */
    int kh, kw;        /* kernel */
    int sh, sw;        /* stride */
    int ph, pw;        /* zero padding */
    int oh, ow;        /* output height, width: (h + 2ph - kh)/sh + 1 */
} rs_conv_geom;

/* Elementwise operators of the generic tensor entries (the ONNX operators of imported graphs, and
 * the activation layers' operators): engine/core/unary_ops.def. */
typedef enum rs_unary_op {
#define RS_UNARY(E, name) RS_UNARY_##E,
#include "engine/core/unary_ops.def"
#undef RS_UNARY
} rs_unary_op;
enum { RS_UNARY_COUNT = 0
#define RS_UNARY(E, name) +1
#include "engine/core/unary_ops.def"
#undef RS_UNARY
};
/* "relu", "gelu(tanh)", ...; "unary" for a number that is none. */
const char *rs_unary_name(int op);

/* Comparisons give 0/1 (bools); MOD is Python's (the divisor's sign), FMOD C's. */
typedef enum rs_binary_op {
    RS_BINARY_ADD, RS_BINARY_SUB, RS_BINARY_MUL, RS_BINARY_DIV, RS_BINARY_POW,
    RS_BINARY_EQUAL, RS_BINARY_LESS, RS_BINARY_GREATER, RS_BINARY_LESS_EQ, RS_BINARY_GREATER_EQ,
    RS_BINARY_MOD, RS_BINARY_FMOD,
    RS_BINARY_AND, RS_BINARY_OR, RS_BINARY_XOR, /* on bools (0/1), as masks are combined */
} rs_binary_op;

typedef struct rs_kernels rs_kernels; /* engine/core/kernels.h */

/* The compute type of a context's products (gemm and the products inside convolution and attention):
 * torch.autocast's choice, applied per call. FP32 is exact fp32. BF16 rounds both operands to bfloat16
 * and accumulates in fp32 (what a bf16 GEMM computes); the output stays fp32. FP16 rounds the
 * operands to IEEE half and the product's output to half too (what an fp16 tensor would hold: beyond
 * 65504 it is inf, below 2^-24 it is 0), accumulating in fp32; an accumulating call (beta != 0) adds
 * the rounded product to the fp32 output. Everything else (norms, softmax, losses, reductions,
 * optimizers) stays fp32 whatever the context says. */
typedef enum rs_prec { RS_PREC_FP32 = 0, RS_PREC_BF16 = 1, RS_PREC_FP16 = 2, RS_PREC_COUNT } rs_prec;
const char *rs_prec_name(rs_prec p); /* "fp32", "bf16", "fp16" */
/* "fp32"/"bf16"/"fp16" -> *p; false for anything else. */
bool rs_prec_parse(const char *s, rs_prec *p);

/* What one caller's stream of kernel calls runs with. A context belongs to its caller: the model keeps
 * one (rs_model_ctx), a decoder one of its own, an optimizer runs on its model's; threads that run
 * kernels at the same time give each its own, as a stream orders the calls made on it. Plain data:
 * copying an initialised context makes another (with the same stream).
 *
 * Workspace stays an argument of the entries that need one (conv2d, attention backward), with its size,
 * rather than living here: it belongs to the pass that runs (an activation set, sized by batch and
 * thread count and counted in RS_POOL_SCRATCH by its owner), so one context can serve passes over
 * different sets, and the entry checks the size it is given against its own query. */
typedef struct rs_kctx {
    const rs_kernels *k;  /* the table this context runs on (borrowed: tables are static) */
    int threads;          /* host threads per call (>= 1) */
    void *stream;         /* a device's queue (CUDA: a cudaStream_t), NULL = its default; unused on the CPU */
    rs_status status;     /* first failure since the last rs_kctx_check (set atomically: the first wins) */
    rs_err err;           /* its message */
    rs_prec prec;         /* compute type of products (autocast); FP32 after rs_kctx_init */
    int blocks;           /* > 1: the CPU cuts each large product into this many fixed blocks, so its
                             bits do not follow `threads` (the thread tuner sets it; engine/cpu/gemm_blocks.c) */
} rs_kctx;

/* ---- contexts ---- */

/* A context on table k with `threads` host threads (< 1: the table's default), no stream and no
 * failure. RS_ERR_ARG when k is NULL. */
rs_status rs_kctx_init(rs_kctx *ctx, const rs_kernels *k, int threads, rs_err *err);
/* Threads for the calls made from now on (clamped to >= 1). Never while a call on ctx is running. */
void rs_kctx_set_threads(rs_kctx *ctx, int threads);
int rs_kctx_threads(const rs_kctx *ctx);
/* Records code with a printf-style message as ctx's failure unless one is recorded already, and
 * returns code: how an entry fails, `return rs_kctx_fail(ctx, RS_ERR_ARG, "gemm: M=%d < 0", M);`. */
rs_status rs_kctx_fail(rs_kctx *ctx, rs_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The recorded failure, RS_OK when there is none; does not clear it. */
rs_status rs_kctx_status(const rs_kctx *ctx);
/* Takes the recorded failure: copies it to err (may be NULL), clears it and returns its code (RS_OK
 * when there was none). Callers that return void record kernel failures in their context and leave
 * them for the next status-returning call, which surfaces them with this. */
rs_status rs_kctx_check(rs_kctx *ctx, rs_err *err);
/* Host access to `bytes` of device memory `dev` of ctx's table, for host code that reads or writes
 * values (checkpoints, export, a gradient norm): `dev` itself on the CPU, else a malloc'd copy made
 * after everything issued on ctx finished (sync, copy_d2h). NULL on failure (err says why). Give it
 * back with rs_kctx_host_done. */
void *rs_kctx_host_view(rs_kctx *ctx, void *dev, size_t bytes, rs_err *err);
/* Gives back a view of dev: write_back copies it into dev first (copy_h2d); a copy is then freed. */
rs_status rs_kctx_host_done(rs_kctx *ctx, void *dev, void *host, size_t bytes, bool write_back, rs_err *err);

#endif
