#!/usr/bin/env python3
"""Models served across ranks (`parameters { key: "ranks" ... }` in config.pbtxt) by `ringside serve`,
over raw HTTP (http.client, no tritonclient): an MLP and a GPT, each as 2 pipeline stages and as 2
tensor shards, answer as the same model served in one process does (MLP outputs within 1e-5, the
GPT's generated text equal for the same seed, within its context and past it); concurrent requests batched across the ranks each get
their own answer; a mode that cannot split a model makes it UNAVAILABLE with the ranks' reason; the
rank processes end with the server, stopped (SIGTERM) or killed (SIGKILL).

usage: test_ranks.py build/repl/ringside
"""
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading

import serve_util  # noqa: E402 - beside this file

RINGSIDE = sys.argv[1]
GPT = "gpt layers=1 heads=2 dim=16 ctx=32 vocab={V} seed=11"
PROMPT = "the cab"
check = serve_util.check


def ranks_params(n, mode):
    return (f'parameters {{ key: "ranks" value: {{ string_value: "{n}" }} }}\n'
            f'parameters [ {{ key: "ranks_mode" value: {{ string_value: "{mode}" }} }} ]\n')


def make_repo(root):
    rnd = random.Random(3)
    words = ["the", "cab", "bed", "fed", "a", "deaf", "gab", "head", "ache"]
    text = " ".join(rnd.choice(words) for _ in range(300)) + " "
    chars = sorted(set(text.encode()))
    spec = GPT.format(V=len(chars))
    for d in ("mlp/1", "g/1", "cnn/1"):
        os.makedirs(os.path.join(root, d))
    subprocess.run([RINGSIDE, "--no-db", "-c",
                    f"model m = mlp 4-16-3 seed=3; export m {root}/mlp/1/model.onnx; "
                    f"model c = seq in=1x4x4 conv(2,3,pad=1) relu flatten linear(3) seed=4; "
                    f"export c {root}/cnn/1/model.onnx; model g = {spec}; save g {root}/g/1/model.safetensors"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(root, "g", "1", "vocab.json"), "w") as f:
        json.dump({"chars": chars}, f)
    mlp_cfg = 'max_batch_size: 16\ndynamic_batching { max_queue_delay_microseconds: 100000 preferred_batch_size: [ 8 ] }\n'
    gpt_cfg = 'backend: "ringside_gpt"\nmax_batch_size: 0\nmodel_transaction_policy { decoupled: true }\n'
    with open(os.path.join(root, "mlp", "config.pbtxt"), "w") as f:
        f.write(mlp_cfg)
    with open(os.path.join(root, "g", "config.pbtxt"), "w") as f:
        f.write(gpt_cfg)
    for mode in ("pipeline", "tensor"):
        for src, cfg in (("mlp", mlp_cfg), ("g", gpt_cfg)):
            name = f"{src}_{mode}"
            os.makedirs(os.path.join(root, name, "1"))
            for fn in os.listdir(os.path.join(root, src, "1")):
                with open(os.path.join(root, src, "1", fn), "rb") as a, \
                        open(os.path.join(root, name, "1", fn), "wb") as b:
                    b.write(a.read())
            with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
                f.write(cfg + ranks_params(2, mode))
    # a convolution has no column/row pair: tensor shards cannot hold it
    with open(os.path.join(root, "cnn", "config.pbtxt"), "w") as f:
        f.write("max_batch_size: 4\n" + ranks_params(2, "tensor"))


def start(repo):
    p, ports, banner = serve_util.start(RINGSIDE, ["--model-repository", repo, "--http-port", "0", "--grpc-port", "-1",
                                                   "--metrics-port", "-1"])
    return p, ports["http"], banner


def post(port, path, body):
    st, data = serve_util.request(port, "POST", path, body, timeout=120)
    return st, json.loads(data) if data else None


def infer(port, model, rows):
    st, doc = post(port, f"/v2/models/{model}/infer",
                   {"inputs": [{"name": "input", "shape": [len(rows), 4], "datatype": "FP32",
                                "data": [v for r in rows for v in r]}]})
    if st != 200:
        return st, doc
    return st, doc["outputs"][0]["data"]


def main():
    tmp = tempfile.mkdtemp(prefix="ringside-ranks-")
    repo = os.path.join(tmp, "repo")
    make_repo(repo)
    p, port, banner = start(repo)
    try:
        pids = serve_util.rank_pids(p.pid)
        check(len(pids) == 8, f"4 models across 2 ranks each: 8 rank processes ({len(pids)})")
        st, idx = post(port, "/v2/repository/index", {})
        state = {m["name"]: m for m in idx}
        check(all(state.get(n, {}).get("state") == "READY"
                  for n in ("mlp", "mlp_pipeline", "mlp_tensor", "g", "g_pipeline", "g_tensor")),
              "every model across ranks is READY")
        cnn = state.get("cnn", {})
        check(cnn.get("state") == "UNAVAILABLE" and "ranks" in cnn.get("reason", "") and
              "split" in cnn.get("reason", ""), "tensor shards of a CNN: UNAVAILABLE with the ranks' reason: " +
              cnn.get("reason", "")[:200])

        rnd = random.Random(5)
        rows = [[rnd.uniform(-2, 2) for _ in range(4)] for _ in range(5)]
        st, ref = infer(port, "mlp", rows)
        check(st == 200 and len(ref) == 15, "the MLP in one process answers")
        for mode in ("pipeline", "tensor"):
            st, y = infer(port, f"mlp_{mode}", rows)
            diff = max(abs(a - b) for a, b in zip(ref, y)) if st == 200 else float("inf")
            check(st == 200 and len(y) == 15 and diff <= 1e-5 and any(abs(v) > 1e-3 for v in y),
                  f"MLP across 2 ranks ({mode}) equals one process (max |diff| {diff:.2e})")

            # 8 concurrent single-row requests: batched across the ranks, each its own answer
            got = [None] * 8

            def one(k, mode=mode):
                got[k] = infer(port, f"mlp_{mode}", [rows[k % 5]])

            ts = [threading.Thread(target=one, args=(k,)) for k in range(8)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            ok = all(g and g[0] == 200 and max(abs(a - b) for a, b in zip(g[1], ref[3 * (k % 5):3 * (k % 5) + 3]))
                     <= 1e-5 for k, g in enumerate(got))
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", f"/v2/models/mlp_{mode}/stats")
            stats = json.loads(c.getresponse().read())["model_stats"][0]
            c.close()
            check(ok and stats["inference_count"] == 13 and stats["execution_count"] < 9,
                  f"8 concurrent requests across ranks ({mode}): each its own rows, {stats['inference_count']} "
                  f"inferences in {stats['execution_count']} executions")

        # 24 tokens fit the context of 32; 90 go past it (nanoGPT's crop in one process and across ranks)
        for n in (24, 90):
            params = {"max_tokens": n, "temperature": 0.8, "top_k": 5, "seed": 7}
            st, ref = post(port, "/v2/models/g/generate", {"text_input": PROMPT, "parameters": params})
            check(st == 200 and len(ref["text_output"]) == n, f"the GPT in one process generates {n} tokens")
            for mode in ("pipeline", "tensor"):
                st, doc = post(port, f"/v2/models/g_{mode}/generate", {"text_input": PROMPT, "parameters": params})
                check(st == 200 and doc["text_output"] == ref["text_output"],
                      f"GPT across 2 ranks ({mode}), {n} tokens, generates what one process does: "
                      f"{doc and doc.get('text_output')!r}")
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    check(p.returncode == 0, f"SIGTERM: the server exits 0 ({p.returncode})")
    check(serve_util.gone(pids), "the rank processes ended with the server")

    # killed: the ranks die with it (the launcher's death signal and the store's host going away)
    p, port, _ = start(repo)
    pids = serve_util.rank_pids(p.pid)
    p.kill()
    p.wait()
    check(len(pids) == 8 and serve_util.gone(pids), f"SIGKILL: the server's {len(pids)} rank processes died with it")
    return serve_util.finish()


if __name__ == "__main__":
    sys.exit(main())
