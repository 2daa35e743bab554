#!/usr/bin/env python3
"""test_reserve_durable.py - reservations survive a restart, and replicas
share them (docs/ARCHITECTURE.md, "Reservations in the log").

Starts its own pathd (PATHD_BIN) with a data_dir and journal_fsync
"always", and talks to it with the Python client:

- a run of agents re-reserving on the game's clock, releases, expiry by
  reservation_ttl_ms and an UpdateCells that cuts plans; then kill -9 and
  a restart on the same data_dir: GetReservations of every scene is the
  same before and after (every entry, the agent and entry counts); a
  parked agent still blocks a start after the restart; agents reserved
  after it never overlap the ones before (the independent checker
  tests/agents/check_plans.py replays the answers of both runs);
- a scene made at run time, reserved in, dropped and made again under its
  name: after the restart it has no reservations (its old table's changes
  do not replay onto the new scene);
- a damaged tail of reservations.log (a torn write) is cut at the restart
  and the whole records before it kept;
- the log compacted (journal_compact_bytes 64 KiB): many reserve/release
  cycles keep the file under its floor, and a kill -9 and restart after
  compactions answers GetReservations as before, an agent cut before the
  compaction still was_cut;
- two replicas over one Redis (log.redis; a redis-server the test starts
  on a loopback port): agents reserved through either replica, on the
  game's clock, never overlap (the checker replays every answer of both),
  GetReservations answers alike on both, a parked agent reserved through
  one blocks a start on the other, a release through the other, a replica
  restarted with kill -9 reads the tables back from the log, both
  replicas reserving in one scene at once (their appends race) still
  hand out plans that never meet, an update's cut through one replica
  is the same on the other (and cuts an agent only the other replica
  reserved, its table read up to the top its own append saw), and a
  scene dropped and made again under its name starts with no
  reservations on either;
- the timer's idle sweep, and a ReservePath's own expiry, tell the
  scene's watchers which agents they released (AGENTS_EXPIRED), on one
  pathd and on the replica that appended the expiry;
- the replicas' reservation stream is trimmed: past
  PD_RESERVE_SHARED_SNAPSHOT_EVERY entries Redis holds a table snapshot
  and only the entries after it, a replica whose table the trim passed
  and one restarted (kill -9) read the same table from the snapshot;
- a reload that stops serving a scene RESETs its reservations on every
  replica: the scene made again under its name has none.

    PATHD_BIN=... PYTHONPATH=<pathd_pb2>:<client> test_reserve_durable.py
"""

import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zlib

from pathd_client import PathdClient, PathdError, PathdTimeout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_reserve_wire as wire  # noqa: E402
from test_reserve_wire import CORRIDOR_MAP, DOOR_MAP, Recorder, listening_address, open_cells  # noqa: E402

TTL_MS = 20000


class Daemon:
    """A pathd on a data_dir that outlives it (kill -9, start again)."""

    def __init__(self, data_dir, scenes, extra=None, maps=None):
        self.data_dir = data_dir
        map_path = os.path.join(data_dir, "..", "door.txt")
        with open(map_path, "w") as f:
            f.write("\n".join(DOOR_MAP) + "\n")
        # maps: scene name -> its rows, for scenes not on the door map
        paths = {}
        for name, rows in (maps or {}).items():
            paths[name] = os.path.join(data_dir, "..", name + ".txt")
            with open(paths[name], "w") as f:
                f.write("\n".join(rows) + "\n")
        config = {
            "listen": "127.0.0.1:0", "metrics_listen": "", "threads": 2, "log_level": "info",
            "data_dir": data_dir, "journal_fsync": "always",
            "limits": {"reservation_ttl_ms": TTL_MS, "max_agents_per_scene": 64,
                       "max_reservation_window_ms": 60000},
            "scenes": [{"name": n, "map": os.path.abspath(paths.get(n, map_path)), "format": "ascii",
                        "unit_sizes": [1, 2]} for n in scenes],
        }
        config.update(extra or {})
        self.config = os.path.join(data_dir, "..", "pathd.json")
        with open(self.config, "w") as f:
            json.dump(config, f)
        self.proc = None
        self.start()

    def start(self):
        self.log_path = os.path.join(self.data_dir, "..", "pathd.%d.log" % time.monotonic_ns())
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([os.environ["PATHD_BIN"], "--config", self.config], stderr=self.log)
        self.addr = listening_address(self.proc, self.log_path)
        if self.addr is None:
            self.kill()
            raise RuntimeError("pathd did not start:\n" + self.log_text())

    def log_text(self):
        with open(self.log_path) as f:
            return f.read()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=15)
        self.log.close()

    def restart(self):
        self.kill()
        self.start()


def table(c, scene):
    """Everything GetReservations says of scene, in a comparable form."""
    got = c.reservations(scene, max_entries=100000)
    entries = sorted((e["agent"], e["x"], e["y"], e["width"], e["height"], e["t0_ms"], e["t1_ms"])
                     for e in got["entries"])
    return {"entries": entries, "matching": got["matching"], "agents": got["agents"],
            "table_entries": got["table_entries"]}


class DataDirTest(unittest.TestCase):
    """One pathd on a data_dir of its own, with scenes SCENES (MAPS: the
    rows of those not on the door map) and config EXTRA."""

    SCENES, MAPS, EXTRA = [], None, None

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.data = os.path.join(self.tmp.name, "data")
        os.mkdir(self.data)
        self.d = Daemon(self.data, self.SCENES, extra=self.EXTRA, maps=self.MAPS)
        self.c = PathdClient(self.d.addr, timeout=20)

    def tearDown(self):
        self.c.close()
        self.d.kill()
        self.tmp.cleanup()

    def reconnect(self):
        self.c.close()
        self.d.restart()
        self.c = PathdClient(self.d.addr, timeout=20)

    def _watch_both(self, scene):
        """A watch of scene through both clients: the Python client's and,
        when PATHCTL_BIN is set, pathctl watch --count 1 (the C client's),
        each past its STARTED. Returns (watcher, its STARTED event, the
        pathctl process or None); _pathctl_heard reads pathctl's next."""
        env = os.environ.get("PATHCTL_BIN")
        pathctl = None
        if env:
            pathctl = subprocess.Popen([env, "--server", self.d.addr, "--json", "watch", scene, "--count", "1"],
                                       stdout=subprocess.PIPE, text=True)
            self.addCleanup(pathctl.stdout.close)
            self.addCleanup(pathctl.wait, 15)
            self.addCleanup(pathctl.kill)
            self.assertEqual(json.loads(pathctl.stdout.readline())["kind"], "started")
        watcher = PathdClient(self.d.addr, timeout=20)
        self.addCleanup(watcher.close)
        watcher.watch([scene])
        started = watcher.watch_next(timeout=10)
        self.assertEqual(started["kind"], "started")
        return watcher, started, pathctl

    def _pathctl_heard(self, pathctl, kind, agents):
        """pathctl watch's next event (from _watch_both) is kind, agents."""
        if pathctl:
            got = json.loads(pathctl.stdout.readline())
            self.assertEqual((got["kind"], got["agents"]), (kind, agents))


