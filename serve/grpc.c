/* The gRPC front end: inference.GRPCInferenceService over HTTP/2 (h2c, prior knowledge, as gRPC
 * clients speak it on a plain port) with nghttp2 doing the HTTP/2 and grpc_methods.c the methods.
 * This file holds the sockets, nghttp2's callbacks and the connection's threads; a call's life (its
 * messages, the worker pool, its responses) is grpc_call.c's, the structs both share grpc_conn.h's.
 *
 * Threads: one accepts, refusing past the server's limits (connections in all and per client
 * address); each connection has two (the second from its first call on) that take turns reading its
 * socket into its nghttp2 session, and closes when no call has begun or ended for `idle` seconds. A
 * connection with no call and nothing to send for a second parks: its threads end and its socket
 * waits in an epoll set the accept thread watches, which starts a reader again when bytes come (or
 * the idle time is up), so idle connections cost no thread (a thread is ~200 KB of the libraries'
 * TLS); a pool of workers runs the calls the reader does not, because a call blocks while its
 * request waits for a batch and many calls share one connection (a gRPC channel multiplexes every RPC
 * of a client on one). Each thread hand-off costs a wake-up, so a call's path has as few as HTTP's:
 * when a unary request is complete, the reader gives the socket to the connection's other thread (if
 * that one is idle) and runs the call itself; a second call meanwhile, and every stream, go to the
 * pool. Whoever ran a call sends its answer: the response is appended to the call's output under the
 * connection's lock (mu), then, under the session's lock (h2mu: nghttp2 is not thread-safe, so every
 * nghttp2 call is made under it; taken before mu, never after), handed to nghttp2 and written, a unary
 * call's HEADERS, DATA and trailers in one send(). What the socket does not take at once is left to
 * the reader (woken by the connection's pipe), which polls for POLLOUT.
 *
 * Lifetimes: a call belongs to its connection. When its stream closes (the client reset it or went
 * away) the call is marked closed; a worker still running it sees `cancelled` (a generation stops at
 * the next token) and frees it when it returns. A connection that ends waits for its calls' workers,
 * then frees everything but the connection itself, which goes when both its threads are joined, so a
 * client vanishing mid-stream leaves nothing behind. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "grpc_conn.h"

/* ---- nghttp2 callbacks (the reader, under h2mu) ---- */

static ssize_t read_out(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *ud)
{
    (void)ud;
    call *k = src->ptr;
    conn *c = k->c;
    pthread_mutex_lock(&c->mu);
    size_t avail = k->out_n - k->out_off, n = avail < len ? avail : len;
    if (n) memcpy(buf, k->out + k->out_off, n);
    k->out_off += n;
    if (k->out_off == k->out_n) k->out_off = k->out_n = 0;
    if (!n && !k->finished) {
        k->deferred = true;
        pthread_mutex_unlock(&c->mu);
        return NGHTTP2_ERR_DEFERRED;
    }
    if (k->finished && k->out_n == 0) {
        char status[16], enc[3 * sizeof k->errmsg];
        snprintf(status, sizeof status, "%d", (int)k->status);
        rs_grpc_percent_encode(k->errmsg, enc, sizeof enc);
        nghttp2_nv tr[2] = {
            {(uint8_t *)"grpc-status", (uint8_t *)status, 11, strlen(status), NGHTTP2_NV_FLAG_NONE},
            {(uint8_t *)"grpc-message", (uint8_t *)enc, 12, strlen(enc), NGHTTP2_NV_FLAG_NONE},
        };
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_submit_trailer(h2, id, tr, enc[0] ? 2 : 1);
    }
    pthread_mutex_unlock(&c->mu);
    return (ssize_t)n;
}

