#!/usr/bin/env python3
"""Writes tests/onnx/import/transformer/*.onnx: small files (a few KiB, deterministic weights) with the node
patterns torch's exporters write for transformers, so CI checks their import without torch
(test_transformer_patterns.py runs them against ONNX Runtime). Each graph copies, node for node, what
torch 2.x wrote for the module named beside it (tests/onnx/import/export_torch_transformers.py exports
the modules themselves where torch is installed). Run it again after changing a pattern: the files are
committed. Usage: gen_transformer_patterns.py [OUTDIR]"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformer")
I64_MAX, I64_MIN = 9223372036854775807, -9223372036854775808


class G:
    """A graph under construction: nodes named like torch's (/scope/Op_k), constants as Constant nodes (the
    TorchScript exporter) or initializers (dynamo)."""

    def __init__(self, seed):
        self.nodes, self.inits, self.k, self.rng = [], [], 0, np.random.default_rng(seed)

    def op(self, op, ins, n_out=1, name=None, **attrs):
        self.k += 1
        name = name or f"/{op}_{self.k}"
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(h.make_node(op, ins, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype=np.int64):
        """A Constant node, as the TorchScript exporter writes shape material."""
        return self.op("Constant", [], value=nh.from_array(np.array(value, dtype=dtype)))

    def init(self, value, dtype=np.float32, name=None):
        self.k += 1
        name = name or f"val_{self.k}"
        self.inits.append(nh.from_array(np.array(value, dtype=dtype), name))
        return name

    def weight(self, *shape):
        return self.init(self.rng.standard_normal(shape) * 0.4)

    def save(self, name, x_shape, y_shape, opset, x_type=TP.FLOAT):
        g = h.make_graph(self.nodes, name, [h.make_tensor_value_info("x", x_type, x_shape)],
                         [h.make_tensor_value_info("y", TP.FLOAT, y_shape)], self.inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="gen_transformer_patterns")
        m.ir_version = 8 if opset <= 18 else 9
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, os.path.join(OUT, f"{name}.onnx"))


def dim(g, shape_of, i):
    """Shape -> Gather(i): one size, a scalar (the batch among them)."""
    return g.op("Gather", [g.op("Shape", [shape_of]), g.const(i)], axis=0)


def unsq(g, s):
    return g.op("Unsqueeze", [s, g.const([0])])


def mha_ts(g, x, T, E, H, scope="/m"):
    """nn.MultiheadAttention(E, H, batch_first=True), TorchScript exporter (torch 2.x, opset 17): on
    (T, N, E), qkv picked by Unsqueeze/Transpose/Squeeze/Gather, heads as (T, N*H, hd) from
    Shape/Gather/Mul/Concat, (N*H, T, hd) viewed as (N, H, T, hd) for the products, the output projection
    on (T*N, E) and reshaped back."""
    d = E // H
    xt = g.op("Transpose", [x], perm=[1, 0, 2], name=f"{scope}/Transpose")
    T_, N_, E_ = dim(g, xt, 0), dim(g, xt, 1), dim(g, xt, 2)
    hd = g.op("Cast", [g.op("Cast", [g.op("Div", [E_, g.const(H)])], to=TP.INT64)], to=TP.INT64)
    qkv = g.op("Add", [g.weight(3 * E), g.op("MatMul", [xt, g.weight(E, 3 * E)])])
    sh = g.op("Shape", [qkv])
    lead = g.op("Slice", [sh, g.const([0]), g.const([-1]), g.const([0])])
    r = g.op("Reshape", [qkv, g.op("Concat", [lead, g.const([3]), unsq(g, E_)], axis=0)], allowzero=0)
    r = g.op("Unsqueeze", [r, g.const([0])])
    r = g.op("Transpose", [r], perm=[3, 1, 2, 0, 4])
    r = g.op("Squeeze", [r, g.const([-2])])
    q, k, v = (g.op("Gather", [r, g.const(i)], axis=0, name=f"{scope}/Gather_qkv{i}") for i in range(3))
    NH = g.op("Mul", [N_, g.const(H)], name=f"{scope}/Mul")
    heads = []
    for i, t in enumerate((q, k, v)):
        first = unsq(g, T_) if i == 0 else g.const([-1])
        t = g.op("Reshape", [t, g.op("Concat", [first, unsq(g, NH), unsq(g, hd)], axis=0)], allowzero=0)
        t = g.op("Transpose", [t], perm=[1, 0, 2])
        t = g.op("Reshape", [t, g.op("Concat", [unsq(g, N_), g.const([H]), unsq(g, T_), unsq(g, hd)], axis=0)])
        heads.append(t)
    s = g.op("Sqrt", [g.op("Sqrt", [g.op("Div", [g.const(1.0, np.float32), g.const(float(d), np.float32)])])])
    qs = g.op("Mul", [heads[0], s])
    ks = g.op("Mul", [g.op("Transpose", [heads[1]], perm=[0, 1, 3, 2]), s])
    a = g.op("Softmax", [g.op("MatMul", [qs, ks])], axis=-1)
    o = g.op("Transpose", [g.op("MatMul", [a, heads[2]])], perm=[2, 0, 1, 3])
    TN = g.op("Mul", [N_, T_], name=f"{scope}/Mul_TN")
    o = g.op("Reshape", [o, g.op("Concat", [unsq(g, TN), unsq(g, E_)], axis=0)], name=f"{scope}/Reshape_TN")
    o = g.op("Gemm", [o, g.weight(E, E), g.weight(E)], transB=1, alpha=1.0, beta=1.0, name=f"{scope}/Gemm")
    Eo = dim(g, o, 1)
    o = g.op("Reshape", [o, g.op("Concat", [unsq(g, T_), unsq(g, N_), unsq(g, Eo)], axis=0)])
    return g.op("Transpose", [o], perm=[1, 0, 2])


def mha_ts_file():
    g = G(1)
    mha_ts(g, "x", 5, 8, 2)
    g.nodes[-1].output[0] = "y"
    g.save("mha_torchscript", ["batch", 5, 8], ["batch", 5, 8], 17)


def encoder_layer_ts_file():
    """nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dropout=0) (post-norm, ReLU): the attention
    above, residual adds, LayerNormalization, the feed-forward."""
    g = G(2)
    a = mha_ts(g, "x", 5, 8, 2, scope="/layers.0/self_attn")
    x = g.op("LayerNormalization", [g.op("Add", ["x", a]), g.weight(8), g.weight(8)], axis=-1, epsilon=1e-5)
    f = g.op("Add", [g.weight(16), g.op("MatMul", [x, g.weight(8, 16)])])
    f = g.op("Add", [g.weight(8), g.op("MatMul", [g.op("Relu", [f]), g.weight(16, 8)])])
    g.op("LayerNormalization", [g.op("Add", [x, f]), g.weight(8), g.weight(8)], axis=-1, epsilon=1e-5)
    g.nodes[-1].output[0] = "y"
    g.save("encoder_layer_torchscript", ["batch", 5, 8], ["batch", 5, 8], 17)


def mha_dynamo_file():
    """nn.MultiheadAttention(8, 2, batch_first=True), dynamo exporter (opset 20): constant shapes with the
    -1 standing for N*H ([5, -1, 4]), and the keys' (N*H, T, hd) Reshape built from Shape/Slice/Concat."""
    g = G(3)
    T, E, H = 5, 8, 2
    d = E // H
    xt = g.op("Transpose", ["x"], perm=[1, 0, 2])
    lin = g.op("Add", [g.op("MatMul", [xt, g.weight(E, 3 * E)]), g.weight(3 * E)])
    v = g.op("Reshape", [lin, g.init([T, -1, 3, E], np.int64)], allowzero=1)
    v = g.op("Squeeze", [g.op("Transpose", [g.op("Unsqueeze", [v, g.init([0], np.int64)])], perm=[3, 1, 2, 0, 4]),
                         g.init([-2], np.int64)])
    hs = []
    for i in range(3):
        t = g.op("Gather", [v, g.init(i, np.int64)], axis=0, name=f"node_select_{i}")
        t = g.op("Transpose", [g.op("Reshape", [t, g.init([T, -1, d], np.int64)], allowzero=1)], perm=[1, 0, 2])
        hs.append(g.op("Reshape", [t, g.init([-1, H, T, d], np.int64)], allowzero=1))
    sk = g.op("Shape", [hs[1]], start=0)
    last = g.op("Slice", [sk, g.init([-1], np.int64), g.init([I64_MAX], np.int64)])
    tdim = g.op("Slice", [sk, g.init([-2], np.int64), g.init([-1], np.int64)])
    lead = g.op("Slice", [sk, g.init([I64_MIN], np.int64), g.init([-2], np.int64)])
    k = g.op("Reshape", [hs[1], g.op("Concat", [g.init([-1], np.int64), tdim, last], axis=0)], allowzero=0)
    k = g.op("Transpose", [k], perm=[0, 2, 1])
    k = g.op("Reshape", [k, g.op("Concat", [lead, last, tdim], axis=0)], allowzero=0)
    s = g.init([d ** -0.25])
    a = g.op("Softmax", [g.op("MatMul", [g.op("Mul", [hs[0], s]), g.op("Mul", [k, s])])], axis=-1)
    o = g.op("Transpose", [g.op("MatMul", [a, hs[2]])], perm=[2, 0, 1, 3])
    o = g.op("Reshape", [o, g.init([-1, E], np.int64)], allowzero=1)
    o = g.op("Gemm", [o, g.weight(E, E)], transB=1, alpha=1.0, beta=1.0, transA=0)
    o = g.op("Reshape", [o, g.init([T, -1, E], np.int64)], allowzero=1)
    g.op("Transpose", [o], perm=[1, 0, 2])
    g.nodes[-1].output[0] = "y"
    g.save("mha_dynamo", ["batch", T, E], ["batch", T, E], 20)


