#!/bin/sh
# Runs the Node client's tests with node's built-in test runner. ctest calls
# it through scripts/run-with-daemon.sh (tests/clients.cmake), which provides
# PATHD_ADDR, PATHD_BIN and PATHD_CONFIG; PATHCTL_BIN names the C client.
# The pinned packages are installed by the build (install-deps.sh, run by
# the pathd_node_deps target), never here inside the test's timeout: this
# only checks that the install is complete and fails saying what to run.
set -eu
cd "$(dirname "$0")"
node="${PATHD_NODE:-node}"
./install-deps.sh --check
exec "$node" --test test/pathd-client.test.js
