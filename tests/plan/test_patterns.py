#!/usr/bin/env python3
"""Compiles the vision operator patterns of tests/plan/data/ (written by gen_patterns.py) at fp32, bf16
and int8 and compares each plan's outputs with ONNX Runtime's on the same images (issue 26).

  test_patterns.py RUN_PLAN_ONNX [DATA_DIR]

RUN_PLAN_ONNX is tests/plan/run_plan_onnx.c: it compiles, runs 12 images at a plan batch of 8 (so a
full and a partial batch), saves and reloads the plan and checks the reloaded one computes the same
bits. Here:
  - fp32 within 1e-4 of ORT relative to max(1, max |ORT|) (oneDNN and ORT sum in other orders;
    measured 1e-6 to 1e-5);
  - bf16 within 3e-2 and int8 within 6e-2 of that scale (test_plan.c's bounds for the engine's own
    models: bf16 keeps 8 bits of mantissa, int8 7 bits of each product's operands), and top-1 equal to
    ORT's on every image whose two best logits are further apart than twice that bound (random weights
    put some images' best two closer than any 8-bit arithmetic can separate);
  - int8 plans say what int8_report.py checks: a residual conv on an int8 kernel that is not oneDNN's
    reference one (or fp32 where the report times it faster), each timed choice the one the plan runs;
  - each grouped conv's kernel compile chose by timing (impl_report.py) is the one `plan show` names,
    in the compiled plan and the loaded one, at every precision;
  - each plan holds the kernels the pattern is about (a depthwise convolution, a global average pool,
    a ReduceMean as a pool, ...) rather than refusing or running them elsewhere; the elementwise,
    broadcast, concat, slice and transpose nodes of dnnl_ops, mbv3_block and shuffle name a oneDNN
    kernel in `plan show`, and no node of those or resnet_block runs on the engine's table (shuffle's
    Split reads a blocked conv output: natively nChw16c, whose second half starts mid-block, capped
    to AVX2 nChw8c, where it starts at a block).
Exit 77 (skipped) when numpy or onnxruntime is missing.
"""
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnxruntime as ort
except Exception as e:  # pragma: no cover
    print(f"SKIP: needs numpy and onnxruntime ({e})")
    sys.exit(77)

import impl_report  # noqa: E402 (beside this file)
import int8_report  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = {"fp32": 1e-4, "bf16": 3e-2, "int8": 6e-2, "int8all": 6e-2}
N, BATCH, NCAL = 12, 8, 32

# a node of `plan show` that oneDNN runs: its kernel column names oneDNN's implementation, not the
# engine's table (a regression to the engine path fails here)
def on_dnnl(what):
    return what + r"\s+fp32 -\s+(?!engine)\S"


# ... and not its reference kernel (a binary whose src1 is in another layout than src0 has only that:
# 9-32 ms a squeeze-excite Mul at batch 64 on mobilenet_v3_small capped to AVX2)
def on_jit(what):
    return what + r"\s+fp32 -\s+(?!engine|ref)\S"


# what each pattern's plan must hold (substrings or regular expressions of `plan show`'s node lines)
EXPECT = {
    "mbv3_block": ["dwconv", "+hardswish", "avgpool 16x16x16>1x1", "avgpool 24x16x16>1x1", "+hardsigmoi",
                   on_jit("binary")],
    "resnet_block": ["+sum", "avgpool 32x8x8>1x1", "maxpool", "conv 32x8x8>32x8x8 k3 s1 p1  fp32 +sum"],
    "reducemean": ["avgpool 16x16x16>1x1", "+silu", "+gelu", r"hardsigmoid\s+fp32 -", r"hardswish\s+fp32 -",
                   r"sigmoid\s+fp32 -"],
    "shuffle": ["gconv", on_dnnl("concat"), on_dnnl("slice"), on_dnnl("transpose")],
    "dnnl_ops": [on_jit("binary"), on_jit("hardswish"), on_jit("sigmoid"), on_jit("clip"), on_jit("gelu"),
                 on_dnnl("concat"), "conv 64x16x16>16x16x16 k4 s1", "conv 48x16x16>16x16x16 k3 s1", "maxpool 16x16x16>16x16 k2 s1",
                 "avgpool 16x16x16>16x16 k3 s1"],
    "pool_modes": ["avgpool 16x32x32>16x16 k3 s2", "maxpool 16x16x16>8x8 k3 s2", "avgpool 16x8x8>5x5 k3 s2",
                   "avgpool 16x5x5>3x3 k2 s2"],
    "dense_block": [on_dnnl("concat"), "conv 80x16x16>32x16x16 k1", "avgpool 32x16x16>8x8 k2 s2"],
    "convnext_block": ["dwconv 16x8x8>16x8x8 k7", "linear 16>64 x64 rows", "+gelu", "layernorm",
                       "linear 7 + Add (a per-channel constant", r"gelu\s+fp32 -"],
}

