/* The store's server: one thread that serves every client with poll(), keeps the keys in a hash table
 * and answers blocking GET/WAIT requests when their keys appear or their deadline passes. Clients are
 * synchronous, so a connection has at most one request pending; it stays unconsumed at the head of the
 * connection's input buffer until answered. */
#include "dist/store/store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dist/store/wire.h"

#define NBUCKETS 1024

typedef struct entry {
    struct entry *next;
    uint8_t *key; /* owned */
    size_t klen;
    uint8_t *val; /* owned; one extra zero byte after vlen */
    size_t vlen;
} entry;

typedef struct conn {
    int fd;
    uint8_t *in; /* owned; received bytes, a pending request at its head */
    size_t in_len, in_cap;
    uint8_t *out; /* owned; reply bytes not yet sent, from out_off */
    size_t out_len, out_off, out_cap;
    int waiting;     /* the request at in[0] is a GET/WAIT not yet answered */
    double deadline; /* when that request times out (monotonic seconds) */
    int dead;
} conn;

struct rs_store_server {
    int listen_fd;
    int wake[2]; /* a byte on wake[1] tells the thread to stop */
    int port;
    pthread_t thread;
    entry *buckets[NBUCKETS];
    conn **conns; /* owned */
    size_t nconns, cap_conns;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the table ---- */

static size_t hash(const uint8_t *k, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ k[i]) * 1099511628211ull;
    return (size_t)(h % NBUCKETS);
}

static entry *find(rs_store_server *s, const uint8_t *k, size_t n)
{
    for (entry *e = s->buckets[hash(k, n)]; e; e = e->next)
        if (e->klen == n && !memcmp(e->key, k, n)) return e;
    return NULL;
}

/* Sets key to a copy of val; returns 0, or -1 when out of memory (the table is then unchanged). */
static int put(rs_store_server *s, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn)
{
    uint8_t *copy = malloc(vn + 1);
    if (!copy) return -1;
    if (vn) memcpy(copy, v, vn);
    copy[vn] = 0;
    entry *e = find(s, k, kn);
    if (!e) {
        e = calloc(1, sizeof *e);
        uint8_t *kc = malloc(kn);
        if (!e || !kc) {
            free(e), free(kc), free(copy);
            return -1;
        }
        memcpy(kc, k, kn);
        e->key = kc, e->klen = kn;
        size_t b = hash(k, kn);
        e->next = s->buckets[b];
        s->buckets[b] = e;
    }
    free(e->val);
    e->val = copy, e->vlen = vn;
    return 0;
}

/* ---- connections ---- */

static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    uint8_t *p = realloc(*buf, c);
    if (!p) return -1;
    *buf = p, *cap = c;
    return 0;
}

static void reply(conn *c, rs_store_reply status, const uint8_t *payload, size_t n)
{
    if (c->dead) return;
    if (c->out_off == c->out_len) c->out_off = c->out_len = 0;
    if (reserve(&c->out, &c->out_cap, c->out_len + RS_STORE_REPLY_HEAD + n)) {
        c->dead = 1; /* no memory for the answer: the client sees the connection close */
        return;
    }
    uint8_t *p = c->out + c->out_len;
    p[0] = (uint8_t)status;
    rs_store_put_u64(p + 1, n);
    if (n) memcpy(p + RS_STORE_REPLY_HEAD, payload, n);
    c->out_len += RS_STORE_REPLY_HEAD + n;
}

static void flush(conn *c)
{
    while (!c->dead && c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w > 0) {
            c->out_off += (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            c->dead = 1;
        }
    }
}

/* Answers a GET/WAIT if all its keys are present (or, when timed_out, with the missing ones).
 * Returns 1 when answered. */
