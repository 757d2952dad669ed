#!/usr/bin/env bash
# ringside's shm all_reduce against Open MPI's MPI_Allreduce (bench/mpi_allreduce.c), as distributions:
# RUNS fresh sets of rank processes of each, interleaved (shm, mpi, mpi, shm, shm, mpi...), so that
# whatever state the machine is in falls on both alike. One run is a sweep over all the sizes. Per
# size it prints min / median / max of busbw (GB/s) for both, the ratio of the medians, the worst
# shm run over MPI's median, and the median times; then the goals:
#   from 1 MiB: median busbw >= 1.5x MPI's and no shm run below 1.0x MPI's median;
#   small messages (up to 4 KiB): median time <= 1.0x MPI's.
#
#   bench/shm_vs_mpi.sh [--build-dir DIR] [--ranks "2 4"] [--sizes 8..64M] [--runs 8] [--wait S]
#                       [--load N] [--mpi-args "..."] [--raw FILE]
#
#   --build-dir  meson build folder (default build-bench; set up and compiled when needed)
#   --runs N     runs of each (default 8)
#   --wait S     before each run, wait up to S seconds (default 30) for the CPUs to go idle
#   --load N     N busy processes (`yes`, not pinned) run beside each run, started after the quiet
#                wait: a machine where builds or tests are running too (default 0)
#   --mpi-args   extra mpirun arguments (default none: mpirun's own placement, as a user gets it)
#   --raw FILE   also write every row: ranks backend run size time_us busbw
# Exit status: the number of goals missed (0: all met).
set -u
cd "$(dirname "$0")/.." || exit 1

build=build-bench ranks="2 4" sizes="8..64M" runs=8 wait_s=30 load=0 mpi_args="" raw=""
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --ranks) ranks=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        --load) load=$2; shift 2 ;;
        --mpi-args) mpi_args=$2; shift 2 ;;
        --raw) raw=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "shm_vs_mpi.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
command -v mpirun >/dev/null || { echo "shm_vs_mpi.sh: mpirun not found: install Open MPI"; exit 0; }
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" --buildtype=release >/dev/null || { echo "shm_vs_mpi.sh: meson setup $build failed" >&2; exit 1; }
fi
ninja -C "$build" repl/ringside bench/mpi_allreduce >/dev/null ||
    { echo "shm_vs_mpi.sh: building ringside and bench/mpi_allreduce in $build failed" >&2; exit 1; }
exe=$build/repl/ringside
mpi_bench=$build/bench/mpi_allreduce
lo=${sizes%%..*} hi=${sizes##*..}
root_flag=""
[ "$(id -u)" = 0 ] && root_flag=--allow-run-as-root

. bench/lib.sh

# One run of each: rows "ranks backend run size time_us busbw" on stdout.
run_shm() {
    "$exe" --no-db -c "bench all_reduce ranks=$1 sizes=$sizes backend=shm view=off" 2>&1 |
        awk -v n="$1" -v r="$2" '/^ +[0-9]+ +[0-9]+ +f32/ {print n, "shm", r, $1, $5, $7}'
}
run_mpi() {
    # shellcheck disable=SC2086 # mpi_args is a list of words
    mpirun $root_flag --oversubscribe $mpi_args -np "$1" "$mpi_bench" -b "$lo" -e "$hi" 2>&1 |
        awk -v n="$1" -v r="$2" '/^ +[0-9]+ +[0-9]+ +float/ {print n, "mpi", r, $1, $5, $7}'
}

hogs=""
hogs_start() { local k; for k in $(seq 1 "$load"); do yes > /dev/null & hogs="$hogs $!"; done; [ "$load" -gt 0 ] && sleep 0.2; }
hogs_stop() { local p; for p in $hogs; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; hogs=""; }

tmp=$(mktemp -d)
trap 'hogs_stop; rm -rf "$tmp"' EXIT
echo "# all_reduce f32 sum, $sizes, $runs interleaved runs each; $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}') (mpirun ${mpi_args:-defaults}); ringside $(git rev-parse --short HEAD 2>/dev/null); $load busy processes beside"
missed=0
for n in $ranks; do
    : > "$tmp/rows"
    for i in $(seq 1 "$runs"); do
        # ABBA order: neither backend always runs right after the other.
        if [ $((i % 2)) = 1 ]; then order="shm mpi"; else order="mpi shm"; fi
        for b in $order; do
            quiet
            hogs_start
            "run_$b" "$n" "$i" >> "$tmp/rows"
            hogs_stop
        done
    done
    [ -n "$raw" ] && cat "$tmp/rows" >> "$raw"
    echo
    echo "## $n ranks: busbw GB/s (min / median / max of $runs runs), time us (median)"
    awk -v runs="$runs" '
        function sortv(a, m,   i, j, t) { for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
        function med(a, m) { return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
        { k = $2 SUBSEP $4; c[k]++; bw[k, c[k]] = $6; tm[k, c[k]] = $5; if (!($4 in seen)) { seen[$4] = 1; sz[++ns] = $4 } }
        END {
            printf "%10s | %-22s | %-22s | %6s %6s | %9s %9s %6s\n", "size", "shm busbw", "MPI busbw", "med", "worst", "shm time", "MPI time", "time"
            printf "%10s | %6s %7s %7s | %6s %7s %7s | %6s %6s | %9s %9s %6s\n", "(B)", "min", "median", "max", "min", "median", "max", "ratio", "ratio", "median", "median", "ratio"
            for (i = 1; i <= ns; i++) {
                s = sz[i]
                for (b = 0; b < 2; b++) {
                    be = b ? "mpi" : "shm"; m = c[be, s]
                    delete x; delete y
                    for (j = 1; j <= m; j++) { x[j] = bw[be SUBSEP s, j]; y[j] = tm[be SUBSEP s, j] }
                    sortv(x, m); sortv(y, m)
                    lo[b] = m ? x[1] : 0; md[b] = m ? med(x, m) : 0; hi[b] = m ? x[m] : 0; tmd[b] = m ? med(y, m) : 0
                }
                rmed = md[1] > 0 ? md[0] / md[1] : 0; rworst = md[1] > 0 ? lo[0] / md[1] : 0; rt = tmd[1] > 0 ? tmd[0] / tmd[1] : 0
                printf "%10s | %6.2f %7.2f %7.2f | %6.2f %7.2f %7.2f | %6.2f %6.2f | %9.2f %9.2f %6.2f\n", s, lo[0], md[0], hi[0], lo[1], md[1], hi[1], rmed, rworst, tmd[0], tmd[1], rt
                if (s >= 1048576) { if (rmed < 1.5) miss_med++; if (rworst < 1.0) miss_worst++ ; nbig++ }
                if (s <= 4096) { if (rt > 1.0) miss_small++; nsmall++ }
            }
            printf "goals: from 1 MiB median >= 1.5x: %s (%d of %d sizes short); no run below 1.0x: %s (%d short); ", miss_med ? "MISSED" : "met", miss_med, nbig, miss_worst ? "MISSED" : "met", miss_worst
            printf "time up to 4 KiB <= 1.0x: %s (%d of %d sizes over)\n", miss_small ? "MISSED" : "met", miss_small, nsmall
            exit (miss_med > 0) + (miss_worst > 0) + (miss_small > 0)
        }' "$tmp/rows"
    missed=$((missed + $?))
done
exit "$missed"
