#!/usr/bin/env bash
# torchvision's resnet18 and mobilenet_v3_small (random weights, 64x64, TorchScript exporter: as
# tests/plan/export_torchvision.py makes them) compiled at fp32, bf16 and int8 (int8 calibrated on 64
# Fashion-MNIST training images scaled to 64x64, where installed) for batch 64, then timed against ONNX
# Runtime fp32 on the same file by bench/plan_ort.py at 1 and 2 threads, batch 1 and 64: ORT's time
# over the plan's, and ORT's own int8 (quantize_static on the same file and calibration images,
# bench/plan_ort_int8.py) as one more column, all taking turns in the same rounds (PLAN_ROUNDS, 3).
# Then the same with oneDNN capped to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 RINGSIDE_BLAS=keep
# OPENBLAS_CORETYPE=Haswell: the plans compiled and run as on an AVX2-only CPU; ONNX Runtime has no
# such cap and runs this CPU's own kernels on both lines).
# At the end: one table of every cell against issue 26's goals (bench/plan_goals.py: fp32 >= 1.25x at
# batch 1 and >= 1.2x at 64; int8 >= 2x with VNNI, >= 1.3x without; bf16 >= 2x with native bf16), and
# for each plan that misses one, where its time goes (bench/plan_bound.py: per kernel, its share of
# the time, GFLOP/s and fraction of this core's peak as bench/peak_flops measures it).
# Figures, not a test; needs torch and torchvision.
#   bench/plan_vision.sh [--build-dir DIR] [--runs N] [--models "resnet18 mobilenet_v3_small"]
#                        [--threads "1 2"] [--isa "native AVX2"] [--no-bound]
set -u
cd "$(dirname "$0")/.." || exit 1
. bench/lib.sh
build=build
runs=20
models="resnet18 mobilenet_v3_small"
threads="1 2"
isas="native AVX2"
bound=1
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift ;;
    --runs) runs=$2; shift ;;
    --models) models=$2; shift ;;
    --threads) threads=$2; shift ;;
    --isa) isas=$2; shift ;;
    --no-bound) bound=0 ;;
    -h|--help) bench_help; exit 0 ;;
  esac
  shift
done
bench_build repl/ringside tests/plan/run-plan-onnx bench/peak_flops || exit 1
rs=$exe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 bench/plan_bound.py --cpu
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(git log -1 --format='%h %s' | cut -c1-70); load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp" $models <<'PY' || exit 1
import sys
sys.path.insert(0, "tests/plan")
import numpy as np
import export_torchvision as tv
out, names = sys.argv[1], sys.argv[2:]
rng = np.random.default_rng(0)
x, what = tv.images(64, "t10k", rng)
cal, _ = tv.images(64, "train", rng)
x.tofile(f"{out}/x.f32")
cal.tofile(f"{out}/cal.f32")
for n in names:
    tv.export(n, f"{out}/{n}.onnx", False)
print(f"# {' and '.join(names)} at 64x64; calibration: {what.replace('t10k', 'train')}")
PY
"$build/bench/peak_flops" > "$tmp/peaks.txt"
echo "# one core's peak (bench/peak_flops, GFLOP/s; int8 GOP/s): $(sed 's/^peak //' "$tmp/peaks.txt" | paste -sd, | sed 's/,/, /g')"
# ORT's int8 is the same file on both lines (ORT is not capped)
for m in $models; do
  python3 bench/plan_ort_int8.py --quantize "$tmp/$m.onnx" "$tmp/cal.f32" "$tmp/$m.ort8.onnx" | sed "s/^# /# $m: /"
done
cap=(ONEDNN_MAX_CPU_ISA=AVX2 RINGSIDE_BLAS=keep OPENBLAS_CORETYPE=Haswell)
for isa in $isas; do
  env=()
  [ "$isa" = AVX2 ] && env=("${cap[@]}")
  for m in $models; do
    d=$tmp/$isa/$m
    mkdir -p "$d"
    for prec in fp32 bf16 int8; do
      env "${env[@]}" "$build/tests/plan/run-plan-onnx" "$tmp/$m.onnx" $prec "$tmp/x.f32" 64 "$tmp/cal.f32" 64 \
        "$tmp/y.f32" 64 "$d/$prec.plan" > "$d/$prec.txt" || { cat "$d/$prec.txt"; exit 1; }
    done
    target=$(grep -m1 -o 'on cpu ([^)]*)' "$d/fp32.txt" | sed 's/.*, //; s/)//')
    echo "## $m $isa $target" | tee -a "$tmp/results.txt"
    echo "# plans' stays-fp32 lines:"
    grep -h "^report: .*\(stays fp32\|fp32 in an int8\)" "$d"/*.txt | sed 's/^report: /#   /' | sort | head -6
    ort8=()
    [ -f "$tmp/$m.ort8.onnx" ] && ort8=(--ort "ORT int8=$tmp/$m.ort8.onnx")
    env "${env[@]}" PLAN_THREADS="$threads" python3 bench/plan_ort.py "$rs" "$tmp/$m.onnx" "$runs" \
      "$d/fp32.plan" "$d/bf16.plan" "$d/int8.plan" "${ort8[@]}" | tee -a "$tmp/results.txt"
  done
done
echo
echo "# Summary: ORT fp32 time / plan time (goal), $runs runs x ${PLAN_ROUNDS:-3} rounds a cell; load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/plan_goals.py "$tmp/results.txt" > "$tmp/summary.txt"
grep -v "^miss " "$tmp/summary.txt"
[ $bound = 1 ] || exit 0
# One bound per missed plan and thread count (plan_bound times both batches); the batches it missed at
grep "^miss " "$tmp/summary.txt" | awk '{k = $2 " " $3 " " $4 " " $5; b[k] = b[k] ? b[k] "," $6 : $6}
  END {for (k in b) print k, b[k]}' | sort | while read -r m isa thr prec batches; do
  env=()
  [ "$isa" = AVX2 ] && env=("${cap[@]}")
  echo
  echo "# bound: $m $isa $prec plan, $thr thread(s), missed at batch $batches"
  env "${env[@]}" python3 bench/plan_bound.py "$rs" "$tmp/$isa/$m/$prec.plan" --threads "$thr" --runs "$runs" \
    --top 5 --peak "$tmp/peaks.txt"
done
