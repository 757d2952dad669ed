#!/usr/bin/env bash
# Pipeline parallelism (mode=pipeline), one thread per rank, from the workbench's own output:
#  0. how the stages are cut: the tutorial's MLP (tutorials/12-pipeline.ring) at 2 and 4 ranks under
#     partition=uniform, parameters and time, each stage's measured time per step (its forwards and
#     backwards, GPipe m=8) and the bubble taken apart (schedule + unequal stages + the rest);
#  1. the bubble measured from the ranks' traces (idle share of each step's span, the mean over the
#     steps and the least disturbed step) beside the formula (p-1)/(m+p-1), for p = 2 and 4 stages,
#     m = 1, 2, 4, 8 micro-batches, GPipe and 1F1B, on the same MLP cut by time (balanced stages);
#  2. the GPT at 2 ranks: samples/s and each stage's activations in flight (measured at the allocator)
#     per schedule: naive, GPipe, 1F1B, interleaved.
# All in one run. With more ranks than cores the ranks share them and the figures say so.
#
#   bench/pipeline.sh [--build-dir DIR] [--steps N] [--wait S] [--only 0|1|2]
set -u
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh
build=build-bench steps=10 wait_s=30 only=
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        *) echo "pipeline.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
bench_build repl/ringside || exit 1

stack="mlp 784-1024-1024-1024-1024-1024-10"   # the tutorial's
run() { # run P SCHEDULE M PARTITION: the summary of one run
    "$exe" --no-db -c "set threads=1; model s = $stack seed=1; data d = digits n=6000; train s on d mode=pipeline ranks=$1 schedule=$2 micro=$3 batch=256 steps=$steps partition=$4 eval=off view=off" 2>&1
}
fig() { # fig SUMMARY: "measured least formula schedule unequal rest" from a run's summary
    local out=$1
    local meas least form split
    meas=$(echo "$out" | sed -nE 's/^  bubble: ([0-9.]+)% .*/\1%/p')
    least=$(echo "$out" | sed -nE 's/^ +the least in one step: ([0-9.]+)%$/\1%/p')
    form=$(echo "$out" | sed -nE 's/^ +formula .* = ([0-9.]+)%$/\1%/p')
    split=$(echo "$out" | sed -nE 's/^ += schedule ([-0-9.]+)% \+ unequal stages ([-0-9.]+)% \+ the rest ([-0-9.]+)%$/\1% \2% \3%/p')
    echo "${meas:-?} ${least:-?} ${form:-?} ${split:-? ? ?}"
}
if [ -z "$only" ] || [ "$only" = 0 ]; then
    echo "# stage times by partition: $stack, GPipe m=8, batch 256, $steps steps, 1 thread per rank; $(nproc) CPUs"
    printf "%-3s %-10s %-34s %8s %8s   %s\n" p partition "stages (layers)" bubble formula "each stage's time per step; bubble = schedule + unequal + rest"
    for p in 2 4; do
        for part in uniform parameters time; do
            quiet
            out=$(run "$p" gpipe 8 "$part")
            read -r meas _ form sch une rest <<< "$(fig "$out")"
            cut=$(echo "$out" | sed -nE 's/^  [0-9]+ +([0-9]+:[0-9]+\.\.[0-9]+) .*micro.*/\1/p' | paste -sd ' ' -)
            times=$(echo "$out" | sed -nE 's/^  ([0-9]+) +[0-9]+:[0-9.]+ +([0-9.]+ ms) .*micro.*/stage \1 \2,/p' | paste -sd ' ' - | sed 's/,$//')
            printf "%-3s %-10s %-34s %8s %8s   %s = %s + %s + %s\n" "$p" "$part" "$cut" "$meas" "$form" "$times" "$sch" "$une" "$rest"
            echo "$out" | grep -iE '^error|^rank [0-9]+: ' | head -3
        done
    done
    echo
fi
if [ -z "$only" ] || [ "$only" = 1 ]; then
    echo "# bubble, measured vs (p-1)/(m+p-1): $stack cut by time, batch 256, $steps steps, 1 thread per rank; $(nproc) CPUs"
    printf "%-3s %-3s %-9s %9s %8s %8s   %s\n" p m schedule measured least formula "= schedule + unequal stages + the rest"
    for p in 2 4; do
        for m in 1 2 4 8; do
            for sched in gpipe 1f1b; do
                quiet
                out=$(run "$p" "$sched" "$m" time)
                read -r meas least form sch une rest <<< "$(fig "$out")"
                printf "%-3s %-3s %-9s %9s %8s %8s   = %s + %s + %s\n" "$p" "$m" "$sched" "$meas" "$least" "$form" "$sch" "$une" "$rest"
                echo "$out" | grep -iE '^error|^rank [0-9]+: ' | head -3
            done
        done
    done
fi
[ -n "$only" ] && [ "$only" != 2 ] && exit 0
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
