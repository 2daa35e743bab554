#!/usr/bin/env bash
# Installs the Debian 12 packages pathd needs, and only the ones that are
# missing, so `make run` / `make test` stay fast on a machine that already has
# them (one dpkg-query, no apt-get). Needs root (or sudo) only when something
# is missing.
#
#   scripts/install-deps.sh run    building and running pathd and pathctl
#                                   (`make run`, `make build`)
#   scripts/install-deps.sh test   run + the test tools (`make test`,
#                                   `make test-sanitize`, `make fuzz`)
#   scripts/install-deps.sh bench  test + the profilers (`make bench`,
#                                   docs/BENCHMARKS.md)
#   scripts/install-deps.sh SET --list   print the set, one a line; install
#                                   nothing (the test deps_dockerfile)
#
# The Dockerfile's build stage installs the run set and make by hand (it
# cannot run this script before COPY without breaking its layer cache); the
# test deps_dockerfile keeps the two in step.
set -euo pipefail

set_name="${1:-test}"
list_only=0
[ "${2:-}" = "--list" ] && list_only=1

# Compilers, CMake and the libraries pathd and pathctl link.
RUN_PKGS=(
  gcc libc6-dev cmake pkg-config
  libuv1-dev libcjson-dev libprotobuf-c-dev protobuf-c-compiler
  libxml2-dev zlib1g-dev libzstd-dev libpng-dev
  libhiredis-dev
)
# cmocka for the unit tests, clang and its runtime for the libFuzzer targets,
# python3 for the document checks, protoc + python3-protobuf for the Python
# client, Go 1.19 with Debian's protobuf module and protoc-gen-go for the Go
# client (built offline), curl for /metrics,
# haproxy + openssl for the TLS front test, redis-server for the Redis change
# log's tests (tests/redis_log.cmake).
TEST_PKGS=(
  libcmocka-dev
  clang libclang-rt-14-dev
  python3 python3-protobuf protobuf-compiler
  golang-go golang-google-protobuf-dev protoc-gen-go
  curl
  haproxy openssl
  redis-server
)
# cachegrind and massif, for the profiles in docs/BENCHMARKS.md.
BENCH_PKGS=(valgrind)

case "$set_name" in
  run) PKGS=("${RUN_PKGS[@]}") ;;
  test) PKGS=("${RUN_PKGS[@]}" "${TEST_PKGS[@]}") ;;
  bench) PKGS=("${RUN_PKGS[@]}" "${TEST_PKGS[@]}" "${BENCH_PKGS[@]}") ;;
  *) echo "usage: $0 run|test|bench [--list]" >&2; exit 2 ;;
esac

if [ "$list_only" -eq 1 ]; then
  printf '%s\n' "${PKGS[@]}"
  exit 0
fi

# Node.js runs the Node client's tests and the PathFinding.js peer benchmark.
# Machines that already ship a node (as this project's dev images do) keep it;
# elsewhere Debian's nodejs + npm are enough.
if [ "$set_name" != run ] &&
   { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
  PKGS+=(nodejs npm)
fi

# One dpkg-query for the whole list: a package it does not know is missing.
installed="$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PKGS[@]}" 2>/dev/null || true)"
missing=()
for p in "${PKGS[@]}"; do
  if ! grep -qx "$p installed" <<<"$installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps ($set_name): installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

# Another apt-get or dpkg (a second set-up, unattended-upgrades) may hold
# the package locks. Wait for them up to this many seconds, as apt's own
# DPkg::Lock::Timeout does, instead of failing at once.
LOCK_TIMEOUT="${PATHD_APT_LOCK_TIMEOUT:-600}"

# apt-get with the wait: DPkg::Lock::Timeout covers the dpkg lock; the lists
# lock that `apt-get update` takes is waited for here, retrying every 2 s.
apt_get() {
  local started=$SECONDS out rc said=0
  while :; do
    rc=0
    out="$($SUDO apt-get -o DPkg::Lock::Timeout="$LOCK_TIMEOUT" "$@" 2>&1)" || rc=$?
    if [ "$rc" -eq 0 ]; then
      [ -n "$out" ] && printf '%s\n' "$out"
      return 0
    fi
    if ! grep -q "Could not get lock" <<<"$out"; then
      printf '%s\n' "$out" >&2
      return "$rc"
    fi
    if [ $((SECONDS - started)) -ge "$LOCK_TIMEOUT" ]; then
      printf '%s\n' "$out" >&2
      echo "install-deps: another apt-get or dpkg still holds the package lock after ${LOCK_TIMEOUT} s (PATHD_APT_LOCK_TIMEOUT); giving up" >&2
      return "$rc"
    fi
    if [ "$said" -eq 0 ]; then
      echo "install-deps: another apt-get or dpkg holds the package lock; waiting up to ${LOCK_TIMEOUT} s" >&2
      said=1
    fi
    sleep 2
  done
}

apt_get update -qq
apt_get install -y -qq --no-install-recommends "${missing[@]}"
