/* `serve`: the inference server from the prompt. SRC is a session model (written into a repository
 * first: config.pbtxt, 1/model.onnx, 1/model.safetensors; a GPT as 1/model.safetensors and
 * 1/vocab.json, served decoupled; a plan, `model p = plan FILE`, as 1/model.plan; an imported graph that
 * only runs, `model m = onnx FILE`, as a copy of FILE), an ONNX file or a
 * FILE.plan (copied into one), or a repository folder. The server
 * runs on its own threads while the prompt goes on; `serve` alone lists what it serves with the
 * counters, `serve stop` drains and stops it. One server per session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/data.h"
#include "plan/plan.h"
#include "call.h"
#include "cmd.h"
#include "repl_log.h"
#include "serve/backend.h"
#include "serve/repo.h"
#include "serve/repo_write.h"
#include "serve/server.h"
#include "serve/summary.h"
#include "session.h"

static int show(rs_session *s)
{
    if (!s->server) {
        fprintf(s->out, "nothing is served (serve MODEL | serve FILE.onnx | serve FILE.plan | serve REPOSITORY)\n");
        return 0;
    }
    /* the same text the dashboard's serve pane (`view serve`) shows, from one snapshot */
    rs_serve_summary sum;
    rs_err err = {0};
    rs_status st = rs_serve_summary_take(s->server, rs_serve_now_ns(), &sum, &err);
    if (!st) rs_serve_summary_print(&sum, s->out);
    rs_serve_summary_clear(&sum);
    return st ? rs_session_error(s, NULL, (size_t)-1, 0, "%s", err.msg) : 0;
}

/* The name a source is served under: name=, else the file's or object's name (a file's without its
 * 5-character extension, .onnx or .plan, when has_ext). buf holds it when it is made here. */
static const char *served_name(const rs_call *c, const char *src, bool has_ext, char *buf, size_t cap)
{
    const char *name = rs_call_str(c, "name", NULL);
    if (name) return name;
    const char *b = strrchr(src, '/');
    snprintf(buf, cap, "%s", b ? b + 1 : src);
    if (has_ext) buf[strlen(buf) > 5 ? strlen(buf) - 5 : 0] = '\0';
    return buf;
}

