#!/usr/bin/env python3
"""Interop of ringside's safetensors files with Python's readers and writers.

Usage: read_safetensors.py ST_INTEROP   (the helper built from tests/engine/ckpt/st_interop.c)

C -> Python: the helper writes a file; it is read (1) by hand with json + struct, always, and (2) by
the `safetensors` package when it is importable. Python -> C: files written by hand and by
`safetensors.numpy.save_file` are checked by the helper. Elements follow one formula on both sides:
floats i*0.5 - 1, signed integers i*3 - 7, U8 i*3 + 1.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

FMT = {"F32": "f", "F64": "d", "F16": "e", "I64": "q", "I32": "i", "I8": "b", "U8": "B"}
SIZE = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I8": 1, "U8": 1}

# What st_interop.c `write` saves, in its order.
C_SET = [
    ("0.weight", "F32", [3, 4]), ("0.bias", "F32", [4]), ("step", "I64", []),
    ("empty", "F32", [0, 3]), ("1.weight", "F64", [2, 2, 2]), ("half", "F16", [5]),
    ("labels", "I32", [5]), ("signs", "I8", [6]), ("mask", "U8", [7]),
]
C_META = {"format": "pt", "writer": "ringside"}

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def expect(dtype, i):
    if dtype in ("F32", "F64", "F16", "BF16"):
        return i * 0.5 - 1
    if dtype == "U8":
        return (i * 3 + 1) & 0xFF
    return i * 3 - 7


def numel(shape):
    return math.prod(shape)


def encode(dtype, n):
    vals = [expect(dtype, i) for i in range(n)]
    if dtype == "BF16":  # the top half of an f32: exact for these values
        return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in vals)
    return struct.pack("<%d%s" % (n, FMT[dtype]), *vals)


def read_by_hand(path):
    """The format read with nothing but the standard library, checking what the spec requires."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    check(n % 8 == 0, "header length %d is a multiple of 8" % n)
    text = raw[8 : 8 + n].decode("utf-8")
    check(text.startswith("{") and text.rstrip(" ").endswith("}"),
          "header is a JSON object padded with spaces only")
    header = json.loads(text)
    data = raw[8 + n :]
    meta = header.pop("__metadata__", {})
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    pos = 0
    for b, e, k in spans:
        check(b == pos, "tensor %s begins at %d, right after the previous one (%d)" % (k, b, pos))
        pos = e
    check(pos == len(data), "tensors cover the data region (%d of %d bytes)" % (pos, len(data)))
    out = {}
    for k, v in header.items():
        b, e = v["data_offsets"]
        cnt = numel(v["shape"])
        check(e - b == cnt * SIZE[v["dtype"]], "%s: byte count matches shape and dtype" % k)
        out[k] = (v["dtype"], v["shape"], list(struct.unpack("<%d%s" % (cnt, FMT[v["dtype"]]), data[b:e])))
    return out, meta, list(header)


def c_to_python(helper, tmp):
    path = os.path.join(tmp, "from_c.safetensors")
    subprocess.run([helper, "write", path], check=True)

    tensors, meta, order = read_by_hand(path)
    check(meta == C_META, "metadata by hand: %r" % (meta,))
    check(order == [name for name, _, _ in C_SET], "header keeps the order C wrote: %r" % (order,))
    for name, dtype, shape in C_SET:
        got = tensors.get(name)
        check(got is not None, "by hand: %s present" % name)
        if got:
            check(got[0] == dtype and got[1] == shape, "by hand: %s is %s %r" % (name, got[0], got[1]))
            want = [expect(dtype, i) for i in range(numel(shape))]
            check(got[2] == want, "by hand: %s values %r want %r" % (name, got[2][:6], want[:6]))
    print("C -> Python by hand (json + struct): %d tensors checked" % len(C_SET))

    try:
        import numpy as np
    except ImportError:
        print("C -> NumPy: skipped (numpy is not installed)")
        return
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    for name, dtype, shape in C_SET:
        b, e = header[name]["data_offsets"]
        arr = np.frombuffer(raw, dtype="<" + FMT[dtype], count=numel(shape), offset=8 + n + b).reshape(shape)
        want = np.array([expect(dtype, i) for i in range(numel(shape))]).reshape(shape)
        check(np.array_equal(arr, want), "numpy frombuffer: %s" % name)
    print("C -> NumPy frombuffer: %d tensors checked" % len(C_SET))

    try:
        from safetensors import safe_open
        from safetensors.numpy import load_file
    except ImportError:
        print("C -> safetensors package: skipped (pip install safetensors to run it)")
        return
    loaded = load_file(path)
    check(sorted(loaded) == sorted(name for name, _, _ in C_SET), "load_file names: %r" % sorted(loaded))
    for name, dtype, shape in C_SET:
        arr = loaded.get(name)
        if arr is None:
            continue
        want = np.array([expect(dtype, i) for i in range(numel(shape))]).reshape(shape)
        check(arr.dtype == np.dtype(FMT[dtype]) and list(arr.shape) == shape,
              "load_file: %s is %s %r" % (name, arr.dtype, arr.shape))
        check(np.array_equal(arr, want), "load_file: %s values" % name)
    with safe_open(path, "np") as f:
        check(f.metadata() == C_META, "safe_open metadata: %r" % (f.metadata(),))
    print("C -> safetensors.numpy.load_file: %d tensors checked" % len(loaded))


def run_check(helper, path, n, meta):
    r = subprocess.run([helper, "check", path, str(n)] + ["%s=%s" % kv for kv in meta.items()],
                       capture_output=True, text=True)
    check(r.returncode == 0, "C check of %s: rc %d\n%s%s" % (path, r.returncode, r.stdout, r.stderr))
    return r


def python_to_c(helper, tmp):
    # By hand: header keys in another order than the data, BF16 included, no padding at all (the
    # spec allows it), and metadata.
    spec = [("b.half", "F16", [2, 3]), ("a.w", "F32", [4]), ("bf", "BF16", [3]), ("i", "I64", [2]),
            ("s", "F64", []), ("none", "I32", [0]), ("u", "U8", [5]), ("k", "I8", [3])]
    blobs, header, pos = [], {}, 0
    for name, dtype, shape in spec:
        blob = encode(dtype, numel(shape))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + len(blob)]}
        blobs.append(blob)
        pos += len(blob)
    meta = {"source": "python by hand", "epoch": "7"}
    ordered = {"__metadata__": meta}
    ordered.update(dict(reversed(list(header.items()))))
    text = json.dumps(ordered).encode()
    path = os.path.join(tmp, "by_hand.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    run_check(helper, path, len(spec), meta)
    print("Python by hand -> C: %d tensors checked" % len(spec))

    try:
        import numpy as np
        from safetensors.numpy import save_file
    except ImportError:
        print("safetensors package -> C: skipped (pip install safetensors numpy to run it)")
        return
    arrays = {}
    for name, dtype, shape in spec:
        if dtype == "BF16":
            continue  # numpy has no bfloat16
        vals = [expect(dtype, i) for i in range(numel(shape))]
        arrays[name] = np.array(vals, dtype=FMT[dtype]).reshape(shape)
    path = os.path.join(tmp, "save_file.safetensors")
    meta = {"source": "safetensors.numpy.save_file"}
    save_file(arrays, path, metadata=meta)
    run_check(helper, path, len(arrays), meta)
    print("safetensors.numpy.save_file -> C: %d tensors checked" % len(arrays))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    helper = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="rs-st-interop-") as tmp:
        c_to_python(helper, tmp)
        python_to_c(helper, tmp)
    print("read_safetensors.py: %s" % ("%d failures" % failures if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
