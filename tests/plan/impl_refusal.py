#!/usr/bin/env python3
"""A plan whose grouped convolution names a oneDNN kernel this machine does not offer is refused at
load, naming the node and the kernel and saying to compile again (issue 26: the file's weights are
laid out for that kernel, so it never runs another's at the plan's batch).

  impl_refusal.py RUN_PLAN_ONNX RINGSIDE DATA_DIR

Compiles mbv3_block.onnx (its depthwise conv) with run-plan-onnx, keeps the plan, rewrites the
kernel's name in the file to one oneDNN has not (same length; the header's CRC-32 written again,
plan/file.c's format: "RINGPLAN", version, CRC-32 of the payload, its length, then the payload),
and asks `plan show` for it: the message must name the node, the changed name and "compile". The
unchanged plan loads. Exit 77 when numpy is missing.
"""
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

try:
    import numpy as np
except ImportError:
    print("skipped: numpy is not installed")
    sys.exit(77)


def main():
    runner, ringside, data = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as tmp:
        x = os.path.join(tmp, "x.f32")
        np.random.default_rng(1).standard_normal((8, 3, 32, 32)).astype(np.float32).tofile(x)
        plan = os.path.join(tmp, "good.plan")
        r = subprocess.run([runner, os.path.join(data, "mbv3_block.onnx"), "fp32", x, "8", x, "8",
                            os.path.join(tmp, "y.f32"), "8", plan], capture_output=True, text=True, timeout=120)
        if r.returncode:
            print(f"FAIL: run-plan-onnx: {r.stderr.strip()}")
            return 1
        m = re.search(r"^\s*\d+\s+(\S+)\s+dwconv .*\s(\S+)\s*$", r.stdout, re.M)
        if not m:
            print(f"FAIL: no dwconv in the plan:\n{r.stdout}")
            return 1
        node, kernel = m.group(1), m.group(2)
        blob = open(plan, "rb").read()
        head, payload = blob[:24], blob[24:]
        if head[:8] != b"RINGPLAN" or kernel.encode() not in payload:
            print(f"FAIL: the plan file does not hold the kernel's name {kernel} (or its header is not RINGPLAN)")
            return 1
        bogus = kernel[:-1] + ("q" if kernel[-1] != "q" else "z")
        payload = payload.replace(kernel.encode(), bogus.encode())
        bad = os.path.join(tmp, "bad.plan")
        open(bad, "wb").write(head[:12] + struct.pack("<I", zlib.crc32(payload) & 0xFFFFFFFF) + head[16:] + payload)
        fails = []
        ok = subprocess.run([ringside, "--no-db", "-c", f"plan show {plan}"], capture_output=True, text=True, timeout=60)
        if ok.returncode or kernel not in ok.stdout:
            fails.append(f"the unchanged plan: rc {ok.returncode}, no {kernel} in:\n{ok.stdout}{ok.stderr}")
        r = subprocess.run([ringside, "--no-db", "-c", f"plan show {bad}"], capture_output=True, text=True, timeout=60)
        said = " ".join((r.stdout + r.stderr).split())  # the REPL wraps its messages
        for want in (f"node {node}'s kernel {bogus}", "compile the model again"):
            if want not in said:
                fails.append(f"the changed plan's refusal lacks '{want}':\n{said}")
    for f in fails:
        print("FAIL " + f)
    print(f"kernel {kernel} of node {node} renamed {bogus}: {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
