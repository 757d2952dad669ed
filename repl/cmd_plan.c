/* Compiled plans at the prompt (plan/plan.h): `compile SRC [precision=] [batch=] [threads=] -> FILE.plan`,
 * `plan show FILE`, `plan bench FILE`, and `model p = plan FILE` (called from cmd_models.c), after
 * which eval and predict run the plan. The compiler's work is plan/'s; this file turns words into
 * calls and prints what compile did. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "call.h"
#include "engine/train/train.h"
#include "plan/plan.h"
#include "repl_log.h"
#include "result.h"
#include "session.h"

static const char *kib(size_t bytes, char *buf, size_t n)
{
    if (bytes >= 10u << 20) snprintf(buf, n, "%.1f MiB", (double)bytes / (1 << 20));
    else snprintf(buf, n, "%.1f KiB", (double)bytes / 1024);
    return buf;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

/* The nodes of the plan with their precision, as compile reports them. */
static void print_layers(rs_session *s, const rs_plan *p)
{
    char *d = rs_plan_describe(p);
    if (!d) return;
    /* the node table is the part between the header lines and the memory line */
    const char *t = strstr(d, "  #");
    const char *end = t ? strstr(t, "\nmemory:") : NULL;
    if (end) end++;
    if (t && end) fprintf(s->out, "%.*s", (int)(end - t), t);
    free(d);
}

/* The compiler's options from the call's words (the calibration set in *cal, borrowed from the
 * session); 0, or the error's status. */
static int read_opts(rs_session *s, const rs_call *c, rs_plan_opts *o, const rs_obj **cal)
{
    *o = rs_plan_opts_default();
    *cal = NULL;
    o->prec = (rs_plan_prec)rs_call_opt(c, "precision")->v.choice;
    o->batch = (int)rs_call_int(c, "batch", 64);
    o->threads = (int)rs_call_int(c, "threads", s->threads);
    o->source = c->args[0];
    o->device = (rs_plan_dev)rs_call_opt(c, "device")->v.choice;
    if (o->device == RS_PLAN_DEV_CUDA && o->prec == RS_PLAN_INT8)
        return rs_session_error(s, c, rs_call_opt(c, "precision")->pos, 10 + strlen(rs_call_opt(c, "precision")->text),
                                "compile: precision=int8 is for device=cpu (oneDNN's s8 kernels with calibration); "
                                "device=cuda compiles precision=fp32 or precision=bf16");
    if (o->batch < 1 || o->batch > 65536)
        return rs_session_error(s, c, rs_call_opt(c, "batch")->pos, 6 + strlen(rs_call_opt(c, "batch")->text),
                                "compile: batch must be 1..65536, got %d", o->batch);
    if (o->threads < 1)
        return rs_session_error(s, c, rs_call_opt(c, "threads")->pos, 8 + strlen(rs_call_opt(c, "threads")->text),
                                "compile: threads must be >= 1, got %d", o->threads);
    if (rs_call_given(c, "calib")) {
        const rs_optval *v = rs_call_opt(c, "calib");
        *cal = rs_session_find(s, v->text);
        if (!*cal || (*cal)->kind != RS_OBJ_DATA)
            return rs_session_error(s, c, v->pos, 6 + strlen(v->text), "compile: calib=%s is not a data set of this session",
                                    v->text);
        o->calib = (*cal)->data.train;
        o->calib_samples = (uint32_t)rs_call_int(c, "calib_n", 512);
    }
    o->calib_method = (rs_plan_calib_method)rs_call_opt(c, "calib_method")->v.choice;
    o->calib_percentile = rs_call_float(c, "calib_pct", 99.99);
    if (!(o->calib_percentile > 0 && o->calib_percentile <= 100))
        return rs_session_error(s, c, rs_call_opt(c, "calib_pct")->pos, 10 + strlen(rs_call_opt(c, "calib_pct")->text),
                                "compile: calib_pct is the percent of |x| kept unclipped, 0 < calib_pct <= 100, got %g",
                                o->calib_percentile);
    if (o->prec == RS_PLAN_INT8 && !*cal)
        return rs_session_error(s, c, rs_call_opt(c, "precision")->pos, 10 + strlen(rs_call_opt(c, "precision")->text),
                                "compile: precision=int8 needs calibration data: calib=DATA (a data set of the session)");
    if (!ends_with(c->args[2], ".plan"))
        return rs_session_error(s, c, c->arg_pos[2], strlen(c->args[2]), "compile: write the plan to a FILE.plan, not '%s'",
                                c->args[2]);
    return 0;
}

