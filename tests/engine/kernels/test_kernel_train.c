/* Training through a kernel table alone: a small MLP and a one-block transformer (embedding, layer
 * norm, causal attention, dropout, a GELU MLP, residual adds, a language-model head), forward,
 * backward and SGD written once against rs_kernels and run a few steps on each table, every buffer
 * in the table's own memory.
 *
 *   test-kernel-train        on the CPU: the chains' gradients against central differences of their
 *                            loss, and the loss going down (engine suite: the chains are right)
 *   test-kernel-train cuda   the same steps on the CPU and on the GPU: per-step losses and the final
 *                            weights equal within the tolerances below (cuda suite; exits 77 with
 *                            the reason where there is no GPU)
 *   test-kernel-train guard  the same on the guard table (engine/guard/guard.h): every buffer faults
 *                            if touched outside a table call, and the results equal the CPU's bit
 *                            for bit (the same kernels)
 *
 * SGD with momentum, not Adam: Adam's first steps move a weight by about lr whatever its gradient's
 * size, so a gradient that is zero up to rounding on one device and not on the other would move the
 * weights apart by lr and say nothing about the kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/kernels.h"
#include "engine/cuda/cuda.h"
#include "rs_test.h"

/* ---- a run: one table, its context and tracker, device buffers freed together ---- */

typedef struct run {
    const rs_kernels *k;
    rs_kctx ctx;
    rs_mem mem;
    void *blk[64];
    size_t sz[64];
    int n;
    int bad; /* entries that failed (their messages were printed) */
} run;

static void ok(run *r, rs_status st, const char *what)
{
    if (st == RS_OK) return;
    rs_err e = {0};
    rs_kctx_check(&r->ctx, &e);
    fprintf(stderr, "FAIL [%s] %s: %s\n", r->k->name, what, e.msg);
    r->bad++;
}

static void *dalloc(run *r, size_t bytes)
{
    void *p = NULL;
    ok(r, r->k->mem_alloc(&r->ctx, &r->mem, RS_POOL_ACTS, bytes, &p), "mem_alloc");
    if (!p || r->n == 64) abort(); /* a test without memory has nothing to report */
    r->blk[r->n] = p;
    r->sz[r->n++] = bytes;
    return p;
}

static float *dfl(run *r, size_t n) { return dalloc(r, n * sizeof(float)); }

static void up(run *r, void *d, const void *h, size_t bytes) { ok(r, r->k->copy_h2d(&r->ctx, d, h, bytes), "copy_h2d"); }

static void down(run *r, void *h, const void *d, size_t bytes)
{
    ok(r, r->k->sync(&r->ctx), "sync");
    ok(r, r->k->copy_d2h(&r->ctx, h, d, bytes), "copy_d2h");
}

static void run_init(run *r, const rs_kernels *k)
{
    memset(r, 0, sizeof *r);
    r->k = k;
    if (rs_kctx_init(&r->ctx, k, 1, NULL)) abort();
}

static void run_free(run *r)
{
    while (r->n) {
        r->n--;
        ok(r, r->k->mem_free(&r->ctx, &r->mem, RS_POOL_ACTS, r->blk[r->n], r->sz[r->n]), "mem_free");
    }
    RS_CHECK(r->mem.live_total == 0, "[%s] %lld bytes still counted after every block was freed", r->k->name,
             (long long)r->mem.live_total);
}

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static float unif(float lo, float hi)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (float)((rng >> 40) * (1.0 / 16777216.0));
}

/* ---- the two chains: parameters are one flat buffer, gradients another of the same layout ---- */

enum { MB = 9, MD = 13, MH = 17, MK = 5 };                        /* MLP: batch, in, hidden, classes */
enum { GB = 3, GT = 7, GC = 12, GNH = 3, GV = 11, GF = 24 };      /* GPT: batch, ctx, width, heads, vocab, fc */
#define GR (GB * GT)

