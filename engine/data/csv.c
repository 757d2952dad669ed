/* CSV data sets: one sample per row, numeric feature columns and one integer label column. Two passes
 * over the text with the same code: the first validates and counts (every error comes from it, with
 * file, line, column and byte offset), the second fills a data set allocated once at the right size. */
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/data.h"
#include "engine/data/internal.h"

#define CSV_NUM_MAX 128      /* longest field read as a number */
#define CSV_LABEL_MAX 65535  /* labels are class indices; a larger one is a wrong column, not a class */

typedef struct csv {
    const char *buf;
    size_t len;
    const char *name;
    char delim;
    rs_csv_header header;
    int label_opt;
    double scale;
    locale_t c_locale;      /* "C" numbers whatever the process locale is; (locale_t)0 if unavailable */
    /* found by the first pass */
    size_t data_start;      /* offset of the line after the header (or of the first line) */
    size_t data_line;       /* its line number, 1-based */
    size_t first_line;      /* line number of the row that fixed the column count */
    int cols, label_col;
    uint32_t rows;
    int32_t max_label;
} csv;

typedef struct field {
    size_t off;  /* where the field starts, for messages */
    size_t a, b; /* its value: bytes [a, b), quotes and surrounding blanks removed */
} field;

static bool is_blank(const csv *c, char ch) { return (ch == ' ' || ch == '\t') && ch != c->delim; }

/* Reads the field starting at *p on a line ending at e. Returns 1 if another field follows, 0 if this
 * was the last, -1 on a quoting error (err set). */
static int next_field(const csv *c, size_t *p, size_t e, field *f, size_t line, int col, rs_err *err)
{
    const char *s = c->buf;
    size_t q = *p;
    f->off = q;
    while (q < e && is_blank(c, s[q])) q++;
    if (q < e && s[q] == '"') {
        f->a = ++q;
        while (q < e && !(s[q] == '"' && !(q + 1 < e && s[q + 1] == '"'))) q += s[q] == '"' ? 2 : 1;
        if (q >= e) {
            rs_err_set(err, RS_ERR_FORMAT,
                       "%s: line %zu, column %d (offset %zu): quoted field is not closed on its line; "
                       "ringside's CSV reader does not take line breaks inside quotes",
                       c->name, line, col, f->off);
            return -1;
        }
        f->b = q++;
        while (q < e && is_blank(c, s[q])) q++;
        if (q < e && s[q] != c->delim) {
            rs_err_set(err, RS_ERR_FORMAT,
                       "%s: line %zu, column %d (offset %zu): text after the closing quote; a quoted "
                       "field ends at its quote",
                       c->name, line, col, q);
            return -1;
        }
    } else {
        f->a = q;
        while (q < e && s[q] != c->delim) q++;
        f->b = q;
        while (f->b > f->a && is_blank(c, s[f->b - 1])) f->b--;
    }
    if (q < e) {
        *p = q + 1;
        return 1;
    }
    *p = e;
    return 0;
}

/* A decimal number: [+-] digits [. digits] [e [+-] digits], at least one digit in the mantissa. No
 * inf, nan or hex: in a data file those are mistakes to report, not values. */
static bool parse_num(const csv *c, const char *s, size_t n, double *v)
{
    if (n == 0 || n >= CSV_NUM_MAX) return false;
    size_t i = 0, digits = 0;
    if (s[i] == '+' || s[i] == '-') i++;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++, digits++;
    if (i < n && s[i] == '.')
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) digits++;
    if (!digits) return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t ed = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++, ed++;
        if (!ed) return false;
    }
    if (i != n) return false;
    char tmp[CSV_NUM_MAX];
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    locale_t old = c->c_locale ? uselocale(c->c_locale) : (locale_t)0;
    char *end;
    *v = strtod(tmp, &end);
    if (old) uselocale(old);
    return end == tmp + n && isfinite(*v);
}

static rs_status bad_number(const csv *c, const field *f, size_t line, int col, bool label, rs_err *err)
{
    int shown = (int)(f->b - f->a < 40 ? f->b - f->a : 40);
    const char *txt = c->buf + f->a;
    if (label)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: line %zu, column %d (offset %zu): label '%.*s' is not an integer 0..%d; "
                          "the label column holds class indices (choose it with label=N, -1 = last)",
                          c->name, line, col, f->off, shown, txt, CSV_LABEL_MAX);
    if (f->a == f->b)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: line %zu, column %d (offset %zu): empty field; every feature must be a "
                          "number (fill in missing values first)",
                          c->name, line, col, f->off);
    return rs_err_set(err, RS_ERR_FORMAT,
                      "%s: line %zu, column %d (offset %zu): '%.*s' is not a number; features must be "
                      "decimal numbers such as 0.5 or -1e3",
                      c->name, line, col, f->off, shown, txt);
}