/* The model compile reads: a session model (borrowed) or an .onnx file's (*owned, the caller frees
 * it with rs_model_free); 0, or the error's status. */
static int source_model(rs_session *s, const rs_call *c, rs_model **m, rs_model **owned)
{
    const char *src = c->args[0];
    rs_obj *ob = rs_session_find(s, src);
    rs_err err = {0};
    *m = *owned = NULL;
    if (ob && ob->kind == RS_OBJ_MODEL && ob->model) {
        if (rs_session_check_busy(s, c, ob, c->arg_pos[0], strlen(src))) return 1;
        *m = ob->model;
    } else if (ob && ob->kind == RS_OBJ_MODEL) {
        return rs_session_error(s, c, c->arg_pos[0], strlen(src), "compile: %s is a compiled plan already", src);
    } else if (ends_with(src, ".onnx")) {
        if (rs_plan_model_from_onnx(src, "onnx", owned, &err))
            return rs_session_error(s, c, c->arg_pos[0], strlen(src), "compile: %s", err.msg);
        *m = *owned;
    } else {
        return rs_session_error(s, c, c->arg_pos[0], strlen(src),
                                "compile: '%s' is neither a model of this session nor an .onnx file", src);
    }
    return 0;
}

/* What int8 costs: the plan's and the model's accuracy and loss on the calibration set's test part;
 * acc32 < 0 when there is no report. */
typedef struct {
    const rs_dataset *test; /* borrowed from the calibration set */
    double acc32, acc8, l32, l8;
} int8_report;

/* Compiles m (in inference mode, restored after) into *p, measuring int8's cost into *r. */
static rs_status compile_measured(rs_session *s, rs_model *m, const rs_plan_opts *o, const rs_obj *cal, rs_plan **p,
                                  int8_report *r, rs_err *err)
{
    bool was = rs_model_training(m);
    rs_model_set_training(m, false);
    rs_status st = rs_plan_compile(m, o, p, err);
    *r = (int8_report){.acc32 = -1, .acc8 = -1,
                       .test = cal && cal->data.test && cal->data.test->n ? cal->data.test : NULL};
    if (!st && o->prec == RS_PLAN_INT8 && r->test) {
        rs_err e2 = {0};
        if (rs_evaluate(m, r->test, 256, &r->acc32, &r->l32, &e2) || rs_plan_evaluate(*p, r->test, &r->acc8, &r->l8, &e2)) {
            r->acc32 = -1;
            rs_session_warn(s, "compile: no accuracy report: %s", e2.msg);
        }
    }
    rs_model_set_training(m, was);
    return st;
}

/* What compile did, as text and as the command's results. */
static void report(rs_session *s, const rs_call *c, const rs_plan_opts *o, const rs_plan *p, size_t bytes,
                   const int8_report *r)
{
    const char *src = c->args[0], *out = c->args[2];
    rs_plan_stats ps;
    rs_plan_get_stats(p, &ps);
    char b1[32], b2[32], b3[32];
    if (o->device == RS_PLAN_DEV_CUDA) {
        char tgt[128];
        rs_plan_target(p, tgt, sizeof tgt);
        fprintf(s->out, "compile %s -> %s: %s, batch up to %d, for %s (compiled without a GPU; it runs where one is)\n",
                src, out, rs_plan_prec_name(o->prec), o->batch, tgt);
    } else {
        fprintf(s->out, "compile %s -> %s: %s, batch up to %d, %d thread%s\n", src, out, rs_plan_prec_name(o->prec),
                o->batch, o->threads, o->threads == 1 ? "" : "s");
    }
    fprintf(s->out, "nodes: %d before, %d after (%d views removed)\n", ps.nodes_before, ps.nodes_after,
            ps.views_removed);
    for (int i = 0; i < ps.fusions; i++) fprintf(s->out, "  %s\n", rs_plan_fusion(p, i));
    print_layers(s, p);
    fprintf(s->out, "peak activation memory: %s with buffer reuse, %s without (every value its own)\n",
            kib(ps.arena_bytes, b1, sizeof b1), kib(ps.naive_bytes, b2, sizeof b2));
    fprintf(s->out, "weights: %s; plan file: %s; build time %.3f s\n", kib(ps.weight_bytes, b3, sizeof b3),
            kib(bytes, b1, sizeof b1), ps.build_s);
    if (r->acc32 >= 0) {
        fprintf(s->out, "int8 (%s calibration) accuracy on %s (%u samples): %.4f (loss %.4f); the model in fp32: "
                        "%.4f (loss %.4f), %+.2f points\n",
                rs_plan_calib_name(o->calib_method), r->test->name, r->test->n, r->acc8, r->l8, r->acc32, r->l32,
                100 * (r->acc8 - r->acc32));
        rs_result_num(s, "accuracy", r->acc8);
        rs_result_num(s, "fp32_accuracy", r->acc32);
        rs_result_num(s, "accuracy_drop", 100 * (r->acc32 - r->acc8));
    }
    rs_result_num(s, "nodes_before", ps.nodes_before);
    rs_result_num(s, "nodes_after", ps.nodes_after);
    rs_result_num(s, "fusions", ps.fusions);
    rs_result_num(s, "arena_bytes", (double)ps.arena_bytes);
    rs_result_num(s, "naive_bytes", (double)ps.naive_bytes);
    rs_result_num(s, "plan_bytes", (double)bytes);
    rs_result_num(s, "build_s", ps.build_s);
}

