#!/usr/bin/env python3
"""`plot` against the session log it draws from, read back independently with python's sqlite3.

Two short training runs (different widths and learning rates), then:
  screen  `plot 1 2` in a script (80 columns, gnuplot's dumb terminal): both runs' series titles in each
          chart's key, no line past 80 columns, and each chart's axis labels bracket the values the log
          holds for it (y: the tick labels span the data, and not more than twice its spread; x: the
          tick labels lie within the logged steps).
  png     `plot 1 2 -> c.png`, decoded here with zlib and struct: 960 wide, 300 rows per chart the log
          has data for; both runs' colours (#1f77b4, #d62728) drawn, a third run's (#2ca02c) absent.
  svg     `plot 1 2 -> c.svg`: an SVG holding both runs' titles and colours.
  pipe    three GPipe runs at m = 1, 2, 4: `plot 1 2 3` draws their measured bubble (final.bubble) against
          (p-1)/(m+p-1), both inside the chart's axes, m from 1 to 4.
  errors  a run that does not exist, a file that is not .png/.svg, and gnuplot missing
          (RINGSIDE_GNUPLOT names a program that is not there): each a message naming the problem (the
          last: how to install gnuplot-nox), and the next command still runs.

Usage: plot_test.py PATH/TO/ringside   (skips, 77, without gnuplot)"""
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import zlib

RUNS = """\
data d = digits n=600
model a = mlp 784-32-10
model b = mlp 784-8-10
train a on d epochs=2 batch=50
train b on d epochs=2 batch=50 lr=0.02 opt=sgd
"""
# what each chart draws, as cmd_plot.c's table (the test reads the log itself for the values)
CHARTS = [("loss", ["loss", "val_loss", "test_loss"]), ("accuracy", ["train_acc", "test_acc"]),
          ("learning rate", ["lr"]), ("loss scale", ["loss_scale"]), ("samples/s", ["samples_per_s"]),
          ("bus bandwidth (GB/s)", ["busbw", "algbw"])]
NUM = r"-?[0-9.]+(?:e[-+]?[0-9]+)?"
fails = 0


def check(what, cond, detail=""):
    global fails
    print(("ok   " if cond else "FAIL ") + what + ("" if cond or not detail else "\n     " + str(detail)))
    sys.stdout.flush()
    fails += 0 if cond else 1
    return cond


def ringside(exe, cwd, script, env=None):
    path = os.path.join(cwd, "s.ring")
    with open(path, "w") as f:
        f.write(script)
    e = dict(os.environ, COLUMNS="80")
    e.update(env or {})
    return subprocess.run([exe, "--db", os.path.join(cwd, "t.db"), "--keep-going", path], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=e)


def series(db, run, name):
    """(step, mean over ranks) of a metric, as the log holds it."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT step, AVG(value) FROM metrics WHERE run_id=? AND name=? AND value IS NOT NULL "
                           "AND step IS NOT NULL GROUP BY step ORDER BY step", (run, name)).fetchall()
    finally:
        con.close()


def charts_with_data(db):
    out = []
    for title, names in CHARTS:
        pts = [p for r in (1, 2) for n in names for p in series(db, r, n)]
        if pts:
            out.append((title, names, pts))
    return out


def chart_text(text, title):
    """The lines of one dumb chart: from its centred title to its x label."""
    lines = text.split("\n")
    for i, l in enumerate(lines):
        if l.strip() == title:
            for j in range(i + 1, len(lines)):
                if lines[j].strip() in ("step", "size (bytes)", "micro-batches m"):
                    return lines[i:j + 3]
    return None


def screen(exe, d):
    r = ringside(exe, d, "plot 1 2\n")
    text = r.stdout
    check("plot 1 2: exit 0", r.returncode == 0, r.stdout + r.stderr)
    wide = [l for l in text.split("\n") if len(l) > 80]
    check("plot 1 2: no line past 80 columns", not wide, wide[:3])
    db = os.path.join(d, "t.db")
    for title, names, pts in charts_with_data(db):
        ch = chart_text(text, title)
        if not check(f"chart '{title}' drawn", ch is not None, text[:2000]):
            continue
        body = "\n".join(ch)
        for r_ in (1, 2):
            for n in names:
                if series(db, r_, n) and not (n == "test_loss" and series(db, r_, "val_loss")):
                    check(f"chart '{title}': key names run {r_} {n}", f"run {r_} {n}" in body)
        ys = [float(m.group(1)) for l in ch if (m := re.match(r"^\s*(" + NUM + r") [+|]", l))]
        vals = [v for _, v in pts]
        lo, hi = min(vals), max(vals)
        ok = len(ys) >= 2 and min(ys) <= lo + 1e-9 and max(ys) >= hi - 1e-9
        if ok and hi > lo:
            ok = max(ys) - min(ys) <= 2 * (hi - lo) + 1e-12
        check(f"chart '{title}': y labels {min(ys) if ys else None}..{max(ys) if ys else None} bracket the logged "
              f"{lo:.4g}..{hi:.4g}", ok, body)
        xl = [l for l in ch if re.match(r"^\s*" + NUM + r"(\s+" + NUM + r")+\s*$", l)]
        xs = [float(v) for v in re.findall(NUM, xl[-1])] if xl else []
        steps = [s for s, _ in pts]
        check(f"chart '{title}': x labels {xs} within the logged steps {min(steps)}..{max(steps)}",
              len(xs) >= 2 and min(steps) <= min(xs) and max(xs) <= max(steps)
              and max(xs) - min(xs) >= (max(steps) - min(steps)) / 2, body)


def png_pixels(path):
    """(width, height, set of (r, g, b) and its counts) of an 8-bit non-interlaced RGB/RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, f"PNG kind {hdr}"
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    prev, counts, i = bytearray(stride), {}, 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp):
            px = bytes(line[x:x + 3])
            counts[px] = counts.get(px, 0) + 1
        prev = line
    return w, h, counts


