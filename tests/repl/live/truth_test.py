#!/usr/bin/env python3
"""Panes that tell the truth, at 80x24 in tmux (TERM=xterm-256color, UTF-8):

  - a run's last frame keeps its header whole: the status ("done: press a key") stands where nothing
    is drawn (it used to cover the header's end: "busbw 0.22 GB", "eval a done");
      `collective all_reduce ranks=4 algo=ring count=100000`: the header's second row reads
      "all_reduce #1 done  moved N MiB" whole, and the status is on screen;
      `bench all_reduce ranks=2 sizes=1K..1M`: the header's "last 1.00 MiB: busbw X GB/s" whole;
  - the log pane's lines too long for its 40 columns end in the cut mark "…" (the ranks' results
    were cut with no mark), and every one of them is the start of the line the REPL prints when the
    view closes (read back after a key);
  - the collective pane's bandwidth keeps its unit: "busbw X GB/s";
  - `view serve`: the server's URL whole beside "live: any key leaves" (its port was cut);
  - headless (RINGSIDE_VIEW_DUMP), FSDP zero=3 over `mlp 784-32-32-10` (units linear relu linear relu
    linear: weights in units 0, 2, 4): the pane's "all_gather xN #..." names the units gathered, as
    many as its count ("x3 #0,2,4", not "x3 #0-4").
Exit 77 when tmux is missing.

Usage: truth_test.py PATH/TO/ringside"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "term"))
import tmux_session as tt  # noqa: E402
from live_test import has, wait  # noqa: E402

CUT = "\u2026"


def run_to_end(term, c, line, what):
    tt.wait(f"an empty prompt before {line!r}", lambda: tt.at_prompt(term), term, 45)
    term.text(line)
    wait("the line echoed", lambda: tt.at_prompt(term, line), term)
    term.keys("Enter")
    return c.wait_ok(f"{what}: the last frame stays with 'done: press a key'", lambda: has(term, "done: press a key"),
                     term, 60)


def fsdp_numbers(rs, c, tmp):
    d = os.path.join(tmp, "fsdp")
    os.makedirs(d)
    with open(os.path.join(d, "f.ring"), "w") as f:
        f.write("data d = digits n=600\nmodel m = mlp 784-32-32-10\n"
                "train m on d mode=fsdp zero=3 ranks=2 steps=2 batch=50\n")
    dump = os.path.join(d, "frame.txt")
    r = subprocess.run([rs, "--db", os.path.join(d, "s.db"), "f.ring"], cwd=d, capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, RINGSIDE_VIEW_DUMP=dump))
    frame = open(dump).read() if os.path.exists(dump) else ""
    rows = re.findall(r"^r\d all_gather x(\d+) #([0-9,\-]+)", frame, re.M)
    c.ok("fsdp zero=3: each rank's row 'all_gather x3 #0,2,4' (the units with weights, as many as counted)",
         r.returncode == 0 and len(rows) == 2 and all(n == "3" and nums == "0,2,4" for n, nums in rows),
         f"rows {rows}\n{frame}\n{r.stderr[-500:]}")


def main():
    rs = os.path.abspath(sys.argv[1])
    tt.require("tmux", what="live-dashboard terminal test")
    with tt.session(rs, "rs-truth-") as sess:
        c = sess.c
        fsdp_numbers(rs, c, sess.tmp)
        term = sess.open("t1", 80, 24)
        wait("a prompt", lambda: tt.at_prompt(term), term, 30)
        if run_to_end(term, c, "collective all_reduce ranks=4 algo=ring count=100000", "collective"):
            scr = term.visible()
            c.ok("the header's second row whole: 'all_reduce #1 done  moved N MiB'",
                 re.match(r"^all_reduce #1 done  moved [0-9.]+ [KM]iB\b", scr[1]) is not None, "\n".join(scr))
            c.ok("the collective pane's bandwidth keeps its unit: 'busbw X GB/s'",
                 re.search(r"busbw [0-9.]+ GB/s", "\n".join(scr)) is not None, "\n".join(scr))
            cut = [l.rstrip() for l in scr if l.rstrip().endswith(CUT)]
            logs = [l[l.index("[r"):] for l in cut if "[r" in l]
            c.ok(f"the log pane's long lines end in the cut mark '{CUT}' ({len(logs)} of them)", len(logs) >= 4,
                 "\n".join(scr))
            term.keys("Enter")
            tt.wait("the prompt after a key", lambda: tt.at_prompt(term), term, 30)
            out = "\n".join(term.screen())
            heads = [re.sub(r"^\[r\d\] ", "", l)[:-1] for l in logs]
            c.ok("each cut line is the start of a line the REPL printed (the view cut it, nothing else)",
                 heads and all(h in out for h in heads), f"cut: {heads}\nprinted:\n{out[-2000:]}")
        tt.run_line(term, "clear")
        if run_to_end(term, c, "bench all_reduce ranks=2 sizes=1K..1M", "bench"):
            scr = term.visible()
            c.ok("the header's 'last 1.00 MiB: busbw X GB/s' whole, the status elsewhere",
                 re.search(r"last 1(\.00)? MiB: busbw [0-9.]+ GB/s", scr[1]) is not None, "\n".join(scr))
            term.keys("Enter")
            tt.wait("the prompt after a key", lambda: tt.at_prompt(term), term, 30)
        # `view serve`: the server's URL whole beside "live: any key leaves" (the port was cut: `:357`)
        tt.run_line(term, "clear")
        out = tt.run_line(term, "model sv = mlp 5-7-3; serve sv http=0 grpc=-1 metrics=-1", expect="serving")
        port = next((m.group(1) for l in out for m in [re.search(r"http://127\.0\.0\.1:(\d+)", l)] if m), "")
        if c.ok("serve prints its port", port != "", "\n".join(out)):
            term.text("view serve")
            term.keys("Enter")
            c.wait_ok("view serve: 'live: any key leaves'", lambda: has(term, "live: any key leaves"), term, 30)
            scr = "\n".join(term.visible())
            c.ok(f"view serve: the URL whole, port {port} and all", re.search(
                r"http://127\.0\.0\.1:" + port + r"\b", scr) is not None, scr)
            term.keys("Enter")
            tt.wait("the prompt after a key", lambda: tt.at_prompt(term), term, 30)
    return sess.finish()


if __name__ == "__main__":
    sys.exit(main())
