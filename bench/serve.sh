#!/usr/bin/env bash
# `ringside serve` under load: requests/s and p50/p99 latency at concurrency 1, 8 and 64 over HTTP
# (binary tensors, one sample per request, keep-alive connections) and over gRPC (ModelInfer with
# raw_input_contents, one HTTP/2 connection per client thread) for the CNN of the ONNX figures,
# beside the same file run in-process through serve/'s backend; then the per-request server overhead
# on a trivial model (a 4x4 linear layer): HTTP and gRPC p50 at concurrency 1 minus the in-process
# p50 (Triton's own figure for that overhead is 41 us), and the same through tritonclient when it can
# be imported (bench/serve_tritonclient.py: the Python client's own time included); then tokens/s
# streamed over ModelStreamInfer from a GPT served decoupled, beside `generate` in-process on the same
# model shape. Then the same CNN compiled into plans (fp32, and int8 calibrated on Fashion-MNIST;
# threads=1 like the instances) served from model.plan (platform ringside_plan) over HTTP and gRPC at
# concurrency 1, 8 and 64 beside the plan in-process at the batch the server's 2 instances run when
# full (concurrency c: batch ceil(c/2) on min(c,2) threads), with the ratio served / in-process (goal
# >= 0.9 at 64).
#   bench/serve.sh [--build-dir DIR] [--seconds S] [--plans-only]
set -u
cd "$(dirname "$0")/.." || exit 1
build=build-bench
secs=3
plans_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift ;;
    --seconds) secs=$2; shift ;;
    --plans-only) plans_only=1 ;;
  esac
  shift
done
# One OpenMP thread per instance by default: the server's parallelism is its instances (Triton's
# advice for CPU instances too); both sides of every comparison run with the same setting.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release >/dev/null || exit 1
ninja -C "$build" repl/ringside bench/serve_load bench/serve_grpc_load >/dev/null || exit 1
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/repo/cnn/1" "$tmp/repo/tiny/1" "$tmp/repo/gpt/1" "$tmp/repo/cnnplan/1" "$tmp/repo/cnnplan8/1"
"$build/repl/ringside" --no-db -c "data f = fashion; model c = seq conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10); export c $tmp/repo/cnn/1/model.onnx; model t = seq in=4 linear(4); export t $tmp/repo/tiny/1/model.onnx; \
compile $tmp/repo/cnn/1/model.onnx batch=64 threads=1 -> $tmp/repo/cnnplan/1/model.plan; \
compile $tmp/repo/cnn/1/model.onnx precision=int8 calib=f batch=64 threads=1 -> $tmp/repo/cnnplan8/1/model.plan" >/dev/null || exit 1
for m in cnn cnnplan cnnplan8; do
  cat > "$tmp/repo/$m/config.pbtxt" <<'PB'
