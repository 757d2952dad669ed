#!/usr/bin/env python3
"""Where a script's messages go: errors (with their file:line and caret) on stderr, everything else on
stdout, whether the commands come from a file, from -c or from a pipe; `ringside s.ring 2>/dev/null`
leaves only the normal output.

usage: streams_test.py RINGSIDE"""
import os
import subprocess
import sys
import tempfile

from repl_check import Checks

EXE = os.path.abspath(sys.argv[1])
check = Checks()


SCRIPT = "model m = mlp 784-10\nmodel x = foo\nshow m\n"
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "s.ring")
    with open(path, "w") as f:
        f.write(SCRIPT)
    runs = {
        "file": ([EXE, "--no-db", "--keep-going", path], None),
        "-c": ([EXE, "--no-db", "--keep-going", "-c", SCRIPT.strip().replace("\n", "; ")], None),
        "pipe": ([EXE, "--no-db", "--keep-going"], SCRIPT),
    }
    for name, (argv, stdin) in runs.items():
        p = subprocess.run(argv, input=stdin if stdin is not None else "", capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, NO_COLOR="1"))
        detail = "stdout:\n%s\nstderr:\n%s" % (p.stdout, p.stderr)
        check("error:" not in p.stdout and "^^^" not in p.stdout, "%s: no error on stdout" % name, detail)
        check("error: model: unknown model kind 'foo'" in p.stderr and "^^^" in p.stderr,
              "%s: the error and its caret on stderr" % name, detail)
        check("model m: 1 layer" in p.stdout and "spec: seq in=784 linear(10)" in p.stdout,
              "%s: the normal output on stdout" % name, detail)
        check(p.returncode == 1, "%s: exit status 1 (one error)" % name, detail)
    p = subprocess.run([EXE, "--no-db", "--keep-going", path], capture_output=True, text=True, timeout=60)
    check("s.ring:2: error:" in p.stderr, "a script's error starts with file:line on stderr", p.stderr)
check.finish("streams")
