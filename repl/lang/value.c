/* Typed values of the command language (see value.h). Sizes are exact integer arithmetic (a fraction
 * must make whole bytes); floats and durations go through strtod in the C locale, durations with their
 * unit folded into the decimal exponent so that "3ms" is the double nearest 0.003, not 3 * 1e-3. */
#include "repl/lang/value.h"

#include <ctype.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/nn/spec.h"

/* Words are quoted in messages, cut to this many bytes so one pasted blob cannot fill the message. */
#define QUOTE_MAX 40
#define QW "'%.*s%s'"
#define QARG(s, len) (int)((len) > QUOTE_MAX ? QUOTE_MAX : (len)), (s), ((len) > QUOTE_MAX ? "..." : "")

/* The REPL may switch LC_NUMERIC to the user's locale (ncurses wants setlocale), where strtod and
 * printf would use ',' as the decimal point; these two always use '.'. uselocale is per thread. */
static double c_strtod(const char *s)
{
    locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    locale_t old = c ? uselocale(c) : (locale_t)0;
    double v = strtod(s, NULL);
    if (c) {
        uselocale(old);
        freelocale(c);
    }
    return v;
}

static int c_snprintf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int c_snprintf(char *buf, size_t n, const char *fmt, ...)
{
    locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    locale_t old = c ? uselocale(c) : (locale_t)0;
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (c) {
        uselocale(old);
        freelocale(c);
    }
    return r;
}

static bool digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Length of the float at the start of s[0, len): [+-]? (D+ [. D*] | . D+) ([eE] [+-]? D+)?, 0 if there
 * is none. *mant is the length without the exponent. Stricter than strtod: no inf, nan or hex. */
static size_t scan_float(const char *s, size_t len, size_t *mant)
{
    size_t i = 0, nd = 0;
    if (i < len && (s[i] == '+' || s[i] == '-')) i++;
    while (i < len && digit(s[i])) i++, nd++;
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && digit(s[i])) i++, nd++;
    }
    if (nd == 0) return 0;
    *mant = i;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < len && (s[j] == '+' || s[j] == '-')) j++;
        if (j < len && digit(s[j])) {
            while (j < len && digit(s[j])) j++;
            i = j;
        }
    }
    return i;
}

rs_status rs_val_int(const char *word, int64_t *out, rs_err *err)
{
    size_t len = strlen(word), i = 0;
    bool neg = false;
    if (i < len && (word[i] == '+' || word[i] == '-')) neg = word[i++] == '-';
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    size_t first = i;
    for (; i < len && digit(word[i]); i++) {
        unsigned d = (unsigned)(word[i] - '0');
        if (v > (limit - d) / 10) {
            while (i < len && digit(word[i])) i++;
            if (i == len)
                return rs_err_set(err, RS_ERR_ARG,
                                  QW " is out of range for an integer (-9223372036854775808 to 9223372036854775807)",
                                  QARG(word, len));
            break;
        }
        v = v * 10 + d;
    }
    if (i == first || i != len)
        return rs_err_set(err, RS_ERR_ARG, "expected an integer such as 10, got " QW, QARG(word, len));
    *out = !neg ? (int64_t)v : v > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)v;
    return RS_OK;
}

rs_status rs_val_float(const char *word, double *out, rs_err *err)
{
    size_t len = strlen(word), mant;
    if (scan_float(word, len, &mant) != len || len == 0)
        return rs_err_set(err, RS_ERR_ARG, "expected a number such as 0.05 or 1e-3, got " QW, QARG(word, len));
    double v = c_strtod(word);
    if (!isfinite(v)) return rs_err_set(err, RS_ERR_ARG, QW " is too large for a number", QARG(word, len));
    *out = v;
    return RS_OK;
}

