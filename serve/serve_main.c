/* `ringside serve --repo DIR [--http PORT] [--grpc PORT] [--metrics PORT] [--host ADDR]`: the standalone
 * server. Triton's spellings (--model-repository, --http-port, --grpc-port, --metrics-port,
 * --http-address) work too, so
 * a command line written for tritonserver needs only its program name changed. SIGTERM or SIGINT
 * stops listening, lets the requests in flight finish and exits 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server.h"

static void usage(FILE *f)
{
    fputs("usage: ringside serve --repo DIR [--http PORT] [--grpc PORT] [--metrics PORT] [--host ADDR]\n"
          "  --repo DIR       a model repository in Triton's layout (NAME/config.pbtxt, NAME/1/model.onnx);\n"
          "                   also --model-repository DIR\n"
          "  --http PORT      KServe v2 HTTP/REST port (default 8000; 0 picks a free one); also --http-port\n"
          "  --grpc PORT      gRPC port, Triton's GRPCInferenceService (default 8001; 0 picks a free one;\n"
          "                   -1 turns it off); also --grpc-port\n"
          "  --metrics PORT   Prometheus metrics port (default 8002; -1 turns it off); also --metrics-port\n"
          "  --host ADDR      address to bind (default 127.0.0.1; 0.0.0.0 for every interface);\n"
          "                   also --http-address\n"
          "  --model-control-mode none|explicit|poll\n"
          "                   none (default, as Triton's): every model loaded at start, load/unload requests\n"
          "                   refused; explicit: only --load-model's at start, requests load and unload;\n"
          "                   poll: as none, and the repository is looked at again every\n"
          "                   --repository-poll-secs (default 15): new and changed models (re)loaded\n"
          "  --load-model NAME  explicit mode: load NAME at start (repeatable; '*': every model)\n"
          "Limits on what clients may hold (over them a connection is refused or closed, and counted in\n"
          "/metrics as ringside_refused_connections_total):\n",
          f);
    rs_serve_limits_usage(f);
    fputs("SIGTERM or Ctrl-C drains the requests in flight and exits 0.\n", f);
}

/* "--name VALUE" or "--name=VALUE" for any of the names; advances *i past what it used. */
static const char *opt(int argc, char **argv, int *i, const char *const *names)
{
    for (const char *const *n = names; *n; n++) {
        size_t k = strlen(*n);
        if (!strcmp(argv[*i], *n) && *i + 1 < argc) return argv[++*i];
        if (!strncmp(argv[*i], *n, k) && argv[*i][k] == '=') return argv[*i] + k + 1;
    }
    return NULL;
}

static bool port_of(const char *s, int *out, int lo)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > 65535) return false;
    *out = (int)v;
    return true;
}

/* "--LIMIT N" or "--LIMIT=N" for a limit of serve_limits.h: true when argv[*i] names one (*bad when
 * its value is wrong, said on errf). */
static bool limit_opt(int argc, char **argv, int *i, rs_serve_limits *l, FILE *errf, bool *bad)
{
    char name[64];
    const char *eq = strchr(argv[*i], '='), *v;
    snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - argv[*i] : (long)strlen(argv[*i])), argv[*i]);
    rs_err err = {0};
    rs_serve_limits probe = *l;
    if (rs_serve_limits_set(&probe, name, "1", &err) == RS_ERR_UNSUPPORTED) return false;
    if (eq) v = eq + 1;
    else if (*i + 1 < argc) v = argv[++*i];
    else v = "";
    if (rs_serve_limits_set(l, name, v, &err)) {
        fprintf(errf, "ringside serve: %s\n", err.msg);
        *bad = true;
    }
    return true;
}

