#!/usr/bin/env bash
# A soak of `ringside serve`: the CNN of the serve figures (2 conv + pool, 1x28x28) compiled into an
# fp32 plan (batch 64, threads=1) and served from model.plan (platform ringside_plan, 2 instances,
# dynamic batching up to 64), driven over HTTP at concurrency 64 for --minutes N (default 10) by
# bench/serve_soak, which checks every answer against the same plan run in its own process one sample
# at a time. Prints the server's RSS (VmRSS of /proc/PID/status) when loaded, after each minute and
# at the end, with the answers, wrong ones and errors of each minute, and the load average.
# Not a test (it runs for minutes): run it by hand.
# --step S reports every S seconds instead of every 60 (N steps in all: a quick look).
#   bench/soak.sh [--build-dir DIR] [--minutes N] [--concurrency C] [--step S]
set -u
cd "$(dirname "$0")/.." || exit 1
build=build-bench
minutes=10
conc=64
step=60
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift ;;
    --minutes) minutes=$2; shift ;;
    --concurrency) conc=$2; shift ;;
    --step) step=$2; shift ;;
  esac
  shift
done
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release >/dev/null || exit 1
ninja -C "$build" repl/ringside bench/serve_soak >/dev/null || exit 1
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/repo/cnnplan/1"
"$build/repl/ringside" --no-db -c "model c = seq conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10); export c $tmp/cnn.onnx; compile $tmp/cnn.onnx batch=64 threads=1 -> $tmp/repo/cnnplan/1/model.plan" >/dev/null || exit 1
cat > "$tmp/repo/cnnplan/config.pbtxt" <<'PB'
platform: "ringside_plan"
max_batch_size: 64
instance_group [ { count: 2 kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 0 }
PB
"$build/repl/ringside" serve --repo "$tmp/repo" --http 0 --grpc -1 --metrics -1 > "$tmp/log" 2>&1 &
srv=$!
for _ in $(seq 100); do grep -q 'KServe v2' "$tmp/log" && break; sleep 0.1; done
port=$(grep -o '127.0.0.1:[0-9]*' "$tmp/log" | head -1 | cut -d: -f2)
[ -n "$port" ] || { cat "$tmp/log"; exit 1; }
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$srv/status" 2>/dev/null || echo 0; }
start=$(rss)
echo "# soak: cnnplan (fp32 plan), HTTP, concurrency $conc, $minutes steps of $step s, every answer checked; $(getconf _NPROCESSORS_ONLN) CPUs; OMP_NUM_THREADS=$OMP_NUM_THREADS"
echo "start (loaded, no request yet): server RSS $start kB; load $(cut -d' ' -f1-3 /proc/loadavg)"
fail=0
n_all=0; wrong_all=0; err_all=0
for m in $(seq "$minutes"); do
  line=$("$build/bench/serve_soak" "$port" cnnplan "$tmp/repo/cnnplan/1/model.plan" "$conc" "$step") || fail=1
  kill -0 "$srv" 2>/dev/null || { echo "step $m: the server died"; cat "$tmp/log"; exit 1; }
  [ "$m" = 1 ] && first=$(rss)
  echo "step $m ($((m * step)) s): $line; server RSS $(rss) kB; load $(cut -d' ' -f1 /proc/loadavg)"
  set -- $line
  n_all=$((n_all + $1)); wrong_all=$((wrong_all + $4)); err_all=$((err_all + $6))
done
end=$(rss)
echo "end: $n_all answers checked, $wrong_all wrong, $err_all errors; server RSS $start kB at start, ${first:-$end} kB after step 1, $end kB at the end ($(( end - ${first:-$end} )) kB since step 1)"
exit $fail
