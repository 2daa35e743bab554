#!/bin/sh
# Installs the Colyseus room's pinned packages (npm ci from package-lock.json)
# unless a complete install of this lock file is already there: the Node
# client's install-deps.sh, run on this directory (same modes: --check,
# --soft; same stamp and lock). The build runs it (tests/clients.cmake,
# target pathd_colyseus_deps); run-tests.sh only checks.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
PATHD_DEPS_DIR="$here" PATHD_DEPS_REQUIRE=@colyseus/core PATHD_DEPS_NAME=client-examples/colyseus \
  exec "$here/../node/install-deps.sh" "$@"
