#!/usr/bin/env bash
# Served against in-process throughput for a two-input INT64 model: input_ids and attention_mask
# (INT64, 128 tokens a sample) each cast to FP32 (tests/serve/typed_models.py: two_input_ids, served by
# the cast backend), 2 instances with dynamic batching up to 64; bench/serve_load drives it over HTTP
# (binary tensors, one sample a request) at concurrency 64 on the same machine, then runs the same
# file in-process (batch 1 on one thread, batch 64 on 2 threads). The client shares the CPUs with the
# server: say so with the figures. Not a test: run it by hand.
#   bench/serve_typed.sh [--build-dir DIR] [--seconds S]
set -u
cd "$(dirname "$0")/.." || exit 1
build=build-bench
secs=5
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift ;;
    --seconds) secs=$2; shift ;;
  esac
  shift
done
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release >/dev/null || exit 1
ninja -C "$build" repl/ringside bench/serve_load >/dev/null || exit 1
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
python3 tests/serve/typed_models.py "$tmp/m" >/dev/null || exit 1
mkdir -p "$tmp/repo/ids/1"
cp "$tmp/m/two_input_ids.onnx" "$tmp/repo/ids/1/model.onnx"
cat > "$tmp/repo/ids/config.pbtxt" <<'PB'
max_batch_size: 64
instance_group [ { count: 2 kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 0 }
PB
"$build/repl/ringside" serve --repo "$tmp/repo" --http 0 --grpc -1 --metrics -1 > "$tmp/log" 2>&1 &
srv=$!
for _ in $(seq 100); do grep -q "on http://" "$tmp/log" && break; sleep 0.1; done
port=$(sed -n 's/.*on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/log" | head -1)
[ -n "$port" ] || { cat "$tmp/log"; exit 1; }
echo "two-input INT64 model (input_ids, attention_mask: 128 tokens), $(getconf _NPROCESSORS_ONLN) CPUs shared by client and server"
"$build/bench/serve_load" "$port" ids "input_ids:INT64:128,attention_mask:INT64:128" 64 "$secs"
kill "$srv"; wait "$srv" 2>/dev/null; srv=
"$build/bench/serve_load" --inproc "$tmp/repo/ids/1/model.onnx" "$secs" 2
