/* Session state and error reporting (see session.h). */
#include "session.h"

#include "dist/launch/hostfile.h"
#include "engine/core/kernels.h"
#include "onnx/build.h"
#include "plan/plan.h"
#include "result.h"
#include "serve/server.h"
#include "wrap.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

rs_session *rs_session_new(FILE *out)
{
    rs_session *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->out = out;
    s->seed = 1;
    s->source = "tty";
    rs_kctx probe; /* the CPU's default count (OMP_NUM_THREADS or the processors) */
    s->threads = rs_kctx_init(&probe, &rs_cpu_kernels, 0, NULL) ? 1 : probe.threads;
    return s;
}

/* Threads belong to each model's kernel context (imported graphs are models too); the session's setting is
 * what they get. */
static void obj_threads(rs_obj *o, int threads)
{
    if (o->kind != RS_OBJ_MODEL) return;
    if (o->model) rs_model_set_threads(o->model, threads);
    if (o->plan) rs_plan_set_threads(o->plan, threads);
}

void rs_session_set_threads(rs_session *s, int threads)
{
    s->threads = threads;
    for (int i = 0; i < s->nobjs; i++) obj_threads(&s->objs[i], threads);
}

static void free_obj(rs_obj *o)
{
    rs_model_free(o->model);
    rs_plan_free(o->plan);
    free(o->spec);
    rs_data_pair_clear(&o->data);
    memset(o, 0, sizeof *o);
}

void rs_session_free(rs_session *s)
{
    if (!s) return;
    for (int i = 0; i < s->nobjs; i++) free_obj(&s->objs[i]);
    free(s->objs);
    rs_onnx_builder_free(s->onnx_builder);
    rs_results_free(s->results);
    rs_serve_stop(s->server);
    rs_hostfile_clear(s->launch);
    free(s->launch);
    free(s);
}

rs_obj *rs_session_find(rs_session *s, const char *name)
{
    for (int i = 0; i < s->nobjs; i++)
        if (!strcmp(s->objs[i].name, name)) return &s->objs[i];
    return NULL;
}

rs_obj *rs_session_put(rs_session *s, const rs_obj *o)
{
    rs_obj *slot = rs_session_find(s, o->name);
    if (slot) {
        free_obj(slot);
    } else {
        if (s->nobjs == s->cap) {
            int cap = s->cap ? 2 * s->cap : 8;
            rs_obj *n = realloc(s->objs, (size_t)cap * sizeof *n);
            if (!n) return NULL;
            s->objs = n;
            s->cap = cap;
        }
        slot = &s->objs[s->nobjs++];
    }
    *slot = *o;
    obj_threads(slot, s->threads);
    return slot;
}

bool rs_session_drop(rs_session *s, const char *name)
{
    rs_obj *o = rs_session_find(s, name);
    if (!o) return false;
    free_obj(o);
    int i = (int)(o - s->objs);
    memmove(&s->objs[i], &s->objs[i + 1], (size_t)(s->nobjs - i - 1) * sizeof *o);
    s->nobjs--;
    return true;
}

int rs_session_check_busy(rs_session *s, const rs_call *c, const rs_obj *o, size_t pos, size_t len)
{
    if (!o || o->busy_run <= 0) return 0;
    return rs_session_error(s, c, pos, len,
                            "%s: %s is in use by run %lld, which is still going in the background; wait for its end "
                            "(`jobs` lists runs in progress) or stop it with `jobs stop=%lld`",
                            c && c->cmd ? c->cmd->name : "ringside", o->name, (long long)o->busy_run,
                            (long long)o->busy_run);
}

const char *rs_sty(const rs_session *s, const char *code) { return s->color ? code : ""; }

static void vreport(rs_session *s, const char *line, size_t pos, size_t len, const char *fmt, va_list ap)
{
    /* GCC with -fsanitize=undefined otherwise "finds" a NULL format on an inlined path. */
    if (!fmt) fmt = "(no message)";
    FILE *f = s->err ? s->err : s->out;
    fflush(s->out); /* what came before the error is printed before it, merged or not */
    if (s->where_file) fprintf(f, "%s:%d: ", s->where_file, s->where_line);
    fprintf(f, "%serror:%s ", rs_sty(s, "\033[1;31m"), rs_sty(s, "\033[0m"));
    va_list copy;
    va_copy(copy, ap);
    vsnprintf(s->last_error, sizeof s->last_error, fmt, copy);
    va_end(copy);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    if (line && pos != (size_t)-1) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        if (pos > n) pos = n;
        if (len == 0) len = 1;
        if (pos + len > n + 1) len = n + 1 - pos;
        /* A line wider than the terminal shows the part around the caret, cut with "…" at either end:
         * wrapped, the caret would no longer stand under what it points at. */
        size_t from = 0, to = n;
        int room = rs_wrap_cols(f) - 4;
        if (rs_wrap_text_width(line, n) > room + 2) {
            from = pos > (size_t)(room / 3) ? pos - (size_t)(room / 3) : 0;
            while (from > 0 && ((unsigned char)line[from] & 0xC0) == 0x80) from--;
            to = from + rs_wrap_prefix(line + from, n - from, room);
            if (pos + len > to + 1) len = to >= pos ? to - pos + 1 : 1;
        }
        fprintf(f, "  %s%.*s%s\n  %s", from ? "\xe2\x80\xa6" : "", (int)(to - from), line + from, to < n ? "\xe2\x80\xa6" : "",
                from ? " " : "");
        /* Keep tabs as tabs so the caret lines up under them. */
        for (size_t i = from; i < pos; i++)
            if (((unsigned char)line[i] & 0xC0) != 0x80) fputc(line[i] == '\t' ? '\t' : ' ', f);
        fputs(rs_sty(s, "\033[1;31m"), f);
        for (size_t i = 0; i < len; i++) fputc('^', f);
        fputs(rs_sty(s, "\033[0m"), f);
        fputc('\n', f);
    }
    fflush(f);
    s->errors++;
}

int rs_session_error(rs_session *s, const rs_call *c, size_t pos, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(s, c ? c->line : NULL, pos, len, fmt, ap);
    va_end(ap);
    return 1;
}

int rs_session_line_error(rs_session *s, const char *line, size_t pos, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(s, line, pos, len, fmt, ap);
    va_end(ap);
    return 1;
}

void rs_session_warn(rs_session *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    FILE *f = s->err ? s->err : s->out;
    fflush(s->out);
    fprintf(f, "%swarning:%s ", rs_sty(s, "\033[1;33m"), rs_sty(s, "\033[0m"));
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
    va_end(ap);
}
