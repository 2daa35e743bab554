#!/bin/sh
# run-bench.sh BUILD_DIR - what `make bench` runs.
#
# Times three A* implementations on the very same Moving AI queries in one
# run, so the ratios survive a noisy machine:
#   ours       - BUILD_DIR/bench/pathd-bench (the pathd search core)
#   yardstick  - ../shared/yardstick/astar.c, a plain competent C A*,
#                built here with cc -O3 -DNDEBUG
#   PF A*/JPS  - PathFinding.js (bench/peers, installed from npm)
# and prints one table with the per-map medians and ratios.
#
# The query subset is written out as scenario files first (evenly spaced
# queries from every bucket of each chosen map), and all three tools run on
# exactly those files. Knobs (environment):
#   PATHD_BENCH_DATA        Moving AI data dir (default ../shared/benchmarks/movingai)
#   PATHD_YARDSTICK         yardstick source (default ../shared/yardstick/astar.c)
#   BENCH_QUERIES_PER_MAP   queries per map (default 20)
#   BENCH_PASSES            passes of ours and the yardstick over the subset
#                           (default 3); a map's figure is the median over
#                           passes of its per-pass median, which keeps a
#                           preempted pass on a busy machine from counting.
#                           PathFinding.js runs one pass (it is ~20x slower,
#                           so scheduling noise matters far less to it).
#   BENCH_MAPS              space-separated map names (default below: all
#                           Dragon Age and StarCraft maps, one of each other family)
# Results are kept in BUILD_DIR/bench-last/: the subset scen/, ours-P.json,
# yardstick-P/MAP.tsv, peers.json and report.txt. Exit status: pathd-bench's
# (1 when any of our paths failed its check).
set -eu

build=${1:?usage: bench/run-bench.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
data=${PATHD_BENCH_DATA:-$repo/../shared/benchmarks/movingai}
yard_src=${PATHD_YARDSTICK:-$repo/../shared/yardstick/astar.c}
per_map=${BENCH_QUERIES_PER_MAP:-20}
passes=${BENCH_PASSES:-3}
maps=${BENCH_MAPS:-"arena2 brc202d den520d hrt201n lak303d orz100d ost003d
Aftershock BlackLotus AR0307SR maze512-32-0 8room_000 random512-40-0 Berlin_0_512"}

fail() { echo "run-bench.sh: $*" >&2; exit 2; }

bench="$build/bench/pathd-bench"
[ -x "$bench" ] || fail "$bench not found: build first (make build)"
[ -d "$data/scen" ] && [ -d "$data/maps" ] || fail "no Moving AI data at $data (set PATHD_BENCH_DATA)"
[ -f "$yard_src" ] || fail "yardstick source $yard_src not found (set PATHD_YARDSTICK)"
command -v node >/dev/null 2>&1 || fail "node not found: install nodejs and npm (Debian: apt-get install nodejs npm)"
case $per_map in ''|*[!0-9]*|0) fail "BENCH_QUERIES_PER_MAP must be a positive number" ;; esac
case $passes in ''|*[!0-9]*|0) fail "BENCH_PASSES must be a positive number" ;; esac

# PathFinding.js, pinned by bench/peers/package-lock.json.
if [ ! -d "$here/peers/node_modules/pathfinding" ]; then
    command -v npm >/dev/null 2>&1 || fail "npm not found: install npm"
    echo "run-bench.sh: installing PathFinding.js (npm ci in bench/peers)" >&2
    (cd "$here/peers" && npm ci --no-audit --no-fund >&2)
fi

yard="$build/yardstick-astar"
if [ ! -x "$yard" ] || [ "$yard_src" -nt "$yard" ]; then
    cc -O3 -DNDEBUG -o "$yard" "$yard_src" -lm
fi

out="$build/bench-last"
rm -rf "$out"
mkdir -p "$out/scen"

# The subset: per_map queries spread evenly over each file (which is sorted
# by bucket, i.e. by length), so short and long queries are both present.
for m in $maps; do
    src="$data/scen/$m.map.scen"
    [ -f "$src" ] || fail "no scenario file $src"
    awk -v n="$per_map" '
        NR == 1 { print; next }
        NF > 0 { q[++count] = $0 }
        END {
            if (count == 0) exit 1
            k = (n < count) ? n : count
            for (i = 0; i < k; i++) print q[int((i + 0.5) * count / k) + 1]
        }' "$src" > "$out/scen/$m.map.scen" || fail "$src holds no queries"
done

set --
for m in $maps; do set -- "$@" "$out/scen/$m.map.scen"; done

# Ours and the yardstick alternate pass by pass, so a slow spell on the
# machine hits both rather than one.
ours_rc=0
pass=1
while [ "$pass" -le "$passes" ]; do
    echo "run-bench.sh: pass $pass/$passes: pathd-bench, yardstick ($# maps, $per_map queries each)" >&2
    rc=0
    "$bench" --json --maps "$data/maps" "$@" > "$out/ours-$pass.json" || rc=$?
    [ "$rc" -le 1 ] || fail "pathd-bench failed (exit $rc)"
    [ "$rc" -eq 0 ] || ours_rc=$rc
    # The same queries with jump point search, the daemon's answer on uniform grids.
    rc=0
    "$bench" --algo jps --json --maps "$data/maps" "$@" > "$out/ours-jps-$pass.json" || rc=$?
    [ "$rc" -le 1 ] || fail "pathd-bench --algo jps failed (exit $rc)"
    [ "$rc" -eq 0 ] || ours_rc=$rc
    mkdir -p "$out/yardstick-$pass"
    for m in $maps; do
        "$yard" "$data/maps/$m.map" "$out/scen/$m.map.scen" > "$out/yardstick-$pass/$m.tsv"
    done
    pass=$((pass + 1))
done

echo "run-bench.sh: PathFinding.js (the slow part)" >&2
node "$here/peers/peers.js" --maps "$data/maps" "$@" > "$out/peers.json"

{
    echo "# make bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $(nproc) cores," \
         "$(cc --version | head -n 1), node $(node --version)"
    node "$here/peers/report.js" "$out"
} | tee "$out/report.txt"

exit "$ours_rc"
