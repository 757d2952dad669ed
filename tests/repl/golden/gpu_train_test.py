#!/usr/bin/env python3
"""Models on a GPU at the prompt (suite cuda): `model ... device=cuda` and `to` there and back, one
process training on the GPU against the CPU, DDP over NCCL with one rank equal to one process on the
GPU, and bf16 on the GPU within a point of fp32 on Fashion-MNIST where Debian's copy is installed.
Exits 77 (skipped) with the reason where `devices` reports no GPU: CI and this project's build
machine have none, so this runs only on a lent GPU machine (`meson test -C build --suite cuda`).

usage: gpu_train_test.py RINGSIDE"""
import os
import re
import sys
import tempfile

import numpy as np
from repl_check import Checks, run as repl_run
from safetensors.numpy import load_file

EXE = os.path.abspath(sys.argv[1])
check = Checks()


def run(cmds, timeout=600):
    return repl_run(EXE, cmds, stdin=True, timeout=timeout)


def rel(a, b):
    x, y = load_file(a), load_file(b)
    return max(float(np.abs(x[k] - y[k]).max() / (np.abs(y[k]).max() + 1e-12)) for k in y)


rc, out, err, detail = run("devices")
m = re.search(r"CUDA device count: (\d+)", out)
if not m or int(m.group(1)) == 0:
    why = re.search(r"^(no CUDA device[^\n]*|CUDA: not in this build)", out, re.M)
    print("no CUDA device: %s" % (why.group(1) if why else "devices reports none"))
    sys.exit(77)

tmp = tempfile.mkdtemp(prefix="rs-gpu-")
P = lambda f: os.path.join(tmp, f)
rc, out, err, detail = run("""set threads=1
data d = digits n=2000 seed=1
model g = mlp 784-64-10 seed=3 device=cuda
model c = mlp 784-64-10 seed=3
model r = mlp 784-64-10 seed=3
show g
train g on d epochs=2 batch=32
train c on d epochs=2 batch=32
train r on d epochs=2 batch=32 mode=ddp ranks=1 backend=nccl view=off
save g %(g)s
save c %(c)s
save r %(r)s
to g cpu
save g %(g2)s
to g cuda
save g %(g3)s
""" % dict(g=P("g.safetensors"), c=P("c.safetensors"), r=P("r.safetensors"), g2=P("g2.safetensors"),
           g3=P("g3.safetensors")))
check(rc == 0, "the GPU session ran without an error", detail)
check("10 classes, on cuda:0" in out, "show says the model lives on cuda:0", detail)
d = rel(P("g.safetensors"), P("c.safetensors")) if os.path.exists(P("g.safetensors")) else 1
check(d < 1e-3, "two epochs on the GPU end within 1e-3 (relative) of the CPU's weights: %.3g" % d)
d = rel(P("r.safetensors"), P("g.safetensors")) if os.path.exists(P("r.safetensors")) else 1
check(d < 1e-5, "ddp over nccl with one rank equals one process on the GPU: %.3g" % d)
d = rel(P("g2.safetensors"), P("g3.safetensors")) if os.path.exists(P("g3.safetensors")) else 1
check(d == 0, "to cpu and back to cuda keeps every weight")

if os.path.exists("/usr/share/datasets/fashion-mnist"):
    rc, out, err, detail = run("""data f = fashion
model a = seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10) seed=1 device=cuda
model b = seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10) seed=1 device=cuda
train a on f epochs=1 batch=64
train b on f epochs=1 batch=64 precision=bf16
""", timeout=900)
    acc = [float(x) for x in re.findall(r"trained [ab] on f: .* test accuracy ([\d.]+)", out)]
    check(len(acc) == 2 and abs(acc[0] - acc[1]) <= 0.01,
          "Fashion on the GPU: bf16 within 1 point of fp32 (%s)" % acc, detail)
else:
    print("note: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist): bf16 check skipped")

check.finish("gpu-train")