rs_status rs_val_ratio(const char *word, double *out, rs_err *err)
{
    size_t len = strlen(word), mant, n = scan_float(word, len, &mant);
    bool pct = n > 0 && n + 1 == len && word[n] == '%';
    double v = n > 0 ? c_strtod(word) : NAN; /* strtod stops at the '%' as scan_float does */
    if (pct) v /= 100;
    if (v == 0) v = 0; /* no -0 */
    if ((n != len && !pct) || !(v >= 0 && v <= 1))
        return rs_err_set(err, RS_ERR_ARG, "expected a ratio from 0 to 1 such as 0.1 or 10%%, got " QW,
                          QARG(word, len));
    *out = v;
    return RS_OK;
}

/* A size in s[0, len); `what` names it in messages ("size"). */
static rs_status parse_size(const char *s, size_t len, uint64_t *out, rs_err *err)
{
    size_t i = 0;
    if (i < len && s[i] == '+') i++;
    uint64_t whole = 0;
    bool too_big = false;
    size_t nd = 0;
    for (; i < len && digit(s[i]); i++, nd++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (whole > ((uint64_t)INT64_MAX - d) / 10) too_big = true;
        else whole = whole * 10 + d;
    }
    size_t fa = i, fb = i; /* fraction digits s[fa, fb) */
    if (i < len && s[i] == '.') {
        fa = fb = ++i;
        while (fb < len && digit(s[fb])) fb++;
        nd += fb - fa;
        i = fb;
    }
    if (len > 0 && s[0] == '-')
        return rs_err_set(err, RS_ERR_ARG, "a size cannot be negative, got " QW, QARG(s, len));
    if (nd == 0)
        return rs_err_set(err, RS_ERR_ARG, "expected a size such as 8, 16K or 1.5M, got " QW, QARG(s, len));
    /* Unit: [KMGTPE] then optional B or iB; or B alone; or nothing. */
    static const char units[] = "kmgtpe";
    unsigned shift = 0;
    size_t u = i;
    const char *k = u < len && s[u] ? strchr(units, tolower((unsigned char)s[u])) : NULL;
    if (k) {
        shift = 10 * (unsigned)(k - units + 1);
        u++;
        if (u < len && s[u] == 'i' && u + 1 < len && (s[u + 1] == 'B' || s[u + 1] == 'b')) u += 2;
        else if (u < len && (s[u] == 'B' || s[u] == 'b')) u++;
    } else if (u < len && (s[u] == 'B' || s[u] == 'b')) {
        u++;
    }
    if (u != len)
        return rs_err_set(err, RS_ERR_ARG,
                          "unknown unit " QW " in " QW ": sizes take B, K, M, G, T, P or E (powers of 1024)",
                          QARG(s + i, len - i), QARG(s, len));
    if (too_big || whole > ((uint64_t)INT64_MAX >> shift))
        return rs_err_set(err, RS_ERR_ARG, QW " is too large for a size (at most 2^63-1 bytes)", QARG(s, len));
    uint64_t v = whole << shift;
    /* The fraction F/10^d times 2^shift is whole when 5^d divides F (2^shift has no factor 5), leaving
     * q = F/5^d, and q * 2^(shift-d) is whole. Trailing zeros change nothing. */
    while (fb > fa && s[fb - 1] == '0') fb--;
    size_t d = fb - fa;
    if (d > 0) {
        if (d > 19)
            return rs_err_set(err, RS_ERR_ARG, QW " has too many digits after the point", QARG(s, len));
        uint64_t f = 0, p5 = 1;
        for (size_t j = fa; j < fb; j++) {
            f = f * 10 + (uint64_t)(s[j] - '0');
            p5 *= 5;
        }
        uint64_t q = f / p5, part = 0;
        bool whole_bytes = f % p5 == 0;
        if (whole_bytes) {
            if (shift >= d) part = q << (shift - d); /* q < 2^d, so this stays below 2^shift */
            else if ((q & ((UINT64_C(1) << (d - shift)) - 1)) == 0) part = q >> (d - shift);
            else whole_bytes = false;
        }
        if (!whole_bytes)
            return rs_err_set(err, RS_ERR_ARG, QW " is not a whole number of bytes", QARG(s, len));
        if (part > (uint64_t)INT64_MAX - v)
            return rs_err_set(err, RS_ERR_ARG, QW " is too large for a size (at most 2^63-1 bytes)",
                              QARG(s, len));
        v += part;
    }
    *out = v;
    return RS_OK;
}