def gpt_dynamo_file(last_token):
    """A nanoGPT block and head, dynamo exporter (opset 20): Split(num_outputs=3) of qkv, Reshape
    [-1, T, H, hd] with allowzero=1, the keys through (N*H, T, hd) (Shape/Slice/Concat), the causal mask from
    Expand/Trilu/Equal/Where, Gelu; with last_token, the last position x[:, -1, :] as Gather(axis=1) on
    activations before the head's Gemm, else the head's MatMul on every position (this one compiles: its
    attention imports as the engine's attn layer)."""
    g = G(4)
    T, C, H, V = 4, 8, 2, 11
    d = C // H
    x = g.op("Add", [g.op("Gather", [g.weight(V, C), "x"], axis=0), g.weight(T, C)])
    ln = g.op("LayerNormalization", [x, g.weight(C), g.weight(C)], axis=-1, epsilon=1e-5, stash_type=1)
    lin = g.op("Add", [g.op("MatMul", [ln, g.weight(C, 3 * C)]), g.weight(3 * C)])
    q, k, v = g.op("Split", [lin], n_out=3, axis=2, num_outputs=3, name="/h.0/Split")
    shp = g.init([-1, T, H, d], np.int64)
    q, k, v = (g.op("Transpose", [g.op("Reshape", [t, shp], allowzero=1)], perm=[0, 2, 1, 3]) for t in (q, k, v))
    sq, sk = g.op("Shape", [q], start=0), g.op("Shape", [k], start=0)
    m2, m1, mx, mn = (g.init([i], np.int64) for i in (-2, -1, I64_MAX, I64_MIN))
    tq, tk = g.op("Slice", [sq, m2, m1]), g.op("Slice", [sk, m2, m1])
    mask = g.op("Trilu", [g.op("Expand", [g.init(1.0), g.op("Concat", [tq, tk], axis=0)])], upper=0)
    zero = g.init(0.0)
    mask = g.op("Where", [g.op("Equal", [mask, zero]), g.init(-3.4028234663852886e38), zero])
    last, lead = g.op("Slice", [sk, m1, mx]), g.op("Slice", [sk, mn, m2])
    kk = g.op("Reshape", [k, g.op("Concat", [m1, tk, last], axis=0)], allowzero=0)
    kk = g.op("Reshape", [g.op("Transpose", [kk], perm=[0, 2, 1]), g.op("Concat", [lead, last, tk], axis=0)], allowzero=0)
    s = g.init([d ** -0.25])
    a = g.op("Add", [g.op("MatMul", [g.op("Mul", [q, s]), g.op("Mul", [kk, s])]), mask])
    o = g.op("Transpose", [g.op("MatMul", [g.op("Softmax", [a], axis=-1), v])], perm=[0, 2, 1, 3])
    o = g.op("Reshape", [o, g.init([-1, T, C], np.int64)], allowzero=1)
    x = g.op("Add", [x, g.op("Add", [g.op("MatMul", [o, g.weight(C, C)]), g.weight(C)])])
    f = g.op("Gelu", [g.op("Add", [g.op("MatMul", [x, g.weight(C, 4 * C)]), g.weight(4 * C)])], approximate="none")
    x = g.op("Add", [x, g.op("Add", [g.op("MatMul", [f, g.weight(4 * C, C)]), g.weight(C)])])
    x = g.op("LayerNormalization", [x, g.weight(C), g.weight(C)], axis=-1, epsilon=1e-5, stash_type=1)
    if last_token:
        x = g.op("Gather", [x, g.init(-1, np.int64)], axis=1, name="node_select")
        g.op("Gemm", [x, g.weight(V, C)], transB=1, alpha=1.0, beta=1.0, transA=0)
    else:
        g.op("MatMul", [x, g.weight(C, V)])
    g.nodes[-1].output[0] = "y"
    g.save("gpt_dynamo_last" if last_token else "gpt_dynamo", ["batch", T], ["batch", V] if last_token else ["batch", T, V], 20,
           x_type=TP.INT64)


