#!/usr/bin/env python3
"""Figures, not a test: compiled plans (`ringside -c "plan bench FILE"`) against ONNX Runtime on the
ONNX file they were compiled from, at 1 and 2 threads and batch 1 and 64, medians of RUNS runs each,
with ORT's time over the plan's (above 1: the plan is faster).
usage: plan_ort.py RINGSIDE FILE.onnx RUNS PLAN... (bench/plan.sh runs it)"""
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

exe, path, runs, plans = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]


def ort_ms(threads, batch):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    inp = s.get_inputs()[0]
    n = batch * int(np.prod(inp.shape[1:]))
    if inp.type == "tensor(int64)":  # a GPT's tokens: zeros, as `plan bench` gives it
        x = np.zeros(n, dtype=np.int64)
    else:
        x = (np.arange(n) % 17 * 0.05).astype(np.float32)
    x = x.reshape(batch, *inp.shape[1:])
    s.run(None, {inp.name: x})
    t = []
    for _ in range(runs):
        a = time.perf_counter()
        s.run(None, {inp.name: x})
        t.append(time.perf_counter() - a)
    return 1e3 * statistics.median(t)


def plan_ms(plan, threads):
    out = subprocess.run([exe, "--no-db", "-c", f"plan bench {plan} threads={threads} runs={runs}"],
                         capture_output=True, text=True).stdout
    return {int(b): float(ms) for b, ms in re.findall(r"batch=(\d+): median ([0-9.]+) ms", out)}


print(f"{'threads':>7} {'batch':>5} {'ORT fp32 ms':>12} " + " ".join(f"{p.split('/')[-1]:>14}" for p in plans)
      + "   (ORT/plan: >1 = plan faster)")
for threads in (1, 2):
    got = [plan_ms(p, threads) for p in plans]
    for batch in (1, 64):
        o = ort_ms(threads, batch)
        cells = []
        for g in got:
            ms = g.get(batch)
            cells.append(f"{ms:7.3f} ({o / ms:4.2f}x)" if ms else f"{'-':>14}")
        print(f"{threads:>7} {batch:>5} {o:12.3f} " + " ".join(f"{c:>14}" for c in cells))
