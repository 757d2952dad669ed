/* Tests of the rendezvous store across real processes: the server runs in this process's thread, the
 * clients in forked children, all over loopback. Run with a case name (see main) or none for all. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/store/store.h"
#include "dist/store/wire.h"
#include "rs_test.h"

static const char *HOST = "127.0.0.1";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static rs_store_server *start(void)
{
    rs_store_server *s = NULL;
    rs_err e = {0};
    rs_status st = rs_store_server_start(HOST, 0, &s, &e);
    RS_CHECK(st == RS_OK, "server start: %s", e.msg);
    return s;
}

/* Tests that fork client processes run the server in a process of its own: forking a process that
 * has a server thread running can hand the child a lock that thread held (an allocator lock under
 * some sanitizer runtimes), and the child then hangs. The test process stays single-threaded. */
typedef struct srvproc {
    pid_t pid;
    int port;
} srvproc;

static srvproc start_proc(void)
{
    srvproc sp = {-1, 0};
    int fds[2];
    if (pipe(fds) != 0) {
        RS_CHECK(0, "pipe: %s", strerror(errno));
        return sp;
    }
    pid_t p = fork();
    if (p == 0) {
        close(fds[0]);
        rs_store_server *s = NULL;
        rs_err e = {0};
        int port = rs_store_server_start(HOST, 0, &s, &e) == RS_OK ? rs_store_server_port(s) : -1;
        if (write(fds[1], &port, sizeof port) != (ssize_t)sizeof port) _exit(2);
        close(fds[1]);
        for (;;) pause(); /* serves from its thread until the test kills it */
    }
    close(fds[1]);
    int port = -1;
    if (read(fds[0], &port, sizeof port) != (ssize_t)sizeof port) port = -1;
    close(fds[0]);
    RS_CHECK(port > 0, "server process did not start");
    sp.pid = p;
    sp.port = port;
    return sp;
}

static void stop_proc(srvproc *sp)
{
    if (sp->pid <= 0) return;
    kill(sp->pid, SIGKILL); /* like a server that goes away: clients see the connection close */
    waitpid(sp->pid, NULL, 0);
    sp->pid = -1;
}

static rs_store *dial(int port)
{
    rs_store *c = NULL;
    rs_err e = {0};
    RS_CHECK(rs_store_connect(HOST, port, 2.0, &c, &e) == RS_OK, "connect: %s", e.msg);
    return c;
}

/* Runs fn(port, i) in n children; returns how many children failed (exit status != 0). */
typedef void (*child_fn)(int port, int i);
static pid_t spawn(child_fn fn, int port, int i)
{
    pid_t p = fork();
    if (p == 0) {
        fn(port, i);
        fflush(stderr);
        _exit(rs_test_failures ? 1 : 0);
    }
    return p;
}

static int reap(pid_t *pids, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int ws = 0;
        waitpid(pids[i], &ws, 0);
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) bad++;
    }
    return bad;
}

static int run_children(child_fn fn, int port, int n)
{
    pid_t pids[16];
    for (int i = 0; i < n; i++) pids[i] = spawn(fn, port, i);
    return reap(pids, n);
}

/* Children announce "ready/<i>" just before they block, so the parent acts while they wait rather
 * than guessing how long a fork takes on a loaded machine. */
static void announce(rs_store *c, int i)
{
    char key[32];
    rs_err e = {0};
    snprintf(key, sizeof key, "ready/%d", i);
    RS_CHECK(rs_store_set(c, key, "1", 1, &e) == RS_OK, "announce: %s", e.msg);
}

static void await_ready(rs_store *c, int n)
{
    char buf[16][32];
    const char *keys[16];
    for (int i = 0; i < n; i++) {
        snprintf(buf[i], sizeof buf[i], "ready/%d", i);
        keys[i] = buf[i];
    }
    rs_err e = {0};
    RS_CHECK(rs_store_wait(c, keys, n, 10.0, &e) == RS_OK, "children ready: %s", e.msg);
    usleep(200000); /* from their announcement to their blocking request */
}

/* ---- set / get ---- */

static void child_set(int port, int i)
{
    (void)i;
    rs_store *c = dial(port);
    rs_err e = {0};
    RS_CHECK(rs_store_set(c, "greeting", "hello", 5, &e) == RS_OK, "set: %s", e.msg);
    rs_store_close(c);
}

