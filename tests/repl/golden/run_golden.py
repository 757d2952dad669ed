#!/usr/bin/env python3
"""Golden scripted sessions: runs each tests/repl/golden/*.ring through ringside and compares what it
prints with the .out file next to it.

    run_golden.py [--update] [--keep] RINGSIDE [SCRIPT.ring ...]

Each script runs in a fresh temporary folder (save/export files land there) with a fresh session log
(`--db session.db`), `--keep-going`, NO_COLOR=1, COLUMNS=80 (see columns= below), TERM=dumb, stdin
from /dev/null (so `pause` and step mode never wait), HOME and XDG_DATA_HOME inside the folder, and
the two small tutorials of tests/repl/golden/tutorials/ (RINGSIDE_TUTORIALS: the real ones change as
they grow, and tests/tutorials plays them). The files under files/ are copied into the folder first, and
the script itself is copied there and run by its bare name, so error lines read `NAME.ring:LINE:`.
stdout and stderr are merged; the exit status is appended as `[exit N]`.

Directives, in comment lines at the top of a script (`# golden: KEY=VALUE`):
    setup=FILE.ring   run files/FILE.ring first, in the same folder and session log (for replay and
                      export of an earlier session); its output and exit status go first in the .out
    args=ARGS         extra ringside arguments, space-separated (e.g. --no-db, which also drops --db)
    keep-going=off    leave out --keep-going (the script must stop at its first error)
    cat=FILE          after the run, append FILE from the folder (e.g. an exported script)
    columns=N         the terminal's width (default 80), for tables that must not be cut: a table
                      narrowed to fit cuts its cells at widths that follow its timing cells, which
                      the normalisation below turns into `#` but cannot make uncut

What legitimately varies from run to run is normalised before comparing (rules in NORMALISE below,
applied line by line in order; tables are re-aligned after their cells change, see reflow_tables):
    $TMP, $SRC, $RINGSIDE   the temporary folder, the source tree, the ringside binary
    ringside X.Y.Z          the version number
    OpenBLAS <kernel>       the OpenBLAS kernel ringside picked for this CPU, and in `version` why it
                            did and which vector extensions the CPU has
    threads: <n>            the thread count `version` reports (scripts `set threads=1` to be exact)
    YYYY-MM-DD hh:mm[:ss]   dates and times of day (session log timestamps; MM-DD hh:mm in `runs`)
    #.#s                    durations (`in 0.4s`, the runs table's time column, `duration 0.1s`)
    # samples/s             throughput in training lines
    on <host>               the host name in an exported script's header
    <sha256>                the checksum of a weights file in `show run` (the weights' last bits
                            depend on the OpenBLAS kernel even where every printed figure agrees)
    seconds / samples_per_s / duration rows of `show run`, `compare` and `sql` tables and key/value
                            lines: every value after the row's name becomes `#` (in tables, except the
                            rows/ranks/steps counts)
Everything else (losses, accuracies, parameter counts) must match exactly: scripts train on one
thread with fixed seeds, which makes the figures identical from run to run, and the printed figures
(4 to 6 digits) agreed across the OpenBLAS kernels tried (SkylakeX, Haswell, Sandybridge, Prescott).

--update rewrites the .out files (read the diff before committing it: the .out files are the
specification of what users see). --keep leaves the temporary folders and prints where they are.
Exit status: 0 when every script matches, 1 otherwise (a unified diff is printed for each mismatch).
"""

import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, '..', '..', '..'))
TIMEOUT = 240

# Rows (first cell of a table row, or key of a key/value line) whose values are timings; in tables,
# the cells of such a row become `#` except in the columns named in STEADY_COLUMNS (counts).
VARYING_ROWS = ('seconds', 'samples_per_s', 'duration')
STEADY_COLUMNS = ('rows', 'ranks', 'steps')

