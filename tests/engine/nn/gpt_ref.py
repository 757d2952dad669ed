#!/usr/bin/env python3
"""The gpt preset against independent references: NumPy float64 always, a PyTorch nanoGPT when installed.

Usage: gpt_ref.py TEST_GPT_REF   (the helper built from tests/engine/nn/test_gpt_ref.c)

The helper builds `gpt layers=2 heads=4 dim=32 ctx=16 vocab=23`, writes its weights (initial, wide
and after training) and, on fixed tokens, the logits and loss the C engine gives, then the 20 training
batches and the losses and gradient norms of 20 AdamW steps (nanoGPT's decay groups, clip 1.0).

(a) NumPy float64, always: the forward is written again from the weights alone (token + position
    embedding; per block ln_1, qkv = x W^T + b, causal softmax(q k^T / sqrt(hs)) v per head, c_proj,
    residual; ln_2, c_fc, tanh GELU, c_proj, residual; ln_f; logits = x wte^T) and must give the C
    logits within 1e-4 (1e-5 of their scale for the wide weights) and the loss within 1e-5 relative.
    Mutants of the reference (no causal mask, heads interleaved, no 1/sqrt(hs), erf GELU, no position
    embedding) must miss by far more than that, or the comparison could not fail. The weights are
    written twice: at GPT-2's init (std 0.02, where attention is nearly uniform and a wrong score
    scale hardly shows) and redrawn wide, where every part of the block shows.
(c) NumPy float64 training: a hand-written backward (itself checked against central differences),
    clip_grad_norm_ and AdamW retrain the 20 steps from the initial weights. The gradient is compared
    tensor by tensor (first step, and at the wide weights: within 1e-4 of each tensor's largest
    entry), the losses within 1e-4, the gradient norms within 1e-4 relative, the weights after 20
    steps within 1e-4; the decay group must be nanoGPT's; the losses must fall.
(b) torch, when importable: a nanoGPT module (Block, CausalSelfAttention with c_attn/c_proj, MLP with
    c_fc/GELU(approximate='tanh')/c_proj, wte/wpe, ln_f, lm_head tied to wte) is loaded from our
    safetensors through the name mapping, its logits and gradients compared, then trained the same 20
    steps with torch.optim.AdamW over nanoGPT's groups and clip_grad_norm_(1.0); losses within 1e-4.
    Without torch: "SKIP torch part: torch is not installed", and the NumPy parts decide.
Groups: the engine leaves the embeddings (wte, which the head shares, and wpe) out of weight decay,
as minGPT and nanoGPT's first version did; nanoGPT today decays every parameter with dim >= 2,
embeddings included. The torch part builds the engine's groups.
Exit 77 (skipped) only when NumPy is missing.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

LOGIT_TOL = 1e-4   # absolute, on logits of order 0.1 (GPT-2 init)
WIDE_TOL = 1e-5    # relative to the largest |logit| of the wide weights
LOSS_RTOL = 1e-5
TRAIN_TOL = 1e-4   # the 20 losses, absolute
NORM_RTOL = 1e-4
PARAM_TOL = 1e-4   # the weights after 20 steps (lr 1e-3)
GRAD_RTOL = 1e-4   # per tensor, of its largest |gradient|
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
    return cond


def run_helper(doc, files):
    """The opening of a reference script over a C helper, written once: usage (status 2, DOC printed),
    NumPy importable (77 without it), the helper (argv[1]) run with a temporary folder and its output
    printed (1 when it fails), then each of FILES in that folder read with read_st. Returns (status,
    [(tensors, metadata) of each file]); status is None when the script goes on."""
    if len(sys.argv) != 2:
        print(doc)
        return 2, []
    try:
        import numpy  # noqa: F401
    except ImportError as ex:
        print("SKIP: numpy is not installed (%s)" % ex)
        return 77, []
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([sys.argv[1], tmp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            print("FAIL: the C helper exited with %d" % r.returncode)
            return 1, []
        return None, [read_st(os.path.join(tmp, f)) for f in files]


def read_st(path):
    """name -> numpy array and the metadata, read by hand (json + numpy.frombuffer)."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    types = {"F32": "<f4", "I32": "<i4"}
    out = {}
    for name, v in header.items():
        b, e = v["data_offsets"]
        check(v["dtype"] in types, "%s: %s has dtype %s" % (path, name, v["dtype"]))
        out[name] = np.frombuffer(data[b:e], dtype=types.get(v["dtype"], "<f4")).reshape(v["shape"]).copy()
    return out, meta


