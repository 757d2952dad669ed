/* The tcp process-group backend: one TCP connection between every pair of ranks, found through the
 * rendezvous store, so ranks may sit on different hosts. This file is the transport (non-blocking
 * send/recv on those sockets) and the mesh's setup; the collectives are dist/pg/step.c's, shared with shm. */
#define _GNU_SOURCE
#include "dist/pg/step.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist/store/wire.h"

#define TCP_MAX_WORLD 1024      /* world-1 sockets per rank; past this the fd limit is the problem */
#ifndef TCP_STAGE /* a test build may shrink it to an odd size, to cut elements at every boundary */
#define TCP_STAGE (256u << 10)  /* incoming bytes of a reducing transfer before they are folded in */
#endif
_Static_assert(TCP_STAGE >= 16, "the stage must hold a partial element and at least one whole one");
#define TCP_MAGIC 0x72746370u   /* "rtcp": first word of the hello */
#define TCP_HELLO (12 + 64)     /* magic, rank, world (u32 big-endian), group name (64 bytes, zero-padded) */
/* Waiting (tcp_idle): up to TCP_SPIN rounds of plain retries (each a recv/send syscall of ~1 us; a small
 * message's answer often comes within them), then sched_yield rounds up to TCP_YIELD (free on an idle
 * core, and they let a peer sharing ours run), then poll(). Measured on 2 cores: 8 B all_reduce of 2
 * ranks ~5 us with these against ~30 us without the yields; 8 ranks (oversubscribed) were slower with
 * longer spinning, since the ranks we wait for cannot run while we spin. */
#define TCP_SPIN 16
#define TCP_YIELD 64

typedef struct tcp_peer {
    int fd;                 /* -1 for this rank itself */
    bool want_in, want_out; /* the last recv/send would have blocked: what idle waits for */
} tcp_peer;

typedef struct tcp_impl {
    tcp_peer *peers;        /* (world) */
    char *stage;            /* (TCP_STAGE) the staging area of reducing transfers */
    struct pollfd *pfd;     /* (world) idle's scratch */
} tcp_impl;

/* A reducing transfer folds in whole elements only; the bytes of a partial one wait here (x->tp_state)
 * until the rest arrives, since TCP cuts the stream anywhere. */
typedef struct tcp_xstate {
    unsigned char part[8];  /* the largest dtype is 8 bytes */
    unsigned npart;
} tcp_xstate;
_Static_assert(sizeof(tcp_xstate) <= sizeof(((rs_pg_xfer *)0)->tp_state), "tcp_xstate must fit in tp_state");

/* ---------------------------------------------------------------- transport */

/* A dead connection is an error at once, not a wait for the timeout: TCP tells us the peer is gone. */
static bool peer_broke(rs_pg *g, int peer, int e, rs_status *st, rs_err *err)
{
    int who = rs_pg_global_rank(g, peer);
    if (e == 0 || e == ECONNRESET || e == EPIPE)
        rs_err_set(err, RS_ERR_IO, "rank %d closed its connection (it exited or was killed)", who);
    else
        rs_err_set(err, RS_ERR_IO, "connection to rank %d failed: %s", who, strerror(e));
    *st = RS_ERR_IO;
    return false;
}

static bool send_some(rs_pg *g, rs_pg_xfer *x, rs_status *st, rs_err *err)
{
    tcp_peer *p = &((tcp_impl *)g->impl)->peers[x->to];
    ssize_t n = send(p->fd, x->sp + x->soff, x->sbytes - x->soff, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
        x->soff += (size_t)n;
        return true;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) p->want_out = true;
    else if (errno != EINTR) return peer_broke(g, x->to, errno, st, err);
    return false;
}

/* How many more bytes may land in rp now: all that is left, or (after_send) only up to what has gone out. */
static size_t recv_room(const rs_pg_xfer *x, size_t pending)
{
    size_t at = x->roff + pending, left = x->rbytes - at;
    if (x->after_send && x->soff < x->sbytes) {
        size_t ok = x->soff > at ? x->soff - at : 0;
        if (ok < left) left = ok;
    }
    return left;
}

