/* The dynamic batcher and the instance threads (see sched.h). One mutex guards the queue and the
 * statistics; instances wait on `work`, callers on `done`. Batches are assembled under the lock and
 * run outside it, so N instances compute at the same time. */
#include "sched.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_QUEUE_LIMIT 4096
#define MAX_SEQUENCES 1024

typedef struct seq_slot {
    char key[RS_SERVE_NAME_MAX + 8];
    uint64_t last_ns;
    int inst;  /* the instance its requests run on */
    bool used;
} seq_slot;

typedef struct req {
    const rs_serve_tensor *x; /* (nin), borrowed */
    rs_serve_tensor *y;       /* (nout), filled with malloc'd data the caller owns */
    int B;
    rs_serve_gen *gen;     /* a generation instead of x -> y */
    const rs_serve_pin *pin; /* borrowed; NULL: any instance */
    uint64_t t_enq;
    bool done;
    rs_status st;
    rs_err err;
    struct req *next;
} req;

typedef struct inst_thread {
    rs_serve_sched *s;
    rs_serve_inst *inst; /* owned */
    pthread_t th;
    bool started;
    /* batch staging per input, kept from batch to batch (owned; cap[i] bytes each) */
    void *stage[RS_SERVE_MAX_IO];
    size_t cap[RS_SERVE_MAX_IO];
} inst_thread;

struct rs_serve_sched {
    rs_serve_backend *b;   /* borrowed */
    rs_serve_ios io;       /* what a run takes and gives */
    size_t out_numel[RS_SERVE_MAX_IO]; /* per sample */
    int max_batch;         /* 0: no batching */
    bool dynamic;
    int target;            /* rows a dynamic batch waits for: the largest preferred size, else max_batch */
    uint64_t delay_ns;
    int64_t queue_limit;   /* requests */
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    req *head, *tail;
    int queued, queued_rows;
    bool stopping;
    int ninst;
    inst_thread *inst;     /* (ninst), owned */
    rs_serve_stats st;     /* arrays owned */
    seq_slot *seqs;        /* (MAX_SEQUENCES) active sequences, owned; NULL until the first */
    uint64_t seq_idle_ns;
    int trace_fd;          /* RINGSIDE_SERVE_TRACE's file (owned), a line per batch run; -1: none */
    char name[RS_SERVE_NAME_MAX];
};

uint64_t rs_serve_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double rs_serve_hist_le_us(int i)
{
    static const double steps[3] = {1.0, 2.5, 5.0};
    if (i >= RS_SERVE_HIST_N - 1) return 1.0 / 0.0;
    /* 50, 100, 250, 500, 1000, ...: i = 0 is 50 us, then 1-2.5-5 per decade from 100 us */
    if (i == 0) return 50.0;
    double d = 100.0;
    for (int k = 0; k < (i - 1) / 3; k++) d *= 10.0;
    return d * steps[(i - 1) % 3];
}

static void hist_add(uint64_t *h, uint64_t ns)
{
    double us = (double)ns / 1e3;
    int i = 0;
    while (i < RS_SERVE_HIST_N - 1 && us > rs_serve_hist_le_us(i)) i++;
    h[i]++;
}

double rs_serve_hist_quantile(const uint64_t *h, double q)
{
    uint64_t total = 0;
    for (int i = 0; i < RS_SERVE_HIST_N; i++) total += h[i];
    if (!total) return 0.0;
    double rank = q * (double)total, seen = 0.0;
    for (int i = 0; i < RS_SERVE_HIST_N; i++) {
        if (h[i] && seen + (double)h[i] >= rank) {
            double lo = i ? rs_serve_hist_le_us(i - 1) : 0.0, hi = rs_serve_hist_le_us(i);
            if (i == RS_SERVE_HIST_N - 1) return lo; /* +Inf: the largest finite bound, as Prometheus */
            return lo + (hi - lo) * (rank - seen) / (double)h[i];
        }
        seen += (double)h[i];
    }
    return rs_serve_hist_le_us(RS_SERVE_HIST_N - 2);
}

