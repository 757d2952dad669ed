#!/usr/bin/env python3
"""Models with several inputs (tests/onnx/import/two_tower/, written by gen_two_tower.py) imported and run
by the engine at batches 1 and 7 against ONNX Runtime (1e-4 relative to the largest output): ONNX Runtime
gets each input as its own tensor, the engine its one packed input, per sample each input's values in the
file's declared order (graph.h: rs_onnx_input), which this script builds from the file's input list. Also
compiled by RUN_PLAN into plans and compared the same way; mixed_types.onnx (int64 ids beside floats) must
be refused naming both inputs. With RINGSIDE, `model t = onnx two_tower.onnx` at the REPL must say what it
packs where (each input's name, shape and offset, from ORT's input list) and `show t` the packed count.
Usage: test_two_tower.py RUN_IMPORT RUN_PLAN [RINGSIDE]. Exits 77 without numpy, onnx or onnxruntime."""
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnxruntime as ort
except Exception as e:
    print(f"SKIP: needs numpy and onnxruntime ({e})")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from ort_manifest import write_manifest  # noqa: E402

src = os.path.join(here, "two_tower")
BAD = {"mixed_types": "'ids' (int64), 'dense' (float)"}


def add_packed(out, name, seed):
    """ORT on separate random inputs; the engine's input file holds them packed per sample."""
    sess = ort.InferenceSession(os.path.join(out, f"{name}.onnx"), providers=["CPUExecutionProvider"])
    ins = sess.get_inputs()
    rng = np.random.default_rng(seed)
    per_in = sum(int(np.prod(i.shape[1:])) for i in ins)
    ys, scale = {}, 0.0
    for b in (1, 7):
        feeds = {i.name: rng.standard_normal([b] + list(i.shape[1:])).astype(np.float32) for i in ins}
        packed = np.concatenate([feeds[i.name].reshape(b, -1) for i in ins], axis=1)
        assert packed.shape == (b, per_in)
        packed.tofile(os.path.join(out, f"{name}.b{b}.in.f32"))
        ys[b] = sess.run(None, feeds)[0].astype(np.float32)
        scale = max(scale, float(np.abs(ys[b]).max()))
    for b, y in ys.items():
        y.tofile(os.path.join(out, f"{name}.b{b}.out.f32"))
    return f"good {name} {per_in} {ys[1].size} {1e-4 * max(1.0, scale):.3g} 0"


with tempfile.TemporaryDirectory(prefix="rs-two-tower-") as out:
    lines = []
    for fn in sorted(os.listdir(src)):
        if not fn.endswith(".onnx"):
            continue
        name = fn[:-5]
        shutil.copy(os.path.join(src, fn), out)
        lines.append(f"bad {name} {BAD[name]}" if name in BAD else add_packed(out, name, seed=len(lines)))
    good = [ln.split()[1] for ln in lines if not ln.startswith("bad ")]
    if len(good) < 3 or len(lines) - len(good) != len(BAD):
        print(f"FAIL: expected 3 good files and {sorted(BAD)}, found {lines}")
        sys.exit(1)
    write_manifest(out, lines)
    rc = subprocess.run([sys.argv[1], out, "--only"]).returncode
    rc += subprocess.run([sys.argv[2], out] + good).returncode
    if len(sys.argv) > 3:
        path = os.path.join(src, "two_tower.onnx")
        ins = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_inputs()
        offs = np.cumsum([0] + [int(np.prod(i.shape[1:])) for i in ins])
        want = ", ".join(f"{i.name} (N, {', '.join(str(d) for d in i.shape[1:])}) at {o}" for i, o in zip(ins, offs))
        r = subprocess.run([sys.argv[3], "--no-db", "-c", f"model t = onnx {path}\nshow t"], capture_output=True,
                           text=True, timeout=60)
        text = " ".join(r.stdout.split())
        ok = r.returncode == 0 and f"its {len(ins)} inputs are packed into that one, per sample in the file's " \
            f"order: {want}" in text and f"input ({offs[-1]})" in text
        print(("ok   " if ok else "FAIL ") + f"the REPL says what it packs: {want}" + ("" if ok else f"\n{r.stdout}{r.stderr}"))
        rc += not ok
    sys.exit(1 if rc else 0)
