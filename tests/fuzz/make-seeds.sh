#!/usr/bin/env bash
# Rewrites the committed seed corpora under tests/fuzz/corpus/ from their
# sources: request frames from tests/fuzz/seeds/*.txtpb (protoc's text
# format, so a seed stays readable and survives schema changes), maps and
# configs from tests/data and config/, update chains spelled out below.
# Run it after changing the schema or a seed; commit what it writes. Needs
# protoc, python3, gzip and the zstd command (Debian: zstd).
set -euo pipefail
cd "$(dirname "$0")/../.."
C=tests/fuzz/corpus
S=tests/fuzz/seeds

for t in fuzz_codec fuzz_find_path fuzz_mapfile fuzz_tiled fuzz_tdata fuzz_ldtk fuzz_conf fuzz_scene_update; do
  rm -rf "${C:?}/$t"
  mkdir -p "$C/$t"
done

# Requests. fuzz_find_path takes a bare payload; fuzz_codec a byte stream
# whose first byte sets the read size (1 + 4 * byte): 0 feeds it one byte
# at a time, 255 in one read.
for src in "$S"/*.txtpb; do
  name=$(basename "$src" .txtpb)
  payload=$(mktemp)
  protoc --proto_path=proto --encode=pathd.v1.Request pathd.proto <"$src" >"$payload"
  case "$name" in path_*) cat "$payload" >"$C/fuzz_find_path/$name" ;; esac
  len=$(stat -c %s "$payload")
  { printf '\377'; printf "\\$(printf %03o $((len >> 24 & 255)))\\$(printf %03o $((len >> 16 & 255)))"
    printf "\\$(printf %03o $((len >> 8 & 255)))\\$(printf %03o $((len & 255)))"; cat "$payload"; } \
    >"$C/fuzz_codec/$name"
  rm -f "$payload"
done
# Two frames in one stream, read a byte at a time.
{ printf '\000'; tail -c +2 "$C/fuzz_codec/ping"; tail -c +2 "$C/fuzz_codec/path_units_basic"; } \
  >"$C/fuzz_codec/two_frames_bytewise"
# A header announcing 16 MiB: refused before any allocation.
printf '\377\001\000\000\000\010\001' >"$C/fuzz_codec/frame_too_large"

# Maps: byte 0 picks the parser (0 Moving AI, 1 ASCII, 2 Moving AI with the
# four (character, cost) pairs that follow).
for m in scene_small.map e2e4_bench.map bench_island.map; do
  { printf '\000'; cat "tests/data/$m"; } >"$C/fuzz_mapfile/movingai_${m%.map}"
done
for m in scene_small.txt core_weighted.txt e2e4_terrain.txt scene_bad.txt; do
  { printf '\001'; cat "tests/data/$m"; } >"$C/fuzz_mapfile/ascii_${m%.txt}"
done
{ printf '\002S\003x\000T\011W\377'; cat tests/data/scene4_costs.map; } >"$C/fuzz_mapfile/movingai_costs"

# Tiled maps: bytes before a NUL name the layer.
cp config/scenes/courtyard.tmj "$C/fuzz_tiled/courtyard"
{ printf 'walls\000'; cat config/scenes/courtyard.tmj; } >"$C/fuzz_tiled/courtyard_walls"
{ printf 'spawns\000'; cat config/scenes/courtyard.tmj; } >"$C/fuzz_tiled/courtyard_object_layer"
cp tests/data/scene4_base64.tmj "$C/fuzz_tiled/base64"
cp tests/data/scene4_syntax.tmj "$C/fuzz_tiled/syntax_error"
# .tmx: compressed layers and colliders; external tilesets, refused here.
cp config/scenes/harbour.tmx "$C/fuzz_tiled/harbour_tmx"
cp config/scenes/harbour.tsx "$C/fuzz_tiled/harbour_tsx"
for m in external chained escape; do cp "tests/data/tiled/$m.tmx" "$C/fuzz_tiled/$m"; done
cp tests/data/tiled/sub/floor.tsj "$C/fuzz_tiled/floor_tsj"
# Tile and object classes (the target's table names Wall, Mud, Floor), in an
# infinite map with chunks at negative tiles.
cp tests/data/tiled/infinite.tmx "$C/fuzz_tiled/infinite_classes_tmx"
# An infinite map with chunks and a collider, and one of each collider kind.
printf '%s' '{"infinite": true, "tilewidth": 10, "tileheight": 10, "tilesets": [{"firstgid": 1, "tilecount": 2}],
 "layers": [{"type": "tilelayer", "chunks": [{"x": -2, "y": -2, "width": 2, "height": 2, "data": [1, 0, 0, 2]},
 {"x": 0, "y": 0, "width": 2, "height": 2, "encoding": "base64", "data": "AgAAAAIAAAAAAAAAAQAAAA=="}]},
 {"type": "objectgroup", "objects": [{"x": 10, "y": -10, "width": 10, "height": 10}]}]}' >"$C/fuzz_tiled/infinite"
printf '%s' '<map orientation="orthogonal" width="4" height="4" tilewidth="10" tileheight="10"><tileset firstgid="1" tilecount="1"/>
<layer name="g"><data encoding="csv">0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1</data></layer><objectgroup name="o">
<object x="0" y="0" width="20" height="10" rotation="30"/><object x="0" y="20" width="20" height="20"><ellipse/></object>
<object x="20" y="20"><polygon points="0,0 20,0 0,20"/></object><object gid="1" x="30" y="10" width="10" height="10"/>
<object x="5" y="5"><point/></object></objectgroup></map>' >"$C/fuzz_tiled/colliders_tmx"

# LDtk: the hand-written project, and a multi-world one.
cp tests/data/scene6_keep.ldtk "$C/fuzz_ldtk/keep"
printf '%s' '{"levels": [], "worlds": [{"levels": [{"identifier": "W", "worldX": 8, "worldY": 16, "layerInstances":
 [{"__identifier": "C", "__type": "IntGrid", "__cWid": 2, "__cHei": 1, "__gridSize": 8, "intGridCsv": [1, 0]}]}]}]}' >"$C/fuzz_ldtk/worlds"

# Layer data: byte 0 the form (0 csv, 1 base64, 2 +zlib, 3 +gzip, 4 +zstd),
# byte 1 the gid count, then the text; here three gids 1, 2, 3.
gids() { printf '\001\000\000\000\002\000\000\000\003\000\000\000'; }
printf '\000\003 1,2,\n3\n' >"$C/fuzz_tdata/csv"
{ printf '\001\003'; gids | base64 -w0; } >"$C/fuzz_tdata/base64"
{ printf '\002\003'; gids | python3 -c 'import sys, zlib; sys.stdout.buffer.write(zlib.compress(sys.stdin.buffer.read()))' | base64 -w0; } >"$C/fuzz_tdata/zlib"
{ printf '\003\003'; gids | gzip -n -c | base64 -w0; } >"$C/fuzz_tdata/gzip"
{ printf '\004\003'; gids | zstd -q -c | base64 -w0; } >"$C/fuzz_tdata/zstd"

# Configs, with scenes, limits, portals and pinned routes.
cp config/default.json "$C/fuzz_conf/default"
for j in conf_full.json net_server.json route_world.json; do
  cp "tests/data/$j" "$C/fuzz_conf/${j%.json}"
done

# Update chains: scene byte (0 uniform, 1 weighted), then per update op,
# cost, kind (even: rectangle of four coordinates; odd: (kind/2) % 32 cells
# of two coordinates), coordinates as signed bytes (127 = INT32_MAX).
u() { printf "$2" >"$C/fuzz_scene_update/$1"; }
u block_corridor_then_open '\000\000\000\000\012\010\014\010\001\000\000\012\010\014\010'
u first_cost_on_uniform '\000\002\011\000\002\002\004\006'
u cost_list_weighted '\001\002\003\005\002\002\003\003\014\012'
u pass_walls_merge_rooms '\000\001\000\000\007\005\026\017'
u rect_to_int32_max '\000\000\000\000\000\000\177\177'
u bad_op_and_zero_cost '\001\003\000\000\001\001\002\002\002\000\000\001\001\002\002'
u empty_list_then_negative '\000\000\000\001\000\000\003\001\377\005'
