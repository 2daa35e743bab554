#!/usr/bin/env bash
# syscalls-server.sh - where pathd's system calls and context switches
# under a pipelined load come from (issue 30, item 6): which lock or
# condition variable each futex call is on, who writes the completion
# eventfd, who sleeps. callgrind counts instructions but not these, and
# `perf stat` counts them but not their callers. Runs pathd (2 threads,
# jump point search) on tests/data's den520d (SCENE=open: the 64x64 open
# map of bench-server.sh), one second of warm-up, then records SECS of
# `pathd-load -c 2 -P 64 --burst --every 5 --style corners` with
# `perf record --call-graph dwarf` on the futex, write, epoll_wait and
# sched_yield entries and the scheduler's switches, and prints each kind
# per request by thread (the loop is pathd's first thread, w1 and w2 its
# workers) and calling chain (pathd's frames; libc's and the kernel's
# left out; futex calls by libc's entry: lll_lock_wake is an unlock that
# found the mutex marked contended, lll_lock_wait a lock that waited).
# perf's own unwinding slows pathd: read the shares and the kinds, and
# take CPU per request from ab-server.sh. Needs perf with tracepoints
# (root, or perf_event_paranoid <= -1). LIMITS (a JSON object for the
# config's "limits") and PATHD (default BUILD_DIR/server/pathd) change
# the run.
#
#   bench/server/syscalls-server.sh BUILD_DIR [SECS]
set -euo pipefail
build=${1:?usage: syscalls-server.sh BUILD_DIR [SECS]}
secs=${2:-3}
here=$(cd "$(dirname "$0")/../.." && pwd)
pathd=${PATHD:-$build/server/pathd}
scene=${SCENE:-den520d}
limits=${LIMITS:-"{}"}
. "$here/bench/pathd-up.sh"
. "$here/bench/server/two-scenes.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
two_scenes_data "$tmp"
events=syscalls:sys_enter_futex,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_sched_yield,sched:sched_switch
if ! perf record -q -o /dev/null -e "$events" -- true > /dev/null 2>&1; then
  echo "syscalls-server: perf cannot record tracepoints here (root or perf_event_paranoid -1)" >&2
  exit 1
fi
port=$(free_port)
two_scenes_conf "$tmp" "$port" "$limits"
"$pathd" --config "$tmp/pathd.json" --log-level warn 2> "$tmp/pathd.log" &
pid=$!
wait_pathd syscalls-server "$build/client-examples/c/pathctl" "$port" "$tmp/pathd.log"
load=("$build/bench/load/pathd-load" --server "127.0.0.1:$port" --quiet -c 2 -P 64 --burst
      --scene "$scene" --scen "$tmp/$scene.map.scen" --every 5 --style corners)
"${load[@]}" -d 1 > /dev/null
perf record -q -o "$tmp/perf.data" -e "$events" --call-graph dwarf,16384 -p "$pid" -- sleep "$secs" > /dev/null 2>&1 &
pp=$!
"${load[@]}" --json -d "$secs" > "$tmp/load.json"
wait "$pp" || true
tids=$(ls /proc/$pid/task | sort -n | tr '\n' ' ')
kill "$pid"; wait "$pid" 2> /dev/null || true
perf script -i "$tmp/perf.data" 2> /dev/null > "$tmp/script.txt"
python3 - "$tmp/load.json" "$tmp/script.txt" "$tids" <<'PY'
import collections, json, re, sys
n = json.load(open(sys.argv[1]))["requests"]
tids = [int(t) for t in sys.argv[3].split()]
# pathd's threads in creation order: the loop, then the workers (later
# threads, if any, keep their id).
role = {t: ("loop" if i == 0 else f"w{i}") for i, t in enumerate(tids)}
skip = re.compile(r"^(__|lll_|futex_|schedule|do_|entry_|x64|pthread_|___|start_thread|clone|exit_to|syscall_|\[unknown\]|0x)")
counts, totals = collections.Counter(), collections.Counter()
for block in open(sys.argv[2]).read().split("\n\n"):
    lines = [l for l in block.splitlines() if l.strip()]
    if not lines:
        continue
    m = re.search(r"(syscalls:sys_enter_(\w+)|sched:sched_switch)", lines[0])
    if not m:
        continue
    kind = m.group(2) or "switch"
    tid = int(lines[0].split()[1])
    frames = [l.split()[1].split("+")[0] for l in lines[1:] if len(l.split()) >= 2]
    libc = next((f for f in frames if f.startswith(("__GI___lll_lock_w", "futex_wa", "__new_sem", "__futex_abs"))), "")
    if kind == "futex" and libc:
        kind = "futex " + libc.replace("__GI___", "").replace("__new_", "").replace("_common64", "")
    if kind == "switch":
        kind = "switch (" + ("sleeps" if "prev_state=S" in lines[0] else "preempted") + ")"
    own = [f for f in frames if not skip.match(f)][:3]
    counts[(kind, role.get(tid, str(tid)), " < ".join(own))] += 1
    totals[kind.split()[0]] += 1
print(f"requests {n} in the recorded run; per request:")
for k in sorted(totals):
    print(f"  {k:12s} {totals[k] / n:.4f}")
print("by kind, thread and caller (at least 1% of the kind):")
for (kind, who, chain), c in sorted(counts.items(), key=lambda x: (x[0][0], -x[1])):
    if c >= 0.01 * totals[kind.split()[0]]:
        print(f"  {kind:34s} {who:4s} {c / n:.4f}  {chain}")
PY