static void *conn_main1(void *arg);

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    conn *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    c->progress_ns = rs_serve_now_ns();
    if (!c->two) { /* the first call: the thread that runs a unary call while its sibling reads */
        pthread_mutex_lock(&c->mu);
        c->two = !pthread_create(&c->th[1], NULL, conn_main1, c);
        c->runner_busy = !c->two; /* without a second thread every call goes to the pool */
        pthread_mutex_unlock(&c->mu);
    }
    call *k = calloc(1, sizeof *k); /* the connection's (its list) */
    if (!k) return NGHTTP2_ERR_CALLBACK_FAILURE;
    k->c = c;
    k->id = f->hd.stream_id;
    k->method = RS_GRPC_NONE;
    k->begin_ns = c->progress_ns;
    pthread_mutex_lock(&c->mu);
    k->next = c->calls;
    if (c->calls) c->calls->prev = k;
    c->calls = k;
    pthread_mutex_unlock(&c->mu);
    nghttp2_session_set_stream_user_data(h2, k->id, k);
    return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name, size_t nl, const uint8_t *value,
                     size_t vl, uint8_t flags, void *ud)
{
    (void)flags, (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    call *k = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (!k) return 0;
    if (nl == 5 && !memcmp(name, ":path", 5)) {
        char path[128];
        snprintf(path, sizeof path, "%.*s", (int)(vl < 127 ? vl : 127), (const char *)value);
        k->method = vl < 127 ? rs_grpc_method_of(path) : RS_GRPC_NONE;
    } else if (nl == 12 && !memcmp(name, "content-type", 12)) {
        k->content_ok = vl >= 16 && !memcmp(value, "application/grpc", 16);
    }
    return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud)
{
    (void)flags, (void)ud;
    call *k = nghttp2_session_get_stream_user_data(h2, id);
    if (!k || k->in_err || k->method == RS_GRPC_NONE || !k->content_ok) return 0;
    pthread_mutex_lock(&k->c->mu);
    bool finished = k->finished; /* answered already (an error): what still comes is dropped */
    pthread_mutex_unlock(&k->c->mu);
    if (finished) return 0;
    if (k->in_n + len > k->in_cap) {
        size_t nc = k->in_cap ? k->in_cap : 4096;
        while (nc < k->in_n + len) nc *= 2;
        /* the message's length is in its 5-byte prefix: room for exactly the whole of it (under the cap,
         * which take_messages enforces), rather than a doubling past it */
        uint8_t pre[5];
        size_t have = k->in_n < 5 ? k->in_n : 5;
        if (have) memcpy(pre, k->in, have);
        if (have < 5 && len >= 5 - have) memcpy(pre + have, data, 5 - have);
        if (k->in_n + len >= 5) {
            size_t whole = 5 + ((size_t)pre[1] << 24 | (size_t)pre[2] << 16 | (size_t)pre[3] << 8 | pre[4]);
            if (whole >= k->in_n + len && whole < nc && whole <= k->c->g->cap + 5) nc = whole;
        }
        uint8_t *nb = realloc(k->in, nc);
        if (!nb) {
            pthread_mutex_lock(&k->c->mu);
            k->in_err = true;
            rs_grpc_finish_locked(k, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory for the request");
            pthread_mutex_unlock(&k->c->mu);
            return 0;
        }
        k->in = nb;
        k->in_cap = nc;
    }
    memcpy(k->in + k->in_n, data, len);
    k->in_n += len;
    rs_grpc_take_messages(k); /* a message over the cap is refused from its prefix, before its bytes pile up */
    return 0;
}

static int on_frame(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) return 0;
    call *k = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (!k) return 0;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
        pthread_mutex_lock(&k->c->mu);
        if (k->method == RS_GRPC_NONE)
            rs_grpc_finish_locked(k, RS_GRPC_UNIMPLEMENTED, "unknown method: inference.GRPCInferenceService serves ServerLive, "
                          "ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelConfig, ModelInfer, "
                          "ModelStreamInfer, ModelStatistics, RepositoryIndex, RepositoryModelLoad, "
                          "RepositoryModelUnload");
        else if (!k->content_ok)
            rs_grpc_finish_locked(k, RS_GRPC_INVALID_ARGUMENT, "content-type is not application/grpc");
        pthread_mutex_unlock(&k->c->mu);
    }
    if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) rs_grpc_end_of_request(k);
    return 0;
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *ud)
{
    (void)code;
    conn *c = ud;
    call *k = nghttp2_session_get_stream_user_data(h2, id);
    if (!k) return 0;
    c->progress_ns = rs_serve_now_ns();
    pthread_mutex_lock(&c->mu);
    k->closed = true;
    if (!k->job) rs_grpc_call_drop_locked(k);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* ---- the connection's threads ---- */

/* Starts or resumes the streams whose calls have news. */
void rs_grpc_pump(conn *c)
{
    enum { BATCH = 64 };
    for (;;) {
        call *ks[BATCH];
        int n = 0;
        pthread_mutex_lock(&c->mu);
        for (call *k = c->calls; k && n < BATCH; k = k->next)
            if (k->dirty && !k->closed) {
                k->dirty = false;
                ks[n++] = k;
            }
        pthread_mutex_unlock(&c->mu);
        for (int i = 0; i < n; i++) {
            call *k = ks[i];
            if (!k->started) {
                static const nghttp2_nv hd[2] = {
                    {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
                    {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE},
                };
                nghttp2_data_provider dp = {.source.ptr = k, .read_callback = read_out};
                k->started = true;
                nghttp2_submit_response(c->h2, k->id, hd, 2, &dp);
            } else if (k->deferred) {
                k->deferred = false;
                nghttp2_session_resume_data(c->h2, k->id);
            }
        }
        if (n < BATCH) return;
    }
}

/* Writes what nghttp2 has to send, as far as the socket takes it. false: the connection is dead.
 * Every frame nghttp2 has ready (a response's HEADERS, DATA and trailers) is gathered into one buffer
 * and written with one send: a frame per send costs the client a wake-up per frame. */
bool rs_grpc_flush(conn *c)
{
    for (;;) {
        if (c->woff == c->wn) {
            c->woff = c->wn = 0;
            for (;;) {
                const uint8_t *p;
                ssize_t n = nghttp2_session_mem_send(c->h2, &p);
                if (n < 0) return false;
                if (n == 0) break;
                if (c->wn + (size_t)n > c->wcap) {
                    size_t nc = c->wcap ? c->wcap : 16384;
                    while (nc < c->wn + (size_t)n) nc *= 2;
                    uint8_t *nb = realloc(c->w, nc); /* owned by c */
                    if (!nb) return false;
                    c->w = nb;
                    c->wcap = nc;
                }
                memcpy(c->w + c->wn, p, (size_t)n);
                c->wn += (size_t)n;
                if (c->wn >= 65536) break; /* a large response goes out as it is framed */
            }
            if (c->wn == 0) return true;
            __atomic_add_fetch(&c->g->sends, 1, __ATOMIC_RELAXED);
        }
        ssize_t w = send(c->fd, c->w + c->woff, c->wn - c->woff, MSG_NOSIGNAL);
        if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        c->woff += (size_t)w;
    }
}

/* No call open and none begun or ended for the idle limit (the reader, under h2mu). */
static bool idle_past(conn *c)
{
    if (rs_serve_now_ns() - c->progress_ns < (uint64_t)c->g->lim.idle_s * 1000000000u) return false;
    pthread_mutex_lock(&c->mu);
    bool none = !c->calls;
    pthread_mutex_unlock(&c->mu);
    return none;
}

/* Resets the unary calls whose request has not arrived whole within request-timeout (a trickle of
 * bytes does not extend it; a stream, ModelStreamInfer, lives as long as its client wants). The reset
 * closes the stream, so a connection holding nothing else goes idle (the reader, under h2mu). */
static void reset_late(conn *c)
{
    uint64_t now = rs_serve_now_ns(), lim = (uint64_t)c->g->lim.request_s * 1000000000u;
    int32_t late[16];
    int n = 0;
    pthread_mutex_lock(&c->mu);
    for (call *k = c->calls; k && n < 16; k = k->next)
        if (!k->in_done && !k->closed && !k->timed_out && k->method != RS_GRPC_MODEL_STREAM_INFER &&
            now - k->begin_ns > lim) {
            k->timed_out = k->in_err = true; /* what still comes is dropped */
            late[n++] = k->id;
        }
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < n; i++) {
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, late[i], NGHTTP2_CANCEL);
        rs_serve_refused_add(c->g->refused, RS_SERVE_FE_GRPC, RS_SERVE_REFUSED_REQUEST_TIMEOUT);
    }
    if (n) rs_grpc_flush(c);
}

