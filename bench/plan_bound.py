#!/usr/bin/env python3
"""Figures, not a test: where a compiled plan's time goes and how close each kernel runs to the core's
arithmetic peak. For a plan file: per node its oneDNN kernel (the one its last run used) and median
time (`plan bench FILE nodes=on`), its FLOPs from the node's shapes (`plan show`: a conv 2*OC*OH*OW*
(C/groups)*K*K a sample, a linear 2*I*O*rows, attention 4*T*T*C; pools, activations, adds and the
engine's ops count none: they are bound by memory, and show as time without GFLOP/s), its GFLOP/s
and the fraction of the peak bench/peak_flops measures for the arithmetic that kernel runs (and, for
the slowest nodes, the bytes they must move at least in GB/s, against a read of a buffer the size
of the plan's weights, which every run streams: `peak_flops BYTES`):
  fp32 on an avx512 kernel: fp32_avx512; on avx2 (or gemm/ref kernels, the engine's table) the
  fp32 peak of the ISA the plan was built for; int8: vpdpbusd's (avx512 VNNI, or AVX-VNNI on an avx2
  kernel where the plan's ISA has it), else vpmaddubsw's (int8_avx2); bf16: vdpbf16ps where the
  plan's ISA has native bf16; an int8 or bf16 kernel named amx: tdpbusd's / tdpbf16ps's (int8_amx,
  bf16_amx; where the tiles could not be measured, the AVX-512 figure, and it says so).
FLOPs are a direct convolution's: a Winograd kernel (wino) does fewer, so its fraction can pass 100%.
Then the nodes grouped by (what, precision, kernel), the most time first: "dwconv k3 fp32
jit_dw:avx2: 41% of the time, 9.1 GFLOP/s, 8% of fp32_avx2". The node medians need not add up to the
run's median; shares are of their sum. Node times are wall time (a shared machine's load is in them);
the peak is thread CPU time (the core's own speed). At --threads N a fraction is of N cores' peak, and a
read's of N times one core's read.
usage: plan_bound.py RINGSIDE FILE.plan [--threads N] [--runs N] [--batch B] [--top K] [--peak EXE|FILE]
       (--peak FILE: peak_flops's output, saved; the read of the weights' size then runs build/bench/peak_flops)
       plan_bound.py --cpu      (the CPU line bench/plan_vision.sh prints first)
Run it with the environment the plan was compiled under (ONEDNN_MAX_CPU_ISA=AVX2 ... for a capped plan).
"""
import os
import re
import subprocess
import sys

FLAGS = ["avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile"]


def cpu_line():
    model, flags = "?", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    have = " ".join(f for f in FLAGS if f in flags) or "none of " + " ".join(FLAGS)
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    return (f"# CPU: {model}, {os.cpu_count()} CPUs; ISA flags: {have}"
            + (f"; oneDNN capped to {cap}" if cap else ""))


def rs(exe, cmd):
    r = subprocess.run([exe, "--no-db", "-c", cmd], capture_output=True, text=True,
                       env=dict(os.environ, COLUMNS="1000"))
    if r.returncode:
        sys.exit(f"plan_bound: `{cmd}` failed: {(r.stdout + r.stderr).strip()[-400:]}")
    return r.stdout


def peaks(exe):
    """bench/peak_flops's figures: run it, or read a file of its output (bench/plan_vision.sh runs it once)."""
    out = subprocess.run([exe], capture_output=True, text=True).stdout if os.access(exe, os.X_OK) else open(exe).read()
    return {n: float(v) for n, v in re.findall(r"^peak (\S+) ([0-9.]+)$", out, re.M)}


SHOW = re.compile(r"^  (\d+) +(\S+) +(.{28}) (fp32|bf16|int8) ")
CONV = re.compile(r"^(conv|dwconv|gconv) (\d+)x(\d+)x(\d+)>(\d+)x(\d+)x(\d+)(?: k(\d+))?")


