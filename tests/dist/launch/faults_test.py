#!/usr/bin/env python3
"""Faults found in a second, and refusals before any rank starts, measured from outside on a REPL
that runs a job across ranks:
  kill     a rank killed with SIGKILL mid-training is reported naming the rank, its signal and the last
           checkpoint, soon after the kill (the bound is loose: it catches the old 10 s grace, not a CPU);
  stop     a rank stopped with SIGSTOP is named as the hung rank (not the rank that timed out waiting for
           it) and the REPL comes back near the group's timeout, not a grace period later;
  spin     a rank that computes forever (RINGSIDE_FAULT=1:spin@STEP, shm and tcp) is named as the hung rank
           with what it and the rank that waited were doing, soon after the timeout, and the session log's
           run row says the same;
  refuse   timeout=0, iters=-1 and a resume= file that is not there are refused at the prompt: the
           message, no rendezvous, and no child process of the REPL ever seen in /proc;
  worlds   ranks started by hand with different WORLD_SIZE values say the world sizes differ;
  mpi      SIGKILL of the REPL during a backend=mpi run leaves none of Open MPI's files behind.
The figures (seconds from the kill or the timeout to the report) are printed for the report.

usage: faults_test.py CASE RINGSIDE"""
import os
import re
import select
import signal
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


def children(pid):
    """pid's children (all threads') from /proc."""
    kids = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:
        pass
    return kids


