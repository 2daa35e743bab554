#!/usr/bin/env python3
"""test_reserve_wire.py - space-time reservations over the wire (issue 34).

Starts its own pathd (PATHD_BIN) on a small map of two rooms joined by a
one-cell door, talks to it with the Python client (PYTHONPATH has
pathd_client and the generated pathd_pb2), and hands every ReservePath
answer that came over the wire to the independent checker
tests/agents/check_plans.py, which shares no code with the planner: each
test that reserves ends by running the checker on what it was answered.

Covered: agents through the door (both ways), START_BLOCKED naming the
agent, PARTIAL with its hold, release, expiry by reservation_ttl_ms,
GetReservations by rectangle and time, UpdateCells cutting reservations
(UpdateResult.agents_cut, the AGENTS_CUT watch event, was_cut), each bad
input with its status, the limits in GetLimits, goal sets and range, and
a randomized run of many agents re-reserving on the game's clock.

Standing agents moved aside (ReservePath.yield_after_ms, pd_yield.h), on a
second map: two agents head on in a one-wide corridor with a side pocket
stay stuck with yield_after_ms 0 and both arrive with it on, the game
applying the displaced plans the answers carry (checked with everything
else, and heard by a watcher as AGENTS_DISPLACED). And, on a pathd of its
own with a short TTL, expiry of an idle scene on the server's timer.
"""

import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import pathd_client
from pathd_client import PathdClient, PathdError, PathdTimeout

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_plans.py")

# Two rooms, the door at (5, 3); a side pocket at (5, 1) off the left room's
# top row is a wall here: the door is the only way across.
DOOR_MAP = [
    "############",
    "#....#.....#",
    "#....#.....#",
    "#..........#",
    "#....#.....#",
    "#....#.....#",
    "############",
]
DOOR = (5, 3)
W, H = len(DOOR_MAP[0]), len(DOOR_MAP)
TTL_MS = 60000
MAX_AGENTS = 30
MAX_WINDOW_MS = 60000
SCENES = ["door", "blocked", "release", "ttl", "partial", "cut", "crowd", "bad", "rand", "grow", "ctl", "conc",
          "cutwatch", "avoid", "avoidfree", "goals"]

# A corridor one cell wide between two rooms, with a side pocket above
# (8, 1). A stands in it at (6, 1) bound for the right room, B at (8, 1)
# bound for the left: each is in the other's way, and neither can reach the
# pocket past the other.
CORRIDOR_MAP = [
    "...#####.###...",
    "...............",
    "...#########...",
]
CORRIDOR_SCENES = ["yield", "yieldoff", "yieldctl"]


def open_cells(unit=1):
    """Anchors where a unit x unit footprint fits."""
    return [(x, y) for y in range(H - unit + 1) for x in range(W - unit + 1)
            if all(DOOR_MAP[y + j][x + i] == "." for i in range(unit) for j in range(unit))]


def listening_address(proc, log_path, timeout=30):
    """The address pathd (proc, logging to log_path) says it listens on;
    None when it exits or does not say so in time."""
    deadline = time.monotonic() + timeout
    while True:
        with open(log_path) as f:
            for line in f:
                if "listening on " in line:
                    return line.split("listening on ", 1)[1].split()[0]
        if proc.poll() is not None or time.monotonic() > deadline:
            return None
        time.sleep(0.05)