/* Finds the next non-blank line from *p: its bounds [s, e) without the newline and a trailing CR.
 * Returns false at the end of the text. Advances *p and *line past it. */
static bool next_line(const csv *c, size_t *p, size_t *line, size_t *s, size_t *e)
{
    while (*p < c->len) {
        const char *nl = memchr(c->buf + *p, '\n', c->len - *p);
        size_t a = *p, b = nl ? (size_t)(nl - c->buf) : c->len;
        *p = nl ? b + 1 : c->len;
        (*line)++;
        size_t t = b;
        if (t > a && c->buf[t - 1] == '\r') t--;
        for (size_t i = a; i < t; i++)
            if (c->buf[i] != ' ' && c->buf[i] != '\t' && c->buf[i] != '\r') {
                *s = a;
                *e = t;
                return true;
            }
    }
    return false;
}

/* Counts the fields of [s, e) and reports whether all are numbers. */
static rs_status scan_first(const csv *c, size_t s, size_t e, size_t line, int *nf, bool *numeric,
                            rs_err *err)
{
    size_t p = s;
    int more = 1, col = 0;
    *numeric = true;
    while (more) {
        field f;
        if ((more = next_field(c, &p, e, &f, line, col + 1, err)) < 0) return RS_ERR_FORMAT;
        double v;
        if (!parse_num(c, c->buf + f.a, f.b - f.a, &v)) *numeric = false;
        col++;
    }
    *nf = col;
    return RS_OK;
}

/* Pass 1 (d == NULL): finds the header, the column count and the label range, validating every row.
 * Pass 2: fills d. */
static rs_status csv_rows(csv *c, rs_dataset *d, rs_err *err)
{
    size_t p = c->data_start, line = c->data_line - 1, s, e;
    uint32_t row = 0;
    int nfeat = c->cols - 1;
    while (next_line(c, &p, &line, &s, &e)) {
        size_t q = s;
        int more = 1, col = 0, k = 0;
        while (more) {
            field f;
            if (col == c->cols)
                return rs_err_set(err, RS_ERR_FORMAT,
                                  "%s: line %zu, column %d (offset %zu): row has more than %d fields but "
                                  "line %zu has %d; every row needs the same number",
                                  c->name, line, col + 1, q, c->cols, c->first_line, c->cols);
            if ((more = next_field(c, &q, e, &f, line, col + 1, err)) < 0) return RS_ERR_FORMAT;
            double v;
            bool ok = parse_num(c, c->buf + f.a, f.b - f.a, &v);
            if (col == c->label_col) {
                if (!ok || v < 0 || v > CSV_LABEL_MAX || v != floor(v))
                    return bad_number(c, &f, line, col + 1, true, err);
                if (d) d->y[row] = (int32_t)v;
                else if ((int32_t)v > c->max_label) c->max_label = (int32_t)v;
            } else {
                if (!ok) return bad_number(c, &f, line, col + 1, false, err);
                double fv = v / c->scale;
                if (!(fabs(fv) <= FLT_MAX))
                    return rs_err_set(err, RS_ERR_FORMAT,
                                      "%s: line %zu, column %d (offset %zu): %.*s%s does not fit a float "
                                      "(at most 3.4e38); rescale the column",
                                      c->name, line, col + 1, f.off, (int)(f.b - f.a < 40 ? f.b - f.a : 40),
                                      c->buf + f.a, c->scale != 1 ? " divided by the scale" : "");
                if (d) d->x[(size_t)row * nfeat + k] = (float)fv;
                k++;
            }
            col++;
        }
        if (col < c->cols)
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s: line %zu (offset %zu): row has %d field%s but line %zu has %d; every "
                              "row needs the same number",
                              c->name, line, s, col, col == 1 ? "" : "s", c->first_line, c->cols);
        if (row == UINT32_MAX)
            return rs_err_set(err, RS_ERR_FORMAT, "%s: line %zu: more rows than a data set holds", c->name,
                              line);
        row++;
    }
    c->rows = row;
    return RS_OK;
}

