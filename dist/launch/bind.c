/* Binding a run's ranks (see bind.h). Why: left unbound, the kernel may put two ranks that hand each
 * other data on two hyperthreads of one core, on two L3 caches (a Zen CCX each: every chunk then crosses
 * the Infinity Fabric), or on one CPU with something else, and move them mid-run; a run then lands in a
 * slow state by chance (docs/dist.md, "Binding ranks"). mpirun binds each of 2 ranks to a core by
 * default, so its runs do not. */
#define _GNU_SOURCE
#include "bind.h"

#include <errno.h>
#include <hwloc.h>
#include <stdlib.h>
#include <string.h>

const char *const rs_bind_names[] = {"core", "numa", "none", NULL};

bool rs_bind_from_name(const char *word, rs_bind_policy *out)
{
    static const rs_bind_policy v[] = {RS_BIND_CORE, RS_BIND_NUMA, RS_BIND_NONE};
    for (int i = 0; word && rs_bind_names[i]; i++)
        if (!strcmp(word, rs_bind_names[i])) {
            *out = v[i];
            return true;
        }
    return false;
}

static const char *policy_name(rs_bind_policy p) { return p == RS_BIND_CORE ? "core" : p == RS_BIND_NUMA ? "numa" : "none"; }

/* A topology of this machine, I/O devices left out (only CPUs and caches matter here). NULL on failure. */
static hwloc_topology_t topo_load(void)
{
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) return NULL;
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        return NULL;
    }
    return t;
}

/* The first object of type `dt` holding `need` of the usable cores, and those cores (into pick);
 * NULL when none holds that many. */
static hwloc_obj_t pack_into(hwloc_topology_t t, hwloc_obj_type_t dt, hwloc_obj_t *cores, int ncores, int need,
                             hwloc_obj_t *pick)
{
    int nd = hwloc_get_nbobjs_by_type(t, dt);
    for (int i = 0; i < nd; i++) {
        hwloc_obj_t d = hwloc_get_obj_by_type(t, dt, (unsigned)i);
        int got = 0;
        for (int c = 0; c < ncores && got < need; c++)
            if (hwloc_bitmap_isincluded(cores[c]->cpuset, d->cpuset)) pick[got++] = cores[c];
        if (got == need) return d;
    }
    return NULL;
}

/* The NUMA node whose CPUs hold `core`; NULL when hwloc knows none. */
static hwloc_obj_t numa_of(hwloc_topology_t t, hwloc_obj_t core)
{
    int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t d = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
        if (d->cpuset && hwloc_bitmap_isincluded(core->cpuset, d->cpuset)) return d;
    }
    return NULL;
}

/* The sets themselves, from the chosen cores (pick: world * per_rank of them, in rank order). */
static rs_status plan_sets(rs_bind_plan *p, hwloc_topology_t t, hwloc_const_bitmap_t allowed, hwloc_obj_t *pick,
                           int per_rank)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc(); /* owned here */
    size_t envlen = strlen(RS_BIND_ENV) + 2;
    for (int r = 0; set && r < p->world; r++) {
        hwloc_bitmap_zero(set);
        for (int k = 0; k < per_rank; k++) {
            hwloc_obj_t core = pick[r * per_rank + k];
            hwloc_obj_t numa = p->policy == RS_BIND_NUMA ? numa_of(t, core) : NULL;
            hwloc_bitmap_or(set, set, p->policy == RS_BIND_NUMA ? (numa ? numa->cpuset : allowed) : core->cpuset);
        }
        hwloc_bitmap_and(set, set, allowed);
        if (hwloc_bitmap_list_asprintf(&p->cpus[r], set) < 0) break; /* p's */
        envlen += strlen(p->cpus[r]) + 1;
    }
    hwloc_bitmap_free(set);
    for (int r = 0; r < p->world; r++)
        if (!p->cpus[r]) return RS_ERR_NOMEM;
    p->env = malloc(envlen); /* p's */
    if (!p->env) return RS_ERR_NOMEM;
    size_t used = (size_t)snprintf(p->env, envlen, "%s=", RS_BIND_ENV);
    for (int r = 0; r < p->world && used < envlen; r++)
        used += (size_t)snprintf(p->env + used, envlen - used, "%s%s", r ? ";" : "", p->cpus[r]);
    p->bound = true;
    return RS_OK;
}

