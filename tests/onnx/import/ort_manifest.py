"""Shared by gen_transformer_patterns.py's test and export_torch_transformers.py: ONNX Runtime's outputs
for a folder of .onnx files at batches 1 and 7 (what run-import reads: NAME.bB.in.f32 / .out.f32, token
ids written as int32 in the 4-byte elements), and the manifest lines run-import checks, with a tolerance
of 1e-4 relative to the largest output."""
import os

import numpy as np
import onnxruntime as ort


def add_good(out, name, seed=0):
    """Runs out/NAME.onnx in ONNX Runtime on random inputs (token ids for an integer input) and returns
    its manifest line."""
    sess = ort.InferenceSession(os.path.join(out, f"{name}.onnx"), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    rng = np.random.default_rng(seed)
    per_in = int(np.prod([d for d in inp.shape[1:]]))
    per_out = None
    scale = 0.0
    ys = {}
    for b in (1, 7):
        shape = [b] + list(inp.shape[1:])
        if "int" in inp.type:
            x = rng.integers(0, 11, size=shape, dtype=np.int64)
            x.astype(np.int32).tofile(os.path.join(out, f"{name}.b{b}.in.f32"))
        else:
            x = rng.standard_normal(shape).astype(np.float32)
            x.tofile(os.path.join(out, f"{name}.b{b}.in.f32"))
        y = sess.run(None, {inp.name: x})[0].astype(np.float32)
        ys[b] = y
        per_out = y.size // b
        scale = max(scale, float(np.abs(y).max()))
    for b, y in ys.items():
        y.tofile(os.path.join(out, f"{name}.b{b}.out.f32"))
    return f"good {name} {per_in} {per_out} {1e-4 * max(1.0, scale):.3g} 0"


def write_manifest(out, lines):
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
