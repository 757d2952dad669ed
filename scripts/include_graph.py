#!/usr/bin/env python3
"""The include graph between engine's folders: which folder's files include which other folder's
headers (with the number of include lines), and any circle among them. Run from the repository root;
exits 1 when there is a circle, so it can guard the layering (engine/core includes no other folder)."""
import os
import re
import sys

FOLDERS = ["core", "cpu", "cuda", "guard", "nn", "optim", "train", "data", "ckpt"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"engine/([a-z]+)/')


def edges(root):
    found = {}
    for src in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, "engine", src)):
            for name in names:
                if not name.endswith((".c", ".h", ".cu", ".def")):
                    continue
                with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                    for line in f:
                        m = INCLUDE.match(line)
                        if m and m.group(1) != src and m.group(1) in FOLDERS:
                            found[(src, m.group(1))] = found.get((src, m.group(1)), 0) + 1
    return found


def circles(found):
    """Pairs of folders that reach each other (each circle shows up as the pairs on it)."""
    reach = {f: {b for (a, b) in found if a == f} for f in FOLDERS}
    for k in FOLDERS:  # Floyd-Warshall closure: 9 folders
        for i in FOLDERS:
            if k in reach[i]:
                reach[i] |= reach[k]
    return sorted({tuple(sorted((a, b))) for a in FOLDERS for b in reach[a] if a != b and a in reach[b]})


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found = edges(root)
    for src in FOLDERS:
        outs = ", ".join(f"{dst} ({found[(src, dst)]})" for dst in FOLDERS if (src, dst) in found)
        print(f"{src:6} -> {outs or '-'}")
    bad = circles(found)
    for a, b in bad:
        print(f"circle: {a} <-> {b}")
    if not bad:
        print("no circle")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
