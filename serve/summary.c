/* The server's figures for people (summary.h): one moment's copy of every version's statistics, and
 * the text `serve` prints and the dashboard's serve pane shows. */
#include "summary.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct taking {
    rs_serve_summary *sum;
    uint64_t now_ns;
    rs_status st;
} taking;

/* Called by rs_serve_each with the version's statistics snapshot (taken under the scheduler's lock). */
static void take_one(void *ud, const rs_serve_model *m, const rs_serve_version *v, const rs_serve_stats *st)
{
    taking *t = ud;
    if (t->st) return;
    rs_serve_summary *sum = t->sum;
    rs_serve_summary_row *rows = realloc(sum->rows, sizeof *rows * (size_t)(sum->n + 1));
    if (!rows) {
        t->st = RS_ERR_NOMEM;
        return;
    }
    sum->rows = rows;
    rs_serve_summary_row *r = &rows[sum->n];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", m->cfg.name);
    r->version = v->version;
    r->ok = st->success.count;
    r->failed = st->fail.count;
    r->samples = st->inference_count;
    r->batches = st->execution_count;
    r->mean_us = st->success.count ? (double)st->success.ns / (double)st->success.count / 1e3 : 0.0;
    r->queued = st->queued;
    r->rate = rs_serve_stats_rate(st, t->now_ns, RS_SERVE_SUMMARY_WINDOW);
    r->p50_us = rs_serve_hist_quantile(st->request_hist, 0.5);
    r->p99_us = rs_serve_hist_quantile(st->request_hist, 0.99);
    r->queue_p50_us = rs_serve_hist_quantile(st->queue_hist, 0.5);
    /* a snapshot whose arrays could not be copied says max_batch 0: no sizes then */
    r->max_batch = st->batch_infer ? st->max_batch : 0;
    r->batch_count = calloc((size_t)r->max_batch + 1, sizeof *r->batch_count); /* owned by the row */
    r->ranks = malloc(2048);                                                    /* owned by the row */
    sum->n++;
    if (!r->batch_count || !r->ranks) {
        t->st = RS_ERR_NOMEM;
        return;
    }
    for (int b = 1; b <= r->max_batch; b++) r->batch_count[b] = st->batch_infer[b].count;
    rs_serve_backend_ranks_text(v->backend, r->ranks, 2048);
}

rs_status rs_serve_summary_take(rs_serve_server *srv, uint64_t now_ns, rs_serve_summary *out, rs_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->repo, sizeof out->repo, "%s", rs_serve_repo(srv));
    out->http_port = rs_serve_http_port(srv);
    out->grpc_port = rs_serve_grpc_port(srv);
    out->metrics_port = rs_serve_metrics_port(srv);
    snprintf(out->host, sizeof out->host, "%s", rs_serve_host(srv));
    taking t = {out, now_ns, RS_OK};
    rs_serve_each(srv, take_one, &t);
    if (t.st) return rs_err_set(err, t.st, "serve: out of memory taking the statistics");
    return RS_OK;
}

void rs_serve_summary_clear(rs_serve_summary *sum)
{
    for (int i = 0; i < sum->n; i++) free(sum->rows[i].batch_count), free(sum->rows[i].ranks);
    free(sum->rows);
    sum->rows = NULL;
    sum->n = 0;
}

/* snprintf at buf + *at, keeping snprintf's contract for the whole text: *at counts what would have
 * been written. */
__attribute__((format(printf, 4, 5))) static void put(char *buf, size_t cap, size_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(*at < cap ? buf + *at : NULL, *at < cap ? cap - *at : 0, fmt, ap);
    va_end(ap);
    if (k > 0) *at += (size_t)k;
}

int rs_serve_summary_head(const rs_serve_summary *sum, char *buf, size_t cap)
{
    size_t at = 0;
    if (cap) buf[0] = '\0';
    put(buf, cap, &at, "serving %s on http://%s:%d", sum->repo, sum->host, sum->http_port);
    if (sum->grpc_port >= 0) put(buf, cap, &at, ", gRPC on :%d", sum->grpc_port);
    if (sum->metrics_port >= 0) put(buf, cap, &at, ", metrics on :%d", sum->metrics_port);
    return (int)at;
}

int rs_serve_summary_text(const rs_serve_summary_row *r, bool batch_line, char *buf, size_t cap)
{
    size_t at = 0;
    if (cap) buf[0] = '\0';
    put(buf, cap, &at, "  %-16s v%-3lld requests %llu ok / %llu failed, %llu samples in %llu batches, mean %.0f us, "
        "queued %d\n", r->name, (long long)r->version, (unsigned long long)r->ok, (unsigned long long)r->failed,
        (unsigned long long)r->samples, (unsigned long long)r->batches, r->mean_us, r->queued);
    /* over HTTP and gRPC alike, since both go through the scheduler these come from */
    if (r->ok) {
        put(buf, cap, &at, "      %.1f requests/s (last %d s), latency p50 %.0f us p99 %.0f us, queue p50 %.0f us\n",
            r->rate, RS_SERVE_SUMMARY_WINDOW, r->p50_us, r->p99_us, r->queue_p50_us);
        if (batch_line) {
            put(buf, cap, &at, "      batches:");
            bool first = true;
            for (int b = 1; b <= r->max_batch && r->batch_count; b++)
                if (r->batch_count[b])
                    put(buf, cap, &at, "%s %llu of %d", first ? "" : ",", (unsigned long long)r->batch_count[b], b),
                        first = false;
            put(buf, cap, &at, "\n");
        }
    }
    /* across ranks: what each rank holds, one line each */
    for (const char *l = r->ranks ? r->ranks : "", *nl; *l; l = nl + 1) {
        if (!(nl = strchr(l, '\n'))) break;
        put(buf, cap, &at, "      %.*s\n", (int)(nl - l), l);
    }
    return (int)at;
}

void rs_serve_summary_print(const rs_serve_summary *sum, FILE *out)
{
    char head[1200];
    rs_serve_summary_head(sum, head, sizeof head);
    fprintf(out, "%s\n", head);
    for (int i = 0; i < sum->n; i++) {
        int n = rs_serve_summary_text(&sum->rows[i], true, NULL, 0);
        char *t = malloc((size_t)n + 1); /* freed below */
        if (!t) continue;
        rs_serve_summary_text(&sum->rows[i], true, t, (size_t)n + 1);
        fputs(t, out);
        free(t);
    }
}
