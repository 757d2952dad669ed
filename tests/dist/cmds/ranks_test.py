#!/usr/bin/env python3
"""The rank-starting commands driven from outside: `ringside -c ...` with a session log, checked on
what a learner sees (each rank's input and result, the lecture's examples, nccl-tests' columns) and
on what lands in the log (every ring step, with its peer). Also the worker mode started by hand
with the torchrun variables and by `mpirun -np 4`.

usage: ranks_test.py CASE RINGSIDE"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

CASE, EXE = sys.argv[1], os.path.abspath(sys.argv[2])
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
    else:
        print("ok:", what)


def run(cmds, db=None, env=None, timeout=120):
    """Runs ringside -c; returns (exit code, stdout followed by stderr)."""
    args = [EXE, "--keep-going"] + (["--db", db] if db else ["--no-db"]) + ["-c", cmds]
    # these checks read whole lines: a width no line reaches (80 columns is tests/repl/width's business)
    e = dict(os.environ, COLUMNS="1000")
    e.update(env or {})
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=e)
    return p.returncode, p.stdout + p.stderr


def case_collective(tmp):
    db = os.path.join(tmp, "log.db")
    rc, out = run("collective scatter ranks=2; collective reduce ranks=2 op=product; "
                  "collective all_reduce ranks=4 algo=ring count=8; collective all_to_all ranks=2; "
                  "collective all_gather ranks=3 dtype=i64; collective reduce_scatter ranks=3 op=max count=1", db)
    print(out)
    check(rc == 0, "all collectives succeed")
    check("rank 0: in [0, 1, 2, 3] -> out [0, 1]" in out and "rank 1: in - -> out [2, 3]" in out,
          "scatter of [0,1],[2,3] (the lecture's example)")
    check("rank 0: in [1, 10] -> out [2, 110]" in out, "reduce with PRODUCT of [1,10] and [2,11] gives [2,110] on rank 0")
    check("rank 1: in [2, 11] -> out [2, 11]" in out, "reduce leaves a non-root's buffer alone")
    want = "[10, 46, 82, 118, 154, 190, 226, 262]"
    check(all("rank %d: in" % r in out for r in range(4)) and out.count("-> out " + want) == 4,
          "ring all_reduce: every rank holds the sum")
    check("rank 0: in [0, 1, 2, 3] -> out [0, 1, 4, 5]" in out and "rank 1: in [4, 5, 6, 7] -> out [2, 3, 6, 7]" in out,
          "all_to_all as torch's docs show it")
    check("rank 2: in [3, 12] -> out [1, 10, 2, 11, 3, 12]" in out, "all_gather of i64")
    check("ring in 6 steps" in out, "4-rank ring all_reduce takes 2(n-1) = 6 steps")
    check(out.count("every rank's result equals the serial computation") == 6, "each run checked against serial")
    # rank lines come out in rank order
    ranks = [int(m) for m in re.findall(r"^  rank (\d+): in", out, re.M)]
    check(ranks == [0, 1, 0, 1, 0, 1, 2, 3, 0, 1, 0, 1, 2, 0, 1, 2], "rank lines in rank order per run: %s" % ranks)

    con = sqlite3.connect(db)
    runs = con.execute("SELECT id, kind, backend, world_size, status FROM runs ORDER BY id").fetchall()
    check([r[1] for r in runs] == ["collective"] * 6 and all(r[4] == "done" for r in runs), "six collective runs done")
    ring = runs[2][0]
    check(runs[2][2] == "shm" and runs[2][3] == 4, "the ring run logged backend shm, world 4")
    steps = con.execute("SELECT rank, astep, peer, chunk, bytes, algo, name FROM events "
                        "WHERE run_id=? AND kind='coll_step' ORDER BY rank, astep", (ring,)).fetchall()
    check(len(steps) == 24, "4 ranks x 6 ring steps in the log (got %d)" % len(steps))
    check(all(p == (r + 1) % 4 and a == "ring" and n == "all_reduce" and b == 8 for r, s, p, c, b, a, n in steps),
          "every step sends 2 floats to the next rank")
    # step s of rank r sends chunk (r - s) mod 4 in the reduce-scatter half
    check(all(c == (r - s) % 4 for r, s, p, c, b, a, n in steps if s < 3), "reduce-scatter chunks rotate round the ring")
    be = con.execute("SELECT count(*) FROM events WHERE run_id=? AND kind IN ('coll_begin','coll_end')", (ring,)).fetchone()
    check(be[0] == 8, "one begin and one end per rank")
    dur = con.execute("SELECT min(value) FROM events WHERE run_id=? AND kind='coll_end'", (ring,)).fetchone()[0]
    check(dur is not None and dur > 0, "coll_end carries the duration")


def case_bench(tmp):
    db = os.path.join(tmp, "log.db")
    rc, out = run("bench all_reduce ranks=2 sizes=8..64K; bench all_gather ranks=3 sizes=1K..4K dtype=f64", db)
    print(out)
    check(rc == 0, "bench runs")
    rows = [l.split() for l in out.splitlines() if re.match(r"^\s+\d+\s+\d+\s+f(32|64)\s", l)]
    ar = [r for r in rows if r[2] == "f32"]
    ag = [r for r in rows if r[2] == "f64"]
    check([int(r[0]) for r in ar] == [8 << k for k in range(14)], "all_reduce sizes 8 B .. 64 KiB, doubling")
    check(all(int(r[1]) * 4 == int(r[0]) for r in ar), "count = size / 4 for f32")
    check(all(r[7] == "0" for r in rows), "#wrong is 0 everywhere")
    # busbw = algbw x 2(n-1)/n = algbw for 2 ranks; algbw = size / time
    check(all(abs(float(r[6]) - float(r[5])) <= 0.011 for r in ar), "all_reduce busbw = algbw x 1 for 2 ranks")
    # time is printed to 0.01 us: algbw must lie between bytes/(time+0.005) and bytes/(time-0.005)
    # (both printed to two decimals: allow their rounding and 1% more)
    check(all(int(r[0]) / (float(r[4]) + 0.005) / 1e3 * 0.99 - 0.01 <= float(r[5]) <=
              int(r[0]) / max(float(r[4]) - 0.005, 1e-9) / 1e3 * 1.01 + 0.01 for r in ar), "algbw = bytes / time")
    # all_gather of 3 ranks: size rounds down to a multiple of 3 elements; busbw = algbw x 2/3
    check(len(ag) == 3 and all(int(r[1]) % 3 == 0 for r in ag), "all_gather counts divisible by the world size")
    check(all(abs(float(r[6]) - float(r[5]) * 2 / 3) <= 0.011 for r in ag), "all_gather busbw = algbw x (n-1)/n")
    check("# Avg bus bandwidth" in out and "Out of bounds values : 0 OK" in out, "nccl-tests' footer")
    con = sqlite3.connect(db)
    n = con.execute("SELECT count(*) FROM metrics m JOIN runs r ON r.id=m.run_id "
                    "WHERE r.kind='bench' AND m.name='busbw'").fetchone()[0]
    check(n == 17, "one busbw metric per row in the log (%d)" % n)


def case_p2p(tmp):
    rc, out = run("p2p ranks=2 size=256K")
    print(out)
    check(rc == 0, "p2p runs")
    check("rank 1: recv: has data [1, 1, 1, 1]" in out and "rank 1: irecv + wait: has data [1, 1, 1, 1]" in out,
          "the lecture's send/recv and isend/irecv examples: rank 1 ends with rank 0's ones")
    for what in ("blocking send/recv ping-pong", "isend+irecv both ways", "isend, compute calling test()"):
        check(what in out, "p2p reports " + what)


def case_errors(tmp):
    db = os.path.join(tmp, "log.db")
    rc, out = run("collective allreduse ranks=2; collective all_reduce ranks=0; collective all_reduce backend=gloo; "
                  "collective send; collective all_reduce ranks=2 root=5; collective all_reduce backend=mpi algo=ring; "
                  "bench all_reduce sizes=64M..8; collective all_reduce ranks=2", db)
    print(out)
    check(rc == 1, "errors make the script fail (exit 1)")
    check("did you mean 'all_reduce'" in out, "a misspelt operation gets a near miss")
    check("ranks must be 1..64" in out, "ranks=0 refused with the range")
    check("gloo" in out and "shm" in out, "unknown backend refused, listing the choices")
    check("try `p2p`" in out, "send is pointed to p2p")
    check("root 5 is not a rank (0..1)" in out, "root out of range")
    check("chooses its own algorithms" in out, "algo= refused for mpi")
    check("sizes" in out, "a reversed size range refused")
    check("every rank's result equals the serial computation" in out, "the session goes on after the errors")
    con = sqlite3.connect(db)
    st = [r[0] for r in con.execute("SELECT status FROM commands ORDER BY id")]
    check(st.count("error") == 7 and st[-1] == "ok", "the log has 7 failed commands then an ok one: %s" % st)


def case_tutorial(tmp):
    db = os.path.join(tmp, "log.db")
    rc, out = run("play collectives auto", db, timeout=300)
    print(out)
    check(rc == 0, "the collectives tutorial plays to the end")
    check("rank 0: in [1, 10] -> out [2, 110]" in out and "Avg bus bandwidth" in out and "isend" in out,
          "it shows the lecture's examples, a bench table and p2p")
    check(re.search(r"^\s+0\s+0\s+0\s+1\s+8$", out, re.M) is not None,
          "its sql shows rank 0's first ring step sending chunk 0 to rank 1")


def case_tutorial_pipeline(tmp):
    db = os.path.join(tmp, "log.db")
    rc, out = run("play pipeline auto", db, timeout=300)
    print(out)
    check(rc == 0, "the pipeline tutorial plays to the end")
    bubbles = re.findall(r"bubble: ([0-9.]+)% of each step idle.*\n +formula \S+ = ([0-9.]+)%", out)
    check([f for _, f in bubbles] == ["50.0", "20.0", "11.1", "11.1", "20.0"], "naive, gpipe m=4 and m=8, 1f1b and "
          "2x2x2 (m=4), each measured beside its formula: %s" % bubbles)
    check("dp=2 x pp=2 x tp=2 = 8 ranks: rank = 4 x stage + 2 x replica + shard" in out,
          "the combined run prints its layout")
    check(re.search(r"^  0 +0:.*\(8 micro\) +8 micro$", out, re.M) and re.search(r"^  0 +0:.*\(2 micro\) +2 micro$", out, re.M),
          "gpipe holds 8 micro-batches' activations on stage 0, 1f1b 2")
    check(re.search(r"^ +1 +backward +48 ", out, re.M) is not None, "its sql counts rank 1's 48 backwards (6 steps x 8)")


def load_weights(path):
    from safetensors.numpy import load_file
    import numpy as np
    t = load_file(path)
    return np.concatenate([t[k].ravel().astype(np.float64) for k in sorted(t)])


def rel(a, b):
    import numpy as np
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def case_train(tmp):
    db = os.path.join(tmp, "log.db")
    a, b, c = (os.path.join(tmp, x + ".safetensors") for x in "abc")
    rc, out = run("model m = mlp 784-32-10 seed=1; model r = mlp 784-32-10 seed=1; model q = mlp 784-32-10 seed=1; "
                  "data d = digits n=2400; "
                  "train m on d mode=ddp ranks=2 batch=32 bucket=8K; save m %s; "
                  "train r on d batch=32; save r %s; "
                  "train q on d mode=ddp ranks=3 backend=tcp batch=30 steps=10 accum=2 eval=off; save q %s; "
                  "runs" % (a, b, c), db)
    print(out)
    check(rc == 0, "ddp training runs from the REPL")
    d = rel(load_weights(a), load_weights(b))
    check(d <= 1e-5, "the REPL's model holds the ranks' trained weights, equal to one process (%.3g)" % d)
    check("memory per rank after the last step" in out and "ZeRO paper" in out, "memory by pool beside the formula")
    check(re.search(r"communication: [0-9.]+ s per rank, \d+% of it hidden behind backward", out) is not None,
          "communication time and the part hidden behind backward")
    check(re.search(r"test accuracy 0\.\d+", out) is not None, "rank 0 evaluates")
    con = sqlite3.connect(db)
    runs = con.execute("SELECT id, mode, backend, world_size, status FROM runs WHERE kind='train' ORDER BY id").fetchall()
    check([r[1:] for r in runs] == [("ddp", "shm", 2, "done"), ("single", "cpu", 1, "done"), ("ddp", "tcp", 3, "done")],
          "runs logged with mode, backend, world: %s" % runs)
    ddp = runs[0][0]
    ph = dict(con.execute("SELECT name, count(DISTINCT rank) FROM events WHERE run_id=? AND kind='phase' GROUP BY name",
                          (ddp,)).fetchall())
    check(all(ph.get(p) == 2 for p in ("forward", "backward", "comm", "optimizer")),
          "every rank's phases and communication in the log: %s" % ph)
    mem = con.execute("SELECT count(*) FROM events WHERE run_id=? AND kind='memory' AND name='optimizer' AND bytes > 0",
                      (ddp,)).fetchone()[0]
    check(mem == 150, "memory by pool after each of 75 steps on 2 ranks (%d optimizer rows)" % mem)
    loss = con.execute("SELECT count(DISTINCT rank) FROM metrics WHERE run_id=? AND name='loss'", (ddp,)).fetchone()[0]
    check(loss == 2, "each rank's loss in the metrics")


def case_train_fsdp(tmp):
    db = os.path.join(tmp, "log.db")
    a, b, c = (os.path.join(tmp, x + ".safetensors") for x in "abc")
    rc, out = run("model m = mlp 784-64-32-10 seed=2; model r = mlp 784-64-32-10 seed=2; model q = mlp 784-64-32-10 seed=2; "
                  "data d = digits n=1200; "
                  "train m on d mode=fsdp ranks=4 zero=3 batch=32; save m %s; "
                  "train r on d batch=32; save r %s; "
                  "train q on d mode=fsdp ranks=2 zero=2 offload=cpu batch=32 eval=off; save q %s; "
                  "train q on d mode=dp ranks=2 batch=32 steps=5 eval=off" % (a, b, c), db)
    print(out)
    check(rc == 0, "fsdp, offload and dp training run from the REPL")
    d = rel(load_weights(a), load_weights(b))
    check(d <= 1e-5, "fsdp zero=3 on 4 ranks ends with one process's weights (%.3g)" % d)
    d = rel(load_weights(c), load_weights(b))
    check(d <= 1e-5, "fsdp zero=2 with offload on 2 ranks too (%.3g)" % d)
    # the ZeRO-3 table: each rank's parameters are a quarter of the model's (plus alignment padding)
    tab = out[out.index("memory per rank"):]
    rows = re.findall(r"^  (\d)\s+([0-9.]+) (KiB|MiB|B)", tab, re.M)[:4]
    params = 4 * (784 * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10)
    kib = [float(v) * (1024 if u == "MiB" else 1 if u == "KiB" else 1 / 1024) for _, v, u in rows]
    check(len(kib) == 4 and all(abs(k * 1024 - params / 4) <= 0.02 * params / 4 + 256 for k in kib),
          "zero=3: each of 4 ranks holds a quarter of the parameters: %s KiB of %.1f" % (kib, params / 1024))
    check("offload (host)" in out, "offload shows the host pool")
    check("dp step time by phase: replicate" in out, "dp shows where its time goes")
    con = sqlite3.connect(db)
    modes = [r[0] for r in con.execute("SELECT mode FROM runs WHERE kind='train' ORDER BY id")]
    check(modes == ["fsdp", "single", "fsdp", "dp"], "modes in the log: %s" % modes)


def case_train_fault(tmp):
    db = os.path.join(tmp, "log.db")
    ck = os.path.join(tmp, "c.safetensors")
    t0 = time.time()
    rc, out = run("model m = mlp 784-32-10; data d = digits n=3000; "
                  "train m on d mode=ddp ranks=2 batch=32 ckpt=%s ckpt_every=20; "
                  "train m on d mode=ddp ranks=4 batch=32 resume=%s; runs" % (ck, ck), db,
                  env={"RINGSIDE_TEST_KILL": "1:30"})
    print(out)
    check("rank 1 was killed by signal 9 (SIGKILL)" in out, "the killed rank is named with its signal")
    check("resume=" + ck in out, "the user is pointed at the last checkpoint")
    check(time.time() - t0 < 60, "everything ended within the bound")
    con = sqlite3.connect(db)
    st = [r[0] for r in con.execute("SELECT status FROM runs WHERE kind='train' ORDER BY id")]
    check(st[:1] == ["failed"], "the killed run is marked failed: %s" % st)


def case_train_refuse(tmp):
    """The worker reads a mode's options against the registry's declaration: an unknown mode, a mode that
    runs in the REPL's process, an option of another mode, a value out of range are refused (exit 2,
    before joining any group), never run as DDP."""
    base = [EXE, "--worker", "train", "spec=mlp 784-16-10", "data=digits:200"]
    for args, want in ((["mode=pipelin"], "unknown mode 'pipelin'"),
                       ([], "needs mode="),
                       (["mode=dp"], "the REPL runs mode 'dp'"),
                       (["mode=ddp", "zero=2"], "zero= is an option of mode=fsdp or mode=pipeline; this run is mode=ddp"),
                       (["mode=ddp", "epochz=2"], "mode=ddp has no option 'epochz'"),
                       (["mode=fsdp", "zero=7"], "zero must be 1..3"),
                       (["mode=fsdp", "wrap=unit"], "expected one of top, layer, model"),
                       (["mode=ddp", "mode=fsdp"], "mode= is given twice")):
        p = subprocess.run(base + args, capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="1"))
        check(p.returncode == 2 and want in p.stderr,
              "worker refuses %s: exit %d, %s" % (" ".join(args) or "no mode", p.returncode, p.stderr.strip()))
    # a dp x pp x tp layout that 4 ranks cannot make, before any rank joins (the REPL refuses it too)
    for args, want in ((["mode=pipeline", "dp=3"], "ranks=4 does not split into stages of dp=3 x tp=1 = 3 ranks"),
                       (["mode=pipeline", "dp=2", "pp=3"], "dp=2 x pp=3 x tp=1 = 6 ranks, but this run has ranks=4"),
                       (["mode=pipeline", "dp=2", "tp=2"], "leaves pp=1"),
                       (["mode=pipeline", "zero=1"], "dp=1 has no other replica")):
        p = subprocess.run(base + args, capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, RANK="0", WORLD_SIZE="4", MASTER_ADDR="127.0.0.1", MASTER_PORT="1"))
        check(p.returncode == 2 and want in p.stderr,
              "worker refuses %s on 4 ranks: exit %d, %s" % (" ".join(args), p.returncode, p.stderr.strip()))


def case_train_pipeline(tmp):
    """mode=pipeline from the REPL: the MLP and the GPT (its head tied to the embedding on another stage)
    end with one process's weights; the run's end prints the bubble beside its formula and each stage's
    activations in flight; the session log has every micro-batch's forward and backward per stage."""
    db = os.path.join(tmp, "log.db")
    a, b, g1, g2, c = (os.path.join(tmp, x + ".safetensors") for x in ("a", "b", "g1", "g2", "c"))
    dump = os.path.join(tmp, "frame.txt")
    gpt = "gpt layers=2 heads=2 dim=16 ctx=16"
    gopts = "steps=5 batch=8 opt=adamw lr=3e-3 clip=0.5 eval=off view=off"
    rc, out = run("model m = mlp 784-32-16-10 seed=1; model r = mlp 784-32-16-10 seed=1; data d = digits n=1200; "
                  "train m on d mode=pipeline ranks=2 micro=4 schedule=gpipe batch=32 steps=12 view=off; save m %s; "
                  "train r on d batch=32 steps=12; save r %s; "
                  "data t = text ctx=16; model g = %s seed=5; model h = %s seed=5; "
                  "train g on t mode=pipeline ranks=3 micro=4 backend=tcp %s; save g %s; train h on t %s; save h %s; "
                  "sql \"select rank, name, count(*) from events where kind='micro' group by rank, name\""
                  % (a, b, gpt, gpt, gopts, g1, gopts, g2), db, env={"RINGSIDE_VIEW_DUMP": dump})
    print(out)
    check(rc == 0, "pipeline training runs from the REPL")
    if rc != 0:
        return
    d = rel(load_weights(a), load_weights(b))
    check(d <= 1e-5, "MLP: the REPL's model holds the stages' trained weights, equal to one process (%.3g)" % d)
    d = rel(load_weights(g1), load_weights(g2))
    check(d <= 1e-5, "GPT on 3 stages over tcp, the head tied across stages: equal to one process (%.3g)" % d)
    check(re.search(r"bubble: [0-9.]+% of each step idle, measured .*\n +formula \(p-1\)/\(m\+p-1\) = 20\.0%", out)
          is not None, "the bubble measured from the traces beside the formula")
    check(re.search(r"^  1 +1:\d+\.\.4 .* \(4 micro\) +4 micro$", out, re.M) is not None,
          "gpipe: each stage holds all 4 micro-batches' activations, measured beside the schedule's count")
    summary = out[out.index("pipeline: schedule="):].split("\n")[:7]
    check(all(len(l) <= 80 for l in summary), "the pipeline's summary fits 80 columns: %s" % summary)
    check(re.search(r"test accuracy 0\.\d+", out) is not None, "rank 0 evaluates the gathered model")
    # the dashboard's pipeline pane in the timeline's place (the last run's final frame): each stage's
    # forwards and backwards, not one backward span over the whole schedule (which left no F on any row)
    frame = open(dump).read() if os.path.exists(dump) else ""
    # the pane's own columns: other panes (the data pane of a collective) may stand to its left
    at = frame.find(" pipeline, step ")
    col = at - (frame.rfind("\n", 0, at) + 1)
    tl = [l[col:] for l in frame[at:].split("\n")[1:8]]
    rows = [l for l in tl if re.match(r"r\d ", l)]
    check(len(rows) == 3 and all("F" in r[4:] for r in rows) and any("B" in r[4:] for r in rows),
          "the pipeline pane shows each stage's forwards and backwards apart:\n" + "\n".join(tl))
    con = sqlite3.connect(db)
    runs = con.execute("SELECT mode, world_size, status FROM runs WHERE kind='train' ORDER BY id").fetchall()
    check(runs[0] == ("pipeline", 2, "done") and runs[2] == ("pipeline", 3, "done"), "runs logged as pipeline: %s" % runs)
    n = con.execute("SELECT count(*) FROM events e JOIN runs r ON r.id = e.run_id WHERE r.id = "
                    "(SELECT min(id) FROM runs WHERE mode='pipeline') AND e.kind='micro'").fetchone()[0]
    check(n == 2 * 2 * 4 * 12, "every micro-batch's forward and backward on both stages in the log (%d events)" % n)
    st = con.execute("SELECT count(*) FROM events WHERE kind='stage'").fetchone()[0]
    check(st == 2 + 3, "each rank's stage in the log (%d)" % st)
    opts = json.loads(con.execute("SELECT options FROM runs WHERE mode='pipeline' ORDER BY id").fetchone()[0])
    fin = json.loads(con.execute("SELECT final FROM runs WHERE mode='pipeline' ORDER BY id").fetchone()[0])
    check(0 < fin.get("bubble", -1) < 1, "the measured bubble in the run's final figures: %s" % fin)
    check(opts.get("schedule") == "gpipe" and opts.get("micro") == 4 and "bucket" not in opts and
          opts.get("zero") == 0 and opts.get("dp") == 1,
          "the run's options: the pipeline's own (its zero=0, not fsdp's zero=3), not ddp's: %s" % opts)
    # pipeline stages whose layers are tensor-parallel, from the REPL: rank 0 hands back the whole model
    rc, out = run("model c = mlp 784-32-16-10 seed=1; data d = digits n=1200; train c on d mode=pipeline ranks=4 "
                  "tp=2 micro=4 batch=32 steps=12 backend=tcp view=off; save c %s" % c)
    check(rc == 0 and "dp=1 x pp=2 x tp=2 = 4 ranks" in out, "pp2 x tp2 trains from the REPL:\n" + out[-600:])
    if rc == 0:
        d = rel(load_weights(c), load_weights(b))
        check(d <= 1e-5, "MLP on 2 stages of 2 tensor-parallel ranks: the REPL's model holds the gathered shards, "
              "equal to one process (%.3g)" % d)