class RestartTest(DataDirTest):
    SCENES = ["run", "cut", "blocked", "runtime_base"]

    def run_agents(self, rec, scene, agents, t_from, t_to, rng):
        """Agents re-reserving random goals on the game's clock: an agent
        reserves again only while it stands on a waypoint of its plan (as
        the game follows it), from there."""
        cells = open_cells(1)
        pos = {a: cells[(a * 7) % len(cells)] for a in agents}
        plan = {}
        for t in range(t_from, t_to, 500):
            for a in agents:
                if a in plan:
                    here = [w for w in plan[a] if w["t_arrive_ms"] <= t and
                            (w["t_leave_ms"] is None or t < w["t_leave_ms"])]
                    if not here:
                        continue          # moving: not at a waypoint now
                    pos[a] = (here[0]["x"], here[0]["y"])
                try:
                    ans = self.c.reserve_path(scene, a, pos[a], rng.choice(cells), t, 2.0, window_ms=4000)
                except PathdError as e:
                    # START_BLOCKED / NO_PATH: a start another holds, in the
                    # random run, as a game's might; it keeps its plan.
                    self.assertIn(e.status, ("START_BLOCKED", "NO_PATH"), e)
                    continue
                rec.plan(ans, 1, 2.0, t)
                plan[a] = ans["waypoints"]

    def test_restart_keeps_every_reservation(self):
        rng = random.Random(34)
        rec = Recorder()
        self.run_agents(rec, "run", list(range(1, 9)), 0, 6000, rng)
        # Scene "cut": reservations an update cuts, a release, and expiry
        # (agents that stop renewing for TTL_MS of game time).
        self.c.reserve_path("cut", 1, (1, 3), (10, 3), 0, 2.0, window_ms=60000)
        self.c.reserve_path("cut", 2, (1, 1), (10, 1), 0, 2.0, window_ms=60000)
        self.c.reserve_path("cut", 3, (1, 5), (3, 5), 0, 2.0, window_ms=60000)
        self.assertTrue(self.c.release_agent("cut", 2))
        up = self.c.update_cells("cut", rect=((5, 3), (5, 3)), op="block", at_ms=1000)
        self.assertEqual(up["agents_cut"], [1])
        self.c.reserve_path("cut", 4, (10, 5), (8, 5), TTL_MS * 2, 2.0)   # moves "now" on: 1 and 3 expire
        cut_before = table(self.c, "cut")
        self.assertEqual({e[0] for e in cut_before["entries"]}, {4}, cut_before)
        # Scene "blocked": an agent parked on a cell.
        self.c.reserve_path("blocked", 21, (3, 1), (3, 1), 1000, 2.0)
        before = {s: table(self.c, s) for s in ("run", "cut", "blocked")}
        self.assertGreater(before["run"]["table_entries"], 20)

        self.reconnect()
        after = {s: table(self.c, s) for s in ("run", "cut", "blocked")}
        self.assertEqual(before, after)
        self.assertIn("reservation log", self.d.log_text())
        # The parked agent still holds its cell.
        with self.assertRaises(PathdError) as cm:
            self.c.reserve_path("blocked", 22, (3, 1), (8, 1), 1500, 2.0)
        self.assertEqual(cm.exception.status, "START_BLOCKED")
        self.assertEqual(cm.exception.result["blocking_agent"], 21)
        # New agents around the replayed plans: no overlap with the plans of
        # before the restart (one record of both runs for the checker).
        self.run_agents(rec, "run", list(range(9, 13)), 6000, 9000, rng)
        self.assertGreater(rec.plans, 30)
        rec.check(self)

        # A second restart replays the changes made after the first too.
        before = {s: table(self.c, s) for s in ("run", "cut", "blocked")}
        self.reconnect()
        self.assertEqual(before, {s: table(self.c, s) for s in ("run", "cut", "blocked")})

    def test_dropped_scene_starts_empty(self):
        with open(os.path.join(self.tmp.name, "door.txt"), "rb") as f:
            door = f.read()
        self.c.create_scene("made", map_bytes=door, format="ascii")
        self.c.reserve_path("made", 5, (1, 1), (1, 1), 0, 2.0)
        self.assertEqual(table(self.c, "made")["agents"], 1)
        self.c.drop_scene("made")
        self.c.create_scene("made", map_bytes=door, format="ascii")
        # Reserved in neither the new scene, nor after the restart.
        self.assertEqual(table(self.c, "made")["agents"], 0)
        self.reconnect()
        self.assertEqual(table(self.c, "made")["agents"], 0)
        # The old agent's cell is free in the new scene.
        self.assertEqual(self.c.reserve_path("made", 6, (1, 1), (2, 1), 10, 2.0)["status"], "OK")
        before = table(self.c, "made")
        self.reconnect()
        self.assertEqual(before, table(self.c, "made"))

    def test_torn_tail_is_cut(self):
        self.c.reserve_path("run", 1, (1, 1), (10, 5), 0, 2.0, window_ms=60000)
        self.c.reserve_path("run", 2, (1, 5), (10, 1), 0, 2.0, window_ms=60000)
        before = table(self.c, "run")
        self.d.kill()
        path = os.path.join(self.data, "reservations.log")
        size = os.path.getsize(path)
        with open(path, "ab") as f:
            f.write(b"\x40\x00\x00\x00\x01\x02\x03")   # a record's start, torn
        self.c.close()
        self.d.start()
        self.c = PathdClient(self.d.addr, timeout=20)
        self.assertEqual(before, table(self.c, "run"))
        self.assertEqual(os.path.getsize(path), size)
        self.assertIn("7 bytes of damaged tail truncated", self.d.log_text())
        # and said at warn, with where the damage began (the kept bytes)
        self.assertRegex(self.d.log_text(), r"WARN reservation log \S*/reservations\.log: damaged at offset %d: "
                         r"\d+ records kept, 7 bytes truncated" % size)


class CompactionTest(DataDirTest):
    """The reservation log is compacted (pd_reserve_log.h): past
    journal_compact_bytes (its floor, 64 KiB here) and 4 times what the
    last compaction wrote, the server's tick rewrites it as the tables are
    now. Many reserve/release cycles keep the file bounded; a kill -9 and
    a restart after compactions answer GetReservations as before (live
    plans, a plan an update cut, a parked agent), the cut agent's next
    plan still says was_cut, and changes appended after a compaction
    replay too."""

    COMPACT = 65536
    SCENES, EXTRA = ["run", "cut"], {"journal_compact_bytes": COMPACT}
    run_agents = RestartTest.run_agents

    def log_size(self):
        return os.path.getsize(os.path.join(self.data, "reservations.log"))

    def cycles(self, n, t_from):
        """Reserve and release one agent n times: history, nothing live."""
        for i in range(n):
            self.c.reserve_path("cut", 50, (1, 1), (4, 1), t_from + i, 2.0, window_ms=60000)
            self.assertTrue(self.c.release_agent("cut", 50))

    def wait_compacted(self, grown_to):
        """Until the tick compacted the log, grown to grown_to bytes, below
        the floor."""
        deadline = time.monotonic() + 15
        while self.log_size() >= self.COMPACT and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertLess(self.log_size(), self.COMPACT)
        self.assertLess(self.log_size(), grown_to)

    def tables(self):
        return {s: table(self.c, s) for s in ("run", "cut")}

    def test_log_stays_bounded_and_restart_keeps_tables(self):
        rng = random.Random(35)
        rec = Recorder()
        self.run_agents(rec, "run", list(range(1, 7)), 0, 4000, rng)
        self.c.reserve_path("cut", 1, (1, 3), (10, 3), 0, 2.0, window_ms=60000)
        self.c.reserve_path("cut", 3, (1, 5), (3, 5), 0, 2.0, window_ms=60000)
        up = self.c.update_cells("cut", rect=((5, 3), (5, 3)), op="block", at_ms=1000)
        self.assertEqual(up["agents_cut"], [1])
        # 1200 cycles of about 180 bytes each: over three times the floor
        # of history, compacted by the tick as it goes.
        for _ in range(4):
            self.cycles(300, 2000)
            grown = self.log_size()
            self.wait_compacted(max(grown, self.COMPACT))
        before = self.tables()
        self.assertGreater(before["run"]["table_entries"], 10)
        self.assertEqual(before["cut"]["agents"], 2)
        self.reconnect()
        self.assertEqual(before, self.tables())
        # Agent 1's cut is in the compacted log (was_cut restored).
        again = self.c.reserve_path("cut", 1, (4, 3), (1, 3), 3000, 2.0, window_ms=60000)
        self.assertTrue(again["was_cut"])
        # New plans around the restored ones never meet them.
        self.run_agents(rec, "run", list(range(7, 11)), 4000, 7000, rng)
        rec.check(self)
        # Appends after a compaction replay too.
        self.cycles(400, 8000)
        self.wait_compacted(10 ** 9)
        self.c.reserve_path("cut", 7, (8, 5), (10, 5), 9000, 2.0)
        before = self.tables()
        self.reconnect()
        self.assertEqual(before, self.tables())


