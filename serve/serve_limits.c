/* The server's limits (see serve_limits.h): the option table's expansions, and connections per address. */
#include "serve_limits.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef struct rs_serve_addr_count {
    uint32_t ip;
    int n;
} rs_serve_addr_count;

typedef struct limit_def {
    const char *name;
    int def, lo, hi;
    const char *help;
    size_t off;
} limit_def;

static const limit_def defs[] = {
#define RS_SERVE_LIMIT_DEF(f, name, repl, def, lo, hi, help) {name, def, lo, hi, help, offsetof(rs_serve_limits, f)},
    RS_SERVE_LIMITS(RS_SERVE_LIMIT_DEF)
#undef RS_SERVE_LIMIT_DEF
};
enum { NDEFS = sizeof defs / sizeof *defs };

const char *const rs_serve_refusal_names[RS_SERVE_REFUSED_N] = {
#define RS_SERVE_REFUSAL_NAME(e, s) s,
    RS_SERVE_REFUSALS(RS_SERVE_REFUSAL_NAME)
#undef RS_SERVE_REFUSAL_NAME
};

const char *const rs_serve_frontend_names[RS_SERVE_FE_N] = {"http", "grpc"};

void rs_serve_limits_default(rs_serve_limits *l)
{
    for (int i = 0; i < NDEFS; i++) *(int *)((char *)l + defs[i].off) = defs[i].def;
}

/* name and want equal with '-' and '_' the same */
static bool same_name(const char *name, const char *want)
{
    for (; *name && *want; name++, want++)
        if (*name != *want && !((*name == '_' || *name == '-') && (*want == '_' || *want == '-'))) return false;
    return !*name && !*want;
}

rs_status rs_serve_limits_set(rs_serve_limits *l, const char *name, const char *value, rs_err *err)
{
    while (*name == '-') name++;
    for (int i = 0; i < NDEFS; i++) {
        if (!same_name(name, defs[i].name)) continue;
        char *end;
        errno = 0;
        long v = strtol(value, &end, 10);
        if (!*value || *end || errno || v < defs[i].lo || v > defs[i].hi)
            return rs_err_set(err, RS_ERR_ARG, "%s '%s' is not a whole number in %d..%d (%s)", name, value,
                              defs[i].lo, defs[i].hi, defs[i].help);
        *(int *)((char *)l + defs[i].off) = (int)v;
        return RS_OK;
    }
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "'%s' is no limit", name);
}

void rs_serve_limits_usage(FILE *f)
{
    for (int i = 0; i < NDEFS; i++) {
        char opt[48];
        snprintf(opt, sizeof opt, "--%s N", defs[i].name);
        fprintf(f, "  %-22s %s (default %d)\n", opt, defs[i].help, defs[i].def);
    }
}

void rs_serve_addrs_init(rs_serve_addrs *a)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
}

void rs_serve_addrs_clear(rs_serve_addrs *a)
{
    free(a->a);
    pthread_mutex_destroy(&a->mu);
    memset(a, 0, sizeof *a);
}

/* The entry of ip (a->mu held), or NULL. A linear scan: the table holds at most max_conns addresses
 * and is read once per connection opened or closed. */
static rs_serve_addr_count *slot(rs_serve_addrs *a, uint32_t ip)
{
    for (int i = 0; i < a->n; i++)
        if (a->a[i].ip == ip) return &a->a[i];
    return NULL;
}

static rs_serve_refusal check_locked(rs_serve_addrs *a, uint32_t ip, const rs_serve_limits *l)
{
    if (a->total >= l->max_conns) return RS_SERVE_REFUSED_MAX_CONNS;
    rs_serve_addr_count *e = slot(a, ip);
    if (e && e->n >= l->per_ip) return RS_SERVE_REFUSED_PER_IP;
    return RS_SERVE_REFUSED_N;
}

rs_serve_refusal rs_serve_addrs_check(rs_serve_addrs *a, uint32_t ip, const rs_serve_limits *l)
{
    pthread_mutex_lock(&a->mu);
    rs_serve_refusal r = check_locked(a, ip, l);
    pthread_mutex_unlock(&a->mu);
    return r;
}

rs_serve_refusal rs_serve_addrs_take(rs_serve_addrs *a, uint32_t ip, const rs_serve_limits *l)
{
    pthread_mutex_lock(&a->mu);
    rs_serve_refusal r = check_locked(a, ip, l);
    rs_serve_addr_count *e = r == RS_SERVE_REFUSED_N ? slot(a, ip) : NULL;
    if (r == RS_SERVE_REFUSED_N && !e) {
        if (a->n == a->cap) {
            int cap = a->cap ? 2 * a->cap : 16; /* a->cap grows only with the table */
            rs_serve_addr_count *na = realloc(a->a, (size_t)cap * sizeof *na);
            if (!na) r = RS_SERVE_REFUSED_MAX_CONNS; /* out of memory: refused as if full */
            else a->a = na, a->cap = cap;
        }
        if (r == RS_SERVE_REFUSED_N) {
            e = &a->a[a->n++];
            e->ip = ip;
            e->n = 0;
        }
    }
    if (e) {
        e->n++;
        a->total++;
    }
    pthread_mutex_unlock(&a->mu);
    return r;
}

void rs_serve_addrs_give(rs_serve_addrs *a, uint32_t ip)
{
    pthread_mutex_lock(&a->mu);
    rs_serve_addr_count *e = slot(a, ip);
    if (e) {
        a->total--;
        if (--e->n == 0) *e = a->a[--a->n]; /* an address with no connection leaves the table */
    }
    pthread_mutex_unlock(&a->mu);
}

void rs_serve_raise_fd_limit(long want)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur == RLIM_INFINITY || (long)r.rlim_cur >= want) return;
    rlim_t to = r.rlim_max == RLIM_INFINITY || (long)r.rlim_max > want ? (rlim_t)want : r.rlim_max;
    r.rlim_cur = to;
    setrlimit(RLIMIT_NOFILE, &r); /* best effort: the limits still hold with fewer descriptors */
}
