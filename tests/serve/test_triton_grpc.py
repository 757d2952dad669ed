#!/usr/bin/env python3
"""Triton's own gRPC client (tritonclient[grpc]) against `ringside serve --repo`: live/ready, metadata,
config, infer (binary tensors) checked against ONNX Runtime, concurrent requests merged into batches,
64 concurrent clients each checked, statistics, load/unload/index, bad requests with Triton's status codes, garbage bytes on the gRPC
socket; then a GPT served decoupled: start_stream/async_stream_infer token by token, equal to
`ringside generate` with the same seed, a client dropped mid-stream, and the HTTP generate extension
(generate and generate_stream read as server-sent events by a raw HTTP client).

usage: test_triton_grpc.py build/repl/ringside   (exits 77, skipped, when tritonclient[grpc] or
onnxruntime is missing)
"""
import http.client
import json
import os
import queue
import random
import socket
import subprocess
import sys
import tempfile
import threading

import serve_util  # beside this file

with serve_util.needs("numpy, onnxruntime and tritonclient[grpc] (scripts/setup.sh installs them)"):
    import numpy as np
    import onnxruntime as ort
    import tritonclient.grpc as tg
    from tritonclient.utils import InferenceServerException


RINGSIDE = sys.argv[1]
check = serve_util.check
GPT = "gpt layers=1 heads=2 dim=16 ctx=32 vocab={V} seed=11"
PROMPT = "the cab"


