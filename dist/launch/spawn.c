/* A run's ranks started the one way (see spawn.h): the meeting point, the command line, the launch. */
#define _GNU_SOURCE
#include "spawn.h"
#include "remote.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

rs_status rs_spawn_self(char *exe, size_t cap, rs_err *err)
{
    ssize_t n = cap > 1 ? readlink("/proc/self/exe", exe, cap - 1) : -1;
    if (n <= 0) return rs_err_set(err, RS_ERR_IO, "cannot find the ringside binary to start ranks");
    exe[n] = 0;
    return RS_OK;
}

/* A TCP port free on 127.0.0.1 right now (the kernel's pick), for a rank 0 that hosts the store itself. */
static rs_status free_port(int *port, rs_err *err)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    rs_status st = RS_OK;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        *port = ntohs(a.sin_port);
    else st = rs_err_set(err, RS_ERR_IO, "finding a free port for rank 0's store: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return st;
}

rs_status rs_spawn_host_store(rs_spawn_store how, rs_store_server **srv, int *port, rs_err *err)
{
    *srv = NULL;
    *port = 0;
    if (how == RS_SPAWN_STORE_MPI) return RS_OK;
    if (how == RS_SPAWN_STORE_RANK0) return free_port(port, err);
    rs_err e = {0};
    if (rs_store_server_start("127.0.0.1", 0, srv, &e))
        return rs_err_set(err, e.code ? e.code : RS_ERR_IO, "starting the rendezvous store: %s", e.msg);
    *port = rs_store_server_port(*srv);
    return RS_OK;
}

char **rs_spawn_argv(const rs_spawn_cfg *cfg)
{
    bool mpi = cfg->store == RS_SPAWN_STORE_MPI;
    char world[16], group[160], tmo[48];
    snprintf(world, sizeof world, "%d", cfg->world);
    snprintf(group, sizeof group, "group=%s", cfg->group);
    snprintf(tmo, sizeof tmo, "timeout=%g", cfg->timeout_s);
    const char *head[16];
    int nh = 0;
    if (mpi) {
        head[nh++] = "mpirun";
        if (geteuid() == 0) head[nh++] = "--allow-run-as-root";
        head[nh++] = "--oversubscribe";
        head[nh++] = "--tag-output"; /* keeps each rank's lines whole; the reader strips the tag */
        if (cfg->bind) {
            head[nh++] = "--bind-to";
            head[nh++] = cfg->bind;
        }
        head[nh++] = "-np";
        head[nh++] = world;
        if (cfg->hosts) {
            head[nh++] = "--host";
            head[nh++] = cfg->hosts;
        }
    }
    head[nh++] = cfg->exe;
    head[nh++] = "--worker";
    head[nh++] = cfg->job;
    head[nh++] = group;
    head[nh++] = tmo;
    head[nh++] = cfg->store == RS_SPAWN_STORE_RANK0 ? "store=rank0" : "store=launcher";
    /* one block: the pointers, then every string they point at */
    int argc = nh + cfg->nargs;
    size_t text = 0;
    for (int i = 0; i < argc; i++) text += strlen(i < nh ? head[i] : cfg->args[i - nh]) + 1;
    size_t ptrs = sizeof(char *) * (size_t)(argc + 1);
    char **argv = malloc(ptrs + text); /* the caller's, one free() */
    if (!argv) return NULL;
    char *p = (char *)argv + ptrs;
    for (int i = 0; i < argc; i++) {
        const char *a = i < nh ? head[i] : cfg->args[i - nh];
        size_t n = strlen(a) + 1;
        memcpy(p, a, n);
        argv[i] = p;
        p += n;
    }
    argv[argc] = NULL;
    return argv;
}

bool rs_spawn_untag(const char **line, int *rank, int *is_stderr)
{
    int job, r, used = 0;
    char which[8];
    const char *l = *line;
    if (l[0] != '[' || sscanf(l, "[%d,%d]<%6[a-z]>:%n", &job, &r, which, &used) != 3 || used <= 0) return false;
    *rank = r;
    *is_stderr = !strcmp(which, "stderr");
    *line = l + used;
    return true;
}