static void child_get(int port, int i)
{
    (void)i;
    rs_store *c = dial(port);
    rs_err e = {0};
    void *v = NULL;
    size_t n = 0;
    RS_CHECK(rs_store_get(c, "greeting", &v, &n, 2.0, &e) == RS_OK, "get: %s", e.msg);
    RS_CHECK(n == 5 && v && !memcmp(v, "hello", 5), "got %zu bytes '%s'", n, v ? (char *)v : "");
    free(v);
    rs_store_close(c);
}

static void test_setget(void)
{
    srvproc s = start_proc();
    int port = s.port;
    pid_t p[2] = {spawn(child_get, port, 0), spawn(child_set, port, 1)};
    RS_CHECK(reap(p, 2) == 0, "a child failed");

    rs_store *c = dial(port);
    rs_err e = {0};
    int ex = -1;
    RS_CHECK(rs_store_check(c, "greeting", &ex, &e) == RS_OK && ex == 1, "check existing: %d %s", ex, e.msg);
    RS_CHECK(rs_store_check(c, "nope", &ex, &e) == RS_OK && ex == 0, "check missing: %d %s", ex, e.msg);
    int64_t r = 0;
    RS_CHECK(rs_store_add(c, "greeting", 1, &r, &e) == RS_ERR_ARG, "add to text must fail");
    RS_CHECK(strstr(e.msg, "greeting") != NULL, "message names the key: %s", e.msg);
    void *v = NULL;
    size_t n;
    double t0 = now_s();
    RS_CHECK(rs_store_get(c, "nope", &v, &n, 0.2, &e) == RS_ERR_TIMEOUT, "get of a missing key times out");
    RS_CHECK(now_s() - t0 >= 0.15 && now_s() - t0 < 1.0, "get timeout took %.2f s", now_s() - t0);
    RS_CHECK(strstr(e.msg, "'nope'") != NULL, "message names the key: %s", e.msg);
    /* A large value and an empty value round-trip; the connection stays usable after a timeout. */
    size_t big = (size_t)3 << 20;
    uint8_t *b = malloc(big);
    for (size_t i = 0; i < big; i++) b[i] = (uint8_t)(i * 7 + 3);
    RS_CHECK(rs_store_set(c, "big", b, big, &e) == RS_OK, "set big: %s", e.msg);
    RS_CHECK(rs_store_get(c, "big", &v, &n, 1.0, &e) == RS_OK && n == big && !memcmp(v, b, big), "big value");
    free(v);
    free(b);
    RS_CHECK(rs_store_set(c, "empty", NULL, 0, &e) == RS_OK, "set empty: %s", e.msg);
    RS_CHECK(rs_store_get(c, "empty", &v, &n, 1.0, &e) == RS_OK && n == 0, "empty value");
    free(v);
    RS_CHECK(rs_store_set(c, "", "x", 1, &e) == RS_ERR_ARG, "empty key refused");
    rs_store_close(c);
    stop_proc(&s);
}

/* ---- get blocks until a later set ---- */

static void child_get_late(int port, int i)
{
    rs_store *c = dial(port);
    announce(c, i);
    rs_err e = {0};
    void *v = NULL;
    size_t n = 0;
    double t0 = now_s();
    RS_CHECK(rs_store_get(c, "late", &v, &n, 2.0, &e) == RS_OK, "get: %s", e.msg);
    double dt = now_s() - t0;
    RS_CHECK(dt >= 0.1 && dt < 1.5, "get returned after %.3f s; the set came >= 0.2 s later", dt);
    RS_CHECK(v && !strcmp(v, "finally"), "value '%s'", v ? (char *)v : "");
    free(v);
    rs_store_close(c);
}

static void test_get_blocks(void)
{
    srvproc s = start_proc();
    int port = s.port;
    pid_t p[3];
    for (int i = 0; i < 3; i++) p[i] = spawn(child_get_late, port, i);
    rs_store *c = dial(port);
    await_ready(c, 3);
    rs_err e = {0};
    RS_CHECK(rs_store_set(c, "late", "finally", 7, &e) == RS_OK, "set: %s", e.msg);
    RS_CHECK(reap(p, 3) == 0, "a child failed");
    rs_store_close(c);
    stop_proc(&s);
}

/* ---- add from 8 processes ---- */