static bool recv_some(rs_pg *g, rs_pg_xfer *x, rs_status *st, rs_err *err)
{
    tcp_impl *s = g->impl;
    tcp_peer *p = &s->peers[x->from];
    if (x->mode == RS_XF_COPY) {
        size_t room = recv_room(x, 0);
        if (!room) return false;
        ssize_t n = recv(p->fd, x->rp + x->roff, room, MSG_DONTWAIT);
        if (n > 0) {
            x->roff += (size_t)n;
            return true;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) p->want_in = true;
        else if (n == 0 || errno != EINTR) return peer_broke(g, x->from, n == 0 ? 0 : errno, st, err);
        return false;
    }
    /* Reduce: the partial element left from last time goes first in the stage, then what arrives. */
    tcp_xstate *xs = (tcp_xstate *)x->tp_state;
    size_t have = xs->npart, room = recv_room(x, have);
    if (room > TCP_STAGE - have) room = TCP_STAGE - have;
    if (!room) return false;
    memcpy(s->stage, xs->part, have);
    ssize_t n = recv(p->fd, s->stage + have, room, MSG_DONTWAIT);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) p->want_in = true;
        else if (n == 0 || errno != EINTR) return peer_broke(g, x->from, n == 0 ? 0 : errno, st, err);
        return false;
    }
    size_t es = rs_dtype_size(x->t), tot = have + (size_t)n, whole = tot / es * es;
    char *dst = x->rp + x->roff;
    if (whole) {
        if (x->peer_first) {
            /* incoming op ours, in that order, so both partners of an exchange compute the same bits */
            rs_pg_reduce_into(s->stage, dst, whole / es, x->t, x->op);
            memcpy(dst, s->stage, whole);
        } else {
            rs_pg_reduce_into(dst, s->stage, whole / es, x->t, x->op);
        }
    }
    xs->npart = (unsigned)(tot - whole);
    memcpy(xs->part, s->stage + whole, xs->npart);
    x->roff += whole;
    return true;
}

/* One send and one receive attempt: the kernel takes or gives as much as its buffers hold, and
 * step.c calls again at once while anything moves. Sending first lets an after_send receive land. */
static bool tcp_progress(rs_pg *g, rs_pg_xfer *x, rs_status *st, rs_err *err)
{
    bool moved = false;
    if (x->to >= 0 && !x->hold_send && x->soff < x->sbytes) moved = send_some(g, x, st, err);
    if (*st) return moved;
    if (x->from >= 0 && !x->hold_recv && x->roff < x->rbytes && recv_some(g, x, st, err)) moved = true;
    return moved;
}

/* Waiting: retries, yields, then poll() on the sockets whose last try would have blocked, so the kernel
 * wakes us when they are ready. The poll timeout only bounds a wait nothing signals. */
static void tcp_idle(rs_pg *g, unsigned idle)
{
    if (idle < TCP_SPIN) return;
    if (idle < TCP_YIELD) {
        sched_yield();
        return;
    }
    tcp_impl *s = g->impl;
    nfds_t n = 0;
    for (int r = 0; r < g->world; r++) {
        tcp_peer *p = &s->peers[r];
        if (!p->want_in && !p->want_out) continue;
        s->pfd[n++] = (struct pollfd){.fd = p->fd, .events = (short)((p->want_in ? POLLIN : 0) | (p->want_out ? POLLOUT : 0))};
        p->want_in = p->want_out = false;
    }
    poll(s->pfd, n, idle < 1024 ? 1 : 10);
}

static const rs_pg_transport tcp_transport = {.progress = tcp_progress, .idle = tcp_idle};

/* ---------------------------------------------------------------- setup */

