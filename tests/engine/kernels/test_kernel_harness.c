/* The kernel-table harness: every entry of every device table this build has, against the CPU table
 * and against independent references (harness_mem.c, harness_dense.c, harness_nn.c; harness.h says
 * how), with contexts of 1 and 2 threads, inputs and outputs through the table's own memory entries.
 * A table is found with rs_kernels_for, so a new device's table is checked here as soon as it is
 * registered in engine/core/device.c; a new entry of kernels.def does not link until it has a case.
 * Then what contexts promise: the first failure is kept until taken, a call leaves the caller's
 * OpenMP setting alone, and two threads with contexts of 1 and 2 threads run side by side and both
 * get right answers.
 *
 * `test-kernel-harness` checks the CPU table and the contexts; `test-kernel-harness cuda` (meson test
 * --suite cuda) checks the CUDA table on the current GPU instead, and exits 77 ("skipped") with the
 * reason where this build has no CUDA or the machine no GPU; `test-kernel-harness guard` checks the
 * guard table (engine/guard/guard.h), whose memory faults when a case touches it outside the table. */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cuda/cuda.h"
#include "engine/nn/spec.h"
#include "engine/optim/optim.h"
#include "harness.h"
#include "rs_test.h"

typedef void (*any_fn)(void);

/* Entries are the function pointers from default_threads to the end of the struct. */
#define FIRST_ENTRY offsetof(rs_kernels, default_threads)
#define NENTRIES ((sizeof(rs_kernels) - FIRST_ENTRY) / sizeof(any_fn))

/* The cases in kernels.def's order: the list, not a count, decides what the harness must cover. */
static const hz_case *const cases[] = {
#define RS_KERNEL(name, params, args) &hz_case_##name,
#include "engine/core/kernels.def"
};
static const int ncases = (int)(sizeof cases / sizeof *cases);

/* Every entry has exactly one case, and every case names an entry. */
static void check_coverage(void)
{
    RS_CHECK((sizeof(rs_kernels) - FIRST_ENTRY) % sizeof(any_fn) == 0,
             "rs_kernels has something other than function pointers after default_threads");
    RS_CHECK(NENTRIES == RS_KERNEL_COUNT, "rs_kernels has %zu entries, kernels.def %d", NENTRIES, RS_KERNEL_COUNT);
    for (size_t e = 0; e < NENTRIES; e++) {
        size_t off = FIRST_ENTRY + e * sizeof(any_fn);
        int n = 0;
        for (int c = 0; c < ncases; c++) n += cases[c]->offset == off;
        RS_CHECK(n == 1, "entry %zu of rs_kernels (byte offset %zu) has %d harness cases; add one to "
                 "tests/engine/kernels/harness_*.c", e, off, n);
    }
    /* a case's HZ_CASE names the entry it is filed under (hz_case_<entry>) */
    for (int c = 0; c < ncases; c++)
        RS_CHECK(cases[c]->offset == FIRST_ENTRY + (size_t)c * sizeof(any_fn),
                 "case %s is not at the place of kernels.def's entry %d", cases[c]->entry, c);
    RS_CHECK((size_t)ncases == NENTRIES, "%d cases for %zu entries", ncases, NENTRIES);
    printf("coverage: %zu entries in rs_kernels, %d harness cases\n", NENTRIES, ncases);
}

static void run_table(const rs_kernels *k)
{
    for (size_t e = 0; e < NENTRIES; e++) {
        any_fn f;
        memcpy(&f, (const char *)k + FIRST_ENTRY + e * sizeof f, sizeof f);
        const char *name = "?";
        for (int c = 0; c < ncases; c++)
            if (cases[c]->offset == FIRST_ENTRY + e * sizeof f) name = cases[c]->entry;
        RS_CHECK(f != NULL, "table %s: entry %s is NULL (every entry is required)", k->name, name);
        if (!f) return;
    }
    for (int threads = 1; threads <= 2; threads++) {
        rs_kctx ctx;
        RS_CHECK(rs_kctx_init(&ctx, k, threads, NULL) == RS_OK, "table %s: context", k->name);
        hz h = {.k = k, .ctx = &ctx, .rng = 0x9e3779b97f4a7c15ULL};
        RS_CHECK(rs_kctx_init(&h.ref, &rs_cpu_kernels, 1, NULL) == RS_OK, "reference context");
        for (int c = 0; c < ncases; c++) {
            int before = h.failures, checks = h.checks;
            h.entry = cases[c]->entry;
            cases[c]->run(&h);
            hz_release(&h, 0);
            rs_err e = {0};
            hz_check(&h, rs_kctx_check(&ctx, &e) == RS_OK, "a failure was left in the context: %s", e.msg);
            printf("  %-5s %d thread%s  %-18s %4d checks  %s\n", k->name, threads, threads == 1 ? " " : "s",
                   cases[c]->entry, h.checks - checks, h.failures == before ? "ok" : "FAILED");
        }
        free(h.blocks);
        free(h.sizes);
        rs_test_checks += h.checks;
        rs_test_failures += h.failures;
    }
}

