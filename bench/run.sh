#!/usr/bin/env bash
# ringside against PyTorch (CPU) on the same training steps: the MLP and the CNN at batch 64 on
# Fashion-MNIST, 1 and 2 threads. Every configuration runs in its own process (so peak RSS is per
# run), ringside and PyTorch alternating, and one side-by-side table closes the run.
#
#   bench/run.sh [--build-dir DIR] [--threads "1 2"] [--steps N] [--repeat N] [--keep-coretype] [--wait S]
#
#   --build-dir      meson build folder (default build-bench; set up and compiled when needed)
#   --threads        thread counts to run (default "1 2")
#   --steps          measured steps for every configuration (default: each program's own)
#   --repeat N       run every configuration N times, alternating which side goes first, and keep each
#                    side's fastest run (default 2: this is a shared, noisy machine)
#   --keep-coretype  keep an inherited OPENBLAS_CORETYPE instead of letting ringside pick the kernel
#   --wait S         before each run, wait up to S seconds (default 120) for the other processes to
#                    leave the CPUs idle (below 0.2 CPUs busy over a second); 0 = do not wait
# RINGSIDE_BLAS=native keeps OpenBLAS's own kernel choice (see engine/cpu/blas.h).
set -u
cd "$(dirname "$0")/.." || exit 1

build=build-bench threads="1 2" steps="" keep_coretype=0 wait_s=120 repeat=2
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --keep-coretype) keep_coretype=1; shift ;;
        --wait) wait_s=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" --buildtype=release >/dev/null || { echo "run.sh: meson setup $build failed" >&2; exit 1; }
fi
meson compile -C "$build" bench/bench_train >/dev/null || { echo "run.sh: building bench_train failed" >&2; exit 1; }
bench="$build/bench/bench_train"

if [ -n "${OPENBLAS_CORETYPE:-}" ] && [ $keep_coretype = 0 ]; then
    echo "note: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE was inherited from the environment; unset for these runs so"
    echo "      ringside chooses the kernel (--keep-coretype keeps it; RINGSIDE_BLAS=native keeps OpenBLAS's own)"
    unset OPENBLAS_CORETYPE
fi
step_arg=()
[ -n "$steps" ] && step_arg=(--steps "$steps")

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs online, $(uname -sr)"
read -r l1 l5 _ < /proc/loadavg
echo "load average at start: $l1 (1 min), $l5 (5 min)$(awk -v l="$l1" 'BEGIN{if (l > 0.5) print "  -- other work is running: figures may be disturbed"}')"
blas_line=$("$bench" --info 2>&1 | sed -n 's/^BLAS: //p')
echo "ringside BLAS: ${blas_line:-unknown}"

torch_ok=1 torch_why=""
if ! torch_ver=$(python3 -c 'import torch; print(torch.__version__, "| oneDNN:", torch.backends.mkldnn.is_available(), "| CPU capability:", torch.backends.cpu.get_cpu_capability())' 2>&1); then
    torch_ok=0
    torch_why=$(printf '%s\n' "$torch_ver" | tail -1)
    echo "torch: not available ($torch_why): the PyTorch comparison is skipped, ringside runs alone"
else
    echo "torch: $torch_ver"
fi
echo

# kv KEY LINE -> value of KEY in a `kv k=v ...` line
kv() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }

# busy CPU seconds of the whole machine so far (/proc/stat: user nice system irq softirq steal)
busy_s() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print ($2+$3+$4+$7+$8+$9)/hz; exit}' /proc/stat; }
# Waits until the CPUs stay idle for a second (< 0.2 CPUs busy), at most $wait_s seconds.
wait_quiet() {
    local waited=0 b0 b1 busy
    [ "$wait_s" -gt 0 ] || return 0
    while :; do
        b0=$(busy_s); sleep 1; b1=$(busy_s)
        busy=$(awk -v a="$b0" -v b="$b1" 'BEGIN{printf "%.2f", b - a}')
        awk -v x="$busy" 'BEGIN{exit !(x < 0.2)}' && return 0
        waited=$((waited + 1))
        if [ $waited -ge "$wait_s" ]; then
            echo "  (other processes still keep $busy CPUs busy after ${wait_s}s; running anyway)"
            return 0
        fi
        [ $waited = 1 ] && echo "  (waiting for other processes to leave the CPUs: $busy busy)"
    done
}

