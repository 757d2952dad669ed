/* Commands that build, describe and store models and data sets: model, data, show, ls, drop, save,
 * load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ckpt/checkpoint.h"
#include "engine/cpu/blas.h"
#include "engine/data/data.h"
#include "engine/data/source.h"
#include "onnx/import.h"
#include "plan/plan.h"
#include "engine/nn/spec.h"
#include "call.h"
#include "repl_log.h"
#include "result.h"
#include "session.h"
#include "wrap.h"

static uint64_t seed_opt(rs_session *s, const rs_call *c)
{
    return rs_call_given(c, "seed") ? (uint64_t)rs_call_int(c, "seed", 0) : s->seed;
}

/* Name checks shared by bindings: a name must be a plain identifier, not a command. */
static int check_name(rs_session *s, const rs_call *c)
{
    const char *n = c->bind;
    /* rebinding a name a background run uses would free what its ranks' results go back into */
    if (rs_session_check_busy(s, c, rs_session_find(s, n), c->bind_pos, strlen(n))) return 1;
    bool ok = (n[0] >= 'a' && n[0] <= 'z') || (n[0] >= 'A' && n[0] <= 'Z') || n[0] == '_';
    for (const char *p = n; *p && ok; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
    if (!ok)
        return rs_session_error(s, c, c->bind_pos, strlen(n), "%s: '%s' is not a name; use letters, digits and _",
                                c->cmd->name, n);
    if (rs_cmd_find(n))
        return rs_session_error(s, c, c->bind_pos, strlen(n), "%s: '%s' is a command; pick another name",
                                c->cmd->name, n);
    return 0;
}

/* `model m = onnx FILE`: a trainable model when the graph is a plain sequence of engine layers,
 * else an inference-only one, which eval and predict run. */
static int model_from_onnx(rs_session *s, const rs_call *c, const char *path, size_t path_pos)
{
    rs_err err = {0};
    rs_onnx_graph *g = NULL;
    if (rs_onnx_load(path, &g, &err)) return rs_session_error(s, c, path_pos, strlen(path), "model: %s", err.msg);
    rs_model *m = NULL;
    rs_err why = {0};
    rs_obj o = {.kind = RS_OBJ_MODEL};
    snprintf(o.name, sizeof o.name, "%s", c->bind);
    bool trains = rs_onnx_to_model(g, c->bind, &m, &why) == RS_OK;
    if (!trains && rs_onnx_to_inference_model(g, c->bind, &m, &err)) {
        rs_onnx_graph_free(g);
        return rs_session_error(s, c, path_pos, strlen(path), "model: %s", err.msg);
    }
    char *packs = g->ninputs > 1 ? rs_onnx_graph_inputs_str(g) : NULL; /* owned here */
    int nin = g->ninputs;
    rs_onnx_graph_free(g);
    o.model = m;
    if (trains) {
        o.spec = rs_model_spec(m);
    } else {
        size_t n = strlen(path) + 8;
        o.spec = malloc(n);
        if (o.spec) snprintf(o.spec, n, "onnx %s", path);
    }
    if (!o.spec || !rs_session_put(s, &o)) {
        rs_model_free(o.model);
        free(o.spec);
        free(packs);
        return rs_session_error(s, c, (size_t)-1, 0, "out of memory");
    }
    if (trains)
        fprintf(s->out, "model %s: imported from %s as %s (%zu parameters): it trains, saves and exports like any model\n",
                c->bind, path, o.spec, rs_model_param_count(m));
    else
        fprintf(s->out, "model %s: imported from %s for inference (%d nodes, input %lld %s, output %lld); it runs "
                        "with eval%s and predict but does not train: %s\n",
                c->bind, path, rs_model_layer_count(m), (long long)rs_shape_numel(rs_model_input_shape(m)),
                rs_model_tokens(m) ? "tokens" : "values", (long long)rs_model_classes(m) * rs_model_rows(m),
                rs_model_tokens(m) ? ", generate" : "", why.msg);
    if (packs) /* what a sample of the model's one input holds, for predict and eval */
        fprintf(s->out, "  its %d inputs are packed into that one, per sample in the file's order: %s\n", nin, packs);
    free(packs);
    return 0;
}

/* What `expect` reads after `model` and `show MODEL` (repl/result.h). */
static void record_model(rs_session *s, const rs_model *m)
{
    rs_result_num(s, "params", (double)rs_model_param_count(m));
    rs_result_num(s, "bytes", 4.0 * (double)rs_model_param_count(m)); /* f32 weights */
    rs_result_num(s, "layers", rs_model_layer_count(m));
    rs_result_num(s, "inputs", (double)rs_shape_numel(rs_model_input_shape(m)));
    if (rs_model_tokens(m)) rs_result_num(s, "vocab", rs_model_vocab(m));
    else rs_result_num(s, "classes", rs_model_classes(m));
}

/* ... and after `data` and `show DATA`. */
static void record_data(rs_session *s, const rs_dataset *t, const rs_dataset *v)
{
    rs_result_num(s, "train", t->n);
    rs_result_num(s, "test", v ? v->n : 0);
    rs_result_num(s, "classes", t->n_classes);
    if (rs_text_vocab_of(t)) rs_result_num(s, "chars", (double)(rs_text_len(t) + rs_text_len(v)));
}

int rs_model_from_plan(rs_session *s, const rs_call *c, const char *path, size_t pos); /* cmd_plan.c */

int rs_cmd_model(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    if (check_name(s, c)) return 1;
    rs_err err = {0};
    /* where it lives: device=, else the session's (`set device=`) */
    rs_device dev = s->device;
    const rs_optval *dv = rs_call_given(c, "device") ? rs_call_opt(c, "device") : NULL;
    if (dv) {
        char stays[96];
        snprintf(stays, sizeof stays, "no model %s was made", c->bind);
        if (rs_repl_device_parse(s, c, "model: device=", dv->text, dv->pos, 7 + strlen(dv->text), stays, &dev)) return 1;
        if (dev.kind != RS_DEV_CPU && (!strncmp(c->rest, "onnx ", 5) || !strncmp(c->rest, "plan ", 5)))
            return rs_session_error(s, c, dv->pos, 7 + strlen(dv->text), "model: device=%s: imported graphs and plans "
                                    "are made on the CPU; `to %s %s` then moves an imported graph", dv->text, c->bind,
                                    dv->text);
    }
    if (!strncmp(c->rest, "onnx ", 5)) {
        const char *p = c->rest + 5;
        while (*p == ' ') p++;
        char path[1024];
        snprintf(path, sizeof path, "%s", p);
        for (size_t n = strlen(path); n && path[n - 1] == ' '; n--) path[n - 1] = 0;
        int rc = model_from_onnx(s, c, path, c->rest_pos + (size_t)(p - c->rest));
        const rs_obj *o = rc ? NULL : rs_session_find(s, c->bind);
        if (o && o->model && s->device.kind != RS_DEV_CPU) {
            /* `set device=` chose another place for new models: say where this one is instead */
            char here[32];
            rs_repl_device_str(s->device, here, sizeof here);
            if (rs_model_inference_only(o->model))
                fprintf(s->out, "%s stays on the CPU (the session's device is %s): an imported graph that only "
                                "runs is CPU code\n", c->bind, here);
            else
                fprintf(s->out, "%s is on the CPU, where imported graphs are made (the session's device is %s); "
                                "`to %s %s` moves it\n", c->bind, here, c->bind, here);
        }
        return rc;
    }
    if (!strncmp(c->rest, "plan ", 5)) {
        const char *p = c->rest + 5;
        while (*p == ' ') p++;
        char path[1024];
        snprintf(path, sizeof path, "%s", p);
        for (size_t n = strlen(path); n && path[n - 1] == ' '; n--) path[n - 1] = 0;
        return rs_model_from_plan(s, c, path, c->rest_pos + (size_t)(p - c->rest));
    }
    size_t pos = (size_t)-1;
    rs_model *m = NULL;
    /* gpt takes its vocabulary from the text it will learn: the newest text data set, else the
     * built-in corpus (what `data t = text` gives). */
    char *spec = NULL;
    const char *text = c->rest;
    if (!strncmp(c->rest, "gpt", 3) && (!c->rest[3] || c->rest[3] == ' ') && !strstr(c->rest, "vocab=")) {
        int vocab = 0;
        const char *from = NULL;
        for (int i = s->nobjs - 1; i >= 0 && !vocab; i--) {
            const rs_obj *o = &s->objs[i];
            const rs_text_vocab *v = o->kind == RS_OBJ_DATA && o->data.train ? rs_text_vocab_of(o->data.train) : NULL;
            if (v) {
                vocab = v->n;
                from = o->name;
            }
        }
        if (!vocab) {
            rs_data_pair tp = {0};
            if (!rs_data_text_builtin(RS_DATA_TEXT_CTX, &tp, &err) && rs_text_vocab_of(tp.train))
                vocab = rs_text_vocab_of(tp.train)->n;
            rs_data_pair_clear(&tp);
        }
        size_t n = strlen(c->rest) + 32;
        spec = malloc(n); /* freed below */
        if (!spec) return rs_session_error(s, c, (size_t)-1, 0, "out of memory");
        snprintf(spec, n, "%s vocab=%d", c->rest, vocab);
        text = spec;
        fprintf(s->out, "gpt: vocab=%d, the distinct bytes of %s\n", vocab,
                from ? from : "the built-in corpus (`data t = text`)");
    }
    rs_status pst = rs_model_parse(text, c->bind, dev, NULL, seed_opt(s, c), &m, &pos, &err);
    free(spec);
    if (pst) {
        size_t at = pos == (size_t)-1 ? c->rest_pos : c->rest_pos + pos;
        size_t len = 1;
        while (c->line[at + len] && c->line[at + len] != ' ' && c->line[at + len] != '(' && c->line[at + len] != '=')
            len++;
        return rs_session_error(s, c, at, len, "model: %s", err.msg);
    }
    rs_obj o = {.kind = RS_OBJ_MODEL, .model = m, .spec = rs_model_spec(m)};
    snprintf(o.name, sizeof o.name, "%s", c->bind);
    if (!rs_session_put(s, &o)) {
        rs_model_free(m);
        free(o.spec);
        return rs_session_error(s, c, (size_t)-1, 0, "out of memory");
    }
    int nl = rs_model_layer_count(m);
    record_model(s, m);
    if (rs_model_tokens(m)) {
        char dv[32] = "";
        fprintf(s->out, "model %s: %d layer%s, %zu parameters, input %lld tokens, vocabulary %d%s%s\n", c->bind, nl,
                nl == 1 ? "" : "s", rs_model_param_count(m), (long long)rs_shape_numel(rs_model_input_shape(m)), rs_model_vocab(m),
                dev.kind != RS_DEV_CPU ? ", on " : "", dev.kind != RS_DEV_CPU ? rs_repl_device_str(dev, dv, sizeof dv) : "");
        return 0;
    }
    char dvs[40] = "", dvn[32];
    if (dev.kind != RS_DEV_CPU) snprintf(dvs, sizeof dvs, ", on %s", rs_repl_device_str(dev, dvn, sizeof dvn));
    fprintf(s->out, "model %s: %d layer%s, %zu parameters, input %lld values, %d classes%s\n", c->bind, nl,
            nl == 1 ? "" : "s", rs_model_param_count(m), (long long)rs_shape_numel(rs_model_input_shape(m)),
            rs_model_classes(m), dvs);
    return 0;
}

/* "digits", "idx a b", ... -> the engine's source string "digits:N", "idx:a,b". */
static int data_source(rs_session *s, const rs_call *c, char *src, size_t n)
{
    char words[8][256];
    int nw = 0;
    const char *p = c->rest;
    while (*p && nw < 8) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ' && *e != '\t') e++;
        snprintf(words[nw++], sizeof words[0], "%.*s", (int)(e - p), p);
        p = e;
    }
    static const char *const kinds[] = {"digits", "fashion", "idx", "cifar", "csv", "text"};
    enum { NKINDS = sizeof kinds / sizeof kinds[0] };
    if (nw == 0)
        return rs_session_error(s, c, c->rest_pos, 1,
                                "data: expected a source: digits, fashion, idx, cifar, csv or text");
    int k = -1;
    for (int i = 0; i < NKINDS; i++)
        if (!strcmp(words[0], kinds[i])) k = i;
    if (k < 0) {
        const char *near = rs_spec_near_miss(words[0], kinds, NKINDS);
        size_t at = (size_t)(strstr(c->line + c->rest_pos, words[0]) - c->line);
        if (near)
            return rs_session_error(s, c, at, strlen(words[0]), "data: unknown source '%s' (did you mean '%s'?)",
                                    words[0], near);
        return rs_session_error(s, c, at, strlen(words[0]),
                                "data: unknown source '%s'; expected digits, fashion, idx, cifar, csv or text",
                                words[0]);
    }
    /* n= is the digits' count and ctx= the text's window: each is refused elsewhere, not ignored */
    const char *wrong = k != 0 && rs_call_given(c, "n") ? "n" : k != 5 && rs_call_given(c, "ctx") ? "ctx" : NULL;
    if (wrong) {
        const rs_optval *v = rs_call_opt(c, wrong);
        return rs_session_error(s, c, v->pos, strlen(wrong) + 1 + strlen(v->text), "data: %s= is for %s, not %s",
                                wrong, *wrong == 'n' ? "digits" : "text", words[0]);
    }
    if (k == 5) {
        long long ctx = rs_call_int(c, "ctx", RS_DATA_TEXT_CTX);
        if (ctx < 1 || ctx > RS_DATA_TEXT_CTX_MAX) {
            const rs_optval *v = rs_call_opt(c, "ctx");
            return rs_session_error(s, c, v->pos, 4 + strlen(v->text),
                                    "data: text ctx=%lld is out of range; use 1..%d (the model's context)", ctx,
                                    RS_DATA_TEXT_CTX_MAX);
        }
        if (nw > 2)
            return rs_session_error(s, c, c->rest_pos, 4, "data: text takes one file, or fortunes, or nothing for "
                                                          "the built-in corpus");
        /* `fortunes` names Debian's package; a file called so is ./fortunes */
        snprintf(src, n, "text:%s,ctx=%lld", nw > 1 ? words[1] : "builtin", ctx);
        return 0;
    }
    if (k == 0) {
        if (nw > 1) return rs_session_error(s, c, c->rest_pos, 6, "data: digits takes n= and seed=, not files");
        long long cnt = rs_call_int(c, "n", 20000);
        if (cnt < 1 || cnt > 10000000) {
            const rs_optval *v = rs_call_opt(c, "n");
            return rs_session_error(s, c, v->pos, 2 + strlen(v->text), "data: digits n=%lld is out of range; use 1..10000000",
                                    cnt);
        }
        snprintf(src, n, "digits:%lld", cnt);
        return 0;
    }
    if (k == 1) {
        snprintf(src, n, nw > 1 ? "fashion:%s" : "fashion", words[1]);
        return 0;
    }
    if ((k == 2 && nw != 3 && nw != 5) || (k >= 3 && nw < 2))
        return rs_session_error(s, c, c->rest_pos, strlen(words[0]), "data: %s needs %s", words[0],
                                k == 2   ? "IMAGES LABELS [TEST_IMAGES TEST_LABELS]"
                                : k == 3 ? "one or more batch files"
                                         : "one file");
    size_t used = (size_t)snprintf(src, n, "%s:", words[0]);
    for (int i = 1; i < nw && used < n; i++) used += (size_t)snprintf(src + used, n - used, i > 1 ? ",%s" : "%s", words[i]);
    return 0;
}