# what the plans of every precision must hold: in an int8 plan the squeeze-excite's scale comes from an
# int8 1x1 conv (nhwc capped to AVX2) and its value from an fp32 depthwise one (nChw8c)
EVERY_PREC = {"mbv3_block": [on_jit("binary")]}

# patterns every node of which oneDNN runs
ALL_DNNL = {"dnnl_ops", "mbv3_block", "resnet_block", "shuffle", "pool_modes"}


def holds(s, text):
    """s is in text, as a substring or as a regular expression."""
    if s in text:
        return True
    try:
        return re.search(s, text) is not None
    except re.error:  # a substring with regex syntax in it ("+silu"): not there
        return False


def compare(name, prec, got, want):
    """Failures (strings) of one plan's outputs against ORT's."""
    fails = []
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got - want).max()) / scale
    tol = TOL[prec]
    print(f"  {name} {prec}: max |plan - ORT| / {scale:.3g} = {err:.3g} (bound {tol})")
    if not err <= tol:
        fails.append(f"{name} {prec}: off ORT by {err:.3g} of the logits' scale (bound {tol})")
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * tol * scale
    agree = got.argmax(1) == want.argmax(1)
    if not agree[clear].all():
        fails.append(f"{name} {prec}: top-1 differs from ORT on images {np.nonzero(clear & ~agree)[0].tolist()}")
    return fails


def main():
    runner = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "data")
    names = sorted(f[:-5] for f in os.listdir(data) if f.endswith(".onnx"))
    if sorted(EXPECT) != names:
        print(f"FAIL: {data} holds {names}, the test expects {sorted(EXPECT)} (run gen_patterns.py)")
        return 1
    rng = np.random.default_rng(7)
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = os.path.join(data, name + ".onnx")
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            shape = [d for d in sess.get_inputs()[0].shape[1:]]
            x = rng.standard_normal((N, *shape)).astype(np.float32)
            cal = rng.standard_normal((NCAL, *shape)).astype(np.float32)
            want = sess.run(None, {sess.get_inputs()[0].name: x})[0].reshape(N, -1)
            xf, cf = os.path.join(tmp, "x.f32"), os.path.join(tmp, "cal.f32")
            x.tofile(xf)
            cal.tofile(cf)
            # int8all: every node int8 (the arithmetic checked at its worst); int8 as compile makes it by
            # default (timed per node against fp32), for the report's choices (int8_report.py)
            for prec in ("fp32", "bf16", "int8all") + (("int8",) if name == "resnet_block" else ()):
                out = os.path.join(tmp, f"{name}.{prec}.f32")
                r = subprocess.run([runner, path, prec, xf, str(N), cf, str(NCAL), out, str(BATCH)], capture_output=True,
                                   text=True, timeout=120)
                if r.returncode != 0:
                    fails.append(f"{name} {prec}: run-plan-onnx failed: {r.stderr.strip()}")
                    print(r.stdout)
                    continue
                if prec == "fp32":
                    shown = r.stdout
                    missing = [s for s in EXPECT[name] if not holds(s, shown)]
                    if missing:
                        fails.append(f"{name}: the fp32 plan lacks {missing}:\n{shown}")
                    if name in ALL_DNNL and "engine cpu table" in shown:
                        fails.append(f"{name}: a node runs on the engine's table, not oneDNN:\n{shown}")
                bad = [s for s in EVERY_PREC.get(name, []) if not holds(s, r.stdout)]
                if bad:
                    fails.append(f"{name} {prec}: the plan lacks {bad}:\n{r.stdout}")
                if prec.startswith("int8"):
                    fails += int8_report.check(f"{name} {prec}", r.stdout, prec == "int8all")
                fails += impl_report.check(f"{name} {prec}", r.stdout)
                got = np.fromfile(out, dtype=np.float32).reshape(N, -1)
                fails += compare(name, prec, got, want)
    for f in fails:
        print("FAIL " + f)
    print(f"{len(names)} patterns x 3 precisions (and resnet_block's timed int8), {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
