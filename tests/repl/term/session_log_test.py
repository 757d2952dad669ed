#!/usr/bin/env python3
"""The session log as the ringside binary writes it, read back with the sqlite3 shell (python's sqlite3
module when the shell is not installed).

  scripted  `ringside --db X --keep-going s.ring`: one closed session; the commands in order with
            ok/error (and the error message); a train run 'done' with its options and final figures
            (test_acc); loss metrics at steps 1..N; the `save` artifact with the file's SHA-256.
  kill9     kill -9 while the last command of a script trains: the file passes integrity_check and
            keeps every earlier command; the next start (`ringside --db X -c runs`) shows the run as
            `interrupted`, the crashed session as 'crashed', its command as 'interrupted'.
  replay    `replay 1` re-runs session 1's successful commands into a new session; `export session 1
            F.ring` writes them as a script, which then runs without an error.

Usage: session_log_test.py scripted|kill9|replay PATH/TO/ringside [PATH/TO/sqlite3]"""
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tmux_session import session  # noqa: E402  (the scratch folder, checks and tally the terminal tests share)

SCRIPT = """\
# a scripted session: every line below but this comment is a command
data d = digits n=2000
model m = mlp 784-32-10
train m on d epochs=2 batch=100
train m on d epochz=1
eval m on d
save m m.safetensors
"""
# (text, status, script line) of each command of SCRIPT
SCRIPT_COMMANDS = [
    ("data d = digits n=2000", "ok", 2),
    ("model m = mlp 784-32-10", "ok", 3),
    ("train m on d epochs=2 batch=100", "ok", 4),
    ("train m on d epochz=1", "error", 5),
    ("eval m on d", "ok", 6),
    ("save m m.safetensors", "ok", 7),
]
STEPS = 2 * 2000 // 100  # epochs * samples / batch


class Db:
    """Read-only queries on a session log file."""

    def __init__(self, path, cli):
        self.path, self.cli = path, cli

    def q(self, sql):
        if self.cli:
            r = subprocess.run([self.cli, "-readonly", "-json", self.path, sql], capture_output=True, text=True,
                               timeout=30)
            if r.returncode != 0:
                raise RuntimeError(f"sqlite3 {self.path} {sql!r}: {r.stderr.strip()}")
            return [tuple(row.values()) for row in json.loads(r.stdout)] if r.stdout.strip() else []
        con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
        try:
            return [tuple(r) for r in con.execute(sql)]
        finally:
            con.close()

    def q1(self, sql):
        rows = self.q(sql)
        return rows[0][0] if rows and rows[0] else None


def run(rs, args, cwd, timeout=120):
    t = time.monotonic()
    r = subprocess.run([rs] + args, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout, env=clean_env(cwd))
    return r.returncode, r.stdout + r.stderr, time.monotonic() - t


def clean_env(home):
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME",)}
    env.update(HOME=home, NO_COLOR="1")
    return env


