/* The rank launcher (see launch.h): fork/exec of N ranks into one process group, each killed when the
 * launcher dies, a poll loop over their stdout/stderr pipes that cuts lines, and a watcher that stops
 * everyone when one rank fails.
 * No signal handler and no global state: each rank's pidfd sits in the poll set beside its pipes, so an
 * exit wakes the loop at once, and waitpid(WNOHANG | WUNTRACED) every turn also sees a rank stopped by
 * a signal (a hang the others will time out on). */
#define _GNU_SOURCE /* pipe2, close_range (glibc >= 2.34) */
#include "dist/launch/launch.h"
#include "dist/launch/rank_status.h"
#include "dist/launch/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define LINE_MAX_BYTES (1u << 20) /* a longer line is handed over in pieces, so memory stays bounded */
#define READ_CHUNK 65536
#define LOOP_TICK_S 0.02          /* how often exits and should_stop are looked at */
#define DEFAULT_GRACE_S 5.0
#define DEFAULT_FAIL_GRACE_S 0.3  /* a failed run's survivors are stuck in a collective: end them soon */
#define FAULT_SETTLE_S 0.05       /* a fault record acted on once this old (check_board) */
#define N_TORCHRUN_VARS 7

static const char *const torchrun_vars[N_TORCHRUN_VARS] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
};

typedef struct stream {
    int fd;      /* read end of the pipe, -1 once closed */
    char *buf;   /* (cap) bytes not yet handed over as a line */
    size_t len, cap;
} stream;

