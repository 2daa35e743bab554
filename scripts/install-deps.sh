#!/usr/bin/env bash
# Installs the Debian 12 packages pathd needs to build and test, and only the
# ones that are missing, so `make run` / `make test` stay fast on a machine
# that already has them. Needs root (or sudo) only when something is missing.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libuv1-dev libcjson-dev libprotobuf-c-dev protobuf-c-compiler
  libxml2-dev zlib1g-dev libzstd-dev
  libcmocka-dev
  clang libclang-rt-14-dev
  valgrind
  python3-protobuf protobuf-compiler
  libpng-dev curl
  haproxy openssl
)
# Node.js runs the PathFinding.js peer benchmark and the Node client's tests.
# Machines that already ship a node (as this project's dev images do) keep it;
# elsewhere Debian's nodejs + npm are enough.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PKGS+=(nodejs npm)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