static void tcp_destroy(rs_pg *g)
{
    if (!g) return;
    tcp_impl *s = g->impl;
    if (s) {
        for (int r = 0; s->peers && r < g->world; r++)
            if (s->peers[r].fd >= 0) close(s->peers[r].fd);
        free(s->peers);
        free(s->stage);
        free(s->pfd);
        free(s);
    }
    free(g);
}

static rs_status tcp_create(rs_store *store, const char *name, int rank, int world, double timeout_s,
                            const int *global, rs_pg **out, rs_err *err);

/* A sub-group is a mesh of its own among the members, found through the same store under its name. */
static rs_status tcp_new_group(rs_pg *g, const int *ranks, int n, const char *name, rs_pg **out, rs_err *err)
{
    int *global = malloc(sizeof *global * (size_t)n), me = 0;
    if (!global) return rs_err_set(err, RS_ERR_NOMEM, "tcp: out of memory");
    for (int i = 0; i < n; i++) {
        global[i] = rs_pg_global_rank(g, ranks[i]);
        if (ranks[i] == g->rank) me = i;
    }
    rs_status st = tcp_create(g->store, name, me, n, g->timeout_s, global, out, err);
    free(global);
    return st;
}

const rs_pg_ops rs_pg_tcp_ops = {RS_PG_STEP_OPS("tcp", &tcp_transport), .new_group = tcp_new_group,
                                 .destroy = tcp_destroy};

/* Setup's view of one rank: its global number for messages (a sub-group is built before pg.c fills in
 * g->members), and the time left before the group's deadline. */
typedef struct mesh {
    rs_pg *g;
    const int *global;      /* (world) or NULL in a world group */
    double deadline;
} mesh;

static int gr(const mesh *m, int r) { return m->global ? m->global[r] : r; }

static int ms_left(const mesh *m)
{
    double left = m->deadline - rs_pg_now();
    return left <= 0 ? 0 : (int)(left * 1e3) + 1;
}

/* Blocking I/O on a non-blocking socket, bounded by the deadline: 0, or an errno (ETIMEDOUT; ECONNRESET
 * for EOF). */
static int io_all(const mesh *m, int fd, void *buf, size_t len, bool out)
{
    char *p = buf;
    while (len) {
        ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n > 0) {
            p += n, len -= (size_t)n;
            continue;
        }
        if (n == 0) return ECONNRESET; /* EOF: the other side went away */
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
        struct pollfd pf = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        if (poll(&pf, 1, ms_left(m)) == 0) return ETIMEDOUT;
    }
    return 0;
}

/* Each rank holds world-1 sockets: a large world meets the open-file limit first, so say so. */
static rs_status sock_fail(rs_err *err, const char *what, int e)
{
    return rs_err_set(err, RS_ERR_IO, "%s: %s%s", what, strerror(e),
                      e == EMFILE || e == ENFILE ? " (each rank needs one socket per other rank; raise `ulimit -n`)" : "");
}

static void hello_pack(unsigned char *h, int rank, int world, const char *name)
{
    memset(h, 0, TCP_HELLO);
    rs_store_put_u32(h, TCP_MAGIC);
    rs_store_put_u32(h + 4, (uint32_t)rank);
    rs_store_put_u32(h + 8, (uint32_t)world);
    memcpy(h + 12, name, strlen(name)); /* rs_step_pg_alloc checked it is under 64 bytes */
}