max_batch_size: 64
instance_group [ { count: 2 kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 0 }
PB
done
printf 'max_batch_size: 8\n' > "$tmp/repo/tiny/config.pbtxt"
# The GPT: `generate`'s default shape on a 27-character vocabulary (space and a-z), served decoupled
# with two instances; a text of those characters gives `generate` the same vocabulary in-process.
gpt="gpt layers=4 heads=4 dim=128 ctx=64 vocab=27"
alphabet=" abcdefghijklmnopqrstuvwxyz"
for _ in $(seq 40); do printf '%s' "$alphabet"; done > "$tmp/text.txt"
"$build/repl/ringside" --no-db -c "model g = $gpt; save g $tmp/repo/gpt/1/model.safetensors" >/dev/null || exit 1
printf '{"chars": [32' > "$tmp/repo/gpt/1/vocab.json"
for c in $(seq 97 122); do printf ', %d' "$c"; done >> "$tmp/repo/gpt/1/vocab.json"
printf ']}\n' >> "$tmp/repo/gpt/1/vocab.json"
cat > "$tmp/repo/gpt/config.pbtxt" <<'PB'
instance_group [ { count: 2 } ]
model_transaction_policy { decoupled: true }
PB
"$build/repl/ringside" serve --repo "$tmp/repo" --http 0 --grpc 0 --metrics -1 > "$tmp/log" 2>&1 &
srv=$!
for _ in $(seq 100); do grep -q 'KServe v2' "$tmp/log" && break; sleep 0.1; done
port=$(grep -o '127.0.0.1:[0-9]*' "$tmp/log" | head -1 | cut -d: -f2)
gport=$(grep -o 'gRPC on 127.0.0.1:[0-9]*' "$tmp/log" | head -1 | cut -d: -f2)
[ -n "$port" ] || { cat "$tmp/log"; exit 1; }
# plan_rows NAME: the plan served over HTTP and gRPC beside itself in-process at the same batch sizes.
plan_rows() {
  local name=$1 plan="$tmp/repo/$1/1/model.plan" c t b inp h g
  echo "# $name: the CNN as a $2 plan (model.plan, platform ringside_plan), 2 instances, delay 0; load $(cut -d' ' -f1-3 /proc/loadavg)"
  for c in 1 8 64; do
    t=$(( c < 2 ? c : 2 )); b=$(( (c + 1) / 2 ))
    inp=$("$build/bench/serve_load" --inproc "$plan" "$secs" "$t" "$b")
    h=$("$build/bench/serve_load" "$port" "$name" 1x28x28 "$c" "$secs")
    g=$("$build/bench/serve_grpc_load" "$gport" "$name" 1x28x28 "$c" "$secs")
    printf '%s\n%s\n%s\n' "$inp" "$h" "$g"
    echo "$inp|$h|$g" | awk -F'|' -v c="$c" '{ split($1, a, " "); split($2, h, " "); split($3, g, " ");
      for (i = 1; i <= length(a); i++) if (a[i] == "samples/s") ref = a[i - 1];
      printf "  ratio at concurrency %d: HTTP %.2fx, gRPC %.2fx of the plan in-process (%s samples/s)\n", c, h[4] / ref, g[4] / ref, ref }'
  done
}
# What the front end and the client reach on this machine with next to no model: the ceiling the
# served plans' rows meet (client and server share the CPUs).
ceiling() {
  echo "# the front end's ceiling: the trivial model (linear 4->4) at concurrency 64, client on the same CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$build/bench/serve_load" "$port" tiny 4 64 "$secs"
  "$build/bench/serve_grpc_load" "$gport" tiny 4 64 "$secs"
}
if [ $plans_only = 1 ]; then
  plan_rows cnnplan fp32
  plan_rows cnnplan8 int8
  ceiling
  exit 0
fi
echo "# CNN (2 conv + pool, 1x28x28), 2 instances, dynamic batching (delay 0); $secs s per row; $(getconf _NPROCESSORS_ONLN) CPUs; OMP_NUM_THREADS=$OMP_NUM_THREADS; load $(cut -d' ' -f1 /proc/loadavg)"
"$build/bench/serve_load" --inproc "$tmp/repo/cnn/1/model.onnx" "$secs" 2
for c in 1 8 64; do "$build/bench/serve_load" "$port" cnn 1x28x28 "$c" "$secs"; done
for c in 1 8 64; do "$build/bench/serve_grpc_load" "$gport" cnn 1x28x28 "$c" "$secs"; done
echo "# trivial model (linear 4->4): per-request server overhead = HTTP or gRPC p50 - in-process p50 (Triton: 41 us); load $(cut -d' ' -f1 /proc/loadavg)"
"$build/bench/serve_load" --inproc "$tmp/repo/tiny/1/model.onnx" "$secs" | head -1
"$build/bench/serve_load" "$port" tiny 4 1 "$secs"
"$build/bench/serve_grpc_load" "$gport" tiny 4 1 "$secs"
if python3 -c 'import tritonclient.grpc, tritonclient.http' 2>/dev/null; then
  echo "# the same through Triton's Python clients (the client library's own time included)"
  python3 bench/serve_tritonclient.py "$port" "$gport" tiny 4
fi
echo "# GPT ($gpt), 2 instances: tokens streamed over gRPC ModelStreamInfer (one response per token), beside generate in-process"
"$build/repl/ringside" --no-db -c "data t = text $tmp/text.txt; model g = $gpt; generate g prompt=the n=2000 data=t" | tail -1
for c in 1 2; do "$build/bench/serve_grpc_load" --stream "$gport" gpt 2000 "$c"; done
plan_rows cnnplan fp32
plan_rows cnnplan8 int8
ceiling
