/* Devices, the per-device kernel table and the context every kernel call runs with.
 * Layers, the executor and optimizers never compute directly: they call through an rs_kernels table
 * chosen by the device their buffers live on, passing an rs_kctx (threads, a stream, the first
 * failure). The CPU table (engine/cpu/) is the reference every other table is tested against
 * (tests/engine/test_kernel_harness.c); a CUDA table is added by filling the same struct, without
 * touching any layer or the executor.
 *
 * What every table guarantees (a new device's table must too; the harness checks the observable part):
 *  - Memory. Every array argument of an entry is device memory of the table's device: a block from
 *    its mem_alloc or any address inside one. The exceptions are named: the host side of copy_h2d /
 *    copy_d2h, and the small host structs and out-parameters (rs_conv_geom, size_t *bytes, void **out).
 *    On the CPU device memory is host memory, so any host pointer works there, and the CPU code of the
 *    engine passes its host buffers directly.
 *  - Allocation and the tracker. mem_alloc returns zero-filled memory aligned to 64 bytes or more and
 *    counts `bytes` in pool p of the rs_mem tracker it is given (NULL: uncounted); mem_free takes the
 *    same tracker, pool and size. A device table counts its allocations there exactly as the CPU's
 *    does (rs_mem_count), so the tracker stays the one source of every memory figure.
 *  - Ordering. Calls made on one context run in the order they were made: a device queues them on
 *    ctx->stream, the CPU runs each before returning. copy_h2d and copy_d2h return when the copy is
 *    complete (the host buffer may be reused or read at once); other entries may return earlier on a
 *    device with a queue, and sync(ctx) returns when everything issued on ctx has finished. Calls on
 *    different contexts are unordered with respect to each other.
 *  - Status. Every entry takes the context first and returns RS_OK or an error; a failing entry also
 *    records the failure in the context (rs_kctx_fail), and the first one recorded is kept until
 *    rs_kctx_check takes it (sticky, as CUDA's errors are). A device that learns of a failure late (an
 *    asynchronous launch) returns it from a later call or from sync. The CPU fails on bad arguments:
 *    negative sizes, NULL arrays that are not optional, a workspace smaller than its query said,
 *    overlapping copies, an uninitialised context. On a failure outputs are unspecified.
 *  - Threads. ctx->threads is the number of host threads one call may use. Each call runs with its own
 *    context's count whatever other threads of the process do with theirs (engine/cpu/cpu_scope.h
 *    says how the CPU keeps OpenMP and OpenBLAS to it). A device without host threads ignores it.
 *
 * Conventions for the compute entries: f32, row-major. Forward entries overwrite their outputs.
 * Backward entries OVERWRITE the input gradient (din) and ACCUMULATE (+=) into parameter gradients,
 * so gradient accumulation over micro-steps is free and zeroing parameter gradients is one explicit
 * step. Optional pointers (may be NULL) are marked where they are. */
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

/* Elementwise operators of the generic tensor entries (the ONNX operators of imported graphs). */
typedef enum rs_unary_op {
    RS_UNARY_RELU, RS_UNARY_TANH, RS_UNARY_SIGMOID, RS_UNARY_ERF, RS_UNARY_GELU, RS_UNARY_GELU_TANH,
    RS_UNARY_SQRT, RS_UNARY_EXP, RS_UNARY_LOG, RS_UNARY_NEG, RS_UNARY_ABS, RS_UNARY_RECIPROCAL,
    RS_UNARY_LEAKYRELU,   /* x >= 0 ? x : alpha x */
    RS_UNARY_CLIP,        /* min(max(x, alpha), beta) */
    RS_UNARY_HARDSIGMOID, /* max(0, min(1, alpha x + beta)) */
    RS_UNARY_HARDSWISH,   /* x * hardsigmoid(x, 1/6, 1/2) */
    RS_UNARY_CAST_INT,    /* a cast of computed floats to an integer type: truncation toward zero */
    RS_UNARY_CAST_BOOL,   /* x != 0 as 0/1 */
    RS_UNARY_NOT,         /* x == 0 as 0/1 (bools are 0/1) */
    RS_UNARY_SILU,        /* x * sigmoid(x) (SiLU, swish) */
} rs_unary_op;
/* How many there are: new operators go at the end (plan files store the number), and this follows. */
#define RS_UNARY_COUNT (RS_UNARY_SILU + 1)

