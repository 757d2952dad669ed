#!/usr/bin/env python3
"""The live dashboard, from outside the binary.

  live_test.py tmux PATH/TO/ringside
      ringside in a detached tmux pane (160x48, TERM=xterm-256color): `collective all_reduce ranks=4
      algo=ring count=8 step=1` shows the ring and "step k of 6", and every press of `n` moves the ranks
      one algorithm step, the data pane showing each rank's values: the serial partial sums after each
      reduce-scatter step, then the all-gather's copies; any run's last frame stays until a key, then
      its summary prints, while `play FILE mode=auto` goes straight on; `clear` clears the screen; then `train m on d mode=ddp ranks=4` shows the header and four rank boxes; the
      window is resized to 100x30 and the smaller layout is drawn (no frames, compact rank rows); `q`
      returns to the prompt while the run continues in the background: `jobs` lists it, `train m on d`
      is refused (m is busy), and its end ("trained m on d") is printed at the prompt above a half-typed
      line; `runs` shows it done. Exit 77 when tmux is missing.
  live_test.py headless PATH/TO/ringside
      No terminal: a collective run with RINGSIDE_VIEW_DUMP=FILE writes the live model's final frame
      (80x30 without a terminal); `view run 1` prints the same frame, twice the same; `step=1` is
      refused.
  live_test.py serve PATH/TO/ringside
      `view serve` in tmux (100x30): with no server it says how to start one; after `serve m` the pane
      shows m's counters and redraws while requests arrive over HTTP from here (the prompt is blocked:
      only the live pane can show them), 5 then 12 requests ok and the histogram's batch size 1; a
      resize to 70x20 shows "terminal too small", back to 100x30 the pane again; a key returns to the
      prompt, where `serve` prints the same counts. Exit 77 when tmux is missing.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "term"))
import tmux_session as tt  # noqa: E402  (the tmux driver and session the REPL's terminal tests use)


def wait(what, cond, term, timeout=45.0):
    """tt.wait with room for a loaded machine (the suite runs two tests at a time, under ASan too)."""
    return tt.wait(what, cond, term, max(timeout, 45.0))


def ring_reference(world, n, stage):
    """Every rank's buffer after `stage` steps of a ring all_reduce, computed serially: the worker's inputs
    1 + r + 9i; reduce-scatter step s adds block r-s-1 of rank r-1 into rank r's, all-gather step s copies
    block r-s of rank r-1 (block b: elements n*b//world .. n*(b+1)//world)."""
    x = [[1 + r + 9 * i for i in range(n)] for r in range(world)]
    for s in range(stage):
        old = [row[:] for row in x]
        gather = s >= world - 1
        g = s - (world - 1) if gather else s
        for r in range(world):
            b = ((r - g) if gather else (r - g - 1)) % world
            prev = (r - 1) % world
            for i in range(n * b // world, n * (b + 1) // world):
                x[r][i] = old[prev][i] if gather else old[r][i] + old[prev][i]
    return x


def data_rows(term):
    """The data pane's rows as shown: {rank: [numbers]} under its title ("data: ..."), and the title."""
    v = term.visible()
    at = next(((i, l.find("data: ")) for i, l in enumerate(v) if "data: " in l), None)
    if not at:
        return None, {}
    i, col = at
    rows = {}
    for line in v[i + 1:]:
        m = re.match(r"[│ ]?r(\d+)  (.*)", line[max(0, col - 2):])
        if m:
            rows[int(m.group(1))] = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", m.group(2))]
    return v[i][col:].split("─")[0].strip(), rows


def shows_values(term, stage, label):
    title, rows = data_rows(term)
    want = ring_reference(4, 8, stage)
    return title is not None and label in title and all(rows.get(r) == want[r] for r in range(4))


def has(term, *words):
    scr = "\n".join(term.visible())
    return all(w in scr for w in words)


def tmux_mode(rs):
    tt.require("tmux", what="live-dashboard terminal test")
    with tt.session(rs, "rs-live-", what="the test ran to its end") as sess:
        c = sess.c
        term = sess.open("s1", 160, 48)
        wait("a prompt", lambda: tt.at_prompt(term), term, 30)
        # ---- step by step through a ring all-reduce
        line = "collective all_reduce ranks=4 algo=ring count=8 step=1"
        term.text(line)
        wait("the line echoed", lambda: tt.at_prompt(term, line), term)
        term.keys("Enter")
        c.wait_ok("step=1: the dashboard shows the ring and 'step 1 of 6'",
                  lambda: has(term, "step 1 of 6", "r0", "r3", "collective") and has(term, "ring"), term, 30)
        labels = ["input", "after reduce-scatter step 1/3", "after reduce-scatter step 2/3",
                  "after reduce-scatter step 3/3", "after all-gather step 1/3", "after all-gather step 2/3",
                  "after all-gather step 3/3: the result"]
        c.wait_ok("the data pane shows each rank's input", lambda: shows_values(term, 0, labels[0]), term, 15,
                  detail=lambda: "\n".join(term.visible()))
        for k in range(2, 7):
            term.text("n")
            c.wait_ok(f"`n` moves the ranks on: 'step {k} of 6'", lambda: has(term, f"step {k} of 6"), term, 15)
            c.wait_ok(f"the data pane: '{labels[k - 1]}', every rank's values the serial partial sums",
                      lambda: shows_values(term, k - 1, labels[k - 1]), term, 15,
                      detail=lambda: "\n".join(term.visible()))
        term.text("n")
        c.wait_ok("after the last step the collective is done and the picture stays",
                  lambda: has(term, "done: press a key"), term, 15)
        c.ok("the data pane shows the result on every rank", shows_values(term, 6, labels[6]),
             "\n".join(term.visible()))
        term.text("n")
        out = wait("the collective's summary and a prompt",
                      lambda: tt.at_prompt(term) and any("every rank's result equals" in l for l in term.screen()),
                      term, 15)
        c.ok("the view closed and the summary printed as usual", bool(out))
        # ---- any run: the last frame stays until a key, then the summary
        summaries = lambda: sum("every rank's result equals" in l for l in term.screen())  # noqa: E731
        before = summaries()
        line = "collective all_gather ranks=2 count=3"
        term.text(line)
        wait("the line echoed", lambda: tt.at_prompt(term, line), term)
        term.keys("Enter")
        c.wait_ok("a run that ends keeps its last frame up ('all_gather #1 done', 'done: press a key')",
                  lambda: has(term, "all_gather #1 done", "done: press a key"), term, 30)
        time.sleep(1.0)
        c.ok("... and waits a second later: the frame still up, no summary on screen",
             has(term, "done: press a key", "all_gather #1 done") and not has(term, "every rank's result equals"),
             "\n".join(term.visible()))
        term.text("x")
        c.wait_ok("any key closes the view, then the summary and a prompt",
                  lambda: summaries() == before + 1 and tt.at_prompt(term), term, 15)
        # ---- auto playback goes on at once
        lesson = os.path.join(sess.tmp, "lesson.ring")
        with open(lesson, "w") as f:
            f.write('collective all_reduce ranks=2 count=3\nsay "after the collective"\n')
        line = f"play {lesson} mode=auto"
        term.text(line)
        wait("the line echoed", lambda: tt.at_prompt(term, line), term)
        term.keys("Enter")
        c.wait_ok("`play ... mode=auto`: the run's view closes by itself and the lesson goes on",
                  lambda: any("after the collective" in l for l in term.screen()) and tt.at_prompt(term), term, 30)
        # ---- clear: a fresh screen, the prompt at its top
        tt.run_line(term, "say \"something to clear away\"", expect="something to clear away")
        term.text("clear")
        term.keys("Enter")
        c.wait_ok("`clear` clears the screen: the prompt on its first line, nothing else visible",
                  lambda: tt.at_prompt(term) and [l.rstrip() for l in term.visible() if l.strip()] == [tt.PROMPT],
                  term, 15, detail=lambda: "\n".join(term.visible()))
        # ---- training across ranks
        tt.run_line(term, "data d = digits n=3000", expect="d")
        tt.run_line(term, "model m = mlp 784-64-10", expect="m")
        line = "train m on d mode=ddp ranks=4 epochs=200"
        term.text(line)
        wait("the line echoed", lambda: tt.at_prompt(term, line), term)
        term.keys("Enter")
        c.wait_ok("train: header (mode ddp, world 4) and four rank boxes at 160x48",
                  lambda: has(term, "ringside", "train", "mode ddp", "world 4", "rank 0", "rank 1", "rank 2", "rank 3")
                  and has(term, "┌"), term, 30)
        term.tmux("resize-window", "-t", "rs", "-x", "100", "-y", "30")

        def small():
            v = [l.rstrip() for l in term.visible()]
            return (len(v) <= 31 and max(len(l) for l in v) <= 100 and has(term, "mode ddp", "r0", "r3")
                    and not has(term, "┌") and not has(term, "rank 0 "))

        c.wait_ok("resized to 100x30: the smaller layout (compact rank rows, no frames)", small, term, 15,
                  detail=lambda: "\n".join(term.visible()))
        term.text("q")
        c.wait_ok("`q`: back at the prompt at once, the run going on in the background",
                  lambda: tt.at_prompt(term) and any("continues in the background" in l for l in term.screen())
                  and not any(l.startswith("trained m on d") for l in term.screen()), term, 15,
                  detail=lambda: "\n".join(term.screen()))
        out = tt.run_line(term, "jobs", expect="train")
        c.ok("`jobs` lists the run (kind train, 4 ranks, m on d)",
             any("train" in l and " 4 " in l and "m on d" in l for l in out) or any(
                 l.startswith("trained m on d") for l in term.screen()), "\n".join(out))
        out = tt.run_line(term, "train m on d", expect="in use by run")
        c.ok("`train m on d` meanwhile is refused, naming the run",
             any("m is in use by run" in l for l in out) or any(l.startswith("trained m on d") for l in term.screen()),
             "\n".join(out))
        term.text("sho")  # a half-typed line: the end is printed above it, the line stays
        c.wait_ok("the run's end is printed at the prompt ('trained m on d with ddp'), the typed line kept",
                  lambda: any(l.startswith("trained m on d with ddp on 4 ranks") for l in term.screen())
                  and any("in the background) has ended" in l for l in term.screen()) and tt.at_prompt(term, "sho"),
                  term, 180, detail=lambda: "\n".join(term.screen()))
        term.keys("C-u")
        wait("an empty prompt", lambda: tt.at_prompt(term), term)
        out = tt.run_line(term, "runs", expect="train")
        c.ok("`runs` shows the training run done", any("train" in l and "done" in l for l in out), "\n".join(out))
        # ---- the stepped collective again, replayed from the session log
        line = "view run 1 speed=8"
        term.text(line)
        wait("the line echoed", lambda: tt.at_prompt(term, line), term)
        term.keys("Enter")
        c.wait_ok("`view run 1`: the replay runs in the dashboard ('replay 8x', the ring)",
                  lambda: has(term, "replay 8x", "collective r1", "r2"), term, 15)
        term.text("+")
        c.wait_ok("`+` doubles the playback speed", lambda: has(term, "replay 16x"), term, 10)
        c.wait_ok("the replay reaches the end: the collective is done", lambda: has(term, "end: q leaves",
                  "all_reduce #1 done"), term, 20)
        term.text(" ")
        c.wait_ok("space pauses the replay", lambda: has(term, "paused"), term, 10)
        term.keys("Left")
        c.wait_ok("Left scrubs back (paused: the end is no longer shown)",
                  lambda: has(term, "paused") and not has(term, "end: q leaves"), term, 10)
        term.text("q")
        c.wait_ok("`q` leaves the replay: a prompt", lambda: tt.at_prompt(term), term, 10)
        sess.quit()
    return 1 if c.fails else 0


def headless_mode(rs):
    tmp = tempfile.mkdtemp(prefix="rs-live-")
    db = os.path.join(tmp, "s.db")
    dump = os.path.join(tmp, "frame.txt")
    env = dict(os.environ, HOME=tmp, XDG_DATA_HOME=tmp, LC_ALL="C.UTF-8", TERM="xterm-256color")
    c = tt.Checks()

    def ringside(cmd, extra=None):
        return subprocess.run([rs, "--db", db, "-c", cmd], env=dict(env, **(extra or {})), capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)

    r = ringside("collective all_reduce ranks=4 algo=ring count=8", {"RINGSIDE_VIEW_DUMP": dump})
    c.ok("collective with RINGSIDE_VIEW_DUMP runs and prints plain lines (no terminal: no view)",
         r.returncode == 0 and "every rank's result equals" in r.stdout and "\x1b[?1049h" not in r.stdout,
         r.stdout + r.stderr)
    live = open(dump).read() if os.path.exists(dump) else ""
    c.ok("the live model's final frame was written: ring, 'all_reduce #1 done', rank lines in the log",
         "all_reduce #1 done" in live and "step 6 of 6" in live and "rank 0: in [1, 10" in live, live)
    v1, v2 = ringside("view run 1"), ringside("view run 1")
    c.ok("`view run 1` without a terminal prints a frame", v1.returncode == 0 and "ringside" in v1.stdout,
         v1.stdout + v1.stderr)
    c.ok("replaying twice gives the same frame", v1.stdout == v2.stdout)
    c.ok("the replay's final frame equals the live run's", v1.stdout == live,
         "--- live ---\n" + live + "--- replay ---\n" + v1.stdout)
    r = ringside("collective all_reduce ranks=4 algo=ring count=8 step=1")
    said = " ".join((r.stdout + r.stderr).split())  # the message is wrapped to 80 columns
    c.ok("step=1 without a terminal is refused, saying why", r.returncode != 0 and "needs the live view" in said,
         r.stdout + r.stderr)
    r = ringside("view run 99")
    c.ok("view run of a missing run: an error naming it", r.returncode != 0 and "no run 99" in r.stdout + r.stderr,
         r.stdout + r.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if c.fails else 0


def serve_mode(rs):
    def infer(port, n):
        body = b'{"inputs":[{"name":"input","datatype":"FP32","shape":[1,5],"data":[1,2,3,4,5]}]}'
        for _ in range(n):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/m/infer", data=body, method="POST")
            with urllib.request.urlopen(req, timeout=30) as r:
                if r.status != 200:
                    raise tt.Fail(f"infer answered {r.status}")

    tt.require("tmux", what="live serve-pane test")
    with tt.session(rs, "rs-live-serve-", what="the test ran to its end", db=False) as sess:
        c = sess.c
        term = sess.open("s1", 100, 30)
        wait("a prompt", lambda: tt.at_prompt(term), term, 30)
        out = tt.run_line(term, "view serve", expect="nothing is served")
        c.ok("`view serve` without a server says so and how to start one",
             any("serve MODEL" in l for l in out), "\n".join(out))
        out = tt.run_line(term, "model m = mlp 5-7-3; serve m http=0 grpc=-1 metrics=-1", expect="serving")
        port = next((int(m.group(1)) for l in out for m in [re.search(r"http://127\.0\.0\.1:(\d+)", l)] if m), 0)
        c.ok("the server's port is printed", port > 0, "\n".join(out))
        term.text("view serve")
        wait("the line echoed", lambda: tt.at_prompt(term, "view serve"), term)
        term.keys("Enter")
        c.wait_ok("the serve pane: header, m's block, 0 requests, 'any key leaves'",
                  lambda: has(term, "serve", "m v1", "requests 0 ok / 0 failed", "any key leaves"), term, 15)
        infer(port, 5)
        c.wait_ok("requests sent meanwhile appear live: 5 ok, a histogram with batch size 1",
                  lambda: has(term, "requests 5 ok / 0 failed", "batch size", "requests/s"), term, 15,
                  detail=lambda: "\n".join(term.visible()))
        infer(port, 7)
        c.wait_ok("and keep appearing: 12 ok", lambda: has(term, "requests 12 ok / 0 failed"), term, 15,
                  detail=lambda: "\n".join(term.visible()))
        term.tmux("resize-window", "-t", "rs", "-x", "70", "-y", "20")
        c.wait_ok("resized to 70x20: 'terminal too small'", lambda: has(term, "terminal too small: need 80x24")
                  and not has(term, "requests 12"), term, 15, detail=lambda: "\n".join(term.visible()))
        term.tmux("resize-window", "-t", "rs", "-x", "100", "-y", "30")
        c.wait_ok("back to 100x30: the pane again", lambda: has(term, "requests 12 ok / 0 failed"), term, 15,
                  detail=lambda: "\n".join(term.visible()))
        term.text("x")
        c.wait_ok("a key leaves: a prompt", lambda: tt.at_prompt(term), term, 10)
        out = tt.run_line(term, "serve", expect="requests 12 ok")
        c.ok("`serve` prints the same count after the view", any("requests 12 ok / 0 failed" in l for l in out),
             "\n".join(out))
        sess.quit()
    return 1 if c.fails else 0


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("tmux", "headless", "serve"):
        print(__doc__)
        return 2
    rs = os.path.abspath(sys.argv[2])
    t0 = time.monotonic()
    rc = {"tmux": tmux_mode, "headless": headless_mode, "serve": serve_mode}[sys.argv[1]](rs)
    print(f"{'FAILED' if rc else 'passed'} in {time.monotonic() - t0:.1f}s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
