#!/usr/bin/env python3
"""`onnx check` agrees with onnx.checker: on every file, both pass or both fail.

The files: every .onnx under tests/ (none are committed today), what export-models and build-lesson
write (ringside's own exports), what tests/onnx/import/make_models.py writes for the importer test
(its helper graphs leave the output's shape out, which both checkers refuse; each is also checked as a
copy with the shapes onnx.shape_inference fills in, so the graph itself is compared too), and the
cases below: a MobileNetV3-like block using HardSwish, HardSigmoid, Cast, Range, Slice, Expand,
ConstantOfShape and Neg, products whose inner dimensions differ, and the other ways a file is wrong.
onnx.checker runs as check_model(full_check=True), which adds strict shape inference; ringside's
verdict is the exit status of `ringside -c "onnx check FILE"`. Prints one row per file.
Usage: check_agree.py RINGSIDE [EXPORT_MODELS BUILD_LESSON [MAKE_MODELS_PY]]. Exits 77 when onnx is
missing."""
import glob
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except Exception as e:  # ImportError, or a broken install raising something else
    print(f"SKIP: onnx/numpy not importable: {e}")
    sys.exit(77)

N = helper.make_node
# Files where `onnx check` finds what onnx.checker (1.23) does not, with the words its finding must have:
# a Conv weight whose input channels differ from the input's. Shape inference leaves Conv's channels
# alone; import and ONNX Runtime refuse the file.
STRICTER = {
    "conv_channels_mismatch": "does not fit input",
    "bad_conv_shape.shaped": "does not fit input",
}
HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)


def f32(name, *shape, seed=0):
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), name)


def i64(name, vals):
    return numpy_helper.from_array(np.array(vals, dtype=np.int64), name)


def model(nodes, inits, x_shape, y_shape, opset=17, x_type=TensorProto.FLOAT):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", x_type, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="check_agree.py")
    m.ir_version = 8
    return m


