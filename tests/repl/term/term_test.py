#!/usr/bin/env python3
"""The REPL in a real terminal: ringside runs in a detached tmux session (120x40) and gets keystrokes
through `tmux send-keys`; what it shows is read back with `tmux capture-pane`.

Checks, in two sessions sharing one HOME (so the history file carries over):
  session 1: completion of a command (tra<Tab> -> "train "), of an option (ep<Tab> -> "epochs="),
    Ctrl-C on a half-typed and on an empty line (fresh prompt, the typed text is dropped), history
    recall with Up, Ctrl-C during a training run (cancellation message, prompt back, process alive,
    the next command works), `quit` exits 0; the session log then holds the run as 'cancelled', its
    command as 'cancelled', the commands around it as 'ok' and the session as 'closed'.
  session 2: Up recalls the last command of session 1 (persistent history); Ctrl-D exits 0 and the
    session is 'closed'.
Every wait polls the screen against a deadline. Exit 77 (skip) when tmux is missing.

Usage: term_test.py PATH/TO/ringside [PATH/TO/sqlite3]"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tmux_session import PROMPT, Fail, at_prompt, n_prompts, ringside_arg, run_line, session, wait  # noqa: E402


def query(db, sqlite3_cli, sql):
    """Rows of a read-only query, through the sqlite3 shell when there is one, else python's module."""
    if sqlite3_cli:
        r = subprocess.run([sqlite3_cli, "-readonly", "-json", db, sql], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise Fail(f"sqlite3 {db} {sql!r}: {r.stderr.strip()}")
        return [tuple(row.values()) for row in json.loads(r.stdout)] if r.stdout.strip() else []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in con.execute(sql)]
    finally:
        con.close()


