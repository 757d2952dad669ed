#!/usr/bin/env python3
"""Optional inputs (config.pbtxt `optional: true`), through tritonclient over HTTP and gRPC, against ONNX
Runtime on the same file. The model: a (FP32) required; b (FP32) optional with a default in the graph (an
initializer of its name, which ONNX Runtime uses when b is not fed); c (INT32) optional without one.
Outputs: A = a, B = Cast(b, INT32), C = Cast(c, FP32).
- a and c given, b left out: every output equals ORT's run fed {a, c} (B from b's default);
- all three given, a batch of 2: equal to ORT's;
- c left out: refused, as ORT refuses it (no default), naming c; b left out of a 2-sample request: refused
  (its default is one sample; ORT would answer B with 1 row);
- no input: Triton's words for a model with optional inputs ("expected number of inputs between 1 and 3
  ... missing required input(s) ['a']");
- 16 requests at once, half leaving b out, under dynamic batching: each answer equals ORT's for its own
  inputs (a request leaving an input out runs alone; the others are batched);
- the config states optional over both protocols.

usage: test_triton_optional.py build/repl/ringside   (exits 77 without tritonclient or onnx)
"""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import serve_util  # beside this file

with serve_util.needs("numpy, onnx, onnxruntime and tritonclient[all]"):
    import numpy as np
    import onnx
    import onnxruntime as ort
    import tritonclient.grpc as tg
    import tritonclient.http as th
    from onnx import TensorProto, helper, numpy_helper
    from tritonclient.utils import InferenceServerException


RINGSIDE = sys.argv[1]
NAME = "optional"
B_DEFAULT = np.array([[2.5, -7.0, 300.0]], np.float32)
check = serve_util.check


def graph_model():
    nodes = [helper.make_node("Identity", ["a"], ["A"]), helper.make_node("Cast", ["b"], ["B"], to=TensorProto.INT32),
             helper.make_node("Cast", ["c"], ["C"], to=TensorProto.FLOAT)]
    ins = [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3]),
           helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 3]),
           helper.make_tensor_value_info("c", TensorProto.INT32, ["N", 3])]
    outs = [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("B", TensorProto.INT32, ["N", 3]),
            helper.make_tensor_value_info("C", TensorProto.FLOAT, ["N", 3])]
    g = helper.make_graph(nodes, "opt", ins, outs, initializer=[numpy_helper.from_array(B_DEFAULT, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8  # >= 4: an initializer named as an input is that input's default
    return m


def make_model(root):
    cfg = (f'name: "{NAME}"\nmax_batch_size: 4\ndynamic_batching {{ max_queue_delay_microseconds: 20000 }}\n'
           'input [ { name: "a" data_type: TYPE_FP32 dims: [ 3 ] }, '
           '{ name: "b" data_type: TYPE_FP32 dims: [ 3 ] optional: true }, '
           '{ name: "c" data_type: TYPE_INT32 dims: [ 3 ] optional: true } ]\n')
    serve_util.write_onnx(root, NAME, cfg, graph_model())


def infer(mod, c, feeds):
    ins = []
    for n, v in feeds.items():
        i = mod.InferInput(n, list(v.shape), "FP32" if v.dtype == np.float32 else "INT32")
        i.set_data_from_numpy(v)
        ins.append(i)
    r = c.infer(NAME, ins)
    return {k: r.as_numpy(k) for k in ("A", "B", "C")}


def same(got, ref):
    return all(got[k] is not None and got[k].dtype == ref[k].dtype and np.array_equal(got[k], ref[k]) for k in ref)


def refused(mod, c, feeds, needle, what):
    try:
        infer(mod, c, feeds)
        check(False, f"{what} refused")
    except InferenceServerException as e:
        check(needle in str(e), f"{what} refused: {e}")


def run(root, ports):
    sess = ort.InferenceSession(os.path.join(root, NAME, "1", "model.onnx"))

    def ref(feeds):
        return dict(zip(("A", "B", "C"), sess.run(None, feeds)))

    hc, gc = serve_util.triton_clients(ports, http_concurrency=16)
    rng = np.random.default_rng(5)
    a1 = rng.standard_normal((1, 3)).astype(np.float32)
    c1 = rng.integers(-1000, 1000, (1, 3)).astype(np.int32)
    a2 = rng.standard_normal((2, 3)).astype(np.float32) * 100
    b2 = rng.standard_normal((2, 3)).astype(np.float32) * 100
    c2 = rng.integers(-1000, 1000, (2, 3)).astype(np.int32)
    for proto, mod, c in (("HTTP", th, hc), ("gRPC", tg, gc)):
        want = ref({"a": a1, "c": c1})
        got = infer(mod, c, {"a": a1, "c": c1})
        check(same(got, want) and got["B"].tolist() == [[2, -7, 300]],
              f"{proto}: b left out: B from its default, all outputs equal ORT's: {got['B'].tolist()}")
        got = infer(mod, c, {"a": a2, "b": b2, "c": c2})
        check(same(got, ref({"a": a2, "b": b2, "c": c2})), f"{proto}: all three given, batch 2: equal to ORT's")
        refused(mod, c, {"a": a1, "b": a1}, "input 'c' was left out, and the graph gives it no default",
                f"{proto}: c (no default) left out")
        refused(mod, c, {"a": a2, "c": c2}, "input 'b' was left out in a request of 2 samples",
                f"{proto}: b left out of 2 samples")
        refused(mod, c, {}, "expected number of inputs between 1 and 3 but got 0 inputs for model 'optional'. Got "
                "input(s) [], but missing required input(s) ['a']. Please provide all required input(s).",
                f"{proto}: no input")
    try:
        ort.InferenceSession(os.path.join(root, NAME, "1", "model.onnx")).run(None, {"a": a1, "b": a1})
        check(False, "ORT refuses c left out too")
    except Exception as e:  # noqa: BLE001
        check("c" in str(e), f"ORT refuses c left out too: {e}")

    # mixed requests at once under dynamic batching
    feeds = []
    for k in range(16):
        f = {"a": rng.standard_normal((1, 3)).astype(np.float32), "c": rng.integers(-99, 99, (1, 3)).astype(np.int32)}
        if k % 2:
            f["b"] = rng.standard_normal((1, 3)).astype(np.float32) * 50
        feeds.append(f)
    with ThreadPoolExecutor(16) as ex:
        got = list(ex.map(lambda f: infer(th, th.InferenceServerClient(f"127.0.0.1:{ports['http']}"), f), feeds))
    bad = [k for k, (f, g) in enumerate(zip(feeds, got)) if not same(g, ref(f))]
    st = hc.get_inference_statistics(NAME)["model_stats"][0]
    check(not bad, f"16 requests at once, half leaving b out: each equals ORT's for its inputs (wrong: {bad}; "
          f"{st['inference_count']} samples in {st['execution_count']} executions)")
    check([i.get("optional", False) for i in hc.get_model_config(NAME)["input"]] == [False, True, True] and
          [i.optional for i in gc.get_model_config(NAME).config.input] == [False, True, True],
          "the config states optional over HTTP and gRPC")


def main():
    serve_util.main_on_repo(RINGSIDE, make_model, lambda root, ports, _: run(root, ports))


if __name__ == "__main__":
    main()