/* Connects to rank j (j < this rank) at the address it published and says who we are. */
static rs_status connect_to(mesh *m, int j, rs_err *err)
{
    rs_pg *g = m->g;
    char key[128], host[64];
    snprintf(key, sizeof key, "tcp/%s/addr/%d", g->name, j);
    void *val = NULL;
    size_t vn = 0;
    double left = m->deadline - rs_pg_now();
    rs_status st = rs_store_get(g->store, key, &val, &vn, left > 0 ? left : 1e-3, err);
    if (st == RS_ERR_TIMEOUT)
        return rs_err_set(err, RS_ERR_TIMEOUT,
                          "rank %d never published its address ('%s') within %.1f s; it may have failed to start "
                          "or be in another group",
                          gr(m, j), key, g->timeout_s);
    if (st) return st;
    int port = 0;
    bool parsed = vn < sizeof host && sscanf(val, "%63[^:]:%d", host, &port) == 2 && port > 0 && port < 65536;
    free(val);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (!parsed || inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return rs_err_set(err, RS_ERR_FORMAT, "rank %d published '%s' = '%.*s', not an IPv4 host:port", gr(m, j), key,
                          (int)(vn > 64 ? 64 : vn), parsed ? host : "?");
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return sock_fail(err, "socket", errno);
    ((tcp_impl *)g->impl)->peers[j].fd = fd; /* from here tcp_destroy closes it */
    int e = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (errno != EINPROGRESS) {
            e = errno;
        } else {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            socklen_t sl = sizeof e;
            int pr;
            while ((pr = poll(&pf, 1, ms_left(m))) < 0 && errno == EINTR) {}
            if (pr == 0) e = ETIMEDOUT;
            else getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl);
        }
    }
    if (e)
        return rs_err_set(err, e == ETIMEDOUT ? RS_ERR_TIMEOUT : RS_ERR_IO,
                          "cannot connect to rank %d at %s:%d: %s (did it exit? is a firewall in the way?)", gr(m, j),
                          host, port, strerror(e));
    unsigned char h[TCP_HELLO];
    hello_pack(h, g->rank, g->world, g->name);
    if ((e = io_all(m, fd, h, sizeof h, true)))
        return rs_err_set(err, e == ETIMEDOUT ? RS_ERR_TIMEOUT : RS_ERR_IO, "sending hello to rank %d at %s:%d: %s",
                          gr(m, j), host, port, strerror(e));
    return RS_OK;
}

/* Takes the connections of every higher rank; each names itself in its hello. Strangers (a wrong magic
 * or another group's name: a port scanner, a stale address) are dropped and the wait goes on. */
static rs_status accept_all(mesh *m, int lfd, rs_err *err)
{
    rs_pg *g = m->g;
    tcp_peer *peers = ((tcp_impl *)g->impl)->peers;
    int need = g->world - 1 - g->rank;
    while (need > 0) {
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        int pr = ms_left(m) ? poll(&pf, 1, ms_left(m)) : 0;
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) {
            char who[256] = "";
            int o = 0, k = 0;
            for (int r = g->rank + 1; r < g->world && o < (int)sizeof who - 16; r++)
                if (peers[r].fd < 0) o += snprintf(who + o, sizeof who - (size_t)o, "%s%d", k++ ? ", " : "", gr(m, r));
            return rs_err_set(err, RS_ERR_TIMEOUT, "rank%s %s never connected within %.1f s; %s may have failed to start",
                              need == 1 ? "" : "s", who, g->timeout_s, need == 1 ? "it" : "they");
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) continue;
            return sock_fail(err, "accept", errno);
        }
        unsigned char h[TCP_HELLO], want[TCP_HELLO];
        int e = io_all(m, fd, h, sizeof h, false);
        hello_pack(want, 0, g->world, g->name);
        /* a hello that never came ends here too: the next poll finds no time left and names who is missing */
        if (e || rs_store_get_u32(h) != TCP_MAGIC || memcmp(h + 12, want + 12, 64) != 0) {
            close(fd);
            continue;
        }
        uint32_t r = rs_store_get_u32(h + 4), w = rs_store_get_u32(h + 8);
        if (w != (uint32_t)g->world) {
            close(fd);
            return rs_err_set(err, RS_ERR_ARG,
                              "a rank of group '%s' was started with world %u, this one with %d; start every rank "
                              "with the same world size",
                              g->name, w, g->world);
        }
        if (r <= (uint32_t)g->rank || r >= (uint32_t)g->world || peers[r].fd >= 0) {
            close(fd);
            return rs_err_set(err, RS_ERR_ARG, "rank %u connected %s", r,
                              r > (uint32_t)g->rank && r < (uint32_t)g->world
                                  ? "twice (were two ranks started with the same rank?)"
                                  : "out of turn (only higher ranks connect; were two ranks started with the same rank?)");
        }
        peers[r].fd = fd;
        need--;
    }
    return RS_OK;
}

