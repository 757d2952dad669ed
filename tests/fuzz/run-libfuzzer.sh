#!/bin/sh
# Coverage-guided fuzzing of the data readers and the model spec parser with libFuzzer: builds each target with
# clang -fsanitize=fuzzer,address,undefined straight from the engine sources it needs, seeds a corpus
# from the target's own rs_fuzz_seeds (through a one-off seed dumper), and runs it for SECONDS each.
# Usage: tests/fuzz/run-libfuzzer.sh [SECONDS] [TARGET...]   (default 60 s, all targets: idx csv spec)
# Findings (crash-*, leak-*, timeout-*) land in $OUT (default build-fuzz/); replay one as a unit test
# with: build-data/fuzz-idx build-fuzz/crash-...
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-idx csv spec}
out=${OUT:-$root/build-fuzz}
cc=${CLANG:-clang}
mkdir -p "$out"

# Each target: its source, then the engine sources it needs (a short list, so a half-edited file
# elsewhere in the engine cannot break the build). Add a target with one line here.
core="engine/core/status.c engine/core/rng.c"
data="engine/data/dataset.c engine/data/read.c engine/data/idx.c engine/data/fashion.c \
  engine/data/cifar.c engine/data/csv.c engine/data/split.c engine/data/text.c engine/data/gen/story.c"
# The REPL parser target links the REPL library (all but main) and what it uses.
repl="$(cd "$root" && echo engine/data/gen/digits.c engine/data/source.c engine/data/sampler.c engine/data/loader.c engine/optim/*.c engine/train/*.c engine/ckpt/*.c repl/[!m]*.c repl/lang/*.c repl/slog/*.c)"
# The REPL starts ranks (repl/cmd_dist.c): the dist parts without the optional mpi and nccl backends.
dist="$(cd "$root" && echo dist/store/*.c dist/launch/*.c dist/pg/*.c dist/shm/*.c dist/tcp/*.c dist/worker/*.c dist/train/*.c)"
# ... and ONNX (its protobuf-c code generated here from onnx/onnx.proto), the dashboard and the server.
onnx="$(cd "$root" && echo onnx/*.c repl/view/*.c serve/*.c)"
# The plan compiler (its message generated from plan/plan.proto as meson does) and oneDNN; its GPU
# runtime as a build without cuDNN has it (plan/cuda_absent.c; cuda plans are refused when opened).
plan="$(cd "$root" && ls plan/*.c | grep -v '^plan/cuda\.c$' | tr '\n' ' ') GEN/plan/plan.pb-c.c"
# The engine's models and kernel tables, CUDA as a build without it (engine/cuda/cuda_absent.c: a model
# on a GPU makes its device current).
nn="engine/core/mem.c engine/core/tensor.c engine/core/dims.c engine/core/device.c engine/cuda/cuda_absent.c $(cd "$root" && echo engine/nn/*.c engine/cpu/*.c engine/guard/*.c)"
target_sources() {
  case $1 in
    idx) echo "tests/fuzz/fuzz_idx.c $core $data" ;;
    csv) echo "tests/fuzz/fuzz_csv.c $core $data" ;;
    text) echo "tests/fuzz/fuzz_text.c $core $data" ;;
    spec) echo "tests/fuzz/fuzz_spec.c $core $nn" ;;
    repl) echo "tests/fuzz/fuzz_repl.c $core $nn $data $repl $dist $onnx $plan GEN/onnx/onnx.pb-c.c GEN/serve/grpc_service.pb-c.c" ;;
    grpc) echo "tests/fuzz/fuzz_grpc.c $core $nn $data $repl $dist $onnx $plan GEN/onnx/onnx.pb-c.c GEN/serve/grpc_service.pb-c.c" ;;
    plan) echo "tests/fuzz/fuzz_plan.c $core $nn $plan engine/train/tune.c engine/data/dataset.c $(cd "$root" && echo onnx/*.c) GEN/onnx/onnx.pb-c.c" ;;
    lines) echo "tests/dist/worker/fuzz_lines.c $core $nn dist/worker/lines.c dist/pg/pg.c" ;;
    store) echo "tests/dist/store/fuzz_store.c $core dist/store/wire.c" ;;
    lex) echo "tests/fuzz/fuzz_lex.c repl/lang/lex.c repl/lang/value.c $core $nn" ;;
    expect) echo "tests/fuzz/fuzz_expect.c repl/lang/expect.c repl/lang/value.c $core $nn" ;;
    pbtxt) echo "tests/fuzz/fuzz_pbtxt.c serve/config.c serve/config_write.c serve/dtype.c $core" ;;
    *) return 1 ;;
  esac
}
# The engine's kernels use OpenMP (GCC's runtime, which clang can target) and OpenBLAS.
libs="-fopenmp=libgomp $(pkg-config --cflags --libs openblas) -lgomp -lz -lm -ljansson -lsqlite3 -lcrypto -lreadline -lmicrohttpd"
libs="$libs -lnghttp2 -lprotobuf-c -ldnnl $(pkg-config --libs hwloc) $(pkg-config --libs ncursesw 2>/dev/null || echo -lncursesw)"
# The ONNX messages, generated as meson does (sources named GEN/... below live here).
mkdir -p "$out/gen/onnx"
protoc-c --proto_path="$root/onnx" --c_out="$out/gen/onnx" "$root/onnx/onnx.proto" || exit 1
# ... and the gRPC messages of serve/ (included as "serve/grpc_service.pb-c.h").
mkdir -p "$out/gen/serve"
protoc-c --proto_path="$root/serve" --c_out="$out/gen/serve" "$root/serve/grpc_service.proto" || exit 1
mkdir -p "$out/gen/plan"
protoc-c --proto_path="$root/plan" --c_out="$out/gen/plan" "$root/plan/plan.proto" || exit 1
flags="-std=c17 -g -O1 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -I$root -I$here -I$root/repl -I$out/gen -DRS_VERSION=\"fuzz\" -DRS_SERVE_VERSION=\"fuzz\" -DRS_PLAN_CUDA_SM=90"

