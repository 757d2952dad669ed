#!/usr/bin/env python3
"""PyTorch (CPU) side of bench/bench_train: the same models, batch, optimizer and step counts, so the
two print comparable samples/s. Fashion-MNIST is read from the same files into float tensors before
the clock starts (x/255, as ringside does); each step gathers a shuffled batch from them, runs
forward, cross-entropy, backward and Adam (lr 1e-3). Peak RSS is resource.getrusage ru_maxrss.

  torch_train.py [--model mlp|cnn|both] [--threads 1,2] [--steps N] [--warmup N] [--batch N] [--kv]

Prints a clear line and exits 0 when torch cannot be imported, so bench/run.sh can go on."""
import argparse
import gzip
import os
import resource
import sys
import time

STEPS = {"mlp": 2000, "cnn": 500}  # keep in step with bench/bench_train.c
WARMUP = 30
FASHION_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """One unsigned-byte IDX file (plain or .gz) -> (dims, bytes)."""
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rb") as f:
                buf = f.read()
            break
    else:
        raise FileNotFoundError(f"{path}[.gz] not found (install dataset-fashion-mnist)")
    if buf[0] != 0 or buf[1] != 0 or buf[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    nd = buf[3]
    dims = [int.from_bytes(buf[4 + 4 * i: 8 + 4 * i], "big") for i in range(nd)]
    return dims, memoryview(buf)[4 + 4 * nd:]


def load_split(torch, prefix):
    dims, px = read_idx(os.path.join(FASHION_DIR, f"{prefix}-images-idx3-ubyte"))
    _, lb = read_idx(os.path.join(FASHION_DIR, f"{prefix}-labels-idx1-ubyte"))
    x = torch.frombuffer(bytearray(px), dtype=torch.uint8).reshape(dims[0], 1, dims[1], dims[2])
    x = x.to(torch.float32).div_(255.0)
    y = torch.frombuffer(bytearray(lb), dtype=torch.uint8).to(torch.int64)
    return x, y


def cpu_busy_s():
    """CPU seconds all CPUs spent busy since boot (/proc/stat: user nice system irq softirq steal)."""
    try:
        with open("/proc/stat") as f:
            v = [int(t) for t in f.readline().split()[1:9]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def self_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def build(nn, model):
    if model == "mlp":  # mlp 784-256-256-10
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    # seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(32 * 7 * 7, 10))


def run_one(torch, model, x, y, threads, batch, steps, warmup):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    net = build(torch.nn, model)
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    lossf = torch.nn.CrossEntropyLoss()
    n = x.shape[0]
    gen = torch.Generator().manual_seed(0)
    perm, pos = torch.randperm(n, generator=gen), 0
    t_data = t_fwd = t_bwd = t_opt = 0.0
    losses = []
    t0 = None
    for step in range(warmup + steps):
        if step == warmup:
            t_data = t_fwd = t_bwd = t_opt = 0.0
            losses = []
            busy0, self0 = cpu_busy_s(), self_cpu_s()
            t0 = time.perf_counter()
        a = time.perf_counter()
        if pos + batch > n:  # a new epoch, as ringside's loader reshuffles
            perm, pos = torch.randperm(n, generator=gen), 0
        idx = perm[pos:pos + batch]
        pos += batch
        xb, yb = x.index_select(0, idx), y.index_select(0, idx)
        b = time.perf_counter()
        loss = lossf(net(xb), yb)
        c = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        d = time.perf_counter()
        opt.step()
        e = time.perf_counter()
        t_data += b - a
        t_fwd += c - b
        t_bwd += d - c
        t_opt += e - d
        losses.append(loss.detach())
    secs = time.perf_counter() - t0
    busy1, self1 = cpu_busy_s(), self_cpu_s()
    others = max(0.0, ((busy1 - busy0) - (self1 - self0)) / secs) if busy0 is not None and busy1 else -1.0
    mean_loss = float(torch.stack(losses).mean())
    k = 1e3 / steps
    return {"model": model, "threads": threads, "batch": batch, "steps": steps,
            "samples_per_s": steps * batch / secs, "ms_per_step": secs * k,
            "data_ms": t_data * k, "fwd_ms": t_fwd * k, "bwd_ms": t_bwd * k, "opt_ms": t_opt * k,
            "loss": mean_loss, "others": others}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["mlp", "cnn", "both"], default="both")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--steps", type=int, default=0, help="measured steps (default 2000 mlp, 500 cnn)")
    ap.add_argument("--warmup", type=int, default=WARMUP)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--kv", action="store_true", help="also print machine-readable `kv ...` lines")
    args = ap.parse_args()
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        ap.error(f"bad thread list '{args.threads}' (e.g. 1,2)")
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install failing while loading its libraries
        print(f"torch_train: PyTorch is not available ({type(e).__name__}: {e}); comparison skipped")
        if args.kv:
            print(f"kv torch=none reason={type(e).__name__}")
        return 0

    print(f"PyTorch {torch.__version__} CPU training benchmark: Fashion-MNIST, batch {args.batch}, "
          f"Adam lr 1e-3, {args.warmup} warm-up steps excluded")
    print(f"CPU capability: {torch.backends.cpu.get_cpu_capability()}; "
          f"mkldnn (oneDNN) available: {torch.backends.mkldnn.is_available()}")
    t = time.perf_counter()
    x, y = load_split(torch, "train")
    xt, yt = load_split(torch, "t10k")  # held like ringside holds its test split: same footprint
    print(f"data: {x.shape[0]} training samples loaded in {time.perf_counter() - t:.2f} s (not timed below)")
    print("busy: CPUs kept busy by other processes while the steps ran (/proc/stat minus this process);")
    print("loss: mean training loss over the measured steps.\n")
    print(f"{'model':<5} {'thr':>3} {'batch':>5} {'steps':>6} {'samples/s':>10} {'ms/step':>8}   "
          f"{'phase ms/step data/fwd/bwd/opt':<31} {'loss':>7} {'busy':>5}")
    models = ["mlp", "cnn"] if args.model == "both" else [args.model]
    for m in models:
        for th in threads:
            r = run_one(torch, m, x, y, th, args.batch, args.steps or STEPS[m], args.warmup)
            phases = f"{r['data_ms']:.3f}/{r['fwd_ms']:.3f}/{r['bwd_ms']:.3f}/{r['opt_ms']:.3f}"
            print(f"{m:<5} {th:>3} {args.batch:>5} {r['steps']:>6} {r['samples_per_s']:>10.0f} "
                  f"{r['ms_per_step']:>8.3f}   {phases:<31} {r['loss']:>7.4f} {r['others']:>5.2f}")
            if args.kv:
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                print("kv " + " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                                       for k, v in r.items()) + f" peak_rss_kb={rss} torch={torch.__version__}")
            sys.stdout.flush()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"\npeak RSS of this process: {rss / 1024:.1f} MiB (getrusage ru_maxrss; includes the data set "
          f"and the torch libraries)")
    del xt, yt
    return 0


if __name__ == "__main__":
    sys.exit(main())
