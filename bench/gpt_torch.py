#!/usr/bin/env python3
"""PyTorch eager reference for bench/gpt.sh: nanoGPT's model and training loop on the same
character-level text, printing tokens/s and the validation loss in lines the script reads.

  gpt_torch.py --text FILE|fortunes --threads N --steps N [--layers 4 --heads 4 --dim 128 --ctx 64
               --batch 12 --lr 1e-3 --min-lr 1e-4 --warmup 100 --wd 0.1 --eval-samples 2400]
"""
import argparse, math, os, sys, time

p = argparse.ArgumentParser()
p.add_argument("--text", default="fortunes")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--steps", type=int, default=50)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--dim", type=int, default=128)
p.add_argument("--ctx", type=int, default=64)
p.add_argument("--batch", type=int, default=12)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--min-lr", type=float, default=1e-4)
p.add_argument("--warmup", type=int, default=0)
p.add_argument("--wd", type=float, default=0.1)
p.add_argument("--clip", type=float, default=1.0)
p.add_argument("--eval-samples", type=int, default=0)
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("torch: not installed")
    sys.exit(0)
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)


def read_text(src):
    if src != "fortunes":
        return open(src, "rb").read()
    d = "/usr/share/games/fortunes"
    out = []
    for name in sorted(os.listdir(d)):
        f = os.path.join(d, name)
        if name.endswith(".dat") or name.endswith(".u8") or not os.path.isfile(f) or os.path.islink(f):
            continue
        for line in open(f, "rb").read().split(b"\n"):
            out.append(b"" if line == b"%" else line)
            out.append(b"\n")
    return b"".join(out)


raw = read_text(a.text)
chars = sorted(set(raw))
ids = torch.tensor([chars.index(c) for c in raw] if len(raw) < 1000 else
                   list(bytes(raw).translate(bytes([chars.index(i) if i in chars else 0 for i in range(256)]))),
                   dtype=torch.long)
V, n = len(chars), len(ids)
train, val = ids[: int(0.9 * n)], ids[int(0.9 * n):]
T, C, H, L, B = a.ctx, a.dim, a.heads, a.layers, a.batch


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln_1, s.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        s.c_attn, s.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        s.c_fc, s.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(s, x):
        b, t, c = x.shape
        q, k, v = s.c_attn(s.ln_1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, H, c // H).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + s.mlp_proj(F.gelu(s.c_fc(s.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        s.h = nn.ModuleList(Block() for _ in range(L))
        s.ln_f = nn.LayerNorm(C)
        s.head = nn.Linear(C, V, bias=False)
        s.head.weight = s.wte.weight
        for name, prm in s.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(prm)
            elif prm.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(prm, 0.0, std)

    def forward(s, idx):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1]))
        for b in s.h:
            x = b(x)
        return s.head(s.ln_f(x))


model = GPT()
decay = [p_ for n_, p_ in model.named_parameters() if p_.dim() == 2 and not n_.startswith(("wte", "wpe"))]
rest = [p_ for n_, p_ in model.named_parameters() if not (p_.dim() == 2 and not n_.startswith(("wte", "wpe")))]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": rest, "weight_decay": 0.0}], lr=a.lr)


def lr_at(it):
    if it < a.warmup:
        return a.lr * (it + 1) / a.warmup
    r = (it - a.warmup) / max(1, a.steps - a.warmup)
    return a.min_lr + 0.5 * (1 + math.cos(math.pi * min(1.0, r))) * (a.lr - a.min_lr)


def batch(data, g):
    ix = torch.randint(len(data) - T - 1, (B,), generator=g)
    return torch.stack([data[i:i + T] for i in ix]), torch.stack([data[i + 1:i + T + 1] for i in ix])


g = torch.Generator().manual_seed(a.seed)
t0, start = None, 5  # the first steps warm up the allocator and threads
for it in range(a.steps):
    if it == start:
        t0 = time.perf_counter()
    for grp in opt.param_groups:
        grp["lr"] = lr_at(it)
    x, y = batch(train, g)
    loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if a.clip > 0:
        nn.utils.clip_grad_norm_(model.parameters(), a.clip)
    opt.step()
dt = time.perf_counter() - t0
print("torch: %d steps, %.0f tokens/s, last loss %.4f" % (a.steps, (a.steps - start) * B * T / dt, loss.item()))
if a.eval_samples:
    model.eval()
    nwin = len(val) - T
    stride = max(1, nwin // a.eval_samples)
    tot, cnt = 0.0, 0
    with torch.no_grad():
        idx = list(range(0, stride * a.eval_samples, stride))[: a.eval_samples]
        for i in range(0, len(idx), 64):
            ix = idx[i:i + 64]
            x = torch.stack([val[j:j + T] for j in ix])
            y = torch.stack([val[j + 1:j + T + 1] for j in ix])
            tot += F.cross_entropy(model(x).view(-1, V), y.view(-1)).item() * len(ix)
            cnt += len(ix)
    print("torch: validation loss %.4f" % (tot / cnt))
