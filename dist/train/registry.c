/* The registry of training strategies (see registry.h): the list, option values checked against their
 * declarations, and the lines a rank reads. The entries live with their strategies; single and dp,
 * which run in the REPL's own process and have no factory, are declared here. */
#include "registry.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adding a strategy: one line here (docs/add-a-strategy.md names the other files). */
static const rs_strategy_def *const all[] = {
    &rs_strategy_single, &rs_strategy_dp, &rs_strategy_ddp, &rs_strategy_fsdp, &rs_strategy_pipeline,
    &rs_strategy_tensor, NULL,
};

const rs_strategy_def rs_strategy_single = {
    .name = "single", .kind = "one process", .about = "one process, one optimizer over the whole model",
    .uses = RS_SUSE_THREADS,
};

const rs_strategy_def rs_strategy_dp = {
    .name = "dp", .kind = "threads as replicas", .about = "nn.DataParallel: replicas as threads of the REPL's process",
    .uses = RS_SUSE_RANKS | RS_SUSE_THREADS,
};

const rs_strategy_def *const *rs_strategy_list(void) { return all; }

int rs_strategy_batch_parts(const rs_strategy_def *d, const rs_strategy_args *a, int world)
{
    if (d->batch_parts) return d->batch_parts(a, world);
    return d->uses & RS_SUSE_WHOLE_BATCH ? 1 : world;
}

const rs_strategy_def *rs_strategy_find(const char *name)
{
    for (int i = 0; name && all[i]; i++)
        if (!strcmp(all[i]->name, name)) return all[i];
    return NULL;
}

const char *rs_strategy_names(char *buf, size_t cap, bool ranks_only)
{
    size_t k = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; all[i]; i++) {
        if (ranks_only && !all[i]->make) continue;
        int n = snprintf(buf + k, cap > k ? cap - k : 0, "%s%s", k ? ", " : "", all[i]->name);
        if (n > 0) k += (size_t)n;
    }
    return buf;
}

const rs_strategy_opt *rs_strategy_opt_find(const rs_strategy_def *d, const char *name, int *index)
{
    for (int i = 0; d && d->opts && d->opts[i].name; i++)
        if (!strcmp(d->opts[i].name, name)) {
            if (index) *index = i;
            return &d->opts[i];
        }
    return NULL;
}

const rs_strategy_def *rs_strategy_opt_owner(const char *name)
{
    for (int i = 0; all[i]; i++)
        if (rs_strategy_opt_find(all[i], name, NULL)) return all[i];
    return NULL;
}

bool rs_strategy_uses(const rs_strategy_def *d, const char *name)
{
    if (!strcmp(name, "ranks")) return d->uses & RS_SUSE_RANKS;
    if (!strcmp(name, "backend") || !strcmp(name, "timeout") || !strcmp(name, "view") ||
        !strcmp(name, "bind")) return d->uses & RS_SUSE_PROCS;
    if (!strcmp(name, "threads")) return d->uses & RS_SUSE_THREADS;
    if (rs_strategy_opt_find(d, name, NULL)) return true;
    return rs_strategy_opt_owner(name) == NULL;
}

/* ---------------------------------------------------------------- values */

static bool parse_num(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || isspace((unsigned char)*s) || *end || errno || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* 25M, 16K, 1G, 4096, 1.5M: bytes, powers of 1024 (an optional B after the letter). */
static bool parse_size(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || s[0] == '-' || end == s || errno || !isfinite(v)) return false;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0, end++; break;
    case 'M': mul = 1024.0 * 1024, end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024, end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end) return false;
    *out = floor(v * mul);
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"on", "true", "yes", "1"}, *const no[] = {"off", "false", "no", "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcmp(s, yes[i])) return *out = true, true;
        if (!strcmp(s, no[i])) return *out = false, true;
    }
    return false;
}

static const char *type_word(rs_sopt_type t)
{
    static const char *const w[] = {"a whole number", "a number", "a size (e.g. 25M)", "on or off", "one of",
                                    "a word"};
    return (unsigned)t <= RS_SOPT_STRING ? w[t] : "?";
}

static void choices_text(const rs_strategy_opt *o, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; o->choices && o->choices[i]; i++) {
        int n = snprintf(buf + k, cap > k ? cap - k : 0, "%s%s", i ? ", " : "", o->choices[i]);
        if (n > 0) k += (size_t)n;
    }
}

