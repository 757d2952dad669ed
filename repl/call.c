/* Command-line parsing against the table (see call.h). */
#include "call.h"

#include <stdlib.h>
#include <string.h>

#include "engine/data/source.h"
#include "lang/value.h"

/* Bump storage inside the call for decoded words; sized from the line, so it cannot run out. */
static char *keep(rs_call *c, size_t *used, size_t cap, const char *text, size_t len)
{
    if (*used + len + 1 > cap) return NULL;
    char *d = c->store + *used;
    memcpy(d, text, len);
    d[len] = '\0';
    *used += len + 1;
    return d;
}

static const char *const *command_names(int *n)
{
    static const char *names[128];
    static int count;
    if (!count)
        for (const rs_cmddef *k = rs_commands; k->name && count < 128; k++) names[count++] = k->name;
    *n = count;
    return names;
}

static int option_index(const rs_cmddef *d, const char *key)
{
    for (int i = 0; d->opts && d->opts[i].name; i++)
        if (!strcmp(d->opts[i].name, key)) return i;
    return -1;
}

/* Parses text as option o's type into v; on failure err holds what was expected. */
static rs_status parse_value(const rs_optdef *o, const char *text, rs_optval *v, rs_err *err)
{
    switch (o->type) {
    case RS_T_INT: {
        int64_t x;
        rs_status st = rs_val_int(text, &x, err);
        v->v.i = x;
        return st;
    }
    case RS_T_FLOAT: return rs_val_float(text, &v->v.f, err);
    case RS_T_SIZE: return rs_val_size(text, &v->v.size, err);
    case RS_T_DURATION: return rs_val_duration(text, &v->v.f, err);
    case RS_T_BOOL: {
        int b;
        rs_status st = rs_val_bool(text, &b, err);
        v->v.b = b != 0;
        return st;
    }
    case RS_T_ENUM: {
        int n = 0;
        while (o->choices[n]) n++;
        return rs_val_enum(text, o->choices, n, &v->v.choice, err);
    }
    case RS_T_STRING:
    case RS_T_PATH: return RS_OK;
    }
    return RS_OK;
}

static int set_option(rs_session *s, rs_call *c, const rs_tokens *t, int i, size_t *used, size_t cap)
{
    const rs_cmddef *d = c->cmd;
    const rs_token *k = &t->tok[i], *val = i + 2 < t->n ? &t->tok[i + 2] : NULL;
    int oi = option_index(d, k->text);
    if (oi < 0) {
        const char *names[RS_MAX_OPTS];
        int n = 0;
        for (int j = 0; d->opts && d->opts[j].name && n < RS_MAX_OPTS; j++) names[n++] = d->opts[j].name;
        const char *near = n ? rs_val_near_miss(k->text, names, n) : NULL;
        if (near)
            return rs_session_error(s, c, k->off, k->len, "%s: unknown option '%s' (did you mean '%s='?)", d->name,
                                    k->text, near);
        if (!n) return rs_session_error(s, c, k->off, k->len, "%s takes no options; `help %s` shows its form", d->name, d->name);
        return rs_session_error(s, c, k->off, k->len, "%s: unknown option '%s'; `help %s` lists its options", d->name,
                                k->text, d->name);
    }
    rs_optval *v = &c->opts[oi];
    if (v->set)
        return rs_session_error(s, c, k->off, k->len, "%s: %s= is given twice", d->name, k->text);
    if (!val || (val->kind != RS_TOK_WORD && val->kind != RS_TOK_STRING))
        return rs_session_error(s, c, t->tok[i + 1].off + 1, 1, "%s: expected a value after '%s='", d->name, k->text);
    rs_err err = {0};
    if (parse_value(&d->opts[oi], val->text, v, &err))
        return rs_session_error(s, c, val->off, val->len, "%s: %s=%s: %s", d->name, k->text, val->text, err.msg);
    v->set = true;
    v->pos = k->off;
    v->text = keep(c, used, cap, val->text, strlen(val->text));
    return 0;
}

