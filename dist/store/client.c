/* The store's client: one blocking TCP connection per rank, one request at a time, plus rendezvous and
 * barrier built on set/add/wait. Blocking requests carry their timeout to the server, which answers
 * when the keys appear or the time is up; the client only adds a margin for a server that vanished. */
#include "dist/store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dist/store/wire.h"

/* How long past a request's own timeout the client waits for the server's answer before it calls the
 * server unresponsive. */
#define REPLY_MARGIN_S 10.0

struct rs_store {
    int fd;
    int broken; /* a previous request failed midway: the stream is out of step */
    char where[300]; /* "host:port", for messages */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

/* One connect attempt bounded by the time left; returns the fd or -1 with errno set. */
static int try_connect(const struct addrinfo *ai, double left)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS) goto fail;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r = poll(&p, 1, (int)(left * 1e3) + 1);
    if (r <= 0) {
        errno = r == 0 ? ETIMEDOUT : errno;
        goto fail;
    }
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (soerr) {
        errno = soerr;
        goto fail;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1; /* requests are small and answered one by one: do not let Nagle delay them */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
fail:;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

rs_status rs_store_connect(const char *host, int port, double timeout_s, rs_store **out, rs_err *err)
{
    *out = NULL;
    if (!host || !*host) host = "127.0.0.1";
    if (port <= 0 || port > 65535)
        return rs_err_set(err, RS_ERR_ARG, "store: port %d is out of range (1..65535)", port);
    rs_store *st = calloc(1, sizeof *st);
    if (!st) return rs_err_set(err, RS_ERR_NOMEM, "store: out of memory");
    snprintf(st->where, sizeof st->where, "%s:%d", host, port);

    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char pstr[16];
    snprintf(pstr, sizeof pstr, "%d", port);
    double t0 = now_s(), deadline = t0 + timeout_s;
    int last = 0;
    for (;;) {
        if (!ai) {
            int g = getaddrinfo(host, pstr, &hints, &ai);
            if (g && g != EAI_AGAIN) {
                free(st);
                return rs_err_set(err, RS_ERR_ARG, "store: cannot resolve host '%s': %s", host, gai_strerror(g));
            }
        }
        double left = deadline - now_s();
        if (ai) {
            st->fd = try_connect(ai, left > 0 ? left : 0);
            if (st->fd >= 0) break;
            last = errno;
        }
        left = deadline - now_s();
        if (left <= 0) {
            if (ai) freeaddrinfo(ai);
            rs_err_set(err, RS_ERR_TIMEOUT,
                       "store: cannot connect to %s after %.1f s (%s); is the store server running there "
                       "(the launcher or rank 0), and are MASTER_ADDR/MASTER_PORT right?",
                       st->where, now_s() - t0, last ? strerror(last) : "name lookup failed");
            free(st);
            return RS_ERR_TIMEOUT;
        }
        sleep_s(left < 0.05 ? left : 0.05); /* the server may not be up yet */
    }
    freeaddrinfo(ai);
    *out = st;
    return RS_OK;
}

int rs_store_fd(const rs_store *st) { return st ? st->fd : -1; }

void rs_store_close(rs_store *st)
{
    if (!st) return;
    close(st->fd);
    free(st);
}

rs_status rs_store_local_addr(rs_store *st, char *host, size_t cap, rs_err *err)
{
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    if (getsockname(st->fd, (struct sockaddr *)&a, &al) != 0)
        return rs_err_set(err, RS_ERR_IO, "store: local address of the connection to %s: %s", st->where,
                          strerror(errno));
    if (a.sin_family != AF_INET)
        return rs_err_set(err, RS_ERR_IO, "store: the connection to %s has no IPv4 local address", st->where);
    if (!inet_ntop(AF_INET, &a.sin_addr, host, (socklen_t)cap))
        return rs_err_set(err, RS_ERR_ARG, "store: local address: %zu bytes is too small (give INET_ADDRSTRLEN)", cap);
    return RS_OK;
}

static rs_status io_fail(rs_store *st, rs_err *err, const char *what, int e)
{
    st->broken = 1;
    if (e == 0)
        return rs_err_set(err, RS_ERR_IO, "store %s: the server at %s closed the connection (stopped or crashed?)",
                          what, st->where);
    return rs_err_set(err, RS_ERR_IO, "store %s: connection to %s failed: %s", what, st->where, strerror(e));
}

static rs_status send_all(rs_store *st, const uint8_t *p, size_t n, const char *what, rs_err *err)
{
    while (n) {
        ssize_t w = send(st->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return io_fail(st, err, what, w < 0 ? errno : EPIPE);
        p += w, n -= (size_t)w;
    }
    return RS_OK;
}

static rs_status recv_all(rs_store *st, uint8_t *p, size_t n, double deadline, const char *what, rs_err *err)
{
    while (n) {
        double left = deadline - now_s();
        struct pollfd pf = {.fd = st->fd, .events = POLLIN};
        int r = left <= 0 ? 0 : poll(&pf, 1, (int)(left * 1e3) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return io_fail(st, err, what, errno);
        if (r == 0) {
            st->broken = 1;
            return rs_err_set(err, RS_ERR_TIMEOUT, "store %s: the server at %s did not answer in time", what,
                              st->where);
        }
        ssize_t g = recv(st->fd, p, n, 0);
        if (g < 0 && errno == EINTR) continue;
        if (g <= 0) return io_fail(st, err, what, g < 0 ? errno : 0);
        p += g, n -= (size_t)g;
    }
    return RS_OK;
}

/* Sends one request and reads its reply; *payload (caller frees, zero-terminated) gets the reply's
 * bytes when payload is not NULL. wait_s is how long the server may legitimately take. */
static rs_status request(rs_store *st, rs_store_op op, const char *key, const void *val, size_t vlen,
                         double wait_s, const char *what, rs_store_reply *status, uint8_t **payload,
                         size_t *plen, rs_err *err)
{
    if (payload) *payload = NULL;
    if (plen) *plen = 0;
    *status = RS_STORE_REPLY_BAD;
    if (st->broken)
        return rs_err_set(err, RS_ERR_IO, "store %s: the connection to %s failed earlier; reconnect", what,
                          st->where);
    size_t klen = key ? strlen(key) : 0;
    if (op != RS_STORE_OP_WAIT && (klen < 1 || klen > RS_STORE_KEY_MAX))
        return rs_err_set(err, RS_ERR_ARG, "store %s: key length %zu is outside 1..%d bytes", what, klen,
                          RS_STORE_KEY_MAX);
    if (vlen > RS_STORE_VAL_MAX)
        return rs_err_set(err, RS_ERR_ARG, "store %s '%s': value of %zu bytes is over the %d MiB limit", what,
                          key, vlen, RS_STORE_VAL_MAX >> 20);
    uint8_t head[RS_STORE_REQ_HEAD];
    head[0] = (uint8_t)op;
    rs_store_put_u32(head + 1, (uint32_t)klen);
    uint8_t vl[8];
    rs_store_put_u64(vl, vlen);
    rs_status s;
    if ((s = send_all(st, head, 5, what, err)) || (s = send_all(st, (const uint8_t *)key, klen, what, err)) ||
        (s = send_all(st, vl, 8, what, err)) || (s = send_all(st, val, vlen, what, err)))
        return s;

    double deadline = now_s() + wait_s + REPLY_MARGIN_S;
    uint8_t rh[RS_STORE_REPLY_HEAD];
    if ((s = recv_all(st, rh, sizeof rh, deadline, what, err))) return s;
    uint64_t n = rs_store_get_u64(rh + 1);
    if (rh[0] > RS_STORE_REPLY_BAD || n > (uint64_t)RS_STORE_VAL_MAX + 8) {
        st->broken = 1;
        return rs_err_set(err, RS_ERR_FORMAT, "store %s: %s sent a malformed reply; is it a ringside store?",
                          what, st->where);
    }
    uint8_t *p = malloc((size_t)n + 1);
    if (!p) {
        st->broken = 1;
        return rs_err_set(err, RS_ERR_NOMEM, "store %s: no memory for a %" PRIu64 "-byte reply", what, n);
    }
    if ((s = recv_all(st, p, (size_t)n, deadline, what, err))) {
        free(p);
        return s;
    }
    p[n] = 0;
    *status = (rs_store_reply)rh[0];
    if (plen) *plen = (size_t)n;
    if (payload) *payload = p;
    else free(p);
    return RS_OK;
}

static uint32_t timeout_ms(double t)
{
    if (!(t > 0)) return 0;
    return t > 4e6 ? 4000000000u : (uint32_t)(t * 1e3 + 0.5);
}

rs_status rs_store_set(rs_store *st, const char *key, const void *val, size_t n, rs_err *err)
{
    rs_store_reply r = RS_STORE_REPLY_BAD;
    return request(st, RS_STORE_OP_SET, key, val, n, 0, "set", &r, NULL, NULL, err);
}

rs_status rs_store_get(rs_store *st, const char *key, void **val, size_t *n, double timeout_s, rs_err *err)
{
    *val = NULL;
    uint8_t t[4];
    rs_store_put_u32(t, timeout_ms(timeout_s));
    rs_store_reply r = RS_STORE_REPLY_BAD;
    uint8_t *p = NULL;
    size_t len = 0;
    rs_status s = request(st, RS_STORE_OP_GET, key, t, 4, timeout_s, "get", &r, &p, &len, err);
    if (s) return s;
    if (r != RS_STORE_REPLY_OK) {
        free(p);
        return rs_err_set(err, RS_ERR_TIMEOUT, "store get '%s': key not set after %.1f s (store at %s)", key,
                          timeout_s, st->where);
    }
    *val = p;
    if (n) *n = len;
    return RS_OK;
}

rs_status rs_store_add(rs_store *st, const char *key, int64_t delta, int64_t *result, rs_err *err)
{
    uint8_t d[8];
    rs_store_put_u64(d, (uint64_t)delta);
    rs_store_reply r = RS_STORE_REPLY_BAD;
    uint8_t *p = NULL;
    size_t len = 0;
    rs_status s = request(st, RS_STORE_OP_ADD, key, d, 8, 0, "add", &r, &p, &len, err);
    if (s) return s;
    if (r != RS_STORE_REPLY_OK || len != 8) {
        free(p);
        return rs_err_set(err, RS_ERR_ARG, "store add '%s': the key holds a value that is not an integer counter",
                          key);
    }
    if (result) *result = (int64_t)rs_store_get_u64(p);
    free(p);
    return RS_OK;
}

rs_status rs_store_check(rs_store *st, const char *key, int *exists, rs_err *err)
{
    rs_store_reply r = RS_STORE_REPLY_BAD;
    rs_status s = request(st, RS_STORE_OP_CHECK, key, NULL, 0, 0, "check", &r, NULL, NULL, err);
    if (s) return s;
    *exists = r == RS_STORE_REPLY_OK;
    return RS_OK;
}

/* WAIT; on a timeout *missing (caller frees) gets the server's packed list of missing keys. */
static rs_status wait_keys(rs_store *st, const char *const *keys, int nkeys, double timeout_s,
                           uint8_t **missing, rs_err *err)
{
    *missing = NULL;
    if (nkeys < 1 || nkeys > RS_STORE_WAIT_KEYS_MAX)
        return rs_err_set(err, RS_ERR_ARG, "store wait: %d keys; give 1..%d", nkeys, RS_STORE_WAIT_KEYS_MAX);
    size_t n = 8;
    for (int i = 0; i < nkeys; i++) {
        size_t l = strlen(keys[i]);
        if (l < 1 || l > RS_STORE_KEY_MAX)
            return rs_err_set(err, RS_ERR_ARG, "store wait: key %d has length %zu, outside 1..%d bytes", i, l,
                              RS_STORE_KEY_MAX);
        n += 4 + l;
    }
    uint8_t *v = malloc(n);
    if (!v) return rs_err_set(err, RS_ERR_NOMEM, "store wait: out of memory");
    rs_store_put_u32(v, timeout_ms(timeout_s));
    rs_store_put_u32(v + 4, (uint32_t)nkeys);
    size_t pos = 8;
    for (int i = 0; i < nkeys; i++) {
        size_t l = strlen(keys[i]);
        rs_store_put_u32(v + pos, (uint32_t)l);
        memcpy(v + pos + 4, keys[i], l);
        pos += 4 + l;
    }
    rs_store_reply r = RS_STORE_REPLY_BAD;
    uint8_t *p = NULL;
    size_t len = 0;
    rs_status s = request(st, RS_STORE_OP_WAIT, NULL, v, n, timeout_s, "wait", &r, &p, &len, err);
    free(v);
    if (s) return s;
    if (r == RS_STORE_REPLY_OK) {
        free(p);
        return RS_OK;
    }
    /* The list came from the server: check it like any peer's bytes before walking it. */
    size_t at = 4;
    uint32_t cnt = len >= 4 ? rs_store_get_u32(p) : 0;
    for (uint32_t i = 0; i < cnt && at <= len; i++)
        at = len - at < 4 ? len + 1 : at + 4 + rs_store_get_u32(p + at);
    if (len < 4 || at != len) {
        free(p);
        st->broken = 1;
        return rs_err_set(err, RS_ERR_FORMAT, "store wait: %s sent a malformed reply", st->where);
    }
    *missing = p;
    return rs_err_set(err, RS_ERR_TIMEOUT, "store wait: timed out after %.1f s", timeout_s);
}

rs_status rs_store_wait(rs_store *st, const char *const *keys, int nkeys, double timeout_s, rs_err *err)
{
    uint8_t *missing;
    rs_status s = wait_keys(st, keys, nkeys, timeout_s, &missing, err);
    if (s != RS_ERR_TIMEOUT || !missing) return s;
    char msg[RS_ERR_MSG_MAX];
    uint32_t cnt = rs_store_get_u32(missing);
    int o = snprintf(msg, sizeof msg, "store wait: %u of %d keys still missing after %.1f s:", cnt, nkeys,
                     timeout_s);
    const uint8_t *p = missing + 4, *k;
    size_t kl;
    for (uint32_t i = 0; i < cnt && o < (int)sizeof msg; i++) {
        p = rs_store_wire_next_key(p, &k, &kl);
        o += snprintf(msg + o, sizeof msg - (size_t)o, "%s '%.*s'", i ? "," : "", (int)(kl > 200 ? 200 : kl),
                      (const char *)k);
    }
    free(missing);
    return rs_err_set(err, RS_ERR_TIMEOUT, "%s", msg);
}

#define RS_STORE_WORLD_SCAN 1024 /* RS_LAUNCH_MAX_RANKS: keys looked at for a differing world size */

/* The WORLD_SIZE rank r arrived with ("world=N" in its key), 0 when it has not arrived or did not say. */
static int declared_world(rs_store *st, int r)
{
    char key[32];
    snprintf(key, sizeof key, "rank/%d", r);
    int exists = 0;
    rs_err e = {0};
    if (rs_store_check(st, key, &exists, &e) || !exists) return 0;
    void *val = NULL;
    size_t n = 0;
    int w = 0;
    if (!rs_store_get(st, key, &val, &n, 1.0, &e) && n > 6 && n < 24 && !memcmp(val, "world=", 6)) {
        char text[24];
        memcpy(text, val, n);
        text[n] = 0;
        w = atoi(text + 6);
    }
    free(val);
    return w;
}

/* Ranks started by hand with different WORLD_SIZE values meet in one store, and each would wait for
 * ranks that never come, or go on with a group the others count differently: said as such. RS_OK when
 * every rank seen (ours, and one past our world) declared `world`. */
static rs_status same_world(rs_store *st, int rank, int world, rs_err *err)
{
    for (int r = 0; r <= world && r <= RS_STORE_WORLD_SCAN; r++) {
        int w = declared_world(st, r);
        if (r == world && w)
            return rs_err_set(err, RS_ERR_ARG, "rendezvous: the world sizes differ: rank %d has WORLD_SIZE=%d and "
                              "rank %d arrived with WORLD_SIZE=%d; start every rank with the same WORLD_SIZE",
                              rank, world, r, w);
        if (r < world && w && w != world)
            return rs_err_set(err, RS_ERR_ARG, "rendezvous: the world sizes differ: rank %d has WORLD_SIZE=%d, rank "
                              "%d has WORLD_SIZE=%d; start every rank with the same WORLD_SIZE", rank, world, r, w);
    }
    return RS_OK;
}

rs_status rs_store_rendezvous(rs_store *st, int rank, int world, double timeout_s, rs_err *err)
{
    if (world < 1 || rank < 0 || rank >= world)
        return rs_err_set(err, RS_ERR_ARG, "rendezvous: rank %d is outside world size %d", rank, world);
    char key[32], val[24];
    snprintf(key, sizeof key, "rank/%d", rank);
    int vn = snprintf(val, sizeof val, "world=%d", world);
    rs_status s = rs_store_set(st, key, val, (size_t)vn, err);
    if (s) return rs_err_prefix(err, "rendezvous (rank %d)", rank);
    /* the ranks here before us: a differing world size is said at once, not at the timeout */
    if (same_world(st, rank, world, err)) return RS_ERR_ARG;
    char **keys = malloc((size_t)world * sizeof *keys);
    char *buf = malloc((size_t)world * 32);
    if (!keys || !buf) {
        free(keys), free(buf);
        return rs_err_set(err, RS_ERR_NOMEM, "rendezvous: out of memory");
    }
    for (int r = 0; r < world; r++) {
        keys[r] = buf + 32 * (size_t)r;
        snprintf(keys[r], 32, "rank/%d", r);
    }
    uint8_t *missing;
    s = wait_keys(st, (const char *const *)keys, world, timeout_s, &missing, err);
    free(keys), free(buf);
    if (s == RS_OK) return same_world(st, rank, world, err);
    if (s != RS_ERR_TIMEOUT || !missing) return rs_err_prefix(err, "rendezvous (rank %d)", rank);
    if (same_world(st, rank, world, err)) {
        free(missing);
        return RS_ERR_ARG;
    }
    uint32_t cnt = rs_store_get_u32(missing);
    char msg[RS_ERR_MSG_MAX];
    int o = snprintf(msg, sizeof msg, "rendezvous: %d of %d ranks arrived after %.1f s; missing rank%s",
                     world - (int)cnt, world, timeout_s, cnt == 1 ? "" : "s");
    const uint8_t *p = missing + 4, *k;
    size_t kl;
    for (uint32_t i = 0; i < cnt && o < (int)sizeof msg; i++) {
        p = rs_store_wire_next_key(p, &k, &kl);
        /* keys are "rank/<r>": print the number only */
        o += snprintf(msg + o, sizeof msg - (size_t)o, "%s %.*s", i ? "," : "", (int)(kl > 5 ? kl - 5 : 0),
                      (const char *)k + (kl > 5 ? 5 : kl));
    }
    free(missing);
    return rs_err_set(err, RS_ERR_TIMEOUT, "%s", msg);
}

rs_status rs_store_barrier(rs_store *st, const char *name, int world, double timeout_s, rs_err *err)
{
    if (world < 1) return rs_err_set(err, RS_ERR_ARG, "barrier '%s': world size %d must be >= 1", name, world);
    if (strlen(name) > 256) return rs_err_set(err, RS_ERR_ARG, "barrier: name longer than 256 bytes");
    char ckey[300], gkey[340];
    snprintf(ckey, sizeof ckey, "barrier/%s/count", name);
    int64_t n;
    rs_status s = rs_store_add(st, ckey, 1, &n, err);
    if (s) return rs_err_prefix(err, "barrier '%s'", name);
    int64_t gen = (n - 1) / world;
    snprintf(gkey, sizeof gkey, "barrier/%s/gen/%" PRId64, name, gen);
    if (n % world == 0) {
        s = rs_store_set(st, gkey, "1", 1, err); /* the last arrival of this generation releases it */
        return s ? rs_err_prefix(err, "barrier '%s'", name) : RS_OK;
    }
    const char *keys[1] = {gkey};
    uint8_t *missing;
    s = wait_keys(st, keys, 1, timeout_s, &missing, err);
    free(missing);
    if (s != RS_ERR_TIMEOUT) return s ? rs_err_prefix(err, "barrier '%s'", name) : RS_OK;
    int64_t now = n;
    if (rs_store_add(st, ckey, 0, &now, NULL) != RS_OK) now = n;
    int64_t arrived = now - gen * world;
    if (arrived > world) arrived = world;
    return rs_err_set(err, RS_ERR_TIMEOUT, "barrier '%s' (generation %" PRId64 "): %" PRId64 " of %d ranks arrived after %.1f s",
                      name, gen, arrived, world, timeout_s);
}
