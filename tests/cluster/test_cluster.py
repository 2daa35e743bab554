#!/usr/bin/env python3
"""test_cluster.py - scripts/cluster.sh on loopback, end to end (issue 32).

Brings up Redis, HAProxy and two pathd replicas with the configs of
deploy/cluster/, and checks what the deployment promises:

- `status` lists the four processes, `NAME PID HOST:PORT`;
- through HAProxy: Ping answers SERVING (the health check's bytes), FindPath
  answers, an UpdateCells is answered with its version;
- an update through replica1's own port, then GetSceneInfo with min_version
  and GetSceneGrid on replica2's own port: replica2 has it (read-your-writes
  while both run);
- drain (SIGUSR1 to replica1): its agent-check port says "drain", its open
  connection gets one unsolicited DRAINING frame (id 0) and a new request
  there is answered DRAINING while Ping says DRAINING_STATE, HAProxy puts
  it in DRAIN and sends every new connection to replica2 (its stats
  socket's session totals), the connection on replica2 hears nothing; ready
  (SIGUSR2) brings it back;
- kill -9 of replica2: status says it is gone, HAProxy marks it DOWN and
  still serves; start-replica 2 brings it back, replayed from the Redis log
  (it has the update made through HAProxy);
- add-replica: replica3 starts, replays the log, and HAProxy (told through
  its admin socket) marks it UP;
- kill -9 of Redis: an update is answered UNAVAILABLE (nothing changed),
  queries go on; start-redis, and the same update goes through;
- kill -9 of HAProxy: its connections close; start-haproxy serves again;
- `down` leaves none of the processes.

Bounded: every wait has a deadline, and the cluster is taken down (or its
processes killed) whatever happens.

    test_cluster.py CLUSTER_SH PATHD_BIN     (pathd_pb2 on PYTHONPATH)
"""
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pathd_pb2 as pb

CLUSTER_SH, PATHD = sys.argv[1], sys.argv[2]
# The Pong of Ping{nonce 1} when SERVING, as HAProxy's tcp-check expects it.
SERVING_PONG = bytes.fromhex("720408011001")


def free_base():
    """A base port whose cluster ports (cluster.sh's layout) are all free."""
    for _ in range(50):
        base = random.randrange(20000, 60000, 100)
        ports = [base, base + 1] + [base + 10 * i + k for i in (1, 2, 3) for k in (0, 1, 2)]
        socks = []
        try:
            for p in ports:
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise SystemExit("no free ports for the cluster")


