/* The server's side of a model served across ranks (see ranks.h). */
#include "ranks.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dist/launch/launch.h"
#include "dist/launch/spawn.h"
#include "dist/store/store.h"

#define LINES_KEPT 64

struct rs_serve_ranks {
    rs_serve_ranks_cfg cfg;
    char model[4200], mode[16], exe[PATH_MAX];
    int listen_fd, fd;          /* owned: the listening socket (until rank 0 connects), rank 0's */
    rs_store_server *store;     /* owned: the ranks' rendezvous store */
    int port;                   /* its port */
    pthread_t pump;             /* starts the ranks and reads their output until they end */
    bool pump_started;
    pthread_mutex_t io;         /* one batch at a time on fd */
    pthread_mutex_t mu;         /* the fields below (the pump thread's lines never wait for a batch) */
    pthread_cond_t cv;
    bool launched, ended, stop;
    rs_err launch_err;          /* why the launch failed or how the ranks ended */
    int pids[64];
    int npids;
    char *lines[LINES_KEPT];    /* (owned) the last lines the ranks printed, for errors and describe */
    int nlines;
    char devices[256];          /* CUDA_VISIBLE_DEVICES given, "" without GPUs */
};

/* GPUs on this host, as the NVIDIA driver lists them (0 without one). */
static int gpu_count(void)
{
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void on_line(void *ud, int rank, int is_stderr, const char *line)
{
    rs_serve_ranks *r = ud;
    size_t n = strlen(line) + 32;
    char *t = malloc(n); /* owned by r->lines */
    if (!t) return;
    /* a rank's own error lines say "rank N: ..." already */
    if (is_stderr && !strncmp(line, "rank ", 5)) snprintf(t, n, "! %s", line);
    else snprintf(t, n, "%srank %d: %s", is_stderr ? "! " : "", rank, line);
    pthread_mutex_lock(&r->mu);
    if (r->nlines == LINES_KEPT) {
        free(r->lines[0]);
        memmove(r->lines, r->lines + 1, sizeof r->lines[0] * (LINES_KEPT - 1));
        r->nlines--;
    }
    r->lines[r->nlines++] = t;
    pthread_mutex_unlock(&r->mu);
}

static int should_stop(void *ud)
{
    rs_serve_ranks *r = ud;
    pthread_mutex_lock(&r->mu);
    bool s = r->stop;
    pthread_mutex_unlock(&r->mu);
    return s;
}

/* The ranks' parent: forks them (they die with this thread) and pumps their output until they end. */
static void *pump_main(void *arg)
{
    rs_serve_ranks *r = arg;
    char feed[32], mb[32], model[4300], mode[32], group[64], dev[300];
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    getsockname(r->listen_fd, (struct sockaddr *)&a, &al);
    snprintf(feed, sizeof feed, "feed=%d", ntohs(a.sin_port));
    snprintf(mb, sizeof mb, "max_batch=%d", r->cfg.max_batch);
    snprintf(model, sizeof model, "model=%s", r->model);
    snprintf(mode, sizeof mode, "mode=%s", r->mode);
    snprintf(group, sizeof group, "serve-%ld-%d", (long)getpid(), ntohs(a.sin_port));
    const char *args[] = {"backend=tcp", model, mode, feed, mb};
    const char *env[2] = {NULL, NULL};
    if (r->devices[0]) {
        snprintf(dev, sizeof dev, "CUDA_VISIBLE_DEVICES=%s", r->devices);
        env[0] = dev;
    }
    /* an idle server leaves the ranks waiting in a broadcast for as long as it runs: the group's
     * timeout is a day; a dead peer is found by the launcher and the store's watcher instead */
    rs_spawn_cfg sc = {.exe = r->exe, .job = "serve", .group = group, .timeout_s = 86400, .world = r->cfg.ranks,
                       .store = RS_SPAWN_STORE_LAUNCHER, .args = args, .nargs = 5, .extra_env = env, .grace_s = 2,
                       .on_line = on_line, .line_ud = r, .should_stop = should_stop, .stop_ud = r};
    rs_launch *l = NULL;
    rs_err e = {0};
    rs_status st = rs_spawn_start(&sc, r->port, &l, &e);
    rs_launch_result res = {0};
    if (!st) {
        rs_err ignore = {0};
        rs_launch_wait(l, 0.001, &res, &ignore); /* only to read the pids; on_line takes the lock */
    }
    pthread_mutex_lock(&r->mu);
    if (!st)
        for (int i = 0; i < res.nranks && i < 64; i++) r->pids[r->npids++] = (int)res.ranks[i].pid;
    else r->launch_err = e;
    r->launched = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (!st) {
        st = rs_launch_wait(l, 0, NULL, &e);
        pthread_mutex_lock(&r->mu);
        if (st && !r->stop) r->launch_err = e;
        pthread_mutex_unlock(&r->mu);
    }
    rs_launch_free(l);
    pthread_mutex_lock(&r->mu);
    r->ended = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* The ranks' last lines, for an error: what they said before failing. */
static void tail_lines(rs_serve_ranks *r, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < r->nlines && n < cap; i++) {
        if (r->lines[i][0] != '!') continue;
        int k = snprintf(buf + n, cap - n, "%s%s", n ? "; " : "", r->lines[i] + 2);
        if (k < 0) break;
        n += (size_t)k;
    }
}

static rs_status dead(rs_serve_ranks *r, rs_err *err, const char *what)
{
    char tail[1200];
    pthread_mutex_lock(&r->mu);
    tail_lines(r, tail, sizeof tail);
    rs_status st = rs_err_set(err, RS_ERR_IO, "the %d ranks serving %s (%s) %s%s%s (%s)", r->cfg.ranks, r->model,
                              r->mode, what, tail[0] ? ": " : "", tail,
                              r->launch_err.msg[0] ? r->launch_err.msg : "the launcher said nothing");
    pthread_mutex_unlock(&r->mu);
    return st;
}

const char *const rs_serve_ranks_modes[] = {"pipeline", "tensor", NULL};

rs_status rs_serve_ranks_start(const rs_serve_ranks_cfg *cfg, rs_serve_ranks **out, rs_err *err)
{
    *out = NULL;
    bool known = false;
    for (int i = 0; rs_serve_ranks_modes[i]; i++) known |= !strcmp(cfg->mode, rs_serve_ranks_modes[i]);
    if (cfg->ranks < 2 || cfg->ranks > 64)
        return rs_err_set(err, RS_ERR_ARG, "ranks=%d: a model across ranks takes 2..64 of them", cfg->ranks);
    if (!known)
        return rs_err_set(err, RS_ERR_ARG, "mode=%s: a model across ranks runs as mode=pipeline or mode=tensor",
                          cfg->mode);
    rs_serve_ranks *r = calloc(1, sizeof *r); /* the caller's */
    if (!r) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    r->cfg = *cfg;
    r->listen_fd = r->fd = -1;
    snprintf(r->model, sizeof r->model, "%s", cfg->model);
    snprintf(r->mode, sizeof r->mode, "%s", cfg->mode);
    r->cfg.model = r->model;
    r->cfg.mode = r->mode;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->io, NULL);
    pthread_cond_init(&r->cv, NULL);
    rs_status st = RS_OK;
    if (cfg->exe) snprintf(r->exe, sizeof r->exe, "%s", cfg->exe);
    else if ((st = rs_spawn_self(r->exe, sizeof r->exe, err)) != RS_OK) {
        rs_serve_ranks_stop(r);
        return st;
    }
    /* TorchServe's rule: worker w of nproc-per-node ranks gets GPUs w*n .. w*n+n-1, round-robin */
    int g = gpu_count();
    for (int i = 0, n = 0; g > 0 && i < cfg->ranks; i++)
        n += snprintf(r->devices + n, sizeof r->devices - (size_t)n, "%s%d", i ? "," : "",
                      (cfg->worker_index * cfg->ranks + i) % g);

    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    r->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (r->listen_fd < 0 || bind(r->listen_fd, (struct sockaddr *)&a, sizeof a) || listen(r->listen_fd, 1)) {
        st = rs_err_set(err, RS_ERR_IO, "a socket for rank 0: %s", strerror(errno));
        rs_serve_ranks_stop(r);
        return st;
    }
    st = rs_spawn_host_store(RS_SPAWN_STORE_LAUNCHER, &r->store, &r->port, err);
    if (st) {
        rs_serve_ranks_stop(r);
        return st;
    }
    if (pthread_create(&r->pump, NULL, pump_main, r)) {
        rs_serve_ranks_stop(r);
        return rs_err_set(err, RS_ERR_IO, "cannot start the ranks' thread");
    }
    r->pump_started = true;
    /* rank 0 connects once every rank has loaded its part; wait for it or for the ranks' end */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct pollfd p = {.fd = r->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 50) == 1) {
            r->fd = accept(r->listen_fd, NULL, NULL);
            if (r->fd >= 0) {
                fcntl(r->fd, F_SETFD, FD_CLOEXEC);
                break;
            }
        }
        pthread_mutex_lock(&r->mu);
        bool ended = r->ended;
        pthread_mutex_unlock(&r->mu);
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (ended || (double)(t.tv_sec - t0.tv_sec) > 60) {
            st = dead(r, err, ended ? "ended before serving" : "did not get ready in 60 s");
            rs_serve_ranks_stop(r);
            return st;
        }
    }
    int one = 1;
    setsockopt(r->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    close(r->listen_fd);
    r->listen_fd = -1;
    *out = r;
    return RS_OK;
}

