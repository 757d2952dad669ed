#!/usr/bin/env python3
"""Tensor parallelism from the REPL (`ringside -c ...` with a session log): what a learner sees and
what the log keeps.

  matmul: `tp matmul` prints the lecture's partial products and result on each rank (A 2x4 = 0..7,
          B 4x2 = 8..15: columns [[76],[252]] || [[82],[274]], rows [[10,11],[82,91]] + [[66,71],
          [170,183]], Y = [[76,82],[252,274]]), on shm and tcp, 4 ranks on the inner dimension; the
          log holds each rank's all_gather and all_reduce; sizes the ranks cannot split are refused.
  train:  `train ... mode=tensor` through the worker and the registry: the MLP (tp=2, and dp=2 x tp=2
          for two epochs with evaluation after each, which once hung on the gather) and the GPT
          (tp=2, tcp) end with the weights one process reaches (||a-b||/||b|| <= 1e-5); the memory
          table prints Megatron's formula and each rank's measured parameters equal it; the log has
          the tensor-parallel all-reduces of every rank; bad layouts are refused before any rank runs.

  tutorial: `play tensor auto` plays tutorials/13-tensor.ring to the end with the numbers it promises.

usage: tensor_repl.py matmul|train|tutorial RINGSIDE"""
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

CASE, EXE = sys.argv[1], os.path.abspath(sys.argv[2])
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
    else:
        print("ok:", what)


def run(cmds, db=None, timeout=150):
    args = [EXE, "--keep-going"] + (["--db", db] if db else ["--no-db"]) + ["-c", cmds]
    # whole lines, as the checks read them (the REPL wraps at 80 columns when it knows no width)
    env = dict(os.environ, COLUMNS='1000')
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout + p.stderr


def load_weights(path):
    try:
        from safetensors.numpy import load_file
        import numpy as np
    except ImportError:
        print("SKIP: needs numpy and safetensors")
        sys.exit(77)
    t = load_file(path)
    return {k: t[k] for k in t}, np.concatenate([t[k].ravel().astype(np.float64) for k in sorted(t)])


def rel(a, b):
    import numpy as np
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def case_matmul(tmp):
    db = os.path.join(tmp, "log.db")
    rc, out = run("tp matmul ranks=2; tp matmul ranks=2 split=cols backend=tcp; "
                  "tp matmul ranks=4 split=rows k=8", db)
    print(out)
    check(rc == 0, "the three demos run")
    check("serially, Y = A . B = [[76, 82], [252, 274]]" in out, "the serial product of the lecture's A and B")
    for line in ("rank 0: columns: Y_0 = A . B[:, 0:1] = [[76], [252]] -> all_gather -> Y = [[76, 82], [252, 274]]",
                 "rank 1: columns: Y_1 = A . B[:, 1:2] = [[82], [274]] -> all_gather -> Y = [[76, 82], [252, 274]]",
                 "rank 0: rows: Y_0 = A[:, 0:2] . B[0:2, :] = [[10, 11], [82, 91]] -> all_reduce -> "
                 "Y = [[76, 82], [252, 274]]",
                 "rank 1: rows: Y_1 = A[:, 2:4] . B[2:4, :] = [[66, 71], [170, 183]] -> all_reduce -> "
                 "Y = [[76, 82], [252, 274]]"):
        check(line in out, "the lecture's partial product: " + line.split(" -> ")[0])
    check(out.count("-> Y = [[76, 82], [252, 274]]") == 6, "2 + 2 + 2 rank results of the 2x4 . 4x2 product")
    check(out.count("-> all_reduce -> Y = [[728, 756], [2200, 2292]]") == 4, "4 ranks add 2x8 . 8x2's partial sums")
    check(out.count("every rank's Y equals the serial A . B") == 3, "every run checked against the serial product")
    con = sqlite3.connect(db)
    runs = con.execute("SELECT id, backend, world_size, status FROM runs WHERE kind='matmul' ORDER BY id").fetchall()
    check([r[1:] for r in runs] == [("shm", 2, "done"), ("tcp", 2, "done"), ("shm", 4, "done")],
          "three matmul runs logged: %s" % runs)
    if len(runs) == 3:
        ops = con.execute("SELECT name, count(DISTINCT rank) FROM events WHERE run_id=? AND kind='coll_end' "
                          "GROUP BY name ORDER BY name", (runs[0][0],)).fetchall()
        check(ops == [("all_gather", 2), ("all_reduce", 2)], "each rank's all_gather and all_reduce in the log: %s" % ops)

    for cmd, want in (("tp matmul ranks=4", "4 ranks cannot split B's columns (n=2) evenly; use n=4"),
                      ("tp matmul ranks=3 split=rows", "3 ranks cannot split the inner dimension"),
                      ("tp matmul k=65", "k=65 is out of range"),
                      ("tp mlp", "'mlp' is not a demo")):
        rc, out = run(cmd)
        check(rc != 0 and want in out and "rank 0" not in out, "refused before any rank starts: %s" % cmd)


