#!/usr/bin/env python3
"""The latency histograms on the metrics port of `ringside serve` (raw HTTP, no Python packages): after
N requests answered and one refused, each histogram counts exactly the N successes, its buckets are
cumulative and end at +Inf = _count, its _sum is the statistics' success time and within Triton's
cumulative counter (which adds the refused request's time).

usage: test_histogram.py build/repl/ringside
"""
import json
import sys
import tempfile
import threading
import serve_util  # noqa: E402 - beside this file

RINGSIDE = sys.argv[1]
check = serve_util.check


def main():
    with tempfile.TemporaryDirectory(prefix="ringside-hist-") as repo:
        serve_util.export_mlp(RINGSIDE, repo, "mlp",
                              "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 2000 }\n")
        with serve_util.serving(RINGSIDE, repo, grpc=False, metrics=True) as (_, ports, _):
            run(ports)
    return serve_util.finish()


def run(ports):
    port, mport = ports["http"], ports.get("metrics")
    check(mport is not None, "the server started with a metrics port")
    body = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    n_seq, n_conc = 23, 8
    codes = [serve_util.request(port, "POST", "/v2/models/mlp/infer", body)[0] for _ in range(n_seq)]
    res = []
    ts = [threading.Thread(target=lambda: res.append(serve_util.request(port, "POST", "/v2/models/mlp/infer", body)[0]))
          for _ in range(n_conc)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    bad = dict(body)
    bad["inputs"] = [{"name": "input", "shape": [1, 5], "datatype": "FP32", "data": [1, 2, 3, 4, 5]}]
    st_bad, _ = serve_util.request(port, "POST", "/v2/models/mlp/infer", bad)
    n = n_seq + n_conc
    check(all(c == 200 for c in codes + res) and st_bad == 400, f"{n} requests answered, one refused")

    mt = serve_util.metrics(mport)
    lab = 'model="mlp",version="1"'
    for name in ("ringside_inference_request_duration_us", "ringside_inference_queue_duration_us"):
        buckets = [(k, v) for k, v in mt.items() if k.startswith(name + "_bucket{" + lab)]
        les = [k.split('le="')[1].rstrip('"}') for k, _ in buckets]
        vals = [v for _, v in buckets]
        check(len(buckets) == 18 and les[-1] == "+Inf" and
              all(float(a) < float(b) for a, b in zip(les[:-1], les[1:-1])),
              f"{name}: 18 buckets in increasing order of le, the last +Inf")
        check(all(a <= b for a, b in zip(vals, vals[1:])), f"{name}: the buckets are cumulative")
        check(vals[-1] == n and mt[f"{name}_count{{{lab}}}"] == n,
              f"{name}: +Inf and _count are the {n} successes ({vals[-1]:.0f}, the refused one left out)")
    check(mt[f"nv_inference_request_success{{{lab}}}"] == n and
          mt[f"nv_inference_request_failure{{{lab}}}"] == 1, "Triton's success and failure counters agree")
    s = mt[f"ringside_inference_request_duration_us_sum{{{lab}}}"]
    c = mt[f"nv_inference_request_duration_us{{{lab}}}"]
    check(s - 1.0 <= c <= s + 1e6, f"the histogram's _sum ({s:.1f} us) is within Triton's cumulative "
          f"nv_inference_request_duration_us ({c:.0f}, which adds the refused request's time)")
    q = mt[f"ringside_inference_queue_duration_us_sum{{{lab}}}"]
    check(0 <= q <= s, f"time queued ({q:.1f} us) is part of the requests' ({s:.1f} us)")
    # statistics say the same count as the histogram
    st, data = serve_util.request(port, "GET", "/v2/models/mlp/stats")
    ms = json.loads(data)["model_stats"][0]["inference_stats"]
    check(ms["success"]["count"] == n and abs(ms["success"]["ns"] / 1e3 - s) < 1.0,
          "the statistics extension agrees with the histogram")


if __name__ == "__main__":
    sys.exit(main())