def gather_computed_file():
    """Gather on computed data with constant indices: evenly spaced 1-d ones (x[:, 0:6:2]), a 2-d block
    ([[1, 2], [3, 4]]) and a scalar counted from the end (x[..., -1])."""
    g = G(5)
    r = g.op("Relu", [g.op("MatMul", ["x", g.weight(5, 6)])])  # (N, 6, 6)
    a = g.op("Gather", [r, g.const([0, 2, 4])], axis=1)  # (N, 3, 6)
    b = g.op("Gather", [a, g.const([[1, 2], [3, 4]])], axis=2)  # (N, 3, 2, 2)
    c = g.op("Gather", [b, g.const(-1)], axis=-1)  # (N, 3, 2)
    g.op("Reshape", [c, g.const([0, -1])])
    g.nodes[-1].output[0] = "y"
    g.save("gather_computed", ["batch", 6, 5], ["batch", 6], 17)


def as_strided(g, flat, n, C, pick_step=1, delta=1, range_name=None):
    """torch's aten.as_strided as the dynamo exporter (opset 20) lowers it, in convnext_tiny's
    AdaptiveAvgPool2d: indices Range(0, N, 1) * C unsqueezed to (N, 1, 1, 1), plus arange(C) as
    (1, C, 1, 1) (here every pick_step-th channel), plus (1, 1, 1, 1) zeros twice, into one Gather of the
    (N, C, 1, 1) data flattened to (N*C)."""
    r = g.op("Range", [g.init(0, np.int64), n, g.init(delta, np.int64)], name=range_name)
    i = g.op("Unsqueeze", [g.op("Mul", [r, g.init(C, np.int64)]), g.init([1, 2, 3], np.int64)])
    i = g.op("Add", [i, g.init(np.arange(0, C, pick_step).reshape(1, -1, 1, 1), np.int64)])
    z = g.init(np.zeros((1, 1, 1, 1)), np.int64)
    return g.op("Gather", [flat, g.op("Add", [g.op("Add", [i, z]), z])], axis=0)