def sha256_of(path):
    if shutil.which("sha256sum"):
        return subprocess.run(["sha256sum", path], capture_output=True, text=True, check=True).stdout.split()[0]
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_scripted(c, rs, db, tmp):
    with open(os.path.join(tmp, "s.ring"), "w") as f:
        f.write(SCRIPT)
    rc, out, secs = run(rs, ["--db", db.path, "--keep-going", "s.ring"], tmp)
    print(f"     (the script ran in {secs:.1f}s)")
    c.ok("with --keep-going the script runs to the end and exits 1 for its one error",
         rc == 1 and "saved m" in out, f"rc {rc}, output:\n{out}")

    sess = db.q("SELECT id, status, ended_at IS NOT NULL, argv FROM sessions")
    c.ok("one session, closed, with an end time and the argv", len(sess) == 1 and sess[0][1:3] == ("closed", 1)
         and "s.ring" in (sess[0][3] or ""), f"sessions: {sess}")
    cmds = db.q("SELECT seq, text, status, source, error, ended_at IS NOT NULL FROM commands WHERE session_id = 1 "
                "ORDER BY seq")
    want = [(i + 1, t, st, f"script:s.ring:{line}") for i, (t, st, line) in enumerate(SCRIPT_COMMANDS)]
    c.ok("the commands in order with status ok/error and source script:FILE:LINE (the comment is not one)",
         [r[:4] for r in cmds] == want, f"commands: {cmds}")
    c.ok("every command has an end time", cmds and all(r[5] == 1 for r in cmds), f"commands: {cmds}")
    err = [r[4] for r in cmds if r[2] == "error"]
    c.ok("the error row keeps the message shown (unknown option 'epochz', did you mean)",
         len(err) == 1 and "epochz" in (err[0] or "") and "epochs=" in (err[0] or ""), f"errors: {err}")
    c.ok("ok rows have no error message", all(r[4] is None for r in cmds if r[2] == "ok"), f"commands: {cmds}")

    runs = db.q("SELECT r.id, r.kind, r.status, r.steps, r.model, r.dataset, r.options, r.final, c.text "
                "FROM runs r LEFT JOIN commands c ON c.id = r.command_id ORDER BY r.id")
    train = [r for r in runs if r[1] == "train"]
    c.ok("one train run, status done, tied to its command", len(train) == 1 and train[0][2] == "done"
         and train[0][8] == SCRIPT_COMMANDS[2][0], f"runs: {runs}")
    if train:
        rid, _, _, steps, model, data, opts, fin, _ = train[0]
        c.ok(f"it ran {STEPS} steps on model m, data d", (steps, model, data) == (STEPS, "m", "d"),
             f"steps {steps}, model {model}, data {data}")
        try:
            o = json.loads(opts or "null")
            f = json.loads(fin or "null")
        except ValueError as e:
            o = f = None
            c.ok("options and final are JSON", False, str(e))
        c.ok("its options JSON holds epochs=2, batch=100 and the defaults (opt adam)",
             isinstance(o, dict) and o.get("epochs") == 2 and o.get("batch") == 100 and o.get("opt") == "adam",
             f"options: {opts}")
        c.ok("its final figures JSON has test_acc in (0.1, 1] and the steps",
             isinstance(f, dict) and isinstance(f.get("test_acc"), (int, float)) and 0.1 < f["test_acc"] <= 1
             and f.get("steps") == STEPS, f"final: {fin}")
        loss = db.q(f"SELECT rank, step, value FROM metrics WHERE run_id = {rid} AND name = 'loss' ORDER BY step")
        c.ok(f"loss metrics: rank 0, steps 1..{STEPS}, one each, finite values",
             [(r[0], r[1]) for r in loss] == [(0, s) for s in range(1, STEPS + 1)]
             and all(isinstance(r[2], float) and 0 < r[2] < 100 for r in loss),
             f"{len(loss)} rows, steps {[r[1] for r in loss][:5]}...{[r[1] for r in loss][-3:]}")
        tacc = db.q(f"SELECT epoch, value FROM metrics WHERE run_id = {rid} AND name = 'test_acc' ORDER BY step")
        c.ok("a test_acc metric per epoch, the last equal to the final figure",
             len(tacc) == 2 and isinstance(f, dict) and abs(tacc[-1][1] - f.get("test_acc", -1)) < 1e-5,
             f"test_acc rows: {tacc}, final: {fin}")
    ev = [r for r in runs if r[1] == "eval"]
    c.ok("the eval is a run too (kind eval, done, test_acc)", len(ev) == 1 and ev[0][2] == "done"
         and "test_acc" in (ev[0][7] or ""), f"runs: {runs}")

    path = os.path.join(tmp, "m.safetensors")
    arts = db.q("SELECT a.path, a.sha256, a.bytes, a.run_id, c.text, a.session_id FROM artifacts a "
                "LEFT JOIN commands c ON c.id = a.command_id")
    if c.ok("save wrote the file", os.path.isfile(path)):
        want_sha = sha256_of(path)
        c.ok("one artifact row for the save: absolute path, its command, sha256 = sha256sum of the file, size",
             len(arts) == 1 and arts[0][0] == os.path.realpath(path) and arts[0][1] == want_sha
             and arts[0][2] == os.path.getsize(path) and arts[0][4] == "save m m.safetensors" and arts[0][5] == 1,
             f"artifacts: {arts}; sha256sum {want_sha}, {os.path.getsize(path)} bytes")
    ver = db.q1("PRAGMA user_version")
    c.ok("the file carries its schema version (PRAGMA user_version >= 1)", isinstance(ver, int) and ver >= 1,
         f"user_version {ver}")


