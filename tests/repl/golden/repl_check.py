"""What the REPL tests of this folder share: checks that count their failures, and a session run whose
output has the wrapped lines joined (messages wrap at the terminal's width; a test matches whole
sentences)."""
import os
import re
import subprocess
import sys


class Checks:
    """check(cond, what, detail): prints ok/FAIL with what (and detail on failure), counts failures;
    finish(name) prints the count and exits 1 when any failed."""

    def __init__(self):
        self.failures = 0

    def __call__(self, cond, what, detail=""):
        print(("ok: " if cond else "FAIL: ") + what)
        if not cond:
            self.failures += 1
            print(detail)

    def finish(self, name):
        print("%s: %d failed" % (name, self.failures))
        sys.exit(1 if self.failures else 0)


def run(exe, cmds, stdin=False, timeout=600):
    """ringside --no-db --keep-going on cmds (-c CMDS, or the lines on stdin): rc, stdout and stderr with
    continuation lines joined, and a detail of the raw output for a failure."""
    args = [exe, "--no-db", "--keep-going"] + ([] if stdin else ["-c", cmds])
    p = subprocess.run(args, input=cmds if stdin else None, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, NO_COLOR="1", COLUMNS="200"))
    flat = lambda t: re.sub(r"\n  (?=\S)", " ", t)
    detail = "rc %d\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout[-6000:], p.stderr[-3000:])
    return p.returncode, flat(p.stdout), flat(p.stderr), detail