def as_strided_file(name, pick_step=1, delta=1, range_name=None):
    """ReduceMean over (H, W) keepdims, the as_strided of the whole (N, 6, 1, 1) (convnext's, a Reshape)
    and of every other channel (a Slice), Concat, Reshape to (N, 9), Gemm."""
    g = G(10)
    mean = g.op("ReduceMean", ["x", g.init([-1, -2], np.int64)], keepdims=1)
    flat = g.op("Reshape", [mean, g.init([-1], np.int64)])
    n = g.op("Squeeze", [g.op("Shape", ["x"], start=0, end=1)])
    a = as_strided(g, flat, n, 6)
    b = as_strided(g, flat, n, 6, pick_step, delta, range_name)
    cat = g.op("Concat", [a, b], axis=1)
    g.op("Gemm", [g.op("Reshape", [cat, g.init([-1, 6 + 6 // pick_step], np.int64)]), g.weight(5, 6 + 6 // pick_step),
                  g.weight(5)], transB=1)
    g.nodes[-1].output[0] = "y"
    g.save(name, ["batch", 6, 3, 3], ["batch", 5], 20)


def layernorm_over_more_file():
    """LayerNormalization over the last two dims of (N, 5, 4) (axis -2, scale and bias (5, 4)) and over
    the last two of (N, 2, 5, 2) without a bias: no engine layer (it normalises over the last dim only),
    so a generic op, which a plan runs with a workspace."""
    g = G(11)
    r = g.op("MatMul", ["x", g.weight(4, 4)])
    n1 = g.op("LayerNormalization", [r, g.weight(5, 4), g.weight(5, 4)], axis=-2, epsilon=1e-5)
    n2 = g.op("LayerNormalization", [g.op("Reshape", [n1, g.const([0, 2, 5, 2])]), g.weight(5, 2)], axis=2)
    g.op("Reshape", [g.op("Relu", [n2]), g.const([0, 5, 4])])
    g.nodes[-1].output[0] = "y"
    g.save("layernorm_over_more", ["batch", 5, 4], ["batch", 5, 4], 17)


def refusals():
    """Files the importer refuses, each with the words its message must hold (bad.txt)."""
    lines = []
    # nn.LSTM(4, 6, batch_first=True) + Linear, TorchScript exporter: the (1, N, 6) zero state from
    # Shape/Gather/Concat/ConstantOfShape comes before the LSTM node
    for op, gates in (("LSTM", 4), ("GRU", 3)):
        g = G(6)
        N_ = dim(g, "x", 0)
        st = g.op("ConstantOfShape", [g.op("Concat", [g.const([1]), unsq(g, N_), g.const([6])], axis=0)])
        xt = g.op("Transpose", ["x"], perm=[1, 0, 2])
        ins = [xt, g.weight(1, gates * 6, 4), g.weight(1, gates * 6, 6), g.weight(1, 2 * gates * 6), "", st]
        if op == "LSTM":
            ins.append(st)
        y = g.op(op, ins, n_out=2, name=f"/{op.lower()}/{op}", hidden_size=6)[0]
        y = g.op("Transpose", [g.op("Squeeze", [y, g.const([1])])], perm=[1, 0, 2])
        g.op("Add", [g.op("MatMul", [y, g.weight(6, 3)]), g.weight(3)])
        g.nodes[-1].output[0] = "y"
        name = f"{op.lower()}_torchscript"
        g.save(name, ["batch", 5, 4], ["batch", 5, 3], 17)
        lines.append(f"{name}\tnode '/{op.lower()}/{op}' ({op}, opset 17): unsupported operator '{op}': ringside has no "
                     f"recurrent layer")
    # indices that are not evenly spaced
    g = G(7)
    r = g.op("Relu", ["x"])
    g.op("Gather", [r, g.const([0, 1, 3])], axis=1, name="/Gather_uneven")
    g.nodes[-1].output[0] = "y"
    g.save("gather_uneven", ["batch", 4, 3], ["batch", 3, 3], 17)
    lines.append("gather_uneven\tnode '/Gather_uneven' (Gather, opset 17): Gather on computed data with indices that "
                 "are not evenly spaced")
    # (T, N, E) read back as (N, T*E): each sample's elements would depend on the batch size
    g = G(8)
    xt = g.op("Transpose", [g.op("Relu", ["x"])], perm=[1, 0, 2])
    g.op("Reshape", [xt, g.op("Concat", [unsq(g, dim(g, xt, 1)), g.const([-1])], axis=0)], name="/Reshape_mix")
    g.nodes[-1].output[0] = "y"
    g.save("reshape_mixes_batch", ["batch", 4, 3], ["batch", 12], 17)
    lines.append("reshape_mixes_batch\tnode '/Reshape_mix' (Reshape, opset 17): cannot tell where the batch goes "
                 "reshaping (4, N, 3) to (N, 12)")
    # a softmax over the merged (N*H) dimension
    g = G(9)
    xt = g.op("Transpose", [g.op("Relu", ["x"])], perm=[1, 0, 2])
    NH = g.op("Mul", [dim(g, xt, 1), g.const(2)])
    r = g.op("Reshape", [xt, g.op("Concat", [g.const([4]), unsq(g, NH), g.const([3])], axis=0)])
    r = g.op("Softmax", [r], axis=1, name="/Softmax_nh")
    g.op("Reshape", [g.op("Transpose", [r], perm=[1, 0, 2]), g.const([-1, 4, 6])])
    g.nodes[-1].output[0] = "y"
    g.save("softmax_over_batch_heads", ["batch", 4, 6], ["batch", 4, 6], 17)
    lines.append("softmax_over_batch_heads\tnode '/Softmax_nh' (Softmax, opset 17): axis 1 of (4, N*2, 3), whose "
                 "dimension 1 merges the batch with other sizes")
    # a range over the batch size that is not each sample's index
    as_strided_file("range_over_batch_step2", delta=2, range_name="/Range_step2")
    lines.append("range_over_batch_step2\tnode '/Range_step2' (Range, opset 20): a range over the batch size (torch's "
                 "as_strided) that does not start at 0 in steps of 1")
    with open(os.path.join(OUT, "bad.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for fn in (mha_ts_file, encoder_layer_ts_file, mha_dynamo_file, lambda: gpt_dynamo_file(True),
               lambda: gpt_dynamo_file(False), gather_computed_file, lambda: as_strided_file("as_strided_dynamo", 2),
               layernorm_over_more_file, refusals):
        fn()
    print(f"gen_transformer_patterns: wrote {len(os.listdir(OUT))} files to {OUT}")
