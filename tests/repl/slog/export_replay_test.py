#!/usr/bin/env python3
"""`export session N FILE.ring` writes a script that runs: a session's collective run with step=1 (as a
person at the live view runs it: the logged command keeps its step=1) is exported without step=1, and
the exported script, played by ringside on its own, runs every command and gives the same result.

The session is made by ringside itself (`-c` with a collective); the log's command text then gets the
` step=1` an interactive stepped run records (that run needs a terminal and keys, which a test's `-c`
cannot press). Independent checks: the exported file read as text (no step=1, the comment that says
why), and the replay's output against the first run's (the same reduced buffer).

usage: export_replay_test.py PATH/TO/ringside"""
import os
import sqlite3
import subprocess
import sys
import tempfile

fails = 0


def check(what, cond, detail=""):
    global fails
    print(("ok   " if cond else "FAIL ") + what + ("" if cond or not detail else f"\n     {detail}"))
    if not cond:
        fails += 1


def run(argv, cwd):
    env = dict(os.environ, COLUMNS="100")
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    rs = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="rs-export-") as tmp:
        db = os.path.join(tmp, "s.db")
        line = "collective all_reduce ranks=2 count=4 view=off"
        first = run([rs, "--db", db, "-c", f"model m = mlp 4-3; {line}"], tmp)
        check("the first session runs", first.returncode == 0, first.stdout + first.stderr)
        con = sqlite3.connect(db)
        n = con.execute("UPDATE commands SET text = text || ' step=1' WHERE text LIKE 'collective %'").rowcount
        con.commit()
        sid = con.execute("SELECT max(id) FROM sessions").fetchone()[0]
        con.close()
        check("one logged collective made a stepped one", n == 1, f"{n} rows")
        out = os.path.join(tmp, "s.ring")
        exp = run([rs, "--db", db, "-c", f"export session {sid} {out}"], tmp)
        check("export session runs", exp.returncode == 0, exp.stdout + exp.stderr)
        text = open(out).read() if os.path.exists(out) else ""
        body = [l for l in text.splitlines() if l and not l.startswith("#")]
        check("the exported script has both commands, step=1 left out",
              body == ["model m = mlp 4-3", line], f"{body}")
        check("a comment says step=1 was left out", "step=1 left out" in text, text)
        replay = run([rs, "--no-db", out], tmp)
        check("the exported script plays through (exit 0)", replay.returncode == 0, replay.stdout + replay.stderr)
        res = lambda s: [l for l in s.splitlines() if l.lstrip().startswith("rank ")]
        check("the replay's collective result equals the first run's", res(replay.stdout) == res(first.stdout)
              and res(first.stdout), f"first {res(first.stdout)}\nreplay {res(replay.stdout)}")
    print(f"export-replay: {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
