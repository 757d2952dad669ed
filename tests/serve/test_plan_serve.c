/* Compiled plans served (serve/backend_plan.c) over raw HTTP: a small CNN compiled here at fp32 and
 * bf16 and int8 and written as REPO/NAME/1/model.plan. Each answer, alone and among 16 concurrent
 * requests the batcher merges, equals rs_plan_run of that input alone on a plan loaded from the same
 * file (fp32 within the plan tests' FP32_TOL, bf16 within BF16_TOL, int8 within INT8_TOL); a config
 * asking a larger batch than the plan's, a corrupted model.plan, one built for another ISA and
 * Triton's tensorrt_plan platform leave those models UNAVAILABLE with the reason while the others
 * serve. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/nn/spec.h"
#include "plan/ir.h"
#include "plan/plan.h"
#include "raw_http.h"
#include "rs_test.h"
#include "serve/sched.h"
#include "serve/server.h"

#define FP32_TOL 1e-5 /* tests/plan/test_plan.c's */
#define BF16_TOL 3e-2
#define INT8_TOL 6e-2
#define NIN (1 * 10 * 10)
#define NOUT 5
#define PB 8 /* the plans' compiled batch */
#define NCLIENT 16

static const char *const SPEC = "seq in=1x10x10 conv(6,3,pad=1) relu maxpool(2) conv(8,3,pad=1) relu flatten linear(5)";

/* JSON infer of one sample of model; its outputs into y. */
static bool infer1(int port, const char *model, const float *x, float *y)
{
    char *s = infer_body(NULL, "input", (const int64_t[]){1, 1, 10, 10}, 4, x);
    if (!s) return false;
    char path[128];
    snprintf(path, sizeof path, "/v2/models/%s/infer", model);
    resp r;
    post(port, path, s, &r);
    free(s);
    json_t *j = json_loadb(r.body, r.body_n, 0, NULL);
    json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
    json_t *d = json_object_get(o, "data");
    bool ok = r.status == 200 && json_array_size(d) == NOUT &&
              !strcmp(json_string_value(json_object_get(o, "name")) ?: "", "logits");
    for (int i = 0; ok && i < NOUT; i++) y[i] = (float)json_number_value(json_array_get(d, (size_t)i));
    if (!ok) fprintf(stderr, "  infer %s: %d %.300s\n", model, r.status, r.body);
    json_decref(j);
    free(r.raw);
    return ok;
}

/* |a - b| <= tol * max(1, max |b|), the plan tests' measure. */
static bool close_to(const float *a, const float *b, int n, double tol)
{
    double m = 1, d = 0;
    for (int i = 0; i < n; i++) {
        if (fabs(b[i]) > m) m = fabs(b[i]);
        if (fabs((double)a[i] - b[i]) > d) d = fabs((double)a[i] - b[i]);
    }
    if (d > tol * m) fprintf(stderr, "  off by %.3g (tolerance %.3g)\n", d, tol * m);
    return d <= tol * m;
}

/* The reference: input x alone (B = 1) through a plan loaded from the served file. */
static void alone(rs_plan *p, const float *x, float *y)
{
    const float *o = NULL;
    rs_err e = {0};
    RS_CHECK(rs_plan_run(p, x, 1, &o, &e) == RS_OK, "%s", e.msg);
    if (o) memcpy(y, o, NOUT * sizeof *y);
}

static void sample(int k, float *x)
{
    for (int i = 0; i < NIN; i++) x[i] = (float)(((k + 5) * (i + 3) * 7919) % 401) / 200.0f - 1.0f;
}