int rs_cmd_data(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    if (check_name(s, c)) return 1;
    char src[2048];
    if (data_source(s, c, src, sizeof src)) return 1;
    rs_obj o = {.kind = RS_OBJ_DATA};
    rs_err err = {0};
    if (rs_data_open(src, seed_opt(s, c), &o.data, &err)) {
        /* Put the caret under the file the message is about, if it names one we were given. */
        size_t at = c->rest_pos, len = 1;
        const char *p = c->rest;
        while (*p) {
            while (*p == ' ') p++;
            const char *e = p;
            while (*e && *e != ' ') e++;
            if (e > p && p != c->rest) {
                char w[512];
                snprintf(w, sizeof w, "%.*s", (int)(e - p), p);
                if (strstr(err.msg, w)) {
                    at = c->rest_pos + (size_t)(p - c->rest);
                    len = (size_t)(e - p);
                    break;
                }
            }
            p = e;
        }
        return rs_session_error(s, c, at, len, "data: %s", err.msg);
    }
    snprintf(o.name, sizeof o.name, "%s", c->bind);
    snprintf(o.source, sizeof o.source, "%.255s", src); /* shown in ls; long file lists are cut */
    o.source_cut = strlen(src) >= sizeof o.source;
    o.data_seed = seed_opt(s, c);
    const rs_dataset *t = o.data.train;
    record_data(s, t, o.data.test);
    if (rs_text_vocab_of(t))
        fprintf(s->out, "data %s: text of %zu bytes, %d distinct; windows of %d: %u train + %u validation (%s)\n",
                c->bind, rs_text_len(t) + rs_text_len(o.data.test), t->n_classes, t->w, t->n, o.data.test->n, src);
    else
        fprintf(s->out, "data %s: %u train + %u test samples of %dx%dx%d, %d classes (%s)\n", c->bind, t->n,
                o.data.test ? o.data.test->n : 0, t->c, t->h, t->w, t->n_classes, src);
    if (!rs_session_put(s, &o)) {
        rs_data_pair_clear(&o.data);
        return rs_session_error(s, c, (size_t)-1, 0, "out of memory");
    }
    return 0;
}

