#!/usr/bin/env python3
"""`train ... config=ds_config.json` (DeepSpeed's configuration) driven from outside:
  keys      every key ringside reads becomes the option it says, as the session log records the run
            (mode, zero, offload, bucket, overlap, pp, partition, opt, lr, wd, momentum, nesterov, sched,
            warmup, steps, min_lr, clip, precision, loss_scale); ignored keys are named;
  batch     DeepSpeed's batch arithmetic between train_batch_size, train_micro_batch_size_per_gpu,
            gradient_accumulation_steps and the data-parallel world (worked out here from the rules in
            deepspeed/runtime/config.py), and its refusals with its own words;
  refuse    keys ringside cannot follow are refused by name before any rank starts;
  same      a config and the same options typed on the line train to the same losses, step by step
            (single, ddp and fsdp with offload); the line's options override the file and say so;
            `export config N` written back and read again trains to run N's losses.

usage: ds_config_test.py CASE RINGSIDE"""
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

CASE, EXE = sys.argv[1], os.path.abspath(sys.argv[2])
failures = 0
SETUP = "data d = digits n=400 seed=1; model m = mlp 784-16-10 seed=1; "


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
    else:
        print("ok:", what)


def run(tmp, cmds, db=True):
    args = [EXE, "--keep-going"] + (["--db", os.path.join(tmp, "log.db")] if db else ["--no-db"]) + ["-c", cmds]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp, env=dict(os.environ, COLUMNS="1000"))
    return p.returncode, p.stdout + p.stderr


def write(tmp, name, obj):
    with open(os.path.join(tmp, name), "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return name


def last_run(tmp):
    con = sqlite3.connect(os.path.join(tmp, "log.db"))
    rid, mode, opts = con.execute("SELECT id, mode, options FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    return rid, mode, json.loads(opts)


def losses(tmp, rid):
    con = sqlite3.connect(os.path.join(tmp, "log.db"))
    return [v for (v,) in con.execute("SELECT value FROM metrics WHERE run_id=? AND name='loss' AND rank=0 "
                                      "ORDER BY step", (rid,))]


def case_keys(tmp):
    cases = [
        ({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2, "gradient_clipping": 0.5,
          "steps_per_print": 10, "wall_clock_breakdown": True,
          "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.05}},
          "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.004,
                                                        "warmup_num_steps": 3, "warmup_type": "linear"}},
          "bf16": {"enabled": True},
          "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                                "offload_param": {"device": "cpu"}, "allgather_bucket_size": 5e8,
                                "contiguous_gradients": True}},
         "ranks=2", "fsdp",
         {"batch": 16, "accum": 2, "clip": 0.5, "opt": "adamw", "lr": 0.004, "wd": 0.05, "sched": "constant",
          "warmup": 3, "precision": "bf16", "zero": 3, "offload": "cpu"},
         ["ignored: steps_per_print", "ignored: wall_clock_breakdown", "ignored: zero_optimization.offload_optimizer.pin_memory",
          "ignored: zero_optimization.allgather_bucket_size", "ignored: zero_optimization.contiguous_gradients"]),
        ({"train_batch_size": 32, "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9, "nesterov": True}},
          "zero_optimization": {"stage": 0, "reduce_bucket_size": 65536, "overlap_comm": False},
          "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 10, "loss_scale_window": 2000,
                   "hysteresis": 1, "min_loss_scale": 1}},
         "ranks=2", "ddp",
         {"batch": 32, "accum": 1, "opt": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "bucket": 65536,
          "overlap": False, "precision": "fp16", "loss_scale": 1024.0},
         ["ignored: fp16.min_loss_scale"]),
        ({"train_micro_batch_size_per_gpu": 16, "optimizer": {"type": "Adam", "params": {"lr": 0.01}},
          "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 6, "warmup_num_steps": 2,
                                                              "cos_min_ratio": 0.1, "warmup_type": "linear"}}},
         "", "single",
         {"batch": 16, "opt": "adamw", "wd": 0, "lr": 0.01, "sched": "cosine", "steps": 3, "warmup": 2, "min_lr": 0.001},
         ["the command line's steps=3 overrides scheduler.params.total_num_steps (steps=6)",
          "DeepSpeed's Adam decouples weight decay"]),
        ({"train_batch_size": 16, "optimizer": {"type": "Adam", "params": {"adam_w_mode": False, "weight_decay": 0.001}},
          "pipeline": {"stages": 2, "partition_method": "parameters"}, "zero_optimization": {"stage": 1}},
         "ranks=4", "pipeline",
         {"batch": 16, "opt": "adam", "wd": 0.001, "pp": 2, "partition": "parameters", "zero": 1},
         ["train_micro_batch_size_per_gpu 8 x gradient_accumulation_steps 1 x 2 data-parallel ranks"]),
    ]
    for i, (cfg, extra, mode, want, says) in enumerate(cases):
        f = write(tmp, "k%d.json" % i, cfg)
        rc, out = run(tmp, SETUP + "train m on d config=%s %s steps=3 eval=off view=off" % (f, extra))
        print(out)
        check(rc == 0, "case %d (%s) runs" % (i, mode))
        if rc:
            continue
        _, got_mode, opts = last_run(tmp)
        check(got_mode == mode, "case %d: mode %s (got %s)" % (i, mode, got_mode))
        for k, v in want.items():
            g = opts.get(k)
            same = abs(g - v) <= 1e-9 * max(1, abs(v)) if isinstance(v, float) and isinstance(g, (int, float)) else g == v
            check(same, "case %d: the log's %s is %r (got %r)" % (i, k, v, g))
        for text in says:
            check(text in out, "case %d says: %s" % (i, text))


