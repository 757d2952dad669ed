/* The parser of `expect`'s condition (see expect.h): one pass over the text with a small scanner, every
 * error naming what was expected where, with the span of the fault for the caret. */
#include "repl/lang/expect.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "repl/lang/value.h"

static const char *const op_texts[] = {"=", "!=", "<", "<=", ">", ">=", "~="};

const char *rs_expect_op_text(rs_expect_op op)
{
    return (unsigned)op < sizeof op_texts / sizeof *op_texts ? op_texts[op] : "?";
}

typedef struct scan {
    const char *s;
    size_t i, n;
    rs_expect_span *at;
    rs_err *err;
} scan;

static void skip_blanks(scan *c)
{
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t')) c->i++;
}

static bool at_end(scan *c)
{
    skip_blanks(c);
    return c->i >= c->n;
}

/* The word at the cursor (up to a blank), for messages: its length, at least 1 at the end. */
static size_t word_len(const scan *c, size_t from)
{
    size_t j = from;
    while (j < c->n && c->s[j] != ' ' && c->s[j] != '\t') j++;
    return j > from ? j - from : 1;
}

static rs_status fail(scan *c, size_t off, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static rs_status fail(scan *c, size_t off, size_t len, const char *fmt, ...)
{
    if (c->at) *c->at = (rs_expect_span){off, len ? len : 1};
    char msg[RS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rs_err_set(c->err, RS_ERR_ARG, "%s", msg);
}

/* What stands at the cursor, quoted for a message ("'foo'", or "the end"). */
static const char *what_is_here(const scan *c, char *buf, size_t cap)
{
    if (c->i >= c->n) return "the end";
    snprintf(buf, cap, "'%.*s'", (int)(word_len(c, c->i) > 24 ? 24 : word_len(c, c->i)), c->s + c->i);
    return buf;
}

static bool name_start(char ch) { return isalpha((unsigned char)ch) || ch == '_'; }
static bool name_char(char ch) { return isalnum((unsigned char)ch) || ch == '_'; }

/* NAME at the cursor into out; false (cursor unmoved) when none starts here. */
static rs_status scan_name(scan *c, char *out, rs_expect_span *sp, bool *found)
{
    *found = false;
    skip_blanks(c);
    size_t b = c->i, j = b;
    if (j >= c->n || !name_start(c->s[j])) return RS_OK;
    while (j < c->n && name_char(c->s[j])) j++;
    while (j + 1 < c->n && c->s[j] == '.' && name_char(c->s[j + 1])) {
        j++;
        while (j < c->n && name_char(c->s[j])) j++;
    }
    if (j - b >= RS_EXPECT_NAME_MAX) return fail(c, b, j - b, "a name is at most 63 characters");
    memcpy(out, c->s + b, j - b);
    out[j - b] = '\0';
    if (sp) *sp = (rs_expect_span){b, j - b};
    c->i = j;
    *found = true;
    return RS_OK;
}

/* Whether the word `w` stands at the cursor, followed by a blank or the end; consumes it if so. */
static bool take_word(scan *c, const char *w)
{
    skip_blanks(c);
    size_t k = strlen(w);
    if (c->n - c->i < k || strncmp(c->s + c->i, w, k) || (c->i + k < c->n && name_char(c->s[c->i + k]))) return false;
    c->i += k;
    return true;
}

/* A number at the cursor: [+-]digits[.digits][e[+-]digits], then an optional '%' when pct_ok. */
static rs_status scan_number(scan *c, double *out, bool pct_ok, bool *pct, const char *what)
{
    skip_blanks(c);
    size_t b = c->i, j = b;
    if (j < c->n && (c->s[j] == '+' || c->s[j] == '-')) j++;
    size_t digits = 0;
    while (j < c->n && isdigit((unsigned char)c->s[j])) j++, digits++;
    if (j < c->n && c->s[j] == '.') {
        j++;
        while (j < c->n && isdigit((unsigned char)c->s[j])) j++, digits++;
    }
    if (digits && j < c->n && (c->s[j] == 'e' || c->s[j] == 'E')) {
        size_t k = j + 1;
        if (k < c->n && (c->s[k] == '+' || c->s[k] == '-')) k++;
        if (k < c->n && isdigit((unsigned char)c->s[k])) {
            while (k < c->n && isdigit((unsigned char)c->s[k])) k++;
            j = k;
        }
    }
    char buf[64];
    if (!digits) return fail(c, b, word_len(c, b), "expected %s", what);
    if (j - b >= sizeof buf) return fail(c, b, j - b, "'%.24s...' has too many digits", c->s + b);
    memcpy(buf, c->s + b, j - b);
    buf[j - b] = '\0';
    rs_err e = {0};
    double v;
    if (rs_val_float(buf, &v, &e) || !isfinite(v)) return fail(c, b, j - b, "'%s' is out of range", buf);
    *pct = false;
    if (pct_ok && j < c->n && c->s[j] == '%') {
        *pct = true;
        v /= 100;
        j++;
    }
    if (j < c->n && (name_char(c->s[j]) || c->s[j] == '.' || c->s[j] == '%'))
        return fail(c, b, word_len(c, b), "'%.*s' is not a number", (int)(word_len(c, b) > 24 ? 24 : word_len(c, b)),
                    c->s + b);
    *out = v;
    c->i = j;
    return RS_OK;
}

static rs_status scan_op(scan *c, const char *after, rs_expect *e)
{
    skip_blanks(c);
    static const struct { const char *t; rs_expect_op op; } ops[] = {
        {"==", RS_EXPECT_EQ}, {"!=", RS_EXPECT_NE}, {"<=", RS_EXPECT_LE}, {">=", RS_EXPECT_GE},
        {"~=", RS_EXPECT_APPROX}, {"=", RS_EXPECT_EQ}, {"<", RS_EXPECT_LT}, {">", RS_EXPECT_GT},
    };
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        size_t l = strlen(ops[k].t);
        if (c->n - c->i >= l && !strncmp(c->s + c->i, ops[k].t, l)) {
            e->op = ops[k].op;
            e->op_at = (rs_expect_span){c->i, l};
            c->i += l;
            return RS_OK;
        }
    }
    char buf[40], msg[256];
    snprintf(msg, sizeof msg, "expected a comparison (= != < <= > >= ~=) after %s, got %s", after,
             what_is_here(c, buf, sizeof buf));
    return fail(c, c->i, word_len(c, c->i), "%s", msg);
}

static rs_status scan_vector(scan *c, rs_expect *e)
{
    size_t open = c->i;
    c->i++; /* '[' */
    e->nvals = 0;
    for (;;) {
        skip_blanks(c);
        if (c->i >= c->n) return fail(c, open, 1, "this '[' has no closing ']'");
        if (e->nvals == RS_EXPECT_VEC_MAX)
            return fail(c, c->i, word_len(c, c->i), "a vector holds at most 64 numbers");
        bool pct;
        rs_status st = scan_number(c, &e->vals[e->nvals], false, &pct, "a number in the vector");
        if (st) return st;
        e->nvals++;
        skip_blanks(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->i < c->n && c->s[c->i] == ']') {
            c->i++;
            break;
        }
        if (c->i >= c->n) return fail(c, open, 1, "this '[' has no closing ']'");
        char buf[40], msg[256];
        snprintf(msg, sizeof msg, "expected ',' or ']' in the vector, got %s", what_is_here(c, buf, sizeof buf));
        return fail(c, c->i, word_len(c, c->i), "%s", msg);
    }
    e->value_at = (rs_expect_span){open, c->i - open};
    return RS_OK;
}

static rs_status scan_value(scan *c, rs_expect *e)
{
    skip_blanks(c);
    size_t b = c->i;
    if (b >= c->n) return fail(c, b, 1, "expected a number, [a, vector] or a name after '%s'", rs_expect_op_text(e->op));
    if (c->s[b] == '[') {
        e->kind = RS_EXPECT_VECTOR;
        return scan_vector(c, e);
    }
    bool found;
    rs_status st = scan_name(c, e->ref, &e->value_at, &found);
    if (st) return st;
    if (found) {
        e->kind = RS_EXPECT_NAME;
        return RS_OK;
    }
    bool pct;
    e->kind = RS_EXPECT_NUMBER;
    e->nvals = 1;
    char what[64];
    snprintf(what, sizeof what, "a number, [a, vector] or a name after '%s'", rs_expect_op_text(e->op));
    st = scan_number(c, &e->vals[0], true, &pct, what);
    if (st) return st;
    e->value_at = (rs_expect_span){b, c->i - b};
    return RS_OK;
}

rs_status rs_expect_parse(const char *cond, rs_expect *out, rs_expect_span *at, rs_err *err)
{
    rs_expect e = {.rank = -1};
    scan c = {.s = cond ? cond : "", .n = cond ? strlen(cond) : 0, .at = at, .err = err};
    rs_status st;
    bool found;
    if (at_end(&c))
        return fail(&c, c.i, 1, "expect needs a condition, e.g. `expect accuracy >= 0.85` or `expect rank 0 = [2, 110]`");
    size_t sb = c.i;
    if (take_word(&c, "rank")) {
        skip_blanks(&c);
        size_t nb = c.i, j = nb;
        long r = 0;
        while (j < c.n && isdigit((unsigned char)c.s[j]) && r < 1000000) r = r * 10 + (c.s[j++] - '0');
        if (j == nb || (j < c.n && name_char(c.s[j])))
            return fail(&c, nb, word_len(&c, nb), "expected a rank number after 'rank' (rank 0, rank 1, ...)");
        if (r >= 1000000) return fail(&c, nb, j - nb, "rank numbers go up to 999999");
        e.rank = (int)r;
        c.i = j;
        if ((st = scan_name(&c, e.name, NULL, &found))) return st;
        e.subject = (rs_expect_span){sb, c.i - sb};
    } else {
        if ((st = scan_name(&c, e.name, &e.subject, &found))) return st;
        if (!found) {
            char buf[40], msg[256];
            snprintf(msg, sizeof msg, "expected the name of a value (accuracy, rank 0, ...), got %s",
                     what_is_here(&c, buf, sizeof buf));
            return fail(&c, c.i, word_len(&c, c.i), "%s", msg);
        }
        if (take_word(&c, "per")) {
            if (!take_word(&c, "rank")) {
                skip_blanks(&c);
                return fail(&c, c.i, word_len(&c, c.i), "expected 'rank' after 'per' (`%s per rank`)", e.name);
            }
            e.per_rank = true;
            e.subject.len = c.i - sb;
        }
    }
    char subject[RS_EXPECT_NAME_MAX + 24];
    snprintf(subject, sizeof subject, "'%.*s'", (int)e.subject.len, c.s + e.subject.off);
    if ((st = scan_op(&c, subject, &e))) return st;
    if ((st = scan_value(&c, &e))) return st;
    if (take_word(&c, "within")) {
        size_t wb = c.i - 6;
        if (e.op != RS_EXPECT_APPROX)
            return fail(&c, wb, 6, "'within' goes with ~= (`x ~= 0.43 within 15%%`), not with %s", rs_expect_op_text(e.op));
        skip_blanks(&c);
        size_t tb = c.i;
        bool pct;
        if ((st = scan_number(&c, &e.tol, true, &pct, "a tolerance after 'within' (0.01, or 1% of the value)"))) return st;
        if (e.tol < 0) return fail(&c, tb, c.i - tb, "a tolerance is 0 or more");
        e.has_tol = true;
        e.tol_rel = pct;
        e.tol_at = (rs_expect_span){tb, c.i - tb};
    } else if (e.op == RS_EXPECT_APPROX) {
        skip_blanks(&c);
        if (c.i >= c.n)
            return fail(&c, c.i, 1, "~= needs a tolerance: add `within 0.01` (absolute) or `within 1%%` (relative)");
    }
    if (!at_end(&c)) {
        char buf[40], msg[256];
        snprintf(msg, sizeof msg, "unexpected %s after the condition%s", what_is_here(&c, buf, sizeof buf),
                 e.op == RS_EXPECT_APPROX && !e.has_tol ? " (a tolerance is written `within 1%`)" : "");
        return fail(&c, c.i, word_len(&c, c.i), "%s", msg);
    }
    *out = e;
    return RS_OK;
}

bool rs_expect_holds(const rs_expect *e, double got, double want)
{
    double scale = fabs(got) > fabs(want) ? fabs(got) : fabs(want);
    bool eq = got == want || fabs(got - want) <= 1e-6 * scale;
    switch (e->op) {
    case RS_EXPECT_EQ: return eq;
    case RS_EXPECT_NE: return !eq;
    case RS_EXPECT_LT: return got < want;
    case RS_EXPECT_LE: return got <= want || eq;
    case RS_EXPECT_GT: return got > want;
    case RS_EXPECT_GE: return got >= want || eq;
    case RS_EXPECT_APPROX: {
        double tol = e->tol_rel ? e->tol * fabs(want) : e->tol;
        return fabs(got - want) <= tol;
    }
    }
    return false;
}
