#!/usr/bin/env python3
"""What `ringside serve` says about its models, checked against what Triton answers:

- --model-control-mode none (the default): every model loaded, load/unload refused with Triton's 503
  and words (gRPC UNAVAILABLE); the repository index has one row per loaded version.
- DELETE /v2/models/NAME (and any non-GET on a read endpoint): 405 "Method Not Allowed", as Triton;
  /v2/models/mlp%00x is not read as mlp.
- explicit: only --load-model's at start; 5,000 loads of names with no folder leave the index (and the
  table) as they were; unload of a model whose folder is gone takes it out of the index.
- poll (--repository-poll-secs 1): a folder added is loaded, one removed is unloaded.
- The REPL: `serve m host=127.0.0.3` says the address it bound; its /tmp/ringside-serve-* folder is
  removed at `serve stop` and when the session ends.

usage: test_state.py build/repl/ringside
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import grpc
import serve_util  # noqa: E402 - beside this file

RINGSIDE = sys.argv[1]
check = serve_util.check


class Client:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def req(self, method, path, body=None):
        self.c.request(method, path, body=body, headers={"Content-Type": "application/json"})
        r = self.c.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None


def index(cl):
    return cl.req("POST", "/v2/repository/index")[1]


def grpc_load(gport, name):
    ch = grpc.insecure_channel(f"127.0.0.1:{gport}")
    load = ch.unary_unary("/inference.GRPCInferenceService/RepositoryModelLoad")
    try:
        load(b"\x12" + bytes([len(name)]) + name.encode(), timeout=20)  # model_name = 2
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details()
    finally:
        ch.close()


def start(repo, *args):
    p, ports, _ = serve_util.start(RINGSIDE, serve_util.repo_args(repo) + list(args))
    return p, ports["http"], ports["grpc"]


def write_model(repo, name, versions):
    for v in versions:
        os.makedirs(os.path.join(repo, name, str(v)))
        subprocess.run([RINGSIDE, "--no-db", "-c", f"model m = mlp 4-8-3 seed={v}; "
                        f"export m {repo}/{name}/{v}/model.onnx"], check=True, stdout=subprocess.DEVNULL)
    serve_util.write_config(repo, name, "max_batch_size: 8\nversion_policy: { all { } }\n")


def main():
    tmp = tempfile.mkdtemp(prefix="ringside-state-")
    repo = os.path.join(tmp, "repo")
    write_model(repo, "mlp", [1, 2])
    write_model(repo, "other", [1])

    # ---- none (the default) ----
    p, port, gport = start(repo)
    try:
        cl = Client(port)
        rows = index(cl)
        check(sorted((r["name"], r.get("version"), r["state"]) for r in rows) ==
              [("mlp", "1", "READY"), ("mlp", "2", "READY"), ("other", "1", "READY")],
              f"the index lists one row per loaded version: {rows}")
        st, body = cl.req("POST", "/v2/repository/models/mlp/unload")
        check(st == 503 and body["error"] == "explicit model load / unload is not allowed if polling is enabled",
              f"none mode: unload refused as Triton refuses it: {st} {body}")
        code, detail = grpc_load(gport, "mlp")
        check(code == grpc.StatusCode.UNAVAILABLE and "not allowed" in detail, f"none mode over gRPC: {code}")
        st, body = cl.req("DELETE", "/v2/models/mlp")
        check(st == 405 and body["error"] == "Method Not Allowed", f"DELETE /v2/models/mlp: {st} {body}")
        st, _ = cl.req("GET", "/v2/models/mlp")
        check(st == 200, "GET /v2/models/mlp still answers")
        st, body = cl.req("GET", "/v2/models/mlp%00x")
        st2, _ = cl.req("GET", "/v2/models/ml%70/ready")
        check(st == 400 and "not a model name" in body["error"] and st2 == 200,
              f"/v2/models/mlp%00x is refused, not read as mlp ({st} {body}); other escapes still decode")
    finally:
        serve_util.stop(p)

    # ---- explicit ----
    p, port, gport = start(repo, "--model-control-mode=explicit", "--load-model", "other")
    try:
        cl = Client(port)
        rows = {r["name"]: r for r in index(cl)}
        check(rows["other"]["state"] == "READY" and rows["mlp"]["state"] == "UNAVAILABLE",
              "explicit: only --load-model's model is loaded at start")
        st, _ = cl.req("POST", "/v2/repository/models/mlp/load")
        check(st == 200 and cl.req("GET", "/v2/models/mlp/ready")[0] == 200, "explicit: load answers 200, ready")
        before = index(cl)
        rss0 = serve_util.proc_status(p.pid, "VmRSS")
        bad = 0
        for i in range(5000):
            st, body = cl.req("POST", f"/v2/repository/models/nosuch{i}/load")
            bad += st == 400 and "failed to load" in body["error"]
        after = index(cl)
        rss1 = serve_util.proc_status(p.pid, "VmRSS")
        check(bad == 5000 and after == before, f"5,000 loads of missing names all refused, the index unchanged "
              f"({len(after)} rows; RSS {rss0} -> {rss1} kB)")
        shutil.copytree(os.path.join(repo, "other"), os.path.join(repo, "gone"))
        st, _ = cl.req("POST", "/v2/repository/models/gone/load")
        shutil.rmtree(os.path.join(repo, "gone"))
        names = [r["name"] for r in index(cl)]
        check(st == 200 and "gone" in names, "a model whose folder was removed stays listed while loaded")
        st, _ = cl.req("POST", "/v2/repository/models/gone/unload")
        names = [r["name"] for r in index(cl)]
        check(st == 200 and "gone" not in names, "unloading it takes it out of the index")
    finally:
        serve_util.stop(p)
    r = subprocess.run([RINGSIDE, "serve"] + serve_util.repo_args(repo) +
                       ["--model-control-mode=explicit", "--load-model=nosuch"],
                       capture_output=True, text=True, timeout=60)
    err = r.stderr
    check("on http://" not in r.stdout and r.returncode != 0 and "nosuch" in err,
          f"--load-model of a missing model fails the start: {err.strip()}")

    # ---- poll ----
    p, port, _ = start(repo, "--model-control-mode=poll", "--repository-poll-secs", "1")
    try:
        cl = Client(port)
        shutil.copytree(os.path.join(repo, "other"), os.path.join(repo, "added"))
        ok = serve_util.wait_for(lambda: cl.req("GET", "/v2/models/added/ready")[0] == 200, 10, step=0.2)
        check(ok, "poll: a folder added to the repository is loaded")
        shutil.rmtree(os.path.join(repo, "added"))
        gone = serve_util.wait_for(lambda: cl.req("GET", "/v2/models/added/ready")[0] != 200, 10, step=0.2)
        check(gone and "added" not in [r["name"] for r in index(cl)], "poll: a folder removed is unloaded")
    finally:
        serve_util.stop(p)

    # ---- the REPL: the address it bound, its temporary folder ----
    for tail, what in (("; serve stop", "serve stop"), ("", "the session's end")):
        r = subprocess.run([RINGSIDE, "--no-db", "-c", "model m = mlp 4-8-3 seed=1; "
                            "serve m http=0 grpc=-1 metrics=-1 host=127.0.0.3" + tail],
                           capture_output=True, text=True, timeout=120)
        m = re.search(r"wrote model repository (/tmp/ringside-serve-[A-Za-z0-9]+)/m", r.stdout)
        check(m is not None and "on http://127.0.0.3:" in r.stdout, f"serve host=127.0.0.3 says where it listens: "
              f"{[ln for ln in r.stdout.splitlines() if 'serving' in ln]}")
        check(m is not None and not os.path.exists(m.group(1)), f"its temporary repository is gone after {what}")
    r = subprocess.run([RINGSIDE, "--no-db", "-c", "model m = mlp 4-8-3 seed=1; serve m http=0 grpc=-1 metrics=-1 "
                        "per_ip=0"], capture_output=True, text=True, timeout=120)
    m = re.search(r"wrote model repository (/tmp/ringside-serve-[A-Za-z0-9]+)/m", r.stdout)
    check("per_ip '0' is not a whole number in 1..1000000" in r.stdout + r.stderr and m and not os.path.exists(m.group(1)),
          "serve per_ip=0 is refused naming the range, and leaves no temporary folder")
    shutil.rmtree(tmp)
    return serve_util.finish()


if __name__ == "__main__":
    sys.exit(main())
