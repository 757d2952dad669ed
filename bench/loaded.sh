#!/usr/bin/env bash
# Training with a busy core: the same steps at 1 and 2 threads while another process (`yes`, pinned
# with taskset to the last CPU) keeps one core busy, with ringside's thread tuner (engine/train/tune.h)
# and without it (RINGSIDE_TUNE_THREADS=off: the OpenMP team of 2 waits at every parallel region for
# the thread that shares the busy core). Prints the median ms/step of each and the 2-thread/1-thread
# ratio, the loaded-core figure: with the tuner it should be <= ~1.
#
#   bench/loaded.sh [--build-dir DIR] [--model mlp|cnn] [--steps N] [--repeat N] [--no-load]
#
#   --build-dir  meson build folder (default build; compiled when needed)
#   --model      network of bench_train (default mlp: ~20 parallel regions a step)
#   --steps      measured steps per run (default 300 for mlp, 100 for cnn)
#   --repeat     runs of each configuration, alternating (default 5); medians are printed
#   --no-load    no competing process (the idle figure, for comparison)
set -u
cd "$(dirname "$0")/.." || exit 1
build=build model=mlp steps="" repeat=5 load=1
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --no-load) load=0; shift ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "loaded.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
[ -n "$steps" ] || { [ "$model" = cnn ] && steps=100 || steps=300; }
ncpu=$(nproc)
if [ "$ncpu" -lt 2 ]; then echo "loaded.sh: needs 2 CPUs or more (this one has $ncpu)"; exit 0; fi
command -v taskset >/dev/null || { echo "loaded.sh: taskset (util-linux) is missing" >&2; exit 1; }
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" --buildtype=release >/dev/null || { echo "loaded.sh: meson setup $build failed" >&2; exit 1; }
fi
meson compile -C "$build" bench/bench_train >/dev/null || { echo "loaded.sh: building bench_train failed" >&2; exit 1; }
bench="$build/bench/bench_train"

yes_pid=""
cleanup() { [ -n "$yes_pid" ] && kill "$yes_pid" 2>/dev/null; }
trap cleanup EXIT INT TERM
last=$((ncpu - 1))
if [ $load = 1 ]; then
    taskset -c "$last" yes >/dev/null &
    yes_pid=$!
fi
read -r l1 _ < /proc/loadavg
echo "machine: $ncpu CPUs, load average $l1 at start; $([ $load = 1 ] && echo "competitor: yes pinned on CPU $last (pid $yes_pid)" || echo "no competitor")"
echo "bench_train --model $model --steps $steps, $repeat runs each, medians (ms/step)"

tmp=$(mktemp -d)
for ((i = 0; i < repeat; i++)); do
    for tune in on off; do
        env RINGSIDE_TUNE_THREADS=$tune "$bench" --model "$model" --threads 1,2 --steps "$steps" --warmup 10 2>&1 |
            awk -v t=$tune -v d="$tmp" '$1 == m { print $6 >> (d "/" t "-" $2); print $NF >> (d "/busy") }' m="$model"
    done
done
med() { sort -g "$1" | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
on1=$(med "$tmp/on-1") on2=$(med "$tmp/on-2") off1=$(med "$tmp/off-1") off2=$(med "$tmp/off-2") busy=$(med "$tmp/busy")
printf '%-26s %10s %10s %14s\n' "" "1 thread" "2 threads" "2t / 1t"
printf '%-26s %10s %10s %14s\n' "tuner on (default)" "$on1" "$on2" "$(awk -v a="$on2" -v b="$on1" 'BEGIN{printf "%.2f", a / b}')"
printf '%-26s %10s %10s %14s\n' "RINGSIDE_TUNE_THREADS=off" "$off1" "$off2" "$(awk -v a="$off2" -v b="$off1" 'BEGIN{printf "%.2f", a / b}')"
echo "CPUs kept busy by other processes during the runs (median, bench_train's 'busy'): $busy"
rm -rf "$tmp"
