#!/usr/bin/env bash
# The README's first command: install what is needed, build (configuring build/ on first use), and
# start ringside with any arguments given. Safe to run again: setup and configure are idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
if [ ! -f build/build.ninja ]; then
    meson setup build --buildtype=release
fi
meson compile -C build
exec ./build/repl/ringside "$@"