int rs_cmd_compile(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    const char *src = c->args[0], *out = c->args[2];
    rs_plan_opts o;
    const rs_obj *cal = NULL;
    rs_model *m = NULL, *owned = NULL;
    int rc = read_opts(s, c, &o, &cal);
    if (!rc) rc = source_model(s, c, &m, &owned);
    if (rc) return rc;
    rs_err err = {0};
    rs_plan *p = NULL; /* owned here */
    int8_report r;
    rs_status st = compile_measured(s, m, &o, cal, &p, &r, &err);
    rs_model_free(owned);
    if (st) return rs_session_error(s, c, c->arg_pos[0], strlen(src), "%s", err.msg);
    uint8_t *buf = NULL;
    size_t bytes = 0;
    /* serialised only to report the file's size */
    if (rs_plan_serialize(p, &buf, &bytes, &err) == RS_OK) free(buf);
    if (rs_plan_save(p, out, &err)) {
        rs_plan_free(p);
        return rs_session_error(s, c, c->arg_pos[2], strlen(out), "compile: %s", err.msg);
    }
    report(s, c, &o, p, bytes, &r);
    rs_log_artifact(s, out, "plan");
    rs_plan_free(p);
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of `runs` runs at batch B (after one warm-up run); with node_med (node_count
 * doubles), each node's median seconds too. */
static int bench_at(rs_plan *p, int B, int runs, double *median, double *node_med, rs_err *err)
{
    size_t n = (size_t)B * (size_t)rs_shape_numel(rs_plan_input_shape(p));
    int nn = rs_plan_node_count(p);
    float *x = calloc(n, sizeof *x); /* zeros: token 0 is in every vocabulary */
    double *t = calloc((size_t)runs, sizeof *t);
    double *nt = node_med ? calloc((size_t)runs * (size_t)nn + (size_t)nn, sizeof *nt) : NULL; /* (runs, nodes) + one run's */
    if (!x || !t || (node_med && !nt)) {
        free(x);
        free(t);
        free(nt);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory"), 1;
    }
    for (size_t i = 0; i < n && !rs_plan_tokens(p); i++) x[i] = (float)(i % 17) * 0.05f;
    const float *out;
    double *one = nt ? nt + (size_t)runs * (size_t)nn : NULL;
    rs_plan_time_nodes(p, one);
    int rc = rs_plan_run(p, x, B, &out, err) != RS_OK;
    for (int r = 0; r < runs && !rc; r++) {
        double t0 = now_s();
        rc = rs_plan_run(p, x, B, &out, err) != RS_OK;
        t[r] = now_s() - t0;
        for (int i = 0; one && i < nn; i++) nt[(size_t)i * (size_t)runs + (size_t)r] = one[i];
    }
    rs_plan_time_nodes(p, NULL);
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    *median = t[runs / 2];
    for (int i = 0; nt && i < nn; i++) {
        qsort(nt + (size_t)i * (size_t)runs, (size_t)runs, sizeof *nt, cmp_d);
        node_med[i] = nt[(size_t)i * (size_t)runs + (size_t)runs / 2];
    }
    free(x);
    free(t);
    free(nt);
    return rc;
}

int rs_cmd_plan(rs_session *s, const rs_call *c)
{
    const char *what = c->args[0];
    if (strcmp(what, "show") && strcmp(what, "bench"))
        return rs_session_error(s, c, c->arg_pos[0], strlen(what), "plan: plan show FILE or plan bench FILE, not '%s'",
                                what);
    if (c->nargs < 2) return rs_session_error(s, c, c->arg_pos[0], strlen(what), "plan %s: which FILE.plan?", what);
    rs_result_begin(s, NULL);
    rs_err err = {0};
    rs_plan *p = NULL;
    /* show reads a plan for a GPU this machine lacks too; bench must run it */
    if ((!strcmp(what, "show") ? rs_plan_inspect : rs_plan_load)(c->args[1], &p, &err))
        return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "plan %s: %s", what, err.msg);
    if (!strcmp(what, "show")) {
        char *d = rs_plan_describe(p);
        if (d) fputs(d, s->out);
        free(d);
        rs_plan_stats ps;
        rs_plan_get_stats(p, &ps);
        rs_result_num(s, "nodes", ps.nodes_after);
        rs_result_num(s, "arena_bytes", (double)ps.arena_bytes);
        rs_result_num(s, "batch", rs_plan_batch(p));
        rs_plan_free(p);
        return 0;
    }
    int threads = (int)rs_call_int(c, "threads", s->threads), runs = (int)rs_call_int(c, "runs", 50);
    if (runs < 1 || threads < 1) {
        rs_plan_free(p);
        return rs_session_error(s, c, (size_t)-1, 0, "plan bench: runs and threads must be >= 1");
    }
    rs_plan_set_threads(p, threads);
    int Bs[2] = {1, rs_plan_batch(p)}, nn = rs_plan_node_count(p);
    /* nodes=on: each node's median beside the run's (the medians need not add up to it) */
    double *node_med = rs_call_bool(c, "nodes", false) ? calloc((size_t)nn + 1, sizeof *node_med) : NULL;
    for (int i = 0; i < (Bs[1] > 1 ? 2 : 1); i++) {
        double med = 0;
        if (bench_at(p, Bs[i], runs, &med, node_med, &err)) {
            rs_plan_free(p);
            free(node_med);
            return rs_session_error(s, c, (size_t)-1, 0, "plan bench: %s", err.msg);
        }
        fprintf(s->out, "plan %s threads=%d batch=%d: median %.4f ms of %d runs, %.0f samples/s\n", c->args[1], threads,
                Bs[i], 1e3 * med, runs, Bs[i] / med);
        for (int j = 0; node_med && j < nn; j++) {
            char label[160];
            rs_plan_node_label(p, j, label, sizeof label);
            fprintf(s->out, "  %8.3f ms  %s\n", 1e3 * node_med[j], label);
        }
        char name[32];
        snprintf(name, sizeof name, "ms.%d", Bs[i]);
        rs_result_num(s, name, 1e3 * med);
    }
    free(node_med);
    rs_plan_free(p);
    return 0;
}

/* `model p = plan FILE`: the plan as a session model that eval and predict run. */
int rs_model_from_plan(rs_session *s, const rs_call *c, const char *path, size_t pos)
{
    rs_err err = {0};
    rs_plan *p = NULL;
    if (rs_plan_load(path, &p, &err)) return rs_session_error(s, c, pos, strlen(path), "model: %s", err.msg);
    rs_plan_set_threads(p, s->threads);
    rs_obj o = {.kind = RS_OBJ_MODEL, .plan = p};
    snprintf(o.name, sizeof o.name, "%s", c->bind);
    size_t n = strlen(path) + 8;
    o.spec = malloc(n);
    if (o.spec) snprintf(o.spec, n, "plan %s", path);
    if (!o.spec || !rs_session_put(s, &o)) {
        rs_plan_free(p);
        free(o.spec);
        return rs_session_error(s, c, (size_t)-1, 0, "out of memory");
    }
    rs_plan_stats ps;
    rs_plan_get_stats(p, &ps);
    fprintf(s->out, "model %s: the %s plan %s (%d nodes, batch up to %d); eval and predict run it\n", c->bind,
            rs_plan_prec_name(rs_plan_precision(p)), path, ps.nodes_after, rs_plan_batch(p));
    return 0;
}
