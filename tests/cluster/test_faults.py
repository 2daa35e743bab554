#!/usr/bin/env python3
"""test_faults.py - a fault run of the replicated cluster on loopback (issue 32, "Tests").

scripts/cluster.sh brings up Redis, HAProxy and three pathd replicas. Four
client threads (pathd_client.PathdClient through HAProxy, reconnect on,
an idempotency key on every update) send a bounded mix for about 30 s on
two small scenes (house, cellar): FindPath, Raycast and ~15% UpdateCells,
each update flipping one cell that only its thread touches (so every update
changes exactly one cell and the thread knows what it must be), and about
half the queries carry min_version = the thread's last acknowledged version
of that scene (read-your-writes through whichever replica HAProxy picks).
Every request and answer is recorded. Meanwhile the driver:

  - kill -9 of replica1, then `cluster.sh start-replica 1`;
  - SIGSTOP of replica2 for 5 s, then SIGCONT;
  - kill -9 of Redis, then `cluster.sh start-redis`.

Then a checker that shares no code with the server (its own RESP reader,
journal record decoder and Dijkstra) requires:

  - every acknowledged update in its scene's Stream (XRANGE
    PREFIX:{NAME}:log) exactly once, at its version, with its content (the
    journal record: op and cell), the versions dense, nothing in the Stream
    that was not acknowledged;
  - every path legal (walkable cells, adjacent steps, no corner cutting,
    from start to goal) and optimal on the grid of the version it reports
    (the first grid, read before the load, plus the acknowledged updates up
    to that version in order), every NO_PATH right at its version, and no
    answer below its request's min_version or past the last version
    (Raycast answers are checked for their status and version only: their
    exact fixed-point ray is not recomputed here);
  - every request answered (after the client's own retries);
  - every replica, asked through its own port with min_version = the last
    version, at that version with the cells the updates give.

It prints the counts and each fault's time to recovery (to the first OK
answer after it, to the first acknowledged update after it, to HAProxy
marking the replica UP again): the figures of docs/OPERATIONS.md.

Bounded: the load stops by itself, every wait has a deadline, and the
cluster is taken down whatever happens.

    test_faults.py CLUSTER_SH PATHD_BIN  (pathd_pb2 and pathd_client on PYTHONPATH)
"""
import faulthandler
import heapq
import math
import os
import random
import signal
import socket
import struct
import sys
import tempfile
import threading
import time

import pathd_client as pc
# cluster_loopback's helpers: free_base (a free block of cluster.sh's
# ports), run (cluster.sh with --dir tc.DIR), wait_for (a bounded poll).
import test_cluster as tc
from test_cluster import free_base, wait_for

CLUSTER_SH, PATHD = sys.argv[1], sys.argv[2]   # test_cluster reads them the same way
SCENES = ("house", "cellar")
PREFIX = "pathd"            # deploy/cluster/replica1.json's log.prefix
THREADS = 4
LOAD_S = 30.0
UPDATE_SHARE = 0.15
OWNED_PER_THREAD = 3         # cells per scene each thread flips
PACE_S = 0.015               # a thread's pause between requests: bounded load, and a checker
                             # (a Dijkstra in Python per path) that finishes in seconds
SQRT2 = math.sqrt(2.0)
J_UPDATE, OP_BLOCK, OP_PASS = 4, 0, 1   # pd_journal.h, pd_scene.h (the wire's numbers too)


def run(*args, check=True):
    return tc.run(*args, check=check)


def pids():
    r = run("status", check=False)
    return {l.split()[0]: l.split()[1] for l in r.stdout.splitlines()}


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def haproxy_status():
    """{replicaN: status} from HAProxy's stats socket ({} when it does not answer)."""
    r = run("haproxy", "show stat", check=False)
    lines = r.stdout.splitlines()
    if r.returncode != 0 or not lines:
        return {}
    head = lines[0].lstrip("# ").split(",")
    out = {}
    for line in lines[1:]:
        row = dict(zip(head, line.split(",")))
        if row.get("pxname") == "replicas" and row.get("svname", "").startswith("replica"):
            out[row["svname"]] = row["status"]
    return out


