/* safetensors: a round trip through a real file, then every way a file can be broken, each checked
 * for the error code and for the words of its message. Reads as a tour of what rs_st_* accepts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/ckpt/safetensors.h"
#include "tests/rs_test.h"

static char dir[256];

static const char *in_dir(const char *name)
{
    static char p[2][512];
    static int k;
    k ^= 1;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

static void test_round_trip(void)
{
    float w[12], b[4];
    for (int i = 0; i < 12; i++) w[i] = (float)i * 0.5f;
    for (int i = 0; i < 4; i++) b[i] = -(float)i;
    int64_t step = 12345678901234;
    double w1[8];
    for (int i = 0; i < 8; i++) w1[i] = 1.0 / (i + 1);
    uint16_t bf[5] = {0x3f80, 0x4000, 0xbf80, 0x7f80, 0x0001};
    uint8_t u8[7] = {0, 1, 2, 3, 250, 255, 7};
    int32_t after[3] = {-1, 0, 2147483647}; /* lands at an odd offset: read it with rs_st_copy */
    rs_st_tensor t[] = {
        {"0.weight", RS_F32, {2, {3, 4}}, w},
        {"0.bias", RS_F32, {1, {4}}, b},
        {"step", RS_I64, {0, {0}}, &step},
        {"empty", RS_F32, {2, {0, 3}}, NULL},
        {"also.empty", RS_F32, {1, {0}}, NULL},
        {"1.weight", RS_F64, {3, {2, 2, 2}}, w1},
        {"bf", RS_BF16, {1, {5}}, bf},
        {"u8", RS_U8, {1, {7}}, u8},
        {"after", RS_I32, {1, {3}}, after},
    };
    int n = (int)(sizeof t / sizeof *t);
    const char *meta[] = {"format", "pt", "epoch", "3"};
    const char *path = in_dir("model.safetensors");
    rs_err err = {0};
    RS_CHECK(rs_st_write(path, t, n, meta, 2, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(!exists(in_dir("model.safetensors.tmp")), "the .tmp file should be renamed away");

    FILE *fp = fopen(path, "rb");
    uint8_t h[8] = {0};
    RS_CHECK(fp && fread(h, 1, 8, fp) == 8, "reading the header length");
    if (fp) fclose(fp);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | h[i];
    RS_CHECK(hl % 8 == 0, "header length %llu is not a multiple of 8", (unsigned long long)hl);

    rs_st_file *f = NULL;
    RS_CHECK(rs_st_open(path, &f, &err) == RS_OK, "%s", err.msg);
    if (!f) return;
    RS_CHECK(rs_st_count(f) == n, "count %d want %d", rs_st_count(f), n);
    for (int i = 0; i < n; i++) {
        const rs_st_info *a = rs_st_at(f, i), *g = rs_st_find(f, t[i].name);
        RS_CHECK(a && !strcmp(a->name, t[i].name), "tensor %d is '%s', want '%s' (write order)", i,
                 a ? a->name : "?", t[i].name);
        RS_CHECK(g == a, "find('%s') should give at(%d)", t[i].name, i);
        if (!g) continue;
        size_t nb = (size_t)rs_shape_numel(&t[i].shape) * rs_dtype_size(t[i].dtype);
        RS_CHECK(g->dtype == t[i].dtype, "%s: dtype %s", g->name, rs_dtype_st_name(g->dtype));
        RS_CHECK(rs_shape_eq(&g->shape, &t[i].shape), "%s: shape differs", g->name);
        RS_CHECK(g->nbytes == nb, "%s: %zu bytes want %zu", g->name, g->nbytes, nb);
        RS_CHECK(nb == 0 || memcmp(rs_st_data(f, g), t[i].data, nb) == 0, "%s: bytes differ", g->name);
    }
    RS_CHECK(rs_st_at(f, 0)->offset == 0 && ((uintptr_t)rs_st_data(f, rs_st_at(f, 0)) % 16) == 0,
             "the data region should start 16-byte aligned in memory");
    RS_CHECK(rs_st_at(f, n) == NULL && rs_st_at(f, -1) == NULL, "out of range at()");
    RS_CHECK(rs_st_find(f, "nope") == NULL, "find of an absent name");
    RS_CHECK(rs_st_meta(f, "format") && !strcmp(rs_st_meta(f, "format"), "pt"), "meta format");
    RS_CHECK(rs_st_meta(f, "epoch") && !strcmp(rs_st_meta(f, "epoch"), "3"), "meta epoch");
    RS_CHECK(rs_st_meta(f, "absent") == NULL, "absent meta key");
    const char *v = NULL;
    RS_CHECK(rs_st_meta_count(f) == 2 && !strcmp(rs_st_meta_at(f, 1, &v), "epoch") && !strcmp(v, "3"),
             "meta entries in order");

    int32_t got[3];
    rs_shape s3 = {1, {3}}, s4 = {1, {4}};
    RS_CHECK(rs_st_copy(f, "after", RS_I32, &s3, got, &err) == RS_OK && !memcmp(got, after, 12),
             "copy: %s", err.msg);
    RS_CHECK(rs_st_copy(f, "after", RS_I32, &s4, got, &err) == RS_ERR_SHAPE &&
                 strstr(err.msg, "has shape (3), expected (4)"),
             "%s", err.msg);
    RS_CHECK(rs_st_copy(f, "after", RS_F32, &s3, got, &err) == RS_ERR_FORMAT &&
                 strstr(err.msg, "is I32, expected F32"),
             "%s", err.msg);
    RS_CHECK(rs_st_copy(f, "missing", RS_F32, &s3, got, &err) == RS_ERR_FORMAT &&
                 strstr(err.msg, "no tensor named 'missing'"),
             "%s", err.msg);
    rs_st_close(f);

    /* Saving again replaces the file whole. */
    RS_CHECK(rs_st_write(path, t, 2, NULL, 0, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(rs_st_open(path, &f, &err) == RS_OK && rs_st_count(f) == 2 && rs_st_meta_count(f) == 0,
             "rewritten file: %s", err.msg);
    rs_st_close(f);
    rs_st_close(NULL);

    /* No tensors at all is a valid file: "{}" and an empty data region. */
    RS_CHECK(rs_st_write(in_dir("empty.safetensors"), NULL, 0, NULL, 0, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(rs_st_open(in_dir("empty.safetensors"), &f, &err) == RS_OK && rs_st_count(f) == 0,
             "empty file: %s", err.msg);
    rs_st_close(f);
    unlink(in_dir("empty.safetensors"));
    unlink(path);
}

static void test_write_errors(void)
{
    float x[2] = {1, 2};
    rs_err err = {0};
    const char *path = in_dir("bad.safetensors");
    rs_st_tensor dup[] = {{"a", RS_F32, {1, {2}}, x}, {"b", RS_F32, {1, {2}}, x},
                          {"a", RS_F32, {1, {1}}, x}};
    RS_CHECK(rs_st_write(path, dup, 3, NULL, 0, &err) == RS_ERR_ARG &&
                 strstr(err.msg, "two tensors are named 'a'") && strstr(err.msg, "unique"),
             "%s", err.msg);
    RS_CHECK(!exists(path) && !exists(in_dir("bad.safetensors.tmp")), "a refused write leaves no file");

    rs_st_tensor reserved = {"__metadata__", RS_F32, {1, {2}}, x};
    RS_CHECK(rs_st_write(path, &reserved, 1, NULL, 0, &err) == RS_ERR_ARG &&
                 strstr(err.msg, "reserves"),
             "%s", err.msg);
    rs_st_tensor neg = {"neg", RS_F32, {2, {2, -1}}, x};
    RS_CHECK(rs_st_write(path, &neg, 1, NULL, 0, &err) == RS_ERR_ARG && strstr(err.msg, "(2, -1)"),
             "%s", err.msg);
    rs_st_tensor utf = {"bad\xff", RS_F32, {1, {2}}, x};
    RS_CHECK(rs_st_write(path, &utf, 1, NULL, 0, &err) == RS_ERR_ARG && strstr(err.msg, "UTF-8"),
             "%s", err.msg);
    rs_st_tensor nodata = {"x", RS_F32, {1, {2}}, NULL};
    RS_CHECK(rs_st_write(path, &nodata, 1, NULL, 0, &err) == RS_ERR_ARG && strstr(err.msg, "no data"),
             "%s", err.msg);
    const char *meta[] = {"k", "1", "k", "2"};
    RS_CHECK(rs_st_write(path, dup, 1, meta, 2, &err) == RS_ERR_ARG &&
                 strstr(err.msg, "'k' is given twice"),
             "%s", err.msg);

    char missing[512];
    snprintf(missing, sizeof missing, "%s/no/such/folder/m.safetensors", dir);
    RS_CHECK(rs_st_write(missing, dup, 1, NULL, 0, &err) == RS_ERR_IO && strstr(err.msg, missing) &&
                 strstr(err.msg, "No such file"),
             "%s", err.msg);
}

static void test_open_errors(void)
{
    rs_st_file *f = (rs_st_file *)1;
    rs_err err = {0};
    RS_CHECK(rs_st_open(in_dir("absent.safetensors"), &f, &err) == RS_ERR_IO && f == NULL &&
                 strstr(err.msg, "absent.safetensors") && strstr(err.msg, "No such file"),
             "%s", err.msg);
    RS_CHECK(rs_st_open(dir, &f, &err) == RS_ERR_IO && strstr(err.msg, "folder"), "%s", err.msg);
    const char *p = in_dir("short.safetensors");
    FILE *fp = fopen(p, "wb");
    if (fp) {
        fwrite("abc", 1, 3, fp);
        fclose(fp);
    }
    RS_CHECK(rs_st_open(p, &f, &err) == RS_ERR_FORMAT && strstr(err.msg, p) &&
                 strstr(err.msg, "file is 3 bytes, shorter than the 8-byte"),
             "%s", err.msg);
    unlink(p);
}

/* A file in memory: length prefix, header text as given (no padding unless it has it), then
 * data_len bytes of data. The caller frees it. */
static uint8_t *mk(const char *hdr, size_t data_len, size_t *len)
{
    size_t h = strlen(hdr);
    *len = 8 + h + data_len;
    uint8_t *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> 8 * i);
    memcpy(b + 8, hdr, h);
    for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (uint8_t)i;
    return b;
}

static void expect(int line, const char *hdr, size_t data_len, rs_status code, const char *want,
                   const char *want2)
{
    size_t len;
    uint8_t *b = mk(hdr, data_len, &len);
    rs_st_file *f = NULL;
    rs_err err = {0};
    rs_status s = rs_st_parse(b, len, "ck.safetensors", &f, &err);
    free(b);
    RS_CHECK(s == code, "line %d: got %s want %s: %s", line, rs_status_name(s), rs_status_name(code),
             err.msg);
    if (code == RS_OK) {
        rs_st_close(f);
        return;
    }
    RS_CHECK(f == NULL, "line %d: no file on failure", line);
    RS_CHECK(strstr(err.msg, "ck.safetensors: ") == err.msg, "line %d: message names the file: %s",
             line, err.msg);
    RS_CHECK(strstr(err.msg, want), "line %d: '%s' not in: %s", line, want, err.msg);
    RS_CHECK(!want2 || strstr(err.msg, want2), "line %d: '%s' not in: %s", line, want2, err.msg);
}

#define OK(hdr, n) expect(__LINE__, hdr, n, RS_OK, "", NULL)
#define BAD(hdr, n, code, want, want2) expect(__LINE__, hdr, n, code, want, want2)
#define T(rest) "{\"t\": {" rest "}}"

static void test_corrupt(void)
{
    rs_st_file *f = NULL;
    rs_err err = {0};
    uint8_t five[5] = {1, 2, 3, 4, 5};
    RS_CHECK(rs_st_parse(five, 5, "ck.safetensors", &f, &err) == RS_ERR_FORMAT &&
                 strstr(err.msg, "shorter than the 8-byte"),
             "%s", err.msg);
    uint8_t big[16] = {0xe8, 0x03}; /* says 1000 header bytes, has 8 */
    RS_CHECK(rs_st_parse(big, 16, "ck.safetensors", &f, &err) == RS_ERR_FORMAT &&
                 strstr(err.msg, "header length 1000 runs past the end of the file (16 bytes)"),
             "%s", err.msg);
    uint8_t huge[16] = {0, 0, 0, 0, 0, 0, 0, 0x80};
    RS_CHECK(rs_st_parse(huge, 16, "ck.safetensors", &f, &err) == RS_ERR_FORMAT &&
                 strstr(err.msg, "over the 100 MB"),
             "%s", err.msg);

    /* What must work: a scalar, unknown extra fields, null metadata, unpadded and padded headers. */
    OK(T("\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]"), 4);
    OK("{\"__metadata__\": null, \"t\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [0, 2],"
       " \"extra\": 1}}     ", 2);
    OK("{\"b\": {\"dtype\": \"I8\", \"shape\": [0], \"data_offsets\": [2, 2]},"
       " \"a\": {\"dtype\": \"I8\", \"shape\": [2], \"data_offsets\": [0, 2]}}", 2);
    OK("{}", 0);

    BAD(" {}", 0, RS_ERR_FORMAT, "does not start with '{'", NULL);
    BAD("{\"t\": {\"dtype\": \"F32\",", 0, RS_ERR_FORMAT, "header JSON is invalid at line 1, column",
        "header byte");
    BAD("{\"t\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}, \"t\": 1}", 1,
        RS_ERR_FORMAT, "header JSON is invalid", "duplicate");
    BAD("{\"t\": 3}", 0, RS_ERR_FORMAT, "tensor 't' is an integer", "\"dtype\": \"F32\"");
    BAD(T("\"shape\": [1], \"data_offsets\": [0, 4]"), 4, RS_ERR_FORMAT, "tensor 't' has no \"dtype\"",
        "needs \"dtype\", \"shape\" and \"data_offsets\"");
    BAD(T("\"dtype\": \"F32\", \"data_offsets\": [0, 4]"), 4, RS_ERR_FORMAT, "has no \"shape\"", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [1]"), 4, RS_ERR_FORMAT, "has no \"data_offsets\"", NULL);
    BAD(T("\"dtype\": 7, \"shape\": [1], \"data_offsets\": [0, 4]"), 4, RS_ERR_FORMAT,
        "\"dtype\" is an integer, expected a string", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": \"1\", \"data_offsets\": [0, 4]"), 4, RS_ERR_FORMAT,
        "\"shape\" is a string, expected an array", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [1.0], \"data_offsets\": [0, 4]"), 4, RS_ERR_FORMAT,
        "shape[0] is a real number; dims must be integers >= 0", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]"), 4, RS_ERR_FORMAT,
        "\"data_offsets\" must be [begin, end]", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": {}"), 4, RS_ERR_FORMAT,
        "\"data_offsets\" must be [begin, end]", "got an object");
    BAD(T("\"dtype\": \"F33\", \"shape\": [1], \"data_offsets\": [0, 4]"), 4, RS_ERR_FORMAT,
        "tensor 't': unknown dtype 'F33'", "this build reads F32");
    BAD(T("\"dtype\": \"BOOL\", \"shape\": [1], \"data_offsets\": [0, 1]"), 1, RS_ERR_UNSUPPORTED,
        "unsupported dtype 'BOOL'", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [2, -1], \"data_offsets\": [0, 4]"), 4, RS_ERR_FORMAT,
        "shape[1] is negative", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [4611686018427387904, 4, 0], \"data_offsets\": [0, 0]"), 0,
        RS_ERR_FORMAT, "has more than 2^63 elements", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1], \"data_offsets\": [0, 4]"), 4,
        RS_ERR_UNSUPPORTED, "has 7 dims; this build handles up to 6", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]"), 20, RS_ERR_FORMAT,
        "shape (2, 3) of F32 needs 24 bytes but data_offsets [0, 20] span 20", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [4611686018427387904], \"data_offsets\": [0, 8]"), 8,
        RS_ERR_FORMAT, "needs over 2^64", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]"), 4, RS_ERR_FORMAT,
        "data_offsets [0, 8] run past the data region, which is 4 bytes", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]"), 8, RS_ERR_FORMAT,
        "data_offsets [8, 4] end before they begin", NULL);
    BAD(T("\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]"), 8, RS_ERR_FORMAT,
        "\"data_offsets\" must be [begin, end], two integers >= 0", NULL);
    BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
        " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12, RS_ERR_FORMAT,
        "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a' ([0, 8])", NULL);
    BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
        " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}", 12, RS_ERR_FORMAT,
        "bytes [4, 8) of the data region belong to no tensor", "after 'a'");
    BAD(T("\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]"), 8, RS_ERR_FORMAT,
        "bytes [0, 4) of the data region belong to no tensor", "at the start");
    BAD(T("\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]"), 8, RS_ERR_FORMAT,
        "the last 4 bytes of the data region (from offset 4) belong to no tensor", NULL);
    BAD("{\"__metadata__\": {\"epoch\": 3}}", 0, RS_ERR_FORMAT,
        "\"__metadata__\" value of 'epoch' is an integer; metadata values must be strings", NULL);
    BAD("{\"__metadata__\": [\"a\"]}", 0, RS_ERR_FORMAT, "\"__metadata__\" is an array", NULL);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/rs-ckpt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) RS_SKIP("cannot make a temporary folder under %s", dir);
    test_round_trip();
    test_write_errors();
    test_open_errors();
    test_corrupt();
    unlink(in_dir("model.safetensors"));
    rmdir(dir);
    return rs_test_finish("test_safetensors");
}
