/* Where a run's ranks run: each rank bound to cores of its own, the ranks of one host packed into one
 * L3 cache (or NUMA node) where they fit, as Open MPI's mpirun binds them by default (`--bind-to core`
 * at 2 ranks). The topology is hwloc's (the library Open MPI uses), never parsed here. The launcher's
 * side plans the sets (rs_bind_plan_make) and hands them to the ranks in RINGSIDE_BIND_CPUS; a rank
 * binds itself, every thread, before its job starts (rs_bind_self_from_env). Ranks started by hand
 * (torchrun's variables, mpirun) have no RINGSIDE_BIND_CPUS and keep the placement they were given. */
#ifndef RS_BIND_H
#define RS_BIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "engine/core/status.h"

/* The option's words, as bind= takes them (the command table reads this list). */
typedef enum rs_bind_policy {
    RS_BIND_NONE = 0, /* the kernel places the ranks (and a zeroed rs_spawn_cfg asks for nothing) */
    RS_BIND_CORE,     /* each rank on cores of its own, packed into one L3 cache / NUMA node if they fit */
    RS_BIND_NUMA,     /* each rank on the whole NUMA node of the core it is mapped to */
} rs_bind_policy;

extern const char *const rs_bind_names[]; /* "core", "numa", "none", NULL */

/* The word's policy; false for a word not in rs_bind_names. */
bool rs_bind_from_name(const char *word, rs_bind_policy *out);

/* The environment variable that carries the plan to the ranks: one CPU list a rank, by RANK, ';' between
 * them ("0;1", "0,8;1,9"). */
#define RS_BIND_ENV "RINGSIDE_BIND_CPUS"

typedef struct rs_bind_plan {
    rs_bind_policy policy; /* what was asked */
    bool bound;            /* the ranks get cpus[]; false: left to the kernel (none, or `note` says why) */
    int world;
    char **cpus;           /* (world) rank r's CPU list ("0-1,8"), when bound */
    char domain[96];       /* where they were packed: "one L3 cache (CPUs 0-7)", "2 NUMA nodes" ... */
    char note[256];        /* why a binding asked for was not made: fewer cores than ranks ...; "" */
    char *env;             /* RS_BIND_ENV=... for the ranks' environment, when bound */
} rs_bind_plan;

/* Plans `world` ranks of `per_rank` cores each (>= 1) within this thread's affinity mask (taskset, a
 * cgroup's cpuset: what a forked rank inherits). Not binding is not an error: with fewer usable cores
 * than world * per_rank, plan->bound is false and plan->note says so. *out is the caller's
 * (rs_bind_plan_free). RS_ERR_NOMEM / RS_ERR_IO (hwloc could not read the topology). */
rs_status rs_bind_plan_make(rs_bind_policy policy, int world, int per_rank, rs_bind_plan **out, rs_err *err);

/* One line for people: "bind=core: rank 0 on CPU 0, rank 1 on CPU 1 (one L3 cache, CPUs 0-1)", or
 * "bind=none: the kernel places the ranks", or "bind=core: not bound: ... ". */
void rs_bind_plan_describe(const rs_bind_plan *p, char *buf, size_t cap);

void rs_bind_plan_free(rs_bind_plan *p);

/* In a rank: binds this whole process (every thread it has, and so every thread it makes) to its entry
 * of RS_BIND_ENV (by RANK). Nothing when the variable is not set. A failure is said on errf and the
 * rank runs unbound: placement is a speed matter, never a reason to fail a run. */
void rs_bind_self_from_env(FILE *errf);

#endif
