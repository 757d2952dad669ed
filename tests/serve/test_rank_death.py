#!/usr/bin/env python3
"""Honest state when a rank dies: an MLP served across 2 ranks by `ringside serve --rank-restarts 1`.
One rank is killed (SIGKILL): the model turns UNAVAILABLE with the reason in the repository index and
/v2/health/ready answers 400 without waiting for a request to fail; the server starts the ranks again
and the model answers as before; the restart is counted in /metrics and said on the server's stderr.
Killed a second time, past --rank-restarts, the model stays UNAVAILABLE, saying so.

usage: test_rank_death.py build/repl/ringside
"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import serve_util  # noqa: E402 - beside this file

RINGSIDE = sys.argv[1]
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures += 1


def req(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def infer(port):
    st, data = req(port, "POST", "/v2/models/mlp/infer",
                   {"inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32", "data": [1, 2, 3, 4, -1, 0, 5, 2]}]})
    return st, json.loads(data)["outputs"][0]["data"] if st == 200 else data


def rank_pids(server_pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if int(st[1]) == server_pid and st[0] != "Z" and b"--worker" in cmd:
            out.append(int(d))
    return sorted(out)


def wait_for(cond, within):
    t = time.time() + within
    while time.time() < t:
        if cond():
            return True
        time.sleep(0.1)
    return False


def index_row(port):
    rows = [r for r in json.loads(req(port, "POST", "/v2/repository/index")[1]) if r["name"] == "mlp"]
    return rows[0] if rows else {}


def main():
    tmp = tempfile.mkdtemp(prefix="ringside-rankdeath-")
    repo = os.path.join(tmp, "repo")
    os.makedirs(os.path.join(repo, "mlp", "1"))
    subprocess.run([RINGSIDE, "--no-db", "-c", f"model m = mlp 4-16-3 seed=3; export m {repo}/mlp/1/model.onnx"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(repo, "mlp", "config.pbtxt"), "w") as f:
        f.write('max_batch_size: 8\nparameters { key: "ranks" value: { string_value: "2" } }\n')
    p, ports, _ = serve_util.start(RINGSIDE, ["--repo", repo, "--http", "0", "--grpc", "-1", "--metrics", "0",
                                              "--rank-restarts", "1"])
    port, mport = ports["http"], ports["metrics"]
    try:
        st, want = infer(port)
        pids = rank_pids(p.pid)
        check(st == 200 and len(pids) == 2, f"the model answers from 2 ranks ({pids})")
        os.kill(pids[-1], signal.SIGKILL)
        down = wait_for(lambda: req(port, "GET", "/v2/models/mlp/ready")[0] != 200, 10)
        row = index_row(port)
        ready = req(port, "GET", "/v2/health/ready")[0]
        check(down and row.get("state") == "UNAVAILABLE" and "rank" in row.get("reason", ""),
              f"a rank killed: the model is UNAVAILABLE with the reason, no request needed: {row}")
        check(ready == 400, f"/v2/health/ready answers {ready} while it is down")
        back = wait_for(lambda: req(port, "GET", "/v2/models/mlp/ready")[0] == 200, 60)
        st, got = infer(port)
        check(back and st == 200 and got == want and len(rank_pids(p.pid)) == 2,
              "its ranks restarted, the model answers as before from 2 new ranks")
        check(req(port, "GET", "/v2/health/ready")[0] == 200, "the server is ready again")
        _, mt = req(mport, "GET", "/metrics")
        check(b'ringside_rank_restarts_total{model="mlp"} 1' in mt, "the restart is counted in /metrics")
        os.kill(rank_pids(p.pid)[0], signal.SIGKILL)
        down = wait_for(lambda: "not restarted" in index_row(port).get("reason", ""), 10)
        time.sleep(1.0)
        check(down and req(port, "GET", "/v2/models/mlp/ready")[0] != 200,
              f"past --rank-restarts 1 it stays UNAVAILABLE: {index_row(port).get('reason', '')[:160]}")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    err = p.stderr.read()
    check("model 'mlp' UNAVAILABLE" in err and "READY again" in err, "the server's log says both: " +
          " | ".join(ln for ln in err.splitlines() if "mlp" in ln)[:400])
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
