#!/usr/bin/env bash
# Training across ranks on Fashion-MNIST: samples/s of one process, DataParallel (2 threads), DDP
# (2 ranks) and FSDP ZeRO-3 (2 ranks), one thread per rank (this machine has 2 cores), for the MLP
# and the CNN; the share of DDP's all-reduce time hidden behind backward; and each rank's memory by
# pool for DDP and ZeRO 1, 2, 3 on 4 ranks, beside the ZeRO paper's formula. All from the workbench's
# own output, in one run.
#
#   bench/parallel.sh [--build-dir DIR] [--epochs N] [--wait S]
set -u
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh
build=build-bench epochs=1 wait_s=60
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --epochs) epochs=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        *) echo "parallel.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
bench_build repl/ringside || exit 1

mlp="mlp 784-256-256-10"
cnn="seq conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)"
echo "# Fashion-MNIST, batch 64 (global), Adam, $epochs epoch(s), 1 thread per rank or replica; $(nproc) CPUs"
printf "%-5s %-22s %12s %10s %s\n" model mode samples/s test_acc "comm hidden"
for name in mlp cnn; do
    spec=${!name}
    for mode in "single" "dp ranks=2" "ddp ranks=2" "fsdp ranks=2 zero=3"; do
        quiet
        out=$("$exe" --no-db -c "set threads=1; data f = fashion; model m = $spec; train m on f epochs=$epochs batch=64 mode=$mode" 2>&1)
        sps=$(echo "$out" | grep -E '^trained' | sed -E 's/.* ([0-9]+) samples\/s.*/\1/')
        acc=$(echo "$out" | grep -E '^trained' | sed -nE 's/.*test accuracy ([0-9.]+).*/\1/p')
        hid=$(echo "$out" | sed -nE 's/^communication: .* ([0-9]+)% of it hidden.*/\1%/p')
        printf "%-5s %-22s %12s %10s %s\n" "$name" "$mode" "${sps:-?}" "${acc:--}" "${hid:--}"
        echo "$out" | grep -iE '^error' | head -2
    done
done
echo
echo "# memory per rank at 4 ranks, MLP $mlp (one epoch of digits; the figures do not depend on the data)"
for mode in "ddp" "fsdp zero=1" "fsdp zero=2" "fsdp zero=3"; do
    echo "## $mode"
    "$exe" --no-db -c "model m = $mlp; data d = digits n=6000; train m on d mode=$mode ranks=4 eval=off" 2>&1 |
        sed -n '/^memory per rank/,/^  paper/p'
done
