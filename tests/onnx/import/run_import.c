/* Runs the files make_models.py wrote (manifest.txt in the folder given as argv[1]): every good file
 * is imported, made an inference model (rs_onnx_to_inference_model), run by the engine's executor on
 * the saved inputs at batch 1 and 7 and compared with ONNX Runtime's outputs; files marked for it also
 * become trainable engine models whose forward must agree; every bad file must be refused with the
 * expected words in the message. Then every prefix and a few thousand byte flips of a few good files
 * must load or fail cleanly (never crash). Returns the number of failures. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "engine/core/rng.h"
#include "engine/cpu/cpu_kernels.h"
#include "engine/data/dataset.h"
#include "engine/train/train.h"
#include "onnx/import.h"
#include "rs_test.h"

static float *read_f32(const char *dir, const char *name, int b, const char *kind, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.b%d.%s.f32", dir, name, b, kind);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *x = malloc(sizeof(float) * n);
    size_t got = x ? fread(x, sizeof(float), n, f) : 0;
    fclose(f);
    if (got != n) {
        free(x);
        return NULL;
    }
    return x;
}

/* max |a - b|; prints the first few pairs over tol */
static double compare(const char *what, const float *got, const float *want, size_t n, double tol)
{
    double worst = 0.0;
    int shown = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol) && shown++ < 4) fprintf(stderr, "  %s[%zu]: got %.8g want %.8g\n", what, i, got[i], want[i]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* batch rows of the file's input through the engine's executor on activation set a: y gets the
 * graph's output values (batch * rs_onnx_graph_output_numel). A file that fixed the batch at k takes
 * k rows a sample. */
static rs_status run_model(rs_model *m, rs_acts *a, const rs_onnx_graph *g, const float *x, int batch, float *y,
                           rs_err *e)
{
    int per = g->fixed_batch > 1 ? (int)g->fixed_batch : 1;
    if (batch % per) return rs_err_set(e, RS_ERR_SHAPE, "batch %d is not a multiple of the file's %d", batch, per);
    const float *out = NULL;
    rs_status st = a ? rs_model_forward_acts(m, a, x, batch / per, &out, e) : rs_model_forward(m, x, batch / per, &out, e);
    if (st) return st;
    size_t n = rs_onnx_graph_output_numel(g) * (size_t)batch;
    if ((size_t)rs_model_classes(m) * (size_t)rs_model_rows(m) * (size_t)(batch / per) != n)
        return rs_err_set(e, RS_ERR_INTERNAL, "the model gives %d x %d values a sample, the graph %zu a row",
                          rs_model_rows(m), rs_model_classes(m), rs_onnx_graph_output_numel(g));
    memcpy(y, out, sizeof(float) * n);
    return RS_OK;
}

/* One of two threads running the same model at once, each on its own activation set. */
typedef struct runner {
    rs_model *m;
    const rs_onnx_graph *g;
    const float *x;
    int batch;
    float *y;
    rs_status st;
    rs_err e;
} runner;

static void *run_thread(void *ud)
{
    runner *r = ud;
    rs_acts *a = rs_acts_new(r->m, 1, &r->e);
    r->st = a ? RS_OK : r->e.code;
    for (int k = 0; k < 3 && !r->st; k++) r->st = run_model(r->m, a, r->g, r->x, r->batch, r->y, &r->e);
    rs_acts_free(a);
    return NULL;
}

/* Two threads on one model, their own activation sets, equal a serial run bit for bit. */
static void check_threads(const char *name, rs_model *m, const rs_onnx_graph *g, const float *x, int batch,
                          const float *serial, size_t n)
{
    runner r[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        r[i] = (runner){.m = m, .g = g, .x = x, .batch = batch, .y = calloc(n, sizeof(float))};
        RS_CHECK(pthread_create(&t[i], NULL, run_thread, &r[i]) == 0, "%s: thread", name);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        RS_CHECK(r[i].st == RS_OK, "%s: thread %d: %s", name, i, r[i].e.msg);
        RS_CHECK(r[i].y && !memcmp(r[i].y, serial, n * sizeof(float)), "%s: thread %d differs from the serial run", name,
                 i);
        free(r[i].y);
    }
}

static void check_good(const char *dir, const char *name, size_t in_n, size_t out_n, double tol, int to_model)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    rs_onnx_graph *g = NULL;
    rs_err e = {0};
    rs_status st = rs_onnx_load(path, &g, &e);
    RS_CHECK(st == RS_OK, "%s: %s", name, e.msg);
    if (st) return;
    RS_CHECK(rs_onnx_graph_input_numel(g) == in_n, "%s: input numel %zu, want %zu", name, rs_onnx_graph_input_numel(g), in_n);
    RS_CHECK(rs_onnx_graph_output_numel(g) == out_n, "%s: output numel %zu, want %zu", name,
             rs_onnx_graph_output_numel(g), out_n);
    rs_model *m = NULL, *im = NULL;
    st = rs_onnx_to_inference_model(g, name, &im, &e);
    RS_CHECK(st == RS_OK, "%s: to_inference_model: %s", name, e.msg);
    if (to_model) {
        st = rs_onnx_to_model(g, name, &m, &e);
        RS_CHECK(st == RS_OK, "%s: to_model: %s", name, e.msg);
    }
    /* batches 1 and 7, or k and 2k for a file that fixed the batch at k > 1 (make_models.py's save_model) */
    int k = g->fixed_batch > 1 ? (int)g->fixed_batch : 1, b0 = k > 1 ? k : 1, b1 = k > 1 ? 2 * k : 7;
    for (int b = b0; b <= b1; b += b1 - b0) {
        float *x = read_f32(dir, name, b, "in", in_n * (size_t)b), *want = read_f32(dir, name, b, "out", out_n * (size_t)b);
        RS_CHECK(x && want, "%s: missing inputs/outputs for batch %d", name, b);
        if (!x || !want || !im || rs_onnx_graph_output_numel(g) != out_n) {
            free(x), free(want);
            continue;
        }
        float *y = malloc(sizeof(float) * out_n * (size_t)b);
        st = run_model(im, NULL, g, x, b, y, &e);
        RS_CHECK(st == RS_OK, "%s: run: %s", name, e.msg);
        if (!st) {
            double d = compare(name, y, want, out_n * (size_t)b, tol);
            RS_CHECK(d <= tol, "%s batch %d: max |diff| %.3g > %.1g vs ONNX Runtime", name, b, d, tol);
            printf("  %-24s batch %d: max |diff| vs ORT %.2e\n", name, b, d);
            if (b > b0) check_threads(name, im, g, x, b, y, out_n * (size_t)b);
        }
        if (m) {
            const float *logits = NULL;
            st = rs_model_forward(m, x, b, &logits, &e);
            RS_CHECK(st == RS_OK, "%s: model forward: %s", name, e.msg);
            if (!st) {
                double d = compare("model", logits, want, out_n * (size_t)b, tol);
                RS_CHECK(d <= tol, "%s batch %d: engine model max |diff| %.3g > %.1g vs ONNX Runtime", name, b, d, tol);
                double d2 = compare("model-vs-graph", logits, y, out_n * (size_t)b, tol);
                printf("  %-24s batch %d: engine model vs ORT %.2e, vs graph %.2e\n", name, b, d, d2);
            }
        }
        free(x), free(want), free(y);
    }
    if (m) {
        char *spec = rs_model_spec(m);
        printf("  %-24s model: %s\n", name, spec ? spec : "?");
        free(spec);
    }
    rs_model_free(m);
    rs_model_free(im);
    rs_onnx_graph_free(g);
}

