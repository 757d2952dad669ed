/* The table printer behind runs/history/compare/sql: columns line up, numbers (with short units) are
 * right-aligned, no line ends in spaces, a width limit narrows the widest columns first and cuts cells
 * with "…", and UTF-8 text counts by characters, not bytes. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "repl/slog/table.h"
#include "tests/rs_test.h"

static char *render(const rs_table *t, int width, unsigned flags)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    rs_table_print(f, t, width, flags);
    fclose(f);
    return text;
}

static bool no_trailing_spaces(const char *s)
{
    for (const char *p = s; (p = strchr(p, '\n')); p++)
        if (p > s && p[-1] == ' ') return false;
    return true;
}

/* Longest line in characters (UTF-8 code points). */
static int widest_line(const char *s)
{
    int w = 0, best = 0;
    for (; *s; s++) {
        if (*s == '\n') {
            if (w > best) best = w;
            w = 0;
        } else if (((unsigned char)*s & 0xC0) != 0x80) {
            w++;
        }
    }
    return best;
}

int main(void)
{
    const char *names[] = {"id", "name", "loss", "time", "note"};
    rs_table *t = rs_table_new(5, names);
    RS_CHECK(t != NULL, "new");
    RS_CHECK(rs_table_add(t, (const char *[]){"1", "mlp 784-256-10", "0.084", "12.3s", "fine"}) == RS_OK, "add");
    RS_CHECK(rs_table_add(t, (const char *[]){"12", "conv", "-1e-3", "4m05s", NULL}) == RS_OK, "add with NULL");
    RS_CHECK(rs_table_add(t, (const char *[]){"7", "pérdida ünïcode", "", "97%", "ok"}) == RS_OK, "add");
    char *s = render(t, 0, 0);
    fputs(s, stdout);
    const char *want = "id  name              loss   time  note\n"
                       "--  ---------------  -----  -----  ----\n"
                       " 1  mlp 784-256-10   0.084  12.3s  fine\n"
                       "12  conv             -1e-3  4m05s\n"
                       " 7  pérdida ünïcode           97%  ok\n";
    RS_CHECK(strcmp(s, want) == 0, "layout:\n%s\nwant:\n%s", s, want);
    RS_CHECK(no_trailing_spaces(s), "no trailing spaces");
    free(s);

    s = render(t, 30, 0);
    fputs(s, stdout);
    RS_CHECK(widest_line(s) <= 30, "fits 30 columns: %d", widest_line(s));
    RS_CHECK(strstr(s, "mlp 7…") != NULL, "the widest column gave way, cut with …");
    RS_CHECK(strstr(s, "12.3s") != NULL, "narrow columns kept whole");
    free(s);

    s = render(t, 0, RS_TABLE_NO_HEADER);
    RS_CHECK(strncmp(s, " 1  mlp", 7) == 0, "no header: %s", s);
    free(s);

    rs_table_set_align(t, 0, RS_TABLE_LEFT);
    s = render(t, 0, 0);
    RS_CHECK(strstr(s, "\n1   mlp") != NULL, "forced left: %s", s);
    free(s);

    RS_CHECK(rs_table_nrows(t) == 3 && rs_table_ncols(t) == 5, "sizes");
    RS_CHECK(strcmp(rs_table_cell(t, 1, 4), "") == 0 && strcmp(rs_table_cell(t, 9, 0), "") == 0,
             "NULL and out of range");
    RS_CHECK(rs_table_find(t, "12") == 1 && rs_table_find(t, "x") == -1, "find");
    rs_table_free(t);
    rs_table_free(NULL);

    /* Dates and layer lists are text, not numbers. */
    t = rs_table_new(2, (const char *[]){"started", "spec"});
    rs_table_add(t, (const char *[]){"2025-01-02 14:03", "784-256-10"});
    rs_table_add(t, (const char *[]){"2025-11-20 09:00", "10"});
    s = render(t, 0, 0);
    RS_CHECK(strstr(s, "\n2025-01-02 14:03  784-256-10\n2025-11-20 09:00  10\n") != NULL, "left: %s", s);
    free(s);
    rs_table_free(t);
    return rs_test_finish("table");
}
