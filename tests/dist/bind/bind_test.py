#!/usr/bin/env python3
"""bind= on the rank-starting commands, checked from outside: while the ranks of a `bench` run, their
Cpus_allowed_list (every thread's, /proc/PID/task/TID/status) is read and compared with the machine's
topology as sysfs tells it (each CPU's core siblings and L3 cache), not with anything ringside prints.

  core     each rank on a core of its own: the masks are disjoint, each is one core's CPUs, all in
           one L3 cache when one holds them; every thread of a rank has the same mask
  none     the ranks keep the REPL's mask (tcp: shm moves its own threads for small messages)
  numa     each rank on the whole NUMA node (sysfs's node cpulist) of the core it is mapped to
  mask     a REPL under taskset binds within its mask
  few      fewer usable cores than ranks: no binding, a message that says so, the ranks keep the mask
  log      the session log has a "bind" event per rank with the CPUs /proc shows

usage: bind_test.py CASE RINGSIDE"""
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

# a kernel CPU list ("0-3,8") as a set: the one reader, shared with the bench's placement sampler
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
from rank_cpus import parse_list  # noqa: E402

CASE, EXE = sys.argv[1], os.path.abspath(sys.argv[2])
failures = 0


def check(cond, what):
    global failures
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures += 1


def sysfs_set(cpu, rel):
    try:
        with open("/sys/devices/system/cpu/cpu%d/%s" % (cpu, rel)) as f:
            return parse_list(f.read())
    except OSError:
        return None


def core_of(cpu):
    """The CPUs of cpu's core (its hyperthreads), as sysfs says; {cpu} where sysfs does not say."""
    return sysfs_set(cpu, "topology/core_cpus_list") or sysfs_set(cpu, "topology/thread_siblings_list") or {cpu}


def l3_of(cpu):
    for idx in range(8):
        try:
            with open("/sys/devices/system/cpu/cpu%d/cache/index%d/level" % (cpu, idx)) as f:
                if f.read().strip() == "3":
                    return sysfs_set(cpu, "cache/index%d/shared_cpu_list" % idx)
        except OSError:
            break
    return None


def allowed(pid, tid=None):
    path = "/proc/%d/task/%d/status" % (pid, tid) if tid else "/proc/%d/status" % pid
    with open(path) as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return parse_list(line.split(":", 1)[1])
    return None


