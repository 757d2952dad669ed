#!/usr/bin/env python3
"""Writes the small ONNX files of the vision operator patterns compile must take (issue 26), into
tests/plan/data/ (or the folder given as argv[1]). The files are committed; run this again after
changing a pattern (deterministic: numpy seed 26, so the same bytes come out).

Each file is a tiny image classifier in the shape torchvision's exporters write, input "x" (N, 3, 32,
32) with a symbolic batch, output "y" (N, 10):
  mbv3_block      stem conv + folded BatchNorm + HardSwish, depthwise 3x3 (group = C) + BatchNorm +
                  ReLU, squeeze-excite (GlobalAveragePool, 1x1 conv, ReLU, 1x1 conv, HardSigmoid, Mul
                  [N,C,1,1] * [N,C,H,W]), 1x1 conv + HardSwish, GlobalAveragePool, Flatten, Gemm
  resnet_block    conv + BN + ReLU, MaxPool, two 3x3 convs with the residual Add, ReLU, a
                  downsampling block whose 1x1 stride-2 shortcut comes before its branch in the
                  file (regnet's order), GlobalAveragePool, Flatten, Gemm (transB = 1, as torch
                  writes nn.Linear)
  reducemean      conv + SiLU (Sigmoid, Mul by x), ReduceMean over (2, 3) keepdims=0 (dynamo's
                  global pool), Gemm + GELU (the Erf pattern), Gemm; a second branch ReduceMean
                  keepdims=1 + Flatten, Relu6 (Clip 0..6) and a standalone Sigmoid added in, then
                  standalone HardSigmoid (alpha 0.2) and HardSwish
  shuffle         conv + Relu6, Split in two along channels, a conv on one half, Concat, channel
                  shuffle (Reshape (N, 2, 8, H, W), Transpose (0, 2, 1, 3, 4), Reshape back), grouped
                  3x3 conv (group 4), Slice of the first 12 channels, BatchNormalization after a
                  non-conv (kept as a Mul + Add), GlobalAveragePool, Gemm
  dnnl_ops        the nodes oneDNN runs in their inputs' (blocked) layout: squeeze-excite Mul with the
                  (N, C, 1, 1) scale first, standalone HardSwish, Sigmoid, Clip and Gelu, a broadcast
                  Add and Sub, Concat of five values, a 4x4 conv with pads (1, 1, 2, 2), MaxPool
                  pads (0, 0, 1, 1), AveragePool pads (2, 2, 0, 0) count_include_pad=1, an inception
                  block (Concat of four branches)
  pool_modes      AveragePool count_include_pad=0 with pads, MaxPool in ceil mode, AveragePool in ceil
                  mode not counting the pads (its last window past them), AveragePool in ceil mode
                  unpadded (counting the padding: the same average), GlobalAveragePool, Gemm
  dense_block     a densenet block: each of 16 layers (BatchNormalization on the Concat, ReLU, 3x3 conv
                  adding 4 channels) reads the Concat of the stem and every layer before it; the last
                  Concat joins 17 inputs (densenet121's up to 25: more than an engine op takes,
                  imported as a chain of three, whose last link oneDNN would lay out with the batch
                  inside: capped to AVX2 it writes plain), then a transition (BN, ReLU, 1x1 conv,
                  AveragePool)
  convnext_block  stem conv, depthwise 7x7, Transpose to NHWC, LayerNormalization over channels,
                  MatMul x4 + Gelu (the opset-20 operator), MatMul back (its bias Add reading the
                  bias first, as torch writes it), Transpose, residual Add, a standalone Gelu,
                  GlobalAveragePool, Gemm
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
rng = np.random.default_rng(26)


class G:
    """A graph under construction: nodes, initializers and fresh value names."""

    def __init__(self):
        self.nodes, self.inits, self.k = [], [], 0

    def name(self, p):
        self.k += 1
        return f"{p}{self.k}"

    def const(self, arr, p="c"):
        n = self.name(p)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def op(self, op, ins, **attrs):
        out = self.name(op.lower() + "_")
        self.nodes.append(helper.make_node(op, ins, [out], name=out.replace("_", "/"), **attrs))
        return out

    def conv(self, x, cin, cout, k, stride=1, group=1, bias=True, pad=None, pads=None):
        fan = cin // group * k * k
        w = self.const((rng.standard_normal((cout, cin // group, k, k)) / np.sqrt(fan)).astype(np.float32), "w")
        ins = [x, w]
        if bias:
            ins.append(self.const((rng.standard_normal(cout) * 0.1).astype(np.float32), "b"))
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                       pads=pads or [k // 2 if pad is None else pad] * 4, group=group)

    def bn(self, x, c):
        scale = (1 + 0.2 * rng.standard_normal(c)).astype(np.float32)
        bias = (0.1 * rng.standard_normal(c)).astype(np.float32)
        mean = (0.1 * rng.standard_normal(c)).astype(np.float32)
        var = (0.5 + rng.random(c)).astype(np.float32)
        return self.op("BatchNormalization", [x, self.const(scale), self.const(bias), self.const(mean), self.const(var)],
                       epsilon=1e-5)

    def gemm(self, x, i, o):
        w = self.const((rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32), "fc_w")
        b = self.const((rng.standard_normal(o) * 0.1).astype(np.float32), "fc_b")
        return self.op("Gemm", [x, w, b], alpha=1.0, beta=1.0, transB=1)

    def head(self, x, c, pool="gap"):
        if pool == "gap":
            x = self.op("GlobalAveragePool", [x])
        x = self.op("Flatten", [x], axis=1)
        return self.gemm(x, c, 10)

    def save(self, name, y, opset=17):
        y2 = self.op("Identity", [y])
        self.nodes[-1].output[0] = "y"
        del y2
        g = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="gen_patterns.py")
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        path = os.path.join(OUT, name + ".onnx")
        onnx.save(m, path)
        assert os.path.getsize(path) < 1 << 20, path


def mbv3_block():
    g = G()
    x = g.op("HardSwish", [g.bn(g.conv("x", 3, 16, 3, stride=2, bias=False), 16)])
    x = g.op("Relu", [g.bn(g.conv(x, 16, 16, 3, group=16, bias=False), 16)])
    s = g.op("GlobalAveragePool", [x])
    s = g.op("Relu", [g.conv(s, 16, 8, 1)])
    s = g.op("HardSigmoid", [g.conv(s, 8, 16, 1)], alpha=1.0 / 6, beta=0.5)
    x = g.op("Mul", [x, s])
    x = g.op("HardSwish", [g.bn(g.conv(x, 16, 24, 1, bias=False), 24)])
    g.save("mbv3_block", g.head(x, 24))


def resnet_block():
    g = G()
    x = g.op("Relu", [g.bn(g.conv("x", 3, 16, 3, bias=False), 16)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = g.op("Relu", [g.bn(g.conv(x, 16, 16, 3, bias=False), 16)])
    y = g.bn(g.conv(y, 16, 16, 3, bias=False), 16)
    x = g.op("Relu", [g.op("Add", [y, x])])
    # a downsampling block whose shortcut projection comes first in the file (as regnet's): the sum
    # belongs to the branch's last conv, which runs after it
    s = g.bn(g.conv(x, 16, 32, 1, stride=2, bias=False), 32)
    y = g.op("Relu", [g.bn(g.conv(x, 16, 32, 3, stride=2, bias=False), 32)])
    y = g.bn(g.conv(y, 32, 32, 3, bias=False), 32)
    x = g.op("Relu", [g.op("Add", [s, y])])
    g.save("resnet_block", g.head(x, 32))


def gelu_erf(g, x):
    t = g.op("Div", [x, g.const(np.array(np.sqrt(2.0), dtype=np.float32))])
    t = g.op("Add", [g.op("Erf", [t]), g.const(np.array(1.0, dtype=np.float32))])
    return g.op("Mul", [g.op("Mul", [x, t]), g.const(np.array(0.5, dtype=np.float32))])


def reducemean():
    g = G()
    x = g.conv("x", 3, 16, 3, stride=2)
    x = g.op("Mul", [x, g.op("Sigmoid", [x])])
    a = g.op("ReduceMean", [x], axes=[2, 3], keepdims=0)
    b = g.op("Flatten", [g.op("ReduceMean", [g.op("Clip", [x, g.const(np.array(0.0, dtype=np.float32)),
                                                           g.const(np.array(6.0, dtype=np.float32))])],
                                    axes=[2, 3], keepdims=1)], axis=1)
    h = g.op("Add", [a, g.op("Sigmoid", [b])])
    # standalone (no product before them): the engine's kernels
    h = g.op("HardSwish", [g.op("HardSigmoid", [h], alpha=0.2, beta=0.5)])
    h = gelu_erf(g, g.gemm(h, 16, 32))
    g.save("reducemean", g.gemm(h, 32, 10), opset=17)


def shuffle():
    g = G()
    x = g.op("Clip", [g.conv("x", 3, 16, 3, stride=2), g.const(np.array(0.0, dtype=np.float32)),
                      g.const(np.array(6.0, dtype=np.float32))])
    s1, s2 = g.name("split_"), g.name("split_")
    g.nodes.append(helper.make_node("Split", [x, g.const(np.array([8, 8], dtype=np.int64))], [s1, s2], name="split",
                                    axis=1))
    s2 = g.op("Relu", [g.conv(s2, 8, 8, 3)])
    x = g.op("Concat", [s1, s2], axis=1)
    x = g.op("Reshape", [x, g.const(np.array([-1, 2, 8, 16, 16], dtype=np.int64))])
    x = g.op("Transpose", [x], perm=[0, 2, 1, 3, 4])
    x = g.op("Reshape", [x, g.const(np.array([-1, 16, 16, 16], dtype=np.int64))])
    x = g.op("Relu", [g.conv(x, 16, 16, 3, group=4)])
    x = g.op("Slice", [x, g.const(np.array([0], dtype=np.int64)), g.const(np.array([12], dtype=np.int64)),
                       g.const(np.array([1], dtype=np.int64))])
    x = g.op("Relu", [g.bn(x, 12)])
    g.save("shuffle", g.head(x, 12))


def convnext_block():
    g = G()
    x = g.conv("x", 3, 16, 4, stride=4, pad=0)  # patchify: 8x8
    y = g.conv(x, 16, 16, 7, group=16)
    y = g.op("Transpose", [y], perm=[0, 2, 3, 1])
    y = g.op("LayerNormalization", [y, g.const((1 + 0.1 * rng.standard_normal(16)).astype(np.float32)),
                                    g.const((0.1 * rng.standard_normal(16)).astype(np.float32))], axis=-1,
             epsilon=1e-6)
    w1 = g.const((rng.standard_normal((16, 64)) / 4).astype(np.float32), "w")
    y = g.op("Add", [g.op("MatMul", [y, w1]), g.const((0.1 * rng.standard_normal(64)).astype(np.float32))])
    y = g.op("Gelu", [y])
    w2 = g.const((rng.standard_normal((64, 16)) / 8).astype(np.float32), "w")
    # the bias first, as torch's exporters write it
    y = g.op("Add", [g.const((0.1 * rng.standard_normal(16)).astype(np.float32)), g.op("MatMul", [y, w2])])
    y = g.op("Transpose", [y], perm=[0, 3, 1, 2])
    x = g.op("Gelu", [g.op("Add", [x, y])])  # a standalone Gelu
    g.save("convnext_block", g.head(x, 16), opset=20)


def dnnl_ops():
    g = G()
    x = g.op("Relu", [g.conv("x", 3, 16, 3, stride=2)])
    s = g.op("GlobalAveragePool", [x])
    s = g.op("HardSigmoid", [g.conv(g.op("Relu", [g.conv(s, 16, 8, 1)]), 8, 16, 1)], alpha=1.0 / 6, beta=0.5)
    x = g.op("HardSwish", [g.op("Mul", [s, x])])  # the broadcast input first; a standalone HardSwish
    a = g.op("Relu", [g.conv(x, 16, 16, 3)])
    b = g.op("Sigmoid", [x])
    c = g.op("Clip", [g.op("Add", [g.conv(x, 16, 8, 1), g.conv(s, 16, 8, 1)]),
                      g.const(np.array(0.0, dtype=np.float32)), g.const(np.array(6.0, dtype=np.float32))])
    e = g.op("Relu", [g.conv(x, 16, 8, 1)])
    x = g.op("Concat", [a, b, c, x, e], axis=1)  # five inputs, 64 channels
    x = g.op("Gelu", [g.op("Sub", [x, g.op("GlobalAveragePool", [x])])])
    x = g.conv(x, 64, 16, 4, pads=[1, 1, 2, 2])  # pads begin != end (an even kernel's "same")
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1])
    x = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[2, 2, 0, 0], count_include_pad=1)
    # an inception block: four branches concatenated
    p1, p2 = g.op("Relu", [g.conv(x, 16, 8, 1)]), g.op("Relu", [g.conv(x, 16, 8, 3)])
    p3 = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    x = g.op("Concat", [x, p1, p2, p3], axis=1)  # 48 channels
    x = g.op("Relu", [g.conv(x, 48, 16, 3)])
    g.save("dnnl_ops", g.head(x, 16), opset=20)


def pool_modes():
    g = G()
    x = g.op("Relu", [g.conv("x", 3, 16, 3)])
    x = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)  # 16x16
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)  # 8x8 (floor: 7x7)
    x = g.op("Relu", [g.conv(x, 16, 16, 3)])
    x = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
             count_include_pad=0)  # 5x5 (floor: 4x4), the last window past the pads
    x = g.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, count_include_pad=1)  # 3x3, unpadded
    g.save("pool_modes", g.head(x, 16))


def dense_block():
    g = G()
    feats = [g.op("Relu", [g.conv("x", 3, 16, 3, stride=2)])]  # 16x16
    for _ in range(16):
        x = feats[0] if len(feats) == 1 else g.op("Concat", feats, axis=1)
        c = 16 + 4 * (len(feats) - 1)
        feats.append(g.conv(g.op("Relu", [g.bn(x, c)]), c, 4, 3))
    x = g.op("Concat", feats, axis=1)  # 17 inputs, 80 channels
    x = g.conv(g.op("Relu", [g.bn(x, 80)]), 80, 32, 1)
    x = g.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    g.save("dense_block", g.head(x, 32))


PATTERNS = [mbv3_block, resnet_block, reducemean, shuffle, convnext_block, dnnl_ops, pool_modes, dense_block]

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for f in PATTERNS:
        f()
        print(f"wrote {os.path.join(OUT, f.__name__ + '.onnx')}")
