#!/bin/sh
# bench/agents/run.sh - make bench-agents: issue 34's benchmark. For each
# scenario (500 agents on den520d and on Berlin_0_256, 2000 on
# Berlin_0_1024; 80% unit 1, 20% unit 2; 10 Hz; PD_AGENTS_SECONDS of game
# time, default 600) it runs pathd-agents-bench three times - one agent on an
# empty table against FindPath, every agent reserving (with the bench's
# default rules against deadlocks: clear holds, holders moved aside after
# 2 s; pd_yield.h), every agent planned alone (the baseline) - has tests/agents/check_plans.py replay every answer
# of the two simulations, and prints the target table. In process on the
# core; --mode wire runs the same simulation through a live pathd, by hand
# (docs/BENCHMARKS.md, "Through the server"). The Moving AI maps exist only on
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
if [ ! -f "$maps/den520d.map" ] || [ ! -f "$maps/Berlin_0_256.map" ] || [ ! -f "$maps/Berlin_0_1024.map" ]; then
    echo "bench-agents: skipped: the Moving AI maps (den520d, Berlin_0_256, Berlin_0_1024) are not in $maps;"
    echo "they exist only on the benchmark machine (set PATHD_MOVINGAI_DIR to their directory)."
    exit 0
fi
if [ ! -x "$bench" ]; then
    echo "bench-agents: $bench is not built (make build)" >&2
    exit 2
fi
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
done
"$py" "$here/table.py" "$log"
