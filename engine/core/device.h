/* Devices and the per-device kernel table.
 * Layers and optimizers never compute directly: they call through an rs_kernels table chosen by the
 * device their buffers live on. The CPU table (engine/cpu/) is the reference every other table is
 * tested against; a CUDA table is added by filling the same struct, without touching any layer.
 *
 * Conventions for every entry: f32, row-major, pointers are device memory of the table's device.
 * Forward entries overwrite their outputs. Backward entries OVERWRITE the input gradient (din) and
 * ACCUMULATE (+=) into parameter gradients, so gradient accumulation over micro-steps is free and
 * zeroing parameter gradients is one explicit step. */
#ifndef RS_DEVICE_H
#define RS_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dims.h"

typedef enum rs_device_kind { RS_DEV_CPU = 0, RS_DEV_CUDA = 1, RS_DEV_KIND_COUNT } rs_device_kind;

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
} rs_unary_op;

/* Comparisons give 0/1 (bools); MOD is Python's (the divisor's sign), FMOD C's. */
typedef enum rs_binary_op {
    RS_BINARY_ADD, RS_BINARY_SUB, RS_BINARY_MUL, RS_BINARY_DIV, RS_BINARY_POW,
    RS_BINARY_EQUAL, RS_BINARY_LESS, RS_BINARY_GREATER, RS_BINARY_LESS_EQ, RS_BINARY_GREATER_EQ,
    RS_BINARY_MOD, RS_BINARY_FMOD,
    RS_BINARY_AND, RS_BINARY_OR, RS_BINARY_XOR, /* on bools (0/1), as masks are combined */
} rs_binary_op;

