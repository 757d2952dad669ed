/* The HTTP/REST front end (KServe v2 with Triton's extensions) on libmicrohttpd: one thread per
 * connection, so a request waiting for its batch (or a generation streaming its tokens) blocks only
 * its own connection. The threads are as many as the connections, which http_guard.c bounds (in
 * all and per client address) and times out (a request's headers and body have request-timeout
 * seconds, however slowly they trickle), so slow or silent clients cannot lock the others out. Bodies are
 * collected up to the cap; past it the request gets an error and the rest is not kept. The same
 * daemon type serves the metrics port, where only GET /metrics exists. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http_guard.h"
#include "http_internal.h"
#include "repo.h"

struct rs_serve_http {
    struct MHD_Daemon *d;
    rs_serve_http_guard *guard; /* owned */
    rs_serve_server *s;   /* borrowed */
    bool metrics;
    size_t cap;
    int port;
    int active;           /* requests begun and not yet answered (atomic) */
};

typedef struct conn {
    char *buf;            /* owned: the body so far */
    size_t n, cap;
    bool too_big;
} conn;

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    ssize_t n = rs_serve_sse_read(cls, buf, max);
    return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void sse_free(void *cls) { rs_serve_sse_free(cls); }

static void reply_send(struct MHD_Connection *c, rs_serve_reply *r)
{
    if (r->sse) { /* events as they come: with a thread per connection, the reader may block */
        rs_serve_sse *x = r->sse;
        r->sse = NULL;
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, x, sse_free);
        if (!resp) {
            rs_serve_sse_free(x);
            return;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_queue_response(c, (unsigned)r->status, resp);
        MHD_destroy_response(resp);
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(r->len, r->body ? r->body : (void *)"",
                                                                r->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    r->body = NULL; /* the response owns it now */
    if (!resp) return;
    if (r->type) MHD_add_response_header(resp, "Content-Type", r->type);
    if (r->header_len >= 0) {
        char b[32];
        snprintf(b, sizeof b, "%lld", r->header_len);
        MHD_add_response_header(resp, "Inference-Header-Content-Length", b);
    }
    MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
}

static void reply_empty(rs_serve_reply *r, int status)
{
    r->status = status;
    r->body = NULL;
    r->len = 0;
    r->type = NULL;
    r->header_len = -1;
}

/* Splits path into at most max segments (in place); returns how many. strtok_r: connections run on
 * threads of their own, and strtok's one hidden cursor would be shared by all of them. */
static int split(char *path, char **seg, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(path, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
        if (n == max) return max + 1;
        seg[n++] = p;
    }
    return n;
}

static void stats_all(rs_serve_server *s, const char *name, const char *ver, rs_serve_reply *r);

typedef struct stats_ctx {
    json_t *arr;
    const char *name, *ver;
} stats_ctx;

static void stats_one(void *ud, const rs_serve_model *m, const rs_serve_version *v, const rs_serve_stats *st)
{
    stats_ctx *x = ud;
    if (x->name && strcmp(x->name, m->cfg.name)) return;
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v->version);
    if (x->ver && *x->ver && strcmp(x->ver, b)) return;
    json_array_append_new(x->arr, rs_serve_json_stats(m, v, st));
}

static void stats_all(rs_serve_server *s, const char *name, const char *ver, rs_serve_reply *r)
{
    stats_ctx x = {json_array(), name, ver};
    rs_serve_each(s, stats_one, &x);
    rs_serve_reply_json(r, 200, json_pack("{s:o}", "model_stats", x.arr));
}

static bool is_get(const char *method) { return !strcmp(method, "GET") || !strcmp(method, "HEAD"); }

static void route_model(rs_serve_server *s, const char *method, char **seg, int n, const conn *b, long long hlen,
                        rs_serve_reply *r)
{
    /* seg: models NAME [versions V] [ready|config|stats|infer] */
    const char *name = seg[1], *ver = NULL, *what = "";
    int k = 2;
    if (n >= 4 && !strcmp(seg[2], "versions")) {
        ver = seg[3];
        k = 4;
    }
    if (!rs_serve_name_ok(name)) {
        rs_serve_reply_error(r, 400, "'%.60s' is not a model name (letters, digits, '_', '-', '.'; not starting "
                             "with '.')", name);
        return;
    }
    if (n > k + 1) {
        rs_serve_reply_error(r, 404, "not found");
        return;
    }
    if (n == k + 1) what = seg[k];
    bool reads = !*what || !strcmp(what, "ready") || !strcmp(what, "config") || !strcmp(what, "stats");
    if (reads && !is_get(method)) { /* Triton's answer to DELETE /v2/models/NAME and the like */
        rs_serve_reply_error(r, 405, "Method Not Allowed");
        return;
    }
    if (!strcmp(what, "stats")) {
        rs_serve_model *m = rs_serve_acquire(s, name);
        if (!m) {
            rs_serve_reply_error(r, 400, "requested model '%s' is not available", name);
            return;
        }
        rs_serve_release(s, m);
        stats_all(s, name, ver, r);
        return;
    }
    rs_serve_model *m = rs_serve_acquire(s, name);
    rs_serve_version *v = m ? rs_serve_model_version(m, ver) : NULL;
    if (!strcmp(what, "ready")) {
        reply_empty(r, v ? 200 : 400);
    } else if (!v) {
        if (m) rs_serve_reply_error(r, 400, "Request for unknown model: '%s' version %s is not found", name, ver);
        else rs_serve_reply_error(r, 400, "Request for unknown model: '%s' is not found", name);
    } else if (!strcmp(what, "")) {
        rs_serve_reply_json(r, 200, rs_serve_json_model_metadata(m));
    } else if (!strcmp(what, "config")) {
        rs_serve_reply_json(r, 200, rs_serve_json_model_config(m));
    } else if (!strcmp(what, "infer")) {
        if (strcmp(method, "POST")) rs_serve_reply_error(r, 405, "infer takes POST");
        else if (rs_serve_backend_generates(v->backend))
            rs_serve_reply_error(r, 400, "model '%s' is decoupled (it generates text): POST to generate or "
                                 "generate_stream", name);
        else rs_serve_infer(m, v, b->buf ? b->buf : "", b->n, hlen, r);
    } else if (!strcmp(what, "generate") || !strcmp(what, "generate_stream")) {
        if (strcmp(method, "POST")) rs_serve_reply_error(r, 405, "%s takes POST", what);
        else if (!strcmp(what, "generate")) rs_serve_generate(m, v, b->buf ? b->buf : "", b->n, r);
        else rs_serve_generate_stream(s, m, v, b->buf ? b->buf : "", b->n, r);
    } else {
        rs_serve_reply_error(r, 404, "no such endpoint: '%s' (ready, config, stats, infer, generate, "
                             "generate_stream)", what);
    }
    rs_serve_release(s, m);
}

static void route_repo(rs_serve_server *s, char **seg, int n, rs_serve_reply *r)
{
    /* seg: repository index | repository models NAME load|unload */
    if (n == 2 && !strcmp(seg[1], "index")) {
        rs_serve_index_entry *e;
        int ne;
        rs_err err = {0};
        if (rs_serve_index(s, &e, &ne, &err)) {
            rs_serve_reply_error(r, 500, "%s", err.msg);
            return;
        }
        json_t *a = json_array();
        for (int i = 0; i < ne; i++) {
            json_t *o = json_pack("{s:s,s:s}", "name", e[i].name, "state", e[i].state);
            if (e[i].version) {
                char b[32];
                snprintf(b, sizeof b, "%lld", (long long)e[i].version);
                json_object_set_new(o, "version", json_string(b));
            }
            if (e[i].reason[0]) json_object_set_new(o, "reason", json_string(e[i].reason));
            json_array_append_new(a, o);
        }
        free(e);
        rs_serve_reply_json(r, 200, a);
        return;
    }
    if (n >= 3 && !strcmp(seg[1], "models") && !rs_serve_name_ok(seg[2])) {
        rs_serve_reply_error(r, 400, "'%.60s' is not a model name (letters, digits, '_', '-', '.'; not starting "
                             "with '.')", seg[2]);
        return;
    }
    if (n == 4 && !strcmp(seg[1], "models") && (!strcmp(seg[3], "load") || !strcmp(seg[3], "unload"))) {
        const char *name = seg[2];
        if (!rs_serve_control_explicit(s)) {
            rs_serve_reply_error(r, 503, RS_SERVE_CONTROL_REFUSAL);
            return;
        }
        rs_err err = {0};
        bool load = !strcmp(seg[3], "load");
        rs_status st = load ? rs_serve_load(s, name, &err) : rs_serve_unload(s, name, &err);
        if (st) rs_serve_reply_error(r, 400, "failed to %s '%s': %s", load ? "load" : "unload", name, err.msg);
        else rs_serve_reply_json(r, 200, json_object());
        return;
    }
    rs_serve_reply_error(r, 404, "not found");
}

static void route(rs_serve_http *h, const char *url, const char *method, const conn *b, long long hlen,
                  rs_serve_reply *r)
{
    char path[2048];
    if (strlen(url) >= sizeof path) {
        rs_serve_reply_error(r, 400, "URL too long");
        return;
    }
    snprintf(path, sizeof path, "%s", url);
    char *seg[8];
    int n = split(path, seg, 7);
    if (h->metrics) {
        if (n == 1 && !strcmp(seg[0], "metrics")) {
            char *t = rs_serve_metrics_text(h->s);
            r->status = t ? 200 : 500;
            r->body = t;
            r->len = t ? strlen(t) : 0;
            r->type = "text/plain; version=0.0.4; charset=utf-8";
            r->header_len = -1;
        } else rs_serve_reply_error(r, 404, "not found (the metrics port serves /metrics)");
        return;
    }
    if (n < 1 || strcmp(seg[0], "v2")) {
        rs_serve_reply_error(r, 404, "not found (KServe v2 paths start with /v2)");
        return;
    }
    bool reads = n == 1 || (n == 3 && (!strcmp(seg[1], "health") || (!strcmp(seg[1], "models") &&
                                                                        !strcmp(seg[2], "stats"))));
    if (reads && !is_get(method)) {
        rs_serve_reply_error(r, 405, "Method Not Allowed");
    } else if (n == 1) {
        rs_serve_reply_json(r, 200, json_pack("{s:s,s:s,s:[s,s,s,s,s]}", "name", "ringside", "version", RS_SERVE_VERSION,
                                              "extensions", "binary_tensor_data", "model_repository",
                                              "model_configuration", "statistics", "generate"));
    } else if (n == 3 && !strcmp(seg[1], "health") && (!strcmp(seg[2], "live") || !strcmp(seg[2], "ready"))) {
        /* not ready while a model is down for a rank it lost (Triton answers 400 when not ready) */
        reply_empty(r, !strcmp(seg[2], "live") || rs_serve_ready(h->s) ? 200 : 400);
    } else if (n == 3 && !strcmp(seg[1], "models") && !strcmp(seg[2], "stats")) {
        stats_all(h->s, NULL, NULL, r);
    } else if (n >= 3 && !strcmp(seg[1], "models")) {
        route_model(h->s, method, seg + 1, n - 1, b, hlen, r);
    } else if (n >= 3 && !strcmp(seg[1], "repository")) {
        if (strcmp(method, "POST")) rs_serve_reply_error(r, 405, "repository requests take POST");
        else route_repo(h->s, seg + 1, n - 1, r);
    } else {
        rs_serve_reply_error(r, 404, "not found");
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ctx)
{
    (void)version;
    rs_serve_http *h = cls;
    conn *b = *ctx;
    if (!b) {
        b = calloc(1, sizeof *b); /* freed in on_done */
        if (!b) return MHD_NO;
        *ctx = b;
        __atomic_add_fetch(&h->active, 1, __ATOMIC_SEQ_CST);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > h->cap) {
            /* Answered before the body is read; MHD then closes the connection. */
            rs_serve_reply r = {0};
            rs_serve_reply_error(&r, 400, "request body of %s bytes exceeds the %zu-byte limit", cl, h->cap);
            b->too_big = true;
            reply_send(c, &r);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!b->too_big && b->n + *upload_size > h->cap) {
            b->too_big = true;
            free(b->buf);
            b->buf = NULL;
            b->n = b->cap = 0;
        }
        if (!b->too_big) {
            if (b->n + *upload_size > b->cap) {
                size_t nc = b->cap ? b->cap : 4096;
                while (nc < b->n + *upload_size) nc *= 2;
                if (nc > h->cap) nc = h->cap;
                char *nb = realloc(b->buf, nc);
                if (!nb) return MHD_NO;
                b->buf = nb;
                b->cap = nc;
            }
            memcpy(b->buf + b->n, upload, *upload_size);
            b->n += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    rs_serve_http_guard_busy(c, true); /* arrived whole: no deadline while it is answered */
    rs_serve_reply r = {0};
    if (b->too_big) {
        if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length") &&
            strtoull(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length"), NULL, 10) > h->cap)
            return MHD_YES; /* already answered */
        rs_serve_reply_error(&r, 400, "request body exceeds the %zu-byte limit", h->cap);
    } else {
        const char *hl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
        long long hlen = -1;
        if (hl) {
            char *end;
            hlen = strtoll(hl, &end, 10);
            if (*end || hlen < 0) hlen = (long long)b->n + 1; /* reported as larger than the body */
        }
        route(h, url, method, b, hlen, &r);
    }
    reply_send(c, &r);
    free(r.body);
    return MHD_YES;
}

static void on_done(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode tc)
{
    (void)tc;
    rs_serve_http *h = cls;
    conn *b = *ctx;
    rs_serve_http_guard_busy(c, false); /* the next request's time starts now */
    if (!b) return;
    __atomic_sub_fetch(&h->active, 1, __ATOMIC_SEQ_CST);
    free(b->buf);
    free(b);
    *ctx = NULL;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* libmicrohttpd's %HH decoding, but "%00" is left as it is: decoded, it would end the path there, and
 * /v2/models/mlp%00x would be read as mlp's (now a name that fails rs_serve_name_ok). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls, (void)c;
    char *w = s;
    for (const char *r = s; *r;) {
        int hi = r[0] == '%' ? hexval(r[1]) : -1, lo = hi >= 0 ? hexval(r[2]) : -1;
        if (lo >= 0 && (hi | lo)) {
            *w++ = (char)(hi << 4 | lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

rs_status rs_serve_http_start(rs_serve_server *s, const char *host, int port, bool metrics, size_t body_limit,
                              rs_serve_http **out, rs_err *err)
{
    *out = NULL;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (port < 0 || port > 65535) return rs_err_set(err, RS_ERR_ARG, "port %d is not 0..65535", port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return rs_err_set(err, RS_ERR_ARG, "host '%s' is not an IPv4 address (127.0.0.1, 0.0.0.0 for every interface)",
                          host);
    rs_serve_http *h = calloc(1, sizeof *h); /* the caller's */
    if (!h) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    h->s = s;
    h->metrics = metrics;
    h->cap = body_limit;
    rs_status st = rs_serve_http_guard_new(s, RS_SERVE_FE_HTTP, &h->guard, err);
    if (st) {
        free(h);
        return st;
    }
    const rs_serve_limits *l = rs_serve_limits_of(s);
    /* The guard refuses past the limits at accept; MHD's own cap sits above it, never reached first. */
    h->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC,
                            (uint16_t)port, rs_serve_http_guard_accept, h->guard, on_request, h, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&a, MHD_OPTION_NOTIFY_COMPLETED, on_done, h,
                            MHD_OPTION_NOTIFY_CONNECTION, rs_serve_http_guard_notify, h->guard,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)l->max_conns + 16, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)l->idle_s, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
    if (!h->d) {
        rs_serve_http_guard_free(h->guard);
        free(h);
        return rs_err_set(err, RS_ERR_IO, "cannot listen on %s:%d (in use? --%s-port picks another)", host, port,
                          metrics ? "metrics" : "http");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    *out = h;
    return RS_OK;
}

int rs_serve_http_bound_port(const rs_serve_http *h) { return h->port; }

void rs_serve_http_stop(rs_serve_http *h)
{
    if (!h) return;
    /* Drain: stop accepting, let every request begun get its answer (MHD_stop_daemon alone would
     * close their sockets), then stop. */
    MHD_socket lfd = MHD_quiesce_daemon(h->d); /* the listening socket is ours to close now */
    for (int i = 0; i < 60000 && __atomic_load_n(&h->active, __ATOMIC_SEQ_CST) > 0; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(h->d);
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    rs_serve_http_guard_free(h->guard);
    free(h);
}