static void check_bad(const char *dir, const char *name, const char *want)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    rs_onnx_graph *g = NULL;
    rs_err e = {0};
    rs_status st = rs_onnx_load(path, &g, &e);
    RS_CHECK(st != RS_OK && g == NULL, "%s: imported, should have been refused", name);
    RS_CHECK(strstr(e.msg, want) != NULL, "%s: message '%s' lacks '%s'", name, e.msg, want);
    printf("  %-24s refused: %s\n", name, e.msg);
    rs_onnx_graph_free(g);
}

/* A file that fixed the batch at k: rs_evaluate runs n samples (not a multiple of k) k at a time, for
 * several eval batch sizes, and must count what ONNX Runtime's outputs give (correct rows, loss sum). */
static void check_eval(const char *dir, const char *name, int n, int classes, int correct, double loss_sum)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    rs_onnx_graph *g = NULL;
    rs_model *m = NULL;
    rs_err e = {0};
    rs_status st = rs_onnx_load(path, &g, &e);
    if (!st) st = rs_onnx_to_inference_model(g, name, &m, &e);
    RS_CHECK(st == RS_OK, "%s: %s", name, e.msg);
    size_t per = g ? rs_onnx_graph_input_numel(g) : 0;
    rs_dataset *d = st ? NULL : rs_dataset_new((uint32_t)n, 1, 1, (int)per, classes);
    snprintf(path, sizeof path, "%s/%s.eval.in.f32", dir, name);
    FILE *fx = fopen(path, "rb");
    snprintf(path, sizeof path, "%s/%s.eval.y.i32", dir, name);
    FILE *fy = fopen(path, "rb");
    bool ok = d && fx && fy && fread(d->x, sizeof(float), per * (size_t)n, fx) == per * (size_t)n &&
              fread(d->y, sizeof(int32_t), (size_t)n, fy) == (size_t)n;
    if (fx) fclose(fx);
    if (fy) fclose(fy);
    RS_CHECK(ok, "%s: eval data", name);
    RS_CHECK(!m || rs_model_fixed_batch(m) == (int)g->fixed_batch, "%s: the model takes %d samples at a time, the "
             "file fixed %lld", name, m ? rs_model_fixed_batch(m) : 0, (long long)g->fixed_batch);
    for (int bi = 0; ok && m && bi < 4; bi++) {
        static const int batches[] = {1, 3, 8, 256}; /* below k, not a multiple of it, two groups, all at once */
        double acc = -1, loss = -1;
        st = rs_evaluate(m, d, batches[bi], &acc, &loss, &e);
        RS_CHECK(st == RS_OK, "%s: eval batch %d: %s", name, batches[bi], e.msg);
        if (st) continue;
        RS_CHECK(fabs(acc * n - correct) < 1e-9, "%s: eval batch %d: %.0f right, ONNX Runtime %d", name, batches[bi],
                 acc * n, correct);
        RS_CHECK(fabs(loss * n - loss_sum) <= 1e-4 * n, "%s: eval batch %d: loss sum %.6f, ONNX Runtime %.6f", name,
                 batches[bi], loss * n, loss_sum);
        printf("  %-24s eval batch %3d: %d samples %lld at a time, accuracy %.4f loss %.6f (ORT: %d right, loss %.6f)\n",
               name, batches[bi], n, (long long)g->fixed_batch, acc, loss, correct, loss_sum / n);
    }
    /* a data set of single rows that do not fit is refused naming the batch the file fixed */
    rs_dataset *wrong = rs_dataset_new(2, 1, 1, (int)per + 1, classes);
    if (m && wrong) {
        st = rs_evaluate(m, wrong, 8, NULL, NULL, &e);
        RS_CHECK(st != RS_OK && strstr(e.msg, "samples at a time"), "%s: eval of mismatched data: '%s'", name,
                 st ? e.msg : "accepted");
    }
    rs_dataset_free(wrong);
    rs_dataset_free(d);
    rs_model_free(m);
    rs_onnx_graph_free(g);
}