int rs_call_parse(rs_session *s, const char *line, const rs_tokens *t, rs_call *c)
{
    memset(c, 0, sizeof *c);
    c->line = line;
    const rs_token *t0 = &t->tok[0];
    if (t0->kind != RS_TOK_WORD)
        return rs_session_line_error(s, line, t0->off, t0->len, "expected a command here; `help` lists them");
    const rs_cmddef *d = rs_cmd_find(t0->text);
    if (!d) {
        int n;
        const char *const *names = command_names(&n);
        const char *near = rs_val_near_miss(t0->text, names, n);
        if (near)
            return rs_session_line_error(s, line, t0->off, t0->len, "unknown command '%s' (did you mean '%s'?)", t0->text,
                                         near);
        return rs_session_line_error(s, line, t0->off, t0->len, "unknown command '%s'; `help` lists them", t0->text);
    }
    c->cmd = d;
    size_t cap = 2 * strlen(line) + 256, used = 0;
    for (const rs_optdef *o = d->opts; o && o->name; o++) cap += strlen(o->def ? o->def : "") + 1;
    c->store = malloc(cap);
    if (!c->store) return rs_session_error(s, c, (size_t)-1, 0, "out of memory");
    char usage[256];
    rs_cmd_usage(d, usage, sizeof usage);
    int i = 1;
    if (!d->binding && d->rest_name) { /* the whole text after the name is the handler's (expect) */
        size_t rlen;
        const char *rest = rs_lex_rest(t, 1, &rlen);
        c->rest = keep(c, &used, cap, rest, rlen);
        c->rest_pos = (size_t)(rest - line);
        return 0;
    }
    if (d->binding) {
        if (t->n < 2 || t->tok[1].kind != RS_TOK_WORD)
            return rs_session_error(s, c, t->n < 2 ? t->end : t->tok[1].off, t->n < 2 ? 1 : t->tok[1].len,
                                    "%s: expected a name: %s", d->name, usage);
        if (t->n < 3 || t->tok[2].kind != RS_TOK_EQUALS)
            return rs_session_error(s, c, t->n < 3 ? t->end : t->tok[2].off, t->n < 3 ? 1 : t->tok[2].len,
                                    "%s: expected '=' after the name: %s", d->name, usage);
        if (t->n < 4)
            return rs_session_error(s, c, t->end, 1, "%s: expected a %s after '=': %s", d->name, d->rest_name, usage);
        snprintf(c->bind, sizeof c->bind, "%s", t->tok[1].text);
        c->bind_pos = t->tok[1].off;
        size_t rlen;
        const char *rest = rs_lex_rest(t, 3, &rlen);
        char *r = keep(c, &used, cap, rest, rlen);
        c->rest = r;
        c->rest_pos = (size_t)(rest - line);
        /* Our own key=value options are taken out of the text (blanked, so offsets still match). */
        for (int j = 3; j + 2 < t->n && d->opts_in_rest; j++) {
            if (t->tok[j].kind != RS_TOK_WORD || t->tok[j + 1].kind != RS_TOK_EQUALS) continue;
            if (option_index(d, t->tok[j].text) < 0) continue;
            if (set_option(s, c, t, j, &used, cap)) return 1;
            size_t from = t->tok[j].off - c->rest_pos, to = t->tok[j + 2].off + t->tok[j + 2].len - c->rest_pos;
            memset(r + from, ' ', to - from);
            j += 2;
        }
        i = t->n;
    }
    for (; i < t->n; i++) {
        const rs_token *k = &t->tok[i];
        if (k->kind == RS_TOK_WORD && i + 1 < t->n && t->tok[i + 1].kind == RS_TOK_EQUALS) {
            if (set_option(s, c, t, i, &used, cap)) return 1;
            i += 2;
            continue;
        }
        /* "->" stands where the command declares it as a keyword (`compile SRC -> FILE.plan`) */
        bool arrow_kw = k->kind == RS_TOK_ARROW && c->nargs < d->nargs && d->args[c->nargs].kind == RS_A_KEYWORD &&
                        !strcmp(d->args[c->nargs].name, "->");
        if (k->kind == RS_TOK_EQUALS || (k->kind == RS_TOK_ARROW && !arrow_kw))
            return rs_session_error(s, c, k->off, k->len, "%s: unexpected '%s': %s", d->name, k->text, usage);
        if (c->nargs >= d->nargs)
            return rs_session_error(s, c, k->off, k->len, "%s: unexpected '%s': %s", d->name, k->text, usage);
        const rs_argdef *a = &d->args[c->nargs];
        if (a->kind == RS_A_KEYWORD && strcmp(k->text, a->name))
            return rs_session_error(s, c, k->off, k->len, "%s: expected '%s' here, not '%s': %s", d->name, a->name,
                                    k->text, usage);
        if (a->kind == RS_A_INT) {
            int64_t x;
            rs_err err = {0};
            if (rs_val_int(k->text, &x, &err))
                return rs_session_error(s, c, k->off, k->len, "%s: %s must be a number: %s", d->name, a->name, err.msg);
        }
        c->arg_pos[c->nargs] = k->off;
        c->args[c->nargs++] = keep(c, &used, cap, k->text, strlen(k->text));
    }
    int required = 0;
    for (int j = 0; j < d->nargs; j++)
        if (!d->args[j].optional) required = j + 1;
    if (c->nargs < required)
        return rs_session_error(s, c, t->end, 1, d->args[c->nargs].kind == RS_A_KEYWORD ? "%s: expected '%s': %s"
                                                                                          : "%s: expected %s: %s",
                                d->name, d->args[c->nargs].name, usage);
    for (int j = 0; j < c->nargs; j++) {
        rs_arg_kind k = d->args[j].kind;
        if (k != RS_A_MODEL && k != RS_A_DATA && k != RS_A_NAME) continue;
        if (rs_arg_is_choice(&d->args[j], c->args[j])) continue; /* `show run 3`, `export session 2 f.ring` */
        if (!rs_call_lookup(s, c, j, k)) return 1;
    }
    /* Defaults, parsed once so handlers read typed values alike. */
    for (int j = 0; d->opts && d->opts[j].name; j++) {
        rs_optval *v = &c->opts[j];
        if (v->set || !d->opts[j].def) continue;
        rs_err err = {0};
        if (parse_value(&d->opts[j], d->opts[j].def, v, &err))
            return rs_session_error(s, c, (size_t)-1, 0, "internal: default %s=%s: %s", d->opts[j].name, d->opts[j].def,
                                    err.msg);
        v->text = d->opts[j].def;
        v->pos = (size_t)-1;
    }
    return 0;
}