/* A text's vocabulary as a quoted string, with C escapes for what does not print. */
static void show_vocab(rs_session *s, const rs_text_vocab *v)
{
    fputc('"', s->out);
    for (int i = 0; i < v->n; i++) {
        int ch = v->chars[i];
        if (ch == '\n') fputs("\\n", s->out);
        else if (ch == '\t') fputs("\\t", s->out);
        else if (ch == '"' || ch == '\\') fprintf(s->out, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f) fprintf(s->out, "\\x%02x", ch);
        else fputc(ch, s->out);
    }
    fputs("\"\n", s->out);
}

static void show_data(rs_session *s, const rs_obj *o)
{
    const rs_dataset *t = o->data.train, *v = o->data.test;
    fprintf(s->out, "data %s from %s\n", o->name, o->source);
    const rs_text_vocab *voc = rs_text_vocab_of(t);
    if (voc) {
        size_t nt = rs_text_len(t), nv = rs_text_len(v);
        fprintf(s->out, "  text: %zu bytes, %zu train (%s) and %zu validation (%s)\n", nt + nv, nt, t->name, nv,
                v->name);
        fprintf(s->out, "  samples: windows of %d token ids, labels the next %d; %u train, %u validation\n", t->w,
                t->y_len, t->n, v->n);
        fprintf(s->out, "  vocabulary: %d bytes ", voc->n);
        show_vocab(s, voc);
        return;
    }
    fprintf(s->out, "  samples: %u train, %u test; shape %dx%dx%d; %d classes\n", t->n, v ? v->n : 0, t->c, t->h,
            t->w, t->n_classes);
    if (t->y_len != 1) return;
    long counts[64] = {0};
    for (uint32_t i = 0; i < t->n; i++) {
        int32_t y;
        rs_dataset_get(t, i, NULL, &y);
        if (y >= 0 && y < 64) counts[y]++;
    }
    fprintf(s->out, "  training labels:");
    for (int k = 0; k < t->n_classes && k < 64; k++) {
        if (t->class_names) fprintf(s->out, " %s=%ld", t->class_names[k], counts[k]);
        else fprintf(s->out, " %d=%ld", k, counts[k]);
    }
    fputc('\n', s->out);
}

