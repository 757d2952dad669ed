#!/usr/bin/env python3
"""Figures, not a test: compiled plans (`ringside -c "plan bench FILE"`) against ONNX Runtime on the
ONNX file they were compiled from, at 1 and 2 threads and batch 1 and 64, with ORT's time over the
plan's (above 1: the plan is faster).

On a shared machine the load changes from one second to the next, so the two sides take turns: ROUNDS
rounds, each timing every plan (`plan bench`, median of RUNS runs) and then ORT (median of RUNS runs);
a figure is the median of its rounds' medians. ORT runs as its own benchmarks run it: one session per
thread count (intra_op_num_threads = threads, inter_op 1, graph optimizations at ORT's default, all),
input and output bound once with IOBinding so that a run converts nothing from NumPy (what remains of
Python per call is a few microseconds, which batch-1 figures of small models still carry).
usage: plan_ort.py RINGSIDE FILE.onnx RUNS PLAN... [--ort LABEL=OTHER.onnx]... (bench/plan.sh runs it; ROUNDS
from PLAN_ROUNDS, 3; the thread counts from PLAN_THREADS, "1 2"). Each --ort file (ORT's own int8 of the same
model, bench/plan_vision.sh) is one more column, run by ORT in the same turns, its cell ORT fp32 time over its.)"""
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

exe, path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
plans = [a for i, a in enumerate(sys.argv[4:], 4) if a != "--ort" and sys.argv[i - 1] != "--ort"]
others = dict(a.split("=", 1) for i, a in enumerate(sys.argv[4:], 4) if sys.argv[i - 1] == "--ort")
rounds = int(os.environ.get("PLAN_ROUNDS", "3"))


class Ort:
    def __init__(self, threads, model=path):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        self.bound = {}

    def binding(self, batch):
        if batch not in self.bound:
            inp, out = self.s.get_inputs()[0], self.s.get_outputs()[0]
            n = batch * int(np.prod(inp.shape[1:]))
            if inp.type == "tensor(int64)":  # a GPT's tokens: zeros, as `plan bench` gives it
                x = np.zeros(n, dtype=np.int64)
            else:
                x = (np.arange(n) % 17 * 0.05).astype(np.float32)
            xv = ort.OrtValue.ortvalue_from_numpy(x.reshape(batch, *inp.shape[1:]))
            io = self.s.io_binding()
            io.bind_ortvalue_input(inp.name, xv)
            io.bind_output(out.name)
            self.s.run_with_iobinding(io)  # warm-up; then the output it made stays bound
            io.bind_ortvalue_output(out.name, io.get_outputs()[0])
            self.bound[batch] = (io, xv)
        return self.bound[batch][0]

    def ms(self, batch):
        io = self.binding(batch)
        t = []
        for _ in range(runs):
            a = time.perf_counter()
            self.s.run_with_iobinding(io)
            t.append(time.perf_counter() - a)
        return 1e3 * statistics.median(t)


def plan_ms(plan, threads):
    # one line a figure whatever the path's length (the REPL wraps its output at COLUMNS)
    out = subprocess.run([exe, "--no-db", "-c", f"plan bench {plan} threads={threads} runs={runs}"],
                         capture_output=True, text=True, env=dict(os.environ, COLUMNS="1000")).stdout
    return {int(b): float(ms) for b, ms in re.findall(r"batch=(\d+): median ([0-9.]+) ms", out)}


print(f"{'threads':>7} {'batch':>5} {'ORT fp32 ms':>12} " + " ".join(f"{p.split('/')[-1]:>14}" for p in plans)
      + "".join(f" {label:>14}" for label in others) + "   (ORT/plan: >1 = plan faster)")
for threads in [int(t) for t in os.environ.get("PLAN_THREADS", "1 2").split()]:
    o = Ort(threads)
    extra = [Ort(threads, f) for f in others.values()]
    got = [[] for _ in list(plans) + extra]
    ort_t = {1: [], 64: []}
    for _ in range(rounds):
        for i, p in enumerate(plans):
            got[i].append(plan_ms(p, threads))
        for i, e in enumerate(extra, len(plans)):
            got[i].append({batch: e.ms(batch) for batch in (1, 64)})
        for batch in (1, 64):
            ort_t[batch].append(o.ms(batch))
    for batch in (1, 64):
        om = statistics.median(ort_t[batch])
        cells = []
        for g in got:
            ms = [r[batch] for r in g if batch in r]
            ms = statistics.median(ms) if ms else None
            cells.append(f"{ms:7.3f} ({om / ms:4.2f}x)" if ms else f"{'-':>14}")
        print(f"{threads:>7} {batch:>5} {om:12.3f} " + " ".join(f"{c:>14}" for c in cells))