def ds_batch(t, m, g, world):
    """deepspeed/runtime/config.py _set_batch_related_parameters + _batch_assertion: (t, m, g) or the message."""
    if t is not None and m is not None and g is not None:
        pass
    elif t is not None and m is not None:
        g = t // m // world
    elif t is not None and g is not None:
        m = t // world // g
    elif m is not None and g is not None:
        t = m * g * world
    elif t is not None:
        g, m = 1, t // world
    elif m is not None:
        t, g = m * world, 1
    else:
        return "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"
    if t <= 0:
        return "Train batch size: %d has to be greater than 0" % t
    if m <= 0:
        return "Micro batch size per gpu: %d has to be greater than 0" % m
    if g <= 0:
        return "Gradient accumulation steps: %d has to be greater than 0" % g
    if t != m * g * world:
        return ("Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
                "gradient_acc_step * world_size %d != %d * %d * %d" % (t, m, g, world))
    return (t, m, g)


def case_batch(tmp):
    rows = [(64, None, None, 2), (64, 8, None, 2), (64, None, 4, 2), (None, 8, 4, 2), (None, 16, None, 4),
            (48, 8, 3, 2), (16, 4, 8, 4), (10, 4, None, 2), (None, None, 2, 2), (0, None, None, 2), (60, 8, None, 4),
            (24, None, None, 1)]
    for t, m, g, world in rows:
        cfg = {k: v for k, v in (("train_batch_size", t), ("train_micro_batch_size_per_gpu", m),
                                  ("gradient_accumulation_steps", g)) if v is not None}
        f = write(tmp, "b.json", cfg)
        extra = "mode=dp ranks=%d" % world if world > 1 else ""  # threads as replicas: no process to start
        rc, out = run(tmp, SETUP + "train m on d config=%s %s steps=1 eval=off view=off" % (f, extra), db=False)
        want = ds_batch(t, m, g, world)
        if isinstance(want, str):
            check(rc != 0 and want in out and "rendezvous" not in out,
                  "%s on %d ranks is refused as DeepSpeed says it: %s" % (cfg, world, want))
        else:
            check(rc == 0 and "batch=%d accum=%d" % (want[1] * world, want[2]) in out,
                  "%s on %d ranks: micro %d x accum %d x %d = %d (batch=%d)" % (cfg, world, want[1], want[2], world,
                                                                                want[0], want[1] * world))


def case_refuse(tmp):
    cases = [
        ({"train_batch_size": 8, "zero_allow_untested_optimizer": True}, "zero_allow_untested_optimizer"),
        ({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"betas": [0.8, 0.999]}}}, "optimizer.params.betas"),
        ({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"eps": 1e-6}}}, "optimizer.params.eps"),
        ({"train_batch_size": 8, "optimizer": {"type": "Lamb"}}, "Lamb"),
        ({"train_batch_size": 8, "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 10}}}, "WarmupDecayLR"),
        ({"train_batch_size": 8, "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}}, "warmup_type"),
        ({"train_batch_size": 8, "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-4,
                                                                             "warmup_type": "linear"}}}, "warmup_min_lr"),
        ({"train_batch_size": 8, "fp16": {"enabled": True, "loss_scale": 128}}, "fp16.loss_scale"),
        ({"train_batch_size": 8, "fp16": {"enabled": True, "loss_scale_window": 1000}}, "fp16.loss_scale_window"),
        ({"train_batch_size": 8, "fp16": {"enabled": True, "hysteresis": 2}}, "fp16.hysteresis"),
        ({"train_batch_size": 8, "fp16": {"enabled": True}, "bf16": {"enabled": True}}, "cannot be simultaneously"),
        ({"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme"}}},
         "offload_optimizer.device"),
        ({"train_batch_size": 8, "zero_optimization": {"stage": 4}}, "zero_optimization.stage"),
        ({"train_batch_size": 8, "pipeline": {"stages": 2, "partition_method": "type:transformer"}}, "partition_method"),
        ('{"train_batch_size": 8, "train_batch_size": 16}', "duplicate"),
        ('{"train_batch_size": 8,', "config=c.json"),
    ]
    for cfg, word in cases:
        f = write(tmp, "c.json", cfg)
        rc, out = run(tmp, SETUP + "train m on d config=%s ranks=2 steps=1 eval=off view=off" % f)
        err = [ln for ln in out.splitlines() if "error" in ln]
        check(rc != 0 and err and word in err[0] and "rendezvous" not in out,
              "%s: refused naming %s: %s" % (cfg, word, err[:1]))
    rc, out = run(tmp, SETUP + "train m on d config=/nonexistent/ds.json")
    check(rc != 0 and "/nonexistent/ds.json" in out, "a missing file is named")
    con = sqlite3.connect(os.path.join(tmp, "log.db"))
    check(con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0, "no run was started")


