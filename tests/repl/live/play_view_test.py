#!/usr/bin/env python3
"""A dashboard in `play`, as a class sees it on the projector, at 80x24 in tmux (TERM=xterm-256color):

  - a view opened by a tutorial's line closes by itself when its run ends, after a short hold that
    says so ("done: closes in N s"): the teacher presses no key, the lesson goes on to its next line,
    and the narration that introduced the view (`say` before it) is on screen again;
  - a `pause` line after the view's line keeps the last frame up ("done: press a key") until a key,
    and that key stands for the pause: no "press Enter to continue" after it;
  - headless (RINGSIDE_VIEW_DUMP): the collective pane's time is the slowest rank's own, labelled
    "(slowest rank)" in the same unit as the REPL's line "...: 12.3 us (slowest rank)", and never more
    than it (the pane's spans lie inside each rank's timed interval; it used to count from the first
    rank's start to the last rank's end, 4.074 ms against 46.8 us);
  - headless, `bench`: the timeline shows the ranks' collectives (it said "no phases yet" all along),
    each size as long as its measured iterations: the window of the last three sizes spans what the
    REPL's table gives for them (time x iters);
  - headless, `p2p ranks=2`: the ranks' rows follow what they do, "C comm" once heard from (they
    stayed "? starting" to the end: p2p traces no events), live and in `view run 1`.
Exit 77 when tmux is missing (the headless part runs first either way).

Usage: play_view_test.py PATH/TO/ringside"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "term"))
import tmux_session as tt  # noqa: E402
from live_test import has, wait  # noqa: E402


def seconds(text):
    m = re.match(r"([0-9.]+) (us|ms)", text)
    return float(m.group(1)) * (1e-6 if m.group(2) == "us" else 1e-3) if m else None


def pane_time(rs, c, tmp):
    d = os.path.join(tmp, "pane-time")
    os.makedirs(d)
    dump = os.path.join(d, "frame.txt")
    r = subprocess.run([rs, "--db", os.path.join(d, "s.db"), "-c", "collective reduce ranks=2 op=product"], cwd=d,
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, RINGSIDE_VIEW_DUMP=dump, LC_ALL="C.UTF-8"))
    said = " ".join(r.stdout.split())
    frame = open(dump).read() if os.path.exists(dump) else ""
    text = re.search(r": ([0-9.]+ (?:us|ms)) \(slowest rank\)", said)
    pane = re.search(r"^([0-9.]+ (?:us|ms)) \(slowest rank\)", frame, re.M)
    if not c.ok("the REPL's line and the pane both give a time '(slowest rank)'", text and pane,
                f"{r.stdout}\n{r.stderr[-500:]}\n--- frame ---\n{frame}"):
        return
    tt_, tp = seconds(text.group(1)), seconds(pane.group(1))
    same_unit = text.group(1).split()[1] == pane.group(1).split()[1] or min(tt_, tp) < 1.1e-3 <= max(tt_, tp)
    c.ok(f"the pane's time ({pane.group(1)}) is the slowest rank's, within the REPL's ({text.group(1)}), the same "
         "unit unless they straddle 1 ms", tp <= tt_ * 1.001 + 1e-7 and same_unit, frame)


def bench_timeline(rs, c, tmp):
    d = os.path.join(tmp, "bench")
    os.makedirs(d)
    dump = os.path.join(d, "frame.txt")
    r = subprocess.run([rs, "--db", os.path.join(d, "s.db"), "-c", "bench all_reduce ranks=2 sizes=1K..64K iters=20"],
                       cwd=d, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, RINGSIDE_VIEW_DUMP=dump, LC_ALL="C.UTF-8"))
    frame = open(dump).read() if os.path.exists(dump) else ""
    # the REPL's nccl-tests table: size (B), count, type, redop, time (us), ...
    us = {int(m.group(1)): float(m.group(2))
          for m in re.finditer(r"^\s+(\d+)\s+\d+\s+f32\s+sum\s+([0-9.]+)\s", r.stdout, re.M)}
    lines = frame.splitlines()
    at = next((i for i, l in enumerate(lines) if l.lstrip().startswith("timeline")), None)
    if not c.ok("bench: the table's 7 sizes and a timeline pane in the last frame", len(us) == 7 and at is not None,
                f"{r.stdout}\n{r.stderr[-500:]}\n--- frame ---\n{frame}"):
        return
    pane = lines[at + 1:at + 6]
    cells = [l[5:].rstrip() for l in pane[1:4:2]]
    c.ok("bench: the timeline shows each rank communicating (no 'no phases yet'), r0 and r1 all 'C'",
         "no phases yet" not in frame and pane[0].startswith("r0") and pane[2].startswith("r1")
         and all(len(x) > 20 and set(x) == {"C"} for x in cells), "\n".join(pane))
    axis = re.search(r"-([0-9.]+) ms", pane[4])
    want = 20 * sum(us[b] for b in (16384, 32768, 65536)) / 1e3
    c.ok(f"bench: the window spans the last three sizes' 20 iterations each (table: {want:.2f} ms)",
         axis is not None and abs(float(axis.group(1)) - want) <= 0.05 + 0.01 * want, pane[4])


def p2p_states(rs, c, tmp):
    d = os.path.join(tmp, "p2p")
    os.makedirs(d)
    dump = os.path.join(d, "frame.txt")
    r = subprocess.run([rs, "--db", os.path.join(d, "s.db"), "-c", "p2p ranks=2"], cwd=d, capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, RINGSIDE_VIEW_DUMP=dump, LC_ALL="C.UTF-8"))
    frame = open(dump).read() if os.path.exists(dump) else ""
    rows = re.findall(r"^r(\d)  (. \w+)", frame, re.M)
    c.ok("p2p: both ranks, heard from, are communicating ('C comm'), none left at '? starting'",
         r.returncode == 0 and sorted(rows) == [("0", "C comm"), ("1", "C comm")] and "starting" not in frame,
         f"rows {rows}\n{frame}\n{r.stderr[-500:]}")
    replay = subprocess.run([rs, "--db", os.path.join(d, "s.db"), "-c", "view run 1"], cwd=d, capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL, env=dict(os.environ, LC_ALL="C.UTF-8"))
    c.ok("p2p: `view run 1` replays the same rank rows", re.findall(r"^r(\d)  (. \w+)", replay.stdout, re.M) == rows,
         replay.stdout + replay.stderr)


def play(term, c, lesson, body):
    with open(lesson, "w") as f:
        f.write(body)
    tt.run_line(term, "clear")
    line = f"play {lesson}"
    term.text(line)
    wait("the line echoed", lambda: tt.at_prompt(term, line), term)
    term.keys("Enter")


def main():
    rs = os.path.abspath(sys.argv[1])
    with tt.session(rs, "rs-playview-") as sess:
        c, tmp = sess.c, sess.tmp
        pane_time(rs, c, tmp)
        bench_timeline(rs, c, tmp)
        p2p_states(rs, c, tmp)
        tt.require("tmux", what="terminal test of `play`'s views")
        term = sess.open("pv", 80, 24)
        wait("a prompt", lambda: tt.at_prompt(term), term, 30)
        # ---- the view closes by itself after its hold; the narration before it is back
        play(term, c, os.path.join(tmp, "hold.ring"),
             'say "the ring moves one chunk a step"\ncollective all_reduce ranks=2 count=3\nsay "after the ring"\n')
        c.wait_ok("the run's last frame says it closes by itself ('done: closes in N s')",
                  lambda: has(term, "all_reduce", "done: closes in"), term, 60)
        c.wait_ok("with no key pressed the view closes and the lesson goes on ('after the ring', a prompt)",
                  lambda: has(term, "after the ring") and tt.at_prompt(term), term, 30)
        c.ok("the narration that introduced the view is on screen again", has(term, "the ring moves one chunk"),
             "\n".join(term.visible()))
        # ---- a `pause` after it: the frame stays until a key, which is the pause
        play(term, c, os.path.join(tmp, "wait.ring"),
             'say "look at the ring"\ncollective all_reduce ranks=2 count=3\n\npause\nsay "after the pause"\n')
        if c.wait_ok("a `pause` after the view: the last frame waits ('done: press a key')",
                     lambda: has(term, "all_reduce", "done: press a key"), term, 60):
            time.sleep(RS_HOLD + 1)
            c.ok("... still up after the hold", has(term, "done: press a key") and not has(term, "after the pause"),
                 "\n".join(term.visible()))
            term.text("x")
            c.wait_ok("a key closes it and the lesson goes on past the pause without asking again",
                      lambda: has(term, "after the pause") and tt.at_prompt(term), term, 30)
            c.ok("no 'press Enter to continue' after the view's key", not has(term, "press Enter to continue"),
                 "\n".join(term.visible()))
        tt.run_line(term, "clear")
        sess.quit()
    return sess.finish()

RS_HOLD = 3  # repl/ranks_job.h RS_JOB_HOLD_S

if __name__ == "__main__":
    sys.exit(main())
