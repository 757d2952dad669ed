#!/usr/bin/env bash
# Compiled plans (plan/) against ONNX Runtime on the same ONNX file, side by side in one run: the
# CNN of the Fashion-MNIST figures (2 conv + pool, as bench/onnx.sh), exported by ringside, compiled
# at fp32, bf16 and int8 (calibrated on Fashion-MNIST: min-max, percentile and entropy), at 1 and 2
# threads and batch 1 and 64, medians of many runs, and ONNX Runtime's own int8 (quantize_static on the
# same file and calibration rows, bench/plan_ort_int8.py; skipped where onnxruntime.quantization is
# missing); then the GPT
# (4 layers, dim 128, ctx 64) compiled from the session model and from its exported file, against ORT on
# that file. With --train the
# CNN is trained for one epoch on Fashion-MNIST first and each plan's accuracy on the test split is
# printed beside the engine's.
# Plans and ORT take turns (bench/plan_ort.py: PLAN_ROUNDS rounds, 3 by default, medians of RUNS runs
# each, a figure the median of its rounds), so a change of load hits both sides alike.
# --exe FILE runs that ringside instead of building one (another commit's, for a before/after).
# --cuda runs only the GPU section: the CNN and the GPT compiled with device=cuda (fp32, bf16), `plan
# bench` on them, and ONNX Runtime's CUDA provider on the same ONNX files; each part skipped with a
# message where there is no GPU or no onnxruntime-gpu.
#   bench/plan.sh [--build-dir DIR | --exe FILE] [--train] [--runs N] [--cuda]
set -u
cd "$(dirname "$0")/.." || exit 1
build=build-bench
train=0
cuda=0
runs=200
exe=
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift ;;
    --exe) exe=$2; shift ;;
    --train) train=1 ;;
    --cuda) cuda=1 ;;
    --runs) runs=$2; shift ;;
  esac
  shift
done
if [ -n "$exe" ]; then
  rs=$exe
