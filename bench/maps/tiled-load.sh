#!/usr/bin/env bash
# Load time and peak RSS of a 4096 x 4096 Tiled .tmx with zstd layer data
# (issue 13), beside the same grid as an ASCII map, so the Tiled reader's
# own share shows. Writes the maps into a scratch directory, runs
# `pathd --check-config` on each under /usr/bin/time, prints the figures:
# wall time, and the CPU time, which a busy shared machine inflates less.
#
# Usage: bench/maps/tiled-load.sh [BUILD_DIR]   (default: build)
# Needs python3 and the zstd command.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

# The grid: rooms of 64 x 64 cells with walls and doors, scattered pillars,
# a few cost patches; deterministic. gids: 0 floor, 1 wall, 2 mud (cost 3).
python3 - "$DIR" <<'PY'
import struct, sys
d = sys.argv[1]
N = 4096
rows_gid, rows_txt = [], []
for y in range(N):
    g = bytearray(N * 4)
    t = bytearray(b"." * N)
    for x in range(N):
        wall = (x % 64 == 0 and y % 64 not in (30, 31, 32)) or (y % 64 == 0 and x % 64 not in (30, 31, 32))
        pillar = ((x * 7919 + y * 104729) % 97) == 0
        mud = (x // 64 + y // 64) % 5 == 0 and 10 < x % 64 < 50 and 10 < y % 64 < 50
        v = 1 if wall or pillar else 2 if mud else 0
        struct.pack_into("<I", g, x * 4, v)
        t[x] = ord("#") if v == 1 else ord("3") if v == 2 else ord(".")
    rows_gid.append(bytes(g))
    rows_txt.append(bytes(t))
open(f"{d}/big.gids", "wb").write(b"".join(rows_gid))
open(f"{d}/big.txt", "wb").write(b"\n".join(rows_txt) + b"\n")
PY
zstd -q -19 --long=27 "$DIR/big.gids" -o "$DIR/big.zst" 2>/dev/null || zstd -q -19 "$DIR/big.gids" -o "$DIR/big.zst"
{
  echo '<?xml version="1.0" encoding="UTF-8"?>'
  echo '<map version="1.10" orientation="orthogonal" width="4096" height="4096" tilewidth="16" tileheight="16" infinite="0">'
  echo ' <tileset firstgid="1" name="t" tilewidth="16" tileheight="16" tilecount="2">'
  echo '  <tile id="0"><properties><property name="blocked" type="bool" value="true"/></properties></tile>'
  echo '  <tile id="1"><properties><property name="cost" type="int" value="3"/></properties></tile>'
  echo ' </tileset>'
  echo ' <layer id="1" name="ground" width="4096" height="4096"><data encoding="base64" compression="zstd">'
  base64 -w0 "$DIR/big.zst"
  echo '</data></layer>'
  echo '</map>'
} >"$DIR/big.tmx"
for f in tmx txt; do
  fmt=$([ "$f" = tmx ] && echo tiled || echo ascii)
  printf '{"scenes": [{"name": "big", "map": "big.%s", "format": "%s"}]}\n' "$f" "$fmt" >"$DIR/$f.json"
done
rm -f "$DIR/big.gids"
echo "files: big.tmx $(stat -c %s "$DIR/big.tmx") bytes, big.txt $(stat -c %s "$DIR/big.txt") bytes"
for f in tmx txt; do
  /usr/bin/time -f "$f: %e s wall, %U s user + %S s sys CPU, %M KiB peak RSS" "$BUILD/server/pathd" --check-config --config "$DIR/$f.json" 2>&1 |
    grep -v '^  \|ok,'
done
