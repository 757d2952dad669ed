#!/usr/bin/env python3
"""The committed transformer patterns (tests/onnx/import/transformer/, written by
gen_transformer_patterns.py) imported and run by the engine at batches 1 and 7 against ONNX Runtime
(1e-4 relative to the largest output), and the files in bad.txt refused with the node, the operator and
the words listed there; every file that imports also compiled by RUN_PLAN (tests/onnx/import/run_plan.c)
into fp32, bf16 and int8 plans at batch 7 and compared with ONNX Runtime at batches 1 and 7 (fp32 within
1e-4: attention's batched matmuls, the Slice a Gather on computed data becomes, Expand, Concat run as the
engine's op kernels in the plan), the fp32 plan also through a plan file. Usage:
test_transformer_patterns.py RUN_IMPORT RUN_PLAN. Exits 77 without numpy, onnx or onnxruntime."""
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy  # noqa: F401
    import onnxruntime  # noqa: F401
except Exception as e:
    print(f"SKIP: needs numpy and onnxruntime ({e})")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from ort_manifest import add_good, write_manifest  # noqa: E402

src = os.path.join(here, "transformer")
with open(os.path.join(src, "bad.txt")) as f:
    bad = dict(line.rstrip("\n").split("\t", 1) for line in f if line.strip())
with tempfile.TemporaryDirectory(prefix="rs-tx-patterns-") as out:
    lines = []
    for fn in sorted(os.listdir(src)):
        if not fn.endswith(".onnx"):
            continue
        name = fn[:-5]
        shutil.copy(os.path.join(src, fn), out)
        lines.append(f"bad {name} {bad[name]}" if name in bad else add_good(out, name, seed=len(lines)))
    missing = set(bad) - {ln.split()[1] for ln in lines}
    if missing:
        print(f"FAIL: bad.txt names files that are not there: {sorted(missing)}")
        sys.exit(1)
    write_manifest(out, lines)
    rc = subprocess.run([sys.argv[1], out, "--only"]).returncode
    good = [ln.split()[1] for ln in lines if not ln.startswith("bad ")]
    rc += subprocess.run([sys.argv[2], out] + good).returncode
    sys.exit(1 if rc else 0)
