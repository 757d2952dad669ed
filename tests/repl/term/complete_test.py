#!/usr/bin/env python3
"""Tab completion and where output lands, in a real terminal (tmux, as tmux_session.py drives it).

Completion is generated from the command table (repl/complete.c); these check what a person sees:
  - an option's value: `opt=a`<Tab> -> `opt=adam` (not `opt=accum=`), `opt=`<Tab><Tab> lists adam adamw
    sgd (not the option names), `mode=f`<Tab> -> `mode=fsdp `, `mode=d`<Tab><Tab> lists ddp and dp;
  - an argument's choices: `collective all_`<Tab><Tab> lists all_reduce all_gather all_to_all,
    `collective bro`<Tab> -> `broadcast `; `help tr`<Tab> -> `help train `;
  - a binding's forms: `data x = `<Tab><Tab> lists the sources and no layer names, `data x = l`<Tab>
    completes nothing, `data x = idx tr`<Tab> and `data x = csv tr`<Tab> complete a file name,
    `model m = seq li`<Tab> -> `linear(`;
  - `show `<Tab><Tab> lists the session's names and `run`;
  - `train m on d mo`<Tab><Tab> lists `mode=` and `momentum=` (not blanks); file listings show a folder
    as `exp/` (not `exp//`) and only what the command reads: .onnx after `model x = onnx`, .ring after
    `play`, .png/.svg after `plot N ->`.
Output placement: `sql "select 1"` prints `1` on the line after the command (not over a redrawn
prompt: `1ingside>`), and the prompt comes after the output; the same with TERM=dumb, where no output
line starts with a stray `ringside> `.

Usage: complete_test.py PATH/TO/ringside"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tmux_session import PROMPT, Fail, at_prompt, ringside_arg, run_line, session, shq, wait  # noqa: E402


def typed_then(term, c, typed, keys, want_line, what):
    """Types `typed`, presses keys, checks the prompt line becomes want_line; clears the line."""
    wait(f"an empty prompt before {typed!r}", lambda: at_prompt(term), term)
    term.text(typed)
    wait(f"{typed!r} on the prompt line", lambda: at_prompt(term, typed), term)
    for k in keys:
        term.keys(k)
        time.sleep(0.15)
    c.wait_ok(what, lambda: at_prompt(term, want_line), term, 5,
              detail=lambda: "cursor x=%d, line %r" % term.cursor())
    term.keys("C-u")
    wait("the line cleared by C-u", lambda: at_prompt(term), term)


def listing(term, c, typed, want, unwanted, what):
    """Types `typed`, Tab Tab; checks the lines listed between the prompt and the redrawn prompt hold
    every word of want and none of unwanted."""
    wait(f"an empty prompt before {typed!r}", lambda: at_prompt(term), term)
    n0 = len(term.screen())
    term.text(typed)
    wait(f"{typed!r} on the prompt line", lambda: at_prompt(term, typed), term)
    term.keys("Tab")
    time.sleep(0.2)
    term.keys("Tab")

    def listed():
        scr = term.screen()
        if not at_prompt(term, typed) or len(scr) < n0 + 2:
            return None
        return set(" ".join(scr[n0:-1]).split())

    try:
        words = wait(f"a listing after {typed!r}<Tab><Tab>", listed, term, 5)
    except Fail as e:
        c.ok(what, False, str(e))
        words = None
    if words is not None:
        c.ok(what, all(w in words for w in want) and not any(w in words for w in unwanted),
             f"listed: {sorted(words)}")
    term.keys("C-u")
    wait("the line cleared by C-u", lambda: at_prompt(term), term)


def output_after_command(term, c, line, first, label):
    """Runs line; checks its first output line is exactly `first` and nothing overwrote a prompt."""
    out = run_line(term, line, expect=first)
    c.ok(f"{label}: {line!r} prints {first!r} on the line after the command", out and out[0] == first,
         f"lines after the command: {out}")
    bad = [l for l in term.screen() if "side>" in l and not l.startswith(PROMPT)]
    bad += [l for l in term.screen() if l.startswith(PROMPT) and l[len(PROMPT):].strip() == first]
    c.ok(f"{label}: no output line is written over or after a prompt (`1ingside>`, `ringside> 1`)", not bad,
         f"lines: {bad}")


def main():
    rs = ringside_arg(__doc__, "real-terminal test")
    with session(rs, "rs-compl-") as s:
        c, home, db = s.c, s.home, s.db
        work = os.path.join(s.tmp, "work")
        for f in ("train-images-idx3-ubyte", "zeta.csv", "net.onnx", "talk.ring", "old.png", "exp/inner.onnx"):
            os.makedirs(os.path.dirname(os.path.join(work, f)), exist_ok=True)
            open(os.path.join(work, f), "w").close()
        term = s.open("c1", argv=["sh", "-c", f"cd {shq(work)} && exec env -u NO_COLOR HOME={shq(home)} {shq(rs)} "
                                              f"--db {shq(db)}"])
        wait("a prompt", lambda: at_prompt(term), term, 30)

        typed_then(term, c, "train m on d opt=a", ["Tab"], "train m on d opt=adam",
                   "opt=a<Tab> completes to opt=adam (the choices adam, adamw), not opt=accum=")
        listing(term, c, "train m on d opt=", ["adam", "adamw", "sgd"], ["epochs=", "accum=", "opt="],
                "opt=<Tab><Tab> lists adam adamw sgd, not option names")
        typed_then(term, c, "train m on d mode=f", ["Tab"], "train m on d mode=fsdp ", "mode=f<Tab> -> mode=fsdp ")
        listing(term, c, "train m on d mode=d", ["ddp", "dp"], ["epochs="], "mode=d<Tab><Tab> lists ddp and dp")
        listing(term, c, "collective all_", ["all_reduce", "all_gather", "all_to_all"], ["broadcast"],
                "collective all_<Tab><Tab> lists all_reduce all_gather all_to_all")
        typed_then(term, c, "collective bro", ["Tab"], "collective broadcast ", "collective bro<Tab> -> broadcast ")
        typed_then(term, c, "help tr", ["Tab"], "help train ", "help tr<Tab> -> help train ")
        listing(term, c, "data x = ", ["digits", "fashion", "idx", "cifar", "csv"], ["linear(", "relu", "mlp"],
                "data x = <Tab><Tab> lists the data sources, no layer names")
        typed_then(term, c, "data x = l", ["Tab"], "data x = l", "data x = l<Tab>: no layer name as a source")
        typed_then(term, c, "data x = idx tr", ["Tab"], "data x = idx train-images-idx3-ubyte ",
                   "data x = idx tr<Tab> completes a file name")
        typed_then(term, c, "data x = csv ze", ["Tab"], "data x = csv zeta.csv ", "data x = csv ze<Tab> completes a file name")
        typed_then(term, c, "model m = seq li", ["Tab"], "model m = seq linear(", "model m = seq li<Tab> -> linear(")
        # Tab Tab on an ambiguous option name lists the names (`mode=` shown whole, not the empty text
        # after its '='); files are listed as their names, a folder once with one '/', no blank entry,
        # and only the files the command reads (.onnx for `model x = onnx`, .ring for `play`)
        listing(term, c, "train m on d mo", ["mode=", "momentum="], ["epochs="],
                "train m on d mo<Tab><Tab> lists mode= and momentum=")
        listing(term, c, "model x = onnx ", ["net.onnx", "exp/"], ["zeta.csv", "talk.ring", "old.png", "exp//", "/"],
                "model x = onnx <Tab><Tab> lists .onnx files and folders only, a folder as exp/")
        listing(term, c, "play ./", ["talk.ring", "exp/"], ["zeta.csv", "net.onnx", "exp//"],
                "play ./<Tab><Tab> lists .ring files and folders only")
        typed_then(term, c, "model x = onnx ex", ["Tab"], "model x = onnx exp/", "model x = onnx ex<Tab> -> exp/ (one '/')")
        listing(term, c, "plot 1 -> ", ["old.png", "exp/"], ["zeta.csv", "net.onnx", "talk.ring"],
                "plot 1 -> <Tab><Tab> lists .png/.svg files and folders only")
        run_line(term, "model net = mlp 784-10", expect="model net:")
        listing(term, c, "show ", ["net", "run"], ["epochs="], "show <Tab><Tab> lists the session's names and run")

        output_after_command(term, c, 'sql "select 1"', "1", "xterm")
        output_after_command(term, c, "sql \"select 'xyz'\"", "'xyz'", "xterm")
        s.quit("`quit` exits with status 0 (under ASan: no leak)")
        s.close()

        # TERM=dumb: readline cannot move the cursor; a redrawn prompt would stay in front of the output.
        argv = ["sh", "-c", f"cd {shq(work)} && exec env -u NO_COLOR TERM=dumb HOME={shq(home)} {shq(rs)} --db {shq(db)}"]
        tmp2 = os.path.join(s.tmp, "dumb")  # a socket of its own: the first server may still be going away
        os.makedirs(tmp2)
        term = s.open("c2", argv=argv, env=dict(s.env, TERM="dumb"), sock_dir=tmp2)
        wait("a prompt", lambda: at_prompt(term), term, 30)
        output_after_command(term, c, 'sql "select 1"', "1", "TERM=dumb")
        output_after_command(term, c, "sql \"select 'xyz'\"", "'xyz'", "TERM=dumb")
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
