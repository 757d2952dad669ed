/* ONNX at the prompt: `export m FILE.onnx`, `onnx show|check FILE`, and building a graph by hand
 * (`onnx new`, `onnx input`, `onnx output`, `onnx init`, `onnx node`, `onnx save`) for the lesson
 * that builds a one-node Gemm graph. The format work is onnx/'s; this file only turns words into calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "lang/value.h"
#include "onnx/build.h"
#include "onnx/export.h"
#include "onnx/inspect.h"
#include "repl_log.h"
#include "result.h"
#include "session.h"

int rs_cmd_export_onnx(rs_session *s, const rs_call *c)
{
    if (c->nargs != 2) {
        static const char *const session[] = {"session"};
        bool near = rs_val_near_miss(c->args[0], session, 1) != NULL;
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]),
                                "export: %sexport MODEL FILE.onnx, or export session N FILE.ring",
                                near ? "did you mean 'session'? " : "");
    }
    rs_obj *m = rs_call_lookup(s, c, 0, RS_A_MODEL);
    if (!m) return 1;
    rs_onnx_export_opts o = {.opset = (int)rs_call_int(c, "opset", RS_ONNX_OPSET_DEFAULT),
                             .softmax = rs_call_bool(c, "softmax", false), .producer_version = RS_VERSION};
    rs_err err = {0};
    if (o.opset < RS_ONNX_OPSET_MIN || o.opset > RS_ONNX_OPSET_MAX) {
        const rs_optval *v = rs_call_opt(c, "opset");
        return rs_session_error(s, c, v->pos, 6 + strlen(v->text), "export: opset %d is not one ringside writes; use %d..%d",
                                o.opset, RS_ONNX_OPSET_MIN, RS_ONNX_OPSET_MAX);
    }
    if (rs_onnx_export_ex(m->model, c->args[1], &o, &err))
        return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "export: %s", err.msg);
    int findings = 0;
    FILE *null = fopen("/dev/null", "w");
    rs_status st = rs_onnx_check(c->args[1], null ? null : s->out, &findings, &err);
    if (null) fclose(null);
    fprintf(s->out, "exported %s to %s (opset %d, %s output%s)\n", m->name, c->args[1], o.opset,
            o.softmax ? "probs" : "logits", !st && findings == 0 ? "; onnx check: ok" : "");
    if (!st && findings) fprintf(s->out, "warning: `onnx check %s` has %d findings\n", c->args[1], findings);
    rs_log_artifact(s, c->args[1], "onnx");
    return 0;
}

static rs_onnx_builder **builder(rs_session *s) { return (rs_onnx_builder **)&s->onnx_builder; }

static int need_builder(rs_session *s, const rs_call *c)
{
    if (*builder(s)) return 0;
    return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]),
                            "onnx %s: no graph is being built; start one with `onnx new NAME`", c->args[0]);
}

/* "X,W,B" -> up to 16 names in buf (owned by the caller). */
static int split_names(const char *text, char names[16][64], const char **out)
{
    int n = 0;
    const char *p = text;
    while (*p && n < 16) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len >= 64) len = 63;
        memcpy(names[n], p, len);
        names[n][len] = 0;
        out[n] = names[n];
        n++;
        if (!e) break;
        p = e + 1;
    }
    return n;
}

static int onnx_shape_arg(rs_session *s, const rs_call *c, int i, rs_onnx_ushape *sh)
{
    rs_err err = {0};
    if (c->nargs <= i)
        return rs_session_error(s, c, (size_t)-1, 0, "onnx %s: give a shape such as N,4 (N: a symbolic batch)", c->args[0]);
    if (rs_onnx_ushape_parse(c->args[i], sh, &err))
        return rs_session_error(s, c, c->arg_pos[i], strlen(c->args[i]), "onnx %s: %s", c->args[0], err.msg);
    return 0;
}

/* What `expect` reads after show, check and save (docs/repl.md): the counts `onnx show` prints.
 * The file was just read or written, so a second read failing only leaves the result empty. */
static void record_file(rs_session *s, const char *path, int findings)
{
    Onnx__ModelProto *m = NULL;
    rs_err err = {0};
    if (rs_onnx_model_load(path, &m, &err)) return;
    rs_onnx_summary o;
    rs_onnx_summarize(m, &o);
    onnx__model_proto__free_unpacked(m, NULL);
    rs_result_num(s, "inputs", (double)o.inputs);
    rs_result_num(s, "outputs", (double)o.outputs);
    rs_result_num(s, "initializers", (double)o.initializers);
    rs_result_num(s, "values", (double)o.values);
    rs_result_num(s, "bytes", (double)o.bytes);
    rs_result_num(s, "nodes", (double)o.nodes);
    rs_result_num(s, "opset", (double)o.opset);
    rs_result_num(s, "ir_version", (double)o.ir_version);
    if (findings >= 0) rs_result_num(s, "findings", findings);
}

