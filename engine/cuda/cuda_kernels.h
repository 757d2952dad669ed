/* The CUDA kernel functions behind rs_cuda_kernels (engine/cuda/cuda_table.c assembles the table);
 * each is the table entry of its name, with the contract in engine/core/device.h, on the calling
 * thread's current CUDA device and the context's stream. Exposed so tests and benches can call one
 * kernel directly; everything else goes through the table. Present only in builds with CUDA
 * (RS_HAVE_CUDA); engine/cuda/cuda.h is the part every build has. */
#ifndef RS_CUDA_KERNELS_H
#define RS_CUDA_KERNELS_H

#include "engine/core/device.h"

extern const rs_kernels rs_cuda_kernels;

rs_status rs_cuda_default_threads(rs_kctx *ctx, int *threads);
rs_status rs_cuda_mem_alloc(rs_kctx *ctx, rs_mem *mem, rs_pool p, size_t bytes, void **out);
rs_status rs_cuda_mem_free(rs_kctx *ctx, rs_mem *mem, rs_pool p, void *ptr, size_t bytes);
rs_status rs_cuda_copy_h2d(rs_kctx *ctx, void *dst, const void *src, size_t bytes);
rs_status rs_cuda_copy_d2h(rs_kctx *ctx, void *dst, const void *src, size_t bytes);
rs_status rs_cuda_copy_d2d(rs_kctx *ctx, void *dst, const void *src, size_t bytes);
rs_status rs_cuda_mem_set(rs_kctx *ctx, void *dst, int value, size_t bytes);
rs_status rs_cuda_sync(rs_kctx *ctx);
rs_status rs_cuda_fill(rs_kctx *ctx, float *x, size_t n, float v);
rs_status rs_cuda_axpy(rs_kctx *ctx, float *y, const float *x, size_t n, float a);
rs_status rs_cuda_scale(rs_kctx *ctx, float *x, size_t n, float a);
rs_status rs_cuda_gemm(rs_kctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc);
rs_status rs_cuda_bias_rows(rs_kctx *ctx, float *out, const float *bias, int B, int N);
rs_status rs_cuda_bias_rows_grad(rs_kctx *ctx, float *db, const float *dout, int B, int N);
rs_status rs_cuda_conv2d_workspace(rs_kctx *ctx, const rs_conv_geom *g, int B, size_t *bytes);
rs_status rs_cuda_conv2d_fwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, const float *w,
                             const float *bias, float *out, float *ws, size_t ws_bytes);
rs_status rs_cuda_conv2d_bwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, const float *w,
                             const float *dout, float *din, float *dw, float *db, float *ws, size_t ws_bytes);
rs_status rs_cuda_maxpool_fwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, float *out, int32_t *argmax);
rs_status rs_cuda_maxpool_bwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *dout, const int32_t *argmax,
                              float *din);
rs_status rs_cuda_avgpool_fwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *in, float *out);
rs_status rs_cuda_avgpool_bwd(rs_kctx *ctx, const rs_conv_geom *g, int B, const float *dout, float *din);
rs_status rs_cuda_relu_fwd(rs_kctx *ctx, const float *in, float *out, size_t n);
rs_status rs_cuda_relu_bwd(rs_kctx *ctx, const float *out, const float *dout, float *din, size_t n);
rs_status rs_cuda_gelu_fwd(rs_kctx *ctx, const float *in, float *out, size_t n);
rs_status rs_cuda_gelu_bwd(rs_kctx *ctx, const float *in, const float *dout, float *din, size_t n);
rs_status rs_cuda_tanh_fwd(rs_kctx *ctx, const float *in, float *out, size_t n);
rs_status rs_cuda_tanh_bwd(rs_kctx *ctx, const float *out, const float *dout, float *din, size_t n);
rs_status rs_cuda_dropout_fwd(rs_kctx *ctx, const float *in, float *out, uint8_t *mask, size_t n, float p, uint64_t seed);
rs_status rs_cuda_dropout_bwd(rs_kctx *ctx, const float *dout, const uint8_t *mask, float *din, size_t n, float p);
rs_status rs_cuda_layernorm_fwd(rs_kctx *ctx, const float *in, const float *gamma, const float *beta, float *out,
                                float *mean, float *rstd, int B, int N, float eps);
