#!/usr/bin/env bash
# ringside's shm all_reduce against Open MPI's MPI_Allreduce (bench/mpi_allreduce.c), as distributions:
# RUNS fresh sets of rank processes of each, interleaved (the order rotates run by run: shm mpi,
# mpi shm...), so that whatever state the machine is in falls on all alike. One run is a sweep over
# all the sizes. Per size it prints min / median / max of busbw (GB/s) and of time (us) for each, the
# ratio of the medians, the worst shm run over MPI's median; then the goals:
#   from 1 MiB: median busbw >= 1.5x MPI's and no shm run below 1.0x MPI's median;
#   small messages (up to 4 KiB): median time <= 1.0x MPI's.
# and the 1-minute load average the runs started at (other processes on the machine).
#
#   bench/shm_vs_mpi.sh [--build-dir DIR] [--ranks "2 4"] [--sizes 8..64M] [--runs 8] [--wait S]
#                       [--load N] [--bind-none] [--unbound] [--one-cpu] [--baseline EXE] [--mpi-args "..."] [--raw FILE]
#
#   --build-dir  meson build folder (default build-bench; set up and compiled when needed)
#   --runs N     runs of each (default 8)
#   --wait S     before each run, wait up to S seconds (default 30) for the CPUs to go idle
#   --load N     N busy processes (`yes`, not pinned) run beside each run, started after the quiet
#                wait: a machine where builds or tests are running too (default 0)
#                shm runs with bind=core (its default: a core of its own for each rank, in one L3 cache,
#                as mpirun's --bind-to core; dist/launch/bind.c)
#   --bind-none  also runs shm with bind=none (ranks left to the kernel, shm's own per-size placement,
#                dist/shm/place.c), interleaved with the others: what binding buys
#   --unbound    also runs shm with bind=none and RINGSIDE_SHM_BIND=off (the kernel alone places them)
#   --one-cpu    also runs shm with the REPL under `taskset -c 0` (bind=core then says it cannot bind and
#                both ranks share CPU 0): the bad placement a run can fall into unbound, made on purpose
#   --baseline EXE  also runs shm with another ringside binary (a build of an older commit), interleaved
#                with the others: before and after in the same conditions
#   --mpi-args   extra mpirun arguments (default none: mpirun's own placement, as a user gets it)
#   --raw FILE   also write every row: ranks backend run size time_us busbw load1
#   --where FILE for each run, where its ranks ran (bench/rank_cpus.py samples /proc/PID/stat's CPU
#                every 5 ms: each rank's CPUs, same CPU / same core / other L3 shares) beside its
#                1 MiB busbw, a line a run, into FILE: a slow run beside its placement
# Exit status: the number of goals missed (0: all met).
set -u
cd "$(dirname "$0")/.." || exit 1

where_file="" build=build-bench ranks="2 4" sizes="8..64M" runs=8 wait_s=30 load=0 mpi_args="" raw="" backends="shm mpi" base_exe=""
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --ranks) ranks=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        --load) load=$2; shift 2 ;;
        --unbound) backends="$backends shm-unbound"; shift ;;
        --bind-none) backends="$backends shm-none"; shift ;;
        --one-cpu) backends="$backends shm-onecpu"; shift ;;
        --baseline) base_exe=$2; backends="$backends baseline"; shift 2 ;;
        --mpi-args) mpi_args=$2; shift 2 ;;
        --raw) raw=$2; shift 2 ;;
        --where) where_file=$2; shift 2 ;;
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

# Runs "$@" (a command that execs, so $! is its pid) and prints its output; with --where, samples where
# the ranks whose command lines hold NAME run, and appends "LABEL: 1 MiB busbw X; where ..." to the file.
watched() {
    local label=$1 name=$2 pid wp=""
    shift 2
    "$@" > "$tmp/out" 2>&1 &
    pid=$!
    if [ -n "$where_file" ]; then python3 bench/rank_cpus.py "$pid" "$name" > "$tmp/where" & wp=$!; fi
    wait "$pid"
    if [ -n "$wp" ]; then
        wait "$wp"
        echo "$label: 1 MiB busbw $(awk '$1 == 1048576 {print $7; exit}' "$tmp/out") GB/s; $(cat "$tmp/where")" >> "$where_file"
    fi
    cat "$tmp/out"
}

