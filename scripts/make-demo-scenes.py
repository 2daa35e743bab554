#!/usr/bin/env python3
"""Generates the demo world's big scene, config/scenes/forest.txt.

The forest is the one demo map too large to draw by hand (512x512 cells), so
it is generated here, deterministically: the same script always writes the
same bytes, on any Python 3 version, because it uses its own small PRNG
instead of the `random` module. The output is committed, so `make run` never
needs this script; rerun it only after changing it, and commit both.

Usage: scripts/make-demo-scenes.py [--output FILE] [--check]
  --check  regenerate in memory and fail if FILE differs (for CI or review)

Layout: open ground ('.') with scattered trees and dense tree clusters ('#'),
round clearings joined by cart tracks, and a meandering river ('#') that can
only be crossed on a handful of bridges. Costs stay uniform (1) so the forest
also exercises the searches that need uniform grids.
"""
import argparse
import os
import sys
from collections import deque

WIDTH = 512
HEIGHT = 512
SEED = 0x7A11D5EED
TREE_CLUSTERS = 1100        # dense thickets
SCATTERED_TREE_PERMILLE = 45
CLEARINGS = 16
RIVER_WIDTH = 7
RIVER_MIN_X = 220           # keeps the river in the eastern half with room on both banks
RIVER_MAX_X = 440
BRIDGE_ROWS = (40, 150, 262, 371, 470)
BRIDGE_WIDTH = 3            # rows per bridge


class Rng:
    """xorshift64*: tiny, fast and identical everywhere."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF or 1

    def next(self):
        x = self.state
        x ^= (x >> 12)
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27)
        self.state = x
        return (x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def below(self, n):
        return (self.next() >> 11) % n


def disc(grid, cx, cy, r, ch, rng=None, keep_permille=1000):
    for y in range(max(0, cy - r), min(HEIGHT, cy + r + 1)):
        for x in range(max(0, cx - r), min(WIDTH, cx + r + 1)):
            if (x - cx) ** 2 + (y - cy) ** 2 <= r * r:
                if rng is None or rng.below(1000) < keep_permille:
                    grid[y][x] = ch


def track(grid, a, b):
    """A 2-cell-wide straight cart track from clearing a to clearing b."""
    (x0, y0), (x1, y1) = a, b
    steps = max(abs(x1 - x0), abs(y1 - y0))
    for i in range(steps + 1):
        x = x0 + (x1 - x0) * i // steps
        y = y0 + (y1 - y0) * i // steps
        for dy in (0, 1):
            for dx in (0, 1):
                if 0 <= x + dx < WIDTH and 0 <= y + dy < HEIGHT:
                    grid[y + dy][x + dx] = '.'


def river_course(rng):
    """Column of the river's centre on every row: a random walk with momentum,
    in integers only so every platform draws the same river."""
    xs, x, drift = [], 310, 0
    for _ in range(HEIGHT):
        if rng.below(8) == 0:
            drift = rng.below(3) - 1
        x = min(RIVER_MAX_X, max(RIVER_MIN_X, x + drift))
        xs.append(x)
    return xs


def generate():
    rng = Rng(SEED)
    grid = [['.'] * WIDTH for _ in range(HEIGHT)]

    for y in range(HEIGHT):
        for x in range(WIDTH):
            if rng.below(1000) < SCATTERED_TREE_PERMILLE:
                grid[y][x] = '#'
    for _ in range(TREE_CLUSTERS):
        disc(grid, rng.below(WIDTH), rng.below(HEIGHT), 2 + rng.below(6), '#', rng, 780)

    clearings = []
    for _ in range(CLEARINGS):
        c = (20 + rng.below(WIDTH - 40), 20 + rng.below(HEIGHT - 40), 10 + rng.below(18))
        clearings.append(c)
        disc(grid, c[0], c[1], c[2], '.')
    # Tracks join the clearings in a ring, so every clearing has two ways out.
    for i, c in enumerate(clearings):
        n = clearings[(i + 1) % len(clearings)]
        track(grid, (c[0], c[1]), (n[0], n[1]))

    river_x = river_course(rng)
    for y in range(HEIGHT):
        cx = river_x[y]
        for x in range(cx - RIVER_WIDTH // 2, cx + RIVER_WIDTH // 2 + 1):
            grid[y][x] = '#'
    for row in BRIDGE_ROWS:
        for y in range(row, row + BRIDGE_WIDTH):
            cx = river_x[y]
            # The bridge plus a cleared landing on each bank.
            for x in range(cx - RIVER_WIDTH // 2 - 4, cx + RIVER_WIDTH // 2 + 5):
                grid[y][x] = '.'
    return grid


def largest_component_share(grid):
    """Share of free cells in the largest 4-connected component. Without
    corner cutting, 8-connected reachability equals 4-connected reachability."""
    seen = [[False] * WIDTH for _ in range(HEIGHT)]
    free = best = 0
    for sy in range(HEIGHT):
        for sx in range(WIDTH):
            if grid[sy][sx] != '.' or seen[sy][sx]:
                continue
            size = 0
            queue = deque([(sx, sy)])
            seen[sy][sx] = True
            while queue:
                x, y = queue.popleft()
                size += 1
                for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                    if 0 <= nx < WIDTH and 0 <= ny < HEIGHT and not seen[ny][nx] \
                            and grid[ny][nx] == '.':
                        seen[ny][nx] = True
                        queue.append((nx, ny))
            free += size
            best = max(best, size)
    return best / free if free else 0.0


def render(grid):
    header = [
        "; forest - the demo world's big scene (%dx%d cells)." % (WIDTH, HEIGHT),
        "; Generated by scripts/make-demo-scenes.py; edit the script, not this file.",
        "; '.' open ground, '#' trees or river. The river is crossed on bridges",
        "; at rows %s." % ", ".join(str(r) for r in BRIDGE_ROWS),
    ]
    return "\n".join(header + ["".join(row) for row in grid]) + "\n"


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", default=os.path.join(root, "config", "scenes", "forest.txt"))
    ap.add_argument("--check", action="store_true",
                    help="fail if the output file differs from what this script generates")
    args = ap.parse_args()

    grid = generate()
    text = render(grid)
    if args.check:
        with open(args.output, encoding="ascii") as f:
            if f.read() != text:
                print("%s is out of date; rerun %s" % (args.output, sys.argv[0]), file=sys.stderr)
                return 1
        print("%s is up to date" % args.output)
        return 0
    with open(args.output, "w", encoding="ascii", newline="\n") as f:
        f.write(text)
    print("wrote %s: %dx%d, %d bytes, largest connected area %.1f%% of free cells"
          % (args.output, WIDTH, HEIGHT, len(text), 100.0 * largest_component_share(grid)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
