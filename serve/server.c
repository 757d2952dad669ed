/* The server's model table and lifecycle (see server.h). A model is reference-counted: a request
 * holds it while it runs, so unload (or a reload) takes it out of the table at once and the last
 * holder frees it, after its queue has drained. */
#include "server.h"
#include "ensemble.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "repo.h"

typedef struct entry {
    char name[RS_SERVE_NAME_MAX];
    rs_serve_model *m;      /* NULL when unavailable */
    char reason[1024];      /* why it is unavailable */
    int64_t stamp;          /* the folder's rs_serve_repo_stamp when it was loaded (poll mode) */
    int restarts;           /* its ranks started again after one died */
    bool down;              /* lost a rank and not back yet: the server is not ready */
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
    rs_serve_refused refused;      /* what the front ends refused (atomic counters) */
    pthread_t poll_th;             /* poll mode's */
    bool polling;                  /* poll_th runs */
    pthread_mutex_t poll_mu;
    pthread_cond_t poll_cv;
    bool poll_stop;                /* poll_mu; also stops the health watch */
    pthread_t health_th;           /* the health watch (models across ranks) */
    bool health;                   /* health_th runs */
};

void rs_serve_opts_init(rs_serve_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_batch = o->instances = -1;
    o->grpc_port = -1;
    o->delay_us = -1;
    rs_serve_limits_default(&o->limits);
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
        if (s->o.delay_us >= 0 && !c->sequence_batching && !c->ensemble) { /* they schedule otherwise */
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
    /* A name with no folder is never listed: loading made-up names must not grow the table. */
    if (!rs_serve_repo_has(s->repo, name))
        return rs_err_set(err, RS_ERR_ARG, "failed to poll from model repository: no folder '%.60s' in %.300s", name,
                          s->repo);
    int64_t stamp = rs_serve_repo_stamp(s->repo, name); /* before reading: a change meanwhile shows next time */
    rs_serve_model *m = NULL;
    rs_status st = model_load(s, name, &m, err);
    pthread_mutex_lock(&s->mu);
    rs_serve_model *old = put(s, name, m, st ? err->msg : NULL);
    entry *e = find(s, name);
    if (e) e->stamp = stamp;
    pthread_mutex_unlock(&s->mu);
    rs_serve_release(s, old);
    return st;
}

rs_status rs_serve_unload(rs_serve_server *s, const char *name, rs_err *err)
{
    /* The entry goes: the index lists the folder, if it is still there, as UNAVAILABLE "unloaded". */
    pthread_mutex_lock(&s->mu);
    entry *e = find(s, name);
    rs_serve_model *old = NULL;
    if (e) {
        old = e->m;
        memmove(e, e + 1, (size_t)(s->e + --s->n - e) * sizeof *e); /* the rest keep their order */
    }
    pthread_mutex_unlock(&s->mu);
    if (!e) return rs_err_set(err, RS_ERR_ARG, "failed to unload '%.60s', no version is available", name);
    rs_serve_release(s, old);
    return RS_OK;
}

/* The entry of the index's j-th model: the j-th folder of the listing, then the entries loaded
 * earlier whose folders have gone since (s->mu held). name says which. */
static entry *index_entry(rs_serve_server *s, char **names, int nn, int j, const char **name)
{
    if (j < nn) {
        *name = names[j];
        return find(s, names[j]);
    }
    for (int i = 0, seen = 0; i < s->n; i++) {
        bool listed = false;
        for (int q = 0; q < nn && !listed; q++) listed = !strcmp(names[q], s->e[i].name);
        if (!listed && seen++ == j - nn) {
            *name = s->e[i].name;
            return &s->e[i];
        }
    }
    *name = "";
    return NULL;
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
    int models = nn, total = 0;
    for (int i = 0; i < s->n; i++) {
        bool listed = false;
        for (int j = 0; j < nn && !listed; j++) listed = !strcmp(names[j], s->e[i].name);
        models += !listed;
    }
    /* as Triton lists them: one row per loaded version, one for a model with none */
    for (int j = 0; j < models; j++) {
        const char *name;
        entry *e = index_entry(s, names, nn, j, &name);
        total += e && e->m && e->m->nversions > 0 ? e->m->nversions : 1;
    }
    rs_serve_index_entry *r = calloc((size_t)total + 1, sizeof *r); /* the caller's */
    for (int j = 0, k = 0; r && j < models; j++) {
        const char *name;
        entry *e = index_entry(s, names, nn, j, &name);
        int nv = e && e->m ? e->m->nversions : 0;
        for (int v = 0; v < (nv ? nv : 1); v++, k++) {
            snprintf(r[k].name, sizeof r[k].name, "%s", name);
            r[k].restarts = e ? e->restarts : 0;
            if (nv) {
                r[k].state = "READY";
                r[k].version = e->m->v[v].version;
            } else {
                r[k].state = "UNAVAILABLE";
                snprintf(r[k].reason, sizeof r[k].reason, "%.250s", e ? e->reason : "unloaded");
            }
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

/* What the control mode loads at start: every model, or explicit mode's load_models ("*": every
 * one; a name with no folder fails the start, as tritonserver exits then). */
static rs_status load_at_start(rs_serve_server *s, char **names, int nn, rs_err *err)
{
    bool all = s->o.control != RS_SERVE_CONTROL_EXPLICIT;
    for (int i = 0; i < s->o.nload_models; i++) all |= !strcmp(s->o.load_models[i], "*");
    for (int i = 0; all && i < nn; i++) {
        rs_err e = {0};
        rs_serve_load(s, names[i], &e); /* a failure is listed UNAVAILABLE with its reason */
    }
    for (int i = 0; !all && i < s->o.nload_models; i++) {
        rs_err e = {0};
        if (rs_serve_load(s, s->o.load_models[i], &e) && !rs_serve_repo_has(s->repo, s->o.load_models[i]))
            return rs_err_set(err, RS_ERR_ARG, "--load-model %.60s: %s", s->o.load_models[i], e.msg);
    }
    return RS_OK;
}

/* Poll mode's look at the repository: loads new folders and changed ones, unloads removed ones. */
static void poll_once(rs_serve_server *s)
{
    char **names;
    int nn;
    rs_err err = {0};
    if (rs_serve_repo_list(s->repo, &names, &nn, &err)) return;
    for (int i = 0; i < nn; i++) {
        int64_t now = rs_serve_repo_stamp(s->repo, names[i]);
        pthread_mutex_lock(&s->mu);
        entry *e = find(s, names[i]);
        bool load = !e || e->stamp != now;
        pthread_mutex_unlock(&s->mu);
        if (load) rs_serve_load(s, names[i], &err);
    }
    for (;;) { /* entries whose folder has gone */
        char gone[RS_SERVE_NAME_MAX] = "";
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < s->n && !gone[0]; i++)
            if (!rs_serve_repo_has(s->repo, s->e[i].name)) snprintf(gone, sizeof gone, "%s", s->e[i].name);
        pthread_mutex_unlock(&s->mu);
        if (!gone[0] || rs_serve_unload(s, gone, &err)) break;
    }
    for (int i = 0; i < nn; i++) free(names[i]);
    free(names);
}

/* Runs fn(s) every period_ms until poll_stop is set (woken at once by poll_cv): the repository's poll
 * and the ranks' health watch. */
static void periodic(rs_serve_server *s, long period_ms, void (*fn)(rs_serve_server *))
{
    pthread_mutex_lock(&s->poll_mu);
    while (!s->poll_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += period_ms / 1000;
        ts.tv_nsec += (period_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->poll_cv, &s->poll_mu, &ts);
        if (s->poll_stop) break;
        pthread_mutex_unlock(&s->poll_mu);
        fn(s);
        pthread_mutex_lock(&s->poll_mu);
    }
    pthread_mutex_unlock(&s->poll_mu);
}

static void *poll_main(void *arg)
{
    rs_serve_server *s = arg;
    periodic(s, 1000L * (s->o.poll_s > 0 ? s->o.poll_s : 15), poll_once);
    return NULL;
}

static void say(rs_serve_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(rs_serve_server *s, const char *fmt, ...)
{
    char line[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (s->o.log) s->o.log(s->o.log_ud, line);
    else fprintf(stderr, "ringside serve: %s\n", line);
}

/* The first loaded model with a version whose ranks died, held (release it), its name and why. */
static rs_serve_model *find_dead(rs_serve_server *s, char *name, char *why, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n;
    rs_serve_model **held = calloc((size_t)n + 1, sizeof *held);
    for (int i = 0; held && i < n; i++)
        if ((held[i] = s->e[i].m)) held[i]->refs++;
    pthread_mutex_unlock(&s->mu);
    rs_serve_model *dead = NULL;
    for (int i = 0; held && i < n; i++) {
        rs_serve_model *m = held[i];
        for (int k = 0; m && !dead && k < m->nversions; k++)
            if (!rs_serve_backend_alive(m->v[k].backend, why, cap)) dead = m;
        if (m != dead) rs_serve_release(s, m);
    }
    free(held);
    if (dead) snprintf(name, RS_SERVE_NAME_MAX, "%s", dead->cfg.name);
    return dead;
}

/* One look of the health watch: a model that lost a rank goes out of the table at once, UNAVAILABLE
 * with the reason (the server not ready meanwhile), and is loaded again (its ranks started anew) up
 * to limits.rank_restarts times; a restart that fails is tried again at the next look, within the
 * same count. */
static void health_once(rs_serve_server *s)
{
    char name[RS_SERVE_NAME_MAX], why[900];
    rs_serve_model *m = find_dead(s, name, why, sizeof why);
    int max = s->o.limits.rank_restarts;
    if (m) {
        pthread_mutex_lock(&s->mu);
        entry *e = find(s, name);
        bool ours = e && e->m == m;
        if (ours) {
            e->m = NULL;
            e->down = true;
            if (e->restarts < max) snprintf(e->reason, sizeof e->reason, "restarting its ranks: %.800s", why);
            else snprintf(e->reason, sizeof e->reason, "not restarted again (%d restarts, --rank-restarts): %.800s",
                          e->restarts, why);
        }
        pthread_mutex_unlock(&s->mu);
        say(s, "model '%s' UNAVAILABLE: %s", name, why);
        if (ours) rs_serve_release(s, m); /* the table's reference */
        rs_serve_release(s, m);              /* find_dead's */
    }
    for (;;) { /* the models down, within their restarts */
        name[0] = 0;
        int k = 0;
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < s->n && !name[0]; i++)
            if (s->e[i].down && !s->e[i].m && s->e[i].restarts < max) {
                snprintf(name, sizeof name, "%s", s->e[i].name);
                k = ++s->e[i].restarts;
            }
        pthread_mutex_unlock(&s->mu);
        if (!name[0]) return;
        rs_err err = {0};
        rs_status st = rs_serve_load(s, name, &err);
        pthread_mutex_lock(&s->mu);
        entry *e = find(s, name);
        if (e && !st) e->down = false;
        pthread_mutex_unlock(&s->mu);
        if (st) say(s, "model '%s': restart %d of %d failed: %s", name, k, max, err.msg);
        else say(s, "model '%s' READY again: its ranks restarted (%d of %d)", name, k, max);
    }
}

static void *health_main(void *arg)
{
    periodic(arg, 250, health_once);
    return NULL;
}

bool rs_serve_ready(rs_serve_server *s)
{
    pthread_mutex_lock(&s->mu);
    bool ok = true;
    for (int i = 0; i < s->n; i++) ok &= !s->e[i].down;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static rs_status poll_start(rs_serve_server *s, rs_err *err)
{
    if (pthread_create(&s->poll_th, NULL, poll_main, s)) return rs_err_set(err, RS_ERR_INTERNAL, "cannot start a thread");
    s->polling = true;
    return RS_OK;
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
    pthread_mutex_init(&s->poll_mu, NULL);
    pthread_cond_init(&s->poll_cv, NULL);
    char **names;
    int nn;
    rs_status st = !s->repo || !s->host ? rs_err_set(err, RS_ERR_NOMEM, "out of memory")
                                        : rs_serve_repo_list(s->repo, &names, &nn, err);
    if (st) {
        rs_serve_stop(s);
        return st;
    }
    st = load_at_start(s, names, nn, err);
    for (int i = 0; i < nn; i++) free(names[i]);
    free(names);
    if (!st && o->control == RS_SERVE_CONTROL_POLL) st = poll_start(s, err);
    if (!st) {
        if (pthread_create(&s->health_th, NULL, health_main, s)) st = rs_err_set(err, RS_ERR_INTERNAL, "cannot start a thread");
        else s->health = true;
    }
    if (st) {
        rs_serve_stop(s);
        return st;
    }
    size_t cap = o->body_limit ? o->body_limit : (size_t)64 << 20;
    /* both front ends full, the metrics port and the models' own files */
    rs_serve_raise_fd_limit(3L * o->limits.max_conns + 1024);
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
    pthread_mutex_lock(&s->poll_mu);
    s->poll_stop = true;
    pthread_cond_broadcast(&s->poll_cv);
    pthread_mutex_unlock(&s->poll_mu);
    if (s->polling) pthread_join(s->poll_th, NULL);
    if (s->health) pthread_join(s->health_th, NULL);
    rs_serve_http_stop(s->http);     /* waits for the requests in flight */
    rs_serve_grpc_stop(s->grpc);     /* likewise */
    rs_serve_http_stop(s->metrics);
    for (int i = 0; i < s->n; i++) rs_serve_release(s, s->e[i].m);
    free(s->e);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->poll_mu);
    pthread_cond_destroy(&s->poll_cv);
    if (s->o.temp_repo) rs_serve_repo_remove_temp(s->repo);
    free(s->repo);
    free(s->host);
    free(s);
}

int rs_serve_http_port(const rs_serve_server *s) { return s->http ? rs_serve_http_bound_port(s->http) : -1; }
int rs_serve_metrics_port(const rs_serve_server *s) { return s->metrics ? rs_serve_http_bound_port(s->metrics) : -1; }
int rs_serve_grpc_port(const rs_serve_server *s) { return s->grpc ? rs_serve_grpc_bound_port(s->grpc) : -1; }
const char *rs_serve_repo(const rs_serve_server *s) { return s->repo; }
const char *rs_serve_host(const rs_serve_server *s) { return s->host; }
const rs_serve_limits *rs_serve_limits_of(const rs_serve_server *s) { return &s->o.limits; }
rs_serve_refused *rs_serve_refused_of(rs_serve_server *s) { return &s->refused; }
bool rs_serve_control_explicit(const rs_serve_server *s) { return s->o.control == RS_SERVE_CONTROL_EXPLICIT; }
