/* `infer NAME`: requests to the model the running server (`serve`) holds, from the prompt. They enter
 * the server's scheduler as the HTTP and gRPC front ends' requests do (rs_serve_sched_infer, from
 * `clients` threads at once), so the dynamic batcher merges them and the statistics, the metrics and
 * `serve` count them; only the socket is left out. Each answer is checked against the session model of
 * the same name run alone. A GPT (decoupled) streams its tokens to the terminal as they are drawn. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "cmd.h"
#include "engine/core/rng.h"
#include "engine/nn/model.h"
#include "plan/plan.h"
#include "result.h"
#include "serve/server.h"
#include "session.h"

typedef struct client {
    rs_serve_sched *sched;
    const float *x;       /* borrowed: every request's input, request after request */
    float *y;             /* borrowed: every answer */
    size_t in_n, out_n;   /* per request */
    int first, step, n;   /* this client sends requests first, first+step, ... below n */
    int ok, failed;
    rs_err err;           /* the first failure */
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    for (int i = c->first; i < c->n; i += c->step) {
        rs_err e = {0};
        if (rs_serve_sched_infer(c->sched, c->x + (size_t)i * c->in_n, 1,
                                 c->y + (size_t)i * c->out_n, &e)) {
            if (!c->failed++) c->err = e;
        } else c->ok++;
    }
    return NULL;
}

static void on_text(void *ud, const char *text, size_t n)
{
    FILE *out = ud;
    fwrite(text, 1, n, out);
    fflush(out);
}

static int infer_gpt(rs_session *s, const rs_call *c, rs_serve_version *v, const char *name)
{
    rs_serve_gen g;
    rs_serve_gen_init(&g);
    g.prompt = rs_call_str(c, "prompt", "\n");
    g.plen = strlen(g.prompt);
    g.max_tokens = (int)rs_call_int(c, "tokens", 40);
    g.temperature = (float)rs_call_float(c, "temp", g.temperature);
    g.top_k = (int)rs_call_int(c, "top_k", g.top_k);
    g.seed = (uint64_t)rs_call_int(c, "seed", 1);
    g.on_text = on_text;
    g.ud = s->out;
    fprintf(s->out, "%s", g.prompt);
    fflush(s->out);
    rs_err e = {0};
    rs_status st = rs_serve_sched_generate(v->sched, &g, &e);
    fprintf(s->out, "\n");
    if (st) return rs_session_error(s, c, (size_t)-1, 0, "infer %s: %s", name, e.msg);
    fprintf(s->out, "%d tokens streamed from %s, one response each\n", g.tokens, name);
    rs_result_num(s, "tokens", g.tokens);
    return 0;
}

