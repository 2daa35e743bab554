#!/bin/sh
# Runs the Node client's tests with node's built-in test runner. ctest calls
# it through scripts/run-with-daemon.sh (tests/clients.cmake), which provides
# PATHD_ADDR, PATHD_BIN and PATHD_CONFIG; PATHCTL_BIN names the C client.
# A clean clone has no node_modules, so the pinned packages are installed
# from package-lock.json first (npm ci) - only then, to keep reruns offline.
set -eu
cd "$(dirname "$0")"
node="${PATHD_NODE:-node}"
npm="${PATHD_NPM:-npm}"
if [ ! -d node_modules ]; then
  "$npm" ci --no-audit --no-fund
fi
exec "$node" --test test/pathd-client.test.js
