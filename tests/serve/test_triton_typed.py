#!/usr/bin/env python3
"""Every Triton data type, many inputs and outputs, through Triton's own clients: an Identity model of
11 inputs and 11 outputs (BOOL, INT8, INT16, INT32, INT64, UINT8, FP16, BF16, FP32, FP64, BYTES) and a
Cast model (INT64 -> FP32, FP32 -> INT32, FP64 -> FP16, BOOL -> FP32, UINT8 -> FP64, FP32 -> BF16, FP16 -> INT16), written by
typed_models.py, served by `ringside serve --repo` and checked against NumPy (and ONNX Runtime for the
Cast model) over HTTP with JSON and binary tensors and over gRPC with raw and typed contents; the same
model with max_batch_size 0 and the batch in its dims; Triton's error words for what does not fit;
non-finite floats in JSON replies as Triton writes them (NaN, Infinity), equal to the binary reply and
to ONNX Runtime for an MLP fed 3e38; the classification extension over both protocols.

usage: test_triton_typed.py build/repl/ringside   (exits 77, skipped, without tritonclient or onnx)
"""
import os
import subprocess
import sys

import serve_util  # beside this file

with serve_util.needs("numpy, onnx, onnxruntime and tritonclient[all] (scripts/setup.sh installs them)"):
    import grpc
    import ml_dtypes
    import numpy as np
    import onnx
    import onnxruntime as ort
    import tritonclient.grpc as tg
    import tritonclient.http as th
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    from tritonclient.utils import InferenceServerException

import typed_models  # noqa: E402

RINGSIDE = sys.argv[1]
check = serve_util.check
rng = np.random.default_rng(7)


