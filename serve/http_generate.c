/* Triton's generate extension on a model that generates text (a GPT served decoupled):
 *   POST /v2/models/NAME[/versions/V]/generate         {"text_input": "...", "parameters": {...}}
 *        -> {"model_name", "model_version", "text_output": the whole text}
 *   POST /v2/models/NAME[/versions/V]/generate_stream  the same request
 *        -> text/event-stream, one `data: {..., "text_output": TOKEN}` event per token as it is drawn
 * The sampling settings (max_tokens, temperature, top_k, seed) are read from "parameters" or from the
 * top level, as Triton's extension maps JSON keys. A streamed generation runs on a thread of its
 * own, writing events into a buffer that libmicrohttpd's reader callback drains; when the client goes
 * away the reader is freed, which stops the generation at its next token and joins the thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

typedef struct text_buf {
    char *s; /* owned */
    size_t n, cap;
    bool oom;
} text_buf;

static void put(text_buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

/* n bytes as a JSON string. A token is one byte of the model's vocabulary, which need not be valid
 * UTF-8 on its own, so each byte stands for the code point of its value (Latin-1), which the
 * JSON_ENSURE_ASCII dump writes as \u00XX when it is not ASCII. NULL when out of memory. */
static json_t *json_bytes(const char *s, size_t n)
{
    char *u = malloc(2 * n + 1); /* owned here: s as UTF-8 */
    if (!u) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x80) {
            u[k++] = (char)ch;
        } else {
            u[k++] = (char)(0xc0 | ch >> 6);
            u[k++] = (char)(0x80 | (ch & 0x3f));
        }
    }
    json_t *j = json_stringn(u, k);
    free(u);
    return j;
}

/* {"model_name", "model_version", "text_output": the n bytes of text} or, with error, {"error": error},
 * as compact JSON text (the caller's; NULL when out of memory). */
static char *text_json(const rs_serve_model *m, const rs_serve_version *v, const char *text, size_t n,
                       const char *error)
{
    json_t *j;
    if (error) {
        j = json_pack("{s:o}", "error", json_bytes(error, strlen(error)));
    } else {
        char ver[32];
        snprintf(ver, sizeof ver, "%lld", (long long)v->version);
        j = json_pack("{s:s,s:s,s:o}", "model_name", m->cfg.name, "model_version", ver, "text_output",
                      json_bytes(text, n));
    }
    char *out = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(j);
    return out;
}

/* The request's text and settings into g; false with r filled when they are wrong. */
static bool parse(const rs_serve_model *m, const char *body, size_t n, json_t **req, rs_serve_gen *g,
                  rs_serve_reply *r)
{
    json_error_t je;
    *req = json_loadb(body, n, JSON_REJECT_DUPLICATES, &je);
    if (!*req || !json_is_object(*req)) {
        rs_serve_reply_error(r, 400, "failed to parse the request JSON buffer: %s at line %d, column %d",
                             *req ? "not a JSON object" : je.text, *req ? 1 : je.line, *req ? 1 : je.column);
        return false;
    }
    const json_t *t = json_object_get(*req, "text_input");
    if (!json_is_string(t)) {
        rs_serve_reply_error(r, 400, "model '%s' expects \"text_input\", a string", m->cfg.name);
        return false;
    }
    rs_serve_gen_init(g);
    g->prompt = json_string_value(t);
    g->plen = json_string_length(t);
    const json_t *params = json_object_get(*req, "parameters");
    if (params && !json_is_object(params)) {
        rs_serve_reply_error(r, 400, "\"parameters\" must be an object");
        return false;
    }
    static const char *const keys[] = {"max_tokens", "temperature", "top_k", "seed"};
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(params, keys[k]);
        if (!v) v = json_object_get(*req, keys[k]);
        if (!v) continue;
        double d = json_number_value(v);
        bool ok = json_is_number(v) && d >= 0 && (k == 1 || json_is_integer(v));
        if (ok && k == 0) ok = d <= 100000, g->max_tokens = (int)d;
        else if (ok && k == 1) ok = d <= 1e6, g->temperature = (float)d;
        else if (ok && k == 2) ok = d <= 1e9, g->top_k = (int)d;
        else if (ok) g->seed = (uint64_t)json_integer_value(v);
        if (!ok) {
            rs_serve_reply_error(r, 400, "'%s' takes %s", keys[k],
                                 k == 0 ? "a whole number 0..100000" : k == 1 ? "a number >= 0" : "a whole number >= 0");
            return false;
        }
    }
    return true;
}

/* ---- POST .../generate ---- */

static void collect(void *ud, const char *text, size_t n) { put(ud, text, n); }