def workers(parent):
    """{RANK: pid} of the parent's --worker children."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != parent:
                continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if b"--worker" not in f.read():
                    continue
            with open("/proc/%s/environ" % d, "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            out[int(env.get(b"RANK", b"-1"))] = int(d)
        except (OSError, ValueError, IndexError):
            continue
    return out


def run_and_sample(cmd, ranks, taskset=None, db=None):
    """Starts `ringside -c cmd` (under taskset CPUS if given); once every rank is up and has run a while,
    reads each rank's threads' masks, then stops the run with Ctrl-C. Returns (rc, output, {rank: [mask
    of each thread]})."""
    args = ([ "taskset", "-c", taskset] if taskset else []) + [EXE] + (["--db", db] if db else ["--no-db"]) + ["-c", cmd]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, COLUMNS="1000"))
    masks = {}
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None:
        w = workers(p.pid)
        # past their start: a rank binds itself first thing, and starts its store-watching thread on joining
        if len(w) == ranks and all(len(os.listdir("/proc/%d/task" % pid)) >= 2 for pid in w.values()):
            time.sleep(0.2)
            try:
                masks = {r: [allowed(pid, int(t)) for t in os.listdir("/proc/%d/task" % pid)] for r, pid in w.items()}
                break
            except (OSError, TypeError):
                masks = {}
        time.sleep(0.01)
    if p.poll() is None:
        p.send_signal(signal.SIGINT)  # Ctrl-C: the bench stops, its ranks are ended
    out = p.communicate(timeout=120)[0]
    print(out)
    return p.returncode, out, masks


def long_bench(ranks, extra=""):
    # runs until the test has read the ranks and pressed Ctrl-C (run_and_sample)
    # (all under 128 KiB: shm widens a bound rank's main thread for larger transfers, dist/shm/place.h)
    return "bench all_reduce ranks=%d sizes=1K..64K iters=999999 view=off timeout=60s %s" % (ranks, extra)


def long_train():
    # a one-rank run that outlasts the sampling (stopped by run_and_sample's Ctrl-C)
    return ("data d = digits n=3000 seed=1\nmodel m = mlp 784-64-10 seed=1\n"
            "train m on d mode=ddp ranks=1 epochs=500 view=off bind=core")


def usable():
    return sorted(os.sched_getaffinity(0))


def sampled(masks, ranks):
    return len(masks) == ranks and all(m and all(t is not None for t in m) for m in masks.values())


def case_core():
    cpus = usable()
    cores = {frozenset(core_of(c) & set(cpus)) for c in cpus}
    if len(cores) < 2:
        print("SKIP: bind=core needs 2 cores to place 2 ranks apart; this process may use CPUs %s" % cpus)
        return 77
    for be in ("shm", "tcp"):
        rc, out, masks = run_and_sample(long_bench(2, "backend=%s bind=core" % be), 2)
        check(sampled(masks, 2), "%s: both ranks' threads read from /proc" % be)
        if not sampled(masks, 2):
            continue
        m0, m1 = masks[0][0], masks[1][0]
        check(all(t == m0 for t in masks[0]) and all(t == m1 for t in masks[1]),
              "%s: every thread of a rank has its mask (%d and %d threads)" % (be, len(masks[0]), len(masks[1])))
        check(not (m0 & m1), "%s: the ranks' CPUs are disjoint: %s and %s" % (be, sorted(m0), sorted(m1)))
        check(m0 == core_of(min(m0)) & set(cpus) and m1 == core_of(min(m1)) & set(cpus),
              "%s: each rank is bound to one whole core (its hyperthreads, per sysfs)" % be)
        l3 = l3_of(min(m0))
        if l3 is not None and len({frozenset(core_of(c) & set(cpus)) for c in l3 if c in cpus}) >= 2:
            check(m1 <= l3, "%s: both ranks in one L3 cache (%s)" % (be, sorted(l3)))
        check("bind=core: rank 0 on CPU" in out and "rank 1 on CPU" in out, "%s: the start line says where" % be)
    # ranks bound apart, through shm's own-core (8 B) and widened (4 MiB) paths: results still right
    for size in ("8", "4M"):
        p = subprocess.run([EXE, "--no-db", "-c", "collective all_reduce ranks=2 size=%s bind=core view=off" % size],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0 and "every rank's result equals the serial computation" in p.stdout,
              "shm all_reduce of %s B on ranks bound apart equals the serial sum" % size)
    return 0


def case_none():
    cpus = set(usable())
    rc, out, masks = run_and_sample(long_bench(2, "backend=tcp bind=none"), 2)
    check(sampled(masks, 2), "both ranks' threads read from /proc")
    if sampled(masks, 2):
        check(all(t == cpus for r in (0, 1) for t in masks[r]),
              "bind=none: every thread keeps the REPL's mask %s: %s" % (sorted(cpus), {r: sorted(masks[r][0]) for r in masks}))
    check("bind=none: ranks not bound" in out, "the start line says they are not bound")
    return 0


def node_of(cpu):
    """The CPUs of cpu's NUMA node, as sysfs says; None where it does not."""
    base = "/sys/devices/system/node"
    for d in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if d.startswith("node") and d[4:].isdigit():
            with open(os.path.join(base, d, "cpulist")) as f:
                cpus = parse_list(f.read())
            if cpu in cpus:
                return cpus
    return None