struct rs_launch {
    int nranks;
    pid_t pgid;             /* the ranks' common process group (rank 0's pid) */
    rs_launch_rank *ranks;  /* (nranks) */
    stream *streams;        /* (nranks, 2): [2r] stdout, [2r+1] stderr */
    int *pidfd;             /* (nranks) each rank's pidfd (readable once it exits), -1 without one */
    struct pollfd *pfds;    /* (3 * nranks) scratch for poll: the pipes, then the pidfds */
    int *pfd_stream;        /* (3 * nranks) which stream each pfds entry is, -1 for a pidfd */
    int live;               /* ranks not yet reaped */
    rs_launch_line_fn on_line;
    void *line_ud;
    rs_launch_stop_fn should_stop;
    void *stop_ud;
    double grace_s, fail_grace_s;
    double stop_grace;      /* the grace of the stop under way */
    double t0;              /* monotonic start time */
    int stopping, killed, cancelled, failed_rank, hung_rank;
    double stop_t0, last_end;
    rs_rank_board *board;   /* the ranks' progress (rank_status.h), NULL without one */
    int *running;           /* (nranks) scratch for the board's diagnosis */
    double hung_idle_s;     /* the hung rank's time without progress when the failed rank ended, -1 unknown */
    char hung_what[160], failed_what[160]; /* what the board said of each then ("" when nothing) */
    double fault_at_s;      /* when the failed rank gave up, from its fault record; -1: it failed by ending */
    int store_ready;        /* rank 0 said "@store ready" (rs_launch_cfg.store_wait_s) */
    char rank0_err[256];    /* rank 0's last stderr line, to say why it could not host the store */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void default_sink(void *ud, int rank, int is_stderr, const char *line)
{
    (void)ud;
    printf("[rank %d%s] %s\n", rank, is_stderr ? " stderr" : "", line);
    fflush(stdout); /* interleaves sensibly with the REPL's own output */
}

/* Signals every rank not yet reaped (a pid cannot be reused before we reap it) and the group, which
 * also reaches what a rank forked (a shell's children), so their pipes close too. */
static void signal_all(rs_launch *l, int sig)
{
    for (int r = 0; r < l->nranks; r++)
        if (l->ranks[r].state == RS_LAUNCH_RUNNING && l->ranks[r].pid > 0) kill(l->ranks[r].pid, sig);
    if (l->pgid > 0 && l->live > 0) killpg(l->pgid, sig);
    /* a rank stopped by a signal takes SIGTERM only once continued (SIGKILL needs no help) */
    if (sig == SIGTERM && l->pgid > 0 && l->live > 0) killpg(l->pgid, SIGCONT);
}

static void begin_stop(rs_launch *l, double grace)
{
    if (l->stopping) return;
    l->stopping = 1;
    l->stop_grace = grace;
    l->stop_t0 = now_s();
    signal_all(l, SIGTERM);
}

static void emit(rs_launch *l, int s, const char *line)
{
    if (s == 0 && !strncmp(line, "@store ready", 12)) l->store_ready = 1;
    if (s == 1) snprintf(l->rank0_err, sizeof l->rank0_err, "%s", line);
    l->on_line(l->line_ud, s / 2, s % 2, line);
}

/* Hands over every complete line in the buffer; with `flush`, the unterminated tail too. */
static void cut_lines(rs_launch *l, int s, int flush)
{
    stream *st = &l->streams[s];
    size_t start = 0;
    for (;;) {
        char *nl = memchr(st->buf + start, '\n', st->len - start);
        if (!nl) break;
        *nl = '\0';
        emit(l, s, st->buf + start);
        start = (size_t)(nl - st->buf) + 1;
    }
    size_t rest = st->len - start;
    if (rest > 0 && (flush || rest >= LINE_MAX_BYTES)) {
        st->buf[st->len] = '\0'; /* cap keeps one byte spare for this */
        emit(l, s, st->buf + start);
        rest = 0;
        start = st->len;
    }
    if (start > 0 && rest > 0) memmove(st->buf, st->buf + start, rest);
    st->len = rest;
}

static void close_stream(rs_launch *l, int s)
{
    stream *st = &l->streams[s];
    if (st->fd < 0) return;
    cut_lines(l, s, 1);
    close(st->fd);
    st->fd = -1;
}

/* Reads what is there (a bounded amount, so one flooding rank cannot starve the loop). Returns -1
 * only when out of memory. */
static int read_stream(rs_launch *l, int s)
{
    stream *st = &l->streams[s];
    for (int i = 0; i < 16 && st->fd >= 0; i++) {
        if (st->cap - st->len < READ_CHUNK + 1) {
            size_t ncap = st->cap ? st->cap * 2 : 2 * READ_CHUNK;
            char *nb = realloc(st->buf, ncap);
            if (!nb) return -1;
            st->buf = nb;
            st->cap = ncap;
        }
        ssize_t n = read(st->fd, st->buf + st->len, READ_CHUNK);
        if (n > 0) {
            st->len += (size_t)n;
            cut_lines(l, s, 0);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return 0;
        close_stream(l, s); /* EOF, or an error that will not go away */
        return 0;
    }
    return 0;
}

/* Rank r failed: who it waited for. A rank stopped by a signal is the one; else the board's rank that never
 * entered the collective r gave up in (a busy loop, a deadlock elsewhere). What the board says of both
 * is kept now, before the stop changes it. */
static void diagnose(rs_launch *l, int r)
{
    for (int o = 0; o < l->nranks && l->hung_rank < 0; o++)
        if (l->ranks[o].state == RS_LAUNCH_RUNNING && l->ranks[o].stop_sig) l->hung_rank = o;
    if (!l->board) return;
    if (l->hung_rank < 0 && l->running) {
        for (int o = 0; o < l->nranks; o++) l->running[o] = l->ranks[o].state == RS_LAUNCH_RUNNING;
        l->hung_rank = rs_rank_board_hung(l->board, r, l->running, l->nranks);
    }
    const rs_rank_status *f = rs_rank_board_slot(l->board, r);
    if (f && atomic_load(&f->fault) == RS_RANK_FAULT_IN_COLL)
        rs_rank_board_describe(l->board, r, l->failed_what, sizeof l->failed_what, 0);
    if (l->hung_rank >= 0) {
        l->hung_idle_s = rs_rank_board_idle_s(l->board, l->hung_rank);
        rs_rank_board_describe(l->board, l->hung_rank, l->hung_what, sizeof l->hung_what, 0);
    }
}

static void record_end(rs_launch *l, int r, int wstatus)
{
    rs_launch_rank *k = &l->ranks[r];
    if (WIFSIGNALED(wstatus)) {
        k->state = RS_LAUNCH_SIGNALED;
        k->status = WTERMSIG(wstatus);
        k->exit_code = 128 + k->status;
    } else {
        k->state = RS_LAUNCH_EXITED;
        k->status = WEXITSTATUS(wstatus);
        k->exit_code = k->status;
    }
    double t = now_s();
    k->end_s = t - l->t0;
    l->last_end = t;
    l->live--;
    if (l->stopping) {
        k->stopped_by_launcher = 1;
    } else if (k->exit_code != 0) {
        l->failed_rank = r;
        diagnose(l, r);
        begin_stop(l, l->fail_grace_s);
    }
    if (l->pidfd && l->pidfd[r] >= 0) {
        close(l->pidfd[r]);
        l->pidfd[r] = -1;
    }
}

/* A rank that gave up in a collective posts its fault record at that moment: acting on it then, not at
 * its exit (tearing a group down after a timeout can take a second), returns at the timeout. Called after
 * the turn's reap, so a rank whose death caused the fault has been seen first. */
static void check_board(rs_launch *l)
{
    if (l->stopping || !l->board || l->failed_rank >= 0) return;
    for (int r = 0; r < l->nranks; r++) {
        const rs_rank_status *s = rs_rank_board_slot(l->board, r);
        if (l->ranks[r].state != RS_LAUNCH_RUNNING || atomic_load(&s->fault) != RS_RANK_FAULT_IN_COLL) continue;
        double at = (double)atomic_load(&s->fault_ns) * 1e-9;
        /* a peer's death (its closed socket) can be seen by this rank a moment before it can be reaped: the
         * dead one is the fault then, so a record gets a few turns for that death to show */
        if (now_s() - at < FAULT_SETTLE_S) continue;
        l->failed_rank = r;
        l->fault_at_s = at - l->t0;
        diagnose(l, r);
        begin_stop(l, l->fail_grace_s);
        return;
    }
}

static void reap(rs_launch *l, int block)
{
    for (int r = 0; r < l->nranks; r++) {
        if (l->ranks[r].state != RS_LAUNCH_RUNNING) continue;
        int st;
        pid_t p;
        do p = waitpid(l->ranks[r].pid, &st, block ? 0 : WNOHANG | WUNTRACED | WCONTINUED);
        while (p < 0 && errno == EINTR);
        if (p == l->ranks[r].pid && WIFSTOPPED(st)) {
            l->ranks[r].stop_sig = WSTOPSIG(st);
            l->ranks[r].stop_at_s = now_s() - l->t0;
        } else if (p == l->ranks[r].pid && WIFCONTINUED(st)) {
            if (!l->stopping) l->ranks[r].stop_sig = 0; /* our own SIGCONT when stopping keeps the record */
        } else if (p == l->ranks[r].pid) {
            record_end(l, r, st);
        } else if (p < 0) { /* ECHILD: someone else reaped it (waitpid(-1) elsewhere); count it gone */
            l->ranks[r].state = RS_LAUNCH_EXITED;
            l->ranks[r].status = l->ranks[r].exit_code = -1;
            l->live--;
        }
    }
}

/* "SIGKILL" for 9: glibc's abbreviation with the prefix (buf is the caller's, 16 bytes). */
static const char *sig_name(int sig, char buf[16])
{
    const char *a = sigabbrev_np(sig);
    snprintf(buf, 16, "SIG%s", a ? a : "?");
    return buf;
}

/* Appends "ranks 0, 1, 3" for the ranks matching `want` (1: stopped by launcher, 2: running). */
static size_t list_ranks(const rs_launch *l, int want, char *buf, size_t cap, size_t at)
{
    int n = 0;
    for (int r = 0; r < l->nranks; r++) {
        const rs_launch_rank *k = &l->ranks[r];
        int match = want == 1 ? k->stopped_by_launcher : k->state == RS_LAUNCH_RUNNING;
        if (!match) continue;
        if (at < cap) at += (size_t)snprintf(buf + at, cap - at, "%s%d", n ? ", " : "", r);
        n++;
    }
    return at;
}

static void fill_result(const rs_launch *l, rs_launch_result *res, int timed_out)
{
    if (!res) return;
    res->nranks = l->nranks;
    res->ranks = l->ranks;
    res->failed_rank = l->failed_rank;
    res->hung_rank = l->hung_rank;
    res->cancelled = l->cancelled;
    res->timed_out = timed_out;
    res->elapsed_s = now_s() - l->t0;
    res->stop_s = l->stopping && l->live == 0 ? l->last_end - l->stop_t0 : 0.0;
    if (res->stop_s < 0) res->stop_s = 0;
}

static rs_status report(const rs_launch *l, int timed_out, double timeout_s, rs_err *err)
{
    char msg[RS_ERR_MSG_MAX];
    size_t at = 0, cap = sizeof msg;
    rs_status code;
    if (timed_out) {
        at += (size_t)snprintf(msg, cap, "ranks still running after %.1f s: ", timeout_s);
        list_ranks(l, 2, msg, cap, at);
        return rs_err_set(err, RS_ERR_TIMEOUT, "%s", msg);
    }
    char sn[16];
    if (l->failed_rank >= 0 && l->hung_rank >= 0) {
        /* NCCL's watchdog names the rank a collective waited for; so do we, then who gave up */
        const rs_launch_rank *h = &l->ranks[l->hung_rank], *k = &l->ranks[l->failed_rank];
        if (h->stop_sig)
            at += (size_t)snprintf(msg, cap, "rank %d hung: stopped by signal %d (%s) at %.1f s", l->hung_rank,
                                   h->stop_sig, sig_name(h->stop_sig, sn), h->stop_at_s);
        else
            at += (size_t)snprintf(msg, cap, "rank %d hung: no progress for %.1f s", l->hung_rank, l->hung_idle_s);
        if (at < cap && l->hung_what[0]) at += (size_t)snprintf(msg + at, cap - at, " (last: %s)", l->hung_what);
        if (at < cap)
            at += (size_t)snprintf(msg + at, cap - at, "; rank %d gave up waiting for it at %.1f s (%s%s",
                                   l->failed_rank, l->fault_at_s >= 0 ? l->fault_at_s : k->end_s, l->failed_what,
                                   l->failed_what[0] && !k->stopped_by_launcher ? "; " : "");
        if (at < cap && k->stopped_by_launcher) /* ended by us after its fault record: listed below */
            at += (size_t)snprintf(msg + at, cap - at, ")");
        else if (at < cap && k->state == RS_LAUNCH_SIGNALED)
            at += (size_t)snprintf(msg + at, cap - at, "killed by signal %d, %s)", k->status, sig_name(k->status, sn));
        else if (at < cap)
            at += (size_t)snprintf(msg + at, cap - at, "exited with status %d)", k->status);
        code = RS_ERR_IO;
    } else if (l->failed_rank >= 0 && l->fault_at_s >= 0) {
        /* it gave up in a collective and the board could not tell whom for (all in it, or no slots) */
        at += (size_t)snprintf(msg, cap, "rank %d gave up at %.1f s (%s)", l->failed_rank, l->fault_at_s,
                               l->failed_what[0] ? l->failed_what : "in a collective");
        code = RS_ERR_IO;
    } else if (l->failed_rank >= 0) {
        const rs_launch_rank *k = &l->ranks[l->failed_rank];
        if (k->state == RS_LAUNCH_SIGNALED)
            at += (size_t)snprintf(msg, cap, "rank %d was killed by signal %d (%s)", l->failed_rank,
                                   k->status, sig_name(k->status, sn));
        else
            at += (size_t)snprintf(msg, cap, "rank %d exited with status %d", l->failed_rank, k->status);
        code = RS_ERR_IO;
    } else if (l->cancelled) {
        at += (size_t)snprintf(msg, cap, "cancelled");
        code = RS_ERR_CANCELLED;
    } else {
        rs_err_clear(err);
        return RS_OK;
    }
    int any = 0;
    for (int r = 0; r < l->nranks; r++) any |= l->ranks[r].stopped_by_launcher;
    if (any && at < cap) {
        at += (size_t)snprintf(msg + at, cap - at, "; stopped by the launcher: ranks ");
        list_ranks(l, 1, msg, cap, at);
    }
    return rs_err_set(err, code, "%s", msg);
}

rs_status rs_launch_wait(rs_launch *l, double timeout_s, rs_launch_result *res, rs_err *err)
{
    if (!l) return rs_err_set(err, RS_ERR_ARG, "rs_launch_wait: no launcher (NULL)");
    double deadline = timeout_s > 0 ? now_s() + timeout_s : -1.0;
    int n2 = 2 * l->nranks;
    for (;;) {
        reap(l, 0);
        check_board(l);
        if (l->live == 0) {
            /* Everything a rank wrote before exiting is in the pipe now; take it without waiting
             * for EOF, which a forked grandchild holding the pipe could delay forever. */
            for (int s = 0; s < n2; s++) {
                if (l->streams[s].fd < 0) continue;
                if (read_stream(l, s) < 0) return rs_err_set(err, RS_ERR_NOMEM, "launcher: output buffer");
                close_stream(l, s);
            }
            break;
        }
        if (!l->stopping && l->should_stop && l->should_stop(l->stop_ud)) {
            l->cancelled = 1;
            begin_stop(l, l->grace_s);
        }
        double t = now_s();
        if (l->stopping && !l->killed && t >= l->stop_t0 + l->stop_grace) {
            signal_all(l, SIGKILL);
            l->killed = 1;
        }
        if (deadline >= 0 && t >= deadline) {
            fill_result(l, res, 1);
            return report(l, 1, timeout_s, err);
        }
        double wait = LOOP_TICK_S;
        if (deadline >= 0 && deadline - t < wait) wait = deadline - t;
        if (l->stopping && !l->killed && l->stop_t0 + l->stop_grace - t < wait) wait = l->stop_t0 + l->stop_grace - t;
        int nf = 0;
        for (int s = 0; s < n2; s++) {
            if (l->streams[s].fd < 0) continue;
            l->pfds[nf] = (struct pollfd){.fd = l->streams[s].fd, .events = POLLIN};
            l->pfd_stream[nf++] = s;
        }
        for (int r = 0; r < l->nranks; r++) {
            if (l->pidfd[r] < 0) continue;
            l->pfds[nf] = (struct pollfd){.fd = l->pidfd[r], .events = POLLIN};
            l->pfd_stream[nf++] = -1; /* readable: the rank exited; the next turn's reap records it */
        }
        int ms = wait > 0 ? (int)(wait * 1000.0) + 1 : 0;
        int pr = nf ? poll(l->pfds, (nfds_t)nf, ms) : 0;
        if (nf == 0) nanosleep(&(struct timespec){0, (long)ms * 1000000L}, NULL);
        if (pr < 0 && errno != EINTR) return rs_err_set(err, RS_ERR_IO, "launcher: poll: %s", strerror(errno));
        for (int i = 0; pr > 0 && i < nf; i++) {
            if (!(l->pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) || l->pfd_stream[i] < 0) continue;
            if (read_stream(l, l->pfd_stream[i]) < 0)
                return rs_err_set(err, RS_ERR_NOMEM, "launcher: output buffer");
        }
    }
    fill_result(l, res, 0);
    return report(l, 0, timeout_s, err);
}

void rs_launch_stop(rs_launch *l)
{
    if (!l || l->stopping || l->live == 0) return;
    l->cancelled = 1;
    begin_stop(l, l->grace_s);
}

void rs_launch_free(rs_launch *l)
{
    if (!l) return;
    if (l->live > 0) {
        signal_all(l, SIGKILL);
        reap(l, 1);
    }
    for (int s = 0; l->streams && s < 2 * l->nranks; s++) {
        if (l->streams[s].fd >= 0) close(l->streams[s].fd);
        free(l->streams[s].buf);
    }
    for (int r = 0; l->pidfd && r < l->nranks; r++)
        if (l->pidfd[r] >= 0) close(l->pidfd[r]);
    free(l->pidfd);
    free(l->streams);
    free(l->ranks);
    free(l->pfds);
    free(l->pfd_stream);
    free(l->running);
    rs_rank_board_free(l->board);
    free(l);
}

static int is_torchrun_var(const char *entry)
{
    for (int i = 0; i < N_TORCHRUN_VARS; i++) {
        size_t n = strlen(torchrun_vars[i]);
        if (strncmp(entry, torchrun_vars[i], n) == 0 && entry[n] == '=') return 1;
    }
    return 0;
}

static int overridden(const char *entry, const char *const *extra)
{
    const char *eq = strchr(entry, '=');
    size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
    for (; extra && *extra; extra++)
        if (strncmp(*extra, entry, n) == 0 && (*extra)[n] == '=') return 1;
    return 0;
}

/* argv[0] as execvp would find it, resolved here because only async-signal-safe calls may run in the
 * child between fork and exec. 0, or an errno. */
static int resolve_exe(const char *name, char *out, size_t cap)
{
    if (strchr(name, '/')) {
        if (strlen(name) >= cap) return ENAMETOOLONG;
        strcpy(out, name);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    int found_err = ENOENT;
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        int w = snprintf(out, cap, "%.*s%s%s", (int)n, p, n ? "/" : "", name);
        if (w > 0 && (size_t)w < cap) {
            if (access(out, X_OK) == 0) return 0;
            if (errno == EACCES) found_err = EACCES;
        }
        if (!colon) break;
        p = colon + 1;
    }
    return found_err;
}

/* Spawns rank r with its pipes; the read ends go into l->streams. fork rather than posix_spawn: the
 * child asks for SIGKILL (or cfg->death_sig) when the launcher dies (PR_SET_PDEATHSIG, kept across exec), so no rank
 * outlives a launcher killed by anything, SIGKILL included; a launcher gone before the prctl is caught
 * by getppid. An exec failure comes back through a close-on-exec pipe. */
static rs_status spawn_rank(rs_launch *l, const rs_launch_cfg *cfg, const char *const *argv, int r, char **envp,
                            rs_err *err)
{
    char exe[4096];
    int rerr = resolve_exe(argv[0], exe, sizeof exe);
    if (rerr)
        return rs_err_set(err, RS_ERR_IO, "cannot start rank %d: '%s': %s%s", r, argv[0], strerror(rerr),
                          rerr == ENOENT ? " (give a path, or put it on PATH)" : "");
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, px[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 || pipe2(px, O_CLOEXEC) < 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0) close(po[i]);
            if (pe[i] >= 0) close(pe[i]);
            if (px[i] >= 0) close(px[i]);
        }
        return rs_err_set(err, RS_ERR_IO, "cannot start rank %d: pipe: %s", r, strerror(e));
    }
    /* Only our read ends are non-blocking; the rank's write ends stay blocking, as stdout should. */
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    l->streams[2 * r].fd = po[0];
    l->streams[2 * r + 1].fd = pe[0];