class YieldRestartTest(DataDirTest):
    """pd_yield's changes in the reservation log: the requester's plan, each
    displaced agent's new plan and the undo of a move that did not pay are
    all table calls (the observer logs them), so a restart after agents
    were moved aside answers GetReservations as before."""

    SCENES, MAPS = ["corridor"], {"corridor": CORRIDOR_MAP}
    # test_reserve_wire's corridor duel, as a game follows it: A and B head
    # on in a corridor, B standing longer; with yield_after_ms A is moved
    # aside. Its reserve (below) restarts pathd after each move.
    corridor_duel = wire.ReserveWireTest.corridor_duel
    where = staticmethod(wire.ReserveWireTest.where)
    apply = staticmethod(wire.ReserveWireTest.apply)

    def restart_keeps(self):
        before = table(self.c, "corridor")
        self.reconnect()
        self.assertEqual(before, table(self.c, "corridor"))
        return before

    def reserve(self, rec, scene, agent, start, goal, t0, speed=2.0, unit=1, **kw):
        ans = self.c.reserve_path(scene, agent, start, goal, t0, speed, unit_size=unit, **kw)
        rec.plan(ans, unit, speed, t0)
        if ans["displaced"]:
            # Right after the move (kill -9): the displaced agents' new
            # plans and the requester's way are in the table after it too.
            self.moved += 1
            entries = self.restart_keeps()["entries"]
            self.assertTrue({e[0] for e in entries} >= {agent} | {d["agent"] for d in ans["displaced"]})
        return ans

    def test_displaced_plans_survive_restart(self):
        self.moved = 0
        done, displaced = self.corridor_duel("corridor", 2000)
        self.assertIsNotNone(done)
        self.assertGreater(self.moved, 0)
        self.assertEqual(self.moved, len(displaced))
        self.restart_keeps()


class TimerExpiryRestartTest(DataDirTest):
    """reservation_ttl_ms on the server's timer in file mode: what an idle
    sweep expired is in the reservation log (it goes through the table's
    observer), and a table replayed at a restart is swept without a
    ReservePath (its idle time counted from the restart)."""

    TTL = 2000
    SCENES, EXTRA = ["ttl"], {"limits": {"reservation_ttl_ms": TTL, "max_reservation_window_ms": 60000}}

    def wait_agents(self, n):
        deadline = time.monotonic() + 15
        while self.c.reservations("ttl")["agents"] != n and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.c.reservations("ttl")["agents"]

    def test_sweep_is_logged(self):
        self.c.reserve_path("ttl", 1, (1, 1), (1, 1), 0, 2.0)
        self.c.reserve_path("ttl", 2, (10, 5), (10, 5), 0, 2.0)
        self.assertEqual(self.c.reservations("ttl")["agents"], 2)
        self.assertEqual(self.wait_agents(0), 0)
        # At once after a kill -9 (within a TTL of real time, before the
        # timer could expire them again: unlogged, the replay would bring
        # both back): still gone.
        self.reconnect()
        self.assertEqual(table(self.c, "ttl"), {"entries": [], "matching": 0, "agents": 0, "table_entries": 0})

    def test_sweep_tells_watchers(self):
        """The agents the timer's sweep released reach the scene's watchers
        as one AGENTS_EXPIRED event, ascending, at the version served
        (Python's watch_next, and pathctl watch: the C client's)."""
        watcher, started, pathctl = self._watch_both("ttl")
        self.c.reserve_path("ttl", 7, (10, 5), (10, 5), 0, 2.0)
        self.c.reserve_path("ttl", 3, (1, 1), (1, 1), 0, 2.0)
        ev = watcher.watch_next(timeout=15)
        self.assertEqual(ev["kind"], "agents_expired")
        self.assertEqual(ev["agents"], [3, 7])
        self.assertEqual(ev["version"], started["version"])
        self.assertEqual(self.c.reservations("ttl")["agents"], 0)
        self._pathctl_heard(pathctl, "agents_expired", [3, 7])
        # Nothing more: the next sweeps find an empty table.
        with self.assertRaises(PathdTimeout):
            watcher.watch_next(timeout=0.5)

    def test_reserve_path_expiry_tells_watchers(self):
        """Agents a ReservePath's own expiry released (the scene in use: its
        t0_ms moved the table's clock a TTL past their renewal) reach the
        watchers too, the requester itself renewed, not listed."""
        expire_by_reserve_path(self, self.c, self.c, self.d)

    def test_replayed_table_is_swept(self):
        self.c.reserve_path("ttl", 1, (1, 1), (1, 1), 0, 2.0)
        self.reconnect()
        self.assertEqual(self.c.reservations("ttl")["agents"], 1)
        # No ReservePath after the restart: the timer alone expires it.
        self.assertEqual(self.wait_agents(0), 0)


