/* Prometheus text exposition of the statistics, under Triton's metric names and labels, so the
 * dashboards and alerts written for Triton read ringside unchanged. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

typedef struct buf {
    char *s;
    size_t n, cap;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    if (!b->s) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        char *ns = realloc(b->s, b->cap * 2 + (size_t)k);
        if (!ns) {
            free(b->s);
            b->s = NULL;
            return;
        }
        b->s = ns;
        b->cap = b->cap * 2 + (size_t)k;
    }
}

typedef struct row {
    char model[RS_SERVE_NAME_MAX];
    long long version;
    rs_serve_stats st;
} row;

typedef struct rows {
    row *r;
    int n, cap;
} rows;

static void collect(void *ud, const rs_serve_model *m, const rs_serve_version *v, const rs_serve_stats *st)
{
    rows *x = ud;
    if (x->n == x->cap) {
        int cap = x->cap ? 2 * x->cap : 8; /* x->cap grows only with the array */
        row *nr = realloc(x->r, (size_t)cap * sizeof *nr);
        if (!nr) return;
        x->r = nr;
        x->cap = cap;
    }
    row *r = &x->r[x->n++];
    snprintf(r->model, sizeof r->model, "%s", m->cfg.name);
    r->version = (long long)v->version;
    r->st = *st;
    r->st.batch_input = r->st.batch_infer = r->st.batch_output = NULL; /* not needed here */
}

/* ringside's own: what the front ends refused (serve_limits.h), and the connections they hold */
static void refusals(buf *b, rs_serve_server *s)
{
    rs_serve_refused *r = rs_serve_refused_of(s);
    put(b, "# HELP ringside_refused_connections_total Connections and requests refused or closed by the server's "
        "limits, by front end and reason\n# TYPE ringside_refused_connections_total counter\n");
    for (int fe = 0; fe < RS_SERVE_FE_N; fe++)
        for (int k = 0; k < RS_SERVE_REFUSED_N; k++)
            put(b, "ringside_refused_connections_total{protocol=\"%s\",reason=\"%s\"} %llu\n",
                rs_serve_frontend_names[fe], rs_serve_refusal_names[k],
                (unsigned long long)__atomic_load_n(&r->n[fe][k], __ATOMIC_RELAXED));
    put(b, "# HELP ringside_open_connections Connections the front end holds now\n"
        "# TYPE ringside_open_connections gauge\n");
    for (int fe = 0; fe < RS_SERVE_FE_N; fe++)
        put(b, "ringside_open_connections{protocol=\"%s\"} %lld\n", rs_serve_frontend_names[fe],
            (long long)__atomic_load_n(&r->open[fe], __ATOMIC_RELAXED));
    rs_serve_index_entry *e;
    int n;
    rs_err err = {0};
    if (rs_serve_index(s, &e, &n, &err)) return;
    put(b, "# HELP ringside_rank_restarts_total Times a model's ranks were started again after one died\n"
        "# TYPE ringside_rank_restarts_total counter\n");
    for (int i = 0; i < n; i++)
        if (i == 0 || strcmp(e[i].name, e[i - 1].name)) /* the index has a row per version */
            put(b, "ringside_rank_restarts_total{model=\"%s\"} %d\n", e[i].name, e[i].restarts);
    free(e);
}

char *rs_serve_metrics_text(rs_serve_server *s)
{
    rows x = {0};
    rs_serve_each(s, collect, &x);
    buf b = {malloc(4096), 0, 4096}; /* the caller's */
    if (b.s) b.s[0] = '\0';
    static const struct {
        const char *name, *help;
        int field;
    } m[] = {
        {"nv_inference_request_success", "Number of successful inference requests, all batch sizes", 0},
        {"nv_inference_request_failure", "Number of failed inference requests, all batch sizes", 1},
        {"nv_inference_count", "Number of inferences performed (does not include cached requests)", 2},
        {"nv_inference_exec_count", "Number of model executions performed (does not include cached requests)", 3},
        {"nv_inference_request_duration_us", "Cumulative inference request duration in microseconds", 4},
        {"nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds", 5},
        {"nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds", 6},
        {"nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds", 7},
        {"nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in microseconds", 8},
        {"nv_inference_pending_request_count", "Instantaneous number of pending requests awaiting execution", 9},
    };
    for (size_t k = 0; k < sizeof m / sizeof *m; k++) {
        put(&b, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name, m[k].field == 9 ? "gauge" : "counter");
        for (int i = 0; i < x.n; i++) {
            const rs_serve_stats *st = &x.r[i].st;
            unsigned long long v = 0;
            switch (m[k].field) {
            case 0: v = st->success.count; break;
            case 1: v = st->fail.count; break;
            case 2: v = st->inference_count; break;
            case 3: v = st->execution_count; break;
            case 4: v = (st->success.ns + st->fail.ns) / 1000u; break;
            case 5: v = st->queue.ns / 1000u; break;
            case 6: v = st->compute_input.ns / 1000u; break;
            case 7: v = st->compute_infer.ns / 1000u; break;
            case 8: v = st->compute_output.ns / 1000u; break;
            default: v = (unsigned long long)st->queued; break;
            }
            put(&b, "%s{model=\"%s\",version=\"%lld\"} %llu\n", m[k].name, x.r[i].model, x.r[i].version, v);
        }
    }
    /* ringside's own: latency histograms (Triton's counters above have only sums) */
    static const struct {
        const char *name, *help;
        bool queue;
    } h[] = {
        {"ringside_inference_request_duration_us", "Inference request duration in microseconds, queue to answer", false},
        {"ringside_inference_queue_duration_us", "Time requests waited in the queue in microseconds", true},
    };
    for (size_t k = 0; k < sizeof h / sizeof *h; k++) {
        put(&b, "# HELP %s %s\n# TYPE %s histogram\n", h[k].name, h[k].help, h[k].name);
        for (int i = 0; i < x.n; i++) {
            const rs_serve_stats *st = &x.r[i].st;
            const uint64_t *v = h[k].queue ? st->queue_hist : st->request_hist;
            unsigned long long cum = 0;
            for (int j = 0; j < RS_SERVE_HIST_N; j++) {
                cum += v[j];
                double le = rs_serve_hist_le_us(j);
                if (j == RS_SERVE_HIST_N - 1)
                    put(&b, "%s_bucket{model=\"%s\",version=\"%lld\",le=\"+Inf\"} %llu\n", h[k].name, x.r[i].model,
                        x.r[i].version, cum);
                else
                    put(&b, "%s_bucket{model=\"%s\",version=\"%lld\",le=\"%g\"} %llu\n", h[k].name, x.r[i].model,
                        x.r[i].version, le, cum);
            }
            put(&b, "%s_sum{model=\"%s\",version=\"%lld\"} %.3f\n", h[k].name, x.r[i].model, x.r[i].version,
                (double)(h[k].queue ? st->queue.ns : st->success.ns) / 1e3);
            put(&b, "%s_count{model=\"%s\",version=\"%lld\"} %llu\n", h[k].name, x.r[i].model, x.r[i].version, cum);
        }
    }
    free(x.r);
    refusals(&b, s);
    return b.s;
}
