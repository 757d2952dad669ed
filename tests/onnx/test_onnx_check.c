/* rs_onnx_check and rs_onnx_show on files that are wrong in the ways users meet: a node reading a
 * value nobody defined, a value assigned twice, no opset, tensors shorter than their shapes, wrong
 * attribute types, and files that are truncated, garbage or claim huge sizes. Each must give a
 * finding or a clear error, never a crash (this test also runs under ASan/UBSan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/rng.h"
#include "onnx/build.h"
#include "onnx/import_internal.h" /* rs_onnx_h_recurrent: the entries import refuses */
#include "onnx/inspect.h"
#include "onnx/ops.h"
#include "tests/rs_test.h"

static char dir[256];

static const char *tmp_path(const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* Findings of a file, with their text in buf. -1 when the file could not be read. */
static int check_file(const char *path, char *buf, size_t n)
{
    FILE *f = fmemopen(buf, n, "w");
    int findings = -1;
    rs_err err = {0};
    rs_status st = rs_onnx_check(path, f, &findings, &err);
    fclose(f);
    return st ? -1 : findings;
}

/* The lesson graph X -> Gemm -> Y, plus whatever `extra` adds, saved as name. */
static rs_onnx_builder *lesson(void)
{
    rs_err err = {0};
    rs_onnx_builder *b = rs_onnx_builder_new("g");
    rs_onnx_builder_input(b, "X", RS_ONNX_FLOAT, 2, (int64_t[]){-1, 4}, (const char *[]){"N", NULL}, &err);
    rs_onnx_builder_initializer(b, "W", 2, (int64_t[]){3, 4}, NULL, 1, &err);
    rs_onnx_builder_initializer(b, "B", 1, (int64_t[]){3}, NULL, 2, &err);
    RS_CHECK(!rs_onnx_builder_node(b, "Gemm", 3, (const char *[]){"X", "W", "B"}, 1, (const char *[]){"Y"},
                                   "transB=1", &err), "%s", err.msg);
    return b;
}

static void save(rs_onnx_builder *b, const char *name, const char *out)
{
    rs_err err = {0};
    if (out) RS_CHECK(!rs_onnx_builder_output(b, out, RS_ONNX_FLOAT, 2, (int64_t[]){-1, 3},
                                              (const char *[]){"N", NULL}, &err), "%s", err.msg);
    RS_CHECK(!rs_onnx_builder_save(b, tmp_path(name), 17, &err), "%s", err.msg);
    rs_onnx_builder_free(b);
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

static uint8_t *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    uint8_t *p = malloc(*n);
    *n = fread(p, 1, *n, f);
    fclose(f);
    return p;
}

static void test_good_and_broken_graphs(void)
{
    char out[8192];
    save(lesson(), "good.onnx", "Y");
    int n = check_file(tmp_path("good.onnx"), out, sizeof out);
    RS_CHECK(n == 0, "good graph: %d findings:\n%s", n, out);
    RS_CHECK(strstr(out, "ok") != NULL, "good graph says ok: %s", out);

    rs_err err = {0};
    rs_onnx_builder *b = lesson();
    rs_onnx_builder_node(b, "Relu", 1, (const char *[]){"Z"}, 1, (const char *[]){"R"}, NULL, &err);
    save(b, "undefined.onnx", "Y");
    n = check_file(tmp_path("undefined.onnx"), out, sizeof out);
    RS_CHECK(n == 1 && strstr(out, "input 'Z' is not defined"), "undefined input: %d\n%s", n, out);

    b = lesson();
    rs_onnx_builder_node(b, "Relu", 1, (const char *[]){"X"}, 1, (const char *[]){"Y"}, NULL, &err);
    save(b, "duplicate.onnx", "Y");
    n = check_file(tmp_path("duplicate.onnx"), out, sizeof out);
    RS_CHECK(n == 1 && strstr(out, "output 'Y' is already defined by node #0"), "duplicate output: %d\n%s", n, out);

    b = lesson();
    save(b, "noout.onnx", "Q"); /* declares an output nothing produces */
    n = check_file(tmp_path("noout.onnx"), out, sizeof out);
    RS_CHECK(n == 1 && strstr(out, "'Q' is not produced"), "output not produced: %d\n%s", n, out);

    b = lesson();
    rs_onnx_builder_node(b, "Flatten", 1, (const char *[]){"Y"}, 1, (const char *[]){"F"}, NULL, &err);
    rs_onnx_builder_attr_float(b, "axis", 1.0f, &err); /* Flatten's axis is an INT */
    rs_onnx_builder_node(b, "Relu", 1, (const char *[]){"F"}, 1, (const char *[]){"G"}, "alpha=0.5", &err);
    rs_onnx_builder_node(b, "Frobnicate", 1, (const char *[]){"G"}, 1, (const char *[]){"H"}, NULL, &err);
    rs_onnx_builder_node(b, "MaxPool", 1, (const char *[]){"G"}, 1, (const char *[]){"M"}, NULL, &err);
    save(b, "attrs.onnx", "Y");
    n = check_file(tmp_path("attrs.onnx"), out, sizeof out);
    RS_CHECK(n == 4, "attrs: 4 findings expected, got %d\n%s", n, out);
    RS_CHECK(strstr(out, "attribute 'axis' must be INT, not FLOAT") != NULL, "%s", out);
    RS_CHECK(strstr(out, "Relu has no attribute 'alpha'") != NULL, "%s", out);
    RS_CHECK(strstr(out, "unknown operator 'Frobnicate'") != NULL, "%s", out);
    RS_CHECK(strstr(out, "'kernel_shape' is missing") != NULL, "%s", out);

    /* Operators used before their opset, attributes that became inputs (the file is opset 17). */
    b = lesson();
    rs_onnx_builder_node(b, "Gelu", 1, (const char *[]){"Y"}, 1, (const char *[]){"G"}, NULL, &err);
    rs_onnx_builder_node(b, "Unsqueeze", 1, (const char *[]){"G"}, 1, (const char *[]){"U"}, "axes=0", &err);
    /* Split: any number of outputs, but num_outputs only from opset 18 (attention's q, k, v). */
    rs_onnx_builder_node(b, "Split", 1, (const char *[]){"Y"}, 3, (const char *[]){"S0", "S1", "S2"}, "axis=1", &err);
    rs_onnx_builder_node(b, "Split", 1, (const char *[]){"Y"}, 3, (const char *[]){"T0", "T1", "T2"},
                         "axis=1 num_outputs=3", &err);
    save(b, "opsets.onnx", "Y");
    n = check_file(tmp_path("opsets.onnx"), out, sizeof out);
    RS_CHECK(n == 3, "opsets: 3 findings expected, got %d\n%s", n, out);
    RS_CHECK(strstr(out, "Gelu needs opset 20 or later") != NULL, "%s", out);
    RS_CHECK(strstr(out, "'axes' is an input of Unsqueeze") != NULL, "%s", out);
    RS_CHECK(strstr(out, "Split has 'num_outputs' from opset 18") != NULL, "%s", out);

    /* Edits the builder cannot make: no opset, no ir_version, a short initializer, through the structs. */
    Onnx__ModelProto *m = NULL;
    RS_CHECK(!rs_onnx_model_load(tmp_path("good.onnx"), &m, &err), "%s", err.msg);
    if (!m) return;
    size_t nos = m->n_opset_import;
    m->n_opset_import = 0;
    m->has_ir_version = 0;
    Onnx__TensorProto *w = m->graph->initializer[0];
    size_t wlen = w->raw_data.len;
    w->raw_data.len = wlen - 4;
    FILE *f = fmemopen(out, sizeof out, "w");
    n = rs_onnx_check_model(m, f);
    fclose(f);
    RS_CHECK(n == 3, "3 findings expected, got %d\n%s", n, out);
    RS_CHECK(strstr(out, "opset_import is missing") != NULL, "%s", out);
    RS_CHECK(strstr(out, "ir_version is missing") != NULL, "%s", out);
    RS_CHECK(strstr(out, "raw_data has 44 bytes, but 12 float32 elements need 48") != NULL, "%s", out);
    /* The same model as a file: packed and read back. */
    size_t len = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = malloc(len);
    onnx__model_proto__pack(m, buf);
    write_bytes(tmp_path("noopset.onnx"), buf, len);
    free(buf);
    n = check_file(tmp_path("noopset.onnx"), out, sizeof out);
    RS_CHECK(n == 3, "noopset file: %d\n%s", n, out);
    /* Huge dims on a tiny tensor: counted as a finding, not an allocation. */
    int64_t *dims = w->dims;
    int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, INT64_C(1) << 40};
    w->dims = huge;
    w->n_dims = 3;
    f = fmemopen(out, sizeof out, "w");
    n = rs_onnx_check_model(m, f);
    rs_onnx_show_model(m, f);
    fclose(f);
    RS_CHECK(strstr(out, "overflows") != NULL, "huge dims: %s", out);
    w->dims = dims;
    w->n_dims = 2;
    w->raw_data.len = wlen;
    m->n_opset_import = nos;
    onnx__model_proto__free_unpacked(m, NULL);
}