def parse_preset(spec):
    """'gpt layers=2 heads=4 ...' -> dict of ints."""
    words = spec.split()
    check(words[0] == "gpt", "io metadata model %r is a gpt preset" % spec)
    return {k: int(v) for k, v in (w.split("=") for w in words[1:])}


def torch_names(L):
    """Our tensor names -> nanoGPT's, from the preset's layer order: layer 0 the embedding, then per
    transformer block i the attention residual block 1+2i (layernorm, linear(3C), attn, linear(C)) and
    the MLP residual block 2+2i (layernorm, linear(4C), gelu, linear(C)); then ln_f; the head is tied."""
    m = {"0.wte": "transformer.wte.weight", "0.wpe": "transformer.wpe.weight"}
    for i in range(L):
        a, f, h = 1 + 2 * i, 2 + 2 * i, "transformer.h.%d." % i
        for wb in ("weight", "bias"):
            m["%d.0.%s" % (a, wb)] = h + "ln_1." + wb
            m["%d.1.%s" % (a, wb)] = h + "attn.c_attn." + wb
            m["%d.3.%s" % (a, wb)] = h + "attn.c_proj." + wb
            m["%d.0.%s" % (f, wb)] = h + "ln_2." + wb
            m["%d.1.%s" % (f, wb)] = h + "mlp.c_fc." + wb
            m["%d.3.%s" % (f, wb)] = h + "mlp.c_proj." + wb
    for wb in ("weight", "bias"):
        m["%d.%s" % (1 + 2 * L, wb)] = "transformer.ln_f." + wb
    return m


# ---- (a) NumPy float64 ------------------------------------------------------------------------------

def layernorm(x, g, b, eps=1e-5):
    import numpy as np
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)
    xhat = xc * rstd
    return xhat * g + b, (xhat, rstd)


def layernorm_bwd(dout, cache, g):
    xhat, rstd = cache
    dg = (dout * xhat).reshape(-1, xhat.shape[-1]).sum(axis=0)
    db = dout.reshape(-1, xhat.shape[-1]).sum(axis=0)
    dxhat = dout * g
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dx, dg, db


GELU_K = math.sqrt(2.0 / math.pi)


def gelu(x, mutant=None):
    import numpy as np
    if mutant == "erf gelu":
        from math import erf
        return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))
    return 0.5 * x * (1.0 + np.tanh(GELU_K * (x + 0.044715 * x ** 3)))


def gelu_bwd(x, dout):
    import numpy as np
    t = np.tanh(GELU_K * (x + 0.044715 * x ** 3))
    return dout * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3 * 0.044715 * x * x))


