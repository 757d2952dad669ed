/* The HTTP front end with no Python: an in-process server on a repository this test writes (a model
 * built here, exported to ONNX), spoken to over raw sockets. Answers are checked against the same
 * model run in-process; batching, the body cap (announced and chunked), bad requests, model control,
 * metrics, 64 concurrent clients and two servers in one process are covered. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/nn/spec.h"
#include "onnx/export.h"
#include "raw_http.h"
#include "rs_test.h"
#include "serve/server.h"

static bool is_error(const resp *r, int status, const char *needle)
{
    json_t *j = json_loadb(r->body, r->body_n, 0, NULL);
    const char *m = json_string_value(json_object_get(j, "error"));
    bool ok = r->status == status && m && strstr(m, needle);
    if (!ok) fprintf(stderr, "  got %d %s\n", r->status, r->body);
    json_decref(j);
    return ok;
}

/* POSTs json to path and whether the answer is error `status` naming needle. */
static bool post_error(int port, const char *path, const char *json, int status, const char *needle)
{
    resp r;
    post(port, path, json, &r);
    bool ok = is_error(&r, status, needle);
    free(r.raw);
    return ok;
}

#define NIN 6
#define NOUT 4
static rs_model *ref;

/* JSON infer of B rows; returns the outputs parsed from the reply into y. */
static bool infer_json(int port, const char *model, const float *x, int B, float *y)
{
    char *s = infer_body("r1", "input", (const int64_t[]){B, NIN}, 2, x);
    if (!s) return false;
    char path[128];
    snprintf(path, sizeof path, "/v2/models/%s/infer", model);
    resp r;
    post(port, path, s, &r);
    free(s);
    json_t *j = json_loadb(r.body, r.body_n, 0, NULL);
    json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
    json_t *d = json_object_get(o, "data");
    bool ok = r.status == 200 && json_array_size(d) == (size_t)B * NOUT &&
              !strcmp(json_string_value(json_object_get(j, "id")) ?: "", "r1");
    for (int i = 0; ok && i < B * NOUT; i++) y[i] = (float)json_number_value(json_array_get(d, (size_t)i));
    if (!ok) fprintf(stderr, "  infer_json: %d %.200s\n", r.status, r.body);
    json_decref(j);
    free(r.raw);
    return ok;
}

static void reference(const float *x, int B, float *y)
{
    const float *o;
    rs_err e = {0};
    rs_model_forward(ref, x, B, &o, &e);
    memcpy(y, o, sizeof(float) * (size_t)B * NOUT);
}

static int max_diff_ok(const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > 1e-5f + 1e-4f * fabsf(b[i])) return 0;
    return 1;
}