static void child_add(int port, int i)
{
    (void)i;
    rs_store *c = dial(port);
    rs_err e = {0};
    int64_t last = 0, r = 0;
    for (int k = 0; k < 1000; k++) {
        if (rs_store_add(c, "ctr", 1, &r, &e) != RS_OK) {
            RS_CHECK(0, "add %d: %s", k, e.msg);
            break;
        }
        RS_CHECK(r > last, "counter went from %lld to %lld", (long long)last, (long long)r);
        last = r;
    }
    rs_store_close(c);
}

static void test_add(void)
{
    srvproc s = start_proc();
    int port = s.port;
    RS_CHECK(run_children(child_add, port, 8) == 0, "a child failed");
    rs_store *c = dial(port);
    rs_err e = {0};
    int64_t r = -1;
    RS_CHECK(rs_store_add(c, "ctr", 0, &r, &e) == RS_OK && r == 8000, "counter %lld, want 8000 (%s)", (long long)r,
             e.msg);
    void *v = NULL;
    RS_CHECK(rs_store_get(c, "ctr", &v, NULL, 1.0, &e) == RS_OK && v && !strcmp(v, "8000"), "as text '%s'",
             v ? (char *)v : "");
    free(v);
    RS_CHECK(rs_store_add(c, "neg", -5, &r, &e) == RS_OK && r == -5, "negative delta: %lld", (long long)r);
    rs_store_close(c);
    stop_proc(&s);
}

/* ---- wait ---- */

static void test_wait(void)
{
    srvproc s = start_proc();
    int port = s.port;
    rs_store *c = dial(port);
    rs_err e = {0};
    RS_CHECK(rs_store_set(c, "alpha", "1", 1, &e) == RS_OK, "set: %s", e.msg);
    const char *keys[] = {"alpha", "beta", "gamma"};
    double t0 = now_s();
    RS_CHECK(rs_store_wait(c, keys, 3, 0.3, &e) == RS_ERR_TIMEOUT, "wait must time out");
    double dt = now_s() - t0;
    RS_CHECK(dt >= 0.25 && dt < 1.0, "wait took %.2f s for a 0.3 s timeout", dt);
    RS_CHECK(strstr(e.msg, "'beta'") && strstr(e.msg, "'gamma'") && !strstr(e.msg, "'alpha'"),
             "message must name beta and gamma only: %s", e.msg);
    RS_CHECK(strstr(e.msg, "2 of 3") != NULL, "message counts the missing keys: %s", e.msg);
    RS_CHECK(rs_store_set(c, "beta", "1", 1, &e) == RS_OK && rs_store_set(c, "gamma", "1", 1, &e) == RS_OK, "set");
    RS_CHECK(rs_store_wait(c, keys, 3, 0.3, &e) == RS_OK, "wait on present keys: %s", e.msg);
    rs_store_close(c);
    stop_proc(&s);
}

/* ---- rendezvous and barrier ---- */

static void child_rdzv(int port, int rank)
{
    rs_store *c = dial(port);
    rs_err e = {0};
    RS_CHECK(rs_store_rendezvous(c, rank, 4, 2.0, &e) == RS_OK, "rank %d rendezvous: %s", rank, e.msg);
    /* Three barriers in a row: a rank that raced ahead must not pass the next generation alone. */
    for (int g = 0; g < 3; g++) {
        char key[32];
        snprintf(key, sizeof key, "step/%d/%d", g, rank);
        RS_CHECK(rs_store_set(c, key, "1", 1, &e) == RS_OK, "set: %s", e.msg);
        RS_CHECK(rs_store_barrier(c, "b", 4, 2.0, &e) == RS_OK, "rank %d barrier %d: %s", rank, g, e.msg);
        for (int r = 0; r < 4; r++) {
            int ex = 0;
            snprintf(key, sizeof key, "step/%d/%d", g, r);
            RS_CHECK(rs_store_check(c, key, &ex, &e) == RS_OK && ex, "after barrier %d, rank %d not at step", g, r);
        }
    }
    rs_store_close(c);
}

static void test_rendezvous(void)
{
    srvproc s = start_proc();
    RS_CHECK(run_children(child_rdzv, s.port, 4) == 0, "a rank failed");
    stop_proc(&s);
}

