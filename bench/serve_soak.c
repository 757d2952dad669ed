/* The soak client (bench/soak.sh runs it once a minute): CONCURRENCY threads, each with one keep-alive
 * HTTP connection, send binary KServe v2 infer requests of one sample for SECONDS and check every
 * answer against the same model file run here through serve/'s backend, one sample at a time:
 * |served - here| <= 1e-5 * max(1, max |here|) (the plan tests' fp32 tolerance; batching may sum in
 * another order). 16 inputs take turns, so a mixed-up answer (another request's output) is caught.
 * Prints one line: requests, wrong answers, errors (status not 200, a broken connection, a short
 * reply) and requests/s. Exit status 1 when any answer was wrong or failed.
 *   serve_soak PORT MODEL FILE(.plan|.onnx) CONCURRENCY SECONDS */
#include <arpa/inet.h>
#include <math.h>
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

#define NX 16

typedef struct job {
    int port;
    const char *model;
    double seconds;
    size_t numel, out_numel;
    char dims[64];
    const float *x, *want; /* (NX, numel), (NX, out_numel): shared, read only */
    int id;
    unsigned long n, wrong, errors;
} job;

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One whole response into buf (headers and body); the status, *body and *blen, or -1. */
static int read_whole(int fd, char *buf, size_t cap, char **body, size_t *blen)
{
    size_t n = 0;
    char *end = NULL;
    while (!end) {
        if (n + 1 >= cap) return -1;
        ssize_t k = read(fd, buf + n, cap - n - 1);
        if (k <= 0) return -1;
        n += (size_t)k;
        buf[n] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    const char *cl = strstr(buf, "\r\nContent-Length:"); /* not Inference-Header-Content-Length */
    size_t want = cl ? strtoul(cl + 17, NULL, 10) : 0, at = (size_t)(end + 4 - buf);
    if (at + want + 1 > cap) return -1;
    while (n < at + want) {
        ssize_t k = read(fd, buf + n, at + want - n);
        if (k <= 0) return -1;
        n += (size_t)k;
    }
    *body = buf + at;
    *blen = want;
    int status = 0;
    sscanf(buf, "HTTP/1.1 %d", &status);
    return status;
}

static void *work(void *arg)
{
    job *j = arg;
    int fd = connect_to(j->port);
    if (fd < 0) {
        j->errors++;
        return NULL;
    }
    char hdr[512];
    int hl = snprintf(hdr, sizeof hdr,
                      "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,%s],\"parameters\":"
                      "{\"binary_data_size\":%zu}}],\"parameters\":{\"binary_data_output\":true}}",
                      j->dims, j->numel * 4);
    size_t cap = 1024 + j->numel * 4;
    char *req = malloc(cap), *buf = malloc(1 << 16); /* owned here */
    uint64_t t_end = rs_serve_now_ns() + (uint64_t)(j->seconds * 1e9);
    for (unsigned long it = 0; rs_serve_now_ns() < t_end; it++) {
        int k = (int)((it + (unsigned long)j->id) % NX);
        int rl = snprintf(req, 1024,
                          "POST /v2/models/%s/infer HTTP/1.1\r\nHost: b\r\nContent-Length: %zu\r\n"
                          "Inference-Header-Content-Length: %d\r\n\r\n%s",
                          j->model, (size_t)hl + j->numel * 4, hl, hdr);
        memcpy(req + rl, j->x + (size_t)k * j->numel, j->numel * 4);
        size_t total = (size_t)rl + j->numel * 4;
        char *body;
        size_t blen;
        if (write(fd, req, total) != (ssize_t)total || read_whole(fd, buf, 1 << 16, &body, &blen) != 200 ||
            blen < j->out_numel * 4) {
            j->errors++;
            close(fd);
            if ((fd = connect_to(j->port)) < 0) break;
            continue;
        }
        j->n++;
        /* the output tensor is the body's last out_numel floats (after the JSON header) */
        float y[256];
        size_t on = j->out_numel < 256 ? j->out_numel : 256;
        memcpy(y, body + blen - j->out_numel * 4, on * 4);
        const float *w = j->want + (size_t)k * j->out_numel;
        double m = 1, d = 0;
        for (size_t i = 0; i < on; i++) {
            if (fabs(w[i]) > m) m = fabs(w[i]);
            if (!(fabs((double)y[i] - w[i]) <= d)) d = fabs((double)y[i] - w[i]);
        }
        if (!(d <= 1e-5 * m) && j->wrong++ == 0 && j->id == 0)
            fprintf(stderr, "serve_soak: input %d: got %g %g ..., want %g %g ... (off by %.3g)\n", k, y[0], y[1], w[0],
                    w[1], d);
    }
    if (fd >= 0) close(fd);
    free(req);
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: serve_soak PORT MODEL FILE(.plan|.onnx) CONCURRENCY SECONDS\n");
        return 2;
    }
    int port = atoi(argv[1]), conc = atoi(argv[4]);
    double seconds = atof(argv[5]);
    if (conc < 1 || conc > 1024 || !(seconds > 0)) {
        fprintf(stderr, "serve_soak: CONCURRENCY 1..1024, SECONDS > 0\n");
        return 2;
    }
    rs_serve_backend *b;
    rs_serve_inst *in;
    rs_err e = {0};
    if (rs_serve_backend_load(argv[3], &b, &e) || rs_serve_inst_new(b, 1, &in, &e)) {
        fprintf(stderr, "serve_soak: %s\n", e.msg);
        return 1;
    }
    rs_serve_io io, oo;
    rs_serve_backend_io(b, &io, &oo);
    size_t ni = 1, no = 1;
    char dims[64] = "";
    for (int d = 0; d < io.rank; d++) {
        ni *= (size_t)io.dims[d];
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? "," : "", (long long)io.dims[d]);
    }
    for (int d = 0; d < oo.rank; d++) no *= (size_t)oo.dims[d];
    float *x = malloc(NX * ni * sizeof *x), *want = malloc(NX * no * sizeof *want); /* owned here */
    uint32_t s = 12345;
    for (size_t i = 0; i < NX * ni; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / (float)(1u << 24);
    }
    for (int k = 0; k < NX; k++)
        if (rs_serve_inst_run(in, x + (size_t)k * ni, 1, want + (size_t)k * no, &e)) {
            fprintf(stderr, "serve_soak: %s\n", e.msg);
            return 1;
        }
    rs_serve_inst_free(in);
    rs_serve_backend_free(b);
    job *jobs = calloc((size_t)conc, sizeof *jobs);
    pthread_t *th = calloc((size_t)conc, sizeof *th);
    uint64_t t0 = rs_serve_now_ns();
    for (int i = 0; i < conc; i++) {
        jobs[i] = (job){.port = port, .model = argv[2], .seconds = seconds, .numel = ni, .out_numel = no, .x = x,
                        .want = want, .id = i};
        snprintf(jobs[i].dims, sizeof jobs[i].dims, "%s", dims);
        pthread_create(&th[i], NULL, work, &jobs[i]);
    }
    unsigned long n = 0, wrong = 0, errors = 0;
    for (int i = 0; i < conc; i++) {
        pthread_join(th[i], NULL);
        n += jobs[i].n;
        wrong += jobs[i].wrong;
        errors += jobs[i].errors;
    }
    double el = (double)(rs_serve_now_ns() - t0) / 1e9;
    printf("%lu answers checked, %lu wrong, %lu errors, %.0f requests/s\n", n, wrong, errors, (double)n / el);
    free(jobs);
    free(th);
    free(x);
    free(want);
    return wrong || errors ? 1 : 0;
}
