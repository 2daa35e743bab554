#!/usr/bin/env bash
# Runs a command against a live pathd, for the client tests (tests/clients.cmake).
#
#   scripts/run-with-daemon.sh --pathd BIN --config FILE [--daemon-arg ARG]... -- COMMAND [ARG]...
#
# Starts BIN --config FILE --listen 127.0.0.1:0 (the OS picks a free port, so
# parallel test runs never collide), waits for the daemon's "listening on
# HOST:PORT" log line, then runs COMMAND with these variables exported:
#   PATHD_ADDR    127.0.0.1:PORT of the daemon
#   PATHD_BIN     the daemon binary, absolute (tests that need a second daemon
#                 with other limits start it themselves)
#   PATHD_CONFIG  the config file the daemon was started with, absolute
# Afterwards the daemon gets SIGTERM and must exit 0 within the stop grace.
# Exit status: the command's when it failed, else 1 if the daemon failed to
# start or stop cleanly, else 0. The daemon's log is printed on any failure.
set -euo pipefail

# How long the daemon may take to load its scenes and listen, in seconds.
STARTUP_TIMEOUT_S=10
# How long a SIGTERMed daemon may take to drain and exit, in seconds: the
# default config's shutdown_grace_ms (5 s) plus a margin.
STOP_TIMEOUT_S=10

usage() {
  echo "usage: $0 --pathd BIN --config FILE [--daemon-arg ARG]... -- COMMAND [ARG]..." >&2
  exit 2
}

pathd_bin=""
config=""
daemon_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --pathd) [ $# -ge 2 ] || usage; pathd_bin="$2"; shift 2 ;;
    --config) [ $# -ge 2 ] || usage; config="$2"; shift 2 ;;
    --daemon-arg) [ $# -ge 2 ] || usage; daemon_args+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ -n "$pathd_bin" ] && [ -n "$config" ] && [ $# -gt 0 ] || usage
[ -x "$pathd_bin" ] || { echo "$0: $pathd_bin is not an executable" >&2; exit 1; }
[ -r "$config" ] || { echo "$0: cannot read $config" >&2; exit 1; }
# Absolute, so the command may change directory and still find them.
pathd_bin="$(realpath "$pathd_bin")"
config="$(realpath "$config")"

log="$(mktemp "${TMPDIR:-/tmp}/pathd-harness.XXXXXX")"
daemon_pid=""
cleanup() {
  # Only reached with the daemon still running when this script is
  # interrupted; the normal path below stops it and clears daemon_pid.
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -KILL "$daemon_pid" 2>/dev/null || true
  fi
  rm -f "$log"
}
trap cleanup EXIT

show_log() {
  echo "---- pathd log ----" >&2
  cat "$log" >&2
  echo "-------------------" >&2
}

"$pathd_bin" --config "$config" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 "${daemon_args[@]}" 2>"$log" &
daemon_pid=$!

addr=""
deadline=$((SECONDS + STARTUP_TIMEOUT_S))
while [ -z "$addr" ]; do
  addr="$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$log" | head -n 1)"
  [ -n "$addr" ] && break
  if ! kill -0 "$daemon_pid" 2>/dev/null; then
    echo "$0: pathd exited before listening" >&2
    show_log
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "$0: pathd did not listen within ${STARTUP_TIMEOUT_S} s" >&2
    show_log
    exit 1
  fi
  sleep 0.05
done

export PATHD_ADDR="$addr" PATHD_BIN="$pathd_bin" PATHD_CONFIG="$config"
set +e
"$@"
command_rc=$?
set -e

kill -TERM "$daemon_pid"
deadline=$((SECONDS + STOP_TIMEOUT_S))
while kill -0 "$daemon_pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
  sleep 0.05
done
daemon_rc=0
if kill -0 "$daemon_pid" 2>/dev/null; then
  echo "$0: pathd did not exit within ${STOP_TIMEOUT_S} s of SIGTERM" >&2
  daemon_rc=1
else
  wait "$daemon_pid" || daemon_rc=$?
  daemon_pid=""
  if [ "$daemon_rc" -ne 0 ]; then
    echo "$0: pathd exited with status $daemon_rc after SIGTERM" >&2
  fi
fi

if [ "$command_rc" -ne 0 ] || [ "$daemon_rc" -ne 0 ]; then
  show_log
fi
if [ "$command_rc" -ne 0 ]; then
  exit "$command_rc"
fi
[ "$daemon_rc" -eq 0 ] || exit 1
exit 0