    pid_t parent = getpid(), pgid = l->pgid;
    int death_sig = cfg->death_sig > 0 ? cfg->death_sig : SIGKILL;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* no handler of ours runs in the child */
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, death_sig);
        if (getppid() != parent) _exit(127); /* the launcher died before the prctl */
        setpgid(0, pgid);                     /* 0 for rank 0: it leads the new group */
        int xfd = px[1];
        if (xfd < 3) xfd = fcntl(xfd, F_DUPFD_CLOEXEC, 3); /* out of the way of 0..2 */
        int in = open("/dev/null", O_RDONLY); /* the REPL keeps the tty */
        if (in >= 0 && in != 0) {
            dup2(in, 0);
            close(in);
        }
        dup2(po[1], 1);
        dup2(pe[1], 2);
        /* Whatever this process has open without O_CLOEXEC (sockets, logs) stays out of the ranks. */
        if (xfd > 3) close_range(3, (unsigned)xfd - 1, 0);
        close_range((unsigned)xfd + 1, ~0u, 0);
        fcntl(xfd, F_SETFD, FD_CLOEXEC);
        /* a REPL that ignores SIGINT/SIGPIPE must not pass it on */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        for (int sig = 1; sig < NSIG; sig++) sigaction(sig, &dfl, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(exe, (char *const *)argv, envp);
        int e = errno;
        (void)!write(xfd, &e, sizeof e);
        _exit(127);
    }
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(po[1]);
    close(pe[1]);
    close(px[1]);
    if (pid < 0) {
        close(px[0]);
        return rs_err_set(err, RS_ERR_IO, "cannot start rank %d: fork: %s", r, strerror(fork_errno));
    }
    if (r == 0) setpgid(pid, pid); /* both sides set the group, so neither order races */
    else setpgid(pid, l->pgid);
    int child_err = 0;
    ssize_t got;
    do got = read(px[0], &child_err, sizeof child_err);
    while (got < 0 && errno == EINTR);
    close(px[0]);
    if (got == (ssize_t)sizeof child_err) {
        waitpid(pid, NULL, 0);
        return rs_err_set(err, RS_ERR_IO, "cannot start rank %d: '%s': %s%s", r, argv[0], strerror(child_err),
                          child_err == ENOENT ? " (give a path, or put it on PATH)" : "");
    }
    l->ranks[r].pid = pid;
    l->ranks[r].exit_code = -1;
    /* Linux >= 5.3; without it exits are still found, a loop tick (20 ms) later */
    l->pidfd[r] = (int)syscall(SYS_pidfd_open, pid, 0); /* close-on-exec by the kernel */
    l->live++;
    if (r == 0) l->pgid = pid;
    return RS_OK;
}

