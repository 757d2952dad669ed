#!/usr/bin/env python3
"""A request's memory is bounded by the tensors it carries, read from the server's /proc/PID/status
(VmHWM, its peak RSS). What the issue measured on main: one 63 MiB JSON body of 33M numbers cost +1.26 GB
and 25 s (jansson's tree, ~40 bytes a number). Here:
- that body, to a model taking 4 values a sample (max_batch_size 32), is refused naming the numbers, and
  the peak grows by less than twice the body (the body itself is buffered once);
- a legitimate JSON request of 2M numbers (8 MiB of FP32 in, the same out) to an Identity model is
  answered equal to its input, the peak growing by less than 4x the tensor bytes it carries in and out
  (the body, the tensors and the JSON reply together);
- a shape claiming 2M numbers with 2 in "data" is refused naming both counts (counted before the
  tensor is allocated);
- a body of 200,000 values outside any tensor's data ("parameters") is refused before jansson parses it.
Each request has a 60 s socket timeout so a regression fails instead of hanging.

usage: test_json_bomb.py build/repl/ringside   (Linux /proc; exits 77 without numpy/onnx)
"""
import json
import sys

import serve_util  # beside this file

with serve_util.needs("numpy and onnx"):
    import numpy as np
    import onnx  # noqa: F401 - typed_models builds with it; named here so its absence skips
    import typed_models

RINGSIDE = sys.argv[1]
WIDE = 262144  # values per sample of the wide model
check = serve_util.check


def sanitized(pid):
    """ASan's redzones and quarantine hold freed memory: peak RSS says nothing about the code then."""
    with open(f"/proc/{pid}/maps") as f:
        return "libasan" in f.read()


def bound(cond, what, asan):
    if asan:
        print("note " + what + " (not checked: the server runs under ASan)", flush=True)
    else:
        check(cond, what)


def make_repo(root):
    serve_util.export_mlp(RINGSIDE, root, "mlp", 'name: "mlp"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 32\n')
    serve_util.write_onnx(root, "wide", 'name: "wide"\nmax_batch_size: 8\n', typed_models.wide_model(WIDE))


def main():
    serve_util.main_on_repo(RINGSIDE, make_repo, lambda root, ports, p: run(p.pid, ports["http"]), grpc=False)


def run(pid, port):
    asan = sanitized(pid)
    # a legitimate large JSON request first, while the peak is still the idle server's
    B = 8
    x = (np.arange(B * WIDE) % 7 - 3).astype(np.float32).reshape(B, WIDE) / 2
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [B, WIDE], "data": x.ravel().tolist()}]},
                      separators=(",", ":")).encode()
    tensor = x.nbytes
    h0 = serve_util.proc_status(pid, "VmHWM")
    st, data = serve_util.request(port, "POST", "/v2/models/wide/infer", body)
    grown = (serve_util.proc_status(pid, "VmHWM") - h0) * 1024
    y = np.array(json.loads(data)["outputs"][0]["data"], np.float32) if st == 200 else None
    check(st == 200 and y is not None and np.array_equal(y, x.ravel()),
          f"{B * WIDE} numbers in JSON ({len(body) >> 20} MiB body, {tensor >> 20} MiB FP32) answered equal: {st}")
    bound(grown < 4 * 2 * tensor,
          f"its peak RSS grew {grown >> 20} MiB: under 4x the {2 * tensor >> 20} MiB of tensors it carries in and out", asan)

    # the bomb of the issue: 33M numbers, 63 MiB
    n = 33_000_000
    bomb = b'{"inputs":[{"name":"input","datatype":"FP32","shape":[1,4],"data":[' + b"0," * (n - 1) + b"0]}]}"
    h0 = serve_util.proc_status(pid, "VmHWM")
    st, data = serve_util.request(port, "POST", "/v2/models/mlp/infer", bomb)
    grown = (serve_util.proc_status(pid, "VmHWM") - h0) * 1024
    msg = json.loads(data).get("error", "") if st != 200 else ""
    check(st == 400 and "expected 4 numbers" in msg and str(n) in msg,
          f"the {len(bomb) >> 20} MiB body of {n} numbers refused naming the numbers: {st} {msg[:160]}")
    bound(grown < 2 * len(bomb), f"its peak RSS grew {grown >> 20} MiB (main: +1.26 GB): under twice the body", asan)

    # a shape claiming far more than the data holds: refused before anything that size is allocated
    claim = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [8, WIDE], "data": [1.0, 2.0]}]})
    st, data = serve_util.request(port, "POST", "/v2/models/wide/infer", claim)
    check(st == 400 and f"expected {8 * WIDE} numbers for its shape, got 2" in json.loads(data).get("error", ""),
          f"shape [8, {WIDE}] with 2 numbers refused naming both counts: {st}")

    # values outside any tensor's data are what jansson parses: bounded before it does
    junk = b'{"parameters":{"x":[' + b"1," * 199_999 + b'1]},"inputs":[]}'
    st, data = serve_util.request(port, "POST", "/v2/models/mlp/infer", junk)
    msg = json.loads(data).get("error", "")
    check(st == 400 and "values beside its numeric tensors' data" in msg, f"200,000 values in parameters refused: {msg[:160]}")
    st, data = serve_util.request(port, "POST", "/v2/models/mlp/infer",
                                  {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]})
    check(st == 200, f"the server answers normally afterwards: {st}")


if __name__ == "__main__":
    main()
