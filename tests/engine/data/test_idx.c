/* IDX reader: small files written plain and gzip-compressed read back exactly, and every kind of
 * malformed file is rejected with a message that names the file, the offset and the fault. Also the
 * whole-file reader underneath (size cap, missing file, directory, corrupt gzip). */
#include <string.h>
#include <sys/stat.h>

#include "engine/data/data.h"
#include "tests/engine/data/datatest.h"

/* An IDX file in buf: magic type 0x08, nd dims, then the elements from data. Returns its length. */
static size_t make_idx(uint8_t *buf, int nd, const uint32_t *dims, const uint8_t *data, size_t n)
{
    buf[0] = buf[1] = 0;
    buf[2] = 0x08;
    buf[3] = (uint8_t)nd;
    for (int i = 0; i < nd; i++) {
        uint8_t *p = buf + 4 + 4 * i;
        p[0] = (uint8_t)(dims[i] >> 24), p[1] = (uint8_t)(dims[i] >> 16);
        p[2] = (uint8_t)(dims[i] >> 8), p[3] = (uint8_t)dims[i];
    }
    memcpy(buf + 4 + 4 * nd, data, n);
    return 4 + 4 * (size_t)nd + n;
}

enum { N = 3, R = 2, C = 4 };
static uint8_t pix[N * R * C];
static const uint8_t lbls[N] = {0, 7, 3};
static uint8_t img[64], lab[64];
static size_t img_len, lab_len;

static void check_dataset(const rs_dataset *d, const char *what)
{
    RS_CHECK(d->n == N && d->c == 1 && d->h == R && d->w == C, "%s: shape n=%u (%d,%d,%d)", what, d->n, d->c,
             d->h, d->w);
    RS_CHECK(d->n_classes == 10, "%s: n_classes %d, want 10 (max label 7, at least 10)", what, d->n_classes);
    int bad = 0;
    for (int i = 0; i < N * R * C; i++) bad += d->x[i] != (float)pix[i] / 255.0f;
    RS_CHECK(bad == 0, "%s: %d pixels differ from x/255", what, bad);
    for (int i = 0; i < N; i++) RS_CHECK(d->y[i] == lbls[i], "%s: y[%d]=%d want %d", what, i, d->y[i], lbls[i]);
}