/* Constants several nodes read live once: the parameter pool (measured by the model's rs_mem tracker)
 * holds each distinct constant once, bytes as make_models.py computes them. train_bytes -1: the
 * trainable model must be refused because a weight is read in two layouts (it cannot be tied); -2: it is
 * refused (for whatever reason); else it holds the same bytes and its repeated weight is a tied slot. */
static void check_params(const char *dir, const char *name, long long bytes, long long train_bytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    rs_onnx_graph *g = NULL;
    rs_model *m = NULL, *tm = NULL;
    rs_err e = {0};
    rs_status st = rs_onnx_load(path, &g, &e);
    if (!st) st = rs_onnx_to_inference_model(g, name, &m, &e);
    RS_CHECK(st == RS_OK, "%s: %s", name, e.msg);
    if (st) {
        rs_onnx_graph_free(g);
        return;
    }
    long long copies = 0; /* what a copy per node would take: every slot, shared or not */
    for (int i = 0; i < rs_model_layer_count(m); i++)
        for (int j = 0; j < rs_model_layer(m, i)->np; j++)
            copies += (long long)((rs_model_layer(m, i)->p[j].numel + 15) / 16 * 16 * sizeof(float));
    long long got = (long long)rs_model_mem(m)->live[RS_POOL_PARAMS];
    RS_CHECK(got == bytes, "%s: parameter pool %lld bytes, want %lld (each constant once)", name, got, bytes);
    printf("  %-24s parameters: %lld bytes in the params pool (%lld with a copy per node)\n", name, got, copies);
    st = rs_onnx_to_model(g, name, &tm, &e);
    if (train_bytes < 0) {
        RS_CHECK(st != RS_OK && (train_bytes == -2 || strstr(e.msg, "another layout")), "%s: trainable model: '%s'",
                 name, st ? e.msg : "built, should be refused");
    } else {
        RS_CHECK(st == RS_OK, "%s: trainable model: %s", name, e.msg);
        got = tm ? (long long)rs_model_mem(tm)->live[RS_POOL_PARAMS] : -1;
        RS_CHECK(got == train_bytes, "%s: trainable model's parameter pool %lld bytes, want %lld", name, got,
                 train_bytes);
        int tied = 0;
        for (int i = 0; tm && i < rs_model_layer_count(tm); i++) tied += rs_model_layer(tm, i)->np && rs_model_layer(tm, i)->p[0].tied;
        RS_CHECK(tied == 1, "%s: trainable model has %d tied weights, want 1", name, tied);
    }
    rs_model_free(tm);
    rs_model_free(m);
    rs_onnx_graph_free(g);
}