typedef struct chain {
    bool gpt;
    size_t np;
    /* parameter offsets */
    size_t w1, b1, w2, b2;                                       /* MLP */
    size_t wte, wpe, g1, be1, wqkv, bqkv, wo, wfc, wp, g2, be2, wlm; /* GPT */
} chain;

static chain chain_make(bool gpt)
{
    chain c = {.gpt = gpt};
    size_t at = 0;
#define PARAM(f, n) (c.f = at, at += (size_t)(n))
    if (!gpt) {
        PARAM(w1, MH * MD), PARAM(b1, MH), PARAM(w2, MK * MH), PARAM(b2, MK);
    } else {
        PARAM(wte, GV * GC), PARAM(wpe, GT * GC), PARAM(g1, GC), PARAM(be1, GC), PARAM(wqkv, 3 * GC * GC);
        PARAM(bqkv, 3 * GC), PARAM(wo, GC * GC), PARAM(wfc, GF * GC), PARAM(wp, GC * GF), PARAM(g2, GC);
        PARAM(be2, GC), PARAM(wlm, GV * GC);
    }
#undef PARAM
    c.np = at;
    return c;
}

static void chain_init(const chain *c, float *p)
{
    for (size_t i = 0; i < c->np; i++) p[i] = unif(-0.4f, 0.4f);
    if (c->gpt)
        for (int j = 0; j < GC; j++) p[c->g1 + j] = 1.0f + unif(-0.1f, 0.1f), p[c->g2 + j] = 1.0f + unif(-0.1f, 0.1f);
}

/* The data on the device: inputs (MLP floats, GPT tokens) and targets. */
typedef struct batch {
    float *x;
    int32_t *tok, *y;
} batch;