def rank_of(pid):
    """RANK= from a rank worker's environment, or None when pid is not one."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if b"--worker" not in f.read():
                return None
        with open("/proc/%d/environ" % pid, "rb") as f:
            for kv in f.read().split(b"\0"):
                if kv.startswith(b"RANK="):
                    return int(kv[5:])
    except (OSError, ValueError):
        pass
    return None


class Repl:
    """A ringside REPL on pipes, read line by line with a clock."""

    def __init__(self, lines, tmp, env=None):
        self.p = subprocess.Popen([EXE, "--keep-going", "--db", os.path.join(tmp, "log.db")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, bufsize=1,
                                  env=dict(os.environ, COLUMNS="1000", **(env or {})))
        self.out = ""
        self.fd = self.p.stdout.fileno()
        self.p.stdin.write(lines)
        self.p.stdin.flush()

    def read_until(self, pred, limit):
        """Reads lines until pred(out) holds or limit seconds pass; the time it held, or None."""
        t0 = time.time()
        while time.time() - t0 < limit:
            if pred(self.out):
                return time.time()
            if not self.pump(0.05):
                break
        return time.time() if pred(self.out) else None

    def pump(self, wait):
        """Reads what the REPL wrote within wait seconds (raw reads: select and a buffered reader disagree
        about what is left); False at end of file."""
        if select.select([self.fd], [], [], wait)[0]:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return False
            self.out += chunk.decode(errors="replace")
        return True

    def ranks(self, n, limit=60):
        """{rank: pid} once n rank workers run."""
        t0 = time.time()
        while time.time() - t0 < limit:
            found = {}
            for k in children(self.p.pid):
                r = rank_of(k)
                if r is not None:
                    found[r] = k
            if len(found) == n:
                return found
            time.sleep(0.05)
        return {}

    def close(self):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        while self.pump(10):
            pass
        self.p.wait(timeout=60)
        print(self.out)


SETUP = "data d = digits n=3000 seed=1\nmodel m = mlp 784-64-10 seed=1\n"


def case_kill(tmp):
    ck = os.path.join(tmp, "c.safetensors")
    r = Repl(SETUP + "train m on d mode=ddp ranks=2 epochs=500 batch=32 view=off ckpt=%s ckpt_every=5\n" % ck, tmp)
    check(r.read_until(lambda o: "epoch 2:" in o, 90) is not None and os.path.exists(ck),
          "the run is past a checkpoint")
    pids = r.ranks(2)
    check(len(pids) == 2, "two ranks run: %s" % pids)
    if len(pids) != 2:
        r.p.kill()
        r.close()
        return
    t_kill = time.time()
    os.kill(pids[1], signal.SIGKILL)
    t_seen = r.read_until(lambda o: "resume=" in o or "error" in o, 30)
    r.close()
    dt = (t_seen or time.time()) - t_kill
    print("figure: SIGKILL of rank 1 -> report: %.2f s" % dt)
    check("rank 1 was killed by signal 9 (SIGKILL)" in r.out, "the killed rank is named with its signal")
    check("resume=" + ck in r.out, "the user is pointed at the last checkpoint")
    check(t_seen is not None and dt < 3, "the report came %.2f s after the kill (bound 3 s; the old grace was 10)" % dt)


def case_stop(tmp):
    r = Repl(SETUP + "train m on d mode=ddp ranks=2 epochs=500 batch=32 view=off timeout=3s\n", tmp)
    check(r.read_until(lambda o: "epoch 2:" in o, 90) is not None, "the run is under way")
    pids = r.ranks(2)
    check(len(pids) == 2, "two ranks run: %s" % pids)
    if len(pids) != 2:
        r.p.kill()
        r.close()
        return
    t_stop = time.time()
    os.kill(pids[1], signal.SIGSTOP)
    t_seen = r.read_until(lambda o: "error" in o, 60)
    r.close()
    dt = (t_seen or time.time()) - t_stop
    print("figure: SIGSTOP of rank 1 with timeout=3s -> report: %.2f s" % dt)
    m = re.search(r"^.*error.*$", r.out, re.M)
    line = m.group(0) if m else ""
    check(re.search(r"rank 1 (hung|stopped)", line) is not None and "rank 0 exited" not in line,
          "the hung rank is named, not the one that waited for it: %s" % line)
    check("SIGSTOP" in line, "and how it hung (stopped by SIGSTOP)")
    check(t_seen is not None and dt < 3 + 4, "the REPL came back %.2f s after the stop (timeout 3 s; bound 7 s)" % dt)
    for p in pids.values():
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def case_spin(tmp):
    """A hang that is no signal: rank 1 computes forever after step 5's forward (the testing aid
    RINGSIDE_FAULT=1:spin@5, which says so on its stderr) while rank 0 waits in the step's all_reduce.
    The report names rank 1 as hung, with its step, and rank 0 as the one that gave up in an all_reduce,
    within the timeout and a loose bound; the run's row in the session log carries the same words."""
    for backend in ("shm", "tcp"):
        os.mkdir(os.path.join(tmp, backend))  # a session log each
        r = Repl(SETUP + "train m on d mode=ddp ranks=2 backend=%s epochs=500 batch=32 view=off timeout=2s\n"
                 "sql \"select status, error from runs\"\n" % backend, os.path.join(tmp, backend),
                 env={"RINGSIDE_FAULT": "1:spin@5"})
        t_hang = r.read_until(lambda o: "RINGSIDE_FAULT: computing forever" in o, 90)
        check(t_hang is not None, "%s: rank 1 says it spins" % backend)
        t_seen = r.read_until(lambda o: "error" in o, 60)
        r.close()
        dt = (t_seen or time.time()) - (t_hang or time.time())
        print("figure: %s: rank 1 busy-looping with timeout=2s -> report: %.2f s" % (backend, dt))
        m = re.search(r"^.*error.*$", r.out, re.M)
        line = m.group(0) if m else ""
        check(line.find("rank 1 hung: no progress for") >= 0 and "rank 0 exited" not in line,
              "%s: the hung rank is named, not the one that waited for it: %s" % (backend, line))
        check("(last: step 5, after forward; not in a collective" in line,
              "%s: with where it stopped (step 5, after its forward, outside any collective)" % backend)
        check(re.search(r"rank 0 gave up waiting for it at [0-9.]+ s \(step \d+, after \w+; in all_reduce #\d+ of "
                        r"[0-9.]+ [KM]iB(; exited with status 1)?\)", line) is not None,
              "%s: and the rank that gave up, in which collective" % backend)
        check(t_seen is not None and dt < 2 + 5, "%s: reported %.2f s after the hang (timeout 2 s; bound 7 s)"
              % (backend, dt))
        rows = [ln for ln in r.out.splitlines() if ln.startswith("failed  ")]
        said = line.split("error: train: ", 1)[-1]
        check(len(rows) == 1 and rows[0][len("failed  "):].strip() == said,
              "%s: the session log's run is failed with the same report: %s" % (backend, rows))


REFUSALS = [
    ("collective all_reduce ranks=2 timeout=0", "timeout"),
    ("train m on d mode=ddp ranks=2 timeout=0", "timeout"),
    ("bench all_reduce ranks=2 iters=-1", "iters"),
    ("bench all_reduce ranks=2 iters=1000000", "iters"),
    ("train m on d mode=ddp ranks=2 resume=/nonexistent/ck.safetensors", "/nonexistent/ck.safetensors"),
]