/* store_wait_s: rank 0 alone runs (its output handed over as usual) until it says its store is up, ends,
 * or the wait passes (then the others start anyway: the agent may simply be slow). RS_ERR_IO, naming the
 * host, address and port and rank 0's last word, when it ended first. */
static rs_status wait_store(rs_launch *l, const rs_launch_cfg *cfg, const char *addr, rs_err *err)
{
    double deadline = now_s() + cfg->store_wait_s;
    while (!l->store_ready && l->ranks[0].state == RS_LAUNCH_RUNNING && now_s() < deadline) {
        struct pollfd p[3] = {{.fd = l->streams[0].fd, .events = POLLIN}, {.fd = l->streams[1].fd, .events = POLLIN},
                              {.fd = l->pidfd[0], .events = POLLIN}};
        if (poll(p, 3, (int)(LOOP_TICK_S * 1000)) < 0 && errno != EINTR)
            return rs_err_set(err, RS_ERR_IO, "launcher: poll: %s", strerror(errno));
        for (int s = 0; s < 2; s++)
            if (p[s].revents && read_stream(l, s) < 0) return rs_err_set(err, RS_ERR_NOMEM, "launcher: output buffer");
        reap(l, 0);
    }
    if (l->ranks[0].state == RS_LAUNCH_RUNNING) return RS_OK;
    for (int s = 0; s < 2; s++) /* what it said last */
        while (l->streams[s].fd >= 0)
            if (read_stream(l, s) < 0) return rs_err_set(err, RS_ERR_NOMEM, "launcher: output buffer");
    return rs_err_set(err, RS_ERR_IO, "rank 0 on %s could not host the rendezvous store at %s:%d (%s); no other rank "
                      "was started (the port was free on this host, not on %s: try again, or free it there)",
                      cfg->rank_hosts[0], addr, cfg->master_port,
                      l->rank0_err[0] ? l->rank0_err : "it ended before saying its store was up", cfg->rank_hosts[0]);
}

