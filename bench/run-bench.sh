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
# exactly those queries, in steady state. Ours and the yardstick allocate
# their per-cell search arrays on a map's first query and touch their pages
# for the first time while the first queries run, so without a warm-up a few
# page-faulting cold queries (up to 10x their warm time) sit inside a
# 20-query median:
#   - ours (A* and JPS) run the subset with pathd-bench --warmup, which
#     searches each map's queries once untimed before timing them;
#   - the yardstick, which we cannot change, runs a "warm" file per map that
#     holds the subset twice; report.js keeps the second half of its rows;
#   - PathFinding.js keeps no state between queries (each query searches a
#     fresh clone of the grid), so its steady state is a warm JIT: peers.js
#     runs the first queries of every map untimed before timing that map.
#     Doubling its file would double by far the slowest part of the run.
# Knobs (environment):
#   PATHD_BENCH_DATA        Moving AI data dir (default ../shared/benchmarks/movingai)
#   PATHD_YARDSTICK         yardstick source (default ../shared/yardstick/astar.c)
#   BENCH_QUERIES_PER_MAP   queries per map (default 20)
#   BENCH_PASSES            passes of ours and the yardstick over the subset
#                           (default 3); a map's figure is the median over
#                           passes of its per-pass median, which keeps a
#                           preempted pass on a busy machine from counting.
#   BENCH_PF_PASSES         passes of PathFinding.js (default 3; 0 skips it,
#                           for the ours/yardstick table alone); same median
#                           of per-pass medians. Each pass runs AStarFinder and
#                           JumpPointFinder in separate fresh node processes:
#                           its timings swing 2-5x between processes (GC and
#                           JIT decisions), and a finder sharing a process
#                           with the other pays for the other's garbage.
#   BENCH_NODE_FLAGS        extra node options for PathFinding.js (default
#                           none). Its grid clones are large short-lived
#                           allocations, so V8's young-generation size moves
#                           the clone+findPath figure by up to 20x (e.g.
#                           --max-semi-space-size=64); the default measures
#                           PathFinding.js as node runs it out of the box.
#   BENCH_MAPS              space-separated map names (default below: all
#                           Dragon Age and StarCraft maps, one of each other
#                           family, both maze widths)
# Passes interleave the tools (ours, ours JPS, yardstick, PathFinding.js), so
# a slow spell on the machine hits all of them rather than one.
# Results are kept in BUILD_DIR/bench-last/: the subset scen/, the doubled
# warm/ (yardstick only), ours-P.json, ours-jps-P.json, yardstick-P/MAP.tsv
# (both copies), peers-P.json (A*), peers-jps-P.json and report.txt.
# Exit status: pathd-bench's (1 when any of our paths failed its check).
set -eu

build=${1:?usage: bench/run-bench.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
data=${PATHD_BENCH_DATA:-$repo/../shared/benchmarks/movingai}
yard_src=${PATHD_YARDSTICK:-$repo/../shared/yardstick/astar.c}
per_map=${BENCH_QUERIES_PER_MAP:-20}
passes=${BENCH_PASSES:-3}
pf_passes=${BENCH_PF_PASSES:-3}
node_flags=${BENCH_NODE_FLAGS:-}
maps=${BENCH_MAPS:-"arena2 brc202d den520d hrt201n lak303d orz100d ost003d
Aftershock BlackLotus AR0307SR maze512-1-0 maze512-32-0 8room_000 random512-40-0 Berlin_0_512"}

fail() { echo "run-bench.sh: $*" >&2; exit 2; }

bench="$build/bench/pathd-bench"
[ -x "$bench" ] || fail "$bench not found: build first (make build)"
[ -d "$data/scen" ] && [ -d "$data/maps" ] || fail "no Moving AI data at $data (set PATHD_BENCH_DATA)"
# Absolute, because PathFinding.js runs from inside the run directory.
data=$(cd "$data" && pwd)
[ -f "$yard_src" ] || fail "yardstick source $yard_src not found (set PATHD_YARDSTICK)"
command -v node >/dev/null 2>&1 || fail "node not found: install nodejs and npm (Debian: apt-get install nodejs npm; report.js needs node even with BENCH_PF_PASSES=0)"
case $per_map in ''|*[!0-9]*|0) fail "BENCH_QUERIES_PER_MAP must be a positive number" ;; esac
case $passes in ''|*[!0-9]*|0) fail "BENCH_PASSES must be a positive number" ;; esac
case $pf_passes in ''|*[!0-9]*) fail "BENCH_PF_PASSES must be a number" ;; esac

