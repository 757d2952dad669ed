/* What the server's figures look like to a person: `serve` at the prompt prints them and the
 * dashboard's serve pane (`view serve`) draws them. A summary is one moment's copy of every loaded
 * model version's statistics (each taken by rs_serve_sched_stats under its scheduler's lock, through
 * rs_serve_each) with the derived figures computed once; the text of a version is written by one
 * function, rs_serve_summary_text, that both callers use. */
#ifndef RS_SERVE_SUMMARY_H
#define RS_SERVE_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "server.h"

/* requests/s is counted over this many seconds up to the moment taken (the current second included) */
#define RS_SERVE_SUMMARY_WINDOW 10

typedef struct rs_serve_summary_row {
    char name[RS_SERVE_NAME_MAX];
    int64_t version;
    uint64_t ok, failed;        /* requests answered / refused or failed */
    uint64_t samples, batches;  /* Triton's inference_count and execution_count */
    double mean_us;             /* successes' mean time, queue to answer */
    int queued;                 /* requests waiting in the queue at that moment */
    double rate;                /* successes per second over the last RS_SERVE_SUMMARY_WINDOW seconds */
    double p50_us, p99_us;      /* successes' latency, from the request histogram (as the metrics port's) */
    double queue_p50_us;        /* their time in the queue, from the queue histogram */
    int max_batch;              /* batch_count has max_batch + 1 entries */
    uint64_t *batch_count;      /* batch_count[b]: batches of b rows that ran (owned; NULL when none) */
    char *ranks;                /* a model across ranks: one line per rank, each ending in '\n'; "" else (owned) */
} rs_serve_summary_row;

typedef struct rs_serve_summary {
    char repo[1024];
    char host[64];                          /* the address the front ends listen on */
    int http_port, grpc_port, metrics_port; /* -1: that front end is off */
    int n;
    rs_serve_summary_row *rows;             /* (n) owned, in the server's model order */
} rs_serve_summary;

/* Every loaded version of srv as of now_ns (rs_serve_now_ns: the clock the request counts use). The
 * caller frees *out with rs_serve_summary_clear (also after an error). */
rs_status rs_serve_summary_take(rs_serve_server *srv, uint64_t now_ns, rs_serve_summary *out, rs_err *err);
void rs_serve_summary_clear(rs_serve_summary *sum);

/* "serving REPO on http://HOST:P, gRPC on :G, metrics on :M" (no newline), snprintf's contract. */
int rs_serve_summary_head(const rs_serve_summary *sum, char *buf, size_t cap);
/* One version as `serve` prints it, snprintf's contract, every line ending in '\n' (batch_line false
 * leaves out the "batches:" line: the dashboard draws those counts as a histogram):
 *   "  NAME v1 requests 64 ok / 0 failed, 64 samples in 9 batches, mean 812 us, queued 0"
 *   "      21.3 requests/s (last 10 s), latency p50 700 us p99 2100 us, queue p50 400 us"  (once any ran)
 *   "      batches: 2 of 1, 7 of 9"                                                           (once any ran)
 *   "      rank 0: ..."                                                                        (across ranks) */
int rs_serve_summary_text(const rs_serve_summary_row *r, bool batch_line, char *buf, size_t cap);
/* The head and every version's text into out: what `serve` alone prints. */
void rs_serve_summary_print(const rs_serve_summary *sum, FILE *out);

#endif