/* read_socket's answer when the connection parked: its threads leave, the socket waits in g->ep. */
static call parked_mark;

/* Nothing in progress for a second and nothing to send (the reader, under h2mu). */
static bool may_park(conn *c)
{
    if (rs_serve_now_ns() - c->progress_ns < 1000000000u || c->woff != c->wn || nghttp2_session_want_write(c->h2))
        return false;
    pthread_mutex_lock(&c->mu);
    bool none = !c->calls && !c->inline_k;
    pthread_mutex_unlock(&c->mu);
    return none;
}

/* The threads are told to leave and the socket goes into g->ep (the reader, under h2mu). */
static void park(conn *c)
{
    pthread_mutex_lock(&c->mu);
    c->park_req = true;
    pthread_cond_broadcast(&c->role);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_lock(&c->g->mu);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
    c->parked = !epoll_ctl(c->g->ep, EPOLL_CTL_ADD, c->fd, &ev);
    pthread_mutex_unlock(&c->g->mu);
}

/* The reader's loop (thread `me`). Returns a unary call for this thread to run, once it has given
 * the reader role to the other thread; NULL when the connection has ended (everything freed but c). */
static call *read_socket(conn *c, int me)
{
    rs_serve_grpc *g = c->g;
    uint8_t buf[65536];
    bool quiet = false;
    pthread_mutex_lock(&c->h2mu); /* held but in poll and recv */
    for (;;) {
        if (c->inline_k) {
            call *k = c->inline_k;
            c->inline_k = NULL;
            pthread_mutex_lock(&c->mu);
            c->reader = !me;
            c->runner_busy = true;
            pthread_mutex_unlock(&c->mu);
            pthread_cond_broadcast(&c->role);
            pthread_mutex_unlock(&c->h2mu);
            return k;
        }
        rs_grpc_pump(c);
        if (!rs_grpc_flush(c)) break;
        bool stopping = __atomic_load_n(&g->stopping, __ATOMIC_SEQ_CST);
        if (stopping && !c->goaway) {
            /* Drain: the client may open no new stream; the ones begun get their answers. */
            c->goaway = true;
            c->drain_until = rs_serve_now_ns() + 60 * (uint64_t)1000000000;
            nghttp2_submit_shutdown_notice(c->h2);
            nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
                                  NGHTTP2_NO_ERROR, NULL, 0);
            continue;
        }
        if (c->goaway) {
            /* A call no worker has (an idle stream, a request still arriving) is ended now; the rest
             * end as their workers finish. Then, once the answers are out, the connection closes. */
            bool busy = false;
            pthread_mutex_lock(&c->mu);
            for (call *k = c->calls; k; k = k->next) {
                if (!k->job && !k->finished && !k->closed)
                    rs_grpc_finish_locked(k, k->method == RS_GRPC_MODEL_STREAM_INFER ? RS_GRPC_OK : RS_GRPC_UNAVAILABLE,
                                  k->method == RS_GRPC_MODEL_STREAM_INFER ? NULL : "the server is shutting down");
                busy |= !k->closed && (k->job || k->dirty || k->out_n > 0);
            }
            pthread_mutex_unlock(&c->mu);
            if (rs_serve_now_ns() > c->drain_until) break;
            if (!busy && c->woff == c->wn && !nghttp2_session_want_write(c->h2)) {
                rs_grpc_pump(c);
                if (!rs_grpc_flush(c) || (c->woff == c->wn && !nghttp2_session_want_write(c->h2))) break;
            }
        }
        if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2) && c->woff == c->wn) break;
        if (!c->goaway) reset_late(c);
        if (!c->goaway && idle_past(c)) {
            /* Nothing in progress for `idle` seconds (bytes that open no call do not count): a GOAWAY
             * the client's channel reconnects after, then the socket closes. */
            rs_serve_refused_add(g->refused, RS_SERVE_FE_GRPC, RS_SERVE_REFUSED_IDLE);
            nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
                                  NGHTTP2_NO_ERROR, (const uint8_t *)"idle", 4);
            rs_grpc_flush(c);
            break;
        }
        if (!c->goaway && !stopping && quiet && may_park(c)) {
            park(c);
            pthread_mutex_unlock(&c->h2mu);
            return &parked_mark;
        }
        struct pollfd p[2] = {{c->fd, POLLIN | (c->woff < c->wn ? POLLOUT : 0), 0}, {c->wake[0], POLLIN, 0}};
        pthread_mutex_unlock(&c->h2mu);
        int pr = poll(p, 2, 200), perr = errno;
        quiet = pr == 0; /* a poll that found nothing: only then may it park (never with bytes unread) */
        if (p[1].revents & POLLIN) {
            char d[256];
            while (read(c->wake[0], d, sizeof d) > 0) {}
        }
        bool readable = pr > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR));
        ssize_t r = readable ? recv(c->fd, buf, sizeof buf, 0) : -1;
        int rerr = errno;
        pthread_mutex_lock(&c->h2mu);
        if (pr < 0 && perr != EINTR) break;
        if (readable) {
            if (r == 0 || (r < 0 && rerr != EAGAIN && rerr != EINTR)) break;
            if (r > 0 && nghttp2_session_mem_recv(c->h2, buf, (size_t)r) < 0) {
                rs_grpc_flush(c); /* the GOAWAY nghttp2 queued for a protocol error, if the socket takes it */
                break;
            }
        }
    }
    /* The client is gone (or spoke no HTTP/2): every call is cancelled. That happens under h2mu, so
     * no sender is inside pump or flush holding a call that its worker, seeing it closed, could free;
     * and with dead set no sender enters them again. */
    c->dead = true;
    pthread_mutex_lock(&c->mu);
    for (call *k = c->calls; k; k = k->next) k->closed = true;
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->h2mu); /* a worker may be waiting for it in send_now */
    /* Wait for the workers and for the other thread's call. */
    pthread_mutex_lock(&c->mu);
    c->ending = true;
    pthread_cond_broadcast(&c->role);
    if (c->inline_k) { /* taken but never run */
        c->inline_k->job = false;
        c->jobs--;
        c->inline_k = NULL;
    }
    while (c->jobs > 0) pthread_cond_wait(&c->idle, &c->mu);
    while (c->calls) rs_grpc_call_drop_locked(c->calls);
    pthread_mutex_unlock(&c->mu);
    nghttp2_session_del(c->h2);
    c->h2 = NULL;
    close(c->fd);
    c->fd = -1;
    free(c->w);
    c->w = NULL;
    pthread_mutex_lock(&g->mu);
    c->done = true;
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* Each of a connection's two threads: read while it holds the reader role, run the call it took
 * when it handed the role on, then wait to be the reader again. */
