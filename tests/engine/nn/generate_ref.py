#!/usr/bin/env python3
"""Greedy generation past the context against NumPy float64 (nanoGPT's generate, written again).

Usage: generate_ref.py TEST_GENERATE_REF   (the helper built from tests/engine/nn/test_generate_ref.c)

The helper saves a small GPT (ctx 8, wide weights) and the greedy text of n = 4 ctx tokens after a
3-token prompt, generated with the KV cache (the default), without it (cache=off) and with
window=shift. Here the same weights, read from the safetensors by hand, generate greedily in float64
with gpt_ref.py's forward (itself checked against the C logits and a PyTorch nanoGPT by gpt-ref):
    for each token: idx_cond = idx[-ctx:]; logits = forward(idx_cond)[-1]; idx.append(argmax)
which is nanoGPT's generate at temperature 0. The cache and cache=off texts must equal it token for
token. The shift text must equal the reference's own shift rule (when the window is full, keep the
newest ctx/2 and go on from there) and differ from the crop text, or the comparison could not tell
the two apart, and the text must use at least 4 tokens. The smallest gap between the two largest logits is printed: a tie would make the
comparison meaningless, so it must be well above float32's rounding. Exit 77 only without NumPy.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_ref  # noqa: E402

MIN_GAP = 1e-3


def greedy(w, cfg, prompt, n, window):
    import numpy as np
    T = cfg["ctx"]
    idx = list(prompt)
    ctx = list(prompt)[-T:]  # what the model sees: crop keeps the last T; shift keeps its own window
    out, gaps = [], []
    for _ in range(n):
        z, _ = gpt_ref.forward(w, np.array([ctx], dtype=np.int64), cfg)
        last = np.sort(z[0, -1])
        gaps.append(float(last[-1] - last[-2]))
        tok = int(np.argmax(z[0, -1]))
        out.append(tok)
        idx.append(tok)
        if window == "crop":
            ctx = idx[-T:]
        else:
            ctx = ctx + [tok] if len(ctx) < T else ctx[T - T // 2:] + [tok]
    return out, min(gaps)


def main():
    rc, got = gpt_ref.run_helper(__doc__, ["gen.safetensors", "gen.io.safetensors"])
    if rc is not None:
        return rc
    import numpy as np
    (w32, _), (io, meta) = got
    cfg = gpt_ref.parse_preset(meta["model"])
    w = {k: v.astype(np.float64) for k, v in w32.items()}
    prompt = [int(t) for t in io["prompt"]]
    n = len(io["cache"])
    print("model %r, prompt %s, n = %d (%.0f x ctx)" % (meta["model"], prompt, n, n / cfg["ctx"]))
    crop, gap = greedy(w, cfg, prompt, n, "crop")
    shift, sgap = greedy(w, cfg, prompt, n, "shift")
    print("NumPy float64 crop : %s" % " ".join(map(str, crop)))
    for name in ("cache", "nocache"):
        got = [int(t) for t in io[name]]
        bad = [i for i in range(n) if got[i] != crop[i]]
        print("C %-16s: %s  %s" % (name, " ".join(map(str, got)), "equal" if not bad else "differs at %d" % bad[0]))
        gpt_ref.check(not bad, "%s: the greedy text departs from NumPy's crop at token %s" % (name, bad[:1]))
    got = [int(t) for t in io["shift"]]
    bad = [i for i in range(n) if got[i] != shift[i]]
    print("C %-16s: %s  %s" % ("window=shift", " ".join(map(str, got)), "equal" if not bad else "differs at %d" % bad[0]))
    gpt_ref.check(not bad, "window=shift: departs from NumPy's shift rule at token %s" % bad[:1])
    first = next((i for i in range(n) if shift[i] != crop[i]), None)
    print("crop and shift part at token %s (the context fills after %d)" % (first, cfg["ctx"] - len(prompt)))
    gpt_ref.check(first is not None, "the shift and crop texts are the same: the test cannot tell them apart")
    gpt_ref.check(len(set(crop)) >= 4, "the reference text has %d distinct tokens: too plain to tell a wrong window"
                  % len(set(crop)))
    print("smallest gap between the two largest logits: crop %.3g, shift %.3g (at least %g)" % (gap, sgap, MIN_GAP))
    gpt_ref.check(min(gap, sgap) >= MIN_GAP, "a near tie in the reference: choose other weights")
    print("generate-ref: %d failed" % gpt_ref.failures)
    return 1 if gpt_ref.failures else 0


if __name__ == "__main__":
    sys.exit(main())
