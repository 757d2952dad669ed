/* Load generator for `ringside serve`'s gRPC port: C threads, each with one HTTP/2 connection
 * (nghttp2's client), send ModelInfer requests of one sample (raw_input_contents, as tritonclient
 * does) and time each; prints requests/s, p50 and p99. --stream sends one ModelStreamInfer generation
 * per thread and counts the responses (one per token) as they arrive: tokens/s, and the time to the
 * first token.
 *   serve_grpc_load PORT MODEL DIMS CONCURRENCY SECONDS      (DIMS: one sample's shape, e.g. 1x28x28)
 *   serve_grpc_load --stream PORT MODEL TOKENS CONCURRENCY */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve/grpc_frame.h"
#include "serve/grpc_service.pb-c.h"
#include "serve/sched.h"

typedef struct worker {
    int port;
    const char *model;
    int64_t shape[9];
    int rank;
    size_t numel;
    double seconds;
    int tokens;               /* --stream: max_tokens */
    uint64_t *lat;            /* ns per request, owned */
    size_t n, cap;
    int errors;
    long got_tokens;          /* --stream */
    uint64_t first_ns, total_ns;
    /* the call in flight */
    int fd;
    nghttp2_session *h2;
    const uint8_t *req;
    size_t req_n, req_off;
    bool closed;
    int status;               /* grpc-status; -1 not seen */
    size_t body;              /* response bytes */
    uint8_t pend[8];          /* a message prefix split over DATA frames */
    size_t pend_n, skip;      /* bytes of the current message still to skip */
    uint64_t t0;
} worker;

/* Sends every frame nghttp2 has ready (a call's HEADERS and DATA) in one send(), as gRPC's own
 * clients write (grpc-core gathers a call's frames into one write): a frame per send() would wake the
 * server once per frame. */
static bool send_all(worker *w)
{
    uint8_t out[65536];
    size_t n = 0;
    for (;;) {
        const uint8_t *p;
        ssize_t k = nghttp2_session_mem_send(w->h2, &p);
        if (k < 0) return false;
        if (k > 0 && n + (size_t)k <= sizeof out) {
            memcpy(out + n, p, (size_t)k);
            n += (size_t)k;
            continue;
        }
        for (size_t off = 0; off < n;) {
            ssize_t r = send(w->fd, out + off, n - off, MSG_NOSIGNAL);
            if (r <= 0) return false;
            off += (size_t)r;
        }
        if (k == 0) return true;
        n = 0;
        for (size_t off = 0; off < (size_t)k;) { /* a frame larger than the buffer, as it is */
            ssize_t r = send(w->fd, p + off, (size_t)k - off, MSG_NOSIGNAL);
            if (r <= 0) return false;
            off += (size_t)r;
        }
    }
}

static ssize_t read_req(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *ud)
{
    (void)s, (void)id, (void)src;
    worker *w = ud;
    size_t n = w->req_n - w->req_off < len ? w->req_n - w->req_off : len;
    memcpy(buf, w->req + w->req_off, n);
    w->req_off += n;
    if (w->req_off == w->req_n) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* Counts whole messages in a stream of DATA bytes (each one token for --stream). */
static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t n, void *ud)
{
    (void)s, (void)flags, (void)id;
    worker *w = ud;
    w->body += n;
    while (n) {
        if (w->skip) {
            size_t k = w->skip < n ? w->skip : n;
            w->skip -= k, d += k, n -= k;
            continue;
        }
        w->pend[w->pend_n++] = *d++;
        n--;
        if (w->pend_n == 5) {
            w->skip = (size_t)w->pend[1] << 24 | (size_t)w->pend[2] << 16 | (size_t)w->pend[3] << 8 | w->pend[4];
            w->pend_n = 0;
            if (w->tokens) {
                if (!w->got_tokens) w->first_ns = rs_serve_now_ns() - w->t0;
                w->got_tokens++;
            }
        }
    }
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl, const uint8_t *v,
                     size_t vl, uint8_t flags, void *ud)
{
    (void)s, (void)f, (void)flags, (void)vl;
    worker *w = ud;
    if (nl == 11 && !memcmp(name, "grpc-status", 11)) w->status = atoi((const char *)v);
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    (void)s, (void)id, (void)code;
    ((worker *)ud)->closed = true;
    return 0;
}

