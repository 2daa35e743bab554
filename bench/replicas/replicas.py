"""Issue 32's replica targets, measured in one run on loopback (bench-replicas.sh runs it).

It starts its own redis-server (appendonly yes, appendfsync always, in a
temporary directory) and pathd replicas whose config has a
"log": {"redis": ...}, plus one standalone pathd (no log), all serving
den520d (tests/data/movingai) as scene "den", then measures:

 1. Update acknowledged vs a bare XADD: N sequential UpdateCells through one
    replica (the Python client, a cell blocked then opened again, so every
    update is a real change and a new version), beside N sequential XADDs
    of an entry the size of pathd's own (read back with XRANGE) to the same
    Redis from a minimal RESP client on a raw socket. The two alternate in
    blocks, so a noisy neighbour hits both alike. A Ping through the same
    client gives the client's own round trip; pathd_log_append_seconds
    (the replica's /metrics) gives the append's share.
 2. Catch-up of 100,000 updates: replica B serving, then SIGSTOP; 100,000
    updates through replica A (WINDOW in flight on one connection); SIGCONT B and time until
    B's pathd_replica_scene_version equals A's. Then a fresh replica
    started over the same log (snapshot_every is set above 100,000, so it
    reads the whole stream, no snapshot shortcut): time from exec to Ping
    SERVING, beside the same start over an empty log (loading the map).
 3. Path throughput under 1,000 updates/s: pathd-load against the
    standalone pathd while 1,000 updates/s are offered to it, and against
    replica B while 1,000 updates/s are offered through replica A (B applies
    them from its tail), then split over replicas A and C, then the
    standalone with no updates; the rows alternate, ROUNDS times each,
    medians compared. Each row also says how many versions/s the queried
    pathd really served during its load (SceneInfo before and after), and
    the CPU each process this script started used meanwhile (/proc/PID/stat
    utime + stime, seconds per second: who else the 2 cores served).
    Then the same rows again with replica B and the standalone each given
    a core of their own and every other process the rest (taskset): on
    one machine, what a deployment with a machine per pathd would see
    (rows 3i, 3bi, 3ci). Both are printed; neither replaces the other.

Every process it starts is on loopback ports it picked, and is stopped at the
end; it stops by itself. Needs /usr/bin/python3 with python3-protobuf and
pathd_pb2.py on PYTHONPATH (bench-replicas.sh sets it).

usage: replicas.py BUILD_DIR [--quick]
"""
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import pathd_client as pc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MAP = os.path.join(ROOT, "tests/data/movingai/maps/den520d.map")
SCEN = os.path.join(ROOT, "tests/data/movingai/scen/den520d.map.scen")
SCENE = "den"
PREFIX = "bench"

QUICK = "--quick" in sys.argv
ONLY3 = "--only3" in sys.argv   # target 3 alone (a shorter look at it)
N_SEQ = 300 if QUICK else 2000          # sequential round trips per kind (target 1)
N_CATCHUP = 10000 if QUICK else 100000  # target 2
WINDOW = 256                            # pipelined updates in flight while writing them
ROUNDS = 1 if QUICK else 3              # target 3 alternations
LOAD_SECS = 3 if QUICK else 5
UPDATE_RATE = 1000.0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, limit=30.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"replicas: nothing listens on 127.0.0.1:{port}")


def open_cells(count):
    """count open cells of den520d (the first ones, row by row)."""
    with open(MAP) as f:
        lines = f.read().split("\n")
    rows = lines[lines.index("map") + 1:]
    found = []
    for y, row in enumerate(rows):
        for x, ch in enumerate(row):
            if ch in ".G":
                found.append((x, y))
                if len(found) == count:
                    return found
    raise SystemExit("replicas: not enough open cells")


