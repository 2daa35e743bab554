#!/bin/sh
# Installs the Node client's pinned packages (npm ci from package-lock.json)
# unless a complete install of this very lock file is already there.
#
#   install-deps.sh          install if needed (what the build runs)
#   install-deps.sh --check  only say whether the install is complete (exit 1 if not)
#   install-deps.sh --soft   as the first, but a failed install only warns
#                            (exit 0), so an offline `make run` still builds
#
# The build runs it (tests/clients.cmake, target pathd_node_deps), before any
# test and outside every test timeout; run-tests.sh only checks. An install
# is complete when node_modules/.pathd-installed holds the lock file's
# SHA-256 (written last, after npm ci succeeded) and `npm ls` finds every
# locked package. Anything less - an empty or partial node_modules left by
# an interrupted or failed npm ci, a changed lock file, a deleted package -
# is removed and installed again.
#
# Another example's install-deps.sh (client-examples/colyseus) runs this one
# on its own directory: PATHD_DEPS_DIR (default: this script's), the
# package that must load (PATHD_DEPS_REQUIRE, default protobufjs) and the
# name used in messages (PATHD_DEPS_NAME).
set -eu
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "${PATHD_DEPS_DIR:-$(dirname "$0")}"
name="${PATHD_DEPS_NAME:-client-examples/node}"
needs="${PATHD_DEPS_REQUIRE:-protobufjs}"
node="${PATHD_NODE:-node}"
npm="${PATHD_NPM:-npm}"
stamp=node_modules/.pathd-installed
mode="${1:-}"

complete() {
  want="$(sha256sum package-lock.json | cut -d' ' -f1)"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
    "$npm" ls --all --offline >/dev/null 2>&1 &&
    "$node" -e "require('$needs')" >/dev/null 2>&1
}

if [ "$mode" = "--check" ]; then
  if complete; then exit 0; fi
  echo "$name/node_modules is missing or incomplete: run" \
       "$name/install-deps.sh (the build does: cmake --build build, make test)" >&2
  exit 1
fi

# One install at a time (parallel builds of several build trees share this
# node_modules).
if command -v flock >/dev/null 2>&1 && [ -z "${PATHD_NODE_DEPS_LOCKED:-}" ]; then
  PATHD_NODE_DEPS_LOCKED=1 exec flock .install-deps.lock "$self" "$@"
fi

if complete; then exit 0; fi
echo "$name: installing the pinned packages (npm ci)" >&2
for attempt in 1 2; do
  rm -rf node_modules
  if "$npm" ci --no-audit --no-fund --loglevel=error &&
     "$npm" ls --all --offline >/dev/null 2>&1 && "$node" -e "require('$needs')" >/dev/null 2>&1; then
    sha256sum package-lock.json | cut -d' ' -f1 > "$stamp.tmp"
    mv "$stamp.tmp" "$stamp"
    exit 0
  fi
  echo "$name: npm ci failed (attempt $attempt)" >&2
done
rm -rf node_modules
if [ "$mode" = "--soft" ]; then
  echo "$name: WARNING: packages not installed; its tests will fail until" \
       "install-deps.sh succeeds (it is retried on every build)" >&2
  exit 0
fi
exit 1
