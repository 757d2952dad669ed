/* Training throughput of ringside: samples/s and ms per step for the reference MLP and CNN on
 * Fashion-MNIST and a GPT (nanoGPT's CPU recipe: 4 layers, 4 heads, dim 128, ctx 64) on the built-in
 * text, the time inside BLAS products against everything else, and the phase split of a step.
 * A benchmark, not a test: it prints figures and fails only when it cannot run.
 *
 *   bench_train [--model mlp|cnn|gpt|both|all] [--threads 1,2] [--steps N] [--warmup N] [--batch N] [--blocks N]
 *               [--kv] [--info]
 *
 * Each configuration runs rs_train (Adam lr 1e-3, no evaluation) for warmup + steps steps; the clock
 * and the BLAS counters start after the warm-up steps. --kv adds one `kv key=value ...` line per
 * configuration for bench/run.sh. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engine/cpu/blas.h"
#include "engine/cpu/prof.h"
#include "engine/data/data.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"

static const char *const SPEC_MLP = "mlp 784-256-256-10";
static const char *const SPEC_CNN =
    "seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)";

/* Steps measured per model by default: about 5 s each on one core of a recent x86. */
#define STEPS_MLP 2000
#define STEPS_CNN 500
#define STEPS_GPT 100
#define GPT_CTX 64
#define GPT_BATCH 12 /* nanoGPT's CPU recipe */
#define WARMUP 30

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU seconds all CPUs spent busy (user, nice, system, irq, softirq, steal) since boot, from the first
 * line of /proc/stat; -1 when it cannot be read. */
static double cpu_busy_s(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                   &v[6], &v[7]);
    fclose(f);
    if (n < 8) return -1;
    long hz = sysconf(_SC_CLK_TCK);
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)(hz > 0 ? hz : 100);
}

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* What the step observer records: the clock, phase totals and CPU counters when the warm-up ends, and
 * the clock and CPU counters at the last measured step. */
typedef struct probe {
    int64_t warmup, last;
    double t0, t1;
    double data0, fwd0, bwd0, opt0;
    double busy0, busy1, self0, self1;
    double loss_sum; /* over the measured steps */
} probe;

static void on_event(void *ud, const rs_train_event *ev)
{
    probe *p = ud;
    if (ev->kind != RS_TRAIN_EV_STEP) return;
    if (ev->step > p->warmup) p->loss_sum += ev->loss;
    if (ev->step == p->warmup) {
        /* The warm-up stays inside epoch 0, so the epoch's phase sums are the run's so far. */
        p->data0 = ev->t_data;
        p->fwd0 = ev->t_fwd;
        p->bwd0 = ev->t_bwd;
        p->opt0 = ev->t_opt;
        p->busy0 = cpu_busy_s();
        p->self0 = self_cpu_s();
        rs_cpu_prof_reset();
        p->t0 = now_s();
    } else if (ev->step == p->last) {
        p->t1 = now_s();
        p->busy1 = cpu_busy_s();
        p->self1 = self_cpu_s();
    }
}

typedef struct result {
    const char *model;
    int threads, batch;
    int64_t steps;
    double seconds, loss; /* loss: mean training loss over the measured steps */
    double others;  /* CPUs kept busy by other processes during the measured steps (-1: unknown) */
    double cpu_s;   /* CPU seconds of this process over the measured steps */
    int blocks;
    rs_cpu_prof prof;
    double data, fwd, bwd, opt; /* seconds over the measured steps */
} result;

