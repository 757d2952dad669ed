#!/usr/bin/env python3
"""Triton's own Python client (tritonclient[http]) against `ringside serve --repo`: health, metadata,
config, infer (JSON and binary tensors) checked against ONNX Runtime on the same files, dynamic
batching seen in the statistics, 64 concurrent clients, load/unload, metrics, bad requests answered
with Triton's {"error": ...}, and SIGTERM draining the requests in flight.

usage: test_triton.py build/repl/ringside   (exits 77, skipped, when tritonclient or onnxruntime is missing)
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import serve_util  # beside this file

with serve_util.needs("numpy, onnxruntime and tritonclient[http] (scripts/setup.sh installs them)"):
    import numpy as np
    import onnxruntime as ort
    import tritonclient.http as th
    from tritonclient.utils import InferenceServerException


RINGSIDE = sys.argv[1]
check = serve_util.check


def make_repo(root):
    mlp, cnn = os.path.join(root, "mlp"), os.path.join(root, "cnn")
    os.makedirs(os.path.join(mlp, "1"))
    os.makedirs(os.path.join(cnn, "1"))
    os.makedirs(os.path.join(root, "broken", "1"))
    subprocess.run([RINGSIDE, "--no-db", "-c",
                    f"model m = mlp 4-16-3 seed=3; export m {mlp}/1/model.onnx; "
                    f"model c = seq in=1x8x8 conv(4,3,pad=1) relu maxpool(2) flatten linear(5) seed=4; "
                    f"export c {cnn}/1/model.onnx"], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(mlp, "config.pbtxt"), "w") as f:
        f.write('name: "mlp"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 32\n'
                'input [ { name: "input" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                'output [ { name: "logits" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
                'instance_group [ { count: 2 kind: KIND_CPU } ]\n'
                'dynamic_batching { preferred_batch_size: [ 16 ] max_queue_delay_microseconds: 200000 }\n')
    slow = os.path.join(root, "slow")
    os.makedirs(os.path.join(slow, "1"))
    with open(f"{mlp}/1/model.onnx", "rb") as f, open(f"{slow}/1/model.onnx", "wb") as g:
        g.write(f.read())
    # Requests wait up to 5 s for a batch of 64 here: SIGTERM comes while they are queued.
    with open(os.path.join(slow, "config.pbtxt"), "w") as f:
        f.write('max_batch_size: 64\ndynamic_batching { max_queue_delay_microseconds: 5000000 }\n')
    with open(os.path.join(cnn, "config.pbtxt"), "w") as f:
        f.write('name: "cnn"\nmax_batch_size: 8\n')
    with open(os.path.join(root, "broken", "config.pbtxt"), "w") as f:
        f.write('name: "broken"\nmax_batch_size: 8\ninstance_grup [ { count: 1 } ]\n')
    open(os.path.join(root, "broken", "1", "model.onnx"), "wb").close()
    return ort.InferenceSession(f"{mlp}/1/model.onnx"), ort.InferenceSession(f"{cnn}/1/model.onnx")


def start(repo):
    p, ports, banner = serve_util.start(RINGSIDE, ["--model-repository", repo, "--model-control-mode=explicit", "--load-model=*",
                                                   "--http-port", "0", "--grpc-port", "0",
                                                   "--metrics-port", "0"])
    return p, ports["http"], ports["metrics"], banner


def raw(port, method, path, body=b"", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def infer(client, model, x, binary=True):
    inp = th.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    out_name = "logits"
    res = client.infer(model, [inp], outputs=[th.InferRequestedOutput(out_name, binary_data=binary)])
    return res.as_numpy(out_name)


def main():
    tmp = tempfile.TemporaryDirectory()
    repo = os.path.join(tmp.name, "repo")
    ref_mlp, ref_cnn = make_repo(repo)
    p, port, mport, banner = start(repo)
    check("UNAVAILABLE" in banner and "instance_grup" in banner, "a broken config is listed UNAVAILABLE with its reason")
    url = f"127.0.0.1:{port}"
    c = th.InferenceServerClient(url)
    try:
        check(c.is_server_live() and c.is_server_ready(), "server live and ready")
        md = c.get_server_metadata()
        check(md["name"] == "ringside" and "binary_tensor_data" in md["extensions"], "server metadata")
        mm = c.get_model_metadata("mlp")
        check(mm["inputs"][0] == {"name": "input", "datatype": "FP32", "shape": [-1, 4]}
              and mm["outputs"][0]["shape"] == [-1, 3] and mm["versions"] == ["1"], "model metadata")
        cfg = c.get_model_config("mlp")
        check(cfg["max_batch_size"] == 32 and cfg["instance_group"][0]["count"] == 2
              and cfg["dynamic_batching"]["preferred_batch_size"] == [16], "model config")
        cc = c.get_model_config("cnn")
        check(cc["input"][0]["dims"] == [1, 8, 8] and cc["output"][0]["dims"] == [5], "config completed from the model file")
        check(c.is_model_ready("mlp") and not c.is_model_ready("broken"), "model readiness")

        rng = np.random.default_rng(1)
        x = rng.standard_normal((3, 4)).astype(np.float32)
        want = ref_mlp.run(None, {"input": x})[0]
        for binary in (True, False):
            got = infer(c, "mlp", x, binary)
            check(got.shape == (3, 3) and np.allclose(got, want, rtol=1e-4, atol=1e-5),
                  f"infer mlp ({'binary' if binary else 'JSON'}) equals ONNX Runtime (max diff {np.abs(got - want).max():.2e})")
        xc = rng.standard_normal((5, 1, 8, 8)).astype(np.float32)
        got = infer(c, "cnn", xc)
        wc = ref_cnn.run(None, {"input": xc})[0]
        check(np.allclose(got, wc, rtol=1e-4, atol=1e-5), f"infer cnn equals ONNX Runtime (max diff {np.abs(got - wc).max():.2e})")

        # Dynamic batching: 16 requests released together run as fewer batches; each answer is its own.
        before = c.get_inference_statistics("mlp")["model_stats"][0]
        xs = [rng.standard_normal((1, 4)).astype(np.float32) for _ in range(16)]
        outs = [None] * 16
        gate = threading.Barrier(16)

        def one(i):
            cl = th.InferenceServerClient(url)
            gate.wait()
            outs[i] = infer(cl, "mlp", xs[i])
            cl.close()

        ts = [threading.Thread(target=one, args=(i,)) for i in range(16)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        after = c.get_inference_statistics("mlp")["model_stats"][0]
        n_inf = int(after["inference_count"]) - int(before["inference_count"])
        n_exec = int(after["execution_count"]) - int(before["execution_count"])
        check(n_inf == 16 and n_exec < n_inf, f"16 concurrent requests ran as {n_exec} batches")
        check(all(np.allclose(outs[i], ref_mlp.run(None, {"input": xs[i]})[0], rtol=1e-4, atol=1e-5) for i in range(16)),
              "every batched answer equals its input run alone")
        check(any(int(b["batch_size"]) > 1 for b in after["batch_stats"]), "batch_stats shows batches larger than 1")

        # 64 concurrent clients, 4 requests each, every output checked.
        bad = []

        def client_loop(k):
            cl = th.InferenceServerClient(url)
            r = np.random.default_rng(100 + k)
            for _ in range(4):
                b = int(r.integers(1, 4))
                xi = r.standard_normal((b, 4)).astype(np.float32)
                try:
                    yi = infer(cl, "mlp", xi, binary=bool(k % 2))
                    if not np.allclose(yi, ref_mlp.run(None, {"input": xi})[0], rtol=1e-4, atol=1e-5):
                        bad.append(k)
                except Exception as e:  # noqa: BLE001
                    bad.append(f"{k}: {e}")
            cl.close()

        ts = [threading.Thread(target=client_loop, args=(k,)) for k in range(64)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        check(not bad, f"64 concurrent clients, 256 requests, every output right {bad[:3]}")

        st = c.get_inference_statistics("mlp")["model_stats"][0]
        s = st["inference_stats"]
        check(int(s["success"]["count"]) >= 1 + 1 + 16 + 256 and int(s["compute_infer"]["ns"]) > 0, "statistics counts")
        status, met = raw(mport, "GET", "/metrics")
        met = met.decode()
        m = re.search(r'nv_inference_count\{model="mlp",version="1"\} (\d+)', met)
        check(status == 200 and m and int(m.group(1)) == int(st["inference_count"]), "metrics nv_inference_count matches statistics")
        check('nv_inference_exec_count{model="mlp",version="1"}' in met and "nv_inference_queue_duration_us" in met,
              "metrics names")

        # Model control.
        c.unload_model("cnn")
        check(not c.is_model_ready("cnn"), "unload")
        idx = {e["name"]: e for e in c.get_model_repository_index()}
        check(idx["cnn"]["state"] == "UNAVAILABLE" and idx["mlp"]["state"] == "READY", "repository index states")
        try:
            infer(c, "cnn", xc)
            check(False, "infer on an unloaded model fails")
        except InferenceServerException as e:
            check("unknown model" in str(e), f"infer on an unloaded model fails: {e}")
        c.load_model("cnn")
        check(c.is_model_ready("cnn") and np.allclose(infer(c, "cnn", xc), wc, rtol=1e-4, atol=1e-5), "load again")

        # Bad requests: Triton's error JSON and codes.
        def err(fn, needle, what):
            try:
                fn()
                check(False, what)
            except InferenceServerException as e:
                check(needle in str(e), f"{what}: {e}")

        err(lambda: c.get_model_metadata("nosuch"), "unknown model", "unknown model")
        err(lambda: infer(c, "mlp", np.zeros((2, 5), np.float32)), "unexpected shape", "wrong shape")
        err(lambda: infer(c, "mlp", np.zeros((33, 4), np.float32)), "batch-size must be <= 32", "batch above max_batch_size")

        def wrong_dtype():
            inp = th.InferInput("input", [1, 4], "FP64")
            inp.set_data_from_numpy(np.zeros((1, 4), np.float64))
            c.infer("mlp", [inp])

        err(wrong_dtype, "data-type", "wrong datatype")
        err(lambda: c.load_model("../x"), "not a model name", "load of a traversal name")
        status, body = raw(port, "POST", "/v2/models/mlp/infer", b"{not json")
        check(status == 400 and "error" in json.loads(body), f"malformed JSON -> 400 {body[:80]!r}")
        status, body = raw(port, "GET", "/v2/models/../config")
        check(status == 400 and "not a model name" in json.loads(body)["error"], f"traversal path -> {status} {body[:60]!r}")
        status, body = raw(port, "POST", "/v2/repository/models/..%2F..%2Fetc/load")
        check(status == 400 and "not a model name" in json.loads(body)["error"], f"encoded traversal load -> {status}")
        status, body = raw(port, "GET", "/v2/models/.hidden/config")
        check(status == 400 and "not a model name" in json.loads(body)["error"], "dot name refused")
        # A body announced past the 64 MB cap is refused before it is read.
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 70000000\r\n\r\n{}")
        resp = b""
        while b"}" not in resp:
            chunk = s.recv(4096)
            if not chunk:
                break
            resp += chunk
        s.close()
        check(resp.startswith(b"HTTP/1.1 400") and b"exceeds" in resp, "oversize body -> 400 with an error")
        check(c.is_server_live(), "still live after the bad requests")

        # SIGTERM drains: requests waiting for their batch (up to 5 s) still get their answers.
        xs = [rng.standard_normal((1, 4)).astype(np.float32) for _ in range(6)]
        outs = [None] * 6
        started = threading.Barrier(7)

        def late(i):
            cl = th.InferenceServerClient(url)
            started.wait()
            try:
                outs[i] = infer(cl, "slow", xs[i])
            except Exception as e:  # noqa: BLE001
                outs[i] = e

        ts = [threading.Thread(target=late, args=(i,)) for i in range(6)]
        [t.start() for t in ts]
        started.wait()
        import time
        for _ in range(2000):  # until all six wait in the queue (the metrics' pending gauge says so)
            _, met = raw(mport, "GET", "/metrics")
            if 'nv_inference_pending_request_count{model="slow",version="1"} 6' in met.decode():
                break
            time.sleep(0.002)
        p.send_signal(signal.SIGTERM)
        [t.join() for t in ts]
        rc = p.wait(timeout=30)
        check(rc == 0, f"SIGTERM: exit status {rc}")
        check(all(isinstance(o, np.ndarray) and np.allclose(o, ref_mlp.run(None, {"input": xs[i]})[0], rtol=1e-4, atol=1e-5)
                  for i, o in enumerate(outs)), f"requests in flight at SIGTERM answered {[type(o).__name__ for o in outs]}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return serve_util.finish()


if __name__ == "__main__":
    sys.exit(main())
