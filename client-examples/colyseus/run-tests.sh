#!/bin/sh
# Runs the Colyseus room's bots with node's built-in test runner. ctest calls
# it through scripts/run-with-daemon.sh (tests/clients.cmake), which exports
# PATHD_BIN and PATHD_CONFIG (the tests start pathd themselves, so they can
# restart it). The pinned packages of this room and of the Node client are
# installed by the build (install-deps.sh, targets pathd_node_deps and
# pathd_colyseus_deps); this only checks them.
set -eu
cd "$(dirname "$0")"
node="${PATHD_NODE:-node}"
../node/install-deps.sh --check
./install-deps.sh --check
exec "$node" --test test/room.test.js