/* The first failure wins and stays until taken; taking clears it. */
static void test_status(void)
{
    rs_kctx c;
    rs_kctx_init(&c, &rs_cpu_kernels, 1, NULL);
    RS_CHECK(rs_kctx_status(&c) == RS_OK, "a fresh context has a failure");
    RS_CHECK(rs_cpu_fill(&c, NULL, 4, 1.0f) == RS_ERR_ARG, "fill(NULL) accepted");
    RS_CHECK(rs_cpu_gemm(&c, false, false, -1, 1, 1, 1, NULL, 1, NULL, 1, 0, NULL, 1) == RS_ERR_ARG, "gemm M=-1");
    rs_err e = {0};
    RS_CHECK(rs_kctx_check(&c, &e) == RS_ERR_ARG && strstr(e.msg, "fill") && strstr(e.msg, "NULL"),
             "the first failure (fill) should be kept: '%s'", e.msg);
    RS_CHECK(rs_kctx_check(&c, &e) == RS_OK && rs_kctx_status(&c) == RS_OK, "taking the failure did not clear it");
    RS_CHECK(rs_kctx_init(&c, NULL, 1, &e) == RS_ERR_ARG, "a context without a table");
    printf("status: first failure kept, taken once\n");
}

/* A call runs with its context's count and puts the caller's OpenMP setting back. */
static void test_icv(void)
{
    rs_kctx one;
    rs_kctx_init(&one, &rs_cpu_kernels, 1, NULL);
    omp_set_num_threads(3);
    float *x = calloc(40000, sizeof *x);
    rs_cpu_fill(&one, x, 40000, 2.0f);
    RS_CHECK(omp_get_max_threads() == 3, "a 1-thread call left this thread's OpenMP count at %d, not 3",
             omp_get_max_threads());
    int team = 0;
    rs_kctx two;
    rs_kctx_init(&two, &rs_cpu_kernels, 2, NULL);
    /* the team a 2-thread context's region gets, seen from a kernel-sized loop */
    rs_cpu_scale(&two, x, 40000, 1.0f);
    #pragma omp parallel
    {
        #pragma omp single
        team = omp_get_num_threads();
    }
    RS_CHECK(team == 3, "this thread's own regions run %d threads after kernel calls, not its 3", team);
    omp_set_num_threads(2);
    free(x);
    printf("icv: kernel calls leave the caller's OpenMP setting alone\n");
}

/* How callers pass a kernel's failure on: forward returns it; backward (void) leaves it in the
 * model's context for the next forward, and the optimizer will not apply that gradient. A context
 * nobody initialised (threads 0) is the failure every CPU entry reports. */
static void test_model_status(void)
{
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse("mlp 6-5-3", "m", rs_device_cpu(), NULL, 1, &m, NULL, &e) == RS_OK, "%s", e.msg);
    if (!m) return;
    float x[2 * 6] = {0.1f, -0.2f, 0.3f, 0.5f, -0.1f, 0.2f, 1, 2, 3, 4, 5, 6};
    int32_t y[2] = {0, 2};
    const float *z;
    float loss;
    rs_kctx *c = rs_model_ctx(m);
    c->threads = 0; /* every kernel now refuses */
    RS_CHECK(rs_model_forward(m, x, 2, &z, &e) == RS_ERR_ARG && strstr(e.msg, "not initialised"),
             "forward did not report the kernel's failure: '%s'", e.msg);
    rs_model_set_threads(m, 1);
    RS_CHECK(rs_model_forward(m, x, 2, &z, &e) == RS_OK && rs_model_loss(m, y, 2, &loss, &e) == RS_OK,
             "a working context failed: %s", e.msg);
    rs_opt_cfg oc = rs_opt_defaults(RS_OPT_SGD);
    rs_optim *o = rs_optim_new(&oc, rs_device_cpu(), rs_model_numel(m), NULL, &e);
    RS_CHECK(o && rs_optim_set_ctx(o, c) == RS_OK, "optimizer: %s", e.msg);
    c->threads = 0;
    rs_model_zero_grad(m);
    rs_model_backward(m, x, y, 2, 1.0f);
    c->threads = 1;
    float p0 = rs_model_params(m)[0];
    RS_CHECK(o && rs_optim_step(o, rs_model_params(m), rs_model_grads(m), 0.1f) == RS_ERR_ARG &&
                 rs_model_params(m)[0] == p0, "the optimizer stepped with a failure pending");
    RS_CHECK(rs_model_forward(m, x, 2, &z, &e) == RS_ERR_ARG && strstr(e.msg, "fill"),
             "the next forward did not report zero_grad's failure: '%s'", e.msg);
    RS_CHECK(rs_model_forward(m, x, 2, &z, &e) == RS_OK, "reported once, then clean: %s", e.msg);
    rs_optim_free(o);
    rs_model_free(m);
    printf("model: forward reports a kernel failure, backward's waits for the next forward\n");
}

