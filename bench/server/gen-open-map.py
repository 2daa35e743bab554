#!/usr/bin/env python3
"""gen-open-map.py DIR - writes DIR/open.map (an open 64x64 Moving AI map)
and DIR/open.map.scen (1,000 pairs of neighbour cells): the trivial
FindPath of bench-server.sh and profile-server.sh, a search of one step."""
import sys

d = sys.argv[1]
with open(f"{d}/open.map", "w") as f:
    f.write("type octile\nheight 64\nwidth 64\nmap\n" + ("." * 64 + "\n") * 64)
with open(f"{d}/open.map.scen", "w") as f:
    f.write("version 1\n")
    for i in range(1000):
        x, y = i % 62, (i // 62) % 64
        f.write(f"0\topen.map\t64\t64\t{x}\t{y}\t{x + 1}\t{y}\t1\n")
