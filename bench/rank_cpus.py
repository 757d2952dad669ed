#!/usr/bin/env python3
"""Where a run's ranks ran: samples the CPU each rank process is on (/proc/PID/stat field 39,
"processor") every INTERVAL seconds while PID (ringside, or mpirun) lives, and prints one line: each
rank's CPUs with the share of samples on each, its affinity (the masks its main thread was seen
with, most seen first: "0/0-1" is a rank bound to CPU 0 that shm widens for large transfers), the share of
samples in which two ranks were on the same CPU, two hyperthreads of one core, or two L3 caches
(per sysfs). What bench/shm_vs_mpi.sh --where prints beside each run's figures: a slow run next to
"other L3 100%" or "same core 100%" is a placement, not the code.

  bench/rank_cpus.py PID NAME [INTERVAL]
NAME: a word in the ranks' command lines (--worker for ringside's, mpi_allreduce for Open MPI's)."""
import os
import sys
import time


def parse_list(text):
    out = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def sysfs(cpu, rel):
    try:
        with open("/sys/devices/system/cpu/cpu%d/%s" % (cpu, rel)) as f:
            return frozenset(parse_list(f.read()))
    except OSError:
        return frozenset([cpu])


def l3(cpu):
    for idx in range(8):
        try:
            with open("/sys/devices/system/cpu/cpu%d/cache/index%d/level" % (cpu, idx)) as f:
                if f.read().strip() == "3":
                    return sysfs(cpu, "cache/index%d/shared_cpu_list" % idx)
        except OSError:
            break
    return frozenset()


def descendants(root):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, pending = [], [root]
    while pending:
        p = pending.pop()
        for k in kids.get(p, []):
            out.append(k)
            pending.append(k)
    return out


def ranks_of(root, name):
    out = {}
    for p in descendants(root):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                if name.encode() not in f.read():
                    continue
            with open("/proc/%d/environ" % p, "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            r = env.get(b"RANK") or env.get(b"OMPI_COMM_WORLD_RANK")
            if r is not None:
                out[int(r)] = p
        except (OSError, ValueError):
            pass
    return out


def main():
    root, name = int(sys.argv[1]), sys.argv[2]
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.005
    seen, allowed, pairs, n = {}, {}, {"cpu": 0, "core": 0, "l3": 0}, 0
    pids = {}
    while os.path.exists("/proc/%d" % root):
        if len(pids) < 2 or n % 50 == 0:
            pids = ranks_of(root, name)
        now = {}
        for r, p in pids.items():
            try:
                with open("/proc/%d/stat" % p) as f:
                    now[r] = int(f.read().rsplit(")", 1)[1].split()[36])
                if n % 20 == 0:  # the main thread's mask: the launcher's binding, shm's own for a transfer
                    with open("/proc/%d/status" % p) as f:
                        mask = next(l.split(":", 1)[1].strip() for l in f if l.startswith("Cpus_allowed_list"))
                    allowed.setdefault(r, {}).setdefault(mask, 0)
                    allowed[r][mask] += 1
            except (OSError, StopIteration, ValueError, IndexError):
                pass
        if len(now) >= 2:
            n += 1
            for r, c in now.items():
                seen.setdefault(r, {}).setdefault(c, 0)
                seen[r][c] += 1
            a, b = now[min(now)], now[sorted(now)[1]]
            pairs["cpu"] += a == b
            pairs["core"] += a != b and sysfs(a, "topology/core_cpus_list") == sysfs(b, "topology/core_cpus_list")
            pairs["l3"] += l3(a) != l3(b)
        time.sleep(interval)
    if not n:
        print("where: no samples")
        return
    parts = []
    for r in sorted(seen):
        cpus = " ".join("%d:%d%%" % (c, 100 * k // n) for c, k in sorted(seen[r].items(), key=lambda x: -x[1])[:4])
        masks = "/".join(m for m, _ in sorted(allowed.get(r, {}).items(), key=lambda x: -x[1])) or "?"
        parts.append("rank %d on %s (allowed %s)" % (r, cpus, masks))
    print("where (%d samples): %s; ranks 0,1 same CPU %d%%, same core %d%%, other L3 %d%%" %
          (n, "; ".join(parts), 100 * pairs["cpu"] // n, 100 * pairs["core"] // n, 100 * pairs["l3"] // n))


if __name__ == "__main__":
    main()