def split_heads(qkv, H, mutant=None):
    """(B, T, 3C) laid out [q|k|v], head h = columns h*hs..(h+1)*hs of each part -> 3 x (B, H, T, hs)."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // H
    parts = [qkv[:, :, i * C:(i + 1) * C] for i in range(3)]
    if mutant == "heads interleaved":  # head h = columns h, h+H, h+2H, ...
        return [p.reshape(B, T, hs, H).transpose(0, 3, 1, 2) for p in parts]
    return [p.reshape(B, T, H, hs).transpose(0, 2, 1, 3) for p in parts]


def attention(qkv, H, mutant=None):
    import numpy as np
    B, T, C3 = qkv.shape
    q, k, v = split_heads(qkv, H, mutant)
    scale = 1.0 if mutant == "no 1/sqrt(hs)" else 1.0 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(0, 1, 3, 2) * scale
    if mutant != "no causal mask":
        s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    y = p @ v  # (B, H, T, hs)
    return y.transpose(0, 2, 1, 3).reshape(B, T, C3 // 3), (q, k, v, p, scale)


def attention_bwd(dy, cache):
    import numpy as np
    q, k, v, p, scale = cache
    B, H, T, hs = q.shape
    dy = dy.reshape(B, T, H, hs).transpose(0, 2, 1, 3)
    dp = dy @ v.transpose(0, 1, 3, 2)
    dv = p.transpose(0, 1, 3, 2) @ dy
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale  # masked entries have p = 0
    dq = ds @ k
    dk = ds.transpose(0, 1, 3, 2) @ q
    return np.concatenate([d.transpose(0, 2, 1, 3).reshape(B, T, H * hs) for d in (dq, dk, dv)], axis=-1)


def forward(w, tok, cfg, mutant=None):
    """Logits (B, T, V) in float64 and what backward needs."""
    L, H = cfg["layers"], cfg["heads"]
    B, T = tok.shape
    x = w["0.wte"][tok] + (0.0 if mutant == "no position embedding" else w["0.wpe"][:T])
    caches = []
    for i in range(L):
        a, f = "%d." % (1 + 2 * i), "%d." % (2 + 2 * i)
        h1, c1 = layernorm(x, w[a + "0.weight"], w[a + "0.bias"])
        qkv = h1 @ w[a + "1.weight"].T + w[a + "1.bias"]
        y, ca = attention(qkv, H, mutant)
        x1 = x + y @ w[a + "3.weight"].T + w[a + "3.bias"]
        h2, c2 = layernorm(x1, w[f + "0.weight"], w[f + "0.bias"])
        u = h2 @ w[f + "1.weight"].T + w[f + "1.bias"]
        g = gelu(u, mutant)
        x2 = x1 + g @ w[f + "3.weight"].T + w[f + "3.bias"]
        caches.append((h1, c1, ca, y, h2, c2, u, g))
        x = x2
    n = "%d." % (1 + 2 * L)
    hf, cf = layernorm(x, w[n + "weight"], w[n + "bias"])
    return hf @ w["0.wte"].T, (tok, caches, hf, cf)


def cross_entropy(logits, y):
    """Mean over every position, and d(loss)/d(logits)."""
    import numpy as np
    V = logits.shape[-1]
    z = logits.reshape(-1, V)
    z = z - z.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=-1))
    yy = y.reshape(-1)
    loss = float((lse - z[np.arange(len(yy)), yy]).mean())
    d = np.exp(z - lse[:, None])
    d[np.arange(len(yy)), yy] -= 1.0
    return loss, (d / len(yy)).reshape(logits.shape)


def backward(w, cfg, cache, dlogits):
    """d(loss)/d(every tensor) by name, for the loss whose logit gradient is dlogits."""
    import numpy as np
    L = cfg["layers"]
    tok, caches, hf, cf = cache
    gr = {k: np.zeros_like(v) for k, v in w.items()}
    C = hf.shape[-1]

    def lin(name, x, dout):  # out = x W^T + b: accumulates dW, db; returns dx
        gr[name + "weight"] += dout.reshape(-1, dout.shape[-1]).T @ x.reshape(-1, x.shape[-1])
        gr[name + "bias"] += dout.reshape(-1, dout.shape[-1]).sum(axis=0)
        return dout @ w[name + "weight"]

    gr["0.wte"] += dlogits.reshape(-1, dlogits.shape[-1]).T @ hf.reshape(-1, C)  # the tied head
    n = "%d." % (1 + 2 * L)
    dx, dg, db = layernorm_bwd(dlogits @ w["0.wte"], cf, w[n + "weight"])
    gr[n + "weight"] += dg
    gr[n + "bias"] += db
    for i in reversed(range(L)):
        a, f = "%d." % (1 + 2 * i), "%d." % (2 + 2 * i)
        h1, c1, ca, y, h2, c2, u, g = caches[i]
        dg_ = lin(f + "3.", g, dx)
        dh2 = lin(f + "1.", h2, gelu_bwd(u, dg_))
        d, dgw, dgb = layernorm_bwd(dh2, c2, w[f + "0.weight"])
        gr[f + "0.weight"] += dgw
        gr[f + "0.bias"] += dgb
        dx = dx + d
        dy = lin(a + "3.", y, dx)
        dh1 = lin(a + "1.", h1, attention_bwd(dy, ca))
        d, dgw, dgb = layernorm_bwd(dh1, c1, w[a + "0.weight"])
        gr[a + "0.weight"] += dgw
        gr[a + "0.bias"] += dgb
        dx = dx + d
    np.add.at(gr["0.wte"], tok, dx)
    gr["0.wpe"][:tok.shape[1]] += dx.sum(axis=0)
    return gr


def compare(got, want, tol, what):
    import numpy as np
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if not check(got.shape == want.shape, "%s: shape %s vs %s" % (what, got.shape, want.shape)):
        return float("inf")
    diff = np.abs(got - want)
    worst = float(diff.max())
    if not check(worst <= tol, "%s: max |diff| %.3g > %.3g" % (what, worst, tol)):
        for idx in list(zip(*np.nonzero(diff > tol)))[:5]:
            print("   ", tuple(int(i) for i in idx), "reference %.9g, C %.9g" % (got[idx], want[idx]))
    else:
        print("  %-52s max |diff| %.2e (tol %.1e)" % (what, worst, tol))
    return worst


def compare_grads(ref, c, what):
    """Tensor by tensor: max |ref - C| within GRAD_RTOL of the tensor's largest |ref| (plus a floor far
    below float32's rounding of the loss). Prints the worst tensor; every tensor that misses on failure."""
    import numpy as np
    worst, at = 0.0, ""
    for k in sorted(c):
        g = np.asarray(ref[k], dtype=np.float64)
        scale = float(np.abs(g).max())
        d = float(np.abs(g - c[k]).max())
        rel = d / (scale + 1e-9)
        if not check(d <= GRAD_RTOL * scale + 1e-9, "%s: d/d %s: max |diff| %.3g, largest |grad| %.3g" % (what, k, d, scale)):
            i = int(np.abs(g - c[k]).argmax())
            print("    (reference, C): first %s; worst [%d] %.7g %.7g" % (
                ", ".join("%.7g %.7g" % (g.flat[j], c[k].flat[j]) for j in range(min(3, g.size))),
                i, g.flat[i], c[k].flat[i]))
        if rel > worst:
            worst, at = rel, k
    print("  %-52s max |diff| / max |grad| %.2e (%s; tol %.0e)" % (what, worst, at, GRAD_RTOL))