def same(a, b):
    """Equal values, shapes and dtypes (NaN equal to NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == np.object_:
        def raw(v):  # JSON gives BYTES back as str (as from Triton), binary as bytes
            return v.encode() if isinstance(v, str) else bytes(v)
        return all(raw(x) == raw(y) for x, y in zip(a.ravel(), b.ravel()))
    if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16:
        return np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True)
    return np.array_equal(a, b)


def sample(dt, B):
    shape = (B,) + tuple(typed_models.per_sample(dt))
    if dt == "BYTES":
        words = [b"", b"a", b"triton", "\u00e9t\u00e9".encode(), b"x" * 70]
        return np.array([words[i] for i in rng.integers(0, len(words), size=shape).ravel()], dtype=np.object_).reshape(shape)
    if dt == "BOOL":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    npdt = typed_models.TYPES[dt][1]
    if dt in ("FP16", "BF16", "FP32", "FP64"):
        return (rng.standard_normal(shape) * 100).astype(npdt)
    info = np.iinfo(npdt)
    return rng.integers(info.min, info.max, size=shape, dtype=npdt, endpoint=True)


def config(name, io, mbs, full_dims=False):
    def dims(d):
        return "[ " + ", ".join(str(x) for x in (([-1] if full_dims else []) + d)) + " ]"
    ins = ", ".join(f'{{ name: "{n}" data_type: TYPE_{"STRING" if t == "BYTES" else t} dims: {dims(d)} }}'
                    for n, t, d in io[0])
    outs = ", ".join(f'{{ name: "{n}" data_type: TYPE_{"STRING" if t == "BYTES" else t} dims: {dims(d)} }}'
                     for n, t, d in io[1])
    return f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: {mbs}\ninput [ {ins} ]\noutput [ {outs} ]\n'


IDENT_IO = ([(f"in_{t.lower()}", t, typed_models.per_sample(t)) for t in typed_models.TYPES],
            [(f"out_{t.lower()}", t, typed_models.per_sample(t)) for t in typed_models.TYPES])


def make_repo(root):
    paths = typed_models.write(root)
    onnx.save(typed_models.cast_model(typed_models.CASTS[:5]), os.path.join(root, "cast5.onnx"))
    paths["cast5"] = os.path.join(root, "cast5.onnx")
    for name, cfg in (("ident", config("ident", IDENT_IO, 8)), ("ident_nb", config("ident_nb", IDENT_IO, 0, True)),
                      ("cast", 'name: "cast"\nmax_batch_size: 4\n'), ("cast5", 'max_batch_size: 4\n')):
        os.makedirs(os.path.join(root, name, "1"))
        with open(paths[name if name.startswith("cast") else "ident"], "rb") as f, \
                open(os.path.join(root, name, "1", "model.onnx"), "wb") as g:
            g.write(f.read())
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(cfg)
    os.makedirs(os.path.join(root, "mlp", "1"))
    os.makedirs(os.path.join(root, "tok", "1"))
    subprocess.run([RINGSIDE, "--no-db", "-c", f"model m = mlp 4-16-3 seed=3; export m {root}/mlp/1/model.onnx; "
                    f"model g = gpt layers=1 heads=2 dim=16 ctx=8 seed=2; export g {root}/tok/1/model.onnx"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(root, "tok", "config.pbtxt"), "w") as f:
        f.write('name: "tok"\nmax_batch_size: 4\n')
    with open(os.path.join(root, "mlp", "config.pbtxt"), "w") as f:
        f.write('name: "mlp"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n')


def http_infer(c, model, arrays, json_in, json_out, outputs=None):
    ins = []
    for name, a in arrays.items():
        dt = typed_models_dt(a)
        i = th.InferInput(name, list(a.shape), dt)
        i.set_data_from_numpy(a, binary_data=not (json_in and dt not in ("FP16", "BF16")))
        ins.append(i)
    outs = [th.InferRequestedOutput(n, binary_data=not (json_out and t not in ("FP16", "BF16")))
            for n, t in (outputs or [])]
    return c.infer(model, ins, outputs=outs or None)


def typed_models_dt(a):
    if a.dtype == np.object_:
        return "BYTES"
    if a.dtype == ml_dtypes.bfloat16:
        return "BF16"
    return {np.dtype(v[1]): k for k, v in typed_models.TYPES.items() if v[1] not in (None, np.object_)}[a.dtype]


def grpc_typed(stub, model, arrays, raw_types=("FP16", "BF16")):
    """A ModelInferRequest with each input in its typed contents field (FP16/BF16 raw, as Triton has no
    typed field for them: then every input goes raw)."""
    q = service_pb2.ModelInferRequest(model_name=model)
    field = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
             "INT64": "int64_contents", "UINT8": "uint_contents", "FP32": "fp32_contents", "FP64": "fp64_contents",
             "BYTES": "bytes_contents"}
    for name, a in arrays.items():
        dt = typed_models_dt(a)
        t = q.inputs.add(name=name, datatype=dt, shape=list(a.shape))
        getattr(t.contents, field[dt]).extend([bytes(v) for v in a.ravel()] if dt == "BYTES" else a.ravel().tolist())
    return stub.ModelInfer(q)


def main():
    serve_util.main_on_repo(RINGSIDE, make_repo, lambda root, ports, _: run_checks(root, ports))


def run_checks(root, ports):
    hc, gc = serve_util.triton_clients(ports)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{ports['grpc']}"))
    B = 3
    arrays = {f"in_{t.lower()}": sample(t, B) for t in typed_models.TYPES}
    outs = [(f"out_{t.lower()}", t) for t in typed_models.TYPES]

    meta = hc.get_model_metadata("ident")
    check([i["datatype"] for i in meta["inputs"]] == list(typed_models.TYPES), f"metadata lists 11 typed inputs: "
          f"{[i['datatype'] for i in meta['inputs']]}")

    # every type through Identity, each protocol and form
    for form, res in (("HTTP binary", lambda: http_infer(hc, "ident", arrays, False, False, outs)),
                      ("HTTP JSON", lambda: http_infer(hc, "ident", arrays, True, True, outs)),
                      ("gRPC raw", lambda: gc.infer("ident", [tg.InferInput(n, list(a.shape), typed_models_dt(a))
                                                              .set_data_from_numpy(a) for n, a in arrays.items()]))):
        r = res()
        bad = [t for t in typed_models.TYPES if not same(r.as_numpy(f"out_{t.lower()}"), arrays[f"in_{t.lower()}"])]
        check(not bad, f"{form}: 11 types round-trip equal to NumPy (differ: {bad})")
    typed = {k: v for k, v in arrays.items() if typed_models_dt(v) not in ("FP16", "BF16")}
    try:
        grpc_typed(stub, "ident", typed)
        check(False, "gRPC typed contents without FP16/BF16 refused")
    except grpc.RpcError as e:
        check("expected 11 inputs but got 9 inputs" in e.details() and "missing required input(s) ['in_fp16','in_bf16']"
              in e.details(), f"a request missing two inputs: {e.details()}")

    # the Cast models: NumPy's astype is the reference, ONNX Runtime agrees with it
    cast_in = {"ids": rng.integers(-2**40, 2**40, size=(2, 4)).astype(np.int64),
               "x32": (rng.standard_normal((2, 4)) * 1000).astype(np.float32),
               "x64": rng.standard_normal((2, 4)) * 100, "mask": rng.integers(0, 2, size=(2, 4)).astype(np.bool_),
               "pix": rng.integers(0, 256, size=(2, 4)).astype(np.uint8),
               "xb": (rng.standard_normal((2, 4)) * 1000).astype(np.float32),
               "h": (rng.standard_normal((2, 4)) * 1000).astype(np.float16)}
    want = {b: cast_in[a].astype(typed_models.TYPES[tb][1]) for a, _, b, tb in typed_models.CASTS}
    sess = ort.InferenceSession(os.path.join(root, "cast.onnx"))
    names = [o.name for o in sess.get_outputs() if o.name != "xb_b"]  # ORT's Python API has no bfloat16 arrays
    ort_out = dict(zip(names, sess.run(names, cast_in)))
    check(all(same(ort_out[k], want[k]) for k in names), "ONNX Runtime's Cast equals NumPy's astype (BF16 aside)")
    outs_c = [(b, tb) for _, _, b, tb in typed_models.CASTS]
    for json_io in (False, True):
        r = http_infer(hc, "cast", cast_in, json_io, json_io, outs_c)
        bad = [k for k in want if not same(r.as_numpy(k), want[k])]
        check(not bad, f"HTTP {'JSON' if json_io else 'binary'} through 7 Casts (BF16, FP16 both ways) equal ORT "
              f"(differ: {bad})")
    r = gc.infer("cast", [tg.InferInput(n, list(a.shape), typed_models_dt(a)).set_data_from_numpy(a)
                          for n, a in cast_in.items()])
    check(all(same(r.as_numpy(k), v) for k, v in want.items()), "gRPC raw through 7 Casts equal ORT")
    # typed contents: the five inputs that have a typed field (cast5), and what does not fit them
    five = {k: cast_in[k] for k in ("ids", "x32", "x64", "mask", "pix")}
    r = tg.InferResult(grpc_typed(stub, "cast5", five))
    bad = [b for a, _, b, _ in typed_models.CASTS[:5] if not same(r.as_numpy(b), want[b])]
    check(not bad, f"gRPC typed contents (int64, fp32, fp64, bool, uint) through Cast equal ORT (differ: {bad})")
    q = service_pb2.ModelInferRequest(model_name="cast5")
    for n, v in five.items():
        t = q.inputs.add(name=n, datatype=typed_models_dt(v), shape=list(v.shape))
        field = {"INT64": "int64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents", "BOOL": "bool_contents",
                 "UINT8": "uint_contents"}[typed_models_dt(v)]
        getattr(t.contents, field).extend(v.ravel().tolist())
    q.inputs[4].contents.uint_contents[3] = 300
    expect_error(lambda: stub.ModelInfer(q), "input 'pix': value 3 of contents.uint_contents does not fit UINT8",
                 "gRPC uint_contents 300 for UINT8 refused, not wrapped")
    expect_error(lambda: grpc_typed(stub, "cast", {**five, "xb": cast_in["xb"], "h": cast_in["h"].astype(np.float32)}),
                 "data-type is 'FP32', but model 'cast' expects 'FP16'", "FP16 input sent as FP32 contents")
    i = th.InferInput("pix", [2, 4], "UINT8")
    i._data = [1, 2, 300, 4, 5, 6, 7, 8]
    i._parameters.pop("binary_data_size", None)
    rest = [th.InferInput(n, list(v.shape), typed_models_dt(v)).set_data_from_numpy(v)
            for n, v in cast_in.items() if n != "pix"]
    expect_error(lambda: hc.infer("cast", rest + [i]), "value 2 ('300') is not a UINT8 in its range",
                 "JSON 300 for UINT8 refused, not wrapped")

    # max_batch_size 0: the dims hold the batch
    r = http_infer(hc, "ident_nb", arrays, False, False, outs)
    check(all(same(r.as_numpy(f"out_{t.lower()}"), arrays[f"in_{t.lower()}"]) for t in typed_models.TYPES),
          "max_batch_size 0 with dims [-1, 3]: a [3, 3] request round-trips")
    cfg = hc.get_model_metadata("ident_nb")
    check(cfg["inputs"][0]["shape"] == [-1, 3], f"its metadata shape is the config's dims: {cfg['inputs'][0]['shape']}")

    errors(hc, gc, arrays)
    token_ids(hc, gc, root)
    nonfinite(hc, gc, root)
    classification(hc, stub, arrays)


def expect_error(fn, needle, what):
    try:
        fn()
        check(False, what + ": accepted")
    except (InferenceServerException, grpc.RpcError) as e:
        text = e.details() if isinstance(e, grpc.RpcError) else str(e)
        check(needle in text, f"{what}: {text}")


def errors(hc, gc, arrays):
    a = dict(arrays)
    a["in_int32"] = a["in_int32"].astype(np.float32)
    expect_error(lambda: http_infer(hc, "ident", a, False, False),
                 "inference input 'in_int32' data-type is 'FP32', but model 'ident' expects 'INT32'", "wrong datatype")
    a = dict(arrays)
    a["nosuch"] = a.pop("in_int8")
    expect_error(lambda: http_infer(hc, "ident", a, False, False), "unexpected inference input 'nosuch' for model 'ident'",
                 "unknown input name")
    a = dict(arrays)
    a["in_fp32"] = a["in_fp32"][:2]
    expect_error(lambda: http_infer(hc, "ident", a, False, False),
                 "input 'in_fp32' batch size does not match other inputs for 'ident'", "inputs of different batches")
    i = th.InferInput("in_fp16", [3, 3], "FP16")
    i._data = [1.0] * 9
    i._parameters.pop("binary_data_size", None)
    others = [th.InferInput(n, list(v.shape), typed_models_dt(v)).set_data_from_numpy(v)
              for n, v in arrays.items() if n != "in_fp16"]
    expect_error(lambda: hc.infer("ident", others + [i]),
                 "receiving FP16 data via JSON is not supported. Please use the binary data format for input in_fp16",
                 "FP16 in JSON refused as Triton does")
    expect_error(lambda: http_infer(hc, "ident", arrays, False, True, [("out_bf16", "FP32")]),
                 "sending BF16 data via JSON is not supported", "BF16 asked for in JSON refused as Triton does")
    # BYTES: 9 elements declared, 8 serialized
    ins = [tg.InferInput(n, list(v.shape), typed_models_dt(v)).set_data_from_numpy(v) for n, v in arrays.items()]
    short = tg.InferInput("in_bytes", [3, 2], "BYTES")
    short.set_data_from_numpy(np.array([[b"a", b"b"], [b"c", b"d"], [b"e", b"f"]], dtype=np.object_))
    short._raw_content = short._raw_content[:-5]
    ins = [t if t.name() != "in_bytes" else short for t in ins]
    expect_error(lambda: gc.infer("ident", ins), "expected 6 string elements for inference input 'in_bytes' for model "
                 "'ident', got 5", "a BYTES tensor one element short")
    expect_error(lambda: http_infer(hc, "ident", {k: np.repeat(v, 3, axis=0) for k, v in arrays.items()}, False, False),
                 "inference request batch-size must be <= 8 for 'ident'", "a batch of 9 for max_batch_size 8")


def token_ids(hc, gc, root):
    """A GPT exported to ONNX takes INT64 token ids (as torch exports them); the engine reads int32 ids, so
    the backend narrows them at the boundary: answers equal ORT's, ids outside the vocabulary refused."""
    x = np.random.default_rng(1).integers(0, 50, size=(2, 8)).astype(np.int64)
    sess = ort.InferenceSession(os.path.join(root, "tok", "1", "model.onnx"))
    ref = sess.run(None, {"tokens": x})[0]
    meta = hc.get_model_metadata("tok")
    check(meta["inputs"][0]["datatype"] == "INT64", f"a token model's input is INT64: {meta['inputs'][0]}")
    y = hc.infer("tok", [th.InferInput("tokens", [2, 8], "INT64").set_data_from_numpy(x)]).as_numpy("logits")
    gi = tg.InferInput("tokens", [2, 8], "INT64")
    gi.set_data_from_numpy(x)
    yg = gc.infer("tok", [gi]).as_numpy("logits")
    check(y.shape == ref.shape and np.abs(y - ref).max() < 1e-4 and np.abs(yg - ref).max() < 1e-4,
          f"INT64 token ids through the engine equal ORT over HTTP and gRPC (max diff "
          f"{max(np.abs(y - ref).max(), np.abs(yg - ref).max()):.2e})")
    x[0, 0] = 60
    expect_error(lambda: hc.infer("tok", [th.InferInput("tokens", [2, 8], "INT64").set_data_from_numpy(x)]),
                 "[400] token 60 at position 0 of the batch is outside the model's vocabulary of 50", "an id past the vocabulary")
    x[0, 0] = 2**40
    expect_error(lambda: hc.infer("tok", [th.InferInput("tokens", [2, 8], "INT64").set_data_from_numpy(x)]),
                 "does not fit the model's int32 ids", "an id past int32")


