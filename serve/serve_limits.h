/* What one server lets its clients hold: connections (in all and per client address), how long a
 * connection may sit idle or take over a request, how many entries a gRPC inference request may
 * carry; and the counts of what it refused, by front end and reason, for /metrics.
 *
 * The options are declared once, in RS_SERVE_LIMITS below: `ringside serve --NAME N`, the REPL's
 * `serve ... NAME=N` (with '_' for '-'), the usage text and the defaults all come from it. */
#ifndef RS_SERVE_SERVE_LIMITS_H
#define RS_SERVE_SERVE_LIMITS_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/core/status.h"

/* X(field, option name, the REPL's option name, default, lo, hi, help) */
#define RS_SERVE_LIMITS(X)                                                                                     \
    X(max_conns, "max-conns", "max_conns", 2048, 1, 1000000,                                                   \
      "connections each front end (HTTP, gRPC) holds at once")                                                 \
    X(per_ip, "per-ip", "per_ip", 512, 1, 1000000, "connections each front end holds from one client address") \
    X(idle_s, "idle", "idle", 60, 1, 86400,                                                                    \
      "seconds a connection may sit with nothing in progress before it is closed")                             \
    X(request_s, "request-timeout", "request_timeout", 30, 1, 86400,                                           \
      "seconds an HTTP connection has for each request's headers and body, counted from when it opened or "    \
      "from its previous answer, and a unary gRPC call for its request (a byte now and then does not extend "  \
      "it)")                                                                                                   \
    X(max_entries, "max-entries", "max_entries", 1024, 1, 1000000,                                             \
      "inputs, outputs, raw contents or parameters in one gRPC inference request (and parameters of one "      \
      "tensor)")                                                                                               \
    X(rank_restarts, "rank-restarts", "rank_restarts", 3, 0, 1000,                                             \
      "times a model across ranks is started again after a rank dies (UNAVAILABLE meanwhile and after the "    \
      "last)")

typedef struct rs_serve_limits {
#define RS_SERVE_LIMIT_FIELD(f, name, repl, def, lo, hi, help) int f;
    RS_SERVE_LIMITS(RS_SERVE_LIMIT_FIELD)
#undef RS_SERVE_LIMIT_FIELD
} rs_serve_limits;

void rs_serve_limits_default(rs_serve_limits *l);
/* Sets the limit called name ("max-conns" or "max_conns", "--max-conns" too) from value. RS_ERR_ARG
 * naming the range when value is not a whole number in it; RS_ERR_UNSUPPORTED when name is no limit. */
rs_status rs_serve_limits_set(rs_serve_limits *l, const char *name, const char *value, rs_err *err);
/* One "  --NAME N   help (default D)" line per limit. */
void rs_serve_limits_usage(FILE *f);

/* ---- refusals, counted per front end and reason (atomic counters; /metrics shows them) ---- */

typedef enum { RS_SERVE_FE_HTTP, RS_SERVE_FE_GRPC, RS_SERVE_FE_N } rs_serve_frontend;
#define RS_SERVE_REFUSALS(X)                                                                                           \
    X(RS_SERVE_REFUSED_MAX_CONNS, "max_conns")                                                                         \
    X(RS_SERVE_REFUSED_PER_IP, "per_ip")                                                                               \
    X(RS_SERVE_REFUSED_REQUEST_TIMEOUT, "request_timeout")                                                             \
    X(RS_SERVE_REFUSED_IDLE, "idle")                                                                                   \
    X(RS_SERVE_REFUSED_ENTRIES, "max_entries")                                                                         \
    X(RS_SERVE_REFUSED_NAME, "bad_name")
typedef enum {
#define RS_SERVE_REFUSAL_ENUM(e, s) e,
    RS_SERVE_REFUSALS(RS_SERVE_REFUSAL_ENUM)
#undef RS_SERVE_REFUSAL_ENUM
    RS_SERVE_REFUSED_N
} rs_serve_refusal;
extern const char *const rs_serve_refusal_names[RS_SERVE_REFUSED_N];
extern const char *const rs_serve_frontend_names[RS_SERVE_FE_N];

typedef struct rs_serve_refused {
    uint64_t n[RS_SERVE_FE_N][RS_SERVE_REFUSED_N]; /* atomic */
    int64_t open[RS_SERVE_FE_N];                   /* connections held now (atomic) */
} rs_serve_refused;

static inline void rs_serve_refused_add(rs_serve_refused *r, rs_serve_frontend fe, rs_serve_refusal why)
{
    __atomic_add_fetch(&r->n[fe][why], 1, __ATOMIC_RELAXED);
}

/* ---- connections held per client address, for one front end ---- */

typedef struct rs_serve_addrs {
    pthread_mutex_t mu;
    struct rs_serve_addr_count *a; /* (n), owned */
    int n, cap;
    int total;
} rs_serve_addrs;

void rs_serve_addrs_init(rs_serve_addrs *a);
void rs_serve_addrs_clear(rs_serve_addrs *a);
/* Takes a place for a connection from ip (network byte order): RS_SERVE_REFUSED_N when it fits the
 * limits, else the reason it does not (and nothing is taken). */
rs_serve_refusal rs_serve_addrs_take(rs_serve_addrs *a, uint32_t ip, const rs_serve_limits *l);
/* Only checks, taking nothing (a library that creates the connection after asking). */
rs_serve_refusal rs_serve_addrs_check(rs_serve_addrs *a, uint32_t ip, const rs_serve_limits *l);
void rs_serve_addrs_give(rs_serve_addrs *a, uint32_t ip);

/* Raises this process's soft limit on open descriptors towards its hard one, to at least want (a
 * server holding its connection limits needs that many; the common default is 1024). */
void rs_serve_raise_fd_limit(long want);

#endif