NORMALISE = [
    # the version number, wherever it is printed (version, export headers)
    (re.compile(r'\bringside \d+\.\d+\.\d+[\w.+~-]*'), 'ringside X.Y.Z'),
    # `version`: the kernel, why it was picked and the CPU's vector extensions
    (re.compile(r'^BLAS: OpenBLAS kernel .*$'), 'BLAS: OpenBLAS kernel <kernel> (<why>); CPU <features>'),
    (re.compile(r'^threads: \d+$'), 'threads: <n>'),
    # `show MODEL`: kernels: cpu, 1 threads, OpenBLAS SkylakeX
    (re.compile(r'\bOpenBLAS (?!kernel <)[A-Za-z][A-Za-z0-9_]*'), 'OpenBLAS <kernel>'),
    # timestamps (same width as the real thing, so most tables keep their shape)
    (re.compile(r'\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b'), 'YYYY-MM-DD hh:mm:ss'),
    (re.compile(r'\b\d{4}-\d\d-\d\d \d\d:\d\d\b'), 'YYYY-MM-DD hh:mm'),
    (re.compile(r'\b\d{4}-\d\d-\d\d\b'), 'YYYY-MM-DD'),
    (re.compile(r'(?<![\d-])\d\d-\d\d \d\d:\d\d\b'), 'MM-DD hh:mm'),  # the runs table's start
    # durations: 0.4s, 12.0s, 1m05s, 2h01m
    (re.compile(r'(?<![\w.])\d+\.\d+s\b'), '#.#s'),
    (re.compile(r'(?<![\w.])\d+m\d\ds\b'), '#.#s'),
    (re.compile(r'(?<![\w.])\d+h\d\dm\b'), '#.#s'),
    # throughput
    (re.compile(r'(?<![\w.])\d+(\.\d+)? samples/s\b'), '# samples/s'),
    # sha256 of a file of weights (its last bits differ from one OpenBLAS kernel to another), whole
    # or cut short with "…" in `show run`'s artifacts table
    (re.compile(r'\b[0-9a-f]{64}\b|\b[0-9a-f]{8,63}…'), '<sha256>'),
    # exported scripts: "# ringside session 1, started ... on HOST (ringside X.Y.Z)"
    (re.compile(r'( started \S+ \S+ on )\S+( \(ringside)'), r'\1<host>\2'),
    # key/value lines of `show run` (final figures): "samples_per_s  70234.2"
    (re.compile(r'^(\s*(?:%s)\s+)\S.*$' % '|'.join(VARYING_ROWS)), r'\1#'),
]


def normalise_line(line, subst):
    for old, new in subst:
        if old:
            line = line.replace(old, new)
    for rx, rep in NORMALISE:
        line = rx.sub(rep, line)
    return line


RULE = re.compile(r'^ *-+( +-+)* *$')


def reflow_tables(raw, norm, subst):
    """Tables (a header, a rule of dashes, rows; see repl/slog/table.h) are printed with columns as wide
    as their widest cell, so a normalised cell of another width would shift the columns around it.
    For each table: cut the raw lines into cells at the rule's columns, normalise each cell, and when
    any cell changed, print the table again with widths from the normalised cells (two spaces
    between columns, numbers right-aligned as before, no trailing spaces). Rows named in VARYING_ROWS
    get `#` in every cell after the first, except in the columns named in STEADY_COLUMNS."""
    out = list(norm)
    i = 1
    while i < len(raw):
        if not (RULE.match(raw[i]) and raw[i].strip() and raw[i - 1].strip()):
            i += 1
            continue
        rule = raw[i]
        spans = [(m.start(), m.end()) for m in re.finditer(r'-+', rule)]
        end = i + 1
        while end < len(raw) and raw[end].strip() and not raw[end].startswith('> ') \
                and not raw[end].startswith('[exit '):
            end += 1
        rows = [raw[i - 1]] + raw[i + 1:end]

        def cut(line):
            cells = []
            for k, (a, b) in enumerate(spans):
                stop = spans[k + 1][0] if k + 1 < len(spans) else len(line)
                cells.append(line[a:stop] if a < len(line) else '')
            return cells

        raw_cells = [cut(r) for r in rows]
        right = []
        for k, (a, b) in enumerate(spans):
            width = b - a
            texts = [c[k].rstrip() for c in raw_cells if c[k].strip()]
            right.append(bool(texts) and all(len(t) == width for t in texts)
                         and any(t != t.lstrip() for t in texts))
        cells, changed = [], False
        for r, rc in enumerate(raw_cells):
            row = []
            for k, c in enumerate(rc):
                text = c.strip() if right[k] else c.rstrip()
                new = normalise_line(text, subst)
                if r > 0 and k > 0 and rc[0].strip() in VARYING_ROWS \
                        and raw_cells[0][k].strip() not in STEADY_COLUMNS:
                    new = '#'
                changed |= new != text
                row.append(new)
            cells.append(row)
        if changed:
            widths = [max(max(len(row[k]) for row in cells), 1) for k in range(len(spans))]

            def render(row):
                parts = []
                for k, text in enumerate(row):
                    parts.append(text.rjust(widths[k]) if right[k] else text.ljust(widths[k]))
                return '  '.join(parts).rstrip()

            out[i - 1] = render(cells[0])
            out[i] = '  '.join('-' * w for w in widths)
            for r in range(1, len(cells)):
                out[i + r] = render(cells[r])
        i = end
    return out


# `version`'s BLAS line is wrapped at the terminal's width; its continuation lines (indented) say why
# the kernel was picked and what the CPU has, which differs from one machine to another.
BLAS_LINES = re.compile(r'^(BLAS: OpenBLAS kernel .*)(\n  \S.*)*$', re.M)


def normalise(text, subst):
    text = BLAS_LINES.sub(lambda m: m.group(1), text)
    raw = text.split('\n')
    norm = [normalise_line(line, subst) for line in raw]
    return '\n'.join(reflow_tables(raw, norm, subst))