status=0
for t in $targets; do
  list=$(target_sources "$t") || { echo "unknown fuzz target '$t' (known: idx csv text spec lex expect repl store lines pbtxt grpc plan)" >&2; exit 2; }
  src=""
  srcs=""
  for f in $list; do
    case $f in GEN/*) p="$out/gen/${f#GEN/}" ;; *) p="$root/$f" ;; esac
    if [ -z "$src" ]; then src="$p"; else srcs="$srcs $p"; fi
  done
  echo "== fuzz_$t: building"
  # shellcheck disable=SC2086
  $cc $flags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    "$src" $srcs $libs -o "$out/fuzz_$t"
  # Seed dumper: the target's own rs_fuzz_seeds (not a copy that drifts) with a main that writes
  # them into the corpus; the target's entry point is renamed out of the way.
  # shellcheck disable=SC2086
  $cc $flags -DLLVMFuzzerTestOneInput=rs_unused_entry -c "$src" -o "$out/seeds_$t.o"
  cat > "$out/dump_main_$t.c" <<'C'
#include <stdio.h>
#include "fuzz.h"
int main(int argc, char **argv)
{
    const rs_fuzz_seed *s;
    size_t n = rs_fuzz_seeds(&s);
    for (size_t i = 0; i < n && argc > 1; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/seed-%zu", argv[1], i);
        FILE *f = fopen(p, "wb");
        if (!f || fwrite(s[i].data, 1, s[i].size, f) != s[i].size || fclose(f)) return 1;
    }
    return 0;
}
C
  # shellcheck disable=SC2086
  $cc $flags "$out/dump_main_$t.c" "$out/seeds_$t.o" $srcs $libs -o "$out/dump_seeds_$t"
  corpus="$out/corpus_$t"
  mkdir -p "$corpus"
  "$out/dump_seeds_$t" "$corpus"
  echo "== fuzz_$t: running ${seconds}s (corpus $corpus)"
  if ! (cd "$out" && ./"fuzz_$t" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 "$corpus"); then
    echo "== fuzz_$t: FOUND A PROBLEM (reproducer in $out)" >&2
    status=1
  fi
done
exit $status