def numpy_forward_checks(w, wide, io, cfg, wide_grad):
    import numpy as np
    tok, tgt = io["tokens"].astype(np.int64), io["targets"].astype(np.int64)
    print("(a) NumPy float64 forward")
    for name, ws, key, tol in (("init", w, "", LOGIT_TOL),
                               ("wide", wide, "wide_", WIDE_TOL * max(1.0, float(np.abs(io["wide_logits"]).max())))):
        z, _ = forward(ws, tok, cfg)
        compare(z, io[key + "logits"], tol, "%s weights: logits (B, T, V)" % name)
        loss, _ = cross_entropy(z, tgt)
        c = float(io[key + "loss"][0])
        rel = abs(loss - c) / abs(loss)
        check(rel <= LOSS_RTOL, "%s weights: loss NumPy %.9g, C %.9g (rel %.2e)" % (name, loss, c, rel))
        print("  %-52s NumPy %.7f C %.7f rel %.1e" % (name + " weights: mean cross-entropy", loss, c, rel))
        if name == "wide":
            # The comparison must be able to fail: each mutant of the reference misses by far more.
            for mutant in ("no causal mask", "heads interleaved", "no 1/sqrt(hs)", "erf gelu", "no position embedding"):
                zm, _ = forward(ws, tok, cfg, mutant)
                d = float(np.abs(zm - io[key + "logits"]).max())
                check(d > 10 * tol, "mutant '%s' is not caught: max |diff| %.3g <= 10 x tol %.3g" % (mutant, d, tol))
                print("  mutant %-45s max |diff| %.2e: caught" % ("'" + mutant + "'", d))
            # Causality itself: changing the last token leaves every earlier position's logits alone.
            t2 = tok.copy()
            t2[:, -1] = (t2[:, -1] + 1) % cfg["vocab"]
            z2, _ = forward(ws, t2, cfg)
            check(np.array_equal(z2[:, :-1], z[:, :-1]) and not np.allclose(z2[:, -1], z[:, -1]),
                  "the reference is causal")
            _, cache = forward(ws, tok, cfg)
            compare_grads(backward(ws, cfg, cache, cross_entropy(z, tgt)[1]), wide_grad,
                          "wide weights: gradient, 28 tensors")


