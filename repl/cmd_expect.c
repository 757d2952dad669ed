/* `expect CONDITION`: checks the last result's numbers (repl/result.h) in a script or a tutorial. A
 * condition that holds prints what it read; one that does not is an error, so a script stops there and
 * exits non-zero; a malformed condition or an unknown name is refused with a caret under the fault. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "lang/expect.h"
#include "lang/value.h"
#include "result.h"
#include "session.h"

/* One value the condition applies to: the whole command's, or one rank's. */
typedef struct item {
    const rs_result_val *v;
    int rank;
} item;

static int by_rank(const void *a, const void *b)
{
    const item *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* One number as a reader would write it: whole numbers whole (1628288, not 1.62829e+06), others to 6
 * significant digits. */
static int fmt_num(char *buf, size_t cap, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) return snprintf(buf, cap, "%.0f", v);
    return snprintf(buf, cap, "%.6g", v);
}

/* Numbers as a reader would write them: 0.9123, [2, 110], [1, 2, ..., 9] (64 numbers). */
static void fmt_vals(char *buf, size_t cap, const double *v, int n)
{
    size_t k = 0;
    if (n == 1) {
        fmt_num(buf, cap, v[0]);
        return;
    }
    k += (size_t)snprintf(buf, cap, "[");
    int head = n <= 8 ? n : 6;
    for (int i = 0; i < head && k < cap; i++) {
        if (i) k += (size_t)snprintf(buf + k, cap - k, ", ");
        if (k < cap) k += (size_t)fmt_num(buf + k, cap - k, v[i]);
    }
    if (head < n && k < cap) {
        k += (size_t)snprintf(buf + k, cap - k, ", ..., ");
        if (k < cap) k += (size_t)fmt_num(buf + k, cap - k, v[n - 1]);
        if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "] (%d numbers)", n);
    } else if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* The result's names, each once, "(per rank)" after those kept per rank; and the nearest to word. */
static void list_names(const rs_results *r, const char *word, char *buf, size_t cap, const char **near)
{
    const char *names[256];
    int n = 0;
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n && n < 256; i++) {
        bool seen = false;
        for (int j = 0; j < n && !seen; j++) seen = !strcmp(names[j], r->vals[i].name);
        if (seen) continue;
        names[n++] = r->vals[i].name;
        if (k < cap)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s%s", n > 1 ? ", " : "", r->vals[i].name,
                                  r->vals[i].rank >= 0 ? " (per rank)" : "");
    }
    if (k >= cap && cap > 4) memcpy(buf + cap - 4, "...", 4);
    *near = word && *word ? rs_val_near_miss(word, names, n) : NULL;
}

static int unknown_name(rs_session *s, const rs_call *c, const rs_results *r, const char *name, rs_expect_span at)
{
    char names[600];
    const char *near;
    list_names(r, name, names, sizeof names, &near);
    char hint[96] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    return rs_session_error(s, c, c->rest_pos + at.off, at.len, "expect: the last result (of `%s`) has no '%s'%s; it has: %s",
                            r->cmd, name, hint, r->n ? names : "no numbers");
}

/* The ranks a name is kept for, as "0..3" (or "none"). */
static void rank_range(const rs_results *r, const char *name, char *buf, size_t cap)
{
    int lo = -1, hi = -1;
    for (int i = 0; i < r->n; i++)
        if (r->vals[i].rank >= 0 && !strcmp(r->vals[i].name, name)) {
            if (lo < 0 || r->vals[i].rank < lo) lo = r->vals[i].rank;
            if (r->vals[i].rank > hi) hi = r->vals[i].rank;
        }
    if (lo < 0) snprintf(buf, cap, "none");
    else if (lo == hi) snprintf(buf, cap, "%d", lo);
    else snprintf(buf, cap, "%d..%d", lo, hi);
}

