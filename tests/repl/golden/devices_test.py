#!/usr/bin/env python3
"""`devices` and `set device=` on whatever machine runs it. Without a GPU (or without CUDA in the
build): `devices` says CUDA is not available, why, and that the CPU is used; `set device=cuda` and
`cuda:N` are refused with that reason and the session stays on the CPU; the REPL goes on. With GPUs:
`devices` lists each with its name, compute capability and memory, as the CUDA runtime reports them
(checked against nvidia-smi when it is there), `set device=cuda:N` takes the last one and refuses
the one past it. Either way `show` names the model's device and bad values are refused.

usage: devices_test.py RINGSIDE"""
import os
import re
import shutil
import subprocess
import sys

from repl_check import Checks, run as repl_run

EXE = os.path.abspath(sys.argv[1])
check = Checks()


def run(cmds):
    return repl_run(EXE, cmds, timeout=120)


rc, out, err, detail = run("devices")
check(rc == 0 and "CUDA available: " in out and "session device: cpu" in out, "devices runs and names the session's device",
      detail)
m = re.search(r"CUDA device count: (\d+)", out)
count = int(m.group(1)) if m else -1
check(count >= 0, "devices gives a device count", detail)

if count == 0:
    check("CUDA available: no" in out, "no GPU: not available", detail)
    check("no CUDA device: " in out and "CUDA not available, using CPU" in out, "no GPU: says why and that the CPU is used",
          detail)
    for dev in ("cuda", "cuda:0", "cuda:3"):
        rc, out, err, detail = run("set device=%s; set; model m = mlp 4-3-2; show m" % dev)
        check(rc != 0 and "set: device=%s refused: no CUDA device: " % dev in err and "stays on the CPU" in err,
              "no GPU: set device=%s refused with the reason" % dev, detail)
        check("device=cuda" not in out and "kernels: cpu" in out, "no GPU: after the refusal the session and its models are "
              "on the CPU", detail)
else:
    check("CUDA available: yes" in out, "GPU: available", detail)
    gpus = re.findall(r"^cuda:(\d+)  (.+?)  compute capability (\d+)\.(\d+)  (\d+) SMs  memory ([\d.]+) GiB", out, re.M)
    check(len(gpus) == count, "GPU: one line per device (%d)" % count, detail)
    for g in gpus:
        check(int(g[2]) >= 3 and float(g[5]) > 0.5, "cuda:%s: plausible compute capability %s.%s and memory %s GiB"
              % (g[0], g[2], g[3], g[5]), detail)
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run([smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"], capture_output=True, text=True)
        rows = [r.split(", ") for r in q.stdout.strip().splitlines()]
        for g, r in zip(gpus, rows):
            check(g[1] == r[0] and "%s.%s" % (g[2], g[3]) == r[1], "cuda:%s matches nvidia-smi (%s)" % (g[0], ", ".join(r)))
    rc, out, err, detail = run("set device=cuda:%d; set" % (count - 1))
    check(rc == 0 and "device=cuda" in out, "GPU: set device=cuda:%d taken" % (count - 1), detail)
    rc, out, err, detail = run("set device=cuda:%d" % count)
    check(rc != 0 and "there is no cuda:%d" % count in err, "GPU: set device=cuda:%d refused" % count, detail)

for bad, why in (("gpu", "cpu, cuda, cuda:N (N from `devices`) or guard"), ("cuda:x", "the GPU number after cuda:")):
    rc, out, err, detail = run("set device=%s; devices" % bad)
    check(rc != 0 and why in err and "CUDA available" in out, "set device=%s refused; the REPL goes on" % bad, detail)

check.finish("devices")