typedef struct client {
    const char *model; /* NULL: "m" */
    int port, k;
    float x[3 * NIN], want[3 * NOUT];
    int B;
    bool ok;
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    float y[3 * NOUT];
    c->ok = infer_json(c->port, c->model ? c->model : "m", c->x, c->B, y) && max_diff_ok(y, c->want, c->B * NOUT);
    return NULL;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* m: two instances and a batcher that waits up to 0.1 s for a batch of 64.
 * q: a queue of two requests at most, and a batcher that waits 2 s for a batch of 8.
 * wild: the config's dims say -1 (any) where the model file's are fixed: requests run on the
 * file's dims. whole: no batching, and dims that are not the model's: refused at load, since the
 * buffers a request gets are sized from the config and the model reads its own sizes. */
static void write_repo(const char *repo)
{
    static const char *const models[][2] = {
        {"m", "max_batch_size: 64\ninstance_group [ { count: 2 } ]\n"
              "dynamic_batching { preferred_batch_size: [ 64 ] max_queue_delay_microseconds: 100000 }\n"},
        {"q", "max_batch_size: 8\n"
              "dynamic_batching { max_queue_delay_microseconds: 2000000 default_queue_policy { max_queue_size: 2 } }\n"},
        {"wild", "max_batch_size: 8\ninput [ { name: \"input\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
                 "output [ { name: \"logits\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"},
        {"whole", "max_batch_size: 0\ninput [ { name: \"input\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                  "output [ { name: \"logits\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n"},
    };
    char p[512];
    rs_err e = {0};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        const char *name = models[i][0];
        snprintf(p, sizeof p, "%s/%s", repo, name);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/%s/1", repo, name);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/%s/1/model.onnx", repo, name);
        RS_CHECK(rs_onnx_export(ref, p, 0, &e) == RS_OK, "%s", e.msg);
        snprintf(p, sizeof p, "%s/%s/config.pbtxt", repo, name);
        write_file(p, models[i][1]);
    }
}

/* wild's -1 dims run on the file's; whole's dims that are not the model's leave it UNAVAILABLE. */
static void check_config_dims(int port)
{
    resp r;
    float wx[2 * NIN], wy[2 * NOUT], wwant[2 * NOUT];
    for (int i = 0; i < 2 * NIN; i++) wx[i] = 0.1f * (float)i - 0.4f;
    reference(wx, 2, wwant);
    RS_CHECK(infer_json(port, "wild", wx, 2, wy) && max_diff_ok(wy, wwant, 2 * NOUT), "dims -1 in the config");
    post(port, "/v2/repository/index", "", &r);
    RS_CHECK(r.status == 200 && strstr(r.body, "{\"name\":\"whole\",\"state\":\"UNAVAILABLE\""),
             "dims that are not the model's: %s", r.body);
    free(r.raw);
}

/* Binary infer of x (3 rows) against want, and binary_data_size that disagrees with the shape. */
static void check_binary_infer(int port, const float *x, const float *want)
{
    enum { XB = 3 * NIN * sizeof(float), YB = 3 * NOUT * sizeof(float) };
    float y[3 * NOUT];
    resp r;
    char hdr[256];
    int hl = snprintf(hdr, sizeof hdr,
                      "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[3,%d],\"parameters\":{"
                      "\"binary_data_size\":%d}}],\"outputs\":[{\"name\":\"logits\",\"parameters\":{\"binary_data\":true}}]}",
                      NIN, (int)XB);
    char body[512], head[256];
    memcpy(body, hdr, (size_t)hl);
    memcpy(body + hl, x, XB);
    snprintf(head, sizeof head, "POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: %zu\r\n"
             "Inference-Header-Content-Length: %d", (size_t)hl + XB, hl);
    http(port, head, body, (size_t)hl + XB, &r);
    const char *ih = strstr(r.raw, "Inference-Header-Content-Length: ");
    long jl = ih ? strtol(ih + 33, NULL, 10) : -1;
    RS_CHECK(r.status == 200 && jl > 0 && r.body_n == (size_t)jl + YB, "binary reply %d %ld %zu", r.status, jl,
             r.body_n);
    if (r.status == 200 && jl > 0 && r.body_n == (size_t)jl + YB) {
        memcpy(y, r.body + jl, YB);
        RS_CHECK(max_diff_ok(y, want, 3 * NOUT), "binary infer differs: %g vs %g", y[0], want[0]);
        RS_CHECK(strstr(r.body, "\"binary_data_size\":48") != NULL, "header: %.*s", (int)jl, r.body);
    }
    free(r.raw);
    snprintf(head, sizeof head, "POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: %zu\r\n"
             "Inference-Header-Content-Length: %d", (size_t)hl + XB - 4, hl);
    http(port, head, body, (size_t)hl + XB - 4, &r);
    RS_CHECK(is_error(&r, 400, "binary_data_size"), "short binary data");
    free(r.raw);
}

static void check_bad_requests(int port)
{
    resp r;
    RS_CHECK(post_error(port, "/v2/models/m/infer", "{\"inputs\": [", 400, "failed to parse the request JSON"),
             "malformed JSON");
    RS_CHECK(post_error(port, "/v2/models/nosuch/infer", "{}", 400, "unknown model"), "unknown model");
    RS_CHECK(post_error(port, "/v2/models/../m/infer", "{}", 400, "not a model name"), "traversal");
    RS_CHECK(post_error(port, "/v2/repository/models/../load", "", 400, "not a model name"), "traversal load");
    RS_CHECK(post_error(port, "/v2/models/m/infer",
                        "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"INT64\",\"shape\":[1,6],\"data\":[1,2,3,4,5,6]}]}",
                        400, "data-type"),
             "wrong dtype");
    RS_CHECK(post_error(port, "/v2/models/m/infer",
                        "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,6],\"data\":[1,2,3]}]}", 400,
                        "expected 6 numbers"),
             "short data");
    RS_CHECK(post_error(port, "/v2/models/m/infer",
                        "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,6],\"data\":[1,2,3,4,5,6]}],"
                        "\"outputs\":[{\"name\":\"nope\"}]}",
                        400, "unexpected inference output 'nope'"),
             "unknown output");
    RS_CHECK(http(port, "GET /v3/whatever HTTP/1.1", NULL, 0, &r) == 404, "unknown path %d", r.status);
    free(r.raw);
}

/* The body cap: announced, and found while reading a chunked body. */
static void check_body_cap(int port)
{
    resp r;
    http(port, "POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 100000", "{}", 2, &r);
    RS_CHECK(is_error(&r, 400, "exceeds"), "announced oversize");
    free(r.raw);
    size_t n = 0, chunk = 4096, cap = 20 * (chunk + 16) + 8;
    char *big = malloc(cap);
    RS_CHECK(big != NULL, "out of memory");
    if (!big) return;
    for (int i = 0; i < 20; i++) {
        n += (size_t)snprintf(big + n, cap - n, "%zx\r\n", chunk);
        memset(big + n, ' ', chunk);
        n += chunk;
        n += (size_t)snprintf(big + n, cap - n, "\r\n");
    }
    n += (size_t)snprintf(big + n, cap - n, "0\r\n\r\n");
    http(port, "POST /v2/models/m/infer HTTP/1.1\r\nTransfer-Encoding: chunked", big, n, &r);
    RS_CHECK(is_error(&r, 400, "exceeds"), "chunked oversize");
    free(r.raw);
    free(big);
}

/* 64 concurrent clients; the batcher merges them (fewer executions than inferences). */
static void check_concurrent(rs_serve_server *s, int port)
{
    rs_serve_model *m = rs_serve_acquire(s, "m");
    rs_serve_stats before, after;
    rs_serve_sched_stats(rs_serve_model_version(m, NULL)->sched, &before);
    static client cl[64];
    pthread_t th[64];
    for (int k = 0; k < 64; k++) {
        cl[k].port = port;
        cl[k].B = 1 + k % 3;
        for (int i = 0; i < cl[k].B * NIN; i++) cl[k].x[i] = (float)(((k + 3) * (i + 1) * 7919) % 201) / 100.0f - 1.0f;
        reference(cl[k].x, cl[k].B, cl[k].want);
    }
    for (int k = 0; k < 64; k++) pthread_create(&th[k], NULL, client_main, &cl[k]);
    int right = 0, rows = 0;
    for (int k = 0; k < 64; k++) {
        pthread_join(th[k], NULL);
        right += cl[k].ok;
        rows += cl[k].B;
    }
    RS_CHECK(right == 64, "%d of 64 clients got the right answer", right);
    rs_serve_sched_stats(rs_serve_model_version(m, NULL)->sched, &after);
    uint64_t inf = after.inference_count - before.inference_count, ex = after.execution_count - before.execution_count;
    RS_CHECK(inf == (uint64_t)rows && ex < (uint64_t)64, "%llu samples in %llu executions for 64 requests",
             (unsigned long long)inf, (unsigned long long)ex);
    rs_serve_stats_clear(&before);
    rs_serve_stats_clear(&after);
    rs_serve_release(s, m);
}

/* A full queue answers at once with 503 and Triton's message; the queued requests still run. */
static void check_full_queue(rs_serve_server *s, int port, const float *x, const float *want)
{
    static client qc[2];
    pthread_t qt[2];
    rs_serve_model *qm = rs_serve_acquire(s, "q");
    RS_CHECK(qm != NULL, "model q not loaded");
    if (!qm) return;
    for (int k = 0; k < 2; k++) {
        qc[k] = (client){.port = port, .B = 1};
        memcpy(qc[k].x, x, sizeof(float) * NIN);
        memcpy(qc[k].want, want, sizeof(float) * NOUT);
        qc[k].model = "q";
        pthread_create(&qt[k], NULL, client_main, &qc[k]);
    }
    rs_serve_stats st = {0};
    for (int i = 0; i < 20000 && st.queued < 2; i++) { /* until both wait in the queue */
        rs_serve_stats_clear(&st);
        rs_serve_sched_stats(rs_serve_model_version(qm, NULL)->sched, &st);
        usleep(500);
    }
    RS_CHECK(st.queued == 2, "queued %d", st.queued);
    rs_serve_stats_clear(&st);
    RS_CHECK(post_error(port, "/v2/models/q/infer",
                        "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,6],\"data\":[1,2,3,4,5,6]}]}",
                        503, "Exceeds maximum queue size"),
             "full queue");
    for (int k = 0; k < 2; k++) {
        pthread_join(qt[k], NULL);
        RS_CHECK(qc[k].ok, "queued request %d", k);
    }
    rs_serve_release(s, qm);
}

/* Metrics agree with the statistics. */
static void check_metrics(rs_serve_server *s, int mport)
{
    resp r;
    rs_serve_stats after;
    http(mport, "GET /metrics HTTP/1.1", NULL, 0, &r);
    rs_serve_model *m = rs_serve_acquire(s, "m");
    rs_serve_sched_stats(rs_serve_model_version(m, NULL)->sched, &after);
    rs_serve_release(s, m);
    char line[160];
    snprintf(line, sizeof line, "nv_inference_count{model=\"m\",version=\"1\"} %llu\n",
             (unsigned long long)after.inference_count);
    RS_CHECK(r.status == 200 && strstr(r.body, line), "metrics lack '%s'", line);
    snprintf(line, sizeof line, "nv_inference_request_failure{model=\"m\",version=\"1\"} %llu\n",
             (unsigned long long)after.fail.count);
    RS_CHECK(strstr(r.body, line) && after.fail.count >= 5, "metrics lack '%s'", line);
    rs_serve_stats_clear(&after);
    free(r.raw);
}

/* Unload, index, load, infer again. */
static void check_model_control(int port, const float *x, const float *want)
{
    resp r;
    float y[3 * NOUT];
    post(port, "/v2/repository/models/m/unload", "", &r);
    RS_CHECK(r.status == 200, "unload %d %s", r.status, r.body);
    free(r.raw);
    RS_CHECK(post_error(port, "/v2/models/m/infer", "{}", 400, "unknown model"), "infer after unload");
    post(port, "/v2/repository/index", "", &r);
    RS_CHECK(r.status == 200 && strstr(r.body, "\"UNAVAILABLE\""), "index %s", r.body);
    free(r.raw);
    post(port, "/v2/repository/models/m/load", "", &r);
    RS_CHECK(r.status == 200, "load %d %s", r.status, r.body);
    free(r.raw);
    RS_CHECK(infer_json(port, "m", x, 3, y) && max_diff_ok(y, want, 3 * NOUT), "infer after load");
}

int main(void)
{
    char repo[] = "/tmp/rs-serve-test-XXXXXX";
    if (!mkdtemp(repo)) RS_SKIP("no temporary folder");
    rs_err e = {0};
    RS_CHECK(rs_model_parse("mlp 6-16-4 act=tanh", "m", rs_device_cpu(), NULL, 7, &ref, NULL, &e) == RS_OK, "%s", e.msg);
    if (!ref) return rs_test_finish("serve-http");
    rs_model_set_training(ref, false);
    write_repo(repo);

    rs_serve_opts o;
    rs_serve_opts_init(&o);
    o.repo = repo;
    o.body_limit = 1 << 16;
    o.control = RS_SERVE_CONTROL_EXPLICIT; /* load and unload below; every model at start */
    static const char *const every[] = {"*"};
    o.load_models = every;
    o.nload_models = 1;
    rs_serve_server *s = NULL;
    RS_CHECK(rs_serve_start(&o, &s, &e) == RS_OK, "%s", e.msg);
    if (!s) return rs_test_finish("serve-http");
    int port = rs_serve_http_port(s);
    resp r;
    RS_CHECK(http(port, "GET /v2/health/live HTTP/1.1", NULL, 0, &r) == 200, "live %d", r.status);
    free(r.raw);
    RS_CHECK(http(port, "GET /v2/models/m/ready HTTP/1.1", NULL, 0, &r) == 200, "ready %d", r.status);
    free(r.raw);
    check_config_dims(port);

    /* JSON and binary infer against the model run here. */
    float x[3 * NIN], y[3 * NOUT], want[3 * NOUT];
    for (int i = 0; i < 3 * NIN; i++) x[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
    reference(x, 3, want);
    RS_CHECK(infer_json(port, "m", x, 3, y) && max_diff_ok(y, want, 3 * NOUT), "JSON infer differs: %g vs %g", y[0],
             want[0]);
    check_binary_infer(port, x, want);
    check_bad_requests(port);
    check_body_cap(port);
    check_concurrent(s, port);
    check_full_queue(s, port, x, want);
    check_metrics(s, rs_serve_metrics_port(s));

    /* A second server in the same process answers on its own port. */
    rs_serve_server *s2 = NULL;
    RS_CHECK(rs_serve_start(&o, &s2, &e) == RS_OK, "%s", e.msg);
    if (s2) {
        RS_CHECK(rs_serve_http_port(s2) != port && infer_json(rs_serve_http_port(s2), "m", x, 3, y) &&
                     max_diff_ok(y, want, 3 * NOUT), "second server");
        rs_serve_stop(s2);
    }
    check_model_control(port, x, want);

    rs_serve_stop(s);
    rs_model_free(ref);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", repo);
    if (system(cmd)) {}
    return rs_test_finish("serve-http");
}
