#!/usr/bin/env python3
"""Runs export-models and build-lesson into a temporary folder, then checks every .onnx file with
onnx.checker (full_check=True) and runs it in ONNX Runtime (CPU) on the inputs ringside used,
asserting max |diff| <= 1e-5 against ringside's own outputs (float32; 1e-4 for token models, whose
attention and layer norms sum more terms). Token models are also checked for their form: int64
"tokens" (batch, T) in, "logits" (batch, T, V) out, the operators their opset calls for, and no
weight written twice (the tied head reads the one token embedding). With RINGSIDE, the cases listed
in repl.txt are built again at the prompt and exported with `export`, and those files are checked the
same way against the same outputs.
Usage: check_export.py EXPORT_MODELS BUILD_LESSON [RINGSIDE]. Exits 77 when onnx or onnxruntime is
missing."""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
except Exception as e:  # ImportError, or a broken install raising something else
    print(f"SKIP: onnx/onnxruntime/numpy not importable: {e}")
    sys.exit(77)

TOL = 1e-5
TOL_TOKENS = 1e-4


def session(path):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def check_token_model(name, model, opset, T, out_dims):
    """The form the transformer export promises; raises AssertionError naming what is wrong."""
    g = model.graph
    inp, out = g.input[0], g.output[0]
    assert inp.name == "tokens" and inp.type.tensor_type.elem_type == onnx.TensorProto.INT64, (name, inp)
    idims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
    odims = [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim]
    assert idims == ["batch", T], (name, idims)
    assert odims == ["batch"] + out_dims, (name, odims)
    ops = {n.op_type for n in g.node}
    assert "Gather" in ops and "MatMul" in ops, (name, ops)
    if name.startswith("gpt"):
        assert {"Softmax", "Split", "Reshape"} <= ops, (name, ops)
        # the tied head: a Transpose of the one token embedding, no (C, V) copy of it
        assert any(n.op_type == "Transpose" and n.input[0] == "0.wte" for n in g.node), name
        assert ("LayerNormalization" in ops) == (opset >= 17), (name, opset, ops)
        gelus = [n for n in g.node if n.op_type == "Gelu"]
        assert bool(gelus) == (opset >= 20), (name, opset, ops)
        for n in gelus:
            assert onnx.helper.get_attribute_value(n.attribute[0]) == b"tanh", (name, n)
    # Every weight matrix once: no two 2-D float initializers hold the same values (vectors are left
    # out: an untouched model's layer norms are all ones and zeros).
    seen = {}
    for t in g.initializer:
        a = onnx.numpy_helper.to_array(t)
        if a.dtype == np.float32 and a.ndim == 2 and not t.name.startswith("/"):
            key = a.tobytes()
            assert key not in seen, f"{name}: initializers {seen.get(key)} and {t.name} are the same weight"
            seen[key] = t.name


def compare(path, name, opset, B, kind, in_dims, out_dims, d, tag=""):
    """Runs one file in ONNX Runtime on ringside's input; returns True when it matches its output."""
    if kind == "tok":
        x = np.fromfile(os.path.join(d, f"{name}.b{B}.in"), dtype="<i4").reshape([B] + in_dims).astype(np.int64)
        feed, tol = {"tokens": x}, TOL_TOKENS
    else:
        x = np.fromfile(os.path.join(d, f"{name}.b{B}.in"), dtype="<f4").reshape([B] + in_dims)
        feed, tol = {"input": x}, TOL
    # a model ends in "logits", or "probs" with softmax=on
    want = np.fromfile(os.path.join(d, f"{name}.b{B}.out"), dtype="<f4").reshape([B] + out_dims)
    (got,) = session(path).run(None, feed)
    diff = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    ok = got.shape == want.shape and diff <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {name + tag:20s} opset {opset:2d} batch {B}: shape {got.shape} "
          f"max|diff| {diff:.3g}" + (f" (max|logit| {float(np.max(np.abs(want))):.3g})" if kind == "tok" else ""))
    if not ok:
        print("   first values ringside:", want.reshape(-1)[:5], "ort:", got.reshape(-1)[:5])
    return ok


def main():
    export_models, build_lesson = sys.argv[1], sys.argv[2]
    ringside = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
    failures = 0
    with tempfile.TemporaryDirectory(prefix="rs-onnx-") as d:
        subprocess.run([export_models, d], check=True)
        seen = set()
        cases = {}
        for line in open(os.path.join(d, "manifest.txt")):
            left, right = line.split("|")
            f = left.split()
            name, opset, B, kind = f[0], int(f[1]), int(f[2]), f[3]
            in_dims = [int(v) for v in f[4:]]
            out_dims = [int(v) for v in right.split()]
            cases.setdefault(name, []).append((opset, B, kind, in_dims, out_dims))
            path = os.path.join(d, name + ".onnx")
            if name not in seen:
                seen.add(name)
                model = onnx.load(path)
                onnx.checker.check_model(model, full_check=True)
                assert model.opset_import[0].version == opset, (name, model.opset_import)
                assert model.producer_name == "ringside", model.producer_name
                inp = model.graph.input[0].type.tensor_type.shape.dim
                assert inp[0].dim_param == "batch", (name, inp)
                if kind == "tok":
                    check_token_model(name, model, opset, in_dims[0], out_dims)
            failures += 0 if compare(path, name, opset, B, kind, in_dims, out_dims, d) else 1

        # The same models exported at the prompt: `model NAME = SPEC seed=S` then `export NAME FILE`.
        for line in open(os.path.join(d, "repl.txt")) if ringside else []:
            name, opset, seed, spec = line.rstrip("\n").split(" ", 3)
            path = os.path.join(d, name + ".repl.onnx")
            script = f"model {name} = {spec} seed={seed}; export {name} {path} opset={opset}"
            r = subprocess.run([ringside, "--no-db", "-c", script], capture_output=True, text=True, cwd=d,
                               env=dict(os.environ, COLUMNS="1000"))  # whole lines, whatever the paths' length
            print(r.stdout.strip())
            ok = r.returncode == 0 and "onnx check: ok" in r.stdout
            if ok:
                model = onnx.load(path)
                onnx.checker.check_model(model, full_check=True)
                opset_, B, kind, in_dims, out_dims = cases[name][0]
                if kind == "tok":
                    check_token_model(name, model, int(opset), in_dims[0], out_dims)
                for opset_, B, kind, in_dims, out_dims in cases[name]:
                    ok &= compare(path, name, opset_, B, kind, in_dims, out_dims, d, tag=" (repl)")
            else:
                print(f"FAIL repl export of {name}: rc {r.returncode}\n{r.stdout}{r.stderr}")
            failures += 0 if ok else 1

        lesson = os.path.join(d, "lesson.onnx")
        subprocess.run([build_lesson, lesson], check=True, stdout=subprocess.DEVNULL)
        model = onnx.load(lesson)
        onnx.checker.check_model(model, full_check=True)
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
        W, Bv = inits["W"], inits["B"]
        assert W.shape == (3, 4) and Bv.shape == (3,), (W.shape, Bv.shape)
        assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
        X = np.random.default_rng(5).standard_normal((5, 4)).astype(np.float32)
        (Y,) = session(lesson).run(None, {"X": X})
        ref = X.astype(np.float64) @ W.T.astype(np.float64) + Bv
        diff = float(np.max(np.abs(Y - ref)))
        ok = Y.shape == (5, 3) and diff <= TOL
        print(f"{'ok  ' if ok else 'FAIL'} lesson Gemm batch 5: shape {Y.shape} max|diff| {diff:.3g}")
        failures += 0 if ok else 1
    print(f"check_export: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