def run(*args, check=True):
    r = subprocess.run([CLUSTER_SH, *args, "--dir", DIR], capture_output=True, text=True, timeout=90)
    if check and r.returncode != 0:
        raise AssertionError(f"cluster.sh {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def wait_for(what, fn, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)

    def send(self, req):
        body = req.SerializeToString()
        self.s.sendall(struct.pack(">I", len(body)) + body)

    def recv_raw(self, timeout=10):
        self.s.settimeout(timeout)
        head = self._exact(4)
        return self._exact(struct.unpack(">I", head)[0])

    def recv(self, timeout=10):
        r = pb.Response()
        r.ParseFromString(self.recv_raw(timeout))
        return r

    def _exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.s.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def call(self, req):
        self.send(req)
        r = self.recv()
        while not r.final:
            r = self.recv()
        return r

    def ping(self, nonce=1):
        return self.call(pb.Request(id=nonce, ping=pb.Ping(nonce=nonce)))

    def close(self):
        self.s.close()


def status_lines():
    r = run("status", check=False)
    return r.returncode, [line.split() for line in r.stdout.splitlines()]


def haproxy_rows():
    """The replicas' rows of HAProxy's stats socket, {server: {column: value}}."""
    lines = run("haproxy", "show stat").stdout.splitlines()
    head = lines[0].lstrip("# ").split(",")
    out = {}
    for line in lines[1:]:
        row = dict(zip(head, line.split(",")))
        if row.get("pxname") == "replicas" and row.get("svname", "").startswith("replica"):
            out[row["svname"]] = row
    return out


def haproxy_stat():
    """{server: (status, stot)} from HAProxy's stats socket."""
    return {sv: (row["status"], int(row["stot"] or 0)) for sv, row in haproxy_rows().items()}


def haproxy_scur():
    """{server: connections open now} from HAProxy's stats socket."""
    return {sv: int(row["scur"] or 0) for sv, row in haproxy_rows().items()}


def agent_word(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        data = b""
        while True:
            chunk = s.recv(64)
            if not chunk:
                return data.decode()
            data += chunk


def find_path(conn, rid):
    req = pb.Request(id=rid)
    req.find_path.scene = "town"
    req.find_path.start.cell.x, req.find_path.start.cell.y = 3, 4
    req.find_path.goal.cell.x, req.find_path.goal.cell.y = 30, 20
    return conn.call(req)


def scene_version(conn, rid):
    r = conn.call(pb.Request(id=rid, scene_info=pb.GetSceneInfo(scene="town")))
    assert r.status == pb.OK, r
    return r.scene_info.version


def main():
    base = BASE
    front, a1, a2 = base, base + 11, base + 21
    r = run("up", "--replicas", "2", "--base-port", str(base), "--pathd", PATHD)
    print(r.stdout.strip())

    rc, lines = status_lines()
    assert rc == 0, lines
    assert [l[0] for l in lines] == ["haproxy", "redis", "replica1", "replica2"], lines
    for name, pid, addr in lines:
        assert pid.isdigit() and os.path.exists(f"/proc/{pid}"), (name, pid)
        assert addr.startswith("127.0.0.1:"), addr
    print("status:", "; ".join(" ".join(l) for l in lines))
    pids = [int(l[1]) for l in lines]

    wait_for("HAProxy to mark both replicas UP",
             lambda: all(st == "UP" for st, _ in haproxy_stat().values()) and len(haproxy_stat()) == 2)

    # Ping through HAProxy: the bytes the health check matches, and SERVING.
    c = Conn(front)
    c.send(pb.Request(id=1, ping=pb.Ping(nonce=1)))
    raw = c.recv_raw()
    assert SERVING_PONG in raw, raw.hex()
    pong = pb.Response()
    pong.ParseFromString(raw)
    assert pong.pong.serving == pb.SERVING, pong
    r = find_path(c, 2)
    assert r.status == pb.OK and r.path.total_waypoints > 0, r
    before = scene_version(c, 3)
    upd = pb.Request(id=4)
    upd.update_cells.scene = "town"
    upd.update_cells.cells.cells.add(x=10, y=7)  # street: walkable until now
    upd.update_cells.op = pb.UPDATE_BLOCK
    r = c.call(upd)
    assert r.status == pb.OK and r.update.version == before + 1, r
    updated = r.update.version
    c.close()
    print(f"through HAProxy: Ping SERVING, FindPath OK, UpdateCells -> version {updated}")

    # Read-your-writes across replicas: an update through replica1's own
    # port, then a query on replica2's own port with min_version = the
    # version it made sees it (replica2 waits for its tail, or would answer
    # STALE_VERSION). On house, so town's versions below stay as they are.
    r1, r2 = Conn(base + 10), Conn(base + 20)
    upd = pb.Request(id=80)
    upd.update_cells.scene = "house"
    upd.update_cells.cells.cells.add(x=5, y=7)  # hall floor: walkable until now
    upd.update_cells.op = pb.UPDATE_BLOCK
    r = r1.call(upd)
    assert r.status == pb.OK and r.update.cells_changed == 1, r
    house_v = r.update.version
    r = r2.call(pb.Request(id=81, scene_info=pb.GetSceneInfo(scene="house", min_version=house_v)))
    assert r.status == pb.OK and r.scene_info.version >= house_v, r
    grid = pb.Request(id=82)
    grid.scene_grid.scene = "house"
    grid.scene_grid.row_start, grid.scene_grid.row_count = 7, 1
    grid.scene_grid.min_version = house_v
    r = r2.call(grid)
    assert r.status == pb.OK and r.scene_grid.version >= house_v and r.scene_grid.cells[5] == 0, r
    r1.close()
    r2.close()
    print(f"update on replica1's port -> house version {house_v}; replica2's port with that "
          "min_version: at it, the cell blocked")

    assert agent_word(a1) == "up ready\n" and agent_word(a2) == "up ready\n"

    # Two connections through HAProxy: leastconn gives each replica one -
    # once HAProxy holds no earlier connection open to either (one the
    # steps above closed may still count on a loaded machine, and then
    # both went to the other replica).
    wait_for("HAProxy to hold no connection to the replicas",
             lambda: list(haproxy_scur().values()) == [0, 0], timeout=10)
    x, y = Conn(front), Conn(front)
    assert x.ping(5).pong.serving == pb.SERVING and y.ping(6).pong.serving == pb.SERVING
    d1 = Conn(base + 10)  # straight to replica1
    assert d1.ping(7).pong.serving == pb.SERVING

    # Long searches across the forest, pipelined on replica1 with a Ping
    # behind them; once the Pong is back all of them have been read, and
    # the drain comes at once: every one must still be answered OK (the
    # answers owed arrive), and the connection hears DRAINING once,
    # unsolicited, in between.
    owed = list(range(100, 106))
    batch = b""
    for rid in owed:
        req = pb.Request(id=rid)
        req.find_path.scene = "forest"
        req.find_path.start.cell.x, req.find_path.start.cell.y = 4, 4
        req.find_path.goal.cell.x, req.find_path.goal.cell.y = 500, 500 - (rid - 100)
        body = req.SerializeToString()
        batch += struct.pack(">I", len(body)) + body
    body = pb.Request(id=99, ping=pb.Ping(nonce=99)).SerializeToString()
    d1.s.sendall(batch + struct.pack(">I", len(body)) + body)
    answers, drained_at, ok_after = {}, None, 0
    while True:
        r = d1.recv()
        if r.id == 99:
            break
        if r.final:
            answers[r.id] = r.status
    os.kill(pids[2], signal.SIGUSR1)  # what `cluster.sh drain 1` sends
    while len(answers) < len(owed) or drained_at is None:
        r = d1.recv()
        if r.id == 0:
            assert drained_at is None and r.status == pb.DRAINING and r.final, r
            drained_at = len(answers)
        elif r.final:
            assert r.id not in answers, r
            answers[r.id] = r.status
            ok_after += drained_at is not None
    assert answers == {rid: pb.OK for rid in owed}, answers
    print(f"drain with {len(owed)} searches read: all answered OK, {ok_after} of them after the DRAINING frame")
    # Exactly one of the two through HAProxy was on replica1.
    told, quiet = [], []
    for conn in (x, y):
        try:
            r = conn.recv(timeout=1.5)
            assert r.id == 0 and r.status == pb.DRAINING, r
            told.append(conn)
        except socket.timeout:
            quiet.append(conn)
    assert len(told) == 1 and len(quiet) == 1, (len(told), len(quiet))
    # On replica1 now: Ping says DRAINING_STATE, anything else DRAINING.
    assert d1.ping(8).pong.serving == pb.DRAINING_STATE
    r = find_path(d1, 9)
    assert r.id == 9 and r.status == pb.DRAINING, r
    r = find_path(told[0], 10)
    assert r.status == pb.DRAINING, r
    # replica2 serves on as before.
    assert find_path(quiet[0], 11).status == pb.OK
    assert agent_word(a1) == "drain\n" and agent_word(a2) == "up ready\n"
    # /readyz of replica1's metrics port: 503, draining; replica2's 200.
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{base + 12}/readyz", timeout=5)
        raise AssertionError("/readyz of a draining replica answered 200")
    except urllib.error.HTTPError as e:
        assert e.code == 503 and b"draining" in e.read(), e
    assert urllib.request.urlopen(f"http://127.0.0.1:{base + 22}/readyz", timeout=5).status == 200
    wait_for("HAProxy to put replica1 in DRAIN", lambda: haproxy_stat()["replica1"][0].startswith("DRAIN"))
    # New connections all go to replica2.
    st0 = haproxy_stat()
    fresh = [Conn(front) for _ in range(4)]
    for i, conn in enumerate(fresh):
        r = find_path(conn, 20 + i)
        assert r.status == pb.OK, r
    st1 = haproxy_stat()
    assert st1["replica1"][1] == st0["replica1"][1], (st0, st1)
    assert st1["replica2"][1] == st0["replica2"][1] + 4, (st0, st1)
    print(f"drained replica1: DRAINING on its connections, agent 'drain', HAProxy {st1['replica1'][0]}, "
          f"4 new connections all on replica2")
    for conn in fresh + [x, y, d1]:
        conn.close()

    run("drain", "1")  # a second drain changes nothing
    run("ready", "1")  # a signal: the replica takes it in its own time
    wait_for("replica1's agent to say ready", lambda: agent_word(a1) == "up ready\n", timeout=5)
    wait_for("HAProxy to put replica1 back UP", lambda: haproxy_stat()["replica1"][0] == "UP")

    # kill -9 replica2: HAProxy marks it down and replica1 serves alone.
    pid2 = pids[3]
    os.kill(pid2, signal.SIGKILL)
    wait_for("replica2 to be gone", lambda: not os.path.exists(f"/proc/{pid2}") or
             open(f"/proc/{pid2}/stat").read().split()[2] == "Z")
    rc, lines = status_lines()
    assert rc == 1 and lines[3] == ["replica2", "-", f"127.0.0.1:{base + 20}"], lines
    wait_for("HAProxy to mark replica2 DOWN", lambda: haproxy_stat()["replica2"][0].startswith("DOWN"))
    c = Conn(front)
    assert c.ping(30).pong.serving == pb.SERVING and find_path(c, 31).status == pb.OK
    c.close()

    run("start-replica", "2")
    rc, lines = status_lines()
    assert rc == 0 and lines[3][0] == "replica2" and lines[3][1].isdigit() and int(lines[3][1]) != pid2, lines
    pids[3] = int(lines[3][1])
    wait_for("HAProxy to mark replica2 UP again", lambda: haproxy_stat()["replica2"][0] == "UP")
    d2 = Conn(base + 20)
    assert d2.ping(40).pong.serving == pb.SERVING
    # It replayed the log on Redis at start: replica1's update is there.
    v = scene_version(d2, 41)
    assert v == updated, (v, updated)
    assert find_path(d2, 42).status == pb.OK
    d2.close()
    print(f"kill -9 replica2: HAProxy DOWN, served by replica1; start-replica 2: UP, town at version {v}")

    r = run("add-replica")
    rc, lines = status_lines()
    assert rc == 0 and [l[0] for l in lines][-1] == "replica3" and lines[-1][2] == f"127.0.0.1:{base + 30}", lines
    assert r.stdout.split()[:2] == lines[-1][:2], (r.stdout, lines)
    pids.append(int(lines[-1][1]))
    wait_for("HAProxy to mark the added replica3 UP", lambda: haproxy_stat().get("replica3", ("",))[0] == "UP")
    d3 = Conn(base + 30)
    assert d3.ping(50).pong.serving == pb.SERVING and scene_version(d3, 51) == updated
    d3.close()
    assert agent_word(base + 31) == "up ready\n"
    print(f"add-replica: replica3 UP in HAProxy, town at version {updated}")

    # Redis dies: replica3 refuses the update retryably and serves queries.
    def gone(pid):
        return not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"

    os.kill(pids[1], signal.SIGKILL)
    wait_for("redis to be gone", lambda: gone(pids[1]))
    d3 = Conn(base + 30)
    upd2 = pb.Request(id=60)
    upd2.update_cells.scene = "town"
    upd2.update_cells.cells.cells.add(x=11, y=7)
    upd2.update_cells.op = pb.UPDATE_BLOCK
    r = d3.call(upd2)
    assert r.status == pb.UNAVAILABLE, r
    assert scene_version(d3, 61) == updated and find_path(d3, 62).status == pb.OK
    r = run("start-redis")
    pids[1] = int(r.stdout.split()[1])
    upd2.id = 63
    r = d3.call(upd2)
    assert r.status == pb.OK and r.update.version == updated + 1, r
    d3.close()
    print(f"kill -9 redis: update UNAVAILABLE, queries OK; start-redis: update -> version {updated + 1}")

    # HAProxy dies: its clients' connections close; started again, it serves.
    c = Conn(front)
    assert c.ping(70).pong.serving == pb.SERVING
    os.kill(pids[0], signal.SIGKILL)
    try:
        c.recv(timeout=5)
        raise AssertionError("a connection through a dead HAProxy stayed open")
    except (ConnectionError, OSError):
        pass
    r = run("start-haproxy")
    pids[0] = int(r.stdout.split()[1])
    wait_for("HAProxy to mark the three replicas UP",
             lambda: [st for st, _ in haproxy_stat().values()] == ["UP"] * 3)
    c = Conn(front)
    assert c.ping(71).pong.serving == pb.SERVING and find_path(c, 72).status == pb.OK
    c.close()
    print("kill -9 haproxy: its connections closed; start-haproxy: 3 replicas UP, serving")

    run("down")
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z", pid
    print("down: no process left")
    assert_clean_logs(("replica1", "replica2", "replica3"))


def assert_clean_logs(names):
    """In a sanitizer build the replicas' logs hold its reports: none."""
    for name in names:
        with open(os.path.join(DIR, f"{name}.log")) as f:
            log = f.read()
        for mark in ("Sanitizer", "runtime error:"):
            assert mark not in log, f"{name}.log: {mark}"


def finish(ok, names):
    """The end of a cluster test (test_faults.py's too): the tails of the
    logs of names when it failed; whatever happened, nothing is left
    running and DIR is removed."""
    if not ok:
        for name in names:
            try:
                print(f"--- {name}.log (tail)", file=sys.stderr)
                with open(os.path.join(DIR, f"{name}.log")) as f:
                    print("".join(f.readlines()[-15:]), file=sys.stderr)
            except OSError:
                pass
    subprocess.run([CLUSTER_SH, "down", "--dir", DIR], capture_output=True, timeout=90)
    shutil.rmtree(DIR, ignore_errors=True)


if __name__ == "__main__":
    BASE = free_base()
    DIR = tempfile.mkdtemp(prefix="pathd-cluster-")
    ok = False
    try:
        main()
        ok = True
    finally:
        finish(ok, ("haproxy", "redis", "replica1", "replica2"))
    print("test_cluster: PASS")
