/* Aligned text tables for the REPL: column names and rows of text in, columns lined up out, numbers
 * right-aligned, cut to a terminal width. `runs`, `history`, `compare` and `sql` all print through it,
 * so every listing in ringside looks alike. */
#ifndef RS_TABLE_H
#define RS_TABLE_H

#include <stdbool.h>

#include <stddef.h>
#include <stdio.h>

#include "engine/core/status.h"

typedef struct rs_table rs_table;

typedef enum rs_table_align {
    RS_TABLE_AUTO = 0, /* right when every non-empty cell is a number (units allowed: 12.5s, 97%) */
    RS_TABLE_LEFT,
    RS_TABLE_RIGHT,
} rs_table_align;

enum {
    RS_TABLE_NO_HEADER = 1u << 0, /* rows only (key/value listings) */
};

/* A table with ncols columns named names[0..ncols) (copied; NULL names are empty). The caller owns it
 * (rs_table_free). NULL when out of memory. */
rs_table *rs_table_new(int ncols, const char *const *names);
void rs_table_free(rs_table *t);

/* Appends a row of ncols cells (copied; a NULL cell is empty). RS_ERR_NOMEM. */
rs_status rs_table_add(rs_table *t, const char *const *cells);
void rs_table_set_align(rs_table *t, int col, rs_table_align align);
/* A column that keeps its full width when rs_table_print narrows the table (short, telling ones:
 * kind, status, time); the others give way. */
void rs_table_set_keep(rs_table *t, int col, bool keep);

int rs_table_ncols(const rs_table *t);
size_t rs_table_nrows(const rs_table *t);
const char *rs_table_name(const rs_table *t, int col);
const char *rs_table_cell(const rs_table *t, size_t row, int col); /* "" out of range */
/* The row whose first cell is key, or -1: handy for key/value tables in tests and callers. */
long rs_table_find(const rs_table *t, const char *key);

/* Prints the header, a rule of dashes and the rows, columns two spaces apart, no trailing spaces.
 * With max_width > 0 the widest columns are narrowed until a line fits, and cells cut there end in
 * "…". Widths count UTF-8 code points. */
void rs_table_print(FILE *f, const rs_table *t, int max_width, unsigned flags);

#endif
