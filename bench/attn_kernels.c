/* Microseconds per call of the CPU transformer kernels at one GPT block's shapes (default B=12 T=64
 * C=128 NH=4, the CPU GPT training target), with 1 and 2 threads. A benchmark, not a test: it prints
 * figures and fails only when it cannot run.
 *
 *   bench_attn_kernels [--threads 1,2] [--B 12] [--T 64] [--C 128] [--NH 4] [--iters N] [--reps N]
 *
 * Every kernel runs iters calls per repetition after one warm-up repetition; the table gives the
 * fastest repetition's mean (the machine is shared, the minimum is the least disturbed) and the
 * median, and the CPU time per call of that fastest repetition summed over threads (on a loaded machine
 * wall time includes waits for a descheduled thread; CPU time shows the work). GFLOP/s for attention counts the causal half only: 2 products of T(T+1)/2 * hs per head
 * forward, 4 backward. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/cpu/blas.h"
#include "engine/cpu/cpu_kernels.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_s(void) /* CPU seconds of every thread of this process */
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static float *rnd(size_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(seed >> 40) / 16777216.0 * 2.0 - 1.0);
    }
    return x;
}

typedef struct shapes {
    int B, T, C, NH, V;
    float *qkv, *out, *att, *dout, *dqkv, *ws, *wte, *wpe, *dwte, *dwpe, *emb, *h, *hout, *hd, *kc, *vc;
    int32_t *tok;
    size_t wsb;
    rs_kctx ctx;
} shapes;

enum { K_ATTN_FWD, K_ATTN_BWD, K_ATTN_STEP, K_EMBED_FWD, K_EMBED_BWD, K_GELU_FWD, K_GELU_BWD, K_ADD, K_COUNT };
static const char *const KNAMES[K_COUNT] = {"attn_fwd", "attn_bwd", "attn_step (len=T)", "embed_fwd",
                                            "embed_bwd", "gelu_tanh_fwd (B,T,4C)", "gelu_tanh_bwd (B,T,4C)",
                                            "add (B,T,C)"};