static void child_rdzv_missing(int port, int i)
{
    static const int ranks[] = {0, 2, 3};
    rs_store *c = dial(port);
    rs_err e = {0};
    double t0 = now_s();
    RS_CHECK(rs_store_rendezvous(c, ranks[i], 4, 0.5, &e) == RS_ERR_TIMEOUT, "rendezvous must time out");
    double dt = now_s() - t0;
    RS_CHECK(dt >= 0.45 && dt < 1.0, "timed out after %.2f s for 0.5 s", dt);
    RS_CHECK(strstr(e.msg, "3 of 4 ranks") && strstr(e.msg, "missing rank 1") && !strstr(e.msg, "ranks 1"),
             "message: %s", e.msg);
    rs_store_close(c);
}

static void test_rendezvous_missing(void)
{
    srvproc s = start_proc();
    RS_CHECK(run_children(child_rdzv_missing, s.port, 3) == 0, "a rank failed");
    /* Two missing of four: the numbers come as a list. */
    rs_store *c = dial(s.port);
    rs_err e = {0};
    rs_store_server *s2 = start();
    rs_store *c2 = dial(rs_store_server_port(s2));
    rs_store_set(c2, "rank/2", "1", 1, &e);
    RS_CHECK(rs_store_rendezvous(c2, 0, 4, 0.2, &e) == RS_ERR_TIMEOUT, "must time out");
    RS_CHECK(strstr(e.msg, "rendezvous: 2 of 4 ranks arrived after 0.2 s; missing ranks 1, 3") != NULL,
             "message: %s", e.msg);
    rs_store_close(c2);
    rs_store_server_stop(s2);
    rs_store_close(c);
    stop_proc(&s);
}

/* ---- failures: nobody listening, port in use, server stopped ---- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_connect_refused(void)
{
    int port = free_port();
    rs_store *c = (rs_store *)&c;
    rs_err e = {0};
    double t0 = now_s();
    RS_CHECK(rs_store_connect(HOST, port, 0.4, &c, &e) == RS_ERR_TIMEOUT, "connect must fail");
    double dt = now_s() - t0;
    RS_CHECK(dt >= 0.35 && dt < 1.2, "gave up after %.2f s for 0.4 s", dt);
    RS_CHECK(c == NULL, "no store on failure");
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    RS_CHECK(strstr(e.msg, where) != NULL, "message names %s: %s", where, e.msg);
    rs_store_close(NULL);
    rs_store_server_stop(NULL);
}

static void child_connect_early(int port, int i)
{
    (void)i;
    rs_store *c = NULL;
    rs_err e = {0};
    RS_CHECK(rs_store_connect(HOST, port, 2.0, &c, &e) == RS_OK, "connect before the server: %s", e.msg);
    rs_store_close(c);
}

static void test_port_in_use(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    RS_CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 4) == 0, "bind: %s", strerror(errno));
    getsockname(fd, (struct sockaddr *)&a, &l);
    int port = ntohs(a.sin_port);
    rs_store_server *s = (rs_store_server *)&s;
    rs_err e = {0};
    double t0 = now_s();
    RS_CHECK(rs_store_server_start(HOST, port, &s, &e) == RS_ERR_IO, "start on a busy port must fail");
    RS_CHECK(now_s() - t0 < 0.5, "reported at once, not after %.2f s", now_s() - t0);
    RS_CHECK(s == NULL, "no server on failure");
    char num[16];
    snprintf(num, sizeof num, "%d", port);
    RS_CHECK(strstr(e.msg, num) && strstr(e.msg, "in use") && strstr(e.msg, "port 0"), "message: %s", e.msg);
    close(fd);

    /* A client that starts before its server keeps retrying and gets in. */
    port = free_port();
    pid_t p = spawn(child_connect_early, port, 0);
    usleep(300000);
    RS_CHECK(rs_store_server_start(HOST, port, &s, &e) == RS_OK, "start: %s", e.msg);
    RS_CHECK(reap(&p, 1) == 0, "early client failed");
    rs_store_server_stop(s);
}

static void child_wait_forever(int port, int i)
{
    rs_store *c = dial(port);
    announce(c, i);
    rs_err e = {0};
    double t0 = now_s();
    rs_status st;
    if (i % 2 == 0) {
        void *v = NULL;
        st = rs_store_get(c, "never", &v, NULL, 2.0, &e);
        free(v);
    } else {
        const char *k[] = {"never"};
        st = rs_store_wait(c, k, 1, 2.0, &e);
    }
    RS_CHECK(st == RS_ERR_IO, "must fail with an i/o error, got %d: %s", st, e.msg);
    RS_CHECK(now_s() - t0 < 1.5, "failed after %.2f s; the server stopped ~0.2 s in", now_s() - t0);
    RS_CHECK(strstr(e.msg, "closed the connection") != NULL, "message: %s", e.msg);
    /* Later requests on the dead connection fail at once too. */
    RS_CHECK(rs_store_set(c, "x", "1", 1, &e) == RS_ERR_IO, "set after the server stopped must fail");
    rs_store_close(c);
}