/* rs_serve_main with loads, room for every --load-model (argc entries). */
static int run(int argc, char **argv, FILE *out, FILE *errf, const char **loads)
{
    rs_serve_opts o;
    rs_serve_opts_init(&o);
    o.http_port = 8000;
    o.metrics_port = 8002;
    o.grpc_port = 8001;
    static const char *const repo_n[] = {"--repo", "--model-repository", "--model-store", NULL};
    static const char *const http_n[] = {"--http", "--http-port", NULL};
    static const char *const met_n[] = {"--metrics", "--metrics-port", NULL};
    static const char *const host_n[] = {"--host", "--http-address", NULL};
    static const char *const grpc_n[] = {"--grpc", "--grpc-port", NULL};
    static const char *const mode_n[] = {"--model-control-mode", NULL};
    static const char *const loadm_n[] = {"--load-model", NULL};
    static const char *const pollsec_n[] = {"--repository-poll-secs", NULL};
    bool bad = false;
    o.load_models = loads;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(out);
            return 0;
        } else if ((v = opt(argc, argv, &i, repo_n))) o.repo = v;
        else if ((v = opt(argc, argv, &i, host_n))) o.host = v;
        else if ((v = opt(argc, argv, &i, http_n))) {
            if (!port_of(v, &o.http_port, 0)) {
                fprintf(errf, "ringside serve: --http '%s' is not a port (0..65535)\n", v);
                return 2;
            }
        } else if ((v = opt(argc, argv, &i, met_n))) {
            if (!port_of(v, &o.metrics_port, -1)) {
                fprintf(errf, "ringside serve: --metrics '%s' is not a port (0..65535, or -1 for none)\n", v);
                return 2;
            }
        } else if ((v = opt(argc, argv, &i, grpc_n))) {
            if (!port_of(v, &o.grpc_port, -1)) {
                fprintf(errf, "ringside serve: --grpc '%s' is not a port (0..65535, or -1 for none)\n", v);
                return 2;
            }
        } else if ((v = opt(argc, argv, &i, mode_n))) {
            if (!strcasecmp(v, "none")) o.control = RS_SERVE_CONTROL_NONE;
            else if (!strcasecmp(v, "explicit")) o.control = RS_SERVE_CONTROL_EXPLICIT;
            else if (!strcasecmp(v, "poll")) o.control = RS_SERVE_CONTROL_POLL;
            else {
                fprintf(errf, "ringside serve: --model-control-mode '%s' is none, explicit or poll\n", v);
                bad = true;
            }
        } else if ((v = opt(argc, argv, &i, loadm_n))) {
            loads[o.nload_models++] = v;
        } else if ((v = opt(argc, argv, &i, pollsec_n))) {
            char *end;
            long sec = strtol(v, &end, 10);
            if (*end || sec < 1 || sec > 86400) {
                fprintf(errf, "ringside serve: --repository-poll-secs '%s' is not 1..86400 seconds\n", v);
                bad = true;
            }
            o.poll_s = (int)sec;
        } else if (!strncmp(argv[i], "--", 2) && limit_opt(argc, argv, &i, &o.limits, errf, &bad)) {
            if (bad) return 2;
        } else {
            fprintf(errf, "ringside serve: unknown option '%s'\n", argv[i]);
            usage(errf);
            return 2;
        }
    }
    if (bad) return 2;
    if (!o.repo) {
        fprintf(errf, "ringside serve: no model repository (--repo DIR)\n");
        usage(errf);
        return 2;
    }
    /* Every thread the server starts inherits this mask, so the signals reach sigwait below alone. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    rs_serve_server *s;
    rs_err err = {0};
    if (rs_serve_start(&o, &s, &err)) {
        fprintf(errf, "ringside serve: %s\n", err.msg);
        return 1;
    }
    rs_serve_index_entry *e;
    int n;
    if (!rs_serve_index(s, &e, &n, &err)) {
        for (int i = 0; i < n; i++) {
            if (e[i].version)
                fprintf(out, "  %-24s version %lld  %s\n", e[i].name, (long long)e[i].version, e[i].state);
            else fprintf(out, "  %-24s %s: %s\n", e[i].name, e[i].state, e[i].reason);
        }
        free(e);
    }
    fprintf(out, "ringside serve: %s on http://%s:%d (KServe v2)", o.repo, o.host ? o.host : "127.0.0.1",
            rs_serve_http_port(s));
    if (rs_serve_grpc_port(s) >= 0) fprintf(out, ", gRPC on %s:%d", o.host ? o.host : "127.0.0.1", rs_serve_grpc_port(s));
    if (rs_serve_metrics_port(s) >= 0) fprintf(out, ", metrics on http://%s:%d/metrics", o.host ? o.host : "127.0.0.1",
                                                rs_serve_metrics_port(s));
    fprintf(out, "\n");
    fflush(out);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(out, "ringside serve: %s: draining requests in flight\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    fflush(out);
    rs_serve_stop(s);
    fprintf(out, "ringside serve: stopped\n");
    return 0;
}

int rs_serve_main(int argc, char **argv, FILE *out, FILE *errf)
{
    const char **loads = calloc((size_t)argc + 1, sizeof *loads); /* argv's strings, borrowed */
    if (!loads) return 1;
    int rc = run(argc, argv, out, errf, loads);
    free(loads);
    return rc;
}
