#!/usr/bin/env python3
"""The pipeline schedule drawn live, from outside the binary, at 80x24 in tmux.

  pipe_live_test.py PATH/TO/ringside

`train s on d mode=pipeline ranks=2 schedule=gpipe micro=4` and then `schedule=1f1b`, each with the
dashboard up: when the run ends its last frame stays, and the pipeline pane's rows (one per rank,
F/B and the micro-batch's number where the rank ran a forward or backward) list each rank's ops in the
order the papers define (GPipe: every forward, then every backward; 1F1B, PipeDream-Flush: p - r - 1
warm-up forwards, then one forward one backward, then the rest of the backwards), written out here
independently of the schedule code; the first stage runs all its forwards before its first backward
under GPipe and alternates under 1F1B; the bubble line holds a percentage and the formula's 20.0%;
nothing passes column 80. `view run 2` replays the 1F1B run from the session log and ends on the
same rows. Exit 77 when tmux is missing.
"""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "term"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "live"))
import tmux_session as tt  # noqa: E402
from live_test import wait  # noqa: E402  (waits sized for a loaded machine)

P, M = 2, 4


def paper_order(kind, p, m, r):
    """Rank r's ops as the papers write them: ['F0', 'F1', ..., 'B0', ...]."""
    if kind == "gpipe":
        return [f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)]
    warm = min(p - r - 1, m)
    ops = [f"F{i}" for i in range(warm)]
    f, b = warm, 0
    while f < m:  # steady state: one forward, one backward
        ops += [f"F{f}", f"B{b}"]
        f, b = f + 1, b + 1
    ops += [f"B{i}" for i in range(b, m)]  # cool-down
    return ops


def pane_rows(lines):
    """{rank: row text} under the pipeline pane's title, or {} when it is not on screen."""
    rows, on = {}, False
    for l in lines:
        if "pipeline, step" in l:
            on = True
            continue
        if on:
            m = re.match(r"^r(\d+)\s", l)
            if not m:
                break
            rows[int(m.group(1))] = l[4:-5]
    return rows


def labels(row):
    """The labels of a row in order: 'F0', 'B3', or a bare 'F' where the op was too short for its number."""
    return re.findall(r"[FB]\d*", row)


def matches(got, want):
    return len(got) == len(want) and all(g == w or g == w[0] for g, w in zip(got, want))


def check_schedule(c, term, kind, where):
    lines = term.visible()
    screen = "\n".join(lines)
    rows = pane_rows(lines)
    c.ok(f"{where}: the pipeline pane shows a row for each of the {P} ranks", sorted(rows) == list(range(P)), screen)
    for r in range(P):
        got, want = labels(rows.get(r, "")), paper_order(kind, P, M, r)
        c.ok(f"{where}: rank {r}'s row lists its ops in the {kind} order ({' '.join(want)})", matches(got, want),
             f"row: {rows.get(r)!r}\n{screen}")
        c.ok(f"{where}: rank {r}'s row shows idle time ('·' or '.')",
             any(ch in rows.get(r, "") for ch in "·."), rows.get(r))
    first = [x[0] for x in labels(rows.get(0, ""))]
    if kind == "gpipe":
        c.ok(f"{where}: GPipe fill and drain: stage 0 runs every F before its first B",
             "B" in first and "F" not in first[first.index("B"):], "".join(first))
    else:
        c.ok(f"{where}: 1F1B: stage 0 alternates B F after its warm-up", "".join(first).startswith("F" * (P - 1) + "FBFB"),
             "".join(first))
    bub = re.search(r"bubble (\d+\.\d)%.*= 20\.0%", screen)
    c.ok(f"{where}: the bubble line: measured percentage beside (p-1)/(m+p-1) = 20.0%", bool(bub), screen)
    c.ok(f"{where}: nothing past column 80", max(len(l.rstrip()) for l in lines) <= 80, screen)


def run_view(c, term, line, kind):
    term.text(line)  # longer than the prompt line: it wraps, so no wait for the echo at the cursor
    term.keys("Enter")
    c.wait_ok(f"{kind}: the run ends with its last frame up ('done: press a key')",
              lambda: "done: press a key" in "\n".join(term.visible()) and pane_rows(term.visible()), term, 90,
              detail=lambda: "\n".join(term.visible()))
    check_schedule(c, term, kind, f"{kind}, live")
    term.text("x")
    wait("the summary and a prompt", lambda: tt.at_prompt(term), term, 30)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    rs = sys.argv[1]
    if not shutil.which("tmux"):
        tt.skip("tmux is not installed (scripts/setup.sh installs it): no pipeline-pane terminal test")
    tmp = tempfile.mkdtemp(prefix="rs-pipe-")
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    db = os.path.join(tmp, "s.db")
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE", "NO_COLOR", "XDG_DATA_HOME")}
    env.update(HOME=home, XDG_DATA_HOME=os.path.join(home, "data"), TERM="xterm-256color", LC_ALL="C.UTF-8")
    argv = ["env", "-u", "NO_COLOR", f"HOME={home}", f"XDG_DATA_HOME={home}/data", rs, "--db", db]
    c = tt.Checks()
    term = None
    try:
        term = tt.Term(tmp, argv, env, "p1", 80, 24)
        wait("a prompt", lambda: tt.at_prompt(term), term, 30)
        tt.run_line(term, "set threads=1", expect="threads")
        tt.run_line(term, "model s = mlp 784-512-512-512-512-10 seed=1", expect="s")
        tt.run_line(term, "data d = digits n=2000", expect="d")
        common = f"mode=pipeline ranks={P} micro={M} batch=256 steps=3 eval=off"
        run_view(c, term, f"train s on d {common} schedule=gpipe", "gpipe")
        run_view(c, term, f"train s on d {common} schedule=1f1b", "1f1b")
        line = "view run 2 speed=50"
        term.text(line)
        wait("the line echoed", lambda: tt.at_prompt(term, line), term)
        term.keys("Enter")
        c.wait_ok("view run 2 replays the 1F1B run to its end", lambda: "end: q leaves" in "\n".join(term.visible()),
                  term, 60, detail=lambda: "\n".join(term.visible()))
        check_schedule(c, term, "1f1b", "1f1b, replayed by view run 2")
        term.text("q")
        wait("a prompt after the replay", lambda: tt.at_prompt(term), term, 30)
    except tt.Fail as e:
        c.ok("the session went as scripted", False, str(e))
    finally:
        if term:
            term.kill()
    print(f"{c.fails} failed")
    return 1 if c.fails else 0


if __name__ == "__main__":
    sys.exit(main())