/* Loads (and, when it imports, runs) bytes that must never crash the importer. */
static int try_bytes(const uint8_t *b, size_t n)
{
    rs_onnx_graph *g = NULL;
    rs_err e = {0};
    if (rs_onnx_load_buffer(b, n, "mutant", &g, &e) != RS_OK) {
        RS_CHECK(g == NULL && e.msg[0], "a failed load must leave no graph and say why");
        return 0;
    }
    size_t in = rs_onnx_graph_input_numel(g), out = rs_onnx_graph_output_numel(g);
    /* a mutant may fix the batch at any size: the buffers are sized for the batch that runs */
    size_t b2 = g->fixed_batch > 1 ? (size_t)g->fixed_batch : 2;
    rs_model *m = NULL;
    if (b2 <= 64 && in * b2 < (1u << 20) && out * b2 < (1u << 20)) {
        rs_status st = rs_onnx_to_inference_model(g, "mutant", &m, &e);
        RS_CHECK(st == RS_OK, "a mutant that imports must become a model: %s", e.msg);
        float *x = calloc(in * b2 + 1, sizeof(float)), *y = calloc(out * b2 + 1, sizeof(float));
        if (m) run_model(m, NULL, g, x, (int)b2, y, &e);
        free(x), free(y);
    }
    rs_model_free(m);
    rs_onnx_graph_free(g);
    return 1;
}