def nonfinite(hc, gc, root):
    """What the issue found: 3e38 through an MLP answered [0.0, ...] in JSON where binary and ORT gave inf.
    Fed 3e38 and an infinity, any weights overflow: the answer holds inf or NaN whatever the seed."""
    x = np.array([[3e38, np.inf, -3e38, 1.0]], np.float32)
    sess = ort.InferenceSession(os.path.join(root, "mlp", "1", "model.onnx"))
    ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    name = sess.get_outputs()[0].name
    outs = {}
    for form, binary in (("JSON", False), ("binary", True)):
        i = th.InferInput(sess.get_inputs()[0].name, [1, 4], "FP32").set_data_from_numpy(x, binary_data=binary)
        outs[form] = hc.infer("mlp", [i], outputs=[th.InferRequestedOutput(name, binary_data=binary)]).as_numpy(name)
    check(not np.isfinite(ref).all(), f"ORT's answer holds non-finite values: {ref.ravel()}")
    check(same(outs["JSON"], ref) and same(outs["binary"], ref),
          f"JSON {outs['JSON'].ravel()} and binary {outs['binary'].ravel()} replies equal ORT {ref.ravel()}")
    nan = np.array([[np.nan, np.inf, -np.inf]] * 3, np.float64)
    a = {f"in_{t.lower()}": sample(t, 3) for t in typed_models.TYPES}
    a["in_fp64"] = nan
    a["in_fp32"] = nan.astype(np.float32)
    r = http_infer(hc, "ident", a, True, True, [("out_fp64", "FP64"), ("out_fp32", "FP32")])
    check(same(r.as_numpy("out_fp64"), nan) and same(r.as_numpy("out_fp32"), a["in_fp32"]),
          f"FP32 and FP64 NaN, Infinity, -Infinity in and out as JSON: {r.as_numpy('out_fp64')[0]}")


