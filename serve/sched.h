/* Scheduling one model version: a queue, a dynamic batcher and N instances, each a thread with its
 * own rs_serve_inst. A request waits in the queue; an idle instance takes the oldest one it may run (a
 * sequence's requests are pinned to one instance) and, with
 * dynamic batching on, waits up to max_queue_delay for more until a preferred batch size (or
 * max_batch_size) is reached, then runs them as one batch and hands each caller its rows. The
 * statistics are Triton's: counts and cumulative nanoseconds per phase, and per batch size. */
#ifndef RS_SERVE_SCHED_H
#define RS_SERVE_SCHED_H

#include <stdint.h>

#include "backend.h"

typedef struct rs_serve_stat {
    uint64_t count, ns;
} rs_serve_stat;

/* Latency histograms: per request, how many fell in each bucket (not cumulative), bucket i holding
 * durations <= rs_serve_hist_le_us(i) microseconds and above the previous bound; the last is +Inf. */
#define RS_SERVE_HIST_N 18
/* The upper bound of bucket i in microseconds (50 us .. 10 s, 1-2.5-5 steps); +Inf for the last. */
double rs_serve_hist_le_us(int i);
/* The q-quantile (0..1) of a histogram, in microseconds, by linear interpolation inside the bucket
 * (what Prometheus' histogram_quantile does); 0 when it is empty. */
double rs_serve_hist_quantile(const uint64_t *h, double q);
#define RS_SERVE_RATE_SLOTS 16

typedef struct rs_serve_stats {
    rs_serve_stat success, fail, queue, compute_input, compute_infer, compute_output;
    uint64_t inference_count;  /* samples answered */
    uint64_t execution_count;  /* batches run */
    uint64_t last_inference_ms;/* wall clock, ms since the epoch; 0: none yet */
    int queued;                /* requests waiting now */
    int max_batch;             /* size of the arrays below minus 1 */
    uint64_t request_hist[RS_SERVE_HIST_N]; /* successes' durations, queue to answer */
    uint64_t queue_hist[RS_SERVE_HIST_N];   /* their time in the queue */
    /* successes per monotonic second, slot sec % RS_SERVE_RATE_SLOTS holding second rate_sec[slot] */
    uint64_t rate_count[RS_SERVE_RATE_SLOTS];
    int64_t rate_sec[RS_SERVE_RATE_SLOTS];
    /* per batch size b (1..max_batch): how many batches of that size ran, and their phase times */
    rs_serve_stat *batch_input, *batch_infer, *batch_output; /* owned by the stats (rs_serve_stats_clear) */
} rs_serve_stats;

typedef struct rs_serve_sched rs_serve_sched;

/* Starts c's instance_count instances of b (borrowed: it must outlive the scheduler). Caller owns
 * *out. max_batch_size 0 (no batching) runs each request alone. */
rs_status rs_serve_sched_new(rs_serve_backend *b, const rs_serve_config *c, rs_serve_sched **out, rs_err *err);
/* Runs B samples of every input (x, in the backend's order: rs_serve_backend_ios; the wire's layout,
 * sizes already checked against the config) and fills y (one per output) with malloc'd data the
 * caller frees (all NULL on failure); blocks until they ran. A full queue is RS_ERR_UNSUPPORTED at once
 * ("queue is full"); after rs_serve_sched_free began, RS_ERR_CANCELLED. */
rs_status rs_serve_sched_infer_tensors(rs_serve_sched *s, const rs_serve_tensor *x, int B, rs_serve_tensor *y,
                                       rs_err *err);
/* Where a request runs: the instance a sequence is pinned to (-1: any), and the sequence's key ("" none),
 * what rs_serve_sched_sequence gives a sequence's request. */
typedef struct rs_serve_pin {
    int inst;
    char key[RS_SERVE_NAME_MAX + 8];
} rs_serve_pin;
/* rs_serve_sched_infer_tensors on the instance pin says (NULL: any). */
rs_status rs_serve_sched_infer_pinned(rs_serve_sched *s, const rs_serve_tensor *x, int B, rs_serve_tensor *y,
                                      const rs_serve_pin *pin, rs_err *err);
/* The same for a model of one FP32 input and one FP32 output: x (B, input numel) into y (B, output numel). */
rs_status rs_serve_sched_infer(rs_serve_sched *s, const float *x, int B, float *y, rs_err *err);
/* Runs one generation (a "gpt" backend) on the next free instance; blocks until it finished, g->on_text
 * called from the instance's thread meanwhile. Counted as one inference and one execution. */
rs_status rs_serve_sched_generate(rs_serve_sched *s, rs_serve_gen *g, rs_err *err);
/* A request of a sequence (the sequence batcher, direct): key names it ("u:5", "s:abc"). A sequence starts
 * with start, is pinned to one instance (the one with the fewest live sequences) and is forgotten, its
 * instance freed, at end or after the config's max_sequence_idle_microseconds without a request; a
 * request that does not start one must continue one that is active (Triton's rule). pin gets the key and
 * the instance every request of the sequence runs on. */
rs_status rs_serve_sched_sequence(rs_serve_sched *s, const char *key, bool start, bool end, const char *model,
                                  rs_serve_pin *pin, rs_err *err);
/* A request that failed before it reached the queue (bad shape, bad JSON): counted as a failure. */
void rs_serve_sched_count_fail(rs_serve_sched *s, uint64_t ns);
/* A snapshot of the statistics; free its arrays with rs_serve_stats_clear. */
void rs_serve_sched_stats(rs_serve_sched *s, rs_serve_stats *out);
void rs_serve_stats_clear(rs_serve_stats *st);
/* Successes per second over the last `window` seconds to now_ns (rs_serve_now_ns, its second included), 1..15. */
double rs_serve_stats_rate(const rs_serve_stats *st, uint64_t now_ns, int window);
/* Runs every queued request, then stops the instances and frees. NULL is a no-op. */
void rs_serve_sched_free(rs_serve_sched *s);

uint64_t rs_serve_now_ns(void); /* CLOCK_MONOTONIC */

#endif
