#!/usr/bin/env python3
"""config.pbtxt as Triton reads it, through tritonclient (HTTP and gRPC), on repositories written by hand:
- reshape: the request's dims [2, 3] fed to a model of [6], the reply in the config's dims, values equal;
- default_model_filename: the version folder's file named by the config is the one served;
- label_filename with the classification extension: "value:index:label" strings as Triton writes them;
- max_batch_size 0 with the batch fixed in the dims ([2, 4]): [2, 4] answered, [3, 4] refused in Triton's words;
- an ensemble (platform "ensemble", ensemble_scheduling): UINT8 pixels through a Cast model into an MLP,
  equal to ORT's MLP over HTTP and gRPC, classification of its output, a step reading a tensor nothing
  gives refused in the request's answer;
- sequence_batching (direct): the START, END, READY and CORRID control inputs a model gets over a
  3-request sequence on both protocols; a request continuing an ended sequence, one without an id, and a
  client sending a control input refused in Triton's words;
- what ringside cannot honour refused by name at load (response_cache enable, KIND_GPU, an ensemble
  platform without steps, the oldest sequence strategy, dynamic and sequence batching together), and model_warmup reported as
  not run.

usage: test_triton_config.py build/repl/ringside   (exits 77 without tritonclient or onnx)
"""
import os
import sys

import serve_util  # beside this file

with serve_util.needs("numpy, onnx and tritonclient[all]"):
    import numpy as np
    import onnx
    import onnxruntime as ort
    import tritonclient.grpc as tg
    import tritonclient.http as th
    from onnx import TensorProto, helper
    from tritonclient.utils import InferenceServerException


RINGSIDE = sys.argv[1]
check = serve_util.check


def ident(n, dt=TensorProto.FLOAT):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "id",
                          [helper.make_tensor_value_info("x", dt, ["N", n])],
                          [helper.make_tensor_value_info("y", dt, ["N", n])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def model(root, name, cfg, m, fname="model.onnx", extra=None):
    serve_util.write_onnx(root, name, f'name: "{name}"\n' + cfg, m, fname)
    for k, v in (extra or {}).items():
        with open(os.path.join(root, name, k), "w") as f:
            f.write(v)


IO = 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 6 ] } ]\noutput [ { name: "y" data_type: TYPE_FP32 dims: [ 6 ] } ]\n'
REFUSED = {
    "cache": ("max_batch_size: 4\nresponse_cache { enable: true }\n", "response_cache"),
    "gpu": ("max_batch_size: 4\ninstance_group [ { kind: KIND_GPU } ]\n", "KIND_GPU"),
    "ens": ('platform: "ensemble"\nmax_batch_size: 4\n' + IO, "ensemble_scheduling"),
    "seq": ("max_batch_size: 4\nsequence_batching { oldest { } }\n", "oldest"),
    "two": ("max_batch_size: 4\ndynamic_batching { }\nsequence_batching { direct { } }\n", "scheduling_choice"),
}


