#!/usr/bin/env bash
# Issue 32's replica targets (update ack vs bare XADD, catch-up of 100,000
# updates, path throughput under 1,000 updates/s vs a standalone pathd),
# measured in one run by replicas.py on loopback: it starts its own
# redis-server (appendfsync always) and pathd replicas, and stops them at
# the end. Prints the load average and a table for docs/BENCHMARKS.md.
#
# usage: bench/replicas/bench-replicas.sh BUILD_DIR [--quick]
set -euo pipefail
build=${1:?usage: bench-replicas.sh BUILD_DIR [--quick]}
shift
here=$(cd "$(dirname "$0")" && pwd)
for b in "$build/server/pathd" "$build/bench/load/pathd-load" \
         "$build/client-examples/python/gen/pathd_pb2.py"; do
  [ -e "$b" ] || { echo "bench-replicas: build first ($b)" >&2; exit 2; }
done
command -v redis-server > /dev/null ||
  { echo "bench-replicas: needs redis-server (Debian; scripts/install-deps.sh test installs it)" >&2; exit 2; }
# Debian's python3-protobuf is the system interpreter's (client-examples/python).
PYTHONPATH="$here/../../client-examples/python:$build/client-examples/python/gen" \
  exec /usr/bin/python3 "$here/replicas.py" "$build" "$@"