static void test_roundtrip(void)
{
    for (int gz = 0; gz < 2; gz++) {
        const char *ip = tmp_write(gz ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte", img,
                                   img_len, gz);
        const char *lp = tmp_write(gz ? "train-labels-idx1-ubyte.gz" : "train-labels-idx1-ubyte", lab,
                                   lab_len, gz);
        rs_dataset *d = NULL;
        rs_err e = {0};
        rs_status s = rs_data_idx_load(ip, lp, &d, &e);
        RS_CHECK(s == RS_OK, "load (gz=%d): %s", gz, e.msg);
        if (!d) continue;
        check_dataset(d, gz ? "gzip" : "plain");
        RS_CHECK(!strcmp(d->name, "train-images-idx3-ubyte"), "name '%s'", d->name);
        RS_CHECK(strstr(d->source, ip) && strstr(d->source, lp), "source '%s'", d->source);
        rs_dataset_free(d);
    }
    /* n_classes is max label + 1 once labels pass 9 */
    uint8_t l2[16];
    size_t l2n = make_idx(l2, 1, (uint32_t[]){N}, (const uint8_t[]){1, 12, 0}, N);
    rs_dataset *d = NULL;
    rs_err e = {0};
    RS_CHECK(rs_data_idx_from_memory(img, img_len, "i", l2, l2n, "l", &d, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(d && d->n_classes == 13, "n_classes %d want 13", d ? d->n_classes : -1);
    rs_dataset_free(d);
}

static rs_status from_mem(const uint8_t *i, size_t il, const uint8_t *l, size_t ll, rs_err *e)
{
    rs_dataset *d = (rs_dataset *)&d; /* must be reset to NULL on failure */
    rs_status s = rs_data_idx_from_memory(i, il, "img.idx", l, ll, "lab.idx", &d, e);
    RS_CHECK(s == RS_OK || d == NULL, "out not NULL after a failure");
    if (s == RS_OK) rs_dataset_free(d);
    return s;
}

static void test_malformed(void)
{
    uint8_t b[128];
    rs_err e = {0};
    size_t n;

    EXPECT_ERR(from_mem(img, img_len - 1, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx: offset 39",
               "3 x 2 x 4 = 24 bytes of data but only 23 follow", "truncated");
    EXPECT_ERR(from_mem(img, 10, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx: offset 10",
               "inside the header");
    EXPECT_ERR(from_mem(img, 2, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx: offset 2", "magic");
    EXPECT_ERR(from_mem(img, 0, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx: offset 0");

    memcpy(b, img, img_len);
    b[0] = 0x12, b[1] = 0x34;
    EXPECT_ERR(from_mem(b, img_len, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx: offset 0",
               "bad magic 0x12340803");
    b[0] = 0x1f, b[1] = 0x8b;
    EXPECT_ERR(from_mem(b, img_len, lab, lab_len, &e), RS_ERR_FORMAT, e, "compressed twice");

    memcpy(b, img, img_len);
    b[3] = 5;
    EXPECT_ERR(from_mem(b, img_len, lab, lab_len, &e), RS_ERR_FORMAT, e,
               "img.idx: offset 3: IDX dimension count 5 is not 1..4");
    b[3] = 0;
    EXPECT_ERR(from_mem(b, img_len, lab, lab_len, &e), RS_ERR_FORMAT, e, "offset 3", "count 0");
    b[3] = 255;
    EXPECT_ERR(from_mem(b, img_len, lab, lab_len, &e), RS_ERR_FORMAT, e, "offset 3", "count 255");

    memcpy(b, img, img_len);
    b[2] = 0x0D;
    EXPECT_ERR(from_mem(b, img_len, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx: offset 2", "0x0D",
               "float32");

    /* absurd sizes: a product far past 2^64 must not wrap around into something that fits */
    n = make_idx(b, 4, (uint32_t[]){0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, pix, 8);
    EXPECT_ERR(from_mem(b, n, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx: offset 28",
               "4294967295 x 4294967295", "more than 2^64");
    n = make_idx(b, 3, (uint32_t[]){0x10000u, 0x10000u, 0x10000u}, pix, 8);
    EXPECT_ERR(from_mem(b, n, lab, lab_len, &e), RS_ERR_FORMAT, e, "offset 24", "65536 x 65536 x 65536 = 281474976710656");
    n = make_idx(b, 3, (uint32_t[]){N, 0, C}, pix, 0);
    EXPECT_ERR(from_mem(b, n, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx: offset 8: dimension 1 is 0");

    /* trailing bytes: the header does not describe this file */
    memcpy(b, img, img_len);
    b[img_len] = 0;
    EXPECT_ERR(from_mem(b, img_len + 1, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx: offset 40",
               "1 more byte follows");

    /* wrong dimension counts for the role, and swapped files */
    n = make_idx(b, 2, (uint32_t[]){N, R * C}, pix, sizeof pix);
    EXPECT_ERR(from_mem(b, n, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx", "has 2 dimensions",
               "n x rows x cols");
    EXPECT_ERR(from_mem(img, img_len, img, img_len, &e), RS_ERR_FORMAT, e, "lab.idx: offset 0", "swapped");
    EXPECT_ERR(from_mem(lab, lab_len, lab, lab_len, &e), RS_ERR_FORMAT, e, "img.idx: offset 0", "swapped");

    /* label/image count mismatch */
    n = make_idx(b, 1, (uint32_t[]){N - 1}, lbls, N - 1);
    EXPECT_ERR(from_mem(img, img_len, b, n, &e), RS_ERR_FORMAT, e,
               "labels file has 2 labels but images file img.idx has 3 images");
    n = make_idx(b, 1, (uint32_t[]){N}, lbls, N - 1);
    EXPECT_ERR(from_mem(img, img_len, b, n, &e), RS_ERR_FORMAT, e, "lab.idx: offset 10", "declares 3 bytes", "truncated");
}

static void test_files(void)
{
    rs_dataset *d = NULL;
    rs_err e = {0};
    const char *lp = tmp_write("l.idx", lab, lab_len, false);

    const char *missing = tmp_path("no-such-file.gz");
    EXPECT_ERR(rs_data_idx_load(missing, lp, &d, &e), RS_ERR_IO, e, missing, "No such file");

    /* a .gz cut short: zlib notices, the message names the file */
    uint8_t big[4096], px[4 * 32 * 31];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 2654435761u >> 13);
    size_t bn = make_idx(big, 3, (uint32_t[]){4, 32, 31}, px, sizeof px);
    const char *gp = tmp_write("cut.gz", big, bn, true);
    uint8_t *raw;
    size_t rawn;
    RS_CHECK(rs_data_read_file(gp, 0, &raw, &rawn, &e) == RS_OK && rawn == bn, "read gz: %s", e.msg);
    free(raw);
    FILE *f = fopen(gp, "rb");
    uint8_t gzbytes[8192];
    size_t gzn = fread(gzbytes, 1, sizeof gzbytes, f);
    fclose(f);
    const char *cp = tmp_write("cut2.gz", gzbytes, gzn / 2, false);
    EXPECT_ERR(rs_data_idx_load(cp, lp, &d, &e), RS_ERR_FORMAT, e, cp, "gzip");

    /* truncated plain images file on disk: the message carries its path */
    const char *tp = tmp_write("short-images", img, img_len - 5, false);
    EXPECT_ERR(rs_data_idx_load(tp, lp, &d, &e), RS_ERR_FORMAT, e, tp, "offset 35");
    RS_CHECK(d == NULL, "out set after failure");

    /* the reader's cap and its edge cases */
    EXPECT_ERR(rs_data_read_file(gp, 100, &raw, &rawn, &e), RS_ERR_FORMAT, e, gp, "larger than 100 bytes");
    RS_CHECK(rs_data_read_file(gp, bn, &raw, &rawn, &e) == RS_OK && rawn == bn, "exactly at the cap: %s",
             e.msg);
    free(raw);
    const char *ep = tmp_write("empty", "", 0, false);
    RS_CHECK(rs_data_read_file(ep, 0, &raw, &rawn, &e) == RS_OK && raw && rawn == 0, "empty file: %s", e.msg);
    free(raw);
    EXPECT_ERR(rs_data_read_file(tmp_root, 0, &raw, &rawn, &e), RS_ERR_IO, e, "is a directory");
}

/* The Fashion-MNIST front end over a fake directory: .gz and unpacked files, its label check, and
 * the messages when the package is missing. */
static void test_fashion_dir(void)
{
    const char *dir = tmp_path("fmnist");
    mkdir(dir, 0700);
    static uint8_t px[2 * 28 * 28], buf[2 * 28 * 28 + 64];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)i;
    size_t n = make_idx(buf, 3, (uint32_t[]){2, 28, 28}, px, sizeof px);
    tmp_write("fmnist/train-images-idx3-ubyte.gz", buf, n, true);
    n = make_idx(buf, 3, (uint32_t[]){1, 28, 28}, px, 28 * 28);
    tmp_write("fmnist/t10k-images-idx3-ubyte", buf, n, false); /* an unpacked copy is found too */
    n = make_idx(buf, 1, (uint32_t[]){1}, (const uint8_t[]){9}, 1);
    tmp_write("fmnist/t10k-labels-idx1-ubyte.gz", buf, n, true);
    n = make_idx(buf, 1, (uint32_t[]){2}, (const uint8_t[]){4, 0}, 2);
    const char *tl = tmp_write("fmnist/train-labels-idx1-ubyte.gz", buf, n, true);

    rs_data_pair p = {0};
    rs_err e = {0};
    RS_CHECK(rs_data_fashion(dir, &p, &e) == RS_OK, "fake fashion dir: %s", e.msg);
    if (p.train && p.test) {
        RS_CHECK(p.train->n == 2 && p.test->n == 1 && p.test->y[0] == 9 && p.train->n_classes == 10, "sizes");
        RS_CHECK(!strcmp(p.train->name, "fashion-train") && !strcmp(p.test->name, "fashion-test"), "names");
        RS_CHECK(p.train->class_names && !strcmp(p.train->class_names[9], "Ankle boot"), "class names");
    }
    rs_data_pair_clear(&p);

    n = make_idx(buf, 1, (uint32_t[]){2}, (const uint8_t[]){4, 10}, 2);
    tmp_write("fmnist/train-labels-idx1-ubyte.gz", buf, n, true);
    EXPECT_ERR(rs_data_fashion(dir, &p, &e), RS_ERR_FORMAT, e, tl, "offset 9: label 10 of image 1 is not 0..9");
    RS_CHECK(!p.train && !p.test, "pair set after failure");

    const char *none = tmp_path("no-fashion-here");
    EXPECT_ERR(rs_data_fashion(none, &p, &e), RS_ERR_IO, e, none, "apt-get install dataset-fashion-mnist",
               "digits");
    EXPECT_ERR(rs_data_fashion(tl, &p, &e), RS_ERR_IO, e, "not a directory", "apt-get install");
    /* a missing file is named with the .gz Debian ships */
    n = make_idx(buf, 1, (uint32_t[]){2}, (const uint8_t[]){4, 0}, 2);
    tmp_write("fmnist/train-labels-idx1-ubyte.gz", buf, n, true);
    unlink(tmp_path("fmnist/t10k-images-idx3-ubyte"));
    EXPECT_ERR(rs_data_fashion(dir, &p, &e), RS_ERR_IO, e, "fmnist/t10k-images-idx3-ubyte.gz", "No such file");
    RS_CHECK(!p.train && !p.test, "pair set after failure");
}

int main(void)
{
    for (int i = 0; i < N * R * C; i++) pix[i] = (uint8_t)(i * 37 % 256);
    pix[0] = 0, pix[1] = 255, pix[2] = 128;
    img_len = make_idx(img, 3, (uint32_t[]){N, R, C}, pix, sizeof pix);
    lab_len = make_idx(lab, 1, (uint32_t[]){N}, lbls, N);
    test_roundtrip();
    test_malformed();
    test_files();
    test_fashion_dir();
    tmp_cleanup();
    return rs_test_finish("data-idx");
}