class ClockTest(DataDirTest):
    """The scene's game clock (the latest t0_ms its agents were reserved at)
    takes no t0 that would throw acknowledged reservations away: one far
    ahead (limits.max_clock_step_ms, default an hour) or more than
    reservation_ttl_ms back is refused with INVALID_ARGUMENT before
    anything changes; a game whose clock starts over releases every agent
    first (ReleaseAgent all), which forgets the clock, durably."""

    # the longest scene name (PD_CONF_MAX_NAME less its NUL)
    LONG = "match-" + "7" * 57
    SCENES = ["clock", LONG]

    def test_refusal_keeps_its_remedy_for_the_longest_scene_name(self):
        """A refusal's message names the scene, t0, the clock and the limit,
        then the remedy: with a long scene name and epoch-sized times it
        passed the 256 bytes of a reply's message and was cut before the
        remedy."""
        self.c.reserve_path(self.LONG, 1, (1, 1), (1, 1), 10 ** 18, 2.0)
        for t0, end in ((2 ** 60, "ReleaseAgent all first if it jumped"),
                        (10 ** 18 - TTL_MS - 1, "ReleaseAgent all first if it restarted")):
            with self.assertRaises(PathdError) as cm:
                self.c.reserve_path(self.LONG, 2, (10, 5), (10, 5), t0, 2.0)
            self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")
            self.assertIn("'%s'" % self.LONG, cm.exception.message)
            self.assertIn(str(t0), cm.exception.message)
            self.assertTrue(cm.exception.message.endswith(end), cm.exception.message)

    def test_far_t0_refused_and_nobody_expires(self):
        """One t0 of 2**60 (a game bug, a fuzzed client) was taken as the
        scene's clock: every agent reserved at the game's times expired at
        the next ReservePath, and after a restart too."""
        self.c.reserve_path("clock", 1, (1, 1), (1, 1), 1000, 2.0)
        self.c.reserve_path("clock", 2, (10, 5), (10, 5), 1000, 2.0)
        with self.assertRaises(PathdError) as cm:
            self.c.reserve_path("clock", 3, (1, 5), (3, 5), 2 ** 60, 2.0)
        self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")
        for word in ("'clock'", "max_clock_step_ms", "1000", str(2 ** 60), "ReleaseAgent all"):
            self.assertIn(word, cm.exception.message)
        # Nothing of it was taken: the next ReservePath on the game's clock
        # (which runs the expiry check) keeps both agents.
        self.c.reserve_path("clock", 4, (1, 3), (2, 3), 2000, 2.0)
        got = table(self.c, "clock")
        self.assertEqual({e[0] for e in got["entries"]}, {1, 2, 4})
        # An update with no at_ms cuts from the game's clock, not from 2**60.
        up = self.c.update_cells("clock", cells=[(10, 5)], op="block")
        self.assertEqual(up["agents_cut"], [2])
        self.reconnect()
        self.assertEqual(table(self.c, "clock")["agents"], 3)
        self.c.reserve_path("clock", 5, (1, 5), (1, 5), 2500, 2.0)
        self.assertEqual(table(self.c, "clock")["agents"], 4)

    def test_clock_going_back_refused(self):
        self.c.reserve_path("clock", 1, (1, 1), (1, 1), 100000, 2.0)
        with self.assertRaises(PathdError) as cm:
            self.c.reserve_path("clock", 2, (10, 5), (10, 5), 100000 - TTL_MS - 1, 2.0)
        self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")
        for word in ("'clock'", "reservation_ttl_ms", "went back", "100000", "ReleaseAgent all"):
            self.assertIn(word, cm.exception.message)
        self.assertEqual(table(self.c, "clock")["agents"], 1)
        # Within the TTL back: taken (a late answer's time), and kept.
        self.c.reserve_path("clock", 2, (10, 5), (10, 5), 100000 - TTL_MS + 1000, 2.0)
        self.assertEqual(table(self.c, "clock")["agents"], 2)
        # Once the last agent left, the scene has no clock: any t0 sets it.
        self.assertTrue(self.c.release_agent("clock", 1))
        self.assertTrue(self.c.release_agent("clock", 2))
        self.c.reserve_path("clock", 3, (1, 1), (1, 1), 0, 2.0)
        self.c.reserve_path("clock", 4, (10, 5), (10, 5), 100, 2.0)
        self.assertEqual(table(self.c, "clock")["agents"], 2)

    def test_release_all_then_a_clock_from_zero_survives_restart(self):
        watcher, started, pathctl = self._watch_both("clock")  # the C client's watch hears it too
        self.c.reserve_path("clock", 1, (1, 1), (1, 1), 500000, 2.0)
        self.c.reserve_path("clock", 2, (10, 5), (10, 5), 500000, 2.0)
        # The game restarted its clock: its t0 from 0 is refused ...
        with self.assertRaises(PathdError) as cm:
            self.c.reserve_path("clock", 1, (1, 1), (1, 1), 0, 2.0)
        self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")
        # ... until it releases every agent, which watchers hear.
        self.assertEqual(self.c.release_all("clock"), 2)
        ev = watcher.watch_next(timeout=10)
        self.assertEqual((ev["kind"], ev["agents"], ev["version"]), ("agents_released", [1, 2], started["version"]))
        self._pathctl_heard(pathctl, "agents_released", [1, 2])
        self.assertEqual(table(self.c, "clock")["agents"], 0)
        self.c.reserve_path("clock", 5, (1, 1), (1, 1), 0, 2.0)
        self.c.reserve_path("clock", 6, (10, 5), (10, 5), 100, 2.0)
        before = table(self.c, "clock")
        self.assertEqual(before["agents"], 2)
        # A restart replays the release and the new clock.
        self.reconnect()
        self.assertEqual(table(self.c, "clock"), before)
        self.c.reserve_path("clock", 7, (1, 3), (1, 3), 200, 2.0)
        self.assertEqual(table(self.c, "clock")["agents"], 3)
        with self.assertRaises(PathdError) as cm:
            self.c.reserve_path("clock", 8, (1, 5), (1, 5), 500000 + 3600001, 2.0)
        self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")

    def test_the_only_agent_restarts_its_clock(self):
        """A game with one NPC whose clock started over: nothing else could
        conflict, so its t0 from 0 is a fresh clock (as after ReleaseAgent
        all), kept by the ReservePath's own expiry and after a restart. It
        was refused; and taken on the old clock, the NPC renewed at 0 was
        expired at once. A second agent makes the clock shared again."""
        self.c.reserve_path("clock", 1, (1, 1), (2, 1), 500000, 2.0)
        self.c.reserve_path("clock", 1, (1, 1), (1, 1), 0, 2.0)
        self.assertEqual(table(self.c, "clock")["agents"], 1)
        self.c.reserve_path("clock", 2, (10, 5), (10, 5), 100, 2.0)
        before = table(self.c, "clock")
        self.assertEqual({e[0] for e in before["entries"]}, {1, 2})
        self.reconnect()
        self.assertEqual(table(self.c, "clock"), before)
        with self.assertRaises(PathdError) as cm:
            self.c.reserve_path("clock", 1, (1, 1), (1, 1), 100 + 3600001, 2.0)
        self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")
        # Alone again, a jump far ahead is still refused (one bad t0 of a
        # lone NPC would move the clock away from every agent that joins),
        # and a jump back is its fresh clock.
        self.assertTrue(self.c.release_agent("clock", 2))
        with self.assertRaises(PathdError) as cm:
            self.c.reserve_path("clock", 1, (1, 1), (1, 1), 2 ** 40, 2.0)
        self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")
        self.c.reserve_path("clock", 1, (1, 1), (1, 1), 50, 2.0)
        self.c.reserve_path("clock", 3, (10, 5), (10, 5), 60, 2.0)
        self.assertEqual(table(self.c, "clock")["agents"], 2)


class ClockNoTtlTest(DataDirTest):
    """reservation_ttl_ms 0: no agent ever expires, so a t0 refused for
    leading the clock is refused until the game releases its agents - the
    refusal says so (it promised an expiry that never comes), within a
    reply's message for the longest scene name and epoch-sized times."""

    SCENES = [ClockTest.LONG]
    EXTRA = {"limits": {"reservation_ttl_ms": 0, "max_reservation_window_ms": 60000}}

    def test_refusal_names_the_release_as_the_only_remedy(self):
        self.c.reserve_path(self.SCENES[0], 1, (1, 1), (1, 1), 10 ** 18, 2.0)
        for _ in range(2):  # sent again: the same refusal
            with self.assertRaises(PathdError) as cm:
                self.c.reserve_path(self.SCENES[0], 2, (10, 5), (10, 5), 2 ** 60, 2.0)
            self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")
            self.assertIn("'%s'" % self.SCENES[0], cm.exception.message)
            self.assertIn("max_clock_step_ms (3600000)", cm.exception.message)
            self.assertTrue(cm.exception.message.endswith(
                "with reservation_ttl_ms 0 this never clears: ReleaseAgent all first"), cm.exception.message)
        self.assertEqual(self.c.release_all(self.SCENES[0]), 1)
        self.c.reserve_path(self.SCENES[0], 2, (10, 5), (10, 5), 2 ** 60, 2.0)


class ClockLongTtlTest(DataDirTest):
    """A slow game's TTL (a day) longer than max_clock_step_ms (an hour): a
    t0_ms two hours on expires nobody the clock renewed, and is taken; past
    the TTL the refusal names the TTL, the limit it passed."""

    DAY = 86400000
    SCENES = ["clock"]
    EXTRA = {"limits": {"reservation_ttl_ms": DAY, "max_clock_step_ms": 3600000,
                        "max_reservation_window_ms": 60000}}

    def test_a_step_within_the_ttl_is_taken(self):
        self.c.reserve_path("clock", 1, (1, 1), (1, 1), 100000, 2.0)
        self.c.reserve_path("clock", 2, (10, 5), (10, 5), 100000 + 7200000, 2.0)
        self.assertEqual(table(self.c, "clock")["agents"], 2)
        with self.assertRaises(PathdError) as cm:
            self.c.reserve_path("clock", 3, (1, 5), (1, 5), 7300000 + self.DAY + 1, 2.0)
        self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")
        self.assertIn("by over reservation_ttl_ms (%d)" % self.DAY, cm.exception.message)
        self.assertEqual(table(self.c, "clock")["agents"], 2)


