#!/usr/bin/env python3
"""Runs export-models and build-lesson into a temporary folder, then checks every .onnx file with
onnx.checker (full_check=True) and runs it in ONNX Runtime (CPU) on the inputs ringside used,
asserting max |diff| <= 1e-5 against ringside's own outputs (float32).
Usage: check_export.py EXPORT_MODELS BUILD_LESSON. Exits 77 when onnx or onnxruntime is missing."""
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


def session(path):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main():
    export_models, build_lesson = sys.argv[1], sys.argv[2]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="rs-onnx-") as d:
        subprocess.run([export_models, d], check=True)
        seen = set()
        for line in open(os.path.join(d, "manifest.txt")):
            left, right = line.split("|")
            f = left.split()
            name, opset, B = f[0], int(f[1]), int(f[2])
            in_dims = [int(v) for v in f[3:]]
            out_dims = [int(v) for v in right.split()]
            path = os.path.join(d, name + ".onnx")
            model = onnx.load(path)
            if name not in seen:
                seen.add(name)
                onnx.checker.check_model(model, full_check=True)
                assert model.opset_import[0].version == opset, (name, model.opset_import)
                assert model.producer_name == "ringside", model.producer_name
                inp = model.graph.input[0].type.tensor_type.shape.dim
                assert inp[0].dim_param == "batch", (name, inp)
            x = np.fromfile(os.path.join(d, f"{name}.b{B}.in"), dtype="<f4").reshape([B] + in_dims)
            want = np.fromfile(os.path.join(d, f"{name}.b{B}.out"), dtype="<f4").reshape([B] + out_dims)
            sess = session(path)
            (got,) = sess.run(None, {"input": x})
            diff = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
            ok = got.shape == want.shape and diff <= TOL
            print(f"{'ok  ' if ok else 'FAIL'} {name:20s} opset {opset:2d} batch {B}: shape {got.shape} "
                  f"max|diff| {diff:.3g}")
            if not ok:
                failures += 1
                print("   first values ringside:", want.reshape(-1)[:5], "ort:", got.reshape(-1)[:5])

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