static void options_text(const rs_strategy_def *d, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; d->opts && d->opts[i].name; i++) {
        int n = snprintf(buf + k, cap > k ? cap - k : 0, "%s%s", i ? ", " : "", d->opts[i].name);
        if (n > 0) k += (size_t)n;
    }
}

/* Canonical text of value for option o (into out), or an error naming what would work. */
static rs_status canon(const rs_strategy_def *d, const rs_strategy_opt *o, const char *value, char *out,
                       rs_err *err)
{
    double v = 0;
    bool b = false;
    char list[256];
    bool ranged = o->min <= o->max;
    switch (o->type) {
    case RS_SOPT_INT:
        if (!parse_num(value, &v) || v != floor(v) || fabs(v) > 9e15)
            return rs_err_set(err, RS_ERR_ARG, "mode=%s: %s=%s: expected %s", d->name, o->name, value,
                              type_word(o->type));
        if (ranged && (v < o->min || v > o->max))
            return rs_err_set(err, RS_ERR_ARG, "mode=%s: %s must be %.0f..%.0f, got %s", d->name, o->name, o->min,
                              o->max, value);
        snprintf(out, RS_STRATEGY_VAL_MAX, "%lld", (long long)v);
        return RS_OK;
    case RS_SOPT_FLOAT:
        if (!parse_num(value, &v))
            return rs_err_set(err, RS_ERR_ARG, "mode=%s: %s=%s: expected %s", d->name, o->name, value,
                              type_word(o->type));
        if (ranged && (v < o->min || v > o->max))
            return rs_err_set(err, RS_ERR_ARG, "mode=%s: %s must be %g..%g, got %s", d->name, o->name, o->min, o->max,
                              value);
        snprintf(out, RS_STRATEGY_VAL_MAX, "%.17g", v);
        return RS_OK;
    case RS_SOPT_SIZE:
        if (!parse_size(value, &v) || v > 1e18)
            return rs_err_set(err, RS_ERR_ARG, "mode=%s: %s=%s: expected %s", d->name, o->name, value,
                              type_word(o->type));
        if (ranged && (v < o->min || v > o->max))
            return rs_err_set(err, RS_ERR_ARG, "mode=%s: %s must be %.0f..%.0f bytes, got %s", d->name, o->name,
                              o->min, o->max, value);
        snprintf(out, RS_STRATEGY_VAL_MAX, "%llu", (unsigned long long)v);
        return RS_OK;
    case RS_SOPT_BOOL:
        if (!parse_bool(value, &b))
            return rs_err_set(err, RS_ERR_ARG, "mode=%s: %s=%s: expected on or off", d->name, o->name, value);
        snprintf(out, RS_STRATEGY_VAL_MAX, "%d", b ? 1 : 0);
        return RS_OK;
    case RS_SOPT_ENUM:
        for (int i = 0; o->choices && o->choices[i]; i++)
            if (!strcmp(o->choices[i], value)) {
                snprintf(out, RS_STRATEGY_VAL_MAX, "%s", value);
                return RS_OK;
            }
        choices_text(o, list, sizeof list);
        return rs_err_set(err, RS_ERR_ARG, "mode=%s: %s=%s: expected one of %s", d->name, o->name, value, list);
    case RS_SOPT_STRING:
        if (!*value || strlen(value) >= RS_STRATEGY_VAL_MAX || strpbrk(value, " \t\n\"'"))
            return rs_err_set(err, RS_ERR_ARG, "mode=%s: %s='%s': expected a word of at most %d characters", d->name,
                              o->name, value, RS_STRATEGY_VAL_MAX - 1);
        snprintf(out, RS_STRATEGY_VAL_MAX, "%s", value);
        return RS_OK;
    }
    return rs_err_set(err, RS_ERR_ARG, "mode=%s: option %s has no type", d->name, o->name);
}

void rs_strategy_args_init(rs_strategy_args *a, const rs_strategy_def *d)
{
    memset(a, 0, sizeof *a);
    a->def = d;
    for (int i = 0; d && d->opts && d->opts[i].name && i < RS_STRATEGY_MAX_OPTS; i++)
        if (d->opts[i].def && canon(d, &d->opts[i], d->opts[i].def, a->text[i], NULL)) a->text[i][0] = 0;
}