def expire_by_reserve_path(test, c, watch_c, d, scene="ttl"):
    """Agents 1 and 3 parked at 0, agent 1 reserving again at 5000 (TTL
    2000): the ReservePath releases 3, and watchers of the pathd it went
    through hear AGENTS_EXPIRED [3] (a watcher on d)."""
    watcher = PathdClient(d.addr, timeout=20)
    test.addCleanup(watcher.close)
    watcher.watch([scene])
    test.assertEqual(watcher.watch_next(timeout=10)["kind"], "started")
    c.reserve_path(scene, 1, (1, 1), (1, 1), 0, 2.0)
    c.reserve_path(scene, 3, (10, 5), (10, 5), 0, 2.0)
    c.reserve_path(scene, 1, (1, 1), (2, 1), 5000, 2.0)
    ev = watcher.watch_next(timeout=15)
    test.assertEqual((ev["kind"], ev["agents"]), ("agents_expired", [3]))
    test.assertEqual(watch_c.reservations(scene)["agents"], 1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ReplicaBase(unittest.TestCase):
    """Two replicas over one Redis (log.redis), each with its own data_dir."""

    LIMITS = None   # the config's "limits", when not the Daemon's
    SCENES = ["door", "cut"]

    def redis_cli(self, *args):
        """One command to the test's Redis (redis-cli, which redis-server's
        package brings); its answer's text."""
        cli = shutil.which("redis-cli")
        self.assertIsNotNone(cli, "redis-cli is not installed (redis-tools, with redis-server)")
        return subprocess.check_output([cli, "-p", str(self.redis_port), "--raw"] + [str(a) for a in args],
                                       timeout=20).decode("latin-1")

    def setUp(self):
        redis = shutil.which("redis-server")
        self.assertIsNotNone(redis, "redis-server is not installed (scripts/install-deps.sh test installs it)")
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        port = self.redis_port = free_port()
        self.redis = subprocess.Popen([redis, "--port", str(port), "--bind", "127.0.0.1", "--dir", self.tmp.name,
                                       "--save", "", "--appendonly", "no"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(self.redis.wait)
        self.addCleanup(self.redis.kill)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                self.assertLess(time.monotonic(), deadline, "redis-server did not start")
                time.sleep(0.05)
        self.d, self.c = [], []
        for i in range(2):
            home = os.path.join(self.tmp.name, "r%d" % i)
            os.makedirs(os.path.join(home, "data"))
            extra = {"log": {"redis": "127.0.0.1:%d" % port}}
            if self.LIMITS:
                extra["limits"] = self.LIMITS
            d = Daemon(os.path.join(home, "data"), self.SCENES, extra)
            self.addCleanup(d.kill)
            self.d.append(d)
            self.c.append(PathdClient(d.addr, timeout=20))
            self.addCleanup(self.c[-1].close)



class ReplicaTest(ReplicaBase):
    """Agents reserved through either replica never overlap, and both
    answer GetReservations alike."""

    def test_agents_through_two_replicas_never_meet(self):
        rec = Recorder()
        rng = random.Random(32)
        cells = open_cells(1)
        pos = {a: cells[(a * 5) % len(cells)] for a in range(1, 11)}
        plan = {}
        for t in range(0, 8000, 500):
            for a in pos:
                c = self.c[a % 2]          # odd agents through replica 1, even through replica 0
                if a in plan:
                    here = [w for w in plan[a] if w["t_arrive_ms"] <= t and
                            (w["t_leave_ms"] is None or t < w["t_leave_ms"])]
                    if not here:
                        continue
                    pos[a] = (here[0]["x"], here[0]["y"])
                try:
                    ans = c.reserve_path("door", a, pos[a], rng.choice(cells), t, 2.0, window_ms=4000)
                except PathdError as e:
                    self.assertIn(e.status, ("START_BLOCKED", "NO_PATH"), e)
                    continue
                rec.plan(ans, 1, 2.0, t)
                plan[a] = ans["waypoints"]
        self.assertGreater(rec.plans, 60)
        # Every plan of both replicas, replayed together: no two agents in
        # one cell at overlapping times.
        rec.check(self)
        self.assertEqual(table(self.c[0], "door"), table(self.c[1], "door"))
        # An agent parked through one replica blocks a start on the other
        # (on a cell none of the run's agents holds from 9000 on).
        held = {(x0 + i, y0 + j) for _, x0, y0, w, h, _, t1 in table(self.c[0], "door")["entries"]
                if t1 is None or t1 > 9000 for i in range(w) for j in range(h)}
        free = next(cell for cell in open_cells(1) if cell not in held)
        self.c[0].reserve_path("door", 40, free, free, 9000, 2.0)
        with self.assertRaises(PathdError) as cm:
            self.c[1].reserve_path("door", 41, free, (1, 3), 9100, 2.0)
        self.assertEqual(cm.exception.status, "START_BLOCKED")
        self.assertEqual(cm.exception.result["blocking_agent"], 40)
        # A release through the other replica.
        self.assertTrue(self.c[1].release_agent("door", 40))
        self.assertFalse(self.c[0].release_agent("door", 40))
        # A replica restarted (kill -9) reads the tables back from the log.
        before = table(self.c[0], "door")
        self.c[1].close()
        self.d[1].restart()
        self.c[1] = PathdClient(self.d[1].addr, timeout=20)
        self.addCleanup(self.c[1].close)
        self.assertEqual(before, table(self.c[1], "door"))

    def test_yield_after_ms_not_served(self):
        """Moving holders aside changes other agents' plans as it plans:
        replicas answer LIMIT_EXCEEDED naming the field, and reserve
        nothing."""
        self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 0, 2.0)
        for c in self.c:
            with self.assertRaises(PathdError) as cm:
                c.reserve_path("door", 2, (1, 5), (10, 5), 1000, 2.0, yield_after_ms=2000)
            self.assertEqual(cm.exception.status, "LIMIT_EXCEEDED")
            self.assertIn("reserve_path.yield_after_ms is not served on replicas", cm.exception.message)
        self.assertEqual(table(self.c[1], "door")["agents"], 1)
        # 0 is served as before.
        self.assertEqual(self.c[1].reserve_path("door", 2, (1, 5), (10, 5), 1000, 2.0, yield_after_ms=0)["status"],
                         "OK")

    def test_clear_holds_on_replicas(self):
        """limits.reservation_clear_holds (on by default) on a replica too:
        a PARTIAL plan whose window ends in the door holds on past it, as
        one pathd with data_dir plans it (pd_yield_plan), never in it."""
        for i, c in enumerate(self.c):
            ans = c.reserve_path("door", 10 + i, (4, 3), (10, 3), 1000 + 10000 * i, 2.0, window_ms=500)
            self.assertEqual(ans["status"], "PARTIAL")
            last = ans["waypoints"][-1]
            self.assertIsNone(last["t_leave_ms"])
            self.assertNotEqual((last["x"], last["y"]), wire.DOOR, ans)
            c.release_agent("door", 10 + i)
        self.assertEqual(table(self.c[0], "door"), table(self.c[1], "door"))

    def test_replicas_reserving_at_once(self):
        """Both replicas reserve in one scene at the same time, so their
        appends race (one is refused, catches up, plans again): still no
        two agents meet, and the tables agree."""
        rec = Recorder()
        cells = open_cells(1)
        errors, retried = [], [0]

        def drive(i):
            rng = random.Random(100 + i)
            c = PathdClient(self.d[i].addr, timeout=20)
            agents = [a for a in range(1, 17) if a % 2 == i]
            pos = {a: cells[(a * 3) % len(cells)] for a in agents}
            plan = {}
            try:
                for t in range(0, 10000, 250):
                    for a in agents:
                        if a in plan:
                            here = [w for w in plan[a] if w["t_arrive_ms"] <= t and
                                    (w["t_leave_ms"] is None or t < w["t_leave_ms"])]
                            if not here:
                                continue
                            pos[a] = (here[0]["x"], here[0]["y"])
                        goal = rng.choice(cells)
                        for _ in range(20):
                            try:
                                ans = c.reserve_path("cut", a, pos[a], goal, t, 4.0, window_ms=4000)
                                break
                            except PathdError as e:
                                ans = None
                                if e.status == "UNAVAILABLE":
                                    # the other replica kept appending first (a
                                    # loaded machine): retryable, as a client does
                                    retried[0] += 1
                                    time.sleep(0.01)
                                    continue
                                if e.status not in ("START_BLOCKED", "NO_PATH"):
                                    errors.append(e)
                                break
                        if ans is None:
                            continue
                        rec.plan(ans, 1, 4.0, t)
                        plan[a] = ans["waypoints"]
            finally:
                c.close()

        threads = [threading.Thread(target=drive, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        self.assertEqual(errors, [])
        self.assertGreater(rec.plans, 200)
        sys.stderr.write("both replicas at once: %d plans, %d UNAVAILABLE retried\n" % (rec.plans, retried[0]))
        rec.check(self)
        self.assertEqual(table(self.c[0], "cut"), table(self.c[1], "cut"))

    def test_scene_made_again_starts_empty_on_every_replica(self):
        with open(os.path.join(self.tmp.name, "r0", "door.txt"), "rb") as f:
            door = f.read()
        self.c[0].create_scene("made", map_bytes=door, format="ascii")
        self.c[0].reserve_path("made", 5, (1, 1), (1, 1), 0, 2.0)
        self.assertEqual(table(self.c[0], "made")["agents"], 1)
        self.c[0].drop_scene("made")
        self.c[0].create_scene("made", map_bytes=door, format="ascii")
        for c in self.c:
            c.scene_info("made", min_version=1)      # replica 1: once its tail has the scene
            self.assertEqual(table(c, "made")["agents"], 0)
        # The old agent's cell is free in the new scene, through either.
        self.assertEqual(self.c[1].reserve_path("made", 6, (1, 1), (2, 1), 10, 2.0)["status"], "OK")
        self.assertEqual(table(self.c[0], "made"), table(self.c[1], "made"))

    def test_cut_through_one_replica_seen_on_the_other(self):
        self.c[0].reserve_path("cut", 1, (1, 3), (10, 3), 0, 2.0, window_ms=60000)
        self.c[1].reserve_path("cut", 2, (1, 1), (3, 1), 0, 2.0, window_ms=60000)
        up = self.c[1].update_cells("cut", rect=((5, 3), (5, 3)), op="block", at_ms=1000)
        self.assertEqual(up["agents_cut"], [1])
        self.assertEqual(table(self.c[0], "cut"), table(self.c[1], "cut"))
        self.assertTrue(all(e[5] < 5000 for e in table(self.c[0], "cut")["entries"] if e[0] == 1))
        # The other replica tells the cut agent it was cut.
        ans = self.c[0].reserve_path("cut", 1, (3, 3), (3, 5), 2000, 2.0)
        self.assertTrue(ans["was_cut"])

    def test_cut_of_an_agent_only_the_other_replica_reserved(self):
        # Replica 1 has appended an update (its append named the
        # reservation stream's top then: none) and reserved nothing; an
        # agent reserved through replica 0 since must still be cut by
        # replica 1's next update (its append names the new top, so its
        # table is read up to it).
        first = self.c[1].update_cells("cut", cells=[(10, 5)], op="block")
        self.assertEqual((first["cells_changed"], first["agents_cut"]), (1, []))
        self.c[0].reserve_path("cut", 1, (1, 3), (10, 3), 0, 2.0, window_ms=60000)
        up = self.c[1].update_cells("cut", rect=((5, 3), (5, 3)), op="block", at_ms=1000)
        self.assertEqual(up["agents_cut"], [1])
        self.assertEqual(table(self.c[0], "cut"), table(self.c[1], "cut"))


class ReplicaClockTest(ReplicaBase):
    """The clock check on replicas: against the table caught up to the
    shared log, before the append; ReleaseAgent all through one replica is
    seen by the other, whose clock starts over too."""

    def test_release_all_seen_on_the_other_replica(self):
        watcher = PathdClient(self.d[1].addr, timeout=20)
        self.addCleanup(watcher.close)
        watcher.watch(["door"])
        self.assertEqual(watcher.watch_next(timeout=10)["kind"], "started")
        self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 500000, 2.0)
        self.c[1].reserve_path("door", 2, (10, 5), (10, 5), 500000, 2.0)
        # Refused on the replica that reserved nothing at that time either.
        for c, t0 in ((self.c[1], 2 ** 60), (self.c[0], 0)):
            with self.assertRaises(PathdError) as cm:
                c.reserve_path("door", 3, (1, 5), (1, 5), t0, 2.0)
            self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")
        self.assertEqual(table(self.c[1], "door")["agents"], 2)
        self.assertEqual(self.c[0].release_all("door"), 2)
        self.assertEqual(table(self.c[1], "door")["agents"], 0)
        # The clock from 0 on both.
        self.c[1].reserve_path("door", 5, (1, 1), (1, 1), 0, 2.0)
        self.c[0].reserve_path("door", 6, (10, 5), (10, 5), 100, 2.0)
        self.assertEqual(table(self.c[0], "door")["agents"], 2)
        self.assertEqual(table(self.c[0], "door"), table(self.c[1], "door"))
        # Watchers hear it only from the replica that released (a watcher
        # on the other one is told nothing: it applied a log entry).
        with self.assertRaises(PathdTimeout):
            watcher.watch_next(timeout=0.5)
        # A replica restarted reads the release from the log.
        before = table(self.c[0], "door")
        self.c[1].close()
        self.d[1].restart()
        self.c[1] = PathdClient(self.d[1].addr, timeout=20)
        self.addCleanup(self.c[1].close)
        self.assertEqual(table(self.c[1], "door"), before)

    def test_the_only_agent_restarts_its_clock_through_the_other_replica(self):
        """One NPC restarting its clock through the other replica than the
        one it reserved on: a fresh clock on both (decided by each table
        as it applies the log). The first replica's idle sweep, which last
        heard the old clock, expires nobody."""
        self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 500000, 2.0)
        self.c[1].reserve_path("door", 1, (1, 1), (1, 1), 0, 2.0)
        time.sleep(4 * TTL_MS / 16 / 1000)
        self.c[1].reserve_path("door", 2, (10, 5), (10, 5), 100, 2.0)
        got = table(self.c[0], "door")
        self.assertEqual({e[0] for e in got["entries"]}, {1, 2})
        self.assertEqual(got, table(self.c[1], "door"))
        with self.assertRaises(PathdError) as cm:
            self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 2 ** 60, 2.0)
        self.assertEqual(cm.exception.status, "INVALID_ARGUMENT")

    def test_expiry_runs_on_the_new_clock_of_another_replica(self):
        """A replica that reserved on the old clock kept its expiry's mark
        (the old clock's time) when another replica released every agent
        and reserved on a new clock below it: its ReservePaths never ran
        the expiry again until the new clock passed the old mark, and an
        agent the game had forgotten held its cells on every replica."""
        self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 10000000, 2.0)
        self.assertEqual(self.c[1].release_all("door"), 1)
        self.c[1].reserve_path("door", 2, (10, 5), (10, 5), 1000000, 2.0)
        # More than a TTL of game time after agent 2's renewal (far inside
        # a TTL of wall time: no idle sweep takes part).
        self.c[0].reserve_path("door", 3, (1, 5), (1, 5), 1000000 + TTL_MS + 5000, 2.0)
        got = table(self.c[0], "door")
        self.assertEqual({e[0] for e in got["entries"]}, {3})
        self.assertEqual(got, table(self.c[1], "door"))