/* vals[2..4] (LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK) of rank r from the hosts: the ranks before it on
 * its host, the ranks on its host, and its host's place among the hosts in rank order. */
static void host_node(const char *const *hosts, int n, int r, int *vals)
{
    int local = 0, size = 0, group = 0;
    for (int q = 0; q < n; q++) {
        bool same = !strcmp(hosts[q], hosts[r]);
        size += same;
        local += same && q < r;
        if (q < r && strcmp(hosts[q], hosts[r])) {
            bool first = true; /* hosts[q] seen before q: not a new node */
            for (int p = 0; p < q && first; p++) first = strcmp(hosts[p], hosts[q]) != 0;
            group += first;
        }
    }
    vals[2] = local;
    vals[3] = size;
    vals[4] = group;
}

/* Rank r's command through the rsh agent (remote.h): its torchrun set and extra (NULL-terminated, the
 * cfg's extra_env) on the remote command line. NULL when out of memory or the agent is unusable. */
static char **remote_argv(const rs_launch_cfg *cfg, int r, char (*vars)[RS_LAUNCH_ADDR_MAX + 32], char **extra)
{
    char agent[1024];
    int words = rs_remote_agent(agent, sizeof agent);
    const char *all[N_TORCHRUN_VARS + 64 + 2];
    int k = 0;
    for (int i = 0; i < N_TORCHRUN_VARS; i++) all[k++] = vars[i];
    if (r == 0 && cfg->store_wait_s > 0) all[k++] = "RINGSIDE_STORE_READY=1"; /* say when the store is up */
    for (int i = 0; extra[i] && k < N_TORCHRUN_VARS + 64; i++) all[k++] = extra[i];
    all[k] = NULL;
    return words ? rs_remote_argv(agent, words, cfg->rank_hosts[r], all, cfg->argv) : NULL;
}