class Daemon:
    def __init__(self, ttl_ms=TTL_MS):
        self.dir = tempfile.TemporaryDirectory()
        map_path = os.path.join(self.dir.name, "door.txt")
        with open(map_path, "w") as f:
            f.write("\n".join(DOOR_MAP) + "\n")
        corridor_path = os.path.join(self.dir.name, "corridor.txt")
        with open(corridor_path, "w") as f:
            f.write("\n".join(CORRIDOR_MAP) + "\n")
        config = {
            "listen": "127.0.0.1:0", "metrics_listen": "", "threads": 2, "log_level": "info",
            "limits": {"reservation_ttl_ms": ttl_ms, "max_agents_per_scene": MAX_AGENTS,
                       "max_reservation_window_ms": MAX_WINDOW_MS},
            "scenes": [{"name": n, "map": map_path, "format": "ascii", "unit_sizes": [1, 2]} for n in SCENES] +
                      [{"name": n, "map": corridor_path, "format": "ascii"} for n in CORRIDOR_SCENES],
        }
        path = os.path.join(self.dir.name, "pathd.json")
        with open(path, "w") as f:
            json.dump(config, f)
        self.log_path = os.path.join(self.dir.name, "pathd.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([os.environ["PATHD_BIN"], "--config", path], stderr=self.log)
        self.addr = listening_address(self.proc, self.log_path)
        if self.addr is None:
            self.stop()
            raise RuntimeError("pathd did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        rc = self.proc.wait(timeout=15)
        self.log.close()
        self.dir.cleanup()
        return rc


class Recorder:
    """The answers of one scene as the checker reads them (JSON lines)."""

    def __init__(self, blocked=(), rows=DOOR_MAP):
        w, h = len(rows[0]), len(rows)
        cells = [0 if rows[y][x] == "#" else 1 for y in range(h) for x in range(w)]
        self.lines = [{"type": "grid", "width": w, "height": h, "cells": cells}]
        self.plans = 0

    def plan(self, ans, unit, speed, t0):
        self.plans += 1
        self.lines.append({"type": "plan", "agent": ans["agent"], "unit": unit, "speed": speed, "t0": t0,
                           "waypoints": [[w["x"], w["y"], w["t_arrive_ms"], w["t_leave_ms"]]
                                         for w in ans["waypoints"]]})
        # Agents the answer moved aside: each new plan replaces that
        # agent's from its own t0_ms on (they move at their own speed,
        # which the caller's game knows: here every agent shares one).
        for d in ans.get("displaced", ()):
            self.plan(d, unit, speed, d["t0_ms"])

    def add(self, rec):
        self.lines.append(rec)

    def check(self, case, expect=None):
        """Runs the checker on what was recorded; fails the case on any count."""
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            for rec in self.lines:
                f.write(json.dumps(rec) + "\n")
            path = f.name
        try:
            cmd = [sys.executable, CHECKER, path] + (["--expect", expect] if expect else [])
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        finally:
            os.unlink(path)
        case.assertEqual(out.returncode, 0, "checker:\n" + out.stdout + out.stderr)
        case.assertIn("plans %d " % self.plans, out.stdout)
        return out.stdout


class ReserveWireTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.assertEqual(unittest.TestCase(), cls.daemon.stop(), 0)

    def setUp(self):
        self.c = PathdClient(self.daemon.addr, timeout=20)

    def tearDown(self):
        self.c.close()

    def reserve(self, rec, scene, agent, start, goal, t0, speed=2.0, unit=1, **kw):
        ans = self.c.reserve_path(scene, agent, start, goal, t0, speed, unit_size=unit, **kw)
        rec.plan(ans, unit, speed, t0)
        return ans

    def status_of(self, fn, *args, **kw):
        with self.assertRaises(PathdError) as cm:
            fn(*args, **kw)
        return cm.exception

    # ---- the door ------------------------------------------------------------

    def test_agents_through_the_door(self):
        rec = Recorder()
        # Starts two cells apart at least: an agent planned earlier moves
        # from its start at t0 and holds the cells its first move spans
        # (a diagonal's bounding box), which must not be a start of an agent
        # planned later - that agent would be START_BLOCKED, rightly.
        left = [(1, 1), (1, 3), (1, 5), (3, 1), (3, 5)]
        right = [(10, 1), (10, 3), (10, 5), (8, 1), (8, 5)]
        answers = []
        for i in range(5):   # left to right, and right to left, all at once
            answers.append(self.reserve(rec, "door", 1 + i, left[i], right[i], 0, window_ms=MAX_WINDOW_MS))
            answers.append(self.reserve(rec, "door", 11 + i, right[(i + 2) % 5], left[(i + 2) % 5], 0, window_ms=MAX_WINDOW_MS))
        for a in answers:
            self.assertEqual(a["status"], "OK", a)
            self.assertIsNone(a["reserved_until_ms"])   # PARK: the goal is held with no end
            self.assertEqual(a["waypoints"][0]["t_arrive_ms"], 0)
        # Every agent went through the door, one at a time.
        through = [a for a in answers if any((w["x"], w["y"]) == DOOR for w in a["waypoints"])]
        self.assertEqual(len(through), 10)
        got = self.c.reservations("door", rect=(DOOR, DOOR))
        self.assertEqual({e["agent"] for e in got["entries"]}, {a["agent"] for a in answers})
        self.assertEqual(got["agents"], 10)
        spans = sorted((e["t0_ms"], e["t1_ms"]) for e in got["entries"])
        owners = {}
        for e in got["entries"]:
            owners.setdefault(e["agent"], []).append((e["t0_ms"], e["t1_ms"]))
        firsts = sorted((min(s for s, _ in v), max(t for _, t in v)) for v in owners.values())
        for (s0, e0), (s1, _) in zip(firsts, firsts[1:]):
            self.assertLessEqual(e0, s1, "two agents in the door at once: %r" % spans)
        rec.check(self)

    def test_start_blocked_names_the_agent(self):
        rec = Recorder()
        a = self.reserve(rec, "blocked", 21, (3, 1), (3, 1), 1000)   # parks where it stands
        self.assertEqual(a["status"], "OK")
        e = self.status_of(self.c.reserve_path, "blocked", 22, (3, 1), (8, 1), 1500, 2.0)
        self.assertEqual(e.status, "START_BLOCKED")
        self.assertEqual(e.result["blocking_agent"], 21)
        self.assertIn("agent 21", e.message)
        # Nothing was reserved for agent 22.
        self.assertEqual([x for x in self.c.reservations("blocked")["entries"] if x["agent"] == 22], [])
        rec.check(self)

    def test_partial_holds_until_reserved_again(self):
        rec = Recorder()
        a = self.reserve(rec, "partial", 1, (1, 1), (10, 5), 0, speed=1.0, window_ms=2000)
        self.assertEqual(a["status"], "PARTIAL")
        self.assertIsNone(a["reserved_until_ms"])
        last = a["waypoints"][-1]
        self.assertIsNone(last["t_leave_ms"])
        self.assertNotEqual((last["x"], last["y"]), (10, 5))
        # Going on from where it holds: the rest of the way.
        b = self.reserve(rec, "partial", 1, (last["x"], last["y"]), (10, 5), last["t_arrive_ms"], speed=1.0,
                         window_ms=MAX_WINDOW_MS)
        self.assertEqual(b["status"], "OK")
        self.assertEqual((b["waypoints"][-1]["x"], b["waypoints"][-1]["y"]), (10, 5))
        rec.check(self)

    def test_release(self):
        rec = Recorder()
        self.reserve(rec, "release", 31, (4, 5), (4, 5), 0)
        self.assertTrue(any(e["agent"] == 31 for e in self.c.reservations("release")["entries"]))
        self.assertTrue(self.c.release_agent("release", 31))
        self.assertFalse(any(e["agent"] == 31 for e in self.c.reservations("release")["entries"]))
        self.assertFalse(self.c.release_agent("release", 31))
        rec.add({"type": "release", "agent": 31, "t": 0})
        rec.check(self)
        # Every agent at once (ReleaseAgent all): how many went.
        self.c.reserve_path("release", 32, (4, 5), (4, 5), 0, 2.0)
        self.c.reserve_path("release", 33, (1, 1), (1, 1), 0, 2.0)
        self.assertEqual(self.c.release_all("release"), 2)
        self.assertEqual(self.c.reservations("release")["agents"], 0)
        self.assertEqual(self.c.release_all("release"), 0)

    def test_expiry_by_ttl(self):
        rec = Recorder()
        self.reserve(rec, "ttl", 1, (1, 1), (1, 1), 0)
        self.reserve(rec, "ttl", 2, (10, 5), (10, 5), 0)
        self.assertEqual(self.c.reservations("ttl")["agents"], 2)
        # Agent 2 renews at TTL / 2: nobody is stale yet.
        self.reserve(rec, "ttl", 2, (10, 5), (10, 5), TTL_MS // 2)
        self.assertEqual(self.c.reservations("ttl")["agents"], 2)
        # Agent 2 renews long after: agent 1 stopped renewing and goes.
        self.reserve(rec, "ttl", 2, (10, 5), (10, 5), 3 * TTL_MS)
        got = self.c.reservations("ttl")
        self.assertEqual({e["agent"] for e in got["entries"]}, {2})
        self.assertEqual(got["agents"], 1)
        rec.add({"type": "release", "agent": 1, "t": 3 * TTL_MS})
        # Its cell is free for another agent now.
        self.reserve(rec, "ttl", 3, (2, 1), (1, 1), 3 * TTL_MS)
        rec.check(self)

    def test_reservations_by_rect_and_time(self):
        rec = Recorder()
        a = self.reserve(rec, "grow", 7, (1, 1), (4, 1), 10000, speed=1.0)
        self.assertEqual(a["status"], "OK")
        arrive = a["waypoints"][-1]["t_arrive_ms"]
        whole = self.c.reservations("grow")
        self.assertGreater(len(whole["entries"]), 0)
        self.assertEqual(whole["matching"], len(whole["entries"]))
        # Before it set out: nothing.
        self.assertEqual(self.c.reservations("grow", from_ms=0, to_ms=10000)["entries"], [])
        # The goal cell: only its arrival and hold, from the last move on.
        goal = self.c.reservations("grow", rect=((4, 1), (4, 1)))["entries"]
        self.assertTrue(goal and all(e["agent"] == 7 for e in goal))
        self.assertIsNone(goal[-1]["t1_ms"])
        self.assertEqual(goal[-1]["t0_ms"], arrive)
        # A cell it never touches: nothing.
        self.assertEqual(self.c.reservations("grow", rect=((10, 5), (10, 5)))["entries"], [])
        # max_entries cuts the list short, matching says how many there were.
        short = self.c.reservations("grow", max_entries=1)
        self.assertEqual(len(short["entries"]), 1)
        self.assertEqual(short["matching"], whole["matching"])
        rec.check(self)

    # ---- the world changes --------------------------------------------------

    def test_update_cuts_reservations(self):
        rec = Recorder()
        a = self.reserve(rec, "cut", 41, (1, 3), (10, 3), 0, window_ms=MAX_WINDOW_MS)
        b = self.reserve(rec, "cut", 42, (1, 1), (1, 1), 0)
        self.assertEqual(a["status"], "OK")
        self.assertTrue(any((w["x"], w["y"]) == DOOR for w in a["waypoints"]))
        u = self.c.update_cells("cut", rect=(DOOR, DOOR), op="block", at_ms=500)
        self.assertEqual(u["agents_cut"], [41])
        # 41 keeps its plan up to the last waypoint before the door, and
        # holds nothing after: no hold without an end, none on the door.
        self.assertEqual(self.c.reservations("cut", rect=(DOOR, DOOR))["entries"], [])
        kept = [e for e in self.c.reservations("cut")["entries"] if e["agent"] == 41]
        self.assertTrue(kept and all(e["t1_ms"] is not None for e in kept), kept)
        until = max(e["t1_ms"] for e in kept)
        door_at = min(w["t_arrive_ms"] for w in a["waypoints"] if (w["x"], w["y"]) == DOOR)
        self.assertGreaterEqual(until, 500)
        self.assertLess(until, door_at)
        self.assertEqual(max(e["x"] + e["width"] - 1 for e in kept), DOOR[0] - 1)
        rec.add({"type": "block", "x0": DOOR[0], "y0": DOOR[1], "x1": DOOR[0], "y1": DOOR[1], "t": 500})
        rec.add({"type": "cut", "agent": 41, "t": until})
        # An update that blocks nothing anyone holds cuts nobody.
        self.assertEqual(self.c.update_cells("cut", rect=((10, 1), (10, 1)), op="block")["agents_cut"], [])
        # The door is a wall now: no way over; its next plan says it was cut.
        # It goes on from where its kept plan leaves it.
        stop = [w for w in a["waypoints"] if w["t_arrive_ms"] <= until][-1]
        here = (stop["x"], stop["y"])
        e = self.status_of(self.c.reserve_path, "cut", 41, here, (10, 3), until, 2.0)
        self.assertEqual(e.status, "NO_PATH")
        c = self.reserve(rec, "cut", 41, here, (2, 3), until)
        self.assertTrue(c["was_cut"])
        self.assertFalse(b["was_cut"])
        rec.check(self)

    def test_cut_tells_watchers(self):
        """Two agents through the door; a cell on one's path only is blocked:
        the scene's watcher hears SCENE_UPDATED, then AGENTS_CUT naming that
        agent alone, and the agent goes on from where its kept plan leaves it."""
        rec = Recorder()
        watcher = PathdClient(self.daemon.addr, timeout=20)
        # pathctl watch prints the same events (the C client's).
        pathctl = subprocess.Popen([os.environ["PATHCTL_BIN"], "--server", self.daemon.addr, "--json", "watch",
                                    "cutwatch", "--count", "2"], stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(json.loads(pathctl.stdout.readline())["kind"], "started")
            watcher.watch(["cutwatch"])
            self.assertEqual(watcher.watch_next(timeout=10)["kind"], "started")
            a = self.reserve(rec, "cutwatch", 51, (1, 3), (10, 3), 0, window_ms=MAX_WINDOW_MS)
            b = self.reserve(rec, "cutwatch", 52, (10, 5), (1, 5), 0, window_ms=MAX_WINDOW_MS)
            self.assertEqual((a["status"], b["status"]), ("OK", "OK"))
            for ans in (a, b):
                self.assertTrue(any((w["x"], w["y"]) == DOOR for w in ans["waypoints"]), ans)
            # A cell of 51's path past the door that 52 never holds, reached
            # well after the cut's time.
            at_ms = 100
            cell = None
            for w in a["waypoints"]:
                xy = (w["x"], w["y"])
                if xy[0] > DOOR[0] + 1 and xy != (10, 3) and w["t_arrive_ms"] > at_ms:
                    holders = {e["agent"] for e in self.c.reservations("cutwatch", rect=(xy, xy))["entries"]}
                    if holders == {51}:
                        cell = xy
                        break
            self.assertIsNotNone(cell, a)
            u = self.c.update_cells("cutwatch", rect=(cell, cell), op="block", at_ms=at_ms)
            self.assertEqual(u["agents_cut"], [51])
            updated = watcher.watch_next(timeout=10)
            self.assertEqual((updated["kind"], updated["version"]), ("updated", u["version"]))
            cut = watcher.watch_next(timeout=10)
            self.assertEqual(cut["kind"], "agents_cut")
            self.assertEqual(cut["version"], u["version"])
            self.assertEqual(cut["agents"], [51])
            self.assertEqual(cut["cut_at_ms"], at_ms)
            self.assertFalse(cut["final"])
            # Nothing more: one AGENTS_CUT for one agent.
            with self.assertRaises(PathdTimeout):
                watcher.watch_next(timeout=0.3)
            printed, _ = pathctl.communicate(timeout=20)
            self.assertEqual(pathctl.returncode, 0)
            lines = [json.loads(line) for line in printed.splitlines()]
            self.assertEqual([(e["kind"], e["version"]) for e in lines],
                             [("updated", u["version"]), ("agents_cut", u["version"])])
            self.assertEqual((lines[1]["agents"], lines[1]["cut_at_ms"]), ([51], at_ms))
        finally:
            watcher.close()
            if pathctl.poll() is None:
                pathctl.kill()
                pathctl.wait()
        rec.add({"type": "block", "x0": cell[0], "y0": cell[1], "x1": cell[0], "y1": cell[1], "t": at_ms})
        kept = [e for e in self.c.reservations("cutwatch")["entries"] if e["agent"] == 51]
        until = max(e["t1_ms"] for e in kept)
        rec.add({"type": "cut", "agent": 51, "t": until})
        # Its next plan starts where the kept plan leaves it, at its end,
        # and goes round the new wall to the goal.
        stop = [w for w in a["waypoints"] if w["t_arrive_ms"] <= until][-1]
        c = self.reserve(rec, "cutwatch", 51, (stop["x"], stop["y"]), (10, 3), until, window_ms=MAX_WINDOW_MS)
        self.assertEqual(c["status"], "OK")
        self.assertTrue(c["was_cut"])
        self.assertEqual((c["waypoints"][0]["x"], c["waypoints"][0]["y"], c["waypoints"][0]["t_arrive_ms"]),
                         (stop["x"], stop["y"], until))
        self.assertNotIn(cell, [(w["x"], w["y"]) for w in c["waypoints"]])
        self.assertEqual((c["waypoints"][-1]["x"], c["waypoints"][-1]["y"]), (10, 3))
        rec.check(self)

    # ---- FindPath around the reservations -------------------------------------

    @staticmethod
    def timed_plan(path):
        """A FindPath answer with times as the checker's waypoints: a cell
        given twice is a wait (arrival, then departure); the last cell is
        left at arrival (planned alone: nothing is held there)."""
        ms = [round(t * 1000) for t in path.times]
        wps = []
        for (x, y), t in zip(path.waypoints, ms):
            if wps and (wps[-1][0], wps[-1][1]) == (x, y):
                wps[-1][3] = t
            else:
                if wps:
                    wps[-1][3] = wps[-1][3] if wps[-1][3] is not None else wps[-1][2]
                wps.append([x, y, t, None])
        wps[-1][3] = wps[-1][2]
        return wps

    @staticmethod
    def overlaps(wps, entries):
        """The (cell, time) holds of wps (waits and moves' boxes) that
        overlap one of entries' [t0_ms, t1_ms)."""
        holds = []
        for i, (x, y, ta, tl) in enumerate(wps):
            if tl > ta:
                holds.append((x, y, x, y, ta, tl))
            if i + 1 < len(wps):
                nx, ny, na, _ = wps[i + 1]
                holds.append((min(x, nx), min(y, ny), max(x, nx), max(y, ny), tl, na))
        hits = []
        for (x0, y0, x1, y1, t0, t1) in holds:
            for e in entries:
                end = e["t1_ms"] if e["t1_ms"] is not None else float("inf")
                if (x0 <= e["x"] + e["width"] - 1 and e["x"] <= x1 and y0 <= e["y"] + e["height"] - 1 and
                        e["y"] <= y1 and t0 < end and e["t0_ms"] < t1):
                    hits.append(((x0, y0, x1, y1, t0, t1), e))
        return hits

    def test_find_path_avoid_reserved(self):
        """An agent reserved through the door from the right; FindPath from
        the left: alone it walks into the agent in the door, with
        avoid_reserved it waits or goes round, and reserves nothing."""
        rec = Recorder()
        a = self.reserve(rec, "avoid", 61, (10, 3), (1, 1), 0, window_ms=MAX_WINDOW_MS)
        self.assertEqual(a["status"], "OK")
        self.assertTrue(any((w["x"], w["y"]) == DOOR for w in a["waypoints"]))
        entries = self.c.reservations("avoid")["entries"]
        before = self.c.reservations("avoid")["table_entries"]
        plain = self.c.find_path("avoid", (2, 3), (9, 3), speed=2.0, start_time=0.0)
        self.assertEqual(plain.status, "OK")
        self.assertTrue(self.overlaps(self.timed_plan(plain), entries), "alone, it should meet agent 61")
        around = self.c.find_path("avoid", (2, 3), (9, 3), speed=2.0, start_time=0.0, avoid_reserved=True)
        self.assertEqual(around.status, "OK", around.message)
        self.assertEqual((around.waypoints[0], around.waypoints[-1]), ((2, 3), (9, 3)))
        self.assertIn(DOOR, around.waypoints)
        wps = self.timed_plan(around)
        self.assertEqual(self.overlaps(wps, entries), [])
        # Later than alone: it waited for the door.
        self.assertGreater(around.times[-1], plain.times[-1])
        # pathctl path --avoid-reserved (the C client) answers the same.
        out = subprocess.run([os.environ["PATHCTL_BIN"], "--server", self.daemon.addr, "--json", "path", "--scene",
                              "avoid", "--from", "2,3", "--to", "9,3", "--speed", "2", "--avoid-reserved"],
                             capture_output=True, text=True, timeout=20)
        self.assertEqual(out.returncode, 0, out.stderr)
        c = json.loads(out.stdout)
        self.assertEqual([tuple(w) for w in c["waypoints"]], around.waypoints)
        self.assertEqual(c["times"], around.times)
        # Nothing was reserved.
        after = self.c.reservations("avoid")
        self.assertEqual((after["agents"], after["table_entries"]), (1, before))
        # The checker agrees: legal, not too fast, no conflict with 61.
        rec.plan({"agent": 62, "waypoints": [{"x": x, "y": y, "t_arrive_ms": ta, "t_leave_ms": tl}
                                             for x, y, ta, tl in wps]}, 1, 2.0, 0)
        rec.check(self)
        # Later on, once 61 is parked at its goal, the way is clear: the
        # plan goes straight, as alone.
        late = a["waypoints"][-1]["t_arrive_ms"] / 1000.0 + 1
        plain = self.c.find_path("avoid", (2, 3), (9, 3), speed=2.0, start_time=late)
        clear = self.c.find_path("avoid", (2, 3), (9, 3), speed=2.0, start_time=late, avoid_reserved=True)
        self.assertEqual(clear.waypoints, plain.waypoints)
        self.assertAlmostEqual(clear.cost, plain.cost, places=6)

    def test_find_path_avoid_reserved_refusals(self):
        # No reservations in the scene: the plan is A*'s, over time.
        plain = self.c.find_path("avoidfree", (1, 1), (10, 5), speed=4.0, start_time=2.5)
        free = self.c.find_path("avoidfree", (1, 1), (10, 5), speed=4.0, start_time=2.5, avoid_reserved=True)
        self.assertEqual(free.status, "OK")
        self.assertAlmostEqual(free.cost, plain.cost, places=6)
        self.assertEqual(free.times[0], 2.5)
        self.assertEqual(len(free.waypoints), len(plain.waypoints))
        self.assertEqual(self.c.reservations("avoidfree")["agents"], 0)
        # What it cannot honour is refused, by name.
        for opts, word in (({"speed": 0.0}, "speed"), ({"speed": 2.0, "style": "corners"}, "style"),
                           ({"speed": 2.0, "avoid": [(3, 3)]}, "avoid"), ({"speed": 2.0, "snap": True}, "snap"),
                           ({"speed": 2.0, "start_time": -1.0}, "start_time")):
            e = self.status_of(self.c.find_path, "avoidfree", (1, 1), (10, 5), avoid_reserved=True, **opts)
            self.assertEqual(e.status, "INVALID_ARGUMENT", opts)
            self.assertIn(word, e.message)
        # A wall at the goal, and a start another agent holds.
        self.assertEqual(self.status_of(self.c.find_path, "avoidfree", (1, 1), (0, 0), speed=2.0,
                                        avoid_reserved=True).status, "GOAL_BLOCKED")
        self.c.reserve_path("avoidfree", 71, (3, 3), (3, 3), 0, 2.0)
        e = self.status_of(self.c.find_path, "avoidfree", (3, 3), (10, 5), speed=2.0, start_time=1.0,
                           avoid_reserved=True)
        self.assertEqual(e.status, "START_BLOCKED")
        self.assertIn("agent 71", e.message)
        self.c.release_agent("avoidfree", 71)

    def test_dropped_scene_drops_its_table(self):
        rec = Recorder()
        cells = bytes(0 if ch == "#" else 1 for row in DOOR_MAP for ch in row)
        self.c.create_scene("made", cells=cells, width=W, height=H)
        self.reserve(rec, "made", 1, (1, 1), (1, 1), 0)
        self.assertEqual(self.c.reservations("made")["agents"], 1)
        # An update makes a new version: the reservations stay.
        self.c.update_cells("made", rect=((10, 5), (10, 5)), op="block")
        self.assertEqual(self.c.reservations("made")["agents"], 1)
        self.c.drop_scene("made")
        e = self.status_of(self.c.reservations, "made")
        self.assertEqual(e.status, "UNKNOWN_SCENE")
        # Made again under its name: a new scene, with an empty table.
        self.c.create_scene("made", cells=cells, width=W, height=H)
        self.assertEqual(self.c.reservations("made")["agents"], 0)
        rec.check(self)

    # ---- limits and bad input ----------------------------------------------

    def test_agents_limit(self):
        rec = Recorder()
        cells = open_cells()
        for i in range(MAX_AGENTS):
            self.reserve(rec, "crowd", 100 + i, cells[i], cells[i], 0)
        e = self.status_of(self.c.reserve_path, "crowd", 999, cells[MAX_AGENTS], cells[MAX_AGENTS], 0, 2.0)
        self.assertEqual(e.status, "LIMIT_EXCEEDED")
        self.assertIn("max_agents_per_scene", e.message)
        self.assertEqual(self.c.reservations("crowd")["agents"], MAX_AGENTS)
        rec.check(self)

    def test_goal_sets_and_range(self):
        """FindPath's goal sets and range: the plan ends at the goal it
        reaches first (another agent parked on the nearer one makes it the
        farther), or at the first cell within range; both checked."""
        rec = Recorder()
        near, far = (3, 3), (10, 3)
        a = self.reserve(rec, "goals", 1, (1, 3), None, 0, goals=[far, near], window_ms=20000)
        self.assertEqual(a["status"], "OK")
        last = a["waypoints"][-1]
        self.assertEqual((last["x"], last["y"]), near)
        self.assertEqual(a["reserved_until_ms"], None)
        # Agent 1 parks on `near` for good: agent 2 goes to `far`.
        b = self.reserve(rec, "goals", 2, (2, 1), None, 0, goals=[near, far], window_ms=20000)
        self.assertEqual(b["status"], "OK")
        last = b["waypoints"][-1]
        self.assertEqual((last["x"], last["y"]), far)
        # Within range 2 of (10, 5): it stops at the first cell that is.
        c = self.reserve(rec, "goals", 3, (7, 5), (10, 5), 0, range=2.0, at_goal="vanish", window_ms=20000)
        self.assertEqual(c["status"], "OK")
        last = c["waypoints"][-1]
        self.assertEqual((last["x"], last["y"]), (8, 5))
        for kw, word in (({"goals": [near] * 65}, "goals"), ({"range": 200.0}, "range"),
                         ({"range": -1.0}, "range")):
            with self.subTest(kw=kw):
                e = self.status_of(self.c.reserve_path, "goals", 9, (1, 1), None, 0, 2.0, **kw)
                self.assertEqual(e.status, "INVALID_ARGUMENT", e.message)
                self.assertIn(word, e.message)
        e = self.status_of(self.c.reserve_path, "goals", 9, (1, 1), (2, 1), 0, 2.0, goals=[near])
        self.assertEqual(e.status, "INVALID_ARGUMENT")
        self.assertIn("exclusive", e.message)
        e = self.status_of(self.c.reserve_path, "goals", 9, (1, 1), None, 0, 2.0, goals=[near, (40, 2)])
        self.assertEqual(e.status, "OUT_OF_BOUNDS")
        self.assertIn("goals[1]", e.message)
        rec.check(self)

    def test_bad_input(self):
        r = self.c.reserve_path
        cases = [
            (("nowhere", 1, (1, 1), (2, 1), 0, 2.0), {}, "UNKNOWN_SCENE", "nowhere"),
            (("bad", 0, (1, 1), (2, 1), 0, 2.0), {}, "INVALID_ARGUMENT", "agent"),
            (("bad", 1, (1, 1), (2, 1), 0, 0.0), {}, "INVALID_ARGUMENT", "speed"),
            (("bad", 1, (1, 1), (2, 1), 0, -1.0), {}, "INVALID_ARGUMENT", "speed"),
            (("bad", 1, (1, 1), (2, 1), -5, 2.0), {}, "INVALID_ARGUMENT", "t0_ms"),
            (("bad", 1, (1, 1), (2, 1), 0, 2.0), {"window_ms": MAX_WINDOW_MS + 1}, "LIMIT_EXCEEDED",
             "max_reservation_window_ms"),
            (("bad", 1, (1, 1), (2, 1), 0, 2.0), {"window_ms": 0}, "LIMIT_EXCEEDED", "max_reservation_window_ms"),
            (("bad", 1, (40, 1), (2, 1), 0, 2.0), {}, "OUT_OF_BOUNDS", "outside"),
            (("bad", 1, (1, 1), (2, 100), 0, 2.0), {}, "OUT_OF_BOUNDS", "outside"),
            (("bad", 1, (0, 0), (2, 1), 0, 2.0), {}, "START_BLOCKED", "blocked"),
            (("bad", 1, (1, 1), (5, 1), 0, 2.0), {}, "GOAL_BLOCKED", "blocked"),
            (("bad", 1, (1, 1), (2, 1), 0, 2.0), {"unit_size": 3}, "INVALID_ARGUMENT", "unit_size"),
        ]
        for args, kw, status, word in cases:
            with self.subTest(args=args, kw=kw):
                e = self.status_of(r, *args, **kw)
                self.assertEqual(e.status, status, e.message)
                self.assertIn(word, e.message)
        e = self.status_of(self.c.release_agent, "nowhere", 1)
        self.assertEqual(e.status, "UNKNOWN_SCENE")
        e = self.status_of(self.c.release_agent, "bad", 0)
        self.assertEqual(e.status, "INVALID_ARGUMENT")
        # all names every agent: an agent beside it is refused, not ignored
        e = self.status_of(lambda: self.c._call(pathd_client._release_agent_op("bad", 3, release_all=True)))
        self.assertEqual(e.status, "INVALID_ARGUMENT")
        self.assertIn("release_agent.all", e.message)
        e = self.status_of(self.c.reservations, "nowhere")
        self.assertEqual(e.status, "UNKNOWN_SCENE")
        e = self.status_of(self.c.reservations, "bad", from_ms=10, to_ms=5)
        self.assertEqual(e.status, "INVALID_ARGUMENT")
        # None of it reserved anything, and the server still answers.
        self.assertEqual(self.c.reservations("bad")["agents"], 0)
        self.c.ping()

    def test_limits_name_the_reservation_limits(self):
        lim = self.c.limits()
        self.assertEqual(lim["reservation_ttl_ms"], TTL_MS)
        self.assertEqual(lim["max_agents_per_scene"], MAX_AGENTS)
        self.assertEqual(lim["max_reservation_window_ms"], MAX_WINDOW_MS)
        self.assertEqual(lim["max_clock_step_ms"], 3600000)  # the default (config/README.md)

    # ---- pathctl ------------------------------------------------------------

    def pathctl(self, *args, ok=True):
        out = subprocess.run([os.environ["PATHCTL_BIN"], "--server", self.daemon.addr, "--json"] + list(args),
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0 if ok else 1, out.stderr)
        return json.loads(out.stdout)

    def test_pathctl_reserve_release_reservations(self):
        rec = Recorder()
        a = self.pathctl("reserve", "--scene", "ctl", "--agent", "5", "--from", "1,1", "--to", "10,5", "--t0", "0",
                         "--speed", "2", "--window", str(MAX_WINDOW_MS))
        self.assertEqual(set(a) >= {"status", "agent", "reserved_until_ms", "waypoints"}, True, a)
        self.assertEqual((a["status"], a["agent"], a["reserved_until_ms"]), ("OK", 5, None))
        self.assertEqual(set(a["waypoints"][0]), {"x", "y", "t_arrive_ms", "t_leave_ms"})
        rec.plan(a, 1, 2.0, 0)
        # The same plan as the Python client reads it.
        same = self.c.reservations("ctl")
        self.assertEqual(same["agents"], 1)
        listed = self.pathctl("reservations", "--scene", "ctl", "--rect", "10,5,10,5")
        self.assertEqual([(e["agent"], e["t1_ms"]) for e in listed["entries"]][-1], (5, None))
        blocked = self.pathctl("reserve", "--scene", "ctl", "--agent", "6", "--from", "1,1", "--to", "2,1",
                               "--t0", "0", "--speed", "2", ok=False)
        self.assertEqual((blocked["status"], blocked["blocking_agent"]), ("START_BLOCKED", 5))
        bad = self.pathctl("reserve", "--scene", "ctl", "--agent", "6", "--from", "1,1", "--to", "2,1",
                           "--t0", "0", "--speed", "0", ok=False)
        self.assertEqual(bad["status"], "INVALID_ARGUMENT")
        self.assertEqual(self.pathctl("release", "--scene", "ctl", "--agent", "5"), {"status": "OK", "released": True})
        self.assertEqual(self.pathctl("reservations", "--scene", "ctl")["entries"], [])
        rec.add({"type": "release", "agent": 5, "t": 0})
        rec.check(self)
        # release --all: every agent of the scene (ReleaseAgent all).
        self.c.reserve_path("ctl", 7, (1, 1), (1, 1), 0, 2.0)
        self.c.reserve_path("ctl", 8, (10, 5), (10, 5), 0, 2.0)
        self.assertEqual(self.pathctl("release", "--scene", "ctl", "--all"),
                         {"status": "OK", "released": True, "agents_released": 2})
        self.assertEqual(self.c.reservations("ctl")["agents"], 0)
        self.assertEqual(self.pathctl("release", "--scene", "ctl", "--all"),
                         {"status": "OK", "released": False, "agents_released": 0})
        both = subprocess.run([os.environ["PATHCTL_BIN"], "--server", self.daemon.addr, "release", "--scene", "ctl",
                               "--all", "--agent", "7"], capture_output=True, text=True, timeout=30)
        self.assertEqual(both.returncode, 2, both.stderr)

    # ---- many agents --------------------------------------------------------

    def test_randomized_agents_checked(self):
        rng = random.Random(int(os.environ.get("PD_RESERVE_SEED", "34")))
        rec = Recorder()
        cells = open_cells()
        starts = rng.sample(cells, 12)
        at = {}        # agent -> (cell it stands on at its end, time it gets there)
        for i, s in enumerate(starts):
            a = self.reserve(rec, "rand", 1 + i, s, s, 0)
            self.assertEqual(a["status"], "OK")
            at[1 + i] = (s, 0)
        statuses = {}
        for _ in range(150):
            agent = min(at, key=lambda k: (at[k][1], k))   # the game's clock: the earliest first
            cell, t = at[agent]
            goal = rng.choice(cells)
            try:
                a = self.reserve(rec, "rand", agent, cell, goal, t, speed=rng.choice([1.0, 2.0, 4.0]),
                                 window_ms=rng.choice([None, 3000, MAX_WINDOW_MS]))
                statuses[a["status"]] = statuses.get(a["status"], 0) + 1
                last = a["waypoints"][-1]
                at[agent] = ((last["x"], last["y"]), max(last["t_arrive_ms"], t + 1))
            except PathdError as e:
                # Nothing changed: it still holds its cell; try again later.
                self.assertIn(e.status, ("NO_PATH", "GOAL_BLOCKED", "START_BLOCKED"), e.message)
                statuses[e.status] = statuses.get(e.status, 0) + 1
                at[agent] = (cell, t + 250)
        self.assertGreater(statuses.get("OK", 0) + statuses.get("PARTIAL", 0), 100, statuses)
        out = rec.check(self)
        self.assertIn("conflicts 0", out)


    def test_concurrent_clients_checked(self):
        """Several connections reserving in one scene at once: the scene's
        lane makes each ReservePath atomic, so what they were answered,
        replayed together by the checker, never collides. Unit 2 agents
        among them."""
        daemon = self.daemon
        lock = threading.Lock()
        rec = Recorder()
        failures = []
        cells = {1: open_cells(1), 2: open_cells(2)}
        # Distinct starts, footprints apart: agents of thread i are 1 + 4 i ..
        rng0 = random.Random(341)
        taken, agents = set(), []
        for n in range(12):
            unit = 2 if n % 4 == 3 else 1
            for _ in range(1000):
                c = rng0.choice(cells[unit])
                fp = {(c[0] + i, c[1] + j) for i in range(unit) for j in range(unit)}
                if not fp & taken:
                    taken |= fp
                    agents.append((1 + n, unit, c))
                    break

        def run(mine, seed):
            rng = random.Random(seed)
            client = PathdClient(daemon.addr, timeout=20)
            try:
                at = {agent: (unit, c, 0) for agent, unit, c in mine}
                for _ in range(25):
                    agent = min(at, key=lambda k: (at[k][2], k))
                    unit, cell, t = at[agent]
                    speed = rng.choice([1.0, 2.0, 4.0])
                    try:
                        a = client.reserve_path("conc", agent, cell, rng.choice(cells[unit]), t, speed,
                                                unit_size=unit, window_ms=rng.choice([None, 3000]))
                    except PathdError as e:
                        if e.status not in ("NO_PATH", "GOAL_BLOCKED", "START_BLOCKED"):
                            raise
                        at[agent] = (unit, cell, t + 250)
                        continue
                    with lock:
                        rec.plan(a, unit, speed, t)
                    last = a["waypoints"][-1]
                    at[agent] = (unit, (last["x"], last["y"]), max(last["t_arrive_ms"], t + 1))
            except Exception as e:   # reported by the main thread
                failures.append(e)
            finally:
                client.close()

        # Every agent parks where it stands first, before anyone moves: a
        # plan made meanwhile could run through a start not yet reserved.
        for agent, unit, c in agents:
            rec.plan(self.c.reserve_path("conc", agent, c, c, 0, 2.0, unit_size=unit), unit, 2.0, 0)
        threads = [threading.Thread(target=run, args=(agents[i::4], i)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        self.assertEqual(failures, [])
        self.assertGreater(rec.plans, 12 + 40)
        self.assertIn("conflicts 0", rec.check(self))


    # ---- standing agents moved aside (yield_after_ms) ------------------------

    @staticmethod
    def where(plan, t):
        """Where the game has an agent on its plan at t, and from when it
        can plan: the anchor it stands on (t), or the one it is moving to
        (its arrival there)."""
        for i, w in enumerate(plan):
            leave = w["t_leave_ms"] if w["t_leave_ms"] is not None else float("inf")
            if w["t_arrive_ms"] <= t < leave:
                return (w["x"], w["y"]), t
            if i + 1 < len(plan) and leave <= t < plan[i + 1]["t_arrive_ms"]:
                return (plan[i + 1]["x"], plan[i + 1]["y"]), plan[i + 1]["t_arrive_ms"]
        last = plan[-1]
        return (last["x"], last["y"]), max(t, last["t_arrive_ms"])

    @staticmethod
    def apply(plan, t0, new):
        """The game's plan for an agent once new replaces it from t0 on."""
        kept = [dict(w) for w in plan if w["t_arrive_ms"] < t0]
        if kept and (kept[-1]["x"], kept[-1]["y"]) == (new[0]["x"], new[0]["y"]):
            kept[-1]["t_leave_ms"] = new[0]["t_leave_ms"]
            return kept + new[1:]
        return kept + new

    def corridor_duel(self, scene, yield_after_ms, watcher=None):
        """A and B head on in the corridor (B stood first, at 0; A from
        1000), each re-reserving toward its goal every 500 ms of game time
        until it stands on it, as a game would, applying every displaced
        plan an answer carries. Returns (the time both stood on their goals
        or None within 60 s, the displaced lists the answers carried)."""
        rec = Recorder(rows=CORRIDOR_MAP)
        agents = {1: {"at": (6, 1), "goal": (13, 1), "t": 1000}, 2: {"at": (8, 1), "goal": (1, 1), "t": 0}}
        for i in (2, 1):
            a = agents[i]
            a["plan"] = self.reserve(rec, scene, i, a["at"], a["at"], a["t"], speed=1.0)["waypoints"]
        displaced, done = [], None
        for t in range(3000, 60001, 500):
            for i in (1, 2):
                a = agents[i]
                here, t0 = self.where(a["plan"], t)
                last = a["plan"][-1]
                if here == a["goal"] and last["t_leave_ms"] is None and (last["x"], last["y"]) == here:
                    continue
                ans = self.reserve(rec, scene, i, here, a["goal"], t0, speed=1.0, window_ms=4000,
                                   yield_after_ms=yield_after_ms)
                self.assertIn(ans["status"], ("OK", "PARTIAL"))
                a["plan"] = self.apply(a["plan"], t0, ans["waypoints"])
                if ans["displaced"]:
                    displaced.append(ans["displaced"])
                for d in ans["displaced"]:
                    self.assertNotEqual(d["agent"], i)
                    moved = agents[d["agent"]]
                    # It was standing where its plan ended: the new plan
                    # starts there, at its t0_ms.
                    self.assertEqual((d["waypoints"][0]["x"], d["waypoints"][0]["y"]),
                                     (moved["plan"][-1]["x"], moved["plan"][-1]["y"]))
                    self.assertEqual(d["waypoints"][0]["t_arrive_ms"], d["t0_ms"])
                    self.assertEqual(d["reserved_until_ms"], d["waypoints"][-1]["t_leave_ms"])
                    moved["plan"] = self.apply(moved["plan"], d["t0_ms"], d["waypoints"])
                if watcher is not None and ans["displaced"]:
                    ev = watcher.watch_next(timeout=10)
                    self.assertEqual((ev["kind"], ev["scene"], ev["version"]),
                                     ("agents_displaced", scene, ans["scene_version"]))
                    self.assertEqual(ev["agents"], sorted(d["agent"] for d in ans["displaced"]))
            if all(self.where(a["plan"], t)[0] == a["goal"] for a in agents.values()):
                done = t
                break
        out = rec.check(self)
        self.assertIn("conflicts 0", out)
        return done, displaced

    def test_corridor_deadlock_without_yield(self):
        """The premise: plain prioritised planning (with clear holds) leaves
        A and B in each other's way for good."""
        done, displaced = self.corridor_duel("yieldoff", 0)
        self.assertIsNone(done)
        self.assertEqual(displaced, [])

    def test_corridor_yield_both_arrive(self):
        """With yield_after_ms the one that stood longer (B) has A moved out
        of its way; the game applies A's new plan, and both arrive. The
        scene's watcher hears AGENTS_DISPLACED after each such answer."""
        watcher = PathdClient(self.daemon.addr, timeout=20)
        # pathctl watch prints the first one too (the C client's).
        pathctl = subprocess.Popen([os.environ["PATHCTL_BIN"], "--server", self.daemon.addr, "--json", "watch",
                                    "yield", "--count", "1"], stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(json.loads(pathctl.stdout.readline())["kind"], "started")
            watcher.watch(["yield"])
            self.assertEqual(watcher.watch_next(timeout=10)["kind"], "started")
            done, displaced = self.corridor_duel("yield", 2000, watcher)
            with self.assertRaises(PathdTimeout):
                watcher.watch_next(timeout=0.3)
            printed, _ = pathctl.communicate(timeout=20)
            self.assertEqual(pathctl.returncode, 0)
            first = json.loads(printed.splitlines()[0])
            self.assertEqual((first["kind"], first["scene"], first["agents"]),
                             ("agents_displaced", "yield", sorted(d["agent"] for d in displaced[0])))
        finally:
            watcher.close()
            if pathctl.poll() is None:
                pathctl.kill()
                pathctl.wait()
        self.assertIsNotNone(done)
        self.assertLessEqual(done, 40000)
        # B waited longer: A was moved, at least once.
        self.assertTrue(displaced)
        self.assertEqual({d["agent"] for ds in displaced for d in ds}, {1})

    def test_yield_after_ms_refused_out_of_range(self):
        e = self.status_of(self.c.reserve_path, "yieldctl", 1, (0, 0), (1, 0), 0, 1.0, yield_after_ms=-1)
        self.assertEqual(e.status, "INVALID_ARGUMENT")
        self.assertIn("yield_after_ms", e.message)

    def test_pathctl_yield_and_displaced(self):
        """pathctl reserve --yield-after: B stands at (8, 1) from 0 and A at
        (6, 1) from 1000; at 4000 B (stood 4000 ms, A 3000) asks for the
        left room: A is moved aside, and pathctl prints its plan."""
        rec = Recorder(rows=CORRIDOR_MAP)
        for agent, at, t in ((2, "8,1", 0), (1, "6,1", 1000)):
            a = self.pathctl("reserve", "--scene", "yieldctl", "--agent", str(agent), "--from", at, "--to", at,
                             "--t0", str(t), "--speed", "1")
            self.assertEqual(a["displaced"], [])
            rec.plan(a, 1, 1.0, t)
        b = self.pathctl("reserve", "--scene", "yieldctl", "--agent", "2", "--from", "8,1", "--to", "1,1",
                         "--t0", "4000", "--speed", "1", "--window", "4000", "--yield-after", "2000")
        self.assertEqual([d["agent"] for d in b["displaced"]], [1])
        d = b["displaced"][0]
        self.assertEqual(set(d), {"agent", "t0_ms", "reserved_until_ms", "waypoints"})
        self.assertEqual(set(d["waypoints"][0]), {"x", "y", "t_arrive_ms", "t_leave_ms"})
        self.assertEqual((d["waypoints"][0]["x"], d["waypoints"][0]["y"]), (6, 1))
        rec.plan(b, 1, 1.0, 4000)
        self.assertIn("conflicts 0", rec.check(self))
        # Text: one line per moved agent.
        out = subprocess.run([os.environ["PATHCTL_BIN"], "--server", self.daemon.addr, "reserve", "--scene",
                              "yieldctl", "--agent", "3", "--from", "0,0", "--to", "0,0", "--t0", "4000",
                              "--speed", "1", "--yield-after", "1"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn("displaced", out.stdout)


class IdleExpiryTest(unittest.TestCase):
    """reservation_ttl_ms on the server's timer: a scene nobody reserves in
    any more hears no game time, yet its stale agents go (the game's clock
    taken to run on at least as fast as real time while it is idle)."""

    IDLE_TTL_MS = 800

    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(ttl_ms=cls.IDLE_TTL_MS)

    @classmethod
    def tearDownClass(cls):
        cls.assertEqual(unittest.TestCase(), cls.daemon.stop(), 0)

    def test_idle_scene_releases_stale_agents(self):
        c = PathdClient(self.daemon.addr, timeout=20)
        try:
            c.reserve_path("ttl", 1, (1, 1), (1, 1), 0, 2.0)
            c.reserve_path("ttl", 2, (10, 5), (10, 5), 0, 2.0)
            self.assertEqual(c.reservations("ttl")["agents"], 2)
            # GetReservations hears no game time: it neither expires nor
            # keeps the scene busy. Within a few TTLs and timer periods of
            # real time both are gone.
            deadline = time.monotonic() + 10
            while c.reservations("ttl")["agents"] and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertEqual(c.reservations("ttl")["agents"], 0)
            self.assertEqual(c.reservations("ttl")["entries"], [])
            self.assertFalse(c.release_agent("ttl", 1))
            # Their cells are free: another agent plans through them.
            a = c.reserve_path("ttl", 3, (2, 1), (1, 1), 0, 2.0)
            self.assertEqual(a["status"], "OK")
        finally:
            c.close()


if __name__ == "__main__":
    unittest.main()
