#!/usr/bin/env python3
"""Transformers as torch exports them, imported by ringside and compared with ONNX Runtime: a
nanoGPT-style decoder (token ids in, logits out; and its last position, x[:, -1, :]),
nn.TransformerEncoder (nn.MultiheadAttention inside), nn.MultiheadAttention alone and a small ViT (class
token, pre-norm GELU encoder, x[:, 0]), each with the TorchScript exporter (opset 17) and the dynamo
exporter (its default, opset 20 with torch 2.x; where onnxscript imports), at small sizes with random
weights. Each is also compiled by RUN_PLAN into fp32, bf16 and int8 plans and compared with ONNX Runtime
(fp32 within 1e-4; the encoder's, MHA's and ViT's attention runs as batched matmuls, slices, expands and
concats of the engine's op kernels inside the plan), and the GPTs generated from at the prompt (RINGSIDE). Usage:
export_torch_transformers.py RUN_IMPORT RUN_PLAN [RINGSIDE]. Exits 77 (skipped) with a message when torch
is missing; the dynamo part says why it skipped when onnxscript is."""
import os
import subprocess
import sys
import tempfile
import warnings

try:
    import numpy  # noqa: F401
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401
except Exception as e:
    print(f"SKIP: needs numpy, onnx and onnxruntime ({e})")
    sys.exit(77)
# The sanitizer pass of the suite skips the torch exports (minutes under ASan): it runs the committed
# pattern files of the same operators, and the release pass runs these.
if os.environ.get("RINGSIDE_SKIP_TORCH"):
    print(f"SKIP: {os.environ['RINGSIDE_SKIP_TORCH']}")
    sys.exit(77)
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except Exception as e:
    print(f"SKIP: torch is not installed here ({e}); tests/onnx/import/transformer/ covers the same node patterns")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_manifest import add_good, write_manifest  # noqa: E402

warnings.filterwarnings("ignore")
V, T, C, H = 11, 8, 16, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, Tn, _ = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, Tn, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, Tn, C))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, last=False, seed=3):
        super().__init__()
        torch.manual_seed(seed)  # a seed whose greedy texts vary (check_generate compares them)
        self.last = last
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList([Block() for _ in range(2)])
        self.ln, self.head = nn.LayerNorm(C), nn.Linear(C, V, bias=False)
        for name, p in self.named_parameters():  # LayerNorm's ones and zeros would hide a swapped weight
            if ".ln" in f".{name}":
                nn.init.normal_(p, mean=1.0 if name.endswith("weight") else 0.0, std=0.2)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for b in self.h:
            x = b(x)
        x = self.ln(x)
        return self.head(x[:, -1, :] if self.last else x)


def encoder():
    layer = nn.TransformerEncoderLayer(d_model=C, nhead=H, dim_feedforward=32, dropout=0.0, batch_first=True)
    m = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    for p in m.parameters():
        nn.init.normal_(p, std=0.3)
    return m.eval()


class ViT(nn.Module):
    """A small vision transformer: patches by a strided Conv, a class token (Expand + Concat), positions, a
    pre-norm GELU nn.TransformerEncoder, the class position x[:, 0] (Gather on activations), a head."""

    def __init__(self):
        super().__init__()
        self.pe = nn.Conv2d(3, C, 4, 4)
        self.cls, self.pos = nn.Parameter(torch.randn(1, 1, C)), nn.Parameter(torch.randn(1, 17, C))
        layer = nn.TransformerEncoderLayer(C, H, 32, 0.0, batch_first=True, norm_first=True, activation="gelu")
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(C, 5)

    def forward(self, x):
        x = self.pe(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.enc(x)[:, 0])


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.MultiheadAttention(C, H, batch_first=True)

    def forward(self, x):
        return self.m(x, x, x, need_weights=False)[0]


def export(model, x, path, dynamo):
    name = "tokens" if x.dtype == torch.int64 else "x"
    if dynamo:
        torch.onnx.export(model, (x,), path, dynamo=True, input_names=[name], output_names=["y"],
                          dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=64)},), verbose=False)
    else:
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17, input_names=[name], output_names=["y"],
                          dynamic_axes={name: {0: "batch"}, "y": {0: "batch"}})