/* The operator registry: every entry complete (a name, its handler, its attribute list), in order and
 * found by name, so import, `onnx check`, `onnx show` and the builder know the same operators. */
static void test_registry(void)
{
    size_t n = rs_onnx_op_count();
    RS_CHECK(n >= 61, "registry: %zu operators", n);
    const char *list = rs_onnx_supported_ops();
    for (size_t i = 0; i < n; i++) {
        const rs_onnx_op_def *op = rs_onnx_op_at(i);
        RS_CHECK(op && op->name && op->import && op->attrs, "entry %zu is incomplete", i);
        if (!op || !op->name) continue;
        RS_CHECK(rs_onnx_op_find(op->name) == op, "%s is not found by name", op->name);
        RS_CHECK(i == 0 || strcmp(rs_onnx_op_at(i - 1)->name, op->name) < 0, "%s is out of order", op->name);
        RS_CHECK(op->min_in >= 0 && (op->max_in < 0 || op->max_in >= op->min_in) && op->min_out >= 1 &&
                     (op->max_out < 0 || op->max_out >= op->min_out), "%s: arity", op->name);
        /* the recurrent operators are known (onnx check passes them) but not supported: import refuses them */
        bool refused = op->import == rs_onnx_h_recurrent;
        RS_CHECK((strstr(list, op->name) != NULL) != refused, "%s is %s the supported list", op->name,
                 refused ? "in" : "missing from");
        for (const rs_onnx_attr_def *a = op->attrs; a && a->name; a++)
            RS_CHECK(strcmp(rs_onnx_attr_type_name(a->type), "?") && a->type != 0, "%s.%s: type", op->name, a->name);
    }
    RS_CHECK(rs_onnx_op_find("Frobnicate") == NULL && rs_onnx_op_at(n) == NULL, "unknown operators");
    RS_CHECK(rs_onnx_op_attr_type("HardSigmoid", "alpha") == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT,
             "HardSigmoid's alpha is a float");
    /* an attribute that became an input is there before, not after */
    const rs_onnx_op_def *sq = rs_onnx_op_find("Squeeze");
    RS_CHECK(rs_onnx_op_attr(sq, "axes", 11) && !rs_onnx_op_attr(sq, "axes", 13), "Squeeze's axes until 13");
}