rs_status rs_val_size(const char *word, uint64_t *out, rs_err *err)
{
    return parse_size(word, strlen(word), out, err);
}

rs_status rs_val_size_range(const char *word, uint64_t *lo, uint64_t *hi, rs_err *err)
{
    size_t len = strlen(word);
    const char *dots = strstr(word, "..");
    if (!dots) {
        rs_status st = parse_size(word, len, lo, err);
        if (st == RS_OK) *hi = *lo;
        return st;
    }
    size_t la = (size_t)(dots - word);
    const char *b = dots + 2;
    size_t lb = len - la - 2;
    if (la == 0 || lb == 0)
        return rs_err_set(err, RS_ERR_ARG, "expected a size range such as 8..64M, got " QW, QARG(word, len));
    uint64_t a, z;
    rs_status st = parse_size(word, la, &a, err);
    if (st == RS_OK) st = parse_size(b, lb, &z, err);
    if (st != RS_OK) return st;
    if (a > z)
        return rs_err_set(err, RS_ERR_ARG, "size range " QW " runs backwards: " QW " is more than " QW,
                          QARG(word, len), QARG(word, la), QARG(b, lb));
    *lo = a;
    *hi = z;
    return RS_OK;
}

static const struct {
    const char *name;
    int exp10; /* unit = 10^exp10 seconds ... */
    double mul; /* ... or mul seconds when exp10 is 0 */
} dur_units[] = {
    {"ns", -9, 1}, {"us", -6, 1}, {"\xc2\xb5s", -6, 1}, {"ms", -3, 1}, {"s", 0, 1},
    {"sec", 0, 1}, {"m", 0, 60}, {"min", 0, 60}, {"h", 0, 3600},
};
#define N_DUR_UNITS ((int)(sizeof dur_units / sizeof *dur_units))

rs_status rs_val_duration(const char *word, double *seconds, rs_err *err)
{
    size_t len = strlen(word), mant = 0, n = scan_float(word, len, &mant);
    if (n == 0)
        return rs_err_set(err, RS_ERR_ARG, "expected a duration such as 500us, 2ms or 1.5s, got " QW,
                          QARG(word, len));
    if (word[0] == '-' && c_strtod(word) != 0)
        return rs_err_set(err, RS_ERR_ARG, "a duration cannot be negative, got " QW, QARG(word, len));
    const char *unit = word + n;
    if (!*unit) {
        if (c_strtod(word) == 0) {
            *seconds = 0;
            return RS_OK;
        }
        return rs_err_set(err, RS_ERR_ARG, "a duration needs a unit: " QW " could be '%.*sms' or '%.*ss' "
                          "(units: ns, us, ms, s, m, h)", QARG(word, len), QUOTE_MAX, word, QUOTE_MAX, word);
    }
    int u = -1;
    for (int i = 0; i < N_DUR_UNITS && u < 0; i++)
        if (!strcasecmp(unit, dur_units[i].name)) u = i;
    if (u < 0) {
        static const char *const names[] = {"ns", "us", "ms", "s", "m", "h", "min", "sec"};
        const char *near = rs_val_near_miss(unit, names, (int)(sizeof names / sizeof *names));
        size_t ul = len - n;
        if (near)
            return rs_err_set(err, RS_ERR_ARG, "unknown unit " QW " in " QW " (did you mean '%s'?)",
                              QARG(unit, ul), QARG(word, len), near);
        return rs_err_set(err, RS_ERR_ARG,
                          "unknown unit " QW " in " QW ": durations take ns, us, ms, s, m (minutes) or h",
                          QARG(unit, ul), QARG(word, len));
    }
    double v;
    if (dur_units[u].exp10 != 0) {
        /* Rewrite "1.5e2ms" as "1.5e-1" so strtod rounds once, from the decimal text. */
        if (mant > 300)
            return rs_err_set(err, RS_ERR_ARG, QW " has too many digits", QARG(word, len));
        long e = 0;
        if (n > mant) { /* word[mant] is the 'e' of an exponent */
            size_t j = mant + 1;
            bool eneg = word[j] == '-';
            if (word[j] == '+' || word[j] == '-') j++;
            for (; j < n; j++)
                if (e < 100000) e = e * 10 + (word[j] - '0'); /* beyond that, 0 or inf either way */
            if (eneg) e = -e;
        }
        char buf[340];
        snprintf(buf, sizeof buf, "%.*se%ld", (int)mant, word, e + dur_units[u].exp10);
        v = c_strtod(buf);
    } else {
        v = c_strtod(word) * dur_units[u].mul;
    }
    if (!isfinite(v)) return rs_err_set(err, RS_ERR_ARG, QW " is too long for a duration", QARG(word, len));
    *seconds = v == 0 ? 0 : v; /* no -0 */
    return RS_OK;
}