static int try_answer(rs_store_server *s, conn *c, const rs_store_req *r, int timed_out)
{
    if (r->op == RS_STORE_OP_GET) {
        entry *e = find(s, r->key, r->klen);
        if (e) {
            reply(c, RS_STORE_REPLY_OK, e->val, e->vlen);
            return 1;
        }
        if (!timed_out) return 0;
        uint8_t head[8];
        rs_store_put_u32(head, 1);
        rs_store_put_u32(head + 4, (uint32_t)r->klen);
        /* Packed list of one key: reuse the request's key bytes after a small head. */
        uint8_t *p = malloc(8 + r->klen);
        if (!p) {
            c->dead = 1;
            return 1;
        }
        memcpy(p, head, 8);
        memcpy(p + 8, r->key, r->klen);
        reply(c, RS_STORE_REPLY_TIMEOUT, p, 8 + r->klen);
        free(p);
        return 1;
    }
    /* WAIT: count what is missing first, and build the list only on a timeout. */
    const uint8_t *p = r->keys, *k;
    size_t kl, missing = 0;
    for (uint32_t i = 0; i < r->nkeys; i++) {
        p = rs_store_wire_next_key(p, &k, &kl);
        if (!find(s, k, kl)) missing++;
    }
    if (!missing) {
        reply(c, RS_STORE_REPLY_OK, NULL, 0);
        return 1;
    }
    if (!timed_out) return 0;
    uint8_t *list = malloc(r->vlen); /* the missing keys fit in the request's own list */
    if (!list) {
        c->dead = 1;
        return 1;
    }
    size_t n = 4;
    rs_store_put_u32(list, (uint32_t)missing);
    p = r->keys;
    for (uint32_t i = 0; i < r->nkeys; i++) {
        const uint8_t *next = rs_store_wire_next_key(p, &k, &kl);
        if (!find(s, k, kl)) {
            memcpy(list + n, p, (size_t)(next - p));
            n += (size_t)(next - p);
        }
        p = next;
    }
    reply(c, RS_STORE_REPLY_TIMEOUT, list, n);
    free(list);
    return 1;
}