/* Forward (and backward when G): the mean loss. P, G device arrays of c->np floats; G accumulates. */
static double step(run *r, const chain *c, const batch *b, const float *P, float *G)
{
    const rs_kernels *k = r->k;
    rs_kctx *x = &r->ctx;
    int mark = r->n;
    double loss = 0;
    if (!c->gpt) {
        float *h = dfl(r, MB * MH), *a = dfl(r, MB * MH), *z = dfl(r, MB * MK), *p = dfl(r, MB * MK), *l = dfl(r, MB);
        ok(r, k->gemm(x, false, true, MB, MH, MD, 1, b->x, MD, P + c->w1, MD, 0, h, MH), "gemm");
        ok(r, k->bias_rows(x, h, P + c->b1, MB, MH), "bias_rows");
        ok(r, k->relu_fwd(x, h, a, MB * MH), "relu_fwd");
        ok(r, k->gemm(x, false, true, MB, MK, MH, 1, a, MH, P + c->w2, MH, 0, z, MK), "gemm");
        ok(r, k->bias_rows(x, z, P + c->b2, MB, MK), "bias_rows");
        ok(r, k->softmax_xent_fwd(x, z, b->y, p, l, MB, MK), "softmax_xent_fwd");
        float hl[MB];
        down(r, hl, l, sizeof hl);
        for (int i = 0; i < MB; i++) loss += hl[i] / MB;
        if (G) {
            float *dz = dfl(r, MB * MK), *da = dfl(r, MB * MH), *dh = dfl(r, MB * MH);
            ok(r, k->softmax_xent_bwd(x, p, b->y, dz, MB, MK, 1.0f / MB), "softmax_xent_bwd");
            ok(r, k->gemm(x, true, false, MK, MH, MB, 1, dz, MK, a, MH, 1, G + c->w2, MH), "gemm");
            ok(r, k->bias_rows_grad(x, G + c->b2, dz, MB, MK), "bias_rows_grad");
            ok(r, k->gemm(x, false, false, MB, MH, MK, 1, dz, MK, P + c->w2, MH, 0, da, MH), "gemm");
            ok(r, k->relu_bwd(x, a, da, dh, MB * MH), "relu_bwd");
            ok(r, k->gemm(x, true, false, MH, MD, MB, 1, dh, MH, b->x, MD, 1, G + c->w1, MD), "gemm");
            ok(r, k->bias_rows_grad(x, G + c->b1, dh, MB, MH), "bias_rows_grad");
        }
    } else {
        const int C = GC, C3 = 3 * GC, F = GF, V = GV, R = GR;
        float *x0 = dfl(r, R * C), *l1 = dfl(r, R * C), *mu1 = dfl(r, R), *rs1 = dfl(r, R), *qkv = dfl(r, R * C3);
        float *att = dfl(r, GB * GNH * GT * GT), *a = dfl(r, R * C), *o = dfl(r, R * C), *od = dfl(r, R * C);
        uint8_t *mask = dalloc(r, R * C);
        float *x1 = dfl(r, R * C), *u = dfl(r, R * F), *hg = dfl(r, R * F), *m = dfl(r, R * C), *x2 = dfl(r, R * C);
        float *l2 = dfl(r, R * C), *mu2 = dfl(r, R), *rs2 = dfl(r, R), *z = dfl(r, R * V), *p = dfl(r, R * V);
        float *l = dfl(r, R);
        ok(r, k->embed_fwd(x, b->tok, P + c->wte, P + c->wpe, x0, GB, GT, C), "embed_fwd");
        ok(r, k->layernorm_fwd(x, x0, P + c->g1, P + c->be1, l1, mu1, rs1, R, C, 1e-5f), "layernorm_fwd");
        ok(r, k->gemm(x, false, true, R, C3, C, 1, l1, C, P + c->wqkv, C, 0, qkv, C3), "gemm");
        ok(r, k->bias_rows(x, qkv, P + c->bqkv, R, C3), "bias_rows");
        ok(r, k->attn_fwd(x, qkv, a, att, GB, GT, C, GNH), "attn_fwd");
        ok(r, k->gemm(x, false, true, R, C, C, 1, a, C, P + c->wo, C, 0, o, C), "gemm");
        ok(r, k->dropout_fwd(x, o, od, mask, R * C, 0.1f, 42), "dropout_fwd");
        ok(r, k->add(x, x0, od, x1, R * C), "add");
        ok(r, k->gemm(x, false, true, R, F, C, 1, x1, C, P + c->wfc, C, 0, u, F), "gemm");
        ok(r, k->gelu_tanh_fwd(x, u, hg, R * F), "gelu_tanh_fwd");
        ok(r, k->gemm(x, false, true, R, C, F, 1, hg, F, P + c->wp, F, 0, m, C), "gemm");
        ok(r, k->add(x, x1, m, x2, R * C), "add");
        ok(r, k->layernorm_fwd(x, x2, P + c->g2, P + c->be2, l2, mu2, rs2, R, C, 1e-5f), "layernorm_fwd");
        ok(r, k->gemm(x, false, true, R, V, C, 1, l2, C, P + c->wlm, C, 0, z, V), "gemm");
        ok(r, k->softmax_xent_fwd(x, z, b->y, p, l, R, V), "softmax_xent_fwd");
        float hl[GR];
        down(r, hl, l, sizeof hl);
        for (int i = 0; i < R; i++) loss += hl[i] / R;
        if (G) {
            float *dz = dfl(r, R * V), *dl2 = dfl(r, R * C), *dx2 = dfl(r, R * C), *dhg = dfl(r, R * F);
            float *du = dfl(r, R * F), *dx1 = dfl(r, R * C), *dob = dfl(r, R * C), *da = dfl(r, R * C);
            float *dqkv = dfl(r, R * C3), *dl1 = dfl(r, R * C), *dx0 = dfl(r, R * C);
            size_t wsb = 0;
            ok(r, k->attn_workspace(x, GB, GT, C, GNH, &wsb), "attn_workspace");
            float *ws = dalloc(r, wsb);
            ok(r, k->softmax_xent_bwd(x, p, b->y, dz, R, V, 1.0f / R), "softmax_xent_bwd");
            ok(r, k->gemm(x, true, false, V, C, R, 1, dz, V, l2, C, 1, G + c->wlm, C), "gemm");
            ok(r, k->gemm(x, false, false, R, C, V, 1, dz, V, P + c->wlm, C, 0, dl2, C), "gemm");
            ok(r, k->layernorm_bwd(x, x2, P + c->g2, mu2, rs2, dl2, dx2, G + c->g2, G + c->be2, R, C), "layernorm_bwd");
            ok(r, k->gemm(x, true, false, C, F, R, 1, dx2, C, hg, F, 1, G + c->wp, F), "gemm");
            ok(r, k->gemm(x, false, false, R, F, C, 1, dx2, C, P + c->wp, F, 0, dhg, F), "gemm");
            ok(r, k->gelu_tanh_bwd(x, u, dhg, du, R * F), "gelu_tanh_bwd");
            ok(r, k->gemm(x, true, false, F, C, R, 1, du, F, x1, C, 1, G + c->wfc, C), "gemm");
            ok(r, k->copy_d2d(x, dx1, dx2, R * C * sizeof(float)), "copy_d2d");
            ok(r, k->gemm(x, false, false, R, C, F, 1, du, F, P + c->wfc, C, 1, dx1, C), "gemm");
            ok(r, k->dropout_bwd(x, dx1, mask, dob, R * C, 0.1f), "dropout_bwd");
            ok(r, k->gemm(x, true, false, C, C, R, 1, dob, C, a, C, 1, G + c->wo, C), "gemm");
            ok(r, k->gemm(x, false, false, R, C, C, 1, dob, C, P + c->wo, C, 0, da, C), "gemm");
            ok(r, k->attn_bwd(x, qkv, att, da, dqkv, ws, wsb, GB, GT, C, GNH), "attn_bwd");
            ok(r, k->bias_rows_grad(x, G + c->bqkv, dqkv, R, C3), "bias_rows_grad");
            ok(r, k->gemm(x, true, false, C3, C, R, 1, dqkv, C3, l1, C, 1, G + c->wqkv, C), "gemm");
            ok(r, k->gemm(x, false, false, R, C, C3, 1, dqkv, C3, P + c->wqkv, C, 0, dl1, C), "gemm");
            ok(r, k->layernorm_bwd(x, x0, P + c->g1, mu1, rs1, dl1, dx0, G + c->g1, G + c->be1, R, C), "layernorm_bwd");
            ok(r, k->add(x, dx0, dx1, dx0, R * C), "add");
            ok(r, k->embed_bwd(x, b->tok, dx0, G + c->wte, G + c->wpe, GB, GT, C), "embed_bwd");
        }
    }
    ok(r, k->sync(x), "sync");
    while (r->n > mark) {
        r->n--;
        ok(r, k->mem_free(x, &r->mem, RS_POOL_ACTS, r->blk[r->n], r->sz[r->n]), "mem_free");
    }
    return loss;
}