# One run of each: rows "ranks backend run size time_us busbw load1" on stdout ($3: the load average).
run_shm() {
    watched "$1 ranks shm run $2" --worker "$exe" --no-db -c "bench all_reduce ranks=$1 sizes=$sizes backend=shm view=off" 2>&1 |
        awk -v n="$1" -v r="$2" -v l="$3" '/^ +[0-9]+ +[0-9]+ +f32/ {print n, "shm", r, $1, $5, $7, l}'
}
run_shm_unbound() {
    watched "$1 ranks shm-unbound run $2" --worker env RINGSIDE_SHM_BIND=off "$exe" --no-db -c "bench all_reduce ranks=$1 sizes=$sizes backend=shm view=off bind=none" 2>&1 |
        awk -v n="$1" -v r="$2" -v l="$3" '/^ +[0-9]+ +[0-9]+ +f32/ {print n, "shm-unbound", r, $1, $5, $7, l}'
}
run_shm_none() {
    watched "$1 ranks shm-none run $2" --worker "$exe" --no-db -c "bench all_reduce ranks=$1 sizes=$sizes backend=shm view=off bind=none" 2>&1 |
        awk -v n="$1" -v r="$2" -v l="$3" '/^ +[0-9]+ +[0-9]+ +f32/ {print n, "shm-none", r, $1, $5, $7, l}'
}
run_shm_onecpu() {
    watched "$1 ranks shm-onecpu run $2" --worker taskset -c 0 "$exe" --no-db -c "bench all_reduce ranks=$1 sizes=$sizes backend=shm view=off" 2>&1 |
        awk -v n="$1" -v r="$2" -v l="$3" '/^ +[0-9]+ +[0-9]+ +f32/ {print n, "shm-onecpu", r, $1, $5, $7, l}'
}
run_baseline() {
    watched "$1 ranks baseline run $2" --worker "$base_exe" --no-db -c "bench all_reduce ranks=$1 sizes=$sizes backend=shm view=off" 2>&1 |
        awk -v n="$1" -v r="$2" -v l="$3" '/^ +[0-9]+ +[0-9]+ +f32/ {print n, "baseline", r, $1, $5, $7, l}'
}
run_mpi() {
    # shellcheck disable=SC2086 # mpi_args is a list of words
    watched "$1 ranks mpi run $2" mpi_allreduce mpirun $root_flag --oversubscribe $mpi_args -np "$1" "$mpi_bench" -b "$lo" -e "$hi" |
        awk -v n="$1" -v r="$2" -v l="$3" '/^ +[0-9]+ +[0-9]+ +float/ {print n, "mpi", r, $1, $5, $7, l}'
}

hogs=""
hogs_start() { local k; for k in $(seq 1 "$load"); do yes > /dev/null & hogs="$hogs $!"; done; [ "$load" -gt 0 ] && sleep 0.2; }
hogs_stop() { local p; for p in $hogs; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; hogs=""; }

