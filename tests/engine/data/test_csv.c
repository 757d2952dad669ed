/* CSV reader: values, label column (also counted from the end), header detection, delimiters, CRLF,
 * blank lines, quotes and scale; malformed input is rejected with file, line, column and byte offset. */
#include <locale.h>
#include <string.h>

#include "engine/data/data.h"
#include "tests/engine/data/datatest.h"

/* Parses text; on success checks rows x features and returns the data set (caller frees). */
static rs_dataset *parse(const char *text, const rs_csv_opts *o, uint32_t n, int f, rs_err *e)
{
    rs_dataset *d = NULL;
    rs_status s = rs_data_csv_parse(text, strlen(text), "t.csv", o, &d, e);
    RS_CHECK(s == RS_OK, "parse: %s", e->msg);
    if (!d) return NULL;
    RS_CHECK(d->n == n && d->c == 1 && d->h == 1 && d->w == f, "shape: n=%u (%d,%d,%d), want n=%u (1,1,%d)",
             d->n, d->c, d->h, d->w, n, f);
    return d;
}

static rs_status fail(const char *text, const rs_csv_opts *o, rs_err *e)
{
    rs_dataset *d = NULL;
    rs_status s = rs_data_csv_parse(text, strlen(text), "t.csv", o, &d, e);
    RS_CHECK(s != RS_OK, "'%s' parsed", text);
    RS_CHECK(d == NULL, "out set after failure");
    rs_dataset_free(d);
    return s;
}

static void test_values(void)
{
    rs_err e = {0};
    rs_dataset *d = parse("1,2,3\n4,5.5,-6e-1\n", NULL, 2, 2, &e);
    if (d) {
        RS_CHECK(d->y[0] == 1 && d->y[1] == 4 && d->n_classes == 5, "labels %d %d, n_classes %d", d->y[0],
                 d->y[1], d->n_classes);
        RS_CHECK(d->x[0] == 2 && d->x[1] == 3 && d->x[2] == 5.5f && d->x[3] == (float)-0.6, "features");
        RS_CHECK(!strcmp(d->name, "t"), "name '%s'", d->name);
        rs_dataset_free(d);
    }
    /* the label column counted from the end, scale, and numbers rounded once from double */
    d = parse("0.1,25.5,2\n255,0,0\n", &(rs_csv_opts){.label_col = -1, .scale = 255}, 2, 2, &e);
    if (d) {
        RS_CHECK(d->y[0] == 2 && d->y[1] == 0 && d->n_classes == 3, "labels");
        RS_CHECK(d->x[0] == (float)(0.1 / 255) && d->x[1] == (float)(25.5 / 255) && d->x[2] == 1.0f,
                 "scaled %.9g %.9g %.9g", d->x[0], d->x[1], d->x[2]);
        rs_dataset_free(d);
    }
    d = parse("9,8,7,1\n", &(rs_csv_opts){.label_col = 2}, 1, 3, &e);
    if (d) {
        RS_CHECK(d->y[0] == 7 && d->x[0] == 9 && d->x[1] == 8 && d->x[2] == 1, "label in the middle");
        rs_dataset_free(d);
    }
    /* integral labels written as floats are accepted */
    d = parse("3.0,1\n2e0,1\n", NULL, 2, 1, &e);
    if (d) RS_CHECK(d->y[0] == 3 && d->y[1] == 2, "float-written labels");
    rs_dataset_free(d);
}

static void test_layout(void)
{
    rs_err e = {0};
    /* header detected; CRLF; BOM; blanks around fields; blank lines inside and at the end */
    rs_dataset *d = parse("\xEF\xBB\xBFlabel,a,b\r\n1, 0.5 ,2\r\n\r\n  \r\n0,1,\t3\r\n\r\n\n", NULL, 2, 2, &e);
    if (d) {
        RS_CHECK(d->y[0] == 1 && d->x[0] == 0.5f && d->x[1] == 2 && d->y[1] == 0 && d->x[3] == 3, "values");
        rs_dataset_free(d);
    }
    /* no trailing newline; no header when the first row is numeric */
    d = parse("1,2\n3,4", NULL, 2, 1, &e);
    rs_dataset_free(d);
    /* header forced on a numeric first row */
    d = parse("0,1\n1,5\n", &(rs_csv_opts){.header = RS_CSV_HEADER_YES}, 1, 1, &e);
    if (d) RS_CHECK(d->y[0] == 1 && d->x[0] == 5, "forced header");
    rs_dataset_free(d);
    /* quoted numbers and a quoted header with the delimiter inside */
    d = parse("\"y\",\"a,b\",\"c \"\"q\"\"\"\n\"1\", \"2.5\" ,3\n", NULL, 1, 2, &e);
    if (d) RS_CHECK(d->y[0] == 1 && d->x[0] == 2.5f && d->x[1] == 3, "quoted");
    rs_dataset_free(d);
    /* other delimiters */
    d = parse("1;2;3\n0;4;5\n", &(rs_csv_opts){.delimiter = ';'}, 2, 2, &e);
    if (d) RS_CHECK(d->x[3] == 5, "semicolon");
    rs_dataset_free(d);
    d = parse("1\t2\n0\t 4\n", &(rs_csv_opts){.delimiter = '\t'}, 2, 1, &e);
    if (d) RS_CHECK(d->x[1] == 4, "tab");
    rs_dataset_free(d);
}