/* Host data for a chain, the same on every table. */
typedef struct hdata {
    float x[MB * MD];
    int32_t tok[GR], y[GR];
} hdata;

static void hdata_make(const chain *c, hdata *h)
{
    for (int i = 0; i < MB * MD; i++) h->x[i] = unif(-1, 1);
    /* targets the model can learn: MLP the sign pattern of two inputs, GPT the next token (t+1) mod V */
    for (int i = 0; i < MB; i++) h->y[i] = (h->x[i * MD] > 0) * 2 + (h->x[i * MD + 1] > 0);
    for (int i = 0; i < GR; i++) h->tok[i] = (int32_t)(unif(0, GV - 0.01f));
    if (c->gpt)
        for (int i = 0; i < GR; i++) h->y[i] = (h->tok[i] + 1) % GV;
}

static batch batch_up(run *r, const hdata *h)
{
    batch b = {dfl(r, MB * MD), dalloc(r, sizeof h->tok), dalloc(r, sizeof h->y)};
    up(r, b.x, h->x, sizeof h->x);
    up(r, b.tok, h->tok, sizeof h->tok);
    up(r, b.y, h->y, sizeof h->y);
    return b;
}

enum { STEPS = 12 };

/* STEPS steps of SGD (momentum 0.9, lr 0.1) from p0; losses[] and the final weights out. */
static void train(const rs_kernels *k, const chain *c, const hdata *h, const float *p0, double *losses, float *pout)
{
    run r;
    run_init(&r, k);
    batch b = batch_up(&r, h);
    float *P = dfl(&r, c->np), *G = dfl(&r, c->np), *Mo = dfl(&r, c->np);
    up(&r, P, p0, c->np * sizeof(float));
    for (int s = 0; s < STEPS; s++) {
        ok(&r, k->fill(&r.ctx, G, c->np, 0.0f), "fill");
        losses[s] = step(&r, c, &b, P, G);
        ok(&r, k->sgd_update(&r.ctx, P, G, Mo, c->np, 0.1f, 0.9f, 0.0f, 0.0f, false, s == 0), "sgd_update");
    }
    down(&r, pout, P, c->np * sizeof(float));
    RS_CHECK(r.bad == 0, "[%s] %d kernel calls failed", k->name, r.bad);
    run_free(&r);
}