rs_status rs_cuda_layernorm_bwd(rs_kctx *ctx, const float *in, const float *gamma, const float *mean, const float *rstd,
                                const float *dout, float *din, float *dgamma, float *dbeta, int B, int N);
rs_status rs_cuda_softmax_xent_fwd(rs_kctx *ctx, const float *logits, const int32_t *labels, float *probs, float *losses,
                                   int B, int C);
rs_status rs_cuda_softmax_xent_bwd(rs_kctx *ctx, const float *probs, const int32_t *labels, float *dlogits, int B, int C,
                                   float scale);
rs_status rs_cuda_embed_fwd(rs_kctx *ctx, const int32_t *tok, const float *wte, const float *wpe, float *out, int B,
                            int T, int C);
rs_status rs_cuda_embed_bwd(rs_kctx *ctx, const int32_t *tok, const float *dout, float *dwte, float *dwpe, int B, int T,
                            int C);
rs_status rs_cuda_attn_fwd(rs_kctx *ctx, const float *qkv, float *out, float *att, int B, int T, int C, int NH);
rs_status rs_cuda_attn_workspace(rs_kctx *ctx, int B, int T, int C, int NH, size_t *bytes);
rs_status rs_cuda_attn_bwd(rs_kctx *ctx, const float *qkv, const float *att, const float *dout, float *dqkv, float *ws,
                           size_t ws_bytes, int B, int T, int C, int NH);
rs_status rs_cuda_attn_step(rs_kctx *ctx, const float *q, const float *kc, const float *vc, float *out, int B, int len,
                            int maxT, int C, int NH);
rs_status rs_cuda_gelu_tanh_fwd(rs_kctx *ctx, const float *in, float *out, size_t n);
rs_status rs_cuda_gelu_tanh_bwd(rs_kctx *ctx, const float *in, const float *dout, float *din, size_t n);
rs_status rs_cuda_add(rs_kctx *ctx, const float *a, const float *b, float *out, size_t n);
rs_status rs_cuda_unary(rs_kctx *ctx, rs_unary_op op, const float *x, float *y, size_t n, float alpha, float beta);
rs_status rs_cuda_binary(rs_kctx *ctx, rs_binary_op op, const float *a, const rs_dims *as, const float *b,
                         const rs_dims *bs, float *y, const rs_dims *ys);
rs_status rs_cuda_select(rs_kctx *ctx, const float *c, const rs_dims *cs, const float *a, const rs_dims *as,
                         const float *b, const rs_dims *bs, float *y, const rs_dims *ys);
rs_status rs_cuda_matmul(rs_kctx *ctx, const float *a, const rs_dims *as, const float *b, const rs_dims *bs, float *y,
                         const rs_dims *ys);
rs_status rs_cuda_transpose(rs_kctx *ctx, const float *x, const rs_dims *xs, const int *perm, float *y);
rs_status rs_cuda_slice(rs_kctx *ctx, const float *x, const rs_dims *xs, const int64_t *starts, const int64_t *steps,
                        float *y, const rs_dims *ys);
rs_status rs_cuda_concat(rs_kctx *ctx, int n, const float *const *x, const rs_dims *const *xs, int axis, float *y,
                         const rs_dims *ys);
rs_status rs_cuda_reduce(rs_kctx *ctx, bool mean, const float *x, const rs_dims *xs, uint32_t mask, float *y);
rs_status rs_cuda_softmax(rs_kctx *ctx, const float *x, float *y, size_t outer, size_t len, size_t inner, bool log);
rs_status rs_cuda_trilu(rs_kctx *ctx, const float *x, const rs_dims *xs, bool upper, int64_t k, float *y);
rs_status rs_cuda_pool2d(rs_kctx *ctx, const rs_conv_geom *g, int pb, int pr, bool max, bool count_include_pad, int B,
                         const float *in, float *out);
rs_status rs_cuda_sgd_update(rs_kctx *ctx, float *p, const float *g, float *mom, size_t n, float lr, float momentum,
                             float dampening, float wd, bool nesterov, bool first_step);
rs_status rs_cuda_adam_update(rs_kctx *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                              float b2, float eps, float wd, bool decoupled, int64_t t);

#endif
