#!/usr/bin/env python3
"""`serve` at the prompt of an imported graph that only runs (`model m = onnx FILE` whose nodes are not a
plain layer sequence: it has no export, so the file it came from is served), and model metadata over HTTP and
gRPC agreeing with Triton's rule, through tritonclient:
- a ResNet block (BatchNormalization, Conv, pooling) imported for inference and served: a batch of 3 over
  HTTP and over gRPC equals ONNX Runtime's run of the same file; its metadata shape is [-1, 3, 32, 32] over
  both (the config the REPL writes has max_batch_size > 0: Triton prepends the batch's -1); `infer m`'s
  8 requests from 4 clients equal the session model run alone;
- the import's file removed before `serve`: refused naming the file and what would work, the REPL goes on
  (--keep-going: it reads its commands from a pipe, as a script);
- a folder holding an attention block (tests/onnx/import/transformer/mha_dynamo.onnx) with no config.pbtxt,
  served from the same prompt after `serve stop`: its metadata has the batch's -1 over HTTP and gRPC alike
  (a request carries it), and a batch of 2 equals ORT's.
Takes ~3 s.

usage: test_repl_imported.py build/repl/ringside   (exits 77 without numpy, onnxruntime or tritonclient)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import serve_util  # beside this file

with serve_util.needs("numpy, onnxruntime and tritonclient[all]"):
    import numpy as np
    import onnxruntime as ort
    import tritonclient.grpc as tg
    import tritonclient.http as th

RINGSIDE = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
RESNET = os.path.join(HERE, "..", "plan", "data", "resnet_block.onnx")
MHA = os.path.join(HERE, "..", "onnx", "import", "transformer", "mha_dynamo.onnx")
check = serve_util.check
rng = np.random.default_rng(7)


class Prompt:
    """ringside's REPL on pipes: say() sends lines, until() reads its output up to a pattern."""

    def __init__(self):
        self.p = subprocess.Popen([RINGSIDE, "--no-db", "--keep-going"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)

    def say(self, *lines):
        self.p.stdin.write("".join(ln + "\n" for ln in lines))
        self.p.stdin.flush()

    def until(self, pattern):
        """The output up to the first match of PATTERN (line wraps joined); exits the test at end of output."""
        seen = ""
        for line in self.p.stdout:
            seen += line
            m = re.search(pattern, re.sub(r"\n\s*", " ", seen))
            if m:
                return seen, m
        raise SystemExit(f"the REPL ended before {pattern!r}: {seen}")

    def close(self):
        self.say("serve stop")
        self.p.stdin.close()
        return self.p.wait(timeout=60)


def serving(prompt, src):
    """`serve SRC` on ephemeral ports; returns (output, ports)."""
    prompt.say(f"serve {src} http=0 grpc=0 metrics=-1")
    out, m = prompt.until(r"on http://127\.0\.0\.1:(\d+), gRPC on :(\d+)")
    return out, {"http": int(m.group(1)), "grpc": int(m.group(2))}


def agrees(name, path, ports, shape, want_meta):
    """A batch of SHAPE over HTTP and gRPC against ORT on PATH; the metadata of both against WANT_META."""
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    xin, yout = sess.get_inputs()[0].name, sess.get_outputs()[0].name
    x = rng.standard_normal(shape).astype(np.float32)
    want = sess.run(None, {xin: x})[0]
    hc, gc = serve_util.triton_clients(ports)
    for proto, mod, c in (("HTTP", th, hc), ("gRPC", tg, gc)):
        i = mod.InferInput(xin, list(x.shape), "FP32")
        i.set_data_from_numpy(x)
        y = c.infer(name, [i]).as_numpy(yout)
        err = float(np.max(np.abs(y - want))) if y is not None and y.shape == want.shape else float("inf")
        check(err < 1e-4, f"{name} over {proto}: a batch of {shape[0]} equals ORT's (max |diff| {err:.2e})")
    hm = hc.get_model_metadata(name)
    gm = gc.get_model_metadata(name)
    hshape = [(t["name"], t["shape"]) for t in hm["inputs"] + hm["outputs"]]
    gshape = [(t.name, list(t.shape)) for t in list(gm.inputs) + list(gm.outputs)]
    check(hshape == want_meta and gshape == want_meta,
          f"{name}: metadata shapes over HTTP {hshape} and gRPC {gshape} are {want_meta}")


def main():
    tmp = tempfile.mkdtemp(prefix="ringside-imported-")
    gone = os.path.join(tmp, "gone.onnx")
    shutil.copy(RESNET, gone)
    os.makedirs(os.path.join(tmp, "repo", "mha", "1"))
    shutil.copy(MHA, os.path.join(tmp, "repo", "mha", "1", "model.onnx"))  # no config.pbtxt
    prompt = Prompt()
    try:
        prompt.say(f"model gone = onnx {gone}")
        prompt.until(r"model gone: imported from .* for inference")
        os.remove(gone)
        prompt.say("serve gone http=0 grpc=-1 metrics=-1")
        out, _ = prompt.until(r"error: serve: .*\)")
        said = re.sub(r"\n\s*", " ", out)
        check(f"served from the file it was imported from: {gone}" in said and
              "serve another .onnx file or a plan" in said,
              f"an import whose file is gone is refused naming it and what would work: {said[said.find('error:'):]}")

        prompt.say(f"model m = onnx {RESNET}")
        out, _ = prompt.until(r"model m: imported from .* for inference")
        out, ports = serving(prompt, "m")
        said = re.sub(r"\n\s*", " ", out)
        check("the file m was imported from" in said, f"serve m says what it serves: {said[said.find('wrote'):]}")
        agrees("m", RESNET, ports, [3, 3, 32, 32], [("x", [-1, 3, 32, 32]), ("y", [-1, 10])])
        prompt.say("infer m n=8 clients=4")
        out, m = prompt.until(r"(\d+) ok, (\d+) failed.* max \|diff\| ([0-9.e+-]+)")
        check(m.group(1) == "8" and m.group(2) == "0" and float(m.group(3)) <= 1e-5,
              f"infer m: 8 requests through the server equal the session model run alone (max |diff| {m.group(3)})")

        prompt.say("serve stop")
        prompt.until(r"server stopped")
        _, ports = serving(prompt, os.path.join(tmp, "repo"))
        agrees("mha", MHA, ports, [2, 5, 8], [("x", [-1, 5, 8]), ("y", [-1, 5, 8])])
    finally:
        rc = prompt.close()
        shutil.rmtree(tmp)
    check(rc == 1, f"the REPL ends after serve stop, its exit status the one refused command (exit {rc})")
    return serve_util.finish()


if __name__ == "__main__":
    sys.exit(main())