rs_status rs_val_bool(const char *word, int *out, rs_err *err)
{
    static const char *const names[] = {"off", "on", "false", "true", "no", "yes", "0", "1"};
    for (int i = 0; i < 8; i++)
        if (!strcasecmp(word, names[i])) {
            *out = i % 2;
            return RS_OK;
        }
    size_t len = strlen(word);
    const char *near = rs_val_near_miss(word, names, 6);
    if (near)
        return rs_err_set(err, RS_ERR_ARG, "expected on or off, got " QW " (did you mean '%s'?)", QARG(word, len),
                          near);
    return rs_err_set(err, RS_ERR_ARG, "expected on or off (or true/false, yes/no, 1/0), got " QW,
                      QARG(word, len));
}

rs_status rs_val_enum(const char *word, const char *const *names, int n, int *out, rs_err *err)
{
    if (!names || n <= 0) return rs_err_set(err, RS_ERR_INTERNAL, "rs_val_enum: no names to choose from");
    for (int i = 0; i < n; i++)
        if (!strcasecmp(word, names[i])) {
            *out = i;
            return RS_OK;
        }
    char list[RS_ERR_MSG_MAX];
    size_t at = 0;
    list[0] = '\0';
    for (int i = 0; i < n && at < sizeof list; i++) {
        int w = snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", names[i]);
        if (w < 0) break;
        at += (size_t)w;
    }
    size_t len = strlen(word);
    const char *near = rs_val_near_miss(word, names, n);
    if (near)
        return rs_err_set(err, RS_ERR_ARG, "expected one of %s, got " QW " (did you mean '%s'?)", list,
                          QARG(word, len), near);
    return rs_err_set(err, RS_ERR_ARG, "expected one of %s, got " QW, list, QARG(word, len));
}

rs_status rs_val_shape(const char *word, int64_t *dims, int max, int *ndim, rs_err *err)
{
    if (max < 1 || max > RS_VAL_SHAPE_MAX)
        return rs_err_set(err, RS_ERR_INTERNAL, "rs_val_shape: max must be 1..%d", RS_VAL_SHAPE_MAX);
    size_t len = strlen(word), i = 0;
    int nd = 0;
    uint64_t prod = 1;
    for (;;) {
        size_t a = i;
        uint64_t v = 0;
        bool big = false;
        for (; i < len && digit(word[i]); i++) {
            if (v > ((uint64_t)INT64_MAX - 9) / 10) big = true;
            else v = v * 10 + (uint64_t)(word[i] - '0');
        }
        if (i == a)
            return rs_err_set(err, RS_ERR_ARG, "expected a shape such as 1x28x28, got " QW, QARG(word, len));
        if (v == 0 && !big)
            return rs_err_set(err, RS_ERR_ARG, "a shape's dimensions are at least 1, got " QW, QARG(word, len));
        if (nd == max)
            return rs_err_set(err, RS_ERR_ARG, QW " has more than %d dimension%s", QARG(word, len), max,
                              max == 1 ? "" : "s");
        if (big || prod > (uint64_t)INT64_MAX / v)
            return rs_err_set(err, RS_ERR_ARG, "shape " QW " is too large", QARG(word, len));
        prod *= v;
        dims[nd++] = (int64_t)v;
        if (i == len) break;
        if (word[i] != 'x' && word[i] != 'X')
            return rs_err_set(err, RS_ERR_ARG, "expected a shape such as 1x28x28, got " QW, QARG(word, len));
        i++;
    }
    *ndim = nd;
    return RS_OK;
}