static void conn_thread(conn *c, int me)
{
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (c->reader != me && !c->ending && !c->park_req) pthread_cond_wait(&c->role, &c->mu);
        bool end = c->ending || c->park_req;
        pthread_mutex_unlock(&c->mu);
        if (end) return;
        call *k = read_socket(c, me);
        if (!k || k == &parked_mark) return;
        rs_grpc_run_call(c->g, k);
        pthread_mutex_lock(&c->mu);
        c->runner_busy = false;
        pthread_mutex_unlock(&c->mu);
    }
}

static void *conn_main0(void *arg)
{
    conn_thread(arg, 0);
    return NULL;
}

static void *conn_main1(void *arg)
{
    conn_thread(arg, 1);
    return NULL;
}

static void conn_free(conn *c)
{
    if (c->wake[0] >= 0) close(c->wake[0]);
    if (c->wake[1] >= 0) close(c->wake[1]);
    if (c->h2) nghttp2_session_del(c->h2);
    if (c->fd >= 0) close(c->fd);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->h2mu);
    pthread_cond_destroy(&c->idle);
    pthread_cond_destroy(&c->role);
    free(c);
}

/* Joins and frees the connections whose threads ended (g->mu held); all of them when every is set. */
static void reap_locked(rs_serve_grpc *g, bool every)
{
    for (conn **pp = &g->conns; *pp;) {
        conn *c = *pp;
        if (!c->done && !every) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        pthread_mutex_unlock(&g->mu);
        if (!c->joined) {
            pthread_join(c->th[0], NULL);
            if (c->two) pthread_join(c->th[1], NULL);
        }
        rs_serve_addrs_give(&g->addrs, c->ip);
        __atomic_sub_fetch(&g->refused->open[RS_SERVE_FE_GRPC], 1, __ATOMIC_RELAXED);
        conn_free(c);
        pthread_mutex_lock(&g->mu);
    }
}

