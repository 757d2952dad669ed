#!/usr/bin/env python3
"""Where test_fashion_train.c's bars come from: PyTorch with the same models and settings.

Usage: fashion_torch_ref.py mlp|cnn EPOCHS SEEDS [--normalize]   (not run by the suite: needs torch)

Fashion-MNIST from Debian's dataset-fashion-mnist, pixels x/255 (torchvision's ToTensor; --normalize
adds Normalize(0.2860, 0.3530)), Adam lr 1e-3, batch 64, a reshuffle every epoch, 2 threads. Prints the
test accuracy of each seed and the mean, min and max. Figures measured (torch 2.x, CPU):
  mlp 1 epoch, 10 seeds: mean 0.842 (0.827..0.850); with --normalize: 0.851 (0.846..0.856)
  mlp 2 epochs, 5 seeds: mean 0.857 (0.850..0.862)
  cnn 2 epochs, 4 seeds: mean 0.877 (0.874..0.882)
"""
import gzip
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

D = "/usr/share/datasets/fashion-mnist/"


def idx(name):
    raw = gzip.open(D + name).read()
    nd = raw[3]
    dims = struct.unpack(">" + "I" * nd, raw[4:4 + 4 * nd])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * nd).reshape(dims)


def images(name, normalize):
    x = torch.tensor(idx(name) / 255.0, dtype=torch.float32).reshape(-1, 1, 28, 28)
    return (x - 0.2860) / 0.3530 if normalize else x


def model(kind):
    if kind == "mlp":  # mlp 784-256-10
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    # seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    kind, epochs, seeds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    norm = "--normalize" in sys.argv
    torch.set_num_threads(2)
    xtr, xte = images("train-images-idx3-ubyte.gz", norm), images("t10k-images-idx3-ubyte.gz", norm)
    ytr = torch.tensor(idx("train-labels-idx1-ubyte.gz").astype(np.int64))
    yte = torch.tensor(idx("t10k-labels-idx1-ubyte.gz").astype(np.int64))
    accs = []
    for s in range(seeds):
        torch.manual_seed(s)
        m = model(kind)
        opt = torch.optim.Adam(m.parameters(), 1e-3)
        g = torch.Generator().manual_seed(1000 + s)
        t = time.time()
        for _ in range(epochs):
            perm = torch.randperm(len(xtr), generator=g)
            for i in range(0, len(xtr), 64):
                j = perm[i:i + 64]
                loss = nn.functional.cross_entropy(m(xtr[j]), ytr[j])
                opt.zero_grad()
                loss.backward()
                opt.step()
        with torch.no_grad():
            acc = (m(xte).argmax(1) == yte).float().mean().item()
        accs.append(acc)
        print("%s seed %d: test accuracy %.4f (%.1f s)" % (kind, s, acc, time.time() - t), flush=True)
    print("%s, %d epoch(s)%s: mean %.4f min %.4f max %.4f" % (kind, epochs, ", normalized" if norm else "",
                                                             np.mean(accs), min(accs), max(accs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