/* The values the subject names, into items (r->n of room); returns how many, or -1 after an error. */
static int subject_items(rs_session *s, const rs_call *c, const rs_results *r, const rs_expect *e, item *items,
                         const char **name)
{
    size_t at = c->rest_pos + e->subject.off, len = e->subject.len;
    *name = e->name;
    if (e->rank >= 0) {
        if (!e->name[0]) {
            if (!r->main[0])
                return rs_session_error(s, c, at, len,
                                        "expect: `rank %d` alone means a rank's main value, and `%s` has none; name "
                                        "one: `rank %d NAME`",
                                        e->rank, r->cmd, e->rank),
                       -1;
            *name = r->main;
        }
        bool per_rank;
        if (!rs_result_has(r, *name, &per_rank)) return unknown_name(s, c, r, *name, e->subject), -1;
        const rs_result_val *v = rs_result_find(r, *name, e->rank);
        if (!v) {
            char ranks[32];
            rank_range(r, *name, ranks, sizeof ranks);
            if (!per_rank)
                return rs_session_error(s, c, at, len,
                                        "expect: %s is one value of the whole command, not one per rank: write "
                                        "`expect %s ...`",
                                        *name, *name),
                       -1;
            return rs_session_error(s, c, at, len, "expect: the last result has %s for ranks %s, not for rank %d",
                                    *name, ranks, e->rank),
                   -1;
        }
        items[0] = (item){v, e->rank};
        return 1;
    }
    bool per_rank;
    if (!rs_result_has(r, e->name, &per_rank)) return unknown_name(s, c, r, e->name, e->subject), -1;
    if (e->per_rank) {
        if (!per_rank)
            return rs_session_error(s, c, at, len,
                                    "expect: %s is one value of the whole command, not one per rank: drop `per rank`",
                                    e->name),
                   -1;
        int n = 0;
        for (int i = 0; i < r->n; i++)
            if (r->vals[i].rank >= 0 && !strcmp(r->vals[i].name, e->name)) items[n++] = (item){&r->vals[i], r->vals[i].rank};
        qsort(items, (size_t)n, sizeof *items, by_rank);
        return n;
    }
    const rs_result_val *v = rs_result_find(r, e->name, -1);
    if (!v)
        return rs_session_error(s, c, at, len,
                                "expect: %s has one value per rank: write `expect %s per rank ...` (every rank) or "
                                "`expect rank 0 %s ...`",
                                e->name, e->name, e->name),
               -1;
    items[0] = (item){v, -1};
    return 1;
}

/* The value the condition compares rank `rank`'s subject with. A name not in the result is read as
 * NAME.SUBJECT: `memory.optimizer per rank ~= formula` compares with formula.memory.optimizer. */
static const rs_result_val *ref_value(const rs_results *r, const rs_expect *e, const char *subject, int rank,
                                      char *used, size_t cap)
{
    const char *names[2] = {e->ref, NULL};
    char longer[RS_EXPECT_NAME_MAX * 2 + 2];
    snprintf(longer, sizeof longer, "%s.%s", e->ref, subject);
    names[1] = longer;
    for (int k = 0; k < 2; k++) {
        const rs_result_val *v = rank >= 0 ? rs_result_find(r, names[k], rank) : NULL;
        if (!v) v = rs_result_find(r, names[k], -1);
        if (v) {
            snprintf(used, cap, "%s", names[k]);
            return v;
        }
    }
    return NULL;
}

/* got OP want, element by element (a single wanted number applies to every element); *bad is the first
 * element that fails (-1: a length mismatch or none). */
static bool compare(const rs_expect *e, const double *got, int ng, const double *want, int nw, int *bad)
{
    *bad = -1;
    if (nw != 1 && ng != nw) return e->op == RS_EXPECT_NE;
    rs_expect eq = *e;
    if (e->op == RS_EXPECT_NE) eq.op = RS_EXPECT_EQ;
    bool all = true;
    for (int i = 0; i < ng && all; i++)
        if (!rs_expect_holds(&eq, got[i], want[nw == 1 ? 0 : i])) {
            all = false;
            *bad = i;
        }
    return e->op == RS_EXPECT_NE ? !all : all;
}

static void describe(char *buf, size_t cap, const char *name, int rank, bool rank_alone)
{
    if (rank < 0) snprintf(buf, cap, "%s", name);
    else if (rank_alone) snprintf(buf, cap, "rank %d", rank);
    else snprintf(buf, cap, "%s on rank %d", name, rank);
}

/* The error of a check that does not hold: what was read, what it was compared with, and why not. */
static int report_failure(rs_session *s, const rs_call *c, const rs_expect *e, const char *who, const rs_result_val *v,
                          const double *want, int nw, int bad, const char *refname)
{
    char got_s[400], want_s[400], with[520], why[200] = "", tol[64] = "";
    fmt_vals(got_s, sizeof got_s, v->v, v->n);
    fmt_vals(want_s, sizeof want_s, want, nw);
    if (e->kind == RS_EXPECT_NAME) snprintf(with, sizeof with, "%s (%s)", refname, want_s);
    else snprintf(with, sizeof with, "%s", want_s);
    if (e->has_tol) snprintf(tol, sizeof tol, " within %g%s", e->tol_rel ? e->tol * 100 : e->tol, e->tol_rel ? "%" : "");
    double w = bad >= 0 ? want[nw == 1 ? 0 : bad] : 0;
    if (nw != 1 && v->n != nw) snprintf(why, sizeof why, " (%d number%s against %d)", v->n, v->n == 1 ? "" : "s", nw);
    else if (bad >= 0 && (v->n > 1 || nw > 1)) snprintf(why, sizeof why, " (element %d: %.6g against %.6g)", bad, v->v[bad], w);
    if (e->op == RS_EXPECT_APPROX && bad >= 0 && w != 0) {
        size_t wl = strlen(why);
        snprintf(why + wl, sizeof why - wl, " (off by %.3g%%)", 100 * fabs(v->v[bad] - w) / fabs(w));
    }
    return rs_session_error(s, c, (size_t)-1, 0, "expect failed: %s is %s, not %s %s%s%s", who, got_s,
                            rs_expect_op_text(e->op), with, tol, why);
}