static bool open_conn(worker *w)
{
    w->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(w->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)w->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(w->fd, (struct sockaddr *)&a, sizeof a)) return false;
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session_client_new(&w->h2, cb, w);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24}};
    nghttp2_submit_settings(w->h2, NGHTTP2_FLAG_NONE, iv, 1);
    return true;
}

/* One call, start to trailers. false: the connection failed. */
static bool one_call(worker *w, const char *path)
{
    const nghttp2_nv hd[] = {
        {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
        {(uint8_t *)":authority", (uint8_t *)"127.0.0.1", 10, 9, 0},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
        {(uint8_t *)"te", (uint8_t *)"trailers", 2, 8, 0},
    };
    nghttp2_data_provider dp = {.read_callback = read_req};
    w->req_off = 0;
    w->closed = false;
    w->status = -1;
    w->body = w->pend_n = w->skip = 0;
    w->t0 = rs_serve_now_ns();
    if (nghttp2_submit_request(w->h2, NULL, hd, sizeof hd / sizeof *hd, &dp, NULL) < 0) return false;
    uint8_t buf[65536];
    while (!w->closed) {
        if (!send_all(w)) return false;
        ssize_t r = recv(w->fd, buf, sizeof buf, 0);
        if (r <= 0 || nghttp2_session_mem_recv(w->h2, buf, (size_t)r) < 0) return false;
    }
    return send_all(w);
}

static uint8_t *pack_request(worker *w, size_t *n)
{
    Inference__ModelInferRequest q = INFERENCE__MODEL_INFER_REQUEST__INIT;
    Inference__ModelInferRequest__InferInputTensor t = INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT, *pt = &t;
    Inference__InferParameter pv[2] = {INFERENCE__INFER_PARAMETER__INIT, INFERENCE__INFER_PARAMETER__INIT};
    Inference__InferParameterEntry pe[2] = {INFERENCE__INFER_PARAMETER_ENTRY__INIT, INFERENCE__INFER_PARAMETER_ENTRY__INIT};
    Inference__InferParameterEntry *ppe[2] = {&pe[0], &pe[1]};
    float *x = calloc(w->numel, sizeof *x);
    uint8_t text[4 + 3] = {3, 0, 0, 0, 't', 'h', 'e'};
    ProtobufCBinaryData raw = {w->numel * sizeof *x, (uint8_t *)x};
    for (size_t i = 0; x && i < w->numel; i++) x[i] = (float)(i % 7) * 0.1f;
    q.model_name = (char *)w->model;
    q.n_inputs = 1;
    q.inputs = &pt;
    q.n_raw_input_contents = 1;
    q.raw_input_contents = &raw;
    t.name = "input";
    t.datatype = "FP32";
    t.n_shape = (size_t)w->rank;
    t.shape = w->shape;
    int64_t one = 1;
    if (w->tokens) {
        t.name = "text_input";
        t.datatype = "BYTES";
        t.n_shape = 1;
        t.shape = &one;
        raw.data = text;
        raw.len = sizeof text;
        pe[0].key = "max_tokens";
        pv[0].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
        pv[0].int64_param = w->tokens;
        pe[0].value = &pv[0];
        pe[1].key = "temperature";
        pv[1].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM;
        pv[1].double_param = 0.8;
        pe[1].value = &pv[1];
        q.n_parameters = 2;
        q.parameters = ppe;
    }
    size_t len = protobuf_c_message_get_packed_size(&q.base);
    uint8_t *b = malloc(len + 5); /* the caller's */
    if (b) {
        rs_grpc_frame_prefix(b, len);
        protobuf_c_message_pack(&q.base, b + 5);
    }
    free(x);
    *n = len + 5;
    return b;
}

static void *run(void *arg)
{
    worker *w = arg;
    size_t n;
    uint8_t *req = pack_request(w, &n);
    w->req = req;
    w->req_n = n;
    if (!req || !open_conn(w)) {
        w->errors++;
        free(req);
        return NULL;
    }
    if (w->tokens) {
        bool ok = one_call(w, "/inference.GRPCInferenceService/ModelStreamInfer");
        w->total_ns = rs_serve_now_ns() - w->t0;
        if (!ok || w->status != 0) w->errors++;
    } else {
        uint64_t end = rs_serve_now_ns() + (uint64_t)(w->seconds * 1e9);
        while (rs_serve_now_ns() < end) {
            bool ok = one_call(w, "/inference.GRPCInferenceService/ModelInfer");
            uint64_t ns = rs_serve_now_ns() - w->t0;
            if (!ok) {
                w->errors++;
                break;
            }
            if (w->status != 0 || w->body == 0) {
                w->errors++;
                continue;
            }
            if (w->n == w->cap) {
                w->cap = w->cap ? 2 * w->cap : 4096;
                uint64_t *nl = realloc(w->lat, w->cap * sizeof *nl);
                if (!nl) break;
                w->lat = nl;
            }
            w->lat[w->n++] = ns;
        }
    }
    nghttp2_session_del(w->h2);
    close(w->fd);
    free(req);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    bool stream = argc > 1 && !strcmp(argv[1], "--stream");
    if (argc != 6) {
        fprintf(stderr, "usage: serve_grpc_load PORT MODEL DIMS CONCURRENCY SECONDS | serve_grpc_load --stream PORT "
                        "MODEL TOKENS CONCURRENCY\n");
        return 2;
    }
    char **a = argv + (stream ? 2 : 1);
    int conc = atoi(stream ? a[3] : a[3]);
    if (conc < 1) conc = 1;
    worker *ws = calloc((size_t)conc, sizeof *ws);
    pthread_t *th = calloc((size_t)conc, sizeof *th);
    if (!ws || !th) return 1;
    for (int i = 0; i < conc; i++) {
        worker *w = &ws[i];
        w->port = atoi(a[0]);
        w->model = a[1];
        if (stream) w->tokens = atoi(a[2]);
        else {
            w->seconds = atof(a[4]);
            w->shape[w->rank++] = 1;
            w->numel = 1;
            for (char *p = a[2]; *p && w->rank < 9;) {
                long d = strtol(p, &p, 10);
                w->shape[w->rank++] = d;
                w->numel *= (size_t)d;
                if (*p == 'x') p++;
            }
        }
        pthread_create(&th[i], NULL, run, w);
    }
    for (int i = 0; i < conc; i++) pthread_join(th[i], NULL);
    int errors = 0;
    if (stream) {
        long tok = 0;
        double first = 0, slowest = 0;
        for (int i = 0; i < conc; i++) {
            errors += ws[i].errors;
            tok += ws[i].got_tokens;
            first += (double)ws[i].first_ns / conc;
            if ((double)ws[i].total_ns > slowest) slowest = (double)ws[i].total_ns;
        }
        printf("gRPC stream  concurrency %-3d %8ld tokens in %6.2f s: %8.0f tokens/s   first token %8.1f us   errors %d\n",
               conc, tok, slowest / 1e9, slowest > 0 ? (double)tok / (slowest / 1e9) : 0.0, first / 1e3, errors);
    } else {
        size_t total = 0;
        for (int i = 0; i < conc; i++) total += ws[i].n, errors += ws[i].errors;
        uint64_t *all = malloc((total + 1) * sizeof *all);
        size_t k = 0;
        for (int i = 0; i < conc && all; i++) {
            memcpy(all + k, ws[i].lat, ws[i].n * sizeof *all);
            k += ws[i].n;
        }
        if (all && total) {
            qsort(all, total, sizeof *all, cmp_u64);
            printf("gRPC  concurrency %-3d %10.0f requests/s   p50 %8.1f us   p99 %8.1f us   errors %d\n", conc,
                   (double)total / atof(a[4]), (double)all[total / 2] / 1e3, (double)all[total * 99 / 100] / 1e3,
                   errors);
        } else printf("gRPC  concurrency %-3d no request succeeded (errors %d)\n", conc, errors);
        free(all);
    }
    for (int i = 0; i < conc; i++) free(ws[i].lat);
    free(ws);
    free(th);
    return errors ? 1 : 0;
}
