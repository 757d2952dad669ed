#!/usr/bin/env python3
"""A compiled plan served over gRPC, spoken to with Triton's own client (tritonclient[grpc]): `compile`
writes REPO/cnnplan/1/model.plan from a CNN's ONNX export; `ringside serve --repo` serves it (platform
ringside_plan). Model metadata and config come from the plan; infer of a batch of 3 and 16 concurrent
single-sample requests (merged into batches > 1) equal ONNX Runtime on the ONNX file the plan was
compiled from (fp32 plan: within 1e-4); a request larger than the plan's batch is refused with
INVALID_ARG and the server goes on.

usage: test_plan_grpc.py build/repl/ringside   (exits 77, skipped, when tritonclient[grpc] or onnxruntime is missing)
"""
import os
import queue
import subprocess
import sys
import tempfile

import serve_util  # beside this file

with serve_util.needs("numpy, onnxruntime and tritonclient[grpc]"):
    import numpy as np
    import onnxruntime as ort
    import tritonclient.grpc as tg
    from tritonclient.utils import InferenceServerException


RINGSIDE = sys.argv[1]
check = serve_util.check


def main():
    tmp = tempfile.TemporaryDirectory()
    repo = os.path.join(tmp.name, "repo")
    os.makedirs(os.path.join(repo, "cnnplan", "1"))
    onnx = os.path.join(tmp.name, "cnn.onnx")
    r = subprocess.run([RINGSIDE, "--no-db", "-c",
                        f"model c = seq in=1x8x8 conv(4,3,pad=1) relu maxpool(2) conv(6,3,pad=1) relu flatten linear(5) "
                        f"seed=4; export c {onnx}; compile {onnx} batch=8 -> {repo}/cnnplan/1/model.plan"],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit("compile failed: " + r.stdout + r.stderr)
    with open(os.path.join(repo, "cnnplan", "config.pbtxt"), "w") as f:
        f.write('platform: "ringside_plan"\nmax_batch_size: 8\ninstance_group [ { count: 2 } ]\n'
                "dynamic_batching { max_queue_delay_microseconds: 100000 }\n")
    ref = ort.InferenceSession(onnx, providers=["CPUExecutionProvider"])
    p, ports, _ = serve_util.start(RINGSIDE, ["--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
                                              "--metrics-port", "-1"])
    gport = ports["grpc"]
    c = tg.InferenceServerClient(f"127.0.0.1:{gport}")
    try:
        check(c.is_model_ready("cnnplan"), "the plan is ready")
        mm = c.get_model_metadata("cnnplan")
        check(mm.platform == "ringside_plan" and list(mm.inputs[0].shape) == [-1, 1, 8, 8]
              and list(mm.outputs[0].shape) == [-1, 5] and mm.outputs[0].name == "logits",
              f"metadata from the plan: {mm.platform} {list(mm.inputs[0].shape)} -> {list(mm.outputs[0].shape)}")
        cfg = c.get_model_config("cnnplan").config
        check(cfg.max_batch_size == 8 and cfg.instance_group[0].count == 2, "config")

        def infer(x):
            inp = tg.InferInput("input", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            return c.infer("cnnplan", [inp], outputs=[tg.InferRequestedOutput("logits")]).as_numpy("logits")

        rng = np.random.default_rng(2)
        x = rng.standard_normal((3, 1, 8, 8)).astype(np.float32)
        got, want = infer(x), ref.run(None, {"input": x})[0]
        check(got.shape == (3, 5) and np.allclose(got, want, rtol=1e-4, atol=1e-5),
              f"infer of 3 equals ONNX Runtime (max diff {np.abs(got - want).max():.2e})")

        before = c.get_inference_statistics("cnnplan").model_stats[0]
        xs = [rng.standard_normal((1, 1, 8, 8)).astype(np.float32) for _ in range(16)]
        done = queue.Queue()
        for i in range(16):
            inp = tg.InferInput("input", [1, 1, 8, 8], "FP32")
            inp.set_data_from_numpy(xs[i])
            c.async_infer("cnnplan", [inp], callback=lambda result, error, i=i: done.put((i, result, error)))
        outs = {}
        for _ in range(16):
            i, res, err = done.get(timeout=60)
            outs[i] = None if err else res.as_numpy("logits")
        after = c.get_inference_statistics("cnnplan").model_stats[0]
        n_exec = after.execution_count - before.execution_count
        check(after.inference_count - before.inference_count == 16 and n_exec < 16
              and any(b.batch_size > 1 for b in after.batch_stats), f"16 concurrent requests ran as {n_exec} batches")
        check(all(outs[i] is not None and np.allclose(outs[i], ref.run(None, {"input": xs[i]})[0], rtol=1e-4, atol=1e-5)
                  for i in range(16)), "every batched answer equals its input run alone (ONNX Runtime)")

        try:
            infer(np.zeros((9, 1, 8, 8), np.float32))
            code, msg = "OK", ""
        except InferenceServerException as e:
            code, msg = str(e.status()), e.message()
        check(code == "StatusCode.INVALID_ARGUMENT" and "batch-size must be <= 8" in msg, f"a batch of 9 refused: {code} {msg}")
        got = infer(x)
        check(np.allclose(got, want, rtol=1e-4, atol=1e-5), "serving goes on")
    finally:
        c.close()
        p.terminate()
        p.wait(timeout=30)
    return serve_util.finish()


if __name__ == "__main__":
    sys.exit(main())