def case_train_pipeline_fault(tmp):
    """A stage killed with SIGKILL: the run fails within the bound naming the rank and its stage, the REPL
    goes on, and resume= continues on another layout to one process's weights."""
    db = os.path.join(tmp, "log.db")
    ck, a, b = (os.path.join(tmp, x + ".safetensors") for x in ("c", "a", "b"))
    t0 = time.time()
    rc, out = run("model m = mlp 784-32-10 seed=3; model r = mlp 784-32-10 seed=3; data d = digits n=3000; "
                  "train m on d mode=pipeline ranks=2 batch=32 steps=20 ckpt=%s ckpt_every=10 eval=off view=off; "
                  "train r on d batch=32 steps=20 eval=off; save r %s" % (ck, b), db, env={"RINGSIDE_TEST_KILL": "1:15"})
    print(out)
    check("rank 1 was killed by signal 9 (SIGKILL)" in out, "the killed rank is named with its signal")
    check(re.search(r"rank 1 ran pipeline stage 1 of 2 \(layers \d+\.\.\d+\)", out) is not None,
          "the killed rank's stage and layers are named")
    check("resume=" + ck in out, "the user is pointed at the last checkpoint")
    check(time.time() - t0 < 60, "everything ended within the bound")
    check("saved r" in out, "the REPL goes on after the failed run")
    rc, out = run("model m = mlp 784-32-10 seed=3; data d = digits n=3000; "
                  "train m on d mode=pipeline ranks=3 schedule=gpipe batch=32 steps=20 resume=%s eval=off view=off; "
                  "save m %s" % (ck, a), db)
    print(out)
    con = sqlite3.connect(db)
    st = [r[0] for r in con.execute("SELECT status FROM runs WHERE kind='train' AND mode='pipeline' ORDER BY id")]
    check(st == ["failed", "done"], "the killed run failed, the resumed one finished: %s" % st)
    if os.path.exists(a) and os.path.exists(b):
        d = rel(load_weights(a), load_weights(b))
        check(d <= 1e-5, "resumed on 3 ranks with gpipe from the 2-rank 1f1b checkpoint: one process's weights (%.3g)" % d)
    else:
        check(False, "both runs saved their weights")