def main():
    torch.manual_seed(0)
    ids = torch.randint(0, V, (2, T))
    xs = torch.randn(2, 5, C)
    models = [("gpt", GPT().eval(), ids), ("gpt_last", GPT(last=True).eval(), ids), ("encoder", encoder(), xs),
              ("mha", MHA().eval(), xs), ("vit", ViT().eval(), torch.randn(2, 3, 16, 16))]
    try:
        import onnxscript  # noqa: F401
        exporters = [("ts", False), ("dynamo", True)]
    except Exception as e:
        print(f"  dynamo exporter: skipped (onnxscript does not import: {e})")
        exporters = [("ts", False)]
    rc = 0
    with tempfile.TemporaryDirectory(prefix="rs-torch-tx-") as out:
        lines = []
        for tag, dyn in exporters:
            for name, model, x in models:
                fname = f"{name}_{tag}"
                try:  # not under no_grad: there nn.MultiheadAttention takes its fused fast path, which has no export
                    export(model, x, os.path.join(out, f"{fname}.onnx"), dyn)
                except Exception as e:
                    print(f"FAIL {fname}: torch.onnx.export: {type(e).__name__}: {str(e)[:300]}")
                    rc = 1
                    continue
                m = onnx.load(os.path.join(out, f"{fname}.onnx"))
                opset = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0]
                print(f"  exported {fname}: opset {opset}, {len(m.graph.node)} nodes")
                lines.append(add_good(out, fname, seed=len(lines)))
        write_manifest(out, lines)
        rc += subprocess.run([sys.argv[1], out, "--only"]).returncode
        rc += subprocess.run([sys.argv[2], out] + [ln.split()[1] for ln in lines]).returncode
        if len(sys.argv) > 3:
            rc += check_generate(sys.argv[3], out)
    return 1 if rc else 0


def check_generate(ringside, out):
    """The imported torch GPTs at the prompt: `generate` with temp=0, with the KV cache and without (their
    attention imports as the engine's attn layer, which has a one-position form), gives ONNX Runtime's
    greedy continuation (the logits of the last real position: the attention is causal, so what pads the
    window after it changes nothing). The texts stay within the context T: past it, the KV cache keeps the
    newest half of the window (engine/nn/generate.c's context shift) while cache=off crops to the last T
    ids, so the two differ there."""
    import numpy as np
    import onnxruntime as ort
    import re
    text = "abcdefghij\n" * 20
    with open(os.path.join(out, "v.txt"), "w") as f:
        f.write(text)
    vocab = sorted(set(text))
    rc = 0
    prompts = ("ab", "jc", "hgf")
    for name in ("gpt_ts", "gpt_dynamo"):
        path = os.path.join(out, f"{name}.onnx")
        if not os.path.exists(path):
            continue
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        cmds = f"data t = text {os.path.join(out, 'v.txt')} ctx={T}; model g = onnx {path}"
        want = []
        for prompt in prompts:
            ids = [vocab.index(ch) for ch in prompt]
            for _ in range(T - len(prompt)):
                ctx = ids[-T:]
                x = np.array([ctx + [0] * (T - len(ctx))], dtype=np.int64)
                ids.append(int(sess.run(None, {"tokens": x})[0][0, len(ctx) - 1].argmax()))
            want += ["".join(vocab[i] for i in ids).rstrip("\n")] * 2
            cmds += "".join(f"; generate g prompt={prompt} n={T - len(prompt)} temp=0 cache={c}" for c in ("on", "off"))
        r = subprocess.run([ringside, "--no-db", "-c", cmds], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, COLUMNS="1000"))
        got = [g.rstrip("\n") for g in re.findall(r"((?:ab|jc|hgf).*?)\n\d+ tokens in", r.stdout, re.S)]
        ok = r.returncode == 0 and got == want
        print(f"  generate on {name} (cache on and off) against ORT's greedy texts {want[::2]!r}: {'ok' if ok else 'FAIL'}")
        if not ok:
            print(f"  got {got!r}\n{r.stdout}{r.stderr}")
            rc += 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
