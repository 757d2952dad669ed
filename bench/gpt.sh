#!/usr/bin/env bash
# The tiny GPT against PyTorch eager, side by side in one run, at nanoGPT's CPU configuration
# (4 layers, 4 heads, 128 wide, context 64, batch 12) on the same text (Debian's fortunes):
#   1. training tokens/s with 1 and 2 threads (ringside `train`, bench/gpt_torch.py);
#   2. with --long: validation loss after 2000 iterations (AdamW lr 1e-3 cosine to 1e-4, warm-up 100,
#      weight decay 0.1, clip 1.0, dropout 0) on 2400 validation windows, both sides;
#   3. generation tokens/s with and without the KV cache.
# PyTorch's lines say "torch: not installed" when it is missing.
#
#   bench/gpt.sh [--build-dir DIR] [--steps N] [--long] [--wait S]
set -u
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh
build=build-bench steps=300 long=0 wait_s=60
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --long) long=1; shift ;;
        --wait) wait_s=$2; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        *) echo "gpt.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
bench_build repl/ringside || exit 1

cfg="layers=4 heads=4 dim=128 ctx=64"
topt="batch=12 opt=adamw wd=0.1 clip=1.0"
echo "== training tokens/s, $cfg, batch 12, $steps steps"
printf '%-10s %14s %14s %8s\n' threads ringside pytorch ratio
for t in 1 2; do
    quiet
    r=$("$exe" --no-db -c "data t = text fortunes; model g = gpt $cfg; train g on t steps=$steps $topt eval=off threads=$t" 2>&1 |
        sed -n 's/.*, \([0-9]*\) tokens\/s.*/\1/p' | tail -1)
    quiet
    p=$(python3 bench/gpt_torch.py --threads "$t" --steps "$steps" --wd 0.1 2>&1 | sed -n 's/.*steps, \([0-9]*\) tokens\/s.*/\1/p')
    ratio=$(awk -v a="${r:-0}" -v b="${p:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
    printf '%-10s %14s %14s %8s\n' "$t" "${r:-?}" "${p:-n/a}" "$ratio"
done

if [ "$long" = 1 ]; then
    echo "== validation loss after 2000 iterations (1 thread each)"
    quiet
    "$exe" --no-db -c "data t = text fortunes; model g = gpt $cfg; train g on t steps=2000 $topt lr=1e-3 sched=cosine warmup=100 min_lr=1e-4 eval_every=2000 eval_samples=2400 threads=1" 2>&1 | grep -E "val loss|trained"
    quiet
    python3 bench/gpt_torch.py --threads 1 --steps 2000 --lr 1e-3 --min-lr 1e-4 --warmup 100 --wd 0.1 --eval-samples 2400
fi

echo "== generation, 500 characters after training $steps steps"
"$exe" --no-db -c "data t = text fortunes; model g = gpt $cfg; train g on t steps=$steps $topt eval=off threads=1; generate g n=500 seed=3; generate g n=500 seed=3 cache=off" 2>&1 |
    grep -E "tokens in"
