#!/usr/bin/env bash
# Rewrites the committed seed corpora under tests/fuzz/corpus/ from their
# sources: request frames from tests/fuzz/seeds/*.txtpb (protoc's text
# format, so a seed stays readable and survives schema changes), maps and
# configs from tests/data and config/, update chains spelled out below.
# Run it after changing the schema or a seed; commit what it writes.
set -euo pipefail
cd "$(dirname "$0")/../.."
C=tests/fuzz/corpus
S=tests/fuzz/seeds

for t in fuzz_codec fuzz_find_path fuzz_mapfile fuzz_tiled fuzz_conf fuzz_scene_update; do
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
