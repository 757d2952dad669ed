#!/usr/bin/env python3
"""Plays one tutorial end to end as a class would watch it, without waiting, and checks its numbers.

    play_tutorial.py RINGSIDE TUTORIAL.ring
    play_tutorial.py --listed RINGSIDE NAME...     (every tutorials/*.ring is one of NAMEs)

1. The play: `ringside --db T.db -c 'play NN-NAME auto'` in a temporary folder (a tutorial may write
   files there) with a fresh session log, NO_COLOR=1, COLUMNS=80, TERM=dumb, stdin from /dev/null. It
   must exit 0, print no error or warning, print every sentence of its narration, and pass every one
   of its `expect` checks (one "ok:" line each).
2. The checks check something: the tutorial has at least MIN_NUMBER_CHECKS expects that compare with
   = or ~= against a number or a [vector] (the numbers it teaches; `x >= 0` teaches nothing). Each expect with a number or a vector is then made
   wrong (a different number for = and ~=, the opposite comparison for < <= > >= !=), the mutated
   script is run with --keep-going, and every mutated expect must fail there: a wrong number fails the
   test, so a tutorial can never drift from the product unnoticed.
Prints the tutorial's time in auto mode and its checks (the report's figures); asserts no timing."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TUTORIALS = os.path.normpath(os.path.join(HERE, '..', '..', 'tutorials'))
MIN_NUMBER_CHECKS = 3
TIMEOUT_S = 300  # the bound for a tutorial in auto mode on the 2-core machine

NUMBER = r'[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?'
# expect SUBJECT OP VALUE [within TOL]: VALUE a number or a vector (the checks on numbers)
EXPECT_NUM = re.compile(r'^(\s*expect\s+)(.*?)\s*(==|!=|<=|>=|~=|=|<|>)\s*(%s|\[[^\]]*\])(\s+within\s+(%s))?\s*$'
                        % (NUMBER, NUMBER))
FLIP = {'=': '!=', '==': '!=', '!=': '=', '<': '>=', '<=': '>', '>': '<=', '>=': '<'}


def number(text):
    return float(text[:-1]) / 100 if text.endswith('%') else float(text)


def shifted(x):
    """A number that = can never take for x."""
    return x + 1 + abs(x)


def mutate(line):
    """The expect line made wrong, or None when it compares with a name (nothing to change)."""
    m = EXPECT_NUM.match(line)
    if not m:
        return None
    head, subject, op, value, within, tol = m.groups()
    if op in ('<', '<=', '>', '>=', '!='):
        return '%s%s %s %s%s' % (head, subject, FLIP[op], value, within or '')
    if value.startswith('['):
        nums = [float(v) for v in value[1:-1].split(',')]
        nums[-1] = shifted(nums[-1])
        return '%s%s %s [%s]%s' % (head, subject, op, ', '.join('%.17g' % v for v in nums), within or '')
    x = number(value)
    if op != '~=':
        return '%s%s %s %.17g' % (head, subject, op, shifted(x))
    t = number(tol)
    if tol.endswith('%'):
        if t >= 1 / 3:
            return None  # a tolerance that wide cannot be made to fail by a shift this simple
        wrong = x + (1 + abs(x)) * (1 + 4 * t)
    else:
        wrong = x + 2 * t + 1 + abs(x)
    return '%s%s ~= %.17g%s' % (head, subject, wrong, within)


def run(argv, cwd, env):
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
        out, rc = p.stdout.decode('utf-8', 'replace'), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b'').decode('utf-8', 'replace'), 'timeout (%ds)' % TIMEOUT_S
    return out, rc, time.monotonic() - t0


def environment(tmp):
    env = dict(os.environ)
    env.update({'NO_COLOR': '1', 'COLUMNS': '80', 'LINES': '24', 'TERM': 'dumb', 'HOME': tmp,
                'XDG_DATA_HOME': os.path.join(tmp, 'xdg'), 'RINGSIDE_TUTORIALS': TUTORIALS})
    return env


def listed(names):
    """Every tutorial file is registered as a test (tests/tutorials/meson.build lists them)."""
    files = sorted(f[:-5] for f in os.listdir(TUTORIALS) if re.match(r'^\d+-.*\.ring$', f))
    missing = [f for f in files if f not in names]
    if missing:
        print('FAIL: tutorials not in tests/tutorials/meson.build: %s' % ', '.join(missing))
        return 1
    print('ok   every tutorial is a test: %s' % ', '.join(files))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == '--listed':
        return listed(argv[2:])
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    ringside, path = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    name = os.path.basename(path)[:-5]
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    narration = [m.group(1).replace('\\"', '"').replace('\\\\', '\\')
                 for line in lines for m in [re.match(r'^\s*say\s+"((?:[^"\\]|\\.)*)"', line)] if m]
    expects = [(i + 1, line.strip()) for i, line in enumerate(lines) if re.match(r'^\s*expect\b', line)]
    numeric = [(n, line) for n, line in expects if EXPECT_NUM.match(line)]
    problems = []
    tmp = tempfile.mkdtemp(prefix='rs-tutorial-')
    try:
        env = environment(tmp)
        out, rc, secs = run([ringside, '--db', 'play.db', '-c', 'play %s auto' % name], tmp, env)
        said = ' '.join(' '.join(l[2:].strip() for l in out.splitlines() if l.startswith('| ')).split())
        if rc != 0:
            problems.append('exit status %s, not 0' % rc)
        errors = [l for l in out.splitlines() if 'error:' in l or 'warning:' in l]
        if errors:
            problems.append('it printed errors:\n  ' + '\n  '.join(errors))
        missing = [s for s in narration if ' '.join(s.split()) not in said]
        if missing:
            problems.append('narration not printed:\n  ' + '\n  '.join(missing))
        oks = len(re.findall(r'^ok: ', out, re.M))
        if oks != len(expects):
            problems.append('%d expect lines, %d passed' % (len(expects), oks))
        taught = [line for n, line in numeric if EXPECT_NUM.match(line).group(3) in ('=', '==', '~=')]
        if len(taught) < MIN_NUMBER_CHECKS:
            problems.append('%d expects check a number with = or ~=; a tutorial needs %d or more'
                            % (len(taught), MIN_NUMBER_CHECKS))
        # the same script with every number check made wrong: each must fail
        mutated, made = list(lines), {}
        for n, line in numeric:
            wrong = mutate(lines[n - 1])
            if wrong:
                mutated[n - 1] = wrong
                made[n] = wrong.strip()
        mpath = os.path.join(tmp, 'mutated.ring')
        with open(mpath, 'w', encoding='utf-8') as f:
            f.write('\n'.join(mutated))
        mdir = os.path.join(tmp, 'm')
        os.mkdir(mdir)
        mout, mrc, msecs = run([ringside, '--keep-going', '--db', 'mutated.db', mpath], mdir, environment(mdir))
        failed_at = {int(m.group(1)) for m in re.finditer(r'^%s:(\d+): error: expect failed' % re.escape(mpath),
                                                          mout, re.M)}
        survived = [made[n] for n in sorted(made) if n not in failed_at]
        if survived:
            problems.append('made wrong, these checks still passed:\n  ' + '\n  '.join(survived))
        other = [l for l in mout.splitlines() if 'error:' in l and 'expect failed' not in l]
        if other:
            problems.append('the mutated run printed other errors:\n  ' + '\n  '.join(other[:10]))
        if len(made) < MIN_NUMBER_CHECKS:
            problems.append('only %d checks could be made wrong; a tutorial needs %d or more'
                            % (len(made), MIN_NUMBER_CHECKS))
        wide = [l for l in out.splitlines() if len(l) > 80]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if problems:
        print(out)
        print('FAIL play %s auto:\n%s' % (name, '\n'.join(problems)))
        return 1
    print('ok   play %s auto: %.1fs, %d sentences, %d checks (%d on numbers, each failing when made wrong)'
          % (name, secs, len(narration), len(expects), len(made)))
    for n, line in expects:
        print('       line %3d: %s' % (n, line))
    if wide:
        print('     (%d output lines wider than 80 columns)' % len(wide))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
