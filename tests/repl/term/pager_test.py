#!/usr/bin/env python3
"""`help` at a terminal (tmux, 120x40; the helpers are tmux_session.py's):

  - `help train` is longer than the 40-row screen, so it goes through the pager (less): the pane shows
    the help's first line and less's ':' prompt on the last row, not a prompt of ringside; q leaves it
    and ringside's prompt is back, alive.
  - `help train fp16` (a few options about fp16) fits and is printed directly, with precision=,
    loss_scale= and inject_inf= and no option that does not mention fp16 (lr=).
  - Through a pipe (no terminal) `help train` is printed whole, never paged: the golden test's `help`
    outputs hold that.
Exit 77 (skip) when tmux or less is missing.

usage: pager_test.py PATH/TO/ringside"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tmux_session import at_prompt, ringside_arg, run_line, session, wait  # noqa: E402


def main():
    rs = ringside_arg(__doc__, "real-terminal pager test", ("tmux", "less"))
    with session(rs, "rs-pager-", db=False, unset=("PAGER", "LESS")) as s:
        c = s.c
        term = s.open("p1")
        wait("the banner and a prompt", lambda: at_prompt(term), term, 30)
        term.text("help train")
        wait("'help train' typed", lambda: at_prompt(term, "help train"), term)
        term.keys("Enter")
        vis = lambda: term.tmux("capture-pane", "-p", "-t", "rs").rstrip("\n").split("\n")
        wait("less's ':' prompt on the last row", lambda: vis()[-1].startswith(":"), term, 15)
        rows = vis()
        c.ok("the pager shows the help's first line", any(l.startswith("train MODEL on DATA") for l in rows),
             "\n".join(rows[:5]))
        c.ok("no ringside prompt while the pager runs", not at_prompt(term), rows[-1])
        term.keys("q")
        wait("ringside's prompt after q", lambda: at_prompt(term), term, 10)
        c.ok("ringside alive after the pager", term.alive(), term.state())
        out = run_line(term, "help train fp16", expect="options about 'fp16'")
        text = "\n".join(out)
        c.ok("help train fp16: the fp16 options", all(k in text for k in ("precision=", "loss_scale=", "inject_inf=")),
             text)
        c.ok("help train fp16: nothing else (no lr=)", "lr=X" not in text, text)
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
