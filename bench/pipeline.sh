#!/usr/bin/env bash
# Pipeline parallelism (mode=pipeline), one thread per rank, from the workbench's own output:
#  1. the bubble measured from the ranks' traces (idle share of each step's span) beside the formula
#     (p-1)/(m+p-1), for p = 2 and 4 stages, m = 1, 2, 4, 8 micro-batches, GPipe and 1F1B, on a model
#     of equal linear layers cut by parameters (balanced stages);
#  2. the GPT at 2 ranks: samples/s and each stage's activations in flight (measured at the allocator)
#     per schedule: naive, GPipe, 1F1B, interleaved.
# All in one run. With more ranks than cores the ranks share them and the figures say so.
#
#   bench/pipeline.sh [--build-dir DIR] [--steps N] [--wait S]
set -u
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh
build=build-bench steps=20 wait_s=30
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        *) echo "pipeline.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
bench_build repl/ringside || exit 1

# equal stages: 8 linear layers of 256 (the first reads 784 pixels: the cut by parameters evens it out)
stack="mlp 784-256-256-256-256-256-256-256-10"
echo "# bubble, measured vs (p-1)/(m+p-1): $stack, batch 256, $steps steps, 1 thread per rank; $(nproc) CPUs"
printf "%-3s %-3s %-9s %10s %9s %12s\n" p m schedule measured formula samples/s
for p in 2 4; do
    for m in 1 2 4 8; do
        for sched in gpipe 1f1b; do
            quiet
            out=$("$exe" --no-db -c "set threads=1; model s = $stack; data d = digits n=6000; train s on d mode=pipeline ranks=$p schedule=$sched micro=$m batch=256 steps=$steps eval=off view=off" 2>&1)
            meas=$(echo "$out" | sed -nE 's/^  bubble: ([0-9.]+)% .*/\1%/p')
            form=$(echo "$out" | sed -nE 's/^ +formula .* = ([0-9.]+)%$/\1%/p')
            sps=$(echo "$out" | grep -E '^trained' | sed -E 's/.* ([0-9]+) samples\/s.*/\1/')
            printf "%-3s %-3s %-9s %10s %9s %12s\n" "$p" "$m" "$sched" "${meas:-?}" "${form:-?}" "${sps:-?}"
            echo "$out" | grep -iE '^error|^rank [0-9]+: ' | head -3
        done
    done
done
echo
gpt="gpt layers=4 heads=4 dim=64 ctx=64"
echo "# the GPT ($gpt) at 2 ranks, batch 16, $steps steps: samples/s and activations in flight per stage"
printf "%-26s %10s   %s\n" schedule samples/s "activations in flight per stage (measured; what the schedule holds)"
for s in "naive" "gpipe micro=4" "1f1b micro=4" "gpipe micro=8" "1f1b micro=8" "interleaved micro=4 virtual=2"; do
    quiet
    out=$("$exe" --no-db -c "set threads=1; data t = text ctx=64; model g = $gpt; train g on t mode=pipeline ranks=2 schedule=$s batch=16 steps=$steps eval=off view=off" 2>&1)
    sps=$(echo "$out" | grep -E '^trained' | sed -E 's/.* ([0-9]+) samples\/s.*/\1/')
    acts=$(echo "$out" | sed -nE 's/^  ([0-9]+) +[0-9]+:.* ([0-9.]+ [KMG]?i?B \([0-9]+ micro\)) +([0-9]+) micro$/rank \1: \2 [\3]/p' | paste -sd ';' -)
    printf "%-26s %10s   %s\n" "$s" "${sps:-?}" "${acts:-?}"
    echo "$out" | grep -iE '^error|^rank [0-9]+: ' | head -3
done