def gradcheck(w, cfg, io):
    """The hand-written backward against central differences in float64, on a few entries per tensor."""
    import numpy as np
    tok = io["train_tokens"][0][:2].astype(np.int64)
    y = io["train_targets"][0][:2].astype(np.int64)
    z, cache = forward(w, tok, cfg)
    _, dz = cross_entropy(z, y)
    gr = backward(w, cfg, cache, dz)
    worst, rng = 0.0, np.random.default_rng(0)
    for k in sorted(w):
        for idx in rng.integers(0, w[k].size, 4):
            keep = w[k].flat[idx]
            w[k].flat[idx] = keep + 1e-5
            lp = cross_entropy(forward(w, tok, cfg)[0], y)[0]
            w[k].flat[idx] = keep - 1e-5
            lm = cross_entropy(forward(w, tok, cfg)[0], y)[0]
            w[k].flat[idx] = keep
            num = (lp - lm) / 2e-5
            worst = max(worst, abs(num - gr[k].flat[idx]) / (1e-6 + abs(num)))
    check(worst < 1e-4, "NumPy backward vs central differences: max rel diff %.2e" % worst)
    print("  NumPy backward vs central differences (float64):    max rel diff %.2e" % worst)


def numpy_training(w0, cfg, io, meta, final, grad0):
    import numpy as np
    print("(c) NumPy float64 training: backward, clip_grad_norm_(1.0), AdamW in nanoGPT's groups")
    gradcheck({k: v.copy() for k, v in w0.items()}, cfg, io)
    lr, wd = float(meta["lr"]), float(meta["weight_decay"])
    b1, b2 = (float(b) for b in meta["betas"].split(","))
    eps, clip = float(meta["eps"]), float(meta["clip"])
    decay = set(meta["decay"].split(","))
    # nanoGPT's groups as the engine states them: the 2-D weights of linear layers decay; biases,
    # layer norms and the embeddings (wte, with the head tied to it, and wpe) do not.
    want = {k for k, a in w0.items() if a.ndim == 2 and not k.startswith("0.")}
    check(decay == want, "decay group: the engine's %s, expected %s" % (sorted(decay), sorted(want)))
    print("  decay group: %s" % " ".join(sorted(decay)))
    w = {k: v.copy() for k, v in w0.items()}
    m = {k: np.zeros_like(v) for k, v in w.items()}
    v = {k: np.zeros_like(v) for k, v in w.items()}
    losses, norms = [], []
    for t in range(1, io["train_losses"].shape[0] + 1):
        x = io["train_tokens"][t - 1].astype(np.int64)
        y = io["train_targets"][t - 1].astype(np.int64)
        z, cache = forward(w, x, cfg)
        loss, dz = cross_entropy(z, y)
        gr = backward(w, cfg, cache, dz)
        if t == 1:
            compare_grads(gr, grad0, "step 1: gradient, 28 tensors")
        norm = math.sqrt(sum(float((g * g).sum()) for g in gr.values()))
        coef = min(1.0, clip / (norm + 1e-6))
        losses.append(loss)
        norms.append(norm)
        for k in w:
            g = gr[k] * coef
            if k in decay:
                w[k] *= 1.0 - lr * wd
            m[k] = b1 * m[k] + (1 - b1) * g
            v[k] = b2 * v[k] + (1 - b2) * g * g
            w[k] -= lr / (1 - b1 ** t) * m[k] / (np.sqrt(v[k]) / math.sqrt(1 - b2 ** t) + eps)
    c = io["train_losses"].astype(np.float64)
    check(abs(losses[0] - c[0]) <= LOSS_RTOL * abs(c[0]),
          "step 1: loss %.9g is the forward's %.9g" % (c[0], losses[0]))
    compare(losses, c, TRAIN_TOL, "20 losses")
    rel = np.abs(np.array(norms) - io["train_grad_norms"]) / np.array(norms)
    check(rel.max() <= NORM_RTOL, "gradient norms: max rel diff %.3g" % rel.max())
    print("  %-52s max rel diff %.2e" % ("20 gradient norms (before clipping)", rel.max()))
    compare(np.concatenate([w[k].ravel() for k in sorted(w)]), np.concatenate([final[k].ravel() for k in sorted(w)]),
            PARAM_TOL, "weights after 20 steps")
    first, last = float(c[:5].mean()), float(c[-5:].mean())
    check(last < first - 0.1, "the losses fall: first five %.4f, last five %.4f" % (first, last))
    print("  losses: %s" % " ".join("%.4f" % l for l in c))


