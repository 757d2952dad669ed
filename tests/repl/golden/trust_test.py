#!/usr/bin/env python3
"""Runs a user can trust (issue 28), driven through `ringside -c` as a user types them and checked on
what they print, the weights they save (read back with the safetensors package) and the session log:

  lm-eval     `eval=off` turns a language model's evaluations off (one process and across ranks);
              with eval on, across ranks they print as one process prints them ("val loss", tok/s),
              never "test accuracy"; the "train loss" beside "val loss" is the training loss now, within
              0.03 of `eval ... split=train` on the whole training split (a mean since step 0 trails
              the model by far more).
  steps       `steps=` under one epoch still ends with the test accuracy and an epoch line that says
              how far the epoch got.
  uneven      2000 samples over 3 ranks at batch 60: the run says the sampler pads; with drop_last=on
              the weights equal one process's with drop_last=on over two epochs (1e-5), and without it
              they differ.
  betas       betas=0.9,0.999 gives the default's weights bit for bit, betas=0.9,0.99 others, and
              across ranks the same as one process (1e-5): the option reaches the ranks.
  ranks-stop  Ctrl-C (SIGINT) during a run across ranks: "cancelled: stopped after step N", no
              "error:", the run logged 'cancelled' with N steps.

usage: trust_test.py CASE RINGSIDE"""
import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

CASE, EXE = sys.argv[1], os.path.abspath(sys.argv[2])
failures = 0


def check(cond, what):
    global failures
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures += 1


def run(cmds, db=None, timeout=180):
    args = [EXE, "--keep-going"] + (["--db", db] if db else ["--no-db"]) + ["-c", cmds]
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, COLUMNS="1000"))
    return p.returncode, p.stdout + p.stderr


def small_text(tmp):
    """About 20 KB of words: a training split small enough to evaluate whole in a second."""
    words = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches "
             "and every ring has its side").split()
    out, x = [], 7
    for i in range(3600):
        x = (x * 1103515245 + 12345) % 2**31
        out.append(words[(x >> 8) % len(words)])
        if i % 11 == 10:
            out.append("\n")
    path = os.path.join(tmp, "small.txt")
    with open(path, "w") as f:
        f.write(" ".join(out))
    return path


def weights(path):
    from safetensors.numpy import load_file
    return load_file(path)


def max_diff(a, b):
    return max(float(abs(a[k].astype("float64") - b[k].astype("float64")).max()) for k in a)


def case_lm_eval(tmp):
    text = small_text(tmp)
    head = "set threads=1; data t = text %s ctx=16; model g = gpt layers=1 heads=2 dim=16 ctx=16 vocab=26 seed=2" % text
    rc, out = run(head)
    m = re.search(r"(\d+) distinct", out)
    vocab = m.group(1) if m else "26"
    head = head.replace("vocab=26", "vocab=" + vocab)
    rc, out = run(head + "; train g on t steps=20 eval=off; train g on t steps=20 eval=off mode=ddp ranks=2 view=off")
    print(out)
    check(rc == 0, "eval=off runs succeed")
    check("val loss" not in out and "validation loss" not in out,
          "eval=off: no validation loss in one process nor across ranks")
    rc, out = run(head + "; train g on t steps=40 lr=3e-3; eval g on t split=train; "
                  "train g on t steps=8 mode=ddp ranks=2 view=off")
    print(out)
    check(rc == 0, "evaluated runs succeed")
    single, ranks = out.split("mode=ddp")[0], out.split("mode=ddp")[-1]
    check(len(re.findall(r"^step \d+/40: val loss", single, re.M)) == 4, "one process: 4 evaluations (steps/4)")
    lines = re.findall(r"^ +step (\d+)/8: val loss (\d\.\d+)  train loss (\d\.\d+)  (\d+) tok/s", ranks, re.M)
    check(len(lines) == 4, "across ranks: 4 evaluations printed as language-model lines")
    check("test accuracy" not in ranks and "tokens/s in all" in ranks and "validation loss" in ranks,
          "across ranks: no 'test accuracy', the summary in tokens/s with the validation loss")
    last = re.findall(r"^step 40/40: val loss (\d\.\d+)  train loss (\d\.\d+)", single, re.M)
    whole = re.search(r"\(\S+-train, \d+ samples\): accuracy \d\.\d+, loss (\d\.\d+)", out)
    first = re.search(r"^step 10/40: val loss \d\.\d+  train loss (\d\.\d+)", single, re.M)
    if last and whole and first:
        tl, ref = float(last[0][1]), float(whole.group(1))
        check(abs(tl - ref) < 0.03,
              "the last train loss %.4f is the model's training loss now (whole training split: %.4f)" % (tl, ref))
        check(float(first.group(1)) - ref > 0.1, "and the first one was higher (%.4f): the model moved on" %
              float(first.group(1)))
    else:
        check(False, "the evaluation lines and eval's figures are there")


def case_steps(tmp):
    rc, out = run("set threads=1; data d = digits n=2000; model m = mlp 784-32-10; train m on d steps=10")
    print(out)
    check(rc == 0, "train steps=10 succeeds")
    check(re.search(r"^epoch 1/1: 10 of 32 steps, loss", out, re.M) is not None, "the epoch line says how far it got")
    check(re.search(r"^epoch 1/1: test accuracy 0\.\d+, test loss", out, re.M) is not None and
          re.search(r"trained m on d: 10 steps .*, test accuracy 0\.\d+", out) is not None,
          "steps= under one epoch with eval on: the test accuracy is printed")