static int run_one(const char *model, const rs_data_pair *data, int threads, int blocks, int batch, int64_t steps,
                   int64_t warmup, result *out)
{
    char gpt[128];
    snprintf(gpt, sizeof gpt, "gpt layers=4 heads=4 dim=128 ctx=%d vocab=%d", GPT_CTX, data->train->n_classes);
    const char *spec = !strcmp(model, "mlp") ? SPEC_MLP : !strcmp(model, "gpt") ? gpt : SPEC_CNN;
    rs_err err = {0};
    rs_model *m = NULL;
    size_t pos = 0;
    if (rs_model_parse(spec, model, rs_device_cpu(), NULL, 1, &m, &pos, &err)) {
        fprintf(stderr, "bench_train: model '%s' at byte %zu: %s\n", spec, pos, err.msg);
        return 1;
    }
    /* as the thread tuner cuts products for `blocks` threads while it runs at fewer (docs/engine.md,
     * "Reproducibility"); with --threads 1 this is what a tuned run costs while it sits at one thread */
    rs_model_ctx(m)->blocks = blocks;
    rs_train_cfg cfg = rs_train_defaults(); /* Adam, lr 1e-3 */
    cfg.batch = batch;
    cfg.threads = threads;
    cfg.eval = false;
    cfg.epochs = 1000;
    cfg.max_steps = warmup + steps;
    probe p = {.warmup = warmup, .last = warmup + steps};
    rs_train_hooks hooks = {.on_event = on_event, .ud = &p};
    rs_train_result r;
    rs_cpu_prof_enable(true);
    rs_status st = rs_train(m, data, &cfg, &hooks, &r, &err);
    rs_cpu_prof_enable(false);
    rs_cpu_prof prof;
    rs_cpu_prof_read(&prof);
    rs_model_free(m);
    if (st) {
        fprintf(stderr, "bench_train: training %s: %s\n", model, err.msg);
        return 1;
    }
    *out = (result){.model = model, .threads = threads, .batch = batch, .steps = steps,
                    .seconds = p.t1 - p.t0, .loss = p.loss_sum / (double)steps, .prof = prof,
                    .data = r.t_data - p.data0, .fwd = r.t_fwd - p.fwd0, .bwd = r.t_bwd - p.bwd0,
                    .opt = r.t_opt - p.opt0};
    out->others = -1;
    out->cpu_s = p.self1 - p.self0;
    out->blocks = blocks;
    if (p.busy0 >= 0 && p.busy1 >= 0 && out->seconds > 0) {
        out->others = ((p.busy1 - p.busy0) - (p.self1 - p.self0)) / out->seconds;
        if (out->others < 0) out->others = 0; /* /proc/stat counts in ticks: clamp the rounding */
    }
    return 0;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_train [--model mlp|cnn|gpt|both|all] [--threads LIST] [--steps N] [--warmup N] [--batch N] "
            "[--kv] [--info]\n"
            "  --model    which network; both = mlp and cnn (default both)\n"
            "  --threads  comma-separated thread counts, each a configuration (default 1,2)\n"
            "  --steps    measured steps per configuration (default %d for mlp, %d for cnn, %d for gpt)\n"
            "  --warmup   steps run before the clock starts (default %d)\n"
            "  --batch    batch size (default 64; gpt %d sequences of %d tokens)\n"
            "  --blocks   cut each product into N fixed blocks, as the thread tuner does for N threads\n"
            "             (default 0: as many as the threads)\n"
            "  --kv       also print one machine-readable `kv ...` line per configuration\n"
            "  --info     print the BLAS kernel in use and exit\n"
            "Environment: RINGSIDE_BLAS=native keeps OpenBLAS's own kernel choice; OMP_NUM_THREADS is\n"
            "overridden by --threads.\n",
            STEPS_MLP, STEPS_CNN, STEPS_GPT, WARMUP, GPT_BATCH, GPT_CTX);
}

static bool parse_int(const char *s, long lo, long hi, long *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) return false;
    *v = x;
    return true;
}

