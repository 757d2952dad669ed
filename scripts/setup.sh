#!/usr/bin/env bash
# Installs everything ringside's build and tests need on Debian 12, and nothing else. Idempotent:
# apt is only asked (and `apt-get update` only run) when a package is missing, so a second run is
# fast and works offline. Exits non-zero only when a required Debian package cannot be installed.
# Usage: scripts/setup.sh
set -euo pipefail

# Build and tests (with Debian's data: Fashion-MNIST, and fortunes for `data t = text fortunes`), then
# clang for the libFuzzer script and sanitizer builds, then what later parts use (REPL, session log,
# ONNX, serving, MPI ranks, tutorials in tmux, oneDNN for compiled plans, gnuplot for `plot`).
PACKAGES=(
  build-essential pkg-config meson ninja-build libopenblas-openmp-dev zlib1g-dev libjansson-dev
  dataset-fashion-mnist fortunes python3 python3-numpy
  clang libclang-rt-14-dev
  libreadline-dev libncurses-dev libsqlite3-dev sqlite3 protobuf-c-compiler libprotobuf-c-dev
  libmicrohttpd-dev libnghttp2-dev libopenmpi-dev openmpi-bin libhwloc-dev tmux libssl-dev libdnnl-dev
  gnuplot-nox
)
# Python packages for the interop tests; the tests skip their part (and say so) when these are absent.
# PY_MODULES are pip's names, PY_IMPORTS the modules that show they are there (tritonclient[http]: Triton's
# own HTTP client, which the serve tests point at `ringside serve`; tritonclient[grpc]: its gRPC client).
PY_MODULES=(safetensors numpy onnx onnxruntime 'tritonclient[http]' 'tritonclient[grpc]')
PY_IMPORTS=(safetensors numpy onnx onnxruntime tritonclient.http tritonclient.grpc)

say() { printf 'setup: %s\n' "$*"; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  fi
fi

is_installed() {
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

missing_packages() {
  local p
  for p in "$@"; do
    is_installed "$p" || printf '%s\n' "$p"
  done
}

# The python3 first on PATH is the one meson's find_program('python3') runs the interop tests with.
# If it is Debian's own python3 without pip, python3-pip is needed for the pip step.
if command -v python3 >/dev/null 2>&1 && ! python3 -m pip --version >/dev/null 2>&1 \
    && [ "$(readlink -f "$(command -v python3)")" = "$(readlink -f /usr/bin/python3 2>/dev/null)" ]; then
  PACKAGES+=(python3-pip)
fi

# --- Debian packages ---------------------------------------------------------------------------
mapfile -t missing < <(missing_packages "${PACKAGES[@]}")
if [ "${#missing[@]}" -eq 0 ]; then
  say "apt: all ${#PACKAGES[@]} packages already installed"
else
  if [ "$(id -u)" -ne 0 ] && [ "${#SUDO[@]}" -eq 0 ]; then
    say "error: not root and no sudo; cannot install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt_opts=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=300)
  say "apt: missing ${missing[*]}; running apt-get update"
  if ! "${SUDO[@]}" apt-get update -q </dev/null >/tmp/ringside-apt-update.log 2>&1; then
    say "warning: apt-get update failed (see /tmp/ringside-apt-update.log); trying to install anyway" >&2
  fi
  say "apt: installing ${#missing[@]} package(s)"
  if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" "${missing[@]}" \
      </dev/null >/tmp/ringside-apt-install.log 2>&1; then
    # One at a time, to name the package(s) that cannot be installed.
    say "apt: install of the whole set failed; retrying one by one"
    for p in "${missing[@]}"; do
      "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" "$p" \
        </dev/null >>/tmp/ringside-apt-install.log 2>&1 || true
    done
  fi
  mapfile -t still < <(missing_packages "${missing[@]}")
  if [ "${#still[@]}" -ne 0 ]; then
    say "error: cannot install required package(s): ${still[*]} (log: /tmp/ringside-apt-install.log)" >&2
    tail -n 20 /tmp/ringside-apt-install.log >&2 || true
    exit 1
  fi
  say "apt: installed ${missing[*]}"
fi

# --- Python packages for the interop tests ------------------------------------------------------
if ! command -v python3 >/dev/null 2>&1; then
  say "warning: no python3 on PATH; interop tests will skip their Python parts" >&2
  exit 0
fi
py=$(command -v python3)
pyver=$(python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || echo '?')
import_line="import $(IFS=,; echo "${PY_IMPORTS[*]}")"
if python3 -c "$import_line" >/dev/null 2>&1; then
  say "python: ${PY_MODULES[*]} already importable by $py ($pyver)"
  exit 0
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INPUT=1
pip_cmd=(python3 -m pip install --quiet)
# A non-root user without a virtual environment installs into their own site-packages.
if [ "$(id -u)" -ne 0 ] && ! python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  pip_cmd+=(--user)
fi
say "python: installing ${PY_MODULES[*]} for $py ($pyver)"
if "${pip_cmd[@]}" "${PY_MODULES[@]}" </dev/null >/tmp/ringside-pip.log 2>&1 \
    || "${pip_cmd[@]}" --break-system-packages "${PY_MODULES[@]}" </dev/null >>/tmp/ringside-pip.log 2>&1; then
  if python3 -c "$import_line" >/dev/null 2>&1; then
    say "python: ${PY_MODULES[*]} installed"
  else
    say "warning: pip succeeded but '$import_line' still fails; interop tests will skip those parts" >&2
  fi
else
  say "warning: pip could not install ${PY_MODULES[*]} (log: /tmp/ringside-pip.log);" \
    "interop tests will skip those parts" >&2
fi
exit 0
