#!/usr/bin/env python3
"""Projector mode: at 80 columns no line ringside prints is wider than the terminal.

    width_test.py RINGSIDE                  every `help CMD`, the command list, and a session of the
                                            commands that print tables (show, ls, runs, compare, sql,
                                            history, backends, bench, collective, p2p, train across
                                            ranks, predict, view run N), at COLUMNS=80 and 120
    width_test.py RINGSIDE --progress       the live progress bar of `train` on a terminal (a pty of
                                            80x24): every redraw fits (a wrapped bar cannot be redrawn)
    width_test.py RINGSIDE --tutorials      every tutorials/*.ring of this source tree, played in auto
                                            mode at COLUMNS=80 (new tutorials are picked up by themselves)
    width_test.py RINGSIDE FILE.ring ...    those scripts, played the same way

Widths are display columns (widths.py: wide characters count two, combining marks and escape
sequences none). Help pages must also lose nothing: at 80 columns `help CMD` says the same words in
the same order as at 1000. Exit status: 0 when every line fits, 1 otherwise (each line too long is
printed with its width and where it came from)."""

import glob
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import re
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, '..', '..', '..'))
sys.path.insert(0, HERE)
import widths  # noqa: E402

failures = []


GENERATED = re.compile(r'^(stopped: )?\d+ tokens in ')


def without_generated(text):
    """The output with the text `generate` sampled left out: it goes out as sampled (a terminal folds a
    long line of it, a file keeps it whole), so it is the one text the 80 columns do not bind."""
    out, inside = [], False
    for line in text.splitlines():
        if inside and (GENERATED.match(line) or line.startswith(('> ', '| ', 'error'))):
            inside = False  # the summary ends it; so does the next command, narration or an error
        if not inside:
            out.append(line)
        if line.startswith('> generate '):
            inside = True
    return '\n'.join(out)


def check(what, text, cols):
    bad = widths.too_wide(without_generated(text), cols)
    for n, w, line in bad[:5]:
        failures.append('%s: line %d is %d columns wide (limit %d):\n    %s' % (what, n, w, cols, line))
    if len(bad) > 5:
        failures.append('%s: %d more lines too wide' % (what, len(bad) - 5))
    return not bad


def ringside(rs, args, cols, cwd, timeout=600, extra=None):
    env = dict(os.environ)
    env.update({'NO_COLOR': '1', 'COLUMNS': str(cols), 'TERM': 'dumb', 'HOME': cwd, 'LC_ALL': 'C.UTF-8',
                'XDG_DATA_HOME': os.path.join(cwd, 'xdg'), 'RINGSIDE_TUTORIALS': os.path.join(SRC, 'tutorials')})
    env.update(extra or {})
    p = subprocess.run([rs] + args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode('utf-8', 'replace')


def command_names(rs, tmp):
    """The commands, from `help` at a width where nothing wraps: the first word of each entry."""
    _, out = ringside(rs, ['--no-db', '-c', 'help'], 1000, tmp)
    names = []
    for line in out.splitlines():
        if line.startswith('  ') and not line.startswith('   '):
            w = line.split()[0]
            if w.isalpha() and w not in names:
                names.append(w)
    return names


# The commands that print tables, pictures and summaries, in one session (small sizes: seconds).
SESSION = """\
data d = digits n=600 seed=1
model m = mlp 784-64-10
model c = seq conv(4,3,pad=1) relu maxpool(2) flatten linear(10)
show m
show c
show d
ls
train m on d epochs=2 batch=32 threads=1
train c on d epochs=1 batch=32 threads=1 eval=off
eval m on d
predict m on d n=8
collective all_reduce ranks=4 count=16 algo=ring
collective all_gather ranks=4 count=4 dtype=i32
bench all_reduce ranks=2 sizes=8..4K
p2p ranks=2 size=4K
train m on d mode=ddp ranks=2 epochs=1 batch=32 threads=1
train m on d mode=fsdp zero=3 ranks=2 epochs=1 batch=32 threads=1
runs
show run 1
compare 1 2
history
sql "select id, kind, model, model_spec, dataset, mode, status, steps, options from runs"
backends
view run 4
view run 8
set
version
jobs
"""


def case_help_and_tables(rs):
    tmp = tempfile.mkdtemp(prefix='rs-width-')
    try:
        names = command_names(rs, tmp)
        if len(names) < 20:
            failures.append('help lists only %d commands: %s' % (len(names), names))
        for cols in (80, 120):
            _, out = ringside(rs, ['--no-db', '-c', 'help'], cols, tmp)
            check('help at %d' % cols, out, cols)
            for n in names:
                _, out = ringside(rs, ['--no-db', '-c', 'help ' + n], cols, tmp)
                if check('help %s at %d' % (n, cols), out, cols) and cols == 80:
                    _, wide = ringside(rs, ['--no-db', '-c', 'help ' + n], 1000, tmp)
                    if out.split() != wide.split():
                        failures.append('help %s at 80 columns does not say what it says at 1000:\n%s' % (n, out))
        with open(os.path.join(tmp, 'tables.ring'), 'w') as f:
            f.write(SESSION)
        for cols in (80, 120):
            rc, out = ringside(rs, ['--db', 'w%d.db' % cols, 'tables.ring'], cols, tmp)
            if rc != 0:
                failures.append('the table session at %d columns failed (exit %d):\n%s' % (cols, rc, out))
            check('the table session at %d columns' % cols, out, cols)
            # the commands really ran and printed what they print
            for want in ('parameters', 'test accuracy', 'busbw', 'every rank\'s result equals', 'ok 8 (true',
                         'ZeRO', 'status', 'ringside'):
                if want not in out:
                    failures.append('the table session at %d columns printed no %r' % (cols, want))
        print('help: %d commands, the command list and a session of %d table commands at 80 and 120 columns'
              % (len(names), len(SESSION.splitlines())))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def case_progress(rs):
    """`train` on a terminal redraws one progress line in place; on an 80x24 pty every redraw fits."""
    import fcntl
    import termios
    tmp = tempfile.mkdtemp(prefix='rs-width-')
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 80, 0, 0))
    env = dict(os.environ, NO_COLOR='1', TERM='xterm', HOME=tmp, LC_ALL='C.UTF-8')
    env.pop('COLUMNS', None)
    p = subprocess.Popen([rs, '--no-db', '-c', 'data d = digits n=6000 seed=1; model m = mlp 784-256-10; '
                          'train m on d epochs=2 batch=16 threads=1'], stdin=slave, stdout=slave, stderr=slave,
                         env=env, cwd=tmp)
    os.close(slave)
    chunks = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                b = os.read(master, 65536)
            except OSError:
                break
            if not b:
                break
            chunks.append(b)
        elif p.poll() is not None:
            break
    p.wait(timeout=30)
    os.close(master)
    shutil.rmtree(tmp, ignore_errors=True)
    out = b''.join(chunks).decode('utf-8', 'replace')
    redraws = out.count('\r\x1b[K')
    if redraws < 2:
        failures.append('train on a terminal drew no progress bar (%d redraws):\n%s' % (redraws, out[-2000:]))
    # each redraw starts at column 0 with \r: the pieces between \r and \n are what stands on screen
    pieces = '\n'.join(part for line in out.replace('\r\n', '\n').split('\n') for part in line.split('\r'))
    check('train progress on an 80x24 terminal', pieces, 80)
    print('progress: %d redraws of the bar on an 80x24 pty' % redraws)


