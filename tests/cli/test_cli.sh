#!/usr/bin/env bash
# End to end through the ringside binary: what a person types, checked on what it prints and
# writes. Usage: test_cli.sh PATH/TO/ringside
set -u
rs=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check DESCRIPTION COMMAND...: the command must succeed
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}

out=$("$rs" version 2>&1)
check "version names the OpenBLAS kernel and why" grep -Eq 'OpenBLAS kernel [A-Za-z]+ \(' <<<"$out"
if grep -q 'avx512f' /proc/cpuinfo && [ "${RINGSIDE_BLAS:-}" != keep ]; then
    check "AVX-512 CPU runs an AVX-512 kernel by default" grep -Eq 'kernel (SkylakeX|Cooperlake|SapphireRapids)' <<<"$out"
fi

out=$("$rs" show mlp 784-256-10 2>&1)
# 784*256 + 256 + 256*10 + 10
check "show counts mlp 784-256-10 parameters" grep -q '203530 parameters' <<<"$out"
check "show lists output shapes" grep -Eq '^ +2 +linear\(10\) +\(10\)' <<<"$out"

out=$("$rs" show seq convv\(16,3\) relu 2>&1); rc=$?
check "a misspelt layer fails" test "$rc" -ne 0
check "and suggests the near miss" grep -q "did you mean 'conv'" <<<"$out"
check "with a caret under the word" grep -Eq '^ {6}\^$' <<<"$out"

out=$("$rs" train --data digits:300 --epochs 1 --batch 32 mlp 784-10-3 2>&1); rc=$?
check "too few classes for the data fails" test "$rc" -ne 0
check "and says how many outputs are needed" grep -q 'needs 10 outputs' <<<"$out"

out=$("$rs" train --data digits:3000 --epochs 2 --batch 32 --lr 0.002 --save "$tmp/m.safetensors" \
      mlp 784-64-10 2>&1 </dev/null); rc=$?
check "training on digits succeeds" test "$rc" -eq 0
check "non-tty progress is one line per epoch" test "$(grep -c '^epoch [12]/2: loss' <<<"$out")" -eq 2
acc=$(grep -o 'test accuracy [0-9.]*' <<<"$out" | tail -1 | awk '{print $3}')
check "it learns (test accuracy > 0.8, got ${acc:-none})" awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.8) }'
check "save wrote the weights" test -s "$tmp/m.safetensors"

out=$("$rs" eval --load "$tmp/m.safetensors" --data digits:3000 2>&1); rc=$?
check "eval of the saved model succeeds" test "$rc" -eq 0
acc2=$(grep -o 'accuracy [0-9.]*' <<<"$out" | awk '{print $2}')
check "eval reproduces the final test accuracy ($acc vs $acc2)" test "$acc" = "$acc2"

out=$("$rs" eval --load "$tmp/m.safetensors" --data digits:3000 mlp 784-32-10 2>&1); rc=$?
check "loading into another shape fails" test "$rc" -ne 0
check "and names the tensor and both shapes" grep -q "tensor '0.weight' has shape (64, 784) but model m expects (32, 784)" <<<"$out"

out=$("$rs" train --data idx:/nonexistent-images,/nonexistent-labels mlp 784-10 2>&1); rc=$?
check "a missing data file fails" test "$rc" -ne 0
check "and names the file" grep -q '/nonexistent-images' <<<"$out"

echo "cli: $fails failed"
exit $((fails > 0))