/* Comparisons give 0/1 (bools); MOD is Python's (the divisor's sign), FMOD C's. */
typedef enum rs_binary_op {
    RS_BINARY_ADD, RS_BINARY_SUB, RS_BINARY_MUL, RS_BINARY_DIV, RS_BINARY_POW,
    RS_BINARY_EQUAL, RS_BINARY_LESS, RS_BINARY_GREATER, RS_BINARY_LESS_EQ, RS_BINARY_GREATER_EQ,
    RS_BINARY_MOD, RS_BINARY_FMOD,
    RS_BINARY_AND, RS_BINARY_OR, RS_BINARY_XOR, /* on bools (0/1), as masks are combined */
} rs_binary_op;

typedef struct rs_kernels rs_kernels;

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
} rs_kctx;

struct rs_kernels {
    const char *name;          /* "cpu", "cuda", "guard" */
    rs_device_kind kind;
    /* Every member from here on is an entry: required, context first, returns rs_status. The harness
     * counts them (a new entry without a harness case fails it). */

    /* ---- context and memory ---- */
    /* *threads = the count a context gets when none is asked for (CPU: OMP_NUM_THREADS, else the
     * processors this process may run on; 1 for a device without host threads). */
    rs_status (*default_threads)(rs_kctx *ctx, int *threads);
    /* *out = bytes of zero-filled device memory, counted in pool p of mem (may be NULL: uncounted). */
    rs_status (*mem_alloc)(rs_kctx *ctx, rs_mem *mem, rs_pool p, size_t bytes, void **out);
    /* Gives back a block of mem_alloc with the same mem, p and bytes. NULL ptr: nothing to do. */
    rs_status (*mem_free)(rs_kctx *ctx, rs_mem *mem, rs_pool p, void *ptr, size_t bytes);
    /* dst device <- src host; dst host <- src device; device -> device. The ranges must not overlap. */
    rs_status (*copy_h2d)(rs_kctx *ctx, void *dst, const void *src, size_t bytes);
    rs_status (*copy_d2h)(rs_kctx *ctx, void *dst, const void *src, size_t bytes);
    rs_status (*copy_d2d)(rs_kctx *ctx, void *dst, const void *src, size_t bytes);
    /* Every byte of dst[0, bytes) = (unsigned char)value. */
    rs_status (*mem_set)(rs_kctx *ctx, void *dst, int value, size_t bytes);
    /* Returns when every call made on ctx has finished. */
    rs_status (*sync)(rs_kctx *ctx);

    /* ---- basic ---- */
    rs_status (*fill)(rs_kctx *ctx, float *x, size_t n, float v);
    /* y += a * x */
    rs_status (*axpy)(rs_kctx *ctx, float *y, const float *x, size_t n, float a);
    rs_status (*scale)(rs_kctx *ctx, float *x, size_t n, float a);
    /* C(M,N) = alpha * op(A) op(B) + beta * C, op = transpose when ta/tb; leading dimensions as BLAS
     * row-major (lda >= columns of A as stored, ...). */
    rs_status (*gemm)(rs_kctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc);

    /* ---- linear ---- */
    /* out(B,N) += bias(N) on every row */
    rs_status (*bias_rows)(rs_kctx *ctx, float *out, const float *bias, int B, int N);
    /* db(N) += sum over rows of dout(B,N) */
    rs_status (*bias_rows_grad)(rs_kctx *ctx, float *db, const float *dout, int B, int N);

