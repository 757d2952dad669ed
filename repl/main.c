/* ringside: the entry point. Until the REPL lands (its own issue), the binary is a small command
 * line over the same engine calls the REPL will make:
 *   ringside                         train an MLP on the built-in digits and show the result
 *   ringside version                 version, BLAS kernel, threads
 *   ringside show SPEC               build a model and print its summary
 *   ringside train [options] SPEC    train on a data source, optionally save/checkpoint/resume
 *   ringside eval --load FILE [--data SRC]
 * exit() lives here and nowhere else. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ckpt/checkpoint.h"
#include "engine/cpu/blas.h"
#include "engine/data/source.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "progress.h"

#ifndef RS_VERSION
#define RS_VERSION "dev"
#endif

static volatile sig_atomic_t interrupted = 0;

static void on_sigint(int sig)
{
    (void)sig;
    if (interrupted) _exit(130); /* a second Ctrl-C while stopping */
    interrupted = 1;
}

static bool should_stop(void *ud)
{
    (void)ud;
    return interrupted != 0;
}

static void print_version(void)
{
    rs_blas_info b;
    rs_blas_get_info(&b);
    printf("ringside %s\n", RS_VERSION);
    printf("BLAS: OpenBLAS kernel %s (%s); CPU AVX2 %s, AVX-512 %s\n", b.core, b.why, b.cpu_avx2 ? "yes" : "no",
           b.cpu_avx512 ? "yes" : "no");
    printf("      %s\n", b.config);
    printf("threads: %d\n", rs_kernels_for(rs_device_cpu())->get_threads());
}

/* Joins argv[i..argc) with spaces: a spec may be given as one quoted word or several. */
static char *join_args(int argc, char **argv, int i)
{
    size_t n = 1;
    for (int j = i; j < argc; j++) n += strlen(argv[j]) + 1;
    char *s = calloc(n, 1);
    if (!s) return NULL;
    for (int j = i; j < argc; j++) {
        if (j > i) strcat(s, " ");
        strcat(s, argv[j]);
    }
    return s;
}

static int report(const char *what, const rs_err *err, const char *spec, size_t pos)
{
    fprintf(stderr, "ringside: %s: %s\n", what, err->msg);
    if (spec && pos <= strlen(spec)) fprintf(stderr, "  %s\n  %*s^\n", spec, (int)pos, "");
    return 1;
}

static rs_model *build(const char *spec, uint64_t seed, rs_err *err)
{
    rs_model *m = NULL;
    size_t pos = (size_t)-1;
    if (rs_model_parse(spec, "m", rs_device_cpu(), NULL, seed, &m, &pos, err)) {
        report("model", err, spec, pos);
        return NULL;
    }
    return m;
}

static void usage(FILE *f)
{
    fputs("usage: ringside [version | show SPEC | train [options] SPEC | eval --load FILE [--data SRC]]\n"
          "  SPEC     mlp 784-256-10 [act=relu]  |  seq conv(16,3,pad=1) relu maxpool(2) ... flatten linear(10)\n"
          "  --data SRC       digits[:N] (default), fashion[:DIR], idx:IMG,LBL[,TIMG,TLBL], cifar:F[,F..], csv:FILE\n"
          "  --epochs N  --batch N  --lr X  --opt sgd|adam|adamw  --momentum X  --wd X\n"
          "  --sched constant|step|cosine  --warmup N  --steps N (stop after N steps)\n"
          "  --threads N  --seed N (data order)  --model-seed N (initial weights)\n"
          "  --save FILE.safetensors   --ckpt FILE.safetensors [--ckpt-every N]   --resume FILE\n"
          "  --load FILE (weights to start from / to evaluate)\n",
          f);
}

