#!/usr/bin/env bash
# run-fairness.sh - a light client's latency while heavy clients overload
# pathd (issue 10, finding 7). Starts pathd on den520d (from the shared
# Moving AI set), measures one connection with one request in flight alone,
# then again while HEAVY_CONNS connections keep HEAVY_PIPELINE requests each
# in flight (closed loop: far more than the workers can answer), and prints
# both latency summaries and the p99 ratio. Stops by itself.
#
#   bench/fairness/run-fairness.sh [BUILD_DIR]      (default: build)
set -euo pipefail
build=${1:-build}
scen=${PATHD_BENCH_DATA:-../shared/benchmarks/movingai}/scen/den520d.map.scen
map=${PATHD_BENCH_DATA:-../shared/benchmarks/movingai}/maps/den520d.map
heavy_conns=${HEAVY_CONNS:-2}
heavy_pipeline=${HEAVY_PIPELINE:-64}
port=${PORT:-7555}
[ -f "$scen" ] && [ -f "$map" ] || { echo "run-fairness: needs $scen and $map" >&2; exit 1; }
dir=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$dir"' EXIT
cat > "$dir/conf.json" <<JSON
{ "listen": "127.0.0.1:$port", "threads": 2, "log_level": "warn", "jump_point_search": true,
  "scenes": [ { "name": "den", "map": "$(realpath "$map")", "format": "movingai" } ] }
JSON
"$build/server/pathd" --config "$dir/conf.json" 2>"$dir/pathd.log" &
pid=$!
sleep 1.5
load() { "$build/bench/load/pathd-load" --server "127.0.0.1:$port" --scene den --scen "$scen" --quiet --json "$@"; }
load -c 1 -P 1 -d 4 > "$dir/alone.json"
load -c "$heavy_conns" -P "$heavy_pipeline" -d 7 > "$dir/heavy.json" &
heavy=$!
sleep 1.5
load -c 1 -P 1 -d 4 > "$dir/loaded.json"
wait "$heavy"
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
a, l, h = (json.load(open(f"{d}/{n}.json")) for n in ("alone", "loaded", "heavy"))
for name, r in (("light alone", a), ("light under load", l), ("heavy", h)):
    lat = r["latency_us"]
    print(f"{name:17s} requests {r['requests']:7d}  p50 {lat['p50']:6d} us  p99 {lat['p99']:6d} us  statuses {r['statuses']}")
print(f"light p99 under load / alone: {l['latency_us']['p99'] / max(a['latency_us']['p99'], 1):.1f}x")
PY
