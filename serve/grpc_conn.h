/* Inside serve/'s gRPC transport: a connection, its calls and the server's worker pool, shared by
 * grpc.c (the sockets, nghttp2's callbacks, the connection's threads) and grpc_call.c (a call's
 * life: its messages, the workers that run it, its responses). The threads and locks are described
 * at the top of grpc.c. */
#ifndef RS_SERVE_GRPC_CONN_H
#define RS_SERVE_GRPC_CONN_H

#include <nghttp2/nghttp2.h>
#include <pthread.h>

#include "grpc_internal.h"
#include "serve_limits.h"

#define MAX_WORKERS 1024

typedef struct msg {
    struct msg *next;
    size_t len;
    uint8_t data[];
} msg;

typedef struct conn conn;

typedef struct call {
    conn *c;
    int32_t id;
    rs_grpc_method method;
    bool content_ok;           /* content-type application/grpc* */
    uint64_t begin_ns;         /* when its HEADERS came: a unary request must be whole by request-timeout */
    bool timed_out;            /* reset for taking longer (the reader) */
    struct call *prev, *next;  /* the connection's calls */
    struct call *job_next;     /* the pool's queue */
    /* request side, the reader only */
    uint8_t *in;               /* owned: bytes not yet framed into messages */
    size_t in_n, in_cap;
    bool in_err;               /* framing failed: the rest is dropped */
    /* under c->mu */
    msg *q_head, *q_tail;      /* owned: request messages waiting for the worker */
    size_t q_bytes;
    int nmsgs;                 /* messages seen (a unary call takes exactly one) */
    bool in_done;              /* the client ended its side */
    bool job;                  /* queued in or run by the pool */
    bool closed;               /* the stream is gone */
    uint8_t *out;              /* owned: framed responses not yet sent */
    size_t out_n, out_off, out_cap;
    bool finished;             /* no more responses: trailers next */
    rs_grpc_code status;
    char errmsg[1024];
    bool dirty;                /* news not yet given to nghttp2: a stream's output, a call's end */
    /* under c->h2mu */
    bool started, deferred;
} call;

struct conn {
    rs_serve_grpc *g;
    int fd;
    int wake[2];
    nghttp2_session *h2;
    pthread_t th[2];           /* its two threads: one reads the socket, the other runs a call or waits */
    bool two;                  /* th[1] started (at the first call: an idle connection holds one thread) */
    uint32_t ip;               /* the client's address (network order), its place in g->addrs */
    uint64_t progress_ns;      /* when a call last began or ended (reader only): idle since then */
    pthread_cond_t role;       /* the reader role changed hands, or the connection ends (c->mu) */
    int reader;                /* the thread that reads (c->mu) */
    bool runner_busy;          /* the other thread is running a call (c->mu) */
    bool ending;               /* the reader has left its loop (c->mu) */
    bool park_req;             /* the threads leave: the connection waits in g->ep with none (c->mu) */
    call *inline_k;            /* a unary call the reader runs itself once the other reads (reader only) */
    uint64_t drain_until;      /* reader only */
    pthread_mutex_t h2mu;      /* the session, w and the calls' started/deferred: whichever thread sends */
    bool dead;                 /* the reader has left: nobody touches the session again (c->h2mu) */
    pthread_mutex_t mu;
    pthread_cond_t idle;       /* a worker let go of a call */
    call *calls;               /* owned */
    int jobs;                  /* calls held by the pool */
    conn *next;                /* the server's connections (g->mu) */
    bool done;                 /* the reader has finished with the socket (g->mu) */
    bool parked;               /* no thread: its socket is in g->ep until it is readable (g->mu) */
    bool joined;               /* its threads were joined (parked, or a failed wake-up): none to join (g->mu) */
    bool goaway;
    uint8_t *w;                /* owned: bytes for the socket not yet written */
    size_t wn, woff, wcap;
};

struct rs_serve_grpc {
    rs_serve_server *s;        /* borrowed */
    size_t cap;
    int lfd, port;
    int ep;                    /* epoll: the parked connections' sockets (the accept thread waits on it) */
    int stop_pipe[2];
    pthread_t accept_th;
    pthread_mutex_t mu;
    pthread_cond_t work;
    conn *conns;
    bool stopping;             /* g->mu; read unlocked by the readers as a hint */
    call *jq_head, *jq_tail;   /* the pool's queue */
    int queued, idle, nworkers;
    pthread_t *workers;        /* (MAX_WORKERS), owned */
    uint64_t sends;            /* buffers given to send() (atomic): one per response when the socket takes it */
    rs_serve_limits lim;       /* the server's */
    rs_serve_refused *refused; /* the server's counters */
    rs_serve_addrs addrs;      /* connections held per client address */
};

/* ---- grpc_call.c ---- */

void rs_grpc_wake(conn *c);                  /* wakes the connection's reader */
/* Ends call k with status (c->mu held). */
void rs_grpc_finish_locked(call *k, rs_grpc_code code, const char *errmsg);
/* Takes k out of its connection's list and frees it (c->mu held). */
void rs_grpc_call_drop_locked(call *k);
/* Sends a connection's news now, from whoever ran a call (not holding c->mu). */
void rs_grpc_send_now(conn *c);
/* Runs call k's queued messages (a worker, or the reader itself for a unary call). */
void rs_grpc_run_call(rs_serve_grpc *g, call *k);
/* Queues the whole messages in k->in (the reader). */
void rs_grpc_take_messages(call *k);
/* The client ended its side of k (the reader). */
void rs_grpc_end_of_request(call *k);

/* ---- grpc.c ---- */

void rs_grpc_pump(conn *c);  /* starts or resumes the streams whose calls have news (c->h2mu held) */
bool rs_grpc_flush(conn *c); /* writes what nghttp2 has to send; false: the connection is dead */

#endif
