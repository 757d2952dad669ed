#!/usr/bin/env python3
"""Requests/s and p50/p99 of one client over HTTP for a model served in one process, across 2 ranks as
pipeline stages, and as tensor shards (what the extra hops cost: server -> rank 0 -> rank 1 -> rank 0).
usage: bench/serve_ranks.py build/repl/ringside [SPEC] [N]"""
import http.client, json, os, re, signal, subprocess, sys, tempfile, time

exe = sys.argv[1]
spec = sys.argv[2] if len(sys.argv) > 2 else "mlp 256-1024-1024-10 seed=1"
n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
repo = os.path.join(tempfile.mkdtemp(prefix="ringside-bench-ranks-"), "repo")
os.makedirs(f"{repo}/m/1")
subprocess.run([exe, "--no-db", "-c", f"model m = {spec}; export m {repo}/m/1/model.onnx"], check=True,
               stdout=subprocess.DEVNULL)
k = int(re.search(r"mlp (\d+)", spec).group(1))
for name, extra in (("pipeline", "pipeline"), ("tensor", "tensor")):
    os.makedirs(f"{repo}/m_{name}/1")
    os.link(f"{repo}/m/1/model.onnx", f"{repo}/m_{name}/1/model.onnx")
    with open(f"{repo}/m_{name}/config.pbtxt", "w") as f:
        f.write(f'max_batch_size: 8\nparameters {{ key: "ranks" value: {{ string_value: "2" }} }}\n'
                f'parameters {{ key: "ranks_mode" value: {{ string_value: "{extra}" }} }}\n')
with open(f"{repo}/m/config.pbtxt", "w") as f:
    f.write("max_batch_size: 8\n")
p = subprocess.Popen([exe, "serve", "--repo", repo, "--http", "0", "--grpc", "-1", "--metrics", "-1"],
                     stdout=subprocess.PIPE, text=True)
port = None
for line in p.stdout:
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if m:
        port = int(m.group(1))
        break
body = json.dumps({"inputs": [{"name": "input", "shape": [1, k], "datatype": "FP32", "data": [0.5] * k}]})
c = http.client.HTTPConnection("127.0.0.1", port)
print(f"{spec}, {n} sequential requests of 1 sample over HTTP (one keep-alive connection)")
for model in ("m", "m_pipeline", "m_tensor"):
    lat = []
    for i in range(n + 20):
        t = time.perf_counter()
        c.request("POST", f"/v2/models/{model}/infer", body=body, headers={"Content-Type": "application/json"})
        c.getresponse().read()
        if i >= 20:
            lat.append(time.perf_counter() - t)
    lat.sort()
    print(f"  {model:12s} {n / sum(lat):8.0f} req/s  p50 {lat[len(lat) // 2] * 1e6:7.0f} us  "
          f"p99 {lat[int(len(lat) * 0.99)] * 1e6:7.0f} us")
p.send_signal(signal.SIGTERM)
p.wait()