tmp=$(mktemp -d)
trap 'hogs_stop; rm -rf "$tmp"' EXIT
echo "# all_reduce f32 sum, $sizes, $runs interleaved runs each; $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}') (mpirun ${mpi_args:-defaults}); ringside $(git rev-parse --short HEAD 2>/dev/null); $load busy processes beside"
[ -n "$base_exe" ] && echo "# baseline: $base_exe"
[ -n "$where_file" ] && : > "$where_file"
[ -z "$base_exe" ] || [ -x "$base_exe" ] || { echo "shm_vs_mpi.sh: --baseline $base_exe is not an executable" >&2; exit 2; }
read -ra bl <<< "$backends"
missed=0
for n in $ranks; do
    : > "$tmp/rows"
    for i in $(seq 1 "$runs"); do
        # The order rotates: no backend always runs right after another (2 of them: shm mpi mpi shm ...).
        k=$(((i - 1) % ${#bl[@]}))
        order="${bl[*]:k} ${bl[*]:0:k}"
        for b in $order; do
            quiet
            read -r l1 _ < /proc/loadavg
            hogs_start
            "run_${b//-/_}" "$n" "$i" "$l1" >> "$tmp/rows"
            hogs_stop
        done
    done
    [ -n "$raw" ] && cat "$tmp/rows" >> "$raw"
    echo
    echo "## $n ranks, $load busy processes beside: busbw (GB/s) and time (us), min / median / max of $runs runs each"
    awk -v runs="$runs" -v backends="$backends" '
        function sortv(a, m,   i, j, t) { for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
        function med(a, m) { return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
        { k = $2 SUBSEP $4; c[k]++; bw[k, c[k]] = $6; tm[k, c[k]] = $5; if (!($4 in seen)) { seen[$4] = 1; sz[++ns] = $4 }
          if (!(($2, $3) in ld)) { ld[$2, $3] = 1; nl++; la[nl] = $7 } }
        END {
            nb = split(backends, be, " ")
            printf "%10s %-12s | %-23s | %-29s |\n", "size", "", "busbw (GB/s)", "time (us)"
            printf "%10s %-12s | %7s %7s %7s | %9s %9s %9s | %s\n", "(B)", "", "min", "median", "max", "min", "median", "max", "shm / MPI (medians; worst: slowest shm run)"
            for (i = 1; i <= ns; i++) {
                s = sz[i]
                for (b = 1; b <= nb; b++) {
                    m = c[be[b], s]
                    delete x; delete y
                    for (j = 1; j <= m; j++) { x[j] = bw[be[b] SUBSEP s, j]; y[j] = tm[be[b] SUBSEP s, j] }
                    sortv(x, m); sortv(y, m)
                    lo[be[b]] = m ? x[1] : 0; md[be[b]] = m ? med(x, m) : 0; hi = m ? x[m] : 0
                    tlo = m ? y[1] : 0; tmd[be[b]] = m ? med(y, m) : 0; thi = m ? y[m] : 0
                    ratios = ""
                    if (be[b] != "shm" && be[b] != "mpi" && md["mpi"] > 0 && tmd["mpi"] > 0)
                        ratios = sprintf("%s / MPI: busbw median %.2fx, worst %.2fx; time median %.2fx", be[b], md[be[b]] / md["mpi"], lo[be[b]] / md["mpi"], tmd[be[b]] / tmd["mpi"])
                    if (be[b] == "mpi" && md["mpi"] > 0 && tmd["mpi"] > 0) {
                        rmed = md["shm"] / md["mpi"]; rworst = lo["shm"] / md["mpi"]; rt = tmd["shm"] / tmd["mpi"]
                        ratios = sprintf("busbw median %.2fx, worst %.2fx; time median %.2fx", rmed, rworst, rt)
                        if (s >= 1048576) { if (rmed < 1.5) miss_med++; if (rworst < 1.0) miss_worst++ ; nbig++ }
                        if (s <= 4096) { if (rt > 1.0) miss_small++; nsmall++ }
                    }
                    printf "%10s %-12s | %7.2f %7.2f %7.2f | %9.2f %9.2f %9.2f | %s\n", b == 1 ? s : "", be[b], lo[be[b]], md[be[b]], hi, tlo, tmd[be[b]], thi, ratios
                }
            }
            sortv(la, nl)
            printf "load average (1 min) as the runs started: min %s median %s max %s\n", la[1], med(la, nl), la[nl]
            printf "goals: from 1 MiB median >= 1.5x: %s (%d of %d sizes short); no run below 1.0x: %s (%d short); ", miss_med ? "MISSED" : "met", miss_med, nbig, miss_worst ? "MISSED" : "met", miss_worst
            printf "time up to 4 KiB <= 1.0x: %s (%d of %d sizes over)\n", miss_small ? "MISSED" : "met", miss_small, nsmall
            exit (miss_med > 0) + (miss_worst > 0) + (miss_small > 0)
        }' "$tmp/rows"
    missed=$((missed + $?))
done
exit "$missed"