def case_numa():
    cpus = set(usable())
    if len({frozenset(core_of(c) & cpus) for c in cpus}) < 2:
        print("SKIP: bind=numa maps 2 ranks to 2 cores; this process may use CPUs %s" % sorted(cpus))
        return 77
    # tcp: shm places the threads of ranks that share CPUs itself, for small messages (dist/shm/place.h)
    rc, out, masks = run_and_sample(long_bench(2, "backend=tcp bind=numa"), 2)
    check(sampled(masks, 2), "both ranks' threads read from /proc")
    if sampled(masks, 2):
        for r in (0, 1):
            node = node_of(min(masks[r][0]))
            check(node is not None and masks[r][0] == node & cpus,
                  "rank %d is bound to its NUMA node's CPUs %s: %s" % (r, sorted(node or []), sorted(masks[r][0])))
    check("bind=numa: rank 0 on CPU" in out, "the start line says where")
    return 0


def case_mask():
    cpus = usable()
    # a mask that leaves out the first usable CPU: a binding that ignored it would use that one first
    mask, ranks = (cpus[1:3], 2) if len(cpus) >= 3 else (cpus[-1:], 1)
    if len(cpus) < 2:
        print("SKIP: needs 2 usable CPUs to restrict the REPL to part of them")
        return 77
    want = set(mask)
    mcores = {frozenset(core_of(c) & want) for c in mask}
    if len(mcores) < ranks:
        ranks = 1
    # one rank's all_reduce is a copy that ends in a fraction of a second: a long ddp run stays up to be read
    cmd = long_bench(ranks, "bind=core") if ranks > 1 else long_train()
    rc, out, masks = run_and_sample(cmd, ranks, taskset=",".join(map(str, mask)))
    check(sampled(masks, ranks), "taskset -c %s: the ranks' threads read from /proc" % ",".join(map(str, mask)))
    if sampled(masks, ranks):
        got = [masks[r][0] for r in range(ranks)]
        check(all(g and g <= want for g in got), "each rank within the REPL's mask %s: %s" % (sorted(want), [sorted(g) for g in got]))
        check(ranks == 1 or not (got[0] & got[1]), "ranks on distinct cores within it")
        check(all(g == core_of(min(g)) & want for g in got), "each on one core of the mask")
    check("bind=core: rank 0 on CPU" in out, "the start line says where")
    return 0


def case_few():
    cpu = usable()[0]
    rc, out, masks = run_and_sample(long_bench(2, "bind=core"), 2, taskset=str(cpu))
    check(sampled(masks, 2), "taskset -c %d: both ranks' threads read from /proc" % cpu)
    if sampled(masks, 2):
        check(all(t == {cpu} for r in (0, 1) for t in masks[r]), "the ranks keep the REPL's mask {%d}" % cpu)
    check("2 ranks of 1 core each need 2 cores, and this process may use 1 (CPUs %d): ranks not bound" % cpu in out,
          "the message says there are fewer cores than ranks and nothing was bound")
    return 0


def case_log():
    cpus = usable()
    if len({frozenset(core_of(c) & set(cpus)) for c in cpus}) < 2:
        print("SKIP: needs 2 cores")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "log.db")
        rc, out, masks = run_and_sample(long_bench(2, "bind=core"), 2, db=db)
        check(sampled(masks, 2), "its ranks were read")
        con = sqlite3.connect(db)
        rows = con.execute("SELECT rank, name, json_extract(detail, '$.cpus') FROM events WHERE kind='bind' "
                           "ORDER BY rank").fetchall()
        check(len(rows) == 2 and all(r[1] == "core" for r in rows), "one bind event per rank, policy core: %s" % rows)
        if len(rows) == 2 and sampled(masks, 2):
            check(all(parse_list(rows[r][2]) == masks[r][0] for r in (0, 1)),
                  "the logged CPUs are what /proc shows: %s" % [sorted(masks[r][0]) for r in (0, 1)])
    return 0


def main():
    cases = {"core": case_core, "none": case_none, "numa": case_numa, "mask": case_mask, "few": case_few,
             "log": case_log}
    if CASE not in cases:
        print("unknown case %s: one of %s" % (CASE, ", ".join(cases)))
        return 2
    rc = cases[CASE]()
    if rc == 77:
        return 77
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
