#!/usr/bin/env python3
"""Writes the ONNX files the importer test runs, with ONNX Runtime's outputs beside them.

make_models.py OUTDIR writes OUTDIR/<name>.onnx, <name>.b<B>.in.f32 and <name>.b<B>.out.f32 (raw
little-endian float32) for batches 1 and 7, and OUTDIR/manifest.txt with one line per file:
  good NAME IN_NUMEL OUT_NUMEL TOL MODEL   (MODEL: 1 if rs_onnx_to_model must work, 0 if not tried)
  bad NAME SUBSTRING...                    (the import must fail with a message containing it)
Models come from onnx.helper (every pattern the importer folds or runs) and, when torch imports,
from torch.onnx.export (TorchScript exporter at opsets 13 and 17, the dynamo one at 18 if it works
offline). Needs numpy, onnx and onnxruntime; the caller checks they import.
"""
import os
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(1234)
manifest = []


def W(name, *shape, scale=0.5):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def I64(name, vals):
    return numpy_helper.from_array(np.array(vals, dtype=np.int64), name)


def save_model(name, model, in_shape, tol=1e-5, to_model=0, batches=(1, 7), external=False):
    """Runs ORT on fixed inputs and writes the model, inputs and outputs (external=True: the weights go
    to NAME.onnx.data beside it, as torch's dynamo exporter writes big models)."""
    # The helper graphs leave the output's shape out (the importer infers it), which the checker wants
    # present; check a copy with the inferred shapes filled in.
    onnx.checker.check_model(onnx.shape_inference.infer_shapes(model) if name.startswith("torch") else model,
                             full_check=False) if name.startswith("torch") else None
    path = os.path.join(OUT, name + ".onnx")
    if external:
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=name + ".onnx.data", size_threshold=0)
    else:
        onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    iname = sess.get_inputs()[0].name
    in_numel = int(np.prod(in_shape))
    out_numel = None
    fixed = sess.get_inputs()[0].shape[0]
    for b in batches:
        x = rng.standard_normal((b, *in_shape)).astype(np.float32)
        if isinstance(fixed, int):  # batch fixed in the file: ORT runs it a chunk at a time too
            y = np.concatenate([sess.run(None, {iname: x[i:i + fixed]})[0] for i in range(0, b, fixed)])
        else:
            y = sess.run(None, {iname: x})[0]
        y = y.astype(np.float32).reshape(b, -1)
        out_numel = y.shape[1]
        x.tofile(os.path.join(OUT, f"{name}.b{b}.in.f32"))
        y.tofile(os.path.join(OUT, f"{name}.b{b}.out.f32"))
    manifest.append(f"good {name} {in_numel} {out_numel} {tol} {to_model}")


def save_model_file(name, path, in_shape, tol=1e-5):
    """save_model for a file already written in OUT (with its external data beside it)."""
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    iname = sess.get_inputs()[0].name
    for b in (1, 7):
        x = rng.standard_normal((b, *in_shape)).astype(np.float32)
        y = sess.run(None, {iname: x})[0].astype(np.float32).reshape(b, -1)
        x.tofile(os.path.join(OUT, f"{name}.b{b}.in.f32"))
        y.tofile(os.path.join(OUT, f"{name}.b{b}.out.f32"))
    manifest.append(f"good {name} {int(np.prod(in_shape))} {y.shape[1]} {tol} 0")


def mk(nodes, inits, in_shape, out_name="y", opset=13, in_name="x", batch="N"):
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(in_name, TensorProto.FLOAT, [batch, *in_shape])],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_models.py")
    m.ir_version = 8
    return m


N = helper.make_node