/* The repository a written model goes into: repo= when given, else a new folder under /tmp. */
static bool repo_dir(const char *given, char *repo, size_t cap)
{
    if (given) {
        snprintf(repo, cap, "%s", given);
        return true;
    }
    snprintf(repo, cap, "/tmp/ringside-serve-XXXXXX");
    return mkdtemp(repo) != NULL;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int stop(rs_session *s, const rs_call *c)
{
    if (!s->server) return rs_session_error(s, c, c->arg_pos[0], 4, "serve stop: nothing is served");
    rs_serve_stop(s->server); /* lets the requests in flight finish */
    s->server = NULL;
    fprintf(s->out, "server stopped\n");
    return 0;
}

/* The repository config from max_batch=, instances=, delay=, ranks= and mode=; 0, or the error's status. */
static int read_config(rs_session *s, const rs_call *c, rs_serve_config *base)
{
    rs_serve_config_init(base);
    /* checked before they are narrowed: 4294967297 as an int is 1, and a double past int64 has no value */
    long long max_batch = rs_call_int(c, "max_batch", 64), instances = rs_call_int(c, "instances", 1);
    double delay = rs_call_float(c, "delay", 500e-6);
    if (max_batch < 0 || max_batch > 65536 || instances < 1 || instances > 64)
        return rs_session_error(s, c, (size_t)-1, 0, "serve: max_batch= takes 0..65536 and instances= 1..64");
    if (!(delay >= 0 && delay * 1e6 <= (double)((int64_t)1 << 40))) /* config.pbtxt's limit */
        return rs_session_error(s, c, (size_t)-1, 0, "serve: delay= takes 0s..12d (max_queue_delay_microseconds "
                                "up to 2^40)");
    long long ranks = rs_call_int(c, "ranks", 1);
    const char *rmode = rs_call_str(c, "mode", NULL);
    if (ranks < 1 || ranks > 64)
        return rs_session_error(s, c, rs_call_opt(c, "ranks")->pos, 0, "serve: ranks= takes 1..64 (2 or more: the model "
                                "is served across that many rank processes)");
    base->ranks = (int)ranks;
    if (rmode) strcpy(base->ranks_mode, strcmp(rmode, "tensor") ? "pipeline" : "tensor");
    base->max_batch_size = (int)max_batch;
    base->instance_count = (int)instances;
    base->dynamic_batching = true;
    base->max_queue_delay_us = (int64_t)(delay * 1e6 + 0.5);
    return 0;
}

/* A compiled plan (a session model or a FILE.plan) into repo: one process, one batch at a time per
 * instance, batches up to its compiled one. */
static int write_plan(rs_session *s, const rs_call *c, const rs_obj *o, rs_serve_config *base, char *repo, size_t cap)
{
    const char *src = c->args[0];
    size_t n = strlen(src);
    rs_err err = {0};
    if (base->ranks > 1)
        return rs_session_error(s, c, rs_call_opt(c, "ranks")->pos, 0, "serve: a compiled plan runs in one process "
                                "(ranks=1); serve the model or the .onnx file it was compiled from across ranks");
    rs_plan *fp = NULL; /* owned here: only read for its batch */
    if (!o && rs_plan_load(src, &fp, &err))
        return rs_session_error(s, c, c->arg_pos[0], n, "serve: %s", err.msg);
    int pb = rs_plan_batch(o ? o->plan : fp);
    rs_plan_free(fp);
    long long max_batch = rs_call_int(c, "max_batch", 64);
    if (rs_call_given(c, "max_batch") && max_batch > pb)
        return rs_session_error(s, c, rs_call_opt(c, "max_batch")->pos, 0, "serve: max_batch=%lld is larger than "
                                "the batch %d %s was compiled for (1..%d would work, or compile with batch=%lld)",
                                max_batch, pb, src, pb, max_batch);
    if (base->max_batch_size > pb) base->max_batch_size = pb;
    char base_name[128];
    const char *name = served_name(c, src, !o, base_name, sizeof base_name);
    if (!repo_dir(rs_call_str(c, "repo", NULL), repo, cap))
        return rs_session_error(s, c, (size_t)-1, 0, "serve: cannot make a temporary folder");
    if (rs_serve_repo_write_plan(repo, name, o ? o->plan : NULL, o ? NULL : src, base, &err))
        return rs_session_error(s, c, c->arg_pos[0], n, "serve: %s", err.msg);
    fprintf(s->out, "wrote model repository %s/%s (config.pbtxt, platform ringside_plan; 1/model.plan)\n", repo, name);
    char file[1400];
    snprintf(file, sizeof file, "%s/%s/1/model.plan", repo, name);
    rs_log_artifact(s, file, "plan");
    return 0;
}

/* A GPT model into repo/name: served decoupled, text in and a response per token out, with
 * generate's vocabulary. */
static int write_gpt(rs_session *s, const rs_call *c, const rs_obj *o, const rs_serve_config *base, const char *repo,
                     const char *name)
{
    const char *src = c->args[0];
    rs_err err = {0};
    rs_data_pair builtin = {0};
    const rs_text_vocab *v = rs_generate_vocab(s, c, rs_model_vocab(o->model), &builtin);
    rs_status st = v ? rs_serve_repo_write_gpt(repo, name, o->model, v->chars, v->n, base, &err)
                     : rs_err_set(&err, RS_ERR_ARG, "no text data set has %s's vocabulary of %d characters; "
                                  "open the text it was trained on (data t = text FILE) or name it with data=",
                                  src, rs_model_vocab(o->model));
    rs_data_pair_clear(&builtin);
    if (st) return rs_session_error(s, c, c->arg_pos[0], strlen(src), "serve: %s", err.msg);
    fprintf(s->out, "wrote model repository %s/%s (config.pbtxt, decoupled; 1/model.safetensors, "
            "1/vocab.json)\n", repo, name);
    char file[1400];
    snprintf(file, sizeof file, "%s/%s/1/model.safetensors", repo, name);
    rs_log_artifact(s, file, "safetensors");
    return 0;
}

/* A session model or an ONNX file into repo: the ONNX graph (and the model's weights), a GPT, or for
 * an imported graph that only runs, the file it came from. */
static int write_model(rs_session *s, const rs_call *c, const rs_obj *o, const rs_serve_config *base, char *repo,
                       size_t cap)
{
    const char *src = c->args[0];
    size_t n = strlen(src);
    rs_err err = {0};
    if (o && !o->model)
        return rs_session_error(s, c, c->arg_pos[0], n, "serve: '%s' is an imported graph; serve its .onnx file", src);
    /* An imported graph that only runs is ONNX's own nodes, not engine layers, so it has no export; it
     * cannot train either, so the file it was imported from (its spec is "onnx FILE") still holds what
     * it runs: that file is served, as `serve FILE.onnx` would. */
    const char *imported = o && rs_model_inference_only(o->model) && !strncmp(o->spec, "onnx ", 5) ? o->spec + 5 : NULL;
    const char *from = o ? imported : src;
    bool onnx = n > 5 && !strcmp(src + n - 5, ".onnx");
    char base_name[128];
    const char *name = served_name(c, src, onnx, base_name, sizeof base_name);
    if (!repo_dir(rs_call_str(c, "repo", NULL), repo, cap))
        return rs_session_error(s, c, (size_t)-1, 0, "serve: cannot make a temporary folder");
    if (o && !imported && rs_model_tokens(o->model)) return write_gpt(s, c, o, base, repo, name);
    if (rs_serve_repo_write(repo, name, from ? NULL : o->model, from, base, &err)) {
        if (imported)
            return rs_session_error(s, c, c->arg_pos[0], n, "serve: '%s' is served from the file it was imported "
                                    "from: %s (put the file back, or serve another .onnx file or a plan)", src,
                                    err.msg);
        return rs_session_error(s, c, c->arg_pos[0], n, "serve: %s", err.msg);
    }
    if (imported)
        fprintf(s->out, "wrote model repository %s/%s (config.pbtxt, 1/model.onnx: %s, the file %s was imported "
                "from)\n", repo, name, imported, src);
    else
        fprintf(s->out, "wrote model repository %s/%s (config.pbtxt, 1/model.onnx%s)\n", repo, name,
                o ? ", 1/model.safetensors" : "");
    char file[1400];
    snprintf(file, sizeof file, "%s/%s/1/model.onnx", repo, name);
    rs_log_artifact(s, file, "onnx");
    return 0;
}

/* Starts the server on repo with the ports of http=, grpc=, metrics= and, where given, the
 * repository config's overrides; then shows it. */
static int start(rs_session *s, const rs_call *c, const rs_serve_config *base, const char *repo, bool temp)
{
    rs_serve_opts so;
    rs_serve_opts_init(&so);
    so.repo = repo;
    so.host = rs_call_str(c, "host", NULL);
    /* at the prompt every model is served and load/unload requests work, as they always have */
    static const char *const every[] = {"*"};
    so.control = RS_SERVE_CONTROL_EXPLICIT;
    so.load_models = every;
    so.nload_models = 1;
    so.temp_repo = temp; /* a folder made here goes at `serve stop` and when the session ends */
    long long http = rs_call_int(c, "http", 8000), metrics = rs_call_int(c, "metrics", 8002),
              grpc = rs_call_int(c, "grpc", 8001);
    if (http < 0 || http > 65535 || metrics < -1 || metrics > 65535 || grpc < -1 || grpc > 65535)
        return rs_session_error(s, c, (size_t)-1, 0, "serve: http= takes a port 0..65535 (0: any free one), "
                                "grpc= and metrics= 0..65535 or -1 (none)");
    so.http_port = (int)http;
    so.grpc_port = (int)grpc;
    so.metrics_port = (int)metrics;
    if (rs_call_given(c, "max_batch")) so.max_batch = base->max_batch_size;
    if (rs_call_given(c, "instances")) so.instances = base->instance_count;
    if (rs_call_given(c, "delay")) so.delay_us = base->max_queue_delay_us;
    if (rs_call_given(c, "ranks")) so.ranks = base->ranks;
    const char *rmode = rs_call_str(c, "mode", NULL);
    if (rmode) so.ranks_mode = rmode;
    rs_err err = {0};
#define RS_SERVE_LIMIT_GIVEN(f, cli, repl, dflt, lo, hi, help)                                                         \
    if (rs_call_given(c, repl)) {                                                                                      \
        char v[32];                                                                                                    \
        snprintf(v, sizeof v, "%lld", rs_call_int(c, repl, dflt));                                                     \
        if (rs_serve_limits_set(&so.limits, repl, v, &err))                                                            \
            return rs_session_error(s, c, rs_call_opt(c, repl)->pos, 0, "serve: %s", err.msg);                        \
    }
    RS_SERVE_LIMITS(RS_SERVE_LIMIT_GIVEN)
#undef RS_SERVE_LIMIT_GIVEN
    rs_serve_server *srv;
    if (rs_serve_start(&so, &srv, &err)) return rs_session_error(s, c, (size_t)-1, 0, "serve: %s", err.msg);
    s->server = srv;
    return show(s);
}

int rs_cmd_serve(rs_session *s, const rs_call *c)
{
    if (c->nargs == 0) return show(s);
    const char *src = c->args[0];
    if (!strcmp(src, "stop")) return stop(s, c);
    if (s->server)
        return rs_session_error(s, c, c->arg_pos[0], strlen(src),
                                "serve: a server is running already (serve stop first; serve shows it)");
    rs_serve_config base;
    int rc = read_config(s, c, &base);
    if (rc) return rc;
    char repo[1024] = "";
    rs_obj *o = rs_session_find(s, src);
    size_t n = strlen(src);
    bool onnx = n > 5 && !strcmp(src + n - 5, ".onnx");
    bool planf = !o && n > 5 && !strcmp(src + n - 5, ".plan");
    bool wrote = (o && o->kind == RS_OBJ_MODEL) || onnx || planf;
    if ((o && o->kind == RS_OBJ_MODEL && o->plan) || planf)
        rc = write_plan(s, c, o, &base, repo, sizeof repo);
    else if (wrote)
        rc = write_model(s, c, o, &base, repo, sizeof repo);
    else if (is_dir(src))
        snprintf(repo, sizeof repo, "%s", src);
    else
        return rs_session_error(s, c, c->arg_pos[0], n,
                                "serve: '%s' is neither a model of this session, an .onnx or .plan file nor a repository folder",
                                src);
    bool temp = wrote && !rs_call_str(c, "repo", NULL); /* written into a new /tmp folder */
    if (!rc) rc = start(s, c, &base, repo, temp);
    if (rc && temp && !s->server) rs_serve_repo_remove_temp(repo); /* no server took it */
    return rc;
}