static void mutate(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    FILE *f = fopen(path, "rb");
    RS_CHECK(f != NULL, "open %s", path);
    if (!f) return;
    static uint8_t buf[1 << 16], tmp[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    int ok = 0, tries = 0;
    for (size_t len = 0; len < n; len++, tries++) ok += try_bytes(buf, len);
    rs_rng rng;
    rs_rng_seed(&rng, 7);
    for (int t = 0; t < 3000; t++, tries++) {
        memcpy(tmp, buf, n);
        int flips = 1 + (int)(rs_rng_u64(&rng) % 4);
        for (int k = 0; k < flips; k++) tmp[rs_rng_u64(&rng) % n] ^= (uint8_t)(1u << (rs_rng_u64(&rng) % 8));
        ok += try_bytes(tmp, n);
    }
    printf("  mutations of %s: %d tries, %d still imported, no crash\n", name, tries, ok);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* run-import --bench FILE THREADS BATCH: import time (reading, checking, folding, making the engine
 * model), first run, and the median of 50 runs. */
static int bench(const char *path, int threads, int batch)
{
    double t0 = now_ms();
    rs_onnx_graph *g = NULL;
    rs_model *m = NULL;
    rs_err e = {0};
    if (rs_onnx_load(path, &g, &e) || rs_onnx_to_inference_model(g, "bench", &m, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        rs_onnx_graph_free(g);
        return 1;
    }
    double t1 = now_ms();
    rs_model_set_threads(m, threads); /* before rs_acts_new: a set copies the model's context */
    size_t in = rs_onnx_graph_input_numel(g) * (size_t)batch, out = rs_onnx_graph_output_numel(g) * (size_t)batch;
    float *x = calloc(in, sizeof(float)), *y = calloc(out, sizeof(float));
    for (size_t i = 0; i < in; i++) x[i] = (float)(i % 17) * 0.05f;
    rs_acts *acts = rs_acts_new(m, batch, &e); /* the front end's own set, as a server thread would have */
    if (!acts || run_model(m, acts, g, x, batch, y, &e)) fprintf(stderr, "%s\n", e.msg);
    double t2 = now_ms(), runs[50];
    for (int r = 0; r < 50; r++) {
        double a = now_ms();
        run_model(m, acts, g, x, batch, y, &e);
        runs[r] = now_ms() - a;
    }
    rs_acts_free(acts);
    for (int i = 0; i < 50; i++)
        for (int j = i + 1; j < 50; j++)
            if (runs[j] < runs[i]) {
                double t = runs[i];
                runs[i] = runs[j];
                runs[j] = t;
            }
    printf("ringside threads=%d batch=%d import %.3f ms, first run %.3f ms, run median %.3f ms\n", threads, batch,
           t1 - t0, t2 - t1, runs[25]);
    free(x), free(y);
    rs_model_free(m);
    rs_onnx_graph_free(g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--bench")) return bench(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (argc < 2) {
        fprintf(stderr, "usage: run-import DIR [--only] (from make_models.py, or a manifest of other files with --only)\n");
        return 2;
    }
    const char *dir = argv[1];
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *mf = fopen(path, "r");
    if (!mf) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 2;
    }
    int good = 0, bad = 0;
    while (fgets(line, sizeof line, mf)) {
        char kind[16], name[256], rest[512] = "";
        size_t in_n, out_n;
        double tol;
        int to_model;
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "%15s %255s", kind, name) != 2) continue;
        if (!strcmp(kind, "good") && sscanf(line, "%*s %*s %zu %zu %lf %d", &in_n, &out_n, &tol, &to_model) == 4) {
            check_good(dir, name, in_n, out_n, tol, to_model);
            good++;
        } else if (!strcmp(kind, "eval")) {
            int n, classes, correct;
            double loss_sum;
            RS_CHECK(sscanf(line, "%*s %*s %d %d %d %lf", &n, &classes, &correct, &loss_sum) == 4, "bad line: %s", line);
            check_eval(dir, name, n, classes, correct, loss_sum);
        } else if (!strcmp(kind, "params")) {
            long long bytes, train_bytes;
            RS_CHECK(sscanf(line, "%*s %*s %lld %lld", &bytes, &train_bytes) == 2, "bad line: %s", line);
            check_params(dir, name, bytes, train_bytes);
        } else if (!strcmp(kind, "bad")) {
            const char *p = strstr(line, name) + strlen(name);
            snprintf(rest, sizeof rest, "%s", p + (*p == ' '));
            check_bad(dir, name, rest);
            bad++;
        }
    }
    fclose(mf);
    /* --only: a manifest of other files (the transformer patterns), without make_models.py's mutations */
    bool only = argc > 2 && !strcmp(argv[2], "--only");
    RS_CHECK(good > 0 && (bad > 0 || only), "manifest had %d good and %d bad files", good, bad);
    if (only) {
        printf("run-import: %d good files, %d bad files\n", good, bad);
        return rs_test_finish("run-import");
    }
    mutate(dir, "mlp_gemm");
    mutate(dir, "conv_pool");
    /* the folding of masks and shapes, multi-output Split, Where/Expand/Trilu nodes, depthwise conv */
    mutate(dir, "causal_attention");
    mutate(dir, "range_mod_where_cast");
    mutate(dir, "expand");
    mutate(dir, "mobilenet_block");
    printf("run-import: %d good files, %d bad files\n", good, bad);
    return rs_test_finish("run-import");
}