int rs_cmd_show(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    if (!strcmp(c->args[0], "run")) {
        if (c->nargs < 2) return rs_session_error(s, c, c->arg_pos[0], 3, "show run: which run? e.g. show run 1 (see `runs`)");
        char *end;
        long long id = strtoll(c->args[1], &end, 10);
        if (*end || id < 1)
            return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]),
                                    "show run: '%s' is not a run number; `runs` lists them", c->args[1]);
        return rs_log_show_run(s, c, id);
    }
    if (c->nargs > 1) return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "show: one name at a time");
    rs_obj *o = rs_call_lookup(s, c, 0, RS_A_NAME);
    if (!o) return 1;
    if (o->kind == RS_OBJ_DATA) {
        show_data(s, o);
        record_data(s, o->data.train, o->data.test);
        return 0;
    }
    if (o->plan) {
        char *d = rs_plan_describe(o->plan);
        if (d) fputs(d, s->out);
        free(d);
        return 0;
    }
    char *sum = rs_model_summary(o->model);
    record_model(s, o->model);
    fputs(sum, s->out);
    free(sum);
    /* an imported graph that runs for inference only has no spec: it came from its file */
    fprintf(s->out, "%s %s\n", rs_model_inference_only(o->model) ? "from:" : "spec:", o->spec);
    rs_blas_info b;
    rs_blas_get_info(&b);
    /* where the model lives: its buffers and the kernel table it runs on */
    char dv[32];
    rs_device d = rs_model_device(o->model);
    if (d.kind == RS_DEV_CPU)
        fprintf(s->out, "kernels: cpu, threads %d, OpenBLAS %s\n", rs_model_threads(o->model), b.core);
    else
        fprintf(s->out, "kernels: %s; its inputs, labels and outputs pass through host memory (`to %s cpu` moves it "
                "back)\n", rs_repl_device_str(d, dv, sizeof dv), o->name);
    return 0;
}

