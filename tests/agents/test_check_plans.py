#!/usr/bin/env python3
"""test_check_plans.py - the checker (check_plans.py) on hand-made answers.

Each case writes a few answers that break exactly one rule (a swap, a
diagonal crossing, a follower that starts too early, a corner cut, a move
too fast, a footprint off the map, a hold kept on a blocked cell, a plan
that jumps) and asserts the checker counts exactly that; legal twins of the
same answers must count nothing. So a checker that stopped looking would
fail here before it passed a planner's bad answers. Standard library only.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_plans  # noqa: E402


def grid(rows):
    """A grid record from rows of '.', '#' and cost digits."""
    cells = []
    for row in rows:
        for ch in row:
            cells.append(0 if ch == "#" else 1 if ch == "." else int(ch))
    return {"type": "grid", "width": len(rows[0]), "height": len(rows), "cells": cells}


def plan(agent, wps, unit=1, speed=1.0):
    return {"type": "plan", "agent": agent, "unit": unit, "speed": speed, "t0": wps[0][2],
            "waypoints": [list(w) for w in wps]}


def counts(records):
    c = check_plans.Checker()
    c.run(json.dumps(r) for r in records)
    return c.counts


def only(**kw):
    want = {"illegal": 0, "too_fast": 0, "conflicts": 0, "jumps": 0}
    want.update(kw)
    return want


OPEN = grid(["....", "....", "...."])


class CheckerCounts(unittest.TestCase):
    def test_swap_is_a_conflict(self):
        a = plan(1, [(0, 0, 0, 0), (1, 0, 1000, None)])
        b = plan(2, [(1, 0, 0, 0), (0, 0, 1000, None)])
        self.assertEqual(counts([OPEN, a, b]), only(conflicts=1))

    def test_diagonal_crossing_is_a_conflict(self):
        # No vertex or swap conflict: only the swept boxes meet.
        a = plan(1, [(0, 0, 0, 0), (1, 1, 1415, None)])
        b = plan(2, [(1, 0, 0, 0), (0, 1, 1415, None)])
        self.assertEqual(counts([OPEN, a, b]), only(conflicts=1))

    def test_following(self):
        lead = plan(1, [(1, 0, 0, 0), (2, 0, 1000, None)])
        on_time = plan(2, [(0, 0, 0, 1000), (1, 0, 2000, None)])
        early = plan(2, [(0, 0, 0, 999), (1, 0, 1999, None)])
        self.assertEqual(counts([OPEN, lead, on_time]), only())
        # Leaving at 999 enters (1,0) while the leader still holds it.
        self.assertEqual(counts([OPEN, lead, early]), only(conflicts=1))

    def test_waiting_agents_conflict_once_per_pair(self):
        a = plan(1, [(0, 0, 0, None)], unit=2)
        b = plan(2, [(1, 1, 0, None)], unit=2)
        # Two 2x2 footprints sharing one cell: one pair, not one per cell.
        self.assertEqual(counts([OPEN, a, b]), only(conflicts=1))

    def test_corner_cutting_is_illegal(self):
        g = grid([".#..", "....", "...."])
        cut = plan(1, [(0, 0, 0, 0), (1, 1, 1415, None)])
        around = plan(1, [(0, 0, 0, 0), (0, 1, 1000, 1000), (1, 1, 2000, None)])
        self.assertEqual(counts([g, cut]), only(illegal=1))
        self.assertEqual(counts([g, around]), only())

    def test_too_fast(self):
        straight = plan(1, [(0, 0, 0, 0), (1, 0, 999, None)])
        diagonal = plan(1, [(0, 0, 0, 0), (1, 1, 1414, None)])
        exact = plan(1, [(0, 0, 0, 0), (1, 1, 1415, None)])
        self.assertEqual(counts([OPEN, straight]), only(too_fast=1))
        self.assertEqual(counts([OPEN, diagonal]), only(too_fast=1))
        self.assertEqual(counts([OPEN, exact]), only())

    def test_terrain_and_unit_costs(self):
        # Entering a 2x2 footprint whose dearest cell costs 3, at 2 cells/s:
        # 3 * 1000 / 2 = 1500 ms.
        g = grid(["....", "...3", "...."])
        slow = plan(1, [(1, 0, 0, 0), (2, 0, 1500, None)], unit=2, speed=2.0)
        fast = plan(1, [(1, 0, 0, 0), (2, 0, 1499, None)], unit=2, speed=2.0)
        self.assertEqual(counts([g, slow]), only())
        self.assertEqual(counts([g, fast]), only(too_fast=1))

    def test_footprint_off_the_map_and_on_walls(self):
        off = plan(1, [(3, 0, 0, None)], unit=2)
        wall = plan(1, [(1, 0, 0, None)], unit=1)
        g = grid([".#..", "....", "...."])
        self.assertEqual(counts([OPEN, off]), only(illegal=1))
        self.assertEqual(counts([g, wall]), only(illegal=1))

    def test_not_a_neighbour_and_times(self):
        leap = plan(1, [(0, 0, 0, 0), (2, 0, 2000, None)])
        back = plan(1, [(0, 0, 0, 500), (1, 0, 400, None)])
        late_start = {"type": "plan", "agent": 1, "unit": 1, "speed": 1.0, "t0": 0,
                      "waypoints": [[0, 0, 5, None]]}
        self.assertEqual(counts([OPEN, leap]), only(illegal=1))
        self.assertEqual(counts([OPEN, back]), only(illegal=1))
        self.assertEqual(counts([OPEN, late_start]), only(illegal=1))

    def test_blocked_cells(self):
        through = plan(1, [(0, 0, 0, 0), (1, 0, 1000, 1000), (2, 0, 2000, 2000), (3, 0, 3000, None)])
        block = {"type": "block", "x0": 2, "y0": 0, "x1": 2, "y1": 0, "t": 1500}
        cut = {"type": "cut", "agent": 1, "t": 1000}
        # The plan still holds (2,0) after it was blocked, moving in and
        # moving out: two occupancies...
        self.assertEqual(counts([OPEN, through, block]), only(illegal=2))
        # ...unless it was cut before the move that enters it.
        self.assertEqual(counts([OPEN, through, block, cut]), only())

    def test_replacement_and_jumps(self):
        first = plan(1, [(0, 0, 0, 0), (1, 0, 1000, 1000), (2, 0, 2000, None)])
        # Replanned at 1000 from where it is then: the old rest goes.
        again = plan(1, [(1, 0, 1000, 1000), (1, 1, 2000, None)])
        other = plan(2, [(2, 0, 1000, None)])
        self.assertEqual(counts([OPEN, first, again, other]), only())
        # Without the replacement the old plan's move into (2,0) and its
        # park there both collide.
        self.assertEqual(counts([OPEN, first, other]), only(conflicts=2))
        jump = plan(1, [(3, 2, 500, None)])
        self.assertEqual(counts([OPEN, first, jump]), only(jumps=1))

    def test_release(self):
        a = plan(1, [(0, 0, 0, None)])
        b = plan(2, [(0, 0, 5000, None)])
        rel = {"type": "release", "agent": 1, "t": 5000}
        self.assertEqual(counts([OPEN, a, b]), only(conflicts=1))
        self.assertEqual(counts([OPEN, a, rel, b]), only())


if __name__ == "__main__":
    unittest.main()
