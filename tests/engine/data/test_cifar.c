/* CIFAR-10 binary reader: records written plain and gzip-compressed read back in (3, 32, 32) layout with
 * x/255, several files concatenate in order, and partial records, bad labels, empty files and
 * CIFAR-100 files are rejected with the file, the record and its offset in the message. */
#include <string.h>

#include "engine/data/data.h"
#include "tests/engine/data/datatest.h"

enum { REC = RS_CIFAR_RECORD, NREC = 3 };
static uint8_t recs[NREC * REC + 8];

static uint8_t pixel(int r, int i) { return (uint8_t)((r * 131 + i * 7) ^ (i >> 5)); }

static void check_records(const rs_dataset *d, uint32_t first, int nrec, const char *what)
{
    int bad = 0;
    for (int r = 0; r < nrec; r++) {
        RS_CHECK(d->y[first + r] == (r * 4) % 10, "%s: y[%u]=%d", what, first + r, d->y[first + r]);
        const float *x = d->x + (size_t)(first + r) * 3072;
        /* channel c, row i, column j at c*1024 + i*32 + j, just as the file stores it */
        for (int k = 0; k < 3072; k++) bad += x[k] != (float)pixel(r, k) / 255.0f;
    }
    RS_CHECK(bad == 0, "%s: %d pixel values differ", what, bad);
}

static void test_good(void)
{
    for (int gz = 0; gz < 2; gz++) {
        const char *p = tmp_write(gz ? "data_batch_1.bin.gz" : "data_batch_1.bin", recs, NREC * REC, gz);
        rs_dataset *d = NULL;
        rs_err e = {0};
        const char *paths[] = {p};
        RS_CHECK(rs_data_cifar_load(paths, 1, &d, &e) == RS_OK, "load gz=%d: %s", gz, e.msg);
        if (!d) continue;
        RS_CHECK(d->n == NREC && d->c == 3 && d->h == 32 && d->w == 32 && d->n_classes == 10, "shape");
        RS_CHECK(d->class_names && !strcmp(d->class_names[0], "airplane") &&
                     !strcmp(d->class_names[9], "truck"),
                 "class names");
        RS_CHECK(!strcmp(d->name, "data_batch_1"), "name '%s'", d->name);
        check_records(d, 0, NREC, gz ? "gzip" : "plain");
        rs_dataset_free(d);
    }
    /* two files, in order */
    const char *a = tmp_write("data_batch_2.bin", recs, NREC * REC, false);
    const char *b = tmp_write("data_batch_3.bin", recs, 2 * REC, true);
    const char *paths[] = {a, b};
    rs_dataset *d = NULL;
    rs_err e = {0};
    RS_CHECK(rs_data_cifar_load(paths, 2, &d, &e) == RS_OK, "two files: %s", e.msg);
    if (d) {
        RS_CHECK(d->n == NREC + 2, "n=%u", d->n);
        RS_CHECK(!strcmp(d->name, "cifar10-train"), "name '%s'", d->name);
        check_records(d, 0, NREC, "file 1");
        check_records(d, NREC, 2, "file 2");
        rs_dataset_free(d);
    }
}

static rs_status parse(const uint8_t *buf, size_t len, rs_err *e)
{
    rs_dataset *d = NULL;
    rs_status s = rs_data_cifar_parse(buf, len, "test_batch.bin", &d, e);
    if (s == RS_OK) rs_dataset_free(d);
    else RS_CHECK(d == NULL, "out set after failure");
    return s;
}

static void test_bad(void)
{
    rs_err e = {0};
    EXPECT_ERR(parse(recs, 2 * REC + 100, &e), RS_ERR_FORMAT, e, "test_batch.bin: offset 6146",
               "partial record 2 (100 of 3073 bytes)");
    EXPECT_ERR(parse(recs, 10, &e), RS_ERR_FORMAT, e, "offset 0", "partial record 0");
    EXPECT_ERR(parse(recs, 0, &e), RS_ERR_FORMAT, e, "test_batch.bin: offset 0: file is empty");
    EXPECT_ERR(parse(recs, 3074, &e), RS_ERR_FORMAT, e, "CIFAR-100");

    static uint8_t bad[NREC * REC];
    memcpy(bad, recs, sizeof bad);
    bad[REC] = 10;
    EXPECT_ERR(parse(bad, sizeof bad, &e), RS_ERR_FORMAT, e, "test_batch.bin: offset 3073",
               "record 1 has label 10, not 0..9");
    bad[REC] = 1, bad[2 * REC] = 255;
    EXPECT_ERR(parse(bad, sizeof bad, &e), RS_ERR_FORMAT, e, "offset 6146", "record 2 has label 255");

    /* through files: the failing file is the one named */
    const char *good = tmp_write("ok.bin", recs, REC, false);
    const char *cut = tmp_write("cut.bin", recs, REC + 5, false);
    const char *paths[] = {good, cut};
    rs_dataset *d = NULL;
    EXPECT_ERR(rs_data_cifar_load(paths, 2, &d, &e), RS_ERR_FORMAT, e, cut, "offset 3073",
               "partial record 1 (5 of 3073");
    RS_CHECK(d == NULL, "out set after failure");
    const char *missing[] = {good, tmp_path("nope.bin")};
    EXPECT_ERR(rs_data_cifar_load(missing, 2, &d, &e), RS_ERR_IO, e, "nope.bin", "No such file");
    EXPECT_ERR(rs_data_cifar_load(paths, 0, &d, &e), RS_ERR_ARG, e, "no files");
}

int main(void)
{
    for (int r = 0; r < NREC; r++) {
        recs[r * REC] = (uint8_t)((r * 4) % 10);
        for (int i = 0; i < 3072; i++) recs[r * REC + 1 + i] = pixel(r, i);
    }
    test_good();
    test_bad();
    tmp_cleanup();
    return rs_test_finish("data-cifar");
}