def make_repo(root):
    model(root, "reshape", 'max_batch_size: 4\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 2, 3 ] reshape: { shape: [ 6 ] } } ]\n'
          'output [ { name: "y" data_type: TYPE_FP32 dims: [ 2, 3 ] reshape: { shape: [ 6 ] } } ]\n', ident(6))
    model(root, "named", "max_batch_size: 4\ndefault_model_filename: \"weights_v2.onnx\"\n" + IO, ident(6),
          fname="weights_v2.onnx")
    model(root, "labelled", 'max_batch_size: 4\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 6 ] } ]\n'
          'output [ { name: "y" data_type: TYPE_FP32 dims: [ 6 ] label_filename: "labels.txt" } ]\n', ident(6),
          extra={"labels.txt": "cat\ndog\nbird\nfish\nfrog\nhorse\n"})
    model(root, "fixed", 'max_batch_size: 0\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 2, 4 ] } ]\n'
          'output [ { name: "y" data_type: TYPE_FP32 dims: [ 2, 4 ] } ]\n', ident(4))
    model(root, "warm", "max_batch_size: 4\nmodel_warmup [ { name: \"w\" batch_size: 1 } ]\n", ident(6))
    for name, (cfg, _) in REFUSED.items():
        model(root, name, cfg, ident(6))
    os.remove(os.path.join(root, "ens", "1", "model.onnx"))  # an ensemble's version folder is empty
    # a preprocessing model feeding a classifier: UINT8 pixels -> FP32 (Cast) -> an MLP (the engine)
    g = helper.make_graph([helper.make_node("Cast", ["pix"], ["pix_f"], to=TensorProto.FLOAT)], "pre",
                          [helper.make_tensor_value_info("pix", TensorProto.UINT8, ["N", 4])],
                          [helper.make_tensor_value_info("pix_f", TensorProto.FLOAT, ["N", 4])])
    model(root, "pre", "max_batch_size: 8\n", helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    serve_util.export_mlp(RINGSIDE, root, "mlp", 'name: "mlp"\nmax_batch_size: 8\n')
    steps = ('ensemble_scheduling { step [ { model_name: "pre" model_version: -1 input_map { key: "pix" value: "raw" } '
             'output_map { key: "pix_f" value: "feat" } }, { model_name: "mlp" model_version: -1 '
             'input_map { key: "input" value: "%s" } output_map { key: "logits" value: "scores" } } ] }\n')
    io = ('input [ { name: "raw" data_type: TYPE_UINT8 dims: [ 4 ] } ]\n'
          'output [ { name: "scores" data_type: TYPE_FP32 dims: [ 3 ] } ]\n')
    # a sequence model: its control inputs (START, END, READY, CORRID) passed through Identity, so the
    # answers show what the sequence batcher fed it
    ctl = [("INPUT", TensorProto.INT32), ("START", TensorProto.INT32), ("END", TensorProto.INT32),
           ("READY", TensorProto.INT32), ("CORRID", TensorProto.UINT64)]
    g = helper.make_graph([helper.make_node("Identity", [n], ["O" + n]) for n, _ in ctl], "seq",
                          [helper.make_tensor_value_info(n, t, ["N", 1]) for n, t in ctl],
                          [helper.make_tensor_value_info("O" + n, t, ["N", 1]) for n, t in ctl])
    ctrl = "".join(f'{{ name: "{n}" control [ {{ kind: CONTROL_SEQUENCE_{n} int32_false_true: [ 0, 1 ] }} ] }}, '
                   for n in ("START", "END", "READY"))
    model(root, "acc", "max_batch_size: 4\nsequence_batching { direct { } max_sequence_idle_microseconds: 60000000 "
          "control_input [ " + ctrl + '{ name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: '
          'TYPE_UINT64 } ] } ] }\ninput [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n',
          helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    for name, feat in (("pipeline", "feat"), ("pipeline_bad", "nosuch")):
        os.makedirs(os.path.join(root, name, "1"))
        serve_util.write_config(root, name,
                                f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 4\n' + io + steps % feat)


def run(root, ports):
    hc, gc = serve_util.triton_clients(ports)
    x = np.arange(2 * 6, dtype=np.float32).reshape(2, 2, 3) - 5
    for proto, mod, c in (("HTTP", th, hc), ("gRPC", tg, gc)):
        i = mod.InferInput("x", [2, 2, 3], "FP32")
        i.set_data_from_numpy(x)
        y = c.infer("reshape", [i]).as_numpy("y")
        check(y is not None and y.shape == (2, 2, 3) and np.array_equal(y, x), f"{proto}: reshape [2,3] <-> [6] round-trips")
    xi = np.ones((1, 6), np.float32)
    i = th.InferInput("x", [1, 6], "FP32").set_data_from_numpy(xi)
    check(np.array_equal(hc.infer("named", [i]).as_numpy("y"), xi), "default_model_filename: weights_v2.onnx served")
    check(hc.get_model_config("named").get("default_model_filename") == "weights_v2.onnx", "and its config says so")

    scores = np.array([[0.1, 0.7, 0.05, 0.9, 0.2, 0.3], [5, 4, 3, 2, 1, 0]], np.float32)
    labels = ["cat", "dog", "bird", "fish", "frog", "horse"]
    want = [[f"{s[j]:f}:{j}:{labels[j]}".encode() for j in np.argsort(-s, kind="stable")[:3]] for s in scores]
    i = th.InferInput("x", [2, 6], "FP32").set_data_from_numpy(scores)
    got = hc.infer("labelled", [i], outputs=[th.InferRequestedOutput("y", class_count=3)]).as_numpy("y")
    check(got is not None and got.tolist() == want, f"HTTP classification with labels: {got.tolist() if got is not None else None}")
    gi = tg.InferInput("x", [2, 6], "FP32")
    gi.set_data_from_numpy(scores)
    got = gc.infer("labelled", [gi], outputs=[tg.InferRequestedOutput("y", class_count=3)]).as_numpy("y")
    check(got is not None and got.tolist() == want, "gRPC classification with labels equal")

    xf = np.arange(8, dtype=np.float32).reshape(2, 4)
    i = th.InferInput("x", [2, 4], "FP32").set_data_from_numpy(xf)
    check(np.array_equal(hc.infer("fixed", [i]).as_numpy("y"), xf), "max_batch_size 0, dims [2, 4]: a [2, 4] request")
    try:
        hc.infer("fixed", [th.InferInput("x", [3, 4], "FP32").set_data_from_numpy(np.zeros((3, 4), np.float32))])
        check(False, "a [3, 4] request to dims [2, 4] refused")
    except InferenceServerException as e:
        check("unexpected shape for input 'x' for model 'fixed'. Expected [2,4], got [3,4]" in str(e), f"[3, 4] refused: {e}")

    raw = np.array([[0, 12, 255, 7], [3, 200, 1, 99]], np.uint8)
    sess = ort.InferenceSession(os.path.join(root, "mlp", "1", "model.onnx"))
    ref = sess.run(None, {sess.get_inputs()[0].name: raw.astype(np.float32)})[0]
    i = th.InferInput("raw", [2, 4], "UINT8").set_data_from_numpy(raw)
    y = hc.infer("pipeline", [i]).as_numpy("scores")
    gi = tg.InferInput("raw", [2, 4], "UINT8")
    gi.set_data_from_numpy(raw)
    yg = gc.infer("pipeline", [gi]).as_numpy("scores")
    check(y is not None and np.abs(y - ref).max() < 1e-5 and np.abs(yg - ref).max() < 1e-5,
          f"an ensemble (UINT8 -> Cast model -> MLP) equals ORT's MLP on the cast pixels over HTTP and gRPC: {y[0]}")
    want = [[f"{r[j]:f}:{j}".encode() for j in np.argsort(-r, kind="stable")[:2]] for r in ref]
    got = hc.infer("pipeline", [i], outputs=[th.InferRequestedOutput("scores", class_count=2)]).as_numpy("scores")
    check(got is not None and got.tolist() == want, f"classification of the ensemble's output: {got.tolist()}")
    check(hc.get_model_metadata("pipeline")["platform"] == "ensemble", "its metadata says platform ensemble")
    steps = hc.get_model_config("pipeline").get("ensemble_scheduling", {}).get("step", [])
    check([s["model_name"] for s in steps] == ["pre", "mlp"] and steps[1]["input_map"] == {"input": "feat"},
          f"its config echoes the steps it runs: {steps}")
    try:
        hc.infer("pipeline_bad", [i])
        check(False, "an ensemble step mapping a tensor nothing gives refused")
    except InferenceServerException as e:
        check("maps to 'nosuch', which no input or earlier step gives" in str(e), f"a step reading a missing tensor: {e}")

    sequences(hc, gc)

    index = {m["name"]: m for m in hc.get_model_repository_index()}
    for name, (_, word) in REFUSED.items():
        m = index.get(name, {})
        check(m.get("state") != "READY" and word in m.get("reason", ""), f"{name}: refused naming {word}: "
              f"{m.get('state')} {m.get('reason', '')[:150]}")
    cfg = hc.get_model_config("warm")
    ign = cfg.get("parameters", {}).get("ringside_ignored", {}).get("string_value", "")
    check(index.get("warm", {}).get("state") == "READY" and "model_warmup" in ign and "model_warmup" not in cfg,
          f"model_warmup: loaded, reported as not run, not echoed: {ign}")


def sequences(hc, gc):
    """Triton's sequence batcher (direct): the control inputs the model gets, request by request."""
    meta = hc.get_model_metadata("acc")
    sb = hc.get_model_config("acc").get("sequence_batching", {})
    check([i["name"] for i in meta["inputs"]] == ["INPUT"] and
          [c["name"] for c in sb.get("control_input", [])] == ["START", "END", "READY", "CORRID"],
          f"metadata lists the one input a client sends; the config its 4 controls: {meta['inputs']}")
    gmeta = gc.get_model_metadata("acc")
    check([i.name for i in gmeta.inputs] == ["INPUT"], f"so does gRPC's: {[i.name for i in gmeta.inputs]}")
    names = ["OINPUT", "OSTART", "OEND", "OREADY", "OCORRID"]
    for proto, mod, c, sid in (("HTTP", th, hc, 42), ("gRPC", tg, gc, 43)):
        seen = []
        for k, (start, end) in enumerate(((True, False), (False, False), (False, True))):
            i = mod.InferInput("INPUT", [1, 1], "INT32")
            i.set_data_from_numpy(np.array([[10 + k]], np.int32))
            r = c.infer("acc", [i], sequence_id=sid, sequence_start=start, sequence_end=end)
            seen.append([int(r.as_numpy(n)[0, 0]) for n in names])
        want = [[10, 1, 0, 1, sid], [11, 0, 0, 1, sid], [12, 0, 1, 1, sid]]
        check(seen == want, f"{proto}: a 3-request sequence feeds [INPUT, START, END, READY, CORRID] = {seen}")
        i = mod.InferInput("INPUT", [1, 1], "INT32")
        i.set_data_from_numpy(np.array([[1]], np.int32))
        for what, kw, needle in (
                ("a request after the sequence ended", {"sequence_id": sid},
                 f"inference request for sequence {sid} to model 'acc' must specify the START flag on the first "
                 "request of the sequence"),
                ("a request without a sequence id", {}, "must specify a non-zero or non-empty correlation ID")):
            try:
                c.infer("acc", [i], **kw)
                check(False, f"{proto}: {what} refused")
            except InferenceServerException as e:
                check(needle in str(e), f"{proto}: {what} refused: {e}")
    i = th.InferInput("INPUT", [1, 1], "INT32").set_data_from_numpy(np.array([[1]], np.int32))
    s = th.InferInput("START", [1, 1], "INT32").set_data_from_numpy(np.array([[1]], np.int32))
    try:
        hc.infer("acc", [i, s], sequence_id=7, sequence_start=True)
        check(False, "a client sending a control input refused")
    except InferenceServerException as e:
        check("is a sequence control input" in str(e), f"a client sending START itself refused: {e}")


def main():
    serve_util.main_on_repo(RINGSIDE, make_repo, lambda root, ports, _: run(root, ports))


if __name__ == "__main__":
    main()