static nghttp2_session_callbacks *callbacks(void)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb)) return NULL;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    return cb;
}

/* false: it could not start (the socket is closed, its place not yet given back) */
static bool start_conn(rs_serve_grpc *g, int fd, uint32_t ip)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    conn *c = calloc(1, sizeof *c); /* g's list owns it; freed by reap_locked */
    nghttp2_session_callbacks *cb = callbacks();
    if (!c || !cb || pipe(c->wake)) {
        nghttp2_session_callbacks_del(cb);
        free(c);
        close(fd);
        return false;
    }
    c->g = g;
    c->fd = fd;
    c->ip = ip;
    c->progress_ns = rs_serve_now_ns();
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->h2mu, NULL);
    pthread_cond_init(&c->idle, NULL);
    pthread_cond_init(&c->role, NULL);
    fcntl(c->wake[0], F_SETFL, O_NONBLOCK);
    fcntl(c->wake[1], F_SETFL, O_NONBLOCK);
    int rc = nghttp2_session_server_new(&c->h2, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (rc) {
        c->h2 = NULL;
        conn_free(c);
        return false;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1024},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
    };
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof *iv);
    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, 16 << 20);
    pthread_mutex_lock(&g->mu);
    pthread_mutex_lock(&c->mu); /* the threads wait for it: runner_busy is set before they look */
    if (pthread_create(&c->th[0], NULL, conn_main0, c)) {
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_unlock(&g->mu);
        conn_free(c);
        return false;
    }
    c->runner_busy = true; /* until the second thread starts, at the first call */
    pthread_mutex_unlock(&c->mu);
    c->next = g->conns;
    g->conns = c;
    __atomic_add_fetch(&g->refused->open[RS_SERVE_FE_GRPC], 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g->mu);
    return true;
}

