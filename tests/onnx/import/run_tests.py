#!/usr/bin/env python3
"""Meson driver for the ONNX import test: writes the models and ONNX Runtime's outputs with
make_models.py, then runs the C checker (argv[1]) over them, and the REPL (argv[2], optional) on the file
that fixed its batch. Exits 77 (meson's "skipped") when numpy,
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

import re


def repl_fixed_batch(ringside, out):
    """The REPL on the file that fixed the batch at 4 (make_models.py's fixed_batch4) and the same 10 rows
    as a CSV data set: predict with fewer than 4 samples says the model takes 4 at a time; eval on both
    splits runs, says once that it padded, and its counts add up to ONNX Runtime's over all 10 rows
    (the split's shuffle is ringside's own, so only the totals are known here). Returns failures."""
    line = next(l.split() for l in open(os.path.join(out, "manifest.txt")) if l.startswith("eval fixed_batch4 "))
    n, correct, loss_sum = int(line[2]), int(line[4]), float(line[5])
    onnx_path, csv_path = os.path.join(out, "fixed_batch4.onnx"), os.path.join(out, "fixed_batch4.eval.csv")
    load = f"model m = onnx {onnx_path}; data d = csv {csv_path}; "
    fails = 0

    def run(cmds):
        env = dict(os.environ, COLUMNS="1000")  # one line per message, whatever the terminal
        r = subprocess.run([ringside, "--no-db", "--keep-going", "-c", load + cmds], capture_output=True, text=True,
                           timeout=120, env=env)
        return r.stdout + r.stderr

    text = run("predict m on d n=2 split=train")
    if "m takes 4 samples at a time (its file fixed the batch at 4), not 2; give n=4" not in text:
        print(f"FAIL repl: predict n=2 did not say the model takes 4 samples at a time:\n{text}")
        fails += 1
    # the test split has 2 rows: fewer than one group of 4, said as such (not "give n=4", which cannot be)
    text = run("predict m on d; predict m on d n=16 split=train")
    if ("m takes 4 samples at a time (its file fixed the batch at 4) but d's test split has 2" not in text
            or len(re.findall(r"(ok|NO) \d+ \(true \d+\)", text)) != 8):
        print(f"FAIL repl: predict on 2 test rows, and n=16 on 8 train rows:\n{text}")
        fails += 1
    text = run("predict m on d n=4 split=train")
    if len(re.findall(r"(ok|NO) \d+ \(true \d+\)", text)) != 4:
        print(f"FAIL repl: predict n=4 did not show 4 predictions:\n{text}")
        fails += 1
    text = run("eval m on d split=train; eval m on d")
    got = re.findall(r"m on d \(\S+, (\d+) samples\): accuracy ([0-9.]+), loss ([0-9.]+)", text)
    notes = re.findall(r"m takes 4 samples at a time \(its file fixed the batch at 4\)(: the last batch was padded with "
                       r"(\d) copies)?", text)
    if len(got) != 2 or len(notes) != 2:
        print(f"FAIL repl: eval on both splits:\n{text}")
        return fails + 1
    rows = sum(int(k) for k, _, _ in got)
    right = sum(int(k) * float(a) for k, a, _ in got)
    loss = sum(int(k) * float(l) for k, _, l in got)
    pads = [int(p or 0) for _, p in notes]
    want_pads = [-int(k) % 4 for k, _, _ in got]
    ok = rows == n and abs(right - correct) < 0.01 and abs(loss - loss_sum) < 1e-3 * n and pads == want_pads
    print(f"  repl eval of fixed_batch4: {rows} rows over both splits, {right:.2f} right (ORT {correct}), loss sum "
          f"{loss:.4f} (ORT {loss_sum:.4f}), padded {pads}{'' if ok else '  <- FAIL'}")
    return fails + (not ok)


def repl_plan(ringside, out):
    """eval and predict on a compiled plan (model p = plan FILE), which has no engine model behind it: both
    run and print their figures (they read the fixed batch of a model, and crashed on a plan's). Returns
    failures."""
    plan = os.path.join(out, "p.plan")
    cmds = (f"model c = mlp 36-16-5; data d = csv {os.path.join(out, 'fixed_batch4.eval.csv')}; compile c -> {plan}; "
            f"model p = plan {plan}; eval p on d split=train; predict p on d n=3 split=train")
    r = subprocess.run([ringside, "--no-db", "--keep-going", "-c", cmds], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, COLUMNS="1000"))
    text = r.stdout + r.stderr
    ok = (r.returncode == 0 and re.search(r"p on d \(\S+, 8 samples\): accuracy", text) is not None
          and len(re.findall(r"(ok|NO) \d+ \(true \d+\)", text)) == 3)
    print(f"  repl eval and predict on a plan: {'ok' if ok else 'FAIL'}")
    if not ok:
        print(f"FAIL repl: eval/predict on a plan (exit {r.returncode}):\n{text}")
    return 0 if ok else 1


def gpt_export(ringside, out):
    """A GPT that ringside exports (opset 17; and opset 14, and 20 with Gelu) goes into the manifest like
    make_models.py's files: its int64 token input is written as the int32 ids the engine's token models
    read (in the 4-byte elements of the .in.f32 file), ONNX Runtime's logits beside it, and run_import
    compares the importer's model with them (embedding, attention and GELU as the engine's layers). A
    copy whose attention scale is halved does not match the exporter's attention: it imports as generic
    ops, also compared with ONNX Runtime, and `compile` refuses it naming a node it has no kernel for.
    Returns failures."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    T, V = 8, 11
    cmds = f"model g = gpt layers=2 heads=2 dim=16 ctx={T} vocab={V} seed=3; "
    for opset in (14, 17, 20):
        cmds += f"export g {os.path.join(out, f'gpt_export{opset}.onnx')} opset={opset}; "
    r = subprocess.run([ringside, "--no-db", "-c", cmds], capture_output=True, text=True, timeout=120)
    if r.returncode:
        print(f"FAIL gpt export:\n{r.stdout}{r.stderr}")
        return 1
    m = onnx.load(os.path.join(out, "gpt_export17.onnx"))
    for t in m.graph.initializer:
        if t.name.endswith("/scale"):
            t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t) * np.float32(0.5), t.name))
    onnx.save(m, os.path.join(out, "gpt_scaled.onnx"))
    rng = np.random.default_rng(5)
    lines = []
    for name in ("gpt_export14", "gpt_export17", "gpt_export20", "gpt_scaled"):
        sess = ort.InferenceSession(os.path.join(out, f"{name}.onnx"), providers=["CPUExecutionProvider"])
        for b in (1, 7):
            ids = rng.integers(0, V, size=(b, T), dtype=np.int64)
            y = sess.run(None, {"tokens": ids})[0].astype(np.float32)
            ids.astype(np.int32).tofile(os.path.join(out, f"{name}.b{b}.in.f32"))
            y.tofile(os.path.join(out, f"{name}.b{b}.out.f32"))
        lines.append(f"good {name} {T} {T * V} 1e-5 0")
    with open(os.path.join(out, "manifest.txt"), "a") as f:
        f.write("\n".join(lines) + "\n")
    plan = os.path.join(out, "g.plan")
    r = subprocess.run([ringside, "--no-db", "--keep-going", "-c",
                        f"compile {os.path.join(out, 'gpt_export17.onnx')} -> {plan}; "
                        f"compile {os.path.join(out, 'gpt_scaled.onnx')} -> {plan}"],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="1000"))
    text = r.stdout + r.stderr
    # the altered attention is no attn node: its Slices, Transposes, MatMuls and Softmax run as the
    # engine's op kernels inside the plan (run_plan.c checks such plans' numbers against ORT)
    exported, _, scaled = text.partition("gpt_scaled.onnx ->")
    ok = (r.returncode == 0 and re.search(r"attn T=8 C=16 heads=2", exported) is not None
          and "attn" not in scaled and len(re.findall(r"\bmatmul\s+fp32", scaled)) == 4
          and len(re.findall(r"\bsoftmax\s+fp32", scaled)) == 2)
    print(f"  compile of the exported GPT (attention nodes) and of its altered copy (generic ops): {'ok' if ok else 'FAIL'}")
    if not ok:
        print(f"FAIL repl: compile of gpt_export17.onnx / gpt_scaled.onnx:\n{text}")
    return 0 if ok else 1


here = os.path.dirname(os.path.abspath(__file__))
with tempfile.TemporaryDirectory(prefix="rs-onnx-import-") as out:
    r = subprocess.run([sys.executable, os.path.join(here, "make_models.py"), out])
    if r.returncode:
        print("make_models.py failed")
        sys.exit(1)
    pre = gpt_export(sys.argv[2], out) if len(sys.argv) > 2 else 0
    rc = subprocess.run([sys.argv[1], out]).returncode + pre
    if len(sys.argv) > 2:
        rc += repl_fixed_batch(sys.argv[2], out)
        rc += repl_plan(sys.argv[2], out)
    sys.exit(min(rc, 1) if rc else 0)
