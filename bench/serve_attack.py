#!/usr/bin/env python3
"""`ringside serve` under an attacker on the same machine (loopback only): a normal client's latency
with and without the attack, and the server's peak RSS for a protobuf bomb.

The attack: --slow HTTP connections that trickle a partial request a byte every --trickle seconds
(reconnecting when the server closes one) and --idle-grpc gRPC connections that send nothing, spread
over source addresses 127.0.0.2.. (--addrs of them for each kind). The normal client (127.0.0.1) sends
one JSON inference request at a time on a fresh connection each, and its p50/p99 are printed without
and then with the attack held; then the server's threads and RSS, and what /metrics says it refused.
The bomb: a ModelInferRequest of --bomb-entries empty `inputs` entries (21M: 40 MiB), the server's
VmHWM (/proc) before and after it and the answer.

Run it for each binary to compare (say, main's and this tree's):
  bench/serve_attack.py build/repl/ringside [--slow 1000] [--idle-grpc 2000] [--requests 300]
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import grpc


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def normal_client(port, n, body):
    lat, errors = [], 0
    for _ in range(n):
        t = time.perf_counter()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("POST", "/v2/models/mlp/infer", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            c.close()
            ok = r.status == 200
        except OSError:
            ok = False
        lat.append(time.perf_counter() - t)
        errors += not ok
    lat.sort()
    return lat[len(lat) // 2] * 1e3, lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3, errors


class Attack:
    def __init__(self, port, gport, slow, idle, addrs, trickle):
        self.port, self.gport, self.trickle = port, gport, trickle
        self.stop = threading.Event()
        self.slow = [None] * slow
        self.src = [f"127.0.0.{2 + i % addrs}" for i in range(slow)]
        self.grpc = []
        for i in range(idle):
            try:
                s = socket.socket()
                s.bind((f"127.0.0.{2 + addrs + i % addrs}", 0))
                s.connect(("127.0.0.1", gport))
                self.grpc.append(s)
            except OSError:
                pass
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def open(self, i):
        try:
            s = socket.socket()
            s.bind((self.src[i], 0))
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", self.port))
            self.slow[i] = s
        except OSError:
            self.slow[i] = None

    def run(self):
        for i in range(len(self.slow)):
            self.open(i)
        line = b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 100000
        k = 0
        while not self.stop.wait(self.trickle):
            for i, s in enumerate(self.slow):
                try:
                    if s is None or s.send(line[k:k + 1]) != 1:
                        raise OSError
                except OSError:  # closed by the server: the attacker comes back
                    if s:
                        s.close()
                    self.open(i)
            k += 1

    def held(self):
        return sum(s is not None for s in self.slow), len(self.grpc)

    def end(self):
        self.stop.set()
        self.t.join()
        for s in self.slow + self.grpc:
            if s:
                s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ringside")
    ap.add_argument("--slow", type=int, default=1000)
    ap.add_argument("--idle-grpc", type=int, default=2000)
    ap.add_argument("--addrs", type=int, default=8)
    ap.add_argument("--trickle", type=float, default=2.0)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--bomb-entries", type=int, default=21 << 20)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ringside-attack-")
    repo = os.path.join(tmp, "repo")
    os.makedirs(os.path.join(repo, "mlp", "1"))
    subprocess.run([a.ringside, "--no-db", "-c", f"model m = mlp 4-16-3 seed=3; export m {repo}/mlp/1/model.onnx"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(repo, "mlp", "config.pbtxt"), "w") as f:
        f.write("max_batch_size: 8\n")
    p = subprocess.Popen([a.ringside, "serve", "--repo", repo, "--http", "0", "--grpc", "0", "--metrics", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        m = re.search(r"http://[\d.]+:(\d+) .*gRPC on [\d.]+:(\d+).*metrics on http://[\d.]+:(\d+)", line)
        if m:
            port, gport, mport = (int(x) for x in m.groups())
            break
    print(f"binary {a.ringside}; CPU: {os.cpu_count()} cores, client and server on the same machine")
    body = json.dumps({"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})
    try:
        normal_client(port, 20, body)
        p50, p99, err = normal_client(port, a.requests, body)
        print(f"no attack:   normal client p50 {p50:.2f} ms  p99 {p99:.2f} ms  errors {err}/{a.requests}  "
              f"server threads {status(p.pid, 'Threads')}  RSS {status(p.pid, 'VmRSS') / 1024:.0f} MB")
        att = Attack(port, gport, a.slow, a.idle_grpc, a.addrs, a.trickle)
        time.sleep(3)
        hs, hg = att.held()
        p50, p99, err = normal_client(port, a.requests, body)
        th, rss = status(p.pid, "Threads"), status(p.pid, "VmRSS")
        att.end()
        print(f"attack ({a.slow} slow HTTP opened, {hs} held; {hg} idle gRPC opened):  normal client p50 {p50:.2f} ms"
              f"  p99 {p99:.2f} ms  errors {err}/{a.requests}  server threads {th}  RSS {rss / 1024:.0f} MB")
        try:
            c = http.client.HTTPConnection("127.0.0.1", mport, timeout=10)
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
            refused = [ln for ln in text.splitlines() if ln.startswith("ringside_refused") and not ln.endswith(" 0")]
            print("  refused: " + ("; ".join(refused) if refused else "none (every connection within the limits)"))
        except OSError:
            pass
        time.sleep(1)
        ch = grpc.insecure_channel(f"127.0.0.1:{gport}", options=[("grpc.max_send_message_length", -1)])
        infer = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        bomb = b"\x0a\x03mlp" + b"\x2a\x00" * a.bomb_entries
        hwm0 = status(p.pid, "VmHWM")
        t = time.perf_counter()
        try:
            infer(bomb, timeout=300)
            ans = "OK"
        except grpc.RpcError as e:
            ans = f"{e.code()}: {e.details()[:120]}"
        dt = time.perf_counter() - t
        hwm1 = status(p.pid, "VmHWM")
        print(f"protobuf bomb ({len(bomb) / 2**20:.0f} MiB, {a.bomb_entries} empty inputs): peak RSS {hwm0 / 1024:.0f}"
              f" -> {hwm1 / 1024:.0f} MB (+{(hwm1 - hwm0) / 1024:.0f} MB) in {dt:.2f} s; answer {ans}")
        ch.close()
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
