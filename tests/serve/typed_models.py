"""Small ONNX models for the typed-tensor serve tests, written with onnx.helper (each well under 1 MiB):

- ident: one Identity per Triton data type, 11 inputs in and 11 outputs out (BOOL, INT8, INT16, INT32,
  INT64, UINT8, FP16, BF16, FP32, FP64, BYTES), per-sample dims [3] (BYTES [2]);
- wide: Identity on one FP32 input of many values per sample (the JSON-size test's model);
- cast: Cast nodes the way boundary models convert (INT64 ids -> FP32, FP32 -> INT32, FP64 -> FP16,
  BOOL -> FP32, UINT8 -> FP64, FP32 -> BF16, FP16 -> INT16), per-sample dims [4].

Each is a batch-first graph (the batch dim symbolic), what ringside serves with max_batch_size > 0.
Run as a script it writes them into a folder: typed_models.py OUT_DIR.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

try:
    import ml_dtypes
except Exception:  # noqa: BLE001 - tritonclient brings it; without it there is no BF16 numpy type
    ml_dtypes = None

# Triton datatype -> (ONNX element type, numpy dtype)
TYPES = {
    "BOOL": (TensorProto.BOOL, np.bool_),
    "INT8": (TensorProto.INT8, np.int8),
    "INT16": (TensorProto.INT16, np.int16),
    "INT32": (TensorProto.INT32, np.int32),
    "INT64": (TensorProto.INT64, np.int64),
    "UINT8": (TensorProto.UINT8, np.uint8),
    "FP16": (TensorProto.FLOAT16, np.float16),
    "BF16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16 if ml_dtypes else None),
    "FP32": (TensorProto.FLOAT, np.float32),
    "FP64": (TensorProto.DOUBLE, np.float64),
    "BYTES": (TensorProto.STRING, np.object_),
}

# (input name, its type, output name, output type) of the cast model
CASTS = [("ids", "INT64", "ids_f", "FP32"), ("x32", "FP32", "x32_i", "INT32"), ("x64", "FP64", "x64_h", "FP16"),
         ("mask", "BOOL", "mask_f", "FP32"), ("pix", "UINT8", "pix_d", "FP64"), ("xb", "FP32", "xb_b", "BF16"),
         ("h", "FP16", "h_s", "INT16")]


def per_sample(dt):
    return [2] if dt == "BYTES" else [3]


def ident_model():
    ins, outs, nodes = [], [], []
    for dt, (et, _) in TYPES.items():
        n = dt.lower()
        ins.append(helper.make_tensor_value_info(f"in_{n}", et, ["N"] + per_sample(dt)))
        outs.append(helper.make_tensor_value_info(f"out_{n}", et, ["N"] + per_sample(dt)))
        nodes.append(helper.make_node("Identity", [f"in_{n}"], [f"out_{n}"], name=f"id_{n}"))
    g = helper.make_graph(nodes, "ident", ins, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="typed_models.py")


def cast_model(casts=CASTS):
    ins, outs, nodes = [], [], []
    for a, ta, b, tb in casts:
        ins.append(helper.make_tensor_value_info(a, TYPES[ta][0], ["N", 4]))
        outs.append(helper.make_tensor_value_info(b, TYPES[tb][0], ["N", 4]))
        nodes.append(helper.make_node("Cast", [a], [b], to=TYPES[tb][0], name=f"cast_{a}"))
    g = helper.make_graph(nodes, "cast", ins, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="typed_models.py")


def wide_model(n):
    """Identity on one FP32 input of n values per sample: a model whose requests carry many numbers."""
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="id")], "wide",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="typed_models.py")


def two_input_ids(t):
    """input_ids and attention_mask, INT64 (N, t), the way a BERT-style export takes them, each cast to FP32
    (the boundary a tower's graph starts with): what the served two-input INT64 figure runs."""
    nodes = [helper.make_node("Cast", ["input_ids"], ["ids_f"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, "two_input_ids",
                          [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["N", t]),
                           helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["N", t])],
                          [helper.make_tensor_value_info("ids_f", TensorProto.FLOAT, ["N", t]),
                           helper.make_tensor_value_info("mask_f", TensorProto.FLOAT, ["N", t])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="typed_models.py")


def write(out_dir):
    """Writes ident.onnx and cast.onnx into out_dir (checked by onnx.checker); returns their paths."""
    paths = {}
    for name, m in (("ident", ident_model()), ("cast", cast_model()), ("two_input_ids", two_input_ids(128))):
        onnx.checker.check_model(m)
        p = os.path.join(out_dir, name + ".onnx")
        onnx.save(m, p)
        paths[name] = p
    return paths


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    for k, p in write(sys.argv[1]).items():
        print(k, p, os.path.getsize(p), "bytes")
