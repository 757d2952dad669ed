/* The HTTP front end's connection guard (see http_guard.h). Each connection gets a record at
 * MHD_CONNECTION_NOTIFY_STARTED (its socket context), on a list the watcher walks four times a
 * second. MHD calls NOTIFY_CLOSED before it closes the socket, and the record leaves the list then,
 * under the guard's lock; so the watcher, shutting a socket down under that lock, never touches a
 * descriptor that has been closed (and perhaps reused). shutdown() rather than close(): the socket
 * stays MHD's; its connection thread sees the end of the stream and cleans up as for any client
 * that hung up. */
#include "http_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

typedef struct watched {
    rs_serve_http_guard *g;
    struct watched *prev, *next;
    int fd;
    uint32_t ip;
    bool busy;          /* a whole request is being answered: no deadline */
    uint64_t deadline;  /* ns (CLOCK_MONOTONIC): the request in progress must have arrived by then */
} watched;

struct rs_serve_http_guard {
    rs_serve_server *s;  /* borrowed */
    rs_serve_frontend fe;
    rs_serve_limits lim;
    rs_serve_refused *refused; /* s's */
    rs_serve_addrs addrs;
    pthread_mutex_t mu;
    pthread_cond_t stop_cv;
    bool stop;
    watched *list;       /* owned (mu) */
    pthread_t th;
};

static uint64_t deadline_from_now(const rs_serve_http_guard *g)
{
    return rs_serve_now_ns() + (uint64_t)g->lim.request_s * 1000000000u;
}

static void *watch_main(void *arg)
{
    rs_serve_http_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        uint64_t now = rs_serve_now_ns();
        for (watched *w = g->list; w; w = w->next) {
            if (w->busy || w->fd < 0 || now < w->deadline) continue;
            shutdown(w->fd, SHUT_RDWR);
            w->fd = -1; /* once */
            rs_serve_refused_add(g->refused, g->fe, RS_SERVE_REFUSED_REQUEST_TIMEOUT);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&g->stop_cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

rs_status rs_serve_http_guard_new(rs_serve_server *s, rs_serve_frontend fe, rs_serve_http_guard **out, rs_err *err)
{
    *out = NULL;
    rs_serve_http_guard *g = calloc(1, sizeof *g); /* the caller's */
    if (!g) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    g->s = s;
    g->fe = fe;
    g->lim = *rs_serve_limits_of(s);
    g->refused = rs_serve_refused_of(s);
    rs_serve_addrs_init(&g->addrs);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->stop_cv, NULL);
    if (pthread_create(&g->th, NULL, watch_main, g)) {
        rs_serve_addrs_clear(&g->addrs);
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->stop_cv);
        free(g);
        return rs_err_set(err, RS_ERR_INTERNAL, "cannot start a thread");
    }
    *out = g;
    return RS_OK;
}

void rs_serve_http_guard_free(rs_serve_http_guard *g)
{
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->stop_cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->th, NULL);
    while (g->list) { /* none after MHD_stop_daemon; kept safe all the same */
        watched *w = g->list;
        g->list = w->next;
        free(w);
    }
    rs_serve_addrs_clear(&g->addrs);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->stop_cv);
    free(g);
}

static uint32_t ip_of(const struct sockaddr *addr, socklen_t len)
{
    if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in))
        return ((const struct sockaddr_in *)addr)->sin_addr.s_addr;
    return 0;
}

enum MHD_Result rs_serve_http_guard_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    rs_serve_http_guard *g = cls;
    /* MHD accepts on one thread and announces the connection (STARTED, where its place is taken)
     * before it accepts the next, so checking here and taking there cannot let two through. */
    rs_serve_refusal why = rs_serve_addrs_check(&g->addrs, ip_of(addr, len), &g->lim);
    if (why == RS_SERVE_REFUSED_N) return MHD_YES;
    rs_serve_refused_add(g->refused, g->fe, why);
    return MHD_NO;
}

static void started(rs_serve_http_guard *g, struct MHD_Connection *c, void **sctx)
{
    const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    int one = 1; /* replies are small and latency is the point: no Nagle delay on a reply's last segment */
    if (fi) setsockopt(fi->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    watched *w = calloc(1, sizeof *w); /* the list's; freed at NOTIFY_CLOSED */
    if (!w) return;
    w->g = g;
    w->fd = fi ? fi->connect_fd : -1;
    w->ip = ai ? ip_of(ai->client_addr, sizeof(struct sockaddr_in)) : 0;
    rs_serve_addrs_take(&g->addrs, w->ip, &(rs_serve_limits){.max_conns = 1 << 30, .per_ip = 1 << 30});
    __atomic_add_fetch(&g->refused->open[g->fe], 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g->mu);
    w->deadline = deadline_from_now(g);
    w->next = g->list;
    if (g->list) g->list->prev = w;
    g->list = w;
    pthread_mutex_unlock(&g->mu);
    *sctx = w;
}

void rs_serve_http_guard_notify(void *cls, struct MHD_Connection *c, void **sctx, enum MHD_ConnectionNotificationCode toe)
{
    rs_serve_http_guard *g = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        started(g, c, sctx);
        return;
    }
    watched *w = *sctx;
    if (!w) return;
    *sctx = NULL;
    pthread_mutex_lock(&g->mu);
    if (w->prev) w->prev->next = w->next;
    else g->list = w->next;
    if (w->next) w->next->prev = w->prev;
    pthread_mutex_unlock(&g->mu);
    rs_serve_addrs_give(&g->addrs, w->ip);
    __atomic_sub_fetch(&g->refused->open[g->fe], 1, __ATOMIC_RELAXED);
    free(w);
}

void rs_serve_http_guard_busy(struct MHD_Connection *c, bool busy)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    watched *w = ci ? ci->socket_context : NULL;
    if (!w) return;
    pthread_mutex_lock(&w->g->mu);
    w->busy = busy;
    if (!busy) w->deadline = deadline_from_now(w->g);
    pthread_mutex_unlock(&w->g->mu);
}