void rs_serve_ranks_stop(rs_serve_ranks *r)
{
    if (!r) return;
    if (r->fd >= 0) shutdown(r->fd, SHUT_RDWR); /* rank 0 reads the end and the group leaves */
    if (r->pump_started) {
        /* they leave on their own; the launcher stops those that have not in 5 s */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pthread_mutex_lock(&r->mu);
        while (!r->ended) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)(t.tv_sec - t0.tv_sec) > 5) r->stop = true;
            struct timespec until = {.tv_sec = t.tv_sec, .tv_nsec = t.tv_nsec + 50000000};
            if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&r->cv, &r->mu, &until);
        }
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->pump, NULL);
    }
    if (r->fd >= 0) close(r->fd);
    if (r->listen_fd >= 0) close(r->listen_fd);
    rs_store_server_stop(r->store);
    for (int i = 0; i < r->nlines; i++) free(r->lines[i]);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->io);
    free(r);
}

bool rs_serve_ranks_put_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

bool rs_serve_ranks_get_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t k = recv(fd, c, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

rs_status rs_serve_ranks_run(rs_serve_ranks *r, const void *x, int B, float *y, rs_err *err)
{
    if (B < 1 || B > r->cfg.max_batch)
        return rs_err_set(err, RS_ERR_ARG, "a batch of %d across ranks (1..%d)", B, r->cfg.max_batch);
    uint32_t hdr[2] = {(uint32_t)B, (uint32_t)((size_t)B * r->cfg.in_bytes)};
    size_t want = (size_t)B * r->cfg.out_numel * sizeof *y;
    pthread_mutex_lock(&r->io);
    bool ok = rs_serve_ranks_put_all(r->fd, hdr, sizeof hdr) && rs_serve_ranks_put_all(r->fd, x, hdr[1]) &&
              rs_serve_ranks_get_all(r->fd, hdr, sizeof hdr);
    rs_status st = RS_OK;
    if (ok && hdr[0] == 0 && hdr[1] == want) ok = rs_serve_ranks_get_all(r->fd, y, want);
    else if (ok && hdr[0] != 0 && hdr[1] < 4096) {
        char msg[4096];
        ok = rs_serve_ranks_get_all(r->fd, msg, hdr[1]);
        msg[ok ? hdr[1] : 0] = 0;
        if (ok) st = rs_err_set(err, (rs_status)hdr[0], "across ranks: %s", msg);
    } else if (ok) ok = false;
    pthread_mutex_unlock(&r->io);
    if (!ok) {
        /* let the launcher see how they ended before saying so */
        struct timespec t = {0, 200000000};
        nanosleep(&t, NULL);
        return dead(r, err, "stopped answering");
    }
    return st;
}

/* A process that is gone or a zombie (dead, not yet reaped). */
static bool pid_dead(int pid)
{
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')'); /* the state follows the command name, which may hold spaces */
    return !rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X';
}