/* Chooses the cores: all in one L3 cache if they fit, else one NUMA node, else the first ones in the
 * machine's order (which fills one cache, then the next). */
static rs_status plan_on(rs_bind_plan *p, hwloc_topology_t t, hwloc_bitmap_t allowed, int per_rank)
{
    hwloc_obj_type_t ct = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    int n = hwloc_get_nbobjs_by_type(t, ct), need = p->world * per_rank, ncores = 0;
    hwloc_obj_t *cores = calloc((size_t)(n > 0 ? n : 1) + (size_t)need, sizeof *cores); /* owned here */
    if (!cores) return RS_ERR_NOMEM;
    hwloc_obj_t *pick = cores + (n > 0 ? n : 1);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t c = hwloc_get_obj_by_type(t, ct, (unsigned)i);
        if (hwloc_bitmap_intersects(c->cpuset, allowed)) cores[ncores++] = c; /* its allowed PUs (plan_sets) */
    }
    char *mask = NULL;
    if (hwloc_bitmap_list_asprintf(&mask, allowed) < 0) mask = NULL;
    if (ncores < need) {
        snprintf(p->note, sizeof p->note, "%d rank%s of %d core%s each need %d cores, and this process may use %d "
                 "(CPUs %s): ranks not bound, the kernel places them", p->world, p->world == 1 ? "" : "s", per_rank,
                 per_rank == 1 ? "" : "s", need, ncores, mask ? mask : "?");
        free(mask);
        free(cores);
        return RS_OK;
    }
    static const struct { hwloc_obj_type_t type; const char *what; } dom[] = {
        {HWLOC_OBJ_L3CACHE, "L3 cache"}, {HWLOC_OBJ_NUMANODE, "NUMA node"}, {HWLOC_OBJ_PACKAGE, "package"}};
    hwloc_obj_t d = NULL;
    size_t k = 0;
    for (; k < sizeof dom / sizeof dom[0] && !d; k++) d = pack_into(t, dom[k].type, cores, ncores, need, pick);
    if (d) {
        hwloc_bitmap_t in = hwloc_bitmap_dup(d->cpuset); /* owned here */
        char *list = NULL;
        if (in) hwloc_bitmap_and(in, in, allowed);
        if (!in || hwloc_bitmap_list_asprintf(&list, in) < 0) list = NULL;
        snprintf(p->domain, sizeof p->domain, "one %s, CPUs %s", dom[k - 1].what, list ? list : "?");
        free(list);
        hwloc_bitmap_free(in);
    } else {
        memcpy(pick, cores, sizeof *pick * (size_t)need);
        snprintf(p->domain, sizeof p->domain, "more cores than one L3 cache or NUMA node has, CPUs %s",
                 mask ? mask : "?");
    }
    free(mask);
    rs_status st = plan_sets(p, t, allowed, pick, per_rank);
    free(cores);
    return st;
}

