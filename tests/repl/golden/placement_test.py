#!/usr/bin/env python3
"""Models on a device: `model ... device=`, `set device=` and `to MODEL DEVICE`, checked on the guard
device (engine/guard/: the CPU's kernels on memory that is sealed between kernel calls, and that
refuses host pointers as kernel arguments). A model there behaves as one on a GPU does as far as
where memory may be read: any code that still read its parameters, activations or optimizer state
directly from the host would stop with SIGSEGV, and any kernel handed a host buffer would fail. What
the guard computes is the CPU's arithmetic, so at one thread every result must equal the CPU model's
exactly: training (Adam, clipping, bf16 and fp16 with an injected overflow), evaluation, a GPT's
validation losses and sampled text with and without the KV cache, checkpoints written and resumed,
`to` there and back, and the ONNX export. Refusals: plans, ranks and a GPU that is not there.

usage: placement_test.py RINGSIDE"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from repl_check import Checks, run as repl_run
from safetensors.numpy import load_file

EXE = os.path.abspath(sys.argv[1])
check = Checks()


def run(cmds, timeout=600):
    return repl_run(EXE, cmds, stdin=True, timeout=timeout)


def same_weights(a, b):
    x, y = load_file(a), load_file(b)
    return x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def figures(out, name):
    """The epoch lines of a run on model `name`, without the speed (the guard is slower)."""
    block = out.split("> train %s " % name, 1)[1].split("\n> ", 1)[0]
    return [re.sub(r"\s+\d+ samples/s\s+[\d.]+s|\s+\d+ tok/s", "", l) for l in block.splitlines()
            if l.startswith(("epoch", "step"))]


tmp = tempfile.mkdtemp(prefix="rs-place-")
P = lambda f: os.path.join(tmp, f)

# ---- an MLP: Adam with clipping, checkpoints, resume, `to` there and back ----
rc, out, err, detail = run("""set threads=1
data d = digits n=1200 seed=1
model g = mlp 784-32-10 seed=3 device=guard
model c = mlp 784-32-10 seed=3
show g
train g on d epochs=1 batch=32 clip=0.5 ckpt=%(gk)s
train c on d epochs=1 batch=32 clip=0.5 ckpt=%(ck)s
train g on d epochs=2 batch=32 clip=0.5 resume=%(gk)s
train c on d epochs=2 batch=32 clip=0.5 resume=%(ck)s
eval g on d
eval c on d
save g %(g1)s
save c %(c1)s
to g cpu
to g guard
save g %(g2)s
model r = mlp 784-32-10 seed=9 device=guard
load r %(g1)s
train r on d epochs=1 batch=32 seed=5
train c on d epochs=1 batch=32 seed=5
save r %(r)s
save c %(c2)s
""" % dict(gk=P("gk.safetensors"), ck=P("ck.safetensors"), g1=P("g1.safetensors"), c1=P("c1.safetensors"),
           g2=P("g2.safetensors"), r=P("r.safetensors"), c2=P("c2.safetensors")))
check(rc == 0, "the MLP session ran without an error", detail)
check("model g: 3 layers, 25450 parameters, input 784 values, 10 classes, on guard" in out,
      "model ... device=guard says where it was built", detail)
check(re.search(r"10 classes, on guard\n", out) and "kernels: guard;" in out, "show says where the model lives", detail)
fg, fc = figures(out, "g"), figures(out, "c")
check(fg and fg == fc, "training on the guard prints the CPU's losses and accuracies: %s" % fg[:2], "%s\n%s" % (fg, fc))
ev = re.findall(r"^[gc] on d \(digits-test, \d+ samples\): (accuracy [\d.]+, loss [\d.]+)", out, re.M)
check(len(ev) == 2 and ev[0] == ev[1], "eval on the guard equals eval on the CPU: %s" % ev, detail)
check(os.path.exists(P("g1.safetensors")) and same_weights(P("g1.safetensors"), P("c1.safetensors")),
      "after a checkpoint and a resume the guard's weights equal the CPU's exactly")
check(same_weights(P("gk.safetensors"), P("ck.safetensors")) and
      same_weights(P("gk.optim.safetensors"), P("ck.optim.safetensors")),
      "the checkpoints written from the guard (weights and Adam's state) equal the CPU's")
check(re.search(r"g: guard -> cpu \(25450 parameters, 99\.\d KiB copied", out) and "g: cpu -> guard" in out,
      "to moves the model and says what it copied", detail)
check(same_weights(P("g1.safetensors"), P("g2.safetensors")), "to cpu and back leaves every weight as it was")
check(same_weights(P("r.safetensors"), P("c2.safetensors")),
      "weights loaded into a guard model train on exactly as the CPU model does")

# ---- a CNN in bf16 and fp16 (a skipped step), and the export ----
rc, out, err, detail = run("""set threads=1
data d = digits n=400 seed=2
model g = seq in=1x28x28 conv(4,3,pad=1) relu maxpool(2) flatten layernorm linear(10) seed=4 device=guard
model c = seq in=1x28x28 conv(4,3,pad=1) relu maxpool(2) flatten layernorm linear(10) seed=4
train g on d epochs=1 batch=16 precision=bf16
train c on d epochs=1 batch=16 precision=bf16
save g %(g)s
save c %(c)s
model h = mlp 784-16-10 seed=2 device=guard
model k = mlp 784-16-10 seed=2
train h on d epochs=1 batch=16 precision=fp16 inject_inf=3
train k on d epochs=1 batch=16 precision=fp16 inject_inf=3
export g %(og)s
to g cpu
export g %(oc)s
""" % dict(g=P("cg.safetensors"), c=P("cc.safetensors"), og=P("g.onnx"), oc=P("c.onnx")))
check(rc == 0, "the CNN session ran without an error", detail)
fg, fc = figures(out, "g"), figures(out, "c")
check(fg and fg == fc and same_weights(P("cg.safetensors"), P("cc.safetensors")),
      "a CNN trained in bf16 on the guard equals the CPU's exactly: %s" % fg[:1], "%s\n%s" % (fg, fc))
fh, fk = figures(out, "h"), figures(out, "k")
check(fh and fh == fk and "skipped 1" in fh[0], "fp16 with an injected overflow skips the same step: %s" % fh[:1],
      "%s\n%s" % (fh, fk))
check(os.path.exists(P("g.onnx")) and open(P("g.onnx"), "rb").read() == open(P("c.onnx"), "rb").read(),
      "the ONNX file exported from the guard is byte for byte the one exported from the CPU")

# ---- a GPT: training, validation, sampling with and without the KV cache ----
rc, out, err, detail = run("""set threads=1
data t = text ctx=16
model g = gpt layers=1 heads=2 dim=16 ctx=16 device=guard
model c = gpt layers=1 heads=2 dim=16 ctx=16
train g on t steps=8
train c on t steps=8
generate g n=30 seed=3
generate c n=30 seed=3
generate g n=30 seed=3 cache=off
generate c n=30 seed=3 cache=off
""")
check(rc == 0, "the GPT session ran without an error", detail)
fg, fc = figures(out, "g"), figures(out, "c")
check(fg and fg == fc, "a GPT trained on the guard: the CPU's validation losses: %s" % fg[-1:], "%s\n%s" % (fg, fc))
gens = [b.split("\n")[0] for b in re.split(r"\n> generate [gc] n=30 seed=3[^\n]*\n", out)[1:]]
check(len(gens) == 4 and gens[0] == gens[1] and gens[2] == gens[3],
      "its samples equal the CPU's, with the KV cache and recomputing the context", detail)

# ---- refusals: what runs on the CPU only, a GPU that is not there, an unknown device ----
rc, out, err, detail = run("""data d = digits n=200
model g = mlp 784-8-10 device=guard
compile g -> %(p)s
train g on d epochs=1
train g on d mode=ddp ranks=2
train g on d mode=dp ranks=2
to g tpu
model p = plan %(p)s
ls
devices
""" % dict(p=P("x.plan")))
check(re.search(r"\bg +model +6370 parameters on guard ", out), "ls says where a model lives", detail)
check("compile: model g is on guard; plans are built from a model on the CPU" in err, "compile refuses a model on a device, saying why",
      detail)
check(err.count("lives on guard and mode=") == 2 and "`to g cpu` first" in err,
      "ddp and dp refuse it (their ranks and replicas train on the CPU)", detail)
check("g continues from" not in out, "a refused run says nothing about the run first (where its weights come from)",
      detail)
check("to: tpu; cpu, cuda, cuda:N (N from `devices`) or guard" in err and "g: guard" not in out, "an unknown device is refused", detail)
gpus = int(re.search(r"CUDA device count: (\d+)", out).group(1))
if gpus == 0:
    rc, out, err, detail = run("model m = mlp 4-3-2\nto m cuda\nmodel n = mlp 4-3-2 device=cuda:0\nshow m\nbackends\n"
                               "collective all_reduce ranks=2 backend=nccl\n")
    check(re.search(r"to: cuda refused: .*; m stays on cpu", err), "to m cuda without a GPU: refused, the model stays",
          detail)
    check("model: device=cuda:0 refused" in err and "no model n was made" in err, "device=cuda:0: refused", detail)
    check("10 classes, on cpu" not in out and "2 classes, on cpu" in out, "show: still on the CPU", detail)
    check("GPUs here: 0." in out and "Duplicate GPU detected" in out, "backends explains NCCL's one GPU per rank", detail)
    check("backend=nccl runs on GPUs, one per rank, and this machine has none" in err and "rank 0" not in out,
          "backend=nccl refused before any rank starts", detail)
else:
    print("note: %d GPU(s): the no-GPU refusals are checked where there is none (CI)" % gpus)

# ---- reset keeps the device and the session's threads; a model without parameters moves cleanly ----
p = subprocess.run([EXE, "--no-db", "--keep-going"], capture_output=True, text=True, timeout=120,
                   input="set threads=1\nmodel g = mlp 784-8-10 device=guard\nmodel c = mlp 784-8-10\n"
                         "reset g\nreset c\nshow g\nshow c\n"
                         "model z = seq in=4 relu device=guard\nto z cpu\nto z guard\nto z cpu\n"
                         "expect memory.params = 4\ndrop z\nset device=guard\nmodel o = onnx %s\n" % P("c.onnx"),
                   env=dict(os.environ, NO_COLOR="1", COLUMNS="200", OMP_NUM_THREADS="3"))
detail = "rc %d\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout[-4000:], p.stderr[-2000:])
check(p.returncode == 0, "the reset and zero-parameter session ran without an error", detail)
check(re.search(r"> show g\nmodel g: [^\n]*on guard", p.stdout), "reset g rebuilds the model on the guard", detail)
check("kernels: cpu, threads 1," in p.stdout, "reset c keeps the session's threads=1 (not the default 3)", detail)
check("ok: memory.params is 4" in p.stdout,
      "moving a model without parameters keeps its parameter pool at its one-float buffer", detail)
check("o is on the CPU, where imported graphs are made (the session's device is guard); `to o guard` moves it"
      in re.sub(r"\n  (?=\S)", " ", p.stdout), "an import under set device=guard says it stays on the CPU", detail)

check.finish("placement")