def main():
    rs = ringside_arg(__doc__, "real-terminal test")
    sqlite3_cli = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else shutil.which("sqlite3")
    with session(rs, "rs-term-") as s:
        c, db, home = s.c, s.db, s.home
        # ---- session 1 ----
        term = s.open("s1")
        wait("the banner and a prompt", lambda: any("Type `help`" in l for l in term.screen()) and at_prompt(term),
             term, 30)
        c.ok("the banner says how to start (help, play tour)",
             any("help" in l and "play tour" in l for l in term.screen()))

        # (a) command completion
        term.text("tra")
        wait("'tra' on the prompt line", lambda: at_prompt(term, "tra"), term)
        term.keys("Tab")
        c.wait_ok("tra<Tab> completes to 'train ' (one space, cursor after it)", lambda: at_prompt(term, "train "),
                  term, detail=lambda: "cursor x=%d, line %r" % term.cursor())
        term.keys("C-u")
        wait("the line cleared by C-u", lambda: at_prompt(term), term)

        # (b) option completion
        term.text("train m on d ep")
        wait("the half option typed", lambda: at_prompt(term, "train m on d ep"), term)
        term.keys("Tab")
        c.wait_ok("'train m on d ep'<Tab> completes to 'epochs=' (no space after '=')",
                  lambda: at_prompt(term, "train m on d epochs="), term, detail=lambda: "cursor x=%d, line %r" % term.cursor())
        term.keys("C-u")
        wait("the line cleared by C-u", lambda: at_prompt(term), term)

        # (e) Ctrl-C on a half-typed line, then on an empty one: a fresh prompt each time, nothing runs
        before = n_prompts(term)
        term.text("xyz")
        wait("'xyz' on the prompt line", lambda: at_prompt(term, "xyz"), term)
        term.keys("C-c")
        wait("a fresh prompt after Ctrl-C on a half-typed line",
             lambda: n_prompts(term) == before + 1 and at_prompt(term), term, 5)
        c.ok("Ctrl-C on a half-typed line: '^C' and a fresh empty prompt",
             any(l == f"{PROMPT} xyz^C" for l in term.screen()))
        term.keys("C-c")
        wait("a fresh prompt after Ctrl-C on an empty line",
             lambda: n_prompts(term) == before + 2 and at_prompt(term), term, 5)
        c.ok("Ctrl-C on an empty line: a fresh prompt, ringside still running", term.alive(), term.state())
        out = run_line(term, "ls")
        c.ok("the dropped 'xyz' does not come back: `ls` runs alone",
             any("nothing yet" in l for l in out), f"after `ls`: {out}")

        # (c) history recall
        run_line(term, "set seed=7")
        term.keys("Up")
        c.wait_ok("Up recalls the last command ('set seed=7')", lambda: at_prompt(term, "set seed=7"), term)
        term.keys("Up")
        c.wait_ok("Up again recalls the one before ('ls')", lambda: at_prompt(term, "ls"), term)
        term.keys("C-u")
        wait("the line cleared by C-u", lambda: at_prompt(term), term)

        # (d) Ctrl-C during a training run
        run_line(term, "data d = digits n=20000", expect="data d:", timeout=60)
        run_line(term, "model m = mlp 784-256-10", expect="model m:")
        train = "train m on d epochs=50"  # ~0.15 s an epoch on a fast CPU: long enough to catch
        term.text(train)
        wait("the train command typed", lambda: at_prompt(term, train), term)
        term.keys("Enter")
        t_train = time.monotonic()
        def progress():  # the bar of epoch 1 past 10%: the step loop is running
            for l in term.screen():
                m = re.search(r"epoch 1/50 \[[#-]*\] +(\d+)%", l)
                if m and int(m.group(1)) >= 10:
                    return True
            return False

        wait("training progress (the bar of epoch 1/50 at 10% or more)", progress, term, 60)
        c.ok("training is under way (no prompt yet)", not at_prompt(term))
        term.keys("C-c")
        t_cc = time.monotonic()

        def cancelled():
            scr = term.screen()
            i = [k for k, l in enumerate(scr) if l.startswith("cancelled: stopped after step")]
            return i and any(l.startswith(PROMPT) for l in scr[i[-1] + 1:]) and at_prompt(term)

        got = c.wait_ok("Ctrl-C during training: 'cancelled: stopped after step N', then the prompt", cancelled, term, 15)
        print(f"     (prompt back {time.monotonic() - t_cc:.2f}s after Ctrl-C, sent {t_cc - t_train:.1f}s into the run)")
        c.ok("the workbench survived Ctrl-C (process alive)", term.alive(), term.state())
        if got:
            out = run_line(term, "ls", expect="model")
            c.ok("the next command works (`ls` lists m and d)",
                 any(l.split()[:2] == ["m", "model"] for l in out) and any(l.split()[:2] == ["d", "data"] for l in out),
                 f"after `ls`: {out}")
        # quit
        wait("an empty prompt before quit", lambda: at_prompt(term), term, 30)
        term.text("quit")
        term.keys("Enter")
        c.wait_ok("ringside exits after quit", term.dead, term, 15, detail=term.state)
        c.ok("`quit` exits with status 0", term.dead_status() == "0", f"status {term.dead_status()!r}")
        s.close()

        # the session log of session 1
        sess = query(db, sqlite3_cli, "SELECT id, status FROM sessions ORDER BY id")
        c.ok("session 1 is in the log, closed", sess == [(1, "closed")], f"sessions: {sess}")
        cmds = query(db, sqlite3_cli, "SELECT text, status, source FROM commands WHERE session_id = 1 ORDER BY seq")
        want = [("ls", "ok", "tty"), ("set seed=7", "ok", "tty"), ("data d = digits n=20000", "ok", "tty"),
                ("model m = mlp 784-256-10", "ok", "tty"), (train, "cancelled", "tty"), ("ls", "ok", "tty"),
                ("quit", "ok", "tty")]
        c.ok("the commands are logged in order; the training command as 'cancelled', nothing of 'xyz'",
             cmds == want, f"commands: {cmds}")
        runs = query(db, sqlite3_cli, "SELECT kind, status, steps, json_extract(final, '$.steps') FROM runs")
        c.ok("the run is logged as a train run with status 'cancelled' and its steps",
             len(runs) == 1 and runs[0][:2] == ("train", "cancelled") and (runs[0][2] or 0) > 0, f"runs: {runs}")
        loss = query(db, sqlite3_cli, "SELECT count(*), max(step) FROM metrics WHERE name = 'loss'")
        c.ok("its loss metrics go up to the step where it stopped",
             runs and loss and loss[0][0] > 0 and loss[0][1] == runs[0][2], f"loss rows: {loss}, run: {runs}")
        hist = os.path.join(home, "data", "ringside", "history")
        hl = open(hist).read().split("\n") if os.path.exists(hist) else []
        c.ok("the history file is in $XDG_DATA_HOME/ringside and ends with quit",
             "quit" in hl and train in hl, f"{hist}: {hl}")

        # ---- session 2: persistent history, Ctrl-D ----
        term = s.open("s2")
        wait("the banner and a prompt", lambda: at_prompt(term), term, 30)
        term.keys("Up")
        c.wait_ok("in a new session, Up recalls the last command of the previous one ('quit')",
                  lambda: at_prompt(term, "quit"), term)
        term.keys("C-u")
        wait("the line cleared by C-u", lambda: at_prompt(term), term)
        term.keys("C-d")
        c.wait_ok("ringside exits on Ctrl-D", term.dead, term, 15, detail=term.state)
        c.ok("Ctrl-D on an empty line exits with status 0", term.dead_status() == "0",
             f"status {term.dead_status()!r}")
        s.close()
        sess = query(db, sqlite3_cli, "SELECT id, status FROM sessions ORDER BY id")
        c.ok("session 2 is closed after Ctrl-D", sess == [(1, "closed"), (2, "closed")], f"sessions: {sess}")
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
