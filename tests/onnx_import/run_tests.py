#!/usr/bin/env python3
"""Meson driver for the ONNX import test: writes the models and ONNX Runtime's outputs with
make_models.py, then runs the C checker (argv[1]) over them. Exits 77 (meson's "skipped") when numpy,
onnx or onnxruntime do not import; torch is optional (make_models.py skips the exported models)."""
import os
import subprocess
import sys
import tempfile

try:
    import numpy  # noqa: F401
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401
except Exception as e:
    print(f"SKIP: the ONNX import test needs numpy, onnx and onnxruntime ({e})")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
with tempfile.TemporaryDirectory(prefix="rs-onnx-import-") as out:
    r = subprocess.run([sys.executable, os.path.join(here, "make_models.py"), out])
    if r.returncode:
        print("make_models.py failed")
        sys.exit(1)
    sys.exit(subprocess.run([sys.argv[1], out]).returncode)