    /* ---- conv2d (weight (OC, C, KH, KW), bias (OC) or NULL) ---- */
    /* *bytes = workspace conv2d_fwd/bwd need for a batch of B with ctx's threads. */
    rs_status (*conv2d_workspace)(rs_kctx *ctx, const rs_conv_geom *g, int B, size_t *bytes);
    rs_status (*conv2d_fwd)(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, const float *w,
                            const float *bias, float *out, float *ws, size_t ws_bytes);
    /* din (first layer: no input gradient wanted) and db may be NULL. */
    rs_status (*conv2d_bwd)(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, const float *w,
                            const float *dout, float *din, float *dw, float *db, float *ws, size_t ws_bytes);

    /* ---- pooling (per channel; geometry uses c, h, w, k, s, p, oh, ow) ---- */
    /* argmax may be NULL (inference: nothing is kept for backward). */
    rs_status (*maxpool_fwd)(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, float *out,
                             int32_t *argmax);
    rs_status (*maxpool_bwd)(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *dout, const int32_t *argmax,
                             float *din);
    /* count_include_pad semantics (PyTorch's default). */
    rs_status (*avgpool_fwd)(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, float *out);
    rs_status (*avgpool_bwd)(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *dout, float *din);

    /* ---- elementwise activations ---- */
    rs_status (*relu_fwd)(rs_kctx *ctx, const float *in, float *out, size_t n);
    rs_status (*relu_bwd)(rs_kctx *ctx, const float *out, const float *dout, float *din, size_t n);
    /* exact GELU, x * Phi(x) (PyTorch nn.GELU default) */
    rs_status (*gelu_fwd)(rs_kctx *ctx, const float *in, float *out, size_t n);
    rs_status (*gelu_bwd)(rs_kctx *ctx, const float *in, const float *dout, float *din, size_t n);
    rs_status (*tanh_fwd)(rs_kctx *ctx, const float *in, float *out, size_t n);
    rs_status (*tanh_bwd)(rs_kctx *ctx, const float *out, const float *dout, float *din, size_t n);

    /* ---- dropout: mask drawn from a counter-based hash of (seed, index) so any device and any
     *      thread count gives the same mask; kept values are scaled by 1/(1-p); 0 <= p <= 1. ---- */
    rs_status (*dropout_fwd)(rs_kctx *ctx, const float *in, float *out, uint8_t *mask, size_t n, float p,
                             uint64_t seed);
    rs_status (*dropout_bwd)(rs_kctx *ctx, const float *dout, const uint8_t *mask, float *din, size_t n, float p);

    /* ---- layer norm over the last N of (B, N); mean/rstd (B) saved for backward ---- */
    rs_status (*layernorm_fwd)(rs_kctx *ctx, const float *in, const float *gamma, const float *beta, float *out,
                               float *mean, float *rstd, int B, int N, float eps);
    /* din may be NULL (parameter gradients only). */
    rs_status (*layernorm_bwd)(rs_kctx *ctx, const float *in, const float *gamma, const float *mean,
                               const float *rstd, const float *dout, float *din, float *dgamma, float *dbeta, int B,
                               int N);

    /* ---- softmax + cross-entropy over (B, C) logits; labels in [0, C) ---- */
    /* Writes probs (B,C) and per-sample losses (B); the caller averages. */
    rs_status (*softmax_xent_fwd)(rs_kctx *ctx, const float *logits, const int32_t *labels, float *probs,
                                  float *losses, int B, int C);
    /* dlogits = (probs - onehot(labels)) * scale (scale = 1/B for a mean loss). */
    rs_status (*softmax_xent_bwd)(rs_kctx *ctx, const float *probs, const int32_t *labels, float *dlogits, int B,
                                  int C, float scale);