int rs_cmd_infer(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    const char *name = c->args[0];
    if (!s->server)
        return rs_session_error(s, c, c->arg_pos[0], strlen(name), "infer: nothing is served (serve MODEL first)");
    long long n = rs_call_int(c, "n", 16), nclients = rs_call_int(c, "clients", 16);
    if (n < 1 || n > 100000 || nclients < 1 || nclients > 256)
        return rs_session_error(s, c, (size_t)-1, 0, "infer: n= takes 1..100000 requests and clients= 1..256");
    rs_serve_model *m = rs_serve_acquire(s->server, name);
    if (!m)
        return rs_session_error(s, c, c->arg_pos[0], strlen(name), "infer: the server holds no model '%s' (serve "
                                "lists what it serves)", name);
    rs_serve_version *v = rs_serve_model_version(m, NULL);
    int rc = 0;
    if (!v) {
        rc = rs_session_error(s, c, c->arg_pos[0], strlen(name), "infer: '%s' has no version loaded", name);
    } else if (rs_serve_backend_generates(v->backend)) {
        rc = infer_gpt(s, c, v, name);
    } else {
        rs_serve_io in, out;
        rs_serve_backend_io(v->backend, &in, &out);
        size_t in_n = 1, out_n = 1;
        for (int d = 0; d < in.rank; d++) in_n *= (size_t)in.dims[d];
        for (int d = 0; d < out.rank; d++) out_n *= (size_t)out.dims[d];
        float *x = malloc((size_t)n * in_n * sizeof *x);  /* owned here */
        float *y = calloc((size_t)n * out_n, sizeof *y);  /* owned here */
        client *cl = calloc((size_t)nclients, sizeof *cl);  /* owned here */
        pthread_t *th = calloc((size_t)nclients, sizeof *th); /* owned here */
        if (!x || !y || !cl || !th) {
            rc = rs_session_error(s, c, (size_t)-1, 0, "infer: out of memory");
        } else {
            rs_rng r;
            rs_rng_seed(&r, (uint64_t)rs_call_int(c, "seed", 1));
            for (size_t i = 0; i < (size_t)n * in_n; i++) x[i] = 2.0f * rs_rng_uniform(&r) - 1.0f;
            rs_serve_stats before, after;
            rs_serve_sched_stats(v->sched, &before);
            int started = 0;
            for (int k = 0; k < nclients; k++) {
                cl[k] = (client){.sched = v->sched, .x = x, .y = y, .in_n = in_n, .out_n = out_n, .first = k,
                                 .step = (int)nclients, .n = (int)n};
                if (pthread_create(&th[k], NULL, client_main, &cl[k])) break;
                started++;
            }
            int ok = 0, failed = 0;
            const char *why = NULL;
            for (int k = 0; k < started; k++) {
                pthread_join(th[k], NULL);
                ok += cl[k].ok;
                failed += cl[k].failed;
                if (cl[k].failed && !why) why = cl[k].err.msg;
            }
            if (started < nclients) failed += (int)(n - ok - failed);
            rs_serve_sched_stats(v->sched, &after);
            uint64_t batches = after.execution_count - before.execution_count;
            fprintf(s->out, "infer %s: %lld request%s of 1 sample from %d client%s: %d ok, %d failed, run in %llu "
                            "batch%s:", name, n, n == 1 ? "" : "s", started, started == 1 ? "" : "s", ok, failed,
                    (unsigned long long)batches, batches == 1 ? "" : "es");
            bool first = true;
            for (int b = 1; b <= after.max_batch && after.batch_infer && before.batch_infer; b++) {
                uint64_t k = after.batch_infer[b].count - before.batch_infer[b].count;
                if (k) fprintf(s->out, "%s %llu of %d", first ? "" : ",", (unsigned long long)k, b), first = false;
            }
            fprintf(s->out, "\n");
            if (why) fprintf(s->out, "  first failure: %s\n", why);
            rs_result_num(s, "requests", (double)n);
            rs_result_num(s, "ok", ok);
            rs_result_num(s, "failed", failed);
            rs_result_num(s, "batches", (double)batches);
            rs_result_num(s, "mean_batch", batches ? (double)ok / (double)batches : 0.0);
            /* each answer against the session model of that name, run alone */
            rs_obj *o = rs_session_find(s, name);
            if (o && o->kind == RS_OBJ_MODEL && o->model && ok == n &&
                (size_t)rs_shape_numel(rs_model_input_shape(o->model)) == in_n) {
                rs_err e = {0};
                rs_acts *a = rs_acts_new(o->model, 1, &e);
                bool was = rs_model_training(o->model);
                rs_model_set_training(o->model, false);
                double diff = 0.0;
                for (long long i = 0; a && i < n; i++) {
                    const float *ref;
                    if (rs_model_forward_acts(o->model, a, x + (size_t)i * in_n, 1, &ref, &e)) break;
                    for (size_t j = 0; j < out_n; j++) diff = fmax(diff, fabs((double)ref[j] - y[(size_t)i * out_n + j]));
                }
                rs_model_set_training(o->model, was);
                rs_acts_free(a);
                fprintf(s->out, "  every answer equals model %s run alone on its input: max |diff| %.2g\n", name, diff);
                rs_result_num(s, "max_diff", diff);
            } else if (o && o->kind == RS_OBJ_MODEL && o->plan && ok == n && !rs_plan_tokens(o->plan) &&
                       (size_t)rs_shape_numel(rs_plan_input_shape(o->plan)) == in_n) {
                /* a served plan against the session's plan of that name, one sample at a time */
                rs_err e = {0};
                double diff = 0.0;
                bool ran = true;
                for (long long i = 0; ran && i < n; i++) {
                    const float *ref;
                    ran = rs_plan_run(o->plan, x + (size_t)i * in_n, 1, &ref, &e) == RS_OK;
                    for (size_t j = 0; ran && j < out_n; j++)
                        diff = fmax(diff, fabs((double)ref[j] - y[(size_t)i * out_n + j]));
                }
                if (ran) {
                    fprintf(s->out, "  every answer equals plan %s run alone on its input: max |diff| %.2g\n", name, diff);
                    rs_result_num(s, "max_diff", diff);
                }
            }
            rs_serve_stats_clear(&before);
            rs_serve_stats_clear(&after);
        }
        free(x);
        free(y);
        free(cl);
        free(th);
    }
    rs_serve_release(s->server, m);
    return rc;
}
