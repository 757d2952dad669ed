#!/usr/bin/env python3
"""The ONNX tutorial's files, checked by ONNX Runtime against NumPy.

    check_onnx_tutorial.py RINGSIDE TUTORIAL.ring

Plays the tutorial in auto mode in a temporary folder, then for each file it wrote (m.onnx, the
exported MLP; gemm.onnx, the lecture's Gemm with transA=1; lesson.onnx, a Gemm with weights):
onnx.checker with full_check and strict shape inference (the declared shapes are the ones the
operators give), and ONNX Runtime's output against NumPy computed from the file's own initializers.
Exits 77 (skipped) when onnx, onnxruntime or numpy cannot be imported."""
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
except Exception as e:  # ImportError, or a broken install raising something else
    print(f"SKIP: onnx/onnxruntime/numpy not importable: {e}")
    sys.exit(77)

TOL = 1e-5


def run(path, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def weights(model):
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def close(name, got, want):
    if got.shape != want.shape:
        print(f"FAIL {name}: ONNX Runtime gives shape {got.shape}, NumPy {want.shape}")
        return False
    diff = float(np.max(np.abs(got - want))) if got.size else 0.0
    if diff > TOL * max(1.0, float(np.max(np.abs(want)))):
        print(f"FAIL {name}: max |ort - numpy| = {diff:g}")
        return False
    print(f"ok   {name}: ONNX Runtime matches NumPy, shape {got.shape}, max |diff| {diff:.2g}")
    return True


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    ringside, tutorial = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    name = os.path.basename(tutorial)[:-5]
    tmp = tempfile.mkdtemp(prefix="rs-onnx-tutorial-")
    try:
        env = dict(os.environ, NO_COLOR="1", HOME=tmp, RINGSIDE_TUTORIALS=os.path.dirname(tutorial))
        p = subprocess.run([ringside, "--no-db", "-c", f"play {name} auto"], cwd=tmp, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            print(p.stdout + p.stderr)
            print(f"FAIL play {name} auto: exit {p.returncode}")
            return 1
        ok = True
        rng = np.random.default_rng(7)
        files = {f: os.path.join(tmp, f) for f in ("m.onnx", "gemm.onnx", "lesson.onnx")}
        for f, path in files.items():
            if not os.path.exists(path):
                print(f"FAIL {f}: the tutorial did not write it")
                return 1
            try:
                model = onnx.load(path)
                onnx.checker.check_model(model, full_check=True)
                onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
            except Exception as e:  # the checker's and shape inference's errors have no common base
                print(f"FAIL {f}: {e}")
                return 1
            print(f"ok   {f}: onnx.checker (full_check) and strict shape inference")
        # the lecture's graph: Y = X^T A, 2 x 2 whatever the batch
        x = rng.standard_normal((5, 2)).astype(np.float32)
        a = rng.standard_normal((5, 2)).astype(np.float32)
        ok &= close("gemm.onnx", run(files["gemm.onnx"], {"X": x, "A": a}), x.T @ a)
        # Y = X W^T + B with the file's seeded W and zero B
        w = weights(onnx.load(files["lesson.onnx"]))
        if not np.any(w["W"]) or np.any(w["B"]):
            print("FAIL lesson.onnx: W should be seeded values and B zeros")
            ok = False
        x = rng.standard_normal((6, 4)).astype(np.float32)
        ok &= close("lesson.onnx", run(files["lesson.onnx"], {"X": x}), x @ w["W"].T + w["B"])
        # the exported MLP: relu(x W0^T + b0) W2^T + b2 from its own initializers
        w = weights(onnx.load(files["m.onnx"]))
        x = rng.standard_normal((3, 784)).astype(np.float32)
        h = np.maximum(x @ w["0.weight"].T + w["0.bias"], 0)
        ok &= close("m.onnx", run(files["m.onnx"], {"input": x}), h @ w["2.weight"].T + w["2.bias"])
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
