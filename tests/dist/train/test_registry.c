/* The registry of training strategies (dist/train/registry.h): every entry is well formed (names
 * unique, defaults that pass their own checks, ranges that hold their defaults), values are checked
 * against their declarations (type, choices, range) with messages naming the mode, an option of one
 * mode is refused by another (naming the mode that has it), and the lines a rank reads round-trip:
 * what rs_strategy_args_lines writes, rs_strategy_args_set reads back to the same values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/train/registry.h"
#include "tests/rs_test.h"

static void refused(const rs_strategy_def *d, const char *key, const char *val, const char *want)
{
    rs_strategy_args a;
    rs_strategy_args_init(&a, d);
    rs_err e = {0};
    rs_status st = rs_strategy_args_set(&a, key, val, &e);
    RS_CHECK(st == RS_ERR_ARG, "mode=%s %s=%s: accepted (status %d)", d->name, key, val, (int)st);
    RS_CHECK(strstr(e.msg, want) != NULL, "mode=%s %s=%s: message '%s' lacks '%s'", d->name, key, val, e.msg, want);
    printf("refused mode=%s %s=%s: %s\n", d->name, key, val, e.msg);
}

typedef struct lines {
    char v[64][RS_STRATEGY_VAL_MAX + 80];
    int n;
} lines;

static void keep(void *ud, const char *text)
{
    lines *l = ud;
    if (l->n < 64) snprintf(l->v[l->n++], sizeof l->v[0], "%s", text);
}

int main(void)
{
    const rs_strategy_def *const *all = rs_strategy_list();
    int n = 0, with_factory = 0;
    for (; all[n]; n++) {
        const rs_strategy_def *d = all[n];
        RS_CHECK(d->name && d->kind && d->about, "entry %d lacks a name, kind or about line", n);
        RS_CHECK(rs_strategy_find(d->name) == d, "mode %s is not found by its name", d->name);
        with_factory += d->make != NULL;
        if (d->make) RS_CHECK(d->uses & RS_SUSE_PROCS, "mode %s runs on ranks but does not use backend=", d->name);
        for (int j = 0; j < n; j++) RS_CHECK(strcmp(all[j]->name, d->name), "mode %s is listed twice", d->name);
        int k = 0;
        for (const rs_strategy_opt *o = d->opts; o && o->name; o++, k++) {
            RS_CHECK(o->help && o->help[0], "mode %s option %s has no help", d->name, o->name);
            RS_CHECK(o->type != RS_SOPT_ENUM || (o->choices && o->choices[0]), "mode %s: enum %s has no choices",
                     d->name, o->name);
            /* `train` has one option of each name for every mode: modes that share a name (tensor's and
             * pipeline's tp=, fsdp's and pipeline's zero=) share its type, so it parses one way, and the help
             * `train` shows (the first owner's) names every mode that has it */
            const rs_strategy_def *own = rs_strategy_opt_owner(o->name);
            const rs_strategy_opt *first = rs_strategy_opt_find(own, o->name, NULL);
            RS_CHECK(first->type == o->type, "option %s of mode %s has another type in mode %s", o->name, d->name,
                     own->name);
            RS_CHECK(strstr(first->help, d->name) != NULL, "the help of %s= (mode %s's) does not name mode %s",
                     o->name, own->name, d->name);
            static const char *const common[] = {"mode", "ranks", "backend", "timeout", "view", "threads", "batch",
                                                 "accum", "epochs", "steps", "lr", "opt", "seed", NULL};
            for (int c = 0; common[c]; c++)
                RS_CHECK(strcmp(common[c], o->name), "mode %s declares the common option %s", d->name, o->name);
            /* the default passes the option's own check and reads back as itself */
            if (o->def) {
                rs_strategy_args a;
                rs_strategy_args_init(&a, d);
                rs_err e = {0};
                RS_CHECK(!rs_strategy_args_set(&a, o->name, o->def, &e), "mode %s: default %s=%s refused: %s",
                         d->name, o->name, o->def, e.msg);
                rs_strategy_args fresh;
                rs_strategy_args_init(&fresh, d);
                RS_CHECK(!rs_strategy_given(&fresh, o->name), "mode %s: %s counts as given by default", d->name,
                         o->name);
                RS_CHECK(rs_strategy_str(&fresh, o->name) != NULL, "mode %s: %s has a default but no value", d->name,
                         o->name);
            }
        }
        RS_CHECK(k <= RS_STRATEGY_MAX_OPTS, "mode %s has %d options (at most %d)", d->name, k, RS_STRATEGY_MAX_OPTS);
    }
    RS_CHECK(n >= 4 && with_factory >= 2, "%d strategies, %d on ranks", n, with_factory);
    RS_CHECK(rs_strategy_find("nosuch") == NULL && rs_strategy_find(NULL) == NULL, "an unknown mode is found");
    char names[256];
    rs_strategy_names(names, sizeof names, true);
    RS_CHECK(strstr(names, "ddp") && strstr(names, "fsdp") && !strstr(names, "single"),
             "the modes on ranks are listed without single: '%s'", names);

    const rs_strategy_def *ddp = rs_strategy_find("ddp"), *fsdp = rs_strategy_find("fsdp"),
                          *single = rs_strategy_find("single");
    RS_CHECK(ddp && fsdp && single, "ddp, fsdp and single are registered");
    if (!ddp || !fsdp || !single) return 1;

    /* values: types, choices, ranges, and an option the mode does not have */
    refused(fsdp, "zero", "4", "zero must be 1..3");
    refused(fsdp, "zero", "two", "expected a whole number");
    refused(fsdp, "zero", "1.5", "expected a whole number");
    refused(fsdp, "wrap", "unit", "expected one of top, layer, model");
    refused(ddp, "overlap", "maybe", "expected on or off");
    refused(ddp, "bucket", "12Q", "expected a size");
    refused(ddp, "bucket", "16", "bucket must be 1024..");
    refused(ddp, "zero", "2", "zero= is an option of mode=fsdp or mode=pipeline; this run is mode=ddp");
    refused(ddp, "epochz", "2", "mode=ddp has no option 'epochz' (its options: bucket, overlap)");
    refused(single, "bucket", "1M", "bucket= is an option of mode=ddp");

    /* canonical values: what the REPL sends is what the worker reads */
    rs_strategy_args a;
    rs_strategy_args_init(&a, ddp);
    rs_err e = {0};
    RS_CHECK(rs_strategy_size(&a, "bucket") == 25u << 20 && rs_strategy_bool(&a, "overlap"),
             "ddp's defaults: bucket %llu, overlap %d", (unsigned long long)rs_strategy_size(&a, "bucket"),
             rs_strategy_bool(&a, "overlap"));
    RS_CHECK(!rs_strategy_args_set(&a, "bucket", "8K", &e) && !rs_strategy_args_set(&a, "overlap", "off", &e),
             "ddp bucket=8K overlap=off: %s", e.msg);
    RS_CHECK(rs_strategy_size(&a, "bucket") == 8192 && !rs_strategy_bool(&a, "overlap") &&
                 rs_strategy_given(&a, "bucket"),
             "bucket=8K reads %llu", (unsigned long long)rs_strategy_size(&a, "bucket"));
    lines l = {.n = 0};
    int nl = rs_strategy_args_lines(&a, keep, &l);
    RS_CHECK(nl == 3 && !strcmp(l.v[0], "mode=ddp") && !strcmp(l.v[1], "bucket=8192") && !strcmp(l.v[2], "overlap=0"),
             "ddp's lines: %d: %s %s %s", nl, l.v[0], l.v[1], l.v[2]);
    /* and back, as the worker reads them */
    rs_strategy_args b;
    rs_strategy_args_init(&b, rs_strategy_find(l.v[0] + 5));
    for (int i = 1; i < nl; i++) {
        char key[64];
        const char *eq = strchr(l.v[i], '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - l.v[i]), l.v[i]);
        RS_CHECK(!rs_strategy_args_set(&b, key, eq + 1, &e), "line %s read back: %s", l.v[i], e.msg);
    }
    for (int i = 0; i < RS_STRATEGY_MAX_OPTS; i++)
        RS_CHECK(!strcmp(a.text[i], b.text[i]) && a.given[i] == b.given[i], "option %d reads back as '%s', was '%s'",
                 i, b.text[i], a.text[i]);
    /* a default is not sent: the rank takes it from the declaration, and knows it was not given */
    rs_strategy_args_init(&a, ddp);
    l.n = 0;
    RS_CHECK(rs_strategy_args_lines(&a, keep, &l) == 1 && !strcmp(l.v[0], "mode=ddp"), "defaults sent: %d lines", l.n);

    rs_strategy_args_init(&a, fsdp);
    RS_CHECK(rs_strategy_int(&a, "zero") == 3 && rs_strategy_choice(&a, "wrap") == 0 &&
                 rs_strategy_choice(&a, "offload") == 0,
             "fsdp's defaults: zero %lld wrap %d offload %d", rs_strategy_int(&a, "zero"), rs_strategy_choice(&a, "wrap"),
             rs_strategy_choice(&a, "offload"));
    RS_CHECK(!rs_strategy_args_set(&a, "wrap", "model", &e) && rs_strategy_choice(&a, "wrap") == 2,
             "wrap=model is choice 2");

    /* the session log records what a mode reads */
    RS_CHECK(rs_strategy_uses(ddp, "bucket") && !rs_strategy_uses(ddp, "zero") && rs_strategy_uses(fsdp, "zero"),
             "each mode reads its own options only");
    RS_CHECK(rs_strategy_uses(ddp, "backend") && !rs_strategy_uses(single, "backend") &&
                 rs_strategy_uses(single, "threads") && !rs_strategy_uses(ddp, "threads") &&
                 rs_strategy_uses(ddp, "lr"),
             "common options by what the mode uses");
    return rs_test_finish("registry");
}