    /* ---- transformer (engine/cpu/attn_kernels.c); shapes (B, T, C), row-major ---- */
    /* out (B,T,C) = wte[tok[b,t]] + wpe[t]; tok (B,T) int32, already checked to lie in [0, V). */
    rs_status (*embed_fwd)(rs_kctx *ctx, const int32_t *tok, const float *wte, const float *wpe, float *out, int B,
                           int T, int C);
    /* dwte[tok[b,t]] += dout[b,t]; dwpe[t] += sum over b of dout[b,t] (both ACCUMULATE). */
    rs_status (*embed_bwd)(rs_kctx *ctx, const int32_t *tok, const float *dout, float *dwte, float *dwpe, int B,
                           int T, int C);
    /* Causal multi-head self-attention. qkv (B,T,3C) holds [q | k | v] per position, NH heads of
     * hs = C/NH (head h is columns [h*hs, (h+1)*hs) of each part). out (B,T,C) = per head
     * softmax(q k^T / sqrt(hs), keys s <= t only) v, heads side by side. att (B,NH,T,T) receives the
     * probabilities (entries s > t are 0) for backward. */
    rs_status (*attn_fwd)(rs_kctx *ctx, const float *qkv, float *out, float *att, int B, int T, int C, int NH);
    /* *bytes = workspace attn_bwd needs with ctx's threads. */
    rs_status (*attn_workspace)(rs_kctx *ctx, int B, int T, int C, int NH, size_t *bytes);
    /* dqkv (B,T,3C) is OVERWRITTEN with d(loss)/d(qkv) from dout (B,T,C) and the saved att. */
    rs_status (*attn_bwd)(rs_kctx *ctx, const float *qkv, const float *att, const float *dout, float *dqkv,
                          float *ws, size_t ws_bytes, int B, int T, int C, int NH);
    /* One decoding step with a KV cache: q (B,C) is the query of position len-1; kc, vc (B,maxT,C) hold
     * the keys and values of positions [0, len) (the caller wrote row len-1), 1 <= len <= maxT. out
     * (B,C). Equal to row len-1 of attn_fwd over the whole prefix. */
    rs_status (*attn_step)(rs_kctx *ctx, const float *q, const float *kc, const float *vc, float *out, int B,
                           int len, int maxT, int C, int NH);
    /* GELU, tanh approximation as GPT-2 (torch approximate='tanh'):
     * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
    rs_status (*gelu_tanh_fwd)(rs_kctx *ctx, const float *in, float *out, size_t n);
    rs_status (*gelu_tanh_bwd)(rs_kctx *ctx, const float *in, const float *dout, float *din, size_t n);
    /* out = a + b (out may alias a or b). */
    rs_status (*add)(rs_kctx *ctx, const float *a, const float *b, float *out, size_t n);

