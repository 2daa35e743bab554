#!/bin/sh
# What a reload (SIGHUP) costs for a scene it keeps and for one it builds
# again (issue 12, "Reload keeps the living state"). One generated
# SIDE x SIDE ASCII map (20% random walls, fixed seed), unit sizes 1-3; pathd
# is started on it, then reloaded REPS times with nothing changed (the scene
# is kept: its map is read, parsed and compared, nothing is built) and REPS
# times with one cell of the map flipped before each (the scene is built
# anew: clearance, three unit grids, labels). Each time is pathd's own, from
# its "reloading" line to its "reloaded" line (millisecond stamps), so the
# signal's delivery and the script's polling are not in it.
#
# usage: bench/reload/bench-reload.sh BUILD_DIR [SIDE] [REPS]
set -eu
build=${1:?usage: bench-reload.sh BUILD_DIR [SIDE] [REPS]}
side=${2:-4096}
reps=${3:-3}
bin=$build/server/pathd
[ -x "$bin" ] || { echo "bench-reload: $bin is not built" >&2; exit 2; }
dir=$(mktemp -d /tmp/pathd-bench-reload-XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT INT TERM

awk -v side="$side" 'BEGIN { srand(7); for (y = 0; y < side; y++) { row = "";
    for (x = 0; x < side; x++) row = row (rand() < 0.2 ? "#" : "."); print row } }' > "$dir/big.txt"
cat > "$dir/pathd.json" <<JSON
{ "listen": "127.0.0.1:0", "threads": 2,
  "scenes": [ {"name": "big", "map": "big.txt", "format": "ascii", "unit_sizes": [1, 2, 3]} ] }
JSON

"$bin" --config "$dir/pathd.json" > "$dir/log.txt" 2>&1 &
pid=$!
until grep -q "pathd started" "$dir/log.txt"; do
    kill -0 "$pid" 2>/dev/null || { cat "$dir/log.txt"; exit 1; }
    sleep 0.1
done

# Sends SIGHUP and waits for the next "reloaded" (or "reload refused").
reload_once() {
    n=$(grep -c -e "reloaded " -e "reload refused" "$dir/log.txt" || true)
    kill -HUP "$pid"
    until [ "$(grep -c -e 'reloaded ' -e 'reload refused' "$dir/log.txt")" -gt "$n" ]; do sleep 0.02; done
}
i=0
while [ "$i" -lt "$reps" ]; do reload_once; i=$((i + 1)); done
i=0
while [ "$i" -lt "$reps" ]; do
    # Flip the map's first cell in place: same size, one cell changed.
    first=$(head -c 1 "$dir/big.txt")
    if [ "$first" = "." ]; then printf '#'; else printf '.'; fi |
        dd of="$dir/big.txt" bs=1 count=1 conv=notrunc 2>/dev/null
    reload_once
    i=$((i + 1))
done
kill "$pid"; wait "$pid" || true; pid=

echo "map ${side}x${side}, unit sizes 1-3; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
function ms(ts,   d, t, s) { split(ts, d, "T"); split(d[2], t, ":"); s = t[3]; sub("Z", "", s);
                              return (t[1] * 3600 + t[2] * 60 + s) * 1000 }
/ INFO (loading|reloading) / { t0 = ms($1) }
/ INFO pathd started / { printf "start-up load          %6.0f ms\n", ms($1) - t0 }
/ INFO reloaded / { k = $0; sub(/.*scenes, /, "", k); sub(/ with their updates/, "", k);
                    printf "reload (%s) %6.0f ms\n", k, ms($1) - t0 }
/ reload refused/ { print "reload refused: " $0; bad = 1 }
END { exit bad }' "$dir/log.txt"