typedef struct client {
    int port;
    const char *model;
    float x[NIN], want[NOUT], got[NOUT];
    bool ok;
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    c->ok = infer1(c->port, c->model, c->x, c->got);
    return NULL;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* REPO/NAME/1/model.plan from p (or copied bytes), and a config. */
static void put_model(const char *repo, const char *name, const rs_plan *p, const char *config)
{
    char d[512];
    rs_err e = {0};
    snprintf(d, sizeof d, "%s/%s", repo, name);
    mkdir(d, 0755);
    snprintf(d, sizeof d, "%s/%s/1", repo, name);
    mkdir(d, 0755);
    snprintf(d, sizeof d, "%s/%s/1/model.plan", repo, name);
    RS_CHECK(rs_plan_save(p, d, &e) == RS_OK, "%s", e.msg);
    snprintf(d, sizeof d, "%s/%s/config.pbtxt", repo, name);
    write_text(d, config);
}

static rs_plan *compile(rs_model *m, rs_plan_prec prec, const rs_dataset *calib)
{
    rs_plan_opts o = rs_plan_opts_default();
    o.prec = prec;
    o.batch = PB;
    o.calib = calib;
    rs_plan *p = NULL;
    rs_err e = {0};
    if (rs_plan_compile(m, &o, &p, &e) != RS_OK) {
        if (prec == RS_PLAN_FP32) RS_CHECK(false, "compile: %s", e.msg);
        else printf("  no %s plan on this CPU: %s\n", rs_plan_prec_name(prec), e.msg);
        return NULL;
    }
    return p;
}

/* NCLIENT requests of one sample at once to model mname: merged into batches (of up to 8, over two
 * instances), each answer its own input's (ref run alone, within tol). */
static void concurrent(rs_serve_server *s, int port, const char *mname, rs_plan *ref, double tol)
{
    rs_serve_model *sm = rs_serve_acquire(s, mname);
    RS_CHECK(sm != NULL, "%s not served", mname);
    if (!sm) return;
    rs_serve_stats before, after;
    rs_serve_sched_stats(rs_serve_model_version(sm, NULL)->sched, &before);
    static client cl[NCLIENT];
    pthread_t th[NCLIENT];
    for (int k = 0; k < NCLIENT; k++) {
        cl[k].port = port;
        cl[k].model = mname;
        sample(k + 1, cl[k].x);
        alone(ref, cl[k].x, cl[k].want);
    }
    for (int k = 0; k < NCLIENT; k++) pthread_create(&th[k], NULL, client_main, &cl[k]);
    int right = 0;
    for (int k = 0; k < NCLIENT; k++) {
        pthread_join(th[k], NULL);
        right += cl[k].ok && close_to(cl[k].got, cl[k].want, NOUT, tol);
    }
    RS_CHECK(right == NCLIENT, "%s: %d of %d concurrent answers equal the plan run alone", mname, right, NCLIENT);
    rs_serve_sched_stats(rs_serve_model_version(sm, NULL)->sched, &after);
    uint64_t larger = 0;
    for (int b = 2; b <= after.max_batch && after.batch_infer; b++)
        larger += after.batch_infer[b].count - (before.batch_infer ? before.batch_infer[b].count : 0);
    uint64_t inf = after.inference_count - before.inference_count, ex = after.execution_count - before.execution_count;
    printf("  %s, %d requests: %llu samples in %llu executions, %llu of them batches > 1\n", mname, NCLIENT,
           (unsigned long long)inf, (unsigned long long)ex, (unsigned long long)larger);
    RS_CHECK(inf == NCLIENT && larger > 0 && ex < NCLIENT, "no batch > 1: %llu executions", (unsigned long long)ex);
    rs_serve_stats_clear(&before);
    rs_serve_stats_clear(&after);
    rs_serve_release(s, sm);
}

/* The three plans served and the references, plans loaded back from the served files. */
typedef struct plans {
    rs_plan *p32, *p16, *p8;
    rs_plan *r32, *r16, *r8;
} plans;

/* Flips one byte in the middle of path: the checksum no longer matches. */
static void corrupt(const char *path)
{
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, n / 2, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, n / 2, SEEK_SET);
    fputc(ch ^ 0x5a, f);
    fclose(f);
}

/* The repository: cnn (fp32), cnn16 (bf16) and cnn8 (int8) served; big, trt, bad and isa refused at
 * load. pl gets the references loaded from the served files. */