/* rs_spec_near_miss allows distance 2 for every word and does not say the distance; for short words
 * two edits reach almost anything ("rd" -> "relu"), so those keep its answer only within one edit.
 * This is a linear check, not a second edit distance. */
static bool within_one_edit(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > lb + 1 || lb > la + 1) return false;
    size_t i = 0;
    while (i < la && i < lb && tolower((unsigned char)a[i]) == tolower((unsigned char)b[i])) i++;
    size_t ia = i + (la >= lb), ib = i + (lb >= la); /* skip the differing byte (substitute, drop, add) */
    if (i == la && i == lb) return true;
    if (ia > la || ib > lb) return false;
    return !strcasecmp(a + ia, b + ib);
}

const char *rs_val_near_miss(const char *word, const char *const *cands, int n)
{
    if (!word || !cands || n <= 0) return NULL;
    const char *best = rs_spec_near_miss(word, cands, n);
    if (best && strlen(word) <= 3 && !within_one_edit(word, best)) best = NULL;
    if (best) return best;
    /* an abbreviation (`op=prod`): the one candidate it begins, when only one does */
    size_t wl = strlen(word);
    const char *only = NULL;
    for (int i = 0; wl >= 2 && i < n; i++) {
        if (!cands[i] || strncasecmp(cands[i], word, wl)) continue;
        if (only) return NULL;
        only = cands[i];
    }
    return only;
}

int rs_val_fmt_size(uint64_t bytes, char *buf, size_t n)
{
    static const char units[] = " KMGTPE";
    for (unsigned k = 6; k >= 1; k--) {
        uint64_t unit = UINT64_C(1) << (10 * k);
        if (bytes < unit) continue;
        unsigned long long q = bytes >> (10 * k);
        uint64_t r = bytes & (unit - 1), eighth = unit >> 3;
        if (r == 0) return snprintf(buf, n, "%llu%c", q, units[k]);
        /* r/unit has at most three decimals when r is a multiple of unit/8 (1000 = 8 * 125). */
        if (r % eighth == 0) {
            unsigned thousandths = (unsigned)(r / eighth) * 125;
            char frac[4];
            snprintf(frac, sizeof frac, "%03u", thousandths % 1000);
            for (int j = 2; j > 0 && frac[j] == '0'; j--) frac[j] = '\0';
            return snprintf(buf, n, "%llu.%s%c", q, frac, units[k]);
        }
    }
    return snprintf(buf, n, "%llu", (unsigned long long)bytes);
}

int rs_val_fmt_duration(double seconds, char *buf, size_t n)
{
    if (!isfinite(seconds) || seconds < 0) return c_snprintf(buf, n, "%gs", seconds);
    if (seconds == 0) return snprintf(buf, n, "0s");
    static const struct {
        const char *name;
        double scale;
    } units[] = {{"h", 3600}, {"m", 60}, {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
    int u;
    if (seconds >= 3600 && fmod(seconds, 3600) == 0) u = 0;
    else if (seconds >= 60 && fmod(seconds, 60) == 0) u = 1;
    else if (seconds >= 1) u = 2;
    else if (seconds >= 1e-3) u = 3;
    else if (seconds >= 1e-6) u = 4;
    else u = 5;
    /* The fewest digits that read back to the same double; exponents would not read well. */
    char tmp[64];
    for (int p = 1; p <= 17; p++) {
        c_snprintf(tmp, sizeof tmp, "%.*g%s", p, seconds / units[u].scale, units[u].name);
        double back;
        if (strchr(tmp, 'e') || rs_val_duration(tmp, &back, NULL) != RS_OK || back != seconds) continue;
        return snprintf(buf, n, "%s", tmp);
    }
    return c_snprintf(buf, n, "%.17gs", seconds);
}