# 1. Flatten + Gemm(transB) + Relu + Gemm: a plain MLP the engine can train
m = mk([N("Flatten", ["x"], ["f"], axis=1),
        N("Gemm", ["f", "w1", "b1"], ["h"], transB=1),
        N("Relu", ["h"], ["r"]),
        N("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
       [W("w1", 12, 16), W("b1", 12), W("w2", 5, 12), W("b2", 5)], [1, 4, 4])
save_model("mlp_gemm", m, [1, 4, 4], to_model=1)

# 2. Shape -> Gather -> Unsqueeze -> Concat -> Reshape (x.view(x.size(0), -1)), MatMul + Add, Identity, Softmax
m = mk([N("Shape", ["x"], ["s"]),
        N("Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.INT64, [], [0])),
        N("Gather", ["s", "zero"], ["n"], axis=0),
        N("Unsqueeze", ["n", "ax0"], ["n1"]),
        N("Constant", [], ["rest"], value_ints=[-1]),
        N("Concat", ["n1", "rest"], ["shape"], axis=0),
        N("Reshape", ["x", "shape"], ["flat"]),
        N("MatMul", ["flat", "w"], ["mm"]),
        N("Add", ["mm", "b"], ["lin"]),
        N("Identity", ["lin"], ["id"]),
        N("Softmax", ["id"], ["y"], axis=-1)],
       [W("w", 48, 6), W("b", 6), I64("ax0", [0])], [3, 4, 4])
save_model("shape_chain", m, [3, 4, 4], to_model=0)

# 3. Transpose there and back, BatchNormalization (inference), GlobalAveragePool, Flatten
m = mk([N("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        N("Transpose", ["t"], ["u"], perm=[0, 3, 1, 2]),
        N("BatchNormalization", ["u", "sc", "bi", "mu", "var"], ["bn"], epsilon=1e-3),
        N("GlobalAveragePool", ["bn"], ["gp"]),
        N("Flatten", ["gp"], ["y"])],
       [W("sc", 3), W("bi", 3), W("mu", 3),
        numpy_helper.from_array(rng.uniform(0.5, 2, 3).astype(np.float32), "var")], [3, 5, 5])
save_model("transpose_bn", m, [3, 5, 5])

# 4. Broadcasting Add/Mul/Sub/Div against vectors, columns, scalars and full tensors
m = mk([N("Add", ["x", "v6"], ["a"]),
        N("Mul", ["a", "c41"], ["b"]),
        N("Sub", ["b", "s"], ["c"]),
        N("Div", ["c", "full"], ["d"]),
        N("Mul", ["d", "d"], ["e"]),
        N("Sub", ["s", "e"], ["y"])],
       [W("v6", 6), W("c41", 4, 1), W("s"),
        numpy_helper.from_array(rng.uniform(1, 2, (1, 4, 6)).astype(np.float32), "full")], [4, 6])
save_model("broadcast", m, [4, 6])

# 5. Gelu as the exporters write it (Erf expansion), Tanh
m = mk([N("MatMul", ["x", "w1"], ["h"]),
        N("Div", ["h", "sqrt2"], ["hd"]),
        N("Erf", ["hd"], ["he"]),
        N("Add", ["he", "one"], ["h1"]),
        N("Mul", ["h", "h1"], ["hm"]),
        N("Mul", ["hm", "half"], ["g"]),
        N("Tanh", ["g"], ["t"]),
        N("MatMul", ["t", "w2"], ["y"])],
       [W("w1", 8, 16), W("w2", 16, 3), numpy_helper.from_array(np.array(1.4142135381698608, np.float32), "sqrt2"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half")], [8])
save_model("gelu_erf", m, [8], to_model=1)

# 6. LayerNormalization at opset 17 on a 3-d tensor, MatMul over the last dim
m = mk([N("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
        N("MatMul", ["ln", "w"], ["y"])],
       [W("g", 8), W("b", 8), W("w", 8, 4)], [6, 8], opset=17)
save_model("layernorm17", m, [6, 8])

# 7. Conv + pools: padding, stride, asymmetric pads, count_include_pad=0, ceil mode, global pool
m = mk([N("Conv", ["x", "k1", "kb1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Relu", ["c1"], ["r1"]),
        N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Conv", ["p1", "k2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 1, 0]),
        N("AveragePool", ["c2"], ["p2"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
        N("MaxPool", ["p2"], ["p3"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        N("AveragePool", ["p3"], ["p4"], kernel_shape=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
        N("GlobalAveragePool", ["p4"], ["gp"]),
        N("Flatten", ["gp"], ["f"]),
        N("Gemm", ["f", "w", "wb"], ["y"], transB=1)],
       [W("k1", 4, 2, 3, 3), W("kb1", 4), W("k2", 6, 4, 3, 3), W("w", 3, 6), W("wb", 3)], [2, 12, 11])
save_model("conv_pool", m, [2, 12, 11])

# 8. A plain CNN the engine can train: conv, relu, maxpool, avgpool, flatten, gemm
m = mk([N("Conv", ["x", "k1", "kb1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Relu", ["c1"], ["r1"]),
        N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Conv", ["p1", "k2", "kb2"], ["c2"], kernel_shape=[3, 3], strides=[1, 1]),
        N("Tanh", ["c2"], ["t2"]),
        N("AveragePool", ["t2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Flatten", ["p2"], ["f"]),
        N("Gemm", ["f", "w", "wb"], ["y"], transB=1)],
       [W("k1", 4, 1, 3, 3), W("kb1", 4), W("k2", 6, 4, 3, 3), W("kb2", 6), W("w", 10, 12), W("wb", 10)], [1, 12, 10])
save_model("cnn_plain", m, [1, 12, 10], to_model=1)

# 9. Grouped conv, Dropout (identity in inference), a Constant bias, Sigmoid
m = mk([N("Conv", ["x", "k"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=2),
        N("Dropout", ["c"], ["d"]),
        N("Constant", [], ["cb"], value=numpy_helper.from_array(rng.standard_normal((4, 1, 1)).astype(np.float32))),
        N("Add", ["d", "cb"], ["a"]),
        N("Sigmoid", ["a"], ["y"])],
       [W("k", 4, 2, 3, 3)], [4, 5, 5])
save_model("group_dropout", m, [4, 5, 5])

# 10. LayerNorm as opset 13 exporters expand it: ReduceMean (axes attribute), Sub, Pow, Sqrt, Div
m = mk([N("ReduceMean", ["x"], ["mu"], axes=[-1]),
        N("Sub", ["x", "mu"], ["xc"]),
        N("Pow", ["xc", "two"], ["sq"]),
        N("ReduceMean", ["sq"], ["var"], axes=[-1]),
        N("Add", ["var", "eps"], ["ve"]),
        N("Sqrt", ["ve"], ["sd"]),
        N("Div", ["xc", "sd"], ["n"]),
        N("Mul", ["n", "g"], ["ng"]),
        N("Add", ["ng", "b"], ["y"])],
       [numpy_helper.from_array(np.array(2.0, np.float32), "two"),
        numpy_helper.from_array(np.array(1e-5, np.float32), "eps"), W("g", 10), W("b", 10)], [3, 10])
save_model("layernorm_expanded13", m, [3, 10])

# 11. Opset 18: ReduceMean with axes as an input, Squeeze/Unsqueeze, LogSoftmax
m = mk([N("ReduceMean", ["x", "ax"], ["m"], keepdims=1),
        N("Squeeze", ["m", "ax"], ["s"]),
        N("Unsqueeze", ["s", "ax1"], ["u"]),
        N("Flatten", ["u"], ["f"]),
        N("LogSoftmax", ["f"], ["y"], axis=1)],
       [I64("ax", [2]), I64("ax1", [1])], [5, 6], opset=18)
save_model("reduce18", m, [5, 6])

# 12b. The batch moves: a Transpose puts it second, and the engine's layers (linear over the last
# dim, LayerNorm, Relu) and ops (Softmax over dim 0, Add of a (3, 1, 5) constant, Mul of two computed
# values) run on (3, N, ...) values; one model transposes back, the other returns (3, N, 5) as it is.
batch_second = [N("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
                N("MatMul", ["t", "w"], ["mm"]),
                N("Add", ["mm", "b"], ["lin"]),
                N("LayerNormalization", ["lin", "g", "bb"], ["ln"], axis=-1, epsilon=1e-5),
                N("Relu", ["ln"], ["r"]),
                N("Add", ["r", "pos"], ["rp"]),
                N("Softmax", ["rp"], ["sm"], axis=0),
                N("Mul", ["sm", "lin"], ["z"])]
bs_inits = [W("w", 4, 5), W("b", 5), W("g", 5), W("bb", 5), W("pos", 3, 1, 5)]
m = mk(batch_second + [N("Transpose", ["z"], ["y"], perm=[1, 0, 2])], bs_inits, [3, 4], opset=17)
save_model("batch_second", m, [3, 4])
m = mk([*batch_second[:-1], N("Mul", ["sm", "lin"], ["y"])], bs_inits, [3, 4], opset=17)
save_model("batch_second_out", m, [3, 4])

# 12. The batch fixed at 1 in the file: the importer runs a batch of 7 one row at a time
m = mk([N("Reshape", ["x", "shp"], ["r"]), N("Gemm", ["r", "w", "b"], ["y"])],
       [I64("shp", [1, 12]), W("w", 12, 4), W("b", 4)], [3, 4], batch=1)
save_model("fixed_batch", m, [3, 4])

# 12b. The batch fixed at 4 (what torch.onnx.export writes without dynamic axes): a conv, then a Reshape to
# the fixed (4, -1) (so not a trainable sequence), Gemm, LogSoftmax. The executor runs 4 rows a sample;
# eval runs a data set 4 samples at a time, padding the last group (checked against ORT on the same rows:
# "eval NAME N CLASSES CORRECT LOSS_SUM", inputs in NAME.eval.in.f32, labels in NAME.eval.y.i32).
FB = 4
m = mk([N("Conv", ["x", "k", "kb"], ["c"], pads=[1, 1, 1, 1]),
        N("Relu", ["c"], ["r"]),
        N("Reshape", ["r", "shp"], ["f"]),
        N("Gemm", ["f", "w", "b"], ["z"], transB=1),
        N("LogSoftmax", ["z"], ["y"], axis=1)],
       [W("k", 3, 1, 3, 3), W("kb", 3), I64("shp", [FB, -1]), W("w", 5, 3 * 6 * 6, scale=0.2), W("b", 5)],
       [1, 6, 6], batch=FB)
save_model("fixed_batch4", m, [1, 6, 6], batches=(FB, 2 * FB))
sess = ort.InferenceSession(os.path.join(OUT, "fixed_batch4.onnx"), providers=["CPUExecutionProvider"])
n_eval = 10  # not a multiple of 4: the last group is padded
xe = rng.standard_normal((n_eval, 1, 6, 6)).astype(np.float32)
pad = -n_eval % FB
xp = np.concatenate([xe, np.repeat(xe[-1:], pad, axis=0)])
ze = np.concatenate([sess.run(None, {"x": xp[i:i + FB]})[0] for i in range(0, len(xp), FB)])[:n_eval].astype(np.float64)
ye = ze.argmax(1).astype(np.int32)
ye[::3] = (ye[::3] + 1) % 5  # 6 of 10 right: a count that a wrong row order or a padded row would change
lse = np.log(np.exp(ze - ze.max(1, keepdims=True)).sum(1)) + ze.max(1)
xe.tofile(os.path.join(OUT, "fixed_batch4.eval.in.f32"))
ye.tofile(os.path.join(OUT, "fixed_batch4.eval.y.i32"))
with open(os.path.join(OUT, "fixed_batch4.eval.csv"), "w") as f:  # the same rows for the REPL: label, then features
    for i in range(n_eval):
        f.write(",".join([str(int(ye[i]))] + [repr(float(v)) for v in xe[i].ravel()]) + "\n")
manifest.append(f"eval fixed_batch4 {n_eval} 5 {int((ze.argmax(1) == ye).sum())} "
                f"{float((lse - ze[np.arange(n_eval), ye]).sum()):.9g}")


# 12c. Initializers several nodes read live once in the model's parameter buffer: "params NAME BYTES
# TRAIN_BYTES" is the parameter pool's size, the distinct constants each rounded up to 16 floats (the
# buffer's alignment), for the inference model and for the trainable one (-1: refused for a weight read
# in two layouts, -2: not trainable anyway).
def param_bytes(*arrays):
    return sum(-(-int(np.prod(a.dims)) // 16) * 16 * 4 for a in arrays)


# a weight tied across two Gemm layers of a plain sequence: the trainable model ties them (linear tie=)
tw, tb1, tb2, tw2, tb3 = W("w", 8, 8), W("b1", 8), W("b2", 8), W("w2", 5, 8), W("b3", 5)
m = mk([N("Gemm", ["x", "w", "b1"], ["h"], transB=1), N("Relu", ["h"], ["r"]),
        N("Gemm", ["r", "w", "b2"], ["h2"], transB=1), N("Relu", ["h2"], ["r2"]),
        N("Gemm", ["r2", "w2", "b3"], ["y"], transB=1)], [tw, tb1, tb2, tw2, tb3], [8])
save_model("shared_tied_mlp", m, [8], to_model=1)
manifest.append(f"params shared_tied_mlp {param_bytes(tw, tb1, tb2, tw2, tb3)} {param_bytes(tw, tb1, tb2, tw2, tb3)}")
# the same weight in two layouts (Gemm transB=1 and transB=0): the transposed one is a copy, so the
# trainable model (which would untie them) is refused
m = mk([N("Gemm", ["x", "w", "b1"], ["h"], transB=1), N("Relu", ["h"], ["r"]),
        N("Gemm", ["r", "w", "b2"], ["y"])], [tw, tb1, tb2], [8])
save_model("shared_transposed", m, [8])
manifest.append(f"params shared_transposed {param_bytes(tw, tw, tb1, tb2)} -1")
# one weight read by three MatMul layers, a scale read by two Mul ops and an Add, LayerNorm parameters
# read by two LayerNormalization layers; a Softmax between them makes it inference-only
sw, ss, sg, sb = W("w", 8, 8), W("s", 8), W("g", 8), W("bb", 8)
m = mk([N("MatMul", ["x", "w"], ["a"]), N("Mul", ["a", "s"], ["a2"]), N("Softmax", ["a2"], ["a3"], axis=-1),
        N("MatMul", ["a3", "w"], ["b"]), N("Mul", ["b", "s"], ["b2"]),
        N("LayerNormalization", ["b2", "g", "bb"], ["b3"], axis=-1),
        N("MatMul", ["b3", "w"], ["c"]), N("Add", ["c", "s"], ["c2"]),
        N("LayerNormalization", ["c2", "g", "bb"], ["y"], axis=-1)], [sw, ss, sg, sb], [8], opset=17)
save_model("shared_consts", m, [8], tol=1e-4)
manifest.append(f"params shared_consts {param_bytes(sw, ss, sg, sb)} -2")


# ---- what torch.onnx.export writes for transformer and modern CNN blocks ----
F32 = lambda name, a: numpy_helper.from_array(np.asarray(a, np.float32), name)

# 13. Split with the opset-13 input form; the parts meet again through ReduceMean and Add
m = mk([N("Split", ["x", "sp"], ["a", "b"], axis=1),
        N("ReduceMean", ["b"], ["bm"], axes=[1], keepdims=1),
        N("Add", ["a", "bm"], ["y"])],
       [I64("sp", [2, 4])], [6, 4])
save_model("split13", m, [6, 4])

# 14. Split at opset 11 (split attribute, three outputs, last axis), Concat in another order
m = mk([N("Split", ["x"], ["a", "b", "c"], axis=-1, split=[1, 3, 2]),
        N("Concat", ["c", "a", "b"], ["y"], axis=-1)], [], [3, 6], opset=11)
save_model("split11_attr", m, [3, 6])

# 15. Split at opset 18 with num_outputs and an uneven last part (7 = 3 + 3 + 1)
m = mk([N("Split", ["x"], ["a", "b", "c"], axis=2, num_outputs=3),
        N("Mul", ["a", "b"], ["ab"]),
        N("Concat", ["ab", "c"], ["y"], axis=2)], [], [2, 7], opset=18)
save_model("split18_num_outputs", m, [2, 7])

# 16. Range, Mod (fmod 0 on ints, 1 on floats), Equal, Where, Cast chains on constants and on x
m = mk([N("Range", ["r0", "r6", "r1"], ["pos"]),                 # [0..5] int64
        N("Mod", ["pos", "two"], ["odd"]),                          # fmod=0
        N("Equal", ["odd", "zero"], ["even"]),                      # bool
        N("Cast", ["even"], ["evenf"], to=TensorProto.FLOAT),
        N("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT),
        N("Mod", ["x", "mf"], ["xm"], fmod=1),                      # float fmod on computed values
        N("Where", ["even", "x", "xm"], ["w"]),
        N("Mul", ["w", "evenf"], ["w2"]),
        N("Add", ["w2", "posf"], ["w3"]),
        N("Cast", ["x"], ["xi"], to=TensorProto.INT64),             # truncation toward zero
        N("Cast", ["xi"], ["xif"], to=TensorProto.FLOAT),
        N("Cast", ["x"], ["xb"], to=TensorProto.BOOL),
        N("Cast", ["xb"], ["xbf"], to=TensorProto.FLOAT),
        N("Add", ["w3", "xif"], ["w4"]),
        N("Add", ["w4", "xbf"], ["w5"]),
        N("Cast", ["x"], ["x32"], to=TensorProto.INT32),            # float -> int32 -> double -> float
        N("Cast", ["x32"], ["x32d"], to=TensorProto.DOUBLE),
        N("Cast", ["x32d"], ["x32f"], to=TensorProto.FLOAT),
        N("Cast", ["pos"], ["pos32"], to=TensorProto.INT32),        # folded: int64 -> int32 -> bool -> float
        N("Cast", ["pos32"], ["posb"], to=TensorProto.BOOL),
        N("Cast", ["posb"], ["posbf"], to=TensorProto.FLOAT),
        N("Mul", ["x32f", "posbf"], ["w6"]),
        N("Add", ["w5", "w6"], ["y"])],
       [I64("r0", 0), I64("r6", 6), I64("r1", 1), I64("two", 2), I64("zero", 0), F32("mf", 0.7)], [6])
save_model("range_mod_where_cast", m, [6])

# 17. Trilu: on x (upper with k=1, lower with k=-1) and on a constant that becomes a causal mask
m = mk([N("Trilu", ["x", "k1"], ["u"], upper=1),
        N("Trilu", ["x", "km1"], ["l"], upper=0),
        N("Add", ["u", "l"], ["ul"]),
        N("Trilu", ["ones"], ["tri"], upper=0),
        N("Equal", ["tri", "fzero"], ["masked"]),
        N("Where", ["masked", "ninf", "ul"], ["att"]),
        N("Softmax", ["att"], ["y"], axis=-1)],
       [I64("k1", 1), I64("km1", -1), F32("ones", np.ones((5, 5))), F32("fzero", 0.0), F32("ninf", -np.inf)], [5, 5],
       opset=14)
save_model("trilu_mask", m, [5, 5])

# 18. Expand: a constant to x's shape (batch included, through Shape), x along a new axis, and the
# Equal(shape, -1) / Where pattern TorchScript writes for x.expand(-1, 3, -1)
m = mk([N("Shape", ["x"], ["s"]),
        N("Expand", ["row", "s"], ["rowx"]),
        N("Add", ["x", "rowx"], ["a"]),
        N("Unsqueeze", ["a", "ax1"], ["a1"]),
        N("Concat", ["s0", "three", "s1"], ["tgt"], axis=0),
        N("Equal", ["tgt", "m1"], ["isneg"]),
        N("ConstantOfShape", ["three"], ["ones"], value=helper.make_tensor("v", TensorProto.INT64, [1], [1])),
        N("Where", ["isneg", "ones", "tgt"], ["tgt2"]),
        N("Expand", ["a1", "tgt2"], ["e"]),
        N("Mul", ["e", "scale"], ["y"])],
       [W("row", 1, 4), I64("ax1", [1]), I64("s0", [-1]), I64("three", [3]), I64("s1", [-1]), I64("m1", -1),
        W("scale", 3, 1)], [4])
save_model("expand", m, [4])

# 18b. Slice of computed values over several axes: the batch taken whole, a stride, a negative step
m = mk([N("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
        N("Slice", ["s", "st2", "en2"], ["y"])],
       [I64("st", [0, 1, -1]), I64("en", [2 ** 63 - 1, 5, -2 ** 63]), I64("ax", [0, 1, 2]), I64("sp", [1, 2, -2]),
        I64("st2", [0, 0, 1]), I64("en2", [2 ** 63 - 1, 2, 3])], [6, 8])
save_model("slice_nd", m, [6, 8])

# 19. HardSigmoid (alpha, beta) and HardSwish
m = mk([N("HardSigmoid", ["x"], ["hs"], alpha=0.3, beta=0.4),
        N("HardSwish", ["x"], ["hw"]),
        N("HardSigmoid", ["x"], ["hd"]),
        N("Add", ["hs", "hw"], ["a"]),
        N("Add", ["a", "hd"], ["y"])], [], [3, 8], opset=14)
save_model("hard_ops", m, [3, 8])

# 20. A MobileNetV3-style block: 1x1 expand + BN + HardSwish, depthwise 3x3 (group = channels) + HardSwish,
# squeeze-excite (GlobalAveragePool, 1x1 convs, Relu, HardSigmoid, Mul), 1x1 project, residual
C, E = 8, 24
m = mk([N("Conv", ["x", "we"], ["e"], kernel_shape=[1, 1]),
        N("BatchNormalization", ["e", "g1", "b1", "m1", "v1"], ["eb"]),
        N("HardSwish", ["eb"], ["eh"]),
        N("Conv", ["eh", "wd", "bd"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=E),
        N("HardSwish", ["d"], ["dh"]),
        N("GlobalAveragePool", ["dh"], ["sq"]),
        N("Conv", ["sq", "ws1", "bs1"], ["s1"], kernel_shape=[1, 1]),
        N("Relu", ["s1"], ["s1r"]),
        N("Conv", ["s1r", "ws2", "bs2"], ["s2"], kernel_shape=[1, 1]),
        N("HardSigmoid", ["s2"], ["gate"], alpha=1.0 / 6, beta=0.5),
        N("Mul", ["dh", "gate"], ["se"]),
        N("Conv", ["se", "wp"], ["pj"], kernel_shape=[1, 1]),
        N("Add", ["pj", "x"], ["res"]),
        N("Conv", ["res", "wdw2"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], group=C)],
       [W("we", E, C, 1, 1), W("g1", E), W("b1", E), W("m1", E),
        numpy_helper.from_array(rng.uniform(0.5, 2, E).astype(np.float32), "v1"),
        W("wd", E, 1, 3, 3), W("bd", E), W("ws1", 6, E, 1, 1), W("bs1", 6), W("ws2", E, 6, 1, 1), W("bs2", E),
        W("wp", C, E, 1, 1), W("wdw2", 2 * C, 1, 3, 3)], [C, 9, 9], opset=14)
save_model("mobilenet_block", m, [C, 9, 9], tol=1e-4)

# 21. SiLU both ways torch writes it: Sigmoid then Mul(x, sigmoid(x)), in an MLP and after a conv
m = mk([N("Conv", ["x", "k", "kb"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Sigmoid", ["c"], ["cs"]),
        N("Mul", ["c", "cs"], ["silu1"]),
        N("Flatten", ["silu1"], ["f"]),
        N("MatMul", ["f", "w1"], ["h"]),
        N("Sigmoid", ["h"], ["hs"]),
        N("Mul", ["hs", "h"], ["silu2"]),
        N("MatMul", ["silu2", "w2"], ["y"])],
       [W("k", 4, 2, 3, 3), W("kb", 4), W("w1", 4 * 5 * 5, 16, scale=0.1), W("w2", 16, 5)], [2, 5, 5])
save_model("silu_block", m, [2, 5, 5], tol=1e-4)

# 22. Causal self-attention as TorchScript writes nanoGPT's: fused qkv, Split, view through Shape/Gather,
# Transpose, q @ k^T * scale, the registered tril buffer sliced to [:, :, :T, :T], masked_fill as
# Equal + Where(-inf), Softmax, @ v, back to (N, T, C), projection
T, Cm, H = 5, 8, 2
hs = Cm // H
tril = np.tril(np.ones((16, 16), np.float32)).reshape(1, 1, 16, 16)


def view_shape(prefix, src, dims):
    """Shape(src) -> Gather(0) -> Unsqueeze -> Concat with constant dims: x.view(B, *dims)."""
    return [N("Shape", [src], [prefix + "_s"]),
            N("Gather", [prefix + "_s", "i0"], [prefix + "_b"], axis=0),
            N("Unsqueeze", [prefix + "_b", "ax0"], [prefix + "_b1"]),
            N("Concat", [prefix + "_b1", prefix + "_dims"], [prefix + "_shape"], axis=0)], [I64(prefix + "_dims", dims)]


vq, iq = view_shape("vq", "x", [T, H, hs])
vk, ik = view_shape("vk", "x", [T, H, hs])
vv, iv = view_shape("vv", "x", [T, H, hs])
vo, io = view_shape("vo", "x", [T, Cm])
nodes = [N("MatMul", ["x", "wqkv"], ["qkv0"]), N("Add", ["qkv0", "bqkv"], ["qkv"]),
         N("Split", ["qkv", "split3"], ["q0", "k0", "v0"], axis=2)] + vq + vk + vv + [
         N("Reshape", ["q0", "vq_shape"], ["q1"]), N("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
         N("Reshape", ["k0", "vk_shape"], ["k1"]), N("Transpose", ["k1"], ["k"], perm=[0, 2, 3, 1]),
         N("Reshape", ["v0", "vv_shape"], ["v1"]), N("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
         N("MatMul", ["q", "k"], ["att0"]), N("Mul", ["att0", "scale"], ["att1"]),
         N("Shape", ["x"], ["xs"]), N("Gather", ["xs", "i1"], ["tlen"], axis=0),
         N("Unsqueeze", ["tlen", "ax0"], ["t1"]),
         N("Concat", ["t1", "t1"], ["t1t1"], axis=0),
         N("Slice", ["bias", "zz", "t1t1", "ax23"], ["mask"]),
         N("Equal", ["mask", "fzero"], ["isz"]),
         N("Where", ["isz", "ninf", "att1"], ["att2"]),
         N("Softmax", ["att2"], ["p"], axis=-1),
         N("MatMul", ["p", "v"], ["o0"]), N("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3])] + vo + [
         N("Reshape", ["o1", "vo_shape"], ["o2"]), N("MatMul", ["o2", "wproj"], ["y"])]
m = mk(nodes, [W("wqkv", Cm, 3 * Cm), W("bqkv", 3 * Cm), I64("split3", [Cm, Cm, Cm]), I64("i0", 0), I64("i1", 1),
               I64("ax0", [0]), F32("scale", 1.0 / np.sqrt(hs)), F32("bias", tril), I64("zz", [0, 0]),
               I64("ax23", [2, 3]), F32("fzero", 0.0), F32("ninf", -np.inf), W("wproj", Cm, Cm)] + iq + ik + iv + io,
       [T, Cm])
save_model("causal_attention", m, [T, Cm], tol=1e-4)

# 23. Weights in an external file, as the dynamo exporter writes them (NAME.onnx.data beside NAME.onnx)
ext_model = mk([N("Gemm", ["x", "w1", "b1"], ["h"], transB=1), N("Relu", ["h"], ["r"]),
                N("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
               [W("w1", 12, 6), W("b1", 12), W("w2", 3, 12), W("b2", 3)], [6])
save_model("external_data", ext_model, [6], to_model=1, external=True)

# ---- files written by torch.onnx.export ----
try:
    import torch
    import torch.nn as nn
    HAVE_TORCH = True
except Exception as e:  # the CI machine may not have torch
    print(f"make_models: torch not available ({e}); skipping the exported models", file=sys.stderr)
    HAVE_TORCH = False

if HAVE_TORCH:
    # dynamo=False is asked for on purpose: those files are what the importer must read.
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    torch.manual_seed(0)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(1, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 16, 3, padding=1)
            self.fc = nn.Linear(16 * 7 * 7, 10)

        def forward(self, x):
            x = torch.max_pool2d(torch.relu(self.c1(x)), 2)
            x = torch.max_pool2d(torch.relu(self.c2(x)), 2)
            return self.fc(x.view(x.size(0), -1))  # Shape/Gather/Unsqueeze/Concat/Reshape in TorchScript

    mlp = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 32), nn.GELU(),
                        nn.LayerNorm(32), nn.Linear(32, 10)).eval()
    cnn = CNN().eval()
    cnn_bn = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.AvgPool2d(2),
                           nn.Conv2d(6, 8, 3), nn.Tanh(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                           nn.Linear(8, 4)).eval()
    with torch.no_grad():  # make the BatchNorm statistics non-trivial
        cnn_bn[1].running_mean.uniform_(-1, 1)
        cnn_bn[1].running_var.uniform_(0.5, 2)
    cases = [("mlp", mlp, (1, 8, 8), 1), ("cnn", cnn, (1, 28, 28), 1), ("cnnbn", cnn_bn, (3, 10, 10), 0)]
    for opset in (13, 17):
        for name, mod, shape, to_model in cases:
            path = os.path.join(OUT, f"torch_{name}_op{opset}.onnx")
            torch.onnx.export(mod, torch.randn(2, *shape), path, dynamo=False, opset_version=opset,
                              input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
            save_model(f"torch_{name}_op{opset}", onnx.load(path), list(shape), to_model=to_model)
    # Transformer and modern CNN blocks: a nanoGPT block (causal attention with the tril buffer and
    # masked_fill, GELU MLP, LayerNorm), a MobileNetV3 block (depthwise conv, Hardswish, squeeze-excite
    # with Hardsigmoid), a SiLU MLP, and a block that chunks qkv and builds its mask with arange.
    class CausalSelfAttention(nn.Module):
        def __init__(self, C=16, nh=4, block=32):
            super().__init__()
            self.c_attn, self.c_proj, self.nh = nn.Linear(C, 3 * C), nn.Linear(C, C), nh
            self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, T, self.nh, C // self.nh).transpose(1, 2)
            k = k.view(B, T, self.nh, C // self.nh).transpose(1, 2)
            v = v.view(B, T, self.nh, C // self.nh).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = torch.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class GPTBlock(nn.Module):
        def __init__(self, C=16):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(C), CausalSelfAttention(C), nn.LayerNorm(C)
            self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class ArangeMaskAttention(nn.Module):
        """chunk() for qkv, the causal mask from arange comparisons, integer mod for alternate heads."""
        def __init__(self, C=12):
            super().__init__()
            self.qkv, self.C = nn.Linear(C, 3 * C), C

        def forward(self, x):
            T = x.shape[1]
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            i = torch.arange(T)
            mask = (i[:, None] >= i[None, :]) & ((i[None, :] % 2 == 0) | (i[:, None] == i[None, :]))
            att = (q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf"))
            return torch.softmax(att / self.C ** 0.5, dim=-1) @ v

    class MBV3Block(nn.Module):
        def __init__(self, C=8, E=24):
            super().__init__()
            self.expand = nn.Sequential(nn.Conv2d(C, E, 1, bias=False), nn.BatchNorm2d(E), nn.Hardswish())
            self.dw = nn.Sequential(nn.Conv2d(E, E, 3, padding=1, groups=E, bias=False), nn.BatchNorm2d(E),
                                    nn.Hardswish())
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(E, 8, 1), nn.ReLU(), nn.Conv2d(8, E, 1),
                                    nn.Hardsigmoid())
            self.project = nn.Sequential(nn.Conv2d(E, C, 1, bias=False), nn.BatchNorm2d(C))
            self.head = nn.Sequential(nn.Conv2d(C, 2 * C, 3, stride=2, padding=1, groups=C), nn.SiLU())

        def forward(self, x):
            h = self.dw(self.expand(x))
            return self.head(x + self.project(h * self.se(h)))

    class Tokens(nn.Module):
        """ViT-style: a class token expanded to the batch, Concat, positions from arange, Cast chains."""
        def __init__(self, C=6):
            super().__init__()
            self.cls, self.pos = nn.Parameter(torch.randn(1, 1, C)), nn.Parameter(torch.randn(1, 6, C) * 0.1)
            self.fc = nn.Linear(C, 3)

        def forward(self, x):
            h = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            h = h * (h > 0).float() + h.long().float() * 0.1 + torch.arange(h.shape[1]).float()[None, :, None] * 0.01
            return self.fc(h)

    class TrilScores(nn.Module):
        """tril/triu of computed scores (Trilu, opset 14 on)."""
        def forward(self, x):
            s = x @ x.transpose(-1, -2)
            return torch.tril(s, -1) + torch.triu(s, 2) * 0.5

    silu_mlp = nn.Sequential(nn.Linear(10, 32), nn.SiLU(), nn.Linear(32, 32), nn.SiLU(), nn.Linear(32, 4)).eval()
    mbv3 = MBV3Block().eval()
    with torch.no_grad():
        for mmod in mbv3.modules():
            if isinstance(mmod, nn.BatchNorm2d):
                mmod.running_mean.uniform_(-0.5, 0.5)
                mmod.running_var.uniform_(0.5, 2)
    blocks = [("gpt", GPTBlock().eval(), (7, 16)), ("arange_attn", ArangeMaskAttention().eval(), (6, 12)),
              ("mbv3", mbv3, (8, 10, 10)), ("silu", silu_mlp, (10,)), ("tokens", Tokens().eval(), (5, 6)),
              ("tril", TrilScores().eval(), (5, 4))]
    for opset in (11, 13, 17):
        for name, mod, shape in blocks:
            if name == "tril" and opset < 14:
                continue  # aten::tril exports from opset 14 (Trilu) on
            path = os.path.join(OUT, f"torch_{name}_op{opset}.onnx")
            torch.onnx.export(mod, torch.randn(2, *shape), path, dynamo=False, opset_version=opset,
                              input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
            save_model(f"torch_{name}_op{opset}", onnx.load(path), list(shape), tol=1e-4)
    try:
        import onnxscript  # noqa: F401  (the dynamo exporter needs it)
    except Exception as e:
        print(f"make_models: onnxscript not available ({e}); skipping the dynamo exporter's files", file=sys.stderr)
        cases, blocks = [], []
    try:
        # the dynamo exporter's files, the blocks with their weights in NAME.onnx.data as it writes them
        for name, mod, shape in blocks:
            path = os.path.join(OUT, f"torch_{name}_dynamo18.onnx")
            batch = torch.export.Dim("batch", min=1, max=1024)
            prog = torch.onnx.export(mod, (torch.randn(2, *shape),), dynamo=True, opset_version=18,
                                     input_names=["x"], output_names=["y"], dynamic_shapes=({0: batch},))
            prog.save(path, external_data=True)
            assert os.path.exists(path + ".data"), "the exporter wrote no external data file"
            save_model_file(f"torch_{name}_dynamo18", path, list(shape), tol=1e-4)
        for name, mod, shape, to_model in cases:
            path = os.path.join(OUT, f"torch_{name}_dynamo18.onnx")
            batch = torch.export.Dim("batch", min=1, max=1024)
            prog = torch.onnx.export(mod, (torch.randn(2, *shape),), dynamo=True, opset_version=18,
                                     input_names=["x"], output_names=["y"], dynamic_shapes=({0: batch},))
            prog.save(path)
            save_model(f"torch_{name}_dynamo18", onnx.load(path), list(shape), to_model=0)
    except Exception as e:
        print(f"make_models: dynamo exporter unavailable ({type(e).__name__}: {str(e)[:120]}); skipped",
              file=sys.stderr)

# ---- files the importer must refuse with a clear message ----
good = open(os.path.join(OUT, "mlp_gemm.onnx"), "rb").read()


def bad(name, data, substring):
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.SerializeToString())
    manifest.append(f"bad {name} {substring}")


def tensor(name, dims, floats):
    """A TensorProto built by hand: make_tensor refuses dims that disagree with the data."""
    t = TensorProto(name=name, data_type=TensorProto.FLOAT)
    t.dims.extend(dims)
    t.float_data.extend(floats)
    return t


bad("bad_truncated", good[: len(good) // 2], "not a valid ONNX ModelProto")
bad("bad_random", rng.integers(0, 256, 3000, dtype=np.uint8).tobytes(), "not a valid ONNX ModelProto")
# field 7 (graph) written as a varint instead of a message
bad("bad_wiretype", bytes([0x08, 0x08, 0x38, 0x05]), "not a valid ONNX ModelProto")
bad("bad_attr_type", mk([N("Gemm", ["x", "w", "b"], ["y"], transB=1.0)], [W("w", 3, 4), W("b", 3)], [4]),
    "attribute 'transB' should be an int")
bad("bad_missing_init", mk([N("MatMul", ["x", "w_missing"], ["y"])], [], [4]), "input 'w_missing' is not defined")
bad("bad_cycle", mk([N("Add", ["x", "b"], ["a"], name="first"), N("Relu", ["a"], ["b"], name="second"),
                     N("Identity", ["a"], ["y"])], [], [4]), "cyclic graph")
bad("bad_gemm_k", mk([N("Gemm", ["x", "w"], ["y"])], [W("w", 5, 3)], [6]), "inner dimensions differ")
bad("bad_conv_shape", mk([N("Conv", ["x", "k"], ["y"])], [W("k", 4, 3, 3, 3)], [2, 8, 8]), "does not fit input")
t = tensor("w", [1 << 40], [1.0])
bad("bad_huge_dims", mk([N("Add", ["x", "w"], ["y"])], [t], [4]), "more than 2^31")
t = tensor("w", [1 << 20, 1 << 20], [1.0])
bad("bad_huge_product", mk([N("Add", ["x", "w"], ["y"])], [t], [4]), "more than 2^31")
t = tensor("w", [3, 4], [1.0] * 11)
bad("bad_float_count", mk([N("Add", ["x", "w"], ["y"])], [t], [4]), "does not match its data")
t = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
t.raw_data = t.raw_data[:-2]
bad("bad_raw_len", mk([N("Add", ["x", "w"], ["y"])], [t], [4]), "does not match its data")
t = tensor("w", [-3], [])
bad("bad_negative_dim", mk([N("Add", ["x", "w"], ["y"])], [t], [4]), "negative dimension")
bad("bad_unsupported_op", mk([N("Frobnicate", ["x"], ["y"], name="frob")], [], [4]), "unsupported operator 'Frobnicate'")
bad("bad_reshape", mk([N("Reshape", ["x", "s"], ["y"])], [I64("s", [-1, 5])], [4]), "cannot")
# several float inputs import packed (test_two_tower.py); a fixed batch on one of them does not
bad("bad_two_inputs", helper.make_model(helper.make_graph(
    [N("Add", ["a", "b"], ["y"])], "g",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 13)]),
    "input 'b' fixes the batch at 2; several inputs are supported with a symbolic batch")
bad("bad_defined_twice", mk([N("Relu", ["x"], ["y"]), N("Tanh", ["x"], ["y"])], [], [4]), "defined twice")
bad("bad_no_graph", onnx.ModelProto(ir_version=8), "no graph")



def ext_bad(name, location, substring, offset=0, length=None, data_bytes=None):
    """A model whose initializer 'w1' (12x6 floats) lives in an external file that is wrong somehow."""
    w1 = W("w1", 12, 6)
    raw = w1.raw_data
    w1.ClearField("raw_data")
    w1.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(len(raw) if length is None else length))):
        e = w1.external_data.add()
        e.key, e.value = k, v
    if data_bytes is not None:
        with open(os.path.join(OUT, name + ".bin"), "wb") as f:
            f.write(data_bytes(raw))
    bad(name, mk([N("Gemm", ["x", "w1"], ["y"], transB=1, name="fc")], [w1], [6]), substring)


ext_bad("bad_ext_truncated", "bad_ext_truncated.bin",
        "initializer 'w1': external data (offset 0, length 288) runs past the end", data_bytes=lambda r: r[:100])
ext_bad("bad_ext_offset", "bad_ext_offset.bin",
        "initializer 'w1': external data (offset 64, length 288) runs past the end", offset=64, data_bytes=lambda r: r)
ext_bad("bad_ext_traversal", "../bad_ext_traversal.bin",
        "initializer 'w1': external data location '../bad_ext_traversal.bin' leaves the model's folder")
ext_bad("bad_ext_traversal_inner", "sub/../../x.bin", "initializer 'w1': external data location 'sub/../../x.bin' leaves")
ext_bad("bad_ext_absolute", "/etc/hostname", "initializer 'w1': external data location '/etc/hostname' leaves")
ext_bad("bad_ext_missing", "no_such_file.onnx.data", "initializer 'w1': external data file")
# a link inside the model's folder (OUT/linked/) that leads out of it, to a file that exists (OUT/outside.bin)
os.makedirs(os.path.join(OUT, "linked"), exist_ok=True)
with open(os.path.join(OUT, "outside.bin"), "wb") as f:
    f.write(bytes(288))
try:
    os.symlink("../outside.bin", os.path.join(OUT, "linked", "bad_ext_link.bin"))
    ext_bad("linked/bad_ext_link", "bad_ext_link.bin",
            "initializer 'w1': external data location 'bad_ext_link.bin' leads out of the model's folder")
except OSError as e:
    print(f"make_models: cannot make a symbolic link here ({e}); the link case is skipped", file=sys.stderr)
ext_bad("bad_ext_length", "bad_ext_length.bin", "initializer 'w1': external data length 200 does not match",
        length=200, data_bytes=lambda r: r)
bad("bad_split_sizes", mk([N("Split", ["x", "sp"], ["a", "b"], axis=1, name="split_qkv"), N("Add", ["a", "b"], ["y"])],
                          [I64("sp", [2, 2])], [6]),
    "node 'split_qkv' (Split, opset 13): split sizes (2 of them, total 4) do not cover dimension 1 of size 6")
bad("bad_split_batch", mk([N("Split", ["x"], ["a", "b"], axis=0, name="split_b"), N("Add", ["a", "b"], ["y"])], [], [6]),
    "node 'split_b' (Split, opset 13): splitting the batch dimension")
bad("bad_mod_float", mk([N("Mod", ["x", "m"], ["y"], name="modf")], [W("m", 6)], [6]),
    "node 'modf' (Mod, opset 13): fmod=0 is for integer inputs")
bad("bad_slice_batch", mk([N("Slice", ["x", "s0", "s1", "a0"], ["y"], name="rows")],
                          [I64("s0", [1]), I64("s1", [3]), I64("a0", [0])], [6]),
    "node 'rows' (Slice, opset 13): slicing the batch dimension")
bad("bad_trilu_upper", mk([N("Trilu", ["x"], ["y"], upper=2, name="tri")], [], [4, 4], opset=14),
    "node 'tri' (Trilu, opset 14): upper must be 0 or 1")
bad("bad_range_dynamic", mk([N("ReduceSum", ["x"], ["s"], axes=[1], keepdims=0, name="sum"),
                             N("Range", ["z", "s", "one"], ["y"], name="rng")],
                            [F32("z", 0.0), F32("one", 1.0)], [4]),
    "node 'rng' (Range, opset 13): input 1 must be a scalar constant")
bad("bad_unsupported_opset", mk([N("NonZero", ["x"], ["y"], name="nz")], [], [4], opset=11),
    "unsupported operator 'NonZero' (node 'nz', opset 11)")

with open(os.path.join(OUT, "manifest.txt"), "w") as f:
    f.write("\n".join(manifest) + "\n")
print(f"make_models: {len(manifest)} files in {OUT}")