class Resp:
    """The least RESP client there is: one command at a time, replies parsed
    only as far as needed (bulk strings, arrays, integers, errors)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.sock.makefile("rb")

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self._reply()

    def _reply(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError(f"RESP: unexpected {line!r}")


class Cluster:
    def __init__(self, build):
        self.build = build
        self.pathd = os.path.join(build, "server/pathd")
        self.tmp = tempfile.mkdtemp(prefix="pathd-replicas-")
        self.procs = {}
        self.rport = free_port()

    def start_redis(self):
        args = ["redis-server", "--port", str(self.rport), "--bind", "127.0.0.1", "--dir", self.tmp,
                "--appendonly", "yes", "--appendfsync", "always", "--save", "",
                "--maxmemory-policy", "noeviction", "--daemonize", "no", "--logfile", "redis.log"]
        self.procs["redis"] = subprocess.Popen(args, cwd=self.tmp, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL)
        wait_port(self.rport)

    def config(self, name, with_log):
        port, mport = free_port(), free_port()
        cfg = {
            "listen": f"127.0.0.1:{port}",
            "metrics_listen": f"127.0.0.1:{mport}",
            "threads": 2,
            "log_level": "warn",
            "scenes": [{"name": SCENE, "map": MAP, "format": "movingai", "origin": [0, 0],
                        "cell_size": 1.0, "unit_sizes": [1]}],
        }
        if with_log:
            # snapshot_every above what the run writes: no snapshot shortcut,
            # no trim below a stopped replica (target 2 says what it times).
            cfg["log"] = {"redis": f"127.0.0.1:{self.rport}", "prefix": PREFIX,
                          "snapshot_every": 1000000}
        path = os.path.join(self.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path, port, mport

    def start_pathd(self, name, with_log=True, wait=True):
        path, port, mport = self.config(name, with_log)
        log = open(os.path.join(self.tmp, name + ".log"), "w")
        t0 = time.monotonic()
        p = subprocess.Popen([self.pathd, "--config", path], stdout=log, stderr=log)
        self.procs[name] = p
        node = {"name": name, "port": port, "mport": mport, "proc": p, "t0": t0,
                "addr": f"127.0.0.1:{port}"}
        if wait:
            wait_serving(node)
        return node

    def stop(self, name):
        p = self.procs.pop(name, None)
        if p and p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def close(self):
        for name in list(self.procs):
            self.stop(name)
        subprocess.run(["rm", "-rf", self.tmp])


def ping_serving(addr):
    try:
        s = socket.create_connection(addr, timeout=1)
    except OSError:
        return False
    try:
        req = pc.pb.Request()
        req.id = 1
        req.ping.SetInParent()
        body = req.SerializeToString()
        s.sendall(len(body).to_bytes(4, "big") + body)
        hdr = b""
        while len(hdr) < 4:
            chunk = s.recv(4 - len(hdr))
            if not chunk:
                return False
            hdr += chunk
        n = int.from_bytes(hdr, "big")
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                return False
            data += chunk
        resp = pc.pb.Response()
        resp.ParseFromString(data)
        return resp.pong.serving == pc.pb.SERVING if resp.HasField("pong") else False
    except OSError:
        return False
    finally:
        s.close()


def wait_serving(node, limit=60.0):
    """Seconds from the node's exec to its first Ping answered SERVING."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if ping_serving(("127.0.0.1", node["port"])):
            return time.monotonic() - node["t0"]
        if node["proc"].poll() is not None:
            break
        time.sleep(0.005)
    raise SystemExit(f"replicas: {node['name']} did not serve; see its log")


def metrics(node):
    with urllib.request.urlopen(f"http://127.0.0.1:{node['mport']}/metrics", timeout=5) as r:
        return r.read().decode()


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def scene_version(node):
    return int(metric(metrics(node), "pathd_replica_scene_version") or 0)


def histogram_mean(text, name):
    s, c = metric(text, name + "_sum"), metric(text, name + "_count")
    return (s, c)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


# ---- target 1 -------------------------------------------------------------------