def classification(hc, stub, arrays):
    y = arrays["in_fp32"]
    want = [[f"{y[b][j]:f}:{j}".encode() for j in np.argsort(-y[b], kind="stable")[:2]] for b in range(3)]
    i = [th.InferInput(n, list(v.shape), typed_models_dt(v)).set_data_from_numpy(v) for n, v in arrays.items()]
    r = hc.infer("ident", i, outputs=[th.InferRequestedOutput("out_fp32", class_count=2)])
    got = r.as_numpy("out_fp32")
    check(got is not None and got.shape == (3, 2) and got.tolist() == want,
          f"HTTP classification top-2 'value:index' as Triton writes it: {got.tolist() if got is not None else None}")
    q = service_pb2.ModelInferRequest(model_name="ident")
    for n, v in arrays.items():
        q.inputs.add(name=n, datatype=typed_models_dt(v), shape=list(v.shape))
        q.raw_input_contents.append(tg.InferInput(n, list(v.shape), typed_models_dt(v)).set_data_from_numpy(v)
                                    ._get_content())
    o = q.outputs.add(name="out_fp32")
    o.parameters["classification"].int64_param = 2
    r = tg.InferResult(stub.ModelInfer(q))
    got = r.as_numpy("out_fp32")
    check(got is not None and got.tolist() == want, "gRPC classification top-2 equal")


if __name__ == "__main__":
    main()