int rs_cmd_onnx(rs_session *s, const rs_call *c)
{
    const char *what = c->args[0];
    rs_err err = {0};
    if (!strcmp(what, "show") || !strcmp(what, "check") || !strcmp(what, "save")) rs_result_begin(s, NULL);
    if (!strcmp(what, "show") || !strcmp(what, "check")) {
        if (c->nargs < 2) return rs_session_error(s, c, (size_t)-1, 0, "onnx %s: which file?", what);
        if (!strcmp(what, "show")) {
            if (rs_onnx_show(c->args[1], s->out, &err))
                return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "onnx show: %s", err.msg);
            record_file(s, c->args[1], -1);
            return 0;
        }
        int findings = 0;
        if (rs_onnx_check(c->args[1], s->out, &findings, &err))
            return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "onnx check: %s", err.msg);
        record_file(s, c->args[1], findings);
        return findings ? rs_session_error(s, c, (size_t)-1, 0, "onnx check: %d findings in %s", findings, c->args[1])
                        : 0;
    }
    if (!strcmp(what, "new")) {
        const char *name = c->nargs > 1 ? c->args[1] : "graph";
        rs_onnx_builder_free(*builder(s));
        *builder(s) = rs_onnx_builder_new(name);
        if (!*builder(s)) return rs_session_error(s, c, (size_t)-1, 0, "onnx new: out of memory");
        fprintf(s->out, "building graph %s: add `onnx input`, `onnx init`, `onnx node`, `onnx output`, then `onnx save`\n",
                name);
        return 0;
    }
    if (need_builder(s, c)) return 1;
    rs_onnx_builder *b = *builder(s);
    int dtype = rs_call_given(c, "dtype") ? rs_onnx_dtype_parse(rs_call_str(c, "dtype", "float")) : RS_ONNX_FLOAT;
    if (!dtype) {
        const rs_optval *v = rs_call_opt(c, "dtype");
        return rs_session_error(s, c, v->pos, 6 + strlen(v->text),
                                "onnx %s: unknown element type '%s'; try float, double, int64, int32", what, v->text);
    }
    if (!strcmp(what, "input") || !strcmp(what, "output") || !strcmp(what, "init")) {
        if (c->nargs < 2) return rs_session_error(s, c, (size_t)-1, 0, "onnx %s: give a name and a shape", what);
        rs_onnx_ushape sh;
        if (onnx_shape_arg(s, c, 2, &sh)) return 1;
        rs_status st;
        if (!strcmp(what, "input")) st = rs_onnx_builder_input_shape(b, c->args[1], dtype, &sh, &err);
        else if (!strcmp(what, "output")) st = rs_onnx_builder_output_shape(b, c->args[1], dtype, &sh, &err);
        else {
            for (int i = 0; i < sh.ndim; i++)
                if (sh.d[i] < 0)
                    return rs_session_error(s, c, c->arg_pos[2], strlen(c->args[2]),
                                            "onnx init: an initializer needs every dimension as a number");
            st = rs_onnx_builder_initializer(b, c->args[1], sh.ndim, sh.d, NULL,
                                             (uint64_t)rs_call_int(c, "seed", (long long)s->seed), &err);
        }
        if (st) return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "onnx %s: %s", what, err.msg);
        fprintf(s->out, "%s %s [%s]\n", what, c->args[1], c->args[2]);
        return 0;
    }
    if (!strcmp(what, "node")) {
        if (c->nargs < 4)
            return rs_session_error(s, c, (size_t)-1, 0,
                                    "onnx node: OP INPUTS OUTPUTS [\"ATTRS\"], e.g. onnx node Gemm X,W,B Y \"transB=1\"");
        char in[16][64], out[16][64];
        const char *ins[16], *outs[16];
        int ni = split_names(c->args[2], in, ins), no = split_names(c->args[3], out, outs);
        const char *attrs = c->nargs > 4 ? c->args[4] : "";
        if (rs_onnx_builder_node(b, c->args[1], ni, ins, no, outs, attrs, &err))
            return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "onnx node: %s", err.msg);
        fprintf(s->out, "node %d: %s(%s) -> %s%s%s\n", rs_onnx_builder_node_count(b), c->args[1], c->args[2],
                c->args[3], *attrs ? "  " : "", attrs);
        return 0;
    }
    if (!strcmp(what, "save")) {
        if (c->nargs < 2) return rs_session_error(s, c, (size_t)-1, 0, "onnx save: which file?");
        int opset = (int)rs_call_int(c, "opset", RS_ONNX_OPSET_DEFAULT);
        if (rs_onnx_builder_save(b, c->args[1], opset, &err))
            return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "onnx save: %s", err.msg);
        int findings = 0;
        fprintf(s->out, "saved %s (opset %d)\n", c->args[1], opset);
        rs_log_artifact(s, c->args[1], "onnx");
        rs_status st = rs_onnx_check(c->args[1], s->out, &findings, &err);
        record_file(s, c->args[1], st ? -1 : findings);
        if (!st && findings)
            return rs_session_error(s, c, (size_t)-1, 0, "onnx save: the file has %d findings (above)", findings);
        return 0;
    }
    static const char *const subs[] = {"show", "check", "new", "input", "output", "init", "node", "save"};
    const char *near = rs_val_near_miss(what, subs, 8);
    return rs_session_error(s, c, c->arg_pos[0], strlen(what), "onnx: '%s' is not one of show, check, new, input, output, "
                            "init, node, save%s%s%s", what, near ? " (did you mean '" : "", near ? near : "",
                            near ? "'?)" : "");
}