int rs_cmd_ls(rs_session *s, const rs_call *c)
{
    (void)c;
    if (!s->nobjs) {
        fprintf(s->out, "nothing yet: try `model m = mlp 784-256-10` and `data d = digits`\n");
        return 0;
    }
    /* columns as wide as their longest entry; the spec (or source) last, continued under itself */
    char (*what)[64] = calloc((size_t)s->nobjs, sizeof *what); /* owned here */
    if (!what) return rs_session_error(s, c, (size_t)-1, 0, "ls: out of memory");
    int nw = 4, ww = 4;
    for (int i = 0; i < s->nobjs; i++) {
        const rs_obj *o = &s->objs[i];
        if (o->kind == RS_OBJ_MODEL && o->plan)
            snprintf(what[i], sizeof what[i], "compiled %s plan", rs_plan_prec_name(rs_plan_precision(o->plan)));
        else if (o->kind == RS_OBJ_MODEL && !rs_model_inference_only(o->model)) {
            /* where it lives, once it is not the CPU (`to`, device=) */
            char dv[32] = "";
            if (rs_model_device(o->model).kind != RS_DEV_CPU) rs_model_device_str(o->model, dv, sizeof dv);
            snprintf(what[i], sizeof what[i], "%zu parameters%s%s", rs_model_param_count(o->model), *dv ? " on " : "",
                     dv);
        }
        else if (o->kind == RS_OBJ_MODEL) snprintf(what[i], sizeof what[i], "ONNX inference graph");
        else if (o->data.train->tokens)
            snprintf(what[i], sizeof what[i], "%u+%u windows of %d", o->data.train->n,
                     o->data.test ? o->data.test->n : 0, o->data.train->w);
        else
            snprintf(what[i], sizeof what[i], "%u+%u samples %dx%dx%d", o->data.train->n,
                     o->data.test ? o->data.test->n : 0, o->data.train->c, o->data.train->h, o->data.train->w);
        if ((int)strlen(o->name) > nw) nw = (int)strlen(o->name);
        if ((int)strlen(what[i]) > ww) ww = (int)strlen(what[i]);
    }
    int cols = rs_wrap_cols(s->out), at = 2 + nw + 2 + 5 + 2 + ww + 2;
    for (int i = 0; i < s->nobjs; i++) {
        const rs_obj *o = &s->objs[i];
        fprintf(s->out, "  %-*s  %-5s  %-*s  ", nw, o->name, o->kind == RS_OBJ_MODEL ? "model" : "data", ww, what[i]);
        rs_wrap_fill(s->out, o->kind == RS_OBJ_MODEL ? o->spec : o->source, cols, at, at < cols / 2 ? at : 4);
    }
    free(what);
    return 0;
}

