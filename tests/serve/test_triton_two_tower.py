#!/usr/bin/env python3
"""ONNX models with several inputs on the engine backend, served from a repository written by hand as
Triton's model repository docs describe (MODEL/config.pbtxt with each input's name, TYPE_FP32 and dims,
MODEL/1/model.onnx), through Triton's own clients over HTTP (binary and JSON tensors) and gRPC: a two-tower
model (user (12) and item (5) features, each Gemm+Relu, Concat, Gemm) and a three-input one with a
(2, 3) input, from tests/onnx/import/two_tower/. Checks the metadata and config list the file's inputs in
its order with their shapes, every answer equals ONNX Runtime's on the same separate inputs (1e-4
relative) at batch 1 and 7, 16 requests at once under dynamic batching each equal ORT's for its own
inputs, a copy with no config.pbtxt gets the inputs from the file, and an input left out or misshapen
is refused naming it.

usage: test_triton_two_tower.py build/repl/ringside   (exits 77, skipped, without tritonclient or onnx)
"""
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor

import serve_util  # beside this file

with serve_util.needs("numpy, onnxruntime and tritonclient[all] (scripts/setup.sh installs them)"):
    import numpy as np
    import onnxruntime as ort
    import tritonclient.grpc as tg
    import tritonclient.http as th
    from tritonclient.utils import InferenceServerException

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

RINGSIDE = sys.argv[1]
FILES = os.path.join(HERE, "..", "onnx", "import", "two_tower")
check = serve_util.check
rng = np.random.default_rng(27)

# written by hand, as Triton's docs show a config.pbtxt
CONFIGS = {
    "two_tower": """name: "two_tower"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "user"
    data_type: TYPE_FP32
    dims: [ 12 ]
  },
  {
    name: "item"
    data_type: TYPE_FP32
    dims: [ 5 ]
  }
]
output [
  {
    name: "score"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
dynamic_batching { max_queue_delay_microseconds: 2000 }
""",
    "three_inputs": """name: "three_inputs"
backend: "onnxruntime"
max_batch_size: 16
input [
  { name: "a" data_type: TYPE_FP32 dims: [ 6 ] },
  { name: "b" data_type: TYPE_FP32 dims: [ 2, 3 ] },
  { name: "c" data_type: TYPE_FP32 dims: [ 6 ] }
]
output [ { name: "score" data_type: TYPE_FP32 dims: [ 2 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
""",
}
SOURCES = {"two_tower": "two_tower", "three_inputs": "two_tower_add", "auto_config": "two_tower_mul"}


def make_repo(root):
    for name, src in SOURCES.items():
        os.makedirs(os.path.join(root, name, "1"))
        shutil.copy(os.path.join(FILES, f"{src}.onnx"), os.path.join(root, name, "1", "model.onnx"))
        if name in CONFIGS:
            serve_util.write_config(root, name, CONFIGS[name])


def infer(mod, c, name, feeds, binary=True):
    ins = []
    for k, v in feeds.items():
        i = mod.InferInput(k, list(v.shape), "FP32")
        if mod is th:
            i.set_data_from_numpy(v, binary_data=binary)
        else:
            i.set_data_from_numpy(v)
        ins.append(i)
    return c.infer(name, ins).as_numpy("score")


def close(got, want):
    return got is not None and got.shape == want.shape and got.dtype == np.float32 and \
        float(np.abs(got - want).max()) <= 1e-4 * max(1.0, float(np.abs(want).max()))


def run(root, ports):
    hc, gc = serve_util.triton_clients(ports)
    for name in SOURCES:
        sess = ort.InferenceSession(os.path.join(root, name, "1", "model.onnx"), providers=["CPUExecutionProvider"])
        want_in = [(i.name, [-1] + list(i.shape[1:])) for i in sess.get_inputs()]
        md = hc.get_model_metadata(name)
        gmd = gc.get_model_metadata(name)
        # with a config.pbtxt or without one, the batch's -1 leads over both protocols (a request carries it)
        gshape = [(i.name, list(i.shape)) for i in gmd.inputs]
        check([(i["name"], i["shape"]) for i in md["inputs"]] == want_in and gshape == want_in and
              all(i["datatype"] == "FP32" for i in md["inputs"]),
              f"{name}: metadata lists the file's inputs in order over HTTP and gRPC: {want_in} (got "
              f"{md['inputs']}, gRPC {gshape})")
        cfg = hc.get_model_config(name)
        check([i["name"] for i in cfg["input"]] == [n for n, _ in want_in], f"{name}: the config names the inputs")

        def feeds_for(b):
            return {i.name: rng.standard_normal([b] + list(i.shape[1:])).astype(np.float32) for i in sess.get_inputs()}

        for b in (1, 7):
            f = feeds_for(b)
            want = sess.run(None, f)[0]
            check(close(infer(th, hc, name, f), want), f"{name}: HTTP binary, batch {b}: equal to ORT's")
            check(close(infer(th, hc, name, f, binary=False), want), f"{name}: HTTP JSON, batch {b}: equal to ORT's")
            check(close(infer(tg, gc, name, f), want), f"{name}: gRPC, batch {b}: equal to ORT's")

        # 16 requests at once, dynamic batching stacks them: each answer is its own inputs'
        fs = [feeds_for(1 + k % 3) for k in range(16)]
        with ThreadPoolExecutor(16) as ex:
            got = list(ex.map(lambda f: infer(th, th.InferenceServerClient(f"127.0.0.1:{ports['http']}"), name, f), fs))
        bad = [k for k, (f, g) in enumerate(zip(fs, got)) if not close(g, sess.run(None, f)[0])]
        st = hc.get_inference_statistics(name)["model_stats"][0]
        check(not bad, f"{name}: 16 requests at once each equal ORT's (wrong: {bad}; {st['inference_count']} samples "
              f"in {st['execution_count']} executions)")

        f = feeds_for(2)
        first = sess.get_inputs()[0].name
        for mod, c, proto in ((th, hc, "HTTP"), (tg, gc, "gRPC")):
            try:
                infer(mod, c, name, {k: v for k, v in f.items() if k != first})
                check(False, f"{name}: {proto}: '{first}' left out refused")
            except InferenceServerException as e:
                check(first in str(e), f"{name}: {proto}: '{first}' left out refused: {e}")
            try:
                infer(mod, c, name, {**f, first: np.zeros((2, 99), np.float32)})
                check(False, f"{name}: {proto}: '{first}' misshapen refused")
            except InferenceServerException as e:
                check(first in str(e), f"{name}: {proto}: '{first}' misshapen refused: {e}")


def main():
    serve_util.main_on_repo(RINGSIDE, make_repo, lambda root, ports, _: run(root, ports))


if __name__ == "__main__":
    main()