/* Joins a parked connection's threads, once (g->mu held): they left their loop when it parked. */
static void join_parked_locked(conn *c)
{
    if (c->joined) return;
    pthread_join(c->th[0], NULL);
    if (c->two) pthread_join(c->th[1], NULL);
    c->joined = true;
}

/* Starts a reader again on a parked connection (g->mu held): its socket has bytes, its idle time is
 * up, or the server is stopping. The threads that parked it have left (or are leaving) their loop. */
static void unpark_locked(rs_serve_grpc *g, conn *c)
{
    if (!c->parked) return;
    c->parked = false;
    epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    join_parked_locked(c);
    c->joined = false;
    pthread_mutex_lock(&c->mu);
    c->park_req = false;
    c->reader = 0;
    c->two = false;
    c->runner_busy = true; /* until the second thread starts, at the next call */
    bool ok = !pthread_create(&c->th[0], NULL, conn_main0, c);
    pthread_mutex_unlock(&c->mu);
    if (!ok) { /* no thread to be had: the connection ends here (the session is freed with it) */
        c->joined = c->done = true;
        c->two = false;
    }
}

/* The parked connections whose socket is readable, and those whose idle time is up (g->mu held);
 * and the threads of those parked since the last look, joined: a thread ended but not joined keeps
 * its stack and TLS (~200 KB). */
static void wake_parked_locked(rs_serve_grpc *g)
{
    for (conn *c = g->conns; c; c = c->next)
        if (c->parked) join_parked_locked(c);
    struct epoll_event ev[64];
    int n = epoll_wait(g->ep, ev, 64, 0);
    for (int i = 0; i < n; i++) unpark_locked(g, ev[i].data.ptr);
    uint64_t now = rs_serve_now_ns(), lim = (uint64_t)g->lim.idle_s * 1000000000u;
    for (conn *c = g->conns; c; c = c->next)
        if (c->parked && now - c->progress_ns >= lim) unpark_locked(g, c);
}