bool rs_serve_ranks_alive(rs_serve_ranks *r, char *why, size_t cap)
{
    char what[300] = "lost";
    size_t n = strlen(what);
    int ndead = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->npids; i++)
        if (pid_dead(r->pids[i]) && n < sizeof what - 40)
            n += (size_t)snprintf(what + n, sizeof what - n, "%s rank %d (pid %d)", ndead++ ? "," : "", i, r->pids[i]);
    bool ended = r->ended;
    pthread_mutex_unlock(&r->mu);
    if (!ndead && !ended) return true;
    rs_err e = {0};
    if (!ndead) snprintf(what, sizeof what, "ended");
    dead(r, &e, what);
    snprintf(why, cap, "%s", e.msg);
    return false;
}

void rs_serve_ranks_describe(rs_serve_ranks *r, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap) buf[0] = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->nlines && n < cap; i++) {
        const char *l = r->lines[i];
        if (l[0] == '!') continue; /* errors are for dead()'s message */
        int k = snprintf(buf + n, cap - n, "%s\n", l);
        if (k < 0) break;
        n += (size_t)k;
    }
    pthread_mutex_unlock(&r->mu);
}

int rs_serve_ranks_pids(rs_serve_ranks *r, int *pids, int max)
{
    pthread_mutex_lock(&r->mu);
    int n = r->npids < max ? r->npids : max;
    memcpy(pids, r->pids, (size_t)n * sizeof *pids);
    pthread_mutex_unlock(&r->mu);
    return n;
}