/* Shapes the importer's rules infer: a Gemm whose inner dimensions differ is a finding, as onnx.checker's
 * full_check reports it; the operators of a MobileNetV3 block are known. */
static void test_shapes(void)
{
    char out[8192];
    rs_err err = {0};
    rs_onnx_builder *b = rs_onnx_builder_new("g");
    rs_onnx_builder_input(b, "X", RS_ONNX_FLOAT, 2, (int64_t[]){-1, 4}, (const char *[]){"N", NULL}, &err);
    rs_onnx_builder_initializer(b, "W", 2, (int64_t[]){3, 5}, NULL, 1, &err);
    rs_onnx_builder_node(b, "Gemm", 2, (const char *[]){"X", "W"}, 1, (const char *[]){"Y"}, "transB=1", &err);
    save(b, "gemm_k.onnx", "Y");
    int n = check_file(tmp_path("gemm_k.onnx"), out, sizeof out);
    RS_CHECK(n == 1 && strstr(out, "inner dimensions differ"), "gemm K mismatch: %d\n%s", n, out);

    b = rs_onnx_builder_new("g");
    rs_onnx_builder_input(b, "X", RS_ONNX_FLOAT, 2, (int64_t[]){-1, 3}, (const char *[]){"N", NULL}, &err);
    rs_onnx_builder_node(b, "HardSwish", 1, (const char *[]){"X"}, 1, (const char *[]){"A"}, NULL, &err);
    rs_onnx_builder_node(b, "HardSigmoid", 1, (const char *[]){"A"}, 1, (const char *[]){"B"}, "alpha=0.2", &err);
    rs_onnx_builder_node(b, "Neg", 1, (const char *[]){"B"}, 1, (const char *[]){"C"}, NULL, &err);
    rs_onnx_builder_node(b, "Cast", 1, (const char *[]){"C"}, 1, (const char *[]){"Y"}, "to=1", &err);
    save(b, "mobilenet_ops.onnx", "Y");
    n = check_file(tmp_path("mobilenet_ops.onnx"), out, sizeof out);
    RS_CHECK(n == 0, "HardSwish, HardSigmoid, Neg, Cast: %d\n%s", n, out);
}

