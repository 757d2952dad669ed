#!/usr/bin/env python3
"""Writes tests/onnx/import/two_tower/*.onnx: small models with several inputs (deterministic weights, a
few KiB each), the shapes of a recommender's two-tower model and of a model that takes an image and
side features. test_two_tower.py runs them against ONNX Runtime, and tests/serve/test_triton_two_tower.py
serves two_tower.onnx from a repository written by hand. The files are committed; run this again after
changing one. Usage: gen_two_tower.py [OUTDIR]

  two_tower      user (B, 12) and item (B, 5): each Gemm+Relu, Concat, Gemm -> (B, 4)
  two_tower_mul  the same towers meeting by Mul (an elementwise interaction), then Gemm -> (B, 3)
  two_tower_add  three inputs: a (B, 6), b (B, 2, 3) flattened, c (B, 6); a's and b's towers Add, times
                 c, then Gemm -> (B, 2), so a declared input of rank 3 and inputs used twice
  mixed_types    ids (B, 4) int64 and dense (B, 3) float: refused, naming both inputs"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "two_tower")
rng = np.random.default_rng(27)


def init(name, *shape):
    return nh.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)


def inp(name, *dims, t=TP.FLOAT):
    return h.make_tensor_value_info(name, t, ["batch"] + list(dims))


def tower(nodes, inits, x, prefix, n_in, n_out):
    """Gemm (transB, as torch writes Linear) + Relu; returns the output's name."""
    inits += [init(f"{prefix}.weight", n_out, n_in), init(f"{prefix}.bias", n_out)]
    nodes += [h.make_node("Gemm", [x, f"{prefix}.weight", f"{prefix}.bias"], [f"{prefix}_lin"], name=f"/{prefix}/Gemm",
                          transB=1),
              h.make_node("Relu", [f"{prefix}_lin"], [f"{prefix}_out"], name=f"/{prefix}/Relu")]
    return f"{prefix}_out"


def save(name, nodes, inits, inputs, out_dim):
    g = h.make_graph(nodes, name, inputs, [h.make_tensor_value_info("score", TP.FLOAT, ["batch", out_dim])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], producer_name="gen_two_tower")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, f"{name}.onnx"))


def head(nodes, inits, x, n_in, n_out):
    inits += [init("head.weight", n_out, n_in), init("head.bias", n_out)]
    nodes.append(h.make_node("Gemm", [x, "head.weight", "head.bias"], ["score"], name="/head/Gemm", transB=1))


os.makedirs(OUT, exist_ok=True)

nodes, inits = [], []
u = tower(nodes, inits, "user", "user_tower", 12, 8)
i = tower(nodes, inits, "item", "item_tower", 5, 6)
nodes.append(h.make_node("Concat", [u, i], ["joined"], name="/Concat", axis=1))
head(nodes, inits, "joined", 14, 4)
save("two_tower", nodes, inits, [inp("user", 12), inp("item", 5)], 4)

nodes, inits = [], []
u = tower(nodes, inits, "user", "user_tower", 12, 8)
i = tower(nodes, inits, "item", "item_tower", 5, 8)
nodes.append(h.make_node("Mul", [u, i], ["interaction"], name="/Mul"))
head(nodes, inits, "interaction", 8, 3)
save("two_tower_mul", nodes, inits, [inp("user", 12), inp("item", 5)], 3)

nodes, inits = [], []
nodes.append(h.make_node("Flatten", ["b"], ["b_flat"], name="/Flatten", axis=1))
ta = tower(nodes, inits, "a", "a_tower", 6, 6)
tb = tower(nodes, inits, "b_flat", "b_tower", 6, 6)
nodes += [h.make_node("Add", [ta, tb], ["summed"], name="/Add"),
          h.make_node("Mul", ["summed", "c"], ["gated"], name="/Mul"),
          h.make_node("Add", ["gated", "a"], ["residual"], name="/Add_1")]
head(nodes, inits, "residual", 6, 2)
save("two_tower_add", nodes, inits, [inp("a", 6), inp("b", 2, 3), inp("c", 6)], 2)

nodes, inits = [], []
inits.append(init("table", 10, 3))
nodes += [h.make_node("Gather", ["table", "ids"], ["emb"], name="/Gather", axis=0),
          h.make_node("ReduceMean", ["emb"], ["pooled"], name="/ReduceMean", axes=[1], keepdims=0),
          h.make_node("Add", ["pooled", "dense"], ["summed"], name="/Add")]
head(nodes, inits, "summed", 3, 2)
save("mixed_types", nodes, inits, [inp("ids", 4, t=TP.INT64), inp("dense", 3)], 2)