def case_train_kill(tmp):
    """train's kill=RANK:STEP (the faults tutorial): the asked-for death is a report, not an error."""
    db = os.path.join(tmp, "log.db")
    ck = os.path.join(tmp, "c.safetensors")
    rc, out = run("set seed=1; model m = mlp 784-16-10; data d = digits n=1000; "
                  "train m on d mode=ddp ranks=3 batch=48 steps=12 eval=off view=off ckpt=%s ckpt_every=4 kill=2:9 "
                  "timeout=3s; expect killed_rank = 2; expect signal = 9; expect ckpt_step = 8; "
                  "train m on d mode=ddp ranks=2 batch=48 steps=12 eval=off view=off resume=%s; expect steps = 12; "
                  "expect world = 2" % (ck, ck), db)
    print(out)
    check(rc == 0 and "error:" not in out, "the asked-for fault and the resume run without an error")
    check("as kill=2:9 asked, rank 2 was killed by signal 9 (SIGKILL)" in out, "the death is named with its signal")
    check("the last checkpoint is %s (step 8)" % ck in out, "the user is pointed at the last checkpoint")
    check(out.count("ok: ") == 5, "the kill's figures and the resumed run's are recorded for expect")
    con = sqlite3.connect(db)
    st = [r[0] for r in con.execute("SELECT status FROM runs WHERE kind='train' ORDER BY id")]
    check(st == ["failed", "done"], "the killed run is logged failed, the resumed one done: %s" % st)
    for cmd, msg in [("train m on d kill=1:2", "it needs a mode that runs ranks"),
                     ("train m on d mode=ddp ranks=2 kill=2:1", "a rank 0..1 and a step from 1"),
                     ("train m on d mode=ddp ranks=2 kill=1:0", "a rank 0..1 and a step from 1"),
                     ("train m on d mode=ddp ranks=2 kill=one", "a rank 0..1 and a step from 1")]:
        rc, out = run("model m = mlp 784-16-10; data d = digits n=500; " + cmd)
        check(rc != 0 and msg in out, "%s is refused: %s" % (cmd, msg))