def case_uneven(tmp):
    a, b, c = (os.path.join(tmp, x + ".safetensors") for x in "abc")
    rc, out = run("set threads=1; data d = digits n=2000; model a = mlp 784-32-10 seed=3; model b = mlp 784-32-10 seed=3; "
                  "model c = mlp 784-32-10 seed=3; "
                  "train a on d mode=ddp ranks=3 batch=60 epochs=2 drop_last=on eval=off view=off; "
                  "train b on d batch=60 epochs=2 drop_last=on eval=off; "
                  "train c on d mode=ddp ranks=3 batch=60 epochs=2 eval=off view=off; "
                  "save a %s; save b %s; save c %s" % (a, b, c))
    print(out)
    check(rc == 0, "the runs succeed")
    check(re.search(r"2000 samples do not split evenly over 3 ranks: each reads 667 an epoch, 1 of them twice", out)
          is not None, "without drop_last the run says the sampler pads")
    check("drop_last=on: each epoch leaves out its last 20 of 2000 samples" in out, "with drop_last=on it says what it drops")
    check(re.search(r"trained a on d with ddp on 3 ranks: 66 steps", out) is not None and
          re.search(r"trained b on d: 66 steps", out) is not None, "drop_last: 33 full steps an epoch in both")
    wa, wb, wc = weights(a), weights(b), weights(c)
    d_ab, d_cb = max_diff(wa, wb), max_diff(wc, wb)
    check(d_ab < 1e-5, "ddp with drop_last=on equals one process with drop_last=on (max diff %.2e)" % d_ab)
    check(d_cb > 1e-4, "the padded run departs from one process (max diff %.2e), which is why it is said" % d_cb)


def case_betas(tmp):
    p = {k: os.path.join(tmp, k + ".safetensors") for k in ("dflt", "same", "b99", "r99")}
    mk = "model %s = seq flatten linear(10) seed=4; "
    tr = "train %s on d batch=50 epochs=2 opt=adam lr=0.01 eval=off %s; "
    rc, out = run("set threads=1; data d = digits n=1000; " + "".join(mk % k for k in p) +
                  tr % ("dflt", "") + tr % ("same", "betas=0.9,0.999") + tr % ("b99", "betas=0.9,0.99") +
                  tr % ("r99", "betas=0.9,0.99 mode=ddp ranks=2 view=off") +
                  "".join("save %s %s; " % (k, v) for k, v in p.items()) +
                  "train b99 on d opt=sgd betas=0.9,0.99; train b99 on d betas=0.9")
    print(out)
    w = {k: weights(v) for k, v in p.items()}
    check(max_diff(w["dflt"], w["same"]) == 0, "betas=0.9,0.999 is torch's default: the same bits")
    check(max_diff(w["dflt"], w["b99"]) > 1e-4, "betas=0.9,0.99 trains other weights")
    d = max_diff(w["b99"], w["r99"])
    check(d < 1e-5, "across ranks betas=0.9,0.99 gives one process's weights (max diff %.2e)" % d)
    check("betas= are Adam's and AdamW's moments; this run is opt=sgd" in out and
          "betas= takes two rates in [0, 1) with a comma" in out, "betas= refused for sgd and when malformed")


def case_ranks_stop(tmp):
    db = os.path.join(tmp, "s.db")
    p = subprocess.Popen([EXE, "--db", db, "--keep-going"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, bufsize=1, env=dict(os.environ, COLUMNS="1000"))
    p.stdin.write("data d = digits n=3000 seed=1\nmodel m = mlp 784-64-10 seed=1\n"
                  "train m on d mode=ddp ranks=2 epochs=500 batch=32 view=off\n")
    p.stdin.flush()
    out, t0 = "", time.time()
    while time.time() - t0 < 60 and "epoch 2:" not in out:
        if select.select([p.stdout], [], [], 0.2)[0]:
            line = p.stdout.readline()
            if not line:
                break
            out += line
    p.send_signal(signal.SIGINT)
    try:
        p.stdin.write("ls\n")
        p.stdin.close()
    except BrokenPipeError:
        pass
    out += p.stdout.read()
    p.wait(timeout=90)
    print(out)
    m = re.search(r"^cancelled: stopped after step (\d+) \(Ctrl-C\); m keeps the weights of step \1", out, re.M)
    check(m is not None, "Ctrl-C across ranks: 'cancelled: stopped after step N', as one process says it")
    check("error:" not in out, "and no 'error:'")
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    runs = con.execute("SELECT kind, status, steps FROM runs WHERE kind = 'train'").fetchall()
    con.close()
    check(m is not None and runs == [("train", "cancelled", int(m.group(1)))],
          "the run is logged 'cancelled' with the steps done: %s" % runs)


if __name__ == "__main__":
    fn = globals().get("case_" + CASE.replace("-", "_"))
    if not fn:
        print("unknown case", CASE)
        sys.exit(2)
    with tempfile.TemporaryDirectory(prefix="rs-trust-") as tmp:
        fn(tmp)
    print("%s: %d failed" % (CASE, failures))
    sys.exit(1 if failures else 0)
