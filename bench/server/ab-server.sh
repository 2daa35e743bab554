#!/usr/bin/env bash
# ab-server.sh - two pathd binaries compared on the same load, alternating,
# on a machine other work shares (issue 30, item 6): CPU-time figures swing
# with the machine's load by more than most changes move them, so each
# pair runs A then B within seconds of each other, and the medians of the
# pairs are compared. Each run: pathd (2 threads, jump point search) on
# tests/data's den520d and the open 64x64 map, one second of warm-up, then
# SECS of `pathd-load -c 2 -P 64 --burst` (BURST= for slot by slot) on
# SCENE (den520d), every 5th scenario, corners. Prints per run
#   cpu  server CPU per request (utime + stime over every thread of pathd,
#        /proc/PID/task/*/stat), its system part, and each thread's share
#   sys  system calls and context switches per request (perf stat
#        tracepoints; left out when perf cannot count them)
# LIMITS_A and LIMITS_B (JSON objects, default {}) are each side's config
# "limits", so one binary can be compared with itself under two settings
# (e.g. LIMITS_B='{"inline_max_expansions": 0}' with SCENE=open: the
# trivial request through a worker instead of on the loop).
#
#   bench/server/ab-server.sh BUILD_DIR PATHD_A PATHD_B [PAIRS] [SECS]
set -euo pipefail
build=${1:?usage: ab-server.sh BUILD_DIR PATHD_A PATHD_B [PAIRS] [SECS]}
a=${2:?}; b=${3:?}; pairs=${4:-3}; secs=${5:-5}
here=$(cd "$(dirname "$0")/../.." && pwd)
pathctl="$build/client-examples/c/pathctl"
load="$build/bench/load/pathd-load"
scene=${SCENE:-den520d}
burst=${BURST---burst}
. "$here/bench/pathd-up.sh"
. "$here/bench/server/two-scenes.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
two_scenes_data "$tmp"
events=context-switches,syscalls:sys_enter_writev,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,syscalls:sys_enter_sched_yield
perf_ok=0
perf stat -e "$events" -o /dev/null -- true > /dev/null 2>&1 && perf_ok=1

# one NAME PATHD: one run; prints its line.
one() {
  local name=$1 pathd=$2 port mport pid pp="" limits
  port=$(free_port); mport=$(free_port)
  if [ "$name" = A ]; then limits=${LIMITS_A:-"{}"}; else limits=${LIMITS_B:-"{}"}; fi
  two_scenes_conf "$tmp" "$port" "$limits" "\"metrics_listen\": \"127.0.0.1:$mport\","
  "$pathd" --config "$tmp/pathd.json" --log-level warn 2> "$tmp/pathd.log" &
  pid=$!
  wait_pathd ab-server "$pathctl" "$port" "$tmp/pathd.log"
  "$load" --server "127.0.0.1:$port" --quiet -c 2 -P 64 -d 1 $burst --scene "$scene" \
    --scen "$tmp/$scene.map.scen" --every 5 --style corners > /dev/null
  for t in /proc/$pid/task/*; do echo "$(basename "$t") $(awk '{print $14, $15}' "$t/stat")"; done > "$tmp/s0"
  if [ "$perf_ok" = 1 ]; then
    perf stat -x, -e "$events" -p "$pid" -o "$tmp/stat.txt" -- sleep "$secs" > /dev/null 2>&1 &
    pp=$!
  fi
  "$load" --server "127.0.0.1:$port" --quiet --json -c 2 -P 64 -d "$secs" $burst --scene "$scene" \
    --scen "$tmp/$scene.map.scen" --every 5 --style corners > "$tmp/load.json"
  for t in /proc/$pid/task/*; do echo "$(basename "$t") $(awk '{print $14, $15}' "$t/stat")"; done > "$tmp/s1"
  [ -n "$pp" ] && { wait "$pp" || true; }
  kill "$pid"; wait "$pid" 2> /dev/null || true
  python3 - "$name" "$tmp" "$perf_ok" <<'PY'
import json, os, sys
name, d, perf_ok = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
clk = os.sysconf("SC_CLK_TCK")
n = json.load(open(f"{d}/load.json"))["requests"]
a = {l.split()[0]: l.split() for l in open(f"{d}/s0")}
threads, total, system = [], 0.0, 0.0
for l in open(f"{d}/s1"):
    tid, u, s = l.split()
    u0, s0 = (int(a[tid][1]), int(a[tid][2])) if tid in a else (0, 0)
    us = ((int(u) - u0) + (int(s) - s0)) / clk * 1e6 / n
    total += us
    system += (int(s) - s0) / clk * 1e6 / n
    if us > 0.05:
        threads.append(f"{us:.2f}")
line = f"{name} requests {n} cpu {total:.2f} us/request (system {system:.2f}; threads {' + '.join(threads)})"
if perf_ok:
    counts = []
    for l in open(f"{d}/stat.txt"):
        p = l.strip().split(",")
        if len(p) > 3 and p[0].replace(".", "").isdigit():
            counts.append(f"{p[2].replace('syscalls:sys_enter_', '')} {int(float(p[0])) / n:.3f}")
    line += "; per request: " + ", ".join(counts)
print(line, flush=True)
PY
}
for i in $(seq "$pairs"); do
  one "A" "$a"
  one "B" "$b"
done