def case_same(tmp):
    cfgs = [
        ({"train_micro_batch_size_per_gpu": 32, "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}},
          "gradient_clipping": 1.0}, "", "batch=32 opt=sgd lr=0.05 momentum=0.9 clip=1"),
        ({"train_batch_size": 64, "gradient_accumulation_steps": 2,
          "optimizer": {"type": "AdamW", "params": {"lr": 0.002, "weight_decay": 0.01}},
          "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.002, "warmup_num_steps": 3,
                                                        "warmup_type": "linear"}},
          "zero_optimization": {"stage": 0, "reduce_bucket_size": 16384}},
         "ranks=2", "mode=ddp ranks=2 batch=32 accum=2 opt=adamw lr=0.002 wd=0.01 warmup=3 bucket=16384"),
        ({"train_batch_size": 32, "optimizer": {"type": "Adam", "params": {"lr": 0.001, "adam_w_mode": False}},
          "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}},
         "ranks=2", "mode=fsdp zero=3 offload=cpu ranks=2 batch=32 opt=adam lr=0.001 wd=0"),
    ]
    for i, (cfg, extra, line) in enumerate(cfgs):
        f = write(tmp, "s%d.json" % i, cfg)
        rc, out = run(tmp, SETUP + "train m on d config=%s %s steps=6 eval=off view=off; "
                      "model m2 = mlp 784-16-10 seed=1; train m2 on d %s steps=6 eval=off view=off" % (f, extra, line))
        print(out)
        con = sqlite3.connect(os.path.join(tmp, "log.db"))
        ids = [r for (r,) in con.execute("SELECT id FROM runs ORDER BY id DESC LIMIT 2")][::-1]
        a, b = losses(tmp, ids[0]), losses(tmp, ids[1])
        check(rc == 0 and len(a) == 6 and a == b, "config %d equals `%s`: losses %s / %s" % (i, line, a[:3], b[:3]))
    # the line wins over the file, and says so
    f = write(tmp, "o.json", {"train_batch_size": 32, "optimizer": {"type": "SGD", "params": {"lr": 0.05}}})
    rc, out = run(tmp, SETUP + "train m on d config=%s lr=0.01 batch=16 steps=2 eval=off" % f)
    _, _, opts = last_run(tmp)
    check(rc == 0 and abs(opts["lr"] - 0.01) < 1e-12 and opts["batch"] == 16, "lr=0.01 batch=16 on the line win")
    check("the command line's lr=0.01 overrides optimizer.params.lr (lr=0.05)" in out, "and the override is said")
    f = write(tmp, "z.json", {"train_batch_size": 32, "zero_optimization": {"stage": 2}})
    rc, out = run(tmp, SETUP + "train m on d config=%s mode=ddp ranks=2 steps=1 eval=off view=off" % f)
    _, mode, _ = last_run(tmp)
    check(rc == 0 and mode == "ddp" and "the command line's mode=ddp overrides zero_optimization.stage (mode=fsdp)" in out,
          "mode=ddp on the line wins over a ZeRO stage, and says so")
    # export config N, read back: the same run again
    rc, out = run(tmp, SETUP + "train m on d mode=ddp ranks=2 batch=32 accum=2 opt=adamw lr=0.003 wd=0.02 sched=cosine "
                  "warmup=2 min_lr=0.0003 steps=6 clip=0.5 eval=off view=off")
    rid, _, _ = last_run(tmp)
    rc2, out2 = run(tmp, "export config %d back.json" % rid)
    print(out2)
    rc3, out3 = run(tmp, SETUP + "train m on d config=back.json ranks=2 eval=off view=off")
    print(out3)
    rid2, _, _ = last_run(tmp)
    a, b = losses(tmp, rid), losses(tmp, rid2)
    check(rc == rc2 == rc3 == 0 and len(a) == 6 and a == b, "export config %d, read back, trains the same: %s / %s"
          % (rid, a[:3], b[:3]))
    with open(os.path.join(tmp, "back.json")) as fh:
        back = json.load(fh)
    check(back.get("train_batch_size") == 64 and back.get("train_micro_batch_size_per_gpu") == 16
          and back.get("gradient_accumulation_steps") == 2 and back["optimizer"]["type"] == "AdamW"
          and back["scheduler"]["type"] == "WarmupCosineLR" and back.get("gradient_clipping") == 0.5,
          "the exported file has DeepSpeed's keys: %s" % back)


with tempfile.TemporaryDirectory() as tmp:
    globals()["case_" + CASE](tmp)
print("%d failed" % failures)
sys.exit(1 if failures else 0)
