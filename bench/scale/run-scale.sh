#!/usr/bin/env bash
# A control client's ping latency and a writer's updates per second, alone
# and beside a load that grows with the server's state (issue 29 findings
# 12 and 13), each pair from one run of pathd-scale against a fresh pathd
# on the bundled demo scenes (config/default.json, 2 worker threads):
#
#  1. 1,000 Watches of the scene the writer updates, 64 to a connection;
#  2. 1,000 Watches of another scene (house);
#  3. 8 threads scraping /metrics in a loop, over INSTANCES instances of
#     town (made first; their creation rate is printed too).
#
# Ports are loopback and ephemeral; every pathd started is stopped at the
# end. PATHD=path/to/pathd measures another daemon (an older build) with
# this build's clients.
# usage: bench/scale/run-scale.sh BUILD_DIR [SECONDS] [INSTANCES]
set -euo pipefail
build=${1:?usage: run-scale.sh BUILD_DIR [SECONDS] [INSTANCES]}
secs=${2:-5}
instances=${3:-30000}
here=$(cd "$(dirname "$0")/../.." && pwd)
pathd=${PATHD:-$build/server/pathd}
pathctl="$build/client-examples/c/pathctl"
scale="$build/bench/scale/pathd-scale"
for b in "$pathd" "$pathctl" "$scale"; do
  [ -x "$b" ] || { echo "run-scale: build first ($b)" >&2; exit 2; }
done
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && { kill "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; }
  rm -rf "$tmp"
}
trap cleanup EXIT
. "$here/bench/pathd-up.sh"

start_pathd() {
  port=$(free_port); mport=$(free_port)
  env -u PATHD_TOKEN_QUERY -u PATHD_TOKEN_WRITE -u PATHD_TOKEN_ADMIN \
    "$pathd" --config "$here/config/default.json" --listen "127.0.0.1:$port" \
    --metrics-listen "127.0.0.1:$mport" --threads 2 --log-level warn 2> "$tmp/pathd.log" &
  pid=$!
  wait_pathd run-scale "$pathctl" "$port" "$tmp/pathd.log"
}
stop_pathd() { kill "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; pid=; }

echo "== 1,000 watches of the updated scene (town)"
start_pathd
"$scale" --server "127.0.0.1:$port" --seconds "$secs" --watches 1000
stop_pathd
echo "== 1,000 watches of another scene (house)"
start_pathd
"$scale" --server "127.0.0.1:$port" --seconds "$secs" --watches 1000 --watch-scene house
stop_pathd
echo "== 8 parallel /metrics scrapes over $instances instances"
start_pathd
"$scale" --server "127.0.0.1:$port" --metrics "127.0.0.1:$mport" --seconds "$secs" \
  --instances "$instances" --scrapes 8
stop_pathd
