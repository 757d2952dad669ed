#!/usr/bin/env python3
"""A ringside checkpoint is a PyTorch state dict: proof by recomputing the model from the file.

Usage: ckpt_torch_layout.py TEST_CKPT_PYTHON   (the helper built from tests/engine/ckpt/test_ckpt_python.c)

The helper trains an MLP (mlp 784-64-32-10) and a small CNN (conv, relu, maxpool, conv, layernorm,
flatten, linear) a few steps, saves each with rs_ckpt_save_model, and writes inputs and the logits the
C engine gives for them. Here the checkpoint is read (1) by hand with json + struct, always, checking
names, shapes, dtypes and offsets against what torch.nn.Sequential's state_dict() would hold, and
(2) with safetensors.numpy.load_file when it is importable. The forward pass is then recomputed in
NumPy from the tensors by name (x @ W.T + b, relu; conv as a correlation over (OC, C, KH, KW), max
pooling, LayerNorm over the last dimension, flatten in (C, H, W) order) and must match the C logits
within 1e-4. When torch is importable, the file is also loaded into the equivalent nn.Sequential with
load_state_dict(strict=True) and its logits compared. Exit 77 (skipped) when NumPy is missing.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

TOL = 1e-4
failures = 0

MLP = [("0.weight", [64, 784]), ("0.bias", [64]), ("2.weight", [32, 64]), ("2.bias", [32]),
       ("4.weight", [10, 32]), ("4.bias", [10])]
CNN = [("0.weight", [4, 1, 3, 3]), ("0.bias", [4]), ("3.weight", [6, 4, 3, 3]), ("3.bias", [6]),
       ("4.weight", [4]), ("4.bias", [4]), ("6.weight", [10, 96]), ("6.bias", [10])]


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
    return cond


def read_by_hand(path):
    """name -> (shape, list of floats), and the metadata, with nothing but the standard library."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    check(n % 8 == 0, "%s: header length %d is a multiple of 8" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    out, pos = {}, 0
    for name, v in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = v["data_offsets"]
        check(b == pos, "%s: %s starts at %d, right after the previous tensor (%d)" % (path, name, b, pos))
        pos = e
        check(v["dtype"] == "F32", "%s: %s is %s, want F32" % (path, name, v["dtype"]))
        count = 1
        for d in v["shape"]:
            count *= d
        check(e - b == 4 * count, "%s: %s has %d bytes for shape %s" % (path, name, e - b, v["shape"]))
        out[name] = (v["shape"], struct.unpack("<%df" % count, data[b:e]))
    check(pos == len(data), "%s: the tensors cover the data region" % path)
    return out, meta


def check_layout(path, want):
    tensors, meta = read_by_hand(path)
    check(sorted(tensors) == sorted(n for n, _ in want),
          "%s: tensors %s, want torch's %s" % (path, sorted(tensors), sorted(n for n, _ in want)))
    for name, shape in want:
        if name in tensors:
            check(tensors[name][0] == shape, "%s: %s has shape %s, want %s" % (path, name, tensors[name][0], shape))
    check(meta.get("format") == "ringside-1", "%s: format metadata %r" % (path, meta.get("format")))
    check(meta.get("model", "").startswith("seq "), "%s: model metadata %r" % (path, meta.get("model")))
    print("%s: %d tensors as torch names them; model %r" % (os.path.basename(path), len(tensors), meta.get("model")))
    return tensors


def compare(got, want, what):
    import numpy as np
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if not check(got.shape == want.shape, "%s: shape %s vs %s" % (what, got.shape, want.shape)):
        return
    diff = np.abs(got - want)
    worst = float(diff.max())
    if not check(worst <= TOL, "%s: max |diff| %.3g > %g" % (what, worst, TOL)):
        for idx in list(zip(*np.nonzero(diff > TOL)))[:5]:
            print("   ", tuple(int(i) for i in idx), "recomputed %.7g, C %.7g" % (got[idx], want[idx]))
    else:
        print("  %-44s max |diff| %.2e" % (what, worst))


