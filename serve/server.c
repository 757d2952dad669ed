/* The server's model table and lifecycle (see server.h). A model is reference-counted: a request
 * holds it while it runs, so unload (or a reload) takes it out of the table at once and the last
 * holder frees it, after its queue has drained. */
#include "server.h"
#include "ensemble.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repo.h"

typedef struct entry {
    char name[RS_SERVE_NAME_MAX];
    rs_serve_model *m;      /* NULL when unavailable */
    char reason[1024];      /* why it is unavailable */
} entry;

struct rs_serve_server {
    rs_serve_opts o;
    char *repo;             /* owned */
    char *host;             /* owned */
    pthread_mutex_t mu;
    entry *e;               /* (n), owned */
    int n, cap;
    rs_serve_http *http, *metrics; /* owned */
    rs_serve_grpc *grpc;           /* owned */
    int ranks_workers;             /* models started across ranks so far (their devices' round-robin) */
};

void rs_serve_opts_init(rs_serve_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_batch = o->instances = -1;
    o->grpc_port = -1;
    o->delay_us = -1;
}

static void model_free(rs_serve_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->nversions; i++) {
        rs_serve_sched_free(m->v[i].sched);
        rs_serve_backend_free(m->v[i].backend);
    }
    free(m);
}

static rs_status model_load(rs_serve_server *s, const char *name, rs_serve_model **out, rs_err *err)
{
    *out = NULL;
    rs_serve_model *m = calloc(1, sizeof *m); /* the caller's */
    if (!m) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    int64_t vers[RS_SERVE_MAX_VERSIONS];
    int nv = 0;
    rs_status st = rs_serve_repo_model(s->repo, name, &m->cfg, vers, &nv, RS_SERVE_MAX_VERSIONS, err);
    rs_serve_config *c = &m->cfg;
    if (!st) {
        if (s->o.max_batch >= 0) c->max_batch_size = s->o.max_batch;
        if (s->o.instances > 0) c->instance_count = s->o.instances;
        if (s->o.ranks > 0) c->ranks = s->o.ranks;
        if (s->o.ranks_mode) strcpy(c->ranks_mode, strcmp(s->o.ranks_mode, "tensor") ? "pipeline" : "tensor");
        if (s->o.delay_us >= 0) {
            c->dynamic_batching = true;
            c->max_queue_delay_us = s->o.delay_us;
        }
    }
    for (int i = 0; !st && i < nv; i++) {
        char path[4400];
        rs_serve_repo_model_path(s->repo, name, vers[i], path, sizeof path);
        rs_serve_config_model_path(c, s->repo, name, vers[i], path, sizeof path);
        rs_serve_version *v = &m->v[m->nversions];
        v->version = vers[i];
        st = c->ensemble ? rs_serve_ensemble_new(s, c, &v->backend, err) : rs_serve_backend_load(path, &v->backend, err);
        if (!st) st = rs_serve_backend_complete(v->backend, c, path, err);
        if (!st && c->ranks > 1) {
            pthread_mutex_lock(&s->mu);
            int w = s->ranks_workers++;
            pthread_mutex_unlock(&s->mu);
            st = rs_serve_backend_use_ranks(v->backend, c->ranks, c->ranks_mode[0] ? c->ranks_mode : "pipeline",
                                            c->max_batch_size, w, err);
        }
        if (!st) st = rs_serve_sched_new(v->backend, c, &v->sched, err);
        if (v->backend) m->nversions++;
    }
    if (st) {
        model_free(m);
        return st;
    }
    *out = m;
    return RS_OK;
}

static entry *find(rs_serve_server *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->e[i].name, name)) return &s->e[i];
    return NULL;
}

