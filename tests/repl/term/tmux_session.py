"""What every test that drives the REPL from outside starts and ends with, written once: a scratch folder
with its own HOME (history and XDG data land there) and session log, the environment and command line
ringside runs under in a tmux pane (TERM=xterm-256color, UTF-8; NO_COLOR and an outer tmux's variables
cleared), the checks, `quit` and its exit status, and at the end the pane killed, the folder kept when a
check failed (removed otherwise) and the tally printed; and the tmux driver they use (Term, wait,
at_prompt, run_line, Checks).

    with session(rs, "rs-x-") as s:          # a Fail inside is one failed check, not a traceback
        term = s.open("s1", 80, 24)
        ...
        s.quit()
    return s.finish()
"""
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

PROMPT = "ringside>"


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


class Fail(Exception):
    pass


class Term:
    """One tmux server on a private socket, one session, one pane (w x h) running ringside.

    The pane runs `sh -c 'trap : INT; ringside ...; echo $? > RC'`: the shell reaps ringside and writes its
    exit status (tmux 3.3a's own #{pane_dead_status} is unreliable: now and then its server misses the
    SIGCHLD and leaves the child a zombie), and its trap keeps it alive through Ctrl-C while giving
    ringside the default SIGINT disposition, as from an interactive shell."""

    def __init__(self, tmp, argv, env, name, w=120, h=40):
        self.sock = os.path.join(tmp, "tmux.sock")
        self.env = env
        self.rcfile = os.path.join(tmp, name + ".rc")
        cmd = "trap : INT; " + " ".join(shq(a) for a in argv) + f"; echo $? > {shq(self.rcfile)}"
        self.tmux("-f", "/dev/null", "start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
                  "set-option", "-g", "history-limit", "5000", ";",
                  "new-session", "-d", "-s", "rs", "-x", str(w), "-y", str(h), "sh -c " + shq(cmd))
        self.sh = int(self.fmt("#{pane_pid}"))
        self.pid = wait("ringside to start under the pane's shell", lambda: child_of(self.sh), self, 10)

    def tmux(self, *args, check=True):
        r = subprocess.run(["tmux", "-S", self.sock] + list(args), env=self.env, capture_output=True, text=True,
                           timeout=20)
        if check and r.returncode != 0:
            raise Fail(f"tmux {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def fmt(self, f):
        return self.tmux("display-message", "-p", "-t", "rs", f).strip()

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "rs", *keys)

    def text(self, *keys):
        """Types text literally (no key-name lookup)."""
        self.tmux("send-keys", "-t", "rs", "-l", *keys)

    def screen(self):
        """The whole pane history, wrapped lines joined, trailing blanks stripped."""
        out = self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "rs")
        lines = [l.rstrip() for l in out.split("\n")]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def visible(self):
        """The visible pane only (a dashboard lives on the alternate screen)."""
        return self.tmux("capture-pane", "-p", "-t", "rs").split("\n")

    def cursor(self):
        """(x, line at the cursor) of the visible pane."""
        x, y = (int(v) for v in self.fmt("#{cursor_x} #{cursor_y}").split())
        vis = self.tmux("capture-pane", "-p", "-t", "rs").split("\n")
        return x, (vis[y].rstrip() if y < len(vis) else "")

    def alive(self):
        st = proc_state(self.pid)
        return st is not None and st != "Z"

    def dead(self):
        """ringside has exited and its status is known."""
        return os.path.exists(self.rcfile) and open(self.rcfile).read().strip() != ""

    def dead_status(self):
        """The exit status as the shell saw it (128+N for signal N); '' while unknown."""
        return open(self.rcfile).read().strip() if os.path.exists(self.rcfile) else ""

    def state(self):
        """For failure messages."""
        return f"process {self.pid}: state {proc_state(self.pid) or 'gone'}; exit status {self.dead_status() or 'not written'}"

    def kill(self):
        self.tmux("kill-server", check=False)


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def child_of(ppid):
    """The pid of a process whose parent is ppid, or None."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                        return int(d)
            except (OSError, ValueError, IndexError):
                pass
    return None


def shq(s):
    return "'" + s.replace("'", "'\\''") + "'"


def wait(what, cond, term, timeout=15.0):
    """Polls cond() every 50 ms until it returns a true value; fails with the screen after timeout."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            tail = "\n".join(term.screen()[-25:])
            raise Fail(f"timed out after {timeout:.0f}s waiting for: {what}\n--- screen (last 25 lines) ---\n{tail}\n---")
        time.sleep(0.05)


def at_prompt(term, typed=""):
    """The cursor sits on a prompt line holding exactly `typed`, at its end."""
    x, line = term.cursor()
    want = f"{PROMPT} {typed}"
    return line == want.rstrip() and x == len(want)


def n_prompts(term):
    return sum(1 for l in term.screen() if l.startswith(PROMPT))


