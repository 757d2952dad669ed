#!/usr/bin/env bash
# all_reduce across ranks: ringside's `bench all_reduce` on the shm, tcp and mpi backends, side by side
# with Open MPI's own MPI_Allreduce (bench/mpi_allreduce.c) in the same run, for each world size.
# Every configuration is a fresh set of rank processes; the sweep is 8 B .. 64 MiB, doubling.
#
#   bench/coll.sh [--build-dir DIR] [--ranks "2 4"] [--sizes 8..64M] [--backends "shm tcp mpi"] [--wait S]
#
#   --build-dir  meson build folder (default build-bench; set up and compiled when needed)
#   --wait S     before each run, wait up to S seconds (default 60) for the CPUs to go idle
# Columns: time (us, slowest rank) and busbw (GB/s, nccl-tests' bus factor 2(n-1)/n) per backend;
# the last two columns compare shm with Open MPI: busbw ratio (goal >= 1 from 1 MiB) and time ratio
# (goal <= 1.5 for small messages).
set -u
cd "$(dirname "$0")/.." || exit 1

build=build-bench ranks="2 4" sizes="8..64M" backends="shm tcp mpi" wait_s=60
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --ranks) ranks=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --backends) backends=$2; shift 2 ;;
        --wait) wait_s=$2; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "coll.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" --buildtype=release >/dev/null || exit 1
fi
ninja -C "$build" repl/ringside bench/mpi_allreduce >/dev/null || exit 1
exe=$build/repl/ringside
mpi_bench=$build/bench/mpi_allreduce
lo=${sizes%%..*} hi=${sizes##*..}
root_flag=""
[ "$(id -u)" = 0 ] && root_flag=--allow-run-as-root

. bench/lib.sh

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# all_reduce, f32 sum, $sizes; $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}'); ringside $(git rev-parse --short HEAD 2>/dev/null)"
for n in $ranks; do
    for b in $backends; do
        quiet
        "$exe" --no-db -c "bench all_reduce ranks=$n sizes=$sizes backend=$b" 2>&1 |
            awk '/^ +[0-9]+ +[0-9]+ +f32/ {print $1, $5, $7}' > "$tmp/$b-$n"
    done
    quiet
    mpirun $root_flag --oversubscribe -np "$n" "$mpi_bench" -b "$lo" -e "$hi" 2>&1 |
        awk '/^ +[0-9]+ +[0-9]+ +float/ {print $1, $5, $7}' > "$tmp/ompi-$n"
    echo
    echo "## $n ranks"
    printf "%10s" "size"
    for b in $backends ompi; do printf " | %-9s %8s" "${b/ompi/MPI_Allreduce}" ""; done
    printf " | %7s %7s\n" "shm/MPI" "shm/MPI"
    printf "%10s" "(B)"
    for b in $backends ompi; do printf " | %9s %8s" "time(us)" "busbw"; done
    printf " | %7s %7s\n" "busbw" "time"
    awk -v files="$(for b in $backends ompi; do printf '%s ' "$tmp/$b-$n"; done)" '
        BEGIN {
            nf = split(files, f, " ")
            for (k = 1; k <= nf; k++)
                while ((getline line < f[k]) > 0) {
                    split(line, a, " ")
                    t[k, a[1]] = a[2]; bw[k, a[1]] = a[3]
                    if (k == 1) { sizes[++ns] = a[1] }
                }
            for (i = 1; i <= ns; i++) {
                s = sizes[i]
                printf "%10s", s
                for (k = 1; k <= nf; k++)
                    if ((k, s) in t) printf " | %9.2f %8.2f", t[k, s], bw[k, s]; else printf " | %9s %8s", "-", "-"
                if ((1, s) in t && (nf, s) in t && bw[nf, s] > 0 && t[nf, s] > 0)
                    printf " | %7.2f %7.2f\n", bw[1, s] / bw[nf, s], t[1, s] / t[nf, s]
                else printf " | %7s %7s\n", "-", "-"
            }
        }'
done