/* Puts m (may be NULL with a reason) under name; returns the model it replaced, for the caller to drop. */
static rs_serve_model *put(rs_serve_server *s, const char *name, rs_serve_model *m, const char *reason)
{
    entry *e = find(s, name);
    if (!e) {
        if (s->n == s->cap) {
            int cap = s->cap ? 2 * s->cap : 16; /* s->cap grows only with the table */
            entry *ne = realloc(s->e, (size_t)cap * sizeof *ne);
            if (!ne) {
                if (m) m->refs = 1; /* out of memory: the new model is dropped instead (the caller releases it) */
                return m;
            }
            s->e = ne;
            s->cap = cap;
        }
        e = &s->e[s->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", name);
    }
    rs_serve_model *old = e->m;
    e->m = m;
    if (m) m->refs = 1; /* the table's own reference */
    snprintf(e->reason, sizeof e->reason, "%.250s", reason ? reason : "");
    return old;
}

rs_serve_model *rs_serve_acquire(rs_serve_server *s, const char *name)
{
    pthread_mutex_lock(&s->mu);
    entry *e = find(s, name);
    rs_serve_model *m = e ? e->m : NULL;
    if (m) m->refs++;
    pthread_mutex_unlock(&s->mu);
    return m;
}

void rs_serve_release(rs_serve_server *s, rs_serve_model *m)
{
    if (!m) return;
    pthread_mutex_lock(&s->mu);
    bool last = --m->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (last) model_free(m);
}

rs_serve_version *rs_serve_model_version(rs_serve_model *m, const char *version)
{
    if (m->nversions == 0) return NULL;
    if (!version || !*version) return &m->v[m->nversions - 1];
    char *end;
    long long v = strtoll(version, &end, 10);
    if (*end) return NULL;
    for (int i = 0; i < m->nversions; i++)
        if (m->v[i].version == v) return &m->v[i];
    return NULL;
}

rs_status rs_serve_load(rs_serve_server *s, const char *name, rs_err *err)
{
    rs_serve_model *m = NULL;
    rs_status st = model_load(s, name, &m, err);
    if (st && !rs_serve_name_ok(name)) return st; /* never list a name that is not a folder */
    pthread_mutex_lock(&s->mu);
    rs_serve_model *old = put(s, name, m, st ? err->msg : NULL);
    pthread_mutex_unlock(&s->mu);
    rs_serve_release(s, old);
    return st;
}

rs_status rs_serve_unload(rs_serve_server *s, const char *name, rs_err *err)
{
    pthread_mutex_lock(&s->mu);
    entry *e = find(s, name);
    rs_serve_model *old = NULL;
    if (e) {
        old = e->m;
        e->m = NULL;
        snprintf(e->reason, sizeof e->reason, "unloaded");
    }
    pthread_mutex_unlock(&s->mu);
    if (!e) return rs_err_set(err, RS_ERR_ARG, "failed to unload '%.60s', no version is available", name);
    rs_serve_release(s, old);
    return RS_OK;
}

rs_status rs_serve_index(rs_serve_server *s, rs_serve_index_entry **out, int *n, rs_err *err)
{
    char **names;
    int nn;
    *out = NULL;
    *n = 0;
    rs_status st = rs_serve_repo_list(s->repo, &names, &nn, err);
    if (st) return st;
    pthread_mutex_lock(&s->mu);
    int total = nn;
    for (int i = 0; i < s->n; i++) {
        bool listed = false;
        for (int j = 0; j < nn; j++) listed |= !strcmp(names[j], s->e[i].name);
        if (!listed) total++;
    }
    rs_serve_index_entry *r = calloc((size_t)total + 1, sizeof *r); /* the caller's */
    for (int j = 0; r && j < total; j++) {
        const char *name = j < nn ? names[j] : NULL;
        entry *e = name ? find(s, name) : NULL;
        if (!name) { /* loaded earlier, folder gone since */
            int k = j - nn, seen = 0;
            for (int i = 0; i < s->n && !e; i++) {
                bool listed = false;
                for (int q = 0; q < nn; q++) listed |= !strcmp(names[q], s->e[i].name);
                if (!listed && seen++ == k) e = &s->e[i];
            }
            name = e ? e->name : "";
        }
        snprintf(r[j].name, sizeof r[j].name, "%s", name);
        if (e && e->m) {
            r[j].state = "READY";
            r[j].version = e->m->v[e->m->nversions - 1].version;
        } else {
            r[j].state = "UNAVAILABLE";
            snprintf(r[j].reason, sizeof r[j].reason, "%.250s", e ? e->reason : "unloaded");
        }
    }
    pthread_mutex_unlock(&s->mu);
    for (int j = 0; j < nn; j++) free(names[j]);
    free(names);
    if (!r) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    *out = r;
    *n = total;
    return RS_OK;
}

void rs_serve_each(rs_serve_server *s, rs_serve_each_fn fn, void *ud)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n;
    rs_serve_model **held = calloc((size_t)n + 1, sizeof *held);
    for (int i = 0; held && i < n; i++)
        if ((held[i] = s->e[i].m)) held[i]->refs++;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; held && i < n; i++) {
        rs_serve_model *m = held[i];
        if (!m) continue;
        for (int k = 0; k < m->nversions; k++) {
            rs_serve_stats st;
            rs_serve_sched_stats(m->v[k].sched, &st);
            fn(ud, m, &m->v[k], &st);
            rs_serve_stats_clear(&st);
        }
        rs_serve_release(s, m);
    }
    free(held);
}

