#!/usr/bin/env bash
# The one command that installs, builds from scratch and runs ringside's whole test suite: a release
# build in build/ and an ASan+UBSan build in build-asan/, both with -Dwerror=true. It ends with one
# line `N passed, N failed, N skipped` summed over both passes (what CI reads) and exits non-zero iff a
# test failed or a step broke.
# Usage: scripts/test.sh [--fast | --asan-only]
#   --fast       release pass only (for developers)
#   --asan-only  sanitizer pass only
set -euo pipefail

usage() { sed -n '2,8s/^# \{0,1\}//p' "$0"; }

run_release=1
run_asan=1
for arg in "$@"; do
  case $arg in
    --fast) run_asan=0 ;;
    --asan-only) run_release=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "test.sh: unknown option '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done
if [ "$run_release" -eq 0 ] && [ "$run_asan" -eq 0 ]; then
  echo "test.sh: --fast and --asan-only together leave nothing to run" >&2
  exit 2
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)

# Steps that broke before any test could run: "build|what", one per line; each counts as one failure.
broken=()
logs=()        # "build|path to testlog.json" of each pass that ran its tests
timings=()

banner() { printf '\n=== %s ===\n' "$*"; }

# pass NAME DIR TIMEOUT_MULTIPLIER MESON_SETUP_OPTIONS...
pass() {
  local name=$1 dir=$2 mult=$3
  shift 3
  local start=$SECONDS rc=0
  banner "$name build ($dir): configure"
  rm -rf "$dir"
  if ! meson setup "$dir" "$@" </dev/null; then
    broken+=("$name|meson setup failed")
    timings+=("$name: $((SECONDS - start)) s (configure failed)")
    return 0
  fi
  banner "$name build ($dir): compile"
  if ! meson compile -C "$dir" -j "$jobs" </dev/null; then
    broken+=("$name|compile failed")
    timings+=("$name: $((SECONDS - start)) s (compile failed)")
    return 0
  fi
  banner "$name build ($dir): test"
  meson test -C "$dir" --print-errorlogs --num-processes "$jobs" --timeout-multiplier "$mult" \
    </dev/null || rc=$?
  if [ -f "$dir/meson-logs/testlog.json" ]; then
    logs+=("$name|$dir/meson-logs/testlog.json|$rc")
  else
    broken+=("$name|meson test wrote no testlog.json (exit $rc)")
  fi
  timings+=("$name: $((SECONDS - start)) s")
}

total_start=$SECONDS
banner "setup"
if ! ./scripts/setup.sh </dev/null; then
  broken+=("setup|scripts/setup.sh failed")
fi

if [ "$run_release" -eq 1 ]; then
  pass release build 1 --buildtype=release -Dwerror=true
fi
if [ "$run_asan" -eq 1 ]; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    pass asan build-asan 3 -Db_sanitize=address,undefined -Db_lundef=false \
      --buildtype=debugoptimized -Dwerror=true
fi

banner "summary"
for t in "${timings[@]}"; do echo "time $t"; done
echo "time total: $((SECONDS - total_start)) s"

# Reads each pass's testlog.json (one JSON object per line), prints failures and skip reasons, and
# ends with the one summary line. Its exit status is 1 iff anything failed.
summary_py='
import json, sys
OK = {"OK", "EXPECTEDFAIL"}
SKIP = {"SKIP"}
passed = failed = skipped = 0
failures = []          # (build, name, suite, result, detail)
skips = {}             # reason -> [count, set of builds]
def last_line(text):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return lines[-1][:90] if lines else "(no reason printed)"
for item in sys.argv[1:]:
    build, rest = item.split("|", 1)
    path, rc = rest.rsplit("|", 1)
    seen_fail = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                t = json.loads(line)
            except ValueError as e:
                failed += 1
                seen_fail = True
                failures.append((build, "%s:%d" % (path, n), "-", "BADLOG", str(e)))
                continue
            res = t.get("result", "?")
            name = t.get("name", "?")
            suite = t.get("suite")
            if isinstance(suite, list):
                suite = ",".join(suite)
            if " / " in name:   # meson writes "project:suite / test"
                prefix, name = name.split(" / ", 1)
                suite = suite or prefix.split(":", 1)[-1]
            suite = suite or "-"
            if res in OK:
                passed += 1
            elif res in SKIP:
                skipped += 1
                out = (t.get("stdout") or t.get("stdo") or "") + "\n" + (t.get("stderr") or "")
                s = skips.setdefault(last_line(out), [0, set()])
                s[0] += 1
                s[1].add(build)
            else:
                failed += 1
                seen_fail = True
                failures.append((build, name, suite, res,
                                 "exit %s" % t.get("returncode", "?")))
    if int(rc) != 0 and not seen_fail:
        failed += 1
        failures.append((build, "(meson test)", "-", "ERROR",
                         "exit %s with no failed test in its log" % rc))
broken = [x for x in sys.stdin.read().splitlines() if x]
if failures:
    print("failures:")
    print("  %-8s %-24s %-14s %-8s %s" % ("build", "test", "suite", "result", "detail"))
    for f in failures:
        print("  %-8s %-24s %-14s %-8s %s" % f)
for b in broken:   # a step that broke before its tests could run counts as one failure
    build, what = b.split("|", 1)
    failed += 1
    print("BROKEN: %s: %s" % (build if build == "setup" else build + " build", what))
if skips:
    print("skip reasons:")
    for reason, (count, builds) in sorted(skips.items(), key=lambda kv: -kv[1][0]):
        print("  %3d x [%s] %s" % (count, ",".join(sorted(builds)), reason))
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
sys.exit(1 if failed else 0)
'
# Debian's python3 (setup.sh installs it) needs only its standard library here.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
status=0
printf '%s\n' "${broken[@]+"${broken[@]}"}" | "$py" -c "$summary_py" "${logs[@]+"${logs[@]}"}" || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; then
  # The summariser itself broke: still end with a summary line that fails CI.
  echo "0 passed, 1 failed, 0 skipped"
fi
exit "$status"
