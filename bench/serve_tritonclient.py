#!/usr/bin/env python3
"""One client's p50 over Triton's own Python clients (tritonclient.http and tritonclient.grpc) on a served
model: what a Triton user measures, the client library's own time included (the C load generators
bench/serve_load and bench/serve_grpc_load leave almost nothing but the server's). Rows alternate
HTTP and gRPC on the same server. bench/serve.sh runs it when tritonclient can be imported.
usage: bench/serve_tritonclient.py HTTP_PORT GRPC_PORT MODEL DIMS [N]     (DIMS: one sample's shape, 4 or 1x28x28)"""
import sys, time

import numpy as np
import tritonclient.grpc as tg
import tritonclient.http as th

hport, gport, model, dims = sys.argv[1:5]
n = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
shape = [1] + [int(d) for d in dims.split("x")]
x = np.full(shape, 0.1, np.float32)


def p50(mod, url):
    c = mod.InferenceServerClient(url)  # the channel is set up before the timed calls, as in the C clients
    i = mod.InferInput("input", shape, "FP32")
    i.set_data_from_numpy(x)
    for _ in range(50):
        c.infer(model, [i])
    t = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        c.infer(model, [i])
        t.append(time.perf_counter_ns() - t0)
    c.close()
    t.sort()
    return t[len(t) // 2] / 1e3


for name, mod, port in (("http", th, hport), ("grpc", tg, gport)):
    print(f"tritonclient.{name:4s} concurrency 1   {n:6d} calls   p50 {p50(mod, '127.0.0.1:' + port):8.1f} us")