int main(int argc, char **argv)
{
    rs_blas_prefer_fast_kernel(argv);
    signal(SIGINT, on_sigint);
    setvbuf(stdout, NULL, _IOLBF, 0);
    rs_err err = {0};
    const char *cmd = argc > 1 ? argv[1] : "demo";
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        print_version();
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "show")) {
        char *spec = join_args(argc, argv, 2);
        if (!spec || !*spec) {
            usage(stderr);
            free(spec);
            return 2;
        }
        rs_model *m = build(spec, 0, &err);
        if (m) {
            char *s = rs_model_summary(m);
            fputs(s, stdout);
            free(s);
            rs_blas_info b;
            rs_blas_get_info(&b);
            printf("kernels: cpu, %d threads, OpenBLAS %s (%s)\n", rs_kernels_for(rs_device_cpu())->get_threads(),
                   b.core, b.why);
        }
        rs_model_free(m);
        free(spec);
        return m ? 0 : 1;
    }
    bool demo = !strcmp(cmd, "demo");
    if (!demo && strcmp(cmd, "train") && strcmp(cmd, "eval")) {
        fprintf(stderr, "ringside: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
    }
    bool eval_only = !strcmp(cmd, "eval");

    rs_train_cfg cfg = rs_train_defaults();
    const char *data_src = "digits", *save = NULL, *load = NULL;
    uint64_t model_seed = 0;
    static const struct option opts[] = {
        {"data", required_argument, 0, 'd'},   {"epochs", required_argument, 0, 'e'},
        {"batch", required_argument, 0, 'b'},  {"lr", required_argument, 0, 'l'},
        {"opt", required_argument, 0, 'o'},    {"momentum", required_argument, 0, 'M'},
        {"wd", required_argument, 0, 'w'},     {"sched", required_argument, 0, 'S'},
        {"warmup", required_argument, 0, 'W'}, {"steps", required_argument, 0, 'n'},
        {"threads", required_argument, 0, 't'}, {"seed", required_argument, 0, 's'},
        {"model-seed", required_argument, 0, 'm'}, {"save", required_argument, 0, 'v'},
        {"ckpt", required_argument, 0, 'c'},   {"ckpt-every", required_argument, 0, 'C'},
        {"resume", required_argument, 0, 'r'}, {"load", required_argument, 0, 'L'},
        {0, 0, 0, 0}};
    float lr = -1, momentum = -1, wd = -1;
    optind = demo ? 1 : 2;
    int c;
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (c) {
        case 'd': data_src = optarg; break;
        case 'e': cfg.epochs = atoi(optarg); break;
        case 'b': cfg.batch = atoi(optarg); break;
        case 'l': lr = strtof(optarg, NULL); break;
        case 'o': {
            rs_opt_kind k;
            if (rs_opt_kind_parse(optarg, &k, &err)) return report("--opt", &err, NULL, 0);
            cfg.opt = rs_opt_defaults(k);
            break;
        }
        case 'M': momentum = strtof(optarg, NULL); break;
        case 'w': wd = strtof(optarg, NULL); break;
        case 'S':
            if (rs_sched_kind_parse(optarg, &cfg.sched.kind, &err)) return report("--sched", &err, NULL, 0);
            break;
        case 'W': cfg.sched.warmup = atoll(optarg); break;
        case 'n': cfg.max_steps = atoll(optarg); break;
        case 't': cfg.threads = atoi(optarg); break;
        case 's': cfg.seed = strtoull(optarg, NULL, 10); break;
        case 'm': model_seed = strtoull(optarg, NULL, 10); break;
        case 'v': save = optarg; break;
        case 'c': cfg.ckpt_path = optarg; break;
        case 'C': cfg.ckpt_every = atoll(optarg); break;
        case 'r': cfg.resume = optarg; break;
        case 'L': load = optarg; break;
        default: usage(stderr); return 2;
        }
    }
    if (lr >= 0) cfg.opt.lr = lr;
    if (momentum >= 0) cfg.opt.momentum = momentum;
    if (wd >= 0) cfg.opt.weight_decay = wd;
    if (cfg.threads > 0) rs_kernels_for(rs_device_cpu())->set_threads(cfg.threads);

    /* The model: a spec on the command line, or the one stored in the file to load/resume. */
    char *spec = optind < argc ? join_args(argc, argv, optind) : NULL;
    const char *from = load ? load : cfg.resume;
    if (!spec && from && !(spec = rs_ckpt_read_spec(from, &err))) return report("model", &err, NULL, 0);
    if (!spec) {
        if (!demo) {
            fprintf(stderr, "ringside: %s needs a model spec (or --load FILE)\n", cmd);
            usage(stderr);
            return 2;
        }
        spec = strdup("mlp 784-256-10 act=relu");
    }
    int rc = 0;
    rs_data_pair data = {0};
    rs_model *m = build(spec, model_seed, &err);
    if (!m) {
        free(spec);
        return 1;
    }
    if (demo) {
        printf("ringside %s: training `%s` on the built-in digits (no download needed).\n", RS_VERSION, spec);
        printf("  Try: ringside train --data fashion --epochs 2 seq conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) "
               "relu maxpool(2) flatten linear(10)\n\n");
    }
    if (load && rs_ckpt_load_model(load, m, &err)) {
        rc = report("load", &err, NULL, 0);
        goto out;
    }
    if (rs_data_open(data_src, cfg.seed, &data, &err)) {
        rc = report("data", &err, NULL, 0);
        goto out;
    }
    char *summary = rs_model_summary(m);
    fputs(summary, stdout);
    free(summary);
    printf("data %s: %u train, %u test samples of %dx%dx%d, %d classes\n", data_src, data.train->n,
           data.test ? data.test->n : 0, data.train->c, data.train->h, data.train->w, data.train->n_classes);
    if (eval_only) {
        double acc, loss;
        const rs_dataset *d = data.test && data.test->n ? data.test : data.train;
        if (rs_evaluate(m, d, 256, &acc, &loss, &err)) {
            rc = report("eval", &err, NULL, 0);
            goto out;
        }
        printf("%s: accuracy %.4f, loss %.4f on %u samples\n", d->name, acc, loss, d->n);
        goto out;
    }
    rs_progress prog;
    rs_progress_init(&prog, stdout);
    rs_train_hooks hooks = {.on_event = rs_progress_event, .should_stop = should_stop, .ud = &prog};
    rs_train_result res;
    if (rs_train(m, &data, &cfg, &hooks, &res, &err)) {
        rc = report("train", &err, NULL, 0);
        goto out;
    }
    if (res.stopped)
        printf("\nstopped by Ctrl-C after step %lld (%d full epochs); the model keeps the weights of that step\n",
               (long long)res.global_step, res.epochs_done);
    printf("trained %lld steps in %.1fs (%.0f samples/s: data %.2fs, forward %.2fs, backward %.2fs, optimizer "
           "%.2fs)%s",
           (long long)res.steps, res.seconds, res.samples_per_s, res.t_data, res.t_fwd, res.t_bwd, res.t_opt,
           res.test_acc >= 0 ? "" : "\n");
    if (res.test_acc >= 0) printf("; test accuracy %.4f\n", res.test_acc);
    if (save) {
        if (rs_ckpt_save_model(save, m, &err)) rc = report("save", &err, NULL, 0);
        else printf("saved %s\n", save);
    }
out:
    rs_data_pair_free(&data);
    rs_model_free(m);
    free(spec);
    return rc;
}