static void test_bad_files(void)
{
    char out[8192];
    rs_err err = {0};
    int findings = 7;
    FILE *sink = fopen("/dev/null", "w");

    RS_CHECK(rs_onnx_check(tmp_path("does-not-exist.onnx"), sink, &findings, &err) == RS_ERR_IO, "missing file");
    RS_CHECK(findings == 0, "nothing counted for an unreadable file");
    write_bytes(tmp_path("empty.onnx"), "", 0);
    RS_CHECK(rs_onnx_show(tmp_path("empty.onnx"), sink, &err) == RS_ERR_FORMAT && strstr(err.msg, "empty"),
             "empty file: %s", err.msg);

    /* Every truncation of a good file: an error or a (partial) model, never a crash. */
    size_t len;
    uint8_t *good = read_bytes(tmp_path("good.onnx"), &len);
    int parse_failed = 0;
    for (size_t cut = 1; cut < len; cut++) {
        write_bytes(tmp_path("cut.onnx"), good, cut);
        rs_status st = rs_onnx_check(tmp_path("cut.onnx"), sink, &findings, &err);
        rs_status st2 = rs_onnx_show(tmp_path("cut.onnx"), sink, &err);
        RS_CHECK(st == st2, "check and show agree at cut %zu", cut);
        if (st) {
            parse_failed++;
            RS_CHECK(st == RS_ERR_FORMAT && strstr(err.msg, "not a valid ONNX ModelProto (protobuf parse failed)"),
                     "cut %zu: %s", cut, err.msg);
        }
    }
    RS_CHECK(parse_failed > (int)len / 2, "most truncations fail to parse (%d of %zu)", parse_failed, len);
    write_bytes(tmp_path("half.onnx"), good, len / 2);
    RS_CHECK(check_file(tmp_path("half.onnx"), out, sizeof out) == -1, "half a file is an error");

    /* A graph field (7, length-delimited) declaring 4 GiB of content in a 7-byte file. */
    const uint8_t huge[] = {0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00};
    write_bytes(tmp_path("huge.onnx"), huge, sizeof huge);
    RS_CHECK(rs_onnx_check(tmp_path("huge.onnx"), sink, &findings, &err) == RS_ERR_FORMAT, "huge length");
    /* ir_version (field 1) sent as a string: wrong wire type. */
    const uint8_t wrong[] = {0x0a, 0x02, 'h', 'i'};
    write_bytes(tmp_path("wrong.onnx"), wrong, sizeof wrong);
    RS_CHECK(rs_onnx_check(tmp_path("wrong.onnx"), sink, &findings, &err) == RS_ERR_FORMAT, "wrong wire type: %s",
             err.msg);

    /* Garbage, and good files with random bytes flipped. */
    rs_rng r;
    rs_rng_seed(&r, 42);
    uint8_t *buf = malloc(len > 4096 ? len : 4096);
    for (int it = 0; it < 2000; it++) {
        size_t n;
        if (it % 2) {
            n = 1 + rs_rng_below(&r, 4096);
            for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rs_rng_u32(&r);
        } else {
            n = len;
            memcpy(buf, good, len);
            for (int k = 0; k < 4; k++) buf[rs_rng_below(&r, len)] = (uint8_t)rs_rng_u32(&r);
        }
        write_bytes(tmp_path("garbage.onnx"), buf, n);
        rs_status st = rs_onnx_check(tmp_path("garbage.onnx"), sink, &findings, &err);
        RS_CHECK(st == RS_OK || st == RS_ERR_FORMAT, "garbage %d: %d %s", it, st, err.msg);
        rs_onnx_show(tmp_path("garbage.onnx"), sink, &err);
    }
    free(buf);
    free(good);
    fclose(sink);
}

static void test_show(void)
{
    char out[8192] = {0};
    rs_err err = {0};
    FILE *f = fmemopen(out, sizeof out, "w");
    RS_CHECK(!rs_onnx_show(tmp_path("good.onnx"), f, &err), "%s", err.msg);
    fclose(f);
    RS_CHECK(strstr(out, "producer     ringside") != NULL, "%s", out);
    RS_CHECK(strstr(out, "ai.onnx 17") != NULL, "%s", out);
    RS_CHECK(strstr(out, "X  float32 [N, 4]") != NULL, "%s", out);
    RS_CHECK(strstr(out, "W  float32 [3, 4]  48 B") != NULL, "%s", out);
    RS_CHECK(strstr(out, "Gemm 'Gemm_0'  X, W, B -> Y   transB=1") != NULL, "%s", out);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/rs-onnx-check-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_good_and_broken_graphs();
    test_bad_files();
    test_show();
    test_registry();
    test_shapes();
    const char *names[] = {"gemm_k.onnx", "mobilenet_ops.onnx", "good.onnx", "undefined.onnx", "duplicate.onnx", "noout.onnx", "attrs.onnx",
                           "opsets.onnx", "noopset.onnx", "cut.onnx", "half.onnx", "huge.onnx", "wrong.onnx",
                           "garbage.onnx", "empty.onnx"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(tmp_path(names[i]));
    rmdir(dir);
    return rs_test_finish("onnx-check");
}