/* The line of a check that holds: what it read (said once when every rank has the same). */
static void report_ok(rs_session *s, const rs_expect *e, const char *name, const char *who, const item *items, int n,
                      char *seen, size_t cap)
{
    if (strlen(seen) >= cap - 1 && cap > 4) memcpy(seen + cap - 4, "...", 4);
    if (!e->per_rank) {
        fprintf(s->out, "ok: %s is %s\n", who, seen);
        return;
    }
    bool same = n > 1;
    char a[400], b[400];
    fmt_vals(a, sizeof a, items[0].v->v, items[0].v->n);
    for (int i = 1; i < n && same; i++) {
        fmt_vals(b, sizeof b, items[i].v->v, items[i].v->n);
        same = !strcmp(a, b);
    }
    if (same) fprintf(s->out, "ok: %s is %s on every rank (%d..%d)\n", name, a, items[0].rank, items[n - 1].rank);
    else fprintf(s->out, "ok: %s is %s on ranks %d..%d\n", name, seen, items[0].rank, items[n - 1].rank);
}

int rs_cmd_expect(rs_session *s, const rs_call *c)
{
    rs_expect e;
    rs_expect_span at = {0, 1};
    rs_err err = {0};
    if (rs_expect_parse(c->rest, &e, &at, &err))
        return rs_session_error(s, c, c->rest_pos + at.off, at.len, "expect: %s", err.msg);
    const rs_results *r = s->results;
    if (!r || !r->gen)
        return rs_session_error(s, c, (size_t)-1, 0,
                                "expect: no result to check yet; it checks the numbers of the last command that gave "
                                "some (train, eval, collective, bench, p2p, show, ...)");
    if (r->failed)
        return rs_session_error(s, c, (size_t)-1, 0, "expect: the last command that gave numbers, `%s`, failed", r->cmd);
    if (r->nomem)
        return rs_session_error(s, c, (size_t)-1, 0, "expect: out of memory keeping the numbers of `%s`", r->cmd);
    item *items = malloc((size_t)(r->n ? r->n : 1) * sizeof *items); /* owned here */
    if (!items) return rs_session_error(s, c, (size_t)-1, 0, "expect: out of memory");
    const char *name;
    int n = subject_items(s, c, r, &e, items, &name);
    if (n < 0) {
        free(items);
        return 1;
    }
    char got_s[400], who[160], seen[1024] = "", refname[RS_EXPECT_NAME_MAX * 2 + 2] = "";
    size_t k = 0;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const rs_result_val *v = items[i].v;
        const double *want = e.vals;
        int nw = e.kind == RS_EXPECT_NUMBER ? 1 : e.nvals;
        /* `sent_bytes per rank = [64, 32, 64, 32]`: one number per rank, rank by rank */
        if (e.per_rank && e.kind == RS_EXPECT_VECTOR && v->n == 1 && e.nvals == n) want = &e.vals[i], nw = 1;
        if (e.kind == RS_EXPECT_NAME) {
            const rs_result_val *rv = ref_value(r, &e, name, items[i].rank, refname, sizeof refname);
            if (!rv) {
                rc = unknown_name(s, c, r, e.ref, e.value_at);
                break;
            }
            want = rv->v;
            nw = rv->n;
        }
        int bad;
        bool holds = compare(&e, v->v, v->n, want, nw, &bad);
        fmt_vals(got_s, sizeof got_s, v->v, v->n);
        describe(who, sizeof who, name, items[i].rank, e.rank >= 0 && !e.name[0]);
        if (holds) {
            if (k < sizeof seen) k += (size_t)snprintf(seen + k, sizeof seen - k, "%s%s", i ? ", " : "", got_s);
            continue;
        }
        rc = report_failure(s, c, &e, who, v, want, nw, bad, refname);
    }
    if (!rc) report_ok(s, &e, name, who, items, n, seen, sizeof seen);
    free(items);
    return rc;
}