rs_status rs_strategy_args_set(rs_strategy_args *a, const char *key, const char *value, rs_err *err)
{
    const rs_strategy_def *d = a->def;
    int i = -1;
    const rs_strategy_opt *o = d ? rs_strategy_opt_find(d, key, &i) : NULL;
    if (!o || i >= RS_STRATEGY_MAX_OPTS) {
        char list[512];
        const rs_strategy_def *other = rs_strategy_opt_owner(key);
        if (!d) return rs_err_set(err, RS_ERR_ARG, "option %s= given before any mode", key);
        options_text(d, list, sizeof list);
        if (other) {
            char owners[128] = ""; /* every mode that has it */
            size_t k = 0;
            for (int m = 0; all[m]; m++)
                if (rs_strategy_opt_find(all[m], key, NULL))
                    k += (size_t)snprintf(owners + k, k < sizeof owners ? sizeof owners - k : 0, "%smode=%s",
                                          k ? " or " : "", all[m]->name);
            return rs_err_set(err, RS_ERR_ARG, "%s= is an option of %s; this run is mode=%s%s%s%s", key, owners,
                              d->name, list[0] ? " (its options: " : " (which has no options of its own", list, ")");
        }
        return rs_err_set(err, RS_ERR_ARG, "mode=%s has no option '%s'%s%s%s", d->name, key,
                          list[0] ? " (its options: " : " (it has no options of its own", list, ")");
    }
    char text[RS_STRATEGY_VAL_MAX];
    rs_status st = canon(d, o, value, text, err);
    if (st) return st;
    snprintf(a->text[i], sizeof a->text[i], "%s", text);
    a->given[i] = true;
    return RS_OK;
}

/* The value text of option name, "" when unset (which a's mode must have: a misspelt name in a
 * strategy's own code is a bug, caught by the registry's test, which reads every option through these
 * accessors). o, when not NULL, gets the option's definition. The number accessors lean on strto*
 * reading "" as 0. */
static const char *text_of(const rs_strategy_args *a, const char *name, const rs_strategy_opt **o)
{
    int i = -1;
    const rs_strategy_opt *found = a && a->def ? rs_strategy_opt_find(a->def, name, &i) : NULL;
    if (o) *o = found;
    return found && i >= 0 && i < RS_STRATEGY_MAX_OPTS ? a->text[i] : "";
}

bool rs_strategy_given(const rs_strategy_args *a, const char *name)
{
    int i = -1;
    return a && a->def && rs_strategy_opt_find(a->def, name, &i) && i < RS_STRATEGY_MAX_OPTS && a->given[i];
}

long long rs_strategy_int(const rs_strategy_args *a, const char *name)
{
    return strtoll(text_of(a, name, NULL), NULL, 10);
}

double rs_strategy_float(const rs_strategy_args *a, const char *name)
{
    return strtod(text_of(a, name, NULL), NULL);
}

uint64_t rs_strategy_size(const rs_strategy_args *a, const char *name)
{
    return strtoull(text_of(a, name, NULL), NULL, 10);
}

bool rs_strategy_bool(const rs_strategy_args *a, const char *name)
{
    return !strcmp(text_of(a, name, NULL), "1");
}

int rs_strategy_choice(const rs_strategy_args *a, const char *name)
{
    const rs_strategy_opt *o;
    const char *t = text_of(a, name, &o);
    for (int i = 0; o && o->choices && o->choices[i]; i++)
        if (!strcmp(o->choices[i], t)) return i;
    return -1;
}

const char *rs_strategy_str(const rs_strategy_args *a, const char *name)
{
    const char *t = text_of(a, name, NULL);
    return *t ? t : NULL;
}

int rs_strategy_args_lines(const rs_strategy_args *a, void (*line)(void *ud, const char *text), void *ud)
{
    char buf[RS_STRATEGY_VAL_MAX + 80];
    int n = 0;
    if (!a || !a->def) return 0;
    snprintf(buf, sizeof buf, "mode=%s", a->def->name);
    line(ud, buf), n++;
    for (int i = 0; a->def->opts && a->def->opts[i].name && i < RS_STRATEGY_MAX_OPTS; i++) {
        if (!a->given[i]) continue; /* the rank takes the default from the same declaration */
        snprintf(buf, sizeof buf, "%s=%s", a->def->opts[i].name, a->text[i]);
        line(ud, buf), n++;
    }
    return n;
}