/* ---- two threads, contexts of 1 and 2 threads, at the same time ---- */

enum { GM = 192, GN = 160, GK = 144, CB = 6, AB = 4, AT_T = 48, AT_C = 64, AT_NH = 4, ROUNDS = 6 };

typedef struct work {
    const float *A, *B, *x, *w, *dy, *qkv;
    const float *wantC, *wantY, *wantDW, *wantO; /* computed once with 1 thread */
    rs_conv_geom g;
    int threads, bad;
    double worst;
} work;

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        if (!(d <= m)) m = d; /* NaN sticks */
    }
    return m;
}

static size_t conv_in(const work *w) { return (size_t)CB * w->g.c * w->g.h * w->g.w; }
static size_t conv_out(const work *w) { return (size_t)CB * w->g.oc * w->g.oh * w->g.ow; }
static size_t conv_w(const work *w) { return (size_t)w->g.oc * w->g.c * w->g.kh * w->g.kw; }

/* gemm, conv forward and backward, attention forward; into C, Y, DW, O. */
static int compute(rs_kctx *c, const work *w, float *C, float *Y, float *DW, float *O, float *att)
{
    size_t ws1 = 0, ws2 = 0;
    rs_status st = rs_cpu_gemm(c, false, true, GM, GN, GK, 1.0f, w->A, GK, w->B, GK, 0.0f, C, GN);
    st = st ? st : rs_cpu_conv2d_workspace(c, &w->g, CB, &ws1);
    float *ws = malloc(ws1);
    st = st ? st : rs_cpu_conv2d_fwd(c, &w->g, CB, w->x, w->w, NULL, Y, ws, ws1);
    memset(DW, 0, conv_w(w) * sizeof *DW);
    st = st ? st : rs_cpu_conv2d_bwd(c, &w->g, CB, w->x, w->w, w->dy, NULL, DW, NULL, ws, ws1);
    st = st ? st : rs_cpu_attn_workspace(c, AB, AT_T, AT_C, AT_NH, &ws2);
    st = st ? st : rs_cpu_attn_fwd(c, w->qkv, O, att, AB, AT_T, AT_C, AT_NH);
    free(ws);
    return st;
}

static void *worker(void *arg)
{
    work *w = arg;
    rs_kctx c;
    rs_kctx_init(&c, &rs_cpu_kernels, w->threads, NULL);
    float *C = malloc(GM * GN * 4), *Y = malloc(conv_out(w) * 4), *DW = malloc(conv_w(w) * 4);
    float *O = malloc((size_t)AB * AT_T * AT_C * 4), *att = malloc((size_t)AB * AT_NH * AT_T * AT_T * 4);
    for (int r = 0; r < ROUNDS; r++) {
        if (compute(&c, w, C, Y, DW, O, att)) w->bad++;
        double d[4] = {max_diff(C, w->wantC, GM * GN), max_diff(Y, w->wantY, conv_out(w)),
                       max_diff(DW, w->wantDW, conv_w(w)), max_diff(O, w->wantO, (size_t)AB * AT_T * AT_C)};
        for (int i = 0; i < 4; i++) {
            /* products reassociate with the team size (gemm, conv's per-thread sums): within float rounding */
            if (!(d[i] <= 1e-3)) w->bad++;
            w->worst = d[i] > w->worst || d[i] != d[i] ? d[i] : w->worst;
        }
    }
    free(C), free(Y), free(DW), free(O), free(att);
    return NULL;
}

static float *rnd(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return x;
}