def target1(cl, a):
    client = pc.PathdClient(a["addr"])
    cells = open_cells(1)
    cell = cells[0]
    r = Resp(cl.rport)
    # pathd's own entry for one 1-cell update: XADD one of the same size.
    client.update_cells(SCENE, cells=[cell], op="block")
    client.update_cells(SCENE, cells=[cell], op="pass")
    entries = r.call("XREVRANGE", f"{PREFIX}:{{{SCENE}}}:log", "+", "-", "COUNT", 1)
    fields = entries[0][1]
    size = sum(len(x) for x in fields)
    xkey = f"{PREFIX}:xadd-probe"
    for _ in range(50):   # warm both
        client.ping()
        r.call("XADD", xkey, "*", *fields)
    before = metrics(a)
    upd, xadd, ping = [], [], []
    op = "block"
    # One of each per round, so the three see the same moment of a shared
    # disk: an fsync on this machine takes from 0.5 to 5 ms from one second
    # to the next, and blocks of one kind would measure the neighbours.
    for _ in range(N_SEQ):
        t = time.perf_counter()
        client.update_cells(SCENE, cells=[cell], op=op)
        upd.append(time.perf_counter() - t)
        op = "pass" if op == "block" else "block"
        t = time.perf_counter()
        r.call("XADD", xkey, "*", *fields)
        xadd.append(time.perf_counter() - t)
        t = time.perf_counter()
        client.ping()
        ping.append(time.perf_counter() - t)
    after = metrics(a)
    s0, c0 = histogram_mean(before, "pathd_log_append_seconds")
    s1, c1 = histogram_mean(after, "pathd_log_append_seconds")
    append_mean = (s1 - s0) / (c1 - c0) if c1 and c1 > c0 else float("nan")
    # Cross-check of the XADD figure with redis-benchmark (hiredis, C), right after.
    out = subprocess.run(["redis-benchmark", "-p", str(cl.rport), "-c", "1", "-n", str(min(N_SEQ, 1000)),
                          "--csv", "XADD", xkey, "*"] + ["x" * len(f) if i % 2 else f.decode() for i, f in enumerate(fields)],
                         capture_output=True, text=True).stdout.strip().splitlines()
    rb = float(out[-1].split(",")[4].strip('"')) * 1000 if len(out) >= 2 else float("nan")
    r.call("DEL", xkey)
    client.close()
    us = lambda v: v * 1e6
    res = {
        "n": N_SEQ, "entry_bytes": size,
        "update_p50_us": us(pct(upd, 50)), "update_p99_us": us(pct(upd, 99)),
        "xadd_p50_us": us(pct(xadd, 50)), "xadd_p99_us": us(pct(xadd, 99)),
        "ping_p50_us": us(pct(ping, 50)), "append_mean_us": us(append_mean),
        "redis_benchmark_xadd_p50_us": rb,
    }
    res["ratio"] = res["update_p50_us"] / res["xadd_p50_us"]
    res["ratio_less_client"] = (res["update_p50_us"] - res["ping_p50_us"]) / res["xadd_p50_us"]
    return res


# ---- target 2 -------------------------------------------------------------------

def write_updates(a, n):
    """n 1-cell updates through a, WINDOW in flight on one connection; each
    toggles one of 64 cells, so every one is a real change."""
    client = pc.PathdClient(a["addr"], timeout=60)
    cells = open_cells(64)
    state = [False] * len(cells)
    sent = got = bad = 0
    t = time.monotonic()
    while got < n:
        while sent < n and sent - got < WINDOW:
            i = sent % len(cells)
            state[i] = not state[i]
            client.send("update_cells", SCENE, cells=[cells[i]], op="block" if state[i] else "pass")
            sent += 1
        ans = client.recv(timeout=60)
        got += 1
        status = ans.get("status") if isinstance(ans, dict) else getattr(ans, "status", "OK")
        if status != "OK":
            bad += 1
    secs = time.monotonic() - t
    client.close()
    return secs, bad


