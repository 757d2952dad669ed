/* Load generator for `ringside serve`: C threads, each with one keep-alive connection, send binary
 * KServe v2 infer requests of one sample and time each; prints requests/s, p50 and p99. With
 * --inproc it runs the same ONNX file in this process through serve/'s backend instead (batch 1
 * latency, and batch-64 throughput), the figure the HTTP numbers are compared with.
 *   serve_load PORT MODEL DIMS CONCURRENCY SECONDS     (DIMS: one sample's shape, e.g. 1x28x28, of the
 *                                                      FP32 input "input"; or the inputs as
 *                                                      NAME:TYPE:DIMS,... e.g. ids:INT64:16,mask:INT64:16)
 *   serve_load --inproc FILE.onnx|FILE.plan SECONDS [THREADS [BATCH]]   (any inputs of fixed-size types) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve/backend.h"
#include "serve/sched.h"

typedef struct worker {
    int port, numel;
    const char *model, *dims; /* "1,28,28" */
    const char *typed;        /* NAME:TYPE:DIMS,...; NULL: the one FP32 input */
    double seconds;
    uint64_t *lat; /* ns per request, owned */
    size_t n, cap;
    int errors;
} worker;

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads one response (headers, then Content-Length bytes); returns the status or -1. */
static int read_response(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    char *end = NULL;
    while (!end) {
        ssize_t k = read(fd, buf + n, cap - n - 1);
        if (k <= 0) return -1;
        n += (size_t)k;
        buf[n] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    const char *cl = strstr(buf, "\r\nContent-Length:"); /* not Inference-Header-Content-Length */
    size_t body = cl ? strtoul(cl + 17, NULL, 10) : 0, have = n - (size_t)(end + 4 - buf);
    while (have < body) {
        ssize_t k = read(fd, buf, cap - 1 < body - have ? cap - 1 : body - have);
        if (k <= 0) return -1;
        have += (size_t)k;
    }
    int status = 0;
    sscanf(buf, "HTTP/1.1 %d", &status);
    return status;
}

/* The request's JSON header: the one FP32 input "input" of shape [1, dims], or each NAME:TYPE:DIMS of
 * w->typed; *data gets the binary bytes that follow. */
static int typed_header(const worker *w, char *hdr, size_t cap, size_t *data)
{
    if (!w->typed) {
        *data = (size_t)w->numel * 4;
        return snprintf(hdr, cap, "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,%s],"
                        "\"parameters\":{\"binary_data_size\":%zu}}],\"parameters\":{\"binary_data_output\":true}}",
                        w->dims, *data);
    }
    char spec[512];
    snprintf(spec, sizeof spec, "%s", w->typed);
    size_t k = (size_t)snprintf(hdr, cap, "{\"inputs\":[");
    *data = 0;
    char *save = NULL;
    for (char *e = strtok_r(spec, ",", &save); e && k < cap; e = strtok_r(NULL, ",", &save)) {
        char name[64], type[16], dims[64];
        if (sscanf(e, "%63[^:]:%15[^:]:%63s", name, type, dims) != 3) return -1;
        size_t n = 1, sz = rs_serve_dtype_size(rs_serve_dtype_from_v2(type));
        if (!sz) return -1;
        for (char *d = dims; *d; d++) {
            if (*d == 'x') *d = ',';
        }
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%s", dims);
        char *s2 = NULL;
        for (char *p = strtok_r(tmp, ",", &s2); p; p = strtok_r(NULL, ",", &s2)) n *= (size_t)atoi(p);
        k += (size_t)snprintf(hdr + k, cap - k, "%s{\"name\":\"%s\",\"datatype\":\"%s\",\"shape\":[1,%s],"
                              "\"parameters\":{\"binary_data_size\":%zu}}", *data ? "," : "", name, type, dims, n * sz);
        *data += n * sz;
    }
    k += (size_t)snprintf(hdr + k, cap - k, "],\"parameters\":{\"binary_data_output\":true}}");
    return k < cap ? (int)k : -1;
}

static void *work(void *arg)
{
    worker *w = arg;
    int fd = connect_to(w->port);
    if (fd < 0) {
        w->errors++;
        return NULL;
    }
    char hdr[2048], req[16384];
    size_t data = 0;
    int hl = typed_header(w, hdr, sizeof hdr, &data);
    if (hl < 0) {
        w->errors++;
        close(fd);
        return NULL;
    }
    size_t body = (size_t)hl + data;
    int rl = snprintf(req, sizeof req,
                      "POST /v2/models/%s/infer HTTP/1.1\r\nHost: b\r\nContent-Length: %zu\r\n"
                      "Inference-Header-Content-Length: %d\r\n\r\n%s",
                      w->model, body, hl, hdr);
    if ((size_t)rl + data > sizeof req) {
        w->errors++;
        close(fd);
        return NULL;
    }
    float *x = calloc(data / 4 + 1, sizeof *x); /* FP32 inputs get small values, integer ones small ids */
    for (size_t i = 0; i < data / 4; i++) x[i] = w->typed ? 0.0f : (float)(i % 7) / 7.0f;
    memcpy(req + rl, x, data);
    size_t total = (size_t)rl + data;
    static __thread char buf[1 << 16];
    uint64_t t_end = rs_serve_now_ns() + (uint64_t)(w->seconds * 1e9);
    while (rs_serve_now_ns() < t_end) {
        uint64_t t0 = rs_serve_now_ns();
        if (write(fd, req, total) != (ssize_t)total || read_response(fd, buf, sizeof buf) != 200) {
            w->errors++;
            close(fd);
            if ((fd = connect_to(w->port)) < 0) break;
            continue;
        }
        if (w->n == w->cap) w->lat = realloc(w->lat, (w->cap = w->cap ? 2 * w->cap : 4096) * sizeof *w->lat);
        w->lat[w->n++] = rs_serve_now_ns() - t0;
    }
    if (fd >= 0) close(fd);
    free(x);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One in-process runner: its own instance of the shared backend, batches of B for `seconds`. */
typedef struct runner {
    rs_serve_backend *b;
    int B;
    double seconds;
    size_t n;
    uint64_t *lat; /* (cap), owned */
    size_t cap;
} runner;

static void *run_inproc(void *arg)
{
    runner *r = arg;
    rs_serve_inst *in;
    rs_err e = {0};
    if (rs_serve_inst_new(r->b, 64, &in, &e)) return NULL;
    rs_serve_ios io;
    rs_serve_backend_ios(r->b, &io);
    rs_serve_tensor x[RS_SERVE_MAX_IO] = {{0}}, y[RS_SERVE_MAX_IO] = {{0}};
    for (int i = 0; i < io.nin; i++) { /* zeros: valid ids, valid floats */
        size_t n = (size_t)r->B;
        for (int d = 0; d < io.in[i].rank; d++) n *= (size_t)io.in[i].dims[d];
        x[i].bytes = rs_serve_dtype_bytes(io.in[i].dtype, n);
        x[i].data = calloc(x[i].bytes + 1, 1);
    }
    r->lat = malloc((r->cap = 1 << 20) * sizeof *r->lat);
    uint64_t t_end = rs_serve_now_ns() + (uint64_t)(r->seconds * 1e9);
    while (rs_serve_now_ns() < t_end && r->n < r->cap) {
        uint64_t t0 = rs_serve_now_ns();
        if (rs_serve_inst_run_tensors(in, x, r->B, y, &e)) { /* a failed run is no figure */
            fprintf(stderr, "serve_load: %s\n", e.msg);
            break;
        }
        for (int k = 0; k < io.nout; k++) free(y[k].data); /* the server frees its outputs too */
        r->lat[r->n++] = rs_serve_now_ns() - t0;
    }
    for (int i = 0; i < io.nin; i++) free(x[i].data);
    rs_serve_inst_free(in);
    return NULL;
}

static int cmp_u64(const void *a, const void *b);

/* As the server runs it: on threads (not main), one instance each. Batch 1 on one thread (latency),
 * then batch 64 on `threads` threads (the throughput the server's instances could reach); with
 * batch > 0, that batch on `threads` threads alone (what the server's instances run when every one
 * is busy with batches of that size). */
static int inproc(const char *file, double seconds, int threads, int batch)
{
    rs_serve_backend *b;
    rs_err e = {0};
    if (rs_serve_backend_load(file, &b, &e)) {
        fprintf(stderr, "serve_load: %s\n", e.msg);
        return 1;
    }
    if (threads < 1 || threads > 64 || batch < 0 || batch > 64) {
        fprintf(stderr, "serve_load: --inproc takes 1..64 threads and a batch of 0..64\n");
        rs_serve_backend_free(b);
        return 2;
    }
    for (int pass = batch ? 1 : 0; pass < 2; pass++) {
        int B = batch ? batch : pass ? 64 : 1, nt = pass ? threads : 1;
        runner r[64] = {{0}};
        pthread_t th[64];
        uint64_t t0 = rs_serve_now_ns();
        for (int i = 0; i < nt; i++) {
            r[i] = (runner){.b = b, .B = B, .seconds = seconds};
            pthread_create(&th[i], NULL, run_inproc, &r[i]);
        }
        size_t n = 0;
        for (int i = 0; i < nt; i++) {
            pthread_join(th[i], NULL);
            n += r[i].n;
        }
        double el = (double)(rs_serve_now_ns() - t0) / 1e9;
        uint64_t *all = malloc((n + 1) * sizeof *all);
        size_t k = 0;
        for (int i = 0; i < nt; i++) {
            memcpy(all + k, r[i].lat, r[i].n * sizeof *all);
            k += r[i].n;
            free(r[i].lat);
        }
        qsort(all, n, sizeof *all, cmp_u64);
        if (n)
            printf("in-process  batch %-3d x%d threads %10.0f samples/s   p50 %8.1f us   p99 %8.1f us\n", B, nt,
                   (double)n * B / el, all[n / 2] / 1e3, all[(size_t)(n * 0.99)] / 1e3);
        free(all);
    }
    rs_serve_backend_free(b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && argc <= 6 && !strcmp(argv[1], "--inproc"))
        return inproc(argv[2], atof(argv[3]), argc >= 5 ? atoi(argv[4]) : 1, argc == 6 ? atoi(argv[5]) : 0);
    if (argc != 6) {
        fprintf(stderr, "usage: serve_load PORT MODEL DIMS CONCURRENCY SECONDS | serve_load --inproc FILE.onnx|FILE.plan SECONDS [THREADS [BATCH]]\n");
        return 2;
    }
    static char dims[64];
    const char *typed = strchr(argv[3], ':') ? argv[3] : NULL;
    snprintf(dims, sizeof dims, "%s", argv[3]);
    int numel = 1;
    for (char *p = strtok(dims, "x"); p && !typed; p = strtok(NULL, "x")) numel *= atoi(p);
    snprintf(dims, sizeof dims, "%s", argv[3]);
    for (char *p = dims; *p; p++)
        if (*p == 'x') *p = ',';
    int port = atoi(argv[1]), conc = atoi(argv[4]);
    double seconds = atof(argv[5]);
    worker *w = calloc((size_t)conc, sizeof *w);
    pthread_t *th = calloc((size_t)conc, sizeof *th);
    uint64_t t0 = rs_serve_now_ns();
    for (int i = 0; i < conc; i++) {
        w[i] = (worker){.port = port, .numel = numel, .model = argv[2], .dims = dims, .typed = typed,
                        .seconds = seconds};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    size_t total = 0;
    int errors = 0;
    for (int i = 0; i < conc; i++) {
        pthread_join(th[i], NULL);
        total += w[i].n;
        errors += w[i].errors;
    }
    double el = (double)(rs_serve_now_ns() - t0) / 1e9;
    uint64_t *all = malloc((total + 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < conc; i++) {
        memcpy(all + k, w[i].lat, w[i].n * sizeof *all);
        k += w[i].n;
        free(w[i].lat);
    }
    qsort(all, total, sizeof *all, cmp_u64);
    if (total)
        printf("HTTP  concurrency %-3d %10.0f requests/s   p50 %8.1f us   p99 %8.1f us   errors %d\n", conc,
               (double)total / el, all[total / 2] / 1e3, all[(size_t)(total * 0.99)] / 1e3, errors);
    else printf("HTTP  concurrency %-3d no request succeeded (errors %d)\n", conc, errors);
    free(all);
    free(w);
    free(th);
    return errors ? 1 : 0;
}
