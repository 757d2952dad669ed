/* A gRPC call's life (grpc_conn.h): its request messages framed as they arrive, the worker pool that
 * runs calls the connection's reader does not, and the responses handed back to the connection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grpc_conn.h"

void rs_grpc_wake(conn *c)
{
    char b = 1;
    ssize_t r = write(c->wake[1], &b, 1); /* a full pipe already says "look" */
    (void)r;
}

/* Ends call k with status (lock held). */
void rs_grpc_finish_locked(call *k, rs_grpc_code code, const char *errmsg)
{
    if (k->finished) return;
    k->finished = true;
    k->status = code;
    snprintf(k->errmsg, sizeof k->errmsg, "%s", errmsg ? errmsg : "");
    k->dirty = true;
}

static void call_free(call *k)
{
    for (msg *m = k->q_head, *nx; m; m = nx) {
        nx = m->next;
        free(m);
    }
    free(k->in);
    free(k->out);
    free(k);
}

/* Takes k out of its connection's list and frees it (lock held). */
void rs_grpc_call_drop_locked(call *k)
{
    conn *c = k->c;
    if (k->prev) k->prev->next = k->next;
    else c->calls = k->next;
    if (k->next) k->next->prev = k->prev;
    call_free(k);
}

/* Whoever ran a call sends its news itself (waking the reader to send would be one more thread
 * hand-off per call); what the socket does not take now, or a dead socket, is left to the reader.
 * The caller holds a job on the connection (it stays alive) and not c->mu. */
void rs_grpc_send_now(conn *c)
{
    pthread_mutex_lock(&c->h2mu);
    if (c->dead) { /* the connection is ending: its calls may be freed the moment they are closed */
        pthread_mutex_unlock(&c->h2mu);
        return;
    }
    rs_grpc_pump(c);
    bool left = !rs_grpc_flush(c) || c->woff < c->wn;
    pthread_mutex_unlock(&c->h2mu);
    if (left) rs_grpc_wake(c);
}