class ReplicaClockSweepTest(ReplicaBase):
    """A replica's idle sweep estimates the game's time from the last t0_ms
    it heard itself: once the scene's clock started over (ReleaseAgent all)
    and another replica reserves from 0, that estimate is of the old clock
    and must not expire the new agents (TTL_MS, 20 s: the sweep every
    1.25 s; a legitimate expiry only 20 s after the last renewal)."""

    def test_old_clock_sweeps_no_new_agent(self):
        self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 500000, 2.0)
        self.assertEqual(self.c[0].release_all("door"), 1)
        self.c[1].reserve_path("door", 5, (10, 5), (10, 5), 0, 2.0)
        time.sleep(4 * TTL_MS / 16 / 1000)
        self.assertEqual(table(self.c[1], "door")["agents"], 1)
        self.assertEqual(table(self.c[0], "door"), table(self.c[1], "door"))


class ReplicaClockRestartTest(ReplicaBase):
    """Both replicas restarted (a deploy) while the game's clock ran on past
    max_clock_step_ms: the scene's clock, read back from the log, refuses
    the game's t0 until its stale agents expire - by the idle sweep, which
    times a table not heard since the start from its first refusal, as file
    mode times a replayed one from its restart. A refused t0 is no game
    time heard: the game retrying does not put the sweep off."""

    LIMITS = {"reservation_ttl_ms": 2000, "max_clock_step_ms": 10000, "max_reservation_window_ms": 60000}

    def test_stale_clock_after_restart_expires_while_the_game_retries(self):
        self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 100000, 2.0)
        for i in range(2):
            self.c[i].close()
            self.d[i].restart()
            self.c[i] = PathdClient(self.d[i].addr, timeout=20)
            self.addCleanup(self.c[i].close)
        refused, got = 0, None
        deadline = time.monotonic() + 30  # the TTL is 2 s of real time
        while got is None and time.monotonic() < deadline:
            try:
                got = self.c[0].reserve_path("door", 2, (10, 5), (10, 5), 200000, 2.0)
            except PathdError as e:
                self.assertEqual(e.status, "INVALID_ARGUMENT", e.message)
                self.assertIn("max_clock_step_ms", e.message)
                refused += 1
                time.sleep(0.05)  # more often than the sweep's 125 ms
        self.assertIsNotNone(got, "refused %d times in 30 s" % refused)
        self.assertGreater(refused, 0)
        self.assertEqual({e[0] for e in table(self.c[1], "door")["entries"]}, {2})