def case_train_records(tmp):
    """What train keeps for expect about communication and replicas, against counts worked out here:
    P parameters, 4P bytes of gradients; DDP calls one all-reduce per bucket per step plus the initial
    broadcast, and with accum=K still one per bucket per optimizer step (no_sync)."""
    P = 784 * 512 + 512 + 512 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10
    steps = 4
    rc, out = run("set seed=1 threads=1; model m = mlp 784-512-256-128-10; data d = digits n=2000; "
                  "train m on d mode=ddp ranks=2 steps=%d eval=off view=off bucket=256K; "
                  "expect comm_per_step = 2; expect comm_calls per rank = %d; "
                  "expect comm_bytes per rank ~= %d within 0.01%%; "
                  "reset m; train m on d mode=ddp ranks=2 steps=%d eval=off view=off bucket=64K overlap=off; "
                  "expect comm_per_step = 3; expect comm_hidden = 0; "
                  "reset m; train m on d mode=ddp ranks=2 steps=%d eval=off view=off bucket=256K accum=3; "
                  "expect comm_calls per rank = %d; "
                  "reset m; train m on d mode=dp ranks=3 steps=2 eval=off; "
                  "expect replicas = 3; expect replica.parameters ~= %d within 0.01%%; "
                  "expect replica.gradients ~= %d within 0.01%%"
                  % (steps, 2 * steps + 1, (steps + 1) * 4 * P, steps, steps, 2 * steps + 1, 2 * 4 * P, 2 * 4 * P))
    print(out)
    check(rc == 0 and out.count("ok: ") == 9, "buckets, collectives, bytes, overlap=off and dp replicas as worked out")