# run_side rs|torch MODEL THREADS: one configuration in its own process; keeps the faster run's kv line.
run_side() {
    local side=$1 model=$2 t=$3 out rc line prev
    wait_quiet
    if [ "$side" = rs ]; then
        out=$("$bench" --model "$model" --threads "$t" --kv "${step_arg[@]}" 2>&1)
    else
        out=$(python3 bench/torch_train.py --model "$model" --threads "$t" --kv "${step_arg[@]}" 2>&1)
    fi
    rc=$?
    line=$(printf '%s\n' "$out" | grep '^kv model=' | tail -1)
    if [ $rc != 0 ] || [ -z "$line" ]; then
        printf '%-8s %s threads=%s failed (exit %s):\n' "$side" "$model" "$t" "$rc"
        printf '%s\n' "$out" | tail -5
        return
    fi
    printf '%-8s %-3s %d thr: %s\n' "$([ "$side" = rs ] && echo ringside || echo torch)" "$model" "$t" \
        "$(printf '%s\n' "$out" | grep "^$model " | tail -1)"
    if [ "$side" = rs ]; then prev=${RS[$model,$t]:-}; else prev=${TO[$model,$t]:-}; fi
    if [ -z "$prev" ] || awk -v a="$(kv samples_per_s "$line")" -v b="$(kv samples_per_s "$prev")" 'BEGIN{exit !(a > b)}'; then
        if [ "$side" = rs ]; then RS[$model,$t]=$line; else TO[$model,$t]=$line; fi
    fi
}

declare -A RS TO
any_disturbed=0
for model in mlp cnn; do
    for t in $threads; do
        for ((rep = 1; rep <= repeat; rep++)); do
            # Alternate who goes first, so neither side always follows the other.
            if [ $((rep % 2)) = 1 ] || [ $torch_ok = 0 ]; then order="rs torch"; else order="torch rs"; fi
            for side in $order; do
                [ "$side" = torch ] && [ $torch_ok = 0 ] && continue
                run_side "$side" "$model" "$t"
            done
        done
    done
done
read -r l1 _ < /proc/loadavg

echo
echo "Training throughput, batch 64, Adam lr 1e-3, Fashion-MNIST (data in memory before the clock starts)"
printf '%-5s %3s | %12s %12s %7s | %9s %9s | %9s %9s | %6s %8s | %9s\n' model thr "ringside" "torch" "ratio" \
    "rs ms" "torch ms" "rs RSS" "torch RSS" "BLAS" "BLAS" "busy"
printf '%-5s %3s | %12s %12s %7s | %9s %9s | %9s %9s | %6s %8s | %9s\n' "" "" "samples/s" "samples/s" "rs/torch" \
    "/step" "/step" "MiB" "MiB" "share" "GFLOP/s" "rs/torch"
for model in mlp cnn; do
    for t in $threads; do
        r=${RS[$model,$t]:-} o=${TO[$model,$t]:-}
        [ -z "$r" ] && [ -z "$o" ] && continue
        rs_sps=$(kv samples_per_s "$r") to_sps=$(kv samples_per_s "$o")
        ratio=$(awk -v a="$rs_sps" -v b="$to_sps" 'BEGIN{if (a != "" && b > 0) printf "%.2f", a/b; else print "-"}')
        mib() { awk -v k="$1" 'BEGIN{if (k != "") printf "%.0f", k/1024; else print "-"}'; }
        busy=$(awk -v a="$(kv others "$r")" -v b="$(kv others "$o")" \
            'BEGIN{printf "%s/%s", a == "" ? "-" : sprintf("%.2f", a), b == "" ? "-" : sprintf("%.2f", b)}')
        disturbed=$(awk -v a="$(kv others "$r")" -v b="$(kv others "$o")" 'BEGIN{if (a > 0.15 || b > 0.15) print " *"}')
        [ -n "$disturbed" ] && any_disturbed=1
        printf '%-5s %3s | %12.0f %12s %7s | %9.3f %9s | %9s %9s | %5.1f%% %8.1f | %9s%s\n' "$model" "$t" "${rs_sps:-0}" \
            "$( [ -n "$to_sps" ] && printf '%.0f' "$to_sps" || echo -)" "$ratio" "$(kv ms_per_step "$r")" \
            "$( [ -n "$o" ] && printf '%.3f' "$(kv ms_per_step "$o")" || echo -)" \
            "$(mib "$(kv peak_rss_kb "$r")")" "$(mib "$(kv peak_rss_kb "$o")")" \
            "$(awk -v s="$(kv blas_share "$r")" 'BEGIN{printf "%.1f", 100*s}')" "$(kv blas_gflops "$r")" \
            "$busy" "$disturbed"
    done
done
echo
echo "Each side: the fastest of $repeat runs; ratio > 1: ringside faster."
echo "RSS: getrusage ru_maxrss of each configuration's own process. Both hold the train and test splits as"
echo "f32 (~209 MiB); torch's figure also holds its libraries (the default wheel loads CUDA's too)."
echo "BLAS share: ringside's time in OpenBLAS products / step time; products called inside an OpenMP region"
echo "count time/team-size (engine/cpu/prof.h). Phase split and other columns: the per-run lines above."
echo "busy: CPUs kept busy by other processes during each timed run (/proc/stat minus the benchmark itself)."
[ $any_disturbed = 1 ] && echo "* other work ran beside this configuration (busy > 0.15): its figures are disturbed; run again."
[ $torch_ok = 0 ] && echo "PyTorch comparison skipped: $torch_why"
echo "load average at end: $l1 (1 min)"
exit 0
