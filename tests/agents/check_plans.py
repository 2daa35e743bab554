#!/usr/bin/env python3
"""check_plans.py - replays reservation answers (issue 34) and counts what is wrong.

The checker shares no code with the planner (server/core/pd_sipp.c,
pd_reserve.c): it reads the grid and the answers from JSON lines and applies
the movement and occupancy rules as the issue states them, so a bug in the
planner's reading of those rules does not hide here too.

Input, one JSON object per line, in the order things happened:
  {"type": "grid", "width": W, "height": H, "cells": [row-major bytes]}
      0 = blocked, 1..255 = the cost of entering the cell. First, once.
  {"type": "plan", "agent": A, "unit": K, "speed": V, "t0": T,
   "waypoints": [[x, y, t_arrive, t_leave], ...]}
      an answer with a plan (OK or PARTIAL). Anchors are top-left cells of
      K x K footprints; t_leave null means forever. It replaces the agent's
      occupancy from T on.
  {"type": "block", "x0":, "y0":, "x1":, "y1":, "t": T}
      those cells (inclusive) are blocked from T on.
  {"type": "cut", "agent": A, "t": T}, {"type": "release", "agent": A, "t": T}
      the agent holds nothing from T on (the table's cut, or a release).

Counts:
  illegal    steps that break the grid: a footprint or a move's box outside
             the map or on a blocked cell (so no corner cutting), a step that
             is not to one of the 8 neighbours, times out of order, a first
             waypoint that does not arrive at t0, and any occupancy left on
             a cell after it was blocked.
  too_fast   moves shorter than ceil(cost * 1000 / speed) ms (at least 1),
             cost = the largest cell cost under the destination footprint,
             times sqrt(2) for a diagonal.
  conflicts  pairs of occupancies of two agents that share a cell at
             overlapping times, [t0, t1) half-open: a wait holds its
             footprint over [t_arrive, t_leave), a move the bounding box of
             both footprints over [t_leave, next t_arrive).
  jumps      plans that start elsewhere than where the agent's earlier
             occupancy has it at t0 (it was moving then, or waiting on
             another anchor).
Prints the counts and the first few cases of each; exits 1 when any count
is not zero (or, with --expect, when the counts differ from those given).
"""

import argparse
import json
import math
import sys

FOREVER = float("inf")
SHOW = 5


class Occupancy:
    """One box held over [t0, t1): a wait or a move of one agent."""

    __slots__ = ("agent", "x0", "y0", "x1", "y1", "t0", "t1", "what", "at", "origin", "cut")

    def __init__(self, agent, x0, y0, x1, y1, t0, t1, what, at, origin):
        self.agent, self.x0, self.y0, self.x1, self.y1 = agent, x0, y0, x1, y1
        # at: the anchor waited on, or a move's destination; origin: where
        # a move leaves from.
        self.t0, self.t1, self.what, self.at, self.origin = t0, t1, what, at, origin
        self.cut = False  # a move whose end was taken away: it never arrived


