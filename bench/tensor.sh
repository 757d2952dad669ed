#!/usr/bin/env bash
# Tensor parallelism (Megatron) on the GPT against one process, one thread per rank, in one run:
#   1. training tokens/s: one process, mode=tensor on 2 ranks (shm and tcp), and DDP on 2 ranks for
#      comparison, at nanoGPT's CPU configuration (4 layers, 4 heads, 128 wide, context 64, batch 12)
#      and at a wider one (256) where the split products are larger than the all-reduces;
#   2. parameter memory per rank, measured at the allocator (the @mem lines of the last step), beside
#      the formula 4(R + S/tp + b): R replicated parameters, S split ones, b the row-parallel biases rank
#      0 keeps; and the all-reduces per step.
#
#   bench/tensor.sh [--build-dir DIR] [--steps N] [--wait S]
set -u
cd "$(dirname "$0")/.." || exit 1
build=build-bench steps=100 wait_s=60
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "tensor.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release >/dev/null || exit 1
ninja -C "$build" repl/ringside >/dev/null || exit 1
exe=$build/repl/ringside

. bench/lib.sh

ctx=64
topt="batch=12 opt=adamw wd=0.1 clip=1.0 eval=off view=off steps=$steps"
echo "# GPT on the built-in text, $steps steps, global batch 12, context $ctx, 1 thread per rank; $(nproc) CPUs"
for dim in 128 256; do
    cfg="layers=4 heads=4 dim=$dim ctx=$ctx"
    echo "== gpt $cfg"
    printf '%-22s %12s %10s\n' mode tokens/s vs-single
    single=
    for mode in "single" "tensor ranks=2" "tensor ranks=2 backend=tcp" "ddp ranks=2"; do
        quiet
        out=$("$exe" --no-db -c "data t = text ctx=$ctx; model g = gpt $cfg; train g on t mode=$mode $topt threads=1" 2>&1)
        # one process prints tokens/s; ranks print samples/s in all (each sample is ctx tokens)
        tps=$(echo "$out" | sed -nE 's/^trained.* ([0-9]+) tokens\/s.*/\1/p')
        [ -z "$tps" ] && tps=$(echo "$out" | sed -nE 's/^trained.* ([0-9]+) samples\/s in all.*/\1/p' |
            awk -v c=$ctx '{ printf "%d", $1 * c }')
        [ "$mode" = single ] && single=$tps
        ratio=$(awk -v a="${tps:-0}" -v b="${single:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
        printf '%-22s %12s %10s\n' "$mode" "${tps:-?}" "$ratio"
        echo "$out" | grep -iE '^error' | head -2
        if [ "$mode" = "tensor ranks=2" ]; then mem=$out; fi
    done
    echo "-- parameter memory per rank, tensor ranks=2 (measured; the formula under it)"
    echo "$mem" | grep -E '^model g:' | sed 's/^/   /'
    echo "$mem" | sed -n '/^memory per rank/,/^  paper/p'
    echo "$mem" | grep -E '^rank [0-9]: tensor shard'
done
echo
echo "== all-reduces of one step (gpt layers=4): 2 per split pair (attention, MLP) and layer = 16, on every rank"
"$exe" --db /tmp/ringside-tensor-bench.db -c "data t = text ctx=$ctx; model g = gpt layers=4 heads=4 dim=128 ctx=$ctx; train g on t mode=tensor ranks=2 batch=12 steps=3 eval=off view=off" >/dev/null 2>&1
sqlite3 /tmp/ringside-tensor-bench.db "SELECT rank, step, count(*) AS all_reduces, sum(bytes) AS bytes, printf('%.3f', 1e3 * sum(value)) AS ms FROM events WHERE kind='phase' AND name='comm' AND chunk >= 0 AND json_extract(detail, '\$.op') = 'all_reduce' GROUP BY rank, step ORDER BY step, rank" 2>/dev/null |
    sed 's/^/   rank|step|all_reduces|bytes|ms: /' | head -6
rm -f /tmp/ringside-tensor-bench.db /tmp/ringside-tensor-bench.db-wal /tmp/ringside-tensor-bench.db-shm