else
  [ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release >/dev/null || exit 1
  ninja -C "$build" repl/ringside >/dev/null || exit 1
  rs="$build/repl/ringside"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cnn="seq conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)"
if [ $cuda = 1 ]; then
  cnn="seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)"
  gpt="gpt layers=4 heads=4 dim=128 ctx=64 vocab=65"
  COLUMNS=250 "$rs" --no-db -c "model c = $cnn; export c $tmp/cnn.onnx; compile c device=cuda batch=64 -> $tmp/c.plan; \
compile c device=cuda precision=bf16 batch=64 -> $tmp/c16.plan; model g = $gpt; export g $tmp/gpt.onnx; \
compile g device=cuda batch=64 -> $tmp/g.plan; compile g device=cuda precision=bf16 batch=64 -> $tmp/g16.plan" \
    | grep -E "^compile" || exit 1
  echo "# plans for cuda: plan bench (median of $runs runs, batch 1 and 64); $(nvidia-smi -L 2>/dev/null | head -1)"
  for p in c c16 g g16; do
    COLUMNS=250 "$rs" --no-db -c "plan bench $tmp/$p.plan runs=$runs" 2>&1 | grep -E "median|error" | head -3
  done
  python3 - "$tmp" "$runs" <<'PY'
import sys, time, statistics
try:
    import numpy as np, onnxruntime as ort
except ImportError as e:
    sys.exit(f"# ONNX Runtime: not installed ({e}); skipped")
if "CUDAExecutionProvider" not in ort.get_available_providers():
    sys.exit("# ONNX Runtime: no CUDAExecutionProvider here (onnxruntime-gpu and a GPU); skipped")
tmp, runs = sys.argv[1], int(sys.argv[2])
for name in ("cnn", "gpt"):
    s = ort.InferenceSession(f"{tmp}/{name}.onnx", providers=["CUDAExecutionProvider"])
    i = s.get_inputs()[0]
    for B in (1, 64):
        shape = [B] + [d for d in i.shape[1:]]
        x = np.zeros(shape, np.int64 if "int64" in i.type else np.float32)
        io = s.io_binding()
        io.bind_cpu_input(i.name, x)
        io.bind_output(s.get_outputs()[0].name)
        s.run_with_iobinding(io)
        t = []
        for _ in range(runs):
            t0 = time.perf_counter(); s.run_with_iobinding(io); t.append(time.perf_counter() - t0)
        print(f"ORT CUDA {name} batch={B}: median {1e3 * statistics.median(t):.3f} ms of {runs} runs (input copied in, as plan bench does)")
PY
  exit 0
fi
[ $train = 1 ] && fit="train c on f epochs=1; eval c on f;" || fit=""
COLUMNS=250 "$rs" --no-db -c "data f = fashion; model c = $cnn; $fit export c $tmp/cnn.onnx; \
compile $tmp/cnn.onnx batch=64 -> $tmp/fp32.plan; compile $tmp/cnn.onnx precision=bf16 batch=64 -> $tmp/bf16.plan; \
compile $tmp/cnn.onnx precision=int8 calib=f batch=64 -> $tmp/int8.plan; \
compile $tmp/cnn.onnx precision=int8 calib=f calib_method=percentile batch=64 -> $tmp/int8p.plan; \
compile $tmp/cnn.onnx precision=int8 calib=f calib_method=entropy batch=64 -> $tmp/int8e.plan; \
model p = plan $tmp/fp32.plan; eval p on f; model q = plan $tmp/bf16.plan; eval q on f" \
  | grep -E "on f \(|^compile|build time|calibration\) accuracy|fp32: |: (winograd|winograd per sample|direct|bf16|fp32) \(" || exit 1
echo "# CNN (2 conv + pool, 1x28x28), exported by ringside; median of $runs runs; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/plan_ort.py "$rs" "$tmp/cnn.onnx" "$runs" "$tmp/fp32.plan" "$tmp/bf16.plan" "$tmp/int8.plan"
# ORT's own int8 (quantize_static) on the same file and the same 512 calibration rows, beside the int8 plan
python3 bench/plan_ort_int8.py "$rs" "$tmp/cnn.onnx" 512 "$runs" "$tmp/int8.plan"
# The seed's CIFAR SimpleCNN (3x32x32). No CIFAR data here: its int8 plan is calibrated on 600
# synthetic CIFAR-format records (uniform pixels, random labels) for a speed figure only; its accuracy
# cannot be measured on them.
scnn="seq in=3x32x32 conv(32,3,pad=1) relu maxpool(2) conv(64,3,pad=1) relu maxpool(2) flatten linear(512) relu linear(10)"
python3 -c "import numpy as np; r = np.random.default_rng(1); n = 600
rec = np.concatenate([r.integers(0, 10, (n, 1)), r.integers(0, 256, (n, 3072))], 1).astype(np.uint8)
rec.tofile('$tmp/synth.bin')" || exit 1
COLUMNS=250 "$rs" --no-db -c "data c = cifar $tmp/synth.bin; model s = $scnn; export s $tmp/scnn.onnx; compile $tmp/scnn.onnx batch=64 -> $tmp/scnn.plan; \
compile $tmp/scnn.onnx precision=bf16 batch=64 -> $tmp/scnn16.plan; \
compile $tmp/scnn.onnx precision=int8 calib=c batch=64 -> $tmp/scnn8.plan" | grep -E "^compile|build time|: (winograd|winograd per sample|direct|bf16|fp32) \(" || exit 1
echo "# CIFAR SimpleCNN (3x32x32), exported by ringside (int8: calibrated on synthetic data, speed only); median of $runs runs; load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/plan_ort.py "$rs" "$tmp/scnn.onnx" "$runs" "$tmp/scnn.plan" "$tmp/scnn16.plan" "$tmp/scnn8.plan"
# The GPT of the text figures: compiled from the session model, ORT on its export (int64 tokens); int8
# calibrated on 512 windows of the built-in text. gpto.plan is compiled from the exported file itself
# (the importer makes its attention and GELU subgraphs the engine's layers): the same nodes as gpt.plan.
gpt="gpt layers=4 heads=4 dim=128 ctx=64 vocab=65"
"$rs" --no-db -c "data s = text ctx=64; model g = $gpt; export g $tmp/gpt.onnx; compile g batch=64 -> $tmp/gpt.plan; \
compile $tmp/gpt.onnx batch=64 -> $tmp/gpto.plan; \
compile g precision=bf16 batch=64 -> $tmp/gpt16.plan; compile g precision=int8 calib=s batch=64 -> $tmp/gpt8.plan" \
  | grep -E "^compile|build time" || exit 1
echo "# $gpt, exported by ringside; median of $runs runs; load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/plan_ort.py "$rs" "$tmp/gpt.onnx" "$runs" "$tmp/gpt.plan" "$tmp/gpto.plan" "$tmp/gpt16.plan" "$tmp/gpt8.plan"