int rs_cmd_drop(rs_session *s, const rs_call *c)
{
    if (rs_session_check_busy(s, c, rs_session_find(s, c->args[0]), c->arg_pos[0], strlen(c->args[0]))) return 1;
    rs_session_drop(s, c->args[0]);
    fprintf(s->out, "dropped %s\n", c->args[0]);
    return 0;
}

int rs_cmd_reset(rs_session *s, const rs_call *c)
{
    rs_obj *o = rs_session_find(s, c->args[0]);
    size_t pos = c->arg_pos[0], len = strlen(c->args[0]);
    if (rs_session_check_busy(s, c, o, pos, len)) return 1;
    if (rs_model_inference_only(o->model))
        return rs_session_error(s, c, pos, len, "reset: %s is an imported ONNX graph: its weights are the file's; "
                                "`model %s = onnx FILE` reads them again", o->name, o->name);
    uint64_t seed = rs_model_seed(o->model);
    rs_model *m = NULL;
    rs_err err = {0};
    if (rs_model_parse(o->spec, o->name, rs_model_device(o->model), NULL, seed, &m, NULL, &err)) /* where it was */
        return rs_session_error(s, c, pos, len, "reset: %s", err.msg);
    rs_model_set_threads(m, s->threads); /* the session's, as `model` gives it (rs_session_put) */
    rs_model_free(o->model);
    o->model = m;
    o->trained_run = 0;
    fprintf(s->out, "reset %s: its initial weights again (seed %llu); the next `train` starts afresh\n", o->name,
            (unsigned long long)seed);
    return 0;
}