/* Parses an integer counter value; returns 0 when v is a decimal int64. */
static int parse_counter(const entry *e, int64_t *out)
{
    if (e->vlen == 0 || e->vlen > 20) return -1;
    char buf[24], *end;
    memcpy(buf, e->val, e->vlen);
    buf[e->vlen] = 0;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

/* Handles one complete request; returns 1 when it was answered (and can be consumed), 0 when it now
 * waits. Sets *changed when a key was written. */
static int handle(rs_store_server *s, conn *c, const rs_store_req *r, int *changed)
{
    switch (r->op) {
    case RS_STORE_OP_SET:
        if (put(s, r->key, r->klen, r->val, r->vlen)) {
            c->dead = 1;
            return 1;
        }
        *changed = 1;
        reply(c, RS_STORE_REPLY_OK, NULL, 0);
        return 1;
    case RS_STORE_OP_ADD: {
        entry *e = find(s, r->key, r->klen);
        int64_t v = 0;
        if (e && parse_counter(e, &v)) {
            reply(c, RS_STORE_REPLY_BAD, NULL, 0);
            return 1;
        }
        /* Wrap like two's complement rather than overflow (undefined behaviour) on a hostile delta. */
        v = (int64_t)((uint64_t)v + (uint64_t)r->delta);
        char txt[24];
        int n = snprintf(txt, sizeof txt, "%" PRId64, v);
        if (put(s, r->key, r->klen, (const uint8_t *)txt, (size_t)n)) {
            c->dead = 1;
            return 1;
        }
        *changed = 1;
        uint8_t res[8];
        rs_store_put_u64(res, (uint64_t)v);
        reply(c, RS_STORE_REPLY_OK, res, 8);
        return 1;
    }
    case RS_STORE_OP_CHECK:
        reply(c, find(s, r->key, r->klen) ? RS_STORE_REPLY_OK : RS_STORE_REPLY_ABSENT, NULL, 0);
        return 1;
    case RS_STORE_OP_GET:
    case RS_STORE_OP_WAIT:
        if (try_answer(s, c, r, r->timeout_ms == 0)) return 1;
        c->waiting = 1;
        c->deadline = now_s() + 1e-3 * r->timeout_ms;
        return 0;
    }
    return 1;
}

static void consume(conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
}

/* Runs the requests buffered on c until one waits or more bytes are needed. */
static void process(rs_store_server *s, conn *c, int *changed)
{
    while (!c->dead && !c->waiting) {
        rs_store_req r;
        size_t used;
        int p = rs_store_wire_parse(c->in, c->in_len, &r, &used);
        if (p < 0) {
            c->dead = 1; /* malformed or hostile: drop this peer only */
            return;
        }
        if (p == 0) return;
        if (handle(s, c, &r, changed)) consume(c, used);
    }
}

/* Re-examines a waiting connection's request (re-parsed: the buffer may have moved). */
static void recheck(rs_store_server *s, conn *c, double now, int *changed)
{
    rs_store_req r;
    size_t used;
    if (rs_store_wire_parse(c->in, c->in_len, &r, &used) != 1) return; /* cannot happen */
    if (try_answer(s, c, &r, now >= c->deadline)) {
        c->waiting = 0;
        consume(c, used);
        process(s, c, changed);
    }
}

static void read_from(conn *c)
{
    /* A client never sends more than one request ahead; a peer that floods is dropped. */
    const size_t limit = 2 * ((size_t)RS_STORE_REQ_HEAD + RS_STORE_KEY_MAX + RS_STORE_VAL_MAX);
    for (;;) {
        if (c->in_len >= limit || reserve(&c->in, &c->in_cap, c->in_len + 65536)) {
            c->dead = 1;
            return;
        }
        ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (r > 0) {
            c->in_len += (size_t)r;
            if ((size_t)r < 65536) return;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else {
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            c->dead = 1; /* EOF or error */
            return;
        }
    }
}

static void conn_free(conn *c)
{
    if (!c) return;
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

static void accept_all(rs_store_server *s)
{
    for (;;) {
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0) return; /* EAGAIN, or a transient error: the next poll tries again */
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        if (s->nconns == s->cap_conns) {
            size_t cap = s->cap_conns ? 2 * s->cap_conns : 16;
            conn **p = realloc(s->conns, cap * sizeof *p);
            if (!p) {
                close(fd);
                continue;
            }
            s->conns = p, s->cap_conns = cap;
        }
        conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        s->conns[s->nconns++] = c;
    }
}

static void *serve(void *arg)
{
    rs_store_server *s = arg;
    struct pollfd *pfd = NULL;
    size_t pcap = 0;
    for (;;) {
        if (pcap < s->nconns + 2) {
            size_t cap = 2 * (s->nconns + 2);
            struct pollfd *p = realloc(pfd, cap * sizeof *p);
            if (!p) break; /* clients then see their connections close */
            pfd = p, pcap = cap;
        }
        double now = now_s(), next = -1;
        pfd[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < s->nconns; i++) {
            conn *c = s->conns[i];
            pfd[i + 2] = (struct pollfd){.fd = c->fd, .events = POLLIN};
            if (c->out_off < c->out_len) pfd[i + 2].events |= POLLOUT;
            if (c->waiting && (next < 0 || c->deadline < next)) next = c->deadline;
        }
        int timeout = next < 0 ? -1 : next <= now ? 0 : (int)((next - now) * 1e3) + 1;
        int nfds = (int)s->nconns + 2;
        if (poll(pfd, (nfds_t)nfds, timeout) < 0 && errno != EINTR) break;
        if (pfd[0].revents) break;

        int changed = 0;
        size_t n = s->nconns; /* connections accepted below are polled next round */
        for (size_t i = 0; i < n; i++) {
            conn *c = s->conns[i];
            if (pfd[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) {
                read_from(c);
                process(s, c, &changed);
            }
        }
        if (pfd[1].revents & POLLIN) accept_all(s);
        /* A write can release waiters, whose answers may in turn be followed by writes they sent. */
        now = now_s();
        do {
            int again = 0;
            for (size_t i = 0; i < s->nconns; i++)
                if (s->conns[i]->waiting && !s->conns[i]->dead &&
                    (changed || now >= s->conns[i]->deadline))
                    recheck(s, s->conns[i], now, &again);
            changed = again;
        } while (changed);
        size_t j = 0;
        for (size_t i = 0; i < s->nconns; i++) {
            flush(s->conns[i]);
            if (s->conns[i]->dead) conn_free(s->conns[i]);
            else s->conns[j++] = s->conns[i];
        }
        s->nconns = j;
    }
    free(pfd);
    return NULL;
}

/* ---- public ---- */

rs_status rs_store_server_start(const char *host, int port, rs_store_server **out, rs_err *err)
{
    *out = NULL;
    if (port < 0 || port > 65535)
        return rs_err_set(err, RS_ERR_ARG, "store server: port %d is out of range (0..65535; 0 picks a free one)", port);
    if (!host || !*host) host = "0.0.0.0";
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char pstr[16];
    snprintf(pstr, sizeof pstr, "%d", port);
    int g = getaddrinfo(host, pstr, &hints, &ai);
    if (g) return rs_err_set(err, RS_ERR_ARG, "store server: cannot resolve host '%s': %s", host, gai_strerror(g));

    rs_store_server *s = calloc(1, sizeof *s);
    if (!s) {
        freeaddrinfo(ai);
        return rs_err_set(err, RS_ERR_NOMEM, "store server: out of memory");
    }
    s->wake[0] = s->wake[1] = -1;
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    rs_status st = RS_OK;
    if (s->listen_fd < 0) {
        st = rs_err_set(err, RS_ERR_IO, "store server: socket: %s", strerror(errno));
        goto fail;
    }
    /* Lets a restarted server reuse a port left in TIME_WAIT; a live listener still makes bind fail. */
    int one = 1;
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s->listen_fd, ai->ai_addr, ai->ai_addrlen)) {
        if (errno == EADDRINUSE)
            st = rs_err_set(err, RS_ERR_IO,
                            "store server: cannot listen on %s:%d: port %d is already in use; choose another "
                            "port (MASTER_PORT) or pass port 0 to let the system pick a free one",
                            host, port, port);
        else
            st = rs_err_set(err, RS_ERR_IO, "store server: cannot bind %s:%d: %s", host, port, strerror(errno));
        goto fail;
    }
    if (listen(s->listen_fd, 128)) {
        st = rs_err_set(err, RS_ERR_IO, "store server: cannot listen on %s:%d: %s", host, port, strerror(errno));
        goto fail;
    }
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    getsockname(s->listen_fd, (struct sockaddr *)&sa, &sl);
    s->port = ntohs(sa.sin_port);
    if (pipe(s->wake)) {
        st = rs_err_set(err, RS_ERR_IO, "store server: pipe: %s", strerror(errno));
        goto fail;
    }
    fcntl(s->wake[0], F_SETFD, FD_CLOEXEC);
    fcntl(s->wake[1], F_SETFD, FD_CLOEXEC);
    int e = pthread_create(&s->thread, NULL, serve, s);
    if (e) {
        st = rs_err_set(err, RS_ERR_IO, "store server: cannot start its thread: %s", strerror(e));
        goto fail;
    }
    freeaddrinfo(ai);
    *out = s;
    return RS_OK;
fail:
    freeaddrinfo(ai);
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->wake[0] >= 0) close(s->wake[0]), close(s->wake[1]);
    free(s);
    return st;
}

int rs_store_server_port(const rs_store_server *s) { return s ? s->port : -1; }

void rs_store_server_stop(rs_store_server *s)
{
    if (!s) return;
    ssize_t w;
    do w = write(s->wake[1], "x", 1);
    while (w < 0 && errno == EINTR);
    pthread_join(s->thread, NULL);
    for (size_t i = 0; i < s->nconns; i++) conn_free(s->conns[i]);
    free(s->conns);
    for (size_t b = 0; b < NBUCKETS; b++)
        for (entry *e = s->buckets[b], *nx; e; e = nx) {
            nx = e->next;
            free(e->key), free(e->val), free(e);
        }
    close(s->listen_fd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s);
}