def case_train(tmp):
    db = os.path.join(tmp, "log.db")
    p = {x: os.path.join(tmp, x + ".safetensors") for x in ("m1", "t2", "m4", "dt", "g1", "g2")}
    gpt = "gpt layers=2 heads=4 dim=16 ctx=16"
    gopts = "steps=8 batch=8 opt=adamw lr=3e-3 clip=0.5 eval=off view=off"
    cmds = ["data d = digits n=1200", "data t = text ctx=16",
            "model m = mlp 784-64-32-10 seed=3", "model a = mlp 784-64-32-10 seed=3",
            "model e = mlp 784-64-32-10 seed=3", "model f = mlp 784-64-32-10 seed=3",
            "model g = %s seed=5" % gpt, "model h = %s seed=5" % gpt,
            "train m on d batch=32 steps=20 eval=off; save m %s" % p["m1"],
            "train a on d mode=tensor ranks=2 batch=32 steps=20 eval=off view=off; save a %s" % p["t2"],
            "train e on d batch=32 epochs=2; save e %s" % p["m4"],
            "train f on d mode=tensor ranks=4 tp=2 batch=32 epochs=2 view=off; save f %s" % p["dt"],
            "train g on t %s; save g %s" % (gopts, p["g1"]),
            "train h on t mode=tensor ranks=2 backend=tcp %s; save h %s" % (gopts, p["g2"])]
    rc, out = run("; ".join(cmds), db, timeout=170)
    print(out)
    check(rc == 0, "tensor parallel training runs from the REPL")
    if rc != 0:
        return
    for what, a, b in (("MLP tp=2", "t2", "m1"), ("MLP dp=2 x tp=2, 2 epochs with evaluation", "dt", "m4"),
                       ("GPT tp=2 on tcp", "g2", "g1")):
        ta, va = load_weights(p[a])
        tb, vb = load_weights(p[b])
        check(sorted(ta) == sorted(tb) and all(ta[k].shape == tb[k].shape for k in ta),
              "%s: the REPL's model is whole again (every tensor, full shape)" % what)
        d = rel(va, vb)
        check(d <= 1e-5, "%s equals one process (%.3g)" % (what, d))
    check("tensor: 4 ranks on shm, global batch 32 (16 per group of 2 ranks, 2 groups)" in out,
          "dp x tp: each data-parallel group reads its half of the batch")
    check(len(re.findall(r"epoch 2(/2)?: test accuracy 0\.7", out)) == 2 and
          len(set(re.findall(r"epoch 2(?:/2)?: test accuracy (0\.\d+)", out))) == 1,
          "rank 0 evaluates after each epoch: the same test accuracy as one process")
    check("inside forward and backward (the layers wait for it)" in out, "tensor's communication is never 'hidden'")
    # the memory table: measured parameters per rank beside 4(R + S/tp + b) (rank 0) and 4(R + S/tp)
    m = re.search(r"R=(\d+) replicated \+ S=(\d+) split \+ b=(\d+) row biases, tp=2", out)
    check(m is not None, "the memory table prints Megatron's formula")
    con = sqlite3.connect(db)
    runs = con.execute("SELECT id, mode, backend, world_size, status FROM runs WHERE kind='train' AND mode='tensor' "
                       "ORDER BY id").fetchall()
    check([r[1:] for r in runs] == [("tensor", "shm", 2, "done"), ("tensor", "shm", 4, "done"),
                                    ("tensor", "tcp", 2, "done")], "tensor runs logged: %s" % runs)
    if m and runs:
        R, S, b = (int(x) for x in m.groups())
        got = dict(con.execute("SELECT rank, bytes FROM events WHERE run_id=? AND kind='memory' AND name='params' "
                               "AND step=(SELECT max(step) FROM events WHERE run_id=? AND kind='memory')",
                               (runs[0][0], runs[0][0])).fetchall())
        # the first table is the MLP's at tp=2: 784x64 + 64 + 64x32 split, 32x10 + 10 replicated, 32 biases
        check((R, S, b) == (330, 784 * 64 + 64 + 64 * 32, 32), "the MLP's split as the formula counts it: %s" % ((R, S, b),))
        want = {0: 4 * (R + S // 2 + b), 1: 4 * (R + S // 2)}
        # each tensor starts 64-byte aligned: at most 60 bytes of padding per tensor (6 tensors on rank 0)
        check(all(want[r] <= got.get(r, -1) <= want[r] + 6 * 60 for r in (0, 1)),
              "MLP tp=2: each rank's measured parameters are its shard: %s vs %s" % (got, want))
        ars = dict(con.execute("SELECT rank, count(*) FROM events WHERE run_id=? AND kind='phase' AND name='comm' "
                               "AND json_extract(detail, '$.op') = 'all_reduce' AND chunk >= 0 GROUP BY rank",
                               (runs[2][0],)).fetchall())
        # GPT: 2 layers x 2 pairs, one all-reduce forward and one backward each, 8 steps
        check(ars == {0: 64, 1: 64}, "GPT: 8 tensor-parallel all-reduces per step on every rank in the log: %s" % ars)

    # a checkpoint of tp=2 resumed on dp=2 x tp=2 (whole-model files re-split), against one process resumed
    ck, ck1 = os.path.join(tmp, "ck.safetensors"), os.path.join(tmp, "ck1.safetensors")
    rc, out = run("data d = digits n=1200; model m = mlp 784-64-32-10 seed=2; model s = mlp 784-64-32-10 seed=2; "
                  "train m on d mode=tensor ranks=2 batch=32 steps=10 eval=off view=off ckpt=%s; "
                  "train m on d mode=tensor ranks=4 tp=2 batch=32 steps=20 eval=off view=off resume=%s; save m %s; "
                  "train s on d batch=32 steps=10 eval=off ckpt=%s; train s on d batch=32 steps=20 eval=off resume=%s; "
                  "save s %s" % (ck, ck, p["t2"], ck1, ck1, p["m1"]))
    check(rc == 0, "a tensor run's checkpoint resumes on another layout")
    if rc == 0:
        d = rel(load_weights(p["t2"])[1], load_weights(p["m1"])[1])
        check(d <= 1e-5, "tp=2 for 10 steps, then dp=2 x tp=2 to 20, equals one process resumed the same way (%.3g)" % d)

    for cmd, want in (("train m on d mode=tensor ranks=3 tp=2", "tp=2 does not divide ranks=3"),
                      ("model q = mlp 784-63-10; train q on d mode=tensor ranks=2", "63 outputs do not divide by 2"),
                      ("model c = seq conv(4,3) relu flatten linear(10); train c on d mode=tensor ranks=2",
                       "no pair of linear layers"),
                      ("train m on d mode=tensor ranks=4 tp=2 batch=31", "does not split over 2 data-parallel groups"),
                      ("train m on d mode=ddp tp=2", "tp= is an option of mode=pipeline or mode=tensor")):
        rc, out = run("data d = digits n=200; model m = mlp 784-64-10; " + cmd)
        check(rc != 0 and want in out and "rank 0:" not in out, "refused before any rank starts: %s" % cmd)


def case_tutorial(tmp):
    db = os.path.join(tmp, "log.db")
    rc, out = run("play tensor auto", db, timeout=170)
    print(out)
    check(rc == 0, "the tensor tutorial plays to the end")
    check("rank 1: rows: Y_1 = A[:, 2:4] . B[2:4, :] = [[66, 71], [170, 183]]" in out, "it shows the lecture's example")
    acc = re.findall(r"^trained (?:one|two|q) on d.*test accuracy (0\.\d+)", out, re.M)
    check(len(acc) == 3 and len(set(acc)) == 1, "one process, tensor on 2 ranks and dp x tp on 4 agree: %s" % acc)
    check(re.search(r"^\s+0\s+0\s+8\s+1048576$", out, re.M) is not None,
          "its sql shows rank 0's 8 all-reduces of 16 x 32 x 64 floats in step 0")


with tempfile.TemporaryDirectory() as tmp:
    globals()["case_" + CASE](tmp)
print("%d failed" % failures)
sys.exit(1 if failures else 0)