static void *accept_main(void *arg)
{
    rs_serve_grpc *g = arg;
    for (;;) {
        struct pollfd p[3] = {{g->lfd, POLLIN, 0}, {g->stop_pipe[0], POLLIN, 0}, {g->ep, POLLIN, 0}};
        if (poll(p, 3, 1000) < 0 && errno != EINTR) break;
        if (p[1].revents) break;
        pthread_mutex_lock(&g->mu);
        wake_parked_locked(g);
        reap_locked(g, false);
        pthread_mutex_unlock(&g->mu);
        if (!(p[0].revents & POLLIN)) continue;
        struct sockaddr_in pa = {0};
        socklen_t pl = sizeof pa;
        int fd = accept(g->lfd, (struct sockaddr *)&pa, &pl);
        if (fd >= 0) {
            uint32_t ip = pa.sin_family == AF_INET ? pa.sin_addr.s_addr : 0;
            rs_serve_refusal why = rs_serve_addrs_take(&g->addrs, ip, &g->lim);
            if (why != RS_SERVE_REFUSED_N) {
                rs_serve_refused_add(g->refused, RS_SERVE_FE_GRPC, why);
                close(fd);
            } else if (!start_conn(g, fd, ip)) {
                rs_serve_addrs_give(&g->addrs, ip);
            }
        } else if (errno == EMFILE || errno == ENFILE) { /* out of descriptors: the backlog waits, not a spin */
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

rs_status rs_serve_grpc_start(rs_serve_server *s, const char *host, int port, size_t body_limit, rs_serve_grpc **out,
                              rs_err *err)
{
    *out = NULL;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    if (port < 0 || port > 65535) return rs_err_set(err, RS_ERR_ARG, "port %d is not 0..65535", port);
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return rs_err_set(err, RS_ERR_ARG, "host '%s' is not an IPv4 address (127.0.0.1, 0.0.0.0 for every interface)",
                          host);
    rs_serve_grpc *g = calloc(1, sizeof *g); /* the caller's */
    if (!g) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    g->s = s;
    g->cap = body_limit;
    g->lim = *rs_serve_limits_of(s);
    g->refused = rs_serve_refused_of(s);
    g->stop_pipe[0] = g->stop_pipe[1] = -1;
    g->workers = calloc(MAX_WORKERS, sizeof *g->workers);
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (g->lfd >= 0) setsockopt(g->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (!g->workers || g->ep < 0 || g->lfd < 0 || bind(g->lfd, (struct sockaddr *)&a, sizeof a) || listen(g->lfd, 1024) ||
        pipe(g->stop_pipe)) {
        int e = errno;
        if (g->lfd >= 0) close(g->lfd);
        if (g->ep >= 0) close(g->ep);
        if (g->stop_pipe[0] >= 0) close(g->stop_pipe[0]), close(g->stop_pipe[1]);
        free(g->workers);
        free(g);
        return rs_err_set(err, RS_ERR_IO, "cannot listen on %s:%d for gRPC (%s; --grpc-port picks another)", host, port,
                          strerror(e));
    }
    socklen_t al = sizeof a;
    getsockname(g->lfd, (struct sockaddr *)&a, &al);
    g->port = ntohs(a.sin_port);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->work, NULL);
    rs_serve_addrs_init(&g->addrs);
    if (pthread_create(&g->accept_th, NULL, accept_main, g)) {
        rs_serve_addrs_clear(&g->addrs);
        close(g->ep);
        close(g->lfd);
        close(g->stop_pipe[0]);
        close(g->stop_pipe[1]);
        free(g->workers);
        free(g);
        return rs_err_set(err, RS_ERR_INTERNAL, "cannot start a thread");
    }
    *out = g;
    return RS_OK;
}

int rs_serve_grpc_bound_port(const rs_serve_grpc *g) { return g->port; }

uint64_t rs_serve_grpc_sends(rs_serve_grpc *g) { return __atomic_load_n(&g->sends, __ATOMIC_RELAXED); }

void rs_serve_grpc_stop(rs_serve_grpc *g)
{
    if (!g) return;
    char b = 1;
    if (write(g->stop_pipe[1], &b, 1) != 1) {} /* the accept thread stops taking connections */
    pthread_join(g->accept_th, NULL);
    close(g->lfd);
    pthread_mutex_lock(&g->mu);
    __atomic_store_n(&g->stopping, true, __ATOMIC_SEQ_CST);
    for (conn *c = g->conns; c; c = c->next) unpark_locked(g, c); /* a reader again, to say goodbye */
    for (conn *c = g->conns; c; c = c->next)
        if (!c->done) rs_grpc_wake(c);
    reap_locked(g, true); /* each connection answers what it began, then ends */
    pthread_cond_broadcast(&g->work);
    int n = g->nworkers;
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < n; i++) pthread_join(g->workers[i], NULL);
    close(g->stop_pipe[0]);
    close(g->stop_pipe[1]);
    close(g->ep);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->work);
    rs_serve_addrs_clear(&g->addrs);
    free(g->workers);
    free(g);
}
