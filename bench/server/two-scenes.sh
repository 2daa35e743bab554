# two-scenes.sh - sourced by ab-server.sh and syscalls-server.sh: the two
# scenes their pathd serves (tests/data's den520d and bench-server.sh's
# open 64x64 map) and its config, written the same way for both so their
# figures are of the same server.
#
#   two_scenes_data DIR           copies den520d and its scenarios to DIR
#                                 and writes the open map there
#   two_scenes_conf DIR PORT LIMITS [EXTRA]
#                                 writes DIR/pathd.json: 2 threads, jump
#                                 point search, LIMITS (a JSON object) as
#                                 "limits", EXTRA (say '"metrics_listen":
#                                 "...",') among the top-level fields
two_scenes_data() {
  local dir=$1 here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  cp "$here/tests/data/movingai/maps/den520d.map" "$here/tests/data/movingai/scen/den520d.map.scen" "$dir/"
  python3 "$here/bench/server/gen-open-map.py" "$dir"
}

two_scenes_conf() {
  local dir=$1 port=$2 limits=$3 extra=${4:-}
  cat > "$dir/pathd.json" <<JSON
{"listen": "127.0.0.1:$port", $extra "threads": 2, "jump_point_search": true,
 "limits": $limits,
 "scenes": [{"name": "den520d", "map": "$dir/den520d.map", "format": "movingai"},
            {"name": "open", "map": "$dir/open.map", "format": "movingai"}]}
JSON
}
