/* DeepSpeed's resource filter (see hostfile.h, rs_hostfile_select): parse_resource_filter and the
 * --num_nodes / --num_gpus steps of deepspeed/launcher/runner.py's main, with their messages. Each host's
 * chosen slots are a set of slot numbers while the filter runs; only their count survives it. */
#define _GNU_SOURCE
#include "dist/launch/hostfile.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct chosen {
    unsigned char **on; /* (n) owned: host i's slot s is chosen when on[i][s]; NULL: none of its slots */
    int n;
} chosen;

static void chosen_free(chosen *c)
{
    for (int i = 0; c->on && i < c->n; i++) free(c->on[i]);
    free(c->on);
}

static int find_host(const rs_hostfile *h, const char *name, size_t len)
{
    for (int i = 0; i < h->n; i++)
        if (strlen(h->hosts[i].name) == len && !strncmp(h->hosts[i].name, name, len)) return i;
    return -1;
}

/* Host i's slot set, made (all chosen when `all`, else none) the first time it is needed. */
static unsigned char *slots_of(chosen *c, const rs_hostfile *h, int i, int all)
{
    if (!c->on[i]) {
        c->on[i] = malloc((size_t)h->hosts[i].slots + 1); /* c's */
        if (c->on[i]) memset(c->on[i], all, (size_t)h->hosts[i].slots + 1);
    }
    return c->on[i];
}

/* One NODE_SPEC of an include (inc) or exclude string applied to c. */
static rs_status node_spec(chosen *c, const rs_hostfile *h, const char *spec, size_t len, int inc, rs_err *err)
{
    const char *colon = memchr(spec, ':', len);
    size_t hl = colon ? (size_t)(colon - spec) : len;
    if (colon && memchr(colon + 1, ':', len - hl - 1))
        return rs_err_set(err, RS_ERR_ARG, "'%.*s': too many values to unpack (expected 2): one ':' between a host "
                          "and its slots", (int)len, spec);
    int i = find_host(h, spec, hl);
    if (i < 0) return rs_err_set(err, RS_ERR_ARG, "Hostname '%.*s' not found in hostfile", (int)hl, spec);
    if (!colon) { /* the whole host: all its slots, or none */
        free(c->on[i]);
        c->on[i] = NULL;
        return slots_of(c, h, i, inc) ? RS_OK : rs_err_set(err, RS_ERR_NOMEM, "hostfile: out of memory");
    }
    /* DeepSpeed checks every slot before using any; an include replaces the host's list */
    const char *end = spec + len;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && inc) {
            free(c->on[i]);
            c->on[i] = NULL;
        }
        unsigned char *on = slots_of(c, h, i, !inc && pass == 1);
        if (!on) return rs_err_set(err, RS_ERR_NOMEM, "hostfile: out of memory");
        for (const char *p = colon + 1; p <= end;) {
            const char *q = memchr(p, ',', (size_t)(end - p));
            if (!q) q = end;
            char *stop = NULL;
            char num[24] = "";
            snprintf(num, sizeof num, "%.*s", (int)(q - p < 23 ? q - p : 23), p);
            long v = strtol(num, &stop, 10);
            if (q == p || !*num || *stop || isspace((unsigned char)*num))
                return rs_err_set(err, RS_ERR_ARG, "invalid literal for int() with base 10: '%.*s' (slots are "
                                  "numbers: HOST:0,2)", (int)(q - p), p);
            if (v < 0 || v >= h->hosts[i].slots)
                return rs_err_set(err, RS_ERR_ARG, "No slot '%ld' specified on host '%s'", v, h->hosts[i].name);
            if (pass == 1) {
                if (!inc && !on[v]) /* Python's list.remove of a slot already removed */
                    return rs_err_set(err, RS_ERR_ARG, "list.remove(x): x not in list (slot %ld of host '%s' is "
                                      "excluded twice)", v, h->hosts[i].name);
                on[v] = (unsigned char)inc;
            }
            p = q + 1;
        }
    }
    return RS_OK;
}

static int count(const unsigned char *on, int slots)
{
    int k = 0;
    for (int s = 0; on && s < slots; s++) k += on[s] != 0;
    return k;
}

rs_status rs_hostfile_select_apply(rs_hostfile *h, const rs_hostfile_select *sel, rs_err *err)
{
    const char *inc = sel->include && *sel->include ? sel->include : NULL;
    const char *exc = sel->exclude && *sel->exclude ? sel->exclude : NULL;
    if (inc && exc) return rs_err_set(err, RS_ERR_ARG, "include_str and exclude_str are mutually exclusive.");
    if ((sel->num_nodes >= 0 || sel->num_procs >= 0) && (inc || exc))
        return rs_err_set(err, RS_ERR_ARG, "Cannot specify num_nodes/gpus with include/exclude");
    chosen c = {.on = calloc((size_t)h->n + 1, sizeof *c.on), .n = h->n}; /* freed below */
    if (!c.on) return rs_err_set(err, RS_ERR_NOMEM, "hostfile: out of memory");
    rs_status st = RS_OK;
    for (int i = 0; !inc && i < h->n && !st; i++) /* exclude (or nothing) starts from every slot */
        if (!slots_of(&c, h, i, 1)) st = rs_err_set(err, RS_ERR_NOMEM, "hostfile: out of memory");
    const char *str = inc ? inc : exc;
    for (const char *p = str; p && !st;) {
        const char *at = strchr(p, '@');
        size_t len = at ? (size_t)(at - p) : strlen(p);
        st = node_spec(&c, h, p, len, inc != NULL, err);
        p = at ? at + 1 : NULL;
    }
    if (!st) {
        int kept = 0;
        for (int i = 0; i < h->n; i++) {
            int k = count(c.on[i], h->hosts[i].slots);
            if (k == 0) continue; /* DeepSpeed drops a host left with no slot */
            if (sel->num_nodes > 0 && kept == sel->num_nodes) break;
            if (sel->num_procs > 0 && k > sel->num_procs) k = sel->num_procs;
            h->hosts[kept] = h->hosts[i];
            h->hosts[kept++].slots = k;
        }
        h->n = kept;
        h->slots = 0;
        for (int i = 0; i < kept; i++) h->slots += h->hosts[i].slots;
        if (kept == 0)
            st = rs_err_set(err, RS_ERR_ARG, "no host is left with a slot after --include/--exclude: choose at least one");
    }
    chosen_free(&c);
    return st;
}

int rs_hostfile_is_local(const rs_hostfile *h)
{
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->hosts[i].name, "localhost") && strcmp(h->hosts[i].name, "127.0.0.1")) return 0;
    return 1;
}