class Checker:
    def __init__(self):
        self.width = self.height = 0
        self.cells = []
        self.blocks = []          # (x0, y0, x1, y1, t)
        self.held = {}            # agent -> [Occupancy], in time order
        self.counts = {"illegal": 0, "too_fast": 0, "conflicts": 0, "jumps": 0}
        self.cases = {k: [] for k in self.counts}
        self.plans = 0

    def note(self, kind, text):
        self.counts[kind] += 1
        if len(self.cases[kind]) < SHOW:
            self.cases[kind].append(text)

    def cost(self, x, y):
        if 0 <= x < self.width and 0 <= y < self.height:
            return self.cells[y * self.width + x]
        return 0

    def box_open(self, x0, y0, x1, y1):
        """Whether every cell of the box lies on the map and is passable."""
        return all(self.cost(x, y) > 0 for y in range(y0, y1 + 1) for x in range(x0, x1 + 1))

    def truncate(self, agent, t):
        kept = []
        for o in self.held.get(agent, []):
            if o.t0 >= t:
                continue
            if o.t1 > t:
                o.t1 = t
                o.cut = o.what == "move"
            kept.append(o)
        self.held[agent] = kept

    def plan(self, rec):
        self.plans += 1
        agent, k, speed, t0 = rec["agent"], rec["unit"], rec["speed"], rec["t0"]
        wps = [(w[0], w[1], w[2], FOREVER if w[3] is None else w[3]) for w in rec["waypoints"]]
        label = "agent %s plan at t0=%s" % (agent, t0)
        if not wps or k < 1 or not speed > 0:
            self.note("illegal", "%s: empty plan, unit %s or speed %s" % (label, k, speed))
            return
        if wps[0][2] != t0:
            self.note("illegal", "%s: first waypoint arrives at %s" % (label, wps[0][2]))
        # Where the earlier plans have the agent at t0.
        prior = self.position(agent, t0)
        if prior is not None and prior != (wps[0][0], wps[0][1]):
            self.note("jumps", "%s: starts at %s but is at %s" % (label, wps[0][:2], prior))
        self.truncate(agent, t0)
        held = self.held.setdefault(agent, [])
        for i, (x, y, ta, tl) in enumerate(wps):
            if ta > tl:
                self.note("illegal", "%s: waypoint %d leaves at %s before arriving at %s" % (label, i, tl, ta))
            if not self.box_open(x, y, x + k - 1, y + k - 1):
                self.note("illegal", "%s: waypoint %d (%d,%d) footprint off the map or on a wall" % (label, i, x, y))
            if tl > ta:
                held.append(Occupancy(agent, x, y, x + k - 1, y + k - 1, ta, tl, "wait", (x, y), (x, y)))
            if i + 1 == len(wps):
                break
            nx, ny, nta, _ = wps[i + 1]
            dx, dy = nx - x, ny - y
            if max(abs(dx), abs(dy)) != 1:
                self.note("illegal", "%s: step %d (%d,%d)->(%d,%d) is not to a neighbour" % (label, i, x, y, nx, ny))
                continue
            if not nta > tl:
                self.note("illegal", "%s: step %d arrives at %s, not after leaving at %s" % (label, i, nta, tl))
                continue
            bx0, by0 = min(x, nx), min(y, ny)
            bx1, by1 = max(x, nx) + k - 1, max(y, ny) + k - 1
            if not self.box_open(bx0, by0, bx1, by1):
                self.note("illegal", "%s: step %d (%d,%d)->(%d,%d) sweeps a wall or leaves the map"
                          % (label, i, x, y, nx, ny))
            c = max(self.cost(cx, cy) for cy in range(ny, ny + k) for cx in range(nx, nx + k))
            step = c * math.sqrt(2) if dx and dy else float(c)
            need = max(1, math.ceil(step * 1000.0 / speed - 1e-9))
            if nta - tl < need:
                self.note("too_fast", "%s: step %d (%d,%d)->(%d,%d) takes %s ms, needs %s"
                          % (label, i, x, y, nx, ny, nta - tl, need))
            held.append(Occupancy(agent, bx0, by0, bx1, by1, tl, nta, "move", (nx, ny), (x, y)))

    def position(self, agent, t):
        """Anchor the agent's occupancy has it on at t; "moving"; or None."""
        for o in self.held.get(agent, []):
            if o.what == "wait" and o.t0 <= t < o.t1:
                return o.at
            if o.what == "move" and o.t0 < t < o.t1:
                return "moving"
            if o.what == "move" and o.t1 == t:
                return "moving" if o.cut else o.at
            if o.what == "move" and o.t0 == t:
                return o.origin  # leaving at t: still on the anchor it leaves
        return None

    def finish(self):
        boxes = [o for occ in self.held.values() for o in occ if o.t1 > o.t0]
        for o in boxes:
            for (x0, y0, x1, y1, t) in self.blocks:
                if o.x0 <= x1 and o.x1 >= x0 and o.y0 <= y1 and o.y1 >= y0 and o.t1 > t:
                    self.note("illegal", "agent %s holds (%d,%d)-(%d,%d) over [%s,%s) after it was blocked at %s"
                              % (o.agent, o.x0, o.y0, o.x1, o.y1, o.t0, o.t1, t))
        by_cell = {}
        for i, o in enumerate(boxes):
            for y in range(o.y0, o.y1 + 1):
                for x in range(o.x0, o.x1 + 1):
                    by_cell.setdefault((x, y), []).append(i)
        pairs = set()
        for (x, y), ids in by_cell.items():
            ids.sort(key=lambda i: boxes[i].t0)
            active = []
            for i in ids:
                o = boxes[i]
                active = [j for j in active if boxes[j].t1 > o.t0]
                for j in active:
                    if boxes[j].agent != o.agent:
                        pair = (min(i, j), max(i, j))
                        if pair not in pairs:
                            pairs.add(pair)
                            a, b = boxes[pair[0]], boxes[pair[1]]
                            self.note("conflicts", "cell (%d,%d): agent %s %s [%s,%s) and agent %s %s [%s,%s)"
                                      % (x, y, a.agent, a.what, a.t0, a.t1, b.agent, b.what, b.t0, b.t1))
                active.append(i)
        return boxes

    def run(self, lines):
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            kind = rec.get("type")
            if kind == "grid":
                self.width, self.height, self.cells = rec["width"], rec["height"], rec["cells"]
                if len(self.cells) != self.width * self.height:
                    raise ValueError("line %d: grid has %d cells, not %d x %d"
                                     % (n, len(self.cells), self.width, self.height))
            elif kind == "plan":
                self.plan(rec)
            elif kind == "block":
                self.blocks.append((rec["x0"], rec["y0"], rec["x1"], rec["y1"], rec["t"]))
            elif kind in ("cut", "release"):
                self.truncate(rec["agent"], rec["t"])
            else:
                raise ValueError("line %d: unknown record type %r" % (n, kind))
        return self.finish()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="JSON-lines answer files, each checked on its own")
    ap.add_argument("--expect", help="counts that must come out, e.g. illegal=1,conflicts=2 (others 0)")
    args = ap.parse_args()
    want = None
    if args.expect:
        want = {k: 0 for k in ("illegal", "too_fast", "conflicts", "jumps")}
        for item in args.expect.split(","):
            k, v = item.split("=")
            want[k] = int(v)
    bad = False
    for path in args.files:
        c = Checker()
        with open(path, encoding="utf-8") as f:
            boxes = c.run(f)
        print("%s: plans %d boxes %d illegal %d too_fast %d conflicts %d jumps %d"
              % (path, c.plans, len(boxes), c.counts["illegal"], c.counts["too_fast"],
                 c.counts["conflicts"], c.counts["jumps"]))
        for kind, cases in c.cases.items():
            for text in cases:
                print("  %s: %s" % (kind, text))
        if want is not None:
            if c.counts != want:
                print("  expected %s" % want)
                bad = True
        elif any(c.counts.values()):
            bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