/* the current second counts as a whole one: a burst just answered shows at once, a little low */
double rs_serve_stats_rate(const rs_serve_stats *st, uint64_t now_ns, int window)
{
    if (window < 1) window = 1;
    if (window > RS_SERVE_RATE_SLOTS - 1) window = RS_SERVE_RATE_SLOTS - 1;
    int64_t now = (int64_t)(now_ns / 1000000000u);
    uint64_t n = 0;
    for (int k = 0; k < RS_SERVE_RATE_SLOTS; k++)
        if (st->rate_sec[k] > now - window && st->rate_sec[k] <= now && st->rate_count[k]) n += st->rate_count[k];
    return (double)n / window;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void add(rs_serve_stat *s, uint64_t ns)
{
    s->count++;
    s->ns += ns;
}

/* Whether first and r give every input: a request leaving out an optional input runs alone, since
 * what its backend does in its place (a default of one sample) holds for that request, not a batch. */
static bool every_input(const rs_serve_sched *s, const req *first, const req *r)
{
    for (int i = 0; i < s->io.nin; i++)
        if (!first->x[i].data || !r->x[i].data) return false;
    return true;
}

static bool runs_on(const req *r, int k) { return !r->pin || r->pin->inst < 0 || r->pin->inst == k; }

/* The link (s->head or a request's next) to the oldest request instance k may run; NULL: none. */
static req **oldest_for(rs_serve_sched *s, int k)
{
    for (req **at = &s->head; *at; at = &(*at)->next)
        if (runs_on(*at, k)) return at;
    return NULL;
}

/* Takes the requests of the next batch for instance k off the queue at link `at` (lock held): that
 * request, then as many of the following as fit in max_batch rows, when they give every input and may
 * run on k. */
static req *take_batch(rs_serve_sched *s, req **at, int k, int *rows)
{
    req *first = *at, *last = first;
    int n = first->B;
    int cap = s->max_batch > 0 && s->dynamic ? s->max_batch : first->B;
    while (!first->gen && last->next && !last->next->gen && n + last->next->B <= cap &&
           every_input(s, first, last->next) && runs_on(last->next, k)) {
        last = last->next;
        n += last->B;
    }
    *at = last->next;
    /* the request before `at` (none when at is the head) ends the queue when the batch did */
    if (s->tail == last) s->tail = at == &s->head ? NULL : (req *)((char *)at - offsetof(req, next));
    last->next = NULL;
    for (req *r = first; r; r = r->next) s->queued--;
    s->queued_rows -= n;
    *rows = n;
    return first;
}

/* The requests of a batch as one: each input's bytes one request after the other (the wire's layout
 * makes that a concatenation for every type, BYTES too), in the instance's staging buffers, grown as
 * needed and kept (a batch of images would otherwise map and fault fresh pages every time). */
static rs_status stage_inputs(const rs_serve_sched *s, inst_thread *th, const req *batch, rs_serve_tensor *x,
                              rs_err *err)
{
    for (int i = 0; i < s->io.nin; i++) {
        size_t n = 0, off = 0;
        for (const req *r = batch; r; r = r->next) n += r->x[i].bytes;
        if (n + 1 > th->cap[i]) {
            free(th->stage[i]);
            th->cap[i] = (th->stage[i] = malloc(n + 1)) ? n + 1 : 0;
        }
        x[i].data = th->stage[i];
        x[i].bytes = n;
        if (!x[i].data) return rs_err_set(err, RS_ERR_NOMEM, "out of memory for a batch of %zu bytes", n);
        for (const req *r = batch; r; r = r->next) {
            if (r->x[i].bytes) memcpy((char *)x[i].data + off, r->x[i].data, r->x[i].bytes);
            off += r->x[i].bytes;
        }
    }
    return RS_OK;
}

/* Each request's rows of every output of a batch, copied into its y (malloc'd). */
static rs_status split_outputs(const rs_serve_sched *s, req *batch, const rs_serve_tensor *y, rs_err *err)
{
    for (int k = 0; k < s->io.nout; k++) {
        size_t off = 0;
        rs_serve_dtype t = s->io.out[k].dtype;
        for (req *r = batch; r; r = r->next) {
            size_t count = (size_t)r->B * s->out_numel[k];
            size_t n = t == RS_SERVE_STRING ? rs_serve_bytes_span((const char *)y[k].data + off, y[k].bytes - off, count,
                                                                  NULL)
                                            : rs_serve_dtype_bytes(t, count);
            if (n == (size_t)-1 || n > y[k].bytes - off)
                return rs_err_set(err, RS_ERR_INTERNAL, "output '%s' of the batch holds fewer bytes than its shape",
                                  s->io.out[k].name);
            r->y[k].data = malloc(n + 1); /* the request's caller's */
            if (!r->y[k].data) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
            memcpy(r->y[k].data, (const char *)y[k].data + off, n);
            r->y[k].bytes = n;
            off += n;
        }
    }
    return RS_OK;
}

static void free_tensors(rs_serve_tensor *t, int n)
{
    for (int i = 0; i < n; i++) {
        free(t[i].data);
        t[i].data = NULL;
    }
}

/* Runs a batch taken off the queue (lock not held): one request's tensors as they are, several staged
 * as one. t[0..3] get the phase boundaries. */
static rs_status run_batch(rs_serve_sched *s, inst_thread *th, req *batch, int rows, uint64_t *t, rs_err *err)
{
    rs_serve_inst *inst = th->inst;
    rs_serve_tensor x[RS_SERVE_MAX_IO] = {{0}}, y[RS_SERVE_MAX_IO] = {{0}}; /* x: the staging's, y: owned here */
    t[0] = rs_serve_now_ns();
    rs_status st = batch->next ? stage_inputs(s, th, batch, x, err) : RS_OK;
    t[1] = rs_serve_now_ns();
    if (!st && batch->gen) st = rs_serve_inst_generate(inst, batch->gen, err);
    else if (!st) st = rs_serve_inst_run_tensors(inst, batch->next ? x : batch->x, rows, batch->next ? y : batch->y, err);
    t[2] = rs_serve_now_ns();
    if (!st && batch->next) {
        st = split_outputs(s, batch, y, err);
        if (st)
            for (req *r = batch; r; r = r->next) free_tensors(r->y, s->io.nout);
    }
    free_tensors(y, s->io.nout);
    t[3] = rs_serve_now_ns();
    return st;
}

static void *inst_main(void *arg)
{
    inst_thread *t = arg;
    rs_serve_sched *s = t->s;
    int k = (int)(t - s->inst);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        req **at = oldest_for(s, k);
        if (!at) {
            if (s->stopping) break; /* requests pinned to another instance are that one's to run */
            pthread_cond_wait(&s->work, &s->mu);
            continue;
        }
        if (s->dynamic && !s->stopping) {
            /* Wait for a preferred batch until the oldest request has waited max_queue_delay. (A
             * dynamic batcher has no sequences, so every request may run here.) */
            uint64_t deadline = s->head->t_enq + s->delay_ns;
            while (s->head && s->queued_rows < s->target && !s->stopping) {
                uint64_t now = rs_serve_now_ns();
                if (now >= deadline) break;
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                uint64_t ns = (uint64_t)ts.tv_nsec + (deadline - now);
                ts.tv_sec += (time_t)(ns / 1000000000u);
                ts.tv_nsec = (long)(ns % 1000000000u);
                pthread_cond_timedwait(&s->work, &s->mu, &ts);
            }
            if (!(at = oldest_for(s, k))) continue; /* another instance took them */
        }
        int rows;
        req *batch = take_batch(s, at, k, &rows);
        pthread_mutex_unlock(&s->mu);
        if (s->trace_fd >= 0) /* one write(2) per line on an O_APPEND file: lines of instances never mix */
            dprintf(s->trace_fd, "model %s instance %d rows %d sequence %s\n", s->name, k, rows,
                    batch->pin && batch->pin->key[0] ? batch->pin->key : "-");

        rs_err err = {0};
        uint64_t tt[4];
        rs_status st = run_batch(s, t, batch, rows, tt, &err);
        uint64_t t0 = tt[0], t1 = tt[1], t2 = tt[2], t3 = tt[3];

        pthread_mutex_lock(&s->mu);
        if (!st) {
            s->st.execution_count++;
            s->st.inference_count += (uint64_t)rows;
            s->st.last_inference_ms = wall_ms();
            if (rows <= s->st.max_batch) {
                add(&s->st.batch_input[rows], t1 - t0);
                add(&s->st.batch_infer[rows], t2 - t1);
                add(&s->st.batch_output[rows], t3 - t2);
            }
        }
        for (req *r = batch, *nx; r; r = nx) {
            nx = r->next;
            r->st = st;
            if (st) r->err = err;
            if (!st) {
                add(&s->st.queue, t0 - r->t_enq);
                add(&s->st.compute_input, t1 - t0);
                add(&s->st.compute_infer, t2 - t1);
                add(&s->st.compute_output, t3 - t2);
                add(&s->st.success, t3 - r->t_enq);
                hist_add(s->st.request_hist, t3 - r->t_enq);
                hist_add(s->st.queue_hist, t0 - r->t_enq);
                int64_t sec = (int64_t)(t3 / 1000000000u);
                int slot = (int)(sec % RS_SERVE_RATE_SLOTS);
                if (s->st.rate_sec[slot] != sec) s->st.rate_sec[slot] = sec, s->st.rate_count[slot] = 0;
                s->st.rate_count[slot]++;
            } else {
                add(&s->st.fail, t3 - r->t_enq);
            }
            r->done = true;
        }
        pthread_cond_broadcast(&s->done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

rs_status rs_serve_sched_new(rs_serve_backend *b, const rs_serve_config *c, rs_serve_sched **out, rs_err *err)
{
    *out = NULL;
    rs_serve_sched *s = calloc(1, sizeof *s); /* the caller's */
    if (!s) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    s->b = b;
    s->trace_fd = -1;
    rs_serve_backend_ios(b, &s->io);
    for (int k = 0; k < s->io.nout; k++) {
        s->out_numel[k] = 1;
        for (int d = 0; d < s->io.out[k].rank; d++) s->out_numel[k] *= (size_t)s->io.out[k].dims[d];
    }
    s->max_batch = c->max_batch_size;
    s->dynamic = c->dynamic_batching && c->max_batch_size > 0;
    s->target = s->max_batch;
    if (c->npreferred) {
        int best = 0;
        for (int i = 0; i < c->npreferred; i++)
            if (c->preferred[i] <= s->max_batch && c->preferred[i] > best) best = c->preferred[i];
        if (best) s->target = best;
    }
    s->delay_ns = (uint64_t)c->max_queue_delay_us * 1000u;
    s->seq_idle_ns = (uint64_t)(c->max_sequence_idle_us > 0 ? c->max_sequence_idle_us : 1000000) * 1000u;
    s->queue_limit = c->max_queue_size > 0 ? c->max_queue_size : DEFAULT_QUEUE_LIMIT;
    snprintf(s->name, sizeof s->name, "%s", c->name);
    const char *trace = getenv("RINGSIDE_SERVE_TRACE");
    s->trace_fd = trace && trace[0] ? open(trace, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    s->st.max_batch = s->max_batch > 0 ? s->max_batch : 1;
    s->st.batch_input = calloc((size_t)s->st.max_batch + 1, sizeof(rs_serve_stat));
    s->st.batch_infer = calloc((size_t)s->st.max_batch + 1, sizeof(rs_serve_stat));
    s->st.batch_output = calloc((size_t)s->st.max_batch + 1, sizeof(rs_serve_stat));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done, NULL);
    s->ninst = c->instance_count > 0 ? c->instance_count : 1;
    s->inst = calloc((size_t)s->ninst, sizeof *s->inst);
    if (!s->inst || !s->st.batch_input || !s->st.batch_infer || !s->st.batch_output) {
        rs_serve_sched_free(s);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < s->ninst; i++) {
        inst_thread *t = &s->inst[i];
        t->s = s;
        rs_status st = rs_serve_inst_new(b, s->max_batch > 0 ? s->max_batch : 1, &t->inst, err);
        if (!st && pthread_create(&t->th, NULL, inst_main, t)) st = rs_err_set(err, RS_ERR_INTERNAL, "cannot start a thread");
        if (st) {
            rs_serve_sched_free(s);
            return st;
        }
        t->started = true;
    }
    *out = s;
    return RS_OK;
}

static rs_status enqueue_wait(rs_serve_sched *s, req *rq, rs_err *err);

rs_status rs_serve_sched_infer_tensors(rs_serve_sched *s, const rs_serve_tensor *x, int B, rs_serve_tensor *y,
                                       rs_err *err)
{
    return rs_serve_sched_infer_pinned(s, x, B, y, NULL, err);
}

rs_status rs_serve_sched_infer_pinned(rs_serve_sched *s, const rs_serve_tensor *x, int B, rs_serve_tensor *y,
                                      const rs_serve_pin *pin, rs_err *err)
{
    for (int k = 0; k < s->io.nout; k++) y[k] = (rs_serve_tensor){0};
    if (B < 1) return rs_err_set(err, RS_ERR_ARG, "a batch of %d samples", B);
    if (s->max_batch > 0 && B > s->max_batch)
        return rs_err_set(err, RS_ERR_ARG, "batch size %d is larger than the model's max_batch_size %d", B, s->max_batch);
    if (rs_serve_backend_generates(s->b))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "the model generates text: it is decoupled (ModelStreamInfer, "
                          "or HTTP generate / generate_stream)");
    req r = {.x = x, .y = y, .B = B, .pin = pin && pin->inst >= 0 && pin->inst < s->ninst ? pin : NULL,
             .t_enq = rs_serve_now_ns()};
    return enqueue_wait(s, &r, err);
}

rs_status rs_serve_sched_infer(rs_serve_sched *s, const float *x, int B, float *y, rs_err *err)
{
    const rs_serve_ios *io = &s->io;
    if (io->nin != 1 || io->nout != 1 || io->in[0].dtype != RS_SERVE_FP32 || io->out[0].dtype != RS_SERVE_FP32)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "the model takes %d inputs and gives %d outputs, not one FP32 tensor "
                          "each", io->nin, io->nout);
    size_t ni = (size_t)(B > 0 ? B : 0);
    for (int d = 0; d < io->in[0].rank; d++) ni *= (size_t)io->in[0].dims[d];
    rs_serve_tensor tx = {(void *)x, ni * sizeof *x}, ty = {0};
    rs_status st = rs_serve_sched_infer_tensors(s, &tx, B, &ty, err);
    if (!st) memcpy(y, ty.data, (size_t)B * s->out_numel[0] * sizeof *y);
    free(ty.data);
    return st;
}

rs_status rs_serve_sched_generate(rs_serve_sched *s, rs_serve_gen *g, rs_err *err)
{
    if (!rs_serve_backend_generates(s->b))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "the model does not generate text (send it tensors to infer)");
    req r = {.B = 1, .gen = g, .t_enq = rs_serve_now_ns()};
    return enqueue_wait(s, &r, err);
}