int rs_cmd_save(rs_session *s, const rs_call *c)
{
    rs_obj *o = rs_session_find(s, c->args[0]);
    rs_err err = {0};
    if (rs_ckpt_save_model(c->args[1], o->model, &err))
        return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "save: %s", err.msg);
    rs_log_artifact(s, c->args[1], "weights");
    fprintf(s->out, "saved %s (%zu parameters) to %s\n", o->name, rs_model_param_count(o->model), c->args[1]);
    return 0;
}

int rs_cmd_load(rs_session *s, const rs_call *c)
{
    rs_err err = {0};
    rs_obj *o = rs_session_find(s, c->args[0]);
    if (!o && rs_cmd_find(c->args[0]))
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]), "load: '%s' is a command; pick another name",
                                c->args[0]);
    if (o && o->kind != RS_OBJ_MODEL)
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]), "load: %s is a data set, not a model",
                                c->args[0]);
    if (rs_session_check_busy(s, c, o, c->arg_pos[0], strlen(c->args[0]))) return 1;
    if (o && o->plan)
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]),
                                "load: %s is a compiled plan; its weights are in its .plan file", c->args[0]);
    if (o) {
        if (rs_ckpt_load_model(c->args[1], o->model, &err))
            return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "load: %s", err.msg);
        fprintf(s->out, "loaded %s into %s\n", c->args[1], o->name);
        return 0;
    }
    /* A new name: rebuild the model the file was saved from. */
    char *spec = rs_ckpt_read_spec(c->args[1], &err);
    if (!spec) return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "load: %s", err.msg);
    rs_model *m = NULL;
    if (rs_model_parse(spec, c->args[0], s->device, NULL, s->seed, &m, NULL, &err) ||
        rs_ckpt_load_model(c->args[1], m, &err)) {
        rs_model_free(m);
        free(spec);
        return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "load: %s", err.msg);
    }
    rs_obj n = {.kind = RS_OBJ_MODEL, .model = m, .spec = spec};
    snprintf(n.name, sizeof n.name, "%s", c->args[0]);
    rs_session_put(s, &n);
    fprintf(s->out, "loaded %s as model %s: %s\n", c->args[1], c->args[0], spec);
    return 0;
}
