#!/usr/bin/env bash
# Generation tokens/s at nanoGPT's CPU configuration (4 layers, 4 heads, 128 wide, context 64), one
# thread, for n = ctx/2 (the text fits the context) and n = 4 ctx (it goes past it): the KV cache
# (the default: nanoGPT's text, the window recomputed in one batched forward per token once it
# slides), cache=off (recomputing the window for every token, nanoGPT's loop) and window=shift (the
# faster option whose text differs past the context). The modes are interleaved round by round in
# one process, so a busy CPU slows them alike; the median of the rounds is printed. The model is
# untrained (speed does not depend on the weights); the built-in corpus gives the vocabulary.
#
#   bench/generate.sh [--build-dir DIR] [--rounds N] [--threads N] [--wait S]
set -u
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh
build=build-bench rounds=5 threads=1 wait_s=30
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        -h|--help) bench_help; exit 0 ;;
        *) echo "generate.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
bench_build repl/ringside || exit 1

ctx=64
modes=("cache=on" "cache=off" "cache=on window=shift")
script="set threads=$threads; data t = text ctx=$ctx; model g = gpt layers=4 heads=4 dim=128 ctx=$ctx"
keys=""
for r in $(seq "$rounds"); do
    for n in $((ctx / 2)) $((4 * ctx)); do
        for m in "${modes[@]}"; do
            script="$script; generate g n=$n seed=$r $m"
            keys="$keys|$n $m"
        done
    done
done
quiet
echo "== generation tokens/s, gpt layers=4 heads=4 dim=128 ctx=$ctx, $threads thread(s), median of $rounds rounds"
echo "== $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
"$exe" --no-db -c "$script" 2>&1 | awk -v ctx="$ctx" -v keys="${keys#|}" '
    BEGIN { split(keys, order, "|") }
    /^[0-9]+ tokens in / { key = order[++seen]; for (i = 1; i <= NF; i++) if ($(i) == "tokens/s") v[key] = v[key] " " $(i - 1) }
    END {
        printf "%-6s %-24s %12s %10s\n", "n", "mode", "tokens/s", "vs off"
        split("cache=on|cache=off|cache=on window=shift", ms, "|")
        for (k = 0; k < 2; k++) {
            n = k ? 4 * ctx : ctx / 2
            off = med(v[n " cache=off"])
            for (j = 1; j <= 3; j++) {
                t = med(v[n " " ms[j]])
                printf "%-6d %-24s %12.0f %9.2fx\n", n, ms[j], t, (off > 0 ? t / off : 0)
            }
        }
    }
    function med(s,   a, c, i, j, x) {
        c = split(s, a, " ")
        for (i = 2; i <= c; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
        return c ? (c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2) : 0
    }'