def directives(path):
    d = {'setup': [], 'args': [], 'keep-going': 'on', 'cat': [], 'columns': '80'}
    with open(path, encoding='utf-8') as f:
        for line in f:
            if not line.startswith('#'):
                break
            m = re.match(r'#\s*golden:\s*([\w-]+)=(.*\S)', line)
            if not m:
                continue
            key, val = m.group(1), m.group(2)
            if key in ('setup', 'cat'):
                d[key].append(val)
            elif key == 'args':
                d['args'] += val.split()
            elif key in ('keep-going', 'columns'):
                d[key] = val
            else:
                raise SystemExit('%s: unknown directive %s' % (path, key))
    return d


def run_one(ringside, script, keep):
    d = directives(script)
    # A short folder name: the session log stores artifacts' absolute paths, and a long one would be
    # cut to the table width in `show run`.
    base_dir = '/tmp' if os.access('/tmp', os.W_OK) else None
    tmp = tempfile.mkdtemp(prefix='rsg-', dir=base_dir)
    files = os.path.join(HERE, 'files')
    if os.path.isdir(files):
        for name in os.listdir(files):
            shutil.copy(os.path.join(files, name), tmp)
    name = os.path.basename(script)
    shutil.copy(script, os.path.join(tmp, name))
    # the tutorials too: messages name a tutorial's path, and the source tree's (of any length) would
    # wrap them at 80 columns in a different place in every checkout
    shutil.copytree(os.path.join(HERE, 'tutorials'), os.path.join(tmp, 'tutorials'))
    env = dict(os.environ)
    for k in ('OPENBLAS_CORETYPE', 'RINGSIDE_BLAS', 'COLORTERM'):
        env.pop(k, None)
    env.update({'NO_COLOR': '1', 'COLUMNS': d['columns'], 'TERM': 'dumb', 'LC_ALL': 'C', 'TZ': 'UTC',
                'HOME': tmp, 'XDG_DATA_HOME': os.path.join(tmp, 'xdg'),
                'RINGSIDE_TUTORIALS': os.path.join(tmp, 'tutorials')})
    base = [ringside]
    if '--no-db' not in d['args']:
        base += ['--db', 'session.db']
    base += d['args']
    out = []
    for step, keep_going in [(s, True) for s in d['setup']] + [(name, d['keep-going'] != 'off')]:
        argv = base + (['--keep-going'] if keep_going else []) + [step]
        if step != name:
            out.append('[setup %s]\n' % step)
        try:
            p = subprocess.run(argv, cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=TIMEOUT)
            text, rc = p.stdout.decode('utf-8', 'replace'), p.returncode
        except subprocess.TimeoutExpired as e:
            text, rc = (e.stdout or b'').decode('utf-8', 'replace'), 'timeout after %ds' % TIMEOUT
        if text and not text.endswith('\n'):
            text += '\n'
        out.append(text + '[exit %s]\n' % rc)
    for f in d['cat']:
        path = os.path.join(tmp, f)
        try:
            with open(path, encoding='utf-8', errors='replace') as fh:
                body = fh.read()
        except OSError as e:
            body = '(cannot read: %s)\n' % e.strerror
        out.append('[cat %s]\n%s' % (f, body if body.endswith('\n') or not body else body + '\n'))
    subst = [(os.path.realpath(tmp), '$TMP'), (tmp, '$TMP'), (os.path.abspath(ringside), '$RINGSIDE'),
             (ringside, '$RINGSIDE'), (SRC, '$SRC')]
    result = normalise(''.join(out), subst)
    if keep:
        print('kept %s' % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return result


def main(argv):
    update = '--update' in argv
    keep = '--keep' in argv
    args = [a for a in argv if a not in ('--update', '--keep')]
    if not args:
        print(__doc__.split('\n\n')[1], file=sys.stderr)
        return 2
    ringside = os.path.abspath(args[0])
    scripts = [os.path.abspath(a) for a in args[1:]] or sorted(
        os.path.join(HERE, f) for f in os.listdir(HERE) if f.endswith('.ring'))
    failed = 0
    for script in scripts:
        t0 = time.monotonic()
        got = run_one(ringside, script, keep)
        secs = time.monotonic() - t0
        expected_path = script[:-len('.ring')] + '.out'
        name = os.path.basename(script)
        if update:
            with open(expected_path, 'w', encoding='utf-8') as f:
                f.write(got)
            print('wrote %s (%.1fs)' % (os.path.basename(expected_path), secs))
            continue
        try:
            with open(expected_path, encoding='utf-8') as f:
                want = f.read()
        except OSError:
            print('FAIL %s: no %s (run with --update to create it)' % (name, os.path.basename(expected_path)))
            failed += 1
            continue
        if got == want:
            print('ok   %s (%.1fs)' % (name, secs))
            continue
        failed += 1
        print('FAIL %s (%.1fs): output differs from %s' % (name, secs, os.path.basename(expected_path)))
        sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                   'expected/' + os.path.basename(expected_path),
                                                   'got/' + os.path.basename(expected_path)))
    if not update:
        print('%d of %d golden sessions match' % (len(scripts) - failed, len(scripts)))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