/* Queues r (the caller's stack) and waits until an instance ran it. */
static rs_status enqueue_wait(rs_serve_sched *s, req *rq, rs_err *err)
{
    req r = *rq;
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return rs_err_set(err, RS_ERR_CANCELLED, "the model is being unloaded");
    }
    if (s->queued >= s->queue_limit) {
        add(&s->st.fail, 0);
        pthread_mutex_unlock(&s->mu);
        return rs_err_set(err, RS_ERR_UNSUPPORTED,
                          "Exceeds maximum queue size: %lld requests wait already (dynamic_batching "
                          "default_queue_policy max_queue_size raises the limit)",
                          (long long)s->queue_limit);
    }
    if (s->tail) s->tail->next = &r;
    else s->head = &r;
    s->tail = &r;
    s->queued++;
    s->queued_rows += r.B;
    pthread_cond_broadcast(&s->work);
    while (!r.done) pthread_cond_wait(&s->done, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (r.st && err) *err = r.err;
    return r.st;
}

/* The instance with the fewest live sequences (lock held): where a new sequence goes. */
static int least_busy(const rs_serve_sched *s)
{
    int best = 0, most = MAX_SEQUENCES + 1;
    for (int k = 0; k < s->ninst; k++) {
        int n = 0;
        for (int i = 0; i < MAX_SEQUENCES; i++) n += s->seqs[i].used && s->seqs[i].inst == k;
        if (n < most) best = k, most = n;
    }
    return best;
}