    /* ---- generic tensor ops (engine/cpu/tensor_kernels.c): the operators of imported graphs that
     *      no layer above covers; forward only. Shapes are full and concrete (the batch included),
     *      tensors contiguous row-major, broadcasting numpy's (dims aligned right, 1 stretches). ---- */
    /* y = op(x) on n elements; alpha, beta as rs_unary_op says (LeakyRelu, Clip, HardSigmoid). */
    rs_status (*unary)(rs_kctx *ctx, rs_unary_op op, const float *x, float *y, size_t n, float alpha, float beta);
    /* y (ys) = a op b, a and b broadcast to ys. */
    rs_status (*binary)(rs_kctx *ctx, rs_binary_op op, const float *a, const rs_dims *as, const float *b, const rs_dims *bs, float *y,
                   const rs_dims *ys);
    /* y (ys) = c != 0 ? a : b, all broadcast to ys (ONNX Where); with c NULL, y = a broadcast to ys
     * (ONNX Expand) and b is not read. */
    rs_status (*select)(rs_kctx *ctx, const float *c, const rs_dims *cs, const float *a, const rs_dims *as, const float *b,
                   const rs_dims *bs, float *y, const rs_dims *ys);
    /* numpy matmul: (..., M, K) x (..., K, N) -> ys, leading dims broadcast; a 1-d a is (1, K), a 1-d
     * b (K, 1), their unit dim dropped from ys. */
    rs_status (*matmul)(rs_kctx *ctx, const float *a, const rs_dims *as, const float *b, const rs_dims *bs, float *y, const rs_dims *ys);
    /* y = x with its dims permuted: y dim i is x dim perm[i]. */
    rs_status (*transpose)(rs_kctx *ctx, const float *x, const rs_dims *xs, const int *perm, float *y);
    /* y (ys) [i...] = x [starts + i * steps] per dim; steps may be negative, every index is inside x. */
    rs_status (*slice)(rs_kctx *ctx, const float *x, const rs_dims *xs, const int64_t *starts, const int64_t *steps, float *y,
                  const rs_dims *ys);
    /* y (ys) = the n inputs x[k] (xs[k]) side by side along axis. */
    rs_status (*concat)(rs_kctx *ctx, int n, const float *const *x, const rs_dims *const *xs, int axis, float *y, const rs_dims *ys);
    /* y = the sum (mean when mean) of x over the dims in mask (bit i: dim i), in the order of the dims
     * that stay (keepdims only changes the shape, not the layout). */
    rs_status (*reduce)(rs_kctx *ctx, bool mean, const float *x, const rs_dims *xs, uint32_t mask, float *y);
    /* softmax (log-softmax when log) of x viewed as (outer, len, inner), over len. */
    rs_status (*softmax)(rs_kctx *ctx, const float *x, float *y, size_t outer, size_t len, size_t inner, bool log);
    /* y = x with each matrix of the last two dims cut to its upper (j - i >= k) or lower (j - i <= k)
     * triangle, zeros elsewhere. */
    rs_status (*trilu)(rs_kctx *ctx, const float *x, const rs_dims *xs, bool upper, int64_t k, float *y);
    /* Max or average pooling with any padding: g->ph, g->pw are the top and left pads, pb and pr the
     * bottom and right ones, g->oh, g->ow the output size as the caller computed it (a ceil-mode window
     * may hang past the padding). Averages divide by the window's cells inside the padded input
     * (count_include_pad) or inside the input. */
    rs_status (*pool2d)(rs_kctx *ctx, const rs_conv_geom *g, int pb, int pr, bool max, bool count_include_pad, int B, const float *in,
                   float *out);

    /* ---- optimizers over a flat slice of n parameters (a ZeRO shard is just a smaller slice) ---- */
    /* PyTorch SGD: g' = g + wd*p; buf = first ? g' : momentum*buf + (1-dampening)*g';
     * d = nesterov ? g' + momentum*buf : buf; p -= lr*d. mom may be NULL when momentum == 0. */
    rs_status (*sgd_update)(rs_kctx *ctx, float *p, const float *g, float *mom, size_t n, float lr, float momentum,
                            float dampening, float wd, bool nesterov, bool first_step);
    /* PyTorch Adam/AdamW at step t >= 1: decoupled ? p *= 1 - lr*wd : g' = g + wd*p;
     * m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2; p -= lr/(1-b1^t) * m / (sqrt(v/(1-b2^t)) + eps). */
    rs_status (*adam_update)(rs_kctx *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr,
                             float b1, float b2, float eps, float wd, bool decoupled, int64_t t);
};

/* The table for a device, or NULL when this build has no kernels for it. */
const rs_kernels *rs_kernels_for(rs_device d);

/* The CPU table (engine/cpu/kernels.c), a static const struct. */
extern const rs_kernels rs_cpu_kernels;

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

/* Returns from the enclosing function when call returns an error (its status). */
#define RS_KTRY(call)                                                                                  \
    do {                                                                                               \
        rs_status rs_ktry_ = (call);                                                                   \
        if (rs_ktry_ != RS_OK) return rs_ktry_;                                                        \
    } while (0)

#endif