# ---- Redis: a small RESP reader of its own ---------------------------------------

def resp_command(port, *args):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(out)
        f = s.makefile("rb")
        return resp_read(f)


def resp_read(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise AssertionError(f"redis: {rest.decode()}")
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [resp_read(f) for _ in range(n)]
    raise AssertionError(f"redis: unexpected reply {line!r}")


def decode_record(r):
    """The journal's record payload (server/scene/pd_journal.c,
    pd_journal_encode, less its 8-byte length and checksum header, which
    the Stream does not keep), read independently: (type, scene, version,
    ops) with ops [(op, cost, cells)] for an update, cells a tuple of (x, y)
    or ("rect", (x0, y0, x1, y1))."""
    p = 0
    rtype = r[p]
    n = r[p + 1]
    scene = r[p + 2:p + 2 + n].decode()
    p += 2 + n
    (version,) = struct.unpack_from("<Q", r, p)
    p += 8
    ops = []
    if rtype == J_UPDATE:
        nops = r[p]
        p += 1
        for _ in range(nops):
            op, cost, is_rect = r[p], r[p + 1], r[p + 2]
            p += 3
            if is_rect:
                ops.append((op, cost, ("rect", struct.unpack_from("<4i", r, p))))
                p += 16
            else:
                (nc,) = struct.unpack_from("<I", r, p)
                p += 4
                cells = [struct.unpack_from("<ii", r, p + 8 * i) for i in range(nc)]
                p += 8 * nc
                ops.append((op, cost, tuple(cells)))
        assert p == len(r), f"update record of {len(r)} bytes, {p} read"
    return rtype, scene, version, ops


def read_stream(redis_port, scene):
    """[(entry id, {field: bytes})] of the scene's Stream, all of it."""
    entries = resp_command(redis_port, "XRANGE", f"{PREFIX}:{{{scene}}}:log", "-", "+")
    out = []
    for eid, fields in entries:
        out.append((eid.decode(), {fields[i].decode(): fields[i + 1] for i in range(0, len(fields), 2)}))
    return out


# ---- grids and an independent search ---------------------------------------------

class Grid:
    def __init__(self, width, height, cells):
        self.w, self.h, self.c = width, height, bytearray(cells)

    def cost(self, x, y):
        return self.c[y * self.w + x] if 0 <= x < self.w and 0 <= y < self.h else 0

    def set(self, x, y, v):
        self.c[y * self.w + x] = v

    def step_cost(self, a, b):
        """The cost of the move a -> b (8-connected, no corner cutting), None if illegal."""
        dx, dy = b[0] - a[0], b[1] - a[1]
        if max(abs(dx), abs(dy)) != 1 or not self.cost(*b):
            return None
        if dx and dy:
            if not (self.cost(a[0] + dx, a[1]) and self.cost(a[0], a[1] + dy)):
                return None
            return SQRT2 * self.cost(*b)
        return 1.0 * self.cost(*b)

    def shortest(self, start, goal):
        """Dijkstra's cost from start to goal (None when unreachable)."""
        if not self.cost(*start) or not self.cost(*goal):
            return None
        dist = {start: 0.0}
        heap = [(0.0, start)]
        while heap:
            d, a = heapq.heappop(heap)
            if a == goal:
                return d
            if d > dist[a]:
                continue
            for dx in (-1, 0, 1):
                for dy in (-1, 0, 1):
                    b = (a[0] + dx, a[1] + dy)
                    c = self.step_cost(a, b) if (dx or dy) else None
                    if c is not None and d + c < dist.get(b, math.inf) - 1e-12:
                        dist[b] = d + c
                        heapq.heappush(heap, (d + c, b))
        return None


# ---- the load --------------------------------------------------------------------

class Worker(threading.Thread):
    def __init__(self, idx, front, owned, ends, stop, log, lock):
        super().__init__(daemon=True)
        self.idx, self.front, self.owned, self.ends = idx, front, owned, ends
        self.stop, self.log, self.lock = stop, log, lock
        self.rng = random.Random(1000 + idx)
        self.state = {s: {c: True for c in owned[s]} for s in SCENES}   # True: passable
        self.acked = {s: 0 for s in SCENES}
        self.client = None
        self.n = 0

    def record(self, rec):
        with self.lock:
            self.log.append(rec)

    def one(self):
        scene = self.rng.choice(SCENES)
        roll = self.rng.random()
        self.n += 1
        rec = {"thread": self.idx, "n": self.n, "scene": scene, "t_send": time.monotonic()}
        mv = self.acked[scene] if self.rng.random() < 0.5 else 0
        try:
            if roll < UPDATE_SHARE:
                cell = self.rng.choice(self.owned[scene])
                op = "block" if self.state[scene][cell] else "pass"
                key = f"faults-{self.idx}-{self.n}-{self.rng.getrandbits(32):08x}"
                rec.update(kind="update", cell=cell, op=op, key=key)
                a = self.client.update_cells(scene, cells=[cell], op=op, idempotency_key=key)
                rec.update(status=a["status"], version=a["version"], changed=a["cells_changed"])
                self.state[scene][cell] = op == "pass"
                self.acked[scene] = max(self.acked[scene], a["version"])
            elif roll < 0.6:
                start, goal = self.rng.sample(self.ends[scene], 2)
                rec.update(kind="path", start=start, goal=goal, min_version=mv)
                try:
                    p = self.client.find_path(scene, start, goal, min_version=mv)
                    rec.update(status=p.status, version=p.version, cost=p.cost,
                               waypoints=[tuple(w) for w in p.waypoints])
                except pc.PathdError as e:
                    if e.status != "NO_PATH" or isinstance(e, (pc.PathdDisconnected, pc.PathdTimeout)):
                        raise
                    rec.update(status="NO_PATH", version=e.result.version if e.result else 0)
            else:
                frm, to = self.rng.sample(self.ends[scene], 2)
                rec.update(kind="raycast", start=frm, goal=to, min_version=mv)
                a = self.client.raycast(scene, frm, to, min_version=mv)
                rec.update(status=a["status"], version=a["version"], clear=a["clear"])
        except pc.PathdError as e:
            rec.update(status=f"{type(e).__name__}:{e.status}", message=str(e))
        rec["t_answer"] = time.monotonic()
        self.record(rec)

    def run(self):
        self.client = pc.PathdClient(f"127.0.0.1:{self.front}", timeout=15.0, retry_attempts=60,
                                     retry_deadline=20.0, reconnect=True)
        try:
            while not self.stop.is_set():
                self.one()
                self.stop.wait(PACE_S)
        finally:
            self.client.close()


def main():
    base = BASE
    front, redis_port = base, base + 1
    r = run("up", "--replicas", "3", "--base-port", str(base), "--pathd", PATHD)
    print(r.stdout.strip())
    wait_for("HAProxy to mark the three replicas UP",
             lambda: sorted(haproxy_status().values()) == ["UP"] * 3)

    # The first grids, from replica1 before any load.
    first = {}
    with pc.PathdClient(f"127.0.0.1:{base + 10}", timeout=10.0) as c:
        for s in SCENES:
            g = c.scene_grid(s)
            first[s] = (g["version"], Grid(g["width"], g["height"], g["cells"]))
    # Each thread's own cells (floor, cost 1) and the end points nobody flips.
    rng = random.Random(7)
    owned = [{} for _ in range(THREADS)]
    ends = {}
    for s in SCENES:
        g = first[s][1]
        floor = [(x, y) for y in range(g.h) for x in range(g.w) if g.cost(x, y) == 1]
        rng.shuffle(floor)
        for t in range(THREADS):
            owned[t][s] = floor[t * OWNED_PER_THREAD:(t + 1) * OWNED_PER_THREAD]
        ends[s] = floor[THREADS * OWNED_PER_THREAD:]

    stop = threading.Event()
    log, lock = [], threading.Lock()
    workers = [Worker(i, front, owned[i], ends, stop, log, lock) for i in range(THREADS)]
    t0 = time.monotonic()
    for w in workers:
        w.start()
    faults = {}
    print(f"load: {THREADS} threads through HAProxy on {front}", flush=True)

    def up_again(name, since):
        wait_for(f"HAProxy to mark {name} UP", lambda: haproxy_status().get(name) == "UP", timeout=30)
        return time.monotonic() - since

    # kill -9 of replica1, then start-replica 1.
    time.sleep(4)
    pid = pids()["replica1"]
    tk = time.monotonic()
    os.kill(int(pid), signal.SIGKILL)
    wait_for("replica1 to die", lambda: gone(pid))
    print("fault: kill -9 replica1", flush=True)
    run("start-replica", "1")
    restarted = time.monotonic() - tk
    faults["kill -9 replica1"] = {"at": tk, "until": tk + restarted, "restarted_s": restarted, "haproxy_up_s": up_again("replica1", tk)}

    # SIGSTOP of replica2 for 5 s.
    time.sleep(2)
    pid = int(pids()["replica2"])
    ts = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    print("fault: SIGSTOP replica2", flush=True)
    seen = set()
    while time.monotonic() - ts < 5.0:
        seen.add(haproxy_status().get("replica2", "?"))
        time.sleep(0.2)
    os.kill(pid, signal.SIGCONT)
    t_cont = time.monotonic()
    faults["SIGSTOP replica2 5 s"] = {"at": ts, "until": t_cont, "haproxy_seen": sorted(seen),
                                      "haproxy_up_after_cont_s": up_again("replica2", t_cont)}

    # kill -9 of Redis, then start-redis.
    time.sleep(2)
    pid = pids()["redis"]
    tr = time.monotonic()
    os.kill(int(pid), signal.SIGKILL)
    print("fault: kill -9 redis", flush=True)
    wait_for("redis to die", lambda: gone(pid))
    run("start-redis")
    faults["kill -9 redis"] = {"at": tr, "until": time.monotonic(), "restarted_s": time.monotonic() - tr}

    # The rest of the load, then stop.
    time.sleep(max(3.0, LOAD_S - (time.monotonic() - t0)))
    stop.set()
    print("load: stopping", flush=True)
    for w in workers:
        w.join(timeout=40)
        assert not w.is_alive(), f"thread {w.idx} did not stop"
    load_s = time.monotonic() - t0
    stats = {"retries": {}, "reconnects": 0, "resent": 0}
    for w in workers:
        stats["reconnects"] += w.client.reconnects
        stats["resent"] += w.client.resent
        for k, v in w.client.retries.items():
            stats["retries"][k] = stats["retries"].get(k, 0) + v

    failures = check(log, first, redis_port, base, faults)
    print(f"load: {len(log)} requests in {load_s:.1f} s from {THREADS} threads; client reconnects "
          f"{stats['reconnects']}, resent {stats['resent']}, retries {stats['retries']}")
    if failures:
        for f in failures[:40]:
            print("FAIL:", f)
        raise AssertionError(f"{len(failures)} check(s) failed")

    run("down")
    tc.assert_clean_logs(("replica1", "replica2", "replica3"))


def check(log, first, redis_port, base, faults):
    """The checker: returns the list of failures (and prints the counts)."""
    failures = []
    counts = dict(requests=len(log), answers=0, updates_acked=0, duplicates=0, missing=0,
                  wrong_content=0, unacknowledged_in_stream=0, gaps=0, paths=0, no_path=0,
                  raycasts=0, illegal=0, non_optimal=0, below_min_version=0, beyond_last=0,
                  unanswered=0, min_version_sent=0)
    answered = [r for r in log if r.get("status") in ("OK", "NO_PATH", "PARTIAL")]
    counts["answers"] = len(answered)
    for r in log:
        if r.get("status") not in ("OK", "NO_PATH", "PARTIAL"):
            counts["unanswered"] += 1
            failures.append(f"not answered: {r['kind']} {r['scene']} -> {r.get('status')} {r.get('message', '')}")

    # The Stream against the acknowledged updates.
    grids, last = {}, {}
    for s in SCENES:
        v0, g0 = first[s]
        acks = sorted((r for r in answered if r["kind"] == "update" and r["scene"] == s), key=lambda r: r["version"])
        counts["updates_acked"] += len(acks)
        by_version = {}
        for r in acks:
            by_version.setdefault(r["version"], []).append(r)
        for v, rs in by_version.items():
            if len(rs) > 1:
                counts["duplicates"] += len(rs) - 1
                failures.append(f"{s}: {len(rs)} acknowledged updates at version {v}: {[x['key'] for x in rs]}")
        stream = {}
        for eid, fields in read_stream(redis_port, s):
            rtype, scene, version, ops = decode_record(fields["r"])
            v = int(fields["v"])
            if v != version or scene != s:
                failures.append(f"{s}: stream entry {eid} says v {v}, its record {scene} v {version}")
            if rtype == J_UPDATE:
                stream.setdefault(v, []).append((eid, ops))
        for v, es in stream.items():
            if len(es) > 1:
                counts["duplicates"] += len(es) - 1
                failures.append(f"{s}: version {v} {len(es)} times in the stream: {[e[0] for e in es]}")
            if v > v0 and v not in by_version:
                counts["unacknowledged_in_stream"] += 1
                failures.append(f"{s}: stream holds version {v}, which no answer acknowledged")
        for v, rs in by_version.items():
            r = rs[0]
            if v not in stream:
                counts["missing"] += 1
                failures.append(f"{s}: acknowledged update {r['key']} at version {v} is not in the stream")
                continue
            want = [(OP_BLOCK if r["op"] == "block" else OP_PASS, 0, (tuple(r["cell"]),))]
            got = [(op, cost, cells) for op, cost, cells in stream[v][0][1]]
            if got != want:
                counts["wrong_content"] += 1
                failures.append(f"{s}: version {v} in the stream is {got}, the acknowledged update {want}")
        vmax = max(by_version, default=v0)
        gaps = sorted(set(range(v0 + 1, vmax + 1)) - set(by_version))
        if gaps:
            counts["gaps"] += len(gaps)
            failures.append(f"{s}: versions {gaps[:10]} between {v0} and {vmax} were never acknowledged")
        # Each version's grid, from the first and the updates in order.
        g = Grid(g0.w, g0.h, g0.c)
        grids[s] = {v0: Grid(g.w, g.h, g.c)}
        for v in range(v0 + 1, vmax + 1):
            for r in by_version.get(v, [])[:1]:
                g.set(*r["cell"], 0 if r["op"] == "block" else 1)
            grids[s][v] = Grid(g.w, g.h, g.c)
        last[s] = vmax

    # Every answer at a version it may report, paths legal and optimal there.
    memo = {}
    for r in answered:
        if r["kind"] == "update":
            continue
        s, v = r["scene"], r["version"]
        if r.get("min_version"):
            counts["min_version_sent"] += 1
        if v < r.get("min_version", 0):
            counts["below_min_version"] += 1
            failures.append(f"{r['kind']} {s} answered at version {v} below its min_version {r['min_version']}")
        if v not in grids[s]:
            counts["beyond_last"] += 1
            failures.append(f"{r['kind']} {s} answered at version {v}, outside {min(grids[s])}..{last[s]}")
            continue
        if r["kind"] == "raycast":
            counts["raycasts"] += 1
            continue
        g = grids[s][v]
        start, goal = tuple(r["start"]), tuple(r["goal"])
        key = (s, v, start, goal)
        if key not in memo:
            memo[key] = g.shortest(start, goal)
        best = memo[key]
        if r["status"] == "NO_PATH":
            counts["no_path"] += 1
            if best is not None:
                counts["non_optimal"] += 1
                failures.append(f"path {s}@{v} {start}->{goal}: NO_PATH, but one of cost {best:.4f} exists")
            continue
        counts["paths"] += 1
        wp = r["waypoints"]
        cost, legal = 0.0, bool(wp) and wp[0] == start and wp[-1] == goal and g.cost(*start) > 0
        for a, b in zip(wp, wp[1:]):
            c = g.step_cost(a, b)
            if c is None:
                legal = False
                break
            cost += c
        if not legal:
            counts["illegal"] += 1
            failures.append(f"path {s}@{v} {start}->{goal} is illegal there: {wp}")
        elif best is None or abs(cost - best) > 1e-6 * max(1.0, best) or abs(r["cost"] - best) > 1e-3 * max(1.0, best):
            counts["non_optimal"] += 1
            failures.append(f"path {s}@{v} {start}->{goal}: cost {cost:.4f} (says {r['cost']:.4f}), best {best}")

    # Every replica at the last version with the same cells.
    agree = 0
    for i in (1, 2, 3):
        ok = True
        with pc.PathdClient(f"127.0.0.1:{base + 10 * i}", timeout=10.0, retry_attempts=20,
                            retry_deadline=10.0) as c:
            for s in SCENES:
                try:
                    info = c.scene_info(s, min_version=last[s])
                    g = c.scene_grid(s)
                except pc.PathdError as e:
                    failures.append(f"replica{i} {s}: {e.status} {e}")
                    ok = False
                    continue
                if info.version != last[s] or g["version"] != last[s]:
                    failures.append(f"replica{i} {s}: at version {info.version}/{g['version']}, last {last[s]}")
                    ok = False
                elif bytes(g["cells"]) != bytes(grids[s][last[s]].c):
                    diff = sum(1 for a, b in zip(g["cells"], grids[s][last[s]].c) if a != b)
                    failures.append(f"replica{i} {s}: {diff} cells differ from the acknowledged updates")
                    ok = False
        agree += ok
    counts["replicas_agreeing"] = f"{agree}/3"
    counts["last_versions"] = last

    print("checker: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    # Times to recovery.
    for name, f in faults.items():
        after = [r for r in answered if r["t_answer"] > f["at"]]
        first_ok = min((r["t_answer"] for r in after), default=None)
        first_upd = min((r["t_answer"] for r in after if r["kind"] == "update"), default=None)
        # The requests owed an answer at the fault or sent while it lasted
        # (until the restart, or the SIGCONT): how long the slowest of them
        # waited for its answer (the client's retries and resends included).
        slowest = max((r["t_answer"] - r["t_send"] for r in answered
                       if r["t_send"] <= f["until"] and r["t_answer"] >= f["at"]), default=0.0)
        parts = [f"first OK answer after it {first_ok - f['at']:.3f} s" if first_ok else "no OK answer after it",
                 f"first acknowledged update {first_upd - f['at']:.3f} s" if first_upd else "no update after it",
                 f"slowest answer to a request sent before it ended {slowest:.2f} s"]
        parts += [f"{k} {v:.2f} s" if isinstance(v, float) else f"{k} {v}" for k, v in f.items() if k not in ("at", "until")]
        print(f"recovery, {name}: " + "; ".join(parts))
    return failures


if __name__ == "__main__":
    # kill -USR1 of a run that seems stuck prints where each thread is.
    faulthandler.register(signal.SIGUSR1)
    BASE = free_base()
    DIR = tc.DIR = tempfile.mkdtemp(prefix="pathd-faults-")
    ok = False
    try:
        main()
        ok = True
        print("test_faults: PASS")
    finally:
        tc.finish(ok, ("haproxy", "redis", "replica1", "replica2", "replica3"))