rs_status rs_launch_start(const rs_launch_cfg *cfg, rs_launch **out, rs_err *err)
{
    if (!cfg || !out) return rs_err_set(err, RS_ERR_ARG, "rs_launch_start: cfg and out are required");
    *out = NULL;
    if (cfg->nranks < 1 || cfg->nranks > RS_LAUNCH_MAX_RANKS)
        return rs_err_set(err, RS_ERR_ARG, "launch: ranks=%d is out of range (use 1..%d)", cfg->nranks,
                          RS_LAUNCH_MAX_RANKS);
    if (!cfg->argv || !cfg->argv[0] || !cfg->argv[0][0])
        return rs_err_set(err, RS_ERR_ARG, "launch: no program to run (argv is empty)");
    if (cfg->master_port < 1 || cfg->master_port > 65535)
        return rs_err_set(err, RS_ERR_ARG, "launch: master port %d is out of range (use 1..65535)",
                          cfg->master_port);
    const char *addr = cfg->master_addr ? cfg->master_addr : "127.0.0.1";
    if (!addr[0] || strlen(addr) >= RS_LAUNCH_ADDR_MAX)
        return rs_err_set(err, RS_ERR_ARG, "launch: master address '%s' is empty or too long", addr);
    for (const char *const *e = cfg->extra_env; e && *e; e++)
        if (!strchr(*e, '=') || **e == '=')
            return rs_err_set(err, RS_ERR_ARG, "launch: environment entry '%s' is not NAME=VALUE", *e);

    int n = cfg->nranks, per_node = cfg->local_world_size ? cfg->local_world_size : cfg->nranks;
    if (per_node < 1 || n % per_node)
        return rs_err_set(err, RS_ERR_ARG, "launch: %d ranks do not split into nodes of %d (use a divisor of %d)", n,
                          per_node, n);
    rs_launch *l = calloc(1, sizeof *l);
    if (!l) return rs_err_set(err, RS_ERR_NOMEM, "launch: out of memory");
    l->nranks = n;
    l->ranks = calloc((size_t)n, sizeof *l->ranks);
    l->streams = calloc((size_t)(2 * n), sizeof *l->streams);
    l->pidfd = malloc(sizeof *l->pidfd * (size_t)n);
    l->pfds = calloc((size_t)(3 * n), sizeof *l->pfds);
    l->pfd_stream = calloc((size_t)(3 * n), sizeof *l->pfd_stream);
    l->on_line = cfg->on_line ? cfg->on_line : default_sink;
    l->line_ud = cfg->line_ud;
    l->should_stop = cfg->should_stop;
    l->stop_ud = cfg->stop_ud;
    l->grace_s = cfg->grace_s > 0 ? cfg->grace_s : DEFAULT_GRACE_S;
    l->fail_grace_s = cfg->fail_grace_s > 0                  ? cfg->fail_grace_s
                      : l->grace_s < DEFAULT_FAIL_GRACE_S ? l->grace_s
                                                          : DEFAULT_FAIL_GRACE_S;
    l->failed_rank = l->hung_rank = -1;
    l->hung_idle_s = l->fault_at_s = -1;
    l->t0 = now_s();
    if (l->streams)
        for (int s = 0; s < 2 * n; s++) l->streams[s].fd = -1;
    if (l->pidfd)
        for (int r = 0; r < n; r++) l->pidfd[r] = -1;

    /* envp: inherited entries (minus the torchrun set and what extra_env overrides), this rank's
     * torchrun set, extra_env. The pointers borrow from environ/cfg; only vars[] is ours. */
    size_t ninh = 0, nextra = 0;
    if (!cfg->clear_env)
        for (char **e = environ; e && *e; e++) ninh++;
    for (const char *const *e = cfg->extra_env; e && *e; e++) nextra++;
    const char *board_env = NULL;
    l->board = rs_rank_board_new(n, &board_env); /* without one, failures are reported from exits alone */
    l->running = calloc((size_t)n, sizeof *l->running);
    char **envp = calloc(ninh + 1 + N_TORCHRUN_VARS + nextra + 1, sizeof *envp);
    char(*vars)[RS_LAUNCH_ADDR_MAX + 32] = calloc(N_TORCHRUN_VARS, sizeof *vars);
    rs_status st = RS_OK;
    if (!l->ranks || !l->streams || !l->pidfd || !l->pfds || !l->pfd_stream || !envp || !vars) {
        st = rs_err_set(err, RS_ERR_NOMEM, "launch: out of memory for %d ranks", n);
        goto done;
    }
    size_t base = 0;
    for (size_t i = 0; i < ninh; i++)
        if (!is_torchrun_var(environ[i]) && !overridden(environ[i], cfg->extra_env) &&
            strncmp(environ[i], RS_RANK_STATUS_ENV "=", sizeof RS_RANK_STATUS_ENV))
            envp[base++] = environ[i];
    if (board_env) envp[base++] = (char *)board_env; /* inherited, so never on a remote rank's command line */
    for (int i = 0; i < N_TORCHRUN_VARS; i++) envp[base + (size_t)i] = vars[i];
    for (size_t i = 0; i < nextra; i++) envp[base + N_TORCHRUN_VARS + i] = (char *)cfg->extra_env[i];
    envp[base + N_TORCHRUN_VARS + nextra] = NULL;

    for (int r = 0; r < n && st == RS_OK; r++) {
        /* One host playing n / per_node nodes, numbered as torchrun numbers them; or the hosts' own */
        int vals[5] = {r, n, r % per_node, per_node, r / per_node};
        if (cfg->rank_hosts) host_node(cfg->rank_hosts, n, r, vals);
        for (int i = 0; i < 5; i++) snprintf(vars[i], sizeof vars[i], "%s=%d", torchrun_vars[i], vals[i]);
        snprintf(vars[5], sizeof vars[5], "MASTER_ADDR=%s", addr);
        snprintf(vars[6], sizeof vars[6], "MASTER_PORT=%d", cfg->master_port);
        if (!cfg->rank_hosts) {
            st = spawn_rank(l, cfg, cfg->argv, r, envp, err);
            continue;
        }
        char **argv = remote_argv(cfg, r, vars, envp + base + N_TORCHRUN_VARS); /* owned here */
        st = argv ? spawn_rank(l, cfg, (const char *const *)argv, r, envp, err)
                  : rs_err_set(err, RS_ERR_NOMEM, "launch: out of memory");
        free(argv);
        if (!st && r == 0 && cfg->store_wait_s > 0) st = wait_store(l, cfg, addr, err);
    }
done:
    free(envp);
    free(vars);
    if (st != RS_OK) {
        rs_launch_free(l); /* kills and reaps the ranks already started */
        return st;
    }
    *out = l;
    return RS_OK;
}