def mobilenet_v3_like():
    """A MobileNetV3 block as torch writes one (depthwise conv, HardSwish, squeeze-excite with
    HardSigmoid), and the constant chains around it: Range -> Cast -> Neg as a per-channel bias,
    ConstantOfShape -> Expand, a Slice of the channels."""
    nodes = [
        N("Conv", ["x", "dw"], ["c1"], group=8, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("HardSwish", ["c1"], ["h1"]),
        N("GlobalAveragePool", ["h1"], ["se0"]),
        N("Conv", ["se0", "se_w1", "se_b1"], ["se1"]),
        N("Relu", ["se1"], ["se2"]),
        N("Conv", ["se2", "se_w2", "se_b2"], ["se3"]),
        N("HardSigmoid", ["se3"], ["se4"], alpha=1.0 / 6, beta=0.5),
        N("Mul", ["h1", "se4"], ["h2"]),
        N("Range", ["r0", "r8", "r1"], ["ids"]),
        N("Cast", ["ids"], ["idf"], to=TensorProto.FLOAT),
        N("Neg", ["idf"], ["nidf"]),
        N("Reshape", ["nidf", "bias_shape"], ["bias"]),
        N("ConstantOfShape", ["bias_shape"], ["half"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
        N("Expand", ["half", "bias_shape"], ["half8"]),
        N("Mul", ["bias", "half8"], ["bias2"]),
        N("Add", ["h2", "bias2"], ["h3"]),
        N("Slice", ["h3", "s_start", "s_end", "s_axes"], ["h4"]),
        N("GlobalAveragePool", ["h4"], ["p"]),
        N("Flatten", ["p"], ["fl"], axis=1),
        N("Gemm", ["fl", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    inits = [f32("dw", 8, 1, 3, 3), f32("se_w1", 4, 8, 1, 1, seed=1), f32("se_b1", 4, seed=2),
             f32("se_w2", 8, 4, 1, 1, seed=3), f32("se_b2", 8, seed=4), i64("r0", 0), i64("r8", 8), i64("r1", 1),
             i64("bias_shape", [1, 8, 1, 1]), i64("s_start", [0]), i64("s_end", [4]), i64("s_axes", [1]),
             f32("fc_w", 10, 4, seed=5), f32("fc_b", 10, seed=6)]
    return model(nodes, inits, ["N", 8, 8, 8], ["N", 10], opset=17)


def external(d, name, location, nbytes):
    """A Gemm whose weight is in another file: location as given, the file holding nbytes of the 48."""
    w = f32("w", 3, 4)
    m = model([N("Gemm", ["x", "w"], ["y"], transB=1)], [w], ["N", 4], ["N", 3])
    t = m.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "48")):
        e = t.external_data.add()
        e.key, e.value = k, v
    if nbytes and not os.path.isabs(location):
        with open(os.path.join(d, location), "wb") as f:
            f.write(numpy_helper.to_array(w).tobytes()[:nbytes])
    onnx.save(m, os.path.join(d, name))


def own_cases(d):
    """The cases this test writes, with the verdict each should get (both checkers agree on it)."""
    cases = {
        "mobilenet_v3_like": mobilenet_v3_like(),
        "mlp_ok": model([N("Gemm", ["x", "w1", "b1"], ["h"], transB=1), N("Relu", ["h"], ["r"]),
                         N("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
                        [f32("w1", 6, 4), f32("b1", 6), f32("w2", 3, 6), f32("b2", 3)], ["N", 4], ["N", 3]),
        "gemm_k_mismatch": model([N("Gemm", ["x", "w"], ["y"])], [f32("w", 5, 3)], ["N", 4], ["N", 3]),
        "gemm_k_mismatch_transB": model([N("Gemm", ["x", "w"], ["y"], transB=1)], [f32("w", 3, 5)], ["N", 4],
                                        ["N", 3]),
        "gemm_after_flatten_mismatch": model([N("Flatten", ["x"], ["f"]), N("Gemm", ["f", "w"], ["y"], transB=1)],
                                             [f32("w", 3, 10)], ["N", 2, 4], ["N", 3]),
        "matmul_k_mismatch": model([N("MatMul", ["x", "w"], ["y"])], [f32("w", 5, 6)], ["N", 7, 4], ["N", 7, 6]),
        "matmul_ok": model([N("MatMul", ["x", "w"], ["m"]), N("Add", ["m", "b"], ["y"])], [f32("w", 4, 6), f32("b", 6)],
                           ["N", 7, 4], ["N", 7, 6]),
        "conv_channels_mismatch": model([N("Conv", ["x", "k"], ["y"])], [f32("k", 4, 2, 3, 3)], ["N", 3, 8, 8],
                                        ["N", 4, 6, 6]),
        "conv_depthwise_ok": model([N("Conv", ["x", "k"], ["y"], group=3, pads=[1, 1, 1, 1])], [f32("k", 3, 1, 3, 3)],
                                   ["N", 3, 8, 8], ["N", 3, 8, 8]),
        "unknown_operator": model([N("Frobnicate", ["x"], ["y"])], [], ["N", 4], ["N", 4]),
        "attribute_wrong_type": model([N("Gemm", ["x", "w"], ["y"], transB=1.0)], [f32("w", 3, 4)], ["N", 4],
                                      ["N", 3]),
        "required_attribute_missing": model([N("Concat", ["x", "x"], ["y"])], [], ["N", 4], ["N", 8]),
        "operator_before_its_opset": model([N("HardSwish", ["x"], ["y"])], [], ["N", 4], ["N", 4], opset=13),
        "attribute_became_input": model([N("Unsqueeze", ["x"], ["y"], axes=[1])], [], ["N", 4], ["N", 1, 4]),
        "undefined_input": model([N("Add", ["x", "nowhere"], ["y"])], [], ["N", 4], ["N", 4]),
        "output_without_shape": model([N("Relu", ["x"], ["y"])], [], ["N", 4], None),
    }
    for name, m in cases.items():
        onnx.save(m, os.path.join(d, name + ".onnx"))
    external(d, "external_ok.onnx", "external_ok.bin", 48)
    external(d, "external_truncated.onnx", "external_truncated.bin", 20)
    external(d, "external_absolute.onnx", "/etc/hostname", 0)
    external(d, "external_missing.onnx", "no_such_file.bin", 0)


def with_shapes(path):
    """A copy of a graph whose outputs have no shape, with the shapes shape inference finds; None when
    the file does not load or nothing is missing."""
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception:
        return None
    missing = [o for o in m.graph.output if not o.type.tensor_type.HasField("shape")]
    if not missing:
        return None
    try:
        inferred = onnx.shape_inference.infer_shapes(m)
    except Exception:
        return None
    known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for o in missing:
        v = known.get(o.name)
        if v is None or not v.type.tensor_type.HasField("shape"):
            o.type.tensor_type.shape.SetInParent()  # an empty shape: still one the checkers accept
        else:
            o.type.CopyFrom(v.type)
    out = path[:-len(".onnx")] + ".shaped.onnx"
    onnx.save(m, out)
    return out


def checker_verdict(path):
    """What a Python user meets: onnx.load (which reads external data, and refuses a file shorter than a
    tensor's length) and then the checker with full_check."""
    try:
        onnx.load(path)
        onnx.checker.check_model(path, full_check=True)
        return "pass", ""
    except Exception as e:
        return "fail", (str(e).strip().splitlines() or [type(e).__name__])[0]


def ringside_verdict(ringside, path):
    r = subprocess.run([ringside, "--no-db", "-c", f"onnx check {path}"], capture_output=True, text=True, timeout=60)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    return ("pass" if r.returncode == 0 else "fail"), (lines[0] if lines else "")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    ringside = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="rs-onnx-agree-") as d:
        groups = {"tests": sorted(glob.glob(os.path.join(TESTS, "**", "*.onnx"), recursive=True))}
        own = os.path.join(d, "own")
        os.makedirs(own)
        own_cases(own)
        groups["own"] = sorted(glob.glob(os.path.join(own, "*.onnx")))
        if len(sys.argv) > 3:
            ex = os.path.join(d, "export")
            os.makedirs(ex)
            for cmd in ([sys.argv[2], ex], [sys.argv[3], os.path.join(ex, "lesson.onnx")]):
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode:
                    print(r.stdout, r.stderr, f"{cmd[0]} failed")
                    return 1
            groups["export"] = sorted(glob.glob(os.path.join(ex, "*.onnx")))
        try:
            import onnxruntime  # noqa: F401  (make_models.py runs every model it writes)
            have_ort = True
        except Exception as e:
            print(f"make_models.py's files skipped: onnxruntime not importable: {e}")
            have_ort = False
        if len(sys.argv) > 4 and have_ort:
            mm = os.path.join(d, "import")
            r = subprocess.run([sys.executable, sys.argv[4], mm], capture_output=True, text=True)
            if r.returncode:
                print(r.stdout, r.stderr)
                print("make_models.py failed")
                return 1
            files = sorted(glob.glob(os.path.join(mm, "**", "*.onnx"), recursive=True))
            shaped = [s for s in (with_shapes(f) for f in files) if s]
            groups["import"] = sorted(files + shaped)
        rows, bad = [], 0
        for group, files in groups.items():
            for f in files:
                ck, ck_why = checker_verdict(f)
                rv, rv_why = ringside_verdict(ringside, f)
                name = os.path.relpath(f, d) if f.startswith(d) else os.path.relpath(f, TESTS)
                rows.append((name, ck, rv))
                stricter = STRICTER.get(os.path.basename(f)[:-len(".onnx")])
                if stricter:
                    # onnx.checker's shape inference does not look at Conv's channels; the importer and
                    # ONNX Runtime refuse such a file, and `onnx check` says so: expected, and checked
                    if (ck, rv) != ("pass", "fail") or stricter not in rv_why:
                        bad += 1
                        print(f"EXPECTED onnx.checker pass, ringside fail with '{stricter}': {f}\n"
                              f"  onnx.checker: {ck} {ck_why[:200]}\n  ringside:     {rv} {rv_why[:200]}")
                elif ck != rv:
                    bad += 1
                    print(f"DISAGREE {f}\n  onnx.checker: {ck} {ck_why[:200]}\n  ringside:     {rv} {rv_why[:200]}")
        width = max(len(r[0]) for r in rows)
        print(f"{'file':{width}}  onnx.checker  ringside")
        for name, ck, rv in rows:
            base = os.path.basename(name)[:-len(".onnx")]
            note = "" if ck == rv else "   (ringside stricter, expected)" if base in STRICTER else "   <- disagree"
            print(f"{name:{width}}  {ck:12}  {rv}{note}")
        same = sum(r[1] == r[2] for r in rows)
        stricter = sum(r[1] != r[2] and os.path.basename(r[0])[:-len(".onnx")] in STRICTER for r in rows)
        print(f"{same} of {len(rows)} files get the same verdict ({sum(r[1] == 'pass' for r in rows)} pass "
              f"onnx.checker); {stricter} where ringside is stricter, as expected; {bad} wrong")
        if not groups["own"] or not any("mobilenet" in f for f in groups["own"]):
            print("the test's own cases were not written")
            return 1
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