rs_status rs_serve_sched_sequence(rs_serve_sched *s, const char *key, bool start, bool end, const char *model,
                                  rs_serve_pin *pin, rs_err *err)
{
    rs_status st = RS_OK;
    pthread_mutex_lock(&s->mu);
    /* read under the lock: a time read before it could be older than a last_ns another request wrote
     * meanwhile, and now - last_ns would wrap and forget a live sequence */
    uint64_t now = rs_serve_now_ns();
    if (!s->seqs) s->seqs = calloc(MAX_SEQUENCES, sizeof *s->seqs);
    int at = -1, free_at = -1;
    for (int i = 0; s->seqs && i < MAX_SEQUENCES; i++) {
        seq_slot *q = &s->seqs[i];
        if (q->used && now - q->last_ns > s->seq_idle_ns) q->used = false; /* idle too long: forgotten */
        if (q->used && !strcmp(q->key, key)) at = i;
        if (!q->used && free_at < 0) free_at = i;
    }
    if (!s->seqs) st = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    else if (at < 0 && !start)
        st = rs_err_set(err, RS_ERR_ARG, "inference request for sequence %s to model '%s' must specify the START flag "
                        "on the first request of the sequence", key + 2, model);
    else if (at < 0 && free_at < 0)
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "model '%s' has %d sequences active (its most); end one or wait %llu "
                        "ms for an idle one to be forgotten", model, MAX_SEQUENCES,
                        (unsigned long long)(s->seq_idle_ns / 1000000u));
    if (!st) {
        seq_slot *q = &s->seqs[at >= 0 ? at : free_at];
        if (at < 0 || start) q->inst = least_busy(s); /* a START on a live sequence begins it again */
        snprintf(q->key, sizeof q->key, "%s", key);
        q->last_ns = now;
        q->used = !end;
        pin->inst = q->inst;
        snprintf(pin->key, sizeof pin->key, "%s", key);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

void rs_serve_sched_count_fail(rs_serve_sched *s, uint64_t ns)
{
    pthread_mutex_lock(&s->mu);
    add(&s->st.fail, ns);
    pthread_mutex_unlock(&s->mu);
}

void rs_serve_sched_stats(rs_serve_sched *s, rs_serve_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    out->queued = s->queued;
    size_t n = ((size_t)s->st.max_batch + 1) * sizeof(rs_serve_stat);
    out->batch_input = malloc(n); /* owned by *out */
    out->batch_infer = malloc(n);
    out->batch_output = malloc(n);
    if (out->batch_input) memcpy(out->batch_input, s->st.batch_input, n);
    if (out->batch_infer) memcpy(out->batch_infer, s->st.batch_infer, n);
    if (out->batch_output) memcpy(out->batch_output, s->st.batch_output, n);
    if (!out->batch_input || !out->batch_infer || !out->batch_output) {
        rs_serve_stats_clear(out);
        out->max_batch = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

void rs_serve_stats_clear(rs_serve_stats *st)
{
    free(st->batch_input);
    free(st->batch_infer);
    free(st->batch_output);
    st->batch_input = st->batch_infer = st->batch_output = NULL;
}

void rs_serve_sched_free(rs_serve_sched *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; s->inst && i < s->ninst; i++) {
        if (s->inst[i].started) pthread_join(s->inst[i].th, NULL);
        rs_serve_inst_free(s->inst[i].inst);
        for (int k = 0; k < RS_SERVE_MAX_IO; k++) free(s->inst[i].stage[k]);
    }
    free(s->inst);
    free(s->seqs);
    if (s->trace_fd >= 0) close(s->trace_fd);
    rs_serve_stats_clear(&s->st);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->done);
    free(s);
}