def run_line(term, line, expect=None, timeout=15.0):
    """Types a command and Enter; waits for its output (`expect`, after the echo of the line) and a new
    empty prompt. Returns the screen lines after the command's line."""
    before = n_prompts(term)
    wait(f"an empty prompt before typing {line!r}", lambda: at_prompt(term), term)
    term.text(line)
    wait(f"{line!r} echoed on the prompt line", lambda: at_prompt(term, line), term)
    term.keys("Enter")

    def done():
        scr = term.screen()
        idx = [i for i, l in enumerate(scr) if l == f"{PROMPT} {line}"]
        if not idx:
            return None
        after = scr[idx[-1] + 1:]
        if expect is not None and not any(expect in l for l in after):
            return None
        if n_prompts(term) <= before or not at_prompt(term):
            return None
        return after

    return wait(f"the output of {line!r}" + (f" (containing {expect!r})" if expect else "") + " and a new prompt",
                done, term, timeout)


class Checks:
    def __init__(self):
        self.fails = 0

    def wait_ok(self, what, cond, term, timeout=10.0, detail=None):
        """A check that polls: passes when cond() holds before the deadline, else fails with the screen."""
        try:
            wait(what, cond, term, timeout)
            return self.ok(what, True)
        except Fail as e:
            return self.ok(what, False, (detail() + "\n" if detail else "") + str(e))

    def ok(self, what, cond, detail=""):
        print(("ok   " if cond else "FAIL ") + what + ("" if cond or not detail else f"\n     {detail}"))
        sys.stdout.flush()
        if not cond:
            self.fails += 1
        return cond



def ringside_arg(doc, what, tools=("tmux",)):
    """The opening of a terminal test's main: ringside's path, argv[1] (without it DOC is printed and the
    test exits 2), and TOOLS on PATH (require: the test is skipped without them)."""
    if len(sys.argv) < 2:
        print(doc)
        sys.exit(2)
    require(*tools, what=what)
    return os.path.abspath(sys.argv[1])


def require(*tools, what):
    """Skips the test (77) unless every one of TOOLS is on PATH; WHAT names the test that needs them."""
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        skip(f"{' and '.join(missing)} not installed (scripts/setup.sh installs tmux): no {what}")


class Session:
    """The scratch folder (tmp, home, db: tmp/s.db, or None for --no-db), env and argv for a pane, the
    checks (c), the pane now open (term) and when it began (t0). unset: more variables to clear."""

    def __init__(self, rs, prefix, db=True, unset=()):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.home = os.path.join(self.tmp, "home")
        os.makedirs(self.home)
        self.db = os.path.join(self.tmp, "s.db") if db else None
        data = os.path.join(self.home, "data")
        drop = ("TMUX", "TMUX_PANE", "NO_COLOR", "XDG_DATA_HOME") + tuple(unset)
        self.env = {k: v for k, v in os.environ.items() if k not in drop}
        self.env.update(HOME=self.home, XDG_DATA_HOME=data, TERM="xterm-256color", LC_ALL="C.UTF-8")
        self.argv = (["env", "-u", "NO_COLOR"] + [w for v in unset for w in ("-u", v)] +
                     [f"HOME={self.home}", f"XDG_DATA_HOME={data}", rs] + (["--db", self.db] if db else ["--no-db"]))
        self.c = Checks()
        self.term = None
        self.t0 = time.monotonic()

    def open(self, name, w=120, h=40, argv=None, env=None, sock_dir=None):
        """A pane of W x H running ARGV (the session's) with ENV (the session's); its tmux socket in SOCK_DIR
        (the scratch folder; another one for a second server while the first may still be going away).
        Waits for ringside to start; becomes self.term."""
        self.term = Term(sock_dir or self.tmp, argv or self.argv, env or self.env, name, w, h)
        return self.term

    def close(self):
        """Kills the pane's tmux server (ringside goes with it, SIGHUP)."""
        if self.term:
            self.term.kill()
            self.term = None

    def quit(self, what="exit status 0 (under ASan: no leak or error)"):
        """Types `quit` at the prompt: ringside exits, with status 0 (checked as WHAT)."""
        term = self.term
        term.text("quit")
        term.keys("Enter")
        self.c.wait_ok("ringside exits after quit", term.dead, term, 15, detail=term.state)
        return self.c.ok(what, term.dead_status() == "0", term.state())

    def finish(self):
        """Prints the tally and the time; returns the exit status (1 when a check failed)."""
        print(f"{self.c.fails} failure(s), {time.monotonic() - self.t0:.1f}s")
        return 1 if self.c.fails else 0


@contextlib.contextmanager
def session(rs, prefix, what="the terminal session went as expected", catch=(Fail,), **kw):
    """A Session for the block. An exception of CATCH inside ends the block as one failed check named WHAT;
    after it the pane is killed and the scratch folder removed, or kept and named when a check failed."""
    s = Session(rs, prefix, **kw)
    try:
        yield s
    except catch as e:
        s.c.ok(what, False, str(e))
    finally:
        s.close()
        if s.c.fails:
            print(f"scratch folder kept: {s.tmp}")
        else:
            shutil.rmtree(s.tmp, ignore_errors=True)