def poll(what, cond, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            v = cond()
        except (RuntimeError, sqlite3.Error):
            v = None  # the file or its tables may not exist yet
        if v:
            return v
        time.sleep(0.05)
    return None


def test_kill9(c, rs, db, tmp):
    lines = ["data d = digits n=20000", "model m = mlp 784-256-10", "say \"a long training follows\"",
             "train m on d epochs=1000"]
    with open(os.path.join(tmp, "long.ring"), "w") as f:
        f.write("\n".join(lines) + "\n")
    log = open(os.path.join(tmp, "ringside.out"), "w")
    p = subprocess.Popen([rs, "--db", db.path, "long.ring"], cwd=tmp, stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT, env=clean_env(tmp))
    try:
        t0 = time.monotonic()
        running = poll("the train run 'running'",
                       lambda: db.q1("SELECT id FROM runs WHERE kind = 'train' AND status = 'running'"), 120)
        c.ok("the train run shows as 'running' in the log while it trains (read-only poll)", bool(running),
             f"runs: {db.q('SELECT * FROM runs') if os.path.exists(db.path) else 'no file'}")
        # Let some metrics reach the file (they are written every half second), then kill.
        nmet = poll("loss metrics", lambda: db.q1("SELECT count(*) FROM metrics WHERE name = 'loss'"), 10) or 0
        alive = p.poll() is None
        c.ok("ringside is still training when killed (the script is long enough)", alive,
             f"it exited with {p.returncode} after {time.monotonic() - t0:.1f}s")
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        print(f"     (killed {time.monotonic() - t0:.1f}s after the start, {nmet} loss rows on disk)")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()
    c.ok("the process died of SIGKILL", p.returncode == -signal.SIGKILL, f"returncode {p.returncode}")

    ic = db.q("PRAGMA integrity_check")
    c.ok("the database opens and PRAGMA integrity_check says ok", ic == [("ok",)], f"integrity_check: {ic}")
    cmds = db.q("SELECT seq, text, status FROM commands WHERE session_id = 1 ORDER BY seq")
    c.ok("every command is there, in order: the earlier ones ok, the training one still 'running'",
         cmds == [(i + 1, t, "ok" if i + 1 < len(lines) else "running") for i, t in enumerate(lines)],
         f"commands: {cmds}")
    sess = db.q("SELECT id, status FROM sessions")
    c.ok("the killed session is still 'open' before the next start", sess == [(1, "open")], f"sessions: {sess}")
    kept = db.q1("SELECT count(*) FROM metrics WHERE name = 'loss'") or 0
    c.ok("the loss metrics written before the kill are kept", kept >= nmet > 0, f"{kept} rows, {nmet} seen")

    rc, out, secs = run(rs, ["--db", db.path, "-c", "runs"], tmp)
    row = [l for l in out.split("\n") if " train " in l]
    c.ok("the next start (`ringside --db X -c runs`) shows the run as interrupted",
         rc == 0 and len(row) == 1 and "interrupted" in row[0], f"rc {rc}, output:\n{out}")
    runs = db.q("SELECT id, status, ended_at IS NOT NULL FROM runs")
    c.ok("in the log the run is 'interrupted', with an end time", runs == [(running, "interrupted", 1)],
         f"runs: {runs}")
    sess = db.q("SELECT id, status, ended_at IS NOT NULL FROM sessions ORDER BY id")
    c.ok("the killed session is 'crashed' (with a last sign of life), the new one 'closed'",
         sess == [(1, "crashed", 1), (2, "closed", 1)], f"sessions: {sess}")
    st = db.q1(f"SELECT status FROM commands WHERE session_id = 1 AND seq = {len(lines)}")
    c.ok("the training command is 'interrupted'", st == "interrupted", f"status {st}")
    rc, out, _ = run(rs, ["--db", db.path, "-c", "runs"], tmp)
    sess = db.q("SELECT id, status FROM sessions ORDER BY id")
    c.ok("a third start changes nothing of the past sessions",
         rc == 0 and sess == [(1, "crashed"), (2, "closed"), (3, "closed")]
         and db.q("SELECT status FROM runs") == [("interrupted",)], f"rc {rc}, sessions {sess}")


def test_replay(c, rs, db, tmp):
    with open(os.path.join(tmp, "s.ring"), "w") as f:
        f.write(SCRIPT)
    rc, out, _ = run(rs, ["--db", db.path, "--keep-going", "s.ring"], tmp)
    c.ok("session 1: the script (with one error) ran", rc == 1 and "saved m" in out, f"rc {rc}, output:\n{out}")
    good = [t for t, st, _ in SCRIPT_COMMANDS if st == "ok"]

    rc, out, secs = run(rs, ["--db", db.path, "-c", "replay 1"], tmp)
    c.ok(f"`replay 1` succeeds and says how many commands ran ({secs:.1f}s)",
         rc == 0 and f"replayed {len(good)} commands of session 1, 0 failed" in out, f"rc {rc}, output:\n{out}")
    cmds = db.q("SELECT text, status, source FROM commands WHERE session_id = 2 ORDER BY seq")
    c.ok("session 2 holds `replay 1` then session 1's successful commands, in order, from replay:1",
         cmds == [("replay 1", "ok", "-c")] + [(t, "ok", "replay:1") for t in good], f"commands: {cmds}")
    runs = db.q("SELECT session_id, kind, status, options FROM runs WHERE kind = 'train' ORDER BY id")
    c.ok("the replay trained again: a second train run, done, with the same options",
         len(runs) == 2 and runs[1][:3] == (2, "train", "done") and runs[0][3] == runs[1][3], f"runs: {runs}")
    rc, out, _ = run(rs, ["--db", db.path, "-c", "replay 42"], tmp)
    c.ok("`replay 42` (no such session) is an error", rc == 1 and "replay" in out, f"rc {rc}, output:\n{out}")

    script = os.path.join(tmp, "again.ring")
    rc, out, _ = run(rs, ["--db", db.path, "-c", "export session 1 again.ring"], tmp)
    c.ok("`export session 1 again.ring` succeeds", rc == 0 and os.path.isfile(script), f"rc {rc}, output:\n{out}")
    if os.path.isfile(script):
        text = open(script).read()
        body = [l for l in text.split("\n") if l.strip() and not l.lstrip().startswith("#")]
        c.ok("the script holds the successful commands of session 1 in order (the error left out)", body == good,
             f"script:\n{text}")
        art = db.q("SELECT kind, sha256 FROM artifacts WHERE path = '%s'" % os.path.realpath(script).replace("'", "''"))
        c.ok("the exported script is logged as an artifact (kind script, its sha256)",
             art == [("script", sha256_of(script))], f"artifacts: {art}")
        before = db.q1("SELECT max(id) FROM sessions")
        rc, out, _ = run(rs, ["--db", db.path, "again.ring"], tmp)
        c.ok("the exported script runs again without an error (no --keep-going)", rc == 0, f"rc {rc}, output:\n{out}")
        sid = db.q1("SELECT max(id) FROM sessions")
        cmds = db.q(f"SELECT text, status FROM commands WHERE session_id = {sid} ORDER BY seq")
        c.ok("its session logs the same commands, all ok", sid == before + 1 and cmds == [(t, "ok") for t in good],
             f"session {sid}: {cmds}")


def main():
    tests = {"scripted": test_scripted, "kill9": test_kill9, "replay": test_replay}
    if len(sys.argv) < 3 or sys.argv[1] not in tests:
        print(__doc__)
        return 2
    rs = os.path.abspath(sys.argv[2])
    cli = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else shutil.which("sqlite3")
    if not cli:
        try:
            sqlite3.connect(":memory:").execute("SELECT json_valid('{}')")
        except sqlite3.Error as e:
            print(f"SKIP: no sqlite3 shell, and python's sqlite3 module cannot read the log ({e})")
            return 77
        print("(no sqlite3 shell: reading the log with python's sqlite3 module)")
    with session(rs, f"rs-slog-{sys.argv[1]}-", what=f"the {sys.argv[1]} test ran to its end",
                 catch=(RuntimeError, subprocess.TimeoutExpired, OSError)) as s:
        tests[sys.argv[1]](s.c, rs, Db(s.db, cli), s.tmp)
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