static void test_errors(void)
{
    rs_err e = {0};
    /* offsets: line 3 starts at byte 12 */
    EXPECT_ERR(fail("1,2,3\n4,5,6\n7,8\n", NULL, &e), RS_ERR_FORMAT, e,
               "t.csv: line 3 (offset 12): row has 2 fields but line 1 has 3");
    EXPECT_ERR(fail("1,2,3\n4,5,6,7\n", NULL, &e), RS_ERR_FORMAT, e,
               "t.csv: line 2, column 4 (offset 12): row has more than 3 fields");
    EXPECT_ERR(fail("a,b,c\n1,2,3\n4,x1,6\n", NULL, &e), RS_ERR_FORMAT, e,
               "t.csv: line 3, column 2 (offset 14): 'x1' is not a number");
    EXPECT_ERR(fail("1,2\n2.5,3\n", NULL, &e), RS_ERR_FORMAT, e,
               "t.csv: line 2, column 1 (offset 4): label '2.5' is not an integer");
    EXPECT_ERR(fail("1,2\n-1,3\n", NULL, &e), RS_ERR_FORMAT, e, "line 2, column 1", "label '-1'");
    EXPECT_ERR(fail("1,2\n70000,3\n", NULL, &e), RS_ERR_FORMAT, e, "label '70000'", "0..65535");
    EXPECT_ERR(fail("1,2\n1,nan\n", NULL, &e), RS_ERR_FORMAT, e, "line 2, column 2", "'nan' is not a number");
    EXPECT_ERR(fail("1,2\n1,1e999\n", NULL, &e), RS_ERR_FORMAT, e, "'1e999' is not a number");
    EXPECT_ERR(fail("2,6e122\n", NULL, &e), RS_ERR_FORMAT, e, "line 1, column 2 (offset 2): 6e122 does not fit a float");
    EXPECT_ERR(fail("2,1e300\n", &(rs_csv_opts){.scale = 1e-300}, &e), RS_ERR_FORMAT, e, "divided by the scale");
    EXPECT_ERR(fail("1,2\n1,0x10\n", NULL, &e), RS_ERR_FORMAT, e, "'0x10'");
    EXPECT_ERR(fail("1,2,3\n1,,3\n", NULL, &e), RS_ERR_FORMAT, e, "line 2, column 2 (offset 8): empty field");
    EXPECT_ERR(fail("", NULL, &e), RS_ERR_FORMAT, e, "t.csv: offset 0: file is empty");
    EXPECT_ERR(fail("\n\r\n  \n", NULL, &e), RS_ERR_FORMAT, e, "t.csv: offset 6: file is empty");
    EXPECT_ERR(fail("a,b\n\n", NULL, &e), RS_ERR_FORMAT, e, "no data rows");
    EXPECT_ERR(fail("1,2\n", &(rs_csv_opts){.label_col = 2}, &e), RS_ERR_ARG, e, "label column 2 is out of range",
               "2 columns");
    EXPECT_ERR(fail("1,2\n", &(rs_csv_opts){.label_col = -3}, &e), RS_ERR_ARG, e, "label column -3");
    EXPECT_ERR(fail("1;2\n0;3\n", NULL, &e), RS_ERR_FORMAT, e, "line 1", "1 field", "delimiter ';'");
    EXPECT_ERR(fail("1,\"2\n", NULL, &e), RS_ERR_FORMAT, e, "line 1, column 2 (offset 2)", "not closed");
    EXPECT_ERR(fail("1,\"2\"x\n", NULL, &e), RS_ERR_FORMAT, e, "line 1, column 2 (offset 5)", "closing quote");
    EXPECT_ERR(fail("y,x\nfoo,1\n", &(rs_csv_opts){.header = RS_CSV_HEADER_NO}, &e), RS_ERR_FORMAT, e,
               "line 1, column 1 (offset 0): label 'y'");
    EXPECT_ERR(fail("1,2\n", &(rs_csv_opts){.delimiter = '"'}, &e), RS_ERR_ARG, e, "delimiter");
}

static void test_files(void)
{
    const char *text = "sepal,petal,species\r\n5.1,1.4,0\r\n7.0,4.7,1\r\n6.3,6.0,2\r\n";
    for (int gz = 0; gz < 2; gz++) {
        const char *p = tmp_write(gz ? "iris.csv.gz" : "iris.csv", text, strlen(text), gz);
        rs_dataset *d = NULL;
        rs_err e = {0};
        RS_CHECK(rs_data_csv_load(p, &(rs_csv_opts){.label_col = -1}, &d, &e) == RS_OK, "load: %s", e.msg);
        if (!d) continue;
        RS_CHECK(d->n == 3 && d->w == 2 && d->n_classes == 3 && d->y[2] == 2 && d->x[5] == 6.0f, "iris");
        RS_CHECK(!strcmp(d->name, "iris"), "name '%s'", d->name);
        rs_dataset_free(d);
    }
    const char *bad = tmp_write("bad.csv", "1,2\n3\n", 6, false);
    rs_dataset *d = NULL;
    rs_err e = {0};
    EXPECT_ERR(rs_data_csv_load(bad, NULL, &d, &e), RS_ERR_FORMAT, e, bad, "line 2 (offset 4)");
}

/* Numbers are read in the C locale even when the process uses a decimal comma. */
static void test_locale(void)
{
    const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", NULL};
    const char *got = NULL;
    for (int i = 0; names[i] && !got; i++) got = setlocale(LC_NUMERIC, names[i]);
    if (!got) {
        printf("  (no decimal-comma locale installed; the locale check ran in C only)\n");
        return;
    }
    rs_err e = {0};
    rs_dataset *d = parse("1,0.5\n", NULL, 1, 1, &e);
    if (d) RS_CHECK(d->x[0] == 0.5f, "0.5 under %s read as %g", got, d->x[0]);
    rs_dataset_free(d);
    setlocale(LC_NUMERIC, "C");
}

int main(void)
{
    test_values();
    test_layout();
    test_errors();
    test_files();
    test_locale();
    tmp_cleanup();
    return rs_test_finish("data-csv");
}
