#!/usr/bin/env bash
# profile-server.sh - instructions per request of pathd's work around a
# search, counted by callgrind, so that a change's before and after can be
# compared on a shared machine where CPU-time figures swing (issue 30,
# item 6). Runs pathd under callgrind twice on den520d (and the open 64x64
# map of bench-server.sh): once idle (started, one ping, stopped) and once
# under a fixed pipelined load of N requests (pathd-load -n N, 2 x 64,
# every 5th scenario, corners, or STYLE/EVERY/PIPELINE), then prints
#   total  = (loaded - idle) instructions / N
#   search = the search proper's inclusive instructions / N (pd__astar_*,
#            pd__jps_* : the functions pathd-bench also times)
#   around = total - search
# and the top functions by exclusive cost. THREADS (2), SCENE (den520d or
# open), LIMITS (a JSON object for the config's "limits") and PATHD (the
# binary, default BUILD_DIR/server/pathd) change the run.
#
#   bench/server/profile-server.sh BUILD_DIR [N] [OUT_DIR]
set -euo pipefail
build=${1:?usage: profile-server.sh BUILD_DIR [N] [OUT_DIR]}
n=${2:-3000}
out=${3:-$(mktemp -d)}
here=$(cd "$(dirname "$0")/../.." && pwd)
data=${PATHD_BENCH_DATA:-$here/tests/data/movingai}
style=${STYLE:-corners}
every=${EVERY:-5}
pipeline=${PIPELINE:-64}
threads=${THREADS:-2}
scene=${SCENE:-den520d}
limits=${LIMITS:-"{}"}
pathd=${PATHD:-$build/server/pathd}
pathctl="$build/client-examples/c/pathctl"
load="$build/bench/load/pathd-load"
. "$here/bench/pathd-up.sh"
mkdir -p "$out"
cp "$data/maps/den520d.map" "$data/scen/den520d.map.scen" "$out/"
python3 "$here/bench/server/gen-open-map.py" "$out"
port=$(free_port); mport=$(free_port)
cat > "$out/pathd.json" <<JSON
{"listen": "127.0.0.1:$port", "metrics_listen": "127.0.0.1:$mport", "threads": $threads,
 "jump_point_search": true, "limits": $limits,
 "scenes": [{"name": "den520d", "map": "$out/den520d.map", "format": "movingai"},
            {"name": "open", "map": "$out/open.map", "format": "movingai"}]}
JSON
# run NAME REQUESTS: pathd under callgrind, REQUESTS of the load (0: idle).
run() {
  local name=$1 reqs=$2
  valgrind --tool=callgrind --callgrind-out-file="$out/$name.cg" "$pathd" --config "$out/pathd.json" \
    --log-level warn 2> "$out/$name.vg.log" &
  local pid=$!
  for _ in $(seq 600); do "$pathctl" --server "127.0.0.1:$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
  if [ "$reqs" -gt 0 ]; then
    "$load" --server "127.0.0.1:$port" --quiet --json -c 2 -P "$pipeline" -n "$reqs" -d 600 --scene "$scene" \
      --scen "$out/$scene.map.scen" --every "$every" --style "$style" > "$out/$name.load.json"
  fi
  kill -TERM "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
}
run idle 0
run load "$n"
python3 - "$out" "$n" <<'PY'
import json, re, subprocess, sys
d, n = sys.argv[1], int(sys.argv[2])
def totals(f):
    for line in open(f):
        if line.startswith("totals:") or line.startswith("summary:"):
            return int(line.split()[1])
idle, load = totals(f"{d}/idle.cg"), totals(f"{d}/load.cg")
r = json.load(open(f"{d}/load.load.json"))
done = r["requests"]
ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f"{d}/load.cg"],
                     capture_output=True, text=True).stdout
def incl(pat):
    best = 0
    for line in ann.splitlines():
        m = re.match(r"\s*([\d,]+) .*?\s(\S+)\s*(\[|$)", line)
        if m and re.search(pat, line):
            best = max(best, int(m.group(1).replace(",", "")))
    return best
astar, jps = incl(r":pd_search_astar\b"), incl(r":pd_search_jps\b")
search = astar + jps
print(f"requests {done} (errors {r['errors']}), idle {idle:,} Ir, loaded {load:,} Ir")
print(f"total  {(load - idle) / done:10.0f} Ir per request")
print(f"search {search / done:10.0f} Ir per request (pd_search_astar {astar / done:.0f}, pd_search_jps {jps / done:.0f}, inclusive)")
print(f"around {(load - idle - search) / done:10.0f} Ir per request")
PY
callgrind_annotate --threshold=100 "$out/load.cg" 2> /dev/null | sed -n '1,60p' | tail -45