static void test_two_threads(void)
{
    work w = {.g = {8, 20, 20, 16, 3, 3, 1, 1, 1, 1, 20, 20}};
    float *A = rnd(GM * GK, 1), *B = rnd(GN * GK, 2), *x = rnd(conv_in(&w), 3), *wt = rnd(conv_w(&w), 4);
    float *dy = rnd(conv_out(&w), 5), *qkv = rnd((size_t)AB * AT_T * 3 * AT_C, 6);
    w.A = A, w.B = B, w.x = x, w.w = wt, w.dy = dy, w.qkv = qkv;
    float *C = malloc(GM * GN * 4), *Y = malloc(conv_out(&w) * 4), *DW = malloc(conv_w(&w) * 4);
    float *O = malloc((size_t)AB * AT_T * AT_C * 4), *att = malloc((size_t)AB * AT_NH * AT_T * AT_T * 4);
    rs_kctx one;
    rs_kctx_init(&one, &rs_cpu_kernels, 1, NULL);
    RS_CHECK(compute(&one, &w, C, Y, DW, O, att) == RS_OK, "one thread alone: %s", one.err.msg);
    w.wantC = C, w.wantY = Y, w.wantDW = DW, w.wantO = O;
    work a = w, b = w;
    a.threads = 1;
    b.threads = 2;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, worker, &a);
    pthread_create(&tb, NULL, worker, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    RS_CHECK(a.bad == 0 && b.bad == 0, "side by side: %d wrong results on the 1-thread context (max diff %.3g), %d "
             "on the 2-thread one (max diff %.3g)", a.bad, a.worst, b.bad, b.worst);
    printf("two threads, contexts of 1 and 2 threads, %d rounds each of gemm %dx%dx%d, conv fwd+bwd, attention: "
           "max diff from one thread alone %.2g and %.2g\n", ROUNDS, GM, GN, GK, a.worst, b.worst);
    free(A), free(B), free(x), free(wt), free(dy), free(qkv), free(C), free(Y), free(DW), free(O), free(att);
}

/* Whether device d's table can run here; why not in *why. */
static bool usable(rs_device d, char *why, size_t n)
{
    if (d.kind != RS_DEV_CUDA) return true;
    rs_cuda_info ci;
    rs_cuda_query(&ci);
    snprintf(why, n, "%s", ci.why);
    if (ci.count > 0) snprintf(why, n, "%d GPU%s", ci.count, ci.count == 1 ? "" : "s");
    return ci.count > 0;
}

int main(int argc, char **argv)
{
    /* which tables: the CPU's (default) or one device's, named on the command line */
    int only = RS_DEV_CPU;
    if (argc > 1) {
        only = !strcmp(argv[1], "cuda") ? RS_DEV_CUDA : !strcmp(argv[1], "guard") ? RS_DEV_GUARD : -1;
        if (only < 0) {
            fprintf(stderr, "usage: %s [cuda|guard]\n", argv[0]);
            return 2;
        }
    }
    check_coverage();
    int tables = 0;
    for (int kind = 0; kind < RS_DEV_KIND_COUNT; kind++) {
        rs_device d = {(rs_device_kind)kind, 0};
        const rs_kernels *k = rs_kernels_for(d);
        char why[300] = "";
        if (!k) {
            printf("device %s: no kernel table in this build\n", rs_device_name(d));
            if (kind == only) RS_SKIP("no CUDA device: this build has no CUDA table (configured without nvcc or with -Dcuda=disabled)");
            continue;
        }
        RS_CHECK(k->kind == d.kind, "rs_kernels_for(%s) gave table %s", rs_device_name(d), k->name);
        if (kind != only) {
            if (kind == RS_DEV_CPU) printf("device cpu: the reference; its own table is checked by the default run\n");
            else
                printf("device %s: table %s, checked by `test-kernel-harness %s` (meson test %s-kernel-harness)\n",
                       rs_device_name(d), k->name, rs_device_name(d), rs_device_name(d));
            continue;
        }
        if (!usable(d, why, sizeof why)) RS_SKIP("table %s not run: %s", k->name, why);
        printf("table %s (%s):\n", k->name, why[0] ? why : "host");
        run_table(k);
        tables++;
    }
    RS_CHECK(tables >= 1, "no kernel table at all");
    if (only == RS_DEV_CPU) {
        test_status();
        test_icv();
        test_model_status();
        test_two_threads();
    }
    return rs_test_finish(only == RS_DEV_CPU ? "kernel-harness" : only == RS_DEV_CUDA ? "kernel-harness cuda"
                                                                                       : "kernel-harness guard");
}
