/* Milliseconds per call of the main training kernels on each table, at one GPT block's shapes on the
 * GPU (default B=8 T=256 C=384 NH=6 V=65, the GPU configuration), through the tables' entries
 * with inputs in each table's own memory. A benchmark, not a test: it prints figures, and without a
 * GPU prints the CPU's alone with the reason.
 *
 *   bench_cuda_kernels [--B 8] [--T 256] [--C 384] [--NH 6] [--V 65] [--iters 20] [--cpu on|off]
 *
 * Each entry runs once to warm up, then iters calls followed by one sync; the time is the mean per
 * call. GFLOP/s: gemm 2MNK; attention counts the full (T, T) products the CUDA table computes
 * (forward 4 B NH T^2 hs, backward 8 B NH T^2 hs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/core/kernels.h"
#include "engine/cuda/cuda.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct cfg {
    int B, T, C, NH, V, iters;
} cfg;

typedef struct bufs {
    float *x, *w, *y, *qkv, *att, *out, *dqkv, *ws, *ln, *mu, *rs, *g, *b, *logits, *probs, *losses, *p, *m, *v;
    int32_t *tok;
    size_t wsb;
    void *all[32]; /* every block, for the end */
    int n;
} bufs;

static void *dev_in(bufs *bs, const rs_kernels *k, rs_kctx *c, size_t n, float val)
{
    void *p = NULL;
    if (k->mem_alloc(c, NULL, RS_POOL_SCRATCH, n * 4, &p)) {
        fprintf(stderr, "%s: mem_alloc of %zu bytes: %s\n", k->name, n * 4, c->err.msg);
        exit(1);
    }
    if (val != 0.0f) {
        float *h = malloc(n * 4);
        for (size_t i = 0; i < n; i++) h[i] = val * (float)((i * 2654435761u) % 1000) / 1000.0f;
        k->copy_h2d(c, p, h, n * 4);
        free(h);
    }
    bs->all[bs->n++] = p;
    return p;
}
#define dev(k, c, n, val) dev_in(&b, k, c, n, val)

#define TIME(label, flops, call)                                                                       \
    do {                                                                                               \
        if (call) fprintf(stderr, "%s %s: %s\n", k->name, label, c.err.msg), rs_kctx_check(&c, NULL); \
        k->sync(&c);                                                                                   \
        double t0 = now_s();                                                                           \
        for (int i_ = 0; i_ < f->iters; i_++) call;                                                    \
        k->sync(&c);                                                                                   \
        double ms = (now_s() - t0) * 1e3 / f->iters;                                                   \
        if ((flops) > 0) printf("  %-5s %-34s %9.3f ms  %8.1f GFLOP/s\n", k->name, label, ms, (flops) / ms * 1e-6); \
        else printf("  %-5s %-34s %9.3f ms\n", k->name, label, ms);                                    \
    } while (0)