def case_pi(tmp):
    """`pi`: the ranks' sum against a serial one computed here (math.fsum, exactly rounded), and the
    lecture's four-rank output."""
    import math

    def ref(method, n):
        if method == "series":
            return 4 * math.fsum((-1.0) ** i / (2 * i + 1) for i in range(n))
        h = 1.0 / n
        return h * math.fsum(4.0 / (1.0 + (h * (i + 0.5)) ** 2) for i in range(n))

    cases = [("series", 4, 4, "shm"), ("series", 3, 100000, "tcp"), ("midpoint", 4, 1000, "shm"),
             ("midpoint", 2, 1, "tcp"), ("series", 5, 3, "shm")]
    script = []
    for method, ranks, n, backend in cases:
        want = ref(method, n)
        script.append("pi ranks=%d n=%d method=%s backend=%s; expect pi ~= %.17g within 1e-12; "
                      "expect error ~= %.17g within 1e-12; expect world = %d; expect n = %d"
                      % (ranks, n, method, backend, want, abs(want - math.pi), ranks, n))
    rc, out = run("; ".join(script) + "; pi ranks=4; expect partial per rank ~= [4, -1.3333333, 0.8, -0.5714286] within 1e-6; "
                  "expect terms per rank = 1")
    print(out)
    check(rc == 0 and out.count("ok: ") == 4 * len(cases) + 2,
          "every pi agrees with the serial sum to 1e-12, its error with |sum - pi|")
    check("pi = 2.895238095238096: 4 terms (series) on 4 ranks" in out, "the lecture's program: 4 ranks, 2.895238")
    check("rank 4: 0 terms" in out, "a rank with no term left contributes 0")
    rc, out = run("pi ranks=2 n=10; expect pi ~= %.17g within 1e-12" % (ref("series", 10) + 1e-9))
    check(rc != 0 and "expect failed" in out, "a pi off by 1e-9 fails the check")
    for cmd, msg in [("pi n=0", "n (terms) must be 1"), ("pi method=simpson", "simpson")]:
        rc, out = run(cmd)
        check(rc != 0 and msg in out, "%s is refused" % cmd)