static void run_kernel(int k, shapes *s)
{
    const int B = s->B, T = s->T, C = s->C, NH = s->NH;
    const size_t nh = (size_t)B * T * 4 * C, nc = (size_t)B * T * C;
    rs_kctx *x = &s->ctx;
    switch (k) {
    case K_ATTN_FWD: rs_cpu_attn_fwd(x, s->qkv, s->out, s->att, B, T, C, NH); break;
    case K_ATTN_BWD: rs_cpu_attn_bwd(x, s->qkv, s->att, s->dout, s->dqkv, s->ws, s->wsb, B, T, C, NH); break;
    case K_ATTN_STEP: rs_cpu_attn_step(x, s->qkv, s->kc, s->vc, s->out, B, T, T, C, NH); break;
    case K_EMBED_FWD: rs_cpu_embed_fwd(x, s->tok, s->wte, s->wpe, s->emb, B, T, C); break;
    case K_EMBED_BWD: rs_cpu_embed_bwd(x, s->tok, s->dout, s->dwte, s->dwpe, B, T, C); break;
    case K_GELU_FWD: rs_cpu_gelu_tanh_fwd(x, s->h, s->hout, nh); break;
    case K_GELU_BWD: rs_cpu_gelu_tanh_bwd(x, s->h, s->hout, s->hd, nh); break;
    case K_ADD: rs_cpu_add(x, s->out, s->emb, s->emb, nc); break;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    rs_blas_prefer_fast_kernel(argv);
    shapes s = {.B = 12, .T = 64, .C = 128, .NH = 4, .V = 50257};
    int iters = 200, reps = 7, threads[8] = {1, 2}, nthreads = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_attn_kernels: '%s' needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--B")) s.B = atoi(v);
        else if (!strcmp(a, "--T")) s.T = atoi(v);
        else if (!strcmp(a, "--C")) s.C = atoi(v);
        else if (!strcmp(a, "--NH")) s.NH = atoi(v);
        else if (!strcmp(a, "--iters")) iters = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--threads")) {
            nthreads = 0;
            for (const char *p = v; *p && nthreads < 8; p = strchr(p, ',') ? strchr(p, ',') + 1 : "")
                threads[nthreads++] = atoi(p);
        } else {
            fprintf(stderr, "bench_attn_kernels: unknown option '%s' (try --B --T --C --NH --threads --iters --reps)\n",
                    a);
            return 2;
        }
        i++;
    }
    if (s.B < 1 || s.T < 1 || s.NH < 1 || s.C % s.NH || iters < 1 || reps < 1 || nthreads < 1) {
        fprintf(stderr, "bench_attn_kernels: need B, T, NH, iters, reps >= 1 and NH dividing C\n");
        return 2;
    }
    const int B = s.B, T = s.T, C = s.C, NH = s.NH;
    const size_t nqkv = (size_t)B * T * 3 * C, nc = (size_t)B * T * C;
    s.qkv = rnd(nqkv, 1);
    s.out = rnd(nc, 2);
    s.att = rnd((size_t)B * NH * T * T, 3);
    s.dout = rnd(nc, 4);
    s.dqkv = rnd(nqkv, 5);
    s.wte = rnd((size_t)s.V * C, 6);
    s.wpe = rnd((size_t)T * C, 7);
    s.dwte = rnd((size_t)s.V * C, 8);
    s.dwpe = rnd((size_t)T * C, 9);
    s.emb = rnd(nc, 10);
    s.h = rnd(nc * 4, 11);
    s.hout = rnd(nc * 4, 12);
    s.hd = rnd(nc * 4, 15);
    s.kc = rnd(nc, 13);
    s.vc = rnd(nc, 14);
    s.tok = malloc((size_t)B * T * sizeof *s.tok);
    for (int r = 0; r < B * T; r++) s.tok[r] = (int32_t)((r * 2654435761u) % (unsigned)s.V);

    rs_blas_info bi;
    rs_blas_get_info(&bi);
    printf("bench_attn_kernels: B=%d T=%d C=%d NH=%d (hs=%d), %d calls x %d reps, OpenBLAS kernel %s\n", B, T, C,
           NH, C / NH, iters, reps, bi.core);
    const double causal = (double)B * NH * T * (T + 1) / 2 * (C / NH) * 2; /* FLOPs of one causal product */
    printf("%-26s %7s %10s %10s %10s %8s\n", "kernel", "threads", "min us", "median us", "cpu us", "GFLOP/s");
    double *t = malloc((size_t)reps * sizeof *t), *tc = malloc((size_t)reps * sizeof *tc);
    for (int ti = 0; ti < nthreads; ti++) {
        rs_kctx_init(&s.ctx, &rs_cpu_kernels, threads[ti], NULL);
        rs_cpu_attn_workspace(&s.ctx, B, T, C, NH, &s.wsb);
        s.ws = malloc(s.wsb);
        memset(s.ws, 0, s.wsb);
        for (int k = 0; k < K_COUNT; k++) {
            if (k == K_ATTN_BWD) run_kernel(K_ATTN_FWD, &s); /* a real att for backward */
            for (int i = 0; i < iters / 4 + 1; i++) run_kernel(k, &s);
            double best_cpu = 0, best = 1e300;
            for (int r = 0; r < reps; r++) {
                double t0 = now_s(), c0 = cpu_s();
                for (int i = 0; i < iters; i++) run_kernel(k, &s);
                t[r] = (now_s() - t0) / iters * 1e6;
                tc[r] = (cpu_s() - c0) / iters * 1e6;
                if (t[r] < best) {
                    best = t[r];
                    best_cpu = tc[r];
                }
            }
            qsort(t, (size_t)reps, sizeof *t, cmp_double);
            double flops = k == K_ATTN_FWD ? 2 * causal : k == K_ATTN_BWD ? 4 * causal : 0;
            char gf[16] = "";
            if (flops > 0) snprintf(gf, sizeof gf, "%.1f", flops / (t[0] * 1e-6) * 1e-9);
            printf("%-26s %7d %10.1f %10.1f %10.1f %8s\n", KNAMES[k], threads[ti], t[0], t[reps / 2], best_cpu, gf);
        }
        free(s.ws);
    }
    free(t);
    free(tc);
    float *bufs[] = {s.qkv, s.out,  s.att, s.dout, s.dqkv, s.wte, s.wpe, s.dwte,
                     s.dwpe, s.emb, s.h,   s.hout, s.hd,   s.kc,  s.vc};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(s.tok);
    return 0;
}