typedef struct rs_kernels {
    const char *name;          /* "cpu", "cuda" */
    rs_device_kind kind;

    /* ---- threads (CPU; a GPU table may leave these NULL) ---- */
    void (*set_threads)(int n);
    int (*get_threads)(void);

    /* ---- basic ---- */
    void (*fill)(float *x, size_t n, float v);
    void (*copy)(float *dst, const float *src, size_t n);
    /* y += a * x */
    void (*axpy)(float *y, const float *x, size_t n, float a);
    void (*scale)(float *x, size_t n, float a);

    /* C(M,N) = alpha * op(A) op(B) + beta * C, op = transpose when ta/tb. */
    void (*gemm)(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);

    /* ---- linear ---- */
    /* out(B,N) += bias(N) on every row */
    void (*bias_rows)(float *out, const float *bias, int B, int N);
    /* db(N) += sum over rows of dout(B,N) */
    void (*bias_rows_grad)(float *db, const float *dout, int B, int N);

    /* ---- conv2d (weight (OC, C, KH, KW), bias (OC) or NULL) ---- */
    /* Bytes of workspace conv2d_fwd/bwd need for a batch of B (may depend on threads). */
    size_t (*conv2d_workspace)(const rs_conv_geom *g, int B);
    void (*conv2d_fwd)(const rs_conv_geom *g, int B, const float *in, const float *w,
                       const float *bias, float *out, float *ws);
    /* din may be NULL (first layer: no input gradient wanted). */
    void (*conv2d_bwd)(const rs_conv_geom *g, int B, const float *in, const float *w,
                       const float *dout, float *din, float *dw, float *db, float *ws);

    /* ---- pooling (per channel; geometry uses c, h, w, k, s, p, oh, ow) ---- */
    /* argmax may be NULL (inference: nothing is kept for backward). */
    void (*maxpool_fwd)(const rs_conv_geom *g, int B, const float *in, float *out, int32_t *argmax);
    void (*maxpool_bwd)(const rs_conv_geom *g, int B, const float *dout, const int32_t *argmax,
                        float *din);
    /* count_include_pad semantics (PyTorch's default). */
    void (*avgpool_fwd)(const rs_conv_geom *g, int B, const float *in, float *out);
    void (*avgpool_bwd)(const rs_conv_geom *g, int B, const float *dout, float *din);

    /* ---- elementwise activations ---- */
    void (*relu_fwd)(const float *in, float *out, size_t n);
    void (*relu_bwd)(const float *out, const float *dout, float *din, size_t n);
    /* exact GELU, x * Phi(x) (PyTorch nn.GELU default) */
    void (*gelu_fwd)(const float *in, float *out, size_t n);
    void (*gelu_bwd)(const float *in, const float *dout, float *din, size_t n);
    void (*tanh_fwd)(const float *in, float *out, size_t n);
    void (*tanh_bwd)(const float *out, const float *dout, float *din, size_t n);

    /* ---- dropout: mask drawn from a counter-based hash of (seed, index) so any device and any
     *      thread count gives the same mask; kept values are scaled by 1/(1-p). ---- */
    void (*dropout_fwd)(const float *in, float *out, uint8_t *mask, size_t n, float p, uint64_t seed);
    void (*dropout_bwd)(const float *dout, const uint8_t *mask, float *din, size_t n, float p);

    /* ---- layer norm over the last N of (B, N); mean/rstd (B) saved for backward ---- */
    void (*layernorm_fwd)(const float *in, const float *gamma, const float *beta, float *out,
                          float *mean, float *rstd, int B, int N, float eps);
    /* din may be NULL (parameter gradients only). */
    void (*layernorm_bwd)(const float *in, const float *gamma, const float *mean, const float *rstd,
                          const float *dout, float *din, float *dgamma, float *dbeta, int B, int N);

    /* ---- softmax + cross-entropy over (B, C) logits ---- */
    /* Writes probs (B,C) and per-sample losses (B); returns nothing: the caller averages. */
    void (*softmax_xent_fwd)(const float *logits, const int32_t *labels, float *probs, float *losses,
                             int B, int C);
    /* dlogits = (probs - onehot(labels)) * scale (scale = 1/B for a mean loss). */
    void (*softmax_xent_bwd)(const float *probs, const int32_t *labels, float *dlogits, int B, int C,
                             float scale);

    /* ---- transformer (engine/cpu/attn_kernels.c); shapes (B, T, C), row-major ---- */
    /* out (B,T,C) = wte[tok[b,t]] + wpe[t]; tok (B,T) int32, already checked to lie in [0, V). */
    void (*embed_fwd)(const int32_t *tok, const float *wte, const float *wpe, float *out, int B, int T, int C);
    /* dwte[tok[b,t]] += dout[b,t]; dwpe[t] += sum over b of dout[b,t] (both ACCUMULATE). */
    void (*embed_bwd)(const int32_t *tok, const float *dout, float *dwte, float *dwpe, int B, int T, int C);
    /* Causal multi-head self-attention. qkv (B,T,3C) holds [q | k | v] per position, NH heads of
     * hs = C/NH (head h is columns [h*hs, (h+1)*hs) of each part). out (B,T,C) = per head
     * softmax(q k^T / sqrt(hs), keys s <= t only) v, heads side by side. att (B,NH,T,T) receives the
     * probabilities (entries s > t are 0) for backward. */
    void (*attn_fwd)(const float *qkv, float *out, float *att, int B, int T, int C, int NH);
    /* Bytes of ws attn_bwd needs (may depend on the thread count). */
    size_t (*attn_workspace)(int B, int T, int C, int NH);
    /* dqkv (B,T,3C) is OVERWRITTEN with d(loss)/d(qkv) from dout (B,T,C) and the saved att. */
    void (*attn_bwd)(const float *qkv, const float *att, const float *dout, float *dqkv, float *ws, int B,
                     int T, int C, int NH);
    /* One decoding step with a KV cache: q (B,C) is the query of position len-1; kc, vc (B,maxT,C) hold
     * the keys and values of positions [0, len) (the caller wrote row len-1). out (B,C). Equal to row
     * len-1 of attn_fwd over the whole prefix. */
    void (*attn_step)(const float *q, const float *kc, const float *vc, float *out, int B, int len, int maxT,
                      int C, int NH);
    /* GELU, tanh approximation as GPT-2 (torch approximate='tanh'):
     * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
    void (*gelu_tanh_fwd)(const float *in, float *out, size_t n);
    void (*gelu_tanh_bwd)(const float *in, const float *dout, float *din, size_t n);
    /* out = a + b (out may alias a or b). */
    void (*add)(const float *a, const float *b, float *out, size_t n);

    /* ---- generic tensor ops (engine/cpu/tensor_kernels.c): the operators of imported graphs that
     *      no layer above covers; forward only. Shapes are full and concrete (the batch included),
     *      tensors contiguous row-major, broadcasting numpy's (dims aligned right, 1 stretches). ---- */
    /* y = op(x) on n elements; alpha, beta as rs_unary_op says (LeakyRelu, Clip, HardSigmoid). */
    void (*unary)(rs_unary_op op, const float *x, float *y, size_t n, float alpha, float beta);
    /* y (ys) = a op b, a and b broadcast to ys. */
    void (*binary)(rs_binary_op op, const float *a, const rs_dims *as, const float *b, const rs_dims *bs, float *y,
                   const rs_dims *ys);
    /* y (ys) = c != 0 ? a : b, all broadcast to ys (ONNX Where); with c NULL, y = a broadcast to ys
     * (ONNX Expand) and b is not read. */
    void (*select)(const float *c, const rs_dims *cs, const float *a, const rs_dims *as, const float *b,
                   const rs_dims *bs, float *y, const rs_dims *ys);
    /* numpy matmul: (..., M, K) x (..., K, N) -> ys, leading dims broadcast; a 1-d a is (1, K), a 1-d
     * b (K, 1), their unit dim dropped from ys. */
    void (*matmul)(const float *a, const rs_dims *as, const float *b, const rs_dims *bs, float *y, const rs_dims *ys);
    /* y = x with its dims permuted: y dim i is x dim perm[i]. */
    void (*transpose)(const float *x, const rs_dims *xs, const int *perm, float *y);
    /* y (ys) [i...] = x [starts + i * steps] per dim; steps may be negative, every index is inside x. */
    void (*slice)(const float *x, const rs_dims *xs, const int64_t *starts, const int64_t *steps, float *y,
                  const rs_dims *ys);
    /* y (ys) = the n inputs x[k] (xs[k]) side by side along axis. */
    void (*concat)(int n, const float *const *x, const rs_dims *const *xs, int axis, float *y, const rs_dims *ys);
    /* y = the sum (mean when mean) of x over the dims in mask (bit i: dim i), in the order of the dims
     * that stay (keepdims only changes the shape, not the layout). */
    void (*reduce)(bool mean, const float *x, const rs_dims *xs, uint32_t mask, float *y);
    /* softmax (log-softmax when log) of x viewed as (outer, len, inner), over len. */
    void (*softmax)(const float *x, float *y, size_t outer, size_t len, size_t inner, bool log);
    /* y = x with each matrix of the last two dims cut to its upper (j - i >= k) or lower (j - i <= k)
     * triangle, zeros elsewhere. */
    void (*trilu)(const float *x, const rs_dims *xs, bool upper, int64_t k, float *y);
    /* Max or average pooling with any padding: g->ph, g->pw are the top and left pads, pb and pr the
     * bottom and right ones, g->oh, g->ow the output size as the caller computed it (a ceil-mode window
     * may hang past the padding). Averages divide by the window's cells inside the padded input
     * (count_include_pad) or inside the input. */
    void (*pool2d)(const rs_conv_geom *g, int pb, int pr, bool max, bool count_include_pad, int B, const float *in,
                   float *out);

    /* ---- optimizers over a flat slice of n parameters (a ZeRO shard is just a smaller slice) ---- */
    /* PyTorch SGD: g' = g + wd*p; buf = first ? g' : momentum*buf + (1-dampening)*g';
     * d = nesterov ? g' + momentum*buf : buf; p -= lr*d. mom may be NULL when momentum == 0. */
    void (*sgd_update)(float *p, const float *g, float *mom, size_t n, float lr, float momentum,
                       float dampening, float wd, bool nesterov, bool first_step);
    /* PyTorch Adam/AdamW at step t >= 1: decoupled ? p *= 1 - lr*wd : g' = g + wd*p;
     * m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2; p -= lr/(1-b1^t) * m / (sqrt(v/(1-b2^t)) + eps). */
    void (*adam_update)(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                        float b2, float eps, float wd, bool decoupled, int64_t t);
} rs_kernels;

/* The table for a device, or NULL when this build has no kernels for it. */
const rs_kernels *rs_kernels_for(rs_device d);

/* Registered by engine/cpu at start-up of the library (a constructor-free static table). */
extern const rs_kernels rs_cpu_kernels;

#endif