def wait_version(node, version, limit=120.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if scene_version(node) >= version:
            return
        time.sleep(0.002)
    raise SystemExit(f"replicas: {node['name']} did not reach version {version}")


def target2(cl, a, b):
    base = scene_version(a)
    wait_version(b, base)
    b["proc"].send_signal(signal.SIGSTOP)
    wsecs, bad = write_updates(a, N_CATCHUP)
    va = scene_version(a)
    t = time.monotonic()
    b["proc"].send_signal(signal.SIGCONT)
    wait_version(b, va)
    catchup = time.monotonic() - t
    # A fresh replica over the same log (whole stream, no snapshot), beside
    # a fresh one over an empty log: the map load alone. The empty-log one
    # gets a Redis of its own prefix-wise: another prefix has no streams.
    c = cl.start_pathd("fresh", wait=False)
    fresh = wait_serving(c)
    vc = scene_version(c)
    cl.stop("fresh")
    empty_path, eport, emport = cl.config("replicaE", True)
    with open(empty_path) as f:
        cfg = json.load(f)
    cfg["log"]["prefix"] = PREFIX + "-empty"
    with open(empty_path, "w") as f:
        json.dump(cfg, f)
    t0 = time.monotonic()
    p = subprocess.Popen([cl.pathd, "--config", empty_path], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    cl.procs["replicaE"] = p
    empty = wait_serving({"name": "replicaE", "port": eport, "proc": p, "t0": t0})
    cl.stop("replicaE")
    return {"n": N_CATCHUP, "write_secs": wsecs, "write_rate": N_CATCHUP / wsecs, "write_bad": bad,
            "version_a": va, "catchup_secs": catchup, "fresh_secs": fresh, "fresh_version": vc,
            "empty_secs": empty, "replay_secs": fresh - empty}


# ---- target 3 -------------------------------------------------------------------

class Updater(threading.Thread):
    """UPDATE_RATE updates/s in all, split evenly over addrs, open loop
    (asyncio: each update is due at start + i / rate, sent then whether or
    not earlier ones were answered), until stop is set."""

    def __init__(self, addrs):
        super().__init__(daemon=True)
        self.addrs = addrs
        self.stop_flag = threading.Event()
        self.sent = self.ok = 0
        self.resends = 0   # answers the clients retried (UNAVAILABLE, BEHIND, ...): client.retries

    def run(self):
        asyncio.run(self._run())

    async def _run(self):
        clients = [pc.AsyncPathdClient(addr) for addr in self.addrs]
        for c in clients:
            await c.connect()
        cells = open_cells(64)
        state = [False] * len(cells)
        pending = set()
        t0 = time.monotonic()
        i = 0

        async def one(client, cell, op):
            try:
                await client.update_cells(SCENE, cells=[cell], op=op)
                self.ok += 1
            except pc.PathdError:
                pass

        while not self.stop_flag.is_set():
            due = t0 + i / UPDATE_RATE
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
                continue
            k = i % len(cells)
            state[k] = not state[k]
            task = asyncio.ensure_future(one(clients[i % len(clients)], cells[k],
                                             "block" if state[k] else "pass"))
            pending.add(task)
            task.add_done_callback(pending.discard)
            i += 1
            self.sent = i
        if pending:
            await asyncio.wait(pending, timeout=30)
        self.resends = sum(sum(c.retries.values()) for c in clients)
        for c in clients:
            await c.close()


def cpu_seconds(procs):
    """utime + stime of each process (name -> Popen), of the pathd-load
    runs and of this script, seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    t = os.times()   # pathd-load (a child waited for) and this script (its updater)
    out = {"pathd-load": t.children_user + t.children_system, "script": t.user + t.system}
    for name, p in procs.items():
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[name] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return out


def version_of(node):
    """The scene's version as the node serves it (SceneInfo)."""
    client = pc.PathdClient(node["addr"])
    try:
        return int(client.scene_info(SCENE).version)
    finally:
        client.close()


def load(cl, node):
    out = subprocess.run([os.path.join(cl.build, "bench/load/pathd-load"), "--server", node["addr"],
                          "--scene", SCENE, "--scen", SCEN, "--every", "5", "-c", "2", "-P", "16",
                          "-d", str(LOAD_SECS), "--quiet", "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def pin(pid, cpus):
    """Every thread of process PID (and those it starts later) on CPUS."""
    subprocess.run(["taskset", "-a", "-p", "-c", ",".join(map(str, cpus)), str(pid)],
                   check=True, stdout=subprocess.DEVNULL)


def isolate(cl, queried, on):
    """Target 3 as deployed, on one machine: the queried pathds (replica B,
    the standalone) get a core of their own and everything else (Redis,
    replicas A and C, pathd-load, this script's updater) the others, as if
    each pathd had its machine. Off: every process on every core again."""
    cpus = sorted(os.sched_getaffinity(0) if on else range(os.cpu_count()))
    mine, rest = ([cpus[-1]], cpus[:-1]) if on else (cpus, cpus)
    for name, p in cl.procs.items():
        pin(p.pid, mine if p in queried else rest)
    os.sched_setaffinity(0, rest)   # this thread: the updater's and pathd-load inherit it


def target3(cl, a, b, solo, c):
    """Rows: the standalone with the updates sent to it; replica b with the
    updates sent through replica a (and, as a second row, split over a and
    c: their appends of the one scene race on the compare-and-set, so the
    loser's are refused until its tail has the winner's); the standalone
    with no updates. A replica appends a scene's updates that queue up
    during one append round trip together, in one pipeline, so one replica
    carries more than 1 / (round trip) updates a second. Each row's "applied" is the versions the
    queried pathd served during the load, per second: the update load it
    really carried."""
    kinds = (("solo", solo, [solo]), ("replica", b, [a]), ("replica_2via", b, [a, c]),
             ("solo_idle", solo, []))
    rows = {k[0]: [] for k in kinds}
    for _ in range(ROUNDS):
        for kind, target, via in kinds:
            up = Updater([n["addr"] for n in via]) if via else None
            if up:
                up.start()
                time.sleep(0.5)   # the updates are flowing before the load starts
            # The version of the pathd the updates go through first too: the
            # rate the log took them at, beside the rate the target applied.
            w0 = version_of(via[0]) if via else 0
            m0 = metrics(via[0]) if via and "mport" in via[0] and via[0] is not solo else None
            v0, t0 = version_of(target), time.monotonic()
            cpu0 = cpu_seconds(cl.procs)
            res = load(cl, target)
            cpu1 = cpu_seconds(cl.procs)
            v1, t1 = version_of(target), time.monotonic()
            w1 = version_of(via[0]) if via else 0
            append_ms = None
            if m0 is not None:   # the first via's mean append round trip during the load
                s0, c0 = histogram_mean(m0, "pathd_log_append_seconds")
                s1, c1 = histogram_mean(metrics(via[0]), "pathd_log_append_seconds")
                append_ms = (s1 - s0) / (c1 - c0) * 1e3 if c1 > c0 else None
            if up:
                up.stop_flag.set()
                up.join()
            # The updater's whole run (from 0.5 s before the load to its
            # end): updates sent, answered OK after the clients' retries, and
            # the retries (a replica that lost the log's compare-and-set to
            # another's builds the update again itself, up to
            # limits.max_append_attempts, before answering UNAVAILABLE).
            upd = {"sent": up.sent, "ok": up.ok, "resends": up.resends} if up else None
            rows[kind].append({"throughput": res["ok_throughput"], "statuses": res["statuses"], "updates": upd,
                               "p50_us": res["latency_us"].get("p50"),
                               "applied_per_s": (v1 - v0) / (t1 - t0),
                               "acked_per_s": (w1 - w0) / (t1 - t0), "append_mean_ms": append_ms,
                               "cpu_per_s": {k: (cpu1[k] - cpu0[k]) / (t1 - t0) for k in cpu1 if k in cpu0}})
    med = {k: statistics.median(r["throughput"] for r in v) for k, v in rows.items()}
    applied = {k: statistics.median(r["applied_per_s"] for r in v) for k, v in rows.items()}
    acked = {k: statistics.median(r["acked_per_s"] for r in v) for k, v in rows.items()}
    appends = {k: statistics.median(r["append_mean_ms"] for r in v) for k, v in rows.items()
               if v[0]["append_mean_ms"] is not None}
    cpu = {k: {name: statistics.median(r["cpu_per_s"].get(name, 0.0) for r in v) for name in v[0]["cpu_per_s"]}
           for k, v in rows.items()}
    return {"rows": rows, "median": med, "applied": applied, "acked": acked, "append_mean_ms": appends, "cpu": cpu,
            "ratio": med["replica"] / med["solo"], "ratio_2via": med["replica_2via"] / med["solo"]}


def target3_both(cl, a, b, solo, c):
    """Target 3 shared, then isolated (on a machine with 2 cores or more)."""
    r3 = target3(cl, a, b, solo, c)
    print("target 3: " + json.dumps(r3), flush=True)
    r3i = None
    if len(os.sched_getaffinity(0)) >= 2:
        isolate(cl, (b["proc"], solo["proc"]), True)
        try:
            r3i = target3(cl, a, b, solo, c)
        finally:
            isolate(cl, (), False)
        print("target 3, isolated: " + json.dumps(r3i), flush=True)
    return r3, r3i


def main():
    build = sys.argv[1]
    cl = Cluster(build)
    try:
        cl.start_redis()
        a = cl.start_pathd("replicaA")
        b = cl.start_pathd("replicaB")
        solo = cl.start_pathd("standalone", with_log=False)
        up = open("/proc/loadavg").read().split()[:3]
        print(f"load average at start: {' '.join(up)}", flush=True)
        if ONLY3:
            target3_both(cl, a, b, solo, cl.start_pathd("replicaC"))
            return
        r1 = target1(cl, a)
        print("target 1: " + json.dumps(r1), flush=True)
        r2 = target2(cl, a, b)
        print("target 2: " + json.dumps(r2), flush=True)
        c = cl.start_pathd("replicaC")
        r3, r3i = target3_both(cl, a, b, solo, c)
        up2 = open("/proc/loadavg").read().split()[:3]
        print(f"load average at end: {' '.join(up2)}", flush=True)
        print()
        print("| target | measured | anchor (same run) | ratio | goal | met |")
        print("|---|---|---|---|---|---|")
        print(f"| 1. update acknowledged p50 (1 replica, sequential, n={r1['n']}) | "
              f"{r1['update_p50_us']:.0f} us (p99 {r1['update_p99_us']:.0f}) | bare XADD p50 "
              f"{r1['xadd_p50_us']:.0f} us (p99 {r1['xadd_p99_us']:.0f}), {r1['entry_bytes']} B entry | "
              f"{r1['ratio']:.2f}x ({r1['ratio_less_client']:.2f}x less the client's Ping p50 "
              f"{r1['ping_p50_us']:.0f} us; redis-benchmark XADD p50 {r1['redis_benchmark_xadd_p50_us']:.0f} us) | <= 3x | {'yes' if r1['ratio'] <= 3 else 'no'} |")
        print(f"| 2a. running replica catches up {r2['n']:,} updates (SIGSTOP, SIGCONT) | "
              f"{r2['catchup_secs']:.3f} s | - | - | <= 1 s | {'yes' if r2['catchup_secs'] <= 1 else 'no'} |")
        print(f"| 2b. fresh replica replays them (exec to SERVING, no snapshot) | {r2['fresh_secs']:.3f} s | "
              f"over an empty log {r2['empty_secs']:.3f} s | replay {r2['replay_secs']:.3f} s | <= 1 s | "
              f"{'yes' if r2['replay_secs'] <= 1 else 'no'} |")
        m, ap = r3["median"], r3["applied"]
        print(f"| 3. replica B path throughput, 1,000 updates/s offered through replica A (median of {ROUNDS}) | "
              f"{m['replica']:.0f} req/s (A served {r3['acked']['replica']:.0f} versions/s, B applied {ap['replica']:.0f}/s) | standalone, 1,000 updates/s "
              f"offered to it: {m['solo']:.0f} req/s (applied {ap['solo']:.0f}/s) | {r3['ratio']:.2f}x | >= 0.9x | "
              f"{'yes' if r3['ratio'] >= 0.9 else 'no'} |")
        print(f"| 3b. the same, updates split over replicas A and C | {m['replica_2via']:.0f} req/s (A served "
              f"{r3['acked']['replica_2via']:.0f} versions/s, B applied "
              f"{ap['replica_2via']:.0f}/s) | the same standalone | {r3['ratio_2via']:.2f}x | >= 0.9x | "
              f"{'yes' if r3['ratio_2via'] >= 0.9 else 'no'} |")
        print(f"(target 3: replica A's mean log append during the load, ms: {json.dumps(r3['append_mean_ms'])})")
        for kind in ("replica", "replica_2via"):
            ups = [r["updates"] for r in r3["rows"][kind]]
            print(f"(target 3, row {kind}: updates per round, sent/OK/client resends: "
                  + ", ".join(f"{u['sent']}/{u['ok']}/{u['resends']}" for u in ups) + ")")
        print(f"| 3c. standalone, no updates (median of {ROUNDS}) | {m['solo_idle']:.0f} req/s | - | - | - | - |")
        for kind in ("solo", "replica", "replica_2via", "solo_idle"):
            split = ", ".join(f"{name} {v:.2f}" for name, v in sorted(r3["cpu"][kind].items()) if v >= 0.005)
            print(f"(target 3, row {kind}: CPU s/s of the processes this run started, median: {split})")
        if r3i:
            mi, api = r3i["median"], r3i["applied"]
            print(f"| 3i. as 3, replica B and the standalone each on a core of their own, the rest on the other "
                  f"(median of {ROUNDS}) | {mi['replica']:.0f} req/s (A served {r3i['acked']['replica']:.0f} "
                  f"versions/s, B applied {api['replica']:.0f}/s) | standalone likewise, 1,000 updates/s offered "
                  f"to it: {mi['solo']:.0f} req/s (applied {api['solo']:.0f}/s) | {r3i['ratio']:.2f}x | >= 0.9x | "
                  f"{'yes' if r3i['ratio'] >= 0.9 else 'no'} |")
            print(f"| 3bi. as 3b, isolated likewise | {mi['replica_2via']:.0f} req/s (A served "
                  f"{r3i['acked']['replica_2via']:.0f} versions/s, B applied {api['replica_2via']:.0f}/s) | "
                  f"the same standalone | {r3i['ratio_2via']:.2f}x | >= 0.9x | "
                  f"{'yes' if r3i['ratio_2via'] >= 0.9 else 'no'} |")
            print(f"| 3ci. standalone alone on its core, no updates | {mi['solo_idle']:.0f} req/s | - | - | - | - |")
            for kind in ("solo", "replica", "replica_2via", "solo_idle"):
                split = ", ".join(f"{name} {v:.2f}" for name, v in sorted(r3i["cpu"][kind].items()) if v >= 0.005)
                print(f"(target 3 isolated, row {kind}: CPU s/s, median: {split})")
        print(f"({r2['n']:,} updates written through replica A in {r2['write_secs']:.1f} s, "
              f"{r2['write_rate']:.0f}/s, {r2['write_bad']} not OK)")
    finally:
        cl.close()


if __name__ == "__main__":
    main()