# PathFinding.js, pinned by bench/peers/package-lock.json.
if [ "$pf_passes" -gt 0 ] && [ ! -d "$here/peers/node_modules/pathfinding" ]; then
    command -v npm >/dev/null 2>&1 || fail "npm not found: install npm"
    echo "run-bench.sh: installing PathFinding.js (npm ci in bench/peers)" >&2
    (cd "$here/peers" && npm ci --no-audit --no-fund >&2)
fi

yard="$build/yardstick-astar"
# Rebuilt when missing or older than its source (find -newer: POSIX, unlike test -nt).
if [ ! -x "$yard" ] || [ -n "$(find "$yard_src" -newer "$yard" 2>/dev/null)" ]; then
    cc -O3 -DNDEBUG -o "$yard" "$yard_src" -lm
fi

out="$build/bench-last"
rm -rf "$out"
mkdir -p "$out/scen" "$out/warm"
started=$(date +%s)

# The subset: per_map queries spread evenly over each file (which is sorted
# by bucket, i.e. by length), so short and long queries are both present.
# The yardstick's warm file: the subset twice.
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
    awk 'NR == 1 { print; next } NF > 0 { q[++count] = $0; print }
         END { for (i = 1; i <= count; i++) print q[i] }' \
        "$out/scen/$m.map.scen" > "$out/warm/$m.map.scen"
done

# Ours reads the plain subset with --warmup.
set --
for m in $maps; do set -- "$@" "$out/scen/$m.map.scen"; done
# PathFinding.js reads the plain subset too, named relative to scen/ (map
# names hold no blanks; BUILD_DIR might).
subset=
for m in $maps; do subset="$subset $m.map.scen"; done

ours_rc=0
pass=1
while [ "$pass" -le "$passes" ] || [ "$pass" -le "$pf_passes" ]; do
    if [ "$pass" -le "$passes" ]; then
        echo "run-bench.sh: pass $pass/$passes: pathd-bench, yardstick ($# maps, $per_map queries each, after a warm-up)" >&2
        rc=0
        "$bench" --warmup --json --maps "$data/maps" "$@" > "$out/ours-$pass.json" || rc=$?
        [ "$rc" -le 1 ] || fail "pathd-bench failed (exit $rc)"
        [ "$rc" -eq 0 ] || ours_rc=$rc
        # The same queries with jump point search, the daemon's answer on uniform grids.
        rc=0
        "$bench" --warmup --algo jps --json --maps "$data/maps" "$@" > "$out/ours-jps-$pass.json" || rc=$?
        [ "$rc" -le 1 ] || fail "pathd-bench --algo jps failed (exit $rc)"
        [ "$rc" -eq 0 ] || ours_rc=$rc
        mkdir -p "$out/yardstick-$pass"
        for m in $maps; do
            "$yard" "$data/maps/$m.map" "$out/warm/$m.map.scen" > "$out/yardstick-$pass/$m.tsv"
        done
    fi
    if [ "$pass" -le "$pf_passes" ]; then
        echo "run-bench.sh: pass $pass/$pf_passes: PathFinding.js (the slow part)" >&2
        # $node_flags and $subset are lists (of options, of file names): split on purpose.
        # shellcheck disable=SC2086
        (cd "$out/scen" && node $node_flags "$here/peers/peers.js" --finders astar \
            --maps "$data/maps" $subset) > "$out/peers-$pass.json"
        # shellcheck disable=SC2086
        (cd "$out/scen" && node $node_flags "$here/peers/peers.js" --finders jps \
            --maps "$data/maps" $subset) > "$out/peers-jps-$pass.json"
    fi
    pass=$((pass + 1))
done

{
    echo "# make bench, finished $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $(nproc) cores," \
         "$(cc --version | head -n 1), node $(node --version);" \
         "BENCH_QUERIES_PER_MAP=$per_map BENCH_PASSES=$passes BENCH_PF_PASSES=$pf_passes" \
         "BENCH_NODE_FLAGS='$node_flags';" \
         "took $(( $(date +%s) - started )) s"
    node "$here/peers/report.js" "$out"
} | tee "$out/report.txt"

exit "$ours_rc"
