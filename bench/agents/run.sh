#!/bin/sh
# bench/agents/run.sh - make bench-agents: issue 34's benchmark. For each
# scenario (500 agents on den520d and on Berlin_0_256, 2000 on
# Berlin_0_1024; 80% unit 1, 20% unit 2; 10 Hz; PD_AGENTS_SECONDS of game
# time, default 600) it runs pathd-agents-bench three times - one agent on an
# empty table against FindPath, every agent reserving (with the bench's
# default rules against deadlocks: clear holds, holders moved aside after
# 2 s; pd_yield.h), every agent planned alone (the baseline) - has tests/agents/check_plans.py replay every answer
# of the two simulations, and prints the target table. In process on the
# core; then --mode wire runs the reserving simulation again through a live
# pathd (started here on a loopback port with a scene of the map, stopped
# after; docs/BENCHMARKS.md, "Through the server"), checked the same way, its
# row printed beside the in-process ones. Each wire run is bounded by
# PD_AGENTS_WIRE_TIMEOUT seconds (default 1800); PD_AGENTS_WIRE=0 skips the
# wire runs. The Moving AI maps exist only on
# the benchmark machine (../shared/benchmarks/movingai beside the checkout,
# or PATHD_MOVINGAI_DIR): without them the bench says so and skips.
# Usage: bench/agents/run.sh [BUILD_DIR]; PD_AGENTS_SECONDS (game time),
# PD_AGENTS_ONLY (a space-separated list of the maps to run).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
seconds=${PD_AGENTS_SECONDS:-600}
py=${PATHD_PYTHON:-python3}
maps=${PATHD_MOVINGAI_DIR:-$root/../shared/benchmarks/movingai}/maps
bench=$build/bench/agents/pathd-agents-bench
pathd=$build/server/pathd
wire=${PD_AGENTS_WIRE:-1}
wire_timeout=${PD_AGENTS_WIRE_TIMEOUT:-1800}
if [ ! -f "$maps/den520d.map" ] || [ ! -f "$maps/Berlin_0_256.map" ] || [ ! -f "$maps/Berlin_0_1024.map" ]; then
    echo "bench-agents: skipped: the Moving AI maps (den520d, Berlin_0_256, Berlin_0_1024) are not in $maps;"
    echo "they exist only on the benchmark machine (set PATHD_MOVINGAI_DIR to their directory)."
    exit 0
fi
if [ ! -x "$bench" ] || { [ "$wire" != 0 ] && [ ! -x "$pathd" ]; }; then
    echo "bench-agents: $bench or $pathd is not built (make build)" >&2
    exit 2
fi

# The pathd of one wire run: its pid, its directory (config, log).
pd_pid=
pd_dir=
stop_pathd() {
    if [ -n "$pd_pid" ]; then
        kill "$pd_pid" 2>/dev/null || true
        wait "$pd_pid" 2>/dev/null || true
        pd_pid=
    fi
    if [ -n "$pd_dir" ]; then
        rm -rf "$pd_dir"
        pd_dir=
    fi
}
trap stop_pathd EXIT
trap 'stop_pathd; exit 130' INT TERM

# start_pathd MAP: a pathd on 127.0.0.1 (a free port) serving the map as
# scene "bench" (units 1 and 2) with no reservation limits, as the
# in-process run's table has none (the longest window matters: moving
# holders aside plans all the way, or as far as the table allows), the TTL
# and clear holds at their defaults as the bench's; sets pd_addr, or
# returns 1 when it did not come up in 60 s.
start_pathd() {
    pd_dir=$(mktemp -d "${TMPDIR:-/tmp}/pathd-bench-agents.XXXXXX")
    cat >"$pd_dir/pathd.json" <<CONF
{"listen": "127.0.0.1:0", "metrics_listen": "", "threads": 2, "log_level": "info",
 "limits": {"max_agents_per_scene": 0, "max_reservation_entries": 0, "max_reservation_window_ms": 0,
            "max_agent_bytes": 0},
 "scenes": [{"name": "bench", "map": "$1", "format": "movingai", "unit_sizes": [1, 2]}]}
CONF
    "$pathd" --config "$pd_dir/pathd.json" 2>"$pd_dir/pathd.log" &
    pd_pid=$!
    tries=0
    pd_addr=
    while [ -z "$pd_addr" ]; do
        pd_addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$pd_dir/pathd.log" | head -n 1)
        [ -n "$pd_addr" ] && break
        tries=$((tries + 1))
        if [ "$tries" -gt 600 ] || ! kill -0 "$pd_pid" 2>/dev/null; then
            echo "bench-agents: pathd did not start:" >&2
            cat "$pd_dir/pathd.log" >&2
            return 1
        fi
        sleep 0.1
    done
}
out=$build/bench-agents${PD_AGENTS_ONLY:+-$(echo $PD_AGENTS_ONLY | tr " " "+")}
mkdir -p "$out"
log=$out/figures.txt
: >"$log"
echo "bench-agents: $seconds s of game time per simulation; answers and figures in $out"
for spec in den520d:500 Berlin_0_256:500 Berlin_0_1024:2000; do
    map=${spec%%:*}
    n=${spec##*:}
    # PD_AGENTS_ONLY="den520d Berlin_0_256" runs only those scenarios.
    case " ${PD_AGENTS_ONLY:-$map} " in *" $map "*) ;; *) continue ;; esac
    echo "== $map, $n agents" | tee -a "$log"
    "$bench" --map "$maps/$map.map" --mode single --queries 300 | tee -a "$log"
    for mode in reserve alone; do
        "$bench" --map "$maps/$map.map" --mode $mode --agents "$n" --seconds "$seconds" \
            --answers "$out/$map-$mode.jsonl" | tee -a "$log"
        # The checker exits 1 on any count; the baseline is expected to
        # have conflicts, and the table below says what came out.
        "$py" "$root/tests/agents/check_plans.py" "$out/$map-$mode.jsonl" | tee -a "$log" || true
    done
    # The reserving simulation again, through a live pathd: ReservePath's
    # server-side time (Response.server_us) instead of the core's CPU time.
    if [ "$wire" != 0 ]; then
        if start_pathd "$maps/$map.map"; then
            if ! timeout "$wire_timeout" "$bench" --map "$maps/$map.map" --mode wire --server "$pd_addr" \
                --scene bench --agents "$n" --seconds "$seconds" --answers "$out/$map-wire.jsonl" \
                >"$pd_dir/wire.txt"; then
                echo "bench-agents: the wire run of $map failed or passed ${wire_timeout} s" >>"$pd_dir/wire.txt"
            fi
            tee -a "$log" <"$pd_dir/wire.txt"
            "$py" "$root/tests/agents/check_plans.py" "$out/$map-wire.jsonl" | tee -a "$log" || true
            if cmp -s "$out/$map-wire.jsonl" "$out/$map-reserve.jsonl"; then
                echo "wire answers: identical to the in-process run's" | tee -a "$log"
            else
                echo "wire answers: differ from the in-process run's" | tee -a "$log"
            fi
        else
            echo "bench-agents: no wire run for $map (pathd did not start)" | tee -a "$log"
        fi
        stop_pathd
    fi
done
"$py" "$here/table.py" "$log"