void rs_serve_generate(rs_serve_model *m, rs_serve_version *v, const char *body, size_t n, rs_serve_reply *r)
{
    uint64_t t0 = rs_serve_now_ns();
    if (!rs_serve_backend_generates(v->backend)) {
        rs_serve_reply_error(r, 400, "model '%s' does not generate text (generate takes a GPT served decoupled; "
                             "send this model tensors at /infer)", m->cfg.name);
        return;
    }
    json_t *req = NULL;
    rs_serve_gen g;
    if (!parse(m, body, n, &req, &g, r)) {
        rs_serve_sched_count_fail(v->sched, rs_serve_now_ns() - t0);
        json_decref(req);
        return;
    }
    text_buf out = {0};
    g.on_text = collect;
    g.ud = &out;
    rs_err err = {0};
    rs_status st = rs_serve_sched_generate(v->sched, &g, &err);
    if (st || out.oom) {
        rs_serve_reply_error(r, st == RS_ERR_ARG ? 400 : st == RS_ERR_UNSUPPORTED || st == RS_ERR_CANCELLED ? 503 : 500,
                             "%s", st ? err.msg : "out of memory");
    } else {
        char *j = text_json(m, v, out.s ? out.s : "", out.n, NULL); /* the reply's */
        if (!j) {
            rs_serve_reply_error(r, 500, "out of memory");
        } else {
            free(r->body);
            r->status = 200;
            r->body = j;
            r->len = strlen(j);
            r->type = "application/json";
            r->header_len = -1;
        }
    }
    free(out.s);
    json_decref(req);
}

/* ---- POST .../generate_stream ---- */

struct rs_serve_sse {
    rs_serve_server *s;   /* borrowed */
    rs_serve_model *m;    /* held */
    rs_serve_version *v;
    json_t *req;          /* owned: g.prompt points into it */
    rs_serve_gen g;
    pthread_t th;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    text_buf ev;          /* events not yet read by the connection */
    size_t ev_off;
    bool done, gone;
};

static void sse_event(rs_serve_sse *x, const char *text, size_t n, const char *error)
{
    char *j = text_json(x->m, x->v, text, n, error); /* owned here */
    text_buf e = {0};
    put(&e, "data: ", 6);
    if (j) put(&e, j, strlen(j));
    put(&e, "\n\n", 2);
    free(j);
    e.oom |= !j;
    pthread_mutex_lock(&x->mu);
    if (!e.oom) put(&x->ev, e.s, e.n);
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    free(e.s);
}

static void sse_on_text(void *ud, const char *text, size_t n) { sse_event(ud, text, n, NULL); }

static bool sse_stop(void *ud)
{
    rs_serve_sse *x = ud;
    pthread_mutex_lock(&x->mu);
    bool gone = x->gone;
    pthread_mutex_unlock(&x->mu);
    return gone;
}

static void *sse_main(void *arg)
{
    rs_serve_sse *x = arg;
    rs_err err = {0};
    rs_status st = rs_serve_sched_generate(x->v->sched, &x->g, &err);
    if (st) sse_event(x, NULL, 0, err.msg);
    pthread_mutex_lock(&x->mu);
    x->done = true;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

ssize_t rs_serve_sse_read(rs_serve_sse *x, char *buf, size_t max)
{
    pthread_mutex_lock(&x->mu);
    while (x->ev_off == x->ev.n && !x->done) pthread_cond_wait(&x->cv, &x->mu);
    size_t n = x->ev.n - x->ev_off;
    if (n > max) n = max;
    if (n) memcpy(buf, x->ev.s + x->ev_off, n);
    x->ev_off += n;
    if (x->ev_off == x->ev.n) x->ev_off = x->ev.n = 0;
    pthread_mutex_unlock(&x->mu);
    return n ? (ssize_t)n : -1; /* -1: the end */
}

void rs_serve_sse_free(rs_serve_sse *x)
{
    if (!x) return;
    pthread_mutex_lock(&x->mu);
    x->gone = true; /* a generation still running stops at its next token */
    pthread_mutex_unlock(&x->mu);
    if (x->started) pthread_join(x->th, NULL);
    rs_serve_release(x->s, x->m);
    json_decref(x->req);
    free(x->ev.s);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x);
}

void rs_serve_generate_stream(rs_serve_server *s, rs_serve_model *m, rs_serve_version *v, const char *body, size_t n,
                              rs_serve_reply *r)
{
    uint64_t t0 = rs_serve_now_ns();
    if (!rs_serve_backend_generates(v->backend)) {
        rs_serve_reply_error(r, 400, "model '%s' does not generate text (generate_stream takes a GPT served "
                             "decoupled; send this model tensors at /infer)", m->cfg.name);
        return;
    }
    rs_serve_sse *x = calloc(1, sizeof *x); /* the reply's: freed by rs_serve_sse_free */
    if (!x) {
        rs_serve_reply_error(r, 500, "out of memory");
        return;
    }
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    x->s = s;
    x->v = v;
    x->m = rs_serve_acquire(s, m->cfg.name);
    if (x->m != m) { /* reloaded in between: this request's version is gone */
        rs_serve_reply_error(r, 503, "model '%s' was reloaded; send the request again", m->cfg.name);
        rs_serve_sse_free(x);
        return;
    }
    if (!parse(m, body, n, &x->req, &x->g, r)) {
        rs_serve_sched_count_fail(v->sched, rs_serve_now_ns() - t0);
        rs_serve_sse_free(x);
        return;
    }
    x->g.on_text = sse_on_text;
    x->g.stop = sse_stop;
    x->g.ud = x;
    if (pthread_create(&x->th, NULL, sse_main, x)) {
        rs_serve_reply_error(r, 500, "cannot start a thread");
        rs_serve_sse_free(x);
        return;
    }
    x->started = true;
    free(r->body);
    r->status = 200;
    r->body = NULL;
    r->len = 0;
    r->type = "text/event-stream";
    r->header_len = -1;
    r->sse = x;
}
