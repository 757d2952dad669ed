#!/usr/bin/env bash
# Mixed precision on the CPU: training samples/s (tokens/s for the GPT) of the same steps in fp32,
# bf16 and fp16 (`train ... precision=`), one thread, for the MLP and CNN of bench_train on
# Fashion-MNIST and nanoGPT's tiny GPT on Debian's fortunes. Each row runs the three precisions back to
# back, `--repeat` times alternating, and prints the median with the 1-minute load average before the
# row (a figure taken under load says so). What to expect here (docs/engine.md "Mixed precision"):
# bf16 products of 2^20 multiply-adds and more run on oneDNN's bf16 matmul where the CPU has
# AVX512-BF16, smaller ones and all fp16 ones are emulated (operands rounded, fp32 products), which
# costs the rounding and gains nothing. On a shared machine bench/amp_cpu.sh (CPU time) is steadier. Batch 64 for
# the MLP and CNN, 12 for the GPT (nanoGPT's CPU configuration, as bench/gpt.sh).
#
#   bench/amp.sh [--build-dir DIR] [--steps N] [--repeat N] [--wait S]
set -u
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh
build=build-bench steps=300 repeat=3 wait_s=30
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        *) echo "amp.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
bench_build repl/ringside || exit 1

median() { sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "-")}'; }

# run NAME DATA MODEL UNIT BATCH: one row
run() {
    local name=$1 data=$2 model=$3 unit=$4 batch=$5 p r
    declare -A got
    quiet
    local load
    load=$(cut -d' ' -f1 /proc/loadavg)
    for ((r = 0; r < repeat; r++)); do
        for p in fp32 bf16 fp16; do
            v=$("$exe" --no-db -c "data d = $data; model m = $model; train m on d steps=$steps batch=$batch eval=off threads=1 precision=$p" 2>&1 |
                sed -n "s|.* \([0-9]*\) $unit.*|\1|p" | tail -1)
            got[$p]="${got[$p]:-} ${v:-0}"
        done
    done
    local f b h
    f=$(tr ' ' '\n' <<<"${got[fp32]}" | grep . | median)
    b=$(tr ' ' '\n' <<<"${got[bf16]}" | grep . | median)
    h=$(tr ' ' '\n' <<<"${got[fp16]}" | grep . | median)
    printf '%-5s %-10s %10s %10s %10s %8s %8s %6s\n' "$name" "$unit" "$f" "$b" "$h" \
        "$(awk -v a="$b" -v b="$f" 'BEGIN {printf "%.2f", b ? a / b : 0}')" \
        "$(awk -v a="$h" -v b="$f" 'BEGIN {printf "%.2f", b ? a / b : 0}')" "$load"
}

echo "== training throughput at 1 thread, $steps steps, median of $repeat"
printf '%-5s %-10s %10s %10s %10s %8s %8s %6s\n' model unit fp32 bf16 fp16 bf16/32 fp16/32 load
run mlp fashion "mlp 784-256-256-10" samples/s 64
run cnn fashion "seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)" samples/s 64
run gpt "text fortunes" "gpt layers=4 heads=4 dim=128 ctx=64" tokens/s 12
