#!/usr/bin/env bash
# CPU time of a training step (one thread) in fp32 and bf16, for one or more ringside binaries side
# by side (e.g. before and after a change to the products): on a shared machine the wall-clock
# samples/s of bench/amp.sh mostly measure the wait for a core, CPU time measures the work. Per model,
# each binary trains 20 and 20+N steps (`/usr/bin/time`, user + sys); the difference over N is the
# step's CPU time, without loading the data. Models and batches as bench/amp.sh.
#
#   bench/amp_cpu.sh [--steps N] RINGSIDE...
set -u
cd "$(dirname "$0")/.." || exit 1
steps=200
if [ "${1:-}" = --steps ]; then steps=$2; shift 2; fi
[ $# -ge 1 ] || { echo "amp_cpu.sh: name one or more ringside binaries (try build/repl/ringside)" >&2; exit 2; }

cpu() { # BIN DATA MODEL BATCH PREC STEPS -> CPU seconds
    /usr/bin/time -f '%U %S' "$1" --no-db -c "data d = $2; model m = $3; train m on d steps=$6 batch=$4 eval=off threads=1 precision=$5" \
        2>&1 >/dev/null | tail -1 | awk '{print $1 + $2}'
}

row() { # NAME DATA MODEL BATCH
    local b p a z
    for b in "${bins[@]}"; do
        for p in fp32 bf16; do
            a=$(cpu "$b" "$2" "$3" "$4" $p 20)
            z=$(cpu "$b" "$2" "$3" "$4" $p $((20 + steps)))
            printf '%-4s %-5s %-40s %8.3f ms/step\n' "$1" $p "$b" "$(awk -v a="$a" -v z="$z" -v n="$steps" 'BEGIN {print (z - a) / n * 1000}')"
        done
    done
}

bins=("$@")
echo "== CPU time per training step, 1 thread, over $steps steps; load average $(cut -d' ' -f1-3 /proc/loadavg)"
row mlp fashion "mlp 784-256-256-10" 64
row cnn fashion "seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)" 64
row gpt "text fortunes" "gpt layers=4 heads=4 dim=128 ctx=64" 12
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