/* Listener on this rank's interface toward the store (its local address on that connection), on a
 * port the system picks, published for the higher ranks. */
static rs_status listen_and_publish(mesh *m, int *lfd, rs_err *err)
{
    rs_pg *g = m->g;
    char host[INET_ADDRSTRLEN];
    rs_status st = rs_store_local_addr(g->store, host, sizeof host, err);
    if (st) return st;
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, host, &a.sin_addr);
    socklen_t al = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return sock_fail(err, "socket", errno);
    *lfd = fd;
    int backlog = g->world < SOMAXCONN ? g->world : SOMAXCONN;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, backlog) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0)
        return rs_err_set(err, RS_ERR_IO, "listening on %s: %s", host, strerror(errno));
    char key[128], val[64];
    snprintf(key, sizeof key, "tcp/%s/addr/%d", g->name, g->rank);
    int n = snprintf(val, sizeof val, "%s:%d", host, ntohs(a.sin_port));
    return rs_store_set(g->store, key, val, (size_t)n, err);
}

/* Rank i connects to every j < i and accepts every j > i: each pair gets exactly one connection, and
 * the dependency only points down, so no two ranks wait on each other. The last rank has no one to
 * accept and publishes nothing. */
static rs_status build_mesh(mesh *m, rs_err *err)
{
    rs_pg *g = m->g;
    int lfd = -1;
    rs_status st = RS_OK;
    if (g->rank < g->world - 1) st = listen_and_publish(m, &lfd, err);
    for (int j = 0; j < g->rank && !st; j++) st = connect_to(m, j, err);
    if (!st) st = accept_all(m, lfd, err);
    if (lfd >= 0) close(lfd);
    if (st) return st;
    tcp_peer *peers = ((tcp_impl *)g->impl)->peers;
    int one = 1;
    for (int r = 0; r < g->world; r++) {
        /* small messages (barrier tokens, the steps of recursive doubling) go out at once, not after Nagle's wait */
        if (peers[r].fd >= 0 && setsockopt(peers[r].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
            return rs_err_set(err, RS_ERR_IO, "TCP_NODELAY on the connection to rank %d: %s", gr(m, r), strerror(errno));
    }
    return RS_OK;
}

static rs_status tcp_create(rs_store *store, const char *name, int rank, int world, double timeout_s,
                            const int *global, rs_pg **out, rs_err *err)
{
    rs_pg *g = NULL;
    rs_status st = rs_step_pg_alloc(&rs_pg_tcp_ops, store, name, rank, world, TCP_MAX_WORLD, timeout_s, &g, err);
    if (st) return st;
    tcp_impl *s = calloc(1, sizeof *s);
    g->impl = s;
    if (s) {
        s->peers = malloc(sizeof *s->peers * (size_t)world);
        s->stage = malloc(TCP_STAGE);
        s->pfd = malloc(sizeof *s->pfd * (size_t)world);
        /* before any failure: tcp_destroy closes every fd that is not -1 */
        for (int r = 0; s->peers && r < world; r++) s->peers[r] = (tcp_peer){.fd = -1};
    }
    if (!s || !s->peers || !s->stage || !s->pfd) {
        tcp_destroy(g);
        return rs_err_set(err, RS_ERR_NOMEM, "tcp: out of memory");
    }
    mesh m = {.g = g, .global = global, .deadline = rs_pg_now() + timeout_s};
    if (world > 1) st = build_mesh(&m, err);
    if (st) {
        rs_err_prefix(err, "tcp group '%s' rank %d", name, gr(&m, rank));
        tcp_destroy(g);
        return st;
    }
    *out = g;
    return RS_OK;
}

rs_status rs_pg_tcp_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                        rs_err *err)
{
    return tcp_create(store, name, rank, world, timeout_s, NULL, out, err);
}