def case_refuse(tmp):
    r = Repl(SETUP, tmp)
    r.read_until(lambda o: "model m:" in o, 30)
    before = set(children(r.p.pid))
    for cmd, word in REFUSALS:
        at = len(r.out)
        r.p.stdin.write(cmd + "\n")
        r.p.stdin.flush()
        seen = set()
        t0 = time.time()
        while time.time() - t0 < 10 and "^" not in r.out[at:]:
            seen |= set(children(r.p.pid)) - before
            r.pump(0.005)
        seen |= set(children(r.p.pid)) - before
        mine = r.out[at:]
        err = [ln for ln in mine.splitlines() if "error" in ln]
        check(err and word in err[0], "%s: refused naming %s: %s" % (cmd, word, err[:1]))
        check("rendezvous" not in mine and "rank 0" not in mine, "%s: no rank met" % cmd)
        check(not seen, "%s: no process spawned (children seen: %s)" % (cmd, sorted(seen)))
    r.close()


def case_worlds(tmp):
    """Ranks started by hand with different WORLD_SIZE values are told the sizes differ, not that a rank
    is missing."""
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    procs = []
    for rank, world in ((0, 2), (1, 3)):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([EXE, "--worker", "collective", "op=all_reduce", "backend=tcp", "timeout=2"],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=60)[0] for p in procs]
    print("".join(outs))
    for rank, out in enumerate(outs):
        check(procs[rank].returncode != 0, "rank %d fails" % rank)
        check("the world sizes differ" in out and "WORLD_SIZE=2" in out and "WORLD_SIZE=3" in out,
              "rank %d says the world sizes differ, naming both" % rank)
        check("missing rank" not in out, "rank %d does not call it a missing rank" % rank)


def case_mpi(tmp):
    """SIGKILL of the REPL during a backend=mpi run: mpirun is told with a signal it handles (SIGTERM as
    its parent-death signal), so Open MPI's shared-memory segments and session directory go with it.
    The files checked are exactly this run's: the segments its ranks have mapped (/proc/PID/maps) and
    the session directory named after its mpirun's pid."""
    import glob
    import shutil
    if not shutil.which("mpirun"):
        print("SKIP: mpirun is not installed")
        sys.exit(77)
    probe = subprocess.run([EXE, "--no-db", "-c", "backends"], capture_output=True, text=True)
    if "  mpi " not in probe.stdout:
        print("SKIP: this build has no mpi backend")
        sys.exit(77)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    repl = subprocess.Popen([EXE, "--no-db", "-c", "bench all_reduce ranks=2 backend=mpi sizes=4M..4M iters=200000 "
                             "view=off"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    mine, mpirun, t0 = set(), None, time.time()
    while time.time() - t0 < 60 and len(mine) < 2:
        time.sleep(0.2)
        for k in children(repl.pid):
            try:
                with open("/proc/%d/cmdline" % k, "rb") as f:
                    if b"mpirun" in f.read().split(b"\0")[0]:
                        mpirun = k
            except OSError:
                pass
        mine = set()
        for k in children(mpirun) if mpirun else []:
            try:
                with open("/proc/%d/maps" % k) as f:
                    mine |= set(re.findall(r"(/dev/shm/vader_segment\.\S+)", f.read()))
            except OSError:
                pass
    sessions = glob.glob("/tmp/ompi.*/pid.%d" % mpirun) if mpirun else []
    print("mpirun %s, its segments %s, its session directory %s" % (mpirun, sorted(mine), sessions))
    check(mpirun is not None and len(mine) >= 2, "mpirun runs 2 ranks with their vader segments mapped")
    repl.kill()
    repl.wait()
    t0 = time.time()
    while mpirun and time.time() - t0 < 10 and os.path.exists("/proc/%d" % mpirun):
        time.sleep(0.1)
    time.sleep(0.3)
    print("mpirun gone %.2f s after the REPL's SIGKILL" % (time.time() - t0))
    left = [f for f in sorted(mine) + sessions if os.path.exists(f)]
    check(not left, "nothing of Open MPI's is left (%s)" % left)
    for f in left:  # leave the machine clean even when the check failed
        shutil.rmtree(f, ignore_errors=True) if os.path.isdir(f) else os.unlink(f)


with tempfile.TemporaryDirectory() as tmp:
    globals()["case_" + CASE](tmp)
print("%d failed" % failures)
sys.exit(1 if failures else 0)