def picture(exe, d):
    db = os.path.join(d, "t.db")
    n = len(charts_with_data(db))
    r = ringside(exe, d, "plot 1 2 -> c.png\nplot 1 2 -> c.svg\n")
    check("plot -> c.png, c.svg: exit 0", r.returncode == 0, r.stdout + r.stderr)
    png = os.path.join(d, "c.png")
    if not check("c.png written", os.path.exists(png), r.stdout):
        return
    check("the output names the file and its size", f"wrote c.png ({os.path.getsize(png)} bytes)" in r.stdout, r.stdout)
    w, h, counts = png_pixels(png)
    check(f"c.png is 960 x {300 * n} ({n} charts)", (w, h) == (960, 300 * n), (w, h))
    blue, red, green = counts.get(b"\x1f\x77\xb4", 0), counts.get(b"\xd6\x27\x28", 0), counts.get(b"\x2c\xa0\x2c", 0)
    check(f"run 1's colour #1f77b4 drawn ({blue} px) and run 2's #d62728 ({red} px)", blue > 300 and red > 300)
    check(f"no third run's colour #2ca02c ({green} px)", green == 0)
    svg = open(os.path.join(d, "c.svg")).read() if os.path.exists(os.path.join(d, "c.svg")) else ""
    check("c.svg: an SVG with both runs' titles and colours",
          "<svg" in svg and "run 1 loss" in svg and "run 2 loss" in svg and "rgb( 31, 119, 180)" in svg
          and "rgb(214,  39,  40)" in svg, svg[:300])


def errors(exe, d):
    r = ringside(exe, d, "plot 1 99\nplot 1 -> c.txt\nplot 1\nruns\n",
                 env={"RINGSIDE_GNUPLOT": os.path.join(d, "no-such-gnuplot")})
    out = " ".join((r.stdout + r.stderr).split())  # messages are wrapped at 80 columns
    check("plot 1 99: there is no run 99", "plot: there is no run 99" in out, out)
    check("plot -> c.txt: a picture is FILE.png or FILE.svg", "a picture is FILE.png or FILE.svg" in out, out)
    check("gnuplot missing: says how to install it", "gnuplot is not installed" in out
          and "apt-get install gnuplot-nox" in out, out)
    check("the next command still runs (runs lists run 2)", re.search(r"^\s*2\s+train", r.stdout, re.M) is not None,
          r.stdout)
    check("three errors: exit status non-zero", r.returncode != 0, r.returncode)


def pipeline(exe, d):
    """Three GPipe runs on 2 stages at m = 1, 2, 4: the bubble chart's measured points (final.bubble in
    the log) and the formula (p-1)/(m+p-1), computed here, inside its axes."""
    d = os.path.join(d, "pipe")
    os.makedirs(d)
    runs = "data d = digits n=600\nmodel m = mlp 784-32-10\n" + "".join(
        f"train m on d mode=pipeline ranks=2 schedule=gpipe micro={m} steps=3 batch=32\n" for m in (1, 2, 4))
    r = ringside(exe, d, runs + "plot 1 2 3\n")
    if not check("three pipeline runs and their plot", r.returncode == 0, r.stdout[-3000:] + r.stderr):
        return
    con = sqlite3.connect(f"file:{os.path.join(d, 't.db')}?mode=ro", uri=True)
    measured = [v for (v,) in con.execute("SELECT json_extract(final, '$.bubble') FROM runs ORDER BY id")]
    con.close()
    formula = [(2 - 1) / (m + 2 - 1) for m in range(1, 5)]
    ch = chart_text(r.stdout, "pipeline bubble over micro-batches")
    if not check("the bubble chart drawn", ch is not None and None not in measured, r.stdout[-3000:]):
        return
    body = "\n".join(ch)
    check("its key: 'gpipe p=2 measured' and 'gpipe p=2 (p-1)/(m+p-1)'",
          "gpipe p=2 measured" in body and "gpipe p=2 (p-1)/(m+p-1)" in body, body)
    ys = [float(m.group(1)) for l in ch if (m := re.match(r"^\s*(" + NUM + r") [+|]", l))]
    vals = measured + formula
    check(f"y labels {min(ys) if ys else None}..{max(ys) if ys else None} bracket the measured {measured} and the "
          f"formula {formula[0]:.3g}..{formula[-1]:.3g}",
          len(ys) >= 2 and min(ys) <= min(vals) and max(ys) >= max(vals), body)
    xl = [l for l in ch if re.match(r"^\s*" + NUM + r"(\s+" + NUM + r")+\s*$", l)]
    xs = [float(v) for v in re.findall(NUM, xl[-1])] if xl else []
    check(f"x labels {xs}: m from 1 to 4", xs and min(xs) == 1 and max(xs) == 4, body)


def main():
    exe = os.path.abspath(sys.argv[1])
    if not shutil.which(os.environ.get("RINGSIDE_GNUPLOT") or "gnuplot"):
        print("SKIP: gnuplot is not installed (apt-get install gnuplot-nox)")
        return 77
    with tempfile.TemporaryDirectory(prefix="rs-plot-") as d:
        r = ringside(exe, d, RUNS)
        if not check("two training runs", r.returncode == 0, r.stdout + r.stderr):
            return 1
        screen(exe, d)
        picture(exe, d)
        errors(exe, d)
        pipeline(exe, d)
    print("PASS" if not fails else f"FAIL: {fails} check(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
