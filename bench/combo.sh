#!/usr/bin/env bash
# Parallel layouts of the GPT on 4 ranks, one thread per rank, in one run: samples/s (and tokens/s) of
# one process, then dp4 (DDP), pp4 (a pipeline of 4 stages), tp4 (Megatron tensor parallel), dp2 x pp2
# (two pipelines of 2 stages) and pp2 x tp2 (2 stages, each split over 2 ranks), one line per layout,
# beside each rank's parameter bytes measured at the allocator (the largest rank's).
#
#   bench/combo.sh [--build-dir DIR] [--steps N] [--wait S] [--dim D] [--backend shm|tcp]
#
# A pipeline's rate counts each sample once (its first stage's ranks read them); every layout reads the
# same global batch (16) at the same context (64), so the samples/s compare directly. On a machine with
# fewer cores than ranks the ranks take turns on the CPUs, which a pipeline's bubble and tensor
# parallel's per-layer all-reduces feel most: read the figures with the core count the header prints.
set -u
cd "$(dirname "$0")/.." || exit 1
build=build-bench steps=30 wait_s=60 dim=128 backend=shm
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        --dim) dim=$2; shift 2 ;;
        --backend) backend=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "combo.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
. bench/lib.sh
bench_build repl/ringside || exit 1

ctx=64
cfg="layers=4 heads=4 dim=$dim ctx=$ctx"
topt="batch=16 opt=adamw wd=0.1 clip=1.0 eval=off eval_every=0 view=off steps=$steps backend=$backend"
echo "# gpt $cfg on the built-in text, global batch 16, $steps steps, 1 thread per rank, backend=$backend;" \
    "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %10s %10s %9s %12s  %s\n' layout samples/s tokens/s vs-single params/rank "train ..."
single=
for layout in "single|" "dp4|mode=ddp ranks=4" "pp4|mode=pipeline ranks=4 micro=4" "tp4|mode=tensor ranks=4" \
    "dp2 x pp2|mode=pipeline ranks=4 dp=2 micro=4" "pp2 x tp2|mode=pipeline ranks=4 tp=2 micro=4"; do
    name=${layout%%|*} mode=${layout#*|}
    quiet
    out=$(COLUMNS=200 "$exe" --no-db -c "set threads=1; data t = text ctx=$ctx; model g = gpt $cfg; train g on t ${mode:-threads=1} $topt" 2>&1)
    # one process prints tokens/s; ranks print samples/s in all (each sample is ctx tokens)
    tps=$(echo "$out" | sed -nE 's/^trained.* ([0-9]+) tokens\/s.*/\1/p')
    if [ -n "$tps" ]; then
        sps=$(awk -v t="$tps" -v c=$ctx 'BEGIN { printf "%d", t / c }')
    else
        sps=$(echo "$out" | tr '\n' ' ' | sed -nE 's/.*trained.* ([0-9]+) samples\/s in +all.*/\1/p')
        tps=$(awk -v s="${sps:-0}" -v c=$ctx 'BEGIN { printf "%d", s * c }')
    fi
    [ "$name" = single ] && single=$sps
    ratio=$(awk -v a="${sps:-0}" -v b="${single:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
    # the largest rank's parameter pool after the last step (single: the model's)
    par=$(echo "$out" | awk '/^memory per rank/ { on = 1; next } on && /^  [0-9]+ / { print $2, $3 } on && !/^  / { on = 0 }' |
        sort -k2,2 -k1,1g | tail -1)
    [ -z "$par" ] && par=$(echo "$out" | sed -nE 's/^model g: .* ([0-9]+) parameters.*/\1/p' |
        awk '{ printf "%.2f MiB", $1 * 4 / 1048576 }')
    printf '%-10s %10s %10s %9s %12s  %s\n' "$name" "${sps:-?}" "${tps:-?}" "$ratio" "${par:-?}" "${mode:-threads=1}"
    echo "$out" | grep -iE '^(error|train:)' | head -2
done