rs_status rs_bind_plan_make(rs_bind_policy policy, int world, int per_rank, rs_bind_plan **out, rs_err *err)
{
    *out = NULL;
    rs_bind_plan *p = calloc(1, sizeof *p); /* the caller's */
    if (!p || world < 1 || !(p->cpus = calloc((size_t)world, sizeof *p->cpus))) {
        free(p);
        return world < 1 ? rs_err_set(err, RS_ERR_ARG, "bind: %d ranks", world) : rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    p->policy = policy;
    p->world = world;
    *out = p;
    if (policy == RS_BIND_NONE) return RS_OK;
    hwloc_topology_t t = topo_load();
    hwloc_bitmap_t allowed = hwloc_bitmap_alloc(); /* owned here */
    rs_status st = RS_OK;
    if (!t || !allowed) {
        snprintf(p->note, sizeof p->note, "hwloc could not read this machine's topology: ranks not bound");
    } else if (hwloc_get_cpubind(t, allowed, HWLOC_CPUBIND_THREAD) != 0) {
        snprintf(p->note, sizeof p->note, "reading this thread's CPU affinity failed (%s): ranks not bound",
                 strerror(errno));
    } else {
        hwloc_bitmap_and(allowed, allowed, hwloc_topology_get_allowed_cpuset(t));
        st = plan_on(p, t, allowed, per_rank < 1 ? 1 : per_rank);
    }
    hwloc_bitmap_free(allowed);
    if (t) hwloc_topology_destroy(t);
    if (st) {
        rs_bind_plan_free(p);
        *out = NULL;
        return rs_err_set(err, st, "bind: out of memory");
    }
    return RS_OK;
}

void rs_bind_plan_describe(const rs_bind_plan *p, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "bind=%s: ", policy_name(p->policy));
    if (p->policy == RS_BIND_NONE) {
        snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, "ranks not bound, the kernel places them");
        return;
    }
    if (!p->bound) {
        snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, "%s", p->note);
        return;
    }
    for (int r = 0; r < p->world && n < cap; r++) {
        if (r == 8 && p->world > 9) {
            n += (size_t)snprintf(buf + n, cap - n, ", ... rank %d", p->world - 1);
            r = p->world - 1;
        }
        bool one = !strpbrk(p->cpus[r], ",-");
        n += (size_t)snprintf(buf + n, cap - n, "%srank %d on CPU%s %s", r ? ", " : "", r, one ? "" : "s", p->cpus[r]);
    }
    if (n < cap) snprintf(buf + n, cap - n, " (%s)", p->domain);
}

void rs_bind_plan_free(rs_bind_plan *p)
{
    if (!p) return;
    for (int r = 0; p->cpus && r < p->world; r++) free(p->cpus[r]);
    free(p->cpus);
    free(p->env);
    free(p);
}

void rs_bind_self_from_env(FILE *errf)
{
    const char *v = getenv(RS_BIND_ENV), *rk = getenv("RANK");
    if (!v || !*v) return;
    char *end = NULL;
    long rank = rk ? strtol(rk, &end, 10) : -1;
    const char *f = v;
    for (long i = 0; rank >= 0 && i < rank && f; i++) f = strchr(f, ';') ? strchr(f, ';') + 1 : NULL;
    if (rank < 0 || !end || *end || !f) {
        fprintf(errf, "ringside: %s=%s has no entry for RANK=%s; this rank runs unbound\n", RS_BIND_ENV, v, rk ? rk : "(unset)");
        return;
    }
    char field[512];
    snprintf(field, sizeof field, "%.*s", (int)(strchr(f, ';') ? strchr(f, ';') - f : (long)strlen(f)), f);
    hwloc_topology_t t = topo_load();
    hwloc_bitmap_t set = hwloc_bitmap_alloc(); /* owned here */
    errno = 0;
    if (!t || !set || hwloc_bitmap_list_sscanf(set, field) != 0 || hwloc_bitmap_iszero(set) ||
        hwloc_set_cpubind(t, set, HWLOC_CPUBIND_PROCESS) != 0)
        fprintf(errf, "ringside: rank %ld: binding to CPUs '%s' failed (%s); this rank runs unbound\n", rank, field,
                errno ? strerror(errno) : "not a CPU list");
    unsetenv(RS_BIND_ENV); /* what this rank starts is not ours to place */
    hwloc_bitmap_free(set);
    if (t) hwloc_topology_destroy(t);
}
