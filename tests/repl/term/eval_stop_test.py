#!/usr/bin/env python3
"""`eval` and `train` in a real terminal (tmux, 120x40; the helpers are tmux_session.py's):

  - `eval g on t` on a GPT over the whole validation split shows a progress bar ("eval N/M [##--]")
    while it runs, and Ctrl-C stops it within a few seconds: "cancelled: eval of g ...", the prompt
    back, ringside alive, the next command works, and the session log holds the eval run 'cancelled'.
  - `train m on d steps=60` stops inside its epoch: its bar is finished with a newline, so the summary
    starts a line of its own ("trained m on d: 60 steps"), and the test accuracy is printed.
Exit 77 (skip) when tmux is missing.

usage: eval_stop_test.py PATH/TO/ringside"""
import os
import re
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tmux_session import at_prompt, ringside_arg, run_line, session, wait  # noqa: E402


def main():
    rs = ringside_arg(__doc__, "real-terminal test")
    with session(rs, "rs-evalstop-", what="the session went as planned") as s:
        c, db = s.c, s.db
        term = s.open("s1")
        wait("the banner and a prompt", lambda: at_prompt(term), term, 30)
        run_line(term, "set threads=1")
        # a steps= run inside an epoch: the bar is finished, the summary on its own line
        run_line(term, "data d = digits n=4000", expect="data d:", timeout=60)
        run_line(term, "model m = mlp 784-64-10", expect="model m:")
        out = run_line(term, "train m on d steps=60", expect="trained m on d", timeout=60)
        c.ok("steps=60: the summary starts its own line ('trained m on d: 60 steps')",
             any(l.startswith("trained m on d: 60 steps") for l in out), f"after the command: {out}")
        c.ok("steps=60: the bar's line ends with the bar's figures, nothing glued after them",
             not any("samples/st" in l or ("ETA" in l and "trained" in l) for l in out), f"{out}")
        c.ok("steps=60 under one epoch with eval on: the test accuracy is printed",
             any(re.search(r"test accuracy 0\.\d+", l) for l in out), f"{out}")

        # eval on a GPT over the validation split: progress, then Ctrl-C
        out = run_line(term, "data t = text ctx=64", expect="data t:", timeout=60)
        m = re.search(r"(\d+) distinct", " ".join(out))
        vocab = m.group(1) if m else "50"
        run_line(term, f"model g = gpt layers=4 heads=4 dim=128 ctx=64 vocab={vocab}", expect="model g:")
        line = "eval g on t batch=8"
        term.text(line)
        wait("the eval command typed", lambda: at_prompt(term, line), term)
        term.keys("Enter")

        def progress():
            for l in term.screen():
                m = re.search(r"eval (\d+)/(\d+) \[[#-]*\]", l)
                if m and int(m.group(1)) > 0:
                    return m.groups()
            return None

        got = c.wait_ok("eval shows a progress bar ('eval N/M [##--]') while it runs", progress, term, 60)
        c.ok("eval is still running (no prompt yet)", not at_prompt(term))
        term.keys("C-c")
        t_cc = time.monotonic()

        def cancelled():
            scr = term.screen()
            i = [k for k, l in enumerate(scr) if l.startswith("cancelled: eval of g")]
            return i and at_prompt(term)

        got = c.wait_ok("Ctrl-C during eval: 'cancelled: eval of g ...', then the prompt", cancelled, term, 20)
        if got:  # a figure to read, not a check: tests assert no timings (the wait above has its deadline)
            print(f"     (prompt back {time.monotonic() - t_cc:.2f}s after Ctrl-C)")
        c.ok("ringside survived Ctrl-C (process alive)", term.alive(), term.state())
        out = run_line(term, "ls", expect="model")
        c.ok("the next command works (`ls` lists g)", any(l.split()[:2] == ["g", "model"] for l in out), f"{out}")
        s.quit()
        s.close()
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        runs = con.execute("SELECT kind, status FROM runs WHERE kind = 'eval'").fetchall()
        con.close()
        c.ok("the eval run is logged 'cancelled'", runs == [("eval", "cancelled")], f"runs: {runs}")
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
