/* A server: the models of one repository, each version scheduled by its own rs_serve_sched, behind a
 * KServe v2 HTTP front end, a gRPC one (Triton's GRPCInferenceService) and a Prometheus metrics endpoint. Several servers may live in one
 * process (nothing is global); every call is thread-safe. */
#ifndef RS_SERVE_SERVER_H
#define RS_SERVE_SERVER_H

#include <stdio.h>

#include "serve_limits.h"
#include "sched.h"

/* Triton's --model-control-mode. none: every model is loaded at start and load/unload requests are
 * refused (Triton's default); explicit: the models named by load_models are loaded at start ("*":
 * every one) and requests load and unload; poll: as none, and every poll_s seconds the repository is
 * looked at again: new folders loaded, changed ones reloaded, removed ones unloaded. */
typedef enum rs_serve_control_mode { RS_SERVE_CONTROL_NONE, RS_SERVE_CONTROL_EXPLICIT, RS_SERVE_CONTROL_POLL } rs_serve_control_mode;

typedef struct rs_serve_opts {
    const char *repo;      /* the model repository folder (required) */
    const char *host;      /* address to bind; NULL: 127.0.0.1 */
    int http_port;         /* 0: any free port (rs_serve_http_port says which); -1: no HTTP */
    int grpc_port;         /* 0: any free port; -1: no gRPC */
    int metrics_port;      /* 0: any free port; -1: no metrics endpoint */
    /* Overrides of every model's config (from the REPL's serve options); -1 leaves the config's. */
    int max_batch, instances;
    int64_t delay_us;
    size_t body_limit;     /* request body cap in bytes; 0: 64 MB */
    /* Every model across this many rank processes (0: as its config says; its parameters "ranks" and
     * "ranks_mode"), in ranks_mode "pipeline" or "tensor" (NULL: the config's, else pipeline) */
    int ranks;
    const char *ranks_mode;
    bool temp_repo;                   /* repo is a /tmp/ringside-serve-* folder made for this server:
                                         removed at rs_serve_stop (also when rs_serve_start fails) */
    rs_serve_control_mode control;        /* opts_init: none, Triton's default */
    const char *const *load_models;   /* (nload_models) borrowed: explicit mode's models at start */
    int nload_models;
    int poll_s;                       /* poll mode: seconds between looks (0: 15, Triton's default) */
    /* the server's own news (a model's ranks lost and restarted), one line each without newline;
     * NULL: stderr */
    void (*log)(void *ud, const char *line);
    void *log_ud;
    rs_serve_limits limits;  /* connections, timeouts, message entries (serve_limits.h; opts_init sets the defaults) */
} rs_serve_opts;

void rs_serve_opts_init(rs_serve_opts *o);

typedef struct rs_serve_server rs_serve_server;

/* Loads every model of the repository (a model that fails to load is listed UNAVAILABLE with its
 * reason) and starts listening. Caller owns *out. */
rs_status rs_serve_start(const rs_serve_opts *o, rs_serve_server **out, rs_err *err);
/* Stops listening, lets requests in flight finish, unloads everything. NULL is a no-op. */
void rs_serve_stop(rs_serve_server *s);
int rs_serve_http_port(const rs_serve_server *s);
int rs_serve_metrics_port(const rs_serve_server *s);
int rs_serve_grpc_port(const rs_serve_server *s);
const char *rs_serve_repo(const rs_serve_server *s);
/* The address the front ends listen on (the opts' host, or 127.0.0.1). */
const char *rs_serve_host(const rs_serve_server *s);
const rs_serve_limits *rs_serve_limits_of(const rs_serve_server *s);
/* Whether load and unload requests are taken (explicit model control); the front ends refuse them
 * otherwise with RS_SERVE_CONTROL_REFUSAL, Triton's words (HTTP 503, gRPC UNAVAILABLE). */
bool rs_serve_control_explicit(const rs_serve_server *s);
#define RS_SERVE_CONTROL_REFUSAL "explicit model load / unload is not allowed if polling is enabled"
/* The server's refusal counters (the front ends add to them, /metrics reads them). */
rs_serve_refused *rs_serve_refused_of(rs_serve_server *s);

/* ---- model control and lookup (the HTTP handlers and the REPL use these) ---- */

/* (Re)loads NAME from the repository. */
rs_status rs_serve_load(rs_serve_server *s, const char *name, rs_err *err);
rs_status rs_serve_unload(rs_serve_server *s, const char *name, rs_err *err);

typedef struct rs_serve_version {
    int64_t version;
    rs_serve_backend *backend; /* owned by the model */
    rs_serve_sched *sched;     /* owned by the model */
} rs_serve_version;

typedef struct rs_serve_model {
    rs_serve_config cfg;       /* with inputs/outputs completed from the model file */
    int nversions;
    rs_serve_version v[RS_SERVE_MAX_VERSIONS];
    int refs;                  /* guarded by the server's lock */
} rs_serve_model;

/* The model NAME (held: pass it back to rs_serve_release), or NULL when it is not loaded. */
rs_serve_model *rs_serve_acquire(rs_serve_server *s, const char *name);
void rs_serve_release(rs_serve_server *s, rs_serve_model *m);
/* version string "" or NULL: the newest. NULL when there is no such version. */
rs_serve_version *rs_serve_model_version(rs_serve_model *m, const char *version);

/* The repository's index: every model folder, with state "READY" or "UNAVAILABLE" and a reason. */
typedef struct rs_serve_index_entry {
    char name[RS_SERVE_NAME_MAX];
    int64_t version;           /* 0: no version loaded */
    const char *state;
    char reason[256];
    int restarts;              /* times its ranks were started again after one died */
} rs_serve_index_entry;
/* Caller frees *out. */
rs_status rs_serve_index(rs_serve_server *s, rs_serve_index_entry **out, int *n, rs_err *err);

/* Ready to serve: no model is down for a rank it lost (what /v2/health/ready and ServerReady say). */
bool rs_serve_ready(rs_serve_server *s);

/* Every loaded model's name and version statistics, for metrics and `serve` at the prompt:
 * calls fn once per (model, version). */
typedef void (*rs_serve_each_fn)(void *ud, const rs_serve_model *m, const rs_serve_version *v, const rs_serve_stats *st);
void rs_serve_each(rs_serve_server *s, rs_serve_each_fn fn, void *ud);

/* ---- the front ends (serve/http.c, serve/metrics.c) ---- */
typedef struct rs_serve_http rs_serve_http;
rs_status rs_serve_http_start(rs_serve_server *s, const char *host, int port, bool metrics, size_t body_limit,
                              rs_serve_http **out, rs_err *err);
int rs_serve_http_bound_port(const rs_serve_http *h);
void rs_serve_http_stop(rs_serve_http *h);
/* gRPC (serve/grpc.c): inference.GRPCInferenceService over HTTP/2 on its own port. */
typedef struct rs_serve_grpc rs_serve_grpc;
rs_status rs_serve_grpc_start(rs_serve_server *s, const char *host, int port, size_t body_limit, rs_serve_grpc **out,
                              rs_err *err);
int rs_serve_grpc_bound_port(const rs_serve_grpc *g);
/* Stops accepting, answers the calls begun, closes. NULL is a no-op. */
void rs_serve_grpc_stop(rs_serve_grpc *g);
/* The Prometheus text of every counter (malloc'd). */
char *rs_serve_metrics_text(rs_serve_server *s);

/* `ringside serve --repo DIR ...`: runs until SIGTERM/SIGINT, then drains. Returns the exit status. */
int rs_serve_main(int argc, char **argv, FILE *out, FILE *errf);

#endif
