/* An ONNX file as the engine model compile starts from, through the importer, as `model m = onnx
 * FILE` makes it: plain engine layers when the graph is a sequence of them, an inference model of
 * engine layers and generic ops otherwise. */
#include "onnx/import.h"
#include "plan.h"

rs_status rs_plan_model_from_onnx(const char *path, const char *name, rs_model **out, rs_err *err)
{
    *out = NULL;
    rs_onnx_graph *g = NULL;
    rs_status st = rs_onnx_load(path, &g, err);
    if (st) return st;
    rs_err why = {0};
    if (rs_onnx_to_model(g, name, out, &why) != RS_OK) st = rs_onnx_to_inference_model(g, name, out, err);
    rs_onnx_graph_free(g);
    return st;
}
