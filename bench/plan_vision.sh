#!/usr/bin/env bash
# torchvision's resnet18 and mobilenet_v3_small (random weights, 64x64, TorchScript exporter: as
# tests/plan/export_torchvision.py makes them) compiled at fp32, bf16 and int8 (int8 calibrated on 64
# Fashion-MNIST training images scaled to 64x64, where installed) for batch 64 on one thread, then timed
# against ONNX Runtime fp32 on the same file by bench/plan_ort.py (turns, medians; batch 1 and 64, one
# thread): ORT's time over the plan's. Then the same again with oneDNN capped to AVX2
# (ONEDNN_MAX_CPU_ISA=AVX2: the plans compiled and run as on an AVX2-only CPU; ONNX Runtime has no
# such cap and runs this CPU's own kernels on both lines). Figures, not a test; needs torch.
#   bench/plan_vision.sh [--build-dir DIR] [--runs N] [--models "resnet18 mobilenet_v3_small"]
set -u
cd "$(dirname "$0")/.." || exit 1
build=build
runs=50
models="resnet18 mobilenet_v3_small"
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift ;;
    --runs) runs=$2; shift ;;
    --models) models=$2; shift ;;
  esac
  shift
done
ninja -C "$build" repl/ringside tests/plan/run-plan-onnx >/dev/null || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
grep -m1 "model name" /proc/cpuinfo
for isa in native AVX2; do
  env=()
  [ $isa = AVX2 ] && env=(ONEDNN_MAX_CPU_ISA=AVX2 RINGSIDE_BLAS=keep OPENBLAS_CORETYPE=Haswell)
  for m in $models; do
    plans=()
    for prec in fp32 bf16 int8; do
      env "${env[@]}" "$build/tests/plan/run-plan-onnx" "$tmp/$m.onnx" $prec "$tmp/x.f32" 64 "$tmp/cal.f32" 64 \
        "$tmp/y.f32" 64 "$tmp/$m.$prec.plan" > "$tmp/$m.$prec.txt" || { cat "$tmp/$m.$prec.txt"; exit 1; }
      plans+=("$tmp/$m.$prec.plan")
    done
    echo "# $m, oneDNN $isa ($(grep -m1 -o 'on cpu ([^)]*)' "$tmp/$m.fp32.txt")); plans' stays-fp32 lines:"
    grep -h "^report: .*\(stays fp32\|fp32 in an int8\)" "$tmp/$m".*.txt | sed 's/^report: /#   /' | sort | head -6
    env "${env[@]}" PLAN_THREADS=1 python3 bench/plan_ort.py "$build/repl/ringside" "$tmp/$m.onnx" "$runs" "${plans[@]}"
  done
done