# ---- (b) torch ----------------------------------------------------------------------------------------

def torch_part(w, wide, final, io, meta, cfg, grad0, wide_grad):
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    print("(b) PyTorch %s nanoGPT" % torch.__version__)
    torch.set_num_threads(2)
    L, H, C, T, V = cfg["layers"], cfg["heads"], cfg["dim"], cfg["ctx"], cfg["vocab"]

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T), persistent=False)

        def forward(self, x):
            B, t, _ = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (u.view(B, t, H, C // H).transpose(1, 2) for u in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, t, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(C, 4 * C)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(C)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(V, C), wpe=nn.Embedding(T, C),
                h=nn.ModuleList([Block() for _ in range(L)]), ln_f=nn.LayerNorm(C)))
            self.lm_head = nn.Linear(C, V, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT

        def forward(self, idx, targets=None):
            t = idx.size(1)
            x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t, dtype=torch.long))
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            loss = None if targets is None else F.cross_entropy(logits.view(-1, V), targets.view(-1))
            return logits, loss

    names = torch_names(L)

    def load(ws):
        model = GPT()
        state = {names[k]: torch.from_numpy(v.copy()) for k, v in ws.items()}
        state["lm_head.weight"] = state["transformer.wte.weight"]
        res = model.load_state_dict(state, strict=True)
        check(not res.missing_keys and not res.unexpected_keys, "load_state_dict: %s" % (res,))
        check(model.lm_head.weight is model.transformer.wte.weight, "the head stays tied after loading")
        return model

    tok = torch.from_numpy(io["tokens"].astype(np.int64))
    tgt = torch.from_numpy(io["targets"].astype(np.int64))
    for name, ws, key, tol in (("init", w, "", LOGIT_TOL),
                               ("wide", wide, "wide_", WIDE_TOL * max(1.0, float(np.abs(io["wide_logits"]).max())))):
        model = load(ws).eval()
        with torch.no_grad():
            z, loss = model(tok, tgt)
        compare(z.double().numpy(), io[key + "logits"], tol, "torch %s weights: logits" % name)
        c = float(io[key + "loss"][0])
        check(abs(loss.item() - c) <= 1e-5 * abs(c), "torch %s weights: loss %.9g, C %.9g" % (name, loss.item(), c))
        print("  %-52s torch %.7f C %.7f" % ("torch " + name + " weights: loss", loss.item(), c))

    def grads(model):
        return {k: model.get_parameter(names[k]).grad.double().numpy() for k in w}

    model = load(wide).train()
    _, loss = model(tok, tgt)
    loss.backward()
    compare_grads(grads(model), wide_grad, "torch wide weights: gradient")

    # nanoGPT's groups: Linear weights decay; biases, LayerNorm and the (tied) embeddings do not.
    model = load(w).train()
    decay_t = [p for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n and "wpe" not in n]
    nodecay_t = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "wte" not in n and "wpe" not in n)]
    ours = {names[k] for k in meta["decay"].split(",")}
    theirs = {n for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n and "wpe" not in n}
    check(ours == theirs, "decay groups: ours %s, torch %s" % (sorted(ours), sorted(theirs)))
    b1, b2 = (float(b) for b in meta["betas"].split(","))
    opt = torch.optim.AdamW([{"params": decay_t, "weight_decay": float(meta["weight_decay"])},
                             {"params": nodecay_t, "weight_decay": 0.0}],
                            lr=float(meta["lr"]), betas=(b1, b2), eps=float(meta["eps"]))
    losses, norms = [], []
    for s in range(io["train_losses"].shape[0]):
        x = torch.from_numpy(io["train_tokens"][s].astype(np.int64))
        y = torch.from_numpy(io["train_targets"][s].astype(np.int64))
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        if s == 0:
            compare_grads(grads(model), grad0, "torch step 1: gradient")
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), float(meta["clip"]))))
        opt.step()
        losses.append(loss.item())
    compare(losses, io["train_losses"], TRAIN_TOL, "torch: 20 losses")
    rel = np.abs(np.array(norms) - io["train_grad_norms"]) / np.array(norms)
    check(rel.max() <= NORM_RTOL, "torch: gradient norms: max rel diff %.3g" % rel.max())
    print("  %-52s max rel diff %.2e" % ("torch: 20 gradient norms", rel.max()))
    sd = model.state_dict()
    compare(np.concatenate([sd[names[k]].double().numpy().ravel() for k in sorted(final)]),
            np.concatenate([final[k].ravel() for k in sorted(final)]), PARAM_TOL, "torch: weights after 20 steps")


def main():
    rc, got = run_helper(__doc__, ["gpt.safetensors", "gpt.wide.safetensors", "gpt.final.safetensors",
                                   "gpt.io.safetensors", "gpt.grad.safetensors", "gpt.wide.grad.safetensors"])
    if rc is not None:
        return rc
    import numpy as np
    (w32, wmeta), (wide32, _), (final32, _), (io, meta), (grad0, _), (wide_grad, _) = got
    cfg = parse_preset(meta["model"])
    names = torch_names(cfg["layers"])
    check(sorted(w32) == sorted(names), "tensors %s, want %s" % (sorted(w32), sorted(names)))
    if failures:
        return 1
    print("weights: %d tensors, %d parameters; model %r" % (len(w32), sum(v.size for v in w32.values()), wmeta.get("model")))
    w = {k: v.astype(np.float64) for k, v in w32.items()}
    wide = {k: v.astype(np.float64) for k, v in wide32.items()}
    numpy_forward_checks(w, wide, io, cfg, wide_grad)
    numpy_training(w, cfg, io, meta, final32, grad0)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP torch part: torch is not installed")
    else:
        torch_part(w32, wide32, final32, io, meta, cfg, grad0, wide_grad)
    print("gpt-ref: %d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