static void bench(const rs_kernels *k, const cfg *f)
{
    rs_kctx c;
    rs_kctx_init(&c, k, 0, NULL);
    const int R = f->B * f->T, C = f->C, hs = C / f->NH;
    const size_t np = (size_t)12 * C * C * 6; /* about a 6-layer GPT's weights */
    bufs b;
    memset(&b, 0, sizeof b);
    b.x = dev(k, &c, (size_t)R * C, 1), b.w = dev(k, &c, (size_t)3 * C * C, 0.02f), b.y = dev(k, &c, (size_t)R * 4 * C, 0);
    b.qkv = dev(k, &c, (size_t)R * 3 * C, 1), b.att = dev(k, &c, (size_t)f->B * f->NH * f->T * f->T, 0);
    b.out = dev(k, &c, (size_t)R * C, 0), b.dqkv = dev(k, &c, (size_t)R * 3 * C, 0);
    b.ln = dev(k, &c, (size_t)R * C, 0), b.mu = dev(k, &c, R, 0), b.rs = dev(k, &c, R, 0);
    b.g = dev(k, &c, C, 1), b.b = dev(k, &c, C, 0), b.logits = dev(k, &c, (size_t)R * f->V, 1);
    b.probs = dev(k, &c, (size_t)R * f->V, 0), b.losses = dev(k, &c, R, 0);
    b.p = dev(k, &c, np, 0.1f), b.m = dev(k, &c, np, 0), b.v = dev(k, &c, np, 0);
    b.tok = dev(k, &c, R, 0);
    k->attn_workspace(&c, f->B, f->T, C, f->NH, &b.wsb);
    b.ws = dev(k, &c, b.wsb / 4 + 1, 0);
    double gq = 2.0 * R * 3 * C * C, ga = 4.0 * f->B * f->NH * f->T * (double)f->T * hs;
    TIME("gemm qkv (R,C)x(C,3C)^T", gq, k->gemm(&c, false, true, R, 3 * C, C, 1, b.x, C, b.w, C, 0, b.qkv, 3 * C));
    TIME("gemm dW (3C,R)x(R,C)", gq, k->gemm(&c, true, false, 3 * C, C, R, 1, b.dqkv, 3 * C, b.x, C, 1, b.w, C));
    TIME("attn_fwd", ga, k->attn_fwd(&c, b.qkv, b.out, b.att, f->B, f->T, C, f->NH));
    TIME("attn_bwd", 2 * ga, k->attn_bwd(&c, b.qkv, b.att, b.out, b.dqkv, b.ws, b.wsb, f->B, f->T, C, f->NH));
    TIME("layernorm_fwd", 0, k->layernorm_fwd(&c, b.x, b.g, b.b, b.ln, b.mu, b.rs, R, C, 1e-5f));
    TIME("layernorm_bwd", 0, k->layernorm_bwd(&c, b.x, b.g, b.mu, b.rs, b.ln, b.out, b.g, b.b, R, C));
    TIME("gelu_tanh_fwd (R,4C)", 0, k->gelu_tanh_fwd(&c, b.y, b.y, (size_t)R * 4 * C));
    TIME("softmax_xent_fwd (R,V)", 0, k->softmax_xent_fwd(&c, b.logits, b.tok, b.probs, b.losses, R, f->V));
    TIME("embed_fwd", 0, k->embed_fwd(&c, b.tok, b.x, b.x, b.out, f->B, f->T, C));
    TIME("adam_update (6-layer GPT's weights)", 0, k->adam_update(&c, b.p, b.v, b.m, b.v, np, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, true, 1));
    for (int i = 0; i < b.n; i++) k->mem_free(&c, NULL, RS_POOL_SCRATCH, b.all[i], 0);
}

int main(int argc, char **argv)
{
    cfg f = {8, 256, 384, 6, 65, 20};
    int cpu = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--B")) f.B = v;
        else if (!strcmp(argv[i], "--T")) f.T = v;
        else if (!strcmp(argv[i], "--C")) f.C = v;
        else if (!strcmp(argv[i], "--NH")) f.NH = v;
        else if (!strcmp(argv[i], "--V")) f.V = v;
        else if (!strcmp(argv[i], "--iters")) f.iters = v;
        else if (!strcmp(argv[i], "--cpu")) cpu = strcmp(argv[i + 1], "off") != 0;
        else {
            fprintf(stderr, "usage: %s [--B 8] [--T 256] [--C 384] [--NH 6] [--V 65] [--iters 20] [--cpu on|off]\n", argv[0]);
            return 2;
        }
    }
    if (f.B < 1 || f.T < 1 || f.NH < 1 || f.C % f.NH || f.V < 1 || f.iters < 1) {
        fprintf(stderr, "bench_cuda_kernels: sizes must be >= 1 and C a multiple of NH\n");
        return 2;
    }
    printf("B=%d T=%d C=%d NH=%d V=%d, %d calls each\n", f.B, f.T, f.C, f.NH, f.V, f.iters);
    rs_cuda_info ci;
    rs_cuda_query(&ci);
    const rs_kernels *k = rs_kernels_for((rs_device){RS_DEV_CUDA, 0});
    if (k && ci.count > 0) {
        rs_cuda_gpu g;
        if (!rs_cuda_gpu_info(0, &g, NULL)) printf("cuda:0 %s, compute capability %d.%d\n", g.name, g.cc_major, g.cc_minor);
        bench(k, &f);
    } else {
        printf("%s\n", ci.why);
    }
    if (cpu) bench(&rs_cpu_kernels, &f);
    return 0;
}