def case_scripts(rs, scripts):
    tmp = tempfile.mkdtemp(prefix='rs-width-')
    try:
        for path in scripts:
            t0 = time.monotonic()
            rc, out = ringside(rs, ['--db', 'play.db', '-c', 'play %s mode=auto' % os.path.abspath(path)], 80, tmp,
                               timeout=900)
            ok = check(os.path.basename(path), out, 80)
            if rc != 0:
                failures.append('%s: exit %d in auto mode:\n%s' % (path, rc, out[-3000:]))
            print('%s: %d lines, %s, %.1fs' % (os.path.basename(path), len(out.splitlines()),
                                               'all within 80 columns' if ok else 'TOO WIDE', time.monotonic() - t0))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def case_generated(rs):
    """`generate` writes the text as sampled: the prompt and n characters, byte for byte the same at 80
    columns and at 1000, piped (the wrapper once broke its lines: 207 characters for n=200)."""
    tmp = tempfile.mkdtemp(prefix='rs-width-')
    try:
        texts = []
        for cols in (80, 1000):
            rc, out = ringside(rs, ['--db', 'gen.db', '-c', 'data t = text; model g = gpt layers=1 heads=1 dim=16 '
                                    'ctx=32; generate g prompt="The " n=200 seed=3'], cols, tmp)
            start, end = out.find('The '), out.find('200 tokens in ')
            texts.append(out[start:end] if rc == 0 and 0 <= start < end else None)
            if texts[-1] is None:
                failures.append('generate at %d columns: exit %d:\n%s' % (cols, rc, out[-2000:]))
        if texts[0] is not None and len(texts[0]) != len('The ') + 200 + 1:  # and the line's end
            failures.append('generate wrote %d characters for a 4-character prompt and n=200, not 205' % len(texts[0]))
        if texts[0] is not None and texts[0] != texts[1]:
            failures.append('generated text differs between 80 and 1000 columns')
        print('generate: %s characters, the same at 80 and 1000 columns' % (len(texts[0]) if texts[0] else '?'))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    if not argv or argv[0].startswith('-'):
        print(__doc__, file=sys.stderr)
        return 2
    rs = os.path.abspath(argv[0])
    rest = argv[1:]
    t0 = time.monotonic()
    if not rest:
        case_help_and_tables(rs)
        case_generated(rs)
    elif rest == ['--progress']:
        case_progress(rs)
    elif rest == ['--tutorials']:
        scripts = sorted(glob.glob(os.path.join(SRC, 'tutorials', '*.ring')))
        if not scripts:
            failures.append('no tutorials/*.ring in %s' % SRC)
        case_scripts(rs, scripts)
    else:
        case_scripts(rs, rest)
    for f in failures:
        print('FAIL ' + f)
    print('%s in %.1fs' % ('FAILED' if failures else 'passed', time.monotonic() - t0))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