bool rs_arg_is_choice(const rs_argdef *a, const char *word)
{
    for (int i = 0; a->choices && a->choices[i]; i++)
        if (!strcmp(a->choices[i], word)) return true;
    return false;
}

void rs_call_clear(rs_call *c)
{
    free(c->store);
    c->store = NULL;
}

rs_obj *rs_call_lookup(rs_session *s, const rs_call *c, int i, rs_arg_kind kind)
{
    const char *name = c->args[i];
    rs_obj *o = rs_session_find(s, name);
    const char *what = kind == RS_A_MODEL ? "model" : kind == RS_A_DATA ? "data set" : "name";
    if (o && kind == RS_A_MODEL && o->kind != RS_OBJ_MODEL) {
        rs_session_error(s, c, c->arg_pos[i], strlen(name), "%s: %s is a data set, not a model", c->cmd->name, name);
        return NULL;
    }
    /* A compiled plan runs (eval, predict) and nothing else. */
    if (o && kind == RS_A_MODEL && o->plan && strcmp(c->cmd->name, "eval") && strcmp(c->cmd->name, "predict")) {
        rs_session_error(s, c, c->arg_pos[i], strlen(name),
                         "%s: %s is a compiled plan: eval and predict run it; %s the model it was compiled from",
                         c->cmd->name, name, c->cmd->name);
        return NULL;
    }
    /* An imported ONNX graph with no engine equivalent runs (eval, predict) but does not train or save. */
    bool gen = o && o->model && rs_model_tokens(o->model) && !strcmp(c->cmd->name, "generate"); /* an exported GPT */
    if (o && kind == RS_A_MODEL && o->model && rs_model_inference_only(o->model) && strcmp(c->cmd->name, "eval") &&
        strcmp(c->cmd->name, "predict") && !gen) {
        rs_session_error(s, c, c->arg_pos[i], strlen(name),
                         "%s: %s is an imported ONNX graph that is not a plain sequence of ringside layers, so it "
                         "only runs: eval, predict%s and show use it",
                         c->cmd->name, name, rs_model_tokens(o->model) ? ", generate" : "");
        return NULL;
    }
    if (o && kind == RS_A_DATA && o->kind != RS_OBJ_DATA) {
        rs_session_error(s, c, c->arg_pos[i], strlen(name), "%s: %s is a model, not a data set", c->cmd->name, name);
        return NULL;
    }
    if (o) return o;
    if (!strcmp(name, "digits") && kind != RS_A_MODEL) {
        /* The built-in data set is always at hand: `train m on digits` works as a first command. */
        rs_obj n = {.kind = RS_OBJ_DATA};
        rs_err err = {0};
        if (rs_data_open("digits:20000", s->seed, &n.data, &err) == RS_OK) {
            snprintf(n.name, sizeof n.name, "digits");
            snprintf(n.source, sizeof n.source, "digits:20000");
            n.data_seed = s->seed;
            fprintf(s->out, "data digits = digits (built in: %u train + %u test samples, seed %llu)\n",
                    n.data.train->n, n.data.test->n, (unsigned long long)s->seed);
            rs_obj *put = rs_session_put(s, &n);
            if (put) return put;
            rs_data_pair_clear(&n.data);
        }
    }
    const char *cands[256];
    int n = 0;
    for (int j = 0; j < s->nobjs && n < 256; j++)
        if (kind == RS_A_NAME || (kind == RS_A_MODEL) == (s->objs[j].kind == RS_OBJ_MODEL)) cands[n++] = s->objs[j].name;
    if (kind != RS_A_MODEL && n < 256) cands[n++] = "digits"; /* the built-in one is a name too (`on digit`) */
    /* A one-letter name is one edit from every other one-letter name: no hint there. */
    const char *near = strlen(name) > 1 ? rs_val_near_miss(name, cands, n) : NULL;
    if (near)
        rs_session_error(s, c, c->arg_pos[i], strlen(name), "%s: unknown %s '%s' (did you mean '%s'?)", c->cmd->name,
                         what, name, near);
    else if (kind == RS_A_DATA)
        rs_session_error(s, c, c->arg_pos[i], strlen(name), "%s: unknown data set '%s'; make one with `data %s = digits`",
                         c->cmd->name, name, name);
    else if (kind == RS_A_MODEL)
        rs_session_error(s, c, c->arg_pos[i], strlen(name),
                         "%s: unknown model '%s'; make one with `model %s = mlp 784-256-10`", c->cmd->name, name, name);
    else
        rs_session_error(s, c, c->arg_pos[i], strlen(name), "%s: unknown name '%s'; `ls` lists the session's names",
                         c->cmd->name, name);
    return NULL;
}

/* ---- option accessors (cmd.h) ---- */

const rs_optval *rs_call_opt(const rs_call *c, const char *name)
{
    int i = option_index(c->cmd, name);
    return i < 0 ? NULL : &c->opts[i];
}

static const rs_optval *have(const rs_call *c, const char *name)
{
    const rs_optval *v = rs_call_opt(c, name);
    return v && v->text ? v : NULL;
}

long long rs_call_int(const rs_call *c, const char *name, long long fallback)
{
    const rs_optval *v = have(c, name);
    return v ? v->v.i : fallback;
}

double rs_call_float(const rs_call *c, const char *name, double fallback)
{
    const rs_optval *v = have(c, name);
    return v ? v->v.f : fallback;
}

bool rs_call_bool(const rs_call *c, const char *name, bool fallback)
{
    const rs_optval *v = have(c, name);
    return v ? v->v.b : fallback;
}

const char *rs_call_str(const rs_call *c, const char *name, const char *fallback)
{
    const rs_optval *v = have(c, name);
    return v ? v->text : fallback;
}

bool rs_call_given(const rs_call *c, const char *name)
{
    const rs_optval *v = rs_call_opt(c, name);
    return v && v->set;
}