def case_fault(tmp):
    db = os.path.join(tmp, "log.db")
    t0 = time.time()
    rc, out = run("collective all_reduce ranks=4 algo=ring size=4M timeout=5s; collective all_reduce ranks=2", db,
                  env={"RINGSIDE_TEST_DIE": "2:3"})
    dt = time.time() - t0
    print(out)
    check(rc == 1, "the failed run fails the script")
    check("rank 2 exited with status 3" in out, "the user is told which rank failed and how")
    check(dt < 15, "everything ended within the bound (%.1f s)" % dt)
    con = sqlite3.connect(db)
    st = [r[0] for r in con.execute("SELECT status FROM runs ORDER BY id")]
    check(st[0] == "failed", "the run is marked failed in the log: %s" % st)


def case_by_hand(tmp):
    """Ranks started by hand with the torchrun variables (rank 0 hosts the store, as c10d does)."""
    port = free_port()
    procs = []
    for r in range(3):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="3", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([EXE, "--worker", "collective", "op=all_reduce", "count=3", "backend=shm"],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=60)[0] for p in procs]
    print("".join(outs))
    check(all(p.returncode == 0 for p in procs), "three hand-started ranks succeed")
    check(all("-> out [6, 33, 60]" in o for o in outs), "each holds the sum of [1,10,19],[2,11,20],[3,12,21]")
    check(all(re.search(r"^@check %d 0 " % r, o, re.M) for r, o in enumerate(outs)), "each rank checks itself")
    # a rank that never arrives: rendezvous times out naming it
    # (its own free port: port + 1 was another process's once, and rank 0 then failed at listen)
    env = dict(os.environ, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    t0 = time.time()
    p = subprocess.run([EXE, "--worker", "collective", "op=all_reduce", "timeout=1.5"], env=env, capture_output=True,
                       text=True, timeout=60)
    print(p.stdout + p.stderr)
    check(p.returncode != 0 and "1" in p.stderr and time.time() - t0 < 10, "a missing rank times out at rendezvous")
    check(re.search(r"rank.? 1", p.stderr) is not None, "the message names the missing rank")
    # the port already in use is reported, not hung on
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    busy = s.getsockname()[1]
    env = dict(os.environ, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(busy))
    t0 = time.time()
    p = subprocess.run([EXE, "--worker", "collective", "op=all_reduce", "timeout=20"], env=env, capture_output=True,
                       text=True, timeout=60)
    print(p.stdout + p.stderr)
    check(p.returncode != 0 and time.time() - t0 < 5, "a port in use fails at once")
    check("in use" in p.stderr, "and says the port is in use")
    s.close()


def free_port():
    """A TCP port nobody listens on now, from the kernel (a port computed from our pid can fall in the
    ephemeral range, where another test's connection may hold it)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_children(pid):
    """The pids of pid's children that are rank workers (from /proc, before anything is killed)."""
    kids = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:
        return []
    out = []
    for k in kids:
        try:
            with open("/proc/%d/cmdline" % k, "rb") as f:
                if b"--worker" in f.read():
                    out.append(k)
        except OSError:
            pass
    return out


def alive(pid):
    """True while pid runs (a zombie has ended)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def case_orphans(tmp):
    """Ranks never outlive what started them: the REPL killed with SIGKILL mid-run takes its ranks
    along (the launcher's death signal), and a rank started by hand stops when rank 0, which hosts the
    store, is killed (the store's connection closing)."""
    # A bench with many iterations writes nothing for a long while (no SIGPIPE to end its ranks once
    # the REPL's pipes close); a training run writes a line per step.
    for what, cmds in [("bench", "bench all_reduce ranks=2 sizes=4M..4M iters=200000 view=off"),
                       ("training", "data d = digits n=2000 seed=1; model m = mlp 784-32-10 seed=1; "
                                    "train m on d mode=ddp ranks=2 epochs=500 batch=16 view=off")]:
        repl = subprocess.Popen([EXE, "--no-db", "-c", cmds], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ranks = []
        t0 = time.time()
        while len(ranks) < 2 and time.time() - t0 < 30:
            time.sleep(0.1)
            ranks = worker_children(repl.pid)
        time.sleep(0.5)
        check(len(ranks) == 2 and all(alive(r) for r in ranks), "the REPL started 2 %s ranks: %s" % (what, ranks))
        repl.kill()
        repl.wait()
        time.sleep(1)
        left = [r for r in ranks if alive(r)]
        check(not left, "%s: 1 s after SIGKILL of the REPL no rank is alive (left: %s)" % (what, left))
        for r in left:
            os.kill(r, 9)

    port = free_port()
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([EXE, "--worker", "bench", "op=all_reduce", "minbytes=4194304", "maxbytes=4194304",
                                       "iters=200000", "backend=shm", "timeout=60"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    time.sleep(2)
    running = all(p.poll() is None for p in procs)
    check(running, "two hand-started ranks run a long bench (port %d)" % port)
    if not running:  # say why (a port taken meanwhile, a rank that failed) instead of three bare FAILs
        for r, p in enumerate(procs):
            if p.poll() is not None:
                print("rank %d exited %d:\n%s" % (r, p.returncode, p.communicate(timeout=30)[1]))
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        return
    procs[0].kill()
    procs[0].wait()
    time.sleep(1)
    check(procs[1].poll() is not None, "1 s after SIGKILL of rank 0 (the store's host) rank 1 has stopped")
    if procs[1].poll() is None:
        procs[1].kill()
    err = procs[1].communicate(timeout=30)[1]
    print(err)
    check("closed the connection" in err, "and it says why")


def case_too_big(tmp):
    """A size that cannot fit in memory is refused before any rank starts, with the arithmetic."""
    db = os.path.join(tmp, "log.db")
    with open("/proc/meminfo") as f:
        avail = int(re.search(r"MemAvailable:\s+(\d+) kB", f.read()).group(1)) * 1024
    cases = [("collective all_reduce ranks=64 count=2000000000", "2000000000 x f32 (4 B) x 2 buffers per rank "
              "(in, expected) x 64 ranks = 1024.0 GB")]
    if avail < 32e9:  # the brief's example: 4 x 10^9 x 4 B x 2 = 32 GB
        cases.append(("collective all_reduce ranks=4 count=1000000000", "1000000000 x f32 (4 B) x 2 buffers per rank "
                      "(in, expected) x 4 ranks = 32.0 GB"))
    else:
        print("note: %.1f GB available: the 32 GB case would fit here" % (avail / 1e9))
    cases.append(("collective all_gather ranks=8 count=2000000000 dtype=f64", "x 17 buffers per rank (in, out, expected)"))
    for cmd, want in cases:
        t0 = time.time()
        rc, out = run(cmd, db)
        print(out)
        check(rc != 0 and want in out, "%s: refused with the arithmetic" % cmd)
        check("GB available (MemAvailable in /proc/meminfo)" in out, "and what memory it compared with")
        check("rank 0" not in out and time.time() - t0 < 5, "and no rank started")
    con = sqlite3.connect(db)
    check(con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0, "no run in the session log")
    rc, out = run("collective all_reduce ranks=2 count=1000", db)
    check(rc == 0, "a size that fits still runs")


def case_train_stop(tmp):
    """Ctrl-C during a run across ranks keeps the weights of the last step every rank finished, as in
    single mode: rank 0 writes them when stopped, the REPL reads them back, `eval` shows them trained."""
    import select
    import signal
    for mode in ["ddp", "fsdp"]:
        p = subprocess.Popen([EXE, "--no-db", "--keep-going"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, bufsize=1, env=dict(os.environ, COLUMNS="1000"))
        p.stdin.write("data d = digits n=3000 seed=1\nmodel m = mlp 784-64-10 seed=1\n"
                      "train m on d mode=%s ranks=2 epochs=500 batch=32 view=off\n" % mode)
        p.stdin.flush()
        out, t0 = "", time.time()
        while time.time() - t0 < 60 and "epoch 2:" not in out:
            if select.select([p.stdout], [], [], 0.2)[0]:
                line = p.stdout.readline()
                if not line:
                    break
                out += line
        p.send_signal(signal.SIGINT)
        while time.time() - t0 < 90 and "keeps the weights" not in out and "stopped" not in out:
            if select.select([p.stdout], [], [], 0.2)[0]:
                out += p.stdout.readline()
        try:
            p.stdin.write("eval m on d\n")
            p.stdin.close()
        except BrokenPipeError:
            pass
        out += p.stdout.read()
        p.wait(timeout=60)
        print(out)
        check(re.search(r"m keeps the weights of step \d+, the last one every rank finished", out) is not None,
              "%s: stopped by Ctrl-C, the model keeps the last finished step's weights" % mode)
        m = re.search(r"accuracy (\d\.\d+)", out.split("> eval m on d")[-1])
        acc = float(m.group(1)) if m else 0.0
        check(acc > 0.7, "%s: eval after the stop gives a trained accuracy (%.3f), not chance" % (mode, acc))


def case_mpirun(tmp):
    mpirun = shutil.which("mpirun")
    rc, out = run("backends")
    if not mpirun or "  mpi " not in out:
        print("SKIP: mpirun or the mpi backend is missing")
        sys.exit(77)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", COLUMNS="1000")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    for op, extra, want in (("all_reduce", [], "-> out [10, 46, 82]"),
                            ("reduce", ["redop=product", "count=2"], "rank 0: in [1, 10] -> out [24, 17160]"),
                            ("all_gather", ["dtype=i32", "count=1"], "-> out [1, 2, 3, 4]"),
                            ("reduce_scatter", ["redop=max", "count=1"], "rank 3: in [4, 13, 22, 31] -> out [31]")):
        args = [mpirun, "--oversubscribe", "-np", "4", EXE, "--worker", "collective", "backend=mpi", "op=" + op,
                "count=3"] + extra
        p = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
        print(p.stdout + p.stderr)
        check(p.returncode == 0, "mpirun -np 4 worker %s succeeds" % op)
        check(want in p.stdout, "%s result %s" % (op, want))
        check(len(re.findall(r"^@check \d 0 ", p.stdout, re.M)) == 4, "%s: four ranks check out" % op)
    # and from the REPL, which starts mpirun itself
    rc, out = run("collective all_reduce ranks=4 backend=mpi count=3", env=env)
    print(out)
    check(rc == 0 and out.count("-> out [10, 46, 82]") == 4, "collective backend=mpi from the REPL")
    a, b = os.path.join(tmp, "a.safetensors"), os.path.join(tmp, "b.safetensors")
    rc, out = run("model m = mlp 784-32-10 seed=1; model r = mlp 784-32-10 seed=1; data d = digits n=1200; "
                  "train m on d mode=ddp ranks=2 backend=mpi batch=32 eval=off; save m %s; "
                  "train r on d batch=32 eval=off; save r %s" % (a, b), env=env)
    print(out)
    check(rc == 0, "ddp on mpi from the REPL")
    if rc == 0:
        d = rel(load_weights(a), load_weights(b))
        check(d <= 1e-5, "ddp on mpi equals one process (%.3g)" % d)


def case_train_gpt(tmp):
    """The GPT across ranks: ddp and fsdp zero=3 (the head tied to the token embedding, in another
    ZeRO-3 unit) train what one process trains, with AdamW's groups and clipping."""
    paths = [os.path.join(tmp, "%s.safetensors" % x) for x in ("single", "ddp", "z3", "z3layer", "z2")]
    spec = "gpt layers=2 heads=2 dim=16 ctx=16"
    opts = "steps=6 batch=8 opt=adamw lr=3e-3 clip=0.5 eval=off view=off"
    cmds = ["data t = text ctx=16"]
    for name in ("s", "d", "z", "l", "w"):
        cmds.append("model %s = %s seed=5" % (name, spec))
    cmds += ["train s on t %s; save s %s" % (opts, paths[0]),
             "train d on t mode=ddp ranks=2 %s; save d %s" % (opts, paths[1]),
             "train z on t mode=fsdp zero=3 ranks=2 %s; save z %s" % (opts, paths[2]),
             "train l on t mode=fsdp zero=3 wrap=layer ranks=2 backend=tcp %s; save l %s" % (opts, paths[3]),
             "train w on t mode=fsdp zero=2 ranks=2 %s; save w %s" % (opts, paths[4])]
    rc, out = run("; ".join(cmds), timeout=170)
    print(out)
    check(rc == 0, "the GPT trains under ddp and fsdp from the REPL")
    if rc != 0:
        return
    ref = load_weights(paths[0])
    for what, p in (("ddp 2 ranks", paths[1]), ("fsdp zero=3 2 ranks", paths[2]),
                    ("fsdp zero=3 wrap=layer on tcp", paths[3]), ("fsdp zero=2", paths[4])):
        d = rel(load_weights(p), ref)
        check(d <= 1e-5, "GPT, %s equals one process (%.3g)" % (what, d))

def case_world(tmp):
    """`world`: who each rank was told it is, three nodes played on one host, and rank 0 hosting the store
    as when ranks are started by hand; the printed by-hand lines are then run as printed."""
    rc, out = run("world ranks=6 nodes=3; expect env.local_rank per rank = [0, 1, 0, 1, 0, 1]; "
                  "expect env.group_rank per rank = [0, 0, 1, 1, 2, 2]; expect count per rank = 6; "
                  "expect group.rank per rank = [0, 1, 2, 3, 4, 5]; expect env.world_size per rank = 6")
    print(out)
    check(rc == 0 and out.count("ok: ") == 5, "six ranks as three nodes of two, checked with expect")
    for r in range(6):
        want = "rank %d: RANK=%d WORLD_SIZE=6 LOCAL_RANK=%d LOCAL_WORLD_SIZE=2 GROUP_RANK=%d" % (r, r, r % 2, r // 2)
        check(want in out, "rank %d says who it is: %s" % (r, want))
    rc, out = run("world ranks=2 store=rank0")
    print(out)
    check(rc == 0 and "rank 0 hosted the rendezvous store itself" in out, "rank 0 hosts the store")
    m = re.search(r"^  export (.*)$", out, re.M)
    lines = re.findall(r"^  (RANK=.*) ringside --worker world$", out, re.M)
    check(m is not None and len(lines) == 2, "the by-hand lines are printed")
    if m and len(lines) == 2:
        env = dict(os.environ)
        env.update(dict(kv.split("=", 1) for kv in m.group(1).split()))
        env["MASTER_PORT"] = str(free_port())  # the printed port was rank 0's; a pid-made one can be taken
        procs = []
        for line in lines:
            e = dict(env)
            e.update(dict(kv.split("=", 1) for kv in line.split()))
            procs.append(subprocess.Popen([EXE, "--worker", "world"], env=e, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=60)[0] for p in procs]
        check(all(p.returncode == 0 for p in procs), "the printed lines start ranks that meet: %s" % outs)
        check(all(re.search(r"^@num %d count 2$" % r, o, re.M) for r, o in enumerate(outs)),
              "started by hand, each counts 2")
    rc, out = run("world ranks=6 nodes=4; world ranks=2 nodes=2 backend=mpi; world ranks=2 store=rank0 backend=mpi")
    print(out)
    check("4 nodes do not share 6 ranks evenly" in out, "nodes that do not divide the ranks are refused")
    check(out.count("nodes= and store= apply to shm and tcp") == (2 if "not built: meson did not find Open MPI" not in run("backends")[1] else 0),
          "mpirun numbers its own ranks")


with tempfile.TemporaryDirectory() as tmp:
    globals()["case_" + CASE.replace("-", "_")](tmp)
print("%d failed" % failures)
sys.exit(1 if failures else 0)
