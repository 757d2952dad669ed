/* The binding plan and a rank's side of it (dist/launch/bind.h), checked against the kernel's own
 * figures (sched_getaffinity): a plan for one rank is one core within this thread's mask, a plan for
 * more ranks than usable cores binds nothing and says why, a rank given RINGSIDE_BIND_CPUS ends up on
 * those CPUs (a thread it already had too) and drops the variable, a bad entry leaves it where it was; and
 * mpirun's command line carries --bind-to only when asked. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/launch/bind.h"
#include "dist/launch/spawn.h"
#include "tests/rs_test.h"

static cpu_set_t affinity(void)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    sched_getaffinity(0, sizeof s, &s);
    return s;
}

/* "0-2,5" -> set; false on anything else. */
static bool parse_list(const char *t, cpu_set_t *out)
{
    CPU_ZERO(out);
    while (*t) {
        char *end;
        long lo = strtol(t, &end, 10), hi = lo;
        if (end == t) return false;
        if (*end == '-') hi = strtol(end + 1, &end, 10);
        for (long c = lo; c <= hi && c < CPU_SETSIZE; c++) CPU_SET((int)c, out);
        if (*end == ',') end++;
        else if (*end) return false;
        t = end;
    }
    return true;
}

static void plans(const cpu_set_t *mask)
{
    rs_bind_policy pol;
    RS_CHECK(rs_bind_from_name("core", &pol) && pol == RS_BIND_CORE, "core is a policy");
    RS_CHECK(!rs_bind_from_name("cores", &pol), "'cores' is not a policy");
    rs_bind_plan *p = NULL;
    rs_err e = {0};
    RS_CHECK(rs_bind_plan_make(RS_BIND_NONE, 2, 1, &p, &e) == RS_OK && p && !p->bound, "none: nothing bound");
    rs_bind_plan_free(p);
    RS_CHECK(rs_bind_plan_make(RS_BIND_CORE, 1, 1, &p, &e) == RS_OK && p && p->bound, "core, 1 rank: bound");
    cpu_set_t got, in;
    if (p && p->bound) {
        RS_CHECK(parse_list(p->cpus[0], &got) && CPU_COUNT(&got) >= 1, "a CPU list: '%s'", p->cpus[0]);
        CPU_AND(&in, &got, mask);
        RS_CHECK(CPU_EQUAL(&in, &got), "rank 0's CPUs '%s' are within this thread's mask", p->cpus[0]);
        RS_CHECK(p->env && !strncmp(p->env, RS_BIND_ENV "=", strlen(RS_BIND_ENV) + 1) &&
                     !strcmp(p->env + strlen(RS_BIND_ENV) + 1, p->cpus[0]),
                 "the ranks' variable carries the list: '%s'", p->env ? p->env : "(null)");
    }
    rs_bind_plan_free(p);
    int many = CPU_COUNT(mask) + 1; /* more ranks than usable CPUs, so than cores */
    RS_CHECK(rs_bind_plan_make(RS_BIND_CORE, many, 1, &p, &e) == RS_OK && p && !p->bound && strstr(p->note, "not bound"),
             "core, %d ranks on %d CPUs: not bound, with a note ('%s')", many, CPU_COUNT(mask), p ? p->note : "");
    char line[512];
    if (p) rs_bind_plan_describe(p, line, sizeof line);
    RS_CHECK(p && strstr(line, "bind=core: ") == line && strstr(line, "need"), "described: '%s'", p ? line : "");
    rs_bind_plan_free(p);
    rs_bind_plan_free(NULL);
}

/* A thread the rank already has when it binds itself (OpenMP's, OpenBLAS's): waits to be let go. */
static void *sleeper(void *arg)
{
    pthread_barrier_wait(arg);
    return NULL;
}

static void self_bind(const cpu_set_t *mask)
{
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, mask)) first = c;
    char env[64];
    snprintf(env, sizeof env, "7;%d", first); /* rank 1's entry is `first` */
    setenv(RS_BIND_ENV, env, 1);
    setenv("RANK", "1", 1);
    pthread_barrier_t go;
    pthread_t t;
    pthread_barrier_init(&go, NULL, 2);
    bool made = pthread_create(&t, NULL, sleeper, &go) == 0;
    rs_bind_self_from_env(stderr);
    cpu_set_t now = affinity(), want, ts;
    CPU_ZERO(&want);
    CPU_SET(first, &want);
    RS_CHECK(CPU_EQUAL(&now, &want), "RANK=1 of '%s': bound to CPU %d alone", env, first);
    RS_CHECK(getenv(RS_BIND_ENV) == NULL, "the variable is gone from the rank's environment");
    RS_CHECK(made && pthread_getaffinity_np(t, sizeof ts, &ts) == 0 && CPU_EQUAL(&ts, &want),
             "a thread the rank already had is bound too (the whole process)");
    if (made) {
        pthread_barrier_wait(&go);
        pthread_join(t, NULL);
    }
    pthread_barrier_destroy(&go);
    sched_setaffinity(0, sizeof *mask, mask);
    setenv(RS_BIND_ENV, "0", 1);
    setenv("RANK", "3", 1); /* no entry for rank 3 */
    rs_bind_self_from_env(stderr);
    now = affinity();
    RS_CHECK(CPU_EQUAL(&now, mask), "a rank without an entry keeps its CPUs");
    unsetenv(RS_BIND_ENV);
    unsetenv("RANK");
}

static void mpirun_argv(void)
{
    const char *args[] = {"op=all_reduce"};
    rs_spawn_cfg c = {.exe = "/x/ringside", .job = "collective", .group = "g", .timeout_s = 5, .world = 2,
                      .store = RS_SPAWN_STORE_MPI, .args = args, .nargs = 1, .bind = "numa"};
    for (int k = 0; k < 2; k++) {
        char **argv = rs_spawn_argv(&c);
        int at = -1, np = -1;
        for (int i = 0; argv && argv[i]; i++) {
            if (!strcmp(argv[i], "--bind-to")) at = i;
            if (!strcmp(argv[i], "-np")) np = i;
        }
        if (k == 0)
            RS_CHECK(at >= 0 && !strcmp(argv[at + 1], "numa") && at < np, "bind=numa: mpirun --bind-to numa");
        else RS_CHECK(at < 0 && np > 0, "bind not asked: no --bind-to (mpirun's own default)");
        free(argv);
        c.bind = NULL;
    }
}

int main(void)
{
    cpu_set_t mask = affinity();
    plans(&mask);
    self_bind(&mask);
    mpirun_argv();
    return rs_test_finish("bind");
}