static void test_stop_while_waiting(void)
{
    srvproc s = start_proc();
    int port = s.port;
    pid_t p[4];
    for (int i = 0; i < 4; i++) p[i] = spawn(child_wait_forever, port, i);
    rs_store *c = dial(port);
    await_ready(c, 4);
    stop_proc(&s);
    rs_store_close(c);
    RS_CHECK(reap(p, 4) == 0, "a waiting client failed");
}

/* ---- two servers in one process ---- */

static void test_two_servers(void)
{
    rs_store_server *a = start(), *b = start();
    RS_CHECK(rs_store_server_port(a) != rs_store_server_port(b), "distinct ports");
    rs_store *ca = dial(rs_store_server_port(a)), *cb = dial(rs_store_server_port(b));
    rs_err e = {0};
    RS_CHECK(rs_store_set(ca, "k", "A", 1, &e) == RS_OK && rs_store_set(cb, "k", "B", 1, &e) == RS_OK, "set");
    void *va = NULL, *vb = NULL;
    RS_CHECK(rs_store_get(ca, "k", &va, NULL, 1, &e) == RS_OK && rs_store_get(cb, "k", &vb, NULL, 1, &e) == RS_OK,
             "get: %s", e.msg);
    RS_CHECK(va && vb && !strcmp(va, "A") && !strcmp(vb, "B"), "each server keeps its own keys");
    free(va), free(vb);
    rs_store_close(ca);
    rs_store_server_stop(a);
    int64_t r = 0;
    RS_CHECK(rs_store_add(cb, "n", 2, &r, &e) == RS_OK && r == 2, "the other server still serves: %s", e.msg);
    rs_store_close(cb);
    rs_store_server_stop(b);
}

/* ---- a hostile peer is dropped, the others are served ---- */

static void send_raw(int port, const uint8_t *p, size_t n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    RS_CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "raw connect: %s", strerror(errno));
    RS_CHECK(send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n, "raw send");
    uint8_t buf[64];
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    RS_CHECK(recv(fd, buf, sizeof buf, 0) == 0, "server must close a malformed peer");
    close(fd);
}

static void test_hostile(void)
{
    rs_store_server *s = start();
    int port = rs_store_server_port(s);
    rs_store *c = dial(port); /* connected throughout, must keep working */
    uint8_t bad_op[] = {99, 0, 0, 0, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 0};
    uint8_t huge_key[] = {RS_STORE_OP_SET, 0xff, 0xff, 0xff, 0xff};
    uint8_t huge_val[5 + 1 + 8] = {RS_STORE_OP_SET, 0, 0, 0, 1, 'k', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint8_t bad_get[5 + 1 + 8 + 2] = {RS_STORE_OP_GET, 0, 0, 0, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 2, 0, 0};
    send_raw(port, bad_op, sizeof bad_op);
    send_raw(port, huge_key, sizeof huge_key);
    send_raw(port, huge_val, sizeof huge_val);
    send_raw(port, bad_get, sizeof bad_get);
    rs_err e = {0};
    int64_t r = 0;
    RS_CHECK(rs_store_add(c, "still", 1, &r, &e) == RS_OK && r == 1, "server survives: %s", e.msg);
    rs_store_close(c);
    rs_store_server_stop(s);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        {"setget", test_setget},
        {"get_blocks", test_get_blocks},
        {"add", test_add},
        {"wait", test_wait},
        {"rendezvous", test_rendezvous},
        {"rendezvous_missing", test_rendezvous_missing},
        {"connect_refused", test_connect_refused},
        {"port_in_use", test_port_in_use},
        {"stop_while_waiting", test_stop_while_waiting},
        {"two_servers", test_two_servers},
        {"hostile", test_hostile},
    };
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (argc < 2 || !strcmp(argv[1], cases[i].name)) {
            cases[i].fn();
            ran++;
        }
    if (!ran) {
        fprintf(stderr, "unknown case '%s'\n", argv[1]);
        return 2;
    }
    return rs_test_finish(argc < 2 ? "store" : argv[1]);
}