static rs_status csv_parse(csv *c, rs_dataset **out, rs_err *err)
{
    size_t p = 0, line = 0, s, e;
    if (c->len >= 3 && !memcmp(c->buf, "\xEF\xBB\xBF", 3)) p = 3; /* UTF-8 byte order mark */
    if (!next_line(c, &p, &line, &s, &e))
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset %zu: file is empty; a CSV data set has one row per sample: numeric "
                          "features and an integer label",
                          c->name, c->len);
    int nf;
    bool numeric;
    rs_status st = scan_first(c, s, e, line, &nf, &numeric, err);
    if (st) return st;
    bool header = c->header == RS_CSV_HEADER_YES || (c->header == RS_CSV_HEADER_AUTO && !numeric);
    c->cols = nf;
    c->first_line = line;
    c->data_start = header ? p : s;
    c->data_line = header ? line + 1 : line;
    if (nf < 2) {
        const char *hint = memchr(c->buf + s, ';', e - s)    ? " (is the delimiter ';'?)"
                           : memchr(c->buf + s, '\t', e - s) ? " (is the delimiter a tab?)"
                                                             : "";
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: line %zu (offset %zu): rows have 1 field; a CSV data set needs feature "
                          "columns and a label column%s",
                          c->name, line, s, hint);
    }
    c->label_col = c->label_opt < 0 ? c->label_opt + nf : c->label_opt;
    if (c->label_col < 0 || c->label_col >= nf)
        return rs_err_set(err, RS_ERR_ARG,
                          "%s: label column %d is out of range: line %zu has %d columns (0..%d, or -1..-%d "
                          "from the end)",
                          c->name, c->label_opt, line, nf, nf - 1, nf);
    c->max_label = -1;
    if ((st = csv_rows(c, NULL, err))) return st;
    if (c->rows == 0)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset %zu: no data rows after the header (line %zu); a CSV data set has "
                          "one row per sample",
                          c->name, c->len, c->first_line);
    rs_dataset *d = rs_dataset_new(c->rows, 1, 1, nf - 1, c->max_label + 1); /* caller owns */
    if (!d)
        return rs_err_set(err, RS_ERR_NOMEM, "%s: cannot allocate %u x %d floats", c->name, c->rows,
                          nf - 1);
    if ((st = csv_rows(c, d, err))) { /* cannot fail after pass 1, but never hide it if it does */
        rs_dataset_free(d);
        return st;
    }
    rs_data_name_from_path(d, c->name);
    rs_data_add_source(d, c->name);
    *out = d;
    return RS_OK;
}

rs_status rs_data_csv_parse(const char *buf, size_t len, const char *name, const rs_csv_opts *opts,
                            rs_dataset **out, rs_err *err)
{
    *out = NULL;
    rs_csv_opts o = opts ? *opts : (rs_csv_opts){0};
    csv c = {.buf = buf, .len = len, .name = name, .delim = o.delimiter ? o.delimiter : ',',
             .header = o.header, .label_opt = o.label_col, .scale = o.scale != 0 ? o.scale : 1.0};
    if (len > RS_DATA_FILE_MAX)
        return rs_err_set(err, RS_ERR_ARG, "%s: %zu bytes is more than a data file may hold (%zu)", name,
                          len, RS_DATA_FILE_MAX);
    if (c.delim == '"' || c.delim == '\n' || c.delim == '\r')
        return rs_err_set(err, RS_ERR_ARG, "%s: delimiter %s cannot separate fields; use ',', ';' or a tab",
                          name, c.delim == '"' ? "'\"'" : "newline");
    if (!isfinite(c.scale))
        return rs_err_set(err, RS_ERR_ARG, "%s: scale must be a finite non-zero number", name);
    if ((unsigned)c.header > RS_CSV_HEADER_NO)
        return rs_err_set(err, RS_ERR_ARG, "%s: header must be auto, yes or no", name);
    c.c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); /* ours, freed below */
    rs_status s = csv_parse(&c, out, err);
    if (c.c_locale) freelocale(c.c_locale);
    return s;
}

rs_status rs_data_csv_load(const char *path, const rs_csv_opts *opts, rs_dataset **out, rs_err *err)
{
    *out = NULL;
    uint8_t *buf; /* ours */
    size_t len;
    rs_status s = rs_data_read_file(path, 0, &buf, &len, err);
    if (s) return s;
    s = rs_data_csv_parse((const char *)buf, len, path, opts, out, err);
    free(buf);
    return s;
}