static void sink_emit(void *ud, const uint8_t *data, size_t n)
{
    call *k = ud;
    conn *c = k->c;
    pthread_mutex_lock(&c->mu);
    if (!k->closed && !k->finished) {
        size_t need = k->out_n + 5 + n;
        if (need > k->out_cap) {
            size_t nc = k->out_cap ? k->out_cap : 1024;
            while (nc < need) nc *= 2;
            uint8_t *nb = realloc(k->out, nc);
            if (!nb) {
                rs_grpc_finish_locked(k, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory for the response");
                pthread_mutex_unlock(&c->mu);
                rs_grpc_send_now(c);
                return;
            }
            k->out = nb;
            k->out_cap = nc;
        }
        rs_grpc_frame_prefix(k->out + k->out_n, n);
        memcpy(k->out + k->out_n + 5, data, n);
        k->out_n += 5 + n;
        /* A unary call's one message is news only with its trailers (finish_locked), so HEADERS,
         * DATA and trailers leave in one send; a stream's messages are sent as they come. */
        if (k->method == RS_GRPC_MODEL_STREAM_INFER) k->dirty = true;
    }
    pthread_mutex_unlock(&c->mu);
    if (k->method == RS_GRPC_MODEL_STREAM_INFER) rs_grpc_send_now(c);
}

static bool sink_cancelled(void *ud)
{
    call *k = ud;
    pthread_mutex_lock(&k->c->mu);
    bool gone = k->closed;
    pthread_mutex_unlock(&k->c->mu);
    return gone;
}

/* A worker runs a call: a unary one's message, or a stream's messages one after another (so a
 * stream's responses come in the order of its requests) until the queue is empty. */
void rs_grpc_run_call(rs_serve_grpc *g, call *k)
{
    conn *c = k->c;
    rs_grpc_sink sink = {sink_emit, sink_cancelled, k};
    char err[1024];
    for (;;) {
        pthread_mutex_lock(&c->mu);
        msg *m = k->q_head;
        if (m) {
            k->q_head = m->next;
            if (!k->q_head) k->q_tail = NULL;
            k->q_bytes -= m->len;
        }
        if (m && k->closed) { /* drain what a closed stream left */
            pthread_mutex_unlock(&c->mu);
            free(m);
            continue;
        }
        if (!m) {
            if (k->method == RS_GRPC_MODEL_STREAM_INFER && k->in_done) rs_grpc_finish_locked(k, RS_GRPC_OK, NULL);
            if (k->dirty && !k->closed) { /* the answer or the trailers, sent while the job keeps c alive */
                pthread_mutex_unlock(&c->mu);
                rs_grpc_send_now(c);
                continue;
            }
            k->job = false;
            c->jobs--;
            if (k->closed) rs_grpc_call_drop_locked(k);
            pthread_cond_broadcast(&c->idle);
            pthread_mutex_unlock(&c->mu);
            return;
        }
        pthread_mutex_unlock(&c->mu);
        rs_grpc_code code = rs_grpc_call(g->s, k->method, m->data, m->len, &sink, err, sizeof err);
        free(m);
        if (k->method != RS_GRPC_MODEL_STREAM_INFER) {
            pthread_mutex_lock(&c->mu);
            rs_grpc_finish_locked(k, code, code == RS_GRPC_OK ? NULL : err);
            pthread_mutex_unlock(&c->mu);
        }
    }
}

static void *worker_main(void *arg)
{
    rs_serve_grpc *g = arg;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        if (!g->jq_head) {
            if (g->stopping) break;
            g->idle++;
            pthread_cond_wait(&g->work, &g->mu);
            g->idle--;
            continue;
        }
        call *k = g->jq_head;
        g->jq_head = k->job_next;
        if (!g->jq_head) g->jq_tail = NULL;
        g->queued--;
        pthread_mutex_unlock(&g->mu);
        rs_grpc_run_call(g, k);
        pthread_mutex_lock(&g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* Hands k to the pool (k->job set by the caller under c->mu, which it has let go: the worker takes
 * c->mu first thing, and one woken into a held lock sleeps again). */
static void schedule(rs_serve_grpc *g, call *k)
{
    pthread_mutex_lock(&g->mu);
    k->job_next = NULL;
    if (g->jq_tail) g->jq_tail->job_next = k;
    else g->jq_head = k;
    g->jq_tail = k;
    g->queued++;
    if (g->queued > g->idle && g->nworkers < MAX_WORKERS &&
        !pthread_create(&g->workers[g->nworkers], NULL, worker_main, g))
        g->nworkers++;
    pthread_mutex_unlock(&g->mu);
    pthread_cond_signal(&g->work); /* after the unlock, for the same reason */
}

/* Queues the whole messages in k->in (the reader). */
void rs_grpc_take_messages(call *k)
{
    conn *c = k->c;
    size_t off = 0;
    for (;;) {
        const uint8_t *p;
        size_t len, used;
        rs_grpc_code code;
        char err[256];
        rs_grpc_next r = rs_grpc_frame_next(k->in + off, k->in_n - off, k->c->g->cap, &p, &len, &used, &code, err,
                                            sizeof err);
        if (r == RS_GRPC_FRAME_MORE) break;
        pthread_mutex_lock(&c->mu);
        if (r == RS_GRPC_FRAME_ERR) {
            k->in_err = true;
            rs_grpc_finish_locked(k, code, err);
            pthread_mutex_unlock(&c->mu);
            off = k->in_n;
            break;
        }
        off += used;
        k->nmsgs++;
        if (k->method != RS_GRPC_MODEL_STREAM_INFER && k->nmsgs > 1) {
            k->in_err = true;
            rs_grpc_finish_locked(k, RS_GRPC_INVALID_ARGUMENT, "a unary method takes one request message; got more");
            pthread_mutex_unlock(&c->mu);
            off = k->in_n;
            break;
        }
        if (k->q_bytes + len > k->c->g->cap) {
            k->in_err = true;
            rs_grpc_finish_locked(k, RS_GRPC_RESOURCE_EXHAUSTED, "requests waiting on this stream exceed the size limit");
            pthread_mutex_unlock(&c->mu);
            off = k->in_n;
            break;
        }
        msg *m = malloc(sizeof *m + len); /* the call's queue owns it */
        if (!m) {
            k->in_err = true;
            rs_grpc_finish_locked(k, RS_GRPC_RESOURCE_EXHAUSTED, "out of memory for a request");
            pthread_mutex_unlock(&c->mu);
            off = k->in_n;
            break;
        }
        m->next = NULL;
        m->len = len;
        memcpy(m->data, p, len);
        if (k->q_tail) k->q_tail->next = m;
        else k->q_head = m;
        k->q_tail = m;
        k->q_bytes += len;
        /* A stream's messages go to the pool as they come; a unary call's when the client is done. */
        bool run = k->method == RS_GRPC_MODEL_STREAM_INFER && !k->job;
        if (run) {
            k->job = true;
            c->jobs++;
        }
        pthread_mutex_unlock(&c->mu);
        if (run) schedule(c->g, k);
    }
    memmove(k->in, k->in + off, k->in_n - off);
    k->in_n -= off;
    if (k->in_n == 0 && k->in_cap > 65536) { /* a large message's room is not kept for the call's life */
        free(k->in);
        k->in = NULL;
        k->in_cap = 0;
    }
}

/* The client ended its side of k (the reader). */
void rs_grpc_end_of_request(call *k)
{
    conn *c = k->c;
    bool run = false;
    pthread_mutex_lock(&c->mu);
    k->in_done = true;
    if (!k->finished && !k->in_err) {
        if (k->in_n) rs_grpc_finish_locked(k, RS_GRPC_INVALID_ARGUMENT, "the request ended inside a message (truncated "
                                   "gRPC frame)");
        else if (k->method == RS_GRPC_MODEL_STREAM_INFER) {
            if (!k->job) rs_grpc_finish_locked(k, RS_GRPC_OK, NULL);
        } else if (k->nmsgs != 1) {
            rs_grpc_finish_locked(k, RS_GRPC_INVALID_ARGUMENT, "a unary method takes one request message; got none");
        } else {
            k->job = true;
            c->jobs++;
            /* The reader runs one unary call itself, after handing the socket to the connection's
             * other thread (one thread hand-off less on the call's path); while that thread is busy
             * with one, or for a second call, the pool runs it. */
            if (!c->runner_busy && !c->inline_k && !c->goaway) c->inline_k = k;
            else run = true;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (run) schedule(c->g, k);
}
