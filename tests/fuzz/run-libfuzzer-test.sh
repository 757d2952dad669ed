#!/bin/sh
# The bounded libFuzzer run as a test: exits 77 (skipped) with the reason when clang or its
# libFuzzer runtime is not installed; otherwise fails when run-libfuzzer.sh finds a problem.
here=$(cd "$(dirname "$0")" && pwd)
cc=${CLANG:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "SKIP: clang not installed (apt-get install clang libclang-rt-14-dev)"; exit 77
fi
probe=$(mktemp -d)
printf 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void)d; (void)n; return 0; }\n' > "$probe/p.c"
if ! "$cc" -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
    rm -rf "$probe"
    echo "SKIP: clang has no libFuzzer runtime (apt-get install libclang-rt-14-dev)"; exit 77
fi
rm -rf "$probe"
exec sh "$here/run-libfuzzer.sh" "$@"
