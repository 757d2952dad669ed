/* The REPL lesson, as the commands would drive the builder: input X [N, 4] with N unknown,
 * initializers W [3, 4] and B [3], one node Gemm(X, W, B) -> Y with transB=1, output Y [N, 3]; save,
 * check, show. check_export.py then runs the file in ONNX Runtime against numpy's X @ W.T + B.
 * Usage: build-lesson FILE.onnx */
#include <string.h>

#include "onnx/build.h"
#include "onnx/inspect.h"
#include "tests/rs_test.h"

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "lesson.onnx";
    rs_err err = {0};
    rs_onnx_builder *b = rs_onnx_builder_new("lesson");
    RS_CHECK(b != NULL, "builder_new");
    rs_onnx_ushape xs, ys;
    RS_CHECK(!rs_onnx_ushape_parse("N,4", &xs, &err), "%s", err.msg);
    RS_CHECK(xs.ndim == 2 && xs.d[0] == -1 && !strcmp(xs.param[0], "N") && xs.d[1] == 4, "shape N,4 parsed");
    RS_CHECK(!rs_onnx_ushape_parse("[N, 3]", &ys, &err), "%s", err.msg);
    RS_CHECK(ys.ndim == 2 && ys.d[1] == 3, "shape [N, 3] parsed");
    rs_onnx_ushape t;
    RS_CHECK(!rs_onnx_ushape_parse("batch x 3 x 28 x 28", &t, &err) && t.ndim == 4 && t.d[3] == 28 &&
                 !strcmp(t.param[0], "batch"), "shape with x parsed");
    RS_CHECK(rs_onnx_ushape_parse("N,,4", &t, &err) == RS_ERR_ARG, "empty dim refused");

    RS_CHECK(!rs_onnx_builder_input_shape(b, "X", rs_onnx_dtype_parse("float"), &xs, &err), "%s", err.msg);
    RS_CHECK(!rs_onnx_builder_initializer(b, "W", 2, (int64_t[]){3, 4}, NULL, 7, &err), "%s", err.msg);
    RS_CHECK(!rs_onnx_builder_initializer(b, "B", 1, (int64_t[]){3}, NULL, 8, &err), "%s", err.msg);
    RS_CHECK(rs_onnx_builder_initializer(b, "B", 1, (int64_t[]){3}, NULL, 8, &err) == RS_ERR_ARG,
             "a second initializer B is refused");
    /* alpha=1 is written as the float Gemm defines, not an int. */
    RS_CHECK(!rs_onnx_builder_node(b, "Gemm", 3, (const char *[]){"X", "W", "B"}, 1, (const char *[]){"Y"},
                                   "alpha=1 transB=1", &err), "%s", err.msg);
    RS_CHECK(rs_onnx_builder_node(b, "Gemm", 1, (const char *[]){"X"}, 1, (const char *[]){"Z"}, "transB", &err) ==
                 RS_ERR_ARG, "attribute without value refused");
    RS_CHECK(rs_onnx_builder_node_count(b) == 1, "a refused node leaves nothing behind");
    RS_CHECK(!rs_onnx_builder_output_shape(b, "Y", RS_ONNX_FLOAT, &ys, &err), "%s", err.msg);
    RS_CHECK(rs_onnx_builder_save(b, path, 12, &err) == RS_ERR_ARG, "opset 12 refused");
    RS_CHECK(!rs_onnx_builder_save(b, path, 17, &err), "%s", err.msg);
    rs_onnx_builder_free(b);
    rs_onnx_builder_free(NULL);

    int findings = -1;
    RS_CHECK(!rs_onnx_check(path, stdout, &findings, &err), "%s", err.msg);
    RS_CHECK(findings == 0, "lesson graph: %d findings", findings);
    RS_CHECK(!rs_onnx_show(path, stdout, &err), "%s", err.msg);
    return rs_test_finish("build-lesson");
}
