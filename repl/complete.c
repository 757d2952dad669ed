/* Tab completion, generated from the command table (cmd.h): what may stand at the cursor is read off
 * the command's declaration — its positional arguments (kind, keyword, choices), its options (names,
 * then an enum's choices, on/off, files), a binding's forms (`data x = idx FILE...`). No readline
 * here: interactive.c hands the candidates to readline, and tests can call this directly. */
#include "complete.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "repl.h"
#include "result.h"
#include "session.h"
#include "tutorials.h"

static void add(rs_compl *o, const char *text, const char *pre, const char *cand, const char *suffix)
{
    size_t tl = strlen(text), pl = strlen(pre);
    /* the candidate is pre+cand; it must extend text */
    if (tl <= pl ? strncmp(pre, text, tl) : (strncmp(pre, text, pl) || strncmp(cand, text + pl, tl - pl))) return;
    char **n = realloc(o->words, (size_t)(o->n + 1) * sizeof *n);
    if (!n) return;
    o->words = n;
    size_t len = pl + strlen(cand) + strlen(suffix) + 1;
    char *w = malloc(len);
    if (!w) return;
    snprintf(w, len, "%s%s%s", pre, cand, suffix);
    o->words[o->n++] = w;
}

static void add_choices(rs_compl *o, const char *text, const char *pre, const char *const *ch, const char *suffix)
{
    for (int i = 0; ch && ch[i]; i++) add(o, text, pre, ch[i], strchr(ch[i], '(') ? "" : suffix);
}

static void want_files(rs_compl *o, const char *pre, const char *const *exts)
{
    o->files = true;
    o->exts = exts;
    snprintf(o->file_pre, sizeof o->file_pre, "%s", pre);
}

static void add_names(rs_compl *o, const rs_session *s, const char *text, rs_arg_kind kind)
{
    for (int i = 0; s && i < s->nobjs; i++) {
        const rs_obj *b = &s->objs[i];
        if (kind == RS_A_NAME || (kind == RS_A_MODEL) == (b->kind == RS_OBJ_MODEL)) add(o, text, "", b->name, " ");
    }
}

static void add_option_names(rs_compl *o, const rs_cmddef *c, const char *text)
{
    for (const rs_optdef *d = c->opts; d && d->name; d++) add(o, text, "", d->name, "=");
}

/* key=VALUE: the values option key takes. */
static void option_value(rs_compl *o, const rs_cmddef *c, const char *text, const char *eq)
{
    char pre[80];
    snprintf(pre, sizeof pre, "%.*s", (int)(eq - text + 1), text);
    for (const rs_optdef *d = c->opts; d && d->name; d++) {
        if (strlen(d->name) != (size_t)(eq - text) || strncmp(d->name, text, (size_t)(eq - text))) continue;
        static const char *const onoff[] = {"on", "off", NULL};
        if (d->type == RS_T_ENUM) add_choices(o, text, pre, d->choices, " ");
        else if (d->type == RS_T_BOOL) add_choices(o, text, pre, onoff, " ");
        else if (d->type == RS_T_PATH) want_files(o, pre, NULL);
    }
}

/* One positional argument. */
static void argument(rs_compl *o, const rs_session *s, const rs_argdef *a, const char *text)
{
    if (a->kind == RS_A_KEYWORD) add(o, text, "", a->name, " ");
    add_choices(o, text, "", a->choices, " ");
    if (a->kind == RS_A_MODEL || a->kind == RS_A_DATA || a->kind == RS_A_NAME) add_names(o, s, text, a->kind);
    if (a->kind == RS_A_COMMAND)
        for (const rs_cmddef *k = rs_commands; k->name; k++) add(o, text, "", k->name, " ");
    if (a->kind == RS_A_PATH) want_files(o, "", a->exts);
    if (a->kind == RS_A_TUTORIAL) {
        rs_tutorial *t;
        int n = rs_tutorials_list(rs_repl_tutorial_dir(), &t);
        for (int i = 0; i < n; i++) add(o, text, "", t[i].name, " ");
        free(t);
        if (strchr(text, '/') || strchr(text, '.')) want_files(o, "", a->exts); /* a script of one's own */
    }
}

/* `expect ...`: the names the last result has (each once), and `rank` to start a condition. */
static void result_names(rs_compl *o, const rs_session *s, const char *text, int nw)
{
    if (nw == 1) add(o, text, "", "rank", " ");
    const rs_results *r = s ? s->results : NULL;
    for (int i = 0; r && i < r->n; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(r->vals[j].name, r->vals[i].name);
        if (!seen) add(o, text, "", r->vals[i].name, " ");
    }
}

/* The text after `NAME =`: a form's word first, then what that form takes. */
static void binding_rest(rs_compl *o, const rs_cmddef *c, char words[][64], int nw, const char *text)
{
    if (nw == 3) {
        for (const rs_formdef *f = c->forms; f && f->word; f++) add(o, text, "", f->word, " ");
    } else {
        for (const rs_formdef *f = c->forms; f && f->word; f++) {
            if (strcmp(f->word, words[3])) continue;
            if (f->then == RS_A_PATH) want_files(o, "", f->exts);
            add_choices(o, text, "", f->words_fn ? f->words_fn() : f->words, " ");
        }
    }
    if (c->opts_in_rest) add_option_names(o, c, text);
}

int rs_complete(const rs_session *s, const char *line, int start, int end, rs_compl *o)
{
    memset(o, 0, sizeof *o);
    /* The words before the cursor's word (which runs from start to the next blank). */
    char words[32][64];
    int nw = 0;
    for (int i = 0; i < start && nw < 32;) {
        while (i < start && (line[i] == ' ' || line[i] == '\t')) i++;
        if (i >= start) break;
        int b = i;
        while (i < start && line[i] != ' ' && line[i] != '\t') i++;
        snprintf(words[nw++], sizeof words[0], "%.*s", i - b, line + b);
    }
    char text[256];
    snprintf(text, sizeof text, "%.*s", end - start, line + start);

    if (nw == 0) {
        for (const rs_cmddef *k = rs_commands; k->name; k++) add(o, text, "", k->name, " ");
        return o->n;
    }
    const rs_cmddef *c = rs_cmd_find(words[0]);
    if (!c) return 0;
    if (!c->binding && c->rest_name) {
        if (!strcmp(c->name, "plot")) { /* plot N M ... -> FILE.png|.svg */
            static const char *const pictures[] = {".png", ".svg", NULL};
            if (nw >= 2 && !strcmp(words[nw - 1], "->")) want_files(o, "", pictures);
            else if (nw >= 2) add(o, text, "", "->", " ");
            return o->n;
        }
        result_names(o, s, text, nw);
        return o->n;
    }
    const char *eq = strchr(text, '=');
    if (eq && eq > text) {
        option_value(o, c, text, eq);
        return o->n;
    }
    if (c->binding) {
        if (nw >= 3 && !strcmp(words[2], "=")) binding_rest(o, c, words, nw, text);
        return o->n;
    }
    int argi = 0; /* positional words so far: an option is one word holding '=' */
    for (int i = 1; i < nw; i++)
        if (!strchr(words[i], '=')) argi++;
    int required = 0;
    for (int j = 0; j < c->nargs; j++)
        if (!c->args[j].optional) required = j + 1;
    if (argi < c->nargs) argument(o, s, &c->args[argi], text);
    if (argi >= required || (!o->n && !o->files)) add_option_names(o, c, text);
    return o->n;
}

void rs_compl_clear(rs_compl *o)
{
    for (int i = 0; i < o->n; i++) free(o->words[i]);
    free(o->words);
    memset(o, 0, sizeof *o);
}