def node_flops(what, B, esize):
    """(FLOPs at batch B or None, bytes it must move at least: weights once, input and output (elements
    of esize bytes) or None, a short name for grouping)."""
    m = CONV.match(what)
    if m:
        kind, c, h, w, oc, oh, ow, k = m.groups()
        c, h, w, oc, oh, ow = int(c), int(h), int(w), int(oc), int(oh), int(ow)
        groups = {"conv": 1, "dwconv": c}.get(kind)  # gconv: `plan show` does not give the group count
        label = f"{kind} k{k}" if k else kind
        if groups is None or k is None:
            return None, None, label
        wts = oc * (c // groups) * int(k) ** 2
        flops = 2.0 * B * oc * oh * ow * (c // groups) * int(k) ** 2
        return flops, esize * (wts + B * (c * h * w + oc * oh * ow)), label
    m = re.match(r"^linear (\d+)>(\d+)(?: x(\d+) rows)?", what)
    if m:
        i, o, r = int(m[1]), int(m[2]), int(m[3] or 1)
        return 2.0 * B * i * o * r, esize * (i * o + B * r * (i + o)), "linear"
    m = re.match(r"^attn T=(\d+) C=(\d+)", what)
    if m:
        return 4.0 * B * int(m[1]) ** 2 * int(m[2]), None, "attn"
    return None, None, what.split()[0] if what.strip() else "?"


def peak_name(prec, kernel, isa, pk):
    """Which measured peak a node's arithmetic is a fraction of, and a note."""
    k = kernel.lower()
    wide = "avx512" in k or ("avx2" not in k and isa.startswith("avx512"))
    amx = "amx" in k and prec in ("int8", "bf16")
    if amx and f"{prec}_amx" in pk:
        return f"{prec}_amx", ""
    note = "AMX kernel; AMX not measured: of the AVX-512 figure" if amx else ""
    if prec == "int8":
        if wide and ("vnni" in isa or "bf16" in isa or "amx" in isa):
            return "int8_avx512vnni", note
        if not wide and "vnni" in isa:
            return "int8_avxvnni", note
        return "int8_avx2", note
    if prec == "bf16" and ("bf16" in isa or "amx" in isa) and wide:
        return "bf16_avx512", note
    return ("fp32_avx512" if wide else "fp32_avx2"), note


def parse_show(text):
    isa = re.search(r"on cpu \(oneDNN [^,]+, ([^)]+)\)", text)
    nodes = []
    for line in text.splitlines():
        m = SHOW.match(line)
        if m:
            nodes.append({"what": m[3].strip(), "prec": m[4]})
    return (isa[1] if isa else "?"), nodes


def parse_bench(text):
    """{batch: (run median ms, [(node ms, kind, kernel)])}"""
    runs, cur = {}, None
    for line in text.splitlines():
        m = re.search(r"batch=(\d+): median ([0-9.]+) ms", line)
        if m:
            cur = runs.setdefault(int(m[1]), (float(m[2]), []))
            continue
        m = re.match(r"^ +([0-9.]+) ms  (.*) \(([^,]+), (.*)\)$", line)
        if m and cur:
            cur[1].append((float(m[1]), m[3], m[4]))
    return runs


def main():
    if sys.argv[1:] == ["--cpu"]:
        print(cpu_line())
        return
    a = sys.argv[1:]
    opt = {k: a[a.index(k) + 1] for k in ("--threads", "--runs", "--batch", "--top", "--peak") if k in a}
    exe, plan = a[0], a[1]
    threads, runs, top = int(opt.get("--threads", 1)), int(opt.get("--runs", 20)), int(opt.get("--top", 6))
    peak_exe = os.path.join(os.path.dirname(os.path.dirname(exe)), "bench", "peak_flops")  # beside repl/ringside
    pk = peaks(opt.get("--peak", peak_exe))
    show = rs(exe, f"plan show {plan}")
    isa, nodes = parse_show(show)
    # every run reads all the weights: the read bandwidth of a buffer that size is what bounds a node
    # that streams its own (a batch-1 layer)
    wbytes = int(re.search(r"^weights: (\d+) bytes", show, re.M)[1])
    read_bw = None
    if os.access(peak_exe, os.X_OK):
        m = re.search(r"^peak read ([0-9.]+)", subprocess.run([peak_exe, str(wbytes)], capture_output=True,
                                                               text=True).stdout, re.M)
        read_bw = float(m[1]) if m else None
    runs_at = parse_bench(rs(exe, f"plan bench {plan} threads={threads} runs={runs} nodes=on"))
    batches = [int(opt["--batch"])] if "--batch" in opt else sorted(runs_at)
    print(f"# {plan}: oneDNN ran {isa}; {threads} thread(s); peaks (GFLOP/s, int8 GOP/s, reads GB/s; one thread): "
          + ", ".join(f"{k} {v:.0f}" for k, v in pk.items())
          + (f"; a read of its {wbytes / 2**20:.1f} MiB of weights {read_bw:.1f} GB/s" if read_bw else ""))
    for B in batches:
        run_ms, timed = runs_at[B]
        if len(timed) != len(nodes):
            sys.exit(f"plan_bound: `plan show` lists {len(nodes)} nodes, `plan bench` timed {len(timed)}")
        total = sum(t for t, _, _ in timed) or 1e-9
        groups, rows, all_flops = {}, [], 0.0
        for n, (ms, kind, kernel) in zip(nodes, timed):
            f, nbytes, label = node_flops(n["what"], B, {"fp32": 4, "bf16": 2, "int8": 1}[n["prec"]])
            all_flops += f or 0
            name, note = peak_name(n["prec"], kernel, isa, pk)
            gf = f / (ms * 1e6) if f and ms > 0 else None
            gbs = f"{'-':>6} {'':6}"
            if nbytes and ms > 0:
                g = nbytes / (ms * 1e6)
                gbs = f"{g:6.1f} " + (f"{100 * g / (threads * read_bw):5.0f}%" if read_bw else f"{'':6}")
            rows.append((ms, n["what"], n["prec"], kernel, gbs, gf, name, note))
            g = groups.setdefault((label, n["prec"], kernel), [0.0, 0.0, 0, name, note, True])
            g[0] += ms
            g[1] += f or 0
            g[2] += 1
            g[5] = g[5] and f is not None
        # of the peak of as many cores as threads (the plan may run a small primitive on fewer)
        frac = lambda gf, name: f"{100 * gf / (threads * pk[name]):5.1f}% of {name}" if gf and name in pk else "-"
        print(f"batch {B}: run median {run_ms:.3f} ms, node medians sum {total:.3f} ms; "
              f"{all_flops / 1e9:.3f} GFLOP counted, {all_flops / (run_ms * 1e6):.1f} GFLOP/s over the run")
        print(f"  {'share':>6} {'ms':>8} {'nodes':>5} {'GFLOP/s':>8}  {'of peak':<24} what, precision, kernel")
        by_time = sorted(groups.items(), key=lambda g: -g[1][0])[:top]
        for (label, prec, kernel), (ms, f, cnt, name, note, counted) in by_time:
            gf = f / (ms * 1e6) if counted and ms > 0 and f else None
            print(f"  {100 * ms / total:5.1f}% {ms:8.3f} {cnt:5d} {gf if gf else 0:8.1f}  {frac(gf, name):<24} "
                  f"{label} {prec} {kernel}{'  (' + note + ')' if note and gf else ''}")
        print(f"  slowest nodes ({'GB/s':>6}: weights once, input and output, the least it must move; % of a read "
              "of the plan's weights)")
        for ms, what, prec, kernel, gbs, gf, name, _ in sorted(rows, key=lambda r: -r[0])[:top]:
            print(f"  {100 * ms / total:5.1f}% {ms:8.3f} {gbs} {gf if gf else 0:8.1f}  {frac(gf, name):<24} "
                  f"{what} {prec} {kernel}")


if __name__ == "__main__":
    main()