/* Placement for the ranks (cfg->bind): *plan for ranks on this host (the caller's), and c->bind as
 * mpirun is to take it. */
static rs_status plan_binding(rs_spawn_cfg *c, bool mpi, rs_bind_plan **plan, rs_err *err)
{
    *plan = NULL;
    if (!c->bind) return RS_OK;
    rs_bind_policy pol;
    if (!rs_bind_from_name(c->bind, &pol))
        return rs_err_set(err, RS_ERR_ARG, "bind=%s: not a placement; one of core, numa, none", c->bind);
    if (c->hosts) { /* other hosts' cores are theirs: mpirun binds there by its default unless told none */
        if (!mpi || pol != RS_BIND_NONE) c->bind = NULL;
        return RS_OK;
    }
    rs_status st = rs_bind_plan_make(pol, c->world, c->bind_cores, plan, err);
    if (st || !mpi) return st;
    /* mpirun places its ranks itself; ours is only the word, and none where they would not fit */
    if (!(*plan)->bound) c->bind = "none";
    else snprintf((*plan)->note, sizeof (*plan)->note, "mpirun --bind-to %s places the ranks", c->bind);
    (*plan)->bound = false;
    return RS_OK;
}

/* cfg's extra environment and the plan's variable, NULL-terminated (the array the caller's, one free);
 * *env is extra itself when there is nothing to add. */
static rs_status with_bind_env(const char *const *extra, const rs_bind_plan *plan, const char *const **env,
                               rs_err *err)
{
    *env = extra;
    if (!plan || !plan->bound) return RS_OK;
    int n = 0;
    while (extra && extra[n]) n++;
    const char **e = malloc(sizeof *e * (size_t)(n + 2)); /* the caller's */
    if (!e) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) e[i] = extra[i];
    e[n] = plan->env;
    e[n + 1] = NULL;
    *env = e;
    return RS_OK;
}

rs_status rs_spawn_start(const rs_spawn_cfg *cfg, int port, rs_launch **out, rs_err *err)
{
    *out = NULL;
    if (cfg->bind_plan) *cfg->bind_plan = NULL;
    char exe[PATH_MAX];
    rs_spawn_cfg c = *cfg;
    if (!c.exe) {
        rs_status st = rs_spawn_self(exe, sizeof exe, err);
        if (st) return st;
        c.exe = exe;
    }
    bool mpi = c.store == RS_SPAWN_STORE_MPI;
    rs_bind_plan *plan = NULL; /* owned here until handed to the caller */
    const char *const *env = NULL;
    rs_status st = plan_binding(&c, mpi, &plan, err);
    if (!st) st = with_bind_env(c.extra_env, plan, &env, err);
    if (st) {
        rs_bind_plan_free(plan);
        return st;
    }
    char **argv = rs_spawn_argv(&c); /* owned here */
    char **hosts = NULL; /* owned here: without mpirun, each rank's host, reached through the rsh agent */
    if (!argv) st = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    if (!st && !mpi && c.hosts) st = rs_remote_rank_hosts(c.hosts, c.world, &hosts, err);
    if (!st) {
        rs_launch_cfg lc = {.nranks = mpi ? 1 : c.world, .argv = (const char *const *)argv,
                            .rank_hosts = (const char *const *)hosts, .master_addr = hosts ? hosts[0] : NULL,
                            .master_port = port ? port : 1, /* mpirun's ranks do not read it */
                            .local_world_size = mpi ? 0 : c.per_node, .extra_env = env, .grace_s = c.grace_s,
                            .store_wait_s = hosts && c.store == RS_SPAWN_STORE_RANK0 ? 60 : 0, /* rank 0's store first */
                            .on_line = c.on_line, .line_ud = c.line_ud, .should_stop = c.should_stop,
                            .stop_ud = c.stop_ud,
                            /* SIGKILL would leave mpirun no chance to clean up after its ranks */
                            .death_sig = mpi ? SIGTERM : 0};
        st = rs_launch_start(&lc, out, err);
    }
    free(argv); /* the ranks have their copies (exec) */
    free(hosts);
    if (env != c.extra_env) free((void *)env);
    if (!st && cfg->bind_plan) *cfg->bind_plan = plan;
    else rs_bind_plan_free(plan);
    return st;
}
