#!/usr/bin/env python3
"""Figures, not a test: import + run of one .onnx file in ringside (run-import --bench) against ONNX
Runtime session creation + run, at 1 and 2 threads and batch 1 and 64.
usage: onnx_ort.py RUN_IMPORT FILE.onnx (bench/onnx.sh runs it on the CNN)"""
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

exe, path = sys.argv[1], sys.argv[2]
for threads in (1, 2):
    for batch in (1, 64):
        print(subprocess.run([exe, "--bench", path, str(threads), str(batch)], capture_output=True,
                             text=True).stdout.strip())
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        t0 = time.perf_counter()
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        t1 = time.perf_counter()
        inp = s.get_inputs()[0]
        x = (np.arange(batch * int(np.prod(inp.shape[1:]))) % 17 * 0.05).astype(np.float32)
        x = x.reshape(batch, *inp.shape[1:])
        s.run(None, {inp.name: x})
        t2 = time.perf_counter()
        runs = []
        for _ in range(50):
            a = time.perf_counter()
            s.run(None, {inp.name: x})
            runs.append(time.perf_counter() - a)
        print(f"onnxruntime threads={threads} batch={batch} session {1e3 * (t1 - t0):.3f} ms, first run "
              f"{1e3 * (t2 - t1):.3f} ms, run median {1e3 * statistics.median(runs):.3f} ms")