/* The loss at host weights p (the central differences' function). */
typedef struct fdctx {
    run *r;
    const chain *c;
    const batch *b;
    float *P;
} fdctx;

static double loss_at(fdctx *f, const float *p)
{
    up(f->r, f->P, p, f->c->np * sizeof(float));
    return step(f->r, f->c, f->b, f->P, NULL);
}

/* On the CPU: the chain's gradient against central differences, then the loss going down. */
static void check_cpu(const chain *c, const char *name)
{
    hdata h;
    hdata_make(c, &h);
    float *p = malloc(c->np * sizeof *p), *g = malloc(c->np * sizeof *g), *pout = malloc(c->np * sizeof *p);
    chain_init(c, p);
    run r;
    run_init(&r, &rs_cpu_kernels);
    batch b = batch_up(&r, &h);
    float *P = dfl(&r, c->np), *G = dfl(&r, c->np);
    up(&r, P, p, c->np * sizeof(float));
    ok(&r, r.k->fill(&r.ctx, G, c->np, 0.0f), "fill");
    step(&r, c, &b, P, G);
    down(&r, g, G, c->np * sizeof(float));
    fdctx f = {&r, c, &b, P};
    int bad = 0, tried = 0;
    double worst = 0;
    const double eps = 1e-3; /* small enough that the MLP's relu kinks stay out of most windows */
    for (size_t i = 0; i < c->np; i += c->np / 60 + 1, tried++) {
        float keep = p[i];
        p[i] = keep + (float)eps;
        double lp = loss_at(&f, p);
        p[i] = keep - (float)eps;
        double lm = loss_at(&f, p);
        p[i] = keep;
        double fd = (lp - lm) / ((double)(keep + (float)eps) - (double)(keep - (float)eps));
        double d = fabs(fd - g[i]);
        if (!(d <= 5e-4 + 1e-2 * fabs(fd))) {
            if (!bad++) fprintf(stderr, "%s: weight %zu: gradient %.6g, central difference %.6g\n", name, i, g[i], fd);
        }
        worst = d > worst ? d : worst;
    }
    RS_CHECK(bad == 0, "%s: %d of %d gradients differ from central differences", name, bad, tried);
    RS_CHECK(r.bad == 0, "%s: %d kernel calls failed", name, r.bad);
    run_free(&r);
    double losses[STEPS];
    train(&rs_cpu_kernels, c, &h, p, losses, pout);
    RS_CHECK(losses[STEPS - 1] < 0.8 * losses[0], "%s: the loss went from %.4f to %.4f in %d steps", name, losses[0],
             losses[STEPS - 1], STEPS);
    printf("%s on cpu: %d gradients within 5e-4 + 1e-2|fd| of central differences (worst %.2g); loss %.4f -> %.4f "
           "in %d steps\n", name, tried, worst, losses[0], losses[STEPS - 1], STEPS);
    free(p), free(g), free(pout);
}