def make_repo(root):
    """mlp and cnn as ONNX files; g, a GPT, as model.safetensors + vocab.json, decoupled."""
    for d in ("mlp/1", "cnn/1", "g/1"):
        os.makedirs(os.path.join(root, d))
    rnd = random.Random(3)
    words = ["the", "cab", "bed", "fed", "a", "deaf", "gab", "head", "ache"]
    text = " ".join(rnd.choice(words) for _ in range(600)) + " "
    corpus = os.path.join(root, "..", "corpus.txt")
    with open(corpus, "w") as f:
        f.write(text)
    chars = sorted(set(text.encode()))
    spec = GPT.format(V=len(chars))
    subprocess.run([RINGSIDE, "--no-db", "-c",
                    f"model m = mlp 4-16-3 seed=3; export m {root}/mlp/1/model.onnx; "
                    f"model c = seq in=1x8x8 conv(4,3,pad=1) relu maxpool(2) flatten linear(5) seed=4; "
                    f"export c {root}/cnn/1/model.onnx; model g = {spec}; save g {root}/g/1/model.safetensors"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(root, "mlp", "config.pbtxt"), "w") as f:
        f.write('name: "mlp"\nmax_batch_size: 32\n'
                'instance_group [ { count: 2 kind: KIND_CPU } ]\n'
                'dynamic_batching { preferred_batch_size: [ 16 ] max_queue_delay_microseconds: 200000 }\n')
    with open(os.path.join(root, "cnn", "config.pbtxt"), "w") as f:
        f.write('max_batch_size: 8\n')
    with open(os.path.join(root, "g", "config.pbtxt"), "w") as f:
        f.write('backend: "ringside_gpt"\nmax_batch_size: 0\n'
                'input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
                'output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
                'instance_group [ { count: 2 } ]\n'
                'model_transaction_policy { decoupled: true }\n')
    with open(os.path.join(root, "g", "1", "vocab.json"), "w") as f:
        json.dump({"chars": chars}, f)
    return (ort.InferenceSession(f"{root}/mlp/1/model.onnx"), ort.InferenceSession(f"{root}/cnn/1/model.onnx"),
            corpus, spec)


def reference_generate(corpus, spec, repo, n, temp, top_k, seed):
    """What `generate` prints for the same weights, prompt and settings."""
    out = subprocess.run([RINGSIDE, "--no-db", "-c",
                          f"data t = text {corpus}; model g = {spec}; load g {repo}/g/1/model.safetensors; "
                          f"generate g prompt=\"{PROMPT}\" n={n} temp={temp} top_k={top_k} seed={seed} data=t"],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith(PROMPT):
            return line[len(PROMPT):]
    raise SystemExit("no generated line in: " + out)


def start(repo):
    p, ports, banner = serve_util.start(RINGSIDE, ["--model-repository", repo, "--model-control-mode=explicit", "--load-model=*",
                                                   "--http-port", "0", "--grpc-port", "0",
                                                   "--metrics-port", "-1"])
    return p, ports["http"], ports["grpc"], banner


def code_of(fn):
    try:
        fn()
    except InferenceServerException as e:
        return str(e.status()), e.message()
    return "OK", ""


def infer(c, model, x):
    inp = tg.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return c.infer(model, [inp], outputs=[tg.InferRequestedOutput("logits")]).as_numpy("logits")


def stream_tokens(c, prompt, params, request_id="s"):
    """Sends one generation over ModelStreamInfer; returns the tokens in the order they came."""
    got = queue.Queue()
    c.start_stream(callback=lambda result, error: got.put((result, error)))
    inp = tg.InferInput("text_input", [1], "BYTES")
    inp.set_data_from_numpy(np.array([prompt.encode()], dtype=object))
    c.async_stream_infer("g", [inp], request_id=request_id, parameters=params, enable_empty_final_response=True)
    tokens, errors = [], []
    while True:
        result, error = got.get(timeout=60)
        if error is not None:
            errors.append(str(error))
            break
        resp = result.get_response()
        if resp.outputs:
            tokens.append(result.as_numpy("text_output")[0].decode("latin-1"))
        if resp.parameters["triton_final_response"].bool_param:
            break
    c.stop_stream()
    return tokens, errors


def sse(port, path, body):
    """POST and read text/event-stream with http.client alone: the `data:` payloads, in order."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    events, buf = [], b""
    while True:
        chunk = r.read1(4096) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            for line in ev.split(b"\n"):
                if line.startswith(b"data: "):
                    events.append(json.loads(line[6:]))
    ctype = r.getheader("Content-Type")
    conn.close()
    return r.status, ctype, events


def main():
    tmp = tempfile.TemporaryDirectory()
    repo = os.path.join(tmp.name, "repo")
    ref_mlp, ref_cnn, corpus, spec = make_repo(repo)
    p, hport, gport, banner = start(repo)
    url = f"127.0.0.1:{gport}"
    c = tg.InferenceServerClient(url)
    try:
        check(c.is_server_live() and c.is_server_ready(), "server live and ready over gRPC")
        md = c.get_server_metadata()
        check(md.name == "ringside" and "binary_tensor_data" in md.extensions, "server metadata")
        mm = c.get_model_metadata("mlp")
        check(mm.name == "mlp" and list(mm.inputs[0].shape) == [-1, 4] and mm.inputs[0].datatype == "FP32"
              and list(mm.outputs[0].shape) == [-1, 3] and list(mm.versions) == ["1"], "model metadata")
        cfg = c.get_model_config("mlp").config
        check(cfg.max_batch_size == 32 and cfg.instance_group[0].count == 2
              and list(cfg.dynamic_batching.preferred_batch_size) == [16] and cfg.input[0].data_type == 11,
              "model config (TYPE_FP32 is 11, Triton's number)")
        gc = c.get_model_config("g").config
        check(gc.model_transaction_policy.decoupled and gc.input[0].name == "text_input", "the GPT's config: decoupled")
        check(c.is_model_ready("mlp") and not c.is_model_ready("nope"), "model readiness")

        rng = np.random.default_rng(1)
        x = rng.standard_normal((3, 4)).astype(np.float32)
        got, want = infer(c, "mlp", x), ref_mlp.run(None, {"input": x})[0]
        check(got.shape == (3, 3) and np.allclose(got, want, rtol=1e-4, atol=1e-5),
              f"infer mlp equals ONNX Runtime (max diff {np.abs(got - want).max():.2e})")
        xc = rng.standard_normal((5, 1, 8, 8)).astype(np.float32)
        got, want = infer(c, "cnn", xc), ref_cnn.run(None, {"input": xc})[0]
        check(np.allclose(got, want, rtol=1e-4, atol=1e-5), f"infer cnn equals ONNX Runtime ({np.abs(got - want).max():.2e})")

        # 16 requests at once on one channel: merged into fewer batches, each answer its own input's.
        before = c.get_inference_statistics("mlp").model_stats[0]
        xs = [rng.standard_normal((1, 4)).astype(np.float32) for _ in range(16)]
        done = queue.Queue()
        for i in range(16):
            inp = tg.InferInput("input", [1, 4], "FP32")
            inp.set_data_from_numpy(xs[i])
            c.async_infer("mlp", [inp], callback=lambda result, error, i=i: done.put((i, result, error)))
        outs = {}
        for _ in range(16):
            i, r, e = done.get(timeout=60)
            outs[i] = None if e else r.as_numpy("logits")
        after = c.get_inference_statistics("mlp").model_stats[0]
        n_inf = after.inference_count - before.inference_count
        n_exec = after.execution_count - before.execution_count
        check(n_inf == 16 and n_exec < n_inf, f"16 concurrent gRPC requests ran as {n_exec} batches")
        check(all(outs[i] is not None and np.allclose(outs[i], ref_mlp.run(None, {"input": xs[i]})[0], rtol=1e-4,
                                                      atol=1e-5) for i in range(16)),
              "every batched answer equals its input run alone")
        check(after.inference_stats.success.count == before.inference_stats.success.count + 16
              and any(b.batch_size > 1 for b in after.batch_stats), "statistics: successes and batch sizes")

        # 64 clients at once, each on its own channel, 4 requests each: every output checked.
        bad = []

        def client_loop(k):
            cl = tg.InferenceServerClient(url)
            r = np.random.default_rng(100 + k)
            for _ in range(4):
                xi = r.standard_normal((1 + k % 3, 4)).astype(np.float32)
                try:
                    if not np.allclose(infer(cl, "mlp", xi), ref_mlp.run(None, {"input": xi})[0], rtol=1e-4, atol=1e-5):
                        bad.append(k)
                except InferenceServerException as e:
                    bad.append(str(e))
            cl.close()

        ts = [threading.Thread(target=client_loop, args=(k,)) for k in range(64)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        check(not bad, f"64 concurrent gRPC clients, 256 requests, every output equals ONNX Runtime ({bad[:3]})")

        # model control
        c.unload_model("cnn")
        check(not c.is_model_ready("cnn"), "unload")
        idx = {m.name: m for m in c.get_model_repository_index().models}
        check(idx["cnn"].state == "UNAVAILABLE" and idx["mlp"].state == "READY" and idx["g"].state == "READY",
              "repository index")
        c.load_model("cnn")
        check(c.is_model_ready("cnn") and np.allclose(infer(c, "cnn", xc), ref_cnn.run(None, {"input": xc})[0],
                                                      rtol=1e-4, atol=1e-5), "load again, same answers")

        # bad requests: Triton's codes
        st, msg = code_of(lambda: infer(c, "nope", x))
        check(st == "StatusCode.UNAVAILABLE" and "Request for unknown model: 'nope' is not found" in msg,
              f"unknown model: {st} {msg}")
        st, msg = code_of(lambda: infer(c, "mlp", rng.standard_normal((2, 5)).astype(np.float32)))
        check(st == "StatusCode.INVALID_ARGUMENT" and "unexpected shape" in msg, f"wrong shape: {st} {msg}")
        st, msg = code_of(lambda: infer(c, "mlp", rng.standard_normal((33, 4)).astype(np.float32)))
        check(st == "StatusCode.INVALID_ARGUMENT", f"batch over max_batch_size: {st} {msg}")
        st, msg = code_of(lambda: c.get_model_metadata("../etc"))
        check(st == "StatusCode.INVALID_ARGUMENT" and "not a model name" in msg, f"traversal: {st} {msg}")
        st, msg = code_of(lambda: c.load_model("nope"))
        check(st == "StatusCode.INVALID_ARGUMENT" and "failed to load" in msg, f"load of a missing model: {st}")
        inp = tg.InferInput("text_input", [1], "BYTES")
        inp.set_data_from_numpy(np.array([b"the"], dtype=object))
        st, msg = code_of(lambda: c.infer("g", [inp]))
        check(st == "StatusCode.UNIMPLEMENTED" and "decoupled" in msg, f"ModelInfer on a decoupled model: {st}")
        for junk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", bytes(range(256)) * 4):
            s = socket.create_connection(("127.0.0.1", gport), timeout=10)
            s.sendall(junk)
            try:
                while s.recv(4096):
                    pass
                closed = True
            except OSError:
                closed = True
            s.close()
            check(closed and c.is_server_live(), f"garbage on the gRPC socket ({len(junk)} bytes) is dropped")

        # The GPT, token by token: equal to `generate` with the same weights and seed.
        n, temp, top_k, seed = 40, 0.8, 5, 7
        want = reference_generate(corpus, spec, repo, n, temp, top_k, seed)
        tokens, errors = stream_tokens(c, PROMPT, {"max_tokens": n, "temperature": temp, "top_k": top_k, "seed": seed})
        check(not errors and len(tokens) == n and all(len(t) == 1 for t in tokens),
              f"ModelStreamInfer: one response per token ({len(tokens)} of {n}) {errors}")
        check("".join(tokens) == want, f"streamed text equals `generate`: {''.join(tokens)!r} vs {want!r}")
        tokens, errors = stream_tokens(c, "xyz", {"max_tokens": 3})
        check(tokens == [] and errors and "vocabulary" in errors[0], f"a prompt outside the vocabulary: {errors}")

        # A client dropped mid-stream: the server goes on (the generation stops at its next token).
        c2 = tg.InferenceServerClient(url)
        got = queue.Queue()
        c2.start_stream(callback=lambda result, error: got.put(1))
        inp = tg.InferInput("text_input", [1], "BYTES")
        inp.set_data_from_numpy(np.array([b"the"], dtype=object))
        c2.async_stream_infer("g", [inp], parameters={"max_tokens": 100000})
        for _ in range(3):
            got.get(timeout=60)
        c2.close()
        tokens, errors = stream_tokens(c, PROMPT, {"max_tokens": 5, "seed": seed})
        check(len(tokens) == 5 and c.is_server_live(), "after a client vanished mid-stream the server streams on")

        # HTTP: generate and generate_stream (server-sent events, read raw).
        body = {"text_input": PROMPT, "parameters": {"max_tokens": n, "temperature": temp, "top_k": top_k, "seed": seed}}
        conn = http.client.HTTPConnection("127.0.0.1", hport, timeout=60)
        conn.request("POST", "/v2/models/g/generate", body=json.dumps(body))
        r = conn.getresponse()
        j = json.loads(r.read())
        conn.close()
        check(r.status == 200 and j.get("text_output") == want, f"HTTP generate equals `generate`: {j}")
        status, ctype, events = sse(hport, "/v2/models/g/generate_stream", body)
        check(status == 200 and ctype == "text/event-stream" and len(events) == n
              and "".join(e["text_output"] for e in events) == want and all(e["model_name"] == "g" for e in events),
              f"HTTP generate_stream: {len(events)} events, one per token, equal to `generate`")
        status, ctype, events = sse(hport, "/v2/models/g/generate_stream", {"parameters": {}})
        check(status == 400, f"generate_stream without text_input: {status}")
        status, ctype, events = sse(hport, "/v2/models/mlp/generate", {"text_input": "a"})
        check(status == 400, f"generate on a tensor model: {status}")
        stats = c.get_inference_statistics("g").model_stats[0]
        check(stats.inference_stats.success.count >= 5 and stats.inference_stats.fail.count >= 2,
              "the GPT's statistics count generations and failures")
    finally:
        c.close()
        p.terminate()
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0 and "stopped" in out, f"SIGTERM drains and exits 0 (rc {p.returncode}) {err[-300:]}")
    return serve_util.finish()


if __name__ == "__main__":
    sys.exit(main())
