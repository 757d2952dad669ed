#!/usr/bin/env bash
# The plain ONNX importer against ONNX Runtime on the same file: the CNN of the Fashion-MNIST figures
# (2 conv + pool), exported by ringside, then import + run in ringside (tests/onnx/import/run-import
# --bench) against ORT session creation + run, at 1 and 2 threads and batch 1 and 64, in one run.
#   bench/onnx.sh [--build-dir DIR]
set -u
cd "$(dirname "$0")/.." || exit 1
build=build-bench
[ "${1:-}" = "--build-dir" ] && build=$2
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release >/dev/null || exit 1
ninja -C "$build" repl/ringside tests/onnx/import/run-import >/dev/null || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/repl/ringside" --no-db -c "model c = seq conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10); export c $tmp/cnn.onnx" >/dev/null || exit 1
echo "# CNN (2 conv + pool, 1x28x28), exported by ringside; median of 50 runs; $(nproc) CPUs"
python3 bench/onnx_ort.py "$build/tests/onnx/import/run-import" "$tmp/cnn.onnx"