/* The CPU and another table from the same weights and data: the losses and the weights after STEPS steps. */
static void check_device(const rs_kernels *k, const chain *c, const char *name)
{
    hdata h;
    hdata_make(c, &h);
    float *p = malloc(c->np * sizeof *p), *pc = malloc(c->np * sizeof *p), *pd = malloc(c->np * sizeof *p);
    chain_init(c, p);
    double lc[STEPS], ld[STEPS];
    train(&rs_cpu_kernels, c, &h, p, lc, pc);
    train(k, c, &h, p, ld, pd);
    double worst_l = 0, worst_p = 0;
    int bad_l = 0, bad_p = 0;
    for (int s = 0; s < STEPS; s++) {
        double d = fabs(lc[s] - ld[s]);
        worst_l = d > worst_l ? d : worst_l;
        bad_l += !(d <= 1e-5 + 1e-4 * fabs(lc[s]));
    }
    for (size_t i = 0; i < c->np; i++) {
        double d = fabs((double)pc[i] - pd[i]);
        worst_p = d > worst_p ? d : worst_p;
        bad_p += !(d <= 1e-4 + 1e-3 * fabs(pc[i]));
    }
    RS_CHECK(bad_l == 0, "%s: %d of %d step losses differ between cpu and %s by more than 1e-5 + 1e-4|loss| (worst "
             "%.3g)", name, bad_l, STEPS, k->name, worst_l);
    RS_CHECK(bad_p == 0, "%s: %d of %zu weights differ between cpu and %s after %d steps by more than 1e-4 + "
             "1e-3|w| (worst %.3g)", name, bad_p, c->np, k->name, STEPS, worst_p);
    /* the guard table runs the CPU's own code with the same thread count: nothing may differ */
    if (k->kind == RS_DEV_GUARD)
        RS_CHECK(worst_l == 0 && worst_p == 0, "%s: cpu and guard differ (loss by %.3g, weights by %.3g); they run the "
                 "same kernels", name, worst_l, worst_p);
    printf("%s, %d steps: loss %.5f -> %.5f on cpu, %.5f -> %.5f on %s; worst loss diff %.2g, weight diff %.2g\n",
           name, STEPS, lc[0], lc[STEPS - 1], ld[0], ld[STEPS - 1], k->name, worst_l, worst_p);
    free(p), free(pc), free(pd);
}

int main(int argc, char **argv)
{
    chain mlp = chain_make(false), gpt = chain_make(true);
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        const rs_kernels *k = rs_kernels_for((rs_device){RS_DEV_CUDA, 0});
        rs_cuda_info ci;
        rs_cuda_query(&ci);
        if (!k) RS_SKIP("no CUDA device: this build has no CUDA table (configured without nvcc or with -Dcuda=disabled)");
        if (ci.count < 1) RS_SKIP("%s", ci.why);
        check_device(k, &mlp, "mlp 13-17-5");
        check_device(k, &gpt, "gpt block");
        return rs_test_finish("kernel-train cuda");
    }
    if (argc > 1 && !strcmp(argv[1], "guard")) {
        const rs_kernels *k = rs_kernels_for((rs_device){RS_DEV_GUARD, 0});
        RS_CHECK(k && k->kind == RS_DEV_GUARD, "no guard table");
        if (!k) return rs_test_finish("kernel-train guard");
        check_device(k, &mlp, "mlp 13-17-5");
        check_device(k, &gpt, "gpt block");
        return rs_test_finish("kernel-train guard");
    }
    if (argc > 1) {
        fprintf(stderr, "usage: %s [cuda|guard]\n", argv[0]);
        return 2;
    }
    check_cpu(&mlp, "mlp 13-17-5");
    check_cpu(&gpt, "gpt block");
    return rs_test_finish("kernel-train");
}
