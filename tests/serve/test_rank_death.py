#!/usr/bin/env python3
"""Honest state when a rank dies: an MLP served across 2 ranks by `ringside serve --rank-restarts 1`.
One rank is killed (SIGKILL): the model turns UNAVAILABLE with the reason in the repository index and
/v2/health/ready answers 400 without waiting for a request to fail; the server starts the ranks again
and the model answers as before; the restart is counted in /metrics and said on the server's stderr.
Killed a second time, past --rank-restarts, the model stays UNAVAILABLE, saying so.

usage: test_rank_death.py build/repl/ringside
"""
import json
import os
import shutil
import signal
import sys
import tempfile
import time

import serve_util  # noqa: E402 - beside this file

RINGSIDE = sys.argv[1]
check = serve_util.check


def infer(port):
    st, data = serve_util.request(port, "POST", "/v2/models/mlp/infer",
                   {"inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32", "data": [1, 2, 3, 4, -1, 0, 5, 2]}]})
    return st, json.loads(data)["outputs"][0]["data"] if st == 200 else data


def index_row(port):
    rows = [r for r in json.loads(serve_util.request(port, "POST", "/v2/repository/index")[1]) if r["name"] == "mlp"]
    return rows[0] if rows else {}


def main():
    tmp = tempfile.mkdtemp(prefix="ringside-rankdeath-")
    repo = os.path.join(tmp, "repo")
    serve_util.export_mlp(RINGSIDE, repo, "mlp",
                          'max_batch_size: 8\nparameters { key: "ranks" value: { string_value: "2" } }\n')
    p, ports, _ = serve_util.start(RINGSIDE, serve_util.repo_args(repo, grpc=False, metrics=True) +
                                   ["--rank-restarts", "1"])
    port, mport = ports["http"], ports["metrics"]
    try:
        st, want = infer(port)
        pids = serve_util.rank_pids(p.pid)
        check(st == 200 and len(pids) == 2, f"the model answers from 2 ranks ({pids})")
        os.kill(pids[-1], signal.SIGKILL)
        down = serve_util.wait_for(lambda: serve_util.request(port, "GET", "/v2/models/mlp/ready")[0] != 200, 10)
        row = index_row(port)
        ready = serve_util.request(port, "GET", "/v2/health/ready")[0]
        check(down and row.get("state") == "UNAVAILABLE" and "rank" in row.get("reason", ""),
              f"a rank killed: the model is UNAVAILABLE with the reason, no request needed: {row}")
        check(ready == 400, f"/v2/health/ready answers {ready} while it is down")
        back = serve_util.wait_for(lambda: serve_util.request(port, "GET", "/v2/models/mlp/ready")[0] == 200, 60)
        st, got = infer(port)
        check(back and st == 200 and got == want and len(serve_util.rank_pids(p.pid)) == 2,
              "its ranks restarted, the model answers as before from 2 new ranks")
        check(serve_util.request(port, "GET", "/v2/health/ready")[0] == 200, "the server is ready again")
        _, mt = serve_util.request(mport, "GET", "/metrics")
        check(b'ringside_rank_restarts_total{model="mlp"} 1' in mt, "the restart is counted in /metrics")
        os.kill(serve_util.rank_pids(p.pid)[0], signal.SIGKILL)
        down = serve_util.wait_for(lambda: "not restarted" in index_row(port).get("reason", ""), 10)
        time.sleep(1.0)
        check(down and serve_util.request(port, "GET", "/v2/models/mlp/ready")[0] != 200,
              f"past --rank-restarts 1 it stays UNAVAILABLE: {index_row(port).get('reason', '')[:160]}")
    finally:
        serve_util.stop(p)
    err = p.stderr.read()
    check("model 'mlp' UNAVAILABLE" in err and "READY again" in err, "the server's log says both: " +
          " | ".join(ln for ln in err.splitlines() if "mlp" in ln)[:400])
    shutil.rmtree(tmp, ignore_errors=True)
    return serve_util.finish()


if __name__ == "__main__":
    sys.exit(main())
