#!/usr/bin/env python3
"""Figures, not a test: issue 26's speed goals held against bench/plan_ort.py's tables. Reads a file of
blocks, each a line "## MODEL LABEL ONEDNN_ISA" (LABEL: native or AVX2, ONEDNN_ISA what the plans
were built for, as `plan show` names it) followed by plan_ort.py's output for that model with the
columns fp32.plan, bf16.plan, int8.plan and "ORT int8", and prints one summary table: each cell ORT
fp32 time / plan time with the goal it is held to and whether it holds:
  fp32   batch 1 >= 1.25 (latency <= 0.8x ORT's), batch 64 >= 1.2 (throughput)
  int8   >= 2.0 where the plan's ISA has VNNI (avx512_core_vnni and up, avx2_vnni), else >= 1.3
  bf16   >= 2.0 where it has native bf16 (avx512_core_bf16, avx512_core_amx); no goal otherwise
Then one line a miss, "miss MODEL LABEL THREADS PREC BATCH", for bench/plan_vision.sh to run
bench/plan_bound.py on.
usage: plan_goals.py RESULTS"""
import re
import sys

CELL = re.compile(r"-|[0-9.]+ \( *[0-9.]+x\)")


def has_vnni(isa):
    return any(k in isa for k in ("vnni", "bf16", "amx"))  # oneDNN's ISAs above avx512_core_vnni include it


def has_bf16(isa):
    return "bf16" in isa or "amx" in isa


def goal(prec, batch, isa):
    if prec == "fp32":
        return 1.25 if batch == 1 else 1.2
    if prec == "int8":
        return 2.0 if has_vnni(isa) else 1.3
    if prec == "bf16":
        return 2.0 if has_bf16(isa) else None
    return None


def parse(path):
    """[(model, label, isa, threads, batch, ort_ms, {column: ratio or None})]"""
    rows, block, cols = [], None, []
    for line in open(path):
        if line.startswith("## "):
            block = line.split()[1:4]
            continue
        if line.lstrip().startswith("threads batch"):
            toks, cols = line.split("(ORT/plan")[0].split()[5:], []  # after "threads batch ORT fp32 ms"
            while toks:  # plan files' names, and ORT columns' two-word labels ("ORT int8")
                n = 2 if toks[0] == "ORT" and len(toks) > 1 else 1
                cols.append(" ".join(toks[:n]).replace(".plan", ""))
                toks = toks[n:]
            continue
        m = re.match(r"^ +(\d+) +(\d+) +([0-9.]+) (.*)$", line)
        if not (m and block):
            continue
        cells = CELL.findall(m[4])
        ratios = {c: (float(re.search(r"\( *([0-9.]+)x", v)[1]) if v != "-" else None) for c, v in zip(cols, cells)}
        rows.append((block[0], block[1], block[2], int(m[1]), int(m[2]), float(m[3]), ratios))
    return rows


def main():
    rows = parse(sys.argv[1])
    precs = ["fp32", "bf16", "int8"]
    print(f"{'model':<20} {'ISA':<22} {'thr':>3} {'batch':>5} {'ORT fp32 ms':>11}  "
          + "  ".join(f"{p + ' (goal)':<20}" for p in precs) + f"  {'ORT int8':>8}")
    misses, held, total = [], 0, 0
    for model, label, isa, thr, batch, ort_ms, r in rows:
        cells = []
        for p in precs:
            v, g = r.get(p), goal(p, batch, isa)
            if v is None:
                cells.append(f"{'-':<20}")
                continue
            ok = g is None or v >= g
            if g is not None:
                total += 1
                held += ok
            if not ok:
                misses.append(f"miss {model} {label} {thr} {p} {batch}")
            mark = "" if g is None else (" ok" if ok else " MISS")
            cells.append(f"{v:5.2f}x (>={g:.2f}){mark:<5}" if g else f"{v:5.2f}x (no goal)     ")
        o8 = r.get("ORT int8")
        print(f"{model:<20} {label + ' ' + isa:<22} {thr:>3} {batch:>5} {ort_ms:11.3f}  " + "  ".join(cells)
              + f"  {(f'{o8:.2f}x' if o8 else '-'):>8}")
    print(f"# goals held: {held} of {total} cells (ORT int8: ORT fp32 time / ORT int8 time, no goal)")
    for m in misses:
        print(m)


if __name__ == "__main__":
    main()