class ReplicaOldClockTest(ReplicaBase):
    """A table restored with a clock and no agent - an empty table's
    snapshot written before tables forgot their clock carried the old game
    time (here its CLOCK record, kind 10, as the scene's first stream entry)
    - has no clock: the first ReservePath of a game whose clock started over
    was expired by the expiry appended with it, reserved and lost at once."""

    def redis_raw(self, *args):
        """One command with binary arguments (RESP); the first line of the
        answer."""
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        with socket.create_connection(("127.0.0.1", self.redis_port), timeout=10) as s:
            s.sendall(out)
            return s.recv(4096).split(b"\r\n")[0]

    def test_restored_clock_of_an_empty_table_expires_nobody(self):
        payload = struct.pack("<BB", 10, len(b"door")) + b"door" + struct.pack("<qq", 1000000, 1000000)
        head = struct.pack("<I", len(payload))
        record = head + struct.pack("<I", zlib.crc32(head + payload)) + payload
        self.assertEqual(self.redis_raw("XADD", "pathd:{door}:resv", "0-1", "d", record), b"$3")
        self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 0, 2.0)
        self.c[1].reserve_path("door", 2, (10, 5), (10, 5), 100, 2.0)
        got = table(self.c[0], "door")
        self.assertEqual({e[0] for e in got["entries"]}, {1, 2})
        self.assertEqual(got, table(self.c[1], "door"))


class ReplicaLimitTest(ReplicaBase):
    LIMITS = {"reservation_ttl_ms": TTL_MS, "max_agents_per_scene": 2, "max_reservation_window_ms": 60000}

    def test_agent_limit_counts_the_other_replicas_agents(self):
        """max_agents_per_scene holds for the table all replicas share,
        checked after the replica read the others' agents."""
        self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 0, 2.0)
        self.c[1].reserve_path("door", 2, (10, 1), (10, 1), 0, 2.0)
        for c in self.c:
            with self.assertRaises(PathdError) as cm:
                c.reserve_path("door", 3, (1, 5), (1, 5), 0, 2.0)
            self.assertEqual(cm.exception.status, "LIMIT_EXCEEDED")
            self.assertIn("limits.max_agents_per_scene", cm.exception.message)
        self.assertEqual(table(self.c[0], "door")["agents"], 2)
        self.assertEqual(table(self.c[0], "door"), table(self.c[1], "door"))


class ReplicaExpiryTest(ReplicaBase):
    """reservation_ttl_ms's idle sweep on a replica appends its expiry to
    the scene's reservation stream (it never changes the table alone):
    the other replica, which reserved nothing there, serves it too."""

    LIMITS = {"reservation_ttl_ms": 2000, "max_reservation_window_ms": 60000}

    def test_idle_sweep_through_the_log(self):
        self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 0, 2.0)
        self.c[0].reserve_path("door", 2, (10, 5), (10, 5), 0, 2.0)
        self.assertEqual(table(self.c[1], "door")["agents"], 2)
        deadline = time.monotonic() + 15
        while table(self.c[1], "door")["agents"] and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(table(self.c[1], "door")["agents"], 0)
        self.assertEqual(table(self.c[0], "door"), table(self.c[1], "door"))

    def test_reserve_path_expiry_tells_watchers(self):
        """The expiry a ReservePath's entry carries, told by the replica
        that appended it (the requester renewed by that entry not listed)."""
        expire_by_reserve_path(self, self.c[0], self.c[1], self.d[0], scene="door")

    def test_sweep_tells_watchers(self):
        """The replica whose sweep appended the expiry tells its watchers
        the agents it released (AGENTS_EXPIRED), listed from the table as
        the log had it: agents another replica reserved too. Both replicas
        sweep on their own timers and the first to append wins, so a
        watcher on each: exactly one of them is told, once."""
        watchers = []
        for d in self.d:
            w = PathdClient(d.addr, timeout=20)
            self.addCleanup(w.close)
            w.watch(["door"])
            self.assertEqual(w.watch_next(timeout=10)["kind"], "started")
            watchers.append(w)
        self.c[0].reserve_path("door", 4, (1, 1), (1, 1), 0, 2.0)
        self.c[1].reserve_path("door", 9, (10, 5), (10, 5), 0, 2.0)
        told = []
        deadline = time.monotonic() + 15
        while not told and time.monotonic() < deadline:
            for i, w in enumerate(watchers):
                try:
                    ev = w.watch_next(timeout=0.2)
                except PathdTimeout:
                    continue
                told.append((i, ev["kind"], ev["agents"]))
        self.assertEqual(len(told), 1, told)
        self.assertEqual(told[0][1:], ("agents_expired", [4, 9]))
        self.assertEqual(table(self.c[0], "door")["agents"], 0)
        # The other replica's sweep found nothing left to release: no
        # second event on either watcher.
        for w in watchers:
            with self.assertRaises(PathdTimeout):
                w.watch_next(timeout=0.5)


class ReplicaIdleTest(ReplicaBase):
    """An idle scene's sweep that would release nothing and collect nothing
    appends nothing: agents parked within the TTL (TTL_MS, the sweep every
    1/16 of it, 1.25 s) did cost every replica an entry per sweep, forever,
    and a replica behind read them all."""

    def test_idle_sweep_with_nothing_to_expire_logs_nothing(self):
        self.c[0].reserve_path("door", 1, (1, 1), (1, 1), 0, 2.0)
        self.c[1].reserve_path("door", 2, (10, 5), (10, 5), 0, 2.0)
        before = int(self.redis_cli("XLEN", "pathd:{door}:resv"))
        # two sweep intervals and more, far inside the TTL (20 s of game
        # time go by only after 20 s of wall clock)
        time.sleep(4 * TTL_MS / 16 / 1000)
        self.assertEqual(int(self.redis_cli("XLEN", "pathd:{door}:resv")), before)
        self.assertEqual(table(self.c[0], "door")["agents"], 2)
        self.assertEqual(table(self.c[0], "door"), table(self.c[1], "door"))


