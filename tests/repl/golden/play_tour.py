#!/usr/bin/env python3
"""Plays the tour as a class would see it without waiting: `ringside -c 'play tour auto'`, in a
temporary folder (the tour saves a file there) with a fresh session log, NO_COLOR=1, COLUMNS=80.

    play_tour.py RINGSIDE

Checks that ringside exits 0, prints no error, prints every sentence of the tour's narration (the
`say` lines of tutorials/00-tour.ring, as wrapped by say), and finishes well under a minute."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TUTORIALS = os.path.normpath(os.path.join(HERE, '..', '..', '..', 'tutorials'))
LIMIT_S = 50


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    ringside = os.path.abspath(argv[0])
    with open(os.path.join(TUTORIALS, '00-tour.ring'), encoding='utf-8') as f:
        narration = [m.group(1).replace('\\"', '"').replace('\\\\', '\\')
                     for m in re.finditer(r'^\s*say\s+"((?:[^"\\]|\\.)*)"', f.read(), re.M)]
    tmp = tempfile.mkdtemp(prefix='rs-tour-')
    env = dict(os.environ)
    env.update({'NO_COLOR': '1', 'COLUMNS': '80', 'TERM': 'dumb', 'HOME': tmp,
                'XDG_DATA_HOME': os.path.join(tmp, 'xdg'), 'RINGSIDE_TUTORIALS': TUTORIALS})
    t0 = time.monotonic()
    try:
        p = subprocess.run([ringside, '--db', 'tour.db', '-c', 'play tour auto'], cwd=tmp, env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=240)
        out, rc = p.stdout.decode('utf-8', 'replace'), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b'').decode('utf-8', 'replace'), 'timeout'
    secs = time.monotonic() - t0
    shutil.rmtree(tmp, ignore_errors=True)
    # What say printed, as one text: the lines after the "| " bar, joined.
    said = ' '.join(line[2:].strip() for line in out.splitlines() if line.startswith('| '))
    said = ' '.join(said.split())
    problems = []
    if rc != 0:
        problems.append('exit status %s, not 0' % rc)
    errors = [line for line in out.splitlines() if 'error:' in line or 'warning:' in line]
    if errors:
        problems.append('it printed errors:\n  ' + '\n  '.join(errors))
    missing = [s for s in narration if ' '.join(s.split()) not in said]
    if not narration:
        problems.append('no say lines found in tutorials/00-tour.ring')
    if missing:
        problems.append('narration not printed:\n  ' + '\n  '.join(missing))
    if secs > LIMIT_S:
        problems.append('it took %.1fs (the tour must play in well under a minute)' % secs)
    if problems:
        print(out)
        print('FAIL play tour auto:\n' + '\n'.join(problems))
        return 1
    print('ok   play tour auto: %d sentences of narration, exit 0, %.1fs' % (len(narration), secs))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
