#!/usr/bin/env python3
"""`sql ... format=csv|json` against the same queries run here with python's sqlite3, parsed with python's
csv and json modules: every row (more than `format=table`'s 200), the column names, NULL (csv: an empty
field; json: null), numbers as numbers in json (integers and reals), text with commas, quotes and a
newline, and two statements (csv: two blocks; json: two arrays). `compare N M` lists what differs
before what is the same, and `all=on` every field.

Usage: sql_format_test.py PATH/TO/ringside"""
import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

fails = 0


def check(what, cond, detail=""):
    global fails
    print(("ok   " if cond else "FAIL ") + what + ("" if cond or not detail else "\n     " + str(detail)[:3000]))
    fails += 0 if cond else 1


def ringside(exe, d, *cmds):
    path = os.path.join(d, "s.ring")
    with open(path, "w") as f:
        f.write("\n".join(cmds) + "\n")
    # the output is read as it would be piped to another program: no echo of the commands
    r = subprocess.run([exe, "--db", os.path.join(d, "s.db"), path], cwd=d, capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, COLUMNS="80"))
    r.stdout = "\n".join(l for l in r.stdout.split("\n") if not l.startswith("> "))
    return r


def ringside1(exe, d, cmd):
    """One command with -c: its output as another program reads it, nothing echoed."""
    r = subprocess.run([exe, "--db", os.path.join(d, "s.db"), "-c", cmd], cwd=d, capture_output=True, timeout=120,
                       env=dict(os.environ, COLUMNS="80"))
    r.stdout, r.stderr = r.stdout.decode(), r.stderr.decode()  # bytes as written: csv's \r\n kept
    return r


def main():
    exe = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="rs-sqlfmt-") as d:
        r = ringside(exe, d, "data d = digits n=600", "model a = mlp 784-16-10", "train a on d epochs=2 batch=10",
                     "model b = mlp 784-16-10", "train b on d epochs=1 batch=20 lr=0.01")
        check("two training runs", r.returncode == 0, r.stderr)
        db = os.path.join(d, "s.db")
        q1 = "SELECT id, run_id, name, step, value FROM metrics ORDER BY id"
        q2 = ("SELECT 1 AS i, NULL AS n, 0.25 AS f, 'a,b ' || char(34) || 'q' || char(34) || char(10) || 'x' AS t, "
              "'007' AS z")
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        want1 = con.execute(q1).fetchall()
        want2 = con.execute(q2).fetchall()
        con.close()
        check(f"the log holds more than 200 metric rows ({len(want1)})", len(want1) > 200)

        r = ringside1(exe, d, f'sql "{q1}; {q2}" format=csv')
        check("format=csv: exit 0", r.returncode == 0, r.stderr)
        blocks = r.stdout.split("\r\n\n")
        check("format=csv: two blocks, one a statement", len(blocks) == 2, r.stdout[-500:])
        if len(blocks) == 2:
            rows1 = list(csv.reader(io.StringIO(blocks[0], newline="")))
            rows2 = list(csv.reader(io.StringIO(blocks[1], newline="")))
            check("csv: the header names the columns", rows1[0] == ["id", "run_id", "name", "step", "value"], rows1[0])
            got1 = [tuple(x) for x in rows1[1:] if x]
            ref1 = [tuple("" if v is None else (repr(v) if isinstance(v, float) else str(v)) for v in row)
                    for row in want1]
            same = len(got1) == len(ref1) and all(
                g[:4] == w[:4] and (g[4] == w[4] == "" or (g[4] and w[4] and float(g[4]) == float(w[4])))
                for g, w in zip(got1, ref1))
            check(f"csv: every row ({len(got1)} of {len(ref1)}) equals sqlite3's, values to the last digit", same,
                  [(g, w) for g, w in zip(got1, ref1) if g != w][:3])
            check("csv: NULL empty, text with a comma, quotes and a newline quoted",
                  rows2[1:2] == [["1", "", "0.25", 'a,b "q"\nx', "007"]], rows2)

        r = ringside1(exe, d, f'sql "{q1}; {q2}" format=json')
        check("format=json: exit 0", r.returncode == 0, r.stderr)
        dec, pos, arrays = json.JSONDecoder(), 0, []
        text = r.stdout
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                break
            try:
                obj, pos = dec.raw_decode(text, pos)
            except ValueError as e:
                check("json parses", False, f"{e}: {text[pos:pos + 200]}")
                break
            arrays.append(obj)
        check("format=json: two arrays", len(arrays) == 2, text[-300:])
        if len(arrays) == 2:
            ref = [dict(zip(["id", "run_id", "name", "step", "value"], row)) for row in want1]
            check(f"json: every row ({len(arrays[0])}) equals sqlite3's, numbers as numbers",
                  arrays[0] == ref, [(g, w) for g, w in zip(arrays[0], ref) if g != w][:3])
            check("json: null, integer, real, text kept (and '007' stays text)",
                  arrays[1] == [{"i": 1, "n": None, "f": 0.25, "t": 'a,b "q"\nx', "z": "007"}], arrays[1])

        r = ringside(exe, d, "compare 1 2", "compare 1 2 all=on")
        out = r.stdout
        first, _, rest = out.partition("the same in both:")
        check("compare: the differences table comes first and names model, batch and lr",
              all(w in first for w in ("model", "batch", "lr")) and "accum" not in first, out)
        check("compare: the equal fields come after, in the paragraph (accum 1)", "accum 1" in rest, out)
        full = rest.split("every field in one table)")[-1]
        check("compare all=on: the old table, equal fields (accum) in it", "accum" in full and "batch" in full, full)
    print("PASS" if not fails else f"FAIL: {fails} check(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