rs_status rs_serve_start(const rs_serve_opts *o, rs_serve_server **out, rs_err *err)
{
    *out = NULL;
    if (!o->repo) return rs_err_set(err, RS_ERR_ARG, "serve: no model repository (--repo DIR)");
    rs_serve_server *s = calloc(1, sizeof *s); /* the caller's */
    if (!s) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    s->o = *o;
    s->repo = strdup(o->repo);
    s->host = strdup(o->host ? o->host : "127.0.0.1");
    s->o.repo = s->repo;
    s->o.host = s->host;
    pthread_mutex_init(&s->mu, NULL);
    char **names;
    int nn;
    rs_status st = !s->repo || !s->host ? rs_err_set(err, RS_ERR_NOMEM, "out of memory")
                                        : rs_serve_repo_list(s->repo, &names, &nn, err);
    if (st) {
        rs_serve_stop(s);
        return st;
    }
    for (int i = 0; i < nn; i++) {
        rs_err e = {0};
        rs_serve_load(s, names[i], &e); /* a failure is listed UNAVAILABLE with its reason */
        free(names[i]);
    }
    free(names);
    size_t cap = o->body_limit ? o->body_limit : (size_t)64 << 20;
    if (o->http_port >= 0) st = rs_serve_http_start(s, s->host, o->http_port, false, cap, &s->http, err);
    if (!st && o->grpc_port >= 0) st = rs_serve_grpc_start(s, s->host, o->grpc_port, cap, &s->grpc, err);
    if (!st && o->metrics_port >= 0) st = rs_serve_http_start(s, s->host, o->metrics_port, true, cap, &s->metrics, err);
    if (st) {
        rs_serve_stop(s);
        return st;
    }
    *out = s;
    return RS_OK;
}

void rs_serve_stop(rs_serve_server *s)
{
    if (!s) return;
    rs_serve_http_stop(s->http);     /* waits for the requests in flight */
    rs_serve_grpc_stop(s->grpc);     /* likewise */
    rs_serve_http_stop(s->metrics);
    for (int i = 0; i < s->n; i++) rs_serve_release(s, s->e[i].m);
    free(s->e);
    pthread_mutex_destroy(&s->mu);
    free(s->repo);
    free(s->host);
    free(s);
}

int rs_serve_http_port(const rs_serve_server *s) { return s->http ? rs_serve_http_bound_port(s->http) : -1; }
int rs_serve_metrics_port(const rs_serve_server *s) { return s->metrics ? rs_serve_http_bound_port(s->metrics) : -1; }
int rs_serve_grpc_port(const rs_serve_server *s) { return s->grpc ? rs_serve_grpc_bound_port(s->grpc) : -1; }
const char *rs_serve_repo(const rs_serve_server *s) { return s->repo; }
