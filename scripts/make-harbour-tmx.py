#!/usr/bin/env python3
"""Writes the demo world's Tiled scene, config/scenes/harbour.tmx.

The harbour shows what a map saved by Tiled with its default settings looks
like to pathd: XML, base64 layer data compressed (the ground with zlib, the
buildings with gzip), an external tileset (harbour.tsx, written by hand) and
an object layer of colliders. Compressed data cannot be typed by hand, so the
layers are drawn below as text and encoded here; the output is deterministic
(gzip's timestamp is fixed at 0) and committed, so `make run` never needs
this script. tests/data/scene5_harbour.txt is the grid the map must give,
drawn by hand, and test_tiled_formats compares the two cell by cell.

Usage: scripts/make-harbour-tmx.py [--output FILE] [--check]
  --check  regenerate in memory and fail if FILE differs
"""
import argparse
import base64
import gzip
import os
import struct
import sys
import zlib

# Tile ids of harbour.tsx (gid = id + 1): grass, sand (cost 2), water
# (blocked), pier planks, wall (a collision box over the whole tile).
GID = {".": 1, ",": 2, "~": 3, "=": 4, "#": 5, " ": 0}

GROUND = [
    "....................",
    "....................",
    "....................",
    "....................",
    "....................",
    "....................",
    "....................",
    ",,,,,,,,,,,,,,,,,,,,",
    ",,,,,,,,,,,,,,,,,,,,",
    "~~~~~~~~~==~~~~~~~~~",
    "~~~~~~~~~==~~~~~~~~~",
    "~~~~~~~~~==~~~~~~~~~",
]

BUILDINGS = [
    "                    ",
    " ######      ###### ",
    " #    #      #    # ",
    " #    #      #    # ",
    " ## ###      ### ## ",
    "                    ",
    "                    ",
    "                    ",
    "                    ",
    "                    ",
    "                    ",
    "                    ",
]

# Tiles are 16 px. A crate stack (rectangle), the well (ellipse), a rock
# (triangle) and a mud patch that costs 3.
OBJECTS = """\
  <object id="1" name="crates" x="128" y="112" width="32" height="16"/>
  <object id="2" name="well" x="144" y="32" width="48" height="48">
   <ellipse/>
  </object>
  <object id="3" name="rock" x="16" y="96">
   <polygon points="0,0 40,0 0,40"/>
  </object>
  <object id="4" name="mud" x="256" y="96" width="48" height="16">
   <properties>
    <property name="cost" type="int" value="3"/>
   </properties>
  </object>
"""


def layer_bytes(rows):
    return b"".join(struct.pack("<I", GID[c]) for row in rows for c in row)


def render():
    ground = base64.b64encode(zlib.compress(layer_bytes(GROUND), 9)).decode()
    buildings = base64.b64encode(gzip.compress(layer_bytes(BUILDINGS), 9, mtime=0)).decode()
    w, h = len(GROUND[0]), len(GROUND)
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Demo scene "harbour" (config/README.md); written by scripts/make-harbour-tmx.py. -->
<map version="1.10" tiledversion="1.10.2" orientation="orthogonal" renderorder="right-down" width="{w}" height="{h}" tilewidth="16" tileheight="16" infinite="0" nextlayerid="4" nextobjectid="5">
 <tileset firstgid="1" source="harbour.tsx"/>
 <layer id="1" name="ground" width="{w}" height="{h}">
  <data encoding="base64" compression="zlib">
   {ground}
  </data>
 </layer>
 <layer id="2" name="buildings" width="{w}" height="{h}">
  <data encoding="base64" compression="gzip">
   {buildings}
  </data>
 </layer>
 <objectgroup id="3" name="colliders">
{OBJECTS} </objectgroup>
</map>
"""


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", default=os.path.join(here, "..", "config", "scenes", "harbour.tmx"))
    ap.add_argument("--check", action="store_true", help="fail if the file differs")
    args = ap.parse_args()
    text = render()
    if args.check:
        with open(args.output, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"{args.output} differs from what {sys.argv[0]} writes")
        return
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