def numpy_forward(kind, w, x):
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    def linear(h, name):
        return h @ w[name + ".weight"].T + w[name + ".bias"]

    def relu(h):
        return np.maximum(h, 0)

    def conv(h, name, pad):
        h = np.pad(h, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        win = sliding_window_view(h, w[name + ".weight"].shape[2:], axis=(2, 3))  # (N, C, OH, OW, KH, KW)
        return np.einsum("nchwij,ocij->nohw", win, w[name + ".weight"]) + w[name + ".bias"][None, :, None, None]

    def maxpool2(h):
        n, c, hh, ww = h.shape
        return h[:, :, : hh // 2 * 2, : ww // 2 * 2].reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))

    def layernorm(h, name, eps=1e-5):
        mu = h.mean(axis=-1, keepdims=True)
        var = h.var(axis=-1, keepdims=True)
        return (h - mu) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]

    if kind == "mlp":
        return linear(relu(linear(relu(linear(x, "0")), "2")), "4")
    h = maxpool2(relu(conv(x, "0", 1)))
    h = layernorm(conv(h, "3", 0), "4")
    return linear(h.reshape(h.shape[0], -1), "6")


def torch_model(kind):
    import torch.nn as nn
    if kind == "mlp":
        return nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3),
                         nn.LayerNorm(4), nn.Flatten(), nn.Linear(96, 10))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([sys.argv[1], tmp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            print("FAIL: the C helper exited with %d" % r.returncode)
            return 1
        have = {}
        for kind, want in (("mlp", MLP), ("cnn", CNN)):
            have[kind] = (check_layout(os.path.join(tmp, kind + ".safetensors"), want),
                          read_by_hand(os.path.join(tmp, kind + ".io.safetensors"))[0])
        if failures:
            return 1
        try:
            import numpy as np
        except ImportError as ex:
            print("SKIP: numpy is not installed (%s): the layout checks passed, the numeric ones need it" % ex)
            return 77
        try:
            import safetensors.numpy as stnp
        except ImportError:
            stnp = None
            print("safetensors.numpy: skipped (the safetensors package is not installed)")
        try:
            import torch
        except ImportError:
            torch = None
            print("torch: skipped (not installed)")
        for kind in ("mlp", "cnn"):
            tensors, io = have[kind]
            w = {k: np.array(v, dtype=np.float32).reshape(s) for k, (s, v) in tensors.items()}
            x = np.array(io["x"][1], dtype=np.float32).reshape(io["x"][0])
            logits = np.array(io["logits"][1], dtype=np.float32).reshape(io["logits"][0])
            path = os.path.join(tmp, kind + ".safetensors")
            if stnp is not None:
                loaded = stnp.load_file(path)
                check(sorted(loaded) == sorted(w), "%s: safetensors.numpy sees %s" % (kind, sorted(loaded)))
                for k in w:
                    if k in loaded:
                        check(loaded[k].dtype == np.float32 and loaded[k].shape == w[k].shape
                              and np.array_equal(loaded[k], w[k]),
                              "%s: safetensors.numpy's %s differs from the bytes read by hand" % (kind, k))
                print("  %s: safetensors.numpy.load_file agrees with the bytes read by hand" % kind)
            if kind == "cnn":  # trained away from 1 and 0, so swapping LayerNorm's weight and bias would show
                check(not np.all(w["4.weight"] == 1) and not np.all(w["4.bias"] == 0), "cnn: LayerNorm still at init")
            w64 = {k: v.astype(np.float64) for k, v in w.items()}
            compare(numpy_forward(kind, w64, x.astype(np.float64)), logits, kind + ": NumPy forward vs C logits")
            if torch is not None:
                m = torch_model(kind)
                try:
                    import safetensors.torch as sttorch
                    state = sttorch.load_file(path)  # what a PyTorch user would write
                except ImportError:
                    state = {k: torch.from_numpy(v.copy()) for k, v in w.items()}
                res = m.load_state_dict(state, strict=True)
                check(not res.missing_keys and not res.unexpected_keys, "%s: load_state_dict %s" % (kind, res))
                with torch.no_grad():
                    out = m(torch.from_numpy(x)).double().numpy()
                compare(out, logits, kind + ": torch nn.Sequential vs C logits")
        print("ckpt-python: %d failed" % failures)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
