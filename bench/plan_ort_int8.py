#!/usr/bin/env python3
"""Figures, not a test: ONNX Runtime's own int8 (onnxruntime.quantization.quantize_static) on the ONNX
file the plans were compiled from, calibrated on the same rows as `compile precision=int8 calib=f`
(the first CALIB_N Fashion-MNIST training images, x/255 as ringside reads them), with each of ORT's
calibration methods; its accuracy on the test split beside ORT fp32's, and the MinMax model's median
time at 1 and 2 threads, batch 1 and 64, beside a plan's (`plan bench`).
usage: plan_ort_int8.py RINGSIDE FILE.onnx CALIB_N RUNS [INT8.plan] (bench/plan.sh runs it)
       plan_ort_int8.py --quantize FILE.onnx CALIB.f32 OUT.onnx: the same quantize_static (MinMax) on the
       raw float32 rows of CALIB.f32 (the model's per-sample shape; bench/plan_vision.sh's calibration
       images), for bench/plan_ort.py to time as a column beside the plans (--ort "ORT int8=OUT.onnx")"""
import contextlib
import gzip
import io
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

try:
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
except ImportError as e:
    print(f"# ORT int8: skipped, onnxruntime.quantization is missing here ({e})")
    sys.exit(0)

FASHION = "/usr/share/datasets/fashion-mnist"


def idx(name):
    with gzip.open(os.path.join(FASHION, name + ".gz")) as f:
        b = f.read()
    ndim = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def images(prefix):
    x = idx(f"{prefix}-images-idx3-ubyte").astype(np.float32) / np.float32(255.0)
    return x.reshape(-1, 1, 28, 28), idx(f"{prefix}-labels-idx1-ubyte").astype(np.int64)


class Rows(CalibrationDataReader):
    def __init__(self, name, x):
        self.name, self.x, self.at = name, x, 0

    def get_next(self):
        if self.at >= len(self.x):
            return None
        b = self.x[self.at:self.at + 64]
        self.at += 64
        return {self.name: b}


def quantize(path, out, rows, method="MinMax"):
    """ORT's int8 of path into out, calibrated on rows (batches of 64): QDQ, s8 weights per channel, s8
    activations. Seconds it took; raises what quantize_static raises."""
    name = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    t0 = time.perf_counter()
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process, once per model
    with contextlib.redirect_stdout(io.StringIO()):  # and its progress lines
        quantize_static(path, out, Rows(name, rows), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        calibrate_method=getattr(CalibrationMethod, method))
    return time.perf_counter() - t0


def session(model, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def accuracy(model, x, y):
    s = session(model, 2)
    name = s.get_inputs()[0].name
    right = 0
    for at in range(0, len(x), 256):
        right += int((s.run(None, {name: x[at:at + 256]})[0].argmax(1) == y[at:at + 256]).sum())
    return right / len(x)


def median_ms(model, threads, batch, x):
    """Input and output bound once (IOBinding), as plan_ort.py times ORT: a run converts nothing."""
    s = session(model, threads)
    name, out = s.get_inputs()[0].name, s.get_outputs()[0].name
    xv = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x[:batch]))
    b = s.io_binding()
    b.bind_ortvalue_input(name, xv)
    b.bind_output(out)
    s.run_with_iobinding(b)
    b.bind_ortvalue_output(out, b.get_outputs()[0])
    t = []
    for _ in range(runs):
        a = time.perf_counter()
        s.run_with_iobinding(b)
        t.append(time.perf_counter() - a)
    return 1e3 * statistics.median(t)


if sys.argv[1] == "--quantize":
    src, calib, dst = sys.argv[2:5]
    shape = [d if isinstance(d, int) else -1 for d in
             ort.InferenceSession(src, providers=["CPUExecutionProvider"]).get_inputs()[0].shape]
    rows = np.fromfile(calib, dtype=np.float32).reshape([-1] + shape[1:])
    print(f"# ORT int8 (quantize_static, QDQ, s8 weights per channel, s8 activations, MinMax on {len(rows)} rows): "
          f"{quantize(src, dst, rows):.1f} s")
    sys.exit(0)
exe, path, calib_n, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
plan8 = sys.argv[5] if len(sys.argv) > 5 else None
try:
    xtr, _ = images("train")
    xte, yte = images("t10k")
except OSError as e:
    print(f"# ORT int8: skipped, no Fashion-MNIST to calibrate on ({e})")
    sys.exit(0)
tmp = tempfile.mkdtemp()
acc32 = accuracy(path, xte, yte)
print(f"# ORT int8 (quantize_static, QDQ, s8 weights per channel, s8 activations), calibrated on the first "
      f"{calib_n} training images; test accuracy, ORT fp32 {acc32:.4f}")
models = {}
for method in ("MinMax", "Percentile", "Entropy"):
    out = os.path.join(tmp, f"ort8-{method}.onnx")
    try:
        build = quantize(path, out, xtr[:calib_n], method)
    except Exception as e:  # an ORT without this method: say so, go on
        print(f"  {method:10s} failed: {e}")
        continue
    acc = accuracy(out, xte, yte)
    models[method] = out
    print(f"  {method:10s} accuracy {acc:.4f} ({100 * (acc - acc32):+.2f} points), quantize {build:.1f} s, "
          f"{os.path.getsize(out) / 1024:.0f} KiB")

if "MinMax" in models:
    plan_ms = {}
    if plan8:
        for threads in (1, 2):
            o = subprocess.run([exe, "--no-db", "-c", f"plan bench {plan8} threads={threads} runs={runs}"],
                               capture_output=True, text=True).stdout
            plan_ms[threads] = {int(b): float(ms) for b, ms in re.findall(r"batch=(\d+): median ([0-9.]+) ms", o)}
    print(f"{'threads':>7} {'batch':>5} {'ORT fp32 ms':>12} {'ORT int8 ms':>12} {'int8 plan ms':>14}"
          "   (ORT int8/plan: >1 = plan faster)")
    for threads in (1, 2):
        for batch in (1, 64):
            o32 = median_ms(path, threads, batch, xte)
            o8 = median_ms(models["MinMax"], threads, batch, xte)
            p = plan_ms.get(threads, {}).get(batch)
            cell = f"{p:7.3f} ({o8 / p:4.2f}x)" if p else "-"
            print(f"{threads:>7} {batch:>5} {o32:12.3f} {o8:12.3f} {cell:>14}")
