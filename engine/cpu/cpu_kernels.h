/* The CPU kernel functions behind rs_cpu_kernels (engine/cpu/kernels.c assembles the table).
 * Exposed so tests can call one kernel directly; everything else goes through the table. */
#ifndef RS_CPU_KERNELS_H
#define RS_CPU_KERNELS_H

#include "engine/core/device.h"

void rs_cpu_set_threads(int n);
int rs_cpu_get_threads(void);
void rs_cpu_fill(float *x, size_t n, float v);
void rs_cpu_copy(float *dst, const float *src, size_t n);
void rs_cpu_axpy(float *y, const float *x, size_t n, float a);
void rs_cpu_scale(float *x, size_t n, float a);
void rs_cpu_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
void rs_cpu_bias_rows(float *out, const float *bias, int B, int N);
void rs_cpu_bias_rows_grad(float *db, const float *dout, int B, int N);
size_t rs_cpu_conv2d_workspace(const rs_conv_geom *g, int B);
void rs_cpu_conv2d_fwd(const rs_conv_geom *g, int B, const float *in, const float *w, const float *bias,
                       float *out, float *ws);
void rs_cpu_conv2d_bwd(const rs_conv_geom *g, int B, const float *in, const float *w, const float *dout,
                       float *din, float *dw, float *db, float *ws);
void rs_cpu_maxpool_fwd(const rs_conv_geom *g, int B, const float *in, float *out, int32_t *argmax);
void rs_cpu_maxpool_bwd(const rs_conv_geom *g, int B, const float *dout, const int32_t *argmax, float *din);
void rs_cpu_avgpool_fwd(const rs_conv_geom *g, int B, const float *in, float *out);
void rs_cpu_avgpool_bwd(const rs_conv_geom *g, int B, const float *dout, float *din);
void rs_cpu_relu_fwd(const float *in, float *out, size_t n);
void rs_cpu_relu_bwd(const float *out, const float *dout, float *din, size_t n);
void rs_cpu_gelu_fwd(const float *in, float *out, size_t n);
void rs_cpu_gelu_bwd(const float *in, const float *dout, float *din, size_t n);
void rs_cpu_tanh_fwd(const float *in, float *out, size_t n);
void rs_cpu_tanh_bwd(const float *out, const float *dout, float *din, size_t n);
void rs_cpu_dropout_fwd(const float *in, float *out, uint8_t *mask, size_t n, float p, uint64_t seed);
void rs_cpu_dropout_bwd(const float *dout, const uint8_t *mask, float *din, size_t n, float p);
void rs_cpu_layernorm_fwd(const float *in, const float *gamma, const float *beta, float *out, float *mean,
                          float *rstd, int B, int N, float eps);
void rs_cpu_layernorm_bwd(const float *in, const float *gamma, const float *mean, const float *rstd,
                          const float *dout, float *din, float *dgamma, float *dbeta, int B, int N);
void rs_cpu_softmax_xent_fwd(const float *logits, const int32_t *labels, float *probs, float *losses,
                             int B, int C);
void rs_cpu_softmax_xent_bwd(const float *probs, const int32_t *labels, float *dlogits, int B, int C,
                             float scale);
void rs_cpu_embed_fwd(const int32_t *tok, const float *wte, const float *wpe, float *out, int B, int T, int C);
void rs_cpu_embed_bwd(const int32_t *tok, const float *dout, float *dwte, float *dwpe, int B, int T, int C);
void rs_cpu_attn_fwd(const float *qkv, float *out, float *att, int B, int T, int C, int NH);
size_t rs_cpu_attn_workspace(int B, int T, int C, int NH);
void rs_cpu_attn_bwd(const float *qkv, const float *att, const float *dout, float *dqkv, float *ws, int B, int T,
                     int C, int NH);
void rs_cpu_attn_step(const float *q, const float *kc, const float *vc, float *out, int B, int len, int maxT, int C,
                      int NH);
void rs_cpu_gelu_tanh_fwd(const float *in, float *out, size_t n);
void rs_cpu_gelu_tanh_bwd(const float *in, const float *dout, float *din, size_t n);
void rs_cpu_add(const float *a, const float *b, float *out, size_t n);
void rs_cpu_unary(rs_unary_op op, const float *x, float *y, size_t n, float alpha, float beta);
void rs_cpu_binary(rs_binary_op op, const float *a, const rs_dims *as, const float *b, const rs_dims *bs, float *y,
                   const rs_dims *ys);
void rs_cpu_select(const float *c, const rs_dims *cs, const float *a, const rs_dims *as, const float *b,
                   const rs_dims *bs, float *y, const rs_dims *ys);
void rs_cpu_matmul(const float *a, const rs_dims *as, const float *b, const rs_dims *bs, float *y, const rs_dims *ys);
void rs_cpu_transpose(const float *x, const rs_dims *xs, const int *perm, float *y);
void rs_cpu_slice(const float *x, const rs_dims *xs, const int64_t *starts, const int64_t *steps, float *y,
                  const rs_dims *ys);
void rs_cpu_concat(int n, const float *const *x, const rs_dims *const *xs, int axis, float *y, const rs_dims *ys);
void rs_cpu_reduce(bool mean, const float *x, const rs_dims *xs, uint32_t mask, float *y);
void rs_cpu_softmax(const float *x, float *y, size_t outer, size_t len, size_t inner, bool log);
void rs_cpu_trilu(const float *x, const rs_dims *xs, bool upper, int64_t k, float *y);
void rs_cpu_pool2d(const rs_conv_geom *g, int pb, int pr, bool max, bool count_include_pad, int B, const float *in,
                   float *out);
void rs_cpu_sgd_update(float *p, const float *g, float *mom, size_t n, float lr, float momentum,
                       float dampening, float wd, bool nesterov, bool first_step);
void rs_cpu_adam_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                        float b2, float eps, float wd, bool decoupled, int64_t t);

#endif