# pd_reserve_shared.h's PD_RESERVE_SHARED_SNAPSHOT_EVERY: entries between
# two snapshots of a scene's reservation table (and trims of its stream).
SNAPSHOT_EVERY = 4096


class ReplicaTrimTest(ReplicaBase):
    """The reservation stream is trimmed below a table snapshot, and every
    replica still makes the same table: one whose position the trim passed,
    and one restarted with nothing of its own."""

    # A TTL no run of these tests comes near in real time: replica 1 parks
    # agent 99 at t0 0 and then reserves nothing while replica 0 appends
    # thousands of entries, so replica 1's idle sweep (its game clock run
    # on with real time) would expire agent 99 - one entry more than
    # test_trim_at_the_top_leaves_a_replica_behind_serving counts - once
    # that took longer than the TTL (TTL_MS, 20 s: on a loaded machine,
    # 4097 != 4096 about one run in five; with 2 s, every other run).
    LIMITS = {"reservation_ttl_ms": 3600000, "max_agents_per_scene": 64, "max_reservation_window_ms": 60000}

    def test_stream_trimmed_below_snapshot(self):
        # Parked through replica 1, which then reads nothing for a while:
        # its table stays at the first entries.
        self.c[1].reserve_path("door", 99, (10, 5), (10, 5), 0, 2.0)
        cycles = SNAPSHOT_EVERY // 2 + 60
        for i in range(cycles):      # two entries each: the plan, the release
            self.assertIn(self.c[0].reserve_path("door", 1, (1, 1), (3, 1), 100, 2.0)["status"], ("OK", "PARTIAL"))
            self.assertTrue(self.c[0].release_agent("door", 1))
        self.c[0].reserve_path("door", 2, (1, 5), (1, 5), 100, 2.0)
        entries = 2 * cycles + 2
        # Redis: a snapshot at the interval, the stream after it only.
        self.assertEqual(self.redis_cli("HGET", "pathd:{door}:resvsnap", "rv").strip(), str(SNAPSHOT_EVERY))
        # (an idle sweep of either replica may have appended one or two)
        xlen = int(self.redis_cli("XLEN", "pathd:{door}:resv"))
        self.assertGreaterEqual(xlen, entries - SNAPSHOT_EVERY)
        self.assertLessEqual(xlen, entries - SNAPSHOT_EVERY + 4)
        first = self.redis_cli("XRANGE", "pathd:{door}:resv", "-", "+", "COUNT", 1).split()[0]
        self.assertEqual(first, "0-%d" % SNAPSHOT_EVERY)   # the snapshot's own entry stays
        # Replica 1's table was at entry 1: the trim passed it.
        want = table(self.c[0], "door")
        self.assertEqual(want["agents"], 2)
        self.assertEqual(table(self.c[1], "door"), want)
        # A restart (nothing local: tables live in memory) reads the same.
        self.c[1].close()
        self.d[1].restart()
        self.c[1] = PathdClient(self.d[1].addr, timeout=20)
        self.addCleanup(self.c[1].close)
        self.assertEqual(table(self.c[1], "door"), want)
        # The parked agents still block a start through it, and it appends
        # on after the snapshot.
        with self.assertRaises(PathdError) as cm:
            self.c[1].reserve_path("door", 3, (10, 5), (1, 3), 200, 2.0)
        self.assertEqual(cm.exception.status, "START_BLOCKED")
        self.assertEqual(cm.exception.result["blocking_agent"], 99)
        self.assertTrue(self.c[1].release_agent("door", 99))
        self.assertEqual(table(self.c[0], "door"), table(self.c[1], "door"))


    def test_trim_at_the_top_leaves_a_replica_behind_serving(self):
        """The entry that makes the snapshot is the stream's last: the trim
        must not leave the stream empty, or a replica behind it reads
        nothing, takes itself as caught up, and every append it makes
        loses the compare-and-set (UNAVAILABLE until another replica
        appends)."""
        self.c[1].reserve_path("door", 99, (10, 5), (10, 5), 0, 2.0)

        def top():
            info = self.redis_cli("XINFO", "STREAM", "pathd:{door}:resv").split("\n")
            return int(info[info.index("last-generated-id") + 1].split("-")[1])

        # Two entries a cycle, quickly: as many cycles as cannot pass
        # SNAPSHOT_EVERY - 8 before asking Redis again (a redis-cli per
        # cycle made this test take minutes on a loaded machine).
        while top() < SNAPSHOT_EVERY - 8:
            for _ in range(max(1, (SNAPSHOT_EVERY - 8 - top()) // 2)):
                self.c[0].reserve_path("door", 1, (1, 1), (3, 1), 100, 2.0)
                self.assertTrue(self.c[0].release_agent("door", 1))
        reserved = False
        while top() < SNAPSHOT_EVERY:
            # one entry at a time up to the snapshot's
            if reserved:
                self.assertTrue(self.c[0].release_agent("door", 1))
            else:
                self.c[0].reserve_path("door", 1, (1, 1), (3, 1), 100, 2.0)
            reserved = not reserved
        # (no sweep appends meanwhile: the game clock stays near t0 100,
        # and replica 1's idle one far inside the class's TTL, so the
        # snapshot's entry is the last)
        self.assertEqual(top(), SNAPSHOT_EVERY)
        self.assertEqual(self.redis_cli("HGET", "pathd:{door}:resvsnap", "rv").strip(), str(SNAPSHOT_EVERY))
        # Replica 1 is at entry 1: it reserves through the log at once.
        r = self.c[1].reserve_path("door", 5, (1, 5), (1, 5), 200, 2.0)
        self.assertIn(r["status"], ("OK", "PARTIAL"))
        self.assertEqual(int(self.redis_cli("XLEN", "pathd:{door}:resv")), 2)   # the snapshot's, replica 1's
        self.assertEqual(table(self.c[1], "door"), table(self.c[0], "door"))


class ReplicaReloadTest(ReplicaBase):
    """A reload that stops serving a scene RESETs its reservation stream,
    as DropScene does: made again under the name, it has no agents on any
    replica."""

    SCENES = ["door", "cut", "gone"]

    def test_scene_removed_by_reload_made_again_starts_empty(self):
        self.c[0].reserve_path("gone", 5, (1, 1), (1, 1), 0, 2.0)
        self.c[1].reserve_path("gone", 6, (10, 5), (10, 5), 0, 2.0)
        self.assertEqual(table(self.c[1], "gone")["agents"], 2)
        # Every replica's config without "gone", and every replica reloads
        # (a config scene never updated has no record in the log to drop:
        # each replica stops serving it at its own reload).
        for d in self.d:
            with open(d.config) as f:
                conf = json.load(f)
            conf["scenes"] = [sc for sc in conf["scenes"] if sc["name"] != "gone"]
            with open(d.config, "w") as f:
                json.dump(conf, f)
        for d in self.d:
            d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 15
        for c in self.c:
            while True:
                try:
                    c.scene_info("gone")
                except PathdError as e:
                    self.assertEqual(e.status, "UNKNOWN_SCENE")
                    break
                self.assertLess(time.monotonic(), deadline,
                                "the reload's drop was not served:\n" + self.d[0].log_text() + self.d[1].log_text())
                time.sleep(0.05)
        with open(os.path.join(self.tmp.name, "r0", "door.txt"), "rb") as f:
            door = f.read()
        self.c[0].create_scene("gone", map_bytes=door, format="ascii")
        for c in self.c:
            c.scene_info("gone", min_version=1)
            self.assertEqual(table(c, "gone")["agents"], 0)
        # The old agents' cells are free in the new scene.
        self.assertEqual(self.c[1].reserve_path("gone", 7, (1, 1), (2, 1), 10, 2.0)["status"], "OK")
        self.assertEqual(self.c[0].reserve_path("gone", 8, (10, 5), (9, 5), 10, 2.0)["status"], "OK")
        self.assertEqual(table(self.c[0], "gone"), table(self.c[1], "gone"))


if __name__ == "__main__":
    unittest.main()