int main(int argc, char **argv)
{
    rs_blas_prefer_fast_kernel(argv);
    const char *model = "both", *threads_arg = "1,2";
    long steps = 0, warmup = WARMUP, batch = 0, blocks = 0;
    bool kv = false, info = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--kv")) kv = true;
        else if (!strcmp(a, "--info")) info = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!v) ok = false;
        else if (!strcmp(a, "--model")) model = argv[++i];
        else if (!strcmp(a, "--threads")) threads_arg = argv[++i];
        else if (!strcmp(a, "--steps")) ok = parse_int(argv[++i], 1, 100000000, &steps);
        else if (!strcmp(a, "--warmup")) ok = parse_int(argv[++i], 1, 1000000, &warmup);
        else if (!strcmp(a, "--batch")) ok = parse_int(argv[++i], 1, 65536, &batch);
        else if (!strcmp(a, "--blocks")) ok = parse_int(argv[++i], 0, 1024, &blocks);
        else ok = false;
        if (!ok) {
            fprintf(stderr, "bench_train: bad argument '%s'%s%s\n", a, v ? " " : "", v ? v : "");
            usage(stderr);
            return 2;
        }
    }
    if (strcmp(model, "mlp") && strcmp(model, "cnn") && strcmp(model, "gpt") && strcmp(model, "both") &&
        strcmp(model, "all")) {
        fprintf(stderr, "bench_train: unknown model '%s' (mlp, cnn, gpt, both or all)\n", model);
        return 2;
    }
    int tlist[16], nt = 0;
    for (const char *s = threads_arg; *s && nt < 16;) {
        char *end;
        long t = strtol(s, &end, 10);
        if (end == s || t < 1 || t > 1024 || (*end && *end != ',')) {
            fprintf(stderr, "bench_train: bad thread list '%s' (e.g. 1,2)\n", threads_arg);
            return 2;
        }
        tlist[nt++] = (int)t;
        s = *end ? end + 1 : end;
    }

    rs_blas_info bi;
    rs_blas_get_info(&bi);
    const char *blas_env = getenv("RINGSIDE_BLAS");
    printf("ringside training benchmark: Fashion-MNIST batch %ld, text batch %ld, Adam lr 1e-3, %ld warm-up steps "
           "excluded\n", batch ? batch : 64, batch ? batch : GPT_BATCH, warmup);
    printf("BLAS: OpenBLAS kernel %s (%s); RINGSIDE_BLAS=%s\n", bi.core, bi.why, blas_env ? blas_env : "(unset)");
    printf("BLAS config: %s\n", bi.config);
    if (info) return 0;

    rs_err err = {0};
    rs_data_pair data = {0};
    double tl = now_s();
    rs_data_pair text = {0};
    bool want_gpt = !strcmp(model, "gpt") || !strcmp(model, "all");
    if (want_gpt && rs_data_text_builtin(GPT_CTX, &text, &err)) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    if (strcmp(model, "gpt") && rs_data_fashion(NULL, &data, &err)) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    if (data.train) printf("data: %u training samples loaded in %.2f s (not timed below)\n", data.train->n, now_s() - tl);
    printf("BLAS time = wall time of products called outside OpenMP regions + (time / team size) of those\n"
           "called inside one (conv's per-sample products); other = step time - BLAS time.\n"
           "busy: CPUs kept busy by other processes while the steps ran (/proc/stat minus this process);\n"
           "above ~0.1 the figures are disturbed. loss: mean training loss over the measured steps.\n\n");

    printf("%-5s %3s %5s %6s %10s %8s %6s %8s %8s   %-31s %7s %5s\n", "model", "thr", "batch", "steps",
           "samples/s", "ms/step", "BLAS%", "BLAS GF/s", "other ms", "phase ms/step data/fwd/bwd/opt", "loss",
           "busy");
    const char *models[3] = {"mlp", "cnn", "gpt"};
    int rc = 0;
    for (int mi = 0; mi < 3; mi++) {
        bool pick = !strcmp(model, models[mi]) || !strcmp(model, "all") || (!strcmp(model, "both") && mi < 2);
        if (!pick) continue;
        for (int ti = 0; ti < nt; ti++) {
            long s = steps ? steps : (mi == 0 ? STEPS_MLP : mi == 1 ? STEPS_CNN : STEPS_GPT);
            long b = batch ? batch : mi == 2 ? GPT_BATCH : 64;
            result r;
            if (run_one(models[mi], mi == 2 ? &text : &data, tlist[ti], (int)blocks, (int)b, s, warmup, &r)) {
                rc = 1;
                continue;
            }
            double ms = r.seconds * 1e3 / (double)r.steps;
            double blas_share = r.prof.gemm_wall_s / r.seconds;
            double gflops = r.prof.gemm_wall_s > 0 ? r.prof.gemm_flops / r.prof.gemm_wall_s * 1e-9 : 0;
            double other_ms = (r.seconds - r.prof.gemm_wall_s) * 1e3 / (double)r.steps;
            double sps = (double)r.steps * r.batch / r.seconds;
            double k = 1e3 / (double)r.steps;
            char phases[64];
            snprintf(phases, sizeof phases, "%.3f/%.3f/%.3f/%.3f", r.data * k, r.fwd * k, r.bwd * k, r.opt * k);
            printf("%-5s %3d %5d %6lld %10.0f %8.3f %5.1f%% %9.1f %8.3f   %-31s %7.4f %5.2f\n", r.model,
                   r.threads, r.batch, (long long)r.steps, sps, ms, 100 * blas_share, gflops, other_ms, phases,
                   r.loss, r.others);
            if (kv)
                printf("kv model=%s threads=%d batch=%d steps=%lld samples_per_s=%.1f ms_per_step=%.4f "
                       "blas_share=%.4f blas_gflops=%.2f other_ms=%.4f data_ms=%.4f fwd_ms=%.4f bwd_ms=%.4f "
                       "opt_ms=%.4f gemm_calls_per_step=%.1f loss=%.4f peak_rss_kb=%ld blas_core=%s others=%.2f "
                       "cpu_ms_per_step=%.4f blocks=%d\n",
                       r.model, r.threads, r.batch, (long long)r.steps, sps, ms, blas_share, gflops, other_ms,
                       r.data * k, r.fwd * k, r.bwd * k, r.opt * k, (double)r.prof.gemm_calls / (double)r.steps,
                       r.loss, peak_rss_kb(), bi.core, r.others, r.cpu_s * k, r.blocks);
            fflush(stdout);
        }
    }
    if (data.train)
        printf("\npeak RSS of this process: %.1f MiB (getrusage ru_maxrss; includes the data set, %.1f MiB as "
               "f32)\n",
               peak_rss_kb() / 1024.0,
               (double)(data.train->n + data.test->n) * rs_dataset_sample_numel(data.train) * 4 / 1048576.0);
    rs_data_pair_clear(&data);
    rs_data_pair_clear(&text);
    return rc;
}
