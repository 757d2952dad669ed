#!/usr/bin/env python3
"""The model configuration is the same over HTTP and gRPC, field by field: for every model of the config
test's repository (reshape, labels, max_batch_size 0, an ensemble's steps, a sequence batcher's controls,
dynamic batching, a default_model_filename, ignored settings, optional inputs), tritonclient's
get_model_config over HTTP (JSON) is parsed into Triton's own ModelConfig message (tritonclient's
model_config_pb2, the full schema: a field ringside writes that Triton has not fails the parse) and
compared with the ModelConfig gRPC answers, field by field; and the facts a Triton user reads are there
on gRPC too (reshape, label_filename, ensemble steps, control inputs, optional).

usage: test_triton_config_parity.py build/repl/ringside   (exits 77 without tritonclient or onnx)
"""

import serve_util  # beside this file

with serve_util.needs("tritonclient[all] and protobuf"):
    import tritonclient.grpc as tg
    import tritonclient.http as th
    from google.protobuf import json_format
    from tritonclient.grpc import model_config_pb2

import test_triton_config as tc  # noqa: E402  (its repository; it runs nothing on import)
import test_triton_optional as to  # noqa: E402

check = serve_util.check


def differences(a, b, path=""):
    """The field paths where two messages differ (every set field of either)."""
    out = []
    names = {f.name for f, _ in a.ListFields()} | {f.name for f, _ in b.ListFields()}
    for n in sorted(names):
        va, vb = getattr(a, n), getattr(b, n)
        if hasattr(va, "ListFields"):  # a message field (not repeated): compared inside
            out += differences(va, vb, path + n + ".")
        elif va != vb:
            out.append(f"{path}{n}: HTTP {va!r} gRPC {vb!r}")
    return out


def run(ports):
    hc, gc = serve_util.triton_clients(ports)
    ready = [m["name"] for m in hc.get_model_repository_index() if m.get("state") == "READY"]
    check(len(ready) >= 9, f"{len(ready)} models loaded: {sorted(ready)}")
    grpc_cfg = {}
    for name in sorted(ready):
        h = model_config_pb2.ModelConfig()
        try:
            json_format.ParseDict(hc.get_model_config(name), h)
        except json_format.ParseError as e:
            check(False, f"{name}: the HTTP config is a Triton ModelConfig: {e}")
            continue
        g = gc.get_model_config(name).config
        grpc_cfg[name] = g
        diff = differences(h, g)
        check(not diff and len(h.ListFields()) >= 5, f"{name}: HTTP and gRPC configs agree on all "
              f"{len(h.ListFields())} fields{': ' + '; '.join(diff) if diff else ''}")
    g = grpc_cfg.get("reshape")
    check(g is not None and list(g.input[0].reshape.shape) == [6] and list(g.output[0].reshape.shape) == [6],
          "gRPC states reshape")
    g = grpc_cfg.get("labelled")
    check(g is not None and g.output[0].label_filename == "labels.txt", "gRPC states label_filename")
    g = grpc_cfg.get("pipeline")
    check(g is not None and [s.model_name for s in g.ensemble_scheduling.step] == ["pre", "mlp"] and
          dict(g.ensemble_scheduling.step[1].input_map) == {"input": "feat"}, "gRPC states the ensemble's steps")
    g = grpc_cfg.get("acc")
    sb = g.sequence_batching if g is not None else None
    check(sb is not None and g.WhichOneof("scheduling_choice") == "sequence_batching" and sb.HasField("direct") and
          [c.name for c in sb.control_input] == ["START", "END", "READY", "CORRID"] and
          list(sb.control_input[0].control[0].int32_false_true) == [0, 1] and
          sb.max_sequence_idle_microseconds == 60000000 and [i.name for i in g.input] == ["INPUT"],
          "gRPC states the sequence batcher: direct, its 4 controls with their values, the idle time")
    g = grpc_cfg.get("optional")
    check(g is not None and [i.optional for i in g.input] == [False, True, True], "gRPC states optional inputs")
    g = grpc_cfg.get("warm")
    check(g is not None and "model_warmup" in g.parameters["ringside_ignored"].string_value,
          "gRPC states what was ignored (model_warmup)")


def main():
    def make_repo(root):
        tc.make_repo(root)
        to.make_model(root)
    serve_util.main_on_repo(tc.RINGSIDE, make_repo, lambda root, ports, _: run(ports))


if __name__ == "__main__":
    main()
