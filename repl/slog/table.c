/* Aligned text tables (see table.h). Cells are kept as copied strings; widths are worked out only
 * when printing, so a caller can add rows as they come from a query. */
#include "repl/slog/table.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct rs_table {
    int ncols;
    char **names;          /* (ncols) */
    rs_table_align *align; /* (ncols) */
    bool *keep;            /* (ncols) never narrowed to fit a width */
    char **cells;          /* (nrows * ncols), row-major */
    size_t nrows, cap;     /* cap in rows */
};

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

rs_table *rs_table_new(int ncols, const char *const *names)
{
    if (ncols < 1) return NULL;
    rs_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ncols = ncols;
    t->names = calloc((size_t)ncols, sizeof *t->names);
    t->align = calloc((size_t)ncols, sizeof *t->align);
    t->keep = calloc((size_t)ncols, sizeof *t->keep);
    if (!t->names || !t->align || !t->keep) goto fail;
    for (int c = 0; c < ncols; c++)
        if (!(t->names[c] = dup_or_empty(names ? names[c] : NULL))) goto fail;
    return t;
fail:
    rs_table_free(t);
    return NULL;
}

void rs_table_free(rs_table *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
    free(t->cells);
    if (t->names)
        for (int c = 0; c < t->ncols; c++) free(t->names[c]);
    free(t->names);
    free(t->align);
    free(t->keep);
    free(t);
}

rs_status rs_table_add(rs_table *t, const char *const *cells)
{
    if (!t) return RS_ERR_ARG;
    size_t nc = (size_t)t->ncols;
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        char **p = realloc(t->cells, cap * nc * sizeof *p);
        if (!p) return RS_ERR_NOMEM;
        t->cells = p;
        t->cap = cap;
    }
    char **row = t->cells + t->nrows * nc;
    for (size_t c = 0; c < nc; c++) {
        if (!(row[c] = dup_or_empty(cells ? cells[c] : NULL))) {
            while (c--) free(row[c]);
            return RS_ERR_NOMEM;
        }
    }
    t->nrows++;
    return RS_OK;
}

void rs_table_set_align(rs_table *t, int col, rs_table_align align)
{
    if (t && col >= 0 && col < t->ncols) t->align[col] = align;
}

void rs_table_set_keep(rs_table *t, int col, bool keep)
{
    if (t && col >= 0 && col < t->ncols) t->keep[col] = keep;
}

int rs_table_ncols(const rs_table *t)
{
    return t ? t->ncols : 0;
}
size_t rs_table_nrows(const rs_table *t)
{
    return t ? t->nrows : 0;
}

const char *rs_table_name(const rs_table *t, int col)
{
    return t && col >= 0 && col < t->ncols ? t->names[col] : "";
}

const char *rs_table_cell(const rs_table *t, size_t row, int col)
{
    if (!t || row >= t->nrows || col < 0 || col >= t->ncols) return "";
    return t->cells[row * (size_t)t->ncols + (size_t)col];
}

long rs_table_find(const rs_table *t, const char *key)
{
    for (size_t r = 0; t && key && r < t->nrows; r++)
        if (strcmp(rs_table_cell(t, r, 0), key) == 0) return (long)r;
    return -1;
}

/* Display width in UTF-8 code points: continuation bytes (10xxxxxx) do not count. Wide CJK glyphs are
 * counted as one; the REPL's text is overwhelmingly ASCII and this keeps the module locale-free. */
static size_t u8_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

/* Bytes of s that hold its first n code points. */
static size_t u8_prefix(const char *s, size_t n)
{
    size_t i = 0;
    while (s[i] && n) {
        i++;
        while (((unsigned char)s[i] & 0xC0) == 0x80) i++;
        n--;
    }
    return i;
}

/* A number, optionally signed, with at most a short unit after it: 42, -0.5, 1e-3, 12.5s, 97.1%,
 * 4m05s, 16M. Dates ("2025-01-02 14:03") and layer lists ("784-256-10") are not. */
static bool is_numeric(const char *s)
{
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    if (*p == '.') p++;
    if (*p < '0' || *p > '9') return false;
    char *end;
    strtod(s, &end);
    if (end == s) return false;
    size_t rest = strlen(end);
    return rest <= 4 && !strpbrk(end, " -:/+");
}

static bool right_aligned(const rs_table *t, int c)
{
    if (t->align[c] != RS_TABLE_AUTO) return t->align[c] == RS_TABLE_RIGHT;
    bool any = false;
    for (size_t r = 0; r < t->nrows; r++) {
        const char *s = rs_table_cell(t, r, c);
        if (!*s) continue;
        if (!is_numeric(s)) return false;
        any = true;
    }
    return any;
}

/* Writes s in a field of width w: cut with "…" when longer, padded on the side alignment asks for;
 * the last column gets no padding on the right so lines carry no trailing spaces. */
static void put_cell(FILE *f, const char *s, size_t w, bool right, bool last)
{
    size_t sw = u8_width(s);
    if (sw > w) {
        fwrite(s, 1, u8_prefix(s, w ? w - 1 : 0), f);
        if (w) fputs("\xE2\x80\xA6", f);
        return;
    }
    if (right) fprintf(f, "%*s", (int)(w - sw), "");
    fputs(s, f);
    if (!right && !last) fprintf(f, "%*s", (int)(w - sw), "");
}

static void put_row(FILE *f, const rs_table *t, char *const *cells, const size_t *w, const bool *right)
{
    /* Trailing empty cells would leave spaces at the end of the line: stop before them. */
    int last = t->ncols - 1;
    while (last > 0 && !*cells[last]) last--;
    for (int c = 0; c <= last; c++) {
        if (c) fputs("  ", f);
        put_cell(f, cells[c], w[c], right[c], c == last);
    }
    fputc('\n', f);
}

void rs_table_print(FILE *f, const rs_table *t, int max_width, unsigned flags)
{
    if (!f || !t) return;
    int nc = t->ncols;
    size_t *w = calloc((size_t)nc, sizeof *w);
    bool *right = calloc((size_t)nc, sizeof *right);
    if (!w || !right) {
        free(w);
        free(right);
        return;
    }
    bool header = !(flags & RS_TABLE_NO_HEADER);
    for (int c = 0; c < nc; c++) {
        right[c] = right_aligned(t, c);
        if (header) w[c] = u8_width(t->names[c]);
        for (size_t r = 0; r < t->nrows; r++) {
            size_t cw = u8_width(rs_table_cell(t, r, c));
            if (cw > w[c]) w[c] = cw;
        }
    }
    if (max_width > 0) {
        /* Narrow the widest column one step at a time: the columns that hold free text (commands,
         * specs, JSON) give way first and short ones stay readable. */
        size_t total = 2 * (size_t)(nc - 1);
        for (int c = 0; c < nc; c++) total += w[c];
        const size_t min_w = 4;
        while (total > (size_t)max_width) {
            int widest = -1;
            for (int c = 0; c < nc; c++)
                if (!t->keep[c] && w[c] > min_w && (widest < 0 || w[c] > w[widest])) widest = c;
            if (widest < 0) break;
            w[widest]--;
            total--;
        }
    }
    if (header) {
        put_row(f, t, t->names, w, right);
        for (int c = 0; c < nc; c++) {
            if (c) fputs("  ", f);
            for (size_t i = 0; i < w[c]; i++) fputc('-', f);
        }
        fputc('\n', f);
    }
    for (size_t r = 0; r < t->nrows; r++) put_row(f, t, t->cells + r * (size_t)nc, w, right);
    free(w);
    free(right);
}
