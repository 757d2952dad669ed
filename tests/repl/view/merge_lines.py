#!/usr/bin/env python3
"""Merges the stdout of each rank of a real run into one recorded stream for the view tests, in the
order the REPL would read them: by the time each line was written (a span's end, an event's time;
untimed lines keep their place after their rank's previous line). Each output line is "RANK LINE".

How ddp4.lines and ring4.lines were made (build/repl/ringside, 4 ranks started by hand, rank 0 hosts
the store):
  for r in 0 1 2 3; do RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=29522 \
    ringside --worker train "spec=mlp 784-256-128-10" data=digits:1200 steps=6 batch=64 mode=ddp \
    overlap=1 bucket=100000 > ddp.$r & done; wait
  for r in 0 1 2 3; do RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=29521 \
    ringside --worker collective op=all_reduce algo=ring count=262144 trace=1 > ring.$r & done; wait
  merge_lines.py ddp.0 ddp.1 ddp.2 ddp.3 > ddp4.lines
ringdata4.lines (the values each rank's buffer holds, data=1) and ringdata4-long.lines the same way:
  ringside --worker collective op=all_reduce algo=ring count=8 trace=1 data=1      (count=1001 for -long)
"""
import sys


def when(line):
    f = line.split()
    try:
        if f[0] == "@ev":
            return float(f[12])
        if f[0] in ("@phase",):
            return float(f[5])
        if f[0] == "@comm":
            return float(f[7])
        if f[0] == "@data":
            return float(f[9])
    except (IndexError, ValueError):
        pass
    return None


rows = []
for rank, path in enumerate(sys.argv[1:]):
    t = 0.0
    for seq, line in enumerate(open(path)):
        line = line.rstrip("\n")
        w = when(line)
        if w is not None:
            t = max(t, w)
        rows.append((t, rank, seq, line))
rows.sort()
for _, rank, _, line in rows:
    print(rank, line)