static void write_repo(const char *repo, plans *pl)
{
    const char *batching = "max_batch_size: 8\ninstance_group [ { count: 2 } ]\n"
                           "dynamic_batching { max_queue_delay_microseconds: 200000 }\n";
    rs_plan *p32 = pl->p32;
    put_model(repo, "cnn", p32, batching);
    if (pl->p16) put_model(repo, "cnn16", pl->p16, "max_batch_size: 8\nplatform: \"ringside_plan\"\n");
    if (pl->p8) put_model(repo, "cnn8", pl->p8, batching);
    put_model(repo, "big", p32, "max_batch_size: 16\n");
    put_model(repo, "trt", p32, "platform: \"tensorrt_plan\"\nmax_batch_size: 8\n");
    put_model(repo, "bad", p32, "max_batch_size: 8\n");
    { /* a plan for another ISA, as a file from another machine would be */
        char isa[32];
        snprintf(isa, sizeof isa, "%s", p32->isa);
        snprintf(p32->isa, sizeof p32->isa, "%s", strcmp(isa, "avx2") ? "avx2" : "avx512_core");
        put_model(repo, "isa", p32, "max_batch_size: 8\n");
        snprintf(p32->isa, sizeof p32->isa, "%s", isa);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/bad/1/model.plan", repo);
    corrupt(path);
    rs_err e = {0};
    snprintf(path, sizeof path, "%s/cnn/1/model.plan", repo);
    RS_CHECK(rs_plan_load(path, &pl->r32, &e) == RS_OK, "%s", e.msg);
    snprintf(path, sizeof path, "%s/cnn16/1/model.plan", repo);
    if (pl->p16) RS_CHECK(rs_plan_load(path, &pl->r16, &e) == RS_OK, "%s", e.msg);
    snprintf(path, sizeof path, "%s/cnn8/1/model.plan", repo);
    if (pl->p8) RS_CHECK(rs_plan_load(path, &pl->r8, &e) == RS_OK, "%s", e.msg);
}

/* The refused ones, each UNAVAILABLE with its reason in the index; the server goes on. */
static void check_refused(int port)
{
    resp r;
    post(port, "/v2/repository/index", "", &r);
    RS_CHECK(r.status == 200, "index %d", r.status);
    printf("  index: %.*s\n", (int)r.body_n, r.body);
    json_t *idx = json_loadb(r.body, r.body_n, 0, NULL);
    static const char *const refused[][2] = {
        {"big", "max_batch_size 16 is larger than the batch 8 the plan was compiled for"},
        {"bad", "corrupted"},
        {"trt", "tensorrt_plan"},
        {"isa", "built for ISA"},
    };
    for (size_t k = 0; k < sizeof refused / sizeof *refused; k++) {
        bool seen = false;
        for (size_t i = 0; i < json_array_size(idx); i++) {
            json_t *it = json_array_get(idx, i);
            if (strcmp(json_string_value(json_object_get(it, "name")) ?: "", refused[k][0])) continue;
            seen = !strcmp(json_string_value(json_object_get(it, "state")) ?: "", "UNAVAILABLE") &&
                   strstr(json_string_value(json_object_get(it, "reason")) ?: "", refused[k][1]);
        }
        RS_CHECK(seen, "%s: not UNAVAILABLE with \"%s\"", refused[k][0], refused[k][1]);
    }
    json_decref(idx);
    free(r.raw);
}

/* cnn is ready; its config and metadata come from the plan. */
static void check_config(int port)
{
    resp r;
    RS_CHECK(http(port, "GET /v2/models/cnn/ready HTTP/1.1", NULL, 0, &r) == 200, "cnn not ready");
    free(r.raw);
    http(port, "GET /v2/models/cnn/config HTTP/1.1", NULL, 0, &r);
    RS_CHECK(r.status == 200 && strstr(r.body, "\"platform\":\"ringside_plan\"") && strstr(r.body, "\"max_batch_size\":8"),
             "config %.300s", r.body);
    free(r.raw);
    http(port, "GET /v2/models/cnn HTTP/1.1", NULL, 0, &r);
    RS_CHECK(r.status == 200 && strstr(r.body, "[-1,1,10,10]") && strstr(r.body, "[-1,5]"), "metadata %.300s", r.body);
    free(r.raw);
}

/* One request alone at each precision. */
static void check_alone(int port, const plans *pl)
{
    float x[NIN], y[NOUT], want[NOUT];
    sample(0, x);
    alone(pl->r32, x, want);
    RS_CHECK(infer1(port, "cnn", x, y) && close_to(y, want, NOUT, FP32_TOL), "fp32 alone");
    if (pl->r16) {
        alone(pl->r16, x, want);
        RS_CHECK(infer1(port, "cnn16", x, y) && close_to(y, want, NOUT, BF16_TOL), "bf16 alone");
    }
    if (pl->r8) {
        alone(pl->r8, x, want);
        RS_CHECK(infer1(port, "cnn8", x, y) && close_to(y, want, NOUT, INT8_TOL), "int8 alone");
    }
}

/* A request larger than the plan's batch is refused, not run. */
static void check_batch_over(int port)
{
    resp r;
    static float x[9 * NIN];
    for (int i = 0; i < 9 * NIN; i++) x[i] = 0.5f;
    char *body = infer_body(NULL, "input", (const int64_t[]){9, 1, 10, 10}, 4, x);
    RS_CHECK(body != NULL, "out of memory");
    if (!body) return;
    post(port, "/v2/models/cnn/infer", body, &r);
    RS_CHECK(r.status == 400 && strstr(r.body, "batch-size must be <= 8"), "batch 9: %d %.200s", r.status, r.body);
    free(r.raw);
    free(body);
}

static void plans_free(plans *pl)
{
    rs_plan_free(pl->r32);
    rs_plan_free(pl->r16);
    rs_plan_free(pl->r8);
    rs_plan_free(pl->p32);
    rs_plan_free(pl->p16);
    rs_plan_free(pl->p8);
}

int main(void)
{
    char repo[] = "/tmp/rs-serve-plan-XXXXXX";
    if (!mkdtemp(repo)) RS_SKIP("no temporary folder");
    rs_err e = {0};
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(SPEC, "m", rs_device_cpu(), NULL, 7, &m, NULL, &e) == RS_OK, "%s", e.msg);
    if (!m) return rs_test_finish("serve-plan");
    /* int8: calibrated (min-max) on 64 inputs drawn as the requests' are */
    rs_dataset *cal = rs_dataset_new(64, 1, 10, 10, NOUT);
    for (int k = 0; cal && k < 64; k++) sample(100 + k, cal->x + (size_t)k * NIN);
    plans pl = {.p32 = compile(m, RS_PLAN_FP32, NULL), .p16 = compile(m, RS_PLAN_BF16, NULL),
                .p8 = cal ? compile(m, RS_PLAN_INT8, cal) : NULL};
    RS_CHECK(pl.p8 != NULL, "no int8 plan");
    if (!pl.p32) return rs_test_finish("serve-plan");
    write_repo(repo, &pl);

    rs_serve_opts o;
    rs_serve_opts_init(&o);
    o.repo = repo;
    o.metrics_port = -1;
    rs_serve_server *s = NULL;
    RS_CHECK(rs_serve_start(&o, &s, &e) == RS_OK, "%s", e.msg);
    if (!s || !pl.r32) return rs_test_finish("serve-plan");
    int port = rs_serve_http_port(s);
    check_refused(port);
    check_config(port);
    check_alone(port, &pl);
    /* NCLIENT at once, fp32 and int8 */
    concurrent(s, port, "cnn", pl.r32, FP32_TOL);
    if (pl.r8) concurrent(s, port, "cnn8", pl.r8, INT8_TOL);
    check_batch_over(port);
    rs_serve_stop(s);
    plans_free(&pl);
    rs_dataset_free(cal);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", repo);
    if (system(cmd)) {}
    rs_model_free(m);
    return rs_test_finish("serve-plan");
}
